/**
 * The previous version of a source, as planning uses it: each file's size, mtime and recipe
 * (unchanged files reuse it unread; HiDeStore §4.1: the last version predicts the next) and,
 * where known, each chunk's length (RapidCDC hints, hints.ts).
 *
 * When this page has committed the source before, the previous version is that commit, kept
 * in memory: no request at all, so the workers start at the click (asking the server's
 * version list first cost 5-18 ms of a typescript release's ~150 ms, the manifest and the
 * lengths another ~15-25 ms; measured 2026-11-23). Otherwise it is the newest version of the
 * source on the server (its manifest; lengths from `chunks/lengths`).
 *
 * Which version is "previous" never decides what is correct, only how much is read and
 * sent: its unchanged files' recipes name chunks the server stores (a commit naming one it
 * lacks is refused with 409 and those files are read again, backup.ts), and its fingerprints
 * only predict. Another tab of this browser is caught anyway (the job record says which
 * version the source's last backup committed, in any tab: a different one makes this page
 * ask the server); a version another machine committed since is not looked for, and the
 * server's missing query still keeps the chunks it sent off the wire.
 */
import type { Api, Manifest, VersionInfo } from '../api/client';
import { FP_LEN, fpHex, packHex } from './hex';

export interface PreviousFile {
  path: string;
  size: number;
  mtime: number;
  /** Packed 20-byte fingerprints. */
  recipe: Uint8Array;
  /** Each chunk's length, when known without asking the server. */
  lengths: Uint32Array | null;
}

export interface PreviousVersion {
  id: number;
  /** When the backup that made it started (its manifest's `time`, the client's clock). */
  time: number;
  committedAt: number;
  files: PreviousFile[];
}

/** Per (server, repo): the last version of each source this page committed, with lengths. */
const committedHere = new Map<string, Map<string, PreviousVersion>>();

/** This page's versions of `api`'s repository, by source. */
function committedIn(api: Api): Map<string, PreviousVersion> {
  const key = JSON.stringify([api.base, api.repo]);
  let bySource = committedHere.get(key);
  if (!bySource) committedHere.set(key, (bySource = new Map()));
  return bySource;
}

/** Forgets version `id` of `api`'s repository, once it is deleted. */
export function forgetCommitted(api: Api, id: number) {
  const bySource = committedIn(api);
  for (const [source, v] of bySource) if (v.id === id) bySource.delete(source);
}

/** Remembers a version this page just committed (every file with its lengths). */
export function rememberCommitted(api: Api, source: string, v: VersionInfo, files: PreviousFile[]) {
  committedIn(api).set(source, { id: v.id, time: v.time, committedAt: v.committed_at, files });
}

/** Files of a manifest as PreviousFiles (lengths unknown). */
export function filesOfManifest(m: Manifest): PreviousFile[] {
  return m.entries
    .filter((e) => e.kind === 'file')
    .map((e) => ({ path: e.path, size: e.size, mtime: e.mtime, recipe: packHex(e.recipe), lengths: null }));
}

/**
 * The version of `source` this page committed last, unless `newest` (the version the
 * source's last backup committed, in whichever tab) names another; else the newest on the
 * server (null when it has none).
 */
export async function previousVersion(api: Api, source: string, newest?: number): Promise<PreviousVersion | null> {
  const here = committedIn(api).get(source);
  if (here && (newest === undefined || newest === here.id)) return here;
  const versions = (await api.versions()).filter((v) => v.source === source);
  if (!versions.length) return null;
  const latest = versions.reduce((a, b) => (b.id > a.id ? b : a));
  return {
    id: latest.id,
    time: latest.time,
    committedAt: latest.committed_at,
    files: filesOfManifest((await api.version(latest.id)).manifest),
  };
}

/**
 * The hot cache (HiDeStore §4.1): every fingerprint of `files`' recipes, packed, repeats
 * included (the workers keep them in a set anyway; dropping repeats here cost 1-6 ms per
 * typescript release), less those in `drop`.
 */
export function hotFps(files: readonly PreviousFile[], drop?: ReadonlySet<string>): Uint8Array {
  const packed = new Uint8Array(files.reduce((n, f) => n + f.recipe.length, 0));
  let at = 0;
  for (const { recipe } of files) {
    if (!drop?.size) {
      packed.set(recipe, at);
      at += recipe.length;
    } else
      for (let i = 0; i < recipe.length / FP_LEN; i++)
        if (!drop.has(fpHex(recipe, i))) {
          packed.set(recipe.subarray(i * FP_LEN, (i + 1) * FP_LEN), at);
          at += FP_LEN;
        }
  }
  return packed.subarray(0, at);
}

/** Every distinct fingerprint of `files`, packed, in first-seen order. */
export function distinctFps(files: readonly PreviousFile[]): Uint8Array {
  const seen = new Set<string>();
  const out: Uint8Array[] = [];
  for (const f of files)
    for (let i = 0; i < f.recipe.length / FP_LEN; i++) {
      const hex = fpHex(f.recipe, i);
      if (seen.has(hex)) continue;
      seen.add(hex);
      out.push(f.recipe.subarray(i * FP_LEN, (i + 1) * FP_LEN));
    }
  const packed = new Uint8Array(out.length * FP_LEN);
  out.forEach((fp, i) => packed.set(fp, i * FP_LEN));
  return packed;
}
