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
//!   separate [`TinyStore`] instead, which the logical phase asks only when the neighbouring
//!   chunk holds the matching `n - 1` bytes. For keywords of
//!   length 1 and 2 this split is not used (a one-byte partial *is* the `n - 1` partial).
//! * [`InfixList`] — our addition for chunks shorter than `n - 1` bytes, which only occur at
//!   the ends of files under content-defined chunking (see `logical` for why the paper's
//!   rule "keywords are no longer than the minimum chunk size" does not cover them): the
//!   positions `t` (with `1 <= t` and `t + len <= n - 1`) where the whole chunk occurs
//!   strictly inside the keyword, so a match can run through it across three or more chunks.

use crate::hash::{Fingerprint, FpMap};

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
    map: FpMap<Vec<TinyEntry>>,
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

    /// Adds records encoded back to back ([`TinyRecord::encode`]): how a physical worker
    /// hands its records to the logical one.
    pub fn add_encoded(&mut self, mut bytes: &[u8]) -> Result<(), DecodeError> {
        while !bytes.is_empty() {
            let mut r = Reader(bytes);
            self.put(TinyRecord::read(&mut r)?);
            bytes = r.0;
        }
        Ok(())
    }

    /// Every record, in no particular order.
    pub fn records(&self) -> impl Iterator<Item = TinyRecord> + '_ {
        self.map.iter().map(|(fp, e)| TinyRecord {
            fp: *fp,
            entries: e.clone(),
        })
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

// Encoded sizes: those of the byte encoding below (the §3.2 fields in multi-keyword form,
// with 4-byte keyword ids and offsets, 2-byte partial lengths, a 2-byte entry count).
fn tiny_encoded_len(entries: usize) -> usize {
    22 + entries * 5
}

impl ChunkResult {
    pub fn encoded_len(&self) -> usize {
        22 + self.entries.len() * 14
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
        22 + self
            .entries
            .iter()
            .map(|e| 9 + 4 * e.offsets.len())
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
    pub chunk_results: FpMap<ChunkResult>,
    pub location_lists: FpMap<LocationList>,
    pub infix_lists: FpMap<InfixList>,
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
    /// in its [`TinyStore`] (a worker keeps them encoded until the phase ends).
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

// ---- Byte encoding, for moving records between workers ----
//
// Little-endian. Result database: "DSR1", then three sections (chunk-results, location
// lists, infix lists), each a u32 record count followed by records of a 20-byte fingerprint,
// a u16 entry count and the entries:
//   chunk-result entry: u32 keyword, u16 prefix, u16 suffix, u8 count, u32 first, u8 infix
//   location entry:     u32 keyword, u8 long form, u32 n, n × u32 offset
//   infix entry:        u32 keyword, u16 n, n × u16 position
// Tiny record: 20-byte fingerprint, u16 entry count, entries of u32 keyword + u8 flags
// (bit 0 prefix, bit 1 suffix).

/// A byte string that is not a valid encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeError;

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid search record encoding")
    }
}

impl std::error::Error for DecodeError {}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn fp(&mut self) -> Result<Fingerprint, DecodeError> {
        Ok(self.take(20)?.try_into().unwrap())
    }
}

fn entry_count(n: usize) -> u16 {
    u16::try_from(n).expect("more than 65535 keywords in one record")
}

impl TinyRecord {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.fp);
        out.extend_from_slice(&entry_count(self.entries.len()).to_le_bytes());
        for e in &self.entries {
            out.extend_from_slice(&e.keyword.to_le_bytes());
            out.push(u8::from(e.prefix) | u8::from(e.suffix) << 1);
        }
    }

    /// Decodes exactly one record.
    pub fn decode(bytes: &[u8]) -> Result<TinyRecord, DecodeError> {
        let mut r = Reader(bytes);
        let record = Self::read(&mut r)?;
        if !r.0.is_empty() {
            return Err(DecodeError);
        }
        Ok(record)
    }

    fn read(r: &mut Reader) -> Result<TinyRecord, DecodeError> {
        let fp = r.fp()?;
        let n = r.u16()?;
        let mut entries = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let keyword = r.u32()?;
            let flags = r.u8()?;
            entries.push(TinyEntry {
                keyword,
                prefix: flags & 1 != 0,
                suffix: flags & 2 != 0,
            });
        }
        Ok(TinyRecord { fp, entries })
    }
}

const DB_MAGIC: &[u8; 4] = b"DSR1";

impl ResultDb {
    /// The whole database as bytes (see the layout above); [`ResultDb::decode`] inverts it.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(DB_MAGIC);
        out.extend_from_slice(&(self.chunk_results.len() as u32).to_le_bytes());
        for c in self.chunk_results.values() {
            out.extend_from_slice(&c.fp);
            out.extend_from_slice(&entry_count(c.entries.len()).to_le_bytes());
            for e in &c.entries {
                out.extend_from_slice(&e.keyword.to_le_bytes());
                out.extend_from_slice(&e.longest_prefix.to_le_bytes());
                out.extend_from_slice(&e.longest_suffix.to_le_bytes());
                out.push(e.exact_count);
                out.extend_from_slice(&e.first_exact.to_le_bytes());
                out.push(u8::from(e.infix));
            }
        }
        out.extend_from_slice(&(self.location_lists.len() as u32).to_le_bytes());
        for l in self.location_lists.values() {
            out.extend_from_slice(&l.fp);
            out.extend_from_slice(&entry_count(l.entries.len()).to_le_bytes());
            for e in &l.entries {
                out.extend_from_slice(&e.keyword.to_le_bytes());
                out.push(u8::from(e.long_count.is_some()));
                out.extend_from_slice(&(e.offsets.len() as u32).to_le_bytes());
                for o in &e.offsets {
                    out.extend_from_slice(&o.to_le_bytes());
                }
            }
        }
        out.extend_from_slice(&(self.infix_lists.len() as u32).to_le_bytes());
        for l in self.infix_lists.values() {
            out.extend_from_slice(&l.fp);
            out.extend_from_slice(&entry_count(l.entries.len()).to_le_bytes());
            for e in &l.entries {
                out.extend_from_slice(&e.keyword.to_le_bytes());
                out.extend_from_slice(&entry_count(e.positions.len()).to_le_bytes());
                for p in &e.positions {
                    out.extend_from_slice(&p.to_le_bytes());
                }
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<ResultDb, DecodeError> {
        let mut r = Reader(bytes);
        if r.take(4)? != DB_MAGIC {
            return Err(DecodeError);
        }
        let mut db = ResultDb::new();
        for _ in 0..r.u32()? {
            let fp = r.fp()?;
            let mut entries = Vec::new();
            for _ in 0..r.u16()? {
                entries.push(KeywordResult {
                    keyword: r.u32()?,
                    longest_prefix: r.u16()?,
                    longest_suffix: r.u16()?,
                    exact_count: r.u8()?,
                    first_exact: r.u32()?,
                    infix: r.u8()? != 0,
                });
            }
            db.chunk_results.insert(fp, ChunkResult { fp, entries });
        }
        for _ in 0..r.u32()? {
            let fp = r.fp()?;
            let mut entries = Vec::new();
            for _ in 0..r.u16()? {
                let keyword = r.u32()?;
                let long = r.u8()? != 0;
                let n = r.u32()?;
                let offsets = (0..n).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
                entries.push(LocationEntry {
                    keyword,
                    long_count: long.then_some(n),
                    offsets,
                });
            }
            db.location_lists.insert(fp, LocationList { fp, entries });
        }
        for _ in 0..r.u32()? {
            let fp = r.fp()?;
            let mut entries = Vec::new();
            for _ in 0..r.u16()? {
                let keyword = r.u32()?;
                let n = r.u16()?;
                let positions = (0..n).map(|_| r.u16()).collect::<Result<Vec<_>, _>>()?;
                entries.push(InfixEntry { keyword, positions });
            }
            db.infix_lists.insert(fp, InfixList { fp, entries });
        }
        if !r.0.is_empty() {
            return Err(DecodeError);
        }
        Ok(db)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trip_and_rejects_garbage() {
        let fp = [7u8; 20];
        let mut db = ResultDb::new();
        db.chunk_results.insert(
            fp,
            ChunkResult {
                fp,
                entries: vec![KeywordResult {
                    keyword: 3,
                    longest_prefix: 2,
                    longest_suffix: 1,
                    exact_count: MANY,
                    first_exact: 70_000,
                    infix: true,
                }],
            },
        );
        db.location_lists.insert(
            fp,
            LocationList {
                fp,
                entries: vec![LocationEntry {
                    keyword: 3,
                    long_count: Some(2),
                    offsets: vec![70_000, 80_000],
                }],
            },
        );
        db.infix_lists.insert(
            fp,
            InfixList {
                fp,
                entries: vec![InfixEntry {
                    keyword: 3,
                    positions: vec![1, 5],
                }],
            },
        );
        let bytes = db.encode();
        let back = ResultDb::decode(&bytes).unwrap();
        assert_eq!(back.chunk_results, db.chunk_results);
        assert_eq!(back.location_lists, db.location_lists);
        assert_eq!(back.infix_lists, db.infix_lists);
        for cut in 0..bytes.len() {
            assert_eq!(ResultDb::decode(&bytes[..cut]).unwrap_err(), DecodeError);
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(ResultDb::decode(&longer).is_err());

        let t = TinyRecord {
            fp,
            entries: vec![
                TinyEntry {
                    keyword: 0,
                    prefix: true,
                    suffix: false,
                },
                TinyEntry {
                    keyword: 9,
                    prefix: true,
                    suffix: true,
                },
            ],
        };
        let mut tb = Vec::new();
        t.encode(&mut tb);
        assert_eq!(tb.len(), t.encoded_len());
        let c = &db.chunk_results[&fp];
        let l = &db.location_lists[&fp];
        assert_eq!(
            bytes.len(),
            4 + 12 + c.encoded_len() + l.encoded_len() + 22 + 6 + 4
        );
        assert_eq!(TinyRecord::decode(&tb).unwrap(), t);
        assert!(TinyRecord::decode(&tb[..tb.len() - 1]).is_err());
    }
}
