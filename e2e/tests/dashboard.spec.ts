import { expect, test, type Page } from '@playwright/test';
import { npmVersions } from '../datasets';
import { repoJson, settleLayout, startServer, type RunningServer } from '../server';

const PKG = process.env.DITTO_E2E_PACKAGE ?? 'preact';

let server: RunningServer;
let folders: string[];

test.beforeAll(async () => {
  folders = npmVersions(PKG, 3);
  server = await startServer();
});
test.afterAll(async () => {
  await server?.stop();
});

const api = <T>(p: string) => repoJson<T>(server, p);

async function backUp(page: Page, folder: string, source: string) {
  await page.getByTestId('folder-input').setInputFiles(folder);
  await page.getByTestId('source-label').fill(source);
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 120_000 });
}

async function value(page: Page, id: string) {
  return page.getByTestId(id).getAttribute('data-value');
}

interface Stats {
  logical_bytes: number;
  raw_bytes: number;
  stored_bytes: number;
  dedup_ratio: number | null;
  chunks: number;
  containers: number;
  container_bytes: number;
  versions: number;
  series: { id: number; first_stored_bytes: number; delta_saved_bytes: number }[];
}
interface Version {
  id: number;
  source: string;
  stats: { logical_bytes: number; new_raw_bytes: number; new_stored_bytes: number; dedup_ratio: number | null };
}

test('the dashboard shows the server’s numbers, per repository and per source', async ({ page }, testInfo) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.setViewportSize({ width: 1280, height: 1400 });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  // Two sources: three releases of the package, and the newest again under another name.
  for (const f of folders) await backUp(page, f, PKG);
  await backUp(page, folders[2], `${PKG}-copy`);
  await settleLayout(server);

  const stats = await api<Stats>('/stats');
  const { versions } = await api<{ versions: Version[] }>('/versions');
  const { containers } = await api<{ containers: { chunks: unknown[] }[] }>('/containers');
  expect(versions.length).toBe(4);
  // The Back up panel's ratio of the version it just committed is the server's, as everywhere.
  await expect(page.getByTestId('backup-ratio')).toHaveAttribute(
    'data-value',
    String(versions.at(-1)!.stats.dedup_ratio ?? ''),
  );

  await page.getByTestId('tab-dashboard').click();
  await expect(page.getByTestId('dashboard')).toBeVisible();
  expect(await value(page, 'dash-versions')).toBe(String(stats.versions));
  expect(await value(page, 'dash-logical')).toBe(String(stats.logical_bytes));
  expect(await value(page, 'dash-raw')).toBe(String(stats.raw_bytes));
  expect(await value(page, 'dash-stored')).toBe(String(stats.stored_bytes));
  expect(await value(page, 'dash-ratio')).toBe(String(stats.dedup_ratio));
  expect(await value(page, 'dash-chunks')).toBe(String(stats.chunks));
  expect(await value(page, 'dash-containers')).toBe(String(stats.containers));
  expect(await value(page, 'dash-container-bytes')).toBe(String(stats.container_bytes));
  expect(await value(page, 'dash-saved-dedup')).toBe(String(stats.logical_bytes - stats.raw_bytes));
  const delta = (stats as Stats & { delta_saved_bytes?: number }).delta_saved_bytes ?? 0;
  expect(await value(page, 'dash-saved-compression')).toBe(String(stats.raw_bytes - stats.stored_bytes - delta));
  expect(await value(page, 'dash-hist-total')).toBe(String(containers.reduce((n, c) => n + c.chunks.length, 0)));
  // The copy of an already stored release adds (almost) nothing: dedup is visible.
  expect(Number(await value(page, 'dash-saved-dedup'))).toBeGreaterThan(stats.logical_bytes / 3);

  let cumL = 0;
  let cumS = 0;
  for (const v of versions) {
    const row = page.locator(`[data-testid=dash-row][data-version="${v.id}"]`);
    const storedNow = stats.series.find((p) => p.id === v.id)!.first_stored_bytes;
    cumL += v.stats.logical_bytes;
    cumS += storedNow;
    await expect(row.getByTestId('d-logical')).toHaveAttribute('data-value', String(v.stats.logical_bytes));
    await expect(row.getByTestId('d-new-raw')).toHaveAttribute('data-value', String(v.stats.new_raw_bytes));
    await expect(row.getByTestId('d-new-stored')).toHaveAttribute('data-value', String(v.stats.new_stored_bytes));
    await expect(row.getByTestId('d-stored-now')).toHaveAttribute('data-value', String(storedNow));
    await expect(row.getByTestId('d-ratio')).toHaveAttribute('data-value', String(v.stats.dedup_ratio ?? ''));
    await expect(row.getByTestId('d-cum-logical')).toHaveAttribute('data-value', String(cumL));
    await expect(row.getByTestId('d-cum-stored')).toHaveAttribute('data-value', String(cumS));
  }
  for (const id of ['chart-cumulative', 'chart-chunk-sizes'])
    await expect(page.getByTestId(id).locator('canvas')).toHaveCount(1);
  // Per-version charts per source: each axis holds only its source's versions.
  const sources = [...new Set(versions.map((v) => v.source))];
  await expect(page.getByTestId('dash-source-charts')).toHaveCount(sources.length);
  for (const src of sources) {
    const group = page.locator(`[data-testid=dash-source-charts][data-source="${src}"]`);
    await expect(group.getByRole('heading')).toContainText(`“${src}”`);
    for (const id of ['chart-per-version', 'chart-ratio', 'chart-savings', 'chart-unique'])
      await expect(group.getByTestId(id).locator('canvas')).toHaveCount(1);
  }
  // Savings split by technique: dedup + compression + delta = logical - stored; the delta
  // figure only where the server's delta pass saved something.
  if (delta > 0) expect(await value(page, 'dash-saved-delta')).toBe(String(delta));
  else await expect(page.getByTestId('dash-saved-delta')).toHaveCount(0);
  let saved = delta;
  for (const id of ['dash-saved-dedup', 'dash-saved-compression']) saved += Number(await value(page, id));
  expect(saved).toBe(stats.logical_bytes - stats.stored_bytes);
  // The columns over new_stored_bytes and first_stored_bytes name what they hold, and one
  // ratio per version is defined.
  await expect(page.getByTestId('dash-table').locator('th')).toContainText([
    'Stored (uploaded)',
    'Stored now',
    'Dedup ratio',
  ]);
  await expect(page.getByTestId('dash-table').locator('th', { hasText: 'Dedup ratio' })).toHaveAttribute(
    'title',
    /logical bytes divided by the bytes it added/,
  );

  const shot = testInfo.outputPath('dashboard-repository.png');
  await page.getByTestId('dashboard').screenshot({ path: shot });
  await testInfo.attach('dashboard (repository)', { path: shot, contentType: 'image/png' });

  // One source: its own sums; stored and delta are those of the chunks its versions stored
  // first, as the server stores them now.
  await page.getByTestId('dash-scope').selectOption(PKG);
  const mine = versions.filter((v) => v.source === PKG);
  const sum = (f: (v: Version) => number) => mine.reduce((n, v) => n + f(v), 0);
  const point = (v: Version) => stats.series.find((p) => p.id === v.id)!;
  const mineStored = sum((v) => point(v).first_stored_bytes);
  const mineDelta = sum((v) => point(v).delta_saved_bytes);
  // Sources share chunks: the copy stored nothing first, so the source's chunks are all.
  expect(mineStored).toBe(stats.stored_bytes);
  expect(mineDelta).toBe(delta);
  await expect(page.getByTestId('dashboard')).toHaveAttribute('data-scope', PKG);
  await expect(page.getByTestId('dash-row')).toHaveCount(3);
  expect(await value(page, 'dash-logical')).toBe(String(sum((v) => v.stats.logical_bytes)));
  expect(await value(page, 'dash-stored')).toBe(String(mineStored));
  expect(await value(page, 'dash-raw')).toBe(String(sum((v) => v.stats.new_raw_bytes)));
  if (mineDelta > 0) expect(await value(page, 'dash-saved-delta')).toBe(String(mineDelta));
  else await expect(page.getByTestId('dash-saved-delta')).toHaveCount(0);
  let mineSaved = mineDelta;
  for (const id of ['dash-saved-dedup', 'dash-saved-compression']) mineSaved += Number(await value(page, id));
  expect(mineSaved).toBe(sum((v) => v.stats.logical_bytes) - mineStored);
  await expect(page.getByTestId('chart-chunk-sizes').locator('canvas')).toHaveCount(1);
  // The source's distinct chunks, counted here from its manifests.
  const fps = new Set<string>();
  for (const v of mine) {
    const { manifest } = await api<{ manifest: { entries: { recipe?: string[] }[] } }>(`/versions/${v.id}`);
    for (const e of manifest.entries) for (const fp of e.recipe ?? []) fps.add(fp);
  }
  await expect.poll(async () => Number(await value(page, 'dash-hist-total'))).toBe(fps.size);
  expect(fps.size).toBeLessThanOrEqual(stats.chunks);
  const shot2 = testInfo.outputPath('dashboard-source.png');
  await page.getByTestId('dashboard').screenshot({ path: shot2 });
  await testInfo.attach('dashboard (source)', { path: shot2, contentType: 'image/png' });
  expect(errors).toEqual([]);
});

test('deleting a version (after confirming) updates the list and the dashboard', async ({ page }) => {
  await page.goto(server.appUrl);
  await page.getByTestId('tab-versions').click();
  await expect(page.getByTestId('version-row')).toHaveCount(4);
  const { versions } = await api<{ versions: Version[] }>('/versions');
  const victim = versions[versions.length - 1];
  const row = page.locator(`[data-testid=version-row][data-version="${victim.id}"]`);
  await row.getByTestId('version-delete').click();
  await row.getByTestId('version-delete-cancel').click();
  await expect(page.getByTestId('version-row')).toHaveCount(4);
  await row.getByTestId('version-delete').click();
  await row.getByTestId('version-delete-confirm').click();
  await expect(page.getByTestId('version-row')).toHaveCount(3);
  await expect(page.locator(`[data-testid=versions-source][data-source="${victim.source}"]`)).toHaveCount(0);
  const stats = await api<Stats>('/stats');
  expect(stats.versions).toBe(3);
  await page.getByTestId('tab-dashboard').click();
  await expect(page.getByTestId('dash-versions')).toHaveAttribute('data-value', '3');
  expect(await value(page, 'dash-logical')).toBe(String(stats.logical_bytes));
});

/**
 * Opens Versions on its three versions and holds every DELETE until `release` is called, then
 * answers it with `answer` (the server's own answer when it gives none). `victim`: the newest
 * version, and `row` its row.
 */
async function holdDeletes(page: Page, answer?: { status: number; body: unknown }) {
  await page.goto(server.appUrl);
  await page.getByTestId('tab-versions').click();
  await expect(page.getByTestId('version-row')).toHaveCount(3);
  const { versions } = await api<{ versions: Version[] }>('/versions');
  const victim = versions[versions.length - 1];
  const row = page.locator(`[data-testid=version-row][data-version="${victim.id}"]`);
  let release = () => {};
  const held = new Promise<void>((r) => (release = r));
  await page.route('**/versions/*', async (route) => {
    if (route.request().method() !== 'DELETE') return route.continue();
    await held;
    if (!answer) return route.continue();
    await route.fulfill({ status: answer.status, contentType: 'application/json', body: JSON.stringify(answer.body) });
  });
  return { victim, row, release };
}

test('a delete the server fails: the page says why while the version stays listed', async ({ page }) => {
  // The server's answer is held until the page has shown that the delete runs.
  const {
    row,
    victim,
    release: answer,
  } = await holdDeletes(page, {
    status: 500,
    body: { error: 'disk I/O error', code: 'internal' },
  });
  await row.getByTestId('version-delete').click();
  await row.getByTestId('version-delete-confirm').click();
  await expect(page.getByTestId('version-deleting')).toContainText(`Deleting version ${victim.id}…`);
  await expect(row.getByTestId('version-delete')).toBeDisabled();
  // The list is read again after the failure; the error outlives that reload.
  const reloaded = page.waitForEvent(
    'requestfinished',
    (r) => r.method() === 'GET' && new URL(r.url()).pathname.endsWith('/versions'),
  );
  answer();
  await reloaded;
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  await expect(page.getByTestId('version-delete-failed')).toContainText(
    `Deleting version ${victim.id} failed (disk I/O error)`,
  );
  await expect(page.getByTestId('versions-error')).toHaveCount(0);
  await expect(page.getByTestId('version-deleting')).toHaveCount(0);
  await expect(page.getByTestId('version-row')).toHaveCount(3);
  await expect(row.getByTestId('version-delete')).toBeEnabled();
  await page.unroute('**/versions/*');
  expect((await api<{ versions: Version[] }>('/versions')).versions.length).toBe(3);
});

test('a version browsed while its delete runs: the browser closes once the version is deleted', async ({ page }) => {
  // The delete reaches the server only once the version is open in the browser.
  const { row, victim, release } = await holdDeletes(page);
  await row.getByTestId('version-delete').click();
  await row.getByTestId('version-delete-confirm').click();
  await row.getByTestId('version-browse').click();
  await expect(page.getByTestId('version-browser')).toBeVisible();
  release();
  await expect(page.getByTestId('version-deleted')).toHaveAttribute('data-version', String(victim.id));
  await expect(row).toHaveCount(0);
  await expect(page.getByTestId('version-browser')).toHaveCount(0);
  await page.unroute('**/versions/*');
});

test('two quick deletes: the list read after the first, answered last, does not bring back the second', async ({
  page,
}) => {
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  // A third version, so that one stays listed after the two deletes.
  await backUp(page, folders[2], PKG);
  await page.getByTestId('tab-versions').click();
  await expect(page.getByTestId('version-row')).toHaveCount(3);
  const { versions } = await api<{ versions: Version[] }>('/versions');
  const [first, second] = versions.slice(-2);
  // The list read after the first delete is answered as the server had it then (the second
  // version still there), but only once the list read after the second delete is shown.
  let release = () => {};
  const held = new Promise<void>((r) => (release = r));
  let holding = () => {};
  const isHeld = new Promise<void>((r) => (holding = r));
  let reads = 0;
  await page.route('**/versions', async (route) => {
    if (route.request().method() !== 'GET' || reads++ > 0) return route.continue();
    const response = await route.fetch();
    holding();
    await held;
    await route.fulfill({ response });
  });
  const rowOf = (id: number) => page.locator(`[data-testid=version-row][data-version="${id}"]`);
  await rowOf(first.id).getByTestId('version-delete').click();
  await rowOf(first.id).getByTestId('version-delete-confirm').click();
  await isHeld;
  await rowOf(second.id).getByTestId('version-delete').click();
  await rowOf(second.id).getByTestId('version-delete-confirm').click();
  await expect(rowOf(second.id)).toHaveCount(0);
  release();
  // The first delete's reload has settled once its "Deleting" note is gone.
  await expect(page.getByTestId('version-deleting')).toHaveCount(0);
  await expect(rowOf(second.id)).toHaveCount(0);
  await expect(rowOf(first.id)).toHaveCount(0);
  await expect(page.getByTestId('version-row')).toHaveCount(1);
  await page.unroute('**/versions');
});

test('a version the server fails to read: the browser says why, and Try again reads it', async ({ page }) => {
  await page.goto(server.appUrl);
  await page.getByTestId('tab-versions').click();
  const row = page.getByTestId('version-row').first();
  const id = await row.getAttribute('data-version');
  let fail = true;
  await page.route(`**/versions/${id}`, async (route) => {
    if (route.request().method() !== 'GET' || !fail) return route.continue();
    await route.fulfill({
      status: 500,
      contentType: 'application/json',
      body: JSON.stringify({ error: 'disk I/O error', code: 'internal' }),
    });
  });
  await row.getByTestId('version-browse').click();
  const failed = page.getByTestId('version-browser-error');
  await expect(failed).toContainText(`Reading version ${id} failed: disk I/O error`);
  await expect(page.getByTestId('tree-node')).toHaveCount(0);
  fail = false;
  await failed.getByRole('button', { name: 'Try again' }).click();
  await expect(page.getByTestId('tree-node').first()).toBeVisible();
  await expect(failed).toHaveCount(0);
  await page.unroute(`**/versions/${id}`);
});
