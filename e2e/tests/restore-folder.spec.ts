import { expect, test, type Page } from '@playwright/test';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { npmVersions, walk } from '../datasets';
import { backUp, openWithOpfsFolderPicker, slowLink } from '../page';
import { repoJson, startServer, type RunningServer } from '../server';

const PKG = process.env.DITTO_E2E_PACKAGE ?? 'preact';

let server: RunningServer;
let folder: string;
let version = 0;
/** The large-file version's tree (path -> SHA-1), kept by the test that backs it up. */
let bigTree: Record<string, string> = {};

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  folder = npmVersions(PKG, 1)[0];
  server = await startServer();
});
test.afterAll(async () => {
  await server?.stop();
});

const openWithOpfsPicker = (page: Page) => openWithOpfsFolderPicker(page, server);

/** Every file of the OPFS restore folder: relative path -> SHA-1 hex. */
async function opfsTree(page: Page): Promise<Record<string, string>> {
  return page.evaluate(async () => {
    const out: Record<string, string> = {};
    const visit = async (dir: FileSystemDirectoryHandle, rel: string) => {
      for await (const [name, h] of (
        dir as unknown as { entries(): AsyncIterable<[string, FileSystemHandle]> }
      ).entries()) {
        const r = rel ? `${rel}/${name}` : name;
        if (h.kind === 'directory') await visit(h as FileSystemDirectoryHandle, r);
        else {
          const bytes = await (await (h as FileSystemFileHandle).getFile()).arrayBuffer();
          const d = new Uint8Array(await crypto.subtle.digest('SHA-1', bytes));
          out[r] = [...d].map((b) => b.toString(16).padStart(2, '0')).join('');
        }
      }
    };
    await visit(await (await navigator.storage.getDirectory()).getDirectoryHandle('restored'), '');
    return out;
  });
}

function sourceTree(dir = folder): Record<string, string> {
  const out: Record<string, string> = {};
  for (const rel of walk(dir))
    out[rel] = createHash('sha1')
      .update(readFileSync(path.join(dir, rel)))
      .digest('hex');
  return out;
}

/** Opens the Versions tab and starts the restore of `version` into a folder. */
async function startFolderRestore(page: Page) {
  await page.getByTestId('tab-versions').click();
  await page.locator(`[data-testid=version-row][data-version="${version}"]`).getByTestId('version-folder').click();
}

/** Removes the origin-private folder the restores write into (the stubbed picker's choice). */
async function clearTarget(page: Page) {
  await page.evaluate(() =>
    navigator.storage.getDirectory().then((d) => d.removeEntry('restored', { recursive: true }).catch(() => {})),
  );
}

/** Opens the page with the stubbed picker and an empty target folder; the page's errors. */
async function openEmptyTarget(page: Page): Promise<string[]> {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await openWithOpfsPicker(page);
  await clearTarget(page);
  return errors;
}

/** Restores the version into the folder; returns the fingerprints the page asked the server for. */
async function restoreIntoFolder(page: Page): Promise<string[]> {
  const asked: string[] = [];
  const listen = (r: { url(): string; postData(): string | null }) => {
    if (r.url().endsWith('/chunks/get')) asked.push(...(JSON.parse(r.postData() ?? '{}').fingerprints as string[]));
  };
  page.on('request', listen);
  await startFolderRestore(page);
  await expect(page.getByTestId('restore-done')).toBeVisible({ timeout: 60_000 });
  page.off('request', listen);
  return asked;
}

test('restore into a folder: byte-identical, then only a changed file is fetched again', async ({ page }) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await openWithOpfsPicker(page);
  await page.getByTestId('folder-input').setInputFiles(folder);
  await page.getByTestId('source-label').fill(PKG);
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 120_000 });
  version = Number(await page.getByTestId('backup-done').getAttribute('data-version'));

  const first = await restoreIntoFolder(page);
  const want = sourceTree();
  expect(await opfsTree(page)).toEqual(want);
  expect(first.length).toBeGreaterThan(0);
  await expect(page.getByTestId('restore-done')).toHaveAttribute('data-skipped-files', '0');

  // Change the largest file in the folder (same size, other bytes), then restore again.
  const { manifest } = await repoJson<{
    manifest: { entries: { path: string; kind: string; size: number; recipe: string[] }[] };
  }>(server, `/versions/${version}`);
  const files = manifest.entries.filter((e) => e.kind === 'file');
  const biggest = files.reduce((a, b) => (b.size > a.size ? b : a));
  const rel = Object.keys(want).find((r) => biggest.path === r || biggest.path.endsWith('/' + r))!;
  expect(rel, 'the largest file in the restored tree').toBeTruthy();
  await page.evaluate(async (rel) => {
    let dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('restored');
    const parts = rel.split('/');
    for (const p of parts.slice(0, -1)) dir = await dir.getDirectoryHandle(p);
    const h = await dir.getFileHandle(parts[parts.length - 1]);
    const bytes = new Uint8Array(await (await h.getFile()).arrayBuffer());
    for (let i = 0; i < bytes.length; i += 4096) bytes[i] ^= 0xff;
    const w = await h.createWritable();
    await w.write(bytes);
    await w.close();
  }, rel);
  expect((await opfsTree(page))[rel]).not.toBe(want[rel]);

  const second = await restoreIntoFolder(page);
  expect(await opfsTree(page)).toEqual(want);
  await expect(page.getByTestId('restore-done')).toHaveAttribute('data-skipped-files', String(files.length - 1));
  // Only the changed file's chunks were fetched, each once.
  expect(second.length).toBeGreaterThan(0);
  expect(new Set(second)).toEqual(new Set(biggest.recipe));
  expect(second.length).toBe(new Set(biggest.recipe).size);
  expect(second.length).toBeLessThan(first.length);
  expect(errors).toEqual([]);
});

test('a refused folder permission is said plainly and nothing is fetched', async ({ page }) => {
  await page.addInitScript(() => {
    Object.defineProperty(window, 'showDirectoryPicker', {
      value: async () => {
        throw new DOMException('The user denied permission.', 'NotAllowedError');
      },
      configurable: true,
    });
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  let asked = 0;
  page.on('request', (r) => {
    if (r.url().includes('/chunks/get')) asked++;
  });
  await startFolderRestore(page);
  await expect(page.getByTestId('restore-error')).toContainText('Permission to write into the folder was refused');
  expect(asked).toBe(0);
});

test('preview a file in the page: its text, with the terms highlighted', async ({ page }) => {
  await openWithOpfsPicker(page);
  let downloads = 0;
  page.on('download', () => downloads++);
  await page.getByTestId('tab-versions').click();
  await page.locator(`[data-testid=version-row][data-version="${version}"]`).getByTestId('version-browse').click();
  await expect(page.getByTestId('version-browser')).toBeVisible();
  const rel = 'package.json';
  const text = readFileSync(path.join(folder, rel), 'utf8');
  await page.locator(`[data-testid=preview-file][data-path="${rel}"]`).click();
  const pre = page.getByTestId('preview-text');
  await expect(pre).toBeVisible();
  expect(await pre.textContent()).toBe(text);
  await page.getByTestId('preview-highlight').fill('Preact');
  const want = text.match(/preact/gi)?.length ?? 0;
  expect(want).toBeGreaterThan(0);
  await expect(pre).toHaveAttribute('data-hits', String(want));
  await expect(pre.locator('mark')).toHaveCount(want);
  expect(downloads).toBe(0);
});

/** A PNG of `w` x `h` RGBA pixels (8 bits per channel, no filtering). */
function png(w: number, h: number, rgba: number[][]): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Buffer) => {
    let c = 0xffffffff;
    for (const x of b) c = crcTable[(c ^ x) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const out = Buffer.alloc(body.length + 8);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc(body), body.length + 4);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 6, 0, 0, 0], 8);
  const rows = Array.from({ length: h }, (_, y) => Buffer.from([0, ...rgba.slice(y * w, y * w + w).flat()]));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.concat(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

test('preview an image in the page, and a binary file is not shown as text', async ({ page }) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const pixels = [
    [255, 0, 0, 255],
    [0, 255, 0, 255],
    [0, 0, 255, 255],
    [255, 255, 255, 128],
    [10, 20, 30, 255],
    [0, 0, 0, 0],
  ];
  const dir = mkdtempSync(path.join(tmpdir(), 'ditto-preview-'));
  try {
    mkdirSync(path.join(dir, 'Pics'));
    writeFileSync(path.join(dir, 'Pics', 'pixels.png'), png(3, 2, pixels));
    writeFileSync(
      path.join(dir, 'Pics', 'blob.bin'),
      Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0]), randomBytes(5000)]),
    );
    await openWithOpfsPicker(page);
    const id = await backUp(page, path.join(dir, 'Pics'), 'pics');
    let downloads = 0;
    page.on('download', () => downloads++);
    await page.getByTestId('tab-versions').click();
    await page.locator(`[data-testid=version-row][data-version="${id}"]`).getByTestId('version-browse').click();
    await page.locator('[data-testid=preview-file][data-path="pixels.png"]').click();
    const img = page.getByTestId('preview-image');
    await expect(img).toBeVisible();
    // The browser decoded the restored bytes: the same size and the same pixels.
    const seen = await img.evaluate(async (el: HTMLImageElement) => {
      await el.decode();
      const c = document.createElement('canvas');
      c.width = el.naturalWidth;
      c.height = el.naturalHeight;
      const g = c.getContext('2d')!;
      g.drawImage(el, 0, 0);
      const d = g.getImageData(0, 0, c.width, c.height, { colorSpace: 'srgb' }).data;
      return { w: el.naturalWidth, h: el.naturalHeight, rgba: [...d] };
    });
    expect([seen.w, seen.h]).toEqual([3, 2]);
    // Opaque pixels exactly; the half-transparent one within the canvas's premultiplied rounding.
    seen.rgba.forEach((v, i) =>
      expect(Math.abs(v - pixels.flat()[i])).toBeLessThanOrEqual(pixels.flat()[i - (i % 4) + 3] === 255 ? 0 : 2),
    );
    await page.getByTestId('preview-close').click();
    await page.locator('[data-testid=preview-file][data-path="blob.bin"]').click();
    await expect(page.getByTestId('preview-none')).toContainText('binary file');
    await expect(page.getByTestId('preview-text')).toHaveCount(0);
    expect(downloads).toBe(0);
    expect(errors).toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a file larger than a block is written into the folder as it comes, byte-identical', async ({ page }) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // 70 MiB (more than the 4 MiB block the restore writes a large file in, not a multiple of
  // it, and more than the 64 MiB its writes may lag behind) of a random MiB repeated, so the
  // upload stays small; and small files beside it.
  const dir = mkdtempSync(path.join(tmpdir(), 'ditto-restore-big-'));
  try {
    const block = randomBytes(1 << 20);
    const big = Buffer.concat([...Array(70).fill(block), block.subarray(0, 12_345)]);
    mkdirSync(path.join(dir, 'Big', 'sub'), { recursive: true });
    writeFileSync(path.join(dir, 'Big', 'big.bin'), big);
    writeFileSync(path.join(dir, 'Big', 'note.txt'), 'small beside a big one\n');
    writeFileSync(path.join(dir, 'Big', 'sub', 'empty.txt'), '');
    await openWithOpfsPicker(page);
    await clearTarget(page);
    await page.getByTestId('folder-input').setInputFiles(path.join(dir, 'Big'));
    await page.getByTestId('source-label').fill('big');
    await page.getByTestId('backup-start').click();
    await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 120_000 });
    version = Number(await page.getByTestId('backup-done').getAttribute('data-version'));
    await restoreIntoFolder(page);
    const want = sourceTree(path.join(dir, 'Big'));
    bigTree = want;
    expect(Object.keys(want)).toHaveLength(3);
    expect(await opfsTree(page)).toEqual(want);
    expect(errors).toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a cancelled folder restore leaves each file as it was or whole, and the next restore completes it', async ({
  page,
}) => {
  const errors = await openEmptyTarget(page);
  // The folder holds other bytes under two of the version's names.
  const before = { 'big.bin': 'mine\n', 'note.txt': 'an older note\n' };
  await page.evaluate(async (files) => {
    const d = await (await navigator.storage.getDirectory()).getDirectoryHandle('restored', { create: true });
    for (const [name, text] of Object.entries(files)) {
      const w = await (await d.getFileHandle(name, { create: true })).createWritable();
      await w.write(text);
      await w.close();
    }
  }, before);
  // A slow link (for the page and its workers), so the restore is still running at Cancel.
  const fullSpeed = await slowLink(page);
  await startFolderRestore(page);
  await expect(page.getByTestId('restore-progress')).toBeVisible({ timeout: 30_000 });
  await page.getByTestId('restore-cancel').click();
  await expect(page.getByTestId('restore-error')).toContainText('cancelled', { timeout: 30_000 });
  await expect(page.getByTestId('restore-done')).toHaveCount(0);
  // Nothing half-written: each file is what the folder held, or the version's whole file.
  const sha1 = (t: string) => createHash('sha1').update(t).digest('hex');
  const want = bigTree;
  expect(Object.keys(want), 'the version of the test above').toHaveLength(3);
  const after = await opfsTree(page);
  // The large file's chunks take seconds on this link: its writable was open, and was abandoned.
  expect(after['big.bin'], 'the large file, not written whole before Cancel').toBe(sha1(before['big.bin']));
  for (const [rel, h] of Object.entries(after))
    expect([want[rel], rel in before ? sha1(before[rel as keyof typeof before]) : undefined]).toContain(h);
  // Into an empty folder: the large file the restore had begun is not left behind, empty (the
  // browser creates the file when the restore opens it).
  await clearTarget(page);
  await startFolderRestore(page);
  // Cancelled once the file is there (empty: its blocks take seconds on this link).
  const opened = () =>
    page.evaluate(async () => {
      const root = await navigator.storage.getDirectory();
      try {
        await (await root.getDirectoryHandle('restored')).getFileHandle('big.bin');
        return true;
      } catch {
        return false;
      }
    });
  await expect.poll(opened, { timeout: 30_000, intervals: [20] }).toBe(true);
  await expect(page.getByTestId('restore-done')).toHaveCount(0);
  await page.getByTestId('restore-cancel').click();
  await expect(page.getByTestId('restore-error')).toContainText('cancelled', { timeout: 30_000 });
  const fresh = await opfsTree(page);
  expect(fresh['big.bin'], 'the large file the cancelled restore had opened').toBeUndefined();
  for (const [rel, h] of Object.entries(fresh)) expect(h, rel).toBe(want[rel]);
  // Restored again at full speed: the version, whole.
  await fullSpeed();
  await restoreIntoFolder(page);
  expect(await opfsTree(page)).toEqual(want);
  expect(errors).toEqual([]);
});

test('a picked file that refuses a write fails the restore with the reason, not as cancelled', async ({ browser }) => {
  const context = await browser.newContext({ serviceWorkers: 'block' });
  const page = await context.newPage();
  // A file on a full disk.
  await page.addInitScript(() => {
    (window as unknown as { showSaveFilePicker: unknown }).showSaveFilePicker = async () => ({
      createWritable: async () =>
        new WritableStream<Uint8Array>({
          write: () => {
            throw new DOMException('the disk is full', 'QuotaExceededError');
          },
        }),
    });
  });
  await page.goto(server.appUrl);
  await page.getByTestId('tab-versions').click();
  // The large-file version of the test above: the zip is many blocks, and its assembly is
  // still running when the file refuses the first.
  await page.locator(`[data-testid=version-row][data-version="${version}"]`).getByTestId('version-zip').click();
  const error = page.getByTestId('restore-error');
  await expect(error).toContainText('The file you picked could not be written: QuotaExceededError: the disk is full');
  await expect(page.getByTestId('restore-done')).toHaveCount(0);
  await context.close();
});

test('a file the folder will not let the restore write fails it with the reason, and the restore ends', async ({
  page,
}) => {
  const errors = await openEmptyTarget(page);
  // The large file of the version above held open by another worker (an exclusive access
  // handle), so the restore's writable for it is refused while its blocks are coming.
  await page.evaluate(async () => {
    const src = `onmessage = async () => {
      const d = await (await navigator.storage.getDirectory()).getDirectoryHandle('restored', { create: true });
      const h = await d.getFileHandle('big.bin', { create: true });
      self.held = await h.createSyncAccessHandle();
      postMessage('held');
    };`;
    const w = new Worker(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })));
    (window as unknown as { locker: Worker }).locker = w;
    await new Promise((resolve) => {
      w.onmessage = resolve;
      w.postMessage('hold');
    });
  });
  await startFolderRestore(page);
  await expect(page.getByTestId('restore-error')).toContainText('"big.bin" could not be written into the folder', {
    timeout: 60_000,
  });
  await expect(page.getByTestId('restore-error')).toContainText('NoModificationAllowedError');
  expect(errors).toEqual([]);
});

test('a file where the version has a directory stops the restore, named, and is left as it was', async ({ page }) => {
  const errors = await openEmptyTarget(page);
  // The version above has a directory `sub`; the folder holds a file of that name.
  await page.evaluate(async () => {
    const root = await navigator.storage.getDirectory();
    const d = await root.getDirectoryHandle('restored', { create: true });
    const w = await (await d.getFileHandle('sub', { create: true })).createWritable();
    await w.write('mine\n');
    await w.close();
  });
  await startFolderRestore(page);
  await expect(page.getByTestId('restore-error')).toContainText(
    '"sub" is a file in the folder, where the version has a directory',
    { timeout: 60_000 },
  );
  expect(await opfsTree(page)).toEqual({ sub: createHash('sha1').update('mine\n').digest('hex') });
  expect(errors).toEqual([]);
});
