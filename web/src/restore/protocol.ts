/**
 * The restore's worker protocols, over the worker bridge: the restore workers' (decode and
 * verify chunks with wasm-core) and the assembler's (put them in order into the output).
 */
import type { Method } from '../worker/bridge';
import type { AssembleItem, AssemblePlan, WindowChunks } from './assemble';

/**
 * Every chunk verified: its bytes back to back in `raw`, chunk k `lengths[k]` bytes at
 * offsets[k], fps n*20 in order, sizes[k] its raw length and crcs[k] its CRC-32 (the zip's
 * checksums are combined from them). For a zip the bytes are each chunk's deflate fragment
 * (wasm-core's `deflate`), else its raw bytes (then `lengths` and `sizes` are the same).
 */
export interface Verified {
  type: 'verified';
  fps: Uint8Array;
  offsets: Uint32Array;
  lengths: Uint32Array;
  sizes: Uint32Array;
  crcs: Uint32Array;
  raw: Uint8Array;
  /** Fingerprints (20 bytes each) the worker's restore session kept from this answer. */
  kept: Uint8Array;
}

/** Chunk `index` (fingerprint `fp`) is damaged: `reason` says how. */
export interface Damaged {
  type: 'bad';
  index: number;
  fp: string;
  reason: string;
}

export interface RestoreApi {
  /**
   * A `chunks/get` answer (transferred): decode every chunk, recompute its fingerprint and
   * compare; the first `requested` are answered, the rest are the base chains of its deltas.
   * `restore` names the restore: the worker keeps one session per restore, which holds what
   * its answers carried as stored so that later answers need not carry it again. `zip`:
   * answer each chunk's deflate fragment instead of its raw bytes.
   */
  verify: Method<{ bundle: Uint8Array; requested: number; restore: number; zip: boolean }, Verified | Damaged>;
  /** Restore `restore` is over: its session's chunks are let go. */
  endRestore: Method<number, null>;
  /** Runs the restore's code on a synthetic answer, so that the engine optimises it before a restore needs it. */
  warmUp: Method<null, null>;
  /**
   * A file on disk cut with the backup's chunker and every chunk named by its lookup key
   * (plain SHA-1, 20 bytes each): a restore into a folder compares it with the recipe to skip
   * the file (a key equals a stored chunk's name only for that chunk, docs/FORMAT.md).
   */
  fingerprintFile: Method<File, Uint8Array>;
}

/** A restore's assembly (assemble.ts), run by the assembler worker. */
export interface AssembleJob {
  format: 'zip' | 'file' | 'folder';
  items: AssembleItem[];
  plan: AssemblePlan;
  /** zip and file: the block port the output goes into (transferred). */
  port?: MessagePort;
  /** What the port's consumer is called in errors ("download", "restore"). */
  consumer?: string;
  /** folder: the folder the files are written into. */
  folder?: FileSystemDirectoryHandle;
}

/** The page to the assembly: a request's verified chunks, or stop (cancelled, or a fetch failed). */
export type AssembleSignal = ({ type: 'chunks' } & WindowChunks) | { type: 'stop'; message: string };

/** The assembly to the page: it moved to a window (send the next one's chunks), or its progress. */
export type AssembleEvent = { type: 'window'; window: number } | { type: 'progress'; bytes: number; files: number };

export interface AssembleApi {
  /** Writes the output; answers its bytes and files once the consumer has taken all of it. */
  assemble: Method<AssembleJob, { bytes: number; files: number }, AssembleEvent, AssembleSignal>;
}
