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

/**
 * Fingerprints interned as dense ids (first reference first), with their locations in typed
 * arrays: the plan's loops then index arrays where they would hash 40-character strings.
 */
class Interned {
  readonly fps: string[] = [];
  readonly locs: ChunkLoc[] = [];
  readonly idOf = new Map<string, number>();
  container!: Float64Array;
  offset!: Float64Array;
  rawLen!: Float64Array;
  storedLen!: Float64Array;

  /** The id of `fp`, located on first sight (undefined when `locate` does not know it). */
  intern(fp: string, locate: (fp: string) => ChunkLoc | undefined): number | undefined {
    let id = this.idOf.get(fp);
    if (id === undefined) {
      const loc = locate(fp);
      if (!loc) return undefined;
      id = this.fps.length;
      this.idOf.set(fp, id);
      this.fps.push(fp);
      this.locs.push(loc);
    }
    return id;
  }

  /** Fills the typed arrays once every fingerprint is interned. */
  seal() {
    const m = this.fps.length;
    this.container = new Float64Array(m);
    this.offset = new Float64Array(m);
    this.rawLen = new Float64Array(m);
    this.storedLen = new Float64Array(m);
    for (let id = 0; id < m; id++) {
      const l = this.locs[id];
      this.container[id] = l.container;
      this.offset[id] = l.offset;
      this.rawLen[id] = l.rawLen;
      this.storedLen[id] = l.storedLen;
    }
  }
}

export function planRestore(
  files: readonly PlanFile[],
  locate: (fp: string) => ChunkLoc | undefined,
  opts: PlanOptions = DEFAULT_PLAN,
  workers = 1,
): RestorePlan {
  const ix = new Interned();
  const refs: string[] = [];
  const refIds: number[] = [];
  const planFiles: RestorePlan['files'] = [];
  for (const f of files) {
    const refStart = refs.length;
    for (const fp of f.recipe) {
      const id = ix.intern(fp, locate);
      if (id === undefined) throw new PlanError(`chunk ${fp} of "${f.name}" is not in any container of the repository`);
      refs.push(fp);
      refIds.push(id);
    }
    planFiles.push({ name: f.name, size: f.size, refStart, refEnd: refs.length });
  }
  ix.seal();
  const n = refs.length;
  const m = ix.fps.length;
  const keyed = workers > 1 && ix.locs.every((l) => l.chainKey !== undefined);
  let turn = 0;
  /** Per chain key, its worker; per worker, the raw bytes sent to it so far. */
  const owner = new Map<number, number>();
  const load = new Array<number>(workers).fill(0);

  // nextUse[i]: the next index after i with the same fingerprint, n if none.
  const nextUse = new Int32Array(n);
  const seenAt = new Int32Array(m).fill(n);
  for (let i = n - 1; i >= 0; i--) {
    nextUse[i] = seenAt[refIds[i]];
    seenAt[refIds[i]] = i;
  }

  const windows: PlanWindow[] = [];
  // The restore cache: its ids, soonest next use first, and per id that next use (-1: not cached).
  let cache: number[] = [];
  const cachedNext = new Int32Array(m).fill(-1);
  /** Per id, the last window (1-based) that referenced it, and its last index there. */
  const inWindow = new Int32Array(m);
  const lastIdx = new Int32Array(m);
  /** Per id, its next use after the window being planned, valid where `nextIn` is the window. */
  const next = new Int32Array(m);
  const nextIn = new Int32Array(m);
  let requests = 0;
  let fetchedChunks = 0;
  let fetchedStoredBytes = 0;
  let containersRead = 0;
  let i = 0;
  while (i < n) {
    const refStart = i;
    const stamp = windows.length + 1;
    const budget = Math.min(opts.windowBytes, opts.firstWindowBytes * 2 ** windows.length);
    const need: number[] = [];
    /** The window's ids in order of first reference. */
    const seen: number[] = [];
    let raw = 0;
    for (; i < n; i++) {
      const id = refIds[i];
      if (inWindow[id] !== stamp) {
        if (cachedNext[id] < 0) {
          const r = ix.rawLen[id];
          if (raw + r > budget && i > refStart) break;
          need.push(id);
          raw += r;
        }
        inWindow[id] = stamp;
        seen.push(id);
      }
      lastIdx[id] = i;
    }
    const refEnd = i;

    const groups: number[][] = Array.from({ length: keyed ? workers : 1 }, () => []);
    for (const id of need) {
      if (!keyed) {
        groups[0].push(id);
        continue;
      }
      const key = ix.locs[id].chainKey!;
      let w = owner.get(key);
      if (w === undefined) {
        w = load.indexOf(Math.min(...load));
        owner.set(key, w);
      }
      load[w] += ix.rawLen[id];
      groups[w].push(id);
    }
    const byGroup = groups.map((group, g) => {
      group.sort((a, b) => ix.container[a] - ix.container[b] || ix.offset[a] - ix.offset[b]);
      const out: FetchRequest[] = [];
      let cur: FetchRequest | null = null;
      for (const id of group) {
        const container = ix.container[id];
        const storedLen = ix.storedLen[id];
        if (
          !cur ||
          (cur.fps.length > 0 && cur.storedBytes + storedLen > opts.requestBytes) ||
          cur.fps.length >= opts.maxFpsPerRequest
        ) {
          cur = { fps: [], storedBytes: 0, rawBytes: 0, containers: [], worker: g };
          out.push(cur);
        }
        cur.fps.push(ix.fps[id]);
        cur.storedBytes += storedLen;
        cur.rawBytes += ix.rawLen[id];
        if (cur.containers[cur.containers.length - 1] !== container) cur.containers.push(container);
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

    // The cache after this window: soonest next use first, within the byte budget. Candidates
    // are what the cache held and what the window referenced, each with its next use after
    // the window; next uses are reference indices, so no two candidates tie.
    const candidates: number[] = [];
    for (const id of cache) {
      next[id] = inWindow[id] === stamp ? nextUse[lastIdx[id]] : cachedNext[id];
      nextIn[id] = stamp;
      candidates.push(id);
      cachedNext[id] = -1;
    }
    for (const id of seen)
      if (nextIn[id] !== stamp) {
        next[id] = nextUse[lastIdx[id]];
        nextIn[id] = stamp;
        candidates.push(id);
      }
    const ordered = candidates.filter((id) => next[id] < n).sort((a, b) => next[a] - next[b]);
    const kept: number[] = [];
    let bytes = 0;
    for (const id of ordered) {
      const r = ix.rawLen[id];
      if (bytes + r > opts.cacheBytes) continue;
      kept.push(id);
      cachedNext[id] = next[id];
      bytes += r;
    }
    cache = kept;
    windows.push({ refStart, refEnd, requests: reqs, keep: kept.map((id) => ix.fps[id]) });
  }

  return {
    refs,
    files: planFiles,
    windows,
    stats: {
      refs: n,
      uniqueChunks: m,
      requests,
      fetchedChunks,
      fetchedStoredBytes,
      containersRead,
      containersMin: new Set(ix.container).size,
      totalBytes: files.reduce((s, f) => s + f.size, 0),
    },
  };
}
