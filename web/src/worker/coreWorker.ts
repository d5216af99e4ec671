/// <reference lib="webworker" />
/**
 * A core worker: one wasm-core instance, fed files as streams of blocks (never a whole
 * file in memory, so a file of any size fits).
 *
 * Backup stages per file: chunk + lookup key (plain SHA-1, wasm-core `ChunkEngine`), drop
 * chunks the job already knows (the previous version's fingerprints: HiDeStore's hot cache,
 * and chunks this worker already passed on), confirm the rest (their collision-detecting
 * fingerprints, settle.ts), compress them (zstd when it pays) and hand them to the page in
 * batches. At most MAX_UNCREDITED batches are outstanding: the worker
 * stops chunking until the page takes them (backpressure keeps memory flat for huge files;
 * reads run at most READ_AHEAD bytes ahead).
 *
 * The page may queue a few jobs per worker: their reads start on arrival (readahead.ts) and
 * they run one after another.
 */
import init, { ChunkEngine, FileHasher, NewChunkBatch, RecipeHints, SegmentChunker } from '../wasm-pkg/wasm_core.js';
import { expose, transfer, type Context } from './bridge';
import { WHOLE_READ, type CoreApi, type CoreEvent, type CoreSignal, type NewChunks } from './protocol';
import { FP_LEN } from '../backup/hex';
import { FingerprintSet } from '../dedupindex/fpset';
import { ReadAhead, streamBlocks, type BlockStream } from './readahead';
import { settle } from './settle';
import { warmUp } from './warmup';

/** Report progress at most this often, so messages do not dominate small blocks. */
const PROGRESS_EVERY = 8 << 20;
/**
 * Read files in blocks of this size (`File.slice`, never a whole large file). Reading 256 MiB
 * in headless Chromium here took 1.25 s in 1 MiB blocks read one after another, 0.46 s in
 * 16 MiB blocks; with several 1 MiB reads in flight (READ_AHEAD) the block size matters less.
 */
const BLOCK = 1 << 20;
/** Bytes read ahead of the chunker, over this worker's queued jobs (see readahead.ts). */
const READ_AHEAD = 4 << 20;
/** Post new chunks once this many stored bytes are collected. */
const BATCH_BYTES = 2 << 20;
const MAX_UNCREDITED = 2;

/**
 * The job's known chunks: the hot cache plus every chunk this worker already passed on. A
 * packed set, not `Set<string>`: with hex strings, taking the hot cache (typescript-10,
 * ~2 500 fingerprints) took each worker 1-9 ms at the start of every backup, 0-5 ms packed
 * (the rest is the RapidCDC hints), and every chunk cost a string.
 */
let known = new FingerprintSet(0);
/**
 * The previous version's recipes, if any: each file's chunks are predicted from them
 * (RapidCDC with the fingerprint test: the same chunks as plain chunking, less scanning).
 */
let hints: RecipeHints | null = null;
/** New chunks of the running job, collected in Wasm memory (one job at a time per worker). */
let batch: NewChunkBatch | null = null;

type Ctx = Context<CoreEvent, CoreSignal>;

/**
 * A chunk job's signals from the page: credits for the batches it took, and (segment jobs)
 * where the previous segment's chunks end. Listens from the job's arrival, so neither is
 * missed while the job waits behind others.
 */
class JobSignals {
  outstanding = 0;
  /** The page stopped the job ('stop'): it ends at its next block or batch. */
  stopped = false;
  private wakeCredit?: () => void;
  private entry?: number;
  private wakeEntry?: (entry: number) => void;

  constructor(ctx: Ctx) {
    ctx.onSignal((s) => {
      if (s.type === 'credit') {
        this.outstanding--;
        this.wakeCredit?.();
      } else if (s.type === 'stop') {
        this.stopped = true;
        this.wakeCredit?.();
        this.wakeEntry?.(NaN);
      } else if (this.wakeEntry) this.wakeEntry(s.entry);
      else this.entry = s.entry;
    });
  }

  /** Throws once the page has stopped the job. */
  check() {
    if (this.stopped) throw new Error('stopped by the page');
  }

  /** Resolves once fewer than `max` batches are uncredited; throws once stopped. */
  async credit(max: number) {
    while (this.outstanding >= max && !this.stopped) await new Promise<void>((r) => (this.wakeCredit = r));
    this.check();
  }

  entryPoint(): Promise<number> {
    if (this.stopped) return Promise.resolve(NaN);
    if (this.entry !== undefined) return Promise.resolve(this.entry);
    return new Promise((resolve) => (this.wakeEntry = resolve));
  }
}
/**
 * Reads of every queued file and batch job start on arrival (segments of large files are
 * read in place instead, see `readInPlace`). Tried and rejected here: BYOB readers (several
 * per thread over whole files hung in Chromium 156), and freeing each block with
 * `ArrayBuffer.transfer(0)` (the tab grew to 2.5 GiB for a 2 GiB file: detaching drops V8's
 * count of external memory, so no GC came to free them).
 */
const reads = new ReadAhead(READ_AHEAD, BLOCK);
/** Jobs run one at a time, in arrival order (they share `batch`); reads run ahead of them. */
let tail: Promise<void> = Promise.resolve();

async function hashFile(ctx: Ctx, blocks: BlockStream) {
  const hasher = new FileHasher();
  try {
    let bytes = 0;
    let reported = 0;
    for await (const block of blocks) {
      hasher.update(block);
      bytes += block.byteLength;
      if (bytes - reported >= PROGRESS_EVERY) {
        ctx.emit({ type: 'progress', bytes });
        reported = bytes;
      }
    }
    return { sha1: hasher.finish(), bytes };
  } finally {
    hasher.free();
  }
}

/**
 * The page side of one job's new chunks: batches of ~BATCH_BYTES copied out of Wasm
 * memory once and transferred, at most MAX_UNCREDITED outstanding.
 */
function sink(ctx: Ctx, signals: JobSignals) {
  if (!batch) throw new Error('no backup job in this worker (setKnown first)');
  batch.clear();
  const flush = async () => {
    const b = batch!;
    if (!b.count()) return;
    const msg: NewChunks = {
      fps: b.fps(),
      codecs: b.codecs(),
      rawLengths: b.rawLengths(),
      storedLengths: b.storedLengths(),
      stored: b.stored(),
    };
    b.clear();
    ctx.emit({ type: 'newChunks', ...msg }, [
      msg.fps.buffer,
      msg.codecs.buffer,
      msg.rawLengths.buffer,
      msg.storedLengths.buffer,
      msg.stored.buffer,
    ]);
    signals.outstanding++;
    await signals.credit(MAX_UNCREDITED);
  };
  return {
    flush,
    full: () => batch!.storedSize() >= BATCH_BYTES,
    /** Throws once the page has stopped the job. */
    check: () => signals.check(),
  };
}

type Sink = ReturnType<typeof sink>;

/** A recipe as the engine hands it out in parts, concatenated once at the end. */
class RecipeParts {
  private fps: Uint8Array[] = [];
  private lens: Uint32Array[] = [];
  count = 0;
  /** Chunks found by prediction (RapidCDC), not by scanning. */
  predicted = 0;

  add(fps: Uint8Array, lens: Uint32Array) {
    this.fps.push(fps);
    this.lens.push(lens);
    this.count += lens.length;
  }

  /** A point to roll back to (`rollback`), e.g. before a file that may fail midway. */
  mark() {
    return { parts: this.fps.length, count: this.count };
  }

  rollback(m: { parts: number; count: number }) {
    this.fps.length = this.lens.length = m.parts;
    this.count = m.count;
  }

  pack(): { fps: Uint8Array; lengths: Uint32Array } {
    const fps = new Uint8Array(this.count * FP_LEN);
    const lengths = new Uint32Array(this.count);
    let at = 0;
    this.lens.forEach((l, k) => {
      fps.set(this.fps[k], at * FP_LEN);
      lengths.set(l, at);
      at += l.length;
    });
    return { fps, lengths };
  }
}

/**
 * Chunks one file's blocks: the recipe goes to `recipe`, chunks not known yet to the job's
 * batch (posted through `out` as it fills). Resolves to the bytes read.
 */
async function chunkStream(
  blocks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  prevFile: number,
  recipe: RecipeParts,
  out: Sink,
  onBytes?: (bytes: number) => void,
): Promise<number> {
  const engine = hints ? ChunkEngine.withHints(hints, prevFile) : new ChunkEngine('default');
  const take = (n: number) => {
    if (!n) return;
    const { fps, fresh } = settle(engine, n, known);
    recipe.add(fps, engine.lengths());
    if (fresh.length) batch!.addFromEngine(engine, fresh);
  };
  try {
    let bytes = 0;
    for await (const block of blocks) {
      out.check();
      take(engine.push(block));
      bytes += block.byteLength;
      if (out.full()) await out.flush();
      onBytes?.(bytes);
    }
    take(engine.finish());
    recipe.predicted += engine.predicted();
    return bytes;
  } finally {
    engine.free();
  }
}

async function chunkFile(ctx: Ctx, signals: JobSignals, prevFile: number, blocks: BlockStream) {
  const out = sink(ctx, signals);
  const recipe = new RecipeParts();
  let reported = 0;
  const bytes = await chunkStream(blocks, prevFile, recipe, out, (bytes) => {
    if (bytes - reported < PROGRESS_EVERY) return;
    ctx.emit({ type: 'progress', bytes });
    reported = bytes;
  });
  await out.flush();
  const { fps, lengths } = recipe.pack();
  return transfer({ fps, lengths, bytes, predicted: recipe.predicted }, [fps.buffer, lengths.buffer]);
}

async function concat(blocks: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const b of blocks) parts.push(b);
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) (out.set(p, at), (at += p.length));
  return out;
}

/**
 * Small files read as one composite Blob (`blocks`), then chunked one by one, each with its
 * own recipe. If the composite cannot be read or is not as long as the sizes the page saw
 * (a file changed or vanished since it was picked), nothing is chunked: the answer says
 * `unread`, and the page reads each file on its own so that an error names its file and the
 * others are still backed up.
 */
async function chunkBatch(ctx: Ctx, signals: JobSignals, sizes: number[], prevFiles: number[], blocks: BlockStream) {
  const counts = new Uint32Array(sizes.length);
  const whole = await concat(blocks).catch(() => null);
  if (!whole || whole.length !== sizes.reduce((a, b) => a + b, 0)) {
    const none = { fps: new Uint8Array(0), lengths: new Uint32Array(0), counts, bytes: 0, predicted: 0, unread: true };
    return transfer(none, [counts.buffer]);
  }
  const out = sink(ctx, signals);
  const recipe = new RecipeParts();
  let bytes = 0;
  let at = 0;
  for (let k = 0; k < sizes.length; k++) {
    const before = recipe.count;
    bytes += await chunkStream([whole.subarray(at, at + sizes[k])], prevFiles[k], recipe, out);
    counts[k] = recipe.count - before;
    at += sizes[k];
  }
  await out.flush();
  const { fps, lengths } = recipe.pack();
  return transfer({ fps, lengths, counts, bytes, predicted: recipe.predicted, unread: false }, [
    fps.buffer,
    lengths.buffer,
    counts.buffer,
  ]);
}

/** A BYOB read that has not settled by then is given up for plain slice reads. */
const BYOB_TIMEOUT_MS = 10_000;
/** The one read buffer of segment reads, reused (each read transfers it and hands it back). */
let segmentBuffer = new ArrayBuffer(BLOCK);

/**
 * `blob`'s bytes `start..stop` through a BYOB reader into one reused buffer: no new
 * ArrayBuffer per block. Reading a 2 GiB file in 1 MiB slices leaves ~1 GiB of dead
 * buffers per worker for V8 to collect late (the tab's memory), so segments of large
 * files are read this way. Each yielded view is valid until the next step.
 *
 * BYOB readers over whole files hung in Chromium 156 with 4 in flight in one thread
 * (measured 2026-11-23); one reader per worker over slices of one file did not (1-4
 * workers' worth in parallel, 128 segments each, several runs), and was 15-30 % faster
 * than slices. Still, a read that takes over BYOB_TIMEOUT_MS falls back to slice reads
 * for the rest, so a hang costs seconds, not the backup.
 */
async function* readInPlace(blob: Blob, start: number, stop: number): AsyncGenerator<Uint8Array> {
  const reader = blob.slice(start, stop).stream().getReader({ mode: 'byob' });
  let at = start;
  try {
    while (at < stop) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<null>((r) => (timer = setTimeout(() => r(null), BYOB_TIMEOUT_MS)));
      const want = new Uint8Array(segmentBuffer, 0, Math.min(segmentBuffer.byteLength, stop - at));
      const got = await Promise.race([reader.read(want), timeout]);
      clearTimeout(timer);
      if (got === null) {
        // The buffer went with the read that never came back.
        segmentBuffer = new ArrayBuffer(BLOCK);
        console.warn('BYOB read stalled; reading the rest of the segment in slices');
        for (; at < stop; at += BLOCK)
          yield new Uint8Array(await blob.slice(at, Math.min(stop, at + BLOCK)).arrayBuffer());
        return;
      }
      if (got.done || !got.value) throw new Error('file ended early (changed since it was picked?)');
      segmentBuffer = got.value.buffer as ArrayBuffer;
      at += got.value.byteLength;
      yield got.value;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/**
 * One segment of a large file (SS-CDC): read it (plus 32 bytes of history and up to 64 KiB
 * past its end), mark the candidates (stage 1, in parallel with the other workers' segments),
 * wait for where the previous segment's chunks end, pick the cuts (stage 2, microseconds),
 * pass the exit on at once, then hash and pack this segment's chunks.
 */
async function chunkSegment(
  ctx: Ctx,
  signals: JobSignals,
  seg: SegmentChunker,
  blocks: AsyncIterable<Uint8Array>,
  start: number,
  stop: number,
) {
  try {
    const out = sink(ctx, signals);
    for await (const block of blocks) {
      out.check();
      seg.push(block);
    }
    seg.scan();
    ctx.emit({ type: 'progress', bytes: stop - start });
    const entry = await signals.entryPoint();
    if (Number.isNaN(entry)) throw new Error('an earlier segment of this file failed');
    const n = seg.select(entry);
    ctx.emit({ type: 'segmentExit', exit: seg.exit() });
    seg.hash();
    const { fps, fresh } = settle(seg, n, known);
    const lengths = seg.lengths();
    if (fresh.length) batch!.addFromSegment(seg, fresh);
    await out.flush();
    return transfer({ fps, lengths, bytes: stop - start, predicted: 0 }, [fps.buffer, lengths.buffer]);
  } finally {
    seg.free();
  }
}

/** All of `blob` as one block: one `arrayBuffer()`, no slice (see WHOLE_READ). */
const readWhole = (blob: Blob) => reads.open(blob, 0, blob.size, Math.max(1, blob.size));
/** A file's blocks: read whole when small, else streamed. */
const readFile = (file: File) => (file.size <= WHOLE_READ ? readWhole(file) : streamBlocks(file));

/**
 * Runs a job after the jobs before it; `prepare` runs now, so its reads start on arrival.
 * Its blocks are closed once it has run.
 */
function enqueue<R>(prepare: () => { run: () => Promise<R>; blocks?: BlockStream }): Promise<R> {
  let job: { run: () => Promise<R>; blocks?: BlockStream };
  try {
    job = prepare();
  } catch (e) {
    job = { run: () => Promise.reject(e) };
  }
  const result = tail.then(job.run).finally(() => job.blocks?.close());
  tail = result.then(
    () => {},
    () => {},
  );
  return result;
}

expose<CoreApi>(
  {
    hashFile: ({ file }, ctx) =>
      enqueue(() => {
        const blocks = readFile(file);
        return { blocks, run: () => hashFile(ctx, blocks) };
      }),
    setKnown: (msg) => {
      known = FingerprintSet.fromPacked(msg.fps);
      batch?.free();
      batch = new NewChunkBatch(msg.zstdLevel);
      hints?.free();
      hints = null;
      try {
        if (msg.hints) hints = new RecipeHints(msg.hints.fps, msg.hints.lengths, msg.hints.counts);
      } catch (e) {
        // Hints only save time: without them every chunk is found by scanning.
        console.warn('RapidCDC hints refused, chunking without them:', e);
      }
    },
    chunkFile: ({ file, prevFile }, ctx) =>
      enqueue(() => {
        const signals = new JobSignals(ctx);
        const blocks = readFile(file);
        return { blocks, run: () => chunkFile(ctx, signals, prevFile, blocks) };
      }),
    chunkBatch: ({ all, sizes, prevFiles }, ctx) =>
      enqueue(() => {
        const signals = new JobSignals(ctx);
        const blocks = readWhole(all);
        return { blocks, run: () => chunkBatch(ctx, signals, sizes, prevFiles, blocks) };
      }),
    chunkSegment: ({ file, start, stop }, ctx) =>
      enqueue(() => {
        const signals = new JobSignals(ctx);
        // Read when the job runs, not ahead: one BYOB reader per worker at a time.
        const seg = new SegmentChunker(file.size, start, stop);
        return {
          run: () => chunkSegment(ctx, signals, seg, readInPlace(file, seg.readFrom(), seg.readTo()), start, stop),
        };
      }),
  },
  async (module) => {
    await init({ module_or_path: module as WebAssembly.Module });
    try {
      warmUp();
    } catch (e) {
      console.warn('engine warm-up failed (only the first backup is slower):', e);
    }
  },
);
