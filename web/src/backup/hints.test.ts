import { describe, expect, it } from 'vitest';
import { fpHex, FP_LEN, packHex } from './hex';
import { LENGTHS_PER_REQUEST, previousRecipes } from './hints';
import type { PreviousFile } from './previous';

const fp = (n: number) => n.toString(16).padStart(40, '0');
const file = (path: string, recipe: string[], lengths: number[] | null = null): PreviousFile => ({
  path,
  size: 0,
  mtime: 0,
  recipe: packHex(recipe),
  lengths: lengths && Uint32Array.from(lengths),
});
/** A server that stores chunk n with length 1000 + n (and nothing else). */
const lengthsOf = (asked: number[][]) => async (fps: Uint8Array) => {
  const n = fps.length / FP_LEN;
  asked.push([n]);
  return Uint32Array.from({ length: n }, (_, i) => 1000 + parseInt(fpHex(fps, i), 16));
};

describe('previousRecipes', () => {
  it('lays the recipes end to end with their lengths, asking for each fingerprint once', async () => {
    const asked: number[][] = [];
    const files = [file('a', [fp(1), fp(2), fp(1)]), file('empty', []), file('b/c', [fp(3), fp(2)])];
    const r = (await previousRecipes(files, lengthsOf(asked)))!;
    expect(asked).toEqual([[3]]);
    expect(Array.from(r.data.counts)).toEqual([3, 0, 2]);
    expect(Array.from(r.data.lengths)).toEqual([1001, 1002, 1001, 1003, 1002]);
    expect(Array.from({ length: 5 }, (_, i) => fpHex(r.data.fps, i))).toEqual([fp(1), fp(2), fp(1), fp(3), fp(2)]);
    expect([...r.fileIndex]).toEqual([
      ['a', 0],
      ['empty', 1],
      ['b/c', 2],
    ]);
  });

  it('uses the lengths files carry and asks only for the others', async () => {
    const asked: number[][] = [];
    const files = [file('known', [fp(1), fp(2)], [7, 8]), file('asked', [fp(2), fp(3), fp(2)])];
    const r = (await previousRecipes(files, lengthsOf(asked)))!;
    expect(asked).toEqual([[2]]);
    expect(Array.from(r.data.lengths)).toEqual([7, 8, 1002, 1003, 1002]);
    const none: number[][] = [];
    const all = (await previousRecipes([file('k', [fp(5)], [9])], lengthsOf(none)))!;
    expect(none).toEqual([]);
    expect(Array.from(all.data.lengths)).toEqual([9]);
  });

  it('splits large requests and gives up when a length is unknown', async () => {
    const asked: number[][] = [];
    const many = Array.from({ length: LENGTHS_PER_REQUEST + 5 }, (_, i) => fp(i + 1));
    const r = (await previousRecipes([file('big', many)], lengthsOf(asked)))!;
    expect(asked).toEqual([[LENGTHS_PER_REQUEST], [5]]);
    expect(r.data.lengths[LENGTHS_PER_REQUEST + 4]).toBe(1000 + LENGTHS_PER_REQUEST + 5);
    const unknown = async (fps: Uint8Array) => new Uint32Array(fps.length / FP_LEN);
    expect(await previousRecipes([file('a', [fp(1)])], unknown)).toBeNull();
    expect(await previousRecipes([file('a', [])], unknown)).toBeNull();
  });
});
