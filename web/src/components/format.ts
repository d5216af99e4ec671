/** Human-readable numbers for the UI. */
export function bytes(n: number): string {
  if (n < 1000) return `${n} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let v = n;
  let u = -1;
  do {
    v /= 1000;
    u++;
  } while (v >= 1000 && u < units.length - 1);
  return `${v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[u]}`;
}

export function ratio(r: number | null | undefined): string {
  return r == null ? '—' : `${r.toFixed(2)}×`;
}

export function duration(s: number | null): string {
  if (s == null || !isFinite(s)) return '—';
  // Whole seconds first (rounded up, as a time left is), so 59.5 s is "1 min 0 s", not "60 s".
  const whole = Math.ceil(s);
  if (whole < 60) return `${whole} s`;
  return `${Math.floor(whole / 60)} min ${whole % 60} s`;
}

/** What a version's dedup ratio means: the server's `dedup_ratio` (docs/API.md), the one figure shown for it. */
export const DEDUP_RATIO_MEANS =
  'Dedup ratio of a version: its logical bytes divided by the bytes it added to the server (its new chunks, compressed); “—” when it added nothing.';

/** What the dedup ratio of the repository (or of one source's versions) means. */
export const REPO_RATIO_MEANS =
  'Dedup ratio of the repository or of a source: the logical bytes of all its versions divided by the bytes stored for them.';
