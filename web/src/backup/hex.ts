/** Fingerprint helpers: 20-byte SHA-1 values packed in Uint8Arrays, hex in JSON. */

export const FP_LEN = 20;

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

export function fpHex(fps: Uint8Array, i = 0): string {
  let s = '';
  for (let j = i * FP_LEN; j < (i + 1) * FP_LEN; j++) s += HEX[fps[j]];
  return s;
}

export function hexToBytes(hex: string, out = new Uint8Array(hex.length / 2), at = 0): Uint8Array {
  for (let i = 0; i < hex.length; i += 2) out[at + i / 2] = parseInt(hex.slice(i, i + 2), 16);
  return out;
}

/** Packs hex fingerprints into n*20 bytes. */
export function packHex(hexes: readonly string[]): Uint8Array {
  const out = new Uint8Array(hexes.length * FP_LEN);
  hexes.forEach((h, i) => hexToBytes(h, out, i * FP_LEN));
  return out;
}
