// Restore over an emulated internet link (issue 17: a restore of delta chunks moves their
// stored bytes, not their raw bytes). typescript-10 and their parent folder are backed up
// through the UI as `bench/restore.mjs` does, the delta pass and the mover are waited for,
// then (a) the largest release and (b) the parent folder are restored as a zip (Blob
// download) with the page's network throttled by Chromium's emulation to --mbit Mbit/s and
// --rtt ms, --runs times each. With `DITTO_WEB_DIR_B` set to another build of web/dist, the
// same server and data directory serve each build in turn (the server restarted between
// them), rounds interleaved, so the two builds compare on the same repository.
//
// Usage: node bench/link.mjs [--package P] [--count N] [--runs N] [--mbit M] [--rtt MS]
// Prints a table (medians), then one JSON line.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  backupFolders,
  cli,
  dataset,
  du,
  launchBrowser,
  median,
  openApp,
  restoreZip,
  settle,
  startServer,
  ROOT,
} from './lib.mjs';

const { option } = cli();
const pkg = option('package', 'typescript');
const count = Number(option('count', 10));
const runs = Number(option('runs', 3));
const link = { mbit: Number(option('mbit', 100)), rttMs: Number(option('rtt', 20)) };
if (!(runs >= 1) || !(link.mbit > 0) || !(link.rttMs >= 0)) throw new Error('bad --runs, --mbit or --rtt');

const versions = dataset(pkg, count);
const largest = versions.reduce((a, b) => (du(b) > du(a) ? b : a));
const parent = path.dirname(versions[0]);
const builds = [{ name: 'A', dir: process.env.DITTO_WEB_DIR ?? path.join(ROOT, 'web', 'dist') }];
if (process.env.DITTO_WEB_DIR_B) builds.push({ name: 'B', dir: process.env.DITTO_WEB_DIR_B });
const targets = [
  { key: 'a', label: `${pkg} ${path.basename(largest)}`, folder: largest },
  { key: 'b', label: `${path.basename(parent)}/ (all releases)`, folder: parent },
];
const scratch = mkdtempSync(path.join(tmpdir(), 'ditto-bench-link-'));

let server = await startServer({ webDir: builds[0].dir });
const dataDir = server.dataDir;
const browser = await launchBrowser();
const results = {};
try {
  const page = await openApp(browser, server);
  const backups = await backupFolders(page, versions, pkg);
  targets[0].version = backups[versions.indexOf(largest)].version;
  targets[1].version = (await backupFolders(page, [parent], `${pkg}-all`))[0].version;
  await page.close();
  await settle(server);
  for (let run = 0; run < runs; run++)
    for (const b of run % 2 ? [...builds].reverse() : builds) {
      await server.stop();
      server = await startServer({ dataDir, webDir: b.dir });
      for (const t of targets) {
        const r = await restoreZip(browser, server, t.version, t.folder, scratch, { link });
        ((results[b.name] ??= {})[t.key] ??= []).push(r);
        console.error(
          `run ${run + 1}, build ${b.name}, (${t.key}): ${r.wallSeconds.toFixed(2)} s, ` +
            `${(r.responseBytes / 1e6).toFixed(2)} MB fetched`,
        );
      }
    }
} finally {
  await browser.close();
  await server.stop();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
}

const out = { package: pkg, versions: count, runs, mbit: link.mbit, rtt_ms: link.rttMs };
console.log(`\nrestore as a zip over ${link.mbit} Mbit/s, ${link.rttMs} ms (medians of ${runs})`);
for (const t of targets) {
  console.log(`(${t.key}) ${t.label}: ${(results.A[t.key][0].bytes / 1e6).toFixed(1)} MB restored`);
  for (const b of builds) {
    const rs = results[b.name][t.key];
    const secs = median(rs.map((r) => r.wallSeconds));
    const mb = median(rs.map((r) => r.responseBytes)) / 1e6;
    console.log(`  build ${b.name}: click to download on disk ${secs.toFixed(2)} s, ${mb.toFixed(2)} MB fetched`);
    out[`${b.name}_${t.key}_seconds`] = +secs.toFixed(3);
    out[`${b.name}_${t.key}_bytes_fetched`] = Math.round(mb * 1e6);
  }
}
console.log();
console.log(JSON.stringify(out));
