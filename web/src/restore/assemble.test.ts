import { constants, deflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  assembleFile,
  assemblePlan,
  assembleZip,
  AssemblyError,
  Counter,
  Windows,
  type AssembleItem,
} from './assemble';
import { concat } from './blocks';
import { crc32 } from './crc32';
import { planRestore, type ChunkLoc, type RestorePlan } from './plan';
import { PortWriter, portReader } from './port';
import { deflatedMax, zipPieces, type ZipEntry } from './zip';

/** A deterministic pseudo-random byte source (xorshift32). */
function bytesOf(seed: number, n: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed | 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

const fpOf = (n: number) => n.toString(16).padStart(40, '0');

/**
 * Files made of `chunkCount` distinct chunks of varied sizes, reused across and within files
 * (the restore cache and repeated references), with their chunk store.
 */
function fixture() {
  const chunks = new Map<string, Uint8Array>();
  const locs = new Map<string, ChunkLoc>();
  for (let c = 0; c < 40; c++) {
    const bytes = bytesOf(c + 7, 200 + ((c * 577) % 1800));
    chunks.set(fpOf(c), bytes);
    locs.set(fpOf(c), { container: 1 + (c % 5), offset: c * 4096, storedLen: bytes.length, rawLen: bytes.length });
  }
  const recipes = [
    [0, 1, 2, 3, 4, 5],
    [6, 7, 0, 1, 8],
    [],
    [9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20],
    [21, 3, 3, 22, 23, 24, 25, 26, 27, 28, 29, 30],
    [31, 32, 33, 34, 35, 36, 37, 38, 39, 0, 5, 9],
    [2, 4, 6],
  ].map((r) => r.map(fpOf));
  const items: (AssembleItem & { recipe: string[] })[] = [];
  recipes.forEach((recipe, k) => {
    if (k === 2) items.push({ name: 'dir', kind: 'dir', size: 0, mtime: 0, recipe: [] });
    const size = recipe.reduce((n, fp) => n + chunks.get(fp)!.length, 0);
    items.push({ name: `dir/f${k}.bin`, kind: 'file', size, mtime: Date.UTC(2024, 0, k + 1), recipe });
  });
  const files = items.filter((i) => i.kind === 'file');
  const plan = planRestore(
    files.map((f) => ({ name: f.name, size: f.size, recipe: f.recipe })),
    (fp) => locs.get(fp),
    // Small windows and cache: several windows, some chunks kept between them, some fetched again.
    { windowBytes: 6000, firstWindowBytes: 6000, requestBytes: 3000, cacheBytes: 4000, maxFpsPerRequest: 4 },
  );
  return { chunks, items, files, plan };
}

/** A chunk's deflate fragment, as wasm-core's `deflate` makes it (compressed alone, sync-flushed). */
const fragment = (c: Uint8Array) =>
  new Uint8Array(deflateRawSync(c, { level: 1, finishFlush: constants.Z_SYNC_FLUSH }));

/**
 * A request's verified answer as a restore worker makes it: raw bytes back to back, or for a
 * zip the chunks' deflate fragments.
 */
function answer(chunks: Map<string, Uint8Array>, window: number, fps: string[], zip: boolean) {
  const bytes = fps.map((fp) => (zip ? fragment(chunks.get(fp)!) : chunks.get(fp)!));
  const lengths = new Uint32Array(bytes.map((b) => b.length));
  const sizes = new Uint32Array(fps.map((fp) => chunks.get(fp)!.length));
  const offsets = new Uint32Array(fps.length);
  const raw = new Uint8Array(lengths.reduce((n, l) => n + l, 0));
  let at = 0;
  bytes.forEach((b, k) => {
    offsets[k] = at;
    raw.set(b, at);
    at += lengths[k];
  });
  const crcs = new Uint32Array(fps.map((fp) => crc32(chunks.get(fp)!)));
  return { window, fps, offsets, lengths, sizes, crcs, raw };
}

/**
 * Feeds the windows as the page does: window w + 1's answers only once the assembler moved to
 * w, each window's requests in reverse order (answers come back in any order).
 */
function feeder(
  plan: RestorePlan,
  chunks: Map<string, Uint8Array>,
  { skip, zip = false }: { skip?: string; zip?: boolean } = {},
) {
  let sent = -1;
  let windows: Windows;
  const moved = (w: number) => {
    queueMicrotask(() => {
      while (sent < Math.min(w + 1, plan.windows.length - 1)) {
        sent++;
        for (const r of [...plan.windows[sent].requests].reverse())
          windows.add(
            answer(
              chunks,
              sent,
              r.fps.filter((f) => f !== skip),
              zip,
            ),
          );
      }
    });
  };
  windows = new Windows(assemblePlan(plan), moved);
  return windows;
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  const reader = stream.getReader();
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    parts.push(r.value.slice());
  }
  return concat(
    parts,
    parts.reduce((n, p) => n + p.length, 0),
  );
}

function fileBytes(chunks: Map<string, Uint8Array>, recipe: string[]): Uint8Array {
  const parts = recipe.map((fp) => chunks.get(fp)!);
  return concat(
    parts,
    parts.reduce((n, p) => n + p.length, 0),
  );
}

describe('assembly', () => {
  it('writes the same zip as the zip writer over the files, across windows and the cache', async () => {
    const { chunks, items, plan } = fixture();
    expect(plan.windows.length).toBeGreaterThan(3);
    expect(plan.windows.some((w) => w.keep.length > 0)).toBe(true);
    const { port1, port2 } = new MessageChannel();
    const out = readAll(portReader(port1));
    const progress: number[] = [];
    const counter = new Counter((bytes) => progress.push(bytes));
    await assembleZip(items, assemblePlan(plan), feeder(plan, chunks, { zip: true }), new PortWriter(port2), counter);
    const got = await out;

    // The zip writer over each file's chunks' fragments, in recipe order.
    const entries: ZipEntry[] = items.map((i) =>
      i.kind === 'dir'
        ? { name: i.name + '/', lastModified: new Date(Date.UTC(1980, 0, 2)), dir: true }
        : {
            name: i.name,
            lastModified: new Date(i.mtime),
            size: i.size,
            deflate: { maxBytes: deflatedMax(i.size, i.recipe.length) },
            data: (async function* () {
              for (const fp of i.recipe) {
                const c = chunks.get(fp)!;
                yield { bytes: fragment(c), crc: crc32(c), size: c.length };
              }
            })(),
          },
    );
    const want = await readAll(
      new ReadableStream({
        async start(ctl) {
          for await (const p of zipPieces(entries)) ctl.enqueue(p);
          ctl.close();
        },
      }),
    );
    expect(got.length).toBe(want.length);
    expect(Buffer.from(got).equals(Buffer.from(want))).toBe(true);
    expect(counter.bytes).toBe(items.reduce((n, i) => n + i.size, 0));
    expect(counter.files).toBe(items.filter((i) => i.kind === 'file').length);
  });

  it("writes a file's bytes", async () => {
    const { chunks, files } = fixture();
    const f = files[5];
    const plan = planRestore([{ name: f.name, size: f.size, recipe: f.recipe }], () => ({
      container: 1,
      offset: 0,
      storedLen: 1000,
      rawLen: 1000,
    }));
    const { port1, port2 } = new MessageChannel();
    const out = readAll(portReader(port1));
    await assembleFile(assemblePlan(plan), feeder(plan, chunks), new PortWriter(port2), new Counter(() => {}));
    expect(Buffer.from(await out).equals(Buffer.from(fileBytes(chunks, f.recipe)))).toBe(true);
  });

  it('stops when told, and the output fails instead of ending', async () => {
    const { items, plan } = fixture();
    const { port1, port2 } = new MessageChannel();
    const out = readAll(portReader(port1));
    out.catch(() => {});
    // Nothing arrives: the assembler waits for the first chunk until it is stopped.
    const windows = new Windows(assemblePlan(plan), () => {});
    const port = new PortWriter(port2);
    const running = assembleZip(items, assemblePlan(plan), windows, port, new Counter(() => {}));
    await new Promise((r) => setTimeout(r, 10));
    windows.stop(new AssemblyError('the server went away'));
    await expect(running).rejects.toThrow('the server went away');
    port.abort('the server went away');
    await expect(out).rejects.toThrow('the server went away');
  });

  it('refuses a window whose requests all came without a chunk it needs', async () => {
    const { chunks, items, plan } = fixture();
    const { port1, port2 } = new MessageChannel();
    readAll(portReader(port1)).catch(() => {});
    const windows = feeder(plan, chunks, { skip: fpOf(7) });
    await expect(
      assembleZip(items, assemblePlan(plan), windows, new PortWriter(port2), new Counter(() => {})),
    ).rejects.toThrow(/chunk 0+7 is not in the restore window/);
  });

  it('a consumer that cancels fails the writer', async () => {
    const { port1, port2 } = new MessageChannel();
    const stream = portReader(port1);
    const w = new PortWriter(port2, 'download');
    const block = new Uint8Array(10);
    await stream.cancel();
    await new Promise((r) => setTimeout(r, 10));
    await expect(w.write(block)).rejects.toThrow('The download was cancelled.');
  });
});
