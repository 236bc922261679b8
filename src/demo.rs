//! `shoal demo`: the control plane and one data node in one process (or
//! several data nodes as child processes, `--data-nodes`), with a platform
//! admin, a demo tenant, its database, a table with rows and an
//! API key — all made through the control plane's API, as a user would —
//! and the commands to look at them with.

use std::path::Path;

use anyhow::Context;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use shoal_control_plane::ControlPlane;
use shoal_datanode::DataNode;
use shoal_datanode::{Commit, Grant, Outcome, Role, Value as Cell};

use crate::angel::Angel;
use crate::client::{Client, answer};

const DATABASE: &str = "demo";
const TENANT: &str = "demo";
const TENANT_EMAIL: &str = "demo@shoal.local";
pub(crate) const ADMIN_EMAIL: &str = "admin@shoal.local";
const ROWS: i64 = 1000;

const USERS: &str = r#"{
    "name": "users",
    "columns": [
        {"name": "id", "type": "BIGINT"},
        {"name": "name", "type": "VARCHAR(100)"},
        {"name": "email", "type": "VARCHAR(255)"},
        {"name": "country", "type": "CHAR(2)"},
        {"name": "signed_up", "type": "DATE"},
        {"name": "balance", "type": "DECIMAL(12,2)"},
        {"name": "active", "type": "BOOL"},
        {"name": "bio", "type": "VARCHAR(1000)", "nullable": true}
    ],
    "primary_key": ["id"]
}"#;

/// What an earlier run wrote to demo.json, if anything.
pub(crate) fn earlier(data_dir: &Path) -> Value {
    std::fs::read(data_dir.join("demo.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// For a data directory an earlier run left without its demo.json (whose
/// passwords were kept nowhere else): gives the demo's admin
/// `admin_password` and its tenant a new one, in the store, and says so.
/// Answers what the lost demo.json would have said of them.
pub(crate) async fn set_logins_anew(
    control: &ControlPlane,
    data_dir: &Path,
    admin_password: &str,
) -> anyhow::Result<Value> {
    let store = &control.app.store;
    let set = |email: &'static str, password: String| async move {
        shoal_control_plane::accounts::set_password(store, email, &password)
            .await
            .map_err(|e| anyhow::anyhow!("{}", e.message))
            .with_context(|| format!("setting a new password for {email}"))
    };
    set(ADMIN_EMAIL, admin_password.to_owned()).await?;
    let tenant_password = shoal_control_plane::auth::random_hex(10);
    set(TENANT_EMAIL, tenant_password.clone()).await?;
    println!(
        "demo: {} was gone, and with it the demo's passwords: the admin's and the tenant's are set anew (their sessions ended); the new ones go to a new demo.json",
        data_dir.join("demo.json").display()
    );
    Ok(json!({"tenant": {"password": tenant_password}}))
}

/// Makes (or finds, from an earlier run on the same data directory) the
/// demo tenant, its database, table, rows and API key through the control
/// plane; prints how to reach them, and writes the same to
/// `<data-dir>/demo.json`.
/// Where the demo's data nodes run.
pub(crate) enum Nodes<'a> {
    /// One, in the demo's process.
    InProcess(&'a DataNode),
    /// Child processes, watched by the angel.
    Children(&'a Angel),
}

pub(crate) async fn run(
    control: &ControlPlane,
    nodes: Nodes<'_>,
    data_dir: &Path,
    admin_password: &str,
    before: Value,
) -> anyhow::Result<()> {
    let url = format!("http://{}", control.addr);
    let admin = Client::login(&url, ADMIN_EMAIL, admin_password)
        .await
        .context("logging in as the demo admin")?;

    // The tenant: signed up once, logged in after.
    let mut tenant = Client::new(&url);
    let tenant_password = before["tenant"]["password"]
        .as_str()
        .map_or_else(|| shoal_control_plane::auth::random_hex(10), str::to_owned);
    let signup = json!({"email": TENANT_EMAIL, "password": tenant_password, "tenant_name": TENANT});
    let signed_up = tenant
        .send(Method::POST, "/auth/signup", Some(signup))
        .await?;
    let me = if signed_up.status() == StatusCode::CONFLICT {
        tenant
            .log_in(TENANT_EMAIL, &tenant_password)
            .await
            .context("the demo tenant exists but demo.json lost its password")?
    } else {
        let me = answer(signed_up)
            .await
            .context("signing up the demo tenant")?;
        tenant.use_session(&me);
        me
    };
    let tenant_id = me["user"]["tenant"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    // The database, once the data node has registered.
    let created = tenant.create_database(DATABASE).await?;
    if created {
        let users: Value = serde_json::from_str(USERS)?;
        tenant
            .call(Method::POST, "/databases/demo/tables", Some(users))
            .await?;
        let quota = json!({
            "in_memory_bytes": 64 << 20,
            "read_units_per_sec": 10_000,
            "write_units_per_sec": 5_000,
            "max_transaction_ops": 1_000,
        });
        let path = format!("/admin/tenants/{tenant_id}/databases/{DATABASE}/quota");
        admin.call(Method::PUT, &path, Some(quota)).await?;
    }

    // The key: the one an earlier run made while it is live, else a new one.
    let keys = tenant.call(Method::GET, "/api-keys", None).await?;
    let live = |id: &str| {
        keys["keys"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|k| k["id"] == id && k["revoked_at"].is_null())
    };
    let api_key = match before["tenant"]["api_key"].as_str() {
        Some(key) if live(key.split('.').next().unwrap_or("")) => key.to_owned(),
        _ => {
            let body =
                json!({"name": "demo", "grants": [{"database": DATABASE, "role": "read_write"}]});
            let made = tenant.call(Method::POST, "/api-keys", Some(body)).await?;
            made["key"].as_str().context("the new key")?.to_owned()
        }
    };

    // Every node as the control plane knows it; the first is the one the
    // printed lines use.
    let listed = admin.call(Method::GET, "/admin/datanodes", None).await?;
    let (rest_url, resp, mysql, url, node_id) = match nodes {
        Nodes::InProcess(node) => (
            format!("http://{}", node.rest_addr()),
            node.resp_addr(),
            Some(node.mysql_addr().to_string()),
            format!("http://{}", node.internal_addr()),
            json!(node.engine().node_id()),
        ),
        Nodes::Children(_) => {
            let first = &listed["datanodes"][0];
            let text = |field: &str| first[field].as_str().unwrap_or_default().to_owned();
            (
                text("rest_url"),
                text("resp_addr")
                    .parse()
                    .context("the first node's Redis address")?,
                (first["mysql_addr"].as_str())
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned),
                text("internal_url"),
                first["node_id"].clone(),
            )
        }
    };
    if created {
        match nodes {
            Nodes::InProcess(node) => insert_rows(node).await?,
            Nodes::Children(_) => insert_rows_over_rest(&rest_url, &api_key).await?,
        }
        println!("demo: database '{DATABASE}', table 'users' with {ROWS} rows");
    } else {
        println!(
            "demo: database '{DATABASE}' recovered from {}",
            data_dir.display()
        );
    }

    let console_url = format!("http://{}/", control.addr);
    let api_url = format!("http://{}/api/v1", control.addr);
    println!(
        "control plane: {api_url}; log in as {ADMIN_EMAIL} (admin) or {TENANT_EMAIL} (tenant), passwords in demo.json"
    );
    println!("read a row over REST and keys over the Redis protocol, with the demo API key:");
    println!(
        "  curl -s -H 'X-API-KEY: {api_key}' -d '{{\"filters\":[{{\"column\":\"id\",\"value\":7}}]}}' {rest_url}/0.1.0/{DATABASE}/users/pk-read"
    );
    println!(
        "  redis-cli -h {} -p {} --user {DATABASE} --pass '{api_key}' --no-auth-warning SET greeting hello",
        resp.ip(),
        resp.port()
    );
    if let Some(mysql) = &mysql
        && let Some((host, port)) = mysql.rsplit_once(':')
    {
        let (user, password) = api_key.split_once('.').unwrap_or_default();
        println!(
            "and over SQL, with the mysql client (user: the key's prefix, password: its secret):"
        );
        println!(
            "  mysql -h {host} -P {port} -u {user} -p'{password}' {DATABASE} -e 'SELECT * FROM users WHERE id = 7'"
        );
    }
    let secret_file = data_dir.join(shoal_datanode::SECRET_FILE);
    println!("see the memory it takes, per table and for the whole node, and its quota:");
    println!(
        "  curl -s -H \"Authorization: Bearer $(cat {})\" {url}/internal/v1/ndbinfo/table_memory_usage",
        secret_file.display()
    );
    println!(
        "log in to the control plane as the tenant, then see its quotas and usage with the token it answers:"
    );
    println!(
        "  curl -s -H 'content-type: application/json' -d '{{\"email\":\"{TENANT_EMAIL}\",\"password\":\"{tenant_password}\"}}' {api_url}/auth/login"
    );
    println!("  curl -s -H 'Authorization: Bearer <token>' {api_url}/quotas");
    let mut demo = json!({
        "console_url": console_url,
        "api_url": api_url,
        "rest_url": rest_url,
        "resp_addr": resp.to_string(),
        "mysql_addr": mysql,
        "internal_url": url,
        "admin": {"email": ADMIN_EMAIL, "password": admin_password},
        "tenant": {
            "id": tenant_id,
            "email": TENANT_EMAIL,
            "password": tenant_password,
            "database": DATABASE,
            "api_key": api_key,
        },
        "node_id": node_id,
        "cluster_secret_file": secret_file,
        "database": DATABASE,
        "table": "users",
        "rows": ROWS,
    });
    if let Nodes::Children(angel) = nodes {
        let pids = angel.pids();
        let listed = listed["datanodes"].as_array().cloned().unwrap_or_default();
        demo["data_nodes"] = (listed.iter())
            .map(|n| {
                let id = n["node_id"].as_u64().unwrap_or_default() as u32;
                let pid = pids.iter().find(|(node, _)| *node == id).map(|p| p.1);
                json!({
                    "node_id": id,
                    "node_group": n["node_group"],
                    "pid": pid,
                    "rest_url": n["rest_url"],
                    "resp_addr": n["resp_addr"],
                    "mysql_addr": n["mysql_addr"],
                    "internal_url": n["internal_url"],
                })
            })
            .collect();
    }
    let demo_json = data_dir.join("demo.json");
    write_private(&demo_json, &serde_json::to_vec_pretty(&demo)?)
        .with_context(|| format!("writing {}", demo_json.display()))?;
    println!("written to {}; Ctrl-C stops", demo_json.display());
    Ok(())
}

/// Writes each node's process id now into demo.json's `data_nodes`.
pub(crate) fn note_pids(data_dir: &Path, pids: &[(u32, u32)]) -> anyhow::Result<()> {
    let path = data_dir.join("demo.json");
    let mut demo: Value = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    for node in demo["data_nodes"].as_array_mut().into_iter().flatten() {
        let id = node["node_id"].as_u64();
        if let Some(&(_, pid)) = pids.iter().find(|(n, _)| Some(u64::from(*n)) == id) {
            node["pid"] = if pid == 0 { Value::Null } else { json!(pid) };
        }
    }
    write_private(&path, &serde_json::to_vec_pretty(&demo)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// demo.json holds an API key: readable by its owner only. Written to a
/// file beside it and renamed over it, so that a reader (a script, a test
/// watching `pid`s change) never sees it half written.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut next = path.as_os_str().to_owned();
    next.push(".next");
    let next = std::path::PathBuf::from(next);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(&next)?.write_all(bytes)?;
    std::fs::rename(&next, path)
}

/// The demo table's rows, as `insert_rows` writes them, in one transaction
/// through a data node's REST API with the demo key (retried while the
/// node has not yet been given the key).
async fn insert_rows_over_rest(rest_url: &str, api_key: &str) -> anyhow::Result<()> {
    let operations: Vec<Value> = (0..ROWS)
        .map(|id| {
            let bio = match id % 2 {
                0 => json!("Likes fast databases. ".repeat(1 + id as usize % 10)),
                _ => Value::Null,
            };
            let country = ["SE", "DE", "US", "JP"][id as usize % 4];
            let row = json!({
                "id": id,
                "name": format!("User {id}"),
                "email": format!("user{id}@example.com"),
                "country": country,
                "signed_up": format!("2024-{:02}-{:02}", id % 12 + 1, id % 28 + 1),
                "balance": format!("{}.{:02}", id * 7 % 1000, id % 100),
                "active": id % 3 != 0,
                "bio": bio,
            });
            json!({"method": "POST", "relative-url": format!("{DATABASE}/users/pk-insert"), "body": {"row": row}})
        })
        .collect();
    let body = json!({ "operations": operations });
    let http = reqwest::Client::new();
    let started = std::time::Instant::now();
    loop {
        let answer = http
            .post(format!("{rest_url}/0.1.0/transaction"))
            .header("X-API-KEY", api_key)
            .json(&body)
            .send()
            .await
            .context("seeding the demo table")?;
        let status = answer.status();
        if status.is_success() {
            return Ok(());
        }
        let text = answer.text().await.unwrap_or_default();
        let retry = matches!(status.as_u16(), 401 | 403 | 404 | 421 | 503);
        anyhow::ensure!(
            retry && started.elapsed() < std::time::Duration::from_secs(30),
            "seeding the demo table: {status} {text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The demo table's rows, written in one transaction through the data
/// node's coordinator.
async fn insert_rows(node: &DataNode) -> anyhow::Result<()> {
    let engine = node.engine();
    let users = engine.table(DATABASE, "users")?;
    let grant = Grant {
        database: users.database.id,
        role: Role::ReadWrite,
    };
    let mut batch = engine.tc().batch();
    for id in 0..ROWS {
        let row = [
            ("id", Cell::Int(id)),
            ("name", Cell::Text(format!("User {id}"))),
            ("email", Cell::Text(format!("user{id}@example.com"))),
            (
                "country",
                Cell::Text(["SE", "DE", "US", "JP"][id as usize % 4].into()),
            ),
            (
                "signed_up",
                Cell::Text(format!("2024-{:02}-{:02}", id % 12 + 1, id % 28 + 1)),
            ),
            (
                "balance",
                Cell::Text(format!("{}.{:02}", id * 7 % 1000, id % 100)),
            ),
            ("active", Cell::Bool(id % 3 != 0)),
            (
                "bio",
                if id % 2 == 0 {
                    Cell::Text("Likes fast databases. ".repeat(1 + id as usize % 10))
                } else {
                    Cell::Null
                },
            ),
        ];
        batch.insert(&users, &row)?;
    }
    node.tc()
        .execute(&grant, &mut batch, Commit::Atomic)
        .await?;
    for result in batch.results() {
        anyhow::ensure!(
            matches!(result, Ok(Outcome::Inserted)),
            "seeding the demo table: {result:?}"
        );
    }
    Ok(())
}
