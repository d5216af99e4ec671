/**
 * Real versioned data for the tests: consecutive releases of an npm package, one folder
 * each (scripts/npm-versions.mjs; tarballs cached, so a second run is offline).
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './server';
// @ts-expect-error plain ESM script without types
import { npmVersions as fetchVersions } from '../scripts/npm-versions.mjs';

export function npmVersions(pkg: string, count: number): string[] {
  const out = process.env.DITTO_DATASETS ?? path.join(ROOT, 'target', 'datasets');
  return fetchVersions(pkg, count, out) as string[];
}

/** Every file under `dir`, as paths relative to it with `/`. */
export function walk(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...walk(dir, r));
    else if (e.isFile()) out.push(r);
  }
  return out.sort();
}
