// @ts-check
/// <reference lib="webworker" />
/**
 * Streamed downloads (web/src/restore/sink.ts). The page opens a download with a
 * `MessagePort`, then navigates a hidden frame to `/dl/<id>/<name>`; this worker answers that
 * request with a stream fed by the port, so the browser writes the restore to disk as it is
 * made, with no copy in blob storage and no size limit. Its scope is `/dl/` only: the app's
 * own requests never pass through it.
 *
 * Messages to the worker: `{ type: 'open', id, name, mime }` with the port, `{ type: 'ping' }`,
 * `{ type: 'abort', id, message }` (the page fails download `id`: its writer may be gone).
 * The port speaks the block port protocol (web/src/restore/port.ts), written by whoever holds
 * its other end (the restore's assembler worker): writer → here `{ type: 'data', block,
 * offset, length }` (an ArrayBuffer, transferred, and the view of it to send), `{ type: 'end' }`,
 * `{ type: 'abort', message }`; here → writer `{ type: 'pulled' }` each time the browser took a
 * block (the writer keeps a few in flight), `{ type: 'cancel' }` if the user cancelled.
 */
const sw = /** @type {ServiceWorkerGlobalScope} */ (/** @type {unknown} */ (self));

/** @typedef {{ port: MessagePort, name: string, mime: string, at: number }} Opened */
/** Downloads opened and not yet requested, by id. @type {Map<string, Opened>} */
const opened = new Map();
/** Requests that came before their `open` message, by id. @type {Map<string, (o: Opened) => void>} */
const early = new Map();
/** Downloads being streamed, by id: how to fail each. @type {Map<string, (message: string) => void>} */
const streaming = new Map();

/** The download `id`, waiting briefly for its `open` (the page sends it just before the request). */
function openedAs(/** @type {string} */ id) {
  const o = opened.get(id);
  if (o) {
    opened.delete(id);
    return Promise.resolve(o);
  }
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      early.delete(id);
      resolve(null);
    }, 10_000);
    early.set(id, (o) => {
      clearTimeout(timer);
      early.delete(id);
      resolve(o);
    });
  });
}

sw.addEventListener('install', () => sw.skipWaiting());
sw.addEventListener('activate', (e) => e.waitUntil(sw.clients.claim()));

sw.addEventListener('message', (e) => {
  // `ping`: the page keeps this worker alive during a long download (each message event
  // extends its life; Firefox stops an idle worker after ~30 s).
  if (e.data?.type === 'abort' && typeof e.data.id === 'string') {
    const o = opened.get(e.data.id);
    if (o) {
      o.port.close();
      opened.delete(e.data.id);
    }
    streaming.get(e.data.id)?.(String(e.data.message));
    return;
  }
  if (e.data?.type !== 'open') return;
  const port = e.ports[0];
  if (!port || typeof e.data.id !== 'string') return;
  // Downloads whose request never came (a frame that failed to load) are dropped.
  const stale = Date.now() - 60_000;
  for (const [id, o] of opened)
    if (o.at < stale) {
      o.port.close();
      opened.delete(id);
    }
  const o = { port, name: String(e.data.name), mime: String(e.data.mime), at: Date.now() };
  const waiting = early.get(e.data.id);
  if (waiting) waiting(o);
  else opened.set(e.data.id, o);
});

sw.addEventListener('fetch', (e) => {
  const url = new URL(e.request.url);
  const m = /^\/dl\/([0-9a-f]{32})\//.exec(url.pathname);
  if (!m) return;
  e.respondWith(
    openedAs(m[1]).then((o) =>
      o ? download(m[1], o) : new Response('This download is no longer available.', { status: 404 }),
    ),
  );
});

/** The response of an opened download: a stream of the blocks its port brings. */
function download(/** @type {string} */ id, /** @type {Opened} */ { port, name, mime }) {
  /** @type {Uint8Array[]} */
  const queue = [];
  let wanted = false;
  let ended = false;
  const body = new ReadableStream({
    start(controller) {
      const fail = (/** @type {string} */ message) => {
        streaming.delete(id);
        try {
          controller.error(new Error(message));
        } catch {
          // Already closed or failed.
        }
        port.close();
      };
      streaming.set(id, fail);
      port.onmessage = (msg) => {
        const d = msg.data;
        if (d.type === 'data') {
          const block = new Uint8Array(d.block, d.offset, d.length);
          if (wanted) {
            wanted = false;
            controller.enqueue(block);
            port.postMessage({ type: 'pulled' });
          } else queue.push(block);
        } else if (d.type === 'end') {
          ended = true;
          streaming.delete(id);
          if (!queue.length) controller.close();
        } else if (d.type === 'abort') fail(String(d.message));
      };
    },
    pull(controller) {
      const block = queue.shift();
      if (block) {
        controller.enqueue(block);
        port.postMessage({ type: 'pulled' });
        if (ended && !queue.length) controller.close();
      } else wanted = true;
    },
    cancel() {
      streaming.delete(id);
      port.postMessage({ type: 'cancel' });
      port.close();
    },
  });
  return new Response(body, {
    headers: {
      'content-type': mime,
      'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(name)}`,
      'x-content-type-options': 'nosniff',
    },
  });
}
