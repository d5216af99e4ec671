import { describe, expect, it } from 'vitest';
import { collect, Hits, type SearchFile } from './search';

const file = (id: number, version: number, path: string): SearchFile => ({
  id,
  version,
  source: 's',
  path,
  size: 100,
  recipe: [],
  lengths: new Uint32Array(),
});

describe('collect', () => {
  const files = [file(0, 2, 'b'), file(1, 1, 'z'), file(2, 2, 'a')];

  it("keeps each file's hits as a view of the answer, files by version then path", () => {
    const m = Float64Array.from([0, 0, 5, 0, 1, 9, 1, 0, 3, 2, 1, 1]);
    const out = collect(files, [m]);
    expect(out.map((r) => r.file.path)).toEqual(['z', 'a', 'b']);
    const b = out[2].hits;
    expect(b.length).toBe(2);
    expect(b.slice(0)).toEqual([
      { keyword: 0, offset: 5 },
      { keyword: 1, offset: 9 },
    ]);
    expect([b.keyword(1), b.offset(1)]).toEqual([1, 9]);
    expect(b.slice(1, 5)).toEqual([{ keyword: 1, offset: 9 }]);
  });

  it('joins the runs of a file from several answers and orders them by offset, then keyword', () => {
    const a = Float64Array.from([0, 2, 40, 0, 0, 7]);
    const b = Float64Array.from([2, 0, 1, 0, 1, 7, 0, 0, 3]);
    const out = collect(files, [a, b]);
    const hits = out.find((r) => r.file.id === 0)!.hits;
    expect(hits.slice(0)).toEqual([
      { keyword: 0, offset: 3 },
      { keyword: 0, offset: 7 },
      { keyword: 1, offset: 7 },
      { keyword: 2, offset: 40 },
    ]);
    expect(out.find((r) => r.file.id === 2)!.hits.slice(0)).toEqual([{ keyword: 0, offset: 1 }]);
  });

  it('refuses triples that are not whole', () => {
    expect(() => new Hits(new Float64Array(4))).toThrow(RangeError);
  });
});
