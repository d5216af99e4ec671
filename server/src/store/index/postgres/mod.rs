//! The PostgreSQL index backend (issue 21): the same traits as [`super::sqlite`], for
//! servers whose metadata lives in a PostgreSQL database (`DATABASE_URL`). Per server, one
//! writer connection makes every change (the store's writer lock serialises it); readers
//! come from a small pool. A snapshot is a `REPEATABLE READ READ ONLY` transaction. A write
//! transaction runs at `READ COMMITTED` and first takes transaction-scoped advisory locks
//! (its repository's, or all of them), so that the write transactions of one repository run
//! one after another across every replica sharing the database: each sees all that
//! committed before it, which is what the store's checks assume of SQLite's single writer
//! too. Container ids come from a sequence, shared
//! by the replicas; the maintenance lease is a session advisory lock on a connection of its
//! own. The schema is `schema.rs`; one file per concept, as for SQLite, holds the
//! statements.
//!
//! PostgreSQL spells some things differently from SQLite: `$1` parameters, `offset` quoted
//! (a reserved word), `ON CONFLICT DO NOTHING`, `RETURNING id`, `= ANY($n)` for lists, and
//! every integer column is `BIGINT` (read as `i64`, converted where the store uses
//! narrower types).

mod chunks;
mod containers;
mod maintenance;
mod quarantine;
mod repos;
mod schema;
mod versions;

use std::{
    cell::{Cell, RefCell, RefMut},
    ops::DerefMut,
};

use postgres::{Client, NoTls};

use super::{fp_of, pool::Pool, Index, IndexRead, IndexTx, IndexWriter, Lease};
use crate::store::{StoreError, StoreResult};

/// The index traits over one PostgreSQL connection (`G` owns or borrows it), optionally
/// inside a transaction that is rolled back when dropped uncommitted.
pub struct Pg<G: DerefMut<Target = Client>> {
    client: RefCell<G>,
    in_tx: Cell<bool>,
}

/// The stored manifest in columns `at` (`manifest_base`) and `at + 1` (`manifest`).
fn stored_manifest(r: &postgres::Row, at: usize) -> StoreResult<super::versions::StoredManifest> {
    Ok(super::versions::StoredManifest {
        base: r.try_get(at)?,
        blob: r.try_get(at + 1)?,
    })
}

impl<G: DerefMut<Target = Client>> Pg<G> {
    fn plain(client: G) -> Self {
        Pg {
            client: RefCell::new(client),
            in_tx: Cell::new(false),
        }
    }

    fn begin(client: G, begin: &str) -> StoreResult<Self> {
        let pg = Pg::plain(client);
        pg.c().batch_execute(begin)?;
        pg.in_tx.set(true);
        Ok(pg)
    }

    /// The connection, for one statement (or one streamed query) at a time.
    fn c(&self) -> RefMut<'_, G> {
        self.client.borrow_mut()
    }
}

impl<G: DerefMut<Target = Client>> Drop for Pg<G> {
    fn drop(&mut self) {
        if self.in_tx.get() {
            let _ = self.client.get_mut().batch_execute("ROLLBACK");
        }
    }
}

impl<G: DerefMut<Target = Client>> IndexTx for Pg<G> {
    fn commit(self: Box<Self>) -> StoreResult<()> {
        self.in_tx.set(false);
        self.c().batch_execute("COMMIT")?;
        Ok(())
    }
    fn check_lease(&self, lease: &Lease) -> StoreResult<()> {
        let Some(pid) = lease.holder() else {
            return Ok(());
        };
        // A bigint advisory key shows in pg_locks as its high and low halves.
        let held: bool = self
            .c()
            .query_one(
                "SELECT EXISTS(SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted \
                 AND pid = $1 AND classid::bigint = $2 AND objid::bigint = $3 AND objsubid = 1)",
                &[
                    &pid,
                    &(MAINTENANCE_LOCK >> 32),
                    &(MAINTENANCE_LOCK & 0xffff_ffff),
                ],
            )?
            .get(0);
        if held {
            Ok(())
        } else {
            Err(StoreError::LeaseLost)
        }
    }
}

/// A connection whose commits are durable when acknowledged, whatever the database's or
/// role's defaults: `synchronous_commit` off would let a crash of PostgreSQL lose a commit
/// the server already answered for (and recovery would then delete its containers).
fn connect(url: &str) -> StoreResult<Client> {
    let mut c = Client::connect(url, NoTls)?;
    c.batch_execute("SET synchronous_commit = on")?;
    Ok(c)
}

/// How a write transaction starts: at `READ COMMITTED` named, not inherited (a database
/// whose default is `REPEATABLE READ` would take the snapshot as the lock is asked for, and
/// the transaction would not see what committed while it waited), then its locks.
fn begin_write(locks: &str) -> String {
    format!("BEGIN ISOLATION LEVEL READ COMMITTED; {locks}")
}

/// The read side: a pool of connections, and the URL for the maintenance lease's own.
pub struct PgIndex {
    pool: Pool<Client>,
    url: String,
}

impl Index for PgIndex {
    fn read(&self) -> StoreResult<Box<dyn IndexRead + '_>> {
        Ok(Box::new(Pg::plain(self.pool.get()?)))
    }
    fn snapshot(&self) -> StoreResult<Box<dyn IndexRead + '_>> {
        Ok(Box::new(Pg::begin(
            self.pool.get()?,
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        )?))
    }
    fn maintenance_lease(&self) -> StoreResult<Lease> {
        let mut c = connect(&self.url)?;
        c.execute("SELECT pg_advisory_lock($1)", &[&MAINTENANCE_LOCK])?;
        let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[])?.get(0);
        // The write lock taken exclusively and let go: a transaction of an earlier holder
        // that checked its lease before that lease ended commits before this pass starts.
        c.batch_execute(&begin_write(&format!(
            "SELECT pg_advisory_xact_lock({WRITE_LOCK}); COMMIT"
        )))?;
        Ok(Lease::new(Some(Box::new(c)), Some(pid)))
    }
    fn close_idle(&self) {
        self.pool.close_idle();
    }
}

/// Advisory lock keys. `STORE_WRITER_LOCK`: held by every serving server, shared by
/// replicas, exclusive by one alone. `WRITE_LOCK`: held by a write transaction, exclusive
/// by one that may touch any repository, shared by one of a single repository, which also
/// holds its repository's key in `REPO_LOCK_SPACE` (the two-key form: repository ids fit 32
/// bits for as long as that many repositories are not created). `MAINTENANCE_LOCK`: held by
/// the server running maintenance.
const STORE_WRITER_LOCK: i64 = 0x6469_7474_6f77;
const WRITE_LOCK: i64 = 0x6469_7474_6f78;
const MAINTENANCE_LOCK: i64 = 0x6469_7474_6f79;
const REPO_LOCK_SPACE: i32 = 0x6474_6f72;

/// The writer connection.
pub struct PgWriter {
    client: RefCell<Client>,
}

impl IndexWriter for PgWriter {
    fn begin(&self) -> StoreResult<Box<dyn IndexTx + '_>> {
        Ok(Box::new(Pg::begin(
            self.client.borrow_mut(),
            &begin_write(&format!("SELECT pg_advisory_xact_lock({WRITE_LOCK})")),
        )?))
    }
    fn begin_repo(&self, repo_id: i64) -> StoreResult<Box<dyn IndexTx + '_>> {
        // Shared on the whole (a transaction of any repository excludes it), exclusive on
        // the repository: repositories' writes run side by side across replicas.
        let repo = repo_id as i32;
        Ok(Box::new(Pg::begin(
            self.client.borrow_mut(),
            &begin_write(&format!(
                "SELECT pg_advisory_xact_lock_shared({WRITE_LOCK}); \
                 SELECT pg_advisory_xact_lock({REPO_LOCK_SPACE}, {repo})"
            )),
        )?))
    }
    fn claim(&self, shared: bool) -> StoreResult<()> {
        let f = if shared {
            "pg_try_advisory_lock_shared"
        } else {
            "pg_try_advisory_lock"
        };
        // A server killed a moment ago holds its claim until PostgreSQL sees its connection
        // close: a restart waits that long before it calls the database taken.
        let t0 = std::time::Instant::now();
        let held = loop {
            let held: bool = self
                .client
                .borrow_mut()
                .query_one(&format!("SELECT {f}($1)"), &[&STORE_WRITER_LOCK])?
                .get(0);
            if held || t0.elapsed() >= CLAIM_WAIT {
                break held;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        match (held, shared) {
            (true, _) => Ok(()),
            (false, false) => Err(StoreError::Index(
                "another ditto-server is already serving this database (servers can share one only with their containers in object storage)".into(),
            )),
            (false, true) => Err(StoreError::Index(
                "a ditto-server keeping containers on its local disk is serving this database".into(),
            )),
        }
    }
    fn next_container_id(&self) -> StoreResult<u64> {
        let id: i64 = self
            .client
            .borrow_mut()
            .query_one("SELECT nextval('container_ids')", &[])?
            .get(0);
        Ok(id as u64)
    }
    fn check_writable(&self) -> StoreResult<()> {
        // A lost connection fails the transaction's first statement with its own error.
        Ok(())
    }
    fn checkpoint(&self) -> StoreResult<()> {
        Ok(())
    }
}

/// How long a claim is retried before the database is called taken by another server.
const CLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Connects to the database at `url` (a `postgres://` URL), creating the schema if it is
/// empty: its readers and its writer.
pub fn open(url: &str) -> StoreResult<(PgIndex, PgWriter)> {
    let mut client = connect(url)?;
    schema::migrate(&mut client)?;
    Ok((
        PgIndex {
            pool: {
                let url = url.to_string();
                Pool::new(move || connect(&url), |c| !c.is_closed())
            },
            url: url.to_string(),
        },
        PgWriter {
            client: RefCell::new(client),
        },
    ))
}

impl From<postgres::Error> for StoreError {
    fn from(e: postgres::Error) -> Self {
        match e.code() {
            Some(c) if *c == postgres::error::SqlState::DISK_FULL => {
                StoreError::NoSpace(e.to_string())
            }
            // The server's own words (a deadlock, a constraint) rather than "db error".
            _ => StoreError::Index(match e.as_db_error() {
                Some(db) => format!("{} ({})", db.message(), db.code().code()),
                None => e.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::super::{contract, Index, IndexWriter};
    use crate::store::StoreError;

    /// A fresh database on the server that `DITTO_TEST_PG` names (an admin database's URL;
    /// `npm run test:pg` starts one): its URL.
    fn fresh_database(tag: &str) -> String {
        let admin = std::env::var("DITTO_TEST_PG").expect("DITTO_TEST_PG: npm run test:pg");
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "{tag}_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        match admin.rsplit_once('/') {
            Some((base, _)) => format!("{base}/{name}"),
            None => panic!("DITTO_TEST_PG is not a URL ending in a database name"),
        }
    }

    /// Runs the contract, each test in a database of its own.
    #[test]
    #[ignore = "needs PostgreSQL: npm run test:pg"]
    fn postgres_keeps_the_index_contract() {
        let open = || -> (Box<dyn Index>, Box<dyn IndexWriter>) {
            let (ix, w) = super::open(&fresh_database("contract")).unwrap();
            (Box::new(ix), Box::new(w))
        };
        contract::run_all(&open);
    }

    /// What replicas rely on: shared claims coexist and exclude a lone one, container ids
    /// never repeat across writers, write transactions are serialised per repository, and
    /// the maintenance lease is held by one at a time.
    #[test]
    #[ignore = "needs PostgreSQL: npm run test:pg"]
    fn postgres_serves_replicas() {
        let url = fresh_database("replicas");
        let (ix1, w1) = super::open(&url).unwrap();
        let (ix2, w2) = super::open(&url).unwrap();
        w1.claim(true).unwrap();
        w2.claim(true).unwrap();
        let (_, lone) = super::open(&url).unwrap();
        assert!(lone.claim(false).is_err(), "a lone server is refused");

        let mut ids: Vec<u64> = (0..50)
            .flat_map(|_| {
                [
                    w1.next_container_id().unwrap(),
                    w2.next_container_id().unwrap(),
                ]
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 100, "no container id handed out twice");

        // A repository's write transactions wait for each other, other repositories' do
        // not, and one that may touch any waits for all.
        let held = w1.begin_repo(1).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let other = std::thread::spawn(move || {
            for repo in [2, 1] {
                let t = w2.begin_repo(repo).unwrap();
                tx.send(repo).unwrap();
                t.commit().unwrap();
            }
            let t = w2.begin().unwrap();
            tx.send(0).unwrap();
            t.commit().unwrap();
        });
        let wait = std::time::Duration::from_secs(10);
        let short = std::time::Duration::from_millis(300);
        assert_eq!(
            rx.recv_timeout(wait).unwrap(),
            2,
            "another repository goes on"
        );
        assert!(rx.recv_timeout(short).is_err(), "the same repository waits");
        held.commit().unwrap();
        assert_eq!(rx.recv_timeout(wait).unwrap(), 1);
        assert_eq!(rx.recv_timeout(wait).unwrap(), 0);
        other.join().unwrap();
        let held = w1.begin().unwrap();
        let (_, w3) = super::open(&url).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let other = std::thread::spawn(move || {
            let t = w3.begin_repo(3).unwrap();
            tx.send(()).unwrap();
            t.commit().unwrap();
        });
        assert!(
            rx.recv_timeout(short).is_err(),
            "a transaction of any repository excludes all"
        );
        held.commit().unwrap();
        rx.recv_timeout(wait).unwrap();
        other.join().unwrap();

        let lease = ix1.maintenance_lease().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        // Timed from before the spawn: a thread started late on a loaded machine would
        // otherwise start its clock after the lease was dropped.
        let t0 = std::time::Instant::now();
        let waiter = std::thread::spawn(move || {
            let second = ix2.maintenance_lease().unwrap();
            tx.send(t0.elapsed()).unwrap();
            drop(second);
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(300))
                .is_err(),
            "a second lease waits while the first is held"
        );
        drop(lease);
        let waited = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert!(waited >= std::time::Duration::from_millis(300));
        waiter.join().unwrap();
    }

    /// A write transaction sees what committed while it waited for its repository's lock,
    /// and commits durably, even in a database whose defaults say otherwise.
    #[test]
    #[ignore = "needs PostgreSQL: npm run test:pg"]
    fn postgres_writes_ignore_the_database_defaults() {
        let url = fresh_database("defaults");
        let name = url.rsplit_once('/').unwrap().1.to_string();
        let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        admin
            .batch_execute(&format!(
                "ALTER DATABASE {name} SET default_transaction_isolation = 'repeatable read'; \
                 ALTER DATABASE {name} SET synchronous_commit = off"
            ))
            .unwrap();
        let (_, w1) = super::open(&url).unwrap();
        let (_, w2) = super::open(&url).unwrap();
        let sync: String = w1
            .client
            .borrow_mut()
            .query_one("SHOW synchronous_commit", &[])
            .unwrap()
            .get(0);
        assert_eq!(sync, "on");

        let held = w1.begin_repo(1).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let other = std::thread::spawn(move || {
            // Waits for w1's transaction, then must see the repository it created.
            let t = w2.begin_repo(1).unwrap();
            tx.send(t.repo_id("made-while-waiting").unwrap()).unwrap();
            t.commit().unwrap();
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        let id = held.create_repo("made-while-waiting", 0).unwrap();
        held.commit().unwrap();
        let seen = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        other.join().unwrap();
        assert_eq!(seen, Some(id), "what committed during the wait is seen");
    }

    /// A pass whose lease connection closed is refused at its next transaction, and the
    /// next lease waits for a transaction that checked its lease before it ended.
    #[test]
    #[ignore = "needs PostgreSQL: npm run test:pg"]
    fn postgres_fences_a_lost_maintenance_lease() {
        let url = fresh_database("fence");
        let (ix1, w1) = super::open(&url).unwrap();
        let (ix2, _w2) = super::open(&url).unwrap();
        let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let lease = ix1.maintenance_lease().unwrap();
        let pid = lease
            .holder()
            .expect("a PostgreSQL lease names its connection");

        // Checked while the lease holds; the lease then ends under the open transaction.
        let tx = w1.begin_repo(1).unwrap();
        tx.check_lease(&lease).unwrap();
        admin
            .execute("SELECT pg_terminate_backend($1)", &[&pid])
            .unwrap();
        let (sent, got) = std::sync::mpsc::channel();
        let t0 = std::time::Instant::now();
        let next = std::thread::spawn(move || {
            let second = ix2.maintenance_lease().unwrap();
            sent.send(t0.elapsed()).unwrap();
            second
        });
        assert!(
            got.recv_timeout(std::time::Duration::from_millis(500))
                .is_err(),
            "the next lease waits for the transaction that checked the lost one"
        );
        tx.create_repo("switched-before-the-next-pass", 0).unwrap();
        tx.commit().unwrap();
        got.recv_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        let second = next.join().unwrap();

        let tx = w1.begin_repo(1).unwrap();
        assert!(matches!(tx.check_lease(&lease), Err(StoreError::LeaseLost)));
        drop(tx);
        let tx = w1.begin_repo(1).unwrap();
        tx.check_lease(&second).unwrap();
    }
}
