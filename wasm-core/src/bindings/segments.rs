//! A large file split across workers (SS-CDC): each chunks one segment, chained by the
//! segments' entry and exit points into exactly one worker's chunks.

use wasm_bindgen::prelude::*;

use super::js_err;
use crate::chunk;
use crate::hash;

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
    pub(super) fingerprints: Vec<u8>,
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
    pub(super) fn chunk_bytes(&self, i: usize) -> Option<&[u8]> {
        let &(o, l) = self.ranges.get(i)?;
        Some(&self.buf[o..o + l])
    }
}
