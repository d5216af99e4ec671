//! A multi-keyword Aho-Corasick automaton compiled to a dense DFA over bytes.
//!
//! # What it computes
//!
//! Given keywords `k_0 .. k_{K-1}` (arbitrary non-empty byte strings, case-sensitive), the
//! automaton reads a haystack one byte at a time and is, after every byte, in the state that
//! stands for *the longest suffix of the input read so far that is a prefix of some keyword*.
//! Three things follow from that single invariant, and the physical phase uses all three:
//!
//! 1. **Exact matches.** A keyword ends at the current position exactly when it is a suffix of
//!    the current state's string. Those keywords are the state's own keywords plus the own
//!    keywords of every state on its failure chain; [`Automaton::scan`] reports them.
//! 2. **Prefixes at the end of a chunk.** After the last byte of a chunk, walking the failure
//!    chain from the final state enumerates *every* suffix of the chunk that is a prefix of a
//!    keyword, longest first. The first node on the chain that lies on keyword `k`'s trie path
//!    gives the longest proper prefix of `k` that ends the chunk
//!    ([`Automaton::end_partials`]).
//! 3. **Suffixes at the start of a chunk.** The same automaton built over the *reversed*
//!    keywords and fed the first `n - 1` bytes of a chunk back to front turns "prefix of the
//!    chunk that is a suffix of `k`" into case 2.
//!
//! # Construction
//!
//! 1. A trie of all keywords. Each node is a distinct keyword prefix; its depth is the prefix
//!    length. Duplicate keywords share their final node (both ids are reported).
//! 2. Breadth-first, each node `v` (child of `u` by byte `b`) gets its *failure link*: the node
//!    of the longest proper suffix of `v`'s string that is also in the trie. Because every
//!    node of smaller depth already has a complete row of DFA transitions, the failure target
//!    is simply `delta(fail(u), b)` (the root for depth-1 nodes), and `v`'s own row is a copy
//!    of `fail(v)`'s row overwritten with `v`'s trie children. That makes the table a full DFA:
//!    the scan never follows failure links, it does one table load per byte.
//! 3. **Byte classes.** Bytes that occur in no keyword behave identically everywhere, so they
//!    share class 0; every byte that does occur gets its own class. A row has one entry per
//!    class (the *stride*), so a table for ASCII keywords is roughly 4-8x smaller than 256
//!    entries per state, which matters for cache residency.
//! 4. **Premultiplied ids, match states first.** States are renumbered so that every state
//!    that reports a match comes first, and a state id is its row offset (`index * stride`).
//!    The hot loop is then `s = table[s + class[byte]]` plus one compare `s < match_limit`
//!    that is almost never true; only then do we divide to find the state's outputs.
//!
//! Outputs are stored compactly: each state lists only its *own* keywords (those that end at
//! this node), and a *dictionary link* points to the nearest state on its failure chain that
//! has own keywords. Reporting walks that chain, so memory stays linear in the total keyword
//! length even for keyword sets like `a, aa, aaa, ...`.
//!
//! # Cost
//!
//! Scan: one class lookup and one transition load per byte. Memory: `states * stride * 4`
//! bytes for the table, where `states <= 1 + total keyword length`. The builder refuses
//! tables above [`MAX_TABLE_BYTES`].

use super::SearchError;

/// Upper bound on the transition table built for one automaton.
pub const MAX_TABLE_BYTES: usize = 256 << 20;

const NONE: u32 = u32::MAX;

/// A state of an [`Automaton`]: an opaque, premultiplied table offset.
pub type StateId = u32;

/// An Aho-Corasick automaton over byte keywords, compiled to a dense DFA.
#[derive(Clone, Debug)]
pub struct Automaton {
    /// Byte -> class.
    classes: [u8; 256],
    /// Number of classes; the length of one table row.
    stride: u32,
    /// `table[s + class]` is the premultiplied id of the next state.
    table: Vec<u32>,
    /// Premultiplied id of the start state (the trie root).
    start: u32,
    /// Every premultiplied id below this reports at least one keyword.
    match_limit: u32,
    /// Ids in `match_limit..shallow_limit` are non-reporting states of depth 0 or 1.
    shallow_limit: u32,
    /// Per state index: string length (trie depth).
    depth: Vec<u32>,
    /// Per state index: failure link as a state index (`NONE` for the root).
    fail: Vec<u32>,
    /// Per state index: nearest state on the failure chain with own keywords, or `NONE`.
    dict: Vec<u32>,
    /// CSR: keywords ending exactly at state `i` are `own_kw[own_at[i]..own_at[i + 1]]`.
    own_at: Vec<u32>,
    own_kw: Vec<u32>,
    /// CSR: keywords whose trie path passes through state `i` (state `i` is a prefix of them).
    thru_at: Vec<u32>,
    thru_kw: Vec<u32>,
    /// Keyword lengths by id.
    lens: Vec<u32>,
    max_len: usize,
    /// How to skip ahead while in the start state.
    skip: Skip,
    /// Substring finder when there is exactly one keyword.
    single: Option<memchr::memmem::Finder<'static>>,
}

/// Use the two-byte filter for at most this many distinct keyword starts.
pub const PAIR_FILTER_MAX: usize = 64;

/// Inputs at least this long (and four times the longest keyword) run the plain DFA as two
/// streams ([`Automaton::run_plain`]).
const TWO_STREAMS_MIN: usize = 512;

/// A scan stops using its skip filter when the jumps average fewer bytes than this.
const MIN_AVG_SKIP: usize = 16;

/// How the scan skips ahead while in the start state: `memchr` over the bytes that leave the
/// start state when there are at most three, else a bitmap of the keywords' first two bytes
/// behind a SIMD pre-check of their first three.
#[derive(Clone, Debug)]
enum Skip {
    None,
    One(u8),
    Two(u8, u8),
    Three(u8, u8, u8),
    Pairs(Box<Pairs>),
}

#[derive(Clone, Debug)]
struct Pairs {
    /// Bit `a | b << 8`: some keyword starts with bytes `a, b`.
    bits: [u64; 1024],
    /// Some keyword starts with this byte.
    first: [bool; 256],
    /// Nibble tables of a SIMD pre-check (Teddy-style, 8 buckets): a keyword starting with
    /// bytes `a, b, c` in bucket `k` sets bit `k` of `nib[0][a & 15]`, `nib[1][a >> 4]`,
    /// `nib[2][b & 15]`, `nib[3][b >> 4]`, `nib[4][c & 15]` and `nib[5][c >> 4]` (every entry
    /// of a table for a byte the keyword lacks); a position where at least three bytes are
    /// left can start a keyword only if the AND of its six lookups is non-zero. Three bytes,
    /// not two: in source code many positions share a keyword's first two letters, and
    /// each false candidate costs an exact check. Used 16 positions at a time on wasm32 with
    /// simd128.
    nib: [[u8; 16]; 6],
}

impl Pairs {
    /// First position `p` of `hay` where a keyword may start.
    #[inline]
    fn find(&self, hay: &[u8]) -> Option<usize> {
        let bits = &self.bits;
        let test = |a: u8, b: u8| {
            let key = a as usize | (b as usize) << 8;
            bits[key >> 6] >> (key & 63) & 1 != 0
        };
        let mut from = 0;
        // The positions of a 16-position block that pass the SIMD pre-check are checked
        // exactly.
        while let Some((p, mut lanes)) = self.simd_next_block(hay, from) {
            while lanes != 0 {
                let q = p + lanes.trailing_zeros() as usize;
                if test(hay[q], hay[q + 1]) {
                    return Some(q);
                }
                lanes &= lanes - 1;
            }
            from = p + 16;
        }
        // The rest (all of `hay` without SIMD): fewer than 18 bytes with it.
        let from = self.simd_tail(hay, from);
        for (p, pair) in hay[from..].windows(2).enumerate() {
            if test(pair[0], pair[1]) {
                return Some(from + p);
            }
        }
        match hay.last() {
            Some(&b) if self.first[b as usize] => Some(hay.len() - 1),
            _ => None,
        }
    }
}

impl Pairs {
    /// From `from` on (a multiple of 16 apart from 0), the first 16-position block `p..p+16`
    /// (with `p + 18 <= len`) in which some position passes the nibble pre-check, and those
    /// positions as bits (bit `i`: position `p + i`).
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[inline]
    fn simd_next_block(&self, hay: &[u8], from: usize) -> Option<(usize, u32)> {
        use core::arch::wasm32::*;
        // SAFETY: each table is 16 bytes; `v128_load` has no alignment requirement.
        let t: [v128; 6] =
            core::array::from_fn(|i| unsafe { v128_load(self.nib[i].as_ptr() as *const v128) });
        let low = u8x16_splat(0x0f);
        let look = |t_lo: v128, t_hi: v128, x: v128| {
            v128_and(
                i8x16_swizzle(t_lo, v128_and(x, low)),
                i8x16_swizzle(t_hi, u8x16_shr(x, 4)),
            )
        };
        let mut p = from;
        while p + 18 <= hay.len() {
            // SAFETY: `p + 18 <= hay.len()`, so the three 16-byte loads (at `p`, `p + 1` and
            // `p + 2`) are in bounds; `v128_load` has no alignment requirement.
            let (x, y, z) = unsafe {
                let at = hay.as_ptr().add(p);
                (
                    v128_load(at as *const v128),
                    v128_load(at.add(1) as *const v128),
                    v128_load(at.add(2) as *const v128),
                )
            };
            let m = v128_and(
                v128_and(look(t[0], t[1], x), look(t[2], t[3], y)),
                look(t[4], t[5], z),
            );
            if v128_any_true(m) {
                let lanes = i8x16_bitmask(i8x16_ne(m, u8x16_splat(0))) as u32;
                return Some((p, lanes));
            }
            p += 16;
        }
        None
    }

    /// Where the scalar tail starts after [`Pairs::simd_next_block`] gave up at `from`.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[inline]
    fn simd_tail(&self, hay: &[u8], from: usize) -> usize {
        if from + 18 > hay.len() {
            from
        } else {
            from + ((hay.len() - 18 - from) / 16 + 1) * 16
        }
    }

    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    #[inline]
    fn simd_next_block(&self, _hay: &[u8], _from: usize) -> Option<(usize, u32)> {
        None
    }

    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    #[inline]
    fn simd_tail(&self, _hay: &[u8], from: usize) -> usize {
        from
    }
}

impl Skip {
    #[inline]
    fn find(&self, hay: &[u8]) -> Option<usize> {
        match self {
            Skip::None => Some(0),
            Skip::One(a) => memchr::memchr(*a, hay),
            Skip::Two(a, b) => memchr::memchr2(*a, *b, hay),
            Skip::Three(a, b, c) => memchr::memchr3(*a, *b, *c, hay),
            Skip::Pairs(p) => p.find(hay),
        }
    }
}

/// One DFA transition without a bounds check.
///
/// Sound because of two construction invariants, checked once per scan by
/// `Automaton::check_state` for the incoming state: every table entry is a premultiplied
/// state id (`index * stride` with `index < states`), and every class is `< stride`; so
/// `s + class < states * stride == table.len()` for every state reached from a valid one.
#[inline(always)]
fn step(table: &[u32], s: StateId, class: u8) -> StateId {
    let i = (s + class as u32) as usize;
    debug_assert!(i < table.len());
    // SAFETY: see above; `i < table.len()`.
    unsafe { *table.get_unchecked(i) }
}

struct TrieNode {
    children: Vec<(u8, u32)>,
    depth: u32,
    own: Vec<u32>,
    thru: Vec<u32>,
}

impl Automaton {
    /// Builds the automaton for `keywords` (ids are positions in the slice).
    pub fn new<K: AsRef<[u8]>>(keywords: &[K]) -> Result<Self, SearchError> {
        if keywords.is_empty() {
            return Err(SearchError::NoKeywords);
        }
        // 1. Trie.
        let mut nodes = vec![TrieNode {
            children: Vec::new(),
            depth: 0,
            own: Vec::new(),
            thru: Vec::new(),
        }];
        let mut used = [false; 256];
        for (id, kw) in keywords.iter().enumerate() {
            let kw = kw.as_ref();
            if kw.is_empty() {
                return Err(SearchError::EmptyKeyword(id));
            }
            let mut v = 0usize;
            for &b in kw {
                used[b as usize] = true;
                let next = match nodes[v].children.binary_search_by_key(&b, |c| c.0) {
                    Ok(i) => nodes[v].children[i].1 as usize,
                    Err(i) => {
                        let n = nodes.len();
                        let depth = nodes[v].depth + 1;
                        nodes[v].children.insert(i, (b, n as u32));
                        nodes.push(TrieNode {
                            children: Vec::new(),
                            depth,
                            own: Vec::new(),
                            thru: Vec::new(),
                        });
                        n
                    }
                };
                v = next;
                nodes[v].thru.push(id as u32);
            }
            nodes[v].own.push(id as u32);
        }

        // Byte classes: unused bytes share class 0 (if any byte is unused).
        let mut classes = [0u8; 256];
        let any_unused = used.iter().any(|u| !u);
        let mut next_class = usize::from(any_unused);
        for b in 0..256 {
            if used[b] {
                classes[b] = next_class as u8;
                next_class += 1;
            }
        }
        let stride = next_class;
        let n_states = nodes.len();
        let table_bytes = n_states
            .checked_mul(stride)
            .and_then(|x| x.checked_mul(4))
            .unwrap_or(usize::MAX);
        if table_bytes > MAX_TABLE_BYTES || n_states * stride >= u32::MAX as usize {
            return Err(SearchError::TooLarge { table_bytes });
        }

        // 2. Breadth-first: failure links and full DFA rows (state indexes, not premultiplied).
        let mut fail = vec![NONE; n_states];
        let mut rows = vec![0u32; n_states * stride];
        let mut order = Vec::with_capacity(n_states);
        order.push(0u32);
        let mut head = 0;
        while head < order.len() {
            let u = order[head] as usize;
            head += 1;
            if u != 0 {
                let f = fail[u] as usize;
                rows.copy_within(f * stride..(f + 1) * stride, u * stride);
            }
            // (The root's row stays all zeros: missing bytes loop back to the root.)
            for &(b, v) in &nodes[u].children {
                let c = classes[b as usize] as usize;
                fail[v as usize] = if u == 0 {
                    0
                } else {
                    rows[fail[u] as usize * stride + c]
                };
                order.push(v);
            }
            for &(b, v) in &nodes[u].children {
                rows[u * stride + classes[b as usize] as usize] = v;
            }
        }

        // Outputs: dictionary links and "has any output" (breadth-first order).
        let mut dict = vec![NONE; n_states];
        let mut reports = vec![false; n_states];
        for &u in &order[1..] {
            let u = u as usize;
            let f = fail[u] as usize;
            dict[u] = if !nodes[f].own.is_empty() {
                f as u32
            } else {
                dict[f]
            };
            reports[u] = !nodes[u].own.is_empty() || reports[f];
        }

        // 3. Renumber: reporting states first, then the rest (breadth-first within each).
        let mut new_index = vec![0u32; n_states];
        let mut next = 0u32;
        // Class 0: reporting states; 1: other states of depth <= 1 (the start state and
        // single bytes); 2: the rest.
        let rank = |u: usize| -> u8 {
            if reports[u] {
                0
            } else if nodes[u].depth <= 1 {
                1
            } else {
                2
            }
        };
        let mut n_shallow = 0u32;
        for pass in 0..3u8 {
            for &u in &order {
                if rank(u as usize) == pass {
                    new_index[u as usize] = next;
                    next += 1;
                    n_shallow += u32::from(pass <= 1);
                }
            }
        }
        let n_match = reports.iter().filter(|&&r| r).count() as u32;
        let stride32 = stride as u32;
        let mut table = vec![0u32; n_states * stride];
        let mut depth = vec![0u32; n_states];
        let mut fail_new = vec![NONE; n_states];
        let mut dict_new = vec![NONE; n_states];
        for old in 0..n_states {
            let new = new_index[old] as usize;
            for c in 0..stride {
                table[new * stride + c] = new_index[rows[old * stride + c] as usize] * stride32;
            }
            depth[new] = nodes[old].depth;
            if fail[old] != NONE {
                fail_new[new] = new_index[fail[old] as usize];
            }
            if dict[old] != NONE {
                dict_new[new] = new_index[dict[old] as usize];
            }
        }
        let mut by_new: Vec<usize> = vec![0; n_states];
        for old in 0..n_states {
            by_new[new_index[old] as usize] = old;
        }
        let (mut own_at, mut own_kw) = (Vec::with_capacity(n_states + 1), Vec::new());
        let (mut thru_at, mut thru_kw) = (Vec::with_capacity(n_states + 1), Vec::new());
        for &old in &by_new {
            own_at.push(own_kw.len() as u32);
            own_kw.extend_from_slice(&nodes[old].own);
            thru_at.push(thru_kw.len() as u32);
            thru_kw.extend_from_slice(&nodes[old].thru);
        }
        own_at.push(own_kw.len() as u32);
        thru_at.push(thru_kw.len() as u32);

        let start = new_index[0] * stride32;
        let leaving: Vec<u8> = (0..=255u8)
            .filter(|&b| table[(start + classes[b as usize] as u32) as usize] != start)
            .collect();
        let skip = match leaving[..] {
            [a] => Skip::One(a),
            [a, b] => Skip::Two(a, b),
            [a, b, c] => Skip::Three(a, b, c),
            _ => {
                // Two-byte filter: the first two bytes of every keyword (any second byte for
                // one-byte keywords), and at the last position of the input any first byte.
                let mut pairs = Box::new(Pairs {
                    bits: [0; 1024],
                    first: [false; 256],
                    nib: [[0; 16]; 6],
                });
                for kw in keywords {
                    let kw = kw.as_ref();
                    pairs.first[kw[0] as usize] = true;
                    let seconds: Vec<u8> = match kw.get(1) {
                        Some(&b) => vec![b],
                        None => (0..=255).collect(),
                    };
                    for b in seconds {
                        let key = kw[0] as usize | (b as usize) << 8;
                        pairs.bits[key >> 6] |= 1 << (key & 63);
                    }
                }
                let distinct = pairs.bits.iter().map(|w| w.count_ones()).sum::<u32>();
                // Buckets by the keywords' first three bytes (`None`: any byte), distinct
                // starts in turn, so that up to eight keywords each have a bucket of their own.
                let mut starts: Vec<[Option<u8>; 3]> = keywords
                    .iter()
                    .map(|k| core::array::from_fn(|i| k.as_ref().get(i).copied()))
                    .collect();
                starts.sort_unstable();
                starts.dedup();
                for (n, start) in starts.iter().enumerate() {
                    let bit = 1u8 << (n % 8);
                    for (i, byte) in start.iter().enumerate() {
                        for v in 0..16 {
                            let (lo, hi) = match byte {
                                Some(b) => (v == (b & 15) as usize, v == (b >> 4) as usize),
                                None => (true, true),
                            };
                            pairs.nib[2 * i][v] |= if lo { bit } else { 0 };
                            pairs.nib[2 * i + 1][v] |= if hi { bit } else { 0 };
                        }
                    }
                }
                if distinct as usize <= PAIR_FILTER_MAX {
                    Skip::Pairs(pairs)
                } else {
                    Skip::None
                }
            }
        };
        let single = (keywords.len() == 1)
            .then(|| memchr::memmem::Finder::new(keywords[0].as_ref()).into_owned());

        Ok(Automaton {
            classes,
            stride: stride32,
            table,
            start,
            match_limit: n_match * stride32,
            shallow_limit: n_shallow * stride32,
            depth,
            fail: fail_new,
            dict: dict_new,
            own_at,
            own_kw,
            thru_at,
            thru_kw,
            lens: keywords.iter().map(|k| k.as_ref().len() as u32).collect(),
            skip,
            single,
            max_len: keywords.iter().map(|k| k.as_ref().len()).max().unwrap_or(0),
        })
    }

    /// The start state (nothing read yet).
    #[inline]
    pub fn start(&self) -> StateId {
        self.start
    }

    /// Number of keywords.
    pub fn keyword_count(&self) -> usize {
        self.lens.len()
    }

    /// Length of keyword `kw`.
    #[inline]
    pub fn keyword_len(&self, kw: u32) -> usize {
        self.lens[kw as usize] as usize
    }

    /// Length of the longest keyword.
    pub fn max_keyword_len(&self) -> usize {
        self.max_len
    }

    /// Number of DFA states and bytes used by the transition table.
    pub fn size(&self) -> (usize, usize) {
        (self.depth.len(), self.table.len() * 4)
    }

    /// Panics unless `s` is a state of this automaton; [`step`] relies on it.
    #[inline]
    fn check_state(&self, s: StateId) {
        assert!(
            s.is_multiple_of(self.stride) && (s as usize) < self.table.len(),
            "not a state of this automaton"
        );
    }

    /// The state after reading `byte` in state `s`.
    #[inline(always)]
    pub fn next(&self, s: StateId, byte: u8) -> StateId {
        self.table[(s + self.classes[byte as usize] as u32) as usize]
    }

    /// Calls `report(keyword, end)` for every keyword that ends in state `s` after reading
    /// input up to (exclusive) position `end`.
    #[inline(never)]
    fn report_state(&self, s: StateId, end: usize, report: &mut impl FnMut(u32, usize)) {
        let mut i = s / self.stride;
        if self.own_at[i as usize] == self.own_at[i as usize + 1] {
            i = self.dict[i as usize];
        }
        while i != NONE {
            let (a, b) = (
                self.own_at[i as usize] as usize,
                self.own_at[i as usize + 1] as usize,
            );
            for &kw in &self.own_kw[a..b] {
                report(kw, end);
            }
            i = self.dict[i as usize];
        }
    }

    /// Reads `hay` from state `s` and returns the final state. For every occurrence of a
    /// keyword that ends inside `hay`, calls `report(keyword, end)` where `end` is the
    /// exclusive end position within `hay` (the match starts at `end - keyword_len`, which is
    /// negative when the keyword began before `hay`, i.e. in bytes fed by an earlier call).
    /// Reports come in order of `end`.
    ///
    /// When at most three distinct bytes lead out of the start state (the keywords' first
    /// bytes), the scan jumps from start state to the next such byte with SIMD `memchr`.
    pub fn scan(&self, mut s: StateId, hay: &[u8], mut report: impl FnMut(u32, usize)) -> StateId {
        let table = &self.table[..];
        let classes = &self.classes;
        let limit = self.match_limit;
        self.check_state(s);
        if let Skip::None = self.skip {
            return self.run_plain(s, hay, &mut report);
        }
        // Skip mode: the state is `start` at position `i`; jump to the next position where a
        // keyword may start. DFA mode: run until the state is again equivalent to a fresh
        // start — the start state itself, or a non-reporting single-byte state (then the DFA
        // restarts at that byte, which gives the same state), but not on the first byte
        // after a jump, so that every round makes progress.
        //
        // The filter is abandoned for the rest of `hay` when its jumps average under
        // `MIN_AVG_SKIP` bytes: then it costs more than the DFA it saves.
        let start = self.start;
        let shallow = self.shallow_limit;
        let (mut jumps, mut skipped) = (0usize, 0usize);
        let mut i = 0;
        loop {
            if s == start {
                if jumps >= 32 && skipped < jumps * MIN_AVG_SKIP {
                    return self.run_plain(s, &hay[i..], &mut |kw, end| report(kw, i + end));
                }
                match self.skip.find(&hay[i..]) {
                    Some(j) => {
                        i += j;
                        jumps += 1;
                        skipped += j;
                    }
                    None => return start,
                }
            }
            let entered = i;
            loop {
                if i == hay.len() {
                    return s;
                }
                s = step(table, s, classes[hay[i] as usize]);
                i += 1;
                if s < shallow {
                    if s < limit {
                        self.report_state(s, i, &mut report);
                    } else if s == start {
                        break;
                    } else if i - entered >= 2 {
                        i -= 1;
                        s = start;
                        break;
                    }
                }
            }
        }
    }

    /// The DFA alone over `hay` from state `s`, reporting as [`Automaton::scan`] does.
    ///
    /// Each transition is a load that waits on the one before it, so one pass runs at the
    /// latency of a load per byte. A long input is read as two halves stepped together, whose
    /// loads overlap: the second starts from the start state `max_len` bytes before the
    /// middle, so every match that ends in the second half lies wholly inside what it reads,
    /// and it ends in the state a single pass would (no keyword prefix is longer than
    /// `max_len`). Its reports wait until the first half's are made, to keep them in order of
    /// their end.
    fn run_plain(
        &self,
        mut s: StateId,
        hay: &[u8],
        report: &mut impl FnMut(u32, usize),
    ) -> StateId {
        let table = &self.table[..];
        let classes = &self.classes;
        let limit = self.match_limit;
        let overlap = self.max_len;
        if hay.len() < TWO_STREAMS_MIN.max(4 * overlap) {
            for (i, &b) in hay.iter().enumerate() {
                s = step(table, s, classes[b as usize]);
                if s < limit {
                    self.report_state(s, i + 1, report);
                }
            }
            return s;
        }
        let mid = hay.len() / 2;
        let (first, second) = (&hay[..mid], &hay[mid - overlap..]);
        let at = mid - overlap; // where `second` starts in `hay`
        let mut t = self.start;
        let mut later = Vec::new();
        for (i, (&x, &y)) in first.iter().zip(second).enumerate() {
            s = step(table, s, classes[x as usize]);
            t = step(table, t, classes[y as usize]);
            if s < limit {
                self.report_state(s, i + 1, report);
            }
            // Matches ending in the first half are the first stream's to report.
            if t < limit && i >= overlap {
                self.report_state(t, at + i + 1, &mut |kw, end| later.push((kw, end)));
            }
        }
        for (j, &y) in second.iter().enumerate().skip(mid) {
            t = step(table, t, classes[y as usize]);
            if t < limit {
                self.report_state(t, at + j + 1, &mut |kw, end| later.push((kw, end)));
            }
        }
        for (kw, end) in later {
            report(kw, end);
        }
        t
    }

    /// Every keyword occurrence inside `hay` (context before `hay` is ignored), reported as
    /// `report(keyword, start)` in order of the match's end; returns the state after `hay`
    /// (as [`Automaton::tail_state`]). With a single keyword this uses SIMD substring search
    /// (`memchr::memmem`) instead of the DFA.
    pub fn find_all(&self, hay: &[u8], mut report: impl FnMut(u32, usize)) -> StateId {
        if let Some(f) = &self.single {
            let mut at = 0;
            while let Some(j) = f.find(&hay[at..]) {
                report(0, at + j);
                at += j + 1;
            }
            return self.tail_state(hay);
        }
        self.scan(self.start, hay, |kw, end| {
            report(kw, end - self.lens[kw as usize] as usize)
        })
    }

    /// The state after reading `hay` from the start state, computed from its last
    /// `max_keyword_len - 1` bytes only: equal to scanning all of `hay` as far as
    /// [`Automaton::end_partials`] is concerned (proper prefixes are shorter than that).
    pub fn tail_state(&self, hay: &[u8]) -> StateId {
        let keep = self.max_len.saturating_sub(1);
        self.run(self.start, &hay[hay.len().saturating_sub(keep)..])
    }

    /// Reads `hay` from state `s` without reporting matches; returns the final state.
    pub fn run(&self, mut s: StateId, hay: &[u8]) -> StateId {
        for &b in hay {
            s = self.next(s, b);
        }
        s
    }

    /// Reads `hay` *back to front* from state `s`; returns the final state. Used with the
    /// automaton of the reversed keywords to find keyword suffixes at a chunk's start.
    pub fn run_rev(&self, mut s: StateId, hay: &[u8]) -> StateId {
        for &b in hay.iter().rev() {
            s = self.next(s, b);
        }
        s
    }

    /// For state `s` (reached after reading some input `x`), pushes onto `out` one pair
    /// `(keyword, len)` per keyword `k` that has a *proper* prefix of length `len >= 1` that
    /// is a suffix of `x`, with `len` the longest such; pairs are sorted by keyword.
    pub fn end_partials(&self, s: StateId, out: &mut Vec<(u32, u32)>) {
        let base = out.len();
        let mut i = s / self.stride;
        // Walk the failure chain from the deepest node: the first time a keyword is seen
        // is its longest prefix.
        while i != NONE && self.depth[i as usize] > 0 {
            let d = self.depth[i as usize];
            let (a, b) = (
                self.thru_at[i as usize] as usize,
                self.thru_at[i as usize + 1] as usize,
            );
            for &kw in &self.thru_kw[a..b] {
                if self.lens[kw as usize] > d {
                    out.push((kw, d));
                }
            }
            i = self.fail[i as usize];
        }
        // Stable sort keeps the longest (first pushed) entry first for each keyword.
        out[base..].sort_by_key(|p| p.0);
        let mut w = base;
        for r in base..out.len() {
            if w == base || out[w - 1].0 != out[r].0 {
                out[w] = out[r];
                w += 1;
            }
        }
        out.truncate(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find_all(ac: &Automaton, hay: &[u8]) -> Vec<(u32, usize)> {
        let mut v = Vec::new();
        ac.scan(ac.start(), hay, |k, end| {
            v.push((k, end - ac.keyword_len(k)))
        });
        v.sort();
        v
    }

    #[test]
    fn dedup_up_matches_and_partials() {
        let ac = Automaton::new(&[b"DEDUP".as_ref(), b"UP"]).unwrap();
        assert_eq!(find_all(&ac, b"xDEDUPxUP"), vec![(0, 1), (1, 4), (1, 7)]);
        let mut p = Vec::new();
        ac.end_partials(ac.run(ac.start(), b"xxDEDU"), &mut p);
        assert_eq!(p, vec![(0, 4), (1, 1)]);
        p.clear();
        // "DEDED": longest prefix of DEDUP ending it is DED.
        ac.end_partials(ac.run(ac.start(), b"DEDED"), &mut p);
        assert_eq!(p, vec![(0, 3)]);
        p.clear();
        // A full keyword at the end is not a partial of itself.
        ac.end_partials(ac.run(ac.start(), b"xUP"), &mut p);
        assert_eq!(p, vec![]);
    }

    #[test]
    fn all_bytes_used_and_duplicates() {
        let kws: Vec<Vec<u8>> = vec![(0..=255u8).collect(), vec![7, 7], vec![7, 7]];
        let ac = Automaton::new(&kws).unwrap();
        let mut hay: Vec<u8> = vec![7, 7, 7];
        hay.extend(0..=255u8);
        let got = find_all(&ac, &hay);
        assert_eq!(got, vec![(0, 3), (1, 0), (1, 1), (2, 0), (2, 1)]);
    }

    /// A seeded generator of numbers below `n` (64-bit LCG, high bits).
    fn lcg(mut x: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        }
    }

    /// The skipping scan (every `Skip` kind) against brute force, and its final state
    /// against a plain run.
    #[test]
    fn skip_modes_agree_with_brute_force() {
        let mut rnd = lcg(7);
        for round in 0..3000 {
            let alpha: &[u8] = if round % 2 == 0 { b"abcdefgh" } else { b"ab" };
            let nk = 1 + rnd(12) as usize;
            let kws: Vec<Vec<u8>> = (0..nk)
                .map(|_| {
                    (0..1 + rnd(5))
                        .map(|_| alpha[rnd(alpha.len() as u64) as usize])
                        .collect()
                })
                .collect();
            let hay: Vec<u8> = (0..rnd(200))
                .map(|_| alpha[rnd(alpha.len() as u64) as usize])
                .collect();
            let ac = Automaton::new(&kws).unwrap();
            let mut want = Vec::new();
            for (k, kw) in kws.iter().enumerate() {
                for o in 0..hay.len() {
                    if hay[o..].starts_with(kw) {
                        want.push((k as u32, o));
                    }
                }
            }
            want.sort();
            assert_eq!(find_all(&ac, &hay), want, "{kws:?} {hay:?}");
            let mut got2 = Vec::new();
            let end = ac.find_all(&hay, |k, o| got2.push((k, o)));
            got2.sort();
            assert_eq!(got2, want);
            let (mut p1, mut p2) = (Vec::new(), Vec::new());
            ac.end_partials(end, &mut p1);
            ac.end_partials(ac.run(ac.start(), &hay), &mut p2);
            assert_eq!(p1, p2, "{kws:?} {hay:?}");
        }
    }

    /// The plain DFA read as two streams reports what one stream reports, in the same order,
    /// and ends in the same state, from the start state and from a state mid-keyword.
    #[test]
    fn two_streams_equal_one() {
        let mut rnd = lcg(11);
        let mut long = 0;
        for _ in 0..300 {
            let alpha: &[u8] = if rnd(2) == 0 { b"abcdefgh" } else { b"abcd" };
            // Four one-byte keywords turn the skip filters off: the plain DFA runs.
            let mut kws: Vec<Vec<u8>> = alpha[alpha.len() - 4..].iter().map(|&b| vec![b]).collect();
            for _ in 0..rnd(20) {
                let n = 1 + rnd(12) as usize;
                kws.push(
                    (0..n)
                        .map(|_| alpha[rnd(alpha.len() as u64) as usize])
                        .collect(),
                );
            }
            let hay: Vec<u8> = (0..rnd(5000))
                .map(|_| alpha[rnd(alpha.len() as u64) as usize])
                .collect();
            let ac = Automaton::new(&kws).unwrap();
            assert!(matches!(ac.skip, Skip::None));
            long += usize::from(hay.len() >= TWO_STREAMS_MIN.max(4 * ac.max_len));
            for from in [ac.start(), ac.run(ac.start(), &kws[kws.len() - 1][1..])] {
                let mut got = Vec::new();
                let end = ac.scan(from, &hay, |k, e| got.push((k, e)));
                let (mut want, mut s) = (Vec::new(), from);
                for (i, &b) in hay.iter().enumerate() {
                    s = ac.next(s, b);
                    if s < ac.match_limit {
                        ac.report_state(s, i + 1, &mut |k, e| want.push((k, e)));
                    }
                }
                assert_eq!(got, want, "{kws:?}");
                assert_eq!(end, s, "{kws:?}");
            }
        }
        assert!(long > 100, "{long}");
    }

    #[test]
    fn rejects_bad_input() {
        assert!(matches!(
            Automaton::new::<&[u8]>(&[]),
            Err(SearchError::NoKeywords)
        ));
        assert!(matches!(
            Automaton::new(&[b"a".as_ref(), b""]),
            Err(SearchError::EmptyKeyword(1))
        ));
    }
}
