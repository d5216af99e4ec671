/**
 * The manifest as a request body, written piece by piece into a Blob.
 *
 * A 2 GiB file has ~230,000 chunks: as `string[]` recipes plus one JSON.stringify of the
 * whole manifest, the commit alone took ~160 MiB of the tab's memory (measured: the
 * renderer went from ~180 to ~340 MiB PSS while committing). Here recipes stay packed
 * fingerprints (20 bytes each) until written, and the JSON text is appended to a Blob in
 * ~1 MiB pieces, so the page holds one piece at a time.
 */
import type { ManifestEntry, SkippedFile } from '../api/client';
import { FP_LEN, fpHex } from './hex';

/** A recipe as hex strings (reused from a previous manifest) or packed 20-byte fingerprints. */
export type Recipe = string[] | Uint8Array;

export type BodyEntry = Omit<ManifestEntry, 'recipe'> & { recipe: Recipe };

/** Longest `detail` of a skipped file the page sends (the server takes up to 1024 bytes). */
export const DETAIL_CHARS = 300;

const PIECE = 1 << 20;

export function recipeLength(r: Recipe): number {
  return Array.isArray(r) ? r.length : r.length / FP_LEN;
}

export function recipeAt(r: Recipe, i: number): string {
  return Array.isArray(r) ? r[i] : fpHex(r, i);
}

const HEX_DIGITS = new TextEncoder().encode('0123456789abcdef');
const QUOTE = 0x22;
const COMMA = 0x2c;

/**
 * The same JSON as `JSON.stringify({ source, folder, time, entries })` (no `folder` when not
 * given), as a request body. Written as
 * UTF-8 bytes into one reused buffer, packed fingerprints straight as hex digits: building
 * hex strings instead (`fpHex`, `+=`) made V8 ropes of ~700 bytes per chunk, over 100 MiB of
 * garbage for a 2 GiB file's recipe, at the end of the backup.
 *
 * A manifest that fits one piece comes back as bytes: each Blob part is a round trip to the
 * browser process (2-10 ms per commit of a typescript release as Blob, measured 2026-11-23).
 */
export function manifestBody(
  source: string,
  time: number,
  entries: Iterable<BodyEntry>,
  skipped: readonly SkippedFile[] = [],
  folder?: string,
): Blob | Uint8Array {
  const enc = new TextEncoder();
  let blob: Blob | null = null;
  let buf = new Uint8Array(PIECE + 256);
  let len = 0;
  const spill = () => {
    // Blobs compose by reference (appending does not copy what was written before), and
    // copy the bytes they are given, so the buffer is reused.
    blob = new Blob(blob ? [blob, buf.subarray(0, len)] : [buf.subarray(0, len)]);
    len = 0;
  };
  /** Makes room for `n` more bytes. */
  const room = (n: number) => {
    if (len + n <= buf.length) return;
    spill();
    if (n > buf.length) buf = new Uint8Array(n);
  };
  const text = (t: string) => {
    room(t.length * 3); // UTF-8 needs at most 3 bytes per UTF-16 unit
    len += enc.encodeInto(t, buf.subarray(len)).written;
  };
  const packedHex = (fps: Uint8Array, i: number, comma: boolean) => {
    room(43);
    if (comma) buf[len++] = COMMA;
    buf[len++] = QUOTE;
    for (let j = i * FP_LEN; j < (i + 1) * FP_LEN; j++) {
      buf[len++] = HEX_DIGITS[fps[j] >> 4];
      buf[len++] = HEX_DIGITS[fps[j] & 15];
    }
    buf[len++] = QUOTE;
  };
  const named = folder === undefined ? '' : `"folder":${JSON.stringify(folder)},`;
  text(`{"source":${JSON.stringify(source)},${named}"time":${JSON.stringify(time)},"entries":[`);
  let first = true;
  for (const e of entries) {
    const { recipe, ...rest } = e;
    const head = JSON.stringify(rest);
    // `head` ends with "}"; the recipe goes last, as in the manifest's field order.
    text((first ? '' : ',') + head.slice(0, -1) + (head.length > 2 ? ',' : '') + '"recipe":[');
    first = false;
    if (Array.isArray(recipe)) recipe.forEach((fp, i) => text((i ? ',"' : '"') + fp + '"'));
    else for (let i = 0; i < recipe.length / FP_LEN; i++) packedHex(recipe, i, i > 0);
    text(']}');
    if (len >= PIECE) spill();
  }
  text(']');
  // Omitted when empty, as the server writes it: a complete version has no `skipped`.
  if (skipped.length)
    text(
      `,"skipped":${JSON.stringify(skipped.map((s) => ({ path: s.path, reason: s.reason, ...(s.detail ? { detail: s.detail.slice(0, DETAIL_CHARS) } : {}) })))}`,
    );
  text('}');
  if (!blob) return buf.slice(0, len);
  spill();
  return new Blob([blob], { type: 'application/json' });
}
