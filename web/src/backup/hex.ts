/** Fingerprint helpers: 20-byte SHA-1 values packed in Uint8Arrays, hex in JSON. */

export const FP_LEN = 20;

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

export function fpHex(fps: Uint8Array, i = 0): string {
  let s = '';
  for (let j = i * FP_LEN; j < (i + 1) * FP_LEN; j++) s += HEX[fps[j]];
  return s;
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
