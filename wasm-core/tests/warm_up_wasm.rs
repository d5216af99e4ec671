//! The read side's warm-ups, inside Wasm (Node): the restore workers' verifies the whole
//! synthetic set every round, and the search workers' scans all of its chunks, through the
//! frame it fetched, for both keyword sets every round. A warm-up that failed or skipped its
//! work would leave the first real request in baseline code without a word.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::*;
use wasm_core::bindings::{restore::restore_warm_up, search::search_warm_up};
use wasm_core::warm_up::synthetic;

#[wasm_bindgen_test]
fn the_restore_warm_up_verifies_the_whole_set_every_round() {
    let raw = synthetic().raw_bytes();
    assert_eq!(restore_warm_up(2) as usize, 2 * raw);
}

#[wasm_bindgen_test]
fn the_search_warm_up_scans_every_chunk_for_both_keyword_sets() {
    let raw = synthetic().raw_bytes() as f64;
    assert_eq!(search_warm_up(2).ok().unwrap(), 2.0 * 2.0 * raw);
}
