//! The server's search answer read on the page's thread (docs/FORMAT.md, "Search answer")
//! through [`crate::format::search_answer`], the codec the server encodes it with.

use wasm_bindgen::prelude::*;

use crate::format::search_answer::decode_search_answer;

/// Numbers per file in [`SearchAnswerTable::take_numbers`].
const NUMBERS: usize = 4;
/// Largest integer a JS number holds exactly.
const MAX_SAFE: u64 = (1 << 53) - 1;

/// A search answer as columns for JS, each taken once (as `LocationTable`'s).
#[wasm_bindgen]
pub struct SearchAnswerTable {
    head: String,
    numbers: Vec<f64>,
    paths: Vec<String>,
    fps: Vec<u8>,
    lengths: Vec<u32>,
    hits: Vec<f64>,
}

#[wasm_bindgen]
impl SearchAnswerTable {
    /// The answer's fields other than its files, as a JSON object.
    #[wasm_bindgen(getter)]
    pub fn head(&self) -> String {
        self.head.clone()
    }

    /// Four numbers per file: version, size, recipe chunks and hits.
    #[wasm_bindgen(js_name = takeNumbers)]
    pub fn take_numbers(&mut self) -> Vec<f64> {
        std::mem::take(&mut self.numbers)
    }

    #[wasm_bindgen(js_name = takePaths)]
    pub fn take_paths(&mut self) -> Vec<String> {
        std::mem::take(&mut self.paths)
    }

    /// Every file's recipe fingerprints, 20 bytes each, file after file.
    #[wasm_bindgen(js_name = takeFingerprints)]
    pub fn take_fingerprints(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.fps)
    }

    /// Every file's recipe chunk lengths, file after file.
    #[wasm_bindgen(js_name = takeLengths)]
    pub fn take_lengths(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.lengths)
    }

    /// Every hit as a (file index, keyword, offset) triple, file after file: the layout of
    /// the page's `Hits`.
    #[wasm_bindgen(js_name = takeHits)]
    pub fn take_hits(&mut self) -> Vec<f64> {
        std::mem::take(&mut self.hits)
    }
}

/// Checks and reads `POST search`'s answer in `application/x-ditto-search`. A version id,
/// size or offset beyond what a JS number holds exactly is refused rather than rounded.
#[wasm_bindgen(js_name = readSearchAnswer)]
pub fn read_search_answer(bytes: &[u8]) -> Result<SearchAnswerTable, JsError> {
    let read = decode_search_answer(bytes).map_err(|e| JsError::new(&e.to_string()))?;
    let (chunks, hits) = read
        .files
        .iter()
        .fold((0, 0), |(c, h), f| (c + f.chunks(), h + f.hit_count()));
    let mut t = SearchAnswerTable {
        head: read.head.to_owned(),
        numbers: Vec::with_capacity(read.files.len() * NUMBERS),
        paths: Vec::with_capacity(read.files.len()),
        fps: Vec::with_capacity(chunks * crate::hash::FINGERPRINT_LEN),
        lengths: Vec::with_capacity(chunks),
        hits: Vec::with_capacity(hits * 3),
    };
    let too_large = |what: &str, n: u64| {
        JsError::new(&format!(
            "search answer: {what} {n} is beyond what the page can address"
        ))
    };
    for (k, f) in read.files.iter().enumerate() {
        if f.version > MAX_SAFE {
            return Err(too_large("version", f.version));
        }
        if f.size > MAX_SAFE {
            return Err(too_large("size", f.size));
        }
        t.numbers.extend([
            f.version as f64,
            f.size as f64,
            f.chunks() as f64,
            f.hit_count() as f64,
        ]);
        t.paths.push(f.path.to_owned());
        t.fps.extend_from_slice(f.fingerprints());
        t.lengths.extend(f.lengths());
        for (keyword, offset) in f.hits() {
            if offset > MAX_SAFE {
                return Err(too_large("offset", offset));
            }
            t.hits.extend([k as f64, f64::from(keyword), offset as f64]);
        }
    }
    Ok(t)
}
