import { describe, expect, it, vi } from 'vitest';
import type { Api, Manifest } from '../api/client';
import { eachManifest, loadManifests } from './manifests';

const ids = Array.from({ length: 20 }, (_, i) => i + 1);
let servers = 0;

/**
 * A fake server whose `version(failing)` rejects and every other answers a tick later. Each
 * fake has its own base: the manifest cache is keyed by it, so no test reads another's.
 */
function fakeApi(failing?: number) {
  const version = vi.fn(async (id: number) => {
    await new Promise((r) => setTimeout(r, 1));
    if (id === failing) throw new Error(`version ${id} unreadable`);
    const manifest: Manifest = { source: 's', time: id, entries: [] };
    return { manifest } as unknown as Awaited<ReturnType<Api['version']>>;
  });
  return { api: { base: `http://fake-${++servers}`, repo: 'r', version } as unknown as Api, version };
}

/** Lets every worker that would still run take its next id and ask for it. */
const settle = () => new Promise((r) => setTimeout(r, 50));

describe('eachManifest', () => {
  it('reads every manifest, in the order of the ids', async () => {
    const { api, version } = fakeApi();
    const got = await loadManifests(api, ids);
    expect(got.map((m) => m.time)).toEqual(ids);
    expect(version).toHaveBeenCalledTimes(ids.length);
  });

  it('stops taking ids once one read failed', async () => {
    const { api, version } = fakeApi(2);
    await expect(eachManifest(api, ids, () => {})).rejects.toThrow('version 2 unreadable');
    await settle();
    expect(version.mock.calls.length).toBeLessThan(ids.length);
  });

  it('stops taking ids once its caller aborts, and calls back no more', async () => {
    const { api, version } = fakeApi();
    const stop = new AbortController();
    const seen: number[] = [];
    const done = eachManifest(
      api,
      ids,
      (m) => {
        seen.push(m.time);
        stop.abort();
      },
      { signal: stop.signal },
    );
    await expect(done).rejects.toMatchObject({ name: 'AbortError' });
    await settle();
    expect(seen).toHaveLength(1);
    expect(version.mock.calls.length).toBeLessThan(ids.length);
  });
});
