/**
 * One file of a version restored into page memory (every chunk verified, as any restore),
 * up to a byte limit: for showing or comparing it in the page rather than saving it.
 */
import type { Api } from '../api/client';
import { startRestore, type RestoreItem } from './restore';

export interface Head {
  /** The file's first bytes, at most the limit. */
  bytes: Uint8Array<ArrayBuffer>;
  /** The file is longer than `bytes`. */
  truncated: boolean;
}

/** The first `limit` bytes of `item` of `version`; the restore stops there, or when `signal` aborts. */
export async function restoreHead(
  api: Api,
  version: number,
  item: RestoreItem,
  limit: number,
  signal?: AbortSignal,
): Promise<Head> {
  signal?.throwIfAborted();
  const job = await startRestore({ api, items: [item], format: 'file', version });
  const stop = () => job.cancel();
  signal?.addEventListener('abort', stop);
  if (signal?.aborted) stop();
  try {
    // A restore without `output` hands its bytes to the page as `stream`.
    const reader = job.stream!.getReader();
    const parts: Uint8Array[] = [];
    let n = 0;
    while (n < limit) {
      const r = await reader.read();
      if (r.done) break;
      parts.push(r.value);
      n += r.value.length;
    }
    signal?.throwIfAborted();
    if (n < item.size) job.cancel();
    const bytes = new Uint8Array(Math.min(n, limit));
    let at = 0;
    for (const p of parts) {
      const take = Math.min(p.length, bytes.length - at);
      bytes.set(p.subarray(0, take), at);
      at += take;
    }
    return { bytes, truncated: item.size > bytes.length };
  } finally {
    signal?.removeEventListener('abort', stop);
  }
}
