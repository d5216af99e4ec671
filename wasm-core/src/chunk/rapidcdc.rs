//! RapidCDC (Ni, thesis ch. 3 §3.3): skip the byte-by-byte search when the data repeats
//! what an earlier version held.
//!
//! *Duplicate locality* (§3.2): after a duplicate chunk, the next chunk is very likely a
//! duplicate too. So for every pair of consecutive chunks `A1, A2` seen before, the size of
//! `A2` (and its last byte, the "marker") is kept in a *size list* attached to `A1`'s
//! fingerprint (§3.3.3: LRU, length 2). When a chunk whose fingerprint has a size list is
//! produced, the chunker jumps straight to each suggested end and accepts it if it passes
//! the configured test (§3.3.2):
//! - FF+RWT: the underlying chunker's hash test holds at the suggested end;
//! - FF+MT: the byte before the suggested end equals the recorded marker.
//!
//! If no suggestion is accepted it falls back to the normal search from `start + min`.
//! The output depends only on the bytes and the hints (never on the block split), but it
//! may differ from the plain chunker's: that is RapidCDC's trade-off, measured in
//! docs/BENCHMARKS.md (speed-up and dedup on typescript-10).

use std::collections::HashMap;
use std::sync::Mutex;

use super::fastcdc::FastCdc;
use super::twostage::TwoStage;
use super::CutPoint;
use crate::hash::{lookup_key, Fingerprint};

/// How a suggested boundary is accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accept {
    /// Fast-forward + rolling-window test.
    RollingWindow,
    /// Fast-forward + marker (last byte) test.
    Marker,
}

/// A chunker that can test one suggested boundary.
pub trait BoundaryTest: CutPoint {
    fn is_boundary(&self, buf: &[u8], start: usize, end: usize) -> bool;
    fn min_size(&self) -> usize;
}

impl BoundaryTest for TwoStage {
    fn is_boundary(&self, buf: &[u8], start: usize, end: usize) -> bool {
        let len = end - start;
        let (min, _, max) = self.sizes();
        end == buf.len()
            || (len >= min
                && len <= max
                && end < buf.len()
                && TwoStage::is_boundary(self, buf, end, len))
    }
    fn min_size(&self) -> usize {
        self.sizes().0
    }
}

impl BoundaryTest for FastCdc {
    fn is_boundary(&self, buf: &[u8], start: usize, end: usize) -> bool {
        FastCdc::is_boundary(self, buf, start, end)
    }
    fn min_size(&self) -> usize {
        self.sizes().0
    }
}

/// Size lists: fingerprint of a chunk -> (size, last byte) of the chunk that followed it,
/// most recent first, at most [`Hints::LIST_LEN`].
#[derive(Default, Clone)]
pub struct Hints {
    map: HashMap<Fingerprint, Vec<(u32, u8)>>,
}

impl Hints {
    pub const LIST_LEN: usize = 2;

    pub fn new() -> Self {
        Self::default()
    }

    /// Records that a chunk of `size` bytes ending with `marker` followed chunk `prev`
    /// (moves it to the front of the LRU list).
    pub fn record(&mut self, prev: &Fingerprint, size: u32, marker: u8) {
        let list = self.map.entry(*prev).or_default();
        if let Some(i) = list.iter().position(|&(s, m)| s == size && m == marker) {
            list.remove(i);
        }
        list.insert(0, (size, marker));
        list.truncate(Self::LIST_LEN);
    }

    /// Learns every consecutive pair of a file's chunk list (a previous version's recipe).
    /// `markers` may be empty when unknown (then only the rolling-window test can accept).
    pub fn learn_recipe(&mut self, fps: &[Fingerprint], sizes: &[u32], markers: &[u8]) {
        for i in 1..fps.len().min(sizes.len()) {
            self.record(&fps[i - 1], sizes[i], markers.get(i).copied().unwrap_or(0));
        }
    }

    pub fn get(&self, fp: &Fingerprint) -> Option<&[(u32, u8)]> {
        self.map.get(fp).map(|v| v.as_slice())
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Counters: jumps tried / accepted, and how many bytes the normal search had to scan.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    pub chunks: u64,
    pub tried: u64,
    pub accepted: u64,
    pub fallback_chunks: u64,
}

struct State {
    hints: Hints,
    prev: Option<Fingerprint>,
    /// Lookup keys of the chunks cut so far and not yet taken by the caller.
    emitted: Vec<Fingerprint>,
    stats: Stats,
}

/// RapidCDC over a base chunker. It computes each chunk's lookup key (plain SHA-1,
/// [`crate::hash::lookup_key`]) as it cuts it (the next jump needs it), and hands those keys
/// over through [`CutPoint::take_fingerprints`], so the pipeline does not hash twice; the
/// chunks to be stored are confirmed there, as for every chunker.
pub struct RapidCdc<C: BoundaryTest> {
    inner: C,
    accept: Accept,
    learn_online: bool,
    state: Mutex<State>,
}

impl<C: BoundaryTest> RapidCdc<C> {
    pub fn new(inner: C, hints: Hints, accept: Accept) -> Self {
        RapidCdc {
            inner,
            accept,
            learn_online: true,
            state: Mutex::new(State {
                hints,
                prev: None,
                emitted: Vec::new(),
                stats: Stats::default(),
            }),
        }
    }

    /// Starts a new file: the first chunk of a file has no predecessor to jump from.
    pub fn start_file(&self) {
        self.state.lock().unwrap().prev = None;
    }

    pub fn stats(&self) -> Stats {
        self.state.lock().unwrap().stats
    }

    /// The size lists after this file (the hints learnt online included).
    pub fn into_hints(self) -> Hints {
        self.state.into_inner().unwrap().hints
    }
}

impl<C: BoundaryTest> CutPoint for RapidCdc<C> {
    fn max_size(&self) -> usize {
        self.inner.max_size()
    }
    fn history(&self) -> usize {
        self.inner.history()
    }

    fn cut(&self, buf: &[u8], start: usize) -> usize {
        let mut st = self.state.lock().unwrap();
        let avail = (buf.len() - start).min(self.inner.max_size());
        let mut end = None;
        if let Some(list) = st.prev.and_then(|p| st.hints.get(&p).map(|l| l.to_vec())) {
            for (size, marker) in list {
                let size = size as usize;
                if size == 0 || size > avail {
                    continue;
                }
                st.stats.tried += 1;
                let e = start + size;
                let ok = match self.accept {
                    Accept::RollingWindow => self.inner.is_boundary(buf, start, e),
                    Accept::Marker => buf[e - 1] == marker,
                };
                if ok {
                    st.stats.accepted += 1;
                    end = Some(e);
                    break;
                }
            }
        }
        let e = end.unwrap_or_else(|| {
            st.stats.fallback_chunks += 1;
            self.inner.cut(buf, start)
        });
        let fp = lookup_key(&buf[start..e]);
        if self.learn_online {
            if let Some(p) = st.prev {
                st.hints.record(&p, (e - start) as u32, buf[e - 1]);
            }
        }
        st.prev = Some(fp);
        st.emitted.push(fp);
        st.stats.chunks += 1;
        e
    }

    fn take_fingerprints(&self, out: &mut Vec<Fingerprint>) -> bool {
        out.append(&mut self.state.lock().unwrap().emitted);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::twostage::test_text;
    use super::super::{chunk_all, test_bytes, ChunkStream};
    use super::*;
    use crate::hash::fingerprint;

    fn recipe(data: &[u8], chunks: &[(usize, usize)]) -> (Vec<Fingerprint>, Vec<u32>, Vec<u8>) {
        (
            chunks
                .iter()
                .map(|&(o, l)| fingerprint(&data[o..o + l]))
                .collect(),
            chunks.iter().map(|&(_, l)| l as u32).collect(),
            chunks.iter().map(|&(o, l)| data[o + l - 1]).collect(),
        )
    }

    /// Version 2: version 1 with a few local edits (insertions, deletions, overwrites).
    fn edited(v1: &[u8]) -> Vec<u8> {
        let mut v2 = v1.to_vec();
        for (k, &at) in [40_000usize, 200_000, 333_333, 600_000].iter().enumerate() {
            match k % 3 {
                0 => {
                    v2.splice(at..at, b"inserted text ".iter().copied());
                }
                1 => {
                    v2.drain(at..at + 100);
                }
                _ => v2[at..at + 50].fill(b'#'),
            }
        }
        v2
    }

    #[test]
    fn without_hints_it_is_the_base_chunker() {
        let data = test_text(30, 300_000);
        let base = TwoStage::default_config();
        let r = RapidCdc::new(base.clone(), Hints::new(), Accept::RollingWindow);
        assert_eq!(chunk_all(&r, &data), chunk_all(&base, &data));
        assert_eq!(r.stats().tried, 0);
    }

    #[test]
    fn jumps_on_a_repeated_version_and_keeps_dedup() {
        let v1 = test_text(31, 800_000);
        let v2 = edited(&v1);
        for base_kind in 0..2 {
            for accept in [Accept::RollingWindow, Accept::Marker] {
                let (c1, c2, plain2, r) = if base_kind == 0 {
                    let b = TwoStage::default_config();
                    let c1 = chunk_all(&b, &v1);
                    let (f, s, m) = recipe(&v1, &c1);
                    let mut h = Hints::new();
                    h.learn_recipe(&f, &s, &m);
                    let r = RapidCdc::new(b.clone(), h, accept);
                    (c1, chunk_all(&r, &v2), chunk_all(&b, &v2), r.stats())
                } else {
                    let b = FastCdc::default_8k();
                    let c1 = chunk_all(&b, &v1);
                    let (f, s, m) = recipe(&v1, &c1);
                    let mut h = Hints::new();
                    h.learn_recipe(&f, &s, &m);
                    let r = RapidCdc::new(b.clone(), h, accept);
                    (c1, chunk_all(&r, &v2), chunk_all(&b, &v2), r.stats())
                };
                // Chunks tile v2.
                assert_eq!(c2.iter().map(|c| c.1).sum::<usize>(), v2.len());
                // Most chunks came from accepted jumps.
                assert!(r.accepted * 10 >= r.chunks * 8, "{accept:?} {r:?}");
                // Dedup against v1 as good as the plain chunker's, within 2 chunks' worth.
                let old: std::collections::HashSet<Fingerprint> =
                    recipe(&v1, &c1).0.into_iter().collect();
                let dup = |cs: &[(usize, usize)]| -> usize {
                    cs.iter()
                        .filter(|&&(o, l)| old.contains(&fingerprint(&v2[o..o + l])))
                        .map(|c| c.1)
                        .sum()
                };
                assert!(dup(&c2) + 2 * 65_536 >= dup(&plain2), "{accept:?}");
            }
        }
    }

    #[test]
    fn rolling_window_test_agrees_with_the_base_cut() {
        // Every end the plain chunker produces (short of max/EOF cuts) passes the test.
        let data = test_bytes(32, 400_000);
        let fc = FastCdc::new(256, 2048, 16384, 1).unwrap();
        let ts = TwoStage::new(256, 2048, 16384, 2).unwrap();
        for (o, l) in chunk_all(&fc, &data) {
            if l < 16384 && o + l < data.len() {
                assert!(
                    BoundaryTest::is_boundary(&fc, &data, o, o + l),
                    "fastcdc {o}+{l}"
                );
            }
        }
        for (o, l) in chunk_all(&ts, &data) {
            if l < 16384 && o + l < data.len() {
                assert!(
                    BoundaryTest::is_boundary(&ts, &data, o, o + l),
                    "twostage {o}+{l}"
                );
            }
        }
    }

    #[test]
    fn streaming_matches_whole_buffer_with_hints() {
        let v1 = test_text(33, 700_000);
        let v2 = edited(&v1);
        let b = TwoStage::new(512, 2048, 8192, 2).unwrap();
        let (f, s, m) = recipe(&v1, &chunk_all(&b, &v1));
        let mut h = Hints::new();
        h.learn_recipe(&f, &s, &m);
        let whole = chunk_all(
            &RapidCdc::new(b.clone(), h.clone(), Accept::RollingWindow),
            &v2,
        );
        for step in [1000usize, 8192, 100_001] {
            let mut st =
                ChunkStream::new(RapidCdc::new(b.clone(), h.clone(), Accept::RollingWindow));
            let mut got = Vec::new();
            for blk in v2.chunks(step) {
                st.push(blk);
                got.extend(st.drain().map(|c| (c.offset as usize, c.len)));
            }
            st.finish();
            got.extend(st.drain().map(|c| (c.offset as usize, c.len)));
            assert_eq!(got, whole, "step {step}");
        }
    }
}
