/**
 * The difference between two versions of one file, once both are fetched: a line diff when
 * both look like text (./diff.ts), else the span of bytes that differs.
 */
import { looksLikeText } from '../restore/preview';
import { diffText, DiffTooLargeError, type TextDiff, type TextDiffOptions } from './diff';

/** Each side of a diff is fetched up to this many bytes; larger files are not diffed in the page. */
export const DIFF_MAX_BYTES = 4 << 20;

/**
 * Where two byte strings differ: everything between their common prefix and their common
 * suffix (which do not overlap). An insertion or deletion of k bytes counts as k, an
 * in-place edit as the distance from its first to its last changed byte.
 */
export interface ByteSpan {
  /** Length of the common prefix: the offset of the first differing byte. */
  prefix: number;
  suffix: number;
  /** Bytes of the old and the new file between prefix and suffix. */
  oldChanged: number;
  newChanged: number;
}

export function changedSpan(a: Uint8Array, b: Uint8Array): ByteSpan {
  const max = Math.min(a.length, b.length);
  let prefix = 0;
  while (prefix < max && a[prefix] === b[prefix]) prefix++;
  let suffix = 0;
  while (suffix < max - prefix && a[a.length - 1 - suffix] === b[b.length - 1 - suffix]) suffix++;
  return { prefix, suffix, oldChanged: a.length - prefix - suffix, newChanged: b.length - prefix - suffix };
}

export type FileDiff =
  { kind: 'text'; diff: TextDiff } | { kind: 'binary'; span: ByteSpan } | { kind: 'too-large'; why: string };

/** Compares two complete files (the caller fetched them whole; see DIFF_MAX_BYTES). */
export function diffFiles(oldBytes: Uint8Array, newBytes: Uint8Array, opts: TextDiffOptions = {}): FileDiff {
  if (!looksLikeText(oldBytes) || !looksLikeText(newBytes))
    return { kind: 'binary', span: changedSpan(oldBytes, newBytes) };
  const dec = new TextDecoder();
  try {
    return { kind: 'text', diff: diffText(dec.decode(oldBytes), dec.decode(newBytes), opts) };
  } catch (e) {
    if (e instanceof DiffTooLargeError) return { kind: 'too-large', why: e.message };
    throw e;
  }
}
