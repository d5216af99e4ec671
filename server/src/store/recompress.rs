//! Recompression of new chunks at a higher zstd level, after their commit.
//!
//! The browser compresses every new chunk at a fast level ([`wasm_core::compress::DEFAULT_LEVEL`])
//! because compression sits on the upload path, where the user waits. The server has time
//! after the commit: the delta pass (`super::delta`) already reads every chunk that a
//! version stored for the first time, and the ones that stay whole (no similar base was
//! found) are compressed again here at [`LEVEL`] and re-stored when that pays. The result is
//! still one zstd frame per chunk (codec 1, "any level", docs/FORMAT.md), so no reader
//! changes and decoding costs what it did (zstd decodes at about the same speed whatever
//! the level). docs/STORAGE.md, "Delta pass", has where this runs; docs/BENCHMARKS.md the
//! levels measured.

use wasm_core::compress::{Compressor, CODEC_ZSTD};

use super::delta::DecodeBack;

/// The zstd level of the server's rewrite: past it, time grows much faster than the saving.
pub const LEVEL: i32 = 12;

/// A rewrite is kept only if it saves at least this fraction of the stored bytes: below,
/// the copy (and the compaction of the old one) costs more than it frees.
pub const MIN_GAIN: f64 = 0.03;

/// Reusable compressor of the rewrite.
pub struct Recompressor {
    enc: Compressor,
}

impl Recompressor {
    pub fn new() -> std::io::Result<Self> {
        Ok(Recompressor {
            enc: Compressor::new(LEVEL)?,
        })
    }

    /// The new stored bytes (codec 1) of a chunk whose raw bytes are `raw` and whose copy
    /// stores `stored_len` bytes, if they save at least [`MIN_GAIN`] of them. The frame is
    /// decoded back by `back` and compared with `raw` before it is offered, so a rewrite
    /// never replaces a good copy with a bad one.
    pub fn shrink(
        &mut self,
        back: &mut DecodeBack,
        raw: &[u8],
        stored_len: u32,
    ) -> Option<Vec<u8>> {
        let (codec, bytes) = self.enc.compress(raw);
        if codec != CODEC_ZSTD || bytes.len() as f64 > stored_len as f64 * (1.0 - MIN_GAIN) {
            return None;
        }
        back.check(CODEC_ZSTD, bytes.to_vec(), None, raw)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use wasm_core::compress::{Decompressor, DEFAULT_LEVEL};

    fn text(n: usize) -> Vec<u8> {
        text_seeded(7, n)
    }

    /// Code-like text: words of a small vocabulary in an order drawn from `seed`.
    pub(in crate::store) fn text_seeded(seed: u32, n: usize) -> Vec<u8> {
        let words = [
            "function ",
            "return ",
            "const ",
            "value",
            "(node)",
            " => ",
            "{\n",
            "}\n",
            "typeof ",
            "undefined",
            ";\n",
            "checker.",
            "getTypeOfSymbol",
            "if (",
            ") ",
        ];
        let mut x: u32 = seed | 1;
        let mut out = Vec::with_capacity(n + 32);
        while out.len() < n {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            out.extend_from_slice(words[x as usize % words.len()].as_bytes());
        }
        out.truncate(n);
        out
    }

    #[test]
    fn rewrites_a_fast_level_frame_smaller_and_decodable() {
        let raw = text(64 << 10);
        let mut fast = Compressor::new(DEFAULT_LEVEL).unwrap();
        let (codec, first) = fast.compress(&raw);
        assert_eq!(codec, CODEC_ZSTD);
        let first_len = first.len() as u32;
        let mut r = Recompressor::new().unwrap();
        let out = r
            .shrink(&mut DecodeBack::new().unwrap(), &raw, first_len)
            .expect("a higher level pays on text");
        assert!((out.len() as f64) <= first_len as f64 * (1.0 - MIN_GAIN));
        let mut d = Decompressor::new().unwrap();
        assert_eq!(d.decompress(CODEC_ZSTD, &out, raw.len()).unwrap(), &raw[..]);
    }

    #[test]
    fn keeps_the_copy_when_the_gain_is_small() {
        let raw = text(64 << 10);
        let mut r = Recompressor::new().unwrap();
        let b = &mut DecodeBack::new().unwrap();
        let best = r.shrink(b, &raw, u32::MAX).unwrap().len() as u32;
        // A copy already as small as the rewrite (or nearly) is left alone.
        assert!(r.shrink(b, &raw, best).is_none());
        assert!(r.shrink(b, &raw, best + best / 100).is_none());
    }

    #[test]
    fn leaves_incompressible_chunks_alone() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let raw: Vec<u8> = (0..32 << 10)
            .map(|_| {
                x ^= x << 7;
                x ^= x >> 9;
                x as u8
            })
            .collect();
        let mut r = Recompressor::new().unwrap();
        let b = &mut DecodeBack::new().unwrap();
        assert!(r.shrink(b, &raw, raw.len() as u32).is_none());
    }
}
