//! `shoal demo`: a database, a table and rows to look at, and the commands
//! to look at them with.

use std::path::Path;

use anyhow::Context;
use shoal_datanode::node::DataNode;
use shoal_datanode::{Commit, Grant, Outcome, Role, Value};
use shoal_quota::Quota;
use shoal_wire::schema::{DatabaseName, TableDef};

const DATABASE: &str = "demo";
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
    if engine.database(DATABASE).is_ok() {
        println!(
            "demo: database '{DATABASE}' recovered from {}",
            data_dir.display()
        );
    } else {
        seed(node).await?;
        println!("demo: database '{DATABASE}', table 'users' with {ROWS} rows");
    }
    let url = format!("http://{}", node.internal_addr());
    let auth = match node.secret_file() {
        Some(file) => format!("$(cat {})", file.display()),
        None => "$SHOAL_CLUSTER_SECRET".to_owned(),
    };
    let demo_json = data_dir.join("demo.json");
    println!("see the memory it takes, per table and for the whole node, and its quota:");
    for table in ["table_memory_usage", "memoryusage", "database_quota_usage"] {
        println!("  curl -s -H \"Authorization: Bearer {auth}\" {url}/internal/v1/ndbinfo/{table}");
    }
    let json = serde_json::json!({
        "node_id": engine.node_id(),
        "internal_url": url,
        "cluster_secret_file": node.secret_file(),
        "database": DATABASE,
        "table": "users",
        "rows": ROWS,
    });
    std::fs::write(&demo_json, serde_json::to_vec_pretty(&json)?)
        .with_context(|| format!("writing {}", demo_json.display()))?;
    println!("written to {}; Ctrl-C stops", demo_json.display());
    Ok(())
}

/// The demo database, its `users` table, a quota and the rows.
async fn seed(node: &DataNode) -> anyhow::Result<()> {
    let engine = node.engine();
    let db = DatabaseName::parse(DATABASE)?;
    engine.create_database(&db, None).await?;
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
    Ok(())
}
