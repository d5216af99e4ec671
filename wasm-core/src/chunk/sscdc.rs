//! SS-CDC (Ni, thesis ch. 2 §2.3, "Decoupling Rolling Hashing from Chunk Boundary
//! Determination"): chunking in two stages so that the expensive part runs in parallel.
//!
//! Stage 1 marks every *candidate* position of a segment in a bitmap, independently of
//! every other segment (different Web Workers or threads can take different segments of
//! one large file). Stage 2 walks the bitmaps once, in order, and applies the min / avg /
//! max rules, skipping empty bitmap words 128 positions at a time (simd128 in Wasm,
//! §2.3.3's "compare 512 bits with zero").
//!
//! The result is identical to the sequential chunker for every segmentation, because a
//! candidate depends only on the bytes of a fixed window before the position. The thesis's
//! rolling CRC (Eq. 2.1-2.2) is not, as printed, a function of the window content alone,
//! so a segment could not start it cold; here the candidate test is the `twostage` v1
//! one, which is a pure function of its window by construction.
//! Two bitmaps are kept, because the threshold differs before and after the average size
//! (normalised chunking): `loose` candidates, and the `strict` subset of them.

use super::twostage::{self, TwoStage, W2};

/// Candidate bits of one segment: bit `i` of `loose` is position `base + i`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentBitmap {
    pub base: u64,
    pub len: usize,
    pub loose: Vec<u64>,
    pub strict: Vec<u64>,
}

impl SegmentBitmap {
    /// Stage 1 for one segment. `bytes[lead..]` are the bytes at positions
    /// `base .. base + bytes.len() - lead`; `bytes[..lead]` are the (up to 32) bytes
    /// before them (`lead >= min(32, base)`). Position `p` means "cut before byte `p`".
    pub fn compute(cfg: &TwoStage, bytes: &[u8], lead: usize, base: u64) -> SegmentBitmap {
        assert!(
            lead as u64 >= base.min(W2 as u64),
            "segment needs {W2} bytes of history"
        );
        let len = bytes.len() - lead;
        let words = len.div_ceil(64);
        let mut bm = SegmentBitmap {
            base,
            len,
            loose: vec![0; words],
            strict: vec![0; words],
        };
        let (t_strict, t_loose) = cfg.thresholds();
        // Positions whose window would start before the file are never candidates.
        let first = lead + (W2 as u64).saturating_sub(base) as usize;
        let mut c = first.max(W2);
        while c < bytes.len() {
            match twostage::scan(bytes, c, bytes.len(), t_loose) {
                Some(x) => {
                    let i = x - lead;
                    bm.loose[i / 64] |= 1 << (i % 64);
                    if twostage::stage2(bytes, x) < t_strict {
                        bm.strict[i / 64] |= 1 << (i % 64);
                    }
                    c = x + 1;
                }
                None => break,
            }
        }
        bm
    }
}

impl SegmentBitmap {
    /// Stage 2 inside one segment, for a worker that holds only this segment: the ends of
    /// the chunks that start in `entry..stop`, where `entry` is where the previous
    /// segment's last chunk ended (0 for the first segment) and `stop` is this segment's
    /// end. Same size rules as [`FileBitmap::select`]; the bitmap must cover `base ..
    /// min(stop + max, file_len)` (every chunk starting before `stop` ends inside it).
    /// The last end returned (or `entry`, if no chunk starts here) is the next
    /// segment's `entry`: chaining segments this way gives exactly the sequential chunks.
    pub fn select_from(&self, cfg: &TwoStage, file_len: u64, entry: u64, stop: u64) -> Vec<u64> {
        let (min, avg, max) = cfg.sizes();
        let (min, avg, max) = (min as u64, avg as u64, max as u64);
        let base = self.base;
        assert!(entry >= base, "entry before the segment");
        let stop = stop.min(file_len);
        if entry < stop {
            assert!(
                base + self.len as u64 >= (stop + max).min(file_len),
                "segment bitmap too short for its last chunk"
            );
        }
        let rel = |p: u64| (p - base) as usize;
        let mut ends = Vec::new();
        let mut s = entry;
        while s < stop {
            let n = file_len - s;
            let e = if n <= min {
                file_len
            } else {
                let end = s + n.min(max);
                let mid = (s + avg).min(end);
                FileBitmap::first(&self.strict, rel(s + min), rel(mid))
                    .or_else(|| FileBitmap::first(&self.loose, rel(mid.max(s + min)), rel(end)))
                    .map_or(end, |i| base + i as u64)
            };
            ends.push(e);
            s = e;
        }
        ends
    }
}

/// All candidate bits of a file, assembled from its segments (in any order; they must
/// tile the file exactly).
pub struct FileBitmap {
    len: usize,
    loose: Vec<u64>,
    strict: Vec<u64>,
}

impl FileBitmap {
    pub fn assemble(len: usize, segments: &[SegmentBitmap]) -> FileBitmap {
        let words = len.div_ceil(64) + 1;
        let mut f = FileBitmap {
            len,
            loose: vec![0; words],
            strict: vec![0; words],
        };
        let covered: usize = segments.iter().map(|s| s.len).sum();
        assert_eq!(covered, len, "segments must tile the file");
        for s in segments {
            let base = s.base as usize;
            let (wi, sh) = (base / 64, base % 64);
            for (dst, src) in [(&mut f.loose, &s.loose), (&mut f.strict, &s.strict)] {
                // Segment bits shifted to the file's word grid (bases need not be aligned).
                for (k, &w) in src.iter().enumerate() {
                    if w == 0 {
                        continue;
                    }
                    dst[wi + k] |= w << sh;
                    if sh != 0 {
                        dst[wi + k + 1] |= w >> (64 - sh);
                    }
                }
            }
        }
        f
    }

    /// First set bit in `from..to` of `bits`, skipping zero words two at a time.
    fn first(bits: &[u64], from: usize, to: usize) -> Option<usize> {
        if from >= to {
            return None;
        }
        let mut w = from / 64;
        let mut cur = bits[w] & (!0u64 << (from % 64));
        let last = (to - 1) / 64;
        loop {
            if cur != 0 {
                let p = w * 64 + cur.trailing_zeros() as usize;
                return (p < to).then_some(p);
            }
            w += 1;
            if w > last {
                return None;
            }
            // Skip runs of empty words 128 positions at a time.
            while w + 2 <= last && !any2(&bits[w..w + 2]) {
                w += 2;
            }
            cur = bits[w];
        }
    }

    /// Stage 2: the chunk ends, sequentially, with the chunker's size rules.
    pub fn select(&self, cfg: &TwoStage) -> Vec<usize> {
        let (min, avg, max) = cfg.sizes();
        let mut ends = Vec::new();
        let mut s = 0;
        while s < self.len {
            let n = self.len - s;
            let e = if n <= min {
                self.len
            } else {
                let end = s + n.min(max);
                let mid = (s + avg).min(end);
                Self::first(&self.strict, s + min, mid)
                    .or_else(|| Self::first(&self.loose, mid.max(s + min), end))
                    .unwrap_or(end)
            };
            ends.push(e);
            s = e;
        }
        ends
    }
}

#[inline(always)]
fn any2(w: &[u64]) -> bool {
    #[cfg(target_arch = "wasm32")]
    {
        use core::arch::wasm32::*;
        // SAFETY: `w` has two u64 = 16 bytes; v128_load allows unaligned.
        unsafe { v128_any_true(v128_load(w.as_ptr() as *const v128)) }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        (w[0] | w[1]) != 0
    }
}

/// Whole-buffer SS-CDC with segments of `segment` bytes, stage 1 run one segment at a
/// time (the shape a worker pool uses). Returns `(offset, length)` like `chunk_all`.
pub fn chunk_segmented(cfg: &TwoStage, data: &[u8], segment: usize) -> Vec<(usize, usize)> {
    let segment = segment.max(1);
    let segs: Vec<SegmentBitmap> = (0..data.len())
        .step_by(segment)
        .map(|s| {
            let lead = s.min(W2);
            let e = (s + segment).min(data.len());
            SegmentBitmap::compute(cfg, &data[s - lead..e], lead, s as u64)
        })
        .collect();
    to_chunks(&FileBitmap::assemble(data.len(), &segs).select(cfg))
}

/// Same, with stage 1 spread over `threads` OS threads (native only).
#[cfg(not(target_arch = "wasm32"))]
pub fn chunk_parallel(
    cfg: &TwoStage,
    data: &[u8],
    segment: usize,
    threads: usize,
) -> Vec<(usize, usize)> {
    let segment = segment.max(1);
    let starts: Vec<usize> = (0..data.len()).step_by(segment).collect();
    let per = starts.len().div_ceil(threads.max(1)).max(1);
    let segs: Vec<SegmentBitmap> = std::thread::scope(|sc| {
        let handles: Vec<_> = starts
            .chunks(per)
            .map(|group| {
                sc.spawn(move || {
                    group
                        .iter()
                        .map(|&s| {
                            let lead = s.min(W2);
                            let e = (s + segment).min(data.len());
                            SegmentBitmap::compute(cfg, &data[s - lead..e], lead, s as u64)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    to_chunks(&FileBitmap::assemble(data.len(), &segs).select(cfg))
}

fn to_chunks(ends: &[usize]) -> Vec<(usize, usize)> {
    let mut s = 0;
    ends.iter()
        .map(|&e| {
            let c = (s, e - s);
            s = e;
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::twostage::test_text;
    use super::super::{chunk_all, test_bytes};
    use super::*;

    #[test]
    fn identical_to_sequential_for_every_segment_size() {
        let mut data = test_text(8, 300_000);
        data[50_000..90_000].copy_from_slice(&test_bytes(9, 40_000));
        data[120_000..140_000].fill(0);
        let cfgs = [
            TwoStage::default_config(),
            TwoStage::new(64, 512, 2048, 1).unwrap(),
            TwoStage::new(256, 4096, 6000, 3).unwrap(),
        ];
        let sizes = test_bytes(10, 64);
        for cfg in &cfgs {
            let want = chunk_all(cfg, &data);
            // Aligned, unaligned, tiny (shorter than the window) and whole-file segments.
            let mut segs = vec![1usize, 31, 32, 33, 64, 1000, 4096, 65_536, 300_000, 400_000];
            segs.extend(sizes.iter().take(6).map(|&b| 100 + b as usize * 97));
            for &seg in &segs {
                assert_eq!(
                    chunk_segmented(cfg, &data, seg),
                    want,
                    "{cfg:?} segment {seg}"
                );
            }
            #[cfg(not(target_arch = "wasm32"))]
            assert_eq!(chunk_parallel(cfg, &data, 10_007, 3), want);
        }
    }

    /// The worker-pool shape: each segment read with its 32-byte lead and `max` bytes past
    /// its end, stage 2 chained through `select_from` (entry = previous exit).
    fn chain_segments(cfg: &TwoStage, data: &[u8], segment: usize) -> Vec<(usize, usize)> {
        let max = cfg.sizes().2;
        let len = data.len() as u64;
        let mut entry = 0u64;
        let mut ends = Vec::new();
        for s in (0..data.len()).step_by(segment.max(1)) {
            let lead = s.min(W2);
            let stop = (s + segment).min(data.len());
            let to = (stop + max).min(data.len());
            let bm = SegmentBitmap::compute(cfg, &data[s - lead..to], lead, s as u64);
            let got = bm.select_from(cfg, len, entry, stop as u64);
            if let Some(&last) = got.last() {
                entry = last;
            }
            ends.extend(got.iter().map(|&e| e as usize));
        }
        to_chunks(&ends)
    }

    #[test]
    fn chained_segments_identical_to_sequential() {
        let mut data = test_text(12, 400_000);
        data[60_000..100_000].copy_from_slice(&test_bytes(13, 40_000));
        data[150_000..200_000].fill(0); // runs of max-size chunks
        let cfgs = [
            TwoStage::default_config(),
            TwoStage::new(64, 512, 2048, 1).unwrap(),
            TwoStage::new(256, 4096, 6000, 3).unwrap(),
        ];
        for cfg in &cfgs {
            let want = chunk_all(cfg, &data);
            // Segments shorter than max (no chunk may start in one), around max, and large.
            for seg in [
                700usize,
                2047,
                2048,
                2049,
                6000,
                65_535,
                65_536,
                65_537,
                100_003,
                400_000,
                1 << 20,
            ] {
                assert_eq!(
                    chain_segments(cfg, &data, seg),
                    want,
                    "{cfg:?} segment {seg}"
                );
            }
        }
        for len in [0usize, 1, 100, 2048, 2049, 70_000] {
            let d = test_bytes(len as u64 + 5, len);
            let cfg = TwoStage::default_config();
            assert_eq!(
                chain_segments(&cfg, &d, 30_000),
                chunk_all(&cfg, &d),
                "len {len}"
            );
        }
    }

    #[test]
    fn small_and_empty_inputs() {
        let cfg = TwoStage::new(64, 256, 1024, 1).unwrap();
        for len in [0usize, 1, 31, 32, 63, 64, 65, 200, 1023, 1024, 1025, 5000] {
            let data = test_bytes(len as u64, len);
            assert_eq!(
                chunk_segmented(&cfg, &data, 100),
                chunk_all(&cfg, &data),
                "len {len}"
            );
        }
    }
}
