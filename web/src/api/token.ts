/**
 * The access token arrives in the URL fragment printed by `npm start` (`#token=...`, never
 * sent to the server in a request line or logs) and is kept in localStorage afterwards.
 */
import { siteStorage } from '../ui/storage';

const KEY = 'ditto.token';

/**
 * `raw` as a token: without spaces, line breaks and the invisible characters a copy from a
 * chat or a PDF brings (zero-width spaces, byte-order marks), which would make every request's
 * `Authorization` header invalid: `fetch` then fails before anything is sent, and the page
 * would only say the server is unreachable. Tokens are printable ASCII (the server's are hex).
 */
export function cleanToken(raw: string): string {
  return raw.replace(/[^\x21-\x7e]/g, '');
}

export function takeTokenFromUrl(
  loc: Location = window.location,
  store: Storage | null = siteStorage(),
): string | null {
  const params = new URLSearchParams(loc.hash.replace(/^#/, ''));
  const fromUrl = cleanToken(params.get('token') ?? '');
  if (fromUrl) {
    saveToken(fromUrl, store);
    params.delete('token');
    const rest = params.toString();
    history.replaceState(null, '', loc.pathname + loc.search + (rest ? `#${rest}` : ''));
    return fromUrl;
  }
  // Kept by an earlier page that did not clean it: cleaned as it is read.
  let kept = '';
  try {
    kept = cleanToken(store?.getItem(KEY) ?? '');
  } catch (e) {
    // Site data blocked: no token kept, and the page asks for one.
    console.warn('saved token not readable:', e);
  }
  return kept || null;
}

/**
 * Keeps a token for the next visits, as one from the link is kept. Where the browser keeps no
 * site data it is not kept: this visit still uses it, and the next one asks for it again.
 */
export function saveToken(token: string, store: Storage | null = siteStorage()) {
  try {
    store?.setItem(KEY, cleanToken(token));
  } catch (e) {
    console.warn('token not kept for the next visits:', e);
  }
}
