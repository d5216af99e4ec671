/**
 * "Back up again": the folder of a source, without picking it, from the handle kept in
 * IndexedDB (store.ts). The browser may want the user's permission again; asking needs the
 * click, so `folderAgain` is called first thing in the click handler. Where the File System
 * Access API is missing, no handle is ever kept and the user picks the folder instead. The
 * source's excluded folders are not walked (`leaveOut`).
 */
import { fromDirectoryHandle, type LeaveOut, type PickedFolder } from '../input/folder';
import { permitted } from '../input/permission';
import type { SourceFolder } from './store';

export class AgainError extends Error {}

/** Whether this browser can keep a folder between visits (File System Access API). */
export function canKeepFolders(): boolean {
  return typeof window !== 'undefined' && typeof window.showDirectoryPicker === 'function';
}

/**
 * The source's folder walked afresh: from its kept handle (asking permission when `ask`), or
 * else, where the API exists and `ask`, from the directory picker. Null when the user
 * dismissed the picker; 'pick' when only the file input can give the folder.
 */
export async function folderAgain(
  row: SourceFolder,
  ask: boolean,
  leaveOut?: LeaveOut,
): Promise<PickedFolder | null | 'pick'> {
  if (row.handle) {
    if (!(await permitted(row.handle, 'read', ask)))
      throw new AgainError(
        ask
          ? `Permission to read the folder “${row.folder}” was not given: nothing was backed up. Click “Back up again” to be asked again.`
          : `The browser needs your permission to read “${row.folder}” again: click “Back up again”.`,
      );
    try {
      return await fromDirectoryHandle(row.handle, leaveOut);
    } catch (e) {
      // A folder moved or deleted since: its handle points nowhere.
      const why = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      throw new AgainError(`The folder “${row.folder}” cannot be read any more (${why}). Choose it again.`);
    }
  }
  if (!ask) throw new AgainError(`No folder is kept for “${row.source}”: back it up once from “Back up again”.`);
  if (!canKeepFolders()) return 'pick';
  try {
    return await fromDirectoryHandle(await window.showDirectoryPicker!({ mode: 'read' }), leaveOut);
  } catch (e) {
    if (e instanceof DOMException && e.name === 'AbortError') return null;
    throw e;
  }
}
