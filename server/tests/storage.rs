//! The storage engine (docs/STORAGE.md) against the real server process: garbage collection
//! checked against bookkeeping the test keeps itself (never read back from the server),
//! backups racing version expiry, and a crash at every named persistence point.
//!
//! Histories are random but seeded; `DITTO_STORAGE_SEED` replays one (the seed in use is
//! printed).

mod common;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    io::{BufRead, BufReader, Read},
    os::unix::process::ExitStatusExt,
    path::Path,
    process::{ExitStatus, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use common::*;
use serde_json::{json, Value};
use wasm_core::{
    format::bundle::{decode_bundle, Codec},
    hash::to_hex,
};

/// The thresholds the tests run the server with (`DITTO_MOVE_THRESHOLD`,
/// `DITTO_COMPACT_THRESHOLD`), so that what they assert does not depend on the defaults:
/// every cold chunk leaves active containers, and a container with less than half of its
/// data bytes live is compacted.
const MOVE_THRESHOLD: &str = "0";
const COMPACT_THRESHOLD: f64 = 0.5;
const COMPACT_THRESHOLD_ENV: &str = "0.5";

/// Without the delta pass (`common::NO_PASS`): the model predicts stored lengths and what
/// expiry frees from the bytes uploaded, which the pass changes in the background. The crash
/// plan's delta points turn it on.
fn engine_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("DITTO_MOVE_THRESHOLD", MOVE_THRESHOLD),
        ("DITTO_COMPACT_THRESHOLD", COMPACT_THRESHOLD_ENV),
        NO_PASS[0],
    ]
}

fn seed(default: u64) -> u64 {
    std::env::var("DITTO_STORAGE_SEED")
        .ok()
        .and_then(|s| {
            let s = s.trim();
            match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => s.parse().ok(),
            }
        })
        .unwrap_or(default)
}

// ---------------------------------------------------------------- randomness and chunks

/// splitmix64: small, deterministic, good enough to pick histories.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo)
    }

    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
}

/// Every chunk a test made, by hex fingerprint, with the stored length the server must
/// record for it: the payload its bundle carries (zstd level 3, or the raw bytes).
struct Pool {
    chunks: HashMap<String, TestChunk>,
    stored: HashMap<String, u64>,
    base: u64,
    n: u64,
}

impl Pool {
    fn new(base: u64) -> Pool {
        Pool {
            chunks: HashMap::new(),
            stored: HashMap::new(),
            base,
            n: 0,
        }
    }

    /// A new chunk of `len` bytes: text compressed with zstd, or incompressible raw bytes.
    fn make(&mut self, len: usize, zstd: bool) -> String {
        self.n += 1;
        let s = self.base.wrapping_mul(1_000_003).wrapping_add(self.n);
        let c = if zstd {
            TestChunk::new(text_bytes(s, len), true)
        } else {
            TestChunk::new(rand_bytes(s, len), false)
        };
        self.add(c)
    }

    fn fresh(&mut self, rng: &mut Rng, lo: usize, hi: usize) -> String {
        let len = rng.range(lo, hi);
        let zstd = rng.percent(40);
        self.make(len, zstd)
    }

    fn add(&mut self, c: TestChunk) -> String {
        let h = c.hex();
        self.stored.insert(h.clone(), c.stored().len() as u64);
        self.chunks.insert(h.clone(), c);
        h
    }

    fn stored_bytes<'a>(&self, fps: impl IntoIterator<Item = &'a String>) -> u64 {
        fps.into_iter().map(|h| self.stored[h]).sum()
    }
}

// ---------------------------------------------------------------- versions and the model

#[derive(Clone, Debug)]
struct File {
    path: String,
    recipe: Vec<String>,
    size: u64,
}

#[derive(Clone, Debug)]
struct Ver {
    id: i64,
    source: String,
    time: i64,
    files: Vec<File>,
}

impl Ver {
    fn fps(&self) -> BTreeSet<String> {
        self.files
            .iter()
            .flat_map(|f| f.recipe.iter().cloned())
            .collect()
    }

    fn manifest(&self) -> Value {
        let mut entries = vec![json!({ "path": self.source, "kind": "dir", "size": 0,
            "mtime": self.time, "mode": 493, "recipe": [] })];
        for f in &self.files {
            entries.push(json!({ "path": f.path, "kind": "file", "size": f.size,
                "mtime": self.time, "mode": 420, "recipe": f.recipe }));
        }
        json!({ "source": self.source, "time": self.time, "entries": entries })
    }
}

fn file(pool: &Pool, path: String, recipe: Vec<String>) -> File {
    let size = recipe.iter().map(|h| pool.chunks[h].raw.len() as u64).sum();
    File { path, recipe, size }
}

/// The repository as the test's own bookkeeping sees it: the live versions.
#[derive(Default, Clone)]
struct Model {
    live: BTreeMap<i64, Ver>,
}

impl Model {
    fn referenced(&self) -> BTreeSet<String> {
        self.live.values().flat_map(|v| v.fps()).collect()
    }

    /// The newest live version of each source (ids only grow).
    fn newest(&self) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for v in self.live.values() {
            out.insert(v.source.clone(), v.id);
        }
        out
    }

    /// Fingerprints the newest version of some source references.
    fn hot(&self) -> HashSet<String> {
        self.newest()
            .values()
            .flat_map(|id| self.live[id].fps())
            .collect()
    }

    /// Each referenced fingerprint -> the newest live version referencing it.
    fn newest_ref(&self) -> HashMap<String, i64> {
        let mut out = HashMap::new();
        for v in self.live.values() {
            for h in v.fps() {
                out.insert(h, v.id);
            }
        }
        out
    }

    /// What `keep_last: n` removes: all but the `n` newest versions of each source (or only
    /// of `source`).
    fn keep_last(&self, n: usize, source: Option<&str>) -> BTreeSet<i64> {
        let mut by_source: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for v in self.live.values() {
            if source.is_none_or(|s| s == v.source) {
                by_source.entry(&v.source).or_default().push(v.id);
            }
        }
        by_source
            .values()
            .flat_map(|ids| ids[..ids.len().saturating_sub(n)].to_vec())
            .collect()
    }

    fn without(&self, removed: &BTreeSet<i64>) -> Model {
        let mut m = self.clone();
        for id in removed {
            m.live.remove(id);
        }
        m
    }
}

// ---------------------------------------------------------------- the HTTP client

/// One container as `GET containers` lists it.
struct Cont {
    id: u64,
    archival: bool,
    newest: i64,
    data_offset: u64,
    size: u64,
    chunks: Vec<(String, u64)>,
    /// Those of `chunks` stored as deltas (codec 2): their stored length is the delta's.
    deltas: HashSet<String>,
    /// Those of `chunks` stored as zstd frames (codec 1): the delta pass may have
    /// recompressed them at its higher level, so their stored length is at most the upload's.
    zstd: HashSet<String>,
}

impl Cont {
    fn data(&self) -> u64 {
        self.size - self.data_offset
    }

    fn live(&self) -> u64 {
        self.chunks.iter().map(|c| c.1).sum()
    }
}

#[derive(Clone)]
struct Api {
    base: String,
    token: String,
    agent: ureq::Agent,
}

impl Api {
    fn of(s: &Server) -> Api {
        Api {
            base: s.base.clone(),
            token: s.token.clone(),
            agent: agent(),
        }
    }

    fn try_call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Resp, String> {
        let bytes = body.map(|b| serde_json::to_vec(b).unwrap());
        try_request(
            &self.agent,
            method,
            &format!("{}/api/v1/repos/default{path}", self.base),
            Some(&self.token),
            &[("Content-Type", "application/json")],
            bytes.as_deref(),
        )
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Resp {
        self.try_call(method, path, body)
            .unwrap_or_else(|e| panic!("{method} {path}: no answer: {e}"))
    }

    /// A call that must succeed (2xx with a JSON body); the panic names the endpoint, so a
    /// server without it fails here with a clear message.
    fn ok(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let r = self.call(method, path, body);
        assert!(
            (200..300).contains(&r.status),
            "{method} {path} {}: expected success (docs/API.md), got {}: {}",
            body.map(|b| b.to_string()).unwrap_or_default(),
            r.status,
            String::from_utf8_lossy(&r.body[..r.body.len().min(500)])
        );
        r.json()
    }

    fn missing(&self, fps: &[String]) -> Vec<String> {
        let j = self.ok(
            "POST",
            "/chunks/missing",
            Some(&json!({ "fingerprints": fps })),
        );
        serde_json::from_value(j["missing"].clone()).unwrap()
    }

    /// Uploads the chunks `fps` names (all in `chunks`) in bundles of at most about 8 MiB.
    fn upload(&self, chunks: &HashMap<String, TestChunk>, fps: &[String]) {
        let mut batch: Vec<TestChunk> = Vec::new();
        let mut bytes = 0;
        let send = |batch: &mut Vec<TestChunk>| {
            if batch.is_empty() {
                return;
            }
            let r = try_request(
                &self.agent,
                "POST",
                &format!("{}/api/v1/repos/default/bundles", self.base),
                Some(&self.token),
                &[("Content-Type", "application/x-ditto-bundle")],
                Some(&bundle(batch)),
            )
            .unwrap_or_else(|e| panic!("POST bundles: no answer: {e}"));
            assert_eq!(
                r.status,
                200,
                "bundle refused: {}",
                String::from_utf8_lossy(&r.body)
            );
            batch.clear();
        };
        for h in fps {
            let c = &chunks[h];
            if bytes + c.raw.len() > 8 << 20 {
                send(&mut batch);
                bytes = 0;
            }
            bytes += c.raw.len();
            batch.push(c.clone());
        }
        send(&mut batch);
    }

    /// Commits a manifest: `Ok(id)`, or `Err(missing)` on 409 `missing_chunks`.
    fn commit(&self, m: &Value) -> Result<i64, Vec<String>> {
        let r = self.call("POST", "/versions", Some(m));
        match r.status {
            201 => Ok(r.json()["id"].as_i64().expect("version id")),
            409 => {
                let j = r.expect_error(409, "missing_chunks");
                Err(serde_json::from_value(j["missing"].clone()).unwrap())
            }
            s => panic!(
                "POST versions: unexpected {s}: {}",
                String::from_utf8_lossy(&r.body)
            ),
        }
    }

    /// Asks for what is missing, uploads it, commits; the chunks must all be in `chunks`.
    fn backup(&self, chunks: &HashMap<String, TestChunk>, v: &Ver) -> i64 {
        let fps: Vec<String> = v.fps().into_iter().collect();
        let miss = self.missing(&fps);
        self.upload(chunks, &miss);
        match self.commit(&v.manifest()) {
            Ok(id) => id,
            Err(m) => panic!(
                "version of {} refused although every chunk was uploaded: missing {m:?}",
                v.source
            ),
        }
    }

    fn containers(&self) -> Vec<Cont> {
        let j = self.ok("GET", "/containers", None);
        j["containers"]
            .as_array()
            .expect("containers list")
            .iter()
            .map(|c| Cont {
                id: c["id"].as_u64().unwrap(),
                archival: match c["kind"].as_str() {
                    Some("archival") => true,
                    Some("active") => false,
                    k => panic!("container kind {k:?}"),
                },
                newest: c["newest_version"].as_i64().unwrap(),
                data_offset: c["data_offset"].as_u64().unwrap(),
                size: c["size"].as_u64().unwrap(),
                chunks: c["chunks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|k| {
                        (
                            k["fp"].as_str().unwrap().to_string(),
                            k["stored_len"].as_u64().unwrap(),
                        )
                    })
                    .collect(),
                deltas: fps_of_codec(c, 2),
                zstd: fps_of_codec(c, 1),
            })
            .collect()
    }

    fn prune(&self, dry_run: bool) -> Value {
        let j = self.ok("POST", "/prune", Some(&json!({ "dry_run": dry_run })));
        assert_eq!(j["dry_run"], dry_run, "prune answer: {j}");
        j
    }

    /// Waits for the background mover: a prune (even a dry run) runs it to completion first.
    fn settle(&self) {
        self.prune(true);
    }

    fn forget(&self, body: &Value) -> Value {
        self.ok("POST", "/forget", Some(body))
    }

    fn stats(&self) -> Value {
        self.ok("GET", "/stats", None)
    }

    fn version_ids(&self) -> BTreeSet<i64> {
        self.ok("GET", "/versions", None)["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["id"].as_i64().unwrap())
            .collect()
    }

    /// Reads `fps` with `chunks/get` (as stored, zstd decoded here) and compares each with
    /// the bytes the test made.
    fn read_back(&self, chunks: &HashMap<String, TestChunk>, fps: &[String], ctx: &str) {
        let mut i = 0;
        while i < fps.len() {
            let (mut j, mut bytes) = (i, 0);
            while j < fps.len() && j - i < 4000 && bytes < 8 << 20 {
                bytes += chunks[&fps[j]].raw.len();
                j += 1;
            }
            let r = self.call(
                "POST",
                "/chunks/get",
                Some(&json!({ "fingerprints": &fps[i..j] })),
            );
            assert_eq!(
                r.status,
                200,
                "{ctx}: chunks/get: {}",
                String::from_utf8_lossy(&r.body[..r.body.len().min(600)])
            );
            let entries = decode_bundle(&r.body).expect("chunks/get answers a bundle");
            assert_eq!(entries.len(), j - i);
            for (e, h) in entries.iter().zip(&fps[i..j]) {
                assert_eq!(&to_hex(&e.fp), h, "{ctx}: chunks/get order");
                let raw = match e.codec {
                    Codec::Raw => e.payload.to_vec(),
                    Codec::Zstd => zstd::bulk::decompress(e.payload, e.raw_len as usize)
                        .unwrap_or_else(|err| panic!("{ctx}: chunk {h}: bad zstd: {err}")),
                    Codec::Delta => panic!("{ctx}: delta chunk {h}"),
                };
                assert!(
                    raw == chunks[h].raw,
                    "{ctx}: chunk {h} reads back different bytes"
                );
            }
            i = j;
        }
    }

    /// The server's live versions are exactly the model's, each with the manifest it was
    /// committed with, and every chunk of each reads back byte for byte.
    fn verify_versions(&self, chunks: &HashMap<String, TestChunk>, model: &Model, ctx: &str) {
        let ids = self.version_ids();
        let want: BTreeSet<i64> = model.live.keys().copied().collect();
        assert_eq!(ids, want, "{ctx}: live versions (server, model)");
        for v in model.live.values() {
            let got = self.ok("GET", &format!("/versions/{}", v.id), None);
            let m = v.manifest();
            assert_eq!(got["source"], m["source"], "{ctx}: version {}", v.id);
            assert_eq!(
                got["manifest"]["entries"], m["entries"],
                "{ctx}: version {} manifest changed",
                v.id
            );
        }
        let fps: Vec<String> = model.referenced().into_iter().collect();
        self.read_back(chunks, &fps, ctx);
    }
}

// ---------------------------------------------------------------- what must hold on disk

/// The container files of repository `default` (id 1; FORMAT.md): exactly one file per
/// container row, `<id as 10 digits>.dct`, of the row's committed size, and nothing else.
/// Returns their total size.
fn check_disk(dir: &Path, conts: &[Cont], ctx: &str) -> u64 {
    let mut files: BTreeMap<String, u64> = BTreeMap::new();
    for p in container_files(dir, 1) {
        files.insert(
            p.file_name().unwrap().to_string_lossy().into_owned(),
            std::fs::metadata(&p).unwrap().len(),
        );
    }
    let rows: BTreeMap<String, u64> = conts
        .iter()
        .map(|c| (format!("{:010}.dct", c.id), c.size))
        .collect();
    assert_eq!(
        files, rows,
        "{ctx}: container files on disk (name -> size) differ from the container rows (id -> committed size): orphan, missing or cut files"
    );
    files.values().sum()
}

/// The fingerprints of a container listing's chunks stored with `codec`.
fn fps_of_codec(c: &Value, codec: u64) -> HashSet<String> {
    c["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["codec"].as_u64() == Some(codec))
        .map(|k| k["fp"].as_str().unwrap().to_string())
        .collect()
}

/// The index (every container's chunk table) holds exactly `expect` (each fingerprint once,
/// with the stored length the test computed): no chunk missing, none leaked.
fn check_index(conts: &[Cont], pool: &Pool, expect: &BTreeSet<String>, ctx: &str) {
    let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
    for c in conts {
        for (h, len) in &c.chunks {
            assert!(
                seen.insert(h, c.id).is_none(),
                "{ctx}: chunk {h} has two index rows"
            );
            if let Some(&want) = pool.stored.get(h).filter(|_| !c.deltas.contains(h)) {
                if c.zstd.contains(h) {
                    assert!(*len <= want, "{ctx}: stored length of {h}: {len} > {want}");
                } else {
                    assert_eq!(*len, want, "{ctx}: stored length of {h}");
                }
            }
        }
    }
    let stored: BTreeSet<String> = seen.keys().map(|h| h.to_string()).collect();
    let leaked: Vec<&String> = stored.difference(expect).collect();
    let lost: Vec<&String> = expect.difference(&stored).collect();
    assert!(
        leaked.is_empty() && lost.is_empty(),
        "{ctx}: stored chunks differ from those the live versions reference: {} stored that nothing references ({:?}), {} referenced but not stored ({:?})",
        leaked.len(),
        &leaked[..leaked.len().min(3)],
        lost.len(),
        &lost[..lost.len().min(3)]
    );
}

/// The newest active container (uploads append to it) and the one the writer has open are
/// never evacuated; the test cannot see which one is open, so it allows one besides the
/// highest active id.
fn exempt_active(conts: &[Cont]) -> Option<u64> {
    conts.iter().filter(|c| !c.archival).map(|c| c.id).max()
}

/// HiDeStore's layout once the mover is idle (docs/STORAGE.md, "Layout"): every chunk of a
/// source's newest version is in an active container; an archival container holds only
/// cold chunks, each of whose newest live referencing version is at most its B_ID (equal
/// to it when `exact` holds the container: nothing was deleted or re-referenced since the
/// mover grouped it); every container's B_ID bounds the versions referencing it
/// (invariant 4); active containers hold cold chunks only where the mover may not go.
fn check_layout(conts: &[Cont], model: &Model, exact: Option<&HashSet<u64>>, ctx: &str) {
    let hot = model.hot();
    let newest_ref = model.newest_ref();
    let skip = exempt_active(conts);
    let mut active_with_cold = Vec::new();
    for c in conts {
        let mut cold_here = 0;
        for (h, _) in &c.chunks {
            let Some(&g) = newest_ref.get(h) else {
                continue;
            };
            assert!(
                g <= c.newest,
                "{ctx}: container {} has B_ID {} but chunk {h} is referenced by live version {g} (invariant 4)",
                c.id,
                c.newest
            );
            if c.archival {
                assert!(
                    !hot.contains(h),
                    "{ctx}: archival container {} holds chunk {h}, which a source's newest version references",
                    c.id
                );
                if exact.is_some_and(|e| e.contains(&c.id)) {
                    assert_eq!(
                        g, c.newest,
                        "{ctx}: archival container {} (B_ID {}) holds chunk {h} of group {g}",
                        c.id, c.newest
                    );
                }
            } else if !hot.contains(h) {
                cold_here += 1;
            }
        }
        if cold_here > 0 && Some(c.id) != skip {
            active_with_cold.push((c.id, cold_here));
        }
    }
    assert!(
        active_with_cold.len() <= 1,
        "{ctx}: cold chunks left in active containers (id, count) {active_with_cold:?}; only the open one may keep them"
    );
}

/// Dead bytes left after a prune: each container's live bytes are at least
/// COMPACT_THRESHOLD of its data (else prune compacts it), except in the containers
/// appends go to. Also checks `stats.layout` against the tables. Returns the dead bytes.
fn check_dead(api: &Api, conts: &[Cont], ctx: &str) -> u64 {
    let skip = exempt_active(conts);
    let sparse: Vec<(u64, u64, u64)> = conts
        .iter()
        .filter(|c| (c.live() as f64) < COMPACT_THRESHOLD * c.data() as f64)
        .filter(|c| Some(c.id) != skip)
        .map(|c| (c.id, c.live(), c.data()))
        .collect();
    let sparse_archival = sparse
        .iter()
        .filter(|s| conts.iter().any(|c| c.id == s.0 && c.archival))
        .count();
    assert!(
        sparse.len() <= 1 && sparse_archival == 0,
        "{ctx}: containers (id, live, data bytes) under the compaction threshold after a prune: {sparse:?}"
    );
    let dead: u64 = conts.iter().map(|c| c.data() - c.live()).sum();
    let st = api.stats();
    let l = &st["layout"];
    let (act, arc): (Vec<&Cont>, Vec<&Cont>) = conts.iter().partition(|c| !c.archival);
    assert_eq!(l["dead_bytes"].as_u64(), Some(dead), "{ctx}: stats {st}");
    assert_eq!(
        l["active_containers"].as_u64(),
        Some(act.len() as u64),
        "{ctx}: stats {st}"
    );
    assert_eq!(
        l["archival_containers"].as_u64(),
        Some(arc.len() as u64),
        "{ctx}: stats {st}"
    );
    dead
}

fn check_cli(dir: &Path, ctx: &str) {
    let (code, out) = cli(dir, &["check", "default"]);
    assert_eq!(code, 0, "{ctx}: check failed:\n{out}");
    // the server is idle when this runs: nothing may be left half written
    assert!(!out.contains("warning:"), "{ctx}: check warns:\n{out}");
}

// ---------------------------------------------------------------- 1. the GC oracle

/// Makes versions of several sources that evolve as real folders do.
struct Histories {
    files: BTreeMap<String, Vec<File>>,
    committed: Vec<String>,
    next_file: u64,
    time: i64,
    lo: usize,
    hi: usize,
}

impl Histories {
    fn new(lo: usize, hi: usize) -> Histories {
        Histories {
            files: BTreeMap::new(),
            committed: Vec::new(),
            next_file: 0,
            time: 1_763_000_000_000,
            lo,
            hi,
        }
    }

    /// The next version of `source`: its files kept, edited (chunks replaced or inserted),
    /// dropped, plus new files that mix new chunks, chunks of other sources' current files
    /// and chunks of any earlier version (which may have gone cold).
    fn next(&mut self, rng: &mut Rng, pool: &mut Pool, source: &str) -> Ver {
        let (lo, hi) = (self.lo, self.hi);
        let mut files = self.files.get(source).cloned().unwrap_or_default();
        let others: Vec<String> = self
            .files
            .iter()
            .filter(|(s, _)| s.as_str() != source)
            .flat_map(|(_, fs)| fs.iter().flat_map(|f| f.recipe.iter().cloned()))
            .collect();
        let mut out = Vec::new();
        for f in files.drain(..) {
            match rng.below(10) {
                0 if out.len() + 1 < self.files[source].len() => {} // deleted
                1..=5 => {
                    let mut recipe = Vec::new();
                    for h in f.recipe {
                        match rng.below(10) {
                            0..=2 => recipe.push(pool.fresh(rng, lo, hi)),
                            3 => {
                                recipe.push(pool.fresh(rng, lo, hi));
                                recipe.push(h);
                            }
                            _ => recipe.push(h),
                        }
                    }
                    if rng.percent(30) {
                        recipe.push(pool.fresh(rng, lo, hi));
                    }
                    out.push(file(pool, f.path, recipe));
                }
                _ => out.push(f),
            }
        }
        while out.len() < 3 || rng.percent(45) {
            let n = rng.range(3, 14);
            let mut recipe: Vec<String> = Vec::new();
            for _ in 0..n {
                let k = rng.below(100);
                if k < 20 && !others.is_empty() {
                    recipe.push(others[rng.below(others.len())].clone());
                } else if k < 32 && !self.committed.is_empty() {
                    recipe.push(self.committed[rng.below(self.committed.len())].clone());
                } else if k < 36 && !recipe.is_empty() {
                    recipe.push(recipe[rng.below(recipe.len())].clone());
                } else {
                    recipe.push(pool.fresh(rng, lo, hi));
                }
            }
            self.next_file += 1;
            let path = format!("{source}/f{}.bin", self.next_file);
            out.push(file(pool, path, recipe));
        }
        self.time += 3_600_000;
        Ver {
            id: 0,
            source: source.to_string(),
            time: self.time,
            files: out,
        }
    }

    fn committed(&mut self, v: &Ver) {
        self.files.insert(v.source.clone(), v.files.clone());
        self.committed.extend(v.fps());
    }
}

/// State the oracle carries between steps.
struct Oracle<'a> {
    api: &'a Api,
    dir: &'a Path,
    pool: Pool,
    model: Model,
    hist: Histories,
    /// Containers whose B_ID a commit raised: the chunks left in them may belong to lower
    /// groups. Every other archival container's B_ID equals the group of each of its chunks
    /// until the first deletion.
    raised: HashSet<u64>,
    deleted_any: bool,
    reclaimed: u64,
}

impl Oracle<'_> {
    fn commit(&mut self, rng: &mut Rng, source: &str) {
        let mut v = self.hist.next(rng, &mut self.pool, source);
        // The commit raises the B_ID of every container holding a chunk it references.
        self.api.settle();
        let before = self.api.containers();
        let fps = v.fps();
        for c in &before {
            if c.chunks.iter().any(|(h, _)| fps.contains(h)) {
                self.raised.insert(c.id);
            }
        }
        v.id = self.api.backup(&self.pool.chunks, &v);
        if let Some(last) = self.model.live.keys().next_back() {
            assert!(v.id > *last, "version ids must grow");
        }
        self.hist.committed(&v);
        self.model.live.insert(v.id, v);
    }

    /// After the mover is idle: the layout, the index and the files.
    fn check(&self, ctx: &str) -> Vec<Cont> {
        self.api.settle();
        let conts = self.api.containers();
        let exact: HashSet<u64> = conts
            .iter()
            .filter(|c| c.archival && !self.raised.contains(&c.id))
            .map(|c| c.id)
            .collect();
        let exact = (!self.deleted_any).then_some(&exact);
        check_layout(&conts, &self.model, exact, ctx);
        check_index(&conts, &self.pool, &self.model.referenced(), ctx);
        check_disk(self.dir, &conts, ctx);
        conts
    }

    /// A forget (policy or list) that must remove exactly `remove`: its dry run names them
    /// and the bytes only they reference, the real one frees exactly those chunks.
    /// `body` is a forget request, or `{"delete": id}` for `DELETE versions/{id}`.
    fn forget(&mut self, body: Value, remove: BTreeSet<i64>, ctx: &str) {
        assert!(!remove.is_empty(), "{ctx}: the plan removes nothing");
        let conts = self.check(&format!("{ctx}, before"));
        let files_before = check_disk(self.dir, &conts, ctx);
        let after = self.model.without(&remove);
        // ICDA's rule: archival containers whose B_ID is below the smallest live version
        // once these are gone hold nothing a live version references, and go whole.
        let min_live = after.live.keys().next().copied().unwrap_or(i64::MAX);
        let expired: Vec<u64> = conts
            .iter()
            .filter(|c| c.archival && c.newest < min_live)
            .map(|c| c.id)
            .collect();
        let refs_before = self.model.referenced();
        let refs_after = after.referenced();
        let freed: Vec<&String> = refs_before.difference(&refs_after).collect();
        let freed_bytes = self.pool.stored_bytes(freed.iter().copied());
        let epoch0 = self.api.stats()["gc_epoch"].as_u64().expect("gc_epoch");

        let mut dry = match body["delete"].as_i64() {
            Some(id) => json!({ "versions": [id] }),
            None => body.clone(),
        };
        dry["dry_run"] = json!(true);
        let d = self.api.forget(&dry);
        let ids = |j: &Value| -> BTreeSet<i64> {
            j["remove"]
                .as_array()
                .unwrap_or_else(|| panic!("{ctx}: no remove list in {j}"))
                .iter()
                .map(|v| v["id"].as_i64().unwrap())
                .collect()
        };
        assert_eq!(ids(&d), remove, "{ctx}: dry run selection (server, model)");
        assert_eq!(
            d["freed_bytes"].as_u64(),
            Some(freed_bytes),
            "{ctx}: dry run freed_bytes: expected the stored bytes of the {} chunks only removed versions reference; answer {d}",
            freed.len()
        );
        assert_eq!(
            d["freed_chunks"].as_u64(),
            Some(freed.len() as u64),
            "{ctx}: dry run freed_chunks"
        );
        let kept: BTreeSet<i64> = d["keep"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["id"].as_i64().unwrap())
            .collect();
        assert!(kept.is_disjoint(&remove), "{ctx}: kept and removed: {d}");
        assert_eq!(
            self.api.version_ids(),
            self.model.live.keys().copied().collect(),
            "{ctx}: the dry run removed versions"
        );

        let r = if body["delete"].is_i64() {
            // DELETE versions/{id}: a forget of one version, answered in its own shape
            let id = body["delete"].as_i64().unwrap();
            let r = self.api.ok("DELETE", &format!("/versions/{id}"), None);
            assert_eq!(r["deleted"], id, "{ctx}: {r}");
            r
        } else {
            let mut body = body;
            body["dry_run"] = json!(false);
            let r = self.api.forget(&body);
            assert_eq!(ids(&r), remove, "{ctx}: forget selection");
            r
        };
        self.model = after;
        self.deleted_any = true;
        // the forget pruned already: a prune right after it finds nothing left to do
        let p = self.api.prune(false);
        assert!(
            p["chunks_deleted"] == 0 && p["containers_deleted"] == 0 && p["reclaimed_bytes"] == 0,
            "{ctx}: a prune after the forget still found work: {p}"
        );
        let conts = self.check(&format!("{ctx}, after"));
        let files_after = check_disk(self.dir, &conts, ctx);
        let left: Vec<u64> = conts
            .iter()
            .map(|c| c.id)
            .filter(|id| expired.contains(id))
            .collect();
        assert!(
            left.is_empty(),
            "{ctx}: archival containers {left:?} have a B_ID below the oldest live version {min_live} and survived"
        );
        if !expired.is_empty() && r["prune"].is_object() {
            assert!(
                r["prune"]["containers_icda"].as_u64() >= Some(1),
                "{ctx}: archival containers {expired:?} expired, but ICDA deleted none: {}",
                r["prune"]
            );
        }
        let reclaimed = r["reclaimed_bytes"].as_i64().expect("reclaimed_bytes");
        assert_eq!(
            files_before as i64 - files_after as i64,
            reclaimed,
            "{ctx}: the container files shrank by a different amount than reclaimed_bytes says ({r})"
        );
        self.reclaimed += reclaimed as u64;
        eprintln!(
            "gc oracle, {ctx}: removed {remove:?}, {} chunks ({freed_bytes} bytes) freed, {} archival containers expired, {reclaimed} bytes reclaimed, prune {}",
            freed.len(),
            expired.len(),
            r["prune"]
        );
        check_dead(self.api, &conts, ctx);
        let st = self.api.stats();
        assert_eq!(
            st["container_bytes"].as_u64(),
            Some(files_after),
            "{ctx}: {st}"
        );
        assert_eq!(
            st["reclaimed_bytes"].as_u64(),
            Some(self.reclaimed),
            "{ctx}: {st}"
        );
        let epoch = st["gc_epoch"].as_u64().unwrap();
        if !freed.is_empty() {
            assert!(
                epoch > epoch0,
                "{ctx}: chunks deleted, gc_epoch stayed {epoch}"
            );
        }
        let tok = self.api.ok("GET", "/token", None);
        assert_eq!(tok["gc_epoch"].as_u64(), Some(epoch), "{ctx}: token {tok}");
        self.api
            .verify_versions(&self.pool.chunks, &self.model, ctx);
    }

    /// A random version of `source` that is neither its oldest nor its newest, if any.
    fn middle(&self, rng: &mut Rng, source: &str) -> Option<i64> {
        let ids: Vec<i64> = self
            .model
            .live
            .values()
            .filter(|v| v.source == source)
            .map(|v| v.id)
            .collect();
        (ids.len() >= 3).then(|| ids[1 + rng.below(ids.len() - 2)])
    }

    /// Random versions that are no source's newest.
    fn some_old(&self, rng: &mut Rng, n: usize) -> BTreeSet<i64> {
        let newest: HashSet<i64> = self.model.newest().values().copied().collect();
        let mut old: Vec<i64> = self
            .model
            .live
            .keys()
            .copied()
            .filter(|id| !newest.contains(id))
            .collect();
        let mut out = BTreeSet::new();
        while out.len() < n && !old.is_empty() {
            out.insert(old.swap_remove(rng.below(old.len())));
        }
        out
    }
}

/// Small chunks (tiny files, delta chunks) fill a container's 2 048-entry table long before
/// its 4 MiB of data. Such containers are as full as a merge can make them: counted as sparse,
/// compaction would merge them into as many new ones on every round and the mover would never
/// settle (a prune, which waits for it, would not answer).
#[test]
fn containers_full_of_small_chunks_settle() {
    let dir = TempDir::new("small-chunks");
    let s = Server::start_with(&dir.0, &engine_env(), None);
    let api = Api::of(&s);
    let mut pool = Pool::new(0x5a11);
    let mut rng = Rng(7);
    let files: Vec<File> = (0..3)
        .map(|i| {
            let recipe = (0..2000).map(|_| pool.fresh(&mut rng, 64, 512)).collect();
            file(&pool, format!("Small/f{i}"), recipe)
        })
        .collect();
    let v = Ver {
        id: 0,
        source: "Small".into(),
        time: 1,
        files,
    };
    let fps: Vec<String> = v.fps().into_iter().collect();
    api.upload(&pool.chunks, &fps);
    api.commit(&v.manifest()).expect("commit");
    api.settle();
    let first = api.containers();
    let full = first.iter().filter(|c| c.chunks.len() >= 2048).count();
    assert!(
        full >= 2,
        "the test needs several containers with full tables: {:?}",
        first.iter().map(|c| c.chunks.len()).collect::<Vec<_>>()
    );
    // Settled means settled: another wait moves nothing.
    api.settle();
    let ids = |c: &[Cont]| c.iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(ids(&first), ids(&api.containers()));
    check_index(&first, &pool, &v.fps(), "small chunks");
}

#[test]
fn gc_matches_independent_reachability() {
    let t0 = Instant::now();
    match std::env::var("DITTO_STORAGE_SEED") {
        Ok(_) => gc_oracle(seed(0)),
        Err(_) => {
            for s in [0x0D17_7000_0001, 0x0D17_7000_0002, 0x0D17_7000_0003] {
                gc_oracle(s);
            }
        }
    }
    eprintln!("gc oracle: {:.1}s", t0.elapsed().as_secs_f64());
}

fn gc_oracle(seed: u64) {
    eprintln!("gc oracle: seed {seed:#x} (DITTO_STORAGE_SEED={seed:#x} replays it)");
    let dir = TempDir::new("gc-oracle");
    let s = Server::start_with(&dir.0, &engine_env(), None);
    let api = Api::of(&s);
    let mut rng = Rng(seed);
    let mut o = Oracle {
        api: &api,
        dir: &dir.0,
        pool: Pool::new(seed),
        model: Model::default(),
        // chunks of 4..320 KiB: a dozen versions fill several 4 MiB containers
        hist: Histories::new(4 << 10, 320 << 10),
        raised: HashSet::new(),
        deleted_any: false,
        reclaimed: 0,
    };
    let sources = ["Photos", "Documents", "Code"];
    // every source starts, then random ones go on; the first source gets the most
    for src in sources {
        o.commit(&mut rng, src);
    }
    o.check("3 versions");
    for i in 3..12 {
        let src = if rng.percent(45) {
            sources[0]
        } else {
            sources[1 + rng.below(2)]
        };
        o.commit(&mut rng, src);
        o.check(&format!("{} versions", i + 1));
    }
    let conts = api.containers();
    let archival = conts.iter().filter(|c| c.archival).count();
    let total: u64 = conts.iter().map(Cont::data).sum();
    eprintln!(
        "gc oracle: {} versions, {} chunks, {} containers ({archival} archival), {total} data bytes",
        o.model.live.len(),
        o.pool.chunks.len(),
        conts.len(),
    );
    assert!(
        total > 3 * (4 << 20) && archival >= 2,
        "the history must fill several containers and give the mover cold chunks"
    );

    // 1. keep the last 2 of the busiest source (oldest versions first: ICDA's case)
    let src0 = *sources
        .iter()
        .max_by_key(|s| o.model.live.values().filter(|v| v.source == **s).count())
        .unwrap();
    let remove = o.model.keep_last(2, Some(src0));
    o.forget(
        json!({ "policy": { "keep_last": 2 }, "source": src0 }),
        remove,
        &format!("keep_last 2 of {src0}"),
    );
    // 2. a middle version of another source (mark and sweep, compaction), by DELETE
    let mid = sources
        .iter()
        .filter(|s| **s != src0)
        .find_map(|s| o.middle(&mut rng, s))
        .or_else(|| o.some_old(&mut rng, 1).into_iter().next())
        .expect("a version that is not a source's newest");
    o.forget(
        json!({ "delete": mid }),
        BTreeSet::from([mid]),
        &format!("DELETE version {mid}"),
    );
    // 3. more backups, then an explicit list of random old versions
    for src in [sources[1], sources[2], sources[0], sources[1]] {
        o.commit(&mut rng, src);
    }
    o.check("after more backups");
    let list = o.some_old(&mut rng, 3);
    o.forget(
        json!({ "versions": list }),
        list.clone(),
        &format!("versions {list:?}"),
    );
    // 4. keep the newest version of every source
    let remove = o.model.keep_last(1, None);
    if !remove.is_empty() {
        o.forget(
            json!({ "policy": { "keep_last": 1 } }),
            remove,
            "keep_last 1",
        );
    }
    assert_eq!(o.model.live.len(), 3);
    check_cli(&dir.0, "gc oracle, end");
    eprintln!("gc oracle: {} bytes reclaimed", o.reclaimed);
}

// ---------------------------------------------------------------- 2. backups vs expiry

/// What the client threads and the expiry thread share.
struct Shared {
    chunks: HashMap<String, TestChunk>,
    committed: BTreeMap<i64, Ver>,
    /// Uploaded and never committed, with when the upload was acknowledged.
    abandoned: Vec<(String, Instant)>,
    removed: BTreeSet<i64>,
    refused: usize,
}

fn client(api: Api, shared: Arc<Mutex<Shared>>, k: u64, versions: usize) {
    let mut rng = Rng(0xC11E_0000 + k);
    let mut pool = Pool::new(0x5000 + k);
    let source = format!("machine-{k}");
    let mut files: Vec<File> = Vec::new();
    for i in 0..versions {
        // chunks of other sources' oldest live versions: the next ones to expire
        let others: Vec<String> = {
            let sh = shared.lock().unwrap();
            let others: Vec<String> = sh
                .committed
                .values()
                .filter(|v| v.source != source && !sh.removed.contains(&v.id))
                .take(3)
                .flat_map(|v| v.fps())
                .collect();
            for h in &others {
                pool.chunks
                    .entry(h.clone())
                    .or_insert_with(|| sh.chunks[h].clone());
            }
            others
        };
        let mut next = Vec::new();
        for f in files.drain(..) {
            let recipe: Vec<String> = f
                .recipe
                .into_iter()
                .map(|h| {
                    if rng.percent(30) {
                        pool.fresh(&mut rng, 2 << 10, 48 << 10)
                    } else {
                        h
                    }
                })
                .collect();
            next.push(file(&pool, f.path, recipe));
        }
        let n = rng.range(6, 14);
        let recipe: Vec<String> = (0..n)
            .map(|_| {
                if !others.is_empty() && rng.percent(40) {
                    others[rng.below(others.len())].clone()
                } else {
                    pool.fresh(&mut rng, 2 << 10, 48 << 10)
                }
            })
            .collect();
        next.push(file(&pool, format!("{source}/v{i}.dat"), recipe));
        files = next.clone();
        let mut v = Ver {
            id: 0,
            source: source.clone(),
            time: 1_763_000_000_000 + i as i64 * 1000,
            files: next,
        };
        let fps: Vec<String> = v.fps().into_iter().collect();
        let miss = api.missing(&fps);
        api.upload(&pool.chunks, &miss);
        // the window in which a prune may delete chunks this backup was told are stored
        std::thread::sleep(Duration::from_millis(rng.range(0, 120) as u64));
        let mut tries = 0;
        v.id = loop {
            match api.commit(&v.manifest()) {
                Ok(id) => break id,
                Err(missing) => {
                    tries += 1;
                    assert!(
                        tries <= 5,
                        "{source}: commit still refused after 5 re-uploads: {missing:?}"
                    );
                    assert!(
                        !missing.is_empty() && missing.iter().all(|h| fps.contains(h)),
                        "{source}: 409 names chunks the version does not reference: {missing:?}"
                    );
                    shared.lock().unwrap().refused += 1;
                    // what the page does: read those again and upload exactly them
                    api.upload(&pool.chunks, &missing);
                }
            }
        };
        let mut sh = shared.lock().unwrap();
        for h in &fps {
            sh.chunks
                .entry(h.clone())
                .or_insert_with(|| pool.chunks[h].clone());
        }
        sh.committed.insert(v.id, v);
        drop(sh);
        if rng.percent(40) {
            // an abandoned backup: uploaded, never committed
            let hs: Vec<String> = (0..3)
                .map(|_| pool.fresh(&mut rng, 1 << 10, 16 << 10))
                .collect();
            api.upload(&pool.chunks, &hs);
            let at = Instant::now();
            let mut sh = shared.lock().unwrap();
            for h in hs {
                sh.abandoned.push((h.clone(), at));
                sh.chunks.insert(h.clone(), pool.chunks[&h].clone());
            }
        }
    }
}

/// Commits a version that references the chunks of a version being forgotten at that very
/// moment (whose prune moves, expires and sweeps them), `rounds` times with varying delays:
/// whatever the interleaving, the commit either keeps those chunks alive or is refused
/// with 409 naming them, and then succeeds once they are uploaded again.
fn reviver(api: Api, shared: Arc<Mutex<Shared>>, rounds: usize) {
    let mut rng = Rng(0x04E7_17E5);
    let mut pool = Pool::new(0x04E7_17E5);
    for i in 0..rounds {
        let chunks: Vec<String> = (0..8)
            .map(|_| pool.fresh(&mut rng, 16 << 10, 96 << 10))
            .collect();
        let victim = Ver {
            id: 0,
            source: format!("victim-{i}"),
            time: 1_763_000_000_000 + i as i64,
            files: vec![file(&pool, format!("victim-{i}/f"), chunks.clone())],
        };
        let vid = api.backup(&pool.chunks, &victim);
        let forget = {
            let api = api.clone();
            std::thread::spawn(move || api.forget(&json!({ "versions": [vid] })))
        };
        std::thread::sleep(Duration::from_micros(rng.range(0, 15_000) as u64));
        let mut recipe = chunks.clone();
        recipe.reverse();
        let mut v = Ver {
            id: 0,
            source: format!("revive-{i}"),
            time: 1_763_000_000_000 + i as i64,
            files: vec![file(&pool, format!("revive-{i}/f"), recipe)],
        };
        let mut tries = 0;
        v.id = loop {
            match api.commit(&v.manifest()) {
                Ok(id) => break id,
                Err(missing) => {
                    tries += 1;
                    assert!(tries <= 3, "revive-{i}: still refused: {missing:?}");
                    assert!(
                        missing.iter().all(|h| chunks.contains(h)),
                        "revive-{i}: 409 names chunks the version does not reference"
                    );
                    shared.lock().unwrap().refused += 1;
                    api.upload(&pool.chunks, &missing);
                }
            }
        };
        let r = forget.join().expect("forget thread");
        let mut sh = shared.lock().unwrap();
        match r["remove"].as_array().map(Vec::len) {
            Some(1) => {
                sh.removed.insert(vid);
            }
            // the expiry thread cannot have removed it (one version per source), so the
            // explicit forget must have
            _ => panic!("forget of victim {vid}: {r}"),
        }
        for h in &chunks {
            sh.chunks.insert(h.clone(), pool.chunks[h].clone());
        }
        sh.committed.insert(vid, Ver { id: vid, ..victim });
        sh.committed.insert(v.id, v);
    }
}

#[test]
fn backups_survive_concurrent_expiry() {
    // With the layout, expired chunks mostly leave by the mover and ICDA; without it, every
    // prune marks and sweeps: each has its own window between deciding and deleting.
    expiry_race(true);
    expiry_race(false);
}

fn expiry_race(layout: bool) {
    let t0 = Instant::now();
    let dir = TempDir::new("expiry-race");
    let mut env = engine_env();
    env.push(("DITTO_GC_GRACE_S", "2"));
    if !layout {
        env.push(("DITTO_LAYOUT", "off"));
    }
    let s = Server::start_with(&dir.0, &env, None);
    let api = Api::of(&s);
    let mut pool = Pool::new(0xE0);

    // A backup told a chunk is stored, whose only version is forgotten before it commits:
    // the commit is refused naming it, and succeeds once it is uploaded again.
    let c = pool.make(20_000, true);
    let d = pool.make(30_000, false);
    let v1 = Ver {
        id: 0,
        source: "once".into(),
        time: 1,
        files: vec![file(&pool, "once/a".into(), vec![c.clone(), d.clone()])],
    };
    let id1 = api.backup(&pool.chunks, &v1);
    assert!(api.missing(&[c.clone(), d.clone()]).is_empty());
    let r = api.forget(&json!({ "versions": [id1] }));
    assert_eq!(r["remove"][0]["id"], id1, "{r}");
    let late = Ver {
        id: 0,
        source: "late".into(),
        time: 2,
        files: vec![file(&pool, "late/b".into(), vec![d.clone(), c.clone()])],
    };
    let missing = api
        .commit(&late.manifest())
        .expect_err("a version referencing swept chunks must be refused");
    assert_eq!(missing, vec![d.clone(), c.clone()]);
    api.upload(&pool.chunks, &missing);
    let late_id = api
        .commit(&late.manifest())
        .expect("commit after re-upload");

    // Pending chunks younger than the grace period survive a prune.
    let young = pool.make(10_000, false);
    api.upload(&pool.chunks, std::slice::from_ref(&young));
    let young_at = Instant::now();
    api.prune(false);
    if young_at.elapsed() < Duration::from_millis(1500) {
        assert!(
            api.missing(std::slice::from_ref(&young)).is_empty(),
            "a pending chunk younger than DITTO_GC_GRACE_S was swept"
        );
    }

    let shared = Arc::new(Mutex::new(Shared {
        chunks: pool.chunks.clone(),
        committed: BTreeMap::new(),
        abandoned: vec![(young, young_at)],
        removed: BTreeSet::new(),
        refused: 0,
    }));
    let done = Arc::new(AtomicBool::new(false));
    let expiry = {
        let (api, shared, done) = (api.clone(), shared.clone(), done.clone());
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !done.load(Ordering::Relaxed) {
                let r = api.forget(&json!({ "policy": { "keep_last": 2 } }));
                let ids: Vec<i64> = r["remove"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v["id"].as_i64().unwrap())
                    .collect();
                shared.lock().unwrap().removed.extend(ids);
                if rounds % 3 == 2 {
                    api.prune(false);
                }
                rounds += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            rounds
        })
    };
    let mut clients: Vec<_> = (0..3u64)
        .map(|k| {
            let (api, shared) = (api.clone(), shared.clone());
            std::thread::spawn(move || client(api, shared, k, 15))
        })
        .collect();
    clients.push({
        let (api, shared) = (api.clone(), shared.clone());
        std::thread::spawn(move || reviver(api, shared, 40))
    });
    let mut failed = None;
    for c in clients {
        if let Err(e) = c.join() {
            failed.get_or_insert(e);
        }
    }
    done.store(true, Ordering::Relaxed);
    let rounds = expiry.join();
    if let Some(e) = failed {
        std::panic::resume_unwind(e);
    }
    let rounds = rounds.unwrap_or_else(|e| std::panic::resume_unwind(e));

    // One last expiry, then every version the model says is live must be there, whole.
    let r = api.forget(&json!({ "policy": { "keep_last": 2 } }));
    let sh = shared.lock().unwrap();
    let mut removed = sh.removed.clone();
    removed.extend(
        r["remove"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["id"].as_i64().unwrap()),
    );
    let mut model = Model::default();
    model.live.insert(
        late_id,
        Ver {
            id: late_id,
            ..late.clone()
        },
    );
    assert!(
        !removed.contains(&late_id),
        "forget removed the only version of source late"
    );
    for (id, v) in &sh.committed {
        if !removed.contains(id) {
            model.live.insert(*id, v.clone());
        }
    }
    for (src, newest) in model.newest() {
        let n = model.live.values().filter(|v| v.source == src).count();
        assert!(n <= 2, "{src}: {n} versions left after keep_last 2");
        let all: Vec<i64> = sh
            .committed
            .values()
            .filter(|v| v.source == src)
            .map(|v| v.id)
            .collect();
        assert!(
            all.last().is_none_or(|l| *l == newest),
            "{src}: the newest version was forgotten"
        );
    }
    api.settle();
    check_cli(&dir.0, "after the race");
    api.verify_versions(&sh.chunks, &model, "after the race");

    // Abandoned uploads are swept once older than the grace period, and nothing else is
    // left: the index holds exactly what the live versions reference.
    let last = sh.abandoned.iter().map(|a| a.1).max().unwrap();
    let wait = Duration::from_millis(2600).saturating_sub(last.elapsed());
    std::thread::sleep(wait);
    let p = api.prune(false);
    let abandoned: Vec<String> = sh.abandoned.iter().map(|a| a.0.clone()).collect();
    let still: Vec<String> = {
        let miss: HashSet<String> = api.missing(&abandoned).into_iter().collect();
        abandoned
            .iter()
            .filter(|h| !miss.contains(*h))
            .cloned()
            .collect()
    };
    assert!(
        still.is_empty(),
        "{} abandoned chunks older than the grace period survived a prune ({p}): {:?}",
        still.len(),
        &still[..still.len().min(3)]
    );
    api.settle();
    let conts = api.containers();
    let ctx = "after the last prune";
    check_index(&conts, &Pool::new(0), &model.referenced(), ctx);
    check_disk(&dir.0, &conts, ctx);
    if layout {
        check_layout(&conts, &model, None, ctx);
    }
    check_dead(&api, &conts, ctx);
    check_cli(&dir.0, ctx);
    api.verify_versions(&sh.chunks, &model, ctx);
    eprintln!(
        "expiry race (layout {}): {} versions committed, {} forgotten, {} commits refused and retried, {rounds} expiry rounds, {} abandoned chunks swept, {:.1}s",
        if layout { "on" } else { "off" },
        sh.committed.len() + 2,
        removed.len() + 1,
        sh.refused,
        abandoned.len(),
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------- 3. crash points

/// Starts the server; `Err(status)` if it exits before printing its startup line.
fn spawn(dir: &Path, env: &[(&str, &str)]) -> Result<Server, ExitStatus> {
    let mut child = server_cmd(dir)
        .arg("serve")
        .env("PORT", "0")
        .env("WEB_DIR", dir.join("no-web"))
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn ditto-server");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let _ = out.read_line(&mut line);
    let line = line.trim_end().to_string();
    let Some(rest) = line.strip_prefix("Ditto is running. Open ") else {
        return Err(child.wait().unwrap());
    };
    let (base, token) = rest.split_once("/#token=").expect("link with token");
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = out.read_to_end(&mut sink);
    });
    Ok(Server {
        base: base.to_string(),
        token: token.to_string(),
        line,
        child,
        stderr: Default::default(),
    })
}

fn wait_exit(s: &mut Server, timeout: Duration) -> Option<ExitStatus> {
    let t0 = Instant::now();
    loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            return Some(st);
        }
        if t0.elapsed() > timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One history for every point: v1 = A + B, v2 = B + C, v3 = D, one source. A and C are
/// several containers of incompressible chunks, B a few small ones. After the mover:
/// A is archival group v1, B and C archival group v2, D active. Forgetting v1 (oldest)
/// expires group v1 by ICDA; forgetting v2 (middle) sweeps C and leaves B in mostly dead
/// archival containers, which prune compacts.
struct CrashHistory {
    pool: Pool,
    versions: Vec<Ver>,
}

fn crash_history() -> CrashHistory {
    let mut pool = Pool::new(0xC4A5);
    let big = |pool: &mut Pool, n: usize| -> Vec<String> {
        (0..n).map(|_| pool.make(200 << 10, false)).collect()
    };
    let a = big(&mut pool, 22);
    let b = vec![
        pool.make(40_000, true),
        pool.make(30_000, false),
        pool.make(50_000, true),
    ];
    let mut c = big(&mut pool, 23);
    c.push(pool.make(60_000, true));
    let mut d = big(&mut pool, 5);
    d.push(pool.make(20_000, true));
    let ver = |pool: &Pool, n: i64, files: Vec<(&str, Vec<String>)>| Ver {
        id: 0,
        source: "Disk".into(),
        time: 1_763_000_000_000 + n * 86_400_000,
        files: files
            .into_iter()
            .map(|(p, r)| file(pool, format!("Disk/{p}"), r))
            .collect(),
    };
    let versions = vec![
        ver(&pool, 1, vec![("a", a), ("b", b.clone())]),
        ver(&pool, 2, vec![("b", b), ("c", c)]),
        ver(&pool, 3, vec![("d", d)]),
    ];
    CrashHistory { pool, versions }
}

/// A history the delta pass finds work in, whichever version it runs after: each version
/// holds text chunks and edited copies of them (a base and its delta in the same version,
/// so the test's model classes a base as the server does). v2 keeps v1's first file.
fn delta_crash_history() -> CrashHistory {
    let mut pool = Pool::new(0xDE17A);
    let pairs = |pool: &mut Pool, seed: u64| -> Vec<String> {
        let mut out = Vec::new();
        for i in 0..8 {
            let raw = text_bytes(seed + i, 12_000 + i as usize * 1_500);
            let mut copy = raw.clone();
            for k in 0..4 {
                let at = (k * 2_741 + i as usize * 97) % copy.len();
                copy[at] = copy[at].wrapping_add(1);
            }
            out.push(pool.add(TestChunk::new(raw, true)));
            out.push(pool.add(TestChunk::new(copy, true)));
        }
        out
    };
    let p1 = pairs(&mut pool, 0xD100);
    let p2 = pairs(&mut pool, 0xD200);
    let p3 = pairs(&mut pool, 0xD300);
    let ver = |pool: &Pool, n: i64, files: Vec<(&str, Vec<String>)>| Ver {
        id: 0,
        source: "Text".into(),
        time: 1_763_000_000_000 + n * 86_400_000,
        files: files
            .into_iter()
            .map(|(p, r)| file(pool, format!("Text/{p}"), r))
            .collect(),
    };
    let versions = vec![
        ver(&pool, 1, vec![("p1", p1.clone())]),
        ver(&pool, 2, vec![("p1", p1), ("p2", p2)]),
        ver(&pool, 3, vec![("p3", p3)]),
    ];
    CrashHistory { pool, versions }
}

#[derive(Clone, Copy, Debug)]
enum Trigger {
    /// The mover (at startup, or the prune that waits for it).
    Mover,
    /// `forget` of these versions (indices into the history).
    Forget(&'static [usize]),
    /// The history's backups with the point armed: the mover a commit starts reaches it.
    Backup,
}

/// A backup that stops at the first request the server does not answer (it crashed).
fn try_backup(api: &Api, chunks: &HashMap<String, TestChunk>, v: &Ver) -> Result<i64, String> {
    let fps: Vec<String> = v.fps().into_iter().collect();
    let r = api.try_call(
        "POST",
        "/chunks/missing",
        Some(&json!({ "fingerprints": fps })),
    )?;
    assert_eq!(r.status, 200, "chunks/missing");
    let miss: Vec<String> = serde_json::from_value(r.json()["missing"].clone()).unwrap();
    for part in miss.chunks(16) {
        let batch: Vec<TestChunk> = part.iter().map(|h| chunks[h].clone()).collect();
        let r = try_request(
            &api.agent,
            "POST",
            &format!("{}/api/v1/repos/default/bundles", api.base),
            Some(&api.token),
            &[],
            Some(&bundle(&batch)),
        )?;
        assert_eq!(r.status, 200, "bundle refused");
    }
    let r = api.try_call("POST", "/versions", Some(&v.manifest()))?;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    Ok(r.json()["id"].as_i64().unwrap())
}

fn crash_at(h: &CrashHistory, point: &str, trigger: Trigger) {
    let ctx = format!("crash at {point} ({trigger:?})");
    let delta_point = point.starts_with("delta:");
    let dir = TempDir::new("crashpoint");
    // 1. the history; without the mover when the mover is what crashes
    // The engine's settings, the delta pass on for the pass's own points; the restart too.
    let mut engine = engine_env();
    if delta_point {
        engine.retain(|e| *e != NO_PASS[0]);
    }
    let mut env = engine.clone();
    if matches!(trigger, Trigger::Mover) {
        env.push(("DITTO_LAYOUT", "off"));
    }
    let mut model = Model::default();
    if !matches!(trigger, Trigger::Backup) {
        let mut s = spawn(&dir.0, &env).unwrap_or_else(|st| panic!("{ctx}: server exited {st}"));
        let api = Api::of(&s);
        for v in &h.versions {
            let id = api.backup(&h.pool.chunks, v);
            model.live.insert(id, Ver { id, ..v.clone() });
        }
        api.settle();
        let conts = api.containers();
        if matches!(trigger, Trigger::Forget(_)) {
            let archival = conts.iter().filter(|c| c.archival).count();
            assert!(
                archival >= 2,
                "{ctx}: the mover made {archival} archival containers of the history, so expiry has no archival groups to work on"
            );
            check_layout(&conts, &model, None, &ctx);
        }
        assert_eq!(
            s.stop(Duration::from_secs(10)).map(|st| st.success()),
            Some(true),
            "{ctx}: clean stop"
        );
    }
    let ids: Vec<i64> = model.live.keys().copied().collect();
    let mut in_flight: Option<&Ver> = None;

    // 2. the crash
    env.retain(|e| e.0 != "DITTO_LAYOUT");
    env.push(("DITTO_TEST_CRASH_AT", point));
    let (status, removing) = match spawn(&dir.0, &env) {
        Err(st) => (st, BTreeSet::new()), // crashed while starting (the startup mover)
        Ok(mut s) => {
            let api = Api::of(&s);
            let removing: BTreeSet<i64> = match trigger {
                Trigger::Backup | Trigger::Mover => {
                    if matches!(trigger, Trigger::Backup) {
                        for v in &h.versions {
                            match try_backup(&api, &h.pool.chunks, v) {
                                Ok(id) => {
                                    model.live.insert(id, Ver { id, ..v.clone() });
                                }
                                Err(_) => {
                                    in_flight = Some(v);
                                    break;
                                }
                            }
                        }
                    }
                    if wait_exit(&mut s, Duration::from_secs(3)).is_none() {
                        let r = api.try_call("POST", "/prune", Some(&json!({ "dry_run": true })));
                        if let Ok(r) = r {
                            assert!(
                                wait_exit(&mut s, Duration::from_secs(5)).is_some(),
                                "{ctx}: never reached; prune answered {} {}",
                                r.status,
                                String::from_utf8_lossy(&r.body)
                            );
                        }
                    }
                    BTreeSet::new()
                }
                Trigger::Forget(which) => {
                    let rm: BTreeSet<i64> = which.iter().map(|&i| ids[i]).collect();
                    let r = api.try_call("POST", "/forget", Some(&json!({ "versions": rm })));
                    if let Ok(r) = r {
                        assert!(
                            wait_exit(&mut s, Duration::from_secs(5)).is_some(),
                            "{ctx}: never reached; forget {rm:?} answered {} {}",
                            r.status,
                            String::from_utf8_lossy(&r.body)
                        );
                    }
                    rm
                }
            };
            let st = wait_exit(&mut s, Duration::from_secs(20))
                .unwrap_or_else(|| panic!("{ctx}: the server did not exit"));
            (st, removing)
        }
    };
    assert!(
        status.signal().is_some(),
        "{ctx}: the server exited {status}, not by the crash point's abort"
    );

    // 3. restart: recovery, then everything that must hold
    let s = spawn(&dir.0, &engine).unwrap_or_else(|st| panic!("{ctx}: restart: {st}"));
    let api = Api::of(&s);
    let live = api.version_ids();
    let gone: BTreeSet<i64> = removing.difference(&live).copied().collect();
    assert!(
        gone.is_empty() || gone == removing,
        "{ctx}: forget of {removing:?} is half done: {gone:?} gone"
    );
    assert_eq!(
        gone, removing,
        "{ctx}: the forget was past deleting its versions"
    );
    model = model.without(&removing);
    // a commit whose answer the crash cut off is there whole or not at all
    let unknown: Vec<i64> = live
        .iter()
        .filter(|id| !model.live.contains_key(id) && !removing.contains(id))
        .copied()
        .collect();
    match (unknown.as_slice(), in_flight) {
        ([], _) => {}
        ([id], Some(v)) => {
            model.live.insert(
                *id,
                Ver {
                    id: *id,
                    ..v.clone()
                },
            );
        }
        _ => panic!("{ctx}: versions {unknown:?} appeared"),
    }
    api.settle();
    if delta_point {
        // docs/STORAGE.md: after `delta:copied` recovery deletes the new files and the pass
        // (at startup, over the versions after its record) does its work again; after
        // `delta:switched` the deltas are in place.
        let newest = *live.iter().next_back().expect("a version committed");
        let mut st = Value::Null;
        wait_until("the delta pass at startup", Duration::from_secs(60), || {
            st = api.stats();
            st["delta_pass"]["version"].as_i64() == Some(newest)
        });
        assert!(
            st["delta_chunks"].as_u64() > Some(0),
            "{ctx}: no delta chunks after the restart: {st}"
        );
        api.settle();
    }
    let conts = api.containers();
    if delta_point {
        assert!(
            conts.iter().any(|c| !c.deltas.is_empty()),
            "{ctx}: the containers list no delta chunk"
        );
    }
    check_disk(&dir.0, &conts, &format!("{ctx}, after recovery"));
    check_cli(&dir.0, &ctx);
    api.verify_versions(&h.pool.chunks, &model, &ctx);

    // 4. a prune leaves nothing leaked
    api.prune(false);
    api.settle();
    let conts = api.containers();
    let pctx = format!("{ctx}, after a prune");
    check_disk(&dir.0, &conts, &pctx);
    // The chunks the live versions name, and the bases their deltas need (frames and
    // dictionaries are bases no manifest names).
    let expect = with_bases(model.referenced(), &base_edges(&dir.0));
    check_index(&conts, &h.pool, &expect, &pctx);
    check_layout(&conts, &model, None, &pctx);
    let dead = check_dead(&api, &conts, &pctx);
    check_cli(&dir.0, &pctx);
    api.verify_versions(&h.pool.chunks, &model, &pctx);
    eprintln!(
        "{ctx}: exited {status}; {} versions live, {} containers, {dead} dead bytes after prune",
        model.live.len(),
        conts.len()
    );
}

#[test]
fn every_persistence_point_survives_a_crash() {
    let t0 = Instant::now();
    let h = crash_history();
    let plan: [(&str, Trigger); 9] = [
        ("move:copied", Trigger::Mover),
        ("move:switched", Trigger::Mover),
        ("move:copied", Trigger::Backup),
        ("move:switched", Trigger::Backup),
        ("forget:deleted", Trigger::Forget(&[0, 1])),
        ("icda:switched", Trigger::Forget(&[0])),
        ("sweep:switched", Trigger::Forget(&[1])),
        ("compact:copied", Trigger::Forget(&[1])),
        ("compact:switched", Trigger::Forget(&[1])),
    ];
    for (point, trigger) in plan {
        crash_at(&h, point, trigger);
    }
    // The delta pass runs after the mover a commit starts (and at startup).
    let d = delta_crash_history();
    for point in ["delta:copied", "delta:switched"] {
        crash_at(&d, point, Trigger::Backup);
    }
    eprintln!("crash points: {:.1}s", t0.elapsed().as_secs_f64());
}
