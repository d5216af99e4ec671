//! `GET token`: what the presented token may do.

use axum::{extract::State, Json};
use serde_json::{json, Value};

use super::{blocking, Any, Authorized, St};
use crate::error::ApiResult;

/// What the presented token may do, for the page to show and to offer only what works.
pub(super) async fn token_info(State(store): St, auth: Authorized<Any>) -> ApiResult<Json<Value>> {
    let (repo, access) = (auth.repo, auth.access);
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
