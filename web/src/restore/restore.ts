/**
 * Restore: a version (or a folder of it, or one file) back out of the repository, verified
 * chunk by chunk and streamed into a zip, a plain file or a folder as it is assembled.
 *
 * Threads: the page plans, fetches (`ChunkFetcher`) and hands each answer to a restore worker
 * to verify (workers.ts), then the verified chunks, transferred, to the assembler worker
 * (assemble.ts), which writes the output: into a block port (port.ts) that a streamed
 * download's worker or the page reads, or into the folder. The page's thread handles no
 * restored byte unless it reads the output itself (a picked file, a Blob, a preview).
 *
 * Memory: at most two plan windows (the one being written and the one being fetched) plus the
 * restore cache are held, i.e. 2 x windowBytes + 2 x cacheBytes of raw chunks (~96 MiB by
 * default; the cache may pin request buffers up to twice what it keeps, assemble.ts), and a
 * few output blocks in flight (blocks.ts, port.ts), whatever the size of the
 * version. Every sink takes the output with backpressure; a Blob holds it all (see sink.ts
 * for its size gate).
 */
import type { Api, Manifest, ManifestEntry } from '../api/client';
import { ApiError } from '../api/client';
import { isTransient, pause } from '../api/retry';
import { decodeBundle } from '../backup/bundle';
import { FP_LEN, fpHex, fpHexes } from '../backup/hex';
import { WorkerError, type Request } from '../worker/bridge';
import { assemblePlan } from './assemble';
import {
  DEFAULT_PLAN,
  PlanError,
  planRestore,
  type ChunkLoc,
  type FetchRequest,
  type PlanOptions,
  type RestorePlan,
} from './plan';
import type { FolderTarget } from './folder';
import { decodeLocations, versionLocations } from './locations';
import { portReader } from './port';
import type { AssembleSignal } from './protocol';
import { sanitizeEntryName, UniqueNames } from './sanitize';
import { pageCore } from '../wasm/page';
import {
  assembler,
  DamagedChunkError,
  RestoreWorkerCrash,
  restoreWorkerCount,
  restoreWorkers,
  type RestoreWorkers,
  type Verified,
} from './workers';
import { beginHeavyWork } from '../worker/heavyWork';

export interface RestoreItem {
  /** The name in the archive (sanitised, unique). */
  name: string;
  /** The path in the manifest (for messages). */
  path: string;
  kind: 'file' | 'dir';
  size: number;
  mtime: number;
  recipe: readonly string[];
}

export interface RestoreProgress {
  phase: 'planning' | 'restoring' | 'done' | 'failed' | 'cancelled';
  bytesDone: number;
  bytesTotal: number;
  filesDone: number;
  filesTotal: number;
  requestsDone: number;
  requestsTotal: number;
  containersRead: number;
  containersMin: number;
  /** Bytes of the `chunks/get` answers (what crossed the link). */
  bytesFetched: number;
  elapsedMs: number;
  /** Raw bytes restored per second (MB/s, decimal). */
  mbps: number;
  message?: string;
}

export class RestoreError extends Error {}

/** What a restore writes, and how many entries it leaves out (shown with its result). */
export interface RestoreSelection {
  items: RestoreItem[];
  /** Symlinks, and files whose names sanitise to nothing. */
  skipped: number;
}

/**
 * The items of a version under `folder` ('' = all), with safe unique names, in manifest order.
 * Symlinks are left out (a zip written here has no portable way to carry them).
 */
export function selectItems(manifest: Manifest, folder = ''): RestoreSelection {
  const names = new UniqueNames();
  const items: RestoreItem[] = [];
  let skipped = 0;
  for (const e of manifest.entries as ManifestEntry[]) {
    if (folder && !e.path.startsWith(folder + '/')) continue;
    if (e.kind === 'symlink') {
      skipped++;
      continue;
    }
    const safe = sanitizeEntryName(e.path, folder);
    if (!safe) {
      if (e.kind === 'file') skipped++;
      continue;
    }
    const name = names.claim(safe);
    items.push({ name, path: e.path, kind: e.kind, size: e.size, mtime: e.mtime, recipe: e.recipe ?? [] });
  }
  return { items, skipped };
}

/** A chunk's place in its container, with the codec it is stored in (search decodes it itself). */
export interface StoredChunkLoc extends ChunkLoc {
  codec: number;
}

/** Where every chunk of the repository lives (GET containers with chunk tables). */
export async function chunkLocations(api: Api): Promise<Map<string, StoredChunkLoc>> {
  const res = await api.json<{
    containers: {
      id: number;
      chunks: { fp: string; codec: number; offset: number; stored_len: number; raw_len: number; chain_key?: number }[];
    }[];
  }>(`/repos/${encodeURIComponent(api.repo)}/containers`);
  const locs = new Map<string, StoredChunkLoc>();
  for (const c of res.containers)
    for (const ch of c.chunks)
      if (!locs.has(ch.fp))
        locs.set(ch.fp, {
          container: c.id,
          offset: ch.offset,
          storedLen: ch.stored_len,
          codec: ch.codec,
          rawLen: ch.raw_len,
          chainKey: ch.chain_key,
        });
  return locs;
}

/** Restores started in this page (each names its sessions in the restore workers). */
let restoresStarted = 0;

/** Most fingerprints a request lists as held (`have`; the server's limit, docs/API.md). */
const MAX_HAVE = 16_384;
/**
 * Stored bytes a restore worker's session keeps at most (`RestoreSession::HELD_BYTES`,
 * wasm-core/src/restore.rs; forecast.test.ts holds the forecast to the real session's keeps).
 */
const SESSION_HELD_BYTES = 16 << 20;

/**
 * What a restore worker's session will hold once it has verified the answers handed to it,
 * worked out from each answer as it arrives by the session's own rule (wasm-core/src/restore.rs:
 * the entries of an answer it does not hold yet are kept, all of them, or none beyond
 * SESSION_HELD_BYTES). It lets a worker's next request go while the worker verifies the last
 * answer, naming in `have` the links that answer brings. An answer kept otherwise than foreseen
 * (refused as damaged and asked again checked, a worker replaced) ends the forecast: the
 * worker's requests then wait for their answers to be verified and name what those kept.
 */
export class SessionForecast {
  private fps = new Set<string>();
  private bytes = 0;
  /** The chain links the session will hold (kept, and not asked for by the request that brought them). */
  readonly links = new Set<string>();
  exact = true;

  /** Takes an answer (`asked` its requested fingerprints) as the session will; answers what it keeps. */
  add(bundle: Uint8Array, asked: readonly string[]): Set<string> {
    const fresh = new Map<string, number>();
    for (const e of decodeBundle(bundle)) {
      const fp = fpHex(e.fp);
      if (!this.fps.has(fp) && !fresh.has(fp)) fresh.set(fp, e.stored.byteLength);
    }
    let bytes = 0;
    for (const n of fresh.values()) bytes += n;
    if (this.bytes + bytes > SESSION_HELD_BYTES) return new Set();
    this.bytes += bytes;
    const wanted = new Set(asked);
    for (const fp of fresh.keys()) {
      this.fps.add(fp);
      if (!wanted.has(fp)) this.links.add(fp);
    }
    return new Set(fresh.keys());
  }
}

/** Tries of one `chunks/get` that fails for a reason worth retrying (`isTransient`). */
const FETCH_ATTEMPTS = 4;
const FETCH_RETRY_MS = 250;

/**
 * Fetches the chunks of a plan and has them verified, request by request in plan order, for
 * the window the assembler is writing and the next one. Each worker has one request on the
 * wire at a time, sent while it verifies its last answer: the request names in `have` the
 * chain links the worker's session holds or will hold once that answer is verified
 * ([`SessionForecast`]), so no link comes twice and fetching overlaps verifying. Each
 * verified answer goes to `deliver`.
 */
export class ChunkFetcher {
  /** The window the assembler is writing (it starts with the first). */
  private window = 0;
  private nextWindow = 0;
  private nextRequest = 0;
  /** Requests of the windows allowed so far, not started yet, in plan order. */
  private waiting: { w: number; r: FetchRequest }[] = [];
  /** Per worker, whether one of its requests is on the wire. */
  private fetching: boolean[];
  /** Per worker, its requests started and not yet verified. */
  private open: number[];
  private stopped = false;
  /** Names this restore's sessions in the workers. */
  private readonly restoreId = ++restoresStarted;
  /**
   * Per worker, the chain links its session holds (what its verified answers carried beside
   * the chunks asked for), which its requests list in `have` once its forecast has ended. The
   * chunks asked for are held too, but few of them are a later chunk's base: listing them as
   * well would grow every request's body with each answer and spare few answer bytes
   * (docs/BENCHMARKS.md, "What the requests carry").
   */
  private held: Set<string>[];
  private forecast: SessionForecast[];

  constructor(
    private api: Api,
    private plan: RestorePlan,
    private workers: RestoreWorkers,
    private items: RestoreItem[],
    private signal: AbortSignal,
    private deliver: (window: number, fps: string[], v: Verified) => void,
    private onRequest: (containers: number, bytes: number) => void,
    private onError: (e: unknown) => void,
    /** The pause before a failed request's first retry (doubled for each next one). */
    private retryMs = FETCH_RETRY_MS,
    /** The chunks go into a zip: each answered as its deflate fragment. */
    private zip = false,
  ) {
    this.held = Array.from({ length: workers.size }, () => new Set<string>());
    this.forecast = this.held.map(() => new SessionForecast());
    this.fetching = this.held.map(() => false);
    this.open = this.held.map(() => 0);
  }

  /** The manifest path of the first restored file that references `fp`. */
  private fileOf(fp: string): string {
    const files = this.items.filter((i) => i.kind === 'file');
    for (let k = 0; k < this.plan.files.length; k++) {
      const f = this.plan.files[k];
      for (let i = f.refStart; i < f.refEnd; i++) if (this.plan.refs[i] === fp) return files[k].path;
    }
    return '(unknown file)';
  }

  private filesOf(fps: string[]): string {
    const names = [...new Set(fps.slice(0, 50).map((f) => this.fileOf(f)))];
    return (
      names
        .slice(0, 3)
        .map((n) => `"${n}"`)
        .join(', ') + (names.length > 3 ? ' and others' : '')
    );
  }

  /**
   * A request's chunks as the repository stores them: delta chunks with their base chains,
   * sent as read (`checked: false`; the worker decodes and checks every chunk), or, when
   * `checked`, decoded and checked by the server first.
   */
  private async fetchBundle(fps: string[], checked: boolean, have: string[]): Promise<Uint8Array> {
    for (let attempt = 1; ; attempt++) {
      try {
        return checked
          ? await this.api.getChunks(fps, this.signal)
          : await this.api.getChunks(fps, this.signal, false, 'stored', { have, unchecked: true });
      } catch (e) {
        // A checked read refuses a damaged chunk (and the server quarantines it, so the next
        // backup of the file uploads it again).
        if (e instanceof ApiError && e.code === 'damaged' && Array.isArray(e.body.damaged) && e.body.damaged.length) {
          const fp = String(e.body.damaged[0]);
          throw new RestoreError(
            `"${this.fileOf(fp)}" is damaged in the repository: chunk ${fp} failed the server's verification (${e.message}). The restore stopped.`,
          );
        }
        if (e instanceof ApiError && Array.isArray(e.body.missing) && e.body.missing.length)
          throw new RestoreError(
            `${this.filesOf(e.body.missing as string[])} cannot be restored: the server lacks ${e.body.missing.length} of its chunks.`,
          );
        // The network, or the server briefly unable (an answer cut off midway fails the
        // same way): the same request again, after a pause.
        if (isTransient(e) && attempt < FETCH_ATTEMPTS && !this.stopped && !this.signal.aborted) {
          await pause(this.retryMs * 2 ** (attempt - 1), this.signal);
          continue;
        }
        if (!(e instanceof ApiError) && attempt === 1) throw e;
        const tries = attempt > 1 ? ` (${attempt} tries)` : '';
        const why = e instanceof Error ? e.message : String(e);
        throw new RestoreError(`Reading chunks of ${this.filesOf(fps)} failed${tries}: ${why}`);
      }
    }
  }

  /** The restore is over: nothing more is fetched, and the workers let go of what they kept for it. */
  close() {
    this.stopped = true;
    this.workers.endRestore(this.restoreId);
  }

  /**
   * Fetches one request's chunks and has `worker` verify them; answers them and the bytes
   * fetched. `arrived` runs once the answer is here (or the request failed): the worker's
   * next request may go.
   */
  private async fetchRequest(
    fps: string[],
    worker: number,
    arrived: () => void,
  ): Promise<{ v: Verified; fetched: number }> {
    /** The verified answer, and what the forecast said the session keeps of it (null: nothing said). */
    let r: { v: Verified; foreseen: Set<string> | null };
    let fetched = 0;
    const forecast = this.forecast[worker];
    const fetch = async (checked: boolean) => {
      // The links this worker's session holds, or will by the time it reads this answer,
      // need not come again for another chunk.
      const have = [...(forecast.exact ? forecast.links : this.held[worker])].slice(0, MAX_HAVE);
      const bundle = await this.fetchBundle(fps, checked, have);
      fetched += bundle.byteLength;
      return bundle;
    };
    const verify = (bundle: Uint8Array) => this.workers.verify(bundle, fps.length, worker, this.restoreId, this.zip);
    const attempt = async (): Promise<typeof r> => {
      let bundle;
      let foreseen: Set<string> | null = null;
      try {
        bundle = await fetch(false);
        try {
          if (forecast.exact) foreseen = forecast.add(bundle, fps);
        } catch {
          // Not a bundle: the worker says why.
          forecast.exact = false;
        }
      } finally {
        // Only now: the next request's `have` names what this answer brings.
        arrived();
      }
      try {
        return { v: await verify(bundle), foreseen };
      } catch (e) {
        // Sent unchecked, a damaged copy is found here, not by the server, which would
        // quarantine it: asked again checked, the server finds it (and the restore stops
        // with its answer), or the copy was sound and only this transfer was not.
        if (!(e instanceof DamagedChunkError)) throw e;
        forecast.exact = false;
        return { v: await verify(await fetch(true)), foreseen: null };
      }
    };
    try {
      try {
        r = await attempt();
      } catch (e) {
        // The worker crashed and was replaced: its session, and what it held, went with it.
        // The request goes again, once, to the replacement, naming nothing as held.
        if (!(e instanceof RestoreWorkerCrash)) throw e;
        forecast.exact = false;
        this.held[worker].clear();
        r = await attempt();
      }
    } catch (e) {
      if (e instanceof RestoreError) throw e;
      if (e instanceof DamagedChunkError)
        throw new RestoreError(
          `"${this.fileOf(e.fp)}" is damaged in the repository: chunk ${e.fp} failed verification (${e.reason}). The restore stopped.`,
        );
      throw new RestoreError(`Reading chunks of ${this.filesOf(fps)} failed: ${e instanceof Error ? e.message : e}`);
    }
    const { v, foreseen } = r;
    if (v.offsets.length !== fps.length)
      throw new RestoreError(`The server answered ${v.offsets.length} chunks for ${fps.length} requested.`);
    for (let k = 0; k < fps.length; k++) {
      const got = fpHex(v.fps, k);
      if (got !== fps[k])
        throw new RestoreError(
          `The server answered chunk ${got} where ${fps[k]} (of "${this.fileOf(fps[k])}") was asked for.`,
        );
    }
    const kept = fpHexes(v.kept, v.kept.length / FP_LEN);
    if (foreseen && (kept.length !== foreseen.size || kept.some((f) => !foreseen.has(f)))) forecast.exact = false;
    const asked = new Set(fps);
    for (const f of kept) if (!asked.has(f)) this.held[worker].add(f);
    return { v, fetched };
  }

  /** The assembler moved to window `w`: the one after it may be fetched. */
  moveTo(w: number) {
    this.window = Math.max(this.window, w);
    this.pump();
  }

  /** Starts the requests the windows allow, each as soon as its worker is free. */
  pump() {
    const windows = this.plan.windows;
    while (!this.stopped && this.nextWindow < windows.length && this.nextWindow <= this.window + 1) {
      const reqs = windows[this.nextWindow].requests;
      if (this.nextRequest >= reqs.length) {
        this.nextWindow++;
        this.nextRequest = 0;
        continue;
      }
      this.waiting.push({ w: this.nextWindow, r: reqs[this.nextRequest++] });
    }
    for (let k = 0; !this.stopped && k < this.waiting.length;) {
      const { w, r } = this.waiting[k];
      const worker = r.worker % this.held.length;
      // One request on the wire per worker, and, once its forecast has ended, none beside
      // one being verified.
      if (this.fetching[worker] || this.open[worker] >= (this.forecast[worker].exact ? 2 : 1)) {
        k++;
        continue;
      }
      this.waiting.splice(k, 1);
      this.fetching[worker] = true;
      this.open[worker]++;
      let here = false;
      const arrived = () => {
        if (here) return;
        here = true;
        this.fetching[worker] = false;
        if (!this.stopped) this.pump();
      };
      this.fetchRequest(r.fps, worker, arrived).then(
        ({ v, fetched }) => {
          this.open[worker]--;
          if (this.stopped) return;
          this.deliver(w, r.fps, v);
          this.onRequest(r.containers.length, fetched);
          this.pump();
        },
        (e: unknown) => {
          this.open[worker]--;
          this.onError(e);
        },
      );
    }
  }
}

export interface RestoreJob {
  /**
   * The archive (zip) or file bytes, unless they go into `output`, or into a folder; read it
   * to run the restore.
   */
  stream: ReadableStream<Uint8Array> | null;
  plan: RestorePlan;
  /** Resolves when the last byte has been taken; rejects with the reason it stopped. */
  done: Promise<void>;
  cancel(): void;
}

export interface RestoreOptions {
  api: Api;
  items: RestoreItem[];
  /**
   * 'zip' = an archive of all items; 'file' = the bytes of the single file item; 'folder' =
   * every item written into `folder`.
   */
  format: 'zip' | 'file' | 'folder';
  folder?: FolderTarget;
  /**
   * zip and file: a block port (port.ts) to write the output into, e.g. a streamed
   * download's; without it, the output is the job's `stream`.
   */
  output?: MessagePort;
  /** The version restored: its chunks are located with `versions/{id}/locations`. */
  version?: number;
  /** Chunk locations known already (tests); otherwise the version's, else the repository's. */
  locations?: Map<string, ChunkLoc>;
  planOptions?: PlanOptions;
  /**
   * The plan of these `items` ([`planFor`]), made while something else was awaited (a
   * download opening); otherwise `startRestore` makes it.
   */
  plan?: RestorePlan;
  onProgress?: (p: RestoreProgress) => void;
}

/**
 * The plan of a restore of `items`: where their chunks are (the locations given, else the
 * version's, else the repository's), in what requests and windows ([`planRestore`]).
 */
export async function planFor(
  opts: Pick<RestoreOptions, 'api' | 'items' | 'version' | 'locations' | 'planOptions'>,
): Promise<RestorePlan> {
  const { api } = opts;
  const files = opts.items.filter((i) => i.kind === 'file');
  const locations =
    opts.locations ??
    (opts.version !== undefined ? (await versionLocations(api, opts.version)).locations : await chunkLocations(api));
  const planWith = (locs: Map<string, ChunkLoc>) =>
    planRestore(
      files.map((f) => ({ name: f.path, size: f.size, recipe: f.recipe })),
      (fp) => locs.get(fp),
      opts.planOptions ?? DEFAULT_PLAN,
      restoreWorkerCount(),
    );
  let plan: RestorePlan;
  try {
    plan = planWith(locations);
  } catch (e) {
    // Locations read earlier (held while the version was open) may predate a chunk stored
    // again since (a damaged one healed by a backup): they are read once more.
    if (!(e instanceof PlanError) || opts.version === undefined) throw e;
    const fresh = await decodeLocations(await api.versionLocations(opts.version));
    try {
      plan = planWith(fresh.locations);
    } catch (again) {
      if (!(again instanceof PlanError) || fresh.notStored === 0) throw again;
      throw new PlanError(
        `${again.message}: version ${opts.version} is damaged (${fresh.notStored} of its chunks are not stored); ` +
          'a backup of the files that hold them stores them again and repairs it',
      );
    }
  }
  return plan;
}

/**
 * Plans a restore and starts it: the page fetches and has chunks verified, the assembler
 * worker writes the output (assemble.ts), so no byte of it passes through the page's thread
 * unless the page reads `stream`.
 */
export async function startRestore(opts: RestoreOptions): Promise<RestoreJob> {
  const endHeavyWork = beginHeavyWork();
  try {
    const job = await restoreJob(opts);
    job.done.then(endHeavyWork, endHeavyWork);
    return job;
  } catch (e) {
    endHeavyWork();
    throw e;
  }
}

async function restoreJob(opts: RestoreOptions): Promise<RestoreJob> {
  const { api, items, format } = opts;
  const files = items.filter((i) => i.kind === 'file');
  if (format === 'file' && files.length !== 1) throw new RestoreError('a single-file restore needs exactly one file');
  if (format === 'folder' && !opts.folder) throw new RestoreError('a restore into a folder needs the folder');
  const plan = opts.plan ?? (await planFor(opts));
  // The workers stay warm after this restore: the next one starts at once. The page's own
  // instance of the engine reads the answers' bundles for the fetcher's forecasts.
  const [workers, pool] = await Promise.all([restoreWorkers(), assembler(), pageCore()]);
  const controller = new AbortController();
  const started = performance.now();
  const progress: RestoreProgress = {
    phase: 'restoring',
    bytesDone: 0,
    bytesTotal: plan.stats.totalBytes,
    filesDone: 0,
    filesTotal: files.length,
    requestsDone: 0,
    requestsTotal: plan.stats.requests,
    containersRead: 0,
    containersMin: plan.stats.containersMin,
    bytesFetched: 0,
    elapsedMs: 0,
    mbps: 0,
  };
  let lastReport = 0;
  const report = (force = false) => {
    const now = performance.now();
    if (!force && now - lastReport < 100) return;
    lastReport = now;
    progress.elapsedMs = now - started;
    progress.mbps = progress.elapsedMs > 0 ? progress.bytesDone / 1e3 / progress.elapsedMs : 0;
    opts.onProgress?.({ ...progress });
  };
  report(true);

  // The output: the given port, or one whose other end is the job's stream.
  let port: MessagePort | undefined = opts.output;
  let stream: ReadableStream<Uint8Array> | null = null;
  if (format !== 'folder' && !port) {
    const channel = new MessageChannel();
    port = channel.port2;
    stream = portReader(channel.port1, controller.signal);
  }

  let settle!: { resolve: () => void; reject: (e: unknown) => void };
  const done = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  done.catch(() => {});
  let finished = false;
  let fetcher: ChunkFetcher | null = null;
  let assembly: Request<{ bytes: number; files: number }, AssembleSignal> | null = null;
  const finish = (error?: unknown) => {
    if (finished) return;
    finished = true;
    fetcher?.close();
    if (error === undefined) {
      progress.phase = 'done';
      report(true);
      settle.resolve();
      return;
    }
    const cancelled = error instanceof DOMException && error.name === 'AbortError';
    const e = error instanceof Error ? error : new RestoreError(String(error));
    // Nothing more is fetched, the assembly stops, and its output fails (a download or file it
    // feeds is discarded, not left truncated).
    controller.abort(e);
    assembly?.signal({ type: 'stop', message: cancelled ? 'Cancelled.' : e.message });
    progress.phase = cancelled ? 'cancelled' : 'failed';
    progress.message = cancelled ? 'Cancelled.' : e.message;
    report(true);
    // A folder is in its final state when the restore says it stopped: the assembler has
    // finished or abandoned each file it had begun.
    if (format === 'folder' && assembly)
      void assembly.answer.then(
        () => settle.reject(e),
        () => settle.reject(e),
      );
    else settle.reject(e);
  };

  assembly = pool.request(
    0,
    'assemble',
    {
      format,
      items: items.map(({ name, kind, size, mtime }) => ({ name, kind, size, mtime })),
      plan: assemblePlan(plan),
      port,
      consumer: opts.output ? 'download' : 'restore',
      folder: opts.folder?.root,
    },
    {
      transfer: port ? [port] : [],
      onEvent: (ev) => {
        if (ev.type === 'window') fetcher?.moveTo(ev.window);
        else {
          progress.bytesDone = ev.bytes;
          progress.filesDone = ev.files;
          report();
        }
      },
    },
  );
  assembly.answer.then(
    (r) => {
      progress.bytesDone = r.bytes;
      progress.filesDone = r.files;
      finish();
    },
    (e: unknown) => finish(e instanceof WorkerError ? new RestoreError(e.message) : e),
  );
  fetcher = new ChunkFetcher(
    api,
    plan,
    workers,
    items,
    controller.signal,
    (window, fps, v) => {
      // Each buffer once (lengths, sizes and crcs are views of one).
      const list = [...new Set([v.raw.buffer, v.offsets.buffer, v.lengths.buffer, v.crcs.buffer])] as Transferable[];
      const { offsets, lengths, sizes, crcs, raw } = v;
      assembly?.signal({ type: 'chunks', window, fps, offsets, lengths, sizes, crcs, raw }, list);
    },
    (containers, bytes) => {
      progress.requestsDone++;
      progress.containersRead += containers;
      progress.bytesFetched += bytes;
      report();
    },
    (e) => finish(e),
    FETCH_RETRY_MS,
    format === 'zip',
  );
  fetcher.pump();
  return {
    stream,
    plan,
    done,
    cancel: () => finish(new DOMException('cancelled', 'AbortError')),
  };
}
