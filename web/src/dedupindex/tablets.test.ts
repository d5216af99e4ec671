import { describe, expect, it } from 'vitest';
import { emptySearchStats, TabletIndex, type TabletSource } from './tablets';
import { concatFps, randomFps } from './testfps';

const T = 6; // tablets
const S = 4; // fingerprints per tablet

/** Six full tablets of four fingerprints, held by a source that counts loads. */
function setup(cached = 3) {
  const bodies = Array.from({ length: T }, (_, id) => randomFps(S, 100 + id));
  const loads: number[] = [];
  const source: TabletSource = {
    async load(id) {
      loads.push(id);
      return bodies[id].slice();
    },
  };
  const index = new TabletIndex(source, S, cached, Array(T).fill(S), bodies[T - 1]);
  const fp = (tablet: number, j: number) => bodies[tablet].subarray(j * 20, (j + 1) * 20);
  const stats = emptySearchStats();
  async function find(...fps: Uint8Array[]): Promise<number[]> {
    const batch = concatFps(...fps);
    const out = new Uint8Array(fps.length);
    await index.search(
      batch,
      fps.map((_, i) => i),
      out,
      stats,
    );
    return [...out];
  }
  return { index, fp, loads, stats, find };
}

describe('TabletIndex (PRUNE LRU with prefetching)', () => {
  it('starts as a linear list with only the newest tablet loaded', () => {
    const { index } = setup();
    expect(index.lruOrder()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(index.residentIds()).toEqual([5]);
    expect(index.total).toBe(24);
  });

  it('a hit moves the tablet and its successor to the head, evicting from the tail', async () => {
    const { index, fp, loads, stats, find } = setup(3);
    expect(await find(fp(2, 1))).toEqual([1]);
    // Walked the list: 0 and 1 loaded and missed (dropped again), 2 hit, 3 prefetched.
    expect(loads).toEqual([0, 1, 2, 3]);
    expect(index.lruOrder()).toEqual([2, 3, 0, 1, 4, 5]);
    expect(index.residentIds()).toEqual([2, 3, 5]);

    // Next fingerprint is in the prefetched tablet: no search beyond memory, and
    // the rule applies again (3 and 4 to the head); 2 is the LRU non-pinned tablet.
    expect(await find(fp(3, 0))).toEqual([1]);
    expect(loads).toEqual([0, 1, 2, 3, 4]);
    expect(index.lruOrder()).toEqual([3, 4, 2, 0, 1, 5]);
    expect(index.residentIds()).toEqual([3, 4, 5]);

    // 2 was evicted: a hit there reloads it; its successor 3 is already loaded.
    expect(await find(fp(2, 3))).toEqual([1]);
    expect(loads).toEqual([0, 1, 2, 3, 4, 2]);
    expect(index.lruOrder()).toEqual([2, 3, 4, 0, 1, 5]);
    expect(index.residentIds()).toEqual([2, 3, 5]);
    expect(stats.hits).toBe(3);
    expect(stats.tabletLoads).toBe(6);
  });

  it('a hit on the head tablet examines one tablet and loads nothing', async () => {
    const { fp, loads, stats, find } = setup(3);
    await find(fp(2, 0));
    const before = { loads: loads.length, examined: stats.tabletsExamined };
    expect(await find(fp(2, 1), fp(2, 2), fp(2, 3))).toEqual([1, 1, 1]);
    expect(loads.length).toBe(before.loads);
    expect(stats.tabletsExamined - before.examined).toBe(3);
  });

  it('resolves a batch loading each tablet at most once, following successors', async () => {
    const { index, fp, loads, stats, find } = setup(4);
    const r = await find(fp(0, 0), fp(0, 1), fp(1, 2), fp(2, 0), fp(0, 3));
    expect(r).toEqual([1, 1, 1, 1, 1]);
    expect(loads).toEqual([0, 1, 2, 3]);
    expect(index.lruOrder().slice(0, 2)).toEqual([2, 3]);
    expect(stats.falsePositives).toBe(0);
  });

  it('a miss (Bloom false positive) searches every tablet but leaves the cache alone', async () => {
    const { index, fp, loads, stats, find } = setup(3);
    await find(fp(2, 0));
    const lru = index.lruOrder();
    const resident = index.residentIds();
    loads.length = 0;
    expect(await find(randomFps(1, 999))).toEqual([0]);
    expect(loads.sort()).toEqual([0, 1, 4]);
    expect(index.lruOrder()).toEqual(lru);
    expect(index.residentIds()).toEqual(resident);
    expect(stats.falsePositives).toBe(1);
  });

  it('appends into the current tablet, rolls over, and rolls back', () => {
    const { index } = setup(3);
    const mark = index.mark();
    const recs = index.append(randomFps(6, 50), [0, 1, 2, 3, 4, 5]);
    expect(recs.map((r) => [r.id, r.fps.length / 20])).toEqual([
      [6, 4],
      [7, 2],
    ]);
    expect(index.tabletLengths()).toEqual([4, 4, 4, 4, 4, 4, 4, 2]);
    expect(index.lruOrder().slice(0, 2)).toEqual([7, 6]);
    index.rollback(mark);
    expect(index.tabletLengths()).toEqual([4, 4, 4, 4, 4, 4]);
    expect(index.lruOrder()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(index.residentIds()).toContain(5);
  });
});
