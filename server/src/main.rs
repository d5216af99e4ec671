//! `ditto-server`: the storage server and the host of the web app.
//!
//! Commands: `serve` (default), `repo create NAME`, `token create|list|revoke`, `check REPO`,
//! `stats REPO`. `serve` listens on 127.0.0.1:$PORT (default 8080, 0 = any free port),
//! keeps its data in $DATA_DIR (default ./data) and serves the built web app from
//! $WEB_DIR (default web/dist). See docs/API.md. On SIGTERM or SIGINT it stops taking
//! connections, gives open ones STOP_GRACE to finish, then folds SQLite's write-ahead log
//! into the database (docs/FORMAT.md) and exits 0.

mod api;
mod check;
mod error;
mod http;
mod store;

use std::{
    io::Write,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use axum::{http::StatusCode, response::IntoResponse};
use store::index::{self, Index, IndexRead, IndexWrite, IndexWriter};
use tower_http::{
    catch_panic::CatchPanicLayer,
    services::{ServeDir, ServeFile},
};

fn usage_text() -> String {
    format!(
        "usage: ditto-server [serve | repo create NAME | token create REPO [--scope full|backup|read] | token list REPO | token revoke REPO ID | check REPO [--read-data-subset n/m|P%] | stats REPO | forget REPO (--keep-last N | --keep-hourly N | --keep-daily N | --keep-weekly N | --keep-monthly N | --keep-yearly N | --keep-within DUR)... [--source S] [--dry-run] | forget REPO --version ID... [--dry-run] | prune REPO [--dry-run]]
environment: PORT (default 8080, 0 = any free port), DATA_DIR (default ./data), WEB_DIR (default web/dist),
HEADER_TIMEOUT (seconds a connection may idle or take to send a request's headers, default {}),
SEND_TIMEOUT (seconds a chunks/get answer waits for its client to take more of it, default {})",
        api::DEFAULT_BODY_IDLE.as_secs(),
        api::DEFAULT_SEND_STALL.as_secs()
    )
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// A timeout in whole seconds from the environment variable `name`. At most a day: the
/// server adds it to the current instant (hyper for `HEADER_TIMEOUT`, tokio for
/// `SEND_TIMEOUT`), and a sum past what an instant holds panics there.
fn timeout_env(name: &str, default: Duration) -> Duration {
    let Ok(value) = std::env::var(name) else {
        return default;
    };
    Duration::from_secs(
        value
            .parse()
            .ok()
            .filter(|&s| (1..=86_400).contains(&s))
            .unwrap_or_else(|| {
                die(format!(
                    "{name} must be a whole number of seconds from 1 to 86400"
                ))
            }),
    )
}

fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("ditto-server: {msg}");
    std::process::exit(1)
}

/// The access token of the default repository, kept in the data directory (mode 0600)
/// so that the same link is printed on every start. Only its hash is in the database.
fn default_token(data_dir: &Path) -> std::io::Result<String> {
    let path = data_dir.join("default-repo.token");
    if let Ok(t) = std::fs::read_to_string(&path) {
        let t = t.trim().to_string();
        if !t.is_empty() {
            return Ok(t);
        }
    }
    let token = store::new_token()?;
    let tmp = data_dir.join("default-repo.token.tmp");
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(token.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(data_dir)?.sync_all()?;
    Ok(token)
}

/// After `token revoke default ID`: removes `default-repo.token` if it holds the revoked
/// token, since every start adds the file's token to repository `default` again. The next
/// start then makes a new default token and prints its link.
fn forget_default_token(repo: &str, revoked_id: &str) {
    if repo != "default" {
        return;
    }
    let dir = data_dir();
    let path = dir.join("default-repo.token");
    let Ok(t) = std::fs::read_to_string(&path) else {
        return;
    };
    if store::auth::id_of_token(t.trim()) != revoked_id {
        return;
    }
    std::fs::remove_file(&path)
        .and_then(|()| std::fs::File::open(&dir)?.sync_all())
        .unwrap_or_else(|e| die(format!("cannot remove {}: {e}", path.display())));
    println!(
        "removed {}: the server makes a new default token when it next starts",
        path.display()
    );
}

/// The data directory, private to this user: it is created 0700, an existing one is set to
/// 0700, and everything the process creates in it is 0600 (files) or 0700 (directories),
/// SQLite's files included, through the umask.
fn data_dir() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: umask only sets the process's file mode creation mask; it cannot fail.
    unsafe { libc::umask(0o077) };
    let d = PathBuf::from(env_or("DATA_DIR", "data"));
    if let Err(e) = std::fs::create_dir_all(&d) {
        die(format!("cannot create data directory {}: {e}", d.display()));
    }
    if let Err(e) = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)) {
        die(format!("cannot make {} private (0700): {e}", d.display()));
    }
    // Files an older version left readable by others.
    for name in [
        "ditto.sqlite3",
        "ditto.sqlite3-wal",
        "ditto.sqlite3-shm",
        "server.lock",
    ] {
        let _ = std::fs::set_permissions(d.join(name), std::fs::Permissions::from_mode(0o600));
    }
    d
}

/// The PostgreSQL database holding the index (`DATABASE_URL`), if not the embedded SQLite.
fn database_url() -> Option<String> {
    std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty())
}

/// The data directory's index (`DATABASE_URL`'s database, or the SQLite file).
fn open_index() -> (Box<dyn Index>, Box<dyn IndexWriter>) {
    index::open(&data_dir(), database_url().as_deref()).unwrap_or_else(|e| die(e))
}

fn usage() -> ! {
    eprintln!("{}", usage_text());
    std::process::exit(2)
}

fn existing_repo(ix: &dyn IndexRead, name: &str) -> i64 {
    store::repo_id(ix, name)
        .unwrap_or_else(|e| die(e))
        .unwrap_or_else(|| die(format!("no repository named {name:?}")))
}

/// Runs `f` in one write transaction of the data directory's index (the CLI's repository
/// and token commands), committed if it returns.
fn in_index_tx<T>(f: impl FnOnce(&dyn IndexWrite) -> T) -> T {
    let (_, writer) = open_index();
    let tx = writer.begin().unwrap_or_else(|e| die(e));
    let out = f(&*tx);
    tx.commit().unwrap_or_else(|e| die(e));
    out
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] | ["serve"] => serve(),
        ["repo", "create", name] => {
            if !store::valid_repo_name(name) {
                die("repository names are [a-z0-9][a-z0-9_-]{0,63}");
            }
            let token = store::new_token().unwrap_or_else(|e| die(e));
            in_index_tx(|tx| {
                if store::repo_id(tx, name)
                    .unwrap_or_else(|e| die(e))
                    .is_some()
                {
                    die(format!("repository {name:?} already exists"));
                }
                let id = store::create_repo(tx, name).unwrap_or_else(|e| die(e));
                store::add_token(tx, id, &token, store::Scope::Full).unwrap_or_else(|e| die(e));
            });
            println!("{token}");
        }
        ["token", "create", repo, rest @ ..] => {
            let scope = match rest {
                [] => store::Scope::Full,
                ["--scope", s] => {
                    store::Scope::parse(s).unwrap_or_else(|| die("--scope is full, backup or read"))
                }
                _ => usage(),
            };
            let token = store::new_token().unwrap_or_else(|e| die(e));
            in_index_tx(|tx| {
                let id = existing_repo(tx, repo);
                store::add_token(tx, id, &token, scope).unwrap_or_else(|e| die(e));
            });
            println!("{token}");
        }
        ["token", "list", repo] => {
            let tokens = in_index_tx(|tx| {
                let id = existing_repo(tx, repo);
                store::auth::list_tokens(tx, id).unwrap_or_else(|e| die(e))
            });
            for t in tokens {
                println!(
                    "{}  {:<6}  created {}",
                    t.id,
                    t.scope.as_str(),
                    t.created_ms
                );
            }
        }
        ["token", "revoke", repo, prefix] => {
            use store::auth::RevokeError;
            let revoked = in_index_tx(|tx| {
                let id = existing_repo(tx, repo);
                store::auth::revoke_token(tx, id, prefix).unwrap_or_else(|e| die(e))
            });
            match revoked {
                Ok(full) => {
                    println!("revoked {full}");
                    forget_default_token(repo, &full);
                }
                Err(RevokeError::TooShort) => die("a token id is at least 6 hex digits"),
                Err(RevokeError::NoMatch) => die(format!("no token {prefix} in {repo:?}")),
                Err(RevokeError::Ambiguous(n)) => die(format!(
                    "{n} tokens start with {prefix}: give more digits (token list)"
                )),
            }
        }
        ["check", repo, rest @ ..] => {
            let subset = match rest {
                [] => store::verify::Subset::All,
                ["--read-data-subset", s] => store::verify::Subset::parse(s)
                    .unwrap_or_else(|e| die(format!("--read-data-subset {e}"))),
                _ => usage(),
            };
            let rep = check::check(&data_dir(), database_url().as_deref(), repo, subset)
                .unwrap_or_else(|e| die(e));
            for w in &rep.warnings {
                println!("warning: {w}");
            }
            for e in &rep.errors {
                println!("ERROR: {e}");
            }
            if !rep.damaged_versions.is_empty() {
                let ids: Vec<String> = rep.damaged_versions.iter().map(|v| v.to_string()).collect();
                println!("damaged versions: {}", ids.join(", "));
            }
            println!(
                "{}: {} containers ({} read), {} chunks ({} bytes) verified, {} versions, {} errors, {} warnings",
                if rep.errors.is_empty() { "OK" } else { "FAILED" },
                rep.containers,
                rep.containers_read,
                rep.chunks,
                rep.bytes,
                rep.versions,
                rep.errors.len(),
                rep.warnings.len()
            );
            std::process::exit(if rep.errors.is_empty() { 0 } else { 1 });
        }
        ["forget", repo, rest @ ..] => {
            let (policy, rest) =
                store::retention::Policy::from_args(rest).unwrap_or_else(|e| die(e));
            let (mut dry_run, mut source, mut ids) = (false, None, Vec::new());
            let mut i = 0;
            while i < rest.len() {
                match (rest[i], rest.get(i + 1)) {
                    ("--dry-run", _) => dry_run = true,
                    ("--source", Some(s)) => {
                        source = Some(s.to_string());
                        i += 1;
                    }
                    ("--version", Some(v)) => {
                        ids.push(
                            v.parse::<i64>().ok().filter(|v| *v > 0).unwrap_or_else(|| {
                                die(format!("--version {v:?}: not a version id"))
                            }),
                        );
                        i += 1;
                    }
                    _ => usage(),
                }
                i += 1;
            }
            let sel = match (policy.is_empty(), ids.is_empty()) {
                (false, true) => store::expiry::Selector::Policy { policy, source },
                (true, false) if source.is_none() => store::expiry::Selector::Versions(ids),
                _ => die("give keep rules (--keep-last N, ...) or --version ID, not both and not neither"),
            };
            let (st, id, _lock) = maintenance_store(repo);
            let rep = st.forget(id, &sel, dry_run).unwrap_or_else(|e| die(e));
            println!("{}", serde_json::to_string_pretty(&rep).unwrap_or_default());
        }
        ["prune", repo, rest @ ..] => {
            let dry_run = match rest {
                [] => false,
                ["--dry-run"] => true,
                _ => usage(),
            };
            let (st, id, _lock) = maintenance_store(repo);
            let rep = st
                .prune(id, dry_run, store::gc::Sweep::Full)
                .unwrap_or_else(|e| die(e));
            println!("{}", serde_json::to_string_pretty(&rep).unwrap_or_default());
        }
        ["stats", repo] => {
            let (ix, _) = open_index();
            let snap = ix.snapshot().unwrap_or_else(|e| die(e));
            let id = existing_repo(&*snap, repo);
            let s = store::repo_stats(&*snap, id, repo).unwrap_or_else(|e| die(e));
            println!("{}", serde_json::to_string_pretty(&s).unwrap_or_default());
        }
        ["help" | "--help" | "-h"] => println!("{}", usage_text()),
        _ => usage(),
    }
}

/// The lock that makes one process the writer of a data directory (`serve`, and the CLI's
/// forget and prune, which delete data: they need the server stopped, or go through it).
fn lock_data_dir(data_dir: &std::path::Path) -> Result<std::fs::File, String> {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(data_dir.join("server.lock"))
        .map_err(|e| format!("cannot create the lock file: {e}"))?;
    lock.try_lock().map_err(|_| {
        format!(
            "another ditto-server is already serving {}",
            data_dir.display()
        )
    })?;
    Ok(lock)
}

/// The store opened for a CLI maintenance command, with the data directory locked.
fn maintenance_store(repo: &str) -> (store::Store, i64, std::fs::File) {
    let dir = data_dir();
    let lock = lock_data_dir(&dir).unwrap_or_else(|e| {
        die(format!(
            "{e}: stop it first, or use the page (Versions) or POST /api/v1/repos/{repo}/forget"
        ))
    });
    let st = store::Store::open(&dir, database_url().as_deref()).unwrap_or_else(|e| die(e));
    let id = st
        .with_tx(|tx| store::repo_id(tx, repo))
        .unwrap_or_else(|e| die(e))
        .unwrap_or_else(|| die(format!("no repository named {repo:?}")));
    (st, id, lock)
}

fn serve() {
    let port: u16 = env_or("PORT", "8080")
        .parse()
        .unwrap_or_else(|_| die("PORT must be a number from 0 to 65535"));
    let header_timeout = timeout_env("HEADER_TIMEOUT", api::DEFAULT_BODY_IDLE);
    let send_timeout = timeout_env("SEND_TIMEOUT", api::DEFAULT_SEND_STALL);
    let search_slots = std::env::var("DITTO_SEARCH_SLOTS")
        .ok()
        .filter(|v| !v.is_empty())
        .map_or(Some(api::DEFAULT_SEARCH_SLOTS), |v| v.parse().ok())
        .filter(|&n| (1..=64).contains(&n))
        .unwrap_or_else(|| die("DITTO_SEARCH_SLOTS must be a whole number from 1 to 64"));
    // A write past a file size limit fails with EFBIG (answered 507) instead of killing
    // the process.
    // SAFETY: ignoring a signal installs no handler code.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let data_dir = data_dir();
    // One server per data directory: containers are appended by a single writer.
    let lock = lock_data_dir(&data_dir).unwrap_or_else(|e| die(e));
    let web_dir = PathBuf::from(env_or("WEB_DIR", "web/dist"));
    let store = Arc::new(
        store::Store::open(&data_dir, database_url().as_deref()).unwrap_or_else(|e| die(e)),
    );
    let stop_store = store.clone();
    let token = default_token(&data_dir)
        .unwrap_or_else(|e| die(format!("cannot create the default token: {e}")));
    store
        .with_tx(|tx| {
            let id = match store::repo_id(tx, "default")? {
                Some(id) => id,
                None => store::create_repo(tx, "default")?,
            };
            store::add_token(tx, id, &token, store::Scope::Full)
        })
        .unwrap_or_else(|e| die(format!("cannot create the default repository: {e}")));
    // Finish any layout work and delta pass a stopped server left.
    for repo_id in store.repo_ids().unwrap_or_else(|e| die(e)) {
        store::mover::kick(&store, repo_id);
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| die(e));
    rt.block_on(async move {
        let spa = ServeDir::new(&web_dir).fallback(ServeFile::new(web_dir.join("index.html")));
        let app = api::router(store, search_slots)
            .fallback_service(spa)
            .layer(http::compression())
            .layer(CatchPanicLayer::custom(|_| {
                error::ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "internal server error",
                )
                .into_response()
            }));
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .unwrap_or_else(|e| die(format!("cannot listen on {addr}: {e}")));
        let addr = listener.local_addr().unwrap_or(addr);
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "Ditto is running. Open http://{addr}/#token={token}");
        let _ = out.flush();
        drop(out);
        let _ = api::BODY_IDLE.set(header_timeout);
        let _ = api::SEND_STALL.set(send_timeout);
        http::serve(listener, app, header_timeout, stop_requested(), STOP_GRACE).await;
    });
    // Requests still running on blocking threads are not waited for: what they had not
    // acknowledged is not promised, and startup recovery cuts what they left half-written.
    rt.shutdown_timeout(Duration::ZERO);
    if let Err(e) = stop_store.checkpoint() {
        eprintln!("ditto-server: could not fold the write-ahead log into the database: {e}");
    }
    drop(lock);
}

/// How long open connections (a download, say) get to finish once a stop is requested.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Resolves on SIGTERM or SIGINT.
async fn stop_requested() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => die(format!("cannot listen for SIGTERM: {e}")),
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
