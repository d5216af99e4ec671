/** Messages between the page and a restore worker (decode + verify chunks with wasm-core). */

export type RestoreRequest =
  | { type: 'init'; module: WebAssembly.Module }
  /** A `chunks/get` answer: decode every chunk, recompute its fingerprint and compare. */
  | { type: 'verify'; id: number; bundle: Uint8Array };

export type RestoreResponse =
  | { type: 'ready' }
  /** Every chunk verified: raw bytes back to back, chunk k at offsets[k], fps n*20 in order. */
  | { type: 'verified'; id: number; fps: Uint8Array; offsets: Uint32Array; lengths: Uint32Array; raw: Uint8Array }
  /** Chunk `index` (fingerprint `fp`) is damaged: `reason` says how. */
  | { type: 'bad'; id: number; index: number; fp: string; reason: string }
  | { type: 'failed'; id: number; message: string };
