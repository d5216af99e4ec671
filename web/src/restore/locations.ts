/**
 * The chunk locations of one version (`GET versions/{id}/locations`, docs/API.md): only the
 * chunks a restore of that version reads, in a compact binary form, instead of the chunk
 * table of the whole repository.
 */
import type { Api } from '../api/client';
import { fpHexes } from '../backup/hex';
import type { ChunkLoc } from './plan';

const MAGIC = 0x434f4c44; // "DLOC" read as a little-endian u32
const HEADER = 16;
const RECORD = 48;

export interface VersionLocations {
  locations: Map<string, ChunkLoc & { codec: number }>;
  /** Distinct chunks of the version the server does not store (damaged or lost). */
  notStored: number;
}

export class LocationsError extends Error {}

/** Decodes the endpoint's answer; throws on anything that is not exactly that format. */
export function decodeLocations(bytes: Uint8Array): VersionLocations {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.byteLength < HEADER || dv.getUint32(0, true) !== MAGIC)
    throw new LocationsError('the chunk locations are not in the expected format');
  const format = dv.getUint32(4, true);
  // Format 1 (older servers) had no chain keys: the plan then spreads requests by turns.
  if (format !== 1 && format !== 2)
    throw new LocationsError(`chunk locations in format ${format}, this page reads formats 1 and 2`);
  const n = dv.getUint32(8, true);
  if (bytes.byteLength !== HEADER + n * RECORD)
    throw new LocationsError(`chunk locations: ${bytes.byteLength} bytes for ${n} records`);
  const locations = new Map<string, ChunkLoc & { codec: number }>();
  const u64 = (at: number) => dv.getUint32(at, true) + dv.getUint32(at + 4, true) * 2 ** 32;
  const fps = fpHexes(bytes, n, RECORD, HEADER);
  for (let k = 0; k < n; k++) {
    const at = HEADER + k * RECORD;
    const loc: ChunkLoc & { codec: number } = {
      container: u64(at + 20),
      offset: u64(at + 28),
      storedLen: dv.getUint32(at + 36, true),
      rawLen: dv.getUint32(at + 40, true),
      codec: bytes[at + 44],
    };
    if (format === 2) loc.chainKey = bytes[at + 45] | (bytes[at + 46] << 8) | (bytes[at + 47] << 16);
    locations.set(fps[k], loc);
  }
  return { locations, notStored: dv.getUint32(12, true) };
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
