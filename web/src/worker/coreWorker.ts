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
import init, { ChunkEngine, ChunkPacker, FileHasher } from '../wasm-pkg/wasm_core.js';
import type { NewChunks, WorkerRequest, WorkerResponse } from './protocol';
import { FP_LEN, fpHex } from '../backup/hex';

const scope = self as unknown as DedicatedWorkerGlobalScope;
const post = (msg: WorkerResponse, transfer: Transferable[] = []) => scope.postMessage(msg, transfer);

/** Report progress at most this often, so messages do not dominate small blocks. */
const PROGRESS_EVERY = 8 << 20;
/** Read files in blocks of this size (Blob.stream()'s ~64 KiB is too small per call). */
const BLOCK = 1 << 20;
/** Post new chunks once this many stored bytes are collected. */
const BATCH_BYTES = 2 << 20;
const MAX_UNCREDITED = 2;

let known = new Set<string>();
let packer: ChunkPacker | null = null;
const credits = new Map<number, { outstanding: number; wake?: () => void }>();

async function* blocks(file: File): AsyncGenerator<Uint8Array> {
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

class Batch {
  fps: Uint8Array[] = [];
  codecs: Uint8Array[] = [];
  raw: Uint32Array[] = [];
  storedLens: Uint32Array[] = [];
  stored: Uint8Array[] = [];
  bytes = 0;
  count = 0;

  take(): NewChunks {
    const cat = <T extends Uint8Array | Uint32Array>(parts: T[], make: (n: number) => T): T => {
      const out = make(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) {
        out.set(p as never, at);
        at += p.length;
      }
      return out;
    };
    const msg = {
      fps: cat(this.fps, (n) => new Uint8Array(n)),
      codecs: cat(this.codecs, (n) => new Uint8Array(n)),
      rawLengths: cat(this.raw, (n) => new Uint32Array(n)),
      storedLengths: cat(this.storedLens, (n) => new Uint32Array(n)),
      stored: cat(this.stored, (n) => new Uint8Array(n)),
    };
    Object.assign(this, new Batch());
    return msg;
  }
}

async function chunkFile(id: number, file: File) {
  const engine = new ChunkEngine('default');
  const credit = { outstanding: 0 } as { outstanding: number; wake?: () => void };
  credits.set(id, credit);
  const recipeFps: Uint8Array[] = [];
  const recipeLens: Uint32Array[] = [];
  const batch = new Batch();
  let bytes = 0;
  let reported = 0;

  const flush = async () => {
    if (!batch.count) return;
    const msg = batch.take();
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

  const take = (n: number) => {
    if (!n) return;
    const fps = engine.fingerprints();
    const lengths = engine.lengths();
    recipeFps.push(fps);
    recipeLens.push(lengths);
    const offsets = engine.offsets();
    const starts: number[] = [];
    const lens: number[] = [];
    for (let i = 0; i < n; i++) {
      const hex = fpHex(fps, i);
      if (known.has(hex)) continue;
      known.add(hex);
      starts.push(offsets[i] - offsets[0]);
      lens.push(lengths[i]);
      batch.fps.push(fps.slice(i * FP_LEN, (i + 1) * FP_LEN));
    }
    if (!starts.length) return;
    const count = packer!.pack(engine.batchBytes(), Uint32Array.from(starts), Uint32Array.from(lens));
    batch.codecs.push(packer!.codecs());
    batch.raw.push(Uint32Array.from(lens));
    const storedLens = packer!.storedLengths();
    batch.storedLens.push(storedLens);
    const stored = packer!.storedBytes();
    batch.stored.push(stored);
    batch.bytes += stored.byteLength;
    batch.count += count;
  };

  try {
    for await (const block of blocks(file)) {
      take(engine.push(block));
      bytes += block.byteLength;
      if (batch.bytes >= BATCH_BYTES) await flush();
      if (bytes - reported >= PROGRESS_EVERY) {
        post({ type: 'progress', id, bytes });
        reported = bytes;
      }
    }
    take(engine.finish());
    await flush();
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
    credits.delete(id);
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
      packer?.free();
      packer = new ChunkPacker(msg.zstdLevel);
      return;
    case 'credit': {
      const c = credits.get(msg.id);
      if (c) {
        c.outstanding--;
        c.wake?.();
      }
      return;
    }
    case 'hashFile':
    case 'chunkFile':
      try {
        await (msg.type === 'hashFile' ? hashFile(msg.id, msg.file) : chunkFile(msg.id, msg.file));
      } catch (e) {
        post({ type: 'failed', id: msg.id, message: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
      }
  }
};
