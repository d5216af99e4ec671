/**
 * The restore plan written plainly, over fingerprint strings: the oracle the tests hold
 * [`planRestore`] (plan.ts, which interns the fingerprints for speed) to, plan for plan.
 */
import {
  PlanError,
  type ChunkLoc,
  type PlanFile,
  type PlanOptions,
  type PlanWindow,
  type RestorePlan,
  DEFAULT_PLAN,
  type FetchRequest,
} from './plan';

export function referencePlan(
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
