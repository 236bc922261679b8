//! A database's connect page: every node that serves it, and ready lines
//! for curl, redis-cli, redis-py, node-redis, the `mysql` client (where the
//! node serves SQL) and a RonDB REST client — with
//! a key to paste in, or one made on the page for the database (its secret
//! shown once, filled into every line).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use reqwest::Method;
use serde_json::{Value, json};
use shoal_wire::api::{Database, NewApiKey};

use crate::Console;
use crate::http::{Posted, Visitor, url_segment};
use crate::layout::html_response;

/// What the lines need: where the database is served and one of its
/// tables' key, to read a row by.
struct Target {
    db: String,
    rest: String,
    host: String,
    port: String,
    /// Where SQL is served, if the node has said.
    mysql: Option<(String, String)>,
    table: String,
    /// `{"column": …, "value": …}` for each column of the table's key.
    filters: Value,
}

impl Target {
    fn of(db: &Database, tables: &Value) -> Target {
        let rest = db.rest_url.clone().unwrap_or_default();
        let resp = db.resp_addr.clone().unwrap_or_default();
        let (host, port) = resp.rsplit_once(':').unwrap_or((&resp, ""));
        let first = tables["tables"].as_array().and_then(|t| t.first());
        let (table, filters) = match first {
            Some(t) => (
                t["name"].as_str().unwrap_or("<table>").to_owned(),
                filters_of(t),
            ),
            None => (
                "<table>".to_owned(),
                json!([{"column": "<key column>", "value": 1}]),
            ),
        };
        let mysql = (db.mysql_addr.as_deref())
            .and_then(|a| a.rsplit_once(':'))
            .map(|(h, p)| (h.to_owned(), p.to_owned()));
        Target {
            db: db.name.to_string(),
            rest,
            host: host.to_owned(),
            port: port.to_owned(),
            mysql,
            table,
            filters,
        }
    }

    /// The lines, each with its title and id, with `key` in them.
    fn lines(&self, key: &str) -> Vec<(&'static str, &'static str, String)> {
        let Target {
            db,
            rest,
            host,
            port,
            mysql,
            table,
            filters,
        } = self;
        let read = json!({"filters": filters}).to_string();
        let batch = json!({"operations": [
            {"method": "POST", "relative-url": format!("{db}/{table}/pk-read"), "body": {"filters": filters}}
        ]});
        let mut lines = vec![
            (
                "curl (REST: read a row by its key)",
                "curl",
                format!(
                    "curl -s -H 'X-API-KEY: {key}' -d '{read}' {rest}/0.1.0/{db}/{table}/pk-read"
                ),
            ),
            (
                "redis-cli",
                "redis-cli",
                format!(
                    "redis-cli -h {host} -p {port} --user {db} --pass '{key}' --no-auth-warning PING"
                ),
            ),
            (
                "Python, redis-py",
                "redis-py",
                format!(
                    "import redis\n\nr = redis.Redis(host=\"{host}\", port={port}, username=\"{db}\", password=\"{key}\")\nr.set(\"greeting\", \"hello\")\nprint(r.get(\"greeting\"))"
                ),
            ),
            (
                "Node.js, node-redis",
                "node-redis",
                format!(
                    "import {{ createClient }} from \"redis\";\n\nconst client = await createClient({{ url: \"redis://{db}:{key}@{host}:{port}\" }}).connect();\nawait client.set(\"greeting\", \"hello\");\nconsole.log(await client.get(\"greeting\"));\nawait client.quit();"
                ),
            ),
            (
                "A RonDB REST client (Python requests; RonDB's batch shape)",
                "rondb-rest",
                format!(
                    "import requests\n\nreply = requests.post(\"{rest}/0.1.0/batch\", headers={{\"X-API-KEY\": \"{key}\"}},\n    json={batch})\nprint(reply.json()[\"result\"])"
                ),
            ),
        ];
        if let Some((mysql_host, mysql_port)) = mysql {
            // The user is the key's prefix, the password its secret.
            let (user, secret) = key
                .split_once('.')
                .unwrap_or(("<key prefix>", "<key secret>"));
            let by_key = (filters.as_array().into_iter().flatten())
                .map(|f| {
                    let value = match &f["value"] {
                        Value::String(v) => format!("\"{v}\""),
                        other => other.to_string(),
                    };
                    format!("{} = {value}", f["column"].as_str().unwrap_or(""))
                })
                .collect::<Vec<_>>()
                .join(" AND ");
            lines.insert(
                2,
                (
                    "mysql (SQL: user = the key's prefix, password = its secret)",
                    "mysql",
                    format!(
                        "mysql -h {mysql_host} -P {mysql_port} -u {user} -p'{secret}' {db} -e 'SELECT * FROM {table} WHERE {by_key}'"
                    ),
                ),
            );
        }
        lines
    }
}

/// Filters reading the row whose key columns hold a sample value (`1`
/// for numbers, `"a"` for the rest).
fn filters_of(table: &Value) -> Value {
    let key = table["primary_key"].as_array().cloned().unwrap_or_default();
    let type_of = |name: &Value| {
        (table["columns"].as_array().into_iter().flatten())
            .find(|c| &c["name"] == name)
            .and_then(|c| c["type"].as_str())
            .unwrap_or("")
            .to_ascii_uppercase()
    };
    let numeric = ["INT", "DECIMAL", "NUMERIC", "DOUBLE", "FLOAT", "REAL"];
    let filters: Vec<Value> = (key.iter())
        .map(|name| {
            let ty = type_of(name);
            let value = if numeric.iter().any(|n| ty.contains(n)) {
                json!(1)
            } else {
                json!("a")
            };
            json!({"column": name, "value": value})
        })
        .collect();
    Value::Array(filters)
}

/// `GET /databases/{db}/connect`.
pub(crate) async fn connect(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Path(name): Path<String>,
) -> Response {
    connect_page(&console, &visitor, &name, Made::Nothing).await
}

/// What the page's form made.
enum Made {
    Nothing,
    Key(NewApiKey),
    Refused(StatusCode, String),
}

/// `POST /databases/{db}/connect {role}`: a key for the database, shown
/// once in every line.
pub(crate) async fn create_key(
    State(console): State<Arc<Console>>,
    Path(name): Path<String>,
    posted: Posted,
) -> Response {
    let body = json!({
        "name": format!("{name} (connect page)"),
        "grants": [{"database": name, "role": posted.field("role")}],
    });
    let visitor = &posted.visitor;
    let answer = visitor
        .api(&console, Method::POST, "/api-keys", Some(body))
        .await;
    let made = match answer.status {
        StatusCode::CREATED => match serde_json::from_value::<NewApiKey>(answer.body) {
            Ok(key) => Made::Key(key),
            Err(e) => {
                tracing::error!(error = %e, "a new key's answer did not read");
                Made::Refused(
                    StatusCode::BAD_GATEWAY,
                    "the key was made but its answer did not read: revoke it and make another"
                        .into(),
                )
            }
        },
        status => Made::Refused(status, answer.message()),
    };
    connect_page(&console, visitor, &name, made).await
}

async fn connect_page(console: &Console, visitor: &Visitor, name: &str, made: Made) -> Response {
    let path = format!("/databases/{}", url_segment(name));
    let db = match visitor.read::<Database>(console, &path).await {
        Ok(db) => db,
        Err(page) => return page,
    };
    let tables = visitor.get(console, &format!("{path}/tables")).await;
    let target = Target::of(&db, &tables);
    let (key, status) = match &made {
        Made::Key(made) => (made.key.as_str(), StatusCode::CREATED),
        Made::Refused(status, _) => ("<your key>", *status),
        Made::Nothing => ("<your key>", StatusCode::OK),
    };
    html_response(
        status,
        visitor.page(
            &format!("Connect to {name}"),
            html! {
                h1 { "Connect to " a href=(path) { (name) } }
                (nodes(&db))
                h2 { "A key" }
                @match &made {
                    Made::Key(made) => {
                        div.secret role="status" {
                            p { strong { "Your new key for " (name) " (" (made.listed.grants.first().map_or("", |g| g.role.as_str())) "): shown once." }
                                " It is in every line below. Copy what you need now: it will not be shown again." }
                            code #new-key { (made.key) }
                        }
                    }
                    _ if !visitor.changes() => {
                        p { "The lines below say " code { "<your key>" } ": paste a key granted this database (a reader cannot make one: ask a member)." }
                    }
                    _ => {
                        p { "The lines below say " code { "<your key>" } ": paste a key granted this database, or make one here." }
                        form.inline #connect-key method="post" action=(format!("{path}/connect")) {
                            input type="hidden" name="csrf" value=(visitor.csrf);
                            label for="role" { "Role" }
                            select #role name="role" {
                                option value="read_write" { "read and write" }
                                option value="read" { "read only" }
                            }
                            button type="submit" { "Make a key for these lines" }
                        }
                        @if let Made::Refused(_, why) = &made { p.error role="alert" { (why) } }
                    }
                }
                @for (title, id, line) in target.lines(key) {
                    h2 { (title) }
                    pre.snippet { code id=(format!("snippet-{id}")) { (line) } }
                }
                script { (maud::PreEscaped(COPY_JS)) }
                p { "Every key is listed, and revoked, on the " a href="/keys" { "API keys" } " page." }
            },
        ),
    )
}

/// A "Copy" button on each line, where scripts run.
const COPY_JS: &str = r#"
document.querySelectorAll('pre.snippet').forEach(function (pre) {
  var button = document.createElement('button');
  button.type = 'button';
  button.textContent = 'Copy';
  button.addEventListener('click', function () {
    navigator.clipboard.writeText(pre.querySelector('code').textContent);
    button.textContent = 'Copied';
  });
  pre.before(button);
});
"#;

/// Every node serving the database, its primary marked.
pub(crate) fn nodes(db: &Database) -> Markup {
    html! {
        @if db.nodes.len() > 1 {
            p { "Every node of its node group serves it: reads are answered by the node reached, writes are made on its primary (node " (db.node_id) ") whichever node they reach." }
        }
        table #nodes {
            thead { tr { th { "Node" } th { "REST" } th { "Redis protocol" } } }
            tbody {
                // Until the control plane knows the group, the primary alone.
                @if db.nodes.is_empty() {
                    tr {
                        td { (db.node_id) " (primary)" }
                        td { code { (db.rest_url.as_deref().unwrap_or("")) } }
                        td { code { (db.resp_addr.as_deref().unwrap_or("")) } }
                    }
                }
                @for node in &db.nodes {
                    tr {
                        td { (node.node_id) @if node.node_id == db.node_id { " (primary)" } }
                        td { code { (node.rest_url) } }
                        td { code { (node.resp_addr) } }
                    }
                }
            }
        }
    }
}
