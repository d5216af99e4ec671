//! Expiry and garbage collection endpoints: `POST forget`, `POST prune`, and `DELETE
//! versions/{id}` (a forget of one version). The request is parsed here; what is removed
//! and freed is the store's (docs/STORAGE.md).

use axum::{body::Body, extract::State, http::HeaderMap, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    blocking, json_or_default, parse_id, parse_json, path_param, read_body, Authorized, Delete,
    RepoItemPath, St,
};
use crate::{
    error::{ApiError, ApiResult},
    store::{expiry::Selector, gc::Sweep, retention::Policy},
};

/// At most this many version ids in one forget.
const MAX_FORGET_IDS: usize = 10_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForgetRequest {
    #[serde(default)]
    policy: Option<Policy>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    versions: Option<Vec<i64>>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PruneRequest {
    #[serde(default)]
    dry_run: bool,
}

pub(super) async fn forget(
    State(store): St,
    auth: Authorized<Delete>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Value>> {
    let repo_id = auth.repo_id();
    let body = read_body(&headers, body, 1 << 20).await?;
    blocking(move || {
        let req: ForgetRequest = parse_json(&body)?;
        let policy = match req.policy {
            Some(policy) if policy.is_empty() => {
                return Err(ApiError::bad_request(
                    "the policy keeps every version: give at least one keep rule",
                ))
            }
            Some(policy) => Some(policy),
            None if req.source.is_some() => {
                return Err(ApiError::bad_request(
                    "source goes with a policy: without one, name the versions",
                ))
            }
            None => None,
        };
        if req
            .source
            .as_ref()
            .is_some_and(|s| s.is_empty() || s.len() > 256)
        {
            return Err(ApiError::bad_request("source must be 1 to 256 bytes"));
        }
        if let Some(ids) = &req.versions {
            if ids.is_empty() || ids.len() > MAX_FORGET_IDS {
                return Err(ApiError::bad_request(format!(
                    "versions: 1 to {MAX_FORGET_IDS} ids"
                )));
            }
            if ids.iter().any(|&id| id <= 0) {
                return Err(ApiError::bad_request("versions: ids are positive integers"));
            }
        }
        let sel = match (policy, req.versions) {
            (Some(policy), None) => Selector::Policy {
                policy,
                source: req.source,
            },
            (None, Some(ids)) => Selector::Versions(ids),
            (Some(policy), Some(versions)) => Selector::Previewed {
                policy,
                source: req.source,
                versions,
            },
            (None, None) => {
                return Err(ApiError::bad_request(
                    "give a policy, versions, or both (a previewed policy's versions)",
                ))
            }
        };
        let rep = store.forget(repo_id, &sel, req.dry_run)?;
        Ok(Json(serde_json::to_value(rep).map_err(ApiError::internal)?))
    })
    .await
}

pub(super) async fn prune(
    State(store): St,
    auth: Authorized<Delete>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Value>> {
    let repo_id = auth.repo_id();
    let body = read_body(&headers, body, 64 << 10).await?;
    blocking(move || {
        let req: PruneRequest = json_or_default(&body)?;
        let rep = store.prune(repo_id, req.dry_run, Sweep::Full)?;
        Ok(Json(serde_json::to_value(rep).map_err(ApiError::internal)?))
    })
    .await
}

pub(super) async fn version_delete(
    State(store): St,
    auth: Authorized<Delete>,
    p: RepoItemPath,
) -> ApiResult<Json<Value>> {
    let (_, id) = path_param(p)?;
    let repo_id = auth.repo_id();
    let id = parse_id(&id, "version")?;
    blocking(move || {
        let rep = store.forget(repo_id, &Selector::Versions(vec![id]), false)?;
        Ok(Json(json!({
            "deleted": id,
            "reclaimed_bytes": rep.reclaimed_bytes,
            "prune_error": rep.prune_error,
        })))
    })
    .await
}
