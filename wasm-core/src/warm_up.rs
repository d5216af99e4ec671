//! Warm-up: a synthetic job run through the restore's code before the user's first restore,
//! so that the engine has optimised that code by the click.
//!
//! Browsers compile a Wasm module quickly and unoptimised (V8's Liftoff, SpiderMonkey's
//! baseline compiler) and optimise a function on background threads once it has run enough
//! (V8's dynamic tiering). A restore is the heaviest work a page does, and its hot functions
//! (zstd decoding, delta and frame decoding, the multi-buffer SHA-1, CRC-32, deflate) would
//! otherwise first run hot during the user's restore: its first answers on unoptimised code,
//! with the optimising compiler taking a core from them. One restore worker runs the job when
//! the page starts its restore workers (the Versions tab), once per page: the compiled module,
//! and so its optimised code, serves every worker (docs/BENCHMARKS.md, "The restore's code
//! optimised before the click").
//!
//! The job is built here, not fetched: nothing of the repository is read before the user
//! asks for it. It has the shapes a restore's answers have ([`crate::restore`]): members of
//! a frame stored as slices of a frame that is a delta on an older frame, deltas on whole
//! chunks, zstd chunks and a raw chunk of random bytes (stored, not deflated).

use crate::{
    format::bundle::{BundleWriter, Codec},
    hash,
    resemble::{
        delta::DeltaEncoder,
        frame::{slice_payload, Frame},
    },
    restore::{RestoreSession, VerifiedBundle},
};

/// Text-like bytes (words of a small vocabulary, as source code and prose repeat theirs),
/// different for each seed.
fn text(seed: u64, n: usize) -> Vec<u8> {
    const WORDS: [&[u8]; 16] = [
        b"const ",
        b"return ",
        b"function",
        b"(value)",
        b" => ",
        b"{\n",
        b"}\n",
        b"type",
        b" of ",
        b"export ",
        b"string",
        b"; ",
        b"node",
        b".length",
        b"if (",
        b"\n  ",
    ];
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % 16) as usize]);
        if x.is_multiple_of(7) {
            out.extend_from_slice(&(x as u16).to_le_bytes());
        }
    }
    out.truncate(n);
    out
}

/// Bytes no compressor shrinks.
fn random(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// `base` with a few bytes changed and one inserted: what a delta is meant for.
fn edited(base: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for at in (0..v.len()).step_by(4099) {
        v[at] ^= 0x55;
    }
    v.insert(v.len() / 2, b'!');
    v
}

/// The synthetic answer ([`restore`]) and the raw chunks it answers, in order. Its chunks
/// are small and many, as the optimising compiler is triggered by how often a function's
/// loops turn and how often it is called, not by the bytes it handles: the per-chunk steps
/// (a zstd frame's tables read, a delta's base looked up, a fragment begun) must run as
/// often as an answer of a few hundred chunks runs them.
fn restore_job() -> (Vec<u8>, usize, Vec<Vec<u8>>) {
    const MEMBERS: u64 = 96;
    const WHOLE: u64 = 160;
    const DELTAS: u64 = 48;
    let size = |k: u64| 600 + (k as usize * 37) % 900;
    let older: Vec<Vec<u8>> = (0..MEMBERS).map(|k| text(k, size(k))).collect();
    let newer: Vec<Vec<u8>> = older.iter().map(|m| edited(m)).collect();
    let f0 = Frame::of(older.iter().map(Vec::as_slice));
    let f1 = Frame::of(newer.iter().map(Vec::as_slice));
    let (fp0, fp1) = (hash::fingerprint(&f0.raw), hash::fingerprint(&f1.raw));
    let whole: Vec<Vec<u8>> = (0..WHOLE).map(|k| text(1000 + k, size(k))).collect();
    let mut enc = DeltaEncoder::new(3).expect("a zstd context");
    let mut z = zstd::bulk::Compressor::new(3).expect("a zstd context");

    let mut w = BundleWriter::new();
    let mut answer = Vec::new();
    for (m, at) in newer.iter().zip(&f1.offsets) {
        w.push(
            &hash::fingerprint(m),
            Codec::Delta,
            m.len() as u32,
            &slice_payload(&fp1, *at),
        );
        answer.push(m.clone());
    }
    for c in &whole {
        let stored = z.compress(c).expect("zstd compresses");
        w.push(&hash::fingerprint(c), Codec::Zstd, c.len() as u32, &stored);
        answer.push(c.clone());
    }
    for base in &whole[..DELTAS as usize] {
        let near = edited(base);
        let d = enc
            .encode(&hash::fingerprint(base), base, &near)
            .expect("a delta");
        w.push(
            &hash::fingerprint(&near),
            Codec::Delta,
            near.len() as u32,
            d,
        );
        answer.push(near);
    }
    let noise = random(10, 16 << 10);
    w.push(
        &hash::fingerprint(&noise),
        Codec::Raw,
        noise.len() as u32,
        &noise,
    );
    answer.push(noise);
    let requested = answer.len();
    // The chain links after the answer: the newer frame, a delta on the older one.
    let d1 = enc
        .encode(&fp0, &f0.raw, &f1.raw)
        .expect("a delta")
        .to_vec();
    w.push(&fp1, Codec::Delta, f1.raw.len() as u32, &d1);
    let stored = z.compress(&f0.raw).expect("zstd compresses");
    w.push(&fp0, Codec::Zstd, f0.raw.len() as u32, &stored);
    (w.finish(), requested, answer)
}

/// Rounds of the restore job: enough that its hot functions count as hot in V8 (a round is
/// 305 chunks, ~330 KB).
const RESTORE_ROUNDS: usize = 4;

/// Runs the restore job through [`RestoreSession::verify`] as a zip's answers are, in a
/// session of its own. Its answer is the last round's (for the tests); a restore worker
/// drops it.
pub fn restore() -> VerifiedBundle {
    let (bundle, requested, _) = restore_job();
    let mut last = None;
    for _ in 0..RESTORE_ROUNDS {
        let (v, _) = RestoreSession::new()
            .verify(&bundle, requested, true)
            .expect("the warm-up job verifies");
        last = Some(v);
    }
    last.expect("at least one round")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{crc32, deflate};

    #[test]
    fn the_restore_job_takes_every_path_of_a_zip_answer() {
        let (bundle, requested, answer) = restore_job();
        let entries = crate::format::bundle::decode_bundle(&bundle).unwrap();
        let codecs: Vec<Codec> = entries.iter().map(|e| e.codec).collect();
        assert!(codecs.contains(&Codec::Raw) && codecs.contains(&Codec::Zstd));
        // Slices, a delta on a whole chunk, and the frame they slice as a delta.
        assert!(entries[..96].iter().all(|e| e.payload.len() == 25));
        assert_eq!(
            codecs.iter().filter(|c| **c == Codec::Delta).count(),
            96 + 48 + 1
        );

        let v = restore();
        assert_eq!(v.raw, answer.concat());
        assert_eq!(v.lengths.len(), requested);
        assert_eq!(
            v.crcs,
            answer.iter().map(|c| crc32::crc32(c)).collect::<Vec<_>>()
        );
        let f = v.fragments.expect("a zip's fragments");
        let stream = [&f.bytes[..], &deflate::END[..]].concat();
        assert_eq!(
            miniz_oxide::inflate::decompress_to_vec(&stream).unwrap(),
            answer.concat()
        );
        // Text deflated, the random chunk stored: both of the fragmenter's paths.
        let noise = *f.lengths.last().unwrap() as usize;
        assert!(noise >= answer.last().unwrap().len());
        assert!(f.bytes.len() - noise < (v.raw.len() - answer.last().unwrap().len()) / 2);
    }
}
