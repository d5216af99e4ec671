/**
 * One backup of a picked folder, as named stages:
 *
 * 1. **plan** — find the previous version of this source. Files whose path, size and a
 *    believable mtime equal it reuse their recipe unread (change.ts), but for a random sample
 *    read anyway; so do files an interrupted run of this job already finished (job state in
 *    IndexedDB). The previous version's fingerprints become the workers' hot cache
 *    (HiDeStore §4.1: the last version predicts the next).
 * 2. **chunk** — the worker pool chunks and fingerprints the other files as streams and
 *    passes on only chunks outside the hot cache, compressed when it pays.
 * 3. **upload** — the uploader asks the client index (PRUNE §3) and then the server which of
 *    those are stored and sends the rest in bundles; the index learns a chunk only after
 *    the server acknowledged it.
 * 4. **commit** — the manifest (every entry with its recipe) becomes the new version.
 *
 * Between 3 and 4: if a sampled file changed though its size and mtime did not, every
 * trusted file is read; files whose read failed are read once more (from a fresh File where
 * the way in gives one). Nothing is skipped silently: files still unreadable are listed in
 * the manifest's `skipped` (the version is incomplete), the progress and the result.
 */
import { ApiError, type Api, type Manifest, type SkippedFile, type SkipReason, type VersionInfo } from '../api/client';
import { isTransient, pause } from '../api/retry';
import type { ClientIndex } from '../dedupindex/index';
import { normalizePath, type PickedFile, type PickedFolder } from '../input/folder';
import { ZSTD_LEVEL, type NewChunks } from '../worker/protocol';
import type { BatchResult, CorePool } from '../worker/pool';
import { cryptoRandom, planChanges, sameRecipe } from './change';
import { FP_LEN } from './hex';
import { lengthsOfFile, previousRecipes, type PreviousRecipes } from './hints';
import { JobStore, type FileRecord, type JobRecord } from './jobstore';
import { manifestBody, recipeAt, recipeLength, type BodyEntry } from './manifest';
import { hotFps, previousVersion, rememberCommitted } from './previous';
import { DEFAULT_SETTINGS, type SourceSettings } from './sourcesettings';
import { Uploader, type Candidate } from './uploader';
import { pageCore } from '../wasm/page';
import { beginHeavyWork } from '../worker/heavyWork';

/**
 * Files at least this large are split into SEGMENT_BYTES segments chunked by several
 * workers at once (SS-CDC; same recipe as one worker). Smaller files already keep every
 * worker busy side by side, and a segment costs a few messages.
 */
export const SPLIT_FILE_BYTES = 64 << 20;
export const SEGMENT_BYTES = 2 << 20;
/**
 * Files smaller than this go to the workers in batches of up to BATCH_FILES files and
 * BATCH_BYTES bytes, each batch read as one composite Blob: in headless Chromium a read
 * costs ~0.5-1 ms however small the file (typescript 7.0.2, 416 files, 2.5 MB: 206-268 ms
 * one file per read with 4 in flight, 91 ms as batches of 32). Batches of 64 instead of 32
 * took typescript 7.0.2 from 0.15-0.18 to 0.12-0.13 s (whole backups, 2026-11-23): each
 * batch's composite Blob is a synchronous round trip to the browser process.
 */
export const BATCH_FILE_BYTES = 1 << 20;
export const BATCH_FILES = 64;
export const BATCH_BYTES = 2 << 20;
/** Per-file job records (for a resume) are first written this long into a backup. */
export const RECORD_AFTER_MS = 2000;
/** Per-file records are written at least this often once they are written at all. */
const RECORD_EVERY_MS = 5_000;
/** How long a failed commit waits for the resume records before it reports the failure. */
const RECORDS_WAIT_MS = 30_000;
/**
 * Tries of the commit that fails for a reason worth retrying (`isTransient`), the first
 * pause between them, doubling: 0.5 + 1 + 2 + 4 s, for a server restarting or a link
 * coming back.
 */
const COMMIT_ATTEMPTS = 5;
/**
 * Commits refused for chunks the server lacks (409, a prune since the lookup), each followed
 * by reading the files that name them again, before the backup fails.
 */
const MISSING_ROUNDS = 4;
const COMMIT_RETRY_MS = 500;

/** A backup's version as the versions list shows it: its source, start time and manifest. */
interface Mine {
  source: string;
  time: number;
  ours: (m: Manifest) => boolean;
}

/** Work items: a file of at least BATCH_FILE_BYTES alone, smaller ones batched (in pick order). */
export function batches<T extends { file: { size: number } }>(files: readonly T[]): T[][] {
  const out: T[][] = [];
  let cur: T[] = [];
  let bytes = 0;
  for (const f of files) {
    const size = f.file.size;
    if (size >= BATCH_FILE_BYTES) {
      out.push([f]);
      continue;
    }
    if (cur.length && (cur.length >= BATCH_FILES || bytes + size > BATCH_BYTES)) {
      out.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(f);
    bytes += size;
  }
  if (cur.length) out.push(cur);
  return out;
}

export type Phase = 'planning' | 'backing up' | 'committing' | 'done' | 'failed' | 'cancelled';

export interface BackupProgress {
  phase: Phase;
  paused: boolean;
  source: string;
  filesTotal: number;
  filesDone: number;
  /** Files trusted unread: the previous version's size and a believable mtime (change.ts). */
  filesUnchanged: number;
  /** Files trusted unread from an interrupted run of this job. */
  filesResumed: number;
  /** Files with the previous size and mtime that were read because the mtime cannot vouch. */
  filesDistrusted: number;
  /** Files that would have been trusted, read anyway (the random sample, or "read every file"). */
  filesSampled: number;
  /** Sampled files whose content changed though size and mtime did not (then all were read). */
  sampleCaught: string[];
  /** Files chunked as segments by several workers at once (SS-CDC). */
  filesSplit: number;
  /** Chunks of the files read whose end RapidCDC predicted from the previous version (no scan). */
  chunksPredicted: number;
  /** Chunks of the files read. */
  chunksRead: number;
  bytesTotal: number;
  /** Bytes accounted for: read and chunked, or reused unread. */
  bytesDone: number;
  bytesRead: number;
  /** Bundle bytes sent, this job (all sessions). */
  wireBytes: number;
  chunksSent: number;
  dedupRatio: number | null;
  mbPerSecond: number;
  etaSeconds: number | null;
  /** Picked files the version does not hold (the manifest's `skipped`). */
  skipped: SkippedFile[];
  /** Files whose first read failed and that a second read backed up. */
  filesRetried: number;
  message?: string;
  version?: VersionInfo;
  uploader?: Uploader['stats'];
  /** Milliseconds spent in each phase so far (where the time goes, for people and benchmarks). */
  phaseMs: Partial<Record<Phase, number>>;
}

export interface BackupDeps {
  api: Api;
  pool: CorePool;
  jobs: JobStore;
  index: ClientIndex | null;
}

/**
 * The client index is a cache of the server, checked before a backup trusts it: built under
 * another `gc_epoch` (a prune deleted chunks since), it is dropped; otherwise a random sample
 * of 64 of its fingerprints is asked for, and if the server lacks any (lost or quarantined
 * chunks, a reset data directory) it is dropped too. Either way it ends up recording the
 * server's current epoch. Resolves to whether it was dropped.
 */
export async function validateIndex(index: ClientIndex, api: Pick<Api, 'tokenInfo' | 'missing'>): Promise<boolean> {
  const sample = index.stats().fingerprints > 0 ? await index.sample(64) : new Uint8Array(0);
  const [{ gc_epoch }, missing] = await Promise.all([
    api.tokenInfo(),
    sample.length > 0 ? api.missing(sample) : Promise.resolve(new Uint8Array(0)),
  ]);
  if (await index.useEpoch(gc_epoch)) return true;
  if (missing.length === 0) return false;
  await index.clear();
  await index.useEpoch(gc_epoch);
  return true;
}

function candidates(msg: NewChunks): Candidate[] {
  const out: Candidate[] = [];
  let at = 0;
  for (let i = 0; i < msg.codecs.length; i++) {
    const len = msg.storedLengths[i];
    out.push({
      fp: msg.fps.subarray(i * FP_LEN, (i + 1) * FP_LEN),
      codec: msg.codecs[i],
      rawLen: msg.rawLengths[i],
      stored: msg.stored.subarray(at, at + len),
    });
    at += len;
  }
  return out;
}

/**
 * Manifest paths are relative to the picked folder, so that versions of a source line up
 * however the folder itself is named (e.g. one folder per release).
 */
export function relativeToRoot(picked: PickedFolder): PickedFolder {
  const prefix = picked.root + '/';
  const strip = (p: string) => (p.startsWith(prefix) ? p.slice(prefix.length) : p);
  if (!picked.files.every((f) => f.path.startsWith(prefix))) return picked;
  return {
    ...picked,
    files: picked.files.map((f) => ({ ...f, path: strip(f.path) })),
    dirs: picked.dirs.filter((d) => d !== picked.root).map(strip),
    skipped: picked.skipped.map((s) => ({ ...s, path: strip(s.path) })),
  };
}

/**
 * The picked folder's name as the manifest's `folder` records it (docs/FORMAT.md): none when
 * the pick is not one folder (several dropped items) or the name is not one the server takes.
 */
export function folderName(picked: PickedFolder): string | undefined {
  const name = picked.root;
  const one = picked.files.every((f) => f.path.startsWith(name + '/'));
  const valid =
    name !== '' && name !== '.' && name !== '..' && !/[/\0]/.test(name) && new TextEncoder().encode(name).length <= 256;
  return one && valid ? name : undefined;
}

/** A path the manifest's `skipped` accepts (the entry path rules), from whatever the picker saw. */
export function skippedPath(p: string): string {
  return (
    normalizePath(p)
      .split('/')
      .map((c) => (c === '..' ? '(..)' : c))
      .join('/') || '(unnamed)'
  );
}

/**
 * Why a read failed, from the browser's error: NotFoundError is a file gone; NotReadableError
 * is a file changed since its File was made, or one the OS refuses (the browser does not say
 * which, so `changed` is claimed only when a fresh File showed new size or mtime).
 */
export function skipReason(error: string, changed: boolean): SkipReason {
  if (/NotFoundError/.test(error)) return 'deleted';
  return changed ? 'changed' : 'unreadable';
}

/** The manifest's record of a picked file left out after its read failed with `error`. */
function skippedFile(path: string, error: string, changed = false): SkippedFile {
  return { path: skippedPath(path), reason: skipReason(error, changed), detail: error };
}

interface Failure {
  f: PickedFile;
  error: string;
}

/** The browser's error for a read of `file` started now (null if it reads): changed or gone. */
async function changedSince(file: Blob): Promise<string | null> {
  try {
    await file.slice(0, 1).arrayBuffer();
    return null;
  } catch (e) {
    return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }
}

export class BackupJob {
  readonly progress: BackupProgress;
  private uploader: Uploader | null = null;
  private cancelled = false;
  private pauseGate: Promise<void> | null = null;
  private openGate: (() => void) | null = null;
  private started = performance.now();
  private readBase = 0;
  /** Paths whose content changed while they were read (their recipe was dropped). */
  private changedWhileRead = new Set<string>();
  /** The version is committed: the job's per-file records are not needed any more. */
  private committed = false;
  private key: string;

  private picked: PickedFolder;
  /** The manifest's `folder`. */
  private folder: string | undefined;

  constructor(
    private deps: BackupDeps,
    picked: PickedFolder,
    source: string,
    private onProgress: (p: BackupProgress) => void,
    private settings: SourceSettings = DEFAULT_SETTINGS,
  ) {
    // Own copies: a file read again from a fresh File is replaced here, not in the pick.
    this.folder = folderName(picked);
    const rel = relativeToRoot(picked);
    this.picked = { ...rel, files: rel.files.map((f) => ({ ...f })) };
    this.key = JobStore.key(deps.api.repo, source);
    this.progress = {
      phase: 'planning',
      paused: false,
      source,
      filesTotal: picked.files.length,
      filesDone: 0,
      filesUnchanged: 0,
      filesResumed: 0,
      filesDistrusted: 0,
      filesSampled: 0,
      sampleCaught: [],
      filesSplit: 0,
      chunksPredicted: 0,
      chunksRead: 0,
      bytesTotal: picked.files.reduce((n, f) => n + f.file.size, 0),
      bytesDone: 0,
      bytesRead: 0,
      wireBytes: 0,
      chunksSent: 0,
      dedupRatio: null,
      mbPerSecond: 0,
      etaSeconds: null,
      skipped: this.picked.skipped.map((s) => ({ path: skippedPath(s.path), reason: 'unreadable', detail: s.reason })),
      filesRetried: 0,
      phaseMs: {},
    };
  }

  pause() {
    if (this.pauseGate) return;
    this.pauseGate = new Promise((r) => (this.openGate = r));
    this.uploader?.pause();
    this.progress.paused = true;
    this.emit();
  }

  resume() {
    this.openGate?.();
    this.pauseGate = this.openGate = null;
    this.uploader?.resume();
    this.progress.paused = false;
    this.emit();
  }

  cancel() {
    this.cancelled = true;
    this.resume();
    this.uploader?.cancel();
  }

  private phaseStart = performance.now();

  private enter(phase: Phase) {
    const p = this.progress;
    const t = performance.now();
    p.phaseMs[p.phase] = (p.phaseMs[p.phase] ?? 0) + (t - this.phaseStart);
    this.phaseStart = t;
    p.phase = phase;
  }

  private emit() {
    const p = this.progress;
    const secs = (performance.now() - this.started) / 1000;
    p.mbPerSecond = secs > 0 ? (p.bytesRead - this.readBase) / 1e6 / secs : 0;
    p.dedupRatio = p.wireBytes > 0 ? p.bytesDone / p.wireBytes : null;
    const left = p.bytesTotal - p.bytesDone;
    p.etaSeconds = p.mbPerSecond > 0 && p.phase === 'backing up' ? left / 1e6 / p.mbPerSecond : null;
    p.uploader = this.uploader ? { ...this.uploader.stats } : undefined;
    this.onProgress({ ...p });
  }

  async run(): Promise<BackupProgress> {
    const timer = setInterval(() => this.emit(), 250);
    const endHeavyWork = beginHeavyWork();
    try {
      const version = await this.backup();
      this.progress.version = version;
      this.enter('done');
      // Bookkeeping only: the version is committed whatever these do.
      try {
        await this.deps.jobs.update(this.key, (j) => {
          j.status = 'done';
          j.versionId = version.id;
        });
        await this.deps.jobs.clearFiles(this.key);
      } catch (e) {
        console.warn('backup bookkeeping in IndexedDB failed:', e);
      }
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      this.enter(this.cancelled ? 'cancelled' : 'failed');
      this.progress.message = this.cancelled ? 'Backup cancelled. Chunks already uploaded are kept.' : message;
      await this.deps.jobs
        .update(this.key, (j) => {
          j.status = this.cancelled ? 'cancelled' : 'failed';
          j.message = message;
        })
        .catch(() => {});
    } finally {
      endHeavyWork();
      clearInterval(timer);
      this.emit();
    }
    return this.progress;
  }

  private async validateIndex() {
    if (this.deps.index) await validateIndex(this.deps.index, this.deps.api);
  }

  private async backup(): Promise<VersionInfo> {
    const { api, jobs, index } = this.deps;
    const p = this.progress;
    // The job state (an unfinished run of this job? the version it last committed, in any
    // tab?) is read afresh while the server answers: another tab may have written it.
    const state = (async () => {
      const old = await jobs.get(this.key, true);
      const resumable = old && old.status !== 'done' ? await jobs.files(this.key) : new Map<string, FileRecord>();
      return { old, resumable };
    })();
    // The client index is checked against the server while the workers start; the uploader
    // consults it only after the check (chunkAndUpload).
    const validated = this.validateIndex();
    validated.catch(() => {}); // a failure surfaces where it is awaited
    const [prev] = await Promise.all([state.then(({ old }) => previousVersion(api, p.source, old?.versionId)), state]);
    const prevList = prev?.files ?? [];
    const prevFiles = new Map(prevList.map((f) => [f.path, f]));
    let hot = hotFps(prevList);
    // Hints only save time: if the server cannot say the lengths, chunk without them. The
    // request (if any) runs while the job record is written and the plan is made.
    const hintsReady = previousRecipes(prevList, (fps) => api.chunkLengths(fps)).catch(() => null);

    const { old, resumable } = await state;
    const job: JobRecord = {
      key: this.key,
      source: p.source,
      folder: this.folder,
      startedAt: old && old.status !== 'done' ? old.startedAt : Date.now(),
      status: 'running',
      filesTotal: p.filesTotal,
      bytesTotal: p.bytesTotal,
      bundlesAcked: old && old.status !== 'done' ? old.bundlesAcked : 0,
      wireBytes: old && old.status !== 'done' ? old.wireBytes : 0,
      // Kept until this run commits another: a failed run must not hide which version is newest.
      versionId: old?.versionId,
    };
    // Not waited for: later writes of this job's state queue behind it in IndexedDB.
    const jobPut = jobs.put(job);
    jobPut.catch(() => {});
    p.wireBytes = job.wireBytes;

    const recipes = new Map<string, Uint8Array>();
    /** Chunk lengths per file, where known: the next backup's hints (previous.ts). */
    const lengths = new Map<string, Uint32Array>();
    /** What is known of a file from before: the previous version, else an interrupted run. */
    interface Known {
      size: number;
      mtime: number;
      since: number | null;
      recipe: Uint8Array;
      lengths: Uint32Array | null;
      resumed: boolean;
      sample?: boolean;
    }
    const same = (a: { size: number; mtime: number }, f: PickedFile) =>
      a.size === f.file.size && a.mtime === f.file.lastModified;
    const known = new Map<string, Known>();
    for (const f of this.picked.files) {
      const before = prevFiles.get(f.path);
      const again = resumable.get(f.path);
      if (before && prev && same(before, f)) known.set(f.path, { ...before, since: prev.time, resumed: false });
      else if (again && old && same(again, f))
        // Read by this same job: trusted by the same rules, but not sampled (the sample
        // checks the previous version's mtimes; a resume re-reading its own files would
        // undo the resume).
        known.set(f.path, { ...again, recipe: again.fps, since: old.startedAt, resumed: true, sample: false });
    }
    const plan = planChanges(this.picked.files, (path) => known.get(path), {
      now: Date.now(),
      sampleRate: this.settings.sampleRate,
      readAll: this.settings.readAll,
      random: cryptoRandom,
    });
    for (const f of plan.trusted) {
      const k = known.get(f.path)!;
      recipes.set(f.path, k.recipe);
      if (k.lengths) lengths.set(f.path, k.lengths);
      if (k.resumed) p.filesResumed++;
      else p.filesUnchanged++;
      p.filesDone++;
      p.bytesDone += f.file.size;
    }
    p.filesDistrusted = plan.distrusted.length;
    p.filesSampled = plan.sampled.length;
    const toRead = [...plan.changed, ...plan.distrusted, ...plan.sampled];
    this.enter('backing up');
    this.emit();

    const hints = await hintsReady;
    for (const path of recipes.keys()) {
      const known = lengths.has(path) ? null : hints && lengthsOfFile(hints, path);
      if (known) lengths.set(path, known);
    }
    const failures: Failure[] = [];
    const passes = [await this.chunkAndUpload(toRead, hot, hints, recipes, lengths, index, validated, failures)];
    // A sampled file whose content changed under an unchanged size and mtime: this source's
    // mtimes do not vouch for anything, so nothing is trusted unread.
    p.sampleCaught = plan.sampled
      .filter((f) => recipes.has(f.path) && !sameRecipe(recipes.get(f.path)!, known.get(f.path)!.recipe))
      .map((f) => f.path);
    if (p.sampleCaught.length && plan.trusted.length) {
      p.filesDone -= plan.trusted.length;
      p.bytesDone -= plan.trusted.reduce((n, f) => n + f.file.size, 0);
      p.filesUnchanged = p.filesResumed = 0;
      for (const f of plan.trusted) recipes.delete(f.path);
      passes.push(await this.chunkAndUpload(plan.trusted, hot, hints, recipes, lengths, index, validated, failures));
    }
    // Files whose read failed get one more, from a fresh File where the way in gives one.
    const again: PickedFile[] = [];
    const changedMeta = new Set<string>();
    for (const { f, error } of failures) {
      if (f.reopen) {
        try {
          const fresh = await f.reopen();
          if (fresh.size !== f.file.size || fresh.lastModified !== f.file.lastModified) changedMeta.add(f.path);
          p.bytesTotal += fresh.size - f.file.size;
          f.file = fresh;
        } catch (e) {
          p.skipped.push(skippedFile(f.path, e instanceof Error ? `${e.name}: ${e.message}` : String(e)));
          continue;
        }
      } else if (skipReason(error, false) === 'deleted') {
        p.skipped.push(skippedFile(f.path, error));
        continue;
      }
      p.filesDone--;
      p.bytesDone -= f.file.size;
      again.push(f);
    }
    if (again.length) {
      const still: Failure[] = [];
      passes.push(await this.chunkAndUpload(again, hot, hints, recipes, lengths, index, validated, still));
      p.filesRetried = again.length - still.length;
      for (const { f, error } of still)
        p.skipped.push(skippedFile(f.path, error, changedMeta.has(f.path) || this.changedWhileRead.has(f.path)));
    }
    const first = {
      written: Promise.all(passes.map((x) => x.written)).then(() => {}),
      writeAll: () => Promise.all(passes.map((x) => x.writeAll())).then(() => {}),
    };
    // The job record is for a resume; a backup that cannot write it still commits.
    await jobPut.catch((e: unknown) => console.warn('backup bookkeeping in IndexedDB failed:', e));
    if (this.cancelled) throw new Error('cancelled');

    this.enter('committing');
    this.emit();
    const committed = () => this.picked.files.filter((f) => recipes.has(f.path));
    const manifest = () =>
      manifestBody(
        p.source,
        job.startedAt,
        [
          ...this.picked.dirs.map((d): BodyEntry => ({
            path: d,
            kind: 'dir',
            size: 0,
            mtime: 0,
            mode: null,
            recipe: [],
          })),
          ...committed().map((f): BodyEntry => ({
            path: f.path,
            kind: 'file',
            size: f.file.size,
            mtime: f.file.lastModified,
            mode: null,
            recipe: recipes.get(f.path)!,
          })),
        ],
        p.skipped,
        this.folder,
      );
    /** Whether `m`, a version's manifest as the server answers it, is the one this backup commits. */
    const ours = (m: Manifest) => {
      const files = committed();
      const theirs = m.entries.filter((e) => e.kind === 'file');
      if (theirs.length !== files.length) return false;
      if (m.entries.length - theirs.length !== this.picked.dirs.length) return false;
      if ((m.skipped?.length ?? 0) !== p.skipped.length) return false;
      const byPath = new Map(theirs.map((e) => [e.path, e]));
      return files.every((f) => {
        const e = byPath.get(f.path);
        const r = recipes.get(f.path)!;
        return (
          e !== undefined &&
          e.size === f.file.size &&
          e.mtime === f.file.lastModified &&
          e.recipe.length === recipeLength(r) &&
          e.recipe.every((fp, i) => fp === recipeAt(r, i))
        );
      });
    };
    // The job's file records (for a resume) are written while the version commits. Once it
    // is committed they are not needed (the rest are not written); if it fails, they are.
    const commit = async ({ written, writeAll }: { written: Promise<void>; writeAll: () => Promise<void> }) => {
      try {
        const version = await this.post(api, manifest, { source: p.source, time: job.startedAt, ours });
        this.committed = true;
        rememberCommitted(
          api,
          p.source,
          version,
          committed().map((f) => ({
            path: f.path,
            size: f.file.size,
            mtime: f.file.lastModified,
            recipe: recipes.get(f.path)!,
            lengths: lengths.get(f.path) ?? null,
          })),
        );
        return version;
      } catch (e) {
        // Whatever the bookkeeping so far did, write every record for a resume; a write that
        // never ends (IndexedDB stuck) costs the resume some re-reading, not the backup's end.
        const records = written
          .catch(() => {})
          .then(writeAll)
          .catch(() => {});
        await Promise.race([records, pause(RECORDS_WAIT_MS)]);
        throw e;
      }
    };
    // Chunks the server said it lacks, over every round: none of them is trusted again.
    const missing = new Set<string>();
    const names = (r: Uint8Array | undefined) =>
      Array.from({ length: r ? recipeLength(r) : 0 }, (_, i) => recipeAt(r!, i));
    let pass = first;
    for (let round = 1; ; round++) {
      try {
        return await commit(pass);
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 409) || round >= MISSING_ROUNDS || this.cancelled) throw e;
        // The hot cache or the client index promised chunks the server does not hold (a
        // prune since the lookup; its data replaced?). Forget both for those chunks and read
        // the affected files again; a prune in between may do it again, so a few rounds.
        for (const fp of (e.body.missing as string[]) ?? []) missing.add(fp);
        await index?.clear();
        const affected = this.picked.files.filter((f) => names(recipes.get(f.path)).some((fp) => missing.has(fp)));
        // They are counted again as they are read again.
        p.filesDone -= affected.length;
        p.bytesDone -= affected.reduce((n, f) => n + f.file.size, 0);
        hot = hotFps(prevList, missing);
        const lost: Failure[] = [];
        pass = await this.chunkAndUpload(affected, hot, hints, recipes, lengths, null, validated, lost);
        for (const { f, error } of lost) p.skipped.push(skippedFile(f.path, error));
      }
    }
  }

  /**
   * Commits the version. A failure worth retrying is tried again (`COMMIT_ATTEMPTS` in
   * all), but only once the versions list shows the commit did not land: an answer lost on
   * its way back leaves the version committed, and posting it again would store it twice.
   * `ours` tells this backup's manifest among the versions of its source and start time.
   */
  private async post(api: Api, body: () => Blob | Uint8Array, mine: Mine): Promise<VersionInfo> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await api.commitVersion(body());
      } catch (e) {
        if (!isTransient(e)) throw e;
        let failed: unknown = e;
        for (;;) {
          if (attempt >= COMMIT_ATTEMPTS || this.cancelled) throw failed;
          await pause(COMMIT_RETRY_MS * 2 ** (attempt - 1));
          attempt++;
          try {
            const landed = await this.landed(api, mine);
            if (landed) return landed;
            break;
          } catch (e) {
            if (!isTransient(e)) throw e;
            failed = e;
          }
        }
      }
    }
  }

  /** The version a commit whose answer was lost stored, if it did. */
  private async landed(api: Api, { source, time, ours }: Mine): Promise<VersionInfo | null> {
    const same = (await api.versions()).filter((v) => v.source === source && v.time === time);
    for (const v of same.sort((a, b) => b.id - a.id)) {
      const { manifest, ...info } = await api.version(v.id);
      if (ours(manifest)) return info;
    }
    return null;
  }

  /**
   * Stages 2 and 3 for `files`; fills `recipes`. Resolves once every chunk is durable, with
   * `written`: the job's per-file records, still being written.
   */
  private async chunkAndUpload(
    files: PickedFolder['files'],
    hot: Uint8Array,
    hints: PreviousRecipes | null,
    recipes: Map<string, Uint8Array>,
    lengths: Map<string, Uint32Array>,
    index: ClientIndex | null,
    validated: Promise<void>,
    failures: Failure[],
  ): Promise<{ written: Promise<void>; writeAll: () => Promise<void> }> {
    const { api, pool, jobs } = this.deps;
    const p = this.progress;
    await pageCore(); // the uploader encodes its bundles with it
    const uploader = new Uploader({
      missing: (fps, signal) => api.missing(fps, signal),
      upload: (bundle, signal) => api.uploadBundle(bundle, signal),
      known: index ? (fps) => validated.then(() => index.lookup(fps)) : undefined,
      acked: async (fps, wire) => {
        p.wireBytes += wire;
        await Promise.all([
          index?.add(fps),
          jobs.update(this.key, (j) => {
            j.bundlesAcked++;
            j.wireBytes += wire;
          }),
        ]);
      },
    });
    this.uploader = uploader;
    if (this.pauseGate) uploader.pause();
    pool.setKnown(hot, ZSTD_LEVEL, hints?.data);
    // Counted on from an earlier pass (a retry after 409 calls this again).
    const predictedBase = pool.predictedChunks - p.chunksPredicted;
    const prevFile = (path: string) => hints?.fileIndex.get(path) ?? -1;

    /** Per file: its recipe recorded in the job state once its chunks are all durable. */
    const recorded: Promise<void>[] = [];
    // Written in batches: after a reload at most one batch of finished files is read again.
    // Held in memory for the first RECORD_AFTER_MS of a backup (a short backup interrupted
    // then re-reads that much work; most backups end before any record is written).
    let batch: FileRecord[] = [];
    let flushedAt = performance.now();
    const flush = (force = false) => {
      if (this.committed || (!force && performance.now() - this.started < RECORD_AFTER_MS)) return Promise.resolve();
      const b = batch;
      batch = [];
      flushedAt = performance.now();
      return b.length ? jobs.putFiles(b) : Promise.resolve();
    };
    // Every 64 files, or RECORD_EVERY_MS after the last write: a folder of a few large files
    // would otherwise keep every record in memory until its end.
    const record = (r: FileRecord) => {
      if (this.committed) return Promise.resolve();
      batch.push(r);
      return batch.length >= 64 || performance.now() - flushedAt >= RECORD_EVERY_MS ? flush() : Promise.resolve();
    };
    // Keep every worker's queue full while the page waits on earlier replies.
    const inFlight = Math.max(4, pool.size * 8);
    // Aborted when this pass fails or is cancelled: its jobs still queued in the pool are
    // dropped and its running ones stopped, so none of them is left in a worker when the
    // next backup gives the workers its known set.
    const stop = new AbortController();
    const one = async (work: PickedFolder['files']) => {
      let seen = 0;
      const durable: Promise<void>[] = [];
      const onNew = async (msg: NewChunks) => {
        // Registered before the first await: the worker's result can arrive while add() still
        // waits for room in the queue, and the files' records must wait for these chunks too
        // (else a resume after a reload trusts a record whose chunks never reached the server).
        const added = uploader.add(candidates(msg));
        const stored = added.then((a) => a.durable);
        stored.catch(() => {}); // a failure surfaces through add()
        durable.push(stored);
        await added;
      };
      const onRead = (bytes: number) => {
        p.bytesRead += bytes - seen;
        seen = bytes;
      };
      const sizes = work.map((f) => f.file.size);
      let results: BatchResult[];
      try {
        if (work.length > 1 || sizes[0] < BATCH_FILE_BYTES) {
          results = await pool.chunkBatch(
            work.map((f) => f.file),
            sizes,
            work.map((f) => prevFile(f.path)),
            onNew,
            onRead,
            stop.signal,
          );
        } else {
          const f = work[0].file;
          const split = f.size >= SPLIT_FILE_BYTES && pool.size > 1;
          if (split) p.filesSplit++;
          results = [
            split
              ? await pool.chunkLargeFile(f, SEGMENT_BYTES, onNew, onRead, stop.signal)
              : await pool.chunkFile(f, prevFile(work[0].path), onNew, onRead, stop.signal),
          ];
          p.bytesRead += sizes[0] - seen;
          // A read checks the file against its snapshot when it starts, not while it runs:
          // a file rewritten during a long read gives a mix of old and new bytes. One more
          // small read after it makes the browser check again.
          const torn = await changedSince(f);
          if (torn) {
            results = [{ error: torn }];
            this.changedWhileRead.add(work[0].path);
          }
        }
      } catch (e) {
        if (uploader.error || this.cancelled || stop.signal.aborted) throw uploader.error ?? e;
        results = work.map(() => ({ error: e instanceof Error ? e.message : String(e) }));
      }
      work.forEach((f, k) => {
        const r = results[k];
        if ('error' in r) {
          // The file itself could not be read (changed or removed since it was picked): no
          // recipe of it stands, not even the previous version's.
          recipes.delete(f.path);
          lengths.delete(f.path);
          failures.push({ f, error: r.error });
        } else {
          recipes.set(f.path, r.fps);
          lengths.set(f.path, r.lengths);
          p.chunksRead += r.lengths.length;
          p.chunksPredicted = pool.predictedChunks - predictedBase;
          // Not awaited here: a bundle seals only when enough chunks arrive, so a lane
          // that waited for its own file's chunks to be stored could wait forever.
          recorded.push(
            Promise.all(durable).then(() =>
              record({ job: this.key, path: f.path, size: sizes[k], mtime: f.file.lastModified, ...r }),
            ),
          );
        }
        p.filesDone++;
        p.bytesDone += sizes[k];
      });
    };
    // Largest first (LPT scheduling): a big file handed out last would leave one worker
    // chunking it alone while the others idle.
    const size = (w: PickedFolder['files']) => w.reduce((n, f) => n + f.file.size, 0);
    const work = batches(files).sort((a, b) => size(b) - size(a));
    let next = 0;
    const lanes = Array.from({ length: inFlight }, async () => {
      while (next < work.length) {
        if (this.pauseGate) await this.pauseGate;
        if (this.cancelled || stop.signal.aborted) throw new Error('cancelled');
        await one(work[next++]);
      }
    });
    try {
      await Promise.all(lanes);
      await uploader.drain();
    } catch (e) {
      stop.abort(e);
      // Keep what did become durable for a resume, then fail, once no job of this pass is
      // left in the pool.
      await Promise.allSettled([...lanes, ...recorded, uploader.settled()]);
      await flush(true).catch(() => {});
      throw e;
    } finally {
      p.chunksSent += uploader.stats.chunksSent;
    }
    const records = Promise.all(recorded).then(() => flush());
    const written = Promise.all([records, uploader.settled()]).then(() => {});
    // Bookkeeping only (a resume may read files again): a committed backup is not failed for it.
    written.catch((e: unknown) => console.warn('backup bookkeeping in IndexedDB failed:', e));
    return { written, writeAll: () => flush(true) };
  }
}
