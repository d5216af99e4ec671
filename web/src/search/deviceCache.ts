/**
 * The search workers' caches on the device: one file per worker and repository in the
 * origin private file system (docs/SEARCH.md, "On the device"; the file's format is
 * wasm-core's `search/cache_file.rs`). The workers read and write their own file; the page
 * reads the directory's size and deletes it (the Search tab's Clear).
 */

import { fpHex } from '../backup/hex';

/** The directory of every search cache file of this origin. */
const DIR = 'ditto-search-cache';

async function directory(create: boolean): Promise<FileSystemDirectoryHandle | null> {
  try {
    return await (await navigator.storage.getDirectory()).getDirectoryHandle(DIR, { create });
  } catch {
    return null; // no OPFS here, or nothing written yet
  }
}

/** The file of worker `slot` for repository `key` (a hash of it: keys hold any character). */
async function fileName(key: string, slot: number): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-1', new TextEncoder().encode(key)));
  return `${fpHex(digest)}-${slot}.bin`;
}

/**
 * Reads worker `slot`'s file for `key` (workers only) into the buffer `into(size)` gives
 * (called once the file is open, its view used at once); answers how many bytes were read,
 * or null when there is no file.
 */
export async function readCacheFile(
  key: string,
  slot: number,
  into: (size: number) => Uint8Array,
): Promise<number | null> {
  const dir = await directory(false);
  if (!dir) return null;
  let handle: FileSystemFileHandle;
  try {
    handle = await dir.getFileHandle(await fileName(key, slot));
  } catch {
    return null;
  }
  const file = await handle.createSyncAccessHandle();
  try {
    const bytes = into(file.getSize());
    let at = 0;
    while (at < bytes.length) {
      const n = file.read(bytes.subarray(at), { at });
      if (n === 0) break;
      at += n;
    }
    return at;
  } finally {
    file.close();
  }
}

/**
 * Writes worker `slot`'s file for `key` (workers only): the `pieces` in order, to
 * `<name>.tmp`, flushed, then moved over the file, so that a tab closed mid-write leaves the
 * previous file whole. `pieces` runs once the file is open; it may pause between pieces (the
 * worker answers other messages meanwhile) and may throw to give the write up, which
 * removes the `.tmp` file and leaves the previous file as it was.
 */
export async function writeCacheFile(
  key: string,
  slot: number,
  pieces: () => AsyncIterable<Uint8Array>,
): Promise<void> {
  const dir = await directory(true);
  if (!dir) throw new Error('this browser has no origin private file system');
  const name = await fileName(key, slot);
  const tmp = await dir.getFileHandle(`${name}.tmp`, { create: true });
  const file = await tmp.createSyncAccessHandle();
  try {
    file.truncate(0);
    let at = 0;
    for await (const piece of pieces())
      for (let done = 0; done < piece.length;) {
        const n = file.write(piece.subarray(done), { at });
        done += n;
        at += n;
      }
    file.flush();
  } catch (e) {
    file.close();
    await dir.removeEntry(`${name}.tmp`).catch(() => {});
    throw e;
  }
  file.close();
  // Chromium's OPFS replaces an existing file of that name (not yet in TypeScript's DOM types).
  await (tmp as FileSystemFileHandle & { move(name: string): Promise<void> }).move(name);
}

/** Deletes worker `slot`'s file for `key`, if any (workers only). */
export async function deleteCacheFile(key: string, slot: number): Promise<void> {
  const dir = await directory(false);
  if (!dir) return;
  const name = await fileName(key, slot);
  for (const n of [name, `${name}.tmp`]) await dir.removeEntry(n).catch(() => {});
}

/** The bytes every search cache file of this origin takes. */
export async function deviceCacheBytes(): Promise<number> {
  const dir = await directory(false);
  if (!dir) return 0;
  let bytes = 0;
  for await (const handle of dir.values())
    if (handle.kind === 'file')
      // A file a worker is writing cannot be opened meanwhile: it is counted next time.
      bytes += await (handle as FileSystemFileHandle)
        .getFile()
        .then((f) => f.size)
        .catch(() => 0);
  return bytes;
}

/** Deletes every search cache file of this origin. */
export async function deleteDeviceCache(): Promise<void> {
  const root = await navigator.storage.getDirectory().catch(() => null);
  await root?.removeEntry(DIR, { recursive: true }).catch(() => {});
}
