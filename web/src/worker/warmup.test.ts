import { beforeAll, describe, expect, it } from 'vitest';
import { testCore } from '../wasm/testing';
import { warmUp } from './warmup';

beforeAll(async () => {
  await testCore();
});

describe('warmUp', () => {
  it('runs every hot path: the second pass over the same bytes is predicted chunk for chunk', () => {
    const { chunks, predicted } = warmUp(3, 2);
    // 1 MiB at the default chunker's ~8 KiB average.
    expect(chunks).toBeGreaterThan(50);
    expect(predicted).toBe(chunks);
  });
});
