//! The embedded index backend: one SQLite database (`ditto.sqlite3`, WAL mode,
//! `synchronous=FULL`) in the data directory. One writer connection makes every change;
//! readers come from a small pool of read-only connections. Every SQL statement of the
//! server is in this module, one file per concept of [`super`].

mod chunks;
mod containers;
mod maintenance;
mod quarantine;
mod repos;
mod schema;
mod versions;
mod wal;

use std::{ops::Deref, path::Path};

use rusqlite::{Connection, Transaction, TransactionBehavior};

use schema::{db_path, open_ro, open_rw};

use super::{
    fp_of,
    pool::{Pool, Pooled},
    ContainerRead, Index, IndexRead, IndexTx, IndexWriter, Lease,
};
use crate::store::{StoreError, StoreResult};

/// The index traits, implemented over any SQLite connection: a pooled reader, a read or
/// write transaction, or a plain connection (the CLI's).
pub struct Sql<C>(pub C);

/// The stored manifest in columns `at` (`manifest_base`) and `at + 1` (`manifest`).
fn stored_manifest(
    r: &rusqlite::Row<'_>,
    at: usize,
) -> rusqlite::Result<super::versions::StoredManifest> {
    Ok(super::versions::StoredManifest {
        base: r.get(at)?,
        blob: r.get(at + 1)?,
    })
}

impl<C: Deref<Target = Connection>> Sql<C> {
    fn c(&self) -> &Connection {
        &self.0
    }
}

impl IndexTx for Sql<Transaction<'_>> {
    fn commit(self: Box<Self>) -> StoreResult<()> {
        Ok(self.0.commit()?)
    }
    /// One process holds the index (the data directory's lock): its lease cannot end.
    fn check_lease(&self, _lease: &Lease) -> StoreResult<()> {
        Ok(())
    }
}

/// A pooled reader inside a read transaction (`BEGIN` … `ROLLBACK` when dropped).
pub struct ReadTx<'a>(Pooled<'a, Connection>);

impl<'a> ReadTx<'a> {
    fn begin(conn: Pooled<'a, Connection>) -> rusqlite::Result<ReadTx<'a>> {
        conn.execute_batch("BEGIN DEFERRED")?;
        Ok(ReadTx(conn))
    }
}

impl Deref for ReadTx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.0
    }
}

impl Drop for ReadTx<'_> {
    fn drop(&mut self) {
        let _ = self.0.execute_batch("ROLLBACK");
    }
}

/// The read side: the pool of read-only connections.
pub struct SqliteIndex {
    pool: Pool<Connection>,
}

impl Index for SqliteIndex {
    fn read(&self) -> StoreResult<Box<dyn IndexRead + '_>> {
        Ok(Box::new(Sql(self.pool.get()?)))
    }
    fn snapshot(&self) -> StoreResult<Box<dyn IndexRead + '_>> {
        Ok(Box::new(Sql(ReadTx::begin(self.pool.get()?)?)))
    }
    fn maintenance_lease(&self) -> StoreResult<Lease> {
        Ok(Lease::new(None, None))
    }
    fn close_idle(&self) {
        self.pool.close_idle();
    }
}

/// The writer connection, and the guard of its write-ahead log (`wal.rs`).
pub struct SqliteWriter {
    conn: Connection,
    wal: wal::WalGuard,
    /// The last container id handed out (0: not read from the database yet); one process
    /// writes the database, so a counter in memory is enough between the reservations.
    last_container_id: std::cell::Cell<u64>,
    /// The highest id the database has recorded as handed out (`counters`), at least
    /// `last_container_id`: ids up to it are this process's to hand out.
    reserved_container_id: std::cell::Cell<u64>,
}

/// Container ids reserved per write of `counters`: a restart skips at most this many.
const CONTAINER_ID_BLOCK: u64 = 256;

impl IndexWriter for SqliteWriter {
    fn begin(&self) -> StoreResult<Box<dyn IndexTx + '_>> {
        // IMMEDIATE takes the write lock at the start, waiting out another process's writer
        // (the CLI beside a running server) under the busy timeout. A deferred transaction
        // that reads first and writes later gets SQLITE_BUSY at once, with no wait, when
        // the other process commits in between: WAL mode cannot upgrade a stale snapshot.
        Ok(Box::new(Sql(Transaction::new_unchecked(
            &self.conn,
            TransactionBehavior::Immediate,
        )?)))
    }
    fn claim(&self, _shared: bool) -> StoreResult<()> {
        Ok(())
    }
    fn next_container_id(&self) -> StoreResult<u64> {
        if self.last_container_id.get() == 0 {
            // Both: a database from before `counters` has only its containers' ids.
            let sql = Sql(&self.conn);
            let max = sql.max_container_id()?.max(sql.reserved_container_ids()?);
            self.last_container_id.set(max);
            self.reserved_container_id.set(max);
        }
        let id = self.last_container_id.get() + 1;
        if id > self.reserved_container_id.get() {
            // Recorded before the id is used, in a commit of its own: inside a store
            // transaction the record would go if that transaction rolled back.
            if !self.conn.is_autocommit() {
                return Err(StoreError::Index(
                    "a container id was asked for inside a transaction".into(),
                ));
            }
            let reserved = id + CONTAINER_ID_BLOCK - 1;
            Sql(&self.conn).reserve_container_ids(reserved)?;
            self.reserved_container_id.set(reserved);
        }
        self.last_container_id.set(id);
        Ok(id)
    }
    fn check_writable(&self) -> StoreResult<()> {
        self.wal.check(&self.conn)
    }
    fn checkpoint(&self) -> StoreResult<()> {
        // Readers still inside a transaction would make TRUNCATE wait: not for long.
        self.conn.busy_timeout(std::time::Duration::from_secs(1))?;
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        // Leaving WAL mode, with no other connection open, removes the empty `-wal` and the
        // `-shm` index beside the database, which the process would otherwise leave behind
        // (it exits with this connection open). A reader still open makes the switch fail:
        // the files then stay, as harmless as before. The next start enters WAL mode again.
        let _ = self
            .conn
            .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get::<_, String>(0));
        Ok(())
    }
}

/// Opens (creating and migrating if needed) the database of `data_dir`: its readers and its
/// writer.
pub fn open(data_dir: &Path) -> StoreResult<(SqliteIndex, SqliteWriter)> {
    let conn = open_rw(data_dir)?;
    Ok((
        SqliteIndex {
            pool: {
                let dir = data_dir.to_path_buf();
                Pool::new(move || Ok(open_ro(&dir)?), |_| true)
            },
        },
        SqliteWriter {
            conn,
            wal: wal::WalGuard::new(db_path(data_dir)),
            last_container_id: std::cell::Cell::new(0),
            reserved_container_id: std::cell::Cell::new(0),
        },
    ))
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull) => StoreError::NoSpace(e.to_string()),
            _ => StoreError::Index(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::super::{contract, Index, IndexWriter};

    #[test]
    fn sqlite_keeps_the_index_contract() {
        static N: AtomicU32 = AtomicU32::new(0);
        let base =
            std::env::temp_dir().join(format!("ditto-index-contract-{}", std::process::id()));
        let open = || -> (Box<dyn Index>, Box<dyn IndexWriter>) {
            let dir = base.join(N.fetch_add(1, Ordering::Relaxed).to_string());
            std::fs::create_dir_all(&dir).unwrap();
            let (ix, w) = super::open(&dir).unwrap();
            (Box::new(ix), Box::new(w))
        };
        contract::run_all(&open);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// Container ids handed out are not handed out again after a restart, even when no
    /// container holds them any more (a prune deleted the newest, or a crash came before
    /// the commit): a page may still hold a location in the deleted one.
    #[test]
    fn container_ids_are_not_reused_after_a_restart() {
        let dir = std::env::temp_dir().join(format!("ditto-container-ids-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut last = 0;
        for _ in 0..3 {
            let (_, w) = super::open(&dir).unwrap();
            for _ in 0..300 {
                let id = w.next_container_id().unwrap();
                assert!(id > last, "container id {id} after {last}");
                last = id;
            }
        }
        // Asked for inside a transaction, the reservation could be rolled back with it.
        let (_, w) = super::open(&dir).unwrap();
        let tx = w.begin().unwrap();
        assert!(w.next_container_id().is_err());
        drop(tx);
        assert!(w.next_container_id().unwrap() > last);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Two processes' writers on one database (a CLI command beside the running server): a
    /// transaction that reads, then writes after the other writer committed, must wait for
    /// the lock instead of failing with "database is locked".
    #[test]
    fn a_second_writer_waits_instead_of_failing() {
        let dir = std::env::temp_dir().join(format!("ditto-two-writers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (_, cli) = super::open(&dir).unwrap();
        let tx = cli.begin().unwrap();
        assert!(crate::store::repo_id(&*tx, "a").unwrap().is_none());
        let server = {
            let dir = dir.clone();
            std::thread::spawn(move || {
                let (_, w) = super::open(&dir).unwrap();
                let tx = w.begin().unwrap();
                crate::store::create_repo(&*tx, "b").unwrap();
                tx.commit().unwrap();
            })
        };
        // Long enough for the other writer to commit, had it not been made to wait.
        std::thread::sleep(std::time::Duration::from_millis(300));
        crate::store::create_repo(&*tx, "a").unwrap();
        tx.commit().unwrap();
        server.join().unwrap();
        let (ix, _) = super::open(&dir).unwrap();
        let r = ix.read().unwrap();
        assert!(crate::store::repo_id(&*r, "a").unwrap().is_some());
        assert!(crate::store::repo_id(&*r, "b").unwrap().is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
