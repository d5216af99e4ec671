//! The `resemble` module: codec 2 (delta) round trips, chains and refusals of damaged input;
//! DupAdj pairs on hand-built recipes; super-feature properties over seeded trials. Runs
//! natively (`cargo test`) and in Wasm (Node).

mod common;

use common::Rng;
use std::collections::HashMap;
use wasm_core::compress::{Compressor, CODEC_RAW, CODEC_ZSTD};
use wasm_core::format::bundle::MAX_CHUNK_RAW;
use wasm_core::hash::{fingerprint, Fingerprint};
use wasm_core::resemble::delta::*;
use wasm_core::resemble::dupadj::{pairs, Loc};
use wasm_core::resemble::superfeature::{super_features, Params, SuperFeatureIndex};

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test;

/// Fewer trials in Wasm (debug Wasm in Node is slower).
const TRIALS: usize = if cfg!(target_arch = "wasm32") {
    60
} else {
    400
};

/// Text-like bytes: words from a small vocabulary, so zstd finds structure in them.
fn text(rng: &mut Rng, n: usize) -> Vec<u8> {
    const WORDS: [&str; 12] = [
        "function ",
        "return ",
        "const ",
        "let ",
        "if (",
        ") {\n",
        "}\n",
        "x",
        "y = ",
        "; ",
        "export ",
        "interface ",
    ];
    let mut v = Vec::with_capacity(n + 16);
    while v.len() < n {
        v.extend_from_slice(rng.pick(&WORDS).as_bytes());
        if rng.chance(20) {
            v.extend_from_slice(format!("{}", rng.next() % 1000).as_bytes());
        }
    }
    v.truncate(n);
    v
}

/// `base` with `edits` random insertions, deletions and overwrites of up to 16 bytes.
fn edit(rng: &mut Rng, base: &[u8], edits: usize) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..edits {
        let at = rng.below(v.len() + 1);
        let len = rng.range(1, 16);
        match rng.below(3) {
            0 => {
                let ins = rng.bytes(len);
                v.splice(at..at, ins);
            }
            1 => {
                let end = (at + len).min(v.len());
                v.drain(at..end);
            }
            _ => {
                for k in at..(at + len).min(v.len()) {
                    v[k] = rng.next() as u8;
                }
            }
        }
    }
    v
}

fn roundtrip(base: &[u8], raw: &[u8]) -> usize {
    let mut enc = DeltaEncoder::new(DEFAULT_DELTA_LEVEL).unwrap();
    let mut dec = DeltaDecoder::new().unwrap();
    let bfp = fingerprint(base);
    let payload = enc.encode(&bfp, base, raw).unwrap().to_vec();
    assert_eq!(base_of(&payload).unwrap(), bfp);
    let out = dec.decode(&payload, &bfp, base, raw.len()).unwrap();
    assert_eq!(out, raw);
    payload.len()
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn delta_round_trips_random_and_similar() {
    let mut rng = Rng(0x5EED_0001);
    for t in 0..TRIALS / 4 {
        // Unrelated random chunks: decodes exactly, costs about the chunk itself.
        let base = {
            let n = rng.range(0, 20_000);
            rng.bytes(n)
        };
        let raw = {
            let n = rng.range(0, 20_000);
            rng.bytes(n)
        };
        let n = roundtrip(&base, &raw);
        assert!(
            n <= HEADER_LEN + raw.len() + raw.len() / 64 + 64,
            "trial {t}"
        );

        // A copy with a few edits: the delta is a small fraction of the chunk.
        let base = if t % 2 == 0 {
            {
                let n = rng.range(4096, 65_536);
                rng.bytes(n)
            }
        } else {
            {
                let n = rng.range(4096, 65_536);
                text(&mut rng, n)
            }
        };
        let edits = rng.range(1, 4);
        let raw = edit(&mut rng, &base, edits);
        let n = roundtrip(&base, &raw);
        assert!(
            n < HEADER_LEN + 300,
            "trial {t}: delta of {n} bytes for a {}-byte chunk with few edits",
            raw.len()
        );
    }
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn delta_edge_cases() {
    let mut rng = Rng(0x5EED_0002);
    // Empty base: an ordinary zstd frame behind the header.
    let raw = text(&mut rng, 5000);
    let n = roundtrip(&[], &raw);
    assert!(n < raw.len() / 2);
    // Empty chunk, against an empty base and a non-empty one.
    roundtrip(&[], &[]);
    roundtrip(&raw, &[]);
    // Equal chunks: a few bytes of frame.
    let base = rng.bytes(60_000);
    let n = roundtrip(&base, &base.clone());
    assert!(n < HEADER_LEN + 32, "equal chunks: {n} bytes");
    // The very same buffer as base and chunk.
    let n = roundtrip(&base, &base);
    assert!(n < HEADER_LEN + 32, "one buffer: {n} bytes");
    // Max-size chunks, similar and not.
    let max = MAX_CHUNK_RAW as usize;
    let big = rng.bytes(max);
    let big2 = edit(&mut rng, &big, 3);
    let big2 = &big2[..big2.len().min(max)];
    let n = roundtrip(&big, big2);
    assert!(n < 2000, "max-size similar chunk: {n} bytes");
    roundtrip(&rng.bytes(max), &big);
    // Beyond the limit: refused by both sides before any work.
    let mut enc = DeltaEncoder::new(3).unwrap();
    let too_big = vec![0u8; max + 1];
    assert_eq!(
        enc.encode(&[0; 20], &[], &too_big).unwrap_err(),
        DeltaError::TooLarge(max + 1)
    );
    let payload = enc.encode(&[0; 20], &[], b"abc").unwrap().to_vec();
    let mut dec = DeltaDecoder::new().unwrap();
    assert_eq!(
        dec.decode(&payload, &[0; 20], &[], max + 1).unwrap_err(),
        DeltaError::TooLarge(max + 1)
    );
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn delta_refuses_wrong_base_method_length_and_trailing_bytes() {
    let mut rng = Rng(0x5EED_0003);
    let base = text(&mut rng, 8000);
    let raw = edit(&mut rng, &base, 3);
    let bfp = fingerprint(&base);
    let mut enc = DeltaEncoder::new(3).unwrap();
    let mut dec = DeltaDecoder::new().unwrap();
    let payload = enc.encode(&bfp, &base, &raw).unwrap().to_vec();
    let n = raw.len();

    let other = text(&mut rng, 8000);
    let ofp = fingerprint(&other);
    assert_eq!(
        dec.decode(&payload, &ofp, &other, n).unwrap_err(),
        DeltaError::WrongBase
    );
    // The right name with other bytes (a base damaged in storage): whatever comes out is not
    // the chunk, and the caller's fingerprint check refuses it.
    if let Ok(out) = dec.decode(&payload, &bfp, &other, n) {
        assert_ne!(fingerprint(&out), fingerprint(&raw));
    }
    for bad in [n - 1, n + 1, 0] {
        assert!(matches!(
            dec.decode(&payload, &bfp, &base, bad).unwrap_err(),
            DeltaError::LengthMismatch { .. }
        ));
    }
    let mut m = payload.clone();
    m[20] = 2;
    assert_eq!(
        dec.decode(&m, &bfp, &base, n).unwrap_err(),
        DeltaError::UnknownMethod(2)
    );
    let mut m = payload.clone();
    m.push(0);
    assert_eq!(
        dec.decode(&m, &bfp, &base, n).unwrap_err(),
        DeltaError::TrailingBytes
    );
    // Two frames back to back are refused too (only the first would see the base).
    let mut m = payload.clone();
    m.extend_from_slice(&payload[HEADER_LEN..]);
    assert_eq!(
        dec.decode(&m, &bfp, &base, n).unwrap_err(),
        DeltaError::TrailingBytes
    );
    // The error reads as a sentence.
    assert!(DeltaError::WrongBase.to_string().contains("base"));
    // The decoder is still usable after refusals.
    assert_eq!(dec.decode(&payload, &bfp, &base, n).unwrap(), raw);
}

/// Decode plus the caller's fingerprint check, as every reader does for every codec.
fn decode_checked(
    dec: &mut DeltaDecoder,
    payload: &[u8],
    bfp: &Fingerprint,
    base: &[u8],
    raw_len: usize,
    fp: &Fingerprint,
) -> Result<Vec<u8>, String> {
    let out = dec
        .decode(payload, bfp, base, raw_len)
        .map_err(|e| e.to_string())?;
    if &fingerprint(&out) != fp {
        return Err("fingerprint mismatch".into());
    }
    Ok(out)
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn every_truncation_and_single_byte_corruption_is_refused() {
    let mut rng = Rng(0x5EED_0004);
    let mut enc = DeltaEncoder::new(3).unwrap();
    let mut dec = DeltaDecoder::new().unwrap();
    let (mut by_decoder, mut by_fingerprint, mut total) = (0usize, 0usize, 0usize);
    for case in 0..3 {
        let base = if case == 0 {
            rng.bytes(6000)
        } else {
            text(&mut rng, 6000)
        };
        let raw = if case == 2 {
            text(&mut rng, 3000)
        } else {
            edit(&mut rng, &base, 4)
        };
        let (bfp, fp, n) = (fingerprint(&base), fingerprint(&raw), raw.len());
        let payload = enc.encode(&bfp, &base, &raw).unwrap().to_vec();

        // Every truncation: the decoder itself refuses it.
        for cut in 0..payload.len() {
            assert!(
                dec.decode(&payload[..cut], &bfp, &base, n).is_err(),
                "case {case}: truncation to {cut} of {} accepted",
                payload.len()
            );
        }
        // Every byte position, with every other value natively (a few values in Wasm).
        let flips: Vec<u8> = if cfg!(target_arch = "wasm32") {
            vec![0x01, 0x80, 0xff, 0x55]
        } else {
            (1..=255).collect()
        };
        for pos in 0..payload.len() {
            for &flip in &flips {
                let mut m = payload.clone();
                m[pos] ^= flip;
                total += 1;
                match dec.decode(&m, &bfp, &base, n) {
                    Err(_) => by_decoder += 1,
                    Ok(out) => {
                        // Header bytes are always the decoder's to refuse.
                        assert!(pos >= HEADER_LEN, "case {case}: header byte {pos} accepted");
                        // Bits zstd does not read can leave the output intact; anything else
                        // decoded is wrong bytes of the right length.
                        assert_eq!(out.len(), n);
                        if out != raw {
                            by_fingerprint += 1;
                        }
                        let checked = decode_checked(&mut dec, &m, &bfp, &base, n, &fp);
                        assert!(
                            checked.is_err() == (out != raw),
                            "case {case}: corruption at {pos} passed the fingerprint check"
                        );
                    }
                }
            }
        }
    }
    eprintln!(
        "corruptions: {total}, refused by the decoder {by_decoder}, decoded wrong {by_fingerprint}"
    );
    // Without a zstd checksum, the fingerprint check catches what the frame structure does not;
    // most damage still breaks the frame itself.
    assert!(
        by_decoder * 2 > total,
        "decoder refused {by_decoder} of {total}, fingerprint {by_fingerprint}"
    );
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn chain_of_four_decodes_step_by_step_and_longer_chains_are_refused() {
    let mut rng = Rng(0x5EED_0005);
    let mut comp = Compressor::new(3).unwrap();
    let mut enc = DeltaEncoder::new(3).unwrap();
    let mut dec = DeltaDecoder::new().unwrap();
    let mut versions = vec![text(&mut rng, 20_000)];
    for _ in 0..5 {
        let next = edit(&mut rng, versions.last().unwrap(), 3);
        versions.push(next);
    }
    let fps: Vec<Fingerprint> = versions.iter().map(|v| fingerprint(v)).collect();
    let mut store: HashMap<Fingerprint, Stored> = HashMap::new();
    let (codec, bytes) = comp.compress(&versions[0]);
    assert_eq!(codec, CODEC_ZSTD);
    store.insert(
        fps[0],
        Stored {
            codec,
            bytes: bytes.to_vec(),
            raw_len: versions[0].len(),
        },
    );
    for d in 1..versions.len() {
        let payload = enc
            .encode(&fps[d - 1], &versions[d - 1], &versions[d])
            .unwrap()
            .to_vec();
        store.insert(
            fps[d],
            Stored {
                codec: CODEC_DELTA,
                bytes: payload,
                raw_len: versions[d].len(),
            },
        );
    }
    let fetch = |store: &HashMap<Fingerprint, Stored>, fp: &Fingerprint| {
        store
            .get(fp)
            .map(|s| Stored {
                codec: s.codec,
                bytes: s.bytes.clone(),
                raw_len: s.raw_len,
            })
            .ok_or_else(|| "not stored".to_string())
    };
    // Walk the chain by hand: each step decodes against the bytes the previous one gave.
    let mut cur = versions[0].clone();
    for d in 1..=MAX_CHAIN_DEPTH {
        let s = &store[&fps[d]];
        let out = dec.decode(&s.bytes, &fps[d - 1], &cur, s.raw_len).unwrap();
        assert_eq!(fingerprint(&out), fps[d]);
        cur = out;
    }
    // And through `decode_chain`, every depth up to the cap.
    for d in 0..=MAX_CHAIN_DEPTH {
        assert_eq!(
            decode_chain(&fps[d], |fp| fetch(&store, fp)).unwrap(),
            versions[d]
        );
    }
    // One link more than the cap is refused, as is a loop.
    assert_eq!(
        decode_chain(&fps[MAX_CHAIN_DEPTH + 1], |fp| fetch(&store, fp)).unwrap_err(),
        DeltaError::ChainTooLong
    );
    // A reader that holds the delta already decodes its base within one link less.
    let base_links = MAX_CHAIN_DEPTH - 1;
    assert_eq!(
        decode_chain_within(&fps[base_links], base_links, |fp| fetch(&store, fp)).unwrap(),
        versions[base_links]
    );
    assert_eq!(
        decode_chain_within(&fps[MAX_CHAIN_DEPTH], base_links, |fp| fetch(&store, fp)).unwrap_err(),
        DeltaError::ChainTooLong
    );
    // `decode_chain_each` hands out every chunk below the top, bottom first, verified.
    let mut below = Vec::new();
    let top = decode_chain_each(
        &fps[base_links],
        base_links,
        |_| None::<Vec<u8>>,
        |fp| fetch(&store, fp),
        |fp, raw| {
            assert_eq!(fingerprint(raw), *fp);
            below.push(*fp);
        },
    )
    .unwrap();
    assert_eq!(top, versions[base_links]);
    assert_eq!(below, fps[..base_links].to_vec());
    // A link the reader already holds ends the walk down: nothing below it is fetched, and
    // the chunks above it are decoded from it and handed out as before.
    let mut fetched = Vec::new();
    let mut below = Vec::new();
    let top = decode_chain_each(
        &fps[base_links],
        base_links,
        |fp| (*fp == fps[1]).then(|| versions[1].clone()),
        |fp| {
            fetched.push(*fp);
            fetch(&store, fp)
        },
        |fp, raw| {
            assert_eq!(fingerprint(raw), *fp);
            below.push(*fp);
        },
    )
    .unwrap();
    assert_eq!(top, versions[base_links]);
    assert_eq!(
        fetched,
        fps[2..=base_links]
            .iter()
            .rev()
            .copied()
            .collect::<Vec<_>>()
    );
    assert_eq!(below, fps[1..base_links].to_vec());
    // The requested chunk itself held: answered as held, nothing fetched.
    let held = decode_chain_each(
        &fps[base_links],
        base_links,
        |_| Some(versions[base_links].clone()),
        |_| -> Result<Stored, String> { panic!("fetched a held chunk") },
        |_, _| panic!("a held chunk has no links to hand out"),
    )
    .unwrap();
    assert_eq!(held, versions[base_links]);
    let a = text(&mut rng, 1000);
    let b = edit(&mut rng, &a, 1);
    let (fa, fb) = (fingerprint(&a), fingerprint(&b));
    let mut looped = HashMap::new();
    let pa = enc.encode(&fb, &b, &a).unwrap().to_vec();
    let pb = enc.encode(&fa, &a, &b).unwrap().to_vec();
    for (fp, bytes, n) in [(fa, pa, a.len()), (fb, pb, b.len())] {
        looped.insert(
            fp,
            Stored {
                codec: CODEC_DELTA,
                bytes,
                raw_len: n,
            },
        );
    }
    assert_eq!(
        decode_chain(&fa, |fp| fetch(&looped, fp)).unwrap_err(),
        DeltaError::ChainTooLong
    );
    // A missing base and a damaged base are refused by name.
    store.remove(&fps[0]);
    assert!(matches!(
        decode_chain(&fps[2], |fp| fetch(&store, fp)).unwrap_err(),
        DeltaError::Base(_)
    ));
    store.insert(
        fps[0],
        Stored {
            codec: CODEC_RAW,
            bytes: versions[1].clone(),
            raw_len: versions[1].len(),
        },
    );
    assert!(matches!(
        decode_chain(&fps[2], |fp| fetch(&store, fp)).unwrap_err(),
        DeltaError::Base(_)
    ));
}

fn fp(n: u32) -> Fingerprint {
    let mut f = [0u8; 20];
    f[..4].copy_from_slice(&n.to_le_bytes());
    f
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn dupadj_pairs_neighbours_of_duplicates() {
    // Old version: 1 2 3 4 5 6 7 8. New: 1 2 13 14 5 16 7 18 99.
    // 1, 2, 5, 7 are duplicates; 13 14 sit between 2 and 5 (old 3 4), 16 between 5 and 7
    // (old 6), 18 after 7 (old 8), 99 past the end of the old recipe.
    let old: Vec<Fingerprint> = (1..=8).map(fp).collect();
    let new: Vec<Fingerprint> = [1, 2, 13, 14, 5, 16, 7, 18, 99].map(fp).to_vec();
    let needs: Vec<bool> = [false, false, true, true, false, true, false, true, true].to_vec();
    let loc = |index| Loc { recipe: 0, index };
    let got = pairs(&new, &needs, &[&old], |_, _| true);
    assert_eq!(
        got,
        vec![(2, loc(2)), (3, loc(3)), (5, loc(5)), (7, loc(7)),]
    );

    // A rejected pair ends the forward walk; the backward walk from the next duplicate
    // then pairs what is left.
    let got = pairs(&new, &needs, &[&old], |i, _| i != 2);
    assert_eq!(got, vec![(5, loc(5)), (3, loc(3)), (7, loc(7))]);
    let got = pairs(&new, &needs, &[&old], |i, _| i != 3);
    assert_eq!(got, vec![(2, loc(2)), (5, loc(5)), (7, loc(7))]);

    // Backwards from the first duplicate; the duplicate is found in the newest recipe.
    let older: Vec<Fingerprint> = [50, 51, 52].map(fp).to_vec();
    let newer: Vec<Fingerprint> = [60, 61, 62, 1, 63].map(fp).to_vec();
    let new2: Vec<Fingerprint> = [70, 71, 1, 72].map(fp).to_vec();
    let needs2 = [true, true, false, true];
    let got = pairs(&new2, &needs2, &[&old, &older, &newer], |_, _| true);
    let at = |index| Loc { recipe: 2, index };
    assert_eq!(got, vec![(3, at(4)), (1, at(2)), (0, at(1))]);

    // No duplicates, no pairs; a new chunk whose old neighbour has its own fingerprint is
    // not paired with itself.
    assert!(pairs(&new2, &[true; 4], &[&newer], |_, _| true).is_empty());
    let same = [1, 62].map(fp).to_vec();
    let old3 = [1, 62].map(fp).to_vec();
    assert!(pairs(&same, &[false, true], &[&old3], |_, _| true).is_empty());
    // Repeated new chunks count once; the old side ending stops the walk.
    let got = pairs(
        &[fp(8), fp(40), fp(41)],
        &[false, true, true],
        &[&old],
        |_, _| true,
    );
    assert!(got.is_empty());
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn super_features_detect_small_edits_and_ignore_unrelated_chunks() {
    for (p, seed) in [(Params::DARE, 6), (Params::DITTO, 7)] {
        super_feature_properties(p, Rng(0x5EED_0000 + seed));
    }
    assert_eq!(Params::default(), Params::DITTO);
    assert!(!Params {
        super_features: 3,
        features_per_sf: 3,
        sample_bits: 0
    }
    .valid());
}

fn super_feature_properties(p: Params, mut rng: Rng) {
    let (mut shared, mut unrelated) = (0usize, 0usize);
    for t in 0..TRIALS {
        let chunk = if t % 2 == 0 {
            {
                let n = rng.range(2048, 16_384);
                rng.bytes(n)
            }
        } else {
            {
                let n = rng.range(2048, 16_384);
                text(&mut rng, n)
            }
        };
        let sf = super_features(&chunk, p);
        assert_eq!(sf.len(), 3);
        assert_eq!(sf, super_features(&chunk.clone(), p), "identical chunks");
        let edited = edit(&mut rng, &chunk, 1);
        let se = super_features(&edited, p);
        if sf.iter().zip(&se).any(|(a, b)| a == b) {
            shared += 1;
        }
        let other = rng.bytes(chunk.len());
        let so = super_features(&other, p);
        if sf.iter().zip(&so).any(|(a, b)| a == b) {
            unrelated += 1;
        }
    }
    eprintln!(
        "{p:?}: small edits sharing a super-feature: {shared}/{TRIALS}; unrelated: {unrelated}"
    );
    // One edit of up to 16 bytes in a chunk of 2-16 KiB: a super-feature survives unless
    // the edit touches the window of both features' maxima in all three groups.
    assert!(
        shared * 100 >= TRIALS * 95,
        "{p:?}: small edits share a super-feature in {shared} of {TRIALS}"
    );
    assert!(unrelated * 100 <= TRIALS, "unrelated chunks: {unrelated}");

    // The index finds the edited chunk's original among many, and forgets the oldest.
    let mut index = SuperFeatureIndex::new(p, 100);
    let chunks: Vec<Vec<u8>> = (0..150).map(|_| rng.bytes(4096)).collect();
    for (id, c) in chunks.iter().enumerate() {
        index.insert(id as u32, super_features(c, p));
    }
    assert_eq!(index.len(), 100);
    let mut found = 0;
    for (id, c) in chunks.iter().enumerate() {
        let hit = index.lookup(&super_features(&edit(&mut rng, c, 1), p), |_| true);
        if id < 50 {
            assert_eq!(hit, None, "evicted chunk {id} found");
        } else if hit == Some(id as u32) {
            found += 1;
        } else {
            assert_eq!(hit, None, "chunk {id} matched another chunk");
        }
    }
    assert!(found >= 95, "found {found} of 100");
    assert_eq!(
        index.lookup(&super_features(&chunks[120], p), |id| id != 120),
        None
    );
    assert!(index.memory_bytes() > 0);
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn shared_base_encodes_what_the_prefix_decoder_reads() {
    let mut rng = Rng(0x5EED_00D1);
    let mut dec = DeltaDecoder::new().unwrap();
    for t in 0..TRIALS / 20 {
        // A large base shared by many chunks: some copy from it with edits, some are
        // unrelated, some empty; every one decodes with the ordinary prefix decoder.
        let base = {
            let n = rng.range(1, 300_000);
            text(&mut rng, n)
        };
        let bfp = fingerprint(&base);
        let mut enc = SharedBaseEncoder::new(&bfp, &base, DEFAULT_DELTA_LEVEL).unwrap();
        let mut prefix = DeltaEncoder::new(DEFAULT_DELTA_LEVEL).unwrap();
        for k in 0..12 {
            let raw = match k % 3 {
                0 => {
                    let at = rng.below(base.len());
                    let end = (at + rng.range(1, 20_000)).min(base.len());
                    edit(&mut rng, &base[at..end], 4)
                }
                1 => {
                    let n = rng.range(0, 20_000);
                    rng.bytes(n)
                }
                _ => Vec::new(),
            };
            let payload = enc.encode(&raw).unwrap().to_vec();
            assert_eq!(base_of(&payload).unwrap(), bfp);
            let out = dec.decode(&payload, &bfp, &base, raw.len()).unwrap();
            assert_eq!(out, raw, "trial {t} chunk {k}");
            // About what the per-chunk prefix encoding costs.
            let p = prefix.encode(&bfp, &base, &raw).unwrap().len();
            assert!(
                payload.len() <= p + p / 4 + 64,
                "trial {t} chunk {k}: {} vs {p}",
                payload.len()
            );
        }
    }
    // A base zstd would parse as a structured dictionary is refused, not misread.
    let mut magic = 0xEC30_A437u32.to_le_bytes().to_vec();
    magic.extend_from_slice(&text(&mut rng, 1000));
    assert!(SharedBaseEncoder::new(&fingerprint(&magic), &magic, 3).is_err());
}
