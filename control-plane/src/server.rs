//! The control plane's HTTP server: its state, its routes, start and stop.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use shoal_quota::Quota;
use shoal_wire::secret::ClusterSecret;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{self, LoginLimits, Tokens};
use crate::error::ApiError;
use crate::nodes::NodeClient;
use crate::store::{OpenError, Store};
use crate::{
    accounts, admin, audit, databases, keys, members, metrics, ndbinfo_sql, nodes, quotas, rows,
    usage,
};

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
    /// How many connections the API and console hold, in all and from one
    /// client address.
    pub connections: shoal_listen::Caps,
    /// A request head must arrive whole within this long of a connection's
    /// opening or its previous reply (more than `CLIENT_POOL_IDLE`).
    pub head_timeout: std::time::Duration,
    /// What data nodes and the control plane present to each other.
    pub cluster_secret: ClusterSecret,
    /// A platform admin made at start if there is no such account: email
    /// and password.
    pub bootstrap_admin: Option<(String, String)>,
    /// The quota a new tenant starts with.
    pub plan_quota: Quota,
    /// How often usage is sampled from the data nodes.
    pub metering_interval: std::time::Duration,
    /// How long samples and rollups are kept.
    pub retention: shoal_metering::Retention,
    /// Data nodes per node group: each holds a replica of every fragment
    /// of the group's databases (1, 2 or 3).
    pub replicas: u8,
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
    pub http_metrics: metrics::HttpMetrics,
    /// ndbinfo SQL queries running now, at most `ndbinfo_sql::MAX_RUNNING`.
    pub ndbinfo_queries: tokio::sync::Semaphore,
    /// What each node was last told of where databases are served.
    pub directories: crate::nodes::Told,
}

/// Longest a request body (at most `MAX_INTERNAL_BODY`) may take to arrive.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A JSON request body, refused with the API's error shape when it is not
/// JSON, not the expected shape, larger than `MAX_BODY`, or slower than
/// `BODY_TIMEOUT`.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<S, T> FromRequest<S> for Body<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Body<T>, ApiError> {
        let read = tokio::time::timeout(BODY_TIMEOUT, Json::<T>::from_request(req, state));
        let Ok(read) = read.await else {
            return Err(ApiError::new(
                axum::http::StatusCode::REQUEST_TIMEOUT,
                "REQUEST_TIMEOUT",
                format!(
                    "the request body did not arrive within {} s",
                    BODY_TIMEOUT.as_secs()
                ),
            ));
        };
        let Json(value) = read.map_err(|e: JsonRejection| ApiError::from(e))?;
        Ok(Body(value))
    }
}

/// Path segments (`/databases/{db}`), refused with the API's error shape
/// when they do not parse.
#[derive(Debug)]
pub struct Path<T>(pub T);

impl<S, T> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Path<T>, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| Path(value))
            .map_err(|e| ApiError::invalid(e.body_text()))
    }
}

/// A query string, refused with the API's error shape when it does not
/// parse.
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Query<T>, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| Query(value))
            .map_err(|e| ApiError::invalid(e.body_text()))
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
    stop: watch::Sender<bool>,
    server: JoinHandle<std::io::Result<()>>,
    reconcile: JoinHandle<()>,
    metering: JoinHandle<()>,
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
            http_metrics: metrics::HttpMetrics::default(),
            ndbinfo_queries: tokio::sync::Semaphore::new(crate::ndbinfo_sql::MAX_RUNNING),
            directories: crate::nodes::Told::default(),
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
        let (stop, stopped) = watch::channel(false);
        // The console calls this control plane's own API.
        let api_host = if addr.ip().is_unspecified() {
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
        } else {
            addr
        };
        let console = Arc::new(shoal_web::Console::new(
            format!("http://{api_host}/api/v1"),
            config.secure_cookies,
        ));
        let routes = router(Arc::clone(&app), console);
        let server = tokio::spawn(serve(
            listener,
            routes,
            config.connections,
            config.head_timeout,
            stopped,
        ));
        let reconcile = tokio::spawn(nodes::reconcile_loop(Arc::clone(&app)));
        let metering = tokio::spawn(usage::collect_loop(
            Arc::clone(&app),
            app.config.metering_interval,
        ));
        Ok(ControlPlane {
            addr,
            app,
            stop,
            server,
            reconcile,
            metering,
        })
    }

    /// Stops taking connections, finishes the requests under way, and
    /// closes the store.
    pub async fn stop(mut self) -> std::io::Result<()> {
        let _ = self.stop.send(true);
        self.reconcile.abort();
        self.metering.abort();
        let served = (&mut self.server).await.unwrap_or(Ok(()));
        self.app.store.close().await;
        served
    }
}

/// What a connection past the caps is answered.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: 104\r\n\r\n{\"error\":{\"code\":\"TOO_MANY_CONNECTIONS\",\"message\":\"the control plane has all the connections it takes\"}}";
/// How long a stopping control plane lets requests in flight finish.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Serves `routes` within `caps` until `stopped`, then lets requests in
/// flight finish. Each request knows its client's address (`ConnectInfo`),
/// which login throttling goes by.
async fn serve(
    listener: TcpListener,
    routes: Router,
    caps: shoal_listen::Caps,
    head_timeout: std::time::Duration,
    stopped: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let gate = shoal_listen::accept(listener, caps, REFUSAL, stopped, |stream, peer, permit| {
        let routes = routes
            .clone()
            .layer(axum::Extension(axum::extract::ConnectInfo(peer)));
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            shoal_listen::http_connection(stream, routes, head_timeout, watcher).await;
            drop(permit);
        });
    })
    .await;
    shoal_listen::finish(graceful, gate, DRAIN).await;
    Ok(())
}

/// What the OpenAPI document says besides its paths.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Shoal control plane",
        description = "Tenants, databases, tables, API keys and quotas. Authenticate with the session cookie set at login (writes then need X-CSRF-Token) or with `Authorization: Bearer <token>`. Errors are {\"error\": {\"code\", \"message\"}}."
    ),
    servers((url = "/api/v1")),
    modifiers(&SessionAuth),
    security(("session_token" = []), ("session_cookie" = []))
)]
struct ApiDoc;

/// The two ways a session is presented.
struct SessionAuth;

impl utoipa::Modify for SessionAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{
            ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme,
        };
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "session_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
        components.add_security_scheme(
            "session_cookie",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::new(auth::SESSION_COOKIE))),
        );
    }
}

/// Every route.
pub fn router(app: Arc<App>, console: Arc<shoal_web::Console>) -> Router {
    let (api, doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(healthz))
        .routes(routes!(accounts::signup))
        .routes(routes!(accounts::login))
        .routes(routes!(accounts::logout))
        .routes(routes!(accounts::me))
        .routes(routes!(members::list, members::add))
        .routes(routes!(members::remove, members::set_role))
        .routes(routes!(databases::list, databases::create))
        .routes(routes!(databases::get, databases::drop))
        .routes(routes!(databases::list_tables, databases::create_table))
        .routes(routes!(databases::drop_table))
        .routes(routes!(databases::add_index))
        .routes(routes!(databases::drop_index))
        .routes(routes!(databases::memory))
        .routes(routes!(rows::page, rows::change))
        .routes(routes!(keys::list, keys::create))
        .routes(routes!(keys::revoke))
        .routes(routes!(quotas::get))
        .routes(routes!(ndbinfo_sql::query))
        .routes(routes!(usage::series))
        .routes(routes!(usage::billing))
        .routes(routes!(metrics::render))
        .routes(routes!(nodes::list))
        .routes(routes!(admin::tenants))
        .routes(routes!(admin::suspend))
        .routes(routes!(admin::resume))
        .routes(routes!(quotas::set_tenant))
        .routes(routes!(quotas::get_tenant))
        .routes(routes!(quotas::set_database))
        .routes(routes!(admin::create_admin))
        .routes(routes!(audit::list))
        .routes(routes!(audit::tenant_list))
        .split_for_parts();
    // The document is made from the routes themselves, once.
    let doc = Arc::new(serde_json::to_value(&doc).expect("the OpenAPI document serializes"));
    let api = api
        .route(
            "/openapi.json",
            get(move || {
                let doc = Arc::clone(&doc);
                async move { Json((*doc).clone()) }
            }),
        )
        .fallback(|| async { ApiError::not_found("route") })
        .layer(axum::middleware::from_fn(refuse_oversized))
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            metrics::count,
        ))
        .layer(axum::middleware::map_response(no_store));
    let internal = Router::new()
        .route("/datanodes/heartbeat", post(nodes::heartbeat))
        .route("/sql/schema", post(crate::sql_schema::change))
        .route(
            "/groups/{group}/view",
            axum::routing::get(crate::views::get).post(crate::views::change),
        )
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
        .with_state(app)
        .merge(shoal_web::router(console))
        .fallback(|| async { ApiError::not_found("page") })
        .layer(DefaultBodyLimit::max(MAX_BODY))
}

/// `GET /healthz`.
#[utoipa::path(get, path = "/healthz", tag = "service",
    responses((status = 200, description = "{status: \"ok\"}", body = Object)))]
async fn healthz() -> impl IntoResponse {
    Json(serde_json::json!({"status": "ok"}))
}

/// Most of an oversized body read (and dropped) before it is refused, so
/// that the client, still sending, gets the answer rather than a reset.
const DRAIN_MAX: usize = 1 << 20;

/// Refuses a body declared larger than `MAX_BODY` before any handler runs.
async fn refuse_oversized(request: Request, next: Next) -> axum::response::Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(len) if len > MAX_BODY as u64 => {
            if len <= DRAIN_MAX as u64 {
                let _ = axum::body::to_bytes(request.into_body(), DRAIN_MAX).await;
            }
            ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
                format!("the body is {len} bytes; at most {MAX_BODY} are read"),
            )
            .into_response()
        }
        _ => next.run(request).await,
    }
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
