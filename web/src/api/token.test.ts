import { afterEach, describe, expect, it, vi } from 'vitest';
import { cleanToken, saveToken, takeTokenFromUrl } from './token';
import { blockSiteData, unblockSiteData } from '../ui/blockedStorage.testkit';

describe('cleanToken', () => {
  it('drops what a copy brings around and inside a token, which no header may carry', () => {
    const t = '3f2a9c01d4e5b6a7c8d9e0f1a2b3c4d5e6f708192a3b4c5d';
    expect(cleanToken(` ${t}\n`)).toBe(t);
    expect(cleanToken(`\uFEFF${t.slice(0, 10)}\u200B${t.slice(10)}\u00A0`)).toBe(t);
    expect(cleanToken(`${t.slice(0, 20)}\r\n${t.slice(20)}`)).toBe(t);
    expect(cleanToken('\u200B \t')).toBe('');
    // What the fetch API accepts as a header value, once cleaned.
    expect(() => new Headers({ Authorization: `Bearer ${cleanToken(`\u200B${t}\n`)}` })).not.toThrow();
  });
});

describe('a browser that blocks site data', () => {
  const T = '3f2a9c01d4e5b6a7';
  const at = (hash: string) => ({ hash, pathname: '/', search: '' }) as Location;
  /** Storage as such a browser gives it: every read and write throws. */
  const blocked = {
    getItem: () => {
      throw new DOMException('Access is denied for this document.', 'SecurityError');
    },
    setItem: () => {
      throw new DOMException('Access is denied for this document.', 'SecurityError');
    },
  } as unknown as Storage;

  afterEach(() => {
    vi.unstubAllGlobals();
    vi.restoreAllMocks();
    unblockSiteData();
  });

  it('still takes the token of the link, and finds none kept, instead of throwing at first render', () => {
    vi.spyOn(console, 'warn').mockImplementation(() => {});
    vi.stubGlobal('history', { replaceState: vi.fn() });
    expect(takeTokenFromUrl(at(`#token=${T}`), blocked)).toBe(T);
    expect(takeTokenFromUrl(at(''), blocked)).toBeNull();
    expect(() => saveToken(T, blocked)).not.toThrow();
  });

  it('tolerates `window.localStorage` itself throwing (the default store)', () => {
    vi.spyOn(console, 'warn').mockImplementation(() => {});
    vi.stubGlobal('history', { replaceState: vi.fn() });
    blockSiteData();
    expect(takeTokenFromUrl(at(''))).toBeNull();
    expect(takeTokenFromUrl(at(`#token=${T}`))).toBe(T);
    expect(() => saveToken(T)).not.toThrow();
  });
});
