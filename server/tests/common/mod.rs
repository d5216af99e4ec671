//! Test harness: runs the real `ditto-server` binary over HTTP.
#![allow(dead_code)]

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use serde_json::Value;
use wasm_core::{
    format::bundle::{decode_bundle, BundleWriter, Codec},
    hash::{fingerprint, to_hex, Fingerprint},
};

pub const BIN: &str = env!("CARGO_BIN_EXE_ditto-server");

/// The PostgreSQL server the suite runs against instead of SQLite (`DITTO_TEST_PG`, an
/// admin database's URL, set by `npm run test:pg`), if any.
pub fn on_postgres() -> Option<String> {
    std::env::var("DITTO_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
}

/// Whether the suite runs on SQLite: the checks of SQLite's own files (its write-ahead
/// log, its migrations) apply only then.
pub fn on_sqlite() -> bool {
    on_postgres().is_none()
}

/// The database of a data directory when the suite runs on PostgreSQL: one per directory
/// (every server and CLI run on it shares it), created on first use.
pub fn database_url(data_dir: &Path) -> Option<String> {
    use std::{collections::HashSet, sync::Mutex};
    static CREATED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let admin = on_postgres()?;
    let name: String = format!("t_{}", data_dir.display())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    // PostgreSQL names are at most 63 bytes: keep the unique tail (pid and counter).
    let name = format!("t{}", &name[name.len().saturating_sub(60)..]);
    let mut created = CREATED.lock().unwrap_or_else(|p| p.into_inner());
    if created
        .get_or_insert_with(HashSet::new)
        .insert(name.clone())
    {
        let mut c = postgres::Client::connect(&admin, postgres::NoTls)
            .unwrap_or_else(|e| panic!("DITTO_TEST_PG {admin}: {e}"));
        // One statement each: PostgreSQL runs a multi-statement string as one transaction,
        // which DROP and CREATE DATABASE refuse.
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
            .unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    }
    let (base, _) = admin
        .rsplit_once('/')
        .expect("DITTO_TEST_PG ends in a database name");
    Some(format!("{base}/{name}"))
}

/// The S3-compatible object store the suite keeps containers on instead of the data
/// directory (`DITTO_TEST_S3`, its endpoint URL, set by `npm run test:scale`), if any.
fn s3_endpoint() -> Option<String> {
    std::env::var("DITTO_TEST_S3")
        .ok()
        .filter(|u| !u.is_empty())
}

/// Whether the suite keeps containers on object storage.
pub fn on_s3() -> bool {
    s3_endpoint().is_some()
}

fn s3_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("DITTO_TEST_S3 is set but {name} is not"))
}

/// The object key prefix of a data directory when the suite runs on object storage: one
/// per directory, as with its database, so that tests share one bucket without meeting.
pub fn s3_prefix(data_dir: &Path) -> String {
    let name = data_dir
        .file_name()
        .unwrap_or(data_dir.as_os_str())
        .to_string_lossy()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect::<String>();
    format!("t-{name}")
}

/// Where the objects of a data directory live as files: s3s-fs keeps object `KEY` of
/// bucket `B` as `ROOT/B/KEY`.
fn s3_files(data_dir: &Path) -> PathBuf {
    PathBuf::from(s3_env("DITTO_TEST_S3_ROOT"))
        .join(s3_env("DITTO_TEST_S3_BUCKET"))
        .join(s3_prefix(data_dir))
}

/// The folder holding the repositories' container folders of a data directory
/// (`<repos>/<repo id>/containers/`): the data directory's `repos`, or the object store's
/// files under the directory's prefix.
pub fn repos_dir(data_dir: &Path) -> PathBuf {
    if on_s3() {
        s3_files(data_dir).join("repos")
    } else {
        data_dir.join("repos")
    }
}

/// The file of container `id` of repository `repo_id` (FORMAT.md: `<id as 10 digits>.dct`),
/// on local disk or, on object storage, the store's file of its object.
pub fn container_file(data_dir: &Path, repo_id: u64, id: u64) -> PathBuf {
    repos_dir(data_dir)
        .join(repo_id.to_string())
        .join("containers")
        .join(format!("{id:010}.dct"))
}

/// Every container file of repository `repo_id`, sorted. On local disk the folder must
/// exist; on object storage a repository without objects has no folder.
pub fn container_files(data_dir: &Path, repo_id: u64) -> Vec<PathBuf> {
    let dir = repos_dir(data_dir)
        .join(repo_id.to_string())
        .join("containers");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if on_s3() && e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| !on_s3() || p.is_file())
        .collect();
    files.sort();
    files
}

/// `ditto-server` on `data_dir` (and its database when the suite runs on PostgreSQL, its
/// bucket prefix when it runs on object storage).
pub fn server_cmd(data_dir: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env("DATA_DIR", data_dir);
    match database_url(data_dir) {
        Some(url) => cmd.env("DATABASE_URL", url),
        None => cmd.env_remove("DATABASE_URL"),
    };
    match s3_endpoint() {
        Some(endpoint) => cmd
            .env("DITTO_S3_ENDPOINT", endpoint)
            .env("DITTO_S3_REGION", "us-east-1")
            .env("DITTO_S3_BUCKET", s3_env("DITTO_TEST_S3_BUCKET"))
            .env("DITTO_S3_ACCESS_KEY_ID", s3_env("DITTO_TEST_S3_KEY"))
            .env("DITTO_S3_SECRET_ACCESS_KEY", s3_env("DITTO_TEST_S3_SECRET"))
            .env("DITTO_S3_PREFIX", s3_prefix(data_dir))
            // One server per prefix: an object no row names is a crash's leftover at once,
            // not possibly another replica's upload in flight.
            .env("DITTO_ORPHAN_GRACE_S", "0"),
        None => [
            "DITTO_S3_ENDPOINT",
            "DITTO_S3_REGION",
            "DITTO_S3_BUCKET",
            "DITTO_S3_ACCESS_KEY_ID",
            "DITTO_S3_SECRET_ACCESS_KEY",
            "DITTO_S3_PREFIX",
        ]
        .iter()
        .fold(&mut cmd, |c, k| c.env_remove(k)),
    };
    cmd
}

/// A temporary data directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "ditto-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        // The directory's objects go with it (the store's own metadata files stay, unread).
        if on_s3() {
            let _ = std::fs::remove_dir_all(s3_files(&self.0));
        }
    }
}

pub struct Server {
    pub child: Child,
    pub base: String,
    pub token: String,
    pub line: String,
    /// What the server wrote to stderr so far (also passed on to the test's stderr).
    pub stderr: Arc<Mutex<String>>,
}

/// The delta pass off: it re-stores compressible chunks in the background after a commit
/// (deltas, recompression: docs/STORAGE.md), so it moves the chunks a test locates, reads
/// from container files or damages.
pub const NO_PASS: &[(&str, &str)] = &[("DITTO_DELTA", "0")];

impl Server {
    pub fn start(data_dir: &Path) -> Server {
        Server::start_with(data_dir, &[], None)
    }

    /// Without the delta pass ([`NO_PASS`]), for tests that pin where chunks are stored or
    /// what bytes their stored copies are.
    pub fn start_without_pass(data_dir: &Path) -> Server {
        Server::start_with(data_dir, NO_PASS, None)
    }

    /// With extra environment variables and, if given, a file size limit (RLIMIT_FSIZE, in
    /// bytes) on the server process: a write past it fails as a full disk would.
    pub fn start_with(data_dir: &Path, env: &[(&str, &str)], max_file: Option<u64>) -> Server {
        let mut cmd = server_cmd(data_dir);
        cmd.arg("serve")
            .env("PORT", "0")
            .env("WEB_DIR", data_dir.join("no-web"))
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(limit) = max_file {
            use std::os::unix::process::CommandExt;
            // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let l = libc::rlimit {
                        rlim_cur: limit,
                        rlim_max: limit,
                    };
                    if libc::setrlimit(libc::RLIMIT_FSIZE, &l) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().expect("spawn ditto-server");
        let stderr = Arc::new(Mutex::new(String::new()));
        let err = BufReader::new(child.stderr.take().unwrap());
        let kept = stderr.clone();
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                eprintln!("{line}");
                let mut k = kept.lock().unwrap();
                k.push_str(&line);
                k.push('\n');
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).expect("read the startup line");
        let line = line.trim_end().to_string();
        let rest = line
            .strip_prefix("Ditto is running. Open ")
            .unwrap_or_else(|| panic!("unexpected startup line {line:?}"));
        let (base, token) = rest.split_once("/#token=").expect("link with token");
        // Keep draining stdout so the server never blocks on it.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = out.read_to_end(&mut sink);
        });
        Server {
            base: base.to_string(),
            token: token.to_string(),
            line: line.clone(),
            child,
            stderr,
        }
    }

    /// SIGTERM (a clean stop), then waits up to `timeout` for the exit; None if still running.
    pub fn stop(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(ok.success(), "kill -TERM failed");
        let t0 = Instant::now();
        while t0.elapsed() < timeout {
            if let Some(status) = self.child.try_wait().expect("wait for the server") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// SIGKILL, no chance to clean up.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn repo_url(&self, repo: &str, path: &str) -> String {
        format!("{}/api/v1/repos/{repo}{path}", self.base)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build()
}

pub struct Resp {
    pub status: u16,
    pub body: Vec<u8>,
    pub headers: Vec<(String, String)>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {} body is not JSON ({e}): {:?}",
                self.status,
                String::from_utf8_lossy(&self.body[..self.body.len().min(300)])
            )
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Asserts an error status with a JSON `{"error", "code"}` body; returns the JSON.
    pub fn expect_error(&self, status: u16, code: &str) -> Value {
        assert_eq!(
            self.status,
            status,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        let j = self.json();
        assert!(j["error"].is_string(), "no error message in {j}");
        assert_eq!(j["code"], code, "{j}");
        j
    }
}

fn finish(r: Result<ureq::Response, ureq::Error>) -> Result<Resp, String> {
    let resp = match r {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => return Err(e.to_string()),
    };
    let status = resp.status();
    let headers = resp
        .headers_names()
        .into_iter()
        .map(|n| {
            let v = resp.header(&n).unwrap_or("").to_string();
            (n, v)
        })
        .collect();
    let mut body = Vec::new();
    resp.into_reader()
        .read_to_end(&mut body)
        .map_err(|e| e.to_string())?;
    Ok(Resp {
        status,
        body,
        headers,
    })
}

/// One HTTP request; `Err` only for transport failures.
pub fn try_request(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<Resp, String> {
    let mut req = agent.request(method, url);
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    for (k, v) in headers {
        req = req.set(k, v);
    }
    finish(match body {
        Some(b) => req.send_bytes(b),
        None => req.call(),
    })
}

pub fn request(
    method: &str,
    url: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Resp {
    try_request(&agent(), method, url, token, headers, body)
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"))
}

/// `GET chunks/{fp}` in repository `default` with the server's token.
pub fn get_chunk(s: &Server, fp: &str) -> Resp {
    request(
        "GET",
        &s.repo_url("default", &format!("/chunks/{fp}")),
        Some(&s.token),
        &[],
        None,
    )
}

pub fn post_json(url: &str, token: &str, v: &Value) -> Resp {
    request(
        "POST",
        url,
        Some(token),
        &[("Content-Type", "application/json")],
        Some(&serde_json::to_vec(v).unwrap()),
    )
}

/// Deterministic pseudo-random bytes.
pub fn rand_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Compressible bytes (text-like), so zstd has work to do.
pub fn text_bytes(seed: u64, len: usize) -> Vec<u8> {
    let words = [
        "ditto ", "backup ", "chunk ", "browser ", "zstd ", "sha1 ", "\n",
    ];
    let r = rand_bytes(seed, len);
    let mut out = Vec::with_capacity(len + 8);
    let mut i = 0;
    while out.len() < len {
        out.extend_from_slice(words[r[i % len] as usize % words.len()].as_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

#[derive(Clone)]
pub struct TestChunk {
    pub fp: Fingerprint,
    pub raw: Vec<u8>,
    pub zstd: bool,
}

impl TestChunk {
    pub fn new(raw: Vec<u8>, zstd: bool) -> TestChunk {
        TestChunk {
            fp: fingerprint(&raw),
            raw,
            zstd,
        }
    }

    pub fn hex(&self) -> String {
        to_hex(&self.fp)
    }

    /// The bytes [`bundle`] uploads for it: a zstd-3 frame, or the raw bytes.
    pub fn stored(&self) -> Vec<u8> {
        if self.zstd {
            zstd::bulk::compress(&self.raw, 3).unwrap()
        } else {
            self.raw.clone()
        }
    }
}

pub fn bundle(chunks: &[TestChunk]) -> Vec<u8> {
    let mut w = BundleWriter::new();
    for c in chunks {
        let codec = if c.zstd { Codec::Zstd } else { Codec::Raw };
        w.push(&c.fp, codec, c.raw.len() as u32, &c.stored());
    }
    w.finish()
}

pub fn upload(
    agent: &ureq::Agent,
    s: &Server,
    token: &str,
    chunks: &[TestChunk],
) -> Result<Resp, String> {
    upload_at(agent, &s.base, token, chunks)
}

/// [`upload`] to the default repository of the server at `base` (for threads, which take
/// the base URL rather than the `Server`).
pub fn upload_at(
    agent: &ureq::Agent,
    base: &str,
    token: &str,
    chunks: &[TestChunk],
) -> Result<Resp, String> {
    try_request(
        agent,
        "POST",
        &format!("{base}/api/v1/repos/default/bundles"),
        Some(token),
        &[("Content-Type", "application/x-ditto-bundle")],
        Some(&bundle(chunks)),
    )
}

/// Fetches chunks with `chunks/get` and returns their raw bytes (decoding zstd, checking
/// fingerprints).
pub fn get_chunks(
    s: &Server,
    repo: &str,
    token: &str,
    fps: &[String],
    decode: bool,
) -> Vec<Vec<u8>> {
    let r = post_json(
        &s.repo_url(repo, "/chunks/get"),
        token,
        &serde_json::json!({ "fingerprints": fps, "decode": decode }),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("content-type"), Some("application/x-ditto-bundle"));
    let entries = decode_bundle(&r.body).expect("well-formed bundle");
    assert_eq!(entries.len(), fps.len());
    entries
        .iter()
        .zip(fps)
        .map(|(e, want)| {
            assert_eq!(&to_hex(&e.fp), want, "request order");
            let raw = match e.codec {
                Codec::Raw => e.payload.to_vec(),
                Codec::Zstd => {
                    assert!(!decode, "decode=true must return raw chunks");
                    zstd::bulk::decompress(e.payload, e.raw_len as usize).unwrap()
                }
                Codec::Delta => panic!("delta chunk"),
            };
            assert_eq!(raw.len(), e.raw_len as usize);
            assert_eq!(fingerprint(&raw), e.fp);
            raw
        })
        .collect()
}

/// Runs `ditto-server ARGS` against `data_dir`; returns (exit code, stdout).
pub fn cli(data_dir: &Path, args: &[&str]) -> (i32, String) {
    let out = server_cmd(data_dir)
        .args(args)
        .output()
        .expect("run ditto-server");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Bytes as lowercase hex (keywords sent with `"hex": true`, index blobs).
pub fn hex_bytes(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A `POST search` answer's hits by (version, path): `(keyword, offset)` as the server
/// lists them (by offset, then keyword).
pub type SearchHits = BTreeMap<(i64, String), Vec<(u64, u64)>>;

/// The hits of a `POST search` answer (docs/API.md), in the server's order.
pub fn search_hits(r: &Value) -> SearchHits {
    r["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let hits = f["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h[0].as_u64().unwrap(), h[1].as_u64().unwrap()))
                .collect();
            let key = (
                f["version"].as_i64().unwrap(),
                f["path"].as_str().unwrap().to_string(),
            );
            (key, hits)
        })
        .collect()
}

/// The index's base edges (delta fingerprint -> base), read beside the running server.
pub fn base_edges(dir: &Path) -> HashMap<String, String> {
    let rows: Vec<(Vec<u8>, Vec<u8>)> = match database_url(dir) {
        Some(url) => {
            let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            c.query("SELECT fp, base FROM chunks WHERE base IS NOT NULL", &[])
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect()
        }
        None => {
            let c = rusqlite::Connection::open_with_flags(
                dir.join("ditto.sqlite3"),
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .unwrap();
            let mut st = c
                .prepare("SELECT fp, base FROM chunks WHERE base IS NOT NULL")
                .unwrap();
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            rows
        }
    };
    rows.into_iter()
        .map(|(fp, base)| (hex_bytes(&fp), hex_bytes(&base)))
        .collect()
}

/// `fps` with every chunk their delta chains reach through `edges` ([`base_edges`]): what a
/// repository keeps for them (a base no manifest names, such as a frame or a dictionary,
/// included).
pub fn with_bases(mut fps: BTreeSet<String>, edges: &HashMap<String, String>) -> BTreeSet<String> {
    let mut todo: Vec<String> = fps.iter().cloned().collect();
    while let Some(fp) = todo.pop() {
        if let Some(b) = edges.get(&fp) {
            if fps.insert(b.clone()) {
                todo.push(b.clone());
            }
        }
    }
    fps
}
