/**
 * Warms the engine's hot paths up once, when a worker starts.
 *
 * V8 runs new Wasm code in its baseline compiler (Liftoff) and tiers a function up to the
 * optimising compiler only after it has run for a while; a long first call can stay in the
 * baseline code (design/FINDINGS.md, "V8 quirks"). Without this, a page's first backup pays
 * for it: chunking, SHA-1 and zstd run slower until they are hot. The compiled module is
 * shared by the workers, so optimised code one worker triggers serves them all.
 */
import { ChunkEngine, NewChunkBatch, RecipeHints } from '../wasm-pkg/wasm_core.js';
import { ZSTD_LEVEL } from './protocol';

/** Synthetic text-like bytes (compressible but not repetitive): xorshift over 64 letters. */
export function syntheticText(n: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = 0x9e3779b9;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = 48 + ((x >>> 8) & 63);
  }
  return out;
}

/**
 * Chunks, confirms (fingerprints) and compresses `rounds` MiB, then predicts them back (RapidCDC): each
 * path a backup takes, at the uploads' zstd level. Returns the last round's chunk count and
 * how many of them were predicted.
 */
export function warmUp(zstdLevel = ZSTD_LEVEL, rounds = 4): { chunks: number; predicted: number } {
  const data = syntheticText(1 << 20);
  const last = { chunks: 0, predicted: 0 };
  const batch = new NewChunkBatch(zstdLevel);
  try {
    for (let r = 0; r < rounds; r++) {
      const engine = new ChunkEngine('default');
      const fps: Uint8Array[] = [];
      const lengths: number[] = [];
      const take = (n: number) => {
        if (!n) return;
        const all = Uint32Array.from({ length: n }, (_, i) => i);
        engine.confirm(all);
        fps.push(engine.fingerprints());
        lengths.push(...engine.lengths());
        batch.clear();
        batch.addFromEngine(engine, all);
      };
      try {
        take(engine.push(data));
        take(engine.finish());
      } finally {
        engine.free();
      }
      const all = new Uint8Array(fps.reduce((n, f) => n + f.length, 0));
      fps.reduce((at, f) => (all.set(f, at), at + f.length), 0);
      const hints = new RecipeHints(all, Uint32Array.from(lengths), Uint32Array.of(lengths.length));
      const predicted = ChunkEngine.withHints(hints, 0);
      try {
        predicted.push(data);
        predicted.finish();
        last.chunks = lengths.length;
        last.predicted = predicted.predicted();
      } finally {
        predicted.free();
        hints.free();
      }
    }
  } finally {
    batch.free();
  }
  return last;
}
