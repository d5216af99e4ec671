//! Damage on disk and hostile conditions, against the real server process: a flipped bit in
//! a container header or in a chunk, a damaged newest container, a cut container file, a
//! full disk, the write-ahead log removed, idle connections, file modes, large manifests,
//! the stored form of manifests and a damaged one, a forget whose prune fails, a retention
//! preview applied after the versions changed, an index that did not write the containers,
//! an I/O error opening a container, a commit reported failed after it went through, a read
//! and a search meeting a container removed or cut under them, a new container's id already
//! taken by a file or object another server wrote.
//! The servers run without the delta pass (`common::NO_PASS`): it would move the bytes a
//! test damages while it damages them. Damaged delta chunks are tested in delta.rs.

mod common;

use std::{
    io::{Read, Write},
    os::unix::fs::{FileExt, PermissionsExt},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use common::*;
use serde_json::{json, Value};

fn containers(s: &Server, repo: &str, token: &str) -> Vec<Value> {
    let r = request(
        "GET",
        &s.repo_url(repo, "/containers"),
        Some(token),
        &[],
        None,
    );
    assert_eq!(r.status, 200);
    r.json()["containers"].as_array().unwrap().clone()
}

/// The file of container `id`, whichever repository it belongs to (ids are server-wide).
fn container_file(dir: &Path, id: u64) -> PathBuf {
    for repo in std::fs::read_dir(repos_dir(dir)).unwrap().flatten() {
        let Some(repo_id) = repo.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let p = common::container_file(dir, repo_id, id);
        if p.exists() {
            return p;
        }
    }
    panic!("no file for container {id}");
}

/// Flips the bits of `mask` in the byte at `offset` of `path`.
fn flip(path: &Path, offset: u64, mask: u8) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).unwrap();
    b[0] ^= mask;
    f.write_all_at(&b, offset).unwrap();
    f.sync_all().unwrap();
}

/// Runs the mover to its end: a dry-run prune, which deletes nothing.
fn run_mover(s: &Server, repo: &str, token: &str) -> Resp {
    post_json(
        &s.repo_url(repo, "/prune"),
        token,
        &json!({"dry_run": true}),
    )
}

/// Where chunk `hex` is stored: (container id, offset in the file), once the mover (which
/// a commit starts in the background) has finished, so that the place stays put.
fn chunk_place(s: &Server, repo: &str, token: &str, hex: &str) -> (u64, u64) {
    let r = run_mover(s, repo, token);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    for c in containers(s, repo, token) {
        for ch in c["chunks"].as_array().unwrap() {
            if ch["fp"] == hex {
                return (c["id"].as_u64().unwrap(), ch["offset"].as_u64().unwrap());
            }
        }
    }
    panic!("chunk {hex} is not in any container");
}

/// `GET chunks/{fp}` of chunk `c` in the default repository.
fn get_chunk(s: &Server, token: &str, c: &TestChunk) -> Resp {
    request(
        "GET",
        &s.repo_url("default", &format!("/chunks/{}", c.hex())),
        Some(token),
        &[],
        None,
    )
}

fn commit(s: &Server, repo: &str, token: &str, name: &str, chunks: &[TestChunk]) -> i64 {
    commit_as(s, repo, token, "src", name, chunks)
}

/// As [`commit`], in source `source`.
fn commit_as(
    s: &Server,
    repo: &str,
    token: &str,
    source: &str,
    name: &str,
    chunks: &[TestChunk],
) -> i64 {
    let size: usize = chunks.iter().map(|c| c.raw.len()).sum();
    let m = json!({ "source": source, "time": 1, "entries": [
        { "path": name, "kind": "file", "size": size, "mtime": 0, "mode": null,
          "recipe": chunks.iter().map(TestChunk::hex).collect::<Vec<_>>() } ] });
    let r = post_json(&s.repo_url(repo, "/versions"), token, &m);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json()["id"].as_i64().unwrap()
}

/// Forgets versions `ids` of the default repository; the answer, which must be a 200.
fn forget(s: &Server, token: &str, ids: &[i64]) -> Resp {
    let r = post_json(
        &s.repo_url("default", "/forget"),
        token,
        &json!({ "versions": ids }),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r
}

fn upload_to(s: &Server, repo: &str, token: &str, chunks: &[TestChunk]) -> Resp {
    request(
        "POST",
        &s.repo_url(repo, "/bundles"),
        Some(token),
        &[],
        Some(&bundle(chunks)),
    )
}

fn missing(s: &Server, repo: &str, token: &str, chunks: &[&TestChunk]) -> Vec<String> {
    let r = post_json(
        &s.repo_url(repo, "/chunks/missing"),
        token,
        &json!({ "fingerprints": chunks.iter().map(|c| c.hex()).collect::<Vec<_>>() }),
    );
    assert_eq!(r.status, 200);
    serde_json::from_value(r.json()["missing"].clone()).unwrap()
}

/// `{version id: damaged_chunks}` from the versions list.
fn damage_of_versions(s: &Server, repo: &str, token: &str) -> Vec<(i64, u64, bool)> {
    let r = request(
        "GET",
        &s.repo_url(repo, "/versions"),
        Some(token),
        &[],
        None,
    );
    r.json()["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["id"].as_i64().unwrap(),
                v["damaged_chunks"].as_u64().unwrap(),
                v["damaged"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn chunks(seed: u64, n: usize) -> Vec<TestChunk> {
    (0..n)
        .map(|i| {
            let s = seed * 100 + i as u64;
            if i % 2 == 0 {
                TestChunk::new(text_bytes(s, 20_000 + i * 100), true)
            } else {
                TestChunk::new(rand_bytes(s, 20_000 + i * 100), false)
            }
        })
        .collect()
}

fn assert_restores(s: &Server, repo: &str, token: &str, cs: &[TestChunk]) {
    let fps: Vec<String> = cs.iter().map(TestChunk::hex).collect();
    for decode in [false, true] {
        let raws = get_chunks(s, repo, token, &fps, decode);
        for (raw, c) in raws.iter().zip(cs) {
            assert_eq!(raw, &c.raw);
        }
    }
}

#[test]
fn header_bit_flip_sets_the_container_aside_and_the_rest_keeps_working() {
    let dir = TempDir::new("hdrflip");
    let mut s = Server::start_without_pass(&dir.0);
    let (code, other_token) = cli(&dir.0, &["repo", "create", "other"]);
    assert_eq!(code, 0);
    let other_token = other_token.trim().to_string();
    let mine = chunks(1, 6);
    let theirs = chunks(2, 6);
    assert_eq!(upload_to(&s, "default", &s.token, &mine).status, 200);
    assert_eq!(upload_to(&s, "other", &other_token, &theirs).status, 200);
    let v1 = commit(&s, "default", &s.token, "a", &mine);
    commit(&s, "other", &other_token, "b", &theirs);
    let (cid, _) = chunk_place(&s, "default", &s.token, &mine[0].hex());
    assert!(s.stop(Duration::from_secs(10)).is_some());

    // The table capacity (bytes 12..16, 2048 = 0x800) loses its bit 11: 0 slots for 6 chunks.
    flip(&container_file(&dir.0, cid), 13, 0x08);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 1, "check must fail:\n{out}");
    assert!(out.contains(&format!("container {cid}")), "{out}");
    if on_s3() {
        // Objects are never repaired at startup (reads verify every chunk they serve, and
        // `check` reports the header, above); setting a container aside is the local disk's
        // recovery.
        return;
    }

    let s = Server::start_without_pass(&dir.0);
    // The mover (kicked at startup; a dry-run prune runs it to the end) leaves the damaged
    // container where recovery set it aside, with its quarantine records.
    let r = run_mover(&s, "default", &s.token);
    assert_eq!(r.status, 200);
    let url = s.repo_url("default", &format!("/chunks/{}", mine[0].hex()));
    request("GET", &url, Some(&s.token), &[], None).expect_error(500, "damaged");
    // The other repository is untouched.
    assert_restores(&s, "other", &other_token, &theirs);
    let (code, out) = cli(&dir.0, &["check", "other"]);
    assert_eq!(code, 0, "{out}");
    // The damaged container's chunks are quarantined: asked for again, the version is damaged.
    assert_eq!(
        missing(&s, "default", &s.token, &mine.iter().collect::<Vec<_>>()).len(),
        mine.len()
    );
    assert_eq!(
        damage_of_versions(&s, "default", &s.token),
        vec![(v1, 6, true)]
    );
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("container {cid} is damaged")),
        "{out}"
    );
    assert!(out.contains(&format!("version {v1} is damaged")), "{out}");
    // Uploads go on, into a new container; uploading the chunks again heals the version.
    let r = upload_to(&s, "default", &s.token, &mine);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["stored"], 6);
    assert_eq!(
        damage_of_versions(&s, "default", &s.token),
        vec![(v1, 0, false)]
    );
    assert_restores(&s, "default", &s.token, &mine);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("container {cid} is damaged")),
        "{out}"
    );
}

#[test]
fn chunk_bit_flip_is_never_served_and_heals_on_upload() {
    let dir = TempDir::new("chunkflip");
    // No search cache: its warm-up after each commit would hold the chunks' checked bytes,
    // and step 5 is about the search's own check of what it reads.
    let s = Server::start_with(
        &dir.0,
        &[("DITTO_DELTA", "0"), ("DITTO_SEARCH_CACHE_MB", "0")],
        None,
    );
    let t = s.token.clone();
    let cs = chunks(3, 8);
    assert_eq!(upload_to(&s, "default", &t, &cs).status, 200);
    let v1 = commit(&s, "default", &t, "all", &cs);
    let v2 = commit(&s, "default", &t, "tail", &cs[4..]);
    let (_, out) = cli(&dir.0, &["check", "default"]);
    assert!(out.starts_with("OK") || out.contains("\nOK"), "{out}");

    // Flip one bit in the data of chunks 0 (zstd), 1 (raw) and 2 (zstd).
    let flip_chunk = |c: &TestChunk| {
        let (cid, off) = chunk_place(&s, "default", &t, &c.hex());
        flip(&container_file(&dir.0, cid), off + 100, 0x10);
    };
    for c in &cs[..3] {
        flip_chunk(c);
    }
    // 1. A single read finds it: an explicit error, never the wrong bytes.
    let r = get_chunk(&s, &t, &cs[1]);
    let j = r.expect_error(500, "damaged");
    assert_eq!(j["damaged"], json!([cs[1].hex()]));
    // 2. A restore read (decoded) finds chunk 0, before any byte is sent.
    let get = |fps: Vec<String>, decode: bool| {
        post_json(
            &s.repo_url("default", "/chunks/get"),
            &t,
            &json!({ "fingerprints": fps, "decode": decode }),
        )
    };
    let r = get(vec![cs[5].hex(), cs[0].hex()], true);
    assert_eq!(
        r.expect_error(500, "damaged")["damaged"],
        json!([cs[0].hex()])
    );
    // ... and asked again, it is known damaged (quarantined).
    let r = get(vec![cs[0].hex(), cs[1].hex()], false);
    let j = r.expect_error(500, "damaged");
    assert_eq!(j["damaged"], json!([cs[0].hex(), cs[1].hex()]));
    let r = get_chunk(&s, &t, &cs[0]);
    r.expect_error(500, "damaged");
    // 3. `check` finds chunk 2 (and quarantines it); the server then asks for it too.
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("chunk {} is damaged", cs[2].hex())),
        "{out}"
    );
    assert!(out.contains(&format!("version {v1} is damaged")), "{out}");
    assert!(!out.contains(&format!("version {v2} is damaged")), "{out}");
    let all: Vec<&TestChunk> = cs.iter().collect();
    assert_eq!(
        missing(&s, "default", &t, &all),
        vec![cs[0].hex(), cs[1].hex(), cs[2].hex()]
    );
    assert_eq!(
        damage_of_versions(&s, "default", &t),
        vec![(v1, 3, true), (v2, 0, false)]
    );
    // A version cannot be committed on a damaged chunk.
    let m = json!({ "source": "s", "time": 1, "entries": [{ "path": "x", "kind": "file",
        "size": cs[0].raw.len(), "mtime": 0, "recipe": [cs[0].hex()] }] });
    post_json(&s.repo_url("default", "/versions"), &t, &m).expect_error(409, "missing_chunks");
    // 4. Chunk 3 (raw) is damaged now and found by nobody yet: uploading it again checks the
    // stored copy and replaces it. The quarantined ones are stored anew. Every version
    // restores again.
    flip_chunk(&cs[3]);
    let r = upload_to(&s, "default", &t, &cs[..4]);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["stored"], 4, "{}", r.json());
    assert!(missing(&s, "default", &t, &all).is_empty());
    assert_eq!(
        damage_of_versions(&s, "default", &t),
        vec![(v1, 0, false), (v2, 0, false)]
    );
    assert_restores(&s, "default", &t, &cs);
    let r = get_chunk(&s, &t, &cs[1]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, cs[1].raw);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
    // The healed chunks keep the version that first referenced them.
    let st = request("GET", &s.repo_url("default", "/stats"), Some(&t), &[], None).json();
    assert_eq!(st["chunks"], 8);
    // 5. The server's search checks what it reads: chunk 7 (raw) damaged fails the search
    // with the damage and quarantines it, never answering hits from the wrong bytes. (With
    // the cache on, a search scans what was checked before from memory, tests/search.rs.)
    flip_chunk(&cs[7]);
    let j = post_json(
        &s.repo_url("default", "/search"),
        &t,
        &json!({ "keywords": ["ditto"] }),
    )
    .expect_error(500, "damaged");
    assert_eq!(j["damaged"], json!([cs[7].hex()]));
    assert_eq!(missing(&s, "default", &t, &all), vec![cs[7].hex()]);
    // The next search names the quarantined chunk as damaged too (before, a 404 said it
    // was never stored).
    let j = post_json(
        &s.repo_url("default", "/search"),
        &t,
        &json!({ "keywords": ["ditto"] }),
    )
    .expect_error(500, "damaged");
    assert_eq!(j["damaged"], json!([cs[7].hex()]));
}

/// A search scans the chunks its cache holds without locating them, except in a repository
/// with a quarantined chunk: a cached chunk found damaged on disk since fails the search
/// with the damage, as an uncached one does (the cache's copy was checked when cached).
#[test]
fn a_search_names_a_quarantined_chunk_its_cache_holds() {
    let dir = TempDir::new("search-held-damaged");
    let s = Server::start_with(&dir.0, &[("DITTO_DELTA", "0")], None);
    let t = s.token.clone();
    let cs = chunks(5, 6);
    assert_eq!(upload_to(&s, "default", &t, &cs).status, 200);
    commit(&s, "default", &t, "all", &cs);
    let url = s.repo_url("default", "/search");
    let body = json!({ "keywords": ["ditto"] });
    // The first search fills the cache (if the warm-up has not); the second scans every
    // chunk from it and reads no container.
    let r = post_json(&url, &t, &body);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(post_json(&url, &t, &body).json()["stored_bytes_read"], 0);
    // Chunk 2 damaged on disk and found by a read: quarantined, though the cache holds it.
    let (cid, off) = chunk_place(&s, "default", &t, &cs[2].hex());
    flip(&container_file(&dir.0, cid), off + 100, 0x10);
    get_chunk(&s, &t, &cs[2]).expect_error(500, "damaged");
    let j = post_json(&url, &t, &body).expect_error(500, "damaged");
    assert_eq!(j["damaged"], json!([cs[2].hex()]));
}

#[test]
fn verify_endpoint_and_partial_check() {
    let dir = TempDir::new("verify");
    let s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    let cs = chunks(4, 6);
    assert_eq!(upload_to(&s, "default", &t, &cs).status, 200);
    let v = commit(&s, "default", &t, "f", &cs);
    let url = s.repo_url("default", "/verify");
    let r = post_json(&url, &t, &json!({}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let j = r.json();
    assert_eq!(j["ok"], true, "{j}");
    assert_eq!(j["chunks"], 6);
    let r = request("POST", &url, Some(&t), &[], Some(b""));
    assert_eq!(r.json()["ok"], true);
    post_json(&url, &t, &json!({ "subset": "3/2" })).expect_error(400, "bad_request");
    post_json(&url, &t, &json!({ "subset": "0%" })).expect_error(400, "bad_request");

    let (cid, off) = chunk_place(&s, "default", &t, &cs[2].hex());
    flip(&container_file(&dir.0, cid), off + 7, 0x01);
    // A subset that leaves the container out reads nothing of it.
    let other_part = if cid % 2 == 0 { "2/2" } else { "1/2" };
    let j = post_json(&url, &t, &json!({ "subset": other_part })).json();
    assert_eq!(j["chunks"], 0, "{j}");
    let (code, out) = cli(
        &dir.0,
        &["check", "default", "--read-data-subset", other_part],
    );
    assert_eq!(code, 0, "{out}");
    let j = post_json(&url, &t, &json!({ "subset": "100%" })).json();
    assert_eq!(j["ok"], false, "{j}");
    assert_eq!(j["damaged_chunks"], json!([cs[2].hex()]));
    assert_eq!(
        j["damaged_versions"],
        json!([{ "id": v, "damaged_chunks": 1 }])
    );
    let (code, out) = cli(&dir.0, &["check", "default", "--read-data-subset", "50%"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("version {v} is damaged")), "{out}");
    let (code, _) = cli(&dir.0, &["check", "default", "--read-data-subset", "x"]);
    assert_eq!(code, 1);
}

#[test]
fn damaged_or_cut_newest_container_does_not_stop_uploads() {
    if on_s3() {
        return; // objects take no appends: there is no newest container to reopen
    }
    let dir = TempDir::new("newest");
    let mut s = Server::start_without_pass(&dir.0);
    let first = chunks(5, 4);
    assert_eq!(upload_to(&s, "default", &s.token, &first).status, 200);
    let v1 = commit(&s, "default", &s.token, "one", &first);
    let (cid, _) = chunk_place(&s, "default", &s.token, &first[0].hex());
    assert!(s.stop(Duration::from_secs(10)).is_some());
    // Damaged magic in the only (so newest, open) container.
    flip(&container_file(&dir.0, cid), 0, 0x20);
    let mut s = Server::start_without_pass(&dir.0);
    let second = chunks(6, 4);
    let r = upload_to(&s, "default", &s.token, &first);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["stored"], 4);
    assert_eq!(upload_to(&s, "default", &s.token, &second).status, 200);
    assert_eq!(
        damage_of_versions(&s, "default", &s.token),
        vec![(v1, 0, false)]
    );
    let v2 = commit(&s, "default", &s.token, "two", &second);
    let (cid2, _) = chunk_place(&s, "default", &s.token, &second[3].hex());
    assert_ne!(cid2, cid);
    assert!(s.stop(Duration::from_secs(10)).is_some());

    // The newest container loses its tail (the disk lied about an fsync): the chunks that
    // lay there are quarantined and the version that needs them is marked damaged.
    let path = container_file(&dir.0, cid2);
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 1000)
        .unwrap();
    let s = Server::start_without_pass(&dir.0);
    let damage = damage_of_versions(&s, "default", &s.token);
    assert_eq!(damage[0], (v1, 0, false));
    assert_eq!(damage[1].0, v2);
    assert!(damage[1].2 && damage[1].1 >= 1, "{damage:?}");
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("version {v2} is damaged")), "{out}");
    let third = chunks(7, 2);
    assert_eq!(upload_to(&s, "default", &s.token, &third).status, 200);
    assert_eq!(upload_to(&s, "default", &s.token, &second).status, 200);
    assert_eq!(
        damage_of_versions(&s, "default", &s.token)[1],
        (v2, 0, false)
    );
    assert_restores(&s, "default", &s.token, &second);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn manifest_of_100_mb_with_content_length_is_accepted() {
    let dir = TempDir::new("bigmanifest");
    let s = Server::start_without_pass(&dir.0);
    let c = TestChunk::new(text_bytes(9, 1000), true);
    assert_eq!(
        upload_to(&s, "default", &s.token, std::slice::from_ref(&c)).status,
        200
    );
    // 100 MB: many entries plus an unknown field (ignored) to reach the size.
    let entries: Vec<Value> = (0..20_000)
        .map(|i| {
            json!({ "path": format!("d/file-{i:08}"), "kind": "file", "size": 1000,
                          "mtime": 0, "recipe": [c.hex()] })
        })
        .collect();
    let head = format!(
        r#"{{"source":"big","time":1,"entries":{},"pad":""#,
        serde_json::to_string(&entries).unwrap()
    );
    let mut body = head.into_bytes();
    body.resize(100_000_000 - 2, b'x');
    body.extend_from_slice(b"\"}");
    assert_eq!(body.len(), 100_000_000);
    // ureq sends a Content-Length with a byte body, as browsers do.
    let r = request(
        "POST",
        &s.repo_url("default", "/versions"),
        Some(&s.token),
        &[("Content-Type", "application/json")],
        Some(&body),
    );
    assert_eq!(
        r.status,
        201,
        "{}",
        String::from_utf8_lossy(&r.body[..r.body.len().min(300)])
    );
    assert_eq!(r.json()["stats"]["files"], 20_000);
}

#[test]
fn data_dir_and_files_are_private() {
    let dir = TempDir::new("modes");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = Server::start_without_pass(&dir.0);
    let cs = chunks(8, 2);
    assert_eq!(upload_to(&s, "default", &s.token, &cs).status, 200);
    commit(&s, "default", &s.token, "f", &cs);
    let (cid, _) = chunk_place(&s, "default", &s.token, &cs[0].hex());
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir.0), 0o700);
    // On object storage the container files are the object store's, not the server's.
    let container = (!on_s3()).then(|| container_file(&dir.0, cid));
    if let Some(container) = &container {
        for d in [
            dir.0.join("repos"),
            container.parent().unwrap().to_path_buf(),
        ] {
            assert_eq!(mode(&d), 0o700, "{}", d.display());
        }
    }
    let index_files: &[&str] = if on_sqlite() {
        &["ditto.sqlite3", "ditto.sqlite3-wal", "ditto.sqlite3-shm"]
    } else {
        &[]
    };
    for f in index_files
        .iter()
        .chain(&["default-repo.token", "server.lock"])
    {
        assert_eq!(mode(&dir.0.join(f)), 0o600, "{f}");
    }
    if let Some(container) = &container {
        assert_eq!(mode(container), 0o600);
    }
}

#[test]
fn removed_wal_refuses_writes_and_keeps_what_was_acknowledged() {
    if !on_sqlite() {
        return; // SQLite's write-ahead log; PostgreSQL keeps its own
    }
    let dir = TempDir::new("walgone");
    let mut s = Server::start_without_pass(&dir.0);
    let cs = chunks(10, 4);
    assert_eq!(upload_to(&s, "default", &s.token, &cs[..2]).status, 200);
    let v1 = commit(&s, "default", &s.token, "f", &cs[..2]);
    std::fs::remove_file(dir.0.join("ditto.sqlite3-wal")).unwrap();
    let r = upload_to(&s, "default", &s.token, &cs[2..]);
    let j = r.expect_error(503, "wal_lost");
    assert!(j["error"].as_str().unwrap().contains("restart"), "{j}");
    post_json(
        &s.repo_url("default", "/versions"),
        &s.token,
        &json!({ "source": "s", "time": 1, "entries": [] }),
    )
    .expect_error(503, "wal_lost");
    s.kill9();
    let s = Server::start_without_pass(&dir.0);
    let vs = damage_of_versions(&s, "default", &s.token);
    assert_eq!(vs, vec![(v1, 0, false)]);
    assert_restores(&s, "default", &s.token, &cs[..2]);
    assert_eq!(upload_to(&s, "default", &s.token, &cs[2..]).status, 200);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn out_of_space_is_507_and_nothing_half_stored() {
    if on_s3() {
        return; // containers are written to the object store, not under the file size limit
    }
    let dir = TempDir::new("nospace");
    // A file size limit stands in for a full disk: writes past it fail (EFBIG).
    let s = Server::start_with(&dir.0, NO_PASS, Some(1 << 20));
    let mut acked: Vec<TestChunk> = Vec::new();
    let mut refused = None;
    for i in 0..20u64 {
        let cs: Vec<TestChunk> = (0..3)
            .map(|j| TestChunk::new(rand_bytes(1000 + i * 10 + j, 90_000), false))
            .collect();
        let r = upload_to(&s, "default", &s.token, &cs);
        if r.status == 200 {
            acked.extend(cs);
        } else {
            refused = Some(r);
            break;
        }
    }
    let r = refused.expect("the limit was never reached");
    let j = r.expect_error(507, "no_space");
    assert!(j["error"].as_str().unwrap().contains("out of space"), "{j}");
    assert!(!acked.is_empty());
    // Reads still work, and everything acknowledged is intact after a restart with room.
    assert_restores(&s, "default", &s.token, &acked);
    drop(s);
    let s = Server::start_without_pass(&dir.0);
    assert_restores(&s, "default", &s.token, &acked);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn idle_and_slow_header_connections_are_closed() {
    let dir = TempDir::new("idle");
    let s = Server::start_with(&dir.0, &[("HEADER_TIMEOUT", "1"), NO_PASS[0]], None);
    let addr = s.base.strip_prefix("http://").unwrap().to_string();
    let closed_within = |mut c: std::net::TcpStream| {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let t0 = Instant::now();
        let mut buf = [0u8; 1024];
        loop {
            match c.read(&mut buf) {
                Ok(0) => return t0.elapsed(),
                Ok(_) => continue, // a 408 answer before the close is fine
                // A close with bytes still unread on the server's side arrives as a reset.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return t0.elapsed(),
                Err(e) => panic!("connection still open after {:?}: {e}", t0.elapsed()),
            }
        }
    };
    // Connects and sends nothing.
    let idle = std::net::TcpStream::connect(&addr).unwrap();
    assert!(closed_within(idle) < Duration::from_secs(5));
    // Sends half a header and stops.
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    slow.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    assert!(closed_within(slow) < Duration::from_secs(5));
    // Sends a header and part of the body, then stops: 408, and the connection closes.
    let mut stalled = std::net::TcpStream::connect(&addr).unwrap();
    stalled
        .write_all(b"POST /api/v1/repos/default/chunks/missing HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    stalled
        .write_all(format!("Authorization: Bearer {}\r\n", s.token).as_bytes())
        .unwrap();
    stalled
        .write_all(b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"fin")
        .unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let t0 = Instant::now();
    let mut answer = Vec::new();
    let _ = stalled.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"timeout\""), "{answer}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    // A normal request still works.
    let r = request("GET", &s.url("/api/v1/health"), None, &[], None);
    assert_eq!(r.status, 200);
}

/// A `chunks/get` answer its client stops taking is abandoned after `SEND_TIMEOUT` and its
/// connection cut: what the client had not taken never ends as if the answer were whole.
#[test]
fn an_answer_the_client_stops_taking_is_cut_not_ended() {
    let dir = TempDir::new("sendstall");
    let s = Server::start_with(&dir.0, &[("SEND_TIMEOUT", "1"), NO_PASS[0]], None);
    // 48 MiB that does not compress: more than the answer's first piece, the pieces queued
    // behind it and the sockets' buffers hold together.
    let cs: Vec<TestChunk> = (0..48u64)
        .map(|i| TestChunk::new(rand_bytes(7_000 + i, 1 << 20), false))
        .collect();
    for part in cs.chunks(8) {
        assert_eq!(upload_to(&s, "default", &s.token, part).status, 200);
    }
    let fps: Vec<String> = cs.iter().map(|c| c.hex()).collect();
    let body = json!({ "fingerprints": fps, "decode": true }).to_string();
    let mut c = std::net::TcpStream::connect(s.base.strip_prefix("http://").unwrap()).unwrap();
    write!(
        c,
        "POST /api/v1/repos/default/chunks/get HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        s.token,
        body.len()
    )
    .unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = [0u8; 12];
    c.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    // The client takes nothing for four times the stall.
    std::thread::sleep(Duration::from_secs(4));
    let mut answer = Vec::new();
    match c.read_to_end(&mut answer) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the connection was neither ended nor cut: {e}"),
    }
    assert!(
        answer.len() < 48 << 20,
        "the whole answer arrived ({} bytes): the stall did not abandon it",
        answer.len()
    );
    assert!(
        !answer.ends_with(b"\r\n0\r\n\r\n"),
        "a cut answer ended as if whole ({} bytes)",
        answer.len()
    );
    // The server goes on answering, this request among others.
    let got = get_chunks(&s, "default", &s.token, &fps[..3], true);
    assert_eq!(got[2], cs[2].raw);
}

#[test]
fn versions_that_lost_chunks_before_the_damage_count_are_listed_damaged() {
    if !on_sqlite() {
        return; // a SQLite database from before a migration
    }
    let dir = TempDir::new("lostrows");
    let mut s = Server::start_without_pass(&dir.0);
    let cs = chunks(11, 3);
    assert_eq!(upload_to(&s, "default", &s.token, &cs).status, 200);
    let v = commit(&s, "default", &s.token, "f", &cs);
    assert!(s.stop(Duration::from_secs(10)).is_some());
    // A database from before the count: an older recovery dropped a chunk's row without a
    // trace, and the version has no count yet.
    {
        let db = rusqlite::Connection::open(dir.0.join("ditto.sqlite3")).unwrap();
        db.execute("DELETE FROM chunks WHERE fp = ?1", [&cs[1].fp[..]])
            .unwrap();
        // Schema version 2: without the later migrations' columns either.
        db.execute_batch(
            "UPDATE versions SET damaged = 0;
             ALTER TABLE chunks DROP COLUMN stored_ms;
             ALTER TABLE chunks DROP COLUMN base;
             ALTER TABLE chunks DROP COLUMN saved;
             ALTER TABLE repos DROP COLUMN gc_epoch;
             ALTER TABLE repos DROP COLUMN reclaimed_bytes;
             ALTER TABLE repos DROP COLUMN delta_done;
             ALTER TABLE versions DROP COLUMN manifest_base;
             DROP INDEX containers_by_kind;
             PRAGMA user_version = 2;",
        )
        .unwrap();
    }
    let s = Server::start_without_pass(&dir.0);
    assert_eq!(
        damage_of_versions(&s, "default", &s.token),
        vec![(v, 1, true)]
    );
    assert_eq!(upload_to(&s, "default", &s.token, &cs).json()["stored"], 1);
    assert_eq!(
        damage_of_versions(&s, "default", &s.token),
        vec![(v, 0, false)]
    );
}

/// Column `column` of version `id`'s row, read from whichever index backend the suite runs on
/// (SQLite: the file, read-only; the server is stopped).
fn version_column<T>(dir: &Path, id: i64, column: &str) -> T
where
    T: for<'a> postgres::types::FromSql<'a> + rusqlite::types::FromSql,
{
    let sql = format!("SELECT {column} FROM versions WHERE id = $1");
    if let Some(url) = database_url(dir) {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        return c.query_one(&sql, &[&id]).unwrap().get(0);
    }
    let db = rusqlite::Connection::open_with_flags(
        dir.join("ditto.sqlite3"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    db.query_row(&sql.replace('$', "?"), [id], |r| r.get(0))
        .unwrap()
}

/// The raw `versions.manifest` column of version `id` (the server is stopped).
fn stored_manifest(dir: &Path, id: i64) -> Vec<u8> {
    version_column(dir, id, "manifest")
}

/// The `versions.manifest_base` column of version `id` (the server is stopped).
fn stored_manifest_base(dir: &Path, id: i64) -> Option<i64> {
    version_column(dir, id, "manifest_base")
}

/// Overwrites the `versions.manifest` column of version `id` (the server is stopped), with
/// its base (`manifest_base`) kept, or set to none when `standalone`.
fn set_stored_manifest(dir: &Path, id: i64, blob: &[u8], standalone: bool) {
    let sql = if standalone {
        "UPDATE versions SET manifest = $1, manifest_base = NULL WHERE id = $2"
    } else {
        "UPDATE versions SET manifest = $1 WHERE id = $2"
    };
    if let Some(url) = database_url(dir) {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let n = c.execute(sql, &[&blob, &id]).unwrap();
        assert_eq!(n, 1);
        return;
    }
    let db = rusqlite::Connection::open(dir.join("ditto.sqlite3")).unwrap();
    let n = db
        .execute(&sql.replace('$', "?"), rusqlite::params![blob, id])
        .unwrap();
    assert_eq!(n, 1);
}

/// The bytes after `"manifest":` in a version's GET body, without the closing brace: the
/// JSON the server serves for it, byte for byte.
fn served_manifest(s: &Server, id: i64) -> Vec<u8> {
    let r = request(
        "GET",
        &s.repo_url("default", &format!("/versions/{id}")),
        Some(&s.token),
        &[],
        None,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let key = b"\"manifest\":";
    let at = r.body.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    assert_eq!(r.body.last(), Some(&b'}'));
    r.body[at..r.body.len() - 1].to_vec()
}

#[test]
fn manifests_are_stored_as_one_zstd_frame_and_served_as_committed() {
    let dir = TempDir::new("manifestblob");
    let mut s = Server::start_without_pass(&dir.0);
    let cs = chunks(12, 3);
    assert_eq!(upload_to(&s, "default", &s.token, &cs).status, 200);
    // Many entries naming the same chunks, as a tree of small files does: the JSON is
    // mostly repeated hex, which the stored form must shrink.
    let size: usize = cs.iter().map(|c| c.raw.len()).sum();
    let entries: Vec<Value> = (0..300)
        .map(|i| {
            json!({ "path": format!("d/f{i}"), "kind": "file", "size": size, "mtime": i,
                    "recipe": cs.iter().map(TestChunk::hex).collect::<Vec<_>>() })
        })
        .collect();
    let m = json!({ "source": "src", "time": 7, "entries": entries });
    let r = post_json(&s.repo_url("default", "/versions"), &s.token, &m);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let id = r.json()["id"].as_i64().unwrap();

    let served = served_manifest(&s, id);
    let mut expect = m.clone();
    for e in expect["entries"].as_array_mut().unwrap() {
        e["mode"] = Value::Null; // the server writes the field the client left out
    }
    assert_eq!(serde_json::from_slice::<Value>(&served).unwrap(), expect);
    assert!(s.stop(Duration::from_secs(10)).is_some());
    let stored = stored_manifest(&dir.0, id);
    assert_eq!(stored[..4], [0x28, 0xB5, 0x2F, 0xFD], "not a zstd frame");
    assert!(
        stored.len() * 4 < served.len(),
        "{} stored bytes for {} of JSON",
        stored.len(),
        served.len()
    );
    assert_eq!(zstd::decode_all(&stored[..]).unwrap(), served);
    // Restarted, the server serves the same bytes from the row.
    let s = Server::start_without_pass(&dir.0);
    assert_eq!(served_manifest(&s, id), served);
}

#[test]
fn a_damaged_stored_manifest_is_an_error_not_other_json() {
    let dir = TempDir::new("manifestdamage");
    let mut s = Server::start_without_pass(&dir.0);
    let cs = chunks(13, 2);
    assert_eq!(upload_to(&s, "default", &s.token, &cs).status, 200);
    let good = commit(&s, "default", &s.token, "a", &cs);
    let cut = commit(&s, "default", &s.token, "b", &cs);
    let plain = commit(&s, "default", &s.token, "c", &cs);
    let good_json = served_manifest(&s, good);
    let plain_json = served_manifest(&s, plain);
    assert!(s.stop(Duration::from_secs(10)).is_some());
    let stored = stored_manifest(&dir.0, cut);
    set_stored_manifest(&dir.0, cut, &stored[..stored.len() - 6], false);
    // JSON in the column is not a form the server writes: refused, not guessed at.
    set_stored_manifest(&dir.0, plain, &plain_json, true);
    let s = Server::start_without_pass(&dir.0);
    assert_eq!(served_manifest(&s, good), good_json);
    for (id, what) in [
        (cut, "stored manifest is a damaged zstd frame"),
        (plain, "stored manifest is not a zstd frame"),
    ] {
        let r = request(
            "GET",
            &s.repo_url("default", &format!("/versions/{id}")),
            Some(&s.token),
            &[],
            None,
        );
        let body = r.expect_error(500, "internal");
        let msg = body["error"].as_str().unwrap();
        assert!(msg.contains(&format!("version {id}: {what}")), "{msg}");
    }
    drop(s);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "version {cut}: unreadable manifest: stored manifest is a damaged zstd frame"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "version {plain}: unreadable manifest: stored manifest is not a zstd frame"
        )),
        "{out}"
    );
}

/// Version `v` of the chain test: 200 entries, all alike but for entry `v`'s mtime.
fn chain_manifest(source: &str, v: usize, cs: &[TestChunk]) -> Value {
    let size: usize = cs.iter().map(|c| c.raw.len()).sum();
    let entries: Vec<Value> = (0..200)
        .map(|i| {
            json!({ "path": format!("d/f{i}"), "kind": "file", "size": size,
                    "mtime": if i == v { 1000 + v } else { i }, "mode": null,
                    "recipe": cs.iter().map(TestChunk::hex).collect::<Vec<_>>() })
        })
        .collect();
    json!({ "source": source, "time": v, "entries": entries })
}

#[test]
fn manifests_are_stored_against_the_previous_version_and_survive_deletes() {
    let dir = TempDir::new("manifestchain");
    let mut s = Server::start_without_pass(&dir.0);
    let cs = chunks(14, 3);
    assert_eq!(upload_to(&s, "default", &s.token, &cs).status, 200);
    let post = |s: &Server, m: &Value| {
        let r = post_json(&s.repo_url("default", "/versions"), &s.token, m);
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        r.json()["id"].as_i64().unwrap()
    };
    // Twelve versions of one source, one of another source among them.
    let mut ids = Vec::new();
    let mut other = 0;
    for v in 0..12 {
        ids.push(post(&s, &chain_manifest("src", v, &cs)));
        if v == 3 {
            other = post(&s, &chain_manifest("other", v, &cs));
        }
    }
    let mut served: std::collections::HashMap<i64, Vec<u8>> = ids
        .iter()
        .chain([&other])
        .map(|&id| (id, served_manifest(&s, id)))
        .collect();
    assert!(s.stop(Duration::from_secs(10)).is_some());

    // Each version against its source's previous one, until a chain reaches 8 links.
    let bases: Vec<Option<i64>> = ids
        .iter()
        .map(|&id| stored_manifest_base(&dir.0, id))
        .collect();
    let mut want: Vec<Option<i64>> = vec![None];
    want.extend(ids[..8].iter().map(|&id| Some(id)));
    want.extend([None, Some(ids[9]), Some(ids[10])]);
    assert_eq!(bases, want);
    assert_eq!(stored_manifest_base(&dir.0, other), None);
    let (first, second) = (
        stored_manifest(&dir.0, ids[0]),
        stored_manifest(&dir.0, ids[1]),
    );
    assert!(
        second.len() * 4 < first.len(),
        "{} bytes against the previous version, {} standalone",
        second.len(),
        first.len()
    );

    // Restarted: every version serves the JSON it was committed with.
    let mut s = Server::start_without_pass(&dir.0);
    for (id, json) in &served {
        assert_eq!(&served_manifest(&s, *id), json, "version {id}");
    }
    // Deleting the first version and one in the middle of the chain: the versions stored
    // against them are stored standalone, and every version left reads as before.
    forget(&s, &s.token, &[ids[0], ids[4]]);
    served.remove(&ids[0]);
    served.remove(&ids[4]);
    for (id, json) in &served {
        assert_eq!(&served_manifest(&s, *id), json, "version {id}");
    }
    // A new version goes on from the newest one.
    let next = post(&s, &chain_manifest("src", 12, &cs));
    assert!(s.stop(Duration::from_secs(10)).is_some());
    assert_eq!(stored_manifest_base(&dir.0, ids[1]), None);
    assert_eq!(stored_manifest_base(&dir.0, ids[5]), None);
    assert_eq!(stored_manifest_base(&dir.0, ids[6]), Some(ids[5]));
    assert_eq!(stored_manifest_base(&dir.0, next), Some(ids[11]));
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");

    // A damaged base: the versions stored against it are unreadable too, and say why.
    let stored = stored_manifest(&dir.0, ids[6]);
    set_stored_manifest(&dir.0, ids[6], &stored[..stored.len() - 6], false);
    let s = Server::start_without_pass(&dir.0);
    assert_eq!(served_manifest(&s, ids[5]), served[&ids[5]]);
    let r = request(
        "GET",
        &s.repo_url("default", &format!("/versions/{}", ids[7])),
        Some(&s.token),
        &[],
        None,
    );
    let body = r.expect_error(500, "internal");
    let msg = body["error"].as_str().unwrap();
    assert!(
        msg.contains(&format!(
            "version {}: stored manifest's base: base version {} is unreadable",
            ids[7], ids[6]
        )),
        "{msg}"
    );
    drop(s);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 1, "{out}");
    for id in [ids[6], ids[7], ids[8]] {
        assert!(
            out.contains(&format!("version {id}: unreadable manifest")),
            "{out}"
        );
    }
    assert!(
        !out.contains(&format!("version {}: unreadable", ids[5])),
        "{out}"
    );
}

/// A server for the mover's tests: no delta pass and no search cache (both read the chunks a
/// test damages), every cold chunk moved as soon as it is cold, and `more` settings.
fn mover_server(
    dir: &Path,
    more: &[(&'static str, &'static str)],
) -> (Vec<(&'static str, &'static str)>, Server) {
    let mut env = vec![
        ("DITTO_DELTA", "0"),
        ("DITTO_SEARCH_CACHE_MB", "0"),
        ("DITTO_MOVE_THRESHOLD", "0"),
    ];
    env.extend_from_slice(more);
    let s = Server::start_with(dir, &env, None);
    (env, s)
}

/// Uploads `cs` and commits them twice in one source: all of them, then those from `hot` on,
/// so that the ones before `hot` are cold. Answers the first version's id.
fn commit_cold_head(s: &Server, token: &str, cs: &[TestChunk], hot: usize) -> i64 {
    assert_eq!(upload_to(s, "default", token, cs).status, 200);
    let v1 = commit(s, "default", token, "all", cs);
    commit(s, "default", token, "tail", &cs[hot..]);
    v1
}

/// A chunk quarantined in a container the mover then evacuates stays reported missing: the
/// container's drop takes the quarantine record with it, and the fingerprint set the server
/// answers `chunks/missing` from must not take that for "nothing quarantined since".
#[test]
fn a_quarantined_chunk_stays_missing_after_its_container_is_evacuated() {
    let dir = TempDir::new("quarantine-evacuated");
    let (_, s) = mover_server(&dir.0, &[("DITTO_COMPACT_THRESHOLD", "1")]);
    let t = s.token.clone();
    let cs = chunks(11, 8);
    commit_cold_head(&s, &t, &cs, 4);
    let all: Vec<&TestChunk> = cs.iter().collect();
    // Loads the set (every chunk stored), then damages chunk 1 and has a read quarantine it.
    let (cid, off) = chunk_place(&s, "default", &t, &cs[1].hex());
    assert!(missing(&s, "default", &t, &all).is_empty());
    flip(&container_file(&dir.0, cid), off + 100, 0x10);
    let r = get_chunk(&s, &t, &cs[1]);
    r.expect_error(500, "damaged");
    // Compaction (a prune that deletes nothing: every chunk is referenced) rewrites the
    // container without its dead slot and drops it.
    let r = post_json(
        &s.repo_url("default", "/prune"),
        &t,
        &json!({"dry_run": false}),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(
        !containers(&s, "default", &t)
            .iter()
            .any(|c| c["id"].as_u64() == Some(cid)),
        "container {cid} was evacuated: {}",
        r.json()
    );
    assert_eq!(missing(&s, "default", &t, &all), vec![cs[1].hex()]);
    // Uploaded again, it is stored and every version restores.
    assert_eq!(upload_to(&s, "default", &t, &cs[1..2]).status, 200);
    assert!(missing(&s, "default", &t, &all).is_empty());
    assert_restores(&s, "default", &t, &cs);
}

/// A mover switch that fails part-way (the index refusing a write, as a full disk makes it)
/// keeps the new container its committed parts point into: every chunk still reads back,
/// `check` finds nothing wrong, and the next run goes on from there.
#[test]
fn a_mover_switch_failing_part_way_keeps_what_it_switched() {
    let dir = TempDir::new("switch-fails");
    let (env, mut s) = mover_server(&dir.0, &[]);
    let t = s.token.clone();
    // 300 chunks, 299 of them cold after the second version: the mover re-points them into
    // one archival container in two switch transactions (at most 256 rows each).
    let cs: Vec<TestChunk> = (0..300)
        .map(|i| TestChunk::new(text_bytes(9_000 + i, 1_500), true))
        .collect();
    commit_cold_head(&s, &t, &cs, 299);
    // Restarted, the writer has no container open: the mover may evacuate the uploads'.
    s.stop(Duration::from_secs(10)).expect("clean stop");
    let mut fail = env.clone();
    fail.push(("DITTO_TEST_FAIL_AT", "move:part"));
    let mut s = Server::start_with(&dir.0, &fail, None);
    // The mover that runs at start or the prune's fails on its second part; the other one
    // then moves what is left in parts of fewer rows.
    let r = run_mover(&s, "default", &t);
    assert!(
        r.status == 507
            || (r.status == 200 && r.json()["moved"]["chunks_moved"].as_u64() < Some(299)),
        "{} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    assert_restores(&s, "default", &t, &cs);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
    // Without the failure, the next run finishes the layout.
    s.stop(Duration::from_secs(10)).expect("clean stop");
    let s = Server::start_with(&dir.0, &env, None);
    let r = run_mover(&s, "default", &t);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_restores(&s, "default", &t, &cs);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

/// Damage the mover finds is quarantined even when it leaves nothing to move: the only
/// chunk it was to file elsewhere is the damaged one.
#[test]
fn the_mover_quarantines_damage_it_finds_with_nothing_to_move() {
    let dir = TempDir::new("mover-damage-alone");
    // Only misplaced chunks move (no container is evacuated whole).
    let (env, mut s) = mover_server(&dir.0, &[("DITTO_COMPACT_THRESHOLD", "0")]);
    let t = s.token.clone();
    let cs = chunks(13, 3);
    let v1 = commit_cold_head(&s, &t, &cs, 1);
    // Chunk 0 is cold now; the mover (which waits for backups to be quiet a while) has not
    // filed it elsewhere yet. Damaged while the server is stopped, it is found when the
    // restarted server's mover, which has no container open for uploads, reads it to move it.
    let listed = containers(&s, "default", &t);
    assert_eq!(listed.len(), 1, "nothing moved yet");
    let cid = listed[0]["id"].as_u64().unwrap();
    let off = listed[0]["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["fp"] == cs[0].hex())
        .unwrap()["offset"]
        .as_u64()
        .unwrap();
    s.stop(Duration::from_secs(10)).expect("clean stop");
    flip(&container_file(&dir.0, cid), off + 100, 0x10);
    let s = Server::start_with(&dir.0, &env, None);
    let r = run_mover(&s, "default", &t);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let all: Vec<&TestChunk> = cs.iter().collect();
    assert_eq!(missing(&s, "default", &t, &all), vec![cs[0].hex()]);
    assert!(damage_of_versions(&s, "default", &t).contains(&(v1, 1, true)));
}

/// With the disk full, forgetting a version still frees its chunks: the prune's mover passes
/// copy before they free and fail for want of space, and what only deletes (ICDA, the sweep)
/// still runs. Before, the prune stopped at its first copy: the version was gone, nothing was
/// freed, and the answer said nothing of the request was stored.
#[test]
fn forgetting_a_version_frees_its_chunks_when_the_mover_cannot_copy() {
    let dir = TempDir::new("forget-full");
    let (env, mut s) = mover_server(&dir.0, &[("DITTO_TEST_FAIL_AT", "move:write")]);
    let t = s.token.clone();
    let (old, new) = (chunks(20, 60), chunks(30, 60));
    assert_eq!(upload_to(&s, "default", &t, &old).status, 200);
    let v1 = commit(&s, "default", &t, "a", &old);
    // Restarted, the next upload goes to a container of its own.
    s.stop(Duration::from_secs(10)).expect("clean stop");
    let s = Server::start_with(&dir.0, &env, None);
    assert_eq!(upload_to(&s, "default", &t, &new).status, 200);
    commit(&s, "default", &t, "b", &new);
    let r = forget(&s, &t, &[v1]);
    assert!(
        r.json()["reclaimed_bytes"].as_i64().unwrap() > 0,
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(
        missing(&s, "default", &t, &old.iter().collect::<Vec<_>>()).len(),
        old.len()
    );
    assert_restores(&s, "default", &t, &new);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

/// A version whose manifest cannot be read can still be forgotten: its chunks are left to
/// the sweep. Before, every forget and prune of the repository failed on it with a 500.
#[test]
fn a_version_with_an_unreadable_manifest_can_be_forgotten() {
    let dir = TempDir::new("forget-unreadable");
    let s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    let (ours, theirs) = (chunks(40, 20), chunks(50, 20));
    assert_eq!(upload_to(&s, "default", &t, &ours).status, 200);
    assert_eq!(upload_to(&s, "default", &t, &theirs).status, 200);
    // Another source, so that its manifest is not stored against the damaged one.
    commit_as(&s, "default", &t, "other", "b", &theirs);
    let damaged = commit(&s, "default", &t, "a", &ours);
    drop(s);
    let stored = stored_manifest(&dir.0, damaged);
    set_stored_manifest(&dir.0, damaged, &stored[..stored.len() / 2], true);
    let s = Server::start_without_pass(&dir.0);
    forget(&s, &t, &[damaged]);
    assert_eq!(
        missing(&s, "default", &t, &ours.iter().collect::<Vec<_>>()).len(),
        ours.len(),
        "the forgotten version's chunks are swept"
    );
    assert_restores(&s, "default", &t, &theirs);
    drop(s);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

/// The ids in the default repository's versions list.
fn version_ids(s: &Server, token: &str) -> Vec<i64> {
    damage_of_versions(s, "default", token)
        .into_iter()
        .map(|(id, _, _)| id)
        .collect()
}

/// A forget whose prune fails after the versions were removed says they were removed, with
/// the prune's error beside; the next prune frees what it did not. Before, the answer was a
/// 500, as if nothing had happened.
#[test]
fn a_forget_whose_prune_fails_says_what_it_removed() {
    let dir = TempDir::new("forget-prune-fails");
    let env = [("DITTO_DELTA", "0"), ("DITTO_TEST_FAIL_AT", "prune:icda")];
    let mut s = Server::start_with(&dir.0, &env, None);
    let t = s.token.clone();
    let (old, new) = (chunks(60, 30), chunks(70, 30));
    assert_eq!(upload_to(&s, "default", &t, &old).status, 200);
    let v1 = commit(&s, "default", &t, "a", &old);
    assert_eq!(upload_to(&s, "default", &t, &new).status, 200);
    let v2 = commit(&s, "default", &t, "b", &new);
    let r = forget(&s, &t, &[v1]).json();
    assert_eq!(r["remove"][0]["id"], v1, "{r}");
    assert!(r["prune"].is_null(), "{r}");
    assert!(
        r["prune_error"].as_str().unwrap().contains("prune:icda"),
        "{r}"
    );
    let d = request(
        "DELETE",
        &s.repo_url("default", &format!("/versions/{v2}")),
        Some(&t),
        &[],
        None,
    );
    assert_eq!(d.status, 200, "{}", String::from_utf8_lossy(&d.body));
    assert!(d.json()["prune_error"].is_string(), "{}", d.json());
    assert_eq!(version_ids(&s, &t), Vec::<i64>::new());
    s.stop(Duration::from_secs(10)).expect("clean stop");
    let s = Server::start_with(&dir.0, &env[..1], None);
    let p = post_json(&s.repo_url("default", "/prune"), &t, &json!({}));
    assert_eq!(p.status, 200, "{}", String::from_utf8_lossy(&p.body));
    let all: Vec<&TestChunk> = old.iter().chain(&new).collect();
    assert_eq!(missing(&s, "default", &t, &all).len(), all.len());
    drop(s);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

/// A previewed retention policy applied by its versions removes nothing once the policy
/// would keep one of them: `keep_last 1` previewed with two versions, then the newest
/// deleted (another tab, another device), must not remove the last one. Applied by the
/// versions alone, as the page did, it left the source with none.
#[test]
fn a_previewed_policy_removes_nothing_the_policy_keeps_now() {
    let dir = TempDir::new("forget-previewed");
    let s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    let cs = chunks(80, 10);
    assert_eq!(upload_to(&s, "default", &t, &cs).status, 200);
    let v1 = commit(&s, "default", &t, "a", &cs);
    let v2 = commit(&s, "default", &t, "b", &cs[..5]);
    let url = s.repo_url("default", "/forget");
    // A policy that can keep nothing (every count 0, no keep_within) is refused, previewed
    // or not: the page's form says so before it sends one.
    for dry_run in [true, false] {
        let zero = json!({ "policy": { "keep_last": 0, "keep_daily": 0 }, "dry_run": dry_run });
        let e = post_json(&url, &t, &zero).expect_error(400, "bad_request");
        assert!(e["error"].as_str().unwrap().contains("keep rule"), "{e}");
    }
    assert_eq!(version_ids(&s, &t), vec![v1, v2]);
    let policy = json!({ "keep_last": 1 });
    let preview = post_json(&url, &t, &json!({ "policy": policy, "dry_run": true }));
    assert_eq!(preview.json()["remove"][0]["id"], v1);
    let d = request(
        "DELETE",
        &s.repo_url("default", &format!("/versions/{v2}")),
        Some(&t),
        &[],
        None,
    );
    assert_eq!(d.status, 200);
    let apply = json!({ "policy": policy, "versions": [v1] });
    let e = post_json(&url, &t, &apply).expect_error(409, "changed");
    assert!(
        e["error"].as_str().unwrap().contains("preview again"),
        "{e}"
    );
    assert_eq!(version_ids(&s, &t), vec![v1]);
    assert_restores(&s, "default", &t, &cs);
    // A version committed since the preview is not removed with it: exactly the previewed
    // ones go, while the policy still removes each.
    let v3 = commit(&s, "default", &t, "c", &cs[5..]);
    let v4 = commit(&s, "default", &t, "d", &cs[..1]);
    let r = post_json(&url, &t, &json!({ "policy": policy, "versions": [v1] }));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["remove"],
        json!([{ "id": v1, "source": "src", "time": 1 }])
    );
    assert_eq!(version_ids(&s, &t), vec![v3, v4]);
    // A previewed version gone since is a change too; a source needs its policy.
    post_json(&url, &t, &json!({ "policy": policy, "versions": [v1] }))
        .expect_error(409, "changed");
    post_json(&url, &t, &json!({ "source": "src", "versions": [v3] }))
        .expect_error(400, "bad_request");
}

/// A version dated in the future (a wrong clock, or a backup token's forgery) counts for
/// retention as committed, not as its manifest says: `keep_within 30d` is counted back from
/// the source's newest version, and one dated in year 9999 made every real version expire.
#[test]
fn retention_counts_a_future_version_as_committed() {
    let dir = TempDir::new("forget-future");
    let s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    let cs = chunks(90, 6);
    assert_eq!(upload_to(&s, "default", &t, &cs).status, 200);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let commit_at = |name: &str, time: i64| {
        let m = json!({ "source": "src", "time": time, "entries": [
            { "path": name, "kind": "file", "size": cs[0].raw.len(), "mtime": 0, "mode": null,
              "recipe": [cs[0].hex()] } ] });
        let r = post_json(&s.repo_url("default", "/versions"), &t, &m);
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        r.json()["id"].as_i64().unwrap()
    };
    let day = 86_400_000;
    let v1 = commit_at("a", now - 2 * day);
    let v2 = commit_at("b", now - day);
    let forged = commit_at("c", 253_402_300_799_000);
    let r = post_json(
        &s.repo_url("default", "/forget"),
        &t,
        &json!({ "policy": { "keep_within": "30d" }, "dry_run": true }),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let j = r.json();
    assert_eq!(j["remove"], json!([]), "{j}");
    let kept: Vec<i64> = j["keep"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_i64().unwrap())
        .collect();
    assert_eq!(kept, vec![forged, v2, v1], "{j}");
    assert!(j["keep"][0]["time"].as_i64().unwrap() <= now + day, "{j}");
}

/// Runs `cmd` (a `serve`), which must refuse to start; answers what it wrote to stderr.
fn refused_start(cmd: &mut std::process::Command) -> String {
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("the server started");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success(), "{err}");
    err
}

/// A server given an index that did not write the data directory's containers (its SQLite
/// file moved away, so a fresh one is made; or another database) would find every container
/// unacknowledged and remove it: it removes nothing and does not start, naming the cause;
/// with its own index back, every version restores. So too when the containers are all in
/// a repository other than the default one, which the new index does not know (before, on
/// object storage only the prefixes of the default repository and those the index knew
/// were listed, and the server started).
#[test]
fn an_index_that_did_not_write_the_containers_removes_nothing() {
    foreign_index_refused("default");
    foreign_index_refused("other");
}

fn foreign_index_refused(repo: &str) {
    let dir = TempDir::new("foreign-index");
    let mut s = Server::start_without_pass(&dir.0);
    let (repo_id, token) = if repo == "default" {
        (1, s.token.clone())
    } else {
        let (code, token) = cli(&dir.0, &["repo", "create", repo]);
        assert_eq!(code, 0, "{token}");
        (2, token.trim().to_string())
    };
    let cs = chunks(31, 6);
    assert_eq!(upload_to(&s, repo, &token, &cs[..3]).status, 200);
    assert_eq!(upload_to(&s, repo, &token, &cs[3..]).status, 200);
    commit(&s, repo, &token, "f", &cs);
    assert!(s.stop(Duration::from_secs(30)).is_some());
    let files = (!on_s3()).then(|| container_files(&dir.0, repo_id));
    assert!(files.as_ref().is_none_or(|f| !f.is_empty()));

    let other = TempDir::new("foreign-index-db");
    let aside = dir.0.join("aside");
    let index_files = ["ditto.sqlite3", "ditto.sqlite3-wal", "ditto.sqlite3-shm"];
    let mut cmd = server_cmd(&dir.0);
    cmd.arg("serve")
        .env("PORT", "0")
        .env("WEB_DIR", dir.0.join("no-web"));
    if on_sqlite() {
        std::fs::create_dir(&aside).unwrap();
        for f in index_files {
            let _ = std::fs::rename(dir.0.join(f), aside.join(f));
        }
    } else {
        cmd.env("DATABASE_URL", database_url(&other.0).unwrap());
    }
    let err = refused_start(&mut cmd);
    assert!(
        err.contains("not the index these containers were written with"),
        "{repo}: {err}"
    );
    if let Some(files) = &files {
        assert_eq!(&container_files(&dir.0, repo_id), files);
    }

    if on_sqlite() {
        for f in index_files {
            let _ = std::fs::remove_file(dir.0.join(f));
            let _ = std::fs::rename(aside.join(f), dir.0.join(f));
        }
    }
    let s = Server::start_without_pass(&dir.0);
    assert_restores(&s, repo, &token, &cs);
    let (code, out) = cli(&dir.0, &["check", repo]);
    assert_eq!(code, 0, "{out}");
}

/// An upload whose commit went through but was reported failed (a connection lost as the
/// database answered) keeps the container its rows point into. Before, the error path
/// deleted every container the upload had created, and the committed chunks were damaged.
#[test]
fn an_upload_whose_commit_is_reported_failed_after_going_through_loses_nothing() {
    let dir = TempDir::new("commit-lost");
    let mut env = NO_PASS.to_vec();
    env.push(("DITTO_TEST_FAIL_AT", "ingest:commit"));
    let mut s = Server::start_with(&dir.0, &env, None);
    let t = s.token.clone();
    let cs = chunks(40, 8);
    let r = upload_to(&s, "default", &t, &cs);
    assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    // Committed after all: served at once, and after a restart (recovery keeps the file).
    assert!(missing(&s, "default", &t, &cs.iter().collect::<Vec<_>>()).is_empty());
    assert_restores(&s, "default", &t, &cs);
    s.stop(Duration::from_secs(10)).expect("clean stop");
    let s = Server::start_without_pass(&dir.0);
    assert_restores(&s, "default", &t, &cs);
    commit(&s, "default", &t, "a", &cs);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

/// An upload whose commit fails as it is made, without going through, leaves the containers
/// it wrote to recovery: the request cannot tell such a commit from one that went through
/// and shows only later (a connection lost as the database answered, a commit waiting for a
/// standby), whose rows would point into a deleted container. Its chunks are not stored (a
/// retry stores them), and the next start removes the containers no row names. Before, the
/// error path deleted every container the index did not show yet.
#[test]
fn an_upload_whose_commit_fails_leaves_its_containers_to_recovery() {
    let dir = TempDir::new("commit-failed");
    let mut env = NO_PASS.to_vec();
    env.push(("DITTO_TEST_FAIL_AT", "ingest:uncommitted"));
    let mut s = Server::start_with(&dir.0, &env, None);
    let t = s.token.clone();
    let repo_id = 1;
    let cs = chunks(42, 8);
    let r = upload_to(&s, "default", &t, &cs);
    assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    let all: Vec<&TestChunk> = cs.iter().collect();
    assert_eq!(missing(&s, "default", &t, &all).len(), cs.len());
    assert!(
        !container_files(&dir.0, repo_id).is_empty(),
        "the container written is kept"
    );
    s.stop(Duration::from_secs(10)).expect("clean stop");
    let s = Server::start_without_pass(&dir.0);
    assert!(
        container_files(&dir.0, repo_id).is_empty(),
        "recovery removes it"
    );
    assert_eq!(upload_to(&s, "default", &t, &cs).status, 200);
    commit(&s, "default", &t, "a", &cs);
    assert_restores(&s, "default", &t, &cs);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

/// A file system error opening a container (permissions, too many open files, EIO) says
/// nothing of its bytes: during an upload the upload fails, at start the server does not
/// start and names it; nothing is sealed or quarantined, and once the cause is gone every
/// chunk is served and uploads append again. Before, both set the container aside and
/// quarantined all its chunks.
#[test]
fn an_io_error_opening_a_container_quarantines_nothing() {
    if on_s3() {
        return; // objects are neither opened for appends nor by recovery
    }
    let dir = TempDir::new("open-eio");
    // Without the layout a commit leaves the newest container open for appends.
    let env = [("DITTO_DELTA", "0"), ("DITTO_LAYOUT", "off")];
    let mut s = Server::start_with(&dir.0, &env, None);
    let t = s.token.clone();
    let cs = chunks(41, 6);
    assert_eq!(upload_to(&s, "default", &t, &cs[..3]).status, 200);
    commit(&s, "default", &t, "a", &cs[..3]);
    assert!(s.stop(Duration::from_secs(10)).is_some());

    let failing = [env[0], env[1], ("DITTO_TEST_FAIL_AT", "append:open")];
    let mut s = Server::start_with(&dir.0, &failing, None);
    let r = upload_to(&s, "default", &t, &cs[3..]);
    assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    assert!(missing(&s, "default", &t, &cs[..3].iter().collect::<Vec<_>>()).is_empty());
    assert!(s.stop(Duration::from_secs(10)).is_some());

    let mut cmd = server_cmd(&dir.0);
    cmd.arg("serve")
        .env("PORT", "0")
        .env("WEB_DIR", dir.0.join("no-web"))
        .envs(env)
        .env("DITTO_TEST_FAIL_AT", "recover:open");
    let err = refused_start(&mut cmd);
    assert!(err.contains("Nothing was set aside"), "{err}");

    let s = Server::start_with(&dir.0, &env, None);
    assert!(missing(&s, "default", &t, &cs[..3].iter().collect::<Vec<_>>()).is_empty());
    assert_eq!(upload_to(&s, "default", &t, &cs[3..]).status, 200);
    assert_eq!(
        containers(&s, "default", &t).len(),
        1,
        "appended to the same container"
    );
    commit(&s, "default", &t, "b", &cs);
    assert_restores(&s, "default", &t, &cs);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

/// A search over a container cut short while the server runs names the chunks past the cut
/// as damaged (500 `damaged`; quarantined, so reported missing for the next upload to heal),
/// as any read does, and reads the chunks before the cut as usual. Before, it took the short
/// container for one moved away, searched three times and answered "kept moving".
#[test]
fn a_search_over_a_cut_container_names_the_damage() {
    if on_s3() {
        return; // the test cuts a file
    }
    let dir = TempDir::new("search-cut");
    let (_, s) = mover_server(&dir.0, &[]);
    let t = s.token.clone();
    let cs = chunks(42, 6);
    assert_eq!(upload_to(&s, "default", &t, &cs).status, 200);
    commit(&s, "default", &t, "a", &cs);
    let (cid, last) = chunk_place(&s, "default", &t, &cs[5].hex());
    assert!(cs[..5]
        .iter()
        .all(|c| chunk_place(&s, "default", &t, &c.hex()) < (cid, last)));
    let path = container_file(&dir.0, cid);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(last + 10)
        .unwrap();
    let r = post_json(
        &s.repo_url("default", "/search"),
        &t,
        &json!({ "keywords": ["needle"] }),
    );
    let e = r.expect_error(500, "damaged");
    assert_eq!(e["damaged"], json!([cs[5].hex()]), "{e}");
    assert_eq!(
        missing(&s, "default", &t, &cs.iter().collect::<Vec<_>>()),
        vec![cs[5].hex()]
    );
    assert_eq!(upload_to(&s, "default", &t, &cs[5..]).status, 200);
    let r = post_json(
        &s.repo_url("default", "/search"),
        &t,
        &json!({ "keywords": ["needle"] }),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

/// A chunk whose version is forgotten between its lookup and its read is answered not
/// stored (404), as it would be a moment later, and nothing is quarantined. Before, the read
/// found its container gone and took that for damage: 500 `damaged`, and a false
/// "quarantined" in the log.
#[test]
fn a_read_racing_a_prune_answers_not_stored() {
    let dir = TempDir::new("read-prune");
    let (mut env, mut s) = mover_server(&dir.0, &[]);
    let t = s.token.clone();
    let (old, new) = (chunks(43, 4), chunks(44, 4));
    assert_eq!(upload_to(&s, "default", &t, &old).status, 200);
    let v1 = commit(&s, "default", &t, "a", &old);
    // Restarted, the next upload goes to a container of its own.
    s.stop(Duration::from_secs(10)).expect("clean stop");
    env.push(("DITTO_TEST_DELAY_AT", "read:located:2000"));
    let s = Server::start_with(&dir.0, &env, None);
    assert_eq!(upload_to(&s, "default", &t, &new).status, 200);
    commit(&s, "default", &t, "b", &new);
    let r = std::thread::scope(|sc| {
        let read = sc.spawn(|| get_chunk(&s, &t, &old[0]));
        std::thread::sleep(Duration::from_millis(300));
        forget(&s, &t, &[v1]);
        read.join().unwrap()
    });
    r.expect_error(404, "not_found");
    assert!(
        !s.stderr.lock().unwrap().contains("quarantined"),
        "{}",
        s.stderr.lock().unwrap()
    );
    assert_restores(&s, "default", &t, &new);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

/// A new container is never written over a file or object already at its id (docs/STORAGE.md,
/// "Object storage"), such as one another server with an index of its own put in the same
/// bucket and prefix: that one stays as it was, the upload that met it is refused without
/// being acknowledged, and the upload sent again is stored under the next id.
#[test]
fn a_container_id_already_taken_is_never_written_over() {
    let dir = TempDir::new("taken-id");
    let s = Server::start_without_pass(&dir.0);
    assert_eq!(
        upload_to(&s, "default", &s.token, &chunks(1, 2)).status,
        200
    );
    let top = containers(&s, "default", &s.token)
        .iter()
        .map(|c| c["id"].as_u64().unwrap())
        .max()
        .unwrap();
    let foreign = common::container_file(&dir.0, 1, top + 1);
    std::fs::create_dir_all(foreign.parent().unwrap()).unwrap();
    std::fs::write(&foreign, b"another server's container").unwrap();
    // Chunks of 1 MiB: on disk the open container fills within a few uploads and the next
    // one takes a new id; on object storage every upload does.
    let mut stored = Vec::new();
    let mut refused = 0;
    for i in 0..8 {
        let c = vec![TestChunk::new(rand_bytes(500 + i, 1 << 20), false)];
        let r = upload_to(&s, "default", &s.token, &c);
        if r.status != 200 {
            refused += 1;
            let e = r.json();
            assert_eq!(r.status, 500, "{e}");
            assert_eq!(missing(&s, "default", &s.token, &[&c[0]]), [c[0].hex()]);
            let again = upload_to(&s, "default", &s.token, &c);
            assert_eq!(
                again.status,
                200,
                "{}",
                String::from_utf8_lossy(&again.body)
            );
        }
        stored.push(c.into_iter().next().unwrap());
    }
    assert_eq!(refused, 1);
    assert_eq!(
        std::fs::read(&foreign).unwrap(),
        b"another server's container"
    );
    commit(&s, "default", &s.token, "big.bin", &stored);
    assert_restores(&s, "default", &s.token, &stored);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}
