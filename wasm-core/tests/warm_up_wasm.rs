//! The search workers' warm-up, inside Wasm (Node): it scans every chunk of the synthetic set,
//! through the frame it fetched, for both keyword sets every round. A warm-up that failed or
//! skipped its work would leave the first real search in baseline code without a word.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::*;
use wasm_core::bindings::search::search_warm_up;
use wasm_core::warm_up::synthetic;

#[wasm_bindgen_test]
fn the_search_warm_up_scans_every_chunk_for_both_keyword_sets() {
    let raw = synthetic().raw_bytes() as f64;
    assert_eq!(search_warm_up(2).ok().unwrap(), 2.0 * 2.0 * raw);
}
