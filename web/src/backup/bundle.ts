/**
 * The bundle format of docs/FORMAT.md ("DTB1"): a batch of chunks, each with its
 * fingerprint, codec, raw and stored length. Encoded for uploads and read from `chunks/get`
 * answers by wasm-core's `format::bundle` (the server's and the workers' codec), so the
 * page's thread needs its instance first: `pageCore()` (`wasm/page.ts`).
 */
import { BundleBuilder, bundleEntries, wasmMemory } from '../wasm-pkg/wasm_core.js';
import { FP_LEN } from './hex';

export interface BundleChunk {
  fp: Uint8Array; // 20 bytes
  codec: number;
  rawLen: number;
  stored: Uint8Array;
}

/**
 * Encodes bundles one after another in the engine's memory, each chunk's stored bytes
 * copied once, straight into the bundle.
 */
export class BundleEncoder {
  private b = new BundleBuilder();

  /**
   * The bundle of `chunks`, as a view of the engine's memory: valid until the next call into
   * the engine, so it goes to `fetch` at once (which copies a body when called).
   */
  encode(chunks: readonly BundleChunk[]): Uint8Array<ArrayBuffer> {
    const b = this.b;
    const memory = wasmMemory() as WebAssembly.Memory;
    b.clear();
    let heap = new Uint8Array(memory.buffer);
    for (const c of chunks) {
      const at = b.push(c.fp.subarray(0, FP_LEN), c.codec, c.rawLen, c.stored.byteLength);
      if (heap.buffer !== memory.buffer) heap = new Uint8Array(memory.buffer); // it grew
      heap.set(c.stored, at);
    }
    const at = b.seal();
    return new Uint8Array(memory.buffer, at, b.len());
  }

  free() {
    this.b.free();
  }
}

/** `chunks` as a bundle of its own. */
export function encodeBundle(chunks: readonly BundleChunk[]): Uint8Array<ArrayBuffer> {
  const e = new BundleEncoder();
  try {
    return e.encode(chunks).slice();
  } finally {
    e.free();
  }
}

/**
 * Reads a whole bundle: its entries as views of `bytes`. Throws on anything malformed or
 * truncated ("malformed bundle: ...").
 */
export function decodeBundle(bytes: Uint8Array): BundleChunk[] {
  const e = bundleEntries(bytes);
  const chunks: BundleChunk[] = [];
  for (let i = 0; i < e.length; i += 5)
    chunks.push({
      fp: bytes.subarray(e[i], e[i] + FP_LEN),
      codec: e[i + 1],
      rawLen: e[i + 2],
      stored: bytes.subarray(e[i + 3], e[i + 3] + e[i + 4]),
    });
  return chunks;
}
