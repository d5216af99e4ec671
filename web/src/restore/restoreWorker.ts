/// <reference lib="webworker" />
/**
 * A restore worker: turns a `chunks/get` bundle into verified raw chunks. zstd chunks are
 * decompressed with wasm-core (capped at their raw length), then every chunk's fingerprint
 * (wasm-core's collision-detecting SHA-1, the same function the backup used) is computed in one
 * call and compared with the one it is stored under. Nothing unverified leaves here.
 */
import init, { decompressChunk, fingerprintMany } from '../wasm-pkg/wasm_core.js';
import { decodeBundle } from '../backup/bundle';
import { FP_LEN, fpHex } from '../backup/hex';
import { expose, transfer, type Reply } from '../worker/bridge';
import type { Damaged, RestoreApi, Verified } from './protocol';

function verify(bundle: Uint8Array): Reply<Verified | Damaged> {
  const chunks = decodeBundle(bundle);
  const n = chunks.length;
  const offsets = new Uint32Array(n);
  const lengths = new Uint32Array(n);
  let total = 0;
  chunks.forEach((c, k) => {
    offsets[k] = total;
    lengths[k] = c.rawLen;
    total += c.rawLen;
  });
  const raw = new Uint8Array(total);
  const fps = new Uint8Array(n * FP_LEN);
  for (let k = 0; k < n; k++) {
    const c = chunks[k];
    fps.set(c.fp, k * FP_LEN);
    const bad = (reason: string): Damaged => ({ type: 'bad', index: k, fp: fpHex(c.fp), reason });
    if (c.codec === 0) {
      if (c.stored.byteLength !== c.rawLen)
        return bad(`stored length ${c.stored.byteLength} != raw length ${c.rawLen}`);
      raw.set(c.stored, offsets[k]);
    } else if (c.codec === 1) {
      let out: Uint8Array;
      try {
        out = decompressChunk(1, c.stored, c.rawLen);
      } catch (e) {
        return bad(`its zstd data does not decode (${e instanceof Error ? e.message : String(e)})`);
      }
      if (out.byteLength !== c.rawLen) return bad(`it decodes to ${out.byteLength} bytes, not ${c.rawLen}`);
      raw.set(out, offsets[k]);
    } else {
      return bad(`codec ${c.codec} is not supported by this restore`);
    }
  }
  const digests = fingerprintMany(raw, offsets, lengths);
  for (let k = 0; k < n; k++) {
    for (let j = 0; j < FP_LEN; j++) {
      if (digests[k * FP_LEN + j] !== fps[k * FP_LEN + j]) {
        return {
          type: 'bad',
          index: k,
          fp: fpHex(fps, k),
          reason: `its bytes fingerprint as ${fpHex(digests, k)}, not as its fingerprint`,
        };
      }
    }
  }
  return transfer({ type: 'verified', fps, offsets, lengths, raw }, [
    fps.buffer,
    offsets.buffer,
    lengths.buffer,
    raw.buffer,
  ]);
}

expose<RestoreApi>({ verify }, async (module) => {
  await init({ module_or_path: module as WebAssembly.Module });
});
