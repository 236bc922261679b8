//! The REST data API (port 4406), in the shapes of RonDB's REST server.
//!
//! | route | body | answer |
//! | --- | --- | --- |
//! | `GET /0.1.0/ping` | | 200 |
//! | `GET /0.1.0/health` | | `1` as RonDB answers a healthy cluster, or 503 `{"status": "failed", "reason"}` once the redo log failed |
//! | `POST /0.1.0/{db}/{table}/pk-read` | `{"filters": [{"column", "value"}], "readColumns"?: [{"column"}] (not of the key), "operationId"?}` | `{"operationId"?, "data": {column: value}}`, the columns asked for or every one not of the key (as RonDB); 404 when absent |
//! | `POST /0.1.0/{db}/{table}/pk-insert` · `pk-update` · `pk-write` | `{"row": {column: value}}`, the whole key in it, or RonDB's `{"filters": [key], "writeColumns": [{"column", "value"}]}` | `{"outcome": "inserted" \| "updated"}` |
//! | `POST /0.1.0/{db}/{table}/pk-delete` | `{"filters": […]}` | `{"outcome": "deleted"}`; 404 when absent |
//! | `POST /0.1.0/batch` | `{"operations": [{"method": "POST", "relative-url": "db/table/pk-read", "body": {…}}]}` | `{"result": [{"code", "body", "message"?}]}` (RonDB's shape), each operation on its own |
//! | `POST /0.1.0/batchwrite` · `batchdelete` | RonDB's: the same, of `pk-write`/`pk-update`/`pk-insert` (`{"filters", "writeColumns": [{"column", "value"}]}`) or of `pk-delete` operations | the same |
//! | `POST /0.1.0/transaction` | the same, every operation in one database | the same; all commit or none does |
//! | `POST /0.1.0/{db}/{table}/scan` | `{"index"?, "lower"?: {"values", "inclusive"?}, "upper"?, "readColumns"?, "limit"?, "after"?}` | `{"data": [rows in index order], "next": cursor or null}` (see `scan`) |
//!
//! Every route but `ping` and `health` needs `X-API-KEY: <prefix>.<secret>`.
//! Values are checked against the table's columns: numbers and strings as
//! JSON has them, binary as base64, dates as strings. Errors answer
//! `{"error": {"code", "message", "number"?}}` with the matching status;
//! throttling adds `retry_after_ms` and `Retry-After`.
//!
//! A batch becomes one request to the transaction coordinator per database
//! it touches; a transaction is one request.
//!
//! In a node group, a request that writes a database this node holds a
//! backup of is sent on to the database's primary, as it came, and its
//! answer given back (`forward`); reads are served from the local replica,
//! which holds every acknowledged write.

mod ronsql;
pub(crate) mod scan;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value as JsonValue, json};
use shoal_wire::schema::TableDef;

use super::error::ApiError;
use super::serve::Limits;
use super::{AccessError, access};
use crate::api::json::{
    JsonError, JsonRow, RestValue, key_from_json, rest_value_to_json, row_from_json,
    value_from_json,
};
use crate::cluster::{Answered, Cluster, ForwardError, Forwarded, Handler, ServedElsewhere};
use crate::node::Engine;
use crate::node::keys::ApiKey;
use crate::tc::batch::{Batch, Outcome};
use crate::tc::{Commit, Grant, Role, TcError};
use crate::tc::{Database, Table};
use crate::types::value::Value;

/// Most operations in one batch or transaction.
pub(crate) const MAX_OPERATIONS: usize = 1000;
/// Header that carries the API key.
pub(crate) const API_KEY_HEADER: &str = "x-api-key";

/// Header a request sent on to a database's primary carries: the node it
/// came through. A forwarded request is never sent on again.
pub(crate) const FORWARDED_HEADER: &str = "x-shoal-forwarded-by";
/// Header a request sent on carries: the view of the node it came
/// through. A node that knows an older one catches up before it answers.
pub(crate) const VIEW_HEADER: &str = "x-shoal-view";

/// Longest a write waits, in all, for its database's primary to settle —
/// handed on, taken over after a failure, or let in — before it is
/// refused (retryably).
const SETTLE_WITHIN: Duration = Duration::from_secs(2);
/// How long the answer of a primary that the view has moved away from is
/// still awaited: one handing its databases on answers what it holds.
const MOVED_GRACE: Duration = Duration::from_millis(200);

#[derive(Clone)]
struct AppState {
    engine: Engine,
    cluster: Cluster,
    /// Longest a request's body may take to arrive, whole.
    body_timeout: std::time::Duration,
}

/// A request's body, read within the front end's size limit and its body
/// timeout; a body over the limit, one that breaks off, or one that is
/// too slow answers the JSON error shape like every other refusal.
struct Body(Bytes);

impl FromRequest<AppState> for Body {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let read = tokio::time::timeout(state.body_timeout, Bytes::from_request(req, state));
        let Ok(read) = read.await else {
            return Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "REQUEST_TIMEOUT",
                format!(
                    "the request body did not arrive within {} s (the node's --idle-timeout)",
                    state.body_timeout.as_secs()
                ),
            ));
        };
        read.map(Body).map_err(|e| {
            let status = e.status();
            if status == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    status,
                    "REQUEST_TOO_LARGE",
                    "the request body is larger than this node takes (its --max-request-size)",
                )
            } else {
                ApiError::new(status, "BAD_REQUEST", e.body_text())
            }
        })
    }
}

/// Every route of the REST data API.
pub(crate) fn router(engine: Engine, cluster: Cluster, limits: Limits) -> Router {
    let app = Router::new()
        .route("/0.1.0/ping", get(|| async { StatusCode::OK }))
        .route("/0.1.0/health", get(health))
        .route(Batched::Any.path(), batch_route(Batched::Any))
        .route(Batched::Writes.path(), batch_route(Batched::Writes))
        .route(Batched::Deletes.path(), batch_route(Batched::Deletes))
        .route("/0.1.0/transaction", post(transaction))
        .route("/0.1.0/ronsql", post(ronsql::ronsql))
        .route("/0.1.0/{db}/{table}/scan", post(scan::scan))
        .route("/0.1.0/{db}/{table}/{op}", post(single))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "NOT_FOUND", "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "METHOD_NOT_ALLOWED",
                "this route takes another method (POST, or GET for ping and health)",
            )
        })
        .layer(DefaultBodyLimit::max(limits.max_request_bytes))
        .with_state(AppState {
            engine,
            cluster: cluster.clone(),
            body_timeout: limits.idle_timeout,
        });
    // Requests other nodes of the group send on to this one take the same
    // routes.
    let routes = app.clone();
    cluster.serve_forwarded(Handler::new(move |request| {
        answer_forwarded(routes.clone(), request)
    }));
    app
}

async fn health(State(state): State<AppState>) -> (StatusCode, Json<JsonValue>) {
    match state.engine.health() {
        // RonDB's REST server answers its health as a bare number, 1 when
        // the data nodes serve.
        Ok(()) => (StatusCode::OK, Json(json!(1))),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "failed", "reason": reason})),
        ),
    }
}

impl From<AccessError> for ApiError {
    fn from(e: AccessError) -> Self {
        let (status, code) = match e {
            AccessError::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, "UNAUTHENTICATED"),
            AccessError::NotGranted(_) => (StatusCode::FORBIDDEN, "FORBIDDEN"),
            AccessError::NoSuchDatabase(_) => (StatusCode::NOT_FOUND, "NO_SUCH_DATABASE"),
        };
        ApiError::new(status, code, e.to_string()).challenge("ApiKey header=\"X-API-KEY\"")
    }
}

impl From<JsonError> for ApiError {
    fn from(e: JsonError) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "INVALID_VALUE", e.to_string())
    }
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "BAD_REQUEST", message)
}

/// The key the request carries, checked.
/// Refuses a request for database `db` when another node group serves it
/// (421, with that group's addresses): before the key is looked at, which
/// only the nodes of the database's group hold.
fn elsewhere(state: &AppState, db: &str) -> Result<(), ApiError> {
    match state.cluster.served_elsewhere(db) {
        None => Ok(()),
        Some(there) => Err(wrong_group(db, &there)),
    }
}

/// Refuses a batch or transaction every operation of which names a
/// database another node group serves — the same group.
fn all_elsewhere(state: &AppState, operations: &[SubOperation]) -> Result<(), ApiError> {
    let mut found: Option<(&str, ServedElsewhere)> = None;
    for op in operations {
        let Some(db) = database_of(&op.relative_url) else {
            return Ok(());
        };
        match (&found, state.cluster.served_elsewhere(db)) {
            (_, None) => return Ok(()),
            (Some((_, first)), Some(there)) if first.node_group != there.node_group => {
                return Ok(());
            }
            (Some(_), Some(_)) => {}
            (None, Some(there)) => found = Some((db, there)),
        }
    }
    match found {
        Some((db, there)) => Err(wrong_group(db, &there)),
        None => Ok(()),
    }
}

/// The database a relative URL names.
fn database_of(relative_url: &str) -> Option<&str> {
    let url = relative_url.trim_start_matches('/');
    let url = url.strip_prefix("0.1.0/").unwrap_or(url);
    url.split('/').next().filter(|db| !db.is_empty())
}

/// 421: database `db` is served by the node group `there`.
fn wrong_group(db: &str, there: &ServedElsewhere) -> ApiError {
    let nodes: Vec<JsonValue> = (there.nodes.iter())
        .map(|n| json!({"node_id": n.node_id, "rest_url": n.rest_url, "resp_addr": n.resp_addr}))
        .collect();
    ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        "WRONG_NODE_GROUP",
        format!(
            "database '{db}' is served by node group {}, not this node's: {}",
            there.node_group,
            there.rest_urls()
        ),
    )
    .with("node_group", there.node_group)
    .with("nodes", nodes)
}

fn key(state: &AppState, headers: &HeaderMap) -> Result<Arc<ApiKey>, ApiError> {
    let presented = headers
        .get(API_KEY_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    let key = state
        .engine
        .api_keys()
        .verify(presented)
        .map_err(AccessError::from)?;
    Ok(key)
}

/// Parses a JSON body, answering what is wrong with it.
fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| bad_request(format!("invalid JSON body: {e}")))
}

/// What one operation asks, as sent.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpBody {
    filters: Option<Vec<Filter>>,
    #[serde(rename = "readColumns")]
    read_columns: Option<Vec<ReadColumn>>,
    #[serde(rename = "operationId")]
    operation_id: Option<String>,
    row: Option<JsonRow>,
    /// RonDB's form of a write: the key in `filters`, the other columns here.
    #[serde(rename = "writeColumns")]
    write_columns: Option<Vec<Filter>>,
}

/// Longest `operationId`, in characters, as RonDB's REST server takes.
const MAX_OPERATION_ID: usize = 256;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Filter {
    column: String,
    value: JsonValue,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadColumn {
    column: String,
    /// RonDB's; only its `default` is known.
    #[serde(rename = "dataReturnType")]
    data_return_type: Option<String>,
}

impl ReadColumn {
    /// The position of the column named in table `def`.
    fn position_in(&self, def: &TableDef) -> Result<usize, ApiError> {
        if (self.data_return_type.as_ref()).is_some_and(|t| !t.eq_ignore_ascii_case("default")) {
            return Err(bad_request("the only dataReturnType is 'default'"));
        }
        (def.columns.iter())
            .position(|d| d.name.as_str() == self.column)
            .ok_or_else(|| {
                bad_request(format!(
                    "table '{}' has no column '{}'",
                    def.name,
                    self.column.chars().take(64).collect::<String>()
                ))
            })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Read,
    Insert,
    Update,
    Write,
    Delete,
}

impl Method {
    fn parse(op: &str) -> Result<Method, ApiError> {
        Ok(match op {
            "pk-read" => Method::Read,
            "pk-insert" => Method::Insert,
            "pk-update" => Method::Update,
            "pk-write" => Method::Write,
            "pk-delete" => Method::Delete,
            _ => {
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    "NOT_FOUND",
                    format!("no operation '{}'", op.chars().take(32).collect::<String>()),
                ));
            }
        })
    }
}

/// How to answer an operation once it ran.
struct Answer {
    /// For reads: the columns to answer, by index; `None` for all.
    columns: Option<Vec<usize>>,
    operation_id: Option<String>,
}

/// Adds one operation on `table` to `batch`, checked against its columns.
fn add(
    batch: &mut Batch,
    table: &Arc<Table>,
    method: Method,
    body: OpBody,
) -> Result<Answer, ApiError> {
    let def = table.def();
    let invalid = |e: crate::storage::codec::ValueError| {
        ApiError::new(StatusCode::BAD_REQUEST, "INVALID_VALUE", e.to_string())
    };
    let only = |what: &str| bad_request(format!("this operation takes {what}"));
    if (body.operation_id.as_ref()).is_some_and(|id| id.chars().count() > MAX_OPERATION_ID) {
        return Err(bad_request(format!(
            "operationId is longer than {MAX_OPERATION_ID} characters"
        )));
    }
    let is_key = |c: usize| def.primary_key.contains(&def.columns[c].name);
    let columns = match (&body.read_columns, method) {
        // As RonDB: the row's columns that are not the key (the filters
        // give that).
        (None, Method::Read) => Some((0..def.columns.len()).filter(|&c| !is_key(c)).collect()),
        (None, _) => None,
        (Some(read), Method::Read) if read.is_empty() => {
            return Err(bad_request("readColumns names no column"));
        }
        (Some(read), Method::Read) => Some(
            read.iter()
                .map(|c| c.position_in(def))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        (Some(_), _) => return Err(only("no 'readColumns'")),
    };
    if let Some(columns) = columns.as_ref().filter(|_| body.read_columns.is_some()) {
        if let Some(twice) = (1..columns.len()).find(|&i| columns[..i].contains(&columns[i])) {
            return Err(bad_request(format!(
                "readColumns names '{}' twice",
                def.columns[columns[twice]].name
            )));
        }
        if let Some(&key) = columns.iter().find(|&&c| is_key(c)) {
            return Err(bad_request(format!(
                "readColumns names '{}', a column of the key: the filters give it",
                def.columns[key].name
            )));
        }
    }
    match method {
        Method::Read | Method::Delete => {
            let (Some(filters), None) = (&body.filters, &body.row) else {
                return Err(only("'filters': the whole primary key, and no 'row'"));
            };
            let key = key_of(table, filters)?;
            if method == Method::Read {
                batch.read(table, &key).map_err(invalid)?;
            } else {
                batch.delete(table, &key).map_err(invalid)?;
            }
        }
        Method::Insert | Method::Update | Method::Write => {
            let joined;
            let row = match (&body.filters, &body.row, &body.write_columns) {
                (None, Some(row), None) => row,
                (Some(filters), None, Some(columns)) => {
                    joined = join_columns(filters, columns);
                    &joined
                }
                _ => {
                    return Err(only(
                        "'row' (an object of column to value), or RonDB's 'filters' (the key) and 'writeColumns' (the other columns)",
                    ));
                }
            };
            let row = row_from_json(table, row)?;
            match method {
                Method::Insert => batch.insert(table, &row),
                Method::Update => batch.update(table, &row),
                _ => batch.write(table, &row),
            }
            .map_err(invalid)?;
        }
    }
    Ok(Answer {
        columns,
        operation_id: body.operation_id,
    })
}

/// A row from RonDB's form of a write: the key's `filters` and the other
/// `columns` (a column named twice is refused by `row_from_json`).
fn join_columns(filters: &[Filter], columns: &[Filter]) -> JsonRow {
    let all = filters.iter().chain(columns);
    JsonRow(all.map(|c| (c.column.clone(), c.value.clone())).collect())
}

/// The primary key that `filters` give, in key order.
fn key_of(table: &Table, filters: &[Filter]) -> Result<Vec<Value>, ApiError> {
    let def = table.def();
    if filters.len() > def.primary_key.len() {
        return Err(bad_request(format!(
            "the primary key of '{}' has {} columns; {} filters were given",
            def.name,
            def.primary_key.len(),
            filters.len()
        )));
    }
    if filters.len() == 1 && def.primary_key.len() == 1 {
        // The common case, without building a map.
        let column = def
            .columns
            .iter()
            .find(|c| c.name == def.primary_key[0])
            .expect("the key is a column");
        if column.name.as_str() != filters[0].column {
            return Err(bad_request(format!(
                "filter on '{}': the primary key of '{}' is '{}'",
                filters[0].column.chars().take(64).collect::<String>(),
                def.name,
                column.name
            )));
        }
        return Ok(vec![value_from_json(column, &filters[0].value)?]);
    }
    let key = JsonRow(
        filters
            .iter()
            .map(|f| (f.column.clone(), f.value.clone()))
            .collect(),
    );
    Ok(key_from_json(table, &key)?)
}

/// An answer written out as JSON text: a row's decimals keep every digit
/// (`RestValue`), which a `serde_json::Value` could not hold.
type Written = Box<RawValue>;

fn written(answer: &impl Serialize) -> Written {
    serde_json::value::to_raw_value(answer).expect("an answer is JSON")
}

/// A row read: its columns (in name order) and the operation's id.
#[derive(Serialize)]
struct Found<'a> {
    data: BTreeMap<&'a str, RestValue>,
    #[serde(rename = "operationId", skip_serializing_if = "Option::is_none")]
    operation_id: Option<&'a str>,
}

/// The answer to operation `i` of `batch`, which ran.
fn outcome(batch: &Batch, i: usize, answer: &Answer) -> Result<Written, ApiError> {
    let outcome = batch.result(i)?;
    let word = match outcome {
        Outcome::Found(row) => {
            let def = row.table().def();
            let values = row.values();
            let all: Vec<usize>;
            let columns = match &answer.columns {
                Some(columns) => columns,
                None => {
                    all = (0..def.columns.len()).collect();
                    &all
                }
            };
            let data = (columns.iter())
                .map(|&c| {
                    let column = &def.columns[c];
                    (column.name.as_str(), rest_value_to_json(column, &values[c]))
                })
                .collect();
            let operation_id = answer.operation_id.as_deref();
            return Ok(written(&Found { data, operation_id }));
        }
        Outcome::Absent => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "NOT_FOUND",
                "no row with this primary key",
            ));
        }
        Outcome::Inserted => "inserted",
        Outcome::Updated => "updated",
        Outcome::Deleted => "deleted",
    };
    let mut body = json!({ "outcome": word });
    if let Some(id) = &answer.operation_id {
        body["operationId"] = id.clone().into();
    }
    Ok(written(&body))
}

/// `POST /0.1.0/{db}/{table}/{op}`.
#[tracing::instrument(
    level = "debug",
    target = "shoal::request",
    name = "data request",
    skip_all,
    fields(tenant, database)
)]
async fn single(
    State(state): State<AppState>,
    path: Result<Path<(String, String, String)>, PathRejection>,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Response, ApiError> {
    let Path((db, table_name, op)) = path?;
    let (db, table_name, op) = (db.as_str(), table_name.as_str(), op.as_str());
    settled(|until| single_once(&state, [db, table_name, op], &headers, &body, until)).await
}

async fn single_once(
    state: &AppState,
    [db, table_name, op]: [&str; 3],
    headers: &HeaderMap,
    body: &Bytes,
    until: Instant,
) -> Result<Sent, ApiError> {
    elsewhere(state, db)?;
    let key = key(state, headers)?;
    let method = Method::parse(op)?;
    let (_, grant) = access(&state.engine, &key, db)?;
    let table = state.engine.table(db, table_name)?;
    let parsed: OpBody = parse(body)?;
    let mut batch = state.engine.tc().batch();
    let answer = add(&mut batch, &table, method, parsed)?;
    match (state.engine.tc())
        .execute(&grant, &mut batch, Commit::Each)
        .await
    {
        Ok(()) => {}
        Err(TcError::NotPrimary { primary, .. }) => {
            let path = format!("/0.1.0/{db}/{table_name}/{op}");
            let dbs = [Arc::clone(&table.database)];
            let to = Forward {
                primary,
                path: &path,
                until,
            };
            return forward(state, &dbs, to, headers, body).await;
        }
        Err(e) => return Err(e.into()),
    }
    let answer = outcome(&batch, 0, &answer)?;
    Ok(Sent::Answer(Json(answer).into_response()))
}

/// A write another node is the primary of: that node's answer, or — once
/// the view has moved the primary — the request to run again.
enum Sent {
    Answer(Response),
    Again,
}

/// Runs a write request (`once`, given until when it may wait) until it
/// has an answer: again while its database's primary settles.
async fn settled<F, Fut>(mut once: F) -> Result<Response, ApiError>
where
    F: FnMut(Instant) -> Fut,
    Fut: Future<Output = Result<Sent, ApiError>>,
{
    let until = Instant::now() + SETTLE_WITHIN;
    loop {
        match once(until).await? {
            Sent::Answer(response) => return Ok(response),
            Sent::Again => {}
        }
    }
}

/// Where a request goes on to: the node `primary` of its databases, at
/// `path`; it may wait for the primary to settle until `until`.
struct Forward<'a> {
    primary: u32,
    path: &'a str,
    until: Instant,
}

/// Sends a request on to node `to.primary`, the primary of the databases
/// `dbs` it writes, and answers what that node answers — or, if the view
/// moves their primary elsewhere meanwhile (that node failed or paused), a
/// retryable 503: the request may or may not have been applied.
///
/// A request that cannot have been applied — this node is handing the
/// databases on, the primary refused it before applying anything, or could
/// not be reached at all — runs again (`Sent::Again`) once the view has
/// moved on, while `to.until` allows.
async fn forward(
    state: &AppState,
    dbs: &[Arc<Database>],
    to: Forward<'_>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Sent, ApiError> {
    let (cluster, primary) = (&state.cluster, to.primary);
    let placed = cluster.placed();
    let waiting = || to.until.saturating_duration_since(Instant::now());
    let not_here = || {
        ApiError::from(TcError::NotPrimary {
            database: String::new(),
            primary,
        })
    };
    // This node is handing them on: the write waits for the view after.
    if dbs.iter().any(|db| db.is_handing_on()) {
        if waiting().is_zero() {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "PRIMARY_CHANGING",
                "the database's primary is being handed to another node of its group; nothing was applied, retry",
            ));
        }
        cluster.placed_again(placed, waiting()).await;
        return Ok(Sent::Again);
    }
    // A request sent on once is not sent on again: the nodes disagree on
    // who the primary is. If the node it came through knows a newer view,
    // this one catches up and tries again; else the client is told.
    if headers.contains_key(FORWARDED_HEADER) {
        let theirs = (headers.get(VIEW_HEADER).and_then(|v| v.to_str().ok()))
            .and_then(|v| v.parse::<u64>().ok());
        // (One fetch at a time for the whole node, whatever a caller
        // claims: the header costs the arbitrator nothing more.)
        if let Some(theirs) = theirs.filter(|&v| v > cluster.view_number())
            && !waiting().is_zero()
        {
            cluster.refresh_soon();
            let within = Duration::from_millis(100).min(waiting());
            cluster.placed_again(placed, within).await;
            if cluster.view_number() >= theirs {
                return Ok(Sent::Again);
            }
        }
        return Err(not_here());
    }
    if cluster.member(primary).is_none() {
        return Err(not_here());
    }
    let unavailable = |e: ForwardError| {
        tracing::warn!(%primary, error = %e, "the primary did not answer a forwarded request");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "PRIMARY_UNAVAILABLE",
            format!("data node {primary}, the database's primary, did not answer; retry"),
        )
    };
    let changed = || {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "PRIMARY_CHANGED",
            format!(
                "data node {primary} stopped being the database's primary while the request was with it; it may or may not have been applied, retry"
            ),
        )
    };
    let key = headers.get(API_KEY_HEADER).map(|v| v.as_bytes());
    let send = cluster.forward(primary, to.path, key, body);
    tokio::pin!(send);
    let answer = tokio::select! {
        answer = &mut send => answer,
        () = cluster.moved(dbs, primary) => {
            match tokio::time::timeout(MOVED_GRACE, &mut send).await {
                Ok(answer) => answer,
                Err(_) => return Err(changed()),
            }
        }
    };
    let answer = match answer {
        Ok(answer) => answer,
        // Nothing reached it (a node killed refuses connections at once):
        // again, once the view has moved its primary on.
        Err(ForwardError::Unreachable(_)) if !waiting().is_zero() => {
            let _ = tokio::time::timeout(waiting(), cluster.moved(dbs, primary)).await;
            return Ok(Sent::Again);
        }
        Err(e) => return Err(unavailable(e)),
    };
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    // Refused before anything was applied: it is not, or not yet, or no
    // longer the primary. Again, once this node knows the view it knows.
    if refused_unapplied(status, &answer.body) && !waiting().is_zero() {
        let placed = cluster.placed();
        cluster.refresh_soon();
        cluster
            .placed_again(placed, Duration::from_millis(20).min(waiting()))
            .await;
        return Ok(Sent::Again);
    }
    let mut response = Response::builder().status(status);
    for (name, value) in &answer.headers {
        response = response.header(name.as_str(), value.as_str());
    }
    Ok(Sent::Answer(
        response
            .body(axum::body::Body::from(answer.body))
            .unwrap_or_else(|_| {
                ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "PRIMARY_UNAVAILABLE",
                    "the primary's answer was not one",
                )
                .into_response()
            }),
    ))
}

/// Answers a request another node of the group sent on to this one,
/// through this node's own REST routes, marked as sent on (it is never
/// sent on again) with the view the sender knew.
async fn answer_forwarded(app: Router, request: Forwarded) -> Answered {
    use tower::ServiceExt;
    let mut http = axum::http::Request::builder()
        .method(axum::http::Method::POST)
        .uri(request.path.as_str())
        .header("content-type", "application/json")
        .header(FORWARDED_HEADER, request.from.to_string())
        .header(VIEW_HEADER, request.view.to_string());
    if let Some(key) = &request.key {
        http = http.header(API_KEY_HEADER, key.as_slice());
    }
    let response = match http.body(axum::body::Body::from(request.body)) {
        Ok(http) => match app.oneshot(http).await {
            Ok(response) => response,
            Err(never) => match never {},
        },
        Err(e) => bad_request(format!("a request sent on that is not one: {e}")).into_response(),
    };
    let status = response.status().as_u16();
    let headers = ["content-type", "retry-after", "www-authenticate"]
        .into_iter()
        .filter_map(|name| {
            let value = response.headers().get(name)?.to_str().ok()?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .map(|b| b.to_vec())
        .unwrap_or_default();
    Answered {
        status,
        headers,
        body,
    }
}

/// Whether a node's answer says it refused a request before applying any
/// of it: not its database's primary, or not serving (starting, catching
/// up, out of its view, or stopping).
fn refused_unapplied(status: StatusCode, body: &[u8]) -> bool {
    let code = || {
        let body: JsonValue = serde_json::from_slice(body).unwrap_or_default();
        body["error"]["code"].as_str().map(str::to_owned)
    };
    match status.as_u16() {
        421 => true,
        503 => matches!(code().as_deref(), Some("NOT_SERVING" | "PRIMARY_CHANGING")),
        _ => false,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Operations {
    operations: Vec<SubOperation>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubOperation {
    method: String,
    #[serde(rename = "relative-url")]
    relative_url: String,
    body: OpBody,
}

/// One operation of a batch or transaction, resolved.
struct Resolved {
    database: String,
    grant: Grant,
    table: Arc<Table>,
    method: Method,
}

/// Finds what `op` names and whether the key may do it.
fn resolve(state: &AppState, key: &ApiKey, op: &SubOperation) -> Result<Resolved, ApiError> {
    if op.method != "POST" {
        return Err(bad_request("every operation's method is POST"));
    }
    let url = op.relative_url.trim_start_matches('/');
    let url = url.strip_prefix("0.1.0/").unwrap_or(url);
    let mut parts = url.split('/');
    let (Some(db), Some(table), Some(method), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad_request(
            "a relative-url reads '<database>/<table>/<pk-read|pk-insert|pk-update|pk-write|pk-delete>'",
        ));
    };
    let method = Method::parse(method)?;
    elsewhere(state, db)?;
    let (_, grant) = access(&state.engine, key, db)?;
    let table = state.engine.table(db, table)?;
    Ok(Resolved {
        database: db.to_owned(),
        grant,
        table,
        method,
    })
}

fn parse_operations(body: &[u8]) -> Result<Vec<SubOperation>, ApiError> {
    let Operations { operations } = parse(body)?;
    if operations.is_empty() {
        return Err(bad_request("'operations' is empty"));
    }
    if operations.len() > MAX_OPERATIONS {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "TOO_MANY_OPERATIONS",
            format!(
                "{} operations in one request; at most {MAX_OPERATIONS}",
                operations.len()
            ),
        ));
    }
    Ok(operations)
}

fn ok_entry(body: Written) -> Written {
    #[derive(Serialize)]
    struct Ok {
        body: Written,
        code: u16,
    }
    written(&Ok { body, code: 200 })
}

fn error_entry(e: &ApiError) -> Written {
    let body = e.body();
    written(&json!({
        "code": e.status().as_u16(),
        "message": body["error"]["message"],
        "body": body,
    }))
}

/// `POST /0.1.0/batch` (and `batchwrite`, `batchdelete`): each operation
/// on its own; one request to the coordinator per database.
#[tracing::instrument(
    level = "debug",
    target = "shoal::request",
    name = "data request",
    skip_all,
    fields(tenant, database)
)]
async fn batch(
    State(state): State<AppState>,
    headers: HeaderMap,
    Body(body): Body,
    kind: Batched,
) -> Result<Response, ApiError> {
    settled(|until| batch_once(&state, &headers, &body, until, kind)).await
}

/// The route of a batch of `kind`: `/batch`, or RonDB's `/batchwrite`
/// (`pk-write`, `pk-update`, `pk-insert`) and `/batchdelete` (`pk-delete`).
fn batch_route(kind: Batched) -> axum::routing::MethodRouter<AppState> {
    post(
        move |state: State<AppState>, headers: HeaderMap, body: Body| {
            batch(state, headers, body, kind)
        },
    )
}

/// Which operations a batch route takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Batched {
    /// `/batch`: any (RonDB's takes reads; Shoal's every operation).
    Any,
    /// `/batchwrite`.
    Writes,
    /// `/batchdelete`.
    Deletes,
}

impl Batched {
    fn path(self) -> &'static str {
        match self {
            Batched::Any => "/0.1.0/batch",
            Batched::Writes => "/0.1.0/batchwrite",
            Batched::Deletes => "/0.1.0/batchdelete",
        }
    }

    /// Refuses the whole request if an operation is not of this route's
    /// kind, as RonDB does.
    fn check(self, operations: &[SubOperation]) -> Result<(), ApiError> {
        let (allowed, said): (&[&str], &str) = match self {
            Batched::Any => return Ok(()),
            Batched::Writes => (
                &["pk-write", "pk-update", "pk-insert"],
                "pk-write, pk-update, or pk-insert",
            ),
            Batched::Deletes => (&["pk-delete"], "pk-delete"),
        };
        for (i, op) in operations.iter().enumerate() {
            let suffix = op.relative_url.rsplit('/').next().unwrap_or_default();
            if !allowed.contains(&suffix) {
                return Err(bad_request(format!(
                    "operation {i}: {} takes {said} operations",
                    self.path()
                )));
            }
        }
        Ok(())
    }
}

async fn batch_once(
    state: &AppState,
    headers: &HeaderMap,
    raw: &Bytes,
    until: Instant,
    kind: Batched,
) -> Result<Sent, ApiError> {
    let operations = parse_operations(raw).and_then(|ops| kind.check(&ops).map(|()| ops));
    if let Ok(operations) = &operations {
        all_elsewhere(state, operations)?;
    }
    let key = key(state, headers)?;
    let operations = operations?;
    let mut entries: Vec<Option<Written>> = vec![None; operations.len()];
    /// A database's operations: one request to the coordinator.
    struct Group {
        grant: Grant,
        batch: Batch,
        /// Which entry each operation answers, and how.
        answers: Vec<(usize, Answer)>,
    }
    let mut groups: HashMap<String, Group> = HashMap::new();
    for (i, op) in operations.into_iter().enumerate() {
        let added = resolve(state, &key, &op).and_then(|r| {
            // Each operation is judged on its own: a read-only key's reads
            // run beside its refused writes.
            if r.grant.role == Role::Read && r.method != Method::Read {
                return Err(ApiError::from(TcError::Forbidden {
                    database: r.database,
                    reason: "the key may only read".into(),
                }));
            }
            let group = groups.entry(r.database).or_insert_with(|| Group {
                grant: r.grant,
                batch: state.engine.tc().batch(),
                answers: Vec::new(),
            });
            let answer = add(&mut group.batch, &r.table, r.method, op.body)?;
            group.answers.push((i, answer));
            Ok(())
        });
        if let Err(e) = added {
            entries[i] = Some(error_entry(&e));
        }
    }
    // A batch that only writes databases another node is the primary of
    // goes to that node whole.
    let dbs: Vec<Arc<Database>> = (groups.values())
        .filter_map(|g| g.batch.database().ok().flatten().cloned())
        .collect();
    let primaries: Vec<u32> = (dbs.iter())
        .map(|db| match db.is_primary_here() {
            true => 0,
            false => db.primary(),
        })
        .collect();
    let all_resolved = entries.iter().all(Option::is_none);
    if all_resolved
        && primaries.first().is_some_and(|&p| p != 0)
        && primaries.iter().all(|p| *p == primaries[0])
        && groups.values().all(|g| g.batch.has_writes())
    {
        let to = Forward {
            primary: primaries[0],
            path: kind.path(),
            until,
        };
        return forward(state, &dbs, to, headers, raw).await;
    }
    for Group {
        grant,
        mut batch,
        answers,
    } in groups.into_values()
    {
        match state
            .engine
            .tc()
            .execute(&grant, &mut batch, Commit::Each)
            .await
        {
            Ok(()) => {
                for (n, (i, answer)) in answers.iter().enumerate() {
                    entries[*i] = Some(match outcome(&batch, n, answer) {
                        Ok(body) => ok_entry(body),
                        Err(e) => error_entry(&e),
                    });
                }
            }
            Err(e) => {
                let e = ApiError::from(e);
                for (i, _) in answers {
                    entries[i] = Some(error_entry(&e));
                }
            }
        }
    }
    let entries: Vec<Written> = (entries.into_iter())
        .map(|e| e.expect("every operation is answered"))
        .collect();
    Ok(Sent::Answer(batch_answer(entries)))
}

/// `POST /0.1.0/transaction`: every operation commits or none does.
#[tracing::instrument(
    level = "debug",
    target = "shoal::request",
    name = "data request",
    skip_all,
    fields(tenant, database)
)]
async fn transaction(
    State(state): State<AppState>,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Response, ApiError> {
    settled(|until| transaction_once(&state, &headers, &body, until)).await
}

async fn transaction_once(
    state: &AppState,
    headers: &HeaderMap,
    body: &Bytes,
    until: Instant,
) -> Result<Sent, ApiError> {
    let operations = parse_operations(body);
    if let Ok(operations) = &operations {
        all_elsewhere(state, operations)?;
    }
    let key = key(state, headers)?;
    let operations = operations?;
    let mut batch = state.engine.tc().batch();
    let mut answers = Vec::with_capacity(operations.len());
    let mut first: Option<(String, Grant)> = None;
    for (i, op) in operations.into_iter().enumerate() {
        let at = |e: ApiError| e.with("operation", i);
        let r = resolve(state, &key, &op).map_err(at)?;
        match &first {
            None => first = Some((r.database.clone(), r.grant)),
            Some((db, _)) if *db != r.database => {
                return Err(at(bad_request(
                    "a transaction works on one database; this operation names another",
                )));
            }
            Some(_) => {}
        }
        answers.push(add(&mut batch, &r.table, r.method, op.body).map_err(at)?);
    }
    let (_, grant) = first.expect("at least one operation");
    match (state.engine.tc())
        .execute(&grant, &mut batch, Commit::Atomic)
        .await
    {
        Ok(()) => {}
        Err(TcError::NotPrimary { primary, .. }) => {
            let dbs: Vec<Arc<Database>> = batch
                .database()
                .ok()
                .flatten()
                .cloned()
                .into_iter()
                .collect();
            let to = Forward {
                primary,
                path: "/0.1.0/transaction",
                until,
            };
            return forward(state, &dbs, to, headers, body).await;
        }
        Err(e) => return Err(e.into()),
    }
    let entries = answers
        .iter()
        .enumerate()
        .map(|(n, answer)| match outcome(&batch, n, answer) {
            Ok(body) => ok_entry(body),
            Err(e) => error_entry(&e),
        })
        .collect();
    Ok(Sent::Answer(batch_answer(entries)))
}

/// A batch's or a transaction's answer, as RonDB's REST server gives one:
/// `{"result": [answer of each operation, in order]}`.
fn batch_answer(entries: Vec<Written>) -> Response {
    #[derive(Serialize)]
    struct Results {
        result: Vec<Written>,
    }
    Json(Results { result: entries }).into_response()
}
