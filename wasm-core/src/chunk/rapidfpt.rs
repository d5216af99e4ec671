//! RapidCDC with the fingerprint test (Ni thesis ch. 3 §3.3.2, "FF+RWT+FPT" without the
//! rolling-window step), arranged so that its cuts are **exactly** the base chunker's.
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
//! fingerprint test checks exactly that: the SHA-1 of the predicted chunk must equal the
//! predicted (previous) chunk's. A previous file's last chunk was ended by the end of that
//! file, not by content; it is accepted only where this stream is known to end at the same
//! place (then the plain chunker also cuts there: no candidate lies inside). The SHA-1 is
//! the fingerprint the backup needs anyway, so an accepted prediction costs no scan and
//! no extra hash; a rejected one costs one wasted hash lane.
//!
//! Speed in Wasm: predictions are hashed [`PREDICT`] at a time with the multi-buffer SHA-1
//! (4 lanes hash 4 chunks in about the time of one), and chunks found by scanning are
//! hashed [`SCAN_BATCH`] at a time for the same reason; after such a batch the last chunk's
//! fingerprint is looked up to resume predicting.
//!
//! Oracle: `tests` below and `tests/engine_wasm.rs` check that the output equals the plain
//! chunker's on edited versions, random data and every block split.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::twostage::TwoStage;
use super::CutPoint;
use crate::hash::{sha1_many, Fingerprint};

/// Predicted chunks hashed together (two rounds of 4 lanes).
pub const PREDICT: usize = 8;
/// Chunks cut by scanning before their fingerprints are computed together (one round of
/// 4 lanes: small, so that predicting resumes soon after an edit).
pub const SCAN_BATCH: usize = 4;

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
        for (i, fp) in fps.iter().enumerate() {
            if !last[i] {
                followed.entry(*fp).or_insert(i as u32);
            }
        }
        Ok(PrevRecipes {
            fps,
            lens,
            last,
            file_start,
            followed,
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
    /// Predictions hashed and rejected.
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
                digests: Vec::new(),
                stats: Stats::default(),
            }),
        }
    }

    pub fn stats(&self) -> Stats {
        self.state.lock().unwrap().stats
    }

    /// Hashes `st.ranges` into `st.digests`.
    fn hash(buf: &[u8], st: &mut State) {
        st.digests.resize(st.ranges.len(), [0; 20]);
        sha1_many(buf, &st.ranges, &mut st.digests);
    }

    /// Queues the predicted chunks from `start` that pass the fingerprint test; returns
    /// how many.
    fn predict(&self, buf: &[u8], start: usize, st: &mut State) -> usize {
        let Some(first) = st.next else { return 0 };
        let p = &*self.prev;
        // The stream is known to end at `buf.len()` only when less than `max` is left
        // (the CutPoint contract); only then may a file's last chunk be predicted.
        let at_end = buf.len() - start < self.inner.max_size();
        st.ranges.clear();
        let mut s = start;
        let mut i = first;
        while st.ranges.len() < PREDICT && i < p.len() {
            let e = s + p.lens[i] as usize;
            if e > buf.len() || (p.last[i] && !(at_end && e == buf.len())) {
                break;
            }
            st.ranges.push((s, e - s));
            if p.last[i] {
                break;
            }
            s = e;
            i += 1;
        }
        if st.ranges.is_empty() {
            // Not enough bytes buffered to test it: keep the prediction for the next call.
            return 0;
        }
        Self::hash(buf, st);
        let mut ok = 0;
        while ok < st.ranges.len() && st.digests[ok] == p.fps[first + ok] {
            let (len, fp) = (st.ranges[ok].1, st.digests[ok]);
            st.queue.push_back((len, fp));
            ok += 1;
        }
        st.stats.predicted += ok as u64;
        st.stats.rejected += (ok < st.ranges.len()) as u64;
        let stopped_by_mismatch = ok < st.ranges.len();
        let ended_file = ok > 0 && p.last[first + ok - 1];
        st.next = (!stopped_by_mismatch && !ended_file).then_some(first + ok);
        ok
    }

    /// Cuts up to SCAN_BATCH chunks from `start` by scanning, queues them with their
    /// fingerprints, and resumes predicting after the last one if the previous version
    /// had a chunk following it.
    fn scan(&self, buf: &[u8], start: usize, st: &mut State) {
        let max = self.inner.max_size();
        let at_end = buf.len() - start < max;
        st.ranges.clear();
        let mut s = start;
        while st.ranges.len() < SCAN_BATCH && s < buf.len() {
            // Past the first chunk, a cut needs `max` bytes after its start unless the
            // stream is known to end here.
            if s > start && !at_end && buf.len() - s < max {
                break;
            }
            let e = self.inner.cut(buf, s);
            st.ranges.push((s, e - s));
            s = e;
        }
        Self::hash(buf, st);
        for k in 0..st.ranges.len() {
            let item = (st.ranges[k].1, st.digests[k]);
            st.queue.push_back(item);
        }
        st.stats.scanned += st.ranges.len() as u64;
        let last = st.digests[st.ranges.len() - 1];
        st.next = self.prev.followed.get(&last).map(|&i| i as usize + 1);
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
        if st.queue.is_empty() && self.predict(buf, start, st) == 0 {
            self.scan(buf, start, st);
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
    use crate::hash::sha1;

    /// A previous version: files chunked by the plain chunker.
    fn prev_of(files: &[Vec<u8>]) -> Arc<PrevRecipes> {
        let ts = TwoStage::default_config();
        let (mut fps, mut lens, mut counts) = (Vec::new(), Vec::new(), Vec::new());
        for f in files {
            let cs = chunk_all(&ts, f);
            counts.push(cs.len() as u32);
            for (o, l) in cs {
                fps.push(sha1(&f[o..o + l]));
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
        let want: Vec<Fingerprint> = plain.iter().map(|&(o, l)| sha1(&data[o..o + l])).collect();
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
