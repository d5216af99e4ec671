//! Version locations read on the page's thread (docs/FORMAT.md, "Version locations")
//! through [`crate::format::locations`], the codec the server encodes them with.

use wasm_bindgen::prelude::*;

use crate::format::locations::decode_locations;
use crate::hash::FINGERPRINT_LEN;

/// Numbers per record in [`LocationTable::take_numbers`].
const NUMBERS: usize = 6;
/// Largest integer a JS number holds exactly.
const MAX_SAFE: u64 = (1 << 53) - 1;

/// A version's locations as columns for JS: fingerprints packed, the rest as numbers.
#[wasm_bindgen]
pub struct LocationTable {
    fps: Vec<u8>,
    numbers: Vec<f64>,
    not_stored: u32,
    chain_keys: bool,
}

#[wasm_bindgen]
impl LocationTable {
    /// The records' fingerprints, 20 bytes each, in record order; taken once (as
    /// `RestoreAnswer.takeRaw`), not copied twice.
    #[wasm_bindgen(js_name = takeFingerprints)]
    pub fn take_fingerprints(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.fps)
    }

    /// Six numbers per record: container id, offset, stored length, raw length, codec and
    /// chain key (0 when [`LocationTable::has_chain_keys`] is false); taken once.
    #[wasm_bindgen(js_name = takeNumbers)]
    pub fn take_numbers(&mut self) -> Vec<f64> {
        std::mem::take(&mut self.numbers)
    }

    #[wasm_bindgen(getter, js_name = notStored)]
    pub fn not_stored(&self) -> u32 {
        self.not_stored
    }

    /// Whether the server named chain keys (format 2 on).
    #[wasm_bindgen(getter, js_name = hasChainKeys)]
    pub fn has_chain_keys(&self) -> bool {
        self.chain_keys
    }
}

/// Checks and reads `GET versions/{id}/locations`'s answer. A container id or offset beyond
/// what a JS number holds exactly is refused rather than rounded.
#[wasm_bindgen(js_name = readLocations)]
pub fn read_locations(bytes: &[u8]) -> Result<LocationTable, JsError> {
    let read = decode_locations(bytes).map_err(|e| JsError::new(&e.to_string()))?;
    let mut fps = Vec::with_capacity(read.len() * FINGERPRINT_LEN);
    let mut numbers = Vec::with_capacity(read.len() * NUMBERS);
    for l in read.iter() {
        if l.container > MAX_SAFE || l.offset > MAX_SAFE {
            return Err(JsError::new(&format!(
                "version locations: container {} offset {} is beyond what the page can address",
                l.container, l.offset
            )));
        }
        fps.extend_from_slice(&l.fp);
        numbers.extend([
            l.container as f64,
            l.offset as f64,
            f64::from(l.stored_len),
            f64::from(l.raw_len),
            f64::from(l.codec),
            f64::from(l.chain_key),
        ]);
    }
    Ok(LocationTable {
        fps,
        numbers,
        not_stored: read.not_stored,
        chain_keys: read.has_chain_keys(),
    })
}
