import { expect, test, type BrowserContext, type Page } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { walk } from '../datasets';
import { repoJson, startServer, type RunningServer, settleLayout } from '../server';

/**
 * Expiry through the page: versions that each own chunks, a keep-last policy previewed and
 * applied in the Versions tab, the server's data directory shrinking by what the page says,
 * the kept versions still restoring byte for byte, and one more version deleted by hand.
 */

let server: RunningServer;
let base: string;
/** One browser profile for both tests: the second reads what the first left in its storage. */
let context: BrowserContext;
let page: Page;
const errors: string[] = [];
const folders: string[] = [];
const ids: number[] = [];

test.describe.configure({ mode: 'serial' });

test.beforeAll(async ({ browser }) => {
  server = await startServer();
  base = mkdtempSync(path.join(tmpdir(), 'ditto-retention-'));
  context = await browser.newContext({ acceptDownloads: true });
  // Without the File System Access picker (Playwright cannot drive it) a zip is a download.
  await context.addInitScript(() => {
    Object.defineProperty(window, 'showSaveFilePicker', { value: undefined, configurable: true });
  });
  page = await context.newPage();
  page.on('pageerror', (e) => errors.push(e.message));
});
test.afterAll(async () => {
  await context?.close();
  await server?.stop();
  if (base) rmSync(base, { recursive: true, force: true });
});

/** Deterministic incompressible bytes (SHA-1 in counter mode), so chunks differ by seed. */
function noise(seed: string, n: number): Buffer {
  const out = Buffer.alloc(n);
  for (let i = 0, at = 0; at < n; i++, at += 20)
    createHash('sha1')
      .update(`${seed}:${i}`)
      .digest()
      .copy(out, at, 0, Math.min(20, n - at));
  return out;
}

/**
 * Version `i` of a small folder: a file every version shares, and files only this version
 * has (new bytes each time), so that each version owns chunks no other one references.
 */
function makeVersion(i: number): string {
  const dir = path.join(base, `v${i}`, 'project');
  mkdirSync(path.join(dir, 'docs'), { recursive: true });
  writeFileSync(path.join(dir, 'shared.bin'), noise('shared', 200_000));
  writeFileSync(path.join(dir, 'docs', 'notes.txt'), `notes of version ${i}\n`.repeat(50));
  writeFileSync(path.join(dir, 'data.bin'), noise(`data-${i}`, 300_000 + 10_000 * i));
  return dir;
}

/** Bytes of every file under `dir`. */
function diskBytes(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) n += diskBytes(p);
    else if (e.isFile()) n += statSync(p).size;
  }
  return n;
}

async function backUp(folder: string, source: string): Promise<number> {
  await page.getByTestId('tab-backup').click();
  await page.getByTestId('folder-input').setInputFiles(folder);
  await page.getByTestId('source-label').fill(source);
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 120_000 });
  return Number(await page.getByTestId('backup-done').getAttribute('data-version'));
}

/** The gc_epoch the page's client index records (its IndexedDB meta store, read beside the page's connection). */
function indexEpoch(): Promise<number | null> {
  return page.evaluate(async () => {
    const db = await new Promise<IDBDatabase>((ok, fail) => {
      const r = indexedDB.open(`ditto-index:${location.origin}|default`);
      r.onsuccess = () => ok(r.result);
      r.onerror = () => fail(r.error);
    });
    const rec = await new Promise<unknown>((ok, fail) => {
      const g = db.transaction('meta').objectStore('meta').get('epoch');
      g.onsuccess = () => ok(g.result);
      g.onerror = () => fail(g.error);
    });
    db.close();
    return (rec as { epoch?: number } | undefined)?.epoch ?? null;
  });
}

interface Listing {
  containers: { id: number; size: number; chunks: { fp: string; stored_len: number }[] }[];
}

/** The containers with their chunk tables, once the mover (which runs after each commit) is idle. */
async function settledContainers(): Promise<Listing> {
  await settleLayout(server);
  return repoJson<Listing>(server, '/containers');
}

/**
 * What the server's containers lost between two listings: the stored bytes of the chunks
 * no longer indexed, and the file bytes of containers deleted minus those of new ones.
 */
function shrinkage(before: Listing, after: Listing): { chunkBytes: number; fileBytes: number } {
  const kept = new Set(after.containers.flatMap((c) => c.chunks.map((ch) => ch.fp)));
  const chunkBytes = before.containers
    .flatMap((c) => c.chunks)
    .filter((ch) => !kept.has(ch.fp))
    .reduce((n, ch) => n + ch.stored_len, 0);
  const idsBefore = new Set(before.containers.map((c) => c.id));
  const idsAfter = new Set(after.containers.map((c) => c.id));
  const size = (l: Listing, skip: Set<number>) =>
    l.containers.filter((c) => !skip.has(c.id)).reduce((n, c) => n + c.size, 0);
  return { chunkBytes, fileBytes: size(before, idsAfter) - size(after, idsBefore) };
}

/** The Versions tab's retention panel, opened on `source`. */
async function openRetention(source: string) {
  await page.getByTestId('tab-versions').click();
  await page.getByTestId('retention').locator('summary').click();
  await page.getByTestId('retention-source').selectOption(source);
}

const row = (id: number) => page.locator(`[data-testid=version-row][data-version="${id}"]`);
const num = async (testId: string) => Number(await page.getByTestId(testId).getAttribute('data-value'));

/** Downloads version `id` as a zip through the page and compares it with `folder`, file by file. */
async function restoresAs(id: number, folder: string, out: string) {
  const [download] = await Promise.all([page.waitForEvent('download'), row(id).getByTestId('version-zip').click()]);
  const zip = `${out}.zip`;
  await download.saveAs(zip);
  await expect(page.getByTestId('restore-done')).toBeVisible();
  mkdirSync(out, { recursive: true });
  execFileSync('unzip', ['-q', '-o', zip, '-d', out]);
  const want = walk(folder);
  expect(walk(out)).toEqual(want);
  for (const rel of want)
    expect(readFileSync(path.join(out, rel)).equals(readFileSync(path.join(folder, rel))), `v${id} ${rel}`).toBe(true);
}

test('keep-last 2: preview, apply, the disk shrinks by what the page says, the kept versions restore', async ({}, testInfo) => {
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();

  folders.push(...[1, 2, 3, 4].map(makeVersion));
  for (const f of folders) ids.push(await backUp(f, 'Project'));

  await page.getByTestId('tab-versions').click();
  await expect(page.getByTestId('version-row')).toHaveCount(4);
  const retention = page.getByTestId('retention');
  await retention.locator('summary').click();
  await expect(page.getByTestId('retention-problem')).toBeVisible(); // empty policy: nothing to send
  await expect(page.getByTestId('retention-preview')).toBeDisabled();
  await page.getByTestId('retention-keep_last').fill('2');
  await page.getByTestId('retention-preview').click();

  await expect(page.getByTestId('retention-remove')).toHaveCount(2);
  const removed = await page
    .getByTestId('retention-remove')
    .evaluateAll((rs) => rs.map((r) => r.getAttribute('data-version')));
  expect(removed.map(Number).sort((a, b) => a - b)).toEqual([ids[0], ids[1]]);
  await expect(page.getByTestId('retention-keep')).toHaveCount(2);
  for (const id of [ids[2], ids[3]])
    await expect(page.locator(`[data-testid=retention-keep][data-version="${id}"]`)).toHaveAttribute(
      'data-reasons',
      'last',
    );
  const freed = await num('retention-freed');
  // The two removed versions' own data files, at least (stored raw: the bytes do not compress).
  expect(freed).toBeGreaterThanOrEqual(310_000 + 320_000);
  await testInfo.attach('retention-preview', { body: await retention.screenshot(), contentType: 'image/png' });

  const containersBefore = await settledContainers();
  const before = diskBytes(server.dataDir);
  await page.getByTestId('retention-apply').click();
  await expect(page.getByTestId('retention-apply-confirm')).toContainText('Remove 2 versions');
  await page.getByTestId('retention-apply-confirm').click();
  await expect(page.getByTestId('retention-reclaimed')).toBeVisible();
  const reclaimed = await num('retention-reclaimed');
  await testInfo.attach('retention-applied', { body: await retention.screenshot(), contentType: 'image/png' });
  // (a) The preview's freed bytes are the stored bytes of the chunks that go; what was
  // reclaimed is what the container files lost: those chunks, plus the header and table of
  // each container file deleted whole. Both are read from the page and checked against
  // what the server's containers lost.
  const lost = shrinkage(containersBefore, await repoJson<Listing>(server, '/containers'));
  expect(freed).toBe(lost.chunkBytes);
  expect(reclaimed).toBe(lost.fileBytes);
  expect(reclaimed).toBeGreaterThanOrEqual(freed);
  // (b) and the data directory did shrink (by at least most of it: SQLite's files may grow a little)
  const after = diskBytes(server.dataDir);
  expect(after).toBeLessThan(before);
  expect(before - after).toBeGreaterThanOrEqual(reclaimed - 256 * 1024);

  // The list reloaded without the removed versions.
  await expect(page.getByTestId('version-row')).toHaveCount(2);
  const listed = await repoJson<{ versions: { id: number }[] }>(server, '/versions');
  expect(listed.versions.map((v) => v.id)).toEqual([ids[2], ids[3]]);

  // (c) every kept version restores byte for byte
  for (const i of [2, 3]) await restoresAs(ids[i], folders[i], testInfo.outputPath(`v${i + 1}`));

  // The dashboard shows what was reclaimed, the layout, and what each version alone holds.
  const stats = await repoJson<{
    reclaimed_bytes: number;
    layout: { active_bytes: number; archival_bytes: number; dead_bytes: number };
    series: { id: number; unique_stored_bytes: number }[];
  }>(server, '/stats');
  await page.getByTestId('tab-dashboard').click();
  await expect(page.getByTestId('dash-reclaimed')).toHaveAttribute('data-value', String(stats.reclaimed_bytes));
  expect(stats.reclaimed_bytes).toBe(reclaimed);
  await expect(page.getByTestId('dash-active-bytes')).toHaveAttribute('data-value', String(stats.layout.active_bytes));
  await expect(page.getByTestId('dash-archival-bytes')).toHaveAttribute(
    'data-value',
    String(stats.layout.archival_bytes),
  );
  await expect(page.getByTestId('dash-dead-bytes')).toHaveAttribute('data-value', String(stats.layout.dead_bytes));
  for (const s of stats.series)
    await expect(page.locator(`[data-testid=dash-row][data-version="${s.id}"] [data-testid=d-unique]`)).toHaveAttribute(
      'data-value',
      String(s.unique_stored_bytes),
    );
  const unique3 = stats.series.find((s) => s.id === ids[2])!.unique_stored_bytes;
  expect(unique3).toBeGreaterThanOrEqual(330_000); // its own data file

  // (d) deleting one more version names what it frees before, and what it reclaimed after
  await page.getByTestId('tab-versions').click();
  await row(ids[2]).getByTestId('version-delete').click();
  const freedOne = row(ids[2]).getByTestId('version-delete-freed');
  await expect(freedOne).toBeVisible();
  expect(Number(await freedOne.getAttribute('data-value'))).toBe(unique3);
  await testInfo.attach('delete-confirmation', {
    body: await row(ids[2]).screenshot(),
    contentType: 'image/png',
  });
  const listedOne = await settledContainers();
  const beforeOne = diskBytes(server.dataDir);
  await row(ids[2]).getByTestId('version-delete-confirm').click();
  await expect(page.getByTestId('version-deleted')).toHaveAttribute('data-version', String(ids[2]));
  const reclaimedOne = await num('version-deleted');
  const lostOne = shrinkage(listedOne, await repoJson<Listing>(server, '/containers'));
  expect(lostOne.chunkBytes).toBe(unique3);
  expect(reclaimedOne).toBe(lostOne.fileBytes);
  expect(reclaimedOne).toBeGreaterThanOrEqual(unique3);
  expect(beforeOne - diskBytes(server.dataDir)).toBeGreaterThanOrEqual(reclaimedOne - 256 * 1024);
  await expect(page.getByTestId('version-row')).toHaveCount(1);
  // The last one still restores.
  await restoresAs(ids[3], folders[3], testInfo.outputPath('v4-last'));
  expect(errors).toEqual([]);
});

test('the policy is remembered per source, and a backup after a prune starts from a fresh client index', async () => {
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('tab-versions').click();
  await page.getByTestId('retention').locator('summary').click();
  // Previewed (every source) in the first test.
  await expect(page.getByTestId('retention-keep_last')).toHaveValue('2');
  await page.getByTestId('retention-source').selectOption('Project');
  await expect(page.getByTestId('retention-keep_last')).toHaveValue(''); // nothing saved for this source yet
  await page.getByTestId('retention-keep_daily').fill('3');
  await page.getByTestId('retention-preview').click();
  await expect(page.getByTestId('retention-nothing')).toBeVisible();
  // Edited after the preview, the policy has to be previewed again before anything applies.
  await page.getByTestId('retention-keep_daily').fill('4');
  await expect(page.getByTestId('retention-stale')).toBeVisible();
  await expect(page.getByTestId('retention-result')).toHaveCount(0);
  await page.getByTestId('retention-keep_daily').fill('3');
  await expect(page.getByTestId('retention-nothing')).toBeVisible();
  await page.reload();
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await openRetention('Project');
  await expect(page.getByTestId('retention-keep_daily')).toHaveValue('3');

  // The client index was built before the prunes; the server's epoch moved since.
  const { gc_epoch } = await repoJson<{ gc_epoch: number }>(server, '/token');
  expect(gc_epoch).toBeGreaterThan(0);
  const epochBefore = await indexEpoch();
  expect(epochBefore).not.toBeNull();
  expect(epochBefore).not.toBe(gc_epoch);
  // The data file of the first version was pruned: a backup of it must upload it again, not
  // trust the index's memory of it.
  const id = await backUp(path.join(base, 'v1', 'project'), 'Project again');
  await page.getByTestId('tab-versions').click();
  await expect(row(id)).toBeVisible();
  // The index now records the epoch it is rebuilt under.
  expect(await indexEpoch()).toBe(gc_epoch);
  await restoresAs(id, path.join(base, 'v1', 'project'), path.join(base, 'again'));
  expect(errors).toEqual([]);
});

test('an apply whose answer is lost: the page shows the error and what the server now holds', async () => {
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  // One more version of "Project", so that keeping the last one removes one.
  await backUp(path.join(base, 'v2', 'project'), 'Project');
  await openRetention('Project');
  await page.getByTestId('retention-keep_daily').fill('');
  await page.getByTestId('retention-keep_last').fill('1');
  await page.getByTestId('retention-preview').click();
  await expect(page.getByTestId('retention-remove')).toHaveCount(1);
  const gone = Number(await page.getByTestId('retention-remove').getAttribute('data-version'));
  await expect(row(gone)).toBeVisible();
  // The server forgets the version; its answer is lost on the way (a proxy's 502).
  await page.route('**/api/v1/repos/*/forget', async (route) => {
    if (JSON.parse(route.request().postData() ?? '{}').dry_run) return route.continue();
    await route.fetch();
    await route.fulfill({
      status: 502,
      contentType: 'application/json',
      body: JSON.stringify({ code: 'bad_gateway', error: 'the answer was lost' }),
    });
  });
  await page.getByTestId('retention-apply').click();
  await page.getByTestId('retention-apply-confirm').click();
  await expect(page.getByTestId('retention-error')).toContainText('the answer was lost');
  await expect(row(gone)).toHaveCount(0);
  await page.unroute('**/api/v1/repos/*/forget');
  expect(errors).toEqual([]);
});

test('versions deleted elsewhere since the preview: the apply removes nothing the policy keeps now', async () => {
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  // "Project" has one version again (the test above kept the last one): one more, so that
  // keeping the last one removes the older.
  const newest = await backUp(path.join(base, 'v3', 'project'), 'Project');
  await openRetention('Project');
  await page.getByTestId('retention-keep_last').fill('1');
  await page.getByTestId('retention-preview').click();
  await expect(page.getByTestId('retention-remove')).toHaveCount(1);
  const older = Number(await page.getByTestId('retention-remove').getAttribute('data-version'));
  // Another tab deletes the newest version; this page does not know yet.
  const res = await fetch(`${server.url}/api/v1/repos/default/versions/${newest}`, {
    method: 'DELETE',
    headers: { Authorization: `Bearer ${server.token}` },
  });
  expect(res.status).toBe(200);
  await page.getByTestId('retention-apply').click();
  await page.getByTestId('retention-apply-confirm').click();
  await expect(page.getByTestId('retention-error')).toContainText('preview again');
  // The older version is the source's last: it stays, and the page now shows what the server holds.
  await expect(row(newest)).toHaveCount(0);
  await expect(row(older)).toBeVisible();
  const { versions } = await repoJson<{ versions: { id: number; source: string }[] }>(server, '/versions');
  expect(versions.filter((v) => v.source === 'Project').map((v) => v.id)).toEqual([older]);

  // Deleted in this page, the preview is stale at once: nothing to apply until previewed again.
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  const again = await backUp(path.join(base, 'v3', 'project'), 'Project');
  await openRetention('Project');
  await expect(page.getByTestId('retention-keep_last')).toHaveValue('1');
  await page.getByTestId('retention-preview').click();
  await expect(page.getByTestId('retention-remove')).toHaveCount(1);
  await row(again).getByTestId('version-delete').click();
  await page.getByTestId('version-delete-confirm').click();
  await expect(page.getByTestId('version-deleted')).toHaveAttribute('data-version', String(again));
  await expect(page.getByTestId('retention-stale')).toContainText('The versions changed');
  await expect(page.getByTestId('retention-apply')).toHaveCount(0);
  expect(errors).toEqual([]);
});

test('an apply after which no version is left: the page still says what it removed and reclaimed', async () => {
  // A repository of one source only: every version left by the tests above deleted first.
  const left = await repoJson<{ versions: { id: number }[] }>(server, '/versions');
  for (const { id } of left.versions) {
    const res = await fetch(`${server.url}/api/v1/repos/default/versions/${id}`, {
      method: 'DELETE',
      headers: { Authorization: `Bearer ${server.token}` },
    });
    expect(res.status).toBe(200);
  }
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await backUp(path.join(base, 'v1', 'project'), 'Solo');
  const kept = await backUp(path.join(base, 'v2', 'project'), 'Solo');
  await openRetention('Solo');
  await expect(page.getByTestId('version-row')).toHaveCount(2);
  // A policy that keeps nothing is refused by the server; the form says so before a preview:
  // every policy keeps each source's newest version.
  await page.getByTestId('retention-keep_last').fill('0');
  await expect(page.getByTestId('retention-problem')).toContainText('Every rule is 0');
  await expect(page.getByTestId('retention-preview')).toBeDisabled();
  await page.getByTestId('retention-keep_last').fill('1');
  await page.getByTestId('retention-preview').click();
  await expect(page.getByTestId('retention-remove')).toHaveCount(1);
  // So the last version goes another way: another tab deletes the kept one while the apply runs.
  await page.route('**/api/v1/repos/*/forget', async (route) => {
    if (JSON.parse(route.request().postData() ?? '{}').dry_run) return route.continue();
    const response = await route.fetch();
    const res = await fetch(`${server.url}/api/v1/repos/default/versions/${kept}`, {
      method: 'DELETE',
      headers: { Authorization: `Bearer ${server.token}` },
    });
    expect(res.status).toBe(200);
    await route.fulfill({ response });
  });
  await page.getByTestId('retention-apply').click();
  await page.getByTestId('retention-apply-confirm').click();
  await expect(page.getByTestId('versions-empty')).toBeVisible();
  await expect(page.getByTestId('retention-reclaimed')).toBeVisible();
  await expect(page.getByTestId('retention-reclaimed')).toContainText('Removed 1 version');
  expect(Number(await page.getByTestId('retention-reclaimed').getAttribute('data-value'))).toBeGreaterThan(0);
  await page.unroute('**/api/v1/repos/*/forget');
  expect((await repoJson<{ versions: unknown[] }>(server, '/versions')).versions).toEqual([]);
  expect(errors).toEqual([]);
});
