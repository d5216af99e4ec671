//! Compression candidates on the unique chunks of a versioned dataset (what the browser
//! compresses before upload): stored bytes and MB/s per codec. Ignored by default:
//!
//! DITTO_BENCH_DIR=target/datasets/typescript cargo test --release -p wasm-core \
//!   --test compress_bench -- --ignored --nocapture

use std::collections::HashSet;
use std::time::Instant;

use wasm_core::chunk::{chunk_all, make_chunker_or_default};
use wasm_core::compress::{decompress, lz4_compress, Compressor};
use wasm_core::hash::fingerprint;

fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out)
        } else {
            out.push(p)
        }
    }
}

#[test]
#[ignore]
fn compression_candidates() {
    let Ok(dir) = std::env::var("DITTO_BENCH_DIR") else {
        eprintln!("set DITTO_BENCH_DIR to a folder of version folders");
        return;
    };
    let chunker = make_chunker_or_default("default", None, None, None, None).unwrap();
    let mut paths = Vec::new();
    files(std::path::Path::new(&dir), &mut paths);
    let mut seen = HashSet::new();
    let mut unique: Vec<Vec<u8>> = Vec::new();
    for p in &paths {
        let data = std::fs::read(p).unwrap();
        for (o, l) in chunk_all(&*chunker, &data) {
            if seen.insert(fingerprint(&data[o..o + l])) {
                unique.push(data[o..o + l].to_vec());
            }
        }
    }
    let raw: usize = unique.iter().map(|c| c.len()).sum();
    println!(
        "{} unique chunks, {:.1} MB raw",
        unique.len(),
        raw as f64 / 1e6
    );
    println!(
        "{:<16} {:>10} {:>8} {:>10}",
        "codec", "stored MB", "ratio", "MB/s"
    );
    for level in [1, 3, 6, 9] {
        let mut c = Compressor::new(level).unwrap();
        let t = Instant::now();
        let mut stored = 0usize;
        let mut frames = Vec::with_capacity(unique.len());
        for chunk in &unique {
            let (codec, bytes) = c.compress(chunk);
            stored += bytes.len();
            frames.push((codec, bytes.to_vec()));
        }
        let secs = t.elapsed().as_secs_f64();
        let td = Instant::now();
        for ((codec, f), chunk) in frames.iter().zip(&unique) {
            assert_eq!(&decompress(*codec, f, chunk.len()).unwrap(), chunk);
        }
        let dsecs = td.elapsed().as_secs_f64();
        println!(
            "{:<16} {:>10.2} {:>8.2} {:>10.0}   (decode {:.0} MB/s)",
            format!("zstd-{level} if pays"),
            stored as f64 / 1e6,
            raw as f64 / stored as f64,
            raw as f64 / 1e6 / secs,
            raw as f64 / 1e6 / dsecs
        );
    }
    let t = Instant::now();
    let stored: usize = unique
        .iter()
        .map(|c| lz4_compress(c).len().min(c.len()))
        .sum();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{:<16} {:>10.2} {:>8.2} {:>10.0}",
        "lz4 (block)",
        stored as f64 / 1e6,
        raw as f64 / stored as f64,
        raw as f64 / 1e6 / secs
    );
}
