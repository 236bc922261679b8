//! The control plane's HTTP server: its state, its routes, start and stop.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use shoal_quota::Quota;
use shoal_wire::secret::ClusterSecret;
use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use crate::auth::{self, LoginLimits, Tokens};
use crate::error::ApiError;
use crate::nodes::NodeClient;
use crate::store::{OpenError, Store};
use crate::{accounts, admin, audit, databases, keys, nodes, quotas};

/// The largest request body the API reads.
pub const MAX_BODY: usize = 64 << 10;
/// The largest body the internal routes read.
pub const MAX_INTERNAL_BODY: usize = 1 << 20;

/// How the control plane runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// `sqlite://…` or `postgres://…`.
    pub store_url: String,
    pub listen: SocketAddr,
    /// Mark cookies `Secure` (when served over HTTPS, e.g. behind a proxy).
    pub secure_cookies: bool,
    /// What data nodes and the control plane present to each other.
    pub cluster_secret: ClusterSecret,
    /// A platform admin made at start if there is no such account: email
    /// and password.
    pub bootstrap_admin: Option<(String, String)>,
    /// The quota a new tenant starts with.
    pub plan_quota: Quota,
}

/// What every request handler shares.
#[derive(Debug)]
pub struct App {
    pub store: Store,
    pub tokens: Tokens,
    pub login_limits: LoginLimits,
    pub config: Config,
    /// A hash to check passwords against when there is no such account.
    pub dummy_hash: String,
    pub nodes: NodeClient,
    /// Wakes the reconcile loop early (a node has restarted).
    pub reconcile_now: Notify,
}

/// A JSON request body, refused with the API's error shape when it is not
/// JSON, not the expected shape, or larger than `MAX_BODY`.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<S, T> FromRequest<S> for Body<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Body<T>, ApiError> {
        let Json(value) = Json::<T>::from_request(req, state)
            .await
            .map_err(|e: JsonRejection| ApiError::from(e))?;
        Ok(Body(value))
    }
}

/// Why the control plane did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] OpenError),
    #[error("reading the control plane's settings: {0}")]
    Settings(#[from] sqlx::Error),
    #[error("the platform admin to make at start: {0}")]
    Admin(String),
    #[error("listening on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// A running control plane.
#[derive(Debug)]
pub struct ControlPlane {
    pub addr: SocketAddr,
    pub app: Arc<App>,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<std::io::Result<()>>,
    reconcile: JoinHandle<()>,
}

impl ControlPlane {
    /// Opens the store (applying migrations), and serves the API.
    pub async fn start(config: Config) -> Result<ControlPlane, StartError> {
        let store = Store::open(&config.store_url).await?;
        // The signing secret is made on first start and kept in the store,
        // so that every control plane on the same store accepts the same
        // sessions; it is never logged.
        let secret = store
            .setting_or_init("session_signing_secret", || auth::random_hex(32))
            .await?;
        if let Some((email, password)) = &config.bootstrap_admin {
            admin::bootstrap(&store, email, password)
                .await
                .map_err(StartError::Admin)?;
        }
        let dummy_hash = auth::blocking(|| auth::hash_password(&auth::random_hex(16))).await;
        let app = Arc::new(App {
            store,
            tokens: Tokens::new(secret.as_bytes()),
            login_limits: LoginLimits::default(),
            nodes: NodeClient::new(config.cluster_secret.clone()),
            config: config.clone(),
            dummy_hash,
            reconcile_now: Notify::new(),
        });
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| StartError::Listen {
                    addr: config.listen,
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| StartError::Listen {
            addr: config.listen,
            source,
        })?;
        let (stop, stopped) = oneshot::channel::<()>();
        let service = router(Arc::clone(&app)).into_make_service_with_connect_info::<SocketAddr>();
        let server = tokio::spawn(async move {
            axum::serve(listener, service)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
        });
        let reconcile = tokio::spawn(nodes::reconcile_loop(Arc::clone(&app)));
        Ok(ControlPlane {
            addr,
            app,
            stop: Some(stop),
            server,
            reconcile,
        })
    }

    /// Stops taking connections, finishes the requests under way, and
    /// closes the store.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.reconcile.abort();
        let served = (&mut self.server).await.unwrap_or(Ok(()));
        self.app.store.close().await;
        served
    }
}

/// Every route.
pub fn router(app: Arc<App>) -> Router {
    let api = Router::new()
        .route("/healthz", get(healthz))
        .route("/auth/signup", post(accounts::signup))
        .route("/auth/login", post(accounts::login))
        .route("/auth/logout", post(accounts::logout))
        .route("/me", get(accounts::me))
        .route("/databases", get(databases::list).post(databases::create))
        .route(
            "/databases/{db}",
            get(databases::get).delete(databases::drop),
        )
        .route(
            "/databases/{db}/tables",
            get(databases::list_tables).post(databases::create_table),
        )
        .route(
            "/databases/{db}/tables/{table}",
            delete(databases::drop_table),
        )
        .route("/api-keys", get(keys::list).post(keys::create))
        .route("/api-keys/{id}", delete(keys::revoke))
        .route("/quotas", get(quotas::get))
        .route("/admin/datanodes", get(nodes::list))
        .route("/admin/tenants", get(admin::tenants))
        .route("/admin/tenants/{id}/suspend", post(admin::suspend))
        .route("/admin/tenants/{id}/resume", post(admin::resume))
        .route("/admin/tenants/{id}/quota", put(quotas::set_tenant))
        .route(
            "/admin/tenants/{id}/databases/{db}/quota",
            put(quotas::set_database),
        )
        .route("/admin/admins", post(admin::create_admin))
        .route("/admin/audit", get(audit::list))
        .fallback(|| async { ApiError::not_found("route") })
        .layer(axum::middleware::map_response(no_store));
    let internal = Router::new()
        .route("/datanodes/heartbeat", post(nodes::heartbeat))
        .fallback(|| async { ApiError::not_found("route") })
        // A report names up to 10,000 keys used.
        .layer(DefaultBodyLimit::max(MAX_INTERNAL_BODY))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            cluster_only,
        ));
    Router::new()
        .nest("/api/v1", api)
        .nest("/internal/v1", internal)
        .fallback(|| async { ApiError::not_found("page") })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

async fn healthz() -> impl IntoResponse {
    Json(serde_json::json!({"status": "ok"}))
}

/// The internal routes answer only callers with the cluster secret.
async fn cluster_only(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Result<axum::response::Response, ApiError> {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match presented {
        Some(secret) if app.config.cluster_secret.matches(secret.as_bytes()) => {
            Ok(next.run(request).await)
        }
        _ => Err(ApiError::unauthenticated(
            "the internal API needs the cluster secret",
        )),
    }
}

/// API answers carry sessions and tenants' data: no cache keeps them.
async fn no_store(mut response: axum::response::Response) -> axum::response::Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
