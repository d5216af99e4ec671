//! Exports for the Wasm benchmarks only (`npm run bench:core`): data resident in Wasm
//! memory, written by JS through `wasmMemory()` (exported with the bundle bindings), and the
//! measured loops. Built with the `bench` feature; the page's Wasm does not carry them.

use wasm_bindgen::prelude::*;

use super::restore::checked_ranges;
use super::{build_chunker, js_err};
use crate::chunk::pipeline::ChunkPipeline;
use crate::hash;

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

/// Benchmark: zstd as the page uses it, one chunk at a time through a reused context: the
/// backup's compression ([`crate::compress::Compressor`], stored compressed only when that
/// pays) and the restore's and search's decompression into place
/// ([`crate::compress::Decompressor::decompress_into`]). `compress` stores every range of the
/// buffer at `level`; `decompress` decodes what was stored.
#[wasm_bindgen]
pub struct ZstdBench {
    stored: Vec<(u8, Vec<u8>, usize)>,
    level: i32,
}

#[wasm_bindgen]
impl ZstdBench {
    #[wasm_bindgen(constructor)]
    pub fn new(level: i32) -> ZstdBench {
        ZstdBench {
            stored: Vec::new(),
            level,
        }
    }

    /// Compresses every range of `buf`, keeping what it stores; returns the stored bytes.
    pub fn compress(
        &mut self,
        buf: &ByteBuffer,
        offsets: &[u32],
        lengths: &[u32],
    ) -> Result<f64, JsError> {
        let ranges = checked_ranges(buf.data.len(), offsets, lengths)?;
        let mut c = crate::compress::Compressor::new(self.level)
            .map_err(|e| JsError::new(&e.to_string()))?;
        self.stored.clear();
        let mut total = 0usize;
        for (o, l) in ranges {
            let (codec, bytes) = c.compress(&buf.data[o..o + l]);
            total += bytes.len();
            self.stored.push((codec, bytes.to_vec(), l));
        }
        Ok(total as f64)
    }

    /// Decodes everything [`ZstdBench::compress`] stored, each chunk into its place in one
    /// buffer; returns the XOR of the chunks' first bytes.
    pub fn decompress(&self) -> Result<u32, JsError> {
        let mut d =
            crate::compress::Decompressor::new().map_err(|e| JsError::new(&e.to_string()))?;
        let total = self.stored.iter().map(|s| s.2).sum();
        let mut out = vec![0u8; total];
        let (mut at, mut x) = (0, 0u32);
        for (codec, bytes, len) in &self.stored {
            d.decompress_into(*codec, bytes, &mut out[at..at + len])
                .map_err(js_err)?;
            x ^= out[at] as u32;
            at += len;
        }
        Ok(x)
    }
}

/// Benchmark: the CRC-32 of every range of the buffer (the zip checksum a restore computes
/// per chunk, [`crate::crc32`]); returns their XOR.
#[wasm_bindgen(js_name = benchCrc32)]
pub fn bench_crc32(buf: &ByteBuffer, offsets: &[u32], lengths: &[u32]) -> Result<u32, JsError> {
    let ranges = checked_ranges(buf.data.len(), offsets, lengths)?;
    Ok(ranges
        .into_iter()
        .fold(0, |x, (o, l)| x ^ crate::crc32::crc32(&buf.data[o..o + l])))
}
