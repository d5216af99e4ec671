/** Deterministic pseudo-random fingerprints for tests (xorshift32; SHA-1 output is uniform too). */
export function randomFps(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n * 20);
  let x = seed >>> 0 || 0x9e3779b9;
  for (let i = 0; i < out.length; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x;
    out[i + 1] = x >>> 8;
    out[i + 2] = x >>> 16;
    out[i + 3] = x >>> 24;
  }
  return out;
}

export function fpHex(fps: Uint8Array, i: number): string {
  let s = '';
  for (let j = i * 20; j < i * 20 + 20; j++) s += fps[j].toString(16).padStart(2, '0');
  return s;
}

export function fpSetOf(fps: Uint8Array): Set<string> {
  const s = new Set<string>();
  for (let i = 0; i < fps.length / 20; i++) s.add(fpHex(fps, i));
  return s;
}

/** Concatenates packed fingerprint buffers. */
export function concatFps(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
