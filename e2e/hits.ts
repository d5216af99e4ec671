/**
 * Search results as the e2e specs compare them: the files with a hit, each as
 * "version\0path" -> its [keyword, offset] pairs sorted by offset then keyword, from a plain
 * scan of the backed-up folders on disk (the oracle) or from the page's result rows.
 */
import { expect, type Page } from '@playwright/test';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { walk } from './datasets';

export type Hits = Map<string, [number, number][]>;

export interface ScanOptions {
  /** Only the first hit of each keyword per file (the page's "files only"). */
  filesOnly?: boolean;
  /** One version, and paths containing `path` (lower case), as the page's scope does. */
  only?: { version: number; path: string };
}

/**
 * Every (overlapping) occurrence of each keyword in every file of `folders`, folder `v`
 * being version `ids[v]`.
 */
export function scanFolders(folders: string[], ids: number[], keywords: Buffer[], opts: ScanOptions = {}): Hits {
  const { filesOnly = false, only } = opts;
  const out: Hits = new Map();
  folders.forEach((dir, v) => {
    if (only && only.version !== ids[v]) return;
    for (const rel of walk(dir)) {
      if (only && !rel.toLowerCase().includes(only.path)) continue;
      const data = readFileSync(path.join(dir, rel));
      const hits: [number, number][] = [];
      keywords.forEach((k, kw) => {
        for (let at = data.indexOf(k); at >= 0; at = data.indexOf(k, at + 1)) {
          hits.push([kw, at]);
          if (filesOnly) break;
        }
      });
      if (hits.length)
        out.set(
          `${ids[v]}\0${rel}`,
          hits.sort((a, b) => a[1] - b[1] || a[0] - b[0]),
        );
    }
  });
  return out;
}

/** The hits of the page's result rows (`search-file`, `data-hits`). */
export async function pageHits(page: Page): Promise<Hits> {
  const out: Hits = new Map();
  for (const r of await page.getByTestId('search-file').all()) {
    const [v, p, h] = await Promise.all([
      r.getAttribute('data-version'),
      r.getAttribute('data-path'),
      r.getAttribute('data-hits'),
    ]);
    out.set(`${v}\0${p}`, JSON.parse(h!));
  }
  return out;
}

/** The same files with the same hits; a difference names the file. */
export function expectSame(got: Hits, want: Hits) {
  expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
  for (const [k, hits] of want) expect(got.get(k), k.replace('\0', ' ')).toEqual(hits);
}
