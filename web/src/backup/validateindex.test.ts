import 'fake-indexeddb/auto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Api, TokenInfo } from '../api/client';
import { openClientIndex, type ClientIndex } from '../dedupindex/index';
import { randomFps } from '../dedupindex/testfps';
import { validateIndex } from './backup';

const open: ClientIndex[] = [];
let seq = 0;
afterEach(() => {
  for (const idx of open.splice(0)) idx.close();
});
async function freshIndex(): Promise<ClientIndex> {
  const idx = await openClientIndex(`validate-${++seq}-${Math.random().toString(36).slice(2)}`);
  open.push(idx);
  return idx;
}

/** A server at `gc_epoch` that holds every chunk except those in `lacks` (hex). */
function server(state: { epoch: number; lacks: Set<string> }) {
  const calls = { token: 0, missing: 0 };
  const api: Pick<Api, 'tokenInfo' | 'missing'> = {
    tokenInfo: async () => {
      calls.token++;
      return { gc_epoch: state.epoch } as TokenInfo;
    },
    missing: async (fps: Uint8Array) => {
      calls.missing++;
      const out: number[] = [];
      for (let i = 0; i < fps.length; i += 20) {
        const hex = Buffer.from(fps.subarray(i, i + 20)).toString('hex');
        if (state.lacks.has(hex)) out.push(...fps.subarray(i, i + 20));
      }
      return new Uint8Array(out);
    },
  };
  return { api, calls };
}

const hits = async (idx: ClientIndex, fps: Uint8Array) => (await idx.lookup(fps)).reduce((a, b) => a + b, 0);

describe('validateIndex', () => {
  it('trusts the index while the epoch stays and the sample is stored, drops it when a prune moved the epoch', async () => {
    const idx = await freshIndex();
    const state = { epoch: 5, lacks: new Set<string>() };
    const { api, calls } = server(state);
    expect(await validateIndex(idx, api)).toBe(false);
    expect(idx.epoch()).toBe(5);
    const fps = randomFps(100, 3);
    await idx.add(fps);

    expect(await validateIndex(idx, api)).toBe(false);
    expect(await hits(idx, fps)).toBe(100);
    expect(calls.missing).toBe(1); // the sample check still runs

    state.epoch = 6; // a prune deleted chunks; the sample happens to miss them all
    expect(await validateIndex(idx, api)).toBe(true);
    expect(await hits(idx, fps)).toBe(0);
    expect(idx.epoch()).toBe(6);
  });

  it('drops the index when the sample names a chunk the server lacks, and records the epoch again', async () => {
    const idx = await freshIndex();
    const fps = randomFps(10, 4); // fewer than 64: the sample is all of them
    const state = { epoch: 2, lacks: new Set<string>() };
    const { api } = server(state);
    await validateIndex(idx, api);
    await idx.add(fps);
    state.lacks.add(Buffer.from(fps.subarray(20, 40)).toString('hex'));
    expect(await validateIndex(idx, api)).toBe(true);
    expect(idx.stats().fingerprints).toBe(0);
    expect(idx.epoch()).toBe(2);
    // Relearnt, it is trusted again at the same epoch.
    state.lacks.clear();
    await idx.add(fps);
    expect(await validateIndex(idx, api)).toBe(false);
    expect(await hits(idx, fps)).toBe(10);
  });
});
