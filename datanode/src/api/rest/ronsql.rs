//! `POST /0.1.0/ronsql`: one aggregating SELECT, in RonDB's request and
//! reply shapes.
//!
//! ```text
//! {"query": "SELECT …", "database": db, "outputFormat"?: "JSON" | "JSON_ASCII"
//!  | "TEXT" | "TEXT_NOHEADER", "explainMode"?: "ALLOW" | "FORBID" | "REQUIRE"
//!  | "REMOVE" | "FORCE", "operationId"?: string}
//! → JSON: [{"output name": value, …}, …]   TEXT: tab-separated lines
//! → EXPLAIN: text/plain
//! ```
//!
//! A refused query answers the JSON error shape with a code per RonDB
//! error class (`SQL_SYNTAX`, `SQL_SEMANTIC`, `SQL_UNSUPPORTED` → 400,
//! `SQL_TOO_LARGE` → 413, `SQL_RESOURCE` → 503) and the class in the
//! `X-RonSQL-Error-Class` header, as RonDB's REST server sends it.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{AppState, Body, bad_request, elsewhere, key, parse};
use crate::api::access;
use crate::api::error::ApiError;
use crate::node::catalog::CatalogError;
use crate::sql::{Class, ExplainMode, SqlError};
use crate::tc::QueryError;
use crate::tc::ronsql::plan;
use crate::tc::ronsql::print::{self, Format};

/// Longest `operationId` taken (RonDB's).
const MAX_OPERATION_ID: usize = 256;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RonSqlBody {
    query: String,
    database: String,
    #[serde(rename = "outputFormat")]
    output_format: Option<String>,
    #[serde(rename = "explainMode")]
    explain_mode: Option<String>,
    #[serde(rename = "operationId")]
    operation_id: Option<String>,
}

/// Header naming the class of a refused query.
const ERROR_CLASS_HEADER: &str = "x-ronsql-error-class";

fn refused(e: SqlError) -> Response {
    let status = StatusCode::from_u16(e.class.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
    let mut response = ApiError::new(status, e.class.code(), e.message)
        .with("class", e.class.name())
        .into_response();
    response
        .headers_mut()
        .insert(ERROR_CLASS_HEADER, HeaderValue::from_static(e.class.name()));
    response
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

pub(super) async fn ronsql(
    State(state): State<AppState>,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Response, ApiError> {
    let key = key(&state, &headers)?;
    let body: RonSqlBody = parse(&body)?;
    let format = match body.output_format.as_deref() {
        None => Format::Json,
        Some(name) => Format::parse(name).ok_or_else(|| {
            bad_request("outputFormat must be JSON, JSON_ASCII, TEXT or TEXT_NOHEADER")
        })?,
    };
    let mode = match body.explain_mode.as_deref() {
        None => ExplainMode::Allow,
        Some(name) => ExplainMode::parse(name).ok_or_else(|| {
            bad_request("explainMode must be ALLOW, FORBID, REQUIRE, REMOVE or FORCE")
        })?,
    };
    if body
        .operation_id
        .as_ref()
        .is_some_and(|id| id.chars().count() > MAX_OPERATION_ID)
    {
        return Err(bad_request(format!(
            "operationId is longer than {MAX_OPERATION_ID} characters"
        )));
    }
    let db = body.database.as_str();
    elsewhere(&state, db)?;
    let (_, grant) = access(&state.engine, &key, db)?;
    let planned = (|| {
        let (explain, query) = plan::parse(&body.query)?;
        let explain = mode.explains(explain)?;
        let (named_db, table) = plan::table_of(&query)?;
        if let Some(named) = named_db
            && named != db
        {
            return Err(SqlError::new(
                Class::Semantic,
                format!("the query reads database '{named}'; the request is for '{db}'"),
            ));
        }
        let table = state.engine.table(db, &table).map_err(|e| match e {
            CatalogError::NoSuchTable { table, .. } => SqlError::new(
                Class::Semantic,
                format!("failed to get table '{table}': database '{db}' has no such table"),
            ),
            other => SqlError::new(Class::Semantic, other.to_string()),
        })?;
        plan::plan(explain, &query, table)
    })();
    let mut plan = match planned {
        Ok(plan) => plan,
        Err(e) => return Ok(refused(e)),
    };
    match state.engine.tc().choose_access(&mut plan).await {
        Ok(()) => {}
        Err(QueryError::Sql(e)) => return Ok(refused(e)),
        Err(QueryError::Tc(e)) => return Err(e.into()),
    }
    if plan.explain {
        return Ok(text(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            print::explain(&plan, format),
        ));
    }
    let rows = match state.engine.tc().ronsql(&grant, None, &plan).await {
        Ok(rows) => rows,
        Err(QueryError::Sql(e)) => return Ok(refused(e)),
        Err(QueryError::Tc(e)) => return Err(e.into()),
    };
    let content_type = if format.is_json() {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    Ok(text(
        StatusCode::OK,
        content_type,
        print::answer(&plan, &rows, format),
    ))
}
