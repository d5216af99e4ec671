import { expect, test } from '@playwright/test';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoJson, startServer, type RunningServer } from '../server';

let server: RunningServer;
let root: string;

test.beforeAll(async () => {
  server = await startServer();
  root = mkdtempSync(path.join(tmpdir(), 'ditto-unreadable-'));
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

// Small files are read in batches (one composite read per batch): a file that vanished or
// changed after the pick must fail alone, be named, and not take its batch with it. An
// `<input webkitdirectory>` pick gives no way to a fresh File, so the changed file is read
// once more (it fails again) and the version is committed as incomplete, never "stored".
test('files removed or changed after the pick make an incomplete version that names them', async ({ page }) => {
  const dir = path.join(root, 'Docs');
  mkdirSync(dir);
  const content = new Map<string, Buffer>();
  for (let i = 0; i < 40; i++) {
    const name = `n${String(i).padStart(2, '0')}.txt`;
    const bytes = randomBytes(500 + i * 97);
    writeFileSync(path.join(dir, name), bytes);
    content.set(name, bytes);
  }
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(dir);
  await expect(page.getByTestId('picked-summary')).toHaveAttribute('data-files', '40');
  unlinkSync(path.join(dir, 'n05.txt'));
  writeFileSync(path.join(dir, 'n33.txt'), randomBytes(10)); // another size than picked
  await page.getByTestId('backup-start').click();
  const incomplete = page.getByTestId('backup-incomplete');
  await expect(incomplete).toBeVisible({ timeout: 60_000 });
  await expect(incomplete).toHaveAttribute('data-skipped', '2');
  await expect(incomplete).toContainText('incomplete');
  await expect(page.getByTestId('backup-done')).toHaveCount(0);

  const skipped = page.getByTestId('backup-skipped');
  await expect(skipped).toHaveCount(2);
  await expect(page.locator('[data-testid=backup-skipped][data-path="n05.txt"]')).toHaveAttribute(
    'data-reason',
    'deleted',
  );
  const changed = page.locator('[data-testid=backup-skipped][data-path="n33.txt"]');
  await expect(changed).toHaveAttribute('data-reason', 'unreadable');
  await expect(changed).toContainText('changed since it was picked');
  expect(await page.getByTestId('backup-errors').innerText()).not.toContain('n06.txt');

  const id = await incomplete.getAttribute('data-version');
  const { manifest, stats } = await repoJson<{
    manifest: { entries: Entry[]; skipped: { path: string; reason: string; detail?: string }[] };
    stats: { skipped_files: number };
  }>(server, `/versions/${id}`);
  expect(stats.skipped_files).toBe(2);
  expect(manifest.skipped.map((s) => [s.path, s.reason]).sort()).toEqual([
    ['n05.txt', 'deleted'],
    ['n33.txt', 'unreadable'],
  ]);
  const files = manifest.entries.filter((e) => e.kind === 'file');
  expect(files.map((e) => e.path).sort()).toEqual(
    [...content.keys()].filter((n) => n !== 'n05.txt' && n !== 'n33.txt').sort(),
  );
  // Every file that is in the version has its own bytes' chunks: fetch them back.
  for (const e of files) {
    const want = content.get(e.path)!;
    const parts: Buffer[] = [];
    for (const fp of e.recipe) {
      const res = await fetch(`${server.url}/api/v1/repos/default/chunks/${fp}`, {
        headers: { Authorization: `Bearer ${server.token}` },
      });
      expect(res.status).toBe(200);
      parts.push(Buffer.from(await res.arrayBuffer()));
    }
    const got = Buffer.concat(parts);
    expect(createHash('sha1').update(got).digest('hex'), e.path).toBe(createHash('sha1').update(want).digest('hex'));
  }

  // The Versions list marks the version and says which files are missing and why.
  await page.getByTestId('tab-versions').click();
  const row = page.locator(`[data-testid=version-row][data-version="${id}"]`);
  await expect(row).toHaveAttribute('data-incomplete', 'true');
  await row.getByTestId('version-incomplete').click();
  const missing = page.getByTestId('version-missing-file');
  await expect(missing).toHaveCount(2);
  await expect(page.locator('[data-testid=version-missing-file][data-path="n05.txt"]')).toContainText('deleted');
  await expect(page.locator('[data-testid=version-missing-file][data-path="n33.txt"]')).toContainText(
    'changed since it was picked',
  );
});

// A file one version could not read is not absent from its history: the version is listed as
// not having read it, and the next version that holds it is compared with the last one that did.
test("a file a version could not read shows in the file's history as not read", async ({ page }) => {
  const dir = path.join(root, 'Hist');
  mkdirSync(dir);
  const keep = randomBytes(3000);
  writeFileSync(path.join(dir, 'a.txt'), keep);
  writeFileSync(path.join(dir, 'b.txt'), randomBytes(700));
  const backUp = async (change?: () => void) => {
    await page.goto(server.appUrl);
    await expect(page.getByTestId('engine-ready')).toBeVisible();
    await page.getByTestId('folder-input').setInputFiles(dir);
    await page.getByTestId('source-label').fill('Hist');
    await expect(page.getByTestId('picked-summary')).toHaveAttribute('data-files', '2');
    change?.();
    await page.getByTestId('backup-start').click();
    await expect(page.getByTestId(change ? 'backup-incomplete' : 'backup-done')).toBeVisible({ timeout: 60_000 });
  };
  await backUp();
  await backUp(() => writeFileSync(path.join(dir, 'a.txt'), randomBytes(10))); // another size than picked
  writeFileSync(path.join(dir, 'a.txt'), keep);
  await backUp();

  const { versions } = await repoJson<{ versions: { id: number; source: string }[] }>(server, '/versions');
  const ids = versions.filter((v) => v.source === 'Hist').map((v) => v.id);
  expect(ids).toHaveLength(3);
  await page.getByTestId('tab-versions').click();
  await page.locator(`[data-testid=version-row][data-version="${ids[2]}"]`).getByTestId('version-browse').click();
  await page.locator('[data-testid=history-file][data-path="a.txt"]').click();
  const history = page.locator('[data-testid=file-history][data-path="a.txt"]');
  const rows = history.getByTestId('history-row');
  await expect(rows).toHaveCount(3);
  expect(
    await rows.evaluateAll((trs) =>
      trs.map((tr) => [(tr as HTMLElement).dataset.version, (tr as HTMLElement).dataset.change]),
    ),
  ).toEqual([
    [String(ids[0]), 'added'],
    [String(ids[1]), 'skipped'],
    [String(ids[2]), 'same'],
  ]);
  const skipped = history.locator(`[data-testid=history-row][data-version="${ids[1]}"]`);
  await expect(skipped).toContainText('not read by this backup');
  await expect(skipped.getByTestId('history-download')).toHaveCount(0);
});

// Through the directory picker the page holds each file's handle, so a file changed after the
// pick is read again from a fresh File and the version is complete with its new bytes.
// Playwright cannot drive the native picker: the page's picker returns a real directory of
// the origin-private file system instead, whose files the test changes from the page.
test('a file changed after a directory-picker pick is read again from its handle', async ({ page }) => {
  await page.addInitScript(() => {
    Object.defineProperty(window, 'showDirectoryPicker', {
      configurable: true,
      value: async () => (await navigator.storage.getDirectory()).getDirectoryHandle('Picked', { create: true }),
    });
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  /** Writes `files` (name -> seed) into the private folder; returns each file's bytes, base64. */
  const write = (files: Record<string, number>) =>
    page.evaluate(async (files) => {
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('Picked', { create: true });
      const out: Record<string, string> = {};
      for (const [name, seed] of Object.entries(files)) {
        let x = seed | 1;
        const bytes = new Uint8Array(3000 + seed * 11).map(() => ((x = (x * 1103515245 + 12345) >>> 0), x >>> 24));
        const w = await (await dir.getFileHandle(name, { create: true })).createWritable();
        await w.write(bytes);
        await w.close();
        let s = '';
        for (const b of bytes) s += String.fromCharCode(b);
        out[name] = btoa(s);
      }
      return out;
    }, files);
  const first = await write({ 'a.bin': 1, 'b.bin': 2, 'c.bin': 3 });
  await page.getByRole('button', { name: 'Choose folder…' }).click();
  await expect(page.getByTestId('picked-summary')).toHaveAttribute('data-files', '3');
  // Changed after the pick, before the backup reads it.
  const second = await write({ 'b.bin': 9 });
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
  await expect(page.getByTestId('backup-errors')).toHaveCount(0);
  const id = await page.getByTestId('backup-done').getAttribute('data-version');
  const { manifest, stats } = await repoJson<{
    manifest: { entries: (Entry & { size: number })[]; skipped?: unknown[] };
    stats: { skipped_files: number };
  }>(server, `/versions/${id}`);
  expect(stats.skipped_files).toBe(0);
  expect(manifest.skipped).toBeUndefined();
  const want = { ...first, ...second };
  const files = manifest.entries.filter((e) => e.kind === 'file');
  expect(files.map((e) => e.path).sort()).toEqual(['a.bin', 'b.bin', 'c.bin']);
  for (const e of files) {
    const parts: Buffer[] = [];
    for (const fp of e.recipe) {
      const res = await fetch(`${server.url}/api/v1/repos/default/chunks/${fp}`, {
        headers: { Authorization: `Bearer ${server.token}` },
      });
      parts.push(Buffer.from(await res.arrayBuffer()));
    }
    expect(Buffer.concat(parts).toString('base64'), e.path).toBe(want[e.path as keyof typeof want]);
  }
});

// A read checks the file against its snapshot only when it starts: a file rewritten in place
// while it is being read would give a recipe mixing old and new bytes. Uploads are held so
// that the worker's read stalls mid-file (it waits for the page to take its chunks), the file
// is rewritten, then the uploads go on.
test('a file rewritten while it is being read is not committed with mixed bytes', async ({ page }) => {
  const dir = path.join(root, 'Torn');
  mkdirSync(dir);
  const big = path.join(dir, 'big.bin');
  const size = 48 << 20;
  writeFileSync(big, randomBytes(size));
  writeFileSync(path.join(dir, 'small.txt'), 'stays\n');
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let firstBundle!: () => void;
  const sending = new Promise<void>((r) => (firstBundle = r));
  await page.route('**/api/v1/repos/*/bundles', async (route) => {
    firstBundle();
    await held;
    await route.continue();
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(dir);
  await expect(page.getByTestId('picked-summary')).toHaveAttribute('data-files', '2');
  await page.getByTestId('backup-start').click();
  await sending;
  writeFileSync(big, randomBytes(size)); // in place: same inode, same size, new bytes
  release();
  const incomplete = page.getByTestId('backup-incomplete');
  await expect(incomplete).toBeVisible({ timeout: 120_000 });
  await expect(page.getByTestId('backup-done')).toHaveCount(0);
  const skipped = page.locator('[data-testid=backup-skipped][data-path="big.bin"]');
  await expect(skipped).toHaveAttribute('data-reason', 'changed');
  const id = await incomplete.getAttribute('data-version');
  const { manifest } = await repoJson<{ manifest: { entries: Entry[]; skipped: { path: string; reason: string }[] } }>(
    server,
    `/versions/${id}`,
  );
  expect(manifest.entries.filter((e) => e.kind === 'file').map((e) => e.path)).toEqual(['small.txt']);
  expect(manifest.skipped.map((s) => [s.path, s.reason])).toEqual([['big.bin', 'changed']]);
});
