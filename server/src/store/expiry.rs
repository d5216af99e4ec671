//! Expiry: removing versions chosen by a retention policy (`retention.rs`) or by id, then
//! pruning (`gc.rs`); or, on a dry run, saying which versions would go and how many stored
//! bytes that frees, by the same mark a prune uses (docs/STORAGE.md, "Expiry").

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use wasm_core::hash::Fingerprint;

use super::{
    chunks::FpSet,
    crashpoint,
    gc::{PruneReport, Sweep},
    mover::layout_enabled,
    retention::{self, Policy, Reason, VersionMeta},
    versions::ManifestChains,
    Store, StoreError, StoreResult,
};

/// Which versions to remove.
pub enum Selector {
    /// A retention policy, for one source or for each source separately.
    Policy {
        policy: Policy,
        source: Option<String>,
    },
    /// These versions of the repository.
    Versions(Vec<i64>),
    /// A previewed policy applied: exactly these versions, each only if the policy still
    /// removes it when they are removed. Versions removed or added since the preview can
    /// make it keep one it removed then (a `keep_last 1` whose newest version was deleted
    /// meanwhile keeps the one before): then nothing is removed.
    Previewed {
        policy: Policy,
        source: Option<String>,
        versions: Vec<i64>,
    },
}

/// A forget gives up after this many selections that other forgets kept making stale (by
/// removing versions they read) before it could remove them.
const MAX_SELECTIONS: u32 = 8;

#[derive(Debug, Serialize)]
pub struct Listed {
    pub id: i64,
    pub source: String,
    pub time: i64,
}

#[derive(Debug, Serialize)]
pub struct Kept {
    pub id: i64,
    pub source: String,
    pub time: i64,
    pub reasons: Vec<Reason>,
}

#[derive(Debug, Serialize)]
pub struct ForgetReport {
    pub dry_run: bool,
    pub remove: Vec<Listed>,
    pub keep: Vec<Kept>,
    /// Stored bytes (and count) of the chunks that only removed versions reference.
    pub freed_bytes: i64,
    pub freed_chunks: i64,
    /// What the data directory shrank by (0 on a dry run).
    pub reclaimed_bytes: i64,
    pub prune: Option<PruneReport>,
    /// Why the prune after the removal failed (the versions are removed all the same; the
    /// next prune frees what this one did not).
    pub prune_error: Option<String>,
}

impl Store {
    /// Removes the versions `sel` picks and prunes, or with `dry_run` only reports.
    ///
    /// The selection is read outside the writer lock (reading every manifest for
    /// `freed_bytes` takes a while) and made again if, under the lock, a version it read is
    /// gone: a version removed meanwhile can make the policy keep one it removed (a
    /// `keep_last 1` whose newest was deleted keeps the one before). Versions committed
    /// meanwhile cannot: a rule keeps the newest of what it looks at, so more versions only
    /// make it keep fewer of the older ones, and a selection removes no version it kept.
    pub fn forget(&self, repo_id: i64, sel: &Selector, dry_run: bool) -> StoreResult<ForgetReport> {
        for _ in 0..MAX_SELECTIONS {
            let all: Vec<VersionMeta> = self.index()?.version_metas(repo_id)?;
            let (mut rep, freed) = self.selection(repo_id, &all, sel, dry_run)?;
            if dry_run || rep.remove.is_empty() {
                return Ok(rep);
            }
            let remove: Vec<i64> = rep.remove.iter().map(|v| v.id).collect();
            {
                let w = self.writer_for_write()?;
                let tx = w.begin(repo_id)?;
                let now: HashSet<i64> = tx.version_metas(repo_id)?.iter().map(|v| v.id).collect();
                if all.iter().any(|v| !now.contains(&v.id)) {
                    continue;
                }
                super::versions::delete_versions(&*tx, repo_id, &remove)?;
                tx.commit()?;
            }
            crashpoint::reached("forget:deleted");
            // The versions are gone: a prune that fails now is reported beside them, not
            // instead of them.
            match self.prune_after(repo_id, &all, &remove, &freed) {
                Ok(p) => {
                    rep.reclaimed_bytes = p.reclaimed_bytes;
                    rep.prune = Some(p);
                }
                Err(e) => {
                    eprintln!("forget: versions {remove:?} removed; the prune after failed: {e}");
                    rep.prune_error = Some(e.to_string());
                }
            }
            return Ok(rep);
        }
        Err(StoreError::Changed(
            "versions kept being removed while this forget chose among them; try again".into(),
        ))
    }

    /// What forgetting `sel` among versions `all` removes, keeps and frees, and the chunks
    /// it frees. For a previewed policy, a version the policy would remove now but that is
    /// not among the previewed ones (committed since) is in neither list.
    fn selection(
        &self,
        repo_id: i64,
        all: &[VersionMeta],
        sel: &Selector,
        dry_run: bool,
    ) -> StoreResult<(ForgetReport, Vec<Fingerprint>)> {
        let by_id: HashMap<i64, &VersionMeta> = all.iter().map(|v| (v.id, v)).collect();
        let (remove, keep): (Vec<i64>, Vec<(i64, Vec<Reason>)>) = match sel {
            Selector::Policy { policy, source } => {
                let s = retention::select(all, policy, source.as_deref());
                (s.remove, s.keep)
            }
            Selector::Versions(ids) => {
                if let Some(id) = ids.iter().find(|id| !by_id.contains_key(id)) {
                    return Err(StoreError::NotFound(format!(
                        "no version {id} in this repository"
                    )));
                }
                let want: HashSet<i64> = ids.iter().copied().collect();
                let mut remove: Vec<i64> = want.into_iter().collect();
                remove.sort_unstable_by(|a, b| b.cmp(a));
                let keep = all
                    .iter()
                    .rev()
                    .filter(|v| !remove.contains(&v.id))
                    .map(|v| (v.id, Vec::new()))
                    .collect();
                (remove, keep)
            }
            Selector::Previewed {
                policy,
                source,
                versions,
            } => {
                let s = retention::select(all, policy, source.as_deref());
                let now: HashSet<i64> = s.remove.iter().copied().collect();
                if let Some(id) = versions.iter().find(|id| !now.contains(id)) {
                    let what = if by_id.contains_key(id) {
                        format!("the policy keeps version {id} now")
                    } else {
                        format!("version {id} is gone")
                    };
                    return Err(StoreError::Changed(format!(
                        "{what}: the versions changed since the preview, so nothing was \
                         removed; preview again"
                    )));
                }
                let want: HashSet<i64> = versions.iter().copied().collect();
                let remove = s
                    .remove
                    .into_iter()
                    .filter(|id| want.contains(id))
                    .collect();
                (remove, s.keep)
            }
        };
        let removed: HashSet<i64> = remove.iter().copied().collect();
        let (freed_bytes, freed) = self.freed_by(repo_id, &removed)?;
        let listed = |id: &i64| {
            let v = by_id[id];
            Listed {
                id: v.id,
                source: v.source.clone(),
                time: v.time,
            }
        };
        let rep = ForgetReport {
            dry_run,
            remove: remove.iter().map(listed).collect(),
            keep: keep
                .into_iter()
                .map(|(id, reasons)| {
                    let v = by_id[&id];
                    Kept {
                        id,
                        source: v.source.clone(),
                        time: v.time,
                        reasons,
                    }
                })
                .collect(),
            freed_bytes,
            freed_chunks: freed.len() as i64,
            reclaimed_bytes: 0,
            prune: None,
            prune_error: None,
        };
        Ok((rep, freed))
    }

    /// The prune after versions `remove` of `all` were removed, freeing `freed`.
    fn prune_after(
        &self,
        repo_id: i64,
        all: &[VersionMeta],
        remove: &[i64],
        freed: &[Fingerprint],
    ) -> StoreResult<PruneReport> {
        let removed: HashSet<i64> = remove.iter().copied().collect();
        // ICDA alone is exact when the removed versions are older than every kept one and
        // none was a source's newest (its chunks are hot, in active containers).
        let newest: HashSet<i64> = {
            let mut m: HashMap<&str, i64> = HashMap::new();
            for v in all {
                m.insert(&v.source, v.id);
            }
            m.into_values().collect()
        };
        let min_kept = all
            .iter()
            .filter(|v| !removed.contains(&v.id))
            .map(|v| v.id)
            .min()
            .unwrap_or(i64::MAX);
        let oldest_first = remove
            .iter()
            .all(|id| *id < min_kept && !newest.contains(id));
        let sweep = if oldest_first && layout_enabled() {
            Sweep::IcdaOnly
        } else {
            Sweep::Full
        };
        let mut p = self.prune(repo_id, false, sweep)?;
        // ICDA frees whole containers; a freed chunk it left (its container also holds
        // chunks of kept versions, e.g. after an earlier middle deletion) is the sweep's.
        if !p.sweep && self.any_stored(repo_id, freed)? {
            let more = self.prune(repo_id, false, Sweep::Full)?;
            p.absorb(more);
        }
        Ok(p)
    }

    /// Whether any of `fps` is stored.
    fn any_stored(&self, repo_id: i64, fps: &[Fingerprint]) -> StoreResult<bool> {
        self.index()?.any_stored(repo_id, fps)
    }

    /// The stored bytes of the chunks that versions `removed` reach and no other live version
    /// does, and those chunks. A version reaches the chunks its manifest names and, through
    /// their base chains, the bases of its delta chunks, as garbage collection keeps them
    /// (docs/STORAGE.md): so a removed version's chunk that a kept version's delta is stored
    /// against is not freed, and a base only removed versions need (a trained dictionary) is.
    fn freed_by(
        &self,
        repo_id: i64,
        removed: &HashSet<i64>,
    ) -> StoreResult<(i64, Vec<Fingerprint>)> {
        if removed.is_empty() {
            return Ok((0, Vec::new()));
        }
        let ix = self.snapshot()?;
        let rows = ix.manifests(repo_id)?;
        let mut gone = FpSet::default();
        let mut kept = FpSet::default();
        let chains = ManifestChains::new(&*ix, repo_id);
        chains.each_fps_or(
            rows.iter().map(|(id, m)| (*id, m)),
            |id, fps| {
                if removed.contains(&id) {
                    gone.extend(fps);
                } else {
                    kept.extend(fps);
                }
                Ok(())
            },
            // A removed version whose manifest cannot be read is still removed (else a
            // damaged one could never go, and would block every forget and prune): its
            // chunks are not counted as freed here, and the sweep frees them.
            |id, e| {
                if removed.contains(&id) {
                    Ok(())
                } else {
                    Err(super::versions::unreadable_manifest(id, &e))
                }
            },
        )?;
        let base_of: HashMap<Fingerprint, Fingerprint> =
            ix.delta_edges(repo_id)?.into_iter().collect();
        let (gone, kept) = (with_bases(gone, &base_of), with_bases(kept, &base_of));
        let (mut bytes, mut freed) = (0i64, Vec::new());
        for fp in gone.difference(&kept) {
            if let Some(n) = ix.stored_len(repo_id, fp)? {
                bytes += n;
                freed.push(*fp);
            }
        }
        Ok((bytes, freed))
    }
}

/// `fps` with every link of their delta chains (`base_of`: a delta chunk's base).
fn with_bases(mut fps: FpSet, base_of: &HashMap<Fingerprint, Fingerprint>) -> FpSet {
    let mut todo: Vec<Fingerprint> = fps.iter().copied().collect();
    while let Some(fp) = todo.pop() {
        if let Some(base) = base_of.get(&fp) {
            if fps.insert(*base) {
                todo.push(*base);
            }
        }
    }
    fps
}
