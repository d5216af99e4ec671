import { expect, test, type Page } from '@playwright/test';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoJson, startServer, type RunningServer } from '../server';

let server: RunningServer;
let root: string;

test.beforeAll(async () => {
  server = await startServer();
  root = mkdtempSync(path.join(tmpdir(), 'ditto-smallfiles-'));
});
test.afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

interface Entry {
  path: string;
  kind: string;
  size: number;
  recipe: string[];
}

async function backUp(page: Page, folder: string, previous: number | null) {
  await page.getByTestId('folder-input').setInputFiles(folder);
  await expect(page.locator(`[data-testid=picked-summary][data-root="${path.basename(folder)}"]`)).toBeVisible();
  await page.getByTestId('source-label').fill('tree');
  await page.getByTestId('backup-start').click();
  const done =
    previous === null
      ? page.getByTestId('backup-done')
      : page.locator(`[data-testid=backup-done]:not([data-version="${previous}"])`);
  await expect(done).toBeVisible({ timeout: 120_000 });
  return {
    id: Number(await done.getAttribute('data-version')),
    sent: Number(await page.getByTestId('backup-sent').getAttribute('data-bytes')),
  };
}

/** Chunks fetched from the server so far, by fingerprint (each is fetched once). */
const chunks = new Map<string, Buffer>();

/** Every file of version `id` rebuilt from the server's chunks, by path. */
async function restored(id: number): Promise<Map<string, Buffer>> {
  const { manifest } = await repoJson<{ manifest: { entries: Entry[] } }>(server, `/versions/${id}`);
  for (const e of manifest.entries)
    for (const fp of e.recipe)
      if (!chunks.has(fp)) {
        const res = await fetch(`${server.url}/api/v1/repos/default/chunks/${fp}`, {
          headers: { Authorization: `Bearer ${server.token}` },
        });
        expect(res.status, `chunk ${fp}`).toBe(200);
        chunks.set(fp, Buffer.from(await res.arrayBuffer()));
      }
  const files = new Map<string, Buffer>();
  for (const e of manifest.entries)
    if (e.kind === 'file') files.set(e.path, Buffer.concat(e.recipe.map((fp) => chunks.get(fp)!)));
  return files;
}

// Thousands of tiny files go to the workers in batches, each read as one composite Blob and
// split into its files again in the worker: every file must come back whole, under its own
// path, and a new version of the tree with one file changed must send only that file.
test('a tree of 3 000 tiny files is stored file by file, and one changed file is all the next version sends', async ({
  page,
}) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const content = new Map<string, Buffer>();
  const write = (tree: string, rel: string, bytes: Buffer) => {
    mkdirSync(path.dirname(path.join(root, tree, rel)), { recursive: true });
    writeFileSync(path.join(root, tree, rel), bytes);
  };
  for (let d = 0; d < 30; d++)
    for (let f = 0; f < 100; f++) {
      const rel = `pkg${d}/mod${f}.py`;
      // Sizes from empty to a few KB; every 7th file repeats another's bytes (dedup inside a batch).
      const bytes = f % 7 === 6 ? content.get(`pkg${d}/mod${f - 1}.py`)! : randomBytes((d * 131 + f * 37) % 3000);
      content.set(rel, bytes);
      write('v1', rel, bytes);
    }
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();

  const first = await backUp(page, path.join(root, 'v1'), null);
  const got = await restored(first.id);
  expect(got.size).toBe(3000);
  for (const [rel, bytes] of content) expect(got.get(rel)?.equals(bytes), `${rel} restored`).toBe(true);

  // The same tree, copied with new mtimes (as a new release unpacks), one file rewritten.
  const changed = randomBytes(4000);
  for (const [rel, bytes] of content) write('v2', rel, rel === 'pkg17/mod42.py' ? changed : bytes);
  const second = await backUp(page, path.join(root, 'v2'), first.id);
  // The changed file's one chunk, compressed or not, and the bundle's framing: nothing else.
  expect(second.sent).toBeGreaterThan(0);
  expect(second.sent).toBeLessThanOrEqual(changed.length + 2048);
  const again = await restored(second.id);
  expect(again.size).toBe(3000);
  expect(again.get('pkg17/mod42.py')?.equals(changed)).toBe(true);
  for (const [rel, bytes] of content)
    if (rel !== 'pkg17/mod42.py') expect(again.get(rel)?.equals(bytes), `${rel} in version 2`).toBe(true);
  expect(errors).toEqual([]);
});
