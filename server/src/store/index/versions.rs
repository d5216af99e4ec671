//! Versions: their rows, statistics and manifests (store::versions, stats, expiry).

use wasm_core::hash::Fingerprint;

use crate::store::StoreResult;

/// A version as listed: `stats` is its stored JSON; `damaged` counts its distinct chunks
/// that are not stored (-1: not counted yet).
pub struct VersionRow {
    pub id: i64,
    pub source: String,
    pub time: i64,
    pub committed_ms: i64,
    pub stats: String,
    pub damaged: i64,
}

/// A version's manifest as a row stores it (`store::manifest_blob`; `store::versions`
/// decodes it, following `base`).
#[derive(Clone, Debug)]
pub struct StoredManifest {
    /// The version whose manifest JSON the frame is compressed against (none: standalone).
    pub base: Option<i64>,
    /// The zstd frame.
    pub blob: Vec<u8>,
}

/// One version with what only a single read needs.
pub struct VersionRecord {
    pub row: VersionRow,
    /// The id of the token that committed it (none for versions from before tokens).
    pub token_id: Option<String>,
    pub(crate) manifest: StoredManifest,
}

/// A version of the statistics series, with its stored manifest.
pub struct SeriesRow {
    pub id: i64,
    pub source: String,
    pub time: i64,
    pub committed_ms: i64,
    pub stats: String,
    pub manifest: StoredManifest,
}

/// What a commit needs to know of a chunk its manifest references.
#[derive(Clone, Copy)]
pub struct CommitChunk {
    pub stored_len: u32,
    pub raw_len: u32,
    pub container_id: i64,
    /// No version has committed it yet (its `first_version` is unset).
    pub uncommitted: bool,
}

/// A new version row.
pub struct NewVersion<'a> {
    pub repo_id: i64,
    pub source: &'a str,
    pub time: i64,
    pub committed_ms: i64,
    pub stats: &'a str,
    pub manifest: &'a StoredManifest,
    pub token_id: &'a str,
}

/// How many of a repository's chunks are stored, and their bytes.
pub struct ChunkTotals {
    pub count: i64,
    pub raw_bytes: i64,
    pub stored_bytes: i64,
}

/// How many containers, and a sum of their bytes.
pub struct Totals {
    pub count: i64,
    pub bytes: i64,
}

/// What a retention policy needs of a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionMeta {
    pub id: i64,
    pub source: String,
    /// The manifest's `time` (unix milliseconds, client clock), or the commit's (server
    /// clock) if that is earlier: a backup cannot start after it was committed, so a later
    /// time is a wrong clock or a forged one, and a version a backup token dated in the
    /// future would otherwise count as a source's newest for every retention rule.
    pub time: i64,
}

pub trait VersionRead {
    /// The repository's versions in id order; only those committed by token `own` if given.
    fn versions(&self, repo_id: i64, own: Option<&str>) -> StoreResult<Vec<VersionRow>>;
    /// Version `id` of the repository.
    fn version(&self, repo_id: i64, id: i64) -> StoreResult<Option<VersionRecord>>;
    /// The repository's versions (id, source, time) in id order.
    fn version_metas(&self, repo_id: i64) -> StoreResult<Vec<VersionMeta>>;
    /// Every version of the repository with its stored manifest, in no particular order.
    fn manifests(&self, repo_id: i64) -> StoreResult<Vec<(i64, StoredManifest)>>;
    /// The stored manifest of version `id`, if the repository has it.
    fn stored_manifest(&self, repo_id: i64, id: i64) -> StoreResult<Option<StoredManifest>>;
    /// The repository's versions whose manifests are stored against a version in `ids`.
    fn manifest_dependents(&self, repo_id: i64, ids: &[i64]) -> StoreResult<Vec<i64>>;
    /// The repository's versions with their statistics and manifests, in id order.
    fn version_series(&self, repo_id: i64) -> StoreResult<Vec<SeriesRow>>;
    /// What a commit needs of stored chunk `fp`; none if it is not stored.
    fn commit_chunk(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Option<CommitChunk>>;
    /// The stored length of chunk `fp`, if it is stored.
    fn stored_len(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Option<i64>>;
    /// The repository's stored chunks: how many, their raw and stored bytes.
    fn chunk_totals(&self, repo_id: i64) -> StoreResult<ChunkTotals>;
    /// The raw bytes of the repository's chunk rows that a commit marked (`first_version`
    /// set), leaving out every chunk a slice is stored against (a frame: a slice is codec 2
    /// stored at `SLICE_LEN` bytes, docs/FORMAT.md "Codec 2, method 3").
    fn committed_raw_bytes(&self, repo_id: i64) -> StoreResult<i64>;
    /// The repository's containers: how many, and the sum of their file lengths.
    fn container_totals(&self, repo_id: i64) -> StoreResult<Totals>;
    /// The repository's containers of one kind: how many, and their data bytes.
    fn container_kind_totals(&self, repo_id: i64, kind: u8) -> StoreResult<Totals>;
}

pub trait VersionWrite {
    /// Records a version; returns its id.
    fn insert_version(&self, v: &NewVersion<'_>) -> StoreResult<i64>;
    /// Marks chunks `fps` as first committed by version `vid` (those not marked yet).
    fn mark_first_version(&self, repo_id: i64, vid: i64, fps: &[Fingerprint]) -> StoreResult<()>;
    /// Sets the newest version referencing containers `ids` (their B_ID) to `vid`.
    fn set_newest_version(&self, vid: i64, ids: &[i64]) -> StoreResult<()>;
    /// Seals the repository's unsealed active containers: they take no more appends.
    fn seal_active(&self, repo_id: i64) -> StoreResult<()>;
    /// Replaces the stored manifest of version `id` (the same JSON, stored another way).
    fn set_manifest(&self, repo_id: i64, id: i64, m: &StoredManifest) -> StoreResult<()>;
    /// Deletes versions `ids` of the repository (ids of other repositories are left).
    /// Versions stored against them must have been stored otherwise first
    /// (`store::versions::delete_versions`).
    fn delete_versions(&self, repo_id: i64, ids: &[i64]) -> StoreResult<()>;
}
