/**
 * wasm-core instantiated on the page's thread, from the module the worker pools share
 * (`coreModule`), for the little the page does with the engine itself: bundles it uploads
 * and `chunks/get` answers it reads (`backup/bundle.ts`). Instantiated once, on first use;
 * the functions of `wasm-pkg` may be called once `pageCore()` has resolved.
 */
import init from '../wasm-pkg/wasm_core.js';
import { coreModule } from './loader';

let ready: Promise<void> | null = null;

export function pageCore(): Promise<void> {
  ready ??= coreModule()
    .then((module) => init({ module_or_path: module }))
    .then(
      () => {},
      (e: unknown) => {
        ready = null; // a failed fetch may succeed later
        throw e;
      },
    );
  return ready;
}
