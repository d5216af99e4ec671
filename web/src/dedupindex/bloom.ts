/**
 * Bloom filter over 20-byte SHA-1 chunk fingerprints (PRUNE §3.1).
 *
 * The filter sits in front of the tablet index: a negative answer proves a chunk
 * was never recorded, so most lookups for new data never touch a tablet or
 * IndexedDB. A positive answer may be false, and then the tablets are searched.
 *
 * Sizing follows the standard analysis the paper restates: for n elements and a
 * target false-positive rate p, m = -n·ln p / (ln 2)² bits and k = (ln 2)·m/n hash
 * functions minimise the rate (≈ (1 - e^{-kn/m})^k).
 *
 * Hashing: SHA-1 output is already uniform, so rather than rehashing we read two
 * 32-bit words straight out of the fingerprint and combine them with double
 * hashing, g_i = h1 + i·h2 (mod m) (Kirsch & Mitzenmacher), which keeps the false
 * positive rate of k independent hashes. Bytes 0..3 are left to the tablets' hash
 * tables (fpset.ts) so the two structures do not share hash bits.
 *
 * Growth: a Bloom filter cannot be resized in place (the original elements are
 * gone). When the element count passes `capacity` the owner builds a bigger one
 * and re-inserts every fingerprint from the tablets (see index.ts).
 */

import { FP_BYTES } from './fpset';

const MAGIC = 0x31464244; // "DBF1" little-endian
const HEADER_BYTES = 32;
const MAX_K = 24;

export function bloomBitsFor(capacity: number, fpRate: number): number {
  const n = Math.max(1, capacity);
  const bits = Math.ceil((-n * Math.log(fpRate)) / (Math.LN2 * Math.LN2));
  // Whole bytes, at least 64 bits; under 2^32 so indexes fit the 32-bit maths below.
  return Math.min(Math.max(64, Math.ceil(bits / 8) * 8), 2 ** 32 - 8);
}

export class BloomFilter {
  /** Number of fingerprints added (duplicates included: the filter cannot tell). */
  count = 0;

  private constructor(
    readonly bits: Uint8Array,
    readonly m: number,
    readonly k: number,
    readonly capacity: number,
    readonly targetFpRate: number,
  ) {}

  /** An empty filter that stays at about `fpRate` false positives for up to `capacity` elements. */
  static create(capacity: number, fpRate: number): BloomFilter {
    if (!(fpRate > 0 && fpRate < 1)) throw new RangeError(`bloom false-positive rate must be in (0,1), got ${fpRate}`);
    const cap = Math.max(1, Math.ceil(capacity));
    const m = bloomBitsFor(cap, fpRate);
    const k = Math.min(MAX_K, Math.max(1, Math.round((Math.LN2 * m) / cap)));
    return new BloomFilter(new Uint8Array(m / 8), m, k, cap, fpRate);
  }

  /** Adds the fingerprint at `fps[off..off+20]`. */
  add(fps: Uint8Array, off = 0): void {
    const m = this.m;
    const h1 = word(fps, off + 4) % m;
    const h2 = word(fps, off + 8) % m || 1;
    let g = h1;
    for (let i = 0; i < this.k; i++) {
      this.bits[g >>> 3] |= 1 << (g & 7);
      g += h2;
      if (g >= m) g -= m;
    }
    this.count++;
  }

  /** False means the fingerprint was certainly never added. */
  mayContain(fps: Uint8Array, off = 0): boolean {
    const m = this.m;
    const h1 = word(fps, off + 4) % m;
    const h2 = word(fps, off + 8) % m || 1;
    let g = h1;
    for (let i = 0; i < this.k; i++) {
      if ((this.bits[g >>> 3] & (1 << (g & 7))) === 0) return false;
      g += h2;
      if (g >= m) g -= m;
    }
    return true;
  }

  /** Adds every fingerprint of a packed buffer. */
  addAll(fps: Uint8Array): void {
    for (let off = 0; off + FP_BYTES <= fps.length; off += FP_BYTES) this.add(fps, off);
  }

  /** Past capacity the false-positive rate climbs above target: time to rebuild bigger. */
  get full(): boolean {
    return this.count > this.capacity;
  }

  /** The rate implied by the current fill, (1 - e^{-kn/m})^k. */
  expectedFpRate(): number {
    return Math.pow(1 - Math.exp((-this.k * this.count) / this.m), this.k);
  }

  /** Header (magic, k, m, capacity, count, target rate) followed by the bit array. */
  toBytes(): Uint8Array {
    const out = new Uint8Array(HEADER_BYTES + this.bits.length);
    const dv = new DataView(out.buffer);
    dv.setUint32(0, MAGIC, true);
    dv.setUint32(4, this.k, true);
    dv.setUint32(8, this.m, true);
    dv.setUint32(12, this.capacity, true);
    dv.setFloat64(16, this.count, true);
    dv.setFloat64(24, this.targetFpRate, true);
    out.set(this.bits, HEADER_BYTES);
    return out;
  }

  static fromBytes(bytes: Uint8Array): BloomFilter {
    if (bytes.length < HEADER_BYTES) throw new Error('bloom filter: truncated header');
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (dv.getUint32(0, true) !== MAGIC) throw new Error('bloom filter: bad magic');
    const k = dv.getUint32(4, true);
    const m = dv.getUint32(8, true);
    const capacity = dv.getUint32(12, true);
    const count = dv.getFloat64(16, true);
    const rate = dv.getFloat64(24, true);
    if (k < 1 || k > MAX_K || m === 0 || m % 8 !== 0 || bytes.length !== HEADER_BYTES + m / 8) {
      throw new Error('bloom filter: inconsistent header');
    }
    const f = new BloomFilter(bytes.slice(HEADER_BYTES), m, k, capacity, rate);
    f.count = count;
    return f;
  }
}

function word(b: Uint8Array, off: number): number {
  return (b[off] | (b[off + 1] << 8) | (b[off + 2] << 16) | (b[off + 3] << 24)) >>> 0;
}
