//! A table's rows, for the people of its tenant (the console's data
//! browser): a page at a time in primary-key order, and one row read,
//! inserted, changed or deleted by its key. Each goes to the database's
//! primary through its transaction coordinator, so it is charged to the
//! database and held to its quotas and rates like any client's request.
//! Platform admins run the platform, not tenants' data: they are refused.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::databases::{self, DatabaseRow};
use crate::error::ApiError;
use crate::nodes::{NodeError, NodeRow};
use crate::server::{App, Body, Path};

/// Rows a page holds unless asked otherwise, and at most.
const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 500;
/// Longest cursor taken back, in bytes.
const MAX_CURSOR: usize = 16 << 10;

/// The codes of the data node's refusals a caller may see as they are:
/// about the caller's own values, rows and limits.
const PASSED_ON: &[&str] = &[
    "BAD_REQUEST",
    "INVALID_VALUE",
    "MISSING_COLUMN",
    "DUPLICATE_KEY",
    "NOT_FOUND",
    "NO_SUCH_TABLE",
    "NO_SUCH_INDEX",
    "LOCK_WAIT_TIMEOUT",
    "MEMORY_QUOTA",
    "READ_RATE",
    "WRITE_RATE",
    "REQUEST_EXCEEDS_BURST",
    "TOO_MANY_TRANSACTIONS",
    "OUT_OF_DATA_MEMORY",
    "FRAGMENT_FULL",
];

/// The caller's database `name` on its primary, refused to platform admins.
async fn reach(app: &App, caller: &Caller, name: &str) -> Result<(DatabaseRow, NodeRow), ApiError> {
    if caller.is_admin() {
        return Err(ApiError::forbidden(
            "platform admins do not read or write tenants' rows",
        ));
    }
    let db = databases::find(app, caller, name).await?;
    let primary = databases::nodes_of(app, &db).await?.remove(0);
    Ok((db, primary))
}

/// A data node's answer as the caller sees it: its refusals of the
/// caller's values and limits as they are, anything else as unavailable.
fn refused(e: NodeError) -> ApiError {
    match e {
        NodeError::Refused {
            status,
            code,
            message,
            ..
        } if status.is_client_error() || status == StatusCode::INSUFFICIENT_STORAGE => {
            match PASSED_ON.iter().find(|known| **known == code) {
                Some(known) => ApiError::new(status, known, message),
                None => unavailable(&code, &message),
            }
        }
        other => ApiError::from(other),
    }
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "INVALID_REQUEST", message)
}

fn unavailable(code: &str, message: &str) -> ApiError {
    tracing::error!(%code, %message, "a data node refused a row request");
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "DATA_NODE_UNAVAILABLE",
        "the data node could not answer; nothing was changed, try again",
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    after: Option<String>,
    limit: Option<u32>,
}

/// `GET /databases/{db}/tables/{table}/rows?after=&limit=`.
#[utoipa::path(get, path = "/databases/{db}/tables/{table}/rows", tag = "rows",
    params(("db" = String, Path, description = "The database's name"), ("table" = String, Path, description = "The table's name"),
        ("after" = Option<String>, Query, description = "The cursor a page before answered as `next`"),
        ("limit" = Option<u32>, Query, description = "Rows in the page, 1 to 500 (50)")),
    responses((status = 200, description = "{table: definition, rows: [{column: value}], next: cursor or null}; rows in primary-key order, values as the internal API writes them (decimals and dates as strings, binary as base64)", body = Object),
        (status = 400, description = "A bad cursor or limit, or a table whose primary key is hashed only (NO_SUCH_INDEX)", body = Object),
        (status = 401, description = "No session, or an invalid or expired one", body = Object),
        (status = 403, description = "A platform admin", body = Object),
        (status = 404, description = "No such database or table — or another tenant's", body = Object),
        (status = 429, description = "The database's read rate", body = Object)))]
pub async fn page(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path((name, table)): Path<(String, String)>,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(|e| invalid(e.body_text()))?;
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(invalid(format!("limit must be from 1 to {MAX_PAGE}")));
    }
    if query.after.as_ref().is_some_and(|a| a.len() > MAX_CURSOR) {
        return Err(invalid("after is not a cursor a page answered"));
    }
    let (db, primary) = reach(&app, &caller, &name).await?;
    let (table_name, definition) = databases::table_definition(&app, &db, &table).await?;
    let mut scan = json!({ "limit": limit });
    if let Some(after) = query.after {
        scan["after"] = after.into();
    }
    let page = (app.nodes.scan(&primary, &db.name, &table_name, &scan).await).map_err(refused)?;
    Ok(Json(json!({
        "table": definition,
        "rows": page["data"],
        "next": page["next"],
    })))
}

/// What a row request asks: one operation on one row.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowRequest {
    op: RowOp,
    row: Option<Value>,
    key: Option<Value>,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum RowOp {
    Read,
    Insert,
    Update,
    Delete,
}

impl RowOp {
    fn name(self) -> &'static str {
        match self {
            RowOp::Read => "read",
            RowOp::Insert => "insert",
            RowOp::Update => "update",
            RowOp::Delete => "delete",
        }
    }
}

/// `POST /databases/{db}/tables/{table}/rows`.
#[utoipa::path(post, path = "/databases/{db}/tables/{table}/rows", tag = "rows",
    params(("db" = String, Path, description = "The database's name"), ("table" = String, Path, description = "The table's name")),
    request_body(content = Object, description = "{op: read|insert|update|delete, row: {column: value} (insert, update: the key's columns and those to set), key: {column: value} (read, delete)}; values as data-types.md takes them"),
    responses((status = 200, description = "{outcome: found|absent|inserted|updated|deleted, row?: {column: value}}", body = Object),
        (status = 400, description = "INVALID_VALUE or MISSING_COLUMN naming the column, or a malformed request; nothing written", body = Object),
        (status = 401, description = "No session, or an invalid or expired one", body = Object),
        (status = 403, description = "A platform admin", body = Object),
        (status = 404, description = "No such database, table or row — or another tenant's", body = Object),
        (status = 409, description = "DUPLICATE_KEY, LOCK_WAIT_TIMEOUT", body = Object),
        (status = 429, description = "The database's rates", body = Object),
        (status = 507, description = "MEMORY_QUOTA: the database or tenant is at its memory quota", body = Object)))]
pub async fn change(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path((name, table)): Path<(String, String)>,
    Body(request): Body<RowRequest>,
) -> Result<Json<Value>, ApiError> {
    if request.op != RowOp::Read {
        caller.require_change()?;
    }
    let (db, primary) = reach(&app, &caller, &name).await?;
    let (table_name, _) = databases::table_definition(&app, &db, &table).await?;
    let object = |v: Option<Value>, what: &str| match v {
        Some(Value::Object(o)) => Ok(Value::Object(o)),
        _ => Err(invalid(format!(
            "{} takes '{what}': an object of column to value",
            request.op.name()
        ))),
    };
    let mut operation = json!({"op": request.op.name(), "table": table_name});
    match request.op {
        RowOp::Read | RowOp::Delete if request.row.is_none() => {
            operation["key"] = object(request.key, "key")?;
        }
        RowOp::Insert | RowOp::Update if request.key.is_none() => {
            operation["row"] = object(request.row, "row")?;
        }
        op => {
            let takes = if matches!(op, RowOp::Read | RowOp::Delete) {
                "key"
            } else {
                "row"
            };
            return Err(invalid(format!("{} takes '{takes}' only", op.name())));
        }
    }
    let answer = (app.nodes)
        .transaction(&primary, &db.name, &json!({"operations": [operation]}))
        .await
        .map_err(refused)?;
    let result = &answer["results"][0];
    if result["outcome"] == "absent" {
        return Err(ApiError::not_found("row"));
    }
    Ok(Json(result.clone()))
}
