//! Warm-ups: synthetic work a fresh worker runs once, before its first real request, so that
//! the read paths (decoding, fingerprints, CRC-32, the search's scan) run in optimised code
//! when the real work comes.
//!
//! V8 runs new Wasm code in its baseline compiler and tiers a function up to its optimising
//! compiler only after the function has run for a while; the compiled module is shared by a
//! page's workers, and so is the optimised code. Without a warm-up, a first restore or search
//! in a fresh page decodes, hashes and scans its first chunks in baseline code while the
//! optimising compiler takes one of the cores that work needs. The backup engine warms its
//! own paths (chunking, fingerprints, compression: `web/src/worker/warmup.ts`); this module
//! holds the read side's: one synthetic set of stored chunks shaped as a restore's answers and
//! a search's ranges are (whole chunks in zstd, a delta against a whole chunk, members of a
//! frame stored as slices, that frame a delta against an older one, docs/FORMAT.md), which
//! [`restore`] verifies as a `chunks/get` bundle and the search binding scans as a container
//! range with the frames as fetched bases (`searchWarmUp`).

use crate::{
    compress,
    format::bundle::{BundleWriter, Codec},
    hash::{self, Fingerprint},
    resemble::{delta::DeltaEncoder, frame},
    restore::RestoreSession,
};

/// A stored chunk of the synthetic set.
pub struct Stored {
    pub fp: Fingerprint,
    pub codec: Codec,
    pub stored: Vec<u8>,
    pub raw_len: u32,
}

/// The synthetic set: `chunks` as a restore asks for them (or a search's range holds them),
/// then `links`, the base chain their deltas need (the frame first, then its older frame).
pub struct Synthetic {
    pub chunks: Vec<Stored>,
    pub links: Vec<Stored>,
}

impl Synthetic {
    /// Raw bytes of `chunks`.
    pub fn raw_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.raw_len as usize).sum()
    }
}

/// A member of the frame, and each whole chunk: 16 KiB (typical chunk sizes).
const MEMBER: usize = 16 << 10;

/// Text-like bytes: words of a small vocabulary (literals and matches, as source files
/// compress), from a seeded xorshift.
fn synthetic_text(seed: u32, len: usize) -> Vec<u8> {
    const WORDS: [&[u8]; 16] = [
        b"export ",
        b"function ",
        b"return ",
        b"const ",
        b"interface ",
        b"type ",
        b"string",
        b"number",
        b" => ",
        b"{\n",
        b"}\n",
        b"(node",
        b", ",
        b");\n",
        b"declare ",
        b"readonly ",
    ];
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.extend_from_slice(WORDS[(x & 15) as usize]);
        // An identifier-like run now and then, so that literals are not all from the words.
        if x & 0x300 == 0 {
            out.extend((0..((x >> 10) & 7) + 2).map(|i| b'a' + ((x >> (13 + i)) & 15) as u8));
        }
    }
    out.truncate(len);
    out
}

/// The synthetic set (a few milliseconds to build: 400 KiB of raw chunks).
pub fn synthetic() -> Synthetic {
    let old = synthetic_text(1, 16 * MEMBER);
    let mut new = old.clone();
    for i in (0..new.len()).step_by(5_000) {
        new[i] ^= 0x20;
    }
    let frame = frame::Frame::of(new.chunks(MEMBER));
    let (old_fp, frame_fp) = (hash::fingerprint(&old), hash::fingerprint(&frame.raw));
    let mut deltas = DeltaEncoder::new(3).expect("a zstd context");
    let mut zstd = compress::Compressor::new(3).expect("a zstd context");
    let mut whole = |raw: &[u8]| {
        let (codec, stored) = zstd.compress(raw);
        Stored {
            fp: hash::fingerprint(raw),
            codec: Codec::from_u8(codec).expect("a codec"),
            stored: stored.to_vec(),
            raw_len: raw.len() as u32,
        }
    };
    let mut delta = |raw: &[u8], base_fp: &Fingerprint, base: &[u8]| Stored {
        fp: hash::fingerprint(raw),
        codec: Codec::Delta,
        stored: deltas.encode(base_fp, base, raw).expect("a delta").to_vec(),
        raw_len: raw.len() as u32,
    };

    let mut chunks: Vec<Stored> = new
        .chunks(MEMBER)
        .zip(&frame.offsets)
        .map(|(m, &at)| Stored {
            fp: hash::fingerprint(m),
            codec: Codec::Delta,
            stored: frame::slice_payload(&frame_fp, at).to_vec(),
            raw_len: m.len() as u32,
        })
        .collect();
    let wholes: Vec<Vec<u8>> = (0..8).map(|i| synthetic_text(100 + i, MEMBER)).collect();
    chunks.extend(wholes.iter().map(|c| whole(c)));
    let mut edited = wholes[0].clone();
    edited[MEMBER / 2] ^= 0x20;
    chunks.push(delta(&edited, &hash::fingerprint(&wholes[0]), &wholes[0]));
    let links = vec![delta(&frame.raw, &old_fp, &old), whole(&old)];
    Synthetic { chunks, links }
}

/// `entries` as a `chunks/get` bundle.
pub fn bundle<'a>(entries: impl IntoIterator<Item = &'a Stored>) -> Vec<u8> {
    let mut w = BundleWriter::new();
    for e in entries {
        w.push(&e.fp, e.codec, e.raw_len, &e.stored);
    }
    w.finish()
}

/// Verifies the synthetic set as a restore's answer, `rounds` times, each in a fresh
/// [`RestoreSession`] (the restore workers' warm-up). Answers the raw bytes verified (0 if a
/// round was refused, which is a bug).
pub fn restore(rounds: u32) -> usize {
    let s = synthetic();
    let b = bundle(s.chunks.iter().chain(&s.links));
    let mut bytes = 0;
    for _ in 0..rounds {
        match RestoreSession::new().verify(&b, s.chunks.len()) {
            Ok((v, _)) => bytes += v.raw.len(),
            Err(_) => return 0,
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restore_warm_up_verifies_every_round() {
        let s = synthetic();
        // Its deltas are decoded, not sent whole: the bundle is a fraction of what it restores.
        let b = bundle(s.chunks.iter().chain(&s.links));
        assert!(
            b.len() * 3 < s.raw_bytes(),
            "{} for {}",
            b.len(),
            s.raw_bytes()
        );
        assert!(s.chunks.iter().any(|c| c.codec == Codec::Zstd));
        assert_eq!(restore(3), 3 * s.raw_bytes());
    }
}
