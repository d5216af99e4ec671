/**
 * wasm-core for the vitest tests (Node, where the page's `fetch` of the module has nothing to
 * fetch from): instantiated once per test file from the built file, as `pageCore()`
 * instantiates it in the page from the module the worker pools share.
 */
import { readFileSync } from 'node:fs';
import init, { type InitOutput } from '../wasm-pkg/wasm_core.js';

let ready: Promise<InitOutput> | null = null;

export function testCore(): Promise<InitOutput> {
  ready ??= init({ module_or_path: readFileSync(new URL('../wasm-pkg/wasm_core_bg.wasm', import.meta.url)) });
  return ready;
}
