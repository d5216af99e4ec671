//! FastCDC-2020 (Xia et al., "The Design of Fast Content-Defined Chunking for Data
//! Deduplication Based Storage Systems", TPDS 2020), cut-point compatible with the
//! `fastcdc` crate v3, module `v2020`, normalization levels 0-3, default (unseeded) gear.
//!
//! The algorithm: a 64-bit gear hash `h = (h << 1) + GEAR[byte]` starts from zero at the
//! minimum size (rounded down to even, as the crate's two-bytes-per-iteration loop does),
//! a chunk ends before the first byte after which `h & mask == 0`, with a stricter mask
//! (more bits) before the average size and a looser one after it ("normalized chunking").
//! A chunk ends at `max` if no byte matches; a trailing odd byte is never tested, again
//! like the crate. We test one byte per step: testing `h << 1` against `mask << 1`, as the
//! crate does on every other byte, is the same condition.

use super::gear_table::GEAR;
use super::CutPoint;

/// Mask for each number of effective bits (index = bits). Values 6..=24 are the spread-bit
/// masks of the FastCDC reference implementation; 5 and 25 exist only for level 3 at the
/// extremes. These are format constants: changing one changes every cut point.
const MASKS: [u64; 26] = [
    0,
    0,
    0,
    0,
    0,
    0x0000_0000_0180_4110,
    0x0000_0000_0180_3110,
    0x0000_0000_1803_5100,
    0x0000_0018_0003_5300,
    0x0000_0190_0035_3000,
    0x0000_5900_0353_0000,
    0x0000_d900_0353_0000,
    0x0000_d901_0353_0000,
    0x0000_d903_0353_0000,
    0x0000_d903_1353_0000,
    0x0000_d90f_0353_0000,
    0x0000_d903_0353_7000,
    0x0000_d907_0353_7000,
    0x0000_d907_0753_7000,
    0x0000_d917_0753_7000,
    0x0000_d917_4753_7000,
    0x0000_d917_6753_7000,
    0x0000_d937_6753_7000,
    0x0000_d937_7753_7000,
    0x0000_d937_7757_7000,
    0x0000_db37_7757_7000,
];

/// Parameter bounds, the same as the `fastcdc` crate's so that every accepted
/// configuration has a reference to compare with.
pub const MIN_SIZE_RANGE: (usize, usize) = (64, 1_048_576);
pub const AVG_SIZE_RANGE: (usize, usize) = (256, 4_194_304);
pub const MAX_SIZE_RANGE: (usize, usize) = (1024, 16_777_216);

/// FastCDC-2020 configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FastCdc {
    min: usize,
    avg: usize,
    max: usize,
    mask_s: u64,
    mask_l: u64,
}

impl FastCdc {
    /// `level` is the normalization level 0..=3 (the crate's default is 1).
    pub fn new(min: usize, avg: usize, max: usize, level: u32) -> Result<Self, String> {
        let within = |v: usize, r: (usize, usize)| v >= r.0 && v <= r.1;
        if !within(min, MIN_SIZE_RANGE) || !within(avg, AVG_SIZE_RANGE) {
            return Err(format!("fastcdc: min {min} / avg {avg} out of range"));
        }
        if !within(max, MAX_SIZE_RANGE) || level > 3 {
            return Err(format!("fastcdc: max {max} / level {level} out of range"));
        }
        // Rounded base-2 logarithm of the average, as the crate computes it.
        let bits = (avg as f64).log2().round() as u32;
        Ok(FastCdc {
            min,
            avg,
            max,
            mask_s: MASKS[(bits + level) as usize],
            mask_l: MASKS[(bits - level) as usize],
        })
    }

    /// The 2K/8K/64K level-1 configuration used as Ditto's FastCDC baseline.
    /// `(min, avg, max)`.
    pub fn sizes(&self) -> (usize, usize, usize) {
        (self.min, self.avg, self.max)
    }

    pub fn default_8k() -> Self {
        Self::new(2048, 8192, 65536, 1).expect("valid parameters")
    }
}

impl FastCdc {
    /// Would the chunk starting at `start` be allowed to end at `c` by the hash test
    /// alone (RapidCDC's rolling-window test)? The gear hash is recomputed over the up to
    /// 64 bytes that still influence it at byte `c` (older bytes are shifted out of the
    /// 64-bit state), starting no earlier than where FastCDC starts hashing. At the end
    /// of the data (`c == buf.len()`) every end is allowed.
    pub fn is_boundary(&self, buf: &[u8], start: usize, c: usize) -> bool {
        if c >= buf.len() {
            return c == buf.len();
        }
        let len = c - start;
        if len < (self.min & !1) || len > self.max {
            return false;
        }
        let from = (start + (self.min & !1)).max(c.saturating_sub(63));
        let mut h: u64 = 0;
        for &b in &buf[from..=c] {
            h = (h << 1).wrapping_add(GEAR[b as usize]);
        }
        let mask = if len < self.avg {
            self.mask_s
        } else {
            self.mask_l
        };
        h & mask == 0
    }
}

impl CutPoint for FastCdc {
    fn max_size(&self) -> usize {
        self.max
    }

    fn cut(&self, buf: &[u8], start: usize) -> usize {
        let src = &buf[start..];
        let mut remaining = src.len();
        if remaining <= self.min {
            return buf.len();
        }
        let mut center = self.avg;
        if remaining > self.max {
            remaining = self.max;
        } else if remaining < center {
            center = remaining;
        }
        // The crate steps two bytes at a time from min/2, so both ends round down to even.
        let first = self.min & !1;
        let mid = center & !1;
        let end = remaining & !1;
        let mut h: u64 = 0;
        let mut i = first;
        while i < mid {
            h = (h << 1).wrapping_add(GEAR[src[i] as usize]);
            if h & self.mask_s == 0 {
                return start + i;
            }
            i += 1;
        }
        while i < end {
            h = (h << 1).wrapping_add(GEAR[src[i] as usize]);
            if h & self.mask_l == 0 {
                return start + i;
            }
            i += 1;
        }
        start + remaining
    }
}

#[cfg(test)]
mod tests {
    use super::super::{chunk_all, test_bytes, ChunkStream};
    use super::*;

    fn reference(data: &[u8], min: u32, avg: u32, max: u32, level: u32) -> Vec<(usize, usize)> {
        use ::fastcdc::v2020::{FastCDC, Normalization};
        let norm = match level {
            0 => Normalization::Level0,
            1 => Normalization::Level1,
            2 => Normalization::Level2,
            _ => Normalization::Level3,
        };
        FastCDC::with_level(data, min, avg, max, norm)
            .map(|c| (c.offset, c.length))
            .collect()
    }

    #[test]
    fn sekien_vectors() {
        let img = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/testdata/SekienAkashita.jpg"
        ))
        .expect("conformance image in wasm-core/testdata");
        let spec = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/testdata/fastcdc-v2020-sekien.txt"
        ))
        .unwrap();
        let mut cases = 0;
        let mut expect: Vec<(usize, usize, String)> = Vec::new();
        let mut cfg: Option<FastCdc> = None;
        let mut check = |cfg: &Option<FastCdc>, expect: &mut Vec<(usize, usize, String)>| {
            if let Some(c) = cfg {
                let got = chunk_all(c, &img);
                assert_eq!(got.len(), expect.len(), "{c:?}");
                for ((o, l), (eo, el, esha)) in got.iter().zip(expect.iter()) {
                    assert_eq!((o, l), (eo, el), "{c:?}");
                    let fp = crate::hash::to_hex(&crate::hash::fingerprint(&img[*o..o + l]));
                    assert_eq!(&fp, esha);
                }
                cases += 1;
            }
            expect.clear();
        };
        for line in spec.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("v2020 ") {
                check(&cfg, &mut expect);
                let (sizes, level) = rest.split_once(" level").unwrap();
                let s: Vec<usize> = sizes.split('/').map(|v| v.parse().unwrap()).collect();
                cfg = Some(FastCdc::new(s[0], s[1], s[2], level.parse().unwrap()).unwrap());
            } else if let Some(rest) = line.strip_prefix("off=") {
                let f: Vec<&str> = rest.split(' ').collect();
                expect.push((
                    f[0].parse().unwrap(),
                    f[1].trim_start_matches("len=").parse().unwrap(),
                    f[2].trim_start_matches("sha1=").to_string(),
                ));
            }
        }
        check(&cfg, &mut expect);
        assert_eq!(cases, 3);
    }

    #[test]
    fn matches_fastcdc_crate_on_random_parameters() {
        let mut rng = test_bytes(7, 4096).into_iter();
        let mut next = |n: usize| -> usize {
            let b: [u8; 4] = std::array::from_fn(|_| rng.next().unwrap());
            u32::from_le_bytes(b) as usize % n
        };
        for case in 0..120 {
            let min = 64 + next(4000);
            let avg = (256 + next(30000)).max(min / 2);
            let max = (1024 + next(100_000)).max(avg);
            let level = (case % 4) as u32;
            // Mix random bytes with low-entropy stretches (text-like and zero runs), where
            // odd boundary cases (max cuts, odd remainders) show up.
            let len = next(300_000);
            let mut data = test_bytes(case, len);
            if case % 3 == 0 {
                for (i, b) in data.iter_mut().enumerate() {
                    if (i / 5000) % 2 == 0 {
                        *b %= 4;
                    }
                }
            }
            if case % 5 == 0 {
                let z = len / 3;
                data[z..z + len / 4].fill(0);
            }
            let ours = chunk_all(&FastCdc::new(min, avg, max, level).unwrap(), &data);
            let theirs = reference(&data, min as u32, avg as u32, max as u32, level);
            assert_eq!(ours, theirs, "case {case} {min}/{avg}/{max} level {level}");
        }
    }

    #[test]
    fn streaming_is_independent_of_block_split() {
        let data = test_bytes(99, 400_000);
        let c = FastCdc::new(256, 1024, 4096, 2).unwrap();
        let whole = chunk_all(&c, &data);
        let mut sizes = test_bytes(5, 64).into_iter();
        for round in 0..12 {
            let mut s = ChunkStream::new(c.clone());
            let mut got = Vec::new();
            let mut pos = 0;
            while pos < data.len() {
                let step = match round {
                    0 => 1 + (sizes.next().unwrap_or(1) as usize),
                    1 => 4096,
                    2 => data.len(),
                    _ => 1 + ((sizes.next().unwrap_or(7) as usize) << (round % 10)),
                };
                let end = (pos + step).min(data.len());
                s.push(&data[pos..end]);
                got.extend(s.drain().map(|c| (c.offset as usize, c.len)));
                pos = end;
            }
            s.finish();
            got.extend(s.drain().map(|c| (c.offset as usize, c.len)));
            assert_eq!(got, whole, "round {round}");
        }
    }
}
