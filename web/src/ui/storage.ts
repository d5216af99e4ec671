/**
 * The page's localStorage where the browser may block site data: there even reading
 * `window.localStorage` throws (a SecurityError), and a write may fail (storage full or
 * refused). What the page keeps there is a convenience, so it then works without it.
 */

/** The page's localStorage, or null where the browser blocks site data. */
export function siteStorage(): Storage | null {
  try {
    return localStorage;
  } catch {
    return null;
  }
}

/**
 * `fn` on the page's localStorage; `fallback` where the browser blocks site data or `fn`
 * throws, with a warning that `what` is not kept.
 */
export function withStorage<T>(what: string, fn: (s: Storage) => T, fallback: T): T {
  try {
    return fn(localStorage);
  } catch (e) {
    console.warn(`${what} not kept:`, e);
    return fallback;
  }
}
