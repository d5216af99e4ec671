/**
 * The block port: how a restore's output travels from the assembler worker to whatever
 * consumes it, over a `MessagePort`, block by block, with flow control. One protocol for
 * every consumer: the download worker (public/dl/sw.js speaks it too), and the page for a
 * picked file, a Blob or a preview (`portReader`).
 *
 * Writer → reader: `{ type: 'data', block, offset, length }` (an ArrayBuffer, transferred,
 * and the view of it to take), `{ type: 'end' }`, `{ type: 'abort', message }`.
 * Reader → writer: `{ type: 'pulled' }` each time the consumer took a block (the writer keeps
 * at most IN_FLIGHT blocks not taken), `{ type: 'cancel' }` if the consumer gave up.
 */
import { ownsBuffer } from './blocks';

/** Blocks sent and not yet taken by the consumer (4 MiB each). */
export const IN_FLIGHT = 4;
/** How long the consumer may take to take a first block (a download that never started). */
const START_MS = 60_000;

export type PortMessage =
  | { type: 'data'; block: ArrayBuffer; offset: number; length: number }
  | { type: 'end' }
  | { type: 'abort'; message: string };

export type PortReply = { type: 'pulled' } | { type: 'cancel' };

/** The consumer stopped taking blocks, or never started. */
export class PortClosedError extends Error {}

/**
 * Writes blocks into `port`. `write` resolves once fewer than IN_FLIGHT blocks are not taken;
 * `close` once the consumer has taken the last one. A consumer that cancels fails the next
 * write or the close with `PortClosedError`; so does one that takes nothing for START_MS.
 */
export class PortWriter {
  private inFlight = 0;
  private cancelled = false;
  private started = false;
  /** Ended by `close` or `abort`: nothing more is sent. */
  private finished = false;
  /** Why `abort` ended the output, for a write or close waiting on the consumer. */
  private aborted: string | null = null;
  private wake: (() => void) | null = null;

  constructor(
    private port: MessagePort,
    /** What a cancelled consumer is called in the error ("The download was cancelled."). */
    private consumer = 'download',
  ) {
    port.onmessage = (e: MessageEvent<PortReply>) => {
      if (e.data.type === 'pulled') {
        this.inFlight--;
        this.started = true;
      } else if (e.data.type === 'cancel') this.cancelled = true;
      this.wake?.();
    };
  }

  private changed(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = this.started
        ? undefined
        : setTimeout(
            () =>
              reject(
                new PortClosedError(`The ${this.consumer} did not start: it took none of the restore. Try again.`),
              ),
            START_MS,
          );
      this.wake = () => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
    });
  }

  private check() {
    if (this.aborted !== null) throw new PortClosedError(this.aborted);
    if (this.cancelled) throw new PortClosedError(`The ${this.consumer} was cancelled.`);
  }

  /** Whether a write or close may wait for the consumer. */
  private waiting(): boolean {
    return !this.cancelled && this.aborted === null;
  }

  private post(msg: PortMessage, list: Transferable[] = []) {
    this.port.postMessage(msg, list);
  }

  /** Sends `block` (transferred when a BlockWriter made it, else copied first). */
  async write(block: Uint8Array): Promise<void> {
    this.check();
    const own = ownsBuffer(block) ? block : block.slice();
    const buffer = own.buffer as ArrayBuffer;
    this.post({ type: 'data', block: buffer, offset: own.byteOffset, length: own.byteLength }, [buffer]);
    this.inFlight++;
    while (this.inFlight >= IN_FLIGHT && this.waiting()) await this.changed();
    this.check();
  }

  /** Ends the output and waits until the consumer has taken all of it. */
  async close(): Promise<void> {
    this.check();
    this.post({ type: 'end' });
    while (this.inFlight > 0 && this.waiting()) await this.changed();
    this.check();
    this.finished = true;
    this.port.close();
  }

  /** Fails the output (a download fails rather than leaving a truncated file). */
  abort(message: string) {
    if (this.finished) return;
    this.finished = true;
    this.aborted = message;
    this.post({ type: 'abort', message });
    this.port.close();
    this.wake?.();
  }
}

/**
 * The page's end of a block port, as a stream: each block read is acknowledged (`pulled`),
 * cancelling the stream cancels the writer. The stream fails when the writer aborts, or when
 * `signal` does (the writer may be gone without a word: a crashed worker).
 */
export function portReader(port: MessagePort, signal?: AbortSignal): ReadableStream<Uint8Array> {
  const queue: Uint8Array[] = [];
  let ended = false;
  let failed: Error | null = null;
  let wanted: (() => void) | null = null;
  port.onmessage = (e: MessageEvent<PortMessage>) => {
    const d = e.data;
    if (d.type === 'data') queue.push(new Uint8Array(d.block, d.offset, d.length));
    else if (d.type === 'end') ended = true;
    else failed = new Error(d.message);
    wanted?.();
  };
  signal?.addEventListener('abort', () => {
    const r: unknown = signal.reason;
    failed ??= r instanceof Error ? r : new Error(String(r));
    wanted?.();
  });
  return new ReadableStream<Uint8Array>(
    {
      async pull(ctl) {
        while (!queue.length && !ended && !failed) await new Promise<void>((r) => (wanted = r));
        wanted = null;
        const block = queue.shift();
        if (failed) {
          port.close();
          ctl.error(failed);
        } else if (block) {
          ctl.enqueue(block);
          port.postMessage({ type: 'pulled' } satisfies PortReply);
        } else {
          port.close();
          ctl.close();
        }
      },
      cancel() {
        port.postMessage({ type: 'cancel' } satisfies PortReply);
        port.close();
      },
    },
    { highWaterMark: 0 },
  );
}
