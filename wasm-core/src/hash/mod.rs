//! Chunk fingerprints: SHA-1 with collision detection, in "safe hash" mode.
//!
//! A fingerprint names a chunk everywhere: the dedup index, bundles, recipes, the server's
//! containers. Two different chunks with one fingerprint would be one stored chunk, and a
//! restore would silently return the other chunk's bytes. Plain SHA-1 allows exactly that:
//! Stevens, Bursztein, Karpman, Albertini and Markov, "The first collision for full SHA-1"
//! (CRYPTO 2017, the SHAttered PDFs) built two different files with one SHA-1, and any chunk
//! that holds their colliding blocks plus common bytes collides too.
//!
//! [`fingerprint`] is therefore SHA-1 computed with Marc Stevens' counter-cryptanalysis
//! ("Counter-cryptanalysis", CRYPTO 2013; the `sha1-checked` crate, the algorithm of Git's
//! sha1dc): every 64-byte block is tested for being one half of a near-collision built with
//! one of the known disturbance vectors. For ordinary data no block trips the test and the
//! fingerprint is exactly SHA-1 (FIPS 180-4), so fingerprints stored before collision
//! detection stay valid. When a block does trip it, the safe-hash mode compresses that block
//! three times instead of once, so each half of a colliding pair gets its own fingerprint,
//! different from the shared SHA-1 and from each other. (Git refuses such objects instead;
//! a backup must keep the bytes, so it takes the safe hash.) The browser and the server
//! both compute fingerprints with this module, so they agree on every chunk.
//!
//! The detection runs one message at a time. [`multi::sha1_many`] (four messages in SIMD
//! lanes) computes plain SHA-1 only and therefore is not a fingerprint: it stays as the
//! measured baseline for the detection's cost (docs/BENCHMARKS.md).

mod lanes;
pub mod multi;

pub use multi::{sha1_many, sha1_many_flat};

use sha1::{Digest, Sha1};
use sha1_checked::CollisionResult;

/// Length of a fingerprint in bytes.
pub const FINGERPRINT_LEN: usize = 20;

/// A chunk fingerprint.
pub type Fingerprint = [u8; FINGERPRINT_LEN];

/// A fingerprint computation over a message that may arrive in pieces.
#[derive(Clone)]
pub struct Fingerprinter {
    inner: sha1_checked::Sha1,
}

impl Default for Fingerprinter {
    fn default() -> Self {
        Self::new()
    }
}

impl Fingerprinter {
    pub fn new() -> Self {
        Fingerprinter {
            inner: sha1_checked::Sha1::builder()
                .detect_collision(true)
                .safe_hash(true)
                .use_ubc(true)
                .build(),
        }
    }

    pub fn update(&mut self, piece: &[u8]) {
        sha1_checked::Digest::update(&mut self.inner, piece);
    }

    /// The fingerprint, and whether a block of the message was part of a collision attack
    /// (then the fingerprint is the safe hash, not SHA-1).
    pub fn finish_checked(self) -> (Fingerprint, bool) {
        match self.inner.try_finalize() {
            CollisionResult::Ok(h) => (h.into(), false),
            CollisionResult::Mitigated(h) | CollisionResult::Collision(h) => (h.into(), true),
        }
    }

    pub fn finish(self) -> Fingerprint {
        self.finish_checked().0
    }
}

/// The fingerprint of one chunk.
pub fn fingerprint(data: &[u8]) -> Fingerprint {
    let mut f = Fingerprinter::new();
    f.update(data);
    f.finish()
}

/// Fingerprints of many chunks, given as `(offset, length)` ranges of one buffer; 20 bytes
/// per chunk written to `out` in order. Panics if a range lies outside `buf` or `out` is
/// shorter than 20 bytes per range.
pub fn fingerprint_many_flat(buf: &[u8], ranges: &[(usize, usize)], out: &mut [u8]) {
    assert!(
        out.len() >= ranges.len() * FINGERPRINT_LEN,
        "output shorter than the batch"
    );
    for (d, &(off, len)) in out.chunks_exact_mut(FINGERPRINT_LEN).zip(ranges) {
        d.copy_from_slice(&fingerprint(&buf[off..off + len]));
    }
}

/// Same as [`fingerprint_many_flat`], one [`Fingerprint`] per range.
pub fn fingerprint_many(buf: &[u8], ranges: &[(usize, usize)], out: &mut [Fingerprint]) {
    fingerprint_many_flat(buf, ranges, out.as_flattened_mut())
}

/// Plain SHA-1 (FIPS 180-4) of a whole file, streamed: the file checksum the Fingerprints
/// tab shows, comparable with `sha1sum`. Never a chunk fingerprint (use [`Fingerprinter`]).
#[derive(Default, Clone)]
pub struct StreamingSha1 {
    inner: Sha1,
}

impl StreamingSha1 {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn update(&mut self, block: &[u8]) {
        self.inner.update(block);
    }

    pub fn finish(self) -> Fingerprint {
        self.inner.finalize().into()
    }
}

/// Lower-case hex of a fingerprint, the form used in the HTTP API and manifests.
pub fn to_hex(fp: &Fingerprint) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(FINGERPRINT_LEN * 2);
    for b in fp {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        assert_eq!(
            to_hex(&fingerprint(b"")),
            "da39a3ee5e6b4b0d3255bfef95601890afd80709"
        );
        assert_eq!(
            to_hex(&fingerprint(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
    }

    #[test]
    fn streaming_matches_one_shot_for_every_split() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 31 % 251) as u8).collect();
        let whole = fingerprint(&data);
        for split in [0, 1, 55, 56, 63, 64, 65, 500, 999, 1000] {
            let mut f = Fingerprinter::new();
            f.update(&data[..split]);
            f.update(&data[split..]);
            assert_eq!(f.finish(), whole, "split at {split}");
            let mut s = StreamingSha1::new();
            s.update(&data[..split]);
            s.update(&data[split..]);
            assert_eq!(s.finish(), whole, "plain SHA-1, split at {split}");
        }
    }
}
