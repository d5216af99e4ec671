import { describe, expect, it } from 'vitest';
import {
  distrust,
  isFixedStamp,
  NPM_MTIME,
  planChanges,
  RACY_MS,
  sameRecipe,
  sampleIndices,
  sampleSize,
  sharedMtimes,
  type PreviousLike,
} from './change';

/** A seeded generator for the tests (the product samples with crypto.getRandomValues). */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const NOW = Date.UTC(2026, 10, 23, 12);
const T = Date.UTC(2025, 4, 1, 10, 0, 0, 123);
const file = (path: string, size: number, lastModified: number) => ({ path, file: { size, lastModified } });
const rules = (over: Partial<Parameters<typeof planChanges>[2]> = {}) => ({
  now: NOW,
  sampleRate: 0,
  readAll: false,
  random: seeded(1),
  ...over,
});
const prevOf = (files: ReturnType<typeof file>[], since: number | null = NOW - 3600_000) => {
  const m = new Map<string, PreviousLike>(
    files.map((f) => [f.path, { size: f.file.size, mtime: f.file.lastModified, since }]),
  );
  return (path: string) => m.get(path);
};
const paths = (l: { path: string }[]) => l.map((f) => f.path).sort();

describe('fixed stamps', () => {
  it('knows the placeholders tools write', () => {
    for (const t of [
      0,
      1,
      1000, // Nix: 1 s
      -1,
      NPM_MTIME, // 1985-10-26T08:15:00Z
      Date.UTC(1980, 0, 1), // zip/DOS, read as UTC
      Date.UTC(1980, 0, 1) - 14 * 3600_000, // ... as local time east of UTC
      Date.UTC(1980, 0, 1) + 12 * 3600_000, // ... west of UTC
      new Date(1980, 0, 1).getTime(), // ... in this machine's zone
    ])
      expect(isFixedStamp(t), String(t)).toBe(true);
    for (const t of [Date.UTC(1980, 0, 3), NPM_MTIME + 1000, T]) expect(isFixedStamp(t), String(t)).toBe(false);
  });
});

describe('distrust', () => {
  it('says why an mtime cannot vouch, or null', () => {
    const shared = new Set([T + 5]);
    expect(distrust(T, shared, NOW, null)).toBeNull();
    expect(distrust(NPM_MTIME, shared, NOW, null)).toBe('fixed stamp');
    expect(distrust(T + 5, shared, NOW, null)).toBe('shared');
    expect(distrust(NOW + 2 * 24 * 3600_000, shared, NOW, null)).toBe('future');
    // Modified just before the backup that recorded it started: it may have changed again after.
    expect(distrust(T, shared, NOW, T + RACY_MS - 1)).toBe('racy');
    expect(distrust(T, shared, NOW, T + RACY_MS + 1)).toBeNull();
  });
  it('finds every mtime two files share', () => {
    expect([...sharedMtimes([file('a', 1, 5), file('b', 1, 6), file('c', 2, 5), file('d', 3, 5)])]).toEqual([5]);
    expect(sharedMtimes([file('a', 1, 5)]).size).toBe(0);
  });
});

describe('planChanges', () => {
  it('never trusts a small folder of npm-stamped files (the lost-release bug)', () => {
    // Three files, all 1985-10-26, the binary and package.json rewritten at the same size.
    const pick = [
      file('bin/tool', 11_000_000, NPM_MTIME),
      file('package.json', 900, NPM_MTIME),
      file('README.md', 4000, NPM_MTIME),
    ];
    const plan = planChanges(pick, prevOf(pick), rules());
    expect(plan.trusted).toEqual([]);
    expect(paths(plan.distrusted)).toEqual(['README.md', 'bin/tool', 'package.json']);
  });
  it('never trusts an mtime shared by two files, even a believable one', () => {
    const pick = [file('a', 10, T), file('b', 20, T), file('c', 30, T + 1)];
    const plan = planChanges(pick, prevOf(pick), rules());
    expect(paths(plan.distrusted)).toEqual(['a', 'b']);
    expect(paths(plan.trusted)).toEqual(['c']);
  });
  it('reads new files and files whose size or mtime moved', () => {
    const before = [file('same', 10, T), file('grown', 10, T + 1), file('touched', 10, T + 2)];
    const now = [file('same', 10, T), file('grown', 11, T + 1), file('touched', 10, T + 3), file('new', 1, T + 4)];
    const plan = planChanges(now, prevOf(before), rules());
    expect(paths(plan.trusted)).toEqual(['same']);
    expect(paths(plan.changed)).toEqual(['grown', 'new', 'touched']);
  });
  it('reads every file when asked to', () => {
    const pick = Array.from({ length: 50 }, (_, i) => file(`f${i}`, i, T + i));
    const plan = planChanges(pick, prevOf(pick), rules({ readAll: true }));
    expect(plan.trusted).toEqual([]);
    expect(plan.sampled.length).toBe(50);
  });
  it('samples a share of the trusted files, at least one, different ones per seed', () => {
    const pick = Array.from({ length: 200 }, (_, i) => file(`f${i}`, i, T + i * 10));
    const a = planChanges(pick, prevOf(pick), rules({ sampleRate: 0.02, random: seeded(1) }));
    const b = planChanges(pick, prevOf(pick), rules({ sampleRate: 0.02, random: seeded(2) }));
    expect(a.sampled.length).toBe(4);
    expect(a.trusted.length).toBe(196);
    expect(new Set([...paths(a.sampled), ...paths(a.trusted)]).size).toBe(200);
    expect(paths(a.sampled)).not.toEqual(paths(b.sampled));
    expect(planChanges(pick.slice(0, 3), prevOf(pick), rules({ sampleRate: 0.02 })).sampled.length).toBe(1);
    expect(planChanges(pick, prevOf(pick), rules({ sampleRate: 0 })).sampled.length).toBe(0);
  });
  it('samples only files trusted from the previous version, not those this job read before a reload', () => {
    const pick = Array.from({ length: 10 }, (_, i) => file(`f${i}`, i, T + i * 10));
    const m = new Map<string, PreviousLike>(
      pick.map((f, i) => [f.path, { size: f.file.size, mtime: f.file.lastModified, since: null, sample: i >= 8 }]),
    );
    for (let seed = 0; seed < 20; seed++) {
      const plan = planChanges(pick, (p) => m.get(p), rules({ sampleRate: 0.5, random: seeded(seed) }));
      expect(plan.sampled.length).toBe(1);
      expect(['f8', 'f9']).toContain(plan.sampled[0].path);
      expect(plan.trusted.length).toBe(9);
    }
    // "Read every file" reads them too.
    expect(planChanges(pick, (p) => m.get(p), rules({ readAll: true })).sampled.length).toBe(10);
  });
  it('samples every trusted file about equally often', () => {
    const pick = Array.from({ length: 20 }, (_, i) => file(`f${i}`, i, T + i * 10));
    const hits = new Map<string, number>();
    const random = seeded(7);
    for (let round = 0; round < 2000; round++)
      for (const f of planChanges(pick, prevOf(pick), rules({ sampleRate: 0.1, random })).sampled)
        hits.set(f.path, (hits.get(f.path) ?? 0) + 1);
    // 2000 rounds x 2 of 20 files: 200 each on average.
    expect(hits.size).toBe(20);
    for (const n of hits.values()) (expect(n).toBeGreaterThan(140), expect(n).toBeLessThan(260));
  });
});

describe('helpers', () => {
  it('sampleIndices gives distinct indices in range', () => {
    const got = sampleIndices(10, 4, seeded(3));
    expect(new Set(got).size).toBe(4);
    for (const i of got) expect(i >= 0 && i < 10).toBe(true);
    expect(sampleIndices(3, 9, seeded(3)).sort()).toEqual([0, 1, 2]);
  });
  it('sampleSize', () => {
    expect(sampleSize(0, 0.5)).toBe(0);
    expect(sampleSize(1000, 0.02)).toBe(20);
    expect(sampleSize(5, 2)).toBe(5);
    expect(sampleSize(5, Number.NaN)).toBe(0);
  });
  it('sameRecipe', () => {
    expect(sameRecipe(new Uint8Array([1, 2]), new Uint8Array([1, 2]))).toBe(true);
    expect(sameRecipe(new Uint8Array([1, 2]), new Uint8Array([1, 3]))).toBe(false);
    expect(sameRecipe(new Uint8Array([1]), new Uint8Array([1, 2]))).toBe(false);
  });
});
