//! Repository statistics from the index: totals, the container layout (docs/STORAGE.md)
//! and the per-version series.

use std::collections::HashMap;

use rusqlite::{params, Connection};
use serde_json::{json, Value};
use wasm_core::{
    format::{container::ContainerKind, manifest::VersionStats},
    hash::Fingerprint,
};

use super::{versions::manifest_fps, Store, StoreResult};

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
    let mut layout = json!({});
    for kind in [ContainerKind::Active, ContainerKind::Archival] {
        let (n, bytes): (i64, i64) = conn.query_row(
            "SELECT COUNT(*), COALESCE(SUM(data_end - data_offset), 0) FROM containers WHERE repo_id = ?1 AND kind = ?2",
            params![repo_id, kind as u8],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        layout[format!("{}_containers", kind.name())] = json!(n);
        layout[format!("{}_bytes", kind.name())] = json!(bytes);
    }
    let data_bytes = layout["active_bytes"].as_i64().unwrap_or(0)
        + layout["archival_bytes"].as_i64().unwrap_or(0);
    // Slots no index row names: chunks moved or swept, and quarantined copies.
    layout["dead_bytes"] = json!(data_bytes - stored);
    let (gc_epoch, reclaimed): (i64, i64) = conn.query_row(
        "SELECT gc_epoch, reclaimed_bytes FROM repos WHERE id = ?1",
        [repo_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let rows: Vec<VersionRowBlob> = {
        let mut st = conn.prepare(
            "SELECT id, source, time, committed_ms, stats, manifest FROM versions WHERE repo_id = ?1 ORDER BY id",
        )?;
        let it = st.query_map([repo_id], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })?;
        it.collect::<Result<_, _>>()?
    };
    let unique = unique_stored_bytes(conn, repo_id, &rows)?;
    let mut series = Vec::new();
    let mut logical_total: u64 = 0;
    for (id, source, time, committed, stats, _) in rows {
        let s: VersionStats = serde_json::from_str(&stats).unwrap_or_default();
        logical_total += s.logical_bytes;
        series.push(json!({
            "id": id, "source": source, "time": time, "committed_at": committed,
            "logical_bytes": s.logical_bytes, "files": s.files,
            "new_stored_bytes": s.new_stored_bytes, "dedup_ratio": s.dedup_ratio,
            "unique_stored_bytes": unique.get(&id).copied(),
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
        "layout": layout,
        "reclaimed_bytes": reclaimed,
        "gc_epoch": gc_epoch,
        "series": series,
    }))
}

/// A version row with its manifest blob: id, source, time, committed_ms, stats, manifest.
type VersionRowBlob = (i64, String, i64, i64, String, Vec<u8>);

/// Per version, the stored bytes of the chunks no other live version references: what
/// deleting it alone frees. Versions with an unreadable manifest are left out.
fn unique_stored_bytes(
    conn: &Connection,
    repo_id: i64,
    rows: &[VersionRowBlob],
) -> rusqlite::Result<HashMap<i64, i64>> {
    // fp -> the one version referencing it, or None once a second one does.
    let mut owner: HashMap<Fingerprint, Option<i64>> = HashMap::new();
    for (id, .., blob) in rows {
        let Ok(fps) = manifest_fps(blob) else {
            continue;
        };
        for fp in fps {
            owner
                .entry(fp)
                .and_modify(|o| *o = None)
                .or_insert(Some(*id));
        }
    }
    let mut out: HashMap<i64, i64> = rows.iter().map(|r| (r.0, 0)).collect();
    let mut st = conn.prepare("SELECT fp, stored_len FROM chunks WHERE repo_id = ?1")?;
    let mut it = st.query([repo_id])?;
    while let Some(r) = it.next()? {
        let fp: Vec<u8> = r.get(0)?;
        let Ok(fp) = Fingerprint::try_from(fp.as_slice()) else {
            continue;
        };
        if let Some(Some(id)) = owner.get(&fp) {
            *out.entry(*id).or_default() += r.get::<_, i64>(1)?;
        }
    }
    Ok(out)
}

impl Store {
    /// [`repo_stats`] on a read connection, with what the mover did since the server
    /// started.
    pub fn stats(&self, repo_id: i64, name: &str) -> StoreResult<Value> {
        let mut v = repo_stats(&*self.readers.get()?, repo_id, name)?;
        v["layout"]["mover"] = serde_json::to_value(self.mover_totals(repo_id))
            .map_err(|e| super::StoreError::Internal(e.to_string()))?;
        Ok(v)
    }
}
