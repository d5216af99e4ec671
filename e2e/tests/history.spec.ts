import AxeBuilder from '@axe-core/playwright';
import { expect, test, type Locator, type Page, type TestInfo } from '@playwright/test';
import { createHash, randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { npmVersions, walk } from '../datasets';
import { backUp, openWithoutPicker } from '../page';
import { startServer, type RunningServer } from '../server';

// History and diff (issue 20): three releases of a real package and a working copy of the
// newest one edited as a user would (a folder deleted, files added, a binary file patched),
// compared in the page; every list, size, line and byte count is checked against Node's own
// comparison of the folders on disk.
const PKG = process.env.DITTO_E2E_PACKAGE ?? 'preact';

let server: RunningServer;
let folders: string[];
let work: string;
let work1: string;
let work2: string;
const ids: number[] = [];
let w1 = 0;
let w2 = 0;

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  folders = npmVersions(PKG, 3);
  server = await startServer();
  // The working copy: the newest release plus a binary file, then the same with the first
  // top-level folder deleted, a note added and 4 KiB of the binary overwritten in place.
  work = mkdtempSync(path.join(tmpdir(), 'ditto-history-'));
  work1 = path.join(work, 'one', 'project');
  work2 = path.join(work, 'two', 'project');
  cpSync(folders[2], work1, { recursive: true });
  writeFileSync(path.join(work1, 'logo.bin'), randomBytes(300_000));
  cpSync(work1, work2, { recursive: true });
  const gone = readdirSync(work2, { withFileTypes: true }).find((e) => e.isDirectory())!;
  rmSync(path.join(work2, gone.name), { recursive: true });
  writeFileSync(path.join(work2, 'NOTES.md'), '# Notes\n\nA file that only the second version has.\n');
  const bin = readFileSync(path.join(work2, 'logo.bin'));
  randomBytes(4096).copy(bin, 120_000);
  writeFileSync(path.join(work2, 'logo.bin'), bin);
});
test.afterAll(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

const open = (page: Page) => openWithoutPicker(page, server);

/** No serious or critical accessibility violation inside `selector`; a screenshot attached. */
async function checkView(page: Page, selector: string, name: string, testInfo: TestInfo) {
  const r = await new AxeBuilder({ page }).include(selector).analyze();
  const bad = r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`)).toEqual([]);
  const file = testInfo.outputPath(name);
  await page.locator(selector).first().screenshot({ path: file });
  await testInfo.attach(name, { path: file, contentType: 'image/png' });
}

interface NodeComparison {
  added: [string, number][];
  removed: [string, number][];
  changed: [string, number, number][];
  unchanged: number;
}

const sha = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** The oracle: both folders walked, every file hashed; lists by path (code-unit order, as the page). */
function compareFolders(a: string, b: string): NodeComparison {
  const fa = new Set(walk(a));
  const fb = new Set(walk(b));
  const size = (dir: string, rel: string) => statSync(path.join(dir, rel)).size;
  const out: NodeComparison = { added: [], removed: [], changed: [], unchanged: 0 };
  for (const rel of fa) {
    if (!fb.has(rel)) out.removed.push([rel, size(a, rel)]);
    else if (sha(path.join(a, rel)) !== sha(path.join(b, rel))) out.changed.push([rel, size(a, rel), size(b, rel)]);
    else out.unchanged++;
  }
  for (const rel of fb) if (!fa.has(rel)) out.added.push([rel, size(b, rel)]);
  const byPath = (x: [string, ...number[]], y: [string, ...number[]]) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0);
  out.added.sort(byPath);
  out.removed.sort(byPath);
  out.changed.sort(byPath);
  return out;
}

/** Opens "Compare versions…" (by keyboard) and picks the two versions. */
async function compare(page: Page, from: number, to: number) {
  await page.getByTestId('tab-versions').click();
  const diff = page.getByTestId('versions-diff');
  if (!(await diff.isVisible())) {
    await page.getByTestId('versions-compare').focus();
    await page.keyboard.press('Enter');
  }
  await expect(diff).toBeVisible();
  await page.getByTestId('diff-from').selectOption(String(from));
  await page.getByTestId('diff-to').selectOption(String(to));
  await expect(page.getByTestId('diff-summary')).toBeVisible();
  return diff;
}

/** The page's lists, every page of them shown. */
async function pageComparison(diff: Locator): Promise<NodeComparison> {
  while (await diff.getByTestId('diff-more').count()) await diff.getByTestId('diff-more').first().click();
  const rows = (id: string) =>
    diff
      .getByTestId(id)
      .getByTestId('diff-row')
      .evaluateAll((trs) => trs.map((tr) => ({ ...(tr as HTMLElement).dataset })));
  const summary = diff.getByTestId('diff-summary');
  return {
    added: (await rows('diff-added')).map((r) => [r.path!, Number(r.size)]),
    removed: (await rows('diff-removed')).map((r) => [r.path!, Number(r.size)]),
    changed: (await rows('diff-changed')).map((r) => [r.path!, Number(r.oldSize), Number(r.newSize)]),
    unchanged: Number(await summary.getAttribute('data-unchanged')),
  };
}

/** Line count and LCS length of two texts by dynamic programming (the naive oracle). */
function lineLcs(a: string[], b: string[]): number {
  let prev = new Int32Array(b.length + 1);
  for (let i = 1; i <= a.length; i++) {
    const row = new Int32Array(b.length + 1);
    for (let j = 1; j <= b.length; j++)
      row[j] = a[i - 1] === b[j - 1] ? prev[j - 1] + 1 : Math.max(prev[j], row[j - 1]);
    prev = row;
  }
  return prev[b.length];
}

const lines = (file: string) => {
  const l = readFileSync(file, 'utf8').split('\n');
  if (l[l.length - 1] === '') l.pop();
  return l;
};

test('compare two releases: added, removed and changed as Node finds them, from manifests alone', async ({ page }) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await open(page);
  for (const f of folders) ids.push(await backUp(page, f, PKG));
  w1 = await backUp(page, work1, 'project');
  w2 = await backUp(page, work2, 'project');

  // Comparing reads the two manifests and nothing else: no chunk is fetched (the list reads the
  // newest version's locations ahead, for its restore, whatever is compared).
  const requests: string[] = [];
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (u.pathname.startsWith('/api/v1/')) requests.push(u.pathname);
  });
  const diff = await compare(page, ids[0], ids[2]);
  const want = compareFolders(folders[0], folders[2]);
  expect(want.changed.length).toBeGreaterThan(3);
  expect(await pageComparison(diff)).toEqual(want);
  expect(requests).toContain(`/api/v1/repos/default/versions/${ids[0]}`);
  expect(requests).toContain(`/api/v1/repos/default/versions/${ids[2]}`);
  const readAhead = `/api/v1/repos/default/versions/${w2}/locations`;
  expect(requests.filter((p) => /chunks|locations|containers/.test(p) && p !== readAhead)).toEqual([]);

  // One version on both sides says so instead of an empty comparison.
  await page.getByTestId('diff-to').selectOption(String(ids[0]));
  await expect(diff.getByTestId('diff-same-version')).toBeVisible();
  await expect(diff.getByTestId('diff-summary')).toHaveCount(0);
  expect(errors).toEqual([]);
});

test('compare across sources and within one: a deleted folder, added files, a binary change', async ({
  page,
}, testInfo) => {
  await open(page);
  // The release against the edited working copy (another source).
  let diff = await compare(page, ids[2], w2);
  const across = compareFolders(folders[2], work2);
  expect(across.removed.length).toBeGreaterThan(0);
  expect(across.added.map((a) => a[0])).toEqual(['NOTES.md', 'logo.bin']);
  expect(await pageComparison(diff)).toEqual(across);
  // The path filter narrows every list to the paths containing it.
  const part = across.removed[0][0].split('/')[0] + '/';
  await diff.getByTestId('diff-filter').fill(part.toUpperCase());
  const only = (l: [string, ...number[]][]) => l.filter((x) => x[0].toLowerCase().includes(part.toLowerCase()));
  await expect(diff.getByTestId('diff-removed').getByTestId('diff-row')).toHaveCount(only(across.removed).length);
  expect(await pageComparison(diff)).toEqual({
    added: only(across.added),
    removed: only(across.removed),
    changed: only(across.changed),
    unchanged: across.unchanged,
  });
  await diff.getByTestId('diff-filter').fill('');

  // The working copy's two versions: the binary file says how many bytes changed.
  diff = await compare(page, w1, w2);
  const within = compareFolders(work1, work2);
  expect(within.changed.map((c) => c[0])).toEqual(['logo.bin']);
  expect(await pageComparison(diff)).toEqual(within);
  await diff.locator('[data-testid=diff-row][data-path="logo.bin"]').getByTestId('diff-show').click();
  const binary = diff.getByTestId('diff-binary');
  await expect(binary).toBeVisible();
  const a = readFileSync(path.join(work1, 'logo.bin'));
  const b = readFileSync(path.join(work2, 'logo.bin'));
  let first = 0;
  while (a[first] === b[first]) first++;
  let last = a.length - 1;
  while (a[last] === b[last]) last--;
  await expect(binary).toHaveAttribute('data-offset', String(first));
  await expect(binary).toHaveAttribute('data-changed', String(last - first + 1));
  await expect(binary).toContainText(`Binary, ${last - first + 1} bytes changed`);
  await checkView(page, '[data-testid=versions-diff]', 'compare-binary.png', testInfo);
});

test('a text diff of a changed file matches the shortest one computed in Node', async ({ page }, testInfo) => {
  await open(page);
  const diff = await compare(page, ids[0], ids[2]);
  // The changed text file with the most changed lines (both added and removed where there
  // is one) among those small enough for the naive oracle.
  const candidates = compareFolders(folders[0], folders[2])
    .changed.map(([rel]) => rel)
    .filter((rel) => /\.(js|ts|json|md)$/.test(rel))
    .map((rel) => ({ rel, a: lines(path.join(folders[0], rel)), b: lines(path.join(folders[2], rel)) }))
    .filter((c) => c.a.length * c.b.length < 25e6)
    .map((c) => ({ ...c, lcs: lineLcs(c.a, c.b) }))
    .map((c) => ({ ...c, removed: c.a.length - c.lcs, added: c.b.length - c.lcs }))
    .sort(
      (x, y) =>
        Number(y.removed > 0 && y.added > 0) - Number(x.removed > 0 && x.added > 0) ||
        y.removed + y.added - (x.removed + x.added),
    );
  expect(candidates.length).toBeGreaterThan(0);
  const { rel, a, b, lcs } = candidates[0];
  testInfo.annotations.push({
    type: 'diffed',
    description: `${rel}: ${lcs} lines kept, of ${a.length} and ${b.length}`,
  });

  const apiPaths: string[] = [];
  page.on('request', (r) => apiPaths.push(new URL(r.url()).pathname));
  await diff.locator(`[data-testid=diff-row][data-path="${rel}"]`).getByTestId('diff-show').click();
  const change = diff.locator(`[data-testid=file-change][data-path="${rel}"]`);
  const summary = change.getByTestId('diff-text-summary');
  await expect(summary).toBeVisible();
  // Only this file's chunks are fetched (the restore path: chunks/get).
  expect(apiPaths.filter((p) => p.endsWith('/chunks/get')).length).toBeGreaterThan(0);
  await expect(summary).toHaveAttribute('data-removed', String(a.length - lcs));
  await expect(summary).toHaveAttribute('data-added', String(b.length - lcs));

  // Every shown line is the line of that number in its file.
  const shown = await change.getByTestId('diff-line').evaluateAll((trs) =>
    trs.map((tr) => ({
      kind: (tr as HTMLElement).dataset.kind!,
      a: Number((tr as HTMLElement).dataset.a || 0),
      b: Number((tr as HTMLElement).dataset.b || 0),
      text: tr.querySelector('code')!.textContent!,
    })),
  );
  expect(shown.filter((l) => l.kind === 'del').length).toBe(a.length - lcs);
  expect(shown.filter((l) => l.kind === 'add').length).toBe(b.length - lcs);
  for (const l of shown) {
    if (l.kind !== 'add') expect(l.text, `${rel} old line ${l.a}`).toBe(a[l.a - 1]);
    if (l.kind !== 'del') expect(l.text, `${rel} new line ${l.b}`).toBe(b[l.b - 1]);
  }
  await checkView(page, '[data-testid=versions-diff]', 'compare-text-diff.png', testInfo);
});

test("a file's history across versions, and an older version downloaded byte for byte", async ({ page }, testInfo) => {
  await open(page);
  await page.getByTestId('tab-versions').click();
  await page.locator(`[data-testid=version-row][data-version="${ids[2]}"]`).getByTestId('version-browse').click();
  await expect(page.getByTestId('version-browser')).toBeVisible();

  // package.json (its version changes in every release) and two other top-level files.
  const inAll = walk(folders[2]).filter((r) => !r.includes('/') && folders.every((f) => walk(f).includes(r)));
  expect(inAll).toContain('package.json');
  for (const rel of ['package.json', ...inAll.filter((r) => r !== 'package.json').slice(0, 2)]) {
    const button = page.locator(`[data-testid=history-file][data-path="${rel}"]`);
    await button.focus();
    await page.keyboard.press('Enter');
    const history = page.locator(`[data-testid=file-history][data-path="${rel}"]`);
    await expect(history.getByTestId('history-row')).toHaveCount(3);
    const rows = await history.getByTestId('history-row').evaluateAll((trs) =>
      trs.map((tr) => {
        const d = (tr as HTMLElement).dataset;
        return { version: d.version, size: d.size, change: d.change };
      }),
    );
    const want = folders.map((f, i) => ({
      version: String(ids[i]),
      size: String(statSync(path.join(f, rel)).size),
      change: i === 0 ? 'added' : sha(path.join(f, rel)) === sha(path.join(folders[i - 1], rel)) ? 'same' : 'changed',
    }));
    expect(rows, rel).toEqual(want);
    if (rel !== 'package.json') continue;
    expect(want.map((w) => w.change)).toContain('changed');

    // The oldest version of the file, downloaded from its history row.
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      history.locator(`[data-testid=history-row][data-version="${ids[0]}"]`).getByTestId('history-download').click(),
    ]);
    const saved = testInfo.outputPath('package.json');
    await download.saveAs(saved);
    expect(readFileSync(saved).equals(readFileSync(path.join(folders[0], rel)))).toBe(true);
    expect(readFileSync(saved).equals(readFileSync(path.join(folders[2], rel)))).toBe(false);
    await expect(page.getByTestId('restore-done')).toBeVisible();

    // The changes of the last changed version against the one before it, from the history.
    const i = want.map((w) => w.change).lastIndexOf('changed');
    await history.locator(`[data-testid=history-row][data-version="${ids[i]}"]`).getByTestId('history-diff').click();
    const summary = history.getByTestId('diff-text-summary');
    await expect(summary).toBeVisible();
    const [a, b] = [lines(path.join(folders[i - 1], rel)), lines(path.join(folders[i], rel))];
    const lcs = lineLcs(a, b);
    await expect(summary).toHaveAttribute('data-removed', String(a.length - lcs));
    await expect(summary).toHaveAttribute('data-added', String(b.length - lcs));
    await checkView(page, '[data-testid=file-history]', 'file-history.png', testInfo);
    await history.getByTestId('file-history-close').click();
    await expect(history).toHaveCount(0);
  }
});

test('a version deleted behind the page: the comparison says what failed and offers to try again', async ({ page }) => {
  await open(page);
  await page.getByTestId('tab-versions').click();
  await expect(page.locator(`[data-testid=version-row][data-version="${w1}"]`)).toBeVisible();
  const res = await fetch(`${server.url}/api/v1/repos/default/versions/${w1}`, {
    method: 'DELETE',
    headers: { Authorization: `Bearer ${server.token}` },
  });
  expect(res.status).toBe(200);
  // The page's list still offers it; comparing the working copy's two versions reads it.
  await page.getByTestId('versions-compare').click();
  const diff = page.getByTestId('versions-diff');
  await expect(page.getByTestId('diff-from')).toHaveValue(String(w1));
  const error = diff.getByTestId('versions-diff-error');
  await expect(error).toContainText('Reading the versions failed');
  // Trying again asks the server again (and fails again: the version is gone).
  await Promise.all([
    page.waitForRequest((r) => r.url().endsWith(`/versions/${w1}`)),
    error.getByRole('button', { name: 'Try again' }).click(),
  ]);
  await expect(error).toContainText('Reading the versions failed');
  // Another version on that side compares.
  await page.getByTestId('diff-from').selectOption(String(ids[2]));
  await expect(diff.getByTestId('diff-summary')).toBeVisible();
  await expect(error).toHaveCount(0);
});

test('a compared version deleted in the page: the comparison moves to versions that exist', async ({ page }) => {
  await open(page);
  const diff = await compare(page, ids[2], w2);
  await expect(diff.getByTestId('diff-summary')).toHaveAttribute('data-to', String(w2));
  const row = page.locator(`[data-testid=version-row][data-version="${w2}"]`);
  await row.getByTestId('version-delete').click();
  await row.getByTestId('version-delete-confirm').click();
  await expect(page.getByTestId('version-deleted')).toHaveAttribute('data-version', String(w2));
  await expect(row).toHaveCount(0);
  // The comparison starts over from the default pair of what is left: the package's two
  // newest releases.
  await expect(diff.getByTestId('diff-from')).toHaveValue(String(ids[1]));
  await expect(diff.getByTestId('diff-to')).toHaveValue(String(ids[2]));
  const summary = diff.getByTestId('diff-summary');
  await expect(summary).toHaveAttribute('data-from', String(ids[1]));
  await expect(summary).toHaveAttribute('data-to', String(ids[2]));
  await expect(diff.getByTestId('versions-diff-error')).toHaveCount(0);
  expect(await pageComparison(diff)).toEqual(compareFolders(folders[1], folders[2]));
});
