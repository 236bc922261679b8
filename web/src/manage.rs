//! The pages that change things: tables (create with a column editor, drop
//! after a confirmation page), API keys (create — the secret shown once —
//! and revoke after confirmation), and for platform admins a tenant's
//! quotas, suspension and audit trail.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use reqwest::Method;
use serde_json::{Value, json};

use crate::Console;
use crate::format;
use crate::pages::{Posted, api, field, html_response, message, page, problem, url_segment, who};

/// Column rows the table form offers (the "Add column" button adds more).
const COLUMN_ROWS: usize = 4;
const TYPES: [&str; 12] = [
    "BIGINT",
    "INT",
    "SMALLINT",
    "DOUBLE",
    "DECIMAL(12,2)",
    "VARCHAR(100)",
    "VARCHAR(1000)",
    "CHAR(2)",
    "VARBINARY(1024)",
    "DATE",
    "DATETIME(3)",
    "BOOL",
];

/// The table form of the database page; `values` refill it after a mistake.
pub(crate) fn table_form(
    db: &str,
    csrf: &str,
    values: &HashMap<String, String>,
    error: Option<&str>,
) -> Markup {
    let rows = (0..64)
        .take_while(|i| *i < COLUMN_ROWS || values.contains_key(&format!("col{i}_name")))
        .count()
        .max(COLUMN_ROWS);
    html! {
        form.card #new-table method="post" action=(format!("/databases/{}/tables", url_segment(db))) {
            input type="hidden" name="csrf" value=(csrf);
            label for="table_name" { "New table" }
            input #table_name name="table_name" value=(values.get("table_name").map_or("", String::as_str)) required maxlength="63";
            fieldset #columns {
                legend { "Columns" }
                @for i in 0..rows {
                    div.column {
                        input name=(format!("col{i}_name")) placeholder="column" aria-label=(format!("column {} name", i + 1))
                            value=(values.get(&format!("col{i}_name")).map_or("", String::as_str));
                        input name=(format!("col{i}_type")) list="types" placeholder="type" aria-label=(format!("column {} type", i + 1))
                            value=(values.get(&format!("col{i}_type")).map_or("", String::as_str));
                        label { input type="checkbox" name=(format!("col{i}_nullable")) value="1"
                            checked[values.contains_key(&format!("col{i}_nullable"))]; " nullable" }
                    }
                }
                datalist #types { @for t in TYPES { option value=(t); } }
                button type="button" #add-column { "Add column" }
            }
            label for="primary_key" { "Primary key (columns, comma-separated)" }
            input #primary_key name="primary_key" value=(values.get("primary_key").map_or("", String::as_str)) required;
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
  next.querySelectorAll('input').forEach(function (input) {
    input.name = input.name.replace(/^col\d+_/, 'col' + n + '_');
    if (input.type === 'checkbox') { input.checked = false; } else { input.value = ''; }
    if (input.getAttribute('aria-label')) { input.setAttribute('aria-label', input.getAttribute('aria-label').replace(/\d+/, n + 1)); }
  });
  last.after(next);
  next.querySelector('input').focus();
});
"#;

/// The table a form describes, as the API takes it.
fn table_of(form: &HashMap<String, String>) -> Value {
    let mut columns = Vec::new();
    for i in 0..256 {
        let Some(name) = form.get(&format!("col{i}_name")) else {
            break;
        };
        if name.trim().is_empty() {
            continue;
        }
        columns.push(json!({
            "name": name.trim(),
            "type": form.get(&format!("col{i}_type")).map_or("", |t| t.trim()),
            "nullable": form.contains_key(&format!("col{i}_nullable")),
        }));
    }
    let key: Vec<String> = field(form, "primary_key")
        .split(',')
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty())
        .collect();
    json!({"name": field(form, "table_name").trim(), "columns": columns, "primary_key": key})
}

pub(crate) async fn create_table(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(db): Path<String>,
    Posted { token, form, .. }: Posted,
) -> Response {
    let path = format!("/databases/{}/tables", url_segment(&db));
    let (status, answer, _) = api(
        &console,
        Method::POST,
        &path,
        Some(&token),
        Some(table_of(&form)),
    )
    .await;
    if status == StatusCode::CREATED {
        return Redirect::to(&format!("/databases/{}", url_segment(&db))).into_response();
    }
    crate::pages::database_page(
        &console,
        &headers,
        &db,
        Some((&form, &message(&answer))),
        status,
    )
    .await
}

pub(crate) async fn confirm_drop_table(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path((db, table)): Path<(String, String)>,
) -> Response {
    let (_, csrf, user) = match who(&console, &headers).await {
        Ok(who) => who,
        Err(elsewhere) => return elsewhere,
    };
    html_response(
        StatusCode::OK,
        page(
            "Drop table",
            Some((&user, &csrf)),
            html! {
                h1 { "Drop table " (table) "?" }
                p.warning { "Its rows are deleted and its memory is given back. This cannot be undone." }
                form method="post" action=(format!("/databases/{}/tables/{}/drop", url_segment(&db), url_segment(&table))) {
                    input type="hidden" name="csrf" value=(csrf);
                    button.danger type="submit" { "Drop " (table) }
                    " " a href=(format!("/databases/{}", url_segment(&db))) { "Cancel" }
                }
            },
        ),
    )
}

pub(crate) async fn drop_table(
    State(console): State<Arc<Console>>,
    Path((db, table)): Path<(String, String)>,
    Posted { token, .. }: Posted,
) -> Response {
    let path = format!(
        "/databases/{}/tables/{}",
        url_segment(&db),
        url_segment(&table)
    );
    let (status, answer, _) = api(&console, Method::DELETE, &path, Some(&token), None).await;
    if status != StatusCode::NO_CONTENT {
        return problem(status, "Not dropped", &message(&answer));
    }
    Redirect::to(&format!("/databases/{}", url_segment(&db))).into_response()
}

// ---- API keys ----

async fn keys_page(
    console: &Console,
    token: &str,
    csrf: &str,
    user: &Value,
    made: Option<&Value>,
    error: Option<&str>,
) -> Response {
    let (_, keys, _) = api(console, Method::GET, "/api-keys", Some(token), None).await;
    let (_, dbs, _) = api(console, Method::GET, "/databases", Some(token), None).await;
    let status = if error.is_some() {
        StatusCode::BAD_REQUEST
    } else if made.is_some() {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    html_response(
        status,
        page(
            "API keys",
            Some((user, csrf)),
            html! {
                h1 { "API keys" }
                @if let Some(made) = made {
                    section.secret role="status" {
                        h2 { "Your new key" }
                        p.warning { "Copy it now: it is shown only this once, and Shoal keeps only a hash of it." }
                        code #new-key { (made["key"].as_str().unwrap_or("")) }
                        " " button type="button" #copy-key { "Copy" }
                        script { (maud::PreEscaped("document.getElementById('copy-key').addEventListener('click',function(){navigator.clipboard.writeText(document.getElementById('new-key').textContent);this.textContent='Copied';});")) }
                    }
                }
                table {
                    thead { tr { th { "Name" } th { "Key" } th { "Grants" } th { "Created" } th { "Last used" } th { "" } } }
                    tbody {
                        @for k in keys["keys"].as_array().into_iter().flatten() {
                            tr {
                                td { (k["name"].as_str().unwrap_or("")) }
                                td { code { (k["id"].as_str().unwrap_or("")) ".…" } }
                                td { @for g in k["grants"].as_array().into_iter().flatten() {
                                    (g["database"].as_str().unwrap_or("")) " (" (g["role"].as_str().unwrap_or("")) ") " } }
                                td { (format::when(k["created_at"].as_i64())) }
                                td { (format::when(k["last_used_at"].as_i64())) }
                                td {
                                    @if k["revoked_at"].is_null() {
                                        a href=(format!("/keys/{}/revoke", url_segment(k["id"].as_str().unwrap_or("")))) { "Revoke" }
                                    } @else { "revoked " (format::when(k["revoked_at"].as_i64())) }
                                }
                            }
                        }
                    }
                }
                form.card method="post" action="/keys" {
                    input type="hidden" name="csrf" value=(csrf);
                    h2 { "New key" }
                    label for="key_name" { "Name" }
                    input #key_name name="name" required maxlength="64" placeholder="checkout service";
                    label for="key_database" { "Database" }
                    select #key_database name="database" required {
                        @for db in dbs["databases"].as_array().into_iter().flatten() {
                            option value=(db["name"].as_str().unwrap_or("")) { (db["name"].as_str().unwrap_or("")) }
                        }
                    }
                    label for="key_role" { "Role" }
                    select #key_role name="role" { option value="read_write" { "read and write" } option value="read" { "read only" } }
                    @if let Some(error) = error { p.error role="alert" { (error) } }
                    button type="submit" { "Create key" }
                }
            },
        ),
    )
}

pub(crate) async fn keys(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    match who(&console, &headers).await {
        Ok((token, csrf, user)) => keys_page(&console, &token, &csrf, &user, None, None).await,
        Err(elsewhere) => elsewhere,
    }
}

pub(crate) async fn create_key(
    State(console): State<Arc<Console>>,
    Posted {
        token,
        csrf,
        user,
        form,
    }: Posted,
) -> Response {
    let body = json!({
        "name": field(&form, "name"),
        "grants": [{"database": field(&form, "database"), "role": field(&form, "role")}],
    });
    let (status, answer, _) = api(
        &console,
        Method::POST,
        "/api-keys",
        Some(&token),
        Some(body),
    )
    .await;
    if status == StatusCode::CREATED {
        return keys_page(&console, &token, &csrf, &user, Some(&answer), None).await;
    }
    keys_page(
        &console,
        &token,
        &csrf,
        &user,
        None,
        Some(&message(&answer)),
    )
    .await
}

pub(crate) async fn confirm_revoke(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let (_, csrf, user) = match who(&console, &headers).await {
        Ok(who) => who,
        Err(elsewhere) => return elsewhere,
    };
    html_response(
        StatusCode::OK,
        page(
            "Revoke key",
            Some((&user, &csrf)),
            html! {
                h1 { "Revoke key " code { (id) } "?" }
                p.warning { "Applications using it are refused from their next request. This cannot be undone." }
                form method="post" action=(format!("/keys/{}/revoke", url_segment(&id))) {
                    input type="hidden" name="csrf" value=(csrf);
                    button.danger type="submit" { "Revoke" }
                    " " a href="/keys" { "Cancel" }
                }
            },
        ),
    )
}

pub(crate) async fn revoke(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    Posted { token, .. }: Posted,
) -> Response {
    let (status, answer, _) = api(
        &console,
        Method::DELETE,
        &format!("/api-keys/{}", url_segment(&id)),
        Some(&token),
        None,
    )
    .await;
    if status != StatusCode::NO_CONTENT {
        return problem(status, "Not revoked", &message(&answer));
    }
    Redirect::to("/keys").into_response()
}

// ---- operators: a tenant ----

const QUOTA_FIELDS: [(&str, &str); 10] = [
    ("in_memory_bytes", "Memory (bytes)"),
    ("on_disk_bytes", "Disk (bytes)"),
    ("read_units_per_sec", "Read units per second"),
    ("write_units_per_sec", "Write units per second"),
    ("burst_seconds", "Burst (seconds)"),
    ("max_transaction_ops", "Operations per request"),
    ("max_parallel_transactions", "Requests in flight"),
    ("max_databases", "Databases"),
    ("max_tables", "Tables"),
    ("max_api_keys", "API keys"),
];

fn quota_form(action: &str, csrf: &str, quota: &Value, error: Option<&str>) -> Markup {
    html! {
        form.card.quota method="post" action=(action) {
            input type="hidden" name="csrf" value=(csrf);
            @for (name, label) in QUOTA_FIELDS {
                label for=(name) { (label) }
                input id=(name) name=(name) inputmode="numeric" pattern="[0-9]*" placeholder="unlimited"
                    value=(quota[name].as_u64().map(|n| n.to_string()).unwrap_or_default());
            }
            @if let Some(error) = error { p.error role="alert" { (error) } }
            button type="submit" { "Save quota" }
        }
    }
}

/// The quota a form describes; empty fields are unlimited.
fn quota_of(form: &HashMap<String, String>) -> Result<Value, String> {
    let mut quota = serde_json::Map::new();
    for (name, label) in QUOTA_FIELDS {
        let raw = field(form, name);
        let raw = raw.trim();
        let value = if raw.is_empty() {
            Value::Null
        } else {
            json!(raw.parse::<u64>().map_err(|_| format!(
                "{name}: {label} is a whole number, or empty for unlimited"
            ))?)
        };
        quota.insert(name.to_owned(), value);
    }
    Ok(Value::Object(quota))
}

async fn tenant_page(
    console: &Console,
    token: &str,
    csrf: &str,
    user: &Value,
    tenant: &str,
    error: Option<(&str, &str)>,
) -> Response {
    let (_, tenants, _) = api(console, Method::GET, "/admin/tenants", Some(token), None).await;
    let Some(t) = tenants["tenants"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["id"] == tenant)
        .cloned()
    else {
        return problem(StatusCode::NOT_FOUND, "Not found", "no such tenant");
    };
    let (_, dbs, _) = api(console, Method::GET, "/databases", Some(token), None).await;
    let (_, audit, _) = api(
        console,
        Method::GET,
        &format!("/admin/audit?tenant={}&limit=50", url_segment(tenant)),
        Some(token),
        None,
    )
    .await;
    let status = if error.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let error_for = |what: &str| error.filter(|(w, _)| *w == what).map(|(_, e)| e);
    html_response(
        status,
        page(
            &format!("Tenant {}", t["name"].as_str().unwrap_or("")),
            Some((user, csrf)),
            html! {
                h1 { "Tenant " (t["name"].as_str().unwrap_or("")) }
                p { "Status: " strong { (t["status"].as_str().unwrap_or("")) } " · memory "
                    (crate::pages::bar(t["usage"]["in_memory_bytes"].as_u64().unwrap_or(0), t["quota"]["in_memory_bytes"].as_u64())) }
                form method="post" action=(format!("/admin/tenants/{}/{}", url_segment(tenant), if t["status"] == "active" { "suspend" } else { "resume" })) {
                    input type="hidden" name="csrf" value=(csrf);
                    button.danger type="submit" { @if t["status"] == "active" { "Suspend" } @else { "Resume" } }
                }
                h2 { "Tenant quota" }
                (quota_form(&format!("/admin/tenants/{}/quota", url_segment(tenant)), csrf, &t["quota"], error_for("tenant")))
                @for db in dbs["databases"].as_array().into_iter().flatten().filter(|d| d["tenant_id"] == tenant) {
                    @let name = db["name"].as_str().unwrap_or("");
                    h2 { "Database " (name) }
                    (quota_form(&format!("/admin/tenants/{}/databases/{}/quota", url_segment(tenant), url_segment(name)), csrf, &Value::Null, error_for(name)))
                }
                h2 { "Audit trail" }
                (audit_table(&audit))
            },
        ),
    )
}

pub(crate) async fn tenant(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(tenant): Path<String>,
) -> Response {
    match operator(&console, &headers).await {
        Ok((token, csrf, user)) => tenant_page(&console, &token, &csrf, &user, &tenant, None).await,
        Err(elsewhere) => elsewhere,
    }
}

/// Saves a tenant's quota (`db` none) or one of its databases'.
async fn save_quota(console: &Console, posted: Posted, tenant: &str, db: Option<&str>) -> Response {
    let Posted {
        token,
        csrf,
        user,
        form,
    } = posted;
    let form = &form;
    let which = db.unwrap_or("tenant");
    let quota = match quota_of(form) {
        Ok(quota) => quota,
        Err(e) => {
            return tenant_page(console, &token, &csrf, &user, tenant, Some((which, &e))).await;
        }
    };
    let path = match db {
        Some(db) => format!(
            "/admin/tenants/{}/databases/{}/quota",
            url_segment(tenant),
            url_segment(db)
        ),
        None => format!("/admin/tenants/{}/quota", url_segment(tenant)),
    };
    let (status, answer, _) = api(console, Method::PUT, &path, Some(&token), Some(quota)).await;
    if status != StatusCode::OK {
        return tenant_page(
            console,
            &token,
            &csrf,
            &user,
            tenant,
            Some((which, &message(&answer))),
        )
        .await;
    }
    Redirect::to(&format!("/admin/tenants/{}", url_segment(tenant))).into_response()
}

pub(crate) async fn set_tenant_quota(
    State(console): State<Arc<Console>>,
    Path(tenant): Path<String>,
    posted: Posted,
) -> Response {
    save_quota(&console, posted, &tenant, None).await
}

pub(crate) async fn set_database_quota(
    State(console): State<Arc<Console>>,
    Path((tenant, db)): Path<(String, String)>,
    posted: Posted,
) -> Response {
    save_quota(&console, posted, &tenant, Some(&db)).await
}

pub(crate) async fn set_status(
    State(console): State<Arc<Console>>,
    Path((tenant, action)): Path<(String, String)>,
    Posted { token, .. }: Posted,
) -> Response {
    if action != "suspend" && action != "resume" {
        return problem(StatusCode::NOT_FOUND, "Not found", "no such page");
    }
    let (status, answer, _) = api(
        &console,
        Method::POST,
        &format!("/admin/tenants/{}/{action}", url_segment(&tenant)),
        Some(&token),
        None,
    )
    .await;
    if status != StatusCode::NO_CONTENT {
        return problem(status, "Not changed", &message(&answer));
    }
    Redirect::to(&format!("/admin/tenants/{}", url_segment(&tenant))).into_response()
}

// ---- ndbinfo SQL ----

const EXAMPLES: [(&str, &str); 3] = [
    (
        "Memory per table",
        "SELECT * FROM ndbinfo.table_memory_usage ORDER BY in_memory_bytes DESC",
    ),
    (
        "Memory per database",
        "SELECT database_name, in_memory_bytes, free_in_memory_bytes FROM ndbinfo.database_memory_usage",
    ),
    (
        "Use against the quota",
        "SELECT database_name, in_memory_bytes, in_memory_quota, read_units, write_units, throttled_reads + throttled_writes AS throttled FROM ndbinfo.database_quota_usage",
    ),
];

fn sql_page(
    user: &Value,
    csrf: &str,
    sql: &str,
    answer: Option<&Value>,
    error: Option<&str>,
) -> Markup {
    page(
        "ndbinfo SQL",
        Some((user, csrf)),
        html! {
            h1 { "ndbinfo SQL" }
            p { "One SELECT over the ndbinfo tables and views of your databases." }
            form.card method="post" action="/sql" {
                input type="hidden" name="csrf" value=(csrf);
                label for="sql" { "Query" }
                textarea #sql name="sql" rows="5" spellcheck="false" { (sql) }
                @if let Some(error) = error { p.error role="alert" { (error) } }
                button type="submit" { "Run" }
            }
            h2 { "Examples" }
            ul {
                @for (title, example) in EXAMPLES {
                    li { (title) ": " code { (example) } }
                }
            }
            @if let Some(answer) = answer {
                h2 { "Result" }
                table #result {
                    thead { tr { @for c in answer["columns"].as_array().into_iter().flatten() { th { (c.as_str().unwrap_or("")) } } } }
                    tbody {
                        @for row in answer["rows"].as_array().into_iter().flatten() {
                            tr { @for cell in row.as_array().into_iter().flatten() {
                                td { @match cell { Value::Null => "NULL", Value::String(s) => (s), other => (other.to_string()) } }
                            } }
                        }
                    }
                }
                p { (answer["rows"].as_array().map_or(0, Vec::len)) " rows" }
            }
        },
    )
}

pub(crate) async fn sql_form(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    match who(&console, &headers).await {
        Ok((_, csrf, user)) => html_response(
            StatusCode::OK,
            sql_page(&user, &csrf, EXAMPLES[0].1, None, None),
        ),
        Err(elsewhere) => elsewhere,
    }
}

pub(crate) async fn run_sql(
    State(console): State<Arc<Console>>,
    Posted {
        token,
        csrf,
        user,
        form,
    }: Posted,
) -> Response {
    let sql = field(&form, "sql");
    let (status, answer, _) = api(
        &console,
        Method::POST,
        "/ndbinfo/query",
        Some(&token),
        Some(json!({"sql": sql})),
    )
    .await;
    if status == StatusCode::OK {
        return html_response(
            StatusCode::OK,
            sql_page(&user, &csrf, &sql, Some(&answer), None),
        );
    }
    html_response(
        status,
        sql_page(&user, &csrf, &sql, None, Some(&message(&answer))),
    )
}

// ---- operators: data nodes ----

/// The signed-in platform admin; anyone else is refused with a page.
async fn operator(
    console: &Console,
    headers: &HeaderMap,
) -> Result<(String, String, Value), Response> {
    let (token, csrf, user) = who(console, headers).await?;
    if user["role"] != "admin" {
        return Err(problem(
            StatusCode::FORBIDDEN,
            "Operators only",
            "This page is for platform admins.",
        ));
    }
    Ok((token, csrf, user))
}

pub(crate) async fn datanodes(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let (token, csrf, user) = match operator(&console, &headers).await {
        Ok(who) => who,
        Err(elsewhere) => return elsewhere,
    };
    let (_, nodes, _) = api(
        &console,
        Method::GET,
        "/admin/datanodes",
        Some(&token),
        None,
    )
    .await;
    html_response(
        StatusCode::OK,
        page(
            "Data nodes",
            Some((&user, &csrf)),
            html! {
                h1 { "Data nodes" }
                table {
                    thead { tr { th { "Node" } th { "Status" } th { "DataMemory" } th { "Last seen" } th { "REST" } } }
                    tbody {
                        @for n in nodes["datanodes"].as_array().into_iter().flatten() {
                            tr {
                                td { (n["node_id"]) }
                                td { span class=(format!("status {}", n["status"].as_str().unwrap_or(""))) { (n["status"].as_str().unwrap_or("")) } }
                                td { (crate::pages::bar(n["used_bytes"].as_u64().unwrap_or(0), n["data_memory_bytes"].as_u64())) }
                                td { (format::when(n["last_seen"].as_i64())) }
                                td { code { (n["rest_url"].as_str().unwrap_or("")) } }
                            }
                        }
                    }
                }
            },
        ),
    )
}

/// `/admin/audit`: the latest changes on the platform.
pub(crate) async fn audit(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let (token, csrf, user) = match operator(&console, &headers).await {
        Ok(who) => who,
        Err(elsewhere) => return elsewhere,
    };
    let (_, audit, _) = api(
        &console,
        Method::GET,
        "/admin/audit?limit=200",
        Some(&token),
        None,
    )
    .await;
    html_response(
        StatusCode::OK,
        page(
            "Audit log",
            Some((&user, &csrf)),
            html! {
                h1 { "Audit log" }
                (audit_table(&audit))
            },
        ),
    )
}

/// Audit entries: when, who, what, before and after.
fn audit_table(audit: &Value) -> Markup {
    html! {
        table.audit {
            thead { tr { th { "When" } th { "Who" } th { "What" } th { "Before" } th { "After" } } }
            tbody {
                @for e in audit["entries"].as_array().into_iter().flatten() {
                    tr {
                        td { (format::when(e["at"].as_i64())) }
                        td { (e["actor"]["email"].as_str().unwrap_or("")) }
                        td { (e["action"].as_str().unwrap_or("")) " " (e["target"].as_str().unwrap_or("")) }
                        td { code { (e["before"].to_string()) } }
                        td { code { (e["after"].to_string()) } }
                    }
                }
            }
        }
    }
}
