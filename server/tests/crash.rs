//! Crash test: SIGKILL the server while clients upload bundles and commit versions, restart
//! it, and require that `check` passes and that everything acknowledged reads back intact.
//!
//! Rounds: `DITTO_CRASH_ROUNDS` (default 20); `scripts/crash-test.sh` runs 100+.

mod common;

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use common::*;
use serde_json::{json, Value};
use wasm_core::hash::Fingerprint;

struct Acked {
    chunks: Vec<TestChunk>,
    versions: Vec<(i64, Value)>,
}

/// Uploads until the server goes away; returns what the server acknowledged.
fn uploader(
    base: String,
    token: String,
    seed: u64,
    old: Vec<TestChunk>,
    stop: Arc<AtomicBool>,
) -> Acked {
    let a = agent();
    let mut acked = Acked {
        chunks: Vec::new(),
        versions: Vec::new(),
    };
    let mut rng = rand_bytes(seed, 4096).into_iter().cycle();
    let mut next = || rng.next().unwrap() as usize;
    for i in 0u64.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // 8..40 chunks: mostly new, some already stored (overlap), some repeated
        let n = 8 + next() % 32;
        let mut chunks = Vec::with_capacity(n);
        for j in 0..n {
            let k = next();
            if k % 7 == 0 && !old.is_empty() {
                chunks.push(old[next() * 31 % old.len()].clone());
            } else if k % 11 == 0 && !acked.chunks.is_empty() {
                chunks.push(acked.chunks[next() % acked.chunks.len()].clone());
            } else {
                let s = seed.wrapping_mul(1_000_003) + i * 100 + j as u64;
                let len = 1 + (next() * 257 + next()) % 24_000;
                chunks.push(if k % 2 == 0 {
                    TestChunk::new(text_bytes(s, len), true)
                } else {
                    TestChunk::new(rand_bytes(s, len), false)
                });
            }
        }
        match try_request(
            &a,
            "POST",
            &format!("{base}/api/v1/repos/default/bundles"),
            Some(&token),
            &[],
            Some(&bundle(&chunks)),
        ) {
            Ok(r) if r.status == 200 => acked.chunks.extend(chunks),
            Ok(r) => panic!(
                "bundle refused: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ),
            Err(_) => break, // killed: this one is not acknowledged
        }
        if i % 3 == 2 {
            let take = acked.chunks.len().min(60);
            let files: Vec<&TestChunk> = acked.chunks[acked.chunks.len() - take..].iter().collect();
            let size: usize = files.iter().map(|c| c.raw.len()).sum();
            let m = json!({ "source": format!("src-{seed}"), "time": i, "entries": [
                { "path": "d", "kind": "dir", "size": 0, "mtime": 0, "mode": 493, "recipe": [] },
                { "path": format!("d/f{i}"), "kind": "file", "size": size, "mtime": i, "mode": 420,
                  "recipe": files.iter().map(|c| c.hex()).collect::<Vec<_>>() } ] });
            match try_request(
                &a,
                "POST",
                &format!("{base}/api/v1/repos/default/versions"),
                Some(&token),
                &[],
                Some(&serde_json::to_vec(&m).unwrap()),
            ) {
                Ok(r) if r.status == 201 => {
                    acked.versions.push((r.json()["id"].as_i64().unwrap(), m))
                }
                Ok(r) => panic!(
                    "version refused: {} {}",
                    r.status,
                    String::from_utf8_lossy(&r.body)
                ),
                Err(_) => break,
            }
        }
    }
    acked
}

fn verify_chunks(s: &Server, chunks: &[&TestChunk]) {
    for batch in chunks.chunks(2000) {
        let fps: Vec<String> = batch.iter().map(|c| c.hex()).collect();
        let raws = get_chunks(s, "default", &s.token, &fps, true);
        for (raw, c) in raws.iter().zip(batch) {
            assert_eq!(raw, &c.raw, "chunk {} changed", c.hex());
        }
    }
}

fn verify_versions(s: &Server, versions: &[(i64, Value)]) {
    for (id, m) in versions {
        let r = request(
            "GET",
            &s.repo_url("default", &format!("/versions/{id}")),
            Some(&s.token),
            &[],
            None,
        );
        assert_eq!(r.status, 200, "acknowledged version {id} lost");
        let got = r.json();
        assert_eq!(
            got["manifest"]["entries"], m["entries"],
            "version {id} manifest changed"
        );
    }
}

fn check(dir: &std::path::Path) {
    let (code, out) = cli(dir, &["check", "default"]);
    assert_eq!(code, 0, "check failed after recovery:\n{out}");
    assert!(
        !out.contains("warning:"),
        "recovery left uncommitted bytes:\n{out}"
    );
}

#[test]
fn kill9_during_uploads() {
    let rounds: usize = std::env::var("DITTO_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let dir = TempDir::new("crash");
    let t0 = Instant::now();
    let mut all: HashMap<Fingerprint, TestChunk> = HashMap::new();
    let mut versions: Vec<(i64, Value)> = Vec::new();
    let mut fresh: Vec<Fingerprint> = Vec::new();
    let mut fresh_versions: Vec<(i64, Value)> = Vec::new();
    let mut rng = rand_bytes(4242, 1 << 12).into_iter().cycle();
    let mut kills_mid_upload = 0;
    for round in 0..rounds {
        let mut s = Server::start(&dir.0);
        // everything acknowledged before the last crash is intact
        verify_chunks(&s, &fresh.iter().map(|fp| &all[fp]).collect::<Vec<_>>());
        verify_versions(&s, &fresh_versions);
        check(&dir.0);
        fresh.clear();
        fresh_versions.clear();

        let stop = Arc::new(AtomicBool::new(false));
        let old: Vec<TestChunk> = all.values().take(500).cloned().collect();
        let handles: Vec<_> = (0..2u64)
            .map(|k| {
                let (base, token, stop, old) =
                    (s.base.clone(), s.token.clone(), stop.clone(), old.clone());
                std::thread::spawn(move || {
                    uploader(base, token, round as u64 * 10 + k + 1, old, stop)
                })
            })
            .collect();
        let delay = 40 + (rng.next().unwrap() as u64 * 256 + rng.next().unwrap() as u64) % 300;
        // A bundle into object storage is a PUT and a PostgreSQL commit away: a wider
        // window lets as many bundles and commits through before the kill.
        let delay = if on_s3() { delay * 3 } else { delay };
        std::thread::sleep(Duration::from_millis(delay));
        let still_running = handles.iter().all(|h| !h.is_finished());
        s.kill9();
        stop.store(true, Ordering::Relaxed);
        assert!(still_running, "uploaders stopped before the kill");
        kills_mid_upload += 1;
        for h in handles {
            let a = h.join().expect("uploader panicked");
            for c in a.chunks {
                if let std::collections::hash_map::Entry::Vacant(e) = all.entry(c.fp) {
                    fresh.push(c.fp);
                    e.insert(c);
                }
            }
            fresh_versions.extend(a.versions.iter().cloned());
            versions.extend(a.versions);
        }
    }
    // final: every acknowledged chunk and version, after one more restart
    let s = Server::start(&dir.0);
    verify_chunks(&s, &all.values().collect::<Vec<_>>());
    verify_versions(&s, &versions);
    check(&dir.0);
    let st = request(
        "GET",
        &s.repo_url("default", "/stats"),
        Some(&s.token),
        &[],
        None,
    )
    .json();
    assert!(st["chunks"].as_u64().unwrap() >= all.len() as u64);
    eprintln!(
        "crash test: {kills_mid_upload} kills during uploads, {} chunks and {} versions acknowledged and verified, {:.1}s",
        all.len(),
        versions.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(!versions.is_empty() && !all.is_empty());
}
