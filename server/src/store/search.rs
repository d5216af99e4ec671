//! Server-side search: DedupSearch (`wasm_core::search`, the engine the page's search
//! workers run in Wasm) over the repository's stored versions, natively, for stores too
//! large to search in the page (docs/SEARCH.md). The same stages as the page: the files in
//! scope from the manifests, each unique chunk read once from its container (one read per
//! container), decoded and scanned on a few threads (physical phase), then every recipe
//! walked (logical phase). Results are those of the page's search, hit for hit.

use std::{
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex, OnceLock,
    },
    time::Instant,
};

use wasm_core::{
    format::{manifest::EntryKind, manifest::Manifest, parse_fp_hex},
    hash::Fingerprint,
    search::{
        ChunkRef, ChunkScan, Dictionary, LogicalPhase, Match, MemTinyStore, Mode, PhysicalScanner,
        ResultDb, TinyStore, Trigrams,
    },
};

use super::{
    chunks::{Answer, ChunkLoc},
    crashpoint,
    index::{versions::StoredManifest, IndexRead},
    versions::ManifestChains,
    Store, StoreError, StoreResult,
};

/// Set once whoever asked for a search stopped waiting for it (an HTTP client that went
/// away): the search stops at its next chunk or file with `StoreError::Abandoned` instead of
/// keeping the server's threads busy for nobody, and leaves the chunks it decoded cached.
#[derive(Clone, Default)]
pub struct Abandon(Arc<AtomicBool>);

impl Abandon {
    pub fn abandon(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn check(&self) -> StoreResult<()> {
        if self.0.load(Ordering::Relaxed) {
            return Err(StoreError::Abandoned);
        }
        Ok(())
    }
}

/// What to search: all versions or some, optionally only paths containing a substring
/// (case-insensitive, as in the page).
pub struct SearchScope {
    pub versions: Option<Vec<i64>>,
    pub path_filter: String,
}

/// One file with hits: `(keyword, offset)` pairs by offset, then keyword, and the file's
/// recipe (for the page's snippets around hits).
pub struct FileHits {
    pub version: i64,
    pub path: String,
    pub size: u64,
    pub recipe: Vec<ChunkRef>,
    pub hits: Vec<(u32, u64)>,
}

#[derive(Default)]
pub struct SearchReport {
    /// Files with a hit, by version then path.
    pub files: Vec<FileHits>,
    /// Every version of the repository when the search read them (not only those in scope),
    /// ascending: what a client compares with the list it holds, to know which state of the
    /// repository the answer is of.
    pub versions: Vec<i64>,
    pub matches: u64,
    pub files_searched: u64,
    pub logical_bytes: u64,
    /// Containers holding the chunks the search cache did not hold.
    pub containers: u64,
    pub chunks: u64,
    /// Raw bytes scanned (each unique chunk once).
    pub bytes_scanned: u64,
    /// Chunks whose trigram summary ruled out every keyword: only their ends were scanned.
    pub chunks_ruled_out: u64,
    /// Bytes (of `bytes_scanned`) in blocks whose summaries ruled out every keyword: the
    /// exact-match pass did not read them.
    pub bytes_ruled_out: u64,
    pub stored_bytes_read: u64,
    pub prepare_ms: f64,
    pub physical_ms: f64,
    pub logical_ms: f64,
}

/// A file in scope: its version, path and recipe.
struct ScopeFile {
    version: i64,
    path: String,
    size: u64,
    recipe: Vec<ChunkRef>,
}

/// A search's scope read from the index: its files with their recipes, and the unique
/// chunks they name: those the search cache holds (`held`, kept alive for the search
/// whatever the cache evicts meanwhile) and the others with their locations.
struct Scope {
    files: Vec<ScopeFile>,
    held: Vec<(Fingerprint, Arc<Cached>)>,
    locs: Vec<(Fingerprint, ChunkLoc)>,
}

/// Threads of the physical phase: the cores, at most 4 (as the page's workers).
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// Chunks held in the search cache that a thread of the physical phase scans between two
/// looks at the next job: enough to make the shared counter's cost nothing, few enough
/// that the threads finish together.
const HELD_PIECE: usize = 64;

/// A search that found a container gone (the mover or a prune emptied it between reading
/// the index and the file) starts over from a fresh snapshot this many times.
const ATTEMPTS: usize = 3;

/// A search that would answer more matches than `wasm_core::search::MAX_MATCHES` (which says
/// why) is refused instead (`StoreError::TooManyMatches`); `DITTO_SEARCH_MAX_MATCHES`
/// overrides it.
fn max_matches() -> usize {
    std::env::var("DITTO_SEARCH_MAX_MATCHES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(wasm_core::search::MAX_MATCHES)
}

impl Store {
    /// Searches the repository's versions in `scope` for `dict`'s keywords, until done or
    /// `abandon`ed.
    pub fn search(
        &self,
        repo_id: i64,
        dict: &Dictionary,
        mode: Mode,
        scope: &SearchScope,
        abandon: &Abandon,
    ) -> StoreResult<SearchReport> {
        let mut attempt = 1;
        loop {
            match self.search_once(repo_id, dict, mode, scope, abandon) {
                Err(StoreError::NotFound(m)) if m == GONE && attempt < ATTEMPTS => attempt += 1,
                Err(StoreError::NotFound(m)) if m == GONE => {
                    return Err(StoreError::Internal(
                        "the repository's versions kept changing during the search".into(),
                    ))
                }
                other => return other,
            }
        }
    }

    fn search_once(
        &self,
        repo_id: i64,
        dict: &Dictionary,
        mode: Mode,
        scope: &SearchScope,
        abandon: &Abandon,
    ) -> StoreResult<SearchReport> {
        let t0 = Instant::now();
        let mut report = SearchReport::default();
        let Scope {
            mut files,
            held,
            locs,
        } = self.scope_files(repo_id, scope, &mut report)?;
        report.files_searched = files.len() as u64;
        let t1 = Instant::now();

        let max = max_matches();
        let physical = self.physical(repo_id, held, locs, Some((dict, mode, max)), abandon)?;
        report.containers = physical.containers;
        report.stored_bytes_read = physical.read;
        report.bytes_scanned = physical.scanned;
        report.chunks_ruled_out = physical.ruled_out;
        report.bytes_ruled_out = physical.ruled_out_bytes;
        let mut db = ResultDb::new();
        let mut tiny = MemTinyStore::new();
        for scan in physical.scans {
            report.chunks += 1;
            if let Some(t) = db.insert(scan) {
                tiny.put(t);
            }
        }
        let t2 = Instant::now();

        // Logical phase: every recipe.
        let mut logical = LogicalPhase::new(dict, mode);
        logical.limit(max);
        let mut out: Vec<Match> = Vec::new();
        for (k, f) in files.iter().enumerate() {
            abandon.check()?;
            logical.search_file(&db, k as u64, &f.recipe, &mut tiny, &mut out);
            if logical.overflowed {
                return Err(StoreError::TooManyMatches(max));
            }
        }
        report.matches = out.len() as u64;
        let mut by_file: BTreeMap<u64, Vec<(u32, u64)>> = BTreeMap::new();
        for m in out {
            by_file
                .entry(m.file)
                .or_default()
                .push((m.keyword, m.offset));
        }
        for (k, mut hits) in by_file {
            hits.sort_unstable_by_key(|&(kw, off)| (off, kw));
            let f = &mut files[k as usize];
            report.files.push(FileHits {
                version: f.version,
                path: std::mem::take(&mut f.path),
                size: f.size,
                recipe: std::mem::take(&mut f.recipe),
                hits,
            });
        }
        report
            .files
            .sort_by(|a, b| a.version.cmp(&b.version).then_with(|| a.path.cmp(&b.path)));
        let t3 = Instant::now();
        report.prepare_ms = (t1 - t0).as_secs_f64() * 1e3;
        report.physical_ms = (t2 - t1).as_secs_f64() * 1e3;
        report.logical_ms = (t3 - t2).as_secs_f64() * 1e3;
        Ok(report)
    }

    /// Decodes and checks the chunks of the repository's versions that the search cache
    /// lacks and keeps them there, so the next search, the first one included, scans from
    /// memory (docs/SEARCH.md, "On the server"). Runs in the background after each commit's
    /// delta pass, and at start. The work follows what is new, not the repository's size:
    /// after a warm-up that cached the repository, only the versions committed since are
    /// scoped (their chunks the cache already holds cost a lookup); the first warm-up since
    /// start takes every version. A repository whose committed chunks hold more raw bytes
    /// than the cache's budget ([`Store::committed_raw_bytes`]) is left as it is, so its
    /// commits decode no manifest here: its searches fill the cache themselves. Recorded for
    /// `stats`.
    pub fn warm_search_cache(&self, repo_id: i64) -> StoreResult<()> {
        if !self.search_cache.warms() {
            return Ok(());
        }
        let t0 = Instant::now();
        let covered = self
            .search_warm(repo_id)
            .filter(|w| w.cached)
            .and_then(|w| w.version);
        let mut attempt = 1;
        let mut warm = loop {
            let raw_bytes = self.committed_raw_bytes(repo_id)?;
            let ids: Vec<i64> = self
                .index()?
                .version_metas(repo_id)?
                .iter()
                .map(|v| v.id)
                .collect();
            let mut warm = SearchWarm {
                version: ids.last().copied(),
                raw_bytes,
                versions: 0,
                cached: false,
                decoded_bytes: 0,
                seconds: 0.0,
            };
            if raw_bytes > self.search_cache.budget as u64 {
                break warm;
            }
            let new: Vec<i64> = ids
                .into_iter()
                .filter(|id| covered.is_none_or(|c| *id > c))
                .collect();
            warm.versions = new.len();
            if new.is_empty() {
                warm.cached = true;
                break warm;
            }
            let scope = SearchScope {
                versions: Some(new),
                path_filter: String::new(),
            };
            let gone = |e: &StoreError| match e {
                // A version deleted or a container rewritten since they were listed.
                StoreError::NotFound(m) => m == GONE || m.starts_with("no version "),
                _ => false,
            };
            let found = self
                .scope_files(repo_id, &scope, &mut SearchReport::default())
                .and_then(|Scope { held, locs, .. }| {
                    self.physical(repo_id, held, locs, None, &Abandon::default())
                });
            match found {
                Err(e) if gone(&e) && attempt < ATTEMPTS => attempt += 1,
                Err(e) => return Err(e),
                Ok(p) => {
                    warm.cached = true;
                    warm.decoded_bytes = p.decoded;
                    break warm;
                }
            }
        };
        warm.seconds = t0.elapsed().as_secs_f64();
        self.search_cache
            .warmed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(repo_id, warm);
        Ok(())
    }

    /// The repository's last warm-up of the search cache since the server started.
    pub fn search_warm(&self, repo_id: i64) -> Option<SearchWarm> {
        self.search_cache
            .warmed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&repo_id)
            .cloned()
    }

    /// The files of `scope` and the unique chunks they name; adds the scope's logical bytes
    /// to `report`.
    fn scope_files(
        &self,
        repo_id: i64,
        scope: &SearchScope,
        report: &mut SearchReport,
    ) -> StoreResult<Scope> {
        let ix = self.snapshot()?;
        let mut manifests = ix.manifests(repo_id)?;
        manifests.sort_by_key(|(id, _)| *id);
        report.versions = manifests.iter().map(|(id, _)| *id).collect();
        if let Some(want) = &scope.versions {
            // Sets, not scans: a body may name hundreds of thousands of ids.
            let held: HashSet<i64> = manifests.iter().map(|m| m.0).collect();
            if let Some(id) = want.iter().find(|id| !held.contains(id)) {
                return Err(StoreError::NotFound(format!(
                    "no version {id} in this repository"
                )));
            }
            let want: HashSet<i64> = want.iter().copied().collect();
            manifests.retain(|(id, _)| want.contains(id));
        }
        let filter = scope.path_filter.trim().to_lowercase();
        let mut files = Vec::new();
        let mut unique: Vec<Fingerprint> = Vec::new();
        let mut seen: HashMap<Fingerprint, usize> = HashMap::new();
        let mut recipes: Vec<(i64, String, u64, Vec<usize>)> = Vec::new();
        for (id, version) in self.search_cache.version_files(&*ix, repo_id, &manifests)? {
            for f in &version.files {
                if !filter.is_empty() && !f.path.to_lowercase().contains(&filter) {
                    continue;
                }
                let mut idx = Vec::with_capacity(f.recipe.len());
                for fp in &f.recipe {
                    let next = unique.len();
                    let k = *seen.entry(*fp).or_insert(next);
                    if k == next {
                        unique.push(*fp);
                    }
                    idx.push(k);
                }
                report.logical_bytes += f.size;
                recipes.push((id, f.path.clone(), f.size, idx));
            }
        }
        // A chunk the search cache holds is scanned from memory, so only the others are
        // located (most of a repeat search's reading of the index). The versions listed in
        // this snapshot keep their chunks stored, so a held chunk needs no lookup to be known
        // stored, unless one of the repository's chunks is quarantined: then every chunk is
        // located, so that a search whose scope holds a damaged one answers `damaged` as
        // every read of it does.
        let held: Vec<Option<Arc<Cached>>> = if ix.any_quarantined(repo_id)? {
            vec![None; unique.len()]
        } else {
            self.search_cache.held(repo_id, &unique)
        };
        let lacking: Vec<Fingerprint> = unique
            .iter()
            .zip(&held)
            .filter(|(_, h)| h.is_none())
            .map(|(fp, _)| *fp)
            .collect();
        let found = ix.chunk_locations(repo_id, &lacking)?;
        // Not stored: quarantined (a damaged copy, named as such, as every read names it) or
        // never stored.
        let (mut damaged, mut missing) = (Vec::new(), Vec::new());
        for (fp, _) in lacking.iter().zip(&found).filter(|(_, l)| l.is_none()) {
            if ix.is_quarantined(repo_id, fp)? {
                damaged.push(*fp);
            } else {
                missing.push(*fp);
            }
        }
        if !damaged.is_empty() || !missing.is_empty() {
            return Err(StoreError::Unavailable { damaged, missing });
        }
        let mut found = found.into_iter().map(Option::unwrap);
        let mut raw_lens = Vec::with_capacity(unique.len());
        let (mut kept, mut locs) = (Vec::new(), Vec::new());
        for (&fp, h) in unique.iter().zip(held) {
            match h {
                Some(c) => {
                    raw_lens.push(c.raw.len() as u64);
                    kept.push((fp, c));
                }
                None => {
                    let loc = found.next().expect("a location for every chunk not held");
                    raw_lens.push(loc.raw_len as u64);
                    locs.push((fp, loc));
                }
            }
        }
        for (version, path, size, idx) in recipes {
            let recipe = idx
                .iter()
                .map(|&k| ChunkRef::new(unique[k], raw_lens[k]))
                .collect();
            files.push(ScopeFile {
                version,
                path,
                size,
                recipe,
            });
        }
        Ok(Scope {
            files,
            held: kept,
            locs,
        })
    }

    /// The physical phase: every chunk of `locs` read once (containers in id order, chunks
    /// in storage order, one read per container for the chunks the search cache lacks),
    /// decoded, checked, kept in the cache and, with a dictionary, scanned on a few threads,
    /// which then scan the chunks `held` from memory, [`HELD_PIECE`] at a time. With the
    /// dictionary comes the search's match limit (`TooManyMatches`).
    fn physical(
        &self,
        repo_id: i64,
        held: Vec<(Fingerprint, Arc<Cached>)>,
        locs: Vec<(Fingerprint, ChunkLoc)>,
        dict: Option<(&Dictionary, Mode, usize)>,
        abandon: &Abandon,
    ) -> StoreResult<Physical> {
        let mut by_container: BTreeMap<u64, Vec<(Fingerprint, ChunkLoc)>> = BTreeMap::new();
        for (fp, loc) in locs {
            by_container
                .entry(loc.container_id)
                .or_default()
                .push((fp, loc));
        }
        let jobs: Vec<(u64, Vec<(Fingerprint, ChunkLoc)>)> = by_container
            .into_iter()
            .map(|(id, mut list)| {
                list.sort_by_key(|(_, l)| l.offset);
                (id, list)
            })
            .collect();
        let next = AtomicUsize::new(0);
        let scans: Mutex<Vec<ChunkScan>> = Mutex::new(Vec::new());
        let read = AtomicUsize::new(0);
        let scanned = AtomicUsize::new(0);
        let decoded = AtomicUsize::new(0);
        let ruled_out = AtomicUsize::new(0);
        let ruled_out_bytes = AtomicUsize::new(0);
        let failure: Mutex<Option<StoreError>> = Mutex::new(None);
        let offsets = AtomicUsize::new(0);
        let cache = &self.search_cache;
        let round = cache.begin(
            repo_id,
            jobs.iter()
                .flat_map(|(_, l)| l.iter().map(|c| &c.0))
                .chain(held.iter().map(|c| &c.0)),
        );
        let pieces: Vec<&[(Fingerprint, Arc<Cached>)]> = held.chunks(HELD_PIECE).collect();
        std::thread::scope(|s| {
            for _ in 0..threads().min(jobs.len() + pieces.len()) {
                s.spawn(|| {
                    let mut scanner =
                        dict.map(|(d, mode, max)| (PhysicalScanner::for_mode(d, mode), max));
                    let mut out = Vec::new();
                    let mut scan = |fp: &Fingerprint,
                                    raw: &[u8],
                                    summary: Option<&Trigrams>|
                     -> StoreResult<()> {
                        abandon.check()?;
                        crashpoint::delay("search:chunk");
                        if let Some((scanner, max)) = scanner.as_mut() {
                            scanned.fetch_add(raw.len(), Ordering::Relaxed);
                            let (found, spared) = scanner.scan_summarized(fp, raw, summary);
                            ruled_out.fetch_add(spared.ruled_out as usize, Ordering::Relaxed);
                            ruled_out_bytes.fetch_add(spared.bytes, Ordering::Relaxed);
                            let n: usize = found
                                .locations
                                .as_ref()
                                .map_or(0, |l| l.entries.iter().map(|e| e.offsets.len()).sum());
                            // Four times the answer's limit: an offset in a chunk is at
                            // least one match, in every file holding the chunk.
                            if scanner.bounds_offsets()
                                && offsets.fetch_add(n, Ordering::Relaxed) + n
                                    > max.saturating_mul(4)
                            {
                                return Err(StoreError::TooManyMatches(*max));
                            }
                            out.push(found);
                        }
                        Ok(())
                    };
                    // Chunks an earlier search decoded and checked are scanned from memory.
                    // A warm-up summarises those cached without a summary.
                    let summarize = |fp: &Fingerprint, c: &Cached| {
                        if dict.is_none() && c.summary.get().is_none() {
                            cache.summarize(repo_id, fp, Trigrams::of(&c.raw));
                        }
                    };
                    let res = (|| -> StoreResult<()> {
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            if failure.lock().unwrap().is_some() {
                                return Ok(());
                            }
                            let Some((id, list)) = jobs.get(i) else {
                                let Some(piece) = pieces.get(i - jobs.len()) else {
                                    return Ok(());
                                };
                                for (fp, c) in *piece {
                                    summarize(fp, c);
                                    scan(fp, &c.raw, c.summary.get())?;
                                }
                                continue;
                            };
                            // The container is read only for the chunks not cached since
                            // the scope was read.
                            let mut misses = Vec::new();
                            for (fp, l) in list {
                                let Some(c) = cache.get(repo_id, fp) else {
                                    misses.push((fp, l));
                                    continue;
                                };
                                summarize(fp, &c);
                                scan(fp, &c.raw, c.summary.get())?;
                            }
                            let Some(&(_, first)) = misses.first() else {
                                continue;
                            };
                            let start = first.offset;
                            let end = misses
                                .iter()
                                .map(|(_, l)| l.offset + l.stored_len as u64)
                                .max()
                                .unwrap();
                            let len = u32::try_from(end - start).map_err(|_| {
                                StoreError::Internal("container range too large".into())
                            })?;
                            let file = self.containers.open(repo_id, *id)?;
                            let data = match &file {
                                Some(f) => self.containers.read_at(f, start, len)?,
                                None => None,
                            };
                            read.fetch_add(data.as_ref().map_or(0, Vec::len), Ordering::Relaxed);
                            for (fp, l) in misses {
                                // Decoded (a delta against its base chain, which may sit in
                                // other containers) and checked against its fingerprint as
                                // every read is: a damaged copy is quarantined and fails
                                // the search instead of giving wrong hits. A container gone
                                // or shorter than the range is read chunk by chunk as any
                                // read is: a chunk moved meanwhile from its new place, one
                                // past a cut end found damaged, one removed meanwhile (its
                                // version forgotten) makes the search start again.
                                let (_, raw) = match &data {
                                    Some(data) => {
                                        let at = (l.offset - start) as usize;
                                        let stored = data[at..at + l.stored_len as usize].to_vec();
                                        self.verify_read(repo_id, fp, l, Some(stored), Answer::Raw)
                                    }
                                    None => self.read_verified(
                                        repo_id,
                                        fp,
                                        l,
                                        file.as_ref(),
                                        Answer::Raw,
                                    ),
                                }
                                .map_err(|e| match e {
                                    StoreError::Unavailable { damaged, .. }
                                        if damaged.is_empty() =>
                                    {
                                        StoreError::NotFound(GONE.into())
                                    }
                                    e => e,
                                })?;
                                decoded.fetch_add(raw.len(), Ordering::Relaxed);
                                scan(fp, &raw, None)?;
                                // Summarised by a warm-up, which runs in the background;
                                // a search does not wait for it.
                                let summary = dict.is_none().then(|| Trigrams::of(&raw));
                                cache.put(repo_id, *fp, raw, summary, round);
                            }
                        }
                    })();
                    if let Err(e) = res {
                        failure.lock().unwrap().get_or_insert(e);
                    }
                    scans.lock().unwrap().extend(out);
                });
            }
        });
        if let Some(e) = failure.into_inner().unwrap() {
            return Err(e);
        }
        Ok(Physical {
            scans: scans.into_inner().unwrap(),
            containers: jobs.len() as u64,
            read: read.into_inner() as u64,
            scanned: scanned.into_inner() as u64,
            ruled_out: ruled_out.into_inner() as u64,
            ruled_out_bytes: ruled_out_bytes.into_inner() as u64,
            decoded: decoded.into_inner() as u64,
        })
    }
}

/// What a physical phase did: its scans (with a dictionary), the containers its located
/// chunks sit in, the stored bytes it read, the raw bytes it scanned and those it decoded.
struct Physical {
    scans: Vec<ChunkScan>,
    containers: u64,
    read: u64,
    scanned: u64,
    ruled_out: u64,
    ruled_out_bytes: u64,
    decoded: u64,
}

/// The marker of a chunk removed mid-search (its version forgotten): the search starts
/// again; never answered.
const GONE: &str = "a chunk of the search is gone";

/// Decoded, checked chunks kept between the server's searches (docs/SEARCH.md, "On the
/// server"): a repeat search scans them from memory instead of reading, decoding and
/// checking them again, as the page's workers keep theirs. Keyed by repository and
/// fingerprint, and filled only with bytes checked against it, so an entry never goes
/// stale: what a search scans is decided by the manifests and the index, never by the
/// cache. The copy scanned is the one checked when it was cached; a copy damaged on disk
/// since is found by the reads and `check` that go to the disk, not by a search.
///
/// Within [`SearchCache::budget`] bytes. A search over more than the budget must not evict
/// what it cached itself, or a repeat of it would find nothing: the entries the newest
/// search scans are kept, the others go oldest first, and once only its own are left a new
/// chunk is not cached.
pub struct SearchCache {
    inner: Mutex<Held>,
    budget: usize,
    /// Versions' files as searches read them from their manifests, by repository and
    /// version id, within an eighth of the budget: a version's manifest never changes, and
    /// its id is never given again, so an entry never goes stale.
    versions: Mutex<HashMap<(i64, i64), Arc<VersionFiles>>>,
    /// Each repository's last warm-up ([`Store::warm_search_cache`]).
    warmed: Mutex<HashMap<i64, SearchWarm>>,
}

/// One warm-up of the search cache: the newest version it covered (every version up to it),
/// the repository's committed raw bytes ([`Store::committed_raw_bytes`]), whether they
/// fitted the budget and were cached, how many versions it scoped (those new since the last
/// warm-up), the raw bytes it decoded (those not cached already) and its time.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SearchWarm {
    pub version: Option<i64>,
    pub raw_bytes: u64,
    pub versions: usize,
    pub cached: bool,
    pub decoded_bytes: u64,
    pub seconds: f64,
}

/// A version's files with a recipe, as a search reads them ([`SearchCache::version_files`]).
struct VersionFiles {
    files: Vec<VersionFile>,
    /// Memory held, about.
    bytes: usize,
}

struct VersionFile {
    path: String,
    size: u64,
    recipe: Vec<Fingerprint>,
}

impl VersionFiles {
    fn parse(id: i64, json: &[u8]) -> StoreResult<VersionFiles> {
        let bad = |e: &dyn std::fmt::Display| StoreError::Internal(format!("version {id}: {e}"));
        let m: Manifest = serde_json::from_slice(json).map_err(|e| bad(&e))?;
        let mut files = Vec::new();
        for e in m.entries {
            if e.kind != EntryKind::File || e.recipe.is_empty() {
                continue;
            }
            let recipe = e
                .recipe
                .iter()
                .map(|h| parse_fp_hex(h).ok_or_else(|| bad(&"bad fingerprint")))
                .collect::<StoreResult<_>>()?;
            files.push(VersionFile {
                path: e.path,
                size: e.size,
                recipe,
            });
        }
        let bytes = files
            .iter()
            .map(|f| std::mem::size_of::<VersionFile>() + f.path.len() + 20 * f.recipe.len())
            .sum();
        Ok(VersionFiles { files, bytes })
    }
}

/// A cached chunk: its repository and fingerprint.
type Key = (i64, Fingerprint);

/// A cached chunk's raw bytes and, once a warm-up made it, the summary of its trigrams
/// (`wasm_core::search::Trigrams`), with which a search reads only the ends of a chunk that
/// holds none of its keywords, as the page's workers do with theirs.
struct Cached {
    raw: Vec<u8>,
    summary: OnceLock<Trigrams>,
}

impl Cached {
    fn bytes(&self) -> usize {
        self.raw.len() + self.summary.get().map_or(0, Trigrams::bytes)
    }
}

#[derive(Default)]
struct Held {
    /// Chunks and the round of the last search that used them.
    map: HashMap<Key, (Arc<Cached>, u64)>,
    /// Insertion order, oldest first.
    order: VecDeque<Key>,
    bytes: usize,
    /// The newest search's round.
    round: u64,
    /// The round in which only that round's entries were left (nothing more is cached).
    full: u64,
}

impl Held {
    fn get(&self, repo_id: i64, fp: &Fingerprint) -> Option<Arc<Cached>> {
        self.map.get(&(repo_id, *fp)).map(|(c, _)| c.clone())
    }
}

impl SearchCache {
    /// A cache of at most `budget` bytes of raw chunks (0: none kept).
    pub fn new(budget: usize) -> SearchCache {
        SearchCache {
            inner: Mutex::new(Held::default()),
            budget,
            versions: Mutex::new(HashMap::new()),
            warmed: Mutex::new(HashMap::new()),
        }
    }

    /// The budget set by `DITTO_SEARCH_CACHE_MB` (MiB; default 256, 0 turns it off).
    pub fn from_env() -> Result<SearchCache, String> {
        let mb = match std::env::var("DITTO_SEARCH_CACHE_MB") {
            Ok(v) if !v.is_empty() => v
                .parse::<usize>()
                .map_err(|_| format!("DITTO_SEARCH_CACHE_MB: not a number of MiB: {v:?}"))?,
            _ => 256,
        };
        Ok(SearchCache::new(mb.saturating_mul(1 << 20)))
    }

    /// Whether the server keeps decoded chunks (and so warms them after each commit).
    pub(super) fn warms(&self) -> bool {
        self.budget > 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a search that will scan `fps`: its round. The entries it will scan are its
    /// own from now on, so caching its other chunks does not evict them.
    fn begin<'a>(&self, repo_id: i64, fps: impl Iterator<Item = &'a Fingerprint>) -> u64 {
        let mut g = self.lock();
        g.round += 1;
        let round = g.round;
        if !g.map.is_empty() {
            for fp in fps {
                if let Some((_, used)) = g.map.get_mut(&(repo_id, *fp)) {
                    *used = round;
                }
            }
        }
        round
    }

    fn get(&self, repo_id: i64, fp: &Fingerprint) -> Option<Arc<Cached>> {
        self.lock().get(repo_id, fp)
    }

    /// [`Self::get`] of each of `fps`, under one lock.
    fn held(&self, repo_id: i64, fps: &[Fingerprint]) -> Vec<Option<Arc<Cached>>> {
        let g = self.lock();
        fps.iter().map(|fp| g.get(repo_id, fp)).collect()
    }

    /// The files of versions `manifests` (in id order), from memory or decoded from their
    /// manifests (through their chains, `ManifestChains`) and kept.
    fn version_files(
        &self,
        ix: &dyn IndexRead,
        repo_id: i64,
        manifests: &[(i64, StoredManifest)],
    ) -> StoreResult<Vec<(i64, Arc<VersionFiles>)>> {
        let mut known: HashMap<i64, Arc<VersionFiles>> = {
            let held = self.versions.lock().unwrap_or_else(|p| p.into_inner());
            manifests
                .iter()
                .filter_map(|(id, _)| held.get(&(repo_id, *id)).map(|v| (*id, v.clone())))
                .collect()
        };
        let mut fresh = Vec::new();
        ManifestChains::new(ix, repo_id).each(
            manifests
                .iter()
                .filter(|(id, _)| !known.contains_key(id))
                .map(|(id, m)| (*id, m)),
            |id, json| {
                let json = json.map_err(|e| StoreError::Internal(format!("version {id}: {e}")))?;
                fresh.push((id, Arc::new(VersionFiles::parse(id, json)?)));
                Ok(())
            },
        )?;
        if !fresh.is_empty() {
            let mut held = self.versions.lock().unwrap_or_else(|p| p.into_inner());
            let cap = self.budget / 8;
            let mut bytes: usize = held.values().map(|v| v.bytes).sum();
            let adding: usize = fresh.iter().map(|(_, v)| v.bytes).sum();
            if bytes + adding > cap {
                // Those of versions no longer listed first (forgotten), then all others.
                let listed: HashSet<i64> = manifests.iter().map(|(id, _)| *id).collect();
                held.retain(|(r, id), _| *r == repo_id && listed.contains(id));
                bytes = held.values().map(|v| v.bytes).sum();
                if bytes + adding > cap {
                    held.clear();
                    bytes = 0;
                }
            }
            if bytes + adding <= cap {
                for (id, v) in &fresh {
                    held.insert((repo_id, *id), v.clone());
                }
            }
            known.extend(fresh);
        }
        let mut out: Vec<(i64, Arc<VersionFiles>)> = known.into_iter().collect();
        out.sort_by_key(|(id, _)| *id);
        Ok(out)
    }

    /// Gives a cached chunk its summary, within the budget (else it stays without one).
    fn summarize(&self, repo_id: i64, fp: &Fingerprint, summary: Trigrams) {
        let mut g = self.lock();
        let Held { map, bytes, .. } = &mut *g;
        let Some((c, _)) = map.get(&(repo_id, *fp)) else {
            return;
        };
        let size = summary.bytes();
        if *bytes + size <= self.budget && c.summary.set(summary).is_ok() {
            *bytes += size;
        }
    }

    fn put(
        &self,
        repo_id: i64,
        fp: Fingerprint,
        raw: Vec<u8>,
        summary: Option<Trigrams>,
        round: u64,
    ) {
        let entry = Cached {
            raw,
            summary: summary.map_or_else(OnceLock::new, OnceLock::from),
        };
        let size = entry.bytes();
        if size > self.budget {
            return;
        }
        let mut g = self.lock();
        let Held {
            map,
            order,
            bytes,
            full,
            ..
        } = &mut *g;
        let key = (repo_id, fp);
        if map.contains_key(&key) {
            return;
        }
        if *bytes + size > self.budget {
            if *full == round {
                return;
            }
            // One turn through the entries at most: the current search's go to the back.
            let mut turn = order.len();
            while *bytes + size > self.budget && turn > 0 {
                turn -= 1;
                let Some(old) = order.pop_front() else { break };
                match map.get(&old) {
                    Some((_, used)) if *used == round => order.push_back(old),
                    Some(_) => {
                        let (c, _) = map.remove(&old).expect("present");
                        *bytes -= c.bytes();
                    }
                    None => {}
                }
            }
            if *bytes + size > self.budget {
                *full = round;
                return;
            }
        }
        *bytes += size;
        order.push_back(key);
        map.insert(key, (Arc::new(entry), round));
    }
}
