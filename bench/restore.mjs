// Restore benchmark: typescript-10 backed up through the real UI (headless Chromium, real
// release server), then the newest release (or --restore RELEASE) restored as a zip in a
// fresh page ("Download zip", no save picker, so it ends in a download), unpacked and
// compared byte for byte with its folder; then restic backs up the same folders and restores
// the same release, timed, as a reference. Prints a table and, last, one JSON line.
// Usage: node bench/restore.mjs [--package P] [--count N] [--quick] [--restore RELEASE] [--runs N]
// [--no-restic]
// (--restore: another of the backed-up releases instead of the newest, e.g. 6.0.3; --runs:
// restores per tool, default 3, the medians are reported; --no-restic: ditto only, as
// `npm run bench:scale` does for a server whose environment puts it on PostgreSQL + S3,
// which the server started here inherits)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  apiJson,
  backupFolders,
  cli,
  dataset,
  launchBrowser,
  median,
  now,
  openApp,
  resticRepo,
  restoreZip,
  sameTree,
  startServer,
} from './lib.mjs';

const { flag, option } = cli();
const quick = flag('quick');
const pkg = option('package', 'typescript');
const count = Number(option('count', quick ? 3 : 10));
const runs = Number(option('runs', 3));
const withRestic = !flag('no-restic');
if (!(runs >= 1)) throw new Error('--runs must be at least 1');

const versions = dataset(pkg, count);
const pick = option('restore', path.basename(versions[versions.length - 1]));
const pickIndex = versions.findIndex((v) => path.basename(v) === pick);
if (pickIndex < 0) throw new Error(`--restore ${pick}: not one of ${versions.map((v) => path.basename(v)).join(', ')}`);
const chosen = versions[pickIndex];
const scratch = mkdtempSync(path.join(tmpdir(), 'ditto-bench-restore-'));

/** The fewest containers holding the chunks of `version`, by the same rule as the page (first container listed). */
async function containersMin(server, version) {
  const { manifest } = await apiJson(server, `/repos/default/versions/${version}`);
  const { containers } = await apiJson(server, '/repos/default/containers');
  const where = new Map();
  for (const c of containers) for (const ch of c.chunks) if (!where.has(ch.fp)) where.set(ch.fp, c.id);
  const used = new Set();
  for (const e of manifest.entries)
    for (const fp of e.kind === 'file' ? (e.recipe ?? []) : []) {
      if (!where.has(fp)) throw new Error(`chunk ${fp} of ${e.path} is in no container`);
      used.add(where.get(fp));
    }
  return used.size;
}

/** Backs the folders up through the UI, then restores the chosen one `runs` times. */
async function ditto() {
  const server = await startServer();
  const browser = await launchBrowser();
  try {
    const backupPage = await openApp(browser, server);
    const backups = await backupFolders(backupPage, versions, pkg);
    await backupPage.close();
    const version = backups[pickIndex].version;
    // The mover runs in the background after each commit; a dry-run prune runs it to the end,
    // so that every restore reads the same, settled layout (a slower index, PostgreSQL, can
    // otherwise still be moving chunks during the first restores).
    const settle = await fetch(`${server.origin}/api/v1/repos/default/prune`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ dry_run: true }),
    });
    if (settle.status !== 200) throw new Error(`prune (dry run): ${settle.status} ${await settle.text()}`);
    const results = [];
    for (let run = 0; run < runs; run++) results.push(await restoreZip(browser, server, version, chosen, scratch));
    const min = await containersMin(server, version);
    for (const r of results)
      if (r.containersMin !== min)
        throw new Error(`the page says containers_min ${r.containersMin}, the API's tables give ${min}`);
    return { version, results };
  } finally {
    await browser.close();
    await server.stop();
    rmSync(server.dataDir, { recursive: true, force: true });
  }
}

/** restic: one snapshot per version (as bench:backup), then `runs` timed restores of the chosen one. */
function restic() {
  const repo = resticRepo('restore');
  try {
    const ids = [];
    for (const v of versions) {
      repo.run(['backup', '-q', '--compression', 'auto', '.'], { cwd: v });
      ids.push(JSON.parse(repo.run(['snapshots', '--json', 'latest']))[0].short_id);
    }
    const seconds = [];
    for (let run = 0; run < runs; run++) {
      const target = path.join(scratch, `restic-${run}`);
      const t0 = now();
      repo.run(['restore', '-q', ids[pickIndex], '--target', target]);
      seconds.push(now() - t0);
      // A snapshot of `.` restores into the target itself.
      sameTree(chosen, target, 'restic restore');
      rmSync(target, { recursive: true });
    }
    return seconds;
  } finally {
    repo.remove();
  }
}

try {
  const d = await ditto();
  const rs = withRestic ? restic() : [];
  const first = d.results[0];
  const mb = first.checked.bytes / 1e6;
  const pageSeconds = median(d.results.map((r) => r.pageSeconds));
  const wallSeconds = median(d.results.map((r) => r.wallSeconds));
  const resticSeconds = withRestic ? median(rs) : NaN;
  const list = (xs) => xs.map((x) => x.toFixed(2)).join(' ');
  const row = (tool, s, all) =>
    console.log(tool.padEnd(34), s.toFixed(2).padStart(8), (mb / s).toFixed(1).padStart(8), '  ', list(all));
  console.log(
    `\n${pkg} ${pick} (${pickIndex + 1} of ${versions.length}, version ${d.version}): ` +
      `${mb.toFixed(1)} MB, ${first.checked.files} files, zip ${(first.zipBytes / 1e6).toFixed(1)} MB, ` +
      `byte-identical in all ${runs} runs\n`,
  );
  console.log('restore (median of runs)'.padEnd(34), 'seconds'.padStart(8), 'MB/s'.padStart(8), '   seconds per run');
  row(
    'ditto, page clock (fetch->zip)',
    pageSeconds,
    d.results.map((r) => r.pageSeconds),
  );
  row(
    'ditto, click to download on disk',
    wallSeconds,
    d.results.map((r) => r.wallSeconds),
  );
  if (withRestic) row('restic restore', resticSeconds, rs);
  console.log(
    `\nditto: ${first.requests} chunk requests, ${first.containersRead} container reads, ` +
      `${first.containersMin} containers hold the version's chunks\n`,
  );
  console.log(
    JSON.stringify({
      package: pkg,
      versions: versions.length,
      version: pick,
      runs,
      files: first.checked.files,
      logical_bytes: first.checked.bytes,
      zip_bytes: first.zipBytes,
      restore_mbps: median(d.results.map((r) => r.mbps)),
      restore_page_seconds: +pageSeconds.toFixed(3),
      restore_seconds: +wallSeconds.toFixed(3),
      restore_wall_mbps: +(mb / wallSeconds).toFixed(2),
      requests: first.requests,
      containers_read: first.containersRead,
      containers_min: first.containersMin,
      ...(withRestic && {
        restic_restore_seconds: +resticSeconds.toFixed(3),
        restic_restore_mbps: +(mb / resticSeconds).toFixed(2),
        speed_vs_restic: +(resticSeconds / wallSeconds).toFixed(3),
      }),
    }),
  );
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
