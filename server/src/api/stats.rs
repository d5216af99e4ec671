//! `GET stats`: repository totals and the per-version series.

use axum::{extract::State, Json};
use serde_json::Value;

use super::{blocking, Authorized, Browse, St};
use crate::error::ApiResult;

pub(super) async fn stats(State(store): St, auth: Authorized<Browse>) -> ApiResult<Json<Value>> {
    blocking(move || Ok(Json(store.stats(auth.repo_id(), &auth.repo)?))).await
}
