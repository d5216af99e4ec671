import type { PickedFolder } from './folder';

/**
 * Exclude patterns in gitignore syntax (git's gitignore(5)), matched against paths relative
 * to the picked folder, as a `.gitignore` at its top would be:
 *
 * - blank lines and lines starting with `#` are ignored (`\#` is a literal `#`); trailing
 *   spaces are dropped unless escaped (`\ `);
 * - `!` negates: a path a later negated pattern matches is included again (`\!` is a literal
 *   `!`), except inside an excluded folder: git does not look inside one, neither do we;
 * - a `/` at the start or in the middle anchors the pattern to the top folder; without one
 *   it matches a name at any depth; a trailing `/` matches folders only;
 * - `*` is any run of characters but `/`, `?` one such character, `[...]` a class (`[!...]`
 *   negated); `**/ ` leading matches in every folder, `; /**` trailing everything inside,
 *   `/**\/` in the middle zero or more folders; other runs of `*` are a plain `*`;
 * - the last pattern that matches a path decides.
 */

interface Rule {
  re: RegExp;
  negate: boolean;
  dirOnly: boolean;
}

/** Ready-made patterns, by what they leave out. */
export const PRESETS: { id: string; label: string; patterns: string[] }[] = [
  { id: 'node_modules', label: 'node_modules folders', patterns: ['node_modules/'] },
  { id: 'vcs', label: 'version control (.git, .hg, .svn)', patterns: ['.git/', '.hg/', '.svn/'] },
  {
    id: 'caches',
    label: 'caches (__pycache__, *.pyc, .cache, .pytest_cache, .mypy_cache, .tox, .gradle, .next)',
    patterns: ['__pycache__/', '*.pyc', '.cache/', '.pytest_cache/', '.mypy_cache/', '.tox/', '.gradle/', '.next/'],
  },
  {
    id: 'os',
    label: 'OS files (.DS_Store, Thumbs.db, desktop.ini, ._*)',
    patterns: ['.DS_Store', '._*', 'Thumbs.db', 'ehthumbs.db', 'desktop.ini', '$RECYCLE.BIN/', '.Trash-*/'],
  },
];

/** One path component's glob as a regular expression source (never matching `/`). */
function segment(glob: string): string {
  let out = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '\\' && i + 1 < glob.length) out += escape(glob[++i]);
    else if (c === '*') {
      while (glob[i + 1] === '*') i++;
      out += '[^/]*';
    } else if (c === '?') out += '[^/]';
    else if (c === '[') {
      const end = glob.indexOf(']', i + 2);
      if (end < 0) {
        out += '\\[';
        continue;
      }
      let body = glob.slice(i + 1, end);
      const negated = body[0] === '!' || body[0] === '^';
      if (negated) body = body.slice(1);
      body = body.replace(/[\\\]^]/g, (m) => '\\' + m);
      out += negated ? `[^/${body}]` : `[${body}]`;
      i = end;
    } else out += escape(c);
  }
  return out;
}

function escape(c: string): string {
  return /[.*+?^${}()|[\]\\/]/.test(c) ? '\\' + c : c;
}

/** Drops trailing spaces that are not escaped with a backslash. */
function trimEnd(line: string): string {
  let end = line.length;
  while (end > 0 && line[end - 1] === ' ' && line[end - 2] !== '\\') end--;
  return line.slice(0, end).replace(/\\ $/, ' ');
}

function compile(line: string): Rule | null {
  let p = trimEnd(line.replace(/\r$/, ''));
  if (p === '' || p.startsWith('#')) return null;
  let negate = false;
  if (p.startsWith('!')) {
    negate = true;
    p = p.slice(1);
  } else if (p.startsWith('\\!') || p.startsWith('\\#')) p = p.slice(1);
  let dirOnly = false;
  if (p.endsWith('/')) {
    dirOnly = true;
    p = p.replace(/\/+$/, '');
  }
  if (p === '') return null;
  const anchored = p.includes('/');
  const segs = p.replace(/^\//, '').split('/');
  let re = '';
  segs.forEach((s, i) => {
    const last = i === segs.length - 1;
    if (s === '**') re += last ? (i === 0 ? '.*' : '.+') : '(?:.*/)?';
    else re += segment(s) + (last ? '' : '/');
  });
  return { re: new RegExp(`^${anchored ? '' : '(?:.*/)?'}${re}$`), negate, dirOnly };
}

export class Excludes {
  private rules: Rule[];

  /** `patterns`: lines of gitignore syntax (comments and blanks allowed). */
  constructor(patterns: readonly string[]) {
    this.rules = patterns.flatMap((l) => l.split('\n')).flatMap((l) => compile(l) ?? []);
  }

  get empty(): boolean {
    return this.rules.length === 0;
  }

  /** For a walk: the folders to leave out unwalked (a folder excluded excludes everything in it). */
  get leaveOut(): (path: string) => boolean {
    return (path) => this.excluded(path, true);
  }

  /** Whether the patterns themselves exclude `path` (its folders not considered). */
  private matches(path: string, isDir: boolean): boolean {
    let out = false;
    for (const r of this.rules) if ((!r.dirOnly || isDir) && r.re.test(path)) out = !r.negate;
    return out;
  }

  /** Whether `path` (relative to the picked folder, `/`-separated) is excluded. */
  excluded(path: string, isDir: boolean): boolean {
    if (!this.rules.length) return false;
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) if (this.matches(parts.slice(0, i).join('/'), true)) return true;
    return this.matches(path, isDir);
  }
}

/** Pattern lines as kept per source: trimmed of blank lines at the ends, at most 4 000 lines. */
export function normalizePatterns(text: string | readonly string[] | undefined): string[] {
  const lines = (typeof text === 'string' ? text.split('\n') : [...(text ?? [])]).map((l) => l.replace(/\r$/, ''));
  const blank = (l: string) => l.trim() === '';
  while (lines.length && blank(lines[0])) lines.shift();
  while (lines.length && blank(lines[lines.length - 1])) lines.pop();
  return lines.slice(0, 4000);
}

export interface ExcludedFiles {
  /** Excluded files, with paths as picked. */
  files: { path: string; size: number }[];
  bytes: number;
  /** Excluded folders the walk did not enter (their files are not counted above). */
  dirs: string[];
}

/**
 * The pick without what `ex` excludes, and what that is. Excluded files are not read and are
 * not "skipped" (a skip is a file the backup wanted and could not read); an excluded folder's
 * whole content goes, its unreadable items too.
 */
export function applyExcludes(picked: PickedFolder, ex: Excludes): { picked: PickedFolder; excluded: ExcludedFiles } {
  const excluded: ExcludedFiles = { files: [], bytes: 0, dirs: picked.excludedDirs ?? [] };
  if (ex.empty) return { picked, excluded };
  const prefix = picked.root + '/';
  const rel = (p: string) => (p.startsWith(prefix) ? p.slice(prefix.length) : p === picked.root ? '' : p);
  const out = (p: string, isDir: boolean) => {
    const r = rel(p);
    return r !== '' && ex.excluded(r, isDir);
  };
  const files = picked.files.filter((f) => {
    if (!out(f.path, false)) return true;
    excluded.files.push({ path: f.path, size: f.file.size });
    excluded.bytes += f.file.size;
    return false;
  });
  return {
    picked: {
      ...picked,
      files,
      dirs: picked.dirs.filter((d) => !out(d, true)),
      skipped: picked.skipped.filter((s) => !out(s.path, false)),
    },
    excluded,
  };
}
