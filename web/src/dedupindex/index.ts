/**
 * The persistent client-side fingerprint index: which chunks the server already
 * stores, so the backup pipeline can skip uploading them. It follows PRUNE's
 * design (Min, Yoon & Won 2011, §3):
 *
 *  - §3.1 an in-memory Bloom filter (bloom.ts) answers most lookups of new data
 *    without touching storage;
 *  - §3.2 fingerprints are stored in insertion order in small tablets
 *    (tablets.ts), one IndexedDB record each, so fingerprints looked up together
 *    are stored together;
 *  - §3.3 tablets are searched through an LRU list with successor prefetching,
 *    with only a few of them in memory.
 *
 * Persistence layout (database `ditto-index:<name>`, one per server + repository):
 *  - `tablets`: `{ id, fps }`, ids 0..T-1 in creation order; append-only except
 *    that the newest tablet is rewritten as it fills;
 *  - `meta/state`: fingerprint count per tablet and a generation id;
 *  - `meta/bloom`: a checkpoint of the Bloom filter plus how many fingerprints
 *    (in insertion order) it covers;
 *  - `meta/epoch`: the server's `gc_epoch` (docs/STORAGE.md) the index was built
 *    under. A prune that deletes chunks moves the epoch, and any fingerprint
 *    recorded before it may name a deleted chunk, so `useEpoch` drops an index
 *    built under another epoch (or under none recorded) before it is trusted.
 *
 * Why checkpoint the Bloom filter instead of rebuilding it on open: rebuilding
 * reads every tablet (20 bytes per chunk ever stored: 2 MB at 100k, 20 MB at 1M)
 * on every page load. A checkpoint makes open read one small record, the newest
 * tablet and at most about one tablet of fingerprints added since the last
 * checkpoint. The checkpoint is only rewritten every `tabletSize` new fingerprints
 * (and on close), not on every add, because it is the largest record (~1.8 KB per
 * 1000 fingerprints at 0.1%). Tablets are append-only, so "covers the first N
 * fingerprints" is enough to catch up exactly. A full rebuild happens only when
 * the checkpoint is missing, from another generation (clear()), built for another
 * false-positive rate, or too small.
 *
 * Correctness direction: `lookup` must never say "stored" for a chunk the server
 * does not have (that would lose data), so only fingerprints the server has
 * acknowledged are added, and writes that fail are rolled back in memory. The
 * opposite error — forgetting a stored chunk (e.g. a relaxed-durability write
 * lost in a crash) — only costs a redundant upload.
 *
 * IndexedDB practice (design/BROWSER-PITFALLS.md §4): each add is one readwrite
 * transaction with all puts issued before anything is awaited; nothing but IDB
 * requests is awaited inside a transaction; `blocking` closes the connection so
 * another tab's upgrade can proceed and the next call reopens; a connection lost
 * under us (Safari) is reopened and the operation retried once; quota failures
 * surface as `IndexQuotaError`. All operations run one at a time through a queue:
 * results of several workers may call in concurrently, and both lookups (LRU
 * moves, tablet loads) and adds mutate the in-memory state.
 */

import { openDB, type DBSchema, type IDBPDatabase } from 'idb';
import { BloomFilter } from './bloom';
import { FP_BYTES, FingerprintSet, fpCount } from './fpset';
import { TabletIndex, emptySearchStats, type SearchStats, type TabletRecord } from './tablets';

export interface ClientIndexStats {
  fingerprints: number;
  tablets: number;
  /** Fingerprints passed to lookup(). */
  lookups: number;
  /** Lookups answered "not stored" by the Bloom filter alone. */
  bloomNegatives: number;
  hits: number;
  /** Bloom filter said "maybe" but no tablet had it. */
  falsePositives: number;
  /** Tablets read from IndexedDB by lookup(). */
  tabletLoads: number;
  /** Average tablets probed per lookup that got past the Bloom filter (PRUNE's locality measure). */
  tabletsExaminedPerLookup: number;
}

export interface ClientIndex {
  /** For n fingerprints packed in `fps` (n*20 bytes): 1 where the index knows the chunk is stored on the server, else 0. Batched; one IndexedDB transaction at most per tablet load. */
  lookup(fps: Uint8Array): Promise<Uint8Array>;
  /** Record fingerprints the server has acknowledged as stored (call only after the ack). Skips ones already present. Batched writes, one readwrite transaction per call. */
  add(fps: Uint8Array): Promise<void>;
  /** Forget everything (e.g. the server lost data / a different server), the recorded epoch too. */
  clear(): Promise<void>;
  /** The server's `gc_epoch` the index was built under; null when none is recorded. */
  epoch(): number | null;
  /**
   * Makes the index fit for the server's current `gc_epoch`: if it holds fingerprints
   * recorded under another epoch (or under none recorded), they are dropped first. Then
   * records `epoch`. Resolves to whether it dropped anything.
   */
  useEpoch(epoch: number): Promise<boolean>;
  /** A random sample of up to n stored fingerprints (n*20 bytes), for validating the index against the server. */
  sample(n: number): Promise<Uint8Array>;
  stats(): ClientIndexStats;
  /**
   * Whether IndexedDB still holds what this instance holds in memory: false once another
   * instance (another tab) added, cleared or moved the epoch since, and then this one must
   * not be written through (reopen it).
   */
  isCurrent(): Promise<boolean>;
  close(): void;
}

export interface ClientIndexOptions {
  /** Fingerprints per tablet (default 8192 = 160 KB). */
  tabletSize?: number;
  /** Tablets kept in memory, the newest included (default 16). */
  cachedTablets?: number;
  /** Target Bloom filter false-positive rate (default 0.001). */
  bloomFpRate?: number;
  /** Another tab holds an older connection open and our open waits for it. */
  onBlocked?: () => void;
}

/** Writing the index failed because the browser's storage quota is exhausted. */
export class IndexQuotaError extends Error {
  constructor(cause: unknown) {
    super(
      'Browser storage is full: the deduplication index could not be saved. Free disk space or allow persistent ' +
        'storage for this site; the backup can continue, but already-uploaded chunks may be uploaded again.',
      { cause },
    );
    this.name = 'IndexQuotaError';
  }
}

const DB_VERSION = 1;
const FORMAT = 1;
const DEFAULT_TABLET_SIZE = 8192;
const DEFAULT_CACHED_TABLETS = 16;
/**
 * 0.1% rather than 1%: a false positive makes lookup() read every tablet that is
 * not in memory before it can answer "not stored", so false positives are far
 * costlier than the 1.5x filter memory (14.4 bits per fingerprint, 1.8 MB at 1M).
 */
const DEFAULT_FP_RATE = 0.001;
/** Initial Bloom capacity; it doubles (rebuilt from the tablets) when exceeded. */
const INITIAL_BLOOM_CAPACITY = 65536;

interface StateRecord {
  kind: 'state';
  format: number;
  generation: string;
  /** Fingerprints in each tablet, by id. */
  lens: number[];
}

interface BloomRecord {
  kind: 'bloom';
  generation: string;
  /** The filter holds the first `covered` fingerprints in insertion order. */
  covered: number;
  bytes: Uint8Array;
}

interface EpochRecord {
  kind: 'epoch';
  epoch: number;
}

interface IndexSchema extends DBSchema {
  tablets: { key: number; value: TabletRecord };
  meta: { key: string; value: StateRecord | BloomRecord | EpochRecord };
}

type Db = IDBPDatabase<IndexSchema>;

function errorName(e: unknown): string {
  return typeof e === 'object' && e !== null && 'name' in e ? String((e as { name: unknown }).name) : '';
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function isQuotaError(e: unknown): boolean {
  return errorName(e) === 'QuotaExceededError' || /quota/i.test(errorMessage(e));
}

/** Connection closed under us: `blocking` closed it, or Safari dropped it. */
function isConnectionLost(e: unknown): boolean {
  return (
    errorName(e) === 'InvalidStateError' ||
    /connection to indexed database server lost|connection is clos|database connection is clos/i.test(errorMessage(e))
  );
}

function newGeneration(): string {
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

class IdbClientIndex implements ClientIndex {
  private db: Db | undefined;
  private closed = false;
  /** close() was called: new calls are refused, queued ones still run. */
  private closing = false;
  private queue: Promise<unknown> = Promise.resolve();
  private tablets!: TabletIndex;
  private bloom!: BloomFilter;
  /** Fingerprints covered by the persisted Bloom checkpoint. */
  private bloomCovered = 0;
  private generation = newGeneration();
  /** The server's gc_epoch the fingerprints were recorded under (meta/epoch). */
  private gcEpoch: number | null = null;
  private lookups = 0;
  private bloomNegatives = 0;
  private search: SearchStats = emptySearchStats();
  private readonly tabletSize: number;
  private readonly cachedTablets: number;
  private readonly fpRate: number;

  constructor(
    private readonly dbName: string,
    private readonly opts: ClientIndexOptions,
  ) {
    this.tabletSize = opts.tabletSize ?? DEFAULT_TABLET_SIZE;
    this.cachedTablets = opts.cachedTablets ?? DEFAULT_CACHED_TABLETS;
    this.fpRate = opts.bloomFpRate ?? DEFAULT_FP_RATE;
    if (!Number.isInteger(this.tabletSize) || this.tabletSize < 1) throw new RangeError('tabletSize must be >= 1');
    if (!Number.isInteger(this.cachedTablets) || this.cachedTablets < 2) {
      throw new RangeError('cachedTablets must be >= 2');
    }
  }

  // ---- connection -------------------------------------------------------

  private async getDb(): Promise<Db> {
    if (this.closed) throw new Error('client index is closed');
    if (this.db) return this.db;
    let db: Db;
    try {
      db = await openDB<IndexSchema>(this.dbName, DB_VERSION, {
        upgrade(up) {
          if (!up.objectStoreNames.contains('tablets')) up.createObjectStore('tablets', { keyPath: 'id' });
          if (!up.objectStoreNames.contains('meta')) up.createObjectStore('meta');
        },
        blocked: () => {
          if (this.opts.onBlocked) this.opts.onBlocked();
          else console.warn(`${this.dbName}: waiting for another tab to close the backup index`);
        },
        // Another tab wants to upgrade: let it. The next call reopens (and, if the
        // schema became newer than ours, fails with a clear VersionError).
        blocking: (_cur, _next, ev) => {
          (ev.target as IDBDatabase).close();
          if (this.db === db) this.db = undefined;
        },
        terminated: () => {
          if (this.db === db) this.db = undefined;
        },
      });
    } catch (e) {
      if (errorName(e) === 'VersionError') {
        throw new Error(`${this.dbName} was upgraded by a newer version of the app; reload this page`, { cause: e });
      }
      throw e;
    }
    this.db = db;
    return db;
  }

  /** Runs `fn` on a connection; if the connection was lost meanwhile, reopens and retries once. */
  private async withDb<T>(fn: (db: Db) => Promise<T>): Promise<T> {
    const db = await this.getDb();
    try {
      return await fn(db);
    } catch (e) {
      if (this.closed || !isConnectionLost(e)) throw e;
      if (this.db === db) this.db = undefined;
      try {
        db.close();
      } catch {
        // already closed
      }
      return fn(await this.getDb());
    }
  }

  private enqueue<T>(op: () => Promise<T>): Promise<T> {
    if (this.closing) return Promise.reject(new Error('client index is closed'));
    const run = this.queue.then(op);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private loadTablet(id: number): Promise<Uint8Array> {
    return this.withDb(async (db) => {
      const rec = await db.get('tablets', id);
      if (!rec) throw new Error(`${this.dbName}: tablet ${id} is missing`);
      return rec.fps;
    });
  }

  /** Calls `visit` for every persisted tablet in id order (one read transaction, cursor-based). */
  private scanTablets(visit: (rec: TabletRecord) => void): Promise<void> {
    return this.withDb(async (db) => {
      const tx = db.transaction('tablets', 'readonly');
      let cursor = await tx.store.openCursor();
      while (cursor) {
        visit(cursor.value);
        cursor = await cursor.continue();
      }
      await tx.done;
    });
  }

  // ---- open ---------------------------------------------------------------

  async init(): Promise<void> {
    const loaded = await this.withDb(async (db) => {
      const tx = db.transaction(['tablets', 'meta'], 'readonly');
      const meta = tx.objectStore('meta');
      const [state, bloom, epoch, count] = await Promise.all([
        meta.get('state'),
        meta.get('bloom'),
        meta.get('epoch'),
        tx.objectStore('tablets').count(),
      ]);
      const lens = state?.kind === 'state' && state.format === FORMAT ? state.lens : [];
      const current = lens.length > 0 ? await tx.objectStore('tablets').get(lens.length - 1) : undefined;
      await tx.done;
      return {
        state: state?.kind === 'state' ? state : undefined,
        bloom: bloom?.kind === 'bloom' ? bloom : undefined,
        epoch: epoch?.kind === 'epoch' ? epoch.epoch : null,
        count,
        lens,
        current,
      };
    });

    let { lens } = loaded;
    let currentFps = loaded.current?.fps;
    let generation = loaded.state?.generation;
    const consistent =
      loaded.count === lens.length && (lens.length === 0 || currentFps?.length === lens[lens.length - 1] * FP_BYTES);
    let stateRepaired = false;
    if (!consistent) {
      // The state record and the tablets disagree (should not happen: they are
      // written in one transaction). Trust the tablets: take the contiguous run of
      // ids from 0 (every fingerprint in a tablet was acknowledged by the server, so
      // adopting one is safe); later ones get overwritten by future appends.
      lens = [];
      let last: Uint8Array | undefined;
      await this.scanTablets((rec) => {
        if (rec.id !== lens.length || rec.fps.length % FP_BYTES !== 0) return;
        lens.push(rec.fps.length / FP_BYTES);
        last = rec.fps;
      });
      currentFps = last;
      generation = undefined;
      stateRepaired = true;
    }
    this.generation = generation ?? newGeneration();
    this.gcEpoch = loaded.epoch;
    this.tablets = new TabletIndex(
      { load: (id) => this.loadTablet(id) },
      this.tabletSize,
      this.cachedTablets,
      lens,
      currentFps,
    );
    const total = this.tablets.total;

    let bloom: BloomFilter | undefined;
    try {
      bloom = loaded.bloom ? BloomFilter.fromBytes(loaded.bloom.bytes) : undefined;
    } catch {
      bloom = undefined;
    }
    const rec = loaded.bloom;
    if (
      bloom &&
      rec &&
      rec.generation === this.generation &&
      bloom.targetFpRate === this.fpRate &&
      rec.covered <= total &&
      total <= bloom.capacity
    ) {
      this.bloom = bloom;
      this.bloomCovered = rec.covered;
      await this.catchUpBloom(rec.covered);
    } else {
      this.bloom = await this.rebuildBloom(Math.max(INITIAL_BLOOM_CAPACITY, 2 * total));
      this.bloomCovered = -1;
    }
    if (stateRepaired || this.bloomCovered !== total) await this.checkpoint();
  }

  /** Adds fingerprints [covered, total) — those appended after the last Bloom checkpoint. */
  private async catchUpBloom(covered: number): Promise<void> {
    const lens = this.tablets.tabletLengths();
    let start = 0;
    for (let id = 0; id < lens.length; id++) {
      const end = start + lens[id];
      if (end > covered) {
        const fps = this.tablets.peek(id)?.toPacked() ?? (await this.loadTablet(id));
        this.bloom.addAll(fps.subarray(Math.max(0, covered - start) * FP_BYTES));
      }
      start = end;
    }
  }

  private async rebuildBloom(capacity: number): Promise<BloomFilter> {
    const bloom = BloomFilter.create(capacity, this.fpRate);
    await this.scanTablets((rec) => bloom.addAll(rec.fps));
    return bloom;
  }

  private stateRecord(): StateRecord {
    return { kind: 'state', format: FORMAT, generation: this.generation, lens: [...this.tablets.tabletLengths()] };
  }

  private bloomRecord(): BloomRecord {
    return { kind: 'bloom', generation: this.generation, covered: this.tablets.total, bytes: this.bloom.toBytes() };
  }

  /** Persists state + Bloom filter (no tablets). */
  private async checkpoint(): Promise<void> {
    const total = this.tablets.total;
    await this.persist([], true);
    this.bloomCovered = total;
  }

  /**
   * One readwrite transaction: every put is issued before anything is awaited, so
   * the transaction cannot auto-commit half-way.
   */
  private persist(records: TabletRecord[], withBloom: boolean): Promise<void> {
    const state = this.stateRecord();
    const bloom = withBloom ? this.bloomRecord() : undefined;
    return this.withDb(async (db) => {
      const tx = db.transaction(['tablets', 'meta'], 'readwrite');
      const tabletStore = tx.objectStore('tablets');
      const meta = tx.objectStore('meta');
      const requests: Promise<unknown>[] = [];
      try {
        for (const r of records) requests.push(tabletStore.put(r));
        requests.push(meta.put(state, 'state'));
        if (bloom) requests.push(meta.put(bloom, 'bloom'));
      } catch (e) {
        // A put that throws synchronously (quota, clone error) must not let the
        // puts already issued commit on their own.
        tx.abort();
        await Promise.allSettled([...requests, tx.done]);
        throw e;
      }
      requests.push(tx.done);
      await Promise.all(requests);
    });
  }

  // ---- API ----------------------------------------------------------------

  lookup(fps: Uint8Array): Promise<Uint8Array> {
    const n = fpCount(fps);
    // Copy now: the caller may reuse or transfer its buffer while we wait in the queue.
    const src = fps.slice();
    return this.enqueue(async () => {
      const out = new Uint8Array(n);
      const candidates: number[] = [];
      for (let i = 0; i < n; i++) {
        if (this.bloom.mayContain(src, i * FP_BYTES)) candidates.push(i);
      }
      this.lookups += n;
      this.bloomNegatives += n - candidates.length;
      if (candidates.length > 0) await this.tablets.search(src, candidates, out, this.search);
      return out;
    });
  }

  add(fps: Uint8Array): Promise<void> {
    const n = fpCount(fps);
    const src = fps.slice();
    return this.enqueue(async () => {
      // Which are already recorded? Not counted in the lookup statistics.
      const present = new Uint8Array(n);
      const candidates: number[] = [];
      for (let i = 0; i < n; i++) if (this.bloom.mayContain(src, i * FP_BYTES)) candidates.push(i);
      if (candidates.length > 0) await this.tablets.search(src, candidates, present, emptySearchStats());
      const seen = new FingerprintSet(Math.min(n, 1 << 16));
      const fresh: number[] = [];
      for (let i = 0; i < n; i++) if (!present[i] && seen.add(src, i * FP_BYTES)) fresh.push(i);
      if (fresh.length === 0) return;

      const before = this.tablets.total;
      const after = before + fresh.length;
      let grew = false;
      if (after > this.bloom.capacity) {
        // Past capacity the false-positive rate climbs quickly; rebuild bigger from
        // the persisted tablets (identical to memory: operations are serialised).
        this.bloom = await this.rebuildBloom(Math.max(2 * this.bloom.capacity, 2 * after));
        grew = true;
      }
      const mark = this.tablets.mark();
      const records = this.tablets.append(src, fresh);
      for (const i of fresh) this.bloom.add(src, i * FP_BYTES);
      const withBloom = grew || after - this.bloomCovered >= this.tabletSize;
      try {
        await this.persist(records, withBloom);
      } catch (e) {
        // Memory must not claim what storage does not hold. The Bloom filter keeps
        // the extra bits: they can only cause false positives, never wrong answers.
        this.tablets.rollback(mark);
        if (isQuotaError(e)) throw new IndexQuotaError(e);
        throw e instanceof Error ? e : new Error(String(e));
      }
      if (withBloom) this.bloomCovered = after;
    });
  }

  clear(): Promise<void> {
    return this.enqueue(() => this.clearNow(null));
  }

  /** Empties the stores and memory, then records `epoch` (in the same transaction) if given. */
  private async clearNow(epoch: number | null): Promise<void> {
    await this.withDb(async (db) => {
      const tx = db.transaction(['tablets', 'meta'], 'readwrite');
      const meta = tx.objectStore('meta');
      const requests: Promise<unknown>[] = [tx.objectStore('tablets').clear(), meta.clear()];
      if (epoch !== null) requests.push(meta.put({ kind: 'epoch', epoch }, 'epoch'));
      requests.push(tx.done);
      await Promise.all(requests);
    });
    this.gcEpoch = epoch;
    this.generation = newGeneration();
    this.tablets = new TabletIndex(
      { load: (id) => this.loadTablet(id) },
      this.tabletSize,
      this.cachedTablets,
      [],
      undefined,
    );
    this.bloom = BloomFilter.create(INITIAL_BLOOM_CAPACITY, this.fpRate);
    this.bloomCovered = 0;
    this.lookups = 0;
    this.bloomNegatives = 0;
    this.search = emptySearchStats();
  }

  epoch(): number | null {
    return this.gcEpoch;
  }

  isCurrent(): Promise<boolean> {
    return this.enqueue(() =>
      this.withDb(async (db) => {
        const tx = db.transaction('meta', 'readonly');
        const [state, epoch] = await Promise.all([tx.store.get('state'), tx.store.get('epoch')]);
        await tx.done;
        const lens = state?.kind === 'state' && state.format === FORMAT ? state.lens : [];
        const total = lens.reduce((a, b) => a + b, 0);
        // No state record: nothing was ever added since the last clear, here or elsewhere.
        const same = state?.kind === 'state' ? state.generation === this.generation : total === 0;
        const recorded = epoch?.kind === 'epoch' ? epoch.epoch : null;
        return same && total === this.tablets.total && recorded === this.gcEpoch;
      }),
    );
  }

  useEpoch(epoch: number): Promise<boolean> {
    if (!Number.isSafeInteger(epoch) || epoch < 0) return Promise.reject(new RangeError(`bad gc_epoch: ${epoch}`));
    return this.enqueue(async () => {
      if (this.gcEpoch === epoch) return false;
      if (this.tablets.total > 0) {
        await this.clearNow(epoch);
        return true;
      }
      await this.withDb(async (db) => {
        const tx = db.transaction('meta', 'readwrite');
        await Promise.all([tx.store.put({ kind: 'epoch', epoch }, 'epoch'), tx.done]);
      });
      this.gcEpoch = epoch;
      return false;
    });
  }

  sample(n: number): Promise<Uint8Array> {
    return this.enqueue(async () => {
      const total = this.tablets.total;
      const k = Math.max(0, Math.min(Math.floor(n), total));
      const picks = pickDistinct(k, total).sort((a, b) => a - b);
      // Map global positions to (tablet, offset); fetch missing tablets in one transaction.
      const lens = this.tablets.tabletLengths();
      const starts: number[] = [];
      let acc = 0;
      for (const len of lens) {
        starts.push(acc);
        acc += len;
      }
      const byTablet = new Map<number, number[]>();
      let id = 0;
      for (const p of picks) {
        while (p >= starts[id] + lens[id]) id++;
        let list = byTablet.get(id);
        if (!list) byTablet.set(id, (list = []));
        list.push(p - starts[id]);
      }
      const bodies = new Map<number, Uint8Array>();
      const missing: number[] = [];
      for (const tid of byTablet.keys()) {
        const set = this.tablets.peek(tid);
        if (set) bodies.set(tid, set.toPacked());
        else missing.push(tid);
      }
      if (missing.length > 0) {
        const recs = await this.withDb(async (db) => {
          const tx = db.transaction('tablets', 'readonly');
          const got = await Promise.all(missing.map((tid) => tx.store.get(tid)));
          await tx.done;
          return got;
        });
        recs.forEach((rec, j) => {
          if (!rec) throw new Error(`${this.dbName}: tablet ${missing[j]} is missing`);
          bodies.set(missing[j], rec.fps);
        });
      }
      const out = new Uint8Array(k * FP_BYTES);
      let o = 0;
      for (const [tid, offsets] of byTablet) {
        const body = bodies.get(tid)!;
        for (const off of offsets) {
          out.set(body.subarray(off * FP_BYTES, (off + 1) * FP_BYTES), o);
          o += FP_BYTES;
        }
      }
      return out;
    });
  }

  stats(): ClientIndexStats {
    const s = this.search;
    return {
      fingerprints: this.tablets.total,
      tablets: this.tablets.tabletCount,
      lookups: this.lookups,
      bloomNegatives: this.bloomNegatives,
      hits: s.hits,
      falsePositives: s.falsePositives,
      tabletLoads: s.tabletLoads,
      tabletsExaminedPerLookup: s.searched > 0 ? s.tabletsExamined / s.searched : 0,
    };
  }

  /** LRU list and loaded tablets, head first (tests and diagnostics). */
  inspect(): { lru: number[]; resident: number[] } {
    return { lru: this.tablets.lruOrder(), resident: this.tablets.residentIds() };
  }

  close(): void {
    if (this.closing) return;
    this.closing = true;
    // Queued operations still run; then save the Bloom filter if it is behind
    // (so the next open need not catch up) and close. IDB's close() itself waits
    // for transactions already started on the connection.
    const finish = async (): Promise<void> => {
      try {
        if (this.db && this.tablets && this.bloomCovered !== this.tablets.total) await this.checkpoint();
      } catch {
        // best effort: the next open catches up from the tablets
      }
      this.closed = true;
      this.db?.close();
      this.db = undefined;
    };
    this.queue = this.queue.then(finish);
  }
}

/** k distinct integers from [0, total), uniformly. */
function pickDistinct(k: number, total: number): number[] {
  if (k === total) return Array.from({ length: total }, (_, i) => i);
  if (k * 4 > total) {
    // Dense: partial Fisher–Yates.
    const all = new Uint32Array(total);
    for (let i = 0; i < total; i++) all[i] = i;
    for (let i = 0; i < k; i++) {
      const j = i + Math.floor(Math.random() * (total - i));
      const t = all[i];
      all[i] = all[j];
      all[j] = t;
    }
    return Array.from(all.subarray(0, k));
  }
  const chosen = new Set<number>();
  while (chosen.size < k) chosen.add(Math.floor(Math.random() * total));
  return [...chosen];
}

/**
 * Opens (creating if needed) the index for one server origin + repository.
 * `name` scopes the IndexedDB database: `ditto-index:${name}`.
 */
export async function openClientIndex(name: string, opts: ClientIndexOptions = {}): Promise<ClientIndex> {
  const index = new IdbClientIndex(`ditto-index:${name}`, opts);
  try {
    await index.init();
  } catch (e) {
    index.close();
    throw e;
  }
  return index;
}

/** The LRU state of an index from `openClientIndex` (diagnostics and tests). */
export function inspectClientIndex(index: ClientIndex): { lru: number[]; resident: number[] } {
  if (!(index instanceof IdbClientIndex)) throw new TypeError('not an index from openClientIndex');
  return index.inspect();
}
