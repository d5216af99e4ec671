//! What the layout mover, expiry and garbage collection ask of the index (store::layout,
//! mover, expiry, gc): live manifests and the mark of the live versions, chunk rows by
//! container and by class, container rows to evacuate or delete, and the repository's
//! `gc_epoch` and reclaimed bytes.

use wasm_core::hash::Fingerprint;

use super::chunks::ChunkRow;
use crate::store::StoreResult;

/// A container as an evacuation or a deletion sees it.
#[derive(Debug, Clone)]
pub struct Source {
    pub id: i64,
    pub kind: u8,
    pub data_offset: i64,
    pub data_end: i64,
}

/// A live version's manifest (its stored form, `store::manifest_blob`) with its source.
pub struct LiveManifest {
    pub id: i64,
    pub source: String,
    pub manifest: super::versions::StoredManifest,
}

/// A container written whole (by the mover, or for an upload to object storage), for its
/// index row.
pub struct WrittenContainer {
    pub id: i64,
    pub repo_id: i64,
    pub kind: u8,
    pub data_offset: i64,
    pub data_end: i64,
    pub chunk_count: i64,
    pub newest_version: i64,
    pub created_ms: i64,
    /// It takes no appends.
    pub sealed: bool,
}

/// A chunk's move: fp, old container, old slot, new slot, new offset.
pub type ChunkMove = (Fingerprint, i64, u32, u32, u64);

/// A chunk the delta pass re-stored, as a delta (codec 2, with its base) or whole at a
/// higher compression level (codec 1, no base): its move plus what changes with the copy.
#[derive(Debug, Clone, Copy)]
pub struct RewriteMove {
    pub fp: Fingerprint,
    pub old_container: i64,
    pub old_slot: u32,
    pub slot: u32,
    pub offset: u64,
    pub stored_len: u32,
    pub codec: u8,
    pub base: Option<Fingerprint>,
    /// Stored bytes a delta saves over the copy it replaces (0 for a recompressed chunk:
    /// that saving counts as compression's).
    pub saved: u32,
}

pub trait MaintenanceRead {
    /// Count and highest id (0: none) of the repository's live versions.
    fn version_mark(&self, repo_id: i64) -> StoreResult<(i64, i64)>;
    /// The repository's live versions with their manifests, in id order.
    fn live_manifests(&self, repo_id: i64) -> StoreResult<Vec<LiveManifest>>;
    /// The smallest live version id of the repository (`i64::MAX`: none).
    fn min_live_version(&self, repo_id: i64) -> StoreResult<i64>;
    /// The repository's `gc_epoch`.
    fn gc_epoch(&self, repo_id: i64) -> StoreResult<i64>;
    /// The highest version id the delta pass has handled (`None`: not recorded, a
    /// repository from before the record).
    fn delta_done(&self, repo_id: i64) -> StoreResult<Option<i64>>;
    /// The repository's `gc_epoch` and the bytes its prunes reclaimed.
    fn gc_counters(&self, repo_id: i64) -> StoreResult<(i64, i64)>;
    /// The data bytes of all the repository's containers.
    fn data_bytes(&self, repo_id: i64) -> StoreResult<i64>;
    /// The repository's archival containers whose newest version (B_ID) is below `below`.
    fn archival_below(&self, repo_id: i64, below: i64) -> StoreResult<Vec<Source>>;
    /// The repository's containers that recovery did not find damaged.
    fn undamaged_containers(&self, repo_id: i64) -> StoreResult<Vec<Source>>;
    /// Container `id` (an error if it has no row).
    fn container_source(&self, id: i64) -> StoreResult<Source>;
    /// Whether container `id` has a row.
    fn container_exists(&self, id: i64) -> StoreResult<bool>;
    /// How many chunk rows point into container `id`.
    fn container_chunk_count(&self, id: i64) -> StoreResult<i64>;
    /// The chunk rows pointing into container `id`, in slot order.
    fn live_rows(&self, id: i64) -> StoreResult<Vec<ChunkRow>>;
    /// Whether any of `fps` is stored in the repository.
    fn any_stored(&self, repo_id: i64, fps: &[Fingerprint]) -> StoreResult<bool>;
    /// Every delta chunk of the repository with its base: `(fp, base)`.
    fn delta_edges(&self, repo_id: i64) -> StoreResult<Vec<(Fingerprint, Fingerprint)>>;
    /// How many delta chunks the repository stores and the stored bytes they save.
    fn delta_totals(&self, repo_id: i64) -> StoreResult<(i64, i64)>;
    /// Per version, the chunks it stored first as they are stored now: `(version id,
    /// stored bytes, stored bytes their deltas save)`, versions that stored none left out.
    fn first_stored_totals(&self, repo_id: i64) -> StoreResult<Vec<(i64, i64, i64)>>;
}

pub trait MaintenanceWrite {
    /// Adds `bytes` to the repository's reclaimed bytes.
    fn add_reclaimed_bytes(&self, repo_id: i64, bytes: i64) -> StoreResult<()>;
    /// Records that the delta pass has handled every version up to `version` (never lowers
    /// the record).
    fn set_delta_done(&self, repo_id: i64, version: i64) -> StoreResult<()>;
    /// Increments the repository's `gc_epoch` (chunk rows were deleted).
    fn bump_gc_epoch(&self, repo_id: i64) -> StoreResult<()>;
    /// Deletes every chunk row pointing into container `id`; returns how many.
    fn delete_container_chunks(&self, id: i64) -> StoreResult<u64>;
    /// Deletes chunk `fp`'s row if it still points into container `container_id`; returns
    /// how many rows went (0 or 1).
    fn delete_chunk_in(
        &self,
        repo_id: i64,
        fp: &Fingerprint,
        container_id: i64,
    ) -> StoreResult<u64>;
    /// Removes a container's row and the quarantine records of damaged copies in it. Deleting
    /// records may lower the repository's quarantine epoch (the highest record id), so it
    /// then moves the repository's `gc_epoch` instead: a fingerprint set loaded before the
    /// quarantine would otherwise look current and name the quarantined chunks stored.
    fn drop_container(&self, id: i64) -> StoreResult<()>;
    /// Lowers container `id`'s newest version (B_ID) to `b_id` if it is above.
    fn lower_newest_version(&self, id: i64, b_id: i64) -> StoreResult<()>;
    /// Records a container the mover wrote.
    fn insert_written_container(&self, c: &WrittenContainer) -> StoreResult<()>;
    /// Re-points the chunks of `moves` to their new slots in container `to`, each only if
    /// its row still names the slot it was copied from.
    fn repoint_chunks(&self, repo_id: i64, to: i64, moves: &[ChunkMove]) -> StoreResult<()>;
    /// Re-points the chunks of `moves` to their rewritten copies in container `to` (codec,
    /// stored length, base, saving), each only if its row still names the slot it was read
    /// from; returns how many rows changed.
    fn repoint_rewritten(&self, repo_id: i64, to: i64, moves: &[RewriteMove]) -> StoreResult<u64>;
}
