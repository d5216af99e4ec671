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
//! A chunk with a [`Trigrams`] summary ([`super::trigram`]) holds exact matches only where
//! its block filters say a keyword may start: [`PhysicalScanner::scan_summarized`] runs
//! step 1's pass over each run of such blocks and the `n_max - 1` bytes after it (keeping
//! the matches that start inside the run), or skips it when no block may start a keyword,
//! and reads the chunk's last `n_max - 1` bytes for step 2 (the state they lead to has the
//! same failure chain as after the whole chunk); steps 3 and 4 are unchanged.
//!
//! The block test is not free (a few nanoseconds per head and block), so it is kept only
//! while it pays: after a sample of [`SUMMARY_SAMPLE`] bytes tested, a scanner tests further
//! chunks only while the bytes it spared reading outweigh the heads tested per block
//! ([`PhysicalScanner::summaries_pay`]). Many keywords that together occur in most blocks
//! (a common case past a hundred keywords) then cost one full pass and no tests.
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
use super::trigram::{Scope, Trigrams, BLOCK};
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
    /// Scratch for the runs of blocks a keyword may start in
    /// ([`super::trigram::TrigramFilter::blocks`]).
    runs: Vec<(usize, usize)>,
    /// Bytes of chunks whose summaries were tested, and how many of them were not read.
    tested: u64,
    spared: u64,
}

/// Bytes a scanner tests summaries of before [`PhysicalScanner::summaries_pay`] judges them.
pub const SUMMARY_SAMPLE: u64 = 4 << 20;
/// How many bytes of scanning a summary test must spare per head and block tested: a
/// block's test costs about what scanning a few bytes does.
const SUMMARY_PAYS_PER_HEAD: u64 = 4;

/// What a chunk's summary spared the scanner ([`PhysicalScanner::scan_summarized`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spared {
    /// No keyword starts in the chunk: only its ends were read.
    pub ruled_out: bool,
    /// Bytes of the chunk in blocks no keyword starts in (not read by the exact-match pass).
    pub bytes: usize,
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
    /// Bytes (part of `bytes`) in blocks whose summaries ruled out every keyword, in these
    /// chunks and in others: `bytes - ruled_out_bytes` were read by the exact-match pass.
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
            runs: Vec::new(),
            tested: 0,
            spared: 0,
        }
    }

    /// Whether the offsets this scanner keeps are bounded by the match limit: not for
    /// [`Mode::FilesOnly`], which keeps one per keyword and chunk.
    pub fn bounds_offsets(&self) -> bool {
        !self.first_only
    }

    /// Scans one chunk and returns its records (all `None` when nothing was found).
    pub fn scan_chunk(&mut self, fp: &Fingerprint, data: &[u8]) -> ChunkScan {
        self.scan_as(fp, data, Scope::Whole, &[])
    }

    /// [`PhysicalScanner::scan_chunk`] of a chunk with its trigram summary, if it has one.
    /// The exact-match pass reads only the runs of blocks where the summary says a keyword
    /// may start (and the `n_max - 1` bytes after each), nothing when no block may start
    /// one; its last `n_max - 1` bytes decide the prefixes at its end. The records are the
    /// same as [`PhysicalScanner::scan_chunk`]'s. Answers the records and what the summary
    /// spared.
    pub fn scan_summarized(
        &mut self,
        fp: &Fingerprint,
        data: &[u8],
        trigrams: Option<&Trigrams>,
    ) -> (ChunkScan, Spared) {
        // The runs buffer is reused from chunk to chunk.
        let mut runs = std::mem::take(&mut self.runs);
        let (scope, bytes) = match trigrams {
            Some(t) if self.dict.inner.trigrams.active() && self.summaries_pay() => {
                self.tested += data.len() as u64;
                self.dict.inner.trigrams.blocks(t, data.len(), &mut runs)
            }
            _ => (Scope::Whole, 0),
        };
        self.spared += bytes as u64;
        let spared = Spared {
            ruled_out: scope == Scope::Nothing,
            bytes,
        };
        let scan = self.scan_as(fp, data, scope, &runs);
        self.runs = runs;
        (scan, spared)
    }

    /// Whether testing summaries still pays: always within the first [`SUMMARY_SAMPLE`]
    /// bytes tested, then while the bytes spared are at least [`SUMMARY_PAYS_PER_HEAD`]
    /// per head and block tested.
    fn summaries_pay(&self) -> bool {
        let heads = self.dict.inner.trigrams.per_block() as u64;
        self.tested < SUMMARY_SAMPLE
            || self.spared * BLOCK as u64 >= self.tested * heads * SUMMARY_PAYS_PER_HEAD
    }

    /// Scans `data` as `scope` says; `runs` are the runs of blocks of [`Scope::Runs`].
    fn scan_as(
        &mut self,
        fp: &Fingerprint,
        data: &[u8],
        scope: Scope,
        runs: &[(usize, usize)],
    ) -> ChunkScan {
        let d = &*self.dict.inner;
        let fwd = &d.forward;
        self.exact.clear();
        self.pre.clear();
        self.suf.clear();
        self.inf.clear();
        if data.is_empty() {
            return ChunkScan::default();
        }

        // 1 + 2: one forward pass (or one per run of blocks a keyword may start in, then
        // the chunk's end).
        let exact = &mut self.exact;
        let end = match scope {
            Scope::Whole => fwd.find_all(data, |kw, at| exact.push((kw, at as u32))),
            Scope::Nothing => fwd.tail_state(data),
            Scope::Runs => {
                let mut end = None;
                for &(s, e) in runs {
                    let stop = (e + d.max_len - 1).min(data.len());
                    let state = fwd.find_all(&data[s..stop], |kw, at| {
                        if s + at < e {
                            exact.push((kw, (s + at) as u32))
                        }
                    });
                    // A pass that read the chunk's last n_max - 1 bytes left the state
                    // `tail_state` would compute.
                    if stop == data.len() && stop - s >= d.max_len - 1 {
                        end = Some(state);
                    }
                }
                end.unwrap_or_else(|| fwd.tail_state(data))
            }
        };
        self.exact.sort_by_key(|m| m.0); // stable: offsets stay ascending per keyword
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

    /// [`PhysicalPhase::scan`] of a chunk with its trigram summary: only the runs of blocks
    /// a keyword may start in and the chunk's ends are read
    /// ([`PhysicalScanner::scan_summarized`]).
    pub fn scan_summarized(
        &mut self,
        fp: &Fingerprint,
        data: &[u8],
        trigrams: Option<&Trigrams>,
    ) -> Option<TinyRecord> {
        let (scan, spared) = self.scanner.scan_summarized(fp, data, trigrams);
        self.stats.ruled_out += spared.ruled_out as u64;
        self.stats.ruled_out_bytes += spared.bytes as u64;
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

    /// Summaries are tested for a sample, then only while they spare enough reading.
    #[test]
    fn summaries_are_tested_while_they_pay() {
        let text: Vec<u8> = (0..8192u32)
            .flat_map(|i| format!("w{} ", i % 97).into_bytes())
            .collect();
        let chunks: Vec<&[u8]> = text.chunks(4096).collect();
        let sums: Vec<Trigrams> = chunks.iter().map(|c| Trigrams::of(c)).collect();
        let rounds = (2 * SUMMARY_SAMPLE as usize).div_ceil(text.len());
        let run = |keywords: Vec<Vec<u8>>| {
            let dict = Dictionary::new(keywords, 64).unwrap();
            let mut plain = PhysicalScanner::new(&dict);
            let mut summarized = PhysicalScanner::new(&dict);
            for _ in 0..rounds {
                for (c, t) in chunks.iter().zip(&sums) {
                    let fp = fingerprint(c);
                    let whole = plain.scan_chunk(&fp, c);
                    assert_eq!(summarized.scan_summarized(&fp, c, Some(t)).0, whole);
                }
            }
            summarized.tested
        };
        // Absent keywords: every block is ruled out, so every chunk is tested.
        let absent = (0..8)
            .map(|i| format!("absent keyword {i}").into_bytes())
            .collect();
        assert_eq!(run(absent), (rounds * text.len()) as u64);
        // Words found in nearly every block: testing stops after the sample.
        let common = (0..300).map(|i| format!("w{i} ").into_bytes()).collect();
        let tested = run(common);
        assert!(
            (SUMMARY_SAMPLE..SUMMARY_SAMPLE + 4096).contains(&tested),
            "{tested}"
        );
    }
}
