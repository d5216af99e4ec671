//! Chunkers inside Wasm (Node): the simd128 fast path of the two-stage chunker gives the
//! scalar reference's cut points on random, text-like, zero and mixed data, for several
//! configurations, and the pinned format-v1 vectors hold in Wasm too.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::*;
use wasm_core::chunk::twostage::{test_text, TwoStage};
use wasm_core::chunk::{chunk_all, test_bytes, CutPoint};

#[wasm_bindgen_test]
fn twostage_simd_equals_scalar() {
    let mut mixed = test_text(5, 400_000);
    mixed[100_000..150_000].fill(0);
    mixed[200_000..260_000].copy_from_slice(&test_bytes(6, 60_000));
    let inputs = [
        test_bytes(1, 600_000),
        test_text(2, 600_000),
        vec![0u8; 100_000],
        mixed,
    ];
    let configs = [
        TwoStage::default_config(),
        TwoStage::new(64, 1024, 4096, 2).unwrap(),
        TwoStage::new(100, 700, 1500, 0).unwrap(),
        TwoStage::new(4096, 16384, 65536, 3).unwrap(),
    ];
    for (i, data) in inputs.iter().enumerate() {
        for c in &configs {
            // Every start offset class: the SIMD loop and its scalar tail meet at
            // different places depending on `start`.
            for shift in [0usize, 1, 7, 13] {
                let d = &data[shift..];
                let mut s = 0;
                while s < d.len() {
                    let e = c.cut(d, s);
                    assert_eq!(
                        e,
                        c.cut_scalar(d, s),
                        "input {i} shift {shift} {c:?} at {s}"
                    );
                    s = e;
                }
            }
        }
    }
}

#[wasm_bindgen_test]
fn twostage_pinned_vectors_in_wasm() {
    let img = include_bytes!("../testdata/SekienAkashita.jpg");
    let ends: Vec<usize> = chunk_all(&TwoStage::default_config(), img)
        .iter()
        .map(|(o, l)| o + l)
        .collect();
    assert_eq!(
        ends,
        [10114, 21052, 29348, 37480, 45260, 54983, 64095, 72070, 85213, 94386, 102720, 109466]
    );
}

#[wasm_bindgen_test]
fn sscdc_segments_equal_sequential_in_wasm() {
    use wasm_core::chunk::sscdc::chunk_segmented;
    let mut data = test_text(12, 200_000);
    data[60_000..100_000].copy_from_slice(&test_bytes(13, 40_000));
    for c in [
        TwoStage::default_config(),
        TwoStage::new(64, 512, 2048, 1).unwrap(),
    ] {
        let want = chunk_all(&c, &data);
        for seg in [1usize, 33, 4096, 50_000, 300_000] {
            assert_eq!(chunk_segmented(&c, &data, seg), want, "segment {seg}");
        }
    }
}
