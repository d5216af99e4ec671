//! DedupSearch ([`crate::search`]) and the naive baseline for the page's search workers.
//! Thin wrappers: the algorithms and their tests live in `search`.
//!
//! ```js
//! const kw = new SearchKeywords("DEDUP\nUP", /* hex */ false, 2048);
//!
//! // Decoded chunks kept between searches, up to a byte budget (one per worker, long-lived).
//! const cache = new ChunkCache(128 << 20);
//!
//! // Physical phase (one ContainerScan per worker): every stored chunk once.
//! const scan = new ContainerScan(kw);
//! const missing = scan.scanCached(cache, fps);  // scans the cached ones; indices of the rest
//! // Delta chunks' bases that neither the range nor the cache holds: fetch them as stored,
//! // deltas included, with their base chains (`chunks/get` with `"deltas": "stored"`,
//! // `"chains": true` and the cache's bases as `have`); ask again in case a chain
//! // still misses a base (normally one round is all).
//! const range = [containerBytes, baseOffset, fps, offsets, storedLens, codecs, rawLens];
//! const fetched = new FetchedBases();
//! for (let want = scan.outsideBases(cache, ...range, fetched); want.length;
//!      want = scan.outsideBases(cache, ...range, fetched))
//!   fetched.add(await chunksGet(want, { deltas: 'stored', chains: true,
//!                                      have: cache.heldBases(64) }), want);
//! scan.scan(cache, ...range, fetched);
//! fetched.free();
//! // When every job is scanned: both go to the logical worker.
//! const tiny = scan.takeTiny(), db = scan.finish();
//!
//! // Logical phase (Algorithm 1) over file recipes, which the worker keeps between the
//! // searches of one scope.
//! const recipes = new FileRecipes(fileIds, chunksPerFile, fps, lengths);
//! const logical = new RecipeSearch(kw, /* filesOnly */ false);
//! logical.addResults(db);                       // once per physical worker
//! logical.addTiny(tiny);                        // likewise
//! logical.searchFiles(recipes);                 // every file, in order
//! const hits = logical.takeMatches();           // Float64Array (file, keyword, offset)*
//!
//! // Naive baseline: whole files, chunk by chunk, from `chunks/get` bundles.
//! const naive = new NaiveScan(kw, false);
//! naive.feedBundle(bundle, askedFps, fileOfEachEntry);
//! ```

use std::rc::Rc;

use wasm_bindgen::prelude::*;

use crate::compress::Decompressor;
use crate::format::bundle::decode_bundle;
use crate::hash::{not_stored_flat, Fingerprint, FpMap, FpSet};
use crate::resemble::delta::{base_of, CODEC_DELTA};
use crate::resemble::range::{outside_bases, RangeChunk, RangeDecoder};
use crate::search::{
    cache_file, keyword_error, parse_keyword_lines, ChunkRef, Dictionary, LogicalPhase, Match,
    MemTinyStore, Mode, NaiveSearch, PhysicalPhase, PhysicalStats, ResultDb, TinyRecord, Trigrams,
    MAX_MATCHES,
};

/// The most matches one search answers ([`MAX_MATCHES`]): the scanners here stop past it
/// (`overflowed`), and the page refuses a search whose parts answer more in all.
#[wasm_bindgen(js_name = searchMatchLimit)]
pub fn search_match_limit() -> f64 {
    MAX_MATCHES as f64
}

/// How [`ContainerScan::scan`]'s error begins when it dropped a damaged base from the cache:
/// the page's search starts over (`web/src/search/search.ts`).
const DROPPED_BASE: &str = "a cached delta base was damaged and is dropped";

fn err(msg: impl std::fmt::Display) -> JsError {
    JsError::new(&msg.to_string())
}

fn mode(files_only: bool) -> Mode {
    if files_only {
        Mode::FilesOnly
    } else {
        Mode::AllMatches
    }
}

/// Flattens matches as (file, keyword, offset) triples; offsets are exact below 2^53.
fn flatten(matches: &mut Vec<Match>) -> Vec<f64> {
    let out = matches
        .iter()
        .flat_map(|m| [m.file as f64, m.keyword as f64, m.offset as f64])
        .collect();
    matches.clear();
    out
}

/// The keywords of one search: one per line (empty lines ignored, a trailing `\r`
/// dropped), as UTF-8 text or, with `hex`, as hex bytes per line.
#[wasm_bindgen]
pub struct SearchKeywords {
    dict: Dictionary,
}

impl From<Dictionary> for SearchKeywords {
    fn from(dict: Dictionary) -> SearchKeywords {
        SearchKeywords { dict }
    }
}

#[wasm_bindgen]
impl SearchKeywords {
    #[wasm_bindgen(constructor)]
    pub fn new(text: &str, hex: bool, max_len: u32) -> Result<SearchKeywords, JsError> {
        let keywords =
            parse_keyword_lines(text, hex).map_err(|(n, e)| err(keyword_error(n, &e)))?;
        let dict = Dictionary::new(keywords, max_len as usize).map_err(err)?;
        Ok(SearchKeywords { dict })
    }

    pub fn count(&self) -> u32 {
        self.dict.keywords().len() as u32
    }

    /// Keyword `i`'s bytes.
    pub fn keyword(&self, i: u32) -> Vec<u8> {
        self.dict.keywords()[i as usize].clone()
    }
}

/// Decoded chunks a search worker keeps between searches, by fingerprint, up to `budget`
/// bytes. A fingerprint names its bytes, so an entry is never stale: when the repository
/// changes, the caller keeps the chunks it still holds ([`ChunkCache::retain`]) only to give
/// back the memory of those that are gone.
/// Chunks that do not fit are not kept (first come, first kept): a search larger than the
/// budget then reuses a fixed part of itself every time, where least-recently-used eviction
/// would evict each chunk just before the next search needs it.
#[wasm_bindgen]
pub struct ChunkCache {
    chunks: FpMap<Held>,
    /// Trigram summaries of held chunks ([`ChunkCache::summarize`]), counted in `bytes`.
    trigrams: FpMap<Trigrams>,
    /// Held chunks not summarised yet.
    unsummarized: Vec<Fingerprint>,
    bytes: u64,
    budget: u64,
    /// How many delta chunks seen so far named each base.
    named: FpMap<u32>,
    /// Counts the changes of what is held (chunks, summaries): the worker writes the cache
    /// to the device when this moved since it last wrote or read it.
    changes: u32,
    /// Held chunks kept only as the bases of deltas this worker decoded, never scanned by
    /// its own jobs: the device cache file leaves them out (the worker whose jobs hold them
    /// keeps them; links no file names, a trained dictionary or a frame, would leave the
    /// cache at the next page load anyway, which keeps only the chunks the versions name).
    /// They are not summarised until a job scans them.
    bases_only: FpSet,
    /// Held chunks whose bytes were not checked against their fingerprints: the links of
    /// base chains a job fetched and decoded only to reach its deltas (frames above all, a
    /// megabyte each, which no file names). As bases they need no check, since every chunk
    /// decoded from them is checked and a failure names the damaged link
    /// ([`crate::resemble::range`]); one is checked when a job scans it (before the device
    /// cache file takes it), and dropped if it fails.
    unchecked: FpSet,
    /// The chunks of the device cache file being written, in its order, and how many of
    /// them [`ChunkCache::save_chunks`] answered.
    saving: Vec<Fingerprint>,
    saved: usize,
    /// A device cache file being read in ([`ChunkCache::file_buffer`]).
    incoming: Vec<u8>,
}

/// A held chunk's bytes: its own allocation, or its place in a device cache file read in
/// whole ([`ChunkCache::load_buffer`]), which lives while any of its chunks is held.
enum Held {
    Own(Box<[u8]>),
    InFile(Rc<Vec<u8>>, usize, usize),
}

impl std::ops::Deref for Held {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Held::Own(b) => b,
            Held::InFile(file, at, len) => &file[*at..*at + *len],
        }
    }
}

#[wasm_bindgen]
impl ChunkCache {
    #[wasm_bindgen(constructor)]
    pub fn new(budget: f64) -> ChunkCache {
        ChunkCache {
            chunks: FpMap::default(),
            trigrams: FpMap::default(),
            unsummarized: Vec::new(),
            bytes: 0,
            budget: budget.max(0.0) as u64,
            named: FpMap::default(),
            changes: 0,
            bases_only: FpSet::default(),
            unchecked: FpSet::default(),
            saving: Vec::new(),
            saved: 0,
            incoming: Vec::new(),
        }
    }

    /// Counts the changes of what is held: the worker compares it with its value when it
    /// last wrote or read the device cache file.
    pub fn changes(&self) -> u32 {
        self.changes
    }

    /// Starts the device cache file of what is held (docs/SEARCH.md, "The device cache
    /// file"), caching repository `key`: answers its bytes up to the chunks, which
    /// [`ChunkCache::save_chunks`] then answers a few at a time, so that writing the file
    /// never holds a second copy of the cache in memory. The caller writes the whole file
    /// before anything changes the cache.
    pub fn save(&mut self, key: &str) -> Vec<u8> {
        let wanted: Vec<Fingerprint> = self
            .chunks
            .keys()
            .filter(|fp| !self.bases_only.contains(*fp))
            .copied()
            .collect();
        self.check_all(&wanted);
        self.saving = wanted
            .into_iter()
            .filter(|fp| self.chunks.contains_key(fp))
            .collect();
        self.saved = 0;
        let entries: Vec<cache_file::Entry> = self
            .saving
            .iter()
            .map(|fp| cache_file::Entry {
                fp: *fp,
                raw: &self.chunks[fp],
                named: self.named.get(fp).copied().unwrap_or(0),
                summary: self.trigrams.get(fp),
            })
            .collect();
        cache_file::encode_meta(key, &entries)
    }

    /// The raw bytes of the next chunks of the file [`ChunkCache::save`] started, about
    /// `max_bytes` of them (at least one chunk); empty once every chunk was answered.
    #[wasm_bindgen(js_name = saveChunks)]
    pub fn save_chunks(&mut self, max_bytes: f64) -> Vec<u8> {
        let mut out = Vec::new();
        while self.saved < self.saving.len() && (out.is_empty() || (out.len() as f64) < max_bytes) {
            // A chunk dropped meanwhile (against the contract) makes the file short, which
            // its reader refuses.
            if let Some(raw) = self.chunks.get(&self.saving[self.saved]) {
                out.extend_from_slice(raw);
            }
            self.saved += 1;
        }
        if self.saved == self.saving.len() {
            self.saving = Vec::new();
        }
        out
    }

    /// Replaces what is held with the chunks of a device cache file of repository `key`,
    /// up to the budget, each checked against its fingerprint first (a chunk that fails is
    /// left out). Answers the number of chunks left out so; a file of another format or
    /// repository, or whose metadata is damaged, is an error and leaves the cache empty.
    pub fn load(&mut self, file: &[u8], key: &str) -> Result<u32, JsError> {
        self.load_from(Rc::new(file.to_vec()), key)
    }

    /// Room for a device cache file of `len` bytes in Wasm memory, for the caller to read
    /// the file into (at the address answered, before anything else runs in the module)
    /// and then [`ChunkCache::load_buffer`] it: the file is neither copied in nor copied
    /// again chunk by chunk.
    #[wasm_bindgen(js_name = fileBuffer)]
    pub fn file_buffer(&mut self, len: u32) -> u32 {
        self.incoming = vec![0; len as usize];
        self.incoming.as_mut_ptr() as usize as u32
    }

    /// [`ChunkCache::load`] of the first `len` bytes read into [`ChunkCache::file_buffer`].
    /// The chunks stay where they were read while the file fits the budget.
    #[wasm_bindgen(js_name = loadBuffer)]
    pub fn load_buffer(&mut self, len: u32, key: &str) -> Result<u32, JsError> {
        let mut file = std::mem::take(&mut self.incoming);
        file.truncate(len as usize);
        self.load_from(Rc::new(file), key)
    }

    fn load_from(&mut self, file: Rc<Vec<u8>>, key: &str) -> Result<u32, JsError> {
        self.clear();
        let loaded = cache_file::decode(&file).map_err(err)?;
        if loaded.key != key {
            return Err(err("the file caches another repository"));
        }
        // Chunks left where they were read keep the whole file in memory: only when it all
        // fits the budget; otherwise the chunks that fit are copied out and the file freed.
        let in_place = file.len() as u64 <= self.budget;
        for c in loaded.chunks {
            let raw = &file[c.offset..c.offset + c.len];
            let summary = c.summary.as_ref().map_or(0, |t| t.bytes()) as u64;
            if self.bytes + raw.len() as u64 + summary > self.budget {
                break;
            }
            self.bytes += raw.len() as u64 + summary;
            let held = if in_place {
                Held::InFile(Rc::clone(&file), c.offset, c.len)
            } else {
                Held::Own(raw.into())
            };
            self.chunks.insert(c.fp, held);
            match c.summary {
                Some(t) => {
                    self.trigrams.insert(c.fp, t);
                }
                None => self.unsummarized.push(c.fp),
            }
            if c.named > 0 {
                self.named.insert(c.fp, c.named);
            }
        }
        Ok(loaded.dropped)
    }

    /// Fingerprints (20 bytes each) of every chunk held.
    pub fn fingerprints(&self) -> Vec<u8> {
        self.chunks
            .keys()
            .flat_map(|fp| fp.iter().copied())
            .collect()
    }

    /// Raw bytes held.
    pub fn bytes(&self) -> f64 {
        self.bytes as f64
    }

    /// Chunks held.
    pub fn count(&self) -> u32 {
        self.chunks.len() as u32
    }

    pub fn clear(&mut self) {
        self.changes = self.changes.wrapping_add(1);
        self.bases_only = FpSet::default();
        self.unchecked = FpSet::default();
        self.chunks = FpMap::default();
        self.trigrams = FpMap::default();
        self.unsummarized = Vec::new();
        self.bytes = 0;
        self.named = FpMap::default();
    }

    /// Keeps only the held chunks among `live` (20 bytes each: the chunks the repository
    /// holds now), with their summaries; answers the raw bytes given back.
    pub fn retain(&mut self, live: &[u8]) -> f64 {
        let live: FpSet = live
            .chunks_exact(20)
            .map(|fp| <Fingerprint>::try_from(fp).unwrap())
            .collect();
        let before = self.bytes;
        let mut bytes = 0u64;
        self.chunks.retain(|fp, raw| {
            let keep = live.contains(fp);
            bytes += keep as u64 * raw.len() as u64;
            keep
        });
        self.trigrams.retain(|fp, t| {
            let keep = live.contains(fp);
            bytes += keep as u64 * t.bytes() as u64;
            keep
        });
        self.unsummarized.retain(|fp| live.contains(fp));
        self.named.retain(|fp, _| live.contains(fp));
        self.bases_only.retain(|fp| live.contains(fp));
        self.unchecked.retain(|fp| live.contains(fp));
        if bytes != self.bytes {
            self.changes = self.changes.wrapping_add(1);
        }
        self.bytes = bytes;
        (before - bytes) as f64
    }

    /// Up to `max` fingerprints (20 bytes each) of held chunks that deltas name as their
    /// base, the most named first: `chunks/get`'s `have`, where the server stops a base chain
    /// (a trained dictionary, the base of most deltas, and the frames whose slices this
    /// worker scanned are then not sent again as links of another base's chain). A short
    /// list: a held base missing from it costs its bytes once more, not a round trip, so
    /// bases named as often come in any order.
    ///
    /// The `max` most named are picked in one pass into a short ordered list, not by sorting
    /// every base the worker knows: a job calls this for each of its base requests, which
    /// makes it hot enough for V8 to optimise, and the generic sort instantiated for such
    /// pairs is a large Wasm function whose optimisation takes a core for a good part of a
    /// first search (docs/BENCHMARKS.md, "What a first search compiles").
    #[wasm_bindgen(js_name = heldBases)]
    pub fn held_bases(&self, max: u32) -> Vec<u8> {
        let max = max as usize;
        let mut top: Vec<(u32, &Fingerprint)> = Vec::with_capacity(max + 1);
        for (fp, &n) in &self.named {
            if n == 0 || !self.chunks.contains_key(fp) {
                continue;
            }
            if top.len() == max && top.last().is_none_or(|&(least, _)| n <= least) {
                continue;
            }
            let at = top.partition_point(|&(m, _)| m >= n);
            top.insert(at, (n, fp));
            top.truncate(max);
        }
        top.iter().flat_map(|(_, fp)| fp.iter().copied()).collect()
    }

    /// The held chunks among `fps` (20 bytes each), for the page's snippets: per
    /// fingerprint a little-endian `u32` length and that many raw bytes, or `u32::MAX` and
    /// nothing for a chunk not held.
    #[wasm_bindgen(js_name = rawChunks)]
    pub fn raw_chunks(&self, fps: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for fp in fps.chunks_exact(20) {
            let fp = <&Fingerprint>::try_from(fp).unwrap();
            match self.chunks.get(fp).filter(|_| !self.unchecked.contains(fp)) {
                Some(raw) => {
                    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
                    out.extend_from_slice(raw);
                }
                None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
            }
        }
        out
    }

    /// Whether every chunk of `fps` (20 bytes each) is held.
    #[wasm_bindgen(js_name = holdsAll)]
    pub fn holds_all(&self, fps: &[u8]) -> bool {
        fps.chunks_exact(20).all(|fp| {
            self.chunks
                .contains_key(<&Fingerprint>::try_from(fp).unwrap())
        })
    }

    /// Summarises held chunks' trigrams ([`Trigrams`]) until about
    /// `max_bytes` raw bytes were read or the budget is spent; answers how many are left.
    /// The workers call it between searches, a slice at a time: a search of chunks with
    /// summaries reads only the blocks of them where a keyword may start.
    pub fn summarize(&mut self, max_bytes: f64) -> u32 {
        let mut read = 0.0;
        while read < max_bytes {
            let Some(fp) = self.unsummarized.pop() else {
                break;
            };
            let Some(raw) = self.chunks.get(&fp) else {
                continue;
            };
            let t = Trigrams::of(raw);
            if self.bytes + t.bytes() as u64 > self.budget {
                self.unsummarized.clear();
                break;
            }
            read += raw.len() as f64;
            self.changes = self.changes.wrapping_add(1);
            self.bytes += t.bytes() as u64;
            self.trigrams.insert(fp, t);
        }
        self.unsummarized.len() as u32
    }

    /// Fingerprints (20 bytes each) of summarised chunks, up to about `max_bytes` of their
    /// raw bytes: a sample to run a repeat search's code on once before one is asked for.
    pub fn sample(&self, max_bytes: f64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut bytes = 0.0;
        // Not the chunks held only as bases: scanning them would make them this worker's.
        for fp in self
            .trigrams
            .keys()
            .filter(|fp| !self.bases_only.contains(*fp))
        {
            if bytes >= max_bytes {
                break;
            }
            bytes += self.chunks.get(fp).map_or(0, |c| c.len()) as f64;
            out.extend_from_slice(fp);
        }
        out
    }

    /// Keeps a checked chunk scanned by this worker's job while the budget allows (a copy
    /// held unchecked gives way to it).
    fn keep(&mut self, fp: &Fingerprint, raw: &[u8]) {
        if self.unchecked.contains(fp) {
            self.drop_chunk(fp);
        }
        self.owned(fp);
        if self.has_room(fp, raw.len()) {
            self.hold(fp, raw.into());
            self.unsummarized.push(*fp);
        }
    }

    /// Keeps a link of a base chain, decoded and not checked, while the budget allows.
    fn keep_link(&mut self, fp: &Fingerprint, raw: Vec<u8>) {
        if self.has_room(fp, raw.len()) {
            self.hold(fp, raw.into_boxed_slice());
            self.bases_only.insert(*fp);
            self.unchecked.insert(*fp);
        }
    }

    /// Whether a chunk of `len` bytes not held yet fits the budget.
    fn has_room(&self, fp: &Fingerprint, len: usize) -> bool {
        self.bytes + len as u64 <= self.budget && !self.chunks.contains_key(fp)
    }

    fn hold(&mut self, fp: &Fingerprint, raw: Box<[u8]>) {
        self.bytes += raw.len() as u64;
        self.changes = self.changes.wrapping_add(1);
        self.chunks.insert(*fp, Held::Own(raw));
    }

    /// A held chunk was scanned by this worker's job: it goes into the device cache file,
    /// and is summarised.
    fn owned(&mut self, fp: &Fingerprint) {
        if self.bases_only.remove(fp) {
            self.changes = self.changes.wrapping_add(1);
            if self.chunks.contains_key(fp) && !self.trigrams.contains_key(fp) {
                self.unsummarized.push(*fp);
            }
        }
    }

    /// Checks the chunks among `fps` held unchecked (links of base chains), as a job scans
    /// them from the cache or the device cache file takes them: they are copied a few MiB
    /// at a time into one buffer and checked with the plain SHA-1 four at a time
    /// ([`not_stored_flat`]); those that fail are dropped. A held chunk is checked after it.
    fn check_all(&mut self, fps: &[Fingerprint]) {
        const BATCH_BYTES: usize = 8 << 20;
        let todo: Vec<Fingerprint> = fps
            .iter()
            .filter(|fp| self.unchecked.contains(*fp))
            .copied()
            .collect();
        let mut start = 0;
        while start < todo.len() {
            let mut buf = Vec::new();
            let mut ranges = Vec::new();
            let mut end = start;
            while end < todo.len() && (end == start || buf.len() < BATCH_BYTES) {
                let raw = self.chunks.get(&todo[end]).map_or(&[][..], |r| &r[..]);
                ranges.push((buf.len(), raw.len()));
                buf.extend_from_slice(raw);
                end += 1;
            }
            let batch = &todo[start..end];
            let bad: Vec<usize> = not_stored_flat(&buf, &ranges, batch.as_flattened())
                .map(|(k, _)| k)
                .collect();
            for fp in batch {
                self.unchecked.remove(fp);
            }
            for k in bad {
                self.drop_chunk(&batch[k]);
            }
            start = end;
        }
    }

    /// Gives back a held chunk and its summary (what is known of how it is stored stays:
    /// the range that holds it may keep it again).
    fn drop_chunk(&mut self, fp: &Fingerprint) {
        if let Some(raw) = self.chunks.remove(fp) {
            self.bytes -= raw.len() as u64;
            self.changes = self.changes.wrapping_add(1);
        }
        if let Some(t) = self.trigrams.remove(fp) {
            self.bytes -= t.bytes() as u64;
        }
        self.unchecked.remove(fp);
        self.bases_only.remove(fp);
    }
}

/// Stored chunks a job fetched from outside its range (`chunks/get` bundles, deltas as
/// stored) or read as links with it ([`FetchedBases::add_stored`]): the bases its deltas
/// need, and their bases in turn. One per job: a worker holds several jobs at once, each
/// with its own rounds of fetches.
#[wasm_bindgen]
pub struct FetchedBases {
    chunks: Vec<(Fingerprint, u8, Box<[u8]>, usize)>,
}

impl Default for FetchedBases {
    fn default() -> Self {
        Self::new()
    }
}

#[wasm_bindgen]
impl FetchedBases {
    #[wasm_bindgen(constructor)]
    pub fn new() -> FetchedBases {
        FetchedBases { chunks: Vec::new() }
    }

    /// Adds the chunks of a `chunks/get` answer to `asked` (20 bytes each, what
    /// [`ContainerScan::outside_bases`] named), which must start with exactly those, in
    /// order (a round that adds nothing would be asked again forever); the entries after
    /// them are the links of their base chains (`"chains": true`), taken as they come,
    /// since each is checked against its fingerprint when a chain decodes through it.
    /// Answers how many chunks it added.
    pub fn add(&mut self, bundle: &[u8], asked: &[u8]) -> Result<u32, JsError> {
        let entries = decode_bundle(bundle).map_err(|e| err(format!("malformed bundle: {e:?}")))?;
        if !asked.len().is_multiple_of(20)
            || entries.len() * 20 < asked.len()
            || entries
                .iter()
                .zip(asked.chunks_exact(20))
                .any(|(e, fp)| e.fp != fp)
        {
            return Err(err(
                "chunks/get answered other chunks than the bases asked for",
            ));
        }
        let n = entries.len() as u32;
        for e in entries {
            self.chunks
                .push((e.fp, e.codec as u8, e.payload.into(), e.raw_len as usize));
        }
        Ok(n)
    }

    /// Adds chunks stored in `data`, a job's container bytes from file offset `base` on
    /// (the arrays as for [`ContainerScan::scan`]): the links of the job's base chains that
    /// its range holds (frames stored before their slices above all), which the job then
    /// decodes from there instead of fetching them. Answers how many chunks it added.
    #[wasm_bindgen(js_name = addStored)]
    #[allow(clippy::too_many_arguments)]
    pub fn add_stored(
        &mut self,
        data: &[u8],
        base: f64,
        fps: &[u8],
        offsets: &[f64],
        stored_lens: &[u32],
        codecs: &[u8],
        raw_lens: &[u32],
    ) -> Result<u32, JsError> {
        let chunks = range_chunks(data, base, fps, offsets, stored_lens, codecs, raw_lens)?;
        let n = chunks.len() as u32;
        for c in chunks {
            self.chunks
                .push((c.fp, c.codec, c.stored.into(), c.raw_len));
        }
        Ok(n)
    }

    /// Chunks held.
    pub fn count(&self) -> u32 {
        self.chunks.len() as u32
    }
}

impl FetchedBases {
    fn range(&self) -> Vec<RangeChunk<'_>> {
        self.chunks
            .iter()
            .map(|(fp, codec, stored, raw_len)| RangeChunk {
                fp: *fp,
                codec: *codec,
                stored,
                raw_len: *raw_len,
            })
            .collect()
    }
}

/// Physical phase in one worker: the chunks of stored containers, each read once. A delta
/// chunk (codec 2) is scanned once too, after decoding against its base
/// ([`crate::resemble::range`]): a base the job's range does not hold comes from the cache or
/// from the caller's [`FetchedBases`] (`chunks/get`, deltas as stored, their chains resolved
/// here).
#[wasm_bindgen]
pub struct ContainerScan {
    state: ScanState,
    range: RangeDecoder,
    tiny: Tiny,
}

/// The worker's tiny records, encoded back to back until the phase ends.
#[derive(Default)]
struct Tiny {
    records: Vec<u8>,
    count: u32,
    bytes: u64,
}

impl Tiny {
    fn push(&mut self, tiny: Option<TinyRecord>) {
        if let Some(t) = tiny {
            let before = self.records.len();
            t.encode(&mut self.records);
            self.count += 1;
            self.bytes += (self.records.len() - before) as u64;
        }
    }
}

/// The chunks of a job as [`RangeChunk`]s borrowing `data` (container bytes from `base` on).
fn range_chunks<'a>(
    data: &'a [u8],
    base: f64,
    fps: &[u8],
    offsets: &[f64],
    stored_lens: &[u32],
    codecs: &[u8],
    raw_lens: &[u32],
) -> Result<Vec<RangeChunk<'a>>, JsError> {
    let n = offsets.len();
    if fps.len() != 20 * n || stored_lens.len() != n || codecs.len() != n || raw_lens.len() != n {
        return Err(err("chunk table arrays differ in length"));
    }
    (0..n)
        .map(|k| {
            let fp: Fingerprint = fps[20 * k..20 * k + 20].try_into().unwrap();
            let start = offsets[k] - base;
            let end = start + stored_lens[k] as f64;
            if start < 0.0 || end > data.len() as f64 {
                return Err(err(format!(
                    "chunk {} lies outside the container bytes read",
                    crate::hash::to_hex(&fp)
                )));
            }
            Ok(RangeChunk {
                fp,
                codec: codecs[k],
                stored: &data[start as usize..end as usize],
                raw_len: raw_lens[k] as usize,
            })
        })
        .collect()
}

#[wasm_bindgen]
impl ContainerScan {
    /// `files_only`: records for a search of the first hit per keyword and file
    /// ([`PhysicalPhase::for_mode`]).
    #[wasm_bindgen(constructor)]
    pub fn new(keywords: &SearchKeywords, files_only: bool) -> Result<ContainerScan, JsError> {
        let mut phase = PhysicalPhase::for_mode(&keywords.dict, mode(files_only));
        phase.limit(MAX_MATCHES);
        Ok(ContainerScan {
            state: ScanState::Scanning(phase),
            range: RangeDecoder::new().map_err(err)?,
            tiny: Tiny::default(),
        })
    }

    /// A read-ahead (docs/SEARCH.md, "Chunks read ahead"): the same jobs as a search's
    /// physical phase, their chunks decoded, checked against their fingerprints and kept in
    /// the cache as a search keeps them, without keywords, so that the search typed next
    /// scans them from memory. [`ContainerScan::scan_cached`] scans nothing and leaves
    /// unchecked links as they are (a search checks them), [`ContainerScan::stats`] counts
    /// nothing and [`ContainerScan::finish`] answers an empty database.
    pub fn fill() -> Result<ContainerScan, JsError> {
        Ok(ContainerScan {
            state: ScanState::Filling,
            range: RangeDecoder::new().map_err(err)?,
            tiny: Tiny::default(),
        })
    }

    /// Scans the chunks of `fps` (20 bytes each) that `cache` holds; answers the indices
    /// of the others, which the caller fetches and passes to [`ContainerScan::scan`].
    #[wasm_bindgen(js_name = scanCached)]
    pub fn scan_cached(&mut self, cache: &mut ChunkCache, fps: &[u8]) -> Result<Vec<u32>, JsError> {
        if !fps.len().is_multiple_of(20) {
            return Err(err("fingerprints must be 20 bytes each"));
        }
        let fps: Vec<Fingerprint> = fps
            .chunks_exact(20)
            .map(|fp| fp.try_into().unwrap())
            .collect();
        let mut missing = Vec::new();
        if matches!(self.state, ScanState::Filling) {
            // A read-ahead leaves what the cache holds as it is.
            for (k, fp) in fps.iter().enumerate() {
                if !cache.chunks.contains_key(fp) {
                    missing.push(k as u32);
                }
            }
            return Ok(missing);
        }
        // Chunks held unchecked (links) are checked first; one that fails is dropped and
        // fetched from its container as the others.
        cache.check_all(&fps);
        for (k, fp) in fps.iter().enumerate() {
            if cache.chunks.contains_key(fp) {
                cache.owned(fp);
                self.scan_raw(fp, &cache.chunks[fp], cache.trigrams.get(fp))?;
            } else {
                missing.push(k as u32);
            }
        }
        Ok(missing)
    }

    /// The bases (20 bytes each) that the delta chunks among the chunks of `data` (same
    /// arguments as [`ContainerScan::scan`]) need, directly or through the deltas of
    /// `fetched`, which neither `data`, `fetched` nor `cache` holds: the caller fetches them
    /// as stored into `fetched` and asks again until none is missing. Fails for a chain
    /// longer than the cap.
    #[wasm_bindgen(js_name = outsideBases)]
    #[allow(clippy::too_many_arguments)]
    pub fn outside_bases(
        &self,
        cache: &ChunkCache,
        data: &[u8],
        base: f64,
        fps: &[u8],
        offsets: &[f64],
        stored_lens: &[u32],
        codecs: &[u8],
        raw_lens: &[u32],
        fetched: &FetchedBases,
    ) -> Result<Vec<u8>, JsError> {
        let chunks = range_chunks(data, base, fps, offsets, stored_lens, codecs, raw_lens)?;
        Ok(
            outside_bases(&chunks, &fetched.range(), |b| cache.chunks.contains_key(b))
                .map_err(err)?
                .into_iter()
                .flatten()
                .collect(),
        )
    }

    /// Scans chunks stored in `data`, which holds a container's bytes from file offset
    /// `base` on, and keeps their decoded bytes in `cache` while its budget allows. Chunk
    /// `k` has fingerprint `fps[20k..20k+20]`, starts at container offset `offsets[k]` and
    /// takes `stored_lens[k]` bytes encoded with `codecs[k]` (0 raw, 1 zstd, 2 delta) for
    /// `raw_lens[k]` raw bytes. `fetched` holds the bases [`ContainerScan::outside_bases`]
    /// named; they are decoded for the deltas only, not scanned, and kept in `cache` too (a
    /// chunk of the cache is scanned when a range lists it, as any other). Returns how many
    /// tiny records are waiting for [`ContainerScan::take_tiny`].
    #[allow(clippy::too_many_arguments)]
    pub fn scan(
        &mut self,
        cache: &mut ChunkCache,
        data: &[u8],
        base: f64,
        fps: &[u8],
        offsets: &[f64],
        stored_lens: &[u32],
        codecs: &[u8],
        raw_lens: &[u32],
        fetched: &FetchedBases,
    ) -> Result<u32, JsError> {
        let chunks = range_chunks(data, base, fps, offsets, stored_lens, codecs, raw_lens)?;
        let fetched = fetched.range();
        let mut phase = self.state.scanning()?;
        // The bases that the range does not hold but the cache does are taken out of the
        // cache while the range decodes (the decoder reads them where they are; `emit` below
        // adds to the cache meanwhile) and put back after, whatever the outcome: nothing is
        // copied. A chain stops at a cached base even when `fetched` holds it and the links
        // below it too (a chain answer sends them whatever the worker caches), so nothing is
        // decoded twice.
        let mut outside: FpMap<Held> = FpMap::default();
        if chunks.iter().any(|c| c.codec == CODEC_DELTA) {
            let in_range: FpSet = chunks.iter().map(|c| c.fp).collect();
            for c in chunks.iter().chain(&fetched) {
                if c.codec != CODEC_DELTA {
                    continue;
                }
                let b = base_of(c.stored)
                    .map_err(|e| err(format!("chunk {}: {e}", crate::hash::to_hex(&c.fp))))?;
                *cache.named.entry(b).or_insert(0) += 1;
                if !in_range.contains(&b) {
                    if let Some(raw) = cache.chunks.remove(&b) {
                        outside.insert(b, raw);
                    }
                }
            }
        }
        let tiny = &mut self.tiny;
        let decoded = self.range.decode(
            &chunks,
            &fetched,
            &|fp| outside.get(fp).map(|raw| &**raw),
            |fp, raw| {
                cache.keep(fp, raw);
                if let Some(phase) = phase.as_mut() {
                    tiny.push(phase.scan(fp, raw));
                }
            },
        );
        cache.chunks.extend(outside);
        let links = decoded.map_err(|e| {
            // A base the cache held unchecked is named as damaged: it is dropped, so the
            // search asked again fetches it.
            match e.chunk.filter(|fp| cache.unchecked.contains(fp)) {
                Some(fp) => {
                    cache.drop_chunk(&fp);
                    err(format!("{DROPPED_BASE}: {e}"))
                }
                None => err(e),
            }
        })?;
        // Fetched links are kept as bases, unchecked: a base many deltas share (a trained
        // dictionary, a frame) is then fetched once per worker, not once per job.
        for (fp, raw) in links {
            cache.keep_link(&fp, raw);
        }
        Ok(self.tiny.count)
    }

    fn scan_raw(
        &mut self,
        fp: &Fingerprint,
        raw: &[u8],
        trigrams: Option<&Trigrams>,
    ) -> Result<(), JsError> {
        if let Some(phase) = self.state.scanning()? {
            let tiny = phase.scan_summarized(fp, raw, trigrams);
            self.tiny.push(tiny);
        }
        Ok(())
    }

    /// Whether the chunks scanned hold more exact offsets than the search may answer
    /// ([`PhysicalPhase::limit`]): the caller stops the search.
    pub fn overflowed(&self) -> bool {
        matches!(&self.state, ScanState::Scanning(phase) if phase.overflowed())
    }

    /// The tiny records produced since the last call, encoded back to back
    /// (`TinyRecord::encode`), for [`RecipeSearch::add_tiny`].
    #[wasm_bindgen(js_name = takeTiny)]
    pub fn take_tiny(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.tiny.records)
    }

    /// `[chunks, raw bytes scanned, exact matches, tiny records, tiny record bytes, delta
    /// chunks decoded, chunks whose trigram summary ruled out every keyword, bytes in blocks
    /// whose summaries ruled out every keyword (in those chunks and others)]`.
    pub fn stats(&self) -> Result<Vec<f64>, JsError> {
        let s = match &self.state {
            ScanState::Scanning(phase) => phase.stats,
            ScanState::Filling => PhysicalStats::default(),
            ScanState::Finished => return Err(err("ContainerScan.stats after finish")),
        };
        Ok(vec![
            s.chunks as f64,
            s.bytes as f64,
            s.exact_matches as f64,
            s.tiny_records as f64,
            self.tiny.bytes as f64,
            self.range.deltas() as f64,
            s.ruled_out as f64,
            s.ruled_out_bytes as f64,
        ])
    }

    /// Ends the phase: the result database, encoded for [`RecipeSearch::add_results`].
    pub fn finish(&mut self) -> Result<Vec<u8>, JsError> {
        match std::mem::replace(&mut self.state, ScanState::Finished) {
            ScanState::Scanning(phase) => Ok(phase.finish().0.encode()),
            ScanState::Filling => {
                self.state = ScanState::Filling;
                Ok(ResultDb::new().encode())
            }
            ScanState::Finished => Err(err("ContainerScan.finish called twice")),
        }
    }
}

/// What a [`ContainerScan`] does with the chunks it decodes.
enum ScanState {
    /// A search's physical phase scans them.
    Scanning(PhysicalPhase),
    /// A read-ahead ([`ContainerScan::fill`]) only decodes, checks and caches them.
    Filling,
    /// The phase has ended ([`ContainerScan::finish`]).
    Finished,
}

impl ScanState {
    /// The phase scanning the chunks: `Ok(None)` for a read-ahead; an error once finished.
    fn scanning(&mut self) -> Result<Option<&mut PhysicalPhase>, JsError> {
        match self {
            ScanState::Scanning(phase) => Ok(Some(phase)),
            ScanState::Filling => Ok(None),
            ScanState::Finished => Err(err("ContainerScan used after finish")),
        }
    }
}

/// The recipes of a list of files (fingerprints and raw lengths, in file order), built once
/// and walked by every search of the same scope ([`RecipeSearch::search_files`]): a repeat
/// search sends the worker only its records, and the walk is one call.
#[wasm_bindgen]
pub struct FileRecipes {
    ids: Vec<u64>,
    /// File `k`'s chunks are `refs[starts[k]..starts[k + 1]]`.
    starts: Vec<usize>,
    refs: Vec<ChunkRef>,
}

#[wasm_bindgen]
impl FileRecipes {
    /// File `k` is `ids[k]` and has `counts[k]` chunks; the files' recipes lie back to back
    /// in `fps` (20 bytes each) and `lengths`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        ids: &[u32],
        counts: &[u32],
        fps: &[u8],
        lengths: &[u32],
    ) -> Result<FileRecipes, JsError> {
        if ids.len() != counts.len() {
            return Err(err("file ids and chunk counts differ in number"));
        }
        if fps.len() != 20 * lengths.len() {
            return Err(err("fingerprints and lengths differ in count"));
        }
        let mut starts = Vec::with_capacity(ids.len() + 1);
        let mut at = 0usize;
        starts.push(0);
        for &n in counts {
            at += n as usize;
            starts.push(at);
        }
        if at != lengths.len() {
            return Err(err("the chunk counts do not add up to the recipes' length"));
        }
        let refs = fps
            .chunks_exact(20)
            .zip(lengths)
            .map(|(fp, &len)| ChunkRef::new(fp.try_into().unwrap(), len as u64))
            .collect();
        Ok(FileRecipes {
            ids: ids.iter().map(|&id| id as u64).collect(),
            starts,
            refs,
        })
    }

    /// How many files.
    pub fn files(&self) -> usize {
        self.ids.len()
    }
}

/// Logical phase (Algorithm 1) over file recipes, with the physical workers' records.
#[wasm_bindgen]
pub struct RecipeSearch {
    db: ResultDb,
    phase: LogicalPhase,
    tiny: MemTinyStore,
    out: Vec<Match>,
}

#[wasm_bindgen]
impl RecipeSearch {
    #[wasm_bindgen(constructor)]
    pub fn new(keywords: &SearchKeywords, files_only: bool) -> RecipeSearch {
        let mut phase = LogicalPhase::new(&keywords.dict, mode(files_only));
        phase.limit(MAX_MATCHES);
        RecipeSearch {
            db: ResultDb::new(),
            phase,
            tiny: MemTinyStore::new(),
            out: Vec::new(),
        }
    }

    /// Merges one physical worker's database ([`ContainerScan::finish`]).
    #[wasm_bindgen(js_name = addResults)]
    pub fn add_results(&mut self, encoded: &[u8]) -> Result<(), JsError> {
        self.db.merge(ResultDb::decode(encoded).map_err(err)?);
        Ok(())
    }

    /// Adds one physical worker's tiny records ([`ContainerScan::take_tiny`]).
    #[wasm_bindgen(js_name = addTiny)]
    pub fn add_tiny(&mut self, encoded: &[u8]) -> Result<(), JsError> {
        self.tiny.add_encoded(encoded).map_err(err)
    }

    /// Searches every file of `recipes`, in order; their matches are kept for
    /// [`RecipeSearch::take_matches`]. Stops at the file where the matches pass the limit
    /// ([`RecipeSearch::overflowed`]).
    #[wasm_bindgen(js_name = searchFiles)]
    pub fn search_files(&mut self, recipes: &FileRecipes) {
        for (k, &file) in recipes.ids.iter().enumerate() {
            let recipe = &recipes.refs[recipes.starts[k]..recipes.starts[k + 1]];
            self.phase
                .search_file(&self.db, file, recipe, &mut self.tiny, &mut self.out);
            if self.phase.overflowed {
                break;
            }
        }
    }

    /// Whether the files searched hold more matches than the search may answer
    /// ([`LogicalPhase::limit`]).
    pub fn overflowed(&self) -> bool {
        self.phase.overflowed
    }

    /// The matches found so far as (file, keyword, offset) triples, file by file in the
    /// order searched and each file's by offset, then keyword; clears them.
    #[wasm_bindgen(js_name = takeMatches)]
    pub fn take_matches(&mut self) -> Vec<f64> {
        flatten(&mut self.out)
    }

    /// `[files, chunks, chunk-result hits, location-list reads, tiny lookups, matches]`
    pub fn stats(&self) -> Vec<f64> {
        let s = self.phase.stats;
        [
            s.files,
            s.chunks,
            s.chunk_hits,
            s.location_reads,
            s.tiny_lookups,
            s.matches,
        ]
        .map(|v| v as f64)
        .to_vec()
    }

    /// The merged database's record counts (the paper's Fig. 7): `[chunk-results,
    /// chunk-result bytes, location-lists, long location-lists, location-list bytes,
    /// infix lists]`.
    #[wasm_bindgen(js_name = dbStats)]
    pub fn db_stats(&self) -> Vec<f64> {
        let s = self.db.stats();
        [
            s.chunk_results,
            s.chunk_result_bytes,
            s.location_lists,
            s.long_location_lists,
            s.location_list_bytes,
            s.infix_lists,
        ]
        .map(|v| v as f64)
        .to_vec()
    }
}

/// The naive search: every file reassembled from its chunks (`chunks/get` bundles, in file
/// order) and scanned whole — the baseline and the oracle.
#[wasm_bindgen]
pub struct NaiveScan {
    naive: NaiveSearch,
    dec: Decompressor,
    current: Option<u32>,
    /// `false` once files-only mode found every keyword in the current file.
    wanted: bool,
    out: Vec<Match>,
}

#[wasm_bindgen]
impl NaiveScan {
    #[wasm_bindgen(constructor)]
    pub fn new(keywords: &SearchKeywords, files_only: bool) -> Result<NaiveScan, JsError> {
        Ok(NaiveScan {
            naive: NaiveSearch::new(&keywords.dict, mode(files_only)),
            dec: Decompressor::new().map_err(err)?,
            current: None,
            wanted: true,
            out: Vec::new(),
        })
    }

    /// Scans a bundle's chunks, the answer to a request for `asked` (20 bytes each, in
    /// order); entry `i` continues file `files[i]` (a new file id starts a new file, so a
    /// file may span several bundles as long as they come in order). An answer for other
    /// chunks than asked is refused: the naive search is the oracle of the others.
    #[wasm_bindgen(js_name = feedBundle)]
    pub fn feed_bundle(
        &mut self,
        bundle: &[u8],
        asked: &[u8],
        files: &[u32],
    ) -> Result<(), JsError> {
        let entries = decode_bundle(bundle).map_err(|e| err(format!("malformed bundle: {e:?}")))?;
        if entries.len() != files.len() || asked.len() != files.len() * 20 {
            return Err(err(format!(
                "bundle has {} chunks, expected {}",
                entries.len(),
                files.len()
            )));
        }
        if let Some((e, _)) = entries
            .iter()
            .zip(asked.chunks_exact(20))
            .find(|(e, want)| e.fp[..] != want[..])
        {
            return Err(err(format!(
                "chunks/get answered chunk {} where another was asked for",
                crate::hash::to_hex(&e.fp)
            )));
        }
        for (e, &file) in entries.iter().zip(files) {
            if self.current != Some(file) {
                self.current = Some(file);
                self.naive.begin_file(file as u64);
                self.wanted = true;
            }
            if !self.wanted || self.overflowed() {
                continue;
            }
            let raw = self
                .dec
                .decompress(e.codec as u8, e.payload, e.raw_len as usize)
                .map_err(|m| err(format!("chunk {}: {m}", crate::hash::to_hex(&e.fp))))?;
            self.wanted = self.naive.feed(raw, &mut self.out);
        }
        Ok(())
    }

    /// The matches found so far as (file, keyword, offset) triples; clears them.
    #[wasm_bindgen(js_name = takeMatches)]
    pub fn take_matches(&mut self) -> Vec<f64> {
        flatten(&mut self.out)
    }

    /// Logical bytes scanned so far.
    pub fn bytes(&self) -> f64 {
        self.naive.bytes as f64
    }

    /// Whether the files scanned hold more matches than the search may answer
    /// ([`MAX_MATCHES`]): the scan stops there, and the caller stops the search.
    pub fn overflowed(&self) -> bool {
        self.out.len() > MAX_MATCHES
    }
}
