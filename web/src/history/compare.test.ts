import { describe, expect, it } from 'vitest';
import type { Manifest, ManifestEntry } from '../api/client';
import { compareManifests, fileHistory, heldBefore } from './compare';
import { changedSpan, diffFiles } from './filediff';

const file = (path: string, recipe: string[], size = recipe.length * 10, mtime = 1): ManifestEntry => ({
  path,
  kind: 'file',
  size,
  mtime,
  mode: null,
  recipe,
});
const dir = (path: string): ManifestEntry => ({ path, kind: 'dir', size: 0, mtime: 1, mode: null, recipe: [] });
const link = (path: string, target: string): ManifestEntry => ({
  path,
  kind: 'symlink',
  size: 0,
  mtime: 1,
  mode: null,
  recipe: [],
  target,
});
const manifest = (entries: ManifestEntry[]): Manifest => ({ source: 's', time: 0, entries });

describe('compareManifests', () => {
  it('lists added, removed and changed files by recipe; same recipe is unchanged whatever the mtime', () => {
    const old = manifest([
      dir('src'),
      file('src/a.js', ['1', '2']),
      file('src/b.js', ['3'], 7),
      file('gone.txt', ['4']),
      file('same.txt', ['5'], 10, 100),
      link('l', 'a'),
      link('kept', 'x'),
    ]);
    const neu = manifest([
      dir('src'),
      dir('docs'),
      file('src/a.js', ['1', '9']),
      file('src/b.js', ['3', '6'], 25),
      file('new.txt', ['7']),
      file('same.txt', ['5'], 10, 200),
      file('l', ['8']),
      link('kept', 'x'),
    ]);
    const c = compareManifests(old, neu);
    expect(c.added).toEqual([{ path: 'new.txt', kind: 'file', size: 10 }]);
    expect(c.removed).toEqual([{ path: 'gone.txt', kind: 'file', size: 10 }]);
    expect(c.changed.map((x) => [x.path, x.kind, x.oldSize, x.newSize])).toEqual([
      ['l', 'kind', 0, 10],
      ['src/a.js', 'file', 20, 20],
      ['src/b.js', 'file', 7, 25],
    ]);
    expect([c.unchanged, c.unchangedBytes]).toEqual([2, 10]);
    expect([c.oldBytes, c.newBytes]).toEqual([20 + 7 + 10 + 10, 20 + 25 + 10 + 10 + 10]);
  });

  it('says when a removed file is only missing from an incomplete newer version', () => {
    const old = manifest([file('a', ['1']), file('b', ['2'])]);
    const neu = { ...manifest([]), skipped: [{ path: 'a', reason: 'unreadable' as const }] };
    expect(compareManifests(old, neu).removed).toEqual([
      { path: 'a', kind: 'file', size: 10, skipped: 'unreadable' },
      { path: 'b', kind: 'file', size: 10 },
    ]);
  });

  it('finds nothing between a version and itself', () => {
    const m = manifest([file('a', ['1']), file('b', ['2', '3'])]);
    const c = compareManifests(m, m);
    expect([c.added, c.removed, c.changed, c.unchanged]).toEqual([[], [], [], 2]);
  });
});

describe('fileHistory', () => {
  it('marks each version holding the path against the version before it', () => {
    const vs = [
      manifest([file('x', ['1'])]),
      manifest([file('x', ['1'], 10, 5)]),
      manifest([file('x', ['2'])]),
      manifest([]),
      manifest([file('x', ['2'])]),
    ].map((manifest, i) => ({ version: i + 1, manifest }));
    expect(fileHistory('x', vs).map((h) => [h.version, h.change])).toEqual([
      [1, 'added'],
      [2, 'same'],
      [3, 'changed'],
      [5, 'added'],
    ]);
    expect(fileHistory('y', vs)).toEqual([]);
  });

  it('lists a version that could not read the file, and marks the next against the last that held it', () => {
    const skippedX: Manifest = { ...manifest([]), skipped: [{ path: 'x', reason: 'unreadable' }] };
    const vs = [manifest([file('x', ['1'])]), skippedX, manifest([file('x', ['1'])]), manifest([file('x', ['2'])])].map(
      (manifest, i) => ({ version: i + 1, manifest }),
    );
    const h = fileHistory('x', vs);
    expect(h.map((e) => [e.version, e.change])).toEqual([
      [1, 'added'],
      [2, 'skipped'],
      [3, 'same'],
      [4, 'changed'],
    ]);
    expect(h[1]).toMatchObject({ skipped: 'unreadable' });
    expect(heldBefore(h, 2)?.version).toBe(1);
    expect(heldBefore(h, 3)?.version).toBe(3);
    expect(heldBefore(h, 0)).toBeUndefined();
  });
});

describe('diffFiles', () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  it('diffs text by lines', () => {
    const d = diffFiles(enc('a\nb\nc\n'), enc('a\nB\nc\n'));
    expect(d.kind).toBe('text');
    if (d.kind === 'text') expect([d.diff.added, d.diff.removed]).toEqual([1, 1]);
  });
  it('measures binary changes as the span between common prefix and suffix', () => {
    const a = new Uint8Array(1000).map((_, i) => i % 251);
    a[0] = 0;
    const b = a.slice();
    b[100] ^= 0xff;
    b[140] ^= 0xff;
    const d = diffFiles(a, b);
    expect(d).toEqual({ kind: 'binary', span: { prefix: 100, suffix: 859, oldChanged: 41, newChanged: 41 } });
    // An insertion counts its own length, not the shifted rest.
    const ins = new Uint8Array([...a.subarray(0, 500), 7, 7, 7, ...a.subarray(500)]);
    expect(changedSpan(a, ins)).toMatchObject({ oldChanged: 0, newChanged: 3 });
    // Prefix and suffix never overlap, however repetitive the bytes.
    expect(changedSpan(new Uint8Array([1, 1, 1]), new Uint8Array([1, 1, 1, 1]))).toEqual({
      prefix: 3,
      suffix: 0,
      oldChanged: 0,
      newChanged: 1,
    });
  });
});
