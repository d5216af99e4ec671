import { expect, test, type Page } from '@playwright/test';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { walk } from '../datasets';
import { restoreVersionZip } from '../page';
import { startServer, type RunningServer } from '../server';

let server: RunningServer;
let root: string;

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  server = await startServer();
  root = mkdtempSync(path.join(tmpdir(), 'ditto-change-'));
});
test.afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

/** npm's fixed stamp, 1985-10-26T08:15:00Z, in seconds. */
const NPM = 499162500;
/** Believable, long past, distinct per file. */
const OLD = Date.UTC(2025, 4, 1, 10) / 1000;

/** Without the File System Access save picker (Playwright cannot drive it) the page downloads a Blob. */
async function open(page: Page) {
  await page.addInitScript(() => {
    Object.defineProperty(window, 'showSaveFilePicker', { value: undefined, configurable: true });
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
}

/** Backs `dir` up as `source` through the page; returns the new version's id. */
async function backUp(
  page: Page,
  dir: string,
  source: string,
  opts: { readAll?: boolean; samplePercent?: number } = {},
) {
  await page.getByTestId('folder-input').setInputFiles(dir);
  await expect(page.getByTestId('picked-summary')).toBeVisible();
  await page.getByTestId('source-label').fill(source);
  if (opts.samplePercent !== undefined) await page.getByTestId('sample-percent').fill(String(opts.samplePercent));
  if (opts.readAll !== undefined) await page.getByTestId('read-all').setChecked(opts.readAll);
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
  return Number(await page.getByTestId('backup-done').getAttribute('data-version'));
}

async function trust(page: Page) {
  const t = page.getByTestId('backup-trust');
  const n = async (a: string) => Number(await t.getAttribute(`data-${a}`));
  return {
    trusted: await n('trusted'),
    sampled: await n('sampled'),
    distrusted: await n('distrusted'),
    caught: await n('caught'),
  };
}

/** The same length, other bytes: what a same-size edit looks like. */
function sameSizeEdit(file: string, text: boolean) {
  const old = readFileSync(file);
  let next: Buffer;
  if (text) {
    const s = old.toString('utf8');
    const m = /"version": "1\.0\.(\d)"/.exec(s)!;
    next = Buffer.from(s.replace(m[0], `"version": "1.0.${(Number(m[1]) + 1) % 10}"`));
  } else next = randomBytes(old.length);
  expect(next.length).toBe(old.length);
  expect(next.equals(old)).toBe(false);
  writeFileSync(file, next);
}

function snapshot(dir: string): Map<string, Buffer> {
  return new Map(walk(dir).map((rel) => [rel, readFileSync(path.join(dir, rel))]));
}

// The lost-release bug: a package whose files all carry one fixed stamp, a release that only
// rewrites its binary and package.json at the same size. Every version must restore its own
// bytes, whatever stamp the files carry (npm's, Nix's 1 s, zip's 1980, or one shared by all).
test('same-size edits under a fixed or shared mtime are read, and every version restores its own bytes', async ({
  page,
}, testInfo) => {
  const dir = path.join(root, 'pkg');
  mkdirSync(path.join(dir, 'bin'), { recursive: true });
  writeFileSync(path.join(dir, 'bin', 'tool'), randomBytes(300_000));
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'tool', version: '1.0.0' }, null, 1) + '\n');
  writeFileSync(path.join(dir, 'README.md'), 'A tool.\n'.repeat(500));
  const stamp = (secs: number) => {
    for (const f of ['bin/tool', 'package.json', 'README.md']) utimesSync(path.join(dir, f), secs, secs);
  };
  const dos1980Local = new Date(1980, 0, 1).getTime() / 1000;
  const stamps = [NPM, NPM, NPM, OLD, OLD, 1, 1, dos1980Local, dos1980Local];

  await open(page);
  const versions: { id: number; files: Map<string, Buffer> }[] = [];
  for (const [i, s] of stamps.entries()) {
    if (i > 0) {
      sameSizeEdit(path.join(dir, 'bin', 'tool'), false);
      sameSizeEdit(path.join(dir, 'package.json'), true);
    }
    stamp(s);
    const id = await backUp(page, dir, 'pkg');
    // Nothing is trusted unread: each mtime is a fixed stamp or shared by all three files.
    expect(await trust(page), `backup ${i}`).toMatchObject({ trusted: 0 });
    if (i > 0 && stamps[i - 1] === s) expect((await trust(page)).distrusted, `backup ${i}`).toBe(3);
    versions.push({ id, files: snapshot(dir) });
  }
  for (const v of versions) {
    const got = await restoreVersionZip(page, v.id, testInfo.outputPath(`v${v.id}`));
    expect([...got.keys()].sort()).toEqual([...v.files.keys()].sort());
    for (const [rel, want] of v.files) expect(got.get(rel)!.equals(want), `version ${v.id}: ${rel}`).toBe(true);
  }
});

// With believable, distinct mtimes a same-size edit that keeps its mtime is invisible to size
// and mtime: "Read every file" catches it, and so does the random sample once it lands on an
// edited file — then every trusted file of the source is read.
test('a sampled file that changed under the same size and mtime makes the backup read everything', async ({
  page,
}, testInfo) => {
  const dir = path.join(root, 'notes');
  mkdirSync(dir, { recursive: true });
  const names = ['a.bin', 'b.bin', 'c.txt'];
  const write = (name: string, k: number) => {
    const f = path.join(dir, name);
    writeFileSync(f, name.endsWith('.txt') ? `note ${k}\n`.repeat(3000).slice(0, 20_000) : randomBytes(50_000));
    utimesSync(f, OLD + names.indexOf(name) * 7, OLD + names.indexOf(name) * 7);
  };
  names.forEach((n) => write(n, 0));

  await open(page);
  const v1 = await backUp(page, dir, 'notes', { samplePercent: 0, readAll: false });

  // 1. One file edited; "Read every file" reads it and sees its recipe changed.
  write('a.bin', 1);
  const v2 = await backUp(page, dir, 'notes', { readAll: true });
  expect(await trust(page)).toEqual({ trusted: 0, sampled: 3, distrusted: 0, caught: 1 });
  await expect(page.getByTestId('backup-sample-caught')).toContainText('a.bin');
  const want2 = snapshot(dir);

  // 2. Every file edited, sampling 5 % (one file of three): whichever is sampled changed,
  // so the other two, trusted at first, are read as well.
  names.forEach((n, k) => write(n, k + 2));
  const v3 = await backUp(page, dir, 'notes', { readAll: false, samplePercent: 5 });
  expect(await trust(page)).toEqual({ trusted: 0, sampled: 1, distrusted: 0, caught: 1 });
  await expect(page.getByTestId('backup-files')).toContainText('3 of 3 (0 unchanged');
  const want3 = snapshot(dir);

  // 3. Nothing edited: the sample is read and matches, two files are trusted unread.
  const v4 = await backUp(page, dir, 'notes');
  expect(await trust(page)).toEqual({ trusted: 2, sampled: 1, distrusted: 0, caught: 0 });
  await expect(page.getByTestId('backup-sample-caught')).toHaveCount(0);

  for (const [id, want] of [
    [v2, want2],
    [v3, want3],
    [v4, want3],
  ] as const) {
    const got = await restoreVersionZip(page, id, testInfo.outputPath(`n${id}`));
    for (const [rel, bytes] of want) expect(got.get(rel)!.equals(bytes), `version ${id}: ${rel}`).toBe(true);
  }
  expect(v1).toBeLessThan(v2);

  // The source's settings are kept (IndexedDB) across a reload.
  await page.reload();
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(dir);
  await page.getByTestId('source-label').fill('notes');
  await expect(page.getByTestId('sample-percent')).toHaveValue('5');
  await expect(page.getByTestId('read-all')).not.toBeChecked();
});
