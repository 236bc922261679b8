//! Node groups: a control plane with `--replicas 2` and two data nodes as
//! separate processes. The nodes form a group, every database is on both,
//! every acknowledged write is on both replicas, and either node serves a
//! database over REST and the Redis protocol (writes go to its primary).

mod common;

use common::Shoal;
use common::control::{
    Auth, Backend, CLUSTER_SECRET, Control, GUARD, Session, code, data_call, eventually, orders,
};
use redis::Commands;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn as_refs(e: &[(String, String)]) -> Vec<(&str, &str)> {
    e.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

fn node(cp: &Control, id: u32, dir: &std::path::Path, envs: &[(&str, &str)]) -> Shoal {
    cp.data_node_with(dir, &["--node-id", &id.to_string()], envs)
}

async fn read_note(node: &Shoal, key: &str, id: i64) -> (StatusCode, Value) {
    let (status, body) = data_call(
        node,
        key,
        "shop/orders/pk-read",
        json!({"filters": [{"column": "id", "value": id}]}),
    )
    .await;
    (status, body["data"]["note"].clone())
}

/// A group of two nodes with tenant ada's database `shop` (table `orders`)
/// on it, and a read-write and a read-only key: the nodes as (primary,
/// backup).
struct Group {
    _one_at_a_time: tokio::sync::MutexGuard<'static, ()>,
    cp: Control,
    /// The tenant owning `shop`.
    ada: Session,
    primary: Shoal,
    backup: Shoal,
    key: String,
    read_key: String,
    dirs: Vec<tempfile::TempDir>,
}

async fn group() -> Group {
    group_with(|_| Vec::new()).await
}

/// The platform's operator, who sets quotas.
const OPERATOR: &str = "ops@example.com";
const OPERATOR_PASSWORD: &str = "an operator's password";

/// The tests here run one at a time: each is a small cluster (two data
/// nodes and a control plane), and six at once on a 2-core machine is a
/// load no deployment puts on its nodes.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `group`, each node with the environment `envs` gives its id.
async fn group_with(envs: impl Fn(u32) -> Vec<(String, String)>) -> Group {
    let one_at_a_time = ONE_AT_A_TIME.lock().await;
    let env = |id: u32| envs(id);
    let (env1, env2) = (env(1), env(2));

    let cp = Control::start_env(
        Backend::Sqlite,
        &[
            "--cluster-secret",
            CLUSTER_SECRET,
            "--replicas",
            "2",
            "--admin-email",
            OPERATOR,
        ],
        &[("SHOAL_ADMIN_PASSWORD", OPERATOR_PASSWORD)],
    );
    let ada = cp.signup("ada@example.com", "analytical").await;
    let dirs = vec![tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let one = node(&cp, 1, dirs[0].path(), &as_refs(&env1));
    // One node is no group of two: there is nowhere to place a database.
    let (status, _, body) = post(&cp, &ada, "/databases", json!({"name": "shop"})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::SERVICE_UNAVAILABLE, "NO_DATA_NODE"),
        "{body}"
    );
    let two = node(&cp, 2, dirs[1].path(), &as_refs(&env2));
    let db = eventually("the group forms", || async {
        let (status, _, body) = post(&cp, &ada, "/databases", json!({"name": "shop"})).await;
        (status == StatusCode::CREATED).then_some(body)
    })
    .await;
    assert_eq!(db["node_group"], 0, "{db}");
    let serving: Vec<&str> = (db["nodes"].as_array().unwrap().iter())
        .map(|n| n["rest_url"].as_str().unwrap())
        .collect();
    let primary_id = db["node_id"].as_u64().unwrap();
    let (primary, backup) = if primary_id == 1 {
        (one, two)
    } else {
        (two, one)
    };
    assert_eq!(
        serving,
        [primary.rest_url.as_str(), backup.rest_url.as_str()],
        "both nodes serve it, the primary first"
    );
    assert_eq!(db["rest_url"].as_str(), Some(primary.rest_url.as_str()));
    for node in [&primary, &backup] {
        settled(node).await;
    }
    let (status, _, body) = post(&cp, &ada, "/databases/shop/tables", orders()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let key = api_key(&cp, &ada, "read_write").await;
    let read_key = api_key(&cp, &ada, "read").await;
    // Keys reach both nodes.
    for node in [&primary, &backup] {
        eventually("the keys are pushed", || async {
            let (status, _) = read_note(node, &read_key, 0).await;
            (status == StatusCode::NOT_FOUND).then_some(())
        })
        .await;
    }
    Group {
        _one_at_a_time: one_at_a_time,
        cp,
        ada,
        primary,
        backup,
        key,
        read_key,
        dirs,
    }
}

/// Waits until `node`'s view of its group has `members` nodes; answers it.
async fn in_view(node: &Shoal, members: usize) -> Value {
    eventually("the view forms", || async {
        let (status, group) = node.send(Method::GET, "/internal/v1/group", None).await;
        let live = group["view"]["members"].as_array().map_or(0, Vec::len);
        let serving = reqwest::get(format!("{}/0.1.0/health", node.rest_url))
            .await
            .is_ok_and(|r| r.status() == StatusCode::OK);
        (status == StatusCode::OK && live == members && serving).then_some(group["view"].clone())
    })
    .await
}

/// Waits until `node` sees both nodes in the view, each serving its own
/// primaries.
async fn settled(node: &Shoal) {
    eventually("the primaries are back with their nodes", || async {
        let view = in_view(node, 2).await;
        (view["moved"] == json!([])).then_some(())
    })
    .await;
}

async fn post(cp: &Control, who: &Session, path: &str, body: Value) -> (StatusCode, (), Value) {
    let (status, _, body) = cp
        .call(Method::POST, path, Some(&body), Auth::Bearer(&who.token))
        .await;
    (status, (), body)
}

async fn api_key(cp: &Control, who: &Session, role: &str) -> String {
    let (status, _, body) = post(
        cp,
        who,
        "/api-keys",
        json!({"name": role, "grants": [{"database": "shop", "role": role}]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["key"].as_str().unwrap().to_owned()
}

/// What a `table_memory_usage` row says the table's rows and index
/// entries use: its database, table, and in-memory bytes less the free
/// bytes inside them. Two replicas holding the same rows use the same;
/// the free space in their pages is each one's own history (a node caught
/// up keeps its pages, where a row deleted and put again may leave a page
/// of its hash index free).
fn used(row: &Value) -> Value {
    match (row[2].as_u64(), row[3].as_u64()) {
        (Some(memory), Some(free)) => json!([row[0], row[1], memory - free]),
        _ => Value::Null,
    }
}

/// What the rows of `shop.orders` use on `node`, by ndbinfo's
/// `table_memory_usage` (`used`).
async fn orders_memory(node: &Shoal) -> Value {
    used(&orders_memory_row(node).await)
}

/// The `shop.orders` row of ndbinfo's `table_memory_usage` on `node`.
async fn orders_memory_row(node: &Shoal) -> Value {
    let rows = node.ndbinfo("table_memory_usage").await;
    rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0] == "shop" && r[1] == "orders")
        .cloned()
        .unwrap_or(Value::Null)
}

/// Node `node`'s `database_quota_usage` row of `shop`.
async fn shop_usage(node: &Shoal) -> Value {
    let rows = node.ndbinfo("database_quota_usage").await["rows"].clone();
    let shop = (rows.as_array().unwrap().iter()).find(|r| r[0] == "shop");
    shop.cloned()
        .unwrap_or_else(|| panic!("no row of shop: {rows}"))
}

#[tokio::test]
async fn every_acknowledged_write_is_on_both_replicas_and_either_node_serves() {
    let g = group().await;
    // The console's database page names both nodes, the primary marked.
    let page = common::client()
        .get(format!("{}/databases/shop", g.cp.shoal.control_url))
        .header("cookie", format!("shoal_session={}", g.ada.token))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for node in [&g.primary, &g.backup] {
        assert!(
            page.contains(&node.rest_url) && page.contains(&node.resp_addr),
            "{page}"
        );
    }
    assert!(page.contains("(primary)"), "{page}");
    // Writes through the primary and through the backup (sent on to the
    // primary): each, once acknowledged, is read back from both nodes.
    for (i, via) in [
        (1, &g.primary),
        (2, &g.backup),
        (3, &g.backup),
        (4, &g.primary),
    ] {
        let row = json!({"row": {"id": i, "note": format!("order {i}")}});
        let (status, body) = data_call(via, &g.key, "shop/orders/pk-insert", row).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        for node in [&g.primary, &g.backup] {
            assert_eq!(
                read_note(node, &g.key, i).await,
                (StatusCode::OK, json!(format!("order {i}")))
            );
        }
    }
    // The primary's refusals reach the client through the backup as they are.
    let again = json!({"row": {"id": 1, "note": "again"}});
    let (status, body) = data_call(&g.backup, &g.key, "shop/orders/pk-insert", again).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "DUPLICATE_KEY")
    );
    let write = json!({"row": {"id": 9, "note": "nine"}});
    let (status, body) = data_call(&g.backup, &g.read_key, "shop/orders/pk-write", write).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::FORBIDDEN, "FORBIDDEN"),
        "{body}"
    );
    assert_eq!(
        read_note(&g.primary, &g.key, 9).await.0,
        StatusCode::NOT_FOUND
    );

    // A transaction through the backup: all of it on both replicas.
    let ops = json!({"operations": [
        {"method": "POST", "relative-url": "shop/orders/pk-update",
         "body": {"row": {"id": 1, "note": "paid"}}},
        {"method": "POST", "relative-url": "shop/orders/pk-delete",
         "body": {"filters": [{"column": "id", "value": 2}]}},
        {"method": "POST", "relative-url": "shop/orders/pk-insert",
         "body": {"row": {"id": 5, "note": "order 5"}}}
    ]});
    let (status, body) = data_call(&g.backup, &g.key, "transaction", ops).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // One that fails changes nothing, on either replica.
    let failing = json!({"operations": [
        {"method": "POST", "relative-url": "shop/orders/pk-insert",
         "body": {"row": {"id": 6, "note": "order 6"}}},
        {"method": "POST", "relative-url": "shop/orders/pk-insert",
         "body": {"row": {"id": 5, "note": "duplicate"}}}
    ]});
    let (status, body) = data_call(&g.backup, &g.key, "transaction", failing).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "DUPLICATE_KEY"),
        "{body}"
    );
    // A batch of writes through the backup.
    let batch = json!({"operations": [
        {"method": "POST", "relative-url": "shop/orders/pk-write",
         "body": {"row": {"id": 7, "note": "order 7"}}},
        {"method": "POST", "relative-url": "shop/orders/pk-write",
         "body": {"row": {"id": 8, "note": "order 8"}}}
    ]});
    let (status, body) = data_call(&g.backup, &g.key, "batch", batch).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for node in [&g.primary, &g.backup] {
        assert_eq!(read_note(node, &g.key, 1).await.1, json!("paid"));
        assert_eq!(read_note(node, &g.key, 2).await.0, StatusCode::NOT_FOUND);
        assert_eq!(read_note(node, &g.key, 5).await.1, json!("order 5"));
        assert_eq!(read_note(node, &g.key, 6).await.0, StatusCode::NOT_FOUND);
        assert_eq!(read_note(node, &g.key, 8).await.1, json!("order 8"));
    }
    // The replicas hold the same rows in the same memory: made in the
    // same order on both, even their pages are alike.
    let memory = orders_memory_row(&g.primary).await;
    assert!(memory[2].as_u64().unwrap() > 0, "{memory}");
    assert_eq!(orders_memory_row(&g.backup).await, memory);
    // Counted once: the control plane's ndbinfo has a row per fragment
    // replica, with its node, and its views take the largest replica of
    // each fragment, as RonDB's do.
    let sql = |q: &str| post(&g.cp, &g.ada, "/ndbinfo/query", json!({ "sql": q }));
    let (status, _, orders) = sql("SELECT in_memory_bytes FROM ndbinfo.table_memory_usage \
         WHERE database_name = 'shop' AND table_name = 'orders'")
    .await;
    assert_eq!(status, StatusCode::OK, "{orders}");
    assert_eq!(orders["rows"], json!([[memory[2]]]), "one replica's memory");
    let (_, _, holders) = sql(
        "SELECT node_id, COUNT(*) FROM ndbinfo.\"ndb$table_memory_usage\" \
         GROUP BY node_id ORDER BY node_id",
    )
    .await;
    let per_node = holders["rows"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        per_node.len(),
        2,
        "a replica of every fragment on each node: {holders}"
    );
    assert_eq!(per_node[0][1], per_node[1][1], "{holders}");
    // /quotas: the database's memory once, its units as each node admitted
    // them (reads served by the backup are charged there).
    let (p, b) = (shop_usage(&g.primary).await, shop_usage(&g.backup).await);
    assert!(b[3].as_u64().unwrap() > 0, "the backup served reads: {b}");
    let (status, _, quotas) =
        g.cp.call(Method::GET, "/quotas", None, Auth::Bearer(&g.ada.token))
            .await;
    assert_eq!(status, StatusCode::OK, "{quotas}");
    let shop = &quotas["databases"][0]["usage"];
    assert_eq!(shop["in_memory_bytes"], p[1], "{quotas} {p} {b}");
    assert_eq!(p[1], b[1], "the replicas hold the same memory");
    assert_eq!(
        shop["read_units"].as_u64(),
        Some(p[3].as_u64().unwrap() + b[3].as_u64().unwrap()),
        "{quotas} {p} {b}"
    );
    // ndbinfo.nodes: both started, in group 0; the primary serves every
    // fragment of the group's one database, the backup none.
    let p = g.primary.ndbinfo("nodes").await["rows"][0].clone();
    let b = g.backup.ndbinfo("nodes").await["rows"][0].clone();
    assert_eq!(
        (&p[1], &p[2], &b[1], &b[2]),
        (&json!(0), &json!("STARTED"), &json!(0), &json!("STARTED")),
        "{p} {b}"
    );
    assert!(p[4].as_u64().unwrap() > 0, "{p}");
    assert_eq!(b[4], json!(0), "{b}");
    drop(g.cp);
}

#[tokio::test]
async fn redis_clients_of_either_node_share_one_keyspace() {
    let g = group().await;
    let url = |node: &Shoal| format!("redis://shop:{}@{}/", g.key, node.resp_addr);
    let mut on_primary = redis::Client::open(url(&g.primary))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut on_backup = redis::Client::open(url(&g.backup))
        .unwrap()
        .get_connection()
        .unwrap();
    let () = on_backup.set("greeting", "hello").unwrap();
    assert_eq!(on_primary.get::<_, String>("greeting").unwrap(), "hello");
    let () = on_primary.set("big", vec![7u8; 300_000]).unwrap();
    assert_eq!(
        on_backup.get::<_, Vec<u8>>("big").unwrap(),
        vec![7u8; 300_000]
    );
    // The backup answers reads from its own replica, and sends those of a
    // value of several parts — read whole only on the primary — there,
    // with the commands of their pipeline.
    let read_units = |usage: Value| usage[3].as_u64().unwrap();
    let before = (
        read_units(shop_usage(&g.primary).await),
        read_units(shop_usage(&g.backup).await),
    );
    for _ in 0..50 {
        assert_eq!(on_backup.get::<_, String>("greeting").unwrap(), "hello");
    }
    let after = (
        read_units(shop_usage(&g.primary).await),
        read_units(shop_usage(&g.backup).await),
    );
    assert_eq!(after.0, before.0, "nothing read on the primary");
    assert_eq!(after.1 - before.1, 50, "read on the backup");
    let (greeting, big): (String, Vec<u8>) = redis::pipe()
        .get("greeting")
        .get("big")
        .query(&mut on_backup)
        .unwrap();
    assert_eq!((greeting.as_str(), big.len()), ("hello", 300_000));
    let both: Vec<Option<Vec<u8>>> = redis::cmd("MGET")
        .arg(&["greeting", "nothing", "big"])
        .query(&mut on_backup)
        .unwrap();
    assert_eq!(
        both,
        [Some(b"hello".to_vec()), None, Some(vec![7u8; 300_000])]
    );
    // Read-modify-write from both nodes at once loses nothing.
    let counters = [url(&g.primary), url(&g.backup)].map(|url| {
        std::thread::spawn(move || {
            let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
            conn.set_read_timeout(Some(std::time::Duration::from_secs(20)))
                .unwrap();
            for _ in 0..200 {
                if let Err(e) = conn.incr::<_, _, i64>("counter", 1) {
                    return Err(e.to_string());
                }
            }
            Ok(())
        })
    });
    for counter in counters {
        if let Err(e) = counter.join().unwrap() {
            panic!("{e}\n{}\n{}", g.primary.stderr(), g.backup.stderr());
        }
    }
    assert_eq!(on_backup.get::<_, i64>("counter").unwrap(), 400);
    // MULTI/EXEC through the backup.
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .incr("counter", 1)
        .incr("counter", 1)
        .query(&mut on_backup)
        .unwrap();
    assert_eq!((a, b), (401, 402));
    assert_eq!(on_primary.get::<_, i64>("counter").unwrap(), 402);
    // The keys' tables, made on first use, are on both replicas alike.
    let keys = |rows: Value| {
        rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r[0] == "shop" && r[1] != "orders")
            .cloned()
            .collect::<Vec<_>>()
    };
    let on_both = (
        keys(g.primary.ndbinfo("table_memory_usage").await),
        keys(g.backup.ndbinfo("table_memory_usage").await),
    );
    // The Redis tables: keys and chunks (those of hashes kept a row per
    // field come with the first such hash).
    assert_eq!(on_both.0.len(), 2, "{:?}", on_both.0);
    assert_eq!(on_both.0, on_both.1);
    // A wrong key is refused at the node it reaches, and nothing is relayed.
    let bad = format!("redis://shop:nope.nope@{}/", g.backup.resp_addr);
    assert!(redis::Client::open(bad).unwrap().get_connection().is_err());
}

/// A MySQL connection to `node` with `key`, in database `shop`.
async fn mysql(node: &Shoal, key: &str) -> sqlx::mysql::MySqlConnection {
    use sqlx::Connection;
    sqlx::mysql::MySqlConnection::connect_with(&node.mysql_options(key, "shop"))
        .await
        .unwrap()
}

/// How many rows the `orders` table holds, as `conn` reads it.
async fn order_count(conn: &mut sqlx::mysql::MySqlConnection) -> i64 {
    use sqlx::Row;
    sqlx::query("SELECT COUNT(*) FROM orders")
        .fetch_one(conn)
        .await
        .unwrap()
        .get(0)
}

/// The MySQL error number of a failed statement.
fn mysql_code(e: &sqlx::Error) -> u16 {
    match e {
        sqlx::Error::Database(d) => {
            let d = d.downcast_ref::<sqlx::mysql::MySqlDatabaseError>();
            d.number()
        }
        other => panic!("not an error of the server: {other}"),
    }
}

#[tokio::test]
async fn mysql_clients_of_the_backup_write_through_the_primary() {
    use sqlx::{Executor, Row};
    let g = group().await;
    let mut on_backup = mysql(&g.backup, &g.key).await;
    // State the session has before its first write goes with it: a
    // statement prepared here, a user variable, the database.
    let by_id = "SELECT note FROM orders WHERE id = ?";
    let none = sqlx::query(by_id)
        .bind(1)
        .fetch_optional(&mut on_backup)
        .await
        .unwrap();
    assert!(none.is_none());
    on_backup
        .execute("SET @note = 'it''s from the backup'")
        .await
        .unwrap();
    let done = sqlx::query("INSERT INTO orders (id, note) VALUES (?, @note)")
        .bind(1)
        .execute(&mut on_backup)
        .await
        .unwrap();
    assert_eq!(done.rows_affected(), 1);
    let note: String = sqlx::query(by_id)
        .bind(1)
        .fetch_one(&mut on_backup)
        .await
        .unwrap()
        .get(0);
    assert_eq!(note, "it's from the backup");
    for node in [&g.primary, &g.backup] {
        assert_eq!(
            read_note(node, &g.key, 1).await,
            (StatusCode::OK, json!("it's from the backup")),
            "on both replicas once acknowledged"
        );
    }
    // A column that takes the time of the write holds one instant on both
    // replicas: the coordinator reads the clock once and the row carries
    // it, to the backup and through a failover (checked after the kill).
    on_backup
        .execute(
            "CREATE TABLE stamped (id INT PRIMARY KEY, \
             at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6))",
        )
        .await
        .unwrap();
    on_backup
        .execute("INSERT INTO stamped (id) VALUES (1)")
        .await
        .unwrap();
    let stamp = read_stamp(&g.primary, &g.key).await;
    assert_eq!(read_stamp(&g.backup, &g.key).await, stamp);
    // Errors come back as the primary gives them.
    let dup = sqlx::query("INSERT INTO orders (id, note) VALUES (1, 'again')")
        .execute(&mut on_backup)
        .await
        .unwrap_err();
    assert_eq!(mysql_code(&dup), 1062, "{dup}");

    // A transaction begun on the backup, with reads first, is carried
    // whole at its first write: rolled back, nothing of it stays.
    let mut second = mysql(&g.backup, &g.key).await;
    second.execute("BEGIN").await.unwrap();
    assert_eq!(order_count(&mut second).await, 1);
    second
        .execute("INSERT INTO orders (id, note) VALUES (2, 'rolled back')")
        .await
        .unwrap();
    second
        .execute("UPDATE orders SET note = 'changed' WHERE id = 1")
        .await
        .unwrap();
    second.execute("ROLLBACK").await.unwrap();
    assert_eq!(
        read_note(&g.primary, &g.key, 2).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        read_note(&g.primary, &g.key, 1).await.1,
        json!("it's from the backup")
    );
    // Committed, it is on both.
    second.execute("BEGIN").await.unwrap();
    second
        .execute("INSERT INTO orders (id, note) VALUES (3, 'committed')")
        .await
        .unwrap();
    second.execute("COMMIT").await.unwrap();
    assert_eq!(read_note(&g.backup, &g.key, 3).await.1, json!("committed"));
    // A connection dropped in a transaction on the primary: rolled back
    // there, its locks let go.
    second.execute("BEGIN").await.unwrap();
    second
        .execute("UPDATE orders SET note = 'never' WHERE id = 3")
        .await
        .unwrap();
    drop(second);
    let mut third = mysql(&g.backup, &g.key).await;
    let done = third
        .execute("UPDATE orders SET note = 'after the drop' WHERE id = 3")
        .await
        .unwrap();
    assert_eq!(done.rows_affected(), 1);
    assert_eq!(
        read_note(&g.primary, &g.key, 3).await.1,
        json!("after the drop")
    );

    // A read key writing through the backup is refused there, and
    // nothing is carried.
    let mut reader = mysql(&g.backup, &g.read_key).await;
    let denied = reader
        .execute("INSERT INTO orders (id, note) VALUES (4, 'read key')")
        .await
        .unwrap_err();
    assert_eq!(mysql_code(&denied), 1142, "{denied}");
    assert_eq!(
        read_note(&g.primary, &g.key, 4).await.0,
        StatusCode::NOT_FOUND
    );

    // The primary killed: a connection carried to it is closed (what it
    // had under way may or may not have been applied); one that has only
    // read on the backup writes there once the view has moved the
    // primary — its write waits for that, and fails nothing.
    let Group {
        primary,
        backup,
        key,
        ..
    } = g;
    let mut reading = mysql(&backup, &key).await;
    assert_eq!(order_count(&mut reading).await, 2);
    primary.kill();
    let failed = tokio::time::timeout(
        GUARD,
        on_backup.execute("INSERT INTO orders (id, note) VALUES (5, 'in the kill')"),
    )
    .await
    .expect("the client is told within the guard");
    assert!(failed.is_err(), "{failed:?}");
    let written = reading
        .execute("INSERT INTO orders (id, note) VALUES (6, 'on the survivor')")
        .await
        .unwrap();
    assert_eq!(written.rows_affected(), 1);
    assert_eq!(
        read_note(&backup, &key, 6).await.1,
        json!("on the survivor")
    );
    assert_eq!(read_stamp(&backup, &key).await, stamp);
}

/// Row 1's `at` of table `stamped`, read over REST from `node`.
async fn read_stamp(node: &Shoal, key: &str) -> String {
    let filters = json!({"filters": [{"column": "id", "value": 1}]});
    let (status, body) = data_call(node, key, "shop/stamped/pk-read", filters).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["data"]["at"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn hostile_peers_and_groups_are_refused_and_change_nothing() {
    let g = group().await;
    let before = g.backup.get_json("/internal/v1/group").await;
    assert_eq!(before["members"].as_array().unwrap().len(), 2, "{before}");
    let member = |id: u32, peer: &str| json!({"node_id": id, "peer_addr": peer, "rest_url": "http://127.0.0.1:1", "resp_addr": "127.0.0.1:2"});
    for (bad, why) in [
        (
            json!({"node_group": 0, "members": [member(7, "127.0.0.1:9")]}),
            "not a member",
        ),
        (
            json!({"node_group": 0, "members": [member(1, "127.0.0.1:9"), member(2, "127.0.0.1:9"),
                member(3, "127.0.0.1:9"), member(4, "127.0.0.1:9")]}),
            "1 to 3 nodes",
        ),
        (
            json!({"node_group": 0, "members": [member(1, "<script>"), member(2, "127.0.0.1:9")]}),
            "not an address",
        ),
        (
            json!({"node_group": 5, "members": [member(1, "127.0.0.1:9"), member(2, "127.0.0.1:9")]}),
            "node group 0, not 5",
        ),
        (json!({"node_group": 0}), ""),
    ] {
        let (status, body) = g
            .backup
            .send(Method::PUT, "/internal/v1/group", Some(bad))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(why),
            "{body}"
        );
    }
    assert_eq!(g.backup.get_json("/internal/v1/group").await, before);
    // A directory that is not one is refused and changes nothing.
    let directory = g.backup.get_json("/internal/v1/directory").await;
    for bad in [
        json!({"groups": "everywhere"}),
        json!({"groups": [], "databases": [{"name": "shop"}]}),
        json!({"groups": [], "databases": [], "extra": 1}),
    ] {
        let (status, body) = g
            .backup
            .send(Method::PUT, "/internal/v1/directory", Some(bad))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
    assert_eq!(g.backup.get_json("/internal/v1/directory").await, directory);
    // Garbage, a frame too large and a stranger without the secret on the
    // peer port: each connection is dropped, and the group goes on.
    for bytes in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        &[0xff, 0xff, 0xff, 0x7f, 1, 2, 3][..],
        &[3, 0, 0, 0, 0, 1, 2][..],
    ] {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut peer = tokio::net::TcpStream::connect(&g.backup.peer_addr)
            .await
            .unwrap();
        peer.write_all(bytes).await.unwrap();
        let mut answer = Vec::new();
        let read = tokio::time::timeout(GUARD, peer.read_to_end(&mut answer)).await;
        assert!(read.is_ok(), "the node closes the connection");
    }
    // Greetings for a relayed Redis connection or MySQL session and for
    // requests sent on, without the secret: refused.
    let primary_id = id_of(&g.primary, &g.dirs);
    for kind in [GREET_RELAY, GREET_FORWARD, GREET_RELAY_SQL] {
        let mut peer = greet_peer(&g.backup, kind, primary_id, b"not the secret").await;
        let answer = read_frame(&mut peer).await;
        assert_eq!(answer.first(), Some(&REFUSED), "{answer:?}");
        // With it, from a node of another build: refused, saying why.
        let secret = CLUSTER_SECRET.as_bytes();
        let mut peer =
            greet_peer_as(&g.backup, kind, TRANSPORT_VERSION + 1, primary_id, secret).await;
        let answer = read_frame(&mut peer).await;
        assert_eq!(answer.first(), Some(&REFUSED), "{answer:?}");
        let reason = String::from_utf8_lossy(&answer);
        assert!(
            reason.contains("transport version 2, this node 1"),
            "{reason}"
        );
    }
    // With the secret, a request sent on still needs the client's key, and
    // garbage after it ends the connection; nothing is written.
    let mut peer = welcomed_peer(&g.backup, GREET_FORWARD, primary_id).await;
    let path = b"/0.1.0/shop/orders/pk-insert";
    let body = br#"{"row": {"id": 8, "note": "keyless"}}"#;
    let mut request = vec![REQUEST, 1, 1, path.len() as u8];
    request.extend_from_slice(path);
    request.extend_from_slice(&[0, body.len() as u8]);
    request.extend_from_slice(body);
    send_frame(&mut peer, &request).await;
    let answer = read_frame(&mut peer).await;
    assert_eq!(
        answer[..4],
        [ANSWER, 1, 0x91, 0x03],
        "answered 401: {answer:?}"
    );
    send_frame(&mut peer, &[0xee, 0xee, 0xee]).await;
    let closed = tokio::time::timeout(GUARD, tokio::io::AsyncReadExt::read_u8(&mut peer)).await;
    assert!(matches!(closed, Ok(Err(_))), "closed: {closed:?}");
    // A MySQL session carried with the secret but state that does not
    // decode, or is longer than a session's state may be: closed, unanswered.
    let garbled = [&40u32.to_le_bytes()[..], &[0xee; 40]].concat();
    let oversized = u32::MAX.to_le_bytes().to_vec();
    for state in [garbled, oversized] {
        use tokio::io::AsyncWriteExt;
        let mut peer = welcomed_peer(&g.backup, GREET_RELAY_SQL, primary_id).await;
        peer.write_all(&state).await.unwrap();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(
            GUARD,
            tokio::io::AsyncReadExt::read_to_end(&mut peer, &mut rest),
        )
        .await;
        assert!(
            matches!(read, Ok(Ok(0))),
            "closed unanswered: {read:?} {rest:?}"
        );
    }
    assert_eq!(
        read_note(&g.primary, &g.key, 8).await.0,
        StatusCode::NOT_FOUND
    );
    // A client posing as a node that forwarded its write from a newer
    // view: refused as a write sent on twice, and nothing written.
    let forged = reqwest::Client::new()
        .post(format!("{}/0.1.0/shop/orders/pk-insert", g.backup.rest_url))
        .header("X-API-KEY", &g.key)
        .header("x-shoal-forwarded-by", "1")
        .header("x-shoal-view", u64::MAX.to_string())
        .json(&json!({"row": {"id": 7, "note": "forged"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::MISDIRECTED_REQUEST);
    let body: Value = forged.json().await.unwrap();
    assert_eq!(code(&body), "NOT_PRIMARY", "{body}");
    assert_eq!(
        read_note(&g.primary, &g.key, 7).await.0,
        StatusCode::NOT_FOUND
    );
    let row = json!({"row": {"id": 1, "note": "still replicated"}});
    let (status, body) = data_call(&g.backup, &g.key, "shop/orders/pk-write", row).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        read_note(&g.primary, &g.key, 1).await.1,
        json!("still replicated")
    );
}

// The node-to-node transport's messages, as postcard numbers them
// (datanode/src/cluster/frame.rs): what the hostile peer test sends.
const WELCOME: u8 = 1;
const REFUSED: u8 = 2;
const GREET_RELAY: u8 = 13;
const GREET_FORWARD: u8 = 14;
const REQUEST: u8 = 15;
const ANSWER: u8 = 16;
const GREET_RELAY_SQL: u8 = 19;
/// The transport's version, the first field of every greeting.
const TRANSPORT_VERSION: u8 = 1;

/// Writes `message` as a frame: its length, little-endian, then it.
async fn send_frame(peer: &mut tokio::net::TcpStream, message: &[u8]) {
    use tokio::io::AsyncWriteExt;
    let mut frame = (message.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(message);
    peer.write_all(&frame).await.unwrap();
}

/// The next frame's message.
async fn read_frame(peer: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let len = tokio::time::timeout(GUARD, peer.read_u32_le())
        .await
        .unwrap()
        .unwrap();
    let mut message = vec![0; len as usize];
    peer.read_exact(&mut message).await.unwrap();
    message
}

/// A connection to `node`'s peer port greeted as node `as_node` with
/// `kind` of greeting and `secret`.
async fn greet_peer(node: &Shoal, kind: u8, as_node: u32, secret: &[u8]) -> tokio::net::TcpStream {
    greet_peer_as(node, kind, TRANSPORT_VERSION, as_node, secret).await
}

/// `greet_peer` by a node of transport version `version`.
async fn greet_peer_as(
    node: &Shoal,
    kind: u8,
    version: u8,
    as_node: u32,
    secret: &[u8],
) -> tokio::net::TcpStream {
    let mut peer = tokio::net::TcpStream::connect(&node.peer_addr)
        .await
        .unwrap();
    let mut greeting = vec![kind, version, as_node as u8, 0, 1, secret.len() as u8];
    greeting.extend_from_slice(secret);
    send_frame(&mut peer, &greeting).await;
    peer
}

/// `greet_peer` with the cluster secret: welcomed.
async fn welcomed_peer(node: &Shoal, kind: u8, as_node: u32) -> tokio::net::TcpStream {
    let mut peer = greet_peer(node, kind, as_node, CLUSTER_SECRET.as_bytes()).await;
    assert_eq!(read_frame(&mut peer).await.first(), Some(&WELCOME));
    peer
}

/// The node id `node` was started with.
fn id_of(node: &Shoal, dirs: &[tempfile::TempDir]) -> u32 {
    if node.data_dir == dirs[0].path() {
        1
    } else {
        2
    }
}

#[tokio::test]
async fn a_node_killed_under_writes_loses_nothing_and_comes_back_caught_up() {
    let g = group().await;
    let Group {
        cp,
        primary,
        backup,
        key,
        dirs,
        ..
    } = g;
    // Writes through both nodes, every acknowledgement recorded.
    let mut acked = Vec::new();
    let mut next = 0i64;
    for _ in 0..200 {
        next += 1;
        let via = if next % 2 == 0 { &primary } else { &backup };
        if insert(via, &key, next).await {
            acked.push(next);
        }
    }
    assert_eq!(acked.len(), 200, "no failure before the kill");
    // Kill the node that serves the database's writes.
    let survivor_id = id_of(&backup, &dirs);
    let (dead_id, survivor) = (id_of(&primary, &dirs), backup);
    primary.kill();
    let killed = std::time::Instant::now();
    let mut failed = 0;
    let mut first_success = None;
    for _ in 0..2000 {
        next += 1;
        if insert(&survivor, &key, next).await {
            acked.push(next);
            first_success.get_or_insert(killed.elapsed());
            if acked.len() >= 400 {
                break;
            }
        } else {
            failed += 1;
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
    let took = first_success.expect("the survivor takes writes again");
    println!(
        "failover: first write on the survivor {took:?} after the kill; {failed} failed meanwhile"
    );
    assert!(took < GUARD);
    let view = in_view(&survivor, 1).await;
    assert_eq!(view["members"], json!([survivor_id]), "{view}");
    for &id in &acked {
        assert_eq!(
            read_note(&survivor, &key, id).await,
            (StatusCode::OK, json!(format!("order {id}"))),
            "acknowledged write {id} is on the survivor"
        );
    }
    // Back on its own disk, the node is caught up and let into the view.
    let back = node(&cp, dead_id, dirs[(dead_id - 1) as usize].path(), &[]);
    settled(&back).await;
    settled(&survivor).await;
    for &id in &acked {
        assert_eq!(
            read_note(&back, &key, id).await.1,
            json!(format!("order {id}")),
            "acknowledged write {id} is on the node back"
        );
    }
    // And it is a replica again: a write through it is on both.
    let (status, body) = data_call(
        &back,
        &key,
        "shop/orders/pk-write",
        json!({"row": {"id": 1, "note": "again"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(read_note(&survivor, &key, 1).await.1, json!("again"));
    assert_eq!(orders_memory(&back).await, orders_memory(&survivor).await);
}

/// Writes row `id` of `shop.orders` through `node`: whether it was
/// acknowledged.
async fn insert(node: &Shoal, key: &str, id: i64) -> bool {
    insert_in(node, key, "shop", id).await
}

/// Both nodes hold every id of `acked` as written, and use the same
/// memory for it.
async fn both_hold(nodes: &[Option<Shoal>; 2], key: &str, acked: &[i64]) {
    let [a, b] = nodes.each_ref().map(|n| n.as_ref().expect("both nodes up"));
    for node in [a, b] {
        all_there(node, key, acked).await;
    }
    assert_eq!(orders_memory(a).await, orders_memory(b).await);
}

/// Every id in `acked` reads back from `node` as written.
async fn all_there(node: &Shoal, key: &str, acked: &[i64]) {
    let in_shop: Vec<(&str, i64)> = acked.iter().map(|&id| ("shop", id)).collect();
    all_there_in(node, key, &in_shop).await;
}

fn signal(node: &Shoal, which: &str) {
    let status = std::process::Command::new("kill")
        .args([which, &node.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn a_paused_primary_is_replaced_and_acknowledges_nothing_of_its_old_view() {
    let g = group().await;
    let (paused, survivor, key) = (&g.primary, &g.backup, &g.key);
    let mut acked = Vec::new();
    for id in 1..=100 {
        let via = if id % 2 == 0 { paused } else { survivor };
        assert!(
            insert(via, key, id).await,
            "write {id} before the pause\n{}\n{}",
            paused.stderr(),
            survivor.stderr()
        );
        acked.push(id);
    }
    signal(paused, "-STOP");
    let stopped = std::time::Instant::now();
    let mut id = 1000;
    let took = loop {
        id += 1;
        if insert(survivor, key, id).await {
            acked.push(id);
            break stopped.elapsed();
        }
        assert!(stopped.elapsed() < GUARD, "the survivor never took over");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    println!("pause: first write on the survivor {took:?} after SIGSTOP");
    for _ in 0..50 {
        id += 1;
        assert!(insert(survivor, key, id).await);
        acked.push(id);
    }
    // Paused for 5 s in all, as a long stall would.
    let pause = std::time::Duration::from_secs(5);
    tokio::time::sleep(pause.saturating_sub(stopped.elapsed())).await;
    // Back from its pause, the old primary acknowledges nothing of its old
    // view: a write through it is refused — or, once it is back in the
    // view, acknowledged and on the survivor too.
    signal(paused, "-CONT");
    let mut through_old = Vec::new();
    for _ in 0..20 {
        id += 1;
        if insert(paused, key, id).await {
            through_old.push(id);
        }
    }
    settled(paused).await;
    settled(survivor).await;
    all_there(survivor, key, &acked).await;
    all_there(survivor, key, &through_old).await;
    all_there(paused, key, &acked).await;
    all_there(paused, key, &through_old).await;
    assert_eq!(orders_memory(paused).await, orders_memory(survivor).await);
}

#[tokio::test]
async fn across_a_partition_exactly_one_side_acknowledges_writes() {
    let cuts = tempfile::tempdir().unwrap();
    let cut = |id: u32| cuts.path().join(format!("cut-{id}"));
    let g = group_with(|id| {
        vec![(
            "SHOAL_FAILPOINT_PEER_CUT".to_owned(),
            cut(id).display().to_string(),
        )]
    })
    .await;
    let (a, b, key) = (&g.primary, &g.backup, &g.key);
    let mut acked = Vec::new();
    for id in 1..=50 {
        assert!(insert(if id % 2 == 0 { a } else { b }, key, id).await);
        acked.push(id);
    }
    // Cut the nodes off from each other; both still reach the arbitrator.
    let a_id = id_of(a, &g.dirs);
    std::fs::write(cut(a_id), b"").unwrap();
    // Once the arbitrator has decided, one side serves and the other not.
    let health = |node: &Shoal| {
        let url = format!("{}/0.1.0/health", node.rest_url);
        async move {
            reqwest::get(url)
                .await
                .is_ok_and(|r| r.status() == StatusCode::OK)
        }
    };
    let (winner, loser) = eventually("one side goes on", || async {
        match (health(a).await, health(b).await) {
            (true, false) if in_view(a, 1).await["members"].as_array().unwrap().len() == 1 => {
                Some((a, b))
            }
            (false, true) if in_view(b, 1).await["members"].as_array().unwrap().len() == 1 => {
                Some((b, a))
            }
            _ => None,
        }
    })
    .await;
    let mut id = 1000;
    for _ in 0..30 {
        id += 1;
        assert!(
            !insert(loser, key, id).await,
            "the losing side acknowledged write {id}"
        );
        id += 1;
        assert!(
            insert(winner, key, id).await,
            "the winning side refused write {id}"
        );
        acked.push(id);
    }
    // Healed: the losing side is caught up and both hold every write.
    std::fs::remove_file(cut(a_id)).unwrap();
    settled(a).await;
    settled(b).await;
    all_there(a, key, &acked).await;
    all_there(b, key, &acked).await;
}

/// `shoal demo --data-nodes 2 --replicas 2` as a user runs it, killed
/// with -9 twenty times under load — one node each time, alternating, so
/// the database's primary every other time — and each time started again
/// by the demo's angel on its disk and caught up. Every write acknowledged
/// reads back from both nodes at the end, only requests that were with the
/// killed node fail (retryably), and the survivor acknowledges writes soon
/// after each kill (the time is printed; benchmarks.md has it).
#[tokio::test]
async fn twenty_kills_of_a_demo_cluster_lose_no_acknowledged_write() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let mut demo = Shoal::start(&common::DEMO_CLUSTER);
    demo.wait_for("written to");
    let demo_json = demo.data_dir.join("demo.json");
    let listed =
        || -> Value { serde_json::from_slice(&std::fs::read(&demo_json).unwrap()).unwrap() };
    let first = listed();
    let secret = std::fs::read_to_string(first["cluster_secret_file"].as_str().unwrap()).unwrap();
    let secret = secret.trim().to_owned();
    let key = first["tenant"]["api_key"].as_str().unwrap().to_owned();
    let nodes: Vec<DemoNode> = (first["data_nodes"].as_array().unwrap().iter())
        .map(|n| DemoNode {
            rest_url: n["rest_url"].as_str().unwrap().to_owned(),
            internal_url: n["internal_url"].as_str().unwrap().to_owned(),
        })
        .collect();
    // The tenant's table for the load, made through the control plane.
    let http = reqwest::Client::new();
    let login = json!({"email": first["tenant"]["email"], "password": first["tenant"]["password"]});
    let api = first["api_url"].as_str().unwrap();
    let token: Value = (http
        .post(format!("{api}/auth/login"))
        .json(&login)
        .send()
        .await)
        .unwrap()
        .json()
        .await
        .unwrap();
    let made = http
        .post(format!("{api}/databases/demo/tables"))
        .bearer_auth(token["token"].as_str().unwrap())
        .json(&orders())
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    for node in &nodes {
        node.settled(&secret).await;
    }
    let pid_of = |i: usize| listed()["data_nodes"][i]["pid"].as_u64();
    let mut acked = Vec::new();
    let (mut failovers, mut failed) = (Vec::new(), Vec::new());
    for cycle in 0..20 {
        let dead = cycle % 2;
        let survivor = &nodes[1 - dead];
        let pid = pid_of(dead).expect("the node runs");
        let load = Load::start_in(
            "demo",
            &survivor.rest_url,
            &key,
            (cycle as i64 + 1) * 100_000_000,
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let killed = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let at = std::time::Instant::now();
        // The angel starts it again a second later; it is caught up.
        eventually("the angel starts the node again", || async {
            pid_of(dead).filter(|&now| now != pid)
        })
        .await;
        for node in &nodes {
            node.settled(&secret).await;
        }
        let (written, refused) = load.stop().await;
        let first = (written.iter())
            .filter(|w| w.sent >= at)
            .map(|w| w.answered - at)
            .min()
            .unwrap_or_else(|| panic!("cycle {cycle}: the survivor acknowledged no write"));
        failovers.push(first);
        acked.extend(written.iter().map(|w| ("demo", w.id)));
        failed.extend(refused);
    }
    failovers.sort();
    println!(
        "20 kills: first write on the survivor p50 {:?}, max {:?}; {} writes acknowledged, {} failed",
        failovers[failovers.len() / 2],
        failovers[failovers.len() - 1],
        acked.len(),
        failed.len()
    );
    // Only requests that were with the killed node fail, and retryably.
    for f in &failed {
        assert!(
            f.contains("503")
                && (f.contains("PRIMARY_CHANGED")
                    || f.contains("PRIMARY_UNAVAILABLE")
                    || f.contains("NOT_REPLICATED")),
            "a failure that is not a request in flight on the killed node: {f}"
        );
    }
    for node in &nodes {
        all_there_at(&node.rest_url, &key, &acked).await;
    }
    assert_eq!(
        nodes[0].orders_memory(&secret).await,
        nodes[1].orders_memory(&secret).await,
        "the replicas use the same memory"
    );
    let (status, _) = demo.terminate();
    assert_eq!(status, Some(0));
}

/// A data node the demo runs, as demo.json lists it.
struct DemoNode {
    rest_url: String,
    internal_url: String,
}

impl DemoNode {
    async fn internal(&self, secret: &str, path: &str) -> Option<Value> {
        let r = (reqwest::Client::new().get(format!("{}{path}", self.internal_url)))
            .bearer_auth(secret)
            .send()
            .await
            .ok()?;
        r.status().is_success().then_some(())?;
        r.json().await.ok()
    }

    /// Waits until the node serves, with both nodes in its view and every
    /// primary with its own node.
    async fn settled(&self, secret: &str) {
        eventually(
            "both nodes in the view, each with its primaries",
            || async {
                let group = self.internal(secret, "/internal/v1/group").await?;
                let view = &group["view"];
                let health = reqwest::get(format!("{}/0.1.0/health", self.rest_url)).await;
                let serving = health.is_ok_and(|r| r.status() == StatusCode::OK);
                (view["members"].as_array().map(Vec::len) == Some(2)
                    && view["moved"] == json!([])
                    && serving)
                    .then_some(())
            },
        )
        .await;
    }

    /// The node's `table_memory_usage` row of `demo.orders`.
    async fn orders_memory(&self, secret: &str) -> Value {
        let rows = self
            .internal(secret, "/internal/v1/ndbinfo/table_memory_usage")
            .await;
        (rows.expect("ndbinfo answers")["rows"]
            .as_array()
            .unwrap()
            .iter())
        .find(|r| r[0] == "demo" && r[1] == "orders")
        .map_or(Value::Null, used)
    }
}

/// Writes row `id` of `db.orders` through `node`: whether it was
/// acknowledged. Anything but an acknowledgement or a retryable refusal
/// fails the test.
async fn insert_in(node: &Shoal, key: &str, db: &str, id: i64) -> bool {
    let row = json!({"row": {"id": id, "note": format!("order {id}")}});
    let r = reqwest::Client::new()
        .post(format!("{}/0.1.0/{db}/orders/pk-insert", node.rest_url))
        .header("X-API-KEY", key)
        .timeout(std::time::Duration::from_secs(10))
        .json(&row)
        .send()
        .await;
    match r {
        Ok(r) if r.status() == StatusCode::OK => true,
        Ok(r) if r.status() == StatusCode::SERVICE_UNAVAILABLE => {
            println!(
                "write {db} {id} refused: {}",
                r.text().await.unwrap_or_default()
            );
            false
        }
        Ok(r) => panic!(
            "write {db} {id}: {} {}",
            r.status(),
            r.text().await.unwrap_or_default()
        ),
        Err(e) => {
            println!("write {db} {id} failed: {e:?}");
            false
        }
    }
}

/// Waits until `node` sees all `members` nodes in its view, each serving
/// its own primaries.
async fn settled_with(node: &Shoal, members: usize) {
    eventually("every node is back with its primaries", || async {
        let view = in_view(node, members).await;
        (view["moved"] == json!([])).then_some(())
    })
    .await;
}

/// The three databases of the group-of-three test, a primary on each
/// node.
const THREE: [&str; 3] = ["north", "south", "west"];

/// Writes 30 rows, spread over the databases of `THREE` and over `via`,
/// each retried until acknowledged: the (database, id) written.
async fn write_round(via: &[&Shoal], key: &str, next: &mut i64) -> Vec<(&'static str, i64)> {
    let mut acked = Vec::new();
    for _ in 0..30 {
        *next += 1;
        let id = *next;
        let db = THREE[id as usize % THREE.len()];
        let node = via[(id as usize / THREE.len()) % via.len()];
        eventually("a write is acknowledged", || async {
            insert_in(node, key, db, id).await.then_some(())
        })
        .await;
        acked.push((db, id));
    }
    acked
}

/// Every (database, id) of `acked` reads back from `node` as written.
async fn all_there_in(node: &Shoal, key: &str, acked: &[(&str, i64)]) {
    all_there_at(&node.rest_url, key, acked).await;
}

/// Every (database, id) in `acked` reads back through `rest_url` as written.
async fn all_there_at(rest_url: &str, key: &str, acked: &[(&str, i64)]) {
    // A batch of reads at a time (at most 1000 operations to a request).
    for chunk in acked.chunks(1000) {
        let operations: Vec<Value> = (chunk.iter())
            .map(|(db, id)| {
                json!({"method": "POST", "relative-url": format!("{db}/orders/pk-read"),
                       "body": {"filters": [{"column": "id", "value": id}]}})
            })
            .collect();
        // Reads held back by the database's read rate (429) are read again.
        let body = eventually("the reads within the database's read rate", || async {
            let r = (reqwest::Client::new().post(format!("{rest_url}/0.1.0/batch")))
                .header("X-API-KEY", key)
                .json(&json!({"operations": operations}))
                .send()
                .await
                .unwrap();
            let status = r.status();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            if status == StatusCode::TOO_MANY_REQUESTS {
                return None;
            }
            assert_eq!(status, StatusCode::OK, "{body}");
            let throttled = (body["result"].as_array().unwrap().iter()).any(|a| a["code"] == 429);
            (!throttled).then_some(body)
        })
        .await;
        for ((db, id), answer) in chunk.iter().zip(body["result"].as_array().unwrap()) {
            assert_eq!(
                (&answer["code"], &answer["body"]["data"]["note"]),
                (&json!(200), &json!(format!("order {id}"))),
                "acknowledged write {id} of {db} on {rest_url}"
            );
        }
    }
}

/// `node`'s `table_memory_usage` rows of the `THREE` databases.
async fn three_memory(node: &Shoal) -> Vec<Value> {
    let rows = node.ndbinfo("table_memory_usage").await["rows"].clone();
    let mut ours: Vec<Value> = (rows.as_array().unwrap().iter())
        .filter(|r| THREE.iter().any(|db| r[0] == *db))
        .map(used)
        .collect();
    ours.sort_by_key(|r| r.to_string());
    ours
}

#[tokio::test]
async fn a_group_of_three_survives_two_failures_and_takes_both_back() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let cp = Control::start_with(
        Backend::Sqlite,
        &["--cluster-secret", CLUSTER_SECRET, "--replicas", "3"],
    );
    let ada = cp.signup("ada@example.com", "analytical").await;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes: Vec<Option<Shoal>> = (0..3u32)
        .map(|i| Some(node(&cp, i + 1, dirs[i as usize].path(), &[])))
        .collect();
    let mut primaries = Vec::new();
    for db in THREE {
        let created = eventually("the group of three forms", || async {
            let (status, _, body) = post(&cp, &ada, "/databases", json!({"name": db})).await;
            (status == StatusCode::CREATED).then_some(body)
        })
        .await;
        assert_eq!(
            created["nodes"].as_array().map(Vec::len),
            Some(3),
            "{created}"
        );
        primaries.push(created["node_id"].as_u64().unwrap());
        let path = format!("/databases/{db}/tables");
        let (status, _, body) = post(&cp, &ada, &path, orders()).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    primaries.sort();
    assert_eq!(primaries, [1, 2, 3], "primaries spread over the group");
    let grants: Vec<Value> = (THREE.iter())
        .map(|db| json!({"database": db, "role": "read_write"}))
        .collect();
    let body = json!({"name": "app", "grants": grants});
    let (status, _, body) = post(&cp, &ada, "/api-keys", body).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let key = body["key"].as_str().unwrap().to_owned();
    for node in nodes.iter().flatten() {
        settled_with(node, 3).await;
    }
    let mut next = 0;
    let all: Vec<&Shoal> = nodes.iter().flatten().collect();
    let mut acked = write_round(&all, &key, &mut next).await;
    // Two nodes die at once; the third serves all three databases.
    let survivor = nodes[0].take().unwrap();
    for node in &mut nodes[1..] {
        node.take().unwrap().kill();
    }
    let view = in_view(&survivor, 1).await;
    assert_eq!(view["members"], json!([1]), "{view}");
    acked.extend(write_round(&[&survivor], &key, &mut next).await);
    all_there_in(&survivor, &key, &acked).await;
    // Both come back on their disks, one after the other, with writes
    // between: the second is caught up by two nodes, each copying the
    // primaries it holds.
    nodes[0] = Some(survivor);
    for i in 1..3 {
        nodes[i] = Some(node(&cp, i as u32 + 1, dirs[i].path(), &[]));
        for node in nodes.iter().flatten() {
            in_view(node, i + 1).await;
        }
        let up: Vec<&Shoal> = nodes.iter().flatten().collect();
        acked.extend(write_round(&up, &key, &mut next).await);
    }
    for node in nodes.iter().flatten() {
        settled_with(node, 3).await;
    }
    let all: Vec<&Shoal> = nodes.iter().flatten().collect();
    acked.extend(write_round(&all, &key, &mut next).await);
    for node in &all {
        all_there_in(node, &key, &acked).await;
    }
    let first = three_memory(all[0]).await;
    assert_eq!(first.len(), 3, "{first:?}");
    for node in &all[1..] {
        assert_eq!(
            three_memory(node).await,
            first,
            "replicas use the same memory"
        );
    }
}

/// Writers under load through one node: each writes its own ids, one
/// request at a time, until stopped (or `MAX_EACH` writes, or `GUARD`).
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    writers: Vec<tokio::task::JoinHandle<(Vec<Acked>, Vec<String>)>>,
}

/// A write the load had acknowledged: its id, when it was sent and when
/// the answer came.
#[derive(Debug, Clone, Copy)]
struct Acked {
    id: i64,
    sent: std::time::Instant,
    answered: std::time::Instant,
}

impl Load {
    const WRITERS: i64 = 4;
    const MAX_EACH: usize = 5_000;

    /// Starts the writers of `shop.orders` through `url`; ids from `base` on.
    fn start(url: &str, key: &str, base: i64) -> Load {
        Load::start_in("shop", url, key, base)
    }

    /// Starts the writers of `db.orders` through `url`; ids from `base` on.
    fn start_in(db: &str, url: &str, key: &str, base: i64) -> Load {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers = (0..Self::WRITERS)
            .map(|w| {
                let (url, key, stop) = (url.to_owned(), key.to_owned(), stop.clone());
                let path = format!("{url}/0.1.0/{db}/orders/pk-insert");
                tokio::spawn(async move {
                    let http = reqwest::Client::new();
                    let started = std::time::Instant::now();
                    let (mut acked, mut failed) = (Vec::new(), Vec::new());
                    for n in 0..Self::MAX_EACH as i64 {
                        if stop.load(std::sync::atomic::Ordering::Relaxed)
                            || started.elapsed() > GUARD
                        {
                            break;
                        }
                        let id = base + w * 1_000_000 + n;
                        let row = json!({"row": {"id": id, "note": format!("order {id}")}});
                        let sent = std::time::Instant::now();
                        let r = (http.post(&path))
                            .header("X-API-KEY", &key)
                            .timeout(std::time::Duration::from_secs(10))
                            .json(&row)
                            .send()
                            .await;
                        match r {
                            Ok(r) if r.status() == StatusCode::OK => acked.push(Acked {
                                id,
                                sent,
                                answered: std::time::Instant::now(),
                            }),
                            Ok(r) => {
                                let status = r.status();
                                failed.push(format!(
                                    "{id}: {status} {}",
                                    r.text().await.unwrap_or_default()
                                ));
                            }
                            Err(e) => failed.push(format!("{id}: {e}")),
                        }
                    }
                    (acked, failed)
                })
            })
            .collect();
        Load { stop, writers }
    }

    /// Stops the writers: every write acknowledged, and every failure.
    async fn stop(self) -> (Vec<Acked>, Vec<String>) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (mut acked, mut failed) = (Vec::new(), Vec::new());
        for writer in self.writers {
            let (a, f) = writer.await.unwrap();
            acked.extend(a);
            failed.extend(f);
        }
        (acked, failed)
    }
}

#[tokio::test]
async fn a_rolling_restart_under_load_fails_no_request_on_the_other_node() {
    let g = group().await;
    let (cp, key, dirs) = (&g.cp, &g.key, &g.dirs);
    let (primary, backup) = (g.primary, g.backup);
    let ids = [id_of(&primary, dirs), id_of(&backup, dirs)];
    let mut nodes = [Some(primary), Some(backup)];
    let mut acked = Vec::new();
    let fresh = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    // Each node in turn, stopped (SIGTERM) and started again while writers
    // load the other: the primary on its own disk, the other node on an
    // empty one, the primary again on an empty one.
    for (turn, (restart, empty)) in [(0usize, false), (1, true), (0, true)]
        .into_iter()
        .enumerate()
    {
        let going = nodes[restart].take().unwrap();
        let other = nodes[1 - restart].as_ref().unwrap();
        let load = Load::start(&other.rest_url, key, (turn as i64 + 1) * 100_000_000);
        // Some load before the restart.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let id = ids[restart];
        let (code, _) = going.terminate();
        assert_eq!(code, Some(0));
        let dir = match empty {
            false => dirs[(id - 1) as usize].path(),
            true => fresh[turn - 1].path(),
        };
        let back = node(cp, id, dir, &[]);
        settled(&back).await;
        settled(other).await;
        let (written, failed) = load.stop().await;
        println!(
            "restart {turn} (node {id}, {} disk): {} writes acknowledged by the other node, {} failed",
            if empty { "an empty" } else { "its own" },
            written.len(),
            failed.len()
        );
        assert!(written.len() > 10, "the load ran: {}", written.len());
        assert!(
            failed.is_empty(),
            "requests on the other node failed: {failed:?}\n{}\n{}",
            other.stderr(),
            back.stderr()
        );
        acked.extend(written.iter().map(|w| w.id));
        nodes[restart] = Some(back);
    }
    both_hold(&nodes, key, &acked).await;
}

/// `--replicas 1` with two data nodes: two node groups of one. Two
/// databases made one after the other go one to each group (the memory
/// the nodes report has not moved in between), and a node's
/// `ndb$table_memory_usage` rows carry its own node id and node group.
#[tokio::test]
async fn with_one_replica_two_nodes_are_two_node_groups_named_in_ndbinfo() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let cp = Control::start_with(Backend::Sqlite, &["--cluster-secret", CLUSTER_SECRET]);
    let ada = cp.signup("ada@example.com", "analytical").await;
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let nodes = [
        node(&cp, 1, dirs[0].path(), &[]),
        node(&cp, 2, dirs[1].path(), &[]),
    ];
    for (i, node) in nodes.iter().enumerate() {
        eventually("each node in its node group", || async {
            let (status, group) = node.send(Method::GET, "/internal/v1/group", None).await;
            (status == StatusCode::OK && group["node_group"] == json!(i)).then_some(())
        })
        .await;
    }
    let mut placed = Vec::new();
    for db in ["north", "south"] {
        let (status, _, created) = post(&cp, &ada, "/databases", json!({"name": db})).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let path = format!("/databases/{db}/tables");
        let (status, _, body) = post(&cp, &ada, &path, orders()).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        placed.push((created["node_group"].clone(), created["node_id"].clone()));
    }
    placed.sort_by_key(|p| p.0.to_string());
    assert_eq!(
        placed,
        [(json!(0), json!(1)), (json!(1), json!(2))],
        "one database on each group of one"
    );
    for (i, node) in nodes.iter().enumerate() {
        let rows = eventually("the node holds its database's fragments", || async {
            let rows = node.ndbinfo("ndb$table_memory_usage").await["rows"].clone();
            let rows = rows.as_array().cloned().unwrap_or_default();
            (!rows.is_empty()).then_some(rows)
        })
        .await;
        for row in &rows {
            assert_eq!(
                (&row[2], &row[7]),
                (&json!(i), &json!(i + 1)),
                "nodegroup_id and node_id on node {}: {row}",
                i + 1
            );
        }
    }
    // A client of a database that the other group serves is told where:
    // 421 over REST (single requests, batches, transactions), WRONGGROUP
    // over Redis, with that group's addresses — before any key is looked
    // at, and nothing done.
    let key = api_key_for(&cp, &ada, &["north", "south"]).await;
    let held_by_group_1 = rows_of(&nodes[1]).await;
    let (there, here) = match held_by_group_1.iter().any(|d| d == "north") {
        true => ("south", "north"),
        false => ("north", "south"),
    };
    let [node_0, node_1] = &nodes;
    let body = json!({"row": {"id": 1, "note": "misdirected"}});
    for (path, body) in [
        (format!("{there}/orders/pk-write"), body.clone()),
        (
            "batch".into(),
            json!({"operations": [{"method": "POST", "relative-url": format!("{there}/orders/pk-write"), "body": body}]}),
        ),
        (
            "transaction".into(),
            json!({"operations": [{"method": "POST", "relative-url": format!("{there}/orders/pk-write"), "body": body}]}),
        ),
    ] {
        let (status, answer) = eventually("the directory reaches the node", || async {
            let (status, answer) = data_call(node_1, &key, &path, body.clone()).await;
            (status == StatusCode::MISDIRECTED_REQUEST).then_some((status, answer))
        })
        .await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{answer}");
        assert_eq!(code(&answer), "WRONG_NODE_GROUP", "{answer}");
        assert_eq!(answer["error"]["node_group"], 0, "{answer}");
        assert_eq!(
            answer["error"]["nodes"],
            json!([{"node_id": 1, "rest_url": node_0.rest_url, "resp_addr": node_0.resp_addr}]),
            "{answer}"
        );
    }
    // Its own database it serves as before; the other's is where it was.
    let (status, answer) = data_call(
        node_1,
        &key,
        &format!("{here}/orders/pk-write"),
        body.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let read = json!({"filters": [{"column": "id", "value": 1}]});
    let (status, answer) = data_call(node_0, &key, &format!("{there}/orders/pk-read"), read).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing written: {answer}");
    let refused = {
        use std::io::{BufRead, Write};
        let mut resp = std::net::TcpStream::connect(&node_1.resp_addr).unwrap();
        resp.write_all(format!("AUTH {there} {key}\r\n").as_bytes())
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(resp).read_line(&mut line).unwrap();
        line
    };
    assert!(
        refused.starts_with(&format!(
            "-WRONGGROUP database '{there}' is served by node group 0"
        )) && refused.contains(&node_0.resp_addr),
        "{refused}"
    );
}

/// The databases `node` holds.
async fn rows_of(node: &Shoal) -> Vec<String> {
    let (_, databases) = node.send(Method::GET, "/internal/v1/databases", None).await;
    (databases.as_array().into_iter().flatten())
        .map(|d| d["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A read-write key granted `databases`.
async fn api_key_for(cp: &Control, who: &Session, databases: &[&str]) -> String {
    let grants: Vec<Value> = (databases.iter())
        .map(|db| json!({"database": db, "role": "read_write"}))
        .collect();
    let (status, _, body) = post(
        cp,
        who,
        "/api-keys",
        json!({"name": "both", "grants": grants}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["key"].as_str().unwrap().to_owned()
}

/// A Redis client that pipelines `SET`s and an `INCR` over one connection
/// and reads their one-line replies: what was acknowledged, what was
/// answered `TRYAGAIN`, and anything else, which ends it.
struct RedisLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Replies taken so far, acknowledgements and refusals together.
    replies: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Failures so far.
    failures: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Why the load ended before it was stopped, as soon as it did.
    broke: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    writer: std::thread::JoinHandle<RedisLoadEnd>,
}

#[derive(Debug, Default)]
struct RedisLoadEnd {
    /// Keys whose `SET` was acknowledged.
    set: Vec<u64>,
    incr_acked: u64,
    incr_failed: u64,
    /// Each `TRYAGAIN` reply, with the number of replies before it.
    tryagain: Vec<(usize, String)>,
    /// Why the load ended before it was stopped, if it did.
    broke: Option<String>,
}

impl RedisLoad {
    const PIPELINE: u64 = 8;

    /// Starts the load on `addr`, authenticated to `shop` with `key`.
    fn start(addr: &str, key: &str) -> RedisLoad {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let replies = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let failures = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (addr, key) = (addr.to_owned(), key.to_owned());
        let (stopping, counted, failing) = (stop.clone(), replies.clone(), failures.clone());
        let broke = std::sync::Arc::new(std::sync::Mutex::new(None));
        let broke_at = broke.clone();
        let writer = std::thread::spawn(move || {
            let end = Self::run(&addr, &key, &stopping, &counted, &failing);
            (*broke_at.lock().unwrap()).clone_from(&end.broke);
            end
        });
        RedisLoad {
            stop,
            replies,
            failures,
            broke,
            writer,
        }
    }

    /// The load itself, until it is stopped (or breaks).
    fn run(
        addr: &str,
        key: &str,
        stopping: &std::sync::atomic::AtomicBool,
        counted: &std::sync::atomic::AtomicUsize,
        failing: &std::sync::atomic::AtomicUsize,
    ) -> RedisLoadEnd {
        use std::io::{BufRead, Write};
        use std::sync::atomic::Ordering::Relaxed;
        let mut end = RedisLoadEnd::default();
        let stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        let mut line = String::new();
        let mut read_line = |line: &mut String| {
            line.clear();
            match reader.read_line(line) {
                Ok(0) => Err("the connection closed".to_owned()),
                Ok(_) => Ok(line.trim_end().to_owned()),
                Err(e) => Err(e.to_string()),
            }
        };
        let auth = format!(
            "*3\r\n$4\r\nAUTH\r\n${}\r\nshop\r\n${}\r\n{key}\r\n",
            4,
            key.len()
        );
        writer.write_all(auth.as_bytes()).unwrap();
        assert_eq!(read_line(&mut line).unwrap(), "+OK");
        let started = std::time::Instant::now();
        let mut next = 0u64;
        for _ in 0..50_000 {
            if stopping.load(Relaxed) || started.elapsed() > GUARD {
                break;
            }
            let mut pipeline = String::new();
            for k in next..next + Self::PIPELINE {
                let key = format!("k{k}");
                pipeline += &format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$1\r\nv\r\n", key.len());
            }
            pipeline += "*2\r\n$4\r\nINCR\r\n$7\r\ncounter\r\n";
            if let Err(e) = writer.write_all(pipeline.as_bytes()) {
                end.broke = Some(e.to_string());
                return end;
            }
            for reply in 0..=Self::PIPELINE {
                let line = match read_line(&mut line) {
                    Ok(line) => line,
                    Err(e) => {
                        end.broke = Some(e);
                        return end;
                    }
                };
                let n = counted.fetch_add(1, Relaxed);
                let incr = reply == Self::PIPELINE;
                if line == "+OK" && !incr {
                    end.set.push(next + reply);
                } else if line.starts_with(':') && incr {
                    end.incr_acked += 1;
                } else if line.starts_with("-TRYAGAIN ") {
                    failing.fetch_add(1, Relaxed);
                    end.incr_failed += u64::from(incr);
                    end.tryagain.push((n, line));
                } else {
                    end.broke = Some(format!("answered {line:?}"));
                    return end;
                }
            }
            next += Self::PIPELINE;
        }
        end
    }

    fn replies(&self) -> usize {
        self.replies.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn failures(&self) -> usize {
        self.failures.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until `more` replies past `from` have come (the load goes on).
    async fn past(&self, from: usize, more: usize) {
        eventually("the Redis load goes on", || async {
            assert!(
                !self.writer.is_finished(),
                "the Redis load ended early: {:?}",
                self.broke.lock().unwrap()
            );
            (self.replies() >= from + more).then_some(())
        })
        .await;
    }

    fn stop(self) -> RedisLoadEnd {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.writer.join().unwrap()
    }
}

/// A Redis client connected to the backup keeps its connection while the
/// database's primary is killed and while it comes back and takes its
/// primaries again: only the commands that were with the killed node are
/// answered `TRYAGAIN`; every acknowledged write is there. A transaction
/// queued on the killed node is lost whole: its connection is closed and
/// nothing of it is applied.
#[tokio::test]
async fn a_redis_connection_through_the_backup_outlives_its_primary() {
    let g = group().await;
    let Group {
        cp,
        primary,
        backup,
        key,
        dirs,
        ..
    } = g;
    let url = format!("redis://shop:{key}@{}/", backup.resp_addr);
    let mut queued = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let load = RedisLoad::start(&backup.resp_addr, &key);
    load.past(0, 500).await;
    assert_eq!(load.failures(), 0, "no failure before the kill");
    // A transaction queued on the primary when it dies.
    let () = redis::cmd("MULTI").query(&mut queued).unwrap();
    let queued_reply: String = redis::cmd("SET")
        .arg("tx")
        .arg("1")
        .query(&mut queued)
        .unwrap();
    assert_eq!(queued_reply, "QUEUED");

    let dead_id = id_of(&primary, &dirs);
    primary.kill();
    let at_kill = load.replies();
    load.past(at_kill, 1000).await;
    let failed_at_failover = load.failures();
    println!("failover: {failed_at_failover} commands answered TRYAGAIN");
    let exec: redis::RedisResult<Vec<String>> = redis::cmd("EXEC").query(&mut queued);
    assert!(
        exec.is_err(),
        "EXEC of a transaction lost with its node: {exec:?}"
    );

    // Back on its disk, the node is caught up and given its primaries back
    // while the load goes on through the other node: nothing fails.
    let back = node(&cp, dead_id, dirs[(dead_id - 1) as usize].path(), &[]);
    settled(&back).await;
    settled(&backup).await;
    let at_back = load.replies();
    load.past(at_back, 1000).await;
    let end = load.stop();
    assert_eq!(end.broke, None, "the connection went on: {end:?}");
    let late: Vec<_> = (end.tryagain.iter())
        .filter(|(n, _)| *n >= at_kill + 1000)
        .collect();
    assert!(late.is_empty(), "nothing fails once failed over: {late:?}");
    assert_eq!(end.tryagain.len(), failed_at_failover);

    // Every acknowledged write is on the node back, which is the primary
    // again, and on the other node.
    let mut on_back = redis::Client::open(format!("redis://shop:{key}@{}/", back.resp_addr))
        .unwrap()
        .get_connection()
        .unwrap();
    for chunk in end.set.chunks(500) {
        let keys: Vec<String> = chunk.iter().map(|k| format!("k{k}")).collect();
        let values: Vec<Option<String>> =
            redis::cmd("MGET").arg(&keys).query(&mut on_back).unwrap();
        assert!(
            values.iter().all(|v| v.as_deref() == Some("v")),
            "an acknowledged SET is lost"
        );
    }
    let counter: u64 = redis::cmd("GET")
        .arg("counter")
        .query(&mut on_back)
        .unwrap();
    assert!(
        (end.incr_acked..=end.incr_acked + end.incr_failed).contains(&counter),
        "counter {counter}: {} INCRs acknowledged, {} in doubt",
        end.incr_acked,
        end.incr_failed
    );
    let tx: Option<String> = redis::cmd("GET").arg("tx").query(&mut on_back).unwrap();
    assert_eq!(tx, None, "nothing of the lost transaction is applied");
    assert_eq!(shop_memory(&back).await, shop_memory(&backup).await);
}

/// The `table_memory_usage` rows of every table of `shop` on `node`.
async fn shop_memory(node: &Shoal) -> Vec<Value> {
    let rows = node.ndbinfo("table_memory_usage").await;
    let mut shop: Vec<Value> = (rows["rows"].as_array().unwrap().iter())
        .filter(|r| r[0] == "shop")
        .map(used)
        .collect();
    shop.sort_by_key(|r| r[1].to_string());
    shop
}

/// A database's rates hold across its group: clients spread over both
/// nodes, reading (served by each node from its own replica) and writing
/// (sent on to the primary) as fast as they are let, are admitted no more
/// than the database's rates allow over the run — within 10% of rate ×
/// time + burst — whatever node each request reaches.
#[tokio::test]
async fn a_databases_rates_hold_across_its_group() {
    const READS: f64 = 200.0;
    const WRITES: f64 = 100.0;
    const RUN: std::time::Duration = std::time::Duration::from_secs(4);
    let g = group().await;
    let (status, headers, body) = g.cp.login(OPERATOR, OPERATOR_PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let operator = common::control::session(&headers, body);
    let tenant = g.ada.user["tenant"]["id"].as_str().unwrap().to_owned();
    let quota = json!({"read_units_per_sec": READS as u32, "write_units_per_sec": WRITES as u32, "burst_seconds": 1});
    let (status, _, body) =
        g.cp.call(
            Method::PUT,
            &format!("/admin/tenants/{tenant}/databases/shop/quota"),
            Some(&quota),
            Auth::Bearer(&operator.token),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for node in [&g.primary, &g.backup] {
        let (status, on_node) = node
            .send(Method::GET, "/internal/v1/databases/shop/quota", None)
            .await;
        assert_eq!(
            (status, &on_node["quota"]["read_units_per_sec"]),
            (StatusCode::OK, &json!(READS as u32)),
            "{on_node}"
        );
    }
    assert!(insert(&g.primary, &g.key, 1).await);
    // Let the burst the seeding write used fill up again.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;

    let started = std::time::Instant::now();
    let mut clients = Vec::new();
    for node in [&g.primary, &g.backup] {
        for n in 0..12 {
            let url = node.rest_url.clone();
            let key = g.key.clone();
            let reading = n % 3 != 0;
            clients.push(tokio::spawn(async move {
                let http = reqwest::Client::new();
                let (mut admitted, mut throttled) = (0u64, 0u64);
                for i in 0..100_000i64 {
                    if started.elapsed() >= RUN {
                        break;
                    }
                    let (path, body) = if reading {
                        (
                            "pk-read",
                            json!({"filters": [{"column": "id", "value": 1}]}),
                        )
                    } else {
                        let id = 1_000_000 * (n + 1) + i;
                        ("pk-write", json!({"row": {"id": id, "note": "n"}}))
                    };
                    let r = (http.post(format!("{url}/0.1.0/shop/orders/{path}")))
                        .header("X-API-KEY", &key)
                        .json(&body)
                        .send()
                        .await
                        .unwrap();
                    match r.status() {
                        StatusCode::OK => admitted += 1,
                        StatusCode::TOO_MANY_REQUESTS => throttled += 1,
                        other => panic!("{path}: {other} {}", r.text().await.unwrap()),
                    }
                }
                (reading, admitted, throttled)
            }));
        }
    }
    let (mut reads, mut writes, mut refused) = (0u64, 0u64, 0u64);
    for client in clients {
        let (reading, admitted, throttled) = client.await.unwrap();
        *if reading { &mut reads } else { &mut writes } += admitted;
        refused += throttled;
    }
    let took = started.elapsed().as_secs_f64();
    let allowed = |rate: f64| rate * took + rate;
    println!(
        "rates over both nodes in {took:.2} s: {reads} reads admitted of {:.0} allowed ({:.2}), {writes} writes of {:.0} ({:.2}), {refused} throttled",
        allowed(READS),
        reads as f64 / allowed(READS),
        allowed(WRITES),
        writes as f64 / allowed(WRITES),
    );
    assert!(refused > 0, "the clients asked for more than the rates");
    assert!(
        reads as f64 <= 1.1 * allowed(READS),
        "{reads} reads admitted in {took:.2} s at {READS}/s"
    );
    assert!(
        writes as f64 <= 1.1 * allowed(WRITES),
        "{writes} writes admitted in {took:.2} s at {WRITES}/s"
    );
    // Both nodes admitted reads, each from its own replica; only the
    // primary admitted writes (the backup sent them on).
    let (p, b) = (shop_usage(&g.primary).await, shop_usage(&g.backup).await);
    assert!(
        p[3].as_u64().unwrap() > 0 && b[3].as_u64().unwrap() > 0,
        "{p} {b}"
    );
    let seeded = 1;
    assert_eq!(
        (p[4].as_u64().unwrap(), &b[4]),
        (writes + seeded, &json!(0)),
        "{p} {b}"
    );
}

/// The rows the last "caught a node up" line of `node`'s log says it
/// copied.
fn rows_caught_up(node: &Shoal) -> u64 {
    let log = node.stderr();
    let line = (log.lines().rev())
        .find(|l| l.contains("caught a node up"))
        .unwrap_or_else(|| panic!("no catch-up in the log:\n{log}"));
    let rows = line.split("rows=").nth(1).expect("rows= in the line");
    let digits: String = rows.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}

/// Runs `ops` as one REST batch through `node`; every answer 200 or, for
/// a read of a row not there, 404: the bodies.
async fn batch(node: &Shoal, key: &str, ops: Vec<Value>) -> Vec<Value> {
    let answer = common::client()
        .post(format!("{}/0.1.0/batch", node.rest_url))
        .header("X-API-KEY", key)
        .json(&json!({ "operations": ops }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let answers: Value = answer.json().await.unwrap();
    let answers: Vec<Value> = serde_json::from_value(answers["result"].clone()).unwrap();
    answers
        .into_iter()
        .map(|a| {
            assert!(a["code"] == 200 || a["code"] == 404, "{a}");
            a["body"].clone()
        })
        .collect()
}

/// `shop.orders` as `node` has it for ids `from..to`: each note, or null.
async fn notes(node: &Shoal, key: &str, ids: std::ops::Range<i64>) -> Vec<Value> {
    let mut notes = Vec::new();
    let ids: Vec<i64> = ids.collect();
    for chunk in ids.chunks(500) {
        let reads = (chunk.iter())
            .map(|id| json!({"method": "POST", "relative-url": "shop/orders/pk-read", "body": {"filters": [{"column": "id", "value": id}]}}))
            .collect();
        notes
            .extend((batch(node, key, reads).await.into_iter()).map(|b| b["data"]["note"].clone()));
    }
    notes
}

/// A node back on its own disk after a short absence is sent only the
/// buckets of rows that changed meanwhile; on an empty disk, every row.
/// Either way it ends with every row as the other node has it.
#[tokio::test]
async fn a_node_back_on_its_disk_is_sent_what_changed_and_on_an_empty_one_everything() {
    // Enough that, back on an empty disk, the node names thousands of
    // buckets of a fragment in one answer.
    const ROWS: i64 = 20_000;
    let g = group().await;
    let Group {
        cp,
        primary,
        backup,
        key,
        dirs,
        ..
    } = g;
    let write = |ids: std::ops::Range<i64>, note: &'static str| {
        ids.map(move |id| json!({"method": "POST", "relative-url": "shop/orders/pk-write", "body": {"row": {"id": id, "note": note}}}))
            .collect::<Vec<_>>()
    };
    for start in (0..ROWS).step_by(500) {
        batch(&primary, &key, write(start..start + 500, "first")).await;
    }
    let id = id_of(&backup, &dirs);
    backup.kill();
    // While it is away: 20 rows added, 20 changed, 20 deleted.
    batch(&primary, &key, write(ROWS..ROWS + 20, "added")).await;
    batch(&primary, &key, write(100..120, "changed")).await;
    let deletes = (200..220)
        .map(|id| json!({"method": "POST", "relative-url": "shop/orders/pk-delete", "body": {"filters": [{"column": "id", "value": id}]}}))
        .collect();
    batch(&primary, &key, deletes).await;

    let back = node(&cp, id, dirs[(id - 1) as usize].path(), &[]);
    settled(&back).await;
    settled(&primary).await;
    let sent = rows_caught_up(&primary);
    println!("back on its disk: {sent} rows of {ROWS} sent");
    assert!(
        sent < ROWS as u64 / 3,
        "{sent} rows sent to a node that had most"
    );
    let all = 0..ROWS + 20;
    let expected = notes(&primary, &key, all.clone()).await;
    assert_eq!(expected[100], json!("changed"));
    assert_eq!(expected[200], Value::Null);
    assert_eq!(notes(&back, &key, all.clone()).await, expected);
    assert_eq!(orders_memory(&back).await, orders_memory(&primary).await);

    // On an empty disk, every row goes.
    back.kill();
    let empty = tempfile::tempdir().unwrap();
    let back = node(&cp, id, empty.path(), &[]);
    settled(&back).await;
    settled(&primary).await;
    let sent = rows_caught_up(&primary);
    println!("back on an empty disk: {sent} rows sent");
    assert!(
        sent >= ROWS as u64,
        "{sent} rows sent to a node that had none"
    );
    assert_eq!(notes(&back, &key, all).await, expected);
    assert_eq!(orders_memory(&back).await, orders_memory(&primary).await);
}

/// Every row of `shop.orders` in the order of index `by_note`, scanned
/// through `node` page by page: each row's id.
async fn by_note(node: &Shoal, key: &str) -> Vec<i64> {
    let mut body = json!({"index": "by_note", "limit": 70});
    let mut ids = Vec::new();
    for _ in 0..1000 {
        let (status, page) = data_call(node, key, "shop/orders/scan", body.clone()).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        ids.extend((page["data"].as_array().unwrap().iter()).map(|r| r["id"].as_i64().unwrap()));
        match &page["next"] {
            Value::Null => return ids,
            next => body["after"] = next.clone(),
        }
    }
    panic!("the scan never ended")
}

/// Per note from 'note 0100' on, the rows and the sum of their ids, as a
/// RonSQL query over the `by_note` range answers on `node`.
async fn ronsql_by_note(node: &Shoal, key: &str) -> Value {
    let query = "SELECT note, COUNT(*) AS n, SUM(id) AS s FROM orders \
                 WHERE note >= 'note 0100' GROUP BY note ORDER BY note";
    ronsql(node, key, query).await
}

/// A RonSQL query's answer over `shop` on `node`, which must succeed.
async fn ronsql(node: &Shoal, key: &str, query: &str) -> Value {
    let (status, answer) = data_call(
        node,
        key,
        "ronsql",
        json!({"query": query, "database": "shop"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

/// What `ronsql_by_note` should answer for `written`.
fn by_note_expected(written: &std::collections::BTreeMap<i64, String>) -> Value {
    let mut groups: std::collections::BTreeMap<&String, (i64, i64)> = Default::default();
    for (id, note) in written
        .iter()
        .filter(|(_, note)| note.as_str() >= "note 0100")
    {
        let g = groups.entry(note).or_default();
        g.0 += 1;
        g.1 += id;
    }
    Value::Array(
        (groups.into_iter())
            .map(|(note, (n, s))| json!({"note": note, "n": n, "s": s}))
            .collect(),
    )
}

/// Row `id` of `shop.orders` with a note that sorts apart from its id,
/// noted in `written`.
fn note_row(written: &mut std::collections::BTreeMap<i64, String>, id: i64) -> Value {
    let note = format!("note {:04}", (id * 37) % 500);
    written.insert(id, note.clone());
    json!({"row": {"id": id, "note": note}})
}

/// Writes rows `ids` of `shop.orders` through the two nodes in turn, each
/// acknowledged, noted in `written`.
async fn write_notes(
    via: [&Shoal; 2],
    key: &str,
    written: &mut std::collections::BTreeMap<i64, String>,
    ids: std::ops::Range<i64>,
) {
    for id in ids {
        let node = via[(id % 2) as usize];
        let row = note_row(written, id);
        let (status, body) = data_call(node, key, "shop/orders/pk-write", row).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

/// The ids of `written` (id → note) in the order of their notes, then ids.
fn in_note_order(written: &std::collections::BTreeMap<i64, String>) -> Vec<i64> {
    let mut rows: Vec<(&String, i64)> = written.iter().map(|(id, note)| (note, *id)).collect();
    rows.sort();
    rows.into_iter().map(|(_, id)| id).collect()
}

#[tokio::test]
async fn an_index_scans_and_aggregates_alike_on_either_replica_and_after_its_primary_dies() {
    let g = group().await;
    let Group {
        cp,
        ada,
        primary,
        backup,
        key,
        read_key,
        dirs,
        ..
    } = g;
    let mut written = std::collections::BTreeMap::new();
    write_notes([&primary, &backup], &key, &mut written, 0..150).await;
    // Added while the table holds rows, on both nodes of the group.
    let index = json!({"name": "by_note", "columns": ["note"]});
    let (status, _, body) = post(&cp, &ada, "/databases/shop/tables/orders/indexes", index).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    write_notes([&primary, &backup], &key, &mut written, 150..300).await;
    let want = in_note_order(&written);
    assert_eq!(by_note(&primary, &read_key).await, want);
    assert_eq!(
        by_note(&backup, &read_key).await,
        want,
        "the backup keeps the index too"
    );
    // Aggregated in either node's workers, over the index's range: alike.
    let groups = by_note_expected(&written);
    assert_eq!(ronsql_by_note(&primary, &read_key).await, groups);
    assert_eq!(ronsql_by_note(&backup, &read_key).await, groups);

    // The primary dies; the survivor takes writes and scans them in order.
    let dead_id = id_of(&primary, &dirs);
    primary.kill();
    let survivor = backup;
    for id in 300..400 {
        let body = note_row(&mut written, id);
        eventually("the survivor takes the write", || async {
            let (status, _) =
                data_call(&survivor, &key, "shop/orders/pk-write", body.clone()).await;
            (status == StatusCode::OK).then_some(())
        })
        .await;
    }
    let want = in_note_order(&written);
    assert_eq!(by_note(&survivor, &read_key).await, want);
    let groups = by_note_expected(&written);
    assert_eq!(ronsql_by_note(&survivor, &read_key).await, groups);
    // Back from its own disk and caught up, the dead node scans the same.
    let back = node(&cp, dead_id, dirs[(dead_id - 1) as usize].path(), &[]);
    settled(&back).await;
    settled(&survivor).await;
    assert_eq!(by_note(&back, &read_key).await, want);
    assert_eq!(ronsql_by_note(&back, &read_key).await, groups);
}

/// Rows of a table of `shop`, counted by RonSQL on `node`.
async fn count_rows(node: &Shoal, key: &str, table: &str) -> i64 {
    let answer = ronsql(node, key, &format!("SELECT COUNT(*) AS n FROM {table}")).await;
    answer[0]["n"].as_i64().unwrap()
}

#[tokio::test]
async fn a_hash_of_rows_is_written_read_and_deleted_through_either_node() {
    let g = group().await;
    let url = |node: &Shoal| format!("redis://shop:{}@{}/", g.key, node.resp_addr);
    let connect = |node: &Shoal| {
        redis::Client::open(url(node))
            .unwrap()
            .get_connection()
            .unwrap()
    };
    let (mut on_primary, mut on_backup) = (connect(&g.primary), connect(&g.backup));
    // Grown past one value through the backup, a command at a time.
    for chunk in 0..8 {
        let mut cmd = redis::cmd("HSET");
        cmd.arg("big");
        for i in chunk * 50..(chunk + 1) * 50 {
            cmd.arg(format!("f{i:03}")).arg(format!("v{i}"));
        }
        let added: i64 = cmd.query(&mut on_backup).unwrap();
        assert_eq!(added, 50);
    }
    // Both replicas hold the rows, and either node answers by field and
    // whole — also the backup, which has never seen the table of values'
    // parts (no value here needs one), and reads its keys all the same.
    for node in [&g.primary, &g.backup] {
        let len: i64 = redis::cmd("HLEN")
            .arg("big")
            .query(&mut connect(node))
            .unwrap();
        assert_eq!(count_rows(node, &g.key, "redis_fields").await, 400);
        assert_eq!(len, 400, "a new connection to {}", node.resp_addr);
    }
    for (which, c) in [("primary", &mut on_primary), ("backup", &mut on_backup)] {
        let len: i64 = redis::cmd("HLEN").arg("big").query(c).unwrap();
        assert_eq!(len, 400, "{which}");
        let v: String = redis::cmd("HGET").arg("big").arg("f123").query(c).unwrap();
        assert_eq!(v, "v123");
        let all: std::collections::HashMap<String, String> =
            redis::cmd("HGETALL").arg("big").query(c).unwrap();
        assert_eq!(all.len(), 400);
        assert_eq!(all["f399"], "v399");
    }
    // Deleted through the backup: its rows go on both replicas.
    let deleted: i64 = redis::cmd("DEL").arg("big").query(&mut on_backup).unwrap();
    assert_eq!(deleted, 1);
    for node in [&g.primary, &g.backup] {
        eventually("the hash's rows are deleted on every replica", || async {
            (count_rows(node, &g.key, "redis_fields").await == 0).then_some(())
        })
        .await;
    }
    let len: i64 = redis::cmd("HLEN")
        .arg("big")
        .query(&mut on_primary)
        .unwrap();
    assert_eq!(len, 0);
}
