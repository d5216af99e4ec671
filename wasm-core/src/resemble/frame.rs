//! Frames and slices: codec 2, method 3 (docs/FORMAT.md, "Codec 2, method 3: frames and
//! slices", is the contract; issue 17).
//!
//! A delta per chunk ([`super::delta`], DARE §3.4) reaches one base chunk. What it leaves is
//! redundancy further away: between the new chunks of one version (a file copied inside the
//! release, locale files sharing their keys) and between a chunk and its base's neighbours.
//! A *frame* is a run of a version's new chunks stored as one chunk (no manifest names it),
//! encoded as any chunk is, whole or as a method 1 delta against one older frame, so each
//! member may copy from every other member and from the whole older frame. Each member is
//! then stored as a *slice*: its frame's fingerprint and its offset in the frame's raw bytes
//! (docs/BENCHMARKS.md, "Frames with one base", measures the grouping).
//!
//! A slice is a delta link whose decoding is a copy: [`super::delta::DeltaDecoder`] decodes
//! both methods, so every reader of delta chains reads slices. This module builds frames and
//! writes and checks slice payloads on untrusted bytes.

use super::delta::DeltaError;
use crate::format::bundle::MAX_CHUNK_RAW;
use crate::hash::{Fingerprint, FINGERPRINT_LEN};

/// Method byte of a slice: a member's place in its frame.
pub const METHOD_SLICE: u8 = 3;

/// Stored length of a slice: frame fingerprint, method, offset.
pub const SLICE_LEN: usize = FINGERPRINT_LEN + 1 + 4;

/// A frame's raw bytes and where each member starts in them.
pub struct Frame {
    pub raw: Vec<u8>,
    pub offsets: Vec<u32>,
}

impl Frame {
    /// The members back to back (their raw bytes together within the chunk limit: the
    /// caller cuts frames at [`MAX_CHUNK_RAW`]).
    pub fn of<'m>(members: impl Iterator<Item = &'m [u8]>) -> Frame {
        let mut f = Frame {
            raw: Vec::new(),
            offsets: Vec::new(),
        };
        for m in members {
            f.offsets.push(f.raw.len() as u32);
            f.raw.extend_from_slice(m);
        }
        debug_assert!(f.raw.len() <= MAX_CHUNK_RAW as usize);
        f
    }
}

/// The stored payload of a member at `offset` in the frame `frame_fp`.
pub fn slice_payload(frame_fp: &Fingerprint, offset: u32) -> [u8; SLICE_LEN] {
    let mut p = [0u8; SLICE_LEN];
    p[..FINGERPRINT_LEN].copy_from_slice(frame_fp);
    p[FINGERPRINT_LEN] = METHOD_SLICE;
    p[FINGERPRINT_LEN + 1..].copy_from_slice(&offset.to_le_bytes());
    p
}

/// A member's raw bytes: the `raw_len` bytes of `frame` (the raw bytes of the frame
/// `frame_fp`, verified) that its slice payload points at.
pub fn slice_of<'f>(
    payload: &[u8],
    frame_fp: &Fingerprint,
    frame: &'f [u8],
    raw_len: usize,
) -> Result<&'f [u8], DeltaError> {
    if payload.len() != SLICE_LEN {
        return Err(DeltaError::Truncated(payload.len()));
    }
    if payload[FINGERPRINT_LEN] != METHOD_SLICE {
        return Err(DeltaError::UnknownMethod(payload[FINGERPRINT_LEN]));
    }
    if &payload[..FINGERPRINT_LEN] != frame_fp {
        return Err(DeltaError::WrongBase);
    }
    if raw_len > MAX_CHUNK_RAW as usize {
        return Err(DeltaError::TooLarge(raw_len));
    }
    let offset =
        u32::from_le_bytes(payload[FINGERPRINT_LEN + 1..].try_into().expect("4 bytes")) as usize;
    offset
        .checked_add(raw_len)
        .and_then(|end| frame.get(offset..end))
        .ok_or_else(|| {
            DeltaError::Base(format!(
                "a slice of {raw_len} bytes at {offset} lies outside its frame of {} bytes",
                frame.len()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::test_bytes;
    use crate::hash::fingerprint;
    use crate::resemble::delta::{DeltaDecoder, DeltaEncoder};

    #[test]
    fn a_frame_and_its_slices_round_trip_through_the_delta_decoder() {
        // An older frame (the base), and a new frame whose members are edited pieces of it
        // and of each other: one frame against one base holds them in little more than
        // their edits.
        let old = test_bytes(3, 400_000);
        let old_fp = fingerprint(&old);
        let mut m1 = old[10_000..60_000].to_vec();
        m1[100] ^= 0xff;
        let mut m2 = old[200_000..240_000].to_vec();
        m2.extend_from_slice(&old[70_000..80_000]);
        let m3 = m2.clone();
        let m4 = test_bytes(9, 30_000);
        let members = [m1, m2, m3, m4];
        let frame = Frame::of(members.iter().map(|m| m.as_slice()));
        assert_eq!(
            frame.raw.len(),
            members.iter().map(|m| m.len()).sum::<usize>()
        );
        let frame_fp = fingerprint(&frame.raw);
        let payload = DeltaEncoder::new(19)
            .unwrap()
            .encode(&old_fp, &old, &frame.raw)
            .unwrap()
            .to_vec();
        assert!(payload.len() < 40_000, "frame of {} bytes", payload.len());
        let mut dec = DeltaDecoder::new().unwrap();
        let raw = dec
            .decode(&payload, &old_fp, &old, frame.raw.len())
            .unwrap();
        assert_eq!(raw, frame.raw);
        for (m, &at) in members.iter().zip(&frame.offsets) {
            let p = slice_payload(&frame_fp, at);
            assert_eq!(dec.decode(&p, &frame_fp, &raw, m.len()).unwrap(), *m);
            let mut out = vec![0u8; m.len()];
            dec.decode_into(&p, &frame_fp, &raw, &mut out).unwrap();
            assert_eq!(out, *m);
            // A slice names its frame: against another base it is refused.
            assert_eq!(
                dec.decode(&p, &old_fp, &old, m.len()),
                Err(DeltaError::WrongBase)
            );
        }
    }

    #[test]
    fn slices_are_refused_outside_their_frame() {
        let frame = test_bytes(5, 1000);
        let fp = fingerprint(&frame);
        let p = slice_payload(&fp, 990);
        assert_eq!(slice_of(&p, &fp, &frame, 10).unwrap(), &frame[990..]);
        assert!(matches!(
            slice_of(&p, &fp, &frame, 11),
            Err(DeltaError::Base(_))
        ));
        let end = slice_payload(&fp, u32::MAX);
        assert!(matches!(
            slice_of(&end, &fp, &frame, 1),
            Err(DeltaError::Base(_))
        ));
        assert_eq!(
            slice_of(&p, &fingerprint(b"other"), &frame, 10),
            Err(DeltaError::WrongBase)
        );
        assert_eq!(
            slice_of(&p[..24], &fp, &frame, 10),
            Err(DeltaError::Truncated(24))
        );
        let mut m = p;
        m[FINGERPRINT_LEN] = 2;
        assert_eq!(
            slice_of(&m, &fp, &frame, 10),
            Err(DeltaError::UnknownMethod(2))
        );
        assert_eq!(
            slice_of(&p, &fp, &frame, MAX_CHUNK_RAW as usize + 1),
            Err(DeltaError::TooLarge(MAX_CHUNK_RAW as usize + 1))
        );
    }
}
