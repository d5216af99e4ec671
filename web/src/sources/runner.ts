/**
 * Runs the page's backups, whichever view starts them (Back up, Sources, the schedule), so
 * that what a backup does to the tab does not depend on the view that is open:
 *
 * - one backup of a repository at a time across every tab of the page: the Web Locks API
 *   (`navigator.locks`) holds `ditto-backup:<server>|<repo>` for the whole run, and a tab that
 *   cannot take it is told that another tab is backing up instead of racing it. The client
 *   index is written only by backups, so it is written only under that lock; under it, the
 *   index is reopened when another tab wrote it since (`isCurrent`), so that its in-memory
 *   state is the one the last tab left in IndexedDB;
 * - the tab title shows the progress, and closing the tab mid-backup asks first
 *   (beforeunload);
 * - a backup that ends while the tab is hidden, or that the schedule started, ends with a
 *   notification, if the user turned notifications on (notify.ts).
 */
import type { Api } from '../api/client';
import { BackupJob, folderName, type BackupProgress } from '../backup/backup';
import type { JobStore } from '../backup/jobstore';
import type { SourceSettings } from '../backup/sourcesettings';
import { openClientIndex, type ClientIndex } from '../dedupindex/index';
import { applyExcludes, Excludes, type ExcludedFiles } from '../input/excludes';
import type { PickedFolder } from '../input/folder';
import type { CorePool } from '../worker/pool';
import { notifyEnded } from './notify';
import { sourceFolders } from './store';
import { ExternalStore } from '../ui/externalStore';

export interface RunRequest {
  picked: PickedFolder;
  source: string;
  settings: SourceSettings;
  /** Started by the schedule, not by a click. */
  background?: boolean;
  /**
   * Asked once the repository's lock is held, before anything else: false drops the run (a
   * scheduled backup another tab ran while this one scanned the folder is not due any more).
   */
  stillWanted?: () => Promise<boolean>;
}

/**
 * Why `picked`, with `settings`' exclude patterns, gives nothing to back up (no file, or no
 * file left once excluded), as a sentence's start; null when it gives something. A version
 * of no file would pass for a backup of the folder.
 */
export function nothingToBackUp(picked: PickedFolder, settings: SourceSettings): string | null {
  const name = picked.root ? `The folder “${picked.root}”` : 'The chosen folder';
  if (picked.files.length === 0) return `${name} holds no files`;
  if (applyExcludes(picked, new Excludes(settings.excludes)).picked.files.length === 0)
    return `Every file of ${name.charAt(0).toLowerCase() + name.slice(1)} is excluded by the source's patterns`;
  return null;
}

export interface RunnerDeps {
  api: Api;
  pool: CorePool;
  jobs: JobStore;
  /** Opens the client index as IndexedDB holds it now (null: none, the server answers). */
  openIndex: () => Promise<ClientIndex | null>;
}

export interface RunnerState {
  /**
   * The source this tab is backing up, from `run()` on: taking the lock, the schedule's
   * second look and opening the index come before `job`, and a click then would not start.
   */
  active: { source: string } | null;
  /** The backup running in this tab, if any. */
  job: BackupJob | null;
  /** The progress of the running or last backup. */
  progress: BackupProgress | null;
  /** Set when a backup could not start because another tab runs one of this repository. */
  elsewhere: { source: string } | null;
  /** Set when a click's backup (`source`) could not start because this tab runs `running`'s. */
  refused: { source: string; running: string } | null;
  /** What the source's exclude patterns left out of the running or last backup. */
  excluded: ExcludedFiles | null;
  /**
   * How many versions this tab's backups have committed: a view of the repository shown
   * while a scheduled backup commits reads it again when this grows.
   */
  committed: number;
}

export const ELSEWHERE_MESSAGE =
  'A backup of this repository is running in another tab of this page. Wait for it to finish there (or close that tab), then back up again.';

/** Why a click's backup did not start while this tab runs another one. */
export function refusedMessage(r: { source: string; running: string }): string {
  return `Another backup (“${r.running}”) is running; “${r.source}” was not backed up. Back it up again once that one ends.`;
}

export class BackupRunner {
  private title = '';
  private store = new ExternalStore<RunnerState>({
    active: null,
    job: null,
    progress: null,
    elsewhere: null,
    refused: null,
    excluded: null,
    committed: 0,
  });
  /** Calls `fn` on every change of `state`; returns the unsubscribe. */
  readonly subscribe = this.store.subscribe;

  /** `index`: the one the page opened at load, closed before the first backup opens its own. */
  constructor(
    private deps: RunnerDeps,
    private index: ClientIndex | null = null,
  ) {}

  get repo(): string {
    return this.deps.api.repo;
  }

  /**
   * A run of this tab is under way, from the call on (taking the lock and preparing its job
   * come before `state.job`, and a click then is not another tab's backup).
   */
  get running(): boolean {
    return this.state.active !== null;
  }

  get state(): RunnerState {
    return this.store.get();
  }

  private set(change: Partial<RunnerState>) {
    this.store.set((state) => ({ ...state, ...change }));
  }

  get lockName(): string {
    return `ditto-backup:${this.deps.api.base}|${this.deps.api.repo}`;
  }

  /** Whether a backup of the repository runs in this tab or another (false without Web Locks). */
  async busyAnywhere(): Promise<boolean> {
    if (this.running) return true;
    const locks = typeof navigator !== 'undefined' ? navigator.locks : undefined;
    if (!locks) return false;
    const { held = [], pending = [] } = await locks.query();
    return [...held, ...pending].some((l) => l.name === this.lockName);
  }

  /**
   * Backs up `req` under the repository's lock; resolves to its final progress, or to null
   * when another tab holds the lock (`state.elsewhere` says so) or this tab is busy
   * (`state.refused` says so for a click: a click that was still reading its folder when
   * the schedule started a backup would otherwise do nothing and say nothing).
   */
  async run(req: RunRequest): Promise<BackupProgress | null> {
    const busy = this.state.active;
    if (busy) {
      // A scheduled backup just waits for its next tick.
      if (!req.background) this.set({ refused: { source: req.source, running: busy.source } });
      return null;
    }
    // A scheduled run leaves a click's refusal shown: the user has not read it yet.
    this.set({ active: { source: req.source }, ...(req.background ? {} : { refused: null }) });
    try {
      return await this.runLocked(req);
    } finally {
      this.set({ active: null });
    }
  }

  private async runLocked(req: RunRequest): Promise<BackupProgress | null> {
    // The last backup's result goes at once: read while this one starts, it would pass for its.
    this.set({ progress: null, excluded: null });
    const locks = typeof navigator !== 'undefined' ? navigator.locks : undefined;
    const wanted = async () => (req.stillWanted ? await req.stillWanted() : true);
    if (!locks) {
      // Without the API (an old browser) tabs are not kept apart; the backup still runs.
      console.warn('Web Locks API missing: backups in two tabs at once are not prevented');
      return (await wanted()) ? this.locked(req) : null;
    }
    return locks.request(this.lockName, { ifAvailable: true }, async (lock) => {
      if (!lock) {
        // A scheduled backup just waits for its next tick; a click is told why nothing ran.
        if (!req.background) this.set({ elsewhere: { source: req.source } });
        return null;
      }
      return (await wanted()) ? this.locked(req) : null;
    });
  }

  private async locked(req: RunRequest): Promise<BackupProgress> {
    this.set({ elsewhere: null });
    // The source remembers its folder (and the handle, for "Back up again"), beside the
    // backup rather than before it; a failure to save does not stop the backup.
    const folder = folderName(req.picked);
    if (folder)
      void sourceFolders()
        .then((s) => s.remember(this.deps.api.repo, req.source, folder, req.picked.handle))
        .catch((e: unknown) => console.warn('source folder not saved:', e));
    this.title = document.title;
    const onUnload = (e: BeforeUnloadEvent) => {
      e.preventDefault();
      e.returnValue = '';
    };
    addEventListener('beforeunload', onUnload);
    const { picked, excluded } = applyExcludes(req.picked, new Excludes(req.settings.excludes));
    const job = new BackupJob(
      { ...this.deps, index: await this.freshIndex() },
      picked,
      req.source,
      (p) => this.progressed(p),
      req.settings,
    );
    this.set({ job, progress: job.progress, excluded });
    try {
      const end = await job.run();
      if (end.version) this.set({ committed: this.state.committed + 1 });
      if (req.background || document.visibilityState === 'hidden') notifyEnded(end);
      return end;
    } finally {
      removeEventListener('beforeunload', onUnload);
      document.title = this.title;
      this.set({ job: null });
    }
  }

  private progressed(p: BackupProgress) {
    const active = p.phase === 'planning' || p.phase === 'backing up' || p.phase === 'committing';
    if (active) {
      const pct = p.bytesTotal ? Math.floor((100 * p.bytesDone) / p.bytesTotal) : 0;
      document.title = `${pct}% backing up ${p.source}${p.paused ? ' (paused)' : ''} · ${this.title}`;
    }
    this.set({ progress: p });
  }

  /** The client index as IndexedDB holds it now: reopened if another tab wrote it since. */
  private async freshIndex(): Promise<ClientIndex | null> {
    const current = await this.index?.isCurrent().catch(() => false);
    if (current) return this.index;
    this.index?.close();
    this.index = null;
    try {
      this.index = await this.deps.openIndex();
    } catch (e) {
      // The index only saves work; without it every lookup goes to the server.
      console.warn('client index unavailable:', e);
    }
    return this.index;
  }
}

/** The client index's database name: one per server origin (the page's one repository). */
export function indexName(): string {
  return `${location.origin}|default`;
}

/** The page's runner, over the engine it loaded. */
export function newRunner(api: Api, engine: { pool: CorePool; jobs: JobStore; index: ClientIndex | null }) {
  return new BackupRunner(
    { api, pool: engine.pool, jobs: engine.jobs, openIndex: () => openClientIndex(indexName()) },
    engine.index,
  );
}
