//! Rows, for operators and the console: `POST
//! /internal/v1/databases/{db}/transaction`, and a page of a table's rows,
//! `POST /internal/v1/databases/{db}/tables/{table}/scan` (the body and
//! answer of the REST data API's scan, values as below).
//!
//! ```json
//! {"atomic": true,
//!  "operations": [
//!    {"op": "write",  "table": "users", "row": {"id": 1, "name": "Ada"}},
//!    {"op": "read",   "table": "users", "key": {"id": 2}},
//!    {"op": "delete", "table": "users", "key": {"id": 3}}]}
//! ```
//! `op` is `read`, `insert`, `update`, `write` (insert or update) or
//! `delete`; values are as in [`crate::api::json`]. With `atomic` (the default)
//! every operation commits or none does, and a failed one answers its error
//! with `"operation": <index>`; without it each succeeds or fails on its own,
//! its error in its result. Requests go through the transaction coordinator
//! like any client's: the database's quotas apply. The answer comes once the
//! writes are durable.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value as JsonValue, json};

use super::{ApiError, AppState};
use crate::api::json::{JsonRow, column_value_to_json, key_from_json, row_from_json, row_to_json};
use crate::api::rest::scan::{Page, page};
use crate::tc::batch::{Batch, OperationError, Outcome};
use crate::tc::{Commit, Grant, Role};

/// Most operations one request may hold.
pub(super) const MAX_OPERATIONS: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Request {
    #[serde(default = "atomic_by_default")]
    atomic: bool,
    operations: Vec<Operation>,
}

fn atomic_by_default() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Operation {
    op: OpName,
    table: String,
    row: Option<JsonRow>,
    key: Option<JsonRow>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum OpName {
    Read,
    Insert,
    Update,
    Write,
    Delete,
}

pub(super) async fn transaction(
    State(state): State<AppState>,
    Path(db): Path<String>,
    body: Result<Json<Request>, JsonRejection>,
) -> Result<Json<JsonValue>, ApiError> {
    let Json(request) = body?;
    if request.operations.is_empty() {
        return Err(bad_request("a transaction needs at least one operation"));
    }
    if request.operations.len() > MAX_OPERATIONS {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "TOO_MANY_OPERATIONS",
            format!(
                "{} operations in one request; at most {MAX_OPERATIONS}",
                request.operations.len()
            ),
        ));
    }
    let engine = &state.engine;
    let database = engine.database(&db)?;
    let mut batch = engine.tc().batch();
    for (index, op) in request.operations.iter().enumerate() {
        add(&state, &db, &mut batch, op).map_err(|e| e.with("operation", index))?;
    }
    let grant = Grant {
        database: database.id,
        role: Role::ReadWrite,
    };
    let commit = if request.atomic {
        Commit::Atomic
    } else {
        Commit::Each
    };
    state
        .engine
        .tc()
        .execute(&grant, &mut batch, commit)
        .await?;
    let results: Vec<JsonValue> = batch.results().iter().map(result_json).collect();
    Ok(Json(json!({ "results": results })))
}

/// A page of a table's rows, in the order of the index the body names (the
/// primary key's if none), charged to the database like any scan.
pub(super) async fn scan(
    State(state): State<AppState>,
    Path((db, table)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Page<JsonValue>>, ApiError> {
    let database = state.engine.database(&db)?;
    let table = state.engine.table(&db, &table)?;
    let grant = Grant {
        database: database.id,
        role: Role::Read,
    };
    let body = if body.is_empty() {
        &b"{}"[..]
    } else {
        &body[..]
    };
    Ok(Json(
        page(&state.engine, &grant, &table, body, column_value_to_json).await?,
    ))
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "BAD_REQUEST", message)
}

/// Adds one operation to the batch, checking its values against the table.
fn add(state: &AppState, db: &str, batch: &mut Batch, op: &Operation) -> Result<(), ApiError> {
    let table = state.engine.table(db, &op.table)?;
    let invalid = |e: &dyn std::fmt::Display| {
        ApiError::new(StatusCode::BAD_REQUEST, "INVALID_VALUE", e.to_string())
    };
    let takes_only = |field: &str| {
        bad_request(format!(
            "this operation takes '{field}' (an object of column to value), and only that"
        ))
    };
    let added = match (op.op, &op.row, &op.key) {
        (OpName::Read | OpName::Delete, None, Some(key)) => {
            let key = key_from_json(&table, key).map_err(|e| invalid(&e))?;
            if op.op == OpName::Read {
                batch.read(&table, &key)
            } else {
                batch.delete(&table, &key)
            }
        }
        (OpName::Insert | OpName::Update | OpName::Write, Some(row), None) => {
            let row = row_from_json(&table, row).map_err(|e| invalid(&e))?;
            match op.op {
                OpName::Insert => batch.insert(&table, &row),
                OpName::Update => batch.update(&table, &row),
                _ => batch.write(&table, &row),
            }
        }
        (OpName::Read | OpName::Delete, ..) => return Err(takes_only("key")),
        _ => return Err(takes_only("row")),
    };
    added.map_err(|e| invalid(&e))
}

fn result_json(result: &Result<Outcome, OperationError>) -> JsonValue {
    match result {
        Ok(Outcome::Found(row)) => json!({"outcome": "found", "row": row_to_json(row)}),
        Ok(Outcome::Absent) => json!({"outcome": "absent"}),
        Ok(Outcome::Inserted) => json!({"outcome": "inserted"}),
        Ok(Outcome::Updated) => json!({"outcome": "updated"}),
        Ok(Outcome::Deleted) => json!({"outcome": "deleted"}),
        Err(e) => {
            json!({"error": {"code": e.code(), "number": e.number(), "message": e.to_string()}})
        }
    }
}
