import { beforeAll, describe, expect, it } from 'vitest';
import { testCore } from '../wasm/testing';
import { ApiError } from '../api/client';
import { decodeBundle } from './bundle';
import { FP_LEN, fpHex } from './hex';
import { Uploader, type Candidate, type UploaderDeps } from './uploader';

beforeAll(async () => {
  await testCore();
});

function chunk(n: number, size = 1000): Candidate {
  const fp = new Uint8Array(FP_LEN);
  new DataView(fp.buffer).setUint32(0, n);
  return { fp, codec: 0, rawLen: size, stored: new Uint8Array(size).fill(n & 255) };
}

/** A fake server that really keeps what it is sent, so what it reports missing is honest. */
function fakeServer(opts: { failFirst?: number; status?: number } = {}) {
  const stored = new Set<string>();
  const bundles: string[][] = [];
  let failures = opts.failFirst ?? 0;
  const deps: UploaderDeps = {
    async missing(fps) {
      const out: number[] = [];
      for (let i = 0; i < fps.length / FP_LEN; i++) if (!stored.has(fpHex(fps, i))) out.push(i);
      const res = new Uint8Array(out.length * FP_LEN);
      out.forEach((i, j) => res.set(fps.subarray(i * FP_LEN, (i + 1) * FP_LEN), j * FP_LEN));
      return res;
    },
    async upload(bundle) {
      if (failures > 0) {
        failures--;
        throw new ApiError('boom', opts.status ?? 503, 'internal');
      }
      const fps = decodeBundle(bundle).map((c) => fpHex(c.fp));
      bundles.push(fps);
      fps.forEach((f) => stored.add(f));
    },
    sleep: async () => {},
  };
  return { deps, stored, bundles };
}

/** Holds `s`'s uploads until the returned function is called. */
function holdUploads(s: ReturnType<typeof fakeServer>): () => void {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const upload = s.deps.upload;
  s.deps.upload = async (b, signal) => {
    // The body is copied when the call is made, as `fetch` does: the uploader reuses it.
    const body = b.slice();
    await gate;
    return upload(body, signal);
  };
  return release;
}

describe('Uploader', () => {
  it('uploads each new chunk once, in bundles of the configured size', async () => {
    const s = fakeServer();
    const up = new Uploader(s.deps, { bundleBytes: 10_000 });
    const all = Array.from({ length: 50 }, (_, i) => chunk(i));
    const { durable: d1 } = await up.add(all.slice(0, 30));
    const { durable: d2 } = await up.add([...all.slice(20, 50), chunk(3)]);
    await up.drain();
    await Promise.all([d1, d2]);
    expect(s.stored.size).toBe(50);
    expect(s.bundles.flat().length).toBe(50);
    expect(Math.max(...s.bundles.map((b) => b.length))).toBeLessThanOrEqual(10);
    expect(up.stats.duplicatesInJob).toBe(11);
    expect(up.stats.chunksSent).toBe(50);
  });

  it('drain waits for an add still waiting for room, and sends its chunks', async () => {
    // A worker's answer can reach the page while its last batch's add() waits for room: the
    // backup then drains with that add still pending.
    const s = fakeServer();
    /** 13 chunks from `first` fill the queue, `late` waits for room behind them, then a drain. */
    const drainBehind = async (bundleBytes: number, first: number, late: number[]) => {
      const up = new Uploader(s.deps, { bundleBytes, idleBundleBytes: 5_000, maxQueuedBytes: 12_000 });
      const release = holdUploads(s);
      await up.add(Array.from({ length: 13 }, (_, i) => chunk(first + i)));
      const added = up.add(late.map((n) => chunk(n)));
      const drained = up.drain();
      release();
      await drained;
      await (
        await added
      ).durable;
    };
    await drainBehind(10_000, 0, [100, 101]);
    expect(s.stored.size).toBe(15);
    expect(s.stored.has(fpHex(chunk(101).fp))).toBe(true);
    // A late add of chunks queued already: nothing new to send, still drained (one bundle in
    // flight, so the add goes on after the drain's last wake-up).
    await drainBehind(20_000, 200, [200, 201]);
    expect(s.stored.has(fpHex(chunk(212).fp))).toBe(true);
  });

  it('seals a bundle at its chunk limit however few bytes it holds (tiny files)', async () => {
    const s = fakeServer();
    const up = new Uploader(s.deps, { bundleChunks: 1000 });
    const { durable } = await up.add(Array.from({ length: 2500 }, (_, i) => chunk(i, 3)));
    await up.drain();
    await durable;
    expect(s.stored.size).toBe(2500);
    expect(Math.max(...s.bundles.map((b) => b.length))).toBeLessThanOrEqual(1000);
  });

  it('seals a bundle at its raw limit however few bytes it stores (compressible chunks)', async () => {
    const s = fakeServer();
    const up = new Uploader(s.deps, { bundleRawBytes: 10 << 20 });
    // 100 chunks of 1 MiB raw stored in 100 bytes each: 10 KB stored, 100 MiB raw.
    const squeezed = Array.from({ length: 100 }, (_, i) => ({ ...chunk(i, 100), codec: 1, rawLen: 1 << 20 }));
    const { durable } = await up.add(squeezed);
    await up.drain();
    await durable;
    expect(s.stored.size).toBe(100);
    expect(Math.max(...s.bundles.map((b) => b.length))).toBeLessThanOrEqual(10);
  });

  it('sends the tail as up to `concurrency` bundles of at least the idle size', async () => {
    const s = fakeServer();
    const up = new Uploader(s.deps, { bundleBytes: 100_000, idleBundleBytes: 10_000, concurrency: 3 });
    // The link is busy with a first bundle, so the next 60 KB wait in one unsealed bundle.
    const release = holdUploads(s);
    await up.add(Array.from({ length: 12 }, (_, i) => chunk(i)));
    await up.add(Array.from({ length: 60 }, (_, i) => chunk(100 + i)));
    const drained = up.drain();
    release();
    await drained;
    expect(s.bundles.map((b) => b.length)).toEqual([12, 20, 20, 20]);
    const small = fakeServer();
    const one = new Uploader(small.deps, { bundleBytes: 100_000, idleBundleBytes: 10_000, concurrency: 3 });
    await one.add(Array.from({ length: 15 }, (_, i) => chunk(i)));
    await one.drain();
    // 15 KB is one idle-sized piece: not split.
    expect(small.bundles.map((b) => b.length)).toEqual([15]);
  });

  it('seals a smaller bundle while the link is idle, full ones while it is busy', async () => {
    const s = fakeServer();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const upload = s.deps.upload;
    const up = new Uploader(
      { ...s.deps, upload: async (b, sig) => (await gate, upload(b, sig)) },
      { bundleBytes: 10_000, idleBundleBytes: 3000, concurrency: 1 },
    );
    // Idle: the first add (4000 bytes, over idleBundleBytes) goes at once.
    await up.add([0, 1, 2, 3].map((i) => chunk(i)));
    // Busy: the rest wait for full bundles.
    await up.add(Array.from({ length: 12 }, (_, i) => chunk(10 + i)));
    release();
    await up.drain();
    expect(s.bundles.map((b) => b.length)).toEqual([4, 10, 2]);
  });

  it('sends nothing the server or the client index already has', async () => {
    const s = fakeServer();
    [1, 2, 3].forEach((i) => s.stored.add(fpHex(chunk(i).fp)));
    const acked: string[] = [];
    const up = new Uploader(
      {
        ...s.deps,
        known: async (fps) =>
          Uint8Array.from({ length: fps.length / FP_LEN }, (_, i) => (fps[i * FP_LEN + 3] === 4 ? 1 : 0)),
        acked: async (fps) => {
          for (let i = 0; i < fps.length / FP_LEN; i++) acked.push(fpHex(fps, i));
        },
      },
      { bundleBytes: 1 << 20 },
    );
    await up.add([1, 2, 3, 4, 5, 6].map((i) => chunk(i)));
    await up.drain();
    expect(s.bundles).toEqual([[fpHex(chunk(5).fp), fpHex(chunk(6).fp)]]);
    expect(up.stats.knownByIndex).toBe(1);
    expect(up.stats.presentOnServer).toBe(3);
    // Server-present and uploaded chunks are reported durable; the index-known one needs no ack.
    expect(acked.sort()).toEqual([1, 2, 3, 5, 6].map((i) => fpHex(chunk(i).fp)).sort());
  });

  it('drain() and durability do not wait for the acked bookkeeping; settled() does, and reports its failure', async () => {
    const s = fakeServer();
    let finish!: () => void;
    const up = new Uploader(
      { ...s.deps, acked: () => new Promise<void>((_, reject) => (finish = () => reject(new Error('idb full')))) },
      { bundleBytes: 1 << 20 },
    );
    const { durable } = await up.add([chunk(1), chunk(2)]);
    await up.drain();
    await durable;
    let settled: string | null = null;
    const done = up.settled().catch((e: Error) => (settled = e.message));
    await new Promise((r) => setTimeout(r, 0));
    expect(settled).toBeNull();
    finish();
    await done;
    expect(settled).toBe('idb full');
  });

  it('retries transient failures and then succeeds', async () => {
    const s = fakeServer({ failFirst: 2 });
    const up = new Uploader(s.deps);
    const { durable } = await up.add([chunk(1), chunk(2)]);
    await up.drain();
    await durable;
    expect(up.stats.retries).toBe(2);
    expect(s.stored.size).toBe(2);
  });

  it('fails clearly on a refused request instead of retrying forever', async () => {
    const s = fakeServer({ failFirst: 1, status: 401 });
    const up = new Uploader(s.deps);
    const { durable } = await up.add([chunk(1)]);
    await expect(up.drain()).rejects.toThrow('boom');
    await expect(durable).rejects.toThrow('boom');
    await expect(up.add([chunk(2)])).rejects.toThrow('boom');
    expect(up.stats.retries).toBe(0);
  });

  it('gives up after maxAttempts transient failures', async () => {
    const s = fakeServer({ failFirst: 100 });
    const up = new Uploader(s.deps, { maxAttempts: 3 });
    await up.add([chunk(1)]);
    await expect(up.drain()).rejects.toBeInstanceOf(ApiError);
    expect(up.stats.retries).toBe(2);
  });

  it('holds uploads while paused and bounds queued bytes', async () => {
    const s = fakeServer();
    const up = new Uploader(s.deps, { bundleBytes: 1000, maxQueuedBytes: 3000, concurrency: 1 });
    up.pause();
    await up.add([chunk(1), chunk(2), chunk(3), chunk(4)]);
    let accepted = false;
    const more = up.add([chunk(5)]).then(() => (accepted = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(s.stored.size).toBe(0);
    expect(accepted).toBe(false); // over maxQueuedBytes: add() waits
    up.resume();
    await more;
    await up.drain();
    expect(s.stored.size).toBe(5);
    expect(up.stats.queuedBytes).toBe(0);
  });

  it('cancel rejects everything pending', async () => {
    const s = fakeServer();
    const up = new Uploader(s.deps);
    up.pause();
    const { durable } = await up.add([chunk(1)]);
    up.cancel();
    await expect(durable).rejects.toThrow('cancelled');
    await expect(up.drain()).rejects.toThrow('cancelled');
  });
});
