import { expect, test } from '@playwright/test';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoJson, startServer, type RunningServer } from '../server';

let server: RunningServer;
let root: string;

// The server's files may not grow past 1.5 MiB: the container of a 3 MiB backup cannot be
// written, as on a full disk.
test.beforeAll(async () => {
  server = await startServer({ maxFileBytes: 1536 * 1024 });
  root = mkdtempSync(path.join(tmpdir(), 'ditto-nospace-'));
});
test.afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

test('a full disk on the server is reported in plain words, and nothing is committed', async ({ page }) => {
  const dir = path.join(root, 'Big');
  mkdirSync(dir);
  for (let i = 0; i < 3; i++) writeFileSync(path.join(dir, `r${i}.bin`), randomBytes(1 << 20));
  let refused = 0;
  page.on('response', (r) => {
    if (r.status() === 507) refused++;
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(dir);
  await page.getByTestId('backup-start').click();
  const message = page.getByTestId('backup-message');
  await expect(message).toContainText('out of space', { timeout: 60_000 });
  await expect(message).toHaveClass(/error/);
  // Reported at once: a full disk is not retried (at most the bundles already in flight, up
  // to three, meet it).
  expect(refused).toBeGreaterThan(0);
  expect(refused).toBeLessThanOrEqual(3);
  await expect(page.getByTestId('backup-done')).toHaveCount(0);
  const { versions } = await repoJson<{ versions: unknown[] }>(server, '/versions');
  expect(versions).toEqual([]);
});
