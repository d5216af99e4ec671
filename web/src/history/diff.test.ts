import { describe, expect, it } from 'vitest';
import { diffSequences, diffText, DiffTooLargeError, splitLines, type DiffRun } from './diff';

/** The naive oracle: LCS length by dynamic programming over the whole N x M table. */
function lcsLength(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let prev = new Int32Array(b.length + 1);
  for (let i = 1; i <= a.length; i++) {
    const row = new Int32Array(b.length + 1);
    for (let j = 1; j <= b.length; j++)
      row[j] = a[i - 1] === b[j - 1] ? prev[j - 1] + 1 : Math.max(prev[j], row[j - 1]);
    prev = row;
  }
  return prev[b.length];
}

/**
 * Applies the script to `a`; every run must stand at its place in order and every kept line
 * must be equal on both sides (plain comparisons: this runs for thousands of cases).
 */
function apply(a: number[], b: number[], runs: DiffRun[]): number[] {
  const out: number[] = [];
  let ai = 0;
  let bi = 0;
  for (const r of runs) {
    if (r.n <= 0 || r.a !== ai || r.b !== bi) throw new Error(`run ${JSON.stringify(r)} out of place at ${ai},${bi}`);
    for (let i = 0; i < r.n; i++) {
      if (r.kind === 'same') {
        if (a[ai] !== b[bi]) throw new Error(`kept lines differ at ${ai},${bi}`);
        out.push(a[ai++]);
        bi++;
      } else if (r.kind === 'del') ai++;
      else out.push(b[bi++]);
    }
  }
  if (ai !== a.length || bi !== b.length) throw new Error(`script ends at ${ai},${bi}`);
  return out;
}

/** A small seeded generator, so a failure names a reproducible case. */
function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

describe('diffSequences', () => {
  it('is a valid and shortest edit script on random inputs (naive LCS oracle)', () => {
    for (let seed = 1; seed <= 3000; seed++) {
      const r = rng(seed);
      const alphabet = 1 + Math.floor(r() * 6);
      const a = Array.from({ length: Math.floor(r() * 40) }, () => Math.floor(r() * alphabet));
      // Half the cases: b is an edit of a (the realistic shape), else unrelated.
      const b =
        seed % 2
          ? a.flatMap((x) => (r() < 0.15 ? [] : r() < 0.15 ? [x, Math.floor(r() * alphabet)] : [x]))
          : Array.from({ length: Math.floor(r() * 40) }, () => Math.floor(r() * alphabet));
      const runs = diffSequences(a, b);
      expect(apply(a, b, runs), `seed ${seed}`).toEqual(b);
      const kept = runs.filter((x) => x.kind === 'same').reduce((n, x) => n + x.n, 0);
      expect(kept, `seed ${seed}: kept lines must be a longest common subsequence`).toBe(lcsLength(a, b));
    }
  });

  it('handles empty sides and identical inputs', () => {
    expect(diffSequences([], [])).toEqual([]);
    expect(diffSequences([1, 2], [])).toEqual([{ kind: 'del', a: 0, b: 0, n: 2 }]);
    expect(diffSequences([], [1, 2])).toEqual([{ kind: 'add', a: 0, b: 0, n: 2 }]);
    expect(diffSequences([1, 2, 3], [1, 2, 3])).toEqual([{ kind: 'same', a: 0, b: 0, n: 3 }]);
  });

  it('is shortest on long inputs with few edits, and fast there', () => {
    const r = rng(7);
    const a = Array.from({ length: 20000 }, () => Math.floor(r() * 5000));
    const b = a.slice();
    for (let i = 0; i < 30; i++) b.splice(Math.floor(r() * b.length), Math.floor(r() * 3), Math.floor(r() * 5000));
    const runs = diffSequences(a, b);
    expect(apply(a, b, runs)).toEqual(b);
    const edits = runs.filter((x) => x.kind !== 'same').reduce((n, x) => n + x.n, 0);
    expect(edits).toBeLessThanOrEqual(90);
  });

  it('gives up past its work bound instead of freezing', () => {
    const a = Array.from({ length: 3000 }, (_, i) => i);
    const b = Array.from({ length: 3000 }, (_, i) => i + 3000);
    expect(() => diffSequences(a, b, 100_000)).toThrow(DiffTooLargeError);
    // Unrelated texts are still fine within the default bound at this size.
    expect(diffSequences(a, b).map((x) => x.kind)).toEqual(['del', 'add']);
  });
});

describe('diffText', () => {
  it('splits lines and remembers the final newline', () => {
    expect(splitLines('')).toEqual({ lines: [], finalNewline: false });
    expect(splitLines('a\nb\n')).toEqual({ lines: ['a', 'b'], finalNewline: true });
    expect(splitLines('a\nb')).toEqual({ lines: ['a', 'b'], finalNewline: false });
  });

  it('cuts the script into unified hunks with context, merging close changes', () => {
    const old = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`);
    const neu = old.slice();
    neu[4] = 'changed 5';
    neu.splice(8, 0, 'inserted after 8');
    neu.splice(26, 1); // line 26 of the old text (index 25 before the insert)
    const d = diffText(old.join('\n') + '\n', neu.join('\n') + '\n');
    expect([d.added, d.removed]).toEqual([2, 2]);
    expect(d.newlineAtEndChanged).toBe(false);
    // Changes at old lines 5 and 8/9 are 3 lines apart (within 2 x 3 context): one hunk.
    expect(d.hunks.map((h) => [h.aStart, h.aCount, h.bStart, h.bCount])).toEqual([
      [2, 10, 2, 11],
      [23, 7, 24, 6],
    ]);
    const first = d.hunks[0].lines.map((l) => (l.kind === 'same' ? ' ' : l.kind === 'del' ? '-' : '+') + l.text);
    expect(first).toEqual([
      ' line 2',
      ' line 3',
      ' line 4',
      '-line 5',
      '+changed 5',
      ' line 6',
      ' line 7',
      ' line 8',
      '+inserted after 8',
      ' line 9',
      ' line 10',
      ' line 11',
    ]);
    for (const h of d.hunks)
      for (const l of h.lines) {
        if (l.aLine) expect(old[l.aLine - 1]).toBe(l.text);
        if (l.bLine) expect(neu[l.bLine - 1]).toBe(l.text);
      }
  });

  it('truncates long output and counts what it left out', () => {
    const old = Array.from({ length: 500 }, (_, i) => `a${i}`).join('\n');
    const neu = Array.from({ length: 500 }, (_, i) => `b${i}`).join('\n');
    const d = diffText(old, neu, { maxLines: 100 });
    expect([d.added, d.removed]).toEqual([500, 500]);
    expect(d.hunks.reduce((n, h) => n + h.lines.length, 0)).toBe(100);
    expect(d.omittedLines).toBe(900);
  });

  it('notices a final newline added or removed', () => {
    const d = diffText('a\nb', 'a\nb\n');
    expect(d.hunks).toEqual([]);
    expect(d.newlineAtEndChanged).toBe(true);
  });
});
