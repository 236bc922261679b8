//! `shoal demo`: a database, a table and rows to look at, and the commands
//! to look at them with.

use std::path::Path;

use anyhow::Context;
use shoal_datanode::keys::{self, KeyGrant};
use shoal_datanode::node::DataNode;
use shoal_datanode::{Commit, Grant, Outcome, Role, Value};
use shoal_quota::Quota;
use shoal_wire::schema::{DatabaseName, TableDef, TenantId};

const DATABASE: &str = "demo";
const TENANT: &str = "demo";
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

/// Creates the demo database and table with rows (unless the data directory
/// already has them from an earlier run), prints how to reach them, and
/// writes the same to `<data-dir>/demo.json`.
pub(crate) async fn run(node: &DataNode, data_dir: &Path) -> anyhow::Result<()> {
    let engine = node.engine();
    let demo_json = data_dir.join("demo.json");
    let api_key = if engine.database(DATABASE).is_ok() {
        println!(
            "demo: database '{DATABASE}' recovered from {}",
            data_dir.display()
        );
        // The key's secret is not kept by the node: only in demo.json.
        let earlier: serde_json::Value = std::fs::read(&demo_json)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        earlier["tenant"]["api_key"].as_str().map(str::to_owned)
    } else {
        let key = seed(node).await?;
        println!("demo: database '{DATABASE}', table 'users' with {ROWS} rows");
        Some(key)
    };
    let rest_url = format!("http://{}", node.rest_addr());
    let resp = node.resp_addr();
    match &api_key {
        Some(key) => {
            println!(
                "read a row over REST and keys over the Redis protocol, with the demo API key:"
            );
            println!(
                "  curl -s -H 'X-API-KEY: {key}' -d '{{\"filters\":[{{\"column\":\"id\",\"value\":7}}]}}' {rest_url}/0.1.0/{DATABASE}/users/pk-read"
            );
            println!(
                "  redis-cli -h {} -p {} --user {DATABASE} --pass '{key}' --no-auth-warning SET greeting hello",
                resp.ip(),
                resp.port()
            );
        }
        None => println!(
            "demo: the API key is lost with demo.json; make a new one over the internal API"
        ),
    }
    let url = format!("http://{}", node.internal_addr());
    let auth = match node.secret_file() {
        Some(file) => format!("$(cat {})", file.display()),
        None => "$SHOAL_CLUSTER_SECRET".to_owned(),
    };
    println!("see the memory it takes, per table and for the whole node, and its quota:");
    for table in ["table_memory_usage", "memoryusage", "database_quota_usage"] {
        println!("  curl -s -H \"Authorization: Bearer {auth}\" {url}/internal/v1/ndbinfo/{table}");
    }
    let json = serde_json::json!({
        "node_id": engine.node_id(),
        "internal_url": url,
        "rest_url": rest_url,
        "resp_addr": resp.to_string(),
        "tenant": {"id": TENANT, "database": DATABASE, "api_key": api_key},
        "cluster_secret_file": node.secret_file(),
        "database": DATABASE,
        "table": "users",
        "rows": ROWS,
    });
    write_private(&demo_json, &serde_json::to_vec_pretty(&json)?)
        .with_context(|| format!("writing {}", demo_json.display()))?;
    println!("written to {}; Ctrl-C stops", demo_json.display());
    Ok(())
}

/// demo.json holds an API key: readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}

/// The demo tenant's database, its `users` table, a quota, the rows, and
/// an API key that may read and write it; answers the key.
async fn seed(node: &DataNode) -> anyhow::Result<String> {
    let engine = node.engine();
    let db = DatabaseName::parse(DATABASE)?;
    let tenant = TenantId::parse(TENANT)?;
    engine.create_database(&db, Some(&tenant)).await?;
    let def: TableDef = serde_json::from_str(USERS)?;
    let users = engine.create_table(&db, def).await?;
    let quota = Quota {
        in_memory_bytes: Some(64 << 20),
        read_units_per_sec: Some(10_000),
        write_units_per_sec: Some(5_000),
        max_transaction_ops: Some(1_000),
        ..Quota::UNLIMITED
    };
    node.tc().set_database_quota(DATABASE, quota)?;
    let grant = Grant {
        database: users.database.id,
        role: Role::ReadWrite,
    };
    let mut batch = engine.batch();
    for id in 0..ROWS {
        let row = [
            ("id", Value::Int(id)),
            ("name", Value::Text(format!("User {id}"))),
            ("email", Value::Text(format!("user{id}@example.com"))),
            (
                "country",
                Value::Text(["SE", "DE", "US", "JP"][id as usize % 4].into()),
            ),
            (
                "signed_up",
                Value::Text(format!("2024-{:02}-{:02}", id % 12 + 1, id % 28 + 1)),
            ),
            (
                "balance",
                Value::Text(format!("{}.{:02}", id * 7 % 1000, id % 100)),
            ),
            ("active", Value::Bool(id % 3 != 0)),
            (
                "bio",
                if id % 2 == 0 {
                    Value::Text("Likes fast databases. ".repeat(1 + id as usize % 10))
                } else {
                    Value::Null
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
    let grants = vec![KeyGrant {
        database: db,
        role: Role::ReadWrite,
    }];
    let (key, def) = keys::generate(tenant, grants, None)?;
    engine.put_api_key(def)?;
    Ok(key)
}
