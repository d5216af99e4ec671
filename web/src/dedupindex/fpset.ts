/**
 * An in-memory set of packed 20-byte SHA-1 fingerprints, used as the body of one
 * loaded PRUNE tablet (PRUNE §3.2 keeps each tablet small enough to sit in memory;
 * the paper uses a B+ tree per tablet, we use a hash table because a loaded tablet
 * is only ever probed for membership).
 *
 * Why not `Set<string>`: a tablet of 8192 fingerprints would allocate 8192 strings
 * and every probe another one. Here the fingerprints stay in one packed buffer
 * (which is also exactly what gets persisted) and an open-addressing table of
 * `Uint32Array` slots points into it. SHA-1 output is uniform, so the first four
 * bytes are already a good hash; the Bloom filter uses different bytes (4..12) so
 * the two structures stay independent.
 */

export const FP_BYTES = 20;

function nextPow2(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/** Throws unless `bytes` is a whole number of fingerprints. Returns the count. */
export function fpCount(bytes: Uint8Array): number {
  if (bytes.length % FP_BYTES !== 0) {
    throw new Error(`fingerprint buffer length ${bytes.length} is not a multiple of ${FP_BYTES}`);
  }
  return bytes.length / FP_BYTES;
}

export class FingerprintSet {
  private buf: Uint8Array;
  /** 0 = empty slot, otherwise (index of the fingerprint in `buf`) + 1. */
  private slots: Uint32Array;
  private mask: number;
  private n = 0;

  /** `capacity` is a hint; the set grows past it if needed. */
  constructor(capacity: number) {
    const cap = Math.max(1, capacity);
    this.buf = new Uint8Array(cap * FP_BYTES);
    // Load factor <= 0.5 keeps linear-probe chains short.
    this.slots = new Uint32Array(nextPow2(cap * 2));
    this.mask = this.slots.length - 1;
  }

  /** Builds a set from packed fingerprints (duplicates are dropped). */
  static fromPacked(packed: Uint8Array, capacity = 0): FingerprintSet {
    const n = fpCount(packed);
    const set = new FingerprintSet(Math.max(n, capacity));
    for (let i = 0; i < n; i++) set.add(packed, i * FP_BYTES);
    return set;
  }

  get size(): number {
    return this.n;
  }

  private static hash(src: Uint8Array, off: number): number {
    return (src[off] | (src[off + 1] << 8) | (src[off + 2] << 16) | (src[off + 3] << 24)) >>> 0;
  }

  private equalsAt(idx: number, src: Uint8Array, off: number): boolean {
    const base = idx * FP_BYTES;
    const buf = this.buf;
    for (let j = 0; j < FP_BYTES; j++) if (buf[base + j] !== src[off + j]) return false;
    return true;
  }

  /** Slot holding the fingerprint, or the empty slot where it would go (as -(slot+1)). */
  private find(src: Uint8Array, off: number): number {
    let s = FingerprintSet.hash(src, off) & this.mask;
    for (;;) {
      const v = this.slots[s];
      if (v === 0) return -(s + 1);
      if (this.equalsAt(v - 1, src, off)) return s;
      s = (s + 1) & this.mask;
    }
  }

  has(src: Uint8Array, off: number): boolean {
    return this.find(src, off) >= 0;
  }

  /** Adds the fingerprint at `src[off..off+20]`; false if it was already present. */
  add(src: Uint8Array, off: number): boolean {
    const s = this.find(src, off);
    if (s >= 0) return false;
    if ((this.n + 1) * FP_BYTES > this.buf.length) {
      const bigger = new Uint8Array(this.buf.length * 2);
      bigger.set(this.buf);
      this.buf = bigger;
    }
    this.buf.set(src.subarray(off, off + FP_BYTES), this.n * FP_BYTES);
    this.n++;
    if (this.n * 2 > this.slots.length) {
      this.rehash(this.slots.length * 2);
    } else {
      this.slots[-s - 1] = this.n;
    }
    return true;
  }

  private rehash(size: number): void {
    this.slots = new Uint32Array(size);
    this.mask = size - 1;
    for (let i = 0; i < this.n; i++) {
      let s = FingerprintSet.hash(this.buf, i * FP_BYTES) & this.mask;
      while (this.slots[s] !== 0) s = (s + 1) & this.mask;
      this.slots[s] = i + 1;
    }
  }

  /** Fingerprint `i` in insertion order (a view; copy it if you keep it). */
  at(i: number): Uint8Array {
    return this.buf.subarray(i * FP_BYTES, (i + 1) * FP_BYTES);
  }

  /**
   * A tight copy of the packed fingerprints in insertion order. A copy, not a
   * view: structured clone (IndexedDB put) serialises a view's whole underlying
   * ArrayBuffer, which for a half-full tablet would persist the unused tail too.
   */
  toPacked(): Uint8Array {
    return this.buf.slice(0, this.n * FP_BYTES);
  }

  /** Drops every fingerprint added after the first `n` (used to roll back a failed write). */
  truncate(n: number): void {
    if (n >= this.n) return;
    this.n = n;
    this.rehash(this.slots.length);
  }
}
