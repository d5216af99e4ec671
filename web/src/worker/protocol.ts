/** The core workers' protocol (backup: hashing and chunking), over the worker bridge. */
import type { RecipeHintsData } from '../backup/hints';
import type { Method } from './bridge';

/**
 * Files up to this size, and batches of small files (at most BATCH_BYTES, backup.ts), are
 * read in one `arrayBuffer()` each; larger ones through their own stream (`streamBlocks`):
 * neither slices the file, and every slice is a synchronous round trip to the browser.
 */
export const WHOLE_READ = 2 << 20;

/** zstd level of uploaded chunks (docs/BENCHMARKS.md "Compression candidates"). */
export const ZSTD_LEVEL = 3;

/** New chunks of a file (not in the known set): packed, compressed when it pays. */
export interface NewChunks {
  fps: Uint8Array; // n*20
  codecs: Uint8Array;
  rawLengths: Uint32Array;
  storedLengths: Uint32Array;
  stored: Uint8Array; // back to back
}

/** What a chunk job tells the page while it runs. */
export type CoreEvent =
  | { type: 'progress'; bytes: number }
  | ({ type: 'newChunks' } & NewChunks)
  /** A segment job's cuts are chosen: the next segment's chunks start at `exit`. */
  | { type: 'segmentExit'; exit: number };

/** What the page tells a running chunk job. */
export type CoreSignal =
  /** The page has taken a `newChunks` batch: the worker may read on. */
  | { type: 'credit' }
  /** Where the previous segment's last chunk ended (NaN: it failed, give up). */
  | { type: 'segmentEntry'; entry: number }
  /**
   * The page no longer wants this job (its backup failed or was cancelled): it ends at its
   * next block or batch, without an answer the page reads.
   */
  | { type: 'stop' };

/** A file's whole recipe, in order; `predicted` of its chunks were found by RapidCDC. */
export interface Chunked {
  fps: Uint8Array;
  lengths: Uint32Array;
  bytes: number;
  predicted: number;
}

/**
 * A batch's recipes back to back: file k has `counts[k]` chunks. `unread`: the composite
 * could not be read whole (a file changed or vanished since it was picked), nothing was
 * chunked, and the page reads each file on its own.
 */
export interface BatchChunked extends Chunked {
  counts: Uint32Array;
  unread: boolean;
}

export interface CoreApi {
  /** Plain SHA-1 of a whole file (a checksum shown to the user). */
  hashFile: Method<{ file: File }, { sha1: string; bytes: number }, CoreEvent>;
  /**
   * Starts a backup job: fingerprints already stored (the previous version's), n*20 bytes,
   * and the previous version's recipes to predict chunks from (RapidCDC), if any.
   */
  setKnown: Method<{ fps: Uint8Array; zstdLevel: number; hints: RecipeHintsData | null }, void>;
  /** `prevFile`: the file's index in the hints (its previous version), -1 if none. */
  chunkFile: Method<{ file: File; prevFile: number }, Chunked, CoreEvent, CoreSignal>;
  /**
   * Small files chunked one by one (each its own recipe) but read as one composite Blob,
   * `all` (= `new Blob(files)`, made by the page: creating a blob is a synchronous round trip
   * to the browser process, and a File cloned into a worker is one more per file): one read
   * instead of one per file. `sizes` are the sizes the page saw when they were picked. The
   * files themselves are not sent: each cloned File costs the browser process work, and they
   * are needed only when `all` cannot be read (`unread`; the page then sends them one by one).
   */
  chunkBatch: Method<{ all: Blob; sizes: number[]; prevFiles: number[] }, BatchChunked, CoreEvent, CoreSignal>;
  /** Chunks starting in `start..stop` of a large file, one segment of many (SS-CDC). */
  chunkSegment: Method<{ file: File; start: number; stop: number }, Chunked, CoreEvent, CoreSignal>;
}
