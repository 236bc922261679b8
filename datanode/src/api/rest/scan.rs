//! `POST /0.1.0/{db}/{table}/scan`: a page of a table's rows in the order of
//! its primary key or one of its ordered indexes, between bounds.
//!
//! ```text
//! {"index"?: name, "lower"?: {"values": [..], "inclusive"?: bool},
//!  "upper"?: {…}, "readColumns"?: [{"column"}], "limit"?: n, "after"?: cursor}
//! → {"data": [rows in index order], "next": cursor or null}
//! ```
//!
//! A bound names values for the first columns of the index, in order
//! (`null` is NULL, which sorts first); `inclusive` is true unless given.
//! `next` is an opaque cursor: sent back as `after`, the scan goes on from
//! the row after the page's last. Rows are read committed, each charged as
//! a read.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::Value as JsonValue;
use shoal_wire::schema::{ColumnDef, PRIMARY_INDEX};

use super::{AppState, Body, ReadColumn, bad_request, elsewhere, key, parse};
use crate::api::access;
use crate::api::error::ApiError;
use crate::api::json::{column_value_to_json, rest_value_to_json, value_from_json};
use crate::node::Engine;
use crate::tc::batch::OperationError;
use crate::tc::{Grant, RangeScan, Table};
use crate::types::value::Value;

/// Rows a page holds unless the request says otherwise.
const DEFAULT_LIMIT: u64 = 100;
/// Most rows a page may hold.
pub(crate) const MAX_LIMIT: u64 = 10_000;
/// Bytes of rows after which a page ends, whatever its limit.
const MAX_PAGE_BYTES: usize = 4 << 20;
/// Longest cursor taken, in bytes.
const MAX_CURSOR: usize = 64 << 10;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScanBody {
    index: Option<String>,
    lower: Option<BoundBody>,
    upper: Option<BoundBody>,
    #[serde(rename = "readColumns")]
    read_columns: Option<Vec<ReadColumn>>,
    limit: Option<JsonValue>,
    after: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BoundBody {
    values: Vec<JsonValue>,
    #[serde(default = "yes")]
    inclusive: bool,
}

fn yes() -> bool {
    true
}

/// What a cursor holds: the index and the key of the row a page ended with.
#[derive(serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cursor {
    i: String,
    k: Vec<JsonValue>,
}

pub(super) async fn scan(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Response, ApiError> {
    let Path((db, table_name)) = path?;
    elsewhere(&state, &db)?;
    let key = key(&state, &headers)?;
    let (_, grant) = access(&state.engine, &key, &db)?;
    let table = state.engine.table(&db, &table_name)?;
    let page = page(&state.engine, &grant, &table, &body, rest_value_to_json).await?;
    Ok(Json(page).into_response())
}

/// A page of rows, each a map of column to value, and the cursor the next
/// page starts after (`null` at the end).
#[derive(Serialize)]
pub(crate) struct Page<V> {
    pub(crate) data: Vec<BTreeMap<String, V>>,
    pub(crate) next: Option<String>,
}

/// The page of `table`'s rows a scan request (`body`, as the REST data API
/// takes it) asks for, run under `grant` — charged to its database like any
/// read — each value as `json` writes it.
pub(crate) async fn page<V>(
    engine: &Engine,
    grant: &Grant,
    table: &Arc<Table>,
    body: &[u8],
    json: fn(&ColumnDef, &Value) -> V,
) -> Result<Page<V>, ApiError> {
    let body: ScanBody = parse(body)?;

    let index = body.index.as_deref().unwrap_or(PRIMARY_INDEX);
    let order = table.index_order(index).ok_or_else(|| {
        let error = OperationError::NoSuchIndex {
            table: table.name().to_string(),
            index: index.chars().take(64).collect(),
        };
        ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            "NO_SUCH_INDEX",
            error.to_string(),
        )
    })?;
    let def = table.def();
    let column = |c: u16| &def.columns[c as usize];
    let limit = match &body.limit {
        None => DEFAULT_LIMIT,
        Some(n) => n
            .as_u64()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                bad_request(format!(
                    "limit must be a whole number from 1 to {MAX_LIMIT}"
                ))
            })?,
    };
    let columns = read_columns(table, body.read_columns.as_deref())?;
    let bound = |b: &BoundBody, which: &str| -> Result<(Vec<Value>, bool), ApiError> {
        if b.values.len() > order.columns {
            return Err(bad_request(format!(
                "the {which} bound of index '{index}' has {} values; the index has {} columns",
                b.values.len(),
                order.columns
            )));
        }
        let values = (b.values.iter().zip(&order.order))
            .map(|(v, &c)| value_from_json(column(c), v))
            .collect::<Result<_, _>>()?;
        Ok((values, b.inclusive))
    };
    let lower = body.lower.as_ref().map(|b| bound(b, "lower")).transpose()?;
    let upper = body.upper.as_ref().map(|b| bound(b, "upper")).transpose()?;
    let after = body
        .after
        .as_deref()
        .map(|cursor| read_cursor(cursor, index, &order.order, def.columns.as_slice()))
        .transpose()?;
    let scan = RangeScan {
        index: Some(index),
        lower: lower.as_ref().map(|(v, i)| (&v[..], *i)),
        upper: upper.as_ref().map(|(v, i)| (&v[..], *i)),
        after: after.as_deref(),
        limit: limit as usize,
        max_bytes: MAX_PAGE_BYTES,
        columns: None,
    };
    let page = engine.tc().scan_range(grant, None, table, scan).await?;
    let data = (page.rows.iter())
        .map(|row| {
            let values = row.values();
            (columns.iter())
                .map(|&c| {
                    let col = &def.columns[c];
                    (col.name.to_string(), json(col, &values[c]))
                })
                .collect()
        })
        .collect();
    let next = page.next.map(|key| {
        let k = (order.order.iter().zip(&key))
            .map(|(&c, v)| column_value_to_json(column(c), v))
            .collect();
        let cursor = Cursor {
            i: index.to_owned(),
            k,
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&cursor).expect("a cursor serializes"))
    });
    Ok(Page { data, next })
}

/// The columns to answer, by position: those named, or all.
fn read_columns(table: &Arc<Table>, read: Option<&[ReadColumn]>) -> Result<Vec<usize>, ApiError> {
    let def = table.def();
    let Some(read) = read else {
        return Ok((0..def.columns.len()).collect());
    };
    if read.is_empty() {
        return Err(bad_request("readColumns names no column"));
    }
    let mut columns = Vec::with_capacity(read.len());
    for c in read {
        let at = c.position_in(def)?;
        if columns.contains(&at) {
            return Err(bad_request(format!(
                "readColumns names '{}' twice",
                c.column
            )));
        }
        columns.push(at);
    }
    Ok(columns)
}

/// The key a cursor holds, checked against the index it must be of.
fn read_cursor(
    cursor: &str,
    index: &str,
    order: &[u16],
    columns: &[ColumnDef],
) -> Result<Vec<Value>, ApiError> {
    let bad = || bad_request("'after' is not a cursor this scan answered");
    if cursor.len() > MAX_CURSOR {
        return Err(bad());
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| bad())?;
    let cursor: Cursor = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    if cursor.i != index || cursor.k.len() != order.len() {
        return Err(bad_request(format!(
            "'after' is a cursor of another scan: this one is of index '{index}'"
        )));
    }
    (order.iter().zip(&cursor.k))
        .map(|(&c, v)| value_from_json(&columns[c as usize], v).map_err(|_| bad()))
        .collect()
}
