import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { testCore } from '../wasm/testing';
import { ChunkEngine, RecipeHints, SegmentChunker, fingerprintMany, sha1Hex } from '../wasm-pkg/wasm_core.js';
import { FP_LEN, fpHex } from '../backup/hex';
import { FingerprintSet } from '../dedupindex/fpset';
import { settle } from './settle';

const testdata = (name: string) =>
  new Uint8Array(readFileSync(new URL(`../../../wasm-core/testdata/${name}`, import.meta.url)));

beforeAll(async () => {
  await testCore();
});

interface Named {
  offset: number;
  length: number;
  name: Uint8Array;
  fresh: boolean;
}

/** One file through a worker's chunk + settle steps, in 64 KiB blocks. */
function backUp(data: Uint8Array, known: FingerprintSet, hints?: RecipeHints): Named[] {
  const engine = hints ? ChunkEngine.withHints(hints, 0) : new ChunkEngine('default');
  const out: Named[] = [];
  const take = (n: number) => {
    if (!n) return;
    const { fps, fresh } = settle(engine, n, known);
    const off = engine.offsets();
    const len = engine.lengths();
    const passed = new Set(fresh);
    for (let i = 0; i < n; i++)
      out.push({ offset: off[i], length: len[i], name: fps.slice(i * FP_LEN, (i + 1) * FP_LEN), fresh: passed.has(i) });
  };
  try {
    for (let at = 0; at < data.length; at += 64 << 10) take(engine.push(data.subarray(at, at + (64 << 10))));
    take(engine.finish());
  } finally {
    engine.free();
  }
  return out;
}

/**
 * The oracle: every chunk ends up named by its fingerprint, whether passed on or found
 * known (under its plain SHA-1, equal to the fingerprint for ordinary chunks, or under its
 * fingerprint once confirmed). Returns how many were passed on.
 */
function checkNames(data: Uint8Array, got: Named[]): number {
  let covered = 0;
  for (const c of got) {
    expect(c.offset).toBe(covered);
    const bytes = data.subarray(c.offset, c.offset + c.length);
    const want = fpHex(fingerprintMany(bytes, Uint32Array.of(0), Uint32Array.of(c.length)));
    expect(fpHex(c.name), `chunk at ${c.offset}, passed on: ${c.fresh}`).toBe(want);
    covered += c.length;
  }
  expect(covered).toBe(data.length);
  return got.filter((c) => c.fresh).length;
}

const names = (got: Named[]) => {
  const all = new Uint8Array(got.length * FP_LEN);
  got.forEach((c, i) => all.set(c.name, i * FP_LEN));
  return all;
};

describe('settle', () => {
  const one = testdata('shattered-1.pdf');
  const two = testdata('shattered-2.pdf');

  it('passes the SHAttered chunks on under two fingerprints, backed up one after the other', () => {
    const g1 = backUp(one, new FingerprintSet(0));
    expect(checkNames(one, g1)).toBe(g1.length);
    const len = g1[0].length;
    expect(len).toBeGreaterThanOrEqual(320);
    // The attacked chunk's name is not its (colliding) SHA-1.
    expect(fpHex(g1[0].name)).not.toBe(sha1Hex(one.subarray(0, len)));
    expect(sha1Hex(two.subarray(0, len))).toBe(sha1Hex(one.subarray(0, len)));

    // The next backup: the previous version's names are the known set, with and without
    // RapidCDC hints from its recipe.
    for (const withHints of [false, true]) {
      const prev = names(g1);
      const hints = withHints
        ? new RecipeHints(prev, Uint32Array.from(g1.map((c) => c.length)), Uint32Array.of(g1.length))
        : undefined;
      try {
        const g2 = backUp(two, FingerprintSet.fromPacked(prev), hints);
        expect(checkNames(two, g2), `hints: ${withHints}`).toBe(1);
        expect(g2[0].fresh).toBe(true);
        expect(fpHex(g2[0].name)).not.toBe(fpHex(g1[0].name));
      } finally {
        hints?.free();
      }
    }
  });

  it('passes both on within one job', () => {
    const known = new FingerprintSet(0);
    backUp(one, known);
    const g2 = backUp(two, known);
    expect(checkNames(two, g2)).toBe(1);
    expect(g2[0].fresh).toBe(true);
    // The same file again: nothing new, the attacked chunk found under its fingerprint.
    expect(checkNames(two, backUp(two, known))).toBe(0);
  });

  it('settles a segment of a large file the same way', () => {
    const known = new FingerprintSet(0);
    backUp(one, known);
    const seg = new SegmentChunker(two.length, 0, two.length);
    try {
      seg.push(two.subarray(seg.readFrom(), seg.readTo()));
      seg.scan();
      const n = seg.select(0);
      seg.hash();
      const { fps, fresh } = settle(seg, n, known);
      const off = seg.offsets();
      const len = seg.lengths();
      const got = Array.from({ length: n }, (_, i) => ({
        offset: off[i],
        length: len[i],
        name: fps.slice(i * FP_LEN, (i + 1) * FP_LEN),
        fresh: fresh.includes(i),
      }));
      expect(checkNames(two, got)).toBe(1);
      expect(got[0].fresh).toBe(true);
    } finally {
      seg.free();
    }
  });
});
