//! Bundles on the page's thread (docs/FORMAT.md, "Bundle"): the uploads it sends and the
//! `chunks/get` answers it reads itself, through [`crate::format::bundle`], the codec the
//! server and the workers use, so the format has one implementation.

use wasm_bindgen::prelude::*;

use crate::format::bundle::{decode_bundle, BundleWriter, Codec, ENTRY_HEADER_LEN};
use crate::hash::FINGERPRINT_LEN;

/// A bundle built in this module's memory, one after another (an upload's). The stored bytes
/// are written by the caller straight into the room [`BundleBuilder::push`] makes, and the
/// sealed bundle is read where it lies ([`BundleBuilder::seal`]): each byte is copied once,
/// as JS would copy it into a buffer of its own. Addresses are offsets into the module's
/// memory ([`wasm_memory`]), valid until the next call into the module (one may grow it).
#[wasm_bindgen]
pub struct BundleBuilder(BundleWriter);

#[wasm_bindgen]
impl BundleBuilder {
    #[wasm_bindgen(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> BundleBuilder {
        BundleBuilder(BundleWriter::new())
    }

    /// Adds a chunk: its 20-byte fingerprint, codec (docs/FORMAT.md), raw length and the
    /// length of its stored bytes, which the caller writes at the address answered.
    pub fn push(
        &mut self,
        fp: &[u8],
        codec: u8,
        raw_len: u32,
        stored_len: u32,
    ) -> Result<usize, JsError> {
        let fp: &[u8; FINGERPRINT_LEN] = fp
            .try_into()
            .map_err(|_| JsError::new("a bundle entry's fingerprint is 20 bytes"))?;
        let codec =
            Codec::from_u8(codec).ok_or_else(|| JsError::new(&format!("unknown codec {codec}")))?;
        Ok(self.0.push_room(fp, codec, raw_len, stored_len).as_ptr() as usize)
    }

    /// The bundle's size in bytes, header included.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Writes the bundle's count; answers where its [`BundleBuilder::len`] bytes start.
    pub fn seal(&mut self) -> usize {
        self.0.sealed().as_ptr() as usize
    }

    /// Starts another bundle, keeping the memory.
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// The module's memory, which [`BundleBuilder`]'s addresses point into.
#[wasm_bindgen(js_name = wasmMemory)]
pub fn wasm_memory() -> JsValue {
    wasm_bindgen::memory()
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
        let fp_at = at - ENTRY_HEADER_LEN;
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
