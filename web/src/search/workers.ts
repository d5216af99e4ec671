/** The search workers: a small pool sharing one compiled wasm-core module, request/answer by id. */
import { compileCore } from '../wasm/loader';
import type { SearchRequest, SearchResponse } from './protocol';

let modulePromise: Promise<WebAssembly.Module> | null = null;

type Answer = Exclude<SearchResponse, { type: 'ready' } | { type: 'failed' }>;
/** `SearchRequest` without its id, which the pool assigns. */
type Ask = SearchRequest extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

export class SearchWorkers {
  private nextId = 1;
  private pending = new Map<number, { resolve: (v: Answer) => void; reject: (e: Error) => void }>();

  private constructor(private workers: Worker[]) {
    for (const w of workers) w.onmessage = (e: MessageEvent<SearchResponse>) => this.receive(e.data);
  }

  static async create(count = Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1))): Promise<SearchWorkers> {
    modulePromise ??= compileCore();
    const module = await modulePromise;
    const workers = await Promise.all(
      Array.from({ length: count }, async () => {
        const worker = new Worker(new URL('./searchWorker.ts', import.meta.url), { type: 'module' });
        await new Promise<void>((resolve, reject) => {
          worker.onmessage = (e: MessageEvent<SearchResponse>) => e.data.type === 'ready' && resolve();
          worker.onerror = (e) => reject(new Error(`search worker failed to start: ${e.message}`));
          worker.postMessage({ type: 'init', module } satisfies SearchRequest);
        });
        return worker;
      }),
    );
    return new SearchWorkers(workers);
  }

  get size() {
    return this.workers.length;
  }

  private receive(msg: SearchResponse) {
    if (msg.type === 'ready') return;
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.type === 'failed') p.reject(new Error(msg.message));
    else p.resolve(msg);
  }

  /** Sends `msg` to worker `w`; resolves with its answer of type `T`. */
  ask<T extends Answer['type']>(
    w: number,
    msg: Ask,
    transfer: Transferable[] = [],
  ): Promise<Extract<Answer, { type: T }>> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: Answer) => void, reject });
      this.workers[w].postMessage({ ...msg, id } as SearchRequest, transfer);
    });
  }

  terminate() {
    for (const w of this.workers) w.terminate();
    for (const p of this.pending.values()) p.reject(new Error('search cancelled'));
    this.pending.clear();
  }
}
