import { describe, expect, it, vi } from 'vitest';
import type { Api } from '../api/client';
import { decodeLocations, holdLocations, LocationsError, versionLocations } from './locations';

// The page's instance of the engine, made from the built file here (no fetch in Node).
vi.mock('../wasm/page', async () => {
  const { testCore } = await import('../wasm/testing');
  return {
    pageCore: async () => {
      await testCore();
    },
  };
});

/** The layout docs/FORMAT.md ("Version locations") gives, written out field by field. */
function encode(
  recs: { fp: number; container: number; offset: number; stored: number; raw: number; codec: number; root?: number }[],
  format = 2,
) {
  const out = new Uint8Array(16 + recs.length * 48);
  const dv = new DataView(out.buffer);
  out.set([0x44, 0x4c, 0x4f, 0x43]); // "DLOC"
  dv.setUint32(4, format, true);
  dv.setUint32(8, recs.length, true);
  dv.setUint32(12, 2, true);
  recs.forEach((r, k) => {
    const at = 16 + k * 48;
    out.fill(r.fp, at, at + 20);
    dv.setBigUint64(at + 20, BigInt(r.container), true);
    dv.setBigUint64(at + 28, BigInt(r.offset), true);
    dv.setUint32(at + 36, r.stored, true);
    dv.setUint32(at + 40, r.raw, true);
    out[at + 44] = r.codec;
    if (format === 2) out.fill(r.root ?? r.fp, at + 45, at + 48); // the chain key: 3 bytes of a fingerprint
  });
  return out;
}

describe('decodeLocations', () => {
  it('reads every record and the count of chunks not stored', async () => {
    const bytes = encode([
      { fp: 0xab, container: 7, offset: 86016, stored: 3000, raw: 8192, codec: 1 },
      { fp: 0x01, container: 2 ** 33 + 5, offset: 2 ** 40 + 3, stored: 10, raw: 10, codec: 2, root: 0xab },
    ]);
    const { locations, notStored } = await decodeLocations(bytes);
    expect(notStored).toBe(2);
    expect([...locations.keys()]).toEqual(['ab'.repeat(20), '01'.repeat(20)]);
    expect(locations.get('ab'.repeat(20))).toEqual({
      container: 7,
      offset: 86016,
      storedLen: 3000,
      rawLen: 8192,
      codec: 1,
      chainKey: 0xababab,
    });
    expect(locations.get('01'.repeat(20))).toEqual({
      container: 2 ** 33 + 5,
      offset: 2 ** 40 + 3,
      storedLen: 10,
      rawLen: 10,
      codec: 2,
      chainKey: 0xababab,
    });
  });

  it('reads format 1 (no chain keys)', async () => {
    const { locations } = await decodeLocations(
      encode([{ fp: 0xab, container: 7, offset: 0, stored: 30, raw: 80, codec: 1 }], 1),
    );
    expect(locations.get('ab'.repeat(20))).toEqual({ container: 7, offset: 0, storedLen: 30, rawLen: 80, codec: 1 });
  });

  it('refuses a wrong magic, format or length, and what a JS number cannot hold', async () => {
    const good = encode([{ fp: 1, container: 1, offset: 0, stored: 1, raw: 1, codec: 0 }]);
    await expect(decodeLocations(good.subarray(0, good.length - 1))).rejects.toThrow(LocationsError);
    const magic = good.slice();
    magic[0] = 0;
    await expect(decodeLocations(magic)).rejects.toThrow(/bad magic/);
    const format = good.slice();
    format[4] = 3;
    await expect(decodeLocations(format)).rejects.toThrow(/format 3/);
    await expect(decodeLocations(new Uint8Array(3))).rejects.toThrow(LocationsError);
    const far = encode([{ fp: 1, container: 1, offset: 2 ** 53, stored: 1, raw: 1, codec: 0 }]);
    await expect(decodeLocations(far)).rejects.toThrow(/beyond what the page can address/);
  });
});

describe('holdLocations', () => {
  it("serves a held version's restores from one fetch until released, and fetches again after a failure", async () => {
    const asked: number[] = [];
    let fail = false;
    const api = {
      async versionLocations(id: number) {
        asked.push(id);
        if (fail) throw new Error('offline');
        return encode([{ fp: id, container: 1, offset: 0, stored: 1, raw: 2, codec: 1 }]);
      },
    } as unknown as Api;
    const release = holdLocations(api, 7);
    const a = await versionLocations(api, 7);
    const b = await versionLocations(api, 7);
    expect(a).toBe(b);
    expect(asked).toEqual([7]);
    await versionLocations(api, 8);
    expect(asked).toEqual([7, 8]);
    release();
    await versionLocations(api, 7);
    expect(asked).toEqual([7, 8, 7]);

    fail = true;
    const release2 = holdLocations(api, 9);
    fail = false;
    // The held fetch failed: the restore's own fetch goes.
    expect((await versionLocations(api, 9)).locations.size).toBe(1);
    expect(asked).toEqual([7, 8, 7, 9, 9]);
    release2();
  });
});
