//! The partial-match table of one keyword (§3.2 and Table 1 of the paper).
//!
//! Chunk records keep only the *longest* prefix `p_i` a chunk ends with and the *longest*
//! suffix `s_j` the next chunk starts with. Every shorter prefix that also ends the chunk is a
//! *border* of `p_i` (a string that is both a proper prefix and a proper suffix of it), and
//! likewise for suffixes, so both sets are determined by the keyword and the two numbers:
//!
//! * `P(i) = { i, b(i), b(b(i)), ... } \ {0}` with `b` the classic KMP border function of the
//!   keyword;
//! * `S(j)` = the same chain computed on the *reversed* keyword (a suffix `s_m` is a prefix
//!   of `s_j` exactly when its reverse is a border of the reverse of `s_j`).
//!
//! A keyword occurrence straddles the boundary with `k` bytes before it iff `k` is in `P(i)`
//! and `n - k` is in `S(j)`. Cell `(i, j)` of the table lists those occurrences as offsets
//! from the start of `p_i` (that is, `i - k`), ascending. For `DEDUP` the non-empty cells are
//! `(1,4)=[0] (2,3)=[0] (3,2)=[0] (4,1)=[0] (3,4)=[2]` — Table 1.
//!
//! The paper builds the whole `(n-1) x (n-1)` table before the logical phase. For keywords up
//! to 2048 bytes that is four million cells per keyword, and periodic keywords (`aaaa...`)
//! make the cells long, so we fill cells lazily on first use and memoise them: each cell
//! costs `O(|P(i)| + |S(j)|)` once, and a search only ever touches the few `(i, j)` pairs that
//! actually occur in the data.

use std::collections::HashMap;

/// The partial-match table of one keyword, filled on demand.
#[derive(Clone, Debug)]
pub struct PartialMatchTable {
    n: usize,
    /// `pb[i]`: longest proper border of `keyword[..i]`.
    pb: Vec<u16>,
    /// `sb[j]`: longest proper border of `reverse(keyword)[..j]`.
    sb: Vec<u16>,
    memo: HashMap<u32, Box<[u16]>>,
    scratch: Vec<u16>,
}

fn borders(s: &[u8]) -> Vec<u16> {
    let mut b = vec![0u16; s.len() + 1];
    let mut k = 0usize;
    for i in 1..s.len() {
        while k > 0 && s[i] != s[k] {
            k = b[k] as usize;
        }
        if s[i] == s[k] {
            k += 1;
        }
        b[i + 1] = k as u16;
    }
    b
}

impl PartialMatchTable {
    /// Table for `keyword` (at most 65535 bytes).
    pub fn new(keyword: &[u8]) -> Self {
        assert!(keyword.len() <= u16::MAX as usize);
        let rev: Vec<u8> = keyword.iter().rev().copied().collect();
        PartialMatchTable {
            n: keyword.len(),
            pb: borders(keyword),
            sb: borders(&rev),
            memo: HashMap::new(),
            scratch: Vec::new(),
        }
    }

    /// Keyword length.
    pub fn keyword_len(&self) -> usize {
        self.n
    }

    /// Calls `f` for every prefix length in `P(i)`, longest first.
    pub fn for_each_prefix(&self, i: usize, mut f: impl FnMut(usize)) {
        let mut k = i;
        while k > 0 {
            f(k);
            k = self.pb[k] as usize;
        }
    }

    /// Whether suffix length `m` is in `S(j)` (the suffix `s_m` starts every chunk that
    /// starts with `s_j`).
    pub fn suffix_implied(&self, j: usize, m: usize) -> bool {
        let mut x = j;
        while x > m {
            x = self.sb[x] as usize;
        }
        x == m && m > 0
    }

    /// Cell `(i, j)`: offsets, from the start of `p_i`, of the keyword occurrences in
    /// `p_i + s_j` that cross the boundary; ascending. `1 <= i, j <= n - 1`.
    pub fn cell(&mut self, i: usize, j: usize) -> &[u16] {
        debug_assert!(i >= 1 && j >= 1 && i < self.n && j < self.n);
        let key = (i as u32) << 16 | j as u32;
        if !self.memo.contains_key(&key) {
            // S(j) ascending, to test membership of n - k by binary search.
            let mut sj = std::mem::take(&mut self.scratch);
            sj.clear();
            let mut x = j;
            while x > 0 {
                sj.push(x as u16);
                x = self.sb[x] as usize;
            }
            sj.reverse();
            let mut offs = Vec::new();
            self.for_each_prefix(i, |k| {
                let m = self.n - k;
                if m <= j && sj.binary_search(&(m as u16)).is_ok() {
                    offs.push((i - k) as u16);
                }
            });
            self.scratch = sj;
            self.memo.insert(key, offs.into_boxed_slice());
        }
        &self.memo[&key]
    }

    /// All non-empty cells as `((i, j), offsets)`, sorted; `O(n^2)` work — for tests and
    /// documentation, not used by the search.
    pub fn all_cells(&mut self) -> Vec<((usize, usize), Vec<u16>)> {
        let mut out = Vec::new();
        for i in 1..self.n {
            for j in 1..self.n {
                let c = self.cell(i, j);
                if !c.is_empty() {
                    out.push(((i, j), c.to_vec()));
                }
            }
        }
        self.memo.clear();
        out
    }

    /// Number of cells filled so far.
    pub fn filled(&self) -> usize {
        self.memo.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_1_dedup() {
        let mut t = PartialMatchTable::new(b"DEDUP");
        assert_eq!(
            t.all_cells(),
            vec![
                ((1, 4), vec![0]),
                ((2, 3), vec![0]),
                ((3, 2), vec![0]),
                ((3, 4), vec![2]),
                ((4, 1), vec![0]),
            ]
        );
    }

    /// Against the definition: occurrences of the keyword in p_i + s_j crossing the border.
    #[test]
    fn cells_match_brute_force() {
        for kw in [&b"aaaa"[..], b"abab", b"abaab", b"xyzzy", b"aabaaab", b"ab"] {
            let n = kw.len();
            let mut t = PartialMatchTable::new(kw);
            for i in 1..n {
                for j in 1..n {
                    let mut s = kw[..i].to_vec();
                    s.extend_from_slice(&kw[n - j..]);
                    let want: Vec<u16> = (0..i)
                        .filter(|&o| o + n > i && o + n <= s.len() && &s[o..o + n] == kw)
                        .map(|o| o as u16)
                        .collect();
                    assert_eq!(t.cell(i, j), &want[..], "{kw:?} {i} {j}");
                }
                for j in 1..n {
                    for m in 1..n {
                        let want = m <= j && kw[n - j..n - j + m] == kw[n - m..];
                        assert_eq!(t.suffix_implied(j, m), want);
                    }
                }
            }
        }
    }
}
