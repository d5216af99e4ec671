// Backup benchmark: two series backed up through the real UI (headless Chromium, real
// release server), then restic and borg on the same folders, in one run: typescript-10 (npm
// releases, ~1 600 files of ~130 KB) and a small-files series (PyPI sdists, thousands of files
// of a few KB: by default the 10 newest Django 5.2.x). Prints a table per series and, last,
// one JSON line (the typescript keys unprefixed, the small-files keys with `smallfiles_`).
// Ditto's stored bytes are its data directory at rest, once the delta pass and the mover
// that follow the commits in the background are done (their time is not the backups').
// Usage: node bench/backup.mjs [--package P] [--count N] [--smallfiles-package P]
// [--smallfiles-series S] [--smallfiles-count N] [--only typescript|smallfiles] [--quick]
// [--playwright] [--runs N]
// --runs: rounds (default 3; 1 with --quick). Each round runs every tool once on every series,
// in the same order, each on a fresh repository; the medians are reported and every round's
// seconds are in the JSON. Interleaving the tools puts a slow spell of this shared VM on all.
import { readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import {
  ROOT,
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
  settle,
  startServer,
} from './lib.mjs';
import { launchCdp } from './cdp.mjs';
import { pypiVersions } from '../scripts/pypi-versions.mjs';

const { flag, option } = cli();
const quick = flag('quick');
const viaPlaywright = flag('playwright');
const pkg = option('package', 'typescript');
const count = Number(option('count', quick ? 3 : 10));
const smallPkg = option('smallfiles-package', 'django');
const smallSeries = option('smallfiles-series', '5.2.');
const smallCount = Number(option('smallfiles-count', quick ? 3 : 10));
const only = option('only', null);
if (only !== null && only !== 'typescript' && only !== 'smallfiles')
  throw new Error('--only takes typescript or smallfiles');
const runs = Number(option('runs', quick ? 1 : 3));
if (!(runs >= 1)) throw new Error('--runs must be at least 1');

const filesOf = (dir) => readdirSync(dir, { withFileTypes: true, recursive: true }).filter((e) => e.isFile());
const countFiles = (dir) => filesOf(dir).length;
/** The bytes of the folder's files (no directory entries, unlike `du`): what MB/s is of. */
const fileBytes = (dir) => filesOf(dir).reduce((n, e) => n + statSync(path.join(e.parentPath, e.name)).size, 0);
/** One series of folders (oldest first), backed up as versions of one source. */
const series = (key, name, versions) => ({
  key,
  name,
  versions,
  logical: versions.reduce((n, v) => n + du(v), 0),
  files: versions.reduce((n, v) => n + countFiles(v), 0),
  fileBytes: versions.reduce((n, v) => n + fileBytes(v), 0),
});
const allSeries = [];
if (only !== 'smallfiles') allSeries.push(series('typescript', pkg, dataset(pkg, count)));
if (only !== 'typescript')
  allSeries.push(
    series(
      'smallfiles',
      smallPkg,
      pypiVersions(smallPkg, smallCount, path.join(ROOT, 'target', 'datasets'), smallSeries),
    ),
  );

/**
 * Ditto through the UI, driven by cdp.mjs (default) or Playwright (`--playwright`, which
 * copies every upload body into DevTools events and so slows the page's uploads).
 */
async function ditto({ versions, name: pkg }) {
  const server = await startServer();
  const browser = viaPlaywright ? await launchBrowser() : await launchCdp();
  const page = viaPlaywright ? await openApp(browser, server) : await browser.newPage(server.appUrl);
  if (!viaPlaywright) await page.waitFor('[data-testid=engine-ready]');
  const backups = await backupFolders(page, versions, pkg);
  await browser.close();
  // Stored bytes are the repository's at rest: the delta pass and the mover run in the
  // background after commits (not on the backups' clock) and change what is stored.
  await settle(server);
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

function restic({ versions }, compression) {
  const repo = resticRepo(compression);
  const t0 = now();
  for (const v of versions) repo.backup(v, compression);
  const seconds = now() - t0;
  const stored = du(repo.repo);
  repo.remove();
  return { seconds, stored };
}

/** borg 1.2 (Debian), one `borg create --compression zstd,3` per version. */
function borg({ versions }) {
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
  const round = {};
  for (const sr of allSeries) {
    const x = { d: await ditto(sr), rz: restic(sr, 'auto'), ro: restic(sr, 'off'), bz: borg(sr) };
    round[sr.key] = x;
    console.log(
      `round ${r + 1}/${runs}, ${sr.name}: ditto ${x.d.seconds.toFixed(2)} s, restic ${x.rz.seconds.toFixed(2)} s,`,
      `restic off ${x.ro.seconds.toFixed(2)} s, borg ${x.bz.seconds.toFixed(2)} s`,
    );
  }
  rounds.push(round);
}
const mb = (n) => (n / 1e6).toFixed(1).padStart(8);

/** The medians of one series over the rounds, with its table printed. */
function summary(sr) {
  const secondsOf = (tool) => rounds.map((x) => x[sr.key][tool].seconds);
  /** The round whose time is the median of the tool's (its stored bytes go with it). */
  const medianRound = (tool) => {
    const m = median(secondsOf(tool));
    return rounds
      .map((x) => x[sr.key][tool])
      .reduce((a, b) => (Math.abs(b.seconds - m) < Math.abs(a.seconds - m) ? b : a));
  };
  const d = { ...medianRound('d'), seconds: median(secondsOf('d')) };
  const rz = { ...medianRound('rz'), seconds: median(secondsOf('rz')) };
  const ro = { ...medianRound('ro'), seconds: median(secondsOf('ro')) };
  const bz = { ...medianRound('bz'), seconds: median(secondsOf('bz')) };
  console.log(
    `\n${sr.name} x${sr.versions.length}: ${mb(sr.fileBytes)} MB in ${sr.files} files; Ditto per version, median round:\n`,
  );
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
  return {
    package: sr.name,
    versions: sr.versions.length,
    files: sr.files,
    logical_bytes: sr.logical,
    file_bytes: sr.fileBytes,
    mbps: +(sr.fileBytes / 1e6 / d.seconds).toFixed(1),
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
    time_vs_borg: +(d.seconds / bz.seconds).toFixed(3),
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
  };
}

const out = {};
const sums = Object.fromEntries(allSeries.map((sr) => [sr.key, summary(sr)]));
if (sums.typescript) {
  const t = sums.typescript;
  Object.assign(out, t);
  delete out.files;
  delete out.file_bytes;
  delete out.mbps;
  delete out.time_vs_borg;
}
if (sums.smallfiles) {
  const s = sums.smallfiles;
  Object.assign(out, {
    smallfiles_package: s.package,
    smallfiles_versions: s.versions,
    smallfiles_files: s.files,
    smallfiles_seconds: s.ditto_seconds,
    smallfiles_logical_bytes: s.file_bytes,
    smallfiles_mbps: s.mbps,
    smallfiles_borg_seconds: s.borg_seconds,
    smallfiles_restic_seconds: s.restic_seconds,
    smallfiles_vs_borg: s.time_vs_borg,
    smallfiles_mbps_vs_typescript: sums.typescript ? +(s.mbps / sums.typescript.mbps).toFixed(3) : null,
    smallfiles_stored_bytes: s.ditto_stored_bytes,
    smallfiles_borg_stored_bytes: s.borg_stored_bytes,
    smallfiles_restic_stored_bytes: s.restic_stored_bytes,
    smallfiles_wire_bytes: s.wire_bytes,
    smallfiles_seconds_runs: s.ditto_seconds_runs,
    smallfiles_borg_seconds_runs: s.borg_seconds_runs,
    smallfiles_restic_seconds_runs: s.restic_seconds_runs,
  });
  if (sums.typescript) out.typescript_mbps = sums.typescript.mbps;
}
console.log(JSON.stringify(out));
