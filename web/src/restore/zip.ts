/**
 * A streaming zip writer for restores: each file's CRC-32 combined from the CRCs of its
 * pieces (computed by the restore workers as they verify chunks), so the writer only writes
 * headers. An entry is stored (its pieces are the file's bytes) or deflated (method 8, its
 * pieces the chunks' deflate fragments, wasm-core's `deflate`, each compressed once by the
 * restore workers however often the version repeats it; the writer ends the stream with the
 * final empty block). Sizes and CRCs follow each file in a data descriptor. ZIP64 records
 * are written where a size, an offset or the entry count exceeds the classic fields (files
 * of 4 GiB and more, archives past 4 GiB), as APPNOTE 4.5.3 describes.
 */
import { crc32Combine } from './crc32';

export interface ZipPiece {
  /** The file's bytes, or in a deflated entry a deflate fragment of them. */
  bytes: Uint8Array;
  /** CRC-32 of the file's bytes the piece holds. */
  crc: number;
  /** How many of the file's bytes the piece holds (`bytes.length` when absent). */
  size?: number;
}

/** The file bytes `p` holds. */
export function pieceSize(p: ZipPiece): number {
  return p.size ?? p.bytes.byteLength;
}

/** A deflate stream of fragments ends with a final empty block of fixed codes. */
const DEFLATE_END = new Uint8Array([0x03, 0x00]);

/**
 * The most a deflated entry of `size` bytes in `pieces` fragments can take: each fragment is
 * at most its bytes in stored blocks (5 bytes a block of up to 65 535), then the end block.
 */
export function deflatedMax(size: number, pieces: number): number {
  return size + 5 * (pieces + Math.ceil(size / 0xffff)) + DEFLATE_END.length;
}

export interface ZipEntry extends ZipEntryHead {
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
  deflate: boolean;
  time: number;
  date: number;
  crc: number;
  size: number;
  /** Bytes of the entry's data as written (`size` when stored). */
  csize: number;
  offset: number;
  zip64: boolean;
}

const utf8 = new TextEncoder();

export interface ZipEntryHead {
  name: string;
  lastModified: Date;
  /** A directory (name ends in '/', no data). */
  dir?: boolean;
  /** File size, known before the data: it is checked against the bytes written. */
  size?: number;
  /**
   * Deflated (method 8): the pieces are deflate fragments, at most `deflate.maxBytes` of
   * them in all (decides ZIP64 before the data, as `size` does for a stored file).
   */
  deflate?: { maxBytes: number };
}

interface Open {
  name: Uint8Array;
  zipName: string;
  dir: boolean;
  deflate: boolean;
  time: number;
  date: number;
  zip64: boolean;
  offset: number;
  expected?: number;
  crc: number;
  size: number;
  csize: number;
}

/**
 * The zip format as synchronous calls: `begin` an entry, hand it its `data` pieces, `end` it,
 * and `finish` the archive; every byte of the archive goes to `out` in order (file data is
 * passed through as the same arrays). A restore calls it once per chunk with no promise in
 * between; `zipPieces` is the same writer over async iterables.
 */
export class ZipWriter {
  private central: Central[] = [];
  private offset = 0;
  private open: Open | null = null;

  constructor(private out: (bytes: Uint8Array) => void) {}

  private emit(b: Uint8Array) {
    this.offset += b.length;
    this.out(b);
  }

  begin(e: ZipEntryHead) {
    if (this.open) throw new ZipError(`"${e.name}" begun before "${this.open.zipName}" ended`);
    const name = utf8.encode(e.name);
    const { time, date } = dosTime(e.lastModified);
    const dir = !!e.dir;
    const deflate = !dir && !!e.deflate;
    // A file whose sizes may not fit 32 bits gets ZIP64 sizes in its local header and
    // data descriptor (they are bounded before the data, so the choice is made here).
    const zip64 = !dir && Math.max(e.size ?? 0, e.deflate?.maxBytes ?? 0) >= MAX32;
    const local = new Writer(30 + name.length + (zip64 ? 20 : 0));
    local.u32(0x04034b50);
    local.u16(zip64 ? 45 : 20);
    local.u16(dir ? 0x0800 : 0x0808); // UTF-8 names; data descriptor for files
    local.u16(deflate ? 8 : 0);
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
    this.open = {
      name,
      zipName: e.name,
      dir,
      deflate,
      time,
      date,
      zip64,
      offset: this.offset,
      expected: e.size,
      crc: 0,
      size: 0,
      csize: 0,
    };
    this.emit(local.bytes);
  }

  data(p: ZipPiece) {
    const o = this.open;
    if (!o || o.dir) throw new ZipError('file data outside a file entry');
    const size = pieceSize(p);
    if (!o.deflate && size !== p.bytes.length) throw new ZipError(`"${o.zipName}" is stored, not deflated`);
    o.crc = crc32Combine(o.crc, p.crc, size);
    o.size += size;
    o.csize += p.bytes.length;
    this.emit(p.bytes);
  }

  end() {
    const o = this.open;
    if (!o) throw new ZipError('no entry to end');
    this.open = null;
    const { dir, deflate, crc, size, zip64 } = o;
    if (!dir && o.expected !== undefined && size !== o.expected)
      throw new ZipError(`"${o.zipName}" came out as ${size} bytes, not ${o.expected}`);
    if (deflate) {
      o.csize += DEFLATE_END.length;
      this.emit(DEFLATE_END.slice());
    }
    const { csize } = o;
    if (!zip64 && Math.max(size, csize) >= MAX32)
      throw new ZipError(`"${o.zipName}" came out larger than its entry was begun for`);
    if (!dir) {
      const dd = new Writer(zip64 ? 24 : 16);
      dd.u32(0x08074b50);
      dd.u32(crc);
      if (zip64) {
        dd.u64(csize);
        dd.u64(size);
      } else {
        dd.u32(csize);
        dd.u32(size);
      }
      this.emit(dd.bytes);
    }
    this.central.push({
      name: o.name,
      dir,
      deflate,
      time: o.time,
      date: o.date,
      crc,
      size,
      csize,
      offset: o.offset,
      zip64,
    });
  }

  finish() {
    if (this.open) throw new ZipError(`"${this.open.zipName}" was not ended`);
    const cdStart = this.offset;
    for (const c of this.central) {
      const bigSize = Math.max(c.size, c.csize) >= MAX32;
      const bigOffset = c.offset >= MAX32;
      const extra = (bigSize ? 16 : 0) + (bigOffset ? 8 : 0);
      const w = new Writer(46 + c.name.length + (extra ? 4 + extra : 0));
      const needs64 = c.zip64 || extra > 0;
      w.u32(0x02014b50);
      w.u16((3 << 8) | 45); // made by: Unix, 4.5
      w.u16(needs64 ? 45 : 20);
      w.u16(c.dir ? 0x0800 : 0x0808);
      w.u16(c.deflate ? 8 : 0);
      w.u16(c.time);
      w.u16(c.date);
      w.u32(c.crc);
      w.u32(bigSize ? MAX32 : c.csize);
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
          w.u64(c.csize);
        }
        if (bigOffset) w.u64(c.offset);
      }
      this.emit(w.bytes);
    }
    const cdSize = this.offset - cdStart;
    const n = this.central.length;
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
      z.u64(this.offset);
      z.u32(1);
      this.emit(z.bytes);
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
    this.emit(end.bytes);
  }
}

/** The archive of `entries`, as a sequence of byte pieces (file data passed through as is). */
export async function* zipPieces(entries: AsyncIterable<ZipEntry> | Iterable<ZipEntry>): AsyncGenerator<Uint8Array> {
  const queue: Uint8Array[] = [];
  const zip = new ZipWriter((b) => queue.push(b));
  function* drain() {
    while (queue.length) yield queue.shift()!;
  }
  for await (const e of entries) {
    zip.begin(e);
    yield* drain();
    if (!e.dir && e.data)
      for await (const p of e.data) {
        zip.data(p);
        yield* drain();
      }
    zip.end();
    yield* drain();
  }
  zip.finish();
  yield* drain();
}
