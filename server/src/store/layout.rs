//! HiDeStore's chunk classes (Li, Hua, Cao et al. 2024, §4.2): which stored chunks are
//! *hot* (the newest version of some source references them), which are *cold* (committed,
//! referenced by no source's newest version) and to which archival group a cold chunk
//! belongs (the newest live version referencing it, the paper's B_ID), plus what garbage
//! collection needs from the same pass over the manifests: which chunks any live version
//! references. docs/STORAGE.md defines the terms. A delta chunk's base counts as referenced
//! by whatever references the delta.
//!
//! The classes come from the manifests, not from a client-side cache as in the paper: the
//! server holds every recipe, so it classifies exactly, and several sources sharing a
//! repository are handled by taking the union of their newest versions as the hot set.

use std::collections::{HashMap, HashSet};

use wasm_core::{hash::Fingerprint, resemble::delta::MAX_CHAIN_DEPTH};

use super::{
    chunks::{FpMap, FpSet},
    index::IndexRead,
    versions::ManifestChains,
    StoreResult,
};

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
    hot: FpSet,
}

impl Snapshot {
    /// Reads every live manifest of the repository (in `ix`'s transaction, if it has one).
    pub fn take(ix: &dyn IndexRead, repo_id: i64) -> StoreResult<Snapshot> {
        let rows = ix.live_manifests(repo_id)?;
        let mut newest_of_source: HashMap<&str, i64> = HashMap::new();
        for v in &rows {
            newest_of_source.insert(&v.source, v.id); // ascending ids: the last one wins
        }
        let newest: HashSet<i64> = newest_of_source.values().copied().collect();
        let mut snap = Snapshot {
            count: rows.len() as i64,
            max_id: rows.last().map_or(0, |r| r.id),
            newest_ref: FpMap::default(),
            hot: Default::default(),
        };
        let chains = ManifestChains::new(ix, repo_id);
        chains.each_fps(rows.iter().map(|v| (v.id, &v.manifest)), |id, fps| {
            let is_newest = newest.contains(&id);
            for fp in fps {
                snap.newest_ref.insert(fp, id); // ascending ids: the newest wins
                if is_newest {
                    snap.hot.insert(fp);
                }
            }
            Ok(())
        })?;
        snap.follow_bases(&ix.delta_edges(repo_id)?);
        Ok(snap)
    }

    /// A delta chunk's base is needed by every version that needs the delta (docs/FORMAT.md,
    /// codec 2): it is referenced, hot and grouped as its newest dependent is, so that the
    /// sweep keeps it and the mover files it where ICDA deletes it no earlier than the
    /// delta. Chains are at most `MAX_CHAIN_DEPTH` links, so as many rounds reach every
    /// base; a longer (invalid) chain still ends, at the last round.
    fn follow_bases(&mut self, edges: &[(Fingerprint, Fingerprint)]) {
        for _ in 0..=MAX_CHAIN_DEPTH {
            let mut changed = false;
            for (fp, base) in edges {
                if let Some(&v) = self.newest_ref.get(fp) {
                    let b = self.newest_ref.entry(*base).or_insert(0);
                    if *b < v {
                        *b = v;
                        changed = true;
                    }
                }
                if self.hot.contains(fp) && self.hot.insert(*base) {
                    changed = true;
                }
            }
            if !changed {
                return;
            }
        }
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
    pub fn still_current(&self, ix: &dyn IndexRead, repo_id: i64) -> StoreResult<bool> {
        Ok(ix.version_mark(repo_id)? == (self.count, self.max_id))
    }
}
