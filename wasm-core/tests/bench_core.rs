//! Native half of `npm run bench:core` (scripts/bench-core.sh). Ignored by `cargo test`;
//! run with `cargo test --release -p wasm-core --test bench_core -- --ignored --nocapture`
//! and the environment variables below. Prints one JSON object per line ("BENCH {...}").
//!
//! - DITTO_BENCH_DATASET: directory with one folder per version (typescript-10), for dedup
//! - DITTO_BENCH_CONCAT: the dataset's files laid end to end (bench/prepare.mjs), for speed
//! - DITTO_BENCH_RANDOM_FILE: seeded random bytes (bench/prepare.mjs); else generated
//! - DITTO_BENCH_RANDOM_MB: size of the generated random buffer (default 256)
//! - DITTO_BENCH_TS_LIMIT_MB: only time the first N MB of the concatenation (quick mode)
//! - DITTO_BENCH_REPS: timed repetitions, best taken (default 3)
//! - DITTO_BENCH_CHUNKERS: comma list of kind:min:avg:max:level (default: the set below)
#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use wasm_core::chunk::{make_chunker, pipeline::ChunkPipeline, test_bytes, CutPoint};
use wasm_core::hash::fingerprint;

fn files_in(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            files_in(&p, out);
        } else if p.is_file() {
            out.push(p);
        }
    }
}

/// The versions of the dataset, oldest first (folder names sorted as versions).
fn versions(root: &Path) -> Vec<Vec<Vec<u8>>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    let key = |p: &PathBuf| -> Vec<u64> {
        p.file_name()
            .unwrap()
            .to_string_lossy()
            .split('.')
            .map(|s| s.parse().unwrap_or(0))
            .collect()
    };
    dirs.sort_by_key(key);
    dirs.iter()
        .map(|d| {
            let mut fs = Vec::new();
            files_in(d, &mut fs);
            fs.iter().map(|f| std::fs::read(f).unwrap()).collect()
        })
        .collect()
}

fn best<F: FnMut()>(reps: usize, bytes: usize, mut f: F) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    bytes as f64 / best / 1e6
}

fn emit(kv: &[(&str, String)]) {
    let body: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    println!("BENCH {{{}}}", body.join(","));
}

fn q(s: &str) -> String {
    format!("\"{s}\"")
}

fn chunk_count(c: &dyn CutPoint, data: &[u8]) -> usize {
    let (mut s, mut n) = (0, 0);
    while s < data.len() {
        s = c.cut(data, s);
        n += 1;
    }
    n
}

#[test]
#[ignore]
fn bench_core_native() {
    let reps: usize = std::env::var("DITTO_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let rand_mb: usize = env("DITTO_BENCH_RANDOM_MB")
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    // Quick mode (`--quick`): fewer chunkers, no RapidCDC and SS-CDC runs.
    let quick = env("DITTO_BENCH_QUICK").is_some_and(|v| v == "1");
    let specs = env("DITTO_BENCH_CHUNKERS").unwrap_or_else(|| {
        if quick {
            "default,fastcdc:2048:8192:65536:1".to_string()
        } else {
            "default,fastcdc:2048:8192:65536:1,inck:2048:8192:65536:0".to_string()
        }
    });
    let ds = env("DITTO_BENCH_DATASET").map(|d| versions(Path::new(&d)));
    let random = match env("DITTO_BENCH_RANDOM_FILE") {
        Some(f) => std::fs::read(f).unwrap(),
        None => test_bytes(0xD1770, rand_mb << 20),
    };
    // Every file of every version laid end to end: the "same bytes" for speed runs.
    let mut ts_concat: Vec<u8> = match env("DITTO_BENCH_CONCAT") {
        Some(f) => std::fs::read(f).unwrap(),
        None => ds.iter().flatten().flatten().flatten().copied().collect(),
    };
    if let Some(mb) = env("DITTO_BENCH_TS_LIMIT_MB").and_then(|v| v.parse::<usize>().ok()) {
        ts_concat.truncate(mb << 20);
    }

    for spec in specs.split(',') {
        let f: Vec<&str> = spec.split(':').collect();
        let n = |i: usize| f[i].parse::<usize>().unwrap();
        let is_default = f[0] == "default";
        let spec = if is_default {
            let d = wasm_core::chunk::DEFAULT_CHUNKER;
            format!("{}:{}:{}:{}:{}", d.0, d.1, d.2, d.3, d.4)
        } else {
            spec.to_string()
        };
        let spec = spec.as_str();
        let c = if is_default {
            wasm_core::chunk::make_chunker_or_default("default", None, None, None, None).unwrap()
        } else {
            make_chunker(f[0], n(1), n(2), n(3), n(4) as u32).unwrap()
        };
        for (name, data) in [("typescript-10", &ts_concat), ("random", &random)] {
            if data.is_empty() {
                continue;
            }
            let mut chunks = 0;
            let mbps = best(reps, data.len(), || chunks = chunk_count(&*c, data));
            emit(&[
                ("what", q("chunk")),
                ("where", q("native")),
                ("chunker", q(spec)),
                ("data", q(name)),
                ("mbps", format!("{mbps:.0}")),
                ("chunks", chunks.to_string()),
            ]);
        }
        if let Some(vs) = &ds {
            // Dedup over the versions: each file chunked on its own, unique by SHA-1.
            let (mut total, mut unique, mut nchunks) = (0u64, 0u64, 0u64);
            let mut seen = HashSet::new();
            for v in vs {
                for file in v {
                    let mut s = 0;
                    while s < file.len() {
                        let e = c.cut(file, s);
                        total += (e - s) as u64;
                        nchunks += 1;
                        if seen.insert(fingerprint(&file[s..e])) {
                            unique += (e - s) as u64;
                        }
                        s = e;
                    }
                }
            }
            emit(&[
                ("what", q("dedup")),
                ("default", is_default.to_string()),
                ("chunker", q(spec)),
                ("data", q("typescript-10")),
                ("ratio", format!("{:.4}", total as f64 / unique as f64)),
                (
                    "mean_chunk",
                    format!("{:.0}", total as f64 / nchunks as f64),
                ),
                ("chunks", nchunks.to_string()),
            ]);
        }
    }

    // RapidCDC on typescript-10: each version chunked with hints learnt from the one
    // before (RWT and MT), against the plain chunker; chunk + SHA-1 time per version.
    if let Some(vs) = ds.as_ref().filter(|_| !quick) {
        use wasm_core::chunk::fastcdc::FastCdc;
        use wasm_core::chunk::rapidcdc::{Accept, BoundaryTest, Hints, RapidCdc};
        use wasm_core::chunk::twostage::TwoStage;
        fn run<C: BoundaryTest + Clone>(
            base: C,
            accept: Option<Accept>,
            vs: &[Vec<Vec<u8>>],
        ) -> (f64, f64, f64, u64, u64) {
            let (mut total, mut unique) = (0u64, 0u64);
            let mut seen = HashSet::new();
            let mut prev: Vec<Vec<(wasm_core::hash::Fingerprint, u32, u8)>> = Vec::new();
            let (mut t_all, mut t_hash) = (0f64, 0f64);
            let (mut tried, mut accepted) = (0u64, 0u64);
            for (vi, v) in vs.iter().enumerate() {
                let mut hints = Hints::new();
                for r in &prev {
                    for i in 1..r.len() {
                        hints.record(&r[i - 1].0, r[i].1, r[i].2);
                    }
                }
                let rapid =
                    RapidCdc::new(base.clone(), hints, accept.unwrap_or(Accept::RollingWindow));
                let mut cur = Vec::new();
                let t = Instant::now();
                let mut hash_time = 0f64;
                for file in v {
                    let mut recipe = Vec::new();
                    rapid.start_file();
                    let mut s = 0;
                    while s < file.len() {
                        let (e, fp) = if accept.is_some() && vi > 0 {
                            // RapidCDC fingerprints inside `cut` (it needs the SHA-1 to jump).
                            let e = rapid.cut(file, s);
                            let mut fps = Vec::new();
                            rapid.take_fingerprints(&mut fps);
                            (e, fps[0])
                        } else {
                            let e = base.cut(file, s);
                            let th = Instant::now();
                            let fp = fingerprint(&file[s..e]);
                            hash_time += th.elapsed().as_secs_f64();
                            (e, fp)
                        };
                        recipe.push((fp, (e - s) as u32, file[e - 1]));
                        s = e;
                    }
                    cur.push(recipe);
                }
                if vi > 0 {
                    t_all += t.elapsed().as_secs_f64();
                    t_hash += hash_time;
                }
                let st = rapid.stats();
                tried += st.tried;
                accepted += st.accepted;
                for r in &cur {
                    for &(fp, l, _) in r {
                        total += l as u64;
                        if seen.insert(fp) {
                            unique += l as u64;
                        }
                    }
                }
                prev = cur;
            }
            (total as f64 / unique as f64, t_all, t_hash, tried, accepted)
        }
        let bytes_after_v0: usize = vs.iter().skip(1).flatten().map(|f| f.len()).sum();
        let ts = TwoStage::default_config();
        let fc = FastCdc::default_8k();
        for (bname, plain, rwt, mt) in [
            (
                "twostage-default",
                run(ts.clone(), None, vs),
                run(ts.clone(), Some(Accept::RollingWindow), vs),
                run(ts.clone(), Some(Accept::Marker), vs),
            ),
            (
                "fastcdc-8k",
                run(fc.clone(), None, vs),
                run(fc.clone(), Some(Accept::RollingWindow), vs),
                run(fc.clone(), Some(Accept::Marker), vs),
            ),
        ] {
            // Plain: the SHA-1 time is the same work the rapid run does after its cuts
            // (RapidCDC hashes inside `cut`), so chunking time = total - hashing.
            let plain_chunk = plain.1 - plain.2;
            for (aname, r) in [("FF+RWT", rwt), ("FF+MT", mt)] {
                // Estimate: the rapid run hashed (nearly) the same bytes as the plain one.
                let rapid_chunk = r.1 - plain.2;
                emit(&[
                    ("what", q("rapidcdc")),
                    ("base", q(bname)),
                    ("accept", q(aname)),
                    ("dedup_plain", format!("{:.4}", plain.0)),
                    ("dedup_rapid", format!("{:.4}", r.0)),
                    ("jumps_tried", r.3.to_string()),
                    ("jumps_accepted", r.4.to_string()),
                    ("speedup_chunk_plus_sha1", format!("{:.2}", plain.1 / r.1)),
                    (
                        "speedup_chunking",
                        format!("{:.2}", plain_chunk / rapid_chunk.max(1e-9)),
                    ),
                    (
                        "plain_mbps",
                        format!("{:.0}", bytes_after_v0 as f64 / plain.1 / 1e6),
                    ),
                    (
                        "rapid_mbps",
                        format!("{:.0}", bytes_after_v0 as f64 / r.1 / 1e6),
                    ),
                ]);
            }
        }
    }

    // SS-CDC: stage 1 over 1 MiB segments on 2 threads, then sequential selection.
    let ts2 = wasm_core::chunk::twostage::TwoStage::default_config();
    for (name, data) in [("typescript-10", &ts_concat), ("random", &random)] {
        if data.is_empty() || quick {
            continue;
        }
        for threads in [1usize, 2] {
            let mut chunks = 0;
            let mbps = best(reps, data.len(), || {
                chunks = wasm_core::chunk::sscdc::chunk_parallel(&ts2, data, 1 << 20, threads).len()
            });
            emit(&[
                ("what", q("chunk")),
                ("where", q("native")),
                ("chunker", q(&format!("sscdc-twostage-{threads}thr"))),
                ("data", q(name)),
                ("mbps", format!("{mbps:.0}")),
                ("chunks", chunks.to_string()),
            ]);
        }
    }

    // The fastcdc crate itself, the baseline.
    for (name, data) in [("typescript-10", &ts_concat), ("random", &random)] {
        if data.is_empty() {
            continue;
        }
        let mut chunks = 0;
        let mbps = best(reps, data.len(), || {
            chunks = fastcdc::v2020::FastCDC::new(data, 2048, 8192, 65536).count()
        });
        emit(&[
            ("what", q("chunk")),
            ("where", q("native")),
            ("chunker", q("fastcdc-crate:2048:8192:65536:1")),
            ("data", q(name)),
            ("mbps", format!("{mbps:.0}")),
            ("chunks", chunks.to_string()),
        ]);
    }

    // SHA-1 natively: the sha1 crate (SHA-NI when the CPU has it), the fingerprint
    // (collision-detecting SHA-1) and our portable lanes,
    // over the chunks of the default 8K FastCDC.
    let fc = make_chunker("fastcdc", 2048, 8192, 65536, 1).unwrap();
    for (name, data) in [("typescript-10", &ts_concat), ("random", &random)] {
        if data.is_empty() {
            continue;
        }
        let mut ranges = Vec::new();
        let mut s = 0;
        while s < data.len() {
            let e = fc.cut(data, s);
            ranges.push((s, e - s));
            s = e;
        }
        let mbps = best(reps, data.len(), || {
            let mut x = 0u8;
            for &(o, l) in &ranges {
                x ^= <sha1::Sha1 as sha1::Digest>::digest(&data[o..o + l])[0];
            }
            std::hint::black_box(x);
        });
        emit(&[
            ("what", q("sha1")),
            ("where", q("native")),
            ("impl", q("sha1-crate")),
            ("data", q(name)),
            ("mbps", format!("{mbps:.0}")),
        ]);
        // The chunk fingerprint: SHA-1 with collision detection (sha1-checked).
        let mut fps = vec![[0u8; 20]; ranges.len()];
        let mbps = best(reps, data.len(), || {
            wasm_core::hash::fingerprint_many(data, &ranges, &mut fps)
        });
        emit(&[
            ("what", q("sha1")),
            ("where", q("native")),
            ("impl", q("fingerprint-sha1-checked")),
            ("data", q(name)),
            ("mbps", format!("{mbps:.0}")),
        ]);
        // The portable 4-lane multi-buffer code (natively `sha1_many` uses the crate).
        let mut out = vec![[0u8; 20]; ranges.len()];
        let mbps = best(reps, data.len(), || {
            wasm_core::hash::multi::sha1_many_portable(data, &ranges, &mut out)
        });
        emit(&[
            ("what", q("sha1")),
            ("where", q("native")),
            ("impl", q("multi-buffer-portable")),
            ("data", q(name)),
            ("mbps", format!("{mbps:.0}")),
        ]);
        // CRC-32 per chunk: ours (slicing-by-16, what the page runs) and crc32fast (the
        // carry-less multiply natively), the anchor.
        for (imp, f) in [
            ("slicing-by-16", wasm_core::crc32::crc32 as fn(&[u8]) -> u32),
            ("crc32fast", crc32fast::hash),
        ] {
            let mbps = best(reps, data.len(), || {
                let x = ranges.iter().fold(0, |x, &(o, l)| x ^ f(&data[o..o + l]));
                std::hint::black_box(x);
            });
            emit(&[
                ("what", q("crc32")),
                ("where", q("native")),
                ("impl", q(imp)),
                ("data", q(name)),
                ("mbps", format!("{mbps:.0}")),
            ]);
        }
        // zstd at the backup's level 3, chunk by chunk through reused contexts (the Wasm
        // runs time the same calls: `ZstdBench`, wasm-core/src/bindings/bench.rs).
        let mut comp = wasm_core::compress::Compressor::new(3).unwrap();
        let mut stored: Vec<(u8, Vec<u8>, usize)> = Vec::new();
        let mbps = best(reps, data.len(), || {
            stored.clear();
            for &(o, l) in &ranges {
                let (codec, bytes) = comp.compress(&data[o..o + l]);
                stored.push((codec, bytes.to_vec(), l));
            }
        });
        emit(&[
            ("what", q("zstd")),
            ("where", q("native")),
            ("impl", q("compress-l3")),
            ("data", q(name)),
            ("mbps", format!("{mbps:.0}")),
        ]);
        let mut dec = wasm_core::compress::Decompressor::new().unwrap();
        let mut out = vec![0u8; data.len()];
        let mbps = best(reps, data.len(), || {
            let mut at = 0;
            for (codec, bytes, len) in &stored {
                dec.decompress_into(*codec, bytes, &mut out[at..at + len])
                    .unwrap();
                at += len;
            }
        });
        assert_eq!(out, **data, "zstd round trip");
        emit(&[
            ("what", q("zstd")),
            ("where", q("native")),
            ("impl", q("decompress")),
            ("data", q(name)),
            ("mbps", format!("{mbps:.0}")),
        ]);
        let mbps = best(reps, data.len(), || {
            let mut p = ChunkPipeline::new(make_chunker("fastcdc", 2048, 8192, 65536, 1).unwrap());
            for b in data.chunks(1 << 20) {
                p.push(b);
            }
            p.finish();
        });
        emit(&[
            ("what", q("pipeline")),
            ("where", q("native")),
            ("chunker", q("fastcdc:2048:8192:65536:1")),
            ("data", q(name)),
            ("mbps", format!("{mbps:.0}")),
        ]);
    }
}
