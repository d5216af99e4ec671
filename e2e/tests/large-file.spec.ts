import { chromium, expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openWithOpfsFolderPicker } from '../page';
import { startServer, type RunningServer } from '../server';

/**
 * Opt-in (`DITTO_LARGE_FILE_MB=2048 npx playwright test -c e2e tests/large-file.spec.ts`; ~5 min,
 * most of it writing the file). PSS of the browser's page renderers (the tab with its workers,
 * plus any spare renderer; not Chromium's own UI renderer) while the file backs up, then while
 * it is restored into a folder (the picker stubbed to the origin private file system): a file
 * larger than a block is written as it comes (web/src/restore/assemble.ts), not assembled in
 * the page first. Measured peaks: docs/BACKUP.md "Memory".
 */
const MiB = 2 ** 20;
const SIZE = Number(process.env.DITTO_LARGE_FILE_MB ?? 2048) * MiB;
const LIMIT = 300 * MiB;
/**
 * The restore's bound: its windows and chunk cache (web/src/restore/plan.ts), two restore
 * workers and the blocks being written (at most 64 MiB in all, and at most 8 MiB of one file
 * not yet written, web/src/restore/assemble.ts), whatever the file's size (measured: docs/BACKUP.md, "Memory").
 */
const RESTORE_LIMIT = 640 * MiB;

let server: RunningServer;
let root: string;

test.skip(!process.env.DITTO_LARGE_FILE_MB, 'opt-in: set DITTO_LARGE_FILE_MB (e.g. 2048)');

test.beforeAll(async () => {
  server = await startServer();
  root = mkdtempSync(path.join(tmpdir(), 'ditto-large-'));
  mkdirSync(path.join(root, 'Large'));
  // 32 MiB of random bytes repeated: real reading and chunking of every byte, while the
  // upload stays small (repeats deduplicate), so the test measures the tab, not the disk.
  const block = randomBytes(32 << 20);
  const fd = openSync(path.join(root, 'Large', 'big.bin'), 'w');
  for (let at = 0; at < SIZE; at += block.length) writeSync(fd, block, 0, Math.min(block.length, SIZE - at));
  closeSync(fd);
});
test.afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

/** The browser process of the Chromium running with the profile in `dir`. */
function browserPid(dir: string): number {
  const found = processes().find((r) => r.args.includes(`--user-data-dir=${dir}`) && !r.args.includes('--type='));
  if (!found) throw new Error(`no browser process with the profile ${dir}`);
  return found.pid;
}

/** Every process: its id, its parent's and its command line. */
function processes(): { pid: number; ppid: number; args: string }[] {
  return execFileSync('ps', ['-eo', 'pid=,ppid=,rss=,args='], { encoding: 'utf8' })
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter((r) => r.length >= 4)
    .map(([pid, ppid, , ...args]) => ({ pid: +pid, ppid: +ppid, args: args.join(' ') }));
}

/** Memory of the renderer processes (the tab and its workers) under one browser. */
function rendererPss(browserPid: number): number {
  const rows = processes();
  const ours = new Set([browserPid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const r of rows) if (ours.has(r.ppid) && !ours.has(r.pid)) (ours.add(r.pid), (grew = true));
  }
  // PSS, not RSS: pages shared between processes (V8's snapshot, libraries) count once.
  // `--top-chrome-webui` is the renderer of Chromium's own browser UI (~60-80 MiB here), not
  // of any web page; every other renderer of this browser counts, the tab's and any spare.
  return rows
    .filter((r) => ours.has(r.pid) && r.args.includes('--type=renderer') && !r.args.includes('--top-chrome-webui'))
    .reduce((n, r) => n + pss(r.pid), 0);
}

function pss(pid: number): number {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0; // the process ended between ps and the read
  }
}

/** Samples the renderers' PSS every 100 ms while `run` runs: (peak, seconds into it). */
async function peakWhile(
  pid: number,
  run: () => Promise<void>,
): Promise<{ peak: number; at: number; seconds: number }> {
  let peak = 0;
  let at = 0;
  const t0 = Date.now();
  const poll = setInterval(() => {
    const now = rendererPss(pid);
    if (now > peak) [peak, at] = [now, (Date.now() - t0) / 1000];
  }, 100);
  try {
    await run();
  } finally {
    clearInterval(poll);
  }
  return { peak, at, seconds: (Date.now() - t0) / 1000 };
}

test(`a ${SIZE / MiB} MiB file backs up with the tab under ${LIMIT / MiB} MiB and restores into a folder under ${RESTORE_LIMIT / MiB} MiB`, async ({
  launchOptions,
}) => {
  test.setTimeout(1_200_000);
  // A browser of our own, so that only its processes are measured, with a profile on disk:
  // the restore writes the whole file into the origin private file system, which an
  // ordinary (incognito) context keeps in memory under a quota smaller than 2 GiB.
  const profile = mkdtempSync(path.join(tmpdir(), 'ditto-large-profile-'));
  const context = await chromium.launchPersistentContext(profile, launchOptions);
  const pid = browserPid(profile);
  // The page the profile opens with: another would be one more renderer to measure.
  const page = context.pages()[0] ?? (await context.newPage());
  await openWithOpfsFolderPicker(page, server);
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Large'));
  const idle = rendererPss(pid);
  let backup, restore;
  let got: { size: number; samples: string[] };
  const at = [0, Math.floor(SIZE / 2) - 12_345, SIZE - MiB];
  try {
    backup = await peakWhile(pid, async () => {
      await page.getByTestId('backup-start').click();
      await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 540_000 });
    });
    const version = await page.getByTestId('backup-done').getAttribute('data-version');
    await page.getByTestId('tab-versions').click();
    restore = await peakWhile(pid, async () => {
      await page.locator(`[data-testid=version-row][data-version="${version}"]`).getByTestId('version-folder').click();
      await expect(page.getByTestId('restore-done').or(page.getByTestId('restore-error'))).toBeVisible({
        timeout: 540_000,
      });
      await expect(page.getByTestId('restore-error')).toHaveCount(0);
    });
    // The restored file: its size, and three MiB of it (start, middle, end) as SHA-1.
    got = await page.evaluate(async (at) => {
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('restored');
      const file = await (await dir.getFileHandle('big.bin')).getFile();
      const samples: string[] = [];
      for (const a of at) {
        const d = new Uint8Array(await crypto.subtle.digest('SHA-1', await file.slice(a, a + 1048576).arrayBuffer()));
        samples.push([...d].map((b) => b.toString(16).padStart(2, '0')).join(''));
      }
      return { size: file.size, samples };
    }, at);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
  const peaks = [
    ['backup', backup, LIMIT],
    ['restore into a folder', restore, RESTORE_LIMIT],
  ] as const;
  // Both peaks are reported before either is checked.
  for (const [what, r] of peaks) {
    test.info().annotations.push({ type: `peak renderer PSS, ${what} (MiB)`, description: (r.peak / MiB).toFixed(0) });
    console.log(
      `renderer PSS: ${(idle / MiB).toFixed(0)} MiB idle, peak ${(r.peak / MiB).toFixed(0)} MiB ` +
        `${r.at.toFixed(1)} s into a ${r.seconds.toFixed(1)} s ${what} of a ${SIZE / MiB} MiB file`,
    );
  }
  for (const [, r, limit] of peaks) {
    expect(r.peak).toBeGreaterThan(0);
    expect(r.peak).toBeLessThan(limit);
  }
  const res = await fetch(`${server.url}/api/v1/repos/default/stats`, {
    headers: { Authorization: `Bearer ${server.token}` },
  });
  const stats = await res.json();
  expect(stats.series[0].logical_bytes).toBe(SIZE);
  expect(got.size).toBe(SIZE);
  const fd = openSync(path.join(root, 'Large', 'big.bin'), 'r');
  try {
    got.samples.forEach((hex, k) => {
      const buf = Buffer.alloc(MiB);
      const n = readSync(fd, buf, 0, MiB, at[k]);
      expect(hex, `MiB at ${at[k]}`).toBe(createHash('sha1').update(buf.subarray(0, n)).digest('hex'));
    });
  } finally {
    closeSync(fd);
  }
});
