//! Measures resemblance detection and delta chunks (module `resemble`) on a set of versions
//! of a folder, natively:
//!
//! ```text
//! cargo run -p wasm-core --release --example resemble_probe -- <dir with one folder per version>
//! ```
//!
//! Every file of every version (versions in version order, files in path order) is chunked
//! with the production chunker (the `"default"` chunker the upload workers use), chunks are
//! deduplicated by fingerprint, and each chunk stored for the first time looks for a base
//! among the chunks stored before it: DupAdj first, then super-features. The delta is kept if
//! it is smaller than the chunk's own zstd-3 encoding. Every kept delta is decoded again and
//! compared with the chunk. Results go to stdout, the last line a JSON object.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use wasm_core::chunk::{chunk_all, make_chunker_or_default};
use wasm_core::compress::Compressor;
use wasm_core::hash::{fingerprint, Fingerprint};
use wasm_core::resemble::delta::{DeltaDecoder, DeltaEncoder};
use wasm_core::resemble::dupadj;
use wasm_core::resemble::superfeature::{features, group, Params, SuperFeatureIndex, LANES};

/// Samplings of the super-feature positions measured (`Params::sample_bits`).
const SAMPLINGS: [u32; 4] = [0, 2, 4, 6];

/// The unique chunks of all versions and each version's recipe.
struct Corpus {
    raw: Vec<Vec<u8>>,
    fps: Vec<Fingerprint>,
    /// zstd-3 stored length of each chunk on its own (codec 0 or 1, as uploads store it).
    zstd_len: Vec<usize>,
    /// Features of each chunk, per sampling (`sample_bits` -> features).
    features: HashMap<u32, Vec<[u32; LANES]>>,
    /// Seconds to compute the features of all unique chunks, per sampling.
    sf_seconds: HashMap<u32, f64>,
    /// Per version: chunk ids in stream order.
    recipes: Vec<Vec<u32>>,
    /// Per version: the version a chunk first appears in is this one.
    first_version: Vec<usize>,
    total_bytes: u64,
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            files_under(&p, out);
        } else if meta.is_file() {
            out.push(p);
        }
    }
}

fn version_key(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or(0))
        .collect()
}

fn load(root: &Path) -> Corpus {
    let mut versions: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    versions.sort_by_key(|p| version_key(&p.file_name().unwrap().to_string_lossy()));
    let chunker = make_chunker_or_default("default", None, None, None, None).unwrap();
    let mut comp = Compressor::new(3).unwrap();
    let mut ids: HashMap<Fingerprint, u32> = HashMap::new();
    let mut c = Corpus {
        raw: vec![],
        fps: vec![],
        zstd_len: vec![],
        features: HashMap::new(),
        sf_seconds: HashMap::new(),
        recipes: vec![],
        first_version: vec![],
        total_bytes: 0,
    };
    for (v, dir) in versions.iter().enumerate() {
        let mut files = vec![];
        files_under(dir, &mut files);
        let mut recipe = vec![];
        for f in files {
            let data = std::fs::read(&f).unwrap();
            c.total_bytes += data.len() as u64;
            for (s, len) in chunk_all(&*chunker, &data) {
                let bytes = &data[s..s + len];
                let fp = fingerprint(bytes);
                let id = *ids.entry(fp).or_insert_with(|| {
                    let id = c.raw.len() as u32;
                    c.raw.push(bytes.to_vec());
                    c.fps.push(fp);
                    c.zstd_len.push(comp.compress(bytes).1.len());
                    c.first_version.push(v);
                    id
                });
                recipe.push(id);
            }
        }
        eprintln!(
            "{}: {} chunks, {} unique so far",
            dir.display(),
            recipe.len(),
            c.raw.len()
        );
        c.recipes.push(recipe);
    }
    for bits in SAMPLINGS {
        // Best of three runs: the machine is shared.
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            let f: Vec<[u32; LANES]> = c.raw.iter().map(|r| features(r, bits)).collect();
            best = best.min(t.elapsed().as_secs_f64());
            c.features.insert(bits, f);
        }
        c.sf_seconds.insert(bits, best);
    }
    c
}

#[derive(Clone, Copy)]
struct Config {
    name: &'static str,
    /// Longest delta chain allowed (1 = a base is never a delta chunk).
    cap: usize,
    dupadj: bool,
    sf: Option<Params>,
    level: i32,
    /// Chunks the super-feature index holds.
    capacity: usize,
    /// A DupAdj pair is kept only if its delta is at most this fraction of the chunk's zstd
    /// size (otherwise the chunk goes on to the super-features).
    dupadj_ratio: f64,
    /// A candidate base at the depth cap is replaced by its nearest ancestor below the cap.
    rebase: bool,
}

#[derive(Default)]
struct Outcome {
    stored: u64,
    deltas_dupadj: usize,
    deltas_sf: usize,
    dupadj_tried: usize,
    sf_tried: usize,
    index_bytes: usize,
    index_chunks: usize,
    encode_bytes: u64,
    encode_seconds: f64,
    decode_bytes: u64,
    decode_seconds: f64,
    max_depth: usize,
    /// (chunk, base) of every kept delta.
    pairs: Vec<(u32, u32)>,
}

fn simulate(c: &Corpus, cfg: Config) -> Outcome {
    let n = c.raw.len();
    let mut stored_len: Vec<usize> = c.zstd_len.clone();
    let mut depth = vec![0usize; n];
    let mut base: Vec<Option<u32>> = vec![None; n];
    let mut delta_bytes: Vec<Vec<u8>> = vec![Vec::new(); n];
    let mut enc = DeltaEncoder::new(cfg.level).unwrap();
    let mut index = cfg.sf.map(|p| SuperFeatureIndex::new(p, cfg.capacity));
    let mut out = Outcome::default();
    let fp_recipes: Vec<Vec<Fingerprint>> = c
        .recipes
        .iter()
        .map(|r| r.iter().map(|&id| c.fps[id as usize]).collect())
        .collect();

    // Tries `id` against base `b`; keeps the delta if it pays and the chain stays in the cap.
    let mut try_delta = |id: u32,
                         b: u32,
                         ratio: f64,
                         depth: &mut Vec<usize>,
                         stored_len: &mut Vec<usize>,
                         base: &mut Vec<Option<u32>>,
                         out: &mut Outcome|
     -> bool {
        let (i, mut bi) = (id as usize, b as usize);
        while cfg.rebase && depth[bi] >= cfg.cap {
            bi = base[bi].expect("a delta chunk has a base") as usize;
        }
        if i == bi || depth[bi] + 1 > cfg.cap {
            return false;
        }
        let t = Instant::now();
        let payload = enc.encode(&c.fps[bi], &c.raw[bi], &c.raw[i]).unwrap();
        out.encode_seconds += t.elapsed().as_secs_f64();
        out.encode_bytes += c.raw[i].len() as u64;
        if payload.len() < c.zstd_len[i] && payload.len() as f64 <= ratio * c.zstd_len[i] as f64 {
            stored_len[i] = payload.len();
            depth[i] = depth[bi] + 1;
            base[i] = Some(bi as u32);
            delta_bytes[i] = payload.to_vec();
            true
        } else {
            false
        }
    };

    for (v, recipe) in c.recipes.iter().enumerate() {
        let mut seen = std::collections::HashSet::new();
        let needs: Vec<bool> = recipe
            .iter()
            .map(|&id| c.first_version[id as usize] == v && seen.insert(id))
            .collect();
        if cfg.dupadj && v > 0 {
            let old: Vec<&[Fingerprint]> = fp_recipes[..v].iter().map(|r| &r[..]).collect();
            dupadj::pairs(&fp_recipes[v], &needs, &old, |i, loc| {
                out.dupadj_tried += 1;
                let b = c.recipes[loc.recipe][loc.index];
                let ok = try_delta(
                    recipe[i],
                    b,
                    cfg.dupadj_ratio,
                    &mut depth,
                    &mut stored_len,
                    &mut base,
                    &mut out,
                );
                if ok {
                    out.deltas_dupadj += 1;
                }
                ok
            });
        }
        for (pos, &id) in recipe.iter().enumerate() {
            if !needs[pos] {
                continue;
            }
            let i = id as usize;
            let Some(index) = index.as_mut() else {
                continue;
            };
            let sfs = group(&c.features[&index.params().sample_bits][i], index.params());
            if base[i].is_none() {
                let eligible = |b: u32| cfg.rebase || depth[b as usize] < cfg.cap;
                if let Some(b) = index.lookup(&sfs, eligible) {
                    out.sf_tried += 1;
                    if try_delta(id, b, 1.0, &mut depth, &mut stored_len, &mut base, &mut out) {
                        out.deltas_sf += 1;
                    }
                }
            }
            if depth[i] < cfg.cap {
                index.insert(id, sfs);
            }
        }
    }
    if let Some(index) = &index {
        out.index_bytes = index.memory_bytes();
        out.index_chunks = index.len();
    }
    out.stored = stored_len.iter().map(|&l| l as u64).sum();
    out.max_depth = depth.iter().copied().max().unwrap_or(0);
    out.pairs = (0..n)
        .filter_map(|i| base[i].map(|b| (i as u32, b)))
        .collect();

    // Decode every delta against its base's bytes and compare.
    let mut dec = DeltaDecoder::new().unwrap();
    for i in 0..n {
        if let Some(b) = base[i] {
            let b = b as usize;
            let t = Instant::now();
            let raw = dec
                .decode(&delta_bytes[i], &c.fps[b], &c.raw[b], c.raw[i].len())
                .unwrap();
            out.decode_seconds += t.elapsed().as_secs_f64();
            out.decode_bytes += raw.len() as u64;
            assert!(raw == c.raw[i], "delta of chunk {i} decodes wrong");
        }
    }
    out
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

fn main() {
    let root = std::env::args()
        .nth(1)
        .expect("usage: resemble_probe <dir with one folder per version>");
    let t = Instant::now();
    let c = load(Path::new(&root));
    let unique: u64 = c.raw.iter().map(|r| r.len() as u64).sum();
    let zstd_only: u64 = c.zstd_len.iter().map(|&l| l as u64).sum();
    println!(
        "versions {}, input {:.1} MB, unique chunks {} ({:.1} MB), zstd-3 per chunk {:.2} MB (load {:.1} s)",
        c.recipes.len(),
        mb(c.total_bytes),
        c.raw.len(),
        mb(unique),
        mb(zstd_only),
        t.elapsed().as_secs_f64()
    );
    for bits in SAMPLINGS {
        println!(
            "features ({LANES} lanes, sample_bits {bits}) over the unique chunks: {:.0} MB/s",
            mb(unique) / c.sf_seconds[&bits]
        );
    }
    let sf_mbps = mb(unique) / c.sf_seconds[&0];

    let cap = 1 << 20;
    let dare = Params::DARE;
    let base = Config {
        name: "",
        cap: 4,
        dupadj: true,
        sf: Some(dare),
        level: 3,
        capacity: cap,
        dupadj_ratio: 1.0,
        rebase: false,
    };
    let chosen = Config {
        name: "chosen: DupAdj (ratio 0.5, rebase) + SF 3x2 sample_bits 6, cap 4",
        sf: Some(Params::DITTO),
        dupadj_ratio: wasm_core::resemble::DUPADJ_MAX_RATIO,
        rebase: true,
        ..base
    };
    let mut configs = vec![
        chosen,
        Config {
            name: "chosen, depth 1",
            cap: 1,
            ..chosen
        },
        Config {
            name: "chosen, no cap",
            cap: usize::MAX,
            ..chosen
        },
        Config {
            name: "chosen, index of 2048 chunks",
            capacity: 2048,
            ..chosen
        },
        Config {
            name: "DupAdj + SF 3x2, depth 1",
            cap: 1,
            ..base
        },
        Config {
            name: "DupAdj + SF 3x2, cap 4",
            ..base
        },
        Config {
            name: "DupAdj + SF 3x2, no cap",
            cap: usize::MAX,
            ..base
        },
        Config {
            name: "DupAdj only, cap 4",
            sf: None,
            ..base
        },
        Config {
            name: "SF 3x2 only, cap 4",
            dupadj: false,
            ..base
        },
        Config {
            name: "DupAdj + SF 3x2, cap 4, index of 4096 chunks",
            capacity: 4096,
            ..base
        },
        Config {
            name: "DupAdj + SF 3x2, cap 4, delta zstd-9",
            level: 9,
            ..base
        },
        Config {
            name: "DupAdj + SF 3x2, cap 4, delta zstd-19",
            level: 19,
            ..base
        },
        Config {
            name: "DupAdj + SF 3x2, depth 1, delta zstd-19",
            level: 19,
            cap: 1,
            ..base
        },
    ];
    for (m, n) in [
        (1, 1),
        (2, 1),
        (3, 1),
        (4, 1),
        (2, 2),
        (4, 2),
        (2, 3),
        (2, 4),
    ] {
        let p = Params {
            super_features: m,
            features_per_sf: n,
            sample_bits: 0,
        };
        configs.push(Config {
            name: Box::leak(format!("DupAdj + SF {m}x{n}, cap 4").into_boxed_str()),
            sf: Some(p),
            ..base
        });
    }
    for (ratio, rebase) in [(1.0, true), (0.5, false), (0.5, true), (0.25, true)] {
        for cap in [1, 4] {
            configs.push(Config {
                name: Box::leak(
                    format!("DupAdj (ratio {ratio}, rebase {rebase}) + SF 3x2, cap {cap}")
                        .into_boxed_str(),
                ),
                cap,
                dupadj_ratio: ratio,
                rebase,
                ..base
            });
        }
    }
    for bits in SAMPLINGS[1..].iter().copied() {
        configs.push(Config {
            name: Box::leak(format!("DupAdj + SF 3x2 sample_bits {bits}, cap 4").into_boxed_str()),
            sf: Some(Params {
                sample_bits: bits,
                ..dare
            }),
            ..base
        });
    }
    println!("| configuration | stored MB | deltas DupAdj | deltas SF | tried DupAdj / SF | max depth | index | encode MB/s | decode MB/s |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut json = serde_json::Map::new();
    json.insert("unique_chunks".into(), c.raw.len().into());
    json.insert("unique_bytes".into(), unique.into());
    json.insert("zstd3_stored_bytes".into(), zstd_only.into());
    json.insert("superfeature_mbps".into(), (sf_mbps.round() as u64).into());
    for cfg in configs {
        let o = simulate(&c, cfg);
        let enc = mb(o.encode_bytes) / o.encode_seconds.max(1e-9);
        let dec = mb(o.decode_bytes) / o.decode_seconds.max(1e-9);
        println!(
            "| {} | {:.2} | {} | {} | {} / {} | {} | {} chunks, {:.1} MB | {:.0} | {:.0} |",
            cfg.name,
            mb(o.stored),
            o.deltas_dupadj,
            o.deltas_sf,
            o.dupadj_tried,
            o.sf_tried,
            o.max_depth,
            o.index_chunks,
            mb(o.index_bytes as u64),
            enc,
            dec
        );
        let key = cfg.name.replace([' ', ',', '+'], "_").replace("__", "_");
        json.insert(
            key,
            serde_json::json!({
                "stored_bytes": o.stored,
                "deltas_dupadj": o.deltas_dupadj,
                "deltas_sf": o.deltas_sf,
                "max_depth": o.max_depth,
                "index_bytes": o.index_bytes,
                "encode_mbps": enc.round(),
                "decode_mbps": dec.round(),
            }),
        );
    }
    // Codec speed of the chosen configuration, best of three runs (the machine is shared).
    let (mut enc_s, mut dec_s) = (f64::MAX, f64::MAX);
    let (mut enc_b, mut dec_b) = (0, 0);
    for _ in 0..3 {
        let o = simulate(&c, chosen);
        enc_s = enc_s.min(o.encode_seconds);
        dec_s = dec_s.min(o.decode_seconds);
        (enc_b, dec_b) = (o.encode_bytes, o.decode_bytes);
    }
    let (enc, dec) = (mb(enc_b) / enc_s, mb(dec_b) / dec_s);
    println!(
        "chosen, best of 3: encode {:.0} MB/s over {:.1} MB tried, decode {:.0} MB/s over {:.1} MB of deltas",
        enc,
        mb(enc_b),
        dec,
        mb(dec_b)
    );
    json.insert("chosen_encode_mbps".into(), (enc.round() as u64).into());

    // The same pairs through zstd's dictionary API (the base loaded as a dictionary, content
    // type detected) instead of the reference prefix.
    let o = simulate(&c, chosen);
    let mut enc = DeltaEncoder::new(3).unwrap();
    let (mut prefix_bytes, mut dict_bytes) = (0u64, 0u64);
    let (mut prefix_s, mut dict_s) = (0f64, 0f64);
    for &(i, b) in &o.pairs {
        let (i, b) = (i as usize, b as usize);
        let t = Instant::now();
        prefix_bytes += enc.encode(&c.fps[b], &c.raw[b], &c.raw[i]).unwrap().len() as u64;
        prefix_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut z = zstd::bulk::Compressor::with_dictionary(3, &c.raw[b]).unwrap();
        dict_bytes += 21 + z.compress(&c.raw[i]).unwrap().len() as u64;
        dict_s += t.elapsed().as_secs_f64();
    }
    println!(
        "chosen pairs ({}): reference prefix {:.2} MB in {:.2} s, dictionary API {:.2} MB in {:.2} s",
        o.pairs.len(),
        mb(prefix_bytes),
        prefix_s,
        mb(dict_bytes),
        dict_s
    );
    json.insert("chosen_decode_mbps".into(), (dec.round() as u64).into());
    println!("{}", serde_json::Value::Object(json));
}
