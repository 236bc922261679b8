//! The internal API (port 4407): how the control plane and operators reach a
//! data node. Every route but `healthz` needs `Authorization: Bearer
//! <cluster secret>`.
//!
//! | route | meaning |
//! | --- | --- |
//! | `GET /internal/v1/healthz` | liveness, no secret needed |
//! | `GET /internal/v1/ndbinfo` | the ndbinfo tables and their columns |
//! | `GET /internal/v1/ndbinfo/{table}` | a table's rows: `{"columns":[…],"rows":[[…]]}` |
//! | `GET /internal/v1/databases` | databases and their tables |
//! | `POST /internal/v1/databases` `{"name", "tenant"?}` | create a database |
//! | `DELETE /internal/v1/databases/{db}` | drop a database and its tables |
//! | `POST /internal/v1/databases/{db}/tables` | create a table (`TableDef`) |
//! | `DELETE /internal/v1/databases/{db}/tables/{table}` | drop a table |
//! | `GET/PUT/DELETE /internal/v1/databases/{db}/quota` | a database's quota and usage |
//! | `GET/PUT/DELETE /internal/v1/tenants/{tenant}/quota` | a tenant's quota and usage |
//! | `POST /internal/v1/databases/{db}/transaction` | read and write rows (see `data`) |
//! | `POST /internal/v1/checkpoint` | take a checkpoint now; answers what it wrote |
//!
//! Errors are `{"error": {"code", "message"}}` with the matching status.
//! The handlers of each area live in their own file: `ndbinfo`, `catalog`,
//! `quotas`, `data`.

mod catalog;
mod data;
mod ndbinfo;
mod quotas;

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde_json::json;

use crate::catalog::CatalogError;
use crate::persist::checkpoint::{Checkpointer, Summary};
use crate::tc::{Tc, TcError};

/// Largest request body the internal API reads.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// The shared secret of a cluster: whoever presents it is the control plane
/// or an operator. Never printed, compared in constant time.
#[derive(Clone)]
pub struct ClusterSecret(Arc<str>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(…)")
    }
}

/// Fewest characters a cluster secret may have.
pub const MIN_SECRET_LEN: usize = 32;

impl ClusterSecret {
    pub fn new(secret: &str) -> Result<ClusterSecret, String> {
        let secret = secret.trim();
        if secret.len() < MIN_SECRET_LEN {
            return Err(format!(
                "a cluster secret needs at least {MIN_SECRET_LEN} characters"
            ));
        }
        if !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("a cluster secret is printable ASCII without spaces".into());
        }
        Ok(ClusterSecret(secret.into()))
    }

    /// A new random secret: 32 bytes as hex.
    pub fn generate() -> std::io::Result<ClusterSecret> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(ClusterSecret(hex.into()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is the secret, in time that does not depend on
    /// where they first differ.
    fn matches(&self, presented: &[u8]) -> bool {
        let want = self.0.as_bytes();
        let mut diff = want.len() ^ presented.len();
        for (i, &b) in want.iter().enumerate() {
            diff |= usize::from(b ^ presented.get(i).copied().unwrap_or(0));
        }
        diff == 0
    }
}

#[derive(Clone)]
struct AppState {
    tc: Tc,
    secret: ClusterSecret,
    checkpointer: Arc<Checkpointer>,
}

/// An error as the internal API answers it.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// More fields of the error object, e.g. which operation failed.
    details: serde_json::Map<String, serde_json::Value>,
    /// For throttling: sent as `Retry-After` (seconds, rounded up) and in the body.
    retry_after_ms: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: serde_json::Map::new(),
            retry_after_ms: None,
        }
    }

    fn with(mut self, field: &str, value: impl Into<serde_json::Value>) -> Self {
        self.details.insert(field.to_owned(), value.into());
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = self.details;
        error.insert("code".into(), self.code.into());
        error.insert("message".into(), self.message.into());
        if let Some(ms) = self.retry_after_ms {
            error.insert("retry_after_ms".into(), ms.into());
        }
        let body = Json(json!({ "error": error }));
        let mut response = (self.status, body).into_response();
        if let Some(ms) = self.retry_after_ms {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(ms.div_ceil(1000).max(1)),
            );
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
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
            CatalogError::TooManyDatabases | CatalogError::TooManyTables => {
                (StatusCode::CONFLICT, "LIMIT_REACHED")
            }
            CatalogError::Schema(_) => (StatusCode::BAD_REQUEST, "INVALID_SCHEMA"),
            CatalogError::NotDurable(_) => (StatusCode::SERVICE_UNAVAILABLE, "NOT_DURABLE"),
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl From<TcError> for ApiError {
    fn from(e: TcError) -> Self {
        let status =
            StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut error = ApiError::new(status, e.code(), e.to_string());
        error.retry_after_ms = e.retry_after_ms();
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

/// Every route of the internal API.
pub fn router(tc: Tc, secret: ClusterSecret, checkpointer: Arc<Checkpointer>) -> Router {
    let state = AppState {
        tc,
        secret,
        checkpointer,
    };
    let authenticated = Router::new()
        .route("/internal/v1/ndbinfo", get(ndbinfo::list))
        .route("/internal/v1/ndbinfo/{table}", get(ndbinfo::rows))
        .route(
            "/internal/v1/databases",
            get(catalog::list).post(catalog::create_database),
        )
        .route(
            "/internal/v1/databases/{db}",
            delete(catalog::drop_database),
        )
        .route(
            "/internal/v1/databases/{db}/tables",
            post(catalog::create_table),
        )
        .route(
            "/internal/v1/databases/{db}/tables/{table}",
            delete(catalog::drop_table),
        )
        .route(
            "/internal/v1/databases/{db}/quota",
            get(quotas::database)
                .put(quotas::set_database)
                .delete(quotas::clear_database),
        )
        .route(
            "/internal/v1/databases/{db}/transaction",
            post(data::transaction),
        )
        .route("/internal/v1/checkpoint", post(checkpoint))
        .route(
            "/internal/v1/tenants/{tenant}/quota",
            get(quotas::tenant)
                .put(quotas::set_tenant)
                .delete(quotas::clear_tenant),
        )
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            require_secret,
        ));
    Router::new()
        .route("/internal/v1/healthz", get(healthz))
        .merge(authenticated)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "NOT_FOUND", "no such route") })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn require_secret(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    match presented {
        Some(token) if state.secret.matches(token) => Ok(next.run(request).await),
        Some(_) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
            "the cluster secret is wrong",
        )),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
            "send the cluster secret as 'Authorization: Bearer <secret>'",
        )),
    }
}

async fn checkpoint(State(state): State<AppState>) -> Result<Json<Summary>, ApiError> {
    let summary = state
        .checkpointer
        .run(state.tc.engine())
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "CHECKPOINT_FAILED",
                e.to_string(),
            )
        })?;
    Ok(Json(summary))
}

/// `ok`, or 503 `failed` with the reason once the redo log has failed: the
/// node takes no more writes and must be restarted.
async fn healthz(State(state): State<AppState>) -> (StatusCode, Json<serde_json::Value>) {
    let engine = state.tc.engine();
    let node_id = engine.node_id();
    match engine.log().and_then(|log| log.failure()) {
        None => (
            StatusCode::OK,
            Json(json!({"status": "ok", "node_id": node_id})),
        ),
        Some(failed) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "failed", "node_id": node_id, "reason": failed.to_string()})),
        ),
    }
}
