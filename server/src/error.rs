//! JSON errors: `{"error": "...", "code": "...", ...}`.

use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde_json::{Map, Value};
use wasm_core::hash::to_hex;

use crate::store::{BadChunk, StoreError};

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub extra: Map<String, Value>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            extra: Map::new(),
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_string(), value.into());
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn too_large(message: impl Into<String>, limit: u64) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message).with("limit", limit)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn internal(message: impl std::fmt::Display) -> Self {
        eprintln!("internal error: {message}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("internal server error: {message}"),
        )
    }
}

/// The status and code of each storage failure (docs/API.md, "Errors").
impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Damaged(ref fps) => {
                let hex = StoreError::hex_list(fps);
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "damaged", e.to_string())
                    .with("damaged", hex)
            }
            StoreError::NoSpace(ref why) => {
                eprintln!("out of space: {why}");
                ApiError::new(
                    StatusCode::INSUFFICIENT_STORAGE,
                    "no_space",
                    "the server is out of space; nothing of this request was stored",
                )
            }
            StoreError::WalLost => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "wal_lost", e.to_string())
            }
            StoreError::BadChunk { fp, why, message } => {
                let (status, code) = match why {
                    BadChunk::DecodeFailed => (StatusCode::UNPROCESSABLE_ENTITY, "decode_failed"),
                    BadChunk::FingerprintMismatch => {
                        (StatusCode::UNPROCESSABLE_ENTITY, "fingerprint_mismatch")
                    }
                    BadChunk::UnsupportedCodec => (StatusCode::BAD_REQUEST, "unsupported_codec"),
                };
                ApiError::new(status, code, message).with("fingerprint", to_hex(&fp))
            }
            StoreError::MissingChunks(ref fps) => {
                ApiError::new(StatusCode::CONFLICT, "missing_chunks", e.to_string())
                    .with("missing", StoreError::hex_list(fps))
            }
            StoreError::SizeMismatch { ref path, .. } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "size_mismatch",
                e.to_string(),
            )
            .with("path", path.clone()),
            StoreError::Unavailable { damaged, missing } => {
                let missing = StoreError::hex_list(&missing);
                if damaged.is_empty() {
                    ApiError::not_found(format!(
                        "{} requested chunk(s) are not stored",
                        missing.len()
                    ))
                    .with("missing", missing)
                } else {
                    ApiError::from(StoreError::Damaged(damaged)).with("missing", missing)
                }
            }
            StoreError::NotFound(what) => ApiError::not_found(what),
            StoreError::Changed(what) => ApiError::new(StatusCode::CONFLICT, "changed", what),
            StoreError::TooManyMatches(max) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "too_many_matches",
                e.to_string(),
            )
            .with("limit", max as u64),
            // Nobody reads it: the client has gone.
            StoreError::Abandoned => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "abandoned", e.to_string())
            }
            StoreError::LeaseLost => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "lease_lost", e.to_string())
            }
            StoreError::Internal(e) => ApiError::internal(e),
            StoreError::Io(e) => ApiError::internal(format!("i/o: {e}")),
            StoreError::Index(e) => ApiError::internal(format!("index: {e}")),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = Map::new();
        body.insert("error".into(), Value::String(self.message));
        body.insert("code".into(), Value::String(self.code.into()));
        body.extend(self.extra);
        (self.status, Json(Value::Object(body))).into_response()
    }
}
