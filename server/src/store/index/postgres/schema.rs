//! The PostgreSQL schema: the tables of `sqlite/schema.rs` at its latest migration, in
//! PostgreSQL's types (every integer `BIGINT`, blobs `BYTEA`). `schema_version` records the
//! version a database is at; a database newer than this server is refused.

use postgres::Client;

use crate::store::{StoreError, StoreResult};

/// The schema version this server writes; bump it with a migration step below.
const VERSION: i64 = 5;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS schema_version(version BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS repos(
  id BIGSERIAL PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_ms BIGINT NOT NULL,
  gc_epoch BIGINT NOT NULL DEFAULT 0,
  reclaimed_bytes BIGINT NOT NULL DEFAULT 0,
  delta_done BIGINT);
CREATE TABLE IF NOT EXISTS tokens(
  hash BYTEA PRIMARY KEY,
  repo_id BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  scope TEXT NOT NULL DEFAULT 'full');
CREATE TABLE IF NOT EXISTS containers(
  id BIGINT PRIMARY KEY,
  repo_id BIGINT NOT NULL,
  kind BIGINT NOT NULL,
  data_offset BIGINT NOT NULL,
  data_end BIGINT NOT NULL,
  chunk_count BIGINT NOT NULL,
  newest_version BIGINT NOT NULL DEFAULT 0,
  created_ms BIGINT NOT NULL,
  sealed BIGINT NOT NULL DEFAULT 0,
  damage TEXT);
CREATE INDEX IF NOT EXISTS containers_by_repo ON containers(repo_id, id);
CREATE INDEX IF NOT EXISTS containers_by_kind ON containers(repo_id, kind, newest_version);
CREATE TABLE IF NOT EXISTS chunks(
  repo_id BIGINT NOT NULL,
  fp BYTEA NOT NULL,
  container_id BIGINT NOT NULL,
  slot BIGINT NOT NULL,
  "offset" BIGINT NOT NULL,
  stored_len BIGINT NOT NULL,
  raw_len BIGINT NOT NULL,
  codec BIGINT NOT NULL,
  first_version BIGINT,
  stored_ms BIGINT NOT NULL DEFAULT 0,
  base BYTEA,
  saved BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY(repo_id, fp));
CREATE INDEX IF NOT EXISTS chunks_by_container ON chunks(container_id, slot);
CREATE TABLE IF NOT EXISTS versions(
  id BIGSERIAL PRIMARY KEY,
  repo_id BIGINT NOT NULL,
  source TEXT NOT NULL,
  time BIGINT NOT NULL,
  committed_ms BIGINT NOT NULL,
  stats TEXT NOT NULL,
  manifest BYTEA NOT NULL,
  damaged BIGINT NOT NULL DEFAULT 0,
  token_id TEXT,
  manifest_base BIGINT);
CREATE INDEX IF NOT EXISTS versions_by_repo ON versions(repo_id, id);
CREATE TABLE IF NOT EXISTS quarantine(
  id BIGSERIAL PRIMARY KEY,
  repo_id BIGINT NOT NULL,
  fp BYTEA NOT NULL,
  container_id BIGINT NOT NULL,
  slot BIGINT NOT NULL,
  "offset" BIGINT NOT NULL,
  stored_len BIGINT NOT NULL,
  raw_len BIGINT NOT NULL,
  codec BIGINT NOT NULL,
  first_version BIGINT,
  reason TEXT NOT NULL,
  found_ms BIGINT NOT NULL,
  healed_ms BIGINT);
CREATE INDEX IF NOT EXISTS quarantine_by_fp ON quarantine(repo_id, fp);
CREATE INDEX IF NOT EXISTS quarantine_by_container ON quarantine(container_id, slot);
CREATE SEQUENCE IF NOT EXISTS container_ids;
"#;

/// Version 2: container ids from a sequence (servers sharing the database take ids from
/// it), starting after the largest id in use.
const TO_2: &str = r#"
CREATE SEQUENCE IF NOT EXISTS container_ids;
SELECT setval('container_ids', COALESCE((SELECT MAX(id) FROM containers), 0) + 1, false);
"#;

/// Version 3: delta chunks (codec 2): the base a delta is decoded against and the stored
/// bytes it saves (the SQLite schema's migration 5).
const TO_3: &str = r#"
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS base BYTEA;
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS saved BIGINT NOT NULL DEFAULT 0;
"#;

/// Version 4: the highest version the delta pass has handled (NULL: unknown, a repository
/// from before this column; the SQLite schema's migration 6).
const TO_4: &str = r#"
ALTER TABLE repos ADD COLUMN IF NOT EXISTS delta_done BIGINT;
"#;

/// Version 5: a manifest may be stored against an older version's (NULL: standalone; the
/// SQLite schema's migration 7).
const TO_5: &str = r#"
ALTER TABLE versions ADD COLUMN IF NOT EXISTS manifest_base BIGINT;
"#;

/// Creates the schema in an empty database (in one transaction, under an advisory lock so
/// that two servers starting together do not both create it); refuses a newer one. A
/// database already at this version is left untouched: `CREATE INDEX IF NOT EXISTS` would
/// still lock each table, and deadlock with a running server's writes.
pub fn migrate(client: &mut Client) -> StoreResult<()> {
    let mut tx = client.transaction()?;
    tx.batch_execute("SELECT pg_advisory_xact_lock(7306477)")?;
    let exists: bool = tx
        .query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[])?
        .get(0);
    let at: Option<i64> = if exists {
        tx.query_opt("SELECT version FROM schema_version", &[])?
            .map(|r| r.get(0))
    } else {
        None
    };
    match at {
        Some(v) if v > VERSION => {
            return Err(StoreError::Index(format!(
                "the database is at schema version {v}, newer than this server's {VERSION}"
            )))
        }
        Some(v) if v == VERSION => {}
        Some(v @ 1..=4) => {
            if v == 1 {
                tx.batch_execute(TO_2)?;
            }
            if v <= 2 {
                tx.batch_execute(TO_3)?;
            }
            if v <= 3 {
                tx.batch_execute(TO_4)?;
            }
            tx.batch_execute(TO_5)?;
            tx.execute("UPDATE schema_version SET version = $1", &[&VERSION])?;
        }
        _ => {
            tx.batch_execute(SCHEMA)?;
            tx.execute("DELETE FROM schema_version", &[])?;
            tx.execute(
                "INSERT INTO schema_version(version) VALUES ($1)",
                &[&VERSION],
            )?;
        }
    }
    tx.commit()?;
    Ok(())
}
