#!/usr/bin/env node
// Real versioned test data from PyPI: the COUNT newest stable releases of a Python package
// (optionally only those whose version starts with SERIES, e.g. `5.2.`), as source
// distributions unpacked one folder per release into OUTDIR/PACKAGE/<version>. The sdists are
// cached in $DATASET_CACHE (default ~/.cache/dedup-datasets/pypi/PACKAGE), so later runs are
// offline.
//
//   node scripts/pypi-versions.mjs PACKAGE COUNT OUTDIR [SERIES]
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

const byVersion = (a, b) => a.localeCompare(b, undefined, { numeric: true });
// PEP 440 pre-releases, dev and post releases carry letters; a stable release is digits and dots.
const stable = (v) => /^\d+(\.\d+)*$/.test(v);

export function pypiVersions(pkg, count, outDir, series = '') {
  const cache = path.join(process.env.DATASET_CACHE ?? path.join(homedir(), '.cache', 'dedup-datasets'), 'pypi', pkg);
  const target = path.join(outDir, pkg);
  mkdirSync(cache, { recursive: true });
  mkdirSync(target, { recursive: true });
  const prefix = `${pkg.toLowerCase().replaceAll('-', '_')}-`;
  const cached = () =>
    readdirSync(cache)
      .filter((f) => f.toLowerCase().startsWith(prefix) && f.endsWith('.tar.gz'))
      .map((f) => f.slice(prefix.length, -'.tar.gz'.length));
  const sdist = (v) => cached().find((x) => x === v);
  const inSeries = (v) => stable(v) && v.startsWith(series);
  let versions;
  try {
    const out = execFileSync('pip', ['index', 'versions', pkg], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const line = out.split('\n').find((l) => l.startsWith('Available versions:'));
    if (!line) throw new Error(`pip index versions ${pkg}: no version list`);
    versions = line
      .slice('Available versions:'.length)
      .split(',')
      .map((v) => v.trim())
      .filter(inSeries)
      .sort(byVersion)
      .slice(-count);
  } catch (e) {
    // Offline: fall back to what the cache holds.
    versions = cached().filter(inSeries).sort(byVersion).slice(-count);
    if (versions.length < count) throw new Error(`cannot list ${pkg} versions and the cache is short: ${e}`);
  }
  const dirs = [];
  for (const v of versions) {
    if (!sdist(v)) {
      // --no-binary: the sdist as released, not a wheel (whose tree differs); --no-deps: this
      // package only.
      execFileSync('pip', ['download', `${pkg}==${v}`, '--no-binary', ':all:', '--no-deps', '-q', '-d', cache], {
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      if (!sdist(v)) throw new Error(`pip download ${pkg}==${v} left no sdist in ${cache}`);
    }
    const dest = path.join(target, v);
    if (!existsSync(dest)) {
      const tmp = `${dest}.tmp`;
      rmSync(tmp, { recursive: true, force: true });
      mkdirSync(tmp);
      execFileSync('tar', ['xzf', path.join(cache, `${prefix}${v}.tar.gz`), '-C', tmp, '--strip-components=1']);
      renameSync(tmp, dest);
    }
    dirs.push(dest);
  }
  return dirs;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [pkg, count, out, series] = process.argv.slice(2);
  if (!pkg || !count || !out) {
    console.error('usage: pypi-versions.mjs PACKAGE COUNT OUTDIR [SERIES]');
    process.exit(2);
  }
  for (const d of pypiVersions(pkg, Number(count), out, series)) console.log(d);
}
