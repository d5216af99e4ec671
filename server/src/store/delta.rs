//! The delta pass: resemblance detection and delta chunks after DARE (Xia et al., "DARE: A
//! Deduplication-Aware Resemblance Detection and Elimination Scheme for Data Reduction with
//! Low Overheads", IEEE Transactions on Computers, 2016, §3), run natively on the server
//! after commits, where the mover runs (the maintenance lease). The detection and the codec
//! are `wasm_core::resemble`'s; this module picks the chunks, reads their bases, and
//! re-stores the chunks whose delta pays as codec 2 (docs/FORMAT.md, "Codec 2: delta").
//!
//! One pass handles one version, over the chunks it stored for the first time (no older live
//! version references them), §3.1. A run takes every version committed since the last one
//! in this process, oldest first, so a burst of commits (the pass waits for backups to be
//! quiet) gets one pass per version; of the versions committed before the server started,
//! the newest only. Each pass:
//! 1. DupAdj (§3.2): the neighbours of the version's duplicates pair with the neighbours of
//!    the same chunks in the older versions of its source (recipes only, no bytes).
//! 2. Super-features (§3.3): the chunks left are looked up in an index of the previous
//!    version's chunks' super-features, bounded to [`SF_CAPACITY`] chunks; a chunk that
//!    finds no base enters it, so later new chunks can pair with it.
//! 3. Each candidate is encoded against its base (§3.4); the delta is kept only if it saves
//!    at least [`MIN_SAVING`] of the chunk's stored bytes (DupAdj pairs: the stricter
//!    `wasm_core::resemble::DUPADJ_MAX_RATIO`). A base at the chain cap is replaced by its
//!    nearest ancestor below it.
//! 4. The candidates that stay whole are recompressed at the server's higher zstd level
//!    (`super::recompress`, not DARE's: the pass has their raw bytes in hand); when they are
//!    many, a dictionary is trained on them and stored as one more chunk, and each becomes a
//!    delta against it where that stores less (`super::dictionary`). Both are re-stored with
//!    the deltas where that pays.
//! 5. The candidates are stored together in frames, each a chunk compressed against one older
//!    frame, each member a slice of its frame, where that stores less than step 4's choice
//!    (`super::frames`; `DITTO_FRAMES=0` turns it off).
//!
//! Durability is the mover's (docs/STORAGE.md, "Crash safety"): the new copies are written into
//! new containers, whole and durable, before one transaction per container inserts its row
//! and re-points the chunks (each only if its row still names the slot it was read from,
//! and only if no version was committed or deleted since the snapshot). The old copies
//! become dead slots that compaction frees. Crash points: `delta:copied`, `delta:switched`.

use std::{
    collections::{HashMap, HashSet},
    time::Instant,
};

use serde::Serialize;
use wasm_core::{
    compress::{Decompressor, CODEC_ZSTD},
    format::container::TableEntry,
    hash::Fingerprint,
    resemble::{
        delta::{DeltaDecoder, DeltaEncoder, CODEC_DELTA, DEFAULT_DELTA_LEVEL, MAX_CHAIN_DEPTH},
        dupadj,
        frame::{slice_payload, SLICE_LEN},
        superfeature::{super_features, Params, SuperFeatureIndex},
        DUPADJ_MAX_RATIO,
    },
};

use super::{
    chunks::{Answer, ChunkLoc},
    crashpoint,
    dictionary::{self, Dictionary},
    frames,
    index::{
        chunks::{ChunkRow, NewChunk},
        maintenance::RewriteMove,
        Lease,
    },
    layout::Snapshot,
    mover::{Building, Dest},
    now_ms,
    recompress::Recompressor,
    versions::{manifest_stream, ManifestChains},
    Store, StoreError, StoreResult,
};

/// Whether the server runs the delta pass after commits: on unless `DITTO_DELTA=0`. It runs
/// whether or not the HiDeStore layout is on (`DITTO_LAYOUT=off` only stops the mover from
/// placing chunks; compaction of the copies a pass leaves dead still runs).
pub fn delta_enabled() -> bool {
    std::env::var("DITTO_DELTA").map_or(true, |v| v != "0")
}

/// Most chunks the super-feature index holds in one pass (about 100 bytes each).
const SF_CAPACITY: usize = 200_000;
/// Older versions of the source DupAdj aligns the new one with.
const OLD_RECIPES: usize = 2;
/// A delta is kept only if it saves at least this fraction of the chunk's stored bytes.
const MIN_SAVING: f64 = 0.25;
/// Raw bytes of chunks kept in memory during a pass before the cache is dropped.
const CACHE_BYTES: usize = 256 << 20;

/// What one delta pass did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct DeltaReport {
    /// The version handled.
    pub version: i64,
    /// Chunks the version stored first that could become deltas.
    pub candidates: u64,
    /// Deltas kept, by how their base was found.
    pub dupadj: u64,
    pub superfeature: u64,
    /// Chunk rows re-pointed to their delta copies.
    pub delta_chunks: u64,
    /// Stored bytes saved by them.
    pub bytes_saved: i64,
    /// Candidates that stay whole and were re-stored at the server's higher zstd level
    /// (`super::recompress`), and the stored bytes that saved.
    pub recompressed: u64,
    pub recompress_saved: i64,
    /// Stored bytes of the dictionary trained in the pass (0: none stored); its deltas are
    /// among `delta_chunks` and `bytes_saved` (`super::dictionary`).
    pub dictionary_bytes: i64,
    /// Frames stored (`super::frames`), their stored bytes, and the chunks re-stored as
    /// slices of them (among `delta_chunks`; `bytes_saved` is net of the frames).
    pub frames: u64,
    pub frame_bytes: i64,
    pub slices: u64,
    pub containers_written: u64,
    /// Candidates or bases that could not be read (left as they are).
    pub unreadable: u64,
    /// Deltas found but not stored: their chains would have been longer than the cap.
    pub dropped: u64,
    /// Copies made in the pass (deltas, frames, recompressed or dictionary-coded chunks) that
    /// did not decode back to their raw bytes ([`DecodeBack`]): not stored, the chunk left
    /// as it is. Nonzero only if an encoder is at fault.
    pub refused: u64,
    /// The versions changed during the pass: it stopped before switching the next container
    /// (what it switched before stays; the next pass of the version goes on).
    pub abandoned: bool,
    pub seconds: f64,
}

/// Decodes back every copy the pass is about to store and compares it with the raw bytes it
/// stands for, so that an encoder fault never replaces a good copy with a bad one (the copy
/// replaced becomes a dead slot that compaction frees). Deltas, frames, recompressed chunks
/// and dictionary deltas all pass through it.
pub struct DecodeBack {
    delta: DeltaDecoder,
    whole: Decompressor,
    /// Copies that did not decode back.
    pub refused: u64,
}

impl DecodeBack {
    pub fn new() -> Option<Self> {
        Some(DecodeBack {
            delta: DeltaDecoder::new().ok()?,
            whole: Decompressor::new().ok()?,
            refused: 0,
        })
    }

    /// `payload`, a copy of `raw` in `codec` (a delta against `base`, its fingerprint and raw
    /// bytes), if it decodes back to `raw`. The test-only failure point `pass:encode` changes
    /// the copy's last byte first, as an encoder fault would.
    pub fn check(
        &mut self,
        codec: u8,
        mut payload: Vec<u8>,
        base: Option<(&Fingerprint, &[u8])>,
        raw: &[u8],
    ) -> Option<Vec<u8>> {
        if crashpoint::fails("pass:encode") {
            *payload.last_mut()? ^= 0xff;
        }
        let same = match (codec, base) {
            (CODEC_DELTA, Some((fp, b))) => self
                .delta
                .decode(&payload, fp, b, raw.len())
                .is_ok_and(|back| back == raw),
            (CODEC_DELTA, None) => false,
            _ => self
                .whole
                .decompress(codec, &payload, raw.len())
                .is_ok_and(|back| back == raw),
        };
        if !same {
            self.refused += 1;
        }
        same.then_some(payload)
    }
}

/// The new copy chosen for a chunk: a delta against `base`, or (no base) the chunk whole,
/// recompressed.
struct Chosen {
    fp: Fingerprint,
    row: ChunkRow,
    base: Option<Fingerprint>,
    payload: Vec<u8>,
    /// Stored bytes of a frame this slice pays for (its raw bytes' part of the frame's), so
    /// that the savings a version's slices report are net of their frames.
    share: u32,
}

/// A chunk the pass stores that no manifest names: the dictionary it trained, or a frame.
struct NewStored {
    fp: Fingerprint,
    codec: u8,
    base: Option<Fingerprint>,
    payload: Vec<u8>,
    raw_len: u32,
}

/// What the pass writes, in order.
enum Item {
    /// `news[k]`.
    New(usize),
    /// A new copy of a stored chunk.
    Copy(Chosen),
}

/// What a slot of a written container holds.
enum Placed {
    New(usize),
    Move(RewriteMove),
}

/// A candidate that found no similar base, and its copy recompressed at the server's level
/// if that pays.
struct Whole {
    fp: Fingerprint,
    row: ChunkRow,
    shrunk: Option<Vec<u8>>,
}

impl Chosen {
    fn codec(&self) -> u8 {
        if self.base.is_some() {
            CODEC_DELTA
        } else {
            CODEC_ZSTD
        }
    }
}

impl Store {
    /// Runs the delta pass over each version above the repository's record of handled
    /// versions, oldest first, each under its own maintenance lease (a prune waiting on a
    /// long backlog gets its turn between versions), then the mover, whose compaction frees
    /// the old copies. The record is in the index, so a restart goes on where the last
    /// process stopped. The report is the last pass's (an empty one if no version was due).
    pub fn run_delta(&self, repo_id: i64) -> StoreResult<DeltaReport> {
        let mut last = DeltaReport::default();
        let mut rewrote = false;
        loop {
            let (_local, lease) = self.maintenance()?;
            let Some(version) = self.next_delta_version(repo_id)? else {
                break;
            };
            let rep = self.delta_pass(repo_id, version, &lease)?;
            rewrote |= rep.delta_chunks + rep.recompressed > 0;
            log_pass(repo_id, &rep);
            let abandoned = rep.abandoned;
            last = rep;
            if abandoned {
                // A commit or a deletion came meanwhile: its own run retries from here.
                break;
            }
            self.with_tx(|tx| tx.set_delta_done(repo_id, version))?;
            crashpoint::reached("delta:recorded");
        }
        // The mover after the passes (the background thread runs no other with the pass on):
        // it files the new copies, frees the old ones, and places every chunk as the pass's
        // base edges now need it.
        if rewrote || super::mover::layout_enabled() {
            let (_local, lease) = self.maintenance()?;
            self.mover_pass(repo_id, "move", &lease)?;
        }
        // Kept once the mover is done too: whoever waits for a version's pass (stats
        // `delta_pass`) then finds the repository at rest.
        if last.version > 0 {
            self.delta_last
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(repo_id, last.clone());
        }
        Ok(last)
    }

    /// The oldest live version the delta pass has not handled. A repository whose record
    /// predates it (`None`) takes the newest version committed before this store opened
    /// and every one since: which of the older ones had passes is not known.
    fn next_delta_version(&self, repo_id: i64) -> StoreResult<Option<i64>> {
        let ix = self.snapshot()?;
        let versions = ix.versions(repo_id, None)?;
        let done = match ix.delta_done(repo_id)? {
            Some(v) => v,
            None => versions
                .iter()
                .filter(|v| v.committed_ms < self.opened_ms)
                .map(|v| v.id - 1)
                .max()
                .unwrap_or(0),
        };
        Ok(versions.iter().map(|v| v.id).filter(|&id| id > done).min())
    }

    /// The last delta pass of the repository since the server started.
    pub fn delta_last(&self, repo_id: i64) -> Option<DeltaReport> {
        self.delta_last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&repo_id)
            .cloned()
    }

    /// One delta pass over version `version` (nothing if it is gone); the caller holds the
    /// maintenance lease.
    fn delta_pass(&self, repo_id: i64, version: i64, lease: &Lease) -> StoreResult<DeltaReport> {
        let t0 = Instant::now();
        let mut rep = DeltaReport::default();
        let bad = |e: String| StoreError::Internal(format!("delta pass: {e}"));
        // 1. Snapshot: the versions, this one's stream, its source's older streams,
        //    the chunk rows involved and the delta chains already stored.
        let ix = self.snapshot()?;
        let snap = Snapshot::take(&*ix, repo_id)?;
        let manifests = ix.live_manifests(repo_id)?;
        rep.version = version;
        let Some(at) = manifests.iter().position(|m| m.id == version) else {
            return Ok(rep);
        };
        let target = &manifests[at];
        let mut new_stream: Vec<Fingerprint> = Vec::new();
        let mut older: HashSet<Fingerprint> = HashSet::new();
        let mut old_streams: Vec<Vec<Fingerprint>> = Vec::new();
        let same_source: HashSet<i64> = manifests[..at]
            .iter()
            .filter(|m| m.source == target.source)
            .map(|m| m.id)
            .collect();
        let chains = ManifestChains::new(&*ix, repo_id);
        chains.each(
            manifests[..=at].iter().map(|m| (m.id, &m.manifest)),
            |id, json| {
                let stream = json
                    .map_err(|e| e.to_string())
                    .and_then(manifest_stream)
                    .map_err(bad)?;
                if id == version {
                    new_stream = stream;
                } else {
                    older.extend(stream.iter().copied());
                    if same_source.contains(&id) {
                        old_streams.push(stream);
                    }
                }
                Ok(())
            },
        )?;
        let keep_from = old_streams.len().saturating_sub(OLD_RECIPES);
        let old_streams = old_streams.split_off(keep_from);
        let wanted: HashSet<Fingerprint> = new_stream
            .iter()
            .chain(old_streams.iter().flatten())
            .copied()
            .collect();
        let mut rows: HashMap<Fingerprint, ChunkRow> = HashMap::new();
        // Stored slices (FORMAT.md: a method 1 payload is longer than a slice, so codec 2 at
        // the slice's length is one).
        let mut slices: HashSet<Fingerprint> = HashSet::new();
        ix.chunk_rows(repo_id, &mut |r| {
            if r.codec == CODEC_DELTA && r.stored_len as usize == SLICE_LEN {
                slices.insert(r.fp);
            }
            if wanted.contains(&r.fp) {
                rows.insert(r.fp, r);
            }
            Ok(())
        })?;
        let parent: HashMap<Fingerprint, Fingerprint> =
            ix.delta_edges(repo_id)?.into_iter().collect();
        drop(ix);
        // The repository's dictionary, if it has one: the whole base with the most deltas
        // that no manifest up to this version names (an earlier pass trained it), frames
        // aside.
        let existing_dictionary = {
            let mut uses: HashMap<Fingerprint, usize> = HashMap::new();
            for (fp, b) in &parent {
                if !slices.contains(fp)
                    && !parent.contains_key(b)
                    && !older.contains(b)
                    && !wanted.contains(b)
                {
                    *uses.entry(*b).or_default() += 1;
                }
            }
            uses.into_iter()
                .max_by_key(|(fp, n)| (*n, *fp))
                .map(|(fp, _)| fp)
        };
        let depth = |fp: &Fingerprint| chain_links(&parent, fp);
        // A base at the cap is replaced by its nearest ancestor below it (ancestors resemble
        // it, so likely the chunk too).
        let below_cap = |fp: &Fingerprint| {
            let mut at = *fp;
            while depth(&at) >= MAX_CHAIN_DEPTH {
                at = parent[&at];
            }
            at
        };
        // A chunk that stored deltas name as their base stays as it is: made a delta itself
        // it would lengthen their chains, and against one of them close a loop that nothing
        // can decode (a base of a forgotten version, backed up again, is new to the version
        // that brings it back, and DupAdj pairs it with the delta made against it).
        let bases: HashSet<Fingerprint> = parent.values().copied().collect();
        let is_candidate = |fp: &Fingerprint| {
            !older.contains(fp)
                && !bases.contains(fp)
                && rows
                    .get(fp)
                    .is_some_and(|r| r.committed && r.codec != CODEC_DELTA)
        };
        let needs_base: Vec<bool> = new_stream.iter().map(is_candidate).collect();
        let mut seen = HashSet::new();
        let candidates: Vec<Fingerprint> = new_stream
            .iter()
            .filter(|fp| is_candidate(fp) && seen.insert(**fp))
            .copied()
            .collect();
        rep.candidates = candidates.len() as u64;
        if candidates.is_empty() {
            rep.seconds = t0.elapsed().as_secs_f64();
            return Ok(rep);
        }

        let mut raw = RawCache::default();
        let mut enc = DeltaEncoder::new(DEFAULT_DELTA_LEVEL).map_err(|e| bad(e.to_string()))?;
        let mut back = DecodeBack::new().ok_or_else(|| bad("no zstd context".into()))?;
        let mut chosen: HashMap<Fingerprint, Chosen> = HashMap::new();
        // Encodes `fp` against `base`; the delta if it saves enough (`max_ratio` of the
        // stored bytes at most).
        let mut try_delta = |store: &Store,
                             raw: &mut RawCache,
                             rep: &mut DeltaReport,
                             fp: &Fingerprint,
                             base: &Fingerprint,
                             max_ratio: f64|
         -> Option<Chosen> {
            let base = below_cap(base);
            let row = rows.get(fp).copied()?;
            if base == *fp {
                return None;
            }
            let (Some(chunk), Some(base_raw)) = (
                raw.get(store, repo_id, fp, rep),
                raw.get(store, repo_id, &base, rep),
            ) else {
                return None;
            };
            let payload = enc.encode(&base, &base_raw, &chunk).ok()?;
            if payload.len() as f64 > row.stored_len as f64 * max_ratio {
                return None;
            }
            let payload = back.check(
                CODEC_DELTA,
                payload.to_vec(),
                Some((&base, &base_raw)),
                &chunk,
            )?;
            Some(Chosen {
                fp: *fp,
                row,
                base: Some(base),
                payload,
                share: 0,
            })
        };

        // 2. DupAdj over the recipes.
        let olds: Vec<&[Fingerprint]> = old_streams.iter().map(|s| s.as_slice()).collect();
        let mut found: Vec<Chosen> = Vec::new();
        dupadj::pairs(&new_stream, &needs_base, &olds, |i, loc| {
            let fp = new_stream[i];
            if chosen.contains_key(&fp) || found.iter().any(|c| c.fp == fp) {
                return false;
            }
            let base = olds[loc.recipe][loc.index];
            match try_delta(self, &mut raw, &mut rep, &fp, &base, DUPADJ_MAX_RATIO) {
                Some(c) => {
                    found.push(c);
                    true
                }
                None => false,
            }
        });
        rep.dupadj = found.len() as u64;
        for c in found {
            chosen.insert(c.fp, c);
        }

        // 3. Super-features for the rest: an index of the previous version's chunks (and of
        //    the new chunks that stay whole), bounded in memory.
        let params = Params::DITTO;
        let mut sfi = SuperFeatureIndex::new(params, SF_CAPACITY);
        let mut ids: Vec<Fingerprint> = Vec::new();
        if let Some(prev) = old_streams.last() {
            let mut seen = HashSet::new();
            for fp in prev {
                if sfi.len() >= SF_CAPACITY || !seen.insert(*fp) || depth(fp) >= MAX_CHAIN_DEPTH {
                    continue;
                }
                if let Some(bytes) = raw.get(self, repo_id, fp, &mut rep) {
                    sfi.insert(ids.len() as u32, super_features(&bytes, params));
                    ids.push(*fp);
                }
            }
        }
        for fp in &candidates {
            if chosen.contains_key(fp) {
                continue;
            }
            let Some(bytes) = raw.get(self, repo_id, fp, &mut rep) else {
                continue;
            };
            let sfs = super_features(&bytes, params);
            let hit = sfi.lookup(&sfs, |id| ids[id as usize] != *fp);
            let delta = hit.and_then(|id| {
                let base = ids[id as usize];
                try_delta(self, &mut raw, &mut rep, fp, &base, 1.0 - MIN_SAVING)
            });
            match delta {
                Some(c) => {
                    rep.superfeature += 1;
                    chosen.insert(c.fp, c);
                }
                None => {
                    sfi.insert(ids.len() as u32, sfs);
                    ids.push(*fp);
                }
            }
        }

        // 4. The candidates that stay whole: recompressed at the server's level where that
        //    pays (their raw bytes are those the super-feature step just read), then, when
        //    they are many, deltas against a dictionary trained on them (`super::dictionary`).
        let mut rc = Recompressor::new().map_err(|e| bad(e.to_string()))?;
        let mut whole: Vec<Whole> = Vec::new();
        for fp in &candidates {
            if chosen.contains_key(fp) {
                continue;
            }
            let (Some(row), Some(bytes)) =
                (rows.get(fp).copied(), raw.get(self, repo_id, fp, &mut rep))
            else {
                continue;
            };
            let shrunk = rc.shrink(&mut back, &bytes, row.stored_len);
            whole.push(Whole {
                fp: *fp,
                row,
                shrunk,
            });
        }
        let dict = self.dictionary_deltas(
            repo_id,
            &whole,
            existing_dictionary,
            &mut raw,
            &mut rep,
            &mut back,
            &mut chosen,
        )?;
        for Whole {
            fp, row, shrunk, ..
        } in whole
        {
            if let (false, Some(payload)) = (chosen.contains_key(&fp), shrunk) {
                chosen.insert(
                    fp,
                    Chosen {
                        fp,
                        row,
                        base: None,
                        payload,
                        share: 0,
                    },
                );
            }
        }
        // 5. Frames of the candidates, each member then a slice of its frame.
        let frames = if frames::frames_enabled() {
            let dict_raw = dict.as_ref().and_then(|d| {
                wasm_core::compress::decompress(CODEC_ZSTD, &d.stored, d.raw_len as usize)
                    .ok()
                    .map(|r| (d.fp, std::rc::Rc::new(r)))
            });
            let mut inputs = PassInputs {
                store: self,
                repo_id,
                raw: &mut raw,
                rep: &mut rep,
                chosen: &chosen,
                rows: &rows,
                parent: &parent,
                slices: &slices,
                dict: dict_raw,
            };
            frames::plan(&candidates, &mut inputs, &mut back)
        } else {
            Vec::new()
        };
        rep.refused = back.refused;
        for f in &frames {
            for &(fp, offset) in &f.members {
                let row = rows[&fp];
                let share =
                    (f.payload.len() as u64 * row.raw_len as u64 / f.raw_len.max(1) as u64) as u32;
                chosen.insert(
                    fp,
                    Chosen {
                        fp,
                        row,
                        base: Some(f.fp),
                        payload: slice_payload(&f.fp, offset).to_vec(),
                        share,
                    },
                );
            }
        }
        drop(raw);
        // A new dictionary nothing is stored against is not stored.
        let dict = dict.filter(|d| {
            chosen.values().any(|c| c.base == Some(d.fp))
                || frames.iter().any(|f| f.base == Some(d.fp))
        });
        // Every chain as it will be stored ends within the cap: checked, not assumed. (A
        // base chosen above is an older version's chunk or a new one that found no base,
        // which the dictionary can still make a delta: one link more; a frame's slices are
        // one link above a frame whose chain `frames` kept one link short of the cap.)
        let mut edges = parent.clone();
        edges.extend(frames.iter().filter_map(|f| f.base.map(|b| (f.fp, b))));
        rep.dropped = drop_overlong(&edges, &mut chosen);
        if chosen.is_empty() {
            rep.seconds = t0.elapsed().as_secs_f64();
            return Ok(rep);
        }

        // 6. Write the new copies into new active containers, whole and durable: the new
        //    dictionary first, then each frame followed by its slices, then the rest, so that
        //    a chunk is switched in no later than any chunk stored against it (each
        //    container is switched in its own transaction, in order).
        let mut news: Vec<NewStored> = Vec::new();
        let mut items: Vec<Item> = Vec::new();
        let dict_fp = dict.map(|d| {
            items.push(Item::New(news.len()));
            news.push(NewStored {
                fp: d.fp,
                codec: CODEC_ZSTD,
                base: None,
                payload: d.stored,
                raw_len: d.raw_len,
            });
            d.fp
        });
        for f in frames {
            items.push(Item::New(news.len()));
            news.push(NewStored {
                fp: f.fp,
                codec: f.codec,
                base: f.base,
                payload: f.payload,
                raw_len: f.raw_len,
            });
            for (fp, _) in &f.members {
                if let Some(c) = chosen.remove(fp) {
                    items.push(Item::Copy(c));
                }
            }
        }
        let mut rest: Vec<Chosen> = chosen.into_values().collect();
        rest.sort_by_key(|c| (c.row.container_id, c.row.slot));
        items.extend(rest.into_iter().map(Item::Copy));
        let mut builds: Vec<(Building, Vec<Placed>)> = Vec::new();
        for item in items {
            let (fp, codec, raw_len, payload) = match &item {
                Item::New(k) => {
                    let n = &news[*k];
                    (n.fp, n.codec, n.raw_len, &n.payload)
                }
                Item::Copy(c) => (c.fp, c.codec(), c.row.raw_len, &c.payload),
            };
            if !builds
                .last()
                .is_some_and(|(b, _)| b.has_room(payload.len()))
            {
                builds.push((Building::new(Dest::Active), Vec::new()));
            }
            let (b, placed) = builds.last_mut().expect("a container being filled");
            let slot = b.moves.len() as u32;
            let rel = b.data.len() as u64;
            let stored_len = payload.len() as u32;
            b.table.extend_from_slice(
                &TableEntry {
                    fp,
                    codec,
                    offset: rel,
                    stored_len,
                    raw_len,
                }
                .encode(),
            );
            b.data.extend_from_slice(payload);
            match item {
                Item::New(k) => {
                    b.moves.push((fp, 0, 0, slot, rel));
                    placed.push(Placed::New(k));
                }
                Item::Copy(c) => {
                    b.moves
                        .push((c.fp, c.row.container_id, c.row.slot, slot, rel));
                    let saved = c.row.stored_len.saturating_sub(stored_len + c.share);
                    placed.push(Placed::Move(RewriteMove {
                        fp: c.fp,
                        old_container: c.row.container_id,
                        old_slot: c.row.slot,
                        slot,
                        offset: rel,
                        stored_len,
                        codec: c.codec(),
                        base: c.base,
                        saved: if c.base.is_some() { saved } else { 0 },
                    }));
                }
            }
        }
        let mut written = Vec::new();
        for (b, placed) in builds {
            match self.write_whole(repo_id, &snap, b) {
                Ok(w) => written.push((w, placed)),
                Err(e) => {
                    for (w, _) in &written {
                        let _ = self.containers.delete(repo_id, w.id);
                    }
                    return Err(e);
                }
            }
        }
        rep.containers_written = written.len() as u64;
        crashpoint::reached("delta:copied");
        crashpoint::delay("delta:copied");

        // 7. Switch, one transaction per container, each only if the versions are those of
        //    the snapshot (a base a new commit no longer needs could be swept otherwise).
        let mut switched = 0;
        let mut failed = None;
        for (w, placed) in &written {
            let mut committing = false;
            let done = (|| -> StoreResult<bool> {
                let wr = self.writer_for_write()?;
                let tx = wr.begin_fenced(repo_id, lease)?;
                // A container gone since its put (another server's start took it for an
                // orphan) ends the pass as a change of the versions does.
                if !snap.still_current(&*tx, repo_id)? || !self.still_stored(repo_id, w.id)? {
                    return Ok(false);
                }
                tx.insert_written_container(&w.row(repo_id, true))?;
                let mut moves: Vec<RewriteMove> = Vec::new();
                let mut inserted: Vec<(Fingerprint, u32)> = Vec::new();
                for (p, mv) in placed.iter().zip(&w.moves) {
                    match p {
                        Placed::New(k) => {
                            let n = &news[*k];
                            let stored_len = n.payload.len() as u32;
                            let row = NewChunk {
                                fp: n.fp,
                                slot: mv.3,
                                offset: mv.4,
                                stored_len,
                                raw_len: n.raw_len,
                                codec: n.codec,
                            };
                            tx.insert_chunks(repo_id, w.id, now_ms() as i64, &[row])?;
                            tx.mark_first_version(repo_id, version, &[n.fp])?;
                            inserted.push((n.fp, n.raw_len));
                            if let Some(base) = n.base {
                                // The row just inserted, re-pointed in place: the
                                // update that re-points rewritten chunks sets its base.
                                tx.repoint_rewritten(
                                    repo_id,
                                    w.id as i64,
                                    &[RewriteMove {
                                        fp: n.fp,
                                        old_container: w.id as i64,
                                        old_slot: mv.3,
                                        slot: mv.3,
                                        offset: mv.4,
                                        stored_len,
                                        codec: n.codec,
                                        base: Some(base),
                                        saved: 0,
                                    }],
                                )?;
                            }
                            if dict_fp == Some(n.fp) {
                                rep.dictionary_bytes = stored_len as i64;
                            } else {
                                rep.frames += 1;
                                rep.frame_bytes += stored_len as i64;
                            }
                        }
                        Placed::Move(m) => moves.push(RewriteMove { offset: mv.4, ..*m }),
                    }
                }
                tx.repoint_rewritten(repo_id, w.id as i64, &moves)?;
                // A base quarantined since the snapshot (a read found it damaged)
                // would leave the deltas stored against it undecodable, and stored
                // in name: the pass ends as on a change of the versions.
                let bases: Vec<Fingerprint> = moves
                    .iter()
                    .filter_map(|m| m.base)
                    .chain(placed.iter().filter_map(|p| match p {
                        Placed::New(k) => news[*k].base,
                        Placed::Move(_) => None,
                    }))
                    .collect();
                if tx.chunk_locations(repo_id, &bases)?.contains(&None) {
                    return Ok(false);
                }
                committing = true;
                tx.commit()?;
                // New rows (frames, dictionaries) join the in-memory fingerprint set
                // under the writer lock, as an upload's do: it is reloaded only when
                // rows are deleted or quarantined.
                self.cache_new_chunks(repo_id, inserted);
                let (deltas, whole): (Vec<&RewriteMove>, Vec<&RewriteMove>) =
                    moves.iter().partition(|m| m.base.is_some());
                rep.delta_chunks += deltas.len() as u64;
                rep.slices += deltas
                    .iter()
                    .filter(|m| m.stored_len as usize == SLICE_LEN)
                    .count() as u64;
                rep.bytes_saved += deltas.iter().map(|m| m.saved as i64).sum::<i64>();
                rep.recompressed += whole.len() as u64;
                rep.recompress_saved += whole
                    .iter()
                    .map(|m| rows[&m.fp].stored_len as i64 - m.stored_len as i64)
                    .sum::<i64>();
                Ok(true)
            })();
            match done {
                Ok(true) => switched += 1,
                Ok(false) => {
                    rep.abandoned = true;
                    break;
                }
                Err(e) => {
                    // A failure before the commit leaves the copies unnamed, this one's with
                    // them; one of the commit itself may have gone through: its container is
                    // left to recovery.
                    switched += usize::from(committing);
                    failed = Some(e);
                    break;
                }
            }
        }
        for (w, _) in &written[switched..] {
            let _ = self.containers.delete(repo_id, w.id);
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if switched > 0 {
            // Chunk rows changed codec and length: the fingerprint sets are unaffected, but
            // stats and reads go by the index.
            crashpoint::reached("delta:switched");
        }
        rep.seconds = t0.elapsed().as_secs_f64();
        Ok(rep)
    }
}

/// One line per pass in the server's log.
/// Drops from `chosen` every delta whose chain, as it will be stored (`chosen` over the
/// stored `parent` edges), would be longer than [`MAX_CHAIN_DEPTH`] links or loop; its
/// chunk stays as it is stored. Answers how many were dropped.
fn drop_overlong(
    parent: &HashMap<Fingerprint, Fingerprint>,
    chosen: &mut HashMap<Fingerprint, Chosen>,
) -> u64 {
    let mut dropped = 0;
    loop {
        let base_of = |fp: &Fingerprint| match chosen.get(fp) {
            Some(c) => c.base,
            None => parent.get(fp).copied(),
        };
        let overlong: Vec<Fingerprint> = chosen
            .values()
            .filter(|c| c.base.is_some())
            .filter(|c| {
                let (mut links, mut at) = (0, c.fp);
                while let Some(b) = base_of(&at) {
                    links += 1;
                    if links > MAX_CHAIN_DEPTH {
                        return true;
                    }
                    at = b;
                }
                false
            })
            .map(|c| c.fp)
            .collect();
        if overlong.is_empty() {
            return dropped;
        }
        // Dropping one only shortens the others' chains: go again until none is left.
        for fp in overlong.iter().take(1) {
            chosen.remove(fp);
            dropped += 1;
        }
    }
}

fn log_pass(repo_id: i64, rep: &DeltaReport) {
    eprintln!(
        "delta pass: repository {repo_id}, version {}: {} of {} new chunks stored as deltas ({} by DupAdj, {} by super-features, {} slices of {} frames of {} bytes), {} bytes saved; {} recompressed, {} bytes saved; dictionary {} bytes; in {:.2} s{}",
        rep.version,
        rep.delta_chunks,
        rep.candidates,
        rep.dupadj,
        rep.superfeature,
        rep.slices,
        rep.frames,
        rep.frame_bytes,
        rep.bytes_saved,
        rep.recompressed,
        rep.recompress_saved,
        rep.dictionary_bytes,
        rep.seconds,
        if rep.abandoned {
            "; abandoned there: a commit or a deletion came meanwhile, the next pass goes on"
        } else {
            ""
        }
    );
}

impl Store {
    /// Step 4 of a pass: the chunks in `whole` as deltas against a dictionary, where that
    /// saves (`super::dictionary`), added to `chosen`: the repository's `existing` one or
    /// one trained on them, whichever saves more net of what a new one stores. Their raw
    /// bytes come through `raw` again (bounded: a large version's do not all stay in
    /// memory). Returns the dictionary to store, if it is new and the repository does not
    /// hold it already (a pass retried after an abandoned one trains the same).
    #[allow(clippy::too_many_arguments)]
    fn dictionary_deltas(
        &self,
        repo_id: i64,
        whole: &[Whole],
        existing: Option<Fingerprint>,
        raw: &mut RawCache,
        rep: &mut DeltaReport,
        back: &mut DecodeBack,
        chosen: &mut HashMap<Fingerprint, Chosen>,
    ) -> StoreResult<Option<Dictionary>> {
        let mut options: Vec<dictionary::Shared> = Vec::new();
        if let Some(fp) = existing {
            // A base-only chunk of a deleted version is no dictionary: too small to try.
            if let Some(bytes) = raw
                .get(self, repo_id, &fp, rep)
                .filter(|b| b.len() >= dictionary::MIN_EXISTING)
            {
                options.extend(dictionary::Shared::existing(fp, bytes.to_vec()));
            }
        }
        let total: usize = whole.iter().map(|w| w.row.raw_len as usize).sum();
        if total >= dictionary::MIN_SAMPLE_BYTES {
            let samples: Vec<std::rc::Rc<Vec<u8>>> = whole
                .iter()
                .step_by(dictionary::sample_step(total))
                .filter_map(|w| raw.get(self, repo_id, &w.fp, rep))
                .collect();
            let refs: Vec<&[u8]> = samples.iter().map(|r| r.as_slice()).collect();
            options.extend(dictionary::Shared::train(&refs));
        }
        // Every option's deltas, each chunk read once for all of them; the option that
        // saves the most net of its own cost is kept.
        let mut saved: Vec<i64> = options.iter().map(|o| -o.cost()).collect();
        let mut deltas: Vec<Vec<(&Whole, Vec<u8>)>> = options.iter().map(|_| Vec::new()).collect();
        for w in whole {
            let now = w
                .shrunk
                .as_ref()
                .map_or(w.row.stored_len, |p| p.len() as u32);
            let Some(bytes) = raw.get(self, repo_id, &w.fp, rep) else {
                continue;
            };
            for (k, shared) in options.iter_mut().enumerate() {
                if let Some(payload) = shared.encode(back, &bytes, now) {
                    saved[k] += now as i64 - payload.len() as i64;
                    deltas[k].push((w, payload));
                }
            }
        }
        // The first of the best, as the options come: the stored one before a new one.
        let Some(best) = (0..options.len()).filter(|&k| saved[k] > 0).reduce(|a, b| {
            if saved[b] > saved[a] {
                b
            } else {
                a
            }
        }) else {
            return Ok(None);
        };
        let shared = options.swap_remove(best);
        let deltas = deltas.swap_remove(best);
        let fp = shared.fp();
        for (w, payload) in deltas {
            chosen.insert(
                w.fp,
                Chosen {
                    fp: w.fp,
                    row: w.row,
                    base: Some(fp),
                    payload,
                    share: 0,
                },
            );
        }
        let Some(dict) = shared.into_new() else {
            return Ok(None);
        };
        let stored = self.index()?.chunk_stored(repo_id, &dict.fp)?;
        Ok((!stored).then_some(dict))
    }
}

/// What the frames step reads of the pass (`frames::Inputs`).
struct PassInputs<'a> {
    store: &'a Store,
    repo_id: i64,
    raw: &'a mut RawCache,
    rep: &'a mut DeltaReport,
    chosen: &'a HashMap<Fingerprint, Chosen>,
    rows: &'a HashMap<Fingerprint, ChunkRow>,
    parent: &'a HashMap<Fingerprint, Fingerprint>,
    slices: &'a HashSet<Fingerprint>,
    /// The dictionary trained in this pass, not stored yet, and its raw bytes.
    dict: Option<(Fingerprint, std::rc::Rc<Vec<u8>>)>,
}

impl frames::Inputs for PassInputs<'_> {
    fn base(&self, fp: &Fingerprint) -> Option<Fingerprint> {
        match self.chosen.get(fp) {
            Some(c) => c.base,
            None => self.parent.get(fp).copied(),
        }
    }

    fn slice_frame(&self, fp: &Fingerprint) -> Option<Fingerprint> {
        self.slices
            .contains(fp)
            .then(|| self.parent.get(fp).copied())
            .flatten()
    }

    fn depth(&self, fp: &Fingerprint) -> usize {
        chain_links(self.parent, fp)
    }

    fn stored_len(&self, fp: &Fingerprint) -> u64 {
        match self.chosen.get(fp) {
            Some(c) => c.payload.len() as u64,
            None => self.rows.get(fp).map_or(0, |r| r.stored_len as u64),
        }
    }

    fn raw(&mut self, fp: &Fingerprint) -> Option<std::rc::Rc<Vec<u8>>> {
        if let Some((d, raw)) = &self.dict {
            if d == fp {
                return Some(raw.clone());
            }
        }
        self.raw.get(self.store, self.repo_id, fp, self.rep)
    }

    fn stored(&self, fp: &Fingerprint) -> bool {
        // Unknown counts as stored: the frame is then not made.
        self.store
            .index()
            .and_then(|ix| ix.chunk_stored(self.repo_id, fp))
            .unwrap_or(true)
    }
}

/// Links of `fp`'s stored chain (`parent`: each delta chunk's base), counted up to one past
/// the cap.
fn chain_links(parent: &HashMap<Fingerprint, Fingerprint>, fp: &Fingerprint) -> usize {
    let (mut d, mut at) = (0, *fp);
    while let Some(p) = parent.get(&at) {
        d += 1;
        at = *p;
        if d > MAX_CHAIN_DEPTH {
            break;
        }
    }
    d
}

/// Raw bytes of the chunks a pass reads (candidates and bases), dropped whole past
/// [`CACHE_BYTES`].
#[derive(Default)]
struct RawCache {
    map: HashMap<Fingerprint, std::rc::Rc<Vec<u8>>>,
    bytes: usize,
}

impl RawCache {
    /// The raw bytes of chunk `fp`, read and verified through the index (a delta's chain
    /// included); `None` (counted) if it cannot be read.
    fn get(
        &mut self,
        store: &Store,
        repo_id: i64,
        fp: &Fingerprint,
        rep: &mut DeltaReport,
    ) -> Option<std::rc::Rc<Vec<u8>>> {
        if let Some(r) = self.map.get(fp) {
            return Some(r.clone());
        }
        let loc: Option<ChunkLoc> = store
            .index()
            .ok()
            .and_then(|ix| ix.chunk_location(repo_id, fp).ok().flatten());
        let Some((_, bytes)) =
            loc.and_then(|l| store.read_chunk(repo_id, fp, &l, Answer::Raw).ok())
        else {
            rep.unreadable += 1;
            return None;
        };
        if self.bytes + bytes.len() > CACHE_BYTES {
            self.map.clear();
            self.bytes = 0;
        }
        self.bytes += bytes.len();
        let r = std::rc::Rc::new(bytes);
        self.map.insert(*fp, r.clone());
        Some(r)
    }
}
