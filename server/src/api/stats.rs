//! `GET stats`: repository totals and the per-version series.

use axum::{extract::State, http::HeaderMap, Json};
use serde_json::Value;

use super::{authorize, blocking, path_param, Need, RepoPath, St};
use crate::error::ApiResult;

pub(super) async fn stats(
    State(store): St,
    repo: RepoPath,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let repo = path_param(repo)?;
    let repo_id = authorize(&store, &headers, &repo, Need::Browse)
        .await?
        .repo_id;
    blocking(move || Ok(Json(store.stats(repo_id, &repo)?))).await
}
