import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { constants, deflateRawSync, inflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { crc32, crc32Combine } from './crc32';
import { BlockWriter } from './blocks';
import { deflatedMax, zipPieces, ZipError, ZipWriter, type ZipEntry, type ZipPiece } from './zip';

const u16 = (b: Uint8Array, at: number) => b[at] | (b[at + 1] << 8);
const u32 = (b: Uint8Array, at: number) => (b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) | (b[at + 3] << 24)) >>> 0;
const u64 = (b: Uint8Array, at: number) => u32(b, at) + u32(b, at + 4) * 2 ** 32;

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

async function* pieces(data: Uint8Array, cut: number): AsyncGenerator<ZipPiece> {
  for (let i = 0; i < data.length; i += cut) {
    const bytes = data.subarray(i, i + cut);
    yield { bytes, crc: crc32(bytes) };
  }
}

interface Listed {
  name: string;
  crc: number;
  size: number;
  offset: number;
}

/** Reads the central directory (through the ZIP64 records when present), as unzip does. */
function centralDirectory(tail: Uint8Array, tailStart: number): Listed[] {
  const eocd = tail.length - 22;
  expect(u32(tail, eocd)).toBe(0x06054b50);
  let n = u16(tail, eocd + 10);
  let cdStart = u32(tail, eocd + 16);
  if (cdStart === 0xffffffff || n === 0xffff) {
    const loc = eocd - 20;
    expect(u32(tail, loc)).toBe(0x07064b50);
    const z = u64(tail, loc + 8) - tailStart;
    expect(u32(tail, z)).toBe(0x06064b50);
    n = u64(tail, z + 32);
    cdStart = u64(tail, z + 48);
  }
  const out: Listed[] = [];
  let at = cdStart - tailStart;
  for (let k = 0; k < n; k++) {
    expect(u32(tail, at)).toBe(0x02014b50);
    const nameLen = u16(tail, at + 28);
    const extraLen = u16(tail, at + 30);
    let size = u32(tail, at + 24);
    let offset = u32(tail, at + 42);
    const name = new TextDecoder().decode(tail.subarray(at + 46, at + 46 + nameLen));
    let x = at + 46 + nameLen;
    if (extraLen) {
      expect(u16(tail, x)).toBe(1);
      x += 4;
      if (size === 0xffffffff) {
        size = u64(tail, x);
        x += 16;
      }
      if (offset === 0xffffffff) offset = u64(tail, x);
    }
    out.push({ name, crc: u32(tail, at + 16), size, offset });
    at += 46 + nameLen + extraLen;
  }
  return out;
}

describe('crc32Combine', () => {
  it('equals the CRC of the concatenation', () => {
    const data = Uint8Array.from({ length: 70_001 }, (_, i) => (i * 7 + (i >> 9)) & 0xff);
    for (const cut of [0, 1, 8, 4096, 70_000, 70_001]) {
      const a = data.subarray(0, cut);
      const b = data.subarray(cut);
      expect(crc32Combine(crc32(a), crc32(b), b.length)).toBe(crc32(data));
    }
    expect(crc32(new TextEncoder().encode('123456789'))).toBe(0xcbf43926);
  });
});

describe('zipPieces', () => {
  it('writes files and folders whose headers, checksums and offsets a reader finds', async () => {
    const a = Uint8Array.from({ length: 100_000 }, (_, i) => (i * 13) & 0xff);
    const b = new TextEncoder().encode('héllo');
    const when = new Date(2024, 5, 7, 8, 9, 10);
    const entries: ZipEntry[] = [
      { name: 'dir/', lastModified: when, dir: true },
      { name: 'dir/a.bin', lastModified: when, size: a.length, data: pieces(a, 4096) },
      { name: 'dir/ü.txt', lastModified: when, size: b.length, data: pieces(b, 2) },
      { name: 'empty', lastModified: when, size: 0, data: pieces(new Uint8Array(0), 1) },
    ];
    const zip = concat(await collect(zipPieces(entries)));
    const list = centralDirectory(zip, 0);
    expect(list.map((e) => [e.name, e.size, e.crc])).toEqual([
      ['dir/', 0, 0],
      ['dir/a.bin', a.length, crc32(a)],
      ['dir/ü.txt', b.length, crc32(b)],
      ['empty', 0, 0],
    ]);
    for (const e of list) {
      expect(u32(zip, e.offset)).toBe(0x04034b50);
      const nameLen = u16(zip, e.offset + 26);
      const data = e.offset + 30 + nameLen + u16(zip, e.offset + 28);
      const dos = u16(zip, e.offset + 12);
      expect([dos >> 9, (dos >> 5) & 15, dos & 31]).toEqual([2024 - 1980, 6, 7]);
      if (e.name === 'dir/a.bin') expect(zip.subarray(data, data + a.length)).toEqual(a);
      if (!e.name.endsWith('/')) {
        // the data descriptor follows the data: signature, CRC, sizes
        expect(u32(zip, data + e.size)).toBe(0x08074b50);
        expect(u32(zip, data + e.size + 4)).toBe(e.crc);
        expect(u32(zip, data + e.size + 8)).toBe(e.size);
      }
    }
  });

  it('writes deflated entries from fragments that Info-ZIP and zlib read back', async () => {
    // Fragments as wasm-core's `deflate` makes them: each chunk compressed on its own,
    // ended by a sync flush (byte-aligned, not final), some repeated.
    const text = new TextEncoder().encode('a line of a restored file\n'.repeat(3000));
    const noise = Uint8Array.from({ length: 70_000 }, (_, i) => (Math.imul(i, 2654435761) >>> 13) & 0xff);
    const chunks = [text.subarray(0, 9000), text.subarray(9000), noise, new Uint8Array(0)];
    const fragment = (c: Uint8Array): ZipPiece => ({
      bytes: deflateRawSync(c, { level: 1, finishFlush: constants.Z_SYNC_FLUSH }),
      crc: crc32(c),
      size: c.length,
    });
    const files = {
      'a.txt': [0, 1, 0, 3, 1],
      'sub/noise.bin': [2, 0, 2],
      empty: [],
    };
    const when = new Date(2024, 5, 7, 8, 9, 10);
    const entries: ZipEntry[] = Object.entries(files).map(([name, order]) => {
      const size = order.reduce((n, k) => n + chunks[k].length, 0);
      return {
        name,
        lastModified: when,
        size,
        deflate: { maxBytes: deflatedMax(size, order.length) },
        data: (async function* () {
          for (const k of order) yield fragment(chunks[k]);
        })(),
      };
    });
    const zip = concat(await collect(zipPieces(entries)));
    const want = (order: number[]) => concat(order.map((k) => chunks[k]));
    const list = centralDirectory(zip, 0);
    expect(list.map((e) => [e.name, e.size, e.crc])).toEqual(
      Object.entries(files).map(([name, order]) => [name, want(order).length, crc32(want(order))]),
    );
    expect(zip.length).toBeLessThan(want(files['a.txt']).length + want(files['sub/noise.bin']).length);
    for (const e of list) {
      const nameLen = u16(zip, e.offset + 26);
      expect(u16(zip, e.offset + 8)).toBe(8); // deflated
      const data = e.offset + 30 + nameLen + u16(zip, e.offset + 28);
      const cdAt = zip.length - 22;
      const next = list.find((x) => x.offset > e.offset)?.offset ?? u32(zip, cdAt + 16);
      // The data descriptor: signature, CRC, compressed size, size.
      const csize = next - 16 - data;
      expect(u32(zip, data + csize)).toBe(0x08074b50);
      expect(u32(zip, data + csize + 8)).toBe(csize);
      expect(u32(zip, data + csize + 12)).toBe(e.size);
      expect(inflateRawSync(zip.subarray(data, data + csize))).toEqual(
        Buffer.from(want(files[e.name as keyof typeof files])),
      );
    }
    // Info-ZIP's unzip (what the e2e suite unpacks restores with) checks every CRC.
    const dir = mkdtempSync(path.join(tmpdir(), 'zip-'));
    try {
      writeFileSync(path.join(dir, 'x.zip'), zip);
      execFileSync('unzip', ['-tq', path.join(dir, 'x.zip')]);
      expect(execFileSync('unzip', ['-p', path.join(dir, 'x.zip'), 'sub/noise.bin'])).toEqual(
        Buffer.from(want(files['sub/noise.bin'])),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('gives a deflated entry that may pass 4 GiB its ZIP64 sizes, compressed and not', () => {
    const parts: Uint8Array[] = [];
    const w = new ZipWriter((b) => parts.push(b.slice()));
    const size = 2 ** 32 + 5;
    w.begin({ name: 'big', lastModified: new Date(2024, 0, 1), size, deflate: { maxBytes: deflatedMax(size, 1) } });
    w.data({ bytes: new Uint8Array(10), crc: 7, size });
    w.end();
    w.finish();
    const zip = concat(parts);
    expect(u16(zip, 4)).toBe(45); // version needed: ZIP64
    expect(u16(zip, 8)).toBe(8);
    const data = 30 + 3 + 20;
    // The data descriptor after the 10 bytes and the end block: CRC, then 8-byte sizes.
    expect(u32(zip, data + 12)).toBe(0x08074b50);
    expect(u32(zip, data + 16)).toBe(7);
    expect(u64(zip, data + 20)).toBe(12);
    expect(u64(zip, data + 28)).toBe(size);
    const [e] = centralDirectory(zip, 0);
    expect([e.name, e.size, e.crc, e.offset]).toEqual(['big', size, 7, 0]);
    // Its central record: both 32-bit sizes saturated, the extra field's size then compressed size.
    const cd = u32(zip, zip.length - 22 + 16);
    expect([u32(zip, cd + 20), u32(zip, cd + 24)]).toEqual([0xffffffff, 0xffffffff]);
    expect([u16(zip, cd + 46 + 3), u64(zip, cd + 46 + 3 + 4), u64(zip, cd + 46 + 3 + 12)]).toEqual([1, size, 12]);
  });

  it('refuses fragments in a stored entry, and a deflated entry past the bound it was begun with', () => {
    const w = new ZipWriter(() => {});
    w.begin({ name: 'x', lastModified: new Date(), size: 10 });
    expect(() => w.data({ bytes: new Uint8Array(4), crc: 0, size: 10 })).toThrow(ZipError);
    const d = new ZipWriter(() => {});
    d.begin({ name: 'y', lastModified: new Date(), deflate: { maxBytes: 100 } });
    d.data({ bytes: new Uint8Array(4), crc: 0, size: 2 ** 32 });
    expect(() => d.end()).toThrow(/larger than its entry was begun for/);
  });

  it('refuses a file whose bytes do not add up to its size', async () => {
    const entries = [{ name: 'x', lastModified: new Date(), size: 5, data: pieces(new Uint8Array(4), 4) }];
    await expect(collect(zipPieces(entries))).rejects.toThrow(ZipError);
  });

  it('switches to ZIP64 past 4 GiB: a 4.5 GiB file, then a file whose offset is past 4 GiB', async () => {
    // One 8 MiB buffer repeated: the writer passes data through, so nothing of 4 GiB exists.
    const block = Uint8Array.from({ length: 8 << 20 }, (_, i) => (i * 31) & 0xff);
    const blockCrc = crc32(block);
    const big = 4.5 * 2 ** 30;
    async function* repeated(): AsyncGenerator<ZipPiece> {
      for (let done = 0; done < big; done += block.length) yield { bytes: block, crc: blockCrc };
    }
    let crcBig = 0;
    for (let done = 0; done < big; done += block.length) crcBig = crc32Combine(crcBig, blockCrc, block.length);
    const small = new TextEncoder().encode('after the big one');
    const entries: ZipEntry[] = [
      { name: 'big.bin', lastModified: new Date(2020, 0, 1), size: big, data: repeated() },
      { name: 'small.txt', lastModified: new Date(2020, 0, 1), size: small.length, data: pieces(small, 5) },
    ];
    // Keep only what is not the big file's data: headers, descriptors, the small file, the end.
    let total = 0;
    const head: Uint8Array[] = [];
    let tailStart = -1;
    const tail: Uint8Array[] = [];
    for await (const p of zipPieces(entries)) {
      if (p !== block) {
        if (total < 1024) head.push(p);
        else {
          if (tailStart < 0) tailStart = total;
          tail.push(p);
        }
      }
      total += p.length;
    }
    const h = concat(head);
    expect(u32(h, 0)).toBe(0x04034b50);
    expect(u16(h, 4)).toBe(45);
    expect(u32(h, 22)).toBe(0xffffffff); // sizes in the ZIP64 extra field
    const t = concat(tail);
    // the big file's ZIP64 data descriptor: 8-byte sizes
    expect(u32(t, 0)).toBe(0x08074b50);
    expect(u32(t, 4)).toBe(crcBig);
    expect(u64(t, 8)).toBe(big);
    const list = centralDirectory(t, tailStart);
    expect(list.map((e) => [e.name, e.size, e.crc])).toEqual([
      ['big.bin', big, crcBig],
      ['small.txt', small.length, crc32(small)],
    ]);
    expect(list[0].offset).toBe(0);
    expect(list[1].offset).toBe(tailStart + 24);
    expect(list[1].offset).toBeGreaterThan(2 ** 32);
    const local = list[1].offset - tailStart;
    expect(u32(t, local)).toBe(0x04034b50);
    expect(u16(t, local + 4)).toBe(20); // a small file keeps classic sizes
    expect(t.length + tailStart).toBe(total);
  }, 120_000);
});

describe('ZipWriter through BlockWriter (the restore path)', () => {
  it('writes, in small blocks, the archive a reader finds, byte for byte what zipPieces writes', async () => {
    const a = Uint8Array.from({ length: 50_000 }, (_, i) => (i * 11 + (i >> 7)) & 0xff);
    const b = new TextEncoder().encode('second file');
    const when = new Date(2023, 1, 2, 3, 4, 6);
    const entries = (): ZipEntry[] => [
      { name: 'd/', lastModified: when, dir: true },
      { name: 'd/a', lastModified: when, size: a.length, data: pieces(a, 777) },
      { name: 'b', lastModified: when, size: b.length, data: pieces(b, 3) },
    ];
    const out = new BlockWriter(1000);
    const blocksOut: Uint8Array[] = [];
    const zip = new ZipWriter((p) => out.push(p));
    for (const e of entries()) {
      zip.begin(e);
      if (e.data) for await (const p of e.data) zip.data(p);
      zip.end();
      for (const blk of out.take()) blocksOut.push(blk.slice());
    }
    zip.finish();
    out.flush();
    blocksOut.push(...out.take());
    expect(blocksOut.every((blk) => blk.length <= 1000)).toBe(true);
    const viaBlocks = concat(blocksOut);
    expect(viaBlocks).toEqual(concat(await collect(zipPieces(entries()))));
    const list = centralDirectory(viaBlocks, 0);
    expect(list.map((e) => [e.name, e.size, e.crc])).toEqual([
      ['d/', 0, 0],
      ['d/a', a.length, crc32(a)],
      ['b', b.length, crc32(b)],
    ]);
    const at = list[1].offset + 30 + u16(viaBlocks, list[1].offset + 26);
    expect(viaBlocks.subarray(at, at + a.length)).toEqual(a);
  });

  it('refuses data outside a file and an entry left open', () => {
    const zip = new ZipWriter(() => {});
    expect(() => zip.data({ bytes: new Uint8Array(1), crc: 0 })).toThrow(ZipError);
    zip.begin({ name: 'x', lastModified: new Date(), size: 1 });
    expect(() => zip.finish()).toThrow(ZipError);
    expect(() => zip.end()).toThrow(ZipError); // 0 bytes of 1
  });
});
