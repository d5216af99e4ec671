import { describe, expect, it } from 'vitest';
import type { StoredChunkLoc } from '../restore/restore';
import { chainOwners, linksFirst, type ContainerChunks, type Job } from './search';

/** A scope of `n` chunks over `containers` containers, chunk k of chain key `key(k)` and `raw(k)` raw bytes. */
function scope(n: number, containers: number, key: (k: number) => number | undefined, raw: (k: number) => number) {
  const out: ContainerChunks[] = [];
  for (let c = 0; c < containers; c++) {
    const ks = Array.from({ length: n }, (_, k) => k).filter((k) => k % containers === c);
    const locs: StoredChunkLoc[] = ks.map((k, i) => ({
      container: c,
      offset: i * 100,
      storedLen: 100,
      rawLen: raw(k),
      codec: 2,
      chainKey: key(k),
    }));
    out.push({ id: c, fps: ks.map((k) => `fp${k}`), fpBytes: new Uint8Array(0), locs });
  }
  return out;
}

/** A small deterministic generator (the split must not depend on luck). */
function rng(seed: number) {
  return (m: number) => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return (seed >>> 8) % m;
  };
}

describe('chainOwners (the work split by chain key)', () => {
  it('gives each chain key one worker, balancing raw bytes within the largest key', () => {
    for (let trial = 0; trial < 50; trial++) {
      const r = rng(trial + 1);
      const workers = 2 + r(3);
      const raws = Array.from({ length: 400 }, () => 1 + r(20_000));
      const keys = Array.from({ length: 400 }, () => r(60));
      const s = scope(
        400,
        1 + r(6),
        (k) => keys[k],
        (k) => raws[k],
      );
      const owners = chainOwners(s, new Map(), workers);
      const load = new Array<number>(workers).fill(0);
      const perKey = new Map<number, number>();
      for (let k = 0; k < 400; k++) {
        expect(owners.has(keys[k])).toBe(true);
        load[owners.get(keys[k])!] += raws[k];
        perKey.set(keys[k], (perKey.get(keys[k]) ?? 0) + raws[k]);
      }
      // Largest first onto the least loaded: no worker exceeds another by more than a key.
      const largest = Math.max(...perKey.values());
      expect(Math.max(...load) - Math.min(...load)).toBeLessThanOrEqual(largest);
      expect([...owners.values()].every((w) => w >= 0 && w < workers)).toBe(true);
    }
  });

  it('keeps a key on the worker that holds one of its chunks', () => {
    const s = scope(
      100,
      3,
      (k) => k % 10,
      () => 1000,
    );
    const held = new Map([
      ['fp3', 1],
      ['fp13', 1],
      ['fp7', 0],
    ]);
    const owners = chainOwners(s, held, 2);
    expect(owners.get(3)).toBe(1);
    expect(owners.get(7)).toBe(0);
    expect(owners.size).toBe(10);
  });

  it('gives one worker every key, and splits nothing when a chunk has no chain key', () => {
    const keyed = scope(
      20,
      2,
      (k) => k % 4,
      () => 10,
    );
    expect([...chainOwners(keyed, new Map(), 1).values()]).toEqual([0, 0, 0, 0]);
    const unkeyed = scope(
      20,
      2,
      (k) => (k === 5 ? undefined : k % 4),
      () => 10,
    );
    expect(chainOwners(unkeyed, new Map(), 2).size).toBe(0);
  });
});

describe('linksFirst (the order a worker decodes its jobs in)', () => {
  const job = (id: number, share: number | undefined): Job => ({
    job: {
      id,
      start: 0,
      end: 0,
      fps: new Uint8Array(0),
      offsets: new Float64Array(0),
      storedLens: new Uint32Array(0),
      codecs: new Uint8Array(0),
      rawLens: new Uint32Array(0),
    },
    fps: [],
    share,
  });
  const ids = (jobs: Job[]) => jobs.map((j) => `${j.share}:${j.job.id}`);

  it('keeps storage order where each job reads its own links, per worker', () => {
    const jobs = [job(1, 0), job(1, 1), job(2, 0), job(2, 1)];
    const keys = new Map(
      jobs.map((j) => [j, { needs: new Set([j.job.id * 10 + j.share!]), gives: new Set([j.job.id * 10 + j.share!]) }]),
    );
    expect(ids(linksFirst(jobs, keys))).toEqual(['0:1', '0:2', '1:1', '1:2']);
  });

  it('puts a job after the jobs that read the links of its chunks, and breaks a cycle in storage order', () => {
    // Container 3 holds the links (frames) of the chunks of containers 1 and 2.
    const [a, b, c] = [job(1, 0), job(2, 0), job(3, 0)];
    const keys = new Map([
      [a, { needs: new Set([7]), gives: new Set<number>() }],
      [b, { needs: new Set([7, 8]), gives: new Set([9]) }],
      [c, { needs: new Set([9]), gives: new Set([7, 8]) }],
    ]);
    // A cycle: b reads links c's chunks need (key 9) and c reads links a's and b's need
    // (7, 8). No job is ready, so each time the first left goes: storage order.
    expect(ids(linksFirst([a, b, c], keys))).toEqual(['0:1', '0:2', '0:3']);
    keys.set(c, { needs: new Set([7]), gives: new Set([7, 8]) });
    expect(ids(linksFirst([a, b, c], keys))).toEqual(['0:3', '0:1', '0:2']);
  });
});
