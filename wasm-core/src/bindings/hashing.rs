//! Plain SHA-1 of whole files: the checksum the page shows next to a file (what `sha1sum`
//! prints), not a chunk fingerprint (those are in [`super::chunk_engine`] and
//! [`super::restore`]).

use wasm_bindgen::prelude::*;

use crate::hash;

/// Streaming plain SHA-1 of one file (the checksum `sha1sum` prints), fed the blocks of
/// `File.stream()` in order.
#[wasm_bindgen]
pub struct FileHasher {
    inner: Option<hash::StreamingSha1>,
}

#[wasm_bindgen]
impl FileHasher {
    #[wasm_bindgen(constructor)]
    pub fn new() -> FileHasher {
        FileHasher {
            inner: Some(hash::StreamingSha1::new()),
        }
    }

    pub fn update(&mut self, block: &[u8]) -> Result<(), JsError> {
        match self.inner.as_mut() {
            Some(h) => {
                h.update(block);
                Ok(())
            }
            None => Err(JsError::new("FileHasher.update after finish")),
        }
    }

    /// Finishes the digest and returns it as lower-case hex.
    pub fn finish(&mut self) -> Result<String, JsError> {
        let h = self
            .inner
            .take()
            .ok_or_else(|| JsError::new("FileHasher.finish called twice"))?;
        Ok(hash::to_hex(&h.finish()))
    }
}

impl Default for FileHasher {
    fn default() -> Self {
        Self::new()
    }
}

/// One-shot plain SHA-1 as hex (small inputs, tests).
#[wasm_bindgen(js_name = sha1Hex)]
pub fn sha1_hex(data: &[u8]) -> String {
    let mut h = hash::StreamingSha1::new();
    h.update(data);
    hash::to_hex(&h.finish())
}
