import { describe, expect, it } from 'vitest';
import type { VersionInfo } from '../api/client';
import { due } from './schedule';
import type { SourceFolder } from './store';
import { healthOf, summarize } from './summary';

const v = (id: number, source: string, time: number, extra: Partial<VersionInfo['stats']> = {}, damaged = 0) =>
  ({
    id,
    source,
    time,
    committed_at: time,
    folder: `${source}-dir`,
    damaged_chunks: damaged,
    stats: { files: id, logical_bytes: id * 100, skipped_files: 0, ...extra },
  }) as unknown as VersionInfo;

const kept = (source: string, folder: string, everyMinutes: number | null = null, usedAt = 0): SourceFolder => ({
  key: source,
  repo: 'default',
  source,
  folder,
  usedAt,
  everyMinutes,
});

describe('summarize', () => {
  it('gives each source its newest version, count and health, with the folder this browser keeps', () => {
    const list = summarize(
      [v(1, 'a', 10), v(2, 'b', 30), v(3, 'a', 20, { skipped_files: 2 }), v(4, 'c', 5, {}, 3)],
      [kept('a', 'A folder'), kept('d', 'never backed up')],
    );
    expect(list.map((s) => [s.source, s.versions, s.last?.id ?? null, s.folder, s.health])).toEqual([
      ['b', 1, 2, 'b-dir', { state: 'healthy' }],
      ['a', 2, 3, 'A folder', { state: 'incomplete', files: 2 }],
      ['c', 1, 4, 'c-dir', { state: 'damaged', chunks: 3 }],
      ['d', 0, null, 'never backed up', { state: 'none' }],
    ]);
  });

  it('calls damage before incompleteness', () => {
    expect(healthOf(v(1, 'a', 1, { skipped_files: 1 }, 2))).toEqual({ state: 'damaged', chunks: 2 });
    expect(healthOf(null)).toEqual({ state: 'none' });
  });
});

describe('due', () => {
  it('is due once the interval has passed since the last backup, never without a schedule', () => {
    expect(due(kept('a', 'x', 5, 1_000), 1_000 + 5 * 60_000)).toBe(true);
    expect(due(kept('a', 'x', 5, 1_000), 1_000 + 5 * 60_000 - 1)).toBe(false);
    expect(due(kept('a', 'x', null, 0), 1e12)).toBe(false);
    expect(due(kept('a', 'x', 0, 0), 1e12)).toBe(false);
  });
});
