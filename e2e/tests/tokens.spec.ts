import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoJson, serverBinary, startServer, type RunningServer } from '../server';

let server: RunningServer;
let root: string;

test.beforeAll(async () => {
  server = await startServer();
  root = mkdtempSync(path.join(tmpdir(), 'ditto-tokens-'));
});
test.afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

function createToken(scope: string): string {
  return execFileSync(serverBinary(), ['token', 'create', 'default', '--scope', scope], {
    env: { ...process.env, DATA_DIR: server.dataDir },
  })
    .toString()
    .trim();
}

interface Entry {
  path: string;
  kind: string;
  recipe: string[];
}

/** A file's bytes as the server holds them, read with the full token. */
async function restored(recipe: string[]): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (const fp of recipe) {
    const res = await fetch(`${server.url}/api/v1/repos/default/chunks/${fp}`, {
      headers: { Authorization: `Bearer ${server.token}` },
    });
    expect(res.status).toBe(200);
    parts.push(Buffer.from(await res.arrayBuffer()));
  }
  return Buffer.concat(parts);
}

// A machine that backs itself up holds a backup-only token: the page backs up with it,
// says what it cannot do, and the server refuses it everything else.
test('a backup-only token backs up through the page and may not read or delete', async ({ page }) => {
  const backup = createToken('backup');
  const dir = path.join(root, 'Server');
  mkdirSync(dir);
  const files = new Map<string, Buffer>();
  for (let i = 0; i < 6; i++) files.set(`f${i}.bin`, randomBytes(20_000 + i * 3000));
  for (const [n, b] of files) writeFileSync(path.join(dir, n), b);

  await page.goto(`${server.url}/#token=${backup}`);
  await expect(page.getByTestId('token-scope')).toHaveAttribute('data-scope', 'backup');
  await expect(page.getByTestId('token-scope')).toContainText('cannot restore or search, delete');
  // The views it may not use are not offered.
  await expect(page.getByTestId('tab-versions')).toBeVisible();
  await expect(page.getByTestId('tab-dashboard')).toHaveCount(0);
  await expect(page.getByTestId('tab-search')).toHaveCount(0);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  // Nor are search workers started for it (a token that may search gets idle ones).
  const searchWorkers = () => page.workers().filter((w) => w.url().includes('searchWorker')).length;
  expect(searchWorkers()).toBe(0);

  const ids: number[] = [];
  for (let v = 0; v < 2; v++) {
    if (v > 0) {
      files.set('f0.bin', randomBytes(25_000));
      writeFileSync(path.join(dir, 'f0.bin'), files.get('f0.bin')!);
      await page.reload();
      await expect(page.getByTestId('engine-ready')).toBeVisible();
    }
    await page.getByTestId('folder-input').setInputFiles(dir);
    await page.getByTestId('backup-start').click();
    await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
    ids.push(Number(await page.getByTestId('backup-done').getAttribute('data-version')));
  }
  // The second backup planned from the first (the token reads its own versions): only the
  // changed file was sent.
  const sent = Number(await page.getByTestId('backup-sent').getAttribute('data-bytes'));
  expect(sent).toBeLessThan(40_000);

  // Its versions are listed and can be browsed; what the token may not do is not offered.
  await page.getByTestId('tab-versions').click();
  await expect(page.getByTestId('version-row')).toHaveCount(2);
  await expect(page.getByTestId('version-browse')).toHaveCount(2);
  for (const id of ['version-zip', 'version-folder', 'version-delete', 'retention', 'verify-run'])
    await expect(page.getByTestId(id)).toHaveCount(0);

  // Every version restores byte for byte (read with the full token).
  for (const id of ids) {
    const { manifest } = await repoJson<{ manifest: { entries: Entry[] } }>(server, `/versions/${id}`);
    const got = manifest.entries.filter((e) => e.kind === 'file');
    expect(got.length).toBe(files.size);
    if (id === ids[1]) for (const e of got) expect((await restored(e.recipe)).equals(files.get(e.path)!)).toBe(true);
  }

  expect(searchWorkers()).toBe(0);
  await page.goto(server.appUrl); // only the fragment differs: not a page load yet
  await page.reload();
  await expect(page.getByTestId('token-scope')).toHaveAttribute('data-scope', 'full');
  await expect.poll(searchWorkers).toBeGreaterThan(0);

  // The backup token can neither delete nor read bytes.
  const as = (t: string, p: string, method = 'GET') =>
    fetch(`${server.url}/api/v1/repos/default${p}`, { method, headers: { Authorization: `Bearer ${t}` } });
  expect((await as(backup, `/versions/${ids[0]}`, 'DELETE')).status).toBe(403);
  const { manifest } = await repoJson<{ manifest: { entries: Entry[] } }>(server, `/versions/${ids[0]}`);
  expect((await as(backup, `/chunks/${manifest.entries.find((e) => e.kind === 'file')!.recipe[0]}`)).status).toBe(403);
  expect((await as(server.token, `/versions/${ids[0]}`)).status).toBe(200);
});

test('a wrong token is reported as soon as the page loads', async ({ page }) => {
  await page.goto(`${server.url}/#token=${'0'.repeat(48)}`);
  await expect(page.getByTestId('token-error')).toContainText('refused this access token');
});
