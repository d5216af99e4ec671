/**
 * RapidCDC hints (Ni thesis ch. 3 §3.3; wasm-core `chunk::rapidfpt`): the previous
 * version's recipes laid end to end, with every chunk's length, so that the workers can
 * predict each next chunk of a file instead of scanning for it. A prediction is accepted
 * only if the chunk's SHA-1 equals the predicted chunk's, so the chunks are exactly those
 * of plain chunking: hints save time, never change a recipe.
 *
 * A manifest lists fingerprints, not lengths; the lengths come from the server
 * (`chunks/lengths`), which stores every chunk's raw length.
 */
import type { ManifestEntry } from '../api/client';
import { FP_LEN, hexToBytes } from './hex';

/** What a worker builds its `RecipeHints` from. */
export interface RecipeHintsData {
  /** Every file's recipe in order, 20 bytes per chunk. */
  fps: Uint8Array;
  lengths: Uint32Array;
  /** Chunks of each file, in the same order. */
  counts: Uint32Array;
}

export interface PreviousRecipes {
  data: RecipeHintsData;
  /** Path -> index of that file in `data` (its first chunk is predicted first). */
  fileIndex: Map<string, number>;
}

/** Fingerprints per `chunks/lengths` request (the server takes at most 200 000). */
export const LENGTHS_PER_REQUEST = 100_000;

/**
 * The hints for backing up a new version of `files` (the previous version's file entries),
 * or null when there is nothing to predict from or the server does not know a length.
 */
export async function previousRecipes(
  files: readonly ManifestEntry[],
  lengthsOf: (fps: Uint8Array) => Promise<Uint32Array>,
): Promise<PreviousRecipes | null> {
  const slot = new Map<string, number>();
  let total = 0;
  for (const f of files) {
    total += f.recipe.length;
    for (const fp of f.recipe) if (!slot.has(fp)) slot.set(fp, slot.size);
  }
  if (!total) return null;
  const unique = new Uint8Array(slot.size * FP_LEN);
  let i = 0;
  for (const fp of slot.keys()) hexToBytes(fp, unique, FP_LEN * i++);
  const uniqueLengths = new Uint32Array(slot.size);
  for (let at = 0; at < slot.size; at += LENGTHS_PER_REQUEST) {
    const part = await lengthsOf(unique.subarray(at * FP_LEN, Math.min(slot.size, at + LENGTHS_PER_REQUEST) * FP_LEN));
    uniqueLengths.set(part, at);
  }
  if (uniqueLengths.includes(0)) return null;

  const fps = new Uint8Array(total * FP_LEN);
  const lengths = new Uint32Array(total);
  const counts = new Uint32Array(files.length);
  const fileIndex = new Map<string, number>();
  let at = 0;
  files.forEach((f, k) => {
    fileIndex.set(f.path, k);
    counts[k] = f.recipe.length;
    for (const fp of f.recipe) {
      const u = slot.get(fp)!;
      fps.set(unique.subarray(u * FP_LEN, (u + 1) * FP_LEN), at * FP_LEN);
      lengths[at++] = uniqueLengths[u];
    }
  });
  return { data: { fps, lengths, counts }, fileIndex };
}
