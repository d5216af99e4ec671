import { useEffect, useRef, useState } from 'react';
import type { Api } from '../api/client';
import { BackupJob, type BackupProgress } from '../backup/backup';
import type { JobRecord, JobStore } from '../backup/jobstore';
import type { ClientIndex } from '../dedupindex/index';
import type { PickedFolder } from '../input/folder';
import type { CorePool } from '../worker/pool';
import { FolderInput } from './FolderInput';
import { bytes, duration, ratio } from './format';

interface Props {
  api: Api;
  pool: CorePool;
  jobs: JobStore;
  index: ClientIndex | null;
  onCommitted?: () => void;
}

/** Drop a folder, back it up, watch it go: the product's main screen. */
export function BackupPanel({ api, pool, jobs, index, onCommitted }: Props) {
  const [picked, setPicked] = useState<PickedFolder | null>(null);
  const [label, setLabel] = useState('');
  const [progress, setProgress] = useState<BackupProgress | null>(null);
  const [unfinished, setUnfinished] = useState<JobRecord[]>([]);
  const job = useRef<BackupJob | null>(null);
  const running = progress !== null && ['planning', 'backing up', 'committing'].includes(progress.phase);

  // Read again once a backup ends, not at each phase: during a backup the page's thread is
  // needed to feed the workers and the uploads.
  useEffect(() => {
    if (!running) jobs.unfinished().then(setUnfinished, () => {});
  }, [jobs, running]);

  const start = async () => {
    if (!picked) return;
    const j = new BackupJob({ api, pool, jobs, index }, picked, label.trim() || picked.root, setProgress);
    job.current = j;
    const result = await j.run();
    job.current = null;
    if (result.phase === 'done') onCommitted?.();
  };

  return (
    <section className="backup">
      {unfinished
        .filter((j) => j.status === 'running' || j.status === 'failed')
        .map((j) => (
          <p key={j.key} className="warn" data-testid="unfinished-job">
            An unfinished backup of “{j.source}” ({j.bundlesAcked} bundles already stored, {bytes(j.wireBytes)} sent).
            Choose the same folder again to resume it: nothing already stored is sent again.
          </p>
        ))}
      <FolderInput
        disabled={running}
        onPicked={(p) => {
          setPicked(p);
          setLabel(p.root);
          setProgress(null);
        }}
      />
      {picked && !running && (
        <div className="plan">
          <span data-testid="picked-summary" data-root={picked.root} data-files={picked.files.length}>
            {picked.files.length} files, {bytes(picked.files.reduce((n, f) => n + f.file.size, 0))}
          </span>
          <label>
            Source name <input data-testid="source-label" value={label} onChange={(e) => setLabel(e.target.value)} />
          </label>
          <button type="button" data-testid="backup-start" onClick={start}>
            Back up
          </button>
        </div>
      )}
      {progress && <ProgressView p={progress} job={job.current} />}
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
        <dt>Dedup + compression</dt>
        <dd data-testid="backup-ratio">{ratio(p.dedupRatio)}</dd>
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
      {p.version && (
        <p className="ok" data-testid="backup-done" data-version={p.version.id} data-split-files={p.filesSplit}>
          Version #{p.version.id} of “{p.version.source}” stored: {p.version.stats.files} files,{' '}
          {bytes(p.version.stats.logical_bytes)}, {bytes(p.version.stats.new_stored_bytes)} new on the server.
        </p>
      )}
      {p.errors.length > 0 && (
        <ul className="error" data-testid="backup-errors">
          {p.errors.map((e) => (
            <li key={e.path}>
              {e.path}: {e.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
