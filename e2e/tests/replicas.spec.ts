import { expect, test, type Page } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { npmVersions, walk } from '../datasets';
import { pageHits, scanFolders as scanAll } from '../hits';
import { startServer, type RunningServer } from '../server';
// @ts-expect-error plain ESM script without types
import { startBalancer } from '../../scripts/lb.mjs';

// Scale-out (issue 21): two server replicas on one PostgreSQL database and one S3 bucket,
// each with a data directory of its own, behind a round-robin balancer that spreads every
// request of the page over both. Backup, restore and search go through the balancer; then
// one replica is killed and a restore still works. Runs under `npm run test:scale`, which
// starts the database and object store and sets DITTO_E2E_PG (an admin database URL) and
// DITTO_E2E_S3 (the store's endpoint).
const PKG = process.env.DITTO_E2E_PACKAGE ?? 'preact';
const ADMIN = process.env.DITTO_E2E_PG ?? '';
const S3 = process.env.DITTO_E2E_S3 ?? '';
const BUCKET = process.env.DITTO_TEST_S3_BUCKET ?? 'ditto-test';
const RUN = `e2e_replicas_${process.pid}_${Date.now()}`;

interface Balancer {
  url: string;
  close(): Promise<void>;
}

let replicas: RunningServer[] = [];
let lb: Balancer | undefined;
let folders: string[];
let appUrl: string;
let token: string;
const ids: number[] = [];

test.describe.configure({ mode: 'serial' });
test.skip(!ADMIN || !S3, 'needs DITTO_E2E_PG and DITTO_E2E_S3 (npm run test:scale)');

function psql(sql: string) {
  execFileSync('psql', ['-q', '-v', 'ON_ERROR_STOP=1', ADMIN, '-c', sql], { stdio: ['ignore', 'ignore', 'pipe'] });
}

test.beforeAll(async () => {
  folders = npmVersions(PKG, 3);
  psql(`CREATE DATABASE ${RUN}`);
  const env = {
    DATABASE_URL: `${ADMIN.slice(0, ADMIN.lastIndexOf('/'))}/${RUN}`,
    DITTO_S3_ENDPOINT: S3,
    DITTO_S3_REGION: 'us-east-1',
    DITTO_S3_BUCKET: BUCKET,
    DITTO_S3_ACCESS_KEY_ID: process.env.DITTO_TEST_S3_KEY ?? 'ditto-test-key',
    DITTO_S3_SECRET_ACCESS_KEY: process.env.DITTO_TEST_S3_SECRET ?? 'ditto-test-secret',
    DITTO_S3_PREFIX: RUN,
  };
  // One after the other: the first creates the schema and the default repository.
  replicas.push(await startServer({ env }));
  replicas.push(await startServer({ env }));
  lb = (await startBalancer(
    replicas.map((r) => r.url),
    0,
  )) as Balancer;
  // Any replica's token is valid on every replica: tokens live in the shared database.
  token = replicas[0].token;
  appUrl = `${lb.url}/#token=${token}`;
});
test.afterAll(async () => {
  await lb?.close();
  for (const r of replicas) await r.stop();
  replicas = [];
  if (ADMIN && S3) psql(`DROP DATABASE IF EXISTS ${RUN}`);
});

async function openWithoutPicker(page: Page) {
  // Without the File System Access picker (Playwright cannot drive it) the page downloads a Blob.
  await page.addInitScript(() => {
    Object.defineProperty(window, 'showSaveFilePicker', { value: undefined, configurable: true });
  });
  await page.goto(appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
}

function row(page: Page, id: number) {
  return page.locator(`[data-testid=version-row][data-version="${id}"]`);
}

/** Restores version `id` as a zip through the page and compares it, file by file, with `folder`. */
async function restoreMatches(page: Page, id: number, folder: string, out: string) {
  await page.getByTestId('tab-versions').click();
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    row(page, id).getByTestId('version-zip').click(),
  ]);
  const zip = `${out}.zip`;
  await download.saveAs(zip);
  await expect(page.getByTestId('restore-done')).toBeVisible();
  mkdirSync(out, { recursive: true });
  execFileSync('unzip', ['-q', '-o', zip, '-d', out]);
  const want = walk(folder);
  expect(walk(out)).toEqual(want);
  expect(want.length).toBeGreaterThan(10);
  for (const rel of want)
    expect(readFileSync(path.join(out, rel)).equals(readFileSync(path.join(folder, rel))), `${rel} differs`).toBe(true);
}

/** The oracle: every occurrence of each keyword in the backed-up folders (hits.ts). */
const scanFolders = (keywords: Buffer[]) => scanAll(folders, ids, keywords);

test('two replicas behind a balancer: back up, restore a zip and search through it', async ({ page }, testInfo) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await openWithoutPicker(page);
  for (const f of folders) {
    await page.getByTestId('folder-input').setInputFiles(f);
    await page.getByTestId('source-label').fill(PKG);
    await page.getByTestId('backup-start').click();
    const done = page.locator(`[data-testid=backup-done]:not([data-version="${ids.at(-1) ?? 0}"])`);
    await expect(done).toBeVisible({ timeout: 120_000 });
    ids.push(Number(await done.getAttribute('data-version')));
  }
  expect(new Set(ids).size).toBe(3);

  // Each replica, asked directly with the first one's token, lists the same three versions.
  for (const r of replicas) {
    const res = await fetch(`${r.url}/api/v1/repos/default/versions`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(res.status, r.url).toBe(200);
    const body = JSON.stringify(await res.json());
    for (const id of ids) expect(body, `version ${id} on ${r.url}`).toContain(`"id":${id}`);
  }

  await restoreMatches(page, ids[1], folders[1], testInfo.outputPath('v2'));

  // DedupSearch through the balancer finds what a scan of the folders finds, and what the
  // page's naive search finds.
  await page.getByTestId('tab-search').click();
  const text = ['createElement', 'options', 'Element', 'vnode'];
  await page.getByTestId('search-keywords').fill(text.join('\n'));
  await page.getByTestId('search-start').click();
  const done = page.locator('[data-testid=search-done][data-engine=dedup][data-seq="1"]');
  await expect(done).toBeVisible({ timeout: 120_000 });
  const want = scanFolders(text.map((k) => Buffer.from(k)));
  const total = [...want.values()].reduce((n, h) => n + h.length, 0);
  expect(total).toBeGreaterThan(100);
  await expect(done).toHaveAttribute('data-matches', String(total));
  const got = await pageHits(page);
  expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
  for (const [k, hits] of want) expect(got.get(k), k.replace('\0', ' ')).toEqual(hits);
  await page.getByTestId('search-naive').click();
  await expect(page.locator('[data-testid=search-done][data-engine=naive][data-seq="2"]')).toBeVisible({
    timeout: 120_000,
  });
  await expect(page.getByTestId('search-compare')).toHaveAttribute('data-identical', 'true');

  // The containers are objects in the bucket (s3s-fs keeps them as files), not files in
  // either replica's data directory.
  const root = process.env.DITTO_TEST_S3_ROOT;
  if (root) {
    const objects = walk(path.join(root, BUCKET, RUN)).filter((p) => p.endsWith('.dct'));
    expect(objects.length, 'container objects in the bucket').toBeGreaterThan(0);
  }
  expect(errors).toEqual([]);
});

test('with one replica killed, a restore through the balancer still works', async ({ page }, testInfo) => {
  await replicas[1].stop({ signal: 'SIGKILL' });
  await openWithoutPicker(page);
  await restoreMatches(page, ids[2], folders[2], testInfo.outputPath('v3'));
});
