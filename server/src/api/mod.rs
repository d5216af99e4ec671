//! HTTP API v1 (docs/API.md). Handlers parse the request, call the store, and encode its
//! answer; the store's errors become statuses in `crate::error`. This module holds the
//! router and what every handler shares: authentication, body reading, parameter parsing.
//! One module per resource: `chunks`, `bundles`, `versions`, `containers`, `verify`,
//! `stats`, `token`.

mod bundles;
mod chunks;
mod containers;
mod maintenance;
mod search;
mod search_turns;
mod stats;
mod token;
mod verify;
mod versions;

use std::{marker::PhantomData, sync::Arc};

use axum::{
    body::Body,
    extract::{rejection::PathRejection, FromRequestParts, Path, RawPathParams, State},
    http::{header, request::Parts, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_core::{
    format::{manifest::fp_hex_list, parse_fp_hex},
    hash::Fingerprint,
};

use crate::{
    error::{ApiError, ApiResult},
    store::{auth::TokenAccess, Store},
};

pub const MAX_MISSING_BODY: usize = 16 << 20;
pub const MAX_MISSING_FPS: usize = 200_000;
pub const MAX_GET_BODY: usize = 4 << 20;
pub const MAX_GET_FPS: usize = 65_536;
/// `chunks/get`'s `have` names chunks a client holds, where answers' chain walks stop: the
/// chain ends a search worker keeps (a trained dictionary), or what a restore's earlier
/// answers carried. As many as a request may ask for.
pub const MAX_GET_HAVE: usize = MAX_GET_FPS / 4;
pub const MAX_MANIFEST_BODY: usize = 256 << 20;
/// Beyond the limit, bodies are read and discarded up to this size so that the client
/// still receives its 413; larger ones are cut off.
const DRAIN_CAP: usize = 64 << 20;

type St = State<Arc<Store>>;
type RepoItemPath = Result<Path<(String, String)>, PathRejection>;

/// Server searches that run at once unless `DITTO_SEARCH_SLOTS` says otherwise
/// ([`search_turns::SearchTurns`]).
pub const DEFAULT_SEARCH_SLOTS: usize = 2;

pub fn router(store: Arc<Store>, search_slots: usize) -> Router {
    let repo = Router::new()
        .route("/chunks/missing", post(chunks::missing))
        .route("/chunks/lengths", post(chunks::lengths))
        .route("/chunks/get", post(chunks::chunks_get))
        .route("/chunks/{fp}", get(chunks::chunk_get))
        .route("/bundles", post(bundles::bundles))
        .route(
            "/versions",
            get(versions::versions_list).post(versions::versions_post),
        )
        .route(
            "/versions/{id}",
            get(versions::version_get).delete(maintenance::version_delete),
        )
        .route("/versions/{id}/locations", get(versions::version_locations))
        .route("/containers", get(containers::containers_list))
        .route("/containers/{id}", get(containers::container_get))
        .route("/verify", post(verify::verify))
        .route("/forget", post(maintenance::forget))
        .route("/prune", post(maintenance::prune))
        .route(
            "/search",
            post(search::search).layer(axum::Extension(search_turns::SearchTurns::new(
                search_slots,
            ))),
        )
        .route("/stats", get(stats::stats))
        .route("/token", get(token::token_info));
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
        include_str!("../openapi.json"),
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

/// A [`Need`] as a type, so that a handler states what it needs in its signature
/// (`Authorized<ReadData>`).
trait Needs {
    const NEED: Need;
}

macro_rules! needs {
    ($($name:ident),*) => {$(
        struct $name;
        impl Needs for $name {
            const NEED: Need = Need::$name;
        }
    )*};
}
needs!(Any, Backup, ReadData, Browse, Delete);

/// The repository of a request under `/repos/{repo}`, its bearer token checked for what the
/// handler needs (`N`). Extracting it answers 401, 403 or 404 before the handler runs.
struct Authorized<N> {
    repo: String,
    access: TokenAccess,
    need: PhantomData<N>,
}

impl<N> Authorized<N> {
    fn repo_id(&self) -> i64 {
        self.access.repo_id
    }
}

impl<N: Needs + Send> FromRequestParts<Arc<Store>> for Authorized<N> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, store: &Arc<Store>) -> ApiResult<Self> {
        let params = RawPathParams::from_request_parts(parts, store)
            .await
            .map_err(|e| ApiError::bad_request(format!("bad path: {e}")))?;
        let repo = params
            .iter()
            .find(|(name, _)| *name == "repo")
            .map(|(_, v)| v.to_string())
            .ok_or_else(|| ApiError::internal("route without a {repo} parameter"))?;
        let access = authorize(store, &parts.headers, &repo, N::NEED).await?;
        Ok(Authorized {
            repo,
            access,
            need: PhantomData,
        })
    }
}

/// Authenticates the bearer token for `repo` and checks that its scope allows `need`.
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
        let (access, id) = store.access(&token, &repo)?;
        let access = access.ok_or_else(|| ApiError::unauthorized("unknown token"))?;
        let id = id.ok_or_else(|| ApiError::not_found(format!("no repository named {repo:?}")))?;
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

/// How long a request body may pause between two pieces (`HEADER_TIMEOUT`, set once at
/// start by `main`).
pub static BODY_IDLE: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
pub const DEFAULT_BODY_IDLE: std::time::Duration = std::time::Duration::from_secs(30);

/// A `chunks/get` whose client takes none of its answer for this long is abandoned and its
/// connection cut: the thread that reads and verifies it is not held by a client that
/// stopped reading (`SEND_TIMEOUT`, set once at start by `main`).
pub static SEND_STALL: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
pub const DEFAULT_SEND_STALL: std::time::Duration = std::time::Duration::from_secs(120);

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
    // Sized for the declared length up to 8 MiB (every bundle), grown as more arrives: a
    // declared length alone (a manifest may declare 256 MiB and send nothing) reserves no
    // more than that.
    let mut buf = BytesMut::with_capacity(
        declared.map_or(64 << 10, |n| n.min(limit as u64).min(8 << 20) as usize),
    );
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

/// The body as JSON, or the default for an empty (or blank) one.
fn json_or_default<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> ApiResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        Ok(T::default())
    } else {
        parse_json(body)
    }
}

#[derive(Deserialize)]
struct FpList {
    #[serde(deserialize_with = "fp_hex_list")]
    fingerprints: Vec<String>,
    #[serde(default)]
    decode: bool,
    /// `chunks/get`: how delta chunks are answered (ignored with `decode`).
    #[serde(default)]
    deltas: Deltas,
    /// `chunks/get` with `deltas: "stored"`: also answer the base chains of the requested
    /// deltas (a client resolving bases itself then needs one request, not one per link).
    #[serde(default)]
    chains: bool,
    /// `chunks/get` with `chains`: chunks the client holds raw, where a chain stops.
    #[serde(default, deserialize_with = "fp_hex_list")]
    have: Vec<String>,
    /// `chunks/get` with `deltas: "stored"`: `false` sends the stored bytes unchecked, to a
    /// client that checks every chunk itself (`Answer::StoredUnchecked`).
    #[serde(default = "yes")]
    verify: bool,
}

fn yes() -> bool {
    true
}

/// `chunks/get`'s `deltas`: `"decoded"` (the default, for clients that cannot resolve a
/// delta's base) or `"stored"` (codec-2 entries as stored; the client decodes them).
#[derive(serde::Deserialize, Default, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
enum Deltas {
    #[default]
    Decoded,
    Stored,
}

fn is_binary(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/octet-stream"))
}

fn octets(bytes: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
}

fn parse_id(s: &str, what: &str) -> ApiResult<i64> {
    s.parse::<i64>()
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| ApiError::bad_request(format!("{what} id must be a positive integer")))
}
