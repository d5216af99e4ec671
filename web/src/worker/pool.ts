/**
 * A pool of core workers sized to the machine, each with its own wasm-core instance.
 * Jobs (one file or segment each) go to the worker with the fewest bytes queued, up to
 * DEPTH jobs and DEPTH_BYTES per worker: a worker reads its queued jobs' files while it chunks the first
 * (file reads are round trips to the browser process and dominate small files).
 */
import { WHOLE_READ, type NewChunks, type WorkerRequest, type WorkerResponse } from './protocol';
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

interface Job {
  request: (id: number) => WorkerRequest;
  /** Bytes the job reads (balances the workers). */
  bytes: number;
  /** Bytes the job holds in memory while queued (its reads start on arrival). */
  held: number;
  onProgress?: (bytes: number) => void;
  /** New chunks of a chunk job; the worker reads on once the returned promise settles. */
  onNewChunks?: (chunks: NewChunks) => Promise<void>;
  /** Called once the request is posted to `worker` (segment jobs then send their entry). */
  onStart?: (worker: Worker, id: number) => void;
  /** A segment job's exit (where the next segment's chunks start). */
  onExit?: (exit: number) => void;
  resolve: (result: WorkerResponse) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  jobs: Map<number, Job>;
  /** Bytes of the jobs in `jobs`. */
  bytes: number;
  /** Bytes the jobs in `jobs` hold (see `Job.held`): what DEPTH_BYTES caps. */
  held: number;
}

export class CorePool {
  private slots: Slot[] = [];
  private queue: Job[] = [];
  private nextId = 1;
  /** Chunks found by RapidCDC prediction instead of scanning, since the pool started. */
  predictedChunks = 0;

  static async create(module: WebAssembly.Module, size = navigator.hardwareConcurrency || 2) {
    const pool = new CorePool();
    await Promise.all(
      Array.from({ length: Math.max(1, size) }, async () => {
        const worker = new Worker(new URL('./coreWorker.ts', import.meta.url), { type: 'module' });
        const slot: Slot = { worker, jobs: new Map(), bytes: 0, held: 0 };
        await new Promise<void>((resolve, reject) => {
          worker.onmessage = (e: MessageEvent<WorkerResponse>) => {
            if (e.data.type === 'ready') resolve();
          };
          worker.onerror = (e) => reject(new Error(`worker failed to start: ${e.message}`));
          const init: WorkerRequest = { type: 'init', module };
          worker.postMessage(init);
        });
        worker.onmessage = (e: MessageEvent<WorkerResponse>) => pool.onMessage(slot, e.data);
        worker.onerror = (e) => pool.onCrash(slot, e.message);
        pool.slots.push(slot);
      }),
    );
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
    for (const s of this.slots)
      s.worker.postMessage({ type: 'setKnown', fps, zstdLevel, hints } satisfies WorkerRequest);
  }

  async hashFile(file: File, onProgress?: (bytes: number) => void): Promise<string> {
    const r = await this.run({
      request: (id) => ({ type: 'hashFile', id, file }),
      bytes: file.size,
      held: heldWhileQueued(file.size),
      onProgress,
    });
    if (r.type !== 'hashed') throw new Error('unexpected worker reply');
    return r.sha1;
  }

  /** `prevFile`: the file's index in the hints given to `setKnown`, -1 if none. */
  async chunkFile(
    file: File,
    prevFile: number,
    onNewChunks: (chunks: NewChunks) => Promise<void>,
    onProgress?: (bytes: number) => void,
  ): Promise<ChunkedFile> {
    const r = await this.run({
      request: (id) => ({ type: 'chunkFile', id, file, prevFile }),
      bytes: file.size,
      held: heldWhileQueued(file.size),
      onNewChunks,
      onProgress,
    });
    if (r.type !== 'chunked') throw new Error('unexpected worker reply');
    return { fps: r.fps, lengths: r.lengths };
  }

  /**
   * Small files in one job: read as one composite Blob (one read instead of one per file,
   * which is what small files cost), chunked one by one. `sizes` are the picked sizes.
   */
  async chunkBatch(
    files: File[],
    sizes: number[],
    prevFiles: number[],
    onNewChunks: (chunks: NewChunks) => Promise<void>,
    onProgress?: (bytes: number) => void,
  ): Promise<BatchResult[]> {
    const r = await this.run({
      request: (id) => ({ type: 'chunkBatch', id, files, all: new Blob(files), sizes, prevFiles }),
      bytes: sizes.reduce((a, b) => a + b, 0),
      onNewChunks,
      onProgress,
    });
    if (r.type !== 'batchChunked') throw new Error('unexpected worker reply');
    onProgress?.(r.bytes);
    let at = 0;
    return files.map((_, k) => {
      const n = r.counts[k];
      const error = r.errors[k];
      const out = error
        ? { error }
        : // Copies, not views: a view would drag the whole batch's buffer into each file's job record.
          { fps: r.fps.slice(at * FP_LEN, (at + n) * FP_LEN), lengths: r.lengths.slice(at, at + n) };
      at += n;
      return out;
    });
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
  ): Promise<ChunkedFile> {
    const count = Math.max(1, Math.ceil(file.size / segment));
    const done = new Array<number>(count).fill(0);
    const jobs: Promise<WorkerResponse>[] = [];
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
        request: (id) => ({ type: 'chunkSegment', id, file, start, stop }),
        bytes: stop - start,
        onStart: (worker, id) =>
          myEntry.then(
            (e) => worker.postMessage({ type: 'segmentEntry', id, entry: e } satisfies WorkerRequest),
            () => worker.postMessage({ type: 'segmentEntry', id, entry: NaN } satisfies WorkerRequest),
          ),
        onExit: exited,
        onNewChunks,
        onProgress: (bytes) => {
          done[k] = bytes;
          onProgress?.(done.reduce((a, b) => a + b, 0));
        },
      });
      // A failed segment (or one that ended without an exit) fails every later one.
      job.then(() => failed(new Error('segment ended without an exit')), failed);
      jobs.push(job);
    }
    const parts = await Promise.all(jobs);
    let n = 0;
    for (const r of parts) if (r.type === 'chunked') n += r.lengths.length;
    const fps = new Uint8Array(n * FP_LEN);
    const lengths = new Uint32Array(n);
    let at = 0;
    for (const r of parts) {
      if (r.type !== 'chunked') throw new Error('unexpected worker reply');
      fps.set(r.fps, at * FP_LEN);
      lengths.set(r.lengths, at);
      at += r.lengths.length;
    }
    return { fps, lengths };
  }

  terminate() {
    for (const s of this.slots) {
      s.worker.terminate();
      for (const j of s.jobs.values()) j.reject(new Error('cancelled'));
    }
    for (const j of this.queue) j.reject(new Error('cancelled'));
    this.slots = [];
    this.queue = [];
  }

  /** Queues a job; `held` defaults to `bytes` (the job's reads hold all they read). */
  private run(job: Omit<Job, 'resolve' | 'reject' | 'held'> & { held?: number }): Promise<WorkerResponse> {
    return new Promise((resolve, reject) => {
      this.queue.push({ ...job, held: job.held ?? job.bytes, resolve, reject });
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
      const id = this.nextId++;
      slot.jobs.set(id, job);
      slot.bytes += job.bytes;
      slot.held += job.held;
      slot.worker.postMessage(job.request(id));
      job.onStart?.(slot.worker, id);
    }
  }

  private finish(slot: Slot, id: number): Job | undefined {
    const job = slot.jobs.get(id);
    if (job) {
      slot.jobs.delete(id);
      slot.bytes -= job.bytes;
      slot.held -= job.held;
    }
    return job;
  }

  private onMessage(slot: Slot, msg: WorkerResponse) {
    if (!('id' in msg)) return;
    const job = slot.jobs.get(msg.id);
    if (!job) return;
    switch (msg.type) {
      case 'progress':
        job.onProgress?.(msg.bytes);
        return;
      case 'segmentExit':
        job.onExit?.(msg.exit);
        return;
      case 'newChunks': {
        const credit = () => slot.worker.postMessage({ type: 'credit', id: msg.id } satisfies WorkerRequest);
        (job.onNewChunks?.(msg) ?? Promise.resolve()).then(credit, (e: unknown) => {
          this.finish(slot, msg.id);
          job.reject(e instanceof Error ? e : new Error(String(e)));
          // The worker is waiting for credit: let it go on; its replies are ignored.
          credit();
          this.pump();
        });
        return;
      }
      case 'failed':
        this.finish(slot, msg.id);
        job.reject(new Error(msg.message));
        break;
      default:
        this.finish(slot, msg.id);
        if (msg.type === 'chunked' || msg.type === 'batchChunked') this.predictedChunks += msg.predicted;
        job.resolve(msg);
    }
    this.pump();
  }

  private onCrash(slot: Slot, message: string) {
    const jobs = [...slot.jobs.values()];
    slot.jobs.clear();
    slot.bytes = slot.held = 0;
    for (const job of jobs) job.reject(new Error(`worker crashed: ${message}`));
    this.pump();
  }
}
