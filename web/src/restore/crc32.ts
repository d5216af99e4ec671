/**
 * CRC-32 helpers for the zip writer. The restore workers compute each chunk's CRC-32 in
 * wasm-core as they verify it; a file's checksum is combined from its chunks' here
 * (zlib's `crc32_combine`, one GF(2) multiplication per chunk whose length was seen
 * before), so the assembler never runs the byte loop itself.
 */

const POLY = 0xedb88320;

/** a(x) * b(x) modulo the CRC polynomial (bit-reflected). */
function multModP(a: number, b: number): number {
  let m = 0x80000000;
  let p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) === 0) break;
    }
    m >>>= 1;
    b = b & 1 ? (b >>> 1) ^ POLY : b >>> 1;
  }
  return p >>> 0;
}

/** X2N[k] = x^(2^k) mod P, for k = 0..63. */
const X2N: number[] = (() => {
  const t = [0x40000000];
  for (let k = 1; k < 64; k++) t.push(multModP(t[k - 1], t[k - 1]));
  return t;
})();

/** x^(8 * len) mod P: the operator that moves a CRC past `len` zero bytes. */
function shiftOf(len: number): number {
  // x^(2^(k+3)) for each set bit k of len.
  let p = 0x80000000;
  let n = len;
  for (let k = 3; n > 0; k++) {
    if (n % 2 === 1) p = multModP(X2N[k], p);
    n = Math.floor(n / 2);
  }
  return p;
}

/**
 * Operators by length: a restore combines tens of thousands of chunks, most of them of lengths
 * seen before (a chunk repeated across files, fixed-size chunks), so each costs one
 * multiplication instead of one per set bit of its length.
 */
const SHIFTS = new Map<number, number>();
const MAX_SHIFTS = 1 << 16;

/** The CRC of A followed by B from crc(A), crc(B) and len(B) (len < 2^53). */
export function crc32Combine(crcA: number, crcB: number, lenB: number): number {
  let p = SHIFTS.get(lenB);
  if (p === undefined) {
    if (SHIFTS.size >= MAX_SHIFTS) SHIFTS.clear();
    p = shiftOf(lenB);
    SHIFTS.set(lenB, p);
  }
  return (multModP(p, crcA) ^ crcB) >>> 0;
}

let TABLE: Uint32Array | null = null;

/** Plain CRC-32 of `data` (the reference the tests compare with; not on the restore path). */
export function crc32(data: Uint8Array, crc = 0): number {
  if (!TABLE) {
    TABLE = new Uint32Array(256);
    for (let i = 0; i < 256; i++) {
      let c = i;
      for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1;
      TABLE[i] = c >>> 0;
    }
  }
  let c = ~crc;
  for (let i = 0; i < data.length; i++) c = TABLE[(c ^ data[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}
