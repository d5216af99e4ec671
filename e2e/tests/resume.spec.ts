import { expect, test } from '@playwright/test';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, type RunningServer } from '../server';

let server: RunningServer;
let root: string;

test.beforeAll(async () => {
  server = await startServer();
  root = mkdtempSync(path.join(tmpdir(), 'ditto-resume-'));
  // Incompressible data, so that it takes several ~4 MiB bundles.
  for (let i = 0; i < 24; i++) {
    const dir = path.join(root, 'Big', `d${i % 3}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `f${i}.bin`), randomBytes(1 << 20));
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
