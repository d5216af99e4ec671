/**
 * PRUNE tablets and LRU tablet management (PRUNE §3.2, §3.3).
 *
 * A hash table or B+ tree places fingerprints by value, so fingerprints that are
 * looked up one after another (consecutive chunks of the same files) land far
 * apart. PRUNE instead stores fingerprints in insertion order, which for a backup
 * is lookup order, split into small "tablets": fingerprints of the same region of
 * the same files end up in the same tablet, and the next backup of those files
 * looks them up in nearly the same order.
 *
 * Here a tablet is one IndexedDB record `{ id, fps }` holding up to `tabletSize`
 * packed fingerprints. New fingerprints are appended to the current (newest)
 * tablet; when it is full a new one is started. Loaded tablets become in-memory
 * hash sets (fpset.ts) so a membership probe is O(1).
 *
 * Tablets are kept in an LRU list. A lookup walks the loaded tablets from the head
 * of the list; a hit moves that tablet to the head (temporal locality: the next
 * fingerprint is probably in the same tablet, so it is examined first). With
 * PRUNE's prefetching, the hit tablet's successor — the tablet created right after
 * it, which holds the fingerprints that followed in the previous backup — is moved
 * to the head with it, loading it from IndexedDB if needed, so a backup stepping
 * from one tablet into the next finds it already in memory. Only `cachedTablets`
 * tablets stay in memory; the least recently used loaded tablet is evicted.
 *
 * Batching: the pipeline looks fingerprints up in batches. Each fingerprint first
 * walks the in-memory tablets in LRU order, exactly as above. Fingerprints not
 * found in memory are then resolved together: the remaining tablets are loaded one
 * at a time in LRU-list order (one IndexedDB transaction each) and every pending
 * fingerprint is probed against each, so a tablet is loaded at most once per
 * batch however many fingerprints it resolves. Tablets that produced a hit are
 * promoted (with their successor) as above; tablets that did not are dropped again,
 * so a false positive from the Bloom filter cannot flush the cache.
 */

import { FP_BYTES, FingerprintSet } from './fpset';

/** The IndexedDB record for one tablet. */
export interface TabletRecord {
  id: number;
  /** Packed fingerprints in insertion order, length = n * 20. */
  fps: Uint8Array;
}

/** Where tablets that are not in memory come from (IndexedDB in production). */
export interface TabletSource {
  /** One tablet's packed fingerprints; one read transaction. */
  load(id: number): Promise<Uint8Array>;
}

export interface SearchStats {
  /** Fingerprints that reached the tablets (Bloom filter said "maybe"). */
  searched: number;
  hits: number;
  falsePositives: number;
  tabletLoads: number;
  /** Sum over searched fingerprints of the tablets probed for it. */
  tabletsExamined: number;
}

export function emptySearchStats(): SearchStats {
  return { searched: 0, hits: 0, falsePositives: 0, tabletLoads: 0, tabletsExamined: 0 };
}

interface Tablet {
  id: number;
  set: FingerprintSet;
}

/** Lets a failed persist undo an `append` (see `TabletIndex.rollback`). */
export interface AppendMark {
  readonly tablets: number;
  readonly lastLen: number;
  /** Kept by reference: once it fills up it may be evicted before the rollback. */
  readonly current: Tablet | undefined;
}

export class TabletIndex {
  /** Every tablet id, most recently used first (the PRUNE linked list). */
  private order: number[];
  /** Loaded tablets, most recently used first (a sub-sequence of `order`). */
  private resident: Tablet[];
  private current: Tablet | undefined;
  /** Fingerprint count of each tablet, by id. */
  private lens: number[];

  constructor(
    private readonly source: TabletSource,
    readonly tabletSize: number,
    readonly cachedTablets: number,
    lens: number[],
    /** The newest tablet's fingerprints (it is always kept loaded: appends go there). */
    currentFps: Uint8Array | undefined,
  ) {
    if (!(tabletSize >= 1)) throw new RangeError('tabletSize must be >= 1');
    if (!(cachedTablets >= 2)) throw new RangeError('cachedTablets must be >= 2 (a hit and its prefetched successor)');
    this.lens = [...lens];
    // Before any hit the list is in creation order (PRUNE Fig. 8a, "Linear").
    this.order = lens.map((_, i) => i);
    this.resident = [];
    if (lens.length > 0) {
      if (!currentFps) throw new Error('tablet index: newest tablet missing');
      const t = { id: lens.length - 1, set: FingerprintSet.fromPacked(currentFps, tabletSize) };
      this.current = t;
      this.resident.push(t);
    }
  }

  get tabletCount(): number {
    return this.lens.length;
  }

  get total(): number {
    let s = 0;
    for (const n of this.lens) s += n;
    return s;
  }

  tabletLengths(): readonly number[] {
    return this.lens;
  }

  /** Tablet ids in LRU order, head first. */
  lruOrder(): number[] {
    return [...this.order];
  }

  /** Ids of the loaded tablets in LRU order, head first. */
  residentIds(): number[] {
    return this.resident.map((t) => t.id);
  }

  /** A loaded tablet's fingerprint set, if it is in memory (does not touch the LRU). */
  peek(id: number): FingerprintSet | undefined {
    return this.resident.find((t) => t.id === id)?.set;
  }

  private async loadTablet(id: number, stats: SearchStats): Promise<Tablet> {
    const fps = await this.source.load(id);
    stats.tabletLoads++;
    if (fps.length !== this.lens[id] * FP_BYTES) {
      throw new Error(`tablet ${id}: expected ${this.lens[id]} fingerprints, found ${fps.length / FP_BYTES}`);
    }
    return { id, set: FingerprintSet.fromPacked(fps) };
  }

  /**
   * PRUNE's promotion with prefetching: `hit` and its successor (id + 1) move to
   * the head of the list, both loaded; then the least recently used loaded tablets
   * beyond `cachedTablets` are evicted. `extra` is a tablet the caller already
   * loaded (the successor may be it, or the hit tablet itself).
   * Returns the successor if it had to be loaded (so callers can probe it).
   */
  private async promote(hit: Tablet, stats: SearchStats, loaded?: Map<number, Tablet>): Promise<Tablet | undefined> {
    const succId = hit.id + 1;
    let succ: Tablet | undefined;
    let fresh: Tablet | undefined;
    if (succId < this.lens.length) {
      succ = this.resident.find((t) => t.id === succId) ?? loaded?.get(succId);
      if (!succ) {
        succ = await this.loadTablet(succId, stats);
        fresh = succ;
        loaded?.set(succId, succ);
      }
    }
    const head = succ ? [hit, succ] : [hit];
    const headIds = new Set(head.map((t) => t.id));
    this.order = [...head.map((t) => t.id), ...this.order.filter((id) => !headIds.has(id))];
    this.resident = [...head, ...this.resident.filter((t) => !headIds.has(t.id))];
    this.evict();
    return fresh;
  }

  private evict(): void {
    // From the tail, never the current tablet (appends need it) nor the two just promoted.
    for (let i = this.resident.length - 1; i >= 2 && this.resident.length > this.cachedTablets; i--) {
      if (this.resident[i] !== this.current) this.resident.splice(i, 1);
    }
  }

  /** True when `t` and its successor already head the list (promoting would change nothing). */
  private atHead(t: Tablet): boolean {
    if (this.order[0] !== t.id) return false;
    const succ = t.id + 1;
    return succ >= this.lens.length || (this.order[1] === succ && this.resident[1]?.id === succ);
  }

  /**
   * Resolves the fingerprints at indexes `candidates` of `fps` against all tablets,
   * setting `out[i] = 1` for those found. Updates the LRU list as described above.
   */
  async search(fps: Uint8Array, candidates: readonly number[], out: Uint8Array, stats: SearchStats): Promise<void> {
    stats.searched += candidates.length;
    let pending: number[] = [];
    /** Tablets loaded during this call: each is read from IndexedDB at most once. */
    const loaded = new Map<number, Tablet>();
    // Phase 1: each fingerprint walks the loaded tablets from the LRU head.
    for (const i of candidates) {
      const off = i * FP_BYTES;
      let found: Tablet | undefined;
      for (const t of this.resident) {
        stats.tabletsExamined++;
        if (t.set.has(fps, off)) {
          found = t;
          break;
        }
      }
      if (!found) {
        pending.push(i);
        continue;
      }
      out[i] = 1;
      stats.hits++;
      if (!this.atHead(found)) await this.promote(found, stats, loaded);
    }
    if (pending.length === 0) return;

    // Phase 2. First the successors prefetched during phase 1: they were not in
    // memory when earlier pending fingerprints walked the list. Then every other
    // tablet, in LRU-list order.
    const visited = new Set<number>();
    const queue = [...loaded.keys(), ...this.order];
    const residentIds = new Set(this.resident.map((t) => t.id));
    for (const id of queue) {
      if (pending.length === 0) break;
      if (visited.has(id) || (residentIds.has(id) && !loaded.has(id))) continue;
      visited.add(id);
      let t = loaded.get(id);
      if (!t) {
        t = await this.loadTablet(id, stats);
        loaded.set(id, t);
      }
      // A hit promotes the tablet and prefetches its successor; if the successor
      // (newly loaded) also hits, the same rule applies to it, and so on.
      let cur: Tablet | undefined = t;
      while (cur) {
        const before = pending.length;
        pending = probe(cur, fps, pending, out, stats);
        if (pending.length === before) break;
        const fresh = await this.promote(cur, stats, loaded);
        cur = fresh && !visited.has(fresh.id) ? fresh : undefined;
        if (cur) visited.add(cur.id);
      }
    }
    stats.falsePositives += pending.length;
  }

  /** Marks where the index stands before `append`, for `rollback`. */
  mark(): AppendMark {
    return { tablets: this.lens.length, lastLen: this.lens[this.lens.length - 1] ?? 0, current: this.current };
  }

  /**
   * Appends the fingerprints at `indexes` of `fps` (assumed new) in order, starting
   * new tablets as the current one fills. Returns the records to persist: the
   * current tablet (rewritten whole) and any new ones.
   */
  append(fps: Uint8Array, indexes: readonly number[]): TabletRecord[] {
    const touched = new Set<Tablet>();
    for (const i of indexes) {
      let cur = this.current;
      if (!cur || cur.set.size >= this.tabletSize) {
        cur = { id: this.lens.length, set: new FingerprintSet(this.tabletSize) };
        this.lens.push(0);
        this.current = cur;
        // A new tablet holds what was just looked up and missed: most recent.
        this.order.unshift(cur.id);
        this.resident.unshift(cur);
        this.evict();
      }
      if (cur.set.add(fps, i * FP_BYTES)) this.lens[cur.id]++;
      touched.add(cur);
    }
    return [...touched].map((t) => ({ id: t.id, fps: t.set.toPacked() }));
  }

  /** Undoes everything appended since `mark` (the write that would persist it failed). */
  rollback(mark: AppendMark): void {
    const gone = new Set<number>();
    for (let id = mark.tablets; id < this.lens.length; id++) gone.add(id);
    this.lens.length = mark.tablets;
    this.order = this.order.filter((id) => !gone.has(id));
    this.resident = this.resident.filter((t) => !gone.has(t.id));
    if (mark.tablets === 0) {
      this.current = undefined;
      return;
    }
    const last = mark.current;
    if (!last) throw new Error('tablet index: rollback without a current tablet');
    this.lens[last.id] = mark.lastLen;
    last.set.truncate(mark.lastLen);
    this.current = last;
    if (!this.resident.includes(last)) {
      this.resident.unshift(last);
      this.evict();
    }
  }
}

function probe(t: Tablet, fps: Uint8Array, pending: readonly number[], out: Uint8Array, stats: SearchStats): number[] {
  const still: number[] = [];
  for (const i of pending) {
    stats.tabletsExamined++;
    if (t.set.has(fps, i * FP_BYTES)) {
      out[i] = 1;
      stats.hits++;
    } else {
      still.push(i);
    }
  }
  return still;
}
