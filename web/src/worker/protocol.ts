/** Messages between the page and a core worker: a small, typed bridge. */
import type { RecipeHintsData } from '../backup/hints';

/**
 * Files up to this size, and batches of small files (at most BATCH_BYTES, backup.ts), are
 * read in one `arrayBuffer()` each; larger ones through their own stream (`streamBlocks`):
 * neither slices the file, and every slice is a synchronous round trip to the browser.
 */
export const WHOLE_READ = 2 << 20;

/** zstd level of uploaded chunks (docs/BENCHMARKS.md "Compression candidates"). */
export const ZSTD_LEVEL = 3;

export type WorkerRequest =
  | { type: 'init'; module: WebAssembly.Module }
  | { type: 'hashFile'; id: number; file: File }
  /**
   * Starts a backup job: fingerprints already stored (the previous version's), n*20 bytes,
   * and the previous version's recipes to predict chunks from (RapidCDC), if any.
   */
  | { type: 'setKnown'; fps: Uint8Array; zstdLevel: number; hints: RecipeHintsData | null }
  /** `prevFile`: the file's index in the hints (its previous version), -1 if none. */
  | { type: 'chunkFile'; id: number; file: File; prevFile: number }
  /**
   * Small files chunked one by one (each its own recipe) but read as one composite Blob,
   * `all` (= `new Blob(files)`, made by the page: creating a blob is a synchronous round trip
   * to the browser process, and the page's thread has time to spare where the workers'
   * has not): one read instead of one per file. `sizes` are the sizes the page saw when they
   * were picked; `files` are read one by one only if `all` cannot be.
   */
  | { type: 'chunkBatch'; id: number; files: File[]; all: Blob; sizes: number[]; prevFiles: number[] }
  /** Chunks starting in `start..stop` of a large file, one segment of many (SS-CDC). */
  | { type: 'chunkSegment'; id: number; file: File; start: number; stop: number }
  /** Where the previous segment's last chunk ended (NaN: it failed, give up). */
  | { type: 'segmentEntry'; id: number; entry: number }
  /** The page has taken a `newChunks` batch of job `id`: the worker may read on. */
  | { type: 'credit'; id: number };

/** New chunks of a file (not in the known set): packed, compressed when it pays. */
export interface NewChunks {
  fps: Uint8Array; // n*20
  codecs: Uint8Array;
  rawLengths: Uint32Array;
  storedLengths: Uint32Array;
  stored: Uint8Array; // back to back
}

export type WorkerResponse =
  | { type: 'ready' }
  | { type: 'progress'; id: number; bytes: number }
  | { type: 'hashed'; id: number; sha1: string; bytes: number }
  | ({ type: 'newChunks'; id: number } & NewChunks)
  /** The file's whole recipe, in order; `predicted` of its chunks were found by RapidCDC. */
  | { type: 'chunked'; id: number; fps: Uint8Array; lengths: Uint32Array; bytes: number; predicted: number }
  /**
   * A batch's recipes back to back: file k has `counts[k]` chunks, or failed with `errors[k]`
   * (then count 0).
   */
  | {
      type: 'batchChunked';
      id: number;
      fps: Uint8Array;
      lengths: Uint32Array;
      counts: Uint32Array;
      errors: (string | null)[];
      bytes: number;
      predicted: number;
    }
  /** A segment job's cuts are chosen: the next segment's chunks start at `exit`. */
  | { type: 'segmentExit'; id: number; exit: number }
  | { type: 'failed'; id: number; message: string };
