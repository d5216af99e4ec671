// Data reduction benchmark (issue 17, DARE delta chunks; docs/BENCHMARKS.md): typescript-10
// backed up through the real UI (headless Chromium, real release server) into two servers,
// one with the delta pass on (the default) and one with it off (DITTO_DELTA=0). After each
// backup the driver waits until the pass has handled that version (stats `delta_pass`), so
// every version gets its pass, and sums the passes' own times. Then the newest version is
// restored as a zip (checked byte for byte) from both servers in interleaved rounds: "before"
// is the server without deltas, "after" the one with them. Last, both servers are stopped
// cleanly (the write-ahead log folded into the database) and their data directories measured
// (`du -sb`), against restic and borg repositories of the same folders made in the same run.
// Prints a table and, last, one JSON line.
// Usage: node bench/reduction.mjs [--package P] [--count N] [--runs N] [--quick] [--keep DIR]
// (--runs: restore rounds, default 3, medians reported; --quick: 3 versions, 1 round;
// --keep: the data directory of the server with the pass is moved to DIR instead of removed,
// for bench/levels.py)
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  apiJson,
  backupFolders,
  borgRepo,
  cli,
  dataset,
  du,
  launchBrowser,
  median,
  now,
  openApp,
  resticRepo,
  restoreZip,
  settle,
  startServer,
  waitPass,
} from './lib.mjs';

const { flag, option } = cli();
const quick = flag('quick');
const pkg = option('package', 'typescript');
const count = Number(option('count', quick ? 3 : 10));
const runs = Number(option('runs', quick ? 1 : 3));
const keep = option('keep', '');
if (!(runs >= 1)) throw new Error('--runs must be at least 1');

const versions = dataset(pkg, count);
const names = versions.map((v) => path.basename(v));
const newest = versions.at(-1);
const scratch = mkdtempSync(path.join(tmpdir(), 'ditto-bench-reduction-'));
const mb = (b) => (b / 1e6).toFixed(2);

/** A server with typescript-10 backed up through the UI; with `delta`, every version's pass waited for. */
async function backedUp(delta) {
  const server = await startServer({ env: { DITTO_DELTA: delta ? '1' : '0' } });
  const passes = [];
  const browser = await launchBrowser();
  let rows;
  try {
    const page = await openApp(browser, server);
    rows = await backupFolders(page, versions, pkg, {
      after: async (row) => {
        if (delta) passes.push(await waitPass(server, row.version));
      },
    });
  } finally {
    await browser.close();
  }
  // Every pass was waited for above; the mover and compaction run to the end.
  await settle(server, { delta: false });
  const stats = await apiJson(server, '/repos/default/stats');
  return { server, passes, newestId: rows.at(-1).version, stats };
}

function restic() {
  const repo = resticRepo('reduction');
  try {
    for (const v of versions) repo.backup(v);
    return du(repo.repo);
  } finally {
    repo.remove();
  }
}

function borg() {
  const repo = borgRepo('reduction');
  try {
    for (const [i, v] of versions.entries())
      repo.run(['create', '--compression', 'zstd,3', `::${names[i]}`, '.'], { cwd: v });
    return du(repo.repo);
  } finally {
    repo.remove();
  }
}

const t0 = now();
const plain = await backedUp(false);
const withDelta = await backedUp(true);
const browser = await launchBrowser();
const before = [];
const after = [];
try {
  // Interleaved: a slow spell of this shared machine falls on both.
  for (let r = 0; r < runs; r++) {
    before.push(await restoreZip(browser, plain.server, plain.newestId, newest, scratch));
    after.push(await restoreZip(browser, withDelta.server, withDelta.newestId, newest, scratch));
  }
} finally {
  await browser.close();
}
await plain.server.stop();
await withDelta.server.stop();
const dittoBytes = du(withDelta.server.dataDir);
const plainBytes = du(plain.server.dataDir);
if (keep) cpSync(withDelta.server.dataDir, keep, { recursive: true });
rmSync(withDelta.server.dataDir, { recursive: true, force: true });
rmSync(plain.server.dataDir, { recursive: true, force: true });
const resticBytes = restic();
const borgBytes = borg();
rmSync(scratch, { recursive: true, force: true });

const passSeconds = withDelta.passes.reduce((n, p) => n + p.seconds, 0);
const deltaChunks = withDelta.stats.delta_chunks;
const mbpsBefore = median(before.map((r) => r.mbps));
const mbpsAfter = median(after.map((r) => r.mbps));
console.log(`${pkg}-${count}: ${names.join(', ')}`);
console.log('stored (data directory after a clean stop, du -sb)');
console.log(
  `  ditto, delta pass on   ${mb(dittoBytes).padStart(8)} MB (chunks ${mb(withDelta.stats.stored_bytes)} MB)`,
);
console.log(`  ditto, DITTO_DELTA=0   ${mb(plainBytes).padStart(8)} MB (chunks ${mb(plain.stats.stored_bytes)} MB)`);
console.log(`  restic                 ${mb(resticBytes).padStart(8)} MB`);
console.log(`  borg                   ${mb(borgBytes).padStart(8)} MB`);
console.log(
  `delta chunks ${deltaChunks}, ${mb(withDelta.stats.delta_saved_bytes)} MB saved; passes ${passSeconds.toFixed(2)} s in all (` +
    withDelta.passes.map((p) => p.seconds.toFixed(2)).join(' ') +
    ')',
);
console.log(
  `restore of ${names.at(-1)} as a zip, MB/s: without deltas ${before.map((r) => r.mbps.toFixed(1)).join(' ')}, ` +
    `with deltas ${after.map((r) => r.mbps.toFixed(1)).join(' ')}; after/before ${(mbpsAfter / mbpsBefore).toFixed(2)}x`,
);
console.log(`wall ${(now() - t0).toFixed(0)} s`);
console.log(
  JSON.stringify({
    package: pkg,
    versions: count,
    ditto_stored_bytes: dittoBytes,
    ditto_chunk_stored_bytes: withDelta.stats.stored_bytes,
    ditto_nodelta_stored_bytes: plainBytes,
    ditto_nodelta_chunk_stored_bytes: plain.stats.stored_bytes,
    borg_stored_bytes: borgBytes,
    restic_stored_bytes: resticBytes,
    delta_chunks: deltaChunks,
    delta_saved_bytes: withDelta.stats.delta_saved_bytes,
    delta_pass_seconds: passSeconds,
    delta_pass_seconds_each: withDelta.passes.map((p) => p.seconds),
    restore_newest_mbps_before: mbpsBefore,
    restore_newest_mbps_after: mbpsAfter,
    restore_newest_mbps_before_runs: before.map((r) => r.mbps),
    restore_newest_mbps_after_runs: after.map((r) => r.mbps),
  }),
);
