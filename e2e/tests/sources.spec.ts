import AxeBuilder from '@axe-core/playwright';
import { expect, test, type Page } from '@playwright/test';
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoJson, startServer, type RunningServer } from '../server';

let server: RunningServer;

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  server = await startServer();
});
test.afterAll(async () => {
  await server?.stop();
});

/**
 * The directory picker stubbed to a folder "Project" of the origin private file system
 * (Playwright cannot drive the real picker); every call is counted in `__picks`. A handle
 * from OPFS is a real FileSystemDirectoryHandle: it is kept in IndexedDB and walked like a
 * picked one.
 */
async function withOpfsPicker(page: Page) {
  await page.addInitScript(() => {
    const w = window as unknown as { __picks: number };
    w.__picks = 0;
    Object.defineProperty(window, 'showDirectoryPicker', {
      value: async () => {
        w.__picks++;
        return (await navigator.storage.getDirectory()).getDirectoryHandle('Project', { create: true });
      },
      configurable: true,
    });
  });
}

/** Writes `files` (relative path -> text) into OPFS "Project". */
async function writeProject(page: Page, files: Record<string, string>) {
  await page.evaluate(async (files) => {
    const root = await (await navigator.storage.getDirectory()).getDirectoryHandle('Project', { create: true });
    for (const [rel, text] of Object.entries(files)) {
      const parts = rel.split('/');
      let dir = root;
      for (const p of parts.slice(0, -1)) dir = await dir.getDirectoryHandle(p, { create: true });
      const w = await (await dir.getFileHandle(parts.at(-1)!, { create: true })).createWritable();
      await w.write(text);
      await w.close();
    }
  }, files);
}

/** Makes the source's last backup, as this browser keeps it, `ms` older (so the schedule finds it due). */
/** The schedule the page saved for `source` (minutes, or null). */
function everyMinutes(page: Page, source: string): Promise<number | null> {
  return page.evaluate(
    (key) =>
      new Promise<number | null>((resolve, reject) => {
        const open = indexedDB.open('ditto-source-folders');
        open.onerror = () => reject(open.error);
        open.onsuccess = () => {
          const get = open.result.transaction('folders').objectStore('folders').get(key);
          get.onsuccess = () => (open.result.close(), resolve(get.result?.everyMinutes ?? null));
          get.onerror = () => reject(get.error);
        };
      }),
    `default\u0000${source}`,
  );
}

async function ageLastBackup(page: Page, source: string, ms: number) {
  await page.evaluate(
    ({ key, ms }) =>
      new Promise<void>((resolve, reject) => {
        const open = indexedDB.open('ditto-source-folders');
        open.onerror = () => reject(open.error);
        open.onsuccess = () => {
          const store = open.result.transaction('folders', 'readwrite').objectStore('folders');
          const get = store.get(key);
          get.onsuccess = () => {
            const put = store.put({ ...get.result, usedAt: get.result.usedAt - ms });
            put.onsuccess = () => (open.result.close(), resolve());
            put.onerror = () => reject(put.error);
          };
        };
      }),
    { key: `default\u0000${source}`, ms },
  );
}

const picks = (page: Page) => page.evaluate(() => (window as unknown as { __picks: number }).__picks);

async function versionsOf(source: string) {
  const { versions } = await repoJson<{ versions: { id: number; source: string; folder?: string }[] }>(
    server,
    '/versions',
  );
  return versions.filter((v) => v.source === source);
}

test('a source backs up again in one click from the folder handle kept in IndexedDB', async ({ page }) => {
  await withOpfsPicker(page);
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await writeProject(page, { 'a.txt': 'first\n', 'sub/b.txt': 'second\n', 'node_modules/dep/index.js': 'dep\n' });

  await page.getByRole('button', { name: 'Choose folder…' }).click();
  await expect(page.getByTestId('picked-summary')).toHaveAttribute('data-files', '3');
  // Excluded in this source's settings: counted here, and not even walked by "Back up again".
  await page.getByTestId('exclude-preset-node_modules').check();
  await expect(page.getByTestId('picked-summary')).toHaveAttribute('data-files', '2');
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
  expect(await picks(page)).toBe(1);

  // A new file and a changed one; then a reload, so that only IndexedDB remembers the folder.
  await writeProject(page, { 'a.txt': 'first, changed\n', 'sub/c.txt': 'third\n' });
  await page.reload();
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('tab-sources').click();
  const row = page.locator('[data-testid="source-row"][data-source="Project"]');
  await expect(row.getByTestId('source-versions')).toHaveAttribute('data-value', '1');
  await expect(row.getByTestId('source-folder')).toHaveText('Project');
  await expect(row.getByTestId('source-health')).toHaveAttribute('data-state', 'healthy');
  const first = (await versionsOf('Project'))[0];
  await expect(row.getByTestId('source-last')).toHaveAttribute('data-version', String(first.id));

  // Which folders the walk lists (the real handles, watched).
  await page.evaluate(() => {
    const w = window as unknown as { __walked: string[] };
    w.__walked = [];
    const proto = FileSystemDirectoryHandle.prototype as unknown as {
      entries: (this: FileSystemDirectoryHandle) => AsyncIterable<unknown>;
    };
    const entries = proto.entries;
    proto.entries = function (this: FileSystemDirectoryHandle) {
      w.__walked.push(this.name);
      return entries.call(this);
    };
  });
  await row.getByTestId('source-again').click();
  await expect(row.getByTestId('source-note')).toContainText('stored', { timeout: 60_000 });
  // No picker: the kept handle was used; the excluded folder was not walked.
  expect(await picks(page)).toBe(0);
  expect((await page.evaluate(() => (window as unknown as { __walked: string[] }).__walked)).sort()).toEqual([
    'Project',
    'sub',
  ]);
  const list = await versionsOf('Project');
  expect(list).toHaveLength(2);
  expect(list[1].folder).toBe('Project');
  const v2 = await repoJson<{ manifest: { entries: { path: string; kind: string; size: number }[] } }>(
    server,
    `/versions/${list[1].id}`,
  );
  const files = v2.manifest.entries.filter((e) => e.kind === 'file').map((e) => [e.path, e.size]);
  expect(files.sort()).toEqual([
    ['a.txt', 'first, changed\n'.length],
    ['sub/b.txt', 'second\n'.length],
    ['sub/c.txt', 'third\n'.length],
  ]);
  await expect(row.getByTestId('source-versions')).toHaveAttribute('data-value', '2');
  await expect(row.getByTestId('source-size')).toHaveAttribute(
    'data-value',
    String('first, changed\n'.length + 'second\n'.length + 'third\n'.length),
  );
  // The view, and the backup form with its excludes, pass axe-core without serious or critical findings.
  const serious = async (selector: string) =>
    (await new AxeBuilder({ page }).include(selector).analyze()).violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  expect(await serious('[data-testid="sources-panel"]')).toEqual([]);
  await page.getByTestId('tab-backup').click();
  await page.getByRole('button', { name: 'Choose folder…' }).click();
  await expect(page.getByTestId('excludes')).toBeVisible();
  expect(await serious('[data-testid="backup-panel"]')).toEqual([]);
});

test('a folder dropped from the disk is kept too: "Back up again" reads it from disk, changes included', async ({
  page,
}) => {
  await withOpfsPicker(page);
  const dir = mkdtempSync(path.join(tmpdir(), 'ditto-drop-'));
  const root = path.join(dir, 'Dropped');
  try {
    mkdirSync(path.join(root, 'sub'), { recursive: true });
    writeFileSync(path.join(root, 'a.txt'), 'dropped\n');
    writeFileSync(path.join(root, 'sub', 'b.txt'), 'below\n');
    await page.goto(server.appUrl);
    await expect(page.getByTestId('engine-ready')).toBeVisible();
    // A real drag and drop of the folder from the disk, as Chromium's input pipeline delivers
    // it (DevTools protocol): the drop gives entries and a FileSystemDirectoryHandle.
    const box = (await page.getByTestId('dropzone').boundingBox())!;
    const cdp = await page.context().newCDPSession(page);
    const at = { x: box.x + box.width / 2, y: box.y + box.height / 2 };
    const data = { items: [], files: [root], dragOperationsMask: 1 };
    for (const type of ['dragEnter', 'dragOver', 'drop'] as const)
      await cdp.send('Input.dispatchDragEvent', { type, ...at, data });
    await expect(page.getByTestId('picked-summary')).toHaveAttribute('data-files', '2');
    await page.getByTestId('backup-start').click();
    await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
    expect(await versionsOf('Dropped')).toHaveLength(1);

    writeFileSync(path.join(root, 'a.txt'), 'dropped, then changed\n');
    unlinkSync(path.join(root, 'sub', 'b.txt'));
    writeFileSync(path.join(root, 'c.txt'), 'added\n');
    await page.getByTestId('tab-sources').click();
    const row = page.locator('[data-testid="source-row"][data-source="Dropped"]');
    await expect(row.getByTestId('source-every')).toBeVisible(); // a handle is kept
    await row.getByTestId('source-again').click();
    await expect(row.getByTestId('source-note')).toContainText('stored', { timeout: 60_000 });
    expect(await picks(page)).toBe(0);
    const list = await versionsOf('Dropped');
    expect(list).toHaveLength(2);
    const v2 = await repoJson<{ manifest: { entries: { path: string; kind: string; size: number }[] } }>(
      server,
      `/versions/${list[1].id}`,
    );
    expect(
      v2.manifest.entries
        .filter((e) => e.kind === 'file')
        .map((e) => [e.path, e.size])
        .sort(),
    ).toEqual([
      ['a.txt', 'dropped, then changed\n'.length],
      ['c.txt', 'added\n'.length],
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the permission is asked again on the click, and a refusal backs up nothing and says so', async ({ page }) => {
  await withOpfsPicker(page);
  // The browser's prompt, stubbed: the handle's permission reads "prompt" until granted.
  await page.addInitScript(() => {
    const w = window as unknown as { __asked: number; __answer: PermissionState };
    w.__asked = 0;
    w.__answer = 'denied';
    const proto = FileSystemHandle.prototype as unknown as Record<string, unknown>;
    let granted = false;
    proto.queryPermission = async () => (granted ? 'granted' : 'prompt');
    proto.requestPermission = async () => {
      w.__asked++;
      granted = w.__answer === 'granted';
      return w.__answer;
    };
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await writeProject(page, { 'p.txt': 'permission\n' });
  await page.getByRole('button', { name: 'Choose folder…' }).click();
  await page.getByTestId('source-label').fill('Asked');
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
  const before = (await versionsOf('Asked')).length;

  await page.getByTestId('tab-sources').click();
  const row = page.locator('[data-testid="source-row"][data-source="Asked"]');
  // The lapsed permission is shown before anything is tried; a due scheduled backup cannot
  // ask for it, runs nothing and says why.
  await expect(row.getByTestId('source-permission')).toContainText('asks again');
  await row.getByTestId('source-every-minutes').fill('1');
  await row.getByTestId('source-every').check();
  await ageLastBackup(page, 'Asked', 61_000);
  await expect(row.getByTestId('source-scheduled-problem')).toContainText('needs your permission', {
    timeout: 30_000,
  });
  expect(await page.evaluate(() => (window as unknown as { __asked: number }).__asked)).toBe(0);
  expect(await versionsOf('Asked')).toHaveLength(before);
  await row.getByTestId('source-every').uncheck();

  await row.getByTestId('source-again').click();
  await expect(row.getByTestId('source-note')).toContainText('was not given');
  expect(await page.evaluate(() => (window as unknown as { __asked: number }).__asked)).toBe(1);
  expect(await versionsOf('Asked')).toHaveLength(before);

  await page.evaluate(() => ((window as unknown as { __answer: string }).__answer = 'granted'));
  await row.getByTestId('source-again').click();
  await expect(row.getByTestId('source-note')).toContainText('stored', { timeout: 60_000 });
  expect(await page.evaluate(() => (window as unknown as { __asked: number }).__asked)).toBe(2);
  expect(await versionsOf('Asked')).toHaveLength(before + 1);
  await expect(row.getByTestId('source-permission')).toHaveCount(0);
  await expect(row.getByTestId('source-scheduled-problem')).toHaveCount(0);
});

test('without the File System Access API the view says so and "Back up again" picks the folder', async ({ page }) => {
  await page.addInitScript(() => {
    delete (window as unknown as { showDirectoryPicker?: unknown }).showDirectoryPicker;
    Object.defineProperty(window, 'showDirectoryPicker', { value: undefined, configurable: true });
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('tab-sources').click();
  await expect(page.getByTestId('sources-no-fsa')).toContainText('File System Access API');
  // "Project" and "Asked" are on the server from the tests above; this browser kept no folder.
  const row = page.locator('[data-testid="source-row"][data-source="Project"]');
  await expect(row.getByTestId('source-folder')).toHaveText('Project');
  const before = (await versionsOf('Project')).length;
  const dir = mkdtempSync(path.join(tmpdir(), 'ditto-sources-'));
  try {
    mkdirSync(path.join(dir, 'Project'));
    writeFileSync(path.join(dir, 'Project', 'picked.txt'), 'picked by hand\n');
    const chooser = page.waitForEvent('filechooser');
    await row.getByTestId('source-again').click();
    await (await chooser).setFiles(path.join(dir, 'Project'));
    await expect(row.getByTestId('source-note')).toContainText('stored', { timeout: 60_000 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const after = await versionsOf('Project');
  expect(after).toHaveLength(before + 1);
  expect(after.at(-1)!.folder).toBe('Project');
});

test('a source backs up every N minutes while the tab is open, and says so in a notification', async ({
  page,
  context,
}) => {
  await context.grantPermissions(['notifications']);
  await withOpfsPicker(page);
  // Notifications as the page makes them (the real constructor runs; headless shows nothing).
  await page.addInitScript(() => {
    const Real = window.Notification;
    const seen: { title: string; body?: string }[] = [];
    (window as unknown as { __notes: typeof seen }).__notes = seen;
    class Seen extends Real {
      constructor(title: string, opts?: NotificationOptions) {
        seen.push({ title, body: opts?.body });
        super(title, opts);
      }
    }
    Object.defineProperty(window, 'Notification', { value: Seen, configurable: true });
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await writeProject(page, { 'a.txt': 'first, changed\n', 'sub/b.txt': 'second\n', 'sub/c.txt': 'third\n' });
  await page.getByRole('button', { name: 'Choose folder…' }).click();
  await page.getByTestId('source-label').fill('Timed');
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
  expect(await versionsOf('Timed')).toHaveLength(1);

  await page.getByTestId('tab-sources').click();
  await page.getByTestId('sources-notify').check();
  await expect(page.getByTestId('sources-notify')).toBeChecked();
  const row = page.locator('[data-testid="source-row"][data-source="Timed"]');
  await row.getByTestId('source-every').check();
  await expect.poll(() => everyMinutes(page, 'Timed')).toBe(60);
  // Cleared to type another number, the field saves nothing (a schedule of 1 minute would
  // start at the next tick); left invalid, it shows the saved value again.
  const field = row.getByTestId('source-every-minutes');
  await field.fill('');
  await expect(field).toHaveAttribute('aria-invalid', 'true');
  await field.blur();
  await expect(field).toHaveValue('60');
  expect(await everyMinutes(page, 'Timed')).toBe(60);
  await field.fill('1');
  await field.press('Enter');
  await expect.poll(() => everyMinutes(page, 'Timed')).toBe(1);
  // Its last backup made a minute older, so that the next tick of the schedule finds it due.
  await page.getByTestId('tab-versions').click();
  const timedRows = page.locator('[data-testid=versions-source][data-source="Timed"] [data-testid=version-row]');
  await expect(timedRows).toHaveCount(1);
  await ageLastBackup(page, 'Timed', 61_000);
  await expect.poll(async () => (await versionsOf('Timed')).length, { timeout: 60_000 }).toBe(2);
  // The Versions view, shown while the schedule backed up, lists the new version unasked.
  await expect(timedRows).toHaveCount(2);
  await page.getByTestId('tab-sources').click();
  await expect
    .poll(() => page.evaluate(() => (window as unknown as { __notes: { title: string }[] }).__notes))
    .toEqual([{ title: 'Backup of “Timed” done', body: expect.stringMatching(/^Version #\d+: 3 files\.$/) }]);
  await expect(row.getByTestId('source-versions')).toHaveAttribute('data-value', '2');
});

test('a schedule the browser does not store says so, and its box stays unchecked', async ({ page }) => {
  await withOpfsPicker(page);
  // Writes to the store of kept folders fail once `__failFolderPuts` is set (a full disk,
  // or IndexedDB taken away), after the backup has kept its folder.
  await page.addInitScript(() => {
    const put = IDBObjectStore.prototype.put;
    IDBObjectStore.prototype.put = function (this: IDBObjectStore, ...args: Parameters<typeof put>) {
      if (this.name === 'folders' && (window as unknown as { __failFolderPuts?: boolean }).__failFolderPuts)
        throw new DOMException('The disk is full.', 'QuotaExceededError');
      return put.apply(this, args);
    };
  });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await writeProject(page, { 'a.txt': 'unsaved\n' });
  await page.getByRole('button', { name: 'Choose folder…' }).click();
  await page.getByTestId('source-label').fill('Unsaved');
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });

  await page.getByTestId('tab-sources').click();
  const row = page.locator('[data-testid="source-row"][data-source="Unsaved"]');
  await expect(row.getByTestId('source-every')).toBeVisible();
  await page.evaluate(() => ((window as unknown as { __failFolderPuts: boolean }).__failFolderPuts = true));
  await row.getByTestId('source-every').click();
  await expect(row.getByTestId('source-note')).toContainText('The schedule was not saved: The disk is full.');
  await expect(row.getByTestId('source-every')).not.toBeChecked();
  expect(await everyMinutes(page, 'Unsaved')).toBeNull();
  expect(errors).toEqual([]);
});

test('a list the server fails to read says why, and Try again reads it', async ({ page }) => {
  let fail = true;
  await page.route('**/api/v1/repos/*/versions', async (route) => {
    if (route.request().method() !== 'GET' || !fail) return route.continue();
    await route.fulfill({
      status: 500,
      contentType: 'application/json',
      body: JSON.stringify({ error: 'disk I/O error', code: 'internal' }),
    });
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('tab-sources').click();
  const failed = page.getByTestId('sources-error');
  await expect(failed).toContainText('Reading the sources failed: disk I/O error');
  await expect(page.getByTestId('source-row')).toHaveCount(0);
  fail = false;
  await failed.getByRole('button', { name: 'Try again' }).click();
  await expect(page.locator('[data-testid="source-row"][data-source="Project"]')).toBeVisible();
  await expect(failed).toHaveCount(0);
});
