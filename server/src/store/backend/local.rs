//! Containers as files under `<data dir>/repos/<repo id>/containers/`, appended to in
//! place and fsynced (with their directory when created or removed).

use std::{
    fs::{self, File, OpenOptions},
    io::{self, ErrorKind},
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
};

use wasm_core::format::container::NEWEST_VERSION_OFFSET;

use super::super::containers::{container_path, containers_dir, fsync_dir};
use super::{container_id_of, ContainerBackend, Handle, Whole};

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

fn file(c: &Handle) -> io::Result<&File> {
    match c {
        Handle::File(f) => Ok(f),
        Handle::Object(_) => Err(io::Error::other("not a container of the local disk")),
    }
}

impl ContainerBackend for LocalDisk {
    fn appends(&self) -> bool {
        true
    }

    fn create(&self, repo_id: i64, id: u64, header: &[u8], data_offset: u64) -> io::Result<Handle> {
        let dir = containers_dir(&self.data_dir, repo_id);
        if !dir.exists() {
            fs::create_dir_all(&dir)?;
            fsync_dir(dir.parent().unwrap())?;
            fsync_dir(dir.parent().unwrap().parent().unwrap())?;
        }
        // A new id has no file: one that has is not this index's to overwrite.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(container_path(&self.data_dir, repo_id, id))?;
        file.write_all_at(header, 0)?;
        file.set_len(data_offset)?;
        file.sync_all()?;
        fsync_dir(&dir)?;
        Ok(Handle::File(file))
    }

    fn write_whole(&self, repo_id: i64, id: u64, w: &Whole<'_>) -> io::Result<()> {
        let c = self.create(repo_id, id, w.header, w.data_at)?;
        self.append_sync(&c, w.data_at, w.data, w.table_at, w.table)
    }

    fn open(&self, repo_id: i64, id: u64) -> io::Result<Option<Handle>> {
        match File::open(container_path(&self.data_dir, repo_id, id)) {
            Ok(f) => Ok(Some(Handle::File(f))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn append_sync(
        &self,
        c: &Handle,
        data_at: u64,
        data: &[u8],
        table_at: u64,
        table: &[u8],
    ) -> io::Result<()> {
        let c = file(c)?;
        c.write_all_at(data, data_at)?;
        c.write_all_at(table, table_at)?;
        c.sync_data()
    }

    fn read_at(&self, c: &Handle, offset: u64, len: u32) -> io::Result<Option<Vec<u8>>> {
        let mut buf = vec![0u8; len as usize];
        match file(c)?.read_exact_at(&mut buf, offset) {
            Ok(()) => Ok(Some(buf)),
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn read_all(&self, repo_id: i64, id: u64) -> io::Result<Option<Vec<u8>>> {
        match fs::read(container_path(&self.data_dir, repo_id, id)) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn hint_newest_version(&self, repo_id: i64, id: u64, version: i64) {
        let path = container_path(&self.data_dir, repo_id, id);
        if let Ok(f) = OpenOptions::new().write(true).open(path) {
            let _ = f.write_all_at(&version.to_le_bytes(), NEWEST_VERSION_OFFSET as u64);
        }
    }

    fn delete(&self, repo_id: i64, id: u64) -> io::Result<()> {
        fs::remove_file(container_path(&self.data_dir, repo_id, id))
    }

    fn sync_deletes(&self, repo_id: i64) -> io::Result<()> {
        fsync_dir(&containers_dir(&self.data_dir, repo_id))
    }

    fn list(&self) -> io::Result<Vec<(i64, u64, u64)>> {
        let now = std::time::SystemTime::now();
        let mut out = Vec::new();
        for repo in read_dir_or_none(&self.data_dir.join("repos"))? {
            let Some(repo_id) = repo?.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            for e in read_dir_or_none(&containers_dir(&self.data_dir, repo_id))? {
                let e = e?;
                let Some(id) = e.file_name().to_str().and_then(container_id_of) else {
                    continue;
                };
                let age = e
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| now.duration_since(t).ok())
                    .map_or(0, |d| d.as_millis() as u64);
                out.push((repo_id, id, age));
            }
        }
        Ok(out)
    }
}

/// A directory's entries; none when it does not exist.
fn read_dir_or_none(dir: &std::path::Path) -> io::Result<Vec<io::Result<fs::DirEntry>>> {
    match fs::read_dir(dir) {
        Ok(d) => Ok(d.collect()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}
