//! Upload batches: a worker's new chunks, compressed in Wasm memory and copied out to the
//! page once per batch.

use wasm_bindgen::prelude::*;

use super::{ChunkEngine, SegmentChunker};
use crate::hash;

/// The new chunks of a worker, collected until the page takes them: compressed straight
/// from the chunker's buffer in Wasm memory and copied out once per batch. (Copying each
/// push's bytes to JS, packing, then concatenating made three short-lived buffers per MiB
/// read, which V8 frees only at its next GC: tens of MiB per worker.)
#[wasm_bindgen]
pub struct NewChunkBatch {
    comp: crate::compress::Compressor,
    fps: Vec<u8>,
    codecs: Vec<u8>,
    raw_lengths: Vec<u32>,
    stored_lengths: Vec<u32>,
    stored: Vec<u8>,
}

#[wasm_bindgen]
impl NewChunkBatch {
    /// `level`: zstd level; a chunk is stored compressed only when that saves >= 3 %.
    #[wasm_bindgen(constructor)]
    pub fn new(level: i32) -> Result<NewChunkBatch, JsError> {
        Ok(NewChunkBatch {
            comp: crate::compress::Compressor::new(level)
                .map_err(|e| JsError::new(&e.to_string()))?,
            fps: Vec::new(),
            codecs: Vec::new(),
            raw_lengths: Vec::new(),
            stored_lengths: Vec::new(),
            stored: Vec::new(),
        })
    }

    fn add(&mut self, fp: &[u8], raw: &[u8]) {
        let (codec, stored) = self.comp.compress(raw);
        self.fps.extend_from_slice(fp);
        self.codecs.push(codec);
        self.raw_lengths.push(raw.len() as u32);
        self.stored_lengths.push(stored.len() as u32);
        self.stored.extend_from_slice(stored);
    }

    /// Adds chunks `indices` of the engine's last batch.
    #[wasm_bindgen(js_name = addFromEngine)]
    pub fn add_from_engine(
        &mut self,
        engine: &ChunkEngine,
        indices: &[u32],
    ) -> Result<(), JsError> {
        let (offsets, lengths, fps) = (
            engine.p.offsets(),
            engine.p.lengths(),
            engine.p.fingerprints(),
        );
        let bytes = engine.p.batch_bytes();
        for &i in indices {
            let i = i as usize;
            if i >= offsets.len() {
                return Err(JsError::new("addFromEngine: no such chunk in the batch"));
            }
            let rel = (offsets[i] - offsets[0]) as usize;
            let raw = &bytes[rel..rel + lengths[i] as usize];
            let fp = &fps[i * hash::FINGERPRINT_LEN..(i + 1) * hash::FINGERPRINT_LEN];
            self.add(fp, raw);
        }
        Ok(())
    }

    /// Adds chunks `indices` of the segment's selected chunks (after `hash`).
    #[wasm_bindgen(js_name = addFromSegment)]
    pub fn add_from_segment(
        &mut self,
        seg: &SegmentChunker,
        indices: &[u32],
    ) -> Result<(), JsError> {
        for &i in indices {
            let i = i as usize;
            let raw = seg
                .chunk_bytes(i)
                .ok_or_else(|| JsError::new("addFromSegment: no such chunk (hash first)"))?;
            let fp = &seg.fingerprints[i * hash::FINGERPRINT_LEN..(i + 1) * hash::FINGERPRINT_LEN];
            self.add(fp, raw);
        }
        Ok(())
    }

    /// Chunks collected.
    pub fn count(&self) -> u32 {
        self.codecs.len() as u32
    }

    /// Stored (possibly compressed) bytes collected.
    #[wasm_bindgen(js_name = storedSize)]
    pub fn stored_size(&self) -> u32 {
        self.stored.len() as u32
    }

    pub fn fps(&self) -> Vec<u8> {
        self.fps.clone()
    }
    pub fn codecs(&self) -> Vec<u8> {
        self.codecs.clone()
    }
    #[wasm_bindgen(js_name = rawLengths)]
    pub fn raw_lengths(&self) -> Vec<u32> {
        self.raw_lengths.clone()
    }
    #[wasm_bindgen(js_name = storedLengths)]
    pub fn stored_lengths(&self) -> Vec<u32> {
        self.stored_lengths.clone()
    }
    /// Stored bytes of all collected chunks, back to back.
    pub fn stored(&self) -> Vec<u8> {
        self.stored.clone()
    }

    /// Empties the batch (keeps its capacity: the next batch reuses the Wasm memory).
    pub fn clear(&mut self) {
        self.fps.clear();
        self.codecs.clear();
        self.raw_lengths.clear();
        self.stored_lengths.clear();
        self.stored.clear();
    }
}
