//! The delta pass (DARE, issue 17) against the real server process: chunks of a new version
//! that resemble stored ones are re-stored as deltas (codec 2), every reader answers their
//! bytes unchanged, expiry keeps the bases a live delta needs, a damaged delta is refused,
//! a kill at each persistence point of the pass loses nothing, and garbage collection keeps
//! exactly what live versions need, bases of live deltas included.

mod common;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    ops::Range,
    time::Duration,
};

use common::*;
use serde_json::{json, Value};
use wasm_core::hash::{fingerprint, to_hex};

/// Server settings: the pass on, every cold chunk leaves active containers.
const ENV: &[(&str, &str)] = &[
    ("DITTO_DELTA", "1"),
    ("DITTO_MOVE_THRESHOLD", "0"),
    ("DITTO_COMPACT_THRESHOLD", "0.5"),
];
/// [`ENV`] with the pass off.
const ENV_NO_PASS: &[(&str, &str)] = &[("DITTO_DELTA", "0"), ENV[1], ENV[2]];
/// [`ENV`] without frames: the tests of one delta per chunk (DupAdj, super-features,
/// recompression, dictionaries) look at what the pass stores before frames take its chunks.
const ENV_NO_FRAMES: &[(&str, &str)] = &[ENV[0], ENV[1], ENV[2], ("DITTO_FRAMES", "0")];

/// `chunk` with a few bytes changed (a small edit, as between two versions of a file).
fn edited(chunk: &[u8], seed: u64) -> Vec<u8> {
    let mut out = chunk.to_vec();
    let r = rand_bytes(seed, 8);
    for k in 0..4 {
        let at = (r[k] as usize * 257 + k * 997) % out.len();
        out[at] = out[at].wrapping_add(1 + r[k + 4] % 200);
    }
    out
}

/// Two versions of one source: v1 has files `a` (40 text chunks) and `b` (12); v2 edits
/// every third chunk of `a` in place (next to duplicates: DupAdj's case) and replaces `b`
/// by edited copies of its chunks in reverse order with new chunks between (no aligned
/// duplicate: the super-features' case).
struct History {
    chunks: Vec<TestChunk>,
    v1: Value,
    v2: Value,
}

fn history() -> History {
    let mut chunks = Vec::new();
    let mut add = |raw: Vec<u8>| {
        let c = TestChunk::new(raw, true);
        let h = c.hex();
        chunks.push(c);
        h
    };
    let a: Vec<Vec<u8>> = (0..40)
        .map(|i| text_bytes(0xA000 + i, 8_000 + (i as usize * 733) % 24_000))
        .collect();
    let b: Vec<Vec<u8>> = (0..12)
        .map(|i| rand_bytes(0xB000 + i, 6_000 + (i as usize * 911) % 20_000))
        .collect();
    let a1: Vec<String> = a.iter().map(|r| add(r.clone())).collect();
    let b1: Vec<String> = b.iter().map(|r| add(r.clone())).collect();
    let a2: Vec<String> = a
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if i % 3 == 1 {
                add(edited(r, i as u64))
            } else {
                a1[i].clone()
            }
        })
        .collect();
    let mut b2 = Vec::new();
    for (i, r) in b.iter().enumerate().rev() {
        b2.push(add(edited(r, 100 + i as u64)));
        b2.push(add(rand_bytes(0xC000 + i as u64, 3_000)));
    }
    // Sizes come from the chunks made above.
    let all = chunks.clone();
    let size_of = |recipe: &Vec<String>| -> usize {
        recipe
            .iter()
            .map(|h| all.iter().find(|c| &c.hex() == h).unwrap().raw.len())
            .sum()
    };
    let mk = |t: i64, files: &[(&str, &Vec<String>)]| {
        let mut entries = vec![json!({ "path": "src", "kind": "dir", "size": 0, "mtime": t,
            "mode": 493, "recipe": [] })];
        for (p, recipe) in files {
            entries.push(json!({ "path": format!("src/{p}"), "kind": "file",
                "size": size_of(recipe), "mtime": t, "mode": 420, "recipe": recipe }));
        }
        json!({ "source": "src", "time": t, "entries": entries })
    };
    let v1 = mk(1_763_000_000_000, &[("a", &a1), ("b", &b1)]);
    let v2 = mk(1_763_000_360_000, &[("a", &a2), ("b", &b2)]);
    History {
        chunks: all,
        v1,
        v2,
    }
}

/// Every fingerprint a version's manifest names, in order.
fn fps_of(m: &Value) -> Vec<String> {
    m["entries"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["recipe"].as_array().unwrap().iter())
        .map(|h| h.as_str().unwrap().to_string())
        .collect()
}

/// Uploads what the server lacks of `m`'s chunks and commits `m`; the version id.
fn backup(s: &Server, h: &History, m: &Value) -> i64 {
    backup_of(s, &h.chunks, m)
}

/// [`backup`] with the chunks from `chunks`.
fn backup_of(s: &Server, chunks: &[TestChunk], m: &Value) -> i64 {
    let fps = fps_of(m);
    let r = post_json(
        &s.repo_url("default", "/chunks/missing"),
        &s.token,
        &json!({ "fingerprints": fps }),
    );
    assert_eq!(r.status, 200);
    let miss: Vec<String> = serde_json::from_value(r.json()["missing"].clone()).unwrap();
    let batch: Vec<TestChunk> = chunks
        .iter()
        .filter(|c| miss.contains(&c.hex()))
        .cloned()
        .collect();
    if !batch.is_empty() {
        let r = upload(&agent(), s, &s.token, &batch).unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    let r = post_json(&s.repo_url("default", "/versions"), &s.token, m);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json()["id"].as_i64().unwrap()
}

fn stats(s: &Server) -> Value {
    let r = request(
        "GET",
        &s.repo_url("default", "/stats"),
        Some(&s.token),
        &[],
        None,
    );
    assert_eq!(r.status, 200);
    r.json()
}

/// Every chunk of `m` reads back byte-identical through `chunks/get` (as stored and
/// decoded) and `GET chunks/{fp}`.
fn read_back(s: &Server, h: &History, m: &Value, ctx: &str) {
    let fps = fps_of(m);
    for decode in [false, true] {
        let got = get_chunks(s, "default", &s.token, &fps, decode);
        for (raw, fp) in got.iter().zip(&fps) {
            let want = &h.chunks.iter().find(|c| &c.hex() == fp).unwrap().raw;
            assert!(raw == want, "{ctx}: chunk {fp} reads back different bytes");
        }
    }
    for fp in fps.iter().step_by(7) {
        let r = get_chunk(s, fp);
        assert_eq!(r.status, 200, "{ctx}: GET chunks/{fp}");
        let want = &h.chunks.iter().find(|c| &c.hex() == fp).unwrap().raw;
        assert!(&r.body == want, "{ctx}: GET chunks/{fp} bytes");
    }
}

/// `forget` with `keep_last: 1`, then `prune`.
/// Expires every version but the newest and prunes, checking that the stored bytes fell by
/// exactly what the forget's preview (a dry run) said it frees.
fn expire_all_but_newest(s: &Server) {
    let forget = |dry_run: bool| {
        let r = post_json(
            &s.repo_url("default", "/forget"),
            &s.token,
            &json!({ "policy": { "keep_last": 1 }, "dry_run": dry_run }),
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        r.json()
    };
    let said = forget(true)["freed_bytes"].as_i64().unwrap();
    let before = stats(s)["stored_bytes"].as_i64().unwrap();
    forget(false);
    let r = post_json(&s.repo_url("default", "/prune"), &s.token, &json!({}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let after = stats(s)["stored_bytes"].as_i64().unwrap();
    assert_eq!(
        before - after,
        said,
        "the forget frees what its preview said"
    );
}

/// Runs `delete` (which removes version `v` and prunes) and checks that the stored bytes
/// fell by exactly the version's `unique_stored_bytes` from the stats before it (what the
/// page shows as freed before a deletion).
fn frees_what_stats_said(s: &Server, v: i64, delete: impl FnOnce()) {
    let st = stats(s);
    let said = st["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"].as_i64() == Some(v))
        .and_then(|x| x["unique_stored_bytes"].as_i64())
        .unwrap_or_else(|| panic!("no unique_stored_bytes for version {v}: {st}"));
    let before = st["stored_bytes"].as_i64().unwrap();
    delete();
    let after = stats(s)["stored_bytes"].as_i64().unwrap();
    assert_eq!(
        before - after,
        said,
        "deleting version {v} frees what the stats said it alone holds"
    );
}

fn check_cli(dir: &std::path::Path, ctx: &str) {
    let (code, out) = cli(dir, &["check", "default"]);
    assert_eq!(code, 0, "{ctx}: check failed:\n{out}");
}

/// Waits for the background work after the commit of `v`: its delta pass (which runs the
/// mover), then the search cache's warm-up, the last step, which reads the new chunks checked
/// (a test that damages a container afterwards knows that nothing reads it behind its back).
/// Answers the `stats` that showed both, the pass's report in it.
fn wait_pass(s: &Server, v: i64) -> Value {
    let mut last = Value::Null;
    wait_until(
        "the delta pass and the search cache's warm-up",
        Duration::from_secs(120),
        || {
            last = stats(s);
            last["delta_pass"]["version"].as_i64() == Some(v)
                && last["search_warm"]["version"].as_i64() >= Some(v)
        },
    );
    last
}

/// Backs up v1, then v2, each after the pass of the one before: answers their ids and the
/// `stats` that showed v2's pass.
fn both_passed(s: &Server, h: &History) -> (i64, i64, Value) {
    let v1 = backup(s, h, &h.v1);
    wait_pass(s, v1);
    let v2 = backup(s, h, &h.v2);
    let st = wait_pass(s, v2);
    (v1, v2, st)
}

/// `GET versions` of the default repository (`path`: `/versions` and its query), which
/// must answer 200.
fn versions_json(s: &Server, path: &str) -> Value {
    let r = request(
        "GET",
        &s.repo_url("default", path),
        Some(&s.token),
        &[],
        None,
    );
    assert_eq!(r.status, 200);
    r.json()
}

/// `GET containers` of the default repository, which must answer 200.
fn containers_json(s: &Server) -> Value {
    let r = request(
        "GET",
        &s.repo_url("default", "/containers"),
        Some(&s.token),
        &[],
        None,
    );
    assert_eq!(r.status, 200);
    r.json()
}

#[test]
fn deltas_read_back_survive_expiry_and_refuse_damage() {
    let dir = TempDir::new("delta");
    let h = history();
    let mut s = Server::start_with(&dir.0, ENV_NO_FRAMES, None);
    let (v1, v2, st) = both_passed(&s, &h);
    let pass = &st["delta_pass"];
    eprintln!("delta pass: {pass}");
    // 13 edited chunks of `a` next to duplicates, 12 of `b` found by super-features.
    assert!(
        pass["dupadj"].as_u64().unwrap() >= 10,
        "DupAdj pairs the edited neighbours of duplicates: {pass}"
    );
    assert!(
        pass["superfeature"].as_u64().unwrap() >= 8,
        "super-features find the moved, edited chunks: {pass}"
    );
    let n = st["delta_chunks"].as_i64().unwrap();
    assert_eq!(n as u64, pass["delta_chunks"].as_u64().unwrap());
    assert!(st["delta_saved_bytes"].as_i64().unwrap() > 100_000, "{st}");
    read_back(&s, &h, &h.v1, "after the pass, v1");
    read_back(&s, &h, &h.v2, "after the pass, v2");
    search_equals_naive(&s, &h, &[(v1, &h.v1), (v2, &h.v2)]);
    s.stop(Duration::from_secs(10));
    check_cli(&dir.0, "after the pass");

    // Expiry: v1 goes, the bases its chunks are for v2's deltas stay, and what it frees is
    // what the stats said deleting it alone would.
    let s = Server::start_with(&dir.0, ENV_NO_FRAMES, None);
    frees_what_stats_said(&s, v1, || expire_all_but_newest(&s));
    assert_eq!(stats(&s)["delta_chunks"].as_i64().unwrap(), n);
    read_back(&s, &h, &h.v2, "after v1 expired");
    drop(s);
    check_cli(&dir.0, "after v1 expired");

    // A damaged delta is refused (quarantined), not served.
    let s = Server::start_with(&dir.0, ENV_NO_FRAMES, None);
    let (fp, (cid, off, len, _)) = listing(&s)
        .into_iter()
        .find(|(_, l)| l.3 == 2)
        .expect("a delta chunk listed");
    if !on_s3() {
        damage_stored(&dir.0, cid, off, len);
        // As for any damaged chunk (tests/damage.rs): refused with `damaged`, quarantined,
        // and asked for again by the next backup.
        get_chunk(&s, &fp).expect_error(500, "damaged");
        let r = post_json(
            &s.repo_url("default", "/chunks/missing"),
            &s.token,
            &json!({ "fingerprints": [fp] }),
        );
        assert_eq!(
            r.json()["missing"],
            json!([fp]),
            "the damaged delta is quarantined"
        );
    }
}

/// On object storage the delta pass puts its containers, then switches the index to them; a
/// replica that starts in between sees objects no row names and may delete them as orphans.
/// The switch finds such a container gone and ends the pass there, as a change of the
/// versions does: every chunk stays where it was and reads back. Before, the rows were
/// pointed into the deleted objects, and compaction then freed the old copies.
#[test]
fn a_pass_whose_containers_vanish_before_its_switch_leaves_every_chunk_readable() {
    if !on_s3() {
        return; // objects deleted behind the server's back, as another server's sweep does
    }
    let dir = TempDir::new("delta-vanish");
    let h = history();
    let mut env = ENV_NO_FRAMES.to_vec();
    env.push(("DITTO_TEST_DELAY_AT", "delta:copied:3000"));
    let mut s = Server::start_with(&dir.0, &env, None);
    let v1 = backup(&s, &h, &h.v1);
    wait_pass(&s, v1);
    let v2 = backup(&s, &h, &h.v2);
    // The pass's containers: objects no index row names, while the pass waits to switch.
    let id_of = |p: &std::path::PathBuf| -> u64 {
        p.file_stem().unwrap().to_str().unwrap().parse().unwrap()
    };
    let mut gone = Vec::new();
    wait_until("the pass's puts", Duration::from_secs(60), || {
        let indexed: HashSet<u64> = containers_json(&s)["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_u64().unwrap())
            .collect();
        gone = container_files(&dir.0, 1)
            .into_iter()
            .filter(|p| !indexed.contains(&id_of(p)))
            .collect();
        !gone.is_empty()
    });
    for p in &gone {
        std::fs::remove_file(p).unwrap();
    }
    let st = wait_pass(&s, v2);
    assert_eq!(st["delta_pass"]["abandoned"], true, "{st}");
    read_back(&s, &h, &h.v1, "v1 after the vanished containers");
    read_back(&s, &h, &h.v2, "v2 after the vanished containers");
    s.stop(Duration::from_secs(10));
    check_cli(&dir.0, "after the vanished containers");
}

/// A pass whose maintenance lease ends while it copies (PostgreSQL: the lease's connection
/// closed, as an idle-session timeout or a restarted proxy closes it, and another server
/// may start a pass) stops before its switch: nothing is switched, every chunk reads back,
/// and the next start's pass, under a lease of its own, does the work. Before, the pass
/// went on without knowing, beside whichever pass took the lease next.
#[test]
fn a_pass_whose_lease_ends_before_its_switch_switches_nothing() {
    if on_postgres().is_none() {
        return; // a lease that can end under its pass is PostgreSQL's
    }
    let dir = TempDir::new("delta-lease");
    let h = history();
    let (mut s, v2, listed) = paused_before_switch(&dir.0, &h);
    let mut db =
        postgres::Client::connect(&database_url(&dir.0).unwrap(), postgres::NoTls).unwrap();
    let ended: i64 = db
        .query_one(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_locks \
             WHERE locktype = 'advisory' AND granted AND objid::bigint = $1 AND objsubid = 1 \
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[&0x7474_6f79_i64],
        )
        .unwrap()
        .get(0);
    assert_eq!(ended, 1, "one maintenance lease held");
    wait_until("the pass to stop", Duration::from_secs(60), || {
        s.stderr.lock().unwrap().contains("maintenance lease ended")
    });
    let after = listing(&s);
    for (fp, at) in &listed {
        assert_eq!(after.get(fp), Some(at), "{fp} stays where v1's pass put it");
    }
    read_back(&s, &h, &h.v1, "v1 after the lost lease");
    read_back(&s, &h, &h.v2, "v2 after the lost lease");
    s.stop(Duration::from_secs(10));
    check_cli(&dir.0, "after the lost lease");

    let s = Server::start_with(&dir.0, ENV_NO_FRAMES, None);
    let st = wait_pass(&s, v2);
    assert!(
        st["delta_pass"]["delta_chunks"].as_u64().unwrap() > 0,
        "{st}"
    );
    read_back(&s, &h, &h.v2, "v2 after the next pass");
}

/// A delta of v2 (`x`) against a whole chunk only v1 names (`b`), among `edges`.
fn v2_delta_on_v1_chunk(edges: &HashMap<String, String>, h: &History) -> (String, String) {
    let in_v2: HashSet<String> = fps_of(&h.v2).into_iter().collect();
    edges
        .iter()
        .find(|(x, b)| in_v2.contains(*x) && !in_v2.contains(*b) && !edges.contains_key(*b))
        .map(|(x, b)| (x.clone(), b.clone()))
        .expect("a delta of v2 against a whole chunk of v1")
}

/// Flips a byte near the end of the stored copy at `off..off + len` of container `cid`.
fn damage_stored(dir: &std::path::Path, cid: u64, off: u64, len: u64) {
    let path = container_file(dir, 1, cid);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(off + len - 3) as usize] ^= 0x5A;
    std::fs::write(&path, bytes).unwrap();
}

/// A server on `dir` whose delta pass sleeps 3 s once its copies are put (`delta:copied`),
/// with v1 backed up and passed and v2 backed up: returned while v2's pass sleeps there,
/// with v2's id and the listing after v1's pass.
fn paused_before_switch(dir: &std::path::Path, h: &History) -> (Server, i64, Listed) {
    let mut env = ENV_NO_FRAMES.to_vec();
    env.push(("DITTO_TEST_DELAY_AT", "delta:copied:3000"));
    let s = Server::start_with(dir, &env, None);
    let v1 = backup(&s, h, &h.v1);
    wait_pass(&s, v1);
    let listed = listing(&s);
    let delays = || {
        s.stderr
            .lock()
            .unwrap()
            .matches("delay point delta:copied")
            .count()
    };
    let before = delays();
    let v2 = backup(&s, h, &h.v2);
    wait_until("the pass's copies", Duration::from_secs(60), || {
        delays() > before
    });
    (s, v2, listed)
}

/// A base quarantined while a pass copies (a read found its bytes damaged) ends the pass
/// before its switch: the delta it made against that base is not stored, and the chunk
/// reads back as it was. Before, the chunk was switched to a delta of a base no longer
/// stored, told stored to every backup, and unreadable.
#[test]
fn a_base_quarantined_during_a_pass_ends_it_before_its_switch() {
    if on_s3() {
        return; // damages a container file on disk
    }
    let h = history();
    // The pass's choice on the same history, from a run without the damage.
    let reference = TempDir::new("delta-qbase-ref");
    let mut s = Server::start_with(&reference.0, ENV_NO_FRAMES, None);
    both_passed(&s, &h);
    s.stop(Duration::from_secs(10));
    let (x, b) = v2_delta_on_v1_chunk(&base_edges(&reference.0), &h);

    let dir = TempDir::new("delta-qbase");
    let (mut s, v2, _) = paused_before_switch(&dir.0, &h);
    let (cid, off, len, _) = listing(&s)[&b];
    damage_stored(&dir.0, cid, off, len);
    get_chunk(&s, &b).expect_error(500, "damaged");

    let st = wait_pass(&s, v2);
    assert_eq!(st["delta_pass"]["abandoned"], true, "{st}");
    let r = get_chunk(&s, &x);
    assert_eq!(r.status, 200, "{x}, made a delta of {b} by the pass");
    assert_eq!(to_hex(&fingerprint(&r.body)), x);
    assert!(!base_edges(&dir.0).contains_key(&x), "{x} is stored whole");
    read_back(&s, &h, &h.v2, "v2 after its pass's base was quarantined");
    s.stop(Duration::from_secs(10));
}

/// `(damaged_chunks, damaged)` of each version, by id.
fn damage_of(s: &Server) -> HashMap<i64, (u64, bool)> {
    versions_json(s, "/versions")["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let d = (
                v["damaged_chunks"].as_u64().unwrap(),
                v["damaged"].as_bool().unwrap(),
            );
            (v["id"].as_i64().unwrap(), d)
        })
        .collect()
}

/// A damaged base takes the deltas stored against it along into quarantine: their chains no
/// longer decode, so they are not stored any more (the next backup uploads them again, whole)
/// and the versions naming them count them damaged until then. Without it, only the base
/// was quarantined, and every later backup was told the deltas were stored.
#[test]
fn a_damaged_base_quarantines_the_deltas_stored_against_it() {
    if on_s3() {
        return; // damages a container file on disk
    }
    let dir = TempDir::new("delta-base");
    let h = history();
    let s = Server::start_with(&dir.0, ENV_NO_FRAMES, None);
    let (v1, v2, _) = both_passed(&s, &h);
    let edges = base_edges(&dir.0);
    let (x, b) = v2_delta_on_v1_chunk(&edges, &h);
    let dependents: Vec<&String> = edges
        .iter()
        .filter(|(_, base)| **base == b)
        .map(|(d, _)| d)
        .collect();
    let (cid, off, len, _) = listing(&s)[&b];
    damage_stored(&dir.0, cid, off, len);
    get_chunk(&s, &b).expect_error(500, "damaged");

    let missing = |fps: Vec<&String>| {
        let r = post_json(
            &s.repo_url("default", "/chunks/missing"),
            &s.token,
            &json!({ "fingerprints": fps }),
        );
        assert_eq!(r.status, 200);
        r.json()["missing"].clone()
    };
    assert_eq!(missing(vec![&b]), json!([b]), "the base is quarantined");
    assert_eq!(
        missing(dependents.clone()),
        json!(dependents),
        "every delta against the base is quarantined with it"
    );
    let damage = damage_of(&s);
    assert!(damage[&v1].1, "v1 names the base: {damage:?}");
    assert!(
        damage[&v2].1 && damage[&v2].0 >= 1,
        "v2 names {x}: {damage:?}"
    );

    // The next backup of v2's files stores the delta's chunk again, which heals v2; v1
    // stays damaged until its base's bytes come again.
    let v3 = backup(&s, &h, &h.v2);
    let damage = damage_of(&s);
    assert_eq!(damage[&v3], (0, false), "{damage:?}");
    assert_eq!(damage[&v2], (0, false), "{damage:?}");
    assert!(damage[&v1].1, "{damage:?}");
    read_back(&s, &h, &h.v2, "after the delta came again");
}

/// `raw_bytes` in `GET versions?raw_bytes=true` (what the page's `auto` search judges the
/// repository's size by) is the raw bytes of every stored chunk but the frames, counted here
/// from the containers' listing and the base edges, and covers the distinct chunks of
/// `versions` (the repository's versions, all of them): those answered.
fn committed_raw_counts_no_frame(s: &Server, dir: &TempDir, versions: &[&Value]) -> u64 {
    let edges = base_edges(&dir.0);
    let mut raw: HashMap<String, u64> = HashMap::new();
    let mut slices = Vec::new();
    for c in containers_json(s)["containers"].as_array().unwrap() {
        for k in c["chunks"].as_array().unwrap() {
            let fp = k["fp"].as_str().unwrap().to_string();
            if k["codec"].as_u64() == Some(2) && k["stored_len"].as_u64() == Some(25) {
                slices.push(fp.clone());
            }
            raw.insert(fp, k["raw_len"].as_u64().unwrap());
        }
    }
    let frames: HashSet<&String> = slices.iter().map(|fp| &edges[fp]).collect();
    assert!(!frames.is_empty());
    let all: u64 = raw.values().sum();
    let framed: u64 = frames.iter().map(|f| raw[*f]).sum();
    let named: HashSet<String> = versions.iter().flat_map(|m| fps_of(m)).collect();
    let named: u64 = named.iter().map(|fp| raw[fp]).sum();
    let said = versions_json(s, "/versions?raw_bytes=true")["raw_bytes"]
        .as_u64()
        .unwrap();
    assert_eq!(said, all - framed, "raw_bytes: every chunk but the frames");
    assert!(
        said >= named,
        "raw_bytes {said} covers the versions' {named}"
    );
    named
}

#[test]
fn a_copy_that_does_not_decode_back_is_never_stored() {
    // Every copy the pass makes is changed as an encoder fault would change it: deltas,
    // frames, recompressed and dictionary-coded chunks are all refused and the chunks stay
    // as uploaded, readable, with `check` clean.
    let dir = TempDir::new("delta-refused");
    let h = history();
    let env = [
        ENV[0],
        ENV[1],
        ENV[2],
        ("DITTO_TEST_FAIL_AT", "pass:encode"),
    ];
    let mut s = Server::start_with(&dir.0, &env, None);
    let (_, _, st) = both_passed(&s, &h);
    let pass = &st["delta_pass"];
    assert!(pass["refused"].as_u64().unwrap() >= 20, "{pass}");
    for field in [
        "dupadj",
        "superfeature",
        "delta_chunks",
        "recompressed",
        "frames",
        "slices",
        "dictionary_bytes",
    ] {
        assert_eq!(pass[field].as_u64(), Some(0), "{field}: {pass}");
    }
    assert_eq!(st["delta_chunks"].as_i64(), Some(0), "{st}");
    read_back(&s, &h, &h.v1, "v1");
    read_back(&s, &h, &h.v2, "v2");
    s.stop(Duration::from_secs(10));
    check_cli(&dir.0, "after a pass whose copies were all refused");
}

#[test]
fn frames_store_less_and_read_back_through_every_reader() {
    let h = history();
    // The same two versions with and without frames.
    let mut stored = Vec::new();
    for env in [ENV_NO_FRAMES, ENV] {
        let dir = TempDir::new("frames");
        let mut s = Server::start_with(&dir.0, env, None);
        let (v1, v2, st) = both_passed(&s, &h);
        stored.push(st["stored_bytes"].as_i64().unwrap());
        if env == ENV_NO_FRAMES {
            s.stop(Duration::from_secs(10));
            continue;
        }
        let pass = &st["delta_pass"];
        assert!(pass["frames"].as_u64().unwrap() >= 1, "{pass}");
        assert!(pass["slices"].as_u64().unwrap() >= 20, "{pass}");
        // Every slice is 25 bytes against a chunk no manifest names (its frame), whose own
        // chain is at most 3 links: the slice's is within the cap of 4.
        let rows = listing(&s);
        let edges = base_edges(&dir.0);
        let named: std::collections::HashSet<String> =
            fps_of(&h.v1).into_iter().chain(fps_of(&h.v2)).collect();
        let mut slices = 0;
        for (fp, base) in &edges {
            if rows[fp].2 != 25 {
                continue;
            }
            slices += 1;
            assert!(
                named.contains(fp) && !named.contains(base),
                "{fp} -> {base}"
            );
            let (mut links, mut at) = (0, base.clone());
            while let Some(b) = edges.get(&at) {
                links += 1;
                assert_ne!(rows[&at].2, 25, "a frame's base is never a slice");
                at = b.clone();
            }
            assert!(links <= 3, "a frame {links} links deep");
        }
        assert!(slices >= 20);
        committed_raw_counts_no_frame(&s, &dir, &[&h.v1, &h.v2]);
        read_back(&s, &h, &h.v1, "with frames, v1");
        read_back(&s, &h, &h.v2, "with frames, v2");
        search_equals_naive(&s, &h, &[(v1, &h.v1), (v2, &h.v2)]);
        s.stop(Duration::from_secs(10));
        check_cli(&dir.0, "with frames");
        // Expiry keeps every frame a live slice needs and frees what the stats said.
        let s = Server::start_with(&dir.0, env, None);
        frees_what_stats_said(&s, v1, || expire_all_but_newest(&s));
        read_back(&s, &h, &h.v2, "with frames, after v1 expired");
        // What v2 shares with v1 is counted in neither's `new_raw_bytes` now: the sum of
        // those is not what a search of the repository scans.
        let named = committed_raw_counts_no_frame(&s, &dir, &[&h.v2]);
        let new_raw: u64 = versions_json(&s, "/versions")["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["stats"]["new_raw_bytes"].as_u64().unwrap())
            .sum();
        assert!(new_raw < named, "{new_raw} new raw bytes, {named} named");
        drop(s);
        check_cli(&dir.0, "with frames, after v1 expired");
    }
    assert!(
        stored[1] < stored[0],
        "frames store {} bytes, one delta per chunk {}",
        stored[1],
        stored[0]
    );
}

#[test]
fn a_kill_at_each_point_of_the_pass_loses_nothing() {
    let cases = [
        ("delta:copied", history()),
        ("delta:switched", history()),
        // After v1's pass is recorded: v2's is still due after the restart.
        ("delta:recorded", history()),
        // The passes train and store dictionaries.
        ("delta:copied", dictionary_history()),
        ("delta:switched", dictionary_history()),
    ];
    for (point, h) in cases {
        let dir = TempDir::new("delta-crash");
        let mut env = ENV.to_vec();
        env.push(("DITTO_TEST_CRASH_AT", point));
        let s = Server::start_with(&dir.0, &env, None);
        backup(&s, &h, &h.v1);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| backup(&s, &h, &h.v2)));
        let t0 = std::time::Instant::now();
        let mut s = s;
        while s.child.try_wait().unwrap().is_none() {
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "{point}: the server never reached the crash point"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Restart without the pass: everything committed reads back, check passes.
        let s = Server::start_with(&dir.0, ENV_NO_PASS, None);
        read_back(&s, &h, &h.v1, point);
        read_back(&s, &h, &h.v2, point);
        drop(s);
        check_cli(&dir.0, point);
        // With the pass (which runs at startup too): it finishes what the crash cut short.
        let s = Server::start_with(&dir.0, ENV, None);
        let st = wait_pass(&s, 2);
        assert!(st["delta_chunks"].as_i64().unwrap() > 0, "{point}: {st}");
        assert_eq!(st["delta_done"], json!(2), "{point}: the record: {st}");
        read_back(&s, &h, &h.v2, point);
        drop(s);
        check_cli(&dir.0, point);
    }
}

/// Commits [`dictionary_history`]'s two versions on a server without the pass and stops it:
/// a repository whose versions no pass has handled.
fn committed_without_pass(dir: &std::path::Path) -> (History, i64, i64) {
    let h = dictionary_history();
    let mut s = Server::start_with(dir, ENV_NO_PASS, None);
    let v1 = backup(&s, &h, &h.v1);
    let v2 = backup(&s, &h, &h.v2);
    assert_eq!(
        stats(&s)["delta_done"],
        json!(0),
        "a new repository's record"
    );
    s.stop(Duration::from_secs(10));
    (h, v1, v2)
}

/// Sets the repository's record of the pass's progress (the server is stopped); `None` as
/// in a database from before the record.
fn set_delta_record(dir: &std::path::Path, done: Option<i64>) {
    const SQL: &str = "UPDATE repos SET delta_done = ";
    let value = done.map_or("NULL".to_string(), |v| v.to_string());
    match database_url(dir) {
        Some(url) => {
            let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            c.batch_execute(&format!("{SQL}{value}")).unwrap();
        }
        None => {
            let c = rusqlite::Connection::open(dir.join("ditto.sqlite3")).unwrap();
            c.execute_batch(&format!("{SQL}{value}")).unwrap();
        }
    }
}

/// The pass's progress is kept in the index: versions committed while no pass ran (a
/// server stopped in a burst, or run with `DITTO_DELTA=0`) each get their pass after the
/// restart, oldest first, not only the newest. v1's own chunks (the first 70, which v2 does
/// not keep) become deltas only through v1's pass. A repository without the record (from
/// before it) keeps the old rule: the newest version committed before the start only.
#[test]
fn a_restart_goes_on_from_the_recorded_pass() {
    let dir = TempDir::new("delta-record");
    let (h, _, v2) = committed_without_pass(&dir.0);
    let v1_only: Vec<String> = fps_of(&h.v1)[..70].to_vec();
    let s = Server::start_with(&dir.0, ENV, None);
    let st = wait_pass(&s, v2);
    assert_eq!(st["delta_done"], json!(v2), "{st}");
    let edges = base_edges(&dir.0);
    let passed = v1_only.iter().filter(|fp| edges.contains_key(*fp)).count();
    assert!(
        passed >= 50,
        "v1's pass ran after the restart: {passed} of its 70 own chunks are deltas"
    );
    read_back(&s, &h, &h.v1, "after the restart");
    read_back(&s, &h, &h.v2, "after the restart");
    drop(s);
    check_cli(&dir.0, "after the restart");

    let old = TempDir::new("delta-record-old");
    let (h, _, v2) = committed_without_pass(&old.0);
    set_delta_record(&old.0, None);
    let s = Server::start_with(&old.0, ENV, None);
    let st = wait_pass(&s, v2);
    assert_eq!(st["delta_done"], json!(v2), "recorded from then on: {st}");
    let edges = base_edges(&old.0);
    let passed = fps_of(&h.v1)[..70]
        .iter()
        .filter(|fp| edges.contains_key(*fp))
        .count();
    assert_eq!(
        passed, 0,
        "without a record, v1 (before the start) gets no pass"
    );
    assert!(
        fps_of(&h.v2)[70..]
            .iter()
            .filter(|fp| edges.contains_key(*fp))
            .count()
            >= 50,
        "the newest version's pass ran"
    );
}

/// What a plain scan of the test's own bytes finds in `versions` for `keywords`.
fn scanned_hits(
    chunks: &[TestChunk],
    versions: &[(i64, &Value)],
    keywords: &[Vec<u8>],
) -> SearchHits {
    let raw: HashMap<String, &[u8]> = chunks.iter().map(|c| (c.hex(), &c.raw[..])).collect();
    let mut want = SearchHits::new();
    for (id, m) in versions {
        for e in m["entries"].as_array().unwrap() {
            let recipe = e["recipe"].as_array().unwrap();
            let data: Vec<u8> = recipe
                .iter()
                .flat_map(|fp| raw[fp.as_str().unwrap()].iter().copied())
                .collect();
            let mut hits = Vec::new();
            for (k, kw) in keywords.iter().enumerate() {
                for at in 0..data.len().saturating_sub(kw.len() - 1) {
                    if data[at..].starts_with(kw) {
                        hits.push((k as u64, at as u64));
                    }
                }
            }
            if !hits.is_empty() {
                hits.sort_by_key(|&(k, at)| (at, k));
                want.insert((*id, e["path"].as_str().unwrap().to_string()), hits);
            }
        }
    }
    want
}

/// `POST search` (hex keywords) over `versions` (all when `None`): its status, and its hits
/// when it is 200.
fn server_hits(s: &Server, versions: Option<&[i64]>, keywords: &[Vec<u8>]) -> (u16, SearchHits) {
    let hex: Vec<String> = keywords.iter().map(|k| hex_bytes(k)).collect();
    let mut body = json!({ "keywords": hex, "hex": true });
    if let Some(v) = versions {
        body["versions"] = json!(v);
    }
    let r = post_json(&s.repo_url("default", "/search"), &s.token, &body);
    if r.status != 200 {
        return (r.status, SearchHits::new());
    }
    (r.status, search_hits(&r.json()))
}

/// The server's search of every version, with delta chunks stored, finds exactly what a scan
/// of the test's own bytes finds in `versions` (the repository's live versions).
fn search_equals_naive(s: &Server, h: &History, versions: &[(i64, &Value)]) {
    let keywords = [b"zstd browser".to_vec(), b"backup".to_vec()];
    let want = scanned_hits(&h.chunks, versions, &keywords);
    let (status, got) = server_hits(s, None, &keywords);
    assert_eq!(status, 200);
    assert!(!want.is_empty(), "the keywords occur in the history");
    assert_eq!(
        got, want,
        "server search with deltas equals the naive search"
    );
}

/// Searches running while the server commits, runs the delta pass and the mover, expires
/// and prunes (compaction moving chunks between containers) each find exactly what a scan
/// of the test's bytes finds in the versions they name. Keywords cross chunk borders, in
/// text chunks that become deltas and in random chunks stored raw (the case the e2e
/// comparison once saw differ, docs/SEARCH.md "On the server").
#[test]
fn searches_beside_the_pass_the_mover_and_a_prune_equal_the_naive_search() {
    use std::sync::{
        atomic::{AtomicBool, Ordering},
        Mutex,
    };
    let dir = TempDir::new("delta-search-busy");
    let mut h = history();
    // Another source: random chunks sent raw, and hex keywords across their borders.
    let noise: Vec<TestChunk> = (0..24)
        .map(|i| {
            TestChunk::new(
                rand_bytes(0xD000 + i, 2_000 + (i as usize * 379) % 7_000),
                false,
            )
        })
        .collect();
    let mut keywords = vec![
        b"zstd browser".to_vec(),
        b"backup".to_vec(),
        b"p\nd".to_vec(),
        b"k".to_vec(),
    ];
    for w in noise.windows(2).step_by(3) {
        let (a, b) = (&w[0].raw, &w[1].raw);
        keywords.push([&a[a.len() - 3..], &b[..2]].concat());
        keywords.push([&a[a.len() - 1..], &b[..1]].concat());
    }
    let recipe: Vec<String> = noise.iter().map(TestChunk::hex).collect();
    let size: usize = noise.iter().map(|c| c.raw.len()).sum();
    let other = |t: i64| {
        json!({ "source": "other", "time": t, "entries": [
            { "path": "noise.bin", "kind": "file", "size": size, "mtime": t, "mode": 420,
              "recipe": recipe } ] })
    };
    h.chunks.extend(noise.iter().cloned());
    let (o1, o2) = (other(1_763_000_100_000), other(1_763_000_800_000));
    // v1 also holds a file no later version keeps: the forget's prune deletes the container
    // the mover placed it in.
    let gone: Vec<TestChunk> = (0..60)
        .map(|i| TestChunk::new(text_bytes(0xF000 + i, 20_000), true))
        .collect();
    let mut v1 = h.v1.clone();
    v1["entries"].as_array_mut().unwrap().push(json!({
        "path": "src/gone", "kind": "file", "size": 60 * 20_000, "mtime": 1, "mode": 420,
        "recipe": gone.iter().map(TestChunk::hex).collect::<Vec<_>>() }));
    h.chunks.extend(gone);
    let mut again = h.v1.clone();
    again["time"] = json!(1_763_000_900_000_i64);

    let mut s = Server::start_with(&dir.0, ENV, None);
    let committed: Mutex<Vec<(i64, Value)>> = Mutex::new(Vec::new());
    let add = |id: i64, m: &Value| committed.lock().unwrap().push((id, m.clone()));
    let v1_id = backup(&s, &h, &v1);
    add(v1_id, &v1);
    let done = AtomicBool::new(false);
    let searches = std::thread::scope(|sc| {
        let searcher = sc.spawn(|| {
            let (mut n, mut refused) = (0, 0);
            while !done.load(Ordering::Relaxed) || n < 5 {
                let scope = committed.lock().unwrap().clone();
                let ids: Vec<i64> = scope.iter().map(|v| v.0).collect();
                let (status, got) = server_hits(&s, Some(&ids), &keywords);
                if status == 404
                    && !ids
                        .iter()
                        .all(|id| committed.lock().unwrap().iter().any(|v| v.0 == *id))
                {
                    refused += 1; // a version of its scope was forgotten meanwhile
                    assert!(refused < 100, "searches keep being refused");
                    continue;
                }
                assert_eq!(status, 200, "search {n} over {ids:?}");
                let refs: Vec<(i64, &Value)> = scope.iter().map(|(id, m)| (*id, m)).collect();
                let want = scanned_hits(&h.chunks, &refs, &keywords);
                assert_eq!(got, want, "search {n} over {ids:?}");
                n += 1;
            }
            (n, refused)
        });
        // Stops the searcher however this thread ends (a failed assertion too).
        struct Done<'a>(&'a AtomicBool);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _done = Done(&done);
        let v_o1 = backup(&s, &h, &o1);
        add(v_o1, &o1);
        let v2 = backup(&s, &h, &h.v2);
        add(v2, &h.v2);
        wait_pass(&s, v2);
        let v_o2 = backup(&s, &h, &o2);
        add(v_o2, &o2);
        // Expire v1 and the first noise version (their chunks that v2's deltas need stay),
        // then prune: compaction moves what is left of their containers.
        committed
            .lock()
            .unwrap()
            .retain(|v| v.0 != v1_id && v.0 != v_o1);
        let r = post_json(
            &s.repo_url("default", "/forget"),
            &s.token,
            &json!({ "versions": [v1_id, v_o1] }),
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let pruned = r.json()["prune"].clone();
        eprintln!("the forget's prune beside the searches: {pruned}");
        let n = |k: &str| pruned[k].as_i64().unwrap();
        assert!(
            n("containers_deleted") + n("containers_compacted") > 0,
            "containers went away beside the searches: {pruned}"
        );
        let v3 = backup(&s, &h, &again);
        add(v3, &again);
        wait_pass(&s, v3);
        drop(_done);
        searcher.join().unwrap()
    });
    eprintln!("searches compared: {searches:?}");
    let st = stats(&s);
    assert!(st["delta_chunks"].as_i64().unwrap() > 0, "{st}");
    s.stop(Duration::from_secs(10));
    check_cli(&dir.0, "after searching beside the pass");
}

/// Versions committed in a burst (the pass waits for backups to be quiet, so it runs once
/// after all of them) each get their own pass, not only the newest: v2's edits become
/// deltas against v1's chunks although v3, of another source, was committed before any
/// pass ran. From a fresh server, so the startup run found no version.
#[test]
fn a_burst_of_commits_gets_a_pass_per_version() {
    let dir = TempDir::new("delta-burst");
    let h = history();
    let mut s = Server::start_with(&dir.0, ENV, None);
    let v1 = backup(&s, &h, &h.v1);
    // v3: another source, chunks of its own (random: nothing to delta or recompress).
    let mut h3 = History {
        chunks: h.chunks.clone(),
        v1: h.v1.clone(),
        v2: h.v2.clone(),
    };
    let mut recipe = Vec::new();
    for i in 0..6 {
        let c = TestChunk::new(rand_bytes(0xE000 + i, 9_000), true);
        recipe.push(c.hex());
        h3.chunks.push(c);
    }
    let m3 = json!({ "source": "other", "time": 1_763_000_720_000_i64, "entries": [
        { "path": "o", "kind": "file", "size": 6 * 9_000, "mtime": 1_763_000_720_000_i64,
          "mode": 420, "recipe": recipe } ] });
    let v2 = backup(&s, &h3, &h.v2);
    let v3 = backup(&s, &h3, &m3);
    assert!(v3 > v2 && v2 > v1);
    let st = wait_pass(&s, v3);
    assert!(
        st["delta_chunks"].as_i64().unwrap() >= 20,
        "v2's edited chunks are deltas although the pass ran after v3: {st}"
    );
    let v2_point = st["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"].as_i64() == Some(v2))
        .cloned()
        .unwrap();
    assert!(
        v2_point["delta_saved_bytes"].as_i64().unwrap() > 0,
        "{v2_point}"
    );
    read_back(&s, &h3, &h.v2, "after the burst's passes, v2");
    read_back(&s, &h3, &m3, "after the burst's passes, v3");
    s.stop(Duration::from_secs(10));
    check_cli(&dir.0, "after the burst's passes");
}

/// A chunk of a forgotten version that a live delta still needs as its base, backed up again
/// by a later version, is a new chunk of that version again. It must not become a delta
/// itself: against the delta that needs it (DupAdj pairs them) it would close a loop that
/// no reader can decode. Every version reads back, and `check` passes.
#[test]
fn a_base_backed_up_again_never_becomes_a_delta_of_its_own_deltas() {
    let dir = TempDir::new("delta-loop");
    let h = history();
    let mut s = Server::start_with(&dir.0, ENV, None);
    let (v1, _, _) = both_passed(&s, &h);
    let r = post_json(
        &s.repo_url("default", "/forget"),
        &s.token,
        &json!({ "versions": [v1] }),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let mut again = h.v1.clone();
    again["time"] = json!(1_763_000_720_000_i64);
    let v3 = backup(&s, &h, &again);
    let st = wait_pass(&s, v3);
    eprintln!("delta pass over v1's content again: {}", st["delta_pass"]);
    read_back(&s, &h, &h.v2, "v2, after v1's content came back");
    read_back(&s, &h, &again, "v1's content backed up again");
    s.stop(Duration::from_secs(10));
    check_cli(&dir.0, "after v1's content came back");
}

/// New chunks that find no base are re-stored whole at the server's higher zstd level when
/// that pays: the stored bytes shrink, nothing is counted as a delta, and every reader
/// answers the same bytes.
#[test]
fn whole_chunks_are_recompressed_and_read_back() {
    let dir = TempDir::new("recompress");
    let h = history();
    let mut s = Server::start_with(&dir.0, ENV_NO_FRAMES, None);
    let before = stats(&s);
    assert_eq!(before["stored_bytes"].as_i64(), Some(0));
    let v1 = backup(&s, &h, &h.v1);
    let uploaded: i64 = h
        .chunks
        .iter()
        .filter(|c| fps_of(&h.v1).contains(&c.hex()))
        .map(|c| {
            assert!(c.zstd);
            c.stored().len() as i64
        })
        .sum::<i64>();
    let st = wait_pass(&s, v1);
    let pass = &st["delta_pass"];
    eprintln!("pass over v1: {pass}");
    let n = pass["recompressed"].as_u64().unwrap();
    let saved = pass["recompress_saved"].as_i64().unwrap();
    // The 40 text chunks of `a` compress better at the higher level; `b` is random.
    assert!(n >= 30, "text chunks are recompressed: {pass}");
    assert!(saved > 0, "{pass}");
    assert_eq!(st["delta_chunks"].as_i64(), Some(0), "{st}");
    assert_eq!(st["delta_saved_bytes"].as_i64(), Some(0), "{st}");
    assert_eq!(
        st["stored_bytes"].as_i64().unwrap(),
        uploaded - saved,
        "stored bytes shrink by what the pass reports: {st}"
    );
    read_back(&s, &h, &h.v1, "after recompression");
    search_equals_naive(&s, &h, &[(v1, &h.v1)]);
    s.stop(Duration::from_secs(10));
    check_cli(&dir.0, "after recompression");
}

/// `n` chunks of a code base: lines drawn from one pool, so the chunks share many lines
/// (what a trained dictionary learns) while no two of them resemble each other.
fn pooled_chunks(seed: u64, from: u64, n: usize) -> Vec<Vec<u8>> {
    let pool: Vec<Vec<u8>> = (0..4_000u64)
        .map(|i| {
            let mut l = text_bytes(seed * 10_000 + i, 30 + (i as usize * 37) % 60);
            l.push(b'\n');
            l
        })
        .collect();
    (from..from + n as u64)
        .map(|c| {
            let pick = rand_bytes(seed * 1_000 + c, 600);
            let lines = 150 + (c as usize * 13) % 100;
            let mut out = Vec::new();
            for k in 0..lines {
                let at = u16::from_le_bytes([pick[2 * k], pick[2 * k + 1]]) as usize % pool.len();
                out.extend_from_slice(&pool[at]);
            }
            out
        })
        .collect()
}

/// Two versions of one file made of `n` [`pooled_chunks`] (seed `seed`): v1 holds the
/// chunks `v1`, v2 the chunks `v2`, in order.
fn pooled_history(seed: u64, n: usize, v1: Range<usize>, v2: Range<usize>) -> History {
    let chunks: Vec<TestChunk> = pooled_chunks(seed, 0, n)
        .into_iter()
        .map(|r| TestChunk::new(r, true))
        .collect();
    let fps: Vec<String> = chunks.iter().map(|c| c.hex()).collect();
    let v1 = one_file(&chunks, &fps[v1], 1_763_000_000_000);
    let v2 = one_file(&chunks, &fps[v2], 1_763_003_600_000);
    History { chunks, v1, v2 }
}

/// Two versions of a code base whose chunks share lines but do not resemble each other
/// (a trained dictionary's case): v2 keeps half of v1's chunks and adds 140 new ones.
fn dictionary_history() -> History {
    pooled_history(9, 280, 0..140, 70..280)
}

/// A manifest of one file made of `recipe`.
fn one_file(chunks: &[TestChunk], recipe: &[String], t: i64) -> Value {
    let size: usize = recipe
        .iter()
        .map(|h| chunks.iter().find(|c| &c.hex() == h).unwrap().raw.len())
        .sum();
    json!({ "source": "code", "time": t, "entries": [
        { "path": "code", "kind": "dir", "size": 0, "mtime": t, "mode": 493, "recipe": [] },
        { "path": "code/all.js", "kind": "file", "size": size, "mtime": t, "mode": 420,
          "recipe": recipe },
    ] })
}

#[test]
fn whole_chunks_share_a_trained_dictionary_kept_while_needed() {
    let dir = TempDir::new("dictionary");
    let mut s = Server::start_with(&dir.0, ENV_NO_FRAMES, None);
    // v2 keeps the first half of the file.
    let h = pooled_history(7, 140, 0..140, 0..70);
    let all: Vec<String> = h.chunks.iter().map(|c| c.hex()).collect();
    let uploaded: i64 = h.chunks.iter().map(|c| c.stored().len() as i64).sum();
    let v1 = backup(&s, &h, &h.v1);
    let st = wait_pass(&s, v1);
    let pass = &st["delta_pass"];
    eprintln!("pass over v1: {pass}");
    let dict_bytes = pass["dictionary_bytes"].as_i64().unwrap();
    assert!(dict_bytes > 0, "a dictionary is trained and stored: {pass}");
    let stored = st["stored_bytes"].as_i64().unwrap();
    assert!(
        (stored as f64) < uploaded as f64 * 0.8,
        "the dictionary's deltas and the dictionary store less: {stored} of {uploaded} uploaded"
    );

    // Independently of the pass's report: most chunks name one base, which no manifest
    // names, and which reads back as the bytes of its fingerprint.
    let edges = base_edges(&dir.0);
    let mut by_base: HashMap<&String, usize> = HashMap::new();
    for b in edges.values() {
        *by_base.entry(b).or_default() += 1;
    }
    let (dict, users) = by_base.into_iter().max_by_key(|(_, n)| *n).unwrap();
    let dict = dict.clone();
    assert!(
        users >= 100,
        "{users} of 140 chunks are deltas against the dictionary"
    );
    assert!(!all.contains(&dict), "the dictionary is no chunk of a file");
    let get_dict = |s: &Server| get_chunk(s, &dict);
    let r = get_dict(&s);
    assert_eq!(r.status, 200);
    assert_eq!(to_hex(&fingerprint(&r.body)), dict);
    read_back(&s, &h, &h.v1, "after the pass");
    search_equals_naive(&s, &h, &[(v1, &h.v1)]);

    // v1 expires while v2 needs half of its chunks: the dictionary stays with them.
    let v2 = backup(&s, &h, &h.v2);
    wait_pass(&s, v2);
    frees_what_stats_said(&s, v1, || expire_all_but_newest(&s));
    assert_eq!(
        get_dict(&s).status,
        200,
        "the dictionary a live delta needs stays"
    );
    read_back(&s, &h, &h.v2, "after v1 expired");
    search_equals_naive(&s, &h, &[(v2, &h.v2)]);
    s.stop(Duration::from_secs(10));
    check_cli(&dir.0, "after v1 expired");

    // The last version goes: nothing needs the dictionary, and nothing is left (the stats
    // count the dictionary with the one version whose chunks need it).
    let s = Server::start_with(&dir.0, ENV_NO_FRAMES, None);
    frees_what_stats_said(&s, v2, || {
        let r = request(
            "DELETE",
            &s.repo_url("default", &format!("/versions/{v2}")),
            Some(&s.token),
            &[],
            None,
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let r = post_json(&s.repo_url("default", "/prune"), &s.token, &json!({}));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    });
    assert_eq!(get_dict(&s).status, 404, "an unneeded dictionary is freed");
    assert_eq!(stats(&s)["stored_bytes"].as_i64(), Some(0));
}

/// A later version's few new chunks (too few to train on) become deltas against the
/// dictionary an earlier pass stored.
#[test]
fn a_later_version_reuses_the_stored_dictionary() {
    let dir = TempDir::new("dictionary-reuse");
    let mut s = Server::start_with(&dir.0, ENV_NO_FRAMES, None);
    let h = pooled_history(11, 160, 0..140, 20..160);
    let fps: Vec<String> = h.chunks.iter().map(|c| c.hex()).collect();
    let v1 = backup(&s, &h, &h.v1);
    let st = wait_pass(&s, v1);
    assert!(
        st["delta_pass"]["dictionary_bytes"].as_i64().unwrap() > 0,
        "{st}"
    );
    let v2 = backup(&s, &h, &h.v2);
    let st = wait_pass(&s, v2);
    let pass = &st["delta_pass"];
    assert_eq!(
        pass["dictionary_bytes"].as_i64(),
        Some(0),
        "no new one: {pass}"
    );
    let edges = base_edges(&dir.0);
    let dict = edges
        .get(&fps[0])
        .expect("v1's first chunk is a delta")
        .clone();
    assert!(!fps.contains(&dict));
    let reused = fps[140..]
        .iter()
        .filter(|fp| edges.get(*fp) == Some(&dict))
        .count();
    assert!(
        reused >= 15,
        "{reused} of v2's 20 new chunks use v1's dictionary: {pass}"
    );
    read_back(&s, &h, &h.v2, "after v2's pass");
    search_equals_naive(&s, &h, &[(v1, &h.v1), (v2, &h.v2)]);
    s.stop(Duration::from_secs(10));
    check_cli(&dir.0, "after v2's pass");
}

// ---------------------------------------------------------------- GC with base edges

/// A source whose file `a` has 30 text chunks; each version edits the same third of them
/// again (next to unchanged duplicates: DupAdj pairs each edit with the previous version's
/// copy, itself a delta from the round before, so chains grow a link per version up to the
/// cap) and adds a small file of its own.
struct Chains {
    chunks: Vec<TestChunk>,
    fps: std::collections::HashSet<String>,
    content: Vec<Vec<u8>>,
    round: u64,
}

impl Chains {
    fn new() -> Chains {
        Chains {
            chunks: Vec::new(),
            fps: Default::default(),
            content: (0..30)
                .map(|i| text_bytes(0xE000 + i, 9_000 + (i as usize * 677) % 12_000))
                .collect(),
            round: 0,
        }
    }

    fn add(&mut self, raw: Vec<u8>) -> String {
        let c = TestChunk::new(raw, true);
        let h = c.hex();
        if self.fps.insert(h.clone()) {
            self.chunks.push(c);
        }
        h
    }

    fn raw(&self, fp: &str) -> &[u8] {
        &self.chunks.iter().find(|c| c.hex() == fp).unwrap().raw
    }

    /// Whether `raw` are the bytes of chunk `fp`: the test's own bytes for a chunk it
    /// backed up, the fingerprint for one the pass made (a dictionary or a frame).
    fn reads_back(&self, fp: &str, raw: &[u8]) -> bool {
        match self.chunks.iter().find(|c| c.hex() == fp) {
            Some(c) => c.raw == raw,
            None => to_hex(&fingerprint(raw)) == fp,
        }
    }

    /// The next version's manifest.
    fn next(&mut self) -> Value {
        self.round += 1;
        let r = self.round;
        if r > 1 {
            for i in (1..self.content.len()).step_by(3) {
                self.content[i] = edited(&self.content[i], r * 1_000 + i as u64);
            }
        }
        let a: Vec<String> = self
            .content
            .clone()
            .into_iter()
            .map(|c| self.add(c))
            .collect();
        let own: Vec<String> = (0..3)
            .map(|k| self.add(rand_bytes(0xF000 + r * 10 + k, 4_000)))
            .collect();
        let t = 1_763_000_000_000 + r as i64 * 3_600_000;
        let mut entries = vec![json!({ "path": "src", "kind": "dir", "size": 0, "mtime": t,
            "mode": 493, "recipe": [] })];
        for (p, recipe) in [("a".to_string(), a), (format!("n{r}"), own)] {
            let size: usize = recipe.iter().map(|h| self.raw(h).len()).sum();
            entries.push(
                json!({ "path": format!("src/{p}"), "kind": "file", "size": size,
                "mtime": t, "mode": 420, "recipe": recipe }),
            );
        }
        json!({ "source": "src", "time": t, "entries": entries })
    }
}

/// What the oracle found: delta chunks stored, the longest chain among them.
struct Found {
    deltas: usize,
    depth: usize,
}

/// Compares what is stored with the test's own count of what is live: every chunk a live
/// manifest names plus, transitively, the base of every live delta (edges from the index).
/// Nothing live may be missing (each reads back byte-identical) and nothing else may be
/// stored (every chunk here was committed, so the grace period for pending chunks keeps
/// none).
fn gc_oracle(
    s: &Server,
    dir: &std::path::Path,
    ch: &Chains,
    live: &BTreeMap<i64, Value>,
    ctx: &str,
) -> Found {
    let conts = containers_json(s);
    let mut stored: BTreeMap<String, u64> = BTreeMap::new();
    let mut ids = BTreeSet::new();
    for c in conts["containers"].as_array().unwrap() {
        ids.insert(c["id"].as_u64().unwrap());
        for k in c["chunks"].as_array().unwrap() {
            let fp = k["fp"].as_str().unwrap().to_string();
            let codec = k["codec"].as_u64().unwrap();
            assert!(
                stored.insert(fp.clone(), codec).is_none(),
                "{ctx}: {fp} has two rows"
            );
        }
    }
    let edges = base_edges(dir);
    for (fp, codec) in &stored {
        assert_eq!(
            *codec == 2,
            edges.contains_key(fp),
            "{ctx}: {fp}: codec {codec} and a base edge disagree"
        );
    }
    let mut want: BTreeSet<String> = live.values().flat_map(fps_of).collect();
    let mut depth = 0;
    for fp in want.clone() {
        let mut at = fp;
        let mut d = 0;
        while let Some(b) = edges.get(&at) {
            d += 1;
            assert!(d <= 4, "{ctx}: a chain longer than the cap");
            want.insert(b.clone());
            at = b.clone();
        }
        depth = depth.max(d);
    }
    let have: BTreeSet<String> = stored.keys().cloned().collect();
    let lost: Vec<&String> = want.difference(&have).collect();
    let kept: Vec<&String> = have.difference(&want).collect();
    assert!(
        lost.is_empty(),
        "{ctx}: {} live chunks (referenced, or the base of a live delta) are not stored: {lost:?}",
        lost.len()
    );
    assert!(
        kept.is_empty(),
        "{ctx}: {} dead chunks (no live version needs them, directly or as a base) are stored: {kept:?}",
        kept.len()
    );
    let fps: Vec<String> = want.iter().cloned().collect();
    for decode in [false, true] {
        for (raw, fp) in get_chunks(s, "default", &s.token, &fps, decode)
            .iter()
            .zip(&fps)
        {
            assert!(
                ch.reads_back(fp, raw),
                "{ctx}: chunk {fp} reads back different bytes"
            );
        }
    }
    for fp in &fps {
        let r = get_chunk(s, fp);
        assert_eq!(r.status, 200, "{ctx}: GET chunks/{fp}");
        assert!(ch.reads_back(fp, &r.body), "{ctx}: GET chunks/{fp} bytes");
    }
    // One container file per container row, no file left behind.
    let files: BTreeSet<u64> = container_files(dir, 1)
        .iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            name.parse().unwrap()
        })
        .collect();
    assert_eq!(
        files, ids,
        "{ctx}: container files and container rows differ"
    );
    Found {
        deltas: stored.values().filter(|c| **c == 2).count(),
        depth,
    }
}

/// A step of an expiry order.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// `DELETE versions/{id}` of the n-th version made (1-based).
    Delete(usize),
    /// `forget` of these versions.
    Forget(&'static [usize]),
    /// One more version (and its pass).
    Backup,
}

fn expire_with_bases(order: &[Step]) {
    let dir = TempDir::new("delta-gc");
    let s = Server::start_with(&dir.0, ENV, None);
    let mut ch = Chains::new();
    let mut made: Vec<i64> = Vec::new();
    let mut live: BTreeMap<i64, Value> = BTreeMap::new();
    let commit = |ch: &mut Chains, live: &mut BTreeMap<i64, Value>, made: &mut Vec<i64>| {
        let m = ch.next();
        let v = backup_of(&s, &ch.chunks, &m);
        wait_pass(&s, v);
        made.push(v);
        live.insert(v, m);
    };
    for _ in 0..5 {
        commit(&mut ch, &mut live, &mut made);
    }
    let f = gc_oracle(&s, &dir.0, &ch, &live, "5 versions");
    // Every version from v2 on adds a link to the chains of the edited chunks.
    assert!(
        f.deltas >= 30 && f.depth >= 3,
        "the history makes chains of deltas: {} deltas, longest chain {}",
        f.deltas,
        f.depth
    );
    for step in order {
        let ctx = format!("{order:?}, {step:?}");
        match *step {
            Step::Backup => commit(&mut ch, &mut live, &mut made),
            Step::Delete(n) => {
                let id = made[n - 1];
                let r = request(
                    "DELETE",
                    &s.repo_url("default", &format!("/versions/{id}")),
                    Some(&s.token),
                    &[],
                    None,
                );
                assert_eq!(r.status, 200, "{ctx}: {}", String::from_utf8_lossy(&r.body));
                live.remove(&id);
            }
            Step::Forget(ns) => {
                let ids: Vec<i64> = ns.iter().map(|n| made[n - 1]).collect();
                let r = post_json(
                    &s.repo_url("default", "/forget"),
                    &s.token,
                    &json!({ "versions": ids }),
                );
                assert_eq!(r.status, 200, "{ctx}: {}", String::from_utf8_lossy(&r.body));
                for id in ids {
                    live.remove(&id);
                }
            }
        }
        // The expiry pruned already; a prune after it must agree.
        gc_oracle(&s, &dir.0, &ch, &live, &format!("{ctx}, after it"));
        let r = post_json(&s.repo_url("default", "/prune"), &s.token, &json!({}));
        assert_eq!(r.status, 200, "{ctx}: {}", String::from_utf8_lossy(&r.body));
        let f = gc_oracle(&s, &dir.0, &ch, &live, &format!("{ctx}, after a prune"));
        eprintln!(
            "delta gc: {step:?}: {} live versions, {} deltas, longest chain {}",
            live.len(),
            f.deltas,
            f.depth
        );
    }
    let mut s = s;
    s.stop(Duration::from_secs(10));
    check_cli(&dir.0, &format!("{order:?}"));
}

/// GC with base edges against the test's own reachability count, in several expiry orders:
/// the middle version that first stored the bases of the next one's deltas, the oldest one
/// (every chain's root), the newest, a new version built on a chain left behind, and the
/// two newest versions together (a chain whose every link is dead down to a live root).
#[test]
fn gc_keeps_exactly_what_live_deltas_need() {
    let t0 = std::time::Instant::now();
    expire_with_bases(&[
        Step::Delete(2),
        Step::Forget(&[1]),
        Step::Delete(4),
        Step::Backup,
        Step::Forget(&[3, 5]),
    ]);
    expire_with_bases(&[
        Step::Delete(5),
        Step::Forget(&[1, 3]),
        Step::Backup,
        Step::Forget(&[4, 6]),
    ]);
    eprintln!("delta gc: {:.1}s", t0.elapsed().as_secs_f64());
}

// ---------------------------------------------------------------- deltas as stored

/// `chunks/get` with `"deltas": "stored"` answers every chunk as its container stores it,
/// delta chunks included (codec 2, the payload naming its base), and each decodes through
/// wasm-core's chain decoder, against bases answered the same way, to the chunk's bytes;
/// without the option the same request still answers deltas decoded, `decode: true` still
/// answers everything raw, an unknown value is refused, and a damaged delta is refused as
/// stored too (the server decodes it before sending).
/// Every stored chunk as the container listing has it: fingerprint -> (container, offset,
/// stored length, codec).
type Listed = BTreeMap<String, (u64, u64, u64, u64)>;

/// Every stored chunk, read from the containers listing.
fn listing(s: &Server) -> Listed {
    let r = containers_json(s);
    let mut listed = Listed::new();
    for c in r["containers"].as_array().unwrap() {
        for k in c["chunks"].as_array().unwrap() {
            listed.insert(
                k["fp"].as_str().unwrap().to_string(),
                (
                    c["id"].as_u64().unwrap(),
                    k["offset"].as_u64().unwrap(),
                    k["stored_len"].as_u64().unwrap(),
                    k["codec"].as_u64().unwrap(),
                ),
            );
        }
    }
    listed
}

/// A server with four versions of [`Chains`] backed up and their delta passes done, and its
/// stored chunks.
fn chains_repo(dir: &TempDir) -> (Server, Chains, Listed) {
    chains_repo_with(dir, ENV)
}

/// [`chains_repo`] with the server settings `env`.
fn chains_repo_with(dir: &TempDir, env: &[(&str, &str)]) -> (Server, Chains, Listed) {
    let s = Server::start_with(&dir.0, env, None);
    let mut ch = Chains::new();
    for _ in 0..4 {
        let m = ch.next();
        let v = backup_of(&s, &ch.chunks, &m);
        wait_pass(&s, v);
    }
    let listed = listing(&s);
    (s, ch, listed)
}

/// The stored bytes of chunk `fp` (a `Range` read of its container).
fn stored_copy(s: &Server, listed: &Listed, fp: &str) -> Vec<u8> {
    let (cid, off, len, _) = listed[fp];
    let r = request(
        "GET",
        &s.repo_url("default", &format!("/containers/{cid}")),
        Some(&s.token),
        &[("Range", &format!("bytes={}-{}", off, off + len - 1))],
        None,
    );
    assert_eq!(r.status, 206);
    r.body
}

#[test]
fn chunks_get_answers_deltas_as_stored_on_request() {
    use wasm_core::format::bundle::{decode_bundle, Codec};
    use wasm_core::resemble::delta::{base_of, decode_chain, Stored};

    let dir = TempDir::new("delta-stored");
    let (s, ch, listed) = chains_repo(&dir);
    let fps: Vec<String> = listed.keys().cloned().collect();
    let get = |body: Value| post_json(&s.repo_url("default", "/chunks/get"), &s.token, &body);
    // Every stored chunk, the frames the passes made among them, is stored for
    // `chunks/missing` (and has its raw length for `chunks/lengths`, checked below).
    let r = post_json(
        &s.repo_url("default", "/chunks/missing"),
        &s.token,
        &json!({ "fingerprints": fps }),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["missing"],
        json!([]),
        "stored chunks are not missing"
    );

    let r = get(json!({ "fingerprints": fps, "deltas": "stored" }));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let entries = decode_bundle(&r.body).expect("well-formed bundle");
    assert_eq!(entries.len(), fps.len());
    let mut stored: HashMap<[u8; 20], (u8, Vec<u8>, usize)> = HashMap::new();
    for (e, fp) in entries.iter().zip(&fps) {
        assert_eq!(&to_hex(&e.fp), fp, "request order");
        let (cid, off, len, codec) = listed[fp];
        assert_eq!(
            e.codec as u64, codec,
            "chunk {fp} is answered with its stored codec"
        );
        let range = request(
            "GET",
            &s.repo_url("default", &format!("/containers/{cid}")),
            Some(&s.token),
            &[("Range", &format!("bytes={}-{}", off, off + len - 1))],
            None,
        );
        assert_eq!(range.status, 206);
        assert!(range.body == e.payload, "chunk {fp} is answered as stored");
        stored.insert(
            e.fp,
            (e.codec as u8, e.payload.to_vec(), e.raw_len as usize),
        );
    }
    let r = post_json(
        &s.repo_url("default", "/chunks/lengths"),
        &s.token,
        &json!({ "fingerprints": fps }),
    );
    assert_eq!(r.status, 200);
    let lengths: Vec<usize> = entries.iter().map(|e| e.raw_len as usize).collect();
    assert_eq!(
        r.json()["lengths"],
        json!(lengths),
        "raw lengths of stored chunks"
    );
    // Chains of stored deltas: a delta whose base is a delta, decoded here, not on the server.
    let deltas: Vec<&[u8; 20]> = stored
        .iter()
        .filter(|(_, (c, _, _))| *c == Codec::Delta as u8)
        .map(|(fp, _)| fp)
        .collect();
    let on_deltas = deltas
        .iter()
        .filter(|fp| {
            let b = base_of(&stored[**fp].1).unwrap();
            stored[&b].0 == Codec::Delta as u8
        })
        .count();
    assert!(
        deltas.len() >= 20 && on_deltas >= 5,
        "{} deltas, {on_deltas} of them against deltas",
        deltas.len()
    );
    for fp in stored.keys() {
        let raw = decode_chain(fp, |f| {
            let (codec, bytes, raw_len) = stored.get(f).ok_or("base not answered")?;
            Ok(Stored {
                codec: *codec,
                bytes: bytes.clone(),
                raw_len: *raw_len,
            })
        })
        .unwrap_or_else(|e| panic!("chunk {}: {e}", to_hex(fp)));
        assert_eq!(fingerprint(&raw), *fp);
        if ch.fps.contains(&to_hex(fp)) {
            assert!(raw == ch.raw(&to_hex(fp)));
        }
    }

    // Without the option (old clients): deltas decoded (get_chunks refuses a codec-2 entry).
    let raw = get_chunks(&s, "default", &s.token, &fps, false);
    for (raw, fp) in raw.iter().zip(&fps) {
        assert_eq!(to_hex(&fingerprint(raw)), *fp);
    }
    let r = get(json!({ "fingerprints": fps, "deltas": "decoded" }));
    assert_eq!(r.status, 200);
    assert!(decode_bundle(&r.body)
        .unwrap()
        .iter()
        .all(|e| e.codec != Codec::Delta));
    // `decode` answers raw bytes whatever `deltas` says.
    let r = get(json!({ "fingerprints": fps, "decode": true, "deltas": "stored" }));
    assert_eq!(r.status, 200);
    assert!(decode_bundle(&r.body)
        .unwrap()
        .iter()
        .all(|e| e.codec == Codec::Raw));
    get(json!({ "fingerprints": fps, "deltas": "yes" })).expect_error(400, "bad_request");

    // `verify: false`: the same bytes, sent as read; only with `deltas: "stored"`.
    let checked = get(json!({ "fingerprints": fps, "deltas": "stored" }));
    let unchecked = get(json!({ "fingerprints": fps, "deltas": "stored", "verify": false }));
    assert_eq!(unchecked.status, 200);
    assert!(unchecked.body == checked.body);
    for body in [
        json!({ "fingerprints": fps, "verify": false }),
        json!({ "fingerprints": fps, "deltas": "decoded", "verify": false }),
        json!({ "fingerprints": fps, "deltas": "stored", "decode": true, "verify": false }),
        json!({ "fingerprints": fps, "deltas": "stored", "verify": "no" }),
    ] {
        get(body).expect_error(400, "bad_request");
    }

    // A damaged delta: refused, never sent as stored, unless the client checks it itself
    // (`verify: false`): then it gets the damaged bytes as read, and nothing is quarantined
    // by that read.
    if !on_s3() {
        let fp = to_hex(deltas[0]);
        let (cid, off, len, _) = listed[&fp];
        damage_stored(&dir.0, cid, off, len);
        let missing = || {
            let r = post_json(
                &s.repo_url("default", "/chunks/missing"),
                &s.token,
                &json!({ "fingerprints": [&fp] }),
            );
            assert_eq!(r.status, 200);
            r.json()["missing"].as_array().unwrap().len()
        };
        let r = get(json!({ "fingerprints": [&fp], "deltas": "stored", "verify": false }));
        assert_eq!(r.status, 200);
        let e = decode_bundle(&r.body).unwrap();
        assert!(e[0].payload == stored_copy(&s, &listed, &fp));
        assert!(
            e[0].payload != stored[deltas[0]].1,
            "the damaged bytes, as read"
        );
        assert_eq!(missing(), 0, "an unchecked read quarantines nothing");
        get(json!({ "fingerprints": [&fp], "deltas": "stored" })).expect_error(500, "damaged");
        assert_eq!(missing(), 1, "a checked read quarantines it");
    }
}

fn fingerprint_of(hex: &str) -> [u8; 20] {
    wasm_core::format::parse_fp_hex(hex).unwrap()
}

/// `chains`: one request brings every link of the requested deltas' base chains, as stored,
/// after the requested entries, each once, down to a whole chunk or one the client has.
#[test]
fn chunks_get_answers_base_chains_in_one_request() {
    use wasm_core::format::bundle::{decode_bundle, Codec};
    use wasm_core::resemble::delta::{base_of, decode_chain, Stored};

    let dir = TempDir::new("delta-chains");
    let (s, ch, listed) = chains_repo(&dir);
    let get = |body: Value| post_json(&s.repo_url("default", "/chunks/get"), &s.token, &body);
    let delta = Codec::Delta as u64;
    // Every stored chunk as stored: fingerprint -> (codec, bytes, raw length), and each
    // delta's base from its payload.
    let mut stored: HashMap<String, (u8, Vec<u8>, usize)> = HashMap::new();
    let all: Vec<String> = listed.keys().cloned().collect();
    let r = get(json!({ "fingerprints": all, "deltas": "stored" }));
    assert_eq!(r.status, 200);
    for e in decode_bundle(&r.body).unwrap() {
        stored.insert(
            to_hex(&e.fp),
            (e.codec as u8, e.payload.to_vec(), e.raw_len as usize),
        );
    }
    let base = |fp: &str| -> Option<String> {
        let (codec, bytes, _) = &stored[fp];
        (*codec as u64 == delta).then(|| to_hex(&base_of(bytes).unwrap()))
    };
    let depth = |fp: &str| {
        let mut n = 0;
        let mut cur = fp.to_string();
        while let Some(b) = base(&cur) {
            n += 1;
            cur = b;
        }
        n
    };
    // The deltas with the longest chains, a whole chunk, a repeat.
    let mut deep: Vec<&String> = all.iter().filter(|fp| depth(fp) >= 3).collect();
    deep.sort();
    assert!(deep.len() >= 4, "{} chains of 3 links or more", deep.len());
    let whole = all.iter().find(|fp| listed[*fp].3 != delta).unwrap();
    let asked: Vec<String> = vec![
        deep[0].clone(),
        whole.clone(),
        deep[1].clone(),
        deep[0].clone(),
        deep[2].clone(),
        deep[3].clone(),
    ];
    // The requested deltas answered decoded, computed independently of the server's
    // code: a link (down each chain to a chunk that is whole, requested or held) is worth
    // sending when the distinct requested deltas decoded through it hold at least a quarter
    // of its raw bytes; a delta with a link not worth sending goes decoded.
    let sparse = |asked: &[String], have: &[String]| -> std::collections::HashSet<String> {
        let mut deltas: Vec<&String> = Vec::new();
        for fp in asked {
            if base(fp).is_some() && !deltas.contains(&fp) {
                deltas.push(fp);
            }
        }
        let chain = |fp: &str| {
            let mut out = Vec::new();
            let mut cur = fp.to_string();
            while let Some(b) = base(&cur) {
                if asked.contains(&b) || have.contains(&b) {
                    break;
                }
                out.push(b.clone());
                cur = b;
            }
            out
        };
        let mut used: HashMap<String, usize> = HashMap::new();
        for fp in &deltas {
            for l in chain(fp) {
                *used.entry(l).or_default() += stored[*fp].2;
            }
        }
        deltas
            .into_iter()
            .filter(|fp| chain(fp).iter().any(|l| used[l] * 4 < stored[l].2))
            .cloned()
            .collect()
    };
    // What the answer must add: breadth first over the requested deltas not answered
    // decoded, down to a chunk that is whole or in `have`, each chunk once and none of the
    // requested.
    let expected =
        |asked: &[String], have: &[String], decoded: &std::collections::HashSet<String>| {
            let mut seen: std::collections::HashSet<String> = asked.iter().cloned().collect();
            let mut frontier: Vec<String> = Vec::new();
            for fp in asked {
                if base(fp).is_some() && !decoded.contains(fp) && !frontier.contains(fp) {
                    frontier.push(fp.clone());
                }
            }
            let mut out = Vec::new();
            while !frontier.is_empty() {
                let mut next = Vec::new();
                for fp in &frontier {
                    let Some(b) = base(fp) else { continue };
                    if have.contains(&b) || !seen.insert(b.clone()) {
                        continue;
                    }
                    out.push(b.clone());
                    if base(&b).is_some() {
                        next.push(b);
                    }
                }
                frontier = next;
            }
            out
        };
    // The chain ends (whole bases) of the asked chains, and one middle link.
    let end_of = |fp: &str| {
        let mut cur = fp.to_string();
        while let Some(b) = base(&cur) {
            cur = b;
        }
        cur
    };
    let ends: Vec<String> = asked.iter().map(|fp| end_of(fp)).collect();
    let middle = base(deep[1]).unwrap();
    // Every chunk sharing deep[0]'s base (the members of its frame, with frames): their
    // chain links are worth sending.
    let first_base = base(deep[0]).unwrap();
    let siblings: Vec<String> = all
        .iter()
        .filter(|fp| base(fp).as_ref() == Some(&first_base))
        .cloned()
        .collect();
    let mut decoded_seen = 0;
    let mut links_seen = 0;
    for (asked, have, ctx) in [
        (asked.clone(), vec![], "no have"),
        (asked.clone(), ends.clone(), "the chain ends held"),
        (
            asked.clone(),
            vec![ends[0].clone(), middle.clone()],
            "a middle link held",
        ),
        (siblings.clone(), vec![], "one base's dependents"),
    ] {
        let r = get(
            json!({ "fingerprints": asked, "deltas": "stored", "chains": true,
            "have": have }),
        );
        assert_eq!(r.status, 200, "{ctx}: {}", String::from_utf8_lossy(&r.body));
        let entries = decode_bundle(&r.body).expect("well-formed bundle");
        let got: Vec<String> = entries.iter().map(|e| to_hex(&e.fp)).collect();
        let decoded = sparse(&asked, &have);
        let links = expected(&asked, &have, &decoded);
        decoded_seen += decoded.len();
        links_seen += links.len();
        assert_eq!(
            got[..asked.len()],
            asked[..],
            "{ctx}: the requested entries first"
        );
        assert_eq!(
            got[asked.len()..],
            links[..],
            "{ctx}: then exactly the links"
        );
        if ctx != "no have" {
            assert!(
                links.iter().all(|l| !have.contains(l)),
                "{ctx}: nothing the client has"
            );
        }
        // Each entry as stored (a delta answered decoded: whole, zstd or raw), and every
        // requested chunk decodes from the answer alone (plus the raw bytes of what the
        // client has).
        let mut answer: HashMap<[u8; 20], (u8, Vec<u8>, usize)> = HashMap::new();
        for (e, fp) in entries.iter().zip(&got) {
            if decoded.contains(fp) {
                assert!(e.codec != Codec::Delta, "{ctx}: chunk {fp} decoded");
            } else {
                assert_eq!(e.codec as u64, listed[fp].3, "{ctx}: chunk {fp}'s codec");
                assert!(
                    e.payload == stored_copy(&s, &listed, fp),
                    "{ctx}: chunk {fp} as stored"
                );
            }
            answer.insert(
                e.fp,
                (e.codec as u8, e.payload.to_vec(), e.raw_len as usize),
            );
        }
        for fp in &have {
            let raw = decode_chain(&fingerprint_of(fp), |f| {
                let (codec, bytes, raw_len) = &stored[&to_hex(f)];
                Ok(Stored {
                    codec: *codec,
                    bytes: bytes.clone(),
                    raw_len: *raw_len,
                })
            })
            .unwrap();
            answer.insert(
                fingerprint(&raw),
                (Codec::Raw as u8, raw.clone(), raw.len()),
            );
        }
        for e in &entries {
            let raw = decode_chain(&e.fp, |f| {
                let (codec, bytes, raw_len) = answer.get(f).ok_or("base not answered")?;
                Ok(Stored {
                    codec: *codec,
                    bytes: bytes.clone(),
                    raw_len: *raw_len,
                })
            })
            .unwrap_or_else(|err| panic!("{ctx}: chunk {}: {err}", to_hex(&e.fp)));
            assert_eq!(fingerprint(&raw), e.fp);
            if ch.fps.contains(&to_hex(&e.fp)) {
                assert!(raw == ch.raw(&to_hex(&e.fp)), "{ctx}: the raw chunk");
            }
        }
    }
    assert!(
        decoded_seen > 0,
        "some requested deltas are answered decoded"
    );
    assert!(links_seen > 0, "the chains add links");
    // Without `chains` the answer is exactly the requested entries, as before.
    let r = get(json!({ "fingerprints": asked, "deltas": "stored" }));
    let got: Vec<String> = decode_bundle(&r.body)
        .unwrap()
        .iter()
        .map(|e| to_hex(&e.fp))
        .collect();
    assert_eq!(got, asked);
    // Bad requests: JSON errors, nothing streamed.
    // One more than `have` may name (server/src/api/mod.rs, MAX_GET_HAVE).
    let many: Vec<String> = (0..16_385u32)
        .map(|i| to_hex(&fingerprint(&i.to_le_bytes())))
        .collect();
    for body in [
        json!({ "fingerprints": asked, "deltas": "stored", "chains": true, "have": ["xyz"] }),
        json!({ "fingerprints": asked, "deltas": "stored", "chains": true, "have": [&asked[0][..39]] }),
        json!({ "fingerprints": asked, "deltas": "stored", "chains": true, "have": many }),
        json!({ "fingerprints": asked, "deltas": "stored", "have": [&ends[0]] }),
        json!({ "fingerprints": asked, "chains": true }),
        json!({ "fingerprints": asked, "deltas": "stored", "decode": true, "chains": true }),
    ] {
        get(body).expect_error(400, "bad_request");
    }
}

/// `versions/{id}/locations` names each chunk's chain key (docs/API.md): the deepest link
/// of its base chain before the first one that more than 1/8 of the version's chunks
/// decode through, else the chunk itself, the chains as the stored payloads (not the
/// index) say.
#[test]
fn version_locations_name_each_chunks_chain_key() {
    // With frames, every new chunk of a version is a slice of one frame, shared by more than
    // an eighth of the version; without, chains grow a link per version and none is shared.
    let dir = TempDir::new("delta-locations");
    let (linked, cut) = check_chain_keys(chains_repo_with(&dir, ENV));
    assert!(cut > 0, "{cut} chunks keyed short of a shared link");
    let dir = TempDir::new("delta-locations-no-frames");
    let (linked_nf, _) = check_chain_keys(chains_repo_with(&dir, ENV_NO_FRAMES));
    assert!(
        linked + linked_nf > 0,
        "{linked} + {linked_nf} chunks keyed by a link of their chain"
    );
}

/// `GET containers` names each chunk's chain key by the rule of the locations, over every
/// chunk the repository stores (docs/API.md): what an in-page search splits its work by.
#[test]
fn containers_name_each_chunks_chain_key() {
    let dir = TempDir::new("delta-container-keys");
    let linked = check_container_keys(chains_repo_with(&dir, ENV));
    let dir = TempDir::new("delta-container-keys-no-frames");
    let linked_nf = check_container_keys(chains_repo_with(&dir, ENV_NO_FRAMES));
    assert!(
        linked + linked_nf > 0,
        "{linked} + {linked_nf} chunks keyed by a link of their chain"
    );
}

/// Checks the listing's chain keys against the stored payloads; answers how many chunks
/// are keyed by a link of their chain.
fn check_container_keys((s, _, listed): (Server, Chains, Listed)) -> usize {
    let base = stored_bases(&s, &listed);
    let r = containers_json(&s);
    let mut fps = Vec::new();
    let mut got = Vec::new();
    for c in r["containers"].as_array().unwrap() {
        for k in c["chunks"].as_array().unwrap() {
            fps.push(k["fp"].as_str().unwrap().to_string());
            let n = k["chain_key"].as_u64().unwrap();
            assert!(n < 1 << 24, "chain key {n} of 3 bytes");
            got.push(hex_bytes(&(n as u32).to_le_bytes()[..3]));
        }
    }
    assert_eq!(fps.len(), listed.len());
    let (want, linked, _) = oracle_chain_keys(&fps, &base);
    assert_eq!(got, want);
    linked
}

/// Each delta's base, as the stored payloads (not the index) say.
fn stored_bases(s: &Server, listed: &Listed) -> HashMap<String, String> {
    use wasm_core::format::bundle::{decode_bundle, Codec};
    use wasm_core::resemble::delta::base_of;

    let all: Vec<String> = listed.keys().cloned().collect();
    let r = post_json(
        &s.repo_url("default", "/chunks/get"),
        &s.token,
        &json!({ "fingerprints": all, "deltas": "stored" }),
    );
    assert_eq!(r.status, 200);
    let mut base: HashMap<String, String> = HashMap::new();
    for e in decode_bundle(&r.body).unwrap() {
        if e.codec == Codec::Delta {
            base.insert(to_hex(&e.fp), to_hex(&base_of(e.payload).unwrap()));
        }
    }
    base
}

/// The chain key the oracle gives each of `fps` (one set of distinct chunks) from the
/// stored `base` links, as hex of the key's first bytes, with how many chunks are keyed by
/// a link of their chain and how many short of their root because a link is shared.
fn oracle_chain_keys(
    fps: &[String],
    base: &HashMap<String, String>,
) -> (Vec<String>, usize, usize) {
    let chain = |fp: &str| {
        let mut out = Vec::new();
        let mut cur = fp.to_string();
        while let Some(b) = base.get(&cur) {
            out.push(b.clone());
            cur = b.clone();
        }
        out
    };
    let n = fps.len();
    let mut through: HashMap<String, usize> = HashMap::new();
    for fp in fps {
        for l in chain(fp) {
            *through.entry(l).or_default() += 1;
        }
    }
    let (mut linked, mut cut) = (0, 0);
    let keys = fps
        .iter()
        .map(|fp| {
            let links = chain(fp);
            let kept = links.iter().take_while(|l| through[*l] * 8 <= n).count();
            linked += (kept >= 1) as usize;
            cut += (kept < links.len()) as usize;
            let want = if kept == 0 { fp } else { &links[kept - 1] };
            want[..6].to_string()
        })
        .collect();
    (keys, linked, cut)
}

/// Checks every version's chain keys against the stored payloads; answers how many chunks
/// are keyed by a link of their chain, and how many short of their root because a link is
/// shared.
fn check_chain_keys((s, _, listed): (Server, Chains, Listed)) -> (usize, usize) {
    let base = stored_bases(&s, &listed);
    let versions = versions_json(&s, "/versions");
    let (mut linked, mut cut) = (0, 0);
    for v in versions["versions"].as_array().unwrap() {
        let id = v["id"].as_i64().unwrap();
        let r = request(
            "GET",
            &s.repo_url("default", &format!("/versions/{id}/locations")),
            Some(&s.token),
            &[],
            None,
        );
        assert_eq!(r.status, 200);
        let body = &r.body;
        assert_eq!(&body[..8], b"DLOC\x02\0\0\0");
        let n = u32::from_le_bytes(body[8..12].try_into().unwrap()) as usize;
        assert_eq!(body.len(), 16 + n * 48);
        let recs: Vec<&[u8]> = body[16..].chunks(48).collect();
        let fps: Vec<String> = recs.iter().map(|r| hex_bytes(&r[..20])).collect();
        let (keys, l, c) = oracle_chain_keys(&fps, &base);
        for ((rec, fp), want) in recs.iter().zip(&fps).zip(keys) {
            assert_eq!(hex_bytes(&rec[45..48]), want, "chain key of {fp}");
        }
        linked += l;
        cut += c;
    }
    (linked, cut)
}

// ---------------------------------------------------------------- PostgreSQL schema 2 -> 3

/// The PostgreSQL index as schema version 2 created it (before the delta columns
/// `chunks.base` and `chunks.saved`), written out here so that the upgrade is tested from
/// what older servers left, not from today's schema minus a column.
const PG_SCHEMA_2: &str = r#"
CREATE TABLE schema_version(version BIGINT NOT NULL);
CREATE TABLE repos(
  id BIGSERIAL PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_ms BIGINT NOT NULL,
  gc_epoch BIGINT NOT NULL DEFAULT 0,
  reclaimed_bytes BIGINT NOT NULL DEFAULT 0);
CREATE TABLE tokens(
  hash BYTEA PRIMARY KEY,
  repo_id BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  scope TEXT NOT NULL DEFAULT 'full');
CREATE TABLE containers(
  id BIGINT PRIMARY KEY,
  repo_id BIGINT NOT NULL,
  kind BIGINT NOT NULL,
  data_offset BIGINT NOT NULL,
  data_end BIGINT NOT NULL,
  chunk_count BIGINT NOT NULL,
  newest_version BIGINT NOT NULL DEFAULT 0,
  created_ms BIGINT NOT NULL,
  sealed BIGINT NOT NULL DEFAULT 0,
  damage TEXT);
CREATE INDEX containers_by_repo ON containers(repo_id, id);
CREATE INDEX containers_by_kind ON containers(repo_id, kind, newest_version);
CREATE TABLE chunks(
  repo_id BIGINT NOT NULL,
  fp BYTEA NOT NULL,
  container_id BIGINT NOT NULL,
  slot BIGINT NOT NULL,
  "offset" BIGINT NOT NULL,
  stored_len BIGINT NOT NULL,
  raw_len BIGINT NOT NULL,
  codec BIGINT NOT NULL,
  first_version BIGINT,
  stored_ms BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY(repo_id, fp));
CREATE INDEX chunks_by_container ON chunks(container_id, slot);
CREATE TABLE versions(
  id BIGSERIAL PRIMARY KEY,
  repo_id BIGINT NOT NULL,
  source TEXT NOT NULL,
  time BIGINT NOT NULL,
  committed_ms BIGINT NOT NULL,
  stats TEXT NOT NULL,
  manifest BYTEA NOT NULL,
  damaged BIGINT NOT NULL DEFAULT 0,
  token_id TEXT);
CREATE INDEX versions_by_repo ON versions(repo_id, id);
CREATE TABLE quarantine(
  id BIGSERIAL PRIMARY KEY,
  repo_id BIGINT NOT NULL,
  fp BYTEA NOT NULL,
  container_id BIGINT NOT NULL,
  slot BIGINT NOT NULL,
  "offset" BIGINT NOT NULL,
  stored_len BIGINT NOT NULL,
  raw_len BIGINT NOT NULL,
  codec BIGINT NOT NULL,
  first_version BIGINT,
  reason TEXT NOT NULL,
  found_ms BIGINT NOT NULL,
  healed_ms BIGINT);
CREATE INDEX quarantine_by_fp ON quarantine(repo_id, fp);
CREATE INDEX quarantine_by_container ON quarantine(container_id, slot);
CREATE SEQUENCE container_ids;
"#;

/// A server of today on a version-2 PostgreSQL index upgrades it (the delta columns and the
/// pass's record appear, `schema_version` says 4), serves what was committed before byte for byte, and stores
/// deltas in it afterwards. The version-2 database is built from [`PG_SCHEMA_2`] and filled
/// with the rows of a repository a server made without the delta pass (version-2 servers
/// had none), so no row ever had a delta column. Runs in the PostgreSQL suite only.
#[test]
fn postgres_schema_2_upgrades_to_the_current_one() {
    if on_postgres().is_none() {
        eprintln!("postgres_schema_2_upgrades_to_the_current_one: not on PostgreSQL (DITTO_TEST_PG unset)");
        return;
    }
    let dir = TempDir::new("pg-schema2");
    let h = history();
    let mut s = Server::start_without_pass(&dir.0);
    let v1 = backup(&s, &h, &h.v1);
    s.stop(Duration::from_secs(10));

    // The version-2 database: its own data directory's database, filled with every row of
    // the repository's tables (their version-2 columns) and the sequences set past them.
    let old = TempDir::new("pg-schema2-db");
    let url = database_url(&old.0).unwrap();
    let mut from =
        postgres::Client::connect(&database_url(&dir.0).unwrap(), postgres::NoTls).unwrap();
    let mut to = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    to.batch_execute(PG_SCHEMA_2).unwrap();
    to.execute("INSERT INTO schema_version(version) VALUES (2)", &[])
        .unwrap();
    for table in [
        "repos",
        "tokens",
        "containers",
        "chunks",
        "versions",
        "quarantine",
    ] {
        let cols: Vec<String> = to
            .query(
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_name = $1 ORDER BY ordinal_position",
                &[&table],
            )
            .unwrap()
            .iter()
            .map(|r| format!("\"{}\"", r.get::<_, String>(0)))
            .collect();
        let cols = cols.join(", ");
        let mut rows = Vec::new();
        std::io::Read::read_to_end(
            &mut from
                .copy_out(&format!("COPY {table} ({cols}) TO STDOUT"))
                .unwrap(),
            &mut rows,
        )
        .unwrap();
        let mut w = to
            .copy_in(&format!("COPY {table} ({cols}) FROM STDIN"))
            .unwrap();
        std::io::Write::write_all(&mut w, &rows).unwrap();
        w.finish().unwrap();
    }
    to.batch_execute(
        "SELECT setval(pg_get_serial_sequence('repos', 'id'), (SELECT MAX(id) FROM repos));
         SELECT setval(pg_get_serial_sequence('versions', 'id'), (SELECT MAX(id) FROM versions));
         SELECT setval('container_ids', (SELECT MAX(id) FROM containers) + 1, false);",
    )
    .unwrap();
    let n: i64 = to
        .query_one("SELECT COUNT(*) FROM chunks", &[])
        .unwrap()
        .get(0);
    assert_eq!(
        n as usize,
        fps_of(&h.v1).iter().collect::<BTreeSet<_>>().len()
    );

    // Today's server on it, with the delta pass.
    let mut env = ENV.to_vec();
    env.push(("DATABASE_URL", &url));
    let s = Server::start_with(&dir.0, &env, None);
    let at: i64 = to
        .query_one("SELECT version FROM schema_version", &[])
        .unwrap()
        .get(0);
    assert_eq!(at, 5, "schema_version after the upgrade");
    let mut cols = |table: &str| -> BTreeSet<String> {
        to.query(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_name = $1",
            &[&table],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
    };
    let chunk_cols = cols("chunks");
    assert!(
        chunk_cols.contains("base") && chunk_cols.contains("saved"),
        "the delta columns were added: {chunk_cols:?}"
    );
    let version_cols = cols("versions");
    assert!(
        version_cols.contains("manifest_base"),
        "the manifest base column was added: {version_cols:?}"
    );
    let ids: Vec<i64> = versions_json(&s, "/versions")["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![v1], "the version committed on schema 2");
    read_back(&s, &h, &h.v1, "schema 2, v1");
    // New work on the upgraded schema: deltas recorded with their bases.
    let v2 = backup(&s, &h, &h.v2);
    let st = wait_pass(&s, v2);
    assert!(st["delta_chunks"].as_i64().unwrap() > 0, "{st}");
    let bases: i64 = to
        .query_one("SELECT COUNT(*) FROM chunks WHERE base IS NOT NULL", &[])
        .unwrap()
        .get(0);
    assert_eq!(Some(bases), st["delta_chunks"].as_i64(), "{st}");
    assert_eq!(
        st["delta_done"],
        json!(v2),
        "the pass's record from then on: {st}"
    );
    read_back(&s, &h, &h.v1, "upgraded, v1");
    read_back(&s, &h, &h.v2, "upgraded, v2");
    let mut s = s;
    s.stop(Duration::from_secs(10));
    let out = server_cmd(&dir.0)
        .env("DATABASE_URL", &url)
        .args(["check", "default"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "check on the upgraded database: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// ICDA with base edges: with the layout off the mover no longer regroups a base with its
/// newest dependent, so an archival container of an expired version may hold the base of a
/// live delta made after the switch; ICDA must leave it (docs/STORAGE.md).
#[test]
fn icda_keeps_bases_the_mover_did_not_regroup() {
    let dir = TempDir::new("delta-icda");
    let mut ch = Chains::new();
    let mut live: BTreeMap<i64, Value> = BTreeMap::new();
    // Two versions without the pass: the mover files v1's edited-away chunks as group 1.
    let mut s = Server::start_with(&dir.0, ENV_NO_PASS, None);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let m = ch.next();
        let v = backup_of(&s, &ch.chunks, &m);
        ids.push(v);
        live.insert(v, m);
    }
    let r = post_json(
        &s.repo_url("default", "/prune"),
        &s.token,
        &json!({ "dry_run": true }),
    );
    assert_eq!(r.status, 200);
    s.stop(Duration::from_secs(10));
    // As if v1 had had its pass: the startup pass handles v2 only (v1's would move its
    // recompressed chunks out of group 1).
    set_delta_record(&dir.0, Some(ids[0]));
    // The layout off, the pass on: the startup pass stores v2's edits against v1's chunks.
    let s = Server::start_with(&dir.0, &[ENV[0], ("DITTO_LAYOUT", "off")], None);
    wait_pass(&s, ids[1]);
    let archival_bases = containers_json(&s)["containers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "archival" && c["newest_version"].as_i64() == Some(ids[0]))
        .count();
    assert!(
        archival_bases > 0,
        "v1's own chunks are in group {}",
        ids[0]
    );
    let f = gc_oracle(&s, &dir.0, &ch, &live, "v2's deltas made");
    assert!(f.deltas >= 10, "the pass made deltas: {}", f.deltas);
    let r = post_json(
        &s.repo_url("default", "/forget"),
        &s.token,
        &json!({ "versions": [ids[0]] }),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    live.remove(&ids[0]);
    gc_oracle(&s, &dir.0, &ch, &live, "v1 forgotten");
    let mut s = s;
    s.stop(Duration::from_secs(10));
    check_cli(&dir.0, "v1 forgotten");
}

/// A base that cannot be read for the server's own reasons (an I/O error: failure point
/// `base:read`) fails the read of a delta with a 500 `internal`, and the delta, whose bytes
/// are sound, is not quarantined, by a read or by `verify`: once the base reads again, the
/// delta is served. Before, the delta was answered `damaged` and quarantined.
#[test]
fn a_base_that_cannot_be_read_does_not_quarantine_its_delta() {
    let dir = TempDir::new("delta-base-io");
    let h = history();
    let mut s = Server::start_with(&dir.0, ENV_NO_FRAMES, None);
    both_passed(&s, &h);
    let delta = containers_json(&s)["containers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["chunks"].as_array().unwrap())
        .find(|k| k["codec"].as_u64() == Some(2))
        .map(|k| k["fp"].as_str().unwrap().to_string())
        .expect("a delta chunk listed");
    s.stop(Duration::from_secs(10)).expect("clean stop");
    // A fresh server (nothing of the base cached, no search cache warming up through it)
    // that cannot read a base.
    let failing = [
        ENV_NO_FRAMES,
        &[
            ("DITTO_SEARCH_CACHE_MB", "0"),
            ("DITTO_TEST_FAIL_AT", "base:read"),
        ],
    ]
    .concat();
    let mut s = Server::start_with(&dir.0, &failing, None);
    let get = |s: &Server| get_chunk(s, &delta);
    get(&s).expect_error(500, "internal");
    post_json(&s.repo_url("default", "/verify"), &s.token, &json!({}))
        .expect_error(500, "internal");
    let missing = post_json(
        &s.repo_url("default", "/chunks/missing"),
        &s.token,
        &json!({ "fingerprints": [delta] }),
    );
    assert_eq!(
        missing.json()["missing"],
        json!([]),
        "the delta is not quarantined"
    );
    s.stop(Duration::from_secs(10)).expect("clean stop");
    let s = Server::start_with(&dir.0, ENV_NO_FRAMES, None);
    let r = get(&s);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(to_hex(&fingerprint(&r.body)), delta);
    // `verify` reads the bases while it lists a container's chunks (on PostgreSQL it took
    // the connection the listing held, and panicked).
    let v = post_json(&s.repo_url("default", "/verify"), &s.token, &json!({}));
    assert_eq!(v.status, 200, "{}", String::from_utf8_lossy(&v.body));
    assert_eq!(v.json()["ok"], true, "{}", v.json());
    drop(s);
    check_cli(&dir.0, "after the base read again");
}
