import { createHash } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import { testCore } from '../wasm/testing';
import { RestoreSession } from '../wasm-pkg/wasm_core.js';
import { encodeBundle } from '../backup/bundle';
import { crc32 } from './crc32';
import { readAnswer } from './answer';

beforeAll(async () => {
  await testCore();
});

/** A raw chunk (codec 0) of `n` bytes that verifies: its fingerprint is its SHA-1. */
function chunk(seed: number, n: number) {
  const stored = Uint8Array.from({ length: n }, (_, i) => (Math.imul(i + seed, 2654435761) >>> 11) & 0xff);
  return { fp: new Uint8Array(createHash('sha1').update(stored).digest()), codec: 0, rawLen: n, stored };
}

describe('readAnswer', () => {
  const chunks = [chunk(1, 5000), chunk(2, 70_000), chunk(3, 1)];
  /** The chunks verified by a fresh session, as raw bytes or (`zip`) as fragments. */
  const verified = (zip: boolean) => {
    const session = new RestoreSession();
    const r = readAnswer(session.verify(encodeBundle(chunks), chunks.length, zip));
    session.free();
    if (r.type !== 'verified') throw new Error(r.reason);
    return r;
  };

  it('reads raw bytes back to back, each with its length and CRC-32', () => {
    const r = verified(false);
    expect([...r.sizes]).toEqual([5000, 70_000, 1]);
    expect([...r.lengths]).toEqual([...r.sizes]);
    expect([...r.crcs]).toEqual(chunks.map((c) => crc32(c.stored)));
    chunks.forEach((c, k) => expect(r.raw.subarray(r.offsets[k], r.offsets[k] + r.lengths[k])).toEqual(c.stored));
  });

  it("reads a zip's deflate fragments, which inflate to the chunks", () => {
    const r = verified(true);
    expect([...r.sizes]).toEqual([5000, 70_000, 1]);
    expect([...r.crcs]).toEqual(chunks.map((c) => crc32(c.stored)));
    expect(r.offsets[2] + r.lengths[2]).toBe(r.raw.length);
    chunks.forEach((c, k) => {
      const fragment = r.raw.subarray(r.offsets[k], r.offsets[k] + r.lengths[k]);
      // A fragment and the final empty block are a whole raw deflate stream.
      const stream = new Uint8Array([...fragment, 0x03, 0x00]);
      expect(new Uint8Array(inflateRawSync(stream))).toEqual(c.stored);
    });
  });
});
