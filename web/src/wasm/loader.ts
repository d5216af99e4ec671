/**
 * Loads the wasm-core module once on the main thread for every worker pool (`coreModule`);
 * workers receive the compiled `WebAssembly.Module` in their init message (compiling per
 * worker or per pool wastes time, and `.wasm` imports inside workers go missing in
 * production builds).
 */
import wasmUrl from '../wasm-pkg/wasm_core_bg.wasm?url';

/**
 * The smallest module that uses a SIMD128 instruction (`i8x16.splat` + `i8x16.popcnt`
 * returning a v128). Engines without Wasm SIMD refuse to validate it. Wasm has no runtime
 * feature detection, so this is how we find out before compiling the real module.
 */
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11,
]);

export function hasWasmSimd(): boolean {
  return typeof WebAssembly === 'object' && WebAssembly.validate(SIMD_PROBE);
}

export class UnsupportedBrowserError extends Error {}

async function compileCore(): Promise<WebAssembly.Module> {
  if (typeof WebAssembly !== 'object') {
    throw new UnsupportedBrowserError('This browser does not support WebAssembly.');
  }
  if (!hasWasmSimd()) {
    throw new UnsupportedBrowserError(
      'This browser does not support WebAssembly SIMD, which Ditto needs (Chrome 91+, Firefox 89+, Safari 16.4+).',
    );
  }
  const response = await fetch(wasmUrl);
  if (!response.ok) throw new Error(`Could not load the Ditto engine (${response.status} ${wasmUrl}).`);
  // Compiled from the response itself, the module can come from the browser's code cache on
  // a later visit, optimised code included (Chromium caches a module's code with its HTTP
  // cache entry once its hot functions are optimised); compiled from bytes, every page load
  // starts unoptimised. A server that labels the file otherwise gets the bytes compiled.
  if (response.headers.get('content-type')?.startsWith('application/wasm'))
    return WebAssembly.compileStreaming(response);
  return WebAssembly.compile(await response.arrayBuffer());
}

let compiled: Promise<WebAssembly.Module> | null = null;

/** The page's one compiled wasm-core module, shared by every pool (compiled on first use). */
export function coreModule(): Promise<WebAssembly.Module> {
  compiled ??= compileCore().catch((e: unknown) => {
    // A failed fetch may succeed later (the server restarted): do not keep the failure.
    compiled = null;
    throw e;
  });
  return compiled;
}
