/**
 * The bundle byte format of docs/FORMAT.md ("DTB1"): a batch of chunks, each with its
 * fingerprint, codec, raw and stored length. Encoded here for uploads and decoded for
 * restore (`chunks/get` answers with a bundle).
 */
import { FP_LEN } from './hex';

export const MAGIC = [0x44, 0x54, 0x42, 0x31];
const HEADER = 16;
const ENTRY = 32;

export interface BundleChunk {
  fp: Uint8Array; // 20 bytes
  codec: number;
  rawLen: number;
  stored: Uint8Array;
}

export function bundleSize(chunks: readonly BundleChunk[]): number {
  return chunks.reduce((n, c) => n + ENTRY + c.stored.byteLength, HEADER);
}

/** Encodes into `into` when it is large enough (returning a view of it), else a new array. */
export function encodeBundle(chunks: readonly BundleChunk[], into?: Uint8Array): Uint8Array {
  const size = bundleSize(chunks);
  const out = into && into.byteLength >= size ? into.subarray(0, size) : new Uint8Array(size);
  const view = new DataView(out.buffer, out.byteOffset, size);
  // A reused buffer holds the previous bundle: reserved bytes must be zeroed explicitly.
  out.fill(0, 0, HEADER);
  out.set(MAGIC, 0);
  view.setUint16(4, 1, true);
  view.setUint16(6, 0, true);
  view.setUint32(8, chunks.length, true);
  let at = HEADER;
  for (const c of chunks) {
    out.set(c.fp.subarray(0, FP_LEN), at);
    out[at + 20] = c.codec;
    out.fill(0, at + 21, at + 24);
    view.setUint32(at + 24, c.rawLen, true);
    view.setUint32(at + 28, c.stored.byteLength, true);
    out.set(c.stored, at + ENTRY);
    at += ENTRY + c.stored.byteLength;
  }
  return out;
}

export class BundleFormatError extends Error {}

/** Decodes a whole bundle; throws BundleFormatError on anything malformed or truncated. */
export function decodeBundle(bytes: Uint8Array): BundleChunk[] {
  if (bytes.byteLength < HEADER || MAGIC.some((m, i) => bytes[i] !== m)) {
    throw new BundleFormatError('not a Ditto bundle (bad magic)');
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint16(4, true) !== 1) throw new BundleFormatError('unsupported bundle version');
  const count = view.getUint32(8, true);
  const chunks: BundleChunk[] = [];
  let at = HEADER;
  for (let i = 0; i < count; i++) {
    if (at + ENTRY > bytes.byteLength) throw new BundleFormatError(`bundle truncated in entry ${i}`);
    const rawLen = view.getUint32(at + 24, true);
    const storedLen = view.getUint32(at + 28, true);
    const end = at + ENTRY + storedLen;
    if (end > bytes.byteLength) throw new BundleFormatError(`bundle truncated in chunk ${i}`);
    chunks.push({
      fp: bytes.subarray(at, at + FP_LEN),
      codec: bytes[at + 20],
      rawLen,
      stored: bytes.subarray(at + ENTRY, end),
    });
    at = end;
  }
  if (at !== bytes.byteLength) throw new BundleFormatError('trailing bytes after the last chunk');
  return chunks;
}
