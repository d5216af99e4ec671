import { describe, expect, it } from 'vitest';
import { sanitizeEntryName, UniqueNames } from './sanitize';

describe('sanitizeEntryName', () => {
  it('keeps ordinary relative paths', () => {
    expect(sanitizeEntryName('package.json')).toBe('package.json');
    expect(sanitizeEntryName('lib/a.js')).toBe('lib/a.js');
    expect(sanitizeEntryName('dir with space/ü.txt')).toBe('dir with space/ü.txt');
  });

  it('never lets a path climb out or start at the root', () => {
    const hostile = [
      '../../etc/passwd',
      '/etc/passwd',
      '//server/share/x',
      'a/../../b',
      '..\\..\\windows\\system32\\x.dll',
      'C:\\Users\\x',
      'C:/x',
      './././a',
      'a/./b/',
      'a//b',
      '\u0000../x',
      '. ./x',
    ];
    for (const h of hostile) {
      const s = sanitizeEntryName(h);
      expect(s, h).not.toBeNull();
      const segs = s!.split('/');
      expect(s!.startsWith('/'), h).toBe(false);
      expect(
        segs.every((x) => x !== '' && x !== '.' && x !== '..' && !/^\.+$/.test(x)),
        `${h} -> ${s}`,
      ).toBe(true);
      expect(s, h).not.toMatch(/[\u0000-\u001f:\\]/);
    }
    expect(sanitizeEntryName('../../etc/passwd')).toBe('etc/passwd');
    expect(sanitizeEntryName('a/../../b')).toBe('a/b');
    expect(sanitizeEntryName('C:\\Users\\x')).toBe('Users/x');
    expect(sanitizeEntryName('a//b')).toBe('a/b');
  });

  it('returns null when nothing safe is left', () => {
    for (const h of ['', '/', '..', '../..', '.', '...', '\u0001', 'C:'])
      expect(sanitizeEntryName(h), JSON.stringify(h)).toBeNull();
  });

  it('restores a folder relative to itself and ignores paths outside it', () => {
    expect(sanitizeEntryName('lib/x/a.js', 'lib')).toBe('x/a.js');
    expect(sanitizeEntryName('lib/x/a.js', 'lib/')).toBe('x/a.js');
    expect(sanitizeEntryName('libx/a.js', 'lib')).toBeNull();
    expect(sanitizeEntryName('lib', 'lib')).toBeNull();
    expect(sanitizeEntryName('lib/../../x', 'lib')).toBe('x');
  });

  it('cuts over-long segments to 255 bytes', () => {
    const s = sanitizeEntryName('d/' + 'é'.repeat(300))!;
    expect(new TextEncoder().encode(s.split('/')[1]).length).toBeLessThanOrEqual(255);
    // 3 bytes a character: 85 fit, 86 do not.
    expect(sanitizeEntryName('€'.repeat(85))).toBe('€'.repeat(85));
    expect(sanitizeEntryName('€'.repeat(86))).toBe('€'.repeat(85));
  });
});

describe('UniqueNames', () => {
  it('renames collisions, case-insensitively', () => {
    const u = new UniqueNames();
    expect(u.claim('a/b.txt')).toBe('a/b.txt');
    expect(u.claim('a/b.txt')).toBe('a/b (2).txt');
    expect(u.claim('A/B.TXT')).toBe('A/B (3).TXT');
    expect(u.claim('a/.rc')).toBe('a/.rc');
    expect(u.claim('a/.rc')).toBe('a/.rc (2)');
    expect(u.claim('x.d/file')).toBe('x.d/file');
    expect(u.claim('x.d/file')).toBe('x.d/file (2)');
  });
  it('takes composed and decomposed accents for one name', () => {
    const u = new UniqueNames();
    expect(u.claim('caf\u00e9.txt')).toBe('caf\u00e9.txt');
    expect(u.claim('cafe\u0301.txt')).toBe('cafe\u0301 (2).txt');
    expect(u.claim('CAFE\u0301.TXT')).toBe('CAFE\u0301 (3).TXT');
  });
});
