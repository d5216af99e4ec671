//! Content-defined chunking.
//!
//! Every chunker here is a [`CutPoint`]: given the bytes of a stream from the start of the
//! next chunk on, it says where that chunk ends. Because a cut only ever looks at most
//! `max_size` bytes ahead (and at a fixed amount of history behind for windowed hashes),
//! the same cut points come out however the input is split into blocks; [`ChunkStream`]
//! does the buffering that guarantees it.
//!
//! Modules, one per technique:
//! - [`fastcdc`]: FastCDC-2020, bit-compatible with the `fastcdc` crate's `v2020` module.
//! - [`twostage`]: Ditto's default chunker (two-stage filter, SIMD stage 1), see docs/CHUNKING.md.
//! - [`sscdc`]: SS-CDC (Ni thesis ch. 2): candidate bitmaps per segment, then sequential selection.
//! - [`rapidcdc`]: RapidCDC (Ni thesis ch. 3): next-chunk-size hints from the previous version.
//! - [`rapidfpt`]: RapidCDC with the fingerprint test: predicted chunks, cuts identical to plain.
//! - [`inck`]: INC-K Rabin chunking and the chunk-size model (PRUNE §4.1-4.2).
//! - [`policy`]: context-aware choice of fixed-size vs CDC chunking (PRUNE §4.3).

pub mod fastcdc;
pub mod fixed;
mod gear_table;
pub mod inck;
pub mod pipeline;
pub mod policy;
pub mod rapidcdc;
pub mod rapidfpt;
pub mod sscdc;
pub mod stream;
pub mod twostage;

pub use stream::{ChunkStream, StreamChunk};

/// A chunking algorithm: finds where the chunk starting at `start` ends.
pub trait CutPoint {
    /// No chunk is longer than this; a cut is decided once this many bytes are available
    /// after the chunk start (or the stream has ended).
    fn max_size(&self) -> usize;

    /// Bytes before a chunk's start that the cut may read (window history). The stream
    /// keeps at least this many bytes of already-emitted data.
    fn history(&self) -> usize {
        0
    }

    /// `buf[start..]` holds either at least `max_size()` bytes, or everything up to the end
    /// of the stream; `buf[..start]` holds preceding stream bytes (at least `history()` of
    /// them unless the stream began less than that far back). Returns the absolute index in
    /// `buf` where the chunk ends: `start < end <= min(buf.len(), start + max_size())` when
    /// `buf[start..]` is non-empty.
    fn cut(&self, buf: &[u8], start: usize) -> usize;

    /// Chunkers that fingerprint as they cut (RapidCDC) move the SHA-1s of the chunks cut
    /// so far into `out` and return true; the others return false.
    fn take_fingerprints(&self, _out: &mut Vec<crate::hash::Fingerprint>) -> bool {
        false
    }
}

/// A boxed or shared chunker is a chunker (the bindings hold a RapidCDC chunker both in
/// the pipeline and to read its counters).
macro_rules! forward_cut_point {
    ($($ptr:ident),*) => {$(
        impl<T: CutPoint + ?Sized> CutPoint for $ptr<T> {
            fn max_size(&self) -> usize {
                (**self).max_size()
            }
            fn history(&self) -> usize {
                (**self).history()
            }
            fn cut(&self, buf: &[u8], start: usize) -> usize {
                (**self).cut(buf, start)
            }
            fn take_fingerprints(&self, out: &mut Vec<crate::hash::Fingerprint>) -> bool {
                (**self).take_fingerprints(out)
            }
        }
    )*};
}
use std::sync::Arc;
forward_cut_point!(Box, Arc);

/// A chunker chosen at run time (by the bindings, the benchmarks, the policy).
pub type DynChunker = Box<dyn CutPoint + Send + Sync>;

/// Builds a chunker by name: `"fastcdc"` (FastCDC-2020, `level` = normalization 0-3),
/// `"twostage"` (Ditto's default algorithm), `"inck"` (INC-K Rabin, `2^round(log2(avg))`
/// match rate) or `"fixed"` (chunks of `avg` bytes).
pub fn make_chunker(
    kind: &str,
    min: usize,
    avg: usize,
    max: usize,
    level: u32,
) -> Result<DynChunker, String> {
    Ok(match kind {
        "fastcdc" => Box::new(fastcdc::FastCdc::new(min, avg, max, level)?),
        "fixed" => Box::new(fixed::Fixed::new(avg)?),
        "twostage" => Box::new(twostage::TwoStage::new(min, avg, max, level)?),
        // Target pattern bits from the average; `level` is unused (no normalisation).
        "inck" => Box::new(inck::IncK::new(
            min,
            max,
            (avg.max(16) as f64).log2().round() as u32,
        )?),
        other => return Err(format!("unknown chunker {other:?}")),
    })
}

/// The chunker `"default"` resolves to, with its default sizes: kind, min, avg, max, level.
pub const DEFAULT_CHUNKER: (&str, usize, usize, usize, u32) = ("twostage", 2048, 7680, 65536, 2);

/// [`make_chunker`] with omitted parameters filled in: `"default"` is
/// [`DEFAULT_CHUNKER`]; for a named kind, missing sizes are 2048/8192/65536 and level 1.
pub fn make_chunker_or_default(
    kind: &str,
    min: Option<usize>,
    avg: Option<usize>,
    max: Option<usize>,
    level: Option<u32>,
) -> Result<DynChunker, String> {
    let (k, dmin, davg, dmax, dlevel) = if kind == "default" {
        DEFAULT_CHUNKER
    } else {
        (kind, 2048, 8192, 65536, 1)
    };
    make_chunker(
        k,
        min.unwrap_or(dmin),
        avg.unwrap_or(davg),
        max.unwrap_or(dmax),
        level.unwrap_or(dlevel),
    )
}

/// RapidCDC ([`rapidcdc`]) over a `"default"`, `"twostage"` or `"fastcdc"` base chunker
/// (parameters as in [`make_chunker_or_default`]), with size lists learnt from a previous
/// version's recipe: `fps[i]`, `sizes[i]` of consecutive chunks, `markers[i]` the last
/// byte of chunk `i` (empty if unknown: then the rolling-window test is used).
#[allow(clippy::too_many_arguments)]
pub fn make_rapid_chunker(
    kind: &str,
    min: Option<usize>,
    avg: Option<usize>,
    max: Option<usize>,
    level: Option<u32>,
    fps: &[crate::hash::Fingerprint],
    sizes: &[u32],
    markers: &[u8],
) -> Result<DynChunker, String> {
    use rapidcdc::{Accept, Hints, RapidCdc};
    let (k, dmin, davg, dmax, dlevel) = if kind == "default" {
        DEFAULT_CHUNKER
    } else {
        (kind, 2048, 8192, 65536, 1)
    };
    let (mn, av, mx, lv) = (
        min.unwrap_or(dmin),
        avg.unwrap_or(davg),
        max.unwrap_or(dmax),
        level.unwrap_or(dlevel),
    );
    let mut hints = Hints::new();
    hints.learn_recipe(fps, sizes, markers);
    let accept = if markers.len() == fps.len() && !markers.is_empty() {
        Accept::Marker
    } else {
        Accept::RollingWindow
    };
    Ok(match k {
        "twostage" => Box::new(RapidCdc::new(
            twostage::TwoStage::new(mn, av, mx, lv)?,
            hints,
            accept,
        )),
        "fastcdc" => Box::new(RapidCdc::new(
            fastcdc::FastCdc::new(mn, av, mx, lv)?,
            hints,
            accept,
        )),
        other => {
            return Err(format!(
                "RapidCDC hints need twostage or fastcdc, not {other:?}"
            ))
        }
    })
}

/// Splits a whole in-memory buffer; returns `(offset, length)` of every chunk.
pub fn chunk_all<C: CutPoint + ?Sized>(c: &C, data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < data.len() {
        let end = c.cut(data, start);
        debug_assert!(end > start && end - start <= c.max_size());
        out.push((start, end - start));
        start = end;
    }
    out
}

/// Small deterministic PRNG (xorshift64*) for tests and benchmarks: no dependency, same
/// bytes on every platform.
#[doc(hidden)]
pub fn test_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        out.extend_from_slice(&s.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}
