import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { testCore } from '../wasm/testing';
import { RestoreSession } from '../wasm-pkg/wasm_core.js';
import { encodeBundle } from '../backup/bundle';
import { FP_LEN, fpHex, fpHexes } from '../backup/hex';
import { readAnswer } from './answer';
import { SessionForecast } from './restore';

beforeAll(async () => {
  await testCore();
});

const MiB = 1 << 20;

/** A raw chunk of `n` bytes (codec 0) that verifies: its fingerprint is its SHA-1. */
function chunk(seed: number, n: number) {
  const stored = new Uint8Array(n);
  for (let i = 0; i < n; i += 4096) stored[i] = (seed * 131 + i / 4096) & 255;
  stored[0] = seed & 255;
  stored[1] = seed >> 8;
  return { fp: new Uint8Array(createHash('sha1').update(stored).digest()), codec: 0, rawLen: n, stored };
}

/** What the real session says it kept of `bundle` (its first `requested` entries asked for). */
function kept(session: RestoreSession, bundle: Uint8Array, requested: number): Set<string> {
  const r = readAnswer(session.verify(bundle, requested, false));
  if (r.type !== 'verified') throw new Error(`refused: ${r.reason}`);
  return new Set(fpHexes(r.kept, r.kept.length / FP_LEN));
}

describe('SessionForecast', () => {
  it("foresees what wasm-core's RestoreSession keeps, answer by answer, up to and past its limit", () => {
    const session = new RestoreSession();
    const forecast = new SessionForecast();
    const c = Array.from({ length: 21 }, (_, k) => chunk(k, MiB));
    const answers = [
      // 10 MiB asked for, one of them twice: all kept.
      { entries: [...c.slice(0, 10), c[3]], requested: 11 },
      // 6 MiB asked for and a link after them: past 16 MiB in all, nothing kept.
      { entries: [...c.slice(10, 16), chunk(99, 4096)], requested: 6 },
      // One held already, five new and a link: 15.9 MiB in all, kept but for the one held.
      { entries: [c[0], ...c.slice(16, 21), chunk(98, 900 << 10)], requested: 6 },
    ];
    const foreseen = answers.map(({ entries, requested }) => {
      const bundle = encodeBundle(entries);
      const asked = entries.slice(0, requested).map((e) => fpHex(e.fp));
      return { want: forecast.add(bundle, asked), got: kept(session, bundle, requested) };
    });
    for (const { want, got } of foreseen) expect(want).toEqual(got);
    expect(foreseen.map(({ got }) => got.size)).toEqual([10, 0, 6]);
    expect(forecast.links).toEqual(new Set([fpHex(chunk(98, 900 << 10).fp)]));
    session.free();
  });
});
