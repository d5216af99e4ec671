//! Warm-ups: synthetic work a fresh worker runs once, before its first real request, so that
//! the read paths (decoding, fingerprints, the search's scan) run in optimised code when the
//! real work comes.
//!
//! V8 runs new Wasm code in its baseline compiler and tiers a function up to its optimising
//! compiler only after the function has run for a while; the compiled module is shared by a
//! page's workers, and so is the optimised code. Without a warm-up, a first search in a fresh
//! page decodes, checks and scans its first chunks in baseline code while the optimising
//! compiler takes one of the cores that work needs. The backup engine warms its own paths
//! (chunking, fingerprints, compression: `web/src/worker/warmup.ts`); this module holds a
//! synthetic set of stored chunks shaped as a search's ranges are (whole chunks in zstd, a
//! delta against a whole chunk, members of a frame stored as slices, that frame a delta
//! against an older one, docs/FORMAT.md), which the search binding scans as a container range
//! with the frames as fetched bases (`searchWarmUp`).

use crate::{
    compress,
    format::bundle::{BundleWriter, Codec},
    hash::{self, Fingerprint},
    resemble::{delta::DeltaEncoder, frame},
};

/// A stored chunk of the synthetic set.
pub struct Stored {
    pub fp: Fingerprint,
    pub codec: Codec,
    pub stored: Vec<u8>,
    pub raw_len: u32,
}

/// The synthetic set: `chunks` as a search's range holds them, then `links`, the base chain
/// their deltas need (the frame first, then its older frame), as a job fetches it.
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

/// A member of the frame, and each whole chunk: 8 KiB (the chunker's average). The set is
/// small (a warm-up that costs more than the tier-up it saves would be no gain): the
/// optimising compiler takes a function once it has run a while, not once it has read much.
const MEMBER: usize = 8 << 10;

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

/// The synthetic set: 96 KiB of raw chunks and their 64 KiB older frame.
pub fn synthetic() -> Synthetic {
    let old = synthetic_text(1, 8 * MEMBER);
    let mut new = old.clone();
    for i in (0..new.len()).step_by(3_000) {
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
    let wholes: Vec<Vec<u8>> = (0..4).map(|i| synthetic_text(100 + i, MEMBER)).collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::restore::verify_bundle;

    #[test]
    fn the_set_decodes_through_its_links() {
        let s = synthetic();
        // Its deltas are decoded, not stored whole: it is a fraction of what it holds raw.
        let b = bundle(s.chunks.iter().chain(&s.links));
        assert!(
            b.len() * 3 < s.raw_bytes(),
            "{} for {}",
            b.len(),
            s.raw_bytes()
        );
        assert!(s.chunks.iter().any(|c| c.codec == Codec::Zstd));
        let v = verify_bundle(&b, s.chunks.len()).unwrap();
        assert_eq!(v.raw.len(), s.raw_bytes());
    }
}
