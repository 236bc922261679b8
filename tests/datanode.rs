//! `shoal datanode` as a process: its internal API, its cluster secret, its
//! ndbinfo tables, what it does with hostile input, and how it stops.

mod common;

use common::Shoal;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn node() -> Shoal {
    Shoal::start(&[
        "datanode",
        "--data-memory",
        "64M",
        "--ldm-threads",
        "2",
        "--node-id",
        "7",
    ])
}

async fn error_of(r: reqwest::Response) -> (StatusCode, String) {
    let status = r.status();
    let body: Value = r
        .json()
        .await
        .unwrap_or_else(|e| panic!("error body is JSON: {e}"));
    let code = body["error"]["code"]
        .as_str()
        .expect("error.code")
        .to_owned();
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    (status, code)
}

#[tokio::test]
async fn the_internal_api_needs_the_cluster_secret() {
    let shoal = node();
    let secret = shoal.secret();
    assert_eq!(
        secret.len(),
        64,
        "a generated secret is 32 random bytes in hex"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(shoal.data_dir.join("cluster-secret"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "only the owner may read the secret");
    }
    let c = common::client();
    let health: Value = c
        .get(shoal.url("/internal/v1/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health, json!({"status": "ok", "node_id": 7}));

    let url = shoal.url("/internal/v1/ndbinfo/memoryusage");
    let r = c.get(&url).send().await.unwrap();
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    assert_eq!(
        error_of(r).await,
        (StatusCode::UNAUTHORIZED, "UNAUTHENTICATED".into())
    );
    for wrong in [
        &secret[..63],
        &format!("{secret}x"),
        "",
        &"a".repeat(10_000),
        &secret.to_uppercase(),
    ] {
        let r = c.get(&url).bearer_auth(wrong).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "secret {wrong:.20}…");
    }
    let r = c
        .get(&url)
        .header("authorization", format!("Basic {secret}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = c
        .post(shoal.url("/internal/v1/databases"))
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "writes need the secret too"
    );

    let (code, stderr) = shoal.terminate();
    assert!(!stderr.contains(&secret), "the secret is never logged");
    assert_eq!(code, Some(0));
}

#[tokio::test]
async fn ndbinfo_follows_databases_and_tables_created_over_the_internal_api() {
    let shoal = node();
    let c = common::client();
    let secret = shoal.secret();

    let memory = shoal.ndbinfo("memoryusage").await;
    assert_eq!(
        memory["columns"],
        json!([
            "node_id",
            "memory_type",
            "used",
            "total",
            "used_pages",
            "total_pages"
        ])
    );
    assert_eq!(
        memory["rows"],
        json!([[7, "Data memory", 0, 64 << 20, 0, 2048]])
    );

    let r = c
        .post(shoal.url("/internal/v1/databases"))
        .bearer_auth(&secret)
        .json(&json!({"name": "shop"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let table = json!({
        "name": "orders",
        "columns": [
            {"name": "id", "type": "BIGINT UNSIGNED"},
            {"name": "customer", "type": "varchar(64)"},
            {"name": "total", "type": "DECIMAL(10,2)", "nullable": true}
        ],
        "primary_key": ["id"]
    });
    let r = c
        .post(shoal.url("/internal/v1/databases/shop/tables"))
        .bearer_auth(&secret)
        .json(&table)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let created: Value = r.json().await.unwrap();
    assert_eq!(
        created["table"]["columns"][1]["type"], "VARCHAR(64)",
        "types come back canonical"
    );
    assert_eq!(created["fragments"], 4, "2 x LDM threads by default");
    let id = created["id"].as_u64().unwrap();

    let map = shoal.ndbinfo("ndb$table_map").await;
    assert_eq!(map["rows"], json!([[id, "shop", "orders"]]));
    let raw = shoal.ndbinfo("ndbinfo.ndb$table_memory_usage").await;
    let rows = raw["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "one row per fragment");
    for (n, row) in rows.iter().enumerate() {
        assert_eq!(
            row,
            &json!([id, n, 0, 0, 0, 0, 0, 7]),
            "an empty fragment holds no pages"
        );
    }
    let tables = shoal.ndbinfo("table_memory_usage").await;
    assert_eq!(tables["rows"], json!([["shop", "orders", 0, 0, 0, 0]]));
    let dbs = shoal.ndbinfo("database_memory_usage").await;
    assert_eq!(dbs["rows"], json!([["shop", 0, 0, 0, 0]]));
    let units = shoal.ndbinfo("table_usage").await;
    let row = units["rows"][0].as_array().unwrap();
    assert_eq!(units["rows"].as_array().unwrap().len(), 1, "{units}");
    assert_eq!(
        (&row[0], &row[1], &row[3], &row[4]),
        (&json!("shop"), &json!("orders"), &json!(0), &json!(0)),
        "nothing used yet"
    );

    let list: Value = shoal.get_json("/internal/v1/ndbinfo").await;
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "ndbinfo.ndb$table_map",
            "ndbinfo.ndb$table_memory_usage",
            "ndbinfo.table_memory_usage",
            "ndbinfo.database_memory_usage",
            "ndbinfo.memoryusage",
            "ndbinfo.database_quota_usage",
            "ndbinfo.table_usage",
            "ndbinfo.nodes"
        ]
    );

    let r = c
        .delete(shoal.url("/internal/v1/databases/shop/tables/orders"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(shoal.ndbinfo("ndb$table_map").await["rows"], json!([]));
    let r = c
        .delete(shoal.url("/internal/v1/databases/shop"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let list: Value = shoal.get_json("/internal/v1/databases").await;
    assert_eq!(list, json!([]));
}

#[tokio::test]
async fn hostile_input_gets_a_clear_error_and_changes_nothing() {
    let shoal = node();
    let c = common::client();
    let secret = shoal.secret();
    let post = |path: &str| c.post(shoal.url(path)).bearer_auth(&secret);
    post("/internal/v1/databases")
        .json(&json!({"name": "app"}))
        .send()
        .await
        .unwrap();
    let good =
        json!({"name": "t", "columns": [{"name": "id", "type": "INT"}], "primary_key": ["id"]});
    post("/internal/v1/databases/app/tables")
        .json(&good)
        .send()
        .await
        .unwrap();
    let before: Value = shoal.get_json("/internal/v1/databases").await;

    let tables = "/internal/v1/databases/app/tables";
    let cases: Vec<(&str, reqwest::RequestBuilder, StatusCode, &str)> = vec![
        ("malformed JSON", post(tables).header("content-type", "application/json").body("{\"name\": "), StatusCode::BAD_REQUEST, "BAD_REQUEST"),
        ("not JSON", post(tables).body("name=t"), StatusCode::UNSUPPORTED_MEDIA_TYPE, "BAD_REQUEST"),
        ("unknown field", post(tables).json(&json!({"name": "u", "columns": [{"name": "id", "type": "INT"}], "primary_key": ["id"], "engine": "innodb"})), StatusCode::BAD_REQUEST, "BAD_REQUEST"),
        ("bad table name", post(tables).json(&json!({"name": "../etc", "columns": [{"name": "id", "type": "INT"}], "primary_key": ["id"]})), StatusCode::BAD_REQUEST, "BAD_REQUEST"),
        ("long table name", post(tables).json(&json!({"name": "x".repeat(64), "columns": [{"name": "id", "type": "INT"}], "primary_key": ["id"]})), StatusCode::BAD_REQUEST, "BAD_REQUEST"),
        ("unknown type", post(tables).json(&json!({"name": "u", "columns": [{"name": "id", "type": "INT; DROP TABLE t"}], "primary_key": ["id"]})), StatusCode::BAD_REQUEST, "BAD_REQUEST"),
        ("huge varchar", post(tables).json(&json!({"name": "u", "columns": [{"name": "id", "type": "INT"}, {"name": "v", "type": "VARCHAR(30000)"}], "primary_key": ["id"]})), StatusCode::BAD_REQUEST, "INVALID_SCHEMA"),
        ("no key", post(tables).json(&json!({"name": "u", "columns": [{"name": "id", "type": "INT"}], "primary_key": []})), StatusCode::BAD_REQUEST, "INVALID_SCHEMA"),
        ("nullable key", post(tables).json(&json!({"name": "u", "columns": [{"name": "id", "type": "INT", "nullable": true}], "primary_key": ["id"]})), StatusCode::BAD_REQUEST, "INVALID_SCHEMA"),
        ("too many columns", post(tables).json(&json!({"name": "u", "columns": (0..513).map(|i| json!({"name": format!("c{i}"), "type": "TINYINT"})).collect::<Vec<_>>(), "primary_key": ["c0"]})), StatusCode::BAD_REQUEST, "INVALID_SCHEMA"),
        ("existing table", post(tables).json(&good), StatusCode::CONFLICT, "TABLE_EXISTS"),
        ("no such database", post("/internal/v1/databases/nope/tables").json(&good), StatusCode::NOT_FOUND, "NO_SUCH_DATABASE"),
        ("escaped database", post("/internal/v1/databases/a%20b%00/tables").json(&good), StatusCode::NOT_FOUND, "NO_SUCH_DATABASE"),
        ("dot segments", post("/internal/v1/databases/%2e%2e/tables").json(&good), StatusCode::NOT_FOUND, "NOT_FOUND"),
        ("reserved database", post("/internal/v1/databases").json(&json!({"name": "ndbinfo"})), StatusCode::BAD_REQUEST, "INVALID_NAME"),
        ("unicode database", post("/internal/v1/databases").json(&json!({"name": "dåtå"})), StatusCode::BAD_REQUEST, "INVALID_NAME"),
        ("empty database", post("/internal/v1/databases").json(&json!({"name": ""})), StatusCode::BAD_REQUEST, "INVALID_NAME"),
        ("number as name", post("/internal/v1/databases").json(&json!({"name": 5})), StatusCode::BAD_REQUEST, "BAD_REQUEST"),
        ("existing database", post("/internal/v1/databases").json(&json!({"name": "app"})), StatusCode::CONFLICT, "DATABASE_EXISTS"),
        ("existing database in capitals", post("/internal/v1/databases").json(&json!({"name": "APP"})), StatusCode::CONFLICT, "DATABASE_EXISTS"),
        ("drop missing table", c.delete(shoal.url("/internal/v1/databases/app/tables/nope")).bearer_auth(&secret), StatusCode::NOT_FOUND, "NO_SUCH_TABLE"),
        ("drop missing database", c.delete(shoal.url("/internal/v1/databases/nope")).bearer_auth(&secret), StatusCode::NOT_FOUND, "NO_SUCH_DATABASE"),
        ("unknown ndbinfo table", c.get(shoal.url("/internal/v1/ndbinfo/users")).bearer_auth(&secret), StatusCode::NOT_FOUND, "NO_SUCH_TABLE"),
        ("unknown route", c.get(shoal.url("/internal/v2/anything")).bearer_auth(&secret), StatusCode::NOT_FOUND, "NOT_FOUND"),
    ];
    for (what, request, status, code) in cases {
        let r = request.send().await.unwrap();
        assert_eq!(error_of(r).await, (status, code.to_owned()), "{what}");
    }
    // A body past the limit is refused: with 413, or, when the server answers
    // before the client has finished sending, by closing the connection.
    let r = post(tables)
        .header("content-type", "application/json")
        .body(vec![b' '; 2 << 20])
        .send()
        .await;
    if let Ok(r) = r {
        assert_eq!(
            error_of(r).await,
            (StatusCode::PAYLOAD_TOO_LARGE, "BAD_REQUEST".to_owned())
        );
    }
    // A header past what the server reads is refused without taking it down.
    let r = c
        .get(shoal.url("/internal/v1/healthz"))
        .header("x-junk", "j".repeat(1 << 20))
        .send()
        .await;
    assert!(
        r.map_or(true, |r| r.status().is_client_error()),
        "an oversized header is refused"
    );

    let after: Value = shoal.get_json("/internal/v1/databases").await;
    assert_eq!(before, after, "nothing changed");
    assert_eq!(shoal.ndbinfo("memoryusage").await["rows"][0][2], 0);
}

#[tokio::test]
async fn sigterm_stops_the_node_cleanly() {
    let shoal = node();
    let (code, _) = shoal.terminate();
    assert_eq!(code, Some(0));
}

#[tokio::test]
async fn bad_flags_are_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_shoal"))
            .args(args)
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--internal-port", "0"])
            .env_remove("SHOAL_CLUSTER_SECRET")
            .output()
            .unwrap()
    };
    for (args, says) in [
        (&["datanode", "--data-memory", "lots"][..], "not a size"),
        (
            &["datanode", "--data-memory", "1K"][..],
            "at least one page",
        ),
        (
            &["datanode", "--ldm-threads", "0"][..],
            "LDM threads must be 1 to 256",
        ),
        (
            &["datanode", "--cluster-secret", "short"][..],
            "at least 32 characters",
        ),
        (
            &["datanode", "--listen", "not-an-ip"][..],
            "invalid IP address",
        ),
        (
            &["datanode", "--spin-us", "1001"][..],
            "1001 is not in 0..=1000",
        ),
        (
            &["datanode", "--spin-us", "1.5"][..],
            "invalid value '1.5' for '--spin-us",
        ),
    ] {
        let out = run(args);
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    std::fs::write(dir.path().join("cluster-secret"), "too short").unwrap();
    let out = run(&["datanode"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cluster secret in"),
        "names the file"
    );
}
