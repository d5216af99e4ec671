//! Container endpoints: the repository's containers as the index knows them, and their
//! committed bytes (with single `Range` requests).

use axum::{
    extract::{rejection::QueryRejection, Query, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_core::{format::locations::chain_key_number, hash::to_hex};

use super::{blocking, parse_id, path_param, Authorized, ReadData, RepoItemPath, St};
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize)]
pub(super) struct ContainersQuery {
    chunks: Option<bool>,
}

pub(super) async fn containers_list(
    State(store): St,
    auth: Authorized<ReadData>,
    q: Result<Query<ContainersQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let repo_id = auth.repo_id();
    let with_chunks = q
        .map_err(|e| ApiError::bad_request(format!("bad query: {e}")))?
        .chunks
        .unwrap_or(true);
    blocking(move || {
        let mut out = Vec::new();
        for c in store.list_containers(repo_id, with_chunks)? {
            let mut v = json!({
                "id": c.id, "kind": if c.kind == 1 { "archival" } else { "active" },
                "newest_version": c.newest_version, "data_offset": c.data_offset,
                "size": c.size,
            });
            if with_chunks {
                let chunks = c.chunks.iter().zip(&c.chain_keys).map(|(k, key)| {
                    json!({
                        "fp": to_hex(&k.fp), "codec": k.codec, "offset": k.offset,
                        "stored_len": k.stored_len, "raw_len": k.raw_len,
                        "chain_key": chain_key_number(key),
                    })
                });
                v["chunks"] = Value::Array(chunks.collect());
            }
            out.push(v);
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

pub(super) async fn container_get(
    State(store): St,
    auth: Authorized<ReadData>,
    p: RepoItemPath,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let (_, id) = path_param(p)?;
    let repo_id = auth.repo_id();
    let id = parse_id(&id, "container")?;
    let range = headers
        .get(header::RANGE)
        .map(|v| v.to_str().unwrap_or("").to_string());
    blocking(move || {
        let len = store.container_size(repo_id, id)?;
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
        let mut resp = store
            .read_container(repo_id, id as u64, start, n)?
            .into_response();
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
