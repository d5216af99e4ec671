import { describe, expect, it } from 'vitest';
import { ReadAhead, streamBlocks } from './readahead';

function bytes(n: number, seed: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) out[i] = (x = (x * 1103515245 + 12345) >>> 0) >>> 24;
  return out;
}

/** A Blob whose reads are logged and can be held back until `release()`. */
function slowBlob(data: Uint8Array, log: string[], name: string, failAt = -1) {
  const gates: (() => void)[] = [];
  const blob = {
    size: data.length,
    slice(start: number, stop: number) {
      return {
        arrayBuffer: async () => {
          log.push(`${name}@${start}`);
          await new Promise<void>((r) => gates.push(r));
          if (start === failAt) throw new Error(`cannot read ${name}`);
          return data.slice(start, stop).buffer;
        },
      };
    },
  } as unknown as Blob;
  const release = () => gates.splice(0).forEach((g) => g());
  return { blob, release };
}

async function collect(stream: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const b of stream) parts.push(b);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) (out.set(p, at), (at += p.length));
  return out;
}

/**
 * `actual` equals `expected` byte for byte; on a difference, says where. (Deep equality of
 * large typed arrays element by element takes seconds.)
 */
function expectBytes(actual: Uint8Array, expected: Uint8Array) {
  expect(actual.length).toBe(expected.length);
  const at = actual.findIndex((b, i) => b !== expected[i]);
  expect(at, 'the first differing byte').toBe(-1);
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('ReadAhead', () => {
  it('yields every byte of every stream in order, whatever the block size', async () => {
    for (const block of [3, 7, 1000, 1 << 20]) {
      const ra = new ReadAhead(4 * block, block);
      const files = [0, 1, 999, 5000, 12345].map((n, i) => bytes(n, i + 1));
      const streams = files.map((f) => ra.open(new Blob([f])));
      for (let i = 0; i < files.length; i++) expectBytes(await collect(streams[i]), files[i]);
      expect(ra.heldBytes).toBe(0);
    }
  });

  it('reads a byte range of a blob', async () => {
    const data = bytes(10_000, 9);
    const ra = new ReadAhead(4096, 1000);
    expectBytes(await collect(ra.open(new Blob([data]), 2500, 7777)), data.slice(2500, 7777));
  });

  it("issues later streams' reads before earlier ones are consumed, within the budget", async () => {
    const log: string[] = [];
    const a = slowBlob(bytes(300, 1), log, 'a');
    const b = slowBlob(bytes(300, 2), log, 'b');
    const ra = new ReadAhead(400, 100);
    const sa = ra.open(a.blob);
    const sb = ra.open(b.blob);
    // 4 blocks fit the budget: all of a and the first of b, before anything was consumed.
    expect(log).toEqual(['a@0', 'a@100', 'a@200', 'b@0']);
    expect(ra.heldBytes).toBe(400);
    a.release();
    b.release();
    const ia = sa[Symbol.asyncIterator]();
    await ia.next();
    await tick();
    // Consuming one block of a frees room for the next block of b.
    expect(log).toContain('b@100');
    expect(ra.heldBytes).toBeLessThanOrEqual(400);
    const rest = collect({ [Symbol.asyncIterator]: () => ia });
    const all = collect(sb);
    for (let i = 0; i < 5; i++) (await tick(), a.release(), b.release());
    expect((await rest).length).toBe(200);
    expect((await all).length).toBe(300);
    expect(ra.heldBytes).toBe(0);
  });

  it('reads a block bigger than the budget instead of stalling', async () => {
    const data = bytes(5000, 3);
    const ra = new ReadAhead(100, 4096);
    expectBytes(await collect(ra.open(new Blob([data]))), data);
  });

  it('a consumer whose block waits behind the budget reads it anyway', async () => {
    const log: string[] = [];
    const a = slowBlob(bytes(400, 1), log, 'a');
    const ra = new ReadAhead(400, 100);
    ra.open(a.blob); // holds the whole budget and is never consumed
    const data = bytes(250, 4);
    expectBytes(await collect(ra.open(new Blob([data]))), data);
  });

  it('a failed read fails only its own stream, when consumed', async () => {
    const log: string[] = [];
    const bad = slowBlob(bytes(300, 1), log, 'bad', 100);
    const ra = new ReadAhead(1000, 100);
    const sBad = ra.open(bad.blob);
    const good = bytes(300, 2);
    const sGood = ra.open(new Blob([good]));
    bad.release();
    const failing = collect(sBad).then(
      () => null,
      (e: Error) => e.message,
    );
    for (let i = 0; i < 3; i++) (await tick(), bad.release());
    expect(await failing).toBe('cannot read bad');
    expectBytes(await collect(sGood), good);
    expect(ra.heldBytes).toBe(0);
  });

  it('close() drops unconsumed blocks and lets the next stream read', async () => {
    const log: string[] = [];
    const a = slowBlob(bytes(1000, 1), log, 'a');
    const ra = new ReadAhead(300, 100);
    const sa = ra.open(a.blob);
    const data = bytes(500, 5);
    const sb = ra.open(new Blob([data]));
    expect(ra.heldBytes).toBe(300);
    sa.close();
    expectBytes(await collect(sb), data);
    expect(ra.heldBytes).toBe(0);
    expect(log).toEqual(['a@0', 'a@100', 'a@200']);
  });

  it('reads a block that is the whole blob without slicing it', async () => {
    const data = bytes(3000, 7);
    const blob = new Blob([data]);
    let slices = 0;
    const counted = {
      size: blob.size,
      slice: (start: number, stop: number) => (slices++, blob.slice(start, stop)),
      arrayBuffer: () => blob.arrayBuffer(),
    } as unknown as Blob;
    const ra = new ReadAhead(10_000, 1000);
    expectBytes(await collect(ra.open(counted, 0, counted.size, 4096)), data);
    expect(slices).toBe(0);
    expectBytes(await collect(ra.open(counted)), data);
    expect(slices).toBe(3);
  });
});

describe('streamBlocks', () => {
  it('yields every byte of the blob in order', async () => {
    for (const n of [0, 1, 70_000, 1 << 20]) {
      const data = bytes(n, n + 3);
      expectBytes(await collect(streamBlocks(new Blob([data]))), data);
    }
  });

  it('a failing stream fails when consumed; close() cancels it', async () => {
    let cancelled = false;
    const failing = {
      stream: () =>
        new ReadableStream<Uint8Array>({
          pull: (c) => c.error(new Error('cannot read it')),
          cancel: () => void (cancelled = true),
        }),
    } as unknown as Blob;
    await expect(collect(streamBlocks(failing))).rejects.toThrow('cannot read it');
    const endless = {
      stream: () =>
        new ReadableStream<Uint8Array>({
          pull: (c) => c.enqueue(new Uint8Array(10)),
          cancel: () => void (cancelled = true),
        }),
    } as unknown as Blob;
    const s = streamBlocks(endless);
    const it = s[Symbol.asyncIterator]();
    expect((await it.next()).value).toHaveLength(10);
    s.close();
    expect(cancelled).toBe(true);
    expect((await it.next()).done).toBe(true);
  });
});
