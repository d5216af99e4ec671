import { expect, test, type Page } from '@playwright/test';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoJson, startServer, type RunningServer } from '../server';

let server: RunningServer;
let root: string;
const FILES = 12;

test.beforeAll(async () => {
  server = await startServer();
  root = mkdtempSync(path.join(tmpdir(), 'ditto-tabs-'));
  // Incompressible, several bundles; distinct mtimes in the past (trusted as unchanged later).
  for (let i = 0; i < FILES; i++) {
    const file = path.join(root, 'Shared', `f${i}.bin`);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, randomBytes(1 << 20));
    utimesSync(file, 1_700_000_000 + i, 1_700_000_000 + i);
  }
});
test.afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

async function open(page: Page) {
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
}

async function pick(page: Page) {
  // The tab the user works in is in front (a background tab's file chooser does not answer).
  await page.bringToFront();
  await page.getByTestId('tab-backup').click();
  await page.getByTestId('folder-input').setInputFiles(path.join(root, 'Shared'));
  await page.getByTestId('source-label').fill('Shared');
  // Trust unchanged files without a sample, so that what is read says which version was planned from.
  await page.getByTestId('sample-percent').fill('0');
}

test('two tabs: the second is told a backup runs in the other, and never plans from a stale version', async ({
  context,
}) => {
  const a = await context.newPage();
  const b = await context.newPage();
  await open(a);
  await open(b);

  // Tab B backs up first (version 1, kept in B's memory as the previous version).
  await pick(b);
  await b.getByTestId('backup-start').click();
  await expect(b.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });

  // One file changes; tab A backs it up (version 2) with its uploads slowed down, and tab B
  // tries meanwhile.
  const changed = path.join(root, 'Shared', 'f3.bin');
  writeFileSync(changed, randomBytes((1 << 20) + 5));
  utimesSync(changed, 1_700_100_000, 1_700_100_000);
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  await a.route('**/api/v1/repos/*/bundles', async (route) => {
    await held;
    await route.continue();
  });
  await pick(a);
  await a.getByTestId('backup-start').click();
  await expect(a.getByTestId('backup-phase')).toHaveText(/backing up/);
  await pick(b);
  await b.getByTestId('backup-start').click();
  await expect(b.getByTestId('backup-elsewhere')).toContainText('running in another tab');
  // The running tab shows its progress in its title, and asks before it closes.
  await expect(a).toHaveTitle(/^\d+% backing up Shared · /);
  const asked = new Promise<string>((resolve) =>
    a.once('dialog', (d) => {
      resolve(d.type());
      void d.dismiss();
    }),
  );
  await a.close({ runBeforeUnload: true });
  expect(await asked).toBe('beforeunload');
  expect(a.isClosed()).toBe(false);
  release();
  await expect(a.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
  await expect(a).not.toHaveTitle(/backing up/);

  // B again: it plans from A's version 2, so every file is unchanged and none is read.
  await pick(b);
  await b.getByTestId('backup-start').click();
  await expect(b.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
  await expect(b.getByTestId('backup-trust')).toHaveAttribute('data-trusted', String(FILES));
  await expect(b.getByTestId('backup-sent')).toHaveAttribute('data-bytes', '0');

  const { versions } = await repoJson<{ versions: { source: string; stats: { files: number } }[] }>(
    server,
    '/versions',
  );
  expect(versions.map((v) => [v.source, v.stats.files])).toEqual([
    ['Shared', FILES],
    ['Shared', FILES],
    ['Shared', FILES],
  ]);
  // The client index both tabs wrote still opens and answers: a fourth backup in a fresh tab,
  // reading every file, commits at the first try and sends nothing.
  const c = await context.newPage();
  await open(c);
  await pick(c);
  await c.getByTestId('read-all').check();
  await c.getByTestId('backup-start').click();
  await expect(c.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
  await expect(c.getByTestId('backup-sent')).toHaveAttribute('data-bytes', '0');
});
