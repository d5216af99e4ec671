// RapidCDC with the fingerprint test, in Wasm (Node), as the backup workers use it: each
// version of a series chunked file by file with ChunkEngine("default") (plain) and with
// ChunkEngine.withHints(previous version's recipes, same path) — 1 MiB blocks, chunk +
// SHA-1, recipes compared (the run fails if any differs). Best of `reps` per version.
//
//   node wasm-core/bench/rapidfpt.mjs WASM_PKG_DIR SERIES_DIR [reps]
//
// WASM_PKG_DIR: a `--target web` build (web/src/wasm-pkg). SERIES_DIR: one folder per
// version (target/datasets/typescript). Prints a table and one JSON line.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { walk } from '../../bench/lib.mjs';

const [pkgDir, series, repsArg] = process.argv.slice(2);
const reps = Number(repsArg ?? 3);
const wasm = await import(pathToFileURL(path.join(pkgDir, 'wasm_core.js')).href);
wasm.initSync({ module: readFileSync(path.join(pkgDir, 'wasm_core_bg.wasm')) });
const { ChunkEngine, RecipeHints } = wasm;
const BLOCK = 1 << 20;

/** Chunks `bytes` with `engine`; { fps (Uint8Array), lengths (number[]) }. */
function chunk(engine, bytes) {
  const fps = [];
  const lengths = [];
  const take = (n) => {
    if (!n) return;
    fps.push(engine.fingerprints());
    lengths.push(...engine.lengths());
  };
  for (let at = 0; at < bytes.length; at += BLOCK) take(engine.push(bytes.subarray(at, at + BLOCK)));
  take(engine.finish());
  const predicted = engine.predicted();
  engine.free();
  return { fps: Buffer.concat(fps), lengths, predicted };
}

const versions = readdirSync(series, { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
const load = (v) => walk(path.join(series, v)).map((p) => ({ path: p, bytes: readFileSync(path.join(series, v, p)) }));

let prev = null;
let prevFiles = load(versions[0]);
prev = prevFiles.map((f) => chunk(new ChunkEngine('default'), f.bytes));
const rows = [];
for (const v of versions.slice(1)) {
  const files = load(v);
  const bytes = files.reduce((n, f) => n + f.bytes.length, 0);
  const hints = new RecipeHints(
    Buffer.concat(prev.map((r) => r.fps)),
    Uint32Array.from(prev.flatMap((r) => r.lengths)),
    Uint32Array.from(prev.map((r) => r.lengths.length)),
  );
  const index = new Map(prevFiles.map((f, i) => [f.path, i]));
  let best = { plain: Infinity, hinted: Infinity };
  let plain = [];
  let predicted = 0;
  for (let r = 0; r < reps; r++) {
    let t = performance.now();
    plain = files.map((f) => chunk(new ChunkEngine('default'), f.bytes));
    best.plain = Math.min(best.plain, performance.now() - t);
    t = performance.now();
    const hinted = files.map((f) => chunk(ChunkEngine.withHints(hints, index.get(f.path) ?? -1), f.bytes));
    best.hinted = Math.min(best.hinted, performance.now() - t);
    hinted.forEach((h, k) => {
      if (!h.fps.equals(plain[k].fps)) throw new Error(`${v}/${files[k].path}: hinted recipe differs from plain`);
    });
    predicted = hinted.reduce((n, h) => n + h.predicted, 0);
  }
  hints.free();
  const chunks = plain.reduce((n, p) => n + p.lengths.length, 0);
  rows.push({ version: v, bytes, chunks, predicted, plainMs: best.plain, hintedMs: best.hinted });
  prev = plain;
  prevFiles = files;
}

const mbps = (b, ms) => b / 1e3 / ms;
console.log(
  'version'.padEnd(12),
  'MB'.padStart(6),
  'predicted'.padStart(14),
  'plain MB/s'.padStart(11),
  'hinted MB/s'.padStart(12),
);
for (const r of rows)
  console.log(
    r.version.padEnd(12),
    (r.bytes / 1e6).toFixed(1).padStart(6),
    `${r.predicted}/${r.chunks}`.padStart(14),
    mbps(r.bytes, r.plainMs).toFixed(0).padStart(11),
    mbps(r.bytes, r.hintedMs).toFixed(0).padStart(12),
  );
const sum = (k) => rows.reduce((n, r) => n + r[k], 0);
console.log(
  JSON.stringify({
    versions: rows.length,
    bytes: sum('bytes'),
    chunks: sum('chunks'),
    predicted: sum('predicted'),
    plain_mbps: +mbps(sum('bytes'), sum('plainMs')).toFixed(0),
    hinted_mbps: +mbps(sum('bytes'), sum('hintedMs')).toFixed(0),
    speedup: +(sum('plainMs') / sum('hintedMs')).toFixed(2),
    recipes_identical: true,
  }),
);
