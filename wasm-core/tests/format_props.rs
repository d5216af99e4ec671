//! Property tests of every binary parser the server and the page run on untrusted bytes:
//! bundles, container headers and table slots, stored-chunk decoding, manifests.
//!
//! Each parser is fed valid encodings and mutations of them (bit flips, byte overwrites with
//! boundary values, truncations, extensions, spliced garbage). The properties: a parser never
//! panics; whatever it accepts satisfies the format's limits (`docs/FORMAT.md`); and what it
//! accepts re-encodes to the bytes it was given (one reading per encoding, so two parsers
//! cannot disagree about a structure). Runs natively (`cargo test`) and in Wasm (Node).

mod common;

use common::Rng;
use wasm_core::compress::{decompress, Compressor, CODEC_RAW, CODEC_ZSTD};
use wasm_core::format::bundle::*;
use wasm_core::format::container::*;
use wasm_core::format::manifest::{validate_path, Manifest, MAX_PATH_BYTES};

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test;

/// Fewer rounds in Wasm (debug Wasm in Node is slower).
const ROUNDS: u64 = if cfg!(target_arch = "wasm32") {
    300
} else {
    20_000
};

/// Values that sit on the edges of length and count checks.
const EDGES: [u8; 8] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff, 0x10, 0x40];

/// One random mutation of `b`: what a flipped bit on disk, a cut-off upload or a hostile
/// client produces.
fn mutate(rng: &mut Rng, b: &[u8]) -> Vec<u8> {
    let mut m = b.to_vec();
    match rng.below(7) {
        0 if !m.is_empty() => {
            let i = rng.below(m.len());
            m[i] ^= 1 << rng.below(8);
        }
        1 if !m.is_empty() => {
            let i = rng.below(m.len());
            m[i] = EDGES[rng.below(EDGES.len())];
        }
        2 => m.truncate(rng.below(m.len() + 1)),
        3 => {
            let extra = rng.junk(64);
            m.extend_from_slice(&extra);
        }
        4 if m.len() >= 4 => {
            // A little-endian field set to an extreme: counts, lengths, offsets, capacities.
            let i = rng.below(m.len() - 3);
            let v: u32 = [0, 1, u32::MAX, u32::MAX / 40, 1 << 20, (1 << 20) + 1][rng.below(6)];
            m[i..i + 4].copy_from_slice(&v.to_le_bytes());
        }
        5 if !m.is_empty() => {
            let at = rng.below(m.len());
            let len = rng.below(m.len() - at) + 1;
            let junk = rng.bytes(len);
            m[at..at + len].copy_from_slice(&junk);
        }
        _ => {
            // Several mutations at once.
            for _ in 0..3 {
                m = mutate(rng, &m);
            }
        }
    }
    m
}

/// A valid bundle of a few chunks, raw and zstd, with its entries kept for comparison.
fn valid_bundle(rng: &mut Rng, zstd: &mut Compressor) -> Vec<u8> {
    let mut w = BundleWriter::new();
    for _ in 0..rng.below(5) {
        let len = rng.below(3000);
        // Half the chunks compressible, so both codecs appear.
        let raw: Vec<u8> = if rng.below(2) == 0 {
            rng.bytes(len)
        } else {
            (0..len).map(|i| (i % 7) as u8).collect()
        };
        let (codec, stored) = zstd.compress(&raw);
        let codec = Codec::from_u8(codec).expect("compressor codec");
        w.push(&rng.fp(), codec, raw.len() as u32, stored);
    }
    w.finish()
}

fn check_bundle(b: &[u8]) {
    let Ok(entries) = decode_bundle(b) else {
        return;
    };
    assert!(entries.len() <= MAX_BUNDLE_CHUNKS as usize);
    for e in &entries {
        assert!(e.raw_len <= MAX_CHUNK_RAW);
        assert!(e.payload.len() <= MAX_CHUNK_STORED as usize);
        if e.codec == Codec::Raw {
            assert_eq!(e.payload.len(), e.raw_len as usize);
        }
        // Stored-chunk decoding of whatever the bundle claims: an error or exactly raw_len bytes.
        if let Ok(raw) = decompress(e.codec as u8, e.payload, e.raw_len as usize) {
            assert_eq!(raw.len(), e.raw_len as usize);
        }
    }
    assert_eq!(
        encode_bundle(&entries),
        b,
        "accepted bundle re-encodes differently"
    );
    // The streaming parser (header, then entry headers) reads the same structure.
    let count = parse_header(b).expect("decoded bundle has a valid header");
    assert_eq!(count as usize, entries.len());
    let mut at = BUNDLE_HEADER_LEN;
    for e in &entries {
        let h = parse_entry_header(&b[at..]).expect("decoded entry has a valid header");
        assert_eq!((h.fp, h.codec, h.raw_len), (e.fp, e.codec, e.raw_len));
        assert_eq!(h.stored_len as usize, e.payload.len());
        at += ENTRY_HEADER_LEN + e.payload.len();
    }
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn bundles_never_panic_and_accept_only_canonical_encodings() {
    let mut rng = Rng(0xb0_0d1e);
    let mut zstd = Compressor::new(1).unwrap();
    let mut accepted_mutants = 0;
    for _ in 0..ROUNDS {
        let b = valid_bundle(&mut rng, &mut zstd);
        assert!(decode_bundle(&b).is_ok(), "a valid bundle is refused");
        check_bundle(&b);
        let m = mutate(&mut rng, &b);
        if m != b && decode_bundle(&m).is_ok() {
            accepted_mutants += 1;
        }
        check_bundle(&m);
        check_bundle(&rng.junk(200));
    }
    // Mutations inside payloads and fingerprints keep a bundle well-formed; the test must see
    // both outcomes to mean anything.
    assert!(accepted_mutants > 0 && accepted_mutants < ROUNDS);
}

fn valid_container_header(rng: &mut Rng) -> ContainerHeader {
    let kind = if rng.below(2) == 0 {
        ContainerKind::Active
    } else {
        ContainerKind::Archival
    };
    let mut h = ContainerHeader::new(rng.next() >> 8, kind, rng.next() >> 20);
    h.newest_version = (rng.next() >> 40) as i64;
    h
}

fn check_container_header(b: &[u8]) {
    let Ok(h) = ContainerHeader::decode(b) else {
        return;
    };
    // The data region starts after the whole table: a capacity cannot point into the data
    // or past the offset, whatever its value.
    assert!(h.data_offset >= slot_offset(h.table_capacity));
    let again = ContainerHeader::decode(&h.encode()).expect("re-encoded header decodes");
    assert_eq!(again, h);
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn container_headers_never_panic_and_keep_their_layout() {
    let mut rng = Rng(0xc0_47a1);
    for _ in 0..ROUNDS {
        let h = valid_container_header(&mut rng);
        let enc = h.encode();
        assert_eq!(ContainerHeader::decode(&enc), Ok(h));
        check_container_header(&mutate(&mut rng, &enc));
        check_container_header(&rng.junk(80));
    }
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn table_slots_never_panic_and_round_trip() {
    let mut rng = Rng(0x7ab1e);
    for _ in 0..ROUNDS {
        let e = TableEntry {
            fp: rng.fp(),
            codec: [CODEC_RAW, CODEC_ZSTD][rng.below(2)],
            offset: rng.next() >> 16,
            stored_len: rng.next() as u32,
            raw_len: rng.next() as u32,
        };
        let enc = e.encode();
        assert_eq!(TableEntry::decode(&enc), Ok(Some(e)));
        for m in [mutate(&mut rng, &enc), rng.junk(50)] {
            match TableEntry::decode(&m) {
                Ok(Some(got)) => {
                    assert!(got.codec <= 2);
                    assert_eq!(TableEntry::decode(&got.encode()), Ok(Some(got)));
                }
                Ok(None) => assert!(m[..TABLE_ENTRY_LEN].iter().all(|&x| x == 0)),
                Err(_) => {}
            }
        }
    }
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn stored_chunk_decoding_never_panics_and_never_returns_a_wrong_length() {
    let mut rng = Rng(0xdec0de);
    let mut zstd = Compressor::new(3).unwrap();
    for _ in 0..ROUNDS / 4 {
        let len = rng.below(5000);
        let raw: Vec<u8> = (0..len).map(|i| (i / 3 % 11) as u8).collect();
        let (codec, stored) = zstd.compress(&raw);
        let stored = stored.to_vec();
        assert_eq!(decompress(codec, &stored, raw.len()).unwrap(), raw);
        let m = mutate(&mut rng, &stored);
        for claimed in [raw.len(), rng.below(6000)] {
            for c in [codec, CODEC_ZSTD, CODEC_RAW, rng.next() as u8] {
                if let Ok(out) = decompress(c, &m, claimed) {
                    assert_eq!(
                        out.len(),
                        claimed,
                        "codec {c}: decoded length is not the claimed one"
                    );
                }
            }
        }
    }
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn manifests_never_panic() {
    let mut rng = Rng(0x3a2f);
    let good = br#"{"source":"Docs","time":1700000000000,"entries":[
        {"path":"a","kind":"dir","size":0,"mtime":1},
        {"path":"a/b.txt","kind":"file","size":5,"mtime":2,"recipe":["00112233445566778899aabbccddeeff00112233"]},
        {"path":"a/l","kind":"symlink","size":0,"mtime":3,"target":"b.txt"}]}"#;
    let m: Manifest = serde_json::from_slice(good).expect("the sample manifest parses");
    assert_eq!(m.entries.len(), 3);
    for _ in 0..ROUNDS {
        let mutant = mutate(&mut rng, good);
        if let Ok(m) = serde_json::from_slice::<Manifest>(&mutant) {
            for e in &m.entries {
                let _ = validate_path(&e.path);
            }
            let again: Manifest = serde_json::from_slice(&serde_json::to_vec(&m).unwrap())
                .expect("a re-serialised manifest parses");
            assert_eq!(again, m);
        }
    }
    // Paths the validator must refuse, and the longest it accepts.
    for bad in ["", "/a", "a/", "a//b", "./a", "a/../b", "a\0b"] {
        assert!(validate_path(bad).is_err(), "{bad:?} accepted");
    }
    assert!(validate_path(&"x".repeat(MAX_PATH_BYTES)).is_ok());
    assert!(validate_path(&"x".repeat(MAX_PATH_BYTES + 1)).is_err());
}
