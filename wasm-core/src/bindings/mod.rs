//! The wasm-bindgen surface the Web Workers call, one module per concern. Thin wrappers
//! only: the work is done by the plain Rust modules, which are tested natively and in Wasm.
//!
//! - [`hashing`]: plain SHA-1 of whole files (`FileHasher`).
//! - [`chunk_engine`]: chunking and fingerprinting one file (`ChunkEngine`, `RecipeHints`).
//! - [`segments`]: one segment of a large file split across workers (`SegmentChunker`).
//! - [`upload`]: a worker's new chunks, compressed and packed for upload (`NewChunkBatch`).
//! - [`restore`]: verifying fetched chunks (`RestoreSession`, `fingerprintMany`).
//! - [`bundle`]: bundles built and read on the page's thread (`BundleBuilder`,
//!   `bundleEntries`, `wasmMemory`).
//! - [`locations`]: a version's chunk locations read on the page's thread
//!   (`readLocations`).
//! - [`search_answer`]: the server's search answer read on the page's thread
//!   (`readSearchAnswer`).
//! - [`search`]: DedupSearch and the naive baseline (`SearchKeywords`, `ContainerScan`, ...).
//! - [`heap`]: memory grown and touched ahead of a worker's work (`HeapReserve`).
//! - `bench` (cargo feature `bench`, off by default): exports only the Wasm benchmarks
//!   call, kept out of the page's Wasm.
//!
//! Everything exported here is called from `web/src` (the workers, the page's own instance
//! for bundles, locations and search answers, or the vitest tests that drive the engine as a worker does); an export
//! nothing calls is removed, not kept.

use wasm_bindgen::prelude::*;

use crate::chunk;

pub mod bundle;
pub mod chunk_engine;
pub mod hashing;
pub mod heap;
pub mod locations;
pub mod restore;
pub mod search;
pub mod search_answer;
pub mod segments;
pub mod upload;

#[cfg(feature = "bench")]
pub mod bench;

pub use bundle::{bundle_entries, wasm_memory, BundleBuilder};
pub use chunk_engine::{ChunkEngine, RecipeHints};
pub use hashing::{sha1_hex, FileHasher};
pub use heap::HeapReserve;
pub use locations::{read_locations, LocationTable};
pub use restore::{fingerprint_many, RestoreAnswer, RestoreSession};
pub use search_answer::{read_search_answer, SearchAnswerTable};
pub use segments::SegmentChunker;
pub use upload::NewChunkBatch;

fn js_err(e: String) -> JsError {
    JsError::new(&e)
}

fn build_chunker(
    kind: &str,
    min: Option<u32>,
    avg: Option<u32>,
    max: Option<u32>,
    level: Option<u32>,
) -> Result<chunk::DynChunker, JsError> {
    chunk::make_chunker_or_default(
        kind,
        min.map(|v| v as usize),
        avg.map(|v| v as usize),
        max.map(|v| v as usize),
        level,
    )
    .map_err(js_err)
}
