/** Fingerprint helpers: 20-byte SHA-1 values packed in Uint8Arrays, hex in JSON. */

export const FP_LEN = 20;

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

export function fpHex(fps: Uint8Array, i = 0): string {
  let s = '';
  for (let j = i * FP_LEN; j < (i + 1) * FP_LEN; j++) s += HEX[fps[j]];
  return s;
}

/** Per byte b, its two hex digits' char codes at 2b and 2b + 1. */
const HEX_CODES = Uint8Array.from({ length: 512 }, (_, i) => {
  const v = i & 1 ? (i >> 1) & 15 : i >> 5;
  return v < 10 ? 48 + v : 87 + v;
});
const LATIN1 = new TextDecoder('latin1');

/**
 * The `count` fingerprints packed in `bytes`, as hex: one
 * string decoded at once and cut into slices, not 20 concatenations per fingerprint (a
 * restore's chunk locations are thousands of them, decoded before anything is fetched).
 */
export function fpHexes(bytes: Uint8Array, count: number): string[] {
  const chars = new Uint8Array(count * 2 * FP_LEN);
  for (let k = 0, o = 0; k < count; k++)
    for (let j = k * FP_LEN, end = j + FP_LEN; j < end; j++) {
      const b = bytes[j] << 1;
      chars[o++] = HEX_CODES[b];
      chars[o++] = HEX_CODES[b + 1];
    }
  const all = LATIN1.decode(chars);
  return Array.from({ length: count }, (_, k) => all.slice(k * 2 * FP_LEN, (k + 1) * 2 * FP_LEN));
}

/** Value of one hex digit's char code (0-9, a-f, A-F); -1 for anything else. */
function nibble(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const l = c | 32;
  return l >= 97 && l <= 102 ? l - 87 : -1;
}

/**
 * Decodes hex into `out` at `at`. Char codes, not parseInt per byte: planning a backup
 * decodes every fingerprint of the previous version (~50 000 bytes per typescript release).
 */
export function hexToBytes(hex: string, out = new Uint8Array(hex.length / 2), at = 0): Uint8Array {
  for (let i = 0; i < hex.length; i += 2) {
    const hi = nibble(hex.charCodeAt(i));
    const lo = nibble(hex.charCodeAt(i + 1));
    if (hi < 0 || lo < 0) throw new Error(`not hex: ${JSON.stringify(hex)}`);
    out[at + i / 2] = (hi << 4) | lo;
  }
  return out;
}

/** Packs hex fingerprints into n*20 bytes. */
export function packHex(hexes: readonly string[]): Uint8Array {
  const out = new Uint8Array(hexes.length * FP_LEN);
  hexes.forEach((h, i) => hexToBytes(h, out, i * FP_LEN));
  return out;
}
