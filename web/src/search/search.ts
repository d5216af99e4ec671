/**
 * In-page search of stored backups, as named stages:
 *
 * 1. **prepare** — the versions in scope, their manifests (file recipes) and where every
 *    chunk is stored (`GET containers`); chunk lengths come from the container tables.
 * 2. DedupSearch (Elias et al., FAST '22, Alg. 1):
 *    - **physical** — each container holding a chunk in scope is read once, as one byte
 *      range, by one of the workers, which decodes and scans every chunk (wasm-core's
 *      `ContainerScan`); tiny records go to IndexedDB;
 *    - **logical** — one worker merges the result databases and walks the recipes
 *      (`RecipeSearch`), fetching tiny records only next to `n - 1` partials.
 *    The naive baseline instead reassembles every file from `chunks/get` and scans it
 *    (**scan**), so it reads each chunk as often as files reference it.
 *
 * Both return the same matches; the page can run both and compare them.
 */
import type { Api, ManifestEntry } from '../api/client';
import { FP_LEN, hexToBytes } from '../backup/hex';
import type { ContainerJob, DbStats, FileBatch, LogicalStats, PhysicalStats, SearchQuery } from './protocol';
import { chunkLocations, type StoredChunkLoc } from '../restore/restore';
import { TinyStore } from './tinystore';
import type { SearchWorkers } from './workers';

/** Keywords may be as long as the minimum chunk size of the default chunker (§3.1). */
export const MAX_KEYWORD_LEN = 2048;

export interface SearchScope {
  /** Version ids to search; `null`: all. */
  versions: number[] | null;
  /** Only files whose path contains this (case-insensitive); empty: all. */
  pathFilter: string;
}

export interface SearchFile {
  id: number;
  version: number;
  source: string;
  path: string;
  size: number;
  recipe: string[];
  lengths: Uint32Array;
}

export interface Hit {
  keyword: number;
  offset: number;
}

export interface FileHits {
  file: SearchFile;
  hits: Hit[];
}

export interface SearchOutcome {
  engine: 'dedup' | 'naive';
  keywords: Uint8Array[];
  /** Files with at least one hit, by version then path; hits by offset then keyword. */
  results: FileHits[];
  matches: number;
  filesSearched: number;
  logicalBytes: number;
  /** Milliseconds per stage (prepare, physical, logical / prepare, scan). */
  phaseMs: Record<string, number>;
  totalMs: number;
  /** Bytes fetched from the server for the search itself (stored form). */
  storedBytesRead: number;
  physical?: PhysicalStats & { containers: number };
  logical?: LogicalStats;
  db?: DbStats;
  tinyFetched?: number;
  /** Logical bytes the naive scan read. */
  naiveBytes?: number;
  /** What prepare found (the files searched), for snippets. */
  files: SearchFile[];
}

export interface SearchProgress {
  phase: string;
  done: number;
  total: number;
}

interface Prepared {
  files: SearchFile[];
  locs: Map<string, StoredChunkLoc>;
  /** Sum of the files' sizes. */
  logicalBytes: number;
}

async function mapLimit<T, R>(items: T[], limit: number, f: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await f(items[i]);
      }
    }),
  );
  return out;
}

async function prepare(api: Api, scope: SearchScope, progress: (p: SearchProgress) => void): Promise<Prepared> {
  const all = await api.versions();
  const chosen = scope.versions ? all.filter((v) => scope.versions!.includes(v.id)) : all;
  if (scope.versions && chosen.length !== scope.versions.length)
    throw new Error('a version in the scope no longer exists; reload the list');
  let loaded = 0;
  progress({ phase: 'prepare', done: 0, total: chosen.length });
  const [manifests, locs] = await Promise.all([
    mapLimit(chosen, 4, async (v) => {
      const m = await api.version(v.id);
      progress({ phase: 'prepare', done: ++loaded, total: chosen.length });
      return m;
    }),
    chunkLocations(api),
  ]);
  const filter = scope.pathFilter.trim().toLowerCase();
  const files: SearchFile[] = [];
  for (const m of manifests) {
    for (const e of m.manifest.entries as ManifestEntry[]) {
      if (e.kind !== 'file' || e.recipe.length === 0) continue;
      if (filter && !e.path.toLowerCase().includes(filter)) continue;
      const lengths = new Uint32Array(e.recipe.length);
      e.recipe.forEach((fp, i) => {
        const loc = locs.get(fp);
        if (!loc) throw new Error(`version ${m.id}: ${e.path} references chunk ${fp}, which the server does not list`);
        lengths[i] = loc.rawLen;
      });
      files.push({
        id: files.length,
        version: m.id,
        source: m.source,
        path: e.path,
        size: e.size,
        recipe: e.recipe,
        lengths,
      });
    }
  }
  return { files, locs, logicalBytes: files.reduce((n, f) => n + f.size, 0) };
}

/** The files' recipes as typed arrays for a worker. */
function batch(files: SearchFile[]): FileBatch {
  const total = files.reduce((n, f) => n + f.recipe.length, 0);
  const fps = new Uint8Array(total * FP_LEN);
  const out: FileBatch = {
    ids: new Uint32Array(files.length),
    counts: new Uint32Array(files.length),
    fps,
    lengths: new Uint32Array(total),
  };
  let at = 0;
  files.forEach((f, k) => {
    out.ids[k] = f.id;
    out.counts[k] = f.recipe.length;
    for (let j = 0; j < f.recipe.length; j++, at++) {
      hexToBytes(f.recipe[j], fps, at * FP_LEN);
      out.lengths[at] = f.lengths[j];
    }
  });
  return out;
}

/** One job per container that holds a chunk in scope: the byte range covering those chunks. */
function containerJobs(p: Prepared): ContainerJob[] {
  const byContainer = new Map<number, [string, StoredChunkLoc][]>();
  const seen = new Set<string>();
  for (const f of p.files)
    for (const fp of f.recipe) {
      if (seen.has(fp)) continue;
      seen.add(fp);
      const loc = p.locs.get(fp)!;
      let list = byContainer.get(loc.container);
      if (!list) byContainer.set(loc.container, (list = []));
      list.push([fp, loc]);
    }
  const jobs: ContainerJob[] = [];
  for (const [id, list] of [...byContainer].sort((a, b) => a[0] - b[0])) {
    list.sort((a, b) => a[1].offset - b[1].offset); // storage order
    const n = list.length;
    const fps = new Uint8Array(n * FP_LEN);
    const job: ContainerJob = {
      id,
      start: list[0][1].offset,
      end: Math.max(...list.map(([, l]) => l.offset + l.storedLen)),
      fps,
      offsets: new Float64Array(n),
      storedLens: new Uint32Array(n),
      codecs: new Uint8Array(n),
      rawLens: new Uint32Array(n),
    };
    list.forEach(([fp, l], k) => {
      hexToBytes(fp, fps, k * FP_LEN);
      job.offsets[k] = l.offset;
      job.storedLens[k] = l.storedLen;
      job.codecs[k] = l.codec;
      job.rawLens[k] = l.rawLen;
    });
    jobs.push(job);
  }
  return jobs;
}

function collect(files: SearchFile[], matches: Float64Array[]): FileHits[] {
  const byFile = new Map<number, Hit[]>();
  for (const m of matches)
    for (let i = 0; i < m.length; i += 3) {
      let hits = byFile.get(m[i]);
      if (!hits) byFile.set(m[i], (hits = []));
      hits.push({ keyword: m[i + 1], offset: m[i + 2] });
    }
  const out = [...byFile].map(([id, hits]) => ({
    file: files[id],
    hits: hits.sort((a, b) => a.offset - b.offset || a.keyword - b.keyword),
  }));
  return out.sort(
    (a, b) => a.file.version - b.file.version || (a.file.path < b.file.path ? -1 : a.file.path > b.file.path ? 1 : 0),
  );
}

async function begin(api: Api, workers: SearchWorkers, query: SearchQuery, searchId: string): Promise<Uint8Array[]> {
  const server = { base: api.base || location.origin, repo: api.repo, token: api.token };
  const answers = await Promise.all(
    Array.from({ length: workers.size }, (_, w) =>
      workers.call(w, 'begin', { query, maxKeywordLen: MAX_KEYWORD_LEN, searchId, server }),
    ),
  );
  return answers[0].keywords;
}

/** Runs `jobs` on the workers, two in flight per worker (one downloads while one is scanned). */
async function scatter<J>(
  workers: SearchWorkers,
  jobs: J[],
  run: (w: number, job: J) => Promise<void>,
  onDone: () => void,
) {
  let next = 0;
  await Promise.all(
    Array.from({ length: workers.size * 2 }, async (_, lane) => {
      const w = lane % workers.size;
      while (next < jobs.length) {
        await run(w, jobs[next++]);
        onDone();
      }
    }),
  );
}

type Engine = (
  searchId: string,
  api: Api,
  workers: SearchWorkers,
  query: SearchQuery,
  scope: SearchScope,
  progress: (p: SearchProgress) => void,
) => Promise<SearchOutcome>;

/**
 * The server's mover and prune delete containers they have emptied (docs/STORAGE.md): one
 * listed when the search prepared can be gone when a worker reads it. The chunks are then
 * in other containers, which a fresh listing names.
 */
const CONTAINER_GONE = /no container \d+ in this repository/;
const ATTEMPTS = 3;

/**
 * Runs `engine` under a fresh search id; its tiny records are removed afterwards. A search
 * that read a container the server has since moved starts over from a new listing.
 */
function withSearchId(engine: Engine) {
  return async (...args: Parameters<Engine> extends [string, ...infer Rest] ? Rest : never) => {
    for (let attempt = 1; ; attempt++) {
      const searchId = `${Date.now()}-${Math.random().toString(36).slice(2)}`;
      try {
        return await engine(searchId, ...args);
      } catch (e) {
        if (attempt < ATTEMPTS && e instanceof Error && CONTAINER_GONE.test(e.message)) continue;
        throw e;
      } finally {
        await TinyStore.remove(searchId).catch(() => undefined); // only space: never fail a search for it
      }
    }
  };
}

/** DedupSearch: prepare, physical phase, logical phase. */
export const dedupSearch = withSearchId(dedupSearchAs);
/** The naive search: prepare, then every file reassembled and scanned. */
export const naiveSearch = withSearchId(naiveSearchAs);

async function dedupSearchAs(
  searchId: string,
  api: Api,
  workers: SearchWorkers,
  query: SearchQuery,
  scope: SearchScope,
  progress: (p: SearchProgress) => void,
): Promise<SearchOutcome> {
  const t0 = performance.now();
  const keywords = await begin(api, workers, query, searchId);
  const prepared = await prepare(api, scope, progress);
  const t1 = performance.now();

  const jobs = containerJobs(prepared);
  let done = 0;
  let storedBytesRead = 0;
  progress({ phase: 'physical', done: 0, total: jobs.length });
  await scatter(
    workers,
    jobs,
    async (w, job) => {
      const r = await workers.call(w, 'scan', job);
      storedBytesRead += r.storedBytes;
    },
    () => progress({ phase: 'physical', done: ++done, total: jobs.length }),
  );
  const finished = await Promise.all(
    Array.from({ length: workers.size }, (_, w) => workers.call(w, 'finishScan', null)),
  );
  const t2 = performance.now();

  progress({ phase: 'logical', done: 0, total: prepared.files.length });
  const files = batch(prepared.files);
  const dbs = finished.map((f) => f.db);
  const r = await workers.call(
    0,
    'logical',
    { dbs, files },
    { transfer: [...dbs.map((d) => d.buffer), files.fps.buffer, files.lengths.buffer] },
  );
  progress({ phase: 'logical', done: prepared.files.length, total: prepared.files.length });
  const t3 = performance.now();

  const physical = finished.reduce(
    (a, f) => ({
      chunks: a.chunks + f.stats.chunks,
      bytes: a.bytes + f.stats.bytes,
      exactMatches: a.exactMatches + f.stats.exactMatches,
      tinyRecords: a.tinyRecords + f.stats.tinyRecords,
      tinyBytes: a.tinyBytes + f.stats.tinyBytes,
      containers: a.containers,
    }),
    { chunks: 0, bytes: 0, exactMatches: 0, tinyRecords: 0, tinyBytes: 0, containers: jobs.length },
  );
  const results = collect(prepared.files, [r.matches]);
  return {
    engine: 'dedup',
    keywords,
    results,
    matches: r.matches.length / 3,
    filesSearched: prepared.files.length,
    logicalBytes: prepared.logicalBytes,
    phaseMs: { prepare: t1 - t0, physical: t2 - t1, logical: t3 - t2 },
    totalMs: t3 - t0,
    storedBytesRead,
    physical,
    logical: r.stats,
    db: r.db,
    tinyFetched: r.tinyFetched,
    files: prepared.files,
  };
}

/**
 * Files per naive job: about 1/8 of each worker's share, within [256 KiB, 8 MiB] (a big file
 * is a job on its own): enough jobs to balance the workers, few enough to keep requests large.
 */
function naiveJobBytes(total: number, workers: number): number {
  return Math.min(8 << 20, Math.max(256 << 10, total / (workers * 8)));
}

async function naiveSearchAs(
  searchId: string,
  api: Api,
  workers: SearchWorkers,
  query: SearchQuery,
  scope: SearchScope,
  progress: (p: SearchProgress) => void,
): Promise<SearchOutcome> {
  const t0 = performance.now();
  const keywords = await begin(api, workers, query, searchId);
  const prepared = await prepare(api, scope, progress);
  const t1 = performance.now();

  const jobBytes = naiveJobBytes(prepared.logicalBytes, workers.size);
  const jobs: SearchFile[][] = [];
  let cur: SearchFile[] = [];
  let bytes = 0;
  for (const f of prepared.files) {
    cur.push(f);
    bytes += f.size;
    if (bytes >= jobBytes) {
      jobs.push(cur);
      cur = [];
      bytes = 0;
    }
  }
  if (cur.length) jobs.push(cur);
  const matches: Float64Array[] = [];
  let storedBytesRead = 0;
  let naiveBytes = 0;
  let done = 0;
  progress({ phase: 'scan', done: 0, total: jobs.length });
  await scatter(
    workers,
    jobs,
    async (w, files) => {
      const b = batch(files);
      // Two requests per full job, so a job's files arrive in pieces (one downloads while one
      // is scanned; the e2e's small data exercises the same path as large data).
      const requestBytes = Math.max(64 << 10, jobBytes / 2);
      const r = await workers.call(
        w,
        'naive',
        { files: b, requestBytes },
        { transfer: [b.fps.buffer, b.lengths.buffer] },
      );
      matches.push(r.matches);
      storedBytesRead += r.storedBytes;
      naiveBytes += r.bytes;
    },
    () => progress({ phase: 'scan', done: ++done, total: jobs.length }),
  );
  const t2 = performance.now();
  return {
    engine: 'naive',
    keywords,
    results: collect(prepared.files, matches),
    matches: matches.reduce((n, m) => n + m.length / 3, 0),
    filesSearched: prepared.files.length,
    logicalBytes: prepared.logicalBytes,
    phaseMs: { prepare: t1 - t0, scan: t2 - t1 },
    totalMs: t2 - t0,
    storedBytesRead,
    naiveBytes,
    files: prepared.files,
  };
}

/** Compares two outcomes hit by hit: how many (file, keyword, offset) each has alone. */
export function compareOutcomes(a: SearchOutcome, b: SearchOutcome): { onlyA: number; onlyB: number } {
  const key = (r: FileHits, h: Hit) => `${r.file.version}\u0000${r.file.path}\u0000${h.keyword}\u0000${h.offset}`;
  const setA = new Set(a.results.flatMap((r) => r.hits.map((h) => key(r, h))));
  const setB = new Set(b.results.flatMap((r) => r.hits.map((h) => key(r, h))));
  let onlyA = 0;
  for (const k of setA) if (!setB.has(k)) onlyA++;
  let onlyB = 0;
  for (const k of setB) if (!setA.has(k)) onlyB++;
  return { onlyA, onlyB };
}
