/** Messages between the page and a core worker: a small, typed bridge. */

export type WorkerRequest =
  | { type: 'init'; module: WebAssembly.Module }
  | { type: 'hashFile'; id: number; file: File }
  /** Starts a backup job: fingerprints already stored (the previous version's), n*20 bytes. */
  | { type: 'setKnown'; fps: Uint8Array; zstdLevel: number }
  | { type: 'chunkFile'; id: number; file: File }
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
  /** The file's whole recipe, in order. */
  | { type: 'chunked'; id: number; fps: Uint8Array; lengths: Uint32Array; bytes: number }
  | { type: 'failed'; id: number; message: string };
