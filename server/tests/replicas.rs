//! Several server replicas on one PostgreSQL database and one bucket (docs/STORAGE.md
//! "Replicas"): overlapping uploads through different replicas store each chunk once, a
//! version committed through one replica reads back through the other, a replica killed
//! mid-upload loses nothing it acknowledged, maintenance runs on one at a time, a commit
//! through one replica racing a prune through the other never names a deleted chunk, and
//! `check` finds the result consistent. Runs only on PostgreSQL + S3 (`npm run test:scale`).

mod common;

use std::{collections::HashSet, sync::Arc, time::Duration};

use common::*;
use serde_json::{json, Value};

/// A replica: the shared database and key prefix are those of `shared`, its own data
/// directory `own` (its lock and nothing else), and the default grace before unnamed
/// objects are swept (another replica's upload may be in flight when one starts).
fn replica(shared: &TempDir, own: &TempDir) -> Server {
    replica_with(shared, own, &[])
}

/// [`replica`] with more environment.
fn replica_with(shared: &TempDir, own: &TempDir, env: &[(&str, &str)]) -> Server {
    let mut all = vec![
        ("DATA_DIR", own.0.to_str().unwrap()),
        ("DITTO_ORPHAN_GRACE_S", "900"),
    ];
    all.extend_from_slice(env);
    Server::start_with(&shared.0, &all, None)
}

/// Whether the suite runs on PostgreSQL and S3 (`npm run test:scale`), which replicas need;
/// says that the test is skipped when not.
fn scale_out() -> bool {
    let here = on_s3() && on_postgres().is_some();
    if !here {
        eprintln!("skipped: needs PostgreSQL and S3 (npm run test:scale)");
    }
    here
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
    if !scale_out() {
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
                let r = upload_at(&ag, &base, &token, part).unwrap();
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
    //    other, and the backup goes on there.
    let doomed = chunks(50, 400);
    let (base, token) = (a.base.clone(), a.token.clone());
    let to_send = doomed.clone();
    let uploader = std::thread::spawn(move || {
        let ag = agent();
        let mut acked: Vec<[u8; 20]> = Vec::new();
        for part in to_send.chunks(10) {
            match upload_at(&ag, &base, &token, part) {
                Ok(r) if r.status == 200 => acked.extend(part.iter().map(|c| c.fp)),
                _ => break,
            }
        }
        acked
    });
    std::thread::sleep(Duration::from_millis(400));
    a.kill9();
    let acked: HashSet<[u8; 20]> = uploader.join().unwrap().into_iter().collect();
    assert!(
        !acked.is_empty(),
        "some bundles were acknowledged before the kill"
    );
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
    // B loads its fingerprint set now, after the kill: every acknowledged chunk is in it.
    // One the kill cut off may be missing or stored (committed before its answer was sent).
    let missing: HashSet<String> = serde_json::from_value(r.json()["missing"].clone()).unwrap();
    for c in doomed.iter().filter(|c| acked.contains(&c.fp)) {
        assert!(
            !missing.contains(&c.hex()),
            "an acknowledged chunk is not missing"
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

/// A commit through one replica racing a prune through the other (docs/STORAGE.md, "Running
/// backups" and "Replicas"): the chunks uploaded for it are no version's yet and past the
/// grace period (0 s), so the prune may delete them. Each round the commit either goes
/// through, and then its chunks stay readable through both replicas, or is refused 409
/// `missing_chunks` naming only chunks of its own, and goes through once they are uploaded
/// again. No version ever names a deleted chunk: every one reads back, and `check` is clean.
#[test]
fn a_commit_through_one_replica_racing_a_prune_through_the_other() {
    if !scale_out() {
        return;
    }
    let shared = TempDir::new("replicas-race");
    let (da, db) = (TempDir::new("race-a"), TempDir::new("race-b"));
    let grace = [("DITTO_GC_GRACE_S", "0")];
    let a = replica_with(&shared, &da, &grace);
    let b = replica_with(&shared, &db, &grace);
    let ag = agent();
    let (mut refused, mut went_through) = (0, 0);
    let mut committed: Vec<Vec<TestChunk>> = Vec::new();
    for round in 0..12u64 {
        let cs = chunks(200 + round, 6);
        let r = upload_at(&ag, &a.base, &a.token, &cs).unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let barrier = std::sync::Barrier::new(2);
        let (first, pruned) = std::thread::scope(|sc| {
            let prune = sc.spawn(|| {
                barrier.wait();
                post_json(&b.repo_url("default", "/prune"), &b.token, &json!({}))
            });
            barrier.wait();
            // Round by round the commit comes later against the prune: before its mark,
            // between its mark and its sweep, after its sweep.
            std::thread::sleep(Duration::from_millis(round % 6 * 15));
            (commit(&a, &cs), prune.join().unwrap())
        });
        assert_eq!(
            pruned.status,
            200,
            "{}",
            String::from_utf8_lossy(&pruned.body)
        );
        match first.status {
            201 => went_through += 1,
            409 => {
                refused += 1;
                let e = first.expect_error(409, "missing_chunks");
                let missing: HashSet<String> =
                    serde_json::from_value(e["missing"].clone()).unwrap();
                let mine: HashSet<String> = cs.iter().map(TestChunk::hex).collect();
                assert!(!missing.is_empty() && missing.is_subset(&mine), "{e}");
                let again: Vec<TestChunk> = cs
                    .iter()
                    .filter(|c| missing.contains(&c.hex()))
                    .cloned()
                    .collect();
                let r = upload_at(&ag, &a.base, &a.token, &again).unwrap();
                assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
                let r = commit(&a, &cs);
                assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
            }
            s => panic!("commit: {s} {}", String::from_utf8_lossy(&first.body)),
        }
        committed.push(cs);
    }
    eprintln!("{went_through} commits went through, {refused} were refused and sent again");
    // Whatever the prunes ran beside, every committed chunk reads back through both replicas
    // after one more prune.
    let r = post_json(&a.repo_url("default", "/prune"), &a.token, &json!({}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    for s in [&a, &b] {
        for cs in &committed {
            let fps: Vec<String> = cs.iter().map(TestChunk::hex).collect();
            for (c, raw) in cs
                .iter()
                .zip(get_chunks(s, "default", &s.token, &fps, true))
            {
                assert_eq!(raw, c.raw);
            }
        }
    }
    let (code, out) = cli(&shared.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}
