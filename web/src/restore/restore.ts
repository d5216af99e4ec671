/**
 * Restore: a version (or a folder of it, or one file) back out of the repository, verified
 * chunk by chunk and streamed into a zip (or a plain file) as it is assembled.
 *
 * Memory: at most two plan windows (the one being written and the one being fetched) plus the
 * restore cache are held, i.e. 2 x windowBytes + cacheBytes of raw chunks (~64 MiB by
 * default), and one output block being filled (blocks.ts), whatever the size of the version. With `showSaveFilePicker` the zip goes straight
 * to disk with backpressure; the fallback builds a Blob (see sink.ts for its size gate).
 */
import type { Api, Manifest, ManifestEntry } from '../api/client';
import { ApiError } from '../api/client';
import { FP_LEN, fpHex } from '../backup/hex';
import { DEFAULT_PLAN, planRestore, type ChunkLoc, type PlanOptions, type RestorePlan } from './plan';
import type { FolderTarget } from './folder';
import { versionLocations } from './locations';
import { ZipWriter, type ZipPiece } from './zip';
import { BLOCK_BYTES, BlockWriter, blocks, concat } from './blocks';
import { sanitizeEntryName, UniqueNames } from './sanitize';
import { DamagedChunkError, RestoreWorkerCrash, restoreWorkers, type RestoreWorkers } from './workers';

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

/**
 * The items of a version under `folder` ('' = all), with safe unique names, in manifest order.
 * Symlinks are left out (a zip written here has no portable way to carry them).
 */
export function selectItems(manifest: Manifest, folder = ''): { items: RestoreItem[]; skipped: number } {
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
      chunks: { fp: string; codec: number; offset: number; stored_len: number; raw_len: number }[];
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
        });
  return locs;
}

/** A stream that pulls `it` one piece at a time (backpressure: nothing is read ahead). */
function pull(it: AsyncGenerator<Uint8Array>): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    async pull(ctl) {
      const r = await it.next();
      if (r.done) ctl.close();
      else ctl.enqueue(r.value);
    },
    async cancel() {
      await it.return(undefined);
    },
  });
}

/** DOS dates in zips start at 1980; a hostile or unknown mtime must not break the archive. */
function zipDate(mtime: number): Date {
  const min = Date.UTC(1980, 0, 2);
  const max = Date.UTC(2107, 11, 31);
  return new Date(Number.isFinite(mtime) ? Math.min(max, Math.max(min, mtime)) : min);
}

/**
 * Chunk requests in flight: with two, one is on the wire (or being read and verified by the
 * server) while the other is verified by a restore worker; a third keeps both sides busy
 * when one request waits on the other.
 */
const LANES = 3;

/** A window's fetch: chunks arrive request by request; `arrived` settles on the next one. */
interface WindowLoad {
  chunks: Map<string, ZipPiece>;
  left: number;
  error: unknown;
  arrived: Promise<void>;
  wake: () => void;
}

/** Restores started in this page (each names its sessions in the restore workers). */
let restoresStarted = 0;

/** Most fingerprints a request lists as held (`have`; the server's limit, docs/API.md). */
const MAX_HAVE = 16_384;

/**
 * Serves the chunks of a plan in reference order: fetches window w+1 while window w is
 * being written, and keeps the plan's restore cache between windows.
 */
class ChunkSource {
  private have = new Map<string, ZipPiece>();
  private window = -1;
  private loads = new Map<number, WindowLoad>();
  private inflight = 0;
  private nextWindow = 0;
  private nextRequest = 0;
  /** Names this restore's sessions in the workers. */
  private readonly restoreId = ++restoresStarted;
  /** Requests sent so far: request k goes to worker k mod the pool's size. */
  private requestsSent = 0;
  /** Per worker, the chunks its session holds as stored (what its answers carried). */
  private held: Set<string>[];

  constructor(
    private api: Api,
    private plan: RestorePlan,
    private workers: RestoreWorkers,
    private items: RestoreItem[],
    private signal: AbortSignal,
    private onRequest: (containers: number, bytes: number) => void,
  ) {
    this.held = Array.from({ length: workers.size }, () => new Set<string>());
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
      if (e instanceof ApiError) throw new RestoreError(`Reading chunks of ${this.filesOf(fps)} failed: ${e.message}`);
      throw e;
    }
  }

  /** The restore is over: the workers let go of what they kept for it. */
  close() {
    this.workers.endRestore(this.restoreId);
  }

  /** Fetches and verifies one request's chunks into `into`; answers the bytes fetched. */
  private async fetchRequest(fps: string[], into: Map<string, ZipPiece>): Promise<number> {
    let v;
    let fetched = 0;
    const worker = this.requestsSent++ % this.held.length;
    const fetch = async (checked: boolean) => {
      // What this worker's session holds need not come again as a link of another chunk.
      const have = [...this.held[worker]].slice(0, MAX_HAVE);
      const bundle = await this.fetchBundle(fps, checked, have);
      fetched += bundle.byteLength;
      return bundle;
    };
    const verify = (bundle: Uint8Array) => this.workers.verify(bundle, fps.length, worker, this.restoreId);
    const attempt = async () => {
      try {
        return await verify(await fetch(false));
      } catch (e) {
        // Sent unchecked, a damaged copy is found here, not by the server, which would
        // quarantine it: asked again checked, the server finds it (and the restore stops
        // with its answer), or the copy was sound and only this transfer was not.
        if (!(e instanceof DamagedChunkError)) throw e;
        return await verify(await fetch(true));
      }
    };
    try {
      try {
        v = await attempt();
      } catch (e) {
        // The worker crashed and was replaced: its session, and what it held, went with it.
        // The request goes again, once, to the replacement, naming nothing as held.
        if (!(e instanceof RestoreWorkerCrash)) throw e;
        this.held[worker].clear();
        v = await attempt();
      }
    } catch (e) {
      if (e instanceof RestoreError) throw e;
      if (e instanceof DamagedChunkError)
        throw new RestoreError(
          `"${this.fileOf(e.fp)}" is damaged in the repository: chunk ${e.fp} failed verification (${e.reason}). The restore stopped.`,
        );
      throw new RestoreError(`Reading chunks of ${this.filesOf(fps)} failed: ${e instanceof Error ? e.message : e}`);
    }
    if (v.offsets.length !== fps.length)
      throw new RestoreError(`The server answered ${v.offsets.length} chunks for ${fps.length} requested.`);
    for (let k = 0; k < fps.length; k++) {
      const got = fpHex(v.fps, k);
      if (got !== fps[k])
        throw new RestoreError(
          `The server answered chunk ${got} where ${fps[k]} (of "${this.fileOf(fps[k])}") was asked for.`,
        );
      into.set(got, { bytes: v.raw.subarray(v.offsets[k], v.offsets[k] + v.lengths[k]), crc: v.crcs[k] });
    }
    for (let k = 0; k < v.kept.length / FP_LEN; k++) this.held[worker].add(fpHex(v.kept, k));
    return fetched;
  }

  /** The fetch of window `w` (created on first use; its requests are started by `pump`). */
  private load(w: number): WindowLoad {
    let l = this.loads.get(w);
    if (!l) {
      const fresh: WindowLoad = {
        chunks: new Map(),
        left: this.plan.windows[w].requests.length,
        error: undefined,
        arrived: Promise.resolve(),
        wake: () => {},
      };
      const arm = () => {
        fresh.arrived = new Promise<void>((resolve) => {
          fresh.wake = () => {
            arm();
            resolve();
          };
        });
      };
      arm();
      l = fresh;
      this.loads.set(w, l);
    }
    return l;
  }

  /**
   * Starts requests in plan order, LANES at a time, for the window being assembled and the
   * next one: the next window's first requests go out as soon as this window's last ones are
   * on their way, not when they are all verified.
   */
  private pump() {
    const windows = this.plan.windows;
    while (this.inflight < LANES && this.nextWindow < windows.length && this.nextWindow <= this.window + 1) {
      const w = this.nextWindow;
      const reqs = windows[w].requests;
      this.load(w);
      if (this.nextRequest >= reqs.length) {
        this.nextWindow++;
        this.nextRequest = 0;
        continue;
      }
      const r = reqs[this.nextRequest++];
      const l = this.load(w);
      this.inflight++;
      this.fetchRequest(r.fps, l.chunks).then(
        (bytes) => {
          this.inflight--;
          this.onRequest(r.containers.length, bytes);
          l.left--;
          l.wake();
          this.pump();
        },
        (e: unknown) => {
          this.inflight--;
          l.error ??= e;
          l.wake();
        },
      );
    }
  }

  /** Moves to the next window: the chunks the plan keeps stay, the rest is let go. */
  private advance() {
    if (this.window >= 0) {
      // Copy kept chunks out of their request buffers so those buffers can be freed.
      const cur = this.load(this.window);
      const keep = this.plan.windows[this.window].keep;
      const have = new Map<string, ZipPiece>();
      for (const fp of keep) {
        const cached = this.have.get(fp);
        const c = cached ?? cur.chunks.get(fp)!;
        have.set(fp, cached ? c : { bytes: c.bytes.slice(), crc: c.crc });
      }
      this.have = have;
      this.loads.delete(this.window);
    }
    this.window++;
    this.pump();
  }

  /** Reference `ref` if it is in the window being assembled and has arrived, else undefined. */
  ready(ref: number): ZipPiece | undefined {
    if (this.window < 0 || ref >= this.plan.windows[this.window].refEnd) return undefined;
    const fp = this.plan.refs[ref];
    return this.have.get(fp) ?? this.load(this.window).chunks.get(fp);
  }

  /**
   * The bytes of reference `ref` of the plan, with their CRC-32: as soon as the request that
   * holds it is verified (requests are in container order, which for most versions is close
   * to reference order), not when its whole window is.
   */
  async chunk(ref: number): Promise<ZipPiece> {
    while (this.window < 0 || ref >= this.plan.windows[this.window].refEnd) this.advance();
    const fp = this.plan.refs[ref];
    const l = this.load(this.window);
    for (;;) {
      if (this.signal.aborted) throw this.signal.reason ?? new DOMException('cancelled', 'AbortError');
      const c = this.have.get(fp) ?? l.chunks.get(fp);
      if (c) return c;
      if (l.error !== undefined) throw l.error;
      if (l.left === 0) throw new RestoreError(`internal: chunk ${fp} is not in the restore window`);
      await l.arrived;
    }
  }
}

export interface RestoreJob {
  /** The archive (zip) or file bytes; pull it to run the restore. */
  stream: ReadableStream<Uint8Array>;
  plan: RestorePlan;
  /** Resolves when the last byte has been produced; rejects with the reason it stopped. */
  done: Promise<void>;
  cancel(): void;
}

export interface RestoreOptions {
  api: Api;
  items: RestoreItem[];
  /**
   * 'zip' = an archive of all items; 'file' = the bytes of the single file item; 'folder' =
   * every item written into `folder` (the stream then carries no bytes: read it to the end).
   */
  format: 'zip' | 'file' | 'folder';
  folder?: FolderTarget;
  /** The version restored: its chunks are located with `versions/{id}/locations`. */
  version?: number;
  /** Chunk locations known already (tests); otherwise the version's, else the repository's. */
  locations?: Map<string, ChunkLoc>;
  planOptions?: PlanOptions;
  onProgress?: (p: RestoreProgress) => void;
}

/** Plans a restore and returns its output stream; nothing is fetched until the stream is read. */
export async function startRestore(opts: RestoreOptions): Promise<RestoreJob> {
  const { api, items, format } = opts;
  const files = items.filter((i) => i.kind === 'file');
  if (format === 'file' && files.length !== 1) throw new RestoreError('a single-file restore needs exactly one file');
  if (format === 'folder' && !opts.folder) throw new RestoreError('a restore into a folder needs the folder');
  const locations =
    opts.locations ??
    (opts.version !== undefined ? (await versionLocations(api, opts.version)).locations : await chunkLocations(api));
  const plan = planRestore(
    files.map((f) => ({ name: f.path, size: f.size, recipe: f.recipe })),
    (fp) => locations.get(fp),
    opts.planOptions ?? DEFAULT_PLAN,
  );
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

  let source: ChunkSource | null = null;
  const getSource = async () => {
    // The workers stay warm after this restore: the next one starts at once.
    const workers = await restoreWorkers();
    source ??= new ChunkSource(api, plan, workers, items, controller.signal, (containers, bytes) => {
      progress.requestsDone++;
      progress.containersRead += containers;
      progress.bytesFetched += bytes;
      report();
    });
    return source;
  };

  let settle!: { resolve: () => void; reject: (e: unknown) => void };
  const done = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  done.catch(() => {});
  let finished = false;
  const finish = (error?: unknown) => {
    if (finished) return;
    finished = true;
    source?.close();
    if (error === undefined) {
      progress.phase = 'done';
      report(true);
      settle.resolve();
    } else {
      const cancelled = controller.signal.aborted;
      progress.phase = cancelled ? 'cancelled' : 'failed';
      progress.message = cancelled ? 'Cancelled.' : error instanceof Error ? error.message : String(error);
      report(true);
      settle.reject(error instanceof Error ? error : new RestoreError(String(error)));
    }
  };

  async function* filePieces(k: number): AsyncGenerator<ZipPiece> {
    const f = plan.files[k];
    const src = await getSource();
    let n = 0;
    for (let i = f.refStart; i < f.refEnd; i++) {
      const c = await src.chunk(i);
      n += c.bytes.byteLength;
      progress.bytesDone += c.bytes.byteLength;
      report();
      yield c;
    }
    if (n !== f.size) throw new RestoreError(`"${f.name}" came out as ${n} bytes, its manifest says ${f.size}.`);
    progress.filesDone++;
    report();
  }

  let stream: ReadableStream<Uint8Array>;
  if (format === 'zip') {
    // One generator writes the whole archive: chunks of the window being assembled are taken
    // without a promise, and only full blocks leave it (see blocks.ts).
    stream = pull(
      (async function* () {
        const out = new BlockWriter();
        const zip = new ZipWriter((b) => out.push(b));
        let k = 0;
        for (const item of items) {
          if (controller.signal.aborted) throw controller.signal.reason ?? new DOMException('cancelled', 'AbortError');
          const lastModified = zipDate(item.mtime);
          if (item.kind === 'dir') {
            zip.begin({ name: item.name + '/', lastModified, dir: true });
            zip.end();
            continue;
          }
          zip.begin({ name: item.name, lastModified, size: item.size });
          const f = plan.files[k++];
          const src = await getSource();
          for (let i = f.refStart; i < f.refEnd; i++) {
            const c = src.ready(i) ?? (await src.chunk(i));
            zip.data(c);
            progress.bytesDone += c.bytes.byteLength;
            report();
          }
          zip.end();
          progress.filesDone++;
          report();
          yield* out.take();
        }
        zip.finish();
        out.flush();
        yield* out.take();
      })(),
    );
  } else if (format === 'folder') {
    const target = opts.folder!;
    // Opening and closing a file costs a round trip to the browser's file system (and, for a
    // picked folder, a swap file moved into place), whatever its size: files up to a block
    // are assembled and written several at a time, each in one write of one buffer, while
    // the next ones are assembled. A larger file is written as it comes, a block at a time,
    // so the page never holds more of it than a block.
    const MAX_FILES = 16;
    const MAX_BYTES = 64 << 20;
    const writing = new Set<Promise<void>>();
    let pendingBytes = 0;
    let failed: unknown = null;
    const written = async (name: string, write: (w: FileSystemWritableFileStream) => Promise<void>) => {
      const w = await target.create(name);
      try {
        await write(w);
        await w.close();
      } catch (e) {
        await w.abort().catch(() => {});
        throw e;
      }
    };
    const writeSmall = (name: string, parts: Uint8Array[], size: number) => {
      pendingBytes += size;
      const p = written(name, async (w) => {
        if (size) await w.write(concat(parts, size) as Uint8Array<ArrayBuffer>);
      })
        .catch((e: unknown) => {
          failed ??= e;
        })
        .finally(() => {
          pendingBytes -= size;
          writing.delete(p);
        });
      writing.add(p);
    };
    stream = pull(
      (async function* () {
        let k = 0;
        for (const item of items) {
          if (failed) throw failed;
          if (item.kind === 'dir') {
            await target.dir(item.name);
            continue;
          }
          if (item.size > BLOCK_BYTES) {
            const out = new BlockWriter();
            await written(item.name, async (w) => {
              for await (const p of filePieces(k)) {
                out.push(p.bytes);
                for (const b of out.take()) await w.write(b as Uint8Array<ArrayBuffer>);
              }
              out.flush();
              for (const b of out.take()) await w.write(b as Uint8Array<ArrayBuffer>);
            });
            k++;
            continue;
          }
          const parts: Uint8Array[] = [];
          for await (const p of filePieces(k)) parts.push(p.bytes);
          k++;
          writeSmall(item.name, parts, item.size);
          while (writing.size >= MAX_FILES || pendingBytes > MAX_BYTES) await Promise.race(writing);
        }
        await Promise.all(writing);
        if (failed) throw failed;
      })(),
    );
  } else {
    stream = pull(
      blocks(
        (async function* () {
          for await (const p of filePieces(0)) yield p.bytes;
        })(),
      ),
    );
  }
  // Observe the end of the stream whoever reads it, and stop on the first error.
  const observed = stream.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      flush: () => finish(),
    }),
  );
  const reader = observed.getReader();
  let outCtl: ReadableStreamDefaultController<Uint8Array> | null = null;
  const out = new ReadableStream<Uint8Array>({
    start(ctl) {
      outCtl = ctl;
    },
    async pull(ctl) {
      try {
        const r = await reader.read();
        // A cancelled restore ends its reader early: that is not the end of the output.
        if (controller.signal.aborted) return;
        if (r.done) ctl.close();
        else ctl.enqueue(r.value);
      } catch (e) {
        finish(e);
        ctl.error(e);
      }
    },
    cancel(reason) {
      controller.abort(reason);
      finish(new DOMException('cancelled', 'AbortError'));
      return reader.cancel(reason);
    },
  });
  return {
    stream: out,
    plan,
    done,
    cancel: () => {
      const reason = new DOMException('cancelled', 'AbortError');
      controller.abort(reason);
      finish(reason);
      // The output fails, so the file or download it feeds is discarded, not left truncated.
      outCtl?.error(reason);
      reader.cancel().catch(() => {});
    },
  };
}
