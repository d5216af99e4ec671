import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import init from '../wasm-pkg/wasm_core.js';
import { warmUp } from './warmup';

beforeAll(async () => {
  await init({ module_or_path: readFileSync(new URL('../wasm-pkg/wasm_core_bg.wasm', import.meta.url)) });
});

describe('warmUp', () => {
  it('runs every hot path: the second pass over the same bytes is predicted chunk for chunk', () => {
    const { chunks, predicted } = warmUp(3, 2);
    // 1 MiB at the default chunker's ~8 KiB average.
    expect(chunks).toBeGreaterThan(50);
    expect(predicted).toBe(chunks);
  });
});
