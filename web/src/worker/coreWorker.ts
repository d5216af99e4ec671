/// <reference lib="webworker" />
/**
 * A core worker: one wasm-core instance, fed files as streams of blocks (never a whole
 * file in memory, so a file of any size fits).
 *
 * Backup stages per file: chunk + SHA-1 (wasm-core `ChunkEngine`), drop chunks the job
 * already knows (the previous version's fingerprints: HiDeStore's hot cache, and chunks this
 * worker already passed on), compress the rest (`ChunkPacker`, zstd when it pays) and hand
 * them to the page in batches. At most MAX_UNCREDITED batches are outstanding: the worker
 * stops reading until the page takes them (backpressure keeps memory flat for huge files).
 */
import init, { ChunkEngine, FileHasher, NewChunkBatch, SegmentChunker } from '../wasm-pkg/wasm_core.js';
import type { NewChunks, WorkerRequest, WorkerResponse } from './protocol';
import { FP_LEN, fpHex } from '../backup/hex';

const scope = self as unknown as DedicatedWorkerGlobalScope;
const post = (msg: WorkerResponse, transfer: Transferable[] = []) => scope.postMessage(msg, transfer);

/** Report progress at most this often, so messages do not dominate small blocks. */
const PROGRESS_EVERY = 8 << 20;
/**
 * Read files in blocks of this size. Each `File.slice().arrayBuffer()` is a round trip to the
 * browser process: reading 256 MiB in headless Chromium here took 1.25 s in 1 MiB blocks,
 * 0.69 s in 4 MiB, 0.46 s in 16 MiB. Yet 4 MiB blocks did not change bench:backup
 * (typescript-10: 8.14 s vs restic 9.77 s, within the noise of earlier runs), so the smaller
 * block stays. Large files (segments) are read per segment instead.
 */
const BLOCK = 1 << 20;
/** Post new chunks once this many stored bytes are collected. */
const BATCH_BYTES = 2 << 20;
const MAX_UNCREDITED = 2;

let known = new Set<string>();
/** New chunks of the running job, collected in Wasm memory (one job at a time per worker). */
let batch: NewChunkBatch | null = null;
const credits = new Map<number, { outstanding: number; wake?: () => void }>();

/**
 * The file as blocks of BLOCK bytes (`File.slice`, never the whole file). Tried and
 * rejected: a BYOB reader reusing one buffer (hung intermittently in Chromium 156 on small
 * files), and freeing each block with `ArrayBuffer.transfer(0)` (the tab grew to 2.5 GiB for
 * a 2 GiB file: detaching drops V8's count of external memory, so no GC came to free them).
 */
async function* blocks(file: Blob): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < file.size; at += BLOCK) {
    yield new Uint8Array(await file.slice(at, Math.min(file.size, at + BLOCK)).arrayBuffer());
  }
}

async function hashFile(id: number, file: File) {
  const hasher = new FileHasher();
  try {
    let bytes = 0;
    let reported = 0;
    for await (const block of blocks(file)) {
      hasher.update(block);
      bytes += block.byteLength;
      if (bytes - reported >= PROGRESS_EVERY) {
        post({ type: 'progress', id, bytes });
        reported = bytes;
      }
    }
    post({ type: 'hashed', id, sha1: hasher.finish(), bytes });
  } finally {
    hasher.free();
  }
}

/** Indices (within a batch of `n` chunks) of chunks not known yet; marks them known. */
function fresh(fps: Uint8Array, n: number): Uint32Array {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const hex = fpHex(fps, i);
    if (known.has(hex)) continue;
    known.add(hex);
    out.push(i);
  }
  return Uint32Array.from(out);
}

/**
 * The page side of one job's new chunks: batches of ~BATCH_BYTES copied out of Wasm
 * memory once and transferred, at most MAX_UNCREDITED outstanding.
 */
function sink(id: number) {
  const credit = { outstanding: 0 } as { outstanding: number; wake?: () => void };
  credits.set(id, credit);
  batch!.clear();
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
    post({ type: 'newChunks', id, ...msg }, [
      msg.fps.buffer,
      msg.codecs.buffer,
      msg.rawLengths.buffer,
      msg.storedLengths.buffer,
      msg.stored.buffer,
    ]);
    credit.outstanding++;
    while (credit.outstanding >= MAX_UNCREDITED) await new Promise<void>((r) => (credit.wake = r));
  };
  return {
    flush,
    full: () => batch!.storedSize() >= BATCH_BYTES,
    done: () => credits.delete(id),
  };
}

async function chunkFile(id: number, file: File) {
  const engine = new ChunkEngine('default');
  const out = sink(id);
  const recipeFps: Uint8Array[] = [];
  const recipeLens: Uint32Array[] = [];
  let bytes = 0;
  let reported = 0;

  const take = (n: number) => {
    if (!n) return;
    const fps = engine.fingerprints();
    recipeFps.push(fps);
    recipeLens.push(engine.lengths());
    const idx = fresh(fps, n);
    if (idx.length) batch!.addFromEngine(engine, idx);
  };

  try {
    for await (const block of blocks(file)) {
      take(engine.push(block));
      bytes += block.byteLength;
      if (out.full()) await out.flush();
      if (bytes - reported >= PROGRESS_EVERY) {
        post({ type: 'progress', id, bytes });
        reported = bytes;
      }
    }
    take(engine.finish());
    await out.flush();
    const n = recipeFps.reduce((a, f) => a + f.length, 0) / FP_LEN;
    const fps = new Uint8Array(n * FP_LEN);
    const lengths = new Uint32Array(n);
    let at = 0;
    recipeFps.forEach((f, k) => {
      fps.set(f, at * FP_LEN);
      lengths.set(recipeLens[k], at);
      at += recipeLens[k].length;
    });
    post({ type: 'chunked', id, fps, lengths, bytes }, [fps.buffer, lengths.buffer]);
  } finally {
    engine.free();
    out.done();
  }
}

/** Entry points of segment jobs (sent by the page once the previous segment is selected). */
const entries = new Map<number, { value?: number; wake?: (v: number) => void }>();

function entryOf(id: number): Promise<number> {
  const e = entries.get(id);
  if (e?.value !== undefined) return Promise.resolve(e.value);
  return new Promise((resolve) => entries.set(id, { wake: resolve }));
}

/**
 * One segment of a large file (SS-CDC): read it (plus 32 bytes of history and up to 64 KiB
 * past its end), mark the candidates (stage 1, in parallel with the other workers' segments),
 * wait for where the previous segment's chunks end, pick the cuts (stage 2, microseconds),
 * pass the exit on at once, then hash and pack this segment's chunks.
 */
async function chunkSegment(id: number, file: File, start: number, stop: number) {
  const seg = new SegmentChunker(file.size, start, stop);
  const out = sink(id);
  try {
    // One read per segment (a segment is a few MiB): fewer calls than 1 MiB blocks.
    seg.push(new Uint8Array(await file.slice(seg.readFrom(), seg.readTo()).arrayBuffer()));
    seg.scan();
    post({ type: 'progress', id, bytes: stop - start });
    const entry = await entryOf(id);
    if (Number.isNaN(entry)) throw new Error('an earlier segment of this file failed');
    const n = seg.select(entry);
    post({ type: 'segmentExit', id, exit: seg.exit() });
    seg.hash();
    const fps = seg.fingerprints();
    const lengths = seg.lengths();
    const idx = fresh(fps, n);
    if (idx.length) batch!.addFromSegment(seg, idx);
    await out.flush();
    post({ type: 'chunked', id, fps, lengths, bytes: stop - start }, [fps.buffer, lengths.buffer]);
  } finally {
    seg.free();
    entries.delete(id);
    out.done();
  }
}

scope.onmessage = async (event: MessageEvent<WorkerRequest>) => {
  const msg = event.data;
  switch (msg.type) {
    case 'init':
      await init({ module_or_path: msg.module });
      post({ type: 'ready' });
      return;
    case 'setKnown':
      known = new Set();
      for (let i = 0; i < msg.fps.length / FP_LEN; i++) known.add(fpHex(msg.fps, i));
      batch?.free();
      batch = new NewChunkBatch(msg.zstdLevel);
      return;
    case 'credit': {
      const c = credits.get(msg.id);
      if (c) {
        c.outstanding--;
        c.wake?.();
      }
      return;
    }
    case 'segmentEntry': {
      const e = entries.get(msg.id);
      if (e?.wake) e.wake(msg.entry);
      else entries.set(msg.id, { value: msg.entry });
      return;
    }
    case 'hashFile':
    case 'chunkFile':
    case 'chunkSegment':
      try {
        await (msg.type === 'hashFile'
          ? hashFile(msg.id, msg.file)
          : msg.type === 'chunkFile'
            ? chunkFile(msg.id, msg.file)
            : chunkSegment(msg.id, msg.file, msg.start, msg.stop));
      } catch (e) {
        post({ type: 'failed', id: msg.id, message: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
      }
  }
};
