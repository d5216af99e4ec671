//! HTTP API v1 (docs/API.md).

use std::{collections::HashMap, collections::HashSet, fs::File, sync::Arc};

use axum::{
    body::Body,
    extract::{rejection::PathRejection, Path, Query, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use rusqlite::{params, OptionalExtension};
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_core::{
    format::{
        bundle::{
            decode_bundle, encode_entry_header, encode_header, Codec, EntryHeader,
            MAX_BUNDLE_BYTES, MAX_BUNDLE_CHUNKS,
        },
        manifest::{validate_path, EntryKind, Manifest, MAX_ENTRIES, MAX_SOURCE_BYTES},
        parse_fp_hex,
    },
    hash::{to_hex, Fingerprint, FINGERPRINT_LEN},
};

use crate::{
    error::{ApiError, ApiResult},
    store::{self, auth::TokenAccess, verify::Subset, ChunkLoc, Lookup, Store, StoreError},
};

pub const MAX_MISSING_BODY: usize = 16 << 20;
pub const MAX_MISSING_FPS: usize = 200_000;
pub const MAX_GET_BODY: usize = 4 << 20;
pub const MAX_GET_FPS: usize = 65_536;
pub const MAX_MANIFEST_BODY: usize = 256 << 20;
/// Beyond the limit, bodies are read and discarded up to this size so that the client
/// still receives its 413; larger ones are cut off.
const DRAIN_CAP: usize = 64 << 20;
/// `chunks/get` reads and verifies up to this many bytes of its answer before it sends the
/// status, so that a damaged chunk among them gets an explicit `damaged` error (every
/// request the page makes is smaller). Damage found later can only cut the stream.
const VERIFY_AHEAD: usize = 16 << 20;

type St = State<Arc<Store>>;
type RepoPath = Result<Path<String>, PathRejection>;
type RepoItemPath = Result<Path<(String, String)>, PathRejection>;

pub fn router(store: Arc<Store>) -> Router {
    let repo = Router::new()
        .route("/chunks/missing", post(missing))
        .route("/chunks/lengths", post(lengths))
        .route("/chunks/get", post(chunks_get))
        .route("/chunks/{fp}", get(chunk_get))
        .route("/bundles", post(bundles))
        .route("/versions", get(versions_list).post(versions_post))
        .route("/versions/{id}", get(version_get).delete(version_delete))
        .route("/containers", get(containers_list))
        .route("/containers/{id}", get(container_get))
        .route("/verify", post(verify))
        .route("/stats", get(stats))
        .route("/token", get(token_info));
    Router::new()
        .route("/api/v1/health", get(health))
        .route("/api/v1/openapi.json", get(openapi))
        .nest("/api/v1/repos/{repo}", repo)
        .route("/api/{*rest}", axum::routing::any(api_not_found))
        .route("/api", axum::routing::any(api_not_found))
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(store)
}

async fn health() -> Json<Value> {
    Json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("openapi.json"),
    )
        .into_response()
}

async fn api_not_found() -> ApiError {
    ApiError::not_found("no such API endpoint")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this endpoint",
    )
}

// ---------------------------------------------------------------- helpers

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(format!("worker failed: {e}")))?
}

fn path_param<T>(p: Result<Path<T>, PathRejection>) -> ApiResult<T> {
    p.map(|Path(v)| v)
        .map_err(|e| ApiError::bad_request(format!("bad path: {e}")))
}

/// Authenticates the bearer token for `repo`; returns the repository id.
/// What an operation needs of the presented token's scope (docs/API.md, Authentication).
#[derive(Clone, Copy)]
enum Need {
    /// Any valid token of the repository.
    Any,
    Backup,
    ReadData,
    Browse,
    Delete,
}

async fn authorize(
    store: &Arc<Store>,
    headers: &HeaderMap,
    repo: &str,
    need: Need,
) -> ApiResult<TokenAccess> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty() && t.len() <= 256)
        .ok_or_else(|| {
            ApiError::unauthorized("missing or malformed Authorization: Bearer <token> header")
        })?
        .to_string();
    let store = store.clone();
    let repo = repo.to_string();
    blocking(move || {
        let conn = store.readers.get()?;
        let access = store::token_access(&conn, &token)?
            .ok_or_else(|| ApiError::unauthorized("unknown token"))?;
        let id = store::repo_id(&conn, &repo)?
            .ok_or_else(|| ApiError::not_found(format!("no repository named {repo:?}")))?;
        if access.repo_id != id {
            return Err(forbidden(format!(
                "this token does not give access to repository {repo:?}"
            )));
        }
        let scope = access.scope;
        let (allowed, what) = match need {
            Need::Any => (true, ""),
            Need::Backup => (scope.can_backup(), "upload or commit"),
            Need::ReadData => (scope.can_read_data(), "read stored data"),
            Need::Browse => (scope.can_browse(), "see the whole repository"),
            Need::Delete => (scope.can_delete(), "delete"),
        };
        if !allowed {
            return Err(forbidden(format!(
                "this {} token may not {what}; {}",
                scope.as_str(),
                scope.describe()
            )));
        }
        Ok(access)
    })
    .await
}

fn forbidden(msg: String) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "forbidden", msg)
}

/// What the presented token may do, for the page to show and to offer only what works.
async fn token_info(
    State(store): St,
    repo: RepoPath,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let repo = path_param(repo)?;
    let access = authorize(&store, &headers, &repo, Need::Any).await?;
    let s = access.scope;
    Ok(Json(json!({
        "repo": repo,
        "scope": s.as_str(),
        "id": access.id,
        "can": {
            "backup": s.can_backup(),
            "restore": s.can_read_data(),
            "delete": s.can_delete(),
            "browse": s.can_browse(),
        },
        "describe": s.describe(),
    })))
}

/// How long a request body may pause between two pieces (`HEADER_TIMEOUT`, set once at
/// start by `main`).
pub static BODY_IDLE: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
const DEFAULT_BODY_IDLE: std::time::Duration = std::time::Duration::from_secs(30);

/// Reads a request body of at most `limit` bytes (413 otherwise).
async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> ApiResult<Bytes> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || {
        ApiError::too_large(
            format!("request body larger than {limit} bytes"),
            limit as u64,
        )
    };
    // A declared length above the limit is refused without reading; within the limit the
    // body is read whatever its size (a manifest may be 256 MiB).
    if declared.is_some_and(|n| n > limit as u64 && n > DRAIN_CAP as u64) {
        return Err(too_large());
    }
    let mut stream = body.into_data_stream();
    let mut buf =
        BytesMut::with_capacity(declared.map_or(64 << 10, |n| n.min(limit as u64) as usize));
    let mut total = 0usize;
    let idle = *BODY_IDLE.get().unwrap_or(&DEFAULT_BODY_IDLE);
    loop {
        // A client that stops sending in the middle of a body would hold the connection (and
        // a buffer) forever: each piece must arrive within the idle time.
        let Ok(next) = tokio::time::timeout(idle, stream.next()).await else {
            return Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                format!(
                    "no part of the request body arrived for {} s",
                    idle.as_secs()
                ),
            ));
        };
        let Some(frame) = next else {
            break;
        };
        let chunk = frame.map_err(|e| ApiError::bad_request(format!("reading body: {e}")))?;
        total += chunk.len();
        if total > limit {
            if total > DRAIN_CAP {
                break;
            }
            continue;
        }
        buf.extend_from_slice(&chunk);
    }
    if total > limit {
        return Err(too_large());
    }
    Ok(buf.freeze())
}

fn parse_fp(s: &str) -> ApiResult<Fingerprint> {
    parse_fp_hex(s)
        .ok_or_else(|| ApiError::bad_request(format!("not a 40-hex-digit fingerprint: {s:?}")))
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))
}

#[derive(Deserialize)]
struct FpList {
    fingerprints: Vec<String>,
    #[serde(default)]
    decode: bool,
}

// ---------------------------------------------------------------- chunks

/// A fingerprint list from a `chunks/missing` or `chunks/lengths` body: N x 20 bytes when
/// `binary`, else JSON `{"fingerprints": [hex, ...]}`; at most MAX_MISSING_FPS.
fn fp_list(body: &[u8], binary: bool) -> ApiResult<Vec<Fingerprint>> {
    let fps: Vec<Fingerprint> = if binary {
        if !body.len().is_multiple_of(FINGERPRINT_LEN) {
            return Err(ApiError::bad_request(
                "binary body length is not a multiple of 20",
            ));
        }
        body.chunks_exact(FINGERPRINT_LEN)
            .map(|c| c.try_into().unwrap())
            .collect()
    } else {
        let list: FpList = parse_json(body)?;
        if list.fingerprints.len() > MAX_MISSING_FPS {
            return Err(ApiError::too_large(
                format!("more than {MAX_MISSING_FPS} fingerprints"),
                MAX_MISSING_FPS as u64,
            ));
        }
        list.fingerprints
            .iter()
            .map(|s| parse_fp(s))
            .collect::<ApiResult<_>>()?
    };
    if fps.len() > MAX_MISSING_FPS {
        return Err(ApiError::too_large(
            format!("more than {MAX_MISSING_FPS} fingerprints"),
            MAX_MISSING_FPS as u64,
        ));
    }
    Ok(fps)
}

fn is_binary(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/octet-stream"))
}

/// The shared front of `chunks/missing` and `chunks/lengths`: authorizes, reads the
/// fingerprint list (binary or JSON) and answers with `answer(store, repo_id, fps, binary)`
/// on a blocking thread.
async fn fp_query(
    store: Arc<Store>,
    repo: RepoPath,
    headers: HeaderMap,
    body: Body,
    answer: fn(&Store, i64, Vec<Fingerprint>, bool) -> ApiResult<Response>,
) -> ApiResult<Response> {
    let repo = path_param(repo)?;
    let repo_id = authorize(&store, &headers, &repo, Need::Any).await?.repo_id;
    let binary = is_binary(&headers);
    let body = read_body(&headers, body, MAX_MISSING_BODY).await?;
    blocking(move || answer(&store, repo_id, fp_list(&body, binary)?, binary)).await
}

fn octets(bytes: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
}

async fn missing(
    State(store): St,
    repo: RepoPath,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    fp_query(store, repo, headers, body, |store, repo_id, fps, binary| {
        let out = store.missing(repo_id, fps)?;
        Ok(if binary {
            octets(out.concat())
        } else {
            let hex: Vec<String> = out.iter().map(to_hex).collect();
            Json(json!({ "missing": hex })).into_response()
        })
    })
    .await
}

async fn lengths(
    State(store): St,
    repo: RepoPath,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    fp_query(store, repo, headers, body, |store, repo_id, fps, binary| {
        let out = store.raw_lengths(repo_id, &fps)?;
        Ok(if binary {
            octets(out.iter().flat_map(|n| n.to_le_bytes()).collect())
        } else {
            Json(json!({ "lengths": out })).into_response()
        })
    })
    .await
}

async fn bundles(
    State(store): St,
    repo: RepoPath,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Value>> {
    let repo = path_param(repo)?;
    let repo_id = authorize(&store, &headers, &repo, Need::Backup)
        .await?
        .repo_id;
    let body = read_body(&headers, body, MAX_BUNDLE_BYTES).await?;
    blocking(move || {
        let entries = decode_bundle(&body).map_err(|e| {
            if e.is_too_large() {
                ApiError::too_large(
                    format!("bundle: {e}"),
                    if matches!(e, wasm_core::format::bundle::BundleError::TooManyChunks(_)) {
                        MAX_BUNDLE_CHUNKS as u64
                    } else {
                        wasm_core::format::bundle::MAX_CHUNK_RAW as u64
                    },
                )
            } else {
                ApiError::bad_request(format!("malformed bundle: {e}"))
            }
        })?;
        store::verify_entries(&entries)?;
        let r = store.ingest(repo_id, &entries)?;
        Ok(Json(serde_json::to_value(r).map_err(ApiError::internal)?))
    })
    .await
}

async fn chunk_get(State(store): St, p: RepoItemPath, headers: HeaderMap) -> ApiResult<Response> {
    let (repo, fp) = path_param(p)?;
    let repo_id = authorize(&store, &headers, &repo, Need::ReadData)
        .await?
        .repo_id;
    let fp = parse_fp(&fp)?;
    blocking(move || {
        let lookup = {
            let conn = store.readers.get()?;
            store.lookup(&conn, repo_id, &fp)?
        };
        let loc = match lookup {
            Lookup::Stored(loc) => loc,
            Lookup::Damaged => return Err(StoreError::Damaged(vec![fp]).into()),
            Lookup::Missing => {
                return Err(ApiError::not_found(format!(
                    "chunk {} is not stored",
                    to_hex(&fp)
                )))
            }
        };
        let (_, raw) = store.read_verified(repo_id, &fp, &loc, None, true)?;
        let mut resp = raw.into_response();
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        h.insert("x-ditto-raw-length", HeaderValue::from(loc.raw_len));
        if let Ok(v) = HeaderValue::from_str(&format!("\"{}\"", to_hex(&fp))) {
            h.insert(header::ETAG, v);
        }
        Ok(resp)
    })
    .await
}

async fn chunks_get(
    State(store): St,
    repo: RepoPath,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let repo = path_param(repo)?;
    let repo_id = authorize(&store, &headers, &repo, Need::ReadData)
        .await?
        .repo_id;
    let body = read_body(&headers, body, MAX_GET_BODY).await?;
    let (locs, decode) = {
        let store = store.clone();
        blocking(move || {
            let list: FpList = parse_json(&body)?;
            if list.fingerprints.len() > MAX_GET_FPS {
                return Err(ApiError::too_large(
                    format!("more than {MAX_GET_FPS} fingerprints"),
                    MAX_GET_FPS as u64,
                ));
            }
            let conn = store.readers.get()?;
            let mut locs: Vec<(Fingerprint, ChunkLoc)> =
                Vec::with_capacity(list.fingerprints.len());
            let mut missing = Vec::new();
            let mut damaged = Vec::new();
            for s in &list.fingerprints {
                let fp = parse_fp(s)?;
                match store.lookup(&conn, repo_id, &fp)? {
                    Lookup::Stored(l) => locs.push((fp, l)),
                    Lookup::Damaged => damaged.push(fp),
                    Lookup::Missing => missing.push(to_hex(&fp)),
                }
            }
            if !damaged.is_empty() {
                return Err(ApiError::from(StoreError::Damaged(damaged)).with("missing", missing));
            }
            if !missing.is_empty() {
                return Err(ApiError::not_found(format!(
                    "{} requested chunk(s) are not stored",
                    missing.len()
                ))
                .with("missing", missing));
            }
            Ok((locs, list.decode))
        })
        .await?
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Piece>(4);
    tokio::task::spawn_blocking(move || {
        let mut files: HashMap<u64, File> = HashMap::new();
        let mut buf = BytesMut::with_capacity(512 << 10);
        buf.extend_from_slice(&encode_header(locs.len() as u32));
        let mut sent = false;
        for (fp, loc) in locs {
            let res = (|| -> Result<(u8, Vec<u8>), StoreError> {
                if !files.contains_key(&loc.container_id) {
                    if files.len() > 64 {
                        files.clear();
                    }
                    match File::open(store::container_path(
                        &store.data_dir,
                        repo_id,
                        loc.container_id,
                    )) {
                        Ok(f) => {
                            files.insert(loc.container_id, f);
                        }
                        // read_verified finds the file missing and quarantines.
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                store.read_verified(repo_id, &fp, &loc, files.get(&loc.container_id), decode)
            })();
            let (codec, payload) = match res {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("chunks/get: {e}");
                    let _ = tx.blocking_send(Piece::Failed(e));
                    return;
                }
            };
            let h = EntryHeader {
                fp,
                codec: Codec::from_u8(codec).unwrap_or(Codec::Raw),
                raw_len: loc.raw_len,
                stored_len: payload.len() as u32,
            };
            buf.extend_from_slice(&encode_entry_header(&h));
            buf.extend_from_slice(&payload);
            let send_at = if sent { 256 << 10 } else { VERIFY_AHEAD };
            if buf.len() >= send_at {
                sent = true;
                if tx.blocking_send(Piece::Data(buf.split().freeze())).is_err() {
                    return; // client went away
                }
            }
        }
        if !buf.is_empty() {
            let _ = tx.blocking_send(Piece::Data(buf.freeze()));
        }
    });
    // The status waits for the first piece: everything up to VERIFY_AHEAD is verified.
    let first = match rx.recv().await {
        Some(Piece::Data(b)) => b,
        Some(Piece::Failed(e)) => return Err(e.into()),
        None => return Err(ApiError::internal("chunks/get: the reader stopped")),
    };
    let rest = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|piece| {
            let item = match piece {
                Piece::Data(b) => Ok(b),
                // Too late for a status: the connection is cut, the client sees a truncated
                // bundle, and its retry gets the explicit error (the chunk is quarantined).
                Piece::Failed(e) => Err(std::io::Error::other(e.to_string())),
            };
            (item, rx)
        })
    });
    let stream =
        futures_util::stream::once(async move { Ok::<_, std::io::Error>(first) }).chain(rest);
    Ok((
        [(header::CONTENT_TYPE, "application/x-ditto-bundle")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// What the `chunks/get` reader hands to the response.
enum Piece {
    Data(Bytes),
    Failed(StoreError),
}

#[derive(Deserialize, Default)]
struct VerifyRequest {
    #[serde(default)]
    subset: Option<String>,
}

/// `POST verify`: reads and verifies the repository's stored chunks (all, or a subset of its
/// containers), quarantines the damaged ones and says which versions are damaged.
async fn verify(
    State(store): St,
    repo: RepoPath,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Value>> {
    let repo = path_param(repo)?;
    let repo_id = authorize(&store, &headers, &repo, Need::ReadData)
        .await?
        .repo_id;
    let body = read_body(&headers, body, 64 << 10).await?;
    blocking(move || {
        let req: VerifyRequest = if body.iter().all(u8::is_ascii_whitespace) {
            VerifyRequest::default()
        } else {
            parse_json(&body)?
        };
        let subset = Subset::parse(req.subset.as_deref().unwrap_or("all"))
            .map_err(|e| ApiError::bad_request(format!("subset: {e}")))?;
        let v = store.verify(repo_id, subset)?;
        let conn = store.readers.get()?;
        let mut st = conn.prepare_cached(
            "SELECT id, damaged FROM versions WHERE repo_id = ?1 AND damaged > 0 ORDER BY id",
        )?;
        let versions: Vec<Value> = st
            .query_map([repo_id], |r| {
                Ok(json!({ "id": r.get::<_, i64>(0)?, "damaged_chunks": r.get::<_, i64>(1)? }))
            })?
            .collect::<Result<_, _>>()?;
        let quarantined: i64 = conn.query_row(
            "SELECT COUNT(DISTINCT fp) FROM quarantine WHERE repo_id = ?1 AND healed_ms IS NULL",
            [repo_id],
            |r| r.get(0),
        )?;
        let found: Vec<String> = v.damaged.iter().map(|f| to_hex(&f.fp)).collect();
        Ok(Json(json!({
            "ok": found.is_empty() && versions.is_empty() && quarantined == 0,
            "subset": req.subset.unwrap_or_else(|| "all".into()),
            "containers": v.containers,
            "chunks": v.chunks,
            "bytes": v.bytes,
            "damaged_chunks": found,
            "quarantined": quarantined,
            "damaged_versions": versions,
        })))
    })
    .await
}

// ---------------------------------------------------------------- versions

fn validate_manifest(m: &mut Manifest) -> ApiResult<Vec<Vec<Fingerprint>>> {
    if m.source.is_empty() || m.source.len() > MAX_SOURCE_BYTES {
        return Err(ApiError::bad_request("source must be 1 to 256 bytes"));
    }
    if m.entries.len() > MAX_ENTRIES {
        return Err(ApiError::too_large(
            format!("more than {MAX_ENTRIES} entries"),
            MAX_ENTRIES as u64,
        ));
    }
    let mut paths = HashSet::with_capacity(m.entries.len());
    let mut recipes = Vec::with_capacity(m.entries.len());
    for e in &mut m.entries {
        validate_path(&e.path).map_err(|why| {
            ApiError::bad_request(format!("{:?}: {why}", e.path)).with("path", e.path.clone())
        })?;
        if !paths.insert(e.path.as_str()) {
            return Err(
                ApiError::bad_request(format!("duplicate path {:?}", e.path))
                    .with("path", e.path.clone()),
            );
        }
        if e.kind != EntryKind::File && (e.size != 0 || !e.recipe.is_empty()) {
            return Err(ApiError::bad_request(format!(
                "{:?}: dirs and symlinks have size 0 and an empty recipe",
                e.path
            ))
            .with("path", e.path.clone()));
        }
        let mut fps = Vec::with_capacity(e.recipe.len());
        for s in &mut e.recipe {
            let fp = parse_fp(s)?;
            s.make_ascii_lowercase();
            fps.push(fp);
        }
        recipes.push(fps);
    }
    Ok(recipes)
}

async fn versions_post(
    State(store): St,
    repo: RepoPath,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let repo = path_param(repo)?;
    let access = authorize(&store, &headers, &repo, Need::Backup).await?;
    let repo_id = access.repo_id;
    let body = read_body(&headers, body, MAX_MANIFEST_BODY).await?;
    let v = blocking(move || {
        let mut m: Manifest = parse_json(&body)?;
        drop(body);
        let recipes = validate_manifest(&mut m)?;
        store.commit_version(repo_id, &m, &recipes, &access.id)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(v)).into_response())
}

/// A version's summary; `damaged` counts its distinct chunks that are not stored (found
/// damaged, or lost): such a version cannot be restored whole until they are uploaded again.
fn version_summary(
    id: i64,
    source: String,
    time: i64,
    committed: i64,
    stats: &str,
    damaged: i64,
) -> Value {
    let stats: Value = serde_json::from_str(stats).unwrap_or(Value::Null);
    json!({ "id": id, "source": source, "time": time, "committed_at": committed, "stats": stats,
            "damaged": damaged > 0, "damaged_chunks": damaged.max(0) })
}

async fn versions_list(
    State(store): St,
    repo: RepoPath,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let repo = path_param(repo)?;
    let access = authorize(&store, &headers, &repo, Need::Any).await?;
    let repo_id = access.repo_id;
    blocking(move || {
        let conn = store.readers.get()?;
        // A token that may not browse sees only the versions it committed.
        let own = (!access.scope.can_browse()).then_some(access.id);
        let mut st = conn.prepare_cached(
            "SELECT id, source, time, committed_ms, stats, damaged FROM versions
             WHERE repo_id = ?1 AND (?2 IS NULL OR token_id = ?2) ORDER BY id",
        )?;
        let rows = st.query_map(params![repo_id, own], |r| {
            Ok(version_summary(
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                &r.get::<_, String>(4)?,
                r.get(5)?,
            ))
        })?;
        let list: Vec<Value> = rows.collect::<Result<_, _>>()?;
        Ok(Json(json!({ "versions": list })))
    })
    .await
}

fn parse_id(s: &str, what: &str) -> ApiResult<i64> {
    s.parse::<i64>()
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| ApiError::bad_request(format!("{what} id must be a positive integer")))
}

async fn version_get(State(store): St, p: RepoItemPath, headers: HeaderMap) -> ApiResult<Response> {
    let (repo, id) = path_param(p)?;
    let access = authorize(&store, &headers, &repo, Need::Any).await?;
    let repo_id = access.repo_id;
    let id = parse_id(&id, "version")?;
    blocking(move || {
        let conn = store.readers.get()?;
        let row = conn
            .prepare_cached(
                "SELECT source, time, committed_ms, stats, manifest, damaged, token_id FROM versions WHERE id = ?1 AND repo_id = ?2",
            )?
            .query_row(params![id, repo_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get::<_, String>(3)?, r.get::<_, Vec<u8>>(4)?, r.get::<_, i64>(5)?, r.get::<_, Option<String>>(6)?))
            })
            .optional()?
            .ok_or_else(|| ApiError::not_found(format!("no version {id} in this repository")))?;
        let (source, time, committed, stats, blob, damaged, owner) = row;
        if !access.scope.can_browse() && owner.as_deref() != Some(access.id.as_str()) {
            return Err(forbidden(format!(
                "version {id} was committed with another token; {}",
                access.scope.describe()
            )));
        }
        let manifest = zstd::decode_all(&blob[..]).map_err(ApiError::internal)?;
        let head = serde_json::to_vec(&version_summary(id, source, time, committed, &stats, damaged))
            .map_err(ApiError::internal)?;
        let mut out = Vec::with_capacity(head.len() + manifest.len() + 16);
        out.extend_from_slice(&head[..head.len() - 1]);
        out.extend_from_slice(b",\"manifest\":");
        out.extend_from_slice(&manifest);
        out.push(b'}');
        Ok(([(header::CONTENT_TYPE, "application/json")], out).into_response())
    })
    .await
}

async fn version_delete(
    State(store): St,
    p: RepoItemPath,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let (repo, id) = path_param(p)?;
    let repo_id = authorize(&store, &headers, &repo, Need::Delete)
        .await?
        .repo_id;
    let id = parse_id(&id, "version")?;
    blocking(move || {
        if store.delete_version(repo_id, id)? {
            Ok(Json(json!({ "deleted": id })))
        } else {
            Err(ApiError::not_found(format!(
                "no version {id} in this repository"
            )))
        }
    })
    .await
}

// ---------------------------------------------------------------- containers and stats

#[derive(Deserialize)]
struct ContainersQuery {
    chunks: Option<bool>,
}

async fn containers_list(
    State(store): St,
    repo: RepoPath,
    headers: HeaderMap,
    q: Result<Query<ContainersQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Value>> {
    let repo = path_param(repo)?;
    let repo_id = authorize(&store, &headers, &repo, Need::ReadData)
        .await?
        .repo_id;
    let with_chunks = q
        .map_err(|e| ApiError::bad_request(format!("bad query: {e}")))?
        .chunks
        .unwrap_or(true);
    blocking(move || {
        let conn = store.readers.get()?;
        let tx = conn.unchecked_transaction()?; // one snapshot for both queries
        let mut tables: HashMap<i64, Vec<Value>> = HashMap::new();
        if with_chunks {
            let mut st = tx.prepare_cached(
                "SELECT container_id, fp, codec, offset, stored_len, raw_len FROM chunks WHERE repo_id = ?1 ORDER BY container_id, slot",
            )?;
            let mut rows = st.query([repo_id])?;
            while let Some(r) = rows.next()? {
                let fp: Vec<u8> = r.get(1)?;
                let fp: Fingerprint = fp.try_into().unwrap_or([0; 20]);
                tables.entry(r.get(0)?).or_default().push(json!({
                    "fp": to_hex(&fp), "codec": r.get::<_, u8>(2)?, "offset": r.get::<_, i64>(3)?,
                    "stored_len": r.get::<_, u32>(4)?, "raw_len": r.get::<_, u32>(5)?,
                }));
            }
        }
        let mut st = tx.prepare_cached(
            "SELECT id, kind, newest_version, data_offset, data_end FROM containers WHERE repo_id = ?1 ORDER BY id",
        )?;
        let mut rows = st.query([repo_id])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let id: i64 = r.get(0)?;
            let kind: u8 = r.get(1)?;
            let mut c = json!({
                "id": id, "kind": if kind == 1 { "archival" } else { "active" },
                "newest_version": r.get::<_, i64>(2)?, "data_offset": r.get::<_, i64>(3)?,
                "size": r.get::<_, i64>(4)?,
            });
            if with_chunks {
                c["chunks"] = Value::Array(tables.remove(&id).unwrap_or_default());
            }
            out.push(c);
        }
        Ok(Json(json!({ "containers": out })))
    })
    .await
}

/// Parses a single-range `Range` header against a body of `len` bytes: inclusive bounds,
/// `Ok(None)` to serve the whole body, `Err` for an unsatisfiable range.
fn parse_range(h: &str, len: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = h.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let (a, b) = spec.split_once('-').ok_or(())?;
    let (a, b) = (a.trim(), b.trim());
    if len == 0 {
        return Err(());
    }
    if a.is_empty() {
        let n: u64 = b.parse().map_err(|_| ())?;
        if n == 0 {
            return Err(());
        }
        return Ok(Some((len.saturating_sub(n), len - 1)));
    }
    let start: u64 = a.parse().map_err(|_| ())?;
    let end: u64 = if b.is_empty() {
        len - 1
    } else {
        b.parse::<u64>().map_err(|_| ())?.min(len - 1)
    };
    if start >= len || end < start {
        return Err(());
    }
    Ok(Some((start, end)))
}

async fn container_get(
    State(store): St,
    p: RepoItemPath,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let (repo, id) = path_param(p)?;
    let repo_id = authorize(&store, &headers, &repo, Need::ReadData)
        .await?
        .repo_id;
    let id = parse_id(&id, "container")?;
    let range = headers
        .get(header::RANGE)
        .map(|v| v.to_str().unwrap_or("").to_string());
    blocking(move || {
        let size: i64 = {
            let conn = store.readers.get()?;
            let row: Option<i64> = conn
                .prepare_cached("SELECT data_end FROM containers WHERE id = ?1 AND repo_id = ?2")?
                .query_row(params![id, repo_id], |r| r.get(0))
                .optional()?;
            row.ok_or_else(|| ApiError::not_found(format!("no container {id} in this repository")))?
        };
        let len = size as u64;
        let r = match &range {
            None => None,
            Some(h) => parse_range(h, len).map_err(|_| {
                ApiError::new(
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    "range_not_satisfiable",
                    format!("range {h:?} not satisfiable for {len} bytes"),
                )
                .with("size", len)
            })?,
        };
        let (start, end) = r.unwrap_or((0, len.saturating_sub(1)));
        let n = if len == 0 { 0 } else { end - start + 1 };
        let mut buf = vec![0u8; n as usize];
        use std::os::unix::fs::FileExt;
        File::open(store::container_path(&store.data_dir, repo_id, id as u64))?
            .read_exact_at(&mut buf, start)?;
        let mut resp = buf.into_response();
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        if r.is_some() {
            *resp.status_mut() = StatusCode::PARTIAL_CONTENT;
            if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{end}/{len}")) {
                resp.headers_mut().insert(header::CONTENT_RANGE, v);
            }
        }
        Ok(resp)
    })
    .await
}

async fn stats(State(store): St, repo: RepoPath, headers: HeaderMap) -> ApiResult<Json<Value>> {
    let repo = path_param(repo)?;
    let repo_id = authorize(&store, &headers, &repo, Need::Browse)
        .await?
        .repo_id;
    blocking(move || {
        let conn = store.readers.get()?;
        Ok(Json(store::repo_stats(&conn, repo_id, &repo)?))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Ok(Some((0, 9))));
        assert_eq!(parse_range("bytes=90-", 100), Ok(Some((90, 99))));
        assert_eq!(parse_range("bytes=-10", 100), Ok(Some((90, 99))));
        assert_eq!(parse_range("bytes=50-500", 100), Ok(Some((50, 99))));
        assert_eq!(parse_range("bytes=100-", 100), Err(()));
        assert_eq!(parse_range("bytes=5-2", 100), Err(()));
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Ok(None));
        assert_eq!(parse_range("items=0-1", 100), Ok(None));
        assert_eq!(parse_range("bytes=x-1", 100), Err(()));
    }
}
