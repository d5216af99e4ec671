/**
 * Where a restore goes, best first:
 * - A streamed download: the download worker (public/dl/sw.js, a service worker scoped to
 *   `/dl/` only) answers a hidden frame's request with a stream fed block by block through a
 *   block port (port.ts), which the restore's assembler worker writes into directly, a few
 *   blocks in flight; the browser writes it to disk as it comes. No size limit, flat memory,
 *   nothing copied into blob storage, and no byte through the page's thread (the fastest way
 *   out of the page, `npm run bench:writefloor`). Needs a secure context with service workers
 *   (not Firefox's private windows, not plain http other than localhost).
 * - A picked file (File System Access API, Chromium): the stream is written straight to it
 *   with backpressure; no size limit, but every write goes through the browser's swap file.
 * - A Blob handed to an `<a download>`: it holds the whole archive (Chrome keeps blobs in
 *   memory up to ~2 GB before paging to disk, Firefox keeps them in memory, Safari may peak
 *   at several times the size), so it is gated at BLOB_LIMIT.
 */
import { browserReason } from './folder';

export const BLOB_LIMIT = 512 * 1024 * 1024;

/** How often the page pings the download worker while a download runs (browsers stop idle workers). */
const PING_MS = 10_000;

/** The active download worker, once its registration is; null until then or without one. */
let downloadWorker: ServiceWorker | null = null;

/**
 * Registers the download worker (call once at start). A failure only means restores fall
 * back to the picker or a Blob.
 */
export function registerDownloadWorker(): void {
  const container = typeof navigator === 'undefined' ? undefined : navigator.serviceWorker;
  if (!container) return;
  container
    .register('/dl/sw.js', { scope: '/dl/' })
    .then((reg) => {
      const watch = (w: ServiceWorker | null) => {
        if (!w) return;
        const settle = () => {
          if (w.state === 'activated') downloadWorker = w;
          else if (w.state === 'redundant' && downloadWorker === w) downloadWorker = null;
        };
        settle();
        w.addEventListener('statechange', settle);
      };
      watch(reg.active ?? reg.waiting ?? reg.installing);
      reg.addEventListener('updatefound', () => watch(reg.installing));
    })
    .catch(() => {});
}

interface SaveFilePickerOptions {
  suggestedName?: string;
  types?: { description?: string; accept: Record<string, string[]> }[];
}
type SavePicker = (opts?: SaveFilePickerOptions) => Promise<FileSystemFileHandle>;

/** A streamed download, opened: write its `port` (port.ts), then `end` it. */
export interface StreamedDownload {
  /** The block port the download reads (give it to the restore, which transfers it). */
  port: MessagePort;
  /** Fails the download (whoever holds the port now, or if it is gone with its worker). */
  fail(message: string): void;
  /** The restore is over: the page stops keeping the download worker alive. */
  end(): void;
}

export type Sink =
  | { kind: 'stream'; name: string; download: StreamedDownload }
  | { kind: 'picker'; name: string; writable: Promise<FileSystemWritableFileStream> }
  | { kind: 'blob'; name: string; mime: string };

/** The sink cannot take the restore: too large for memory, or the picked file refused a write. */
export class SinkError extends Error {}

/**
 * Chooses the sink. Call it first in a click handler, before any `await`: the picker and a
 * download started by the page need the user's gesture (a streamed download is opened here).
 * Returns null when the user dismissed the picker.
 */
export async function chooseSink(name: string, expectedBytes: number, zip: boolean): Promise<Sink | null> {
  const mime = zip ? 'application/zip' : 'application/octet-stream';
  if (downloadWorker?.state === 'activated')
    return { kind: 'stream', name, download: streamedDownload(downloadWorker, name, mime) };
  const picker = (window as unknown as { showSaveFilePicker?: SavePicker }).showSaveFilePicker;
  if (typeof picker === 'function') {
    try {
      const handle = await picker({
        suggestedName: name,
        types: zip ? [{ description: 'Zip archive', accept: { 'application/zip': ['.zip'] } }] : undefined,
      });
      return { kind: 'picker', name, writable: handle.createWritable() };
    } catch (e) {
      if (e instanceof DOMException && e.name === 'AbortError') return null;
      throw e;
    }
  }
  if (expectedBytes > BLOB_LIMIT)
    throw new SinkError(
      `This browser cannot stream a download to disk, and ${Math.round(expectedBytes / 1e6)} MB is too much to assemble in memory (limit ${BLOB_LIMIT / 1e6} MB). Use a Chromium-based browser, or restore a folder at a time.`,
    );
  return { kind: 'blob', name, mime };
}

/**
 * Ends a sink whose restore failed, so that no download is left waiting and no swap file is
 * left behind: a streamed download is failed (whether or not the restore wrote to it), a
 * picked file the restore's stream never reached is aborted.
 */
export async function abandonSink(sink: Sink, reason: unknown): Promise<void> {
  if (sink.kind === 'stream') {
    sink.download.fail(reason instanceof Error ? reason.message : String(reason));
    return;
  }
  const w = sink.kind === 'picker' ? await sink.writable.catch(() => null) : null;
  if (w && !w.locked) await w.abort(reason).catch(() => {});
}

/** Pours a restore's stream into a picked file or a Blob; resolves when the file is complete. */
export async function writeToSink(
  sink: Exclude<Sink, { kind: 'stream' }>,
  stream: ReadableStream<Uint8Array>,
): Promise<void> {
  if (sink.kind === 'picker') {
    // By hand rather than pipeTo, to tell the file's failures from the restore's: a file that
    // cannot be written cancels the restore, whose own message would then say "cancelled".
    const file = (await sink.writable).getWriter();
    const reader = stream.getReader();
    const refused = async (e: unknown): Promise<never> => {
      await reader.cancel(e).catch(() => {});
      await file.abort(e).catch(() => {});
      throw new SinkError(`The file you picked could not be written: ${browserReason(e)}`);
    };
    for (;;) {
      // The file's own pace (its queue's high-water mark); a write that failed errors the
      // stream, and this rejects with its reason.
      await file.ready.catch(refused);
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch (e) {
        await file.abort(e).catch(() => {});
        throw e;
      }
      if (r.done) break;
      file.write(r.value).catch(() => {}); // seen by `ready` or `close`
    }
    // Chrome swaps the file's .crswap in on close; until then the picked file is as it was.
    await file.close().catch(refused);
    return;
  }
  // Each block becomes a Blob as it comes (its bytes move to the browser's blob storage and
  // the page's copy can go); the archive is the Blob of those, which copies nothing.
  const parts: Blob[] = [];
  const reader = stream.getReader();
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    parts.push(new Blob([r.value as Uint8Array<ArrayBuffer>]));
  }
  const blob = new Blob(parts, { type: sink.mime });
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = sink.name;
  a.style.display = 'none';
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/**
 * A download opened at once, inside the click that asked for it (the browser lets a page
 * start a download while it has the user's gesture): the download worker gets a block port
 * and a hidden frame requests `/dl/<id>/<name>`, which the worker answers with a stream that
 * waits for blocks. Whoever holds the port writes them (port.ts: flow control, a download the
 * user cancels, one that never starts); `fail` reaches the worker by the download's id, so it
 * works after the port has gone to a worker that died with it.
 */
function streamedDownload(worker: ServiceWorker, name: string, mime: string): StreamedDownload {
  const id = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
  const { port1: port, port2 } = new MessageChannel();
  worker.postMessage({ type: 'open', id, name, mime }, [port2]);
  const frame = document.createElement('iframe');
  frame.hidden = true;
  frame.src = `/dl/${id}/${encodeURIComponent(name)}`;
  document.body.appendChild(frame);
  const ping = window.setInterval(() => worker.postMessage({ type: 'ping' }), PING_MS);
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    clearInterval(ping);
    // The frame stays a while: removing it at once could end the download it started.
    setTimeout(() => frame.remove(), 60_000);
  };
  return {
    port,
    fail: (message) => {
      worker.postMessage({ type: 'abort', id, message });
      end();
    },
    end,
  };
}
