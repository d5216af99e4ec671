/// <reference lib="webworker" />
/**
 * A search worker. For DedupSearch it runs the physical phase over the containers it is given
 * (fetching each stored byte range once, decoding and scanning it in wasm-core, its records
 * kept until the phase ends) and, on one worker, the logical phase over the file recipes. A delta
 * chunk is decoded against its base (wasm-core's `resemble::range`, the codec the server
 * writes with) from the same range, the worker's cache, or `chunks/get` as stored (a base
 * that is a delta itself comes in the same answer, its chain resolved here), and scanned
 * once like any other chunk. For the
 * naive baseline it reassembles whole files from `chunks/get` bundles and scans them.
 */
import init, {
  ChunkCache,
  ContainerScan,
  FetchedBases,
  FileRecipes,
  HeapReserve,
  NaiveScan,
  RecipeSearch,
  SearchKeywords,
  searchMatchLimit,
} from '../wasm-pkg/wasm_core.js';
import { Api, ApiError } from '../api/client';
import { fpHex, fpHexes, FP_LEN } from '../backup/hex';
import { CODEC_DELTA, keywordBytes, RECIPES_NOT_HELD, TooManyMatches, type StoredChunks } from './protocol';
import { deleteCacheFile, readCacheFile, writeCacheFile } from './deviceCache';
import { expose, transfer, type Context } from '../worker/bridge';
import { coldKeywordSets, coldSample, coldStep, COLD_WARM_UP_ROUNDS } from './warmup';
import { Turns } from './turns';
import type { ContainerJob, FileBatch, SearchApi, SearchQuery } from './protocol';

/**
 * At most this many held bases named in `chunks/get`'s `have` (the server takes 256): the
 * most named ones, where most chains stop; a base left out only costs its bytes again.
 */
const HAVE_MAX = 64;
/** Fingerprints `chunks/get` takes in `have`. */
const HAVE_LIMIT = 256;

/** The hex fingerprints of `fps` (flat, 20 bytes each) and of `more`. */
function hexSet(fps: Uint8Array, more?: Uint8Array): Set<string> {
  return new Set([...hexList(fps), ...hexList(more)]);
}

function hexList(fps?: Uint8Array): string[] {
  return fps ? fpHexes(fps, fps.length / FP_LEN) : [];
}

/** The fingerprints of `want` (flat) that none of `jobs` reads. */
function notIn(want: Uint8Array, jobs: { reads: Set<string> }[]): Uint8Array {
  return keepOnly(want, (fp) => !jobs.some((j) => j.reads.has(fp)));
}

/** The fingerprints of `want` (flat) that `keep` keeps. */
function keepOnly(want: Uint8Array, keep: (fp: string) => boolean): Uint8Array {
  const kept = hexList(want).flatMap((fp, i) => (keep(fp) ? [i] : []));
  const out = new Uint8Array(kept.length * FP_LEN);
  kept.forEach((k, i) => out.set(want.subarray(k * FP_LEN, (k + 1) * FP_LEN), i * FP_LEN));
  return out;
}

interface Current {
  /** Null for a read-ahead (`begin` without a query): its jobs only fill the cache. */
  query: SearchQuery | null;
  keywords: SearchKeywords | null;
  scan: ContainerScan;
  api: Api;
  /** The decoded-chunk cache of the repository searched (`useCache`). */
  chunks: ChunkCache | null;
  /** Delta chunks' bases fetched (`chunks/get`, as stored) because no range read or cache held them. */
  basesFetched: number;
  /** Their stored bytes (`chunks/get` answers). */
  basesBytes: number;
  /** Jobs that fetched bases, and their `chunks/get` requests for them. */
  baseJobs: number;
  baseRequests: number;
  /** Links of base chains read with the jobs' own ranges (`ContainerJob.links`). */
  linksInRange: number;
  /** The order the jobs that fetch a range decode in. */
  turns: Turns;
  /**
   * The jobs that asked for a range and have not ended, each with the chunks and links it
   * reads and the bases it fetched early (hex fingerprints): what a later job can expect
   * them to decode, and the links its chains may stop at.
   */
  pending: Set<{ reads: Set<string>; links: string[] }>;
  /**
   * Jobs still running. The page sends `finishScan` right behind a worker's last job, and a
   * job that fetches awaits its answer while the next message is handled: `finishScan` waits
   * for these first.
   */
  running: Set<Promise<unknown>>;
}
let cur: Current | null = null;
/** wasm-core's memory, where a device cache file is read into. */
let memory: WebAssembly.Memory | null = null;

/**
 * Decoded chunks kept across searches (wasm-core's `ChunkCache`): a repeat search scans them
 * without fetching or decoding again. Keyed by the repository (`useCache`'s `key`); when the
 * repository changes (a backup, a forget, a prune) it keeps the chunks still stored, which a
 * fingerprint names as surely as before, so a search after a backup fetches only what the
 * backup added. `slot` is the worker's index in its pool, which names its device cache file;
 * `written` is the cache's `changes()` when it was last written to or read from that file.
 */
let cache: { key: string; slot: number; chunks: ChunkCache; written: number; persist: boolean } | null = null;

function chunkCache(key: string, slot: number, budget: number, persist: boolean, live?: Uint8Array): ChunkCache {
  if (cache && cache.key === key) {
    cache.slot = slot;
    cache.persist = persist;
    if (live) cache.chunks.retain(live);
    return cache.chunks;
  }
  cache?.chunks.free();
  const chunks = new ChunkCache(budget);
  cache = { key, slot, chunks, written: chunks.changes(), persist };
  return chunks;
}

/** The last write of the cache to the device asked for, while it or one before it runs. */
let saving: Promise<boolean> | null = null;

/**
 * Raw bytes of chunks per piece of a device cache file written (`ChunkCache.saveChunks`): a
 * message that arrives during a write (the next search) waits for one piece at most.
 */
const SAVE_PIECE_BYTES = 1 << 20;

/** Counts the searches and read-aheads begun: a write of the device file under way gives way to the next. */
let begun = 0;

/** Thrown to give up a write of the device file that a search or a change of the cache overtook. */
class GaveWay extends Error {}

/** Resolves in a later task of the worker's, after the messages that arrived before it. */
function nextTask(): Promise<void> {
  return new Promise((resolve) => {
    const tasks = new MessageChannel();
    tasks.port1.onmessage = () => {
      tasks.port1.close();
      resolve();
    };
    tasks.port2.postMessage(null);
  });
}

/**
 * Writes the cache to its device file if it changed since it was last written or read;
 * answers whether it wrote. The file is written a piece per task, so that a search that
 * starts meanwhile runs at once: the write then gives way (its `.tmp` file is removed, the
 * previous file stays) and the next idle time writes the cache as that search left it. So
 * does a write overtaken by a change of the cache (chunks dropped by `matchCache`, a
 * Clear), which would otherwise mix two states in one file. A write asked for while
 * another runs goes after it, not with it.
 */
function save(): Promise<boolean> {
  const before = saving;
  const next: Promise<boolean> = (async () => {
    await before?.catch(() => false);
    const c = cache;
    if (!c || !c.persist || c.chunks.changes() === c.written) return false;
    const changes = c.chunks.changes();
    const searches = begun;
    try {
      await writeCacheFile(c.key, c.slot, async function* () {
        yield c.chunks.save(c.key);
        for (;;) {
          await nextTask();
          if (cache !== c || c.chunks.changes() !== changes || begun !== searches || scanning) throw new GaveWay();
          const piece = c.chunks.saveChunks(SAVE_PIECE_BYTES);
          if (piece.length === 0) return;
          yield piece;
        }
      });
    } catch (e) {
      if (e instanceof GaveWay) return false;
      throw e;
    }
    c.written = changes;
    return true;
  })().finally(() => {
    if (saving === next) saving = null;
  });
  saving = next;
  return next;
}

/**
 * Raw bytes a slice of idle work summarises (`ChunkCache.summarize`): about a millisecond,
 * so that a message arriving meanwhile (the next search) waits at most that long.
 */
const SUMMARY_SLICE_BYTES = 1 << 20;

/**
 * Between searches the worker builds the trigram summaries of the chunks it cached, a
 * slice per task (a message to itself: timers would be clamped to 4 ms), so that the next
 * search reads only the ends of the chunks that cannot hold its keywords; then it warms its
 * code up and writes the cache to the device. The page starts it (`idle`) once a search has
 * ended, so that it competes with neither phase, and the worker once it has read its file;
 * nothing is summarised or written while a physical phase runs.
 */
let scanning = false;
/** A slice is queued (one chain of them at a time). */
let summarizing = false;
/** `idle` calls waiting for the chain to end. */
let idleWaiters: ((r: { saved: boolean }) => void)[] = [];

/**
 * Runs `step` once per task, from the next one on, while it answers true: a message to
 * itself, since timers would be clamped to 4 ms. A message for the worker (the next search)
 * waits at most one step.
 */
function perTask(step: () => boolean) {
  const tasks = new MessageChannel();
  tasks.port1.onmessage = () => {
    if (step()) tasks.port2.postMessage(null);
    else tasks.port1.close();
  };
  tasks.port2.postMessage(null);
}

/** One slice of idle work; the last one warms the code up and ends the chain. */
function idleStep(): boolean {
  summarizing = !scanning && !!cache && cache.chunks.summarize(SUMMARY_SLICE_BYTES) > 0;
  if (summarizing) return true;
  if (!scanning && cache && !warmedUp) warmUp(cache.chunks);
  void settle();
  return false;
}

function startIdle() {
  if (scanning || summarizing) return;
  summarizing = true;
  perTask(idleStep);
}

/**
 * The last `idle` came after a read-ahead (`save: false`): the cache is written after the
 * next search, not while its keywords are typed (the search would make that write give way
 * and write the cache again once it is done).
 */
let saveLater = false;

/** Ends a chain of idle work: writes the cache (unless a search started, or later) and answers `idle`. */
async function settle() {
  const saved = scanning || saveLater ? false : await save().catch(() => false);
  const waiters = idleWaiters;
  idleWaiters = [];
  for (const w of waiters) w({ saved });
}

/**
 * Raw bytes of cached chunks that [`warmUp`] scans (a few milliseconds), and its keywords: one
 * (the single-keyword path) and several (the automaton's), words that most chunks of text hold
 * some of and many lack, so that summaries both rule chunks out and let them through.
 */
const WARM_UP_BYTES = 2 << 20;
const WARM_UP_KEYWORDS = ['return', 'function\nreturn\nlength\nstring\nvalue\nnumber\ndefault\nimport'];
let warmedUp = false;

/**
 * The browser compiles a Wasm function when it is first called and optimises it once it has
 * run for a while. A first search from cold chunks never runs the code of a repeat search
 * (chunks scanned from the cache, their summaries tested, most blocks not read), so
 * the first repeat search would pay for compiling it and run it unoptimised. The worker runs
 * that code once over a sample of its cache, in idle time, with scans of its own that it
 * then drops.
 */
function warmUp(chunks: ChunkCache) {
  warmedUp = true;
  const fps = chunks.sample(WARM_UP_BYTES);
  if (fps.length === 0) return;
  for (const words of WARM_UP_KEYWORDS) {
    const keywords = new SearchKeywords(words, false, 2048);
    const scan = new ContainerScan(keywords, false);
    try {
      scan.scanCached(chunks, fps);
      scan.takeTiny();
      scan.stats();
      scan.finish();
    } finally {
      scan.free();
      keywords.free();
    }
  }
}

/**
 * Bytes a slice of a reserve touches: a couple of milliseconds, so that a search arriving
 * meanwhile waits at most that long.
 */
const RESERVE_SLICE_BYTES = 2 << 20;

/**
 * Memory grown ahead of a first search (`reserve`), touched a slice per task; a search or a
 * device cache read that starts meanwhile ends it, and what it grew by goes back to the
 * allocator, touched or not, for that work.
 */
let reserving: { heap: HeapReserve; done: (bytes: number) => void } | null = null;

function endReserve() {
  const r = reserving;
  if (!r) return;
  reserving = null;
  const bytes = r.heap.bytes();
  r.heap.free();
  r.done(bytes);
}

/** Runs the warm-up a step per task until done, a search begins or `stop`; answers the steps run. */
function warmUpCold(ctx: Context<never, 'stop'>): Promise<number> {
  let stopped = false;
  ctx.onSignal(() => (stopped = true));
  return new Promise((resolve) => {
    const sample = coldSample();
    const sets = coldKeywordSets(sample);
    const steps = Array.from({ length: COLD_WARM_UP_ROUNDS }, () => sets).flat();
    let ran = 0;
    perTask(() => {
      if (cur || scanning || stopped || ran === steps.length) {
        resolve(ran);
        return false;
      }
      coldStep(sample, steps[ran++]);
      return true;
    });
  });
}

function release() {
  if (!cur) return;
  cur.scan.free();
  cur.keywords?.free();
  cur = null;
}

function need(): Current {
  if (!cur) throw new Error('no search in progress in this worker');
  return cur;
}

/** The search in progress, which has keywords (not a read-ahead). */
function searching(): Current & { query: SearchQuery; keywords: SearchKeywords } {
  const c = need();
  if (!c.query || !c.keywords) throw new Error('a read-ahead has no keywords to search for');
  return c as Current & { query: SearchQuery; keywords: SearchKeywords };
}

/**
 * The chunks `idx` of `job` and the links of its that `cache` does not hold (a job of their
 * own: the byte range covering just them).
 */
function pick(job: ContainerJob, idx: Uint32Array, cache: ChunkCache): ContainerJob {
  const out: ContainerJob = { id: job.id, start: Infinity, end: 0, ...subset(job, idx) };
  const links = job.links;
  if (links) {
    const keep = Uint32Array.from(
      Array.from({ length: links.rawLens.length }, (_, k) => k).filter(
        (k) => !cache.holdsAll(links.fps.subarray(k * FP_LEN, (k + 1) * FP_LEN)),
      ),
    );
    if (keep.length > 0) out.links = subset(links, keep);
  }
  for (const c of [out, out.links])
    c?.offsets.forEach((o, i) => {
      out.start = Math.min(out.start, o);
      out.end = Math.max(out.end, o + c.storedLens[i]);
    });
  return out;
}

/** The chunks `idx` of `from`. */
function subset(from: StoredChunks, idx: Uint32Array): StoredChunks {
  const n = idx.length;
  const out: StoredChunks = {
    fps: new Uint8Array(n * FP_LEN),
    offsets: new Float64Array(n),
    storedLens: new Uint32Array(n),
    codecs: new Uint8Array(n),
    rawLens: new Uint32Array(n),
  };
  idx.forEach((k, i) => {
    out.fps.set(from.fps.subarray(k * FP_LEN, (k + 1) * FP_LEN), i * FP_LEN);
    out.offsets[i] = from.offsets[k];
    out.storedLens[i] = from.storedLens[k];
    out.codecs[i] = from.codecs[k];
    out.rawLens[i] = from.rawLens[k];
  });
  return out;
}

/** Scans a job: the chunks the cache holds from memory, the rest with one `Range` request. */
async function scanContainer(job: ContainerJob): Promise<{ storedBytes: number; cached: boolean }> {
  const c = need();
  const chunks = c.chunks;
  if (!chunks) throw new Error('scan before useCache');
  const missing = c.scan.scanCached(chunks, job.fps);
  let storedBytes = 0;
  if (missing.length > 0) {
    const rest = pick(job, missing, chunks);
    // Jobs decode in the order they came (the page sends a worker's jobs so that those
    // reading links come before the jobs whose chains run through them: `linksFirst`),
    // while their ranges download side by side: the links a job decodes from its range are
    // in the cache before a later job, whose chains run through them, looks for its bases.
    // A job fetches the bases no earlier job reads as soon as its range is here; one waiting
    // for bases from the server lets the next one go on meanwhile, as far as that one's bases
    // are at hand; what a job still lacks at its turn it fetches once all the jobs before it
    // have ended (they may have been about to decode it). `Turns` releases the turn however
    // the job ends, its set-up included.
    await c.turns.run(async ({ yielded, done, yieldTurn }) => {
      const before = [...c.pending];
      const mine = { reads: hexSet(rest.fps, rest.links?.fps), links: hexList(rest.links?.fps) };
      const fetched = new FetchedBases();
      c.pending.add(mine);
      try {
        const bytes = await c.api.containerBytes(rest.id, rest.start, rest.end);
        storedBytes = bytes.byteLength;
        const args = [bytes, rest.start, rest.fps, rest.offsets, rest.storedLens, rest.codecs, rest.rawLens] as const;
        if (rest.links) {
          const l = rest.links;
          c.linksInRange += fetched.addStored(bytes, rest.start, l.fps, l.offsets, l.storedLens, l.codecs, l.rawLens);
        }
        // Delta chunks decode against their bases: those neither this range nor the cache
        // holds come from `chunks/get` as stored, deltas included (a stored delta is a fraction
        // of its raw bytes), with their whole base chains in the same answer (`chains`), so a
        // job waits for one request, not one per link. `have` names the bases the cache holds
        // (the trained dictionary and frames above all), where the server stops a chain.
        // Bases the server says it does not store: the stored delta that names one is
        // damaged (its bytes name another base) or lost with it. They are not asked for
        // again; `scan` then refuses the chunk that needs one, naming it, and the search has
        // the server check that chunk (search.ts, `REFUSED_CHUNK`).
        const absent = new Set<string>();
        const notAbsent = (fp: string) => !absent.has(fp);
        const fetchBases = async (want: Uint8Array, expected: string[] = []): Promise<void> => {
          const fps = hexList(want);
          c.baseRequests++;
          const have = [...hexList(chunks.heldBases(HAVE_MAX)), ...expected];
          // Unchecked by the server (`verify: false`): `scan` checks every chunk it decodes
          // or takes from `fetched` against its fingerprint, as for the range's own.
          let bundle: Uint8Array;
          try {
            bundle = await c.api.getChunks(fps, undefined, false, 'stored', {
              have: have.slice(0, HAVE_LIMIT),
              unchecked: true,
            });
          } catch (e) {
            const missing = e instanceof ApiError && e.code === 'not_found' ? e.body.missing : null;
            const named = Array.isArray(missing) ? missing.filter((fp) => fps.includes(fp) && !absent.has(fp)) : [];
            if (named.length === 0) throw e;
            for (const fp of named) absent.add(fp);
            const rest = keepOnly(want, notAbsent);
            if (rest.length > 0) await fetchBases(rest, expected);
            return;
          }
          storedBytes += bundle.byteLength;
          c.basesFetched += fetched.add(bundle, want);
          c.basesBytes += bundle.byteLength;
        };
        const outside = () => {
          const want = c.scan.outsideBases(chunks, ...args, fetched);
          return absent.size ? keepOnly(want, notAbsent) : want;
        };
        const deltas = rest.codecs.includes(CODEC_DELTA);
        let fetchedEarly = false;
        if (deltas) {
          // The bases no earlier job of this worker reads are fetched as soon as the range is
          // here, while the jobs before this one decode: waiting for them would put one round
          // trip per job in a row. Their chains stop at the links those jobs read, which they
          // decode where a chain of theirs runs through them.
          const want = notIn(outside(), before);
          if (want.length > 0) {
            fetchedEarly = true;
            // This job decodes them: a later job leaves them to it.
            for (const fp of hexList(want)) mine.reads.add(fp);
            await fetchBases(
              want,
              before.flatMap((j) => j.links),
            );
          }
        }
        await yielded;
        // Whatever is still missing (a base an earlier job reads, or a link it did not
        // decode; the cache changed meanwhile) is fetched once the jobs before this one have
        // ended, so no two jobs of a worker fetch the same chains; the rounds go on while a
        // fetched chain misses a link, and wasm-core refuses a chain past the cap, so they end.
        if (deltas) {
          let want = outside();
          if (want.length > 0) {
            await done;
            want = outside();
          }
          if (want.length > 0 || fetchedEarly) c.baseJobs++;
          while (want.length > 0) {
            yieldTurn();
            await fetchBases(want);
            want = outside();
          }
        }
        c.scan.scan(chunks, ...args, fetched);
      } finally {
        c.pending.delete(mine);
        fetched.free();
      }
    });
  }
  if (c.scan.overflowed()) throw new TooManyMatches(searchMatchLimit());
  return { storedBytes, cached: chunks.holdsAll(job.fps) };
}

/**
 * The recipes this worker's logical phase last walked, kept for the next search of the same
 * scope: the page sends them again only for another scope or to a replaced worker.
 */
let recipes: { key: number; held: FileRecipes } | null = null;

function logical(dbs: Uint8Array[], tiny: Uint8Array[], given: { key: number; files?: FileBatch }) {
  const c = searching();
  if (given.files) {
    const { ids, counts, fps, lengths } = given.files;
    recipes?.held.free();
    recipes = null;
    recipes = { key: given.key, held: new FileRecipes(ids, counts, fps, lengths) };
  } else if (recipes?.key !== given.key) throw new Error(RECIPES_NOT_HELD);
  const search = new RecipeSearch(c.keywords, c.query.filesOnly);
  try {
    for (const db of dbs) search.addResults(db);
    for (const t of tiny) search.addTiny(t);
    search.searchFiles(recipes.held);
    if (search.overflowed()) throw new TooManyMatches(searchMatchLimit());
    const [nFiles, chunks, chunkHits, locationReads, tinyLookups, matches] = search.stats();
    const [chunkResults, chunkResultBytes, locationLists, longLocationLists, locationListBytes, infixLists] =
      search.dbStats();
    return {
      matches: search.takeMatches(),
      stats: { files: nFiles, chunks, chunkHits, locationReads, tinyLookups, matches },
      db: { chunkResults, chunkResultBytes, locationLists, longLocationLists, locationListBytes, infixLists },
      limit: searchMatchLimit(),
    };
  } finally {
    search.free();
  }
}

/**
 * Splits the files' chunks into `chunks/get` requests of about `requestBytes` raw: each with
 * its fingerprints as hex (asked) and as bytes (checked against the answer's).
 */
function naiveRequests(
  files: FileBatch,
  requestBytes: number,
): { fps: string[]; asked: Uint8Array; fileOf: Uint32Array }[] {
  const out: { fps: string[]; asked: Uint8Array; fileOf: Uint32Array }[] = [];
  let fps: string[] = [];
  let fileOf: number[] = [];
  let bytes = 0;
  let at = 0;
  const cut = () => {
    const asked = files.fps.subarray((at - fps.length) * FP_LEN, at * FP_LEN);
    out.push({ fps, asked, fileOf: Uint32Array.from(fileOf) });
    fps = [];
    fileOf = [];
    bytes = 0;
  };
  for (let k = 0; k < files.ids.length; k++) {
    for (let j = 0; j < files.counts[k]; j++) {
      fps.push(fpHex(files.fps, at));
      fileOf.push(files.ids[k]);
      bytes += files.lengths[at];
      at++;
      if (bytes >= requestBytes) cut();
    }
  }
  if (fps.length) cut();
  return out;
}

async function naive(files: FileBatch, requestBytes: number) {
  const c = searching();
  const requests = naiveRequests(files, requestBytes);
  // A scanner per job: the page keeps two jobs in flight per worker, and their bundles
  // interleave at every await; one shared scanner would mix their files.
  const scan = new NaiveScan(c.keywords, c.query.filesOnly);
  let storedBytes = 0;
  try {
    // One request ahead: the next bundle downloads while this one is scanned.
    let next = requests.length ? c.api.getChunks(requests[0].fps) : null;
    for (let r = 0; r < requests.length; r++) {
      const bundle = await next!;
      next = r + 1 < requests.length ? c.api.getChunks(requests[r + 1].fps) : null;
      storedBytes += bundle.byteLength;
      scan.feedBundle(bundle, requests[r].asked, requests[r].fileOf);
      if (scan.overflowed()) {
        next?.catch(() => {}); // the worker stays for the next search: nothing left to fail
        throw new TooManyMatches(searchMatchLimit());
      }
    }
    return {
      matches: scan.takeMatches(),
      bytes: scan.bytes(),
      storedBytes,
      limit: searchMatchLimit(),
    };
  } finally {
    scan.free();
  }
}

expose<SearchApi>(
  {
    begin: async ({ query, maxKeywordLen, server }) => {
      begun++;
      endReserve();
      release();
      const keywords = query && new SearchKeywords(query.keywords, query.hex, maxKeywordLen);
      cur = {
        query,
        keywords,
        scan: keywords && query ? new ContainerScan(keywords, query.filesOnly) : ContainerScan.fill(),
        api: new Api(server.token, server.repo, server.base),
        chunks: null,
        running: new Set(),
        basesFetched: 0,
        basesBytes: 0,
        baseJobs: 0,
        baseRequests: 0,
        linksInRange: 0,
        turns: new Turns(),
        pending: new Set(),
      };
      return { keywords: keywords ? keywordBytes(keywords) : [] };
    },
    useCache: async ({ key, slot, bytes, live, persist }) => {
      need().chunks = chunkCache(key, slot, bytes, persist, live);
      scanning = true;
    },
    matchCache: async ({ key, slot, bytes, live, persist }) => {
      const before = cache?.key === key ? cache.chunks.changes() : null;
      const chunks = chunkCache(key, slot, bytes, persist, live);
      // The chunks the repository no longer stores leave the file too, as a damaged one does,
      // rather than stay on the device until the next search's write: written now, after any
      // write under way, whatever idle work is going on (a search begun meanwhile comes
      // first, and its idle time writes the file).
      if (before !== null && chunks.changes() !== before) await save().catch(() => false);
    },
    loadCache: async ({ key, slot, bytes }) => {
      endReserve();
      let dropped = 0;
      if (cache?.key !== key) {
        const chunks = chunkCache(key, slot, bytes, true);
        // Read straight into Wasm memory, where the chunks then stay.
        const read = await readCacheFile(key, slot, (size) => {
          const at = chunks.fileBuffer(size); // may grow the memory: its buffer is taken after
          return new Uint8Array(memory!.buffer, at, size);
        }).catch(() => null);
        // A search may have started meanwhile: it holds this cache and fills it itself.
        if (read !== null && cache?.chunks === chunks && chunks.count() === 0) {
          try {
            dropped = chunks.loadBuffer(read, key);
            // A file with a chunk left out is written again without it.
            if (dropped === 0) cache.written = chunks.changes();
          } catch {
            chunks.clear(); // another format or repository, or damaged: written again later
          }
          // Warm the repeat search's code up before the first search asks for it.
          startIdle();
        } else if (cache?.chunks === chunks) chunks.fileBuffer(0); // the file's room, unused
      } else cache.slot = slot;
      const fps = cache!.chunks.fingerprints();
      return transfer({ fps, dropped }, [fps.buffer]);
    },
    reserve: (bytes) =>
      new Promise((resolve) => {
        endReserve();
        const grow = bytes - memory!.buffer.byteLength;
        if (cur || scanning || grow <= 0) return resolve(0);
        const r = { heap: new HeapReserve(grow), done: resolve };
        reserving = r;
        perTask(() => {
          if (reserving !== r) return false; // ended by a search or a cache read
          if (r.heap.touch(RESERVE_SLICE_BYTES)) return true;
          endReserve();
          return false;
        });
      }),
    warmUpFirstSearch: (_, ctx) => warmUpCold(ctx),
    clearCache: async () => {
      const c = cache;
      if (!c) return;
      // Emptied before anything else runs, so that what a search sent next caches stays;
      // nothing is written again until a search says to keep its cache on the device.
      c.persist = false;
      c.chunks.clear();
      c.written = c.chunks.changes();
      // A write under way goes on with the empty cache; its file is deleted once it is done.
      await saving?.catch(() => {});
      await deleteCacheFile(c.key, c.slot);
    },
    scan: (job) => {
      const { running } = need();
      const done = scanContainer(job);
      const settled: Promise<unknown> = done.then(
        () => running.delete(settled),
        () => running.delete(settled),
      );
      running.add(settled);
      return done;
    },
    finishScan: async () => {
      const c = need();
      while (c.running.size > 0) await Promise.all(c.running);
      const tiny = c.scan.takeTiny();
      const [chunks, bytes, exactMatches, tinyRecords, tinyBytes, deltaChunks, ruledOut, ruledOutBytes] =
        c.scan.stats();
      const db = c.scan.finish();
      scanning = false;
      // A read-ahead's scan is done with; a search's keywords serve its logical phase.
      if (!c.query) release();
      const stats = {
        chunks,
        bytes,
        exactMatches,
        tinyRecords,
        tinyBytes,
        deltaChunks,
        basesFetched: c.basesFetched,
        basesBytes: c.basesBytes,
        baseJobs: c.baseJobs,
        baseRequests: c.baseRequests,
        linksInRange: c.linksInRange,
        ruledOut,
        ruledOutBytes,
      };
      return transfer({ db, tiny, stats }, [db.buffer, tiny.buffer]);
    },
    chunks: async (fps) => {
      // Without a cache (a replaced worker), every chunk is "not held".
      const out = cache ? cache.chunks.rawChunks(fps) : new Uint8Array((fps.length / FP_LEN) * 4).fill(0xff);
      return transfer(out, [out.buffer]);
    },
    idle: ({ save }) =>
      new Promise((resolve) => {
        saveLater = !save;
        if (scanning) return resolve({ saved: false });
        idleWaiters.push(resolve);
        startIdle();
      }),
    logical: async ({ dbs, tiny, recipes }) => {
      const r = logical(dbs, tiny, recipes);
      return transfer(r, [r.matches.buffer]);
    },
    naive: async ({ files, requestBytes }) => {
      const r = await naive(files, requestBytes);
      return transfer(r, [r.matches.buffer]);
    },
  },
  async (module) => {
    memory = (await init({ module_or_path: module as WebAssembly.Module })).memory;
  },
);
