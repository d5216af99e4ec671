/**
 * The bridge against in-process workers: a fake `Worker` whose messages go through
 * `structuredClone` (with the transfer list, so transferred buffers detach as they do
 * between threads) to a fake worker scope served by `expose`, one macrotask later.
 */
import { describe, expect, it } from 'vitest';
import { expose, transfer, WorkerError, WorkerPool, type Method, type WorkerLike, type WorkerScope } from './bridge';

interface TestApi {
  /** Answers `tag` after `ms`. */
  wait: Method<{ ms: number; tag: string }, string>;
  /** Throws `message`. */
  fail: Method<{ message: string }, never>;
  /** Never answers (until the worker dies). */
  hang: Method<null, never>;
  /** Emits `steps` progress events, then waits for a `go` signal and answers its value. */
  steps: Method<{ steps: number }, number, { done: number }, { go: number }>;
  /** Answers the bytes, transferred. */
  bytes: Method<{ n: number }, Uint8Array>;
  /** Answers the init value this worker got and its serial number. */
  whoami: Method<null, { init: unknown; serial: number }>;
}

const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

interface FakeWorker extends WorkerLike {
  serial: number;
  terminated: boolean;
  /** What an uncaught exception in the worker does: an `error` event on the page. */
  crash(message: string): void;
  /** A message from the worker that could not be deserialised on the page. */
  garble(): void;
  /** Buffers the worker side last transferred to the page. */
  sent: ArrayBuffer[];
}

/**
 * Spawns fake workers; `initFails` makes the init of the given serial numbers throw,
 * `initMs` makes it take that long.
 */
function fakes(opts: { initFails?: (serial: number) => string | null; initMs?: (serial: number) => number } = {}) {
  const spawned: FakeWorker[] = [];
  const spawn = (): WorkerLike => {
    const serial = spawned.length;
    const scope: WorkerScope = {
      onmessage: null,
      onmessageerror: null,
      postMessage(message, list) {
        if (worker.terminated) return;
        worker.sent = list.filter((t): t is ArrayBuffer => t instanceof ArrayBuffer);
        const data: unknown = structuredClone(message, { transfer: list });
        setTimeout(() => !worker.terminated && worker.onmessage?.(new MessageEvent('message', { data })));
      },
    };
    const worker: FakeWorker = {
      serial,
      terminated: false,
      sent: [],
      onmessage: null,
      onmessageerror: null,
      onerror: null,
      postMessage(message, list) {
        if (worker.terminated) return;
        const data: unknown = structuredClone(message, { transfer: list });
        setTimeout(() => !worker.terminated && scope.onmessage?.(new MessageEvent('message', { data })));
      },
      terminate() {
        worker.terminated = true;
      },
      crash(message) {
        setTimeout(() => worker.onerror?.({ message } as ErrorEvent));
      },
      garble() {
        setTimeout(() => worker.onmessageerror?.(new MessageEvent('messageerror')));
      },
    };
    let initValue: unknown;
    expose<TestApi>(
      {
        wait: async ({ ms, tag }) => (await tick(ms), tag),
        fail: ({ message }) => {
          throw new Error(message);
        },
        hang: () => new Promise<never>(() => {}),
        steps: async ({ steps }, ctx) => {
          for (let k = 1; k <= steps; k++) ctx.emit({ done: k });
          return new Promise<number>((resolve) => ctx.onSignal((s) => resolve(s.go)));
        },
        bytes: ({ n }) => {
          const out = new Uint8Array(n).fill(7);
          return transfer(out, [out.buffer]);
        },
        whoami: () => ({ init: initValue, serial }),
      },
      async (data) => {
        await tick(opts.initMs?.(serial) ?? 0);
        const why = opts.initFails?.(serial);
        if (why) throw new Error(why);
        initValue = data;
      },
      scope,
    );
    spawned.push(worker);
    return worker;
  };
  return { spawn, spawned };
}

function start(spawn: () => WorkerLike, size = 1, onRestart?: (w: number) => void) {
  return WorkerPool.start<TestApi>({ name: 'test', spawn, size, init: 'module', onRestart });
}

describe('worker bridge', () => {
  it('matches answers to requests when they come out of order', async () => {
    const { spawn } = fakes();
    const pool = await start(spawn);
    const order: string[] = [];
    const slow = pool.call(0, 'wait', { ms: 40, tag: 'slow' }).then((t) => (order.push(t), t));
    const fast = pool.call(0, 'wait', { ms: 0, tag: 'fast' }).then((t) => (order.push(t), t));
    expect(await Promise.all([slow, fast])).toEqual(['slow', 'fast']);
    expect(order).toEqual(['fast', 'slow']);
  });

  it('hands every worker the init value and spreads calls by index', async () => {
    const { spawn } = fakes();
    const pool = await start(spawn, 3);
    expect(pool.size).toBe(3);
    const who = await Promise.all([0, 1, 2].map((w) => pool.call(w, 'whoami', null)));
    expect(who).toEqual([0, 1, 2].map((serial) => ({ init: 'module', serial })));
  });

  it('rejects only the request whose handler threw, with its message', async () => {
    const { spawn } = fakes();
    const pool = await start(spawn);
    const bad = pool.call(0, 'fail', { message: 'no such container' });
    const good = pool.call(0, 'wait', { ms: 0, tag: 'ok' });
    await expect(bad).rejects.toThrow(WorkerError);
    await expect(bad).rejects.toThrow('no such container');
    expect(await good).toBe('ok');
  });

  it('rejects what a crashed worker held, replaces it, and serves the next request', async () => {
    const { spawn, spawned } = fakes();
    const restarted: number[] = [];
    const pool = await start(spawn, 2, (w) => restarted.push(w));
    const held = [pool.call(0, 'hang', null), pool.call(0, 'hang', null)];
    const other = pool.call(1, 'wait', { ms: 20, tag: 'other' });
    await tick();
    expect(pool.load(0)).toBe(2);
    spawned[0].crash('out of memory');
    for (const h of held) await expect(h).rejects.toThrow('test worker crashed: out of memory');
    // Told apart from a handler's error: the request may not have run, the worker's state is gone.
    await expect(held[0]).rejects.toMatchObject({ crashed: true });
    expect(pool.load(0)).toBe(0);
    // Sent while the replacement starts: it waits for it.
    const next = pool.call(0, 'whoami', null);
    expect(await next).toEqual({ init: 'module', serial: 2 });
    expect(spawned[0].terminated).toBe(true);
    expect(restarted).toEqual([0]);
    // The other worker was not disturbed.
    expect(await other).toBe('other');
    expect(spawned).toHaveLength(3);
  });

  it('replaces a worker that crashes while the others still start', async () => {
    const { spawn, spawned } = fakes({ initMs: (serial) => (serial === 1 ? 50 : 0) });
    const starting = start(spawn, 2);
    await tick(20);
    spawned[0].crash('died early');
    const pool = await starting;
    expect(await pool.call(0, 'whoami', null)).toEqual({ init: 'module', serial: 2 });
    expect(await pool.call(1, 'whoami', null)).toEqual({ init: 'module', serial: 1 });
  });

  it('treats an unreadable message as a crash', async () => {
    const { spawn, spawned } = fakes();
    const pool = await start(spawn);
    const held = pool.call(0, 'hang', null);
    await tick();
    spawned[0].garble();
    await expect(held).rejects.toThrow(/crashed: .*could not be read/);
    expect(await pool.call(0, 'wait', { ms: 0, tag: 'again' })).toBe('again');
  });

  it('fails what waits for a replacement that cannot start, and tries again on the next request', async () => {
    const { spawn, spawned } = fakes({ initFails: (serial) => (serial === 1 ? 'engine refused' : null) });
    const pool = await start(spawn);
    const held = pool.call(0, 'hang', null);
    await tick();
    spawned[0].crash('boom');
    await expect(held).rejects.toThrow('crashed: boom');
    const refused = pool.call(0, 'wait', { ms: 0, tag: 'x' });
    await expect(refused).rejects.toThrow('engine refused');
    await expect(refused).rejects.toMatchObject({ crashed: false });
    expect(await pool.call(0, 'whoami', null)).toEqual({ init: 'module', serial: 2 });
  });

  it('surfaces an init error from start and ends the workers that did start', async () => {
    const { spawn, spawned } = fakes({ initFails: (serial) => (serial === 1 ? 'no SIMD here' : null) });
    await expect(start(spawn, 3)).rejects.toThrow('test worker failed to start: no SIMD here');
    expect(spawned.map((w) => w.terminated)).toEqual([true, true, true]);
  });

  it('surfaces a worker whose script does not load', async () => {
    const { spawn: inner } = fakes();
    const spawn = () => {
      const w = inner();
      // The script fails before the bridge is set up: the init message is never answered.
      w.postMessage = () => w.onerror?.({ message: 'SyntaxError in worker.js' } as ErrorEvent);
      return w;
    };
    await expect(start(spawn)).rejects.toThrow('test worker failed to start: SyntaxError in worker.js');
  });

  it('delivers events to the request and signals to the running handler', async () => {
    const { spawn } = fakes();
    const pool = await start(spawn);
    const events: number[] = [];
    const req = pool.request(0, 'steps', { steps: 3 }, { onEvent: (e) => events.push(e.done) });
    req.signal({ go: 42 });
    expect(await req.answer).toBe(42);
    expect(events).toEqual([1, 2, 3]);
  });

  it('transfers buffers both ways', async () => {
    const { spawn, spawned } = fakes();
    const pool = await start(spawn);
    const out = await pool.call(0, 'bytes', { n: 16 });
    expect(out).toEqual(new Uint8Array(16).fill(7));
    expect(spawned[0].sent.map((b) => b.byteLength)).toEqual([0]);
    const mine = new Uint8Array(8);
    await pool.call(0, 'wait', { ms: 0, tag: 't' }, { transfer: [mine.buffer] });
    expect(mine.byteLength).toBe(0);
  });

  it('rejects what is outstanding when the pool is ended', async () => {
    const { spawn, spawned } = fakes();
    const pool = await start(spawn);
    const held = pool.call(0, 'hang', null);
    pool.terminate('search cancelled');
    await expect(held).rejects.toThrow('search cancelled');
    await expect(pool.call(0, 'whoami', null)).rejects.toThrow('ended');
    expect(spawned[0].terminated).toBe(true);
  });
});
