//! Quotas of databases and tenants set on a running data node's internal
//! API, and what ndbinfo shows of them.

mod common;

use common::Shoal;
use reqwest::StatusCode;
use serde_json::{Value, json};

#[tokio::test]
async fn database_and_tenant_quotas_are_set_shown_and_cleared() {
    let shoal = Shoal::start(&["datanode", "--data-memory", "64M", "--ldm-threads", "2"]);
    let (status, _) = shoal
        .send(
            reqwest::Method::POST,
            "/internal/v1/databases",
            Some(json!({"name": "shop", "tenant": "acme"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    let quota = json!({"in_memory_bytes": 33554432, "write_units_per_sec": 500, "read_units_per_sec": 2000, "burst_seconds": 2, "max_transaction_ops": 100});
    let (status, body) = shoal
        .send(
            reqwest::Method::PUT,
            "/internal/v1/databases/shop/quota",
            Some(quota),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["database"], "shop");
    assert_eq!(body["tenant"], "acme");
    assert_eq!(body["quota"]["write_units_per_sec"], 500);
    assert_eq!(
        body["quota"]["max_parallel_transactions"],
        Value::Null,
        "unset limits are null"
    );
    assert_eq!(body["usage"]["in_memory_bytes"], 0);
    let (_, shown) = shoal
        .send(
            reqwest::Method::GET,
            "/internal/v1/databases/shop/quota",
            None,
        )
        .await;
    assert_eq!(shown["quota"], body["quota"]);

    let usage = shoal.ndbinfo("database_quota_usage").await;
    assert_eq!(
        usage["columns"],
        json!([
            "database_name",
            "in_memory_bytes",
            "in_memory_quota",
            "read_units",
            "write_units",
            "read_units_per_sec",
            "write_units_per_sec",
            "throttled_reads",
            "throttled_writes",
            "quota_rejections"
        ])
    );
    assert_eq!(
        usage["rows"],
        json!([["shop", 0, 33554432, 0, 0, 2000, 500, 0, 0, 0]])
    );

    // Bad quotas are refused and change nothing.
    for (bad, code) in [
        (json!({"write_units_per_sec": 0}), "INVALID_QUOTA"),
        (json!({"burst_seconds": 0}), "INVALID_QUOTA"),
        (json!({"burst_seconds": 100000}), "INVALID_QUOTA"),
        (json!({"max_transaction_ops": -1}), "BAD_REQUEST"),
        (json!({"write_units_per_sec": 1e12}), "BAD_REQUEST"),
        (json!({"in_memory_bytes": "1G"}), "BAD_REQUEST"),
        (json!({"rate": 5}), "BAD_REQUEST"),
        (json!([1, 2]), "BAD_REQUEST"),
    ] {
        let (status, body) = shoal
            .send(
                reqwest::Method::PUT,
                "/internal/v1/databases/shop/quota",
                Some(bad.clone()),
            )
            .await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "{bad}"
        );
    }
    let (status, body) = shoal
        .send(
            reqwest::Method::PUT,
            "/internal/v1/databases/nope/quota",
            Some(json!({})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("NO_SUCH_DATABASE"))
    );
    let (_, still) = shoal
        .send(
            reqwest::Method::GET,
            "/internal/v1/databases/shop/quota",
            None,
        )
        .await;
    assert_eq!(
        still["quota"]["write_units_per_sec"], 500,
        "the refused quotas changed nothing"
    );

    // The tenant: its memory bounds its databases together.
    let (status, body) = shoal
        .send(
            reqwest::Method::PUT,
            "/internal/v1/tenants/acme/quota",
            Some(json!({"in_memory_bytes": 1048576})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["usage"],
        json!({"in_memory_bytes": 0, "databases": ["shop"]})
    );
    let (status, body) = shoal
        .send(
            reqwest::Method::GET,
            "/internal/v1/tenants/nobody/quota",
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("NO_SUCH_TENANT"))
    );
    let (status, body) = shoal
        .send(
            reqwest::Method::PUT,
            "/internal/v1/tenants/bad%20id/quota",
            Some(json!({})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("INVALID_NAME"))
    );
    let (status, body) = shoal
        .send(
            reqwest::Method::POST,
            "/internal/v1/databases",
            Some(json!({"name": "x", "tenant": "no/slashes"})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("INVALID_NAME"))
    );

    // Clearing removes every limit.
    for path in [
        "/internal/v1/databases/shop/quota",
        "/internal/v1/tenants/acme/quota",
    ] {
        let (status, _) = shoal.send(reqwest::Method::DELETE, path, None).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let (_, body) = shoal.send(reqwest::Method::GET, path, None).await;
        assert!(
            body["quota"]
                .as_object()
                .unwrap()
                .values()
                .all(Value::is_null),
            "{body}"
        );
    }
    let usage = shoal.ndbinfo("database_quota_usage").await;
    assert_eq!(
        usage["rows"],
        json!([["shop", 0, null, 0, 0, null, null, 0, 0, 0]])
    );
}

/// `database_quota_usage`'s read and write units of `db`.
async fn units(shoal: &Shoal, db: &str) -> (u64, u64) {
    let usage = shoal.ndbinfo("database_quota_usage").await;
    let rows = usage["rows"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| r[0] == db)
        .expect("a row for the database");
    (row[3].as_u64().unwrap(), row[4].as_u64().unwrap())
}

/// `table_usage`'s read and write units of each table of `db`, by name.
async fn table_units(shoal: &Shoal, db: &str) -> std::collections::BTreeMap<String, (u64, u64)> {
    let usage = shoal.ndbinfo("table_usage").await;
    assert_eq!(
        usage["columns"],
        json!([
            "database_name",
            "table_name",
            "table_id",
            "read_units",
            "write_units",
            "node_id"
        ])
    );
    (usage["rows"].as_array().unwrap().iter())
        .filter(|r| r[0] == db)
        .map(|r| {
            let name = r[1].as_str().unwrap().to_owned();
            (name, (r[3].as_u64().unwrap(), r[4].as_u64().unwrap()))
        })
        .collect()
}

#[tokio::test]
async fn units_are_per_started_kib_of_the_values_written_and_4_kib_read() {
    let shoal = Shoal::start(&["datanode", "--data-memory", "64M"]);
    shoal.create_database("acme", "shop").await;
    let table = json!({"name": "blobs", "columns": [
        {"name": "k", "type": "BIGINT"}, {"name": "v", "type": "VARBINARY(8000)"}],
      "primary_key": ["k"]});
    let (status, body) = shoal
        .post("/internal/v1/databases/shop/tables", table)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let key = shoal.create_key("acme", &[("shop", "read_write")]).await;
    let rest = |op: &str, body: Value| {
        common::client()
            .post(format!("{}/0.1.0/shop/blobs/{op}", shoal.rest_url))
            .header("X-API-KEY", &key)
            .json(&body)
            .send()
    };
    use base64::Engine as _;
    let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![7u8; n]);
    // The key's 8 bytes and the value's: 1,024 bytes is one unit, 1,025 two.
    let mut written = 0;
    for (k, len, want) in [
        (1, 1016, 1),
        (2, 1017, 2),
        (3, 2040, 2),
        (4, 2041, 3),
        (5, 0, 1),
    ] {
        let r = rest("pk-insert", json!({"row": {"k": k, "v": b64(len)}}))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        written += want;
        assert_eq!(
            units(&shoal, "shop").await.1,
            written,
            "a value of {len} bytes"
        );
    }
    // Reads: per started 4,096 bytes (what a row costs past its first unit
    // is charged with the next read).
    for (k, len, want) in [(10, 4088, 1), (11, 4089, 2)] {
        let r = rest("pk-insert", json!({"row": {"k": k, "v": b64(len)}}))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let before = units(&shoal, "shop").await.0;
        let read = json!({"filters": [{"column": "k", "value": k}]});
        assert_eq!(
            rest("pk-read", read).await.unwrap().status(),
            StatusCode::OK
        );
        let missing = json!({"filters": [{"column": "k", "value": 999}]});
        assert_eq!(
            rest("pk-read", missing).await.unwrap().status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            units(&shoal, "shop").await.0 - before,
            want + 1,
            "a row of {len} bytes"
        );
    }

    // Each table is charged its share: with one table, all of it.
    let blobs = units(&shoal, "shop").await;
    assert_eq!(table_units(&shoal, "shop").await["blobs"], blobs);
    let table = json!({"name": "notes", "columns": [
        {"name": "k", "type": "BIGINT"}, {"name": "v", "type": "VARCHAR(100)"}],
      "primary_key": ["k"]});
    let (status, body) = shoal
        .post("/internal/v1/databases/shop/tables", table)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let notes = |op: &str, body: Value| {
        common::client()
            .post(format!("{}/0.1.0/shop/notes/{op}", shoal.rest_url))
            .header("X-API-KEY", &key)
            .json(&body)
            .send()
    };
    for k in 1..=3 {
        let r = notes("pk-insert", json!({"row": {"k": k, "v": "x"}}))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    let read = json!({"filters": [{"column": "k", "value": 2}]});
    assert_eq!(
        notes("pk-read", read).await.unwrap().status(),
        StatusCode::OK
    );
    let by_table = table_units(&shoal, "shop").await;
    assert_eq!(
        by_table["blobs"], blobs,
        "another table's work is not this one's"
    );
    assert_eq!(by_table["notes"], (1, 3));
    // A query reads every row it examines: charged to its table.
    let query = json!({"query": "SELECT COUNT(*) AS n FROM notes", "database": "shop"});
    let r = common::client()
        .post(format!("{}/0.1.0/ronsql", shoal.rest_url))
        .header("X-API-KEY", &key)
        .json(&query)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    let by_table = table_units(&shoal, "shop").await;
    assert_eq!(by_table["notes"], (1 + 3, 3));
    // Together, exactly the database's counters.
    let database = units(&shoal, "shop").await;
    let summed = (by_table.values()).fold((0, 0), |(r, w), t| (r + t.0, w + t.1));
    assert_eq!(summed, database);
}
