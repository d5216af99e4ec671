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
//! // or, exact (cuts identical to "default"): predictions from the previous version
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
//! Other exports: `fingerprintMany` (chunk fingerprints of ranges of one buffer),
//! `FileHasher` and `sha1Hex` (plain SHA-1 of a whole file, a checksum, not a fingerprint), `ByteBuffer` + `bench*` (benchmarks: data resident in
//! Wasm memory, written by JS through `wasmMemory()`).

use wasm_bindgen::prelude::*;

use std::sync::Arc;

use crate::chunk::{self, pipeline::ChunkPipeline, rapidfpt};
use crate::hash;

/// Streaming plain SHA-1 of one file (the checksum `sha1sum` prints), fed the blocks of
/// `File.stream()` in order.
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

/// One-shot plain SHA-1 as hex (small inputs, tests).
#[wasm_bindgen(js_name = sha1Hex)]
pub fn sha1_hex(data: &[u8]) -> String {
    let mut h = hash::StreamingSha1::new();
    h.update(data);
    hash::to_hex(&h.finish())
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

    /// Chunks described.
    pub fn chunks(&self) -> u32 {
        self.inner.len() as u32
    }
}

/// Chunks one file and fingerprints every chunk; see the module documentation.
#[wasm_bindgen]
pub struct ChunkEngine {
    p: ChunkPipeline,
    finished: bool,
    started: bool,
    kind: String,
    params: (Option<u32>, Option<u32>, Option<u32>, Option<u32>),
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
            started: false,
            kind: kind.to_string(),
            params: (min, avg, max, level),
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
            started: false,
            kind: "default".into(),
            params: (None, None, None, None),
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
        if self.rapid.is_some() {
            return Err(JsError::new(
                "ChunkEngine.setHints on an engine made by withHints",
            ));
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

/// One segment of a large file, chunked by one worker while other workers take the
/// other segments (SS-CDC: stage 1 per segment in parallel, stage 2 chained). The result,
/// chained over the segments, is exactly `ChunkEngine("default")` on the whole file.
///
/// ```js
/// const seg = new SegmentChunker(fileSize, start, stop);  // chunks that START in start..stop
/// // read file bytes seg.readFrom() .. seg.readTo() (32 bytes of history before `start`,
/// // up to 64 KiB after `stop` for the last chunk) and push them in order
/// seg.push(block); ...; seg.scan();                       // stage 1 (the parallel part)
/// const n = seg.select(entry);  // entry: previous segment's seg.exit(), 0 for the first
/// const next = seg.exit();      // hand to the next segment's worker now
/// seg.hash();                   // then offsets()/lengths()/fingerprints() of the n chunks
/// ```
#[wasm_bindgen]
pub struct SegmentChunker {
    cfg: chunk::twostage::TwoStage,
    file_len: u64,
    start: u64,
    stop: u64,
    from: u64,
    to: u64,
    buf: Vec<u8>,
    bitmap: Option<chunk::sscdc::SegmentBitmap>,
    ends: Vec<u64>,
    entry: u64,
    exit: Option<u64>,
    ranges: Vec<(usize, usize)>,
    fingerprints: Vec<u8>,
}

fn exact_u64(v: f64, what: &str) -> Result<u64, JsError> {
    if v >= 0.0 && v.fract() == 0.0 && v <= (1u64 << 53) as f64 {
        Ok(v as u64)
    } else {
        Err(JsError::new(&format!("{what}: not a byte offset: {v}")))
    }
}

#[wasm_bindgen]
impl SegmentChunker {
    /// The default chunker's segment of `start..stop` of a file of `file_len` bytes.
    #[wasm_bindgen(constructor)]
    pub fn new(file_len: f64, start: f64, stop: f64) -> Result<SegmentChunker, JsError> {
        let (file_len, start, stop) = (
            exact_u64(file_len, "file length")?,
            exact_u64(start, "segment start")?,
            exact_u64(stop, "segment stop")?,
        );
        if start > stop || stop > file_len {
            return Err(JsError::new("segment outside the file"));
        }
        // The segment path implements twostage only; "default" must be exactly that.
        let (kind, min, avg, max, level) = chunk::DEFAULT_CHUNKER;
        debug_assert_eq!(kind, "twostage");
        let cfg = chunk::twostage::TwoStage::new(min, avg, max, level).map_err(js_err)?;
        let from = start.saturating_sub(chunk::twostage::W2 as u64);
        let to = (stop + max as u64).min(file_len);
        Ok(SegmentChunker {
            cfg,
            file_len,
            start,
            stop,
            from,
            to,
            buf: Vec::with_capacity((to - from) as usize),
            bitmap: None,
            ends: Vec::new(),
            entry: start,
            exit: None,
            ranges: Vec::new(),
            fingerprints: Vec::new(),
        })
    }

    /// First file offset to read (up to 32 bytes of history before the segment).
    #[wasm_bindgen(js_name = readFrom)]
    pub fn read_from(&self) -> f64 {
        self.from as f64
    }

    /// End (exclusive) of the bytes to read.
    #[wasm_bindgen(js_name = readTo)]
    pub fn read_to(&self) -> f64 {
        self.to as f64
    }

    /// Appends the next bytes of `readFrom()..readTo()`.
    pub fn push(&mut self, block: &[u8]) -> Result<(), JsError> {
        if self.bitmap.is_some() || self.buf.len() + block.len() > (self.to - self.from) as usize {
            return Err(JsError::new(
                "SegmentChunker.push: more bytes than readTo - readFrom",
            ));
        }
        self.buf.extend_from_slice(block);
        Ok(())
    }

    /// Stage 1 over the pushed bytes (all of `readFrom()..readTo()` must be there).
    pub fn scan(&mut self) -> Result<(), JsError> {
        if self.buf.len() as u64 != self.to - self.from {
            return Err(JsError::new(
                "SegmentChunker.scan: segment not completely read",
            ));
        }
        let lead = (self.start - self.from) as usize;
        self.bitmap = Some(chunk::sscdc::SegmentBitmap::compute(
            &self.cfg, &self.buf, lead, self.start,
        ));
        Ok(())
    }

    /// Stage 2 from `entry` (where the previous segment's chunks ended; the segment's
    /// start for the first one). Returns the number of chunks starting in this segment.
    pub fn select(&mut self, entry: f64) -> Result<u32, JsError> {
        let entry = exact_u64(entry, "entry")?;
        let bm = self
            .bitmap
            .as_ref()
            .ok_or_else(|| JsError::new("SegmentChunker.select before scan"))?;
        // The previous segment's last chunk ends at most `max` bytes past its stop.
        if entry < self.start || entry > self.start + self.cfg.sizes().2 as u64 {
            return Err(JsError::new(
                "SegmentChunker.select: entry outside the segment",
            ));
        }
        self.ends = bm.select_from(&self.cfg, self.file_len, entry, self.stop);
        self.entry = entry;
        self.exit = Some(self.ends.last().copied().unwrap_or(entry));
        Ok(self.ends.len() as u32)
    }

    /// Where the next segment's first chunk starts (after `select`).
    pub fn exit(&self) -> Result<f64, JsError> {
        self.exit
            .map(|e| e as f64)
            .ok_or_else(|| JsError::new("SegmentChunker.exit before select"))
    }

    /// Lookup keys (plain SHA-1) of the selected chunks, straight from the segment's bytes.
    pub fn hash(&mut self) {
        self.ranges.clear();
        let mut s = self.entry;
        for &e in &self.ends {
            self.ranges
                .push(((s - self.from) as usize, (e - s) as usize));
            s = e;
        }
        self.fingerprints
            .resize(self.ranges.len() * hash::FINGERPRINT_LEN, 0);
        hash::lookup_keys_flat(&self.buf, &self.ranges, &mut self.fingerprints);
    }

    /// Confirms selected chunks `indices` (after `hash`) before they are stored, as
    /// [`ChunkEngine::confirm`] does.
    pub fn confirm(&mut self, indices: &[u32]) -> Result<u32, JsError> {
        let n = hash::confirm_flat(&self.buf, &self.ranges, indices, &mut self.fingerprints)
            .map_err(js_err)?;
        Ok(n as u32)
    }

    /// Absolute offsets of the selected chunks (Float64Array).
    pub fn offsets(&self) -> Vec<f64> {
        let mut s = self.entry;
        self.ends
            .iter()
            .map(|&e| std::mem::replace(&mut s, e) as f64)
            .collect()
    }

    pub fn lengths(&self) -> Vec<u32> {
        let mut s = self.entry;
        self.ends
            .iter()
            .map(|&e| (e - std::mem::replace(&mut s, e)) as u32)
            .collect()
    }

    /// 20 bytes per selected chunk (after `hash`).
    pub fn fingerprints(&self) -> Vec<u8> {
        self.fingerprints.clone()
    }
}

impl SegmentChunker {
    fn chunk_bytes(&self, i: usize) -> Option<&[u8]> {
        let &(o, l) = self.ranges.get(i)?;
        Some(&self.buf[o..o + l])
    }
}

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

/// Chunk fingerprints ([`crate::hash::fingerprint`]) of many ranges of one buffer: 20 bytes
/// per range.
#[wasm_bindgen(js_name = fingerprintMany)]
pub fn fingerprint_many(buf: &[u8], offsets: &[u32], lengths: &[u32]) -> Result<Vec<u8>, JsError> {
    let ranges = checked_ranges(buf.len(), offsets, lengths)?;
    let mut out = vec![0u8; ranges.len() * hash::FINGERPRINT_LEN];
    hash::fingerprint_many_flat(buf, &ranges, &mut out);
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

/// Benchmark: 20-byte digests of ranges of the buffer, in batches of ~2 MiB like a worker's.
/// `imp`: `"fingerprint"` (the chunk fingerprint, collision-detecting SHA-1), `"sha1-multi"`
/// (plain SHA-1, 4-lane SIMD) or `"sha1-crate"` (plain SHA-1, the `sha1` crate one chunk at
/// a time). Returns the XOR of all digests' first bytes (so the work cannot be optimised
/// away).
#[wasm_bindgen(js_name = benchSha1)]
pub fn bench_sha1(
    buf: &ByteBuffer,
    offsets: &[u32],
    lengths: &[u32],
    imp: &str,
) -> Result<u32, JsError> {
    let ranges = checked_ranges(buf.data.len(), offsets, lengths)?;
    type Many = fn(&[u8], &[(usize, usize)], &mut [u8]);
    let many: Many = match imp {
        "fingerprint" => hash::fingerprint_many_flat,
        "sha1-multi" => hash::sha1_many_flat,
        "sha1-crate" => |buf, ranges, out| {
            for (d, &(o, l)) in out.chunks_exact_mut(hash::FINGERPRINT_LEN).zip(ranges) {
                let mut h = hash::StreamingSha1::new();
                h.update(&buf[o..o + l]);
                d.copy_from_slice(&h.finish());
            }
        },
        _ => return Err(JsError::new(&format!("benchSha1: unknown impl {imp:?}"))),
    };
    let mut x = 0u32;
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
        many(&buf.data, &ranges[i..j], &mut out);
        for d in out.chunks_exact(hash::FINGERPRINT_LEN) {
            x ^= d[0] as u32;
        }
        i = j;
    }
    Ok(x)
}

/// Benchmark: the full worker pipeline ([`ChunkEngine`] without the JS copies), fed
/// `block` bytes at a time; with `confirm_every` = k, every k-th chunk is also confirmed
/// (as a worker confirms the chunks it has not seen: all of a first backup's, k = 1).
/// Returns the number of chunks.
#[wasm_bindgen(js_name = benchPipeline)]
#[allow(clippy::too_many_arguments)]
pub fn bench_pipeline(
    buf: &ByteBuffer,
    block: usize,
    kind: &str,
    min: Option<u32>,
    avg: Option<u32>,
    max: Option<u32>,
    level: Option<u32>,
    confirm_every: Option<u32>,
) -> Result<u32, JsError> {
    let mut p = ChunkPipeline::new(build_chunker(kind, min, avg, max, level)?);
    let mut n = 0;
    let mut which = Vec::new();
    let mut take = |p: &mut ChunkPipeline, got: usize| -> Result<(), JsError> {
        if let Some(k) = confirm_every.filter(|&k| k > 0) {
            which.clear();
            which.extend((0..got as u32).filter(|i| (n as u32 + i).is_multiple_of(k)));
            p.confirm(&which).map_err(js_err)?;
        }
        n += got;
        Ok(())
    };
    for b in buf.data.chunks(block.max(1)) {
        let got = p.push(b);
        take(&mut p, got)?;
    }
    let got = p.finish();
    take(&mut p, got)?;
    Ok(n as u32)
}
