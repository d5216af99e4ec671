//! Throughput benchmarks for the search engine (ignored by default; they print numbers).
//!
//! Native, on a synthetic corpus and on a real dataset folder (typescript-10 unpacked, one
//! folder per version; `SEARCH_BENCH_DIR`, default `/tmp/search-ds/typescript`):
//!
//! ```text
//! CARGO_TARGET_DIR=target-search cargo test --release -p wasm-core --test search_bench \
//!     -- --ignored --nocapture --test-threads 1
//! ```
//!
//! Wasm (Node, simd128), synthetic corpus only (no file system in wasm32-unknown-unknown):
//!
//! ```text
//! CARGO_TARGET_DIR=target-search cargo test --release -p wasm-core \
//!     --target wasm32-unknown-unknown --test search_bench -- --include-ignored
//! ```

mod common;

use common::Rng;
use std::collections::HashMap;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use wasm_core::search::*;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test;

#[cfg(target_arch = "wasm32")]
mod clock {
    use wasm_bindgen::prelude::*;
    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(js_namespace = performance)]
        fn now() -> f64;
    }
    pub fn ms() -> f64 {
        now()
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod clock {
    use std::sync::OnceLock;
    use std::time::Instant;
    static T0: OnceLock<Instant> = OnceLock::new();
    pub fn ms() -> f64 {
        T0.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
    }
}

#[cfg(target_arch = "wasm32")]
macro_rules! say {
    ($($t:tt)*) => { wasm_bindgen_test::console_log!($($t)*) };
}
#[cfg(not(target_arch = "wasm32"))]
macro_rules! say {
    ($($t:tt)*) => { println!($($t)*) };
}

/// JavaScript-like text: identifiers drawn with a Zipf-like skew, punctuation, newlines.
fn synthetic_text(bytes: usize) -> Vec<u8> {
    let mut rng = Rng(42);
    let syll = [
        "get",
        "set",
        "type",
        "node",
        "check",
        "er",
        "ing",
        "Name",
        "Symbol",
        "decl",
        "ar",
        "at",
        "ion",
        "Flags",
        "source",
        "File",
        "emit",
        "resolve",
        "module",
        "x",
        "is",
        "Text",
        "range",
        "pos",
        "end",
        "kind",
        "id",
        "map",
        "List",
        "to",
        "from",
        "Signature",
    ];
    let vocab: Vec<String> = (0..5000)
        .map(|_| {
            let n = 1 + (rng.next() % 4) as usize;
            (0..n)
                .map(|_| syll[(rng.next() % syll.len() as u64) as usize])
                .collect()
        })
        .collect();
    let punct = [
        " ", " ", "(", ")", ";\n    ", ".", ", ", " = ", "{\n", "}\n", " === ",
    ];
    let mut out = Vec::with_capacity(bytes + 64);
    while out.len() < bytes {
        // Zipf-ish: index = floor(5000 * u^3).
        let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        let w = &vocab[((u * u * u) * vocab.len() as f64) as usize];
        out.extend_from_slice(w.as_bytes());
        out.extend_from_slice(punct[(rng.next() % punct.len() as u64) as usize].as_bytes());
    }
    out.truncate(bytes);
    out
}

/// `count` words (identifier characters, 4+ bytes) of middling frequency in `data`.
fn pick_keywords(data: &[u8], count: usize) -> Vec<Vec<u8>> {
    let mut freq: HashMap<&[u8], u32> = HashMap::new();
    for w in data.split(|b| !(b.is_ascii_alphanumeric() || *b == b'_')) {
        if w.len() >= 4 {
            *freq.entry(w).or_default() += 1;
        }
    }
    let mut v: Vec<(&[u8], u32)> = freq.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    // Skip the most common 2%, take evenly from the next 30%.
    let lo = v.len() / 50;
    let hi = (v.len() * 32 / 100).max(lo + count);
    let step = ((hi - lo) / count).max(1);
    (0..count).map(|i| v[lo + i * step].0.to_vec()).collect()
}

/// 8 KiB pieces of `data`, like the chunks the physical phase scans.
fn pieces(data: &[u8]) -> Vec<&[u8]> {
    data.chunks(8192).collect()
}

fn mbps(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / 1e3 / ms
}

/// Best of `reps` runs of `f`, in ms; `f` returns a checksum (match count).
fn best(reps: usize, mut f: impl FnMut() -> u64) -> (f64, u64) {
    let mut best = f64::MAX;
    let mut sum = 0;
    for _ in 0..reps {
        let t = clock::ms();
        sum = f();
        best = best.min(clock::ms() - t);
    }
    (best, sum)
}

/// Our automaton vs the `aho-corasick` crate, all overlapping matches, chunk by chunk.
fn compare_matchers(label: &str, chunks: &[&[u8]], kws: &[Vec<u8>]) {
    let bytes: usize = chunks.iter().map(|c| c.len()).sum();
    let ours = Automaton::new(kws).unwrap();
    let (t_ours, n_ours) = best(5, || {
        let mut n = 0u64;
        for c in chunks {
            ours.find_all(c, |_, _| n += 1);
        }
        n
    });
    let mut line = format!(
        "{label}: {} keywords, {:.1} MB: ours {:.0} MB/s ({} states, {} KiB)",
        kws.len(),
        bytes as f64 / 1e6,
        mbps(bytes, t_ours),
        ours.size().0,
        ours.size().1 >> 10
    );
    for (name, kind) in [
        ("crate-default", None),
        ("crate-dfa", Some(AhoCorasickKind::DFA)),
        ("crate-nfa", Some(AhoCorasickKind::ContiguousNFA)),
    ] {
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .kind(kind)
            .build(kws)
            .unwrap();
        let (t, n) = best(5, || {
            let mut n = 0u64;
            for c in chunks {
                n += ac.find_overlapping_iter(*c).count() as u64;
            }
            n
        });
        assert_eq!(n, n_ours, "{name} disagrees");
        line += &format!(", {name} {:.0} MB/s", mbps(bytes, t));
    }
    say!("{line}; {n_ours} matches");
    if kws.len() <= 8 {
        let words: Vec<_> = kws.iter().map(|k| String::from_utf8_lossy(k)).collect();
        say!("  keywords: {words:?}");
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
#[ignore]
fn bench_matchers_synthetic() {
    let data = synthetic_text(32_000_000);
    let chunks = pieces(&data);
    for k in [1, 8, 128] {
        let kws = pick_keywords(&data, k);
        compare_matchers("synthetic", &chunks, &kws);
    }
}

/// Unique chunks of the real dataset, written by the native benchmark for the Wasm one.
const DUMP_BIN: &str = "/tmp/search-bench-unique.bin";
const DUMP_LEN: &str = "/tmp/search-bench-unique.len";

#[cfg(target_arch = "wasm32")]
mod node_fs {
    use wasm_bindgen::prelude::*;
    #[wasm_bindgen(module = "fs")]
    extern "C" {
        #[wasm_bindgen(js_name = existsSync)]
        pub fn exists_sync(path: &str) -> bool;
        #[wasm_bindgen(js_name = readFileSync)]
        pub fn read_file_sync(path: &str) -> Vec<u8>;
    }
}

/// The real unique chunks in Wasm (run the native benchmark first to write them).
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen_test]
#[ignore]
fn bench_matchers_real_in_wasm() {
    if !node_fs::exists_sync(DUMP_BIN) {
        say!("{DUMP_BIN} missing: run the native benchmark first");
        return;
    }
    let blob = node_fs::read_file_sync(DUMP_BIN);
    let lens = node_fs::read_file_sync(DUMP_LEN);
    let mut chunks = Vec::new();
    let mut at = 0;
    for l in lens.chunks(4) {
        let l = u32::from_le_bytes(l.try_into().unwrap()) as usize;
        chunks.push(&blob[at..at + l]);
        at += l;
    }
    let n = chunks.len();
    let sample: Vec<u8> = chunks[n / 10 * 9..].concat();
    for k in [1, 8, 128] {
        let kws = pick_keywords(&sample, k);
        compare_matchers("wasm real unique chunks", &chunks, &kws);
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod real {
    use super::*;
    use std::path::{Path, PathBuf};
    use wasm_core::hash::{fingerprint, Fingerprint};

    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.is_file() {
                out.push(p);
            }
        }
    }

    /// The real dataset: every file chunked with FastCDC-2020 2K/8K/64K and deduplicated.
    #[test]
    #[ignore]
    fn bench_dedupsearch_real() {
        let dir = std::env::var("SEARCH_BENCH_DIR")
            .unwrap_or_else(|_| "/tmp/search-ds/typescript".into());
        let mut paths = Vec::new();
        walk(Path::new(&dir), &mut paths);
        let files: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
        let logical: usize = files.iter().map(|f| f.len()).sum();
        let mut unique: HashMap<Fingerprint, (usize, usize, usize)> = HashMap::new();
        let mut order: Vec<Fingerprint> = Vec::new();
        let mut recipes: Vec<(u64, Vec<ChunkRef>)> = Vec::new();
        let mut file_chunks: Vec<Vec<(usize, usize)>> = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let mut r = Vec::new();
            let mut fc = Vec::new();
            for c in fastcdc::v2020::FastCDC::new(f, 2048, 8192, 65536) {
                let fp = fingerprint(&f[c.offset..c.offset + c.length]);
                unique.entry(fp).or_insert_with(|| {
                    order.push(fp);
                    (i, c.offset, c.length)
                });
                r.push(ChunkRef::new(fp, c.length as u64));
                fc.push((c.offset, c.length));
            }
            recipes.push((i as u64, r));
            file_chunks.push(fc);
        }
        let chunk_bytes = |fp: &Fingerprint| {
            let (f, o, l) = unique[fp];
            &files[f][o..o + l]
        };
        let physical: usize = order.iter().map(|fp| chunk_bytes(fp).len()).sum();
        say!(
            "{dir}: {} files, logical {:.1} MB, {} unique chunks, physical {:.1} MB",
            files.len(),
            logical as f64 / 1e6,
            order.len(),
            physical as f64 / 1e6
        );
        // The unique chunks for the Wasm benchmark (which cannot chunk a folder itself).
        let mut blob = Vec::new();
        let mut lens = Vec::new();
        for fp in &order {
            blob.extend_from_slice(chunk_bytes(fp));
            lens.extend_from_slice(&(chunk_bytes(fp).len() as u32).to_le_bytes());
        }
        std::fs::write(DUMP_BIN, &blob).unwrap();
        std::fs::write(DUMP_LEN, &lens).unwrap();
        // All the text, for keyword choice: the newest version's files are enough.
        let sample: Vec<u8> = files[files.len() / 10 * 9..].concat();
        let uchunks: Vec<&[u8]> = order.iter().map(chunk_bytes).collect();
        for k in [1, 8, 128] {
            let kws = pick_keywords(&sample, k);
            compare_matchers("real unique chunks", &uchunks, &kws);
            let dict = Dictionary::new(kws.clone(), 2048).unwrap();

            let mut scanner = wasm_core::search::PhysicalScanner::new(&dict);
            let (t_scan, n_scan) = best(3, || {
                let mut n = 0u64;
                for fp in &order {
                    n += scanner.scan_chunk(fp, chunk_bytes(fp)).chunk.is_some() as u64;
                }
                n
            });
            say!("  scan_chunk only: {t_scan:.1} ms ({n_scan} chunk-results)");
            let mut tiny = MemTinyStore::new();
            let t0 = clock::ms();
            let mut phys = PhysicalPhase::new(&dict);
            for fp in &order {
                phys.add_chunk(fp, chunk_bytes(fp), &mut tiny);
            }
            let (db, _) = phys.finish();
            let t1 = clock::ms();
            let mut hits = Vec::new();
            let mut lp = LogicalPhase::new(&dict, Mode::AllMatches);
            for (id, r) in &recipes {
                lp.search_file(&db, *id, r, &mut tiny, &mut hits);
            }
            let t2 = clock::ms();
            let st = db.stats();

            let mut naive_hits = Vec::new();
            let t3 = clock::ms();
            let mut naive = NaiveSearch::new(&dict, Mode::AllMatches);
            for (i, f) in files.iter().enumerate() {
                naive.search_file(
                    i as u64,
                    file_chunks[i].iter().map(|&(o, l)| &f[o..o + l]),
                    &mut naive_hits,
                );
            }
            let t4 = clock::ms();
            hits.sort_unstable();
            naive_hits.sort_unstable();
            assert_eq!(hits, naive_hits, "DedupSearch != naive on real data");
            say!(
                "  {k} kw: physical {:.1} ms + logical {:.1} ms = {:.1} ms; naive {:.1} ms; \
                 {} matches; records: {} chunk-result ({} B), {} location-list ({} long), \
                 {} tiny, {} tiny lookups",
                t1 - t0,
                t2 - t1,
                t2 - t0,
                t4 - t3,
                hits.len(),
                st.chunk_results,
                st.chunk_result_bytes,
                st.location_lists,
                st.long_location_lists,
                tiny.len(),
                lp.stats.tiny_lookups,
            );
        }
    }
}
