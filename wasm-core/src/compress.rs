//! Chunk compression: what the browser applies to new chunks before upload, and what
//! restore and search undo.
//!
//! Codecs match docs/FORMAT.md: 0 = raw, 1 = zstd (one frame per chunk). A chunk is stored
//! compressed only when that pays: compressing already-compressed data (jpeg, zip, ...)
//! costs time and can even grow it, so the caller keeps the raw bytes unless the frame
//! saves at least [`MIN_SAVING`] of them. `lz4` is here only as a measured candidate (see
//! docs/BENCHMARKS.md, "Compression"): zstd-3 stores far fewer bytes at a speed the
//! upload path can afford, so it is the codec on the wire.

/// Codec byte of an uncompressed chunk.
pub const CODEC_RAW: u8 = 0;
/// Codec byte of a zstd-compressed chunk.
pub const CODEC_ZSTD: u8 = 1;

/// Default zstd level for uploads.
pub const DEFAULT_LEVEL: i32 = 3;

/// A compressed chunk must be at least this fraction smaller than the raw one to be kept.
pub const MIN_SAVING: f64 = 0.03;

/// Reusable zstd compressor (keeps its context across chunks: allocating one per chunk
/// costs more than compressing a small chunk).
pub struct Compressor {
    ctx: zstd::bulk::Compressor<'static>,
    out: Vec<u8>,
}

impl Compressor {
    pub fn new(level: i32) -> std::io::Result<Self> {
        Ok(Compressor {
            ctx: zstd::bulk::Compressor::new(level)?,
            out: Vec::new(),
        })
    }

    /// Compresses `raw`; returns `(codec, stored bytes)`, where the stored bytes are the
    /// frame if it pays and `raw` itself otherwise.
    pub fn compress<'a>(&'a mut self, raw: &'a [u8]) -> (u8, &'a [u8]) {
        let bound = zstd::zstd_safe::compress_bound(raw.len());
        self.out.resize(bound, 0);
        match self.ctx.compress_to_buffer(raw, &mut self.out[..]) {
            Ok(n) if (n as f64) <= raw.len() as f64 * (1.0 - MIN_SAVING) => {
                (CODEC_ZSTD, &self.out[..n])
            }
            _ => (CODEC_RAW, raw),
        }
    }
}

/// Reusable chunk decoder for callers that decode many chunks in a row (search reads every
/// stored chunk): one zstd context and one output buffer instead of one of each per chunk.
pub struct Decompressor {
    ctx: zstd::bulk::Decompressor<'static>,
    out: Vec<u8>,
}

impl Decompressor {
    pub fn new() -> std::io::Result<Self> {
        Ok(Decompressor {
            ctx: zstd::bulk::Decompressor::new()?,
            out: Vec::new(),
        })
    }

    /// Decodes a stored chunk of `codec` into exactly `raw_len` bytes; the result borrows
    /// either `stored` (raw) or the internal buffer (valid until the next call).
    pub fn decompress<'a>(
        &'a mut self,
        codec: u8,
        stored: &'a [u8],
        raw_len: usize,
    ) -> Result<&'a [u8], String> {
        match codec {
            CODEC_RAW if stored.len() == raw_len => Ok(stored),
            CODEC_ZSTD => {
                self.out.resize(raw_len, 0);
                zstd_into(&mut self.ctx, stored, &mut self.out)?;
                Ok(&self.out)
            }
            other => Err(not_decodable(other, stored.len(), raw_len)),
        }
    }

    /// [`Decompressor::decompress`] into `out`, whose length is the chunk's raw length.
    pub fn decompress_into(
        &mut self,
        codec: u8,
        stored: &[u8],
        out: &mut [u8],
    ) -> Result<(), String> {
        match codec {
            CODEC_RAW if stored.len() == out.len() => {
                out.copy_from_slice(stored);
                Ok(())
            }
            CODEC_ZSTD => zstd_into(&mut self.ctx, stored, out),
            other => Err(not_decodable(other, stored.len(), out.len())),
        }
    }
}

/// Decodes the zstd frame `stored` into all of `out`.
fn zstd_into(
    ctx: &mut zstd::bulk::Decompressor<'static>,
    stored: &[u8],
    out: &mut [u8],
) -> Result<(), String> {
    let n = ctx
        .decompress_to_buffer(stored, out)
        .map_err(|e| e.to_string())?;
    if n != out.len() {
        return Err(format!(
            "zstd frame decoded to {n} bytes, expected {}",
            out.len()
        ));
    }
    Ok(())
}

/// Why a chunk of `codec` (not zstd) with `stored_len` bytes is not `raw_len` raw bytes.
fn not_decodable(codec: u8, stored_len: usize, raw_len: usize) -> String {
    match codec {
        CODEC_RAW => format!("raw chunk of {stored_len} bytes, expected {raw_len}"),
        other => format!("unsupported codec {other}"),
    }
}

/// Decodes a stored chunk of `codec` into exactly `raw_len` bytes.
pub fn decompress(codec: u8, stored: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    match codec {
        CODEC_RAW if stored.len() == raw_len => Ok(stored.to_vec()),
        CODEC_RAW => Err(format!(
            "raw chunk of {} bytes, expected {raw_len}",
            stored.len()
        )),
        CODEC_ZSTD => {
            let out = zstd::bulk::decompress(stored, raw_len).map_err(|e| e.to_string())?;
            if out.len() != raw_len {
                return Err(format!(
                    "zstd frame decoded to {} bytes, expected {raw_len}",
                    out.len()
                ));
            }
            Ok(out)
        }
        other => Err(format!("unsupported codec {other}")),
    }
}

/// lz4 block compression, a measured candidate only (not a wire codec).
pub fn lz4_compress(raw: &[u8]) -> Vec<u8> {
    lz4_flex::block::compress(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(n: usize) -> Vec<u8> {
        let words = [
            "function ",
            "return ",
            "const ",
            "{ ",
            "} ",
            "x",
            "=",
            ";\n",
        ];
        (0..n)
            .flat_map(|i| words[(i * 7 + i / 3) % words.len()].bytes())
            .take(n)
            .collect()
    }

    #[test]
    fn reusable_decompressor_matches_one_shot() {
        let mut c = Compressor::new(DEFAULT_LEVEL).unwrap();
        let mut d = Decompressor::new().unwrap();
        for n in [1, 100, 8192, 70_000, 3000] {
            let raw = text(n);
            let (codec, stored) = c.compress(&raw);
            let stored = stored.to_vec();
            assert_eq!(d.decompress(codec, &stored, n).unwrap(), &raw[..]);
            assert_eq!(decompress(codec, &stored, n).unwrap(), raw);
        }
        let raw = text(8192);
        let (codec, stored) = c.compress(&raw);
        let stored = stored.to_vec();
        assert_eq!(codec, CODEC_ZSTD);
        assert!(d.decompress(codec, &stored, 8191).is_err(), "short raw_len");
        assert!(d.decompress(codec, &stored, 8193).is_err(), "long raw_len");
        assert!(d
            .decompress(codec, &stored[..stored.len() / 2], 8192)
            .is_err());
        assert!(d.decompress(CODEC_RAW, &raw, 8191).is_err());
        assert!(d.decompress(7, &raw, 8192).is_err());
    }

    #[test]
    fn text_compresses_and_round_trips() {
        let raw = text(8192);
        let mut c = Compressor::new(DEFAULT_LEVEL).unwrap();
        let (codec, stored) = c.compress(&raw);
        assert_eq!(codec, CODEC_ZSTD);
        assert!(stored.len() < raw.len() / 2);
        let stored = stored.to_vec();
        assert_eq!(decompress(codec, &stored, raw.len()).unwrap(), raw);
    }

    #[test]
    fn incompressible_data_stays_raw() {
        let mut x: u64 = 0x9E3779B97F4A7C15;
        let raw: Vec<u8> = (0..8192)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut c = Compressor::new(DEFAULT_LEVEL).unwrap();
        let (codec, stored) = c.compress(&raw);
        assert_eq!(codec, CODEC_RAW);
        assert_eq!(stored, &raw[..]);
        assert_eq!(decompress(CODEC_RAW, &raw, raw.len()).unwrap(), raw);
    }

    #[test]
    fn empty_and_corrupt_inputs() {
        let mut c = Compressor::new(DEFAULT_LEVEL).unwrap();
        let (codec, stored) = c.compress(&[]);
        assert_eq!((codec, stored.len()), (CODEC_RAW, 0));
        assert!(decompress(CODEC_ZSTD, b"not a frame", 10).is_err());
        assert!(decompress(CODEC_RAW, b"abc", 4).is_err());
        assert!(decompress(7, b"abc", 3).is_err());
        let raw = text(1000);
        let frame = zstd::bulk::compress(&raw, 3).unwrap();
        assert!(decompress(CODEC_ZSTD, &frame, raw.len() - 1).is_err());
    }
}
