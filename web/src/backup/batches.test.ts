import { describe, expect, it } from 'vitest';
import { BATCH_BYTES, BATCH_FILE_BYTES, BATCH_FILES, batches } from './backup';

const f = (size: number, name = String(size)) => ({ name, file: { size } });

describe('batches', () => {
  it('takes every file once, puts large files alone and caps batches by count and bytes', () => {
    const files = [
      ...Array.from({ length: BATCH_FILES + 3 }, (_, i) => f(10, `s${i}`)),
      f(BATCH_FILE_BYTES, 'big'),
      f(BATCH_BYTES - 5, 'almost'),
      f(10, 'tail'),
      f(0, 'empty'),
    ];
    const out = batches(files);
    expect(out.flat().map((x) => x.name)).toEqual(expect.arrayContaining(files.map((x) => x.name)));
    expect(out.flat().length).toBe(files.length);
    expect(out.map((b) => b.length)).toEqual([BATCH_FILES, 1, 1, 5]);
    expect(out[1][0].name).toBe('big');
    for (const b of out)
      if (b.length > 1) expect(b.reduce((n, x) => n + x.file.size, 0)).toBeLessThanOrEqual(BATCH_BYTES);
  });

  it('is empty for no files', () => {
    expect(batches([])).toEqual([]);
  });
});
