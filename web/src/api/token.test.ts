import { describe, expect, it } from 'vitest';
import { cleanToken } from './token';

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
