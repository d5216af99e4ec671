/**
 * What the page's retries share: which failures are worth another try, and the pause
 * between tries (docs/BACKUP.md and docs/STATUS.md say which requests retry, and how often).
 */
import { ApiError } from './client';

/**
 * Worth another try: an `ApiError` that says so (the network, the server briefly unable),
 * or any other failure of a request but its being aborted (a response cut off midway fails
 * as a plain `TypeError`).
 */
export function isTransient(e: unknown): boolean {
  return e instanceof ApiError ? e.transient : !(e instanceof DOMException && e.name === 'AbortError');
}

/** Waits `ms`, or rejects with the signal's reason once it aborts. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const done = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', done);
      resolve();
    }, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
