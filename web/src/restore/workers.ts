/** A small pool of restore workers sharing one compiled wasm-core module. */
import { compileCore } from '../wasm/loader';
import type { RestoreRequest, RestoreResponse } from './protocol';

export type Verified = Extract<RestoreResponse, { type: 'verified' }>;

/** A chunk that failed verification. */
export class DamagedChunkError extends Error {
  constructor(
    readonly fp: string,
    readonly reason: string,
  ) {
    super(`chunk ${fp} is damaged: ${reason}`);
  }
}

let modulePromise: Promise<WebAssembly.Module> | null = null;

interface Slot {
  worker: Worker;
  busy: number;
}

export class RestoreWorkers {
  private nextId = 1;
  private pending = new Map<number, { resolve: (v: Verified) => void; reject: (e: Error) => void }>();

  private constructor(private slots: Slot[]) {
    for (const s of slots) s.worker.onmessage = (e: MessageEvent<RestoreResponse>) => this.receive(s, e.data);
  }

  static async create(count = Math.max(1, Math.min(2, navigator.hardwareConcurrency || 1))): Promise<RestoreWorkers> {
    modulePromise ??= compileCore();
    const module = await modulePromise;
    const slots = await Promise.all(
      Array.from({ length: count }, async () => {
        const worker = new Worker(new URL('./restoreWorker.ts', import.meta.url), { type: 'module' });
        await new Promise<void>((resolve, reject) => {
          worker.onmessage = (e: MessageEvent<RestoreResponse>) => e.data.type === 'ready' && resolve();
          worker.onerror = (e) => reject(new Error(`restore worker failed to start: ${e.message}`));
          worker.postMessage({ type: 'init', module } satisfies RestoreRequest);
        });
        return { worker, busy: 0 };
      }),
    );
    return new RestoreWorkers(slots);
  }

  private receive(slot: Slot, msg: RestoreResponse) {
    if (msg.type === 'ready') return;
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    slot.busy--;
    if (msg.type === 'verified') p.resolve(msg);
    else if (msg.type === 'bad') p.reject(new DamagedChunkError(msg.fp, msg.reason));
    else p.reject(new Error(`the chunks could not be read: ${msg.message}`));
  }

  /** Decodes and verifies a bundle (its buffer is transferred). */
  verify(bundle: Uint8Array): Promise<Verified> {
    const slot = this.slots.reduce((a, b) => (b.busy < a.busy ? b : a));
    const id = this.nextId++;
    slot.busy++;
    return new Promise<Verified>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      slot.worker.postMessage({ type: 'verify', id, bundle } satisfies RestoreRequest, [bundle.buffer]);
    });
  }

  terminate() {
    for (const s of this.slots) s.worker.terminate();
    for (const p of this.pending.values()) p.reject(new Error('restore cancelled'));
    this.pending.clear();
  }
}
