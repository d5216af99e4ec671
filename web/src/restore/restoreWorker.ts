/// <reference lib="webworker" />
/**
 * A restore worker: turns a `chunks/get` bundle into verified raw chunks with one wasm-core
 * call (`RestoreSession.verify`): every chunk decoded (zstd capped at its raw length; a delta
 * against the base chain the bundle carries after the answer, or against a chunk the
 * restore's session kept from an earlier answer), checked to be the chunk stored under its
 * fingerprint (the multi-buffer plain SHA-1, the collision-detecting fingerprint where that
 * differs: docs/FORMAT.md), and its CRC-32 computed for the zip, for which each chunk is also
 * deflated once, on its own (wasm-core's `deflate`). Nothing unverified leaves here.
 */
import init, { ChunkEngine, RestoreSession, warmUpRestore } from '../wasm-pkg/wasm_core.js';
import { FP_LEN } from '../backup/hex';
import { expose, transfer, type Reply } from '../worker/bridge';
import { readAnswer } from './answer';
import type { Damaged, RestoreApi, Verified } from './protocol';

/**
 * The session of each restore this worker verifies for, until its `endRestore`. Restores can
 * run side by side (a preview during a zip, a file's two versions compared): each keeps the
 * chunks it holds for its later answers, which the page leaves out of its requests.
 */
const sessions = new Map<number, RestoreSession>();
/** Restores ended here: an answer that arrives after its restore ended starts no session. */
const ended = new Set<number>();

function sessionOf(restore: number): RestoreSession {
  if (ended.has(restore)) throw new Error(`restore ${restore} has ended`);
  let session = sessions.get(restore);
  if (!session) sessions.set(restore, (session = new RestoreSession()));
  return session;
}

function endRestore(restore: number): null {
  ended.add(restore);
  sessions.get(restore)?.free();
  sessions.delete(restore);
  return null;
}

function verify({
  bundle,
  requested,
  restore,
  zip,
}: {
  bundle: Uint8Array;
  requested: number;
  restore: number;
  zip: boolean;
}): Reply<Verified | Damaged> {
  const r = readAnswer(sessionOf(restore).verify(bundle, requested, zip));
  if (r.type === 'bad') return r;
  // The head's buffer (fps, sizes, CRCs, kept, lengths), the bytes and the offsets.
  return transfer(r, [r.fps.buffer, r.raw.buffer, r.offsets.buffer]);
}

/**
 * Reads `file` in blocks through the chunker and names every chunk by its lookup key (plain
 * SHA-1, SIMD). Compared with a recipe, whose names are those of stored chunks, a key equals
 * the name exactly when the chunk is the stored one (docs/FORMAT.md; a chunk stored under a
 * safe hash never matches, so such a file is restored again, never wrongly skipped).
 */
async function fingerprintFile(file: File): Promise<Reply<Uint8Array>> {
  const engine = new ChunkEngine('default');
  const parts: Uint8Array[] = [];
  let total = 0;
  const take = (n: number) => {
    if (!n) return;
    const fps = engine.fingerprints().slice(0, n * FP_LEN);
    parts.push(fps);
    total += fps.length;
  };
  try {
    const BLOCK = 4 << 20;
    for (let at = 0; at < file.size; at += BLOCK)
      take(engine.push(new Uint8Array(await file.slice(at, at + BLOCK).arrayBuffer())));
    take(engine.finish());
  } finally {
    engine.free();
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return transfer(out, [out.buffer]);
}

/**
 * Runs a synthetic zip answer through the restore's code (wasm-core's `warm_up`), so that the
 * engine has optimised it before the first restore's answers arrive.
 */
function warmUp(): null {
  warmUpRestore();
  return null;
}

expose<RestoreApi>({ verify, endRestore, fingerprintFile, warmUp }, async (module) => {
  await init({ module_or_path: module as WebAssembly.Module });
});
