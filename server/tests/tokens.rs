//! Token scopes against the real server (docs/API.md, Authentication): a backup token adds
//! versions and reads only its own, never chunk bytes, never deletes; a read token changes
//! nothing; revoked tokens are refused; the CLI creates, lists and revokes.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::Duration;

fn manifest(chunks: &[TestChunk], source: &str) -> Value {
    json!({
        "source": source,
        "time": 1_700_000_000_000i64,
        "entries": chunks.iter().enumerate().map(|(i, c)| json!({
            "path": format!("f{i}"), "kind": "file", "size": c.raw.len(), "mtime": 1,
            "recipe": [c.hex()],
        })).collect::<Vec<_>>(),
    })
}

fn new_token(dir: &TempDir, scope: &str) -> String {
    let (code, out) = cli(&dir.0, &["token", "create", "default", "--scope", scope]);
    assert_eq!(code, 0, "{out}");
    let t = out.trim().to_string();
    assert_eq!(t.len(), 48, "{out}");
    t
}

fn status(method: &str, url: &str, token: &str, body: Option<&Value>) -> u16 {
    match body {
        Some(b) => request(
            method,
            url,
            Some(token),
            &[("Content-Type", "application/json")],
            Some(&serde_json::to_vec(b).unwrap()),
        ),
        None => request(method, url, Some(token), &[], None),
    }
    .status
}

#[test]
fn backup_tokens_add_versions_but_cannot_read_or_destroy() {
    let dir = TempDir::new("scope-backup");
    let s = Server::start(&dir.0);
    let full = s.token.clone();
    let backup = new_token(&dir, "backup");
    let a = agent();
    let url = |p: &str| s.repo_url("default", p);

    // A version committed with the full token: the backup token must not see it.
    let theirs = vec![TestChunk::new(rand_bytes(1, 3000), false)];
    assert_eq!(upload(&a, &s, &full, &theirs).unwrap().status, 200);
    let r = post_json(&url("/versions"), &full, &manifest(&theirs, "laptop"));
    assert_eq!(r.status, 201);
    let their_id = r.json()["id"].as_i64().unwrap();

    // Backing up works end to end with the backup token alone.
    let mine = vec![TestChunk::new(rand_bytes(2, 5000), true), theirs[0].clone()];
    let missing = post_json(
        &url("/chunks/missing"),
        &backup,
        &json!({ "fingerprints": mine.iter().map(TestChunk::hex).collect::<Vec<_>>() }),
    );
    assert_eq!(missing.status, 200);
    assert_eq!(missing.json()["missing"], json!([mine[0].hex()]));
    assert_eq!(upload(&a, &s, &backup, &mine[..1]).unwrap().status, 200);
    let r = post_json(&url("/versions"), &backup, &manifest(&mine, "server"));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let my_id = r.json()["id"].as_i64().unwrap();

    // It lists and reads only its own version (a backup plans from its previous version).
    let list = request("GET", &url("/versions"), Some(&backup), &[], None).json();
    let ids: Vec<i64> = list["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![my_id]);
    // Nor the repository's size, which the full token is told when it asks.
    let sized = url("/versions?raw_bytes=true");
    let list = request("GET", &sized, Some(&backup), &[], None).json();
    assert!(list.get("raw_bytes").is_none(), "{list}");
    let full_list = request("GET", &sized, Some(&full), &[], None).json();
    assert!(full_list["raw_bytes"].as_u64().unwrap() > 0, "{full_list}");
    let unasked = request("GET", &url("/versions"), Some(&full), &[], None).json();
    assert!(unasked.get("raw_bytes").is_none(), "{unasked}");
    request(
        "GET",
        &url("/versions?raw_bytes=maybe"),
        Some(&full),
        &[],
        None,
    )
    .expect_error(400, "bad_request");
    assert_eq!(
        status("GET", &url(&format!("/versions/{my_id}")), &backup, None),
        200
    );
    request(
        "GET",
        &url(&format!("/versions/{their_id}")),
        Some(&backup),
        &[],
        None,
    )
    .expect_error(403, "forbidden");

    // No chunk bytes, no containers, no stats, no verify, no delete: not even of its own.
    let fp = mine[0].hex();
    for (method, path, body) in [
        ("GET", format!("/chunks/{fp}"), None),
        (
            "POST",
            "/chunks/get".to_string(),
            Some(json!({ "fingerprints": [fp] })),
        ),
        ("GET", "/containers".to_string(), None),
        ("GET", "/containers/1".to_string(), None),
        ("GET", format!("/versions/{my_id}/locations"), None),
        ("GET", "/stats".to_string(), None),
        ("POST", "/verify".to_string(), Some(json!({}))),
        ("DELETE", format!("/versions/{my_id}"), None),
        ("DELETE", format!("/versions/{their_id}"), None),
    ] {
        let r = match &body {
            Some(b) => request(
                method,
                &url(&path),
                Some(&backup),
                &[("Content-Type", "application/json")],
                Some(&serde_json::to_vec(b).unwrap()),
            ),
            None => request(method, &url(&path), Some(&backup), &[], None),
        };
        let j = r.expect_error(403, "forbidden");
        assert!(
            j["error"].as_str().unwrap().contains("backup token"),
            "{method} {path}: {j}"
        );
    }
    // Both versions are still there and whole.
    let list = request("GET", &url("/versions"), Some(&full), &[], None).json();
    assert_eq!(list["versions"].as_array().unwrap().len(), 2);
    assert_eq!(
        get_chunks(&s, "default", &full, &[fp], false)[0],
        mine[0].raw
    );

    // What the page reads to show the token's powers.
    let me = request("GET", &url("/token"), Some(&backup), &[], None).json();
    assert_eq!(me["scope"], "backup");
    assert_eq!(
        me["can"],
        json!({ "backup": true, "restore": false, "delete": false, "browse": false })
    );
}

#[test]
fn read_tokens_restore_and_browse_but_change_nothing() {
    let dir = TempDir::new("scope-read");
    let s = Server::start(&dir.0);
    let full = s.token.clone();
    let read = new_token(&dir, "read");
    let a = agent();
    let url = |p: &str| s.repo_url("default", p);

    let chunks = vec![TestChunk::new(rand_bytes(3, 4000), true)];
    assert_eq!(upload(&a, &s, &full, &chunks).unwrap().status, 200);
    let id = post_json(&url("/versions"), &full, &manifest(&chunks, "laptop")).json()["id"]
        .as_i64()
        .unwrap();

    for path in [
        "/versions".to_string(),
        format!("/versions/{id}"),
        format!("/versions/{id}/locations"),
        format!("/chunks/{}", chunks[0].hex()),
        "/containers".to_string(),
        "/stats".to_string(),
    ] {
        assert_eq!(status("GET", &url(&path), &read, None), 200, "{path}");
    }
    assert_eq!(
        get_chunks(&s, "default", &read, &[chunks[0].hex()], true)[0],
        chunks[0].raw
    );

    let more = vec![TestChunk::new(rand_bytes(4, 1000), false)];
    upload(&a, &s, &read, &more)
        .unwrap()
        .expect_error(403, "forbidden");
    post_json(&url("/versions"), &read, &manifest(&chunks, "x")).expect_error(403, "forbidden");
    request(
        "DELETE",
        &url(&format!("/versions/{id}")),
        Some(&read),
        &[],
        None,
    )
    .expect_error(403, "forbidden");
    // Nothing changed.
    assert_eq!(
        post_json(
            &url("/chunks/missing"),
            &read,
            &json!({ "fingerprints": [more[0].hex()] })
        )
        .json()["missing"],
        json!([more[0].hex()])
    );
    let list = request("GET", &url("/versions"), Some(&full), &[], None).json();
    assert_eq!(list["versions"].as_array().unwrap().len(), 1);
    let me = request("GET", &url("/token"), Some(&read), &[], None).json();
    assert_eq!(
        me["can"],
        json!({ "backup": false, "restore": true, "delete": false, "browse": true })
    );
}

/// The id `GET token` (at `url`) gives `token`, as `token list` shows it.
fn id_of(url: &str, token: &str) -> String {
    request("GET", url, Some(token), &[], None).json()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn tokens_are_listed_and_revoked_from_the_cli() {
    let dir = TempDir::new("scope-cli");
    let s = Server::start(&dir.0);
    let backup = new_token(&dir, "backup");
    let read = new_token(&dir, "read");
    let url = s.repo_url("default", "/token");
    let id_of = |t: &str| id_of(&url, t);
    let (backup_id, read_id) = (id_of(&backup), id_of(&read));

    let (code, out) = cli(&dir.0, &["token", "list", "default"]);
    assert_eq!(code, 0, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(out.contains(&format!("{backup_id}  backup")), "{out}");
    assert!(out.contains(&format!("{read_id}  read")), "{out}");
    assert!(out.contains(&format!("{}  full", id_of(&s.token))), "{out}");
    // The list shows ids, never the tokens themselves.
    assert!(!out.contains(&backup) && !out.contains(&read));

    // Refusals: too short, unknown, unknown scope.
    assert_ne!(cli(&dir.0, &["token", "revoke", "default", "abc"]).0, 0);
    assert_ne!(
        cli(&dir.0, &["token", "revoke", "default", "ffffffffffff"]).0,
        0
    );
    assert_ne!(
        cli(&dir.0, &["token", "create", "default", "--scope", "admin"]).0,
        0
    );

    let (code, out) = cli(&dir.0, &["token", "revoke", "default", &backup_id[..8]]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&backup_id), "{out}");
    request("GET", &url, Some(&backup), &[], None).expect_error(401, "unauthorized");
    assert_eq!(request("GET", &url, Some(&read), &[], None).status, 200);
    let (_, out) = cli(&dir.0, &["token", "list", "default"]);
    assert_eq!(out.lines().count(), 2, "{out}");
}

#[test]
fn the_default_token_stays_revoked_after_a_restart() {
    let dir = TempDir::new("scope-default-revoked");
    let mut s = Server::start(&dir.0);
    let old = s.token.clone();
    let url = s.repo_url("default", "/token");
    let id = id_of(&url, &old);
    let (code, out) = cli(&dir.0, &["token", "revoke", "default", &id]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("default-repo.token"), "{out}");
    request("GET", &url, Some(&old), &[], None).expect_error(401, "unauthorized");
    s.stop(Duration::from_secs(10));

    // Every start adds the file's token again: the file went with the revoke, so this start
    // makes a new one.
    let s = Server::start(&dir.0);
    assert_ne!(s.token, old);
    let url = s.repo_url("default", "/token");
    request("GET", &url, Some(&old), &[], None).expect_error(401, "unauthorized");
    assert_eq!(request("GET", &url, Some(&s.token), &[], None).status, 200);

    // Revoking another token of `default` leaves the file alone.
    let backup = new_token(&dir, "backup");
    let backup_id = id_of(&url, &backup);
    let (code, out) = cli(&dir.0, &["token", "revoke", "default", &backup_id]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("default-repo.token"), "{out}");
    assert!(dir.0.join("default-repo.token").exists());
}
