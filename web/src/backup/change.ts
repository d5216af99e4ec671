/**
 * Change detection: which picked files may reuse the previous version's recipe unread.
 *
 * A browser gives a file's size and mtime, nothing else (no ctime, no inode), so "same size
 * and mtime" is the only cheap sign of "unchanged", and it is only as good as the mtime. A
 * file is trusted unread only when its size and mtime equal the previous version's **and**
 * the mtime is believable:
 *
 * - not a fixed stamp that tools write instead of the real time: before 1980-01-02 (0, Nix's
 *   1 s, zip/DOS 1980-01-01 in any time zone), npm's 1985-10-26T08:15:00Z;
 * - not shared with another file of the pick (`cp -p`, `tar x`, SOURCE_DATE_EPOCH builds
 *   and the like stamp many files alike, and files written in one millisecond are rare);
 * - not within RACY_MS of the start of the backup that recorded it (a file modified just
 *   after it was read may keep the same mtime on a coarse clock), nor in the future.
 *
 * On top of that a random sample of the files trusted from the previous version is read
 * anyway (`sampleRate`; files an interrupted run of this same job read are not sampled), and
 * `readAll` reads every file: if a sampled file's recipe differs from the previous version's,
 * the mtime lied, and backup.ts reads every trusted file of the source.
 */

/** npm packs every file with this mtime (1985-10-26T08:15:00Z). */
export const NPM_MTIME = 499162500000;
/**
 * Anything before this is a placeholder, not a real modification time: 0, Nix's 1 s, and
 * zip/DOS's earliest date 1980-01-01T00:00:00 read as UTC or as local time (±14 h).
 */
export const PLACEHOLDER_BEFORE = Date.UTC(1980, 0, 2);
/**
 * A file whose mtime is this close to the start of the backup that recorded it may have
 * changed after it was read without its mtime moving (file systems with 1-2 s mtimes).
 */
export const RACY_MS = 2000;
/** Share of the trusted files read anyway on every backup, unless the source says otherwise. */
export const DEFAULT_SAMPLE_RATE = 0.02;

/** Why an mtime cannot vouch for a file, or null when it can. */
export type Distrust = 'fixed stamp' | 'shared' | 'racy' | 'future' | null;

/** Every mtime that two or more of `files` have. */
export function sharedMtimes(files: readonly { file: { lastModified: number } }[]): Set<number> {
  const seen = new Set<number>();
  const shared = new Set<number>();
  for (const { file } of files) {
    if (seen.has(file.lastModified)) shared.add(file.lastModified);
    else seen.add(file.lastModified);
  }
  return shared;
}

export function isFixedStamp(mtime: number): boolean {
  return mtime < PLACEHOLDER_BEFORE || mtime === NPM_MTIME;
}

/**
 * Why `mtime` cannot vouch for a file's content, or null when it can. `shared` comes from
 * sharedMtimes of the pick; `since` is the start of the backup that recorded the file.
 */
export function distrust(mtime: number, shared: ReadonlySet<number>, now: number, since: number | null): Distrust {
  if (isFixedStamp(mtime)) return 'fixed stamp';
  if (shared.has(mtime)) return 'shared';
  if (mtime > now + 24 * 3600_000) return 'future';
  if (since !== null && mtime >= since - RACY_MS) return 'racy';
  return null;
}

/**
 * `k` distinct indices of `0..n` (all of them when k >= n), chosen with `random` (uniform in
 * [0, 1)): a partial Fisher-Yates shuffle.
 */
export function sampleIndices(n: number, k: number, random: () => number): number[] {
  const idx = Array.from({ length: n }, (_, i) => i);
  const take = Math.min(n, Math.max(0, k));
  for (let i = 0; i < take; i++) {
    const j = i + Math.floor(random() * (n - i));
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  return idx.slice(0, take);
}

/** How many of `trusted` files a backup reads anyway: a share, at least one when the share is > 0. */
export function sampleSize(trusted: number, rate: number): number {
  if (!(rate > 0) || trusted === 0) return 0;
  return Math.min(trusted, Math.ceil(trusted * Math.min(1, rate)));
}

/** Uniform in [0, 1) from the platform's cryptographic generator: the product's sampler. */
export function cryptoRandom(): number {
  const v = new Uint32Array(1);
  crypto.getRandomValues(v);
  return v[0] / 2 ** 32;
}

export interface PlanFile<F> {
  path: string;
  file: F;
}

export interface PreviousLike {
  size: number;
  mtime: number;
  /** Start of the backup that recorded it (a manifest's `time`), if known. */
  since: number | null;
  /** False: trusted without being a candidate for the sample (read by this same job). */
  sample?: boolean;
}

export interface Plan<T> {
  /** Same size and believable mtime as before: reuse the recipe unread. */
  trusted: T[];
  /** Same size and mtime as before, picked at random to be read anyway (and compared). */
  sampled: T[];
  /** Same size and mtime as before, but the mtime cannot vouch for the content. */
  distrusted: T[];
  /** New, or size or mtime differ: read. */
  changed: T[];
}

/**
 * Sorts `files` by what the backup does with them. `before(path)` is the previous version's
 * (or an interrupted run's) record of the file, if any.
 */
export function planChanges<T extends PlanFile<{ size: number; lastModified: number }>>(
  files: readonly T[],
  before: (path: string) => PreviousLike | undefined,
  rules: { now: number; sampleRate: number; readAll: boolean; random: () => number },
): Plan<T> {
  const shared = sharedMtimes(files);
  const plan: Plan<T> = { trusted: [], sampled: [], distrusted: [], changed: [] };
  for (const f of files) {
    const b = before(f.path);
    if (!b || b.size !== f.file.size || b.mtime !== f.file.lastModified) plan.changed.push(f);
    else if (distrust(b.mtime, shared, rules.now, b.since) !== null) plan.distrusted.push(f);
    else plan.trusted.push(f);
  }
  if (rules.readAll) {
    plan.sampled = plan.trusted;
    plan.trusted = [];
    return plan;
  }
  const pool = plan.trusted.filter((f) => before(f.path)!.sample !== false);
  const pick = new Set(
    sampleIndices(pool.length, sampleSize(pool.length, rules.sampleRate), rules.random).map((i) => pool[i]),
  );
  plan.sampled = plan.trusted.filter((f) => pick.has(f));
  plan.trusted = plan.trusted.filter((f) => !pick.has(f));
  return plan;
}

/** Whether two packed recipes (20-byte fingerprints) name the same chunks in the same order. */
export function sameRecipe(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
