//! The HiDeStore mover (Li, Hua, Cao et al. 2024, §4.2, "chunk filter"): after a commit,
//! cold chunks are copied out of active containers into archival containers grouped by the
//! newest live version that references them, the index is switched to the copies in one
//! transaction, and the evacuated containers are deleted. Compaction (§4.2, Fig. 6: sparse
//! containers merged) is the same evacuation applied to containers with few live bytes,
//! which garbage collection also uses after a sweep (`gc.rs`).
//!
//! Evacuating a container rewrites all of its live chunks, hot ones into new dense active
//! containers, so the old file can be deleted whole: container files are never rewritten
//! in place, and every step is a new file made durable before an index row points at it, or
//! an index row removed before its file is unlinked. docs/STORAGE.md lists the steps, their
//! crash points and the invariants.
//!
//! Concurrency: the copy runs without the writer lock; the switch takes it for one
//! transaction and first checks that no version was committed or deleted since the
//! snapshot that classified the chunks (else the copies are discarded and the pass starts
//! over). Every row update names the slot it moves from, so a chunk quarantined or healed
//! meanwhile keeps its new state. One maintenance pass (mover or garbage collection) runs at
//! a time per store.

use std::{
    collections::{BTreeMap, HashSet},
    sync::{atomic::Ordering, Arc},
};

use wasm_core::{
    format::container::{
        ContainerHeader, ContainerKind, TableEntry, DEFAULT_TABLE_CAPACITY, TARGET_DATA_BYTES,
    },
    hash::to_hex,
};

use super::{
    crashpoint,
    index::{
        maintenance::{ChunkMove, WrittenContainer},
        IndexRead, Lease,
    },
    layout::{Class, Snapshot},
    now_ms, quarantine, verify, Store, StoreError, StoreResult,
};

pub(crate) use super::index::maintenance::Source;

/// An active container is evacuated when at least this fraction of its data bytes is cold
/// (or unreferenced). 0 moves every cold chunk as soon as it is cold, which is what makes
/// expiry by whole containers (ICDA) exact; docs/BENCHMARKS.md has the figures.
const MOVE_THRESHOLD: f64 = 0.0;
/// Compaction threshold: an active container whose live bytes are below this fraction of a
/// full container's is merged with the other such ones; an archival container whose live
/// bytes are below this fraction of its data bytes is rewritten without its dead slots.
/// docs/BENCHMARKS.md ("Storage engine") has the figures it is chosen from.
const COMPACT_THRESHOLD: f64 = 0.5;
/// About this many bytes are copied per switch (one transaction under the writer lock).
const BATCH_BYTES: i64 = 16 << 20;
/// The background mover starts once backups have been quiet this long ...
const QUIET: std::time::Duration = std::time::Duration::from_millis(1500);
/// ... or once it has waited this long (a server that is never quiet still gets its layout).
const MAX_DEFER: std::time::Duration = std::time::Duration::from_secs(60);
/// At most this many chunk rows are re-pointed per switch transaction.
const SWITCH_ROWS: usize = 256;
/// A pass gives up after this many abandoned switches in a row (versions kept changing).
const MAX_RETRIES: u32 = 8;

fn threshold(var: &str, default: f64) -> f64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|v| (0.0..=1.0).contains(v))
        .unwrap_or(default)
}

pub fn move_threshold() -> f64 {
    threshold("DITTO_MOVE_THRESHOLD", MOVE_THRESHOLD)
}

pub fn compact_threshold() -> f64 {
    threshold("DITTO_COMPACT_THRESHOLD", COMPACT_THRESHOLD)
}

/// Whether the HiDeStore layout is on (`DITTO_LAYOUT=off` keeps every chunk where it was
/// uploaded, in arrival order: the baseline the benchmark compares against).
pub fn layout_enabled() -> bool {
    std::env::var("DITTO_LAYOUT").map_or(true, |v| v != "off")
}

/// What one or more evacuations did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Moved {
    pub containers_evacuated: u64,
    pub containers_written: u64,
    pub chunks_moved: u64,
    pub bytes_rewritten: u64,
    /// Container bytes unlinked minus container bytes written.
    pub bytes_freed: i64,
    pub passes_abandoned: u64,
    /// The longest time one switch held the writer lock (uploads and commits wait that long).
    pub longest_switch_ms: f64,
    /// All switches together: the cost of keeping the location index right.
    pub switch_ms: f64,
}

impl Moved {
    pub(crate) fn add(&mut self, o: &Moved) {
        self.containers_evacuated += o.containers_evacuated;
        self.containers_written += o.containers_written;
        self.chunks_moved += o.chunks_moved;
        self.bytes_rewritten += o.bytes_rewritten;
        self.bytes_freed += o.bytes_freed;
        self.passes_abandoned += o.passes_abandoned;
        self.longest_switch_ms = self.longest_switch_ms.max(o.longest_switch_ms);
        self.switch_ms += o.switch_ms;
    }
}

/// A destination: active, or the archival group of a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Dest {
    Active,
    Archival(i64),
}

/// A new container being filled in memory.
pub(super) struct Building {
    kind: ContainerKind,
    newest_version: i64,
    pub(super) data: Vec<u8>,
    pub(super) table: Vec<u8>,
    /// (fp, old container, old slot, new slot, new offset relative to the data start)
    pub(super) moves: Vec<Move>,
}

/// A chunk's move: fp, old container, old slot, new slot, new offset.
type Move = ChunkMove;

impl Building {
    pub(super) fn new(dest: Dest) -> Building {
        let (kind, newest_version) = match dest {
            Dest::Active => (ContainerKind::Active, 0),
            Dest::Archival(g) => (ContainerKind::Archival, g),
        };
        Building {
            kind,
            newest_version,
            data: Vec::new(),
            table: Vec::new(),
            moves: Vec::new(),
        }
    }

    pub(super) fn has_room(&self, len: usize) -> bool {
        self.moves.len() < DEFAULT_TABLE_CAPACITY as usize
            && (self.moves.is_empty() || (self.data.len() + len) as u64 <= TARGET_DATA_BYTES)
    }
}

/// A new container written and fsynced, not yet in the index.
pub(super) struct Written {
    pub(super) id: u64,
    pub(super) header: ContainerHeader,
    pub(super) data_end: u64,
    pub(super) moves: Vec<Move>,
}

impl Written {
    /// The container's index row; `sealed` when it takes no appends.
    pub(super) fn row(&self, repo_id: i64, sealed: bool) -> WrittenContainer {
        let h = &self.header;
        WrittenContainer {
            id: self.id as i64,
            repo_id,
            kind: h.kind as u8,
            data_offset: h.data_offset as i64,
            data_end: self.data_end as i64,
            chunk_count: self.moves.len() as i64,
            newest_version: h.newest_version,
            created_ms: h.created_ms as i64,
            sealed,
        }
    }
}

impl Store {
    /// Runs the mover over a repository until no container needs evacuating.
    pub fn run_mover(&self, repo_id: i64) -> StoreResult<Moved> {
        let (_local, lease) = self.maintenance()?;
        self.mover_pass(repo_id, "move", &lease)
    }

    /// Waits until no backup has asked, uploaded or committed for [`QUIET`], or at most
    /// [`MAX_DEFER`]: on a machine of few cores the mover's reads, hashing and fsyncs would
    /// otherwise slow the backup that follows a commit (HiDeStore moves chunks offline).
    fn wait_until_quiet(&self) {
        let start = std::time::Instant::now();
        loop {
            let last = self.last_backup_ms.load(Ordering::Relaxed);
            let quiet = now_ms().saturating_sub(last);
            if quiet >= QUIET.as_millis() as u64 || start.elapsed() >= MAX_DEFER {
                return;
            }
            std::thread::sleep(QUIET - std::time::Duration::from_millis(quiet));
        }
    }

    /// What the mover and compaction did in the repository since the server started.
    pub fn mover_totals(&self, repo_id: i64) -> Moved {
        let t = self.mover_totals.lock().unwrap_or_else(|p| p.into_inner());
        t.get(&repo_id).cloned().unwrap_or_default()
    }

    /// Evacuates misplaced (with the layout on) and sparse containers until none is left;
    /// `point` names the crash points (`move`, or `compact` after a sweep). The caller holds
    /// the maintenance lock.
    pub(crate) fn mover_pass(
        &self,
        repo_id: i64,
        point: &str,
        lease: &Lease,
    ) -> StoreResult<Moved> {
        let m = self.mover_run(repo_id, point, lease)?;
        self.mover_totals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(repo_id)
            .or_default()
            .add(&m);
        Ok(m)
    }

    fn mover_run(&self, repo_id: i64, point: &str, lease: &Lease) -> StoreResult<Moved> {
        let mut total = Moved::default();
        let layout = layout_enabled();
        let mut retries = 0;
        let mut done: HashSet<i64> = HashSet::new();
        let mut snap: Option<Snapshot> = None;
        loop {
            let batch = {
                let open = self.open_container_id(repo_id);
                let ix = self.snapshot()?;
                // The classes come from the manifests, read once per pass (the mover itself
                // changes no version; a switch that finds them changed starts over).
                if snap.is_none() {
                    snap = Some(Snapshot::take(&*ix, repo_id)?);
                }
                pick_for_move(&*ix, repo_id, snap.as_ref().unwrap(), open, &done, layout)?
            };
            if batch.is_empty() {
                return Ok(total);
            }
            match self.evacuate(
                repo_id,
                snap.as_ref().unwrap(),
                &batch,
                point,
                layout,
                lease,
            )? {
                Some(m) => {
                    total.add(&m);
                    retries = 0;
                    // Each container is handled once per pass: one that kept live chunks
                    // (placed right, or appended to meanwhile) is not picked again.
                    done.extend(batch.iter().map(|p| p.src.id));
                }
                None => {
                    snap = None;
                    total.passes_abandoned += 1;
                    retries += 1;
                    if retries >= MAX_RETRIES {
                        return Ok(total);
                    }
                }
            }
        }
    }

    /// The id of the container the writer appends to in the repository, if one is open.
    pub(crate) fn open_container_id(&self, repo_id: i64) -> Option<i64> {
        self.writer().open.get(&repo_id).map(|oc| oc.id as i64)
    }

    /// Copies chunks of the picked containers into new containers by class (all live chunks
    /// of a container picked whole, else only its misplaced ones), switches the index to the
    /// copies and deletes the containers it emptied. `None`: the versions changed since
    /// `snap`, nothing was switched (the copies are deleted). `point` names the crash points
    /// (`move` or `compact`); without `layout` every copy goes to an active container.
    fn evacuate(
        &self,
        repo_id: i64,
        snap: &Snapshot,
        picks: &[Pick],
        point: &str,
        layout: bool,
        lease: &Lease,
    ) -> StoreResult<Option<Moved>> {
        let sources: Vec<Source> = picks.iter().map(|p| p.src.clone()).collect();
        let sources = &sources[..];
        let mut moved = Moved::default();
        // 1. Read and verify the live chunks, sort them into destinations.
        let mut dests: BTreeMap<Dest, Vec<Building>> = BTreeMap::new();
        let mut damaged: Vec<quarantine::Found> = Vec::new();
        for Pick { src, whole } in picks {
            let rows = self.index()?.live_rows(src.id)?;
            if rows.is_empty() {
                continue;
            }
            let Some(file) = self.containers.open(repo_id, src.id as u64)? else {
                continue; // a missing file is damage for reads and `check` to report
            };
            let len = (src.data_end - src.data_offset) as u32;
            let Some(data) = self
                .containers
                .read_at(&file, src.data_offset as u64, len)?
            else {
                continue;
            };
            for r in rows {
                let start = (r.offset - src.data_offset as u64) as usize;
                let Some(stored) = data.get(start..start + r.stored_len as usize) else {
                    continue;
                };
                let dest = match snap.class(&r.fp, r.committed) {
                    // Without the layout, compaction keeps every chunk active.
                    _ if !layout => Dest::Active,
                    Class::Hot | Class::Pending => Dest::Active,
                    Class::Cold(g) => Dest::Archival(g),
                    // Referenced by no live version: group 0, below every live version, so
                    // the next expiry deletes its container whole unless a new version
                    // references it first (its commit then raises the container's B_ID).
                    Class::Unreferenced => Dest::Archival(0),
                };
                let in_place = match dest {
                    Dest::Active => src.kind == ContainerKind::Active as u8,
                    Dest::Archival(_) => src.kind == ContainerKind::Archival as u8,
                };
                if in_place && !whole {
                    continue; // stays; its container keeps it
                }
                // A delta chunk moves as it is stored; its base is read to verify it.
                let verified = self.with_bases(repo_id, r.codec, |bases| {
                    verify::verify_stored(
                        &r.fp,
                        r.codec,
                        r.raw_len,
                        stored,
                        bases,
                        verify::Check::Read,
                    )
                })?;
                if let Err(reason) = verified {
                    eprintln!(
                        "damaged chunk {} in container {} of repository {repo_id}: {reason}; quarantined",
                        to_hex(&r.fp),
                        src.id
                    );
                    damaged.push(quarantine::Found {
                        fp: r.fp,
                        container_id: src.id as u64,
                        offset: r.offset,
                        reason,
                    });
                    continue;
                }
                let list = dests.entry(dest).or_default();
                if !list.last().is_some_and(|b| b.has_room(stored.len())) {
                    list.push(Building::new(dest));
                }
                let b = list.last_mut().unwrap();
                let new_slot = b.moves.len() as u32;
                let rel = b.data.len() as u64;
                b.table.extend_from_slice(
                    &TableEntry {
                        fp: r.fp,
                        codec: r.codec,
                        offset: rel, // made absolute when the data offset is known
                        stored_len: r.stored_len,
                        raw_len: r.raw_len,
                    }
                    .encode(),
                );
                b.data.extend_from_slice(stored);
                b.moves.push((r.fp, src.id, r.slot, new_slot, rel));
                moved.chunks_moved += 1;
                moved.bytes_rewritten += r.stored_len as u64;
            }
            moved.containers_evacuated += 1;
        }
        // 2. Write the new containers whole and durably; no index row points at them yet.
        let mut written: Vec<Written> = Vec::new();
        let discard = |written: &[Written]| {
            for w in written {
                let _ = self.containers.delete(repo_id, w.id);
            }
        };
        for b in dests.into_values().flatten() {
            match self.write_whole(repo_id, snap, b) {
                Ok(w) => written.push(w),
                Err(e) => {
                    discard(&written);
                    return Err(e);
                }
            }
        }
        moved.containers_written = written.len() as u64;
        crashpoint::reached(&format!("{point}:copied"));
        // 3. Switch the index in short transactions (at most SWITCH_ROWS moved chunks each,
        //    so uploads and commits wait only that long), each only if the versions are still
        //    those of the snapshot. A container switched in part keeps the rest as dead
        //    slots; one not inserted yet is deleted.
        let mut inserted = 0;
        let mut abandoned = false;
        let mut failed = None;
        let mut damage_quarantined = false;
        // The failed switch failed in its commit, which may have gone through (a connection
        // lost as the database answered; committed but not yet visible to another one).
        let mut commit_unknown = false;
        'switch: for (i, nc) in written.iter().enumerate() {
            for (j, part) in nc.moves.chunks(SWITCH_ROWS).enumerate() {
                let res = if j > 0 && crashpoint::fails("move:part") {
                    Err((
                        StoreError::NoSpace("test failure point move:part".into()),
                        false,
                    ))
                } else {
                    self.switch_part(
                        repo_id,
                        snap,
                        nc,
                        part,
                        j == 0,
                        i == 0 && j == 0,
                        &damaged,
                        lease,
                    )
                };
                match res {
                    Ok(Some(ms)) => {
                        moved.longest_switch_ms = moved.longest_switch_ms.max(ms);
                        moved.switch_ms += ms;
                        damage_quarantined |= i == 0 && j == 0;
                    }
                    Ok(None) => abandoned = true,
                    Err((e, at_commit)) => {
                        failed = Some(e);
                        commit_unknown = at_commit;
                    }
                }
                if abandoned || failed.is_some() {
                    break 'switch;
                }
            }
            inserted = i + 1;
        }
        let mut kept = written.len();
        if abandoned || failed.is_some() {
            // The container being switched when the versions changed or a switch failed has
            // its row, and committed rows pointing into it, if its first part went through (a
            // commit that failed may have gone through too, and show only later): its file
            // stays unless the index certainly has no row of it. One kept without a row is
            // recovery's to remove.
            let first_in = written.get(inserted).is_some_and(|nc| {
                commit_unknown
                    || self
                        .index()
                        .and_then(|ix| ix.container_exists(nc.id as i64))
                        .unwrap_or(true)
            });
            kept = inserted + first_in as usize;
            discard(&written[kept..]);
        }
        if let Some(e) = failed {
            return Err(e);
        }
        // 4. Drop the containers left without chunks; lower the B_ID of archival ones that
        //    keep some.
        let emptied = {
            let mut w = self.writer_for_write()?;
            let locked = std::time::Instant::now();
            let tx = w.begin_fenced(repo_id, lease)?;
            // Damage found where nothing was switched (all a batch was to move was damaged,
            // or the versions changed first) is quarantined here: the rows it moves out
            // name the damaged slots exactly, so this holds whatever else changed.
            if !damage_quarantined {
                quarantine::quarantine(&*tx, repo_id, &damaged)?;
            }
            let current = snap.still_current(&*tx, repo_id)?;
            let mut emptied = Vec::new();
            for src in sources {
                if tx.container_chunk_count(src.id)? == 0 {
                    tx.drop_container(src.id)?;
                    emptied.push(src.id);
                } else if current && src.kind == ContainerKind::Archival as u8 {
                    // Its B_ID may have been raised by a commit referencing a chunk that
                    // has just moved out: lower it to what its remaining chunks need, so
                    // that ICDA can delete it when their versions expire.
                    let b_id = tx
                        .live_rows(src.id)?
                        .iter()
                        .map(|r| snap.newest_ref(&r.fp))
                        .max()
                        .unwrap_or(0);
                    tx.lower_newest_version(src.id, b_id)?;
                }
            }
            tx.commit()?;
            w.close_if_dropped(repo_id, emptied.iter().copied());
            let ms = locked.elapsed().as_secs_f64() * 1000.0;
            moved.longest_switch_ms = moved.longest_switch_ms.max(ms);
            moved.switch_ms += ms;
            emptied
        };
        crashpoint::reached(&format!("{point}:switched"));
        // 4. Free the emptied containers.
        let written_bytes: i64 = written[..kept].iter().map(|w| w.data_end as i64).sum();
        let freed = self.unlink_containers(repo_id, &emptied, sources);
        moved.bytes_freed = freed - written_bytes;
        Ok(if abandoned { None } else { Some(moved) })
    }

    /// One switch transaction: inserts the row of new container `nc` (`first`), quarantines
    /// what the copy found damaged (`with_damage`), re-points the chunks of `part`, each only
    /// if its row still names the slot it was copied from. `None` if the versions changed
    /// since `snap` (nothing done); else how long the writer lock was held, in ms.
    #[allow(clippy::too_many_arguments)]
    fn switch_part(
        &self,
        repo_id: i64,
        snap: &Snapshot,
        nc: &Written,
        part: &[Move],
        first: bool,
        with_damage: bool,
        damaged: &[quarantine::Found],
        lease: &Lease,
    ) -> Result<Option<f64>, (StoreError, bool)> {
        let before = |e: StoreError| (e, false);
        let w = self.writer_for_write().map_err(before)?;
        let locked = std::time::Instant::now();
        let tx = w.begin_fenced(repo_id, lease).map_err(before)?;
        if !snap.still_current(&*tx, repo_id).map_err(before)? {
            return Ok(None);
        }
        // A container gone since its put (another server's start took it for an orphan)
        // is abandoned as a change of the versions is.
        if first && !self.still_stored(repo_id, nc.id).map_err(before)? {
            return Ok(None);
        }
        if with_damage {
            quarantine::quarantine(&*tx, repo_id, damaged).map_err(before)?;
        }
        if first {
            // Archival containers never take appends.
            let sealed = nc.header.kind == ContainerKind::Archival;
            tx.insert_written_container(&nc.row(repo_id, sealed))
                .map_err(before)?;
        }
        tx.repoint_chunks(repo_id, nc.id as i64, part)
            .map_err(before)?;
        // A commit that fails may have gone through: the caller keeps the container.
        tx.commit().map_err(|e| (e, true))?;
        Ok(Some(locked.elapsed().as_secs_f64() * 1000.0))
    }

    /// Writes a filled container whole and durably (`write_new_container`).
    pub(super) fn write_whole(
        &self,
        repo_id: i64,
        snap: &Snapshot,
        mut b: Building,
    ) -> StoreResult<Written> {
        // An active container's B_ID: the newest live version referencing any of its chunks.
        let newest_version = match b.kind {
            ContainerKind::Archival => b.newest_version,
            ContainerKind::Active => snap.max_id,
        };
        if crashpoint::fails("move:write") {
            return Err(StoreError::NoSpace("test failure point move:write".into()));
        }
        let id = self.writer().ix.next_container_id()?;
        let header =
            self.write_new_container(repo_id, id, b.kind, newest_version, &mut b.table, &b.data)?;
        let base = header.data_offset;
        for m in b.moves.iter_mut() {
            m.4 += base;
        }
        Ok(Written {
            id: header.id,
            data_end: base + b.data.len() as u64,
            header,
            moves: b.moves,
        })
    }

    /// Unlinks the files of containers whose rows are gone and fsyncs their directory;
    /// returns the bytes freed (the committed sizes of `known`, or the file sizes).
    pub(crate) fn unlink_containers(&self, repo_id: i64, ids: &[i64], known: &[Source]) -> i64 {
        let mut freed = 0i64;
        for id in ids {
            let size = known
                .iter()
                .find(|s| s.id == *id)
                .map(|s| s.data_end)
                .unwrap_or(0);
            match self.containers.delete(repo_id, *id as u64) {
                Ok(()) => freed += size,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => eprintln!(
                    "container {id} of repository {repo_id}: cannot delete ({e}); removed at the next start"
                ),
            }
        }
        if !ids.is_empty() {
            // Not durable yet is harmless: the rows are gone, recovery deletes the files.
            let _ = self.containers.sync_deletes(repo_id);
        }
        freed
    }
}

/// Per container: its data bytes, live bytes, and the live bytes in the wrong place (cold
/// or unreferenced in an active container, hot or pending in an archival one).
pub(crate) struct Occupancy {
    pub src: Source,
    pub live: i64,
    /// Live chunks: a container's table fills before its data when chunks are small.
    pub live_chunks: u32,
    pub misplaced: i64,
}

impl Occupancy {
    pub fn data_bytes(&self) -> i64 {
        self.src.data_end - self.src.data_offset
    }
}

/// Every container of the repository with its occupancy under `snap`'s classes.
pub(crate) fn occupancy(
    ix: &dyn IndexRead,
    repo_id: i64,
    snap: &Snapshot,
) -> StoreResult<Vec<Occupancy>> {
    // A damaged container stays as recovery left it (sealed, its chunks quarantined, kept
    // for inspection): `check` names it and reads answer `damaged`.
    let mut out: BTreeMap<i64, Occupancy> = ix
        .undamaged_containers(repo_id)?
        .into_iter()
        .map(|s| {
            (
                s.id,
                Occupancy {
                    src: s,
                    live: 0,
                    live_chunks: 0,
                    misplaced: 0,
                },
            )
        })
        .collect();
    ix.chunk_rows(repo_id, &mut |c| {
        let Some(o) = out.get_mut(&c.container_id) else {
            return Ok(());
        };
        o.live += c.stored_len as i64;
        o.live_chunks += 1;
        let archival = o.src.kind == ContainerKind::Archival as u8;
        let misplaced = match snap.class(&c.fp, c.committed) {
            Class::Hot | Class::Pending => archival,
            Class::Cold(_) | Class::Unreferenced => !archival,
        };
        if misplaced {
            o.misplaced += c.stored_len as i64;
        }
        Ok(())
    })?;
    Ok(out.into_values().collect())
}

/// A container to evacuate: `whole` (every live chunk copied: it is sparse) or only its
/// misplaced chunks.
pub(crate) struct Pick {
    pub src: Source,
    pub whole: bool,
}

/// The containers the mover should evacuate next (about [`BATCH_BYTES`] of them), never the
/// one the writer has open:
/// - with the layout on, those holding misplaced chunks (cold in an active container, hot in
///   an archival one): only those chunks move, leaving dead slots;
/// - sparse ones, whole: a container whose live bytes (that stay) are under the compaction
///   threshold of its own data bytes (dead slots left by moves and sweeps), and an active
///   container whose live bytes and live chunks are under the threshold of a full
///   container's data and table, merged with the other such ones (when there are at least
///   two) so that the newest versions sit in few dense containers. Archival chunks stay in
///   their groups.
fn pick_for_move(
    ix: &dyn IndexRead,
    repo_id: i64,
    snap: &Snapshot,
    open: Option<i64>,
    done: &HashSet<i64>,
    layout: bool,
) -> StoreResult<Vec<Pick>> {
    let (mv, compact) = (move_threshold(), compact_threshold());
    let full = TARGET_DATA_BYTES as f64;
    let occ: Vec<Occupancy> = occupancy(ix, repo_id, snap)?
        .into_iter()
        .filter(|o| Some(o.src.id) != open && !done.contains(&o.src.id))
        .collect();
    let active = |o: &Occupancy| o.src.kind == ContainerKind::Active as u8;
    // Live bytes after the misplaced ones leave.
    let staying = |o: &Occupancy| o.live - if layout { o.misplaced } else { 0 };
    // An active container worth merging with others: few live bytes and a table with room.
    // One whose table is mostly full of small chunks (deltas, tiny files) is as full as a
    // merge could make it: merging such containers writes them out again, as many, forever.
    let mergeable = |o: &Occupancy| {
        active(o)
            && (staying(o) as f64) < compact * full
            && (o.live_chunks as f64) < compact * DEFAULT_TABLE_CAPACITY as f64
    };
    let sparse_active = occ.iter().filter(|o| mergeable(o)).count();
    let mut batch = Vec::new();
    let mut bytes = 0;
    for o in occ {
        let data = o.data_bytes().max(1) as f64;
        let whole = if active(&o) {
            let staying = staying(&o) as f64;
            staying < compact * data || (sparse_active >= 2 && mergeable(&o))
        } else {
            (o.live as f64) < compact * data
        };
        let part = layout && o.misplaced > 0 && o.misplaced as f64 >= mv * data;
        if whole || part {
            bytes += if whole { o.live } else { o.misplaced };
            batch.push(Pick { src: o.src, whole });
            if bytes >= BATCH_BYTES {
                break;
            }
        }
    }
    Ok(batch)
}

/// Runs the mover (with the layout on) and then the delta pass (when on) in the background
/// after commits: one thread per store at a time, which goes on while repositories are
/// waiting.
pub fn kick(store: &Arc<Store>, repo_id: i64) {
    if !layout_enabled() && !super::delta::delta_enabled() && !store.search_cache.warms() {
        return;
    }
    store
        .mover_queue
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(repo_id);
    if store.mover_running.swap(true, Ordering::AcqRel) {
        return;
    }
    let store = Arc::clone(store);
    std::thread::spawn(move || {
        lower_priority();
        mover_loop(store)
    });
}

/// The background mover yields the CPU to uploads and restores: on Linux a thread has its
/// own nice value.
fn lower_priority() {
    // SAFETY: gettid and setpriority take no pointers; a failure only leaves the priority.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}

fn mover_loop(store: Arc<Store>) {
    loop {
        let next = {
            let mut q = store.mover_queue.lock().unwrap_or_else(|p| p.into_inner());
            let next = q.iter().next().copied();
            if let Some(r) = next {
                q.remove(&r);
            }
            next
        };
        let Some(repo_id) = next else {
            store.mover_running.store(false, Ordering::Release);
            // A kick between the empty check and the flag reset would be lost: look again.
            let again = !store
                .mover_queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty();
            if again && !store.mover_running.swap(true, Ordering::AcqRel) {
                continue;
            }
            return;
        };
        store.wait_until_quiet();
        // The pass first, which runs the mover after it: the mover then files the version's
        // chunks with the base edges the pass made in view (a frame's base is needed as long
        // as the frame), instead of filing them once and moving them again.
        if super::delta::delta_enabled() {
            if let Err(e) = store.run_delta(repo_id) {
                eprintln!("delta pass: repository {repo_id}: {e}");
            }
        } else if layout_enabled() {
            if let Err(e) = store.run_mover(repo_id) {
                eprintln!("mover: repository {repo_id}: {e}");
            }
        }
        // Last, after the backup's own work: the cache holds raw bytes by fingerprint, which
        // neither the mover nor the pass changes.
        if let Err(e) = store.warm_search_cache(repo_id) {
            eprintln!("search cache: repository {repo_id}: {e}");
        }
    }
}
