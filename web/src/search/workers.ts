/** The search workers: a small pool on the worker bridge, sharing the page's compiled wasm-core module. */
import { coreModule } from '../wasm/loader';
import { WorkerPool } from '../worker/bridge';
import type { SearchApi } from './protocol';

export type SearchWorkers = WorkerPool<SearchApi>;

export async function startSearchWorkers(
  count = Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1)),
): Promise<SearchWorkers> {
  return WorkerPool.start<SearchApi>({
    name: 'search',
    spawn: () => new Worker(new URL('./searchWorker.ts', import.meta.url), { type: 'module' }),
    size: count,
    init: await coreModule(),
  });
}
