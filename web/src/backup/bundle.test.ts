import { beforeAll, describe, expect, it } from 'vitest';
import { testCore } from '../wasm/testing';
import { BundleEncoder, decodeBundle, encodeBundle, type BundleChunk } from './bundle';

beforeAll(async () => {
  await testCore();
});

const chunk = (seed: number, len: number): BundleChunk => ({
  fp: Uint8Array.from({ length: 20 }, (_, i) => (seed * 31 + i) & 255),
  codec: seed & 1,
  // A raw chunk (codec 0) stores its raw bytes.
  rawLen: seed & 1 ? len + seed : len,
  stored: Uint8Array.from({ length: len }, (_, i) => (seed + i * 7) & 255),
});

describe('bundles', () => {
  it('encodes one bundle after another in the same memory, each as encodeBundle does', () => {
    const enc = new BundleEncoder();
    // The second set grows the engine's memory while it is encoded (chunks of up to 1 MiB).
    const big = [8, 10, 12, 14].map((s) => chunk(s, 1_000_000));
    const sets = [[chunk(1, 100), chunk(2, 0), chunk(3, 4097)], big, [chunk(4, 1)]];
    for (const chunks of sets) {
      const got = enc.encode(chunks).slice();
      // Compared as buffers: `toEqual` walks megabytes element by element.
      expect(Buffer.from(got).equals(encodeBundle(chunks))).toBe(true);
      expect(decodeBundle(got).map((c) => [c.codec, c.rawLen, c.stored.byteLength])).toEqual(
        chunks.map((c) => [c.codec, c.rawLen, c.stored.byteLength]),
      );
    }
    enc.free();
  });

  it('reads what it wrote, entries as views of the bundle, and refuses a malformed one', () => {
    const chunks = [chunk(5, 10), chunk(6, 2000), chunk(7, 1)];
    const bundle = encodeBundle(chunks);
    // The layout of docs/FORMAT.md: a 16-byte header ("DTB1", version 1, the count), then
    // per chunk 32 bytes (fingerprint, codec, reserved, raw and stored length) and its bytes.
    const view = new DataView(bundle.buffer);
    expect([...bundle.subarray(0, 4)]).toEqual([...'DTB1'].map((c) => c.charCodeAt(0)));
    expect([view.getUint16(4, true), view.getUint32(8, true)]).toEqual([1, 3]);
    expect(view.getUint32(16 + 24, true)).toBe(chunks[0].rawLen);
    expect(bundle.byteLength).toBe(16 + 3 * 32 + 10 + 2000 + 1);
    const back = decodeBundle(bundle);
    back.forEach((c, i) => {
      expect(c.fp).toEqual(chunks[i].fp);
      expect(c.stored).toEqual(chunks[i].stored);
      expect([c.codec, c.rawLen]).toEqual([chunks[i].codec, chunks[i].rawLen]);
      expect(c.stored.buffer).toBe(bundle.buffer);
    });
    expect(() => decodeBundle(bundle.subarray(0, bundle.byteLength - 1))).toThrow(/malformed bundle/);
    expect(() => decodeBundle(new Uint8Array([...bundle, 0]))).toThrow(/malformed bundle/);
    const badMagic = bundle.slice();
    badMagic[0] = 0;
    expect(() => decodeBundle(badMagic)).toThrow(/malformed bundle/);
  });
});
