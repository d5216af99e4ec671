/**
 * Output blocks for a restore's stream. A zip (or a file) is assembled from many small chunks
 * and headers; every piece that crosses a stream or reaches the sink costs a round of promises
 * and, for a download, a write into the browser's blob storage. Small pieces are copied into
 * blocks of `blockBytes` (one copy, which the sink makes anyway), pieces at least half a block
 * long pass through as they are, after the block before them.
 */

export const BLOCK_BYTES = 4 << 20;

export async function* blocks(
  pieces: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  blockBytes = BLOCK_BYTES,
): AsyncGenerator<Uint8Array> {
  if (!(blockBytes >= 1)) throw new RangeError('blockBytes must be at least 1');
  let block: Uint8Array | null = null;
  let at = 0;
  for await (const p of pieces) {
    if (p.length >= blockBytes / 2) {
      if (at) {
        yield block!.subarray(0, at);
        block = null;
        at = 0;
      }
      if (p.length) yield p;
      continue;
    }
    let from = 0;
    while (from < p.length) {
      block ??= new Uint8Array(blockBytes);
      const n = Math.min(p.length - from, blockBytes - at);
      block.set(p.subarray(from, from + n), at);
      at += n;
      from += n;
      if (at === blockBytes) {
        yield block;
        block = null;
        at = 0;
      }
    }
  }
  if (at) yield block!.subarray(0, at);
}
