//! The repository store: containers (behind `backend::ContainerBackend`), the index
//! (behind the traits of `index`, SQLite by default), recovery. It speaks in storage terms
//! only (`StoreError`, plain values); `crate::api` turns them into HTTP.
//!
//! Write rule (docs/FORMAT.md, "Writing and recovery rules"): chunk bytes are appended to
//! container files and fsynced (or put as whole objects), then the index rows are
//! committed in one index transaction, then the caller is answered. The index is the
//! authority on what is committed; startup recovery makes the containers agree with it.
//! One `IndexWriter`, behind a mutex, makes every index change of this process; reads and
//! snapshots come from the `Index`. Replicas sharing a PostgreSQL index and a bucket are
//! docs/STORAGE.md "Replicas".
//!
//! One module per concept: `auth` (repositories and tokens), `backend` (the container
//! operations: local disk or object storage), `index` (the index traits and their SQLite
//! and PostgreSQL backends), `containers` (container files and the open container), `ingest` (verifying and
//! storing uploaded chunks), `chunks` (finding, reading and verifying stored chunks),
//! `versions`, `stats`, `verify`, `search` (DedupSearch run natively), `quarantine`,
//! `recover` (startup recovery), and the
//! storage engine of docs/STORAGE.md: `layout`, `mover`, `expiry`, `retention`, `gc`.

pub mod auth;
pub mod backend;
pub mod chunks;
pub mod containers;
pub mod crashpoint;
pub mod delta;
pub mod dictionary;
mod error;
pub mod expiry;
pub mod frames;
pub mod gc;
pub mod index;
pub mod ingest;
pub mod layout;
pub mod locations;
pub mod manifest_blob;
pub mod mover;
pub mod quarantine;
pub mod recompress;
pub mod recover;
pub mod retention;
pub mod search;
pub mod stats;
pub mod verify;
pub mod versions;

pub use auth::{add_token, create_repo, new_token, repo_id, token_access, valid_repo_name, Scope};
pub use chunks::Lookup;
pub use containers::container_path;
pub use error::{BadChunk, StoreError, StoreResult};
pub use ingest::verify_entries;
pub use stats::repo_stats;

use std::{
    collections::{HashMap, HashSet},
    fs,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Mutex, MutexGuard, RwLock,
    },
    time::{SystemTime, UNIX_EPOCH},
};

use wasm_core::hash::{to_hex, Fingerprint};

use chunks::FpLengths;
use containers::OpenContainer;
use index::{Index, IndexRead, IndexTx, IndexWrite, IndexWriter};

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

struct Writer {
    ix: Box<dyn IndexWriter>,
    open: HashMap<i64, OpenContainer>,
}

impl Writer {
    /// Starts a write transaction of the index that touches repository `repo_id` only.
    fn begin(&self, repo_id: i64) -> StoreResult<Box<dyn IndexTx + '_>> {
        self.ix.begin_repo(repo_id)
    }

    /// Starts a write transaction of a maintenance pass in repository `repo_id`: refused if
    /// the pass's lease has ended ([`IndexTx::check_lease`]).
    fn begin_fenced(
        &self,
        repo_id: i64,
        lease: &index::Lease,
    ) -> StoreResult<Box<dyn IndexTx + '_>> {
        let tx = self.ix.begin_repo(repo_id)?;
        tx.check_lease(lease)?;
        Ok(tx)
    }

    /// Starts a write transaction of the index that may touch any repository.
    fn begin_any(&self) -> StoreResult<Box<dyn IndexTx + '_>> {
        self.ix.begin()
    }

    /// Forgets the repository's open container if it is among `dropped` (containers whose
    /// rows were just deleted): the next upload opens the newest one the index has.
    fn close_if_dropped(&mut self, repo_id: i64, mut dropped: impl Iterator<Item = i64>) {
        if let Some(open) = self.open.get(&repo_id) {
            let id = open.id as i64;
            if dropped.any(|d| d == id) {
                self.open.remove(&repo_id);
            }
        }
    }
}

pub struct Store {
    data_dir: PathBuf,
    /// The index's read side (snapshots and reads); the writer holds its write side.
    ix: Box<dyn Index>,
    containers: Box<dyn backend::ContainerBackend>,
    writer: Mutex<Writer>,
    /// Exact in-memory copy of each repository's committed fingerprints with their raw
    /// lengths (loaded on first use, extended after each commit), for fast
    /// `chunks/missing` and `chunks/lengths` answers. Each set is tagged with the epochs it
    /// was loaded at (`chunks::Epochs`): a chunk quarantined or deleted since (by this
    /// process, by `check`, or by another server sharing the index) makes it stale.
    fp_cache: RwLock<HashMap<i64, (chunks::Epochs, FpLengths)>>,
    /// Held by one maintenance pass (mover, garbage collection) at a time: two would copy
    /// the same chunks. Across servers sharing the index, the index's maintenance lease
    /// does the same ([`Store::maintenance`]).
    maintenance: Mutex<()>,
    /// Repositories waiting for the background mover, and whether its thread runs.
    mover_queue: Mutex<HashSet<i64>>,
    mover_running: AtomicBool,
    /// What the mover and compaction did per repository since the server started.
    mover_totals: Mutex<HashMap<i64, mover::Moved>>,
    /// The last delta pass of each repository since the server started.
    delta_last: Mutex<HashMap<i64, delta::DeltaReport>>,
    /// When this store was opened (unix ms): in a repository with no record of the delta
    /// pass's progress, the pass takes the versions committed since, and the newest one
    /// before.
    opened_ms: i64,
    /// Decoded delta bases shared by the store's reads (`verify::BaseCache`).
    base_cache: verify::BaseCache,
    /// Decoded chunks kept between the server's searches (`search::SearchCache`).
    search_cache: search::SearchCache,
    /// Each repository's committed raw bytes, summed once per state (`stats::CommittedRaw`).
    committed_raw: stats::CommittedRaw,
    /// When a backup last asked, uploaded or committed (unix ms): the background mover
    /// waits for a quiet moment.
    last_backup_ms: AtomicU64,
}

impl Store {
    /// Opens the store and runs crash recovery; the index is PostgreSQL's at `database_url`
    /// when given, else the embedded SQLite file.
    pub fn open(data_dir: &Path, database_url: Option<&str>) -> Result<Store, String> {
        fs::create_dir_all(data_dir.join("repos"))
            .map_err(|e| format!("cannot create {}: {e}", data_dir.display()))?;
        // The entry of `repos` is durable before anything in it is acknowledged: with
        // PostgreSQL nothing else syncs the data directory (SQLite's journal does). So is the
        // data directory's own where the parent may be read (it was perhaps just created).
        containers::fsync_dir(data_dir)
            .map_err(|e| format!("cannot sync {}: {e}", data_dir.display()))?;
        if let Some(parent) = data_dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            let _ = containers::fsync_dir(parent);
        }
        let db = |e: StoreError| format!("database: {e}");
        let containers = backend::from_env(data_dir)?;
        let (ix, writer) = index::open(data_dir, database_url).map_err(db)?;
        // Replicas share an index only when their containers live in one object store.
        writer.claim(!containers.appends()).map_err(db)?;
        let mut report = if containers.appends() {
            recover::recover(&*ix.read().map_err(db)?, &*writer, data_dir)
        } else {
            recover::sweep_objects(&*writer, &*containers)
        }
        .map_err(|e| format!("recovery: {e}"))?;
        let damaged =
            quarantine::recount_unknown(&*ix.read().map_err(db)?, &*writer).map_err(db)?;
        if damaged > 0 {
            report.push(format!(
                "{damaged} version(s) reference chunks that are not stored: listed as damaged"
            ));
        }
        if !report.is_empty() {
            eprintln!("recovery: {}", report.join("; "));
        }
        Ok(Store {
            data_dir: data_dir.to_path_buf(),
            ix,
            containers,
            fp_cache: RwLock::new(HashMap::new()),
            maintenance: Mutex::new(()),
            mover_queue: Mutex::new(HashSet::new()),
            mover_running: AtomicBool::new(false),
            mover_totals: Mutex::new(HashMap::new()),
            delta_last: Mutex::new(HashMap::new()),
            opened_ms: now_ms() as i64,
            base_cache: verify::BaseCache::default(),
            search_cache: search::SearchCache::from_env()?,
            committed_raw: stats::CommittedRaw::default(),
            last_backup_ms: AtomicU64::new(0),
            writer: Mutex::new(Writer {
                ix: writer,
                open: HashMap::new(),
            }),
        })
    }

    /// Notes that a backup is at work (a missing query, an upload, a commit).
    fn backup_activity(&self) {
        self.last_backup_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// Waits until this is the only maintenance pass running on the index, in this process
    /// and in any other server sharing it; holds that until dropped.
    fn maintenance(&self) -> StoreResult<(MutexGuard<'_, ()>, index::Lease)> {
        let local = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        Ok((local, self.ix.maintenance_lease()?))
    }

    fn writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The writer, for a write: refused if the index cannot make writes durable any more
    /// (SQLite: its write-ahead log is gone, `index/sqlite/wal.rs`).
    fn writer_for_write(&self) -> StoreResult<MutexGuard<'_, Writer>> {
        let w = self.writer();
        w.ix.check_writable()?;
        Ok(w)
    }

    /// Quarantines damaged copies found by a read (`quarantine.rs`); returns the
    /// fingerprints quarantined now.
    pub fn quarantine_found(
        &self,
        repo_id: i64,
        found: &[quarantine::Found],
    ) -> StoreResult<Vec<Fingerprint>> {
        if found.is_empty() {
            return Ok(Vec::new());
        }
        for f in found {
            eprintln!(
                "damaged chunk {} in container {} of repository {repo_id}: {}; quarantined",
                to_hex(&f.fp),
                f.container_id,
                f.reason
            );
        }
        let mut w = self.writer_for_write()?;
        let tx = w.begin(repo_id)?;
        let moved = quarantine::quarantine(&*tx, repo_id, found)?;
        tx.commit()?;
        // The open container may be the damaged one: reloaded (and checked) on next use.
        w.open.remove(&repo_id);
        Ok(moved)
    }

    /// Verifies the stored chunks of the containers in `subset` and quarantines the damaged
    /// ones (the verify endpoint).
    pub fn verify(&self, repo_id: i64, subset: verify::Subset) -> StoreResult<verify::Verified> {
        // Under the maintenance lease: the mover, compaction and the delta pass delete the
        // containers they empty, and a container gone between the snapshot and its read
        // would be reported (and quarantined) as damaged.
        let _maint = self.maintenance()?;
        let v = verify::verify_repo(&*self.containers, &*self.snapshot()?, repo_id, subset)?;
        self.quarantine_found(repo_id, &v.damaged)?;
        Ok(v)
    }

    /// What `token` gives access to, and the id of repository `repo`, read in one snapshot.
    pub fn access(
        &self,
        token: &str,
        repo: &str,
    ) -> StoreResult<(Option<auth::TokenAccess>, Option<i64>)> {
        let ix = self.snapshot()?;
        // A name no repository can have is not looked up: PostgreSQL refuses a NUL in text.
        let id = if auth::valid_repo_name(repo) {
            repo_id(&*ix, repo)?
        } else {
            None
        };
        Ok((token_access(&*ix, token)?, id))
    }

    /// Every repository's id.
    pub fn repo_ids(&self) -> StoreResult<Vec<i64>> {
        self.index()?.repo_ids()
    }

    /// Runs `f` in one write transaction (repository and token management), committed if
    /// it succeeds.
    pub fn with_tx<T>(&self, f: impl FnOnce(&dyn IndexWrite) -> StoreResult<T>) -> StoreResult<T> {
        let w = self.writer_for_write()?;
        let tx = w.begin_any()?;
        let out = f(&*tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// Reads of the index, each consistent on its own.
    fn index(&self) -> StoreResult<Box<dyn IndexRead + '_>> {
        self.ix.read()
    }

    /// Reads that all see one state of the index, until dropped.
    fn snapshot(&self) -> StoreResult<Box<dyn IndexRead + '_>> {
        self.ix.snapshot()
    }

    /// Whether container `id`, written whole by this server before the commit that is to
    /// name it, is still stored. On object storage a replica starting meanwhile may have
    /// taken it for an orphan (no row names it yet) and deleted it; that sweep decides and
    /// deletes under the index's exclusive write lock (`recover::sweep_objects`), so the
    /// check, made in the committing transaction, sees what it did. Nothing else deletes a
    /// local container file this server wrote.
    fn still_stored(&self, repo_id: i64, id: u64) -> StoreResult<bool> {
        if self.containers.appends() {
            return Ok(true);
        }
        Ok(self.containers.open(repo_id, id)?.is_some())
    }

    /// Compacts the index at a clean stop (SQLite: folds the write-ahead log into the
    /// database file, otherwise up to ~4 MiB of committed pages stay in
    /// `ditto.sqlite3-wal`). Committed data is durable either way.
    pub fn checkpoint(&self) -> StoreResult<()> {
        self.ix.close_idle();
        self.writer().ix.checkpoint()
    }
}
