import { expect, test, type Page } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { npmVersions } from '../datasets';
import { plainRecipe } from '../recipes';
import { repoJson, serverBinary, startServer, type RunningServer } from '../server';

const PKG = process.env.DITTO_E2E_PACKAGE ?? 'preact';

let server: RunningServer;
let versions: string[];

test.beforeAll(async () => {
  versions = npmVersions(PKG, 3);
  server = await startServer();
});
test.afterAll(async () => {
  await server?.stop();
});

async function backUp(page: Page, folder: string, source: string) {
  await page.getByTestId('folder-input').setInputFiles(folder);
  await page.getByTestId('source-label').fill(source);
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 120_000 });
  const sent = Number(await page.getByTestId('backup-sent').getAttribute('data-bytes'));
  const id = Number(await page.getByTestId('backup-done').getAttribute('data-version'));
  const chunks = page.getByTestId('backup-chunks');
  const read = Number(await chunks.getAttribute('data-read'));
  const predicted = Number(await chunks.getAttribute('data-predicted'));
  return { sent, id, read, predicted };
}

async function stats(s: RunningServer) {
  const res = await fetch(`${s.url}/api/v1/repos/default/stats`, { headers: { Authorization: `Bearer ${s.token}` } });
  expect(res.status).toBe(200);
  return res.json();
}

test('three versions of a real package: later versions send only what the server lacks', async ({ page }) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();

  const results: Awaited<ReturnType<typeof backUp>>[] = [];
  for (const v of versions) results.push(await backUp(page, v, PKG));
  const st = await stats(server);
  expect(st.series.length).toBe(3);
  for (let i = 0; i < 3; i++) {
    const s = st.series.find((x: { id: number }) => x.id === results[i].id);
    expect(s, `version ${path.basename(versions[i])} in stats`).toBeTruthy();
    // The wire carried the version's new chunks and their framing, nothing more.
    const stored = s.new_stored_bytes;
    expect(results[i].sent).toBeGreaterThanOrEqual(stored);
    expect(results[i].sent, `bytes sent for ${path.basename(versions[i])}`).toBeLessThanOrEqual(stored * 1.05 + 2048);
  }
  // Later versions are mostly duplicates of earlier ones.
  expect(results[1].sent).toBeLessThan(results[0].sent / 2);
  expect(errors).toEqual([]);

  // RapidCDC: versions 2 and 3 predicted chunks from the previous version, and every
  // recipe is still exactly plain chunking's (one sequential ChunkEngine pass in Node).
  expect(results[0].predicted).toBe(0);
  for (const i of [1, 2]) {
    expect(results[i].predicted, `chunks predicted in ${path.basename(versions[i])}`).toBeGreaterThan(
      results[i].read / 4,
    );
    const { manifest } = await repoJson<{ manifest: { entries: { path: string; kind: string; recipe: string[] }[] } }>(
      server,
      `/versions/${results[i].id}`,
    );
    const files = manifest.entries.filter((e) => e.kind === 'file');
    expect(files.length).toBeGreaterThan(10);
    for (const f of files)
      expect(f.recipe, `recipe of ${f.path}`).toEqual(plainRecipe(readFileSync(path.join(versions[i], f.path))));
  }
});

// A token refused at load hides the views (a11y.spec, tokens.spec); one revoked while the
// page is open is refused by the backup's first request.
test('a token revoked after the page loaded fails the backup with an error instead of hanging', async ({ page }) => {
  const env = { ...process.env, DATA_DIR: server.dataDir };
  const token = execFileSync(serverBinary(), ['token', 'create', 'default'], { env }).toString().trim();
  await page.goto(`${server.url}/#token=${token}`);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await expect(page.getByTestId('token-scope')).toHaveAttribute('data-scope', 'full');
  const id = await (
    await fetch(`${server.url}/api/v1/repos/default/token`, { headers: { Authorization: `Bearer ${token}` } })
  ).json();
  execFileSync(serverBinary(), ['token', 'revoke', 'default', id.id], { env });
  await page.getByTestId('folder-input').setInputFiles(versions[0]);
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-message')).toContainText('refused the access token', { timeout: 30_000 });
  await expect(page.getByTestId('backup-phase')).toHaveText('failed');
});

test('a source name the server would refuse is said before anything is read or sent', async ({ page }) => {
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(versions[0]);
  // 86 three-byte characters: 258 bytes of UTF-8, 86 characters.
  await page.getByTestId('source-label').fill('€'.repeat(86));
  await expect(page.getByTestId('source-too-long')).toBeVisible();
  await expect(page.getByTestId('backup-start')).toHaveCount(0);
  await page.getByTestId('source-label').fill('€'.repeat(85));
  await expect(page.getByTestId('source-too-long')).toHaveCount(0);
  await expect(page.getByTestId('backup-start')).toBeVisible();
});

test('a commit whose answer is lost, or that a restarting server refuses once, stores the version once', async ({
  page,
}) => {
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  const commits: number[] = [];
  let mode: 'lose' | 'refuse' = 'lose';
  await page.route('**/api/v1/repos/*/versions', async (route) => {
    if (route.request().method() !== 'POST') return route.continue();
    commits.push(commits.length);
    if (commits.length > 1) return route.continue();
    // The first commit: stored, its answer lost on the way back (a proxy's 502), or refused
    // before it reached the server (503).
    if (mode === 'lose') await route.fetch();
    await route.fulfill({
      status: mode === 'lose' ? 502 : 503,
      contentType: 'application/json',
      body: JSON.stringify({ code: 'gateway', error: 'the link went away' }),
    });
  });
  const ofSource = async (source: string) =>
    (await repoJson<{ versions: { id: number; source: string }[] }>(server, '/versions')).versions
      .filter((v) => v.source === source)
      .map((v) => v.id);

  const lost = await backUp(page, versions[0], 'Answer lost');
  // The page found the version its first commit stored, and did not post it again.
  expect(commits).toHaveLength(1);
  expect(await ofSource('Answer lost')).toEqual([lost.id]);

  commits.length = 0;
  mode = 'refuse';
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  const refused = await backUp(page, versions[0], 'Refused once');
  expect(commits).toHaveLength(2);
  expect(await ofSource('Refused once')).toEqual([refused.id]);
});

test('a commit refused twice for chunks the server lacks (prunes since the lookup) reads their files again each time, then commits', async ({
  page,
}) => {
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  // The first two commits are answered as the server answers a commit naming a chunk a
  // prune removed since the page's lookup (409 missing_chunks), each naming another file's
  // first chunk; the third goes to the server.
  const refused: string[] = [];
  const statuses: number[] = [];
  await page.route('**/api/v1/repos/*/versions', async (route) => {
    if (route.request().method() !== 'POST' || refused.length >= 2) return route.continue();
    const body = JSON.parse(route.request().postData() ?? '{}') as { entries: { recipe?: string[] }[] };
    const withChunks = body.entries.filter((e) => (e.recipe?.length ?? 0) > 0);
    const fp = withChunks[refused.length].recipe![0];
    refused.push(fp);
    await route.fulfill({
      status: 409,
      contentType: 'application/json',
      body: JSON.stringify({
        code: 'missing_chunks',
        error: '1 referenced chunk(s) are not stored; upload them first',
        missing: [fp],
      }),
    });
  });
  page.on('response', (r) => {
    if (r.request().method() === 'POST' && new URL(r.url()).pathname.endsWith('/versions')) statuses.push(r.status());
  });
  const { id } = await backUp(page, versions[0], `${PKG} refused`);
  expect(statuses).toEqual([409, 409, 201]);
  const { manifest } = await repoJson<{ manifest: { entries: { recipe?: string[] }[] } }>(server, `/versions/${id}`);
  const named = new Set(manifest.entries.flatMap((e) => e.recipe ?? []));
  for (const fp of refused) expect(named.has(fp), `${fp} in the version`).toBe(true);
  await page.unroute('**/api/v1/repos/*/versions');
});
