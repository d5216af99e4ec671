import { describe, expect, it } from 'vitest';
import { BLOCK_BYTES, BlockWriter, concat } from './blocks';

/** The blocks a BlockWriter makes of `pieces`, as the assembler takes them after each push. */
async function* blocks(
  pieces: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  blockBytes = BLOCK_BYTES,
): AsyncGenerator<Uint8Array> {
  const w = new BlockWriter(blockBytes);
  for await (const p of pieces) {
    w.push(p);
    yield* w.take();
  }
  w.flush();
  yield* w.take();
}

function pieces(seed: number, count: number, maxLen: number): Uint8Array[] {
  let s = seed;
  const rnd = () => ((s = (s * 1103515245 + 12345) >>> 0) >>> 8) / (1 << 24);
  const out: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const p = new Uint8Array(Math.floor(rnd() * maxLen));
    for (let k = 0; k < p.length; k++) p[k] = Math.floor(rnd() * 256);
    out.push(p);
  }
  return out;
}

/** The reference: every part copied in order. */
function joined(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

async function collect(it: AsyncIterable<Uint8Array>): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  for await (const b of it) out.push(b.slice());
  return out;
}

describe('blocks', () => {
  it('carries the same bytes in order, in blocks no larger than asked (small pieces copied together)', async () => {
    for (const [seed, blockBytes, maxLen] of [
      [1, 64, 10],
      [2, 64, 200],
      [3, 1000, 700],
      [4, 7, 30],
    ]) {
      const src = pieces(seed, 300, maxLen);
      const out = await collect(blocks(src, blockBytes));
      expect(joined(out)).toEqual(joined(src));
      for (const b of out) {
        expect(b.length).toBeGreaterThan(0);
        // A block of copies is at most blockBytes; a large piece passes through whole.
        if (b.length > blockBytes) expect(src.some((p) => p.length === b.length)).toBe(true);
      }
      // Everything but the last output and those before a large piece fill a block.
      const small = src.filter((p) => p.length < blockBytes / 2).reduce((s, p) => s + p.length, 0);
      if (src.every((p) => p.length < blockBytes / 2)) expect(out.length).toBe(Math.ceil(small / blockBytes));
    }
  });

  it('passes a large piece through without copying it, after the bytes before it', async () => {
    const big = new Uint8Array(100).fill(7);
    const out: Uint8Array[] = [];
    for await (const b of blocks([new Uint8Array([1, 2]), big, new Uint8Array([3])], 64)) out.push(b);
    expect(out.map((b) => [...b.subarray(0, 2)])).toEqual([[1, 2], [7, 7], [3]]);
    expect(out[1]).toBe(big);
  });

  it('yields nothing for nothing, and skips empty pieces', async () => {
    expect(await collect(blocks([], 16))).toEqual([]);
    expect(await collect(blocks([new Uint8Array(0), new Uint8Array(0)], 16))).toEqual([]);
  });

  it('does not reuse a block it has handed out', async () => {
    const out: Uint8Array[] = [];
    for await (const b of blocks(
      Array.from({ length: 10 }, (_, i) => new Uint8Array(5).fill(i)),
      8,
    ))
      out.push(b);
    expect(joined(out)).toEqual(joined(Array.from({ length: 10 }, (_, i) => new Uint8Array(5).fill(i))));
  });

  it('concat: one buffer of the parts in order; a single part is returned as it is', () => {
    for (const [seed, count] of [
      [5, 1],
      [6, 2],
      [7, 50],
    ]) {
      const src = pieces(seed, count, 300);
      const size = src.reduce((s, p) => s + p.length, 0);
      const out = concat(src, size);
      expect(out).toEqual(joined(src));
      if (count === 1) expect(out).toBe(src[0]);
    }
    expect(concat([], 0)).toEqual(new Uint8Array(0));
  });
});
