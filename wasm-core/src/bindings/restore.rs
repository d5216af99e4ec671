//! Restore verification: a fetched bundle's chunks decoded and fingerprinted, so nothing
//! unverified leaves the restore worker.

use wasm_bindgen::prelude::*;

use crate::hash;

/// Chunk fingerprints ([`crate::hash::fingerprint`]) of many ranges of one buffer: 20 bytes
/// per range.
#[wasm_bindgen(js_name = fingerprintMany)]
pub fn fingerprint_many(buf: &[u8], offsets: &[u32], lengths: &[u32]) -> Result<Vec<u8>, JsError> {
    let ranges = checked_ranges(buf.len(), offsets, lengths)?;
    let mut out = vec![0u8; ranges.len() * hash::FINGERPRINT_LEN];
    hash::fingerprint_many_flat(buf, &ranges, &mut out);
    Ok(out)
}

pub(super) fn checked_ranges(
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

/// Decodes one stored chunk (restore, search); throws on a bad frame or length.
#[wasm_bindgen(js_name = decompressChunk)]
pub fn decompress_chunk(codec: u8, stored: &[u8], raw_len: usize) -> Result<Vec<u8>, JsError> {
    crate::compress::decompress(codec, stored, raw_len).map_err(|e| JsError::new(&e))
}
