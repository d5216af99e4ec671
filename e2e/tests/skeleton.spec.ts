import { expect, test } from '@playwright/test';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, type RunningServer } from '../server';

let server: RunningServer;
let root: string;
let folder: string;

/** A folder with the awkward cases: empty file, block-boundary sizes, nesting, a multi-MB file, unicode. */
function makeFolder(): Map<string, string> {
  root = mkdtempSync(path.join(tmpdir(), 'ditto-skeleton-'));
  folder = path.join(root, 'Sample');
  const files: [string, Buffer][] = [
    ['empty.txt', Buffer.alloc(0)],
    ['one.bin', Buffer.from([7])],
    ['block-edge.bin', randomBytes(65536 + 1)],
    ['nested/deeper/big.bin', randomBytes(5 * 1024 * 1024 + 13)],
    ['nested/readme.md', Buffer.from('# hello\n'.repeat(1000))],
    ['ünïcödé name.txt', Buffer.from('unicode')],
  ];
  const expected = new Map<string, string>();
  for (const [rel, data] of files) {
    const full = path.join(folder, rel);
    mkdirSync(path.dirname(full), { recursive: true });
    writeFileSync(full, data);
    expected.set(`Sample/${rel}`, createHash('sha1').update(readFileSync(full)).digest('hex'));
  }
  return expected;
}

test.beforeAll(async () => {
  server = await startServer();
});
test.afterAll(async () => {
  await server?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

test('health endpoint answers', async ({ request }) => {
  const res = await request.get(`${server.url}/api/v1/health`);
  expect(res.ok()).toBe(true);
  expect((await res.json()).status).toBe('ok');
});

test('every file of a picked folder gets the SHA-1 that Node computes', async ({ page }) => {
  const expected = makeFolder();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // The smoke test is no view of the product: it is there only with `?dev`.
  await page.goto(server.appUrl);
  await expect(page.getByTestId('tab-backup')).toBeVisible();
  await expect(page.getByTestId('tab-fingerprints')).toHaveCount(0);
  const dev = new URL(server.appUrl);
  dev.search = '?dev';
  await page.goto(dev.href);
  await page.getByTestId('tab-fingerprints').click();
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(folder);
  await expect(page.getByTestId('hash-status')).toHaveText(`Done: ${expected.size} of ${expected.size} files`);
  const rows = await page
    .locator('[data-testid=hash-table] tr')
    .evaluateAll((trs) => trs.map((tr) => [tr.getAttribute('data-path'), tr.querySelector('.sha1')?.textContent]));
  expect(new Map(rows as [string, string][])).toEqual(expected);
  expect(errors).toEqual([]);
  // The token moved from the URL fragment into storage.
  expect(page.url()).not.toContain('token=');
});
