//! Trigram summaries: which parts of a chunk a keyword set cannot start in, without reading
//! them.
//!
//! The physical phase ([`super::physical`]) reads every byte of every unique chunk, for
//! every search. A repeat search over chunks already decoded (the browser workers' cache,
//! the server's) can do less: a keyword `k` of `n >= 3` bytes occurs at offset `p` only if
//! each of its `n - 2` three-byte substrings (trigrams) occurs at `p..p + n - 2`. Code
//! search engines index text by its trigrams for the same reason (Russ Cox, "Regular
//! Expression Matching with a Trigram Index", 2012); here the index is per block of a chunk
//! and approximate:
//!
//! - **Summary** ([`Trigrams`]): the chunk is cut into blocks of [`BLOCK`] bytes (the last
//!   may be shorter; an empty chunk has one empty block), and each block gets a Bloom filter
//!   of `BLOCK` bits (one per byte: an eighth of the chunk's size in memory, 128 bytes at
//!   least) with one hash function. A block's filter holds every trigram that *starts* in
//!   the block or in the `SPAN - 3` positions after it, so it holds every trigram of any
//!   string of at most [`SPAN`] bytes that starts in the block. A trigram
//!   `t = a << 16 | b << 8 | c` sets bit `(t * 0x9E3779B1 mod 2^32) >> 22` (multiplicative
//!   hashing: the top bits of the product mix all three bytes).
//! - **Test** ([`TrigramFilter::blocks`]): a keyword is represented by the trigrams of its
//!   first `min(n, SPAN)` bytes (its *head*: a keyword starting in a block has its head
//!   inside the block's span). A block may start a keyword when, for some keyword, every
//!   one of its head's bits is set. A Bloom filter has false positives (the block is then
//!   scanned for nothing) and no false negatives, so no keyword starts in a block the test
//!   rules out. A keyword shorter than three bytes has no trigram and rules nothing out.
//!   The blocks that may start a keyword form *runs* (maximal ranges of consecutive such
//!   blocks); [`super::physical::PhysicalScanner::scan_summarized`] scans each run and the
//!   `n_max - 1` bytes after it for the matches that start inside it.
//!
//! Per-block filters rather than one per chunk: one keyword among many hits most chunks of a
//! text corpus somewhere, and a chunk-wide filter then rules out the whole chunk or nothing;
//! a block's filter rules out the parts of it where no keyword starts (docs/BENCHMARKS.md,
//! "Trigram summaries per block").
//!
//! A chunk ruled out wholly still has ends where a keyword may begin or end across the border
//! with its neighbour in some file; the scanner finds those from the chunk's first and last
//! `n_max - 1` bytes, so the records (and the results) are those of a full scan. The
//! property tests check that against the naive search.

/// Bytes of a chunk per block filter, and bits per filter.
pub const BLOCK: usize = 1024;
/// The longest head of a keyword a block's filter covers: it holds the trigrams starting
/// in the block and in the `SPAN - 3` positions after it.
pub const SPAN: usize = 64;
/// 64-bit words per block filter.
const WORDS: usize = BLOCK / 64;
/// The multiplier of the hash (2^32 over the golden ratio, odd).
const MULT: u32 = 0x9E37_79B1;

/// One block's filter.
type Block = [u64; WORDS];

/// The bit trigram `t = a << 16 | b << 8 | c` sets in a block's filter.
#[inline(always)]
fn key(t: u32) -> u16 {
    (t.wrapping_mul(MULT) >> (32 - BLOCK.trailing_zeros())) as u16
}

/// Whether bit `k` of `block` is set.
#[inline(always)]
fn has(block: &Block, k: u16) -> bool {
    block[(k >> 6) as usize] >> (k & 63) & 1 != 0
}

/// Sets bit `k` of `block`.
#[inline(always)]
fn set(block: &mut Block, k: u16) {
    block[(k >> 6) as usize] |= 1 << (k & 63);
}

/// The block filters of one chunk.
#[derive(Clone, Debug)]
pub struct Trigrams {
    /// [`WORDS`] words per block, blocks in order.
    bits: Box<[u64]>,
}

impl Trigrams {
    /// Summarises `data`.
    pub fn of(data: &[u8]) -> Trigrams {
        let mut bits = vec![0u64; Self::words_for(data.len())].into_boxed_slice();
        // Trigrams start at 0..starts.
        let starts = data.len().saturating_sub(2);
        for (b, block) in bits.as_chunks_mut::<WORDS>().0.iter_mut().enumerate() {
            let from = (b * BLOCK).min(starts);
            let to = (from + BLOCK + SPAN - 3).min(starts);
            if from == to {
                continue;
            }
            // A rolling window of the last three bytes (cheaper than a slice per trigram).
            let span = &data[from..to + 2];
            let mut w = u32::from(span[0]) << 8 | u32::from(span[1]);
            for &c in &span[2..] {
                w = (w << 8 | u32::from(c)) & 0x00FF_FFFF;
                set(block, key(w));
            }
        }
        Trigrams { bits }
    }

    /// Memory held, in bytes.
    pub fn bytes(&self) -> usize {
        self.bits.len() * 8
    }

    /// How many block filters summarise a chunk of `len` bytes.
    fn blocks_for(len: usize) -> usize {
        len.div_ceil(BLOCK).max(1)
    }

    /// How many 64-bit words summarise a chunk of `len` bytes.
    pub fn words_for(len: usize) -> usize {
        Self::blocks_for(len) * WORDS
    }

    /// The summary's words, for a file ([`super::cache_file`]).
    pub fn words(&self) -> &[u64] {
        &self.bits
    }

    /// The summary of a chunk of `len` bytes from its [`Trigrams::words`]; `None` when
    /// their count is not [`Trigrams::words_for`]`(len)`.
    pub fn from_words(len: usize, words: Box<[u64]>) -> Option<Trigrams> {
        (words.len() == Self::words_for(len)).then_some(Trigrams { bits: words })
    }

    fn blocks(&self) -> &[Block] {
        self.bits.as_chunks::<WORDS>().0
    }
}

/// Where in a chunk a keyword set may start, by its [`Trigrams`] ([`TrigramFilter::blocks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Anywhere: every block may start a keyword (or the filter rules nothing out).
    Whole,
    /// Nowhere: no keyword starts in the chunk.
    Nothing,
    /// Only in the runs of blocks the caller's list holds.
    Runs,
}

/// A keyword set's trigrams, ready to test block filters against.
#[derive(Clone, Debug)]
pub struct TrigramFilter {
    /// The bits of every keyword's head's distinct trigrams, keyword after keyword; empty
    /// when some keyword is shorter than three bytes (then nothing can be ruled out).
    keys: Vec<u16>,
    /// Where each keyword's bits end in `keys`.
    ends: Vec<usize>,
}

impl TrigramFilter {
    pub fn new<K: AsRef<[u8]>>(keywords: &[K]) -> TrigramFilter {
        let mut f = TrigramFilter {
            keys: Vec::new(),
            ends: Vec::new(),
        };
        if keywords.iter().any(|k| k.as_ref().len() < 3) {
            return f;
        }
        let mut heads: Vec<Vec<u16>> = keywords
            .iter()
            .map(|k| {
                let k = k.as_ref();
                let mut t: Vec<u16> = k[..k.len().min(SPAN)]
                    .windows(3)
                    .map(|w| key(u32::from_be_bytes([0, w[0], w[1], w[2]])))
                    .collect();
                t.sort_unstable();
                t.dedup();
                t
            })
            .collect();
        // Keywords with the same head test the same bits once.
        heads.sort_unstable();
        heads.dedup();
        for h in heads {
            f.keys.extend_from_slice(&h);
            f.ends.push(f.keys.len());
        }
        f
    }

    /// Whether the filter can rule anything out (every keyword has three bytes or more).
    pub fn active(&self) -> bool {
        !self.ends.is_empty()
    }

    /// How many heads a block is tested against (what a block's test costs).
    pub fn per_block(&self) -> usize {
        self.ends.len()
    }

    /// Whether some keyword may start in the block `block` summarises.
    #[inline]
    fn may_start(&self, block: &Block) -> bool {
        let mut from = 0;
        for &end in &self.ends {
            if self.keys[from..end].iter().all(|&k| has(block, k)) {
                return true;
            }
            from = end;
        }
        false
    }

    /// Where a keyword may start in the chunk of `len` bytes that `t` summarises, and how
    /// many of its bytes lie in blocks where none may: for [`Scope::Runs`], `runs` holds the
    /// byte ranges `[start, end)` of the runs of blocks, ascending (it is cleared first).
    pub fn blocks(
        &self,
        t: &Trigrams,
        len: usize,
        runs: &mut Vec<(usize, usize)>,
    ) -> (Scope, usize) {
        runs.clear();
        let blocks = t.blocks();
        if !self.active() || blocks.len() != Trigrams::blocks_for(len) {
            return (Scope::Whole, 0);
        }
        let mut out = 0;
        for (i, b) in blocks.iter().enumerate() {
            let (s, e) = (i * BLOCK, ((i + 1) * BLOCK).min(len));
            if !self.may_start(b) {
                out += e - s;
                continue;
            }
            match runs.last_mut() {
                Some(r) if r.1 == s => r.1 = e,
                _ => runs.push((s, e)),
            }
        }
        let scope = match (out, runs.is_empty()) {
            (0, _) => Scope::Whole,
            (_, true) => Scope::Nothing,
            (_, false) => Scope::Runs,
        };
        (scope, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    /// Every occurrence of a keyword lies in a run (or the chunk is whole).
    #[test]
    fn no_false_negatives() {
        let mut s = 0x1234_5678_9abc_def0u64;
        let mut runs = Vec::new();
        for round in 0..300 {
            let len = (rng(&mut s) % 5000) as usize;
            let alphabet = 2 + round % 60;
            let data: Vec<u8> = (0..len)
                .map(|_| (rng(&mut s) % alphabet) as u8 + b'0')
                .collect();
            let t = Trigrams::of(&data);
            for _ in 0..50 {
                if len < 3 {
                    break;
                }
                let n = 3 + (rng(&mut s) % 100) as usize;
                let at = (rng(&mut s) as usize) % (len - 2);
                let kw = &data[at..(at + n).min(len)];
                let f = TrigramFilter::new(&[kw]);
                match f.blocks(&t, len, &mut runs).0 {
                    Scope::Whole => {}
                    Scope::Nothing => panic!("round {round}: {kw:?} ruled out"),
                    Scope::Runs => assert!(
                        runs.iter().any(|&(s, e)| s <= at && at < e),
                        "round {round}: {kw:?} at {at} outside {runs:?}"
                    ),
                }
            }
        }
    }

    #[test]
    fn only_the_blocks_a_keyword_may_start_in() {
        let filler: Vec<u8> = (0..BLOCK * 5).map(|i| b"abcdefgh"[i % 8]).collect();
        let mut data = filler.clone();
        // One keyword starts in block 1, another at the very end of block 3 and runs into
        // block 4.
        data[BLOCK + 100..BLOCK + 116].copy_from_slice(b"createSourceFile");
        data[4 * BLOCK - 3..4 * BLOCK + 13].copy_from_slice(b"NamedTupleMember");
        let t = Trigrams::of(&data);
        let mut runs = Vec::new();
        let f = TrigramFilter::new(&["createSourceFile", "NamedTupleMember"]);
        assert_eq!(
            f.blocks(&t, data.len(), &mut runs),
            (Scope::Runs, 3 * BLOCK)
        );
        assert_eq!(runs, [(BLOCK, 2 * BLOCK), (3 * BLOCK, 4 * BLOCK)]);
        let f = TrigramFilter::new(&["zzzz"]);
        assert_eq!(
            f.blocks(&t, data.len(), &mut runs),
            (Scope::Nothing, data.len())
        );
        let f = TrigramFilter::new(&["abcdefgh"]);
        assert_eq!(f.blocks(&t, data.len(), &mut runs), (Scope::Whole, 0));
        // A keyword of two bytes could be anywhere: nothing is ruled out.
        let f = TrigramFilter::new(&["zz", "qqqq"]);
        assert!(!f.active());
        assert_eq!(f.blocks(&t, data.len(), &mut runs).0, Scope::Whole);
        // A summary of another length is not trusted.
        let f = TrigramFilter::new(&["zzzz"]);
        assert_eq!(f.blocks(&t, data.len() + BLOCK, &mut runs).0, Scope::Whole);
        // A keyword longer than SPAN is tested by its head.
        let f = TrigramFilter::new(&[&data[BLOCK + 100..BLOCK + 100 + 3 * SPAN]]);
        assert_eq!(f.blocks(&t, data.len(), &mut runs).0, Scope::Runs);
        assert_eq!(runs, [(BLOCK, 2 * BLOCK)]);
        // A chunk shorter than a trigram holds no keyword of three bytes or more.
        let f = TrigramFilter::new(&["abc"]);
        assert_eq!(
            f.blocks(&Trigrams::of(b"ab"), 2, &mut runs).0,
            Scope::Nothing
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(Trigrams::of(b"").bytes(), 128);
        assert_eq!(Trigrams::of(&[0; 1024]).bytes(), 128);
        assert_eq!(Trigrams::of(&[0; 1025]).bytes(), 256);
        assert_eq!(Trigrams::of(&[0; 8192]).bytes(), 1024);
        assert_eq!(Trigrams::of(&vec![0; 4 << 20]).bytes(), 512 << 10);
        assert_eq!(Trigrams::words_for(8192), 128);
    }
}
