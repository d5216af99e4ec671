//! Garbage collection: ICDA (HiDeStore §4.5, the Isolated Container Deletion Algorithm),
//! then mark and sweep, then compaction of the containers the sweep left sparse.
//!
//! ICDA deletes archival containers whose B_ID (`containers.newest_version`) is below the
//! smallest live version id, without reading their chunks: every version that references a
//! chunk of such a container has an id <= its B_ID (the mover groups cold chunks by the
//! newest live version referencing them, and every commit raises the B_ID of each container
//! it references), and no version with such an id is live. With versions expiring oldest
//! first and the mover idle, this is exact: the removed versions' chunks that no kept
//! version references are all in those containers.
//!
//! Mark and sweep covers the rest (a version deleted from the middle of a history, the
//! newest version of a source deleted, the layout switched off): mark = the fingerprints of
//! every live version's manifest; sweep = delete the index rows of the other chunks, except
//! pending ones younger than the grace period (a backup in progress uploaded them and has
//! not committed yet). Containers left without a live chunk are deleted; sparse ones are
//! compacted by the mover's evacuation.
//!
//! Each deciding transaction runs under the writer lock after checking that the live
//! versions are still those the mark read (else it marks again), increments the
//! repository's `gc_epoch` when it deletes chunk rows, and files are unlinked only after it
//! commits (docs/STORAGE.md, "Crash safety").

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use serde::Serialize;
use wasm_core::hash::Fingerprint;

use super::{
    crashpoint,
    index::{IndexRead, Lease},
    layout::Snapshot,
    mover::{layout_enabled, Moved, Source},
    now_ms, Store, StoreError, StoreResult,
};

/// Pending chunks younger than this are never swept (`DITTO_GC_GRACE_S` overrides).
const GRACE: Duration = Duration::from_secs(86_400);
/// A sweep gives up after this many marks that commits kept making stale.
const MAX_MARKS: u32 = 8;

pub fn grace() -> Duration {
    std::env::var("DITTO_GC_GRACE_S")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(GRACE, Duration::from_secs)
}

/// What a prune did (or, on a dry run, would find).
#[derive(Debug, Default, Serialize)]
pub struct PruneReport {
    pub dry_run: bool,
    /// Container bytes no live chunk occupies, before the run (after the mover).
    pub reclaimable_bytes: i64,
    /// Container bytes unlinked minus container bytes written.
    pub reclaimed_bytes: i64,
    pub containers_deleted: u64,
    /// Of `containers_deleted`, those ICDA deleted without reading their chunks.
    pub containers_icda: u64,
    pub containers_compacted: u64,
    pub bytes_rewritten: u64,
    pub chunks_deleted: u64,
    /// Whether mark and sweep ran.
    pub sweep: bool,
    pub seconds: f64,
    /// What the mover did first.
    pub moved: Moved,
}

impl PruneReport {
    /// Adds what a second prune right after this one did.
    pub fn absorb(&mut self, o: PruneReport) {
        self.reclaimed_bytes += o.reclaimed_bytes;
        self.containers_deleted += o.containers_deleted;
        self.containers_icda += o.containers_icda;
        self.containers_compacted += o.containers_compacted;
        self.bytes_rewritten += o.bytes_rewritten;
        self.chunks_deleted += o.chunks_deleted;
        self.sweep |= o.sweep;
        self.seconds += o.seconds;
        self.moved.add(&o.moved);
    }
}

/// A mover pass of a prune that failed for want of space counts as one that moved nothing:
/// it copies before it frees, while ICDA and the sweep only delete, so a full disk is when
/// they must still run (versions forgotten to make room would otherwise free nothing, and
/// every later prune stop at the same copy). The pass left nothing half done (a failed write
/// or switch keeps what was committed, docs/STORAGE.md "Crash safety").
fn short_of_space(pass: StoreResult<Moved>, what: &str) -> StoreResult<Moved> {
    match pass {
        Err(StoreError::NoSpace(why)) => {
            eprintln!("prune: the mover's {what} pass is short of space ({why}); freeing what needs no copy");
            Ok(Moved::default())
        }
        other => other,
    }
}

/// How much of a prune to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// ICDA only: versions expired oldest first, none of them a source's newest.
    IcdaOnly,
    /// ICDA, then mark and sweep.
    Full,
}

impl Store {
    /// Garbage-collects the repository: the mover first (so every cold chunk is in its
    /// archival group), then ICDA, then (if `sweep` says so) mark and sweep, then
    /// compaction. With `dry_run` only the mover runs and the reclaimable bytes are counted.
    pub fn prune(&self, repo_id: i64, dry_run: bool, sweep: Sweep) -> StoreResult<PruneReport> {
        let t0 = Instant::now();
        let (_local, lease) = self.maintenance()?;
        let mut rep = PruneReport {
            dry_run,
            moved: short_of_space(self.mover_pass(repo_id, "move", &lease), "move")?,
            ..Default::default()
        };
        // The mover's own net frees count: `reclaimed_bytes` is what the data directory
        // shrank by over the whole run.
        rep.reclaimed_bytes = rep.moved.bytes_freed;
        rep.reclaimable_bytes = self.reclaimable(repo_id)?;
        if dry_run {
            rep.reclaimed_bytes = 0;
            rep.seconds = t0.elapsed().as_secs_f64();
            return Ok(rep);
        }
        self.icda(repo_id, &mut rep, &lease)?;
        if sweep == Sweep::Full || !layout_enabled() {
            rep.sweep = true;
            self.sweep(repo_id, &mut rep, &lease)?;
        }
        let compacted = short_of_space(self.mover_pass(repo_id, "compact", &lease), "compact")?;
        rep.containers_compacted = compacted.containers_evacuated;
        rep.bytes_rewritten = rep.moved.bytes_rewritten + compacted.bytes_rewritten;
        rep.reclaimed_bytes += compacted.bytes_freed;
        {
            let w = self.writer_for_write()?;
            let tx = w.begin_fenced(repo_id, &lease)?;
            tx.add_reclaimed_bytes(repo_id, rep.reclaimed_bytes.max(0))?;
            tx.commit()?;
        }
        rep.seconds = t0.elapsed().as_secs_f64();
        Ok(rep)
    }

    /// Container data bytes that no live chunk occupies: dead slots plus chunks no live
    /// version references (pending ones past the grace period included).
    fn reclaimable(&self, repo_id: i64) -> StoreResult<i64> {
        let ix = self.snapshot()?;
        let snap = Snapshot::take(&*ix, repo_id)?;
        let data = ix.data_bytes(repo_id)?;
        let live: i64 = dead_rows(&*ix, repo_id, &snap, true)?
            .iter()
            .map(|d| d.stored_len)
            .sum();
        Ok(data - live)
    }

    /// ICDA: deletes the archival containers below the smallest live version id, whole.
    fn icda(&self, repo_id: i64, rep: &mut PruneReport, lease: &Lease) -> StoreResult<()> {
        if crashpoint::fails("prune:icda") {
            return Err(StoreError::Io(std::io::Error::other(
                "failure point prune:icda (DITTO_TEST_FAIL_AT)",
            )));
        }
        let gone = {
            let mut w = self.writer_for_write()?;
            let tx = w.begin_fenced(repo_id, lease)?;
            let min_live = tx.min_live_version(repo_id)?;
            let gone = keep_bases(&*tx, tx.archival_below(repo_id, min_live)?, repo_id)?;
            if gone.is_empty() {
                return Ok(());
            }
            for c in &gone {
                rep.chunks_deleted += tx.delete_container_chunks(c.id)?;
                tx.drop_container(c.id)?;
            }
            tx.bump_gc_epoch(repo_id)?;
            tx.commit()?;
            w.close_if_dropped(repo_id, gone.iter().map(|c| c.id));
            gone
        };
        self.forget_fp_cache(repo_id);
        crashpoint::reached("icda:switched");
        let ids: Vec<i64> = gone.iter().map(|c| c.id).collect();
        rep.reclaimed_bytes += self.unlink_containers(repo_id, &ids, &gone);
        rep.containers_deleted += ids.len() as u64;
        rep.containers_icda += ids.len() as u64;
        Ok(())
    }

    /// Mark and sweep: deletes the rows of chunks no live version references (and pending
    /// ones past the grace period) and the containers left without a live chunk.
    fn sweep(&self, repo_id: i64, rep: &mut PruneReport, lease: &Lease) -> StoreResult<()> {
        for _ in 0..MAX_MARKS {
            // The mark and the dead rows come from one read snapshot, without the writer
            // lock. Under it, an unchanged set of versions means no commit referenced a dead
            // chunk since; rows added since (uploads) are not in the list, and a row moved or
            // quarantined since no longer matches its delete.
            let (snap, dead) = {
                let ix = self.snapshot()?;
                let snap = Snapshot::take(&*ix, repo_id)?;
                let dead = dead_rows(&*ix, repo_id, &snap, false)?;
                (snap, dead)
            };
            if dead.is_empty() {
                return Ok(());
            }
            let gone = {
                let mut w = self.writer_for_write()?;
                let tx = w.begin_fenced(repo_id, lease)?;
                if !snap.still_current(&*tx, repo_id)? {
                    continue;
                }
                let mut touched: Vec<i64> = Vec::new();
                for d in &dead {
                    rep.chunks_deleted += tx.delete_chunk_in(repo_id, &d.fp, d.container_id)?;
                    touched.push(d.container_id);
                }
                touched.sort_unstable();
                touched.dedup();
                let mut gone = Vec::new();
                for id in touched {
                    if tx.container_chunk_count(id)? == 0 {
                        gone.push(tx.container_source(id)?);
                        tx.drop_container(id)?;
                    }
                }
                tx.bump_gc_epoch(repo_id)?;
                tx.commit()?;
                w.close_if_dropped(repo_id, gone.iter().map(|c: &Source| c.id));
                gone
            };
            self.forget_fp_cache(repo_id);
            crashpoint::reached("sweep:switched");
            let ids: Vec<i64> = gone.iter().map(|c| c.id).collect();
            rep.reclaimed_bytes += self.unlink_containers(repo_id, &ids, &gone);
            rep.containers_deleted += ids.len() as u64;
            return Ok(());
        }
        Ok(())
    }

    /// Drops the in-memory fingerprint set of a repository (chunks were deleted): the next
    /// `chunks/missing` reloads it from the index.
    fn forget_fp_cache(&self, repo_id: i64) {
        self.fp_cache
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&repo_id);
    }

    /// The repository's `gc_epoch`.
    pub fn gc_epoch(&self, repo_id: i64) -> StoreResult<i64> {
        self.index()?.gc_epoch(repo_id)
    }
}

/// A chunk row as the sweep sees it.
pub(crate) struct DeadRow {
    pub fp: Fingerprint,
    pub container_id: i64,
    pub stored_len: i64,
}

/// The chunk rows that are dead under `snap` (or, with `live`, those that are not).
fn dead_rows(
    ix: &dyn IndexRead,
    repo_id: i64,
    snap: &Snapshot,
    live: bool,
) -> StoreResult<Vec<DeadRow>> {
    let young = now_ms() as i64 - grace().as_millis() as i64;
    let mut out = Vec::new();
    ix.chunk_rows(repo_id, &mut |c| {
        // Uploaded, never committed, and stored within the grace period: a backup at work.
        let young_pending = !c.committed && c.stored_ms > young;
        let is_live = snap.referenced(&c.fp) || young_pending;
        if is_live == live {
            out.push(DeadRow {
                fp: c.fp,
                container_id: c.container_id,
                stored_len: c.stored_len as i64,
            });
        }
        Ok(())
    })?;
    Ok(out)
}

/// ICDA's containers minus those holding the base of a delta chunk that stays: the B_ID
/// of a base's container covers the versions that reference the base itself, and a
/// commit raises it for them, but not for a later version that references only a delta
/// decoded against it. Such a container is left to the sweep, which follows base edges
/// (`Snapshot`), and to compaction.
fn keep_bases(ix: &dyn IndexRead, mut gone: Vec<Source>, repo_id: i64) -> StoreResult<Vec<Source>> {
    if gone.is_empty() {
        return Ok(gone);
    }
    let edges = ix.delta_edges(repo_id)?;
    if edges.is_empty() {
        return Ok(gone);
    }
    let mut container_of: HashMap<Fingerprint, i64> = HashMap::new();
    for c in &gone {
        for r in ix.live_rows(c.id)? {
            container_of.insert(r.fp, c.id);
        }
    }
    loop {
        let leaving: HashSet<i64> = gone.iter().map(|c| c.id).collect();
        let kept: HashSet<i64> = edges
            .iter()
            .filter(|(fp, _)| !container_of.get(fp).is_some_and(|c| leaving.contains(c)))
            .filter_map(|(_, base)| container_of.get(base).copied())
            .filter(|c| leaving.contains(c))
            .collect();
        if kept.is_empty() {
            return Ok(gone);
        }
        gone.retain(|c| !kept.contains(&c.id));
    }
}
