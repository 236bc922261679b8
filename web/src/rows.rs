//! A table's rows in the console: a page at a time in primary-key order,
//! a row looked up by its key, and rows inserted, changed and deleted
//! through forms. Each is a call of the control plane's rows API, so the
//! data node's coordinator checks every value against its column (and
//! says what is wrong with it) and charges the database for the read or
//! the write, as for any client. Values reach the page escaped (maud);
//! NULL is shown as such, binary as base64.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::Console;
use crate::http::{Answer, Posted, Visitor, url_segment};
use crate::layout::{Confirm, confirm, html_response, problem};

/// A column of the table, as its definition has it.
struct Column {
    name: String,
    ty: String,
    nullable: bool,
    key: bool,
    /// What an insert leaving the column out stores.
    default: Option<Value>,
}

impl Column {
    /// What the column takes, in a few words, for the form's placeholder
    /// (and what an empty field inserts, if it has a default).
    fn hint(&self) -> String {
        match &self.default {
            Some(d) => format!("{}; empty: {}", self.takes(), text_of(d)),
            None => self.takes(),
        }
    }

    fn takes(&self) -> String {
        let ty = self.ty.to_ascii_uppercase();
        match base_type(&self.ty).as_str() {
            "TINYINT" | "SMALLINT" | "MEDIUMINT" | "INT" | "INTEGER" | "BIGINT" => {
                "a whole number".into()
            }
            "DECIMAL" | "NUMERIC" => "a decimal, e.g. 12.50".into(),
            "FLOAT" | "DOUBLE" | "REAL" => "a number".into(),
            "DATE" => "YYYY-MM-DD".into(),
            "DATETIME" | "TIMESTAMP" => "YYYY-MM-DD HH:MM:SS".into(),
            "BINARY" | "VARBINARY" => "base64".into(),
            "BOOL" | "BOOLEAN" => "true or false".into(),
            _ => match ty.split_once('(') {
                Some((_, n)) => format!("text, up to {} characters", n.trim_end_matches(')')),
                None => "text".into(),
            },
        }
    }

    fn is_bool(&self) -> bool {
        matches!(base_type(&self.ty).as_str(), "BOOL" | "BOOLEAN")
    }

    /// A form's text for this column as the API takes it: a boolean for a
    /// `BOOL` that reads as one, else the text (the data node reads numbers,
    /// dates and base64 from text, and says so when it cannot).
    fn value_of(&self, text: &str) -> Value {
        match (self.is_bool(), text.trim()) {
            (true, "true" | "1") => Value::Bool(true),
            (true, "false" | "0") => Value::Bool(false),
            _ => Value::String(text.to_owned()),
        }
    }
}

/// A column type's name without its length, precision or sign, upper-case:
/// `varchar(20)` → `VARCHAR`, `INT UNSIGNED` → `INT`.
pub(crate) fn base_type(ty: &str) -> String {
    let end = ty
        .find(|c: char| c == '(' || c.is_whitespace())
        .unwrap_or(ty.len());
    ty[..end].to_ascii_uppercase()
}

/// The columns of a table definition, its key's marked.
fn columns(definition: &Value) -> Vec<Column> {
    let key: Vec<&str> = (definition["primary_key"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    (definition["columns"].as_array().into_iter().flatten())
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default().to_owned();
            Column {
                key: key.contains(&name.as_str()),
                ty: c["type"].as_str().unwrap_or_default().to_owned(),
                nullable: c["nullable"].as_bool().unwrap_or(false),
                default: c.get("default").cloned().filter(|d| !d.is_null()),
                name,
            }
        })
        .collect()
}

/// A value as a form field holds it: text, empty for NULL.
fn text_of(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A cell of the rows table.
fn cell(value: &Value) -> Markup {
    match value {
        Value::Null => html! { span.null { "NULL" } },
        other => html! { (text_of(other)) },
    }
}

/// The query string naming a row by its key: `k.<column>=<value>&…`.
fn key_query(columns: &[Column], row: &Value) -> String {
    (columns.iter().filter(|c| c.key))
        .map(|c| {
            format!(
                "k.{}={}",
                url_segment(&c.name),
                url_segment(&text_of(&row[&c.name]))
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The key a query or form names (`k.<column>`), as the API takes it; `None`
/// if a key column is missing.
fn key_of(columns: &[Column], fields: &HashMap<String, String>) -> Option<Value> {
    let mut key = Map::new();
    for c in columns.iter().filter(|c| c.key) {
        let text = fields.get(&format!("k.{}", c.name))?;
        key.insert(c.name.clone(), c.value_of(text));
    }
    Some(Value::Object(key))
}

/// The row a form gives (`c.<column>`, `null.<column>` checked for NULL):
/// every column it has a field for — but for an `insert`, not a column with
/// a default whose field is empty: the data node stores the default.
fn row_of(columns: &[Column], form: &HashMap<String, String>, insert: bool) -> Value {
    let mut row = Map::new();
    for c in columns {
        if form.contains_key(&format!("null.{}", c.name)) {
            row.insert(c.name.clone(), Value::Null);
        } else if let Some(text) = form.get(&format!("c.{}", c.name)) {
            if insert && text.is_empty() && c.default.is_some() {
                continue;
            }
            row.insert(c.name.clone(), c.value_of(text));
        }
    }
    Value::Object(row)
}

/// The table's definition, or the page saying why not.
async fn definition_of(
    console: &Console,
    visitor: &Visitor,
    db: &str,
    table: &str,
) -> Result<Value, Response> {
    let path = format!("/databases/{}/tables", url_segment(db));
    let answer = visitor.api(console, Method::GET, &path, None).await;
    if answer.status != StatusCode::OK {
        return Err(problem(answer.status, "Not found", &answer.message()));
    }
    (answer.body["tables"].as_array().into_iter().flatten())
        .find(|t| t["name"] == table)
        .cloned()
        .ok_or_else(|| problem(StatusCode::NOT_FOUND, "Not found", "no such table"))
}

/// The table's columns, or the page saying why not.
async fn columns_of(
    console: &Console,
    visitor: &Visitor,
    db: &str,
    table: &str,
) -> Result<Vec<Column>, Response> {
    definition_of(console, visitor, db, table)
        .await
        .map(|d| columns(&d))
}

/// A table's definition as SQL (MySQL's, as RonDB's users write it).
fn sql_of(definition: &Value) -> String {
    match serde_json::from_value::<shoal_wire::schema::TableDef>(definition.clone()) {
        Ok(def) => format!("{};", def.create_sql()),
        Err(_) => String::new(),
    }
}

/// The page for a row named without every column of its key.
fn which_row() -> Response {
    problem(
        StatusCode::BAD_REQUEST,
        "Which row?",
        "give a value for every column of the primary key",
    )
}

/// Calls the rows API for one row.
async fn row_call(
    console: &Console,
    visitor: &Visitor,
    db: &str,
    table: &str,
    body: Value,
) -> Answer {
    let path = format!(
        "/databases/{}/tables/{}/rows",
        url_segment(db),
        url_segment(table)
    );
    visitor.api(console, Method::POST, &path, Some(body)).await
}

/// Where a table's page is.
fn table_url(db: &str, table: &str) -> String {
    format!(
        "/databases/{}/tables/{}",
        url_segment(db),
        url_segment(table)
    )
}

/// `GET /databases/{db}/tables/{table}?after=`: the table's rows.
pub(crate) async fn table(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Path((db, table)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let after = query.get("after").map(String::as_str);
    table_page(&console, &visitor, &db, &table, after, None).await
}

/// A refused form: what was typed, and why it was refused.
struct Refused<'a> {
    form: &'a HashMap<String, String>,
    status: StatusCode,
    message: String,
}

async fn table_page(
    console: &Console,
    visitor: &Visitor,
    db: &str,
    table: &str,
    after: Option<&str>,
    refused: Option<Refused<'_>>,
) -> Response {
    let mut path = format!("{}/rows?limit=50", table_url(db, table));
    if let Some(after) = after {
        path.push_str(&format!("&after={}", url_segment(after)));
    }
    // A page answers the table's definition with its rows.
    let page = visitor.api(console, Method::GET, &path, None).await;
    let (definition, rows, next, unbrowsable) = match page.status {
        StatusCode::OK => (
            page.body["table"].clone(),
            page.body["rows"].as_array().cloned().unwrap_or_default(),
            page.body["next"].as_str().map(str::to_owned),
            None,
        ),
        // A key hashed only has no order: rows are looked up by key.
        StatusCode::BAD_REQUEST if page.body["error"]["code"] == "NO_SUCH_INDEX" => {
            let definition = match definition_of(console, visitor, db, table).await {
                Ok(d) => d,
                Err(page) => return page,
            };
            (definition, Vec::new(), None, Some(page.message()))
        }
        StatusCode::NOT_FOUND => return problem(page.status, "Not found", &page.message()),
        status => return problem(status, "The rows could not be read", &page.message()),
    };
    let columns = columns(&definition);
    let here = table_url(db, table);
    let status = refused.as_ref().map_or(StatusCode::OK, |r| r.status);
    let empty = HashMap::new();
    let typed = refused.as_ref().map_or(&empty, |r| r.form);
    html_response(
        status,
        visitor.page(
            table,
            html! {
                h1 { "Table " (table) }
                p { "In database " a href=(format!("/databases/{}", url_segment(db))) { (db) } ". "
                    "Rows in primary-key order, 50 a page; NULL is shown as " span.null { "NULL" } ", binary values as base64." }
                form.inline #lookup method="get" action=(format!("{here}/row")) {
                    @for c in columns.iter().filter(|c| c.key) {
                        label for=(format!("lookup-{}", c.name)) { (c.name) }
                        input id=(format!("lookup-{}", c.name)) name=(format!("k.{}", c.name)) placeholder=(c.hint()) required;
                    }
                    button type="submit" { "Look up" }
                }
                @if let Some(why) = &unbrowsable {
                    p.warning { "This table's rows cannot be listed in order: " (why) }
                }
                div.scroll {
                    table #rows {
                        thead { tr {
                            @for c in &columns {
                                th { (c.name) @if c.key { " " span.badge { "key" } } br; small.type { (c.ty) @if c.nullable { ", nullable" } } }
                            }
                            th { span.visually-hidden { "Actions" } }
                        } }
                        tbody {
                            @for row in &rows {
                                @let key = key_query(&columns, row);
                                tr {
                                    @for c in &columns { td { (cell(&row[&c.name])) } }
                                    td.actions {
                                        @if visitor.changes() {
                                            a href=(format!("{here}/row?{key}")) { "Edit" }
                                            " "
                                            a href=(format!("{here}/row/delete?{key}")) { "Delete" }
                                        } @else {
                                            a href=(format!("{here}/row?{key}")) { "View" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if rows.is_empty() && unbrowsable.is_none() { p #no-rows { "No rows " @if after.is_some() { "after these" } @else { "yet" } "." } }
                nav.pages {
                    @if after.is_some() { a href=(here) { "First page" } " " }
                    @if let Some(next) = &next { a #next-page href=(format!("{here}?after={}", url_segment(next))) { "Next page" } }
                }
                details #definition {
                    summary { "Definition: as SQL, and as JSON for the API" }
                    pre { code #definition-sql { (sql_of(&definition)) } }
                    pre { code #definition-json { (serde_json::to_string_pretty(&definition).unwrap_or_default()) } }
                }
                @if visitor.changes() {
                    h2 { "Insert a row" }
                    form.card #insert-row method="post" action=(format!("{here}/rows")) {
                        input type="hidden" name="csrf" value=(visitor.csrf);
                        (fields(&columns, typed, true))
                        @if let Some(r) = &refused { p.error role="alert" { (r.message) } }
                        button type="submit" { "Insert" }
                    }
                }
            },
        ),
    )
}

/// Typing a value into a field unticks its NULL box (without scripts, a
/// ticked box wins, as the page says).
const NULL_JS: &str = r#"
document.querySelectorAll('.field input[name^="c."]').forEach(function (input) {
  input.addEventListener('input', function () {
    var box = document.querySelector('input[name="null.' + input.name.slice(2) + '"]');
    if (box) { box.checked = false; }
  });
});
"#;

/// A field per column (`with_key`: the key's too), refilled from `values`.
fn fields(columns: &[Column], values: &HashMap<String, String>, with_key: bool) -> Markup {
    html! {
        p.figure { "A ticked NULL box stores NULL, whatever the field holds." }
        @for c in columns.iter().filter(|c| with_key || !c.key) {
            @let id = format!("c.{}", c.name);
            div.field {
                label for=(id) { (c.name) " " small.type { (c.ty) } }
                input id=(id) name=(id) placeholder=(c.hint())
                    value=(values.get(&id).map_or("", String::as_str));
                @if c.nullable {
                    label.null-choice { input type="checkbox" name=(format!("null.{}", c.name)) value="1"
                        checked[values.contains_key(&format!("null.{}", c.name))]; " NULL" }
                }
            }
        }
        script { (maud::PreEscaped(NULL_JS)) }
    }
}

/// `POST /databases/{db}/tables/{table}/rows`: inserts the form's row.
pub(crate) async fn insert(
    State(console): State<Arc<Console>>,
    Path((db, table)): Path<(String, String)>,
    Posted { visitor, form }: Posted,
) -> Response {
    let columns = match columns_of(&console, &visitor, &db, &table).await {
        Ok(c) => c,
        Err(page) => return page,
    };
    let row = row_of(&columns, &form, true);
    let answer = row_call(
        &console,
        &visitor,
        &db,
        &table,
        json!({"op": "insert", "row": row}),
    )
    .await;
    if answer.status == StatusCode::OK {
        return Redirect::to(&table_url(&db, &table)).into_response();
    }
    let refused = Refused {
        form: &form,
        status: answer.status,
        message: answer.message(),
    };
    table_page(&console, &visitor, &db, &table, None, Some(refused)).await
}

/// `GET /databases/{db}/tables/{table}/row?k.<column>=…`: one row, and the
/// form that changes it.
pub(crate) async fn row(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Path((db, table)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    row_page(&console, &visitor, &db, &table, &query, None).await
}

async fn row_page(
    console: &Console,
    visitor: &Visitor,
    db: &str,
    table: &str,
    fields_given: &HashMap<String, String>,
    refused: Option<Refused<'_>>,
) -> Response {
    let columns = match columns_of(console, visitor, db, table).await {
        Ok(c) => c,
        Err(page) => return page,
    };
    let Some(key) = key_of(&columns, fields_given) else {
        return which_row();
    };
    let found = row_call(
        console,
        visitor,
        db,
        table,
        json!({"op": "read", "key": key}),
    )
    .await;
    if found.status != StatusCode::OK {
        let title = if found.status == StatusCode::NOT_FOUND {
            "No such row"
        } else {
            "The row could not be read"
        };
        return problem(found.status, title, &found.message());
    }
    let row = &found.body["row"];
    let here = table_url(db, table);
    let key_text = key_query(&columns, row);
    // The row as it is, unless a refused form is shown again.
    let current: HashMap<String, String> = match &refused {
        Some(r) => r.form.clone(),
        None => (columns.iter())
            .flat_map(|c| {
                let value = &row[&c.name];
                let text = (format!("c.{}", c.name), text_of(value));
                let null = value
                    .is_null()
                    .then(|| (format!("null.{}", c.name), "1".to_owned()));
                std::iter::once(text).chain(null)
            })
            .collect(),
    };
    let status = refused.as_ref().map_or(StatusCode::OK, |r| r.status);
    html_response(
        status,
        visitor.page(
            table,
            html! {
                h1 { "A row of " a href=(here) { (table) } }
                dl.key {
                    @for c in columns.iter().filter(|c| c.key) { dt { (c.name) } dd { (cell(&row[&c.name])) } }
                }
                @if visitor.changes() {
                    form.card #edit-row method="post" action=(format!("{here}/row?{key_text}")) {
                        input type="hidden" name="csrf" value=(visitor.csrf);
                        (fields(&columns, &current, false))
                        @if let Some(r) = &refused { p.error role="alert" { (r.message) } }
                        button type="submit" { "Save" }
                    }
                    p { a href=(format!("{here}/row/delete?{key_text}")) { "Delete this row" } " · " a href=(here) { "Back to the table" } }
                } @else {
                    dl.row #row-values {
                        @for c in columns.iter().filter(|c| !c.key) { dt { (c.name) } dd { (cell(&row[&c.name])) } }
                    }
                    p { a href=(here) { "Back to the table" } }
                }
            },
        ),
    )
}

/// `POST /databases/{db}/tables/{table}/row?k.<column>=…`: changes the row.
pub(crate) async fn update(
    State(console): State<Arc<Console>>,
    Path((db, table)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    Posted { visitor, form }: Posted,
) -> Response {
    let columns = match columns_of(&console, &visitor, &db, &table).await {
        Ok(c) => c,
        Err(page) => return page,
    };
    let Some(Value::Object(key)) = key_of(&columns, &query) else {
        return which_row();
    };
    let Value::Object(mut row) = row_of(&columns, &form, false) else {
        unreachable!("row_of makes an object")
    };
    // The key names the row; a form cannot move it.
    row.extend(key);
    let answer = row_call(
        &console,
        &visitor,
        &db,
        &table,
        json!({"op": "update", "row": row}),
    )
    .await;
    if answer.status == StatusCode::OK {
        let to = format!(
            "{}/row?{}",
            table_url(&db, &table),
            key_query(&columns, &Value::Object(row))
        );
        return Redirect::to(&to).into_response();
    }
    let refused = Refused {
        form: &form,
        status: answer.status,
        message: answer.message(),
    };
    row_page(&console, &visitor, &db, &table, &query, Some(refused)).await
}

/// `GET /databases/{db}/tables/{table}/row/delete?k.<column>=…`: asks first.
pub(crate) async fn confirm_delete(
    visitor: Visitor,
    Path((db, table)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let here = table_url(&db, &table);
    let shown: Vec<String> = (query.iter())
        .filter_map(|(k, v)| Some(format!("{} = {v}", k.strip_prefix("k.")?)))
        .collect();
    let key: String = (query.iter())
        .filter(|(k, _)| k.starts_with("k."))
        .map(|(k, v)| format!("{}={}", url_segment(k), url_segment(v)))
        .collect::<Vec<_>>()
        .join("&");
    confirm(
        &visitor,
        Confirm {
            title: "Delete row",
            question: html! { "Delete the row of " (table) " with " (shown.join(", ")) "?" },
            warning: "This cannot be undone.",
            action: format!("{here}/row/delete?{key}"),
            button: "Delete the row".into(),
            cancel: here,
        },
    )
}

/// `POST /databases/{db}/tables/{table}/row/delete?k.<column>=…`.
pub(crate) async fn delete(
    State(console): State<Arc<Console>>,
    Path((db, table)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    Posted { visitor, .. }: Posted,
) -> Response {
    let columns = match columns_of(&console, &visitor, &db, &table).await {
        Ok(c) => c,
        Err(page) => return page,
    };
    let Some(key) = key_of(&columns, &query) else {
        return which_row();
    };
    let answer = row_call(
        &console,
        &visitor,
        &db,
        &table,
        json!({"op": "delete", "key": key}),
    )
    .await;
    if answer.status != StatusCode::OK {
        return problem(answer.status, "Not deleted", &answer.message());
    }
    Redirect::to(&table_url(&db, &table)).into_response()
}
