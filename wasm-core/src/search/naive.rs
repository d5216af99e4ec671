//! The naive search: the oracle for DedupSearch and the baseline it is measured against.
//!
//! Each file is reassembled from its chunks in order and scanned from start to end with the
//! same [`Automaton`](super::automaton::Automaton), so a chunk that is referenced by many
//! files is read and scanned many times — the cost DedupSearch avoids.
//!
//! Keywords that straddle chunk borders are caught as in the paper's implementation, by
//! carrying the last `n_max - 1` bytes of the file so far: the window `carry + first n_max - 1
//! bytes of the chunk` is scanned for matches that start in the carry, and the chunk itself
//! is searched on its own ([`Automaton::find_all`](super::automaton::Automaton::find_all):
//! SIMD substring search for one keyword, the DFA otherwise). Results are identical to
//! scanning the whole concatenated file.

use super::{Dictionary, Match, Mode};

/// Scans whole files chunk by chunk.
pub struct NaiveSearch {
    dict: Dictionary,
    mode: Mode,
    done: Vec<bool>,
    remaining: usize,
    file: u64,
    /// Offset in the current file of the next chunk.
    pos: u64,
    carry: Vec<u8>,
    window: Vec<u8>,
    /// Bytes scanned so far (logical bytes).
    pub bytes: u64,
}

impl NaiveSearch {
    pub fn new(dict: &Dictionary, mode: Mode) -> Self {
        NaiveSearch {
            dict: dict.clone(),
            mode,
            done: vec![false; dict.inner.keywords.len()],
            remaining: 0,
            file: 0,
            pos: 0,
            carry: Vec::new(),
            window: Vec::new(),
            bytes: 0,
        }
    }

    /// Appends the matches of one file, given its chunks' bytes in order, to `out`. In
    /// [`Mode::FilesOnly`] only the first match per keyword is kept and the scan stops once
    /// every keyword was found.
    pub fn search_file<'c>(
        &mut self,
        file: u64,
        chunks: impl IntoIterator<Item = &'c [u8]>,
        out: &mut Vec<Match>,
    ) {
        self.begin_file(file);
        for chunk in chunks {
            if !self.feed(chunk, out) {
                break;
            }
        }
    }

    /// Starts file `file`; its chunks follow through [`NaiveSearch::feed`] (streaming form of
    /// [`NaiveSearch::search_file`], for callers that receive a file's chunks in batches).
    pub fn begin_file(&mut self, file: u64) {
        self.file = file;
        self.pos = 0;
        self.carry.clear();
        self.done.iter_mut().for_each(|d| *d = false);
        self.remaining = self.done.len();
    }

    /// Scans the file's next chunk and appends its matches to `out`. Returns `false` once
    /// [`Mode::FilesOnly`] has found every keyword: the rest of the file need not be fed.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Match>) -> bool {
        let ac = &self.dict.inner.forward;
        let keep = self.dict.inner.max_len - 1;
        let files_only = self.mode == Mode::FilesOnly;
        if files_only && self.remaining == 0 {
            return false;
        }
        let (file, pos) = (self.file, self.pos);
        let done = &mut self.done;
        let remaining = &mut self.remaining;
        let mut emit = |kw: u32, offset: u64| {
            if files_only {
                if done[kw as usize] {
                    return;
                }
                done[kw as usize] = true;
                *remaining -= 1;
            }
            out.push(Match {
                file,
                keyword: kw,
                offset,
            });
        };
        // Matches that start in the carried bytes and end in this chunk.
        let c = self.carry.len();
        if c > 0 {
            self.window.clear();
            self.window.extend_from_slice(&self.carry);
            self.window
                .extend_from_slice(&chunk[..chunk.len().min(keep)]);
            let base = pos - c as u64;
            ac.scan(ac.start(), &self.window, |kw, end| {
                let start = end - ac.keyword_len(kw);
                if start < c && end > c {
                    emit(kw, base + start as u64);
                }
            });
        }
        // Matches inside the chunk.
        ac.find_all(chunk, |kw, at| emit(kw, pos + at as u64));
        self.pos += chunk.len() as u64;
        self.bytes += chunk.len() as u64;
        if files_only && self.remaining == 0 {
            return false;
        }
        // Keep the last n_max - 1 bytes of the file so far.
        if chunk.len() >= keep {
            self.carry.clear();
            self.carry.extend_from_slice(&chunk[chunk.len() - keep..]);
        } else {
            self.carry.extend_from_slice(chunk);
            let excess = self.carry.len().saturating_sub(keep);
            self.carry.drain(..excess);
        }
        true
    }
}
