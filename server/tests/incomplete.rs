//! Incomplete versions: a manifest's `skipped` list (picked files the version does not hold)
//! is kept with the version, counted in its stats, and refused when malformed.

mod common;

use common::*;
use serde_json::json;

#[test]
fn skipped_files_round_trip_and_bad_lists_are_refused() {
    let dir = TempDir::new("skipped");
    let s = Server::start(&dir.0);
    let t = s.token.clone();
    let chunk = TestChunk::new(rand_bytes(7, 5000), false);
    let r = upload(&agent(), &s, &t, std::slice::from_ref(&chunk)).unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

    let entries = json!([
        { "path": "a.bin", "kind": "file", "size": 5000, "mtime": 2, "recipe": [chunk.hex()] },
    ]);
    let skipped = json!([
        { "path": "b.txt", "reason": "changed", "detail": "NotReadableError: changed while reading" },
        { "path": "sub/c.txt", "reason": "deleted" },
        { "path": "d", "reason": "unreadable", "detail": "NotReadableError" },
    ]);
    let m = json!({ "source": "S", "time": 1, "entries": entries, "skipped": skipped });
    let r = post_json(&s.repo_url("default", "/versions"), &t, &m);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    assert_eq!(v["stats"]["skipped_files"], 3);
    assert_eq!(v["stats"]["files"], 1);
    let id = v["id"].as_i64().unwrap();

    // A complete version has skipped_files 0 and no `skipped` in its manifest.
    let m2 = json!({ "source": "S", "time": 2, "entries": entries });
    let r = post_json(&s.repo_url("default", "/versions"), &t, &m2);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let id2 = r.json()["id"].as_i64().unwrap();

    let got = request(
        "GET",
        &s.repo_url("default", &format!("/versions/{id}")),
        Some(&t),
        &[],
        None,
    )
    .json();
    assert_eq!(got["manifest"]["skipped"], skipped);
    assert_eq!(got["stats"]["skipped_files"], 3);
    let got2 = request(
        "GET",
        &s.repo_url("default", &format!("/versions/{id2}")),
        Some(&t),
        &[],
        None,
    )
    .json();
    assert!(got2["manifest"].get("skipped").is_none(), "{got2}");
    let list = request(
        "GET",
        &s.repo_url("default", "/versions"),
        Some(&t),
        &[],
        None,
    )
    .json();
    let counts: Vec<_> = list["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["id"].as_i64().unwrap(),
                v["stats"]["skipped_files"].clone(),
            )
        })
        .collect();
    assert_eq!(counts, vec![(id, json!(3)), (id2, json!(0))]);

    for bad in [
        json!([{ "path": "/etc/passwd", "reason": "changed" }]),
        json!([{ "path": "a/../b", "reason": "deleted" }]),
        json!([{ "path": "a", "reason": "eaten" }]),
        json!([{ "reason": "changed" }]),
        json!([{ "path": "a", "reason": "unreadable", "detail": "x".repeat(1025) }]),
        json!({ "path": "a" }),
    ] {
        let m = json!({ "source": "S", "time": 3, "entries": entries, "skipped": bad });
        let r = post_json(&s.repo_url("default", "/versions"), &t, &m);
        r.expect_error(400, "bad_request");
    }
    let list = request(
        "GET",
        &s.repo_url("default", "/versions"),
        Some(&t),
        &[],
        None,
    )
    .json();
    assert_eq!(list["versions"].as_array().unwrap().len(), 2);
}
