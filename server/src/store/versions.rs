//! Versions: committing a manifest against the index (every referenced chunk stored, every
//! file's size the sum of its chunks), listing, reading and deleting them. A version row
//! and the `first_version` marks of its new chunks commit in one transaction; the row
//! holds the manifest in its stored form ([`manifest_blob`]: one zstd frame of the JSON).

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};
use wasm_core::{
    format::{
        manifest::{EntryKind, Manifest, VersionStats},
        parse_fp_hex,
    },
    hash::Fingerprint,
};

use super::{
    index::versions::{CommitChunk, NewVersion},
    manifest_blob,
    mover::layout_enabled,
    now_ms,
    stats::ratio,
    Store, StoreError, StoreResult,
};

/// The distinct fingerprints of a stored manifest ([`manifest_blob`]).
pub fn manifest_fps(blob: &[u8]) -> Result<HashSet<Fingerprint>, String> {
    Ok(manifest_stream(blob)?.into_iter().collect())
}

/// The fingerprints of a stored manifest in stream order: every entry's recipe, one after
/// the other (duplicates kept), as the delta pass's DupAdj aligns versions.
pub fn manifest_stream(blob: &[u8]) -> Result<Vec<Fingerprint>, String> {
    let json = manifest_blob::decode(blob).map_err(|e| e.to_string())?;
    let m: Manifest = serde_json::from_slice(&json).map_err(|e| e.to_string())?;
    let mut fps = Vec::new();
    for e in &m.entries {
        for h in &e.recipe {
            fps.push(parse_fp_hex(h).ok_or("bad fingerprint in a stored recipe")?);
        }
    }
    Ok(fps)
}

pub use super::index::versions::{VersionRecord, VersionRow};

impl VersionRecord {
    /// Its manifest as JSON.
    pub fn manifest_json(&self) -> StoreResult<Vec<u8>> {
        manifest_blob::decode(&self.manifest)
            .map_err(|e| StoreError::Internal(format!("version {}: {e}", self.row.id)))
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
        let blob = manifest_blob::encode(&json).map_err(|e| StoreError::Internal(e.to_string()))?;

        let mut w = self.writer_for_write()?;
        let tx = w.begin(repo_id)?;
        // Distinct fps in first-reference order, with what the index knows of them.
        let mut info: HashMap<Fingerprint, Option<CommitChunk>> = HashMap::new();
        let mut order: Vec<Fingerprint> = Vec::new();
        for fp in recipes.iter().flatten() {
            stats.chunk_refs += 1;
            if info.contains_key(fp) {
                continue;
            }
            info.insert(*fp, tx.commit_chunk(repo_id, fp)?);
            order.push(*fp);
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
            let sum: u64 = recipe
                .iter()
                .map(|fp| info[fp].unwrap().raw_len as u64)
                .sum();
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
        let mut first: Vec<Fingerprint> = Vec::new();
        for fp in &order {
            let c = info[fp].unwrap();
            containers.insert(c.container_id);
            if c.uncommitted {
                stats.new_chunks += 1;
                stats.new_raw_bytes += c.raw_len as u64;
                stats.new_stored_bytes += c.stored_len as u64;
                first.push(*fp);
            }
        }
        stats.dedup_ratio = ratio(stats.logical_bytes, stats.new_stored_bytes);
        let committed = now_ms();
        // The version list is read from rows alone, without the manifests: the row's stats
        // JSON carries the picked folder's name too (the API lifts it out of `stats`).
        let mut row_stats =
            serde_json::to_value(&stats).map_err(|e| StoreError::Internal(e.to_string()))?;
        if let Some(f) = &manifest.folder {
            row_stats["folder"] = json!(f);
        }
        let stats_json = row_stats.to_string();
        let vid = tx.insert_version(&NewVersion {
            repo_id,
            source: &manifest.source,
            time: manifest.time,
            committed_ms: committed as i64,
            stats: &stats_json,
            manifest: &blob,
            token_id,
        })?;
        tx.mark_first_version(repo_id, vid, &first)?;
        let container_ids: Vec<i64> = containers.iter().copied().collect();
        tx.set_newest_version(vid, &container_ids)?;
        // With the HiDeStore layout, the next version's new chunks start a container of
        // their own, and the mover may evacuate this one (docs/STORAGE.md).
        let layout = layout_enabled();
        if layout {
            tx.seal_active(repo_id)?;
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
        let mut out = json!({
            "id": vid,
            "source": manifest.source,
            "time": manifest.time,
            "committed_at": committed,
            "stats": stats,
        });
        if let Some(f) = &manifest.folder {
            out["folder"] = json!(f);
        }
        Ok(out)
    }

    /// The repository's versions in id order; only those committed by token `own` if given.
    pub fn list_versions(&self, repo_id: i64, own: Option<&str>) -> StoreResult<Vec<VersionRow>> {
        self.index()?.versions(repo_id, own)
    }

    /// Version `id` of the repository.
    pub fn version(&self, repo_id: i64, id: i64) -> StoreResult<VersionRecord> {
        self.index()?
            .version(repo_id, id)?
            .ok_or_else(|| StoreError::NotFound(format!("no version {id} in this repository")))
    }
}
