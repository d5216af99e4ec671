import { describe, expect, it } from 'vitest';
import { highlightRuns, looksLikeText, markedRuns, previewKind, rangesWithin, TEXT_PREVIEW_BYTES } from './preview';

describe('previewKind', () => {
  it('images by extension, text otherwise, capped', () => {
    expect(previewKind('a/b/logo.PNG', 1000)).toEqual({ kind: 'image', mime: 'image/png', limit: 1000 });
    expect(previewKind('x.svg', 10).kind).toBe('image');
    expect(previewKind('big.jpg', 64 << 20).kind).toBe('none');
    expect(previewKind('README', 10)).toEqual({ kind: 'text', limit: 10 });
    expect(previewKind('huge.log', 1e9)).toEqual({ kind: 'text', limit: TEXT_PREVIEW_BYTES });
  });
});

describe('looksLikeText', () => {
  it('accepts UTF-8 and refuses binary', () => {
    expect(looksLikeText(new TextEncoder().encode('héllo wörld\n'))).toBe(true);
    expect(looksLikeText(Uint8Array.of(0x7f, 0x45, 0x4c, 0x46, 0, 1, 2))).toBe(false);
    expect(looksLikeText(Uint8Array.from({ length: 200 }, (_, i) => 0x80 + (i % 64)))).toBe(false);
  });
});

describe('highlightRuns', () => {
  it('marks every case-insensitive occurrence, longest term first', () => {
    expect(highlightRuns('Foo bar foobar', ['foo', 'foobar'])).toEqual([
      { text: 'Foo', hit: true },
      { text: ' bar ', hit: false },
      { text: 'foobar', hit: true },
    ]);
    expect(highlightRuns('a.b', ['.'])).toEqual([
      { text: 'a', hit: false },
      { text: '.', hit: true },
      { text: 'b', hit: false },
    ]);
    expect(highlightRuns('abc', [' ', ''])).toEqual([{ text: 'abc', hit: false }]);
    expect(highlightRuns('', ['x'])).toEqual([{ text: '', hit: false }]);
  });
});

describe('markedRuns', () => {
  const enc = (t: string) => new TextEncoder().encode(t);

  it('marks exactly the byte ranges given, case and all, merging overlaps', () => {
    const bytes = enc('Foo foo foofoo');
    expect(markedRuns(bytes, [[4, 7]])).toEqual([
      { text: 'Foo ', hit: false },
      { text: 'foo', hit: true },
      { text: ' foofoo', hit: false },
    ]);
    // Overlapping and touching ranges make one mark; a range past the end is clipped.
    expect(
      markedRuns(bytes, [
        [10, 14],
        [8, 11],
        [12, 99],
      ]),
    ).toEqual([
      { text: 'Foo foo ', hit: false },
      { text: 'foofoo', hit: true },
    ]);
    expect(markedRuns(bytes, [])).toEqual([{ text: 'Foo foo foofoo', hit: false }]);
    expect(markedRuns(new Uint8Array(0), [[0, 3]])).toEqual([{ text: '', hit: false }]);
  });

  it('joins to the whole decoded text, characters cut by a border included (oracle: TextDecoder)', () => {
    const text = 'héllo wörld — ünïcødé ✓ 𝄞 end';
    const bytes = enc(text);
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let round = 0; round < 500; round++) {
      const ranges = Array.from({ length: rand(5) }, () => {
        const s = rand(bytes.length + 2);
        return [s, s + 1 + rand(6)] as const;
      });
      const runs = markedRuns(bytes, ranges);
      expect(runs.map((r) => r.text).join('')).toBe(text);
      // Each marked run is the text of bytes some range covers (whole characters here only).
      for (const r of runs.filter((x) => x.hit && !x.text.includes('\ufffd'))) expect(text).toContain(r.text);
    }
    // A mark on whole characters holds exactly them.
    const at = bytes.indexOf(0xe2); // the em dash
    expect(markedRuns(bytes, [[at, at + 3]]).find((r) => r.hit)?.text).toBe('—');
  });

  it('counts the ranges that lie wholly within a shown length', () => {
    expect(
      rangesWithin(
        [
          [0, 3],
          [5, 9],
          [8, 12],
        ],
        10,
      ),
    ).toBe(2);
    expect(rangesWithin([], 10)).toBe(0);
  });
});
