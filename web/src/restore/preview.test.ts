import { describe, expect, it } from 'vitest';
import { highlightRuns, looksLikeText, previewKind, TEXT_PREVIEW_BYTES } from './preview';

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
