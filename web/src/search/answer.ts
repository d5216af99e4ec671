/**
 * The server's search answer (`POST search` in `application/x-ditto-search`, docs/FORMAT.md
 * "Search answer"), read with wasm-core's codec through the page's instance of the engine:
 * the codec the server encodes it with.
 */
import type { ServerSearchHead } from '../api/client';
import { fpHexes } from '../backup/hex';
import { readSearchAnswer, type SearchAnswerTable } from '../wasm-pkg/wasm_core.js';
import { pageCore } from '../wasm/page';

/** Numbers per file in `SearchAnswerTable.takeNumbers`: version, size, recipe chunks, hits. */
const NUMBERS = 4;

export interface ServerAnswerFile {
  version: number;
  path: string;
  size: number;
  /** Hex fingerprints. */
  recipe: string[];
  lengths: Uint32Array;
  /** (file index, keyword, offset) triples, by offset, then keyword: the layout of `Hits`. */
  hits: Float64Array;
}

export interface ServerAnswer extends ServerSearchHead {
  /** Files with a hit, by version then path. */
  files: ServerAnswerFile[];
}

export class SearchAnswerError extends Error {}

/** Decodes the answer; throws a [`SearchAnswerError`] on anything that is not that format. */
export async function decodeSearchAnswer(bytes: Uint8Array): Promise<ServerAnswer> {
  await pageCore();
  let table: SearchAnswerTable;
  try {
    table = readSearchAnswer(bytes);
  } catch (e) {
    throw new SearchAnswerError(
      `the server's search answer could not be read: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  try {
    const head = JSON.parse(table.head) as ServerSearchHead;
    const nums = table.takeNumbers();
    const paths = table.takePaths();
    const lengths = table.takeLengths();
    const hits = table.takeHits();
    const recipes = fpHexes(table.takeFingerprints(), lengths.length);
    const files: ServerAnswerFile[] = [];
    for (let k = 0, at = 0, chunk = 0, hit = 0; k < paths.length; k++, at += NUMBERS) {
      const chunks = nums[at + 2];
      const count = nums[at + 3];
      files.push({
        version: nums[at],
        path: paths[k],
        size: nums[at + 1],
        recipe: recipes.slice(chunk, chunk + chunks),
        lengths: lengths.subarray(chunk, chunk + chunks),
        hits: hits.subarray(3 * hit, 3 * (hit + count)),
      });
      chunk += chunks;
      hit += count;
    }
    return { ...head, files };
  } finally {
    table.free();
  }
}
