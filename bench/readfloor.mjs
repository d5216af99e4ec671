// What reading a tree of many small files costs the page, before any chunking: headless
// Chromium against a native read of the same files and `borg create` of the same folder, in
// interleaved rounds (medians). It bounds what a backup through the page can reach on small
// files (issue 20's small-files series): a backup must at least learn every file's size and
// read every byte through the browser.
//
// Measured per round, on a fresh page:
// - pick: `DOM.setFileInputFiles` on a `webkitdirectory` input until its `change` event
//   (the browser lists the folder);
// - stat: the first `size` of every File (Chromium fetches each picked file's metadata from
//   the browser process on first use);
// - batched: every byte read as composite Blobs of 64 files, 16 reads in flight (the
//   backup's small-file batches, web/src/backup/backup.ts);
// - per_file: every File's `arrayBuffer()`, 32 in flight;
// - native: `readFileSync` of every file from Node (the same page cache);
// - borg: `borg create --compression zstd,3` of the folder into a new repository (what
//   bench:backup times per version).
//
// Usage: node bench/readfloor.mjs [--folder DIR] [--runs N]
// Default folder: Django 5.2.12's sdist (the small-files series' middle release).
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { pypiVersions } from '../scripts/pypi-versions.mjs';
import { launchCdp } from './cdp.mjs';
import { ROOT, borgRepo, cli, median, now, walk } from './lib.mjs';

const { option } = cli();
const runs = Number(option('runs', 3));
const folder =
  option('folder', null) ??
  pypiVersions('django', 10, path.join(ROOT, 'target', 'datasets'), '5.2.').find((d) => d.endsWith('5.2.12'));
if (!folder) throw new Error('no folder: pass --folder DIR');
const files = walk(folder);
const bytes = files.reduce((n, f) => n + statSync(path.join(folder, f)).size, 0);

/** Page-side steps, each timed in the page; resolves to milliseconds per step. */
async function browserRound() {
  const browser = await launchCdp();
  try {
    const page = await browser.newPage('about:blank');
    await page.evaluate(
      `(() => { const i = document.createElement('input'); i.type = 'file'; i.webkitdirectory = true; i.id = 'pick'; document.body.append(i); return true; })()`,
    );
    const changed = page.evaluate(
      `new Promise((r) => document.getElementById('pick').addEventListener('change', () => r(true), { once: true }))`,
    );
    const t0 = now();
    await page.setInputFiles('#pick', folder);
    await changed;
    const pick = (now() - t0) * 1000;
    return {
      pick,
      ...(await page.evaluate(`(async () => {
        const fs = [...document.getElementById('pick').files];
        const ms = {};
        let t = performance.now();
        let size = 0;
        for (const f of fs) size += f.size;
        ms.stat = performance.now() - t;
        const inFlight = async (items, lanes, read) => {
          let next = 0, total = 0;
          await Promise.all(Array.from({ length: lanes }, async () => {
            while (next < items.length) {
              const n = await read(items[next++]);
              total += n;
            }
          }));
          return total;
        };
        const batches = [];
        for (let i = 0; i < fs.length; i += 64) batches.push(fs.slice(i, i + 64));
        t = performance.now();
        const batched = await inFlight(batches, 16, async (b) => (await new Blob(b).arrayBuffer()).byteLength);
        ms.batched = performance.now() - t;
        t = performance.now();
        const perFile = await inFlight(fs, 32, async (f) => (await f.arrayBuffer()).byteLength);
        ms.per_file = performance.now() - t;
        if (batched !== size || perFile !== size) throw new Error('read ' + batched + ' / ' + perFile + ' of ' + size + ' bytes');
        ms.files = fs.length;
        return ms;
      })()`)),
    };
  } finally {
    await browser.close();
  }
}

function nativeRound() {
  const t0 = now();
  let n = 0;
  for (const f of files) n += readFileSync(path.join(folder, f)).length;
  if (n !== bytes) throw new Error(`native read ${n} of ${bytes} bytes`);
  return (now() - t0) * 1000;
}

function borgRound() {
  const repo = borgRepo('readfloor');
  const t0 = now();
  repo.run(['create', '--compression', 'zstd,3', '::v', '.'], { cwd: folder });
  const ms = (now() - t0) * 1000;
  repo.remove();
  return ms;
}

const rounds = [];
for (let r = 0; r < runs; r++) {
  const b = await browserRound();
  if (b.files !== files.length) throw new Error(`the page picked ${b.files} files, not ${files.length}`);
  const round = { ...b, native: nativeRound(), borg: borgRound() };
  rounds.push(round);
  console.log(
    `round ${r + 1}/${runs}:`,
    ['pick', 'stat', 'batched', 'per_file', 'native', 'borg'].map((k) => `${k} ${round[k].toFixed(0)} ms`).join(', '),
  );
}
const med = (k) => +median(rounds.map((x) => x[k])).toFixed(1);
const out = { folder: path.basename(folder), files: files.length, bytes, runs };
for (const k of ['pick', 'stat', 'batched', 'per_file', 'native', 'borg']) {
  out[`${k}_ms`] = med(k);
  out[`${k}_us_per_file`] = +((med(k) * 1000) / files.length).toFixed(1);
}
// The page's floor for a backup: learn every size, read every byte (batched).
out.page_floor_vs_borg = +((out.stat_ms + out.batched_ms) / out.borg_ms).toFixed(3);
console.log(JSON.stringify(out));
