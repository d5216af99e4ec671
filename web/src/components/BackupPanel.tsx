import { useEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react';
import type { Api, SkippedFile } from '../api/client';
import { folderName, type BackupJob, type BackupProgress } from '../backup/backup';
import { JobStore, type JobRecord } from '../backup/jobstore';
import { DEFAULT_SETTINGS, normalizeSettings, sourceSettings, type SourceSettings } from '../backup/sourcesettings';
import { applyExcludes, Excludes } from '../input/excludes';
import type { PickedFolder } from '../input/folder';
import { sourceFolders } from '../sources/store';
import { ELSEWHERE_MESSAGE, refusedMessage, type BackupRunner } from '../sources/runner';
import { ExcludesEditor } from './ExcludesEditor';
import { FolderInput } from './FolderInput';
import { bytes, DEDUP_RATIO_MEANS, duration, ratio } from './format';

/** Entries (files and folders) a version holds at most (the server's manifest limit). */
const MAX_ENTRIES = 1_000_000;

interface Props {
  api: Api;
  jobs: JobStore;
  runner: BackupRunner;
  onCommitted?: () => void;
}

/** Drop a folder, back it up, watch it go: the product's main screen. */
export function BackupPanel({ api, jobs, runner, onCommitted }: Props) {
  const [picked, setPicked] = useState<PickedFolder | null>(null);
  const [label, setLabel] = useState('');
  /** The interrupted backup that picking this folder resumes, if any. */
  const [resuming, setResuming] = useState<JobRecord | null>(null);
  const lastPick = useRef<PickedFolder | null>(null);
  /** The source name was typed since the pick: the lookup of the folder's source keeps it. */
  const labelEdited = useRef(false);
  const run = useSyncExternalStore(runner.subscribe, () => runner.state);
  /** A new pick hides the last backup's result (a running one stays shown). */
  const [hideLast, setHideLast] = useState(false);
  const job = run.job;
  const progress = job || !hideLast ? run.progress : null;
  /** Interrupted backups (null until read). */
  const [unfinished, setUnfinished] = useState<JobRecord[] | null>(null);
  const [settings, setSettings] = useState<SourceSettings>(DEFAULT_SETTINGS);
  /** The settings were changed on screen since the source was chosen: a late load keeps them. */
  const edited = useRef(false);
  const edit = (s: SourceSettings) => {
    edited.current = true;
    setSettings(s);
  };
  // From the runner's start: taking the lock and opening the index come before the job.
  const running = run.active !== null;
  const excludes = settings.excludes;
  const preview = useMemo(() => (picked ? applyExcludes(picked, new Excludes(excludes)) : null), [picked, excludes]);
  const source = label.trim() || picked?.root || '';
  const sourceTooLong = new TextEncoder().encode(source).length > 256;

  // Each source keeps its own settings: show the chosen source's.
  useEffect(() => {
    if (!source) return;
    let live = true;
    edited.current = false;
    sourceSettings()
      .then((store) => store.get(api.repo, source))
      .then(
        (s) => live && !edited.current && setSettings(s),
        () => live && !edited.current && setSettings(DEFAULT_SETTINGS),
      );
    return () => {
      live = false;
    };
  }, [api.repo, source]);

  // Read again once a backup ends, not at each phase: during a backup the page's thread is
  // needed to feed the workers and the uploads.
  useEffect(() => {
    if (!running) jobs.unfinished().then(setUnfinished, () => setUnfinished([]));
  }, [jobs, running]);

  /**
   * A picked folder keeps the source it was backed up as: an interrupted backup of it first
   * (so that it resumes), else the source it last went to, else its own name.
   */
  const onPicked = async (p: PickedFolder) => {
    lastPick.current = p;
    labelEdited.current = false;
    setPicked(p);
    setLabel(p.root);
    setResuming(null);
    setHideLast(true);
    const folder = folderName(p);
    if (!folder) return;
    const job = await jobs.unfinishedFor(api.repo, folder).catch(() => undefined);
    const known = job
      ? undefined
      : await sourceFolders().then(
          (s) => s.forFolder(api.repo, folder),
          () => undefined,
        );
    const source = job?.source ?? known?.source;
    // A later pick may have replaced this one meanwhile.
    if (source && lastPick.current === p && !labelEdited.current) {
      setLabel(source);
      setResuming(job ?? null);
    }
  };

  const start = async () => {
    if (!picked) return;
    const chosen = normalizeSettings(settings);
    // Saved for the next backup of this source; a failure to save does not stop this one.
    await sourceSettings()
      .then((store) => store.put(api.repo, source, chosen))
      .catch((e: unknown) => console.warn('source settings not saved:', e));
    setHideLast(false);
    const result = await runner.run({ picked, source, settings: chosen });
    if (result?.phase === 'done') onCommitted?.();
  };

  return (
    <section className="backup" data-testid="backup-panel" data-jobs={unfinished ? 'read' : 'reading'}>
      {(unfinished ?? [])
        .filter((j) => j.status === 'running' || j.status === 'failed')
        .map((j) => (
          <p key={j.key} className="warn" data-testid="unfinished-job">
            An unfinished backup of “{j.source}”{j.folder && j.folder !== j.source ? ` (folder “${j.folder}”)` : ''} (
            {j.bundlesAcked} bundles already stored, {bytes(j.wireBytes)} sent). Choose the same folder again to resume
            it: nothing already stored is sent again.
          </p>
        ))}
      <FolderInput disabled={running} onPicked={(p) => void onPicked(p)} />
      {picked && !running && picked.files.length === 0 && (
        <p className="error" data-testid="picked-empty" role="alert">
          {picked.root ? `The folder “${picked.root}” holds no files` : 'The chosen folder holds no files'}
          {picked.dirs.length > 1 ? ` (only ${picked.dirs.length - 1} empty folders)` : ''}: there is nothing to back
          up. Choose another folder.
        </p>
      )}
      {picked && !running && resuming && resuming.key === JobStore.key(api.repo, label.trim()) && (
        <p className="muted" data-testid="picked-resumes" data-source={resuming.source}>
          This folder resumes the interrupted backup of “{resuming.source}”: {resuming.bundlesAcked} bundles already
          stored are not sent again.
        </p>
      )}
      {picked && !running && preview && picked.files.length > 0 && (
        <div className="plan">
          <span data-testid="picked-summary" data-root={picked.root} data-files={preview.picked.files.length}>
            {preview.picked.files.length} files, {bytes(preview.picked.files.reduce((n, f) => n + f.file.size, 0))}
            {preview.excluded.files.length > 0 && ` to back up, ${preview.excluded.files.length} excluded`}
          </span>
          <label>
            Source name{' '}
            <input
              data-testid="source-label"
              value={label}
              onChange={(e) => {
                labelEdited.current = true;
                setLabel(e.target.value);
              }}
            />
          </label>
          <label title="Files whose size and modification time are unchanged are trusted unread; this share of them is read anyway, to catch a change the time hides.">
            Re-read a sample of{' '}
            <input
              data-testid="sample-percent"
              type="number"
              min={0}
              max={100}
              step={1}
              value={Math.round(settings.sampleRate * 1000) / 10}
              onChange={(e) =>
                edit({ ...settings, sampleRate: Math.min(1, Math.max(0, Number(e.target.value) / 100 || 0)) })
              }
            />
            % of unchanged files
          </label>
          <label>
            <input
              data-testid="read-all"
              type="checkbox"
              checked={settings.readAll}
              onChange={(e) => edit({ ...settings, readAll: e.target.checked })}
            />{' '}
            Read every file
          </label>
          <ExcludesEditor
            patterns={settings.excludes}
            onChange={(excludes) => edit({ ...settings, excludes })}
            excluded={preview.excluded}
          />
          {preview.picked.files.length === 0 ? (
            <p className="error" data-testid="picked-all-excluded" role="alert">
              Every file of this folder is excluded: there is nothing to back up. Change the patterns above.
            </p>
          ) : preview.picked.files.length + preview.picked.dirs.length > MAX_ENTRIES ? (
            // A version holds at most this many (docs/API.md): said now, not after the upload.
            <p className="error" data-testid="picked-too-many" role="alert">
              This folder holds {preview.picked.files.length + preview.picked.dirs.length} files and folders; a version
              holds at most {MAX_ENTRIES}. Back up its subfolders as sources of their own.
            </p>
          ) : sourceTooLong ? (
            // The server takes 1 to 256 bytes (docs/API.md): said now, not after the upload.
            <p className="error" data-testid="source-too-long" role="alert">
              The source name is longer than 256 bytes: shorten it to back up.
            </p>
          ) : (
            <button type="button" data-testid="backup-start" onClick={start}>
              Back up
            </button>
          )}
        </div>
      )}
      {run.elsewhere && !running && (
        <p className="warn" data-testid="backup-elsewhere" role="alert">
          Not started: {ELSEWHERE_MESSAGE}
        </p>
      )}
      {run.refused && (
        <p className="warn" data-testid="backup-refused" role="alert">
          {refusedMessage(run.refused)}
        </p>
      )}
      {progress && <ProgressView p={progress} job={job} />}
      {progress && run.excluded && run.excluded.files.length + run.excluded.dirs.length > 0 && (
        <p
          className="muted"
          data-testid="backup-excluded"
          data-files={run.excluded.files.length}
          data-dirs={run.excluded.dirs.length}
        >
          {run.excluded.files.length} files ({bytes(run.excluded.bytes)})
          {run.excluded.dirs.length > 0 && ` and ${run.excluded.dirs.length} folders, not even walked,`} were excluded
          by this source’s patterns.
        </p>
      )}
    </section>
  );
}

function ProgressView({ p, job }: { p: BackupProgress; job: BackupJob | null }) {
  const active = ['planning', 'backing up', 'committing'].includes(p.phase);
  const pct = p.bytesTotal ? Math.min(100, (100 * p.bytesDone) / p.bytesTotal) : 100;
  return (
    <div
      className="progress"
      data-testid="backup-progress"
      data-phase={p.phase}
      data-phase-ms={JSON.stringify(p.phaseMs)}
    >
      <div className="bar">
        <div style={{ width: `${pct}%` }} />
      </div>
      <dl>
        <dt>Status</dt>
        <dd data-testid="backup-phase">
          {p.phase}
          {p.paused ? ' (paused)' : ''}
        </dd>
        <dt>Files</dt>
        <dd data-testid="backup-files">
          {p.filesDone} of {p.filesTotal} ({p.filesUnchanged} unchanged, {p.filesResumed} resumed)
        </dd>
        <dt>Unchanged</dt>
        <dd
          data-testid="backup-trust"
          data-trusted={p.filesUnchanged + p.filesResumed}
          data-sampled={p.filesSampled}
          data-distrusted={p.filesDistrusted}
          data-caught={p.sampleCaught.length}
        >
          {p.filesUnchanged + p.filesResumed} trusted unread (same size and modification time), {p.filesSampled} of
          those read anyway as a sample, {p.filesDistrusted} read because their modification time cannot vouch for them
        </dd>
        <dt>Read</dt>
        <dd>
          {bytes(p.bytesRead)} read, {bytes(p.bytesDone)} of {bytes(p.bytesTotal)} done
        </dd>
        <dt>Sent</dt>
        <dd data-testid="backup-sent" data-bytes={p.wireBytes}>
          {bytes(p.wireBytes)}
        </dd>
        <dt>Chunks</dt>
        <dd data-testid="backup-chunks" data-read={p.chunksRead} data-predicted={p.chunksPredicted}>
          {p.chunksRead} in files read, {p.chunksPredicted} predicted from the previous version
        </dd>
        {p.version ? (
          <>
            <dt title={DEDUP_RATIO_MEANS}>Dedup ratio</dt>
            <dd data-testid="backup-ratio" data-value={p.version.stats.dedup_ratio ?? ''} title={DEDUP_RATIO_MEANS}>
              {ratio(p.version.stats.dedup_ratio)}
            </dd>
          </>
        ) : (
          <>
            <dt>Dedup + compression so far</dt>
            <dd data-testid="backup-ratio-so-far" title="Bytes done divided by bytes sent, while the backup runs">
              {ratio(p.dedupRatio)}
            </dd>
          </>
        )}
        <dt>Speed</dt>
        <dd>
          {p.mbPerSecond.toFixed(1)} MB/s, ETA {duration(p.etaSeconds)}
        </dd>
      </dl>
      {active && job && (
        <div className="controls">
          {p.paused ? (
            <button type="button" data-testid="backup-resume" onClick={() => job.resume()}>
              Resume
            </button>
          ) : (
            <button type="button" data-testid="backup-pause" onClick={() => job.pause()}>
              Pause
            </button>
          )}
          <button type="button" data-testid="backup-cancel" onClick={() => job.cancel()}>
            Cancel
          </button>
        </div>
      )}
      {p.message && (
        <p className={p.phase === 'failed' ? 'error' : 'muted'} data-testid="backup-message">
          {p.message}
        </p>
      )}
      {p.sampleCaught.length > 0 && (
        <p className="warn" data-testid="backup-sample-caught">
          {p.sampleCaught.length} sampled file{p.sampleCaught.length > 1 ? 's' : ''} (
          {p.sampleCaught.slice(0, 3).join(', ')}
          {p.sampleCaught.length > 3 ? ', …' : ''}) changed although size and modification time did not: every file of
          this source was read.
        </p>
      )}
      {p.version && p.skipped.length === 0 && (
        <p className="ok" data-testid="backup-done" data-version={p.version.id} data-split-files={p.filesSplit}>
          Version #{p.version.id} of “{p.version.source}” stored: {p.version.stats.files} files,{' '}
          {bytes(p.version.stats.logical_bytes)}, {bytes(p.version.stats.new_stored_bytes)} new on the server;{' '}
          {p.filesUnchanged + p.filesResumed} files trusted unread (same size and modification time).
        </p>
      )}
      {p.version && p.skipped.length > 0 && (
        <p
          className="error"
          data-testid="backup-incomplete"
          data-version={p.version.id}
          data-skipped={p.skipped.length}
        >
          Version #{p.version.id} of “{p.version.source}” is incomplete: {p.skipped.length} of the picked files are not
          in it (below). It holds the other {p.version.stats.files} files, {bytes(p.version.stats.logical_bytes)}. Back
          up again to include them.
        </p>
      )}
      {p.skipped.length > 0 && (
        <ul className="error" data-testid="backup-errors">
          {p.skipped.map((e, i) => (
            <li key={i} data-testid="backup-skipped" data-path={e.path} data-reason={e.reason}>
              {e.path}: not backed up, {skipText(e)}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** A skipped file's reason, for people. */
export function skipText(s: SkippedFile): string {
  const why =
    s.reason === 'deleted'
      ? 'it was deleted after it was picked'
      : s.reason === 'changed'
        ? 'it changed while it was being read, and again when read once more'
        : /NotReadableError/.test(s.detail ?? '')
          ? 'it could not be read: it changed since it was picked, or permissions forbid reading it (the browser does not say which)'
          : 'it could not be read';
  return s.detail ? `${why} (${s.detail})` : why;
}
