//! Restore verification: a fetched bundle's chunks decoded and fingerprinted, so nothing
//! unverified leaves the restore worker.

use wasm_bindgen::prelude::*;

use crate::{
    hash::{self, FINGERPRINT_LEN},
    restore,
};

/// One restore's verification in a worker ([`restore::RestoreSession`]): each `chunks/get`
/// answer decoded and checked in one call, against its own chain links and what the session
/// kept of earlier answers.
#[wasm_bindgen(js_name = RestoreSession)]
pub struct RestoreSession(restore::RestoreSession);

#[wasm_bindgen(js_class = RestoreSession)]
impl RestoreSession {
    #[wasm_bindgen(constructor)]
    pub fn new() -> RestoreSession {
        RestoreSession(restore::RestoreSession::new())
    }

    /// Verifies a bundle whose first `requested` entries are the answer and any after them
    /// the chain links its deltas need. One buffer, so the worker hands it to the page
    /// without copying; little-endian: verified: `0u32, n, fps (20 n), raw lengths (4 n),
    /// CRC-32s (4 n), raw bytes, m, fingerprints the session now holds too (20 m)`; refused:
    /// `1u32, chunk index (0xffffffff: the bundle itself), fingerprint (20), reason (UTF-8)`.
    pub fn verify(&mut self, bundle: &[u8], requested: u32) -> Vec<u8> {
        match self.0.verify(bundle, requested as usize) {
            Ok((v, kept)) => {
                let n = v.fps.len();
                let mut out =
                    Vec::with_capacity(12 + n * 28 + v.raw.len() + kept.len() * FINGERPRINT_LEN);
                out.extend_from_slice(&0u32.to_le_bytes());
                out.extend_from_slice(&(n as u32).to_le_bytes());
                for fp in &v.fps {
                    out.extend_from_slice(fp);
                }
                for l in &v.lengths {
                    out.extend_from_slice(&l.to_le_bytes());
                }
                for c in &v.crcs {
                    out.extend_from_slice(&c.to_le_bytes());
                }
                out.extend_from_slice(&v.raw);
                out.extend_from_slice(&(kept.len() as u32).to_le_bytes());
                for fp in &kept {
                    out.extend_from_slice(fp);
                }
                out
            }
            Err(e) => {
                let (k, fp) = e.chunk.unwrap_or((u32::MAX as usize, [0; 20]));
                let mut out = Vec::with_capacity(28 + e.reason.len());
                out.extend_from_slice(&1u32.to_le_bytes());
                out.extend_from_slice(&(k as u32).to_le_bytes());
                out.extend_from_slice(&fp);
                out.extend_from_slice(e.reason.as_bytes());
                out
            }
        }
    }
}

impl Default for RestoreSession {
    fn default() -> Self {
        Self::new()
    }
}

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
