//! The REST data API (port 4406), in the shapes of RonDB's REST server.
//!
//! | route | body | answer |
//! | --- | --- | --- |
//! | `GET /0.1.0/ping` | | 200 |
//! | `GET /0.1.0/health` | | `{"status": "ok"}`, or 503 once the redo log failed |
//! | `POST /0.1.0/{db}/{table}/pk-read` | `{"filters": [{"column", "value"}], "readColumns"?: [{"column"}], "operationId"?}` | `{"operationId"?, "data": {column: value}}`; 404 when absent |
//! | `POST /0.1.0/{db}/{table}/pk-insert` · `pk-update` · `pk-write` | `{"row": {column: value}}`, the whole key in it | `{"outcome": "inserted" \| "updated"}` |
//! | `POST /0.1.0/{db}/{table}/pk-delete` | `{"filters": […]}` | `{"outcome": "deleted"}`; 404 when absent |
//! | `POST /0.1.0/batch` | `{"operations": [{"method": "POST", "relative-url": "db/table/pk-read", "body": {…}}]}` | `[{"code", "body"}]`, each operation on its own |
//! | `POST /0.1.0/transaction` | the same, every operation in one database | the same; all commit or none does |
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

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Map, Value as JsonValue, json};

use super::error::ApiError;
use super::serve::Limits;
use super::{AccessError, access};
use crate::api::json::{
    JsonError, JsonRow, column_value_to_json, key_from_json, row_from_json, row_to_json,
    value_from_json,
};
use crate::cluster::Cluster;
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

#[derive(Clone)]
struct AppState {
    engine: Engine,
    cluster: Cluster,
    /// Sends requests on to other nodes of the group.
    http: reqwest::Client,
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
    let http = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(1))
        .timeout(std::time::Duration::from_secs(30))
        .pool_idle_timeout(shoal_listen::CLIENT_POOL_IDLE)
        .build()
        .expect("an HTTP client without TLS builds");
    Router::new()
        .route("/0.1.0/ping", get(|| async { StatusCode::OK }))
        .route("/0.1.0/health", get(health))
        .route("/0.1.0/batch", post(batch))
        .route("/0.1.0/transaction", post(transaction))
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
            cluster,
            http,
            body_timeout: limits.idle_timeout,
        })
}

async fn health(State(state): State<AppState>) -> (StatusCode, Json<JsonValue>) {
    match state.engine.health() {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ok"}))),
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
}

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
    let columns = match (&body.read_columns, method) {
        (None, _) => None,
        (Some(read), Method::Read) => Some(
            read.iter()
                .map(|c| {
                    if c.data_return_type
                        .as_ref()
                        .is_some_and(|t| !t.eq_ignore_ascii_case("default"))
                    {
                        return Err(bad_request("the only dataReturnType is 'default'"));
                    }
                    def.columns
                        .iter()
                        .position(|d| d.name.as_str() == c.column)
                        .ok_or_else(|| {
                            bad_request(format!(
                                "table '{}' has no column '{}'",
                                def.name,
                                c.column.chars().take(64).collect::<String>()
                            ))
                        })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        (Some(_), _) => return Err(only("no 'readColumns'")),
    };
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
            let (None, Some(row)) = (&body.filters, &body.row) else {
                return Err(only(
                    "'row': an object of column to value, and no 'filters'",
                ));
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

/// The answer to operation `i` of `batch`, which ran.
fn outcome(batch: &Batch, i: usize, answer: &Answer) -> Result<JsonValue, ApiError> {
    let outcome = batch.result(i)?;
    let word = match outcome {
        Outcome::Found(row) => {
            let def = row.table().def();
            let values = row.values();
            let data: Map<String, JsonValue> = match &answer.columns {
                None => row_to_json(&row),
                Some(columns) => columns
                    .iter()
                    .map(|&c| {
                        let column = &def.columns[c];
                        (
                            column.name.to_string(),
                            column_value_to_json(column, &values[c]),
                        )
                    })
                    .collect(),
            };
            let mut body = Map::new();
            if let Some(id) = &answer.operation_id {
                body.insert("operationId".into(), id.clone().into());
            }
            body.insert("data".into(), data.into());
            return Ok(body.into());
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
    Ok(body)
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
    let key = key(&state, &headers)?;
    let method = Method::parse(&op)?;
    let (_, grant) = access(&state.engine, &key, &db)?;
    let table = state.engine.table(&db, &table_name)?;
    let parsed: OpBody = parse(&body)?;
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
            return forward(&state, &dbs, primary, &path, &headers, body).await;
        }
        Err(e) => return Err(e.into()),
    }
    outcome(&batch, 0, &answer).map(|body| Json(body).into_response())
}

/// Sends a request on to node `primary`, the primary of the databases
/// `dbs` it writes, and answers what that node answers — or, if the view
/// moves their primary elsewhere meanwhile (that node failed or paused), a
/// retryable 503 at once: the request may or may not have been applied.
async fn forward(
    state: &AppState,
    dbs: &[Arc<Database>],
    primary: u32,
    path: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let me = state.cluster.me();
    let not_here = || {
        ApiError::from(TcError::NotPrimary {
            database: String::new(),
            primary,
        })
    };
    // A request sent on once is not sent on again: the nodes disagree on
    // who the primary is, and the client is told so.
    if headers.contains_key(FORWARDED_HEADER) {
        return Err(not_here());
    }
    let Some(member) = state.cluster.member(primary) else {
        return Err(not_here());
    };
    let mut request = state
        .http
        .post(format!("{}{path}", member.rest_url))
        .header(FORWARDED_HEADER, me.to_string())
        .header("content-type", "application/json")
        .body(body);
    if let Some(key) = headers.get(API_KEY_HEADER) {
        request = request.header(API_KEY_HEADER, key);
    }
    let unavailable = |e: reqwest::Error| {
        tracing::warn!(%primary, error = %e, "the primary did not answer a forwarded request");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "PRIMARY_UNAVAILABLE",
            format!("data node {primary}, the database's primary, did not answer; retry"),
        )
    };
    let moved = state.cluster.moved(dbs, primary);
    let answer = tokio::select! {
        answer = request.send() => answer.map_err(unavailable)?,
        () = moved => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "PRIMARY_CHANGED",
                format!("data node {primary} stopped being the database's primary while the request was with it; it may or may not have been applied, retry"),
            ));
        }
    };
    let status = answer.status();
    let mut response = Response::builder().status(status.as_u16());
    for name in ["content-type", "retry-after", "www-authenticate"] {
        if let Some(value) = answer.headers().get(name) {
            response = response.header(name, value.as_bytes());
        }
    }
    let bytes = answer.bytes().await.map_err(unavailable)?;
    Ok(response
        .body(axum::body::Body::from(bytes))
        .expect("a response from parts that were valid"))
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

fn ok_entry(body: JsonValue) -> JsonValue {
    json!({"code": 200, "body": body})
}

fn error_entry(e: &ApiError) -> JsonValue {
    let body = e.body();
    json!({
        "code": e.status().as_u16(),
        "message": body["error"]["message"],
        "body": body,
    })
}

/// `POST /0.1.0/batch`: each operation on its own; one request to the
/// coordinator per database.
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
) -> Result<Response, ApiError> {
    let key = key(&state, &headers)?;
    let operations = parse_operations(&body)?;
    let raw = body;
    let mut entries: Vec<Option<JsonValue>> = vec![None; operations.len()];
    /// A database's operations: one request to the coordinator.
    struct Group {
        grant: Grant,
        batch: Batch,
        /// Which entry each operation answers, and how.
        answers: Vec<(usize, Answer)>,
    }
    let mut groups: HashMap<String, Group> = HashMap::new();
    for (i, op) in operations.into_iter().enumerate() {
        let added = resolve(&state, &key, &op).and_then(|r| {
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
        return forward(&state, &dbs, primaries[0], "/0.1.0/batch", &headers, raw).await;
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
    let entries: Vec<JsonValue> = entries.into_iter().map(Option::unwrap_or_default).collect();
    Ok(Json(entries).into_response())
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
    let key = key(&state, &headers)?;
    let operations = parse_operations(&body)?;
    let mut batch = state.engine.tc().batch();
    let mut answers = Vec::with_capacity(operations.len());
    let mut first: Option<(String, Grant)> = None;
    for (i, op) in operations.into_iter().enumerate() {
        let at = |e: ApiError| e.with("operation", i);
        let r = resolve(&state, &key, &op).map_err(at)?;
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
            return forward(&state, &dbs, primary, "/0.1.0/transaction", &headers, body).await;
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
    Ok(Json(JsonValue::Array(entries)).into_response())
}
