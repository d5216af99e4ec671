/**
 * The read plan of a restore: which chunks to fetch, in which requests, and which to keep.
 *
 * All chunk references of the restored files, in zip order, form one sequence. It is cut into
 * windows (forward assembly, as in destor): a window holds at most `windowBytes` of raw chunk
 * data that is not already cached, the first `firstWindowBytes`, each next one twice the one
 * before until `windowBytes` (the output starts once the first window is verified, so it is
 * small). The distinct chunks a window needs and the cache lacks are fetched in requests of
 * about `requestBytes` stored bytes, ordered by container and offset so the server reads each
 * container sequentially and once per request. After a window, a restore cache of at most
 * `cacheBytes` keeps the chunks whose next use comes soonest (Belady's rule: the plan knows the
 * future), so a chunk repeated across files is not fetched again.
 *
 * Requests go to fixed workers (each verifies what it is sent and keeps the base chains its
 * answers carried). A window's chunks are split between the workers by chain key (docs/API.md,
 * `versions/{id}/locations`): a key stays with the worker it first went to, so the links its
 * chunks decode through are fetched and decoded by that worker only, and a key seen for the
 * first time goes to the worker with the fewest raw bytes so far, so both verify at once.
 * Without keys (an older server) requests take turns.
 *
 * The plan is a pure function of its input, so the executor and the tests see the same thing.
 */

export interface ChunkLoc {
  container: number;
  offset: number;
  storedLen: number;
  rawLen: number;
  /**
   * The chunk's chain key (docs/API.md): chunks with the same key decode through the same
   * links, apart from links most of the version shares.
   */
  chainKey?: number;
}

export interface PlanFile {
  name: string;
  size: number;
  recipe: readonly string[];
}

export interface PlanOptions {
  windowBytes: number;
  /** The first window's budget (doubled per window up to `windowBytes`). */
  firstWindowBytes: number;
  requestBytes: number;
  cacheBytes: number;
  /** At most this many fingerprints in one `chunks/get` (the server takes 65 536). */
  maxFpsPerRequest: number;
}

export const DEFAULT_PLAN: PlanOptions = {
  windowBytes: 16 << 20,
  firstWindowBytes: 4 << 20,
  // Stored bytes: at ~3.8x compression a 16 MiB window is ~4 MB stored, so 2 MiB makes two or
  // more requests per window, verified by both restore workers at once (6 MiB made one).
  requestBytes: 2 << 20,
  cacheBytes: 32 << 20,
  maxFpsPerRequest: 16384,
};

export interface FetchRequest {
  fps: string[];
  storedBytes: number;
  rawBytes: number;
  /** Distinct containers this request reads. */
  containers: number[];
  /** The worker that verifies it (0 .. workers - 1). */
  worker: number;
}

export interface PlanWindow {
  /** References [refStart, refEnd) of the sequence are assembled from this window. */
  refStart: number;
  refEnd: number;
  requests: FetchRequest[];
  /** Fingerprints kept in the restore cache after this window. */
  keep: string[];
}

export interface RestorePlan {
  refs: string[];
  files: { name: string; size: number; refStart: number; refEnd: number }[];
  windows: PlanWindow[];
  stats: {
    refs: number;
    uniqueChunks: number;
    requests: number;
    fetchedChunks: number;
    fetchedStoredBytes: number;
    /** Sum over requests of the containers each one reads. */
    containersRead: number;
    /** The fewest containers that hold all chunks (distinct containers referenced). */
    containersMin: number;
    totalBytes: number;
  };
}

export class PlanError extends Error {}

export function planRestore(
  files: readonly PlanFile[],
  locate: (fp: string) => ChunkLoc | undefined,
  opts: PlanOptions = DEFAULT_PLAN,
  workers = 1,
): RestorePlan {
  const refs: string[] = [];
  const planFiles: RestorePlan['files'] = [];
  const locs = new Map<string, ChunkLoc>();
  for (const f of files) {
    const refStart = refs.length;
    for (const fp of f.recipe) {
      if (!locs.has(fp)) {
        const loc = locate(fp);
        if (!loc) throw new PlanError(`chunk ${fp} of "${f.name}" is not in any container of the repository`);
        locs.set(fp, loc);
      }
      refs.push(fp);
    }
    planFiles.push({ name: f.name, size: f.size, refStart, refEnd: refs.length });
  }
  const n = refs.length;
  const keyed = workers > 1 && [...locs.values()].every((l) => l.chainKey !== undefined);
  let turn = 0;
  /** Per chain key, its worker; per worker, the raw bytes sent to it so far. */
  const owner = new Map<number, number>();
  const load = new Array<number>(workers).fill(0);

  // nextUse[i]: the next index after i with the same fingerprint, n if none.
  const nextUse = new Int32Array(n);
  const seen = new Map<string, number>();
  for (let i = n - 1; i >= 0; i--) {
    nextUse[i] = seen.get(refs[i]) ?? n;
    seen.set(refs[i], i);
  }

  const windows: PlanWindow[] = [];
  let cache = new Map<string, number>(); // fp -> next use
  let requests = 0;
  let fetchedChunks = 0;
  let fetchedStoredBytes = 0;
  let containersRead = 0;
  let i = 0;
  while (i < n) {
    const refStart = i;
    const budget = Math.min(opts.windowBytes, opts.firstWindowBytes * 2 ** windows.length);
    const need: string[] = [];
    const inWindow = new Set<string>();
    const lastIdx = new Map<string, number>();
    let raw = 0;
    for (; i < n; i++) {
      const fp = refs[i];
      if (!inWindow.has(fp) && !cache.has(fp)) {
        const r = locs.get(fp)!.rawLen;
        if (raw + r > budget && i > refStart) break;
        inWindow.add(fp);
        need.push(fp);
        raw += r;
      }
      lastIdx.set(fp, i);
    }
    const refEnd = i;

    const groups: string[][] = Array.from({ length: keyed ? workers : 1 }, () => []);
    for (const fp of need) {
      if (!keyed) {
        groups[0].push(fp);
        continue;
      }
      const loc = locs.get(fp)!;
      let w = owner.get(loc.chainKey!);
      if (w === undefined) {
        w = load.indexOf(Math.min(...load));
        owner.set(loc.chainKey!, w);
      }
      load[w] += loc.rawLen;
      groups[w].push(fp);
    }
    const byGroup = groups.map((group, g) => {
      group.sort((a, b) => {
        const x = locs.get(a)!;
        const y = locs.get(b)!;
        return x.container - y.container || x.offset - y.offset;
      });
      const out: FetchRequest[] = [];
      let cur: FetchRequest | null = null;
      for (const fp of group) {
        const loc = locs.get(fp)!;
        if (
          !cur ||
          (cur.fps.length > 0 && cur.storedBytes + loc.storedLen > opts.requestBytes) ||
          cur.fps.length >= opts.maxFpsPerRequest
        ) {
          cur = { fps: [], storedBytes: 0, rawBytes: 0, containers: [], worker: g };
          out.push(cur);
        }
        cur.fps.push(fp);
        cur.storedBytes += loc.storedLen;
        cur.rawBytes += loc.rawLen;
        if (cur.containers[cur.containers.length - 1] !== loc.container) cur.containers.push(loc.container);
      }
      return out;
    });
    // The workers' requests taking turns, so both start on the window at once.
    const reqs: FetchRequest[] = [];
    for (let k = 0; byGroup.some((g) => k < g.length); k++) for (const g of byGroup) if (k < g.length) reqs.push(g[k]);
    if (!keyed) for (const r of reqs) r.worker = turn++ % workers;
    for (const r of reqs) containersRead += r.containers.length;
    requests += reqs.length;
    fetchedChunks += need.length;
    fetchedStoredBytes += reqs.reduce((s, r) => s + r.storedBytes, 0);

    // The cache after this window: soonest next use first, within the byte budget.
    const candidates = new Map(cache);
    for (const [fp, idx] of lastIdx) candidates.set(fp, nextUse[idx]);
    const ordered = [...candidates].filter(([, next]) => next < n).sort((a, b) => a[1] - b[1]);
    const kept = new Map<string, number>();
    let bytes = 0;
    for (const [fp, next] of ordered) {
      const r = locs.get(fp)!.rawLen;
      if (bytes + r > opts.cacheBytes) continue;
      kept.set(fp, next);
      bytes += r;
    }
    cache = kept;
    windows.push({ refStart, refEnd, requests: reqs, keep: [...kept.keys()] });
  }

  return {
    refs,
    files: planFiles,
    windows,
    stats: {
      refs: n,
      uniqueChunks: locs.size,
      requests,
      fetchedChunks,
      fetchedStoredBytes,
      containersRead,
      containersMin: new Set([...locs.values()].map((l) => l.container)).size,
      totalBytes: files.reduce((s, f) => s + f.size, 0),
    },
  };
}
