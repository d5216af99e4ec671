/**
 * Each source as the Sources view shows it: its versions on the server (last backup, size,
 * count, health) joined with what this browser keeps of it (the folder, its handle, the
 * schedule). A source known only here (no version committed yet) is listed too.
 */
import type { VersionInfo } from '../api/client';
import type { SourceFolder } from './store';

export type Health =
  | { state: 'healthy' }
  | { state: 'incomplete'; files: number }
  | { state: 'damaged'; chunks: number }
  | { state: 'none' };

export interface SourceSummary {
  source: string;
  /** The folder's name: as this browser keeps it, else as the newest version records it. */
  folder: string | null;
  versions: number;
  last: VersionInfo | null;
  health: Health;
  kept: SourceFolder | null;
}

/** The health of a source is its newest version's: that is what a restore of it gets now. */
export function healthOf(v: VersionInfo | null): Health {
  if (!v) return { state: 'none' };
  const damaged = v.damaged_chunks ?? 0;
  if (damaged > 0) return { state: 'damaged', chunks: damaged };
  const skipped = v.stats.skipped_files ?? 0;
  if (skipped > 0) return { state: 'incomplete', files: skipped };
  return { state: 'healthy' };
}

export function summarize(versions: readonly VersionInfo[], kept: readonly SourceFolder[]): SourceSummary[] {
  const by = new Map<string, SourceSummary>();
  const entry = (source: string) => {
    let s = by.get(source);
    if (!s)
      by.set(source, (s = { source, folder: null, versions: 0, last: null, health: { state: 'none' }, kept: null }));
    return s;
  };
  for (const v of versions) {
    const s = entry(v.source);
    s.versions++;
    if (!s.last || v.id > s.last.id) s.last = v;
  }
  for (const k of kept) entry(k.source).kept = k;
  for (const s of by.values()) {
    s.folder = s.kept?.folder ?? s.last?.folder ?? null;
    s.health = healthOf(s.last);
  }
  // Most recently backed up first; sources never backed up last, by name.
  return [...by.values()].sort(
    (a, b) => (b.last?.time ?? -Infinity) - (a.last?.time ?? -Infinity) || a.source.localeCompare(b.source),
  );
}
