import { expect, test } from '@playwright/test';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, type RunningServer } from '../server';
import { plainRecipe } from '../recipes';

/**
 * A file above the split threshold (64 MiB) is chunked by several workers, one segment each
 * (SS-CDC). Its recipe must equal one sequential ChunkEngine("default") pass over the file.
 */
const MiB = 2 ** 20;
const SIZE = 80 * MiB + 12_345; // not a multiple of the segment size
let server: RunningServer;
let root: string;
let file: string;

/** Deterministic bytes: text-like runs, random runs and zero runs (max-size chunks). */
function content(): Buffer {
  const out = Buffer.alloc(SIZE);
  let x = 0x9e3779b9;
  const next = () => ((x = (Math.imul(x, 1664525) + 1013904223) >>> 0), x);
  const words = ['export ', 'function ', 'const ', 'return ', '{', '}', '\n', 'value', 'index', ' = ', ';'];
  for (let at = 0; at < SIZE;) {
    const kind = next() % 3;
    const len = Math.min(SIZE - at, 100_000 + (next() % 3_000_000));
    if (kind === 0) for (let i = 0; i < len; i++) out[at + i] = next() & 255;
    else if (kind === 1) {
      for (let i = 0; i < len;) {
        const w = words[next() % words.length];
        i += out.write(w.slice(0, len - i), at + i, 'latin1');
      }
    } // kind 2: zeros
    at += len;
  }
  return out;
}

test.beforeAll(async () => {
  server = await startServer();
  root = mkdtempSync(path.join(tmpdir(), 'ditto-split-'));
  mkdirSync(path.join(root, 'Split'));
  file = path.join(root, 'Split', 'big.bin');
  const fd = openSync(file, 'w');
  writeSync(fd, content());
  closeSync(fd);
});
test.afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

test('a file split across workers gets the sequential recipe', async ({ page }) => {
  test.setTimeout(240_000);
  // Three workers on any machine: segments land on workers in an irregular order.
  await page.addInitScript(() => Object.defineProperty(Navigator.prototype, 'hardwareConcurrency', { get: () => 3 }));
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Split'));
  await page.getByTestId('backup-start').click();
  const done = page.getByTestId('backup-done');
  await expect(done).toBeVisible({ timeout: 200_000 });
  await expect(done).toHaveAttribute('data-split-files', '1');
  const id = Number(await done.getAttribute('data-version'));
  const res = await fetch(`${server.url}/api/v1/repos/default/versions/${id}`, {
    headers: { Authorization: `Bearer ${server.token}` },
  });
  const { manifest } = await res.json();
  const entry = manifest.entries.find((e: { path: string }) => e.path === 'big.bin');
  const bytes = readFileSync(file);
  const want = plainRecipe(bytes);
  expect(want.length).toBeGreaterThan(1000);
  expect(entry.recipe.length).toBe(want.length);
  expect(entry.recipe).toEqual(want);
  expect(entry.size).toBe(SIZE);
});
