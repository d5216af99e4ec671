import 'fake-indexeddb/auto';
import { afterEach, describe, expect, it } from 'vitest';
import { openClientIndex, type ClientIndex } from './index';
import { randomFps } from './testfps';

let seq = 0;
const open: ClientIndex[] = [];
const freshName = () => `epoch-${++seq}-${Math.random().toString(36).slice(2)}`;
async function openIdx(name: string): Promise<ClientIndex> {
  const idx = await openClientIndex(name, { tabletSize: 64 });
  open.push(idx);
  return idx;
}
afterEach(() => {
  for (const idx of open.splice(0)) idx.close();
});
/** Lets queued work (close's checkpoint) finish. */
const settle = () => new Promise((r) => setTimeout(r, 20));
const hits = async (idx: ClientIndex, fps: Uint8Array) => (await idx.lookup(fps)).reduce((a, b) => a + b, 0);

describe('client index gc_epoch', () => {
  it('keeps its fingerprints while the epoch stays, drops them when it moves, across reopening', async () => {
    const name = freshName();
    const fps = randomFps(200, 7);
    const a = await openIdx(name);
    expect(a.epoch()).toBeNull();
    expect(await a.useEpoch(3)).toBe(false); // empty: nothing to drop, the epoch is recorded
    await a.add(fps);
    a.close();
    await settle();

    const b = await openIdx(name);
    expect(b.epoch()).toBe(3);
    expect(await b.useEpoch(3)).toBe(false);
    expect(await hits(b, fps)).toBe(200);

    expect(await b.useEpoch(4)).toBe(true); // a prune ran since: every fingerprint is suspect
    expect(b.epoch()).toBe(4);
    expect(b.stats().fingerprints).toBe(0);
    expect(await hits(b, fps)).toBe(0);
    b.close();
    await settle();

    const c = await openIdx(name);
    expect(c.epoch()).toBe(4);
    expect(c.stats().fingerprints).toBe(0);
    expect(await hits(c, fps)).toBe(0);
    // Learnt again under the new epoch, the fingerprints are kept.
    await c.add(fps);
    expect(await c.useEpoch(4)).toBe(false);
    expect(await hits(c, fps)).toBe(200);
  });

  it('drops an index that recorded no epoch, and clear() forgets the epoch', async () => {
    const name = freshName();
    const a = await openIdx(name);
    await a.add(randomFps(50, 8)); // built before any epoch was recorded
    expect(await a.useEpoch(0)).toBe(true);
    expect(a.stats().fingerprints).toBe(0);
    await a.add(randomFps(50, 9));
    await a.clear();
    expect(a.epoch()).toBeNull();
    a.close();
    await settle();
    const b = await openIdx(name);
    expect(b.epoch()).toBeNull();
  });

  it('refuses an epoch that is not a count', async () => {
    const a = await openIdx(freshName());
    await expect(a.useEpoch(-1)).rejects.toThrow(RangeError);
    await expect(a.useEpoch(undefined as unknown as number)).rejects.toThrow(RangeError);
  });
});
