/**
 * A typed client of the storage server's API v1 (docs/API.md). Every failure becomes an
 * ApiError carrying the HTTP status, the server's error code and its message, so the UI can
 * say what went wrong ("token refused", "server unreachable") instead of hanging.
 */

export interface VersionStats {
  files: number;
  dirs: number;
  symlinks: number;
  logical_bytes: number;
  chunk_refs: number;
  unique_chunks: number;
  new_chunks: number;
  new_raw_bytes: number;
  new_stored_bytes: number;
  dedup_ratio: number | null;
  /** Picked files the version does not hold (> 0: incomplete); absent in older versions. */
  skipped_files?: number;
}

export interface ManifestEntry {
  path: string;
  kind: 'file' | 'dir' | 'symlink';
  size: number;
  mtime: number;
  mode: number | null;
  recipe: string[];
  target?: string;
}

/** Why a picked file is not in a version (docs/FORMAT.md, manifest `skipped`). */
export type SkipReason = 'changed' | 'deleted' | 'unreadable';

export interface SkippedFile {
  path: string;
  reason: SkipReason;
  /** The error as the page saw it (absent when there is none). */
  detail?: string;
}

export interface Manifest {
  source: string;
  /** The picked folder's own name; absent in manifests written before the field existed. */
  folder?: string;
  time: number;
  entries: ManifestEntry[];
  /** Picked files the version does not hold; absent when it holds them all. */
  skipped?: SkippedFile[];
}

export interface VersionInfo {
  id: number;
  source: string;
  /** The picked folder's name, from the manifest (absent when it has none). */
  folder?: string;
  time: number;
  committed_at: number;
  stats: VersionStats;
  /** Distinct recipe chunks not stored (damaged or lost); > 0: cannot be restored whole. */
  damaged_chunks?: number;
}

export interface RepoStats {
  repo: string;
  chunks: number;
  raw_bytes: number;
  stored_bytes: number;
  containers: number;
  container_bytes: number;
  versions: number;
  logical_bytes: number;
  dedup_ratio: number | null;
  /** Containers and their committed data bytes by kind, and the dead bytes in them (docs/STORAGE.md). */
  layout: {
    active_containers: number;
    active_bytes: number;
    archival_containers: number;
    archival_bytes: number;
    dead_bytes: number;
  };
  /** Freed by forget and prune over the repository's life. */
  reclaimed_bytes: number;
  gc_epoch: number;
  series: {
    id: number;
    source: string;
    time: number;
    committed_at: number;
    logical_bytes: number;
    files: number;
    new_stored_bytes: number;
    dedup_ratio: number | null;
    /** Stored bytes of the chunks only this version references: what deleting it alone frees. */
    unique_stored_bytes: number;
    /** The chunks this version stored first, as stored now (after the server's delta pass). */
    first_stored_bytes?: number;
    /** What those of them stored as deltas save. */
    delta_saved_bytes?: number;
  }[];
}

/**
 * `POST search`: `keywords` as text, or as hex bytes with `hex`; or `text` instead, one
 * keyword per line as typed in the Search tab (read as the search workers read it).
 */
export interface ServerSearchRequest {
  keywords?: string[];
  text?: string;
  hex?: boolean;
  files_only?: boolean;
  versions?: number[];
  path?: string;
}

/**
 * What `POST search` answers besides its files (the head of the answer in bytes, docs/FORMAT.md
 * "Search answer"; search/answer.ts reads the files).
 */
export interface ServerSearchHead {
  /** Every version id of the repository when the server read them, ascending (absent from older servers). */
  versions?: number[];
  matches: number;
  files_searched: number;
  logical_bytes: number;
  containers: number;
  chunks: number;
  bytes_scanned: number;
  /** Chunks whose trigram summary ruled out every keyword (their ends scanned only). */
  chunks_ruled_out: number;
  /** Bytes in blocks whose trigram summaries ruled out every keyword (not read wholly). */
  bytes_ruled_out: number;
  stored_bytes_read: number;
  phase_ms: { prepare: number; physical: number; logical: number };
}

/** A retention policy (docs/STORAGE.md, Expiry): a version is kept if any rule keeps it. */
export interface RetentionPolicy {
  keep_last?: number;
  keep_hourly?: number;
  keep_daily?: number;
  keep_weekly?: number;
  keep_monthly?: number;
  keep_yearly?: number;
  /** A duration such as `30d`, `36h`, `1y6m` (m = months, min = minutes). */
  keep_within?: string;
}

export type KeepReason = 'last' | 'hourly' | 'daily' | 'weekly' | 'monthly' | 'yearly' | 'within';

/**
 * `POST forget`: by a policy (optionally for one source), by version ids, or both: a previewed
 * policy's versions, removed only while the policy still removes each (else 409 `changed`).
 */
export type ForgetRequest = (
  { policy: RetentionPolicy; source?: string; versions?: number[] } | { versions: number[] }
) & {
  dry_run?: boolean;
};

export interface PruneReport {
  dry_run: boolean;
  reclaimable_bytes: number;
  reclaimed_bytes: number;
  containers_deleted: number;
  containers_icda: number;
  containers_compacted: number;
  bytes_rewritten: number;
  chunks_deleted: number;
  sweep: boolean;
  seconds: number;
}

export interface ForgetResult {
  dry_run: boolean;
  remove: { id: number; source: string; time: number }[];
  keep: { id: number; source: string; time: number; reasons?: KeepReason[] }[];
  /** Stored bytes of the chunks no kept version references: what the removal frees. */
  freed_bytes: number;
  freed_chunks: number;
  /** What the data directory shrank by (0 on a dry run). */
  reclaimed_bytes: number;
  prune: PruneReport | null;
  /** Why the prune after the removal failed: the versions are removed all the same. */
  prune_error: string | null;
}

/** What the presented token may do (docs/API.md, Authentication: scopes). */
export interface TokenInfo {
  repo: string;
  scope: 'full' | 'backup' | 'read';
  /** The id `ditto-server token list` shows; never the token itself. */
  id: string;
  can: { backup: boolean; restore: boolean; delete: boolean; browse: boolean };
  describe: string;
  /** Grows each time a prune deletes chunks (docs/STORAGE.md): the client index's validity. */
  gc_epoch: number;
}

/** `GET versions` (docs/API.md). */
export interface VersionList {
  versions: VersionInfo[];
  gc_epoch: number;
  /** What a search of every version scans (raw bytes), when asked; only for a token that may browse. */
  raw_bytes?: number;
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly body: Record<string, unknown> = {},
  ) {
    super(message);
  }
  /**
   * Worth retrying: the network, or the server being briefly unable. A full disk (507) is
   * not brief: the user has to free space, so it is reported at once.
   */
  get transient(): boolean {
    if (this.status === 507) return false;
    return this.status === 0 || this.status === 408 || this.status === 429 || this.status >= 500;
  }
}

export class Api {
  constructor(
    readonly token: string,
    readonly repo = 'default',
    readonly base = '',
  ) {}

  private async call(path: string, init: RequestInit = {}, signal?: AbortSignal): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(`${this.base}/api/v1${path}`, {
        ...init,
        signal,
        headers: { Authorization: `Bearer ${this.token}`, ...(init.headers ?? {}) },
      });
    } catch (e) {
      if (e instanceof DOMException && e.name === 'AbortError') throw e;
      throw new ApiError('The server is unreachable. Is `npm start` still running?', 0, 'unreachable');
    }
    if (res.ok) return res;
    let body: Record<string, unknown> = {};
    try {
      body = await res.json();
    } catch {
      /* not JSON: keep the status text */
    }
    const code = typeof body.code === 'string' ? body.code : 'http_' + res.status;
    let message = typeof body.error === 'string' ? body.error : `${res.status} ${res.statusText}`;
    if (res.status === 401)
      message = `The server refused the access token (${message}). Open the link that \`npm start\` printed.`;
    // A 403 says itself what the token may not do (another repository's token, or a scope
    // without the right: "this backup token may not delete; …").
    if (res.status === 403) message = `The server refused: ${message}.`;
    throw new ApiError(message, res.status, code, body);
  }

  private repoPath(p: string) {
    return `/repos/${encodeURIComponent(this.repo)}${p}`;
  }

  async json<T>(path: string, init: RequestInit = {}, signal?: AbortSignal): Promise<T> {
    return (await this.call(path, init, signal)).json() as Promise<T>;
  }

  /** The fingerprints (n*20 bytes) the server does not hold, in request order. */
  async missing(fps: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    const res = await this.call(
      this.repoPath('/chunks/missing'),
      { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' }, body: fps as BodyInit },
      signal,
    );
    return new Uint8Array(await res.arrayBuffer());
  }

  /** The raw length of each chunk (n*20 bytes of fingerprints), 0 where not stored. */
  async chunkLengths(fps: Uint8Array, signal?: AbortSignal): Promise<Uint32Array> {
    const res = await this.call(
      this.repoPath('/chunks/lengths'),
      { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' }, body: fps as BodyInit },
      signal,
    );
    const bytes = new DataView(await res.arrayBuffer());
    return Uint32Array.from({ length: bytes.byteLength / 4 }, (_, i) => bytes.getUint32(4 * i, true));
  }

  async uploadBundle(bundle: Uint8Array, signal?: AbortSignal) {
    return this.json<{ chunks: number; stored: number; duplicates: number; stored_bytes: number; raw_bytes: number }>(
      this.repoPath('/bundles'),
      { method: 'POST', headers: { 'Content-Type': 'application/x-ditto-bundle' }, body: bundle as BodyInit },
      signal,
    );
  }

  /** `manifest` as an object, or already as JSON text: bytes, or a Blob (large manifests). */
  commitVersion(manifest: Manifest | Blob | Uint8Array) {
    return this.json<VersionInfo>(this.repoPath('/versions'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body:
        manifest instanceof Blob || manifest instanceof Uint8Array ? (manifest as BodyInit) : JSON.stringify(manifest),
    });
  }

  async tokenInfo(): Promise<TokenInfo> {
    return this.json<TokenInfo>(this.repoPath('/token'));
  }

  async versions(): Promise<VersionInfo[]> {
    return (await this.versionList()).versions;
  }

  /**
   * The versions with the repository's `gc_epoch`, read together, and with `rawBytes` what
   * a search of every version scans (`raw_bytes`: one sum over the server's chunk rows).
   */
  versionList(rawBytes = false): Promise<VersionList> {
    return this.json<VersionList>(this.repoPath(rawBytes ? '/versions?raw_bytes=true' : '/versions'));
  }

  version(id: number) {
    return this.json<VersionInfo & { manifest: Manifest }>(this.repoPath(`/versions/${id}`));
  }

  /** Forgets one version and prunes what only it referenced. */
  deleteVersion(id: number) {
    return this.json<{ deleted: number; reclaimed_bytes: number; prune_error: string | null }>(
      this.repoPath(`/versions/${id}`),
      { method: 'DELETE' },
    );
  }

  /** Removes the versions a policy or a list selects, then prunes; with `dry_run`, only says what would go. */
  forget(req: ForgetRequest) {
    return this.json<ForgetResult>(this.repoPath('/forget'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(req),
    });
  }

  stats() {
    return this.json<RepoStats>(this.repoPath('/stats'));
  }

  /**
   * DedupSearch run by the server (docs/SEARCH.md, server-side search), answered in bytes
   * (`application/x-ditto-search`; search/answer.ts decodes it): as JSON, a pair of numbers
   * per match would take the page longer to parse than the search took.
   */
  async search(req: ServerSearchRequest, signal?: AbortSignal): Promise<Uint8Array> {
    const res = await this.call(
      this.repoPath('/search'),
      {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/x-ditto-search' },
        body: JSON.stringify(req),
      },
      signal,
    );
    return new Uint8Array(await res.arrayBuffer());
  }

  /**
   * Many chunks as one bundle, in request order (restore); `decode`: all sent raw (codec 0).
   * Otherwise whole chunks come as stored and delta chunks decoded, or, with
   * `deltas: 'stored'`, as stored too (codec 2: the caller decodes them against their bases),
   * and with `chains.unchecked` as read, not checked by the server: only for a caller that
   * checks every chunk it decodes against its fingerprint (docs/API.md, `verify`).
   */
  async getChunks(
    fps: string[],
    signal?: AbortSignal,
    decode = false,
    deltas: 'decoded' | 'stored' = 'decoded',
    chains?: { have: string[]; unchecked?: boolean },
  ): Promise<Uint8Array> {
    const res = await this.call(
      this.repoPath('/chunks/get'),
      {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
          fingerprints: fps,
          decode,
          ...(deltas === 'stored' ? { deltas } : {}),
          ...(chains ? { chains: true, have: chains.have } : {}),
          ...(chains?.unchecked ? { verify: false } : {}),
        }),
      },
      signal,
    );
    return new Uint8Array(await res.arrayBuffer());
  }

  /** Where the chunks of version `id` are, as the server encodes it (restore/locations.ts decodes it). */
  async versionLocations(id: number, signal?: AbortSignal): Promise<Uint8Array> {
    const res = await this.call(this.repoPath(`/versions/${id}/locations`), {}, signal);
    return new Uint8Array(await res.arrayBuffer());
  }

  /** Bytes `[start, end)` of container `id` (a Range request; search reads containers whole). */
  async containerBytes(id: number, start: number, end: number, signal?: AbortSignal): Promise<Uint8Array> {
    const res = await this.call(
      this.repoPath(`/containers/${id}`),
      { headers: { Range: `bytes=${start}-${end - 1}` } },
      signal,
    );
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (bytes.byteLength !== end - start)
      throw new ApiError(
        `container ${id}: got ${bytes.byteLength} bytes for range ${start}-${end - 1}`,
        res.status,
        'short_read',
      );
    return bytes;
  }
}
