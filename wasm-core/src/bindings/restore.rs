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
    /// the chain links its deltas need; for a `zip`, the answer's bytes are the chunks'
    /// deflate fragments instead of their raw bytes.
    pub fn verify(&mut self, bundle: &[u8], requested: u32, zip: bool) -> RestoreAnswer {
        match self.0.verify(bundle, requested as usize, zip) {
            Ok((v, kept)) => {
                let n = v.fps.len();
                let mut head = Vec::with_capacity(16 + n * 32 + kept.len() * FINGERPRINT_LEN);
                head.extend_from_slice(&0u32.to_le_bytes());
                head.extend_from_slice(&(n as u32).to_le_bytes());
                for fp in &v.fps {
                    head.extend_from_slice(fp);
                }
                for l in &v.lengths {
                    head.extend_from_slice(&l.to_le_bytes());
                }
                for c in &v.crcs {
                    head.extend_from_slice(&c.to_le_bytes());
                }
                head.extend_from_slice(&(kept.len() as u32).to_le_bytes());
                for fp in &kept {
                    head.extend_from_slice(fp);
                }
                let raw = match v.fragments {
                    Some(f) => {
                        head.extend_from_slice(&1u32.to_le_bytes());
                        for l in &f.lengths {
                            head.extend_from_slice(&l.to_le_bytes());
                        }
                        f.bytes
                    }
                    None => {
                        head.extend_from_slice(&0u32.to_le_bytes());
                        v.raw
                    }
                };
                RestoreAnswer { head, raw }
            }
            Err(e) => {
                let (k, fp) = e.chunk.unwrap_or((u32::MAX as usize, [0; 20]));
                let mut head = Vec::with_capacity(28 + e.reason.len());
                head.extend_from_slice(&1u32.to_le_bytes());
                head.extend_from_slice(&(k as u32).to_le_bytes());
                head.extend_from_slice(&fp);
                head.extend_from_slice(e.reason.as_bytes());
                RestoreAnswer {
                    head,
                    raw: Vec::new(),
                }
            }
        }
    }
}

/// What [`RestoreSession::verify`] answers, in two buffers so that the raw bytes leave the
/// Wasm memory in one copy, straight into a buffer the worker can hand to the page.
#[wasm_bindgen]
pub struct RestoreAnswer {
    head: Vec<u8>,
    raw: Vec<u8>,
}

#[wasm_bindgen]
impl RestoreAnswer {
    /// Little-endian. Verified: `0u32, n, fps (20 n), raw lengths (4 n), CRC-32s (4 n), m,
    /// fingerprints the session now holds too (20 m), z, then when z is 1 the fragments'
    /// lengths (4 n)`. Refused: `1u32, chunk index (0xffffffff: the bundle itself),
    /// fingerprint (20), reason (UTF-8)`.
    pub fn head(&self) -> Vec<u8> {
        self.head.clone()
    }

    /// The verified chunks' raw bytes (for a zip, their deflate fragments) back to back in
    /// answer order (nothing when refused); what is taken is no longer held here.
    #[wasm_bindgen(js_name = takeRaw)]
    pub fn take_raw(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.raw)
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

/// Runs a synthetic zip answer through verification ([`crate::warm_up::restore`]), so that
/// the engine has optimised the restore's code before the user's first restore.
#[wasm_bindgen(js_name = warmUpRestore)]
pub fn warm_up_restore() {
    crate::warm_up::restore();
}
