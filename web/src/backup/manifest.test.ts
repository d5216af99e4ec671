import { describe, expect, it } from 'vitest';
import { DETAIL_CHARS, manifestBody, type BodyEntry } from './manifest';

const text = (body: Blob | Uint8Array) => (body instanceof Blob ? body.text() : new TextDecoder().decode(body));
import { fpHex } from './hex';

describe('manifestBody', () => {
  it('writes exactly the JSON of the manifest, for packed and hex recipes', async () => {
    const packed = Uint8Array.from({ length: 20 * 70_000 }, (_, i) => (i * 131 + (i >> 7)) & 255);
    const entries: BodyEntry[] = [
      { path: 'a dir', kind: 'dir', size: 0, mtime: 0, mode: null, recipe: [] },
      { path: 'big "quoted" \u00e9.bin', kind: 'file', size: 123, mtime: 456, mode: null, recipe: packed },
      { path: 'small 😀', kind: 'file', size: 1, mtime: 2, mode: 420, recipe: ['00'.repeat(20), 'ab'.repeat(20)] },
      { path: 'empty', kind: 'file', size: 0, mtime: 3, mode: null, recipe: new Uint8Array(0) },
    ];
    const plain = {
      source: 'src "x"',
      time: 1700000000000,
      entries: entries.map((e) => ({
        ...e,
        recipe: Array.isArray(e.recipe)
          ? e.recipe
          : Array.from({ length: e.recipe.length / 20 }, (_, i) => fpHex(e.recipe as Uint8Array, i)),
      })),
    };
    const body = manifestBody(plain.source, plain.time, entries);
    // 70 000 fingerprints span several pieces: a Blob.
    expect(body).toBeInstanceOf(Blob);
    expect(await text(body)).toBe(JSON.stringify(plain));
    const small = { ...plain, entries: plain.entries.filter((e) => !e.path.startsWith('big')) };
    const smallBody = manifestBody(
      plain.source,
      plain.time,
      entries.filter((e) => !e.path.startsWith('big')),
    );
    expect(smallBody).toBeInstanceOf(Uint8Array);
    expect(await text(smallBody)).toBe(JSON.stringify(small));
  });

  it('handles a manifest without entries', async () => {
    expect(await text(manifestBody('s', 1, []))).toBe(JSON.stringify({ source: 's', time: 1, entries: [] }));
  });

  it('names the picked folder when given, and leaves the field out otherwise', async () => {
    expect(await text(manifestBody('s', 1, [], [], 'Photos "2024"'))).toBe(
      JSON.stringify({ source: 's', folder: 'Photos "2024"', time: 1, entries: [] }),
    );
    expect(JSON.parse(await text(manifestBody('s', 1, [], []))).folder).toBeUndefined();
  });

  it('lists the skipped files of an incomplete version, and omits the field when none', async () => {
    const entries: BodyEntry[] = [{ path: 'a', kind: 'file', size: 0, mtime: 3, mode: null, recipe: [] }];
    const long = 'é'.repeat(DETAIL_CHARS + 50);
    const got = JSON.parse(
      await text(
        manifestBody('s', 1, entries, [
          { path: 'b', reason: 'changed', detail: 'NotReadableError: x' },
          { path: 'c/d', reason: 'deleted' },
          { path: 'e', reason: 'unreadable', detail: long },
        ]),
      ),
    );
    expect(got.skipped).toEqual([
      { path: 'b', reason: 'changed', detail: 'NotReadableError: x' },
      { path: 'c/d', reason: 'deleted' },
      { path: 'e', reason: 'unreadable', detail: long.slice(0, DETAIL_CHARS) },
    ]);
    // Within the server's 1024-byte limit whatever the characters.
    expect(new TextEncoder().encode(got.skipped[2].detail).length).toBeLessThanOrEqual(1024);
    expect(JSON.parse(await text(manifestBody('s', 1, entries, []))).skipped).toBeUndefined();
  });
});
