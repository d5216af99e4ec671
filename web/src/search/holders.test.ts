import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Api } from '../api/client';
import { fpHex } from '../backup/hex';
import { cachedChunks, forgetWorker, loadDeviceCache } from './search';
import type { SearchWorkers } from './workers';

/** A pool of two workers whose device caches held one chunk each; records what it is asked. */
function pool() {
  const fp = (w: number) => new Uint8Array(20).fill(w + 1);
  const asked: { w: number; method: string }[] = [];
  const workers = {
    size: 2,
    call: async (w: number, method: string) => {
      asked.push({ w, method });
      if (method === 'loadCache') return { fps: fp(w), dropped: 0 };
      // `chunks`: the one chunk asked for, 3 bytes long.
      const out = new Uint8Array(7);
      new DataView(out.buffer).setUint32(0, 3, true);
      return out;
    },
  } as unknown as SearchWorkers;
  return { workers, asked, hex: (w: number) => fpHex(fp(w), 0) };
}

describe('which worker holds which chunk', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('a worker replaced after a crash is asked for nothing it held', async () => {
    vi.stubGlobal('localStorage', { getItem: () => null });
    const { workers, asked, hex } = pool();
    await loadDeviceCache({ base: 'http://ditto.test', repo: 'default' } as Api, workers);
    let got = await cachedChunks(workers, [hex(0), hex(1)]);
    expect([...got.keys()].sort()).toEqual([hex(0), hex(1)].sort());
    expect(
      asked
        .filter((a) => a.method === 'chunks')
        .map((a) => a.w)
        .sort(),
    ).toEqual([0, 1]);

    asked.length = 0;
    forgetWorker(workers, 1);
    got = await cachedChunks(workers, [hex(0), hex(1)]);
    expect([...got.keys()]).toEqual([hex(0)]);
    expect(asked).toEqual([{ w: 0, method: 'chunks' }]);
  });
});
