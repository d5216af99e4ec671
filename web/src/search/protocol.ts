/** The search workers' protocol (DedupSearch and the naive baseline), over the worker bridge. */
import type { Method } from '../worker/bridge';

/** What every worker of one search needs to know. */
export interface SearchQuery {
  /** Keywords, one per line (text, or hex bytes per line with `hex`). */
  keywords: string;
  hex: boolean;
  /** Report only the first match per keyword and file (§7). */
  filesOnly: boolean;
}

/**
 * The keywords a parsed query holds, in order: wasm-core's `SearchKeywords`, which the workers
 * parse a search's query with and the page an answer the server gives while they are busy.
 */
export function keywordBytes(parsed: { count(): number; keyword(k: number): Uint8Array }): Uint8Array[] {
  return Array.from({ length: parsed.count() }, (_, k) => parsed.keyword(k));
}

/** The server a worker fetches from itself (containers, chunks). */
export interface ServerAccess {
  base: string;
  repo: string;
  token: string;
}

/**
 * Why a search stops when its keywords match more than `limit` times (wasm-core's
 * `MAX_MATCHES`, which says why): the worker whose scan passes it, or the page when the parts
 * answer more in all.
 */
export function tooManyMatches(limit: number): string {
  return `The keywords match more than ${limit.toLocaleString('en')} times: a search answers at most that many. Search for something rarer, or in fewer versions or paths.`;
}

/**
 * What a worker throws when a search passes the limit (its `name` reaches the page as the
 * `WorkerError`'s `remoteName`): the query's fault, so the page keeps the workers.
 */
export class TooManyMatches extends Error {
  static readonly NAME = 'TooManyMatches';
  constructor(limit: number) {
    super(tooManyMatches(limit));
    this.name = TooManyMatches.NAME;
  }
}

/** Codec of a delta chunk (docs/FORMAT.md, codec 2): its stored bytes name its base. */
export const CODEC_DELTA = 2;

/** Chunks stored in one container: n*20 fingerprint bytes; offsets are container file offsets. */
export interface StoredChunks {
  fps: Uint8Array;
  offsets: Float64Array;
  storedLens: Uint32Array;
  codecs: Uint8Array;
  rawLens: Uint32Array;
}

/**
 * One container's chunks to scan: stored bytes `[start, end)` of container `id`. `links`
 * are chunks stored in that range that no file in scope names but the chunks' base chains
 * run through (frames, stored before their slices; older bases): the job decodes them from
 * its range instead of fetching them.
 */
export interface ContainerJob extends StoredChunks {
  id: number;
  start: number;
  end: number;
  links?: StoredChunks;
}

/** What a worker's logical phase fails with when it does not hold the recipes it was told to walk. */
export const RECIPES_NOT_HELD = 'the search worker does not hold the recipes it was asked to walk';

/** Files to search (logical phase) or to reassemble and scan (naive): file k is `ids[k]`. */
export interface FileBatch {
  ids: Uint32Array;
  /** Chunks per file; the files' recipes back to back in `fps` (20 bytes each) and `lengths`. */
  counts: Uint32Array;
  fps: Uint8Array;
  lengths: Uint32Array;
}

export type PhysicalStats = {
  chunks: number;
  bytes: number;
  exactMatches: number;
  tinyRecords: number;
  tinyBytes: number;
  /** Delta chunks decoded against their bases and scanned. */
  deltaChunks: number;
  /** Bases fetched from `chunks/get` as stored (not held by a range read or the cache), their own bases included. */
  basesFetched: number;
  /** Their stored bytes (part of the bytes the search read). */
  basesBytes: number;
  /** Jobs that fetched bases, and the `chunks/get` requests they made for them (one per job when each answer brings the whole chains). */
  baseJobs: number;
  baseRequests: number;
  /** Links of base chains the jobs read with their own ranges instead of fetching them (`ContainerJob.links`; each decoded only where a chain runs through it). */
  linksInRange: number;
  /** Cached chunks whose trigram summary ruled out every keyword: only their ends were read. */
  ruledOut: number;
  /**
   * Bytes (part of `bytes`) in blocks of 1 KiB whose trigram summaries ruled out every
   * keyword, in those chunks and in others: the exact-match pass did not read them.
   */
  ruledOutBytes: number;
};
export type LogicalStats = {
  files: number;
  chunks: number;
  chunkHits: number;
  locationReads: number;
  tinyLookups: number;
  matches: number;
};
export type DbStats = {
  chunkResults: number;
  chunkResultBytes: number;
  locationLists: number;
  longLocationLists: number;
  locationListBytes: number;
  infixLists: number;
};

/** A worker's decoded-chunk cache: the repository's, and what of it to keep (`useCache`). */
export interface CacheChoice {
  key: string;
  slot: number;
  bytes: number;
  live?: Uint8Array;
  persist: boolean;
}

export interface SearchApi {
  /**
   * Starts a search in this worker. Answers the parsed keywords. Without a query it starts a
   * read-ahead (docs/SEARCH.md, "Chunks read ahead"): its jobs decode, check and cache their chunks
   * and scan nothing; `finishScan` answers an empty database.
   */
  begin: Method<{ query: SearchQuery | null; maxKeywordLen: number; server: ServerAccess }, { keywords: Uint8Array[] }>;
  /**
   * Chooses the decoded-chunk cache a DedupSearch scans from, before its first job: `key`
   * names the repository (another one gets a new cache), `bytes` is this worker's budget in
   * raw bytes. `live`, sent when the repository's state has changed since the caches were
   * last matched to it, names every chunk the repository holds now (20 bytes each): the
   * cache keeps only those. `persist`: the cache is written to the device after searches
   * (docs/SEARCH.md).
   */
  useCache: Method<CacheChoice, void>;
  /**
   * As `useCache`, between searches (the Search tab, once the workers have read their device
   * caches): no search need have begun, and no physical phase starts. When `live` drops
   * chunks, the worker writes its device file again without them before it answers (after
   * a write already under way, which may have read the cache before the drop).
   */
  matchCache: Method<CacheChoice, void>;
  /**
   * Reads this worker's device cache file of repository `key` (`slot`: the worker's index in
   * its pool) into its cache, unless it holds that repository's cache already; answers the
   * fingerprints it then holds (20 bytes each) and how many chunks of the file failed their
   * check. A missing or unreadable file leaves the cache empty.
   */
  loadCache: Method<{ key: string; slot: number; bytes: number }, { fps: Uint8Array; dropped: number }>;
  /**
   * Empties this worker's cache and deletes its device cache file; the cache is not written
   * again until a search's `useCache` says to keep it on the device.
   */
  clearCache: Method<null, void>;
  /**
   * Grows this worker's Wasm memory to about `bytes` ahead of a first search, touching
   * every page it grows by a slice at a time (wasm-core's `HeapReserve`), so that the search
   * decodes into memory the system has already handed out. A search that begins meanwhile
   * stops it. Answers the bytes the memory grew by.
   */
  reserve: Method<number, number>;
  /**
   * Scans one container's chunks, from the worker's cache where it holds them; answers the
   * `storedBytes` read from the server for it and whether the cache now holds every chunk.
   * Fails with [`tooManyMatches`] once the worker's chunks hold more exact offsets than the
   * search may answer (four times its limit).
   */
  scan: Method<ContainerJob, { storedBytes: number; cached: boolean }>;
  /** Ends the physical phase in this worker: answers with its encoded result database and tiny records. */
  finishScan: Method<null, { db: Uint8Array; tiny: Uint8Array; stats: PhysicalStats }>;
  /**
   * Logical phase: merge the databases and the tiny records (one of each per physical
   * worker), then walk the recipes. Matches as (file, keyword, offset) triples, at most
   * `limit` (fails with [`tooManyMatches`] past it); the page checks the parts' sum.
   * `recipes.files` are the recipes to walk, which the worker keeps under `recipes.key`;
   * without them, it walks those it kept under that key (fails with [`RECIPES_NOT_HELD`]
   * if it holds others).
   */
  logical: Method<
    { dbs: Uint8Array[]; tiny: Uint8Array[]; recipes: { key: number; files?: FileBatch } },
    { matches: Float64Array; stats: LogicalStats; db: DbStats; limit: number }
  >;
  /**
   * The cached chunks among `fps` (20 bytes each), for snippets: per chunk a little-endian
   * u32 length and its raw bytes, or 0xffffffff for a chunk this worker does not hold.
   */
  chunks: Method<Uint8Array, Uint8Array>;
  /**
   * The search has ended: the worker summarises its cached chunks' trigrams in the idle
   * time that follows, a slice at a time (wasm-core's `ChunkCache.summarize`), then writes
   * its cache to the device if it changed. Answers when that is done or a search stopped it:
   * whether the file was written. After a read-ahead (`save: false`) the write waits for
   * the next search's idle time: a search typed meanwhile would wait for it.
   */
  idle: Method<{ save: boolean }, { saved: boolean }>;
  /**
   * Runs a first search's code over synthetic chunks until the browser has optimised it (one
   * worker of the page's first pool does, once the page has settled: the compiled module,
   * and so its optimised code, is shared), a step per task; a search that begins meanwhile
   * stops it, as does the signal `stop` (heavy work began on the page), and after a search it
   * does nothing. Answers the steps run.
   */
  warmUpFirstSearch: Method<null, number, never, 'stop'>;
  /**
   * `requestBytes`: raw bytes of chunks per `chunks/get` request. At most `limit` matches
   * (fails with [`tooManyMatches`] past it); the page checks the jobs' sum.
   */
  naive: Method<
    { files: FileBatch; requestBytes: number },
    { matches: Float64Array; bytes: number; storedBytes: number; limit: number }
  >;
}
