/**
 * What wasm-core's `RestoreSession.verify` answered, as the page's types: its head (the
 * layout `RestoreAnswer.head` documents) and raw bytes read once, for the restore workers
 * and for tests that drive a real session.
 */
import type { RestoreAnswer } from '../wasm-pkg/wasm_core.js';
import { FP_LEN, fpHex } from '../backup/hex';
import type { Damaged, Verified } from './protocol';

/**
 * Reads `answer` and frees it: the verified chunks (views into buffers of their own), or the
 * chunk refused. A bundle that could not be read at all throws.
 */
export function readAnswer(answer: RestoreAnswer): Verified | Damaged {
  let head: Uint8Array;
  let raw: Uint8Array;
  try {
    head = answer.head();
    raw = answer.takeRaw();
  } finally {
    answer.free();
  }
  const dv = new DataView(head.buffer, head.byteOffset, head.byteLength);
  if (dv.getUint32(0, true) !== 0) {
    const index = dv.getUint32(4, true);
    const reason = new TextDecoder().decode(head.subarray(28));
    if (index === 0xffffffff) throw new Error(`the chunks could not be read: ${reason}`);
    return { type: 'bad', index, fp: fpHex(head.subarray(8, 8 + FP_LEN)), reason };
  }
  const n = dv.getUint32(4, true);
  // Views into the head wasm-core answered (a buffer of its own, every part 4-aligned).
  const fps = head.subarray(8, 8 + n * FP_LEN);
  const sizes = new Uint32Array(head.buffer, head.byteOffset + 8 + n * FP_LEN, n);
  const crcs = new Uint32Array(head.buffer, head.byteOffset + 8 + n * (FP_LEN + 4), n);
  const keptAt = 8 + n * (FP_LEN + 8);
  const m = dv.getUint32(keptAt, true);
  const kept = head.subarray(keptAt + 4, keptAt + 4 + m * FP_LEN);
  const fragmentsAt = keptAt + 4 + m * FP_LEN;
  const lengths =
    dv.getUint32(fragmentsAt, true) === 1 ? new Uint32Array(head.buffer, head.byteOffset + fragmentsAt + 4, n) : sizes;
  const offsets = new Uint32Array(n);
  let at = 0;
  for (let k = 0; k < n; k++) {
    offsets[k] = at;
    at += lengths[k];
  }
  if (at !== raw.byteLength) throw new Error(`the chunks could not be read: ${raw.byteLength} bytes for ${at}`);
  return { type: 'verified', fps, offsets, lengths, sizes, crcs, raw, kept };
}
