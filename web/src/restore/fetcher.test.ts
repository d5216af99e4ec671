import { beforeAll, describe, expect, it } from 'vitest';
import { testCore } from '../wasm/testing';
import { ApiError, type Api } from '../api/client';
import { decodeBundle, encodeBundle } from '../backup/bundle';
import { fpHex, hexToBytes, packHex } from '../backup/hex';
import { planRestore, type ChunkLoc, type PlanOptions } from './plan';
import { ChunkFetcher, type RestoreItem } from './restore';
import { DamagedChunkError, type RestoreWorkers, type Verified } from './workers';

beforeAll(async () => {
  await testCore();
});

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

const entry = (hex: string, codec: number, n: number) => ({
  fp: hexToBytes(hex),
  codec,
  rawLen: n,
  stored: new Uint8Array(n),
});

/**
 * A restore's fetches against a server and workers that answer after random delays. The
 * server answers an unchecked request with each chunk as a delta and, after them, the links
 * of their chain keys that `have` does not list; a checked one with the chunks decoded. A
 * worker refuses a delta whose link is neither in the answer nor held, as the real session
 * does, and keeps an answer's new entries whole, except the answers `dropAnswers` names
 * (per worker, the index of its answer), of which it keeps nothing (as a full session does).
 */
async function run(
  seed: number,
  dropAnswers: Map<number, number> = new Map(),
  /** Requests (by order sent) whose first try fails: a 503, or the network. */
  failing: Map<number, 'status' | 'network'> = new Map(),
) {
  let sent = 0;
  let failed = 0;
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
  /** Per worker: what its session holds, what its answers on the way or waiting carry. */
  const held = [new Set<string>(), new Set<string>()];
  const coming = [new Set<string>(), new Set<string>()];
  const onWire = [0, 0];
  const verifying = [0, 0];
  const answers = [0, 0];
  const events: { worker: number; wireBusy: boolean; whileVerifying: boolean; linksAgain: string[] }[] = [];
  let refused = 0;
  let checked = 0;
  // Which worker a request goes to, by its first fingerprint (the plan's choice).
  const workerOf = new Map<string, number>();
  for (const w of plan.windows) for (const r of w.requests) workerOf.set(r.fps[0], r.worker);
  const api = {
    async getChunks(fps: string[], _s: AbortSignal, _d: boolean, _m: string, chains?: { have: string[] }) {
      const worker = workerOf.get(fps[0])!;
      const how = failing.get(sent++);
      if (how) {
        failing.delete(sent - 1);
        failed++;
        await sleep(next());
        if (how === 'status') throw new ApiError('busy', 503, 'unavailable');
        throw new TypeError('Failed to fetch');
      }
      if (!chains) {
        checked++;
        await sleep(next());
        return encodeBundle(fps.map((f) => entry(f, 0, 1000)));
      }
      const have = new Set(chains.have);
      const links = [...new Set(fps.map((f) => link(locs.get(f)!.chainKey!)))].filter((l) => !have.has(l));
      events.push({
        worker,
        wireBusy: onWire[worker] > 0,
        whileVerifying: verifying[worker] > 0,
        linksAgain: links.filter((l) => held[worker].has(l) || coming[worker].has(l)),
      });
      onWire[worker]++;
      await sleep(next());
      onWire[worker]--;
      for (const l of links) coming[worker].add(l);
      return encodeBundle([...fps.map((f) => entry(f, 2, 10)), ...links.map((l) => entry(l, 1, 50))]);
    },
  } as unknown as Api;
  let delivered = 0;
  const queue = [Promise.resolve(), Promise.resolve()];
  const workers = {
    size: 2,
    async verify(bundle: Uint8Array, requested: number, worker: number): Promise<Verified> {
      // A worker reads its messages one at a time, in order.
      verifying[worker]++;
      const turn = queue[worker];
      let done!: () => void;
      queue[worker] = new Promise<void>((r) => (done = r));
      await turn;
      await sleep(next());
      verifying[worker]--;
      done();
      const entries = decodeBundle(bundle).map((e) => ({ fp: fpHex(e.fp), codec: e.codec }));
      const inAnswer = new Set(entries.map((e) => e.fp));
      for (const e of entries.slice(0, requested)) {
        const base = link(locs.get(e.fp)!.chainKey!);
        if (e.codec === 2 && !inAnswer.has(base) && !held[worker].has(base)) {
          refused++;
          throw new DamagedChunkError(e.fp, `base ${base} is not held`);
        }
      }
      const fresh = [...new Set(entries.map((e) => e.fp))].filter((f) => !held[worker].has(f));
      const kept = dropAnswers.get(worker) === answers[worker]++ ? [] : fresh;
      for (const f of kept) held[worker].add(f);
      for (const e of entries) coming[worker].delete(e.fp);
      return {
        type: 'verified',
        fps: packHex(entries.slice(0, requested).map((e) => e.fp)),
        offsets: new Uint32Array(requested),
        lengths: new Uint32Array(requested),
        sizes: new Uint32Array(requested),
        crcs: new Uint32Array(requested),
        raw: new Uint8Array(0),
        kept: packHex(kept),
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
      1,
    );
    fetcher.pump();
  });
  return { events, requests, refused, checked, failed };
}

describe('ChunkFetcher', () => {
  it("sends a worker's next request while it verifies, naming the links it will hold, so no link comes twice", async () => {
    for (const seed of [1, 2, 3, 4]) {
      const { events, requests, refused, checked } = await run(seed);
      expect(events).toHaveLength(requests);
      expect(new Set(events.map((e) => e.worker))).toEqual(new Set([0, 1]));
      for (const e of events) {
        expect(e.wireBusy).toBe(false);
        expect(e.linksAgain).toEqual([]);
      }
      expect(events.some((e) => e.whileVerifying)).toBe(true);
      expect(refused + checked).toBe(0);
    }
  });

  it('asks again for a request that failed on the network or with a 5xx, and loses nothing', async () => {
    for (const seed of [1, 2, 3]) {
      const failing = new Map<number, 'status' | 'network'>([
        [0, 'status'],
        [3, 'network'],
        [7, 'status'],
      ]);
      const { events, requests, refused, failed } = await run(seed, new Map(), failing);
      expect(failed).toBe(3);
      // Every request answered once (the failed tries fail before the server counts them).
      expect(events).toHaveLength(requests);
      expect(refused).toBe(0);
    }
  });

  it('gives up on a request that keeps failing, naming its files', async () => {
    const failing = new Map<number, 'status' | 'network'>([...Array(400).keys()].map((k) => [k, 'status']));
    await expect(run(1, new Map(), failing)).rejects.toThrow(/Reading chunks of "f" failed \(4 tries\): busy/);
  });

  it('falls back to what verified answers kept once a session keeps otherwise than foreseen', async () => {
    for (const seed of [1, 2, 3]) {
      // Worker 0 keeps nothing of its second answer: a request sent meanwhile names links it
      // will not hold, is refused and asked again checked; after that nothing more is refused.
      const { events, refused, checked } = await run(seed, new Map([[0, 1]]));
      expect(refused).toBeLessThanOrEqual(1);
      expect(checked).toBe(refused);
      for (const e of events) expect(e.wireBusy).toBe(false);
    }
  });
});
