/**
 * The previous version of a source, as planning uses it: each file's size, mtime and recipe
 * (unchanged files reuse it unread; HiDeStore §4.1: the last version predicts the next) and,
 * where known, each chunk's length (RapidCDC hints, hints.ts).
 *
 * It comes from the server (the version's manifest; lengths from `chunks/lengths`), or, for
 * the version this page committed last for the source, from that backup itself: the same
 * facts without fetching and parsing the manifest and asking for the lengths again (~15-25
 * ms of the ~150 ms a typescript release takes, measured 2026-11-23). The server's version
 * list still decides which version is the previous one: a version committed elsewhere since
 * (another tab, another machine) is fetched.
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
  committedAt: number;
  files: PreviousFile[];
}

/** The last version each (server, repo, source) got from this page, with lengths. */
const committedHere = new Map<string, PreviousVersion>();

const memoKey = (api: Api, source: string) => JSON.stringify([api.base, api.repo, source]);

/** Remembers a version this page just committed (every file with its lengths). */
export function rememberCommitted(api: Api, source: string, v: VersionInfo, files: PreviousFile[]) {
  committedHere.set(memoKey(api, source), { id: v.id, committedAt: v.committed_at, files });
}

/** Files of a manifest as PreviousFiles (lengths unknown). */
export function filesOfManifest(m: Manifest): PreviousFile[] {
  return m.entries
    .filter((e) => e.kind === 'file')
    .map((e) => ({ path: e.path, size: e.size, mtime: e.mtime, recipe: packHex(e.recipe), lengths: null }));
}

/** The newest version of `source` on the server, or null when it has none. */
export async function previousVersion(api: Api, source: string): Promise<PreviousVersion | null> {
  const versions = (await api.versions()).filter((v) => v.source === source);
  if (!versions.length) return null;
  const latest = versions.reduce((a, b) => (b.id > a.id ? b : a));
  const here = committedHere.get(memoKey(api, source));
  // Ids alone could be reused after the newest version is deleted; the commit time too is not.
  if (here && here.id === latest.id && here.committedAt === latest.committed_at) return here;
  return {
    id: latest.id,
    committedAt: latest.committed_at,
    files: filesOfManifest((await api.version(latest.id)).manifest),
  };
}

/** Every distinct fingerprint of `files`, packed, in first-seen order. */
export function distinctFps(files: readonly PreviousFile[], drop?: ReadonlySet<string>): Uint8Array {
  const seen = new Set<string>(drop);
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
