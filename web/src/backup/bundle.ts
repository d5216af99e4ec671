/**
 * The bundle format of docs/FORMAT.md ("DTB1"): a batch of chunks, each with its
 * fingerprint, codec, raw and stored length. Encoded for uploads and read from `chunks/get`
 * answers by wasm-core's `format::bundle` (the server's and the workers' codec), so the
 * page's thread needs its instance first: `pageCore()` (`wasm/page.ts`).
 */
import { BundleBuilder, bundleEntries } from '../wasm-pkg/wasm_core.js';
import { FP_LEN } from './hex';

export interface BundleChunk {
  fp: Uint8Array; // 20 bytes
  codec: number;
  rawLen: number;
  stored: Uint8Array;
}

/** Encodes into `into` when it is large enough (returning a view of it), else a new array. */
export function encodeBundle(chunks: readonly BundleChunk[], into?: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const b = new BundleBuilder();
  try {
    for (const c of chunks) b.push(c.fp.subarray(0, FP_LEN), c.codec, c.rawLen, c.stored);
    const size = b.len();
    const out = into && into.byteLength >= size ? into.subarray(0, size) : new Uint8Array(size);
    b.writeInto(out);
    return out;
  } finally {
    b.free();
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
