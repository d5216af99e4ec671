/**
 * The restore's workers, on the worker bridge: the restore workers (a small pool verifying
 * chunks) and the assembler (one worker writing the output), both started on the first
 * restore and kept warm for the next ones (starting workers and instantiating the engine
 * costs every restore otherwise).
 */
import { coreModule } from '../wasm/loader';
import { WorkerError, WorkerPool } from '../worker/bridge';
import type { AssembleApi, RestoreApi, Verified } from './protocol';

export type { Verified } from './protocol';

/** A chunk that failed verification. */
export class DamagedChunkError extends Error {
  constructor(
    readonly fp: string,
    readonly reason: string,
  ) {
    super(`chunk ${fp} is damaged: ${reason}`);
  }
}

/** The worker verifying a request crashed: it is replaced, without what its session held. */
export class RestoreWorkerCrash extends Error {}

/** How many restore workers the page runs (a restore plans its requests for that many). */
export function restoreWorkerCount(): number {
  return Math.max(1, Math.min(2, navigator.hardwareConcurrency || 1));
}

/** Whether a pool has run the restore's warm-up in this page. */
let warmedUp = false;

export class RestoreWorkers {
  private constructor(private pool: WorkerPool<RestoreApi>) {}

  static async create(count = restoreWorkerCount()): Promise<RestoreWorkers> {
    const pool = await WorkerPool.start<RestoreApi>({
      name: 'restore',
      spawn: () => new Worker(new URL('./restoreWorker.ts', import.meta.url), { type: 'module' }),
      size: count,
      init: await coreModule(),
    });
    // Once per page (the compiled module, and so its optimised code, serves every pool), on
    // the last worker: a restore's first answer goes to the first.
    if (!warmedUp) {
      warmedUp = true;
      pool.call(pool.size - 1, 'warmUp', null).catch(() => (warmedUp = false));
    }
    return new RestoreWorkers(pool);
  }

  /** How many workers the pool has (a restore spreads its requests over them). */
  get size(): number {
    return this.pool.size;
  }

  /**
   * Decodes and verifies a bundle (its buffer is transferred) on worker `worker`, in the
   * session of restore `restore`: its first `requested` chunks are answered, the rest are
   * base chains their deltas need. A restore sends each request to a fixed worker, whose
   * session holds what that worker's earlier answers carried (`kept`). `zip`: the answer
   * carries each chunk's deflate fragment instead of its raw bytes.
   */
  async verify(bundle: Uint8Array, requested: number, worker: number, restore: number, zip = false): Promise<Verified> {
    let r;
    try {
      r = await this.pool.call(worker, 'verify', { bundle, requested, restore, zip }, { transfer: [bundle.buffer] });
    } catch (e) {
      if (!(e instanceof WorkerError)) throw e;
      const message = `the chunks could not be read: ${e.message}`;
      throw e.crashed ? new RestoreWorkerCrash(message) : new Error(message);
    }
    if (r.type === 'bad') throw new DamagedChunkError(r.fp, r.reason);
    return r;
  }

  /** Restore `restore` is over: every worker lets its session go. */
  endRestore(restore: number) {
    for (let w = 0; w < this.pool.size; w++) this.pool.call(w, 'endRestore', restore).catch(() => {});
  }

  /** The fingerprints (20 bytes each) of `file` as the backup would cut it. */
  async fingerprintFile(file: File): Promise<Uint8Array> {
    return this.pool.call(this.pool.leastLoaded(), 'fingerprintFile', file);
  }

  terminate() {
    this.pool.terminate('restore cancelled');
  }
}

let shared: Promise<RestoreWorkers> | null = null;

/** The page's restore workers, started on first use and kept for every later restore. */
export function restoreWorkers(): Promise<RestoreWorkers> {
  shared ??= RestoreWorkers.create().catch((e: unknown) => {
    shared = null;
    throw e;
  });
  return shared;
}

let assembling: Promise<WorkerPool<AssembleApi>> | null = null;

/**
 * The page's assembler worker (assembleWorker.ts), started on first use and kept. It needs no
 * Wasm: it orders, copies and frames bytes the restore workers verified.
 */
export function assembler(): Promise<WorkerPool<AssembleApi>> {
  assembling ??= WorkerPool.start<AssembleApi>({
    name: 'assembler',
    spawn: () => new Worker(new URL('./assembleWorker.ts', import.meta.url), { type: 'module' }),
    size: 1,
    init: null,
  }).catch((e: unknown) => {
    assembling = null;
    throw e;
  });
  return assembling;
}

/**
 * Starts the restore workers and the assembler now, where a restore is likely to follow, so
 * that its click does not wait for them. A failure is seen where a restore awaits them.
 */
export function warmRestore(): void {
  restoreWorkers().catch(() => {});
  assembler().catch(() => {});
}
