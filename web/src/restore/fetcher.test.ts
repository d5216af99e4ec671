import { describe, expect, it } from 'vitest';
import type { Api } from '../api/client';
import { fpHex, packHex } from '../backup/hex';
import { planRestore, type ChunkLoc, type PlanOptions } from './plan';
import { ChunkFetcher, type RestoreItem } from './restore';
import type { RestoreWorkers, Verified } from './workers';

const fp = (n: number) => n.toString(16).padStart(40, '0');
/** The link a chunk of chain key `key` decodes through (one per key, as in a frame). */
const link = (key: number) => (0xf000_0000 + key).toString(16).padStart(40, '0');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const opts: PlanOptions = {
  windowBytes: 40_000,
  firstWindowBytes: 10_000,
  requestBytes: 4_000,
  cacheBytes: 0,
  maxFpsPerRequest: 1000,
};

/**
 * A restore's fetches against a server and workers that answer after random delays: each
 * answer carries, as links, the chain key links of its chunks its `have` does not list, and
 * the worker keeps them. Answers what each worker was asked and held at each request.
 */
async function run(seed: number) {
  let rand = seed;
  const next = () => ((rand = (rand * 1103515245 + 12345) % 2 ** 31) % 7) + 1;
  const locs = new Map<string, ChunkLoc>();
  const recipe: string[] = [];
  for (let i = 0; i < 120; i++) {
    locs.set(fp(i), { container: 1 + (i >> 4), offset: i * 500, storedLen: 500, rawLen: 1000, chainKey: i % 6 });
    recipe.push(fp(i));
  }
  const plan = planRestore([{ name: 'f', size: 120_000, recipe }], (f) => locs.get(f), opts, 2);
  const items: RestoreItem[] = [{ name: 'f', path: 'f', kind: 'file', size: 120_000, mtime: 0, recipe }];
  const held = [new Set<string>(), new Set<string>()];
  const busy = [0, 0];
  const events: { worker: number; overlapped: boolean; linksSentAgain: string[] }[] = [];
  // Which worker a request goes to, by its first fingerprint (the plan's choice).
  const workerOf = new Map<string, number>();
  for (const w of plan.windows) for (const r of w.requests) workerOf.set(r.fps[0], r.worker);
  const api = {
    async getChunks(fps: string[], _s: AbortSignal, _d: boolean, _m: string, chains: { have: string[] }) {
      const worker = workerOf.get(fps[0])!;
      const have = new Set(chains.have);
      const links = [...new Set(fps.map((f) => link(locs.get(f)!.chainKey!)))].filter((l) => !have.has(l));
      events.push({ worker, overlapped: busy[worker] > 0, linksSentAgain: links.filter((l) => held[worker].has(l)) });
      busy[worker]++;
      await sleep(next());
      return packHex([...fps, ...links]);
    },
  } as unknown as Api;
  let delivered = 0;
  const workers = {
    size: 2,
    async verify(bundle: Uint8Array, requested: number, worker: number): Promise<Verified> {
      await sleep(next());
      const all = Array.from({ length: bundle.length / 20 }, (_, k) => fpHex(bundle, k));
      for (const f of all) held[worker].add(f);
      busy[worker]--;
      return {
        type: 'verified',
        fps: bundle.slice(0, requested * 20),
        offsets: new Uint32Array(requested),
        lengths: new Uint32Array(requested),
        crcs: new Uint32Array(requested),
        raw: new Uint8Array(0),
        kept: packHex(all),
      };
    },
    endRestore() {},
  } as unknown as RestoreWorkers;
  const requests = plan.windows.reduce((n, w) => n + w.requests.length, 0);
  await new Promise<void>((resolve, reject) => {
    const fetcher = new ChunkFetcher(
      api,
      plan,
      workers,
      items,
      new AbortController().signal,
      (w) => {
        // The assembler moves on once a window is delivered whole.
        fetcher.moveTo(w + 1);
        if (++delivered === requests) resolve();
      },
      () => {},
      reject,
    );
    fetcher.pump();
  });
  return { events, requests };
}

describe('ChunkFetcher', () => {
  it('sends one request per worker at a time, naming what that worker holds, so no link comes twice', async () => {
    for (const seed of [1, 2, 3]) {
      const { events, requests } = await run(seed);
      expect(events).toHaveLength(requests);
      expect(new Set(events.map((e) => e.worker))).toEqual(new Set([0, 1]));
      for (const e of events) {
        expect(e.overlapped).toBe(false);
        expect(e.linksSentAgain).toEqual([]);
      }
    }
  });
});
