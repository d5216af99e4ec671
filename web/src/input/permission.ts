/**
 * Permission on a kept FileSystemHandle (File System Access API): a handle from IndexedDB or
 * from the picker may need the user's yes again. Asking needs a user gesture, so `ask` is
 * only for calls from a click; without it, only the current state is read.
 */
type Mode = 'read' | 'readwrite';

interface PermissionHandle {
  queryPermission?: (d: { mode: Mode }) => Promise<PermissionState>;
  requestPermission?: (d: { mode: Mode }) => Promise<PermissionState>;
}

/** Whether `handle` may be used in `mode` (asking first when `ask` and not yet granted). */
export async function permitted(handle: FileSystemHandle, mode: Mode, ask: boolean): Promise<boolean> {
  const h = handle as unknown as PermissionHandle;
  // Browsers without the query (it is granted with the pick there) are taken at their word.
  const state = h.queryPermission ? await h.queryPermission({ mode }) : 'granted';
  if (state === 'granted') return true;
  if (!ask || !h.requestPermission) return false;
  return (await h.requestPermission({ mode })) === 'granted';
}
