import { expect, test, type Page } from '@playwright/test';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { npmVersions, walk } from '../datasets';
import { expectSame, pageHits, scanFolders as scanAll } from '../hits';
import { backUp, crashOnNext, withoutReadAhead } from '../page';
import { repoJson, settleLayout, startServer, type RunningServer } from '../server';

// In-page search (issue 7): DedupSearch over three stored releases must find exactly what a
// plain scan of the source folders finds, and exactly what the page's naive search finds.
const PKG = process.env.DITTO_E2E_PACKAGE ?? 'preact';

let server: RunningServer;
let folders: string[];
const ids: number[] = [];

test.describe.configure({ mode: 'serial' });

// These tests check what a first search reads itself: the tab's read-ahead is off (the
// read-ahead's own test turns it on).
test.beforeEach(async ({ context }) => withoutReadAhead(context));

test.beforeAll(async () => {
  folders = npmVersions(PKG, 3);
  server = await startServer();
});
test.afterAll(async () => {
  await server?.stop();
});

const api = <T>(p: string) => repoJson<T>(server, p);

/** The oracle: every occurrence of each keyword in the three folders (hits.ts). */
const scanFolders = (keywords: Buffer[], filesOnly = false, only?: { version: number; path: string }) =>
  scanAll(folders, ids, keywords, { filesOnly, only });

/** Searches started in the page so far: each result carries its run number. */
let runs = 0;

async function fillQuery(page: Page, keywords: string[], opts: { hex?: boolean; filesOnly?: boolean }) {
  await page.getByTestId('search-keywords').fill(keywords.join('\n'));
  await page.getByTestId('search-hex').setChecked(!!opts.hex);
  await page.getByTestId('search-files-only').setChecked(!!opts.filesOnly);
}

async function search(page: Page, keywords: string[], opts: { hex?: boolean; filesOnly?: boolean } = {}) {
  await fillQuery(page, keywords, opts);
  await page.getByTestId('search-start').click();
  const done = page.locator(`[data-testid=search-done][data-engine=dedup][data-seq="${++runs}"]`);
  await expect(done).toBeVisible({ timeout: 120_000 });
  return done;
}

/** The page's search workers running now. */
const searchWorkers = (page: Page) => page.workers().filter((w) => w.url().includes('searchWorker'));

async function naiveMatchesToo(page: Page) {
  await page.getByTestId('search-naive').click();
  const done = page.locator(`[data-testid=search-done][data-engine=naive][data-seq="${++runs}"]`);
  await expect(done).toBeVisible({ timeout: 120_000 });
  await expect(page.getByTestId('search-compare')).toHaveAttribute('data-identical', 'true');
}

/** Keywords cut across real chunk boundaries of a stored file (hex: any bytes). */
async function boundaryKeywords(): Promise<{ hex: string[]; bytes: Buffer[] }> {
  const v = await api<{ manifest: { entries: { path: string; kind: string; recipe: string[] }[] } }>(
    `/versions/${ids[1]}`,
  );
  const listing = await api<{ containers: { chunks: { fp: string; raw_len: number }[] }[] }>('/containers');
  const len = new Map(listing.containers.flatMap((c) => c.chunks.map((ch) => [ch.fp, ch.raw_len] as const)));
  const big = v.manifest.entries
    .filter((e) => e.kind === 'file' && e.recipe.length >= 4)
    .sort((a, b) => b.recipe.length - a.recipe.length)[0];
  expect(big, 'a stored file with 4+ chunks').toBeTruthy();
  const data = readFileSync(path.join(folders[1], big.path));
  const cuts: number[] = [];
  let at = 0;
  for (const fp of big.recipe.slice(0, -1)) cuts.push((at += len.get(fp)!));
  // Across a border in the middle, and one-byte partials on either side (tiny records).
  // For the latter, a border where the chunk on the one-byte side holds nothing else of the
  // keyword (no match, no longer partial at either end), so that only its tiny record
  // completes the match.
  const starts = [0, ...cuts];
  const ends = [...cuts, data.length];
  const longest = (chunk: Buffer, k: Buffer, atEnd: boolean) => {
    let best = 0;
    for (let j = 1; j < k.length && j <= chunk.length; j++) {
      const part = atEnd ? k.subarray(0, j) : k.subarray(k.length - j);
      if ((atEnd ? chunk.subarray(chunk.length - j) : chunk.subarray(0, j)).equals(part)) best = j;
    }
    return best;
  };
  const tinyAt = (before: number, after: number) => {
    const side = before === 1 ? 0 : 1; // which chunk of the pair holds one byte
    const i = cuts.findIndex((c, i) => {
      if (i === 0 || i + 1 >= cuts.length) return false;
      const k = data.subarray(c - before, c + after);
      const chunk = data.subarray(starts[i + side], ends[i + side]);
      return (
        chunk.indexOf(k) < 0 &&
        longest(chunk, k, true) === (side === 0 ? 1 : 0) &&
        longest(chunk, k, false) === (side === 1 ? 1 : 0)
      );
    });
    expect(i, `a chunk border where only a tiny record completes a ${before} + ${after} match`).toBeGreaterThan(0);
    return [cuts[i] - before, cuts[i] + after];
  };
  const ranges = [[cuts[0] - 7, cuts[0] + 9], tinyAt(1, 5), tinyAt(5, 1)];
  const bytes = ranges.map(([a, b]) => data.subarray(a, b));
  return { bytes, hex: bytes.map((b) => b.toString('hex').replace(/(..)/g, '$1 ').trim()) };
}

test('DedupSearch in the page finds exactly what a scan of the folders finds', async ({ page }) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  for (const f of folders) {
    await page.getByTestId('folder-input').setInputFiles(f);
    await page.getByTestId('source-label').fill(PKG);
    await page.getByTestId('backup-start').click();
    const done = page.locator(`[data-testid=backup-done]:not([data-version="${ids.at(-1) ?? 0}"])`);
    await expect(done).toBeVisible({ timeout: 120_000 });
    ids.push(Number(await done.getAttribute('data-version')));
  }
  // Manifest paths are relative to the folder that was backed up.
  const m = await api<{ manifest: { entries: { path: string; kind: string }[] } }>(`/versions/${ids[0]}`);
  expect(
    m.manifest.entries
      .filter((e) => e.kind === 'file')
      .map((e) => e.path)
      .sort(),
  ).toEqual(walk(folders[0]));

  await page.getByTestId('tab-search').click();
  // The tab grows the workers' memory for the first search while the keywords are typed.
  await expect(page.getByTestId('search-panel')).toHaveAttribute('data-memory-ready', /^[1-9]\d*$/);
  // In the page, chosen: `auto` sends a page's first search to the server when the page holds
  // nothing of the repository (the last test here).
  await page.getByTestId('search-where').selectOption('page');

  // Text keywords, overlapping ones included.
  const text = ['createElement', 'options', 'Element', 'vnode'];
  const done = await search(page, text);
  const want = scanFolders(text.map((k) => Buffer.from(k)));
  const total = [...want.values()].reduce((n, h) => n + h.length, 0);
  expect(total).toBeGreaterThan(100);
  await expect(done).toHaveAttribute('data-matches', String(total));
  expect(want.size).toBeLessThanOrEqual(300); // every file is listed
  expectSame(await pageHits(page), want);
  await expect(page.getByTestId('search-snippet').first()).toContainText(/createElement|options|Element|vnode/);
  const phases = JSON.parse((await done.getAttribute('data-phase-ms'))!);
  expect(Object.keys(phases)).toEqual(['prepare', 'physical', 'logical']);
  await naiveMatchesToo(page);

  // Binary (hex) keywords straddling chunk borders, with one-byte partials.
  const b = await boundaryKeywords();
  const doneHex = await search(page, b.hex, { hex: true });
  const wantHex = scanFolders(b.bytes);
  expect(wantHex.size).toBeGreaterThan(0);
  expectSame(await pageHits(page), wantHex);
  // The results name the keywords as they were searched (hex), whatever the box says since.
  await page.getByTestId('search-hex').setChecked(false);
  await expect(page.locator('.search-results .hit .kw').first()).toHaveText(/^[0-9a-f]{2}( [0-9a-f]{2})*$/);
  await page.getByTestId('search-hex').setChecked(true);
  const records = JSON.parse((await doneHex.getAttribute('data-records'))!);
  expect(records.tiny, 'one-byte partials were stored as tiny records').toBeGreaterThan(0);
  await naiveMatchesToo(page);

  // Files only: the first occurrence of each keyword per file.
  await search(page, text, { filesOnly: true });
  expectSame(
    await pageHits(page),
    scanFolders(
      text.map((k) => Buffer.from(k)),
      true,
    ),
  );
  await naiveMatchesToo(page);

  // Scope: one version, a path filter.
  await page.getByTestId('search-versions').selectOption(String(ids[2]));
  await page.getByTestId('search-path').fill('hooks');
  await search(page, text);
  const scoped = scanFolders(
    text.map((k) => Buffer.from(k)),
    false,
    { version: ids[2], path: 'hooks' },
  );
  expect(scoped.size).toBeGreaterThan(0);
  expectSame(await pageHits(page), scoped);

  // Bad input is refused with a message, not a hang.
  await fillQuery(page, ['zz'], { hex: true });
  await page.getByTestId('search-start').click();
  runs++;
  await expect(page.getByTestId('search-error')).toContainText('invalid hex');
  expect(errors).toEqual([]);
});

/**
 * Opens the app's Search tab in a new page after the first test's backups, counting the
 * page's errors and its `POST search` requests (the server's engine).
 */
async function openSearchTab(page: Page) {
  expect(ids.length, 'the versions backed up by the first test').toBe(3);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  let searches = 0;
  page.on('request', (r) => {
    if (new URL(r.url()).pathname.endsWith('/search')) searches++;
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('tab-search').click();
  return { errors, serverSearches: () => searches };
}

/**
 * Previews the result row of `version`/`rel` in the page and checks it against the file on
 * disk: its whole text, and marks on exactly the bytes the search's hits cover (overlapping
 * hits merged), none found again by the page.
 */
async function previewMatchesFile(page: Page, version: number, rel: string, keywords: Buffer[]) {
  const row = page.locator(`[data-testid=search-file][data-version="${version}"][data-path="${rel}"]`);
  const hits = JSON.parse((await row.getAttribute('data-hits'))!) as [number, number][];
  const data = readFileSync(path.join(folders[ids.indexOf(version)], rel));
  const merged: [number, number][] = [];
  for (const [kw, at] of hits) {
    const last = merged.at(-1);
    if (last && at <= last[1]) last[1] = Math.max(last[1], at + keywords[kw].length);
    else merged.push([at, at + keywords[kw].length]);
  }
  await row.getByTestId('search-preview').click();
  const pre = row.getByTestId('preview-text');
  await expect(pre).toBeVisible({ timeout: 30_000 });
  expect(await pre.textContent()).toBe(data.toString('utf8'));
  await expect(pre).toHaveAttribute('data-marked-by', 'search');
  await expect(pre).toHaveAttribute('data-hits', String(hits.length));
  expect(await pre.locator('mark').allTextContents()).toEqual(
    merged.map(([a, b]) => data.subarray(a, b).toString('utf8')),
  );
  return { row, pre, hits };
}

test("a result previewed in the page: the file's text with exactly the search's hits marked", async ({ page }) => {
  const { errors } = await openSearchTab(page);
  runs = 0;
  await page.getByTestId('search-where').selectOption('page');
  const text = ['createElement', 'options', 'Element', 'vnode'];
  await search(page, text);
  // The row with the most hits whose file the preview shows whole, among those where
  // createElement's hits overlap Element's (one mark each, both hits counted).
  let best: { version: number; rel: string; n: number } | null = null;
  for (const [key, hits] of await pageHits(page)) {
    const [v, rel] = key.split('\0');
    const size = readFileSync(path.join(folders[ids.indexOf(Number(v))], rel)).length;
    if (size < 1 << 20 && hits.some(([kw]) => kw === 0) && hits.length > (best?.n ?? 1))
      best = { version: Number(v), rel, n: hits.length };
  }
  expect(best, 'a file with several hits').toBeTruthy();
  const { row, pre, hits } = await previewMatchesFile(
    page,
    best!.version,
    best!.rel,
    text.map((k) => Buffer.from(k)),
  );
  await expect(row.getByTestId('preview-search-hits')).toContainText(`${hits.length} hits`);
  // Terms typed instead: marked by the text, case-insensitively, over the same file.
  await row.getByTestId('preview-highlight').fill('VNODE');
  await expect(pre).toHaveAttribute('data-marked-by', 'terms');
  const vnodes = ((await pre.textContent())!.match(/vnode/gi) ?? []).length;
  await expect(pre).toHaveAttribute('data-hits', String(vnodes));
  await row.getByTestId('preview-close').click();
  await expect(pre).toHaveCount(0);

  // Binary keywords across chunk borders: the preview marks the bytes the hits name.
  const b = await boundaryKeywords();
  await search(page, b.hex, { hex: true });
  const [first] = [...(await pageHits(page)).keys()];
  const [v, rel] = first.split('\0');
  await previewMatchesFile(page, Number(v), rel, b.bytes);
  expect(errors).toEqual([]);
});

// The server's engine once found fewer matches than the page here (docs/SEARCH.md): this is
// the comparison that would catch it again.
test('DedupSearch on the server finds exactly what the in-page search finds', async ({ page }) => {
  const { errors, serverSearches } = await openSearchTab(page);
  runs = 0;
  const b = await boundaryKeywords();
  const queries: [string[], { hex?: boolean; filesOnly?: boolean }, string][] = [
    [['createElement', 'options', 'Element', 'vnode'], {}, ''],
    [b.hex, { hex: true }, ''],
    [['useState', 'h('], { filesOnly: true }, ''],
    [['createElement', 'options'], {}, 'hooks'],
  ];
  for (const [keywords, opts, filter] of queries) {
    await page.getByTestId('search-path').fill(filter);
    await page.getByTestId('search-where').selectOption('page');
    const inPage = await search(page, keywords, opts);
    await expect(inPage).toHaveAttribute('data-where', 'page');
    const matches = (await inPage.getAttribute('data-matches'))!;
    const want = await pageHits(page);
    expect(want.size).toBeGreaterThan(0);
    await page.getByTestId('search-where').selectOption('server');
    const onServer = await search(page, keywords, opts);
    await expect(onServer).toHaveAttribute('data-where', 'server');
    await expect(onServer).toHaveAttribute('data-matches', matches);
    expectSame(await pageHits(page), want);
    // Snippets come from the recipes the server sent.
    await expect(page.getByTestId('search-snippet').first()).toBeVisible();
  }
  expect(serverSearches()).toBe(queries.length);
  // Cancelled, the server's search is aborted (its request fails in the page at once, not
  // when the server answers), and nothing of it is shown: the error says so.
  let reached!: () => void;
  const atServer = new Promise<void>((r) => (reached = r));
  await page.route('**/api/v1/repos/default/search', async (route) => {
    reached();
    await new Promise((r) => setTimeout(r, 3000));
    await route.continue().catch(() => {}); // the page gave up on it
  });
  const aborted = page.waitForEvent('requestfailed', (r) => r.url().endsWith('/search'));
  await fillQuery(page, ['vnode'], {});
  await page.getByTestId('search-start').click();
  await atServer;
  await page.getByTestId('search-cancel').click();
  await aborted;
  await expect(page.getByTestId('search-error')).toContainText('search cancelled', { timeout: 1500 });
  const cancelledRun = ++runs;
  await page.waitForTimeout(3000);
  await expect(page.locator(`[data-testid=search-done][data-seq="${cancelledRun}"]`)).toHaveCount(0);
  await page.unroute('**/api/v1/repos/default/search');
  // The small e2e repository is searched in the page when the choice is automatic, once
  // the workers Cancel replaced have read their device files: until then the server answers,
  // and the page searches behind it.
  await page.getByTestId('search-where').selectOption('auto');
  const replaced = await search(page, ['vnode']);
  await expect(replaced).toHaveAttribute('data-where', 'server');
  await expect(replaced).toHaveAttribute('data-filled', 'true', { timeout: 60_000 });
  const inPage = await search(page, ['vnode']);
  await expect(inPage).toHaveAttribute('data-where', 'page');
  await expect(inPage).toHaveAttribute('data-stored-bytes-read', '0');
  expect(errors).toEqual([]);
});

test('a search worker that crashes mid-search is replaced and the search starts over: same hits as a scan', async ({
  page,
}) => {
  const { errors } = await openSearchTab(page);
  runs = 0;
  await page.getByTestId('search-where').selectOption('page');
  const text = ['createElement', 'options', 'Element', 'vnode'];
  // A first search starts the workers (and fills their caches).
  await search(page, ['useState']);
  const workers = searchWorkers(page);
  expect(workers.length).toBeGreaterThan(0);
  // One worker crashes on the next container it is sent to scan, leaving that job unanswered.
  await crashOnNext(workers[0], { bridge: 'call', method: 'scan' });
  const replaced = page.waitForEvent('worker', (w) => w.url().includes('searchWorker'));
  const done = await search(page, text);
  await replaced;
  expectSame(await pageHits(page), scanFolders(text.map((k) => Buffer.from(k))));
  await expect(done).toHaveAttribute('data-where', 'page');
  await expect(page.getByTestId('search-error')).toHaveCount(0);
  expect(errors).toEqual([]);
});

test('a worker that does not hold the recipes the page counts on is sent them again: same hits as a scan', async ({
  page,
}) => {
  const { errors } = await openSearchTab(page);
  runs = 0;
  await page.getByTestId('search-where').selectOption('page');
  await expect.poll(() => searchWorkers(page).length).toBeGreaterThan(0);
  // Each worker keeps the recipes of its first logical phase under another key than the
  // page's, as a worker whose earlier walk failed would: the page's account is then wrong.
  for (const w of searchWorkers(page))
    await w.evaluate(() => {
      const scope = self as unknown as {
        onmessage: ((e: MessageEvent) => unknown) | null;
        logicalCalls?: string[];
      };
      const serve = scope.onmessage!;
      let rekeyed = false;
      scope.logicalCalls = [];
      scope.onmessage = (e: MessageEvent) => {
        const msg = e.data as {
          bridge?: string;
          method?: string;
          arg?: { recipes?: { key: number; files?: unknown } };
        };
        const recipes = msg.bridge === 'call' && msg.method === 'logical' ? msg.arg?.recipes : undefined;
        if (recipes) {
          scope.logicalCalls!.push(recipes.files ? 'files' : 'key');
          if (recipes.files && !rekeyed) {
            rekeyed = true;
            recipes.key = -1;
          }
        }
        return serve(e);
      };
    });
  const text = ['createElement', 'options'];
  await search(page, ['useState']);
  // The same scope: the page sends only the key, the worker refuses it, and the search
  // starts over with the recipes.
  const done = await search(page, text);
  expectSame(await pageHits(page), scanFolders(text.map((k) => Buffer.from(k))));
  await expect(done).toHaveAttribute('data-where', 'page');
  await expect(page.getByTestId('search-error')).toHaveCount(0);
  const calls = (
    await Promise.all(
      searchWorkers(page).map((w) =>
        w.evaluate(() => (self as unknown as { logicalCalls?: string[] }).logicalCalls ?? []),
      ),
    )
  ).flat();
  expect(calls.join(' ')).toContain('files key files');
  expect(errors).toEqual([]);
});

test('auto: a page holding nothing of the repository asks the server, then searches in the page from what it cached', async ({
  page,
}) => {
  const { errors, serverSearches } = await openSearchTab(page);
  await expect(page.getByTestId('search-where')).toHaveValue('auto');
  runs = 0;
  const text = ['createElement', 'options', 'Element', 'vnode'];
  const want = scanFolders(text.map((k) => Buffer.from(k)));

  // A new browser context: nothing in the workers, nothing on the device.
  const first = await search(page, text);
  await expect(first).toHaveAttribute('data-where', 'server');
  expectSame(await pageHits(page), want);
  const matches = (await first.getAttribute('data-matches'))!;
  // The page runs the same search behind the server's answer, caching what it fetched.
  await expect(first).toHaveAttribute('data-filled', 'true', { timeout: 60_000 });
  expect(serverSearches()).toBe(1);

  // From then on the page searches, from its caches: nothing fetched, the same hits.
  const second = await search(page, text);
  await expect(second).toHaveAttribute('data-where', 'page');
  await expect(second).toHaveAttribute('data-stored-bytes-read', '0');
  await expect(second).toHaveAttribute('data-matches', matches);
  expectSame(await pageHits(page), want);
  const b = await boundaryKeywords();
  const hex = await search(page, b.hex, { hex: true });
  await expect(hex).toHaveAttribute('data-where', 'page');
  await expect(hex).toHaveAttribute('data-stored-bytes-read', '0');
  expectSame(await pageHits(page), scanFolders(b.bytes));
  expect(serverSearches()).toBe(1);
  expect(errors).toEqual([]);
});

test("auto: the server asked ahead for a repository that was above the workers' cache is called off when it is smaller now; the page searches", async ({
  page,
}) => {
  // The test's own context: the first search is the server's, and the page caches
  // everything behind it.
  const { errors, serverSearches } = await openSearchTab(page);
  runs = 0;
  const text = ['createElement', 'options'];
  const first = await search(page, text);
  await expect(first).toHaveAttribute('data-where', 'server');
  await expect(first).toHaveAttribute('data-filled', 'true', { timeout: 60_000 });

  // One version, the repository's size read once as above the workers' cache: the server
  // searches it.
  const listed = /\/versions\?raw_bytes=true$/;
  await page.route(
    listed,
    async (route) => {
      const listing = (await (await route.fetch()).json()) as object;
      await route.fulfill({ json: { ...listing, raw_bytes: 2 ** 40 } });
    },
    { times: 1 },
  );
  await page.getByTestId('search-versions').selectOption(String(ids[2]));
  const want = scanFolders(
    text.map((k) => Buffer.from(k)),
    false,
    { version: ids[2], path: '' },
  );
  expect(want.size).toBeGreaterThan(0);
  const large = await search(page, text);
  await expect(large).toHaveAttribute('data-where', 'server');
  expectSame(await pageHits(page), want);
  expect(serverSearches()).toBe(2);

  // Again: the page asks the server at once, as the size it last read says, and calls that
  // request off once the repository reads as small again; the page's own search answers.
  // The request is held, so that only the call-off can end it.
  let held = false;
  let calledOff = 0;
  page.on('requestfailed', (r) => {
    if (new URL(r.url()).pathname.endsWith('/search')) calledOff++;
  });
  await page.route('**/api/v1/repos/default/search', () => {
    held = true;
  });
  const small = await search(page, text);
  await expect(small).toHaveAttribute('data-where', 'page');
  expectSame(await pageHits(page), want);
  expect(held).toBe(true);
  await expect.poll(() => calledOff).toBe(1);
  await page.unroute('**/api/v1/repos/default/search');
  expect(serverSearches()).toBe(3);
  expect(errors).toEqual([]);
});

test('the tab reads ahead while the keywords are typed and keeps what it read on the device: the first search scans from memory; one that stops it is answered by the server', async ({
  browser,
}) => {
  const text = ['createElement', 'options', 'Element', 'vnode'];
  const want = scanFolders(text.map((k) => Buffer.from(k)));
  // New contexts, with the read-ahead on (its default): nothing in the workers or on the device.
  const context = await browser.newContext();
  const slow = await browser.newContext();
  try {
    const page = await context.newPage();
    let ranges = 0;
    page.on('request', (r) => {
      if (/\/containers\/\d+$/.test(new URL(r.url()).pathname)) ranges++;
    });
    const { errors, serverSearches } = await openSearchTab(page);
    const ahead = page.getByTestId('search-read-ahead');
    await expect(ahead).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
    expect(Number(await ahead.getAttribute('data-stored-bytes'))).toBeGreaterThan(0);
    const readAhead = ranges;
    expect(readAhead, 'ranges read before any search').toBeGreaterThan(0);
    // With no search for a while, the workers keep what they read on the device: the page
    // reloaded reads nothing ahead, and holds every chunk once the tab has opened.
    await expect(ahead).toHaveAttribute('data-kept', 'true', { timeout: 60_000 });
    const device = page.getByTestId('search-device-cache');
    await expect.poll(async () => Number(await device.getAttribute('data-bytes'))).toBeGreaterThan(0);
    await page.reload();
    await expect(page.getByTestId('engine-ready')).toBeVisible();
    await page.getByTestId('tab-search').click();
    await expect(page.getByTestId('search-panel')).toHaveAttribute('data-memory-ready', /^\d+$/);
    await expect(ahead).toHaveAttribute('data-state', 'none');
    expect(ranges).toBe(readAhead);
    // `auto`: the page holds every chunk, so it searches itself, from memory.
    runs = 0;
    const first = await search(page, text);
    await expect(first).toHaveAttribute('data-where', 'page');
    await expect(first).toHaveAttribute('data-ranges-read', '0');
    await expect(first).toHaveAttribute('data-stored-bytes-read', '0');
    expectSame(await pageHits(page), want);
    expect(ranges).toBe(readAhead);
    expect(serverSearches()).toBe(0);

    // Unticked, the choice is kept: with nothing on the device (Clear) and the page reloaded,
    // the tab reads nothing ahead.
    await expect(device).toHaveAttribute('data-settled', String(runs));
    await page.getByTestId('search-read-ahead-on').uncheck();
    await page.getByTestId('search-device-clear').click();
    await expect(device).toHaveAttribute('data-bytes', '0');
    await page.reload();
    await expect(page.getByTestId('engine-ready')).toBeVisible();
    const before = ranges;
    await page.getByTestId('tab-search').click();
    // Set once the tab has done what it does when it opens (the read-ahead included).
    await expect(page.getByTestId('search-panel')).toHaveAttribute('data-memory-ready', /^\d+$/);
    await expect(ahead).toHaveAttribute('data-state', 'off');
    await expect(page.getByTestId('search-read-ahead-on')).not.toBeChecked();
    expect(ranges).toBe(before);
    expect(errors).toEqual([]);

    // A search typed before the read-ahead is done stops it (its ranges held back here until
    // the server has been asked): the server answers, and the page reads the rest behind it.
    const second = await slow.newPage();
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    await second.route('**/containers/*', async (route) => {
      await held;
      await route.continue();
    });
    const tab = await openSearchTab(second);
    const stopped = second.getByTestId('search-read-ahead');
    await expect(stopped).toHaveAttribute('data-state', 'running');
    runs = 0;
    await fillQuery(second, text, {});
    await second.getByTestId('search-start').click();
    await expect.poll(tab.serverSearches).toBe(1);
    release();
    const cold = second.locator(`[data-testid=search-done][data-engine=dedup][data-seq="${++runs}"]`);
    await expect(cold).toBeVisible({ timeout: 120_000 });
    await expect(stopped).toHaveAttribute('data-state', 'stopped');
    await expect(cold).toHaveAttribute('data-where', 'server');
    expectSame(await pageHits(second), want);
    await expect(cold).toHaveAttribute('data-filled', 'true', { timeout: 60_000 });
    const warm = await search(second, text);
    await expect(warm).toHaveAttribute('data-where', 'page');
    await expect(warm).toHaveAttribute('data-stored-bytes-read', '0');
    expectSame(await pageHits(second), want);
    expect(tab.serverSearches()).toBe(1);
    expect(tab.errors).toEqual([]);
  } finally {
    await context.close();
    await slow.close();
  }
});

test('auto: when the page cannot cache what the server answered, it says so, and the answer stands', async ({
  page,
}) => {
  const { errors } = await openSearchTab(page);
  runs = 0;
  const text = ['createElement', 'options'];
  // Every read of a container by the page fails: only the search behind the server's answer
  // makes any.
  await page.route('**/containers/*', (route) => route.abort('connectionreset'));
  const first = await search(page, text);
  await expect(first).toHaveAttribute('data-where', 'server');
  expectSame(await pageHits(page), scanFolders(text.map((k) => Buffer.from(k))));
  await expect(first).toHaveAttribute('data-filled', 'failed', { timeout: 60_000 });
  await expect(page.getByTestId('search-filling')).toContainText('caching it in the page failed');
  await expect(page.getByTestId('search-error')).toHaveCount(0);
  expect(errors).toEqual([]);
});

test('unticking "Keep on this device" while the page searches behind the server\'s answer: nothing of that search is kept', async ({
  page,
}) => {
  const { errors } = await openSearchTab(page);
  runs = 0;
  const text = ['createElement', 'options', 'Element', 'vnode'];
  const want = scanFolders(text.map((k) => Buffer.from(k)));
  const device = page.getByTestId('search-device-cache');
  // The page's reads of containers (here only the search behind the server's answer makes
  // any) wait until the box is unticked: that search has then told its workers to keep their
  // caches on the device, and has scanned nothing yet.
  let open = () => {};
  const gate = new Promise<void>((r) => (open = r));
  let reached = () => {};
  const reading = new Promise<void>((r) => (reached = r));
  await page.route('**/containers/*', async (route) => {
    reached();
    await gate;
    await route.continue();
  });
  const first = await search(page, text);
  await expect(first).toHaveAttribute('data-where', 'server');
  await reading;
  await page.getByTestId('search-device-keep').uncheck();
  open();
  await expect(first).toHaveAttribute('data-filled', 'true', { timeout: 60_000 });

  // The next search's idle work ends after the fill's (summaries, the device written or
  // not): once it has, no file holds what either search cached.
  await page.getByTestId('search-where').selectOption('page');
  await search(page, text);
  expectSame(await pageHits(page), want);
  await expect(device).toHaveAttribute('data-settled', '2');
  expect(await deviceCacheFiles(page)).toEqual([]);
  await expect(device).toHaveAttribute('data-bytes', '0');
  expect(errors).toEqual([]);
});

/** The names of the search cache files of the page's origin (none when the directory is gone). */
async function deviceCacheFiles(page: Page): Promise<string[]> {
  return page.evaluate(async () => {
    const root = await navigator.storage.getDirectory();
    const dir = await root.getDirectoryHandle('ditto-search-cache').catch(() => null);
    const names: string[] = [];
    if (dir) for await (const name of dir.keys()) names.push(name);
    return names.sort();
  });
}

/**
 * The fingerprints (hex) in the tables of the search cache files of the page's origin
 * (docs/SEARCH.md, "The device cache file"); null while a file cannot be read (a worker
 * holds it).
 */
async function deviceCacheFps(page: Page): Promise<string[] | null> {
  return page.evaluate(async () => {
    const root = await navigator.storage.getDirectory();
    const dir = await root.getDirectoryHandle('ditto-search-cache').catch(() => null);
    const out: string[] = [];
    if (!dir) return out;
    try {
      for await (const name of dir.keys()) {
        if (!name.endsWith('.bin')) continue;
        const b = new Uint8Array(await (await (await dir.getFileHandle(name)).getFile()).arrayBuffer());
        const v = new DataView(b.buffer);
        let at = 8; // magic
        at += 4 + v.getUint32(at, true); // key
        const n = v.getUint32(at, true);
        at += 4;
        for (let i = 0; i < n; i++, at += 29)
          out.push([...b.subarray(at, at + 20)].map((x) => x.toString(16).padStart(2, '0')).join(''));
      }
    } catch {
      return null;
    }
    return out;
  });
}

/** Flips one byte of the `which`-th search cache file (by name) of the page's origin: at `at`, or its last byte. */
async function damageCacheFile(page: Page, which: number, at: number | 'last') {
  await page.evaluate(
    async ({ which, at }) => {
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('ditto-search-cache');
      const names: string[] = [];
      for await (const name of dir.keys()) if (name.endsWith('.bin')) names.push(name);
      const handle = await dir.getFileHandle(names.sort()[which]);
      const file = await handle.getFile();
      const pos = at === 'last' ? file.size - 1 : at;
      const byte = new Uint8Array(await file.slice(pos, pos + 1).arrayBuffer())[0];
      const w = await handle.createWritable({ keepExistingData: true });
      await w.write({ type: 'write', position: pos, data: new Uint8Array([byte ^ 1]) });
      await w.close();
    },
    { which, at },
  );
}

test('the first search after a reload scans what the workers kept on the device; damage there is never trusted', async ({
  page,
}) => {
  expect(ids.length, 'the versions backed up by the first test').toBe(3);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const text = ['createElement', 'options', 'Element', 'vnode'];
  const want = scanFolders(text.map((k) => Buffer.from(k)));
  const device = page.getByTestId('search-device-cache');
  // The app's address carries the token in its fragment: going to it again would not reload.
  const openSearch = async () => {
    if (page.url().startsWith('http')) await page.reload();
    else await page.goto(server.appUrl);
    await expect(page.getByTestId('engine-ready')).toBeVisible();
    await page.getByTestId('tab-search').click();
    await page.getByTestId('search-where').selectOption('page');
    runs = 0;
  };

  await openSearch();
  await expect(device).toHaveAttribute('data-bytes', '0');
  const cold = await search(page, text);
  expectSame(await pageHits(page), want);
  const coldRead = Number(await cold.getAttribute('data-stored-bytes-read'));
  expect(coldRead).toBeGreaterThan(0);
  // Searches sent at once, while the workers summarise and write what they cached: a write
  // a search overtakes gives way (its `.tmp` file removed, the old file left) and the
  // search's idle time writes the file again; the reload below finds every chunk in it.
  await search(page, ['vnode']);
  await search(page, ['options']);
  // Once the workers have summarised and written what they cached, the tab says so.
  await expect(device).toHaveAttribute('data-settled', '3');
  expect(Number(await device.getAttribute('data-bytes'))).toBeGreaterThan(0);
  expect(
    await page.evaluate(async () => {
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('ditto-search-cache');
      const names: string[] = [];
      for await (const name of dir.keys()) names.push(name);
      return names.filter((n) => n.endsWith('.tmp'));
    }),
  ).toEqual([]);

  // A reload: the first search reads every chunk from the device, with its summary.
  await openSearch();
  const reloaded = await search(page, text);
  expectSame(await pageHits(page), want);
  await expect(reloaded).toHaveAttribute('data-stored-bytes-read', '0');
  await expect(reloaded).toHaveAttribute('data-ranges-read', '0');
  expect(Number(await reloaded.getAttribute('data-ruled-out-bytes'))).toBeGreaterThan(0);
  await expect(device).toHaveAttribute('data-settled', '1');

  // One chunk's bytes changed on the device: that chunk alone is fetched again; the results
  // are still exact, and the file is written again without the damage.
  await damageCacheFile(page, 0, 'last');
  await openSearch();
  const oneBad = await search(page, text);
  expectSame(await pageHits(page), want);
  const oneBadRead = Number(await oneBad.getAttribute('data-stored-bytes-read'));
  expect(oneBadRead).toBeGreaterThan(0);
  expect(oneBadRead).toBeLessThan(coldRead);
  await expect(device).toHaveAttribute('data-settled', '1');
  await openSearch();
  await expect(await search(page, text)).toHaveAttribute('data-stored-bytes-read', '0');
  await expect(device).toHaveAttribute('data-settled', '1');

  // A file whose table is damaged is not read at all: its worker's chunks are fetched.
  await damageCacheFile(page, 0, 30);
  await openSearch();
  const badTable = await search(page, text);
  expectSame(await pageHits(page), want);
  expect(Number(await badTable.getAttribute('data-stored-bytes-read'))).toBeGreaterThan(oneBadRead);
  await expect(device).toHaveAttribute('data-settled', '1');

  // Clear: the files are deleted, and the next page's first search is cold again.
  await page.getByTestId('search-device-clear').click();
  await expect(device).toHaveAttribute('data-bytes', '0');
  expect(
    await page.evaluate(async () => {
      const root = await navigator.storage.getDirectory();
      const names: string[] = [];
      for await (const name of root.keys()) names.push(name);
      return names;
    }),
  ).not.toContain('ditto-search-cache');
  await openSearch();
  expect(Number(await (await search(page, text)).getAttribute('data-stored-bytes-read'))).toBeGreaterThan(oneBadRead);
  expectSame(await pageHits(page), want);
  await expect(device).toHaveAttribute('data-settled', '1');

  // Turned off: what is kept is deleted, nothing is written after a search, and the choice
  // holds across a reload.
  const keep = page.getByTestId('search-device-keep');
  await keep.uncheck();
  await expect(device).toHaveAttribute('data-bytes', '0');
  await search(page, ['vnode']);
  await expect(device).toHaveAttribute('data-settled', '2');
  await expect(device).toHaveAttribute('data-bytes', '0');
  await openSearch();
  await expect(keep).not.toBeChecked();
  expect(Number(await (await search(page, text)).getAttribute('data-stored-bytes-read'))).toBeGreaterThan(oneBadRead);
  await expect(device).toHaveAttribute('data-settled', '1');
  await expect(device).toHaveAttribute('data-bytes', '0');
  expect(errors).toEqual([]);
});

test('auto: a search started while the workers read their device files is answered by the server; the page then searches from the files', async ({
  page,
}) => {
  const text = ['createElement', 'options', 'Element', 'vnode'];
  const want = scanFolders(text.map((k) => Buffer.from(k)));
  const { errors, serverSearches } = await openSearchTab(page);
  const device = page.getByTestId('search-device-cache');
  runs = 0;
  await page.getByTestId('search-where').selectOption('page');
  await search(page, text);
  await expect(device).toHaveAttribute('data-settled', '1');
  expect(Number(await device.getAttribute('data-bytes'))).toBeGreaterThan(0);

  // A reload whose workers are kept from reading their files: the page holds back every
  // `loadCache` call until released.
  await page.reload();
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  let ranges = 0;
  page.on('request', (r) => {
    if (/\/containers\/\d+$/.test(new URL(r.url()).pathname)) ranges++;
  });
  await page.evaluate(() => {
    const send = Worker.prototype.postMessage as (this: Worker, msg: unknown, list?: unknown) => void;
    const held: (() => void)[] = [];
    const w = window as unknown as { heldLoads: () => number; releaseLoads: () => void };
    w.heldLoads = () => held.length;
    w.releaseLoads = () => {
      Worker.prototype.postMessage = send;
      for (const go of held.splice(0)) go();
    };
    Worker.prototype.postMessage = function (this: Worker, msg: unknown, list?: unknown) {
      const m = msg as { bridge?: string; method?: string };
      if (m?.bridge === 'call' && m.method === 'loadCache') held.push(() => send.call(this, msg, list));
      else send.call(this, msg, list);
    };
  });
  await page.getByTestId('tab-search').click();
  await expect(page.getByTestId('search-where')).toHaveValue('auto');
  await expect
    .poll(() => page.evaluate(() => (window as unknown as { heldLoads: () => number }).heldLoads()))
    .toBeGreaterThan(0);
  runs = 0;
  const first = await search(page, text);
  await expect(first).toHaveAttribute('data-where', 'server');
  expectSame(await pageHits(page), want);
  expect(serverSearches()).toBe(1);
  // The search behind the answer waits for the files, then scans them: nothing fetched.
  await page.evaluate(() => (window as unknown as { releaseLoads: () => void }).releaseLoads());
  await expect(first).toHaveAttribute('data-filled', 'true', { timeout: 60_000 });
  const second = await search(page, text);
  await expect(second).toHaveAttribute('data-where', 'page');
  await expect(second).toHaveAttribute('data-stored-bytes-read', '0');
  expectSame(await pageHits(page), want);
  expect(ranges, 'container ranges read after the reload').toBe(0);
  expect(serverSearches()).toBe(1);
  await page.getByTestId('search-device-clear').click();
  await expect(device).toHaveAttribute('data-bytes', '0');
  expect(errors).toEqual([]);
});

test('a repeat search reuses what the previous one fetched: same results, no container read again', async ({
  page,
}) => {
  expect(ids.length, 'the versions backed up by the first test').toBe(3);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const workersStarted: string[] = [];
  page.on('worker', (w) => workersStarted.push(w.url()));
  // Every request of the page and its workers, by kind.
  const seen = { ranges: 0, listings: 0, locations: 0, manifests: 0 };
  page.on('request', (r) => {
    const p = new URL(r.url()).pathname;
    if (/\/containers\/\d+$/.test(p)) seen.ranges++;
    else if (p.endsWith('/containers')) seen.listings++;
    else if (/\/versions\/\d+\/locations$/.test(p)) seen.locations++;
    else if (/\/versions\/\d+$/.test(p)) seen.manifests++;
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  // Opening the tab reads what a search of every version needs first (manifests, the chunk
  // table), while the keywords are typed.
  const listed = page.waitForResponse((r) => new URL(r.url()).pathname.endsWith('/containers'));
  await page.getByTestId('tab-search').click();
  await listed;
  await page.getByTestId('search-where').selectOption('page');
  expect(seen.ranges, 'nothing is scanned before a search').toBe(0);
  runs = 0; // a new page numbers its searches from 1

  const text = ['createElement', 'options', 'Element', 'vnode'];
  const first = await search(page, text);
  const want = scanFolders(text.map((k) => Buffer.from(k)));
  expectSame(await pageHits(page), want);
  const cold = { ...seen };
  expect(cold.ranges, 'the first search reads containers (and the test sees workers fetch)').toBeGreaterThan(0);
  // Three versions to locate: the repository's chunk table, in one request.
  expect(cold.listings).toBe(1);
  expect(cold.locations).toBe(0);
  expect(cold.manifests).toBe(3);
  expect(Number(await first.getAttribute('data-ranges-read'))).toBe(cold.ranges);
  // Read when the tab opened, not again by the search.
  await expect(first).toHaveAttribute('data-prepare-cached', 'true');
  const matches = (await first.getAttribute('data-matches'))!;

  // The same query again: identical results from the workers' caches.
  const again = await search(page, text);
  expectSame(await pageHits(page), want);
  await expect(again).toHaveAttribute('data-matches', matches);
  await expect(again).toHaveAttribute('data-ranges-read', '0');
  await expect(again).toHaveAttribute('data-stored-bytes-read', '0');
  await expect(again).toHaveAttribute('data-prepare-cached', 'true');
  // Between the searches the workers summarised the trigrams of what they cached: the blocks
  // of them where no keyword starts were not read, and the results are the same.
  expect(Number(await again.getAttribute('data-ruled-out-bytes'))).toBeGreaterThan(0);

  // A second click while a search runs starts nothing (the form's controls are disabled only
  // once a search has run long enough to look busy): one search, one result.
  await page.getByTestId('search-start').dblclick();
  const once = page.locator(`[data-testid=search-done][data-engine=dedup][data-seq="${++runs}"]`);
  await expect(once).toBeVisible();
  await expect(once).toHaveAttribute('data-matches', matches);
  await page.waitForTimeout(1000);
  await expect(page.locator(`[data-testid=search-done][data-seq="${runs + 1}"]`)).toHaveCount(0);

  // Keywords the workers refuse fail that search only: the workers, and what they hold in
  // memory, stay for the next search (no worker started again).
  const workersBefore = workersStarted.length;
  await fillQuery(page, ['zz'], { hex: true });
  await page.getByTestId('search-start').click();
  runs++;
  await expect(page.getByTestId('search-error')).toContainText('invalid hex');

  // Other keywords (tiny records too), files only: still nothing fetched, still exact.
  const b = await boundaryKeywords();
  await search(page, b.hex, { hex: true });
  expectSame(await pageHits(page), scanFolders(b.bytes));
  expect(workersStarted.length, 'workers started after the refused keywords').toBe(workersBefore);
  const short = await search(page, ['useState', 'h('], { filesOnly: true });
  expectSame(await pageHits(page), scanFolders([Buffer.from('useState'), Buffer.from('h(')], true));
  // A keyword of two bytes has no trigram: nothing can be ruled out.
  await expect(short).toHaveAttribute('data-ruled-out-bytes', '0');
  // A narrower scope is a new file list, but its chunks are all cached.
  await page.getByTestId('search-versions').selectOption(String(ids[0]));
  await search(page, text);
  expectSame(
    await pageHits(page),
    scanFolders(
      text.map((k) => Buffer.from(k)),
      false,
      { version: ids[0], path: '' },
    ),
  );
  expect(seen).toEqual(cold);

  // The repository changes (a version is forgotten and pruned: gc_epoch moves): the next
  // search still finds exactly what is stored. The page kept the other versions' manifests
  // and locations, and the workers the chunks the repository still stores (a fingerprint
  // names its bytes), so it fetches nothing again, and their trigram summaries still rule
  // chunks out. The chunks only the forgotten version had leave the workers' caches and
  // files, though the versions' locations (the chunk table) still name them.
  const device = page.getByTestId('search-device-cache');
  await expect(device).toHaveAttribute('data-settled', String(runs));
  const onDevice = (await deviceCacheFps(page))!;
  const forgot = await fetch(`${server.url}/api/v1/repos/default/forget`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ versions: [ids[0]] }),
  });
  expect(forgot.status).toBe(200);
  await page.getByTestId('search-versions').selectOption([]);
  const after = await search(page, text);
  await expect(after).toHaveAttribute('data-ranges-read', '0');
  expect(seen).toEqual(cold);
  expect(Number(await after.getAttribute('data-ruled-out-bytes'))).toBeGreaterThan(0);
  const kept = scanFolders(text.map((k) => Buffer.from(k)));
  for (const k of [...kept.keys()]) if (k.startsWith(`${ids[0]}\0`)) kept.delete(k);
  expectSame(await pageHits(page), kept);
  await settleLayout(server);
  const listing = await api<{ containers: { chunks: { fp: string }[] }[] }>('/containers');
  const stored = new Set(listing.containers.flatMap((c) => c.chunks.map((ch) => ch.fp)));
  const dead = onDevice.filter((fp) => !stored.has(fp));
  expect(dead.length, 'chunks on the device that only the forgotten version had').toBeGreaterThan(0);
  await expect(device).toHaveAttribute('data-settled', String(runs));
  await expect
    .poll(async () => {
      const fps = (await deviceCacheFps(page))!;
      return dead.filter((fp) => fps.includes(fp)).length;
    })
    .toBe(0);

  // One more backup (the first folder again) moves the chunks only the newest version had
  // into archival containers and deletes the container they were stored in, which the
  // locations the page read before name. A search that fails (a keyword that is not hex)
  // replaces the workers, so the next one has nothing cached and reads chunks where the page
  // last saw them: the one in the container that is gone makes it start over with every
  // location read again, and it still finds exactly what is stored.
  const containerIds = async () =>
    new Set((await api<{ containers: { id: number }[] }>('/containers?chunks=false')).containers.map((c) => c.id));
  const before = await containerIds();
  const other = await page.context().newPage();
  await other.goto(server.appUrl);
  await expect(other.getByTestId('engine-ready')).toBeVisible();
  const copied = await backUp(other, folders[0], PKG);
  await other.close();
  await settleLayout(server);
  const now = await containerIds();
  expect([...before].filter((id) => !now.has(id)).length, 'containers the mover emptied and deleted').toBeGreaterThan(
    0,
  );
  const { locations: locationsBefore, listings: listingsBefore } = seen;
  await fillQuery(page, ['zz'], { hex: true });
  await page.getByTestId('search-start').click();
  await expect(page.getByTestId('search-error')).toBeVisible();
  runs++; // the failed search took a run number
  // Nor are they read back from the device.
  await page.getByTestId('search-device-clear').click();
  await expect(page.getByTestId('search-device-cache')).toHaveAttribute('data-bytes', '0');
  const fresh = await search(page, text);
  expect(Number(await fresh.getAttribute('data-ranges-read'))).toBeGreaterThan(0);
  // The new version's own locations (read by the failed search already), then, after the
  // container that was gone, every version's again: the chunk table.
  expect(seen.locations, 'the new version located on its own').toBe(locationsBefore + 1);
  expect(seen.listings, 'every location read again after a container was gone').toBe(listingsBefore + 1);
  expectSame(
    await pageHits(page),
    scanAll(
      [folders[1], folders[2], folders[0]],
      [ids[1], ids[2], copied],
      text.map((k) => Buffer.from(k)),
      {},
    ),
  );
  expect(errors).toEqual([]);
});

test('Cancel of a first search the server holds says so; results checked with the naive search keep their snippets', async ({
  page,
}) => {
  const { errors } = await openSearchTab(page);
  await expect(page.getByTestId('search-where')).toHaveValue('auto');
  runs = 0;
  // A new browser context: `auto` asks the server. Cancelled while the server holds it, the
  // search says it was cancelled, not what the ended workers answered the page's fallback.
  let reached!: () => void;
  const atServer = new Promise<void>((r) => (reached = r));
  await page.route('**/api/v1/repos/default/search', async (route) => {
    reached();
    await new Promise((r) => setTimeout(r, 3000));
    await route.continue().catch(() => {});
  });
  await fillQuery(page, ['vnode'], {});
  await page.getByTestId('search-start').click();
  await atServer;
  await page.getByTestId('search-cancel').click();
  await expect(page.getByTestId('search-error')).toHaveText(/^search cancelled$/, { timeout: 1500 });
  ++runs;
  await page.unroute('**/api/v1/repos/default/search');

  // The server's results fetch their snippets' chunks (held 2 s here); the naive search
  // started meanwhile cancels those fetches, and once it ends the results fetch them again.
  await page.route('**/api/v1/repos/default/chunks/get', async (route) => {
    await new Promise((r) => setTimeout(r, 2000));
    await route.continue().catch(() => {});
  });
  await page.getByTestId('search-where').selectOption('server');
  await search(page, ['vnode']);
  const lines = page.locator('.search-results li.hit');
  expect(await lines.count()).toBeGreaterThan(0);
  await page.getByTestId('search-naive').click();
  await expect(page.locator(`[data-testid=search-done][data-engine=naive][data-seq="${++runs}"]`)).toBeVisible({
    timeout: 120_000,
  });
  await page.unroute('**/api/v1/repos/default/chunks/get');
  await expect(page.getByTestId('search-compare')).toHaveAttribute('data-identical', 'true');
  await expect(page.getByTestId('search-snippet')).toHaveCount(await lines.count(), { timeout: 10_000 });
  expect(errors).toEqual([]);
});

test("a version forgotten while the page was away: its chunks leave the workers' caches and files once the tab reads them", async ({
  page,
}) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const text = ['createElement', 'options', 'Element', 'vnode'];
  const device = page.getByTestId('search-device-cache');
  const openSearch = async () => {
    await expect(page.getByTestId('engine-ready')).toBeVisible();
    await page.getByTestId('tab-search').click();
    await page.getByTestId('search-where').selectOption('page');
    runs = 0;
  };
  await page.goto(server.appUrl);
  await openSearch();
  await search(page, text);
  await expect(device).toHaveAttribute('data-settled', '1');
  const kept = (await deviceCacheFps(page))!;
  expect(kept.length).toBeGreaterThan(0);

  // The second of the first test's versions is forgotten and pruned meanwhile (the versions
  // stored are ids[0..2], or after the repeat-search test ids[1..2] and a copy of folder 0).
  const { versions } = await api<{ versions: { id: number }[] }>('/versions');
  const gone = ids[1];
  const forgot = await fetch(`${server.url}/api/v1/repos/default/forget`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ versions: [gone] }),
  });
  expect(forgot.status).toBe(200);
  await settleLayout(server);
  const listing = await api<{ containers: { chunks: { fp: string; raw_len: number }[] }[] }>('/containers');
  const stored = new Set(listing.containers.flatMap((c) => c.chunks.map((ch) => ch.fp)));
  const dead = kept.filter((fp) => !stored.has(fp));
  expect(dead.length, 'chunks on the device that only the forgotten version had').toBeGreaterThan(0);

  // The page again: once the workers have read their files, the tab matches their caches to
  // the repository, and the chunks it no longer stores leave the files, without a search.
  await page.reload();
  await openSearch();
  await expect
    .poll(async () => {
      const fps = await deviceCacheFps(page);
      return fps === null ? -1 : dead.filter((fp) => fps.includes(fp)).length;
    })
    .toBe(0);

  // The rest is still read from the device, and the search finds exactly what is stored.
  // It judges the repository's size by the raw bytes the server sums, which cover the
  // distinct chunks of the versions left; the sum of their new raw bytes does not now.
  const sized = page.waitForResponse((r) => r.url().includes('/versions?raw_bytes=true'));
  const after = await search(page, text);
  await expect(after).toHaveAttribute('data-stored-bytes-read', '0');
  const left = versions.map((v) => v.id).filter((id) => id !== gone);
  const { versions: listed, raw_bytes } = (await (await sized).json()) as {
    versions: { stats: { new_raw_bytes: number } }[];
    raw_bytes: number;
  };
  const rawOf = new Map(listing.containers.flatMap((c) => c.chunks.map((ch) => [ch.fp, ch.raw_len] as const)));
  const named = new Set<string>();
  for (const id of left)
    for (const e of (await api<{ manifest: { entries: { recipe?: string[] }[] } }>(`/versions/${id}`)).manifest.entries)
      for (const fp of e.recipe ?? []) named.add(fp);
  const namedRaw = [...named].reduce((n, fp) => n + rawOf.get(fp)!, 0);
  expect(raw_bytes).toBeGreaterThanOrEqual(namedRaw);
  expect(listed.reduce((n, v) => n + v.stats.new_raw_bytes, 0)).toBeLessThan(namedRaw);
  const folderOf = (id: number) => (ids.includes(id) ? folders[ids.indexOf(id)] : folders[0]);
  expectSame(
    await pageHits(page),
    scanAll(
      left.map(folderOf),
      left,
      text.map((k) => Buffer.from(k)),
    ),
  );
  await expect(device).toHaveAttribute('data-settled', '1');
  const now = (await deviceCacheFps(page))!;
  expect(now.length).toBeGreaterThan(0);
  expect(dead.filter((fp) => now.includes(fp))).toEqual([]);
  expect(errors).toEqual([]);
});

test("auto: a version committed between the page's list and the server's search: the answer is of the server's state and pairs with a naive search of it", async ({
  browser,
}) => {
  // A new context: nothing in the workers or on the device, so the server answers.
  const context = await browser.newContext();
  await withoutReadAhead(context);
  const page = await context.newPage();
  const { errors } = await openSearchTab(page);
  runs = 0;
  const { versions } = await api<{ versions: { id: number }[] }>('/versions');
  const newest = versions[versions.length - 1].id;
  const { manifest } = await api<{ manifest: Record<string, unknown> }>(`/versions/${newest}`);
  const authorized = { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json' };
  let added = 0;
  // The page's list of versions is answered first; the search goes to the server only once
  // another version (the newest one's files again, as another source) is committed.
  const listed = page.waitForResponse((r) => /\/versions\?raw_bytes=true$/.test(r.url()));
  await page.route('**/api/v1/repos/default/search', async (route) => {
    await listed;
    const r = await fetch(`${server.url}/api/v1/repos/default/versions`, {
      method: 'POST',
      headers: authorized,
      body: JSON.stringify({ ...manifest, source: 'committed meanwhile' }),
    });
    expect(r.status).toBe(201);
    added = ((await r.json()) as { id: number }).id;
    await route.continue();
  });
  try {
    const text = ['createElement', 'options'];
    const first = await search(page, text);
    await expect(first).toHaveAttribute('data-where', 'server');
    expect(added).toBeGreaterThan(0);
    const rows = page.locator(`[data-testid=search-file][data-version="${added}"]`);
    expect(await rows.count(), 'hits in the version committed meanwhile').toBeGreaterThan(0);
    await page.unroute('**/api/v1/repos/default/search');
    // The naive search reads the state the server searched: the two are compared.
    await naiveMatchesToo(page);
    expect(errors).toEqual([]);
  } finally {
    if (added) {
      const r = await fetch(`${server.url}/api/v1/repos/default/versions/${added}`, {
        method: 'DELETE',
        headers: authorized,
      });
      expect(r.status).toBe(200);
    }
    await context.close();
  }
});
