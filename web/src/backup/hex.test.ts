import { describe, expect, it } from 'vitest';
import { fpHex, fpHexes, hexToBytes, packHex } from './hex';

describe('hex', () => {
  it('decodes what fpHex encodes, upper or lower case', () => {
    const bytes = Uint8Array.from({ length: 20 * 50 }, (_, i) => (i * 97 + 13) & 255);
    const hexes = Array.from({ length: 50 }, (_, i) => fpHex(bytes, i));
    expect(packHex(hexes)).toEqual(bytes);
    expect(packHex(hexes.map((h) => h.toUpperCase()))).toEqual(bytes);
    expect(Array.from(hexToBytes('00ff7a', new Uint8Array(5), 2))).toEqual([0, 0, 0, 255, 122]);
  });

  it('encodes many at once as fpHex does one by one', () => {
    const bytes = Uint8Array.from({ length: 20 * 300 }, (_, i) => (i * 131 + 7) & 255);
    const want = Array.from({ length: 300 }, (_, k) => fpHex(bytes, k));
    expect(fpHexes(bytes, 300)).toEqual(want);
    expect(
      fpHexes(
        Uint8Array.from({ length: 20 }, (_, i) => i * 13),
        1,
      ),
    ).toEqual(['000d1a2734414e5b6875828f9ca9b6c3d0ddeaf7']);
    expect(fpHexes(new Uint8Array(0), 0)).toEqual([]);
  });

  it('refuses what is not hex', () => {
    for (const bad of ['0g', 'zz', '0 ', '-1']) expect(() => hexToBytes(bad)).toThrow(/not hex/);
  });
});
