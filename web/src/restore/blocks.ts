/**
 * Output blocks for a restore's stream. A zip (or a file) is assembled from many small chunks
 * and headers; every piece that crosses a stream or reaches the sink costs a round of promises
 * and, for a download, a write into the browser's blob storage. Small pieces are copied into
 * blocks of `blockBytes` (one copy, which the sink makes anyway), pieces at least half a block
 * long pass through as they are, after the block before them.
 */

export const BLOCK_BYTES = 4 << 20;

/** The buffers of blocks a BlockWriter made: nothing else refers to them once taken. */
const made = new WeakSet<ArrayBufferLike>();

/**
 * Whether `b` is a block a BlockWriter made (a view of its own buffer, which the reader may
 * transfer), not a piece that passed through (a view of a chunk something else may hold).
 */
export function ownsBuffer(b: Uint8Array): boolean {
  return made.has(b.buffer);
}

/** The synchronous side: `push` pieces, `take` the blocks completed so far, `flush` at the end. */
export class BlockWriter {
  private block: Uint8Array | null = null;
  private at = 0;
  private done: Uint8Array[] = [];

  constructor(private blockBytes = BLOCK_BYTES) {
    if (!(blockBytes >= 1)) throw new RangeError('blockBytes must be at least 1');
  }

  push(p: Uint8Array) {
    if (p.length >= this.blockBytes / 2) {
      this.flush();
      if (p.length) this.done.push(p);
      return;
    }
    let from = 0;
    while (from < p.length) {
      if (!this.block) {
        this.block = new Uint8Array(this.blockBytes);
        made.add(this.block.buffer);
      }
      const n = Math.min(p.length - from, this.blockBytes - this.at);
      this.block.set(p.subarray(from, from + n), this.at);
      this.at += n;
      from += n;
      if (this.at === this.blockBytes) {
        this.done.push(this.block);
        this.block = null;
        this.at = 0;
      }
    }
  }

  /** Ends the block being filled (call at the end of the output). */
  flush() {
    if (this.at) this.done.push(this.block!.subarray(0, this.at));
    this.block = null;
    this.at = 0;
  }

  /** The blocks completed since the last call, in order. */
  take(): Uint8Array[] {
    const out = this.done;
    this.done = [];
    return out;
  }
}

/** `parts` (`size` bytes in all) as one buffer: the only part itself, else a copy of them. */
export function concat(parts: Uint8Array[], size: number): Uint8Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
