//! Chunk locations: where each stored chunk of a repository is (store::chunks, ingest).

use wasm_core::hash::Fingerprint;

use crate::store::StoreResult;

/// Where a stored chunk lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkLoc {
    pub container_id: u64,
    pub offset: u64,
    pub stored_len: u32,
    pub raw_len: u32,
    pub codec: u8,
}

/// A chunk about to be recorded in slot `slot` of its container.
#[derive(Debug, Clone, Copy)]
pub struct NewChunk {
    pub fp: Fingerprint,
    pub slot: u32,
    pub offset: u64,
    pub stored_len: u32,
    pub raw_len: u32,
    pub codec: u8,
}

/// A chunk row whole, as the repository-wide scans read it (the fingerprint cache, check,
/// statistics, the mover's occupancy, garbage collection), or a quarantined copy's row.
#[derive(Debug, Clone, Copy)]
pub struct ChunkRow {
    pub fp: Fingerprint,
    pub container_id: i64,
    pub slot: u32,
    pub offset: u64,
    pub stored_len: u32,
    pub raw_len: u32,
    pub codec: u8,
    /// A committed version references it (its first version is set).
    pub committed: bool,
    /// When it was stored (unix ms; 0 before the column existed).
    pub stored_ms: i64,
}

/// A stored chunk's location and, for a delta, the base it is stored against.
pub type LocatedWithBase = (ChunkLoc, Option<Fingerprint>);

pub trait ChunkRead {
    /// Every stored chunk of the repository, streamed in no particular order.
    fn chunk_rows(
        &self,
        repo_id: i64,
        f: &mut dyn FnMut(ChunkRow) -> StoreResult<()>,
    ) -> StoreResult<()>;
    /// Where the repository's chunk `fp` is stored, if it is.
    fn chunk_location(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Option<ChunkLoc>>;
    /// [`Self::chunk_location`] of each of `fps`, in their order (a backend where each
    /// statement is a network round trip answers them in one).
    fn chunk_locations(
        &self,
        repo_id: i64,
        fps: &[Fingerprint],
    ) -> StoreResult<Vec<Option<ChunkLoc>>>;
    /// [`Self::chunk_locations`] with each chunk's base ([`Self::delta_bases`]), read from
    /// the same row: one lookup a chunk.
    fn chunk_locations_with_bases(
        &self,
        repo_id: i64,
        fps: &[Fingerprint],
    ) -> StoreResult<Vec<Option<LocatedWithBase>>>;
    /// The base each of `fps` is stored against (its `base` row), in their order: `None`
    /// for a chunk that is not a delta or not stored. One statement for the whole list
    /// where a statement is a network round trip.
    fn delta_bases(
        &self,
        repo_id: i64,
        fps: &[Fingerprint],
    ) -> StoreResult<Vec<Option<Fingerprint>>>;
    /// Whether the repository stores chunk `fp`.
    fn chunk_stored(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<bool>;
    /// The raw length of the repository's chunk `fp`, if stored.
    fn chunk_raw_len(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Option<u32>>;
    /// How many chunks the repository stores.
    fn chunk_count(&self, repo_id: i64) -> StoreResult<i64>;
    /// The place (offset, stored length) of each stored chunk of one container of the
    /// repository, in slot order (malformed fingerprints are skipped).
    fn container_chunk_extents(
        &self,
        repo_id: i64,
        container_id: u64,
    ) -> StoreResult<Vec<(Fingerprint, u64, u64)>>;
    /// The stored chunks of one container of the repository in slot order, streamed
    /// (malformed fingerprints are skipped). `f` may read the index (a delta's base).
    fn container_chunks(
        &self,
        repo_id: i64,
        container_id: u64,
        f: &mut dyn FnMut(Fingerprint, ChunkLoc) -> StoreResult<()>,
    ) -> StoreResult<()>;
}

pub trait ChunkWrite {
    /// Records chunks appended to container `container_id` of the repository.
    fn insert_chunks(
        &self,
        repo_id: i64,
        container_id: u64,
        stored_ms: i64,
        chunks: &[NewChunk],
    ) -> StoreResult<()>;
}
