/** Messages between the page and a search worker (DedupSearch and the naive baseline). */

/** What every worker of one search needs to know. */
export interface SearchQuery {
  /** Keywords, one per line (text, or hex bytes per line with `hex`). */
  keywords: string;
  hex: boolean;
  /** Report only the first match per keyword and file (§7). */
  filesOnly: boolean;
}

/** The server a worker fetches from itself (containers, chunks). */
export interface ServerAccess {
  base: string;
  repo: string;
  token: string;
}

/** One container's chunks to scan: stored bytes `[start, end)` of container `id`. */
export interface ContainerJob {
  id: number;
  start: number;
  end: number;
  /** n*20 fingerprint bytes; offsets are container file offsets. */
  fps: Uint8Array;
  offsets: Float64Array;
  storedLens: Uint32Array;
  codecs: Uint8Array;
  rawLens: Uint32Array;
}

/** Files to search (logical phase) or to reassemble and scan (naive): file k is `ids[k]`. */
export interface FileBatch {
  ids: Uint32Array;
  /** Chunks per file; the files' recipes back to back in `fps` (20 bytes each) and `lengths`. */
  counts: Uint32Array;
  fps: Uint8Array;
  lengths: Uint32Array;
}

export type SearchRequest =
  | { type: 'init'; module: WebAssembly.Module }
  /** Starts a search in this worker; `searchId` keys its tiny records in IndexedDB. */
  | { type: 'begin'; id: number; query: SearchQuery; maxKeywordLen: number; searchId: string; server: ServerAccess }
  | { type: 'scan'; id: number; job: ContainerJob }
  /** Ends the physical phase in this worker: answers with its encoded result database. */
  | { type: 'finishScan'; id: number }
  /** Logical phase: merge the databases, then walk the recipes. */
  | { type: 'logical'; id: number; dbs: Uint8Array[]; files: FileBatch }
  /** `requestBytes`: raw bytes of chunks per `chunks/get` request. */
  | { type: 'naive'; id: number; files: FileBatch; requestBytes: number };

export type PhysicalStats = {
  chunks: number;
  bytes: number;
  exactMatches: number;
  tinyRecords: number;
  tinyBytes: number;
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

export type SearchResponse =
  | { type: 'ready' }
  | { type: 'begun'; id: number; keywords: Uint8Array[] }
  /** `storedBytes` read from the server for this container. */
  | { type: 'scanned'; id: number; storedBytes: number }
  | { type: 'scanFinished'; id: number; db: Uint8Array; stats: PhysicalStats }
  /** Matches as (file, keyword, offset) triples. */
  | { type: 'logicalDone'; id: number; matches: Float64Array; stats: LogicalStats; db: DbStats; tinyFetched: number }
  | { type: 'naiveDone'; id: number; matches: Float64Array; bytes: number; storedBytes: number }
  | { type: 'failed'; id: number; message: string };
