//! The wasm-bindgen surface the Web Workers call. Thin wrappers only: the work is done
//! by the plain Rust modules, which are tested natively and in Wasm.
//!
//! # Chunking a file in a worker: [`ChunkEngine`]
//!
//! ```js
//! const eng = new ChunkEngine("default");            // or ("fastcdc", 2048, 8192, 65536, 1)
//!                                // or ChunkEngine.forFile(name, first16Bytes): fixed-size
//!                                // chunks for zip/gz/jpeg/png/mp4/... (PRUNE §4.3)
//! eng.setHints(prevFps, prevLengths);                // optional: RapidCDC, previous recipe
//!                                                    // (Uint8Array 20*n, Uint32Array n)
//! for await (const block of file.stream()) {         // blocks of any size
//!   if (eng.push(block) > 0) take(eng);
//! }
//! if (eng.finish() > 0) take(eng);
//! function take(eng) {
//!   const off = eng.offsets();       // Float64Array: absolute file offsets (exact < 2^53)
//!   const len = eng.lengths();       // Uint32Array
//!   const fps = eng.fingerprints();  // Uint8Array, 20 bytes (SHA-1) per chunk
//!   const bytes = eng.batchBytes();  // Uint8Array: all chunks of this batch, contiguous
//!   // chunk i = bytes.subarray(off[i] - off[0], off[i] - off[0] + len[i])
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
//!   `batchBytes()` is the only copy of chunk data needed to upload new chunks; callers
//!   that keep their own blocks may instead slice them by `offsets`/`lengths`.
//! - Cut points do not depend on how the file is split into blocks, and equal the
//!   native chunkers' (same Rust code). Blocks of 256 KiB-4 MiB amortise call overhead.
//! - `push` after `finish` throws. Kinds: see [`crate::chunk::make_chunker`]; `"default"`
//!   is [`crate::chunk::DEFAULT_CHUNKER`].
//!
//! Other exports: `sha1Many` (batch SHA-1 of ranges of one buffer), `FileHasher` and
//! `sha1Hex` (whole-file SHA-1), `ByteBuffer` + `bench*` (benchmarks: data resident in
//! Wasm memory, written by JS through `wasmMemory()`).

use wasm_bindgen::prelude::*;

use crate::chunk::{self, pipeline::ChunkPipeline};
use crate::hash;

/// Streaming SHA-1 of one file, fed the blocks of `File.stream()` in order.
#[wasm_bindgen]
pub struct FileHasher {
    inner: Option<hash::StreamingSha1>,
}

#[wasm_bindgen]
impl FileHasher {
    #[wasm_bindgen(constructor)]
    pub fn new() -> FileHasher {
        FileHasher {
            inner: Some(hash::StreamingSha1::new()),
        }
    }

    pub fn update(&mut self, block: &[u8]) -> Result<(), JsError> {
        match self.inner.as_mut() {
            Some(h) => {
                h.update(block);
                Ok(())
            }
            None => Err(JsError::new("FileHasher.update after finish")),
        }
    }

    /// Finishes the digest and returns it as lower-case hex.
    pub fn finish(&mut self) -> Result<String, JsError> {
        let h = self
            .inner
            .take()
            .ok_or_else(|| JsError::new("FileHasher.finish called twice"))?;
        Ok(hash::to_hex(&h.finish()))
    }
}

impl Default for FileHasher {
    fn default() -> Self {
        Self::new()
    }
}

/// One-shot SHA-1 as hex (small inputs, tests).
#[wasm_bindgen(js_name = sha1Hex)]
pub fn sha1_hex(data: &[u8]) -> String {
    hash::to_hex(&hash::sha1(data))
}

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

/// Chunks one file and fingerprints every chunk; see the module documentation.
#[wasm_bindgen]
pub struct ChunkEngine {
    p: ChunkPipeline,
    finished: bool,
    started: bool,
    kind: String,
    params: (Option<u32>, Option<u32>, Option<u32>, Option<u32>),
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
            started: false,
            kind: kind.to_string(),
            params: (min, avg, max, level),
        })
    }

    /// RapidCDC hints from the previous version of this file (or of the whole source):
    /// its chunks in order, `fps` 20 bytes each and `lengths`. With `markers` (the last
    /// byte of each chunk) suggestions are accepted by the marker test, else by the
    /// rolling-window test. Call before the first `push`; only for "default", "twostage"
    /// and "fastcdc". Chunks may then differ slightly from plain chunking (RapidCDC's
    /// trade-off), still independent of the block split.
    #[wasm_bindgen(js_name = setHints)]
    pub fn set_hints(
        &mut self,
        fps: &[u8],
        lengths: &[u32],
        markers: Option<Vec<u8>>,
    ) -> Result<(), JsError> {
        if self.started || self.finished {
            return Err(JsError::new("ChunkEngine.setHints after push"));
        }
        if fps.len() != lengths.len() * hash::FINGERPRINT_LEN {
            return Err(JsError::new(
                "setHints: need 20 fingerprint bytes per length",
            ));
        }
        let fps: Vec<hash::Fingerprint> = fps
            .chunks_exact(hash::FINGERPRINT_LEN)
            .map(|c| c.try_into().expect("20 bytes"))
            .collect();
        let markers = markers.unwrap_or_default();
        let (min, avg, max, level) = self.params;
        let c = chunk::make_rapid_chunker(
            &self.kind,
            min.map(|v| v as usize),
            avg.map(|v| v as usize),
            max.map(|v| v as usize),
            level,
            &fps,
            lengths,
            &markers,
        )
        .map_err(js_err)?;
        self.p = ChunkPipeline::new(c);
        Ok(())
    }

    /// Context-aware choice (PRUNE §4.3): fixed-size chunks for compressed / media files
    /// (by extension or by the first bytes, `head`: pass at least 16 when available),
    /// the default chunker otherwise.
    #[wasm_bindgen(js_name = forFile)]
    pub fn for_file(name: &str, head: &[u8]) -> Result<ChunkEngine, JsError> {
        let policy = chunk::policy::Policy::default();
        let fixed = policy.classify(name, head) == chunk::policy::FileClass::Immutable;
        let (kind, avg) = if fixed {
            ("fixed", Some(policy.fixed_size as u32))
        } else {
            ("default", None)
        };
        ChunkEngine::new(kind, None, avg, None, None)
    }

    /// Feeds the next block of the file; returns the number of chunks completed.
    pub fn push(&mut self, block: &[u8]) -> Result<u32, JsError> {
        if self.finished {
            return Err(JsError::new("ChunkEngine.push after finish"));
        }
        self.started = true;
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

    /// SHA-1 of the last batch's chunks, 20 bytes each (Uint8Array).
    pub fn fingerprints(&self) -> Vec<u8> {
        self.p.fingerprints().to_vec()
    }

    /// The bytes of the last batch's chunks, contiguous (Uint8Array).
    #[wasm_bindgen(js_name = batchBytes)]
    pub fn batch_bytes(&self) -> Vec<u8> {
        self.p.batch_bytes().to_vec()
    }

    /// Bytes fed so far.
    pub fn position(&self) -> f64 {
        self.p.position() as f64
    }
}

/// SHA-1 of many ranges of one buffer (multi-buffer SIMD): 20 bytes per range.
#[wasm_bindgen(js_name = sha1Many)]
pub fn sha1_many(buf: &[u8], offsets: &[u32], lengths: &[u32]) -> Result<Vec<u8>, JsError> {
    let ranges = checked_ranges(buf.len(), offsets, lengths)?;
    let mut out = vec![0u8; ranges.len() * hash::FINGERPRINT_LEN];
    hash::sha1_many_flat(buf, &ranges, &mut out);
    Ok(out)
}

fn checked_ranges(
    buf_len: usize,
    offsets: &[u32],
    lengths: &[u32],
) -> Result<Vec<(usize, usize)>, JsError> {
    if offsets.len() != lengths.len() {
        return Err(JsError::new("offsets and lengths differ in length"));
    }
    let mut ranges = Vec::with_capacity(offsets.len());
    for (&o, &l) in offsets.iter().zip(lengths) {
        let (o, l) = (o as usize, l as usize);
        if o + l > buf_len {
            return Err(JsError::new("range outside the buffer"));
        }
        ranges.push((o, l));
    }
    Ok(ranges)
}

/// Linear memory, so JS can write straight into a [`ByteBuffer`].
#[wasm_bindgen(js_name = wasmMemory)]
pub fn wasm_memory() -> JsValue {
    wasm_bindgen::memory()
}

/// Bytes held in Wasm memory (benchmarks: one copy in, then measured calls without any
/// JS-to-Wasm copying). Write through `new Uint8Array(wasmMemory().buffer, b.ptr(), b.len())`.
#[wasm_bindgen]
pub struct ByteBuffer {
    data: Vec<u8>,
}

#[wasm_bindgen]
impl ByteBuffer {
    #[wasm_bindgen(constructor)]
    pub fn new(len: usize) -> ByteBuffer {
        ByteBuffer { data: vec![0; len] }
    }
    pub fn ptr(&self) -> usize {
        self.data.as_ptr() as usize
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    #[wasm_bindgen(js_name = isEmpty)]
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Benchmark: chunks the buffer (no hashing); returns the number of chunks.
#[wasm_bindgen(js_name = benchChunk)]
pub fn bench_chunk(
    buf: &ByteBuffer,
    kind: &str,
    min: Option<u32>,
    avg: Option<u32>,
    max: Option<u32>,
    level: Option<u32>,
) -> Result<u32, JsError> {
    let c = build_chunker(kind, min, avg, max, level)?;
    let (data, mut start, mut n) = (&buf.data[..], 0, 0u32);
    while start < data.len() {
        start = c.cut(data, start);
        n += 1;
    }
    Ok(n)
}

/// Benchmark: SHA-1 of ranges of the buffer; `multi` picks the 4-lane SIMD path, else the
/// scalar `sha1` crate one chunk at a time. Returns the XOR of all digests' first bytes
/// (so the work cannot be optimised away).
#[wasm_bindgen(js_name = benchSha1)]
pub fn bench_sha1(
    buf: &ByteBuffer,
    offsets: &[u32],
    lengths: &[u32],
    multi: bool,
) -> Result<u32, JsError> {
    let ranges = checked_ranges(buf.data.len(), offsets, lengths)?;
    let mut x = 0u32;
    if multi {
        // Batches of ~2 MiB, like a worker would do.
        let mut out = Vec::new();
        let mut i = 0;
        while i < ranges.len() {
            let mut j = i;
            let mut bytes = 0;
            while j < ranges.len() && bytes < 2 << 20 {
                bytes += ranges[j].1;
                j += 1;
            }
            out.resize((j - i) * hash::FINGERPRINT_LEN, 0);
            hash::sha1_many_flat(&buf.data, &ranges[i..j], &mut out);
            for d in out.chunks_exact(hash::FINGERPRINT_LEN) {
                x ^= d[0] as u32;
            }
            i = j;
        }
    } else {
        for &(o, l) in &ranges {
            x ^= hash::sha1(&buf.data[o..o + l])[0] as u32;
        }
    }
    Ok(x)
}

/// Benchmark: the full worker pipeline ([`ChunkEngine`] without the JS copies), fed
/// `block` bytes at a time; returns the number of chunks.
#[wasm_bindgen(js_name = benchPipeline)]
pub fn bench_pipeline(
    buf: &ByteBuffer,
    block: usize,
    kind: &str,
    min: Option<u32>,
    avg: Option<u32>,
    max: Option<u32>,
    level: Option<u32>,
) -> Result<u32, JsError> {
    let mut p = ChunkPipeline::new(build_chunker(kind, min, avg, max, level)?);
    let mut n = 0;
    for b in buf.data.chunks(block.max(1)) {
        n += p.push(b);
    }
    n += p.finish();
    Ok(n as u32)
}
