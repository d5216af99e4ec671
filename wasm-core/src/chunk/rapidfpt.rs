//! RapidCDC with the rolling-window and fingerprint tests (Ni thesis ch. 3 §3.3.2,
//! "FF+RWT+FPT"), arranged so that its cuts are **exactly** the base chunker's.
//!
//! RapidCDC's idea (§3.2, duplicate locality): after a chunk the previous version also
//! had, the next chunk is very likely the one that followed it there. So instead of
//! scanning for the next boundary, jump to the predicted end and test it.
//!
//! Why exact: the two-stage chunker ([`super::twostage`]) decides whether position `c` is
//! a cut from the 32 bytes before `c` alone, and scans a chunk from `start + min`. So the
//! cut it makes for a chunk depends only on the chunk's own bytes: if the bytes at
//! `start..start+L` equal a chunk that the plain chunker once ended *by content* (a
//! candidate at `L`, or `L == max` with none before), it ends this chunk at `L` too. The
//! fingerprint test checks exactly that: the fingerprint of the predicted chunk must equal the
//! predicted (previous) chunk's. A previous file's last chunk was ended by the end of that
//! file, not by content; it is accepted only where this stream is known to end at the same
//! place (then the plain chunker also cuts there: no candidate lies inside). That
//! fingerprint is the one the backup needs anyway, so an accepted prediction costs no scan and
//! no extra hash. Exactness assumes the previous recipes were cut by this same chunker
//! (the backup's are); other recipes only make predictions fail or, at worst, move a cut.
//!
//! Speed in Wasm (measured: docs/BENCHMARKS.md "RapidCDC in Wasm"):
//! - Chunks are decided [`BATCH`] at a time, predicted and scanned ones mixed, and
//!   fingerprinted together in one call.
//! - Before any hashing, a predicted end must pass the rolling-window test (§3.3.2's RWT:
//!   the chunker's own candidate test there, one 32-byte hash): a shifted region is
//!   rejected for free.
//! - After a scanned chunk, predicting resumes at once after the previous version's chunk
//!   of the same length (a guess, checked like any prediction); after a hashed batch, after
//!   the chunk with the last scanned chunk's fingerprint.
//! - A prediction whose fingerprint differs (bytes overwritten in place, e.g. a version
//!   string) is re-cut by scanning; if the scan ends at the same place, the hash already
//!   computed is that chunk's fingerprint and the rest of the batch stands.
//!
//! Oracle: `tests` below and `tests/engine_wasm.rs` check that the output equals the plain
//! chunker's on edited versions, random data and every block split.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::twostage::TwoStage;
use super::CutPoint;
use crate::hash::{sha1_many, Fingerprint};

/// Chunks decided, then hashed together, per batch (at most what the stream's window
/// holds). typescript-10 in Wasm, hinted vs plain: 32 gave 1.02x, 128 gives 1.07x.
pub const BATCH: usize = 128;

/// The previous version's recipes, laid end to end: what RapidCDC predicts from.
pub struct PrevRecipes {
    fps: Vec<Fingerprint>,
    lens: Vec<u32>,
    /// `last[i]`: chunk `i` is the last of its file (ended by the end of the file).
    last: Vec<bool>,
    /// Index of the first chunk of each file (files with no chunks: `None`).
    file_start: Vec<Option<u32>>,
    /// Fingerprint -> an index where it occurs *not* as the last chunk of its file (so a
    /// chunk follows it there).
    followed: HashMap<Fingerprint, u32>,
    /// Length -> the same, for a guess without hashing (lengths below the maximum only).
    by_len: HashMap<u32, u32>,
}

impl PrevRecipes {
    /// `fps`/`lens`: every file's recipe in order; `counts[f]`: chunks of file `f`.
    pub fn new(fps: Vec<Fingerprint>, lens: Vec<u32>, counts: &[u32]) -> Result<Self, String> {
        let total: u64 = counts.iter().map(|&c| c as u64).sum();
        if fps.len() != lens.len() || total != fps.len() as u64 {
            return Err(format!(
                "recipe hints: {} fingerprints, {} lengths, counts sum to {total}",
                fps.len(),
                lens.len()
            ));
        }
        if lens.contains(&0) {
            return Err("recipe hints: a chunk length is 0".into());
        }
        let mut last = vec![false; fps.len()];
        let mut file_start = Vec::with_capacity(counts.len());
        let mut at = 0usize;
        for &c in counts {
            let c = c as usize;
            file_start.push((c > 0).then_some(at as u32));
            if c > 0 {
                last[at + c - 1] = true;
            }
            at += c;
        }
        let mut followed = HashMap::with_capacity(fps.len());
        let mut by_len = HashMap::new();
        let longest = lens.iter().copied().max().unwrap_or(0);
        for (i, fp) in fps.iter().enumerate() {
            if !last[i] {
                followed.entry(*fp).or_insert(i as u32);
                if lens[i] < longest {
                    by_len.entry(lens[i]).or_insert(i as u32);
                }
            }
        }
        Ok(PrevRecipes {
            fps,
            lens,
            last,
            file_start,
            followed,
            by_len,
        })
    }

    /// Chunks in all recipes.
    pub fn len(&self) -> usize {
        self.fps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fps.is_empty()
    }

    /// Files described.
    pub fn files(&self) -> usize {
        self.file_start.len()
    }
}

/// Counters, for benchmarks and tests.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    pub chunks: u64,
    /// Chunks whose end was predicted and confirmed by its fingerprint (no scan).
    pub predicted: u64,
    /// Predictions rejected: by the rolling-window test (free) or by the fingerprint.
    pub rejected: u64,
    /// Chunks found by scanning.
    pub scanned: u64,
}

struct State {
    /// Index in the previous recipes of the chunk expected next, if any.
    next: Option<usize>,
    /// Chunks decided ahead (length, fingerprint), handed out one per `cut`.
    queue: VecDeque<(usize, Fingerprint)>,
    emitted: Vec<Fingerprint>,
    ranges: Vec<(usize, usize)>,
    /// Per range: the previous chunk it was predicted to be, or `None` if scanned.
    expect: Vec<Option<usize>>,
    digests: Vec<Fingerprint>,
    stats: Stats,
}

/// The two-stage chunker with exact RapidCDC predictions; fingerprints every chunk itself
/// (handed over through [`CutPoint::take_fingerprints`]).
pub struct RapidFpt {
    inner: TwoStage,
    prev: Arc<PrevRecipes>,
    state: Mutex<State>,
}

impl RapidFpt {
    /// `file`: index (in `prev`) of this file's previous version, whose first chunk is
    /// predicted first; `None` starts by scanning.
    pub fn new(inner: TwoStage, prev: Arc<PrevRecipes>, file: Option<usize>) -> Self {
        let next = file
            .and_then(|f| prev.file_start.get(f).copied().flatten())
            .map(|i| i as usize);
        RapidFpt {
            inner,
            prev,
            state: Mutex::new(State {
                next,
                queue: VecDeque::new(),
                emitted: Vec::new(),
                ranges: Vec::new(),
                expect: Vec::new(),
                digests: Vec::new(),
                stats: Stats::default(),
            }),
        }
    }

    pub fn stats(&self) -> Stats {
        self.state.lock().unwrap().stats
    }

    /// Where previous chunk `i`, predicted to start at `s`, would end, if it may: the bytes
    /// are buffered, a file's last chunk only where this stream ends too, and a chunk ended
    /// by content only at a candidate (rolling-window test).
    fn predictable(&self, buf: &[u8], s: usize, i: usize, at_end: bool) -> Option<usize> {
        let p = &*self.prev;
        let len = p.lens[i] as usize;
        let e = s + len;
        let ok = e <= buf.len()
            && if p.last[i] {
                at_end && e == buf.len()
            } else {
                len >= self.inner.max_size() || self.inner.is_boundary(buf, e, len)
            };
        ok.then_some(e)
    }

    /// Decides up to BATCH chunks from `start`, hashes them together and queues those that
    /// stand (see the module documentation).
    fn refill(&self, buf: &[u8], start: usize, st: &mut State) {
        let p = &*self.prev;
        let max = self.inner.max_size();
        // `buf` ends the stream only when less than `max` is left (the CutPoint contract).
        let at_end = buf.len() - start < max;
        let can_cut = |s: usize| s < buf.len() && (s == start || at_end || buf.len() - s >= max);
        st.ranges.clear();
        st.expect.clear();
        let mut s = start;
        let mut next = st.next;
        while st.ranges.len() < BATCH {
            if let Some(i) = next.filter(|&i| i < p.len()) {
                if let Some(e) = self.predictable(buf, s, i, at_end) {
                    st.ranges.push((s, e - s));
                    st.expect.push(Some(i));
                    s = e;
                    next = (!p.last[i]).then_some(i + 1);
                    continue;
                }
                st.stats.rejected += 1;
            }
            if !can_cut(s) {
                break;
            }
            let e = self.inner.cut(buf, s);
            st.ranges.push((s, e - s));
            st.expect.push(None);
            next = p.by_len.get(&((e - s) as u32)).map(|&j| j as usize + 1);
            s = e;
        }
        if st.ranges.is_empty() {
            return;
        }
        st.digests.resize(st.ranges.len(), [0; 20]);
        // Lookup keys (plain SHA-1): an equal key means equal bytes (module `hash`).
        sha1_many(buf, &st.ranges, &mut st.digests);
        for k in 0..st.ranges.len() {
            let (from, len) = st.ranges[k];
            let fp = st.digests[k];
            let stands = match st.expect[k] {
                None => {
                    st.stats.scanned += 1;
                    true
                }
                Some(i) if fp == p.fps[i] => {
                    st.stats.predicted += 1;
                    true
                }
                Some(_) => {
                    st.stats.rejected += 1;
                    // Changed in place? Then scanning ends it where predicted, and `fp`,
                    // the hash of exactly those bytes, is its fingerprint.
                    let rescanned = can_cut(from) && self.inner.cut(buf, from) == from + len;
                    st.stats.scanned += rescanned as u64;
                    rescanned
                }
            };
            if !stands {
                // The rest was decided from a wrong end: decide it again from here.
                st.next = None;
                return;
            }
            st.queue.push_back((len, fp));
        }
        st.next = next.or_else(|| {
            let last = st.digests[st.ranges.len() - 1];
            p.followed.get(&last).map(|&i| i as usize + 1)
        });
    }
}

impl CutPoint for RapidFpt {
    fn max_size(&self) -> usize {
        self.inner.max_size()
    }
    fn history(&self) -> usize {
        self.inner.history()
    }

    fn cut(&self, buf: &[u8], start: usize) -> usize {
        let mut guard = self.state.lock().unwrap();
        let st = &mut *guard;
        // A refill that queued nothing (its first chunk was mispredicted) cleared the
        // prediction, so the next one starts by scanning and queues at least one chunk.
        while st.queue.is_empty() {
            self.refill(buf, start, st);
        }
        let (len, fp) = st.queue.pop_front().expect("a chunk was queued");
        st.emitted.push(fp);
        st.stats.chunks += 1;
        start + len
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

    /// A previous version: files chunked by the plain chunker.
    fn prev_of(files: &[Vec<u8>]) -> Arc<PrevRecipes> {
        let ts = TwoStage::default_config();
        let (mut fps, mut lens, mut counts) = (Vec::new(), Vec::new(), Vec::new());
        for f in files {
            let cs = chunk_all(&ts, f);
            counts.push(cs.len() as u32);
            for (o, l) in cs {
                fps.push(fingerprint(&f[o..o + l]));
                lens.push(l as u32);
            }
        }
        Arc::new(PrevRecipes::new(fps, lens, &counts).unwrap())
    }

    /// Chunks `data` through a stream fed `step`-byte blocks; (offset, len, fp) per chunk.
    fn run(
        prev: &Arc<PrevRecipes>,
        file: Option<usize>,
        data: &[u8],
        step: usize,
    ) -> (Vec<(usize, usize)>, Vec<Fingerprint>, Stats) {
        let mut st = ChunkStream::new(RapidFpt::new(
            TwoStage::default_config(),
            prev.clone(),
            file,
        ));
        let mut cuts = Vec::new();
        for b in data.chunks(step.max(1)) {
            st.push(b);
            cuts.extend(st.drain().map(|c| (c.offset as usize, c.len)));
        }
        st.finish();
        cuts.extend(st.drain().map(|c| (c.offset as usize, c.len)));
        let mut fps = Vec::new();
        st.cutter().take_fingerprints(&mut fps);
        (cuts, fps, st.cutter().stats())
    }

    fn check_exact(
        prev: &Arc<PrevRecipes>,
        file: Option<usize>,
        data: &[u8],
        step: usize,
    ) -> Stats {
        let plain = chunk_all(&TwoStage::default_config(), data);
        let (cuts, fps, stats) = run(prev, file, data, step);
        assert_eq!(cuts, plain, "cuts differ (step {step}, file {file:?})");
        let want: Vec<Fingerprint> = plain
            .iter()
            .map(|&(o, l)| fingerprint(&data[o..o + l]))
            .collect();
        assert_eq!(fps, want, "fingerprints differ (step {step})");
        stats
    }

    fn edited(v1: &[u8], seed: u64) -> Vec<u8> {
        let mut v2 = v1.to_vec();
        let mut x = seed | 1;
        for k in 0..6 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x as usize) % (v2.len() - 200);
            match k % 3 {
                0 => drop(v2.splice(at..at, b"inserted text".iter().copied())),
                1 => drop(v2.drain(at..at + 100)),
                _ => v2[at..at + 50].fill(b'#'),
            }
        }
        v2
    }

    #[test]
    fn identical_to_plain_on_edited_versions_and_mostly_predicted() {
        let v1 = test_text(51, 900_000);
        let prev = prev_of(std::slice::from_ref(&v1));
        for seed in 1..6 {
            let v2 = edited(&v1, seed);
            for step in [4096, 65_536, 1 << 20] {
                let s = check_exact(&prev, Some(0), &v2, step);
                assert!(s.predicted * 10 >= s.chunks * 7, "{s:?}");
            }
            // Without the same-path hint it finds the previous version after one scan batch.
            let s = check_exact(&prev, None, &v2, 1 << 20);
            assert!(s.predicted * 10 >= s.chunks * 7, "{s:?}");
        }
        // The unchanged file: all but the first scan-free.
        let s = check_exact(&prev, Some(0), &v1, 1 << 20);
        assert_eq!(s.predicted, s.chunks, "{s:?}");
    }

    #[test]
    fn identical_to_plain_on_unrelated_data_and_wrong_hints() {
        let v1 = test_text(52, 400_000);
        let prev = prev_of(&[
            v1.clone(),
            test_bytes(53, 70_000),
            Vec::new(),
            b"tiny".to_vec(),
        ]);
        for (seed, len) in [
            (54u64, 0usize),
            (55, 1),
            (56, 2047),
            (57, 2048),
            (58, 65_537),
            (59, 500_000),
        ] {
            let data = test_bytes(seed, len);
            for file in [None, Some(0), Some(1), Some(2), Some(3), Some(99)] {
                check_exact(&prev, file, &data, 10_000);
            }
        }
        // A truncated copy: the previous version's chunks run past the new end.
        check_exact(&prev, Some(0), &v1[..123_456], 4096);
        // A copy that continues past the previous file's end (its last chunk must not be
        // predicted as a cut: more bytes follow).
        let mut longer = v1.clone();
        longer.extend_from_slice(&test_text(60, 50_000));
        check_exact(&prev, Some(0), &longer, 8192);
        // The tiny file and a file equal to one the previous version ended with.
        check_exact(&prev, Some(3), b"tiny", 1);
        check_exact(&prev, Some(1), &test_bytes(53, 70_000), 1000);
    }

    #[test]
    fn repeated_content_and_max_size_chunks() {
        // Long runs without candidates produce max-size chunks; repeats map one
        // fingerprint to many places.
        let mut v1 = vec![0u8; 300_000];
        v1.extend_from_slice(&test_text(61, 200_000));
        v1.extend_from_slice(&test_text(61, 200_000));
        let prev = prev_of(std::slice::from_ref(&v1));
        let mut v2 = v1.clone();
        v2.splice(250_000..250_000, test_bytes(62, 3000));
        for step in [1, 777, 65_536, 1 << 20] {
            check_exact(&prev, Some(0), &v2, step);
        }
    }

    #[test]
    fn rejects_inconsistent_hints() {
        assert!(PrevRecipes::new(vec![[0; 20]], vec![5, 6], &[1]).is_err());
        assert!(PrevRecipes::new(vec![[0; 20]], vec![5], &[2]).is_err());
        assert!(PrevRecipes::new(vec![[0; 20]], vec![0], &[1]).is_err());
        let p = PrevRecipes::new(vec![[1; 20], [2; 20]], vec![5, 6], &[0, 2, 0]).unwrap();
        assert_eq!((p.len(), p.files()), (2, 3));
    }
}
