/**
 * The access token arrives in the URL fragment printed by `npm start` (`#token=...`, never
 * sent to the server in a request line or logs) and is kept in localStorage afterwards.
 */
const KEY = 'ditto.token';

export function takeTokenFromUrl(loc: Location = window.location, store: Storage = localStorage): string | null {
  const params = new URLSearchParams(loc.hash.replace(/^#/, ''));
  const fromUrl = params.get('token');
  if (fromUrl) {
    store.setItem(KEY, fromUrl);
    params.delete('token');
    const rest = params.toString();
    history.replaceState(null, '', loc.pathname + loc.search + (rest ? `#${rest}` : ''));
    return fromUrl;
  }
  return store.getItem(KEY);
}
