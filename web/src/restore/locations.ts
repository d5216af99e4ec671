/**
 * The chunk locations of one version (`GET versions/{id}/locations`, docs/API.md): only the
 * chunks a restore of that version reads, in a compact binary form, instead of the chunk
 * table of the whole repository.
 */
import type { Api } from '../api/client';
import { fpHexes } from '../backup/hex';
import { readLocations, type LocationTable } from '../wasm-pkg/wasm_core.js';
import { pageCore } from '../wasm/page';
import type { ChunkLoc } from './plan';

export interface VersionLocations {
  locations: Map<string, ChunkLoc & { codec: number }>;
  /** Distinct chunks of the version the server does not store (damaged or lost). */
  notStored: number;
}

export class LocationsError extends Error {}

/**
 * Decodes the endpoint's answer with wasm-core's codec (docs/FORMAT.md, "Version
 * locations"), the one the server encodes with; throws on anything that is not that format.
 */
export async function decodeLocations(bytes: Uint8Array): Promise<VersionLocations> {
  await pageCore();
  let table: LocationTable;
  try {
    table = readLocations(bytes);
  } catch (e) {
    throw new LocationsError(`the chunk locations could not be read: ${e instanceof Error ? e.message : String(e)}`);
  }
  try {
    const nums = table.takeNumbers();
    const fps = fpHexes(table.takeFingerprints(), nums.length / 6);
    // Without chain keys (older servers) the plan spreads requests by turns.
    const keyed = table.hasChainKeys;
    const locations = new Map<string, ChunkLoc & { codec: number }>();
    for (let k = 0, at = 0; k < fps.length; k++, at += 6) {
      const loc: ChunkLoc & { codec: number } = {
        container: nums[at],
        offset: nums[at + 1],
        storedLen: nums[at + 2],
        rawLen: nums[at + 3],
        codec: nums[at + 4],
      };
      if (keyed) loc.chainKey = nums[at + 5];
      locations.set(fps[k], loc);
    }
    return { locations, notStored: table.notStored };
  } finally {
    table.free();
  }
}

/** Locations fetched ahead for versions open in the page ([`holdLocations`]), per API client. */
const held = new WeakMap<Api, Map<number, Promise<VersionLocations>>>();

/**
 * Fetches version `id`'s chunk locations now and keeps them for its restores until the
 * returned function is called: the version browser holds them while a version is open, so a
 * file, folder or preview of it plans at once. Locations a layout change has since moved
 * only make a plan less tidy, never wrong (`chunks/get` finds every chunk by fingerprint).
 */
export function holdLocations(api: Api, id: number): () => void {
  let versions = held.get(api);
  if (!versions) held.set(api, (versions = new Map()));
  const fetched = api.versionLocations(id).then(decodeLocations);
  fetched.catch(() => {}); // a restore that needs them fetches them again
  versions.set(id, fetched);
  return () => {
    if (versions.get(id) === fetched) versions.delete(id);
  };
}

/** Where the chunks of version `id` are. */
export async function versionLocations(api: Api, id: number, signal?: AbortSignal): Promise<VersionLocations> {
  const ahead = held.get(api)?.get(id);
  if (ahead) {
    try {
      return await ahead;
    } catch {
      // Fetched again below.
    }
  }
  return decodeLocations(await api.versionLocations(id, signal));
}
