//! The SQLite schema and its migrations, and its connections.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use rusqlite::{Connection, OpenFlags};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS repos(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tokens(
  hash BLOB PRIMARY KEY,
  repo_id INTEGER NOT NULL,
  created_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS containers(
  id INTEGER PRIMARY KEY,
  repo_id INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  data_offset INTEGER NOT NULL,
  data_end INTEGER NOT NULL,
  chunk_count INTEGER NOT NULL,
  newest_version INTEGER NOT NULL DEFAULT 0,
  created_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS containers_by_repo ON containers(repo_id, id);
CREATE TABLE IF NOT EXISTS chunks(
  repo_id INTEGER NOT NULL,
  fp BLOB NOT NULL,
  container_id INTEGER NOT NULL,
  slot INTEGER NOT NULL,
  offset INTEGER NOT NULL,
  stored_len INTEGER NOT NULL,
  raw_len INTEGER NOT NULL,
  codec INTEGER NOT NULL,
  first_version INTEGER,
  PRIMARY KEY(repo_id, fp)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS chunks_by_container ON chunks(container_id, slot);
CREATE TABLE IF NOT EXISTS versions(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  repo_id INTEGER NOT NULL,
  source TEXT NOT NULL,
  time INTEGER NOT NULL,
  committed_ms INTEGER NOT NULL,
  stats TEXT NOT NULL,
  manifest BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS versions_by_repo ON versions(repo_id, id);
CREATE TABLE IF NOT EXISTS quarantine(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  repo_id INTEGER NOT NULL,
  fp BLOB NOT NULL,
  container_id INTEGER NOT NULL,
  slot INTEGER NOT NULL,
  offset INTEGER NOT NULL,
  stored_len INTEGER NOT NULL,
  raw_len INTEGER NOT NULL,
  codec INTEGER NOT NULL,
  first_version INTEGER,
  reason TEXT NOT NULL,
  found_ms INTEGER NOT NULL,
  healed_ms INTEGER);
CREATE INDEX IF NOT EXISTS quarantine_by_fp ON quarantine(repo_id, fp);
CREATE INDEX IF NOT EXISTS quarantine_by_container ON quarantine(container_id, slot);
";

/// Schema changes after the first release, applied in order; `PRAGMA user_version` counts
/// how many a database has. Each runs in one transaction with its version bump.
const MIGRATIONS: &[&str] = &[
    // 1: containers can be sealed (never appended to again) and carry the damage found in
    // them; versions count their recipe chunks that are not stored (missing or quarantined).
    "ALTER TABLE containers ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE containers ADD COLUMN damage TEXT;
     ALTER TABLE versions ADD COLUMN damaged INTEGER NOT NULL DEFAULT 0;",
    // 2: token scopes (docs/API.md); a version records the token that committed it, so that
    // a backup-only token reads its own versions and no others.
    "ALTER TABLE tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'full';
     ALTER TABLE versions ADD COLUMN token_id TEXT;",
    // 3: versions committed before `damaged` was counted may lack chunks that an older
    // recovery dropped without a trace: -1 = unknown, recounted when the server starts.
    "UPDATE versions SET damaged = -1 WHERE damaged = 0;",
    // 4: garbage collection (docs/STORAGE.md): when a chunk was stored (pending chunks younger
    // than the grace period are never swept; 0 = before this column, i.e. old), the epoch a
    // client's cached view of the repository is valid for, and the bytes freed so far.
    "ALTER TABLE chunks ADD COLUMN stored_ms INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE repos ADD COLUMN gc_epoch INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE repos ADD COLUMN reclaimed_bytes INTEGER NOT NULL DEFAULT 0;
     CREATE INDEX IF NOT EXISTS containers_by_kind ON containers(repo_id, kind, newest_version);",
    // 5: delta chunks (codec 2, docs/FORMAT.md): the base a delta is decoded against (NULL
    // for other codecs; garbage collection keeps a base while a live delta needs it) and
    // the stored bytes the delta saves over the copy it replaced (repository statistics).
    "ALTER TABLE chunks ADD COLUMN base BLOB;
     ALTER TABLE chunks ADD COLUMN saved INTEGER NOT NULL DEFAULT 0;",
    // 6: the highest version the delta pass has handled, so that a restart goes on from
    // there (NULL: unknown, a repository from before this column; docs/STORAGE.md).
    "ALTER TABLE repos ADD COLUMN delta_done INTEGER;",
    // 7: a manifest may be stored against an older version's (docs/FORMAT.md, "Stored
    // form"): the id of that version, NULL for a standalone frame (every older row).
    "ALTER TABLE versions ADD COLUMN manifest_base INTEGER;",
    // 8: the container ids handed out so far, reserved ahead in blocks, so that an id whose
    // container was deleted (a prune dropping the newest one) is not handed out again after
    // a restart: a page may still hold a location in it (docs/STORAGE.md, "Backends").
    "CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;",
];

fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let version = |c: &Connection| c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0));
    if version(conn)? as usize >= MIGRATIONS.len() {
        return Ok(());
    }
    // IMMEDIATE: a server and a CLI command starting together must not both migrate.
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let res = (|| {
        for sql in MIGRATIONS.iter().skip(version(conn)? as usize) {
            conn.execute_batch(sql)?;
        }
        conn.pragma_update(None, "user_version", MIGRATIONS.len() as i64)
    })();
    match res {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

pub fn db_path(data_dir: &Path) -> PathBuf {
    data_dir.join("ditto.sqlite3")
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// Opens (and creates if needed) the database in WAL mode with the schema.
pub fn open_rw(data_dir: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(db_path(data_dir))?;
    configure(&conn)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.execute_batch(SCHEMA)?;
    migrate(&conn)?;
    Ok(conn)
}

pub fn open_ro(data_dir: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        db_path(data_dir),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    configure(&conn)?;
    Ok(conn)
}
