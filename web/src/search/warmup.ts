/**
 * A first search's warm-up, run by one search worker once the page has settled
 * (`warmUpFirstSearch`, searchWorker.ts and workers.ts).
 */
import {
  ChunkCache,
  ChunkEngine,
  ContainerScan,
  FetchedBases,
  FileRecipes,
  NewChunkBatch,
  RecipeSearch,
  SearchKeywords,
} from '../wasm-pkg/wasm_core.js';
import { syntheticText } from '../worker/warmup';

/**
 * Synthetic text chunked small and stored as zstd, as a container range is, then scanned and
 * walked by the logical phase, for one keyword and for eight, `COLD_WARM_UP_ROUNDS` times.
 * V8 optimises a Wasm function once it has run for a while (a budget per function, spent per
 * loop turn and call): a first search otherwise runs its decoder, its scan and the logical
 * phase unoptimised while the browser compiles them beside it, on the same two cores. A
 * megabyte in 1 KiB chunks (a thousand turns of every per-chunk loop) per round spends those
 * budgets; a smaller sample (a few hundred KiB of 8 KiB chunks) did not (docs/BENCHMARKS.md,
 * "A first search's code optimised before it").
 */
const COLD_WARM_UP_BYTES = 1 << 20;
export const COLD_WARM_UP_ROUNDS = 3;

export interface ColdSample {
  text: Uint8Array;
  stored: Uint8Array;
  fps: Uint8Array;
  offsets: Float64Array;
  storedLens: Uint32Array;
  codecs: Uint8Array;
  rawLens: Uint32Array;
}

export function coldSample(): ColdSample {
  const text = syntheticText(COLD_WARM_UP_BYTES);
  const engine = new ChunkEngine('default', 256, 1024, 4096, undefined);
  const batch = new NewChunkBatch(3);
  try {
    const take = (n: number) => {
      const all = Uint32Array.from({ length: n }, (_, i) => i);
      engine.confirm(all);
      batch.addFromEngine(engine, all);
    };
    take(engine.push(text));
    take(engine.finish());
    const storedLens = Uint32Array.from(batch.storedLengths());
    const offsets = new Float64Array(storedLens.length);
    for (let k = 1; k < offsets.length; k++) offsets[k] = offsets[k - 1] + storedLens[k - 1];
    return {
      text,
      stored: batch.stored(),
      fps: batch.fps(),
      offsets,
      storedLens,
      codecs: batch.codecs(),
      rawLens: Uint32Array.from(batch.rawLengths()),
    };
  } finally {
    batch.free();
    engine.free();
  }
}

/** The warm-up's keyword sets: one keyword and eight, each taken from the sample's text. */
export function coldKeywordSets(sample: ColdSample): string[] {
  const word = (at: number, len: number) => new TextDecoder().decode(sample.text.subarray(at, at + len));
  return [word(1000, 12), Array.from({ length: 8 }, (_, i) => word(5000 + i * 70001, 10)).join('\n')];
}

/**
 * One step of the warm-up: the sample scanned for `words` and its one file walked; answers
 * the matches found (file, keyword, offset triples).
 */
export function coldStep(sample: ColdSample, words: string): Float64Array {
  const keywords = new SearchKeywords(words, false, 256);
  const scan = new ContainerScan(keywords, false);
  const cache = new ChunkCache(COLD_WARM_UP_BYTES);
  const fetched = new FetchedBases();
  const search = new RecipeSearch(keywords, false);
  const { stored, offsets, fps, storedLens, codecs, rawLens } = sample;
  const recipes = new FileRecipes(Uint32Array.of(0), Uint32Array.of(rawLens.length), fps, rawLens);
  try {
    scan.scan(cache, stored, 0, fps, offsets, storedLens, codecs, rawLens, fetched);
    const tiny = scan.takeTiny();
    search.addResults(scan.finish());
    search.addTiny(tiny);
    search.searchFiles(recipes);
    return search.takeMatches();
  } finally {
    recipes.free();
    search.free();
    fetched.free();
    cache.free();
    scan.free();
    keywords.free();
  }
}
