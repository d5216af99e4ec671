//! Stored chunks: where the index says each is, the in-memory set of committed
//! fingerprints behind `chunks/missing` and `chunks/lengths`, and reading a chunk back. A
//! chunk is served only after its bytes were decoded (through `wasm_core::compress`, the
//! one implementation of the codecs) and matched against its fingerprint; a copy that does
//! not match is quarantined, never returned.

use std::collections::HashMap;

use wasm_core::{
    compress::{self, CODEC_RAW},
    hash::{to_hex, Fingerprint},
    resemble::delta::{CODEC_DELTA, MAX_CHAIN_DEPTH},
};

pub use super::index::chunks::ChunkLoc;
use super::{
    backend::Handle, crashpoint, index::IndexRead, quarantine, verify, Store, StoreError,
    StoreResult,
};

/// How a read chunk is answered (its bytes are verified against its fingerprint before they
/// go out, except with [`Answer::StoredUnchecked`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Raw bytes (codec 0).
    Raw,
    /// As stored, except a delta chunk, which is decoded: its base may be in any container,
    /// and a client that cannot resolve bases gets bytes it can use alone.
    Whole,
    /// As stored, delta chunks included: the client decodes a delta against its base (whose
    /// fingerprint starts the payload), fetching the base itself if it lacks it.
    Stored,
    /// As [`Answer::Stored`], the bytes as read, neither decoded nor checked here: for a
    /// client that checks every chunk it decodes itself, as it must for a container's bytes
    /// (`GET containers/{id}`), so the check is not made twice. A copy that no longer
    /// decodes to its fingerprint is refused by that client's check (and found by `check`
    /// and verify), not quarantined by this read.
    StoredUnchecked,
}

impl Answer {
    /// Whether a chunk stored with `codec` is answered decoded.
    pub fn decodes(self, codec: u8) -> bool {
        match self {
            Answer::Raw => true,
            Answer::Whole => codec == CODEC_DELTA,
            Answer::Stored | Answer::StoredUnchecked => false,
        }
    }
}

/// What the index says of a requested chunk.
pub enum Lookup {
    Stored(ChunkLoc),
    /// Its only copy was found damaged and is quarantined until uploaded again.
    Damaged,
    Missing,
}

/// Decodes stored bytes to exactly `raw_len` raw bytes with the core's codecs; `Err` says
/// why they do not decode.
pub fn decode_stored(codec: u8, raw_len: u32, stored: Vec<u8>) -> Result<Vec<u8>, String> {
    if codec == CODEC_RAW && stored.len() == raw_len as usize {
        return Ok(stored); // already raw: no copy
    }
    compress::decompress(codec, &stored, raw_len as usize)
}

pub use wasm_core::hash::{FpMap, FpSet};
/// Committed fingerprint -> raw length of the chunk.
pub(crate) type FpLengths = FpMap<u32>;

/// What an in-memory fingerprint set was loaded at: the repository's quarantine epoch
/// (moves when one of its chunks is quarantined) and the repository's `gc_epoch` (moves when chunk rows are
/// deleted). A set loaded at older epochs may name chunks no longer stored.
#[derive(Clone, Copy)]
pub(crate) struct Epochs {
    quarantine: i64,
    gc: i64,
}

impl Epochs {
    fn read(ix: &dyn IndexRead, repo_id: i64) -> StoreResult<Epochs> {
        Ok(Epochs {
            quarantine: ix.quarantine_epoch(repo_id)?,
            gc: ix.gc_epoch(repo_id)?,
        })
    }

    fn covers(&self, other: Epochs) -> bool {
        self.quarantine >= other.quarantine && self.gc >= other.gc
    }
}

/// Repositories with more chunks than this are not cached in memory (about 40 bytes per
/// chunk); `chunks/missing` and `chunks/lengths` then ask the index for each fingerprint.
const MAX_CACHED_CHUNKS: i64 = 16_000_000;

impl Store {
    /// Where a chunk is, or why it cannot be served.
    pub fn locate(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Lookup> {
        self.lookup(&*self.index()?, repo_id, fp)
    }

    /// Where each of `fps` is (request order); `Unavailable` lists the damaged and the
    /// missing ones if any is not stored.
    pub fn locate_all(
        &self,
        repo_id: i64,
        fps: &[Fingerprint],
    ) -> StoreResult<Vec<(Fingerprint, ChunkLoc)>> {
        // One read transaction for the whole list: SQLite takes its lock once, not once per
        // statement (a lock and an unlock are two fcntl calls).
        let ix = self.snapshot()?;
        let mut locs = Vec::with_capacity(fps.len());
        let (mut damaged, mut missing) = (Vec::new(), Vec::new());
        // One batch query (a round trip per chunk costs more than the read on PostgreSQL).
        for (fp, loc) in fps.iter().zip(ix.chunk_locations(repo_id, fps)?) {
            match loc {
                Some(l) => locs.push((*fp, l)),
                None if ix.is_quarantined(repo_id, fp)? => damaged.push(*fp),
                None => missing.push(*fp),
            }
        }
        if !damaged.is_empty() || !missing.is_empty() {
            return Err(StoreError::Unavailable { damaged, missing });
        }
        Ok(locs)
    }

    /// The base chains of the delta chunks among `locs` (a `chunks/get` answered as stored
    /// with `chains`, docs/API.md), located: which requested deltas go decoded, and the links
    /// the others need.
    ///
    /// Links: each delta's base, that base's base if it is a delta too, and so on down to a
    /// chunk that is not a delta or that `have` lists (that one is not included). Breadth
    /// first: the first links of every delta in `locs` order, then the second links, and so
    /// on. A chunk of `locs` or of `have` is never a link, and each link comes once. Only
    /// the index is read (the `base` rows); the links are verified when they are read, like
    /// the chunks asked for. `Unavailable` if a link is not stored (its delta could not be
    /// decoded either).
    ///
    /// Decoded: the deltas whose chain has a link that the answer would need for less than
    /// 1/[`LINK_MIN_USE`] of its raw bytes. A link is worth sending when the distinct
    /// requested deltas decoded through it hold at least that share of its raw bytes (the
    /// members of a frame, docs/FORMAT.md "Codec 2, method 3", that the answer asks for,
    /// or a base many deltas share); otherwise the client would decode a frame of up to
    /// 1 MiB and its chain for a few KiB, which the server decodes from its cache instead.
    pub fn chains_answer(
        &self,
        repo_id: i64,
        locs: &[(Fingerprint, ChunkLoc)],
        have: &FpSet,
    ) -> StoreResult<(FpSet, Vec<(Fingerprint, ChunkLoc)>)> {
        // One read transaction for every level of the walk (as `locate_all`).
        let ix = self.snapshot()?;
        let asked: FpSet = locs.iter().map(|(fp, _)| *fp).collect();
        let mut deltas: Vec<(Fingerprint, u64)> = Vec::new();
        let mut queued = FpSet::default();
        for (fp, loc) in locs {
            if loc.codec == CODEC_DELTA && queued.insert(*fp) {
                deltas.push((*fp, loc.raw_len as u64));
            }
        }
        // Each delta's base (requested deltas and links), and each link's location, read
        // once per distinct chunk, level by level.
        let mut base: HashMap<Fingerprint, Fingerprint> = HashMap::new();
        let mut link: HashMap<Fingerprint, ChunkLoc> = HashMap::new();
        let mut frontier: Vec<Fingerprint> = deltas.iter().map(|(fp, _)| *fp).collect();
        // A stored chain is at most MAX_CHAIN_DEPTH links; the bound also ends a loop of
        // deltas in a damaged index.
        for _ in 0..MAX_CHAIN_DEPTH {
            if frontier.is_empty() {
                break;
            }
            let mut fresh: Vec<Fingerprint> = Vec::new();
            let mut added = FpSet::default();
            for (fp, b) in frontier.iter().zip(ix.delta_bases(repo_id, &frontier)?) {
                let Some(b) = b else { continue };
                base.insert(*fp, b);
                if !asked.contains(&b)
                    && !have.contains(&b)
                    && !link.contains_key(&b)
                    && added.insert(b)
                {
                    fresh.push(b);
                }
            }
            let (mut damaged, mut missing) = (Vec::new(), Vec::new());
            frontier.clear();
            for (b, loc) in fresh.iter().zip(ix.chunk_locations(repo_id, &fresh)?) {
                match loc {
                    Some(l) => {
                        if l.codec == CODEC_DELTA {
                            frontier.push(*b);
                        }
                        link.insert(*b, l);
                    }
                    None if ix.is_quarantined(repo_id, b)? => damaged.push(*b),
                    None => missing.push(*b),
                }
            }
            if !damaged.is_empty() || !missing.is_empty() {
                return Err(StoreError::Unavailable { damaged, missing });
            }
        }
        // The links of `fp`'s chain the answer would carry.
        let chain = |fp: &Fingerprint| {
            let mut out = Vec::new();
            let mut cur = *fp;
            while let Some(b) = base.get(&cur).filter(|b| link.contains_key(*b)) {
                if out.len() >= MAX_CHAIN_DEPTH {
                    break;
                }
                out.push(*b);
                cur = *b;
            }
            out
        };
        let chains: Vec<Vec<Fingerprint>> = deltas.iter().map(|(fp, _)| chain(fp)).collect();
        let mut used: HashMap<Fingerprint, u64> = HashMap::new();
        for ((_, raw), chain) in deltas.iter().zip(&chains) {
            for l in chain {
                *used.entry(*l).or_default() += raw;
            }
        }
        let decoded: FpSet = deltas
            .iter()
            .zip(&chains)
            .filter(|(_, chain)| {
                chain
                    .iter()
                    .any(|l| used[l] * LINK_MIN_USE < link[l].raw_len as u64)
            })
            .map(|((fp, _), _)| *fp)
            .collect();
        let mut seen = asked;
        let mut out = Vec::new();
        let mut frontier: Vec<Fingerprint> = deltas
            .iter()
            .map(|(fp, _)| *fp)
            .filter(|fp| !decoded.contains(fp))
            .collect();
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for fp in &frontier {
                let Some(b) = base.get(fp) else { continue };
                let Some(l) = link.get(b) else { continue };
                if seen.insert(*b) {
                    out.push((*b, *l));
                    if l.codec == CODEC_DELTA {
                        next.push(*b);
                    }
                }
            }
            frontier = next;
        }
        Ok((decoded, out))
    }

    /// A reader of many chunks of one repository that keeps their container files open.
    pub fn chunk_reader(&self, repo_id: i64) -> ChunkReader<'_> {
        ChunkReader {
            store: self,
            repo_id,
            files: HashMap::new(),
        }
    }

    fn lookup(&self, ix: &dyn IndexRead, repo_id: i64, fp: &Fingerprint) -> StoreResult<Lookup> {
        Ok(match ix.chunk_location(repo_id, fp)? {
            Some(loc) => Lookup::Stored(loc),
            None if ix.is_quarantined(repo_id, fp)? => Lookup::Damaged,
            None => Lookup::Missing,
        })
    }

    /// Reads one located chunk: see [`Store::read_verified`].
    pub fn read_chunk(
        &self,
        repo_id: i64,
        fp: &Fingerprint,
        loc: &ChunkLoc,
        answer: Answer,
    ) -> StoreResult<(u8, Vec<u8>)> {
        crashpoint::delay("read:located");
        self.read_verified(repo_id, fp, loc, None, answer)
    }

    /// Reads a stored chunk and verifies it against its fingerprint: `(0, raw bytes)` when
    /// `answer` decodes its codec, else `(codec, stored bytes)`. A
    /// damaged copy is quarantined and answered `Err(Damaged)`, never returned. `container`
    /// is the chunk's container if the caller has it open.
    pub(super) fn read_verified(
        &self,
        repo_id: i64,
        fp: &Fingerprint,
        loc: &ChunkLoc,
        container: Option<&Handle>,
        answer: Answer,
    ) -> StoreResult<(u8, Vec<u8>)> {
        let stored = match container {
            Some(c) => self.containers.read_at(c, loc.offset, loc.stored_len)?,
            None => match self.containers.open(repo_id, loc.container_id)? {
                Some(c) => self.containers.read_at(&c, loc.offset, loc.stored_len)?,
                None => None,
            },
        };
        self.verify_read(repo_id, fp, loc, stored, answer)
    }

    /// The rest of [`Store::read_verified`], once the stored bytes are read (`None`: the
    /// container is gone or shorter than the index says).
    pub(super) fn verify_read(
        &self,
        repo_id: i64,
        fp: &Fingerprint,
        loc: &ChunkLoc,
        stored: Option<Vec<u8>>,
        answer: Answer,
    ) -> StoreResult<(u8, Vec<u8>)> {
        if stored.is_none() {
            // Moved by the mover or compaction between the lookup and the open: the index
            // has its new place. Removed meanwhile (a forget's prune): it is not stored, and
            // nothing is wrong with the container. Only a chunk still indexed at this place
            // is damaged.
            let ix = self.index()?;
            match ix.chunk_location(repo_id, fp)? {
                Some(now) if now.container_id != loc.container_id || now.offset != loc.offset => {
                    drop(ix);
                    return self.read_verified(repo_id, fp, &now, None, answer);
                }
                Some(_) => {}
                None if ix.is_quarantined(repo_id, fp)? => {
                    return Err(StoreError::Damaged(vec![*fp]))
                }
                None => {
                    return Err(StoreError::Unavailable {
                        damaged: vec![],
                        missing: vec![*fp],
                    })
                }
            }
        }
        let stored = match (stored, answer) {
            (Some(stored), Answer::StoredUnchecked) => return Ok((loc.codec, stored)),
            (stored, _) => stored,
        };
        let res = self.with_bases(repo_id, loc.codec, |bases| match stored {
            None => Err("its container file is missing or shorter than committed".to_string()),
            Some(stored) if answer.decodes(loc.codec) => verify::decode_verified(
                fp,
                loc.codec,
                loc.raw_len,
                stored,
                bases,
                verify::Check::Read,
            )
            .map(|raw| (0, raw)),
            // A delta is decoded against its base here too, and checked: the client gets it
            // as stored only once it is known to decode to its fingerprint.
            Some(stored) => verify::verify_stored(
                fp,
                loc.codec,
                loc.raw_len,
                &stored,
                bases,
                verify::Check::Read,
            )
            .map(|_| (loc.codec, stored)),
        })?;
        res.map_err(|reason| {
            let found = quarantine::Found {
                fp: *fp,
                container_id: loc.container_id,
                offset: loc.offset,
                reason,
            };
            if let Err(e) = self.quarantine_found(repo_id, &[found]) {
                eprintln!("could not quarantine chunk {}: {e}", to_hex(fp));
            }
            StoreError::Damaged(vec![*fp])
        })
    }

    /// Runs `f` with the reader of delta bases; the index is opened for it only when
    /// `codec` is a delta's. A base that could not be read for the server's own reasons (an
    /// index or I/O error) makes this an `Err`, whatever `f` answered: the verification it
    /// failed says nothing of the bytes, and the caller must not quarantine them.
    pub(crate) fn with_bases<T>(
        &self,
        repo_id: i64,
        codec: u8,
        f: impl FnOnce(&verify::Bases<'_>) -> T,
    ) -> StoreResult<T> {
        if codec != CODEC_DELTA {
            return Ok(f(&verify::Bases {
                backend: &*self.containers,
                ix: None,
                repo_id,
                cache: None,
                relocate: None,
                trouble: Default::default(),
            }));
        }
        // The bases of a request's deltas are located one at a time: in one read transaction,
        // and where a container is gone since, again as committed now.
        let ix = self.snapshot()?;
        let relocate =
            |fp: &Fingerprint| self.index().and_then(|now| now.chunk_location(repo_id, fp));
        let bases = verify::Bases {
            backend: &*self.containers,
            ix: Some(&*ix),
            repo_id,
            cache: Some(&self.base_cache),
            relocate: Some(&relocate),
            trouble: Default::default(),
        };
        let out = f(&bases);
        match bases.trouble.take() {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// The distinct fingerprints of `fps` (request order) that are not committed.
    pub fn missing(&self, repo_id: i64, fps: Vec<Fingerprint>) -> StoreResult<Vec<Fingerprint>> {
        self.backup_activity();
        let mut seen: FpSet = FpSet::with_capacity_and_hasher(fps.len(), Default::default());
        let unique: Vec<Fingerprint> = fps.into_iter().filter(|fp| seen.insert(*fp)).collect();
        if let Some(out) = self.with_cache(repo_id, |set| {
            unique
                .iter()
                .filter(|fp| !set.contains_key(*fp))
                .copied()
                .collect()
        })? {
            return Ok(out);
        }
        // One read transaction: SQLite locks once, not once per statement.
        let ix = self.snapshot()?;
        let mut out = Vec::new();
        for fp in unique {
            if !ix.chunk_stored(repo_id, &fp)? {
                out.push(fp);
            }
        }
        Ok(out)
    }

    /// The raw length of each of `fps` (request order), 0 where not committed.
    pub fn raw_lengths(&self, repo_id: i64, fps: &[Fingerprint]) -> StoreResult<Vec<u32>> {
        if let Some(out) = self.with_cache(repo_id, |set| {
            fps.iter()
                .map(|fp| set.get(fp).copied().unwrap_or(0))
                .collect()
        })? {
            return Ok(out);
        }
        let ix = self.snapshot()?;
        let mut out = Vec::with_capacity(fps.len());
        for fp in fps {
            out.push(ix.chunk_raw_len(repo_id, fp)?.unwrap_or(0));
        }
        Ok(out)
    }

    /// Answers `f` from the repository's in-memory fingerprint set, loading it (again, if a
    /// chunk was quarantined or chunk rows were deleted since it was loaded, by this
    /// process or another sharing the index) unless the repository is too large: then
    /// `None`, and the caller asks the index.
    fn with_cache<T>(&self, repo_id: i64, f: impl Fn(&FpLengths) -> T) -> StoreResult<Option<T>> {
        let epoch = Epochs::read(&*self.index()?, repo_id)?;
        for _ in 0..2 {
            {
                let cache = self.fp_cache.read().unwrap_or_else(|p| p.into_inner());
                if let Some((at, set)) = cache.get(&repo_id) {
                    if at.covers(epoch) {
                        return Ok(Some(f(set)));
                    }
                }
            }
            if !self.load_fp_cache(repo_id, epoch)? {
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// Adds chunk rows just committed to the repository's in-memory fingerprint set, if it
    /// is loaded. The caller holds the writer lock, so no load slips in between.
    pub(super) fn cache_new_chunks(
        &self,
        repo_id: i64,
        rows: impl IntoIterator<Item = (Fingerprint, u32)>,
    ) {
        let mut cache = self.fp_cache.write().unwrap_or_else(|p| p.into_inner());
        if let Some((_, set)) = cache.get_mut(&repo_id) {
            set.extend(rows);
        }
    }

    /// Loads a repository's fingerprints into memory unless it is too large. Holds the
    /// writer lock so that no commit slips between the scan and the cache insertion, and
    /// reads the epochs in the same snapshot as the fingerprints.
    fn load_fp_cache(&self, repo_id: i64, min_epoch: Epochs) -> StoreResult<bool> {
        let w = self.writer();
        if self
            .fp_cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&repo_id)
            .is_some_and(|(at, _)| at.covers(min_epoch))
        {
            return Ok(true);
        }
        let tx = w.begin(repo_id)?;
        let epoch = Epochs::read(&*tx, repo_id)?;
        let n = tx.chunk_count(repo_id)?;
        if n > MAX_CACHED_CHUNKS {
            return Ok(false);
        }
        let mut set = FpLengths::with_capacity_and_hasher(n as usize, Default::default());
        tx.chunk_rows(repo_id, &mut |r| {
            set.insert(r.fp, r.raw_len);
            Ok(())
        })?;
        tx.commit()?;
        self.fp_cache
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(repo_id, (epoch, set));
        Ok(true)
    }
}

/// Reads located chunks one after another (`chunks/get`), with a small cache of open
/// container files.
pub struct ChunkReader<'a> {
    store: &'a Store,
    repo_id: i64,
    files: HashMap<u64, Handle>,
}

impl ChunkReader<'_> {
    /// [`Store::read_verified`] through the cached file of the chunk's container.
    pub fn read(
        &mut self,
        fp: &Fingerprint,
        loc: &ChunkLoc,
        answer: Answer,
    ) -> StoreResult<(u8, Vec<u8>)> {
        if !self.files.contains_key(&loc.container_id) {
            if self.files.len() > 64 {
                self.files.clear();
            }
            // A missing container is left to read_verified, which quarantines.
            if let Some(c) = self.store.containers.open(self.repo_id, loc.container_id)? {
                self.files.insert(loc.container_id, c);
            }
        }
        self.store.read_verified(
            self.repo_id,
            fp,
            loc,
            self.files.get(&loc.container_id),
            answer,
        )
    }

    /// How many of `locs` (from the first) one read can serve: the run of chunks that
    /// follow each other in one container with gaps of at most [`RUN_GAP`] bytes, spanning
    /// at most [`RUN_SPAN`].
    pub fn run_len(locs: &[(Fingerprint, ChunkLoc)]) -> usize {
        let Some((_, first)) = locs.first() else {
            return 0;
        };
        let mut end = first.offset + first.stored_len as u64;
        let mut n = 1;
        for (_, l) in &locs[1..] {
            let l_end = l.offset + l.stored_len as u64;
            if l.container_id != first.container_id
                || l.offset < end
                || l.offset - end > RUN_GAP
                || l_end - first.offset > RUN_SPAN
            {
                break;
            }
            end = l_end;
            n += 1;
        }
        n
    }

    /// Reads and verifies located chunks, answered in the order of `locs`: they are
    /// read in container order, chunks close together in one container with one read (a
    /// run, [`ChunkReader::run_len`]), and the runs through one
    /// [`ContainerBackend::read_ranges`](super::backend::ContainerBackend::read_ranges)
    /// call, concurrent on object storage. Each chunk is verified as
    /// [`ChunkReader::read`] does; a run whose container is gone or short is read chunk by
    /// chunk that way (moved since the lookup, or damaged). The chunks of `decoded` are
    /// answered as [`Answer::Whole`] reads them (a delta decoded, checked), whatever `answer`.
    pub fn read_many(
        &mut self,
        locs: &[(Fingerprint, ChunkLoc)],
        answer: Answer,
        decoded: &FpSet,
    ) -> StoreResult<Vec<(u8, Vec<u8>)>> {
        let mut order: Vec<usize> = (0..locs.len()).collect();
        order.sort_by_key(|&i| (locs[i].1.container_id, locs[i].1.offset));
        let sorted: Vec<(Fingerprint, ChunkLoc)> = order.iter().map(|&i| locs[i]).collect();
        let mut runs = Vec::new();
        let mut at = 0;
        while at < sorted.len() {
            let n = Self::run_len(&sorted[at..]);
            runs.push(at..at + n);
            at += n;
        }
        let ranges: Vec<(u64, u64, u32)> = runs
            .iter()
            .map(|r| {
                let (first, last) = (&sorted[r.start].1, &sorted[r.end - 1].1);
                let len = last.offset + last.stored_len as u64 - first.offset;
                (first.container_id, first.offset, len as u32)
            })
            .collect();
        let spans = self.store.containers.read_ranges(self.repo_id, &ranges);
        let mut out: Vec<Option<(u8, Vec<u8>)>> = vec![None; locs.len()];
        for ((run, span), &(_, start, _)) in runs.into_iter().zip(spans).zip(&ranges) {
            let span = span?;
            for k in run {
                let (fp, l) = &sorted[k];
                let answer = if decoded.contains(fp) {
                    Answer::Whole
                } else {
                    answer
                };
                let got = match &span {
                    Some(span) => {
                        let at = (l.offset - start) as usize;
                        let stored = span[at..at + l.stored_len as usize].to_vec();
                        self.store
                            .verify_read(self.repo_id, fp, l, Some(stored), answer)?
                    }
                    None => self.read(fp, l, answer)?,
                };
                out[order[k]] = Some(got);
            }
        }
        Ok(out
            .into_iter()
            .map(|c| c.expect("every chunk read"))
            .collect())
    }
}

/// A chain link goes into a `chunks/get` answer when the deltas decoded through it are at
/// least 1/`LINK_MIN_USE` of its raw bytes ([`Store::chains_answer`]).
pub const LINK_MIN_USE: u64 = 4;

/// Chunks closer than this in a container are read together (the bytes between them are
/// read and dropped): cheaper than another request.
const RUN_GAP: u64 = 64 << 10;
/// One read covers at most this many bytes of a container.
const RUN_SPAN: u64 = 4 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn at(container_id: u64, offset: u64, stored_len: u32) -> (Fingerprint, ChunkLoc) {
        let loc = ChunkLoc {
            container_id,
            offset,
            stored_len,
            raw_len: stored_len,
            codec: 0,
        };
        ([offset as u8; 20], loc)
    }

    #[test]
    fn a_run_is_close_chunks_of_one_container_in_order() {
        assert_eq!(ChunkReader::run_len(&[]), 0);
        // Adjacent, then a small gap: one run; another container ends it.
        let locs = [
            at(1, 100, 10),
            at(1, 110, 10),
            at(1, 1000, 5),
            at(2, 1005, 5),
        ];
        assert_eq!(ChunkReader::run_len(&locs), 3);
        // Going backwards (or repeating a chunk) ends a run.
        assert_eq!(ChunkReader::run_len(&[at(1, 100, 10), at(1, 50, 10)]), 1);
        assert_eq!(ChunkReader::run_len(&[at(1, 100, 10), at(1, 100, 10)]), 1);
        // A gap wider than RUN_GAP ends it, as does a span beyond RUN_SPAN.
        assert_eq!(
            ChunkReader::run_len(&[at(1, 0, 10), at(1, 10 + RUN_GAP + 1, 10)]),
            1
        );
        assert_eq!(
            ChunkReader::run_len(&[at(1, 0, 10), at(1, 10 + RUN_GAP, 10)]),
            2
        );
        let big = (RUN_SPAN / 2) as u32;
        assert_eq!(
            ChunkReader::run_len(&[
                at(1, 0, big),
                at(1, big as u64, big),
                at(1, 2 * big as u64, 1)
            ]),
            2
        );
    }
}
