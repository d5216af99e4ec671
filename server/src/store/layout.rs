//! HiDeStore's chunk classes (Li, Hua, Cao et al. 2024, §4.2): which stored chunks are
//! *hot* (the newest version of some source references them), which are *cold* (committed,
//! referenced by no source's newest version) and to which archival group a cold chunk
//! belongs (the newest live version referencing it, the paper's B_ID), plus what garbage
//! collection needs from the same pass over the manifests: which chunks any live version
//! references. docs/STORAGE.md defines the terms.
//!
//! The classes come from the manifests, not from a client-side cache as in the paper: the
//! server holds every recipe, so it classifies exactly, and several sources sharing a
//! repository are handled by taking the union of their newest versions as the hot set.

use std::collections::{HashMap, HashSet};

use rusqlite::Connection;
use wasm_core::hash::Fingerprint;

use super::{chunks::FpHasher, versions::manifest_fps, StoreError, StoreResult};

type FpMap<V> = HashMap<Fingerprint, V, std::hash::BuildHasherDefault<FpHasher>>;

/// Where a stored chunk belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Referenced by a source's newest version: stays in (or returns to) active containers.
    Hot,
    /// Committed, referenced by live versions but no newest one: archival, in the group of
    /// the newest live version referencing it.
    Cold(i64),
    /// Uploaded and not referenced by any version yet (a backup in progress, or abandoned):
    /// stays active; garbage collection decides by age.
    Pending,
    /// Committed once, referenced by no live version.
    Unreferenced,
}

/// The repository's live versions as one read transaction saw them.
pub struct Snapshot {
    /// Number of live versions and the highest id: if either differs later, a version was
    /// committed or deleted since (ids only grow, so equal count and maximum mean the same
    /// set when nothing was deleted in between, and a deletion lowers the count).
    pub count: i64,
    pub max_id: i64,
    /// Every referenced fingerprint -> the newest live version referencing it.
    newest_ref: FpMap<i64>,
    /// Fingerprints of each source's newest version.
    hot: HashSet<Fingerprint, std::hash::BuildHasherDefault<FpHasher>>,
}

/// Count and highest id of the repository's live versions.
pub fn version_mark(conn: &Connection, repo_id: i64) -> rusqlite::Result<(i64, i64)> {
    conn.prepare_cached("SELECT COUNT(*), COALESCE(MAX(id), 0) FROM versions WHERE repo_id = ?1")?
        .query_row([repo_id], |r| Ok((r.get(0)?, r.get(1)?)))
}

impl Snapshot {
    /// Reads every live manifest of the repository (in `conn`'s current transaction, if any).
    pub fn take(conn: &Connection, repo_id: i64) -> StoreResult<Snapshot> {
        let rows: Vec<(i64, String, Vec<u8>)> = {
            let mut st = conn.prepare_cached(
                "SELECT id, source, manifest FROM versions WHERE repo_id = ?1 ORDER BY id",
            )?;
            let it = st.query_map([repo_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            it.collect::<Result<_, _>>()?
        };
        let mut newest_of_source: HashMap<&str, i64> = HashMap::new();
        for (id, source, _) in &rows {
            newest_of_source.insert(source, *id); // ascending ids: the last one wins
        }
        let newest: HashSet<i64> = newest_of_source.values().copied().collect();
        let mut snap = Snapshot {
            count: rows.len() as i64,
            max_id: rows.last().map_or(0, |r| r.0),
            newest_ref: FpMap::default(),
            hot: Default::default(),
        };
        for (id, _, blob) in &rows {
            let fps = manifest_fps(blob).map_err(|e| {
                StoreError::Internal(format!("version {id}: unreadable manifest: {e}"))
            })?;
            let is_newest = newest.contains(id);
            for fp in fps {
                snap.newest_ref.insert(fp, *id); // ascending ids: the newest wins
                if is_newest {
                    snap.hot.insert(fp);
                }
            }
        }
        Ok(snap)
    }

    /// The class of a stored chunk; `committed` = its `first_version` is set.
    pub fn class(&self, fp: &Fingerprint, committed: bool) -> Class {
        if self.hot.contains(fp) {
            return Class::Hot;
        }
        match self.newest_ref.get(fp) {
            Some(&v) => Class::Cold(v),
            None if committed => Class::Unreferenced,
            None => Class::Pending,
        }
    }

    /// The newest live version referencing `fp` (0: none).
    pub fn newest_ref(&self, fp: &Fingerprint) -> i64 {
        self.newest_ref.get(fp).copied().unwrap_or(0)
    }

    /// Whether any live version references `fp`.
    pub fn referenced(&self, fp: &Fingerprint) -> bool {
        self.newest_ref.contains_key(fp)
    }

    /// Whether the live versions are still those this snapshot read.
    pub fn still_current(&self, conn: &Connection, repo_id: i64) -> rusqlite::Result<bool> {
        Ok(version_mark(conn, repo_id)? == (self.count, self.max_id))
    }
}
