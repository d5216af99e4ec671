// What writing a stored archive costs the browser, before any restore work: the page
// assembles an archive of (b)'s size (the parent folder of the typescript releases, as
// bench:restore's (b)) from chunks it already holds and hands it to each of the browser's
// sinks, against `restic restore` of the same folder in interleaved rounds (medians). It is
// the cost per byte the browser's sinks put on a restore's output; a restore's zip is deflated
// (docs/FORMAT.md, "Restore zips"), so bench:restore writes less than this archive: (b)'s zip
// is about a third of its size.
//
// The archive: `logical` bytes as ~8 KiB pieces (bench:restore's (b) references ~26 000
// chunks) taken at random from `unique` bytes of distinct buffers (the chunks a restore
// fetches once and reuses), a 60-byte header every 16 pieces, copied into 4 MiB blocks (as
// web/src/restore/blocks.ts does). Each round, on a fresh page, per sink:
// - blob: each block a Blob, the archive the Blob of those, an `<a download>` click, until the
//   download is on disk (the restore's path without `showSaveFilePicker`, web/src/restore/sink.ts);
// - file: each block written to a `FileSystemWritableFileStream` of an origin-private file,
//   until it is closed (what the picked file's stream does after the picker);
// - sw: each block transferred to a service worker whose response to a download request
//   streams them (no Blob storage), as the page's download worker does (public/dl/sw.js,
//   without its flow control).
//
// Usage: node bench/writefloor.mjs [--runs N] [--no-restic]
import http from 'node:http';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cli, dataset, du, launchBrowser, median, resticRepo, timeResticRestore } from './lib.mjs';

const { flag, option } = cli();
const runs = Number(option('runs', 3));
if (!(runs >= 1)) throw new Error('--runs must be at least 1');
const parent = path.dirname(dataset('typescript', 10)[0]);
const logical = du(parent);
const unique = 62 << 20;

const SW = `
const ports = new Map();
self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
self.addEventListener('message', (e) => { ports.set(e.data, e.ports[0]); e.ports[0].postMessage('ready'); });
self.addEventListener('fetch', (e) => {
  const id = new URL(e.request.url).pathname.split('/dl/')[1];
  if (!id) return;
  const port = ports.get(id);
  ports.delete(id);
  const body = new ReadableStream({ start(c) { port.onmessage = (m) => (m.data === 'end' ? c.close() : c.enqueue(new Uint8Array(m.data))); } });
  e.respondWith(new Response(body, { headers: { 'content-type': 'application/zip', 'content-disposition': 'attachment; filename="floor.zip"' } }));
});`;

const site = http
  .createServer((q, r) => {
    r.setHeader('content-type', q.url === '/sw.js' ? 'text/javascript' : 'text/html');
    r.end(q.url === '/sw.js' ? SW : '<!doctype html><title>floor</title>');
  })
  .listen(0, '127.0.0.1');
await new Promise((r) => site.once('listening', r));
const origin = `http://127.0.0.1:${site.address().port}`;

/** One archive into `sink` on a fresh page; seconds from the start of assembly to the bytes on disk. */
async function floor(browser, sink) {
  const context = await browser.newContext({ acceptDownloads: true });
  try {
    const page = await context.newPage();
    await page.goto(`${origin}/`);
    if (sink === 'sw')
      await page.evaluate(async () => {
        await navigator.serviceWorker.register('/sw.js');
        await navigator.serviceWorker.ready;
        if (!navigator.serviceWorker.controller)
          await new Promise((r) => navigator.serviceWorker.addEventListener('controllerchange', r, { once: true }));
      });
    const download = sink === 'file' ? null : page.waitForEvent('download', { timeout: 120_000 });
    const { ms, startedAt } = await page.evaluate(
      async ({ sink, logical, unique }) => {
        const BUNDLE = 2 << 20;
        const bundles = [];
        for (let i = 0; i < unique / BUNDLE; i++) bundles.push(new Uint8Array(BUNDLE).fill(i));
        const t0 = performance.now();
        let send, finish;
        if (sink === 'blob') {
          const parts = [];
          send = (b) => parts.push(new Blob([b]));
          finish = () => {
            const a = document.createElement('a');
            a.href = URL.createObjectURL(new Blob(parts, { type: 'application/zip' }));
            a.download = 'floor.zip';
            document.body.appendChild(a);
            a.click();
            a.remove();
          };
        } else if (sink === 'file') {
          const root = await navigator.storage.getDirectory();
          const w = await (await root.getFileHandle('floor.zip', { create: true })).createWritable();
          let last = Promise.resolve();
          send = (b) => (last = last.then(() => w.write(b)));
          finish = async () => {
            await last;
            await w.close();
          };
        } else {
          const ch = new MessageChannel();
          const ready = new Promise((r) => (ch.port1.onmessage = r));
          navigator.serviceWorker.controller.postMessage('a', [ch.port2]);
          await ready;
          const frame = document.createElement('iframe');
          frame.hidden = true;
          frame.src = '/dl/a';
          document.body.appendChild(frame);
          send = (b) => ch.port1.postMessage(b.buffer, [b.buffer]);
          finish = () => ch.port1.postMessage('end');
        }
        const PIECE = 8150;
        const BLOCK = 4 << 20;
        let seed = 1;
        const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
        let block = new Uint8Array(BLOCK);
        let at = 0;
        let written = 0;
        const put = (p) => {
          for (let from = 0; from < p.length;) {
            const n = Math.min(p.length - from, BLOCK - at);
            block.set(p.subarray(from, from + n), at);
            at += n;
            from += n;
            if (at === BLOCK) {
              send(block);
              block = new Uint8Array(BLOCK);
              at = 0;
            }
          }
        };
        const header = new Uint8Array(60);
        for (let k = 0; written < logical; k++) {
          if (k % 16 === 0) put(header);
          const len = Math.min(PIECE, logical - written);
          const off = rnd() % (BUNDLE - len);
          put(bundles[rnd() % bundles.length].subarray(off, off + len));
          written += len;
        }
        send(block.slice(0, at));
        await finish();
        return { ms: performance.now() - t0, startedAt: performance.timeOrigin + t0 };
      },
      { sink, logical, unique },
    );
    if (!download) return ms / 1000;
    const d = await download;
    const file = await d.path();
    const seconds = (Date.now() - startedAt) / 1000;
    const size = statSync(file).size;
    if (size < logical) throw new Error(`${sink}: the download holds ${size} bytes, expected at least ${logical}`);
    return seconds;
  } finally {
    await context.close();
  }
}

const scratch = mkdtempSync(path.join(tmpdir(), 'ditto-writefloor-'));
const times = { blob: [], file: [], sw: [], restic: [] };
const browser = await launchBrowser();
let repo = null;
try {
  if (!flag('no-restic')) {
    repo = resticRepo('writefloor');
    repo.backup(parent);
  }
  for (let run = 0; run < runs; run++) {
    for (const sink of ['blob', 'file', 'sw']) times[sink].push(await floor(browser, sink));
    if (repo) times.restic.push(timeResticRestore(repo, parent, path.join(scratch, `restic-${run}`)));
    console.log(
      `round ${run + 1}: ${Object.entries(times)
        .map(([k, v]) => `${k} ${v.at(-1)?.toFixed(3) ?? '-'} s`)
        .join(', ')}`,
    );
  }
} finally {
  await browser.close();
  repo?.remove();
  rmSync(scratch, { recursive: true, force: true });
  site.close();
}
const m = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, v.length ? median(v) : NaN]));
const out = { runs, logical_bytes: logical, unique_bytes: unique };
for (const sink of ['blob', 'file', 'sw']) {
  out[`${sink}_seconds`] = +m[sink].toFixed(3);
  out[`${sink}_mbps`] = +(logical / 1e6 / m[sink]).toFixed(1);
  if (repo) out[`${sink}_max_speed_vs_restic`] = +(m.restic / m[sink]).toFixed(3);
}
if (repo) out.restic_restore_seconds = +m.restic.toFixed(3);
console.log(JSON.stringify(out));
