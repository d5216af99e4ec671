// What writing a restored folder costs the browser, before any restore work: a dedicated
// worker (as the restore's assembler) writes (b)'s files (the parent folder of the typescript
// releases, as bench:restore's (b)) into a folder of the origin private file system (the
// folder bench:restore's picker stub hands the page) with the File System Access API, as
// web/src/restore/assemble.ts does: directories created once each, up to 16 files at a time,
// each file `getFileHandle({ create: true })`, `createWritable()`, 4 MiB writes, `close()`.
// Against `restic restore` of the same folder in interleaved rounds (medians). It bounds what
// a restore into a folder can reach: `folder_speed_vs_restic` of bench:restore cannot beat
// restic's time over this floor.
//
// Each round, in a browser profile on disk (as bench:restore's folder restores), a fresh page
// per variant:
// - files: every file with its size (zeros);
// - empty: the same files with nothing written (a handle, a writable, a close): the cost per
//   file;
// - one: one file of all the bytes: the cost per byte.
// The CPU every browser thread spent on each (from /proc, as bench:restore) is reported too.
//
// Usage: node bench/folderfloor.mjs [--runs N] [--no-restic]
import http from 'node:http';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  cli,
  cpuSpent,
  dataset,
  launchProfile,
  median,
  resticRepo,
  threadCpu,
  timeResticRestore,
  walk,
} from './lib.mjs';

const { flag, option } = cli();
const runs = Number(option('runs', 3));
if (!(runs >= 1)) throw new Error('--runs must be at least 1');
const parent = path.dirname(dataset('typescript', 10)[0]);
const files = walk(parent).map((f) => [f, statSync(path.join(parent, f)).size]);
const logical = files.reduce((n, [, size]) => n + size, 0);
const IN_FLIGHT = 16;
const BLOCK = 4 << 20;

const WORKER = `
self.onmessage = async (e) => {
  const { files, name, write, inFlight, blockBytes } = e.data;
  const root = await navigator.storage.getDirectory();
  const top = await root.getDirectoryHandle(name, { create: true });
  const dirs = new Map([['', Promise.resolve(top)]]);
  const dir = (p) => {
    let d = dirs.get(p);
    if (!d) {
      const cut = p.lastIndexOf('/');
      d = dir(cut < 0 ? '' : p.slice(0, cut)).then((h) => h.getDirectoryHandle(p.slice(cut + 1), { create: true }));
      dirs.set(p, d);
    }
    return d;
  };
  const block = new Uint8Array(blockBytes);
  const t0 = performance.now();
  const writing = new Set();
  for (const [f, size] of files) {
    while (writing.size >= inFlight) await Promise.race(writing);
    const cut = f.lastIndexOf('/');
    const p = (async () => {
      const d = await dir(cut < 0 ? '' : f.slice(0, cut));
      const w = await (await d.getFileHandle(f.slice(cut + 1), { create: true })).createWritable();
      if (write) for (let at = 0; at < size; at += block.length) await w.write(block.subarray(0, Math.min(block.length, size - at)));
      await w.close();
    })();
    const q = p.finally(() => writing.delete(q));
    writing.add(q);
  }
  await Promise.all(writing);
  const ms = performance.now() - t0;
  await root.removeEntry(name, { recursive: true });
  self.postMessage(ms);
};`;

const site = http
  .createServer((q, r) => {
    r.setHeader('content-type', 'text/html');
    r.end('<!doctype html><title>folder floor</title>');
  })
  .listen(0, '127.0.0.1');
await new Promise((r) => site.once('listening', r));
const origin = `http://127.0.0.1:${site.address().port}`;

const VARIANTS = {
  files: { files, write: true },
  empty: { files, write: false },
  one: { files: [['all-bytes', logical]], write: true },
};

/** One variant on a fresh page of `profile`: seconds from the first file to the last closed, and the CPU spent. */
async function floor(profile, variant, name) {
  const page = await profile.newPage();
  try {
    await page.goto(`${origin}/`);
    const cpu0 = threadCpu();
    const ms = await page.evaluate(
      ({ code, args }) =>
        new Promise((resolve, reject) => {
          const w = new Worker(URL.createObjectURL(new Blob([code], { type: 'text/javascript' })));
          w.onmessage = (e) => resolve(e.data);
          w.onerror = (e) => reject(new Error(e.message));
          w.postMessage(args);
        }),
      { code: WORKER, args: { ...VARIANTS[variant], name, inFlight: IN_FLIGHT, blockBytes: BLOCK } },
    );
    return { seconds: ms / 1000, cpu: cpuSpent(cpu0, threadCpu()) };
  } finally {
    await page.close();
  }
}

const scratch = mkdtempSync(path.join(tmpdir(), 'ditto-folderfloor-'));
const times = { files: [], empty: [], one: [], restic: [] };
const cpu = { files: [], empty: [], one: [] };
const profile = await launchProfile(path.join(scratch, 'profile'));
let repo = null;
try {
  if (!flag('no-restic')) {
    repo = resticRepo('folderfloor');
    repo.backup(parent);
  }
  for (let run = 0; run < runs; run++) {
    for (const v of Object.keys(VARIANTS)) {
      const r = await floor(profile, v, `floor-${run}-${v}`);
      times[v].push(r.seconds);
      cpu[v].push(r.cpu.all);
    }
    if (repo) times.restic.push(timeResticRestore(repo, parent, path.join(scratch, `restic-${run}`)));
    console.log(
      `round ${run + 1}: ${Object.entries(times)
        .map(([k, v]) => `${k} ${v.at(-1)?.toFixed(3) ?? '-'} s${cpu[k] ? ` (CPU ${cpu[k].at(-1)} ms)` : ''}`)
        .join(', ')}`,
    );
  }
} finally {
  await profile.close();
  repo?.remove();
  rmSync(scratch, { recursive: true, force: true });
  site.close();
}
const m = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, v.length ? median(v) : NaN]));
const out = { runs, files: files.length, logical_bytes: logical, in_flight: IN_FLIGHT };
for (const v of Object.keys(VARIANTS)) {
  out[`${v}_seconds`] = +m[v].toFixed(3);
  out[`${v}_cpu_ms`] = median(cpu[v]);
}
out.files_mbps = +(logical / 1e6 / m.files).toFixed(1);
out.cpu_ms_per_file = +(median(cpu.empty) / files.length).toFixed(2);
if (repo) {
  out.restic_restore_seconds = +m.restic.toFixed(3);
  out.files_max_speed_vs_restic = +(m.restic / m.files).toFixed(3);
}
console.log(JSON.stringify(out));
