//! `POST verify`: the repository's stored chunks read back and checked.

use axum::{body::Body, extract::State, http::HeaderMap, Json};
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_core::hash::to_hex;

use super::{blocking, json_or_default, read_body, Authorized, ReadData, St};
use crate::{
    error::{ApiError, ApiResult},
    store::verify::Subset,
};

#[derive(Deserialize, Default)]
struct VerifyRequest {
    #[serde(default)]
    subset: Option<String>,
}

/// `POST verify`: reads and verifies the repository's stored chunks (all, or a subset of its
/// containers), quarantines the damaged ones and says which versions are damaged.
pub(super) async fn verify(
    State(store): St,
    auth: Authorized<ReadData>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Value>> {
    let repo_id = auth.repo_id();
    let body = read_body(&headers, body, 64 << 10).await?;
    blocking(move || {
        let req: VerifyRequest = json_or_default(&body)?;
        let subset = Subset::parse(req.subset.as_deref().unwrap_or("all"))
            .map_err(|e| ApiError::bad_request(format!("subset: {e}")))?;
        let v = store.verify(repo_id, subset)?;
        let (versions, quarantined) = store.damage(repo_id)?;
        let versions: Vec<Value> = versions
            .into_iter()
            .map(|(id, n)| json!({ "id": id, "damaged_chunks": n }))
            .collect();
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
