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
// changed after the pick must fail alone, be named, and not take its batch with it.
test('files removed or changed after the pick are named; the rest of their batch is backed up', async ({ page }) => {
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
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });

  const errors = await page.getByTestId('backup-errors').innerText();
  expect(errors).toContain('n05.txt');
  expect(errors).toContain('n33.txt');
  expect(errors).not.toContain('n06.txt');

  const id = await page.getByTestId('backup-done').getAttribute('data-version');
  const { manifest } = await repoJson<{ manifest: { entries: Entry[] } }>(server, `/versions/${id}`);
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
});
