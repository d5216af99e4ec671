// Shared Wasm benchmark body, run under Node and in headless Chromium on the same bytes.
// `core` is the wasm-bindgen module (nodejs or web target); `datasets` maps a name to a
// Uint8Array; `hashers` optionally holds { hashwasm: createSHA1 } and { nodeSha1(buf) }.
// Returns an array of { what, where, impl|chunker, data, mbps, chunks? } records.

export const CHUNKERS = [['fastcdc', 2048, 8192, 65536, 1], ['inck', 2048, 8192, 65536, 0], ['default']];

function now() {
  return globalThis.performance.now();
}

function best(reps, bytes, fn) {
  let t = Infinity;
  let r;
  for (let i = 0; i < reps; i++) {
    const s = now();
    r = fn();
    t = Math.min(t, now() - s);
  }
  return { mbps: bytes / (t / 1000) / 1e6, result: r };
}

function toWasm(core, bytes) {
  const b = new core.ByteBuffer(bytes.length);
  new Uint8Array(core.wasmMemory().buffer, b.ptr(), bytes.length).set(bytes);
  return b;
}

export async function runCoreBench(core, datasets, { where, reps = 3, hashers = {}, log = () => {} }) {
  const out = [];
  const rec = (r) => {
    out.push({ where, ...r });
    log(JSON.stringify(out[out.length - 1]));
  };
  // Warm up every path on a small buffer first so V8 tiers up before timing (FINDINGS:
  // a long first call can stay in the baseline compiler).
  const warm = toWasm(
    core,
    new Uint8Array(1 << 20).map((_, i) => (i * 2654435761) >>> 13),
  );
  for (const c of CHUNKERS) core.benchChunk(warm, ...c);
  core.benchPipeline(warm, 1 << 20, 'default');
  for (const impl of ['fingerprint', 'sha1-multi', 'sha1-crate']) {
    core.benchSha1(warm, new Uint32Array([0, 9000]), new Uint32Array([8000, 8000]), impl);
  }
  warm.free();

  for (const [name, bytes] of Object.entries(datasets)) {
    const buf = toWasm(core, bytes);
    for (const c of CHUNKERS) {
      const { mbps, result } = best(reps, bytes.length, () => core.benchChunk(buf, ...c));
      rec({ what: 'chunk', chunker: c.join(':'), data: name, mbps: Math.round(mbps), chunks: result });
    }
    // Chunks of the 8K FastCDC for every SHA-1 contender (mean ~9.6 KB on text).
    const eng = new core.ChunkEngine('fastcdc', 2048, 8192, 65536, 1);
    const offs = [];
    const lens = [];
    const step = 4 << 20;
    for (let p = 0; p < bytes.length; p += step) {
      if (eng.push(bytes.subarray(p, Math.min(p + step, bytes.length))) > 0) {
        offs.push(...eng.offsets());
        lens.push(...eng.lengths());
      }
    }
    if (eng.finish() > 0) {
      offs.push(...eng.offsets());
      lens.push(...eng.lengths());
    }
    eng.free();
    const o32 = new Uint32Array(offs);
    const l32 = new Uint32Array(lens);
    for (const [impl, which] of [
      ['fingerprint-sha1-checked', 'fingerprint'],
      ['ours-multibuffer-simd128', 'sha1-multi'],
      ['sha1-crate-scalar', 'sha1-crate'],
    ]) {
      const { mbps } = best(reps, bytes.length, () => core.benchSha1(buf, o32, l32, which));
      rec({ what: 'sha1', impl, data: name, mbps: Math.round(mbps) });
    }
    if (hashers.hashwasm) {
      const h = await hashers.hashwasm();
      const { mbps } = best(reps, bytes.length, () => {
        let x = 0;
        for (let i = 0; i < o32.length; i++) {
          h.init();
          h.update(bytes.subarray(o32[i], o32[i] + l32[i]));
          x ^= h.digest('binary')[0];
        }
        return x;
      });
      rec({ what: 'sha1', impl: 'hash-wasm', data: name, mbps: Math.round(mbps) });
    }
    if (hashers.nodeSha1) {
      const { mbps } = best(reps, bytes.length, () => {
        let x = 0;
        for (let i = 0; i < o32.length; i++) x ^= hashers.nodeSha1(bytes.subarray(o32[i], o32[i] + l32[i]))[0];
        return x;
      });
      rec({ what: 'sha1', impl: 'node-crypto', data: name, mbps: Math.round(mbps) });
    }
    {
      const { mbps } = best(reps, bytes.length, () => core.benchCrc32(buf, o32, l32));
      rec({ what: 'crc32', impl: 'slicing-by-16', data: name, mbps: Math.round(mbps) });
    }
    // zstd at the backup's level 3, chunk by chunk over the same 8K FastCDC chunks: what a
    // backup pays to compress and a restore or a search to decompress.
    {
      const z = new core.ZstdBench(3);
      z.compress(buf, o32.subarray(0, 64), l32.subarray(0, 64));
      z.decompress();
      const c = best(reps, bytes.length, () => z.compress(buf, o32, l32));
      rec({ what: 'zstd', impl: 'compress-l3', data: name, mbps: Math.round(c.mbps), stored: c.result });
      const d = best(reps, bytes.length, () => z.decompress());
      rec({ what: 'zstd', impl: 'decompress', data: name, mbps: Math.round(d.mbps) });
      z.free();
    }
    for (const c of [['default'], ['fastcdc', 2048, 8192, 65536, 1]]) {
      const { mbps, result } = best(reps, bytes.length, () => core.benchPipeline(buf, 1 << 20, ...c));
      rec({ what: 'pipeline', chunker: c.join(':'), data: name, mbps: Math.round(mbps), chunks: result });
    }
    // The workers' hybrid: lookup keys for all chunks, fingerprints for those confirmed
    // (every chunk of a first backup; about one in three of typescript-10's in all).
    for (const every of [1, 3]) {
      const { mbps } = best(reps, bytes.length, () =>
        core.benchPipeline(buf, 1 << 20, 'default', undefined, undefined, undefined, undefined, every),
      );
      rec({ what: 'pipeline', chunker: `default+confirm1/${every}`, data: name, mbps: Math.round(mbps) });
    }
    // The same pipeline through the public ChunkEngine API from JS (copies included).
    {
      const { mbps } = best(reps, bytes.length, () => {
        const e = new core.ChunkEngine('default');
        let n = 0;
        for (let p = 0; p < bytes.length; p += 1 << 20) {
          n += e.push(bytes.subarray(p, Math.min(p + (1 << 20), bytes.length)));
          e.fingerprints();
          e.lengths();
          e.offsets();
        }
        n += e.finish();
        e.free();
        return n;
      });
      rec({ what: 'pipeline-js', chunker: 'default', data: name, mbps: Math.round(mbps) });
    }
    buf.free();
  }
  return out;
}
