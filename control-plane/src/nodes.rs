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
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use shoal_quota::Quota;
use shoal_wire::api::{DataNode, DataNodeList, Endpoint};
use shoal_wire::internal::{
    DatabaseCreated, DatabaseInfo, DatabaseQuota, Directory, ErrorBody, Group, GroupEndpoints,
    KeyList, KeyView, Member, NewDatabase, Placed, PushedKey, TableCreated, TenantQuota, route,
};
pub use shoal_wire::internal::{Heartbeat, KeyUse, NodeId};
use shoal_wire::ndbinfo::Rows;
use shoal_wire::schema::{DatabaseName, IndexDef, TableDef, TableName, TenantId};
use shoal_wire::secret::ClusterSecret;

use crate::error::ApiError;
use crate::keys::ApiKeyId;
use crate::server::{App, Body};
use crate::store::now_ms;

/// How often data nodes report themselves.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);
/// A node not heard from for this long is down: nothing new is placed on it.
pub const DOWN_AFTER_MS: i64 = 15_000;
/// How often every node is brought up to date.
pub const RECONCILE_EVERY: Duration = Duration::from_secs(5);

/// Most key uses one report may carry.
pub const MAX_KEY_USES: usize = 10_000;

/// Whether a report is one this takes: URLs and names of sane shapes and
/// sizes, a bounded number of key uses.
fn check(beat: &Heartbeat) -> Result<(), ApiError> {
    for (field, url) in [
        ("internal_url", &beat.internal_url),
        ("rest_url", &beat.rest_url),
    ] {
        let ok = url.len() <= 200
            && url.strip_prefix("http://").is_some_and(|rest| {
                !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
            });
        if !ok {
            return Err(ApiError::invalid(format!("{field}: not http://host:port")));
        }
    }
    let addr_ok = |addr: &str| {
        addr.len() <= 200 && addr.contains(':') && addr.bytes().all(|b| b.is_ascii_graphic())
    };
    if !addr_ok(&beat.resp_addr) {
        return Err(ApiError::invalid("resp_addr: not host:port"));
    }
    if !beat.peer_addr.is_empty() && !addr_ok(&beat.peer_addr) {
        return Err(ApiError::invalid("peer_addr: not host:port"));
    }
    if !beat.mysql_addr.is_empty() && !addr_ok(&beat.mysql_addr) {
        return Err(ApiError::invalid("mysql_addr: not host:port"));
    }
    if beat.boot_id.is_empty() || beat.boot_id.len() > 64 {
        return Err(ApiError::invalid("boot_id: 1 to 64 characters"));
    }
    if beat.keys_used.len() > MAX_KEY_USES {
        return Err(ApiError::invalid(format!(
            "keys_used: at most {MAX_KEY_USES} a report"
        )));
    }
    Ok(())
}

/// `POST /internal/v1/datanodes/heartbeat` (cluster secret): registers a
/// node or refreshes what is known of it. A node that has restarted is
/// brought up to date at once.
pub async fn heartbeat(
    State(app): State<Arc<App>>,
    Body(beat): Body<Heartbeat>,
) -> Result<Json<Value>, ApiError> {
    check(&beat)?;
    let now = now_ms();
    let known: Option<String> =
        sqlx::query_scalar("SELECT boot_id FROM datanodes WHERE node_id = $1")
            .bind(i64::from(beat.node_id))
            .fetch_optional(&app.store.pool)
            .await?;
    let (memory, used) = (clamp(beat.data_memory_bytes), clamp(beat.used_bytes));
    sqlx::query(
        "INSERT INTO datanodes (node_id, internal_url, rest_url, resp_addr, \
         data_memory_bytes, used_bytes, boot_id, registered_at, last_seen, peer_addr, \
         mysql_addr) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10) \
         ON CONFLICT (node_id) DO UPDATE SET internal_url = excluded.internal_url, \
         rest_url = excluded.rest_url, resp_addr = excluded.resp_addr, \
         data_memory_bytes = excluded.data_memory_bytes, used_bytes = excluded.used_bytes, \
         boot_id = excluded.boot_id, last_seen = excluded.last_seen, \
         peer_addr = excluded.peer_addr, mysql_addr = excluded.mysql_addr",
    )
    .bind(i64::from(beat.node_id))
    .bind(&beat.internal_url)
    .bind(&beat.rest_url)
    .bind(&beat.resp_addr)
    .bind(memory)
    .bind(used)
    .bind(&beat.boot_id)
    .bind(now)
    .bind(&beat.peer_addr)
    .bind(&beat.mysql_addr)
    .execute(&app.store.pool)
    .await?;
    if known.is_none() {
        tracing::info!(node = %beat.node_id, url = %beat.internal_url, "data node registered");
    }
    let formed = form_groups(&app).await?;
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
    if formed || known.as_deref() != Some(beat.boot_id.as_str()) {
        app.reconcile_now.notify_one();
    }
    Ok(Json(json!({"node_id": beat.node_id})))
}

/// Puts the registered nodes that are in no group into groups of
/// `--replicas`, in node-id order, as soon as enough have registered to
/// fill one (as NDB forms node groups from its configuration): whether it
/// formed any. Groups are numbered on from the highest.
async fn form_groups(app: &App) -> sqlx::Result<bool> {
    let replicas = usize::from(app.config.replicas);
    let mut tx = app.store.begin_write().await?;
    let waiting: Vec<i64> = sqlx::query_scalar(
        "SELECT node_id FROM datanodes WHERE node_group IS NULL ORDER BY node_id",
    )
    .fetch_all(&mut *tx)
    .await?;
    if waiting.len() < replicas {
        return Ok(false);
    }
    let highest: Option<i64> = sqlx::query_scalar("SELECT MAX(node_group) FROM datanodes")
        .fetch_one(&mut *tx)
        .await?;
    let first = highest.map_or(0, |g| g + 1);
    for (group, members) in (first..).zip(waiting.chunks_exact(replicas)) {
        for &node in members {
            sqlx::query("UPDATE datanodes SET node_group = $1 WHERE node_id = $2")
                .bind(group)
                .bind(node)
                .execute(&mut *tx)
                .await?;
        }
        tracing::info!(node_group = group, nodes = ?members, "node group formed");
    }
    tx.commit().await?;
    Ok(true)
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A data node as the registry has it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct NodeRow {
    #[sqlx(try_from = "i64")]
    pub node_id: NodeId,
    pub internal_url: String,
    pub rest_url: String,
    pub resp_addr: String,
    pub peer_addr: String,
    pub mysql_addr: String,
    pub data_memory_bytes: i64,
    pub used_bytes: i64,
    pub last_seen: i64,
    pub boot_id: String,
    /// The boot whose quotas were last pushed in full.
    pub quotas_synced_boot: String,
    /// None until enough nodes have registered to form its group.
    pub node_group: Option<i64>,
}

impl NodeRow {
    pub fn up(&self, now: i64) -> bool {
        now - self.last_seen <= DOWN_AFTER_MS
    }

    /// The node as the API lists it.
    pub fn listed(&self, now: i64) -> DataNode {
        DataNode {
            node_id: self.node_id,
            node_group: self.group(),
            internal_url: self.internal_url.clone(),
            rest_url: self.rest_url.clone(),
            resp_addr: self.resp_addr.clone(),
            peer_addr: self.peer_addr.clone(),
            mysql_addr: self.mysql_addr.clone(),
            data_memory_bytes: self.data_memory_bytes,
            used_bytes: self.used_bytes,
            last_seen: self.last_seen,
            status: if self.up(now) { "up" } else { "down" }.into(),
        }
    }

    pub fn group(&self) -> Option<u32> {
        self.node_group.and_then(|g| u32::try_from(g).ok())
    }

    /// The node as its group lists it to its members.
    pub fn member(&self) -> Member {
        Member {
            node_id: self.node_id,
            peer_addr: self.peer_addr.clone(),
            rest_url: self.rest_url.clone(),
            resp_addr: self.resp_addr.clone(),
        }
    }

    /// Where applications reach it.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint {
            node_id: self.node_id,
            rest_url: self.rest_url.clone(),
            resp_addr: self.resp_addr.clone(),
        }
    }
}

const NODE_COLUMNS: &str = "node_id, internal_url, rest_url, resp_addr, peer_addr, mysql_addr, \
                            data_memory_bytes, used_bytes, last_seen, boot_id, \
                            quotas_synced_boot, node_group";

pub async fn all(app: &App) -> sqlx::Result<Vec<NodeRow>> {
    sqlx::query_as(&format!(
        "SELECT {NODE_COLUMNS} FROM datanodes ORDER BY node_id"
    ))
    .fetch_all(&app.store.pool)
    .await
}

pub async fn get(app: &App, node_id: NodeId) -> sqlx::Result<Option<NodeRow>> {
    sqlx::query_as(&format!(
        "SELECT {NODE_COLUMNS} FROM datanodes WHERE node_id = $1"
    ))
    .bind(i64::from(node_id))
    .fetch_optional(&app.store.pool)
    .await
}

/// The nodes of group `group`, in node-id order.
pub async fn members(app: &App, group: i64) -> sqlx::Result<Vec<NodeRow>> {
    sqlx::query_as(&format!(
        "SELECT {NODE_COLUMNS} FROM datanodes WHERE node_group = $1 ORDER BY node_id"
    ))
    .bind(group)
    .fetch_all(&app.store.pool)
    .await
}

/// Where a new database goes.
#[derive(Debug)]
pub struct Placement {
    pub group: i64,
    /// Every node of the group, the primary first.
    pub nodes: Vec<NodeRow>,
}

/// The node group a new database goes to — of the groups whose nodes are
/// all up, the one using the least memory (its fullest replica), and of
/// those alike the one holding the fewest databases (memory is as the
/// nodes last reported it: databases made in a burst have not moved it
/// yet, and would all go to one group) — and its
/// primary there: the node that is primary for the fewest databases, so
/// that primaries spread over the group.
pub async fn place(app: &App) -> Result<Placement, ApiError> {
    let now = now_ms();
    let mut groups: std::collections::BTreeMap<i64, Vec<NodeRow>> = Default::default();
    for node in all(app).await? {
        if let Some(group) = node.node_group {
            groups.entry(group).or_default().push(node);
        }
    }
    // Databases held, by group and by their primary there.
    let held: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT node_group, node_id, COUNT(*) FROM databases \
         WHERE node_group IS NOT NULL GROUP BY node_group, node_id",
    )
    .fetch_all(&app.store.pool)
    .await?;
    let databases =
        |group: i64| -> i64 { (held.iter().filter(|h| h.0 == group)).map(|h| h.2).sum() };
    let (group, mut nodes) = groups
        .into_iter()
        .filter(|(_, nodes)| nodes.iter().all(|n| n.up(now)))
        .min_by_key(|(group, nodes)| {
            let memory = nodes.iter().map(|n| n.used_bytes).max();
            (memory, databases(*group), *group)
        })
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "NO_DATA_NODE",
                "no node group has all its data nodes up to place the database on; try again shortly",
            )
        })?;
    let count = |n: &NodeRow| {
        (held.iter())
            .find(|h| h.0 == group && h.1 == i64::from(n.node_id))
            .map_or(0, |h| h.2)
    };
    let primary = (0..nodes.len())
        .min_by_key(|&i| (count(&nodes[i]), nodes[i].node_id))
        .expect("a group has nodes");
    nodes[..=primary].rotate_right(1);
    Ok(Placement { group, nodes })
}

/// Calls data nodes' internal APIs with the cluster secret: a method per
/// route, each with the request and reply types of `shoal_wire::internal`.
#[derive(Debug, Clone)]
pub struct NodeClient {
    http: reqwest::Client,
    secret: ClusterSecret,
}

/// Why a call to a data node failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("data node {node} did not answer: {reason}")]
    Unreachable { node: NodeId, reason: String },
    #[error("data node {node} refused: {status} {code}: {message}")]
    Refused {
        node: NodeId,
        status: StatusCode,
        code: String,
        message: String,
    },
    #[error("data node {node} answered what this does not read: {reason}")]
    Garbled { node: NodeId, reason: String },
}

impl NodeError {
    pub fn code(&self) -> Option<&str> {
        match self {
            NodeError::Refused { code, .. } => Some(code),
            NodeError::Unreachable { .. } | NodeError::Garbled { .. } => None,
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
    #[error("the group's view: {0}")]
    View(String),
}

/// A node's refusal of what the caller asked for is the caller's error; a
/// node that cannot be reached is the platform's.
impl From<NodeError> for ApiError {
    fn from(e: NodeError) -> ApiError {
        match e {
            NodeError::Unreachable { node, reason } | NodeError::Garbled { node, reason } => {
                tracing::warn!(%node, %reason, "data node unreachable");
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
                        tracing::error!(%node, %code, %message, "data node refused a push");
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
                tracing::error!(%node, %status, %code, %message, "data node failed a push");
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

    /// Tells `node` the group it is in.
    pub async fn put_group(&self, node: &NodeRow, group: &Group) -> Result<(), NodeError> {
        self.send(node, Method::PUT, route::GROUP, Some(group))
            .await
    }

    /// Tells `node` where every database of the cluster is served.
    pub async fn put_directory(
        &self,
        node: &NodeRow,
        directory: &Directory,
    ) -> Result<(), NodeError> {
        self.send(node, Method::PUT, route::DIRECTORY, Some(directory))
            .await
    }

    /// Every database `node` holds, with its tables.
    pub async fn databases(&self, node: &NodeRow) -> Result<Vec<DatabaseInfo>, NodeError> {
        self.send(node, Method::GET, route::DATABASES, None::<&()>)
            .await
    }

    pub async fn create_database(
        &self,
        node: &NodeRow,
        db: &NewDatabase,
    ) -> Result<DatabaseCreated, NodeError> {
        self.send(node, Method::POST, route::DATABASES, Some(db))
            .await
    }

    pub async fn drop_database(&self, node: &NodeRow, db: &DatabaseName) -> Result<(), NodeError> {
        let path = route::database(db.as_str());
        self.send(node, Method::DELETE, &path, None::<&()>).await
    }

    pub async fn create_table(
        &self,
        node: &NodeRow,
        db: &DatabaseName,
        table: &TableDef,
    ) -> Result<TableCreated, NodeError> {
        let path = route::tables(db.as_str());
        self.send(node, Method::POST, &path, Some(table)).await
    }

    pub async fn drop_table(
        &self,
        node: &NodeRow,
        db: &DatabaseName,
        table: &TableName,
    ) -> Result<(), NodeError> {
        let path = route::table(db.as_str(), table.as_str());
        self.send(node, Method::DELETE, &path, None::<&()>).await
    }

    pub async fn add_index(
        &self,
        node: &NodeRow,
        db: &DatabaseName,
        table: &TableName,
        index: &IndexDef,
    ) -> Result<TableCreated, NodeError> {
        let path = route::indexes(db.as_str(), table.as_str());
        self.send(node, Method::POST, &path, Some(index)).await
    }

    pub async fn drop_index(
        &self,
        node: &NodeRow,
        db: &DatabaseName,
        table: &TableName,
        index: &str,
    ) -> Result<(), NodeError> {
        let path = route::index(db.as_str(), table.as_str(), index);
        self.send(node, Method::DELETE, &path, None::<&()>).await
    }

    pub async fn set_database_quota(
        &self,
        node: &NodeRow,
        db: &DatabaseName,
        quota: &Quota,
    ) -> Result<DatabaseQuota, NodeError> {
        let path = route::database_quota(db.as_str());
        self.send(node, Method::PUT, &path, Some(quota)).await
    }

    pub async fn clear_database_quota(
        &self,
        node: &NodeRow,
        db: &DatabaseName,
    ) -> Result<(), NodeError> {
        let path = route::database_quota(db.as_str());
        self.send(node, Method::DELETE, &path, None::<&()>).await
    }

    pub async fn set_tenant_quota(
        &self,
        node: &NodeRow,
        tenant: &TenantId,
        quota: &Quota,
    ) -> Result<TenantQuota, NodeError> {
        let path = route::tenant_quota(tenant.as_str());
        self.send(node, Method::PUT, &path, Some(quota)).await
    }

    pub async fn clear_tenant_quota(
        &self,
        node: &NodeRow,
        tenant: &TenantId,
    ) -> Result<(), NodeError> {
        let path = route::tenant_quota(tenant.as_str());
        self.send(node, Method::DELETE, &path, None::<&()>).await
    }

    /// The API keys `node` holds (without their hashes).
    pub async fn keys(&self, node: &NodeRow) -> Result<KeyList, NodeError> {
        self.send(node, Method::GET, route::API_KEYS, None::<&()>)
            .await
    }

    pub async fn put_key(
        &self,
        node: &NodeRow,
        prefix: &ApiKeyId,
        key: &PushedKey,
    ) -> Result<KeyView, NodeError> {
        let path = route::api_key(prefix.as_str());
        self.send(node, Method::PUT, &path, Some(key)).await
    }

    pub async fn remove_key(&self, node: &NodeRow, prefix: &ApiKeyId) -> Result<(), NodeError> {
        let path = route::api_key(prefix.as_str());
        self.send(node, Method::DELETE, &path, None::<&()>).await
    }

    /// A page of `table`'s rows on `node`, as `scan` (a REST scan request)
    /// asks.
    pub async fn scan(
        &self,
        node: &NodeRow,
        db: &DatabaseName,
        table: &TableName,
        scan: &Value,
    ) -> Result<Value, NodeError> {
        let path = route::scan(db.as_str(), table.as_str());
        self.send(node, Method::POST, &path, Some(scan)).await
    }

    /// Reads and writes rows of `db` on `node` (the internal transaction).
    pub async fn transaction(
        &self,
        node: &NodeRow,
        db: &DatabaseName,
        request: &Value,
    ) -> Result<Value, NodeError> {
        let path = route::transaction(db.as_str());
        self.send(node, Method::POST, &path, Some(request)).await
    }

    /// The rows of an ndbinfo table or view of `node`.
    pub async fn ndbinfo(&self, node: &NodeRow, table: &str) -> Result<Rows, NodeError> {
        let path = route::ndbinfo(table);
        self.send(node, Method::GET, &path, None::<&()>).await
    }

    /// Sends `method path` with `body` to `node`; answers its reply (from
    /// `null` when it has no body).
    async fn send<R: DeserializeOwned>(
        &self,
        node: &NodeRow,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
    ) -> Result<R, NodeError> {
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
        if status.is_success() {
            let read = match bytes.is_empty() {
                true => serde_json::from_value(Value::Null),
                false => serde_json::from_slice(&bytes),
            };
            return read.map_err(|e| NodeError::Garbled {
                node: node.node_id,
                reason: format!("{path}: {e}"),
            });
        }
        let error = serde_json::from_slice::<ErrorBody>(&bytes).map(|b| b.error);
        let (code, message) = error.map_or_else(|_| Default::default(), |e| (e.code, e.message));
        Err(NodeError::Refused {
            node: node.node_id,
            status,
            code,
            message,
        })
    }
}

/// Brings every node up to date: now, whenever a node (re)registers, and
/// every `RECONCILE_EVERY`.
pub async fn reconcile_loop(app: Arc<App>) {
    loop {
        let directory = directory(&app).await;
        for node in all(&app).await.unwrap_or_default() {
            if !node.up(now_ms()) {
                continue;
            }
            let done = async {
                push_group(&app, &node).await?;
                if let Ok(directory) = &directory {
                    push_directory(&app, &node, directory).await?;
                }
                crate::databases::reconcile(&app, &node).await?;
                crate::keys::reconcile(&app, &node).await?;
                crate::quotas::reconcile(&app, &node).await
            }
            .await;
            if let Err(e) = done {
                tracing::warn!(node = %node.node_id, error = %e, "reconcile incomplete; retrying");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(RECONCILE_EVERY) => {}
            () = app.reconcile_now.notified() => {}
        }
    }
}

/// Tells `node` its group, when it is in one.
async fn push_group(app: &App, node: &NodeRow) -> Result<(), ReconcileError> {
    let Some(group) = node.node_group else {
        return Ok(());
    };
    let members = members(app, group).await?;
    let view = crate::views::current(app, group)
        .await
        .map_err(|e| ReconcileError::View(format!("{e:?}")))?;
    let group = Group {
        node_group: node.group().unwrap_or_default(),
        members: members.iter().map(NodeRow::member).collect(),
        view,
    };
    Ok(app.nodes.put_group(node, &group).await?)
}

/// Where the cluster's databases are served: each node group's nodes
/// (in node-id order), each ready database's group.
async fn directory(app: &App) -> sqlx::Result<Directory> {
    let nodes = all(app).await?;
    let mut groups: Vec<GroupEndpoints> = Vec::new();
    for node in &nodes {
        let Some(group) = node.group() else {
            continue;
        };
        match groups.iter_mut().find(|g| g.node_group == group) {
            Some(g) => g.nodes.push(node.endpoint()),
            None => groups.push(GroupEndpoints {
                node_group: group,
                nodes: vec![node.endpoint()],
            }),
        }
    }
    let placed: Vec<(String, i64)> = sqlx::query_as(
        "SELECT name, node_group FROM databases \
         WHERE status = 'ready' AND node_group IS NOT NULL ORDER BY name",
    )
    .fetch_all(&app.store.pool)
    .await?;
    let databases = (placed.into_iter())
        .filter_map(|(name, group)| {
            let node_group = u32::try_from(group).ok()?;
            Some(Placed { name, node_group })
        })
        .collect();
    Ok(Directory { groups, databases })
}

/// What each node was last told of where databases are served: its boot
/// and a hash of the directory.
#[derive(Debug, Default)]
pub struct Told(std::sync::Mutex<std::collections::HashMap<NodeId, (String, u64)>>);

/// Tells `node` where every database is served, if that changed since it
/// was last told (or it has started again since).
async fn push_directory(
    app: &App,
    node: &NodeRow,
    directory: &Directory,
) -> Result<(), ReconcileError> {
    use std::hash::{Hash, Hasher};
    let mut hash = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(directory)
        .expect("a directory serializes")
        .hash(&mut hash);
    let told = (node.boot_id.clone(), hash.finish());
    let last = |app: &App| {
        let told = app.directories.0.lock().unwrap_or_else(|e| e.into_inner());
        told.get(&node.node_id).cloned()
    };
    if last(app).as_ref() == Some(&told) {
        return Ok(());
    }
    app.nodes.put_directory(node, directory).await?;
    let mut all = app.directories.0.lock().unwrap_or_else(|e| e.into_inner());
    all.insert(node.node_id, told);
    Ok(())
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
    let datanodes = all(&app).await?.iter().map(|n| n.listed(now)).collect();
    let listed = serde_json::to_value(DataNodeList { datanodes }).expect("nodes serialize");
    Ok(Json(listed))
}
