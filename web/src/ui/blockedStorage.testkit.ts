/**
 * For tests of the page where the browser blocks site data: there reading
 * `window.localStorage` itself throws a SecurityError (ui/storage.ts).
 */

/** Makes every read of `localStorage` throw, as such a browser does. */
export function blockSiteData(): void {
  Object.defineProperty(globalThis, 'localStorage', {
    configurable: true,
    get() {
      throw new DOMException('The operation is insecure.', 'SecurityError');
    },
  });
}

/** Undoes [`blockSiteData`] (and any `localStorage` a test set). */
export function unblockSiteData(): void {
  delete (globalThis as { localStorage?: Storage }).localStorage;
}
