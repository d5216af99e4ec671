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
//! # Lookup keys: plain SHA-1 where no chunk is stored
//!
//! The detection runs one message at a time, several times slower than [`multi::sha1_many`]
//! (plain SHA-1 of four messages in SIMD lanes). The backup workers therefore hash every
//! chunk with [`lookup_keys_flat`] (plain SHA-1) and look that key up (the known set, the
//! client index, the server's `chunks/missing`); only a chunk that is going to be uploaded
//! is [confirmed](confirm_flat): its fingerprint is computed, and where it differs from the
//! key (the chunk holds a collision-attack block) the fingerprint replaces the key in the
//! upload and the recipe, and is looked up in turn. A chunk found under its key is
//! recorded under that key. That is exact, for this reason:
//!
//! - Every stored chunk was verified by the server with [`fingerprint`] (and `check`
//!   verifies it again), so no chunk holding an attack block is stored under its plain
//!   SHA-1: a key `X` found stored names a chunk `C` whose fingerprint is `X` and whose
//!   blocks tripped no detection.
//! - Suppose a chunk `C' != C` has plain SHA-1 `X`. Then `(C, C')` is a SHA-1 collision.
//!   Counter-cryptanalysis detects *both* messages of a collision built with the known
//!   disturbance vectors, so `C` would have tripped the detection: contradiction. The
//!   remaining ways to get `C'` are a second preimage of `X` (infeasible for SHA-1) or a
//!   collision from a yet unknown disturbance vector, which plain fingerprints cannot stop
//!   either. A key also never equals a safe-hash fingerprint of an attack chunk, short of a
//!   preimage.
//! - The same holds for a set of known fingerprints kept on the client, provided it holds
//!   only fingerprints (confirmed keys, or keys of chunks found stored), never the plain
//!   SHA-1 of a chunk whose fingerprint differs from it.
//!
//! So a key that is found stands for exactly the chunk stored under it, and every chunk
//! that is stored is stored under its fingerprint. The server's verification of uploads and
//! `check` always compute [`fingerprint`].
//!
//! # Reads: plain SHA-1 first
//!
//! The same argument makes reads cheap. A reader that holds bytes claimed to be the stored
//! chunk named `X` (a restore, the server answering `chunks/get`, a delta's base) checks
//! them with [`is_stored_chunk`]: plain SHA-1 first, and [`fingerprint`] only when that
//! differs. If the plain SHA-1 is `X`, the bytes are the stored chunk `C`: either `C`'s
//! fingerprint is its plain SHA-1 (no attack block in `C`, so bytes `C' != C` with that SHA-1
//! would be a collision detection misses, as above), or `X` is `C`'s safe hash, which no
//! plain SHA-1 reaches short of a preimage. If it is not `X`, the fingerprint decides, which
//! is how a stored attack chunk (named by its safe hash) verifies. Only names of *stored*
//! chunks may be checked so: an upload's name is what is being proven, so ingest computes
//! the fingerprint, and so does `check`, which also proves that every stored chunk is
//! stored under its fingerprint.

mod lanes;
pub mod multi;

pub use multi::{sha1_many, sha1_many_flat};

use sha1::{Digest, Sha1};
use sha1_checked::CollisionResult;

/// Length of a fingerprint in bytes.
pub const FINGERPRINT_LEN: usize = 20;

/// A chunk fingerprint.
pub type Fingerprint = [u8; FINGERPRINT_LEN];

/// Hashes a [`Fingerprint`] key by its first 8 bytes: fingerprints are SHA-1 values, spread
/// evenly already, so a keyed hash (std's SipHash) only adds work, and code: every table
/// lookup inlines the hash, and the browser compiles what a restore or a search runs while
/// it runs. Keys an adversary picks (equal first bytes) make lookups slow, never wrong; each
/// table here holds fingerprints of one request, answer or repository.
#[derive(Default, Clone, Copy)]
pub struct FpHasher(u64);

impl std::hash::Hasher for FpHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut b = [0u8; 8];
        let n = bytes.len().min(8);
        b[..n].copy_from_slice(&bytes[..n]);
        self.0 ^= u64::from_le_bytes(b);
    }
    /// An array's length prefix: the same for every fingerprint.
    fn write_usize(&mut self, _: usize) {}
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A set of fingerprints hashed by [`FpHasher`].
pub type FpSet = std::collections::HashSet<Fingerprint, std::hash::BuildHasherDefault<FpHasher>>;
/// A map keyed by fingerprints hashed by [`FpHasher`].
pub type FpMap<V> =
    std::collections::HashMap<Fingerprint, V, std::hash::BuildHasherDefault<FpHasher>>;

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

/// The lookup key (plain SHA-1) of one chunk, for chunkers that need it as they cut
/// (RapidCDC); a chunk to be stored must be confirmed first, as for [`lookup_keys_flat`].
pub fn lookup_key(data: &[u8]) -> Fingerprint {
    Sha1::digest(data).into()
}

/// Lookup keys (plain SHA-1, 4-lane SIMD) of many chunks, given as `(offset, length)`
/// ranges of one buffer; 20 bytes per chunk written to `out` in order. A key stands for the
/// chunk only where it is found stored; a chunk to be stored must be confirmed first
/// ([`confirm_flat`]; the module documentation says why).
pub fn lookup_keys_flat(buf: &[u8], ranges: &[(usize, usize)], out: &mut [u8]) {
    sha1_many_flat(buf, ranges, out)
}

/// Confirms the chunks `which` (indices into `ranges`): replaces each one's lookup key in
/// `keys` (20 bytes per range, from [`lookup_keys_flat`]) by its [`fingerprint`]. Returns
/// how many keys changed, i.e. how many of the chunks hold a collision-attack block (0 for
/// ordinary data). Fails, leaving `keys` untouched, if an index is out of range or `keys`
/// is shorter than 20 bytes per range.
pub fn confirm_flat(
    buf: &[u8],
    ranges: &[(usize, usize)],
    which: &[u32],
    keys: &mut [u8],
) -> Result<usize, String> {
    if keys.len() < ranges.len() * FINGERPRINT_LEN {
        return Err("confirm: fewer keys than chunks".into());
    }
    if let Some(&i) = which.iter().find(|&&i| i as usize >= ranges.len()) {
        return Err(format!(
            "confirm: no chunk {i} (the batch has {})",
            ranges.len()
        ));
    }
    let mut changed = 0;
    for &i in which {
        let (off, len) = ranges[i as usize];
        let fp = fingerprint(&buf[off..off + len]);
        let key = &mut keys[i as usize * FINGERPRINT_LEN..][..FINGERPRINT_LEN];
        if key != fp {
            key.copy_from_slice(&fp);
            changed += 1;
        }
    }
    Ok(changed)
}

/// Whether `data` is the stored chunk named `fp` (a fingerprint under which a chunk was
/// stored): its plain SHA-1 is `fp`, or else its [`fingerprint`] is (the module
/// documentation, "Reads", says why that is exact). Never for an upload's claimed name.
pub fn is_stored_chunk(data: &[u8], fp: &Fingerprint) -> bool {
    lookup_key(data) == *fp || fingerprint(data) == *fp
}

/// [`is_stored_chunk`] for many chunks, given as `(offset, length)` ranges of one buffer with
/// their names in `fps` (20 bytes each, in order): the first chunk that is not the stored
/// chunk it is named as, with its fingerprint; `None` when every one is. The plain SHA-1 is
/// [`lookup_keys_flat`]'s, four chunks at a time in SIMD lanes (the restore workers' batches;
/// a native reader checks one chunk at a time with [`is_stored_chunk`], whose `sha1` crate
/// uses the CPU's SHA instructions). Panics if a range lies outside `buf` or `fps` is shorter
/// than 20 bytes per range.
pub fn first_not_stored_flat(
    buf: &[u8],
    ranges: &[(usize, usize)],
    fps: &[u8],
) -> Option<(usize, Fingerprint)> {
    not_stored_flat(buf, ranges, fps).next()
}

/// Every chunk that [`first_not_stored_flat`] would find, in order, with its fingerprint:
/// for a reader that drops the chunks that fail and keeps the others. Panics as
/// [`first_not_stored_flat`] does.
pub fn not_stored_flat<'a>(
    buf: &'a [u8],
    ranges: &'a [(usize, usize)],
    fps: &'a [u8],
) -> impl Iterator<Item = (usize, Fingerprint)> + 'a {
    assert!(
        fps.len() >= ranges.len() * FINGERPRINT_LEN,
        "fewer names than chunks"
    );
    let mut keys = vec![0u8; ranges.len() * FINGERPRINT_LEN];
    lookup_keys_flat(buf, ranges, &mut keys);
    (0..ranges.len()).filter_map(move |k| {
        let want = &fps[k * FINGERPRINT_LEN..(k + 1) * FINGERPRINT_LEN];
        if keys[k * FINGERPRINT_LEN..(k + 1) * FINGERPRINT_LEN] == *want {
            return None;
        }
        let (off, len) = ranges[k];
        let fp = fingerprint(&buf[off..off + len]);
        (fp != want).then_some((k, fp))
    })
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
