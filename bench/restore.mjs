// Restore benchmark (docs/BENCHMARKS.md): typescript-10 backed up through the real UI
// (headless Chromium, real release server), one version per release, then their parent
// folder (the 10 releases side by side, ~213 MB) backed up as one more source. Restored, in
// fresh pages and interleaved run by run: (a) the largest release and (b) the parent folder,
// each as a zip ("Download zip" ending in a download, unpacked and compared byte for byte:
// streamed by the download worker, the page's first choice, and as a Blob, with service
// workers blocked, the path of browsers without them), as a zip written to a picked file (the
// save picker stubbed to a file of the origin private file system of a browser profile on
// disk, service workers blocked, copied out and compared the same way) and into a folder
// ("Restore into folder…", the picker stubbed to an
// OPFS directory, every file hashed in the page and compared). restic backs up the same
// folders first and restores the same two snapshots, timed, as the reference: in the same
// rounds, after each target's restores through the page, so that both tools see the VM alike
// (its speed drifts over the minutes a run takes). The streamed zip is also restored with its
// click 1.5 s after the version's row shows (a person reading the list; every other restore
// is clicked at once). Then one file of (b) at a time, as a person
// gets one file back: downloaded from the version browser (click to on disk), and with
// `restic restore --include`: (a)'s largest file and its file nearest 4 KiB in size. Prints
// a table and, last, one JSON line.
// Usage: node bench/restore.mjs [--package P] [--count N] [--quick] [--restore RELEASE] [--runs N]
// [--no-restic] [--no-parent]
// (--restore: (a) is this release instead of the largest; --runs: restores per tool and
// target, default 3, medians reported; --no-restic: ditto only; --no-parent: skip (b))
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  apiJson,
  backupFolders,
  cli,
  dataset,
  du,
  launchBrowser,
  launchProfile,
  median,
  now,
  openApp,
  resticRepo,
  restoreFolder,
  restoreOneFile,
  restoreZip,
  restoreZipToFile,
  sameTree,
  settle,
  startServer,
  walk,
} from './lib.mjs';

const { flag, option } = cli();
const quick = flag('quick');
const pkg = option('package', 'typescript');
const count = Number(option('count', quick ? 3 : 10));
const runs = Number(option('runs', 3));
const withRestic = !flag('no-restic');
const withParent = !flag('no-parent');
if (!(runs >= 1)) throw new Error('--runs must be at least 1');

const versions = dataset(pkg, count);
const largest = versions.reduce((a, b) => (du(b) > du(a) ? b : a));
const pick = option('restore', path.basename(largest));
const pickIndex = versions.findIndex((v) => path.basename(v) === pick);
if (pickIndex < 0) throw new Error(`--restore ${pick}: not one of ${versions.map((v) => path.basename(v)).join(', ')}`);
const parent = path.dirname(versions[0]);
const targets = [{ key: 'a', label: `${pkg} ${pick}`, folder: versions[pickIndex] }];
if (withParent)
  targets.push({ key: 'b', label: `${path.basename(parent)}/ (all releases, one source)`, folder: parent });
/** How long after the version's row shows the `paused` zip restores are clicked. */
const PAUSE_SECONDS = 1.5;
const scratch = mkdtempSync(path.join(tmpdir(), 'ditto-bench-restore-'));
/** One file of (b) at a time: (a)'s largest file and its file nearest 4 KiB, as paths in (b). */
const sizes = walk(versions[pickIndex]).map((f) => ({ f, size: statSync(path.join(versions[pickIndex], f)).size }));
const oneFiles = [
  { key: 'small', ...sizes.reduce((a, b) => (Math.abs(b.size - 4096) < Math.abs(a.size - 4096) ? b : a)) },
  { key: 'large', ...sizes.reduce((a, b) => (b.size > a.size ? b : a)) },
].map((o) => ({ ...o, rel: `${pick}/${o.f}`, ditto: [], restic: [] }));

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

/**
 * Backs the folders up, then restores each target `runs` times as a zip and into a folder,
 * and with `restic` (the repository [`resticBackup`] made), interleaved.
 */
async function ditto(restic) {
  const server = await startServer();
  const browser = await launchBrowser();
  const profile = await launchProfile(mkdtempSync(path.join(scratch, 'profile-')));
  try {
    const backupPage = await openApp(browser, server);
    const backups = await backupFolders(backupPage, versions, pkg);
    targets[0].version = backups[pickIndex].version;
    if (withParent) targets[1].version = (await backupFolders(backupPage, [parent], `${pkg}-all`))[0].version;
    await backupPage.close();
    // The delta pass and the mover run in the background after each commit: every restore
    // reads the same, settled layout.
    await settle(server);
    for (const t of targets) {
      t.zip = [];
      t.paused = [];
      t.blob = [];
      t.file = [];
      t.dir = [];
    }
    for (let run = 0; run < runs; run++)
      for (const t of targets) {
        t.zip.push(await restoreZip(browser, server, t.version, t.folder, scratch));
        t.paused.push(await restoreZip(browser, server, t.version, t.folder, scratch, { pause: PAUSE_SECONDS }));
        t.blob.push(await restoreZip(browser, server, t.version, t.folder, scratch, { sink: 'blob' }));
        t.file.push(await restoreZipToFile(profile, server, t.version, t.folder, scratch));
        t.dir.push(await restoreFolder(profile, server, t.version, t.folder, `bench-${t.key}-${run}`));
        if (restic) t.restic.push(resticRestore(restic, t, run));
        if (t.key === 'b')
          for (const o of oneFiles) {
            o.ditto.push(await restoreOneFile(browser, server, t.version, o.rel, parent));
            if (restic) o.restic.push(resticRestoreOne(restic, t, o.rel, run));
          }
      }
    for (const t of targets) {
      const min = await containersMin(server, t.version);
      for (const r of t.zip)
        if (r.containersMin !== min)
          throw new Error(`the page says containers_min ${r.containersMin}, the API's tables give ${min}`);
    }
  } finally {
    await profile.close();
    await browser.close();
    await server.stop();
    rmSync(server.dataDir, { recursive: true, force: true });
  }
}

/** restic: one snapshot per release (as bench:backup) and one of the parent, each target's snapshot noted. */
function resticBackup() {
  const repo = resticRepo('restore');
  const ids = [];
  for (const v of versions) {
    repo.backup(v);
    ids.push(JSON.parse(repo.run(['snapshots', '--json', 'latest']))[0].short_id);
  }
  targets[0].snapshot = ids[pickIndex];
  if (withParent) {
    repo.backup(parent);
    targets[1].snapshot = JSON.parse(repo.run(['snapshots', '--json', 'latest', '--path', parent]))[0].short_id;
  }
  for (const t of targets) t.restic = [];
  return repo;
}

/** One timed `restic restore --include` of file `rel` of target `t`'s snapshot, checked; seconds. */
function resticRestoreOne(repo, t, rel, run) {
  const target = path.join(scratch, `restic-one-${run}`);
  const t0 = now();
  repo.run(['restore', '-q', t.snapshot, '--target', target, '--include', `/${rel}`]);
  const seconds = now() - t0;
  if (walk(target).join() !== rel)
    throw new Error(`restic restore --include /${rel} restored ${walk(target).join(', ')}`);
  if (!readFileSync(path.join(target, rel)).equals(readFileSync(path.join(t.folder, rel))))
    throw new Error(`restic restore --include /${rel}: the file differs from the source`);
  rmSync(target, { recursive: true });
  return seconds;
}

/** One timed `restic restore` of target `t`'s snapshot, checked against its folder; seconds. */
function resticRestore(repo, t, run) {
  const target = path.join(scratch, `restic-${t.key}-${run}`);
  const t0 = now();
  repo.run(['restore', '-q', t.snapshot, '--target', target]);
  const seconds = now() - t0;
  // A snapshot of `.` restores into the target itself.
  sameTree(t.folder, target, 'restic restore');
  rmSync(target, { recursive: true });
  return seconds;
}

let restic = null;
try {
  if (withRestic) restic = resticBackup();
  await ditto(restic);
  const list = (xs) => xs.map((x) => x.toFixed(2)).join(' ');
  const out = { package: pkg, versions: versions.length, runs };
  for (const t of targets) {
    const mb = t.zip[0].checked.bytes / 1e6;
    const row = (tool, all) => {
      const s = median(all);
      console.log(tool.padEnd(44), s.toFixed(2).padStart(8), (mb / s).toFixed(1).padStart(8), '  ', list(all));
      return s;
    };
    console.log(
      `\n(${t.key}) ${t.label}, version ${t.version}: ${mb.toFixed(1)} MB, ${t.zip[0].checked.files} files, ` +
        `zip ${(t.zip[0].zipBytes / 1e6).toFixed(1)} MB, byte-identical in all ${runs} runs of each\n`,
    );
    console.log('restore (median of runs)'.padEnd(44), 'seconds'.padStart(8), 'MB/s'.padStart(8), '   seconds per run');
    const zipPage = row(
      `ditto zip (${t.zip[0].sink}), page clock`,
      t.zip.map((r) => r.pageSeconds),
    );
    const zipWall = row(
      `ditto zip (${t.zip[0].sink}), click to on disk`,
      t.zip.map((r) => r.wallSeconds),
    );
    const zipDriver = row(
      `ditto zip (${t.zip[0].sink}), driver's click() to on disk`,
      t.zip.map((r) => r.driverSeconds),
    );
    const pausedWall = row(
      `ditto zip (${t.zip[0].sink}), clicked after ${PAUSE_SECONDS} s, to on disk`,
      t.paused.map((r) => r.wallSeconds),
    );
    const blobPage = row(
      'ditto zip (blob), page clock',
      t.blob.map((r) => r.pageSeconds),
    );
    const blobWall = row(
      'ditto zip (blob), click to on disk',
      t.blob.map((r) => r.wallSeconds),
    );
    const filePage = row(
      'ditto zip to a picked file, page clock',
      t.file.map((r) => r.pageSeconds),
    );
    const fileWall = row(
      'ditto zip to a picked file, click to closed',
      t.file.map((r) => r.wallSeconds),
    );
    const dirPage = row(
      'ditto folder, page clock',
      t.dir.map((r) => r.pageSeconds),
    );
    const dirWall = row(
      'ditto folder, click to last file',
      t.dir.map((r) => r.wallSeconds),
    );
    const rs = withRestic ? row('restic restore', t.restic) : NaN;
    console.log(
      `\nditto zip: ${t.zip[0].requests} chunk requests, ${t.zip[0].containersRead} container reads, ` +
        `${t.zip[0].containersMin} containers hold the version's chunks, ` +
        `${(t.zip[0].bytesFetched / 1e6).toFixed(2)} MB fetched`,
    );
    const cpu = (k) => median(t.zip.map((r) => r.cpu[k]));
    console.log(
      `ditto zip (${t.zip[0].sink}), CPU click to on disk (medians): restore workers and assembler ${cpu('workers')} ms, ` +
        `page thread ${cpu('page')} ms, browser and server in all ${cpu('all')} ms`,
    );
    const p = t.key === 'b' ? '' : 'a_';
    Object.assign(out, {
      [`${p}version`]: t.key === 'a' ? pick : path.basename(parent),
      [`${p}files`]: t.zip[0].checked.files,
      [`${p}logical_bytes`]: t.zip[0].checked.bytes,
      [`${p}restore_mbps`]: median(t.zip.map((r) => r.mbps)),
      [`${p}restore_page_seconds`]: +zipPage.toFixed(3),
      [`${p}restore_seconds`]: +zipWall.toFixed(3),
      // The same from Playwright's click() call: its checks before the page gets the click too.
      [`${p}restore_driver_seconds`]: +zipDriver.toFixed(3),
      [`${p}restore_sink`]: t.zip[0].sink,
      // CPU of the streamed zip's restore, click to on disk (Linux /proc; 0 elsewhere): the
      // page's dedicated workers (the restore workers and the assembler; the others idle), the
      // page's thread, and every thread of the browser and the server.
      [`${p}restore_cpu_workers_ms`]: median(t.zip.map((r) => r.cpu.workers)),
      [`${p}restore_cpu_page_ms`]: median(t.zip.map((r) => r.cpu.page)),
      [`${p}restore_cpu_ms`]: median(t.zip.map((r) => r.cpu.all)),
      [`${p}restore_paused_seconds`]: +pausedWall.toFixed(3),
      [`${p}restore_blob_mbps`]: median(t.blob.map((r) => r.mbps)),
      [`${p}restore_blob_page_seconds`]: +blobPage.toFixed(3),
      [`${p}restore_blob_seconds`]: +blobWall.toFixed(3),
      [`${p}restore_file_mbps`]: median(t.file.map((r) => r.mbps)),
      [`${p}restore_file_page_seconds`]: +filePage.toFixed(3),
      [`${p}restore_file_seconds`]: +fileWall.toFixed(3),
      [`${p}restore_folder_mbps`]: median(t.dir.map((r) => r.mbps)),
      [`${p}restore_folder_page_seconds`]: +dirPage.toFixed(3),
      [`${p}restore_folder_seconds`]: +dirWall.toFixed(3),
      [`${p}requests`]: t.zip[0].requests,
      [`${p}containers_read`]: t.zip[0].containersRead,
      [`${p}containers_min`]: t.zip[0].containersMin,
      [`${p}bytes_fetched`]: t.zip[0].bytesFetched,
      ...(withRestic && {
        [`${p}restic_restore_seconds`]: +rs.toFixed(3),
        [`${p}speed_vs_restic`]: +(rs / zipWall).toFixed(3),
        [`${p}paused_speed_vs_restic`]: +(rs / pausedWall).toFixed(3),
        [`${p}blob_speed_vs_restic`]: +(rs / blobWall).toFixed(3),
        [`${p}file_speed_vs_restic`]: +(rs / fileWall).toFixed(3),
        [`${p}folder_speed_vs_restic`]: +(rs / dirWall).toFixed(3),
      }),
    });
  }
  if (withParent) {
    console.log(`\n(b), one file at a time from the version browser, click to on disk (median of ${runs})`);
    for (const o of oneFiles) {
      const d = median(o.ditto);
      const r = withRestic ? median(o.restic) : NaN;
      const ms = (xs) => xs.map((x) => (x * 1000).toFixed(0)).join(' ');
      console.log(
        `  ${o.rel} (${o.size} bytes): ditto ${(d * 1000).toFixed(0)} ms (${ms(o.ditto)})` +
          (withRestic ? `, restic restore --include ${(r * 1000).toFixed(0)} ms (${ms(o.restic)})` : ''),
      );
      Object.assign(out, {
        [`one_${o.key}_path`]: o.rel,
        [`one_${o.key}_bytes`]: o.size,
        [`one_${o.key}_seconds`]: +d.toFixed(3),
        ...(withRestic && {
          [`one_${o.key}_restic_seconds`]: +r.toFixed(3),
          [`one_${o.key}_speed_vs_restic`]: +(r / d).toFixed(2),
        }),
      });
    }
  }
  console.log();
  console.log(JSON.stringify(out));
} finally {
  restic?.remove();
  rmSync(scratch, { recursive: true, force: true });
}
