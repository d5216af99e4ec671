//! Quarantined copies of damaged chunks (store::quarantine, verify), and the count of
//! chunks not stored that each version keeps (`versions.damaged`).

use wasm_core::hash::Fingerprint;

use super::chunks::ChunkRow;
use crate::store::StoreResult;

/// A damaged copy found by a read: quarantined only if the index still points there (a
/// concurrent upload may have healed it already).
#[derive(Debug, Clone)]
pub struct Found {
    pub fp: Fingerprint,
    pub container_id: u64,
    pub offset: u64,
    pub reason: String,
}

/// Which versions of a repository a damage recount reads.
#[derive(Debug, Clone, Copy)]
pub enum Recount {
    All,
    /// Those already counted damaged.
    Damaged,
    /// Those whose count is unknown (-1, set by a schema migration).
    Unknown,
}

/// A version as a damage recount reads it.
pub struct VersionDamage {
    pub id: i64,
    pub damaged: i64,
    pub manifest: super::versions::StoredManifest,
}

pub trait QuarantineRead {
    /// Every quarantined copy of the repository (healed or not), streamed in no particular
    /// order (`committed` as the row it was; `stored_ms` 0).
    fn quarantined_rows(
        &self,
        repo_id: i64,
        f: &mut dyn FnMut(ChunkRow) -> StoreResult<()>,
    ) -> StoreResult<()>;
    /// Whether `fp` has a damaged copy that no upload has replaced yet.
    fn is_quarantined(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<bool>;
    /// Whether the repository has any damaged copy not replaced yet.
    fn any_quarantined(&self, repo_id: i64) -> StoreResult<bool>;
    /// How many distinct chunks of the repository are quarantined and not replaced yet.
    fn quarantined_count(&self, repo_id: i64) -> StoreResult<i64>;
    /// The highest quarantine record id of the repository: it grows whenever any process
    /// (a server, or `check`) quarantines one of its chunks, so a server can tell that its
    /// in-memory fingerprint set is stale. Per repository, because a repository's write
    /// transactions commit in the order they take their ids; different repositories' may
    /// not.
    fn quarantine_epoch(&self, repo_id: i64) -> StoreResult<i64>;
    /// The repository's damaged versions (id, count of their chunks not stored), by id.
    fn damaged_versions(&self, repo_id: i64) -> StoreResult<Vec<(i64, i64)>>;
    /// How many of the repository's versions are damaged.
    fn damaged_version_count(&self, repo_id: i64) -> StoreResult<i64>;
    /// Whether any version of the repository is damaged.
    fn any_damaged_version(&self, repo_id: i64) -> StoreResult<bool>;
    /// The repositories with versions whose damage count is unknown.
    fn repos_with_unknown_damage(&self) -> StoreResult<Vec<i64>>;
    /// The repository's versions that `which` picks, with their manifests.
    fn versions_to_recount(&self, repo_id: i64, which: Recount) -> StoreResult<Vec<VersionDamage>>;
}

pub trait QuarantineWrite {
    /// Moves the chunk record `f` names (if the index still has it at that place) into
    /// quarantine; returns whether it did.
    fn quarantine_chunk(&self, repo_id: i64, f: &Found, found_ms: i64) -> StoreResult<bool>;
    /// A new copy of `fp` was stored: it keeps the version that first referenced the
    /// quarantined one, and the open quarantine records of `fp` are closed.
    fn heal_quarantined(&self, repo_id: i64, fp: &Fingerprint, healed_ms: i64) -> StoreResult<()>;
    /// Sets the count of chunks not stored of version `version_id`.
    fn set_version_damage(&self, version_id: i64, damaged: i64) -> StoreResult<()>;
}
