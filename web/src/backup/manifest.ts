/**
 * The manifest as a request body, written piece by piece into a Blob.
 *
 * A 2 GiB file has ~230,000 chunks: as `string[]` recipes plus one JSON.stringify of the
 * whole manifest, the commit alone took ~160 MiB of the tab's memory (measured: the
 * renderer went from ~180 to ~340 MiB PSS while committing). Here recipes stay packed
 * fingerprints (20 bytes each) until written, and the JSON text is appended to a Blob in
 * ~1 MiB pieces, so the page holds one piece at a time.
 */
import type { ManifestEntry } from '../api/client';
import { FP_LEN, fpHex } from './hex';

/** A recipe as hex strings (reused from a previous manifest) or packed 20-byte fingerprints. */
export type Recipe = string[] | Uint8Array;

export type BodyEntry = Omit<ManifestEntry, 'recipe'> & { recipe: Recipe };

const PIECE = 1 << 20;

export function recipeLength(r: Recipe): number {
  return Array.isArray(r) ? r.length : r.length / FP_LEN;
}

export function recipeAt(r: Recipe, i: number): string {
  return Array.isArray(r) ? r[i] : fpHex(r, i);
}

/** The same JSON as `JSON.stringify({ source, time, entries })`, as a Blob. */
export function manifestBlob(source: string, time: number, entries: Iterable<BodyEntry>): Blob {
  let blob = new Blob([]);
  let piece = `{"source":${JSON.stringify(source)},"time":${JSON.stringify(time)},"entries":[`;
  const spill = () => {
    // Blobs compose by reference: appending does not copy what was written before.
    blob = new Blob([blob, piece]);
    piece = '';
  };
  let first = true;
  for (const e of entries) {
    const { recipe, ...rest } = e;
    const head = JSON.stringify(rest);
    // `head` ends with "}"; the recipe goes last, as in the manifest's field order.
    piece += (first ? '' : ',') + head.slice(0, -1) + (head.length > 2 ? ',' : '') + '"recipe":[';
    first = false;
    const n = recipeLength(recipe);
    for (let i = 0; i < n; i++) {
      piece += (i ? ',"' : '"') + recipeAt(recipe, i) + '"';
      if (piece.length >= PIECE) spill();
    }
    piece += ']}';
  }
  piece += ']}';
  spill();
  return new Blob([blob], { type: 'application/json' });
}
