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
//! | `POST /internal/v1/databases/{db}/tables/{table}/indexes` | add an ordered index (`IndexDef`), built while the table serves; answers the table |
//! | `DELETE /internal/v1/databases/{db}/tables/{table}/indexes/{index}` | drop an ordered index |
//! | `DELETE /internal/v1/databases/{db}/tables/{table}` | drop a table |
//! | `GET/PUT/DELETE /internal/v1/databases/{db}/quota` | a database's quota and usage |
//! | `GET/PUT/DELETE /internal/v1/tenants/{tenant}/quota` | a tenant's quota and usage |
//! | `POST /internal/v1/databases/{db}/transaction` | read and write rows (see `data`) |
//! | `POST /internal/v1/databases/{db}/tables/{table}/scan` | a page of a table's rows (see `data`) |
//! | `POST /internal/v1/checkpoint` | take a checkpoint now; answers what it wrote |
//! | `GET/PUT /internal/v1/group` | the node group the node is in (see `group`) |
//! | `GET/POST /internal/v1/api-keys` | tenant API keys; `POST` makes one (see `keys`) |
//! | `PUT/DELETE /internal/v1/api-keys/{prefix}` | push or revoke a key |
//!
//! Errors are `{"error": {"code", "message"}}` with the matching status.
//! The handlers of each area live in their own file: `ndbinfo`, `catalog`,
//! `quotas`, `data`, `keys`.

mod catalog;
mod data;
mod group;
mod keys;
mod metrics;
mod ndbinfo;
mod quotas;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{delete, get, post};
use axum::{Json, Router};

use crate::api::error::ApiError;
use crate::cluster::Cluster;
use crate::node::Engine;
use crate::node::checkpoint::{Checkpointer, Summary};
use shoal_wire::internal::Health;

/// Largest request body the internal API reads.
pub(crate) const MAX_BODY_BYTES: usize = 1 << 20;

pub(crate) use shoal_wire::secret::ClusterSecret;

#[derive(Clone)]
struct AppState {
    engine: Engine,
    cluster: Cluster,
    secret: ClusterSecret,
    checkpointer: Arc<Checkpointer>,
}

/// Every route of the internal API.
pub(crate) fn router(
    engine: Engine,
    cluster: Cluster,
    secret: ClusterSecret,
    checkpointer: Arc<Checkpointer>,
) -> Router {
    let state = AppState {
        engine,
        cluster,
        secret,
        checkpointer,
    };
    let authenticated = Router::new()
        .route("/metrics", get(metrics::render))
        .route("/internal/v1/ndbinfo", get(ndbinfo::list))
        .route("/internal/v1/group", get(group::get).put(group::put))
        .route(
            "/internal/v1/directory",
            get(group::directory).put(group::set_directory),
        )
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
            "/internal/v1/databases/{db}/tables/{table}/indexes",
            post(catalog::add_index),
        )
        .route(
            "/internal/v1/databases/{db}/tables/{table}/indexes/{index}",
            delete(catalog::drop_index),
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
        .route(
            "/internal/v1/databases/{db}/tables/{table}/scan",
            post(data::scan),
        )
        .route("/internal/v1/checkpoint", post(checkpoint))
        .route("/internal/v1/api-keys", get(keys::list).post(keys::create))
        .route(
            "/internal/v1/api-keys/{prefix}",
            axum::routing::put(keys::put).delete(keys::remove),
        )
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
    let summary = state.checkpointer.run(&state.engine).await.map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "CHECKPOINT_FAILED",
            e.to_string(),
        )
    })?;
    Ok(Json(summary))
}

/// `ok`, or 503 `failed` with the reason once an LDM worker has panicked or
/// the redo log has failed: the node must be restarted.
async fn healthz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let node_id = state.engine.node_id();
    let (status, word, reason) = match state.engine.health() {
        Ok(()) => (StatusCode::OK, "ok", None),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, "failed", Some(reason)),
    };
    let health = Health {
        status: word.into(),
        node_id,
        reason,
    };
    (status, Json(health))
}
