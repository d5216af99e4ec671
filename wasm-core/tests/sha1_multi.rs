//! Multi-buffer SHA-1 against the RustCrypto `sha1` crate and the FIPS 180 vectors.
//! Runs natively (portable lanes) and in Wasm (simd128 lanes, via wasm-bindgen-test).
use sha1::Digest;
use wasm_core::chunk::test_bytes;
use wasm_core::hash::{sha1_many, sha1_many_flat, to_hex, Fingerprint};

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn reference(m: &[u8]) -> Fingerprint {
    sha1::Sha1::digest(m).into()
}

fn check_batch(buf: &[u8], ranges: &[(usize, usize)]) {
    let mut out = vec![[0u8; 20]; ranges.len()];
    sha1_many(buf, ranges, &mut out);
    let mut lanes = vec![[0u8; 20]; ranges.len()];
    wasm_core::hash::multi::sha1_many_portable(buf, ranges, &mut lanes);
    for (i, &(o, l)) in ranges.iter().enumerate() {
        let want = reference(&buf[o..o + l]);
        assert_eq!(out[i], want, "msg {i} off {o} len {l}");
        assert_eq!(lanes[i], want, "portable lanes: msg {i} off {o} len {l}");
    }
}

#[test]
fn fips_vectors() {
    let million_a = vec![b'a'; 1_000_000];
    let msgs: [(&[u8], &str); 5] = [
        (b"", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        (b"abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
        ),
        (
            b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
            "a49b2446a02c645bf419f995b67091253a04a259",
        ),
        (&million_a, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"),
    ];
    // One at a time and all in one batch.
    let mut buf = Vec::new();
    let mut ranges = Vec::new();
    for (m, want) in msgs {
        let mut out = [[0u8; 20]; 1];
        sha1_many(m, &[(0, m.len())], &mut out);
        assert_eq!(to_hex(&out[0]), want);
        ranges.push((buf.len(), m.len()));
        buf.extend_from_slice(m);
    }
    let mut flat = vec![0u8; 20 * msgs.len()];
    sha1_many_flat(&buf, &ranges, &mut flat);
    for (i, (_, want)) in msgs.iter().enumerate() {
        let fp: Fingerprint = flat[20 * i..20 * i + 20].try_into().unwrap();
        assert_eq!(&to_hex(&fp), want);
    }
}

#[test]
fn every_length_up_to_1100_in_one_batch() {
    let lens: Vec<usize> = (0..=1100).collect();
    let total: usize = lens.iter().sum();
    let buf = test_bytes(1, total);
    let mut ranges = Vec::new();
    let mut at = 0;
    for l in lens {
        ranges.push((at, l));
        at += l;
    }
    check_batch(&buf, &ranges);
    // Reversed order: lanes finish at different times in a different pattern.
    ranges.reverse();
    check_batch(&buf, &ranges);
}

#[test]
fn boundary_lengths_and_batch_sizes() {
    let buf = test_bytes(2, 200_000);
    let special = [55usize, 56, 63, 64, 65, 119, 120, 0, 1, 127, 128, 129];
    for n in 1..=17 {
        let ranges: Vec<(usize, usize)> = (0..n)
            .map(|i| (i * 977 % 5000, special[(i * 7 + n) % special.len()]))
            .collect();
        check_batch(&buf, &ranges);
        // Overlapping and unaligned ranges are fine: the buffer is only read.
        let ranges: Vec<(usize, usize)> = (0..n).map(|i| (i * 3 + 1, 1000 * i + 55)).collect();
        check_batch(&buf, &ranges);
    }
}

#[test]
fn assorted_lengths_up_to_past_64k() {
    let buf = test_bytes(3, 600_000);
    let mut lens = test_bytes(4, 400)
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()) as usize % 70_000)
        .collect::<Vec<_>>();
    lens.extend([65_535, 65_536, 65_537, 70_000, 131_072]);
    let mut ranges = Vec::new();
    let mut at = 0;
    for l in lens {
        if at + l > buf.len() {
            at = 0;
        }
        ranges.push((at, l));
        at += l;
    }
    check_batch(&buf, &ranges);
}
