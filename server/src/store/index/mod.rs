//! The index: the store's record of repositories and tokens, containers, chunk locations,
//! versions and quarantine (docs/FORMAT.md "Index", docs/STORAGE.md "Backends"). Store
//! modules speak to it only through the traits here, never in SQL. Two backends implement
//! them: the embedded SQLite of [`sqlite`] and [`postgres`] (`DATABASE_URL`); the contract
//! tests (`contract.rs`) and the server suite run against both.
//!
//! The traits are split by concept, one file each, as the store is: [`repos`] (repositories
//! and tokens), [`chunks`] (chunk locations), [`containers`] (container rows),
//! [`versions`] (versions and their manifests), [`quarantine`] (damaged copies) and
//! [`maintenance`] (what the layout mover, expiry and garbage collection ask). Each concept
//! has a read trait and a write trait; [`IndexRead`] and [`IndexWrite`] gather them.
//!
//! What every backend guarantees (docs/STORAGE.md "Backends"):
//! - one writer at a time ([`IndexWriter`], held under the store's writer lock); its
//!   changes become visible all together at [`IndexTx::commit`] and survive a crash once
//!   `commit` returns, or not at all;
//! - [`Index::snapshot`] reads one consistent state across statements, however many
//!   commits happen meanwhile; [`Index::read`] is consistent per call only (cheaper);
//! - repository, version and container ids only grow and are never reused (version ids
//!   order the B_ID rule; [`IndexWriter::next_container_id`] hands out container ids, so
//!   that servers sharing one index never pick the same);
//! - write transactions of one repository are serialised, also across the processes of
//!   servers sharing one index (PostgreSQL: each starts by taking its repository's
//!   transaction-scoped advisory lock; one that may touch any repository takes them all),
//!   so a store's write checks its state exactly as with one process;
//! - one serving writer per index, or several when their containers live in one shared
//!   object store ([`IndexWriter::claim`]); one maintenance pass at a time across them
//!   ([`Index::maintenance_lease`]).
//!
//! What every caller keeps to: a read that streams a repository's rows to a callback
//! (`chunk_rows`, `listed_chunks`, `quarantined_rows`) holds its handle's connection until
//! it returns, so the callback never uses that handle (on PostgreSQL the connection is
//! borrowed, and the nested call would panic); it collects what it needs, and the caller
//! reads after. `container_chunks`, one container's rows, is read whole first, and its
//! callback may read the index.

pub mod chunks;
pub mod containers;
#[cfg(test)]
mod contract;
pub mod maintenance;
mod pool;
pub mod postgres;
pub mod quarantine;
pub mod repos;
pub mod sqlite;
pub mod versions;

pub use chunks::{ChunkRead, ChunkWrite};
pub use containers::{ContainerRead, ContainerWrite};
pub use maintenance::{MaintenanceRead, MaintenanceWrite};
pub use quarantine::{QuarantineRead, QuarantineWrite};
pub use repos::{RepoRead, RepoWrite};
pub use versions::{VersionRead, VersionWrite};

use std::path::Path;

use wasm_core::hash::Fingerprint;

use super::StoreResult;

/// Every read the store makes of the index.
pub trait IndexRead:
    RepoRead + ChunkRead + ContainerRead + VersionRead + QuarantineRead + MaintenanceRead
{
}

impl<T> IndexRead for T where
    T: RepoRead
        + ChunkRead
        + ContainerRead
        + VersionRead
        + QuarantineRead
        + MaintenanceRead
        + ?Sized
{
}

/// Every change the store makes to the index (inside a transaction; reads see the
/// transaction's own changes).
pub trait IndexWrite:
    IndexRead
    + RepoWrite
    + ChunkWrite
    + ContainerWrite
    + VersionWrite
    + QuarantineWrite
    + MaintenanceWrite
{
}

impl<T> IndexWrite for T where
    T: IndexRead
        + RepoWrite
        + ChunkWrite
        + ContainerWrite
        + VersionWrite
        + QuarantineWrite
        + MaintenanceWrite
        + ?Sized
{
}

/// A write transaction: nothing of it is visible to readers, or survives a crash, before
/// `commit`; dropping it uncommitted rolls it back.
pub trait IndexTx: IndexWrite {
    fn commit(self: Box<Self>) -> StoreResult<()>;
    /// Refuses ([`StoreError::LeaseLost`]) a transaction of a maintenance pass whose lease
    /// has ended under it (PostgreSQL: its connection closed, and another server may have
    /// started a pass). Checked after the transaction's locks: a lease taken since then
    /// waits for this transaction to end ([`Index::maintenance_lease`]), so a pass that
    /// passed the check commits before the next pass reads anything.
    fn check_lease(&self, lease: &Lease) -> StoreResult<()>;
}

/// The shared, read side of an index: any number of readers at once.
pub trait Index: Send + Sync {
    /// Reads, each consistent on its own.
    fn read(&self) -> StoreResult<Box<dyn IndexRead + '_>>;
    /// Reads that all see one state of the index (a read transaction), until dropped.
    fn snapshot(&self) -> StoreResult<Box<dyn IndexRead + '_>>;
    /// Waits until this process is the only one running maintenance (the mover, expiry,
    /// garbage collection) on the index, and holds that until the lease is dropped, or the
    /// process dies (PostgreSQL: a session advisory lock on a connection of its own, so a
    /// killed replica's lease ends with its connection). Once held, it waits for the write
    /// transactions in progress on the index to end, so that a pass whose lease ended
    /// unnoticed cannot commit after this one started ([`IndexTx::check_lease`]). SQLite:
    /// one process per index already, nothing to wait for.
    fn maintenance_lease(&self) -> StoreResult<Lease>;
    /// Closes the connections no read is using (a clean stop, before the writer's
    /// [`IndexWriter::checkpoint`]).
    fn close_idle(&self);
}

/// Held while a maintenance pass runs; dropping it lets another process's pass start.
pub struct Lease {
    _held: Option<Box<dyn Send>>,
    holder: Option<i32>,
}

impl Lease {
    /// A lease that `held` keeps until dropped (`None`: nothing to hold), and that
    /// `holder` names to the index (PostgreSQL: the backend process of its connection).
    pub fn new(held: Option<Box<dyn Send>>, holder: Option<i32>) -> Lease {
        Lease {
            _held: held,
            holder,
        }
    }

    /// Who holds the lease, as the index knows it (`None`: a lease nothing can take away).
    pub fn holder(&self) -> Option<i32> {
        self.holder
    }
}

/// The single writer of an index (the store holds it under its writer lock).
pub trait IndexWriter: Send {
    /// Starts a write transaction that may touch any repository. One at a time per writer:
    /// the caller serialises (the store's writer lock); across the writers sharing the
    /// index, it runs alone.
    fn begin(&self) -> StoreResult<Box<dyn IndexTx + '_>>;
    /// Starts a write transaction that touches only repository `repo_id` (besides handing
    /// out ids): across the writers sharing the index it runs alone among those of the same
    /// repository and beside those of others. Every invariant the store's transactions
    /// check is one repository's.
    fn begin_repo(&self, repo_id: i64) -> StoreResult<Box<dyn IndexTx + '_>> {
        let _ = repo_id;
        self.begin()
    }
    /// Makes this writer a store writer of the index until it is dropped, or fails if
    /// another server's claim excludes it. Without `shared`, this one must be alone
    /// (containers on its local disk); with `shared`, other shared claims may hold too
    /// (replicas whose containers live in one object store). SQLite: the data directory's
    /// lock already makes it alone, the database being inside it; PostgreSQL: a session
    /// advisory lock, exclusive or shared, since several data directories can name one
    /// database.
    fn claim(&self, shared: bool) -> StoreResult<()>;
    /// A container id no server of the index has had (outside any transaction).
    fn next_container_id(&self) -> StoreResult<u64>;
    /// Refuses writes the backend can no longer make durable (SQLite: its write-ahead log
    /// was removed under the running server).
    fn check_writable(&self) -> StoreResult<()>;
    /// Compacts what a clean stop can compact (SQLite: folds the write-ahead log into the
    /// database file). Committed data is durable either way.
    fn checkpoint(&self) -> StoreResult<()>;
}

/// Opens the index of a data directory: PostgreSQL when `database_url` is given (the
/// server's `DATABASE_URL`), otherwise the embedded SQLite file in `data_dir`.
pub fn open(
    data_dir: &Path,
    database_url: Option<&str>,
) -> StoreResult<(Box<dyn Index>, Box<dyn IndexWriter>)> {
    Ok(match database_url {
        Some(url) => {
            let (ix, w) = postgres::open(url)?;
            (Box::new(ix), Box::new(w))
        }
        None => {
            let (ix, w) = sqlite::open(data_dir)?;
            (Box::new(ix), Box::new(w))
        }
    })
}

/// A fingerprint column as a backend reads it (always 20 bytes as written; anything else
/// reads as zeros, which matches no chunk).
fn fp_of(blob: Vec<u8>) -> Fingerprint {
    blob.try_into().unwrap_or([0; 20])
}
