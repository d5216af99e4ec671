/**
 * In-page search of stored backups, as named stages:
 *
 * 1. **prepare** — the versions in scope, their manifests (file recipes) and where every
 *    chunk is stored (`GET containers`); chunk lengths come from the container tables.
 * 2. DedupSearch (Elias et al., FAST '22, Alg. 1):
 *    - **physical** — each container holding a chunk in scope is read once, as one byte
 *      range, by one of the workers, which decodes and scans every chunk (wasm-core's
 *      `ContainerScan`); a delta chunk is decoded against its base (in the same range, in
 *      the worker's cache, or fetched as stored with `chunks/get`, a base that is a delta
 *      resolved the same way) and scanned once like any other;
 *    - **logical** — one worker merges the result databases and the tiny records (kept in
 *      memory: a search runs here only while the repository's unique chunks fit the
 *      workers' cache) and walks the recipes (`RecipeSearch`).
 *    The naive baseline instead reassembles every file from `chunks/get` and scans it
 *    (**scan**), so it reads each chunk as often as files reference it.
 *
 * Both return the same matches; the page can run both and compare them.
 */
import { ApiError, type Api, type Manifest, type ManifestEntry, type VersionInfo } from '../api/client';
import { FP_LEN, fpHex, hexToBytes } from '../backup/hex';
import { withStorage } from '../ui/storage';
import { deleteDeviceCache } from './deviceCache';
import { keywordBytes, RECIPES_NOT_HELD, TooManyMatches, tooManyMatches } from './protocol';
import { SearchKeywords } from '../wasm-pkg/wasm_core.js';
import { pageCore } from '../wasm/page';
import type {
  ContainerJob,
  DbStats,
  FileBatch,
  LogicalStats,
  PhysicalStats,
  SearchQuery,
  StoredChunks,
} from './protocol';
import { chunkLocations, type StoredChunkLoc } from '../restore/restore';
import { versionLocations, type VersionLocations } from '../restore/locations';
import { decodeSearchAnswer } from './answer';
import type { SearchWorkers } from './workers';
import { WorkerError } from '../worker/bridge';

/** Keywords may be as long as the minimum chunk size of the default chunker (§3.1). */
export const MAX_KEYWORD_LEN = 2048;

export interface SearchScope {
  /** Version ids to search; `null`: all. */
  versions: number[] | null;
  /** Only files whose path contains this (case-insensitive); empty: all. */
  pathFilter: string;
  /**
   * Where DedupSearch runs; `auto` (the default): on the server above [`SERVER_SEARCH_ABOVE`],
   * and for a page that holds nothing of the repository yet ([`coldOnServer`]).
   */
  where?: SearchWhere;
}

export type SearchWhere = 'auto' | 'page' | 'server';

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

/**
 * A file's hits in order of offset, then keyword: hit `i` is keyword `keyword(i)` at byte
 * `offset(i)`. They stay in the (file, keyword, offset) triples the workers answer (and the
 * server's answer is read into, search/answer.ts), one view per file, instead of an object each: a search of 128 keywords of typescript-10 has half a
 * million, and making them took longer than its logical phase.
 */
export class Hits {
  constructor(private readonly triples: Float64Array) {
    if (triples.length % 3 !== 0) throw new RangeError('hits come as (file, keyword, offset) triples');
  }

  get length(): number {
    return this.triples.length / 3;
  }

  keyword(i: number): number {
    return this.triples[3 * i + 1];
  }

  offset(i: number): number {
    return this.triples[3 * i + 2];
  }

  /** Hits `from` to `to` (exclusive) as objects: the few a page shows. */
  slice(from: number, to = this.length): Hit[] {
    const out: Hit[] = [];
    for (let i = Math.max(0, from); i < Math.min(to, this.length); i++)
      out.push({ keyword: this.keyword(i), offset: this.offset(i) });
    return out;
  }
}

export interface FileHits {
  file: SearchFile;
  hits: Hits;
}

export interface SearchOutcome {
  engine: 'dedup' | 'naive';
  /** Where it ran: the page's workers, or the server (`POST search`). */
  where: 'page' | 'server';
  /** The repository state it searched ([`RepoCache`]): outcomes of two states are not comparable. */
  state: string;
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
  /** `containers`: holding chunks in scope; `rangesRead`: byte ranges fetched (0 when all were cached). */
  physical?: PhysicalStats & { containers: number; rangesRead: number };
  /** Whether prepare reused everything a previous search read (one versions and one token request). */
  prepareCached?: boolean;
  logical?: LogicalStats;
  db?: DbStats;
  /** Logical bytes the naive scan read. */
  naiveBytes?: number;
  /** What prepare found (the files searched), for snippets. */
  files: SearchFile[];
  /**
   * An in-page DedupSearch: settles when the workers' idle work after it is done (summaries,
   * warm-up, the device cache written); true when some worker wrote its file.
   */
  settled?: Promise<boolean>;
  /**
   * A search the server answered because the page held nothing of the repository: settles
   * when the page has run it too, its workers then holding what the next searches scan;
   * with why it failed if it did (null: cached).
   */
  filling?: Promise<string | null>;
}

export interface SearchProgress {
  phase: string;
  done: number;
  total: number;
}

/** A scope's recipes as bytes ([`scopeRecipes`]): file `k`'s chunks are `starts[k]` to `starts[k + 1]` of `fps` (20 bytes each) and `lengths`. */
interface ScopeRecipes {
  starts: Uint32Array;
  fps: Uint8Array;
  lengths: Uint32Array;
}

interface Prepared {
  /** The scope ([`scopeOf`]) and the versions it chose, with the repository state. */
  key: string;
  /** [`scopeOf`] the search's scope. */
  scope: string;
  /** The repository's unique raw bytes in that state (where `auto` searches). */
  uniqueRawBytes: number;
  files: SearchFile[];
  /** Where the scope's chunks are (and possibly others). */
  locs: Map<string, StoredChunkLoc>;
  /** Whether the scope is every version: `locs` then names every chunk the repository stores (and possibly some it no longer does). */
  complete: boolean;
  /** The chosen versions' manifests, every entry (the path filter aside). */
  manifests: readonly { manifest: Manifest }[];
  /** Sum of the files' sizes. */
  logicalBytes: number;
  /** The repository state read ([`RepoCache`]): a new one makes the workers' caches keep only what is still stored ([`holderMap`]). */
  state: string;
  /** Whether prepare fetched nothing but the versions list (all cached). */
  cached: boolean;
  /** The files' recipes as bytes ([`scopeRecipes`]), built on first use. */
  recipes?: ScopeRecipes;
  /**
   * The files' recipes for the logical phase in parts (runs of files) for `workers` workers,
   * cut on first use; a worker keeps the part it walked under its `key` ([`recipesHeld`]).
   */
  batches?: { workers: number; parts: { key: number; from: number; to: number }[] };
  /** Each chunk in scope once, by container, built on first use. */
  byContainer?: ContainerChunks[];
  /** The physical jobs of the last search of this scope, and the holders and pool size they were cut for. */
  jobs?: { holders: Holders; generation: number; workers: number; jobs: Job[] };
}

/**
 * What a search reads before it scans, kept for the next one: version manifests (a version
 * never changes under its id, and ids are never reused) and their chunk locations, so that
 * a search after a backup reads only the new version's. A location read earlier can be
 * stale (the mover, compaction and a prune move chunks), but a container file is never
 * rewritten in place and container ids are never reused (docs/FORMAT.md, docs/STORAGE.md):
 * a stale location still names the chunk's bytes, in a dead slot, or a container that is
 * gone, and a search that reads one that is gone starts over with every location read
 * again (`CONTAINER_GONE` below).
 */
interface RepoCache {
  manifests: Map<number, VersionInfo & { manifest: Manifest }>;
  /**
   * Each version's chunk locations (`GET versions/{id}/locations`), by version id; versions
   * located together by the repository's chunk table share it (a superset of each one's).
   */
  locs: Map<number, VersionLocations>;
  /** The last scope prepared (one is kept). */
  last: Prepared | null;
  /** A scope being prepared ahead of a search ([`preloadScope`]), by [`scopeOf`] it. */
  preloading: { scope: string; done: Promise<void> } | null;
  /** The repository's unique raw bytes when its state was last read: where `auto` likely searches. */
  uniqueRawBytes: number | null;
}
const repoCaches = new Map<string, RepoCache>();

function repoCache(api: Api): RepoCache {
  const key = `${api.base}\u0000${api.repo}`;
  let c = repoCaches.get(key);
  if (!c)
    repoCaches.set(
      key,
      (c = { manifests: new Map(), locs: new Map(), last: null, preloading: null, uniqueRawBytes: null }),
    );
  return c;
}

/** Forgets the chunk locations read (a container they name is gone). */
function dropLocations(api: Api) {
  const c = repoCache(api);
  c.locs.clear();
  c.last = null;
}

/**
 * Reads what a search of `scope` would read first (the repository's state, the versions'
 * manifests and chunk locations, and the scope's chunks grouped by container, which the
 * physical phase cuts its jobs from) and keeps it as the last scope prepared, so that a search
 * started later begins with its physical phase; one started meanwhile waits for this instead
 * of reading the same again. The Search tab calls it when it opens: a first search then
 * costs its scan only, the reading done while the keywords are typed. Nothing is read for a
 * scope that would be searched on the server. Failures are left to the search itself.
 */
export function preloadScope(api: Api, scope: SearchScope): Promise<void> {
  const cache = repoCache(api);
  const key = scopeOf(scope);
  if (cache.preloading?.scope === key) return cache.preloading.done;
  const done: Promise<void> = repoState(api)
    .then(async (repo) => {
      if (onServer(scope, repo.uniqueRawBytes)) return;
      const p = await prepare(api, scope, () => {}, repo);
      scopeChunks(p);
      scopeRecipes(p);
    })
    .catch(() => {})
    .finally(() => {
      if (cache.preloading?.done === done) cache.preloading = null;
    });
  cache.preloading = { scope: key, done };
  return done;
}

/**
 * Matches the workers' caches to the repository's state and cuts the physical phase's jobs
 * for `workers` from the scope [`preloadScope`] read, as a search of it would first, so that
 * a first search sends its first ranges at once instead of cutting them on the page's thread
 * after the click. The Search tab calls it once the workers have read their device caches.
 * Nothing is done for a scope searched on the server or one not read. Never fails.
 */
export async function prepareJobs(api: Api, workers: SearchWorkers, scope: SearchScope): Promise<void> {
  await preloaded(api, scope);
  const p = speculative(api, scope);
  if (p) containerJobs(p, matchCaches(api, workers, p, 'matchCache'), workers.size);
}

/** Waits for a [`preloadScope`] of `scope` still reading, if any. */
async function preloaded(api: Api, scope: SearchScope): Promise<void> {
  const p = repoCache(api).preloading;
  if (p && p.scope === scopeOf(scope)) await p.done;
}

/** What names a search's scope, whatever the repository's state. */
function scopeOf(scope: SearchScope): string {
  return JSON.stringify([scope.versions, scope.pathFilter.trim().toLowerCase()]);
}

/**
 * Raw bytes of decoded chunks the search workers keep between searches, all workers
 * together: a repeat search over this much unique data neither fetches nor decodes again.
 */
export const SEARCH_CACHE_BYTES = 256 << 20;

/**
 * Above this much unique raw data in the repository, DedupSearch runs on the server when
 * the scope says `auto`: the workers' cache budget. Below it a repeat search in the page is
 * served from memory (or the device) and beats the server's; above it every search in the
 * page fetches and decodes again, which the server's native engine does faster
 * (docs/SEARCH.md, "Which one runs").
 */
export const SERVER_SEARCH_ABOVE = SEARCH_CACHE_BYTES;

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

/** The repository's versions and state key (see [`RepoCache`]). */
interface RepoState {
  all: VersionInfo[];
  state: string;
  /**
   * Raw bytes of the unique chunks a search of everything scans, as the server sums them
   * (`raw_bytes`: what forgotten versions alone reached counts until a prune). Not the sum
   * of the versions' `new_raw_bytes`: a chunk a forgotten version brought that later ones
   * still name is counted in none of theirs.
   */
  uniqueRawBytes: number;
}

async function repoState(api: Api): Promise<RepoState> {
  const { versions: all, gc_epoch, raw_bytes } = await api.versionList(true);
  // Not told to a token that may not browse, which may not read chunks to search either.
  const uniqueRawBytes = raw_bytes ?? all.reduce((n, v) => n + v.stats.new_raw_bytes, 0);
  repoCache(api).uniqueRawBytes = uniqueRawBytes;
  return { all, state: `${gc_epoch}:${all.map((v) => v.id).join(',')}`, uniqueRawBytes };
}

async function prepare(
  api: Api,
  scope: SearchScope,
  progress: (p: SearchProgress) => void,
  { all, state, uniqueRawBytes }: RepoState,
): Promise<Prepared> {
  const cache = repoCache(api);
  const chosen = scope.versions ? all.filter((v) => scope.versions!.includes(v.id)) : all;
  if (scope.versions && chosen.length !== scope.versions.length)
    throw new Error('a version in the scope no longer exists; reload the list');
  const key = JSON.stringify([state, chosen.map((v) => v.id), scopeOf(scope)]);
  if (cache.last?.key === key) {
    cache.last.cached = true;
    return cache.last;
  }

  for (const id of cache.manifests.keys()) if (!all.some((v) => v.id === id)) cache.manifests.delete(id);
  for (const id of cache.locs.keys()) if (!all.some((v) => v.id === id)) cache.locs.delete(id);
  let loaded = 0;
  let fetched = false;
  const fresh = new Set<number>();
  progress({ phase: 'prepare', done: 0, total: chosen.length });
  // Many versions to locate (a first search): the repository's chunk table, one request,
  // costs less than one per version; a few (a search after a backup): their own.
  const table = chosen.filter((v) => !cache.locs.has(v.id)).length > LOCATE_EACH_UP_TO ? chunkLocations(api) : null;
  table?.catch(() => {}); // awaited below
  const manifests = await mapLimit(chosen, MANIFESTS_AT_ONCE, async (v) => {
    let m = cache.manifests.get(v.id);
    const l = cache.locs.get(v.id);
    if (!m || !l) {
      const [manifest, located] = await Promise.all([
        m ?? api.version(v.id),
        l ?? (table ? null : versionLocations(api, v.id)),
      ]);
      cache.manifests.set(v.id, (m = manifest));
      if (!l) {
        fresh.add(v.id);
        // Located by the table: set once it is read, below, so that the next manifest
        // is not held up by it.
        if (located) cache.locs.set(v.id, located);
      }
      fetched = true;
    }
    progress({ phase: 'prepare', done: ++loaded, total: chosen.length });
    return m;
  });
  if (table) {
    const locations = await table;
    for (const v of chosen) if (!cache.locs.has(v.id)) cache.locs.set(v.id, { locations, notStored: 0 });
  }
  // Each chunk once; a location read in this search over one read before (the mover may
  // have moved the chunk since). Versions located by one table share it: it is read once.
  const maps = new Set<Map<string, StoredChunkLoc>>();
  for (const fromThisSearch of [false, true])
    for (const v of chosen) if (fresh.has(v.id) === fromThisSearch) maps.add(cache.locs.get(v.id)!.locations);
  let locs: Map<string, StoredChunkLoc>;
  if (maps.size === 1) [locs] = maps;
  else {
    locs = new Map();
    for (const m of maps) for (const [fp, loc] of m) locs.set(fp, loc);
  }
  const filter = scope.pathFilter.trim().toLowerCase();
  const files: SearchFile[] = [];
  for (const m of manifests) {
    for (const e of m.manifest.entries as ManifestEntry[]) {
      if (e.kind !== 'file' || e.recipe.length === 0) continue;
      if (filter && !e.path.toLowerCase().includes(filter)) continue;
      const lengths = new Uint32Array(e.recipe.length);
      for (let i = 0; i < e.recipe.length; i++) {
        const fp = e.recipe[i];
        const loc = locs.get(fp);
        if (!loc) {
          // Locations read before may predate a heal (a backup stored the damaged chunk
          // again): they are read again before the chunk is called lost.
          if (!fresh.has(m.id)) {
            dropLocations(api);
            return prepare(api, scope, progress, { all, state, uniqueRawBytes });
          }
          throw new Error(
            `version ${m.id}: ${e.path} references chunk ${fp}, which the server does not store (damaged or lost; Verify names it)`,
          );
        }
        lengths[i] = loc.rawLen;
      }
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
  const prepared: Prepared = {
    key,
    scope: scopeOf(scope),
    uniqueRawBytes,
    files,
    locs,
    complete: chosen.length === all.length,
    manifests,
    logicalBytes: files.reduce((n, f) => n + f.size, 0),
    state,
    cached: !fetched,
  };
  cache.last = prepared;
  return prepared;
}

/**
 * Manifests requested at once by prepare. The browser sends six at a time to one server
 * (HTTP/1.1) and queues the rest, so a request waits for a free connection there rather
 * than for the page's thread to get to the next one.
 */
const MANIFESTS_AT_ONCE = 16;

/**
 * Above this many versions to locate, prepare reads the repository's chunk table instead,
 * and each of them keeps that table as its locations (a superset of its own).
 */
const LOCATE_EACH_UP_TO = 2;

/**
 * Per pool, the key of the recipes each worker keeps from its last logical phase
 * (`Prepared.batches`): a repeat search of the same scope sends a worker only its records.
 * Forgotten for a worker the pool replaced ([`forgetWorker`]).
 */
const recipesHeld = new WeakMap<SearchWorkers, (number | undefined)[]>();
let recipeKeys = 0;

/**
 * Above this many bytes of physical records (encoded), the logical phase is split over the
 * workers: a few keywords leave few records, which one worker walks sooner than two can
 * each read them; hundreds leave many, and many matches to report (docs/BENCHMARKS.md).
 */
const LOGICAL_SPLIT_BYTES = 512 << 10;

/**
 * The files' recipes in at most `n` parts of about equal length, in file order: one per
 * worker for the logical phase. Each part is the files `from` to `to` (exclusive).
 */
function batches(files: SearchFile[], n: number): { from: number; to: number }[] {
  const total = files.reduce((k, f) => k + f.recipe.length, 0);
  const out: { from: number; to: number }[] = [];
  let from = 0;
  let walked = 0;
  files.forEach((f, i) => {
    walked += f.recipe.length;
    if (out.length < n - 1 && walked * n >= total * (out.length + 1)) {
      out.push({ from, to: i + 1 });
      from = i + 1;
    }
  });
  if (from < files.length || out.length === 0) out.push({ from, to: files.length });
  return out;
}

/** Field by field, the sum of counters that have the same fields (at least one). */
function sumOf<T extends Record<keyof T, number>>(counts: T[]): T {
  const out = { ...counts[0] };
  for (const c of counts.slice(1))
    for (const k of Object.keys(out) as (keyof T)[]) out[k] = (out[k] + c[k]) as T[keyof T];
  return out;
}

/**
 * The scope's recipes as bytes, file after file (file `k`'s chunks are `starts[k]` to
 * `starts[k + 1]`), built once per prepared scope: before the first search when the Search
 * tab reads its scope ([`preloadScope`]), so that a search's logical phase does not begin
 * by decoding every fingerprint of the scope from hex.
 */
function scopeRecipes(p: Prepared): ScopeRecipes {
  if (p.recipes) return p.recipes;
  const { files } = p;
  const starts = new Uint32Array(files.length + 1);
  files.forEach((f, k) => (starts[k + 1] = starts[k] + f.recipe.length));
  const fps = new Uint8Array(starts[files.length] * FP_LEN);
  const lengths = new Uint32Array(starts[files.length]);
  files.forEach((f, k) => {
    for (let j = 0, at = starts[k]; j < f.recipe.length; j++, at++) hexToBytes(f.recipe[j], fps, at * FP_LEN);
    lengths.set(f.lengths, starts[k]);
  });
  p.recipes = { starts, fps, lengths };
  return p.recipes;
}

/** The recipes of files `from` to `to` (exclusive) of `p` as typed arrays of their own, for a worker. */
function batch(p: Prepared, from: number, to: number): FileBatch {
  const { starts, fps, lengths } = scopeRecipes(p);
  const [a, b] = [starts[from], starts[to]];
  return {
    ids: Uint32Array.from({ length: to - from }, (_, k) => p.files[from + k].id),
    counts: Uint32Array.from({ length: to - from }, (_, k) => starts[from + k + 1] - starts[from + k]),
    fps: fps.slice(a * FP_LEN, b * FP_LEN),
    lengths: lengths.slice(a, b),
  };
}

/**
 * Stored bytes per physical job at most (a bigger container is split): enough jobs to
 * spread decoding and scanning over the workers even when the scope sits in a few containers.
 */
const JOB_STORED_BYTES = 2 << 20;

/**
 * A physical job and its chunks' fingerprints (hex), which say which worker holds them;
 * `share` names the worker a job no worker holds goes to first ([`chainOwners`]).
 */
export interface Job {
  job: ContainerJob;
  fps: string[];
  share?: number;
}

/** The chunks in scope held by one container, in storage order. */
export interface ContainerChunks {
  id: number;
  fps: string[];
  /** The same fingerprints as bytes, back to back. */
  fpBytes: Uint8Array;
  locs: StoredChunkLoc[];
  /** The container's other chunks the locations name, with a chain key (links of base chains: frames, bases), in storage order. */
  links?: { fps: string[]; locs: StoredChunkLoc[] };
}

/** Each chunk in scope once, by container (ascending), built once per prepared scope. */
function scopeChunks(p: Prepared): ContainerChunks[] {
  if (p.byContainer) return p.byContainer;
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
  const links = new Map<number, [string, StoredChunkLoc][]>();
  for (const [fp, loc] of p.locs)
    if (loc.chainKey !== undefined && !seen.has(fp) && byContainer.has(loc.container)) {
      let list = links.get(loc.container);
      if (!list) links.set(loc.container, (list = []));
      list.push([fp, loc]);
    }
  p.byContainer = [...byContainer]
    .sort((a, b) => a[0] - b[0])
    .map(([id, list]) => {
      list.sort((a, b) => a[1].offset - b[1].offset);
      const fpBytes = new Uint8Array(list.length * FP_LEN);
      list.forEach(([fp], k) => hexToBytes(fp, fpBytes, k * FP_LEN));
      const other = (links.get(id) ?? []).sort((a, b) => a[1].offset - b[1].offset);
      return {
        id,
        fps: list.map(([fp]) => fp),
        fpBytes,
        locs: list.map(([, l]) => l),
        links: { fps: other.map(([fp]) => fp), locs: other.map(([, l]) => l) },
      };
    });
  return p.byContainer;
}

/**
 * The worker each chain key of the scope goes to (docs/SEARCH.md, "Work split by chain"):
 * chunks with one chain key decode through the same links, apart from links most chunks
 * share, so the worker that has the key fetches or reads those links and decodes them, and
 * the other never needs them. A key goes to the worker holding one of its chunks (a repeat
 * search, a search after a backup); the others, largest first by raw bytes, to the worker
 * with the fewest so far. Empty when a chunk in scope has no key (locations from a server
 * that names none): jobs then split by storage order alone.
 */
export function chainOwners(
  byContainer: ContainerChunks[],
  held: Map<string, number>,
  workers: number,
): Map<number, number> {
  const owners = new Map<number, number>();
  const raw = new Map<number, number>();
  const load = new Array<number>(workers).fill(0);
  for (const { fps, locs } of byContainer)
    for (let k = 0; k < fps.length; k++) {
      const key = locs[k].chainKey;
      if (key === undefined) return new Map();
      const w = held.get(fps[k]);
      if (w !== undefined && w < workers && !owners.has(key)) owners.set(key, w);
      raw.set(key, (raw.get(key) ?? 0) + locs[k].rawLen);
    }
  for (const [key, w] of owners) load[w] += raw.get(key)!;
  const rest = [...raw].filter(([key]) => !owners.has(key)).sort((a, b) => b[1] - a[1] || a[0] - b[0]);
  for (const [key, bytes] of rest) {
    const w = load.indexOf(Math.min(...load));
    owners.set(key, w);
    load[w] += bytes;
  }
  return owners;
}

/**
 * The chunks in scope by container, in storage order: per container, the chunks held by
 * one worker's cache (`held`), those of the chain keys one worker is to decode
 * ([`chainOwners`]), and the rest, each group cut into jobs spanning at most
 * [`JOB_STORED_BYTES`] (a chunk larger than that is a job of its own), each read as one
 * byte range (which may hold other groups' chunks between its own: they are not decoded).
 * A job of a worker's chain keys also reads the container's links of those keys (frames
 * and bases no file names, stored before the chunks decoded through them) and decodes
 * them from its range: the worker's jobs, decoded one after another in the order
 * [`linksFirst`] gives, then find most of their chains decoded already instead of
 * fetching them (docs/SEARCH.md).
 */
function containerJobs(p: Prepared, holders: Holders, workers: number): Job[] {
  // A repeat search of the scope cuts the same jobs unless a chunk changed holder since.
  if (p.jobs?.holders === holders && p.jobs.generation === holders.generation && p.jobs.workers === workers)
    return p.jobs.jobs;
  const held = holders.at;
  const owners = chainOwners(scopeChunks(p), held, workers);
  const jobs: Job[] = [];
  /** Per job with a share, the chain keys of its chunks and of the links it reads. */
  const keysOf = new Map<Job, { needs: Set<number>; gives: Set<number> }>();
  for (const { id, fps, fpBytes, locs, links } of scopeChunks(p)) {
    /** Per group (held by worker w: w; to decode on worker w: workers + w; neither: -1), its chunks. */
    const groups = new Map<number, number[]>();
    const add = (g: number, k: number) => {
      let list = groups.get(g);
      if (!list) groups.set(g, (list = []));
      list.push(k);
    };
    for (let k = 0; k < fps.length; k++) {
      const h = held.get(fps[k]);
      const o = owners.get(locs[k].chainKey!);
      add(h !== undefined ? h : o !== undefined ? workers + o : -1, k);
    }
    /**
     * Per worker, the container's links of its chain keys (indices into `links`); and the
     * links of no key in scope (`common`). With the whole repository in scope those are
     * links many chains share (the dictionary, a frame at the root of many), which every
     * worker's job of the container reads; with a narrower scope they are mostly chunks
     * of other versions, which a job reads only where its range holds them anyway (a job
     * decodes a link only if its chains run through it).
     */
    const linksOf = new Map<number, number[]>();
    const common: number[] = [];
    links?.locs.forEach((l, k) => {
      const o = owners.get(l.chainKey!);
      if (o === undefined) common.push(k);
      else if (groups.has(workers + o)) {
        let list = linksOf.get(o);
        if (!list) linksOf.set(o, (list = []));
        list.push(k);
      }
    });
    const stored = (n: number): StoredChunks => ({
      fps: new Uint8Array(n * FP_LEN),
      offsets: new Float64Array(n),
      storedLens: new Uint32Array(n),
      codecs: new Uint8Array(n),
      rawLens: new Uint32Array(n),
    });
    const fill = (out: StoredChunks, i: number, l: StoredChunkLoc, fp: Uint8Array) => {
      out.fps.set(fp, i * FP_LEN);
      out.offsets[i] = l.offset;
      out.storedLens[i] = l.storedLen;
      out.codecs[i] = l.codec;
      out.rawLens[i] = l.rawLen;
    };
    const emit = (idx: number[], linkIdx: number[], share: number | undefined) => {
      const job: ContainerJob = { id, start: Infinity, end: 0, ...stored(idx.length) };
      const span = (l: StoredChunkLoc) => {
        job.start = Math.min(job.start, l.offset);
        job.end = Math.max(job.end, l.offset + l.storedLen);
      };
      idx.forEach((k, i) => {
        fill(job, i, locs[k], fpBytes.subarray(k * FP_LEN, (k + 1) * FP_LEN));
        span(locs[k]);
      });
      for (const k of linkIdx) span(links!.locs[k]);
      if (share !== undefined)
        for (const k of common) {
          const l = links!.locs[k];
          if (p.complete || (l.offset >= job.start && l.offset + l.storedLen <= job.end)) linkIdx.push(k);
        }
      if (linkIdx.length > 0) {
        linkIdx.sort((a, b) => a - b);
        job.links = stored(linkIdx.length);
        linkIdx.forEach((k, i) => {
          fill(job.links!, i, links!.locs[k], hexToBytes(links!.fps[k]));
          span(links!.locs[k]);
        });
      }
      const j: Job = { job, fps: idx.map((k) => fps[k]), share };
      if (share !== undefined)
        keysOf.set(j, {
          needs: new Set(idx.map((k) => locs[k].chainKey!)),
          gives: new Set(linkIdx.map((k) => links!.locs[k].chainKey!)),
        });
      jobs.push(j);
    };
    for (const [g, idx] of [...groups].sort((a, b) => a[0] - b[0])) {
      const share = g >= workers ? g - workers : undefined;
      // A link goes with the first job whose chunks end after it (a frame precedes its
      // slices), else with the last.
      const pending = share === undefined ? [] : (linksOf.get(share) ?? []);
      let from = 0;
      for (let i = 1; i <= idx.length; i++)
        if (
          i === idx.length ||
          locs[idx[i]].offset + locs[idx[i]].storedLen - locs[idx[from]].offset > JOB_STORED_BYTES
        ) {
          const last = locs[idx[i - 1]];
          const end = last.offset + last.storedLen;
          const mine = i === idx.length ? pending.splice(0) : [];
          while (i < idx.length && pending.length > 0 && links!.locs[pending[0]].offset < end)
            mine.push(pending.shift()!);
          emit(idx.slice(from, i), mine, share);
          from = i;
        }
    }
  }
  const ordered = [...jobs.filter((j) => j.share === undefined), ...linksFirst(jobs, keysOf)];
  p.jobs = { holders, generation: holders.generation, workers, jobs: ordered };
  return ordered;
}

/**
 * The jobs with a share, per worker in the order it decodes them: storage order, except
 * that a job whose chunks' chain keys have links in another job's range comes after that
 * job (a layout where the mover stored frames apart from their slices), so the links are
 * cached when its chains run through them instead of fetched. A job that waits on a cycle
 * goes in storage order.
 */
export function linksFirst(jobs: Job[], keysOf: Map<Job, { needs: Set<number>; gives: Set<number> }>): Job[] {
  const out: Job[] = [];
  const byWorker = new Map<number, Job[]>();
  for (const j of jobs)
    if (j.share !== undefined) {
      let list = byWorker.get(j.share);
      if (!list) byWorker.set(j.share, (list = []));
      list.push(j);
    }
  for (const list of byWorker.values()) {
    const left = [...list];
    /** Per chain key, how many jobs not placed yet read links of it. */
    const givers = new Map<number, number>();
    for (const j of left) for (const k of keysOf.get(j)!.gives) givers.set(k, (givers.get(k) ?? 0) + 1);
    const ready = (j: Job) => {
      const { needs, gives } = keysOf.get(j)!;
      for (const k of needs) if (!gives.has(k) && (givers.get(k) ?? 0) > 0) return false;
      return true;
    };
    while (left.length > 0) {
      const at = Math.max(0, left.findIndex(ready));
      const [j] = left.splice(at, 1);
      for (const k of keysOf.get(j)!.gives) givers.set(k, givers.get(k)! - 1);
      out.push(j);
    }
  }
  return out;
}

/**
 * Which worker's chunk cache holds which chunk (hex fingerprint), per pool and repository:
 * a job goes back to the worker that holds its chunks, so a repeat search scans from memory.
 * Only a routing hint: a worker scans what it does not hold after fetching it.
 */
interface Holders {
  /** The repository ([`cacheKey`]) and the state the map is up to date with. */
  repo: string;
  state: string;
  at: Map<string, number>;
  /** Counts the changes of `at`. */
  generation: number;
}
const holders = new WeakMap<SearchWorkers, Holders>();

/**
 * The holders of `p`'s chunks among `workers` ([`holderMap`]), the workers' caches told the
 * repository and, when its state changed, the chunks still stored ([`useCache`]): by a
 * search before its jobs (`useCache`), or between searches (`matchCache`).
 */
function matchCaches(api: Api, workers: SearchWorkers, p: Prepared, method: 'useCache' | 'matchCache'): Holders {
  const { held, live } = holderMap(workers, cacheKey(api), p);
  useCache(api, workers, method, held, live);
  return held;
}

/**
 * The holders for `p`'s repository state. When that state is new to them (a backup, a
 * forget or a prune since the caches were last matched) and `p` covers every version, the
 * chunks its versions no longer reference are dropped from the map, and `live` names every
 * chunk they reference, for the workers' caches to keep the same ones. (A narrower scope leaves that to
 * the next search of every version: until then, chunks that are gone only take memory.)
 */
function holderMap(workers: SearchWorkers, repo: string, p: Prepared): { held: Holders; live?: Uint8Array } {
  let h = holders.get(workers);
  if (!h || h.repo !== repo) holders.set(workers, (h = { repo, state: p.state, at: new Map(), generation: 0 }));
  if (h.state === p.state || !p.complete) return { held: h };
  h.state = p.state;
  // What the versions reference, not `p.locs`: versions located by the repository's chunk
  // table keep that table, which still names the chunks of versions forgotten since.
  const referenced = new Set<string>();
  for (const m of p.manifests)
    for (const e of m.manifest.entries as ManifestEntry[]) for (const fp of e.recipe) referenced.add(fp);
  for (const fp of h.at.keys()) if (!referenced.has(fp)) h.at.delete(fp);
  h.generation++;
  const live = new Uint8Array(referenced.size * FP_LEN);
  let k = 0;
  for (const fp of referenced) hexToBytes(fp, live, k++ * FP_LEN);
  return { held: h, live };
}

/**
 * Forgets what worker `w` of `workers` held, once the pool has replaced it after a crash (its
 * cache died with it): the jobs of its chunks are then cut again for either worker, instead
 * of all going at once, as held, to the empty replacement, and no snippet is asked of it.
 */
export function forgetWorker(workers: SearchWorkers, w: number): void {
  const kept = recipesHeld.get(workers);
  if (kept) kept[w] = undefined;
  const h = holders.get(workers);
  if (!h) return;
  for (const [fp, at] of h.at) if (at === w) h.at.delete(fp);
  h.generation++;
}

/**
 * Raw bytes of the chunks of `fps` (hex) that the workers' caches hold, asked of the worker
 * that holds each: the snippets of an in-page search's results need neither the server nor
 * its decoding. Chunks no worker holds are left out.
 */
export async function cachedChunks(workers: SearchWorkers, fps: string[]): Promise<Map<string, Uint8Array>> {
  const out = new Map<string, Uint8Array>();
  const at = holders.get(workers)?.at;
  if (!at) return out;
  const byWorker = new Map<number, string[]>();
  for (const fp of new Set(fps)) {
    const w = at.get(fp);
    if (w === undefined || w >= workers.size) continue;
    let list = byWorker.get(w);
    if (!list) byWorker.set(w, (list = []));
    list.push(fp);
  }
  await Promise.all(
    [...byWorker].map(async ([w, list]) => {
      const asked = new Uint8Array(list.length * FP_LEN);
      list.forEach((fp, k) => hexToBytes(fp, asked, k * FP_LEN));
      const answer = await workers.call(w, 'chunks', asked, { transfer: [asked.buffer] });
      const view = new DataView(answer.buffer, answer.byteOffset, answer.byteLength);
      let p = 0;
      for (const fp of list) {
        const len = view.getUint32(p, true);
        p += 4;
        if (len === 0xffffffff) continue;
        out.set(fp, answer.subarray(p, p + len));
        p += len;
      }
    }),
  );
  return out;
}

/**
 * The matches (file, keyword, offset triples) as hits per file, by offset then keyword. The
 * engines hand a file's matches over together (DedupSearch's logical phase already in
 * order), so the walk goes by runs of one file, and sorts only a file whose hits are not.
 */
export function collect(files: SearchFile[], matches: Float64Array[]): FileHits[] {
  // Each file's runs of triples; a file's hits normally come as one run in order, kept as a
  // view of the worker's answer.
  const runs = new Map<number, Float64Array[]>();
  for (const m of matches)
    for (let i = 0; i < m.length;) {
      const id = m[i];
      const from = i;
      while (i < m.length && m[i] === id) i += 3;
      const list = runs.get(id);
      if (list) list.push(m.subarray(from, i));
      else runs.set(id, [m.subarray(from, i)]);
    }
  const out = [...runs].map(([id, list]) => ({ file: files[id], hits: new Hits(inOrder(list)) }));
  return out.sort(
    (a, b) => a.file.version - b.file.version || (a.file.path < b.file.path ? -1 : a.file.path > b.file.path ? 1 : 0),
  );
}

/** One file's runs of (file, keyword, offset) triples as one, by offset then keyword. */
function inOrder(runs: Float64Array[]): Float64Array {
  const one = runs.length === 1 ? runs[0] : concatTriples(runs);
  let sorted = true;
  for (let i = 3; i < one.length && sorted; i += 3)
    sorted = one[i - 1] < one[i + 2] || (one[i - 1] === one[i + 2] && one[i - 2] <= one[i + 1]);
  if (sorted) return one;
  const order = Array.from({ length: one.length / 3 }, (_, k) => k);
  order.sort((a, b) => one[3 * a + 2] - one[3 * b + 2] || one[3 * a + 1] - one[3 * b + 1]);
  const out = new Float64Array(one.length);
  order.forEach((k, i) => out.set(one.subarray(3 * k, 3 * k + 3), 3 * i));
  return out;
}

function concatTriples(runs: Float64Array[]): Float64Array {
  const out = new Float64Array(runs.reduce((n, r) => n + r.length, 0));
  let at = 0;
  for (const r of runs) {
    out.set(r, at);
    at += r.length;
  }
  return out;
}

/** Starts the search in every worker (a read-ahead without `query`); answers the parsed keywords. */
async function begin(api: Api, workers: SearchWorkers, query: SearchQuery | null): Promise<Uint8Array[]> {
  const server = { base: api.base || location.origin, repo: api.repo, token: api.token };
  const answers = await Promise.all(
    Array.from({ length: workers.size }, (_, w) =>
      workers.call(w, 'begin', { query, maxKeywordLen: MAX_KEYWORD_LEN, server }),
    ),
  ).catch((e: unknown) => {
    // A worker's `begin` that threw refused the keywords, and holds no search since.
    throw e instanceof WorkerError && !e.crashed && !workers.signal.aborted ? new QueryRefused(e.message) : e;
  });
  return answers[0].keywords;
}

/**
 * The query's keywords parsed on the page's thread with the workers' parser, for an answer
 * the server gives while the workers are busy; refused as `begin` refuses them.
 */
async function pageKeywords(query: SearchQuery): Promise<Uint8Array[]> {
  await pageCore();
  let parsed: SearchKeywords;
  try {
    parsed = new SearchKeywords(query.keywords, query.hex, MAX_KEYWORD_LEN);
  } catch (e) {
    throw new QueryRefused(e instanceof Error ? e.message : String(e));
  }
  try {
    return keywordBytes(parsed);
  } finally {
    parsed.free();
  }
}

/**
 * A query the search refused: keywords the workers could not read (bad hex, too long, too
 * many), or more matches than a search answers. The query's fault, so the workers, and what
 * they hold, stay for the next search: a search that fails this way has no request left in
 * a worker (a failed job stops the scatter, which waits for the jobs it sent).
 */
export class QueryRefused extends Error {}

/** `e` as a [`QueryRefused`] when a worker or the server refused the query so, else `e`. */
function asRefusedQuery(e: unknown): unknown {
  if (e instanceof ApiError && e.code === 'too_many_matches') return new QueryRefused(e.message);
  if (!(e instanceof WorkerError) || e.crashed || e.remoteName !== TooManyMatches.NAME) return e;
  return new QueryRefused(e.remoteMessage);
}

/** Names the repository a worker's chunk cache belongs to. */
function cacheKey(api: Api): string {
  return `${api.base || location.origin}\u0000${api.repo}`;
}

/**
 * Points every worker at the decoded-chunk cache of the repository, keeping only the chunks
 * of `live` when given (see [`holderMap`]). A worker handles its messages in order, so the
 * jobs sent next need not wait for the answer; a failure shows as the first job's ("scan
 * before useCache"). `held` names the state `live` is of: should a worker not take it, the
 * next search of every version sends `live` again, so that no cache keeps chunks the
 * repository no longer stores.
 */
function useCache(
  api: Api,
  workers: SearchWorkers,
  method: 'useCache' | 'matchCache',
  held: Holders,
  live: Uint8Array | undefined,
) {
  const bytes = workerBudget(workers);
  const persist = deviceCacheOn();
  const state = held.state;
  for (let w = 0; w < workers.size; w++)
    void workers.call(w, method, { key: cacheKey(api), slot: w, bytes, live, persist }).catch(() => {
      if (live && held.state === state) held.state = '';
    });
}

/** Each worker's share of `SEARCH_CACHE_BYTES`, in memory and on the device. */
function workerBudget(workers: SearchWorkers): number {
  return Math.floor(SEARCH_CACHE_BYTES / workers.size);
}

/**
 * Room for decoding beside a worker's cache: the range being decoded and the bases fetched
 * for it, its chunks waiting for their check, the zstd and delta contexts.
 */
const DECODE_ROOM_BYTES = 24 << 20;

/**
 * Grows each search worker's memory ahead of the first search of the repository in the page
 * (wasm-core's `HeapReserve`): a first search decodes every chunk in scope into memory the
 * worker has never used, and a page of memory costs a fault on first touch, which a worker
 * that decodes pays in the middle of the search. The Search tab calls this once the workers
 * have read their device caches, while the keywords are typed; a worker already that large
 * (a device cache read in) grows by nothing. The size is the worker's share of what its
 * cache will keep: the repository's unique chunks and about as many bytes of the delta bases
 * they decode through (docs/SEARCH.md, "Memory made ready"), within the cache's budget, plus
 * room for decoding. Nothing is grown when `scope` would be searched on the server. Answers the
 * bytes the workers grew by; never fails.
 */
export async function reserveWorkerMemory(api: Api, workers: SearchWorkers, scope: SearchScope): Promise<number> {
  try {
    // The scope the Search tab read ahead names the repository's size; else one request.
    const uniqueRawBytes = speculative(api, scope)?.uniqueRawBytes ?? (await repoState(api)).uniqueRawBytes;
    if (onServer(scope, uniqueRawBytes)) return 0;
    const cached = Math.min(SEARCH_CACHE_BYTES, 2 * uniqueRawBytes) / workers.size;
    const bytes = Math.ceil(cached + DECODE_ROOM_BYTES);
    const grew = await Promise.all(
      Array.from({ length: workers.size }, (_, w) => workers.call(w, 'reserve', bytes).catch(() => 0)),
    );
    return grew.reduce((a, b) => a + b, 0);
  } catch {
    return 0;
  }
}

/** Where the Search tab's "Read the stored chunks ahead" choice is remembered (on unless turned off). */
const READ_AHEAD_SETTING = 'ditto.search.readAhead';
const READ_AHEAD_WHAT = 'search read-ahead setting';

/** Whether the Search tab reads the repository ahead when it opens ([`readAhead`]); on by default. */
export function readAheadOn(): boolean {
  return withStorage(READ_AHEAD_WHAT, (s) => s.getItem(READ_AHEAD_SETTING), null) !== 'off';
}

/** Turns the read-ahead on or off; off stops one under way, keeping what it read. */
export function setReadAhead(on: boolean, workers: SearchWorkers | null): void {
  withStorage(
    READ_AHEAD_WHAT,
    (s) => (on ? s.removeItem(READ_AHEAD_SETTING) : s.setItem(READ_AHEAD_SETTING, 'off')),
    undefined,
  );
  if (!on && workers) void stopReadAhead(workers).stopped;
}

/** How a read-ahead went: `stopped` by a search (or the setting), `done` with every chunk held. */
export interface ReadAheadProgress {
  /** `none`: nothing to read (the workers hold the scope, the server searches it, or a search runs). */
  state: 'none' | 'running' | 'done' | 'stopped' | 'failed';
  /** Jobs (byte ranges) read, of `total`. */
  done: number;
  total: number;
  /** Stored bytes read from the server. */
  storedBytes: number;
  /** Whether the workers have written what it read to their device files since. */
  kept?: boolean;
}

/**
 * How long after a read-ahead its workers wait, with no search, before they write their
 * device files: a search typed meanwhile would make that write give way, and writes them
 * itself once it is done. A page reloaded without a search then does not read the
 * repository again.
 */
const READ_AHEAD_KEEP_AFTER_MS = 10_000;

/** The read-ahead running on each pool: `halt` stops it; `stopped` settles once its workers are free. */
const readingAhead = new WeakMap<SearchWorkers, { halt: boolean; stopped: Promise<void> }>();

/** Searches running on each pool (their attempts, from the first to the last): a read-ahead starts only on an idle pool. */
const searchesRunning = new WeakMap<SearchWorkers, number>();

/**
 * Reads ahead (docs/SEARCH.md, "Chunks read ahead"): the physical phase of a search of `scope`
 * without keywords, while the keywords are typed. The jobs of the chunks no worker holds
 * are fetched, decoded and checked as a first search would and kept in the workers'
 * caches (then summarised and written to the device as after a search), so that the search
 * typed next scans them from memory. The Search tab calls it once the workers have read
 * their device caches and the jobs are cut ([`prepareJobs`]); it reads nothing for a scope
 * searched on the server, one not read, or a pool that is searching, and a search (or
 * Clear, or turning it off) stops it between jobs ([`stopReadAhead`]). Never fails:
 * `progress` says how it ended.
 */
export async function readAhead(
  api: Api,
  workers: SearchWorkers,
  scope: SearchScope,
  progress: (p: ReadAheadProgress) => void,
): Promise<void> {
  if (!readAheadOn()) return;
  await preloaded(api, scope);
  const p = speculative(api, scope);
  const none = () => progress({ state: 'none', done: 0, total: 0, storedBytes: 0 });
  if (!p || readingAhead.has(workers) || fills.has(workers) || (searchesRunning.get(workers) ?? 0) > 0) return none();
  const known = matchCaches(api, workers, p, 'matchCache');
  // The jobs a search would cut now, less those whose chunks are all held.
  const jobs = containerJobs(p, known, workers.size).filter((j) => j.fps.some((fp) => !known.at.has(fp)));
  if (jobs.length === 0) return none();
  const me = { halt: false, stopped: Promise.resolve() };
  let report: ReadAheadProgress = { state: 'running', done: 0, total: jobs.length, storedBytes: 0 };
  const tell = (r: Partial<ReadAheadProgress>) => progress((report = { ...report, ...r }));
  let storedBytes = 0;
  const run = async () => {
    const finishing: Promise<unknown>[] = [];
    try {
      await begin(api, workers, null);
      const held = matchCaches(api, workers, p, 'useCache');
      tell({});
      await scanJobs(
        workers,
        jobs,
        held,
        (read) => (storedBytes += read),
        () => tell({ done: report.done + 1, storedBytes }),
        (w) => (finishing[w] = workers.call(w, 'finishScan', null)),
        () => me.halt,
      );
      tell({ state: me.halt ? 'stopped' : 'done', storedBytes });
    } catch (e) {
      tell({ state: me.halt ? 'stopped' : 'failed', storedBytes });
      // A chunk a worker refused is asked for checked, as a search does: the server
      // quarantines a copy damaged on its disk, and the search then names it.
      const refused = e instanceof Error ? REFUSED_CHUNK.exec(e.message) : null;
      if (refused) await api.getChunks([refused[1]]).catch(() => {});
    } finally {
      // Every worker ends its phase, so that none is left scanning (which holds its idle work).
      for (let w = 0; w < workers.size; w++) finishing[w] ??= workers.call(w, 'finishScan', null);
      await Promise.allSettled(finishing);
      if (readingAhead.get(workers) === me) readingAhead.delete(workers);
    }
    if (me.halt) return;
    // As after a search, the workers summarise what they read (the next search then reads
    // only the blocks of them where a keyword may start), and the next search's jobs are cut for the holders as
    // they now are. Their device files are written after that search, or once the page has
    // searched nothing for a while ([`READ_AHEAD_KEEP_AFTER_MS`]).
    void idleWorkers(workers, false);
    containerJobs(p, known, workers.size);
    setTimeout(() => void keepReadAhead(workers, () => tell({ kept: true })), READ_AHEAD_KEEP_AFTER_MS);
  };
  me.stopped = run().catch(() => {});
  readingAhead.set(workers, me);
  await me.stopped;
}

/**
 * Has the workers write what a read-ahead read to their device files, unless the pool is
 * searching, reading ahead or gone (a search writes them itself when it is done); `kept`
 * runs when a worker wrote its file.
 */
async function keepReadAhead(workers: SearchWorkers, kept: () => void): Promise<void> {
  if (workers.signal.aborted || readingAhead.has(workers) || fills.has(workers)) return;
  if ((searchesRunning.get(workers) ?? 0) > 0 || !deviceCacheOn()) return;
  if (await idleWorkers(workers, true)) kept();
}

/**
 * Sends every worker `idle`: each summarises what it cached, warms its code up and, with
 * `save`, writes its device file if the cache changed. Answers whether any wrote one.
 */
async function idleWorkers(workers: SearchWorkers, save: boolean): Promise<boolean> {
  const answers = await Promise.all(
    Array.from({ length: workers.size }, (_, w) => workers.call(w, 'idle', { save }).catch(() => ({ saved: false }))),
  );
  return answers.some((a) => a.saved);
}

/**
 * Stops the read-ahead of `workers`, if one runs, from its next job on: `unfinished` says
 * whether one was stopped, `stopped` settles once its workers have ended their jobs (a
 * search then gives them its own keywords).
 */
export function stopReadAhead(workers: SearchWorkers): { unfinished: boolean; stopped: Promise<void> } {
  const r = readingAhead.get(workers);
  if (!r) return { unfinished: false, stopped: Promise.resolve() };
  r.halt = true;
  return { unfinished: true, stopped: r.stopped };
}

/** Where the Search tab's "Keep on this device" choice is remembered (on unless turned off). */
const DEVICE_CACHE_SETTING = 'ditto.search.deviceCache';

/** What `withStorage` warns of: where site data is blocked the choice is not kept. */
const DEVICE_CACHE_WHAT = 'search device cache setting';

/**
 * Whether the search workers keep their caches on the device ([`loadDeviceCache`]); on
 * (the default) where the browser blocks site data and no choice can be read.
 */
export function deviceCacheOn(): boolean {
  return withStorage(DEVICE_CACHE_WHAT, (s) => s.getItem(DEVICE_CACHE_SETTING), null) !== 'off';
}

/**
 * Turns keeping the caches on the device on or off; off also deletes what is kept there
 * ([`clearDeviceCache`]) and empties the workers' caches, whether or not the choice is kept.
 */
export async function setDeviceCache(on: boolean, workers: SearchWorkers | null): Promise<void> {
  if (on) withStorage(DEVICE_CACHE_WHAT, (s) => s.removeItem(DEVICE_CACHE_SETTING), undefined);
  else {
    withStorage(DEVICE_CACHE_WHAT, (s) => s.setItem(DEVICE_CACHE_SETTING, 'off'), undefined);
    await clearDeviceCache(workers);
  }
}

/** Each pool's read of its device cache files, by repository ([`loadDeviceCache`]). */
const deviceLoads = new WeakMap<SearchWorkers, { repo: string; done: Promise<void>; settled: boolean }>();

/**
 * Has every worker of `workers` read its device cache file of `api`'s repository (docs/
 * SEARCH.md, "On the device"), once per pool and repository, and makes the page's map of
 * holders name what they read: the jobs of those chunks then go to the worker holding them.
 * The map starts in no repository state, so the first search of every version sends the
 * workers `live`, and chunks no longer stored leave the caches (and, at the next write, the
 * files). A file that cannot be read only costs its chunks' fetching; this never fails.
 * Nothing is read while the user has turned keeping the caches off ([`setDeviceCache`]).
 */
export function loadDeviceCache(api: Api, workers: SearchWorkers): Promise<void> {
  if (!deviceCacheOn()) return Promise.resolve();
  const repo = cacheKey(api);
  const known = deviceLoads.get(workers);
  if (known?.repo === repo) return known.done;
  const bytes = workerBudget(workers);
  const done = (async () => {
    const answers = await Promise.all(
      Array.from({ length: workers.size }, (_, w) =>
        workers.call(w, 'loadCache', { key: repo, slot: w, bytes }).catch(() => null),
      ),
    );
    // A search of this pool and repository already routes by what the workers hold.
    if (holders.get(workers)?.repo === repo) return;
    const at = new Map<string, number>();
    answers.forEach((a, w) => {
      if (a) for (let k = 0; k < a.fps.length / FP_LEN; k++) at.set(fpHex(a.fps, k), w);
    });
    holders.set(workers, { repo, state: '', at, generation: 1 });
  })();
  const load = { repo, done, settled: false };
  void done.then(() => (load.settled = true));
  deviceLoads.set(workers, load);
  return done;
}

/**
 * Whether the workers of `workers` may hold chunks of `api`'s repository on the device that
 * they have not read yet ([`loadDeviceCache`] not called, or under way).
 */
function deviceUnread(api: Api, workers: SearchWorkers): boolean {
  if (!deviceCacheOn()) return false;
  const load = deviceLoads.get(workers);
  return load?.repo !== cacheKey(api) || !load.settled;
}

/**
 * Empties the search workers' caches (when given) and deletes every search cache file of
 * this origin: the Search tab's Clear. A search the page runs behind the server's answer
 * ([`fills`]) is let finish first: it would otherwise cache, and write to the device, what
 * it scans after the clear.
 */
export async function clearDeviceCache(workers: SearchWorkers | null): Promise<void> {
  if (workers) {
    await stopReadAhead(workers).stopped;
    for (let fill = fills.get(workers); fill; fill = fills.get(workers)) await fill;
    // Before the workers empty their caches: a search sent after this starts a new map.
    holders.delete(workers);
    await Promise.all(
      Array.from({ length: workers.size }, (_, w) => workers.call(w, 'clearCache', null).catch(() => {})),
    );
  }
  await deleteDeviceCache();
}

/**
 * Runs `jobs` on the workers. A job with an `owner` runs on that worker (its cache holds the
 * job's chunks): all of a worker's own jobs are sent at once, since it scans them from
 * memory and should not wait for the page between two. The others go [`LANES`] in flight
 * per worker (the next ranges download while one is scanned): a job with a `share` to that
 * worker only, the rest to whichever worker is free first. `sent(w)` is called once no
 * more jobs will go to worker `w`: a worker handles its messages in order, so what follows
 * its jobs can be sent then, without a round trip through the page's thread.
 * Once a job fails, or `halted` answers true, no more are sent; a failure is thrown once every job sent has
 * settled: a search that starts over then finds no job of this one still running in its
 * workers (it would add its records to the new search's).
 */
/**
 * Jobs in flight per worker: a worker decodes one at a time, while the ranges of the next
 * ones download (each spans at most [`JOB_STORED_BYTES`]).
 */
const LANES = 4;

async function scatter<J>(
  workers: SearchWorkers,
  jobs: J[],
  owner: (job: J) => number | undefined,
  share: (job: J) => number | undefined,
  run: (w: number, job: J) => Promise<void>,
  onDone: () => void,
  sent: (w: number) => void,
  halted: () => boolean = () => false,
) {
  const own: J[][] = Array.from({ length: workers.size }, () => []);
  const shares: J[][] = Array.from({ length: workers.size }, () => []);
  const free: J[] = [];
  for (const j of jobs) {
    const w = owner(j);
    const s = share(j);
    if (w !== undefined && w < workers.size) own[w].push(j);
    else if (s !== undefined && s < workers.size) shares[s].push(j);
    else free.push(j);
  }
  let failed = false;
  const runOne = async (w: number, job: J) => {
    if (failed || halted()) return;
    try {
      await run(w, job);
    } catch (e) {
      failed = true;
      throw e;
    }
    onDone();
  };
  // Jobs without a share in contiguous parts, one per worker: jobs next to each other in
  // storage order share their delta bases more often than jobs far apart, and a worker
  // fetches a base once for all its jobs. A worker whose jobs are done takes from the far
  // end of the largest part; never a job with a share, whose chains the other worker
  // decodes anyway (taking one would decode them twice).
  const parts: J[][] = Array.from({ length: workers.size }, (_, w) =>
    free.slice(Math.floor((w * free.length) / workers.size), Math.floor(((w + 1) * free.length) / workers.size)),
  );
  const next = (w: number): J | undefined => {
    const mine = shares[w].shift() ?? parts[w].shift();
    if (mine !== undefined) return mine;
    const largest = parts.reduce((a, b) => (b.length > a.length ? b : a));
    return largest.pop();
  };
  const lanesLeft = Array.from({ length: workers.size }, () => LANES);
  const settled = await Promise.allSettled([
    ...own.flatMap((list, w) => list.map((job) => runOne(w, job))),
    ...Array.from({ length: workers.size * LANES }, async (_, lane) => {
      const w = lane % workers.size;
      for (let job = next(w); job !== undefined && !failed && !halted(); job = next(w)) await runOne(w, job);
      if (--lanesLeft[w] === 0 && !failed) sent(w);
    }),
  ]);
  const error = settled.find((r) => r.status === 'rejected');
  if (error) throw error.reason;
}

/**
 * Runs a physical phase's `jobs` ([`scatter`]): a job goes to the worker holding its first
 * chunk, else by its share; a worker that then caches a job's chunks becomes their holder.
 * `read` is told the stored bytes each job read from the server.
 */
function scanJobs(
  workers: SearchWorkers,
  jobs: Job[],
  held: Holders,
  read: (storedBytes: number) => void,
  onDone: () => void,
  sent: (w: number) => void,
  halted?: () => boolean,
): Promise<void> {
  return scatter(
    workers,
    jobs,
    (j) => held.at.get(j.fps[0]),
    (j) => j.share,
    async (w, { job, fps }) => {
      const r = await workers.call(w, 'scan', job);
      read(r.storedBytes);
      if (r.cached)
        for (const fp of fps)
          if (held.at.get(fp) !== w) {
            held.at.set(fp, w);
            held.generation++;
          }
    },
    onDone,
    sent,
    halted,
  );
}

type Engine = (
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
/**
 * A worker's cache holds the links of base chains it fetched without checking them (they
 * serve only as bases: every chunk decoded from them is checked); one named damaged by a
 * failed decode is dropped from the cache, and the search starts over to fetch it again
 * (wasm-core's `ContainerScan.scan`).
 */
const DROPPED_BASE = /a cached delta base was damaged and is dropped/;
/**
 * A worker refused a chunk it read (what it decodes to has another fingerprint, or does not
 * decode): the copy on the server's disk may be damaged, or the bytes were on the way. The
 * chunk is asked for once more, checked by the server, which quarantines a damaged copy
 * (docs/API.md, `damaged`), and the search starts over from locations read again: one
 * damaged on disk is then named as not stored with the file that needs it, one damaged on
 * the way is read again.
 */
const REFUSED_CHUNK = /\bchunk ([0-9a-f]{40}): /;
const ATTEMPTS = 3;

/**
 * Earlier builds kept tiny records in this IndexedDB database (removed only by a later
 * search); a page that searches deletes it, so nothing of theirs stays on the disk.
 */
let staleStoreDropped = false;
function dropStaleStore() {
  if (staleStoreDropped) return;
  staleStoreDropped = true;
  indexedDB.deleteDatabase('ditto-search');
}

/**
 * Runs `engine`; a search starts over when it read a container the server has since moved
 * (from a new listing), when a worker dropped a damaged base from its cache or refused a
 * chunk it read, or when a worker crashed under it (the bridge replaced it, without the
 * records of this search it held).
 */
function withRetry(engine: Engine): Engine {
  return async (...args) => {
    dropStaleStore();
    // Counted from the first attempt to the last: a read-ahead starts only on an idle pool.
    const workers = args[1];
    searchesRunning.set(workers, (searchesRunning.get(workers) ?? 0) + 1);
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          return await engine(...args);
        } catch (e) {
          if (attempt < ATTEMPTS && e instanceof Error && CONTAINER_GONE.test(e.message)) {
            dropLocations(args[0]);
            continue;
          }
          if (attempt < ATTEMPTS && e instanceof Error && DROPPED_BASE.test(e.message)) continue;
          const refused = e instanceof Error ? REFUSED_CHUNK.exec(e.message) : null;
          if (attempt < ATTEMPTS && refused) {
            // Its answer matters only to the server, which quarantines a damaged copy.
            await args[0].getChunks([refused[1]]).catch(() => {});
            dropLocations(args[0]);
            continue;
          }
          if (attempt < ATTEMPTS && e instanceof WorkerError && e.crashed) continue;
          // The page's account of the recipes a worker keeps is wrong: they go with the
          // next attempt.
          if (attempt < ATTEMPTS && e instanceof Error && e.message.includes(RECIPES_NOT_HELD)) {
            recipesHeld.delete(workers);
            continue;
          }
          throw asRefusedQuery(e);
        }
      }
    } finally {
      searchesRunning.set(workers, searchesRunning.get(workers)! - 1);
    }
  };
}

/** DedupSearch: prepare, physical phase, logical phase. */
export const dedupSearch = withRetry(dedupSearchAs);
/** The naive search: prepare, then every file reassembled and scanned. */
export const naiveSearch = withRetry(naiveSearchAs);

/**
 * A search in the page run behind one the server answered for a page that held nothing of
 * the repository ([`coldOnServer`]), by pool: it fills the workers' caches. A search the
 * page starts meanwhile waits for it, since both give the workers their keywords.
 */
const fills = new WeakMap<SearchWorkers, Promise<string | null>>();

async function dedupSearchAs(
  api: Api,
  workers: SearchWorkers,
  query: SearchQuery,
  scope: SearchScope,
  progress: (p: SearchProgress) => void,
): Promise<SearchOutcome> {
  // A read-ahead stops at once, its jobs in flight ending while this search starts.
  const ahead = stopReadAhead(workers);
  const t0 = performance.now();
  await fills.get(workers);
  // A read-ahead stopped short leaves the page holding part of the scope, which the page
  // would fetch and decode now, and workers still reading their device files would keep the
  // search waiting for them: the server answers instead, and the page searches behind it.
  if (
    (scope.where ?? 'auto') === 'auto' &&
    (ahead.unfinished || deviceUnread(api, workers) || !(await pageHoldsAny(api, workers)))
  ) {
    const ready = Promise.all([ahead.stopped, loadDeviceCache(api, workers)]).then(() => {});
    const answered = await coldOnServer(api, workers, query, scope, t0, ready);
    if (answered) return answered;
  }
  await ahead.stopped;
  return searchAnywhere(api, workers, query, scope, progress, t0);
}

/**
 * Whether the search workers hold any chunk of this repository, in memory or in the files
 * they keep on the device (read first): a page that holds nothing would fetch and decode
 * every chunk in scope, which the server, holding them decoded, answers several times faster.
 */
async function pageHoldsAny(api: Api, workers: SearchWorkers): Promise<boolean> {
  await loadDeviceCache(api, workers);
  const h = holders.get(workers);
  return h?.repo === cacheKey(api) && h.at.size > 0;
}

/**
 * The first search of a page that holds nothing of the repository, or has not read yet what
 * it holds (docs/SEARCH.md, "Which one runs"): answered by the server, then run in the page
 * behind it ([`fills`]) once the workers are `ready`, so the searches that follow run in the
 * page from what it cached. Undefined when the server's search failed: the page then
 * searches itself. The server is asked at once, with the query as typed (it reads it as the
 * workers do), while the page learns the repository's state and parses the keywords itself
 * (the workers may be busy reading).
 */
async function coldOnServer(
  api: Api,
  workers: SearchWorkers,
  query: SearchQuery,
  scope: SearchScope,
  t0: number,
  ready: Promise<void>,
): Promise<SearchOutcome | undefined> {
  const asked = askServer(api, query, scope, workers.signal);
  asked.catch(() => {}); // awaited below
  const [repo, keywords] = await Promise.all([repoState(api), pageKeywords(query)]);
  // Above the workers' cache the server searches anyway (its failure is the search's), and
  // the page would cache nothing.
  const large = onServer(scope, repo.uniqueRawBytes);
  let answered: SearchOutcome;
  try {
    answered = await serverSearch(api, keywords, query, scope, repo, t0, workers.signal, asked);
  } catch (e) {
    if (large) throw e;
    return undefined;
  }
  if (large) return answered;
  const fill = ready
    .then(() => searchAnywhere(api, workers, query, { ...scope, where: 'page' }, () => {}, performance.now()))
    .then(
      () => null,
      (e: unknown) => (e instanceof Error ? e.message : String(e)),
    );
  fills.set(workers, fill);
  void fill.then(() => {
    if (fills.get(workers) === fill) fills.delete(workers);
  });
  return { ...answered, filling: fill };
}

/** DedupSearch where the scope says, `auto` choosing by the repository's size. */
async function searchAnywhere(
  api: Api,
  workers: SearchWorkers,
  query: SearchQuery,
  scope: SearchScope,
  progress: (p: SearchProgress) => void,
  t0: number,
): Promise<SearchOutcome> {
  await preloaded(api, scope);
  // The workers parse the keywords while the page asks for the repository's state.
  const last = speculative(api, scope);
  let checked: Promise<RepoState> | undefined;
  let early: Promise<Prepared> | undefined;
  if (last) {
    // The previous search's scope is searched while the page checks that the repository
    // is unchanged; should it have changed, that result is dropped and the search starts
    // over, its scope prepared while the workers finish the attempt. A worker handles its
    // messages in order, so the jobs follow `begin` unawaited. The state is asked for
    // first: its answer then comes before the workers take both cores.
    checked = repoState(api);
    checked.then(
      (repo) => {
        if (repo.state === last.state || onServer(scope, repo.uniqueRawBytes)) return;
        early = prepare(api, scope, progress, repo);
        early.catch(() => {}); // awaited below
      },
      () => {}, // awaited below, once the attempt has settled
    );
    last.cached = true;
    const begun = begin(api, workers, query);
    // Refused keywords reject `begun` while the attempt's jobs still run; the attempt reads
    // that error once they fail, so the rejection is handled from the start.
    begun.catch(() => {});
    const attempt = searchPrepared(api, workers, begun, last, progress, t0).then(
      (outcome) => ({ outcome }),
      // Keywords the workers refused fail every job: their own error says why.
      async (error: unknown) => ({
        error: await begun.then(
          () => error,
          (e: unknown) => e,
        ),
      }),
    );
    const r = await attempt;
    const repo = await checked;
    if (repo.state === last.state) {
      if ('error' in r) throw r.error;
      // Done when the state is known too.
      return { ...r.outcome, totalMs: performance.now() - t0 };
    }
  }
  // A search that goes to the server asks it at once, while the page reads the state and the
  // workers parse the keywords.
  const ahead = serverAhead(api, query, scope, workers.signal);
  const [repo, keywords] = await Promise.all([checked ?? repoState(api), begin(api, workers, query)]).catch(
    (e: unknown) => {
      ahead?.callOff();
      throw e;
    },
  );
  if (onServer(scope, repo.uniqueRawBytes))
    return serverSearch(api, keywords, query, scope, repo, t0, workers.signal, ahead?.asked);
  ahead?.callOff();
  const prepared = await (early ?? prepare(api, scope, progress, repo));
  return searchPrepared(api, workers, Promise.resolve(keywords), prepared, progress, t0);
}

/**
 * The server asked at once when the search will likely run there: chosen, or `auto` on a
 * repository that was above the workers' cache when its state was last read (as
 * [`coldOnServer`] asks before it knows). Called off when `auto` finds it smaller now.
 */
function serverAhead(api: Api, query: SearchQuery, scope: SearchScope, signal: AbortSignal) {
  if (!onServer(scope, repoCache(api).uniqueRawBytes ?? 0)) return null;
  const off = new AbortController();
  const asked = askServer(api, query, scope, AbortSignal.any([signal, off.signal]));
  asked.catch(() => {}); // awaited by the search, or called off
  return { asked, callOff: () => off.abort() };
}

/** Whether DedupSearch runs on the server, for a repository of this much unique raw data. */
function onServer(scope: SearchScope, uniqueRawBytes: number): boolean {
  const where = scope.where ?? 'auto';
  return where === 'server' || (where === 'auto' && uniqueRawBytes > SERVER_SEARCH_ABOVE);
}

/**
 * The scope the previous search prepared, if this search has the same scope and would run
 * in the page: the search that may reuse it before the repository's state is known.
 */
function speculative(api: Api, scope: SearchScope): Prepared | undefined {
  const p = repoCache(api).last;
  if (!p || p.scope !== scopeOf(scope) || onServer(scope, p.uniqueRawBytes)) return undefined;
  return p;
}

/** The physical and the logical phase over a prepared scope; `keywords` is `begin`'s answer. */
async function searchPrepared(
  api: Api,
  workers: SearchWorkers,
  keywords: Promise<Uint8Array[]>,
  prepared: Prepared,
  progress: (p: SearchProgress) => void,
  t0: number,
): Promise<SearchOutcome> {
  await loadDeviceCache(api, workers);
  const held = matchCaches(api, workers, prepared, 'useCache');
  const t1 = performance.now();

  const jobs = containerJobs(prepared, held, workers.size);
  let done = 0;
  let storedBytesRead = 0;
  let containersRead = 0;
  progress({ phase: 'physical', done: 0, total: jobs.length });
  const finishing: Promise<{ db: Uint8Array; tiny: Uint8Array; stats: PhysicalStats }>[] = [];
  await scanJobs(
    workers,
    jobs,
    held,
    (read) => {
      storedBytesRead += read;
      if (read > 0) containersRead++;
    },
    () => progress({ phase: 'physical', done: ++done, total: jobs.length }),
    (w) => {
      finishing[w] = workers.call(w, 'finishScan', null);
      finishing[w].catch(() => {}); // awaited below unless a job failed first
    },
  );
  const finished = await Promise.all(finishing);
  const t2 = performance.now();

  progress({ phase: 'logical', done: 0, total: prepared.files.length });
  // With many records (many matches to report), each worker walks a part of the recipes
  // with every worker's records; with few, one worker walks them all, which costs less than
  // a second worker reading every record too. The recipes are kept with the prepared scope
  // for the next search, so they are copied, not transferred; the records are copied to
  // every worker but the last, which takes them. A worker gets its message when `call` is
  // made, so the calls go out in order.
  const dbs = finished.map((f) => f.db);
  const tiny = finished.map((f) => f.tiny);
  const recordBytes = [...dbs, ...tiny].reduce((n, d) => n + d.byteLength, 0);
  const split = recordBytes > LOGICAL_SPLIT_BYTES ? workers.size : 1;
  if (prepared.batches?.workers !== split)
    prepared.batches = {
      workers: split,
      parts: batches(prepared.files, split).map((run) => ({ key: ++recipeKeys, ...run })),
    };
  const { parts } = prepared.batches;
  let kept = recipesHeld.get(workers);
  if (!kept) recipesHeld.set(workers, (kept = []));
  const answers = await Promise.all(
    parts.map(async ({ key, from, to }, w) => {
      const recipes = kept[w] === key ? { key } : { key, files: batch(prepared, from, to) };
      const answer = await workers.call(
        w,
        'logical',
        { dbs, tiny, recipes },
        w === parts.length - 1 ? { transfer: [...dbs, ...tiny].map((d) => d.buffer) } : undefined,
      );
      kept[w] = key;
      return answer;
    }),
  );
  refusePast(countMatches(answers.map((a) => a.matches)), answers[0].limit);
  const r = {
    matches: answers.map((a) => a.matches),
    stats: sumOf(answers.map((a) => a.stats)),
    // Every part read the same records.
    db: answers[0].db,
  };
  progress({ phase: 'logical', done: prepared.files.length, total: prepared.files.length });
  const t3 = performance.now();

  const physical = {
    ...sumOf(finished.map((f) => f.stats)),
    containers: new Set(jobs.map((j) => j.job.id)).size,
    rangesRead: containersRead,
  };
  const results = collect(prepared.files, r.matches);
  const t4 = performance.now(); // the results are ready
  // For the next search, in the time that follows (not before the results are collected,
  // which would share the two cores with it): the workers summarise what they cached and
  // write it to the device (`settled`), and the page cuts the jobs for the holders as they
  // now are.
  const settled = idleWorkers(workers, true);
  setTimeout(() => containerJobs(prepared, held, workers.size));
  return {
    engine: 'dedup',
    where: 'page',
    state: prepared.state,
    keywords: await keywords,
    results,
    matches: countMatches(r.matches),
    filesSearched: prepared.files.length,
    logicalBytes: prepared.logicalBytes,
    phaseMs: { prepare: t1 - t0, physical: t2 - t1, logical: t3 - t2 },
    totalMs: t4 - t0,
    storedBytesRead,
    physical,
    logical: r.stats,
    db: r.db,
    files: prepared.files,
    prepareCached: prepared.cached,
    settled,
  };
}

/**
 * DedupSearch by the server (`POST search`: the same engine, native), its answer `asked` if
 * already asked for. The server reads the query as typed with the function the workers read
 * it with (`parse_keyword_lines`), so both engines search the same bytes; `keywords` (the
 * workers' reading) go with the outcome. `signal` (the workers' pool's: Cancel terminates
 * it) aborts the request.
 */
async function serverSearch(
  api: Api,
  keywords: Uint8Array[],
  query: SearchQuery,
  scope: SearchScope,
  repo: RepoState,
  t0: number,
  signal: AbortSignal,
  asked = askServer(api, query, scope, signal),
): Promise<SearchOutcome> {
  const r = await decodeSearchAnswer(await asked);
  // The page's list of versions and the server's search are read apart: a commit or a
  // forget between them leaves the answer of another state than `repo`. The list is read
  // again; an answer still of another state is labelled as such, so that it is never paired
  // with a search of `repo`'s state (the Search tab compares outcomes of one state).
  if (r.versions && !sameVersions(r.versions, repo.all)) {
    const again = await repoState(api).catch(() => null);
    repo = again && sameVersions(r.versions, again.all) ? again : { ...repo, state: `server:${r.versions.join(',')}` };
  }
  const sources = new Map(repo.all.map((v) => [v.id, v.source]));
  const files: SearchFile[] = r.files.map((f, id) => ({
    id,
    version: f.version,
    source: sources.get(f.version) ?? '',
    path: f.path,
    size: f.size,
    recipe: f.recipe,
    lengths: f.lengths,
  }));
  const results: FileHits[] = r.files.map((f, k) => ({
    file: files[k],
    hits: new Hits(f.hits),
  }));
  const totalMs = performance.now() - t0;
  return {
    engine: 'dedup',
    where: 'server',
    state: repo.state,
    keywords,
    results,
    matches: r.matches,
    filesSearched: r.files_searched,
    logicalBytes: r.logical_bytes,
    phaseMs: r.phase_ms,
    totalMs,
    storedBytesRead: 0,
    files,
  };
}

/** Whether `ids` (ascending) are the ids of `versions`. */
function sameVersions(ids: number[], versions: { id: number }[]): boolean {
  if (ids.length !== versions.length) return false;
  const sorted = versions.map((v) => v.id).sort((a, b) => a - b);
  return ids.every((id, k) => id === sorted[k]);
}

/** `POST search` of the query as typed: the server reads its lines as the workers do. */
function askServer(api: Api, query: SearchQuery, scope: SearchScope, signal: AbortSignal) {
  return api.search(
    {
      text: query.keywords,
      hex: query.hex,
      files_only: query.filesOnly,
      versions: scope.versions ?? undefined,
      path: scope.pathFilter,
    },
    signal,
  );
}

/**
 * Files per naive job: about 1/8 of each worker's share, within [256 KiB, 8 MiB] (a big file
 * is a job on its own): enough jobs to balance the workers, few enough to keep requests large.
 */
function naiveJobBytes(total: number, workers: number): number {
  return Math.min(8 << 20, Math.max(256 << 10, total / (workers * 8)));
}

async function naiveSearchAs(
  api: Api,
  workers: SearchWorkers,
  query: SearchQuery,
  scope: SearchScope,
  progress: (p: SearchProgress) => void,
): Promise<SearchOutcome> {
  const ahead = stopReadAhead(workers);
  const t0 = performance.now();
  await fills.get(workers);
  await ahead.stopped;
  await preloaded(api, scope);
  const [prepared, keywords] = await Promise.all([
    repoState(api).then((repo) => prepare(api, scope, progress, repo)),
    begin(api, workers, query),
  ]);
  const t1 = performance.now();

  const jobBytes = naiveJobBytes(prepared.logicalBytes, workers.size);
  // Runs of files of about `jobBytes` each.
  const jobs: { from: number; to: number }[] = [];
  let from = 0;
  let bytes = 0;
  prepared.files.forEach((f, i) => {
    bytes += f.size;
    if (bytes >= jobBytes) {
      jobs.push({ from, to: i + 1 });
      from = i + 1;
      bytes = 0;
    }
  });
  if (from < prepared.files.length) jobs.push({ from, to: prepared.files.length });
  const matches: Float64Array[] = [];
  let storedBytesRead = 0;
  let naiveBytes = 0;
  let done = 0;
  progress({ phase: 'scan', done: 0, total: jobs.length });
  await scatter(
    workers,
    jobs,
    () => undefined,
    () => undefined,
    async (w, { from, to }) => {
      const b = batch(prepared, from, to);
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
      refusePast(countMatches(matches), r.limit);
      storedBytesRead += r.storedBytes;
      naiveBytes += r.bytes;
    },
    () => progress({ phase: 'scan', done: ++done, total: jobs.length }),
    () => {},
  );
  const t2 = performance.now();
  const results = collect(prepared.files, matches);
  return {
    engine: 'naive',
    where: 'page',
    state: prepared.state,
    keywords,
    results,
    matches: countMatches(matches),
    filesSearched: prepared.files.length,
    logicalBytes: prepared.logicalBytes,
    phaseMs: { prepare: t1 - t0, scan: t2 - t1 },
    totalMs: performance.now() - t0, // with the results ready
    storedBytesRead,
    naiveBytes,
    files: prepared.files,
  };
}

/**
 * Fails the search when the workers' parts answered more matches in all than a search may
 * (each part stops at the limit itself): the page would hold them all, and the server
 * refuses such a search too.
 */
function refusePast(matches: number, limit: number) {
  if (matches > limit) throw new QueryRefused(tooManyMatches(limit));
}

/** How many matches (file, keyword, offset triples) the parts hold. */
function countMatches(parts: Float64Array[]): number {
  return parts.reduce((n, m) => n + m.length / 3, 0);
}

/** Compares two outcomes hit by hit: how many (file, keyword, offset) each has alone. */
export function compareOutcomes(a: SearchOutcome, b: SearchOutcome): { onlyA: number; onlyB: number } {
  const key = (r: FileHits, h: Hit) => `${r.file.version}\u0000${r.file.path}\u0000${h.keyword}\u0000${h.offset}`;
  const setA = new Set(a.results.flatMap((r) => r.hits.slice(0).map((h) => key(r, h))));
  const setB = new Set(b.results.flatMap((r) => r.hits.slice(0).map((h) => key(r, h))));
  let onlyA = 0;
  for (const k of setA) if (!setB.has(k)) onlyA++;
  let onlyB = 0;
  for (const k of setB) if (!setA.has(k)) onlyB++;
  return { onlyA, onlyB };
}
