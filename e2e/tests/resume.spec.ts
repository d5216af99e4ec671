import { expect, test } from '@playwright/test';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, type RunningServer } from '../server';

let server: RunningServer;
let root: string;
const MANY = 192;

test.beforeAll(async () => {
  server = await startServer();
  root = mkdtempSync(path.join(tmpdir(), 'ditto-resume-'));
  // Incompressible data, so that it takes several ~4 MiB bundles.
  for (let i = 0; i < 24; i++) {
    const dir = path.join(root, 'Big', `d${i % 3}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `f${i}.bin`), randomBytes(1 << 20));
  }
  // Many small files with distinct mtimes (files written in the same millisecond would look
  // like a normalised timestamp, which the backup does not trust: docs/BACKUP.md).
  for (let i = 0; i < MANY; i++) {
    const file = path.join(root, 'Many', `g${i % 4}`, `f${i}.bin`);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, randomBytes(64 << 10));
    utimesSync(file, 1_700_000_000 + i, 1_700_000_000 + i);
  }
});
test.afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

/** The fingerprints inside a bundle request body (docs/FORMAT.md). */
function bundleFps(body: Buffer): string[] {
  const n = body.readUInt32LE(8);
  const out: string[] = [];
  let at = 16;
  for (let i = 0; i < n; i++) {
    out.push(body.subarray(at, at + 20).toString('hex'));
    at += 32 + body.readUInt32LE(at + 28);
  }
  return out;
}

test('a reload in the middle of a backup resumes without re-sending acknowledged chunks', async ({ page }) => {
  const acked = new Set<string>();
  const sentBeforeReload = new Set<string>();
  const sentAfterReload: string[] = [];
  let reloaded = false;
  // Slow the uploads down so that the reload lands mid-backup.
  await page.route('**/api/v1/repos/*/bundles', async (route) => {
    const fps = bundleFps(route.request().postDataBuffer()!);
    if (reloaded) sentAfterReload.push(...fps);
    else fps.forEach((f) => sentBeforeReload.add(f));
    await new Promise((r) => setTimeout(r, 400));
    const response = await route.fetch();
    if (response.status() === 200 && !reloaded) fps.forEach((f) => acked.add(f));
    await route.fulfill({ response });
  });

  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Big'));
  await page.getByTestId('backup-start').click();
  await expect.poll(() => acked.size, { timeout: 60_000 }).toBeGreaterThan(4);
  reloaded = true;
  await page.reload();

  await expect(page.getByTestId('unfinished-job')).toContainText('Big');
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Big'));
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 120_000 });

  expect(acked.size).toBeGreaterThan(0);
  expect(sentAfterReload.filter((f) => acked.has(f))).toEqual([]);
  const res = await fetch(`${server.url}/api/v1/repos/default/stats`, {
    headers: { Authorization: `Bearer ${server.token}` },
  });
  const stats = await res.json();
  expect(stats.versions).toBe(1);
  expect(stats.series[0].files).toBe(24);
  expect(stats.series[0].logical_bytes).toBe(24 << 20);
  // Every chunk reached the server, before or after the reload (bundles in flight at the
  // reload may have been stored without the page seeing the answer).
  expect(new Set([...sentBeforeReload, ...sentAfterReload]).size).toBe(stats.chunks);
});

test('after a reload, files whose chunks were all acknowledged are not read again', async ({ page }) => {
  const acked = new Set<string>();
  let reloaded = false;
  const sentAfterReload: string[] = [];
  // Per-file records start 2 s into a backup (RECORD_AFTER_MS) and are written in batches of
  // 64 files. The first two bundles (4 MiB each: ~126 of the 64 KiB files) are answered
  // after 2.5 s, so their files' records are written; every later one waits for the reload
  // and is dropped, so that the backup cannot end before it. (Answering every bundle after
  // a fixed delay left it to timing whether the records were written and still there when
  // looked for: with all bundles answered before 2 s, none is written at all.)
  let answered = 0;
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  await page.route('**/api/v1/repos/*/bundles', async (route) => {
    const fps = bundleFps(route.request().postDataBuffer()!);
    if (reloaded) sentAfterReload.push(...fps);
    if (!reloaded && answered++ >= 2) {
      await held;
      return route.abort().catch(() => {});
    }
    await new Promise((r) => setTimeout(r, reloaded ? 1000 : 2500));
    const response = await route.fetch();
    if (response.status() === 200 && !reloaded) fps.forEach((f) => acked.add(f));
    await route.fulfill({ response }).catch(() => {});
  });

  // A commit the server refuses (409: chunks missing) would be recovered from by reading
  // the files again, which is what the records are there to avoid.
  const commits: number[] = [];
  page.on('response', (r) => {
    if (r.request().method() === 'POST' && r.url().endsWith('/versions')) commits.push(r.status());
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Many'));
  await page.getByTestId('backup-start').click();
  // Reload once the job has written per-file records (IndexedDB `ditto-jobs`, docs/BACKUP.md
  // "Resume"), before the version is committed.
  const records = () =>
    page.evaluate(
      () =>
        new Promise<number>((resolve) => {
          const open = indexedDB.open('ditto-jobs');
          open.onerror = () => resolve(-1);
          open.onsuccess = () => {
            const db = open.result;
            if (!db.objectStoreNames.contains('files')) return (db.close(), resolve(0));
            const count = db.transaction('files').objectStore('files').count();
            count.onsuccess = () => (db.close(), resolve(count.result));
            count.onerror = () => (db.close(), resolve(-1));
          };
        }),
    );
  await expect.poll(records, { timeout: 60_000, intervals: [100] }).toBeGreaterThanOrEqual(64);
  await expect(page.getByTestId('backup-done')).toHaveCount(0);
  reloaded = true;
  release();
  await page.reload();

  await expect(page.getByTestId('unfinished-job')).toContainText('Many');
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Many'));
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 120_000 });

  const files = await page.getByTestId('backup-files').textContent();
  expect(commits).toEqual([201]);
  expect(files).toMatch(new RegExp(`^${MANY} of ${MANY} `));
  const resumed = Number(/(\d+) resumed/.exec(files ?? '')?.[1]);
  expect(resumed).toBeGreaterThanOrEqual(64);
  expect(resumed).toBeLessThan(MANY);
  expect(sentAfterReload.length).toBeGreaterThan(0);
  expect(sentAfterReload.filter((f) => acked.has(f))).toEqual([]);
  const res = await fetch(`${server.url}/api/v1/repos/default/stats`, {
    headers: { Authorization: `Bearer ${server.token}` },
  });
  const stats = await res.json();
  const many = stats.series.find((v: { source: string }) => v.source === 'Many');
  expect(many.files).toBe(MANY);
  expect(many.logical_bytes).toBe(MANY * (64 << 10));
});

test('picking the folder again after a reload resumes under the source name it was backed up as', async ({ page }) => {
  const acked = new Set<string>();
  const sentAfterReload: string[] = [];
  let reloaded = false;
  await page.route('**/api/v1/repos/*/bundles', async (route) => {
    const fps = bundleFps(route.request().postDataBuffer()!);
    if (reloaded) sentAfterReload.push(...fps);
    await new Promise((r) => setTimeout(r, 400));
    const response = await route.fetch();
    if (response.status() === 200 && !reloaded) fps.forEach((f) => acked.add(f));
    await route.fulfill({ response }).catch(() => {});
  });

  // Data the server does not hold yet (the tests above stored Big's), in a folder of its own.
  for (let i = 0; i < 24; i++) {
    mkdirSync(path.join(root, 'Photos'), { recursive: true });
    writeFileSync(path.join(root, 'Photos', `p${i}.bin`), randomBytes(1 << 20));
  }
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Photos'));
  // A source name of the user's own, not the folder's.
  await page.getByTestId('source-label').fill('Renamed source');
  await page.getByTestId('backup-start').click();
  await expect.poll(() => acked.size, { timeout: 60_000 }).toBeGreaterThan(4);
  reloaded = true;
  await page.reload();

  await expect(page.getByTestId('unfinished-job')).toContainText('Renamed source');
  await expect(page.getByTestId('unfinished-job')).toContainText('folder “Photos”');
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Photos'));
  // The pick finds the interrupted job by its folder and takes its source name back.
  await expect(page.getByTestId('source-label')).toHaveValue('Renamed source');
  await expect(page.getByTestId('picked-resumes')).toHaveAttribute('data-source', 'Renamed source');
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 120_000 });
  await expect(page.getByTestId('backup-done')).toContainText('“Renamed source”');
  // The interrupted job is the one that finished: no unfinished backup is left to resume.
  await page.reload();
  await expect(page.getByTestId('backup-panel')).toHaveAttribute('data-jobs', 'read');
  await expect(page.getByTestId('unfinished-job')).toHaveCount(0);

  expect(sentAfterReload.filter((f) => acked.has(f))).toEqual([]);
  const res = await fetch(`${server.url}/api/v1/repos/default/versions`, {
    headers: { Authorization: `Bearer ${server.token}` },
  });
  const { versions } = await res.json();
  const mine = versions.filter((v: { source: string }) => v.source === 'Renamed source');
  expect(mine).toHaveLength(1);
  expect(mine[0].folder).toBe('Photos');
  expect(mine[0].stats.files).toBe(24);
  // Nothing was committed under the folder's own name.
  expect(versions.filter((v: { source: string }) => v.source === 'Photos')).toEqual([]);
});

test('a backup cancelled while a worker waits for the page to take its chunks: the next backup in the page completes', async ({
  page,
}) => {
  // One large incompressible file (chunked by one worker, not split) and its uploads held:
  // the upload queue fills, the page stops taking the worker's batches, and the worker waits
  // for them to be taken when Cancel comes.
  const dir = path.join(root, 'Large');
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'large.bin'), randomBytes(40 << 20));
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let bundles = 0;
  await page.route('**/api/v1/repos/*/bundles', async (route) => {
    bundles++;
    await held;
    await route.abort().catch(() => {});
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(dir);
  await page.getByTestId('backup-start').click();
  await expect.poll(() => bundles, { timeout: 60_000 }).toBeGreaterThan(1);
  // The queue is full by now; the worker has sent what it may without being answered.
  await page.waitForTimeout(1000);
  await page.getByTestId('backup-cancel').click();
  await expect(page.getByTestId('backup-phase')).toHaveText('cancelled', { timeout: 30_000 });
  release();
  await page.unroute('**/api/v1/repos/*/bundles');

  // Many files in several jobs, so both workers get some: a worker left waiting by the
  // cancelled backup would hold its jobs for good.
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Many'));
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
});
