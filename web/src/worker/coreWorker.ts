/// <reference lib="webworker" />
/**
 * A core worker: one wasm-core instance, fed files as streams of blocks (never a whole
 * file in memory, so a file of any size fits).
 */
import init, { FileHasher } from '../wasm-pkg/wasm_core.js';
import type { WorkerRequest, WorkerResponse } from './protocol';

const scope = self as unknown as DedicatedWorkerGlobalScope;
const post = (msg: WorkerResponse) => scope.postMessage(msg);

/** Report progress at most this often, so messages do not dominate small blocks. */
const PROGRESS_EVERY = 8 << 20;

async function hashFile(id: number, file: File) {
  const hasher = new FileHasher();
  try {
    const reader = file.stream().getReader();
    let bytes = 0;
    let reported = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      hasher.update(value);
      bytes += value.byteLength;
      if (bytes - reported >= PROGRESS_EVERY) {
        post({ type: 'progress', id, bytes });
        reported = bytes;
      }
    }
    post({ type: 'hashed', id, sha1: hasher.finish(), bytes });
  } finally {
    hasher.free();
  }
}

scope.onmessage = async (event: MessageEvent<WorkerRequest>) => {
  const msg = event.data;
  if (msg.type === 'init') {
    await init({ module_or_path: msg.module });
    post({ type: 'ready' });
    return;
  }
  try {
    await hashFile(msg.id, msg.file);
  } catch (e) {
    post({ type: 'failed', id: msg.id, message: e instanceof Error ? e.message : String(e) });
  }
};
