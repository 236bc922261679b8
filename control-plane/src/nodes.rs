//! Data nodes: their registry (each node reports itself every few seconds),
//! the client that pushes configuration to them, placement of new
//! databases, and the reconcile loop that brings every node to the
//! configuration the store holds.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shoal_wire::secret::ClusterSecret;

use crate::error::ApiError;
use crate::server::{App, Body};
use crate::store::now_ms;

/// How often data nodes report themselves.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);
/// A node not heard from for this long is down: nothing new is placed on it.
pub const DOWN_AFTER_MS: i64 = 15_000;
/// How often every node is brought up to date.
pub const RECONCILE_EVERY: Duration = Duration::from_secs(5);

/// What a data node reports about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    pub node_id: u32,
    pub internal_url: String,
    pub rest_url: String,
    pub resp_addr: String,
    pub data_memory_bytes: u64,
    pub used_bytes: u64,
    /// New each time the node starts.
    pub boot_id: String,
    /// Keys used since the last report.
    #[serde(default)]
    pub keys_used: Vec<KeyUse>,
}

/// A key a node saw used, and when (seconds since the Unix epoch).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyUse {
    pub prefix: String,
    pub at: u64,
}

/// Most key uses one report may carry.
pub const MAX_KEY_USES: usize = 10_000;

impl Heartbeat {
    fn check(&self) -> Result<(), ApiError> {
        for (field, url) in [
            ("internal_url", &self.internal_url),
            ("rest_url", &self.rest_url),
        ] {
            let ok = url.len() <= 200
                && url.strip_prefix("http://").is_some_and(|rest| {
                    !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
                });
            if !ok {
                return Err(ApiError::invalid(format!("{field}: not http://host:port")));
            }
        }
        let addr_ok = self.resp_addr.len() <= 200
            && self.resp_addr.contains(':')
            && self.resp_addr.bytes().all(|b| b.is_ascii_graphic());
        if !addr_ok {
            return Err(ApiError::invalid("resp_addr: not host:port"));
        }
        if self.boot_id.is_empty() || self.boot_id.len() > 64 {
            return Err(ApiError::invalid("boot_id: 1 to 64 characters"));
        }
        if self.keys_used.len() > MAX_KEY_USES {
            return Err(ApiError::invalid(format!(
                "keys_used: at most {MAX_KEY_USES} a report"
            )));
        }
        Ok(())
    }
}

/// `POST /internal/v1/datanodes/heartbeat` (cluster secret): registers a
/// node or refreshes what is known of it. A node that has restarted is
/// brought up to date at once.
pub async fn heartbeat(
    State(app): State<Arc<App>>,
    Body(beat): Body<Heartbeat>,
) -> Result<Json<Value>, ApiError> {
    beat.check()?;
    let now = now_ms();
    let known: Option<String> =
        sqlx::query_scalar("SELECT boot_id FROM datanodes WHERE node_id = $1")
            .bind(i64::from(beat.node_id))
            .fetch_optional(&app.store.pool)
            .await?;
    let (memory, used) = (clamp(beat.data_memory_bytes), clamp(beat.used_bytes));
    sqlx::query(
        "INSERT INTO datanodes (node_id, internal_url, rest_url, resp_addr, \
         data_memory_bytes, used_bytes, boot_id, registered_at, last_seen) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) \
         ON CONFLICT (node_id) DO UPDATE SET internal_url = excluded.internal_url, \
         rest_url = excluded.rest_url, resp_addr = excluded.resp_addr, \
         data_memory_bytes = excluded.data_memory_bytes, used_bytes = excluded.used_bytes, \
         boot_id = excluded.boot_id, last_seen = excluded.last_seen",
    )
    .bind(i64::from(beat.node_id))
    .bind(&beat.internal_url)
    .bind(&beat.rest_url)
    .bind(&beat.resp_addr)
    .bind(memory)
    .bind(used)
    .bind(&beat.boot_id)
    .bind(now)
    .execute(&app.store.pool)
    .await?;
    if known.is_none() {
        tracing::info!(node = beat.node_id, url = %beat.internal_url, "data node registered");
    }
    if !beat.keys_used.is_empty() {
        let mut tx = app.store.begin_write().await?;
        for used in &beat.keys_used {
            let at = clamp(used.at.saturating_mul(1000));
            sqlx::query(
                "UPDATE api_keys SET last_used_at = $1 \
                 WHERE prefix = $2 AND (last_used_at IS NULL OR last_used_at < $1)",
            )
            .bind(at)
            .bind(&used.prefix)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
    }
    if known.as_deref() != Some(beat.boot_id.as_str()) {
        app.reconcile_now.notify_one();
    }
    Ok(Json(json!({"node_id": beat.node_id})))
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A data node as the registry has it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct NodeRow {
    pub node_id: i64,
    pub internal_url: String,
    pub rest_url: String,
    pub resp_addr: String,
    pub data_memory_bytes: i64,
    pub used_bytes: i64,
    pub last_seen: i64,
    pub boot_id: String,
    /// The boot whose quotas were last pushed in full.
    pub quotas_synced_boot: String,
}

impl NodeRow {
    pub fn up(&self, now: i64) -> bool {
        now - self.last_seen <= DOWN_AFTER_MS
    }

    pub fn json(&self, now: i64) -> Value {
        json!({
            "node_id": self.node_id,
            "internal_url": self.internal_url,
            "rest_url": self.rest_url,
            "resp_addr": self.resp_addr,
            "data_memory_bytes": self.data_memory_bytes,
            "used_bytes": self.used_bytes,
            "last_seen": self.last_seen,
            "status": if self.up(now) { "up" } else { "down" },
        })
    }
}

const NODE_COLUMNS: &str = "node_id, internal_url, rest_url, resp_addr, data_memory_bytes, \
                            used_bytes, last_seen, boot_id, quotas_synced_boot";

pub async fn all(app: &App) -> sqlx::Result<Vec<NodeRow>> {
    sqlx::query_as(&format!(
        "SELECT {NODE_COLUMNS} FROM datanodes ORDER BY node_id"
    ))
    .fetch_all(&app.store.pool)
    .await
}

pub async fn get(app: &App, node_id: i64) -> sqlx::Result<Option<NodeRow>> {
    sqlx::query_as(&format!(
        "SELECT {NODE_COLUMNS} FROM datanodes WHERE node_id = $1"
    ))
    .bind(node_id)
    .fetch_optional(&app.store.pool)
    .await
}

/// The node a new database goes to: of the nodes that are up, the one
/// using the least memory.
pub async fn place(app: &App) -> Result<NodeRow, ApiError> {
    let now = now_ms();
    all(app)
        .await?
        .into_iter()
        .filter(|n| n.up(now))
        .min_by_key(|n| (n.used_bytes, n.node_id))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "NO_DATA_NODE",
                "no data node is up to place the database on; try again shortly",
            )
        })
}

/// Calls data nodes' internal APIs with the cluster secret.
#[derive(Debug, Clone)]
pub struct NodeClient {
    http: reqwest::Client,
    secret: ClusterSecret,
}

/// Why a call to a data node failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("data node {node} did not answer: {reason}")]
    Unreachable { node: i64, reason: String },
    #[error("data node {node} refused: {status} {code}: {message}")]
    Refused {
        node: i64,
        status: StatusCode,
        code: String,
        message: String,
    },
}

impl NodeError {
    pub fn code(&self) -> Option<&str> {
        match self {
            NodeError::Refused { code, .. } => Some(code),
            NodeError::Unreachable { .. } => None,
        }
    }
}

/// Why bringing a node up to date stopped short (it is tried again).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Node(#[from] NodeError),
    #[error("reading the store: {0}")]
    Store(#[from] sqlx::Error),
}

/// A node's refusal of what the caller asked for is the caller's error; a
/// node that cannot be reached is the platform's.
impl From<NodeError> for ApiError {
    fn from(e: NodeError) -> ApiError {
        match e {
            NodeError::Unreachable { node, reason } => {
                tracing::warn!(node, %reason, "data node unreachable");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "DATA_NODE_UNAVAILABLE",
                    format!("data node {node} cannot be reached; nothing was changed, try again"),
                )
            }
            NodeError::Refused {
                status,
                code,
                message,
                node,
            } if status.is_client_error() => {
                let code = match code.as_str() {
                    "INVALID_SCHEMA" | "INVALID_NAME" | "BAD_REQUEST" | "INVALID_QUOTA" => {
                        "INVALID_REQUEST"
                    }
                    "LIMIT_REACHED" => "LIMIT_REACHED",
                    _ => {
                        tracing::error!(node, %code, %message, "data node refused a push");
                        return ApiError::internal();
                    }
                };
                ApiError::new(StatusCode::BAD_REQUEST, code, message)
            }
            NodeError::Refused {
                node,
                status,
                code,
                message,
            } => {
                tracing::error!(node, %status, %code, %message, "data node failed a push");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "DATA_NODE_UNAVAILABLE",
                    format!("data node {node} could not apply the change; try again"),
                )
            }
        }
    }
}

impl NodeClient {
    pub fn new(secret: ClusterSecret) -> NodeClient {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(10))
            .pool_idle_timeout(shoal_listen::CLIENT_POOL_IDLE)
            .build()
            .expect("an HTTP client without TLS builds");
        NodeClient { http, secret }
    }

    /// Calls `method path` on `node`; answers the JSON body of a success
    /// (`null` when empty).
    pub async fn call(
        &self,
        node: &NodeRow,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, NodeError> {
        let unreachable = |e: reqwest::Error| NodeError::Unreachable {
            node: node.node_id,
            reason: e.to_string(),
        };
        let mut request = self
            .http
            .request(method, format!("{}{path}", node.internal_url))
            .bearer_auth(self.secret.expose());
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(unreachable)?;
        let value: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        if status.is_success() {
            return Ok(value);
        }
        Err(NodeError::Refused {
            node: node.node_id,
            status,
            code: value["error"]["code"].as_str().unwrap_or("").to_owned(),
            message: value["error"]["message"].as_str().unwrap_or("").to_owned(),
        })
    }
}

/// Brings every node up to date: now, whenever a node (re)registers, and
/// every `RECONCILE_EVERY`.
pub async fn reconcile_loop(app: Arc<App>) {
    loop {
        for node in all(&app).await.unwrap_or_default() {
            if !node.up(now_ms()) {
                continue;
            }
            let done = async {
                crate::databases::reconcile(&app, &node).await?;
                crate::keys::reconcile(&app, &node).await?;
                crate::quotas::reconcile(&app, &node).await
            }
            .await;
            if let Err(e) = done {
                tracing::warn!(node = node.node_id, error = %e, "reconcile incomplete; retrying");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(RECONCILE_EVERY) => {}
            () = app.reconcile_now.notified() => {}
        }
    }
}

/// `GET /admin/datanodes` (platform admin).
#[utoipa::path(get, path = "/admin/datanodes", tag = "admin",
    responses((status = 200, description = "{datanodes: [{node_id, internal_url, rest_url, resp_addr, data_memory_bytes, used_bytes, last_seen, status}]}", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 403, description = "Not a platform admin", body = Object)))]
pub async fn list(
    State(app): State<Arc<App>>,
    caller: crate::auth::Caller,
) -> Result<Json<Value>, ApiError> {
    caller.require_admin()?;
    let now = now_ms();
    let nodes: Vec<Value> = all(&app).await?.iter().map(|n| n.json(now)).collect();
    Ok(Json(json!({"datanodes": nodes})))
}
