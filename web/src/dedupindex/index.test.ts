import 'fake-indexeddb/auto';
import { openDB } from 'idb';
import { afterEach, describe, expect, it } from 'vitest';
import { IndexQuotaError, inspectClientIndex, openClientIndex, type ClientIndex } from './index';
import { concatFps, fpSetOf, randomFps } from './testfps';

let seq = 0;
const open: ClientIndex[] = [];
/** A fresh database name per test. */
function freshName(): string {
  return `test-${++seq}-${Math.random().toString(36).slice(2)}`;
}
async function openIdx(name: string, opts?: Parameters<typeof openClientIndex>[1]): Promise<ClientIndex> {
  const idx = await openClientIndex(name, opts);
  open.push(idx);
  return idx;
}
afterEach(() => {
  for (const idx of open.splice(0)) idx.close();
});

function sum(a: Uint8Array): number {
  let s = 0;
  for (const v of a) s += v;
  return s;
}

/** Lets queued work (close's checkpoint) finish. */
const settle = () => new Promise((r) => setTimeout(r, 20));

describe('ClientIndex (IndexedDB)', () => {
  it('knows when another instance (another tab) wrote the database since it opened', async () => {
    const name = freshName();
    const a = await openIdx(name, { tabletSize: 128 });
    const b = await openIdx(name, { tabletSize: 128 });
    expect([await a.isCurrent(), await b.isCurrent()]).toEqual([true, true]);
    await a.add(randomFps(300, 21));
    expect([await a.isCurrent(), await b.isCurrent()]).toEqual([true, false]);
    const c = await openIdx(name, { tabletSize: 128 });
    expect(await c.isCurrent()).toBe(true);
    await a.useEpoch(4);
    expect([await a.isCurrent(), await c.isCurrent()]).toEqual([true, false]);
    const d = await openIdx(name, { tabletSize: 128 });
    await d.clear();
    expect([await a.isCurrent(), await d.isCurrent()]).toEqual([false, true]);
  });

  it('lookup/add round trip survives reopening', async () => {
    const name = freshName();
    const stored = randomFps(1_000, 11);
    const other = randomFps(1_000, 12);
    const a = await openIdx(name, { tabletSize: 128 });
    expect(sum(await a.lookup(stored))).toBe(0);
    await a.add(stored);
    expect(sum(await a.lookup(stored))).toBe(1_000);
    expect(sum(await a.lookup(other))).toBe(0);
    a.close();
    await settle();

    const b = await openIdx(name, { tabletSize: 128 });
    expect(b.stats()).toMatchObject({ fingerprints: 1_000, tablets: 8, lookups: 0 });
    const mixed = concatFps(other.subarray(0, 20 * 10), stored.subarray(0, 20 * 10));
    expect([...(await b.lookup(mixed))]).toEqual([...Array(10).fill(0), ...Array(10).fill(1)]);
    expect(sum(await b.lookup(stored))).toBe(1_000);
  });

  it('catches the Bloom filter up with adds made after its last checkpoint (no clean close)', async () => {
    const name = freshName();
    const a = await openIdx(name, { tabletSize: 100 });
    await a.add(randomFps(150, 21)); // 150 >= tabletSize: checkpointed
    const late = randomFps(40, 22); // below the checkpoint interval: only the tablets have it
    await a.add(late);
    // A second connection while `a` is still open, as after a crash.
    const b = await openIdx(name, { tabletSize: 100 });
    expect(b.stats().fingerprints).toBe(190);
    expect(sum(await b.lookup(late))).toBe(40);
    expect(sum(await b.lookup(randomFps(150, 21)))).toBe(150);
    expect(b.stats().bloomNegatives).toBe(0);
  });

  it('applies PRUNE LRU + prefetch order over IndexedDB and counts tablet loads', async () => {
    const name = freshName();
    const fps = randomFps(24, 31); // 6 tablets of 4
    const fp = (t: number, j: number) => fps.subarray((t * 4 + j) * 20, (t * 4 + j + 1) * 20);
    const a = await openIdx(name, { tabletSize: 4, cachedTablets: 3 });
    await a.add(fps);
    expect(a.stats()).toMatchObject({ fingerprints: 24, tablets: 6 });
    a.close();
    await settle();

    const b = await openIdx(name, { tabletSize: 4, cachedTablets: 3 });
    expect(inspectClientIndex(b)).toEqual({ lru: [0, 1, 2, 3, 4, 5], resident: [5] });
    expect([...(await b.lookup(fp(2, 0)))]).toEqual([1]);
    expect(inspectClientIndex(b)).toEqual({ lru: [2, 3, 0, 1, 4, 5], resident: [2, 3, 5] });
    expect(b.stats().tabletLoads).toBe(4); // 0, 1 (misses), 2 (hit), 3 (prefetch)
    expect([...(await b.lookup(fp(3, 1)))]).toEqual([1]);
    expect(inspectClientIndex(b)).toEqual({ lru: [3, 4, 2, 0, 1, 5], resident: [3, 4, 5] });
    expect(b.stats()).toMatchObject({ tabletLoads: 5, hits: 2, lookups: 2, falsePositives: 0 });
    // First lookup probed 5 (resident), then 0, 1, 2 loaded: 4. Second probed 2, then 3: 2. Mean 3.
    expect(b.stats().tabletsExaminedPerLookup).toBe(3);
  });

  it('sample() returns distinct stored fingerprints', async () => {
    const name = freshName();
    const fps = randomFps(500, 41);
    const all = fpSetOf(fps);
    const a = await openIdx(name, { tabletSize: 64, cachedTablets: 2 });
    expect((await a.sample(10)).length).toBe(0);
    await a.add(fps);
    a.close();
    await settle();
    const b = await openIdx(name, { tabletSize: 64, cachedTablets: 2 });
    const s = await b.sample(100);
    expect(s.length).toBe(100 * 20);
    const got = fpSetOf(s);
    expect(got.size).toBe(100);
    for (const h of got) expect(all.has(h)).toBe(true);
    const everything = fpSetOf(await b.sample(10_000));
    expect(everything).toEqual(all);
  });

  it('clear() forgets everything, persistently', async () => {
    const name = freshName();
    const fps = randomFps(300, 51);
    const a = await openIdx(name, { tabletSize: 64 });
    await a.add(fps);
    await a.clear();
    expect(sum(await a.lookup(fps))).toBe(0);
    expect(a.stats()).toMatchObject({ fingerprints: 0, tablets: 0 });
    const again = randomFps(10, 52);
    await a.add(again);
    a.close();
    await settle();
    const b = await openIdx(name, { tabletSize: 64 });
    expect(b.stats()).toMatchObject({ fingerprints: 10, tablets: 1 });
    expect(sum(await b.lookup(fps))).toBe(0);
    expect(sum(await b.lookup(again))).toBe(10);
  });

  it('add is idempotent, also within one batch and under concurrent calls', async () => {
    const name = freshName();
    const fps = randomFps(1_000, 61);
    const a = await openIdx(name, { tabletSize: 256 });
    await a.add(fps);
    await a.add(fps);
    await a.add(concatFps(fps.subarray(0, 2_000), randomFps(5, 62), randomFps(5, 62)));
    expect(a.stats().fingerprints).toBe(1_005);
    // Several workers reporting at once, overlapping.
    const x = randomFps(400, 63);
    await Promise.all([
      a.add(x.subarray(0, 6_000)),
      a.add(x.subarray(2_000, 8_000)),
      a.lookup(x),
      a.add(x.subarray(4_000)),
    ]);
    expect(a.stats().fingerprints).toBe(1_405);
    a.close();
    await settle();
    const b = await openIdx(name, { tabletSize: 256 });
    expect(b.stats().fingerprints).toBe(1_405);
    expect(fpSetOf(await b.sample(5_000)).size).toBe(1_405);
  });

  it('handles 50k fingerprints per batch in a few seconds', async () => {
    const name = freshName();
    const fps = randomFps(50_000, 71);
    const fresh = randomFps(50_000, 72);
    const t0 = performance.now();
    const a = await openIdx(name);
    await a.add(fps);
    expect(sum(await a.lookup(fps))).toBe(50_000);
    expect(sum(await a.lookup(fresh))).toBe(0);
    expect(performance.now() - t0).toBeLessThan(5_000);
    const st = a.stats();
    expect(st.tablets).toBe(7);
    // 0.1% default target: ~50 false positives among the fresh ones.
    expect(st.falsePositives).toBeLessThan(150);
    expect(st.bloomNegatives + st.falsePositives).toBe(50_000);
  });

  it('grows the Bloom filter by rebuilding from the tablets', async () => {
    const name = freshName();
    const first = randomFps(60_000, 81);
    const second = randomFps(30_000, 82); // pushes past the initial 65,536 capacity
    const a = await openIdx(name, { bloomFpRate: 0.01 });
    await a.add(first);
    await a.add(second);
    expect(sum(await a.lookup(first))).toBe(60_000);
    expect(sum(await a.lookup(second))).toBe(30_000);
    await a.lookup(randomFps(20_000, 83));
    expect(a.stats().falsePositives).toBeLessThan(400); // ~1% of 20k, not the ~3%+ of an overfull filter
    a.close();
    await settle();
    const b = await openIdx(name, { bloomFpRate: 0.01 });
    expect(sum(await b.lookup(second))).toBe(30_000);
  });

  it('surfaces quota errors clearly and keeps memory consistent with storage', async () => {
    const name = freshName();
    const a = await openIdx(name, { tabletSize: 64 });
    const kept = randomFps(100, 91);
    await a.add(kept);
    const lost = randomFps(100, 92);
    const proto = IDBObjectStore.prototype;
    const realPut = proto.put;
    let tabletPuts = 0;
    proto.put = function (this: IDBObjectStore, ...args: Parameters<IDBObjectStore['put']>) {
      // Fail the second tablet put: the first (the rewritten current tablet) must not commit alone.
      if (this.name === 'tablets' && ++tabletPuts === 2) throw new DOMException('quota exceeded', 'QuotaExceededError');
      return realPut.apply(this, args);
    };
    try {
      await expect(a.add(lost)).rejects.toBeInstanceOf(IndexQuotaError);
    } finally {
      proto.put = realPut;
    }
    expect(a.stats().fingerprints).toBe(100);
    expect(sum(await a.lookup(lost))).toBe(0);
    a.close();
    await settle();
    // Storage must not hold half of the failed write either.
    const b = await openIdx(name, { tabletSize: 64 });
    expect(b.stats().fingerprints).toBe(100);
    expect(sum(await b.lookup(lost))).toBe(0);
    const after = randomFps(10, 93);
    await b.add(after);
    expect(sum(await b.lookup(concatFps(kept, after)))).toBe(110);
  });

  it('closes on `blocking` so another tab can upgrade, then reports the newer schema', async () => {
    const name = freshName();
    const a = await openIdx(name);
    await a.add(randomFps(10, 101));
    const upgraded = await Promise.race([
      openDB(`ditto-index:${name}`, 2),
      new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 2_000)),
    ]);
    expect(upgraded).not.toBe('timeout');
    if (upgraded !== 'timeout') upgraded.close();
    await expect(a.add(randomFps(10, 102))).rejects.toThrow(/newer version/);
  });

  it('rejects malformed input and use after close', async () => {
    const a = await openIdx(freshName());
    expect(() => a.lookup(new Uint8Array(21))).toThrow(/multiple of 20/);
    a.close();
    await expect(a.lookup(new Uint8Array(20))).rejects.toThrow(/closed/);
  });
});
