/**
 * The folders behind each source, kept in IndexedDB (database `ditto-source-folders`) by
 * repository and source label: the picked folder's name (so that picking it again finds its
 * source) and, where the directory picker gave one, its FileSystemDirectoryHandle (handles
 * survive in IndexedDB, so "Back up again" needs no picking, only the permission).
 */
import { openDB, type IDBPDatabase } from 'idb';

export interface SourceFolder {
  key: string;
  repo: string;
  source: string;
  /** The picked folder's own name. */
  folder: string;
  /** The folder itself, when it came from the directory picker. */
  handle?: FileSystemDirectoryHandle;
  /** When it was last picked or backed up (ms). */
  usedAt: number;
  /** Back it up again every this many minutes while a tab of the page is open (null: never). */
  everyMinutes: number | null;
}

export class SourceFolders {
  private constructor(private db: IDBPDatabase) {}

  static async open(name = 'ditto-source-folders'): Promise<SourceFolders> {
    const db = await openDB(name, 1, {
      upgrade(db) {
        db.createObjectStore('folders', { keyPath: 'key' });
      },
      blocking() {
        db.close();
      },
    });
    return new SourceFolders(db);
  }

  static key(repo: string, source: string) {
    return `${repo}\u0000${source}`;
  }

  async get(repo: string, source: string): Promise<SourceFolder | undefined> {
    return this.db.get('folders', SourceFolders.key(repo, source));
  }

  /** Every source of `repo` with a known folder. */
  async list(repo: string): Promise<SourceFolder[]> {
    const all: SourceFolder[] = await this.db.getAll('folders');
    return all.filter((f) => f.repo === repo);
  }

  /** The source of `repo` that a folder named `folder` was last backed up as. */
  async forFolder(repo: string, folder: string): Promise<SourceFolder | undefined> {
    const same = (await this.list(repo)).filter((f) => f.folder === folder);
    return same.sort((a, b) => b.usedAt - a.usedAt)[0];
  }

  /**
   * Records that `source` backs up `folder`; a handle given replaces the kept one, none given
   * keeps it only if the folder name is unchanged (the handle is of that folder).
   */
  async remember(repo: string, source: string, folder: string, handle?: FileSystemDirectoryHandle) {
    const tx = this.db.transaction('folders', 'readwrite');
    const key = SourceFolders.key(repo, source);
    const old: SourceFolder | undefined = await tx.store.get(key);
    const row: SourceFolder = {
      key,
      repo,
      source,
      folder,
      handle: handle ?? (old?.folder === folder ? old.handle : undefined),
      usedAt: Date.now(),
      everyMinutes: old?.everyMinutes ?? null,
    };
    await tx.store.put(row);
    await tx.done;
  }

  async setEvery(repo: string, source: string, minutes: number | null) {
    const tx = this.db.transaction('folders', 'readwrite');
    const row: SourceFolder | undefined = await tx.store.get(SourceFolders.key(repo, source));
    if (row) await tx.store.put({ ...row, everyMinutes: minutes });
    await tx.done;
  }

  close() {
    this.db.close();
  }
}

let shared: Promise<SourceFolders> | null = null;

/** The page's store of source folders, opened once. */
export function sourceFolders(): Promise<SourceFolders> {
  shared ??= SourceFolders.open();
  return shared;
}
