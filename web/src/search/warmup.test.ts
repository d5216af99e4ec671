import { beforeAll, describe, expect, it } from 'vitest';
import { testCore } from '../wasm/testing';
import { coldKeywordSets, coldSample, coldStep } from './warmup';

beforeAll(async () => {
  await testCore();
});

describe("a first search's warm-up", () => {
  it('scans and walks its sample as a search does: it finds every occurrence of its keywords, and only those', () => {
    const sample = coldSample();
    // Small chunks, stored compressed: many turns of the loops a search runs per chunk.
    expect(sample.rawLens.length).toBeGreaterThan(500);
    expect(sample.codecs.filter((c) => c === 1).length).toBeGreaterThan(sample.codecs.length / 2);
    const text = new TextDecoder().decode(sample.text);
    const sets = coldKeywordSets(sample);
    expect(sets.map((s) => s.split('\n').length)).toEqual([1, 8]);
    for (const words of sets) {
      const want: string[] = [];
      words.split('\n').forEach((w, k) => {
        for (let at = text.indexOf(w); at >= 0; at = text.indexOf(w, at + 1)) want.push(`0 ${k} ${at}`);
      });
      const m = coldStep(sample, words);
      const got = Array.from({ length: m.length / 3 }, (_, i) => `${m[3 * i]} ${m[3 * i + 1]} ${m[3 * i + 2]}`);
      expect(got.length).toBeGreaterThan(0);
      expect(got.sort()).toEqual(want.sort());
    }
  });
});
