/**
 * Turns the three ways of giving the page a folder — a drop, the directory picker, and
 * `<input webkitdirectory>` — into one list of files with '/'-separated paths relative to
 * the picked folder's parent (so the first segment is the folder's own name).
 *
 * Traps handled (see BROWSER-PITFALLS §1): `readEntries` yields at most ~100 entries per
 * call, so it is called until empty; drop items must be turned into entries synchronously
 * inside the drop handler; `webkitGetAsEntry` may return null; `instanceof` checks on
 * entries fail in Chromium, so `isFile`/`isDirectory` are used; empty directories are kept.
 */

export interface PickedFile {
  path: string;
  file: File;
  /**
   * A fresh File for the same path, where the way in allows (directory picker, drop): a
   * File is a snapshot, and reading it fails once the file on disk changed.
   */
  reopen?: () => Promise<File>;
}

export interface PickedFolder {
  /** The folder's own name: the default source label of the backup. */
  root: string;
  files: PickedFile[];
  /** Every directory, including empty ones (the `files` list alone would lose those). */
  dirs: string[];
  /** Items the browser would not give us, with the reason: never skipped silently. */
  skipped: { path: string; reason: string }[];
  /** The folder itself, when the directory picker gave it (kept for "Back up again"). */
  handle?: FileSystemDirectoryHandle;
  /** Folders the walk left out whole, unwalked (an exclude pattern names them; paths as picked). */
  excludedDirs?: string[];
}

/**
 * Tells a walk which folders to leave out without walking them: `path` is relative to the
 * picked folder (input/excludes.ts decides).
 */
export type LeaveOut = (path: string) => boolean;

/** Minimal shapes of the Entries API, so traversal can be tested with fakes. */
export interface EntryLike {
  name: string;
  fullPath: string;
  isFile: boolean;
  isDirectory: boolean;
}
export interface FileEntryLike extends EntryLike {
  file(ok: (f: File) => void, err: (e: unknown) => void): void;
}
export interface DirEntryLike extends EntryLike {
  createReader(): { readEntries(ok: (e: EntryLike[]) => void, err: (e: unknown) => void): void };
}

const MAX_DEPTH = 64;

export function normalizePath(p: string): string {
  return p
    .split('/')
    .filter((s) => s !== '' && s !== '.')
    .join('/');
}

function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message ? `${e.name}: ${e.message}` : e.name;
  if (e && typeof e === 'object' && 'name' in e) return String((e as { name: unknown }).name);
  return String(e);
}

function readAllEntries(dir: DirEntryLike): Promise<EntryLike[]> {
  const reader = dir.createReader();
  const all: EntryLike[] = [];
  return new Promise((resolve, reject) => {
    const next = () =>
      reader.readEntries((batch) => {
        if (batch.length === 0) return resolve(all);
        all.push(...batch);
        next();
      }, reject);
    next();
  });
}

/** Walks entries taken from a drop (call `webkitGetAsEntry` synchronously first). */
export async function fromEntries(entries: (EntryLike | null)[]): Promise<PickedFolder> {
  const out: PickedFolder = { root: '', files: [], dirs: [], skipped: [] };
  const roots = entries.filter((e): e is EntryLike => e !== null);
  if (roots.length < entries.length) {
    out.skipped.push({ path: '(dropped item)', reason: 'the browser gave no file system entry for it' });
  }
  out.root = roots.length === 1 && roots[0].isDirectory ? roots[0].name : 'dropped files';
  // Items dropped together from different folders may share a name ("src" twice): each
  // keeps its own top-level name, the later ones "src (2)", ... (else the version would hold
  // two files at one path, which the server refuses after the upload).
  const taken = new Set<string>();
  const tops = roots.map((r) => {
    const name = normalizePath(r.fullPath);
    const dot = r.isFile ? name.lastIndexOf('.') : -1;
    const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ''];
    let top = name;
    for (let n = 2; taken.has(top); n++) top = `${stem} (${n})${ext}`;
    taken.add(top);
    return { from: name, to: top };
  });
  let top = tops[0];
  const walk = async (entry: EntryLike, depth: number): Promise<void> => {
    const path = top.to + normalizePath(entry.fullPath).slice(top.from.length);
    if (entry.isFile) {
      try {
        const open = () => new Promise<File>((ok, err) => (entry as FileEntryLike).file(ok, err));
        out.files.push({ path, file: await open(), reopen: open });
      } catch (e) {
        out.skipped.push({ path, reason: `unreadable: ${errorMessage(e)}` });
      }
    } else if (entry.isDirectory) {
      if (depth > MAX_DEPTH) {
        out.skipped.push({ path, reason: `deeper than ${MAX_DEPTH} levels (a link loop?)` });
        return;
      }
      out.dirs.push(path);
      let children: EntryLike[];
      try {
        children = await readAllEntries(entry as DirEntryLike);
      } catch (e) {
        out.skipped.push({ path, reason: `cannot list: ${errorMessage(e)}` });
        return;
      }
      for (const child of children) await walk(child, depth + 1);
    } else {
      out.skipped.push({ path, reason: 'neither a file nor a folder' });
    }
  };
  for (const [k, r] of roots.entries()) {
    top = tops[k];
    await walk(r, 0);
  }
  return out;
}

/** From `<input type="file" webkitdirectory>`: paths come from `webkitRelativePath`. */
export function fromFileList(list: ArrayLike<File>): PickedFolder {
  const files: PickedFile[] = [];
  const dirs = new Set<string>();
  for (let i = 0; i < list.length; i++) {
    const file = list[i];
    const path = normalizePath(file.webkitRelativePath || file.name);
    files.push({ path, file });
    const parts = path.split('/');
    for (let d = 1; d < parts.length; d++) dirs.add(parts.slice(0, d).join('/'));
  }
  const root = files.length ? files[0].path.split('/')[0] : '';
  return { root, files, dirs: [...dirs].sort(), skipped: [] };
}

/**
 * From `showDirectoryPicker()` or a kept handle: paths are built while walking the handles.
 * Folders `leaveOut` names are not walked (a node_modules of 50 000 files costs nothing).
 */
export async function fromDirectoryHandle(dir: FileSystemDirectoryHandle, leaveOut?: LeaveOut): Promise<PickedFolder> {
  const out: PickedFolder = { root: dir.name, files: [], dirs: [], skipped: [], handle: dir, excludedDirs: [] };
  const walk = async (handle: FileSystemDirectoryHandle, path: string, depth: number) => {
    out.dirs.push(path);
    if (depth > MAX_DEPTH) {
      out.skipped.push({ path, reason: `deeper than ${MAX_DEPTH} levels (a link loop?)` });
      return;
    }
    for await (const [name, child] of handle.entries()) {
      const childPath = `${path}/${name}`;
      if (child.kind === 'file') {
        try {
          const fh = child as FileSystemFileHandle;
          out.files.push({ path: childPath, file: await fh.getFile(), reopen: () => fh.getFile() });
        } catch (e) {
          out.skipped.push({ path: childPath, reason: `unreadable: ${errorMessage(e)}` });
        }
      } else if (leaveOut?.(childPath.slice(dir.name.length + 1))) {
        out.excludedDirs!.push(childPath);
      } else {
        await walk(child as FileSystemDirectoryHandle, childPath, depth + 1);
      }
    }
  };
  await walk(dir, dir.name, 0);
  return out;
}

declare global {
  interface Window {
    showDirectoryPicker?: (opts?: { mode?: 'read' | 'readwrite' }) => Promise<FileSystemDirectoryHandle>;
  }
}
