//! Bundles: a batch of chunks, each with its fingerprint and codec (`docs/FORMAT.md`).

use super::{u16_at, u32_at};
use crate::hash::{Fingerprint, FINGERPRINT_LEN};

pub const BUNDLE_MAGIC: [u8; 4] = *b"DTB1";
pub const BUNDLE_VERSION: u16 = 1;
pub const BUNDLE_HEADER_LEN: usize = 16;
pub const ENTRY_HEADER_LEN: usize = 32;
/// Largest raw (decoded) chunk.
pub const MAX_CHUNK_RAW: u32 = 1 << 20;
/// Largest stored (encoded) chunk.
pub const MAX_CHUNK_STORED: u32 = (1 << 20) + 4096;
/// Largest bundle, header included.
pub const MAX_BUNDLE_BYTES: usize = 16 << 20;
/// Most chunks in one bundle.
pub const MAX_BUNDLE_CHUNKS: u32 = 65_536;
/// Most raw bytes in one uploaded bundle (its entries' raw lengths summed): the server
/// decodes and hashes each entry, and a bundle of compressible chunks under the byte limit
/// could otherwise make it decode 64 GiB. Clients seal bundles well below it.
pub const MAX_BUNDLE_RAW: u64 = 1 << 30;

/// How a chunk's stored bytes encode its raw bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Codec {
    Raw = 0,
    Zstd = 1,
    /// 20-byte base fingerprint, then a delta against that base (docs/FORMAT.md).
    Delta = 2,
}

impl Codec {
    pub fn from_u8(v: u8) -> Option<Codec> {
        match v {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Zstd),
            2 => Some(Codec::Delta),
            _ => None,
        }
    }
}

/// One chunk of a bundle; `payload` borrows the stored bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleEntry<'a> {
    pub fp: Fingerprint,
    pub codec: Codec,
    pub raw_len: u32,
    pub payload: &'a [u8],
}

/// The fixed part of an entry, for incremental (streaming) parsers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryHeader {
    pub fp: Fingerprint,
    pub codec: Codec,
    pub raw_len: u32,
    pub stored_len: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BundleError {
    Truncated,
    BadMagic,
    BadVersion(u16),
    NonZeroReserved,
    TooManyChunks(u32),
    ChunkTooLarge { raw_len: u32, stored_len: u32 },
    UnknownCodec(u8),
    RawStoredMismatch,
    TrailingBytes,
}

impl BundleError {
    /// Errors that are about size limits (HTTP 413) rather than malformed input (400).
    pub fn is_too_large(&self) -> bool {
        matches!(
            self,
            BundleError::TooManyChunks(_) | BundleError::ChunkTooLarge { .. }
        )
    }
}

impl std::fmt::Display for BundleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BundleError::Truncated => write!(f, "bundle is truncated"),
            BundleError::BadMagic => write!(f, "not a bundle (bad magic)"),
            BundleError::BadVersion(v) => write!(f, "unsupported bundle version {v}"),
            BundleError::NonZeroReserved => write!(f, "reserved bundle fields must be zero"),
            BundleError::TooManyChunks(n) => {
                write!(f, "{n} chunks in one bundle (limit {MAX_BUNDLE_CHUNKS})")
            }
            BundleError::ChunkTooLarge { raw_len, stored_len } => write!(
                f,
                "chunk too large: raw {raw_len} (limit {MAX_CHUNK_RAW}), stored {stored_len} (limit {MAX_CHUNK_STORED})"
            ),
            BundleError::UnknownCodec(c) => write!(f, "unknown codec {c}"),
            BundleError::RawStoredMismatch => {
                write!(f, "raw chunk whose stored length differs from its raw length")
            }
            BundleError::TrailingBytes => write!(f, "trailing bytes after the last chunk"),
        }
    }
}

impl std::error::Error for BundleError {}

/// Encodes the 16-byte bundle header.
pub fn encode_header(count: u32) -> [u8; BUNDLE_HEADER_LEN] {
    let mut h = [0u8; BUNDLE_HEADER_LEN];
    h[0..4].copy_from_slice(&BUNDLE_MAGIC);
    h[4..6].copy_from_slice(&BUNDLE_VERSION.to_le_bytes());
    h[8..12].copy_from_slice(&count.to_le_bytes());
    h
}

/// Parses the bundle header, returning the chunk count.
pub fn parse_header(b: &[u8]) -> Result<u32, BundleError> {
    if b.len() < BUNDLE_HEADER_LEN {
        return Err(BundleError::Truncated);
    }
    if b[0..4] != BUNDLE_MAGIC {
        return Err(BundleError::BadMagic);
    }
    let version = u16_at(b, 4);
    if version != BUNDLE_VERSION {
        return Err(BundleError::BadVersion(version));
    }
    if u16_at(b, 6) != 0 || u32_at(b, 12) != 0 {
        return Err(BundleError::NonZeroReserved);
    }
    let count = u32_at(b, 8);
    if count > MAX_BUNDLE_CHUNKS {
        return Err(BundleError::TooManyChunks(count));
    }
    Ok(count)
}

/// Encodes the 32-byte header of one entry (its payload follows it).
pub fn encode_entry_header(h: &EntryHeader) -> [u8; ENTRY_HEADER_LEN] {
    let mut e = [0u8; ENTRY_HEADER_LEN];
    e[0..20].copy_from_slice(&h.fp);
    e[20] = h.codec as u8;
    e[24..28].copy_from_slice(&h.raw_len.to_le_bytes());
    e[28..32].copy_from_slice(&h.stored_len.to_le_bytes());
    e
}

/// Parses and checks the 32-byte header of one entry.
pub fn parse_entry_header(b: &[u8]) -> Result<EntryHeader, BundleError> {
    if b.len() < ENTRY_HEADER_LEN {
        return Err(BundleError::Truncated);
    }
    let mut fp = [0u8; FINGERPRINT_LEN];
    fp.copy_from_slice(&b[0..20]);
    let codec = Codec::from_u8(b[20]).ok_or(BundleError::UnknownCodec(b[20]))?;
    if b[21..24] != [0, 0, 0] {
        return Err(BundleError::NonZeroReserved);
    }
    let raw_len = u32_at(b, 24);
    let stored_len = u32_at(b, 28);
    if raw_len > MAX_CHUNK_RAW || stored_len > MAX_CHUNK_STORED {
        return Err(BundleError::ChunkTooLarge {
            raw_len,
            stored_len,
        });
    }
    if codec == Codec::Raw && raw_len != stored_len {
        return Err(BundleError::RawStoredMismatch);
    }
    Ok(EntryHeader {
        fp,
        codec,
        raw_len,
        stored_len,
    })
}

/// Parses a whole bundle. Checks structure and limits only: decoding payloads and
/// verifying fingerprints is the receiver's job.
pub fn decode_bundle(b: &[u8]) -> Result<Vec<BundleEntry<'_>>, BundleError> {
    let count = parse_header(b)?;
    // Every entry needs at least its header: reject absurd counts before allocating.
    if (count as usize) > (b.len() - BUNDLE_HEADER_LEN) / ENTRY_HEADER_LEN {
        return Err(BundleError::Truncated);
    }
    let mut entries = Vec::with_capacity(count as usize);
    let mut at = BUNDLE_HEADER_LEN;
    for _ in 0..count {
        let h = parse_entry_header(&b[at..])?;
        at += ENTRY_HEADER_LEN;
        let end = at + h.stored_len as usize;
        if end > b.len() {
            return Err(BundleError::Truncated);
        }
        entries.push(BundleEntry {
            fp: h.fp,
            codec: h.codec,
            raw_len: h.raw_len,
            payload: &b[at..end],
        });
        at = end;
    }
    if at != b.len() {
        return Err(BundleError::TrailingBytes);
    }
    Ok(entries)
}

/// Appends entries to a growing bundle buffer.
pub struct BundleWriter {
    buf: Vec<u8>,
    count: u32,
}

impl Default for BundleWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl BundleWriter {
    pub fn new() -> Self {
        BundleWriter {
            buf: encode_header(0).to_vec(),
            count: 0,
        }
    }

    pub fn push(&mut self, fp: &Fingerprint, codec: Codec, raw_len: u32, payload: &[u8]) {
        self.push_header(fp, codec, raw_len, payload.len() as u32);
        self.buf.extend_from_slice(payload);
    }

    fn push_header(&mut self, fp: &Fingerprint, codec: Codec, raw_len: u32, stored_len: u32) {
        let h = EntryHeader {
            fp: *fp,
            codec,
            raw_len,
            stored_len,
        };
        self.buf.extend_from_slice(&encode_entry_header(&h));
        self.count += 1;
    }

    /// Adds an entry whose `stored_len` stored bytes the caller then writes into the
    /// returned room (zeroed): the bytes go straight into the bundle, copied once.
    pub fn push_room(
        &mut self,
        fp: &Fingerprint,
        codec: Codec,
        raw_len: u32,
        stored_len: u32,
    ) -> &mut [u8] {
        self.push_header(fp, codec, raw_len, stored_len);
        let at = self.buf.len();
        self.buf.resize(at + stored_len as usize, 0);
        &mut self.buf[at..]
    }

    /// The bundle so far, its count written: the same bytes [`BundleWriter::finish`] would
    /// give, while the writer stays for [`BundleWriter::clear`] and another bundle.
    pub fn sealed(&mut self) -> &[u8] {
        self.buf[8..12].copy_from_slice(&self.count.to_le_bytes());
        &self.buf
    }

    /// Empties the writer, keeping its memory.
    pub fn clear(&mut self) {
        self.buf.truncate(BUNDLE_HEADER_LEN);
        self.count = 0;
    }

    /// Bytes so far (header included).
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.buf[8..12].copy_from_slice(&self.count.to_le_bytes());
        self.buf
    }
}

/// Encodes a whole bundle.
pub fn encode_bundle(entries: &[BundleEntry<'_>]) -> Vec<u8> {
    let mut w = BundleWriter::new();
    for e in entries {
        w.push(&e.fp, e.codec, e.raw_len, e.payload);
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::fingerprint;

    #[test]
    fn round_trip_and_errors() {
        let a = b"hello world".to_vec();
        let b = vec![7u8; 1000];
        let entries = vec![
            BundleEntry {
                fp: fingerprint(&a),
                codec: Codec::Raw,
                raw_len: a.len() as u32,
                payload: &a,
            },
            BundleEntry {
                fp: fingerprint(&b),
                codec: Codec::Zstd,
                raw_len: 1000,
                payload: &b[..10],
            },
        ];
        let enc = encode_bundle(&entries);
        assert_eq!(enc.len(), 16 + 32 + 11 + 32 + 10);
        assert_eq!(decode_bundle(&enc).unwrap(), entries);

        assert_eq!(
            decode_bundle(&enc[..enc.len() - 1]),
            Err(BundleError::Truncated)
        );
        let mut extra = enc.clone();
        extra.push(0);
        assert_eq!(decode_bundle(&extra), Err(BundleError::TrailingBytes));
        let mut bad = enc.clone();
        bad[0] = b'X';
        assert_eq!(decode_bundle(&bad), Err(BundleError::BadMagic));
        let mut bad = enc.clone();
        bad[16 + 20] = 9;
        assert_eq!(decode_bundle(&bad), Err(BundleError::UnknownCodec(9)));
        let mut bad = enc.clone();
        bad[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_bundle(&bad).unwrap_err().is_too_large());
        let mut bad = enc.clone();
        bad[8..12].copy_from_slice(&60_000u32.to_le_bytes());
        assert_eq!(decode_bundle(&bad), Err(BundleError::Truncated));
        let mut bad = enc;
        bad[16 + 24..16 + 28].copy_from_slice(&(MAX_CHUNK_RAW + 1).to_le_bytes());
        assert!(decode_bundle(&bad).unwrap_err().is_too_large());
        assert_eq!(decode_bundle(&encode_header(0)).unwrap(), vec![]);
    }

    #[test]
    fn room_filled_sealed_and_cleared_equals_pushed() {
        let a = b"hello world".to_vec();
        let b = vec![7u8; 1000];
        let mut w = BundleWriter::new();
        w.push_room(&fingerprint(b"x"), Codec::Raw, 3, 3)
            .copy_from_slice(b"xyz");
        w.clear();
        assert_eq!(w.sealed(), encode_header(0));
        w.push_room(&fingerprint(&a), Codec::Raw, 11, 11)
            .copy_from_slice(&a);
        w.push(&fingerprint(&b), Codec::Zstd, 1000, &b[..10]);
        let mut want = BundleWriter::new();
        want.push(&fingerprint(&a), Codec::Raw, 11, &a);
        want.push(&fingerprint(&b), Codec::Zstd, 1000, &b[..10]);
        assert_eq!(w.sealed(), want.finish());
    }
}
