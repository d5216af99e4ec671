/**
 * The access token arrives in the URL fragment printed by `npm start` (`#token=...`, never
 * sent to the server in a request line or logs) and is kept in localStorage afterwards.
 */
const KEY = 'ditto.token';

export function takeTokenFromUrl(loc: Location = window.location, store: Storage = localStorage): string | null {
  const params = new URLSearchParams(loc.hash.replace(/^#/, ''));
  const fromUrl = params.get('token');
  if (fromUrl) {
    saveToken(fromUrl, store);
    params.delete('token');
    const rest = params.toString();
    history.replaceState(null, '', loc.pathname + loc.search + (rest ? `#${rest}` : ''));
    return fromUrl;
  }
  return store.getItem(KEY);
}

/** Keeps a token for the next visits, as one from the link is kept. */
export function saveToken(token: string, store: Storage = localStorage) {
  store.setItem(KEY, token);
}
