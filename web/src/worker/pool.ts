/**
 * A pool of core workers sized to the machine, each with its own wasm-core instance.
 * Jobs (one file or segment each) go to the worker with the fewest bytes queued, up to
 * DEPTH jobs and DEPTH_BYTES per worker: a worker reads its queued jobs' files while it chunks the first
 * (file reads are round trips to the browser process and dominate small files).
 *
 * This is the scheduling only: messages, crashes and worker start-up are the worker
 * bridge's (bridge.ts). A crashed worker's jobs fail and its replacement is given the
 * running backup's known set again.
 */
import { WorkerPool, type Request } from './bridge';
import {
  WHOLE_READ,
  type BatchChunked,
  type Chunked,
  type CoreApi,
  type CoreEvent,
  type CoreSignal,
  type NewChunks,
} from './protocol';
import { FP_LEN } from '../backup/hex';
import type { RecipeHintsData } from '../backup/hints';

export interface ChunkedFile {
  fps: Uint8Array;
  lengths: Uint32Array;
}

/** One file of a batch: its recipe, or why it could not be read. */
export type BatchResult = ChunkedFile | { error: string };

/** Jobs queued per worker at most. */
const DEPTH = 4;
/**
 * Bytes held by a worker's queued jobs at most (`Job.held`; a worker with nothing queued
 * takes any job). Without this cap four 2 MiB segments of a huge file would sit in each
 * worker, read ahead: the 2 GiB backup's tab peaked at 326 MiB instead of under 300.
 */
const DEPTH_BYTES = 4 << 20;

/**
 * What a one-file job holds while it waits in a worker's queue: a file read whole, its
 * bytes; a larger one is read through its own stream, whose pipe (not the file) bounds what
 * is read ahead. Counting a streamed 9 MB file as 9 MB kept every small-file batch on the
 * page until it was chunked, and then each batch's read started only as a worker went idle.
 */
function heldWhileQueued(size: number) {
  return size <= WHOLE_READ ? size : 0;
}

/** A request of a chunk or hash job, as the scheduler sees it. */
type JobRequest<R> = Request<R, CoreSignal>;

/** What a job needs besides its request. */
interface JobSpec<R> {
  /** Sends the job to worker `w`; `onEvent` gets what it emits while it runs. */
  send: (w: number, onEvent: (e: CoreEvent) => void) => JobRequest<R>;
  /** Bytes the job reads (balances the workers). */
  bytes: number;
  /** Bytes the job holds in memory while queued (its reads start on arrival); defaults to `bytes`. */
  held?: number;
  onProgress?: (bytes: number) => void;
  /** New chunks of a chunk job; the worker reads on once the returned promise settles. */
  onNewChunks?: (chunks: NewChunks) => Promise<void>;
  /** Called once the request is sent (segment jobs then send their entry). */
  onStart?: (request: JobRequest<R>) => void;
  /** A segment job's exit (where the next segment's chunks start). */
  onExit?: (exit: number) => void;
  /**
   * Aborted when the job's backup fails or is cancelled: a queued job is dropped, a running
   * one told to stop, and the job rejects with the signal's reason.
   */
  signal?: AbortSignal;
}

/** A queued job: what the scheduler counts, and how to start it on a slot. */
interface Job {
  bytes: number;
  held: number;
  launch: (slot: Slot) => void;
  reject: (err: Error) => void;
}

interface Slot {
  /** The worker's index in the bridge's pool. */
  w: number;
  jobs: Set<Job>;
  /** Bytes of the jobs in `jobs`. */
  bytes: number;
  /** Bytes the jobs in `jobs` hold (see `Job.held`): what DEPTH_BYTES caps. */
  held: number;
}

export class CorePool {
  private slots: Slot[] = [];
  private queue: Job[] = [];
  /** The running backup's `setKnown`, given again to a worker that replaces a crashed one. */
  private known: CoreApi['setKnown']['arg'] | null = null;
  /** Chunks found by RapidCDC prediction instead of scanning, since the pool started. */
  predictedChunks = 0;

  private constructor(private workers: WorkerPool<CoreApi>) {
    this.slots = Array.from({ length: workers.size }, (_, w) => ({ w, jobs: new Set(), bytes: 0, held: 0 }));
  }

  static async create(module: WebAssembly.Module, size = navigator.hardwareConcurrency || 2) {
    let pool: CorePool | undefined;
    const workers = await WorkerPool.start<CoreApi>({
      name: 'core',
      spawn: () => new Worker(new URL('./coreWorker.ts', import.meta.url), { type: 'module' }),
      size: Math.max(1, size),
      init: module,
      onRestart: (w) => pool?.restarted(w),
    });
    pool = new CorePool(workers);
    return pool;
  }

  get size() {
    return this.slots.length;
  }

  /**
   * Tells every worker which fingerprints a backup job can skip (n*20 bytes), and the
   * previous version's recipes to predict chunks from.
   */
  setKnown(fps: Uint8Array, zstdLevel: number, hints: RecipeHintsData | null = null) {
    this.known = { fps, zstdLevel, hints };
    for (const s of this.slots) this.sendKnown(s.w);
  }

  private sendKnown(w: number) {
    if (!this.known) return;
    // A worker that cannot take it fails the backup's chunk jobs with the reason.
    this.workers.call(w, 'setKnown', this.known).catch((e: unknown) => console.warn('setKnown failed:', e));
  }

  private restarted(w: number) {
    this.sendKnown(w);
  }

  async hashFile(file: File, onProgress?: (bytes: number) => void): Promise<string> {
    const r = await this.run({
      send: (w, onEvent) => this.workers.request(w, 'hashFile', { file }, { onEvent }),
      bytes: file.size,
      held: heldWhileQueued(file.size),
      onProgress,
    });
    return r.sha1;
  }

  /** `prevFile`: the file's index in the hints given to `setKnown`, -1 if none. */
  async chunkFile(
    file: File,
    prevFile: number,
    onNewChunks: (chunks: NewChunks) => Promise<void>,
    onProgress?: (bytes: number) => void,
    signal?: AbortSignal,
  ): Promise<ChunkedFile> {
    const r = await this.run({
      send: (w, onEvent) => this.workers.request(w, 'chunkFile', { file, prevFile }, { onEvent }),
      bytes: file.size,
      held: heldWhileQueued(file.size),
      onNewChunks,
      onProgress,
      signal,
    });
    this.predictedChunks += r.predicted;
    return { fps: r.fps, lengths: r.lengths };
  }

  /**
   * Small files in one job: read as one composite Blob (one read instead of one per file,
   * which is what small files cost), chunked one by one. `sizes` are the picked sizes. When
   * the composite cannot be read (a file changed or vanished since the pick), each file is
   * chunked as a job of its own, so that a failure names its file and the others still count.
   */
  async chunkBatch(
    files: File[],
    sizes: number[],
    prevFiles: number[],
    onNewChunks: (chunks: NewChunks) => Promise<void>,
    onProgress?: (bytes: number) => void,
    signal?: AbortSignal,
  ): Promise<BatchResult[]> {
    const r: BatchChunked = await this.run({
      send: (w, onEvent) =>
        this.workers.request(w, 'chunkBatch', { all: new Blob(files), sizes, prevFiles }, { onEvent }),
      bytes: sizes.reduce((a, b) => a + b, 0),
      onNewChunks,
      onProgress,
      signal,
    });
    if (r.unread) return this.chunkEach(files, prevFiles, onNewChunks, onProgress, signal);
    this.predictedChunks += r.predicted;
    onProgress?.(r.bytes);
    let at = 0;
    return files.map((_, k) => {
      const n = r.counts[k];
      // Copies, not views: a view would drag the whole batch's buffer into each file's job record.
      const out = { fps: r.fps.slice(at * FP_LEN, (at + n) * FP_LEN), lengths: r.lengths.slice(at, at + n) };
      at += n;
      return out;
    });
  }

  /** `files` chunked one job each; a file that cannot be read gives its error, not the batch's. */
  private async chunkEach(
    files: File[],
    prevFiles: number[],
    onNewChunks: (chunks: NewChunks) => Promise<void>,
    onProgress?: (bytes: number) => void,
    signal?: AbortSignal,
  ): Promise<BatchResult[]> {
    const read = new Array<number>(files.length).fill(0);
    return Promise.all(
      files.map((file, k) =>
        this.chunkFile(
          file,
          prevFiles[k],
          onNewChunks,
          (bytes) => {
            read[k] = bytes;
            onProgress?.(read.reduce((a, b) => a + b, 0));
          },
          signal,
        ).then(
          (r): BatchResult => {
            read[k] = file.size;
            onProgress?.(read.reduce((a, b) => a + b, 0));
            return r;
          },
          (e: unknown): BatchResult => ({ error: e instanceof Error ? e.message : String(e) }),
        ),
      ),
    );
  }

  /**
   * A large file split into segments of `segment` bytes that different workers chunk at
   * once (SS-CDC): each worker marks its segment's cut candidates on its own, then waits
   * only for where the previous segment's chunks end (a number, passed on as soon as that
   * segment's cuts are chosen). The recipe is identical to `chunkFile`'s. Memory: one
   * segment per busy worker.
   */
  async chunkLargeFile(
    file: File,
    segment: number,
    onNewChunks: (chunks: NewChunks) => Promise<void>,
    onProgress?: (bytes: number) => void,
    signal?: AbortSignal,
  ): Promise<ChunkedFile> {
    const count = Math.max(1, Math.ceil(file.size / segment));
    const done = new Array<number>(count).fill(0);
    const jobs: Promise<Chunked>[] = [];
    // Queued back to back, in file order: a segment waits only for earlier ones, which the
    // FIFO queue has already handed to a worker, so the wait always ends.
    let entry: Promise<number> = Promise.resolve(0);
    for (let k = 0; k < count; k++) {
      const start = k * segment;
      const stop = Math.min(file.size, start + segment);
      const myEntry = entry;
      let exited!: (v: number) => void;
      let failed!: (e: unknown) => void;
      entry = new Promise<number>((res, rej) => ((exited = res), (failed = rej)));
      entry.catch(() => {});
      const job = this.run({
        send: (w, onEvent) => this.workers.request(w, 'chunkSegment', { file, start, stop }, { onEvent }),
        bytes: stop - start,
        onStart: (request) =>
          myEntry.then(
            (entry) => request.signal({ type: 'segmentEntry', entry }),
            () => request.signal({ type: 'segmentEntry', entry: NaN }),
          ),
        onExit: exited,
        onNewChunks,
        onProgress: (bytes) => {
          done[k] = bytes;
          onProgress?.(done.reduce((a, b) => a + b, 0));
        },
        signal,
      });
      // A failed segment (or one that ended without an exit) fails every later one.
      job.then(() => failed(new Error('segment ended without an exit')), failed);
      jobs.push(job);
    }
    const parts = await Promise.all(jobs);
    let n = 0;
    for (const r of parts) n += r.lengths.length;
    const fps = new Uint8Array(n * FP_LEN);
    const lengths = new Uint32Array(n);
    let at = 0;
    for (const r of parts) {
      fps.set(r.fps, at * FP_LEN);
      lengths.set(r.lengths, at);
      at += r.lengths.length;
    }
    return { fps, lengths };
  }

  terminate() {
    this.workers.terminate('cancelled');
    for (const j of this.queue) j.reject(new Error('cancelled'));
    this.queue = [];
    for (const s of this.slots) (s.jobs.clear(), (s.bytes = s.held = 0));
  }

  /** Queues a job; resolves with its answer once a worker has run it. */
  private run<R>(spec: JobSpec<R>): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const asError = (err: unknown) => (err instanceof Error ? err : new Error(String(err)));
      const { signal } = spec;
      if (signal?.aborted) return reject(asError(signal.reason));
      /** Ends the job for the page once it has been launched (set then). */
      let halt: ((err: unknown) => void) | null = null;
      const onAbort = () => {
        if (halt) return halt(signal!.reason);
        // Still queued: it never reaches a worker.
        const at = this.queue.indexOf(job);
        if (at >= 0) this.queue.splice(at, 1);
        reject(asError(signal!.reason));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const job: Job = {
        bytes: spec.bytes,
        held: spec.held ?? spec.bytes,
        reject,
        launch: (slot) => {
          let settled = false;
          const settle = () => {
            if (settled) return false;
            settled = true;
            signal?.removeEventListener('abort', onAbort);
            this.finish(slot, job);
            return true;
          };
          // The worker ends a stopped job at its next block or batch (a worker waiting for
          // credit would otherwise wait for good, and every later job on it behind it).
          const stop = () => request.signal({ type: 'stop' });
          halt = (err) => {
            stop();
            if (settle()) reject(asError(err));
          };
          const onEvent = (e: CoreEvent) => {
            if (settled) {
              // A batch of a job the page has given up: nothing takes it.
              if (e.type === 'newChunks') stop();
              return;
            }
            switch (e.type) {
              case 'progress':
                spec.onProgress?.(e.bytes);
                return;
              case 'segmentExit':
                spec.onExit?.(e.exit);
                return;
              case 'newChunks':
                (spec.onNewChunks?.(e) ?? Promise.resolve()).then(
                  () => request.signal({ type: 'credit' }),
                  (err: unknown) => halt!(err),
                );
            }
          };
          const request = spec.send(slot.w, onEvent);
          spec.onStart?.(request);
          request.answer.then(
            (r) => settle() && resolve(r),
            (err: unknown) => settle() && reject(asError(err)),
          );
        },
      };
      this.queue.push(job);
      this.pump();
    });
  }

  private pump() {
    while (this.queue.length) {
      let slot: Slot | undefined;
      const next = this.queue[0].held;
      for (const s of this.slots) {
        const room = s.jobs.size === 0 || (s.jobs.size < DEPTH && s.held + next <= DEPTH_BYTES);
        if (room && (!slot || s.bytes < slot.bytes)) slot = s;
      }
      if (!slot) return;
      const job = this.queue.shift()!;
      slot.jobs.add(job);
      slot.bytes += job.bytes;
      slot.held += job.held;
      job.launch(slot);
    }
  }

  /** Takes a job that ended (answered, failed, or given up) off its slot and hands out more. */
  private finish(slot: Slot, job: Job) {
    if (!slot.jobs.delete(job)) return;
    slot.bytes -= job.bytes;
    slot.held -= job.held;
    this.pump();
  }
}
