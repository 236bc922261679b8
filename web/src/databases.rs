//! A tenant's databases: the list with each one's memory, rates and
//! warnings, a database's page (its tables, memory over time, how to
//! connect), and its tables, made with a column editor and dropped after a
//! confirmation page.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use reqwest::Method;
use serde_json::{Value, json};
use shoal_wire::api::{Database, DatabaseList, TableMemory, UsagePoint, UsageSeries};

use crate::Console;
use crate::chart::{Limit, Range};
use crate::format;
use crate::http::{Posted, Visitor, done_or, field, url_segment};
use crate::layout::{Confirm, bar, confirm, html_response};

/// `/`: a tenant's databases; a platform admin's every tenant.
pub(crate) async fn dashboard(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    axum::extract::Query(query): axum::extract::Query<HashMap<String, String>>,
) -> Response {
    if visitor.user.is_admin() {
        let sort = query.get("sort").map(String::as_str);
        return crate::operators::tenants_page(&console, &visitor, sort).await;
    }
    databases_page(&console, &visitor, None).await
}

pub(crate) async fn create_database(
    State(console): State<Arc<Console>>,
    posted: Posted,
) -> Response {
    let name = posted.field("name");
    let visitor = &posted.visitor;
    let body = Some(json!({"name": name}));
    let answer = visitor
        .api(&console, Method::POST, "/databases", body)
        .await;
    if answer.status == StatusCode::CREATED {
        return Redirect::to(&format!("/databases/{}", url_segment(&name))).into_response();
    }
    databases_page(&console, visitor, Some((&name, &answer.message()))).await
}

pub(crate) async fn database(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Path(name): Path<String>,
    axum::extract::Query(query): axum::extract::Query<HashMap<String, String>>,
) -> Response {
    let Some(range) = Range::asked(&query) else {
        return Range::refused();
    };
    database_page(&console, &visitor, &name, None, StatusCode::OK, range).await
}

/// A database's metered usage over `range` (its tables' with `table`).
async fn series(
    console: &Console,
    visitor: &Visitor,
    db: &str,
    table: Option<&str>,
    range: Range,
    (from, to): (i64, i64),
) -> Vec<UsagePoint> {
    let mut path = format!(
        "/usage?database={}&resolution={}&from={from}&to={to}",
        url_segment(db),
        range.resolution()
    );
    if let Some(table) = table {
        path.push_str(&format!("&table={}", url_segment(table)));
    }
    (visitor.read::<UsageSeries>(console, &path).await).map_or_else(|_| Vec::new(), |u| u.points)
}

/// Tables a database's page charts one by one (the first, by name).
const CHARTED_TABLES: usize = 6;

/// The database's charts over `range`: memory against its quota, read and
/// write units per second, throttled and refused requests — and memory,
/// reads and writes by table.
async fn charts(console: &Console, visitor: &Visitor, db: &Database, range: Range) -> Markup {
    let (from, to) = range.until_now();
    let name = db.name.as_str();
    let points = series(console, visitor, name, None, range, (from, to)).await;
    let quotas = visitor.get(console, "/quotas").await;
    let quota = (quotas["databases"].as_array().into_iter().flatten())
        .find(|d| d["name"] == name)
        .and_then(|d| d["quota"]["in_memory_bytes"].as_u64());
    let mut by_table = Vec::new();
    for table in db.tables.iter().take(CHARTED_TABLES) {
        let points = series(console, visitor, name, Some(table), range, (from, to)).await;
        by_table.push((table.clone(), points));
    }
    html! {
        (range.choice(&format!("/databases/{}", url_segment(name))))
        (crate::chart::usage(&points, Limit::Quota(quota), (from, to), &by_table))
    }
}

pub(crate) async fn create_table(
    State(console): State<Arc<Console>>,
    Path(db): Path<String>,
    Posted { visitor, form }: Posted,
) -> Response {
    let path = format!("/databases/{}/tables", url_segment(&db));
    let (status, error) = match table_of(&form) {
        Err(why) => (StatusCode::BAD_REQUEST, why),
        Ok(table) => {
            let name = table["name"].as_str().unwrap_or_default().to_owned();
            let answer = (visitor.api(&console, Method::POST, &path, Some(table))).await;
            if answer.status == StatusCode::CREATED {
                // The new table's page: its definition as SQL and JSON.
                let to = format!(
                    "/databases/{}/tables/{}",
                    url_segment(&db),
                    url_segment(&name)
                );
                return Redirect::to(&to).into_response();
            }
            (answer.status, answer.message())
        }
    };
    database_page(
        &console,
        &visitor,
        &db,
        Some((&form, &error)),
        status,
        Range::DEFAULT,
    )
    .await
}

pub(crate) async fn confirm_drop_table(
    visitor: Visitor,
    Path((db, table)): Path<(String, String)>,
) -> Response {
    let (db_at, table_at) = (url_segment(&db), url_segment(&table));
    confirm(
        &visitor,
        Confirm {
            title: "Drop table",
            question: html! { "Drop table " (table) "?" },
            warning: "Its rows are deleted and its memory is given back. This cannot be undone.",
            action: format!("/databases/{db_at}/tables/{table_at}/drop"),
            button: format!("Drop {table}"),
            cancel: format!("/databases/{db_at}"),
        },
    )
}

pub(crate) async fn drop_table(
    State(console): State<Arc<Console>>,
    Path((db, table)): Path<(String, String)>,
    Posted { visitor, .. }: Posted,
) -> Response {
    let (db, table) = (url_segment(&db), url_segment(&table));
    let path = format!("/databases/{db}/tables/{table}");
    let answer = visitor.api(&console, Method::DELETE, &path, None).await;
    done_or(
        answer,
        StatusCode::NO_CONTENT,
        &format!("/databases/{db}"),
        "Not dropped",
    )
}

fn new_database_form(csrf: &str, value: &str, error: Option<&str>) -> Markup {
    html! {
        form.inline method="post" action="/databases" {
            input type="hidden" name="csrf" value=(csrf);
            label for="name" { "New database" }
            input #name name="name" value=(value) required maxlength="63" pattern="[A-Za-z_][A-Za-z0-9_]*"
                title="letters, digits and _, starting with a letter or _";
            button type="submit" { "Create" }
            @if let Some(error) = error { p.error role="alert" { (error) } }
        }
    }
}

/// A tenant's databases with their memory, rates and warnings; the form
/// for a new one (`form_error` refills it after a mistake).
async fn databases_page(
    console: &Console,
    visitor: &Visitor,
    form_error: Option<(&str, &str)>,
) -> Response {
    let quotas = visitor.get(console, "/quotas").await;
    let listed = match visitor.read::<DatabaseList>(console, "/databases").await {
        Ok(listed) => listed.databases,
        Err(page) => return page,
    };
    let quota_of = |name: &str| {
        quotas["databases"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|d| d["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let tenant = &quotas["tenant"];
    // Each database's last hour, per minute, from metering.
    let mut recent = HashMap::new();
    for db in &listed {
        let name = db.name.as_str();
        let path = format!("/usage?database={}&resolution=minute", url_segment(name));
        // A database without samples yet has an empty series.
        let usage = visitor.read::<UsageSeries>(console, &path).await.ok();
        recent.insert(name.to_owned(), Recent::of(usage.as_ref()));
    }
    let status = if form_error.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    html_response(
        status,
        visitor.page(
            "Databases",
            html! {
                h1 { "Databases" }
                section.summary {
                    h2 { "Memory" }
                    (bar(tenant["usage"]["in_memory_bytes"].as_u64().unwrap_or(0), tenant["quota"]["in_memory_bytes"].as_u64()))
                    @for w in tenant["warnings"].as_array().into_iter().flatten() {
                        p.warning { (warning_text(w.as_str().unwrap_or(""))) }
                    }
                }
                table {
                    thead { tr { th { "Database" } th { "Tables" } th { "Memory" } th { "Units per second" } th { "Last hour" } th { "Warnings" } } }
                    tbody {
                        @for db in &listed {
                            @let name = db.name.as_str();
                            @let q = quota_of(name);
                            tr {
                                td { a href=(format!("/databases/{name}")) { (name) } }
                                td { (db.tables.len()) }
                                td { (bar(q["usage"]["in_memory_bytes"].as_u64().unwrap_or(0), q["quota"]["in_memory_bytes"].as_u64())) }
                                @let r = recent.get(name).copied().unwrap_or_default();
                                td.rates {
                                    "reads " (r.reads_per_sec) (limit(&q["quota"]["read_units_per_sec"]))
                                    br;
                                    "writes " (r.writes_per_sec) (limit(&q["quota"]["write_units_per_sec"]))
                                }
                                td.recent { (r.throttled) " throttled, " (r.rejected) " refused by a quota" }
                                td { @for w in q["warnings"].as_array().into_iter().flatten() { span.badge { (warning_text(w.as_str().unwrap_or(""))) } } }
                            }
                        }
                    }
                }
                @if visitor.changes() {
                    (new_database_form(&visitor.csrf, form_error.map_or("", |e| e.0), form_error.map(|e| e.1)))
                }
            },
        ),
    )
}

/// A database's last hour of metering: its rate in the last full minute,
/// and what was refused over the hour.
#[derive(Debug, Default, Clone, Copy)]
struct Recent {
    reads_per_sec: u64,
    writes_per_sec: u64,
    throttled: u64,
    rejected: u64,
}

impl Recent {
    fn of(usage: Option<&UsageSeries>) -> Recent {
        let points: &[UsagePoint] = usage.map_or(&[], |u| &u.points);
        // The newest minute is still filling: the one before is the last full one.
        let last_full = points.len().checked_sub(2).map(|i| &points[i]);
        Recent {
            reads_per_sec: last_full.map_or(0, |p| p.read_units / 60),
            writes_per_sec: last_full.map_or(0, |p| p.write_units / 60),
            throttled: points
                .iter()
                .map(|p| p.throttled_reads + p.throttled_writes)
                .sum(),
            rejected: points.iter().map(|p| p.quota_rejections).sum(),
        }
    }
}

/// " of N/s", or nothing without a limit.
fn limit(quota: &Value) -> String {
    quota
        .as_u64()
        .map_or_else(String::new, |n| format!(" of {}/s", format::count_exact(n)))
}

fn warning_text(code: &str) -> &str {
    match code {
        "memory_80" => {
            "memory at 80% of the quota: at 100%, writes that need more memory are refused"
        }
        "memory_100" => "memory quota reached: writes that need memory are refused",
        "throttled" => "throttled in the last interval",
        "databases_80" => "databases at 80% of the quota: at 100%, new databases are refused",
        "databases_100" => "database quota reached: a new database is refused",
        "tables_80" => "tables at 80% of the quota: at 100%, new tables are refused",
        "tables_100" => "table quota reached: a new table is refused",
        "api_keys_80" => "API keys at 80% of the quota: at 100%, new keys are refused",
        "api_keys_100" => "API key quota reached: a new key is refused (revoke one first)",
        other => other,
    }
}

/// A database's page; `table_error` refills the table form after a mistake.
async fn database_page(
    console: &Console,
    visitor: &Visitor,
    name: &str,
    table_error: Option<(&HashMap<String, String>, &str)>,
    status: StatusCode,
    range: Range,
) -> Response {
    let path = format!("/databases/{}", url_segment(name));
    let db = match visitor.read::<Database>(console, &path).await {
        Ok(db) => db,
        Err(page) => return page,
    };
    let memory = visitor
        .read::<TableMemory>(console, &format!("{path}/memory"))
        .await
        .ok();
    let charts = charts(console, visitor, &db, range).await;
    let memory_of = |table: &str| memory.as_ref().map_or((0, 0), |m| m.of(table));
    let empty = HashMap::new();
    let (values, error) = table_error.map_or((&empty, None), |(v, e)| (v, Some(e)));
    html_response(
        status,
        visitor.page(
            name,
            html! {
                    h1 { "Database " (name) }
                    h2 { "Tables" }
                    table #tables {
                        thead { tr { th { "Table" } th { "Memory" } th { "Free inside it" } th { "" } } }
                        tbody {
                            @for table in &db.tables {
                                @let (used, free) = memory_of(table);
                                tr {
                                    td { a href=(format!("{path}/tables/{}", url_segment(table))) { (table) } }
                                    td.memory { (format::bytes(used)) }
                                    td { (format::bytes(free)) }
                                    td { @if visitor.changes() { a href=(format!("{path}/tables/{}/drop", url_segment(table))) { "Drop" } } }
                                }
                            }
                        }
                    }
                    h2 { "Usage" }
            (charts)
            @if visitor.changes() { (table_form(name, &visitor.csrf, values, error)) }
                    h2 { "Connect" }
                    (crate::connect::nodes(&db))
                    p { a #connect-link href=(format!("{path}/connect")) { "Connect: ready lines for curl, redis-cli, redis-py, node-redis, mysql and RonDB REST clients" } ", with a key made for them." }
                },
        ),
    )
}

/// Column rows the table form offers (the "Add column" button adds more).
const COLUMN_ROWS: usize = 4;

/// The types a column is chosen from, and what each takes in brackets:
/// `(name, takes)`; the length, precision or fractional seconds, and a
/// scale, are fields beside the list.
const TYPES: [(&str, Takes); 17] = [
    ("BIGINT", Takes::Nothing),
    ("BIGINT UNSIGNED", Takes::Nothing),
    ("INT", Takes::Nothing),
    ("INT UNSIGNED", Takes::Nothing),
    ("SMALLINT", Takes::Nothing),
    ("TINYINT", Takes::Nothing),
    ("BOOL", Takes::Nothing),
    ("DOUBLE", Takes::Nothing),
    ("FLOAT", Takes::Nothing),
    ("DECIMAL", Takes::PrecisionAndScale),
    ("VARCHAR", Takes::Length),
    ("CHAR", Takes::Length),
    ("VARBINARY", Takes::Length),
    ("BINARY", Takes::Length),
    ("DATE", Takes::Nothing),
    ("DATETIME", Takes::Fraction),
    ("TIMESTAMP", Takes::Fraction),
];

/// What a type takes in brackets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Takes {
    Nothing,
    /// `(n)`, required.
    Length,
    /// `(p,s)`, scale optional.
    PrecisionAndScale,
    /// `(fsp)`, optional.
    Fraction,
}

/// The table form of the database page; `values` refill it after a mistake.
fn table_form(
    db: &str,
    csrf: &str,
    values: &HashMap<String, String>,
    error: Option<&str>,
) -> Markup {
    let rows = (0..64)
        .take_while(|i| *i < COLUMN_ROWS || values.contains_key(&format!("col{i}_name")))
        .count()
        .max(COLUMN_ROWS);
    let value = |key: String| values.get(&key).map_or("", String::as_str).to_owned();
    html! {
        form.card.wide #new-table method="post" action=(format!("/databases/{}/tables", url_segment(db))) {
            input type="hidden" name="csrf" value=(csrf);
            label for="table_name" { "New table" }
            input #table_name name="table_name" value=(value("table_name".into())) required maxlength="63";
            fieldset #columns {
                legend { "Columns" }
                p.figure { "Length for VARCHAR, CHAR, VARBINARY and BINARY; precision and scale for DECIMAL; fractional seconds (0–6) for DATETIME and TIMESTAMP. A default is what a row inserted without the column stores (as you would type it in a row: text, a number, true or false; CURRENT_TIMESTAMP for a DATETIME or TIMESTAMP stores the time of the insert). Tick " em { "key" } " on the primary key's columns (in this order), " em { "index" } " for an ordered index on a column, " em { "unique" } " for one no two rows may share." }
                @for i in 0..rows {
                    @let chosen = value(format!("col{i}_type"));
                    div.column {
                        input name=(format!("col{i}_name")) placeholder="column" aria-label=(format!("column {} name", i + 1))
                            value=(value(format!("col{i}_name")));
                        select name=(format!("col{i}_type")) aria-label=(format!("column {} type", i + 1)) {
                            @for (t, _) in TYPES { option value=(t) selected[chosen == t] { (t) } }
                        }
                        input.small name=(format!("col{i}_len")) inputmode="numeric" placeholder="length" aria-label=(format!("column {} length or precision", i + 1))
                            value=(value(format!("col{i}_len")));
                        input.small name=(format!("col{i}_scale")) inputmode="numeric" placeholder="scale" aria-label=(format!("column {} scale", i + 1))
                            value=(value(format!("col{i}_scale")));
                        input.small name=(format!("col{i}_default")) placeholder="default" aria-label=(format!("column {} default", i + 1))
                            value=(value(format!("col{i}_default")));
                        label { input type="checkbox" name=(format!("col{i}_nullable")) value="1"
                            checked[values.contains_key(&format!("col{i}_nullable"))]; " nullable" }
                        label { input type="checkbox" name=(format!("col{i}_key")) value="1"
                            checked[values.contains_key(&format!("col{i}_key"))]; " key" }
                        label { input type="checkbox" name=(format!("col{i}_index")) value="1"
                            checked[values.contains_key(&format!("col{i}_index"))]; " index" }
                        label { input type="checkbox" name=(format!("col{i}_unique")) value="1"
                            checked[values.contains_key(&format!("col{i}_unique"))]; " unique" }
                    }
                }
                button type="button" #add-column { "Add column" }
            }
            label for="more_indexes" { "Indexes on several columns" }
            textarea #more_indexes name="more_indexes" rows="2" maxlength="2000" placeholder="by_org_name (org, name)\nunique by_day_slot (day, slot)" {
                (value("more_indexes".into()))
            }
            @if let Some(error) = error { p.error role="alert" { (error) } }
            button type="submit" { "Create table" }
        }
        script { (maud::PreEscaped(ADD_COLUMN_JS)) }
    }
}

/// "Add column": a copy of the last row with the next index, empty.
const ADD_COLUMN_JS: &str = r#"
document.getElementById('add-column').addEventListener('click', function () {
  var rows = document.querySelectorAll('#columns .column');
  var last = rows[rows.length - 1], next = last.cloneNode(true), n = rows.length;
  next.querySelectorAll('input, select').forEach(function (input) {
    input.name = input.name.replace(/^col\d+_/, 'col' + n + '_');
    if (input.type === 'checkbox') { input.checked = false; } else if (input.tagName === 'INPUT') { input.value = ''; } else { input.selectedIndex = 0; }
    if (input.getAttribute('aria-label')) { input.setAttribute('aria-label', input.getAttribute('aria-label').replace(/\d+/, n + 1)); }
  });
  last.after(next);
  next.querySelector('input').focus();
});
"#;

/// A column's type from its row: the type chosen, with its length,
/// precision and scale or fractional seconds. A type typed in whole (an
/// older form, or the API's own text) is taken as it is.
fn column_type(form: &HashMap<String, String>, i: usize) -> Result<String, String> {
    let base = form.get(&format!("col{i}_type")).map_or("", |t| t.trim());
    let number = |key: &str| {
        let text = form.get(&format!("col{i}_{key}")).map_or("", |t| t.trim());
        match text {
            "" => Ok(None),
            t => t
                .parse::<u32>()
                .map(Some)
                .map_err(|_| format!("column {}: {key} '{t}' is not a whole number", i + 1)),
        }
    };
    let (len, scale) = (number("len")?, number("scale")?);
    let takes = TYPES
        .iter()
        .find(|(t, _)| *t == base)
        .map(|(_, takes)| *takes);
    let ty = match (takes, len, scale) {
        (None, None, None) | (Some(Takes::Nothing), None, None) => base.to_owned(),
        (Some(Takes::Length), Some(n), None) => format!("{base}({n})"),
        (Some(Takes::Length), None, _) => {
            return Err(format!("column {}: {base} needs a length", i + 1));
        }
        (Some(Takes::PrecisionAndScale), Some(p), s) => format!("{base}({p},{})", s.unwrap_or(0)),
        (Some(Takes::PrecisionAndScale), None, None) => base.to_owned(),
        (Some(Takes::Fraction), Some(f), None) => format!("{base}({f})"),
        (Some(Takes::Fraction), None, None) => base.to_owned(),
        _ => {
            return Err(format!(
                "column {}: {base} takes no {}",
                i + 1,
                if scale.is_some() { "scale" } else { "length" }
            ));
        }
    };
    Ok(ty)
}

/// A default typed in the editor, as the API takes it: a boolean for a
/// BOOL, a number for an integer or floating-point column when it reads as
/// one exactly, else the text (the data node reads decimals, dates and
/// base64 from text, and refuses what does not fit).
fn default_of(ty: &str, text: &str) -> Value {
    let base = crate::rows::base_type(ty);
    let t = text.trim();
    match base.as_str() {
        "BOOL" | "BOOLEAN" if matches!(t, "true" | "1") => json!(true),
        "BOOL" | "BOOLEAN" if matches!(t, "false" | "0") => json!(false),
        "TINYINT" | "SMALLINT" | "MEDIUMINT" | "INT" | "INTEGER" | "BIGINT" => {
            match (t.parse::<i64>(), t.parse::<u64>()) {
                (Ok(i), _) => json!(i),
                (_, Ok(u)) => json!(u),
                _ => json!(text),
            }
        }
        "FLOAT" | "DOUBLE" | "REAL" => match t.parse::<f64>() {
            Ok(f) if f.is_finite() && f.to_string() == t => json!(f),
            _ => json!(text),
        },
        _ => json!(text),
    }
}

/// Indexes on several columns, a line each: `[unique] name (column, …)`.
fn more_indexes(text: &str) -> Result<Vec<Value>, String> {
    let mut indexes = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let bad = || format!("indexes: '{line}' is not like  by_org_name (org, name)");
        let (unique, rest) = match line.split_once(char::is_whitespace) {
            Some((first, rest)) if first.eq_ignore_ascii_case("unique") => (true, rest.trim()),
            _ => (false, line),
        };
        let (name, columns) = rest.split_once('(').ok_or_else(bad)?;
        let columns = columns.trim().strip_suffix(')').ok_or_else(bad)?;
        let columns: Vec<&str> = columns.split(',').map(str::trim).collect();
        if name.trim().is_empty() || columns.iter().any(|c| c.is_empty()) {
            return Err(bad());
        }
        let mut index = json!({"name": name.trim(), "columns": columns});
        if unique {
            index["unique"] = json!(true);
        }
        indexes.push(index);
    }
    Ok(indexes)
}

/// The table a form describes, as the API takes it.
fn table_of(form: &HashMap<String, String>) -> Result<Value, String> {
    let mut columns = Vec::new();
    let (mut key, mut indexes) = (Vec::new(), Vec::new());
    for i in 0..256 {
        let Some(name) = form.get(&format!("col{i}_name")) else {
            break;
        };
        let name = name.trim();
        if name.is_empty() {
            continue;
        }
        let ty = column_type(form, i)?;
        let mut column = json!({
            "name": name,
            "type": ty,
            "nullable": form.contains_key(&format!("col{i}_nullable")),
        });
        let default = form
            .get(&format!("col{i}_default"))
            .map_or("", String::as_str);
        if !default.is_empty() {
            column["default"] = default_of(&ty, default);
        }
        columns.push(column);
        if form.contains_key(&format!("col{i}_key")) {
            key.push(name.to_owned());
        }
        let unique = form.contains_key(&format!("col{i}_unique"));
        if unique || form.contains_key(&format!("col{i}_index")) {
            let mut index = json!({"name": format!("by_{name}"), "columns": [name]});
            if unique {
                index["unique"] = json!(true);
            }
            indexes.push(index);
        }
    }
    indexes.extend(more_indexes(&field(form, "more_indexes"))?);
    // A primary key typed as text (the API's own form of it) is taken too.
    if key.is_empty() {
        key = (field(form, "primary_key").split(','))
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty())
            .collect();
    }
    let mut table =
        json!({"name": field(form, "table_name").trim(), "columns": columns, "primary_key": key});
    if !indexes.is_empty() {
        table["indexes"] = Value::Array(indexes);
    }
    Ok(table)
}
