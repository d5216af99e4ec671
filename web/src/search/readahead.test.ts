import { beforeAll, describe, expect, it } from 'vitest';
import { testCore } from '../wasm/testing';
import {
  ChunkCache,
  ContainerScan,
  FetchedBases,
  FileRecipes,
  RecipeSearch,
  SearchKeywords,
} from '../wasm-pkg/wasm_core.js';
import { coldKeywordSets, coldSample, coldStep, type ColdSample } from './warmup';

beforeAll(async () => {
  await testCore();
});

const CACHE_BYTES = 8 << 20;

/** A read-ahead of `sample` into `cache` (a `ContainerScan.fill` over its one range). */
function fill(
  sample: ColdSample,
  cache: ChunkCache,
  stored = sample.stored,
): { missing: number; db: Uint8Array; stats: Float64Array } {
  const scan = ContainerScan.fill();
  const fetched = new FetchedBases();
  try {
    const missing = scan.scanCached(cache, sample.fps).length;
    const { offsets, fps, storedLens, codecs, rawLens } = sample;
    scan.scan(cache, stored, 0, fps, offsets, storedLens, codecs, rawLens, fetched);
    expect(scan.takeTiny().length).toBe(0);
    return { missing, stats: scan.stats(), db: scan.finish() };
  } finally {
    fetched.free();
    scan.free();
  }
}

/** A search of `words` over `sample` from `cache` alone: the chunks it would fetch, and its matches. */
function searchCached(
  sample: ColdSample,
  cache: ChunkCache,
  words: string,
): { missing: number; matches: Float64Array } {
  const keywords = new SearchKeywords(words, false, 256);
  const scan = new ContainerScan(keywords, false);
  const search = new RecipeSearch(keywords, false);
  const recipes = new FileRecipes(Uint32Array.of(0), Uint32Array.of(sample.rawLens.length), sample.fps, sample.rawLens);
  try {
    const missing = scan.scanCached(cache, sample.fps).length;
    const tiny = scan.takeTiny();
    search.addResults(scan.finish());
    search.addTiny(tiny);
    search.searchFiles(recipes);
    return { missing, matches: search.takeMatches() };
  } finally {
    recipes.free();
    search.free();
    scan.free();
    keywords.free();
  }
}

describe('a read-ahead (ContainerScan.fill)', () => {
  it('caches every chunk it reads, scanning nothing; a search then reads none and finds what a search from the server finds', () => {
    const sample = coldSample();
    const n = sample.rawLens.length;
    const cache = new ChunkCache(CACHE_BYTES);
    try {
      const r = fill(sample, cache);
      expect(r.missing).toBe(n);
      expect(r.stats.every((v) => v === 0)).toBe(true);
      expect(cache.holdsAll(sample.fps)).toBe(true);
      expect(cache.count()).toBe(n);
      // A second read-ahead finds everything held: it would fetch nothing.
      const scan = ContainerScan.fill();
      expect(scan.scanCached(cache, sample.fps).length).toBe(0);
      scan.free();
      // The result database it answers holds no results: merged into a search, it adds none.
      for (const words of coldKeywordSets(sample)) {
        const want = coldStep(sample, words);
        expect(want.length).toBeGreaterThan(0);
        const got = searchCached(sample, cache, words);
        expect(got.missing).toBe(0);
        expect(Array.from(got.matches)).toEqual(Array.from(want));
      }
    } finally {
      cache.free();
    }
  });

  it('refuses a chunk whose stored bytes are damaged, and does not keep it', () => {
    const sample = coldSample();
    // A byte in the middle of chunk 10's stored bytes.
    const k = 10;
    const stored = sample.stored.slice();
    stored[sample.offsets[k] + Math.floor(sample.storedLens[k] / 2)] ^= 0x55;
    const cache = new ChunkCache(CACHE_BYTES);
    try {
      expect(() => fill(sample, cache, stored)).toThrow(/chunk [0-9a-f]{40}/);
      expect(cache.holdsAll(sample.fps.subarray(k * 20, (k + 1) * 20))).toBe(false);
    } finally {
      cache.free();
    }
  });
});
