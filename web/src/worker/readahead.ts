/**
 * Read-ahead for a worker's queue of jobs: every job's reads are issued as soon as the job
 * arrives, in job order, while earlier jobs are still being chunked — so the browser's file
 * reads (each one a round trip to the browser process) overlap with each other and with
 * the Wasm work instead of running one after another.
 *
 * Why: in headless Chromium a `Blob.slice().arrayBuffer()` costs ~2 ms even for a tiny
 * file. Reading typescript 5.6.3 (121 files, 22 MB) one block after another took 220-330 ms
 * per version; with reads in flight side by side it took 136-160 ms, and the worker's
 * chunk + SHA-1 of those bytes is ~45 ms. Without read-ahead a backup of typescript-10
 * spent ~300 ms per worker per version waiting on reads against ~20-180 ms of compute.
 *
 * Memory stays bounded: at most `budget` bytes are read but not yet consumed (one block is
 * always allowed, so a block larger than the budget cannot stall the queue). Blocks are
 * consumed in order per stream; a stream closed early (its job failed) drops its blocks.
 */
export interface BlockStream extends AsyncIterable<Uint8Array> {
  /** Stops reading this stream and releases what it holds (safe to call twice). */
  close(): void;
}

interface Pending {
  start: number;
  stop: number;
  read?: Promise<Uint8Array>;
}

interface Stream {
  blob: Blob;
  blocks: Pending[];
  /** Index of the next block to issue. */
  issued: number;
  closed: boolean;
}

export class ReadAhead {
  private streams: Stream[] = [];
  private held = 0;

  constructor(
    /** Bytes read ahead but not yet consumed, across all streams. */
    private budget: number,
    /** Size of one read. */
    private block: number,
  ) {}

  /**
   * `blob`'s bytes `start..stop` as blocks of at most `block` bytes (default: this reader's),
   * read ahead.
   */
  open(blob: Blob, start = 0, stop = blob.size, block = this.block): BlockStream {
    const blocks: Pending[] = [];
    for (let at = start; at < stop; at += block) blocks.push({ start: at, stop: Math.min(stop, at + block) });
    const s: Stream = { blob, blocks, issued: 0, closed: false };
    this.streams.push(s);
    this.issue();
    const close = () => {
      if (s.closed) return;
      s.closed = true;
      for (const b of s.blocks) if (b.read) this.held -= b.stop - b.start;
      s.blocks = [];
      this.streams = this.streams.filter((x) => x !== s);
      this.issue();
    };
    const self = this;
    return {
      close,
      async *[Symbol.asyncIterator]() {
        try {
          while (s.blocks.length) {
            const b = s.blocks[0];
            // Over budget and never issued (other streams hold the budget): read it anyway.
            if (!b.read) self.start(s, b);
            const bytes = await b.read!;
            s.blocks.shift();
            s.issued--;
            self.held -= b.stop - b.start;
            self.issue();
            yield bytes;
          }
        } finally {
          close();
        }
      },
    };
  }

  /** Bytes read ahead and not yet consumed (for tests and memory accounting). */
  get heldBytes() {
    return this.held;
  }

  /** Issues reads in stream order while the budget allows (always one when none is held). */
  private issue() {
    for (const s of this.streams) {
      while (s.issued < s.blocks.length) {
        const b = s.blocks[s.issued];
        if (this.held > 0 && this.held + (b.stop - b.start) > this.budget) return;
        this.start(s, b);
      }
    }
  }

  /** Starts reading `b`, the first unissued block of `s`. */
  private start(s: Stream, b: Pending) {
    // A block that is the whole blob is read without slicing it (see `streamBlocks`).
    const whole = b.start === 0 && b.stop === s.blob.size;
    b.read = (whole ? s.blob : s.blob.slice(b.start, b.stop)).arrayBuffer().then((buf) => new Uint8Array(buf));
    // A failed read surfaces when its block is consumed, not as an unhandled rejection.
    b.read.catch(() => {});
    this.held += b.stop - b.start;
    s.issued++;
  }
}

/**
 * All of `blob` through its own stream, in the pieces the browser hands out: no
 * `Blob.slice()`. A slice is a new blob, and registering it is a synchronous round trip to
 * the browser process: ~1.4 ms each in a busy worker, 318 of them (454 ms of the workers'
 * time) in a backup of typescript-10 read in 1 MiB slices (Chromium trace, 2026-11-23). The
 * first read starts now, so a queued job's reads overlap the jobs before it; the stream's
 * pipe bounds how far the browser reads ahead.
 */
export function streamBlocks(blob: Blob): BlockStream {
  const reader = blob.stream().getReader();
  const read = () => {
    const r = reader.read();
    r.catch(() => {}); // a failed read surfaces when its piece is consumed
    return r;
  };
  let next = read();
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    reader.cancel().catch(() => {});
  };
  return {
    close,
    async *[Symbol.asyncIterator]() {
      try {
        for (;;) {
          const r = await next;
          if (r.done || closed) return;
          next = read();
          yield r.value;
        }
      } finally {
        close();
      }
    },
  };
}
