//! Repository statistics from the index: totals and the per-version series.

use rusqlite::Connection;
use serde_json::{json, Value};
use wasm_core::format::manifest::VersionStats;

use super::{Store, StoreResult};

/// `logical / stored`, rounded to three decimals; none when nothing is stored.
pub fn ratio(logical: u64, stored: u64) -> Option<f64> {
    if stored == 0 {
        None
    } else {
        Some(((logical as f64 / stored as f64) * 1000.0).round() / 1000.0)
    }
}

/// Repository totals and the per-version series (`GET .../stats`, `ditto-server stats`).
pub fn repo_stats(conn: &Connection, repo_id: i64, name: &str) -> rusqlite::Result<Value> {
    let (chunks, raw, stored): (i64, i64, i64) = conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(raw_len), 0), COALESCE(SUM(stored_len), 0) FROM chunks WHERE repo_id = ?1",
        [repo_id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let (containers, cbytes): (i64, i64) = conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(data_end), 0) FROM containers WHERE repo_id = ?1",
        [repo_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut series = Vec::new();
    let mut logical_total: u64 = 0;
    let mut st = conn.prepare(
        "SELECT id, source, time, committed_ms, stats FROM versions WHERE repo_id = ?1 ORDER BY id",
    )?;
    let rows = st.query_map([repo_id], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, String>(4)?,
        ))
    })?;
    for row in rows {
        let (id, source, time, committed, stats) = row?;
        let s: VersionStats = serde_json::from_str(&stats).unwrap_or_default();
        logical_total += s.logical_bytes;
        series.push(json!({
            "id": id, "source": source, "time": time, "committed_at": committed,
            "logical_bytes": s.logical_bytes, "files": s.files,
            "new_stored_bytes": s.new_stored_bytes, "dedup_ratio": s.dedup_ratio,
        }));
    }
    Ok(json!({
        "repo": name,
        "chunks": chunks,
        "raw_bytes": raw,
        "stored_bytes": stored,
        "containers": containers,
        "container_bytes": cbytes,
        "versions": series.len(),
        "logical_bytes": logical_total,
        "dedup_ratio": ratio(logical_total, stored as u64),
        "series": series,
    }))
}

impl Store {
    /// [`repo_stats`] on a read connection.
    pub fn stats(&self, repo_id: i64, name: &str) -> StoreResult<Value> {
        Ok(repo_stats(&*self.readers.get()?, repo_id, name)?)
    }
}
