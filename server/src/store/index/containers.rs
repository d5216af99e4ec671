//! Container rows: each container's kind, data range, chunk count and newest version (store::containers, recover).

use wasm_core::hash::Fingerprint;

use crate::store::StoreResult;

/// A container as the index records it.
#[derive(Debug, Clone)]
pub struct IndexContainer {
    pub id: i64,
    pub repo_id: i64,
    pub kind: u8,
    pub data_offset: i64,
    pub data_end: i64,
    pub count: u32,
    pub newest: i64,
    pub created_ms: i64,
    /// Damage found earlier (the container is sealed and its chunks were quarantined).
    pub damage: Option<String>,
}

/// A container about to be recorded (its newest version is 0 until a version names it).
pub struct NewContainer {
    pub id: u64,
    pub repo_id: i64,
    pub kind: u8,
    pub data_offset: u64,
    pub data_end: u64,
    pub chunk_count: u32,
    pub created_ms: u64,
}

/// A stored chunk as a container listing shows it.
pub struct ListedChunk {
    pub fp: Fingerprint,
    pub codec: u8,
    pub offset: i64,
    pub stored_len: u32,
    pub raw_len: u32,
    /// A delta's base (`chunks.base`), `None` for other codecs.
    pub base: Option<Fingerprint>,
}

/// A container as the index knows it.
pub struct ListedContainer {
    pub id: i64,
    pub kind: u8,
    pub newest_version: i64,
    pub data_offset: i64,
    /// Committed end of data: the bytes a client may read.
    pub size: i64,
    /// Its chunks in slot order (empty unless asked for).
    pub chunks: Vec<ListedChunk>,
    /// Each of `chunks`' chain key, in the same order (the store works them out over the
    /// whole repository: `Store::list_containers`).
    pub chain_keys: Vec<Fingerprint>,
}

pub trait ContainerRead {
    /// The highest container id in the index (0 if none): the store numbers new
    /// containers from the next one.
    fn max_container_id(&self) -> StoreResult<u64>;
    /// The highest container id this index may have handed out (at least
    /// [`ContainerRead::max_container_id`]): a container file with a higher id was not
    /// written with this index.
    fn container_ids_handed_out(&self) -> StoreResult<u64>;
    /// Every container of every repository, in id order.
    fn all_containers(&self) -> StoreResult<Vec<IndexContainer>>;
    /// The repository's containers, in id order.
    fn repo_containers(&self, repo_id: i64) -> StoreResult<Vec<IndexContainer>>;
    /// The repository's active container with the highest id, and whether it is sealed.
    fn newest_active_container(&self, repo_id: i64) -> StoreResult<Option<(IndexContainer, bool)>>;
    /// The ids of the repository's containers, ascending.
    fn container_ids(&self, repo_id: i64) -> StoreResult<Vec<i64>>;
    /// The committed data end of the repository's container `id`, if it has one.
    fn container_data_end(&self, repo_id: i64, id: i64) -> StoreResult<Option<i64>>;
    /// The repository's containers in id order, as listed (without their chunks).
    fn listed_containers(&self, repo_id: i64) -> StoreResult<Vec<ListedContainer>>;
    /// Every stored chunk of the repository with its container id, ordered by container
    /// and slot, streamed.
    fn listed_chunks(
        &self,
        repo_id: i64,
        f: &mut dyn FnMut(i64, ListedChunk) -> StoreResult<()>,
    ) -> StoreResult<()>;
}

pub trait ContainerWrite {
    /// Records a new container.
    fn insert_container(&self, c: &NewContainer) -> StoreResult<()>;
    /// Records the committed data end and chunk count of container `id`.
    fn extend_container(&self, id: u64, data_end: u64, chunk_count: u32) -> StoreResult<()>;
    /// Seals container `id` as damaged for `reason`: it takes no more appends.
    fn seal_damaged_container(&self, id: i64, reason: &str) -> StoreResult<()>;
}
