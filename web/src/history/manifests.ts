/**
 * Manifests for comparing versions and following a file through them. A committed version
 * never changes, so a manifest fetched once is kept (the most recent few, by id and server)
 * and a second comparison or history of the same versions makes no request.
 */
import type { Api, Manifest } from '../api/client';

const KEEP = 64;
const cache = new Map<string, Promise<Manifest>>();

/** Version `id`'s manifest, from the cache or the server. */
export function loadManifest(api: Api, id: number): Promise<Manifest> {
  const key = `${api.base}|${api.repo}|${id}`;
  let m = cache.get(key);
  if (m) {
    cache.delete(key); // re-inserted below: most recently used last
  } else {
    m = api.version(id).then((v) => v.manifest);
    // A failed fetch is not kept: the next attempt asks again.
    m.catch(() => cache.delete(key));
  }
  cache.set(key, m);
  while (cache.size > KEEP) cache.delete(cache.keys().next().value!);
  return m;
}

/**
 * How a read of several manifests runs: `parallel` requests at a time; `signal` is aborted by
 * a caller that no longer wants them (its view closed), and the read stops taking ids.
 */
export interface ReadOptions {
  parallel?: number;
  signal?: AbortSignal;
}

/** Several manifests, at most `parallel` requests at a time, in the order of `ids`. */
export async function loadManifests(
  api: Api,
  ids: readonly number[],
  onLoaded?: (done: number) => void,
  opts: ReadOptions = {},
): Promise<Manifest[]> {
  const out: Manifest[] = new Array(ids.length);
  let done = 0;
  await eachManifest(
    api,
    ids,
    (m, i) => {
      out[i] = m;
      onLoaded?.(++done);
    },
    opts,
  );
  return out;
}

/**
 * Calls `f` with each of several manifests (and its index in `ids`) as it arrives, at most
 * `parallel` requests at a time, for a caller that keeps only what it reads of them: a
 * source's thousands of versions are not all held at once. Once one read fails, or `signal`
 * is aborted, no further id is asked for (the result is lost anyway) and `f` is not called
 * again; the promise rejects with that failure or the signal's reason.
 */
export async function eachManifest(
  api: Api,
  ids: readonly number[],
  f: (m: Manifest, i: number) => void,
  { parallel = 4, signal }: ReadOptions = {},
): Promise<void> {
  let next = 0;
  let failed = false;
  const worker = async () => {
    try {
      while (next < ids.length && !failed) {
        signal?.throwIfAborted();
        const i = next++;
        const m = await loadManifest(api, ids[i]);
        if (failed) return;
        signal?.throwIfAborted();
        f(m, i);
      }
    } catch (e) {
      failed = true;
      throw e;
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, ids.length) }, worker));
}
