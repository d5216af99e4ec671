//! Ditto two-stage chunker ("twostage", format version 1): Ditto's own content-defined
//! chunker, built to run at well over native FastCDC speed in Wasm with the same dedup.
//! The normative spec is docs/CHUNKING.md; this file is the reference and the fast path.
//!
//! Why: a gear hash needs one table load per byte, and Wasm has no gather, so FastCDC
//! cannot be vectorised past native scalar speed (FINDINGS, "Chunking in Wasm"). This
//! chunker's candidate test uses no tables and no rolling state:
//! - Stage 1 (SIMD, every position): the 8 bytes before position `c` as two little-endian
//!   u32 `lo`, `hi`; `h1 = lo*K ^ hi*K` (wrapping; one constant, so each product
//!   serves as `lo` of one position and `hi` of the position 4 bytes earlier); `c` survives if the top
//!   [`STAGE1_BITS`] bits of `h1` are `1000…0` (about 1 position in 512), i.e. `h1` as a
//!   signed i32 is below `i32::MIN + 2^(32 - STAGE1_BITS)`: one signed SIMD compare, and
//!   runs of zero bytes (`h1 = 0`) are never candidates.
//! - Stage 2 (scalar, survivors only): a 64-bit multiply-xorshift hash of the 32 bytes
//!   before `c`; `c` is a cut if the hash is below a threshold, stricter before the
//!   average size than after it (FastCDC-style normalisation: at level `l` the overall
//!   candidate probability is `1 / (avg * 2^l)` before `avg` and `2^l / avg` after).
//! - Cuts are searched from `start + min` to `start + max`; if none, the chunk is `max`
//!   bytes (or the rest of the stream). Because both hashes depend only on the bytes of a
//!   fixed window, a position's candidacy never depends on where the chunk started: the
//!   property SS-CDC ([`super::sscdc`]) needs for identical parallel results.
//!
//! The scalar functions [`stage1`], [`stage2`] are the definition; the SIMD scan must
//! (and is tested to) produce identical cut points.

use super::CutPoint;

/// Bytes of the stage-1 window (`lo`, `hi`).
pub const W1: usize = 8;
/// Bytes of the stage-2 window.
pub const W2: usize = 32;
/// Stage-1 survivors have these many top bits of `h1` equal to `1000…0`.
pub const STAGE1_BITS: u32 = 9;
const K: u32 = 0x9E37_79B1;
/// Signed bound: survivors have `h1 as i32 < S1_BOUND`.
const S1_BOUND: i32 = i32::MIN + (1 << (32 - STAGE1_BITS));
const M: [u64; 4] = [
    0x9E37_79B9_7F4A_7C15,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0xD6E8_FEB8_6659_FD93,
];

#[inline(always)]
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

#[inline(always)]
fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Stage-1 hash of the 8 bytes before `c` (`c >= 8`).
#[inline(always)]
pub fn h1(buf: &[u8], c: usize) -> u32 {
    le32(buf, c - 8).wrapping_mul(K) ^ le32(buf, c - 4).wrapping_mul(K)
}

/// Does position `c` survive stage 1?
#[inline(always)]
pub fn stage1(buf: &[u8], c: usize) -> bool {
    (h1(buf, c) as i32) < S1_BOUND
}

/// Stage-2 hash of the 32 bytes before `c` (`c >= 32`).
#[inline]
pub fn stage2(buf: &[u8], c: usize) -> u64 {
    let mut h: u64 = 0;
    for (i, m) in M.iter().enumerate() {
        h = (h ^ le64(buf, c - W2 + 8 * i)).wrapping_mul(*m);
        h ^= h >> 29;
    }
    h
}

/// Is `c` a cut candidate at stage-2 threshold `t`? (The definition.)
#[inline]
pub fn is_candidate(buf: &[u8], c: usize, t: u64) -> bool {
    stage1(buf, c) && stage2(buf, c) < t
}

/// First candidate `c` in `from..to` (`from >= W2`, `to <= buf.len()`), scalar.
pub fn scan_scalar(buf: &[u8], from: usize, to: usize, t: u64) -> Option<usize> {
    (from..to).find(|&c| is_candidate(buf, c, t))
}

/// Stage-2 threshold giving an overall candidate probability of `1 / (avg * 2^shift)`
/// (`shift` may be negative): `2^64 * 2^STAGE1_BITS / (avg * 2^shift)`, saturated.
fn threshold(avg: usize, shift: i32) -> u64 {
    let num: u128 = 1u128 << (64 + STAGE1_BITS as i32 - shift.min(0)).min(127);
    let den: u128 = (avg as u128) << shift.max(0);
    (num / den).min(u64::MAX as u128) as u64
}

/// First candidate in `from..to`, with the fastest stage 1 available.
#[inline]
pub fn scan(buf: &[u8], from: usize, to: usize, t: u64) -> Option<usize> {
    #[cfg(target_arch = "wasm32")]
    {
        simd::scan(buf, from, to, t)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        scan_ring(buf, from, to, t)
    }
}

/// Scalar scan that multiplies each word once: the product `le32(x) * K` is `hi` of
/// position `x + 4` and `lo` of position `x + 8`, so a 4-entry ring carries it over.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
fn scan_ring(buf: &[u8], from: usize, to: usize, t: u64) -> Option<usize> {
    if from >= to {
        return None;
    }
    let mut ring = [0u32; 4];
    for j in 0..4 {
        ring[(from + j) & 3] = le32(buf, from + j - 8).wrapping_mul(K);
    }
    for c in from..to {
        let lo = ring[c & 3];
        let hi = le32(buf, c - 4).wrapping_mul(K);
        ring[c & 3] = hi;
        if (((lo ^ hi) as i32) < S1_BOUND) && stage2(buf, c) < t {
            return Some(c);
        }
    }
    None
}

#[cfg(target_arch = "wasm32")]
mod simd {
    use super::*;
    use core::arch::wasm32::*;

    /// Products `word * K` of the u32 words starting at `p + m + 4i`, as 4 vectors
    /// (`m` = vector, `i` = lane): the 16 words starting at each byte of `p..p+16`.
    #[inline(always)]
    unsafe fn products(p: *const u8, k: v128) -> [v128; 4] {
        core::array::from_fn(|m| i32x4_mul(v128_load(p.add(m) as *const v128), k))
    }

    /// Stage 1 for the 16 positions `c0..c0+16`, given the products for the words
    /// starting at `c0-8..c0+8` (`cur`) and `c0+8..c0+24` (`next`): position
    /// `c0 + m + 4i` has `lo*K` in lane `i` of `cur[m]` and `hi*K` in lane `i+1` (lane 0
    /// of `next[m]` for the last), a shift by one lane. Survival is `h1 < S1_BOUND`
    /// (signed), so the minimum over all 16 is compared once.
    #[inline(always)]
    fn any16(cur: &[v128; 4], next: &[v128; 4], bound: v128) -> bool {
        let h = |m: usize| v128_xor(cur[m], i32x4_shuffle::<1, 2, 3, 4>(cur[m], next[m]));
        let lo = i32x4_min(i32x4_min(h(0), h(1)), i32x4_min(h(2), h(3)));
        v128_any_true(i32x4_lt(lo, bound))
    }

    pub(super) fn scan(buf: &[u8], from: usize, to: usize, t: u64) -> Option<usize> {
        // Run-time splats (black_box): kept in locals rather than rematerialised as v128
        // constants inside the loop by V8.
        let (k, bound) = (
            u32x4_splat(core::hint::black_box(K)),
            i32x4_splat(core::hint::black_box(S1_BOUND)),
        );
        let mut c = from;
        // Loads for group `c` read bytes c-8 .. c+10, those of the next group up to c+26:
        // stay below `to <= buf.len()`.
        if c + 32 <= to {
            // SAFETY (all loads here): c >= from >= W2 > 8 and c + 32 <= to <= buf.len().
            let mut cur = unsafe { products(buf.as_ptr().add(c - 8), k) };
            while c + 32 <= to {
                let next = unsafe { products(buf.as_ptr().add(c + 8), k) };
                if any16(&cur, &next, bound) {
                    // Rare (about 1 group in 32): which of the 16 survived, from the same
                    // vectors (bit i of mask m is position c + m + 4i); stage 2 for those,
                    // in position order.
                    let mut survivors = 0u32;
                    for m in 0..4 {
                        let h = v128_xor(cur[m], i32x4_shuffle::<1, 2, 3, 4>(cur[m], next[m]));
                        let bits = i32x4_bitmask(i32x4_lt(h, bound)) as u32;
                        for i in 0..4 {
                            survivors |= ((bits >> i) & 1) << (m + 4 * i);
                        }
                    }
                    while survivors != 0 {
                        let x = c + survivors.trailing_zeros() as usize;
                        if stage2(buf, x) < t {
                            return Some(x);
                        }
                        survivors &= survivors - 1;
                    }
                }
                cur = next;
                c += 16;
            }
        }
        scan_scalar(buf, c, to, t)
    }
}

/// Two-stage chunker configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TwoStage {
    min: usize,
    avg: usize,
    max: usize,
    /// Stage-2 thresholds before / after the average size.
    strict: u64,
    loose: u64,
}

impl TwoStage {
    /// Sizes as FastCDC's; `level` 0..=3 moves the two thresholds one bit each way per
    /// level around `log2(avg)`, as FastCDC's normalisation does.
    pub fn new(min: usize, avg: usize, max: usize, level: u32) -> Result<Self, String> {
        if min < 64 || min > avg || avg > max || max > 16 << 20 || level > 3 {
            return Err(format!(
                "twostage: need 64 <= min <= avg <= max <= 16 MiB, level <= 3; got {min}/{avg}/{max} level {level}"
            ));
        }
        Ok(TwoStage {
            min,
            avg,
            max,
            strict: threshold(avg, level as i32),
            loose: threshold(avg, -(level as i32)),
        })
    }

    /// Ditto's default: 2K/7.5K/64K, level 2 (mean ~9.3 KB on typescript-10, dedup
    /// 3.44x vs FastCDC 2K/8K/64K level 1's 9.6 KB and 3.41x; docs/CHUNKING.md).
    pub fn default_config() -> Self {
        Self::new(2048, 7680, 65536, 2).expect("valid parameters")
    }

    /// `(min, avg, max)`.
    pub fn sizes(&self) -> (usize, usize, usize) {
        (self.min, self.avg, self.max)
    }

    /// Stage-2 thresholds (before, after the average size).
    pub fn thresholds(&self) -> (u64, u64) {
        (self.strict, self.loose)
    }

    fn cut_with(
        &self,
        buf: &[u8],
        start: usize,
        scan: fn(&[u8], usize, usize, u64) -> Option<usize>,
    ) -> usize {
        let n = buf.len() - start;
        if n <= self.min {
            return buf.len();
        }
        let end = start + n.min(self.max);
        let mid = (start + self.avg).min(end);
        let from = start + self.min;
        if from < mid {
            if let Some(c) = scan(buf, from, mid, self.strict) {
                return c;
            }
        }
        scan(buf, mid.max(from), end, self.loose).unwrap_or(end)
    }

    /// The scalar reference cut (identical by definition and by test to [`CutPoint::cut`]).
    pub fn cut_scalar(&self, buf: &[u8], start: usize) -> usize {
        self.cut_with(buf, start, scan_scalar)
    }

    /// Candidate test at the stage-2 strictness that applies to a chunk of `len` bytes.
    pub fn is_boundary(&self, buf: &[u8], c: usize, len: usize) -> bool {
        c >= W2
            && is_candidate(
                buf,
                c,
                if len < self.avg {
                    self.strict
                } else {
                    self.loose
                },
            )
    }
}

impl CutPoint for TwoStage {
    fn max_size(&self) -> usize {
        self.max
    }
    fn history(&self) -> usize {
        W2
    }
    fn cut(&self, buf: &[u8], start: usize) -> usize {
        self.cut_with(buf, start, scan)
    }
}

/// Text-like deterministic bytes (words, indentation, newlines) for tests: low entropy
/// like source code, where a weak candidate test would show skewed chunk sizes.
#[doc(hidden)]
pub fn test_text(seed: u64, len: usize) -> Vec<u8> {
    const WORDS: [&[u8]; 16] = [
        b"function",
        b"return",
        b"const",
        b"    ",
        b"=>",
        b"{\n",
        b"}\n",
        b"export",
        b"interface",
        b"string",
        b"number",
        b"(x)",
        b", ",
        b";\n",
        b"this.",
        b"        ",
    ];
    let r = super::test_bytes(seed, len);
    let mut out = Vec::with_capacity(len + 16);
    let mut i = 0;
    while out.len() < len {
        let b = r[i % r.len()];
        out.extend_from_slice(WORDS[(b & 15) as usize]);
        if b >> 4 == 0 {
            out.extend_from_slice(&r[(i * 7) % r.len()..][..1]);
        }
        out.push(b' ');
        i += 1;
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::super::{chunk_all, test_bytes, ChunkStream};
    use super::*;

    /// Cut points of the reference chunker, condensed: count and SHA-1 of the ends as u32 LE.
    fn digest(c: &TwoStage, data: &[u8]) -> (usize, String) {
        let mut ends = Vec::new();
        let mut s = 0;
        while s < data.len() {
            s = c.cut_scalar(data, s);
            ends.extend_from_slice(&(s as u32).to_le_bytes());
        }
        (
            ends.len() / 4,
            crate::hash::to_hex(&crate::hash::fingerprint(&ends)),
        )
    }

    #[test]
    fn fast_path_equals_scalar_reference() {
        for (i, data) in [
            test_bytes(1, 500_000),
            test_text(2, 500_000),
            vec![0u8; 200_000],
        ]
        .iter()
        .enumerate()
        {
            for c in [
                TwoStage::default_config(),
                TwoStage::new(64, 1024, 4096, 2).unwrap(),
            ] {
                let mut s = 0;
                while s < data.len() {
                    let e = c.cut(data, s);
                    assert_eq!(e, c.cut_scalar(data, s), "input {i} {c:?} at {s}");
                    s = e;
                }
            }
        }
    }

    #[test]
    fn byte_runs_are_never_candidates() {
        // Runs of one byte value (zeros, spaces, 0xff padding) must not cut at min size.
        for b in 0..=255u8 {
            let run = [b; 64];
            assert!(
                !stage1(&run, 40) || stage2(&run, 40) >= TwoStage::default_config().loose,
                "{b}"
            );
        }
    }

    #[test]
    fn streaming_is_independent_of_block_split() {
        let data = test_text(3, 300_000);
        let c = TwoStage::new(256, 2048, 8192, 2).unwrap();
        let whole = chunk_all(&c, &data);
        for step in [1usize, 7, 4096, 65_537] {
            let mut s = ChunkStream::new(c.clone());
            let mut got = Vec::new();
            for b in data.chunks(step) {
                s.push(b);
                got.extend(s.drain().map(|c| (c.offset as usize, c.len)));
            }
            s.finish();
            got.extend(s.drain().map(|c| (c.offset as usize, c.len)));
            assert_eq!(got, whole, "step {step}");
        }
    }

    #[test]
    fn mean_chunk_size_on_random_data_follows_the_thresholds() {
        // On random bytes every position is a candidate with the designed probability,
        // so the mean chunk must land near the FastCDC-style expectation.
        let data = test_bytes(4, 8 << 20);
        let c = TwoStage::new(2048, 8192, 65536, 1).unwrap();
        let mean = data.len() as f64 / chunk_all(&c, &data).len() as f64;
        assert!((8500.0..11500.0).contains(&mean), "mean {mean}");
    }

    /// Format version 1 cut points, pinned: any change to the constants, windows or the
    /// search order changes these and is a format change (docs/CHUNKING.md).
    #[test]
    fn pinned_cut_points_v1() {
        let got = [
            digest(
                &TwoStage::new(2048, 7680, 65536, 2).unwrap(),
                &test_bytes(42, 1 << 20),
            ),
            digest(
                &TwoStage::new(2048, 7680, 65536, 2).unwrap(),
                &test_text(43, 1 << 20),
            ),
            digest(
                &TwoStage::new(512, 2048, 8192, 1).unwrap(),
                &test_text(44, 1 << 18),
            ),
        ];
        let want: [(usize, &str); 3] = PINNED;
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.0, g.1.as_str()), w);
        }
    }

    const PINNED: [(usize, &str); 3] = [
        (119, "d445b85b16c26fb7554969cbca54eaced2ee66d0"),
        (118, "7a18087d8bd5a9e38c479b60a99d68added445db"),
        (99, "6d1090e4de3bd8401c862180b7445f8b4fe8f556"),
    ];

    /// The shared conformance image, default configuration: every chunk end, pinned (the
    /// same list is in docs/CHUNKING.md for other implementations).
    #[test]
    fn pinned_sekien_cut_points_v1() {
        let img = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/testdata/SekienAkashita.jpg"
        ))
        .expect("conformance image in wasm-core/testdata");
        let ends: Vec<usize> = chunk_all(&TwoStage::default_config(), &img)
            .iter()
            .map(|(o, l)| o + l)
            .collect();
        assert_eq!(ends, SEKIEN_ENDS);
    }

    pub(crate) const SEKIEN_ENDS: &[usize] = &[
        10114, 21052, 29348, 37480, 45260, 54983, 64095, 72070, 85213, 94386, 102720, 109466,
    ];
}
