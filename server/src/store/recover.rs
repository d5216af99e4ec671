//! Startup recovery: makes container files agree with the committed index, and keeps a
//! damaged container from taking anything else down.
//!
//! Every header field and every length that recovery computes with is validated first
//! ([`validate_header`]), with checked arithmetic: a flipped bit in one container is reported,
//! that container is sealed (never appended to again) and its chunks are quarantined
//! (`quarantine.rs`), and the server starts with every other container and repository intact.

use std::{
    collections::HashSet,
    fs::{self, File, OpenOptions},
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
};

use wasm_core::format::container::{
    data_offset_for, slot_offset, ContainerHeader, HEADER_LEN, NEWEST_VERSION_OFFSET,
    TABLE_ENTRY_LEN,
};

pub use super::index::containers::IndexContainer;
use super::index::{IndexRead, IndexWrite, IndexWriter};
use super::{
    backend::ContainerBackend, container_path, containers::fsync_dir, quarantine, StoreResult,
};

/// Checks a container header against the index: every field must be what the server wrote
/// (the "newest version" hint excepted, which recovery rewrites). Returns the decoded header
/// or what is wrong with it.
pub fn validate_header(hb: &[u8], c: &IndexContainer) -> Result<ContainerHeader, String> {
    let h = ContainerHeader::decode(hb).map_err(|e| e.to_string())?;
    if hb[11] != 0 || hb[48..HEADER_LEN].iter().any(|&b| b != 0) {
        return Err("reserved header bytes are not zero".into());
    }
    if h.id != c.id as u64 {
        return Err(format!("the header names container {}", h.id));
    }
    if h.kind as u8 != c.kind {
        return Err(format!(
            "the header says kind {}, the index {}",
            h.kind as u8, c.kind
        ));
    }
    if h.data_offset != c.data_offset as u64 {
        return Err(format!(
            "the header puts the data at {}, the index at {}",
            h.data_offset, c.data_offset
        ));
    }
    if data_offset_for(h.table_capacity) != h.data_offset {
        return Err(format!(
            "a table of {} slots does not end at data offset {}",
            h.table_capacity, h.data_offset
        ));
    }
    if h.table_capacity < c.count {
        return Err(format!(
            "the table has {} slots but {} chunks are committed",
            h.table_capacity, c.count
        ));
    }
    if h.created_ms != c.created_ms as u64 {
        return Err(format!(
            "the header's creation time {} differs from the index's {}",
            h.created_ms, c.created_ms
        ));
    }
    if c.data_end < c.data_offset {
        return Err(format!(
            "the index puts the data end {} before the data offset {}",
            c.data_end, c.data_offset
        ));
    }
    Ok(h)
}

/// Seals a damaged container and quarantines its chunks (all of them, or those past `past`
/// bytes), in the caller's transaction. Returns how many chunks were quarantined.
pub fn condemn(
    ix: &dyn IndexWrite,
    c: &IndexContainer,
    past: Option<u64>,
    reason: &str,
) -> StoreResult<usize> {
    ix.seal_damaged_container(c.id, reason)?;
    Ok(quarantine::quarantine_container(ix, c.repo_id, c.id as u64, past, reason)?.len())
}

/// Makes container files agree with the committed index (read through `ix`; each damaged
/// container is set aside in a transaction of its own of `writer`). Returns what it
/// changed. An index error or a file system error is fatal (it says nothing of the
/// containers' bytes); a damaged container is reported and set aside.
pub fn recover(
    ix: &dyn IndexRead,
    writer: &dyn IndexWriter,
    data_dir: &Path,
) -> Result<Vec<String>, String> {
    let mut report = Vec::new();
    let rows = ix.all_containers().map_err(|e| e.to_string())?;
    let mut known: HashSet<PathBuf> = HashSet::new();
    for c in rows {
        let path = container_path(data_dir, c.repo_id, c.id as u64);
        known.insert(path.clone());
        if c.damage.is_some() {
            continue; // set aside earlier; its file is kept as it is, for inspection
        }
        match recover_one(&path, &c, &mut report) {
            Ok(()) => {}
            Err(Fault::Io(e)) => {
                return Err(format!(
                    "container {} of repository {} ({}): {e}. Nothing was set aside; fix the \
                     cause and start again",
                    c.id,
                    c.repo_id,
                    path.display()
                ))
            }
            Err(Fault::Damaged(reason, past)) => {
                let n = writer
                    .begin()
                    .and_then(|tx| {
                        let n = condemn(&*tx, &c, past, &reason)?;
                        tx.commit()?;
                        Ok(n)
                    })
                    .map_err(|e| e.to_string())?;
                report.push(format!(
                    "container {} (repository {}) is damaged: {reason}; sealed, {n} chunk(s) \
                     quarantined",
                    c.id, c.repo_id
                ));
            }
        }
    }
    // Container files that no committed row refers to were never acknowledged (a crash
    // before their first commit), or a commit had just dropped them: they are removed. But
    // not when one has an id this index never handed out: then the index is not the one the
    // files were written with, every file would look unacknowledged to it, and removing them
    // would lose the repository.
    let mut orphans: Vec<(PathBuf, u64)> = Vec::new();
    if let Ok(repos) = fs::read_dir(data_dir.join("repos")) {
        for repo in repos.flatten() {
            let Ok(files) = fs::read_dir(repo.path().join("containers")) else {
                continue;
            };
            for f in files.flatten() {
                let p = f.path();
                if p.extension().is_some_and(|x| x == "dct") && !known.contains(&p) {
                    // A name the server does not write is not the server's to remove.
                    if let Some(id) = p.file_stem().and_then(|s| s.to_str()?.parse().ok()) {
                        orphans.push((p, id));
                    }
                }
            }
        }
    }
    let handed_out = ix.container_ids_handed_out().map_err(|e| e.to_string())?;
    if let Some((p, id)) = orphans.iter().find(|(_, id)| *id > handed_out) {
        return Err(foreign_index(&p.display().to_string(), *id, handed_out));
    }
    let mut dirs: HashSet<PathBuf> = HashSet::new();
    for (p, _) in orphans {
        match fs::remove_file(&p) {
            Ok(()) => {
                report.push(format!(
                    "removed uncommitted container file {}",
                    p.display()
                ));
                dirs.extend(p.parent().map(Path::to_path_buf));
            }
            Err(e) => report.push(format!(
                "could not remove uncommitted container file {}: {e}",
                p.display()
            )),
        }
    }
    for dir in dirs {
        if let Err(e) = fsync_dir(&dir) {
            report.push(format!("could not fsync {}: {e}", dir.display()));
        }
    }
    Ok(report)
}

/// Why the server does not start on an index that did not write its containers.
fn foreign_index(container: &str, id: u64, handed_out: u64) -> String {
    format!(
        "container {container} has id {id}, but this index has handed out container ids only \
         up to {handed_out}: it is not the index these containers were written with (another \
         DATABASE_URL, or a missing, replaced or older ditto.sqlite3). Nothing was removed; \
         start the server with their own index"
    )
}

/// How old a container that no index row names must be before the sweep deletes it, when
/// containers are objects (`DITTO_ORPHAN_GRACE_S`, default 15 min): servers sharing the
/// bucket put a container before committing its row, and a sweep must not take it then.
fn orphan_grace_ms() -> u64 {
    std::env::var("DITTO_ORPHAN_GRACE_S")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(900)
        * 1000
}

/// Startup recovery when containers are objects: they are written whole before their
/// rows commit and never changed, so there is nothing to repair; an object that no
/// committed row names (a crash between the put and the commit, or between a commit that
/// dropped rows and the delete) was never acknowledged or is no longer needed, and is
/// deleted once older than the grace period.
pub fn sweep_objects(
    writer: &dyn IndexWriter,
    backend: &dyn ContainerBackend,
) -> Result<Vec<String>, String> {
    let mut report = Vec::new();
    let grace = orphan_grace_ms();
    // Every repository's prefix, not only those the index knows: a server given the wrong
    // index knows none of them, and would write over their objects once it creates one.
    let listed = backend
        .list()
        .map_err(|e| format!("listing the containers: {e}"))?;
    // Read after the listing, so a container another server put and committed meanwhile is
    // known and its id handed out; and in a transaction that may touch any repository,
    // which starts once every write transaction under way has ended: a server killed as it
    // committed has its commit completed by the database, not dropped, and its containers
    // are then known too. The transaction is held until the deletes are done: a commit that
    // names a container it put checks, under its repository's lock, that the container is
    // still stored (`Store::still_stored`), so it either commits before this decision or
    // sees the delete.
    let ix = writer.begin().map_err(|e| e.to_string())?;
    let handed_out = ix.container_ids_handed_out().map_err(|e| e.to_string())?;
    let known: HashSet<(i64, u64)> = ix
        .all_containers()
        .map_err(|e| e.to_string())?
        .iter()
        .map(|c| (c.repo_id, c.id as u64))
        .collect();
    if let Some((repo_id, id, _)) = listed.iter().find(|(_, id, _)| *id > handed_out) {
        return Err(foreign_index(
            &format!("{id} of repository {repo_id}"),
            *id,
            handed_out,
        ));
    }
    for (repo_id, id, age) in listed {
        if known.contains(&(repo_id, id)) || age < grace {
            continue;
        }
        match backend.delete(repo_id, id) {
            Ok(()) => report.push(format!(
                "removed container {id} of repository {repo_id}: no index row names it"
            )),
            Err(e) => report.push(format!(
                "could not remove container {id} of repository {repo_id}: {e}"
            )),
        }
    }
    drop(ix); // nothing was written: rolled back
    Ok(report)
}

/// What stops recovery (or an append) from using a container.
#[derive(Debug)]
pub enum Fault {
    /// The container is damaged: why, and (when given) the byte count past which its chunks
    /// are lost. It is sealed and those chunks are quarantined.
    Damaged(String, Option<u64>),
    /// The file system failed (permissions, too many open files, an I/O error, no space):
    /// that says nothing of the container's bytes, so nothing is sealed or quarantined.
    Io(String),
}

impl Fault {
    /// An error reading the container: its file missing, or too short for what is read,
    /// is damage; any other error is the file system's.
    fn reading(e: std::io::Error, what: &str) -> Fault {
        match e.kind() {
            std::io::ErrorKind::NotFound => Fault::Damaged("its file is missing".into(), None),
            std::io::ErrorKind::UnexpectedEof => {
                Fault::Damaged(format!("its file is too short for {what}"), None)
            }
            _ => Fault::Io(format!("cannot read {what}: {e}")),
        }
    }

    /// An error writing the container: always the file system's.
    fn writing(e: std::io::Error, what: &str) -> Fault {
        Fault::Io(format!("cannot {what}: {e}"))
    }
}

/// Opens a container file for reading and writing (at failure point `point` the open fails
/// as with an I/O error) and checks what recovery and an append both need: its header
/// against the index, and no committed byte missing. Answers the file, its header and its
/// length.
fn open_checked(
    path: &Path,
    c: &IndexContainer,
    point: &str,
) -> Result<(File, ContainerHeader, u64), Fault> {
    if super::crashpoint::fails(point) {
        return Err(Fault::reading(
            std::io::Error::other(format!("failure point {point} (DITTO_TEST_FAIL_AT)")),
            "it",
        ));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| Fault::reading(e, "it"))?;
    let len = file
        .metadata()
        .map_err(|e| Fault::reading(e, "its size"))?
        .len();
    let mut hb = [0u8; HEADER_LEN];
    file.read_exact_at(&mut hb, 0)
        .map_err(|e| Fault::reading(e, "its header"))?;
    let h = validate_header(&hb, c).map_err(|e| Fault::Damaged(e, None))?;
    let data_end = c.data_end as u64;
    if len < data_end {
        // Committed bytes are gone (the disk lied about fsync, or the file was cut): the
        // chunks that lay there are damaged, and the container takes no more appends.
        return Err(Fault::Damaged(
            format!(
                "its file is {} bytes shorter than committed",
                data_end - len
            ),
            Some(len),
        ));
    }
    Ok((file, h, len))
}

fn recover_one(path: &Path, c: &IndexContainer, report: &mut Vec<String>) -> Result<(), Fault> {
    let id = c.id;
    let (file, h, len) = open_checked(path, c, "recover:open")?;
    let data_end = c.data_end as u64;
    let mut changed = false;
    if len > data_end {
        file.set_len(data_end)
            .map_err(|e| Fault::writing(e, "cut its uncommitted tail"))?;
        report.push(format!(
            "container {id}: cut {} uncommitted bytes",
            len - data_end
        ));
        changed = true;
    }
    // Zero table slots past the committed count (validated: count <= capacity).
    let from = slot_offset(c.count);
    let to = slot_offset(h.table_capacity);
    let mut table = vec![0u8; (to - from) as usize];
    file.read_exact_at(&mut table, from)
        .map_err(|e| Fault::reading(e, "its table"))?;
    if let Some(last) = table.iter().rposition(|&b| b != 0) {
        let n = last / TABLE_ENTRY_LEN + 1;
        file.write_all_at(&vec![0u8; n * TABLE_ENTRY_LEN], from)
            .map_err(|e| Fault::writing(e, "clear its uncommitted table slots"))?;
        report.push(format!(
            "container {id}: cleared {n} uncommitted table slots"
        ));
        changed = true;
    }
    if h.newest_version != c.newest {
        file.write_all_at(&c.newest.to_le_bytes(), NEWEST_VERSION_OFFSET as u64)
            .map_err(|e| Fault::writing(e, "rewrite its header"))?;
        changed = true;
    }
    if changed {
        file.sync_all().map_err(|e| Fault::writing(e, "fsync it"))?;
    }
    Ok(())
}

/// Opens a container for appending after checking it as recovery would; `Err` says why it
/// must be set aside instead, or that the file system failed.
pub fn open_for_append(path: &Path, c: &IndexContainer) -> Result<(File, ContainerHeader), Fault> {
    open_checked(path, c, "append:open").map(|(file, h, _)| (file, h))
}
