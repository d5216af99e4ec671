/**
 * Assembly: a restore's verified chunks put back in reference order, as a zip, as one file's
 * bytes, or as files written into a folder. It runs in the assembler worker
 * (assembleWorker.ts), so the page's thread never touches a restore's bytes: the page plans,
 * fetches and has the restore workers verify (restore.ts), and hands each verified answer
 * here, transferred; the output leaves through a block port (port.ts) straight to the
 * download worker, or to the page for a picked file, a Blob or a preview, or into the folder.
 *
 * Windows: the plan's reference sequence is cut into windows (plan.ts). The assembler holds
 * the window it is writing and the next one (the page sends a window's answers only once the
 * assembler has reached the window before it: `onWindow`), plus the plan's restore cache, so
 * its memory is 2 x windowBytes + 2 x cacheBytes of raw chunks (`advance`) whatever the size
 * of the version.
 */
import { BlockWriter, BLOCK_BYTES, concat } from './blocks';
import { browserReason, FolderError, type FolderTarget } from './folder';
import type { PortWriter } from './port';
import type { RestorePlan } from './plan';
import { deflatedMax, pieceSize, ZipWriter, type ZipPiece } from './zip';

/** An item of the restore as the assembler needs it (names already sanitised and unique). */
export interface AssembleItem {
  name: string;
  kind: 'file' | 'dir';
  size: number;
  mtime: number;
}

/** What of the plan the assembler needs: the reference sequence, files and windows. */
export interface AssemblePlan {
  refs: string[];
  files: { name: string; size: number; refStart: number; refEnd: number }[];
  /** Per window: where it ends in `refs`, how many requests fill it, what the cache keeps after it. */
  windows: { refEnd: number; requests: number; keep: string[] }[];
}

export function assemblePlan(plan: RestorePlan): AssemblePlan {
  return {
    refs: plan.refs,
    files: plan.files,
    windows: plan.windows.map((w) => ({ refEnd: w.refEnd, requests: w.requests.length, keep: w.keep })),
  };
}

/**
 * One request's verified chunks, for window `window`: chunk k is `raw[offsets[k], +lengths[k])`,
 * its raw bytes or, for a zip, its deflate fragment (`sizes[k]` raw bytes).
 */
export interface WindowChunks {
  window: number;
  fps: string[];
  offsets: Uint32Array;
  lengths: Uint32Array;
  sizes: Uint32Array;
  crcs: Uint32Array;
  raw: Uint8Array;
}

export class AssemblyError extends Error {}

/** A window's chunks as they arrive; `arrived` settles on the next request's. */
interface WindowLoad {
  chunks: Map<string, ZipPiece>;
  left: number;
  arrived: Promise<void>;
  wake: () => void;
}

/**
 * The chunks of a plan in reference order: the window being written, the next one as it
 * arrives, and the restore cache kept between windows.
 */
export class Windows {
  private have = new Map<string, ZipPiece>();
  private window = -1;
  private loads = new Map<number, WindowLoad>();
  private stopped: unknown = undefined;

  constructor(
    private plan: AssemblePlan,
    /** The assembler moved to window `w`: the page may send window w + 1's answers. */
    private onWindow: (w: number) => void,
  ) {}

  private load(w: number): WindowLoad {
    let l = this.loads.get(w);
    if (!l) {
      const fresh: WindowLoad = {
        chunks: new Map(),
        left: this.plan.windows[w]?.requests ?? 0,
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

  /** A request's verified chunks arrived. */
  add(c: WindowChunks) {
    if (!(c.window >= this.window && c.window < this.plan.windows.length))
      throw new AssemblyError(`chunks for window ${c.window}, which is not being assembled`);
    const l = this.load(c.window);
    for (let k = 0; k < c.fps.length; k++)
      l.chunks.set(c.fps[k], {
        bytes: c.raw.subarray(c.offsets[k], c.offsets[k] + c.lengths[k]),
        crc: c.crcs[k],
        size: c.sizes[k],
      });
    l.left--;
    l.wake();
  }

  /** Stops the assembly: whatever waits for a chunk throws `reason`. */
  stop(reason: unknown) {
    this.stopped ??= reason;
    for (const l of this.loads.values()) l.wake();
  }

  /** Throws the reason the assembly was stopped, if it was. */
  check() {
    if (this.stopped !== undefined) throw this.stopped;
  }

  /**
   * Moves to the next window: the chunks the plan keeps stay, the rest is let go. A kept
   * chunk is a view of the buffer its request came in; a buffer whose kept chunks hold at
   * least half of it stays, and the chunks kept from any other are copied out so that it can
   * be freed. So what the cache pins is at most twice what it keeps, and a window's many
   * kept chunks are not copied (a version repeating earlier releases keeps most of them).
   */
  private advance() {
    if (this.window >= 0) {
      const cur = this.load(this.window);
      const kept: [string, ZipPiece][] = [];
      const held = new Map<ArrayBufferLike, number>();
      for (const fp of this.plan.windows[this.window].keep) {
        const c = this.have.get(fp) ?? cur.chunks.get(fp)!;
        kept.push([fp, c]);
        held.set(c.bytes.buffer, (held.get(c.bytes.buffer) ?? 0) + c.bytes.byteLength);
      }
      const have = new Map<string, ZipPiece>();
      for (const [fp, c] of kept) {
        const pinned = 2 * held.get(c.bytes.buffer)! >= c.bytes.buffer.byteLength;
        have.set(fp, pinned ? c : { ...c, bytes: c.bytes.slice() });
      }
      this.have = have;
      this.loads.delete(this.window);
    }
    this.window++;
    this.onWindow(this.window);
  }

  /** Reference `ref` if it is in the window being assembled and has arrived, else undefined. */
  ready(ref: number): ZipPiece | undefined {
    if (this.window < 0 || ref >= this.plan.windows[this.window].refEnd) return undefined;
    const fp = this.plan.refs[ref];
    return this.have.get(fp) ?? this.load(this.window).chunks.get(fp);
  }

  /**
   * The bytes of reference `ref`, with their CRC-32: as soon as the request that holds it has
   * arrived (requests are in container order, which for most versions is close to reference
   * order), not when its whole window has.
   */
  async chunk(ref: number): Promise<ZipPiece> {
    while (this.window < 0 || ref >= this.plan.windows[this.window].refEnd) this.advance();
    const fp = this.plan.refs[ref];
    const l = this.load(this.window);
    for (;;) {
      this.check();
      const c = this.have.get(fp) ?? l.chunks.get(fp);
      if (c) return c;
      if (l.left <= 0) throw new AssemblyError(`internal: chunk ${fp} is not in the restore window`);
      await l.arrived;
    }
  }
}

/** Bytes and files written so far; `tick` reports them at most every REPORT_MS. */
export class Counter {
  bytes = 0;
  files = 0;
  private last = 0;
  constructor(private report: (bytes: number, files: number) => void) {}
  tick(force = false) {
    const now = performance.now();
    if (!force && now - this.last < REPORT_MS) return;
    this.last = now;
    this.report(this.bytes, this.files);
  }
}

const REPORT_MS = 50;

/** DOS dates in zips start at 1980; a hostile or unknown mtime must not break the archive. */
function zipDate(mtime: number): Date {
  const min = Date.UTC(1980, 0, 2);
  const max = Date.UTC(2107, 11, 31);
  return new Date(Number.isFinite(mtime) ? Math.min(max, Math.max(min, mtime)) : min);
}

/**
 * The pieces of file `k`, in order, each handed to `use`; `drain` runs before waiting for a
 * chunk that has not arrived (the blocks made so far go out first), or after every piece when
 * `eager`. Checks the file's size.
 */
async function eachPiece(
  plan: AssemblePlan,
  windows: Windows,
  k: number,
  counter: Counter,
  use: (p: ZipPiece) => void,
  drain: () => Promise<void>,
  eager = false,
) {
  const f = plan.files[k];
  let n = 0;
  for (let i = f.refStart; i < f.refEnd; i++) {
    let c = windows.ready(i);
    if (!c) {
      await drain();
      counter.tick();
      c = await windows.chunk(i);
    }
    use(c);
    const size = pieceSize(c);
    n += size;
    counter.bytes += size;
    if (eager) await drain();
  }
  if (n !== f.size) throw new AssemblyError(`"${f.name}" came out as ${n} bytes, its manifest says ${f.size}.`);
}

/** Sends the blocks `out` has completed. */
async function send(out: BlockWriter, port: PortWriter) {
  for (const b of out.take()) await port.write(b);
}

/** The zip of `items` into `port`. */
export async function assembleZip(
  items: AssembleItem[],
  plan: AssemblePlan,
  windows: Windows,
  port: PortWriter,
  counter: Counter,
) {
  const out = new BlockWriter();
  const zip = new ZipWriter((b) => out.push(b));
  const drain = () => send(out, port);
  let k = 0;
  for (const item of items) {
    windows.check();
    const lastModified = zipDate(item.mtime);
    if (item.kind === 'dir') {
      zip.begin({ name: item.name + '/', lastModified, dir: true });
      zip.end();
      continue;
    }
    // Every file deflated, from its chunks' fragments.
    const { refStart, refEnd } = plan.files[k];
    zip.begin({
      name: item.name,
      lastModified,
      size: item.size,
      deflate: { maxBytes: deflatedMax(item.size, refEnd - refStart) },
    });
    await eachPiece(plan, windows, k++, counter, (c) => zip.data(c), drain);
    zip.end();
    counter.files++;
    counter.tick();
    await drain();
  }
  zip.finish();
  out.flush();
  await drain();
  await port.close();
}

/** The bytes of the plan's only file into `port`. */
export async function assembleFile(plan: AssemblePlan, windows: Windows, port: PortWriter, counter: Counter) {
  const out = new BlockWriter();
  const drain = () => send(out, port);
  await eachPiece(plan, windows, 0, counter, (c) => out.push(c.bytes), drain);
  counter.files++;
  out.flush();
  await drain();
  await port.close();
}

/** Files held for writing together at most, and their bytes. */
const MAX_FILES = 16;
const MAX_BYTES = 64 << 20;
/** Bytes of a large file's blocks not yet written at most (more would only grow the tab). */
const FILE_AHEAD = 2 * BLOCK_BYTES;

/**
 * `items` written into `target`. Opening and closing a file costs a round trip to the
 * browser's file system (and, for a picked folder, a swap file moved into place), whatever its
 * size, so nothing waits for one while there is more to assemble: directories are created and
 * files written in the background, up to MAX_FILES files and MAX_BYTES not yet written. A file
 * up to a block is assembled and written in one write of one buffer; a larger one as it
 * comes, a block at a time, at most FILE_AHEAD of it not yet written, so the restore never
 * holds much of it whatever its size.
 */
export async function assembleFolder(
  items: AssembleItem[],
  plan: AssemblePlan,
  windows: Windows,
  target: FolderTarget,
  counter: Counter,
) {
  const writing = new Set<Promise<unknown>>();
  let pendingBytes = 0;
  let failed: unknown = null;
  const track = (p: Promise<unknown>) => {
    const q = p
      .catch((e: unknown) => {
        failed ??= e;
      })
      .finally(() => writing.delete(q));
    writing.add(q);
  };
  /**
   * Waits while too much is being written (by the files handed over and by `current`, the
   * file still being assembled: its blocks count too); throws what failed meanwhile.
   */
  const room = async (current?: { queued(): number; written(): Promise<void> }) => {
    const full = () =>
      writing.size >= MAX_FILES || pendingBytes > MAX_BYTES || (current !== undefined && current.queued() > FILE_AHEAD);
    while (full() && !failed) await Promise.race(current ? [...writing, current.written()] : writing);
    if (failed) throw failed;
  };
  /**
   * The browser's reason, with the file or directory it was about (its own message names
   * neither).
   */
  const naming =
    (name: string, what: string) =>
    (e: unknown): never => {
      if (e instanceof AssemblyError || e instanceof FolderError) throw e;
      throw new AssemblyError(`"${name}" could not be ${what} the folder: ${browserReason(e)}`);
    };
  /** Writes `name` in the background from the blocks `write` is given; `end` closes it. */
  const open = (name: string) => {
    const named = naming(name, 'written into');
    // A failure stops the restore at its next step; `end` abandons the file.
    const stop = (e: unknown) => {
      failed ??= e;
    };
    const opened = target.create(name).catch(named);
    opened.catch(stop);
    let last: Promise<unknown> = opened;
    let queued = 0;
    return {
      write(b: Uint8Array) {
        const n = b.byteLength;
        pendingBytes += n;
        queued += n;
        last = Promise.all([opened, last])
          .then(([f]) => f.writable.write(b as Uint8Array<ArrayBuffer>).catch(named))
          .finally(() => {
            pendingBytes -= n;
            queued -= n;
          });
        last.catch(stop);
      },
      /** Bytes given and not yet written. */
      queued: () => queued,
      /** Settles once the blocks given so far are written (or one failed). */
      written: () =>
        last.then(
          () => {},
          () => {},
        ),
      /** Closes the file once written, or abandons it when `error` (or a write) failed. */
      end(error?: unknown) {
        track(
          opened.then(async (f) => {
            try {
              await last;
              if (error !== undefined) throw error;
              await f.writable.close().catch(named);
              counter.files++;
            } catch (e) {
              await f.abandon();
              throw e;
            }
          }),
        );
      },
    };
  };
  try {
    await writeItems();
  } catch (e) {
    // The folder is left in its final state before the restore says it stopped: every file
    // handed over is written whole, or abandoned (as it was, or gone if the restore created it).
    await Promise.all(writing);
    throw e;
  }
  await Promise.all(writing);
  if (failed) throw failed;

  async function writeItems() {
    let k = 0;
    for (const item of items) {
      windows.check();
      if (failed) throw failed;
      if (item.kind === 'dir') {
        track(target.dir(item.name).catch(naming(item.name, 'created in')));
        continue;
      }
      if (item.size > BLOCK_BYTES) {
        const file = open(item.name);
        const out = new BlockWriter();
        const drain = async () => {
          // A file assembled from chunks already here would otherwise be written to its end
          // after a stop: it is abandoned instead.
          windows.check();
          for (const b of out.take()) file.write(b);
          await room(file);
        };
        try {
          await eachPiece(plan, windows, k, counter, (c) => out.push(c.bytes), drain, true);
          out.flush();
          await drain();
        } catch (e) {
          file.end(e);
          throw e;
        }
        file.end();
      } else {
        // Opened once whole: a restore that stops meanwhile leaves no empty file behind.
        const parts: Uint8Array[] = [];
        await eachPiece(
          plan,
          windows,
          k,
          counter,
          (c) => parts.push(c.bytes),
          async () => {},
        );
        const file = open(item.name);
        if (item.size) file.write(concat(parts, item.size));
        file.end();
      }
      k++;
      counter.tick();
      await room();
    }
  }
}
