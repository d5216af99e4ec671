/**
 * Which chunks of a chunker's batch a worker passes on as new, and under which names.
 *
 * The chunker names every chunk by its lookup key (plain SHA-1, SIMD-fast); a chunk that
 * may be stored is *confirmed* first (wasm-core `confirm`: the collision-detecting
 * fingerprint, different from the key only for a chunk holding a SHA-1 collision-attack
 * block). A key found in the job's known set stands for exactly the chunk known under it
 * (wasm-core `hash` module documentation says why), so known chunks keep their key.
 * Unknown ones are confirmed, then looked up again under their fingerprint (the server may
 * hold an attacked chunk under its safe hash); the known set only ever receives
 * fingerprints, never the key of a chunk whose fingerprint differs, so the other half of a
 * colliding pair is not taken for the first.
 */
import { FP_LEN } from '../backup/hex';
import type { FingerprintSet } from '../dedupindex/fpset';

/** The last batch of a `ChunkEngine` or `SegmentChunker`. */
export interface KeyedBatch {
  fingerprints(): Uint8Array;
  confirm(indices: Uint32Array): number;
}

export interface Settled {
  /** The batch's names, 20 bytes per chunk: what the recipe records. */
  fps: Uint8Array;
  /** Indices of the chunks to pass on as new (now in the known set). */
  fresh: Uint32Array;
}

/** Settles the `n` chunks of `batch` against `known` (see the module comment). */
export function settle(batch: KeyedBatch, n: number, known: FingerprintSet): Settled {
  let fps = batch.fingerprints();
  const unknown: number[] = [];
  for (let i = 0; i < n; i++) if (!known.has(fps, i * FP_LEN)) unknown.push(i);
  if (!unknown.length) return { fps, fresh: new Uint32Array(0) };
  const idx = Uint32Array.from(unknown);
  if (batch.confirm(idx) > 0) fps = batch.fingerprints();
  const fresh: number[] = [];
  for (const i of idx) if (known.add(fps, i * FP_LEN)) fresh.push(i);
  return { fps, fresh: Uint32Array.from(fresh) };
}
