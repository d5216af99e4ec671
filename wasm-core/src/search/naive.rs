//! The naive search: the oracle for DedupSearch and the baseline it is measured against.
//!
//! Each file is reassembled from its chunks in order and scanned from start to end with the
//! same [`Automaton`](super::automaton::Automaton), so a chunk that is referenced by many
//! files is read and scanned many times — the cost DedupSearch avoids.
//!
//! Keywords that straddle chunk borders are caught by carrying context across the border.
//! The paper's implementation prepends the previous chunk's last `n - 1` bytes to the next
//! chunk; we carry the automaton *state* instead, which is the same information (the state
//! is a function of at most the last `n_max - 1` bytes read, unless a full keyword just ended)
//! without copying bytes or rescanning them. Results are identical to scanning the whole
//! concatenated file.

use super::{Dictionary, Match, Mode};

/// Scans whole files chunk by chunk.
pub struct NaiveSearch<'d> {
    dict: &'d Dictionary,
    mode: Mode,
    done: Vec<bool>,
    /// Bytes scanned so far (logical bytes).
    pub bytes: u64,
}

impl<'d> NaiveSearch<'d> {
    pub fn new(dict: &'d Dictionary, mode: Mode) -> Self {
        NaiveSearch {
            dict,
            mode,
            done: vec![false; dict.keywords.len()],
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
        let ac = &self.dict.forward;
        let files_only = self.mode == Mode::FilesOnly;
        self.done.iter_mut().for_each(|d| *d = false);
        let mut remaining = self.done.len();
        let mut state = ac.start();
        let mut pos: u64 = 0;
        for chunk in chunks {
            let done = &mut self.done;
            state = ac.scan(state, chunk, |kw, end| {
                if files_only {
                    if done[kw as usize] {
                        return;
                    }
                    done[kw as usize] = true;
                    remaining -= 1;
                }
                out.push(Match {
                    file,
                    keyword: kw,
                    offset: pos + end as u64 - ac.keyword_len(kw) as u64,
                });
            });
            pos += chunk.len() as u64;
            self.bytes += chunk.len() as u64;
            if files_only && remaining == 0 {
                break;
            }
        }
    }
}
