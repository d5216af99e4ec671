/** The search workers: a small pool on the worker bridge, sharing the page's compiled wasm-core module. */
import { coreModule } from '../wasm/loader';
import { WorkerPool } from '../worker/bridge';
import { runWhenQuiet } from '../worker/heavyWork';
import type { SearchApi } from './protocol';
import { forgetWorker } from './search';

export type SearchWorkers = WorkerPool<SearchApi>;

/** A pool started ahead of the Search tab ([`prestartSearchWorkers`]), for the next one to open. */
let spare: Promise<SearchWorkers> | null = null;

/** Whether a pool has run the first search's warm-up in this page (`warmUpFirstSearch`). */
let firstSearchWarmedUp = false;
/** How long the first search's warm-up waits for the page to settle (after its pool starts, after a restore or backup). */
const FIRST_SEARCH_WARM_UP_DELAY_MS = 2000;

/** Whether the page's token may search: only then are idle workers kept. */
let wanted = false;

/**
 * Says whether the page's token may search: idle workers are started when it may
 * ([`prestartSearchWorkers`]) and terminated when it no longer may (a token without search
 * rights replaced it), so that such a page holds no search workers.
 */
export function wantSearchWorkers(want: boolean): void {
  wanted = want;
  if (want) {
    prestartSearchWorkers();
    return;
  }
  const idle = spare;
  spare = null;
  void idle?.then((pool) => pool.terminate('search not allowed')).catch(() => {});
}

/**
 * Starts a pool for the Search tab to take when it opens ([`takeSearchWorkers`]), so that
 * reading the workers' device caches starts at once there instead of after the workers'
 * start. Idle workers hold nothing but the instantiated module.
 */
export function prestartSearchWorkers(): void {
  if (spare || !wanted) return;
  const started = startSearchWorkers();
  spare = started;
  started.catch(() => {
    if (spare === started) spare = null; // the tab starts its own
  });
}

/** The pool [`prestartSearchWorkers`] started, or a new one. */
export function takeSearchWorkers(): Promise<SearchWorkers> {
  const pool = spare ?? startSearchWorkers();
  spare = null;
  return pool;
}

export async function startSearchWorkers(
  count = Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1)),
): Promise<SearchWorkers> {
  let started: SearchWorkers | undefined;
  const pool = await WorkerPool.start<SearchApi>({
    name: 'search',
    spawn: () => new Worker(new URL('./searchWorker.ts', import.meta.url), { type: 'module' }),
    size: count,
    init: await coreModule(),
    onRestart: (w) => started && forgetWorker(started, w),
  });
  started = pool;
  // One worker runs a first search's code until it is optimised, once per page (the module,
  // and so its optimised code, is shared by every pool), once the page has settled and no
  // restore or backup runs: the browser's compiling takes both cores for a while, which a
  // search, a restore, a backup or the page's own start should not share. A search stops
  // it, and one that ran leaves nothing to do; a restore or a backup stops it, and it runs
  // again after them.
  if (!firstSearchWarmedUp) {
    firstSearchWarmedUp = true;
    const warmUp = async (stop: AbortSignal) => {
      const run = pool.request(0, 'warmUpFirstSearch', null);
      const onStop = () => run.signal('stop');
      stop.addEventListener('abort', onStop);
      try {
        await run.answer;
      } finally {
        stop.removeEventListener('abort', onStop);
      }
      return !stop.aborted;
    };
    // A pool ended before (the tab closed) leaves it to the next pool.
    runWhenQuiet(warmUp, FIRST_SEARCH_WARM_UP_DELAY_MS).catch(() => (firstSearchWarmedUp = false));
  }
  return pool;
}
