/**
 * The tiny-result store of DedupSearch (§3.2) in IndexedDB: one-byte partial matches are kept
 * out of the in-memory result database because the logical phase needs them only next to an
 * `n - 1` partial — a handful of lookups per search. Physical-phase workers write a batch per
 * container; the logical worker reads the few it needs. Records are keyed by search id and
 * fingerprint, so a record of one search is never read by another (records are only valid
 * for their keywords, and another tab may be searching at the same time).
 */
import { openDB, type IDBPDatabase } from 'idb';
import { fpHex, FP_LEN } from '../backup/hex';

const DB_NAME = 'ditto-search';
const STORE = 'tiny';

function open(): Promise<IDBPDatabase> {
  return openDB(DB_NAME, 1, {
    upgrade(db) {
      db.createObjectStore(STORE);
    },
  });
}

export class TinyStore {
  private constructor(
    private db: IDBPDatabase,
    readonly searchId: string,
  ) {}

  static async open(searchId: string): Promise<TinyStore> {
    return new TinyStore(await open(), searchId);
  }

  /**
   * Removes the records of search `searchId` when it ends, and those of searches that
   * started more than an hour ago (a closed tab leaves its records behind). Search ids begin
   * with their start time in ms, so they sort by age; a search running in another tab is
   * left alone.
   */
  static async remove(searchId: string): Promise<void> {
    const db = await open();
    try {
      const tx = db.transaction(STORE, 'readwrite');
      const old = String(Date.now() - 3_600_000);
      await Promise.all([
        tx.store.delete(IDBKeyRange.bound([searchId, ''], [searchId, '\uffff'])),
        tx.store.delete(IDBKeyRange.upperBound([old], true)),
        tx.done,
      ]);
    } finally {
      db.close();
    }
  }

  /** Stores records encoded back to back (`lengths` each; a record starts with its fingerprint). */
  async putAll(records: Uint8Array, lengths: Uint32Array): Promise<void> {
    if (lengths.length === 0) return;
    const tx = this.db.transaction(STORE, 'readwrite');
    let at = 0;
    for (const len of lengths) {
      const rec = records.slice(at, at + len);
      void tx.store.put(rec, [this.searchId, fpHex(rec)]);
      at += len;
    }
    await tx.done;
  }

  /** The records of `fps` (n*20 bytes), `undefined` where a chunk has none. */
  async getMany(fps: Uint8Array): Promise<(Uint8Array | undefined)[]> {
    const tx = this.db.transaction(STORE, 'readonly');
    const n = fps.byteLength / FP_LEN;
    const got = await Promise.all(
      Array.from(
        { length: n },
        (_, k) => tx.store.get([this.searchId, fpHex(fps, k)]) as Promise<Uint8Array | undefined>,
      ),
    );
    await tx.done;
    return got;
  }

  close() {
    this.db.close();
  }
}
