//! The storage server over HTTP: the real binary, a temporary data directory.
//! Without the delta pass (`common::NO_PASS`): these tests read container tables and bytes
//! and compare placements across requests, which the pass would change in the background.

mod common;

use common::*;
use serde_json::json;
use std::time::Duration;
use wasm_core::{
    format::{
        bundle::{encode_entry_header, encode_header, Codec, EntryHeader, MAX_CHUNK_RAW},
        container::{ContainerHeader, TableEntry, HEADER_LEN, TABLE_ENTRY_LEN},
    },
    hash::{fingerprint, to_hex},
};

/// The repository's version list (GET `versions`).
fn versions_list(s: &Server, token: &str) -> serde_json::Value {
    request(
        "GET",
        &s.repo_url("default", "/versions"),
        Some(token),
        &[],
        None,
    )
    .json()
}

fn sample_chunks(seed: u64, n: usize) -> Vec<TestChunk> {
    (0..n)
        .map(|i| {
            let s = seed * 1000 + i as u64;
            let len = 1 + (s as usize * 7919) % 60_000;
            if i % 2 == 0 {
                TestChunk::new(text_bytes(s, len), true)
            } else {
                TestChunk::new(rand_bytes(s, len), false)
            }
        })
        .collect()
}

#[test]
fn round_trip() {
    let dir = TempDir::new("roundtrip");
    let mut s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    assert!(s
        .line
        .starts_with("Ditto is running. Open http://127.0.0.1:"));
    assert_eq!(t.len(), 48);
    let a = agent();

    let chunks = sample_chunks(1, 40);
    let hexes: Vec<String> = chunks.iter().map(TestChunk::hex).collect();
    // 1. everything is missing (duplicates in the request are reported once)
    let mut ask = hexes.clone();
    ask.push(hexes[0].to_uppercase());
    let r = post_json(
        &s.repo_url("default", "/chunks/missing"),
        &t,
        &json!({ "fingerprints": ask }),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["missing"], json!(hexes));

    // 2. upload in two bundles, the second overlapping the first
    let r = upload(&a, &s, &t, &chunks[..25]).unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let j = r.json();
    assert_eq!(
        (
            j["chunks"].as_u64(),
            j["stored"].as_u64(),
            j["duplicates"].as_u64()
        ),
        (Some(25), Some(25), Some(0))
    );
    let raw_total: usize = chunks[..25].iter().map(|c| c.raw.len()).sum();
    assert_eq!(j["raw_bytes"].as_u64(), Some(raw_total as u64));
    let r = upload(&a, &s, &t, &chunks[20..]).unwrap();
    let j = r.json();
    assert_eq!(
        (j["stored"].as_u64(), j["duplicates"].as_u64()),
        (Some(15), Some(5))
    );
    // retry: idempotent
    let j = upload(&a, &s, &t, &chunks).unwrap().json();
    assert_eq!(
        (j["stored"].as_u64(), j["duplicates"].as_u64()),
        (Some(0), Some(40))
    );

    // binary missing query
    let mut body: Vec<u8> = chunks[..3].iter().flat_map(|c| c.fp).collect();
    let absent = fingerprint(b"never uploaded");
    body.extend_from_slice(&absent);
    let r = request(
        "POST",
        &s.repo_url("default", "/chunks/missing"),
        Some(&t),
        &[("Content-Type", "application/octet-stream")],
        Some(&body),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, absent.to_vec());
    let r = post_json(
        &s.repo_url("default", "/chunks/missing"),
        &t,
        &json!({ "fingerprints": hexes }),
    );
    assert_eq!(r.json()["missing"], json!([]));

    // chunk lengths: raw lengths in request order, 0 for an absent chunk (binary and JSON)
    let lengths_url = s.repo_url("default", "/chunks/lengths");
    let r = request(
        "POST",
        &lengths_url,
        Some(&t),
        &[("Content-Type", "application/octet-stream")],
        Some(&body),
    );
    assert_eq!(r.status, 200);
    let want: Vec<u32> = chunks[..3]
        .iter()
        .map(|c| c.raw.len() as u32)
        .chain([0])
        .collect();
    let got: Vec<u32> = r
        .body
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, want);
    let r = post_json(
        &lengths_url,
        &t,
        &json!({ "fingerprints": [hexes[1], hexes[1], to_hex(&absent)] }),
    );
    assert_eq!(
        r.json()["lengths"],
        json!([chunks[1].raw.len(), chunks[1].raw.len(), 0])
    );
    for bad in [&body[..19], &b"not json"[..]] {
        let r = request(
            "POST",
            &lengths_url,
            Some(&t),
            &[(
                "Content-Type",
                if bad.len() == 19 {
                    "application/octet-stream"
                } else {
                    "application/json"
                },
            )],
            Some(bad),
        );
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
        assert!(r.json()["error"].is_string());
    }

    // 3. a version: two files (one repeats a chunk), a dir, an empty file
    let f1: Vec<&TestChunk> = vec![&chunks[0], &chunks[1], &chunks[0], &chunks[2]];
    let f2: Vec<&TestChunk> = chunks[3..40].iter().collect();
    let size = |v: &Vec<&TestChunk>| v.iter().map(|c| c.raw.len()).sum::<usize>();
    let manifest = json!({
        "source": "My Folder",
        "time": 1763778600000i64,
        "entries": [
            { "path": "My Folder", "kind": "dir", "size": 0, "mtime": 1, "mode": 493, "recipe": [] },
            { "path": "My Folder/a.txt", "kind": "file", "size": size(&f1), "mtime": 2, "mode": null,
              "recipe": f1.iter().map(|c| c.hex()).collect::<Vec<_>>() },
            { "path": "My Folder/b.bin", "kind": "file", "size": size(&f2), "mtime": -3,
              "recipe": f2.iter().map(|c| c.hex()).collect::<Vec<_>>() },
            { "path": "My Folder/empty", "kind": "file", "size": 0, "mtime": 4, "recipe": [] },
        ]
    });
    let r = post_json(&s.repo_url("default", "/versions"), &t, &manifest);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    let vid = v["id"].as_i64().unwrap();
    let st = &v["stats"];
    assert_eq!(st["files"], 3);
    assert_eq!(st["dirs"], 1);
    assert_eq!(
        st["logical_bytes"].as_u64().unwrap() as usize,
        size(&f1) + size(&f2)
    );
    assert_eq!(st["chunk_refs"], 41);
    assert_eq!(st["unique_chunks"], 40);
    assert_eq!(st["new_chunks"], 40);
    assert!(st["dedup_ratio"].as_f64().unwrap() > 0.0);

    // a second version of the same content adds nothing new
    let r = post_json(&s.repo_url("default", "/versions"), &t, &manifest);
    assert_eq!(r.status, 201);
    let v2 = r.json();
    assert_eq!(v2["stats"]["new_chunks"], 0);
    assert_eq!(v2["stats"]["dedup_ratio"], serde_json::Value::Null);

    let list = versions_list(&s, &t);
    let ids: Vec<i64> = list["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![vid, v2["id"].as_i64().unwrap()]);
    let got = request(
        "GET",
        &s.repo_url("default", &format!("/versions/{vid}")),
        Some(&t),
        &[],
        None,
    )
    .json();
    assert_eq!(
        got["manifest"]["entries"],
        manifest["entries"]
            .as_array()
            .map(|es| {
                // the server fills in the defaults it stores
                es.iter()
                    .map(|e| {
                        let mut e = e.clone();
                        if e.get("mode").is_none() {
                            e["mode"] = serde_json::Value::Null;
                        }
                        e
                    })
                    .collect::<Vec<_>>()
            })
            .map(serde_json::Value::from)
            .unwrap()
    );
    assert_eq!(got["stats"], v["stats"]);

    // 4. restore: chunks/get (stored form and decoded) and single chunks, bytes identical
    let want: Vec<String> = got["manifest"]["entries"][2]["recipe"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    for decode in [false, true] {
        let raws = get_chunks(&s, "default", &t, &want, decode);
        let file: Vec<u8> = raws.concat();
        assert_eq!(
            file,
            f2.iter().flat_map(|c| c.raw.clone()).collect::<Vec<u8>>()
        );
    }
    let rep = vec![hexes[0].clone(), hexes[1].clone(), hexes[0].clone()];
    let raws = get_chunks(&s, "default", &t, &rep, false);
    assert_eq!(raws[2], chunks[0].raw);
    for c in &chunks[..6] {
        let r = request(
            "GET",
            &s.repo_url("default", &format!("/chunks/{}", c.hex())),
            Some(&t),
            &[],
            None,
        );
        assert_eq!(r.status, 200);
        assert_eq!(r.body, c.raw);
        assert_eq!(
            r.header("x-ditto-raw-length"),
            Some(c.raw.len().to_string().as_str())
        );
    }
    let r = post_json(
        &s.repo_url("default", "/chunks/get"),
        &t,
        &json!({ "fingerprints": [hexes[0], to_hex(&absent)] }),
    );
    assert_eq!(
        r.expect_error(404, "not_found")["missing"],
        json!([to_hex(&absent)])
    );

    // On object storage each bundle is a container of its own, which the mover merges after
    // the commit: a dry-run prune runs it to the end, so locations and listings stay put.
    if on_s3() {
        let r = post_json(
            &s.repo_url("default", "/prune"),
            &t,
            &json!({"dry_run": true}),
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }

    // 4b. the version's chunk locations (binary): each distinct chunk once, in order of
    // first reference, where the repository's container tables say it is
    let r = request(
        "GET",
        &s.repo_url("default", &format!("/versions/{vid}/locations")),
        Some(&t),
        &[],
        None,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.header("content-type"),
        Some("application/x-ditto-locations")
    );
    let le32 = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let le64 = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let body = &r.body;
    assert_eq!(&body[..4], b"DLOC");
    assert_eq!((le32(body, 4), le32(body, 8), le32(body, 12)), (2, 40, 0));
    assert_eq!(body.len(), 16 + 40 * 48);
    let mut order: Vec<String> = Vec::new();
    for e in got["manifest"]["entries"].as_array().unwrap() {
        for h in e["recipe"].as_array().unwrap() {
            let h = h.as_str().unwrap().to_string();
            if !order.contains(&h) {
                order.push(h);
            }
        }
    }
    let table = request(
        "GET",
        &s.repo_url("default", "/containers"),
        Some(&t),
        &[],
        None,
    )
    .json();
    for (k, want_fp) in order.iter().enumerate() {
        let rec = &body[16 + k * 48..16 + (k + 1) * 48];
        assert_eq!(&to_hex(rec[..20].try_into().unwrap()), want_fp);
        let (cid, off) = (le64(rec, 20), le64(rec, 28));
        let c = table["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"].as_u64() == Some(cid))
            .expect("a listed container");
        let ch = c["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|ch| ch["fp"] == json!(want_fp))
            .expect("the chunk in its container's table");
        assert_eq!(ch["offset"].as_u64(), Some(off));
        assert_eq!(ch["stored_len"].as_u64(), Some(le32(rec, 36) as u64));
        assert_eq!(ch["raw_len"].as_u64(), Some(le32(rec, 40) as u64));
        assert_eq!(ch["codec"].as_u64(), Some(rec[44] as u64));
        // A chunk that is not a delta is its own chain's root (deltas: tests/delta.rs).
        if rec[44] != 2 {
            assert_eq!(&rec[45..], &rec[..3], "chain key of {want_fp}");
        }
    }
    for bad in ["/versions/0/locations", "/versions/x/locations"] {
        request("GET", &s.repo_url("default", bad), Some(&t), &[], None)
            .expect_error(400, "bad_request");
    }
    request(
        "GET",
        &s.repo_url("default", "/versions/999/locations"),
        Some(&t),
        &[],
        None,
    )
    .expect_error(404, "not_found");

    // 5. containers: the JSON table (read above) matches the raw bytes, which parse as
    // FORMAT.md says.
    let cs = table["containers"].as_array().unwrap().clone();
    assert!(!cs.is_empty());
    let mut seen = 0;
    for c in &cs {
        let id = c["id"].as_u64().unwrap();
        assert_eq!(c["newest_version"].as_i64(), v2["id"].as_i64());
        let r = request(
            "GET",
            &s.repo_url("default", &format!("/containers/{id}")),
            Some(&t),
            &[],
            None,
        );
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len() as u64, c["size"].as_u64().unwrap());
        let h = ContainerHeader::decode(&r.body).unwrap();
        assert_eq!(h.id, id);
        assert_eq!(h.data_offset, c["data_offset"].as_u64().unwrap());
        for (slot, e) in c["chunks"].as_array().unwrap().iter().enumerate() {
            let off = e["offset"].as_u64().unwrap() as usize;
            let len = e["stored_len"].as_u64().unwrap() as usize;
            let at = HEADER_LEN + slot * TABLE_ENTRY_LEN;
            let te = TableEntry::decode(&r.body[at..at + TABLE_ENTRY_LEN])
                .unwrap()
                .unwrap();
            assert_eq!(to_hex(&te.fp), e["fp"].as_str().unwrap());
            assert_eq!((te.offset as usize, te.stored_len as usize), (off, len));
            let stored = &r.body[off..off + len];
            let raw = if e["codec"] == 1 {
                zstd::bulk::decompress(stored, 1 << 20).unwrap()
            } else {
                stored.to_vec()
            };
            assert_eq!(to_hex(&fingerprint(&raw)), e["fp"].as_str().unwrap());
            // Range requests return the same bytes
            let r2 = request(
                "GET",
                &s.repo_url("default", &format!("/containers/{id}")),
                Some(&t),
                &[("Range", &format!("bytes={}-{}", off, off + len - 1))],
                None,
            );
            assert_eq!(r2.status, 206);
            assert_eq!(r2.body, stored);
            assert_eq!(
                r2.header("content-range").unwrap(),
                format!("bytes {}-{}/{}", off, off + len - 1, r.body.len())
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 40);
    let r = request(
        "GET",
        &s.repo_url("default", &format!("/containers/{}", cs[0]["id"])),
        Some(&t),
        &[("Range", "bytes=99999999-")],
        None,
    );
    r.expect_error(416, "range_not_satisfiable");
    let r = request(
        "GET",
        &s.repo_url("default", "/containers?chunks=false"),
        Some(&t),
        &[],
        None,
    )
    .json();
    assert!(r["containers"][0].get("chunks").is_none());

    // 6. stats
    let st = request("GET", &s.repo_url("default", "/stats"), Some(&t), &[], None).json();
    assert_eq!(st["chunks"], 40);
    assert_eq!(st["versions"], 2);
    assert_eq!(st["series"].as_array().unwrap().len(), 2);
    let (code, out) = cli(&dir.0, &["stats", "default"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["chunks"],
        40
    );

    // 7. delete a version
    let r = request(
        "DELETE",
        &s.repo_url("default", &format!("/versions/{vid}")),
        Some(&t),
        &[],
        None,
    );
    assert_eq!(r.json()["deleted"], vid);
    request(
        "GET",
        &s.repo_url("default", &format!("/versions/{vid}")),
        Some(&t),
        &[],
        None,
    )
    .expect_error(404, "not_found");
    request(
        "DELETE",
        &s.repo_url("default", &format!("/versions/{vid}")),
        Some(&t),
        &[],
        None,
    )
    .expect_error(404, "not_found");

    // 8. restart: same link, same data, check passes
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("OK: ") && out.contains("40 chunks"), "{out}");
    s.kill9();
    let s2 = Server::start_without_pass(&dir.0);
    assert_eq!(s2.token, t);
    let raws = get_chunks(&s2, "default", &t, &hexes, true);
    for (r, c) in raws.iter().zip(&chunks) {
        assert_eq!(r, &c.raw);
    }
    // appends continue in the reopened container
    let more = sample_chunks(2, 5);
    assert_eq!(upload(&a, &s2, &t, &more).unwrap().json()["stored"], 5);
    drop(s2);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn large_bundles_verified_in_parallel_refuse_the_first_bad_chunk() {
    // Over 1 MiB raw: verified by two threads, each half on its own.
    let dir = TempDir::new("verify-halves");
    let s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    let a = agent();
    let mut list: Vec<TestChunk> = (0..64)
        .map(|i| TestChunk::new(text_bytes(500 + i, 40_000), i % 3 != 0))
        .collect();
    let mut bad_late = list[60].clone();
    bad_late.raw[5] ^= 1;
    list[60] = bad_late;
    let r = upload(&a, &s, &t, &list).unwrap();
    assert_eq!(
        r.expect_error(422, "fingerprint_mismatch")["fingerprint"],
        list[60].hex()
    );
    // Bad chunks in both halves: the error names the earlier one.
    let mut bad_early = list[3].clone();
    bad_early.raw[7] ^= 1;
    list[3] = bad_early;
    let r = upload(&a, &s, &t, &list).unwrap();
    assert_eq!(
        r.expect_error(422, "fingerprint_mismatch")["fingerprint"],
        list[3].hex()
    );
    let st = request("GET", &s.repo_url("default", "/stats"), Some(&t), &[], None).json();
    assert_eq!(st["chunks"], 0);
    // All good: all stored.
    let good: Vec<TestChunk> = (0..64)
        .map(|i| TestChunk::new(text_bytes(700 + i, 40_000), i % 3 != 0))
        .collect();
    assert_eq!(upload(&a, &s, &t, &good).unwrap().json()["stored"], 64);
}

/// A bundle's raw bytes are limited (`MAX_BUNDLE_RAW`, 413) whatever its size on the wire,
/// and an entry repeating an earlier one is checked once, while another payload under the
/// same fingerprint is still checked (and refused when it does not decode to it).
#[test]
fn bundle_raw_bytes_are_limited_and_repeats_checked_once() {
    use wasm_core::format::bundle::{BundleWriter, MAX_BUNDLE_RAW, MAX_CHUNK_STORED};
    let dir = TempDir::new("bundle-raw");
    let s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    let zeros = TestChunk::new(vec![0u8; MAX_CHUNK_RAW as usize], true);
    let stored = zeros.stored();
    let post = |copies: usize, extra: Option<&[u8]>| {
        let mut w = BundleWriter::new();
        for _ in 0..copies {
            w.push(&zeros.fp, Codec::Zstd, MAX_CHUNK_RAW, &stored);
        }
        if let Some(p) = extra {
            w.push(&zeros.fp, Codec::Zstd, MAX_CHUNK_RAW, p);
        }
        let body = w.finish();
        request(
            "POST",
            &s.repo_url("default", "/bundles"),
            Some(&t),
            &[],
            Some(&body),
        )
    };
    let over = (MAX_BUNDLE_RAW / MAX_CHUNK_RAW as u64) as usize + 1;
    let e = post(over, None).expect_error(413, "too_large");
    assert_eq!(e["limit"], MAX_BUNDLE_RAW, "{e}");
    // A chunk whose stored bytes are over their limit is told that limit, not the raw one.
    let mut w = BundleWriter::new();
    w.push(
        &zeros.fp,
        Codec::Zstd,
        1000,
        &vec![0u8; MAX_CHUNK_STORED as usize + 1],
    );
    let body = w.finish();
    let e = request(
        "POST",
        &s.repo_url("default", "/bundles"),
        Some(&t),
        &[],
        Some(&body),
    )
    .expect_error(413, "too_large");
    assert_eq!(e["limit"], MAX_CHUNK_STORED, "{e}");
    // Another payload under the same fingerprint: zstd of other bytes of the same length.
    let other = zstd::bulk::compress(&vec![1u8; MAX_CHUNK_RAW as usize], 3).unwrap();
    let e = post(10, Some(&other)).expect_error(422, "fingerprint_mismatch");
    assert_eq!(e["fingerprint"], zeros.hex());
    let r = post(1000, None);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["stored"], 1, "{}", r.json());
}

/// The SHAttered PDFs (Stevens et al. 2017): different bytes, one SHA-1.
static SHATTERED: [&[u8]; 2] = [
    include_bytes!("../../wasm-core/testdata/shattered-1.pdf"),
    include_bytes!("../../wasm-core/testdata/shattered-2.pdf"),
];

fn plain_sha1(data: &[u8]) -> wasm_core::hash::Fingerprint {
    let mut h = wasm_core::hash::StreamingSha1::new();
    h.update(data);
    h.finish()
}

#[test]
fn collision_block_chunks_need_their_own_fingerprints() {
    let dir = TempDir::new("collision");
    let s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    let a = agent();
    // The first 8 KiB of each file: the collision blocks plus common bytes.
    let raws: Vec<Vec<u8>> = SHATTERED.iter().map(|f| f[..8192].to_vec()).collect();
    assert_eq!(plain_sha1(&raws[0]), plain_sha1(&raws[1]));
    // Sent under the plain SHA-1 (what a client without collision detection computes), either
    // chunk is refused: the server's fingerprint of those bytes is the safe hash.
    for raw in &raws {
        for zstd in [false, true] {
            let mut c = TestChunk::new(raw.clone(), zstd);
            c.fp = plain_sha1(raw);
            let j = upload(&a, &s, &t, &[c.clone()])
                .unwrap()
                .expect_error(422, "fingerprint_mismatch");
            assert_eq!(j["fingerprint"], c.hex());
        }
    }
    let st = request("GET", &s.repo_url("default", "/stats"), Some(&t), &[], None).json();
    assert_eq!(st["chunks"], 0);
    // Under their fingerprints they are two chunks, each restored as its own bytes.
    let chunks: Vec<TestChunk> = raws
        .iter()
        .map(|r| TestChunk::new(r.clone(), true))
        .collect();
    assert_ne!(chunks[0].fp, chunks[1].fp);
    assert_eq!(upload(&a, &s, &t, &chunks).unwrap().json()["stored"], 2);
    let hexes: Vec<String> = chunks.iter().map(TestChunk::hex).collect();
    for decode in [false, true] {
        assert_eq!(get_chunks(&s, "default", &t, &hexes, decode), raws);
    }
    drop(s);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn mismatch_and_bad_content_refused() {
    let dir = TempDir::new("mismatch");
    let s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    let a = agent();
    let good = sample_chunks(3, 4);
    // a chunk whose bytes do not match its fingerprint
    let mut bad = TestChunk::new(rand_bytes(99, 5000), false);
    bad.raw[10] ^= 1;
    let mut list = good.clone();
    list.push(bad.clone());
    let r = upload(&a, &s, &t, &list).unwrap();
    let j = r.expect_error(422, "fingerprint_mismatch");
    assert_eq!(j["fingerprint"], bad.hex());
    // the same for a compressed chunk
    let mut badz = TestChunk::new(text_bytes(98, 5000), true);
    badz.raw[0] ^= 1;
    upload(&a, &s, &t, &[good[0].clone(), badz])
        .unwrap()
        .expect_error(422, "fingerprint_mismatch");
    // nothing of those bundles was stored
    let all: Vec<String> = good.iter().map(TestChunk::hex).collect();
    let r = post_json(
        &s.repo_url("default", "/chunks/missing"),
        &t,
        &json!({ "fingerprints": all }),
    );
    assert_eq!(r.json()["missing"], json!(all));
    let st = request("GET", &s.repo_url("default", "/stats"), Some(&t), &[], None).json();
    assert_eq!(st["chunks"], 0);

    // zstd garbage, and a frame that decodes to the wrong length
    let raw = text_bytes(7, 3000);
    let fp = fingerprint(&raw);
    let mut body = encode_header(1).to_vec();
    body.extend_from_slice(&encode_entry_header(&EntryHeader {
        fp,
        codec: Codec::Zstd,
        raw_len: 3000,
        stored_len: 5,
    }));
    body.extend_from_slice(b"junk!");
    let r = request(
        "POST",
        &s.repo_url("default", "/bundles"),
        Some(&t),
        &[],
        Some(&body),
    );
    r.expect_error(422, "decode_failed");
    let z = zstd::bulk::compress(&raw, 1).unwrap();
    let mut body = encode_header(1).to_vec();
    body.extend_from_slice(&encode_entry_header(&EntryHeader {
        fp,
        codec: Codec::Zstd,
        raw_len: 2999,
        stored_len: z.len() as u32,
    }));
    body.extend_from_slice(&z);
    let r = request(
        "POST",
        &s.repo_url("default", "/bundles"),
        Some(&t),
        &[],
        Some(&body),
    );
    r.expect_error(422, "decode_failed");

    // a version referencing chunks that are not stored: 409 with the list
    assert_eq!(upload(&a, &s, &t, &good[..2]).unwrap().status, 200);
    let m = json!({ "source": "s", "time": 0, "entries": [
        { "path": "f", "kind": "file", "size": good[0].raw.len() + good[2].raw.len() + good[3].raw.len(), "mtime": 0,
          "recipe": [good[0].hex(), good[2].hex(), good[3].hex(), good[2].hex()] } ] });
    let j =
        post_json(&s.repo_url("default", "/versions"), &t, &m).expect_error(409, "missing_chunks");
    assert_eq!(j["missing"], json!([good[2].hex(), good[3].hex()]));
    // size that does not add up
    let m = json!({ "source": "s", "time": 0, "entries": [
        { "path": "f", "kind": "file", "size": 1, "mtime": 0, "recipe": [good[0].hex()] } ] });
    post_json(&s.repo_url("default", "/versions"), &t, &m).expect_error(422, "size_mismatch");
    // sizes that would overflow a sum are refused, not a server error
    let huge = 1u64 << 63;
    let m = json!({ "source": "s", "time": 0, "entries": [
        { "path": "f", "kind": "file", "size": huge, "mtime": 0, "recipe": [] },
        { "path": "g", "kind": "file", "size": huge, "mtime": 0, "recipe": [] } ] });
    post_json(&s.repo_url("default", "/versions"), &t, &m).expect_error(422, "size_mismatch");
    let list = versions_list(&s, &t);
    assert_eq!(list["versions"], json!([]));
}

#[test]
fn auth_matrix() {
    let dir = TempDir::new("auth");
    let s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    // a second repository and a second token for default, created by the CLI while serving
    let (code, out) = cli(&dir.0, &["repo", "create", "other"]);
    assert_eq!(code, 0, "{out}");
    let t_other = out.trim().to_string();
    assert_eq!(t_other.len(), 48);
    let (code, out) = cli(&dir.0, &["token", "create", "default"]);
    assert_eq!(code, 0, "{out}");
    let t2 = out.trim().to_string();
    assert_eq!(cli(&dir.0, &["repo", "create", "other"]).0, 1);
    assert_eq!(cli(&dir.0, &["repo", "create", "Bad Name"]).0, 1);
    assert_eq!(cli(&dir.0, &["token", "create", "nope"]).0, 1);

    let chunk = TestChunk::new(rand_bytes(5, 100), false);
    let bundle_body = bundle(std::slice::from_ref(&chunk));
    let missing_body = serde_json::to_vec(&json!({ "fingerprints": [chunk.hex()] })).unwrap();
    let endpoints: Vec<(&str, String, Option<Vec<u8>>)> = vec![
        ("POST", "/chunks/missing".into(), Some(missing_body.clone())),
        ("POST", "/chunks/lengths".into(), Some(missing_body.clone())),
        ("POST", "/bundles".into(), Some(bundle_body.clone())),
        ("GET", "/versions".into(), None),
        ("GET", "/versions/1".into(), None),
        ("GET", "/versions/1/locations".into(), None),
        ("DELETE", "/versions/1".into(), None),
        ("POST", "/versions".into(), Some(b"{}".to_vec())),
        ("GET", format!("/chunks/{}", chunk.hex()), None),
        ("POST", "/chunks/get".into(), Some(missing_body.clone())),
        ("GET", "/containers".into(), None),
        ("GET", "/containers/1".into(), None),
        ("GET", "/stats".into(), None),
        ("POST", "/verify".into(), Some(b"{}".to_vec())),
        ("POST", "/forget".into(), Some(b"{}".to_vec())),
        ("POST", "/prune".into(), Some(b"{}".to_vec())),
        ("POST", "/search".into(), Some(b"{}".to_vec())),
        ("GET", "/token".into(), None),
    ];
    let bad_headers: [(&str, Option<&str>); 4] = [
        ("no header", None),
        (
            "bad token",
            Some("Bearer 000000000000000000000000000000000000000000000000"),
        ),
        ("not bearer", Some(&format!("Basic {t}"))),
        ("empty", Some("Bearer ")),
    ];
    for (method, path, body) in &endpoints {
        for (what, h) in &bad_headers {
            let hs: Vec<(&str, &str)> = h.map(|v| vec![("Authorization", v)]).unwrap_or_default();
            let r = request(
                method,
                &s.repo_url("default", path),
                None,
                &hs,
                body.as_deref(),
            );
            assert_eq!(r.status, 401, "{method} {path} {what}");
            r.expect_error(401, "unauthorized");
        }
        // another repository's token
        request(
            method,
            &s.repo_url("default", path),
            Some(&t_other),
            &[],
            body.as_deref(),
        )
        .expect_error(403, "forbidden");
        request(
            method,
            &s.repo_url("other", path),
            Some(&t),
            &[],
            body.as_deref(),
        )
        .expect_error(403, "forbidden");
        // unknown repository, and names no repository can have (PostgreSQL refuses a NUL
        // in text: looked up, it answered 500)
        for name in ["nope", "a%00b", "Bad%20Name", "%C3%A9"] {
            request(
                method,
                &s.repo_url(name, path),
                Some(&t),
                &[],
                body.as_deref(),
            )
            .expect_error(404, "not_found");
            request(
                method,
                &s.repo_url(name, path),
                Some("000000000000000000000000000000000000000000000000"),
                &[],
                body.as_deref(),
            )
            .expect_error(401, "unauthorized");
        }
    }
    // the right tokens work, and repositories do not see each other's chunks
    let a = agent();
    assert_eq!(
        upload(&a, &s, &t2, std::slice::from_ref(&chunk))
            .unwrap()
            .status,
        200
    );
    let r = request(
        "POST",
        &s.repo_url("other", "/chunks/missing"),
        Some(&t_other),
        &[],
        Some(&missing_body),
    );
    assert_eq!(r.json()["missing"], json!([chunk.hex()]));
    request(
        "GET",
        &s.repo_url("other", &format!("/chunks/{}", chunk.hex())),
        Some(&t_other),
        &[],
        None,
    )
    .expect_error(404, "not_found");
    let r = request(
        "POST",
        &s.repo_url("other", "/bundles"),
        Some(&t_other),
        &[],
        Some(&bundle_body),
    );
    assert_eq!(r.json()["stored"], 1, "each repository stores its own copy");
    let r = request(
        "GET",
        &s.repo_url("default", &format!("/chunks/{}", chunk.hex())),
        Some(&t),
        &[],
        None,
    );
    assert_eq!(r.body, chunk.raw);
    // containers of one repository are invisible to the other
    let cs = request(
        "GET",
        &s.repo_url("default", "/containers"),
        Some(&t),
        &[],
        None,
    )
    .json();
    let id = cs["containers"][0]["id"].as_u64().unwrap();
    request(
        "GET",
        &s.repo_url("other", &format!("/containers/{id}")),
        Some(&t_other),
        &[],
        None,
    )
    .expect_error(404, "not_found");
    // health and openapi are public
    assert_eq!(
        request("GET", &s.url("/api/v1/health"), None, &[], None).json()["status"],
        "ok"
    );
    let o = request("GET", &s.url("/api/v1/openapi.json"), None, &[], None).json();
    assert_eq!(o["openapi"], "3.1.0");
    assert!(o["paths"]["/api/v1/repos/{repo}/bundles"].is_object());
}

#[test]
fn malformed_and_oversized() {
    let dir = TempDir::new("malformed");
    let s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    let url = s.repo_url("default", "/bundles");
    let post = |body: &[u8]| request("POST", &url, Some(&t), &[], Some(body));
    let c = TestChunk::new(rand_bytes(1, 1000), false);
    let good = bundle(std::slice::from_ref(&c));

    post(b"").expect_error(400, "bad_request");
    post(b"not a bundle at all").expect_error(400, "bad_request");
    let mut b = good.clone();
    b[0] = b'X';
    post(&b).expect_error(400, "bad_request");
    post(&good[..good.len() - 1]).expect_error(400, "bad_request");
    let mut b = good.clone();
    b.push(0);
    post(&b).expect_error(400, "bad_request");
    let mut b = good.clone();
    b[16 + 20] = 9; // codec
    post(&b).expect_error(400, "bad_request");
    let mut b = good.clone();
    b[16 + 20] = 2; // delta: reserved
    post(&b).expect_error(400, "unsupported_codec");
    let mut b = good.clone();
    b[8..12].copy_from_slice(&1_000_000u32.to_le_bytes()); // chunk count over the limit
    post(&b).expect_error(413, "too_large");
    // a chunk above 1 MiB raw
    let big = TestChunk::new(rand_bytes(2, MAX_CHUNK_RAW as usize + 1), false);
    post(&bundle(&[big])).expect_error(413, "too_large");
    // exactly 1 MiB is fine
    let max = TestChunk::new(rand_bytes(3, MAX_CHUNK_RAW as usize), false);
    assert_eq!(post(&bundle(&[max])).status, 200);
    // a bundle body above 16 MiB
    let chunks: Vec<TestChunk> = (0..17)
        .map(|i| TestChunk::new(rand_bytes(100 + i, 1 << 20), false))
        .collect();
    post(&bundle(&chunks)).expect_error(413, "too_large");
    assert_eq!(post(&bundle(&chunks[..15])).status, 200);

    // JSON endpoints
    let m = s.repo_url("default", "/chunks/missing");
    request("POST", &m, Some(&t), &[], Some(b"{")).expect_error(400, "bad_request");
    request("POST", &m, Some(&t), &[], Some(b"{\"fingerprints\": 5}"))
        .expect_error(400, "bad_request");
    post_json(&m, &t, &json!({ "fingerprints": ["xyz"] })).expect_error(400, "bad_request");
    post_json(
        &m,
        &t,
        &json!({ "fingerprints": vec!["0".repeat(40); 200_001] }),
    )
    .expect_error(413, "too_large");
    // An element that is no fingerprint is refused as it is read (a list of empty strings
    // held a 24-byte String each, eight times its body).
    let e = post_json(&m, &t, &json!({ "fingerprints": vec![""; 200_001] }))
        .expect_error(400, "bad_request");
    assert!(
        e["error"].as_str().unwrap().contains("fingerprint 1"),
        "{e}"
    );
    request(
        "POST",
        &m,
        Some(&t),
        &[("Content-Type", "application/octet-stream")],
        Some(&[0u8; 21]),
    )
    .expect_error(400, "bad_request");
    let v = s.repo_url("default", "/versions");
    for bad in [
        json!({}),
        json!({ "source": "", "time": 0, "entries": [] }),
        json!({ "source": "a\u{0}b", "time": 0, "entries": [] }),
        json!({ "source": "s", "time": 0, "entries": [{ "path": "../x", "kind": "file", "size": 0, "mtime": 0 }] }),
        json!({ "source": "s", "time": 0, "entries": [{ "path": "/abs", "kind": "file", "size": 0, "mtime": 0 }] }),
        json!({ "source": "s", "time": 0, "entries": [{ "path": "a", "kind": "pipe", "size": 0, "mtime": 0 }] }),
        json!({ "source": "s", "time": 0, "entries": [{ "path": "a", "kind": "file", "size": -1, "mtime": 0 }] }),
        json!({ "source": "s", "time": 0, "entries": [{ "path": "a", "kind": "dir", "size": 0, "mtime": 0, "recipe": [c.hex()] }] }),
        json!({ "source": "s", "time": 0, "entries": [{ "path": "a", "kind": "file", "size": 0, "mtime": 0, "recipe": ["nothex"] }] }),
        json!({ "source": "s", "time": 0, "entries": [
            { "path": "a", "kind": "file", "size": 0, "mtime": 0 }, { "path": "a", "kind": "file", "size": 0, "mtime": 0 }] }),
    ] {
        post_json(&v, &t, &bad).expect_error(400, "bad_request");
    }
    request(
        "GET",
        &s.repo_url("default", "/versions/abc"),
        Some(&t),
        &[],
        None,
    )
    .expect_error(400, "bad_request");
    request(
        "GET",
        &s.repo_url("default", "/versions/-1"),
        Some(&t),
        &[],
        None,
    )
    .expect_error(400, "bad_request");
    request(
        "GET",
        &s.repo_url("default", "/versions/99"),
        Some(&t),
        &[],
        None,
    )
    .expect_error(404, "not_found");
    request(
        "GET",
        &s.repo_url("default", "/chunks/zz"),
        Some(&t),
        &[],
        None,
    )
    .expect_error(400, "bad_request");
    request(
        "GET",
        &s.repo_url("default", "/containers/x"),
        Some(&t),
        &[],
        None,
    )
    .expect_error(400, "bad_request");
    request(
        "GET",
        &s.repo_url("default", "/containers/12345"),
        Some(&t),
        &[],
        None,
    )
    .expect_error(404, "not_found");
    request(
        "GET",
        &s.repo_url("default", "/containers?chunks=maybe"),
        Some(&t),
        &[],
        None,
    )
    .expect_error(400, "bad_request");
    request("GET", &s.url("/api/v2/anything"), Some(&t), &[], None).expect_error(404, "not_found");
    request(
        "PUT",
        &s.repo_url("default", "/bundles"),
        Some(&t),
        &[],
        Some(b"x"),
    )
    .expect_error(405, "method_not_allowed");
    // the server is still fine, and stored exactly what was acknowledged
    assert_eq!(
        request("GET", &s.url("/api/v1/health"), None, &[], None).status,
        200
    );
    drop(s);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("16 chunks"), "{out}");
}

#[test]
fn concurrent_overlapping_uploads() {
    let dir = TempDir::new("concurrent");
    let s = Server::start_without_pass(&dir.0);
    let shared = sample_chunks(10, 60);
    let mut handles = Vec::new();
    let mut expected = std::collections::HashSet::new();
    for c in &shared {
        expected.insert(c.fp);
    }
    let mut per_client = Vec::new();
    for k in 0..4u64 {
        let own = sample_chunks(20 + k, 30);
        for c in &own {
            expected.insert(c.fp);
        }
        let mut mine: Vec<TestChunk> = shared.iter().cloned().chain(own).collect();
        // each client sends the shared chunks in a different order and bundle split
        mine.rotate_left((k * 17) as usize);
        per_client.push(mine);
    }
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
    for mine in per_client {
        let base = s.base.clone();
        let t = s.token.clone();
        let barrier = barrier.clone();
        handles.push(std::thread::spawn(move || {
            let a = agent();
            barrier.wait();
            let mut stored = 0;
            for part in mine.chunks(13) {
                let r = upload_at(&a, &base, &t, part).unwrap();
                assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
                stored += r.json()["stored"].as_u64().unwrap();
            }
            stored
        }));
    }
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(
        total,
        expected.len() as u64,
        "each chunk stored exactly once"
    );
    let st = request(
        "GET",
        &s.repo_url("default", "/stats"),
        Some(&s.token),
        &[],
        None,
    )
    .json();
    assert_eq!(st["chunks"].as_u64(), Some(expected.len() as u64));
    // concurrent version commits and reads
    let hexes: Vec<String> = shared.iter().map(TestChunk::hex).collect();
    let size: usize = shared.iter().map(|c| c.raw.len()).sum();
    let mut hs = Vec::new();
    for k in 0..4 {
        let base = s.base.clone();
        let t = s.token.clone();
        let hexes = hexes.clone();
        hs.push(std::thread::spawn(move || {
            let m = json!({ "source": format!("client {k}"), "time": k, "entries": [
                { "path": "f", "kind": "file", "size": size, "mtime": 0, "recipe": hexes } ] });
            let r = try_request(
                &agent(),
                "POST",
                &format!("{base}/api/v1/repos/default/versions"),
                Some(&t),
                &[],
                Some(&serde_json::to_vec(&m).unwrap()),
            )
            .unwrap();
            assert_eq!(r.status, 201);
            r.json()["stats"]["new_chunks"].as_u64().unwrap()
        }));
    }
    let new_total: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(
        new_total, 60,
        "the first committed version owns the new chunks"
    );
    let raws = get_chunks(&s, "default", &s.token, &hexes, false);
    assert_eq!(raws.iter().map(Vec::len).sum::<usize>(), size);
    drop(s);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn containers_roll_over_at_4mib() {
    let dir = TempDir::new("rollover");
    let s = Server::start_without_pass(&dir.0);
    let a = agent();
    // 10 MiB of incompressible 512 KiB chunks -> at least 3 containers
    let chunks: Vec<TestChunk> = (0..20)
        .map(|i| TestChunk::new(rand_bytes(500 + i, 512 << 10), false))
        .collect();
    for part in chunks.chunks(7) {
        assert_eq!(upload(&a, &s, &s.token, part).unwrap().status, 200);
    }
    let cs = request(
        "GET",
        &s.repo_url("default", "/containers"),
        Some(&s.token),
        &[],
        None,
    )
    .json();
    let cs = cs["containers"].as_array().unwrap();
    assert!(cs.len() >= 3, "{}", cs.len());
    for c in cs {
        let data = c["size"].as_u64().unwrap() - c["data_offset"].as_u64().unwrap();
        assert!(data <= 4 << 20, "container data {data} over 4 MiB");
    }
    drop(s);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn check_detects_corruption() {
    let dir = TempDir::new("corrupt");
    let s = Server::start_without_pass(&dir.0);
    let chunks = sample_chunks(30, 10);
    assert_eq!(upload(&agent(), &s, &s.token, &chunks).unwrap().status, 200);
    let cs = request(
        "GET",
        &s.repo_url("default", "/containers"),
        Some(&s.token),
        &[],
        None,
    )
    .json();
    let c = &cs["containers"][0];
    let off = c["chunks"][3]["offset"].as_u64().unwrap();
    drop(s);
    assert_eq!(cli(&dir.0, &["check", "default"]).0, 0);
    let path = container_file(&dir.0, 1, c["id"].as_u64().unwrap());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[off as usize + 1] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("ERROR"), "{out}");
    assert_eq!(cli(&dir.0, &["check", "nope"]).0, 1);
}

/// SIGTERM: the server exits 0 within its grace period, even with a client's keep-alive
/// connection open, leaves no write-ahead log (nor its `-shm` index) behind, and everything
/// committed is there on restart.
#[test]
fn sigterm_stops_cleanly_and_folds_the_wal() {
    let dir = TempDir::new("sigterm");
    let mut s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    let a = agent();
    let chunks = sample_chunks(7, 30);
    assert_eq!(upload(&a, &s, &t, &chunks).unwrap().status, 200);
    let size: usize = chunks.iter().map(|c| c.raw.len()).sum();
    let manifest = json!({
        "source": "stop", "time": 1, "entries": [{ "path": "f", "kind": "file", "size": size, "mtime": 1,
          "recipe": chunks.iter().map(TestChunk::hex).collect::<Vec<_>>() }]
    });
    let r = post_json(&s.repo_url("default", "/versions"), &t, &manifest);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let wal = dir.0.join("ditto.sqlite3-wal");
    let wal_len = || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert!(!on_sqlite() || wal_len() > 0, "WAL in use while serving");

    let status = s
        .stop(Duration::from_secs(10))
        .expect("stopped within 10 s");
    assert!(status.success(), "exit status {status}");
    assert_eq!(wal_len(), 0, "WAL left behind");
    if on_sqlite() {
        for f in ["ditto.sqlite3-wal", "ditto.sqlite3-shm"] {
            assert!(!dir.0.join(f).exists(), "{f} left behind");
        }
    }
    drop(s);

    let s = Server::start_without_pass(&dir.0);
    let list = versions_list(&s, &t);
    assert_eq!(list["versions"].as_array().unwrap().len(), 1);
    let hexes: Vec<String> = chunks.iter().map(TestChunk::hex).collect();
    let got = get_chunks(&s, "default", &t, &hexes, true);
    assert!(got.iter().zip(&chunks).all(|(g, c)| *g == c.raw));
    drop(s);
    assert_eq!(cli(&dir.0, &["check", "default"]).0, 0);
}

/// Two data directories naming one PostgreSQL database would number containers apart and
/// lose each other's files: the second server is refused. (On SQLite the database is inside
/// the data directory, whose lock `one_server_per_data_dir` tests.)
#[test]
fn one_server_per_database() {
    if on_sqlite() {
        return;
    }
    let (a, b) = (TempDir::new("db-a"), TempDir::new("db-b"));
    let _s = Server::start_without_pass(&a.0);
    // With containers on its local disk, whether the first one keeps them there too or in
    // object storage (then it shares the database only with replicas that do).
    let out = server_cmd(&b.0)
        .arg("serve")
        .env("PORT", "0")
        .env("DATABASE_URL", database_url(&a.0).unwrap())
        .env("DITTO_S3_BUCKET", "")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already serving this database"), "{err}");
}

/// A `HEADER_TIMEOUT` past what the HTTP layer can add to an instant is refused at start; it
/// made every connection's task panic, the server up and answering nothing. `SEND_TIMEOUT`
/// is added to instants too.
#[test]
fn an_out_of_range_header_or_send_timeout_is_refused_at_start() {
    let dir = TempDir::new("header-timeout");
    for var in ["HEADER_TIMEOUT", "SEND_TIMEOUT"] {
        for bad in ["0", "86401", "10000000000000000000", "x"] {
            let out = server_cmd(&dir.0)
                .arg("serve")
                .env("PORT", "0")
                .env(var, bad)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(1), "{var}={bad}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(var), "{var}={bad}: {err}");
        }
    }
}

#[test]
fn one_server_per_data_dir() {
    let dir = TempDir::new("lock");
    let s = Server::start_without_pass(&dir.0);
    let out = server_cmd(&dir.0)
        .arg("serve")
        .env("PORT", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already serving"));
    assert!(out.stdout.is_empty());
    assert_eq!(
        request("GET", &s.url("/api/v1/health"), None, &[], None).status,
        200
    );
}

/// Random and mutated input never produces a 5xx, and the server keeps its data intact.
#[test]
fn garbage_never_5xx() {
    let dir = TempDir::new("garbage");
    let s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    let a = agent();
    let chunks = sample_chunks(40, 6);
    let valid = bundle(&chunks);
    let valid_manifest = serde_json::to_vec(&json!({ "source": "s", "time": 1, "entries": [
        { "path": "a", "kind": "file", "size": chunks[0].raw.len(), "mtime": 0, "recipe": [chunks[0].hex()] } ] }))
    .unwrap();
    let mut rng = rand_bytes(77, 1 << 16).into_iter().cycle();
    let mut next = move || rng.next().unwrap() as usize;
    let endpoints = [
        "/bundles",
        "/chunks/missing",
        "/chunks/lengths",
        "/chunks/get",
        "/versions",
    ];
    let mut statuses = std::collections::BTreeMap::new();
    for i in 0..400 {
        let ep = endpoints[i % endpoints.len()];
        let body: Vec<u8> = match i % 3 {
            0 => rand_bytes(i as u64, next() % 3000),
            _ => {
                let mut b = if ep == "/bundles" {
                    valid.clone()
                } else {
                    valid_manifest.clone()
                };
                for _ in 0..1 + next() % 4 {
                    let at = next() * 256 % b.len();
                    b[at] = next() as u8;
                }
                if next() % 5 == 0 {
                    b.truncate(next() * 97 % b.len());
                }
                b
            }
        };
        let ct = if i % 7 == 0 {
            "application/octet-stream"
        } else {
            "application/json"
        };
        let r = try_request(
            &a,
            "POST",
            &s.repo_url("default", ep),
            Some(&t),
            &[("Content-Type", ct)],
            Some(&body),
        )
        .unwrap();
        assert!(
            r.status < 500,
            "{ep}: {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
        if r.status >= 400 {
            assert!(r.json()["error"].is_string());
        }
        *statuses.entry(r.status).or_insert(0) += 1;
    }
    assert!(
        statuses.contains_key(&400) && statuses.contains_key(&422),
        "{statuses:?}"
    );
    drop(s);
    let (code, out) = cli(&dir.0, &["check", "default"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn serves_the_web_app() {
    let dir = TempDir::new("web");
    let web = dir.0.join("no-web"); // the harness's WEB_DIR
    std::fs::create_dir_all(web.join("assets")).unwrap();
    std::fs::write(
        web.join("index.html"),
        "<!doctype html><title>Ditto</title>",
    )
    .unwrap();
    std::fs::write(web.join("assets/app.js"), "console.log(1)").unwrap();
    let s = Server::start_without_pass(&dir.0);
    let r = request("GET", &s.url("/"), None, &[], None);
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &b"<!doctype html><title>Ditto</title>"[..])
    );
    let r = request("GET", &s.url("/assets/app.js"), None, &[], None);
    assert_eq!(r.body, b"console.log(1)");
    // client-side routes fall back to index.html; API routes never do
    let r = request("GET", &s.url("/restore/7"), None, &[], None);
    assert_eq!(r.body, b"<!doctype html><title>Ditto</title>");
    request("GET", &s.url("/api/v1/nothing"), None, &[], None).expect_error(404, "not_found");
}

/// JSON and the chunk locations go compressed to a client that takes zstd or gzip, and decode
/// to the bytes an identity request gets; chunk bundles and container ranges never do.
#[test]
fn json_and_locations_are_compressed_for_a_client_that_takes_it_bundles_never() {
    let dir = TempDir::new("compress");
    let s = Server::start_without_pass(&dir.0);
    let t = s.token.clone();
    let a = agent();
    let chunks = sample_chunks(7, 60);
    assert_eq!(upload(&a, &s, &t, &chunks).unwrap().status, 200);
    // One file per chunk: a manifest of some kilobytes, as real ones are.
    let entries: Vec<_> = chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({ "path": format!("dir/file-{i}.txt"), "kind": "file", "size": c.raw.len(),
                    "mtime": 0, "mode": null, "recipe": [c.hex()] })
        })
        .collect();
    let r = post_json(
        &s.repo_url("default", "/versions"),
        &t,
        &json!({ "source": "src", "time": 1, "entries": entries }),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let id = r.json()["id"].as_i64().unwrap();
    let get = |path: &str, accept: &str| {
        request(
            "GET",
            &s.repo_url("default", path),
            Some(&t),
            &[("Accept-Encoding", accept)],
            None,
        )
    };
    for path in [
        format!("/versions/{id}"),
        format!("/versions/{id}/locations"),
    ] {
        let plain = get(&path, "identity");
        assert_eq!(plain.status, 200);
        assert_eq!(plain.header("content-encoding"), None, "{path}");
        assert!(
            plain.body.len() > 1024,
            "{path}: {} bytes",
            plain.body.len()
        );
        let z = get(&path, "gzip, deflate, br, zstd");
        assert_eq!(z.header("content-encoding"), Some("zstd"), "{path}");
        assert!(z.body.len() < plain.body.len(), "{path}");
        assert!(
            zstd::decode_all(&z.body[..]).unwrap() == plain.body,
            "{path}"
        );
        // A client without zstd gets gzip (this one decodes it as it reads, and drops the
        // header with it): the same bytes.
        assert!(get(&path, "gzip").body == plain.body, "{path}");
    }
    // What is compressed already goes as it is.
    let fps: Vec<String> = chunks.iter().map(TestChunk::hex).collect();
    let body = serde_json::to_vec(&json!({ "fingerprints": fps })).unwrap();
    let bundle = |accept: &str| {
        request(
            "POST",
            &s.repo_url("default", "/chunks/get"),
            Some(&t),
            &[
                ("Content-Type", "application/json"),
                ("Accept-Encoding", accept),
            ],
            Some(&body),
        )
    };
    let (plain, z) = (bundle("identity"), bundle("zstd, gzip"));
    assert_eq!(z.status, 200);
    assert_eq!(z.header("content-encoding"), None);
    assert!(z.body == plain.body);
    let range = request(
        "GET",
        &s.repo_url("default", "/containers/1"),
        Some(&t),
        &[("Range", "bytes=0-9999"), ("Accept-Encoding", "zstd, gzip")],
        None,
    );
    assert_eq!(range.status, 206);
    assert_eq!(range.header("content-encoding"), None);
    assert_eq!(range.body.len(), 10_000);
}
