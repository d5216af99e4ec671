//! The physical phase (§3.1-3.2 of the paper): every stored chunk is scanned exactly once,
//! in whatever order the containers arrive, and summarised into result records.
//!
//! For one chunk of length `L` and every keyword `k` of length `n`:
//!
//! 1. **Exact matches** — one forward pass of the [`Automaton`](super::automaton::Automaton) over the chunk, started from
//!    the start state, reports every `(keyword, offset)` lying wholly inside the chunk.
//! 2. **Longest prefix at the end** — the state after that same pass, its failure chain
//!    walked by [`end_partials`](super::automaton::Automaton::end_partials): for each keyword, the longest proper prefix
//!    (`1..n-1` bytes) that the chunk ends with. Shorter prefixes that also end the chunk are
//!    exactly the *borders* of the longest one, so the logical phase can recover them from the
//!    keyword alone; one number per keyword suffices.
//! 3. **Longest suffix at the start** — the reverse automaton (built over reversed keywords)
//!    run over the chunk's first `min(L, n_max - 1)` bytes, last byte first; its final state,
//!    walked the same way, gives for each keyword the longest proper suffix the chunk starts
//!    with.
//! 4. **Infixes** (only when `L <= n_max - 2`, i.e. a short final chunk of a file): every
//!    position strictly inside a keyword where the whole chunk occurs, by SIMD substring
//!    search of the chunk in each keyword (`O(n)` per keyword). Such chunks are a file's
//!    short last chunk (often a whole small file), so with long keywords this runs often.
//!
//! A chunk whose [`Trigrams`] summary rules out every keyword ([`super::trigram`]) holds no
//! exact match: [`PhysicalScanner::scan_summarized`] skips step 1's pass and reads only the
//! chunk's last `n_max - 1` bytes for step 2 (the state they lead to
//! has the same failure chain as after the whole chunk); steps 3 and 4 are unchanged.
//!
//! The findings become records (see [`super::records`]): a keyword whose only findings are a
//! one-byte prefix and/or a one-byte suffix goes to the tiny record (for `n >= 3`), anything
//! else to the chunk-result entry, plus a location-list entry when it matched two or more
//! times. Chunks are independent, so callers may scan in parallel (one [`PhysicalScanner`]
//! per worker) and [`ResultDb::merge`] the results.
//!
//! For [`Mode::FilesOnly`] a scanner keeps only each keyword's **first** exact match in a
//! chunk: a file's first occurrence of a keyword is either across one of its boundaries or
//! the first exact match of the first chunk holding one, so the others are never read, and a
//! common word costs one offset per chunk instead of one per occurrence (the match limit
//! then has nothing to bound: [`PhysicalPhase::overflowed`] stays false).

use super::records::{
    ChunkResult, ChunkScan, InfixEntry, InfixList, KeywordResult, LocationEntry, LocationList,
    ResultDb, TinyEntry, TinyRecord, TinyStore, MANY,
};
use super::trigram::Trigrams;
use super::{Dictionary, Mode};
use crate::hash::Fingerprint;

/// Scans chunks against one [`Dictionary`]; owns reusable scratch buffers.
pub struct PhysicalScanner {
    dict: Dictionary,
    exact: Vec<(u32, u32)>,
    pre: Vec<(u32, u32)>,
    suf: Vec<(u32, u32)>,
    inf: Vec<InfixEntry>,
    /// Keeps only each keyword's first exact match in a chunk ([`Mode::FilesOnly`]).
    first_only: bool,
}

/// Counters of the physical phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhysicalStats {
    pub chunks: u64,
    pub bytes: u64,
    pub exact_matches: u64,
    pub tiny_records: u64,
    /// Chunks whose trigram summary ruled out every keyword (only their ends were read).
    pub ruled_out: u64,
    /// Their raw bytes (part of `bytes`): `bytes - ruled_out_bytes` were read wholly.
    pub ruled_out_bytes: u64,
}

impl PhysicalScanner {
    pub fn new(dict: &Dictionary) -> Self {
        Self::for_mode(dict, Mode::AllMatches)
    }

    /// A scanner whose records serve a search in `mode` (see the module docs for
    /// [`Mode::FilesOnly`]).
    pub fn for_mode(dict: &Dictionary, mode: Mode) -> Self {
        PhysicalScanner {
            dict: dict.clone(),
            exact: Vec::new(),
            pre: Vec::new(),
            suf: Vec::new(),
            inf: Vec::new(),
            first_only: mode == Mode::FilesOnly,
        }
    }

    /// Whether the offsets this scanner keeps are bounded by the match limit: not for
    /// [`Mode::FilesOnly`], which keeps one per keyword and chunk.
    pub fn bounds_offsets(&self) -> bool {
        !self.first_only
    }

    /// Scans one chunk and returns its records (all `None` when nothing was found).
    pub fn scan_chunk(&mut self, fp: &Fingerprint, data: &[u8]) -> ChunkScan {
        self.scan_as(fp, data, true)
    }

    /// [`PhysicalScanner::scan_chunk`] of a chunk with its trigram summary, if it has one.
    /// When the summary rules out every keyword the chunk holds none wholly, and the forward
    /// pass reads only its last `n_max - 1` bytes, which decide the prefixes at its end; the
    /// records are the same. Answers the records and whether the chunk was ruled out.
    pub fn scan_summarized(
        &mut self,
        fp: &Fingerprint,
        data: &[u8],
        trigrams: Option<&Trigrams>,
    ) -> (ChunkScan, bool) {
        let ruled_out = trigrams.is_some_and(|t| !self.dict.inner.trigrams.may_match(t));
        (self.scan_as(fp, data, !ruled_out), ruled_out)
    }

    fn scan_as(&mut self, fp: &Fingerprint, data: &[u8], whole: bool) -> ChunkScan {
        let d = &*self.dict.inner;
        let fwd = &d.forward;
        self.exact.clear();
        self.pre.clear();
        self.suf.clear();
        self.inf.clear();
        if data.is_empty() {
            return ChunkScan::default();
        }

        // 1 + 2: one forward pass (or, with no exact match possible, its end).
        let end = if whole {
            let exact = &mut self.exact;
            let end = fwd.find_all(data, |kw, at| exact.push((kw, at as u32)));
            self.exact.sort_by_key(|m| m.0); // stable: offsets stay ascending per keyword
            end
        } else {
            fwd.tail_state(data)
        };
        fwd.end_partials(end, &mut self.pre);

        // 3: reverse pass over the first n_max - 1 bytes.
        let head = &data[..data.len().min(d.max_len - 1)];
        let rev = &d.reverse;
        rev.end_partials(rev.run_rev(rev.start(), head), &mut self.suf);

        // 4: a chunk short enough to sit strictly inside a keyword: find the chunk in each
        // keyword's interior `kw[1..n-1]` (SIMD substring search, O(n) per keyword).
        let l = data.len();
        if l + 2 <= d.max_len {
            let finder = memchr::memmem::Finder::new(data);
            for (id, kw) in d.keywords.iter().enumerate() {
                if kw.len() < l + 2 {
                    continue;
                }
                let interior = &kw[1..kw.len() - 1];
                let mut positions = Vec::new();
                let mut at = 0;
                while let Some(h) = finder.find(&interior[at..]) {
                    positions.push((at + h + 1) as u16);
                    at += h + 1;
                }
                if !positions.is_empty() {
                    self.inf.push(InfixEntry {
                        keyword: id as u32,
                        positions,
                    });
                }
            }
        }

        self.assemble(fp)
    }

    /// Merges the per-keyword findings (each list sorted by keyword) into records.
    fn assemble(&mut self, fp: &Fingerprint) -> ChunkScan {
        let mut entries = Vec::new();
        let mut locations = Vec::new();
        let mut tiny = Vec::new();
        let (mut ie, mut ip, mut is, mut ii) = (0, 0, 0, 0);
        loop {
            let heads = [
                self.exact.get(ie).map(|x| x.0),
                self.pre.get(ip).map(|x| x.0),
                self.suf.get(is).map(|x| x.0),
                self.inf.get(ii).map(|x| x.keyword),
            ];
            let Some(kw) = heads.iter().flatten().copied().min() else {
                break;
            };
            let e0 = ie;
            while ie < self.exact.len() && self.exact[ie].0 == kw {
                ie += 1;
            }
            let count = if self.first_only {
                (ie - e0).min(1)
            } else {
                ie - e0
            };
            let mut prefix = 0;
            if heads[1] == Some(kw) {
                prefix = self.pre[ip].1;
                ip += 1;
            }
            let mut suffix = 0;
            if heads[2] == Some(kw) {
                suffix = self.suf[is].1;
                is += 1;
            }
            let infix = heads[3] == Some(kw);
            if infix {
                ii += 1;
            }
            let n = self.dict.inner.keywords[kw as usize].len();
            if n >= 3 && count == 0 && prefix <= 1 && suffix <= 1 && !infix {
                tiny.push(TinyEntry {
                    keyword: kw,
                    prefix: prefix == 1,
                    suffix: suffix == 1,
                });
                continue;
            }
            entries.push(KeywordResult {
                keyword: kw,
                longest_prefix: prefix as u16,
                longest_suffix: suffix as u16,
                exact_count: count.min(MANY as usize) as u8,
                first_exact: if count > 0 { self.exact[e0].1 } else { 0 },
                infix,
            });
            if count >= 2 {
                locations.push(LocationEntry {
                    keyword: kw,
                    long_count: (count >= MANY as usize).then_some(count as u32),
                    offsets: self.exact[e0..e0 + count].iter().map(|m| m.1).collect(),
                });
            }
        }
        ChunkScan {
            chunk: (!entries.is_empty()).then_some(ChunkResult { fp: *fp, entries }),
            locations: (!locations.is_empty()).then_some(LocationList {
                fp: *fp,
                entries: locations,
            }),
            infixes: (!self.inf.is_empty()).then(|| InfixList {
                fp: *fp,
                entries: std::mem::take(&mut self.inf),
            }),
            tiny: (!tiny.is_empty()).then_some(TinyRecord {
                fp: *fp,
                entries: tiny,
            }),
        }
    }
}

/// Convenience driver: scans chunks into a [`ResultDb`] and a [`TinyStore`].
pub struct PhysicalPhase {
    scanner: PhysicalScanner,
    pub db: ResultDb,
    pub stats: PhysicalStats,
    /// Exact offsets past which [`PhysicalPhase::overflowed`] holds.
    max_offsets: u64,
}

impl PhysicalPhase {
    pub fn new(dict: &Dictionary) -> Self {
        Self::for_mode(dict, Mode::AllMatches)
    }

    /// A phase whose records serve a search in `mode` ([`PhysicalScanner::for_mode`]).
    pub fn for_mode(dict: &Dictionary, mode: Mode) -> Self {
        PhysicalPhase {
            scanner: PhysicalScanner::for_mode(dict, mode),
            db: ResultDb::new(),
            stats: PhysicalStats::default(),
            max_offsets: u64::MAX,
        }
    }

    /// The search answers at most `max_matches` matches: the phase has
    /// [`overflowed`](PhysicalPhase::overflowed) once its chunks hold more than four times as
    /// many exact offsets (each is at least one match in every file holding its chunk;
    /// [`super::MAX_MATCHES`] says why). The caller checks after each chunk and stops.
    pub fn limit(&mut self, max_matches: usize) {
        self.max_offsets = (max_matches as u64).saturating_mul(4);
    }

    /// Whether the chunks scanned hold more exact offsets than [`PhysicalPhase::limit`] allows
    /// (never for [`Mode::FilesOnly`], which keeps one offset per keyword and chunk).
    pub fn overflowed(&self) -> bool {
        self.scanner.bounds_offsets() && self.stats.exact_matches > self.max_offsets
    }

    /// Scans one stored chunk. Call once per unique chunk; repeating a chunk is harmless.
    pub fn add_chunk(&mut self, fp: &Fingerprint, data: &[u8], tiny: &mut dyn TinyStore) {
        if let Some(t) = self.scan(fp, data) {
            tiny.put(t);
        }
    }

    /// [`PhysicalPhase::add_chunk`] for callers that keep tiny records elsewhere (a worker
    /// hands its records to the logical worker encoded): the chunk's tiny record, if any, is
    /// returned for the caller to store.
    pub fn scan(&mut self, fp: &Fingerprint, data: &[u8]) -> Option<TinyRecord> {
        self.scan_summarized(fp, data, None)
    }

    /// [`PhysicalPhase::scan`] of a chunk with its trigram summary: when the summary rules
    /// out every keyword, only the chunk's ends are read ([`PhysicalScanner::scan_summarized`]).
    pub fn scan_summarized(
        &mut self,
        fp: &Fingerprint,
        data: &[u8],
        trigrams: Option<&Trigrams>,
    ) -> Option<TinyRecord> {
        let (scan, ruled_out) = self.scanner.scan_summarized(fp, data, trigrams);
        if ruled_out {
            self.stats.ruled_out += 1;
            self.stats.ruled_out_bytes += data.len() as u64;
        }
        self.stats.chunks += 1;
        self.stats.bytes += data.len() as u64;
        if let Some(c) = &scan.chunk {
            self.stats.exact_matches += c
                .entries
                .iter()
                .map(|e| match &scan.locations {
                    Some(l) if e.exact_count >= 2 => l
                        .entries
                        .iter()
                        .find(|x| x.keyword == e.keyword)
                        .map_or(0, |x| x.offsets.len() as u64),
                    _ => e.exact_count as u64,
                })
                .sum::<u64>();
        }
        let tiny = self.db.insert(scan);
        self.stats.tiny_records += tiny.is_some() as u64;
        tiny
    }

    /// Finishes the phase, returning the in-memory database and the counters.
    pub fn finish(self) -> (ResultDb, PhysicalStats) {
        (self.db, self.stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::fingerprint;

    /// Files only keeps each keyword's first exact match in a chunk, so a common word never
    /// reaches the match limit; every match is kept otherwise, and the limit holds.
    #[test]
    fn files_only_keeps_the_first_match_per_keyword_and_chunk() {
        let dict = Dictionary::new(vec![b"ab".to_vec(), b"zz".to_vec()], 64).unwrap();
        let data = b"xxabxxabxxab zz zz".repeat(4);
        let fp = fingerprint(&data);
        let mut all = PhysicalPhase::new(&dict);
        all.limit(1);
        let mut first = PhysicalPhase::for_mode(&dict, Mode::FilesOnly);
        first.limit(1);
        let mut tiny = crate::search::MemTinyStore::new();
        all.add_chunk(&fp, &data, &mut tiny);
        first.add_chunk(&fp, &data, &mut tiny);
        assert_eq!(all.stats.exact_matches, 12 + 8);
        assert!(all.overflowed());
        assert_eq!(first.stats.exact_matches, 2);
        assert!(!first.overflowed());
        let entries = &first.db.chunk_results[&fp].entries;
        let found: Vec<(u32, u8, u32)> = entries
            .iter()
            .map(|e| (e.keyword, e.exact_count, e.first_exact))
            .collect();
        assert_eq!(found, [(0, 1, 2), (1, 1, 13)]);
        assert!(!first.db.location_lists.contains_key(&fp));
    }
}
