//! Chunk fingerprints: SHA-1 (FIPS 180-4).
//!
//! The RustCrypto `sha1` crate is the reference implementation; every faster path in this
//! module must produce identical digests to it.
//!
//! [`multi::sha1_many`] hashes a batch of chunks four at a time in SIMD lanes (simd128 in
//! Wasm, portable 4-lane arrays natively): one contiguous buffer, an `(offset, length)` per
//! chunk, 20 bytes out per chunk.

mod lanes;
pub mod multi;

pub use multi::{sha1_many, sha1_many_flat};

use sha1::{Digest, Sha1};

/// Length of a fingerprint in bytes.
pub const FINGERPRINT_LEN: usize = 20;

/// A chunk fingerprint.
pub type Fingerprint = [u8; FINGERPRINT_LEN];

/// SHA-1 of one whole message.
pub fn sha1(data: &[u8]) -> Fingerprint {
    Sha1::digest(data).into()
}

/// SHA-1 of a message that arrives in blocks of any size.
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
            to_hex(&sha1(b"")),
            "da39a3ee5e6b4b0d3255bfef95601890afd80709"
        );
        assert_eq!(
            to_hex(&sha1(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
    }

    #[test]
    fn streaming_matches_one_shot_for_every_split() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 31 % 251) as u8).collect();
        let whole = sha1(&data);
        for split in [0, 1, 55, 56, 63, 64, 65, 500, 999, 1000] {
            let mut s = StreamingSha1::new();
            s.update(&data[..split]);
            s.update(&data[split..]);
            assert_eq!(s.finish(), whole, "split at {split}");
        }
    }
}
