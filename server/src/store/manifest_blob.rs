//! The stored form of a version's manifest (docs/FORMAT.md "Manifest", "Stored form"): the
//! `versions.manifest` column of either index backend holds one zstd frame of the JSON the
//! server validated, standalone or compressed against the JSON of the version named by
//! `versions.manifest_base` (that JSON is the frame's raw-content dictionary: zstd's window
//! starts with it). The backends store and return the bytes as they are; the store encodes
//! once per commit and decodes wherever it needs the recipes, through this module only
//! (chains of bases are followed by `store::versions::ManifestChains`).
//!
//! Why a base: consecutive versions of a source share most entries, path and recipe alike,
//! and a frame that may copy from the previous version's JSON stores a third of a
//! standalone one on typescript-10 (docs/BENCHMARKS.md, "Stored manifests"); without it
//! a repository of many unchanged versions grows by a whole manifest per version.
//!
//! A manifest is mostly 40-character hex fingerprints, which no level compresses much below
//! their 20 bytes of entropy each: the middle levels store more bytes than level 3 on
//! them, and the slowest ones save a few percent for as much time as the server's whole
//! commit or more (docs/BENCHMARKS.md, "Stored manifests"), so rows use level 3, the one
//! the chunks use too. Any level decodes the same way, so a later change of level leaves
//! older rows readable as they are; none is rewritten for it (only a deletion re-stores the
//! rows stored against a deleted version, standalone).
//!
//! Frames carry zstd's content checksum, so a damaged row reads as an error rather than as
//! other JSON. Decoding is bounded: a row never holds more JSON than a commit can write
//! ([`MAX_JSON`]), so a frame that would inflate beyond it is damage, refused before the
//! memory is spent.

use std::fmt;
use std::io::Read;

use wasm_core::format::manifest::MAX_ENTRIES;
use zstd::zstd_safe::CParameter;

/// The zstd level of new rows.
pub const LEVEL: i32 = 3;

/// The largest manifest JSON a commit writes: the body limit of `POST versions`
/// (`api::MAX_MANIFEST_BODY`) plus what re-serialising a parsed manifest may add to each
/// entry (`,"mode":null` and `,"recipe":[]` when the client left them out).
pub const MAX_JSON: usize = (256 << 20) + MAX_ENTRIES * PER_ENTRY_SLACK;

/// Bytes re-serialising may add to one entry; see [`MAX_JSON`].
const PER_ENTRY_SLACK: usize = 32;

/// The first four bytes of a zstd frame (little-endian 0xFD2FB528).
const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// Why a stored manifest cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobError {
    /// The row does not start with a zstd frame.
    NotAFrame,
    /// The frame is damaged, truncated or followed by other bytes.
    Corrupt(String),
    /// The frame would decode to more than the limit (or the JSON to encode is larger).
    TooLarge { limit: usize },
    /// zstd failed to compress (it fails only on allocation or a bad parameter).
    Encode(String),
    /// The chain of bases cannot be followed: a base that is missing, unreadable, not older
    /// than its dependent, or a chain longer than [`MAX_DEPTH`].
    Chain(String),
}

impl fmt::Display for BlobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlobError::NotAFrame => f.write_str("stored manifest is not a zstd frame"),
            BlobError::Corrupt(e) => write!(f, "stored manifest is a damaged zstd frame: {e}"),
            BlobError::TooLarge { limit } => {
                write!(f, "stored manifest decodes to more than {limit} bytes")
            }
            BlobError::Encode(e) => write!(f, "manifest could not be compressed: {e}"),
            BlobError::Chain(e) => write!(f, "stored manifest's base: {e}"),
        }
    }
}

impl std::error::Error for BlobError {}

/// The most links from a row to a standalone frame: reading a version decodes at most this
/// many other manifests first. A commit stores its manifest standalone rather than deeper.
pub const MAX_DEPTH: usize = 8;

/// The stored form of manifest JSON `json`: standalone, or against `base` (the JSON of the
/// version the row will name as its base).
pub fn encode(json: &[u8], base: Option<&[u8]>) -> Result<Vec<u8>, BlobError> {
    if json.len() > MAX_JSON {
        // Never written, so that every row reads back under the same bound.
        return Err(BlobError::TooLarge { limit: MAX_JSON });
    }
    let fail = |e: std::io::Error| BlobError::Encode(e.to_string());
    let mut c = zstd::bulk::Compressor::new(LEVEL).map_err(fail)?;
    c.set_parameter(CParameter::ChecksumFlag(true))
        .map_err(fail)?;
    if let Some(base) = base {
        check_base(base)?;
        // An entry's copy in the base lies about the base's length back: the window spans
        // base and JSON, and the match finder's tables index enough of the base to find it
        // (level 3's own, sized for its 2 MiB window, miss most of a base of a few MiB).
        let w = window_log(base.len() + json.len());
        c.set_parameter(CParameter::WindowLog(w)).map_err(fail)?;
        c.set_parameter(CParameter::HashLog((w - 3).max(17)))
            .map_err(fail)?;
        c.set_parameter(CParameter::ChainLog((w - 3).max(16)))
            .map_err(fail)?;
        c.set_dictionary(LEVEL, base).map_err(fail)?;
    }
    c.compress(json).map_err(fail)
}

/// The largest window a frame against a base declares: what zstd's decoders accept without
/// being told more (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`, 128 MiB).
pub const MAX_WINDOW_LOG: u32 = 27;

/// A manifest of more JSON than this is stored standalone: against a base its window and
/// match tables (about the size of base and JSON together) would cost the commit more
/// memory than the manifest itself, near the window decoders accept.
pub const MAX_BASED_JSON: usize = 32 << 20;

/// The window of a frame against a base, for `span` bytes of base and JSON: a match reaches
/// back up to `span` bytes (an entry's copy in the base sits about the base's length back),
/// beyond the 2 MiB window level 3 takes for inputs of more than ~1 MiB, in which such a
/// frame would find nothing to copy.
fn window_log(span: usize) -> u32 {
    let bits = usize::BITS - span.max(2).saturating_sub(1).leading_zeros();
    bits.clamp(10, MAX_WINDOW_LOG)
}

/// A base is manifest JSON, which starts with `{`: never the zstd dictionary magic, which
/// zstd would parse as a structured dictionary instead of taking the bytes as content.
fn check_base(base: &[u8]) -> Result<(), BlobError> {
    if base.first() == Some(&b'{') {
        Ok(())
    } else {
        Err(BlobError::Chain("a base is not manifest JSON".into()))
    }
}

/// The manifest JSON of stored form `stored`, given the JSON of its base if its row names
/// one.
pub fn decode(stored: &[u8], base: Option<&[u8]>) -> Result<Vec<u8>, BlobError> {
    decode_within(stored, base, MAX_JSON)
}

/// [`decode`] with bound `limit`.
fn decode_within(stored: &[u8], base: Option<&[u8]>, limit: usize) -> Result<Vec<u8>, BlobError> {
    if !stored.starts_with(&MAGIC) {
        return Err(BlobError::NotAFrame);
    }
    let frame_len = zstd::zstd_safe::find_frame_compressed_size(stored)
        .map_err(|code| BlobError::Corrupt(zstd::zstd_safe::get_error_name(code).into()))?;
    if frame_len != stored.len() {
        return Err(BlobError::Corrupt(format!(
            "{} bytes after the frame",
            stored.len() - frame_len
        )));
    }
    // The header's content size (our frames carry it) refuses a large frame at once; the
    // capped read below bounds every frame, whatever its header says.
    let declared = match zstd::zstd_safe::get_frame_content_size(stored) {
        Ok(Some(n)) if n > limit as u64 => return Err(BlobError::TooLarge { limit }),
        Ok(Some(n)) => n as usize,
        _ => 0,
    };
    let corrupt = |e: std::io::Error| BlobError::Corrupt(e.to_string());
    let mut json = Vec::with_capacity(declared);
    match base {
        Some(base) => {
            check_base(base)?;
            zstd::stream::read::Decoder::with_dictionary(stored, base)
                .map_err(corrupt)?
                .single_frame()
                .take(limit as u64 + 1)
                .read_to_end(&mut json)
        }
        None => zstd::stream::read::Decoder::with_buffer(stored)
            .map_err(corrupt)?
            .single_frame()
            .take(limit as u64 + 1)
            .read_to_end(&mut json),
    }
    .map_err(corrupt)?;
    if json.len() > limit {
        return Err(BlobError::TooLarge { limit });
    }
    Ok(json)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn manifest_json() -> Vec<u8> {
        let entries: Vec<String> = (0..200)
            .map(|i| {
                format!(
                    r#"{{"path":"d/f{i}","kind":"file","size":1,"mtime":0,"mode":null,"recipe":["{:040x}"]}}"#,
                    i * 7919
                )
            })
            .collect();
        format!(
            r#"{{"source":"s","time":1,"entries":[{}]}}"#,
            entries.join(",")
        )
        .into_bytes()
    }

    /// A frame without a content size in its header, as a streaming encoder writes it.
    fn frame_without_size(raw: &[u8]) -> Vec<u8> {
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        enc.write_all(raw).unwrap();
        let frame = enc.finish().unwrap();
        assert!(matches!(
            zstd::zstd_safe::get_frame_content_size(&frame),
            Ok(None)
        ));
        frame
    }

    #[test]
    fn round_trip_is_a_smaller_zstd_frame() {
        let json = manifest_json();
        let stored = encode(&json, None).unwrap();
        assert_eq!(stored[..4], MAGIC);
        assert!(
            stored.len() < json.len() / 2,
            "{} of {}",
            stored.len(),
            json.len()
        );
        assert_eq!(decode(&stored, None).unwrap(), json);
        assert_eq!(decode(&encode(b"", None).unwrap(), None).unwrap(), b"");
    }

    /// `manifest_json()` with entries `from..to` and a last entry that differs per `tag`.
    fn manifest_json_range(from: usize, to: usize, tag: &str) -> Vec<u8> {
        let entries: Vec<String> = (from..to)
            .map(|i| {
                format!(
                    r#"{{"path":"d/f{i}","kind":"file","size":1,"mtime":0,"mode":null,"recipe":["{:040x}"]}}"#,
                    (i as u128).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)
                )
            })
            .collect();
        format!(
            r#"{{"source":"s","time":1,"entries":[{}],"tag":"{tag}"}}"#,
            entries.join(",")
        )
        .into_bytes()
    }

    #[test]
    fn against_a_base_round_trips_and_stores_what_differs() {
        let base = manifest_json_range(0, 400, "a");
        let next = manifest_json_range(5, 410, "b");
        let alone = encode(&next, None).unwrap();
        let against = encode(&next, Some(&base)).unwrap();
        assert_eq!(against[..4], MAGIC);
        assert_eq!(decode(&against, Some(&base)).unwrap(), next);
        // Shared entries are copied from the base: what is left is the 15 changed ones.
        assert!(
            against.len() * 5 < alone.len(),
            "{} against the base, {} alone",
            against.len(),
            alone.len()
        );
        // A standalone frame reads the same whatever base it is handed.
        assert_eq!(decode(&alone, Some(&base)).unwrap(), next);
    }

    #[test]
    fn against_a_base_reaches_a_base_larger_than_the_default_window() {
        // ~4 MB of JSON that compresses little alone (distinct fingerprints): the copy of
        // an entry in the base lies ~4 MB back, twice level 3's default window.
        let base = manifest_json_range(0, 36_000, "a");
        let next = manifest_json_range(10, 36_010, "b");
        assert!(base.len() > 4 << 20, "{}", base.len());
        let alone = encode(&next, None).unwrap();
        let against = encode(&next, Some(&base)).unwrap();
        assert!(
            against.len() * 100 < alone.len(),
            "{} against the base, {} alone",
            against.len(),
            alone.len()
        );
        assert_eq!(decode(&against, Some(&base)).unwrap(), next);
        assert_eq!(window_log(base.len() + next.len()), 24);
        assert_eq!(window_log(1), 10);
        assert_eq!(window_log(usize::MAX), MAX_WINDOW_LOG);
    }

    #[test]
    fn against_a_base_needs_that_base() {
        let base = manifest_json_range(0, 400, "a");
        let next = manifest_json_range(5, 410, "b");
        let against = encode(&next, Some(&base)).unwrap();
        // Without its base, or with another, the frame is refused (its matches reach into
        // a window that is not there, or its checksum fails), never read as other JSON.
        for wrong in [None, Some(manifest_json_range(1, 401, "c"))] {
            match decode(&against, wrong.as_deref()) {
                Err(BlobError::Corrupt(e)) => assert!(!e.is_empty()),
                other => panic!("read with base {:?}: {other:?}", wrong.map(|w| w.len())),
            }
        }
        let not_json = b"\x37\xA4\x30\xEC dictionary magic";
        assert!(matches!(
            encode(&next, Some(not_json)),
            Err(BlobError::Chain(_))
        ));
        assert!(matches!(
            decode(&against, Some(not_json)),
            Err(BlobError::Chain(_))
        ));
    }

    #[test]
    fn frames_of_any_level_decode() {
        let json = manifest_json();
        for level in [1, 3, 19] {
            let stored = zstd::bulk::compress(&json, level).unwrap();
            assert_eq!(decode(&stored, None).unwrap(), json, "level {level}");
        }
        assert_eq!(decode(&frame_without_size(&json), None).unwrap(), json);
    }

    #[test]
    fn what_is_not_one_whole_frame_is_refused() {
        let json = manifest_json();
        assert_eq!(decode(&json, None), Err(BlobError::NotAFrame));
        assert_eq!(decode(b"", None), Err(BlobError::NotAFrame));

        let stored = encode(&json, None).unwrap();
        let cut = &stored[..stored.len() - 5];
        assert!(
            matches!(decode(cut, None), Err(BlobError::Corrupt(_))),
            "truncated"
        );

        let mut trailing = stored.clone();
        trailing.extend_from_slice(&stored);
        assert_eq!(
            decode(&trailing, None),
            Err(BlobError::Corrupt(format!(
                "{} bytes after the frame",
                stored.len()
            )))
        );

        // Damage inside the compressed blocks: block decoding or the content checksum
        // fails, and the error says so instead of returning other JSON.
        let mut flipped = stored.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x55;
        flipped[mid + 1] ^= 0xAA;
        match decode(&flipped, None) {
            Err(BlobError::Corrupt(e)) => assert!(!e.is_empty()),
            other => panic!("damaged frame read as {other:?}"),
        }
        let shown = decode(&json, None).unwrap_err().to_string();
        assert_eq!(shown, "stored manifest is not a zstd frame");
    }

    #[test]
    fn frames_beyond_the_bound_are_refused() {
        let json = manifest_json();
        let n = json.len();
        let with_size = zstd::bulk::compress(&json, 3).unwrap();
        let without_size = frame_without_size(&json);
        for frame in [&with_size, &without_size] {
            assert_eq!(decode_within(frame, None, n).unwrap(), json);
            assert_eq!(
                decode_within(frame, None, n - 1),
                Err(BlobError::TooLarge { limit: n - 1 })
            );
        }
    }

    #[test]
    fn encode_refuses_what_decode_would() {
        // The body limit and the two fields an entry may gain (12 bytes each).
        const { assert!(MAX_JSON >= crate::api::MAX_MANIFEST_BODY + MAX_ENTRIES * 24) };
        let big = vec![0u8; MAX_JSON + 1];
        assert_eq!(
            encode(&big, None),
            Err(BlobError::TooLarge { limit: MAX_JSON })
        );
    }
}
