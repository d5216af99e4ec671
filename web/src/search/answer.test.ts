import { describe, expect, it, vi } from 'vitest';
import { decodeSearchAnswer, SearchAnswerError } from './answer';
import { Hits } from './search';

// The page's instance of the engine, made from the built file here (no fetch in Node).
vi.mock('../wasm/page', async () => {
  const { testCore } = await import('../wasm/testing');
  return {
    pageCore: async () => {
      await testCore();
    },
  };
});

interface F {
  version: number;
  size: number;
  path: string;
  recipe: { fp: number; len: number }[];
  hits: [number, number][];
}

/** Unsigned LEB128: 7 bits a byte, low first, the high bit on every byte but the last. */
function leb128(out: number[], n: bigint) {
  while (n >= 0x80n) {
    out.push(Number(n & 0x7fn) | 0x80);
    n >>= 7n;
  }
  out.push(Number(n));
}

/** The layout docs/FORMAT.md ("Search answer") gives, written out field by field. */
function encode(head: object, files: F[], format = 1): Uint8Array {
  const te = new TextEncoder();
  const h = te.encode(JSON.stringify(head));
  const parts: Uint8Array[] = [];
  const fixed = new Uint8Array(16);
  const dv = new DataView(fixed.buffer);
  fixed.set([0x44, 0x53, 0x52, 0x41]); // "DSRA"
  dv.setUint32(4, format, true);
  dv.setUint32(8, h.length, true);
  dv.setUint32(12, files.length, true);
  parts.push(fixed, h);
  for (const f of files) {
    const p = te.encode(f.path);
    const hits: number[] = [];
    let last = 0n;
    for (const [k, o] of f.hits) {
      leb128(hits, BigInt(o) - last);
      leb128(hits, BigInt(k));
      last = BigInt(o);
    }
    const b = new Uint8Array(32 + p.length + f.recipe.length * 24 + hits.length);
    const v = new DataView(b.buffer);
    v.setBigUint64(0, BigInt(f.version), true);
    v.setBigUint64(8, BigInt(f.size), true);
    v.setUint32(16, p.length, true);
    v.setUint32(20, f.recipe.length, true);
    v.setUint32(24, f.hits.length, true);
    v.setUint32(28, hits.length, true);
    b.set(p, 32);
    let at = 32 + p.length;
    for (const c of f.recipe) (b.fill(c.fp, at, at + 20), (at += 20));
    for (const c of f.recipe) (v.setUint32(at, c.len, true), (at += 4));
    b.set(hits, at);
    parts.push(b);
  }
  const out = new Uint8Array(parts.reduce((n, x) => n + x.length, 0));
  let at = 0;
  for (const x of parts) (out.set(x, at), (at += x.length));
  return out;
}

const head = {
  versions: [3, 9],
  matches: 3,
  files_searched: 12,
  logical_bytes: 4096,
  containers: 1,
  chunks: 2,
  bytes_scanned: 2048,
  chunks_ruled_out: 0,
  bytes_ruled_out: 0,
  stored_bytes_read: 0,
  phase_ms: { prepare: 1, physical: 2, logical: 0.5 },
};

describe('decodeSearchAnswer', () => {
  it('reads the head and every file, recipe and hit', async () => {
    const bytes = encode(head, [
      {
        version: 3,
        size: 2 ** 40 + 5,
        path: 'src/été.txt',
        recipe: [
          { fp: 0xab, len: 8192 },
          { fp: 0x01, len: 17 },
        ],
        hits: [
          [0, 5],
          [1, 2 ** 40 - 2],
          [2, 2 ** 40 - 2],
        ],
      },
      { version: 9, size: 0, path: 'empty', recipe: [], hits: [[2, 0]] },
    ]);
    const a = await decodeSearchAnswer(bytes);
    expect(a.versions).toEqual([3, 9]);
    expect(a.matches).toBe(3);
    expect(a.phase_ms.logical).toBe(0.5);
    expect(a.files).toHaveLength(2);
    const [f, g] = a.files;
    expect([f.version, f.size, f.path]).toEqual([3, 2 ** 40 + 5, 'src/été.txt']);
    expect(f.recipe).toEqual(['ab'.repeat(20), '01'.repeat(20)]);
    expect([...f.lengths]).toEqual([8192, 17]);
    expect(new Hits(f.hits).slice(0)).toEqual([
      { keyword: 0, offset: 5 },
      { keyword: 1, offset: 2 ** 40 - 2 },
      { keyword: 2, offset: 2 ** 40 - 2 },
    ]);
    expect([g.version, g.recipe.length, g.lengths.length]).toEqual([9, 0, 0]);
    expect(new Hits(g.hits).slice(0)).toEqual([{ keyword: 2, offset: 0 }]);
  });

  it('refuses what is not an answer, cut or lengthened, or beyond what a number holds', async () => {
    const one: F = { version: 1, size: 3, path: 'a', recipe: [{ fp: 1, len: 3 }], hits: [[0, 1]] };
    const bytes = encode(head, [one]);
    await expect(decodeSearchAnswer(bytes.subarray(0, bytes.length - 1))).rejects.toThrow(SearchAnswerError);
    await expect(decodeSearchAnswer(new Uint8Array([...bytes, 0]))).rejects.toThrow(SearchAnswerError);
    await expect(decodeSearchAnswer(encode(head, [one], 2))).rejects.toThrow(/format 2/);
    await expect(decodeSearchAnswer(new TextEncoder().encode('{"files":[]}'))).rejects.toThrow(/bad magic/);
    await expect(decodeSearchAnswer(encode(head, [{ ...one, size: 2 ** 53 }]))).rejects.toThrow(/beyond/);
  });
});
