import { expect, test, type Download, type Page } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
  openSync,
  readSync,
  writeSync,
  closeSync,
} from 'node:fs';
import path from 'node:path';
import { npmVersions, walk } from '../datasets';
import { backUp, crashOnNext, openWithoutPicker as open, slowLink } from '../page';
import { repoJson, settleLayout, startServer, type RunningServer } from '../server';

const PKG = process.env.DITTO_E2E_PACKAGE ?? 'preact';

let server: RunningServer;
let folders: string[];
const ids: number[] = [];
let v2Zip = '';

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  folders = npmVersions(PKG, 3);
  server = await startServer();
});
test.afterAll(async () => {
  await server?.stop();
});

const api = <T>(p: string) => repoJson<T>(server, p);

const openWithoutPicker = (page: Page) => open(page, server);

function row(page: Page, id: number) {
  return page.locator(`[data-testid=version-row][data-version="${id}"]`);
}

test('back up three releases, restore version 2 as a zip identical to its folder', async ({ page }, testInfo) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await openWithoutPicker(page);
  for (const f of folders) ids.push(await backUp(page, f, PKG));

  await page.getByTestId('tab-versions').click();
  await expect(page.getByTestId('version-row')).toHaveCount(3);
  const v2 = await api<{ stats: { files: number; logical_bytes: number; new_stored_bytes: number } }>(
    `/versions/${ids[1]}`,
  );
  await expect(row(page, ids[1]).getByTestId('v-files')).toHaveAttribute('data-value', String(v2.stats.files));
  await expect(row(page, ids[1]).getByTestId('v-logical')).toHaveAttribute(
    'data-value',
    String(v2.stats.logical_bytes),
  );
  await expect(row(page, ids[1]).getByTestId('v-new-stored')).toHaveAttribute(
    'data-value',
    String(v2.stats.new_stored_bytes),
  );

  // The restore plans from the version's own chunk locations, not the repository's table.
  const apiPaths: string[] = [];
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (u.pathname.startsWith('/api/v1/repos/')) apiPaths.push(u.pathname);
  });
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    row(page, ids[1]).getByTestId('version-zip').click(),
  ]);
  expect(apiPaths).toContain(`/api/v1/repos/default/versions/${ids[1]}/locations`);
  expect(apiPaths.filter((p) => p.endsWith('/containers'))).toEqual([]);
  const zip = testInfo.outputPath('v2.zip');
  await download.saveAs(zip);
  v2Zip = zip;
  expect(download.suggestedFilename()).toMatch(/\.zip$/);
  await expect(page.getByTestId('restore-done')).toBeVisible();
  // Streamed by the download worker (public/dl/sw.js), not assembled into a Blob.
  await expect(page.getByTestId('restore-status')).toHaveAttribute('data-sink', 'stream');

  const out = testInfo.outputPath('v2');
  mkdirSync(out, { recursive: true });
  execFileSync('unzip', ['-q', '-o', zip, '-d', out]);
  const want = walk(folders[1]);
  const got = walk(out);
  expect(got).toEqual(want);
  expect(want.length).toBeGreaterThan(10);
  let total = 0;
  for (const rel of want) {
    const a = readFileSync(path.join(folders[1], rel));
    const b = readFileSync(path.join(out, rel));
    expect(b.equals(a), `${rel} differs`).toBe(true);
    total += a.length;
  }
  expect(total).toBe(v2.stats.logical_bytes);
  // Deflated (docs/FORMAT.md, "Restore zips"): a release's JavaScript and type definitions
  // take well under half their size in the zip.
  expect(statSync(zip).size).toBeLessThan(total / 2);
  expect(errors).toEqual([]);
});

test('download one file and one folder of a version', async ({ page }, testInfo) => {
  await openWithoutPicker(page);
  await page.getByTestId('tab-versions').click();
  await row(page, ids[1]).getByTestId('version-browse').click();
  await expect(page.getByTestId('version-browser')).toBeVisible();

  // The largest file inside a sub-folder: several chunks, and the tree has to be opened.
  const nested = walk(folders[1])
    .filter((r) => r.includes('/'))
    .sort((a, b) => statSync(path.join(folders[1], b)).size - statSync(path.join(folders[1], a)).size)[0];
  const segs = nested.split('/');
  for (let i = 1; i < segs.length; i++)
    await page
      .locator(
        `[data-testid=tree-node][data-path="${segs.slice(0, i).join('/')}"] > .tree-row [data-testid=tree-toggle]`,
      )
      .click();
  const [file] = await Promise.all([
    page.waitForEvent('download'),
    page.locator(`[data-testid=download-file][data-path="${nested}"]`).click(),
  ]);
  expect(file.suggestedFilename()).toBe(segs[segs.length - 1]);
  const saved = testInfo.outputPath('one-file');
  await file.saveAs(saved);
  expect(readFileSync(saved).equals(readFileSync(path.join(folders[1], nested))), nested).toBe(true);
  await expect(page.getByTestId('restore-done')).toBeVisible();

  // The folder holding it, as a zip: names relative to that folder.
  const folder = segs[0];
  const [dl] = await Promise.all([
    page.waitForEvent('download'),
    page.locator(`[data-testid=download-folder][data-path="${folder}"]`).click(),
  ]);
  const zip = testInfo.outputPath('folder.zip');
  await dl.saveAs(zip);
  const out = testInfo.outputPath('folder');
  mkdirSync(out, { recursive: true });
  execFileSync('unzip', ['-q', '-o', zip, '-d', out]);
  const want = walk(path.join(folders[1], folder));
  expect(walk(out)).toEqual(want);
  for (const rel of want)
    expect(readFileSync(path.join(out, rel)).equals(readFileSync(path.join(folders[1], folder, rel))), rel).toBe(true);
});

test('with a save picker the zip is streamed to the file, same bytes as the download', async ({
  browser,
}, testInfo) => {
  // Without service workers (a private window, an insecure origin) the picker is the way out.
  const context = await browser.newContext({ serviceWorkers: 'block' });
  const page = await context.newPage();
  // A stand-in for the File System Access API that records what is written, piece by piece.
  await page.addInitScript(() => {
    const w = window as unknown as { __written: Uint8Array[]; __closed: boolean; showSaveFilePicker: unknown };
    w.__written = [];
    w.__closed = false;
    w.showSaveFilePicker = async () => ({
      createWritable: async () =>
        new WritableStream<Uint8Array>({
          write: (c) => void w.__written.push(new Uint8Array(c)),
          close: () => void (w.__closed = true),
        }),
    });
  });
  await page.goto(server.appUrl);
  await page.getByTestId('tab-versions').click();
  await row(page, ids[1]).getByTestId('version-zip').click();
  await expect(page.getByTestId('restore-done')).toBeVisible();
  await expect(page.getByTestId('restore-status')).toHaveAttribute('data-sink', 'picker');
  const { pieces, largest, bytes, closed } = await page.evaluate(() => {
    const w = window as unknown as { __written: Uint8Array[]; __closed: boolean };
    return {
      pieces: w.__written.length,
      largest: Math.max(...w.__written.map((c) => c.length)),
      bytes: Array.from(w.__written.flatMap((c) => Array.from(c))),
      closed: w.__closed,
    };
  });
  expect(closed).toBe(true);
  // Written as produced, in blocks of at most 4 MiB (web/src/restore/blocks.ts), never the
  // archive as one buffer.
  expect(largest).toBeLessThanOrEqual(4 << 20);
  expect(pieces).toBeGreaterThanOrEqual(Math.ceil(bytes.length / (4 << 20)));
  const viaPicker = Buffer.from(bytes);
  writeFileSync(testInfo.outputPath('picker.zip'), viaPicker);
  // Same entries, same dates: the archive is deterministic, whichever sink gets it.
  expect(viaPicker.equals(readFileSync(v2Zip)), 'picker zip == downloaded zip').toBe(true);
  const out = testInfo.outputPath('picker');
  mkdirSync(out, { recursive: true });
  execFileSync('unzip', ['-q', '-o', testInfo.outputPath('picker.zip'), '-d', out]);
  for (const rel of walk(folders[1]))
    expect(readFileSync(path.join(out, rel)).equals(readFileSync(path.join(folders[1], rel))), rel).toBe(true);
  await context.close();
});

test('without service workers or a save picker the zip is a Blob download, same bytes', async ({ browser }) => {
  const context = await browser.newContext({ serviceWorkers: 'block', acceptDownloads: true });
  const page = await context.newPage();
  await page.addInitScript(() => {
    Object.defineProperty(window, 'showSaveFilePicker', { value: undefined, configurable: true });
  });
  await page.goto(server.appUrl);
  await page.getByTestId('tab-versions').click();
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    row(page, ids[1]).getByTestId('version-zip').click(),
  ]);
  await expect(page.getByTestId('restore-done')).toBeVisible();
  await expect(page.getByTestId('restore-status')).toHaveAttribute('data-sink', 'blob');
  expect(readFileSync(await download.path()).equals(readFileSync(v2Zip)), 'Blob zip == streamed zip').toBe(true);
  await context.close();
});

test('a restore worker that crashes mid-restore is replaced and the zip is still identical', async ({ page }) => {
  await openWithoutPicker(page);
  await page.getByTestId('tab-versions').click();
  const zipOf = async () => {
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      row(page, ids[1]).getByTestId('version-zip').click(),
    ]);
    await expect(page.getByTestId('restore-done')).toBeVisible();
    return readFileSync(await download.path());
  };
  // A first restore starts the restore workers, which stay for the next one.
  await zipOf();
  const workers = page.workers().filter((w) => w.url().includes('restoreWorker'));
  expect(workers.length).toBeGreaterThan(0);
  // Each worker crashes on the next verification it is sent, leaving that request unanswered.
  for (const w of workers) await crashOnNext(w, { bridge: 'call', method: 'verify' });
  const replaced = page.waitForEvent('worker', (w) => w.url().includes('restoreWorker'));
  const again = await zipOf();
  await replaced;
  expect(again.equals(readFileSync(v2Zip)), 'the zip after a crash == the first zip').toBe(true);
  await expect(page.getByTestId('restore-error')).toHaveCount(0);
});

test('the zip is assembled off the page; an assembler that crashes fails the download, the next restore works', async ({
  page,
}) => {
  await openWithoutPicker(page);
  await page.getByTestId('tab-versions').click();
  const downloads: Download[] = [];
  page.on('download', (d) => downloads.push(d));
  const zip = async () => {
    await row(page, ids[1]).getByTestId('version-zip').click();
    await expect(page.getByTestId('restore-done').or(page.getByTestId('restore-error'))).toBeVisible();
    await expect.poll(() => downloads.length).toBeGreaterThan(0);
    return downloads.shift()!;
  };
  // A first restore starts the assembler worker (it is kept for the next ones).
  const first = await zip();
  expect(readFileSync(await first.path()).equals(readFileSync(v2Zip))).toBe(true);
  const assemblers = page.workers().filter((w) => w.url().includes('assembleWorker'));
  expect(assemblers.length).toBe(1);
  // It crashes on the first verified chunks it is sent.
  await crashOnNext(assemblers[0], { bridge: 'signal', type: 'chunks' });
  const replaced = page.waitForEvent('worker', (w) => w.url().includes('assembleWorker'));
  const failed = await zip();
  await expect(page.getByTestId('restore-error')).toContainText('assembler worker crashed');
  // The download the crashed worker was writing fails (the page fails it by its id), rather
  // than waiting forever or ending as a truncated zip.
  expect(await failed.failure(), 'the download failed').not.toBeNull();
  await replaced;
  const again = await zip();
  await expect(page.getByTestId('restore-done')).toBeVisible();
  expect(readFileSync(await again.path()).equals(readFileSync(v2Zip)), 'the zip after a crash').toBe(true);
});

test('a cancelled restore fails its download instead of leaving a truncated zip', async ({ page }) => {
  await open(page, server);
  // A slow link, so the restore is still running when Cancel is pressed.
  await slowLink(page);
  await page.getByTestId('tab-versions').click();
  const downloads: Download[] = [];
  page.on('download', (d) => downloads.push(d));
  await row(page, ids[1]).getByTestId('version-zip').click();
  await expect(page.getByTestId('restore-progress')).toBeVisible();
  // Another tab shown meanwhile: the restore goes on, and its progress and Cancel are there
  // again with the Versions tab (before, they were gone, and a second restore could start).
  await page.getByTestId('tab-backup').click();
  await expect(page.getByTestId('restore-status')).toHaveCount(0);
  await page.getByTestId('tab-versions').click();
  await expect(page.getByTestId('restore-progress')).toBeVisible();
  await expect(row(page, ids[1]).getByTestId('version-zip')).toBeDisabled();
  await page.getByTestId('restore-cancel').click();
  await expect(page.getByTestId('restore-error')).toContainText('cancelled');
  await expect(page.getByTestId('restore-done')).toHaveCount(0);
  expect(downloads.length).toBe(1);
  expect(await downloads[0].failure(), 'the download failed').not.toBeNull();
});

interface Entry {
  path: string;
  kind: string;
  recipe: string[];
}
interface Container {
  id: number;
  chunks: { fp: string; offset: number; stored_len: number }[];
}

/** Changes 16 bytes in the middle of chunk `fp`'s stored copy, in its container file. */
async function damageOnDisk(fp: string) {
  const { containers } = await api<{ containers: Container[] }>('/containers');
  const c = containers.find((x) => x.chunks.some((ch) => ch.fp === fp))!;
  const ch = c.chunks.find((x) => x.fp === fp)!;
  const reposDir = path.join(server.dataDir, 'repos');
  const file = readdirSync(reposDir)
    .map((r) => path.join(reposDir, r, 'containers', `${String(c.id).padStart(10, '0')}.dct`))
    .find((p) => {
      try {
        return statSync(p).isFile();
      } catch {
        return false;
      }
    })!;
  expect(file, 'container file').toBeTruthy();
  const fd = openSync(file, 'r+');
  const n = Math.min(16, ch.stored_len);
  const buf = Buffer.alloc(n);
  readSync(fd, buf, 0, n, ch.offset + Math.floor(ch.stored_len / 2) - Math.floor(n / 2));
  for (let i = 0; i < n; i++) buf[i] ^= 0xa5;
  writeSync(fd, buf, 0, n, ch.offset + Math.floor(ch.stored_len / 2) - Math.floor(n / 2));
  closeSync(fd);
}

test('a corrupted chunk on disk stops the restore and names the file', async ({ page }) => {
  const v3 = await api<{ manifest: { entries: Entry[] } }>(`/versions/${ids[2]}`);
  const files = v3.manifest.entries.filter((e) => e.kind === 'file' && e.recipe.length > 0);
  // A chunk well inside the version; the first file that references it is the one to blame.
  const target = files[Math.floor(files.length / 2)];
  const fp = target.recipe[0];
  const blamed = files.find((f) => f.recipe.includes(fp))!.path;
  // The server's own reads after the commits end before the bytes are damaged, so the
  // restore is the first to find them.
  await settleLayout(server, { readsDone: true });
  await damageOnDisk(fp);

  await openWithoutPicker(page);
  await page.getByTestId('tab-versions').click();
  // A streamed download starts at the click; the failure must end it failed, never complete.
  const downloads: Download[] = [];
  page.on('download', (d) => downloads.push(d));
  await row(page, ids[2]).getByTestId('version-zip').click();
  const error = page.getByTestId('restore-error');
  await expect(error).toBeVisible();
  await expect(error).toContainText(blamed);
  await expect(error).toContainText(fp);
  await expect(error).toContainText('damaged');
  await expect(page.getByTestId('restore-done')).toHaveCount(0);
  await expect(page.getByTestId('restore-status')).toHaveAttribute('data-sink', 'stream');
  expect(downloads.length).toBe(1);
  expect(await downloads[0].failure(), 'the download failed').not.toBeNull();
});

/** What `GET versions` says of each version's damage. */
type Damage = { versions: { id: number; damaged_chunks?: number }[] };

test('a chunk damaged on disk that a search reads first: the server sets it aside, the search names it; a backup heals it', async ({
  page,
}) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await openWithoutPicker(page);
  // The chunk damaged above is stored again first (the versions share it), and the
  // server's own reads of that backup end before a chunk of the first version that the
  // restore did not read is damaged.
  await backUp(page, folders[2], PKG);
  await settleLayout(server, { readsDone: true });
  const before = await api<Damage>('/versions');
  expect(before.versions.map((v) => v.damaged_chunks ?? 0)).toEqual(before.versions.map(() => 0));
  const v1 = await api<{ manifest: { entries: Entry[] } }>(`/versions/${ids[0]}`);
  const v3 = await api<{ manifest: { entries: Entry[] } }>(`/versions/${ids[2]}`);
  const read = new Set(v3.manifest.entries.flatMap((e) => e.recipe ?? []));
  const fp = v1.manifest.entries.flatMap((e) => e.recipe ?? []).find((x) => !read.has(x))!;
  expect(fp, 'a chunk only the first version has').toBeTruthy();
  await damageOnDisk(fp);

  /** Searches the first version in the page. */
  const searchFirstVersion = async () => {
    await page.getByTestId('tab-search').click();
    await page.getByTestId('search-where').selectOption('page');
    await page.getByTestId('search-versions').selectOption(String(ids[0]));
    await page.getByTestId('search-keywords').fill('function');
    await page.getByTestId('search-start').click();
  };
  await searchFirstVersion();
  // The worker refuses the bytes; the search asks the server for the chunk checked, which
  // quarantines it, and starts over: the chunk is then named as not stored.
  const error = page.getByTestId('search-error');
  await expect(error).toBeVisible({ timeout: 120_000 });
  await expect(error).toContainText(fp);
  await expect(error).toContainText('does not store');
  const { versions } = await api<Damage>('/versions');
  expect(versions.find((v) => v.id === ids[0])?.damaged_chunks, 'quarantined by the search').toBeGreaterThan(0);
  await expect(page.locator('[data-testid=search-done][data-engine=dedup]')).toHaveCount(0);

  // Backing the folder up again stores the chunk again; the same page's next search of
  // the first version reads its locations again instead of trusting the ones without it.
  await page.getByTestId('tab-backup').click();
  await backUp(page, folders[0], PKG);
  await searchFirstVersion();
  const done = page.locator('[data-testid=search-done][data-engine=dedup]');
  await expect(done).toBeVisible({ timeout: 120_000 });
  expect(Number(await done.getAttribute('data-files'))).toBeGreaterThan(0);
  const after = await api<Damage>('/versions');
  expect(after.versions.find((v) => v.id === ids[0])?.damaged_chunks ?? 0, 'healed').toBe(0);
  expect(errors).toEqual([]);
});
