//! Trained dictionaries as shared delta bases, for the chunks the delta pass leaves whole.
//!
//! DARE (§3.3) pairs a chunk with one similar stored chunk; most of the chunks a repository's
//! first version stores find none, and each is then compressed alone, in a zstd frame whose
//! window starts empty. Yet they share much with the other chunks of their version: the
//! identifiers, keywords and idioms of one code base. zstd's dictionary builder (fastCOVER,
//! `ZDICT_trainFromBuffer`) picks the segments that recur most across a set of samples; this
//! module trains one over the chunks a pass leaves whole and stores it as one more chunk,
//! then each of those chunks becomes a codec-2 delta against it where that pays (encoded by
//! `wasm_core::resemble::delta::SharedBaseEncoder`, which builds the dictionary's match
//! tables once for all of them).
//!
//! No format changes (docs/FORMAT.md, "Codec 2: delta"): the dictionary is an ordinary whole
//! chunk (codec 1, its fingerprint the SHA-1 of its bytes) that no manifest names, and its
//! deltas decode like any other, against its raw bytes as a prefix. It lives as long as a
//! delta needs it, like any base: the layout and the sweep follow base edges
//! (docs/STORAGE.md, "Delta pass"). What it gives, against one frame per chunk and against
//! shared compression frames, is in docs/BENCHMARKS.md ("Trained dictionaries").

use wasm_core::{
    compress::{Compressor, CODEC_ZSTD},
    format::bundle::MAX_CHUNK_RAW,
    hash::{fingerprint, Fingerprint},
    resemble::delta::{SharedBaseEncoder, CODEC_DELTA},
};

use super::{delta::DecodeBack, recompress::MIN_GAIN};

/// zstd level of the dictionary's own stored copy (one chunk, compressed once).
const DICTIONARY_LEVEL: i32 = 19;

/// zstd level of the deltas against a dictionary: from 16 on, zstd's optimal parsing finds
/// much more in a large dictionary than level 12 does, for about twice its time; level 19
/// saves little more for over twice that again (docs/BENCHMARKS.md, "Trained dictionaries").
const DELTA_LEVEL: i32 = 16;

/// A trained dictionary about to be stored: its fingerprint, raw length and stored bytes
/// (codec 1).
pub struct Dictionary {
    pub fp: Fingerprint,
    pub raw_len: u32,
    pub stored: Vec<u8>,
}

/// A trained dictionary ready to encode chunks against.
pub struct Shared {
    raw: Vec<u8>,
    dictionary: Dictionary,
    /// Trained now, so to be stored; else one the repository holds already.
    new: bool,
    enc: SharedBaseEncoder,
}

impl Shared {
    /// Trains a dictionary on `samples` (see [`train`]) and prepares it; `None` if there
    /// is nothing to learn or it does not compress.
    pub fn train<S: AsRef<[u8]>>(samples: &[S]) -> Option<Shared> {
        let raw = train(samples)?;
        let fp = fingerprint(&raw);
        let mut zc = Compressor::new(DICTIONARY_LEVEL).ok()?;
        let (codec, stored) = zc.compress(&raw);
        if codec != CODEC_ZSTD {
            return None;
        }
        let dictionary = Dictionary {
            fp,
            raw_len: raw.len() as u32,
            stored: stored.to_vec(),
        };
        Shared::prepare(raw, dictionary, true)
    }

    /// A dictionary the repository stores already (chunk `fp`, raw bytes `raw`): a later
    /// version's chunks share much with the version it was trained on, at no new cost.
    pub fn existing(fp: Fingerprint, raw: Vec<u8>) -> Option<Shared> {
        let dictionary = Dictionary {
            fp,
            raw_len: raw.len() as u32,
            stored: Vec::new(),
        };
        Shared::prepare(raw, dictionary, false)
    }

    fn prepare(raw: Vec<u8>, dictionary: Dictionary, new: bool) -> Option<Shared> {
        Some(Shared {
            enc: SharedBaseEncoder::new(&dictionary.fp, &raw, DELTA_LEVEL).ok()?,
            raw,
            dictionary,
            new,
        })
    }

    /// The stored bytes it adds: its own if it is new, else none.
    pub fn cost(&self) -> i64 {
        if self.new {
            self.dictionary.stored.len() as i64
        } else {
            0
        }
    }

    /// The chunk `raw`, stored in `now` bytes today, as a delta against the dictionary at
    /// [`DELTA_LEVEL`], if that saves at least [`MIN_GAIN`] of them; decoded back by `back`
    /// and compared before it is offered.
    pub fn encode(&mut self, back: &mut DecodeBack, raw: &[u8], now: u32) -> Option<Vec<u8>> {
        let payload = self.enc.encode(raw).ok()?;
        if payload.len() as f64 > now as f64 * (1.0 - MIN_GAIN) {
            return None;
        }
        let base = (&self.dictionary.fp, self.raw.as_slice());
        back.check(CODEC_DELTA, payload.to_vec(), Some(base), raw)
    }

    /// The dictionary's fingerprint.
    pub fn fp(&self) -> Fingerprint {
        self.dictionary.fp
    }

    /// The dictionary to store, if it is new.
    pub fn into_new(self) -> Option<Dictionary> {
        self.new.then_some(self.dictionary)
    }
}

/// The smallest stored dictionary a later pass tries again (dictionaries are at least
/// 64 KiB but for their header; ordinary chunks are much smaller).
pub const MIN_EXISTING: usize = 32 << 10;

/// Below this many raw bytes of whole chunks a dictionary costs more than it saves.
pub const MIN_SAMPLE_BYTES: usize = 1 << 20;

/// The most raw bytes the builder reads (an even selection of the chunks beyond it,
/// [`sample_step`]): its time grows with them, its gain much less.
const MAX_SAMPLE_BYTES: usize = 32 << 20;

/// Every how many chunks, of `total` raw bytes in all, a sample is taken.
pub fn sample_step(total: usize) -> usize {
    total.div_ceil(MAX_SAMPLE_BYTES).max(1)
}

/// A dictionary's size: an eighth of the samples, between 64 KiB and the chunk size limit
/// (a dictionary is a chunk). Larger dictionaries save more on large versions; on small
/// ones they cost more than they save (docs/BENCHMARKS.md, "Trained dictionaries").
fn dictionary_size(sample_bytes: usize) -> usize {
    (sample_bytes / 8).clamp(64 << 10, MAX_CHUNK_RAW as usize - 64)
}

/// The bytes a structured zstd dictionary starts with (magic and id): dropped, so that what
/// is stored is content only (a shared base may not start with the magic).
const HEADER_SKIP: usize = 8;

/// Trains a dictionary on `samples` (raw chunks, every [`sample_step`]-th of a pass's,
/// read up to [`MAX_SAMPLE_BYTES`]); `None` when they are too few or the builder finds
/// nothing to learn. The result is raw content for a base: at most [`MAX_CHUNK_RAW`] bytes.
fn train<S: AsRef<[u8]>>(samples: &[S]) -> Option<Vec<u8>> {
    let total: usize = samples.iter().map(|s| s.as_ref().len()).sum();
    if total < MIN_SAMPLE_BYTES {
        return None;
    }
    let mut data = Vec::with_capacity(total.min(MAX_SAMPLE_BYTES));
    let mut sizes = Vec::new();
    for s in samples.iter().map(|s| s.as_ref()) {
        if data.len() + s.len() > MAX_SAMPLE_BYTES {
            break;
        }
        if !s.is_empty() {
            data.extend_from_slice(s);
            sizes.push(s.len());
        }
    }
    let dict = zstd::dict::from_continuous(&data, &sizes, dictionary_size(data.len())).ok()?;
    let content = dict.get(HEADER_SKIP..)?;
    (!content.is_empty() && content.len() <= MAX_CHUNK_RAW as usize).then(|| content.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::recompress::tests::text_seeded;

    #[test]
    fn trains_content_within_the_chunk_limit_or_nothing() {
        let few: Vec<Vec<u8>> = (0..10).map(|i| text_seeded(i, 8 << 10)).collect();
        assert!(train(&few).is_none(), "below MIN_SAMPLE_BYTES");
        let many: Vec<Vec<u8>> = (0..400).map(|i| text_seeded(i, 8 << 10)).collect();
        let d = train(&many).expect("a dictionary");
        assert!(!d.is_empty() && d.len() <= MAX_CHUNK_RAW as usize);
        assert!(!d.starts_with(&0xEC30_A437u32.to_le_bytes()));
        assert_eq!(dictionary_size(1 << 20), 128 << 10);
        assert_eq!(dictionary_size(100 << 10), 64 << 10);
        assert_eq!(dictionary_size(1 << 30), MAX_CHUNK_RAW as usize - 64);
    }
}
