/**
 * A line diff of two texts: the shortest edit script (fewest lines deleted plus inserted),
 * found with Myers' O(ND) algorithm in its linear-space form, then cut into unified-diff hunks.
 *
 * The algorithm. Lay text A along x and text B along y: a path from (0,0) to (N,M) moves
 * right (delete a line of A), down (insert a line of B) or diagonally where A[x] = B[y]
 * (keep a line, free). The shortest edit script is the path with the fewest non-diagonal
 * moves, D. Myers walks "furthest reaching D-paths": for d = 0, 1, 2, … it records, for each
 * diagonal k = x - y, the largest x any path with d non-diagonal moves reaches on it, each
 * step being one move from diagonal k±1 followed by as many free diagonal moves (a "snake")
 * as match. That costs O((N+M)·D) time. To keep memory linear, the search runs from both
 * ends at once (forward from (0,0), backward from (N,M)) until the two fronts overlap on a
 * diagonal; the overlap point lies on a shortest path, so the problem splits there into two
 * halves, each with about D/2 edits, solved the same way (divide and conquer). Before each
 * split the common first and last lines are peeled off, which is where most of a real diff
 * goes (the unchanged bulk of a file never enters the search).
 *
 * Lines are compared as small integers (each distinct line text gets one), so the inner loop
 * compares numbers, not strings. The work is bounded (`maxWork`): two unrelated large texts
 * would take O(N·M) and freeze the page, so past the bound the diff gives up and says so.
 */

/** A run of lines that are kept, deleted from A or inserted from B, in script order. */
export interface DiffRun {
  kind: 'same' | 'del' | 'add';
  /** First line of the run in A (for 'add': the A position it is inserted at), 0-based. */
  a: number;
  /** First line of the run in B (for 'del': the B position it is deleted at), 0-based. */
  b: number;
  n: number;
}

export class DiffTooLargeError extends Error {}

/** The default bound on the search's steps, low enough that the page stays responsive. */
export const DEFAULT_MAX_WORK = 50_000_000;

/** The shortest edit script turning `a` into `b` (sequences of line numbers, or any ints). */
export function diffSequences(a: ArrayLike<number>, b: ArrayLike<number>, maxWork = DEFAULT_MAX_WORK): DiffRun[] {
  const runs: DiffRun[] = [];
  const emit = (kind: DiffRun['kind'], ai: number, bi: number, n: number) => {
    if (n <= 0) return;
    const last = runs[runs.length - 1];
    if (
      last &&
      last.kind === kind &&
      last.a + (kind === 'add' ? 0 : last.n) === ai &&
      last.b + (kind === 'del' ? 0 : last.n) === bi
    )
      last.n += n;
    else runs.push({ kind, a: ai, b: bi, n });
  };
  let work = 0;
  const spend = (n: number) => {
    work += n;
    if (work > maxWork) throw new DiffTooLargeError('the texts differ too much for a line diff in the page');
  };

  // The scratch vectors of the bisection, sized once for the largest problem.
  const size = 2 * Math.ceil((a.length + b.length) / 2) + 4;
  const v1 = new Int32Array(size);
  const v2 = new Int32Array(size);

  /** Solves A[a0,a1) against B[b0,b1), emitting runs in order. */
  const solve = (a0: number, a1: number, b0: number, b1: number) => {
    let pre = 0;
    while (a0 + pre < a1 && b0 + pre < b1 && a[a0 + pre] === b[b0 + pre]) pre++;
    emit('same', a0, b0, pre);
    a0 += pre;
    b0 += pre;
    let suf = 0;
    while (a1 - suf > a0 && b1 - suf > b0 && a[a1 - 1 - suf] === b[b1 - 1 - suf]) suf++;
    a1 -= suf;
    b1 -= suf;
    spend(pre + suf + 1);
    if (a0 === a1) emit('add', a0, b0, b1 - b0);
    else if (b0 === b1) emit('del', a0, b0, a1 - a0);
    else {
      const split = bisect(a0, a1, b0, b1);
      if (split) {
        solve(a0, split[0], b0, split[1]);
        solve(split[0], a1, split[1], b1);
      } else {
        emit('del', a0, b0, a1 - a0);
        emit('add', a1, b0, b1 - b0);
      }
    }
    emit('same', a1, b1, suf);
  };

  /**
   * A point (x, y) on a shortest path through A[a0,a1) x B[b0,b1) strictly inside it
   * (both texts non-empty, first and last lines differing): where the forward and backward
   * furthest-reaching paths first overlap; null when they never do, which means the two
   * texts have no line in common (delete all, insert all).
   */
  const bisect = (a0: number, a1: number, b0: number, b1: number): [number, number] | null => {
    const n = a1 - a0;
    const m = b1 - b0;
    const maxD = Math.ceil((n + m) / 2);
    const off = maxD + 1;
    const len = 2 * maxD + 4;
    v1.fill(-1, 0, len);
    v2.fill(-1, 0, len);
    v1[off + 1] = 0;
    v2[off + 1] = 0;
    const delta = n - m;
    // With an odd delta the fronts can first meet during a forward step, else a backward one.
    const front = (delta & 1) !== 0;
    // Diagonals whose paths left the grid are dropped from later rounds.
    let k1start = 0;
    let k1end = 0;
    let k2start = 0;
    let k2end = 0;
    for (let d = 0; d < maxD; d++) {
      spend(2 * d + 2);
      for (let k1 = -d + k1start; k1 <= d - k1end; k1 += 2) {
        const i1 = off + k1;
        let x1 = k1 === -d || (k1 !== d && v1[i1 - 1] < v1[i1 + 1]) ? v1[i1 + 1] : v1[i1 - 1] + 1;
        let y1 = x1 - k1;
        const start = x1;
        while (x1 < n && y1 < m && a[a0 + x1] === b[b0 + y1]) (x1++, y1++);
        spend(x1 - start);
        v1[i1] = x1;
        if (x1 > n) k1end += 2;
        else if (y1 > m) k1start += 2;
        else if (front) {
          const i2 = off + delta - k1;
          if (i2 >= 0 && i2 < len && v2[i2] !== -1 && x1 >= n - v2[i2]) return [a0 + x1, b0 + y1];
        }
      }
      for (let k2 = -d + k2start; k2 <= d - k2end; k2 += 2) {
        const i2 = off + k2;
        let x2 = k2 === -d || (k2 !== d && v2[i2 - 1] < v2[i2 + 1]) ? v2[i2 + 1] : v2[i2 - 1] + 1;
        let y2 = x2 - k2;
        const start = x2;
        while (x2 < n && y2 < m && a[a1 - 1 - x2] === b[b1 - 1 - y2]) (x2++, y2++);
        spend(x2 - start);
        v2[i2] = x2;
        if (x2 > n) k2end += 2;
        else if (y2 > m) k2start += 2;
        else if (!front) {
          const i1 = off + delta - k2;
          if (i1 >= 0 && i1 < len && v1[i1] !== -1) {
            const x1 = v1[i1];
            const y1 = off + x1 - i1;
            if (x1 >= n - x2) return [a0 + x1, b0 + y1];
          }
        }
      }
    }
    return null;
  };

  solve(0, a.length, 0, b.length);
  return runs;
}

/** A text split into lines (without their "\n"); whether the last line ended with one. */
export interface Lines {
  lines: string[];
  finalNewline: boolean;
}

export function splitLines(text: string): Lines {
  if (text === '') return { lines: [], finalNewline: false };
  const lines = text.split('\n');
  const finalNewline = lines[lines.length - 1] === '';
  if (finalNewline) lines.pop();
  return { lines, finalNewline };
}

/** Lines as integers, equal integers for equal lines (shared numbering across both texts). */
function numberLines(a: readonly string[], b: readonly string[]): [Int32Array, Int32Array] {
  const ids = new Map<string, number>();
  const num = (lines: readonly string[]) =>
    Int32Array.from(lines, (l) => {
      let id = ids.get(l);
      if (id === undefined) ids.set(l, (id = ids.size));
      return id;
    });
  return [num(a), num(b)];
}

export interface HunkLine {
  kind: 'same' | 'del' | 'add';
  text: string;
  /** 1-based line number in A (same, del) and in B (same, add). */
  aLine?: number;
  bLine?: number;
}

export interface Hunk {
  /** 1-based first line and line count in A and in B, as in a unified diff's "@@" header. */
  aStart: number;
  aCount: number;
  bStart: number;
  bCount: number;
  lines: HunkLine[];
}

export interface TextDiff {
  hunks: Hunk[];
  added: number;
  removed: number;
  /** Hunk lines left out past `maxLines` (the counts above still cover everything). */
  omittedLines: number;
  /** One text ends with a newline and the other does not (otherwise equal last lines). */
  newlineAtEndChanged: boolean;
}

export interface TextDiffOptions {
  /** Unchanged lines shown around each change. */
  context?: number;
  /** At most this many hunk lines are returned. */
  maxLines?: number;
  maxWork?: number;
}

/** A unified line diff of two texts, in hunks with `context` unchanged lines around changes. */
export function diffText(oldText: string, newText: string, opts: TextDiffOptions = {}): TextDiff {
  const context = opts.context ?? 3;
  const maxLines = opts.maxLines ?? Infinity;
  const A = splitLines(oldText);
  const B = splitLines(newText);
  const [a, b] = numberLines(A.lines, B.lines);
  const runs = diffSequences(a, b, opts.maxWork);
  let added = 0;
  let removed = 0;
  for (const r of runs) {
    if (r.kind === 'add') added += r.n;
    if (r.kind === 'del') removed += r.n;
  }

  // Each change with its context; hunks whose contexts touch or overlap merge.
  const hunks: Hunk[] = [];
  let emitted = 0;
  let omitted = 0;
  let cur: Hunk | null = null;
  const push = (line: HunkLine) => {
    if (emitted >= maxLines) return void omitted++;
    cur!.lines.push(line);
    emitted++;
  };
  const sameLines = (aFrom: number, bFrom: number, n: number) => {
    for (let i = 0; i < n; i++)
      push({ kind: 'same', text: A.lines[aFrom + i], aLine: aFrom + i + 1, bLine: bFrom + i + 1 });
  };
  runs.forEach((r, idx) => {
    if (r.kind === 'same') {
      if (!cur) return;
      const last = idx === runs.length - 1;
      if (!last && r.n <= 2 * context) return void sameLines(r.a, r.b, r.n);
      sameLines(r.a, r.b, Math.min(context, r.n));
      cur = null;
      return;
    }
    if (!cur) {
      const prev = runs[idx - 1];
      const lead = prev?.kind === 'same' ? Math.min(context, prev.n) : 0;
      cur = { aStart: r.a - lead + 1, aCount: 0, bStart: r.b - lead + 1, bCount: 0, lines: [] };
      hunks.push(cur);
      sameLines(r.a - lead, r.b - lead, lead);
    }
    for (let i = 0; i < r.n; i++)
      push(
        r.kind === 'del'
          ? { kind: 'del', text: A.lines[r.a + i], aLine: r.a + i + 1 }
          : { kind: 'add', text: B.lines[r.b + i], bLine: r.b + i + 1 },
      );
  });
  // A hunk's extent is that of the lines it shows (a hunk cut by `maxLines` shows fewer).
  for (const h of hunks) {
    const aEnd = h.lines.reduce((e, l) => (l.aLine ? l.aLine : e), h.aStart - 1);
    const bEnd = h.lines.reduce((e, l) => (l.bLine ? l.bLine : e), h.bStart - 1);
    h.aCount = aEnd - h.aStart + 1;
    h.bCount = bEnd - h.bStart + 1;
  }
  return { hunks, added, removed, omittedLines: omitted, newlineAtEndChanged: A.finalNewline !== B.finalNewline };
}
