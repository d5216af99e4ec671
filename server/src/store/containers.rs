//! Container files: where they live, creating one durably, reopening the newest one for
//! appends, and reading their committed bytes. A container is created whole (header
//! written, file and directory fsynced) before any chunk row may point into it, and only
//! bytes below the committed `data_end` the index records are ever served.

use std::{
    collections::HashMap,
    fs::File,
    path::{Path, PathBuf},
};

use wasm_core::format::container::{
    data_offset_for, slot_offset, ContainerHeader, ContainerKind, TABLE_ENTRY_LEN,
    TARGET_DATA_BYTES,
};
use wasm_core::hash::Fingerprint;

use super::index::containers::{ListedChunk, ListedContainer};
use super::{
    backend::{Handle, Whole},
    now_ms, recover, Store, StoreError, StoreResult, Writer,
};
use super::{chunks::FpMap, locations::chain_keys};

pub fn containers_dir(data_dir: &Path, repo_id: i64) -> PathBuf {
    data_dir
        .join("repos")
        .join(repo_id.to_string())
        .join("containers")
}

pub fn container_path(data_dir: &Path, repo_id: i64, id: u64) -> PathBuf {
    containers_dir(data_dir, repo_id).join(format!("{id:010}.dct"))
}

pub(crate) fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The container a repository's uploads append to, as far as committed.
pub(crate) struct OpenContainer {
    pub(crate) id: u64,
    pub(crate) file: Handle,
    pub(crate) kind: ContainerKind,
    pub(crate) capacity: u32,
    pub(crate) data_offset: u64,
    /// Committed end of data and committed slot count.
    pub(crate) data_end: u64,
    pub(crate) slots: u32,
    pub(crate) created_ms: u64,
    /// Not yet in the `containers` table.
    pub(crate) created: bool,
}

impl OpenContainer {
    pub(crate) fn has_room(&self, stored_len: u64) -> bool {
        self.slots < self.capacity
            && (self.slots == 0
                || self.data_end - self.data_offset + stored_len <= TARGET_DATA_BYTES)
    }
}

impl Store {
    /// The repository's newest container, to append to if it has room. A sealed one gets no
    /// more chunks; one that fails the checks recovery makes is sealed and its chunks are
    /// quarantined (`recover.rs`), so that uploads go on into a new container.
    pub(super) fn reopen_last(
        &self,
        w: &mut Writer,
        repo_id: i64,
    ) -> StoreResult<Option<OpenContainer>> {
        let row = w.begin(repo_id)?.newest_active_container(repo_id)?;
        let Some((c, sealed)) = row else {
            return Ok(None);
        };
        if sealed || c.damage.is_some() {
            return Ok(None);
        }
        let path = container_path(&self.data_dir, repo_id, c.id as u64);
        let (file, h) = match recover::open_for_append(&path, &c) {
            Ok(v) => v,
            Err(recover::Fault::Io(e)) => {
                return Err(StoreError::Io(std::io::Error::other(format!(
                    "container {} of repository {repo_id}: {e}",
                    c.id
                ))))
            }
            Err(recover::Fault::Damaged(reason, _)) => {
                let tx = w.begin(repo_id)?;
                let n = recover::condemn(&*tx, &c, None, &reason)?;
                tx.commit()?;
                eprintln!(
                    "container {} of repository {repo_id} is damaged: {reason}; sealed, {n} chunk(s) quarantined",
                    c.id
                );
                return Ok(None);
            }
        };
        let oc = OpenContainer {
            id: c.id as u64,
            file: Handle::File(file),
            kind: h.kind,
            capacity: h.table_capacity,
            data_offset: c.data_offset as u64,
            data_end: c.data_end as u64,
            slots: c.count,
            created_ms: c.created_ms as u64,
            created: false,
        };
        Ok(
            if oc.slots < oc.capacity && oc.data_end - oc.data_offset < TARGET_DATA_BYTES {
                Some(oc)
            } else {
                None
            },
        )
    }

    /// Writes new container `id` whole and durably (no index row points at it yet): its
    /// table entries (`table`), whose offsets are relative to the data start and made
    /// absolute here, then `data`. Its table has exactly `count` slots, since it never
    /// takes appends. Returns its id and header.
    pub(crate) fn write_new_container(
        &self,
        repo_id: i64,
        id: u64,
        kind: ContainerKind,
        newest_version: i64,
        table: &mut [u8],
        data: &[u8],
    ) -> StoreResult<ContainerHeader> {
        let count = table.len() / TABLE_ENTRY_LEN;
        let mut header = ContainerHeader::new(id, kind, now_ms());
        header.table_capacity = count.max(1) as u32;
        header.data_offset = data_offset_for(header.table_capacity);
        header.newest_version = newest_version;
        let base = header.data_offset;
        for i in 0..count {
            let at = i * TABLE_ENTRY_LEN + 24;
            let rel = u64::from_le_bytes(table[at..at + 8].try_into().unwrap());
            table[at..at + 8].copy_from_slice(&(rel + base).to_le_bytes());
        }
        self.containers.write_whole(
            repo_id,
            id,
            &Whole {
                header: &header.encode(),
                table_at: slot_offset(0),
                table,
                data_at: base,
                data,
            },
        )?;
        Ok(header)
    }

    pub(crate) fn create_container(&self, repo_id: i64, id: u64) -> std::io::Result<OpenContainer> {
        let created_ms = now_ms();
        let header = ContainerHeader::new(id, ContainerKind::Active, created_ms);
        let file = self
            .containers
            .create(repo_id, id, &header.encode(), header.data_offset)?;
        Ok(OpenContainer {
            id,
            file,
            kind: header.kind,
            capacity: header.table_capacity,
            data_offset: header.data_offset,
            data_end: header.data_offset,
            slots: 0,
            created_ms,
            created: true,
        })
    }
}

impl Store {
    /// The repository's containers in id order, with their chunks if `with_chunks`; one
    /// snapshot for both. Each chunk's chain key is worked out over every chunk listed (the
    /// rule of `versions/{id}/locations` with the repository for the version: docs/API.md),
    /// so a client splitting a search over workers keeps the chunks decoded through the
    /// same links on one of them.
    pub fn list_containers(
        &self,
        repo_id: i64,
        with_chunks: bool,
    ) -> StoreResult<Vec<ListedContainer>> {
        let ix = self.snapshot()?;
        let mut tables: HashMap<i64, Vec<ListedChunk>> = HashMap::new();
        let mut base = FpMap::default();
        let mut listed = Vec::new();
        if with_chunks {
            ix.listed_chunks(repo_id, &mut |container_id, chunk| {
                if let Some(b) = chunk.base {
                    base.insert(chunk.fp, b);
                }
                listed.push(chunk.fp);
                tables.entry(container_id).or_default().push(chunk);
                Ok(())
            })?;
        }
        let keys: FpMap<Fingerprint> = listed
            .iter()
            .copied()
            .zip(chain_keys(listed.iter().copied(), &base))
            .collect();
        let mut out = ix.listed_containers(repo_id)?;
        for c in &mut out {
            c.chunks = tables.remove(&c.id).unwrap_or_default();
            c.chain_keys = c.chunks.iter().map(|k| keys[&k.fp]).collect();
        }
        Ok(out)
    }

    /// The committed size of container `id` of the repository.
    pub fn container_size(&self, repo_id: i64, id: i64) -> StoreResult<u64> {
        let size = self.index()?.container_data_end(repo_id, id)?;
        size.map(|n| n as u64)
            .ok_or_else(|| StoreError::NotFound(format!("no container {id} in this repository")))
    }

    /// `len` bytes of container `id` from `start` (within its committed size).
    pub fn read_container(
        &self,
        repo_id: i64,
        id: u64,
        start: u64,
        len: u64,
    ) -> StoreResult<Vec<u8>> {
        // Gone since its size was looked up: the mover or a prune emptied and deleted it.
        let c = self
            .containers
            .open(repo_id, id)?
            .ok_or_else(|| StoreError::NotFound(format!("no container {id} in this repository")))?;
        let len = u32::try_from(len).map_err(|_| StoreError::Internal("range too long".into()))?;
        self.containers
            .read_at(&c, start, len)?
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into())
    }
}
