import { describe, expect, it } from 'vitest';
import type { Api, Manifest, VersionInfo } from '../api/client';
import { fpHex, packHex } from './hex';
import {
  distinctFps,
  forgetCommitted,
  hotFps,
  previousVersion,
  rememberCommitted,
  type PreviousFile,
} from './previous';

const fp = (n: number) => n.toString(16).padStart(40, '0');
const info = (id: number, source: string, committed_at: number) =>
  ({ id, source, time: 1, committed_at }) as VersionInfo;

/** A server with these versions; counts the manifests fetched. */
function fakeApi(versions: VersionInfo[], manifest: Manifest) {
  const fetched: number[] = [];
  const api = {
    base: 'http://x',
    repo: 'default',
    versions: async () => versions,
    version: async (id: number) => {
      fetched.push(id);
      return { ...versions.find((v) => v.id === id)!, manifest };
    },
  } as unknown as Api;
  return { api, fetched };
}

const manifest: Manifest = {
  source: 's',
  time: 1,
  entries: [
    { path: 'd', kind: 'dir', size: 0, mtime: 0, mode: null, recipe: [] },
    { path: 'd/f', kind: 'file', size: 5, mtime: 7, mode: null, recipe: [fp(1), fp(2)] },
  ],
};

describe('previousVersion', () => {
  it('fetches the newest version of the source, files only, recipes packed', async () => {
    const { api, fetched } = fakeApi([info(1, 's', 10), info(2, 'other', 20), info(3, 's', 30)], manifest);
    const prev = (await previousVersion(api, 's'))!;
    expect(fetched).toEqual([3]);
    expect(prev.files.map((f) => [f.path, f.size, f.mtime, fpHex(f.recipe, 1), f.lengths])).toEqual([
      ['d/f', 5, 7, fp(2), null],
    ]);
    expect(await previousVersion(fakeApi([info(2, 'other', 20)], manifest).api, 's')).toBeNull();
  });

  it('uses what this page committed for the source, asking nothing; until it is deleted', async () => {
    const mine: PreviousFile[] = [
      { path: 'x', size: 3, mtime: 4, recipe: packHex([fp(9)]), lengths: Uint32Array.of(3) },
    ];
    const asked: string[] = [];
    const { api, fetched } = fakeApi([info(4, 'm', 40), info(5, 'm', 50)], manifest);
    (api as { versions: () => Promise<VersionInfo[]> }).versions = async () => (asked.push('versions'), []);
    rememberCommitted(api, 'm', info(4, 'm', 40), mine);
    expect((await previousVersion(api, 'm'))!.files).toBe(mine);
    expect([asked, fetched]).toEqual([[], []]);
    // Another repository on the same server, or another source: not this memo.
    const other = fakeApi([info(4, 'm', 40)], manifest);
    (other.api as { repo: string }).repo = 'r2';
    expect((await previousVersion(other.api, 'm'))!.files[0].path).toBe('d/f');
    expect((await previousVersion(fakeApi([info(6, 'n', 60)], manifest).api, 'n'))!.files[0].path).toBe('d/f');
    // Deleted: the server's newest again.
    forgetCommitted(other.api, 4); // another repository's version 4
    expect((await previousVersion(api, 'm'))!.files).toBe(mine);
    forgetCommitted(api, 4);
    const after = fakeApi([info(5, 'm', 50)], manifest);
    expect((await previousVersion(after.api, 'm'))!.files[0].path).toBe('d/f');
    expect(after.fetched).toEqual([5]);
  });

  it('asks the server when another tab committed a newer version of the source', async () => {
    const mine: PreviousFile[] = [{ path: 'x', size: 3, mtime: 4, recipe: packHex([fp(9)]), lengths: null }];
    const { api, fetched } = fakeApi([info(7, 't', 70), info(8, 't', 80)], manifest);
    rememberCommitted(api, 't', info(7, 't', 70), mine);
    // The job record names this page's commit: the memo stands.
    expect((await previousVersion(api, 't', 7))!.files).toBe(mine);
    expect(fetched).toEqual([]);
    // It names version 8, committed by another tab: the server's newest instead.
    const prev = (await previousVersion(api, 't', 8))!;
    expect(prev.id).toBe(8);
    expect(fetched).toEqual([8]);
  });
});

describe('distinctFps', () => {
  it('lists each fingerprint once, in first-seen order', () => {
    const files = [
      { path: 'a', size: 0, mtime: 0, recipe: packHex([fp(1), fp(2), fp(1)]), lengths: null },
      { path: 'b', size: 0, mtime: 0, recipe: packHex([fp(3), fp(2)]), lengths: null },
    ];
    const all = distinctFps(files);
    expect(Array.from({ length: all.length / 20 }, (_, i) => fpHex(all, i))).toEqual([fp(1), fp(2), fp(3)]);
  });
});

describe('hotFps', () => {
  it('lists every fingerprint of the recipes, repeats included, minus the dropped ones', () => {
    const files = [
      { path: 'a', size: 0, mtime: 0, recipe: packHex([fp(1), fp(2), fp(1)]), lengths: null },
      { path: 'b', size: 0, mtime: 0, recipe: packHex([fp(3), fp(2)]), lengths: null },
    ];
    const list = (p: Uint8Array) => Array.from({ length: p.length / 20 }, (_, i) => fpHex(p, i));
    expect(list(hotFps(files))).toEqual([fp(1), fp(2), fp(1), fp(3), fp(2)]);
    expect(list(hotFps(files, new Set([fp(2)])))).toEqual([fp(1), fp(1), fp(3)]);
    expect(list(hotFps([]))).toEqual([]);
  });
});
