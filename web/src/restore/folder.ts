/**
 * Restore into a folder the user picks (File System Access API): files are written straight
 * into it, and a file already there with the same size and the same chunks (cut locally with
 * the backup's chunker, each named by its lookup key) is left alone, so only what the folder
 * lacks is fetched (desync's `--seed` idea).
 */
import { fpHex } from '../backup/hex';
import { permitted } from '../input/permission';
import type { RestoreItem } from './restore';
import type { RestoreWorkers } from './workers';
import { beginHeavyWork } from '../worker/heavyWork';

type DirectoryPicker = (opts?: { mode?: 'read' | 'readwrite'; id?: string }) => Promise<FileSystemDirectoryHandle>;

export class FolderError extends Error {}

/** The browser's reason for refusing a file or folder write, with its name (`QuotaExceededError: …`). */
export function browserReason(e: unknown): string {
  return e instanceof DOMException ? `${e.name}: ${e.message}` : e instanceof Error ? e.message : String(e);
}

/** A directory lookup's failure, said plainly where a file stands in the directory's place. */
function conflict(e: unknown, path: string): never {
  if (e instanceof DOMException && e.name === 'TypeMismatchError')
    throw new FolderError(
      `"${path}" is a file in the folder, where the version has a directory: move or rename it first.`,
    );
  throw e;
}

/** Whether this browser can restore into a folder. */
export function canPickFolder(): boolean {
  return typeof (window as unknown as { showDirectoryPicker?: DirectoryPicker }).showDirectoryPicker === 'function';
}

/**
 * Asks for the folder (call it first in a click handler: the picker needs the gesture) and
 * for permission to write into it. Null when the user dismissed the picker.
 */
export async function pickFolder(): Promise<FileSystemDirectoryHandle | null> {
  const picker = (window as unknown as { showDirectoryPicker?: DirectoryPicker }).showDirectoryPicker;
  if (typeof picker !== 'function') throw new FolderError('This browser cannot write into a folder; download a zip.');
  let dir: FileSystemDirectoryHandle;
  try {
    dir = await picker({ mode: 'readwrite', id: 'ditto-restore' });
  } catch (e) {
    if (e instanceof DOMException && e.name === 'AbortError') return null;
    if (e instanceof DOMException && (e.name === 'NotAllowedError' || e.name === 'SecurityError'))
      throw new FolderError(`Permission to write into the folder was refused (${e.message}). Nothing was restored.`);
    throw e;
  }
  if (!(await permitted(dir, 'readwrite', true)))
    throw new FolderError(`Permission to write into "${dir.name}" was refused. Nothing was restored.`);
  return dir;
}

/** A folder being restored into: directory handles by path, created on demand. */
export class FolderTarget {
  private dirs = new Map<string, Promise<FileSystemDirectoryHandle>>();
  /** Directories as found before the restore writes (null: not there), looked up once each. */
  private found = new Map<string, Promise<FileSystemDirectoryHandle | null>>();
  /** Each directory's files as found before the restore writes, listed once per directory. */
  private listings = new Map<string, Promise<Map<string, FileSystemFileHandle>>>();

  constructor(readonly root: FileSystemDirectoryHandle) {
    this.dirs.set('', Promise.resolve(root));
    this.found.set('', Promise.resolve(root));
  }

  /** The directory at `path`, created (with its parents) where missing. */
  dir(path: string): Promise<FileSystemDirectoryHandle> {
    return this.walk(this.dirs, path, (p, base) =>
      p.getDirectoryHandle(base, { create: true }).catch((e: unknown) => conflict(e, path)),
    );
  }

  /**
   * The directory at `path` if it is there, creating nothing: a restore into a fresh folder
   * learns that its tree is missing from one lookup per top-level directory.
   */
  private find(path: string): Promise<FileSystemDirectoryHandle | null> {
    return this.walk(this.found, path, (p, base) =>
      p
        ? p.getDirectoryHandle(base).catch((e: unknown) => {
            if (e instanceof DOMException && e.name === 'NotFoundError') return null;
            return conflict(e, path);
          })
        : Promise.resolve(null),
    );
  }

  /** The entry of `cache` for `path`, else `step` from its parent's, each path asked once. */
  private walk<T>(
    cache: Map<string, Promise<T>>,
    path: string,
    step: (parent: T, base: string) => Promise<T>,
  ): Promise<T> {
    let d = cache.get(path); // the root ('') is always there
    if (!d) {
      const [parent, base] = this.split(path);
      d = this.walk(cache, parent, step).then((p) => step(p, base));
      cache.set(path, d);
    }
    return d;
  }

  private split(name: string): [string, string] {
    const cut = name.lastIndexOf('/');
    return cut < 0 ? ['', name] : [name.slice(0, cut), name.slice(cut + 1)];
  }

  /** The files of the directory that holds `name`, listed once (one round trip for all of them). */
  listing(name: string): Promise<Map<string, FileSystemFileHandle>> {
    const [dir] = this.split(name);
    let listing = this.listings.get(dir);
    if (!listing) {
      listing = this.find(dir).then(async (d) => {
        const files = new Map<string, FileSystemFileHandle>();
        if (d) for await (const h of d.values()) if (h.kind === 'file') files.set(h.name, h as FileSystemFileHandle);
        return files;
      });
      this.listings.set(dir, listing);
    }
    return listing;
  }

  /**
   * The file at `name` if it exists. Its directory is listed once (asking for each file would
   * cost one round trip each, most of them "not found" in a fresh folder).
   */
  async existing(name: string): Promise<File | null> {
    const handle = (await this.listing(name)).get(this.split(name)[1]);
    try {
      return handle ? await handle.getFile() : null;
    } catch (e) {
      // Removed since the listing.
      if (e instanceof DOMException && e.name === 'NotFoundError') return null;
      throw e;
    }
  }

  /**
   * A writable replacing the file at `name` (created if missing), and `abandon`, which leaves
   * the folder as it was: the file's old contents, or no file where the restore created it
   * (the browser creates an empty file as soon as a handle is asked for).
   */
  async create(name: string): Promise<FolderFile> {
    const [dir, base] = this.split(name);
    // The listing is the folder as it was before the restore (taken once per directory).
    const existed = (await this.listing(name)).has(base);
    const parent = await this.dir(dir);
    const remove = async () => {
      if (!existed) await parent.removeEntry(base).catch(() => {});
    };
    const handle = await parent.getFileHandle(base, { create: true });
    let writable: FileSystemWritableFileStream;
    try {
      writable = await handle.createWritable({ keepExistingData: false });
    } catch (e) {
      await remove();
      throw e;
    }
    return {
      writable,
      abandon: async () => {
        await writable.abort().catch(() => {});
        await remove();
      },
    };
  }
}

/** A file being written by a folder restore ([`FolderTarget.create`]). */
export interface FolderFile {
  writable: FileSystemWritableFileStream;
  /** Discards what was written: the file as it was, or gone if the restore created it. */
  abandon(): Promise<void>;
}

export interface PresentCheck {
  /** Items still to restore (every directory, and the files that differ or are missing). */
  items: RestoreItem[];
  skippedFiles: number;
  skippedBytes: number;
}

/** Items whose directories are listed ahead of the one being checked. */
const LIST_AHEAD = 256;

/** Leaves out the files the folder already holds with the same size and chunks. */
export async function skipPresent(
  target: FolderTarget,
  items: RestoreItem[],
  workers: RestoreWorkers,
  signal?: AbortSignal,
  onChecked?: (files: number, of: number) => void,
): Promise<PresentCheck> {
  // Reading and chunking the folder's files is a restore's work too (heavyWork.ts).
  const endHeavyWork = beginHeavyWork();
  try {
    const out: RestoreItem[] = [];
    let skippedFiles = 0;
    let skippedBytes = 0;
    // The directories of the next LIST_AHEAD items are listed while this one is checked, not
    // one after another as the files come (a listing is one round trip, cached per directory);
    // a failure is seen where `existing` awaits the listing.
    let listed = 0;
    const files = items.filter((i) => i.kind === 'file').length;
    let checked = 0;
    for (const [k, item] of items.entries()) {
      signal?.throwIfAborted();
      for (; listed < Math.min(items.length, k + LIST_AHEAD); listed++) {
        const next = items[listed];
        if (next.kind === 'file') target.listing(next.name).catch(() => {});
      }
      if (item.kind === 'file') {
        onChecked?.(++checked, files);
        const file = await target.existing(item.name);
        if (file && file.size === item.size && (await sameChunks(file, item.recipe, workers))) {
          skippedFiles++;
          skippedBytes += item.size;
          continue;
        }
      }
      out.push(item);
    }
    return { items: out, skippedFiles, skippedBytes };
  } finally {
    endHeavyWork();
  }
}

async function sameChunks(file: File, recipe: readonly string[], workers: RestoreWorkers): Promise<boolean> {
  if (file.size === 0) return recipe.length === 0;
  const fps = await workers.fingerprintFile(file);
  if (fps.length !== recipe.length * 20) return false;
  for (let k = 0; k < recipe.length; k++) if (fpHex(fps, k) !== recipe[k]) return false;
  return true;
}
