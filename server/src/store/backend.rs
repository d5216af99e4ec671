//! Where container bytes live, behind the few calls the store makes on them, so that a
//! second backend can take the place of the local disk. Each call keeps its part of the
//! write rule (docs/FORMAT.md, "Writing and recovery rules"): `create` returns only once
//! the new container (header and name) is durable, and `append_sync` only once the data
//! and table slots it wrote are; the store commits index rows after, never before.
//!
//! Startup recovery (`recover.rs`) and `check` repair and inspect files directly: they are
//! the local disk's own tools, not calls a backend needs.

use std::{
    fs::{self, File, OpenOptions},
    io::ErrorKind,
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
};

use wasm_core::format::container::NEWEST_VERSION_OFFSET;

use super::containers::{container_path, containers_dir, fsync_dir};

/// The container operations of the store.
pub trait ContainerBackend {
    /// An open container.
    type Handle;

    /// Creates container `id` of the repository holding `header` and sized `data_offset`
    /// (an empty table), durably; replaces any leftover of that id.
    fn create(
        &self,
        repo_id: i64,
        id: u64,
        header: &[u8],
        data_offset: u64,
    ) -> std::io::Result<Self::Handle>;

    /// Opens container `id` for reading; `None` if it does not exist.
    fn open(&self, repo_id: i64, id: u64) -> std::io::Result<Option<Self::Handle>>;

    /// Writes `data` at `data_at` and `table` (slot entries) at `table_at`, then makes both
    /// durable.
    fn append_sync(
        &self,
        c: &Self::Handle,
        data_at: u64,
        data: &[u8],
        table_at: u64,
        table: &[u8],
    ) -> std::io::Result<()>;

    /// `len` bytes at `offset`; `None` if the container ends before.
    fn read_at(&self, c: &Self::Handle, offset: u64, len: u32) -> std::io::Result<Option<Vec<u8>>>;

    /// Records `version` as the newest version referencing container `id`, best effort: the
    /// index is the authority, the container's copy a hint for reading it alone.
    fn hint_newest_version(&self, repo_id: i64, id: u64, version: i64);

    /// Removes container `id` (one created for a bundle whose index commit failed, or one
    /// the mover or garbage collection emptied).
    fn delete(&self, repo_id: i64, id: u64) -> std::io::Result<()>;

    /// Makes the deletions of the repository's containers so far durable.
    fn sync_deletes(&self, repo_id: i64) -> std::io::Result<()>;
}

/// The open container of the store's backend.
pub type Handle = <LocalDisk as ContainerBackend>::Handle;

/// Containers as files under `<data dir>/repos/<repo id>/containers/`.
pub struct LocalDisk {
    pub data_dir: PathBuf,
}

impl LocalDisk {
    pub fn new(data_dir: &Path) -> Self {
        LocalDisk {
            data_dir: data_dir.to_path_buf(),
        }
    }
}

impl ContainerBackend for LocalDisk {
    type Handle = File;

    fn create(
        &self,
        repo_id: i64,
        id: u64,
        header: &[u8],
        data_offset: u64,
    ) -> std::io::Result<File> {
        let dir = containers_dir(&self.data_dir, repo_id);
        if !dir.exists() {
            fs::create_dir_all(&dir)?;
            fsync_dir(dir.parent().unwrap())?;
            fsync_dir(dir.parent().unwrap().parent().unwrap())?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(container_path(&self.data_dir, repo_id, id))?;
        file.write_all_at(header, 0)?;
        file.set_len(data_offset)?;
        file.sync_all()?;
        fsync_dir(&dir)?;
        Ok(file)
    }

    fn open(&self, repo_id: i64, id: u64) -> std::io::Result<Option<File>> {
        match File::open(container_path(&self.data_dir, repo_id, id)) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn append_sync(
        &self,
        c: &File,
        data_at: u64,
        data: &[u8],
        table_at: u64,
        table: &[u8],
    ) -> std::io::Result<()> {
        c.write_all_at(data, data_at)?;
        c.write_all_at(table, table_at)?;
        c.sync_data()
    }

    fn read_at(&self, c: &File, offset: u64, len: u32) -> std::io::Result<Option<Vec<u8>>> {
        let mut buf = vec![0u8; len as usize];
        match c.read_exact_at(&mut buf, offset) {
            Ok(()) => Ok(Some(buf)),
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn hint_newest_version(&self, repo_id: i64, id: u64, version: i64) {
        let path = container_path(&self.data_dir, repo_id, id);
        if let Ok(f) = OpenOptions::new().write(true).open(path) {
            let _ = f.write_all_at(&version.to_le_bytes(), NEWEST_VERSION_OFFSET as u64);
        }
    }

    fn delete(&self, repo_id: i64, id: u64) -> std::io::Result<()> {
        fs::remove_file(container_path(&self.data_dir, repo_id, id))
    }

    fn sync_deletes(&self, repo_id: i64) -> std::io::Result<()> {
        fsync_dir(&containers_dir(&self.data_dir, repo_id))
    }
}
