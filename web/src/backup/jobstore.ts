/**
 * Backup job state in IndexedDB, so that a reload or a closed tab resumes a backup without
 * re-reading finished files or re-sending acknowledged bundles. A file's recipe is recorded
 * only once all of its new chunks are durable on the server.
 */
import { openDB, type IDBPDatabase } from 'idb';

export interface JobRecord {
  key: string;
  source: string;
  /** The picked folder's name (absent in records written before it was kept). */
  folder?: string;
  startedAt: number;
  status: 'running' | 'done' | 'failed' | 'cancelled';
  filesTotal: number;
  bytesTotal: number;
  bundlesAcked: number;
  /** Bundle bytes sent over all sessions of this job. */
  wireBytes: number;
  /** The version the job committed (status done), whichever tab ran it. */
  versionId?: number;
  message?: string;
}

export interface FileRecord {
  job: string;
  path: string;
  size: number;
  mtime: number;
  fps: Uint8Array;
  lengths: Uint32Array;
}

export class JobStore {
  /**
   * Job records this page read or wrote. Another tab's writes are not seen through it, so a
   * backup reads its job afresh (`get(key, true)`, under the repository's backup lock): that
   * tab may have resumed or finished the job, or committed a newer version of the source.
   */
  private mirror = new Map<string, JobRecord>();

  private constructor(private db: IDBPDatabase) {}

  static async open(name = 'ditto-jobs'): Promise<JobStore> {
    const db = await openDB(name, 1, {
      upgrade(db) {
        db.createObjectStore('jobs', { keyPath: 'key' });
        db.createObjectStore('files', { keyPath: ['job', 'path'] });
      },
      blocking() {
        db.close();
      },
    });
    return new JobStore(db);
  }

  static key(repo: string, source: string) {
    return `${repo}\u0000${source}`;
  }

  async get(key: string, fresh = false): Promise<JobRecord | undefined> {
    const known = fresh ? undefined : this.mirror.get(key);
    if (known) return { ...known };
    const job: JobRecord | undefined = await this.db.get('jobs', key);
    if (job) this.mirror.set(key, { ...job });
    return job;
  }

  /**
   * The unfinished job of `repo` that backed up a folder named `folder`, newest first: picking
   * that folder again resumes it under its own source name, whatever the label now says.
   */
  async unfinishedFor(repo: string, folder: string): Promise<JobRecord | undefined> {
    const mine = (await this.unfinished()).filter(
      (j) => j.key === JobStore.key(repo, j.source) && (j.folder ?? j.source) === folder && j.status !== 'cancelled',
    );
    return mine.sort((a, b) => b.startedAt - a.startedAt)[0];
  }

  async unfinished(): Promise<JobRecord[]> {
    const all: JobRecord[] = await this.db.getAll('jobs');
    return all.filter((j) => j.status !== 'done');
  }

  async put(job: JobRecord) {
    this.mirror.set(job.key, { ...job });
    await this.db.put('jobs', job);
  }

  async update(key: string, change: (j: JobRecord) => void) {
    const tx = this.db.transaction('jobs', 'readwrite');
    const job: JobRecord | undefined = await tx.store.get(key);
    if (job) {
      change(job);
      this.mirror.set(key, { ...job });
      await tx.store.put(job);
    }
    await tx.done;
  }

  /** Records finished files, in one transaction (one per file costs milliseconds each). */
  async putFiles(recs: readonly FileRecord[]) {
    if (!recs.length) return;
    const tx = this.db.transaction('files', 'readwrite');
    for (const r of recs) void tx.store.put(r);
    await tx.done;
  }

  async files(key: string): Promise<Map<string, FileRecord>> {
    const range = IDBKeyRange.bound([key, ''], [key, '\uffff']);
    const recs: FileRecord[] = await this.db.getAll('files', range);
    return new Map(recs.map((r) => [r.path, r]));
  }

  /** Forgets a job's per-file state (after its version is committed, or to restart it). */
  async clearFiles(key: string) {
    await this.db.delete('files', IDBKeyRange.bound([key, ''], [key, '\uffff']));
  }

  close() {
    this.db.close();
  }
}
