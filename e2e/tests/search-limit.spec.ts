import { expect, test, type Page } from '@playwright/test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { backUp, withoutReadAhead } from '../page';
import { startServer, type RunningServer } from '../server';

// A search answers at most 1 000 000 matches (wasm-core's MAX_MATCHES; docs/SEARCH.md,
// "Limits and risks"), in the page as on the server: every match is held in memory and
// answered whole. A file of 1 100 000 "a" (its chunks all alike, so the unique chunks hold
// few offsets and only the walk of the recipe passes the limit) is refused with a clear
// error wherever the search runs, with either engine, and the page searches on after it. A
// files-only search of the same word answers one hit per file. A refused search keeps the
// search workers and what they hold: the searches after it start no worker and fetch nothing
// again.

let server: RunningServer;
let root: string;

// These tests check what a first search reads itself: the tab's read-ahead is off (the
// read-ahead's own test turns it on).
test.beforeEach(async ({ context }) => withoutReadAhead(context));

test.beforeAll(async () => {
  server = await startServer();
  root = mkdtempSync(path.join(tmpdir(), 'ditto-limit-'));
  mkdirSync(path.join(root, 'data'));
  writeFileSync(path.join(root, 'data', 'many.txt'), Buffer.alloc(1_100_000, 'a'));
  writeFileSync(path.join(root, 'data', 'few.txt'), 'one needle here');
});
test.afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

let runs = 0;

/** The error of the search started last. */
const failed = (page: Page) => page.locator(`[data-testid=search-error][data-seq="${runs}"]`);

async function start(page: Page, keyword: string, where: string, engine: 'dedup' | 'naive' = 'dedup') {
  await page.getByTestId('search-where').selectOption(where);
  await page.getByTestId('search-keywords').fill(keyword);
  await page.getByTestId(engine === 'dedup' ? 'search-start' : 'search-naive').click();
  runs++;
}

test('a search of more matches than a search answers is refused with a clear error, wherever it runs', async ({
  page,
}) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const workersStarted: string[] = [];
  page.on('worker', (w) => workersStarted.push(w.url()));
  let ranges = 0;
  page.on('request', (r) => {
    if (/\/containers\/\d+$/.test(new URL(r.url()).pathname)) ranges++;
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await backUp(page, path.join(root, 'data'), 'limit');
  await page.getByTestId('tab-search').click();

  // The server's own refusal (422 too_many_matches) is shown as it says it.
  await start(page, 'a', 'server');
  await expect(failed(page)).toContainText('match more than 1000000 times', { timeout: 60_000 });
  // `auto` asks the server first (the page holds nothing yet), which refuses, then searches
  // in the page, which refuses too; then in the page, DedupSearch and the naive search.
  let workersAfterFirst = 0;
  for (const [where, engine] of [
    ['auto', 'dedup'],
    ['page', 'dedup'],
    ['page', 'naive'],
  ] as const) {
    await start(page, 'a', where, engine);
    await expect(failed(page), `${where} ${engine}`).toContainText('The keywords match more than 1,000,000 times', {
      timeout: 60_000,
    });
    await expect(page.locator('[data-testid=search-done]')).toHaveCount(0);
    workersAfterFirst ||= workersStarted.length;
  }
  expect(workersAfterFirst, 'the search workers started').toBeGreaterThan(0);
  expect(ranges, 'the first search in the page read the containers').toBeGreaterThan(0);
  const rangesRead = ranges;

  // Files only asks for one hit per keyword and file: the common word is found, wherever
  // the search runs.
  await page.getByTestId('search-files-only').check();
  for (const where of ['server', 'page'] as const) {
    await start(page, 'a', where);
    const found = page.locator(`[data-testid=search-done][data-engine=dedup][data-seq="${runs}"]`);
    await expect(found, where).toBeVisible({ timeout: 60_000 });
    await expect(found, where).toHaveAttribute('data-matches', '1');
  }
  await page.getByTestId('search-files-only').uncheck();

  // The page searches on: a rarer keyword is found, in the page.
  await start(page, 'needle', 'page');
  const done = page.locator(`[data-testid=search-done][data-engine=dedup][data-seq="${runs}"]`);
  await expect(done).toBeVisible({ timeout: 60_000 });
  await expect(done).toHaveAttribute('data-matches', '1');
  await expect(page.getByTestId('search-error')).toHaveCount(0);
  // From the workers that searched first, and what they cached then.
  await expect(done).toHaveAttribute('data-ranges-read', '0');
  expect(ranges).toBe(rangesRead);
  expect(workersStarted.length, 'workers started after a refused search').toBe(workersAfterFirst);
  expect(errors).toEqual([]);
});
