// A minimal Chrome DevTools Protocol driver for benchmarks: launches headless Chromium with
// `--remote-debugging-pipe` and drives a page through a handful of commands (evaluate, set
// files on an input, type, click) and nothing else.
//
// Why not Playwright here: Playwright enables the Network domain on every page and worker,
// and Chromium then copies every request body into a DevTools event. Measured in this
// repository's app under Playwright: a 4 MiB fetch POST to the local server took 275-349 ms,
// a 4 KiB one 6-9 ms. A backup sends ~4 MiB bundles, so the harness, not the product, would
// set the pace. This driver never enables Network (or any other event domain).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CHROMIUM_ARGS, DISABLED_FEATURES } from './lib.mjs';

/** Launches Chromium; resolves to `{ newPage(url), close() }`. */
export async function launchCdp() {
  const profile = mkdtempSync(path.join(tmpdir(), 'ditto-cdp-'));
  const child = spawn(
    process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    [
      ...CHROMIUM_ARGS,
      `--disable-features=${DISABLED_FEATURES.join(',')}`,
      '--remote-debugging-pipe',
      `--user-data-dir=${profile}`,
      'about:blank',
    ],
    { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  const toBrowser = child.stdio[3];
  const fromBrowser = child.stdio[4];
  let nextId = 1;
  const waiting = new Map();
  let buf = '';
  fromBrowser.on('data', (d) => {
    buf += d;
    for (let end = buf.indexOf('\0'); end >= 0; end = buf.indexOf('\0')) {
      const msg = JSON.parse(buf.slice(0, end));
      buf = buf.slice(end + 1);
      const w = msg.id !== undefined && waiting.get(msg.id);
      if (!w) continue;
      waiting.delete(msg.id);
      if (msg.error) w.reject(new Error(`${w.method}: ${msg.error.message}`));
      else w.resolve(msg.result);
    }
  });
  const exited = new Promise((r) => child.once('exit', r));
  exited.then(() => {
    for (const w of waiting.values()) w.reject(new Error(`chromium exited: ${stderr}`));
    waiting.clear();
  });
  const send = (method, params = {}, sessionId) =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, { resolve, reject, method });
      toBrowser.write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + '\0');
    });
  await send('Browser.getVersion');

  async function newPage(url) {
    const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
    const call = (method, params) => send(method, params, sessionId);
    const evaluate = async (expression) => {
      const r = await call('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true });
      if (r.exceptionDetails)
        throw new Error(`page: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
      return r.result.value;
    };
    const q = (selector) => `document.querySelector(${JSON.stringify(selector)})`;
    /**
     * Waits until an element matches `selector`: a MutationObserver in the page, not polling
     * from here (a query every 20 ms is work on the page's main thread that the product's
     * own clock would pay for). Retried if the page navigates meanwhile.
     */
    const waitFor = async (selector, timeoutMs = 60_000) => {
      const until = Date.now() + timeoutMs;
      const watch = (ms) => `new Promise((resolve) => {
        const found = () => !!${q(selector)};
        if (found()) return resolve(true);
        const obs = new MutationObserver(() => {
          if (found()) (obs.disconnect(), clearTimeout(timer), resolve(true));
        });
        const timer = setTimeout(() => (obs.disconnect(), resolve(false)), ${ms});
        obs.observe(document, { subtree: true, childList: true, attributes: true });
      })`;
      for (;;) {
        const left = until - Date.now();
        if (left <= 0) throw new Error(`timed out waiting for ${selector}`);
        try {
          if (await evaluate(watch(left))) return;
        } catch (e) {
          // The page navigated (its context went away) or is not loaded yet: look again.
          if (!/context|Cannot find|destroyed|not found/i.test(e.message)) throw e;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    await call('Page.navigate', { url });
    // Actions wait for their element first, as Playwright's do.
    return {
      evaluate,
      call,
      waitFor,
      attr: (selector, name) => evaluate(`${q(selector)}?.getAttribute(${JSON.stringify(name)}) ?? null`),
      texts: (selector) =>
        evaluate(`[...document.querySelectorAll(${JSON.stringify(selector)})].map((e) => e.innerText)`),
      /** Sets the files of a file input (a directory for `webkitdirectory` inputs), as a user's pick. */
      async setInputFiles(selector, files) {
        await waitFor(selector);
        const { result } = await call('Runtime.evaluate', { expression: q(selector) });
        if (!result.objectId) throw new Error(`no element ${selector}`);
        await call('DOM.setFileInputFiles', { objectId: result.objectId, files: [files].flat() });
        await call('Runtime.releaseObject', { objectId: result.objectId });
      },
      /** Replaces an input's text by typing `text` into it. */
      async fill(selector, text) {
        await waitFor(selector);
        await evaluate(`(${q(selector)}.focus(), ${q(selector)}.select(), true)`);
        await call('Input.insertText', { text });
      },
      /**
       * A real mouse click in the middle of the element, scrolled into view first (as
       * Playwright does): a click outside the viewport reaches no element.
       */
      async click(selector) {
        await waitFor(selector);
        const box = await evaluate(
          `(() => { const e = ${q(selector)}; e.scrollIntoView({ block: 'center' }); const r = e.getBoundingClientRect(); return { x: r.x + r.width / 2, y: r.y + r.height / 2 }; })()`,
        );
        for (const type of ['mousePressed', 'mouseReleased'])
          await call('Input.dispatchMouseEvent', { type, x: box.x, y: box.y, button: 'left', clickCount: 1 });
      },
    };
  }

  return {
    newPage,
    async close() {
      send('Browser.close').catch(() => {});
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
