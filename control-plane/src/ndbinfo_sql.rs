//! ndbinfo SQL: a SELECT over the ndbinfo tables and views, run by a real
//! SQL engine — a fresh in-memory SQLite per query, loaded with the live
//! rows of the caller's own databases only (a platform admin's: all) and
//! the views defined as RonDB defines them. What is not loaded cannot leak,
//! whatever the query says; the engine is read-only once loaded.
//!
//! A query shares the process with every tenant's control plane, so it is
//! bounded in everything it can take: its time (checked between SQLite's
//! steps, and no single step can run long, since no value may grow past
//! `MAX_VALUE`), its memory (SQLite's per-connection limits on values,
//! expressions and columns, and a small page cache; SQLite's heap limit is
//! process-wide and would bind the control plane's own store too, so it is
//! not used), its answer (rows and bytes), and how many run at once. SQLite
//! runs each connection on a thread of its own (sqlx's worker), off the
//! async runtime's threads.

use std::collections::{BTreeMap, HashSet};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_wire::ndbinfo::{self, Cell, NdbinfoTable};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteRow};
use sqlx::{Column, ConnectOptions, Connection, Executor, Row, TypeInfo, ValueRef};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::nodes;
use crate::server::{App, Body};
use crate::store::now_ms;

/// Longest query text.
pub const MAX_SQL: usize = 10_000;
/// Most rows a query may answer.
pub const MAX_ROWS: usize = 10_000;
/// Longest a query may run.
pub const MAX_TIME: Duration = Duration::from_secs(2);
/// Largest string or blob a query may make (SQLite's `SQLITE_LIMIT_LENGTH`).
pub const MAX_VALUE: i32 = 1 << 20;
/// Most bytes of cells a query may answer.
pub const MAX_ANSWER: usize = 8 << 20;
/// Most queries running at once, over every caller; past it a query is
/// refused with 429.
pub const MAX_RUNNING: usize = 4;
/// Page cache of a query's engine, in KiB.
const CACHE_KIB: i32 = 4096;

/// SQLite's limits on one query's engine.
const LIMITS: [(i32, i32); 10] = [
    (libsqlite3_sys::SQLITE_LIMIT_LENGTH, MAX_VALUE),
    (libsqlite3_sys::SQLITE_LIMIT_SQL_LENGTH, MAX_SQL as i32),
    (libsqlite3_sys::SQLITE_LIMIT_COLUMN, 200),
    (libsqlite3_sys::SQLITE_LIMIT_EXPR_DEPTH, 100),
    (libsqlite3_sys::SQLITE_LIMIT_COMPOUND_SELECT, 50),
    (libsqlite3_sys::SQLITE_LIMIT_VDBE_OP, 50_000),
    (libsqlite3_sys::SQLITE_LIMIT_FUNCTION_ARG, 16),
    (libsqlite3_sys::SQLITE_LIMIT_ATTACHED, 1),
    (libsqlite3_sys::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 1000),
    (libsqlite3_sys::SQLITE_LIMIT_TRIGGER_DEPTH, 1),
];

fn query_error(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, code, message)
}

/// Checks that `sql` is one SELECT (or WITH … SELECT) statement: answers
/// it without a trailing `;`.
pub fn single_select(sql: &str) -> Result<&str, ApiError> {
    if sql.len() > MAX_SQL {
        return Err(query_error(
            "INVALID_SQL",
            format!("a query has at most {MAX_SQL} bytes"),
        ));
    }
    let bytes = sql.as_bytes();
    let mut end = None;
    let mut first_word = None;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i = sql[i..].find('\n').map_or(bytes.len(), |n| i + n);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = sql[i + 2..]
                    .find("*/")
                    .map(|n| i + 2 + n + 2)
                    .ok_or_else(|| query_error("INVALID_SQL", "a comment is not closed"))?;
                continue;
            }
            quote @ (b'\'' | b'"' | b'`') => {
                if end.is_some() {
                    return Err(query_error("INVALID_SQL", "one statement only"));
                }
                let mut j = i + 1;
                loop {
                    match bytes.get(j) {
                        None => {
                            return Err(query_error(
                                "INVALID_SQL",
                                "a quoted string is not closed",
                            ));
                        }
                        Some(&b) if b == quote && bytes.get(j + 1) == Some(&quote) => j += 2,
                        Some(&b) if b == quote => break,
                        Some(_) => j += 1,
                    }
                }
                i = j + 1;
                continue;
            }
            b';' => {
                end.get_or_insert(i);
            }
            b if b.is_ascii_whitespace() => {}
            b => {
                if end.is_some() {
                    return Err(query_error("INVALID_SQL", "one statement only"));
                }
                if first_word.is_none() && b.is_ascii_alphabetic() {
                    let word: String = sql[i..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    first_word = Some(word.to_ascii_uppercase());
                } else if first_word.is_none() {
                    first_word = Some(String::new());
                }
            }
        }
        i += 1;
    }
    match first_word.as_deref() {
        Some("SELECT" | "WITH") => Ok(&sql[..end.unwrap_or(sql.len())]),
        None => Err(query_error("INVALID_SQL", "the query is empty")),
        Some(_) => Err(query_error(
            "INVALID_SQL",
            "only a SELECT is run: ndbinfo is read-only",
        )),
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Query {
    /// One SELECT over the ndbinfo tables and views.
    sql: String,
}

/// `POST /ndbinfo/query {sql}`.
#[utoipa::path(post, path = "/ndbinfo/query", tag = "ndbinfo", request_body = Query,
    responses((status = 200, description = "{columns, rows}", body = Object),
        (status = 400, description = "INVALID_SQL (not one SELECT, or it does not run), QUERY_TIMEOUT, QUERY_TOO_LARGE (a value past 1 MiB, an answer past 8 MiB), TOO_MANY_ROWS", body = Object),
        (status = 429, description = "TOO_MANY_QUERIES: as many queries run as the control plane takes at once; Retry-After says when to try again", body = Object),
        (status = 401, description = "No session, or an invalid or expired one", body = Object)))]
pub async fn query(
    State(app): State<Arc<App>>,
    caller: Caller,
    Body(req): Body<Query>,
) -> Result<Json<Value>, ApiError> {
    let sql = single_select(&req.sql)?.to_owned();
    let Ok(_running) = app.ndbinfo_queries.try_acquire() else {
        let mut e = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "TOO_MANY_QUERIES",
            format!("{MAX_RUNNING} ndbinfo queries are running; try again in a moment"),
        );
        e.retry_after_secs = Some(1);
        return Err(e);
    };
    let mut engine = load(&app, &caller).await?;
    let started = Instant::now();
    {
        let mut handle = engine.lock_handle().await.map_err(internal)?;
        let db = handle.as_raw_handle().as_ptr();
        // SAFETY: `db` is the connection's open handle, which the lock
        // keeps from any other use while these calls run; sqlite3_limit
        // only sets a field of it.
        unsafe {
            for (limit, value) in LIMITS {
                libsqlite3_sys::sqlite3_limit(db, limit, value);
            }
        }
        handle.set_progress_handler(1_000, move || started.elapsed() < MAX_TIME);
    }
    let mut columns: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    let mut answer_bytes = 0;
    {
        use futures_util::TryStreamExt;
        let mut stream = sqlx::raw_sql(&sql).fetch(&mut engine);
        loop {
            let next = stream.try_next().await;
            let row: SqliteRow = match next {
                Ok(Some(row)) => row,
                Ok(None) => break,
                Err(e) if started.elapsed() >= MAX_TIME => {
                    tracing::debug!(error = %e, "query stopped");
                    return Err(query_error(
                        "QUERY_TIMEOUT",
                        format!("the query ran longer than {} s", MAX_TIME.as_secs()),
                    ));
                }
                Err(e) if is_too_big(&e) => {
                    return Err(query_error(
                        "QUERY_TOO_LARGE",
                        format!(
                            "a value the query makes is longer than {} bytes, the limit of ndbinfo SQL",
                            MAX_VALUE
                        ),
                    ));
                }
                Err(e) => return Err(query_error("INVALID_SQL", sql_message(&e))),
            };
            if columns.is_empty() {
                columns = row.columns().iter().map(|c| c.name().to_owned()).collect();
            }
            if rows.len() == MAX_ROWS {
                return Err(query_error(
                    "TOO_MANY_ROWS",
                    format!("the query answers more than {MAX_ROWS} rows: add a WHERE or a LIMIT"),
                ));
            }
            let cells = cells(&row);
            answer_bytes += cells.iter().map(cell_bytes).sum::<usize>();
            if answer_bytes > MAX_ANSWER {
                return Err(query_error(
                    "QUERY_TOO_LARGE",
                    format!(
                        "the answer is larger than {MAX_ANSWER} bytes: select fewer columns or rows"
                    ),
                ));
            }
            rows.push(cells);
        }
    }
    let _ = engine.close().await;
    Ok(Json(json!({"columns": columns, "rows": rows})))
}

fn internal(e: sqlx::Error) -> ApiError {
    tracing::error!(error = %e, "the ndbinfo query engine");
    ApiError::internal()
}

/// Whether SQLite refused to make a value past `SQLITE_LIMIT_LENGTH`.
fn is_too_big(e: &sqlx::Error) -> bool {
    match e {
        // SQLITE_TOOBIG.
        sqlx::Error::Database(db) => db.code().as_deref() == Some("18"),
        _ => false,
    }
}

/// Bytes a cell takes in the answer, near enough to bound it.
fn cell_bytes(cell: &Value) -> usize {
    match cell {
        Value::String(s) => s.len() + 2,
        _ => 8,
    }
}

/// SQLite's own words for what is wrong with a query.
fn sql_message(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => db.message().to_owned(),
        other => other.to_string(),
    }
}

fn cells(row: &SqliteRow) -> Vec<Value> {
    (0..row.len())
        .map(|i| {
            let Ok(raw) = row.try_get_raw(i) else {
                return Value::Null;
            };
            if raw.is_null() {
                return Value::Null;
            }
            match raw.type_info().name() {
                "INTEGER" => row
                    .try_get::<i64, _>(i)
                    .map(Value::from)
                    .unwrap_or(Value::Null),
                "REAL" => row
                    .try_get::<f64, _>(i)
                    .map(Value::from)
                    .unwrap_or(Value::Null),
                _ => row
                    .try_get::<String, _>(i)
                    .map(Value::from)
                    .unwrap_or(Value::Null),
            }
        })
        .collect()
}

/// A fresh engine with the rows the caller may see, read-only.
async fn load(app: &App, caller: &Caller) -> Result<SqliteConnection, ApiError> {
    let mut engine = SqliteConnectOptions::from_str("sqlite::memory:")
        .map_err(internal)?
        .connect()
        .await
        .map_err(internal)?;
    engine
        .execute("ATTACH DATABASE ':memory:' AS ndbinfo")
        .await
        .map_err(internal)?;
    // The raw tables first, then the views over them, as the data nodes'
    // one definition of them says.
    let (raw, views): (Vec<&NdbinfoTable>, Vec<&NdbinfoTable>) =
        ndbinfo::ALL.iter().partition(|t| t.view.is_none());
    for table in raw.into_iter().chain(views) {
        let sql = table.create_sql();
        engine.execute(sql.as_str()).await.map_err(internal)?;
    }
    let rows = visible_rows(app, caller).await?;
    for (table, rows) in &rows {
        for row in rows {
            let marks = vec!["?"; row.len()].join(", ");
            let sql = format!("INSERT INTO ndbinfo.\"{table}\" VALUES ({marks})");
            let mut q = sqlx::query(&sql);
            for cell in row {
                q = match cell {
                    Cell::UInt(n) => q.bind(i64::try_from(*n).unwrap_or(i64::MAX)),
                    Cell::Text(s) => q.bind(s.clone()),
                    Cell::Null => q.bind(Option::<i64>::None),
                };
            }
            q.execute(&mut engine).await.map_err(internal)?;
        }
    }
    engine
        .execute(format!("PRAGMA cache_size = -{CACHE_KIB}; PRAGMA query_only = 1").as_str())
        .await
        .map_err(internal)?;
    Ok(engine)
}

/// Rows of each raw table from every data node that is up, of the
/// caller's databases only (a platform admin's: all); table ids made unique
/// across nodes when more than one node answers.
async fn visible_rows(
    app: &App,
    caller: &Caller,
) -> Result<BTreeMap<&'static str, Vec<Vec<Cell>>>, ApiError> {
    let allowed: Option<HashSet<String>> = if caller.is_admin() {
        None
    } else {
        let names: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM databases WHERE tenant_id = $1 AND status = 'ready'",
        )
        .bind(caller.tenant()?)
        .fetch_all(&app.store.pool)
        .await?;
        Some(names.into_iter().collect())
    };
    let may_see = |db: &str| allowed.as_ref().is_none_or(|a| a.contains(db));
    let now = now_ms();
    let up: Vec<nodes::NodeRow> = nodes::all(app)
        .await?
        .into_iter()
        .filter(|n| n.up(now))
        .collect();
    let several = up.len() > 1;
    let mut out: BTreeMap<&'static str, Vec<Vec<Cell>>> = BTreeMap::new();
    for node in &up {
        let fetch = |table: NdbinfoTable| async move {
            Ok::<_, ApiError>(app.nodes.ndbinfo(node, table.name).await?.rows)
        };
        let unique = |id: &Cell| match id {
            Cell::UInt(id) if several => Cell::UInt((u64::from(node.node_id.0) << 32) | id),
            _ => id.clone(),
        };
        // Whether a row's cell names a database the caller may see.
        let visible = |cell: Option<&Cell>| matches!(cell, Some(Cell::Text(db)) if may_see(db));
        let mut tables = HashSet::new();
        for mut row in fetch(ndbinfo::TABLE_MAP).await? {
            if visible(row.get(1)) {
                tables.insert(row[0].clone());
                row[0] = unique(&row[0]);
                out.entry(ndbinfo::TABLE_MAP.name).or_default().push(row);
            }
        }
        let raw = ndbinfo::TABLE_MEMORY_USAGE_RAW;
        for mut row in fetch(raw).await? {
            if row.first().is_some_and(|id| tables.contains(id)) {
                row[0] = unique(&row[0]);
                out.entry(raw.name).or_default().push(row);
            }
        }
        for by_database in [ndbinfo::DATABASE_QUOTA_USAGE, ndbinfo::TABLE_USAGE] {
            for row in fetch(by_database).await? {
                if visible(row.first()) {
                    out.entry(by_database.name).or_default().push(row);
                }
            }
        }
        // Node-wide figures say something of every tenant: admins only.
        if caller.is_admin() {
            for table in [ndbinfo::MEMORY_USAGE, ndbinfo::NODES] {
                out.entry(table.name)
                    .or_default()
                    .extend(fetch(table).await?);
            }
        }
    }
    // The nodes registered that are not heard from are down.
    if caller.is_admin() {
        for node in nodes::all(app).await?.iter().filter(|n| !n.up(now)) {
            let row = vec![
                node.node_id.0.into(),
                node.group().into(),
                "DOWN".into(),
                Cell::Null,
                0u64.into(),
            ];
            out.entry(ndbinfo::NODES.name).or_default().push(row);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_select_is_taken_and_nothing_else() {
        for ok in [
            "SELECT 1",
            "  select * from ndbinfo.table_memory_usage;  ",
            "WITH t AS (SELECT 1) SELECT * FROM t",
            "-- a comment\nSELECT 'a;b' AS \"x;y\" /* ; */ ; -- trailing",
            "SELECT 'it''s'",
        ] {
            assert!(single_select(ok).is_ok(), "{ok}");
        }
        assert_eq!(single_select("SELECT 1 ; ").unwrap(), "SELECT 1 ");
        for bad in [
            "",
            "  -- only a comment",
            "DROP TABLE ndbinfo.memoryusage",
            "ATTACH DATABASE '/etc/passwd' AS x",
            "PRAGMA query_only = 0",
            "SELECT 1; SELECT 2",
            "SELECT 1; DROP TABLE x",
            "SELECT 'unclosed",
            "SELECT 1 /* unclosed",
            "INSERT INTO x VALUES (1)",
            "(SELECT 1)",
        ] {
            let e = single_select(bad).unwrap_err();
            assert_eq!(
                (e.status, e.code),
                (StatusCode::BAD_REQUEST, "INVALID_SQL"),
                "{bad}"
            );
        }
        assert!(single_select(&format!("SELECT '{}'", "x".repeat(MAX_SQL))).is_err());
    }
}
