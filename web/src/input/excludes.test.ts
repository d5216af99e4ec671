import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyExcludes, Excludes, normalizePatterns, PRESETS } from './excludes';
import type { PickedFolder } from './folder';

const ex = (...lines: string[]) => new Excludes(lines);

describe('Excludes: the cases of git’s gitignore(5)', () => {
  it('ignores blank lines and comments; \\# is a literal #', () => {
    const e = ex('', '# a.txt', '   ', '\\#b.txt');
    expect(e.excluded('a.txt', false)).toBe(false);
    expect(e.excluded('# a.txt', false)).toBe(false);
    expect(e.excluded('#b.txt', false)).toBe(true);
    expect(new Excludes(['# only a comment', '']).empty).toBe(true);
  });

  it('drops trailing spaces unless escaped', () => {
    expect(ex('a.txt   ').excluded('a.txt', false)).toBe(true);
    expect(ex('b\\ ').excluded('b ', false)).toBe(true);
    expect(ex('b\\ ').excluded('b', false)).toBe(false);
  });

  it('* does not cross a /, ? is one character, [] a class', () => {
    const e = ex('hello.*');
    expect(e.excluded('hello.c', false)).toBe(true);
    expect(e.excluded('src/hello.txt', false)).toBe(true);
    expect(e.excluded('hello', false)).toBe(false);
    expect(ex('a*c').excluded('a/c', false)).toBe(false);
    expect(ex('a*c').excluded('abbc', false)).toBe(true);
    expect(ex('f?o').excluded('foo', false)).toBe(true);
    expect(ex('f?o').excluded('f/o', false)).toBe(false);
    expect(ex('[ab].txt').excluded('b.txt', false)).toBe(true);
    expect(ex('[ab].txt').excluded('c.txt', false)).toBe(false);
    expect(ex('[!ab].txt').excluded('c.txt', false)).toBe(true);
    expect(ex('[!ab].txt').excluded('a.txt', false)).toBe(false);
    expect(ex('[a-c]x').excluded('bx', false)).toBe(true);
  });

  it('a leading or middle / anchors to the top; none matches at any depth', () => {
    const e = ex('/*.c');
    expect(e.excluded('cat-file.c', false)).toBe(true);
    expect(e.excluded('mozilla-sha1/sha1.c', false)).toBe(false);
    const mid = ex('doc/frotz');
    expect(mid.excluded('doc/frotz', false)).toBe(true);
    expect(mid.excluded('a/doc/frotz', false)).toBe(false);
    expect(ex('frotz').excluded('a/b/frotz', false)).toBe(true);
  });

  it('a trailing / matches folders only, and everything in them', () => {
    const e = ex('frotz/');
    expect(e.excluded('frotz', true)).toBe(true);
    expect(e.excluded('a/frotz', true)).toBe(true);
    expect(e.excluded('frotz', false)).toBe(false);
    expect(e.excluded('a/frotz/x.txt', false)).toBe(true);
    const d = ex('doc/frotz/');
    expect(d.excluded('doc/frotz', true)).toBe(true);
    expect(d.excluded('a/doc/frotz', true)).toBe(false);
  });

  it('** leading, trailing and in the middle', () => {
    expect(ex('**/foo').excluded('foo', false)).toBe(true);
    expect(ex('**/foo').excluded('a/b/foo', false)).toBe(true);
    expect(ex('**/foo/bar').excluded('x/foo/bar', false)).toBe(true);
    expect(ex('**/foo/bar').excluded('foo/x/bar', false)).toBe(false);
    const inside = ex('abc/**');
    expect(inside.excluded('abc/x', false)).toBe(true);
    expect(inside.excluded('abc/x/y', false)).toBe(true);
    expect(inside.excluded('abc', true)).toBe(false);
    const mid = ex('a/**/b');
    for (const p of ['a/b', 'a/x/b', 'a/x/y/b']) expect(mid.excluded(p, false), p).toBe(true);
    expect(mid.excluded('a/xb', false)).toBe(false);
    // Other runs of * are a plain *.
    expect(ex('a**b').excluded('axxb', false)).toBe(true);
    expect(ex('a**b').excluded('ax/xb', false)).toBe(false);
  });

  it('! re-includes, the last match wins, and nothing inside an excluded folder comes back', () => {
    const e = ex('*.log', '!important.log');
    expect(e.excluded('a.log', false)).toBe(true);
    expect(e.excluded('x/important.log', false)).toBe(false);
    expect(ex('!a.log', '*.log').excluded('a.log', false)).toBe(true);
    const parent = ex('build/', '!build/keep.txt');
    expect(parent.excluded('build/keep.txt', false)).toBe(true);
    // The documented way to keep one folder: exclude the contents, not the folder.
    const only = ex('/*', '!/foo', '/foo/*', '!/foo/bar');
    expect(only.excluded('foo/bar', true)).toBe(false);
    expect(only.excluded('foo/bar/x.txt', false)).toBe(false);
    expect(only.excluded('foo/baz', false)).toBe(true);
    expect(only.excluded('other.txt', false)).toBe(true);
    expect(ex('\\!x').excluded('!x', false)).toBe(true);
  });

  it('presets leave out what they name', () => {
    const e = new Excludes(PRESETS.flatMap((p) => p.patterns));
    for (const p of ['node_modules/a/index.js', 'x/.git/HEAD', '.DS_Store', 'a/Thumbs.db', 'p/__pycache__/m.pyc'])
      expect(e.excluded(p, false), p).toBe(true);
    for (const p of ['src/index.js', 'gitignore', 'node_modules.txt']) expect(e.excluded(p, false), p).toBe(false);
  });
});

describe('Excludes agree with git check-ignore', () => {
  it('on a tree with every kind of pattern', () => {
    const patterns = [
      '# comment',
      '*.log',
      '!keep.log',
      'build/',
      '!build/keep.txt',
      '/top.txt',
      'doc/frotz/',
      '**/cache',
      'src/**/gen',
      'a/*/z.txt',
      '[ab]?.tmp',
      'trail   ',
    ];
    const files = [
      'x.log',
      'sub/keep.log',
      'sub/y.log',
      'build/keep.txt',
      'build/out/o.bin',
      'top.txt',
      'sub/top.txt',
      'doc/frotz/f',
      'a/doc/frotz/f',
      'cache/c',
      'deep/er/cache/c',
      'src/gen/g.ts',
      'src/a/b/gen/g.ts',
      'gen/g.ts',
      'a/b/z.txt',
      'a/b/c/z.txt',
      'ax.tmp',
      'cx.tmp',
      'trail',
      'plain.txt',
    ];
    const dir = mkdtempSync(path.join(tmpdir(), 'ditto-gitignore-'));
    try {
      execFileSync('git', ['init', '-q'], { cwd: dir });
      writeFileSync(path.join(dir, '.gitignore'), patterns.join('\n') + '\n');
      for (const f of files) {
        mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
        writeFileSync(path.join(dir, f), f);
      }
      let out = '';
      try {
        out = execFileSync('git', ['check-ignore', '--no-index', '--stdin'], {
          cwd: dir,
          input: files.join('\n') + '\n',
        }).toString();
      } catch (e) {
        // Exit status 1: nothing ignored.
        out = (e as { stdout?: Buffer }).stdout?.toString() ?? '';
      }
      const byGit = new Set(out.split('\n').filter(Boolean));
      const e = new Excludes(patterns);
      const ours = files.filter((f) => e.excluded(f, false));
      expect(ours.sort()).toEqual([...byGit].sort());
      expect(byGit.size).toBeGreaterThan(5);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('applyExcludes', () => {
  const file = (p: string, size: number) => ({ path: p, file: new File([new Uint8Array(size)], p.split('/').pop()!) });
  const picked: PickedFolder = {
    root: 'proj',
    files: [file('proj/a.js', 10), file('proj/node_modules/m/i.js', 100), file('proj/.DS_Store', 5)],
    dirs: ['proj', 'proj/node_modules', 'proj/node_modules/m'],
    skipped: [{ path: 'proj/node_modules/bad', reason: 'unreadable' }],
  };

  it('keeps the rest, and counts what it leaves out', () => {
    const { picked: kept, excluded } = applyExcludes(picked, new Excludes(['node_modules/', '.DS_Store']));
    expect(kept.files.map((f) => f.path)).toEqual(['proj/a.js']);
    expect(kept.dirs).toEqual(['proj']);
    expect(kept.skipped).toEqual([]);
    expect(excluded.files).toEqual([
      { path: 'proj/node_modules/m/i.js', size: 100 },
      { path: 'proj/.DS_Store', size: 5 },
    ]);
    expect(excluded.bytes).toBe(105);
  });

  it('matches relative to the picked folder, whose name is not a path component', () => {
    expect(applyExcludes(picked, new Excludes(['/proj/'])).excluded.files).toEqual([]);
    expect(applyExcludes(picked, new Excludes(['/a.js'])).picked.files.map((f) => f.path)).not.toContain('proj/a.js');
  });

  it('tells a walk which folders to leave out unwalked', () => {
    const walk = new Excludes(['node_modules/', '/build/', '*.log']).leaveOut;
    expect([walk('node_modules'), walk('a/node_modules'), walk('build'), walk('src/build'), walk('x.log')]).toEqual([
      true,
      true,
      true,
      false,
      true,
    ]);
    // Counted as unwalked folders when the walk left them out.
    const { excluded } = applyExcludes({ ...picked, excludedDirs: ['proj/node_modules'] }, new Excludes(['x']));
    expect(excluded.dirs).toEqual(['proj/node_modules']);
  });

  it('normalizes kept pattern text', () => {
    expect(normalizePatterns('\nnode_modules/\n\n# c\n*.log\n\n')).toEqual(['node_modules/', '', '# c', '*.log']);
  });
});
