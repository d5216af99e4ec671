import { expect, test } from '@playwright/test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, type RunningServer } from '../server';

let server: RunningServer;
let root: string;

test.beforeAll(async () => {
  server = await startServer();
  root = mkdtempSync(path.join(tmpdir(), 'ditto-folder-'));
  mkdirSync(path.join(root, 'Holiday photos', 'day 1'), { recursive: true });
  writeFileSync(path.join(root, 'Holiday photos', 'day 1', 'a.txt'), 'sun and sea\n');
  writeFileSync(path.join(root, 'Holiday photos', 'b.txt'), 'mountains\n');
  mkdirSync(path.join(root, 'Nothing here', 'empty too'), { recursive: true });
});
test.afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

test('each version names the folder that was picked, in the manifest and in the versions list', async ({ page }) => {
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Holiday photos'));
  await page.getByTestId('source-label').fill('Photos');
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
  const id = Number(await page.getByTestId('backup-done').getAttribute('data-version'));

  const res = await fetch(`${server.url}/api/v1/repos/default/versions/${id}`, {
    headers: { Authorization: `Bearer ${server.token}` },
  });
  const v = await res.json();
  expect(v.source).toBe('Photos');
  expect(v.folder).toBe('Holiday photos');
  expect(v.manifest.folder).toBe('Holiday photos');
  expect(v.manifest.entries.map((e: { path: string }) => e.path).sort()).toEqual(['b.txt', 'day 1', 'day 1/a.txt']);

  await page.getByTestId('tab-versions').click();
  const row = page.locator(`[data-testid="version-row"][data-version="${id}"]`);
  await expect(row.getByTestId('v-folder')).toHaveText('Holiday photos');

  // Picked again, the folder finds the source it was backed up as.
  await page.getByTestId('tab-backup').click();
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Holiday photos'));
  await expect(page.getByTestId('source-label')).toHaveValue('Photos');
});

test('an empty folder says there is nothing to back up, and offers no backup', async ({ page }) => {
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Nothing here'));
  await expect(page.getByTestId('picked-empty')).toContainText('holds no files');
  await expect(page.getByTestId('picked-empty')).toContainText('nothing to back up');
  await expect(page.getByTestId('backup-start')).toHaveCount(0);
});
