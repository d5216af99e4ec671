/**
 * RapidCDC hints (Ni thesis ch. 3 §3.3; wasm-core `chunk::rapidfpt`): the previous
 * version's recipes laid end to end, with every chunk's length, so that the workers can
 * predict each next chunk of a file instead of scanning for it. A prediction is accepted
 * only if the chunk's SHA-1 equals the predicted chunk's, so the chunks are exactly those
 * of plain chunking: hints save time, never change a recipe.
 *
 * A manifest lists fingerprints, not lengths; the lengths come from the server
 * (`chunks/lengths`), which stores every chunk's raw length, or from this page's own last
 * backup of the source (previous.ts).
 */
import { FP_LEN, fpHex } from './hex';
import { distinctFps, type PreviousFile } from './previous';

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
  /** Index in `data.lengths` of each file's first chunk. */
  starts: Uint32Array;
}

/** The chunk lengths of the previous version's file at `path`, if it had one. */
export function lengthsOfFile(h: PreviousRecipes, path: string): Uint32Array | null {
  const k = h.fileIndex.get(path);
  return k === undefined ? null : h.data.lengths.subarray(h.starts[k], h.starts[k] + h.data.counts[k]);
}

/** Fingerprints per `chunks/lengths` request (the server takes at most 200 000). */
export const LENGTHS_PER_REQUEST = 100_000;

/**
 * The hints for backing up a new version of `files` (the previous version's files), or null
 * when there is nothing to predict from or the server does not know a length. Lengths the
 * files carry are used as they are; the others are asked of the server, once per distinct
 * fingerprint.
 */
export async function previousRecipes(
  files: readonly PreviousFile[],
  lengthsOf: (fps: Uint8Array) => Promise<Uint32Array>,
): Promise<PreviousRecipes | null> {
  const total = files.reduce((n, f) => n + f.recipe.length / FP_LEN, 0);
  if (!total) return null;
  const asked = files.every((f) => f.lengths) ? null : await askLengths(files, lengthsOf);
  if (asked === undefined) return null;

  const fps = new Uint8Array(total * FP_LEN);
  const lengths = new Uint32Array(total);
  const counts = new Uint32Array(files.length);
  const starts = new Uint32Array(files.length);
  const fileIndex = new Map<string, number>();
  let at = 0;
  files.forEach((f, k) => {
    const n = f.recipe.length / FP_LEN;
    fileIndex.set(f.path, k);
    counts[k] = n;
    starts[k] = at;
    fps.set(f.recipe, at * FP_LEN);
    if (f.lengths) lengths.set(f.lengths, at);
    else for (let i = 0; i < n; i++) lengths[at + i] = asked!.get(fpHex(f.recipe, i))!;
    at += n;
  });
  return { data: { fps, lengths, counts }, fileIndex, starts };
}

/** Lengths of the chunks of files without them, by hex fingerprint; undefined if any is unknown. */
async function askLengths(
  files: readonly PreviousFile[],
  lengthsOf: (fps: Uint8Array) => Promise<Uint32Array>,
): Promise<Map<string, number> | undefined> {
  const unique = distinctFps(files.filter((f) => !f.lengths));
  const n = unique.length / FP_LEN;
  const out = new Map<string, number>();
  for (let at = 0; at < n; at += LENGTHS_PER_REQUEST) {
    const stop = Math.min(n, at + LENGTHS_PER_REQUEST);
    const part = await lengthsOf(unique.subarray(at * FP_LEN, stop * FP_LEN));
    for (let i = at; i < stop; i++) {
      if (!part[i - at]) return undefined;
      out.set(fpHex(unique, i), part[i - at]);
    }
  }
  return out;
}
