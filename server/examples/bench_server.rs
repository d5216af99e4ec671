//! Storage server benchmark (`npm run bench:server`, via scripts/bench-server.sh).
//!
//! Starts the release server on a temporary data directory and measures, over loopback:
//! - ingest throughput of new chunks: pre-built ~4 MiB bundles of incompressible chunks
//!   (4-16 KiB, codec raw) uploaded by concurrent clients (2 unless `BENCH_CLIENTS`); the server verifies every SHA-1,
//!   appends to containers, fsyncs, commits the index, then answers;
//! - latency of one `chunks/missing` query with 100 000 fingerprints (JSON), median of 5.
//!
//! The last line printed is `{"ingest_mbps": .., "missing_100k_ms": ..}` (MB = 10^6 bytes).
//!
//! `BENCH_URL` and `BENCH_TOKEN` (a running server's base URL and a full token of its
//! `default` repository, which must be empty) measure that server instead of starting one:
//! replicas behind a balancer (`npm run bench:scale`). `BENCH_CLIENTS` (default 2) sets the
//! number of concurrent uploading clients.

use std::{
    io::{BufRead, BufReader, Read},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use wasm_core::{
    format::bundle::{BundleWriter, Codec},
    hash::{fingerprint, to_hex, Fingerprint},
};

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

fn post(agent: &ureq::Agent, url: &str, token: &str, ct: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let r = agent
        .post(url)
        .set("Authorization", &format!("Bearer {token}"))
        .set("Content-Type", ct)
        .send_bytes(body);
    let r = match r {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{url}: {e}"),
    };
    let status = r.status();
    let mut out = Vec::new();
    r.into_reader().read_to_end(&mut out).unwrap();
    (status, out)
}

/// Bundles of ~4 MiB holding `total` raw bytes of new 4-16 KiB chunks: random bytes sent
/// raw, or text-like bytes sent as zstd. Returns (bundles, fps, raw bytes, stored bytes).
fn build_bundles(
    rng: &mut Rng,
    total: usize,
    compressible: bool,
) -> (Vec<Vec<u8>>, Vec<Fingerprint>, usize, usize) {
    const WORDS: [&[u8]; 8] = [
        b"backup ",
        b"ditto ",
        b"chunk ",
        b"2026-11-22 ",
        b"error ",
        b"the ",
        b"{\"id\": ",
        b"\n",
    ];
    let mut bundles = Vec::new();
    let mut fps = Vec::new();
    let (mut raw_total, mut stored_total) = (0usize, 0usize);
    let mut w = BundleWriter::new();
    let mut buf = vec![0u8; 16 << 10];
    let mut z = zstd::bulk::Compressor::new(3).unwrap();
    while raw_total < total {
        let len = 4096 + (rng.next() % (12 << 10)) as usize;
        if compressible {
            let mut at = 0;
            while at < len {
                let r = rng.next();
                let word: Vec<u8> = if r.is_multiple_of(3) {
                    format!("{} ", r >> 40).into_bytes()
                } else {
                    WORDS[(r >> 8) as usize % WORDS.len()].to_vec()
                };
                let n = word.len().min(len - at);
                buf[at..at + n].copy_from_slice(&word[..n]);
                at += n;
            }
        } else {
            rng.fill(&mut buf[..len]);
        }
        let raw = &buf[..len];
        let fp = fingerprint(raw);
        if compressible {
            let c = z.compress(raw).unwrap();
            stored_total += c.len();
            w.push(&fp, Codec::Zstd, len as u32, &c);
        } else {
            stored_total += len;
            w.push(&fp, Codec::Raw, len as u32, raw);
        }
        fps.push(fp);
        raw_total += len;
        if w.len() >= 4 << 20 {
            bundles.push(std::mem::take(&mut w).finish());
        }
    }
    if !w.is_empty() {
        bundles.push(w.finish());
    }
    (bundles, fps, raw_total, stored_total)
}

/// Uploads all bundles with `clients` concurrent clients; returns the seconds taken.
fn upload_all(bundles: &[Vec<u8>], url: &str, token: &str, clients: usize) -> f64 {
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for k in 0..clients {
            s.spawn(move || {
                let agent = ureq::AgentBuilder::new()
                    .timeout(Duration::from_secs(120))
                    .build();
                for b in bundles.iter().skip(k).step_by(clients) {
                    let (st, body) = post(&agent, url, token, "application/x-ditto-bundle", b);
                    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
                }
            });
        }
    });
    t0.elapsed().as_secs_f64()
}

/// The server under test: one started on a temporary data directory (with this process's
/// environment, so `DATABASE_URL` and `DITTO_S3_*` apply to it), or a running one.
struct Target {
    base: String,
    token: String,
    own: Option<(Child, PathBuf)>,
}

impl Target {
    fn start() -> Target {
        if let (Ok(base), Ok(token)) = (std::env::var("BENCH_URL"), std::env::var("BENCH_TOKEN")) {
            return Target {
                base: base.trim_end_matches('/').to_string(),
                token,
                own: None,
            };
        }
        let bin = std::env::var("DITTO_SERVER_BIN").expect("DITTO_SERVER_BIN");
        let data_dir = std::env::temp_dir().join(format!("ditto-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&data_dir);
        std::fs::create_dir_all(&data_dir).unwrap();
        let mut child = Command::new(&bin)
            .arg("serve")
            .env("PORT", "0")
            .env("DATA_DIR", &data_dir)
            .env("WEB_DIR", data_dir.join("none"))
            .stdout(Stdio::piped())
            .spawn()
            .expect("start server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let rest = line
            .trim()
            .strip_prefix("Ditto is running. Open ")
            .expect("startup line");
        let (base, token) = rest.split_once("/#token=").unwrap();
        Target {
            base: base.to_string(),
            token: token.to_string(),
            own: Some((child, data_dir)),
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some((child, data_dir)) = &mut self.own {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(data_dir);
        }
    }
}

fn main() {
    let total_mb = env_num("BENCH_INGEST_MB", 256);
    let clients = env_num("BENCH_CLIENTS", 2).max(1);
    let target = Target::start();
    let (base, token) = (target.base.clone(), target.token.clone());

    // Pre-build the bundles (not timed).
    let mut rng = Rng(0x5EED_1234_5678_9ABC);
    let (bundles, fps, raw_total, _) = build_bundles(&mut rng, total_mb << 20, false);
    println!(
        "ingest: {} bundles, {} chunks, {:.1} MB of new incompressible chunks, {clients} clients",
        bundles.len(),
        fps.len(),
        raw_total as f64 / 1e6
    );
    let url = format!("{base}/api/v1/repos/default/bundles");
    let secs = upload_all(&bundles, &url, &token, clients);
    let ingest_mbps = raw_total as f64 / 1e6 / secs;
    println!("ingest: {secs:.2} s -> {ingest_mbps:.1} MB/s");
    drop(bundles);

    // The same with compressible chunks sent as zstd (what the browser does).
    let zstd_mb = env_num("BENCH_ZSTD_MB", 64);
    let (zb, zfps, zraw, zstored) = build_bundles(&mut rng, zstd_mb << 20, true);
    let zsecs = upload_all(&zb, &url, &token, clients);
    let zstd_mbps = zraw as f64 / 1e6 / zsecs;
    println!(
        "ingest zstd: {} chunks, {:.1} MB raw as {:.1} MB zstd: {zsecs:.2} s -> {zstd_mbps:.1} MB/s of raw data",
        zfps.len(),
        zraw as f64 / 1e6,
        zstored as f64 / 1e6
    );

    // 100 000 fingerprints: all stored ones (up to 50 000) plus absent ones.
    let mut query: Vec<String> = fps.iter().take(50_000).map(to_hex).collect();
    let mut i = 0u64;
    while query.len() < 100_000 {
        query.push(to_hex(&fingerprint(&i.to_le_bytes())));
        i += 1;
    }
    let body = serde_json::to_vec(&serde_json::json!({ "fingerprints": query })).unwrap();
    let bin_body: Vec<u8> = query
        .iter()
        .flat_map(|h| wasm_core::format::parse_fp_hex(h).unwrap())
        .collect();
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(120))
        .build();
    let murl = format!("{base}/api/v1/repos/default/chunks/missing");
    let mut times = Vec::new();
    let mut bin_times = Vec::new();
    let expect_missing = 100_000 - fps.len().min(50_000);
    for _ in 0..5 {
        let t = Instant::now();
        let (st, out) = post(&agent, &murl, &token, "application/json", &body);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(st, 200);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["missing"].as_array().unwrap().len(), expect_missing);
        let t = Instant::now();
        let (st, out) = post(&agent, &murl, &token, "application/octet-stream", &bin_body);
        bin_times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(st, 200);
        assert_eq!(out.len(), expect_missing * 20);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    bin_times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let missing_ms = times[2];
    println!(
        "missing: 100 000 fingerprints ({} stored) -> median {missing_ms:.1} ms JSON, {:.1} ms binary",
        fps.len().min(50_000),
        bin_times[2]
    );
    drop(target);
    println!(
        "{{\"ingest_mbps\":{:.1},\"missing_100k_ms\":{:.1},\"ingest_zstd_raw_mbps\":{:.1}}}",
        ingest_mbps, missing_ms, zstd_mbps
    );
}
