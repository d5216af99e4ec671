import { beforeAll, describe, expect, it } from 'vitest';
import { testCore } from '../wasm/testing';
import { HeapReserve } from '../wasm-pkg/wasm_core.js';

let memory: WebAssembly.Memory;

beforeAll(async () => {
  memory = (await testCore()).memory;
});

describe('HeapReserve (memory grown ahead of a first search)', () => {
  it('grows the memory by what it holds, touches it a slice at a time, and gives it back for reuse', () => {
    const before = memory.buffer.byteLength;
    const r = new HeapReserve(8 << 20);
    expect(r.bytes()).toBe(8 << 20);
    expect(memory.buffer.byteLength).toBeGreaterThanOrEqual(before + (8 << 20));
    let slices = 1;
    while (r.touch(1 << 20)) slices++;
    expect(slices).toBe(8);
    expect(r.touch(1 << 20)).toBe(false);
    r.free();
    const grown = memory.buffer.byteLength;
    // What the reserve gave back is the allocator's: the work that follows (here a reserve as
    // large, then many small allocations) takes it without growing the memory again.
    const again = new HeapReserve(8 << 20);
    expect(again.bytes()).toBe(8 << 20);
    expect(memory.buffer.byteLength).toBe(grown);
    again.free();
    const small = Array.from({ length: 64 }, () => new HeapReserve(100 << 10));
    expect(memory.buffer.byteLength).toBe(grown);
    for (const s of small) s.free();
  });

  it('holds nothing when asked for less than a page', () => {
    for (const bytes of [0, -5, 4095]) {
      const r = new HeapReserve(bytes);
      expect(r.bytes()).toBe(0);
      expect(r.touch(1 << 20)).toBe(false);
      r.free();
    }
  });
});
