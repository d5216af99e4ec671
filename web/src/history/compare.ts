/**
 * What changed between two versions, from their manifests alone: a file's recipe (its list
 * of chunk fingerprints) names its content, so two files with the same recipe hold the same
 * bytes and cost nothing to compare; only files whose recipes differ are "changed", and only
 * those are ever fetched (for a text diff, ./textdiff.ts). Directories are not listed: a
 * folder's presence follows from its files (an empty one shows in the version's tree).
 */
import type { Manifest, ManifestEntry, SkipReason } from '../api/client';

/** A file (or symlink) present in only one of the two versions. */
export interface OneSide {
  path: string;
  kind: 'file' | 'symlink';
  size: number;
  /**
   * Removed only because the newer version is incomplete: the file was picked but could not
   * be read (the manifest's `skipped`, docs/FORMAT.md), so it may well still exist.
   */
  skipped?: SkipReason;
}

export interface Changed {
  path: string;
  /** 'file' both sides, or 'kind' when a file became a symlink or back. */
  kind: 'file' | 'symlink' | 'kind';
  oldSize: number;
  newSize: number;
  /** The entries, for fetching both sides. */
  old: ManifestEntry;
  new: ManifestEntry;
}

export interface Comparison {
  added: OneSide[];
  removed: OneSide[];
  changed: Changed[];
  /** Files with the same content (same recipe, or same symlink target) in both. */
  unchanged: number;
  unchangedBytes: number;
  /** Total file bytes of each version, and the difference (new - old). */
  oldBytes: number;
  newBytes: number;
}

function sameContent(a: ManifestEntry, b: ManifestEntry): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === 'symlink') return a.target === b.target;
  if (a.size !== b.size || a.recipe.length !== b.recipe.length) return false;
  for (let i = 0; i < a.recipe.length; i++) if (a.recipe[i] !== b.recipe[i]) return false;
  return true;
}

const byPath = (x: { path: string }, y: { path: string }) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0);

/** Files and symlinks added, removed and changed from `older` to `newer`, each list by path. */
export function compareManifests(older: Manifest, newer: Manifest): Comparison {
  const content = (m: Manifest) => {
    const map = new Map<string, ManifestEntry>();
    for (const e of m.entries) if (e.kind !== 'dir') map.set(e.path, e);
    return map;
  };
  const a = content(older);
  const b = content(newer);
  const skipped = new Map((newer.skipped ?? []).map((f) => [f.path, f.reason]));
  const out: Comparison = {
    added: [],
    removed: [],
    changed: [],
    unchanged: 0,
    unchangedBytes: 0,
    oldBytes: 0,
    newBytes: 0,
  };
  for (const [path, e] of a) {
    if (e.kind === 'file') out.oldBytes += e.size;
    const n = b.get(path);
    if (!n) {
      const skip = skipped.get(path);
      out.removed.push({ path, kind: e.kind as OneSide['kind'], size: e.size, ...(skip ? { skipped: skip } : {}) });
    } else if (sameContent(e, n)) {
      out.unchanged++;
      out.unchangedBytes += e.size;
    } else
      out.changed.push({
        path,
        kind: e.kind !== n.kind ? 'kind' : (e.kind as Changed['kind']),
        oldSize: e.size,
        newSize: n.size,
        old: e,
        new: n,
      });
  }
  for (const [path, e] of b) {
    if (e.kind === 'file') out.newBytes += e.size;
    if (!a.has(path)) out.added.push({ path, kind: e.kind as OneSide['kind'], size: e.size });
  }
  out.added.sort(byPath);
  out.removed.sort(byPath);
  out.changed.sort(byPath);
  return out;
}

/** One version of a file in its source's history. */
export type HistoryEntry<V> =
  | {
      version: V;
      entry: ManifestEntry;
      /**
       * Against the source's previous version: 'added' (it had no such file, or this is the
       * first version), 'changed' (other content) or 'same' (same content, maybe a new mtime).
       */
      change: 'added' | 'changed' | 'same';
    }
  | {
      version: V;
      entry?: undefined;
      /** The version is incomplete: the file was picked but could not be read (`skipped`). */
      change: 'skipped';
      skipped: SkipReason;
    };

/**
 * The versions (oldest first) that hold `path` as a file or symlink, each marked against
 * the version just before it in `versions` (not the last one holding the path: a file
 * deleted and restored shows as added again), and those that could not read it (the
 * manifest's `skipped`): listed as such, the file may well have existed then, so the next
 * version is marked against the last one that held it.
 */
export function fileHistory<V>(
  path: string,
  versions: readonly { version: V; manifest: Manifest }[],
): HistoryEntry<V>[] {
  const out: HistoryEntry<V>[] = [];
  let prev: ManifestEntry | undefined;
  for (const { version, manifest } of versions) {
    const e = manifest.entries.find((x) => x.path === path && x.kind !== 'dir');
    if (e) {
      out.push({ version, entry: e, change: !prev ? 'added' : sameContent(prev, e) ? 'same' : 'changed' });
      prev = e;
      continue;
    }
    const skip = manifest.skipped?.find((x) => x.path === path);
    if (skip) out.push({ version, change: 'skipped', skipped: skip.reason });
    else prev = undefined;
  }
  return out;
}

/** The last entry of `history` before `i` that holds the file (a skipped version does not). */
export function heldBefore<V>(
  history: readonly HistoryEntry<V>[],
  i: number,
): (HistoryEntry<V> & { entry: ManifestEntry }) | undefined {
  for (let k = i - 1; k >= 0; k--) {
    const h = history[k];
    if (h.entry) return h as HistoryEntry<V> & { entry: ManifestEntry };
  }
  return undefined;
}
