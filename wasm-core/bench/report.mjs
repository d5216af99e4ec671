// Merges the native ("BENCH {...}" lines), Node and Chromium results; prints a table and,
// as the last line, one JSON object with the headline figures (typescript-10 data).
// Usage: node report.mjs NATIVE_LOG NODE_JSON CHROMIUM_JSON
import fs from 'node:fs';

const [nativeLog, nodeJson, chromeJson] = process.argv.slice(2);
const rows = [];
for (const line of fs.readFileSync(nativeLog, 'utf8').split('\n')) {
  const m = line.match(/^BENCH (\{.*\})$/);
  if (m) rows.push(JSON.parse(m[1]));
}
for (const f of [nodeJson, chromeJson]) {
  if (f && fs.existsSync(f) && fs.statSync(f).size > 0) rows.push(...JSON.parse(fs.readFileSync(f, 'utf8')));
}

const pad = (s, n) => String(s).padEnd(n);
const lpad = (s, n) => String(s).padStart(n);
console.log(`${pad('what', 12)}${pad('where', 15)}${pad('impl / chunker', 38)}${pad('data', 15)}${lpad('MB/s', 8)}  extra`);
for (const r of rows) {
  if (r.what === 'dedup' || r.what === 'rapidcdc' || r.what === 'model') continue;
  const extra = r.chunks !== undefined ? `chunks=${r.chunks}` : '';
  console.log(`${pad(r.what, 12)}${pad(r.where, 15)}${pad(r.impl ?? r.chunker, 38)}${pad(r.data, 15)}${lpad(r.mbps, 8)}  ${extra}`);
}
console.log('');
for (const r of rows.filter((r) => r.what === 'dedup')) {
  console.log(`dedup  ${pad(r.chunker, 34)} typescript-10  ratio ${r.ratio}x  mean chunk ${r.mean_chunk} B  chunks ${r.chunks}`);
}
for (const r of rows.filter((r) => r.what === 'rapidcdc' || r.what === 'model')) {
  const { what, ...rest } = r;
  console.log(`${what}  ${JSON.stringify(rest)}`);
}

const TS = 'typescript-10';
const pick = (f) => rows.find((r) => r.data === TS && f(r));
const mbps = (f) => pick(f)?.mbps ?? null;
const nativeFc = mbps((r) => r.what === 'chunk' && r.where === 'native' && r.chunker.startsWith('fastcdc-crate'));
const chunkWasm = mbps((r) => r.what === 'chunk' && r.where === 'wasm-node' && r.chunker === 'default');
const sha1Wasm = mbps((r) => r.what === 'sha1' && r.where === 'wasm-node' && r.impl === 'ours-multibuffer-simd128');
const hashwasm = mbps((r) => r.what === 'sha1' && r.where === 'wasm-node' && r.impl === 'hash-wasm');
const pipeline = mbps((r) => r.what === 'pipeline' && r.where === 'wasm-node' && r.chunker === 'default');
const defDedup = rows.find((r) => r.what === 'dedup' && r.default);
const fcDedup = rows.find((r) => r.what === 'dedup' && r.chunker === 'fastcdc:2048:8192:65536:1');
const ratio = (a, b) => (a && b ? Number((a / b).toFixed(2)) : null);
const out = {
  fastcdc_native_mbps: nativeFc,
  chunk_wasm_mbps: chunkWasm,
  chunk_wasm_chromium_mbps: mbps((r) => r.what === 'chunk' && r.where === 'wasm-chromium' && r.chunker === 'default'),
  chunk_wasm_vs_native_fastcdc: ratio(chunkWasm, nativeFc),
  sha1_wasm_mbps: sha1Wasm,
  hashwasm_sha1_mbps: hashwasm,
  sha1_wasm_vs_hashwasm: ratio(sha1Wasm, hashwasm),
  pipeline_wasm_mbps: pipeline,
  pipeline_wasm_chromium_mbps: mbps((r) => r.what === 'pipeline' && r.where === 'wasm-chromium' && r.chunker === 'default'),
  crc32_native_crc32fast_mbps: mbps((r) => r.what === 'crc32' && r.where === 'native' && r.impl === 'crc32fast'),
  crc32_wasm_mbps: mbps((r) => r.what === 'crc32' && r.where === 'wasm-node'),
  crc32_wasm_chromium_mbps: mbps((r) => r.what === 'crc32' && r.where === 'wasm-chromium'),
  ...Object.fromEntries(
    ['compress-l3', 'decompress'].flatMap((impl) => {
      const key = `zstd_${impl.replace('-l3', '')}`;
      const at = (where) => mbps((r) => r.what === 'zstd' && r.where === where && r.impl === impl);
      return [
        [`${key}_native_mbps`, at('native')],
        [`${key}_wasm_mbps`, at('wasm-node')],
        [`${key}_wasm_chromium_mbps`, at('wasm-chromium')],
        [`${key}_wasm_vs_native`, ratio(at('wasm-node'), at('native'))],
      ];
    }),
  ),
  dedup_ratio: defDedup ? Number(defDedup.ratio) : null,
  default_chunker: defDedup?.chunker ?? null,
  mean_chunk: defDedup ? Number(defDedup.mean_chunk) : null,
  fastcdc_dedup_ratio: fcDedup ? Number(fcDedup.ratio) : null,
};
console.log(JSON.stringify(out));
