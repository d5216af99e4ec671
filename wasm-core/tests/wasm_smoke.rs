//! Runs inside Wasm (Node, via wasm-bindgen-test-runner): the SIMD build computes the
//! same SHA-1 as the reference crate, for fingerprints and for whole-file checksums.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::*;

#[wasm_bindgen_test]
fn sha1_in_wasm_matches_reference() {
    use sha1::Digest;
    let data: Vec<u8> = (0..70_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    for len in [0usize, 1, 55, 56, 64, 65, 4096, 70_000] {
        let want: [u8; 20] = sha1::Sha1::digest(&data[..len]).into();
        assert_eq!(
            wasm_core::hash::fingerprint(&data[..len]),
            want,
            "len {len}"
        );
        let mut h = wasm_core::bindings::FileHasher::new();
        h.update(&data[..len / 2]).unwrap();
        h.update(&data[len / 2..len]).unwrap();
        assert_eq!(h.finish().unwrap(), wasm_core::hash::to_hex(&want));
    }
}
