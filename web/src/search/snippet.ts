/**
 * Snippets around hits: the bytes of a file range, fetched from the chunks that cover it
 * (`chunks/get`, decoded by the server), and rendered as text with the hit marked.
 */
import type { Api } from '../api/client';
import { decodeBundle } from '../backup/bundle';
import { fpHex } from '../backup/hex';
import { pageCore } from '../wasm/page';
import type { SearchFile } from './search';

export const CONTEXT = 40;

export interface Snippet {
  before: string;
  hit: string;
  after: string;
}

/** Printable text: invalid UTF-8, control characters and newlines shown as visible marks. */
function printable(bytes: Uint8Array): string {
  return new TextDecoder('utf-8', { fatal: false })
    .decode(bytes)
    .replace(/[\n\r\t]/g, (c) => (c === '\n' ? '↵' : c === '\t' ? '→' : ''))
    .replace(/[\u0000-\u001f\u007f]/g, '·');
}

/** Raw bytes of the chunks of `fps` (hex) held nearby (the search workers' caches); others left out. */
export type LocalChunks = (fps: string[]) => Promise<Map<string, Uint8Array>>;

/**
 * Chunk bytes by fingerprint, shared by the snippets of one result list. The chunks asked
 * for in one task (every snippet of a list asks as the list appears) are read together:
 * from `local` where it holds them, the rest in one `chunks/get` request; `abort` cancels
 * what is in flight when the list is replaced.
 */
export class ChunkCache {
  private chunks = new Map<string, Promise<Uint8Array>>();
  private batch: { fps: string[]; done: Promise<Uint8Array[]> } | null = null;
  private aborter = new AbortController();
  constructor(
    private api: Api,
    private local: LocalChunks = async () => new Map(),
  ) {}

  get(fps: string[]): Promise<Uint8Array[]> {
    for (const fp of fps) if (!this.chunks.has(fp)) this.chunks.set(fp, this.fetch(fp));
    return Promise.all(fps.map((fp) => this.chunks.get(fp)!));
  }

  abort() {
    this.aborter.abort();
  }

  private fetch(fp: string): Promise<Uint8Array> {
    if (!this.batch) {
      const b: { fps: string[]; done: Promise<Uint8Array[]> } = { fps: [], done: Promise.resolve([]) };
      b.done = Promise.resolve().then(async () => {
        this.batch = null;
        const near = await this.local(b.fps).catch(() => new Map<string, Uint8Array>());
        const far = b.fps.filter((fp) => !near.has(fp));
        if (far.length) {
          const [bundle] = await Promise.all([this.api.getChunks(far, this.aborter.signal, true), pageCore()]);
          const got = decodeBundle(bundle);
          // Decoded and checked by the server; an answer for other chunks is refused, not shown.
          if (got.length !== far.length || got.some((c, i) => fpHex(c.fp) !== far[i]))
            throw new Error('chunks/get answered other chunks than those asked for');
          got.forEach((c, i) => near.set(far[i], c.stored));
        }
        return b.fps.map((fp) => near.get(fp)!);
      });
      this.batch = b;
    }
    const i = this.batch.fps.push(fp) - 1;
    return this.batch.done.then((c) => c[i]);
  }
}

/** The bytes of `file` in `[start, end)`, clamped to the file. */
async function fileRange(cache: ChunkCache, file: SearchFile, start: number, end: number): Promise<Uint8Array> {
  start = Math.max(0, start);
  end = Math.min(file.size, end);
  const fps: string[] = [];
  const pos: number[] = [];
  let at = 0;
  for (let i = 0; i < file.recipe.length && at < end; i++) {
    const len = file.lengths[i];
    if (at + len > start) {
      fps.push(file.recipe[i]);
      pos.push(at);
    }
    at += len;
  }
  const chunks = await cache.get(fps);
  const out = new Uint8Array(Math.max(0, end - start));
  chunks.forEach((c, i) => {
    const from = Math.max(start, pos[i]);
    const to = Math.min(end, pos[i] + c.byteLength);
    if (to > from) out.set(c.subarray(from - pos[i], to - pos[i]), from - start);
  });
  return out;
}

export async function snippet(cache: ChunkCache, file: SearchFile, offset: number, length: number): Promise<Snippet> {
  const from = Math.max(0, offset - CONTEXT);
  const bytes = await fileRange(cache, file, from, offset + length + CONTEXT);
  const a = offset - from;
  return {
    before: printable(bytes.subarray(0, a)),
    hit: printable(bytes.subarray(a, a + length)),
    after: printable(bytes.subarray(a + length)),
  };
}
