/**
 * The upload queue: new chunks in, durable chunks out.
 *
 * Candidate chunks (not in the hot cache) are grouped into ~4 MiB bundles. For each bundle
 * the client index and then the server's `chunks/missing` answer drop chunks already
 * stored, so the wire carries only chunks the server lacks. A few bundles are in flight at
 * once; transient failures (network, 5xx, 429) are retried with exponential backoff and
 * jitter, anything else fails the backup with the server's message. Only after the server's
 * 200 (= durable) is a chunk reported `acked`, which is when the client index learns it.
 * The same fingerprint offered twice is uploaded once.
 */
import { isTransient, pause } from '../api/retry';
import { BundleEncoder, type BundleChunk } from './bundle';
import { FP_LEN, fpHex } from './hex';

export type Candidate = BundleChunk;

/**
 * The page's one bundle encoder, whatever the uploaders (one per backup): an encode and the
 * `upload` call that copies its bundle run in one go, so no two interleave on it, and its
 * memory is held once.
 */
let encoder: BundleEncoder | null = null;

export interface UploaderDeps {
  /** The server's missing query: which of these n*20 bytes of fingerprints it lacks. */
  missing(fps: Uint8Array, signal: AbortSignal): Promise<Uint8Array>;
  /**
   * Uploads an encoded bundle; resolves on the server's acknowledgement. `bundle` is only
   * valid during the call (the uploader reuses its buffer): copy it synchronously, as
   * `fetch` does with a typed-array body.
   */
  upload(bundle: Uint8Array, signal: AbortSignal): Promise<unknown>;
  /** Client index lookup: 1 per fingerprint known to be stored. */
  known?(fps: Uint8Array): Promise<Uint8Array>;
  /**
   * Called with fingerprints now known durable on the server (uploaded or found there): the
   * page's bookkeeping (client index, job record). Not waited for by the uploads or `drain`,
   * so a commit does not wait on IndexedDB; `settled()` waits for it.
   */
  acked?(fps: Uint8Array, wireBytes: number): Promise<void>;
  sleep?(ms: number, signal: AbortSignal): Promise<void>;
}

export interface UploaderOptions {
  bundleBytes: number;
  /**
   * A bundle also seals at this many chunks: tiny files make tiny chunks, and the server
   * refuses a bundle of more than 65 536 (`MAX_BUNDLE_CHUNKS`, docs/FORMAT.md).
   */
  bundleChunks: number;
  /**
   * A bundle also seals once its chunks hold this many raw bytes: the server refuses a
   * bundle of more than 1 GiB raw (`MAX_BUNDLE_RAW`, docs/FORMAT.md), which 4 MiB of very
   * compressible chunks can pass.
   */
  bundleRawBytes: number;
  /**
   * While no bundle is in flight or waiting, a bundle seals as soon as it holds this many
   * bytes: the link is idle, so waiting for a full bundle would only delay the upload and
   * leave a bigger tail to send after the last file is chunked.
   */
  idleBundleBytes: number;
  concurrency: number;
  /**
   * add() waits while more than this many stored bytes are queued, in flight included
   * (memory bound). The 2 GiB test's tab peaked at 333 MiB with 48 MiB here, 308 with 16 and
   * 295-343 with 8 over three runs (e2e/tests/large-file.spec.ts, limit 300; one run each
   * for 48 and 16), before segment reads stopped making garbage (docs/BACKUP.md).
   */
  maxQueuedBytes: number;
  maxAttempts: number;
  baseDelayMs: number;
}

export interface UploaderStats {
  chunksOffered: number;
  duplicatesInJob: number;
  knownByIndex: number;
  presentOnServer: number;
  chunksSent: number;
  rawBytesSent: number;
  /** Bundle bytes put on the wire (successful attempts). */
  wireBytes: number;
  bundlesAcked: number;
  retries: number;
  queuedBytes: number;
}

interface Pending {
  chunk: Candidate;
  hex: string;
  /** Stored size, kept apart: the caller may free the chunk's bytes once it is durable. */
  bytes: number;
  done: () => void;
}

const DEFAULTS: UploaderOptions = {
  bundleBytes: 4 << 20,
  bundleChunks: 16_384,
  bundleRawBytes: 256 << 20,
  idleBundleBytes: 1 << 20,
  concurrency: 3,
  maxQueuedBytes: 8 << 20,
  maxAttempts: 6,
  baseDelayMs: 400,
};

function pack(items: readonly Pending[]): Uint8Array {
  const out = new Uint8Array(items.length * FP_LEN);
  items.forEach((p, i) => out.set(p.chunk.fp.subarray(0, FP_LEN), i * FP_LEN));
  return out;
}

export class Uploader {
  readonly opts: UploaderOptions;
  readonly stats: UploaderStats = {
    chunksOffered: 0,
    duplicatesInJob: 0,
    knownByIndex: 0,
    presentOnServer: 0,
    chunksSent: 0,
    rawBytesSent: 0,
    wireBytes: 0,
    bundlesAcked: 0,
    retries: 0,
    queuedBytes: 0,
  };
  /** Every fingerprint offered in this job -> resolves when durable. */
  private durable = new Map<string, Promise<void>>();
  private current: Pending[] = [];
  private currentBytes = 0;
  private currentRaw = 0;
  private ready: Pending[][] = [];
  private inFlight = 0;
  /** `add` calls waiting for room in the queue. */
  private waitingAdds = 0;
  /** Whether `drain` is running: chunks added then are sealed at once. */
  private draining = false;
  private idleWaiters: (() => void)[] = [];
  private roomWaiters: (() => void)[] = [];
  private pauseGate: Promise<void> | null = null;
  private openGate: (() => void) | null = null;
  private abort = new AbortController();
  private failure: Error | null = null;
  private failWaiters: ((e: Error) => void)[] = [];
  private bookkeeping: Promise<void>[] = [];

  constructor(
    private deps: UploaderDeps,
    opts: Partial<UploaderOptions> = {},
  ) {
    this.opts = { ...DEFAULTS, ...opts };
  }

  get error(): Error | null {
    return this.failure;
  }

  /**
   * Offers chunks. Resolves once they are queued (waiting while the queue is full) with a
   * `durable` promise that resolves when every one of them is stored on the server. (An
   * object, because an async function returning a bare promise would wait for it.)
   */
  async add(chunks: readonly Candidate[]): Promise<{ durable: Promise<void> }> {
    this.throwIfFailed();
    if (this.stats.queuedBytes > this.opts.maxQueuedBytes) {
      // Counted while it waits: a drain started meanwhile waits for these chunks too.
      this.waitingAdds++;
      try {
        while (this.stats.queuedBytes > this.opts.maxQueuedBytes) {
          await new Promise<void>((r) => this.roomWaiters.push(r));
          this.throwIfFailed();
        }
      } finally {
        this.waitingAdds--;
      }
    }
    const waits: Promise<void>[] = [];
    for (const chunk of chunks) {
      this.stats.chunksOffered++;
      const hex = fpHex(chunk.fp);
      const existing = this.durable.get(hex);
      if (existing) {
        this.stats.duplicatesInJob++;
        waits.push(existing);
        continue;
      }
      let done!: () => void;
      const p = new Promise<void>((resolve, reject) => {
        done = resolve;
        this.failWaiters.push(reject);
      });
      p.catch(() => {}); // failures surface through add()/drain(), not as unhandled rejections
      this.durable.set(hex, p);
      waits.push(p);
      this.current.push({ chunk, hex, bytes: chunk.stored.byteLength, done });
      this.currentBytes += chunk.stored.byteLength;
      this.currentRaw += chunk.rawLen;
      this.stats.queuedBytes += chunk.stored.byteLength;
      if (
        this.currentBytes >= this.opts.bundleBytes ||
        this.current.length >= this.opts.bundleChunks ||
        this.currentRaw >= this.opts.bundleRawBytes
      )
        this.seal();
    }
    // A drain under way seals these (it waits for nothing else once the link is idle), and
    // looks again at what it waits for (all of them may have been queued already).
    if (this.draining) {
      this.sealTail();
      for (const w of this.idleWaiters.splice(0)) w();
    } else this.sealIfIdle();
    const durable = Promise.all(waits).then(() => undefined);
    durable.catch(() => {});
    return { durable };
  }

  /** Resolves once every `acked` call made so far has; rejects with the first failure. */
  async settled(): Promise<void> {
    await Promise.all(this.bookkeeping);
  }

  /**
   * Sends what is queued and resolves when everything offered is durable, including chunks
   * of an `add` still waiting for room when the drain starts (a worker's answer can reach the
   * page before its last batch is queued).
   */
  async drain(): Promise<void> {
    this.draining = true;
    try {
      this.sealTail();
      while (this.inFlight > 0 || this.ready.length > 0 || this.waitingAdds > 0) {
        this.throwIfFailed();
        await new Promise<void>((r) => this.idleWaiters.push(r));
      }
      this.throwIfFailed();
    } finally {
      this.draining = false;
    }
  }

  pause() {
    if (!this.pauseGate) this.pauseGate = new Promise((r) => (this.openGate = r));
  }

  resume() {
    this.openGate?.();
    this.pauseGate = null;
    this.openGate = null;
  }

  get paused() {
    return this.pauseGate !== null;
  }

  cancel(reason = 'Backup cancelled') {
    this.fail(new Error(reason));
    this.abort.abort(new DOMException(reason, 'AbortError'));
  }

  private throwIfFailed() {
    if (this.failure) throw this.failure;
  }

  private fail(e: Error) {
    if (this.failure) return;
    this.failure = e;
    for (const reject of this.failWaiters) reject(e);
    this.failWaiters = [];
    this.resume();
    this.wake();
  }

  private wake() {
    for (const w of this.idleWaiters.splice(0)) w();
    for (const w of this.roomWaiters.splice(0)) w();
  }

  private sealIfIdle() {
    const idle = this.inFlight === 0 && this.ready.length === 0;
    if (idle && this.currentBytes >= this.opts.idleBundleBytes) this.seal();
  }

  /**
   * Seals the last chunks as up to `concurrency` bundles of at least `idleBundleBytes`:
   * the server verifies bundles side by side, and the tail of a backup is otherwise one
   * bundle of up to `bundleBytes` that everything waits for (typescript 5.6.3: the last
   * 4 MiB bundle took ~150 ms to be acknowledged, measured 2026-11-23).
   */
  private sealTail() {
    const parts = Math.min(this.opts.concurrency, Math.floor(this.currentBytes / this.opts.idleBundleBytes));
    const share = this.currentBytes / Math.max(1, parts);
    let bytes = 0;
    let part: Pending[] = [];
    for (const p of this.current) {
      part.push(p);
      bytes += p.bytes;
      if (bytes >= share && this.ready.length < parts - 1) {
        this.ready.push(part);
        part = [];
        bytes = 0;
      }
    }
    this.current = part;
    this.currentBytes = bytes;
    this.seal();
  }

  private seal() {
    if (this.current.length) this.ready.push(this.current);
    this.current = [];
    this.currentBytes = 0;
    this.currentRaw = 0;
    this.pump();
  }

  private pump() {
    while (!this.failure && this.inFlight < this.opts.concurrency && this.ready.length) {
      const bundle = this.ready.shift()!;
      this.inFlight++;
      this.fly(bundle)
        .catch((e: unknown) => this.fail(e instanceof Error ? e : new Error(String(e))))
        .finally(() => {
          this.inFlight--;
          for (const p of bundle) this.stats.queuedBytes -= p.bytes;
          this.pump();
          this.sealIfIdle();
          this.wake();
        });
    }
  }

  private async fly(items: Pending[]) {
    const signal = this.abort.signal;
    if (this.deps.known) {
      const known = await this.deps.known(pack(items));
      const keep = items.filter((_, i) => !known[i]);
      const knownItems = items.filter((_, i) => known[i]);
      this.stats.knownByIndex += knownItems.length;
      knownItems.forEach((p) => p.done());
      items = keep;
    }
    if (!items.length) return;
    for (let attempt = 1; ; attempt++) {
      if (this.pauseGate) await this.pauseGate;
      this.throwIfFailed();
      try {
        await this.send(items, signal);
        return;
      } catch (e) {
        if (!isTransient(e) || attempt >= this.opts.maxAttempts || signal.aborted) throw e;
        this.stats.retries++;
        const delay = this.opts.baseDelayMs * 2 ** (attempt - 1) * (0.5 + Math.random());
        await (this.deps.sleep ?? pause)(delay, signal);
      }
    }
  }

  private async send(items: Pending[], signal: AbortSignal) {
    const fps = pack(items);
    const missing = await this.deps.missing(fps, signal);
    const missingSet = new Set<string>();
    for (let i = 0; i < missing.byteLength / FP_LEN; i++) missingSet.add(fpHex(missing, i));
    const toSend = items.filter((p) => missingSet.has(p.hex));
    let wire = 0;
    if (toSend.length) {
      // One encoder's memory for every bundle: fetch copies the body when called, and a
      // fresh 4 MiB array per bundle stays allocated until the page's next GC (V8 lets
      // dozens of MiB of such buffers pile up; measured as 4 MiB mappings in the tab).
      encoder ??= new BundleEncoder();
      const bundle = encoder.encode(toSend.map((p) => p.chunk));
      wire = bundle.byteLength; // the view lasts only until the next encode
      await this.deps.upload(bundle, signal);
      this.stats.wireBytes += wire;
      this.stats.chunksSent += toSend.length;
      this.stats.rawBytesSent += toSend.reduce((n, p) => n + p.chunk.rawLen, 0);
    }
    this.stats.bundlesAcked++;
    this.stats.presentOnServer += items.length - toSend.length;
    for (const p of items) p.done();
    const kept = this.deps.acked?.(fps, wire);
    if (kept) {
      kept.catch(() => {}); // reported by settled()
      this.bookkeeping.push(kept);
    }
  }
}
