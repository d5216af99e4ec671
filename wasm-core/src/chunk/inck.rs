//! INC-K (PRUNE, Min/Yoon/Won 2011, §4.2 "Incremental Modulo-K"): Rabin-Karp style
//! chunking with a 48-byte window, base 256 and modulus M = 2^31 - 1, where every
//! reduction mod M is done without division: since 2^31 ≡ 1 (mod M), a 64-bit value
//! `N = P_hi * 2^31 + P_lo` reduces to `P_hi + P_lo` (folded twice, then one conditional
//! subtraction) — eq. (4). Selectable as chunker kind `"inck"`.
//!
//! Also the chunk-size model of §4.1, eq. (2): with a match probability `p = 2^-n` per
//! position, minimum `S_min`, maximum `S_max` and `N = S_max - S_min`,
//! `E[S] = S_min + 2^n (1 - (1 - 2^-n)^N)` — tested against measured means.

use super::CutPoint;

/// Window length in bytes (β in the paper).
pub const WINDOW: usize = 48;
/// The modulus M = 2^31 - 1 (a Mersenne prime).
pub const M: u64 = (1 << 31) - 1;

/// `n mod M` for any u64, by folding (eq. 4).
#[inline(always)]
pub fn mod_m(n: u64) -> u64 {
    let r = (n & M) + (n >> 31);
    let r = (r & M) + (r >> 31);
    if r >= M {
        r - M
    } else {
        r
    }
}

/// Contribution of the byte leaving the window: `b * 256^WINDOW mod M`.
const fn out_table() -> [u64; 256] {
    let mut pow = 1u64;
    let mut i = 0;
    while i < WINDOW {
        pow = (pow * 256) % M;
        i += 1;
    }
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = (b as u64 * pow) % M;
        b += 1;
    }
    t
}
static OUT: [u64; 256] = out_table();

/// Signature of `w` (exactly [`WINDOW`] bytes), computed directly: the oracle for the
/// rolling update.
pub fn signature(w: &[u8]) -> u64 {
    w.iter().fold(0, |h, &b| mod_m(h * 256 + b as u64))
}

/// Expected mean chunk size, PRUNE eq. (2) in closed form.
pub fn expected_chunk_size(min: usize, max: usize, bits: u32) -> f64 {
    let p = 0.5f64.powi(bits as i32);
    let n = (max - min) as f64;
    min as f64 + (1.0 / p) * (1.0 - (1.0 - p).powf(n))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncK {
    min: usize,
    max: usize,
    bits: u32,
}

impl IncK {
    /// `bits` = target pattern size n: a position matches when the low `n` bits of the
    /// signature are all ones (not zeros, so runs of zero bytes never match).
    pub fn new(min: usize, max: usize, bits: u32) -> Result<Self, String> {
        if min < 64 || max <= min || max > 16 << 20 || !(4..=30).contains(&bits) {
            return Err(format!(
                "inck: need 64 <= min < max <= 16 MiB, 4 <= bits <= 30; got {min}/{max}/{bits}"
            ));
        }
        Ok(IncK { min, max, bits })
    }
}

impl CutPoint for IncK {
    fn max_size(&self) -> usize {
        self.max
    }

    /// A chunk of length `L` ends at `start + L` for the first `L` in `min+1 ..= max` whose
    /// window (the 48 bytes before the end) matches; else at `max` (or the data's end).
    fn cut(&self, buf: &[u8], start: usize) -> usize {
        let n = buf.len() - start;
        if n <= self.min {
            return buf.len();
        }
        let end = start + n.min(self.max);
        let mask = (1u64 << self.bits) - 1;
        let first = start + self.min + 1;
        if first > end {
            return end;
        }
        let mut h = signature(&buf[first - WINDOW..first]);
        let mut c = first;
        loop {
            if h & mask == mask {
                return c;
            }
            if c == end {
                return end;
            }
            // Slide by one byte: drop buf[c - WINDOW], add buf[c]. `M << 8` keeps it positive.
            h = mod_m(h * 256 + (M << 8) - OUT[buf[c - WINDOW] as usize] + buf[c] as u64);
            c += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{chunk_all, test_bytes};
    use super::*;

    #[test]
    fn folding_reduction_equals_modulo() {
        let r = test_bytes(50, 8 * 1000);
        for w in r.chunks(8) {
            let n = u64::from_le_bytes(w.try_into().unwrap());
            assert_eq!(mod_m(n), n % M);
        }
        for n in [0, M - 1, M, M + 1, 2 * M, u64::MAX, u64::MAX - 1, 1 << 62] {
            assert_eq!(mod_m(n), n % M, "{n}");
        }
    }

    #[test]
    fn rolling_signature_equals_direct_signature() {
        let data = test_bytes(51, 5000);
        let c = IncK::new(64, 4096, 30).unwrap(); // never matches: rolls to max
        let mut h = signature(&data[..WINDOW]);
        for i in WINDOW..data.len() {
            assert_eq!(h, signature(&data[i - WINDOW..i]), "at {i}");
            h = mod_m(h * 256 + (M << 8) - OUT[data[i - WINDOW] as usize] + data[i] as u64);
        }
        assert_eq!(chunk_all(&c, &data[..4096])[0].1, 4096);
    }

    #[test]
    fn cuts_are_matches_or_max() {
        let data = test_bytes(52, 300_000);
        let c = IncK::new(256, 8192, 10).unwrap();
        for (o, l) in chunk_all(&c, &data) {
            let e = o + l;
            if l < 8192 && e < data.len() {
                assert!(l > 256);
                assert_eq!(signature(&data[e - WINDOW..e]) & 1023, 1023);
            }
        }
    }

    #[test]
    fn chunk_size_model_matches_measured_means() {
        // PRUNE Table 2 reports the model within 1% of the sample mean on real files; on
        // random data we allow for sampling error (~1/sqrt(chunks)).
        let data = test_bytes(53, 12 << 20);
        for (min, max, bits) in [
            (2048, 65536, 10),
            (2048, 65536, 11),
            (2048, 16384, 12),
            (512, 4096, 11),
        ] {
            let c = IncK::new(min, max, bits).unwrap();
            let chunks = chunk_all(&c, &data);
            // The last chunk is cut by the end of the data, not the model: leave it out.
            let body = &chunks[..chunks.len() - 1];
            let mean = body.iter().map(|c| c.1).sum::<usize>() as f64 / body.len() as f64;
            let model = expected_chunk_size(min, max, bits);
            let tol = 4.0 / (body.len() as f64).sqrt();
            assert!(
                (mean / model - 1.0).abs() < tol,
                "{min}/{max}/{bits}: mean {mean} model {model}"
            );
        }
        // The model's own numbers from the paper's Table 2 (2 KB / 64 KB, KB = 1024 B).
        for (bits, kb) in [(10, 3.0), (11, 4.0), (12, 6.0), (13, 10.0), (14, 17.7)] {
            let e = expected_chunk_size(2048, 65536, bits) / 1024.0;
            assert!((e - kb).abs() < 0.06 * kb, "bits {bits}: {e} KB vs {kb}");
        }
    }
}
