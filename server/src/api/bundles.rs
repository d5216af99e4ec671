//! `POST bundles`: an upload of chunks. The bundle is parsed here; verifying and storing
//! it is the store's (`store::ingest`).

use axum::{body::Body, extract::State, http::HeaderMap, Json};
use serde_json::Value;
use wasm_core::format::bundle::{
    decode_bundle, BundleError, MAX_BUNDLE_BYTES, MAX_BUNDLE_CHUNKS, MAX_BUNDLE_RAW, MAX_CHUNK_RAW,
    MAX_CHUNK_STORED,
};

use super::{blocking, read_body, Authorized, Backup, St};
use crate::{
    error::{ApiError, ApiResult},
    store,
};

pub(super) async fn bundles(
    State(store): St,
    auth: Authorized<Backup>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Value>> {
    let repo_id = auth.repo_id();
    let body = read_body(&headers, body, MAX_BUNDLE_BYTES).await?;
    blocking(move || {
        let entries = decode_bundle(&body).map_err(|e| {
            if e.is_too_large() {
                ApiError::too_large(
                    format!("bundle: {e}"),
                    match e {
                        BundleError::TooManyChunks(_) => MAX_BUNDLE_CHUNKS as u64,
                        // The limit the chunk passed: its raw length's, else its stored one's.
                        BundleError::ChunkTooLarge { raw_len, .. } if raw_len <= MAX_CHUNK_RAW => {
                            MAX_CHUNK_STORED as u64
                        }
                        _ => MAX_CHUNK_RAW as u64,
                    },
                )
            } else {
                ApiError::bad_request(format!("malformed bundle: {e}"))
            }
        })?;
        let raw: u64 = entries.iter().map(|e| e.raw_len as u64).sum();
        if raw > MAX_BUNDLE_RAW {
            return Err(ApiError::too_large(
                format!("bundle of {raw} raw bytes; at most {MAX_BUNDLE_RAW}"),
                MAX_BUNDLE_RAW,
            ));
        }
        store::verify_entries(&entries)?;
        let r = store.ingest(repo_id, &entries)?;
        Ok(Json(serde_json::to_value(r).map_err(ApiError::internal)?))
    })
    .await
}
