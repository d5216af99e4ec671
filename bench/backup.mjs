// Backup benchmark: typescript-10 backed up through the real UI (headless Chromium, real
// release server), then restic and borg on the same folders, in one run. Prints a table and,
// last, one JSON line. Usage: node bench/backup.mjs [--package P] [--count N] [--quick]
// [--playwright] [--runs N]
// --runs: rounds (default 3; 1 with --quick). Each round runs every tool once, in the same
// order, each on a fresh repository; the medians are reported and every round's seconds are
// in the JSON. Interleaving the tools puts a slow spell of this shared VM on all of them.
import { readdirSync, rmSync } from 'node:fs';
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
  startServer,
} from './lib.mjs';
import { launchCdp } from './cdp.mjs';

const { flag, option } = cli();
const quick = flag('quick');
const viaPlaywright = flag('playwright');
const pkg = option('package', 'typescript');
const count = Number(option('count', quick ? 3 : 10));
const runs = Number(option('runs', quick ? 1 : 3));
if (!(runs >= 1)) throw new Error('--runs must be at least 1');

const versions = dataset(pkg, count);
const countFiles = (dir) => readdirSync(dir, { withFileTypes: true, recursive: true }).filter((e) => e.isFile()).length;
const logical = versions.reduce((n, v) => n + du(v), 0);

/**
 * Ditto through the UI, driven by cdp.mjs (default) or Playwright (`--playwright`, which
 * copies every upload body into DevTools events and so slows the page's uploads).
 */
async function ditto() {
  const server = await startServer();
  const browser = viaPlaywright ? await launchBrowser() : await launchCdp();
  const page = viaPlaywright ? await openApp(browser, server) : await browser.newPage(server.appUrl);
  if (!viaPlaywright) await page.waitFor('[data-testid=engine-ready]');
  const backups = await backupFolders(page, versions, pkg);
  await browser.close();
  const stats = await apiJson(server, '/repos/default/stats');
  // Each version must hold its whole folder: a driver that clicked too early would back up
  // the previous pick again and look fast.
  const listed = (await apiJson(server, '/repos/default/versions')).versions;
  for (const b of backups) {
    const v = listed.find((x) => x.id === b.version);
    const want = countFiles(b.folder);
    if (v?.stats.files !== want)
      throw new Error(`${b.folder}: version ${b.version} has ${v?.stats.files} files, not ${want}`);
  }
  await server.stop();
  const stored = du(server.dataDir);
  rmSync(server.dataDir, { recursive: true, force: true });
  const rows = backups.map((b) => [path.basename(b.folder), b.seconds, b.sentBytes, b.phases, b]);
  const sum = (k) => backups.reduce((s, b) => s + b[k], 0);
  return {
    seconds: sum('seconds'),
    wire: sum('sentBytes'),
    chunksRead: sum('chunksRead'),
    predicted: sum('predicted'),
    stored,
    newStored: stats.stored_bytes,
    rawStored: stats.raw_bytes,
    rows,
    stats,
  };
}

function restic(compression) {
  const repo = resticRepo(compression);
  const t0 = now();
  for (const v of versions) repo.run(['backup', '-q', '--compression', compression, '.'], { cwd: v });
  const seconds = now() - t0;
  const stored = du(repo.repo);
  repo.remove();
  return { seconds, stored };
}

/** borg 1.2 (Debian), one `borg create --compression zstd,3` per version. */
function borg() {
  const repo = borgRepo('zstd');
  const t0 = now();
  for (const v of versions) repo.run(['create', '--compression', 'zstd,3', `::${path.basename(v)}`, '.'], { cwd: v });
  const seconds = now() - t0;
  const stored = du(repo.repo);
  repo.remove();
  return { seconds, stored };
}

const rounds = [];
for (let r = 0; r < runs; r++) {
  rounds.push({ d: await ditto(), rz: restic('auto'), ro: restic('off'), bz: borg() });
  const last = rounds.at(-1);
  console.log(
    `round ${r + 1}/${runs}: ditto ${last.d.seconds.toFixed(2)} s, restic ${last.rz.seconds.toFixed(2)} s,`,
    `restic off ${last.ro.seconds.toFixed(2)} s, borg ${last.bz.seconds.toFixed(2)} s`,
  );
}
const secondsOf = (tool) => rounds.map((x) => x[tool].seconds);
/** The round whose time is the median of the tool's (its stored bytes go with it). */
const medianRound = (tool) => {
  const m = median(secondsOf(tool));
  return rounds.reduce((a, b) => (Math.abs(b[tool].seconds - m) < Math.abs(a[tool].seconds - m) ? b : a))[tool];
};
const d = { ...medianRound('d'), seconds: median(secondsOf('d')) };
const rz = { ...medianRound('rz'), seconds: median(secondsOf('rz')) };
const ro = { ...medianRound('ro'), seconds: median(secondsOf('ro')) };
const bz = { ...medianRound('bz'), seconds: median(secondsOf('bz')) };
const mb = (n) => (n / 1e6).toFixed(1).padStart(8);
console.log(`\n${pkg} x${versions.length}: ${mb(logical)} MB logical; Ditto per version, median round:\n`);
console.log('version'.padEnd(14), 'seconds'.padStart(8), 'sent MB'.padStart(8), ' predicted', '  ms per phase');
for (const [v, dt, sent, phases, b] of d.rows) {
  const ph = Object.entries(phases)
    .map(([k, ms]) => `${k} ${Math.round(ms)}`)
    .join(', ');
  const pred = `${b.predicted}/${b.chunksRead}`.padStart(10);
  console.log(v.padEnd(14), dt.toFixed(2).padStart(8), mb(sent), pred, ' ', ph);
}
console.log(`\ntool (median of ${runs})`.padEnd(22), 'seconds'.padStart(8), 'stored MB'.padStart(10));
console.log('ditto (UI, Chromium)'.padEnd(21), d.seconds.toFixed(2).padStart(8), mb(d.stored).padStart(10));
console.log('restic --compression auto'.padEnd(21), rz.seconds.toFixed(2).padStart(8), mb(rz.stored).padStart(10));
console.log('restic --compression off'.padEnd(21), ro.seconds.toFixed(2).padStart(8), mb(ro.stored).padStart(10));
console.log('borg --compression zstd,3'.padEnd(21), bz.seconds.toFixed(2).padStart(8), mb(bz.stored).padStart(10));
// The anchor: the faster and the smaller of restic and borg (each may be a different tool).
const anchorSeconds = Math.min(rz.seconds, bz.seconds);
const anchorStored = Math.min(rz.stored, bz.stored);
console.log(
  JSON.stringify({
    package: pkg,
    versions: versions.length,
    logical_bytes: logical,
    runs,
    ditto_seconds: +d.seconds.toFixed(3),
    restic_seconds: +rz.seconds.toFixed(3),
    restic_off_seconds: +ro.seconds.toFixed(3),
    borg_seconds: +bz.seconds.toFixed(3),
    ditto_stored_bytes: d.stored,
    restic_stored_bytes: rz.stored,
    restic_off_stored_bytes: ro.stored,
    borg_stored_bytes: bz.stored,
    time_vs_anchor: +(d.seconds / anchorSeconds).toFixed(3),
    stored_vs_anchor: +(d.stored / anchorStored).toFixed(3),
    wire_bytes: d.wire,
    new_stored_bytes: d.newStored,
    new_raw_bytes: d.rawStored,
    dedup_ratio: d.stats.dedup_ratio,
    chunks_read: d.chunksRead,
    chunks_predicted: d.predicted,
    ditto_seconds_runs: secondsOf('d').map((x) => +x.toFixed(3)),
    restic_seconds_runs: secondsOf('rz').map((x) => +x.toFixed(3)),
    borg_seconds_runs: secondsOf('bz').map((x) => +x.toFixed(3)),
  }),
);
