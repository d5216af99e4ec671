/**
 * A pool of core workers sized to the machine, each with its own wasm-core instance.
 * Jobs go to the first idle worker; each job is one file.
 */
import type { WorkerRequest, WorkerResponse } from './protocol';

interface Job {
  file: File;
  onProgress?: (bytes: number) => void;
  resolve: (sha1: string) => void;
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

  hashFile(file: File, onProgress?: (bytes: number) => void): Promise<string> {
    return new Promise((resolve, reject) => {
      this.queue.push({ file, onProgress, resolve, reject });
      this.pump();
    });
  }

  terminate() {
    for (const s of this.slots) s.worker.terminate();
    for (const j of this.queue) j.reject(new Error('cancelled'));
    this.slots = [];
    this.queue = [];
  }

  private pump() {
    for (const slot of this.slots) {
      if (slot.job) continue;
      const job = this.queue.shift();
      if (!job) return;
      slot.job = { ...job, id: this.nextId++ };
      const req: WorkerRequest = { type: 'hashFile', id: slot.job.id, file: job.file };
      slot.worker.postMessage(req);
    }
  }

  private onMessage(slot: Slot, msg: WorkerResponse) {
    const job = slot.job;
    if (!job || !('id' in msg) || msg.id !== job.id) return;
    if (msg.type === 'progress') {
      job.onProgress?.(msg.bytes);
      return;
    }
    slot.job = undefined;
    if (msg.type === 'hashed') job.resolve(msg.sha1);
    else if (msg.type === 'failed') job.reject(new Error(msg.message));
    this.pump();
  }

  private onCrash(slot: Slot, message: string) {
    const job = slot.job;
    slot.job = undefined;
    job?.reject(new Error(`worker crashed: ${message}`));
    this.pump();
  }
}
