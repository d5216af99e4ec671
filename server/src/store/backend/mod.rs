//! Where container bytes live, behind the few calls the store makes on them: on the local
//! disk ([`local`], the embedded default) or in an S3-compatible object store ([`object`],
//! `DITTO_S3_BUCKET`; docs/STORAGE.md "Object storage"). Each call keeps its part of the
//! write rule (docs/FORMAT.md, "Writing and recovery rules"): a container is durable
//! (`create`, `write_whole`) and its appended bytes are (`append_sync`) before the call
//! returns; the store commits index rows after, never before.
//!
//! Two kinds of backend: one whose containers take appends after they are created (the
//! local disk: uploads fill an open container bundle by bundle), and one whose containers
//! are written once, whole, and never changed (objects: each upload's new chunks become
//! containers of their own, which the mover's compaction later merges).
//!
//! Startup recovery (`recover.rs`) repairs local files directly: it is the local disk's
//! own tool, not a call a backend needs.

pub mod local;
pub mod object;

use std::{fs::File, io};

pub use local::LocalDisk;
pub use object::ObjectStorage;

/// A container's bytes as written whole: `header` at 0, `table` at `table_at`, `data`
/// at `data_at`.
pub struct Whole<'a> {
    pub header: &'a [u8],
    pub table_at: u64,
    pub table: &'a [u8],
    pub data_at: u64,
    pub data: &'a [u8],
}

/// An open container.
pub enum Handle {
    File(File),
    Object(object::ObjectHandle),
}

/// The container operations of the store.
pub trait ContainerBackend: Send + Sync {
    /// Whether a container takes appends after it is created (`create`, `append_sync`);
    /// otherwise containers are only written whole (`write_whole`).
    fn appends(&self) -> bool;

    /// Creates container `id` of the repository holding `header` and sized `data_offset`
    /// (an empty table), durably; replaces any leftover of that id.
    fn create(&self, repo_id: i64, id: u64, header: &[u8], data_offset: u64) -> io::Result<Handle>;

    /// Writes `data` at `data_at` and `table` (slot entries) at `table_at`, then makes both
    /// durable.
    fn append_sync(
        &self,
        c: &Handle,
        data_at: u64,
        data: &[u8],
        table_at: u64,
        table: &[u8],
    ) -> io::Result<()>;

    /// Writes container `id` whole and durably.
    fn write_whole(&self, repo_id: i64, id: u64, c: &Whole<'_>) -> io::Result<()>;

    /// Opens container `id` for reading; `None` if it does not exist.
    fn open(&self, repo_id: i64, id: u64) -> io::Result<Option<Handle>>;

    /// `len` bytes at `offset`; `None` if the container ends before (or is gone since it
    /// was opened).
    fn read_at(&self, c: &Handle, offset: u64, len: u32) -> io::Result<Option<Vec<u8>>>;

    /// Several ranges `(container id, offset, len)` of the repository's containers, each
    /// answered as [`ContainerBackend::read_at`] would. Ranges of one container should
    /// follow each other (they share one open). A backend whose requests cost latency
    /// rather than bandwidth reads them concurrently.
    fn read_ranges(
        &self,
        repo_id: i64,
        ranges: &[(u64, u64, u32)],
    ) -> Vec<io::Result<Option<Vec<u8>>>> {
        let mut open: Option<(u64, Option<Handle>)> = None;
        ranges
            .iter()
            .map(|&(id, offset, len)| {
                if open.as_ref().map(|(at, _)| *at) != Some(id) {
                    open = Some((id, self.open(repo_id, id)?));
                }
                match open.as_ref().and_then(|(_, h)| h.as_ref()) {
                    Some(h) => self.read_at(h, offset, len),
                    None => Ok(None),
                }
            })
            .collect()
    }

    /// Container `id` whole; `None` if it does not exist.
    fn read_all(&self, repo_id: i64, id: u64) -> io::Result<Option<Vec<u8>>>;

    /// Records `version` as the newest version referencing container `id`, best effort: the
    /// index is the authority, the container's copy a hint for reading it alone (containers
    /// that are never rewritten keep the hint they were written with).
    fn hint_newest_version(&self, repo_id: i64, id: u64, version: i64);

    /// Removes container `id` (one created for a bundle whose index commit failed, or one
    /// the mover or garbage collection emptied). Not finding it is `NotFound`.
    fn delete(&self, repo_id: i64, id: u64) -> io::Result<()>;

    /// Makes the deletions of the repository's containers so far durable.
    fn sync_deletes(&self, repo_id: i64) -> io::Result<()>;

    /// Every container of every repository, known to the index or not, as `(repository
    /// id, container id, age in milliseconds)`, for the sweep of containers that no index
    /// row names (`recover.rs`).
    fn list(&self) -> io::Result<Vec<(i64, u64, u64)>>;
}

/// The file name of container `id` below its repository's folder (or key prefix).
pub fn container_name(repo_id: i64, id: u64) -> String {
    format!("repos/{repo_id}/containers/{id:010}.dct")
}

/// The container id a file name of [`container_name`]'s form names.
pub fn container_id_of(name: &str) -> Option<u64> {
    name.strip_suffix(".dct")?.parse().ok()
}

/// The backend the environment configures: object storage when `DITTO_S3_BUCKET` is set,
/// else the data directory's disk.
pub fn from_env(data_dir: &std::path::Path) -> Result<Box<dyn ContainerBackend>, String> {
    Ok(match object::Config::from_env()? {
        Some(cfg) => {
            let bucket = cfg.bucket.clone();
            let s = ObjectStorage::new(cfg)?;
            s.check()
                .map_err(|e| format!("object storage: bucket {bucket} does not answer: {e}"))?;
            Box::new(s)
        }
        None => Box::new(LocalDisk::new(data_dir)),
    })
}
