import { expect, test, type Page } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT, repoJson, startServer, type RunningServer } from '../server';

/**
 * The SHAttered PDFs (Stevens et al. 2017): two different files with one SHA-1. Backed up as
 * two versions of one file, each version must restore to its own bytes: the chunks holding
 * the collision blocks need two fingerprints, or the second version dedups against the first
 * and silently restores the first file's bytes.
 */
const SHATTERED = [1, 2].map((i) => path.join(ROOT, 'wasm-core', 'testdata', `shattered-${i}.pdf`));
const NAME = 'paper.pdf';
const SOURCE = 'collision';

let server: RunningServer;
let folder: string;
const ids: number[] = [];

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  server = await startServer();
  folder = path.join(mkdtempSync(path.join(tmpdir(), 'ditto-collision-')), 'docs');
  mkdirSync(folder);
});
test.afterAll(async () => {
  await server?.stop();
  if (folder) rmSync(path.dirname(folder), { recursive: true, force: true });
});

async function openWithoutPicker(page: Page) {
  await page.addInitScript(() => {
    Object.defineProperty(window, 'showSaveFilePicker', { value: undefined, configurable: true });
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
}

async function backUp(page: Page) {
  await page.getByTestId('folder-input').setInputFiles(folder);
  await page.getByTestId('source-label').fill(SOURCE);
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 120_000 });
  return Number(await page.getByTestId('backup-done').getAttribute('data-version'));
}

function row(page: Page, id: number) {
  return page.locator(`[data-testid=version-row][data-version="${id}"]`);
}

test('the SHAttered pair as two versions of one file: each version restores its own bytes', async ({
  page,
}, testInfo) => {
  const originals = SHATTERED.map((f) => readFileSync(f));
  expect(originals[0].equals(originals[1])).toBe(false);
  const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');
  expect(sha1(originals[0])).toBe(sha1(originals[1]));

  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await openWithoutPicker(page);
  const target = path.join(folder, NAME);
  for (let v = 0; v < 2; v++) {
    copyFileSync(SHATTERED[v], target);
    // Same size; a later modification time, as an editor's save would leave.
    const t = new Date(Date.UTC(2026, 0, 1 + v));
    utimesSync(target, t, t);
    if (v > 0) {
      // The page's file list is a snapshot: pick the folder again in a fresh page.
      await page.reload();
      await expect(page.getByTestId('engine-ready')).toBeVisible();
    }
    ids.push(await backUp(page));
  }
  expect(ids[1]).not.toBe(ids[0]);

  // The second version had to send the chunk that holds the collision blocks.
  const v2 = await repoJson<{ stats: { files: number; new_stored_bytes: number } }>(server, `/versions/${ids[1]}`);
  expect(v2.stats.files).toBe(1);
  expect(v2.stats.new_stored_bytes).toBeGreaterThan(0);

  await page.getByTestId('tab-versions').click();
  await expect(page.getByTestId('version-row')).toHaveCount(2);
  for (let v = 0; v < 2; v++) {
    // One file straight from the version's tree.
    await row(page, ids[v]).getByTestId('version-browse').click();
    await expect(page.getByTestId('version-browser')).toBeVisible();
    const [file] = await Promise.all([
      page.waitForEvent('download'),
      page.locator(`[data-testid=download-file][data-path="${NAME}"]`).click(),
    ]);
    expect(file.suggestedFilename()).toBe(NAME);
    const saved = testInfo.outputPath(`v${v + 1}-${NAME}`);
    await file.saveAs(saved);
    await expect(page.getByTestId('restore-done')).toBeVisible();
    expect(readFileSync(saved).equals(originals[v]), `version ${v + 1}: file download`).toBe(true);

    // The whole version as a zip.
    const [dl] = await Promise.all([
      page.waitForEvent('download'),
      row(page, ids[v]).getByTestId('version-zip').click(),
    ]);
    const zip = testInfo.outputPath(`v${v + 1}.zip`);
    await dl.saveAs(zip);
    await expect(page.getByTestId('restore-done')).toBeVisible();
    const out = testInfo.outputPath(`v${v + 1}`);
    mkdirSync(out, { recursive: true });
    execFileSync('unzip', ['-q', '-o', zip, '-d', out]);
    expect(readFileSync(path.join(out, NAME)).equals(originals[v]), `version ${v + 1}: zip`).toBe(true);
  }
  expect(errors).toEqual([]);
});

test('restore into a folder: a file of the pair already there is never taken for the other', async ({ page }) => {
  const originals = SHATTERED.map((f) => readFileSync(f));
  const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // The folder picker stubbed to a directory of the origin private file system.
  await page.addInitScript(() => {
    Object.defineProperty(window, 'showDirectoryPicker', {
      value: async () => (await navigator.storage.getDirectory()).getDirectoryHandle('collision', { create: true }),
      configurable: true,
    });
  });
  const restoredHash = () =>
    page.evaluate(async (name) => {
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('collision');
      const bytes = await (await (await dir.getFileHandle(name)).getFile()).arrayBuffer();
      const d = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
      return [...d].map((b) => b.toString(16).padStart(2, '0')).join('');
    }, NAME);
  // shattered-1, then shattered-2 over it (same size, same SHA-1), then shattered-2 again.
  for (const v of [0, 1, 1]) {
    // A fresh page each time, so that no earlier restore's status is on it.
    await page.goto(server.appUrl);
    await expect(page.getByTestId('engine-ready')).toBeVisible();
    await page.getByTestId('tab-versions').click();
    await row(page, ids[v]).getByTestId('version-folder').click();
    const done = page.getByTestId('restore-done');
    await expect(done).toBeVisible({ timeout: 60_000 });
    expect(await restoredHash(), `version ${v + 1} restored into the folder`).toBe(sha256(originals[v]));
    // The file holds collision blocks, named by their safe hashes: the plain SHA-1 the
    // folder check computes matches none of them, so the file is always written again.
    await expect(done).toHaveAttribute('data-skipped-files', '0');
  }
  expect(errors).toEqual([]);
});
