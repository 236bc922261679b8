//! The pages, and the forms they post.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Form;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{DOCTYPE, Markup, html};
use reqwest::Method;
use serde_json::{Value, json};

use crate::Console;
use crate::format;

const SESSION_COOKIE: &str = "shoal_session";
const CSRF_COOKIE: &str = "shoal_csrf";

/// The visitor's session token and CSRF token, from their cookies.
pub(crate) fn session(headers: &HeaderMap) -> Option<(String, String)> {
    let cookie = |name: &str| {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(n, v)| *n == name && !v.is_empty())
            .map(|(_, v)| v.to_owned())
    };
    Some((
        cookie(SESSION_COOKIE)?,
        cookie(CSRF_COOKIE).unwrap_or_default(),
    ))
}

/// Calls the API as `token` (or anonymously); answers the status, the
/// body, and the response's `Set-Cookie` values.
pub(crate) async fn api(
    console: &Console,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value, Vec<HeaderValue>) {
    let mut request = console
        .http
        .request(method, format!("{}{path}", console.api));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    match request.send().await {
        Ok(response) => {
            let status =
                StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let cookies = response
                .headers()
                .get_all(reqwest::header::SET_COOKIE)
                .iter()
                .filter_map(|v| HeaderValue::from_bytes(v.as_bytes()).ok())
                .collect();
            let body = response.json().await.unwrap_or(Value::Null);
            (status, body, cookies)
        }
        Err(e) => {
            tracing::error!(error = %e, "the console could not reach the API");
            (
                StatusCode::BAD_GATEWAY,
                json!({"error": {"message": "the control plane's API did not answer"}}),
                vec![],
            )
        }
    }
}

pub(crate) fn message(body: &Value) -> String {
    body["error"]["message"]
        .as_str()
        .unwrap_or("something went wrong")
        .to_owned()
}

/// A page: the frame around `content`.
pub(crate) fn page(title: &str, who: Option<(&Value, &str)>, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Shoal" }
                link rel="stylesheet" href="/assets/console.css";
            }
            body {
                header {
                    a.brand href="/" { "Shoal" }
                    @if let Some((user, csrf)) = who {
                        nav {
                            @if user["role"] == "admin" { a href="/" { "Tenants" } a href="/admin/datanodes" { "Data nodes" } a href="/admin/audit" { "Audit log" } }
                            @else { a href="/" { "Databases" } a href="/keys" { "API keys" } }
                            a href="/sql" { "SQL" }
                            span.who { (user["email"].as_str().unwrap_or("")) " · " (user["tenant"]["name"].as_str().unwrap_or("operator")) }
                            form method="post" action="/logout" {
                                input type="hidden" name="csrf" value=(csrf);
                                button type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main { (content) }
            }
        }
    }
}

pub(crate) fn html_response(status: StatusCode, markup: Markup) -> Response {
    (status, markup).into_response()
}

/// A page saying what went wrong.
pub(crate) fn problem(status: StatusCode, title: &str, detail: &str) -> Response {
    html_response(
        status,
        page(
            title,
            None,
            html! { h1 { (title) } p.error { (detail) } p { a href="/" { "Back to the console" } } },
        ),
    )
}

/// A posted form's fields; one that cannot be read is answered with a page
/// saying so.
pub(crate) struct Fields(pub(crate) HashMap<String, String>);

impl<S: Send + Sync> FromRequest<S> for Fields {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Fields, Response> {
        match Form::<HashMap<String, String>>::from_request(request, state).await {
            Ok(Form(fields)) => Ok(Fields(fields)),
            Err(rejection) => Err(problem(
                StatusCode::BAD_REQUEST,
                "That form could not be read",
                &rejection.body_text(),
            )),
        }
    }
}

/// A form posted by a signed-in user, its CSRF token checked; anyone else
/// is sent to log in, and a form without the token refused.
pub(crate) struct Posted {
    pub(crate) token: String,
    pub(crate) csrf: String,
    pub(crate) user: Value,
    pub(crate) form: HashMap<String, String>,
}

impl FromRequest<Arc<Console>> for Posted {
    type Rejection = Response;

    async fn from_request(request: Request, console: &Arc<Console>) -> Result<Posted, Response> {
        let headers = request.headers().clone();
        let (token, csrf, user) = who(console, &headers).await?;
        let Fields(form) = Fields::from_request(request, console).await?;
        if !csrf_ok(&form, &csrf) {
            return Err(problem(
                StatusCode::FORBIDDEN,
                "Refused",
                "The form's security token did not match your session: reload the page and try again.",
            ));
        }
        Ok(Posted {
            token,
            csrf,
            user,
            form,
        })
    }
}

/// The form's CSRF token must be the session's.
pub(crate) fn csrf_ok(form: &HashMap<String, String>, csrf: &str) -> bool {
    let sent = form.get("csrf").map(String::as_str).unwrap_or("");
    !csrf.is_empty()
        && sent.len() == csrf.len()
        && sent
            .bytes()
            .zip(csrf.bytes())
            .fold(0, |acc, (a, b)| acc | (a ^ b))
            == 0
}

pub(crate) fn field(form: &HashMap<String, String>, name: &str) -> String {
    form.get(name).cloned().unwrap_or_default()
}

/// Which field an API error is about: the start of its message (`email: …`).
pub(crate) fn error_field(message: &str) -> &str {
    message.split(':').next().unwrap_or("").trim()
}

// ---- login, sign-up, logout ----

fn login_page(email: &str, error: Option<&str>) -> Markup {
    page(
        "Log in",
        None,
        html! {
            h1 { "Log in" }
            form.card method="post" action="/login" {
                label for="email" { "Email" }
                input #email type="email" name="email" value=(email) required autofocus;
                label for="password" { "Password" }
                input #password type="password" name="password" required;
                @if let Some(error) = error { p.error role="alert" { (error) } }
                button type="submit" { "Log in" }
            }
            p { "No account? " a href="/signup" { "Sign up" } }
        },
    )
}

pub(crate) async fn login_form() -> Markup {
    login_page("", None)
}

/// Sets the session cookies the API answered with, and goes to `to`.
fn signed_in(cookies: Vec<HeaderValue>, to: &str) -> Response {
    let mut response = Redirect::to(to).into_response();
    for cookie in cookies {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

pub(crate) async fn login(State(console): State<Arc<Console>>, Fields(form): Fields) -> Response {
    let body = json!({"email": field(&form, "email"), "password": field(&form, "password")});
    let (status, answer, cookies) =
        api(&console, Method::POST, "/auth/login", None, Some(body)).await;
    if status == StatusCode::OK {
        return signed_in(cookies, "/");
    }
    let shown = if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::FORBIDDEN {
        message(&answer)
    } else {
        "Wrong email or password.".to_owned()
    };
    html_response(status, login_page(&field(&form, "email"), Some(&shown)))
}

fn signup_page(values: &HashMap<String, String>, error: Option<&str>) -> Markup {
    let at = error.map(error_field).unwrap_or("");
    let note = |name: &str| -> Markup {
        html! { @if at == name { p.error role="alert" { (error.unwrap_or("")) } } }
    };
    page(
        "Sign up",
        None,
        html! {
            h1 { "Sign up" }
            form.card method="post" action="/signup" {
                label for="tenant_name" { "Organisation" }
                input #tenant_name name="tenant_name" value=(field(values, "tenant_name")) required
                    pattern="[a-z][a-z0-9_-]{0,39}" title="lower-case letters, digits, - and _; starting with a letter";
                (note("tenant_name"))
                label for="email" { "Email" }
                input #email type="email" name="email" value=(field(values, "email")) required;
                (note("email"))
                label for="password" { "Password" }
                input #password type="password" name="password" minlength="8" required;
                (note("password"))
                @if !matches!(at, "tenant_name" | "email" | "password") {
                    @if let Some(error) = error { p.error role="alert" { (error) } }
                }
                button type="submit" { "Create account" }
            }
            p { "Have an account? " a href="/login" { "Log in" } }
        },
    )
}

pub(crate) async fn signup_form() -> Markup {
    signup_page(&HashMap::new(), None)
}

pub(crate) async fn signup(State(console): State<Arc<Console>>, Fields(form): Fields) -> Response {
    let body = json!({
        "email": field(&form, "email"),
        "password": field(&form, "password"),
        "tenant_name": field(&form, "tenant_name"),
    });
    let (status, answer, cookies) =
        api(&console, Method::POST, "/auth/signup", None, Some(body)).await;
    if status == StatusCode::CREATED {
        return signed_in(cookies, "/");
    }
    let error = match answer["error"]["code"].as_str() {
        Some("EMAIL_TAKEN") => format!("email: {}", message(&answer)),
        Some("TENANT_NAME_TAKEN") => format!("tenant_name: {}", message(&answer)),
        _ => message(&answer),
    };
    html_response(status, signup_page(&form, Some(&error)))
}

pub(crate) async fn logout(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Fields(form): Fields,
) -> Response {
    let Some((token, csrf)) = session(&headers) else {
        return Redirect::to("/login").into_response();
    };
    if !csrf_ok(&form, &csrf) {
        return problem(
            StatusCode::FORBIDDEN,
            "Refused",
            "The form's security token did not match your session: reload the page and try again.",
        );
    }
    let (_, _, cookies) = api(&console, Method::POST, "/auth/logout", Some(&token), None).await;
    signed_in(cookies, "/login")
}

// ---- the dashboard ----

/// The signed-in user, or where to send the visitor instead.
pub(crate) async fn who(
    console: &Console,
    headers: &HeaderMap,
) -> Result<(String, String, Value), Response> {
    let Some((token, csrf)) = session(headers) else {
        return Err(Redirect::to("/login").into_response());
    };
    let (status, me, _) = api(console, Method::GET, "/me", Some(&token), None).await;
    match status {
        StatusCode::OK => Ok((token, csrf, me["user"].clone())),
        StatusCode::FORBIDDEN => Err(problem(status, "Suspended", &message(&me))),
        _ => Err(Redirect::to("/login").into_response()),
    }
}

pub(crate) fn bar(used: u64, limit: Option<u64>) -> Markup {
    match limit {
        Some(limit) => {
            let pct = format::percent(used, limit);
            let level = if pct >= 100 {
                "full"
            } else if pct >= 80 {
                "high"
            } else {
                "ok"
            };
            html! {
                div.bar title=(format!("{used} of {limit} bytes")) {
                    div class=(format!("fill {level}")) style=(format!("width: {pct}%")) {}
                }
                span.figure { (format::bytes(used)) " of " (format::bytes(limit)) " (" (pct) "%)" }
            }
        }
        None => html! { span.figure { (format::bytes(used)) " (no quota)" } },
    }
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

async fn dashboard_page(
    console: &Console,
    token: &str,
    csrf: &str,
    user: &Value,
    sort: Option<&str>,
    form_error: Option<(&str, &str)>,
) -> Response {
    if user["role"] == "admin" {
        let (_, tenants, _) = api(console, Method::GET, "/admin/tenants", Some(token), None).await;
        let mut rows: Vec<Value> = tenants["tenants"].as_array().cloned().unwrap_or_default();
        // Sorted by the column asked for: the largest first, names A to Z.
        let number = |t: &Value, path: [&str; 2]| t[path[0]][path[1]].as_u64().unwrap_or(0);
        match sort.unwrap_or("name") {
            "memory" => {
                rows.sort_by_key(|t| std::cmp::Reverse(number(t, ["usage", "in_memory_bytes"])))
            }
            "databases" => {
                rows.sort_by_key(|t| std::cmp::Reverse(number(t, ["usage", "databases"])))
            }
            "keys" => rows.sort_by_key(|t| std::cmp::Reverse(number(t, ["usage", "api_keys"]))),
            "status" => rows.sort_by(|a, b| a["status"].as_str().cmp(&b["status"].as_str())),
            _ => rows.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str())),
        }
        return html_response(
            StatusCode::OK,
            page(
                "Tenants",
                Some((user, csrf)),
                html! {
                    h1 { "Tenants" }
                    table {
                        thead { tr {
                            @for (key, label) in [("name", "Tenant"), ("status", "Status"), ("memory", "Memory"), ("databases", "Databases"), ("keys", "Keys")] {
                                th aria-sort=[(sort.unwrap_or("name") == key).then_some("descending")] {
                                    a href=(format!("/?sort={key}")) { (label) }
                                }
                            }
                        } }
                        tbody {
                            @for t in &rows {
                                tr {
                                    td { a href=(format!("/admin/tenants/{}", url_segment(t["id"].as_str().unwrap_or("")))) { (t["name"].as_str().unwrap_or("")) } }
                                    td { (t["status"].as_str().unwrap_or("")) }
                                    td { (bar(t["usage"]["in_memory_bytes"].as_u64().unwrap_or(0), t["quota"]["in_memory_bytes"].as_u64())) }
                                    td { (t["usage"]["databases"]) }
                                    td { (t["usage"]["api_keys"]) }
                                }
                            }
                        }
                    }
                },
            ),
        );
    }
    let (_, quotas, _) = api(console, Method::GET, "/quotas", Some(token), None).await;
    let (_, listed, _) = api(console, Method::GET, "/databases", Some(token), None).await;
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
    for db in listed["databases"].as_array().into_iter().flatten() {
        let name = db["name"].as_str().unwrap_or("");
        let path = format!("/usage?database={}&resolution=minute", url_segment(name));
        let (_, usage, _) = api(console, Method::GET, &path, Some(token), None).await;
        recent.insert(name.to_owned(), Recent::of(&usage));
    }
    let status = if form_error.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    html_response(
        status,
        page(
            "Databases",
            Some((user, csrf)),
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
                        @for db in listed["databases"].as_array().into_iter().flatten() {
                            @let name = db["name"].as_str().unwrap_or("");
                            @let q = quota_of(name);
                            tr {
                                td { a href=(format!("/databases/{name}")) { (name) } }
                                td { (db["tables"].as_array().map_or(0, Vec::len)) }
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
                (new_database_form(csrf, form_error.map_or("", |e| e.0), form_error.map(|e| e.1)))
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
    fn of(usage: &Value) -> Recent {
        let points: Vec<&Value> = usage["points"].as_array().into_iter().flatten().collect();
        let n = |p: &Value, f: &str| p[f].as_u64().unwrap_or(0);
        // The newest minute is still filling: the one before is the last full one.
        let last_full = points.len().checked_sub(2).map(|i| points[i]);
        Recent {
            reads_per_sec: last_full.map_or(0, |p| n(p, "read_units") / 60),
            writes_per_sec: last_full.map_or(0, |p| n(p, "write_units") / 60),
            throttled: points
                .iter()
                .map(|p| n(p, "throttled_reads") + n(p, "throttled_writes"))
                .sum(),
            rejected: points.iter().map(|p| n(p, "quota_rejections")).sum(),
        }
    }
}

/// " of N/s", or nothing without a limit.
fn limit(quota: &Value) -> String {
    quota
        .as_u64()
        .map_or_else(String::new, |n| format!(" of {n}/s"))
}

fn warning_text(code: &str) -> &str {
    match code {
        "memory_80" => "memory at 80% of the quota",
        "memory_100" => "memory quota reached: writes that need memory are refused",
        "throttled" => "throttled in the last interval",
        other => other,
    }
}

pub(crate) async fn dashboard(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let sort = query.get("sort").map(String::as_str);
    match who(&console, &headers).await {
        Ok((token, csrf, user)) => dashboard_page(&console, &token, &csrf, &user, sort, None).await,
        Err(elsewhere) => elsewhere,
    }
}

pub(crate) async fn create_database(
    State(console): State<Arc<Console>>,
    Posted {
        token,
        csrf,
        user,
        form,
    }: Posted,
) -> Response {
    let name = field(&form, "name");
    let (status, answer, _) = api(
        &console,
        Method::POST,
        "/databases",
        Some(&token),
        Some(json!({"name": name})),
    )
    .await;
    if status == StatusCode::CREATED {
        return Redirect::to(&format!("/databases/{name}")).into_response();
    }
    let error = message(&answer);
    dashboard_page(&console, &token, &csrf, &user, None, Some((&name, &error))).await
}

// ---- a database ----

pub(crate) async fn database(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    database_page(&console, &headers, &name, None, StatusCode::OK).await
}

/// A database's page; `table_error` refills the table form after a mistake.
pub(crate) async fn database_page(
    console: &Console,
    headers: &HeaderMap,
    name: &str,
    table_error: Option<(&HashMap<String, String>, &str)>,
    status: StatusCode,
) -> Response {
    let (token, csrf, user) = match who(console, headers).await {
        Ok(who) => who,
        Err(elsewhere) => return elsewhere,
    };
    let path = format!("/databases/{}", url_segment(name));
    let (found, db, _) = api(console, Method::GET, &path, Some(&token), None).await;
    if found != StatusCode::OK {
        return problem(found, "Not found", &message(&db));
    }
    let (_, memory, _) = api(
        console,
        Method::GET,
        &format!("{path}/memory"),
        Some(&token),
        None,
    )
    .await;
    let (_, usage, _) = api(
        console,
        Method::GET,
        &format!("/usage?database={}&resolution=raw", url_segment(name)),
        Some(&token),
        None,
    )
    .await;
    let memory_over_time: Vec<(i64, u64)> = usage["points"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p["at"].as_i64()?, p["memory_bytes"].as_u64()?)))
        .collect();
    let memory_of = |table: &str| {
        memory["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|row| row[1] == table)
            .map(|row| (row[2].as_u64().unwrap_or(0), row[3].as_u64().unwrap_or(0)))
            .unwrap_or((0, 0))
    };
    let rest = db["rest_url"].as_str().unwrap_or("");
    let resp = db["resp_addr"].as_str().unwrap_or("");
    let (host, port) = resp.rsplit_once(':').unwrap_or((resp, ""));
    let empty = HashMap::new();
    let (values, error) = table_error.map_or((&empty, None), |(v, e)| (v, Some(e)));
    html_response(
        status,
        page(
            name,
            Some((&user, &csrf)),
            html! {
                    h1 { "Database " (name) }
                    h2 { "Tables" }
                    table #tables {
                        thead { tr { th { "Table" } th { "Memory" } th { "Free inside it" } th { "" } } }
                        tbody {
                            @for table in db["tables"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                                @let (used, free) = memory_of(table);
                                tr {
                                    td { (table) }
                                    td.memory { (format::bytes(used)) }
                                    td { (format::bytes(free)) }
                                    td { a href=(format!("{path}/tables/{}/drop", url_segment(table))) { "Drop" } }
                                }
                            }
                        }
                    }
                    h2 { "Memory, the last hour" }
            (format::chart(&memory_over_time, 480, 120, format::bytes))
            (crate::manage::table_form(name, &csrf, values, error))
                    h2 { "Connect" }
                    dl {
                        dt { "REST" } dd { code { (rest) } }
                        dt { "Redis protocol" } dd { code { (resp) } }
                    }
                    pre { code { "curl -s -H 'X-API-KEY: <key>' -d '{\"filters\":[{\"column\":\"id\",\"value\":1}]}' " (rest) "/0.1.0/" (name) "/<table>/pk-read" } }
                    pre { code { "redis-cli -h " (host) " -p " (port) " --user " (name) " --pass '<key>' --no-auth-warning PING" } }
                    p { "Make a key for it on the " a href="/keys" { "API keys" } " page." }
                },
        ),
    )
}

/// A path segment, percent-encoded where it must be.
pub(crate) fn url_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub(crate) async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("console.css"),
    )
}
