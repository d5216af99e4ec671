//! The logical phase (§3.3, Algorithm 1 of the paper): attribute the per-chunk records to
//! files without reading any chunk data.
//!
//! For each file the recipe (fingerprints and chunk lengths, in file order) is walked once,
//! for all keywords together. At each chunk `c`, starting at file offset `pos`:
//!
//! 1. **Boundary joins** (matches that start before `pos` and end inside `c`). We keep, per
//!    keyword, the set `A` of keyword-prefix lengths that end exactly at `pos`. Normally `A`
//!    is `P(i)` for the previous chunk's longest prefix `i`, represented by `i` alone; then the
//!    matches are cell `(i, j)` of the keyword's [`PartialMatchTable`] with `j` the current
//!    chunk's longest suffix (Algorithm 1, lines 10-14).
//! 2. **Tiny lookups** (lines 15-22). One-byte partials are not in the chunk-result records,
//!    so a join that needs one must ask the [`TinyStore`], and only then: when `A` contains
//!    `n - 1` and `c` has no entry for the keyword, `c`'s tiny suffix flag completes a match
//!    at `pos - (n - 1)`; when `c` starts with the suffix of length `n - 1` and the previous
//!    chunk has no entry, its tiny prefix flag completes a match at `pos - 1`. (Two one-byte
//!    halves never make a keyword of length 3 or more, so tiny-with-tiny needs no lookup.)
//! 3. **Exact matches** of `c`: the first offset from the chunk-result, the others from its
//!    location list (lines 4-9).
//! 4. The new `A` for the next boundary: `P(i')` for `c`'s longest prefix `i'`, plus — our
//!    extension — `k + len(c)` for every `k` in the old `A` at which the whole chunk `c`
//!    occurs inside the keyword (its [`InfixList`](super::records::InfixList)). This carries
//!    a match through a chunk shorter than `n - 1` bytes, so matches spanning three or more
//!    chunks are found too. Under content-defined chunking with minimum size `>= n` such short
//!    chunks are only ever a file's last chunk — which has no successor — so the extension
//!    normally never fires; it makes the result exact for any chunking (e.g. a keyword longer
//!    than a chunk that is *equal* to a whole file's tail, or recipes from other chunkers).
//!
//! Emission order per keyword is by offset (boundary matches start before `pos`, exact ones
//! at or after it), so in [`Mode::FilesOnly`] the single match reported per (file, keyword)
//! is that keyword's first occurrence in the file, and a file's walk stops as soon as every
//! keyword has been seen (§7).

use super::records::{ChunkResult, ResultDb, TinyStore};
use super::table::PartialMatchTable;
use super::{ChunkRef, Dictionary, Match, Mode};

/// Prefix lengths of one keyword ending at the current boundary.
#[derive(Clone, Debug)]
struct Active {
    kw: u32,
    /// `P(longest)` when `set` is empty.
    longest: u16,
    /// Explicit sorted set (only after a chunk shorter than `n - 1` bytes).
    set: Vec<u16>,
}

impl Active {
    fn contains(&self, table: &PartialMatchTable, k: usize) -> bool {
        if self.set.is_empty() {
            if k > self.longest as usize {
                return false;
            }
            let mut found = false;
            table.for_each_prefix(self.longest as usize, |x| found |= x == k);
            found
        } else {
            self.set.binary_search(&(k as u16)).is_ok()
        }
    }

    /// Calls `f` for every prefix length, longest first.
    fn for_each(&self, table: &PartialMatchTable, mut f: impl FnMut(usize)) {
        if self.set.is_empty() {
            table.for_each_prefix(self.longest as usize, f);
        } else {
            self.set.iter().rev().for_each(|&k| f(k as usize));
        }
    }
}

/// Counters of the logical phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogicalStats {
    pub files: u64,
    pub chunks: u64,
    /// Chunk-result records found for the recipes' fingerprints.
    pub chunk_hits: u64,
    pub location_reads: u64,
    pub tiny_lookups: u64,
    pub matches: u64,
}

/// Walks file recipes against the records of a finished physical phase.
pub struct LogicalPhase {
    dict: Dictionary,
    mode: Mode,
    tables: Vec<PartialMatchTable>,
    active: Vec<Active>,
    next: Vec<Active>,
    done: Vec<bool>,
    /// Scratch for ordering a file's matches (`offset << kw_bits | keyword`).
    order: Vec<u64>,
    /// `search_file` stops once `out` holds more matches (see [`LogicalPhase::limit`]).
    limit: usize,
    /// Whether a file's walk stopped at `limit`: its matches in `out` are then partial.
    pub overflowed: bool,
    pub stats: LogicalStats,
}

impl LogicalPhase {
    pub fn new(dict: &Dictionary, mode: Mode) -> Self {
        LogicalPhase {
            dict: dict.clone(),
            mode,
            tables: dict
                .inner
                .keywords
                .iter()
                .map(|k| PartialMatchTable::new(k))
                .collect(),
            active: Vec::new(),
            next: Vec::new(),
            done: vec![false; dict.inner.keywords.len()],
            order: Vec::new(),
            limit: usize::MAX,
            overflowed: false,
            stats: LogicalStats::default(),
        }
    }

    /// Stops a file's walk once the output holds more than `max` matches, setting
    /// `overflowed` ([`super::MAX_MATCHES`] says why). Checked after each chunk, so the output
    /// may pass `max` by one chunk's matches.
    pub fn limit(&mut self, max: usize) {
        self.limit = max;
    }

    /// Appends the matches of one file to `out`, in order of offset, then keyword. `recipe`
    /// lists the file's chunks in order; `db` and `tiny` hold the records of the finished
    /// physical phase.
    pub fn search_file(
        &mut self,
        db: &ResultDb,
        file: u64,
        recipe: &[ChunkRef],
        tiny: &mut dyn TinyStore,
        out: &mut Vec<Match>,
    ) {
        self.stats.files += 1;
        let files_only = self.mode == Mode::FilesOnly;
        let mut remaining = self.dict.inner.keywords.len();
        self.done.iter_mut().for_each(|d| *d = false);
        self.active.clear();
        let out_start = out.len();
        let mut pos: u64 = 0;
        let mut prev: Option<(&ChunkRef, Option<&ChunkResult>)> = None;

        for c in recipe {
            if c.len == 0 {
                continue; // an empty chunk changes nothing at the boundary
            }
            self.stats.chunks += 1;
            let rec = db.chunk_results.get(&c.fp);
            self.stats.chunk_hits += rec.is_some() as u64;
            let entries = rec.map_or(&[][..], |r| &r.entries[..]);
            let mut next = std::mem::take(&mut self.next);
            next.clear();

            let (mut ia, mut ie) = (0, 0);
            while ia < self.active.len() || ie < entries.len() {
                let ka = self.active.get(ia).map_or(u32::MAX, |a| a.kw);
                let ke = entries.get(ie).map_or(u32::MAX, |e| e.keyword);
                let kw = ka.min(ke);
                let act = (ka == kw).then(|| &self.active[ia]);
                let ent = (ke == kw).then(|| &entries[ie]);
                ia += act.is_some() as usize;
                ie += ent.is_some() as usize;
                if self.done[kw as usize] {
                    continue;
                }
                let table = &mut self.tables[kw as usize];
                let n = table.keyword_len();
                let first_out = out.len();
                macro_rules! emit {
                    ($offset:expr) => {
                        out.push(Match {
                            file,
                            keyword: kw,
                            offset: $offset,
                        })
                    };
                }

                // 1 + 2: matches across the boundary at `pos`.
                match (act, ent) {
                    (Some(a), Some(e)) if e.longest_suffix > 0 => {
                        let j = e.longest_suffix as usize;
                        if a.set.is_empty() {
                            let i = a.longest as usize;
                            for &t in table.cell(i, j) {
                                emit!(pos - i as u64 + t as u64);
                            }
                        } else {
                            for &k in a.set.iter().rev() {
                                if table.suffix_implied(j, n - k as usize) {
                                    emit!(pos - k as u64);
                                }
                            }
                        }
                    }
                    (Some(a), None) if n >= 3 && a.contains(table, n - 1) => {
                        self.stats.tiny_lookups += 1;
                        if tiny.get(&c.fp, kw).is_some_and(|t| t.suffix) {
                            emit!(pos - (n as u64 - 1));
                        }
                    }
                    (None, Some(e)) if n >= 3 && e.longest_suffix as usize == n - 1 => {
                        if let Some((p, prec)) = prev {
                            if prec.and_then(|r| r.get(kw)).is_none() {
                                self.stats.tiny_lookups += 1;
                                if tiny.get(&p.fp, kw).is_some_and(|t| t.prefix) {
                                    emit!(pos - 1);
                                }
                            }
                        }
                    }
                    _ => {}
                }

                if let Some(e) = ent {
                    // 3: exact matches.
                    if !(files_only && out.len() > first_out) {
                        if e.exact_count == 1 {
                            emit!(pos + e.first_exact as u64);
                        } else if e.exact_count > 1 {
                            self.stats.location_reads += 1;
                            let list = db
                                .locations(&c.fp, kw)
                                .expect("chunk-result with several matches has a location list");
                            let offs = if files_only {
                                &list.offsets[..1]
                            } else {
                                &list.offsets[..]
                            };
                            for &o in offs {
                                emit!(pos + o as u64);
                            }
                        }
                    }
                    // 4: prefixes ending at the next boundary.
                    let mut a2 = Active {
                        kw,
                        longest: e.longest_prefix,
                        set: Vec::new(),
                    };
                    if e.infix {
                        let inf = db
                            .infixes(&c.fp, kw)
                            .expect("infix flag without infix list");
                        let mut ext = Vec::new();
                        if let Some(a) = act {
                            a.for_each(table, |k| {
                                if inf.positions.binary_search(&(k as u16)).is_ok() {
                                    ext.push((k as u64 + c.len) as u16);
                                }
                            });
                        } else if n >= 3 && inf.positions.first() == Some(&1) {
                            // The previous chunk may end with the keyword's first byte, which
                            // only a tiny record would tell.
                            if let Some((p, prec)) = prev {
                                if prec.and_then(|r| r.get(kw)).is_none() {
                                    self.stats.tiny_lookups += 1;
                                    if tiny.get(&p.fp, kw).is_some_and(|t| t.prefix) {
                                        ext.push((1 + c.len) as u16);
                                    }
                                }
                            }
                        }
                        if !ext.is_empty() {
                            table
                                .for_each_prefix(e.longest_prefix as usize, |k| ext.push(k as u16));
                            ext.sort_unstable();
                            ext.dedup();
                            a2.set = ext;
                        }
                    }
                    if a2.longest > 0 || !a2.set.is_empty() {
                        next.push(a2);
                    }
                }

                if out.len() > first_out && files_only {
                    out.truncate(first_out + 1);
                    self.done[kw as usize] = true;
                    remaining -= 1;
                    next.retain(|a| a.kw != kw);
                }
            }
            std::mem::swap(&mut self.active, &mut next);
            self.next = next;
            if files_only && remaining == 0 {
                break;
            }
            prev = Some((c, rec));
            pos += c.len;
            if out.len() > self.limit {
                self.overflowed = true;
                break;
            }
        }
        self.order_matches(&mut out[out_start..]);
        self.stats.matches += (out.len() - out_start) as u64;
    }

    /// Sorts one file's matches by offset, then keyword. They come chunk by chunk and, in a
    /// chunk, keyword by keyword: in order with one keyword, not with several. Each is
    /// sorted as one integer, `offset << kw_bits | keyword` (the file is the same for all),
    /// which sorts several times faster than the structs by a tuple key.
    fn order_matches(&mut self, m: &mut [Match]) {
        if m.windows(2)
            .all(|w| (w[0].offset, w[0].keyword) <= (w[1].offset, w[1].keyword))
        {
            return;
        }
        let kw_bits = usize::BITS - (self.tables.len().max(2) - 1).leading_zeros();
        let max_offset = m.iter().map(|x| x.offset).max().unwrap_or(0);
        if max_offset >> (64 - kw_bits) != 0 {
            m.sort_unstable_by_key(|x| (x.offset, x.keyword));
            return;
        }
        let file = m[0].file;
        self.order.clear();
        self.order
            .extend(m.iter().map(|x| x.offset << kw_bits | x.keyword as u64));
        self.order.sort_unstable();
        let mask = (1u64 << kw_bits) - 1;
        for (x, &k) in m.iter_mut().zip(&self.order) {
            *x = Match {
                file,
                keyword: (k & mask) as u32,
                offset: k >> kw_bits,
            };
        }
    }
}
