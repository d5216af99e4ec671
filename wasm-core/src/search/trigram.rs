//! Trigram summaries: which chunks a keyword set cannot occur in, without reading them.
//!
//! The physical phase ([`super::physical`]) reads every byte of every unique chunk, for
//! every search. A repeat search over chunks already decoded (the browser workers' cache)
//! can do less: a keyword `k` of `n >= 3` bytes lies wholly inside a chunk only if each of
//! its `n - 2` three-byte substrings (trigrams) occurs in the chunk. Code search engines
//! index text by its trigrams for the same reason (Russ Cox, "Regular Expression Matching
//! with a Trigram Index", 2012); here the index is per chunk and approximate:
//!
//! - **Summary** ([`Trigrams`]): a Bloom filter with one hash function over the chunk's
//!   trigrams, `2^b` bits for `b = ceil(log2(len))` clamped to `9..=20` (one bit per byte,
//!   rounded up: at most a quarter of the chunk's size in memory). A trigram `t = a << 16
//!   | b << 8 | c` sets bit `(t * 0x9E3779B1 mod 2^32) >> (32 - b)` (multiplicative
//!   hashing: the top bits of the product mix all three bytes).
//! - **Test** ([`TrigramFilter::may_match`]): a chunk may hold a keyword wholly when, for
//!   some keyword, every one of its trigrams' bits is set. A Bloom filter has false
//!   positives (the chunk is then scanned for nothing) and no false negatives, so a chunk
//!   the test rules out holds no keyword wholly. A keyword shorter than three bytes has no
//!   trigram and rules nothing out.
//!
//! A chunk ruled out still has ends where a keyword may begin or end across the border
//! with its neighbour in some file; [`super::physical::PhysicalScanner::scan_summarized`]
//! finds those from the chunk's first and last `n_max - 1` bytes, so the records (and the
//! results) are those of a full scan. The property tests check that against the naive
//! search.

/// The multiplier of the hash (2^32 over the golden ratio, odd).
const MULT: u32 = 0x9E37_79B1;
/// Summary sizes: `2^MIN_BITS ..= 2^MAX_BITS` bits.
const MIN_BITS: u32 = 9;
const MAX_BITS: u32 = 20;

/// The hash of trigram `t = a << 16 | b << 8 | c`, before it is cut to a summary's size.
#[inline(always)]
fn mix(t: u32) -> u32 {
    t.wrapping_mul(MULT)
}

/// The Bloom filter of one chunk's trigrams.
#[derive(Clone, Debug)]
pub struct Trigrams {
    bits: Box<[u64]>,
    shift: u32,
}

impl Trigrams {
    /// Summarises `data`.
    pub fn of(data: &[u8]) -> Trigrams {
        let log = Self::log_bits(data.len());
        let mut bits = vec![0u64; 1 << (log - 6)].into_boxed_slice();
        let shift = 32 - log;
        // A rolling window of the last three bytes.
        let mut w: u32 = 0;
        for (i, &c) in data.iter().enumerate() {
            w = (w << 8 | c as u32) & 0x00FF_FFFF;
            if i >= 2 {
                let h = (mix(w) >> shift) as usize;
                bits[h >> 6] |= 1 << (h & 63);
            }
        }
        Trigrams { bits, shift }
    }

    /// Memory held, in bytes.
    pub fn bytes(&self) -> usize {
        self.bits.len() * 8
    }

    /// `log2` of the summary's size in bits for a chunk of `len` bytes.
    fn log_bits(len: usize) -> u32 {
        (usize::BITS - len.saturating_sub(1).leading_zeros()).clamp(MIN_BITS, MAX_BITS)
    }

    /// How many 64-bit words summarise a chunk of `len` bytes.
    pub fn words_for(len: usize) -> usize {
        1 << (Self::log_bits(len) - 6)
    }

    /// The summary's words, for a file ([`super::cache_file`]).
    pub fn words(&self) -> &[u64] {
        &self.bits
    }

    /// The summary of a chunk of `len` bytes from its [`Trigrams::words`]; `None` when
    /// their count is not [`Trigrams::words_for`]`(len)`.
    pub fn from_words(len: usize, words: Box<[u64]>) -> Option<Trigrams> {
        let log = Self::log_bits(len);
        (words.len() == 1 << (log - 6)).then_some(Trigrams {
            bits: words,
            shift: 32 - log,
        })
    }

    #[inline]
    fn has(&self, mixed: u32) -> bool {
        let h = (mixed >> self.shift) as usize;
        self.bits[h >> 6] >> (h & 63) & 1 != 0
    }
}

/// A keyword set's trigrams, ready to test summaries against.
#[derive(Clone, Debug)]
pub struct TrigramFilter {
    /// Per keyword, its distinct trigrams as [`mix`]ed; empty when some keyword is shorter
    /// than three bytes (then nothing can be ruled out).
    keywords: Vec<Vec<u32>>,
}

impl TrigramFilter {
    pub fn new<K: AsRef<[u8]>>(keywords: &[K]) -> TrigramFilter {
        if keywords.iter().any(|k| k.as_ref().len() < 3) {
            return TrigramFilter {
                keywords: Vec::new(),
            };
        }
        let keywords = keywords
            .iter()
            .map(|k| {
                let mut t: Vec<u32> = k
                    .as_ref()
                    .windows(3)
                    .map(|w| mix(u32::from_be_bytes([0, w[0], w[1], w[2]])))
                    .collect();
                t.sort_unstable();
                t.dedup();
                t
            })
            .collect();
        TrigramFilter { keywords }
    }

    /// Whether the filter can rule anything out (every keyword has three bytes or more).
    pub fn active(&self) -> bool {
        !self.keywords.is_empty()
    }

    /// Whether some keyword may lie wholly inside the chunk `t` summarises (`false`: none
    /// does).
    pub fn may_match(&self, t: &Trigrams) -> bool {
        !self.active() || self.keywords.iter().any(|k| k.iter().all(|&m| t.has(m)))
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

    #[test]
    fn no_false_negatives() {
        let mut s = 0x1234_5678_9abc_def0u64;
        for round in 0..200 {
            let len = (rng(&mut s) % 3000) as usize;
            let alphabet = 2 + round % 40;
            let data: Vec<u8> = (0..len)
                .map(|_| (rng(&mut s) % alphabet) as u8 + b'0')
                .collect();
            let t = Trigrams::of(&data);
            for _ in 0..50 {
                if len < 3 {
                    break;
                }
                let n = 3 + (rng(&mut s) % 20) as usize;
                let at = (rng(&mut s) as usize) % (len - 2);
                let kw = &data[at..(at + n).min(len)];
                assert!(
                    TrigramFilter::new(&[kw]).may_match(&t),
                    "round {round}: {kw:?} missed"
                );
            }
        }
    }

    #[test]
    fn rules_out_absent_keywords() {
        let data = b"function createSourceFile(fileName, sourceText) { return parse(sourceText); }";
        let t = Trigrams::of(data);
        assert!(TrigramFilter::new(&["createSourceFile"]).may_match(&t));
        assert!(TrigramFilter::new(&["absent", "sourceText"]).may_match(&t));
        assert!(!TrigramFilter::new(&["NamedTupleMember"]).may_match(&t));
        assert!(!TrigramFilter::new(&["zzz", "qqqq"]).may_match(&t));
        // A keyword of two bytes could be anywhere: nothing is ruled out.
        assert!(!TrigramFilter::new(&["zz"]).active());
        assert!(TrigramFilter::new(&["zz", "qqqq"]).may_match(&t));
        // A chunk shorter than a trigram holds no keyword of three bytes or more.
        assert!(!TrigramFilter::new(&["abc"]).may_match(&Trigrams::of(b"ab")));
    }

    #[test]
    fn sizes() {
        assert_eq!(Trigrams::of(b"").bytes(), 64);
        assert_eq!(Trigrams::of(&[0; 512]).bytes(), 64);
        assert_eq!(Trigrams::of(&[0; 513]).bytes(), 128);
        assert_eq!(Trigrams::of(&[0; 8192]).bytes(), 1024);
        assert_eq!(Trigrams::of(&vec![0; 4 << 20]).bytes(), 128 << 10);
    }
}
