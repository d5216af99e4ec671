//! Chunking one file in a worker: [`ChunkEngine`], with the previous version's recipes
//! ([`RecipeHints`]) to predict chunks from (RapidCDC).
//!
//! ```js
//! const eng = new ChunkEngine("default");            // or ("fastcdc", 2048, 8192, 65536, 1)
//! // or, predicting chunks from the previous version (cuts identical to "default"):
//! const hints = new RecipeHints(fps, lengths, counts); // all its files' recipes, once
//! const eng = ChunkEngine.withHints(hints, prevFileIndex); // -1: no previous file
//! for await (const block of file.stream()) {         // blocks of any size
//!   if (eng.push(block) > 0) take(eng);
//! }
//! if (eng.finish() > 0) take(eng);
//! function take(eng) {
//!   const off = eng.offsets();       // Float64Array: absolute file offsets (exact < 2^53)
//!   const len = eng.lengths();       // Uint32Array
//!   const fps = eng.fingerprints();  // Uint8Array, 20 bytes per chunk: lookup keys
//!   // (plain SHA-1); before storing chunks, eng.confirm(indices) makes theirs fingerprints
//!   // chunk bytes: the caller's blocks, by offsets/lengths (or NewChunkBatch.addFromEngine)
//! }
//! eng.free();
//! ```
//!
//! Contract:
//! - Every `push`/`finish` returns the number of chunks it completed: the *batch*. The
//!   accessors describe that batch only, and are replaced by the next `push`/`finish`
//!   (copy what you need first). Batches come in file order, without gaps: concatenated
//!   they cover the file exactly; the last chunk appears after `finish`.
//! - Each accessor returns a fresh copy (typed arrays owned by JS; no per-chunk objects).
//!   New chunks' bytes go to upload batches inside Wasm memory
//!   ([`super::upload::NewChunkBatch`]), never copied out per chunk.
//! - Cut points do not depend on how the file is split into blocks, and equal the
//!   native chunkers' (same Rust code). Blocks of 256 KiB-4 MiB amortise call overhead.
//! - `push` after `finish` throws. Kinds: see [`crate::chunk::make_chunker`]; `"default"`
//!   is [`crate::chunk::DEFAULT_CHUNKER`].

use wasm_bindgen::prelude::*;

use std::sync::Arc;

use super::{build_chunker, js_err};
use crate::chunk::{self, pipeline::ChunkPipeline, rapidfpt};
use crate::hash;

/// The previous version's recipes (every file's, in order) for exact RapidCDC
/// predictions ([`chunk::rapidfpt`]); built once per backup, shared by its engines.
#[wasm_bindgen]
pub struct RecipeHints {
    inner: Arc<rapidfpt::PrevRecipes>,
}

#[wasm_bindgen]
impl RecipeHints {
    /// `fps`: 20 bytes per chunk; `lengths`: one per chunk; `counts[f]`: chunks of file `f`.
    #[wasm_bindgen(constructor)]
    pub fn new(fps: &[u8], lengths: &[u32], counts: &[u32]) -> Result<RecipeHints, JsError> {
        if fps.len() != lengths.len() * hash::FINGERPRINT_LEN {
            return Err(JsError::new(
                "RecipeHints: need 20 fingerprint bytes per length",
            ));
        }
        let fps = fps
            .chunks_exact(hash::FINGERPRINT_LEN)
            .map(|c| c.try_into().expect("20 bytes"))
            .collect();
        let inner = rapidfpt::PrevRecipes::new(fps, lengths.to_vec(), counts).map_err(js_err)?;
        Ok(RecipeHints {
            inner: Arc::new(inner),
        })
    }
}

/// Chunks one file and fingerprints every chunk; see the module documentation.
#[wasm_bindgen]
pub struct ChunkEngine {
    pub(super) p: ChunkPipeline,
    finished: bool,
    rapid: Option<Arc<rapidfpt::RapidFpt>>,
}

#[wasm_bindgen]
impl ChunkEngine {
    /// `kind`: "default", "fastcdc", "twostage", "inck", "fixed", ...; sizes in bytes;
    /// omitted parameters take the kind's defaults.
    #[wasm_bindgen(constructor)]
    pub fn new(
        kind: &str,
        min: Option<u32>,
        avg: Option<u32>,
        max: Option<u32>,
        level: Option<u32>,
    ) -> Result<ChunkEngine, JsError> {
        Ok(ChunkEngine {
            p: ChunkPipeline::new(build_chunker(kind, min, avg, max, level)?),
            finished: false,
            rapid: None,
        })
    }

    /// The `"default"` chunker, predicting each next chunk from `hints` (RapidCDC with
    /// the fingerprint test): the same chunks and fingerprints as `new("default")`, found
    /// with less scanning where the file repeats the previous version. `file`: index of
    /// this file's previous version in `hints` (its first chunk is predicted first), or -1.
    #[wasm_bindgen(js_name = withHints)]
    pub fn with_hints(hints: &RecipeHints, file: i32) -> ChunkEngine {
        let (kind, min, avg, max, level) = chunk::DEFAULT_CHUNKER;
        assert_eq!(
            kind, "twostage",
            "rapidfpt predicts for the two-stage chunker"
        );
        let inner = chunk::twostage::TwoStage::new(min, avg, max, level).expect("valid default");
        let file = usize::try_from(file).ok();
        let rapid = Arc::new(rapidfpt::RapidFpt::new(inner, hints.inner.clone(), file));
        ChunkEngine {
            p: ChunkPipeline::new(Box::new(rapid.clone())),
            finished: false,
            rapid: Some(rapid),
        }
    }

    /// Chunks so far whose end was predicted and matched by its lookup key (no scan); 0
    /// without hints.
    pub fn predicted(&self) -> u32 {
        self.rapid
            .as_ref()
            .map_or(0, |r| r.stats().predicted as u32)
    }

    /// Feeds the next block of the file; returns the number of chunks completed.
    pub fn push(&mut self, block: &[u8]) -> Result<u32, JsError> {
        if self.finished {
            return Err(JsError::new("ChunkEngine.push after finish"));
        }
        Ok(self.p.push(block) as u32)
    }

    /// Ends the file; returns the number of chunks in the final batch.
    pub fn finish(&mut self) -> Result<u32, JsError> {
        if self.finished {
            return Err(JsError::new("ChunkEngine.finish called twice"));
        }
        self.finished = true;
        Ok(self.p.finish() as u32)
    }

    /// Absolute file offsets of the last batch's chunks (Float64Array).
    pub fn offsets(&self) -> Vec<f64> {
        self.p.offsets().iter().map(|&o| o as f64).collect()
    }

    /// Lengths of the last batch's chunks (Uint32Array).
    pub fn lengths(&self) -> Vec<u32> {
        self.p.lengths().to_vec()
    }

    /// The last batch's chunks' lookup keys (plain SHA-1), or fingerprints where confirmed:
    /// 20 bytes each (Uint8Array).
    pub fn fingerprints(&self) -> Vec<u8> {
        self.p.fingerprints().to_vec()
    }

    /// Confirms chunks `indices` of the last batch before they are stored: their keys
    /// become their fingerprints ([`crate::hash::confirm_flat`]; read them again with
    /// `fingerprints()`). Returns how many changed (chunks holding a collision-attack block).
    pub fn confirm(&mut self, indices: &[u32]) -> Result<u32, JsError> {
        Ok(self.p.confirm(indices).map_err(js_err)? as u32)
    }
}
