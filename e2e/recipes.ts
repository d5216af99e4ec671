/**
 * The oracle for recipes the page stores: one sequential ChunkEngine("default") pass in
 * Node, over the same wasm-core build the page runs (web/src/wasm-pkg).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './server';
import { ChunkEngine, initSync } from '../web/src/wasm-pkg/wasm_core.js';

const BLOCK = 1 << 20;
let ready = false;

/** Hex SHA-1 of each chunk of `bytes` under plain default chunking, in order. */
export function plainRecipe(bytes: Uint8Array): string[] {
  if (!ready) initSync({ module: readFileSync(path.join(ROOT, 'web', 'src', 'wasm-pkg', 'wasm_core_bg.wasm')) });
  ready = true;
  const engine = new ChunkEngine('default');
  const out: string[] = [];
  const take = (n: number) => {
    const fps = engine.fingerprints();
    for (let i = 0; i < n; i++) out.push(Buffer.from(fps.subarray(i * 20, i * 20 + 20)).toString('hex'));
  };
  for (let at = 0; at < bytes.length; at += BLOCK) take(engine.push(bytes.subarray(at, at + BLOCK)));
  take(engine.finish());
  engine.free();
  return out;
}
