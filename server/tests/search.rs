//! `POST search`: DedupSearch run by the server must report exactly what the naive search
//! (each file reassembled and scanned whole, `wasm_core::search::NaiveSearch`) and a plain
//! substring scan of the reassembled files report, over versions that share chunks, with
//! keywords cut across chunk borders (one-byte partials too) and chunks shorter than a keyword.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::Duration;
use wasm_core::format::search_answer::decode_search_answer;
use wasm_core::search::{Dictionary, Match, Mode, NaiveSearch};

struct File {
    version: i64,
    path: String,
    chunks: Vec<usize>,
}

/// The files' hits by the naive search over the reassembled files, checked against a plain
/// substring scan.
fn naive(
    pool: &[TestChunk],
    files: &[File],
    keywords: &[Vec<u8>],
    mode: Mode,
    keep: impl Fn(&File) -> bool,
) -> SearchHits {
    let dict = Dictionary::new(keywords.to_vec(), 2048).unwrap();
    let mut search = NaiveSearch::new(&dict, mode);
    let mut out = SearchHits::new();
    for (i, f) in files.iter().enumerate().filter(|(_, f)| keep(f)) {
        let mut m: Vec<Match> = Vec::new();
        search.search_file(
            i as u64,
            f.chunks.iter().map(|&c| pool[c].raw.as_slice()),
            &mut m,
        );
        let mut hits: Vec<(u64, u64)> = m.iter().map(|m| (m.keyword as u64, m.offset)).collect();
        hits.sort_by_key(|&(k, o)| (o, k));
        // The plain scan: every overlapping occurrence (the first per keyword in files-only mode).
        let data: Vec<u8> = f.chunks.iter().flat_map(|&c| pool[c].raw.clone()).collect();
        let mut plain = Vec::new();
        for (k, kw) in keywords.iter().enumerate() {
            for at in 0..data.len().saturating_sub(kw.len() - 1) {
                if data[at..].starts_with(kw) {
                    plain.push((k as u64, at as u64));
                    if mode == Mode::FilesOnly {
                        break;
                    }
                }
            }
        }
        plain.sort_by_key(|&(k, o)| (o, k));
        assert_eq!(hits, plain, "naive search vs plain scan of {}", f.path);
        if !hits.is_empty() {
            out.insert((f.version, f.path.clone()), hits);
        }
    }
    out
}

fn search(s: &Server, t: &str, body: Value) -> Value {
    let r = post_json(&s.repo_url("default", "/search"), t, &body);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

/// The search `body` asked again for an answer in bytes (`Accept: application/x-ditto-search`,
/// docs/FORMAT.md "Search answer", what the page asks for): the JSON answer's files, hits and
/// figures, read with the codec the page reads it with.
fn assert_binary_answer_is(s: &Server, t: &str, body: &Value, json: &Value) {
    let r = request(
        "POST",
        &s.repo_url("default", "/search"),
        Some(t),
        &[
            ("Content-Type", "application/json"),
            ("Accept", "text/html, application/x-ditto-search;q=0.9"),
        ],
        Some(body.to_string().as_bytes()),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("content-type"), Some("application/x-ditto-search"));
    let a = decode_search_answer(&r.body).unwrap();
    let head: Value = serde_json::from_str(a.head).unwrap();
    for k in [
        "versions",
        "matches",
        "files_searched",
        "logical_bytes",
        "bytes_scanned",
    ] {
        assert_eq!(head[k], json[k], "{k}");
    }
    let files = json["files"].as_array().unwrap();
    assert_eq!(a.files.len(), files.len());
    for (f, j) in a.files.iter().zip(files) {
        let read = json!({
            "version": f.version,
            "path": f.path,
            "size": f.size,
            "recipe": f.fingerprints().chunks(20).map(hex_bytes).collect::<Vec<_>>(),
            "lengths": f.lengths().collect::<Vec<_>>(),
            "hits": f.hits().map(|(k, o)| json!([k, o])).collect::<Vec<_>>(),
        });
        assert_eq!(&read, j);
    }
}

/// Waits for the server's warm-up of its search cache to cover `version`; its report
/// (`stats.search_warm`).
fn wait_warm(s: &Server, t: &str, version: Option<i64>) -> Value {
    let mut warm = Value::Null;
    wait_until(
        "the search cache's warm-up",
        Duration::from_secs(120),
        || {
            let r = request("GET", &s.repo_url("default", "/stats"), Some(t), &[], None);
            assert_eq!(r.status, 200);
            warm = r.json()["search_warm"].clone();
            warm["version"].as_i64() == version
        },
    );
    warm
}

#[test]
fn server_search_equals_the_naive_search() {
    let dir = TempDir::new("search");
    let s = Server::start(&dir.0);
    let t = s.token.clone();
    let a = agent();

    // A pool of chunks: text (zstd) with the keywords planted, random bytes (raw), a few
    // chunks ending in a keyword's prefix or starting with its suffix, and short chunks.
    let keywords: Vec<Vec<u8>> = [
        &b"backup"[..],
        b"zstd chunk",
        b"ditto",
        b"k",
        b"\x00\xff\x10",
    ]
    .iter()
    .map(|k| k.to_vec())
    .collect();
    let mut pool: Vec<TestChunk> = Vec::new();
    for i in 0..40u64 {
        let len = 3000 + (i as usize * 7919) % 20_000;
        let mut raw = if i % 3 == 2 {
            rand_bytes(i, len)
        } else {
            text_bytes(i, len)
        };
        match i % 5 {
            0 => raw.extend_from_slice(b"bac"), // "backup" continues in the next chunk
            1 => raw = [&b"kup"[..], &raw].concat(), // "backup"'s suffix opens the chunk
            2 => raw.extend_from_slice(b"zstd chun"), // an n - 1 prefix
            3 => raw.push(b'd'),                // a one-byte prefix of "ditto"
            _ => raw.extend_from_slice(b"\x00\xff"),
        }
        pool.push(TestChunk::new(raw, i % 3 != 2));
    }
    pool.push(TestChunk::new(b"itto".to_vec(), false)); // completes a one-byte "d"
    pool.push(TestChunk::new(b"ku".to_vec(), false)); // shorter than "backup": an infix
    pool.push(TestChunk::new(b"p zstd".to_vec(), false));
    pool.push(TestChunk::new(b"\x10".to_vec(), false));
    for c in pool.chunks(10) {
        assert_eq!(upload(&a, &s, &t, c).unwrap().status, 200);
    }
    let n = pool.len();
    let mut files: Vec<File> = Vec::new();
    let mut versions = Vec::new();
    for v in 0..3u64 {
        let mut entries = Vec::new();
        let mut mine = Vec::new();
        for f in 0..12u64 {
            // Deterministic recipes mixing shared chunks and the short ones between them.
            let mut chunks = Vec::new();
            let mut x = (v * 131 + f * 17 + 7) as usize;
            for _ in 0..(2 + (f as usize % 6)) {
                x = (x * 1103 + 12345) % 100_003;
                chunks.push(x % 40);
                if x.is_multiple_of(4) {
                    chunks.push(40 + x % (n - 40));
                }
            }
            let size: usize = chunks.iter().map(|&c| pool[c].raw.len()).sum();
            let path = format!(
                "src/{}/file{f}.txt",
                if f.is_multiple_of(2) { "Hooks" } else { "core" }
            );
            entries.push(
                json!({ "path": path, "kind": "file", "size": size, "mtime": 1,
                "recipe": chunks.iter().map(|&c| pool[c].hex()).collect::<Vec<_>>() }),
            );
            mine.push((path, chunks));
        }
        entries.push(
            json!({ "path": "src/empty", "kind": "file", "size": 0, "mtime": 1, "recipe": [] }),
        );
        let r = post_json(
            &s.repo_url("default", "/versions"),
            &t,
            &json!({ "source": "src", "time": 1_700_000_000_000i64 + v as i64, "entries": entries }),
        );
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        let id = r.json()["id"].as_i64().unwrap();
        versions.push(id);
        files.extend(mine.into_iter().map(|(path, chunks)| File {
            version: id,
            path,
            chunks,
        }));
    }

    // After each commit (and its delta pass) the server decodes the repository's chunks
    // into its search cache, so even the first search reads no container.
    let warm = wait_warm(&s, &t, versions.last().copied());
    assert_eq!(warm["cached"], true, "{warm}");

    // Every keyword, all matches.
    let hex: Vec<String> = keywords.iter().map(|k| hex_bytes(k)).collect();
    let body = json!({ "keywords": hex, "hex": true });
    let r = search(&s, &t, body.clone());
    assert_binary_answer_is(&s, &t, &body, &r);
    let want = naive(&pool, &files, &keywords, Mode::AllMatches, |_| true);
    let total: usize = want.values().map(Vec::len).sum();
    assert!(total > 200, "the corpus has matches to find ({total})");
    assert!(
        want.values().flatten().any(|&(k, _)| k == 0),
        "a \"backup\" split across chunks is found"
    );
    assert_eq!(search_hits(&r), want);
    // "k" has no trigram: no summary can rule a chunk out.
    assert_eq!(r["chunks_ruled_out"], 0, "{r}");
    assert_eq!(r["bytes_ruled_out"], 0, "{r}");
    assert_eq!(r["matches"].as_u64(), Some(total as u64));
    assert_eq!(r["files_searched"].as_u64(), Some(36));
    // Each unique chunk was read once: fewer bytes scanned than the files hold.
    let logical = r["logical_bytes"].as_u64().unwrap();
    assert!(r["bytes_scanned"].as_u64().unwrap() < logical);
    assert_eq!(r["stored_bytes_read"], 0, "{r}");
    // The warm-up's figure is every stored chunk's raw bytes (the budget's gate), the
    // search's the chunks its files name.
    assert!(r["bytes_scanned"].as_u64().unwrap() <= warm["raw_bytes"].as_u64().unwrap());
    let scanned = r["bytes_scanned"].clone();
    // The recipe of each file with hits comes along (snippets).
    let f0 = &r["files"][0];
    let recipe_len: u64 = f0["lengths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_u64().unwrap())
        .sum();
    assert_eq!(recipe_len, f0["size"].as_u64().unwrap());

    // Text keywords, files-only mode.
    let text = vec![b"backup".to_vec(), b"ditto".to_vec()];
    let r = search(
        &s,
        &t,
        json!({ "keywords": ["backup", "ditto"], "files_only": true }),
    );
    assert_eq!(
        search_hits(&r),
        naive(&pool, &files, &text, Mode::FilesOnly, |_| true)
    );
    // A repeat search scans from memory too: no container read, the same chunks scanned
    // (and, above and below, the naive search's hits). The warm-up summarised the cached
    // chunks' trigrams, per block of 1 KiB: chunks holding neither keyword (random bytes,
    // most text) are scanned at their ends only, and in the others the blocks where neither
    // starts are not read; "backup" split across two chunks is found all the same.
    assert_eq!(r["stored_bytes_read"], 0, "{r}");
    let ruled_out = r["chunks_ruled_out"].as_u64().unwrap();
    assert!(
        ruled_out >= 1 && ruled_out < r["chunks"].as_u64().unwrap(),
        "{r}"
    );
    let bytes_ruled_out = r["bytes_ruled_out"].as_u64().unwrap();
    assert!(
        bytes_ruled_out >= scanned.as_u64().unwrap() / 8
            && bytes_ruled_out < scanned.as_u64().unwrap(),
        "{r}"
    );
    assert_eq!(r["bytes_scanned"], scanned);

    // Scope: two versions, a path filter (case-insensitive).
    let scope = [versions[0], versions[2]];
    let r = search(
        &s,
        &t,
        json!({ "keywords": ["backup", "ditto"], "versions": scope, "path": "hooks" }),
    );
    let want = naive(&pool, &files, &text, Mode::AllMatches, |f| {
        scope.contains(&f.version) && f.path.to_lowercase().contains("hooks")
    });
    assert!(!want.is_empty());
    assert_eq!(search_hits(&r), want);

    // The query as typed in the page, one keyword per line, read as the page's workers
    // read it: the same hits.
    let typed = search(
        &s,
        &t,
        json!({ "text": "\r\nbackup\r\n\nditto\n", "versions": scope, "path": "hooks" }),
    );
    assert_eq!(search_hits(&typed), want);
    let typed = search(
        &s,
        &t,
        json!({ "text": hex.join("\n"), "hex": true, "files_only": true }),
    );
    assert_eq!(
        search_hits(&typed),
        naive(&pool, &files, &keywords, Mode::FilesOnly, |_| true)
    );

    // Bad input: 4xx with a message, never 5xx.
    let url = s.repo_url("default", "/search");
    let r = post_json(&url, &t, &json!({ "text": "00\n\nab q1", "hex": true }));
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["error"],
        "keyword 2: invalid hex at character 4",
        "the line's number among the keywords, the character's in the line"
    );
    let r = post_json(&url, &t, &json!({ "keywords": [" 0x1"], "hex": true }));
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["error"],
        "keyword 1: invalid hex at character 5",
        "counted in the keyword as given, blanks and prefix included"
    );
    let r = post_json(&url, &t, &json!({ "keywords": ["x", "y".repeat(2049)] }));
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["error"],
        "keyword 2 has 2049 bytes; at most 2048 (the minimum chunk size)"
    );
    for (body, status) in [
        (json!({ "keywords": [] }), 400),
        (json!({ "text": "\n\r\n" }), 400),
        (json!({ "text": "x", "keywords": ["x"] }), 400),
        (json!({ "keywords": [""] }), 400),
        (json!({ "keywords": ["zz"], "hex": true }), 400),
        (json!({ "keywords": ["x".repeat(2049)] }), 400),
        // The keyword set's limits (wasm_core::search::MAX_KEYWORDS, MAX_KEYWORD_BYTES).
        (json!({ "keywords": vec!["k"; 4097] }), 400),
        (
            json!({ "keywords": (0..33).map(|i| format!("{i:02}{}", "x".repeat(2046))).collect::<Vec<_>>() }),
            400,
        ),
        (json!({ "keywords": ["x"], "versions": [999_999] }), 404),
        (json!({ "keywords": ["x"], "unknown": 1 }), 400),
        (json!({ "keywords": "x" }), 400),
    ] {
        let r = post_json(&url, &t, &body);
        assert_eq!(
            r.status,
            status,
            "{body}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    // At the limits: 4096 keywords, 64 KiB in all.
    let most: Vec<String> = (0..4096).map(|i| format!("zq{i:04}")).collect();
    search(&s, &t, json!({ "keywords": most }));
    let widest: Vec<String> = (0..32)
        .map(|i| format!("{i:02}{}", "x".repeat(2046)))
        .collect();
    search(&s, &t, json!({ "keywords": widest }));
    let r = request(
        "POST",
        &url,
        None,
        &[("Content-Type", "application/json")],
        Some(b"{}"),
    );
    assert_eq!(r.status, 401);
}

/// The server's search cache (`DITTO_SEARCH_CACHE_MB`): a repeat search reads nothing when
/// its chunks fit the budget; a search over more than the budget keeps what it cached and
/// a repeat reads only the rest, with the same hits; a server started again has nothing
/// cached and warms it up at start. A repository over the budget is not warmed after a
/// commit: its first search reads everything.
#[test]
fn repeat_searches_scan_from_the_cache_within_its_budget() {
    let dir = TempDir::new("search-cache");
    // 1 MiB of budget; 24 chunks of ~100 KB: about ten fit.
    let mut s = Server::start_with(
        &dir.0,
        &[("DITTO_DELTA", "0"), ("DITTO_SEARCH_CACHE_MB", "1")],
        None,
    );
    let t = s.token.clone();
    let a = agent();
    let pool: Vec<TestChunk> = (0..24u64)
        .map(|i| {
            let mut raw = rand_bytes(100 + i, 100_000);
            raw[5_000..5_006].copy_from_slice(b"needle");
            TestChunk::new(raw, false)
        })
        .collect();
    for c in pool.chunks(8) {
        assert_eq!(upload(&a, &s, &t, c).unwrap().status, 200);
    }
    let entries: Vec<Value> = pool
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({ "path": format!("f{i}"), "kind": "file", "size": c.raw.len(), "mtime": 1,
                    "recipe": [c.hex()] })
        })
        .collect();
    let r = post_json(
        &s.repo_url("default", "/versions"),
        &t,
        &json!({ "source": "s", "time": 1, "entries": entries }),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let total: u64 = pool.iter().map(|c| c.raw.len() as u64).sum();
    let id = r.json()["id"].as_i64();
    let warm = wait_warm(&s, &t, id);
    assert_eq!(warm["cached"], false, "over the budget: {warm}");
    assert_eq!(warm["raw_bytes"], total);
    assert_eq!(warm["decoded_bytes"], 0);
    let body = json!({ "keywords": ["needle"] });
    let first = search(&s, &t, body.clone());
    assert_eq!(first["matches"], 24);
    assert_eq!(first["stored_bytes_read"], total);
    let second = search(&s, &t, body.clone());
    assert_eq!(search_hits(&second), search_hits(&first));
    let read = second["stored_bytes_read"].as_u64().unwrap();
    let cached = total - read;
    assert!(
        (800_000..=1 << 20).contains(&cached),
        "about the budget is scanned from memory: {cached} bytes"
    );
    // The same chunks stay cached: a third search reads what the second read.
    let third = search(&s, &t, body.clone());
    assert_eq!(third["stored_bytes_read"].as_u64().unwrap(), read);
    assert_eq!(search_hits(&third), search_hits(&first));

    // The cache is memory only: a server started again (with the default budget) decodes
    // everything once more, in its warm-up at start, and its first search reads nothing.
    s.stop(std::time::Duration::from_secs(10));
    let s = Server::start_with(&dir.0, &[("DITTO_DELTA", "0")], None);
    let warm = wait_warm(&s, &s.token, id);
    assert_eq!(warm["cached"], true, "{warm}");
    assert_eq!(warm["decoded_bytes"], total);
    assert_eq!(warm["versions"], 1);
    let again = search(&s, &s.token, body.clone());
    assert_eq!(again["stored_bytes_read"], 0);
    assert_eq!(search_hits(&again), search_hits(&first));

    // A commit after that warms what it added, not the repository again: one new chunk
    // decoded, and the next search, which finds it too, still reads nothing.
    let mut raw = rand_bytes(999, 50_000);
    raw[100..106].copy_from_slice(b"needle");
    let extra = TestChunk::new(raw, false);
    assert_eq!(
        upload(&a, &s, &s.token, std::slice::from_ref(&extra))
            .unwrap()
            .status,
        200
    );
    let mut more = entries.clone();
    more.push(
        json!({ "path": "extra", "kind": "file", "size": extra.raw.len(), "mtime": 1,
                      "recipe": [extra.hex()] }),
    );
    let r = post_json(
        &s.repo_url("default", "/versions"),
        &s.token,
        &json!({ "source": "s", "time": 2, "entries": more }),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let warm = wait_warm(&s, &s.token, r.json()["id"].as_i64());
    assert_eq!(warm["cached"], true, "{warm}");
    assert_eq!(
        warm["versions"], 1,
        "only the new version is scoped: {warm}"
    );
    assert_eq!(warm["decoded_bytes"], extra.raw.len() as u64, "{warm}");
    assert_eq!(warm["raw_bytes"], total + extra.raw.len() as u64, "{warm}");
    let after = search(&s, &s.token, body.clone());
    assert_eq!(after["stored_bytes_read"], 0, "{after}");
    assert_eq!(after["matches"], 24 + 25);

    // The first version forgotten (the second's manifest, stored against it, stored again
    // standalone): searches read the versions there are, whatever an earlier one kept of
    // the versions' files.
    let r = post_json(
        &s.repo_url("default", "/forget"),
        &s.token,
        &json!({ "versions": [id] }),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let left = search(&s, &s.token, body);
    assert_eq!(left["matches"], 25, "{left}");
    assert_eq!(left["files_searched"], 25, "{left}");
}

/// A search that would answer more matches than the server's limit is refused with 422
/// `too_many_matches` (the limit given), whether the exact offsets of the unique chunks pass
/// four times the limit (the physical phase) or one chunk repeated through a file makes the
/// matches (the logical phase): the matches would be held in memory and answered whole. A
/// rarer keyword is answered as before.
#[test]
fn a_search_with_too_many_matches_is_refused() {
    let dir = TempDir::new("search-limit");
    let s = Server::start_with(&dir.0, &[("DITTO_SEARCH_MAX_MATCHES", "1000")], None);
    let t = s.token.clone();
    let a = agent();
    // 5 000 "a" in one chunk: past four times the limit in the physical phase. 500 "b" in
    // another, repeated 4 times in a file: 2 000 matches, past the limit only in the walk.
    let mut many = vec![b'a'; 5000];
    many.extend_from_slice(b" needle");
    let few = vec![b'b'; 500];
    let (many, few) = (TestChunk::new(many, true), TestChunk::new(few, false));
    assert_eq!(
        upload(&a, &s, &t, &[many.clone(), few.clone()])
            .unwrap()
            .status,
        200
    );
    let m = json!({ "source": "s", "time": 1, "entries": [
        { "path": "a.txt", "kind": "file", "size": many.raw.len(), "mtime": 0, "mode": null,
          "recipe": [many.hex()] },
        { "path": "b.txt", "kind": "file", "size": 4 * few.raw.len(), "mtime": 0, "mode": null,
          "recipe": [few.hex(), few.hex(), few.hex(), few.hex()] } ] });
    assert_eq!(
        post_json(&s.repo_url("default", "/versions"), &t, &m).status,
        201
    );
    let url = s.repo_url("default", "/search");
    for kw in ["a", "b"] {
        let e =
            post_json(&url, &t, &json!({ "keywords": [kw] })).expect_error(422, "too_many_matches");
        assert_eq!(e["limit"], 1000, "{e}");
    }
    let r = search(&s, &t, json!({ "keywords": ["needle"] }));
    assert_eq!(r["matches"], 1, "{r}");
    assert_eq!(r["files"][0]["hits"], json!([[0, 5001]]), "{r}");
    // Files only: the first hit per keyword and file, however common the word.
    let r = search(
        &s,
        &t,
        json!({ "keywords": ["a", "b"], "files_only": true }),
    );
    assert_eq!(r["matches"], 2, "{r}");
    let hits: Vec<(String, Value)> = r["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap().to_string(), f["hits"].clone()))
        .collect();
    assert_eq!(
        hits,
        [
            ("a.txt".to_string(), json!([[0, 0]])),
            ("b.txt".to_string(), json!([[1, 0]]))
        ],
        "{r}"
    );
}

/// Commits a version of one file of `n` distinct chunks (text from seeds `seed..`), each
/// holding "needle" once.
fn needle_chunks(s: &Server, seed: u64, n: u64) {
    needle_chunks_in(s, "default", &s.token, seed, n);
}

/// [`needle_chunks`] in repository `repo`.
fn needle_chunks_in(s: &Server, repo: &str, token: &str, seed: u64, n: u64) {
    let a = agent();
    let pool: Vec<TestChunk> = (0..n)
        .map(|i| {
            let mut raw = text_bytes(seed + i, 3000);
            raw.extend_from_slice(b" needle");
            TestChunk::new(raw, true)
        })
        .collect();
    for c in pool.chunks(50) {
        let r = try_request(
            &a,
            "POST",
            &s.repo_url(repo, "/bundles"),
            Some(token),
            &[("Content-Type", "application/x-ditto-bundle")],
            Some(&bundle(c)),
        );
        assert_eq!(r.unwrap().status, 200);
    }
    let m = json!({ "source": "s", "time": 1, "entries": [
        { "path": "all.txt", "kind": "file", "size": pool.iter().map(|c| c.raw.len()).sum::<usize>(),
          "mtime": 0, "mode": null, "recipe": pool.iter().map(TestChunk::hex).collect::<Vec<_>>() } ] });
    assert_eq!(
        post_json(&s.repo_url(repo, "/versions"), token, &m).status,
        201
    );
}

/// A search whose client goes away stops at its next chunk instead of running to its end on
/// the server's threads (each chunk here takes 20 ms more, `DITTO_TEST_DELAY_AT`: 200 chunks
/// on two threads would take two seconds), and the next search answers in full.
#[test]
fn a_search_whose_client_goes_away_stops() {
    let dir = TempDir::new("search-abandon");
    let s = Server::start_with(
        &dir.0,
        &[
            ("DITTO_SEARCH_CACHE_MB", "0"),
            ("DITTO_TEST_DELAY_AT", "search:chunk:20"),
        ],
        None,
    );
    let t = s.token.clone();
    needle_chunks(&s, 1000, 200);
    let url = s.repo_url("default", "/search");
    let impatient = ureq::AgentBuilder::new()
        .timeout(Duration::from_millis(300))
        .build();
    let gone = impatient
        .post(&url)
        .set("Authorization", &format!("Bearer {t}"))
        .set("Content-Type", "application/json")
        .send_string(&json!({ "keywords": ["needle"] }).to_string());
    assert!(gone.is_err(), "the search answered within 300 ms");
    let t0 = std::time::Instant::now();
    wait_until(
        "the abandoned search to stop",
        Duration::from_secs(5),
        || {
            s.stderr
                .lock()
                .unwrap()
                .contains("the client went away; stopped")
        },
    );
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    let r = search(&s, &t, json!({ "keywords": ["needle"] }));
    assert_eq!(r["matches"], 200, "{r}");
}

/// A server that runs one search at a time, each chunk of which takes 10 ms more, with
/// nothing cached: searches long enough to queue behind each other.
fn one_slot_server(tag: &str) -> (TempDir, Server) {
    let dir = TempDir::new(tag);
    let s = Server::start_with(
        &dir.0,
        &[
            ("DITTO_SEARCH_CACHE_MB", "0"),
            ("DITTO_SEARCH_SLOTS", "1"),
            ("DITTO_TEST_DELAY_AT", "search:chunk:10"),
        ],
        None,
    );
    (dir, s)
}

/// A freed slot goes to another repository's waiting search before the next of the
/// searches one repository queued (docs/API.md, `POST search`): one repository's queue does
/// not hold the others back beyond the search that runs.
#[test]
fn another_repositorys_search_goes_before_one_repositorys_queue() {
    let (dir, s) = one_slot_server("search-turns");
    let (code, other) = cli(&dir.0, &["repo", "create", "other"]);
    assert_eq!(code, 0);
    let other = other.trim().to_string();
    needle_chunks(&s, 2000, 100);
    needle_chunks_in(&s, "other", &other, 3000, 100);
    let waiting = |n: usize| {
        let text = format!("search slots (DITTO_SEARCH_SLOTS), {n} waiting");
        wait_until(&text, Duration::from_secs(20), || {
            s.stderr.lock().unwrap().contains(&text)
        });
    };
    let ended = std::sync::Mutex::new(Vec::new());
    let run = |repo: &'static str, token: &str| {
        let r = post_json(
            &s.repo_url(repo, "/search"),
            token,
            &json!({ "keywords": ["needle"] }),
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["matches"], 100);
        ended.lock().unwrap().push(repo);
    };
    std::thread::scope(|sc| {
        // One runs (each takes 100 chunks of 10 ms), two wait.
        for _ in 0..3 {
            sc.spawn(|| run("default", &s.token));
        }
        waiting(2);
        sc.spawn(|| run("other", &other));
        waiting(3);
    });
    assert_eq!(
        *ended.lock().unwrap(),
        ["default", "other", "default", "default"]
    );
}

/// Searches beyond `DITTO_SEARCH_SLOTS` wait for a running one to end, then answer in full;
/// bad keywords are refused without waiting; a value out of range stops the server at start.
#[test]
fn searches_beyond_the_slots_wait_their_turn() {
    let (_dir, s) = one_slot_server("search-slots");
    let t = s.token.clone();
    needle_chunks(&s, 2000, 100);
    let t0 = std::time::Instant::now();
    std::thread::scope(|sc| {
        let running: Vec<_> = (0..3)
            .map(|_| sc.spawn(|| search(&s, &t, json!({ "keywords": ["needle"] }))))
            .collect();
        // Refused while the others run or wait: the keywords are checked first.
        wait_until("a search to wait", Duration::from_secs(10), || {
            s.stderr
                .lock()
                .unwrap()
                .contains("waits for one of 1 search slots")
        });
        let bad = post_json(
            &s.repo_url("default", "/search"),
            &t,
            &json!({ "keywords": ["zz"], "hex": true }),
        );
        bad.expect_error(400, "bad_request");
        for r in running {
            assert_eq!(r.join().unwrap()["matches"], 100);
        }
    });
    // One at a time: 100 chunks of 10 ms on up to four threads each, three times over.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let one = Duration::from_millis(10 * 100 / threads as u64);
    assert!(t0.elapsed() >= one * 3, "{:?} < 3 x {one:?}", t0.elapsed());

    let out = server_cmd(&TempDir::new("search-slots-bad").0)
        .env("DITTO_SEARCH_SLOTS", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("DITTO_SEARCH_SLOTS must be"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
