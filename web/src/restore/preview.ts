/**
 * Previewing one file of a version in the page: what kind of preview a file gets, how much
 * of it is read, and the text cut into plain and highlighted runs for the search terms.
 */

/** Text shows at most this many bytes (the rest is a download away). */
export const TEXT_PREVIEW_BYTES = 1 << 20;
/** Images larger than this are not previewed. */
export const IMAGE_PREVIEW_BYTES = 32 << 20;

const IMAGES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  avif: 'image/avif',
  bmp: 'image/bmp',
  ico: 'image/x-icon',
  svg: 'image/svg+xml',
};

export type PreviewKind =
  { kind: 'image'; mime: string; limit: number } | { kind: 'text'; limit: number } | { kind: 'none'; why: string };

/** How a file named `name` of `size` bytes is previewed. */
export function previewKind(name: string, size: number): PreviewKind {
  const ext = name.slice(name.lastIndexOf('.') + 1).toLowerCase();
  const mime = name.includes('.') ? IMAGES[ext] : undefined;
  if (mime) {
    if (size > IMAGE_PREVIEW_BYTES)
      return { kind: 'none', why: `images over ${IMAGE_PREVIEW_BYTES >> 20} MiB are not previewed` };
    return { kind: 'image', mime, limit: size };
  }
  return { kind: 'text', limit: Math.min(size, TEXT_PREVIEW_BYTES) };
}

/** Whether the first bytes look like text (no NUL, mostly valid UTF-8). */
export function looksLikeText(bytes: Uint8Array): boolean {
  const head = bytes.subarray(0, 8192);
  if (head.includes(0)) return false;
  const text = new TextDecoder('utf-8', { fatal: false }).decode(head);
  let bad = 0;
  for (const ch of text) if (ch === '\ufffd') bad++;
  return bad <= Math.max(2, text.length / 100);
}

export interface Run {
  text: string;
  hit: boolean;
}

/** `text` cut into runs, the case-insensitive occurrences of any of `terms` marked as hits. */
export function highlightRuns(text: string, terms: readonly string[]): Run[] {
  const words = terms.map((t) => t.trim()).filter((t) => t.length > 0);
  if (!words.length) return [{ text, hit: false }];
  const escaped = words.sort((a, b) => b.length - a.length).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  const re = new RegExp(escaped.join('|'), 'gi');
  const runs: Run[] = [];
  let at = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > at) runs.push({ text: text.slice(at, m.index), hit: false });
    runs.push({ text: m[0], hit: true });
    at = m.index + m[0].length;
  }
  if (at < text.length || !runs.length) runs.push({ text: text.slice(at), hit: false });
  return runs;
}

/** A byte range `[start, end)` of a file: one hit of a search. */
export type ByteRange = readonly [number, number];

/**
 * `bytes` decoded as UTF-8 and cut into runs, the bytes inside any of `ranges` marked as hits:
 * a search's own hits (its byte offsets, case-sensitive and hex keywords included), not a
 * second search over the text. Overlapping or touching ranges make one mark; ranges past the
 * end are clipped. The runs' texts join to the whole decoded text: one streaming decoder
 * reads the pieces in order, so a character cut by a range border is decoded once, in the
 * run where it ends.
 */
export function markedRuns(bytes: Uint8Array, ranges: readonly ByteRange[]): Run[] {
  const merged: [number, number][] = [];
  for (const [s, e] of [...ranges].sort((a, b) => a[0] - b[0])) {
    const start = Math.max(0, s);
    const end = Math.min(bytes.length, e);
    if (end <= start) continue;
    const last = merged.at(-1);
    if (last && start <= last[1]) last[1] = Math.max(last[1], end);
    else merged.push([start, end]);
  }
  const decoder = new TextDecoder('utf-8', { fatal: false });
  const runs: Run[] = [];
  const piece = (from: number, to: number, hit: boolean) => {
    const text = decoder.decode(bytes.subarray(from, to), { stream: true });
    if (text) runs.push({ text, hit });
  };
  let at = 0;
  for (const [s, e] of merged) {
    if (s > at) piece(at, s, false);
    piece(s, e, true);
    at = e;
  }
  if (at < bytes.length) piece(at, bytes.length, false);
  // What the stream still holds: a character cut by the end of the bytes.
  const rest = decoder.decode();
  if (rest && runs.length) runs[runs.length - 1].text += rest;
  else if (rest || !runs.length) runs.push({ text: rest, hit: false });
  return runs;
}

/** How many of `ranges` lie wholly within the first `length` bytes. */
export function rangesWithin(ranges: readonly ByteRange[], length: number): number {
  return ranges.filter(([s, e]) => s >= 0 && e <= length).length;
}
