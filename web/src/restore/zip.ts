/**
 * A streaming zip writer for restores: entries stored (no compression: backed-up data is
 * restored as it was, and most large files compress poorly), each file's CRC-32 combined
 * from the CRCs of its pieces (computed by the restore workers as they verify chunks), so
 * the page only writes headers. Sizes and CRCs follow each file in a data descriptor. ZIP64
 * records are written where a size, an offset or the entry count exceeds the classic
 * fields (files of 4 GiB and more, archives past 4 GiB), as APPNOTE 4.5.3 describes.
 */
import { crc32Combine } from './crc32';

export interface ZipPiece {
  bytes: Uint8Array;
  /** CRC-32 of `bytes`. */
  crc: number;
}

export interface ZipEntry {
  name: string;
  lastModified: Date;
  /** A directory (name ends in '/', no data). */
  dir?: boolean;
  /** File size, known before the data: it is checked against the bytes written. */
  size?: number;
  data?: AsyncIterable<ZipPiece>;
}

export class ZipError extends Error {}

const U32 = 0x100000000;
const MAX32 = 0xffffffff;
const MAX16 = 0xffff;

function dosTime(d: Date): { time: number; date: number } {
  return {
    time: (d.getHours() << 11) | (d.getMinutes() << 5) | (d.getSeconds() >> 1),
    date: (((d.getFullYear() - 1980) & 0x7f) << 9) | ((d.getMonth() + 1) << 5) | d.getDate(),
  };
}

class Writer {
  readonly bytes: Uint8Array;
  private dv: DataView;
  at = 0;
  constructor(n: number) {
    this.bytes = new Uint8Array(n);
    this.dv = new DataView(this.bytes.buffer);
  }
  u16(v: number) {
    this.dv.setUint16(this.at, v, true);
    this.at += 2;
  }
  u32(v: number) {
    this.dv.setUint32(this.at, v >>> 0, true);
    this.at += 4;
  }
  u64(v: number) {
    this.dv.setUint32(this.at, v % U32, true);
    this.dv.setUint32(this.at + 4, Math.floor(v / U32), true);
    this.at += 8;
  }
  raw(b: Uint8Array) {
    this.bytes.set(b, this.at);
    this.at += b.length;
  }
}

interface Central {
  name: Uint8Array;
  dir: boolean;
  time: number;
  date: number;
  crc: number;
  size: number;
  offset: number;
  zip64: boolean;
}

const utf8 = new TextEncoder();

/** The archive of `entries`, as a sequence of byte pieces (file data passed through as is). */
export async function* zipPieces(entries: AsyncIterable<ZipEntry> | Iterable<ZipEntry>): AsyncGenerator<Uint8Array> {
  const central: Central[] = [];
  let offset = 0;
  for await (const e of entries) {
    const name = utf8.encode(e.name);
    const { time, date } = dosTime(e.lastModified);
    const dir = !!e.dir;
    // A file whose size does not fit 32 bits gets ZIP64 sizes in its local header and
    // data descriptor (the size is known before the data, so the choice is made here).
    const zip64 = !dir && (e.size ?? 0) >= MAX32;
    const local = new Writer(30 + name.length + (zip64 ? 20 : 0));
    local.u32(0x04034b50);
    local.u16(zip64 ? 45 : 20);
    local.u16(dir ? 0x0800 : 0x0808); // UTF-8 names; data descriptor for files
    local.u16(0); // stored
    local.u16(time);
    local.u16(date);
    local.u32(0);
    local.u32(zip64 ? MAX32 : 0);
    local.u32(zip64 ? MAX32 : 0);
    local.u16(name.length);
    local.u16(zip64 ? 20 : 0);
    local.raw(name);
    if (zip64) {
      local.u16(1);
      local.u16(16);
      local.u64(0);
      local.u64(0);
    }
    const entryOffset = offset;
    yield local.bytes;
    offset += local.bytes.length;
    let crc = 0;
    let size = 0;
    if (!dir && e.data) {
      for await (const p of e.data) {
        crc = crc32Combine(crc, p.crc, p.bytes.length);
        size += p.bytes.length;
        offset += p.bytes.length;
        yield p.bytes;
      }
    }
    if (!dir && e.size !== undefined && size !== e.size)
      throw new ZipError(`"${e.name}" came out as ${size} bytes, not ${e.size}`);
    if (!dir) {
      const dd = new Writer(zip64 ? 24 : 16);
      dd.u32(0x08074b50);
      dd.u32(crc);
      if (zip64) {
        dd.u64(size);
        dd.u64(size);
      } else {
        dd.u32(size);
        dd.u32(size);
      }
      yield dd.bytes;
      offset += dd.bytes.length;
    }
    central.push({ name, dir, time, date, crc, size, offset: entryOffset, zip64 });
  }

  const cdStart = offset;
  for (const c of central) {
    const bigSize = c.size >= MAX32;
    const bigOffset = c.offset >= MAX32;
    const extra = (bigSize ? 16 : 0) + (bigOffset ? 8 : 0);
    const w = new Writer(46 + c.name.length + (extra ? 4 + extra : 0));
    const needs64 = c.zip64 || extra > 0;
    w.u32(0x02014b50);
    w.u16((3 << 8) | 45); // made by: Unix, 4.5
    w.u16(needs64 ? 45 : 20);
    w.u16(c.dir ? 0x0800 : 0x0808);
    w.u16(0);
    w.u16(c.time);
    w.u16(c.date);
    w.u32(c.crc);
    w.u32(bigSize ? MAX32 : c.size);
    w.u32(bigSize ? MAX32 : c.size);
    w.u16(c.name.length);
    w.u16(extra ? 4 + extra : 0);
    w.u16(0); // comment
    w.u16(0); // disk
    w.u16(0); // internal attributes
    w.u32(c.dir ? ((0o40755 << 16) | 0x10) >>> 0 : (0o100644 << 16) >>> 0);
    w.u32(bigOffset ? MAX32 : c.offset);
    w.raw(c.name);
    if (extra) {
      w.u16(1);
      w.u16(extra);
      if (bigSize) {
        w.u64(c.size);
        w.u64(c.size);
      }
      if (bigOffset) w.u64(c.offset);
    }
    yield w.bytes;
    offset += w.bytes.length;
  }
  const cdSize = offset - cdStart;
  const n = central.length;
  if (n >= MAX16 || cdStart >= MAX32 || cdSize >= MAX32) {
    const z = new Writer(56 + 20);
    z.u32(0x06064b50);
    z.u64(44);
    z.u16((3 << 8) | 45);
    z.u16(45);
    z.u32(0);
    z.u32(0);
    z.u64(n);
    z.u64(n);
    z.u64(cdSize);
    z.u64(cdStart);
    z.u32(0x07064b50); // locator
    z.u32(0);
    z.u64(offset);
    z.u32(1);
    yield z.bytes;
    offset += z.bytes.length;
  }
  const end = new Writer(22);
  end.u32(0x06054b50);
  end.u16(0);
  end.u16(0);
  end.u16(Math.min(n, MAX16));
  end.u16(Math.min(n, MAX16));
  end.u32(Math.min(cdSize, MAX32));
  end.u32(Math.min(cdStart, MAX32));
  end.u16(0);
  yield end.bytes;
}
