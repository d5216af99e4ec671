//! Codec 2, methods 2 and 3: frames and slices (docs/FORMAT.md, "Codec 2, methods 2 and 3",
//! is the contract; issue 17).
//!
//! A delta per chunk ([`super::delta`], DARE §3.4) reaches one base. What it leaves is
//! redundancy further away: between the new chunks of one version (a file copied inside the
//! release, locale files sharing their keys) and between a chunk and the neighbours of its
//! base. A *frame* compresses a run of new chunks together, as one zstd frame whose reference
//! prefix is the raw bytes of several bases back to back, so any member may copy from any
//! other member and from every base (docs/BENCHMARKS.md, "Frames with their chains counted":
//! ~30 % off typescript-10's chunk bytes uncapped, ~23 % at a depth of 4). Each member is then
//! stored as a *slice*: its frame's fingerprint and its offset in the frame's raw bytes.
//!
//! This module is the codec only: the layouts, their limits and the decoders that check them
//! on untrusted bytes. Nothing stores frames yet; the readers of stored chunks still refuse
//! methods 2 and 3 as unknown.

use super::delta::{
    checked_zstd, extend, finish_payload, frame_parameters, new_cctx, zstd_err, DeltaDecoder,
    DeltaError,
};
use crate::format::bundle::MAX_CHUNK_RAW;
use crate::hash::{Fingerprint, FINGERPRINT_LEN};
use zstd::zstd_safe::{self, CCtx, CParameter};

/// Method byte of a frame: a zstd frame against several bases.
pub const METHOD_FRAME: u8 = 2;

/// Method byte of a slice: a member's place in its frame.
pub const METHOD_SLICE: u8 = 3;

/// Most bases a frame names.
pub const MAX_FRAME_BASES: usize = 8;

/// Largest reference prefix (the bases' raw bytes together) a frame may need.
pub const MAX_FRAME_PREFIX: usize = 8 << 20;

/// zstd window of a frame: it covers the largest prefix and a frame of the chunk limit.
pub const FRAME_WINDOW_LOG: u32 = 24;

/// Stored length of a slice: frame fingerprint, method, offset.
pub const SLICE_LEN: usize = FINGERPRINT_LEN + 1 + 4;

/// Bytes before a frame's zstd frame when it names `n` bases.
fn frame_header_len(n: usize) -> usize {
    FINGERPRINT_LEN + 2 + FINGERPRINT_LEN * (n - 1)
}

/// The bases a frame payload names, in prefix order (what the caller must decode first).
pub fn frame_bases(payload: &[u8]) -> Result<Vec<Fingerprint>, DeltaError> {
    if payload.len() < FINGERPRINT_LEN + 2 {
        return Err(DeltaError::Truncated(payload.len()));
    }
    if payload[FINGERPRINT_LEN] != METHOD_FRAME {
        return Err(DeltaError::UnknownMethod(payload[FINGERPRINT_LEN]));
    }
    let n = payload[FINGERPRINT_LEN + 1] as usize;
    check_count(n)?;
    if payload.len() < frame_header_len(n) {
        return Err(DeltaError::Truncated(payload.len()));
    }
    let mut bases = Vec::with_capacity(n);
    bases.push(payload[..FINGERPRINT_LEN].try_into().expect("20 bytes"));
    for k in 1..n {
        let at = FINGERPRINT_LEN + 2 + FINGERPRINT_LEN * (k - 1);
        bases.push(
            payload[at..at + FINGERPRINT_LEN]
                .try_into()
                .expect("20 bytes"),
        );
    }
    check_distinct(bases.iter())?;
    Ok(bases)
}

/// A frame names 1 to [`MAX_FRAME_BASES`] bases.
fn check_count(n: usize) -> Result<(), DeltaError> {
    if n == 0 || n > MAX_FRAME_BASES {
        return Err(DeltaError::Base(format!(
            "a frame names {n} bases (1 to {MAX_FRAME_BASES})"
        )));
    }
    Ok(())
}

/// A frame names each base once.
fn check_distinct<'a>(named: impl Iterator<Item = &'a Fingerprint>) -> Result<(), DeltaError> {
    let named: Vec<&Fingerprint> = named.collect();
    for (k, b) in named.iter().enumerate() {
        if named[..k].contains(b) {
            return Err(DeltaError::Base("a frame names a base twice".into()));
        }
    }
    Ok(())
}

/// The reference prefix of a frame: its bases' raw bytes in order.
fn prefix_of(bases: &[(Fingerprint, &[u8])]) -> Result<Vec<u8>, DeltaError> {
    let len: usize = bases.iter().map(|(_, b)| b.len()).sum();
    if len > MAX_FRAME_PREFIX {
        return Err(DeltaError::Base(format!(
            "a frame's bases hold {len} bytes, more than {MAX_FRAME_PREFIX}"
        )));
    }
    let mut prefix = Vec::with_capacity(len);
    for (_, b) in bases {
        prefix.extend_from_slice(b);
    }
    Ok(prefix)
}

/// Makes frames (reusable: keeps its zstd context).
pub struct FrameEncoder {
    cctx: CCtx<'static>,
    level: i32,
    out: Vec<u8>,
}

impl FrameEncoder {
    pub fn new(level: i32) -> Result<Self, DeltaError> {
        let cctx = new_cctx()?;
        Ok(FrameEncoder {
            cctx,
            level,
            out: Vec::new(),
        })
    }

    /// Encodes `raw` (the members' raw bytes back to back) against `bases` (fingerprint and
    /// raw bytes, in prefix order); returns the frame's stored payload, valid until the next
    /// call.
    pub fn encode(
        &mut self,
        bases: &[(Fingerprint, &[u8])],
        raw: &[u8],
    ) -> Result<&[u8], DeltaError> {
        check_count(bases.len())?;
        check_distinct(bases.iter().map(|(fp, _)| fp))?;
        if raw.len() > MAX_CHUNK_RAW as usize {
            return Err(DeltaError::TooLarge(raw.len()));
        }
        let prefix = prefix_of(bases)?;
        let header = frame_header_len(bases.len());
        self.out.clear();
        self.out.extend_from_slice(&bases[0].0);
        self.out.push(METHOD_FRAME);
        self.out.push(bases.len() as u8);
        for (fp, _) in &bases[1..] {
            self.out.extend_from_slice(fp);
        }
        self.out
            .resize(header + zstd_safe::compress_bound(raw.len()), 0);
        let res = (|| {
            let c = &mut self.cctx;
            frame_parameters(c, self.level)?;
            c.set_parameter(CParameter::WindowLog(FRAME_WINDOW_LOG))
                .map_err(zstd_err)?;
            // SAFETY: see `delta::extend`; `finish_payload` resets the context before
            // `prefix` is dropped.
            c.ref_prefix(unsafe { extend(&prefix) }).map_err(zstd_err)?;
            c.compress2(&mut self.out[header..], raw).map_err(zstd_err)
        })();
        finish_payload(&mut self.cctx, &mut self.out, header, res)
    }
}

impl DeltaDecoder {
    /// Decodes a frame payload into its `raw_len` raw bytes against `bases` (fingerprint and
    /// verified raw bytes, in the order the payload names them: [`frame_bases`]). The result's
    /// fingerprint is the caller's to check, as for every codec.
    pub fn decode_frame_chunk(
        &mut self,
        payload: &[u8],
        bases: &[(Fingerprint, &[u8])],
        raw_len: usize,
    ) -> Result<Vec<u8>, DeltaError> {
        let named = frame_bases(payload)?;
        // The caller's bases must be the ones named, in the same order.
        if named.len() != bases.len() || named.iter().zip(bases).any(|(n, (fp, _))| n != fp) {
            return Err(DeltaError::WrongBase);
        }
        let prefix = prefix_of(bases)?;
        let frame = checked_zstd(&payload[frame_header_len(named.len())..], raw_len)?;
        let mut out = vec![0u8; raw_len];
        self.decode_prefixed(frame, &prefix, Some(FRAME_WINDOW_LOG), &mut out)?;
        Ok(out)
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

    /// A base, and a chunk made of edited pieces of it.
    fn bases_and_members() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let a = test_bytes(3, 200_000);
        let b = test_bytes(4, 150_000);
        let mut m1 = a[10_000..60_000].to_vec();
        m1[100] ^= 0xff;
        let mut m2 = b[5_000..45_000].to_vec();
        m2.extend_from_slice(&a[70_000..80_000]);
        // A member that repeats another member: only the frame can share it.
        let m3 = m2.clone();
        let m4 = test_bytes(9, 30_000);
        (vec![a, b], vec![m1, m2, m3, m4])
    }

    fn named(bases: &[Vec<u8>]) -> Vec<(Fingerprint, &[u8])> {
        bases
            .iter()
            .map(|b| (fingerprint(b), b.as_slice()))
            .collect()
    }

    #[test]
    fn frame_and_slices_round_trip_and_share_across_bases_and_members() {
        let (bases, members) = bases_and_members();
        let raw: Vec<u8> = members.concat();
        let pairs = named(&bases);
        let mut enc = FrameEncoder::new(19).unwrap();
        let payload = enc.encode(&pairs, &raw).unwrap().to_vec();
        // Only the random member costs its size: the rest is copied from bases and members.
        assert!(payload.len() < 40_000, "frame of {} bytes", payload.len());
        assert_eq!(
            frame_bases(&payload).unwrap(),
            pairs.iter().map(|(fp, _)| *fp).collect::<Vec<_>>()
        );
        let mut dec = DeltaDecoder::new().unwrap();
        let got = dec.decode_frame_chunk(&payload, &pairs, raw.len()).unwrap();
        assert_eq!(got, raw);
        let frame_fp = fingerprint(&raw);
        let mut at = 0;
        for m in &members {
            let p = slice_payload(&frame_fp, at as u32);
            assert_eq!(slice_of(&p, &frame_fp, &got, m.len()).unwrap(), &m[..]);
            at += m.len();
        }
    }

    #[test]
    fn refuses_wrong_bases_and_damage() {
        let (bases, members) = bases_and_members();
        let raw: Vec<u8> = members.concat();
        let pairs = named(&bases);
        let payload = FrameEncoder::new(3)
            .unwrap()
            .encode(&pairs, &raw)
            .unwrap()
            .to_vec();
        let mut dec = DeltaDecoder::new().unwrap();
        // Bases in another order, one missing, one of another chunk.
        let swapped = vec![pairs[1], pairs[0]];
        assert_eq!(
            dec.decode_frame_chunk(&payload, &swapped, raw.len()),
            Err(DeltaError::WrongBase)
        );
        assert_eq!(
            dec.decode_frame_chunk(&payload, &pairs[..1], raw.len()),
            Err(DeltaError::WrongBase)
        );
        // Another raw length than the frame declares.
        assert!(matches!(
            dec.decode_frame_chunk(&payload, &pairs, raw.len() - 1),
            Err(DeltaError::LengthMismatch { .. })
        ));
        assert_eq!(
            dec.decode_frame_chunk(&payload, &pairs, MAX_CHUNK_RAW as usize + 1),
            Err(DeltaError::TooLarge(MAX_CHUNK_RAW as usize + 1))
        );
        // Truncated, a base count out of range, a method byte not a frame's.
        assert!(dec
            .decode_frame_chunk(&payload[..30], &pairs, raw.len())
            .is_err());
        let mut bad = payload.clone();
        bad[FINGERPRINT_LEN + 1] = 0;
        assert!(matches!(frame_bases(&bad), Err(DeltaError::Base(_))));
        bad[FINGERPRINT_LEN + 1] = MAX_FRAME_BASES as u8 + 1;
        assert!(matches!(frame_bases(&bad), Err(DeltaError::Base(_))));
        let mut bad = payload.clone();
        bad[FINGERPRINT_LEN] = 1;
        assert_eq!(frame_bases(&bad), Err(DeltaError::UnknownMethod(1)));
        // Bytes after the frame; a damaged frame either fails or decodes to other bytes,
        // which the caller's fingerprint check refuses.
        let mut longer = payload.clone();
        longer.push(0);
        assert_eq!(
            dec.decode_frame_chunk(&longer, &pairs, raw.len()),
            Err(DeltaError::TrailingBytes)
        );
        let mut flipped = payload.clone();
        let last = flipped.len() - 10;
        flipped[last] ^= 0x55;
        if let Ok(out) = dec.decode_frame_chunk(&flipped, &pairs, raw.len()) {
            assert_ne!(fingerprint(&out), fingerprint(&raw));
        }
        // The decoder is sound after every refusal.
        assert_eq!(
            dec.decode_frame_chunk(&payload, &pairs, raw.len()).unwrap(),
            raw
        );
    }

    #[test]
    fn encoder_refuses_what_no_reader_takes() {
        let (bases, _) = bases_and_members();
        let pairs = named(&bases);
        let mut enc = FrameEncoder::new(3).unwrap();
        assert!(enc.encode(&[], b"x").is_err());
        let twice = vec![pairs[0], pairs[0]];
        assert!(enc.encode(&twice, b"x").is_err());
        let big = vec![0u8; MAX_CHUNK_RAW as usize + 1];
        assert_eq!(
            enc.encode(&pairs, &big),
            Err(DeltaError::TooLarge(MAX_CHUNK_RAW as usize + 1))
        );
        let huge = vec![7u8; MAX_FRAME_PREFIX / 2 + 1];
        let over = vec![
            (fingerprint(b"a"), &huge[..]),
            (fingerprint(b"b"), &huge[..]),
        ];
        assert!(matches!(enc.encode(&over, b"x"), Err(DeltaError::Base(_))));
        // Usable again after each refusal.
        assert!(enc.encode(&pairs, b"hello").is_ok());
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
