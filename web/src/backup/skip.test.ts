import { describe, expect, it } from 'vitest';
import { relativeToRoot, skippedPath, skipReason } from './backup';
import { DEFAULT_SETTINGS, normalizeSettings } from './sourcesettings';

describe('skipped files', () => {
  it('classifies read errors: gone, changed (only when shown), else unreadable', () => {
    expect(skipReason('NotFoundError: A requested file or directory could not be found', false)).toBe('deleted');
    expect(skipReason('NotReadableError: The requested file could not be read', true)).toBe('changed');
    expect(skipReason('NotReadableError: The requested file could not be read', false)).toBe('unreadable');
    expect(skipReason('worker crashed', false)).toBe('unreadable');
  });
  it('makes any picker path one the manifest accepts', () => {
    expect(skippedPath('a/b.txt')).toBe('a/b.txt');
    expect(skippedPath('/a//./b/')).toBe('a/b');
    expect(skippedPath('a/../b')).toBe('a/(..)/b');
    expect(skippedPath('')).toBe('(unnamed)');
  });
  it('keeps a file handle and the skipped items when paths become relative to the folder', async () => {
    const reopen = async () => new File(['x'], 'b');
    const rel = relativeToRoot({
      root: 'R',
      files: [{ path: 'R/b', file: new File(['x'], 'b'), reopen }],
      dirs: ['R', 'R/d'],
      skipped: [{ path: 'R/d/e', reason: 'unreadable: NotReadableError' }],
    });
    expect(rel.files[0].path).toBe('b');
    expect(rel.files[0].reopen).toBe(reopen);
    expect(rel.dirs).toEqual(['d']);
    expect(rel.skipped).toEqual([{ path: 'd/e', reason: 'unreadable: NotReadableError' }]);
  });
});

describe('source settings', () => {
  it('falls back to the defaults for missing or nonsensical values', () => {
    expect(normalizeSettings(undefined)).toEqual(DEFAULT_SETTINGS);
    expect(normalizeSettings({ sampleRate: 0.1, readAll: true })).toEqual({
      sampleRate: 0.1,
      readAll: true,
      excludes: [],
    });
    // Settings stored before excludes existed have none; stored patterns keep their lines.
    expect(normalizeSettings({ excludes: ['', 'node_modules/', '', '*.log', ''] }).excludes).toEqual([
      'node_modules/',
      '',
      '*.log',
    ]);
    expect(normalizeSettings({ excludes: 'x' as unknown as string[] }).excludes).toEqual([]);
    expect(normalizeSettings({ sampleRate: 0 }).sampleRate).toBe(0);
    for (const bad of [-1, 2, Number.NaN])
      expect(normalizeSettings({ sampleRate: bad }).sampleRate).toBe(DEFAULT_SETTINGS.sampleRate);
  });
});
