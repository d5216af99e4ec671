/**
 * Real versioned data for the tests: consecutive releases of an npm package, one folder
 * each, made by ../shared/datasets/npm-versions.sh (cached, so a second run is offline).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './server';

export function npmVersions(pkg: string, count: number): string[] {
  const out = path.join(process.env.DITTO_DATASETS ?? path.join(ROOT, 'target', 'datasets'), `${pkg}-${count}`);
  const script = path.join(ROOT, '..', 'shared', 'datasets', 'npm-versions.sh');
  if (!existsSync(path.join(out, pkg)) || readdirSync(path.join(out, pkg)).length < count) {
    if (!existsSync(script)) throw new Error(`dataset script not found: ${script}`);
    execFileSync('bash', [script, pkg, String(count), out], { stdio: 'inherit' });
  }
  const dir = path.join(out, pkg);
  return readdirSync(dir)
    .filter((d) => !d.endsWith('.tmp'))
    .sort((a, b) => a.localeCompare(b, undefined, { numeric: true }))
    .map((d) => path.join(dir, d));
}
