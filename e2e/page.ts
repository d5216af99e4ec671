/**
 * Driving the page as a user does, shared by the specs: open it, back a folder up, restore
 * a version.
 */
import { expect, type BrowserContext, type Page, type Worker } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { walk } from './datasets';
import type { RunningServer } from './server';

/**
 * Opens the page without the File System Access save picker (Playwright cannot drive it), once
 * the download worker is active: downloads are streamed by it (web/src/restore/sink.ts).
 */
export async function openWithoutPicker(page: Page, server: RunningServer) {
  await page.addInitScript(() => {
    Object.defineProperty(window, 'showSaveFilePicker', { value: undefined, configurable: true });
  });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.waitForFunction(
    async () => (await navigator.serviceWorker.getRegistration('/dl/'))?.active?.state === 'activated',
  );
}

/**
 * Opens the page with the folder picker stubbed to the directory `name` of the origin private
 * file system (Playwright cannot drive the real one).
 */
export async function openWithOpfsFolderPicker(page: Page, server: RunningServer, name = 'restored') {
  await page.addInitScript((name) => {
    Object.defineProperty(window, 'showDirectoryPicker', {
      value: async () => (await navigator.storage.getDirectory()).getDirectoryHandle(name, { create: true }),
      configurable: true,
    });
  }, name);
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
}

/** Backs `folder` up as `source` through the folder input; the committed version's id. */
export async function backUp(page: Page, folder: string, source: string): Promise<number> {
  await page.getByTestId('folder-input').setInputFiles(folder);
  await page.getByTestId('source-label').fill(source);
  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 120_000 });
  return Number(await page.getByTestId('backup-done').getAttribute('data-version'));
}

/**
 * Restores version `id` through the page (Versions tab, whole version as a zip, downloaded
 * as a Blob: open the page with [`openWithoutPicker`]), unpacked into `out`; path -> bytes.
 */
export async function restoreVersionZip(page: Page, id: number, out: string): Promise<Map<string, Buffer>> {
  await page.getByTestId('tab-versions').click();
  const row = page.locator(`[data-testid=version-row][data-version="${id}"]`);
  const [download] = await Promise.all([page.waitForEvent('download'), row.getByTestId('version-zip').click()]);
  const zip = `${out}.zip`;
  await download.saveAs(zip);
  await expect(page.getByTestId('restore-done')).toBeVisible();
  mkdirSync(out, { recursive: true });
  execFileSync('unzip', ['-q', '-o', zip, '-d', out]);
  return new Map(walk(out).map((rel) => [rel, readFileSync(path.join(out, rel))]));
}

/** A message of the worker bridge (web/src/worker/bridge.ts): a call of `method`, or a signal of `type`. */
export type BridgeMessage = { bridge: 'call'; method: string } | { bridge: 'signal'; type: string };

/**
 * Makes `worker` crash on the next bridge message that matches: an uncaught exception outside
 * any handler, as a trap or exhausted memory would end it, leaving that message unanswered.
 */
export async function crashOnNext(worker: Worker, match: BridgeMessage) {
  await worker.evaluate((m) => {
    const scope = self as unknown as { onmessage: ((e: MessageEvent) => unknown) | null };
    const serve = scope.onmessage!;
    scope.onmessage = (e: MessageEvent) => {
      const msg = e.data as { bridge?: string; method?: string; data?: { type?: string } };
      const hit =
        msg.bridge === m.bridge && (m.bridge === 'call' ? msg.method === m.method : msg.data?.type === m.type);
      if (!hit) return serve(e);
      scope.onmessage = serve;
      setTimeout(() => {
        throw new Error('injected crash');
      });
    };
  }, match);
}

/**
 * A slow link for `page` and its workers (Chromium's network emulation: 250 KB/s each way,
 * 20 ms latency), so that a transfer is still running when a test acts on it. Resolves to a
 * function that restores full speed.
 */
export async function slowLink(page: Page): Promise<() => Promise<void>> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  const set = (latency: number, throughput: number) =>
    cdp.send('Network.emulateNetworkConditions', {
      offline: false,
      latency,
      downloadThroughput: throughput,
      uploadThroughput: throughput,
    });
  await set(20, 250_000);
  return async () => {
    await set(0, -1);
  };
}

/**
 * Turns the Search tab's read-ahead off in `context` (the tab's own setting, kept in local
 * storage): for tests of what a first search reads and decodes itself.
 */
export async function withoutReadAhead(context: BrowserContext): Promise<void> {
  await context.addInitScript(() => localStorage.setItem('ditto.search.readAhead', 'off'));
}
