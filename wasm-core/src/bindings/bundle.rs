//! Bundles on the page's thread (docs/FORMAT.md, "Bundle"): the uploads it sends and the
//! `chunks/get` answers it reads itself, through [`crate::format::bundle`], the codec the
//! server and the workers use, so the format has one implementation.

use wasm_bindgen::prelude::*;

use crate::format::bundle::{decode_bundle, BundleWriter, Codec};
use crate::hash::FINGERPRINT_LEN;

/// A bundle built chunk by chunk, then written into a buffer the caller keeps (an upload's
/// buffer is reused from one bundle to the next).
#[wasm_bindgen]
pub struct BundleBuilder(BundleWriter);

#[wasm_bindgen]
impl BundleBuilder {
    #[wasm_bindgen(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> BundleBuilder {
        BundleBuilder(BundleWriter::new())
    }

    /// Adds a chunk: its 20-byte fingerprint, codec (docs/FORMAT.md), raw length and stored
    /// bytes.
    pub fn push(
        &mut self,
        fp: &[u8],
        codec: u8,
        raw_len: u32,
        stored: &[u8],
    ) -> Result<(), JsError> {
        let fp: &[u8; FINGERPRINT_LEN] = fp
            .try_into()
            .map_err(|_| JsError::new("a bundle entry's fingerprint is 20 bytes"))?;
        let codec =
            Codec::from_u8(codec).ok_or_else(|| JsError::new(&format!("unknown codec {codec}")))?;
        self.0.push(fp, codec, raw_len, stored);
        Ok(())
    }

    /// The bundle's size in bytes, header included.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    #[wasm_bindgen(js_name = isEmpty)]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Writes the bundle into `out`, which must be [`BundleBuilder::len`] bytes, and starts
    /// an empty one.
    #[wasm_bindgen(js_name = writeInto)]
    pub fn write_into(&mut self, out: &mut [u8]) -> Result<(), JsError> {
        if out.len() != self.0.len() {
            return Err(JsError::new(
                "writeInto: the buffer is not the bundle's size",
            ));
        }
        out.copy_from_slice(&std::mem::take(&mut self.0).finish());
        Ok(())
    }
}

/// Where each entry of `bundle` lies in it, five numbers per entry: the offset of its
/// fingerprint, its codec, raw length, and the offset and length of its stored bytes.
/// Checks the structure and limits only (as the server's reading does); decoding and
/// verifying is the caller's.
#[wasm_bindgen(js_name = bundleEntries)]
pub fn bundle_entries(bundle: &[u8]) -> Result<Vec<u32>, JsError> {
    let entries =
        decode_bundle(bundle).map_err(|e| JsError::new(&format!("malformed bundle: {e}")))?;
    let base = bundle.as_ptr() as usize;
    let mut out = Vec::with_capacity(entries.len() * 5);
    for e in &entries {
        let at = e.payload.as_ptr() as usize - base;
        // The fingerprint opens the entry's header, which ends where its stored bytes begin.
        let fp_at = at - crate::format::bundle::ENTRY_HEADER_LEN;
        debug_assert_eq!(bundle[fp_at..fp_at + FINGERPRINT_LEN], e.fp);
        out.extend([
            fp_at as u32,
            e.codec as u32,
            e.raw_len,
            at as u32,
            e.payload.len() as u32,
        ]);
    }
    Ok(out)
}
