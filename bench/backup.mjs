// Backup benchmark: typescript-10 backed up through the real UI (headless Chromium, real
// release server), then restic on the same folders, in one run. Prints a table and, last,
// one JSON line. Usage: node bench/backup.mjs [--package P] [--count N] [--quick]
import { chromium } from '@playwright/test';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { npmVersions } from '../scripts/npm-versions.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const quick = args.includes('--quick');
const pkg = opt('package', 'typescript');
const count = Number(opt('count', quick ? 3 : 10));
const du = (dir) => Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
const now = () => performance.now() / 1000;

const versions = npmVersions(pkg, count, path.join(ROOT, 'target', 'datasets'));
const logical = versions.reduce((n, v) => n + du(v), 0);

async function startServer(dataDir) {
  const child = spawn(path.join(ROOT, 'target', 'release', 'ditto-server'), ['serve'], {
    env: { ...process.env, PORT: '0', DATA_DIR: dataDir, WEB_DIR: path.join(ROOT, 'web', 'dist') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /Open (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.on('exit', (c) => reject(new Error(`server exited ${c}`)));
  });
  return { child, url };
}

async function ditto() {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ditto-bench-'));
  const { child, url } = await startServer(dataDir);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--headless',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
  const page = await browser.newPage();
  await page.goto(url);
  await page.getByTestId('engine-ready').waitFor({ timeout: 60_000 });
  let seconds = 0;
  let wire = 0;
  const rows = [];
  for (const v of versions) {
    await page.getByTestId('folder-input').setInputFiles(v);
    await page.getByTestId('source-label').fill(pkg);
    const t0 = now();
    await page.getByTestId('backup-start').click();
    await page.getByTestId('backup-done').waitFor({ timeout: 600_000 });
    // The page's own clock, from the click to the committed version: Playwright's waitFor
    // polls at up to 500 ms intervals, which would otherwise be timed too.
    void t0;
    const sent = Number(await page.getByTestId('backup-sent').getAttribute('data-bytes'));
    const phases = JSON.parse(await page.getByTestId('backup-progress').getAttribute('data-phase-ms'));
    const dt = Object.values(phases).reduce((a, b) => a + b, 0) / 1000;
    seconds += dt;
    wire += sent;
    rows.push([path.basename(v), dt, sent, phases]);
  }
  await browser.close();
  const token = new URLSearchParams(new URL(url).hash.slice(1)).get('token');
  const stats = await (
    await fetch(new URL('/api/v1/repos/default/stats', url), {
      headers: { Authorization: `Bearer ${token}` },
    })
  ).json();
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  const stored = du(dataDir);
  rmSync(dataDir, { recursive: true, force: true });
  return { seconds, wire, stored, newStored: stats.stored_bytes, rawStored: stats.raw_bytes, rows, stats };
}

function restic(compression) {
  const repo = mkdtempSync(path.join(tmpdir(), `restic-${compression}-`));
  const env = { ...process.env, RESTIC_PASSWORD: 'bench', RESTIC_REPOSITORY: repo };
  execFileSync('restic', ['init', '-q'], { env });
  const t0 = now();
  for (const v of versions)
    execFileSync('restic', ['backup', '-q', '--compression', compression, '.'], { cwd: v, env });
  const seconds = now() - t0;
  const stored = du(repo);
  rmSync(repo, { recursive: true, force: true });
  return { seconds, stored };
}

const d = await ditto();
const rz = restic('auto');
const ro = restic('off');
const mb = (n) => (n / 1e6).toFixed(1).padStart(8);
console.log(`\n${pkg} x${versions.length}: ${mb(logical)} MB logical\n`);
console.log('version'.padEnd(14), 'seconds'.padStart(8), 'sent MB'.padStart(8), '  ms per phase');
for (const [v, dt, sent, phases] of d.rows) {
  const ph = Object.entries(phases)
    .map(([k, ms]) => `${k} ${Math.round(ms)}`)
    .join(', ');
  console.log(v.padEnd(14), dt.toFixed(2).padStart(8), mb(sent), ' ', ph);
}
console.log('\ntool'.padEnd(22), 'seconds'.padStart(8), 'stored MB'.padStart(10));
console.log('ditto (UI, Chromium)'.padEnd(21), d.seconds.toFixed(2).padStart(8), mb(d.stored).padStart(10));
console.log('restic --compression auto'.padEnd(21), rz.seconds.toFixed(2).padStart(8), mb(rz.stored).padStart(10));
console.log('restic --compression off'.padEnd(21), ro.seconds.toFixed(2).padStart(8), mb(ro.stored).padStart(10));
console.log(
  JSON.stringify({
    package: pkg,
    versions: versions.length,
    logical_bytes: logical,
    ditto_seconds: +d.seconds.toFixed(3),
    restic_seconds: +rz.seconds.toFixed(3),
    restic_off_seconds: +ro.seconds.toFixed(3),
    ditto_stored_bytes: d.stored,
    restic_stored_bytes: rz.stored,
    restic_off_stored_bytes: ro.stored,
    wire_bytes: d.wire,
    new_stored_bytes: d.newStored,
    new_raw_bytes: d.rawStored,
    dedup_ratio: d.stats.dedup_ratio,
  }),
);
