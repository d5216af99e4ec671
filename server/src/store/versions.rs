//! Versions: committing a manifest against the index (every referenced chunk stored, every
//! file's size the sum of its chunks), listing, reading and deleting them. A version row
//! and the `first_version` marks of its new chunks commit in one transaction; the
//! manifest is kept zstd-compressed in the row (`encode_manifest`, `decode_manifest`).

use std::collections::{HashMap, HashSet};

use rusqlite::{params, OptionalExtension};
use serde_json::{json, Value};
use wasm_core::{
    format::{
        manifest::{EntryKind, Manifest, VersionStats},
        parse_fp_hex,
    },
    hash::Fingerprint,
};

use super::{
    backend::ContainerBackend, mover::layout_enabled, now_ms, stats::ratio, Store, StoreError,
    StoreResult,
};

/// Compresses a manifest's JSON for its version row.
pub fn encode_manifest(json: &[u8]) -> std::io::Result<Vec<u8>> {
    zstd::bulk::compress(json, 3)
}

/// The manifest JSON of a version row's blob.
pub fn decode_manifest(blob: &[u8]) -> std::io::Result<Vec<u8>> {
    zstd::decode_all(blob)
}

/// The distinct fingerprints of a stored (zstd-compressed JSON) manifest.
pub fn manifest_fps(blob: &[u8]) -> Result<HashSet<Fingerprint>, String> {
    let json = decode_manifest(blob).map_err(|e| e.to_string())?;
    let m: Manifest = serde_json::from_slice(&json).map_err(|e| e.to_string())?;
    let mut fps = HashSet::new();
    for e in &m.entries {
        for h in &e.recipe {
            fps.insert(parse_fp_hex(h).ok_or("bad fingerprint in a stored recipe")?);
        }
    }
    Ok(fps)
}

/// A version as listed: `stats` is its stored JSON; `damaged` counts its distinct chunks
/// that are not stored (-1: not counted yet).
pub struct VersionRow {
    pub id: i64,
    pub source: String,
    pub time: i64,
    pub committed_ms: i64,
    pub stats: String,
    pub damaged: i64,
}

/// The columns of a [`VersionRow`], in the order [`version_row`] reads them.
const VERSION_ROW: &str = "id, source, time, committed_ms, stats, damaged";

fn version_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<VersionRow> {
    Ok(VersionRow {
        id: r.get(0)?,
        source: r.get(1)?,
        time: r.get(2)?,
        committed_ms: r.get(3)?,
        stats: r.get(4)?,
        damaged: r.get(5)?,
    })
}

/// One version with what only a single read needs.
pub struct VersionRecord {
    pub row: VersionRow,
    /// The id of the token that committed it (none for versions from before tokens).
    pub token_id: Option<String>,
    manifest: Vec<u8>,
}

impl VersionRecord {
    /// Its manifest as JSON.
    pub fn manifest_json(&self) -> StoreResult<Vec<u8>> {
        decode_manifest(&self.manifest).map_err(|e| StoreError::Internal(e.to_string()))
    }
}

impl Store {
    /// Commits a version whose manifest was parsed and validated; recipes as binary fps.
    /// `token_id` names the token that commits (docs/API.md: a backup token reads only the
    /// versions it committed).
    pub fn commit_version(
        &self,
        repo_id: i64,
        manifest: &Manifest,
        recipes: &[Vec<Fingerprint>],
        token_id: &str,
    ) -> StoreResult<Value> {
        let mut stats = VersionStats::default();
        for e in &manifest.entries {
            match e.kind {
                EntryKind::File => {
                    stats.files += 1;
                    stats.logical_bytes = stats.logical_bytes.saturating_add(e.size);
                }
                EntryKind::Dir => stats.dirs += 1,
                EntryKind::Symlink => stats.symlinks += 1,
            }
        }
        stats.skipped_files = manifest.skipped.len() as u64;
        self.backup_activity();
        let json = serde_json::to_vec(manifest).map_err(|e| StoreError::Internal(e.to_string()))?;
        let blob = encode_manifest(&json)?;

        let mut w = self.writer_for_write()?;
        let tx = w.conn.unchecked_transaction()?;
        // Distinct fps in first-reference order, with what the index knows of them.
        let mut info: HashMap<Fingerprint, Option<(u32, u32, i64, bool)>> = HashMap::new();
        let mut order: Vec<Fingerprint> = Vec::new();
        {
            let mut st = tx.prepare_cached(
                "SELECT stored_len, raw_len, container_id, first_version IS NULL FROM chunks WHERE repo_id = ?1 AND fp = ?2",
            )?;
            for fp in recipes.iter().flatten() {
                stats.chunk_refs += 1;
                if info.contains_key(fp) {
                    continue;
                }
                let row = st
                    .query_row(params![repo_id, &fp[..]], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                    })
                    .optional()?;
                info.insert(*fp, row);
                order.push(*fp);
            }
        }
        let missing: Vec<Fingerprint> = order
            .iter()
            .filter(|fp| info[*fp].is_none())
            .copied()
            .collect();
        if !missing.is_empty() {
            return Err(StoreError::MissingChunks(missing));
        }
        for (e, recipe) in manifest.entries.iter().zip(recipes) {
            let sum: u64 = recipe.iter().map(|fp| info[fp].unwrap().1 as u64).sum();
            if sum != e.size {
                return Err(StoreError::SizeMismatch {
                    path: e.path.clone(),
                    size: e.size,
                    sum,
                });
            }
        }
        stats.unique_chunks = order.len() as u64;
        let mut containers: HashSet<i64> = HashSet::new();
        for fp in &order {
            let (stored, raw, cid, first) = info[fp].unwrap();
            containers.insert(cid);
            if first {
                stats.new_chunks += 1;
                stats.new_raw_bytes += raw as u64;
                stats.new_stored_bytes += stored as u64;
            }
        }
        stats.dedup_ratio = ratio(stats.logical_bytes, stats.new_stored_bytes);
        let committed = now_ms();
        let stats_json =
            serde_json::to_string(&stats).map_err(|e| StoreError::Internal(e.to_string()))?;
        tx.execute(
            "INSERT INTO versions(repo_id, source, time, committed_ms, stats, manifest, token_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![repo_id, manifest.source, manifest.time, committed as i64, stats_json, blob, token_id],
        )?;
        let vid = tx.last_insert_rowid();
        {
            let mut st = tx.prepare_cached(
                "UPDATE chunks SET first_version = ?1 WHERE repo_id = ?2 AND fp = ?3 AND first_version IS NULL",
            )?;
            for fp in &order {
                if info[fp].unwrap().3 {
                    st.execute(params![vid, repo_id, &fp[..]])?;
                }
            }
            let mut st =
                tx.prepare_cached("UPDATE containers SET newest_version = ?1 WHERE id = ?2")?;
            for cid in &containers {
                st.execute(params![vid, cid])?;
            }
        }
        // With the HiDeStore layout, the next version's new chunks start a container of
        // their own, and the mover may evacuate this one (docs/STORAGE.md).
        let layout = layout_enabled();
        if layout {
            tx.execute(
                "UPDATE containers SET sealed = 1 WHERE repo_id = ?1 AND kind = 0 AND sealed = 0",
                [repo_id],
            )?;
        }
        tx.commit()?;
        if layout {
            w.open.remove(&repo_id);
        }
        drop(w);
        // The header copy of "newest version" is a hint; the index is authoritative.
        for cid in containers {
            self.containers
                .hint_newest_version(repo_id, cid as u64, vid);
        }
        Ok(json!({
            "id": vid,
            "source": manifest.source,
            "time": manifest.time,
            "committed_at": committed,
            "stats": stats,
        }))
    }

    /// The repository's versions in id order; only those committed by token `own` if given.
    pub fn list_versions(&self, repo_id: i64, own: Option<&str>) -> StoreResult<Vec<VersionRow>> {
        let conn = self.readers.get()?;
        let mut st = conn.prepare_cached(&format!(
            "SELECT {VERSION_ROW} FROM versions
             WHERE repo_id = ?1 AND (?2 IS NULL OR token_id = ?2) ORDER BY id"
        ))?;
        let rows = st.query_map(params![repo_id, own], version_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Version `id` of the repository.
    pub fn version(&self, repo_id: i64, id: i64) -> StoreResult<VersionRecord> {
        let conn = self.readers.get()?;
        let v = conn
            .prepare_cached(&format!(
                "SELECT {VERSION_ROW}, manifest, token_id FROM versions WHERE id = ?1 AND repo_id = ?2"
            ))?
            .query_row(params![id, repo_id], |r| {
                Ok(VersionRecord {
                    row: version_row(r)?,
                    manifest: r.get(6)?,
                    token_id: r.get(7)?,
                })
            })
            .optional()?;
        v.ok_or_else(|| StoreError::NotFound(format!("no version {id} in this repository")))
    }
}
