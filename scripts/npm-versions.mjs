#!/usr/bin/env node
// Real versioned test data: the COUNT newest stable releases of an npm package, unpacked one
// folder per release into OUTDIR/PACKAGE/<version>. Tarballs are cached in
// $DATASET_CACHE (default ~/.cache/dedup-datasets/npm/PACKAGE), so later runs are offline.
//
//   node scripts/npm-versions.mjs PACKAGE COUNT OUTDIR
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

export function npmVersions(pkg, count, outDir) {
  const cache = path.join(process.env.DATASET_CACHE ?? path.join(homedir(), '.cache', 'dedup-datasets'), 'npm', pkg);
  const target = path.join(outDir, pkg);
  mkdirSync(cache, { recursive: true });
  mkdirSync(target, { recursive: true });
  const cachedTgz = (v) => path.join(cache, `${pkg.replaceAll('/', '-')}-${v}.tgz`);
  let versions;
  try {
    const all = JSON.parse(execFileSync('npm', ['view', pkg, 'versions', '--json'], { encoding: 'utf8' }));
    versions = all.filter((v) => !v.includes('-')).slice(-count);
  } catch (e) {
    // Offline: fall back to what the cache holds.
    versions = readdirSync(cache)
      .filter((f) => f.endsWith('.tgz'))
      .map((f) => f.slice(pkg.replaceAll('/', '-').length + 1, -4))
      .sort((a, b) => a.localeCompare(b, undefined, { numeric: true }))
      .slice(-count);
    if (versions.length < count) throw new Error(`cannot list ${pkg} versions and the cache is short: ${e}`);
  }
  const dirs = [];
  for (const v of versions) {
    const tgz = cachedTgz(v);
    if (!existsSync(tgz)) {
      const out = execFileSync('npm', ['pack', `${pkg}@${v}`, '--silent', '--pack-destination', cache], {
        encoding: 'utf8',
      }).trim();
      const packed = path.join(cache, out.split('\n').pop());
      if (packed !== tgz) renameSync(packed, tgz);
    }
    const dest = path.join(target, v);
    if (!existsSync(dest)) {
      const tmp = `${dest}.tmp`;
      rmSync(tmp, { recursive: true, force: true });
      mkdirSync(tmp);
      execFileSync('tar', ['xzf', tgz, '-C', tmp, '--strip-components=1']);
      renameSync(tmp, dest);
    }
    dirs.push(dest);
  }
  return dirs;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [pkg, count, out] = process.argv.slice(2);
  if (!pkg || !count || !out) {
    console.error('usage: npm-versions.mjs PACKAGE COUNT OUTDIR');
    process.exit(2);
  }
  for (const d of npmVersions(pkg, Number(count), out)) console.log(d);
}
