/**
 * The one bridge between the page and its worker pools (backup, restore, search).
 *
 * Modelled on the worker bridge of Squoosh (GoogleChromeLabs/squoosh), where each codec
 * worker exposes an object of methods and the page calls them as typed async functions:
 * the messaging (ids, answers, errors, transfer lists) is written once, and a worker is a
 * set of handlers. The code here is our own; it adds what our pools need on top:
 *
 * - **A protocol is a type.** `interface FooApi { bar: Method<Arg, Result, Event, Signal> }`
 *   is all both sides share: the worker implements `Handlers<FooApi>` (`expose`), the page
 *   calls `pool.call(w, 'bar', arg)` and gets `Promise<Result>`; a wrong method name, argument
 *   or answer is a type error, with no casts on either side.
 * - **Init handshake.** A worker is usable once it answers `init` (here: the compiled
 *   `WebAssembly.Module`, compiled once on the page by `coreModule()`, instantiated by each
 *   worker); a worker whose init fails or whose script does not load makes `WorkerPool.start`
 *   reject with the reason, and the workers already started are ended.
 * - **Requests matched to answers** by id, so answers may come in any order; an exception
 *   thrown by a handler rejects only its own request, as a `WorkerError` with the worker's
 *   message.
 * - **Transfer lists** both ways: `{ transfer }` on a call, `transfer(value, list)` from a
 *   handler, and on events.
 * - **Events and signals inside a request**, for long jobs: the worker `emit`s progress or
 *   partial results to the request's `onEvent`, and the page `signal`s the running request
 *   (backup's flow-control credits and segment entries).
 * - **A crashed worker** (an `error` event: an exception outside a handler, a script that
 *   fails, memory exhausted; or a message that cannot be deserialised, either way) rejects
 *   every request it held with a `WorkerError` naming it, and is replaced by a fresh worker
 *   from the same module; requests sent while the replacement starts wait for it, and
 *   `onRestart` lets the pool give it back the state the old one had.
 */

/** A method of a worker protocol: its argument, its answer, what it emits and what it is signalled. */
export interface Method<A, R, E = never, S = never> {
  arg: A;
  result: R;
  event: E;
  signal: S;
}

/** The shape every protocol has (an interface of `Method`s). */
type Protocol<T> = { [K in keyof T]: Method<unknown, unknown, unknown, unknown> };

/** What a handler may answer: the value, or the value with buffers to transfer. */
export type Reply<R> = R | Transferred<R>;

/** A handler's answer with its transfer list (made by `transfer`). */
export class Transferred<R> {
  constructor(
    readonly value: R,
    readonly list: Transferable[],
  ) {}
}

/** Answers `value`, moving `list` (its buffers) to the page instead of copying them. */
export function transfer<R>(value: R, list: Transferable[]): Transferred<R> {
  return new Transferred(value, list);
}

/** What a handler can do besides answering. */
export interface Context<E, S> {
  /** Sends an event to the request's `onEvent` on the page. */
  emit(event: E, transfer?: Transferable[]): void;
  /** Receives the page's signals to this request (those that came before are delivered at once). */
  onSignal(listener: (signal: S) => void): void;
}

/** The worker side of a protocol. */
export type Handlers<T extends Protocol<T>> = {
  [K in keyof T]: (
    arg: T[K]['arg'],
    ctx: Context<T[K]['event'], T[K]['signal']>,
  ) => Reply<T[K]['result']> | Promise<Reply<T[K]['result']>>;
};

/** Messages of the bridge itself (each side sees only the other's). */
type ToWorker =
  | { bridge: 'init'; data: unknown }
  | { bridge: 'call'; id: number; method: string; arg: unknown }
  | { bridge: 'signal'; id: number; data: unknown };
type FromWorker =
  | { bridge: 'ready' }
  | { bridge: 'initFailed'; message: string }
  | { bridge: 'answer'; id: number; value: unknown }
  | { bridge: 'error'; id: number; name: string; message: string }
  | { bridge: 'event'; id: number; data: unknown }
  | { bridge: 'crash'; message: string };

/** The worker's global scope as `expose` uses it (a fake one in tests). */
export interface WorkerScope {
  postMessage(message: unknown, transfer: Transferable[]): void;
  onmessage: ((event: MessageEvent) => unknown) | null;
  onmessageerror: ((event: MessageEvent) => unknown) | null;
}

/** A worker as the page uses it (`Worker`, or a fake one in tests). */
export interface WorkerLike {
  postMessage(message: unknown, transfer: Transferable[]): void;
  onmessage: ((event: MessageEvent) => unknown) | null;
  onmessageerror: ((event: MessageEvent) => unknown) | null;
  onerror: ((event: ErrorEvent) => unknown) | null;
  terminate(): void;
}

function describe(e: unknown): { name: string; message: string } {
  return e instanceof Error ? { name: e.name, message: e.message } : { name: 'Error', message: String(e) };
}

/**
 * Serves `handlers` in this worker. `init` runs once, on the page's init message, before
 * any call is served (calls wait for it).
 */
export function expose<T extends Protocol<T>>(
  handlers: Handlers<T>,
  init: (data: unknown) => void | Promise<void>,
  scope: WorkerScope = globalThis as unknown as WorkerScope,
) {
  const post = (msg: FromWorker, list: Transferable[] = []) => scope.postMessage(msg, list);
  let ready: Promise<void> = new Promise(() => {});
  /** Signal listeners of the running requests, and signals that came before their listener. */
  const running = new Map<number, { listener?: (s: unknown) => void; early: unknown[] }>();

  async function serve(id: number, method: string, arg: unknown) {
    const entry: { listener?: (s: unknown) => void; early: unknown[] } = { early: [] };
    running.set(id, entry);
    const ctx: Context<unknown, unknown> = {
      emit: (data, list = []) => post({ bridge: 'event', id, data }, list),
      onSignal: (listener) => {
        entry.listener = listener;
        for (const s of entry.early.splice(0)) listener(s);
      },
    };
    try {
      await ready;
      if (!Object.hasOwn(handlers, method)) throw new Error(`no method ${method} in this worker`);
      const handler = handlers[method as keyof T] as (a: unknown, c: Context<unknown, unknown>) => unknown;
      const reply = (await handler(arg, ctx)) as Reply<unknown>;
      if (reply instanceof Transferred) post({ bridge: 'answer', id, value: reply.value }, reply.list);
      else post({ bridge: 'answer', id, value: reply });
    } catch (e) {
      post({ bridge: 'error', id, ...describe(e) });
    } finally {
      running.delete(id);
    }
  }

  scope.onmessage = (event: MessageEvent) => {
    const msg = event.data as ToWorker;
    switch (msg.bridge) {
      case 'init':
        ready = Promise.resolve().then(() => init(msg.data));
        ready.then(
          () => post({ bridge: 'ready' }),
          (e: unknown) => post({ bridge: 'initFailed', message: describe(e).message }),
        );
        return;
      case 'call':
        void serve(msg.id, msg.method, msg.arg);
        return;
      case 'signal': {
        const entry = running.get(msg.id);
        if (!entry) return;
        if (entry.listener) entry.listener(msg.data);
        else entry.early.push(msg.data);
      }
    }
  };
  // A message that cannot be deserialised cannot be answered: the page treats it as a crash.
  scope.onmessageerror = () => post({ bridge: 'crash', message: 'a message to the worker could not be read' });
}

/** A request failed in a worker: its handler threw, or the worker crashed or was ended. */
export class WorkerError extends Error {
  constructor(
    message: string,
    /** The `name` of the error the worker threw (`Error` when it crashed). */
    readonly remoteName = 'Error',
    /**
     * The worker crashed while it held the request (and is being replaced): the request may
     * not have run at all, and whatever the worker kept between requests is gone.
     */
    readonly crashed = false,
    /** The message of the error the worker threw, without its name. */
    readonly remoteMessage = message,
  ) {
    super(message);
    this.name = 'WorkerError';
  }
}

export interface CallOptions<M extends Method<unknown, unknown, unknown, unknown>> {
  transfer?: Transferable[];
  onEvent?: (event: M['event']) => void;
}

/** A request on its way: its answer (`R`), and the way to signal it (`S`) while it runs. */
export interface Request<R, S> {
  answer: Promise<R>;
  signal(data: S, transfer?: Transferable[]): void;
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  onEvent?: (e: unknown) => void;
}

interface Slot {
  /** null while a replacement starts. */
  worker: WorkerLike | null;
  pending: Map<number, Pending>;
  /** Messages sent while the worker is replaced, posted in order once it is ready. */
  backlog: { msg: ToWorker; list: Transferable[] }[];
  /** A replacement is starting. */
  starting: boolean;
}

export interface PoolOptions {
  /** Names the pool in errors ("search worker crashed: ..."). */
  name: string;
  /** Starts one worker (`new Worker(new URL(..., import.meta.url), { type: 'module' })`). */
  spawn: () => WorkerLike;
  size: number;
  /** What every worker's init receives (here the compiled wasm-core module). */
  init: unknown;
  /** Called when a crashed worker's replacement is ready, before anything waiting is sent to it. */
  onRestart?: (w: number) => void;
}

/** Starts `spawn()` and waits for its init answer. */
function startWorker(spawn: () => WorkerLike, init: unknown, name: string): Promise<WorkerLike> {
  return new Promise((resolve, reject) => {
    let worker: WorkerLike;
    try {
      worker = spawn();
    } catch (e) {
      reject(new WorkerError(`${name} worker could not be created: ${describe(e).message}`));
      return;
    }
    const fail = (message: string) => {
      worker.terminate();
      reject(new WorkerError(`${name} worker failed to start: ${message}`));
    };
    worker.onmessage = (e: MessageEvent) => {
      const msg = e.data as FromWorker;
      if (msg.bridge === 'ready') resolve(worker);
      else if (msg.bridge === 'initFailed') fail(msg.message);
    };
    worker.onerror = (e: ErrorEvent) => fail(e.message || 'its script did not load');
    worker.onmessageerror = () => fail('its answer could not be read');
    const msg: ToWorker = { bridge: 'init', data: init };
    worker.postMessage(msg, []);
  });
}

/** A fixed number of workers serving protocol `T`, each replaced if it crashes. */
export class WorkerPool<T extends Protocol<T>> {
  private slots: Slot[] = [];
  private nextId = 1;
  private ended = false;
  private stop = new AbortController();

  /**
   * Aborted when the pool is terminated: the page's own work for the pool's requests (a
   * fetch the workers' results wait for) stops with them.
   */
  get signal(): AbortSignal {
    return this.stop.signal;
  }

  private constructor(private opts: PoolOptions) {}

  static async start<T extends Protocol<T>>(opts: PoolOptions): Promise<WorkerPool<T>> {
    const pool = new WorkerPool<T>(opts);
    pool.slots = Array.from({ length: Math.max(1, opts.size) }, () => ({
      worker: null,
      pending: new Map(),
      backlog: [],
      starting: true,
    }));
    // Each worker is watched from the moment it is ready: one that dies while the others
    // start is replaced like any crashed worker.
    const started = await Promise.allSettled(
      pool.slots.map((slot) =>
        startWorker(opts.spawn, opts.init, opts.name).then((worker) => {
          slot.starting = false;
          pool.attach(slot, worker);
        }),
      ),
    );
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) {
      pool.terminate();
      throw failed.reason;
    }
    return pool;
  }

  get size() {
    return this.slots.length;
  }

  /** Requests not answered yet by worker `w`. */
  load(w: number) {
    return this.slots[w].pending.size;
  }

  /** The worker with the fewest requests outstanding. */
  leastLoaded() {
    let best = 0;
    for (let w = 1; w < this.slots.length; w++) if (this.load(w) < this.load(best)) best = w;
    return best;
  }

  /** Sends a request to worker `w`. */
  request<K extends keyof T & string>(
    w: number,
    method: K,
    arg: T[K]['arg'],
    opts: CallOptions<T[K]> = {},
  ): Request<T[K]['result'], T[K]['signal']> {
    const slot = this.slots[w];
    const id = this.nextId++;
    const answer = new Promise<T[K]['result']>((resolve, reject) => {
      if (this.ended || !slot) {
        reject(new WorkerError(`${this.opts.name} workers were ended`));
        return;
      }
      slot.pending.set(id, { resolve, reject, onEvent: opts.onEvent as ((e: unknown) => void) | undefined });
      this.send(slot, { bridge: 'call', id, method, arg }, opts.transfer ?? []);
    });
    return {
      answer,
      signal: (data, list = []) => {
        if (slot?.pending.has(id)) this.send(slot, { bridge: 'signal', id, data }, list);
      },
    };
  }

  /** Calls `method` on worker `w` and resolves with its answer. */
  call<K extends keyof T & string>(w: number, method: K, arg: T[K]['arg'], opts?: CallOptions<T[K]>) {
    return this.request(w, method, arg, opts).answer;
  }

  /** Ends every worker; what they held is rejected with `reason`. */
  terminate(reason = 'cancelled') {
    this.ended = true;
    this.stop.abort(new DOMException(reason, 'AbortError'));
    for (const slot of this.slots) {
      slot.worker?.terminate();
      slot.worker = null;
      this.rejectAll(slot, reason);
    }
  }

  private send(slot: Slot, msg: ToWorker, list: Transferable[]) {
    if (slot.worker) {
      slot.worker.postMessage(msg, list);
      return;
    }
    slot.backlog.push({ msg, list });
    this.restart(slot);
  }

  private rejectAll(slot: Slot, message: string, crashed = false) {
    const held = [...slot.pending.values()];
    slot.pending.clear();
    slot.backlog = [];
    for (const p of held) p.reject(new WorkerError(message, 'Error', crashed));
  }

  private attach(slot: Slot, worker: WorkerLike) {
    slot.worker = worker;
    worker.onmessage = (e: MessageEvent) => this.receive(slot, e.data as FromWorker);
    worker.onerror = (e: ErrorEvent) => this.crashed(slot, worker, e.message || 'unknown error');
    worker.onmessageerror = () => this.crashed(slot, worker, 'a message from it could not be read');
  }

  private receive(slot: Slot, msg: FromWorker) {
    switch (msg.bridge) {
      case 'answer':
      case 'error': {
        const p = slot.pending.get(msg.id);
        if (!p) return;
        slot.pending.delete(msg.id);
        if (msg.bridge === 'answer') p.resolve(msg.value);
        // The error's name stays in the message: callers tell NotFoundError etc. apart by it.
        else
          p.reject(
            new WorkerError(
              msg.name === 'Error' ? msg.message : `${msg.name}: ${msg.message}`,
              msg.name,
              false,
              msg.message,
            ),
          );
        return;
      }
      case 'event':
        slot.pending.get(msg.id)?.onEvent?.(msg.data);
        return;
      case 'crash':
        if (slot.worker) this.crashed(slot, slot.worker, msg.message);
    }
  }

  /** Rejects what `worker` held and puts a fresh worker in its slot. */
  private crashed(slot: Slot, worker: WorkerLike, message: string) {
    if (slot.worker !== worker) return;
    worker.terminate();
    slot.worker = null;
    this.rejectAll(slot, `${this.opts.name} worker crashed: ${message}`, true);
    this.restart(slot);
  }

  private restart(slot: Slot) {
    if (this.ended || slot.starting) return;
    slot.starting = true;
    startWorker(this.opts.spawn, this.opts.init, this.opts.name).then(
      (fresh) => {
        slot.starting = false;
        if (this.ended) {
          fresh.terminate();
          return;
        }
        this.attach(slot, fresh);
        this.opts.onRestart?.(this.slots.indexOf(slot));
        for (const { msg, list } of slot.backlog.splice(0)) fresh.postMessage(msg, list);
      },
      (e: unknown) => {
        // No replacement: what waited for it fails, and the next request tries again.
        slot.starting = false;
        this.rejectAll(slot, describe(e).message);
      },
    );
  }
}
