//! Codec 2, `delta`: a chunk stored as its differences from a similar stored chunk, its base
//! (DARE §3.4 delta compression; docs/FORMAT.md, "Codec 2: delta", is the contract).
//!
//! DARE uses Xdelta. We use zstd, already in the engine for codec 1: compressing a chunk with
//! the base's raw bytes referenced as a *prefix* lets zstd's match finder copy from the base
//! as if it preceded the chunk, so a chunk that shares most of its bytes with the base
//! encodes to little more than its edits, and decoding is zstd decompression with the same
//! prefix. The prefix API treats the base as raw content whatever its first bytes are; the
//! dictionary API would read a base starting with the zstd dictionary magic as a structured
//! dictionary and fail on it.
//!
//! Unlike DARE (one level only, §3.4), a base may itself be a delta chunk; the chain depth is
//! capped by the delta pass at [`MAX_CHAIN_DEPTH`] and [`decode_chain`] refuses longer chains,
//! so a loop in stored data ends in an error, never in an endless walk.
//!
//! The decoder runs on untrusted bytes (a container on disk, a server response) and must
//! never panic nor allocate beyond the chunk size limit: every length comes from the caller's
//! declared raw length, itself checked against [`MAX_CHUNK_RAW`], and the frame's own content
//! size must agree with it before anything is allocated.

use std::borrow::Cow;

use super::frame::{slice_of, METHOD_SLICE};
use crate::format::bundle::MAX_CHUNK_RAW;
use crate::hash::{Fingerprint, FINGERPRINT_LEN};
use zstd::zstd_safe::{self, CCtx, CDict, CParameter, DCtx};

/// Codec byte of a delta chunk.
pub const CODEC_DELTA: u8 = 2;

/// Delta method 1: a zstd frame with the base as a reference prefix (method 3, a slice of a
/// frame, is [`super::frame`]'s).
pub const METHOD_ZSTD_PREFIX: u8 = 1;

/// Bytes before the encoding: base fingerprint and method byte.
pub const HEADER_LEN: usize = FINGERPRINT_LEN + 1;

/// Longest chain of delta links a reader follows (docs/FORMAT.md, chain rule).
pub const MAX_CHAIN_DEPTH: usize = 4;

/// Default zstd level of the delta frames. Deltas are made on the server after the commit,
/// off the upload path, so a level above codec 1's upload level pays: deltas are small and
/// the time is spent once (docs/BENCHMARKS.md, "Delta and recompression levels").
pub const DEFAULT_DELTA_LEVEL: i32 = 9;

/// Why a delta payload was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeltaError {
    /// Fewer bytes than the header.
    Truncated(usize),
    /// A method byte other than [`METHOD_ZSTD_PREFIX`] and [`METHOD_SLICE`].
    UnknownMethod(u8),
    /// The payload names another base than the one handed to the decoder.
    WrongBase,
    /// The declared raw length exceeds the chunk size limit.
    TooLarge(usize),
    /// The frame's content size is missing or differs from the declared raw length.
    LengthMismatch { declared: usize, frame: Option<u64> },
    /// The frame does not end exactly at the end of the payload.
    TrailingBytes,
    /// zstd refused the frame.
    Corrupt(String),
    /// A chain of delta links longer than [`MAX_CHAIN_DEPTH`] (or a loop).
    ChainTooLong,
    /// A chunk of the chain is not available to the caller, or is not decodable.
    Base(String),
}

impl std::fmt::Display for DeltaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeltaError::Truncated(n) => write!(f, "delta payload of {n} bytes is truncated"),
            DeltaError::UnknownMethod(m) => write!(f, "unknown delta method {m}"),
            DeltaError::WrongBase => write!(f, "delta names another base chunk"),
            DeltaError::TooLarge(n) => write!(f, "delta raw length {n} exceeds the chunk limit"),
            DeltaError::LengthMismatch { declared, frame } => write!(
                f,
                "delta frame content size {frame:?} differs from raw length {declared}"
            ),
            DeltaError::TrailingBytes => write!(f, "bytes after the delta frame"),
            DeltaError::Corrupt(e) => write!(f, "delta frame does not decode: {e}"),
            DeltaError::ChainTooLong => {
                write!(f, "delta chain longer than {MAX_CHAIN_DEPTH} links")
            }
            DeltaError::Base(e) => write!(f, "delta base unavailable: {e}"),
        }
    }
}

impl std::error::Error for DeltaError {}

/// The method byte of a delta payload.
fn method_of(payload: &[u8]) -> Result<u8, DeltaError> {
    payload
        .get(FINGERPRINT_LEN)
        .copied()
        .ok_or(DeltaError::Truncated(payload.len()))
}

/// The base fingerprint a delta payload names (what the caller must fetch to decode it).
pub fn base_of(payload: &[u8]) -> Result<Fingerprint, DeltaError> {
    if payload.len() < HEADER_LEN {
        return Err(DeltaError::Truncated(payload.len()));
    }
    Ok(payload[..FINGERPRINT_LEN].try_into().expect("20 bytes"))
}

/// Reusable delta encoder (keeps its zstd context across chunks, as
/// [`crate::compress::Compressor`] does: a fresh context per chunk costs more than encoding
/// a small chunk).
pub struct DeltaEncoder {
    cctx: CCtx<'static>,
    level: i32,
    out: Vec<u8>,
}

fn zstd_err(code: usize) -> DeltaError {
    DeltaError::Corrupt(zstd_safe::get_error_name(code).to_string())
}

/// A fresh zstd compression context for an encoder.
fn new_cctx() -> Result<CCtx<'static>, DeltaError> {
    CCtx::try_create().ok_or_else(|| DeltaError::Corrupt("no zstd context".into()))
}

/// Extends a borrow of the base to the context's lifetime.
///
/// SAFETY (for both callers): the context reads the prefix only while making or decoding the
/// next frame, inside the same call that references it, and that call resets the context's
/// parameters and dictionaries before returning (`SessionAndParameters` drops the prefix), so
/// no pointer into `base` survives the borrow.
unsafe fn extend(base: &[u8]) -> &'static [u8] {
    std::mem::transmute::<&[u8], &'static [u8]>(base)
}

/// Starts a payload in `out`: the header, then room for the frame of `raw_len` bytes.
fn start_payload(
    out: &mut Vec<u8>,
    base_fp: &Fingerprint,
    raw_len: usize,
) -> Result<(), DeltaError> {
    if raw_len > MAX_CHUNK_RAW as usize {
        return Err(DeltaError::TooLarge(raw_len));
    }
    out.clear();
    out.extend_from_slice(base_fp);
    out.push(METHOD_ZSTD_PREFIX);
    out.resize(HEADER_LEN + zstd_safe::compress_bound(raw_len), 0);
    Ok(())
}

/// The frame parameters of method 1 (docs/FORMAT.md): content size, no checksum, no
/// dictionary id.
fn frame_parameters(c: &mut CCtx<'static>, level: i32) -> Result<(), DeltaError> {
    c.set_parameter(CParameter::CompressionLevel(level))
        .map_err(zstd_err)?;
    c.set_parameter(CParameter::ContentSizeFlag(true))
        .map_err(zstd_err)?;
    c.set_parameter(CParameter::ChecksumFlag(false))
        .map_err(zstd_err)?;
    c.set_parameter(CParameter::DictIdFlag(false))
        .map_err(zstd_err)?;
    Ok(())
}

/// Resets the context (dropping any prefix or dictionary it references, also after a
/// failure) and cuts `out` to its header and the frame of `res` bytes.
fn finish_payload<'o>(
    c: &mut CCtx<'static>,
    out: &'o mut Vec<u8>,
    res: Result<usize, DeltaError>,
) -> Result<&'o [u8], DeltaError> {
    let reset = c
        .reset(zstd_safe::ResetDirective::SessionAndParameters)
        .map_err(zstd_err);
    let n = res?;
    reset?;
    out.truncate(HEADER_LEN + n);
    Ok(out)
}

impl DeltaEncoder {
    pub fn new(level: i32) -> Result<Self, DeltaError> {
        let cctx = new_cctx()?;
        Ok(DeltaEncoder {
            cctx,
            level,
            out: Vec::new(),
        })
    }

    /// Encodes `raw` against `base` (whose fingerprint is `base_fp`); returns the whole
    /// stored payload (header and frame), valid until the next call.
    pub fn encode(
        &mut self,
        base_fp: &Fingerprint,
        base: &[u8],
        raw: &[u8],
    ) -> Result<&[u8], DeltaError> {
        start_payload(&mut self.out, base_fp, raw.len())?;
        // zstd drops the part of a prefix that overlaps the input in memory, so a chunk that
        // lies inside its base's buffer is copied out first.
        let overlap = {
            let (b, r) = (base.as_ptr_range(), raw.as_ptr_range());
            !base.is_empty() && !raw.is_empty() && r.start < b.end && b.start < r.end
        };
        let res = if overlap {
            let copy = raw.to_vec();
            self.frame(base, &copy)
        } else {
            self.frame(base, raw)
        };
        // Always drop the prefix, also after a failure (see `extend`).
        finish_payload(&mut self.cctx, &mut self.out, res)
    }

    fn frame(&mut self, base: &[u8], raw: &[u8]) -> Result<usize, DeltaError> {
        let c = &mut self.cctx;
        frame_parameters(c, self.level)?;
        // SAFETY: see `extend`; `encode` resets the context before `base`'s borrow ends.
        c.ref_prefix(unsafe { extend(base) }).map_err(zstd_err)?;
        c.compress2(&mut self.out[HEADER_LEN..], raw)
            .map_err(zstd_err)
    }
}

/// The first bytes of a structured zstd dictionary: a base starting with them cannot be
/// prepared by [`SharedBaseEncoder`] (zstd would parse it instead of taking it as content).
const ZSTD_DICT_MAGIC: [u8; 4] = 0xEC30_A437u32.to_le_bytes();

/// Encodes many chunks against one base whose match tables are built once: the base is
/// loaded as a zstd dictionary of raw content, which decodes exactly like the prefix that
/// [`DeltaEncoder::encode`] references (same method byte, same [`DeltaDecoder`]). For a base
/// shared by many chunks, such as the dictionaries the delta pass trains, referencing a large
/// prefix per chunk would index the whole base again for each one.
pub struct SharedBaseEncoder {
    // Declared before `cdict`, so dropped before the dictionary it may reference.
    cctx: CCtx<'static>,
    cdict: CDict<'static>,
    base_fp: Fingerprint,
    level: i32,
    out: Vec<u8>,
}

impl SharedBaseEncoder {
    /// Prepares `base` (whose fingerprint is `base_fp`) at zstd level `level`. A base that
    /// starts with the zstd dictionary magic is refused ([`DeltaEncoder`] takes any base).
    pub fn new(base_fp: &Fingerprint, base: &[u8], level: i32) -> Result<Self, DeltaError> {
        if base.starts_with(&ZSTD_DICT_MAGIC) {
            return Err(DeltaError::Base(
                "a shared base may not start with the zstd dictionary magic".into(),
            ));
        }
        let cdict = CDict::try_create(base, level)
            .ok_or_else(|| DeltaError::Corrupt("zstd could not prepare the base".into()))?;
        let cctx = new_cctx()?;
        Ok(SharedBaseEncoder {
            cctx,
            cdict,
            base_fp: *base_fp,
            level,
            out: Vec::new(),
        })
    }

    /// Encodes `raw` against the base; returns the whole stored payload (header and frame),
    /// valid until the next call.
    pub fn encode(&mut self, raw: &[u8]) -> Result<&[u8], DeltaError> {
        start_payload(&mut self.out, &self.base_fp, raw.len())?;
        let res = (|| {
            let c = &mut self.cctx;
            frame_parameters(c, self.level)?;
            c.ref_cdict(&self.cdict).map_err(zstd_err)?;
            c.compress2(&mut self.out[HEADER_LEN..], raw)
                .map_err(zstd_err)
        })();
        // The dictionary stays referenced by this context only for the call.
        finish_payload(&mut self.cctx, &mut self.out, res)
    }
}

/// Reusable delta decoder.
pub struct DeltaDecoder {
    dctx: DCtx<'static>,
}

impl DeltaDecoder {
    pub fn new() -> Result<Self, DeltaError> {
        let dctx =
            DCtx::try_create().ok_or_else(|| DeltaError::Corrupt("no zstd context".into()))?;
        Ok(DeltaDecoder { dctx })
    }

    /// Decodes a delta payload into `raw_len` bytes against `base`, the raw bytes of the chunk
    /// whose fingerprint is `base_fp`: method 1 decompresses, a slice (method 3,
    /// [`super::frame`]) copies its part of the base. The result's fingerprint is the
    /// caller's to check.
    pub fn decode(
        &mut self,
        payload: &[u8],
        base_fp: &Fingerprint,
        base: &[u8],
        raw_len: usize,
    ) -> Result<Vec<u8>, DeltaError> {
        if method_of(payload)? == METHOD_SLICE {
            return Ok(slice_of(payload, base_fp, base, raw_len)?.to_vec());
        }
        let frame = checked_frame(payload, base_fp, raw_len)?;
        let mut out = vec![0u8; raw_len];
        self.decode_frame(frame, base, &mut out)?;
        Ok(out)
    }

    /// [`DeltaDecoder::decode`] into `out`, whose length is the chunk's raw length: a reader
    /// that gathers many chunks in one buffer decodes each in its place instead of copying it
    /// there.
    pub fn decode_into(
        &mut self,
        payload: &[u8],
        base_fp: &Fingerprint,
        base: &[u8],
        out: &mut [u8],
    ) -> Result<(), DeltaError> {
        if method_of(payload)? == METHOD_SLICE {
            out.copy_from_slice(slice_of(payload, base_fp, base, out.len())?);
            return Ok(());
        }
        let frame = checked_frame(payload, base_fp, out.len())?;
        self.decode_frame(frame, base, out)
    }

    /// Decodes a checked `frame` into all of `out`.
    fn decode_frame(
        &mut self,
        frame: &[u8],
        base: &[u8],
        out: &mut [u8],
    ) -> Result<(), DeltaError> {
        let res = self.frame(frame, base, out);
        let reset = self
            .dctx
            .reset(zstd_safe::ResetDirective::SessionAndParameters)
            .map_err(zstd_err);
        let n = res?;
        reset?;
        if n != out.len() {
            return Err(DeltaError::LengthMismatch {
                declared: out.len(),
                frame: Some(n as u64),
            });
        }
        Ok(())
    }

    fn frame(&mut self, frame: &[u8], base: &[u8], out: &mut [u8]) -> Result<usize, DeltaError> {
        // SAFETY: see `extend`; `decode` resets the context before `base`'s borrow ends.
        self.dctx
            .ref_prefix(unsafe { extend(base) })
            .map_err(zstd_err)?;
        self.dctx.decompress(out, frame).map_err(zstd_err)
    }
}

/// The zstd frame of a delta payload, once its header names `base_fp` with a known method
/// and the frame declares exactly `raw_len` bytes and ends where the payload does.
fn checked_frame<'p>(
    payload: &'p [u8],
    base_fp: &Fingerprint,
    raw_len: usize,
) -> Result<&'p [u8], DeltaError> {
    let named = base_of(payload)?;
    if payload[FINGERPRINT_LEN] != METHOD_ZSTD_PREFIX {
        return Err(DeltaError::UnknownMethod(payload[FINGERPRINT_LEN]));
    }
    if &named != base_fp {
        return Err(DeltaError::WrongBase);
    }
    checked_zstd(&payload[HEADER_LEN..], raw_len)
}

/// `frame`, once it declares exactly `raw_len` bytes (within the chunk limit) and ends where
/// the payload does.
fn checked_zstd(frame: &[u8], raw_len: usize) -> Result<&[u8], DeltaError> {
    if raw_len > MAX_CHUNK_RAW as usize {
        return Err(DeltaError::TooLarge(raw_len));
    }
    let declared = zstd_safe::get_frame_content_size(frame)
        .map_err(|_| DeltaError::Corrupt("bad frame header".into()))?;
    if declared != Some(raw_len as u64) {
        return Err(DeltaError::LengthMismatch {
            declared: raw_len,
            frame: declared,
        });
    }
    let size = zstd_safe::find_frame_compressed_size(frame).map_err(zstd_err)?;
    if size != frame.len() {
        return Err(DeltaError::TrailingBytes);
    }
    Ok(frame)
}

/// What [`decode_chain`] needs to know of a stored chunk: its codec, stored bytes and raw
/// length.
pub struct Stored {
    pub codec: u8,
    pub bytes: Vec<u8>,
    pub raw_len: usize,
}

/// Decodes the chunk `fp` whatever its codec, following delta links through `fetch` (which
/// returns a stored chunk by fingerprint) for at most [`MAX_CHAIN_DEPTH`] links. Every
/// decoded chunk of the chain, the requested one included, is checked against its
/// fingerprint: a base is trusted only once it is verified.
pub fn decode_chain<F>(fp: &Fingerprint, fetch: F) -> Result<Vec<u8>, DeltaError>
where
    F: FnMut(&Fingerprint) -> Result<Stored, String>,
{
    decode_chain_within(fp, MAX_CHAIN_DEPTH, fetch)
}

/// [`decode_chain`] for at most `max_links` links: a reader that holds a delta already and
/// decodes its base takes `MAX_CHAIN_DEPTH - 1`, so the whole chain stays within the cap.
pub fn decode_chain_within<F>(
    fp: &Fingerprint,
    max_links: usize,
    fetch: F,
) -> Result<Vec<u8>, DeltaError>
where
    F: FnMut(&Fingerprint) -> Result<Stored, String>,
{
    decode_chain_each(fp, max_links, |_| None::<&[u8]>, fetch, |_, _| {})
}

/// [`decode_chain_within`] that also hands each chunk below `fp` it decoded and verified
/// (the whole chunk at the bottom, then each delta link up) to `each`: a reader that keeps
/// them decodes a chain sharing those links with one delta decode, not the whole walk again.
/// `known` answers the raw bytes of a chunk the reader already holds verified (its cache):
/// the walk down stops at the first link it knows, so a chain ending at a shared base (a
/// trained dictionary) does not read and hash that base again for every chunk above it.
pub fn decode_chain_each<F, E, K, R>(
    fp: &Fingerprint,
    max_links: usize,
    mut known: K,
    mut fetch: F,
    mut each: E,
) -> Result<Vec<u8>, DeltaError>
where
    K: FnMut(&Fingerprint) -> Option<R>,
    R: std::ops::Deref,
    R::Target: AsRef<[u8]>,
    F: FnMut(&Fingerprint) -> Result<Stored, String>,
    E: FnMut(&Fingerprint, &[u8]),
{
    // Walk down to a chunk the reader holds or the first non-delta chunk, remembering the
    // deltas on the way.
    let mut links: Vec<(Fingerprint, Stored)> = Vec::new();
    let mut cur = *fp;
    let bottom = loop {
        if let Some(raw) = known(&cur) {
            break Bottom::Known(raw);
        }
        let s = fetch(&cur).map_err(DeltaError::Base)?;
        if s.codec == CODEC_DELTA {
            if links.len() >= max_links {
                return Err(DeltaError::ChainTooLong);
            }
            let base = base_of(&s.bytes)?;
            links.push((cur, s));
            cur = base;
            continue;
        }
        let raw =
            crate::compress::decompress(s.codec, &s.bytes, s.raw_len).map_err(DeltaError::Base)?;
        if !crate::hash::is_stored_chunk(&raw, &cur) {
            return Err(DeltaError::Base("base fingerprint mismatch".into()));
        }
        break Bottom::Decoded(raw);
    };
    if links.is_empty() {
        return Ok(match bottom {
            Bottom::Known(raw) => (*raw).as_ref().to_vec(),
            Bottom::Decoded(raw) => raw,
        });
    }
    // Back up, each link decoded against the one below it: borrowed at the bottom, owned
    // from the first delta on.
    let mut raw: Cow<'_, [u8]> = Cow::Borrowed(match &bottom {
        Bottom::Known(raw) => (**raw).as_ref(),
        Bottom::Decoded(raw) => raw,
    });
    let mut dec = DeltaDecoder::new()?;
    while let Some((chunk_fp, s)) = links.pop() {
        each(&cur, &raw);
        let next = dec.decode(&s.bytes, &cur, &raw, s.raw_len)?;
        if !crate::hash::is_stored_chunk(&next, &chunk_fp) {
            return Err(DeltaError::Corrupt(
                "decoded delta fingerprint mismatch".into(),
            ));
        }
        raw = Cow::Owned(next);
        cur = chunk_fp;
    }
    Ok(raw.into_owned())
}

/// Where [`decode_chain_each`]'s walk down stopped.
enum Bottom<R> {
    /// A chunk the reader holds, verified.
    Known(R),
    /// A whole chunk read, decoded and verified.
    Decoded(Vec<u8>),
}
