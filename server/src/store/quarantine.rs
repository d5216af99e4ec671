//! Quarantine: what happens to a stored chunk found damaged.
//!
//! A chunk whose stored bytes no longer decode to its fingerprint (or whose container is
//! damaged or gone) must never be served and must not satisfy deduplication, or every later
//! backup would point at the rotten copy. Its index row therefore moves from `chunks` to
//! `quarantine` in one transaction: from then on the chunk is *not stored* (`chunks/missing`
//! asks for it, a version commit that references it gets 409), and the versions that
//! reference it count it in `versions.damaged`. The next upload of the good bytes stores a
//! new copy at a new place; that heals every version referencing the fingerprint, since
//! recipes name chunks by fingerprint, not by place. The quarantine row stays as the record
//! of the damaged copy (`healed_ms` set), so `check` can tell its container slot apart from
//! a broken index.
//!
//! A chunk that is a delta's base (docs/FORMAT.md, codec 2: a chunk, a trained dictionary
//! or a frame) takes its dependents along: a delta decodes only through its base, so once
//! the base is not stored neither is the delta, whatever the state of its own bytes. Left
//! stored, the delta would satisfy every later backup's `chunks/missing` while no read of it
//! can succeed. Quarantined with its base, it is uploaded again whole by the next backup of
//! the files that hold it, which heals the versions naming it.

use std::collections::{HashMap, HashSet};

use wasm_core::hash::{to_hex, Fingerprint};

pub use super::index::quarantine::Found;
use super::index::{quarantine::Recount, IndexRead, IndexWrite, IndexWriter};
use super::{now_ms, StoreResult};

/// Moves the index rows of `found` and of the deltas stored against them into quarantine and
/// recounts the versions that reference them. Runs in the caller's transaction. Returns the
/// fingerprints actually quarantined, dependents included.
pub fn quarantine(
    ix: &dyn IndexWrite,
    repo_id: i64,
    found: &[Found],
) -> StoreResult<Vec<Fingerprint>> {
    let mut moved = Vec::new();
    let now = now_ms() as i64;
    for f in found {
        if ix.quarantine_chunk(repo_id, f, now)? {
            moved.push(f.fp);
        }
    }
    if !moved.is_empty() {
        for f in dependents(ix, repo_id, &moved)? {
            if ix.quarantine_chunk(repo_id, &f, now)? {
                moved.push(f.fp);
            }
        }
        let touched: HashSet<Fingerprint> = moved.iter().copied().collect();
        recount_versions(ix, repo_id, Some(&touched), false)?;
    }
    Ok(moved)
}

/// The stored deltas whose chain of bases reaches one of `bases`, each with its place and
/// the base that fails it. Read from the repository's base edges once: quarantine is rare,
/// and one container found damaged may hold thousands of bases.
fn dependents(ix: &dyn IndexWrite, repo_id: i64, bases: &[Fingerprint]) -> StoreResult<Vec<Found>> {
    let mut of_base: HashMap<Fingerprint, Vec<Fingerprint>> = HashMap::new();
    for (fp, base) in ix.delta_edges(repo_id)? {
        of_base.entry(base).or_default().push(fp);
    }
    let mut seen: HashSet<Fingerprint> = bases.iter().copied().collect();
    let mut todo: Vec<Fingerprint> = bases.to_vec();
    let mut out = Vec::new();
    while let Some(base) = todo.pop() {
        for fp in of_base.get(&base).into_iter().flatten() {
            if !seen.insert(*fp) {
                continue;
            }
            todo.push(*fp);
            if let Some(loc) = ix.chunk_location(repo_id, fp)? {
                out.push(Found {
                    fp: *fp,
                    container_id: loc.container_id,
                    offset: loc.offset,
                    reason: format!("its delta base {} is not stored", to_hex(&base)),
                });
            }
        }
    }
    Ok(out)
}

/// Quarantines the chunks of one container: all of them, or (`past = Some(len)`) those whose
/// bytes reach past `len`. For recovery: a damaged header, a missing or short file.
pub fn quarantine_container(
    ix: &dyn IndexWrite,
    repo_id: i64,
    container_id: u64,
    past: Option<u64>,
    reason: &str,
) -> StoreResult<Vec<Fingerprint>> {
    let found: Vec<Found> = ix
        .container_chunk_extents(repo_id, container_id)?
        .into_iter()
        .filter(|&(_, offset, stored)| past.is_none_or(|len| offset.saturating_add(stored) > len))
        .map(|(fp, offset, _)| Found {
            fp,
            container_id,
            offset,
            reason: reason.to_string(),
        })
        .collect();
    quarantine(ix, repo_id, &found)
}

/// Of `fps` (about to be stored), those that replace a quarantined copy.
pub fn healing(
    ix: &dyn IndexRead,
    repo_id: i64,
    fps: impl Iterator<Item = Fingerprint>,
) -> StoreResult<Vec<Fingerprint>> {
    // A cheap test first: uploads skip the per-chunk lookups in the normal case.
    if !ix.any_quarantined(repo_id)? {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for fp in fps {
        if ix.is_quarantined(repo_id, &fp)? {
            out.push(fp);
        }
    }
    Ok(out)
}

/// After `stored` were stored (in the caller's transaction), `healing` among them replacing
/// quarantined copies: the quarantine rows are closed, the new rows keep the version that
/// first referenced the chunk (so later versions' "new bytes" stats stay right), and the
/// damaged versions that reference any of `stored` are recounted.
pub fn stored(
    ix: &dyn IndexWrite,
    repo_id: i64,
    stored: &[Fingerprint],
    healing: &[Fingerprint],
) -> StoreResult<()> {
    let now = now_ms() as i64;
    for fp in healing {
        ix.heal_quarantined(repo_id, fp, now)?;
    }
    if ix.any_damaged_version(repo_id)? {
        let touched: HashSet<Fingerprint> = stored.iter().copied().collect();
        recount_versions(ix, repo_id, Some(&touched), true)?;
    }
    Ok(())
}

/// Counts `versions.damaged` where it is unknown (-1, set by a schema migration), one
/// transaction of `writer` per repository; returns how many versions turned out damaged.
pub fn recount_unknown(ix: &dyn IndexRead, writer: &dyn IndexWriter) -> StoreResult<usize> {
    let repos = ix.repos_with_unknown_damage()?;
    let mut damaged = 0;
    for repo_id in repos {
        let tx = writer.begin()?;
        recount(&*tx, repo_id, None, Recount::Unknown)?;
        damaged += tx.damaged_version_count(repo_id)? as usize;
        tx.commit()?;
    }
    Ok(damaged)
}

/// Sets `versions.damaged` = the number of distinct recipe chunks that are not stored, for
/// the versions of `repo_id` (only those already damaged when `only_damaged`; only those
/// referencing a chunk of `touched` when given).
pub fn recount_versions(
    ix: &dyn IndexWrite,
    repo_id: i64,
    touched: Option<&HashSet<Fingerprint>>,
    only_damaged: bool,
) -> StoreResult<()> {
    recount(
        ix,
        repo_id,
        touched,
        if only_damaged {
            Recount::Damaged
        } else {
            Recount::All
        },
    )
}

/// [`recount_versions`] over the versions `which` picks.
fn recount(
    ix: &dyn IndexWrite,
    repo_id: i64,
    touched: Option<&HashSet<Fingerprint>>,
    which: Recount,
) -> StoreResult<()> {
    let versions = ix.versions_to_recount(repo_id, which)?;
    let damaged: HashMap<i64, i64> = versions.iter().map(|v| (v.id, v.damaged)).collect();
    let chains = super::versions::ManifestChains::new(ix, repo_id);
    chains.each(versions.iter().map(|v| (v.id, &v.manifest)), |id, json| {
        // An unreadable manifest is `check`'s to report; it cannot be counted here.
        let Ok(fps) = json
            .map_err(|e| e.to_string())
            .and_then(super::versions::manifest_fps)
        else {
            return Ok(());
        };
        if touched.is_some_and(|t| !fps.iter().any(|fp| t.contains(fp))) {
            return Ok(());
        }
        let mut n = 0i64;
        for fp in &fps {
            if !ix.chunk_stored(repo_id, fp)? {
                n += 1;
            }
        }
        if n != damaged[&id] {
            ix.set_version_damage(id, n)?;
        }
        Ok(())
    })
}

impl super::Store {
    /// The repository's damage as the index knows it: the damaged versions (id, count of
    /// their chunks not stored) and the count of distinct chunks still quarantined.
    pub fn damage(&self, repo_id: i64) -> StoreResult<(Vec<(i64, i64)>, i64)> {
        let ix = self.index()?;
        let versions = ix.damaged_versions(repo_id)?;
        let quarantined = ix.quarantined_count(repo_id)?;
        Ok((versions, quarantined))
    }
}
