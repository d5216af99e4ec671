//! The match-result records written by the physical phase and read by the logical phase.
//!
//! The layout follows §3.2 of the DedupSearch paper, in its multi-keyword form: every record
//! holds one copy of the chunk fingerprint followed by one entry per keyword that has
//! something to say about the chunk. Keywords with nothing to say have no entry, and a chunk
//! with no entry at all has no record.
//!
//! * [`ChunkResult`] — per keyword: longest keyword prefix that ends the chunk, longest
//!   keyword suffix that starts it, number of exact matches (one byte, 255 meaning "more than
//!   254") and the offset of the first exact match. Kept in memory ([`ResultDb`]).
//! * [`LocationList`] — only for keywords with two or more exact matches in the chunk: all
//!   their offsets. The *long form* (more than 254 matches) additionally stores the precise
//!   count, because the one-byte count in the chunk-result then only says "255 = many".
//! * [`TinyRecord`] — a keyword whose *only* finding in the chunk is a one-byte prefix at its
//!   end and/or a one-byte suffix at its start gets no chunk-result entry; two flags go to a
//!   separate [`TinyStore`] instead (IndexedDB in the browser), which the logical phase asks
//!   only when the neighbouring chunk holds the matching `n - 1` bytes. For keywords of
//!   length 1 and 2 this split is not used (a one-byte partial *is* the `n - 1` partial).
//! * [`InfixList`] — our addition for chunks shorter than `n - 1` bytes, which only occur at
//!   the ends of files under content-defined chunking (see `logical` for why the paper's
//!   rule "keywords are no longer than the minimum chunk size" does not cover them): the
//!   positions `t` (with `1 <= t` and `t + len <= n - 1`) where the whole chunk occurs
//!   strictly inside the keyword, so a match can run through it across three or more chunks.

use std::collections::HashMap;

use crate::hash::Fingerprint;

/// The one-byte exact-match count that means "more than 254, see the long location list".
pub const MANY: u8 = 255;

/// One keyword's fields in a [`ChunkResult`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeywordResult {
    pub keyword: u32,
    /// Length of the longest proper keyword prefix the chunk ends with (0: none).
    pub longest_prefix: u16,
    /// Length of the longest proper keyword suffix the chunk starts with (0: none).
    pub longest_suffix: u16,
    /// Exact matches inside the chunk: 0..=254, or [`MANY`].
    pub exact_count: u8,
    /// Offset in the chunk of the first exact match (meaningful when `exact_count > 0`).
    pub first_exact: u32,
    /// The chunk has an [`InfixList`] entry for this keyword.
    pub infix: bool,
}

/// Chunk-result record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkResult {
    pub fp: Fingerprint,
    /// Sorted by keyword id.
    pub entries: Vec<KeywordResult>,
}

/// One keyword's exact-match offsets in a [`LocationList`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocationEntry {
    pub keyword: u32,
    /// `Some(count)` in the long form (more than 254 matches), `None` in the short form,
    /// where the count is the chunk-result's `exact_count`.
    pub long_count: Option<u32>,
    /// All exact-match offsets in the chunk, ascending.
    pub offsets: Vec<u32>,
}

/// Location-list record (short or long form per entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocationList {
    pub fp: Fingerprint,
    /// Sorted by keyword id.
    pub entries: Vec<LocationEntry>,
}

/// One keyword's flags in a [`TinyRecord`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TinyEntry {
    pub keyword: u32,
    /// The chunk's last byte is the keyword's first byte.
    pub prefix: bool,
    /// The chunk's first byte is the keyword's last byte.
    pub suffix: bool,
}

/// Tiny-result record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TinyRecord {
    pub fp: Fingerprint,
    /// Sorted by keyword id.
    pub entries: Vec<TinyEntry>,
}

/// One keyword's positions in an [`InfixList`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InfixEntry {
    pub keyword: u32,
    /// Every `t` with `keyword[t..t + chunk_len] == chunk`, `t >= 1`, `t + chunk_len < n`.
    pub positions: Vec<u16>,
}

/// Infix record for a chunk shorter than `n - 1` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InfixList {
    pub fp: Fingerprint,
    pub entries: Vec<InfixEntry>,
}

/// Everything the physical phase found in one chunk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChunkScan {
    pub chunk: Option<ChunkResult>,
    pub locations: Option<LocationList>,
    pub infixes: Option<InfixList>,
    pub tiny: Option<TinyRecord>,
}

/// Storage for tiny-result records. The logical phase calls [`TinyStore::get`] only for a
/// chunk next to one that holds an `n - 1` partial of the same keyword.
pub trait TinyStore {
    fn put(&mut self, record: TinyRecord);
    /// The flags of `keyword` in chunk `fp`, if the chunk has a tiny entry for it.
    fn get(&mut self, fp: &Fingerprint, keyword: u32) -> Option<TinyEntry>;
}

/// In-memory [`TinyStore`]; counts lookups.
#[derive(Clone, Debug, Default)]
pub struct MemTinyStore {
    map: HashMap<Fingerprint, Vec<TinyEntry>>,
    /// Number of [`TinyStore::get`] calls so far.
    pub lookups: u64,
}

impl MemTinyStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of tiny-result records (chunks).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Sum of [`TinyRecord::encoded_len`] over all records.
    pub fn encoded_bytes(&self) -> u64 {
        self.map
            .values()
            .map(|e| tiny_encoded_len(e.len()) as u64)
            .sum()
    }
}

impl TinyStore for MemTinyStore {
    fn put(&mut self, record: TinyRecord) {
        self.map.insert(record.fp, record.entries);
    }

    fn get(&mut self, fp: &Fingerprint, keyword: u32) -> Option<TinyEntry> {
        self.lookups += 1;
        let entries = self.map.get(fp)?;
        entries
            .binary_search_by_key(&keyword, |e| e.keyword)
            .ok()
            .map(|i| entries[i])
    }
}

// Encoded sizes in the §3.2 layout, multi-keyword form: a 20-byte fingerprint, a 2-byte
// keyword id per entry, 2-byte partial lengths (keywords up to 65535 bytes), a 1-byte count
// and 4-byte offsets (chunks up to 4 GiB; the paper's 2 bytes assume chunks below 64 KiB).
fn tiny_encoded_len(entries: usize) -> usize {
    20 + entries * 3
}

impl ChunkResult {
    pub fn encoded_len(&self) -> usize {
        20 + self.entries.len() * 11
    }

    /// The entry for `keyword`, if any.
    pub fn get(&self, keyword: u32) -> Option<&KeywordResult> {
        self.entries
            .binary_search_by_key(&keyword, |e| e.keyword)
            .ok()
            .map(|i| &self.entries[i])
    }
}

impl LocationList {
    pub fn encoded_len(&self) -> usize {
        20 + self
            .entries
            .iter()
            .map(|e| 2 + if e.long_count.is_some() { 4 } else { 0 } + 4 * e.offsets.len())
            .sum::<usize>()
    }
}

impl TinyRecord {
    pub fn encoded_len(&self) -> usize {
        tiny_encoded_len(self.entries.len())
    }
}

/// The in-memory result database of the physical phase: chunk-result, location-list and
/// infix indexes keyed by fingerprint (tiny records live in a [`TinyStore`]).
#[derive(Clone, Debug, Default)]
pub struct ResultDb {
    pub chunk_results: HashMap<Fingerprint, ChunkResult>,
    pub location_lists: HashMap<Fingerprint, LocationList>,
    pub infix_lists: HashMap<Fingerprint, InfixList>,
}

/// Record counts and sizes, as in Fig. 7 of the paper.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbStats {
    pub chunk_results: u64,
    pub chunk_result_bytes: u64,
    pub location_lists: u64,
    pub long_location_lists: u64,
    pub location_list_bytes: u64,
    pub infix_lists: u64,
}

impl ResultDb {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores the in-memory records of `scan`; returns its tiny record for the caller to put
    /// in its [`TinyStore`] (possibly asynchronously, e.g. batched into IndexedDB).
    pub fn insert(&mut self, scan: ChunkScan) -> Option<TinyRecord> {
        if let Some(c) = scan.chunk {
            self.chunk_results.insert(c.fp, c);
        }
        if let Some(l) = scan.locations {
            self.location_lists.insert(l.fp, l);
        }
        if let Some(i) = scan.infixes {
            self.infix_lists.insert(i.fp, i);
        }
        scan.tiny
    }

    /// Moves all records of `other` (e.g. from another worker) into `self`.
    pub fn merge(&mut self, other: ResultDb) {
        self.chunk_results.extend(other.chunk_results);
        self.location_lists.extend(other.location_lists);
        self.infix_lists.extend(other.infix_lists);
    }

    pub fn stats(&self) -> DbStats {
        DbStats {
            chunk_results: self.chunk_results.len() as u64,
            chunk_result_bytes: self
                .chunk_results
                .values()
                .map(|c| c.encoded_len() as u64)
                .sum(),
            location_lists: self.location_lists.len() as u64,
            long_location_lists: self
                .location_lists
                .values()
                .filter(|l| l.entries.iter().any(|e| e.long_count.is_some()))
                .count() as u64,
            location_list_bytes: self
                .location_lists
                .values()
                .map(|l| l.encoded_len() as u64)
                .sum(),
            infix_lists: self.infix_lists.len() as u64,
        }
    }

    /// Exact-match offsets of `keyword` in chunk `fp` when it has two or more.
    pub fn locations(&self, fp: &Fingerprint, keyword: u32) -> Option<&LocationEntry> {
        let l = self.location_lists.get(fp)?;
        l.entries
            .binary_search_by_key(&keyword, |e| e.keyword)
            .ok()
            .map(|i| &l.entries[i])
    }

    /// Infix positions of `keyword` in (short) chunk `fp`.
    pub fn infixes(&self, fp: &Fingerprint, keyword: u32) -> Option<&InfixEntry> {
        let l = self.infix_lists.get(fp)?;
        l.entries
            .binary_search_by_key(&keyword, |e| e.keyword)
            .ok()
            .map(|i| &l.entries[i])
    }
}
