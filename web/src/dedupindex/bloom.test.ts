import { describe, expect, it } from 'vitest';
import { BloomFilter, bloomBitsFor } from './bloom';
import { FingerprintSet } from './fpset';
import { bytesEqual, randomFps } from './testfps';

function measure(capacity: number, rate: number, seed: number): { fn: number; fp: number; bloom: BloomFilter } {
  const bloom = BloomFilter.create(capacity, rate);
  const members = randomFps(capacity, seed);
  bloom.addAll(members);
  let fn = 0;
  for (let i = 0; i < capacity; i++) if (!bloom.mayContain(members, i * 20)) fn++;
  const others = randomFps(capacity, seed ^ 0x5a5a5a5a);
  let fp = 0;
  for (let i = 0; i < capacity; i++) if (bloom.mayContain(others, i * 20)) fp++;
  return { fn, fp: fp / capacity, bloom };
}

describe('BloomFilter', () => {
  it('sizes m and k from n and the target rate (k = ln2·m/n)', () => {
    const b = BloomFilter.create(100_000, 0.01);
    expect(b.m).toBe(bloomBitsFor(100_000, 0.01));
    expect(b.m / 100_000).toBeCloseTo(9.585, 2);
    expect(b.k).toBe(7);
    expect(BloomFilter.create(100_000, 0.001).k).toBe(10);
  });

  it('has no false negatives and about the target false-positive rate on 100k fingerprints', () => {
    const r1 = measure(100_000, 0.01, 1);
    expect(r1.fn).toBe(0);
    expect(r1.fp).toBeGreaterThan(0.0085);
    expect(r1.fp).toBeLessThan(0.0115);
    expect(r1.bloom.expectedFpRate()).toBeCloseTo(0.01, 3);

    const r2 = measure(100_000, 0.001, 2);
    expect(r2.fn).toBe(0);
    expect(r2.fp).toBeGreaterThan(0.0006);
    expect(r2.fp).toBeLessThan(0.0015);
  });

  it('degrades past capacity (which is why the index rebuilds it bigger)', () => {
    const b = BloomFilter.create(10_000, 0.01);
    b.addAll(randomFps(40_000, 3));
    expect(b.full).toBe(true);
    const others = randomFps(20_000, 4);
    let fp = 0;
    for (let i = 0; i < 20_000; i++) if (b.mayContain(others, i * 20)) fp++;
    expect(fp / 20_000).toBeGreaterThan(0.2);
  });

  it('round-trips through bytes with identical answers', () => {
    const b = BloomFilter.create(5_000, 0.01);
    const fps = randomFps(5_000, 5);
    b.addAll(fps);
    const c = BloomFilter.fromBytes(b.toBytes());
    expect([c.m, c.k, c.capacity, c.count, c.targetFpRate]).toEqual([b.m, b.k, b.capacity, b.count, b.targetFpRate]);
    const probe = randomFps(20_000, 6);
    let differ = 0;
    let positives = 0;
    for (let i = 0; i < 20_000; i++) {
      if (c.mayContain(probe, i * 20) !== b.mayContain(probe, i * 20)) differ++;
      if (c.mayContain(probe, i * 20)) positives++;
    }
    expect(differ).toBe(0);
    expect(positives).toBeGreaterThan(0); // some false positives at 1%: the comparison is not vacuous
    let missing = 0;
    for (let i = 0; i < 5_000; i++) if (!c.mayContain(fps, i * 20)) missing++;
    expect(missing).toBe(0);
  });

  it('rejects corrupt serialisations', () => {
    const bytes = BloomFilter.create(100, 0.01).toBytes();
    expect(() => BloomFilter.fromBytes(bytes.subarray(0, bytes.length - 1))).toThrow(/inconsistent/);
    const bad = bytes.slice();
    bad[0] ^= 0xff;
    expect(() => BloomFilter.fromBytes(bad)).toThrow(/magic/);
    expect(() => BloomFilter.create(100, 0)).toThrow(RangeError);
  });
});

describe('FingerprintSet', () => {
  it('adds, finds, skips duplicates, grows and truncates', () => {
    const fps = randomFps(3_000, 7);
    const s = new FingerprintSet(10);
    for (let i = 0; i < 3_000; i++) expect(s.add(fps, i * 20)).toBe(true);
    expect(s.add(fps, 0)).toBe(false);
    expect(s.size).toBe(3_000);
    const others = randomFps(3_000, 8);
    let found = 0;
    let wrong = 0;
    for (let i = 0; i < 3_000; i++) {
      if (s.has(fps, i * 20)) found++;
      if (s.has(others, i * 20)) wrong++;
    }
    expect([found, wrong]).toEqual([3_000, 0]);
    expect(bytesEqual(s.toPacked(), fps)).toBe(true);
    s.truncate(1_000);
    expect(s.size).toBe(1_000);
    expect(s.has(fps, 999 * 20)).toBe(true);
    expect(s.has(fps, 1_000 * 20)).toBe(false);
    expect(bytesEqual(s.toPacked(), fps.subarray(0, 20_000))).toBe(true);
  });
});
