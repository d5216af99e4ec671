//! Several server replicas on one PostgreSQL database and one bucket (docs/STORAGE.md
//! "Replicas"): overlapping uploads through different replicas store each chunk once, a
//! version committed through one replica reads back through the other, a replica killed
//! mid-upload loses nothing it acknowledged, maintenance runs on one at a time, and `check`
//! finds the result consistent. Runs only on PostgreSQL + S3 (`npm run test:scale`).

mod common;

use std::{collections::HashSet, sync::Arc, time::Duration};

use common::*;
use serde_json::{json, Value};

/// A replica: the shared database and key prefix are those of `shared`, its own data
/// directory `own` (its lock and nothing else).
fn replica(shared: &TempDir, own: &TempDir) -> Server {
    Server::start_with(
        &shared.0,
        &[("DATA_DIR", own.0.to_str().unwrap())],
        None,
    )
}

fn chunks(seed: u64, n: usize) -> Vec<TestChunk> {
    (0..n)
        .map(|i| {
            let s = seed * 1000 + i as u64;
            let len = 2000 + (s as usize * 7919) % 30_000;
            TestChunk::new(rand_bytes(s, len), i % 3 == 0)
        })
        .collect()
}

fn stats(s: &Server) -> Value {
    request(
        "GET",
        &s.repo_url("default", "/stats"),
        Some(&s.token),
        &[],
        None,
    )
    .json()
}

fn commit(s: &Server, chunks: &[TestChunk]) -> Resp {
    let size: usize = chunks.iter().map(|c| c.raw.len()).sum();
    let m = json!({ "source": "src", "time": 1, "entries": [
        { "path": "f", "kind": "file", "size": size, "mtime": 0, "mode": null,
          "recipe": chunks.iter().map(TestChunk::hex).collect::<Vec<_>>() } ] });
    post_json(&s.repo_url("default", "/versions"), &s.token, &m)
}

#[test]
fn replicas_share_one_database_and_bucket() {
    if !on_s3() || on_postgres().is_none() {
        eprintln!("skipped: needs PostgreSQL and S3 (npm run test:scale)");
        return;
    }
    let shared = TempDir::new("replicas");
    let (da, db) = (TempDir::new("replica-a"), TempDir::new("replica-b"));
    let mut a = replica(&shared, &da);
    let b = replica(&shared, &db);

    // 1. Four clients, two per replica, upload overlapping sets of chunks at once.
    let common_set = chunks(1, 40);
    let mut expected: HashSet<[u8; 20]> = common_set.iter().map(|c| c.fp).collect();
    let barrier = Arc::new(std::sync::Barrier::new(4));
    let mut handles = Vec::new();
    for k in 0..4u64 {
        let own = chunks(10 + k, 20);
        expected.extend(own.iter().map(|c| c.fp));
        let mut mine: Vec<TestChunk> = common_set.iter().cloned().chain(own).collect();
        mine.rotate_left((k * 13) as usize);
        let (base, token) = if k % 2 == 0 {
            (a.base.clone(), a.token.clone())
        } else {
            (b.base.clone(), b.token.clone())
        };
        let barrier = barrier.clone();
        handles.push(std::thread::spawn(move || {
            let ag = agent();
            barrier.wait();
            let mut stored = 0;
            for part in mine.chunks(7) {
                let r = try_request(
                    &ag,
                    "POST",
                    &format!("{base}/api/v1/repos/default/bundles"),
                    Some(&token),
                    &[],
                    Some(&bundle(part)),
                )
                .unwrap();
                assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
                stored += r.json()["stored"].as_u64().unwrap();
            }
            stored
        }));
    }
    let stored: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(stored, expected.len() as u64, "each chunk stored once");
    for s in [&a, &b] {
        assert_eq!(stats(s)["chunks"].as_u64(), Some(expected.len() as u64));
    }

    // 2. A version committed through one replica reads back through the other.
    let v: Vec<TestChunk> = common_set.iter().take(25).cloned().collect();
    let r = commit(&b, &v);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let fps: Vec<String> = v.iter().map(TestChunk::hex).collect();
    let back = get_chunks(&a, "default", &a.token, &fps, true);
    for (c, raw) in v.iter().zip(back) {
        assert_eq!(raw, c.raw);
    }

    // 3. A replica killed mid-upload: everything it acknowledged reads back through the
    //    other, and what it did not is simply missing there.
    let doomed = chunks(50, 400);
    let (base, token) = (a.base.clone(), a.token.clone());
    let to_send = doomed.clone();
    let uploader = std::thread::spawn(move || {
        let ag = agent();
        let mut acked: Vec<[u8; 20]> = Vec::new();
        for part in to_send.chunks(10) {
            match try_request(
                &ag,
                "POST",
                &format!("{base}/api/v1/repos/default/bundles"),
                Some(&token),
                &[],
                Some(&bundle(part)),
            ) {
                Ok(r) if r.status == 200 => acked.extend(part.iter().map(|c| c.fp)),
                _ => break,
            }
        }
        acked
    });
    std::thread::sleep(Duration::from_millis(400));
    a.kill9();
    let acked: HashSet<[u8; 20]> = uploader.join().unwrap().into_iter().collect();
    assert!(!acked.is_empty(), "some bundles were acknowledged before the kill");
    let acked_chunks: Vec<TestChunk> = doomed
        .iter()
        .filter(|c| acked.contains(&c.fp))
        .cloned()
        .collect();
    let hexes: Vec<String> = acked_chunks.iter().map(TestChunk::hex).collect();
    let back = get_chunks(&b, "default", &b.token, &hexes, true);
    for (c, raw) in acked_chunks.iter().zip(back) {
        assert_eq!(raw, c.raw, "an acknowledged chunk reads back whole");
    }
    let r = post_json(
        &b.repo_url("default", "/chunks/missing"),
        &b.token,
        &json!({ "fingerprints": doomed.iter().map(TestChunk::hex).collect::<Vec<_>>() }),
    );
    let missing: HashSet<String> = serde_json::from_value(r.json()["missing"].clone()).unwrap();
    for c in &doomed {
        assert_eq!(
            missing.contains(&c.hex()),
            !acked.contains(&c.fp),
            "missing exactly when not acknowledged"
        );
    }
    // The backup goes on through the surviving replica.
    let rest: Vec<TestChunk> = doomed
        .iter()
        .filter(|c| !acked.contains(&c.fp))
        .cloned()
        .collect();
    for part in rest.chunks(10) {
        let r = upload(&agent(), &b, &b.token, part).unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    let r = commit(&b, &doomed);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));

    // 4. The killed replica comes back; maintenance (a forget and its prune) runs through
    //    one replica while the other serves, and the repository checks clean.
    let a = replica(&shared, &da);
    let r = post_json(
        &a.repo_url("default", "/forget"),
        &a.token,
        &json!({ "versions": [1] }),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let back = get_chunks(&b, "default", &b.token, &hexes, true);
    assert_eq!(back.len(), hexes.len());
    let (code, out) = cli(&shared.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}
