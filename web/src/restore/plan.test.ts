import { describe, expect, it } from 'vitest';
import { planRestore, PlanError, type ChunkLoc, type PlanOptions, type RestorePlan } from './plan';
import { referencePlan } from './plan.reference';

const fp = (n: number) => n.toString(16).padStart(40, '0');

/** Chunks 0..count-1, `perContainer` per container, each raw 1000 / stored 500 bytes. */
function layout(count: number, perContainer: number, raw = 1000, stored = 500) {
  const m = new Map<string, ChunkLoc>();
  for (let i = 0; i < count; i++)
    m.set(fp(i), {
      container: Math.floor(i / perContainer) + 1,
      offset: 4096 + (i % perContainer) * stored,
      storedLen: stored,
      rawLen: raw,
    });
  return m;
}

const opts = (o: Partial<PlanOptions>): PlanOptions => ({
  windowBytes: 10_000,
  firstWindowBytes: o.windowBytes ?? 10_000,
  requestBytes: 2_000,
  cacheBytes: 5_000,
  maxFpsPerRequest: 1000,
  ...o,
});

/** Replays a plan the way the executor does; returns the fetch count per fingerprint. */
function replay(plan: RestorePlan, locs: Map<string, ChunkLoc>, o: PlanOptions) {
  const fetched = new Map<string, number>();
  let cache = new Set<string>();
  let peak = 0;
  let at = 0;
  for (const w of plan.windows) {
    expect(w.refStart).toBe(at);
    const have = new Set(cache);
    let windowRaw = 0;
    for (const r of w.requests) {
      expect(r.storedBytes <= o.requestBytes || r.fps.length === 1).toBe(true);
      expect(r.fps.length).toBeLessThanOrEqual(o.maxFpsPerRequest);
      for (const f of r.fps) {
        expect(have.has(f), `fetched twice in one window: ${f}`).toBe(false);
        have.add(f);
        fetched.set(f, (fetched.get(f) ?? 0) + 1);
        windowRaw += locs.get(f)!.rawLen;
      }
      // Requests read containers in order.
      const cs = r.fps.map((f) => locs.get(f)!.container);
      expect([...cs].sort((a, b) => a - b)).toEqual(cs);
    }
    expect(windowRaw).toBeLessThanOrEqual(Math.max(o.windowBytes, 1 << 20));
    for (let i = w.refStart; i < w.refEnd; i++) expect(have.has(plan.refs[i]), `ref ${i}`).toBe(true);
    const cacheRaw = w.keep.reduce((s, f) => s + locs.get(f)!.rawLen, 0);
    expect(cacheRaw).toBeLessThanOrEqual(o.cacheBytes);
    for (const f of w.keep) expect(have.has(f)).toBe(true);
    peak = Math.max(peak, windowRaw + cacheRaw);
    cache = new Set(w.keep);
    at = w.refEnd;
  }
  expect(at).toBe(plan.refs.length);
  return { fetched, peak };
}

describe('planRestore', () => {
  it('covers every reference in order and fetches each distinct chunk once when it fits', () => {
    const locs = layout(40, 10);
    const files = [
      { name: 'a', size: 10_000, recipe: Array.from({ length: 10 }, (_, i) => fp(i)) },
      { name: 'empty', size: 0, recipe: [] },
      { name: 'b', size: 20_000, recipe: Array.from({ length: 20 }, (_, i) => fp(10 + i)) },
    ];
    const o = opts({ windowBytes: 100_000 });
    const plan = planRestore(files, (f) => locs.get(f), o);
    expect(plan.refs.length).toBe(30);
    expect(plan.files.map((f) => [f.refStart, f.refEnd])).toEqual([
      [0, 10],
      [10, 10],
      [10, 30],
    ]);
    const { fetched } = replay(plan, locs, o);
    expect([...fetched.values()].every((c) => c === 1)).toBe(true);
    expect(fetched.size).toBe(30);
    expect(plan.stats.containersMin).toBe(3);
    // 2000-byte requests = 4 chunks each: 30 chunks -> 8 requests.
    expect(plan.stats.requests).toBe(8);
    expect(plan.stats.fetchedStoredBytes).toBe(15_000);
  });

  it('dedupes repeats within a window and across windows through the cache', () => {
    const locs = layout(6, 3);
    // A small hot set repeated many times, far beyond one window.
    const recipe = Array.from({ length: 200 }, (_, i) => fp(i % 3));
    const o = opts({ windowBytes: 2_000, cacheBytes: 3_000 });
    const plan = planRestore([{ name: 'rep', size: 200_000, recipe }], (f) => locs.get(f), o);
    const { fetched } = replay(plan, locs, o);
    expect([...fetched.values()]).toEqual([1, 1, 1]);
  });

  it('refetches when the cache is too small, but never holds more than the budgets', () => {
    const locs = layout(100, 25);
    const recipe = [...Array.from({ length: 100 }, (_, i) => fp(i)), ...Array.from({ length: 100 }, (_, i) => fp(i))];
    const o = opts({ windowBytes: 10_000, cacheBytes: 4_000 });
    const plan = planRestore([{ name: 'twice', size: 200_000, recipe }], (f) => locs.get(f), o);
    const { fetched, peak } = replay(plan, locs, o);
    expect(peak).toBeLessThanOrEqual(14_000);
    const total = [...fetched.values()].reduce((a, b) => a + b, 0);
    expect(total).toBeGreaterThan(100);
    expect(total).toBeLessThan(200); // the cache saved some refetches
    expect(plan.stats.fetchedChunks).toBe(total);
  });

  it('sorts a window by container so each request reads few containers', () => {
    const locs = layout(40, 10);
    // Interleave containers 1..4 in the recipe.
    const recipe = Array.from({ length: 40 }, (_, i) => fp((i % 4) * 10 + Math.floor(i / 4)));
    const o = opts({ windowBytes: 1 << 20, requestBytes: 5_000 });
    const plan = planRestore([{ name: 'x', size: 40_000, recipe }], (f) => locs.get(f), o);
    replay(plan, locs, o);
    expect(plan.stats.requests).toBe(4);
    expect(plan.stats.containersRead).toBe(4);
    expect(plan.stats.containersMin).toBe(4);
  });

  it('splits by fingerprint count and names the file of an unknown chunk', () => {
    const locs = layout(50, 50, 10, 10);
    const o = opts({ maxFpsPerRequest: 7, requestBytes: 1 << 20 });
    const plan = planRestore([{ name: 'x', size: 500, recipe: [...locs.keys()] }], (f) => locs.get(f), o);
    replay(plan, locs, o);
    expect(plan.stats.requests).toBe(8);
    expect(() => planRestore([{ name: 'lib/bad.js', size: 1, recipe: [fp(999)] }], (f) => locs.get(f), o)).toThrow(
      PlanError,
    );
    expect(() => planRestore([{ name: 'lib/bad.js', size: 1, recipe: [fp(999)] }], (f) => locs.get(f), o)).toThrow(
      /lib\/bad\.js/,
    );
  });

  it('keeps a chain key on one worker and balances new keys by raw bytes', () => {
    // 60 chunks of 1000 raw bytes over 4 containers: key 1 has 30 of them, keys 2..31 one each.
    const locs = layout(60, 15);
    [...locs.values()].forEach((l, i) => (l.chainKey = i % 2 ? 1 : 2 + i / 2));
    const recipe = [...locs.keys()];
    const o = opts({ windowBytes: 20_000, requestBytes: 3_000 });
    const plan = planRestore([{ name: 'x', size: 60_000, recipe }], (f) => locs.get(f), o, 2);
    replay(plan, locs, o);
    const workerOf = new Map<number, number>();
    const bytes = [0, 0];
    for (const w of plan.windows) {
      // Both workers in every window, taking turns.
      expect(new Set(w.requests.map((r) => r.worker))).toEqual(new Set([0, 1]));
      expect(w.requests[0].worker).not.toBe(w.requests[1].worker);
      for (const r of w.requests)
        for (const f of r.fps) {
          const key = locs.get(f)!.chainKey!;
          expect(workerOf.get(key) ?? r.worker, `key ${key}`).toBe(r.worker);
          workerOf.set(key, r.worker);
          bytes[r.worker] += locs.get(f)!.rawLen;
        }
    }
    expect(workerOf.size).toBe(31);
    // The big key on one worker, the small ones on the other: 30 000 bytes each.
    expect(bytes).toEqual([30_000, 30_000]);
  });

  it('starts with a small window and doubles it up to the budget', () => {
    const locs = layout(60, 60);
    const o = opts({ windowBytes: 8_000, firstWindowBytes: 2_000 });
    const plan = planRestore([{ name: 'x', size: 60_000, recipe: [...locs.keys()] }], (f) => locs.get(f), o);
    replay(plan, locs, o);
    // 1000 raw bytes a chunk: 2, 4, then 8 chunks a window.
    expect(plan.windows.map((w) => w.refEnd - w.refStart)).toEqual([2, 4, 8, 8, 8, 8, 8, 8, 6]);
  });

  it('spreads requests by turns without chain keys', () => {
    const locs = layout(40, 10);
    const o = opts({ windowBytes: 1 << 20 });
    const plan = planRestore([{ name: 'x', size: 40_000, recipe: [...locs.keys()] }], (f) => locs.get(f), o, 2);
    const workers = plan.windows.flatMap((w) => w.requests.map((r) => r.worker));
    expect(workers).toEqual(workers.map((_, k) => k % 2));
    // One worker: everything to it, keys or not.
    locs.forEach((l, f) => (l.chainKey = parseInt(f, 16)));
    const one = planRestore([{ name: 'x', size: 40_000, recipe: [...locs.keys()] }], (f) => locs.get(f), o, 1);
    expect(one.windows.flatMap((w) => w.requests.map((r) => r.worker)).every((k) => k === 0)).toBe(true);
  });

  it('plans exactly as the plain reference does, on random layouts and recipes', () => {
    // xorshift32: the same cases every run.
    let x = 0x2545f491;
    const rand = (k: number) => {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      return (x >>> 0) % k;
    };
    for (let round = 0; round < 60; round++) {
      const chunks = 1 + rand(300);
      const keyed = rand(3) > 0;
      const locs = new Map<string, ChunkLoc>();
      for (let c = 0; c < chunks; c++)
        locs.set(fp(c), {
          container: 1 + rand(8),
          offset: rand(1 << 20),
          storedLen: 1 + rand(3000),
          rawLen: 1 + rand(6000),
          ...(keyed ? { chainKey: rand(1 + rand(40)) } : {}),
        });
      // Recipes repeat a hot set often and the rest now and then, across files.
      const hot = 1 + rand(Math.min(chunks, 20));
      const files = Array.from({ length: 1 + rand(12) }, (_, k) => ({
        name: `f${k}`,
        size: 0,
        recipe: Array.from({ length: rand(120) }, () => fp(rand(2) ? rand(hot) : rand(chunks))),
      }));
      const o = opts({
        windowBytes: 2_000 + rand(40_000),
        firstWindowBytes: 500 + rand(20_000),
        requestBytes: 1 + rand(10_000),
        cacheBytes: rand(30_000),
        maxFpsPerRequest: 1 + rand(50),
      });
      const workers = 1 + rand(3);
      const got = planRestore(files, (f) => locs.get(f), o, workers);
      expect(got, `round ${round}`).toEqual(referencePlan(files, (f) => locs.get(f), o, workers));
      replay(got, locs, o);
    }
  });
});
