import { describe, expect, it } from 'vitest';
import { manifestBlob, type BodyEntry } from './manifest';
import { fpHex } from './hex';

describe('manifestBlob', () => {
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
    const text = await manifestBlob(plain.source, plain.time, entries).text();
    expect(text).toBe(JSON.stringify(plain));
  });

  it('handles a manifest without entries', async () => {
    expect(await manifestBlob('s', 1, []).text()).toBe(JSON.stringify({ source: 's', time: 1, entries: [] }));
  });
});
