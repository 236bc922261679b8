//! Errors as the HTTP APIs (internal and data) answer them.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::ldm::NodeFailed;
use crate::node::catalog::CatalogError;
use crate::tc::TcError;
use crate::tc::batch::OperationError;

/// An error as the HTTP APIs answer it: `{"error": {"code", "message", …}}`
/// with the matching status.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// More fields of the error object, e.g. which operation failed.
    details: serde_json::Map<String, serde_json::Value>,
    /// For throttling: sent as `Retry-After` (seconds, rounded up) and in the body.
    retry_after_ms: Option<u64>,
    /// For 401: how to authenticate, as `WWW-Authenticate` says it.
    challenge: &'static str,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: serde_json::Map::new(),
            retry_after_ms: None,
            challenge: "Bearer",
        }
    }

    pub(crate) fn with(mut self, field: &str, value: impl Into<serde_json::Value>) -> Self {
        self.details.insert(field.to_owned(), value.into());
        self
    }

    /// Sets what `WWW-Authenticate` tells a client refused with 401.
    pub(crate) fn challenge(mut self, challenge: &'static str) -> Self {
        self.challenge = challenge;
        self
    }

    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    /// The body that answers the error: `{"error": {"code", "message", …}}`.
    pub(crate) fn body(&self) -> serde_json::Value {
        let mut error = self.details.clone();
        error.insert("code".into(), self.code.into());
        error.insert("message".into(), self.message.clone().into());
        if let Some(ms) = self.retry_after_ms {
            error.insert("retry_after_ms".into(), ms.into());
        }
        json!({ "error": error })
    }
}

impl From<OperationError> for ApiError {
    fn from(e: OperationError) -> Self {
        let status =
            StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut error = ApiError::new(status, e.code(), e.to_string());
        if let Some(number) = e.number() {
            error = error.with("number", number);
        }
        if let OperationError::Quota(q) = &e {
            error.retry_after_ms = q.retry_after_ms();
        }
        error
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(self.body());
        let mut response = (self.status, body).into_response();
        if let Some(ms) = self.retry_after_ms {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(ms.div_ceil(1000).max(1)),
            );
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(self.challenge),
            );
        }
        response
    }
}

impl From<CatalogError> for ApiError {
    fn from(e: CatalogError) -> Self {
        let (status, code) = match &e {
            CatalogError::DatabaseExists(_) => (StatusCode::CONFLICT, "DATABASE_EXISTS"),
            CatalogError::TableExists { .. } => (StatusCode::CONFLICT, "TABLE_EXISTS"),
            CatalogError::NoSuchDatabase(_) => (StatusCode::NOT_FOUND, "NO_SUCH_DATABASE"),
            CatalogError::NoSuchTable { .. } => (StatusCode::NOT_FOUND, "NO_SUCH_TABLE"),
            CatalogError::NoSuchTenant(_) => (StatusCode::NOT_FOUND, "NO_SUCH_TENANT"),
            CatalogError::IndexExists { .. } => (StatusCode::CONFLICT, "INDEX_EXISTS"),
            CatalogError::NoSuchIndex { .. } => (StatusCode::NOT_FOUND, "NO_SUCH_INDEX"),
            CatalogError::IndexNotBuilt { quota: true, .. } => {
                (StatusCode::CONFLICT, "MEMORY_QUOTA")
            }
            CatalogError::IndexNotBuilt { quota: false, .. } => {
                (StatusCode::INSUFFICIENT_STORAGE, "OUT_OF_DATA_MEMORY")
            }
            CatalogError::UniqueDuplicates { .. } => (StatusCode::CONFLICT, "DUPLICATE_KEY"),
            CatalogError::IndexNotChecked { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "NOT_SERVING")
            }
            CatalogError::TooManyDatabases | CatalogError::TooManyTables => {
                (StatusCode::CONFLICT, "LIMIT_REACHED")
            }
            CatalogError::Schema(_) => (StatusCode::BAD_REQUEST, "INVALID_SCHEMA"),
            CatalogError::InvalidKey(_) => (StatusCode::BAD_REQUEST, "INVALID_KEY"),
            CatalogError::NotDurable(_) => (StatusCode::SERVICE_UNAVAILABLE, "NOT_DURABLE"),
            CatalogError::NodeFailed(_) => (StatusCode::SERVICE_UNAVAILABLE, "NODE_FAILED"),
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl From<NodeFailed> for ApiError {
    fn from(e: NodeFailed) -> Self {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "NODE_FAILED",
            e.to_string(),
        )
    }
}

impl From<TcError> for ApiError {
    fn from(e: TcError) -> Self {
        let status =
            StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut error = ApiError::new(status, e.code(), e.to_string());
        error.retry_after_ms = e.retry_after_ms();
        let number = match &e {
            TcError::Quota(q) => q.number(),
            TcError::Operation { error, .. } => error.number(),
            _ => None,
        };
        if let Some(number) = number {
            error = error.with("number", number);
        }
        if let TcError::Operation { index, .. } = e {
            error = error.with("operation", index);
        }
        error
    }
}

impl From<JsonRejection> for ApiError {
    fn from(e: JsonRejection) -> Self {
        let status = match e {
            JsonRejection::MissingJsonContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            JsonRejection::BytesRejection(_) => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, "BAD_REQUEST", e.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(e: PathRejection) -> Self {
        ApiError::new(e.status(), "BAD_REQUEST", e.body_text())
    }
}
