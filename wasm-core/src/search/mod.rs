//! Keyword search over deduplicated backups: DedupSearch (Elias et al., FAST '22) and the
//! naive search it replaces.
//!
//! A backup store holds each unique chunk once, while files (recipes) reference chunks many
//! times over. The naive search ([`naive`]) reassembles every file and scans it, so its cost
//! follows the *logical* size. DedupSearch splits the work in two:
//!
//! 1. the **physical phase** ([`physical`]) reads every stored chunk once, in storage order,
//!    and records per chunk and keyword the exact matches plus the partial matches at its
//!    two ends ([`records`]), using one Aho-Corasick pass ([`automaton`]) forward and a short
//!    one backward;
//! 2. the **logical phase** ([`logical`]) walks the file recipes — fingerprints only, no chunk
//!    data — emits the exact matches, and joins a chunk's keyword prefix with the next
//!    chunk's keyword suffix through each keyword's partial-match table ([`table`]).
//!
//! Both produce the same set of [`Match`]es `(file, keyword, offset in file)`; the property
//! tests in `tests/search_*.rs` check that on random deduplicated corpora.
//!
//! # Driving it (what the Wasm bindings and the server do)
//!
//! ```
//! use wasm_core::search::*;
//! use wasm_core::hash::fingerprint;
//!
//! // Keywords: text or hex (binary); ids are positions in this list.
//! let keywords = vec![parse_keyword("DEDUP", false)?, parse_keyword("55 50", true)?];
//! // Keywords may be at most as long as the store's minimum chunk size.
//! let dict = Dictionary::new(keywords, 2048)?;
//!
//! // Physical phase: every unique chunk once, any order (e.g. container by container; one
//! // PhysicalPhase per worker, then ResultDb::merge). Tiny records go to their own store.
//! let chunks: Vec<&[u8]> = vec![b"xxDED", b"UPxxDEDUPx"];
//! let mut tiny = MemTinyStore::new();
//! let mut phys = PhysicalPhase::new(&dict);
//! for c in &chunks {
//!     phys.add_chunk(&fingerprint(c), c, &mut tiny);
//! }
//! let (db, _phys_stats) = phys.finish();
//!
//! // Logical phase: each file's recipe (fingerprint + length of each chunk, in order).
//! let recipe: Vec<ChunkRef> = chunks.iter().map(|c| ChunkRef::new(fingerprint(c), c.len() as u64)).collect();
//! let mut logical = LogicalPhase::new(&dict, Mode::AllMatches);
//! let mut hits = Vec::new();
//! logical.search_file(&db, 7, &recipe, &mut tiny, &mut hits);
//! hits.sort();
//! assert_eq!(hits, vec![
//!     Match { file: 7, keyword: 0, offset: 2 },  // DED|UP across the chunk border
//!     Match { file: 7, keyword: 0, offset: 9 },
//!     Match { file: 7, keyword: 1, offset: 5 },
//!     Match { file: 7, keyword: 1, offset: 12 },
//! ]);
//! # Ok::<(), SearchError>(())
//! ```
//!
//! In the browser each physical worker keeps its tiny records encoded
//! ([`PhysicalPhase::scan`] hands them back, [`TinyRecord::encode`]) and passes them to the
//! logical worker with its [`ResultDb`], which loads them into a [`MemTinyStore`]
//! ([`MemTinyStore::add_encoded`]). The paper keeps them on disk because they can outnumber
//! the chunk-results; here they stay in memory because a search runs in the page only while
//! the repository's unique chunks fit the workers' cache (above that the server searches),
//! and a tiny record is at most one per chunk of 22 bytes plus 5 per keyword, far below the
//! chunk's own bytes (docs/SEARCH.md, "Tiny records in memory").
//!
//! Workers: each scans its containers with its own [`PhysicalPhase`]/[`PhysicalScanner`];
//! [`ResultDb::encode`]/[`ResultDb::decode`] move the records to the logical worker and
//! [`ResultDb::merge`] combines them. [`Dictionary`] is cheap to clone (shared).
//!
//! [`search`] runs both phases in memory (the server, tests, benchmarks);
//! [`naive::NaiveSearch`] is the oracle/baseline.

pub mod automaton;
pub mod cache_file;
pub mod keyword;
pub mod logical;
pub mod naive;
pub mod physical;
pub mod records;
pub mod table;
pub mod trigram;

pub use automaton::Automaton;
pub use keyword::{keyword_error, parse_keyword, parse_keyword_lines};
pub use logical::{LogicalPhase, LogicalStats};
pub use naive::NaiveSearch;
pub use physical::{PhysicalPhase, PhysicalScanner, PhysicalStats, Spared};
pub use records::{
    ChunkResult, ChunkScan, DbStats, DecodeError, KeywordResult, LocationEntry, LocationList,
    MemTinyStore, ResultDb, TinyEntry, TinyRecord, TinyStore,
};
pub use table::PartialMatchTable;
pub use trigram::{Scope, TrigramFilter, Trigrams};

use std::sync::Arc;

use crate::hash::Fingerprint;

/// The most matches one search answers, in the page and on the server (which reads
/// `DITTO_SEARCH_MAX_MATCHES` over it): every match is held in memory and then answered
/// whole, and a keyword a repository holds everywhere (one byte, in disk images) could make
/// billions. The logical phase stops past it ([`LogicalPhase::limit`]); the physical phase
/// past four times as many exact offsets in the unique chunks ([`PhysicalPhase::limit`]),
/// since each is at least one match in every file that holds its chunk.
pub const MAX_MATCHES: usize = 1_000_000;

/// Why a search could not be set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SearchError {
    NoKeywords,
    /// Keyword number `.0` is empty.
    EmptyKeyword(usize),
    /// Keyword `index` (0-based; named from 1) is longer than the limit (the minimum chunk
    /// size).
    KeywordTooLong {
        index: usize,
        len: usize,
        max: usize,
    },
    /// Invalid hex at this byte position of the input.
    BadHex {
        position: usize,
    },
    /// The automaton's transition table would exceed [`automaton::MAX_TABLE_BYTES`].
    TooLarge {
        table_bytes: usize,
    },
    /// More keywords than [`MAX_KEYWORDS`].
    TooManyKeywords {
        count: usize,
    },
    /// More keyword bytes in all than [`MAX_KEYWORD_BYTES`].
    KeywordBytes {
        total: usize,
    },
}

impl std::fmt::Display for SearchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SearchError::NoKeywords => write!(f, "no keywords given"),
            SearchError::EmptyKeyword(i) => write!(f, "keyword {i} is empty"),
            SearchError::KeywordTooLong { index, len, max } => {
                write!(
                    f,
                    "keyword {} has {len} bytes; at most {max} (the minimum chunk size)",
                    index + 1
                )
            }
            SearchError::BadHex { position } => write!(f, "invalid hex at position {position}"),
            SearchError::TooLarge { table_bytes } => {
                write!(f, "keyword set too large ({table_bytes} byte automaton)")
            }
            SearchError::TooManyKeywords { count } => {
                write!(f, "{count} keywords; at most {MAX_KEYWORDS}")
            }
            SearchError::KeywordBytes { total } => {
                write!(
                    f,
                    "the keywords have {total} bytes; at most {MAX_KEYWORD_BYTES} in all"
                )
            }
        }
    }
}

impl std::error::Error for SearchError {}

/// One hit: keyword `keyword` starts at byte `offset` of file `file`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Match {
    pub file: u64,
    pub keyword: u32,
    pub offset: u64,
}

/// What to report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Every occurrence.
    #[default]
    AllMatches,
    /// Only the first occurrence of each keyword per file; a file's walk stops once every
    /// keyword was found (§7 "approximate search": enough to list matching files).
    FilesOnly,
}

/// One entry of a file recipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRef {
    pub fp: Fingerprint,
    pub len: u64,
}

impl ChunkRef {
    pub fn new(fp: Fingerprint, len: u64) -> Self {
        ChunkRef { fp, len }
    }
}

/// At most this many keywords in one search.
pub const MAX_KEYWORDS: usize = 4096;
/// At most this many keyword bytes in all. Each automaton's table takes about 1 KiB per
/// keyword byte, and a search builds two (forward and reverse) in every worker or server
/// request at once: 64 KiB of keywords is ~64 MiB a table, where the table limit
/// ([`automaton::MAX_TABLE_BYTES`]) alone let one request hold ~0.5 GiB. 4096 keywords of
/// 16 bytes fit.
pub const MAX_KEYWORD_BYTES: usize = 64 << 10;

/// The keywords of one search and the two automata built from them. Cloning is cheap
/// (shared), so every phase object keeps its own handle and none borrows.
#[derive(Clone, Debug)]
pub struct Dictionary {
    inner: Arc<DictInner>,
}

#[derive(Debug)]
struct DictInner {
    keywords: Vec<Vec<u8>>,
    max_len: usize,
    forward: Automaton,
    reverse: Automaton,
    trigrams: TrigramFilter,
}

impl Dictionary {
    /// Keywords are case-sensitive byte strings, `1..=max_keyword_len` bytes each, where
    /// `max_keyword_len` should be the store's minimum chunk size (so a match spans at most
    /// two chunks except around a file's short last chunk; see [`logical`]). Duplicates are
    /// allowed and reported under each id.
    pub fn new(keywords: Vec<Vec<u8>>, max_keyword_len: usize) -> Result<Self, SearchError> {
        if keywords.is_empty() {
            return Err(SearchError::NoKeywords);
        }
        if keywords.len() > MAX_KEYWORDS {
            return Err(SearchError::TooManyKeywords {
                count: keywords.len(),
            });
        }
        let total: usize = keywords.iter().map(Vec::len).sum();
        if total > MAX_KEYWORD_BYTES {
            return Err(SearchError::KeywordBytes { total });
        }
        let max = max_keyword_len.min(u16::MAX as usize);
        for (index, k) in keywords.iter().enumerate() {
            if k.is_empty() {
                return Err(SearchError::EmptyKeyword(index));
            }
            if k.len() > max {
                return Err(SearchError::KeywordTooLong {
                    index,
                    len: k.len(),
                    max,
                });
            }
        }
        let forward = Automaton::new(&keywords)?;
        let reversed: Vec<Vec<u8>> = keywords
            .iter()
            .map(|k| k.iter().rev().copied().collect())
            .collect();
        let reverse = Automaton::new(&reversed)?;
        Ok(Dictionary {
            inner: Arc::new(DictInner {
                max_len: forward.max_keyword_len(),
                trigrams: TrigramFilter::new(&keywords),
                keywords,
                forward,
                reverse,
            }),
        })
    }

    pub fn keywords(&self) -> &[Vec<u8>] {
        &self.inner.keywords
    }

    /// The forward automaton (exact matches, prefixes at chunk ends).
    pub fn automaton(&self) -> &Automaton {
        &self.inner.forward
    }

    /// The keywords' trigrams, to test chunks' summaries against ([`trigram`]).
    pub fn trigrams(&self) -> &TrigramFilter {
        &self.inner.trigrams
    }
}

/// Both phases in memory: `chunks` are the unique stored chunks (fingerprint, bytes) and
/// `files` the recipes `(file id, chunks in order)`. Returns the matches sorted, with the
/// result database and tiny store for inspection.
pub fn search<'c>(
    dict: &Dictionary,
    chunks: impl IntoIterator<Item = (Fingerprint, &'c [u8])>,
    files: &[(u64, Vec<ChunkRef>)],
    mode: Mode,
) -> (Vec<Match>, ResultDb, MemTinyStore) {
    let mut tiny = MemTinyStore::new();
    let mut phys = PhysicalPhase::for_mode(dict, mode);
    for (fp, data) in chunks {
        phys.add_chunk(&fp, data, &mut tiny);
    }
    let (db, _) = phys.finish();
    let mut out = Vec::new();
    let mut logical = LogicalPhase::new(dict, mode);
    for (file, recipe) in files {
        logical.search_file(&db, *file, recipe, &mut tiny, &mut out);
    }
    out.sort_unstable();
    (out, db, tiny)
}
