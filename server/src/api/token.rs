//! `GET token`: what the presented token may do.

use axum::{extract::State, http::HeaderMap, Json};
use serde_json::{json, Value};

use super::{authorize, blocking, path_param, Need, RepoPath, St};
use crate::error::ApiResult;

pub(super) async fn token_info(
    State(store): St,
    repo: RepoPath,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let repo = path_param(repo)?;
    let access = authorize(&store, &headers, &repo, Need::Any).await?;
    let s = access.scope;
    let repo_id = access.repo_id;
    let gc_epoch = blocking(move || Ok(store.gc_epoch(repo_id)?)).await?;
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
        "gc_epoch": gc_epoch,
    })))
}
