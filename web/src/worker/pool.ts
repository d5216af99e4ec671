/**
 * A pool of core workers sized to the machine, each with its own wasm-core instance.
 * Jobs (one file each) go to the first idle worker.
 */
import type { NewChunks, WorkerRequest, WorkerResponse } from './protocol';

export interface ChunkedFile {
  fps: Uint8Array;
  lengths: Uint32Array;
}

interface Job {
  request: (id: number) => WorkerRequest;
  onProgress?: (bytes: number) => void;
  /** New chunks of a chunk job; the worker reads on once the returned promise settles. */
  onNewChunks?: (chunks: NewChunks) => Promise<void>;
  resolve: (result: WorkerResponse) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  job?: Job & { id: number };
}

export class CorePool {
  private slots: Slot[] = [];
  private queue: Job[] = [];
  private nextId = 1;

  static async create(module: WebAssembly.Module, size = navigator.hardwareConcurrency || 2) {
    const pool = new CorePool();
    await Promise.all(
      Array.from({ length: Math.max(1, size) }, async () => {
        const worker = new Worker(new URL('./coreWorker.ts', import.meta.url), { type: 'module' });
        const slot: Slot = { worker };
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

  /** Tells every worker which fingerprints a backup job can skip (n*20 bytes). */
  setKnown(fps: Uint8Array, zstdLevel: number) {
    for (const s of this.slots) s.worker.postMessage({ type: 'setKnown', fps, zstdLevel } satisfies WorkerRequest);
  }

  async hashFile(file: File, onProgress?: (bytes: number) => void): Promise<string> {
    const r = await this.run({ request: (id) => ({ type: 'hashFile', id, file }), onProgress });
    if (r.type !== 'hashed') throw new Error('unexpected worker reply');
    return r.sha1;
  }

  async chunkFile(
    file: File,
    onNewChunks: (chunks: NewChunks) => Promise<void>,
    onProgress?: (bytes: number) => void,
  ): Promise<ChunkedFile> {
    const r = await this.run({ request: (id) => ({ type: 'chunkFile', id, file }), onNewChunks, onProgress });
    if (r.type !== 'chunked') throw new Error('unexpected worker reply');
    return { fps: r.fps, lengths: r.lengths };
  }

  terminate() {
    for (const s of this.slots) {
      s.worker.terminate();
      s.job?.reject(new Error('cancelled'));
    }
    for (const j of this.queue) j.reject(new Error('cancelled'));
    this.slots = [];
    this.queue = [];
  }

  private run(job: Omit<Job, 'resolve' | 'reject'>): Promise<WorkerResponse> {
    return new Promise((resolve, reject) => {
      this.queue.push({ ...job, resolve, reject });
      this.pump();
    });
  }

  private pump() {
    for (const slot of this.slots) {
      if (slot.job) continue;
      const job = this.queue.shift();
      if (!job) return;
      slot.job = { ...job, id: this.nextId++ };
      slot.worker.postMessage(job.request(slot.job.id));
    }
  }

  private onMessage(slot: Slot, msg: WorkerResponse) {
    const job = slot.job;
    if (!job || !('id' in msg) || msg.id !== job.id) return;
    switch (msg.type) {
      case 'progress':
        job.onProgress?.(msg.bytes);
        return;
      case 'newChunks': {
        const credit = () => slot.worker.postMessage({ type: 'credit', id: job.id } satisfies WorkerRequest);
        (job.onNewChunks?.(msg) ?? Promise.resolve()).then(credit, (e: unknown) => {
          slot.job = undefined;
          job.reject(e instanceof Error ? e : new Error(String(e)));
          // The worker is blocked waiting for credit: replace nothing, just let it go on and be ignored.
          credit();
        });
        return;
      }
      case 'failed':
        slot.job = undefined;
        job.reject(new Error(msg.message));
        break;
      default:
        slot.job = undefined;
        job.resolve(msg);
    }
    this.pump();
  }

  private onCrash(slot: Slot, message: string) {
    const job = slot.job;
    slot.job = undefined;
    job?.reject(new Error(`worker crashed: ${message}`));
    this.pump();
  }
}
