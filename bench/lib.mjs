// Shared pieces of the UI benchmarks (bench/*.mjs): the release server on a fresh data
// directory, headless Chromium, the app page, backing folders up through the real UI, the
// server's JSON API and `du`. Every helper throws (with what it was doing) on failure, so a
// benchmark that awaits them exits non-zero with a readable message.
import { chromium } from '@playwright/test';
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { npmVersions } from '../scripts/npm-versions.mjs';

/** The repository root (absolute). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Chromium flags of every benchmark and of the e2e suite (e2e/playwright.config.ts). */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--headless',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

/**
 * Chromium features the benchmarks turn off (with `--disable-features`, [`launchOptions`]).
 * Headless Chromium makes each new context a window whose omnibox popup is a WebUI page,
 * loaded in a renderer of its own as the window opens (~0.4 s of CPU, docs/BENCHMARKS.md);
 * the benchmarks open a context per round and act at once, so that load would land inside
 * what they time, which a person's browser, its window open long before, does not pay.
 */
export const DISABLED_FEATURES = ['WebUIOmniboxPopup', 'WebUIOmniboxAimPopup', 'WebUIOmniboxFullPopup'];

let launching = null;

/**
 * Playwright launch options with CHROMIUM_ARGS and DISABLED_FEATURES. Chromium keeps only
 * the last `--disable-features` of its command line, and Playwright passes its own list
 * first: so its switch is read once from a browser it launched (`Browser.getBrowserCommandLine`),
 * left out, and its features are passed with ours in one switch.
 */
export function launchOptions() {
  launching ??= (async () => {
    const executablePath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
    // `--enable-automation`: without it Chromium does not tell its command line.
    const probe = await chromium.launch({ executablePath, args: [...CHROMIUM_ARGS, '--enable-automation'] });
    let theirs;
    try {
      const cdp = await probe.newBrowserCDPSession();
      const { arguments: argv } = await cdp.send('Browser.getBrowserCommandLine');
      theirs = argv.filter((a) => a.startsWith('--disable-features='));
    } finally {
      await probe.close();
    }
    if (theirs.length > 1) throw new Error(`Playwright passes --disable-features ${theirs.length} times`);
    const features = [...(theirs[0]?.slice('--disable-features='.length).split(',') ?? []), ...DISABLED_FEATURES];
    return {
      executablePath,
      args: [...CHROMIUM_ARGS, `--disable-features=${features.filter(Boolean).join(',')}`],
      ignoreDefaultArgs: theirs,
    };
  })();
  return launching;
}

/**
 * Command-line options: `flag('quick')` is true when `--quick` is given, `option('count', 10)`
 * is the value after `--count` (a string) or the default.
 */
export function cli(argv = process.argv.slice(2)) {
  return {
    flag: (name) => argv.includes(`--${name}`),
    option: (name, dflt) => {
      const i = argv.indexOf(`--${name}`);
      return i >= 0 ? argv[i + 1] : dflt;
    },
  };
}

/** Apparent size in bytes of a file or folder (`du -sb`). */
export function du(p) {
  return Number(execFileSync('du', ['-sb', p], { encoding: 'utf8' }).split('\t')[0]);
}

/** Every regular file under `dir`, as sorted paths relative to it with `/`. */
export function walk(dir, rel = '') {
  const out = [];
  for (const e of readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...walk(dir, r));
    else if (e.isFile()) out.push(r);
  }
  return out.sort();
}

/** Seconds from an arbitrary origin (performance.now), for wall-clock intervals. */
export const now = () => performance.now() / 1000;

/**
 * The `count` newest stable releases of npm package `pkg`, one unpacked folder each under
 * target/datasets/<pkg>/, oldest first (downloaded once, see scripts/npm-versions.mjs).
 */
/** The median of a non-empty list of numbers. */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

export function dataset(pkg, count) {
  return npmVersions(pkg, count, path.join(ROOT, 'target', 'datasets'));
}

/**
 * Starts target/release/ditto-server (under `CARGO_TARGET_DIR` if set; or `DITTO_SERVER_BIN`), serving
 * web/dist (or `webDir`, default `DITTO_WEB_DIR`, e.g. an older build to compare with), on PORT=0 with a fresh data directory (or `dataDir`),
 * with `env` added to its environment. Resolves to `{ appUrl, origin, token, dataDir, child, stop }`: `appUrl` is the page URL with
 * the token in its fragment; `stop()` ends the process (SIGTERM) and waits for it. The data
 * directory is left for the caller (`du`, then `rmSync`).
 */
export async function startServer({
  dataDir = mkdtempSync(path.join(tmpdir(), 'ditto-bench-')),
  env = {},
  webDir = process.env.DITTO_WEB_DIR ?? path.join(ROOT, 'web', 'dist'),
} = {}) {
  // Where scripts/build.sh put it: cargo builds into $CARGO_TARGET_DIR when that is set.
  const target = process.env.CARGO_TARGET_DIR ?? path.join(ROOT, 'target');
  const bin = process.env.DITTO_SERVER_BIN ?? path.join(target, 'release', 'ditto-server');
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run npm run build:server`);
  const child = spawn(bin, ['serve'], {
    env: {
      ...process.env,
      ...env,
      PORT: '0',
      DATA_DIR: dataDir,
      WEB_DIR: webDir,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const appUrl = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`ditto-server did not start in 30 s:\n${out}`)), 30_000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = /Open (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`ditto-server exited with ${code} before it was ready:\n${out}`));
    });
  });
  // A driver that dies on an uncaught error must not leave the server running.
  const orphaned = () => child.kill('SIGTERM');
  process.once('exit', orphaned);
  child.once('exit', () => process.off('exit', orphaned));
  const u = new URL(appUrl);
  return {
    appUrl,
    origin: u.origin,
    token: new URLSearchParams(u.hash.slice(1)).get('token') ?? '',
    dataDir,
    child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** GET `/api/v1<p>` of `server` with its token; the parsed JSON, or an error naming the status. */
export async function apiJson(server, p) {
  const res = await fetch(new URL(`/api/v1${p}`, server.origin), {
    headers: { Authorization: `Bearer ${server.token}` },
  });
  if (!res.ok) throw new Error(`GET /api/v1${p}: ${res.status} ${await res.text()}`);
  return res.json();
}

/**
 * Polls the stats until their report `key` names `version` or a later one (a run after a
 * burst of commits reports its last); returns that report.
 */
async function waitReport(server, key, what, version, timeoutSeconds) {
  const t0 = now();
  for (;;) {
    const report = (await apiJson(server, '/repos/default/stats'))[key];
    if ((report?.version ?? 0) >= version) return report;
    if (now() - t0 > timeoutSeconds) throw new Error(`${what} did not reach version ${version} in ${timeoutSeconds} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Waits until the delta pass has handled `version` (or a later one); its report. */
export function waitPass(server, version, timeoutSeconds = 600) {
  return waitReport(server, 'delta_pass', 'the delta pass', version, timeoutSeconds);
}

/**
 * Waits until the server has warmed its search cache up to `version` (docs/SEARCH.md, "On
 * the server": the last step of its background work after a commit); its report.
 */
function waitWarm(server, version, timeoutSeconds = 600) {
  return waitReport(server, 'search_warm', "the search cache's warm-up", version, timeoutSeconds);
}

/**
 * Waits until the server's background work after the backups is done, so that what is
 * measured next is the repository at rest: the delta pass has handled the newest version
 * (skipped for a server started with `DITTO_DELTA=0`), then a dry-run prune runs the
 * mover and compaction to the end, and the search cache is warmed up. Resolves to the
 * prune's answer (its `seconds` among them).
 */
export async function settle(server, { delta = true } = {}) {
  const { versions } = await apiJson(server, '/repos/default/versions');
  const newest = Math.max(0, ...versions.map((v) => v.id));
  if (delta && newest > 0) await waitPass(server, newest);
  const res = await fetch(new URL('/api/v1/repos/default/prune', server.origin), {
    method: 'POST',
    headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ dry_run: true }),
  });
  if (!res.ok) throw new Error(`prune (dry run): ${res.status} ${await res.text()}`);
  const pruned = await res.json();
  if (newest > 0) await waitWarm(server, newest);
  return pruned;
}

/** Headless Chromium (`$CHROMIUM_PATH`, default /usr/bin/chromium) with CHROMIUM_ARGS and DISABLED_FEATURES. */
export async function launchBrowser() {
  return chromium.launch(await launchOptions());
}

/** Turns the Search tab's read-ahead off in `page` (its setting in local storage): a first search then reads itself. */
export async function noReadAhead(page) {
  await page.addInitScript(() => localStorage.setItem('ditto.search.readAhead', 'off'));
}

/**
 * A new page (own context) on the app, once the engine is ready. With `noSavePicker`,
 * `showSaveFilePicker` is hidden so a restore ends in an ordinary download (Playwright's
 * 'download' event), as in e2e/tests/restore.spec.ts: streamed by the download worker once it
 * is active (waited for, up to 10 s: a build without one never has it), or with
 * `serviceWorkers: 'block'` a Blob (web/src/restore/sink.ts). `readAhead: false` turns the
 * Search tab's read-ahead off ([`noReadAhead`]).
 */
export async function openApp(
  browser,
  server,
  { noSavePicker = false, serviceWorkers = 'allow', readAhead = true } = {},
) {
  const page = await browser.newPage({ acceptDownloads: true, serviceWorkers });
  if (!readAhead) await noReadAhead(page);
  if (noSavePicker)
    await page.addInitScript(() => {
      Object.defineProperty(window, 'showSaveFilePicker', { value: undefined, configurable: true });
    });
  await page.goto(server.appUrl);
  await page.getByTestId('engine-ready').waitFor({ timeout: 60_000 });
  if (noSavePicker && serviceWorkers === 'allow')
    await page
      .waitForFunction(
        async () => (await navigator.serviceWorker.getRegistration('/dl/'))?.active?.state === 'activated',
        null,
        { timeout: 10_000 },
      )
      .catch(() => {});
  return page;
}

/** The few UI actions the benchmarks take, on a Playwright page (cdp.mjs pages have the same). */
function playwrightUi(page) {
  return {
    setInputFiles: (sel, files) => page.locator(sel).setInputFiles(files),
    fill: (sel, text) => page.locator(sel).fill(text),
    click: (sel) => page.locator(sel).click(),
    waitFor: (sel, timeout) => page.locator(sel).first().waitFor({ timeout }),
    attr: (sel, name) => page.locator(sel).first().getAttribute(name),
    texts: (sel) => page.locator(sel).allInnerTexts(),
  };
}

/**
 * Backs `folders` up in order through the UI of `page` (a Playwright page or a cdp.mjs page:
 * folder input, source label `source`, "Back up"), one version each. Returns one row per
 * folder: `{ folder, version, seconds, sentBytes, phases, chunksRead, predicted }`, where
 * `seconds` is the page's own clock from the click to the committed version (the sum of its
 * per-phase milliseconds; the driver's polling would add up to its poll interval),
 * `sentBytes` the bundle bytes it sent, `chunksRead` the chunks of the files it read and
 * `predicted` how many of those RapidCDC predicted from the previous version. `after(row)`, if
 * given, is awaited after each backup before the next starts.
 */
export async function backupFolders(page, folders, source, { after } = {}) {
  const ui = 'locator' in page ? playwrightUi(page) : page;
  const id = (t) => `[data-testid=${t}]`;
  const rows = [];
  let previous = null;
  for (const folder of folders) {
    await ui.setInputFiles(id('folder-input'), folder);
    // Wait for the page to show this pick: a click before it would back up the last one again.
    await ui.waitFor(`${id('picked-summary')}[data-root="${path.basename(folder)}"]`, 60_000);
    await ui.fill(id('source-label'), source);
    await ui.click(id('backup-start'));
    // The result of this backup, not the previous one still on screen.
    const done = previous === null ? id('backup-done') : `${id('backup-done')}:not([data-version="${previous}"])`;
    try {
      await ui.waitFor(done, 600_000);
    } catch (e) {
      const errors = await ui.texts(id('backup-errors'));
      throw new Error(`backing up ${folder} did not finish: ${errors.join('; ') || e.message}`);
    }
    const version = Number(await ui.attr(done, 'data-version'));
    const sentBytes = Number(await ui.attr(id('backup-sent'), 'data-bytes'));
    const phases = JSON.parse(await ui.attr(id('backup-progress'), 'data-phase-ms'));
    const seconds = Object.values(phases).reduce((a, b) => a + b, 0) / 1000;
    const chunksRead = Number(await ui.attr(id('backup-chunks'), 'data-read'));
    const predicted = Number(await ui.attr(id('backup-chunks'), 'data-predicted'));
    rows.push({ folder, version, seconds, sentBytes, phases, chunksRead, predicted });
    previous = version;
    if (after) await after(rows.at(-1));
  }
  return rows;
}

/**
 * A throwaway borg repository (no encryption, as restic's is the only encrypted anchor):
 * `run(args, opts)` runs borg with `::`-relative archive names on it, `remove()` deletes it.
 */
export function borgRepo(label) {
  const repo = mkdtempSync(path.join(tmpdir(), `borg-${label}-`));
  rmSync(repo, { recursive: true, force: true });
  const env = { ...process.env, BORG_REPO: repo, BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK: 'yes' };
  execFileSync('borg', ['init', '-e', 'none'], { env });
  return {
    repo,
    run: (args, opts = {}) => execFileSync('borg', args, { env, encoding: 'utf8', ...opts }),
    remove: () => rmSync(repo, { recursive: true, force: true }),
  };
}

/**
 * A throwaway restic repository (password "bench"): `run(args, opts)` runs restic on it
 * (execFileSync options, e.g. `{ cwd }`), `backup(dir, compression)` snapshots the folder
 * `dir` (run from inside it; `--compression auto` unless told), `remove()` deletes it.
 */
export function resticRepo(label) {
  const repo = mkdtempSync(path.join(tmpdir(), `restic-${label}-`));
  const env = { ...process.env, RESTIC_PASSWORD: 'bench', RESTIC_REPOSITORY: repo };
  execFileSync('restic', ['init', '-q'], { env });
  const run = (args, opts = {}) => execFileSync('restic', args, { env, encoding: 'utf8', ...opts });
  return {
    repo,
    run,
    backup: (dir, compression = 'auto') => run(['backup', '-q', '--compression', compression, '.'], { cwd: dir }),
    remove: () => rmSync(repo, { recursive: true, force: true }),
  };
}

/**
 * `restic restore` of the latest snapshot of `repo` ([`resticRepo`]) into `target`, checked
 * against `source` and removed: the seconds the restore took.
 */
export function timeResticRestore(repo, source, target) {
  const t0 = now();
  repo.run(['restore', '-q', 'latest', '--target', target]);
  const seconds = now() - t0;
  sameTree(source, target, 'restic restore');
  rmSync(target, { recursive: true });
  return seconds;
}

/** Throws unless `got` holds exactly the files of `want`, with the same bytes. Returns their count and total size. */
export function sameTree(want, got, what) {
  const a = walk(want);
  const b = walk(got);
  const missing = a.filter((f) => !b.includes(f));
  const extra = b.filter((f) => !a.includes(f));
  if (missing.length || extra.length)
    throw new Error(
      `${what}: file lists differ (missing ${missing.slice(0, 5).join(', ') || 'none'}; extra ${extra.slice(0, 5).join(', ') || 'none'})`,
    );
  let bytes = 0;
  for (const f of a) {
    const x = readFileSync(path.join(want, f));
    if (!x.equals(readFileSync(path.join(got, f)))) throw new Error(`${what}: ${f} differs from the source`);
    bytes += x.length;
  }
  return { files: a.length, bytes };
}

/**
 * CPU time (ms, user + system) of every thread of the browser's and the server's processes so
 * far, by thread id, from /proc (Linux only; empty elsewhere). Two readings around a restore
 * give what each thread spent on it: Chromium names a page's main thread "chromium" (in the
 * renderer) and every dedicated worker's thread "DedicatedWorker".
 */
export function threadCpu() {
  const out = new Map();
  let pids;
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return out;
  }
  for (const pid of pids) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const renderer = cmd.includes('--type=renderer');
      if (!cmd.includes('chromium') && !cmd.includes('ditto-server')) continue;
      for (const tid of readdirSync(`/proc/${pid}/task`)) {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        const comm = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
        // utime and stime, in clock ticks of 10 ms.
        out.set(tid, { renderer, comm, ms: (Number(f[11]) + Number(f[12])) * 10 });
      }
    } catch {
      // A process or thread that ended while being read.
    }
  }
  return out;
}

/** What the threads spent between two [`threadCpu`] readings: `{ workers, page, all }` in ms. */
export function cpuSpent(before, after) {
  const spent = { workers: 0, page: 0, all: 0 };
  for (const [tid, t] of after) {
    const ms = t.ms - (before.get(tid)?.ms ?? 0);
    spent.all += ms;
    if (t.renderer && t.comm === 'DedicatedWorker') spent.workers += ms;
    if (t.renderer && t.comm === 'chromium') spent.page += ms;
  }
  return spent;
}

/**
 * The click as `page` sees it (the first click after this resolves), for timing a download
 * from it: Playwright's `click()` first checks that the element is visible, stable and hit
 * before the page gets the click (docs/BENCHMARKS.md, bench:restore), time that is not the
 * restore's. The page's clock and the driver's share the system's (`timeOrigin`).
 * `clickedAt()`: that click (ms since the epoch); `secondsSince()`: from it to now.
 */
async function clickClock(page) {
  await page.evaluate(() => {
    window.__clickedAt = undefined;
    document.addEventListener('click', () => (window.__clickedAt ??= performance.timeOrigin + performance.now()), {
      capture: true,
      once: true,
    });
  });
  const clickedAt = async () => {
    const at = await page.evaluate(() => window.__clickedAt);
    if (typeof at !== 'number') throw new Error('the page saw no click');
    return at;
  };
  return {
    clickedAt,
    async secondsSince() {
      const end = performance.timeOrigin + performance.now();
      return (end - (await clickedAt())) / 1000;
    },
  };
}

/**
 * One restore of `version` as a zip in a fresh page of `browser` (Playwright), as a user coming
 * back to restore (nothing of the backup left in memory): Versions, "Download zip", with the
 * save picker hidden so it ends in a download: `sink` 'stream' (default) streamed by the
 * download worker, as Chromium's page does, or 'blob' with service workers blocked, as a
 * browser without them. The zip is unpacked in a folder under `scratch`
 * and checked against `folder` file by file (then deleted). Resolves to `{ wallSeconds` (from
 * the click as the page saw it to the download on disk: [`clickClock`]), `driverSeconds` (the
 * same from the driver's `click()` call), `pageSeconds`, `mbps`, `bytes`, `requests`,
 * `containersRead`, `containersMin`, `bytesFetched` (the page's own figures, see
 * docs/BENCHMARKS.md), `responseBytes` (the `chunks/get` answers' bytes, as the driver saw
 * them), `sink` (the page's, `data-sink`), `cpu` (ms, click to on disk: [`cpuSpent`]),
 * `zipBytes, checked }`.
 * With `link: { mbit, rttMs }` the page's network is throttled to that link ([`emulateLink`]).
 * With `pause` (seconds) the click comes that long after the version's row shows, as a person
 * reads the list before clicking; without, at once.
 */
export async function restoreZip(browser, server, version, folder, scratch, { link, sink = 'stream', pause = 0 } = {}) {
  const page = await openApp(browser, server, {
    noSavePicker: true,
    serviceWorkers: sink === 'blob' ? 'block' : 'allow',
  });
  if (link) await emulateLink(page, link);
  const fetched = [];
  page.on('response', (r) => {
    if (r.url().endsWith('/chunks/get'))
      fetched.push(
        r
          .request()
          .sizes()
          .then((z) => z.responseBodySize),
      );
  });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.getByTestId('tab-versions').click();
  const zipButton = page.locator(`[data-testid=version-row][data-version="${version}"] [data-testid=version-zip]`);
  await zipButton.waitFor();
  if (pause) await page.waitForTimeout(pause * 1000);

  const failed = page
    .getByTestId('restore-error')
    .waitFor({ timeout: 600_000 })
    .then(async () => {
      throw new Error(`the restore failed: ${await page.getByTestId('restore-error').innerText()}`);
    });
  failed.catch(() => {}); // only matters if it wins the race below
  const clicked = await clickClock(page);
  const cpuBefore = threadCpu();
  const t0 = now();
  const [download] = await Promise.all([
    Promise.race([page.waitForEvent('download', { timeout: 600_000 }), failed]),
    zipButton.click(),
  ]);
  const failure = await download.failure();
  if (failure) throw new Error(`the download failed: ${failure}`);
  await download.path(); // resolves once the file is complete on disk
  const driverSeconds = now() - t0;
  const wallSeconds = await clicked.secondsSince();
  const cpu = cpuSpent(cpuBefore, threadCpu());
  const done = page.getByTestId('restore-done');
  await done.waitFor({ timeout: 60_000 });
  const result = await restoreFigures(done, wallSeconds);
  result.driverSeconds = driverSeconds;
  result.sink = await page.getByTestId('restore-status').getAttribute('data-sink');
  result.cpu = cpu;
  if (sink === 'blob' && result.sink !== 'blob')
    throw new Error(`asked for a Blob download, the page used ${result.sink}`);
  // Counted by the driver too, so that builds whose page does not count them compare.
  result.responseBytes = (await Promise.all(fetched)).reduce((a, b) => a + b, 0);
  if (pageErrors.length) throw new Error(`errors on the page: ${pageErrors.join('; ')}`);

  const dir = mkdtempSync(path.join(scratch, 'zip-'));
  const zip = path.join(dir, 'restore.zip');
  await download.saveAs(zip);
  await page.close();
  checkZip(result, zip, folder, version);
  rmSync(dir, { recursive: true });
  return result;
}

/**
 * Throttles `page`'s network (Chromium's emulation, as DevTools does) to a link of `mbit`
 * Mbit/s each way with `rttMs` of latency: what a restore from a server across the internet
 * waits for, where a benchmark on loopback sees none of it.
 */
export async function emulateLink(page, { mbit, rttMs }) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  const bytesPerSecond = (mbit * 1e6) / 8;
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false,
    latency: rttMs,
    downloadThroughput: bytesPerSecond,
    uploadThroughput: bytesPerSecond,
  });
}

/** Unpacks the restored `zip` next to it and checks it against `folder` and the page's byte count. */
function checkZip(result, zip, folder, version) {
  result.zipBytes = readFileSync(zip).length;
  const out = path.join(path.dirname(zip), 'out');
  execFileSync('unzip', ['-q', zip, '-d', out]);
  result.checked = sameTree(folder, out, `the zip of version ${version}`);
  if (result.checked.bytes !== result.bytes)
    throw new Error(`the page restored ${result.bytes} bytes, the folder holds ${result.checked.bytes}`);
}

/** A persistent Chromium profile in `dir` (on disk, as a person's browser), as [`launchBrowser`]. */
export async function launchProfile(dir) {
  return chromium.launchPersistentContext(dir, {
    ...(await launchOptions()),
    // The pickers stubbed in it are what it measures, not the download worker.
    serviceWorkers: 'block',
  });
}

/**
 * A new page of `context` on the app, once the engine is ready, with the save picker
 * (`kind` 'file') or the folder picker ('directory') stubbed to the entry `name` of the origin
 * private file system (Playwright cannot drive the real pickers), removed first.
 */
async function openWithOpfsPicker(context, server, kind, name) {
  const page = await context.newPage();
  await page.addInitScript(
    ({ kind, name }) => {
      const root = () => navigator.storage.getDirectory();
      Object.defineProperty(window, kind === 'file' ? 'showSaveFilePicker' : 'showDirectoryPicker', {
        value: async () =>
          kind === 'file'
            ? (await root()).getFileHandle(name, { create: true })
            : (await root()).getDirectoryHandle(name, { create: true }),
        configurable: true,
      });
    },
    { kind, name },
  );
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(server.appUrl);
  await page.getByTestId('engine-ready').waitFor({ timeout: 60_000 });
  await page.evaluate(
    (name) => navigator.storage.getDirectory().then((d) => d.removeEntry(name, { recursive: true }).catch(() => {})),
    name,
  );
  return { page, pageErrors };
}

/**
 * Versions, then `button` of `version`'s row; waits for the restore's end (throws its error).
 * The wall clock is the page's own, from the click to the moment the result shows (a
 * mutation observer): Playwright's `waitFor` polls, up to 500 ms apart, which would count.
 */
async function runRestore(page, version, button, what) {
  await page.getByTestId('tab-versions').click();
  const b = page.locator(`[data-testid=version-row][data-version="${version}"] [data-testid=${button}]`);
  await b.waitFor();
  const clicked = await clickClock(page);
  await page.evaluate(() => {
    window.__restoreEnd = undefined;
    new MutationObserver((_, seen) => {
      if (!document.querySelector('[data-testid=restore-done], [data-testid=restore-error]')) return;
      window.__restoreEnd = performance.timeOrigin + performance.now();
      seen.disconnect();
    }).observe(document.body, { childList: true, subtree: true });
  });
  await b.click();
  const done = page.getByTestId('restore-done');
  await Promise.race([
    done.waitFor({ timeout: 600_000 }),
    page
      .getByTestId('restore-error')
      .waitFor({ timeout: 600_000 })
      .then(async () => {
        throw new Error(`${what} failed: ${await page.getByTestId('restore-error').innerText()}`);
      }),
  ]);
  const end = await page.evaluate(() => window.__restoreEnd);
  return { done, wallSeconds: (end - (await clicked.clickedAt())) / 1000 };
}

/**
 * One restore of `version` as a zip written to a file the user picks, the path Chromium takes
 * (`showSaveFilePicker`, the stream written to the file as it comes): Versions, "Download
 * zip", in a fresh page of the persistent `profile` (its origin private file system is on
 * disk), with the save picker stubbed to a file there (Playwright cannot drive the real
 * picker). The wall clock runs from the click to the file closed (the browser moves its
 * swap file into place first). The file is then copied out of the page, unpacked under
 * `scratch` and checked as [`restoreZip`]'s. Resolves to the same figures.
 */
export async function restoreZipToFile(profile, server, version, folder, scratch) {
  const name = `bench-restore-${version}.zip`;
  const { page, pageErrors } = await openWithOpfsPicker(profile, server, 'file', name);
  const { done, wallSeconds } = await runRestore(page, version, 'version-zip', 'the restore to a file');
  const result = await restoreFigures(done, wallSeconds);
  if (pageErrors.length) throw new Error(`errors on the page: ${pageErrors.join('; ')}`);
  const dir = mkdtempSync(path.join(scratch, 'file-'));
  const zip = path.join(dir, 'restore.zip');
  const size = await page.evaluate(
    async (name) => (await (await (await navigator.storage.getDirectory()).getFileHandle(name)).getFile()).size,
    name,
  );
  const piece = 8 << 20;
  for (let at = 0; at < size; at += piece) {
    const b64 = await page.evaluate(
      async ({ name, at, piece }) => {
        const file = await (await (await navigator.storage.getDirectory()).getFileHandle(name)).getFile();
        const bytes = new Uint8Array(await file.slice(at, at + piece).arrayBuffer());
        let s = '';
        for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
        return btoa(s);
      },
      { name, at, piece },
    );
    appendFileSync(zip, Buffer.from(b64, 'base64'));
  }
  await page.evaluate((name) => navigator.storage.getDirectory().then((d) => d.removeEntry(name)), name);
  await page.close();
  checkZip(result, zip, folder, version);
  rmSync(dir, { recursive: true });
  return result;
}

/** The figures a finished restore shows on `restore-done`, beside the wall clock measured here. */
async function restoreFigures(done, wallSeconds) {
  const attr = async (name) => Number(await done.getAttribute(name));
  return {
    wallSeconds,
    pageSeconds: (await attr('data-ms')) / 1000,
    mbps: await attr('data-mbps'),
    bytes: await attr('data-bytes'),
    requests: await attr('data-requests'),
    containersRead: await attr('data-containers-read'),
    containersMin: await attr('data-containers-min'),
    bytesFetched: await attr('data-bytes-fetched'),
  };
}

/**
 * One file of `version` downloaded from the version browser, as a person gets one file back:
 * a fresh page, Versions, "Browse", the file's folders opened, then its download button
 * (`showSaveFilePicker` hidden: a streamed download). Timed from the click as the page saw it
 * to the download complete on disk ([`clickClock`]); the bytes are compared with
 * `folder/rel`. Resolves to seconds.
 */
export async function restoreOneFile(browser, server, version, rel, folder) {
  const page = await openApp(browser, server, { noSavePicker: true });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.getByTestId('tab-versions').click();
  await page.locator(`[data-testid=version-row][data-version="${version}"] [data-testid=version-browse]`).click();
  await page.getByTestId('version-browser').waitFor();
  const segs = rel.split('/');
  for (let i = 1; i < segs.length; i++)
    await page
      .locator(
        `[data-testid=tree-node][data-path="${segs.slice(0, i).join('/')}"] > .tree-row [data-testid=tree-toggle]`,
      )
      .click();
  const button = page.locator(`[data-testid=download-file][data-path="${rel}"]`);
  await button.waitFor();
  const clicked = await clickClock(page);
  const [download] = await Promise.all([page.waitForEvent('download', { timeout: 120_000 }), button.click()]);
  const failure = await download.failure();
  if (failure) throw new Error(`the download of ${rel} failed: ${failure}`);
  const saved = await download.path();
  const seconds = await clicked.secondsSince();
  if (!readFileSync(saved).equals(readFileSync(path.join(folder, rel))))
    throw new Error(`the download of ${rel} differs from the source`);
  if (pageErrors.length) throw new Error(`errors on the page: ${pageErrors.join('; ')}`);
  await page.close();
  return seconds;
}

/**
 * One restore of `version` into a folder in a fresh page of `context` (Playwright): Versions,
 * "Restore into folder…", with the folder picker stubbed to an empty directory of the origin
 * private file system (Playwright cannot drive the real picker). Pass a persistent profile
 * ([`launchProfile`]): there OPFS is a folder on disk, while an ordinary (incognito) context
 * keeps it in memory. Every restored file is hashed in the page and compared with `folder`;
 * the directory is removed after. Resolves to `{ wallSeconds` (click to the last file
 * closed), `pageSeconds`, `mbps`, `bytes`, `requests`, `containersRead`, `containersMin`,
 * `bytesFetched }`.
 */
export async function restoreFolder(context, server, version, folder, dirName) {
  const { page, pageErrors } = await openWithOpfsPicker(context, server, 'directory', dirName);
  const { done, wallSeconds } = await runRestore(page, version, 'version-folder', 'the folder restore');
  const result = await restoreFigures(done, wallSeconds);
  if (pageErrors.length) throw new Error(`errors on the page: ${pageErrors.join('; ')}`);
  const got = await page.evaluate(async (name) => {
    const out = {};
    const visit = async (dir, rel) => {
      for await (const [n, h] of dir.entries()) {
        const r = rel ? `${rel}/${n}` : n;
        if (h.kind === 'directory') await visit(h, r);
        else {
          const d = new Uint8Array(await crypto.subtle.digest('SHA-1', await (await h.getFile()).arrayBuffer()));
          out[r] = [...d].map((b) => b.toString(16).padStart(2, '0')).join('');
        }
      }
    };
    await visit(await (await navigator.storage.getDirectory()).getDirectoryHandle(name), '');
    return out;
  }, dirName);
  const want = walk(folder);
  if (JSON.stringify(Object.keys(got).sort()) !== JSON.stringify(want))
    throw new Error(`the folder restore of version ${version}: file lists differ`);
  let bytes = 0;
  for (const f of want) {
    const b = readFileSync(path.join(folder, f));
    bytes += b.length;
    if (createHash('sha1').update(b).digest('hex') !== got[f])
      throw new Error(`the folder restore of version ${version}: ${f} differs from the source`);
  }
  if (bytes !== result.bytes) throw new Error(`the page restored ${result.bytes} bytes, the folder holds ${bytes}`);
  await page.evaluate(
    (name) => navigator.storage.getDirectory().then((d) => d.removeEntry(name, { recursive: true })),
    dirName,
  );
  await page.close();
  result.checked = { files: want.length, bytes };
  return result;
}
