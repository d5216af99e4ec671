import { describe, expect, it } from 'vitest';
import { decodeBundle, encodeBundle, type BundleChunk } from './bundle';

const chunk = (seed: number, len: number): BundleChunk => ({
  fp: Uint8Array.from({ length: 20 }, (_, i) => (seed * 31 + i) & 255),
  codec: seed & 1,
  rawLen: len + seed,
  stored: Uint8Array.from({ length: len }, (_, i) => (seed + i * 7) & 255),
});

describe('encodeBundle', () => {
  it('encodes into a reused, dirty buffer exactly as into a fresh one', () => {
    const chunks = [chunk(1, 100), chunk(2, 0), chunk(3, 4097)];
    const fresh = encodeBundle(chunks);
    const scratch = new Uint8Array(fresh.byteLength + 500).fill(0xff);
    const reused = encodeBundle(chunks, scratch);
    expect(reused.buffer).toBe(scratch.buffer);
    expect(reused).toEqual(fresh);
    const back = decodeBundle(reused);
    expect(back.map((c) => [c.codec, c.rawLen, c.stored.byteLength])).toEqual(
      chunks.map((c) => [c.codec, c.rawLen, c.stored.byteLength]),
    );
  });

  it('allocates when the buffer is too small', () => {
    const chunks = [chunk(4, 300)];
    const small = new Uint8Array(10);
    const out = encodeBundle(chunks, small);
    expect(out.buffer).not.toBe(small.buffer);
    expect(out).toEqual(encodeBundle(chunks));
  });
});
