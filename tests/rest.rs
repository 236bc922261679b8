//! The REST data API through a real HTTP client: RonDB's request and
//! response shapes, API keys and grants, quotas, and bad input.

mod common;

use std::io::{Read, Write};

use common::Shoal;
use reqwest::StatusCode;
use serde_json::{Value, json};

const ITEMS: &str = r#"{"name": "items", "columns": [
    {"name": "id", "type": "BIGINT"},
    {"name": "name", "type": "VARCHAR(50)"},
    {"name": "price", "type": "DECIMAL(10,2)", "nullable": true},
    {"name": "data", "type": "VARBINARY(100)", "nullable": true},
    {"name": "day", "type": "DATE", "nullable": true}],
  "primary_key": ["id"]}"#;

/// A node with tenant `acme`'s databases `shop` and `lab`, tenant `other`'s
/// `rival`, each with an `items` table; and a read-write key on `shop`.
struct Setup {
    shoal: Shoal,
    key: String,
}

async fn setup(args: &[&str]) -> Setup {
    let mut all = vec!["datanode", "--data-memory", "64M"];
    all.extend_from_slice(args);
    let shoal = Shoal::start(&all);
    for (tenant, db) in [("acme", "shop"), ("acme", "lab"), ("other", "rival")] {
        shoal.create_database(tenant, db).await;
        let def: Value = serde_json::from_str(ITEMS).unwrap();
        let (status, body) = shoal
            .post(&format!("/internal/v1/databases/{db}/tables"), def)
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let key = shoal.create_key("acme", &[("shop", "read_write")]).await;
    Setup { shoal, key }
}

impl Setup {
    async fn call(&self, key: Option<&str>, path: &str, body: Value) -> (StatusCode, Value) {
        self.raw(key, path, body.to_string()).await
    }

    async fn raw(&self, key: Option<&str>, path: &str, body: String) -> (StatusCode, Value) {
        let mut request = common::client()
            .post(format!("{}/0.1.0/{path}", self.shoal.rest_url))
            .header("content-type", "application/json")
            .body(body);
        if let Some(key) = key {
            request = request.header("X-API-KEY", key);
        }
        let r = request.send().await.unwrap();
        let status = r.status();
        let bytes = r.bytes().await.unwrap();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, body)
    }

    async fn op(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Some(&self.key), path, body).await
    }

    async fn read(&self, id: i64) -> (StatusCode, Value) {
        self.op(
            "shop/items/pk-read",
            json!({"filters": [{"column": "id", "value": id}]}),
        )
        .await
    }
}

fn item(id: i64) -> Value {
    json!({"row": {"id": id, "name": format!("item {id}"), "price": "9.99"}})
}

#[tokio::test]
async fn ping_and_health_need_no_key() {
    let s = setup(&[]).await;
    for path in ["ping", "health"] {
        let r = reqwest::get(format!("{}/0.1.0/{path}", s.shoal.rest_url))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn every_single_row_operation_round_trips_its_values() {
    let s = setup(&[]).await;
    let row = json!({"row": {"id": 1, "name": "Ada", "price": "12.50",
        "data": "AAEC/w==", "day": "2024-02-29"}});
    assert_eq!(
        s.op("shop/items/pk-insert", row.clone()).await,
        (StatusCode::OK, json!({"outcome": "inserted"}))
    );
    let (status, body) = s
        .op(
            "shop/items/pk-read",
            json!({"filters": [{"column": "id", "value": 1}], "operationId": "op-7"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // As RonDB: every column but the key's, which the filters give.
    assert_eq!(
        body,
        json!({"operationId": "op-7", "data": {"name": "Ada", "price": 12.5,
            "data": "AAEC/w==", "day": "2024-02-29"}})
    );
    // readColumns answers just those columns.
    let (_, body) = s
        .op(
            "shop/items/pk-read",
            json!({"filters": [{"column": "id", "value": 1}],
                   "readColumns": [{"column": "name"}, {"column": "data", "dataReturnType": "default"}]}),
        )
        .await;
    assert_eq!(body, json!({"data": {"name": "Ada", "data": "AAEC/w=="}}));

    // Insert of an existing key: 409, the row unchanged.
    let (status, body) = s.op("shop/items/pk-insert", item(1)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "DUPLICATE_KEY");
    assert_eq!(body["error"]["number"], 630);
    assert_eq!(
        body["error"]["message"],
        "a row with primary key '1' already exists in table 'items'"
    );

    let (status, body) = s
        .op(
            "shop/items/pk-update",
            json!({"row": {"id": 1, "name": "Ada L."}}),
        )
        .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"outcome": "updated"}))
    );
    assert_eq!(s.read(1).await.1["data"]["name"], "Ada L.");
    assert_eq!(s.read(1).await.1["data"]["price"], 12.5);

    // Update of a missing row: 404.
    let (status, body) = s.op("shop/items/pk-update", item(2)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    // Write inserts, then updates.
    assert_eq!(
        s.op("shop/items/pk-write", item(2)).await.1,
        json!({"outcome": "inserted"})
    );
    assert_eq!(
        s.op("shop/items/pk-write", item(2)).await.1,
        json!({"outcome": "updated"})
    );

    let delete = json!({"filters": [{"column": "id", "value": 2}]});
    assert_eq!(
        s.op("shop/items/pk-delete", delete.clone()).await,
        (StatusCode::OK, json!({"outcome": "deleted"}))
    );
    assert_eq!(
        s.op("shop/items/pk-delete", delete).await.0,
        StatusCode::NOT_FOUND
    );
    let (status, body) = s.read(2).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "NOT_FOUND");
}

#[tokio::test]
async fn keys_are_checked_and_grants_are_kept() {
    let s = setup(&[]).await;
    assert_eq!(
        s.op("shop/items/pk-insert", item(1)).await.0,
        StatusCode::OK
    );
    let read = json!({"filters": [{"column": "id", "value": 1}]});

    // No key, a malformed key, a wrong secret: 401, and nothing said about why.
    let mut wrong_secret = s.key.clone();
    // Another last character, whatever the last one is.
    let last = wrong_secret.pop();
    wrong_secret.push(if last == Some('x') { 'y' } else { 'x' });
    for key in [
        None,
        Some("nonsense"),
        Some(""),
        Some(wrong_secret.as_str()),
    ] {
        let (status, body) = s.call(key, "shop/items/pk-read", read.clone()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{key:?}");
        assert_eq!(body["error"]["code"], "UNAUTHENTICATED");
        assert!(
            !body.to_string().contains(&s.key[17..]),
            "the secret is not echoed"
        );
    }

    // Same tenant, database not granted: 403. Another tenant's database,
    // even when the key names it: 403.
    let sneaky = s
        .shoal
        .create_key("acme", &[("shop", "read_write"), ("rival", "read_write")])
        .await;
    for (key, db) in [(&s.key, "lab"), (&s.key, "rival"), (&sneaky, "rival")] {
        let (status, body) = s
            .call(Some(key), &format!("{db}/items/pk-insert"), item(9))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{db}: {body}");
        assert_eq!(body["error"]["code"], "FORBIDDEN");
    }

    // A read key reads and cannot write.
    let reader = s.shoal.create_key("acme", &[("shop", "read")]).await;
    let (status, _) = s
        .call(Some(&reader), "shop/items/pk-read", read.clone())
        .await;
    assert_eq!(status, StatusCode::OK);
    for (op, body) in [
        ("pk-insert", item(5)),
        ("pk-write", item(1)),
        ("pk-delete", read.clone()),
    ] {
        let (status, _) = s
            .call(Some(&reader), &format!("shop/items/{op}"), body)
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{op}");
    }
    assert_eq!(
        s.read(1).await.0,
        StatusCode::OK,
        "the delete changed nothing"
    );
    assert_eq!(s.read(5).await.0, StatusCode::NOT_FOUND);

    // Revoked: the next request is refused.
    s.shoal.revoke_key(&reader).await;
    let (status, _) = s.call(Some(&reader), "shop/items/pk-read", read).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn keys_outlive_a_restart_and_their_secret_is_not_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let shoal = Shoal::start_in(&["datanode", "--data-memory", "64M"], dir.path());
    shoal.create_database("acme", "shop").await;
    let key = shoal.create_key("acme", &[("shop", "read")]).await;
    let (_, secret) = key.split_once('.').unwrap();
    let (code, _) = shoal.terminate();
    assert_eq!(code, Some(0));
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains(secret),
                "{} holds the secret",
                path.display()
            );
        }
    }
    let shoal = Shoal::start_in(&["datanode", "--data-memory", "64M"], dir.path());
    let r = common::client()
        .post(format!("{}/0.1.0/shop/t/pk-read", shoal.rest_url))
        .header("X-API-KEY", &key)
        .body("{}")
        .send()
        .await
        .unwrap();
    // The key is known again: the answer is about the missing table, not the key.
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "NO_SUCH_TABLE");
}

#[tokio::test]
async fn a_batch_answers_each_operation_on_its_own() {
    let s = setup(&[]).await;
    s.op("shop/items/pk-insert", item(1)).await;
    let lab = s
        .shoal
        .create_key("acme", &[("shop", "read_write"), ("lab", "read_write")])
        .await;
    let op = |url: &str, body: Value| json!({"method": "POST", "relative-url": url, "body": body});
    let by_id = |id: i64| json!({"filters": [{"column": "id", "value": id}]});
    let batch = json!({"operations": [
        op("shop/items/pk-read", by_id(1)),
        op("shop/items/pk-read", by_id(404)),
        op("lab/items/pk-insert", item(7)),
        op("shop/items/pk-insert", item(1)),
        op("rival/items/pk-read", by_id(1)),
        op("shop/nosuch/pk-read", by_id(1)),
        op("shop/items/pk-read", json!({"filters": [{"column": "id", "value": "x"}]})),
        op("/0.1.0/shop/items/pk-write", item(3)),
    ]});
    let (status, body) = s.call(Some(&lab), "batch", batch).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let body = &body["result"];
    let codes: Vec<u64> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_u64().unwrap())
        .collect();
    assert_eq!(codes, [200, 404, 200, 409, 403, 404, 400, 200], "{body}");
    assert_eq!(body[0]["body"]["data"]["name"], "item 1");
    assert_eq!(body[3]["body"]["error"]["code"], "DUPLICATE_KEY");
    assert!(body[4]["message"].as_str().unwrap().contains("rival"));
    // What succeeded is there.
    let (status, _) = s.call(Some(&lab), "lab/items/pk-read", by_id(7)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s.read(3).await.0, StatusCode::OK);

    // A read-only key: its read is answered, its writes refused, each on
    // its own.
    let reader = s.shoal.create_key("acme", &[("shop", "read")]).await;
    let renamed = json!({"row": {"id": 1, "name": "renamed"}});
    let batch = json!({"operations": [
        op("shop/items/pk-read", by_id(1)),
        op("shop/items/pk-update", renamed),
        op("shop/items/pk-delete", by_id(3)),
        op("shop/items/pk-read", by_id(3)),
    ]});
    let (status, body) = s.call(Some(&reader), "batch", batch).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let body = &body["result"];
    let codes: Vec<u64> = (body.as_array().unwrap().iter())
        .map(|e| e["code"].as_u64().unwrap())
        .collect();
    assert_eq!(codes, [200, 403, 403, 200], "{body}");
    assert_eq!(body[0]["body"]["data"]["name"], "item 1");
    assert_eq!(body[1]["body"]["error"]["code"], "FORBIDDEN");
    let (_, row) = s.read(1).await;
    assert_eq!(
        row["data"]["name"], "item 1",
        "the refused update changed nothing"
    );
    assert_eq!(s.read(3).await.0, StatusCode::OK, "nor did the delete");
}

#[tokio::test]
async fn a_transaction_commits_all_or_nothing() {
    let s = setup(&[]).await;
    s.op("shop/items/pk-insert", item(1)).await;
    let op = |url: &str, body: Value| json!({"method": "POST", "relative-url": url, "body": body});
    let failing = json!({"operations": [
        op("shop/items/pk-insert", item(10)),
        op("shop/items/pk-update", json!({"row": {"id": 1, "name": "changed"}})),
        op("shop/items/pk-insert", item(1)),
    ]});
    let (status, body) = s.op("transaction", failing).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["operation"], 2);
    assert_eq!(s.read(10).await.0, StatusCode::NOT_FOUND);
    assert_eq!(s.read(1).await.1["data"]["name"], "item 1");

    let ok = json!({"operations": [
        op("shop/items/pk-insert", item(10)),
        op("shop/items/pk-read", json!({"filters": [{"column": "id", "value": 1}]})),
        op("shop/items/pk-delete", json!({"filters": [{"column": "id", "value": 1}]})),
    ]});
    let (status, body) = s.op("transaction", ok).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let body = &body["result"];
    assert_eq!(
        body[0],
        json!({"code": 200, "body": {"outcome": "inserted"}})
    );
    assert_eq!(body[1]["body"]["data"]["name"], "item 1");
    assert_eq!(body[2]["body"]["outcome"], "deleted");
    assert_eq!(s.read(1).await.0, StatusCode::NOT_FOUND);

    // One database per transaction.
    let lab = s
        .shoal
        .create_key("acme", &[("shop", "read_write"), ("lab", "read_write")])
        .await;
    let mixed = json!({"operations": [
        op("shop/items/pk-insert", item(20)),
        op("lab/items/pk-insert", item(20)),
    ]});
    let (status, body) = s.call(Some(&lab), "transaction", mixed).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(s.read(20).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn throttled_requests_say_when_to_retry() {
    let s = setup(&[]).await;
    s.shoal
        .set_quota(
            "shop",
            json!({"write_units_per_sec": 1, "burst_seconds": 1}),
        )
        .await;
    assert_eq!(
        s.op("shop/items/pk-insert", item(1)).await.0,
        StatusCode::OK
    );
    let r = common::client()
        .post(format!("{}/0.1.0/shop/items/pk-insert", s.shoal.rest_url))
        .header("X-API-KEY", &s.key)
        .body(item(2).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "WRITE_RATE");
    assert_eq!(body["error"]["number"], 243);
    let ms = body["error"]["retry_after_ms"].as_u64().unwrap();
    assert!(ms > 0 && ms <= 1000, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("shop"));
    assert_eq!(
        s.read(2).await.0,
        StatusCode::NOT_FOUND,
        "the refused write changed nothing"
    );
}

#[tokio::test]
async fn a_database_at_its_memory_quota_refuses_writes_and_still_reads() {
    let s = setup(&[]).await;
    let before = s.shoal.get_json("/internal/v1/databases/shop/quota").await;
    let used = before["usage"]["in_memory_bytes"].as_u64().unwrap();
    s.shoal
        .set_quota("shop", json!({"in_memory_bytes": used.max(1)}))
        .await;
    let (status, body) = s.op("shop/items/pk-insert", item(1)).await;
    assert_eq!(status.as_u16(), 507, "{body}");
    assert_eq!(body["error"]["code"], "MEMORY_QUOTA");
    assert_eq!(body["error"]["number"], 239);
    assert!(body["error"]["message"].as_str().unwrap().contains("shop"));
    assert_eq!(s.read(1).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bad_input_gets_a_clear_error_and_changes_nothing() {
    let s = setup(&["--max-request-size", "64K"]).await;
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("shop/items/pk-insert", "{\"row\":".into(), 400, "BAD_REQUEST"),
        ("shop/items/pk-insert", "[1,2]".into(), 400, "BAD_REQUEST"),
        ("shop/items/pk-insert", "\u{0}\u{1}".into(), 400, "BAD_REQUEST"),
        ("shop/items/pk-insert", json!({"row": {"id": "seven", "name": "x"}}).to_string(), 400, "INVALID_VALUE"),
        ("shop/items/pk-insert", json!({"row": {"id": 1, "name": "x".repeat(51)}}).to_string(), 400, "INVALID_VALUE"),
        ("shop/items/pk-insert", json!({"row": {"id": 1, "name": "x", "data": "not base64!"}}).to_string(), 400, "INVALID_VALUE"),
        ("shop/items/pk-insert", json!({"row": {"id": 1, "name": "x", "nope": 1}}).to_string(), 400, "INVALID_VALUE"),
        ("shop/items/pk-insert", json!({"row": {"id": 1}}).to_string(), 400, "INVALID_VALUE"),
        ("shop/items/pk-insert", json!({"row": {"id": 1, "name": "x"}, "extra": 1}).to_string(), 400, "BAD_REQUEST"),
        ("shop/items/pk-insert", json!({"filters": [{"column": "id", "value": 1}]}).to_string(), 400, "BAD_REQUEST"),
        ("shop/items/pk-read", json!({"filters": [{"column": "name", "value": "x"}]}).to_string(), 400, "BAD_REQUEST"),
        ("shop/items/pk-read", json!({"filters": [{"column": "id", "value": [1]}]}).to_string(), 400, "INVALID_VALUE"),
        ("shop/items/pk-read", json!({"filters": [{"column": "id", "value": 1}], "readColumns": [{"column": "ghost"}]}).to_string(), 400, "BAD_REQUEST"),
        ("shop/items/pk-read", json!({"filters": [{"column": "id", "value": 1}], "readColumns": [{"column": "id", "dataReturnType": "hex"}]}).to_string(), 400, "BAD_REQUEST"),
        ("shop/items/pk-smash", json!({}).to_string(), 404, "NOT_FOUND"),
        ("shop/items/pk-insert", format!("{{\"row\": {{\"id\": 1, \"name\": \"{}\"}}}}", "x".repeat(70_000)), 413, "REQUEST_TOO_LARGE"),
        ("batch", format!("{{\"operations\": [\"{}\"]}}", "x".repeat(70_000)), 413, "REQUEST_TOO_LARGE"),
        ("batch", json!({"operations": []}).to_string(), 400, "BAD_REQUEST"),
        ("batch", json!({"operations": vec![json!({"method": "POST", "relative-url": "shop/items/pk-read", "body": {}}); 1001]}).to_string(), 413, "TOO_MANY_OPERATIONS"),
        ("transaction", json!({"operations": [{"method": "GET", "relative-url": "shop/items/pk-read", "body": {}}]}).to_string(), 400, "BAD_REQUEST"),
        ("transaction", json!({"operations": [{"method": "POST", "relative-url": "../../etc/passwd", "body": {}}]}).to_string(), 400, "BAD_REQUEST"),
    ];
    for (path, body, status, code) in cases {
        let (got, answer) = s.raw(Some(&s.key), path, body.clone()).await;
        let shown: String = body.chars().take(80).collect();
        assert_eq!(got.as_u16(), status, "{path} {shown}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{path} {shown}: {answer}");
    }
    // Values that do not fit their column exactly are refused, naming the
    // column and why — never clamped, rounded or coerced.
    let exact: [(&str, &str, &str, &str); 10] = [
        (
            "pk-insert",
            r#"{"row": {"id": -9223372036854775899, "name": "x"}}"#,
            "'id'",
            "out of range for BIGINT",
        ),
        (
            "pk-insert",
            r#"{"row": {"id": 18446744073709551616, "name": "x"}}"#,
            "'id'",
            "out of range for BIGINT",
        ),
        (
            "pk-insert",
            r#"{"row": {"id": 1.5, "name": "x"}}"#,
            "'id'",
            "has a fraction",
        ),
        (
            "pk-insert",
            r#"{"row": {"id": true, "name": "x"}}"#,
            "'id'",
            "got a boolean",
        ),
        (
            "pk-insert",
            r#"{"row": {"id": 1, "name": "x", "price": 1.005}}"#,
            "'price'",
            "more digits after the point",
        ),
        (
            "pk-insert",
            r#"{"row": {"id": 1, "name": "x", "price": "1.005"}}"#,
            "'price'",
            "not rounded",
        ),
        (
            "pk-insert",
            r#"{"row": {"id": 1, "name": "x", "name": "y"}}"#,
            "'name'",
            "given twice",
        ),
        (
            "pk-insert",
            r#"{"row": {"id": 1, "id": 2, "name": "x"}}"#,
            "'id'",
            "given twice",
        ),
        (
            "pk-insert",
            r#"{"row": {"id": 1, "name": "x", "price": 123456789.12}}"#,
            "'price'",
            "out of range for DECIMAL(10,2)",
        ),
        (
            "pk-delete",
            r#"{"filters": [{"column": "id", "value": 1e300}]}"#,
            "'id'",
            "out of range for BIGINT",
        ),
    ];
    for (op, body, column, why) in exact {
        let (got, answer) = s
            .raw(Some(&s.key), &format!("shop/items/{op}"), body.into())
            .await;
        assert_eq!(
            (got.as_u16(), answer["error"]["code"].as_str()),
            (400, Some("INVALID_VALUE")),
            "{body}: {answer}"
        );
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(column) && message.contains(why),
            "{body}: {message}"
        );
    }
    // A route's wrong method is the same JSON error shape.
    let r = common::client()
        .get(format!("{}/0.1.0/batch", s.shoal.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["error"]["code"], "METHOD_NOT_ALLOWED");
    assert_eq!(
        s.read(1).await.0,
        StatusCode::NOT_FOUND,
        "nothing was written"
    );
    let usage = s.shoal.table_memory("shop", "items").await.unwrap();
    assert_eq!(
        usage[2], usage[3],
        "every byte the table holds is free: {usage:?}"
    );
}

#[tokio::test]
async fn an_integer_past_its_column_never_reaches_another_row() {
    let s = setup(&[]).await;
    let min = json!({"row": {"id": i64::MIN, "name": "the least"}});
    assert_eq!(s.op("shop/items/pk-insert", min).await.0, StatusCode::OK);
    // Read as a double, -9223372036854775899 is -2^63: the row above.
    for op in ["pk-read", "pk-delete"] {
        let body = r#"{"filters": [{"column": "id", "value": -9223372036854775899}]}"#;
        let (status, answer) = s
            .raw(Some(&s.key), &format!("shop/items/{op}"), body.into())
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{op}: {answer}");
    }
    let body = r#"{"row": {"id": -9223372036854775899, "name": "overwritten"}}"#;
    let (status, _) = s
        .raw(Some(&s.key), "shop/items/pk-write", body.into())
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, row) = s.read(i64::MIN).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(row["data"]["name"], "the least", "untouched");
}

#[tokio::test]
async fn connections_past_the_limit_are_refused_and_the_rest_go_on() {
    let s = setup(&["--max-connections", "2"]).await;
    let addr = s.shoal.rest_url.trim_start_matches("http://").to_owned();
    let ping = b"GET /0.1.0/ping HTTP/1.1\r\nhost: x\r\n\r\n";
    // Two connections held open, each having been served once.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        c.write_all(ping).unwrap();
        let mut buf = [0u8; 256];
        let n = c.read(&mut buf).unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        held.push(c);
    }
    let mut third = std::net::TcpStream::connect(&addr).unwrap();
    let mut answer = String::new();
    third.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("TOO_MANY_CONNECTIONS"));
    // The held ones still work; once one closes, a new one is served.
    held[0].write_all(ping).unwrap();
    let mut buf = [0u8; 256];
    let n = held[0].read(&mut buf).unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    drop(held);
    // The node sees the close a moment later: try until a connection is
    // served (the bound is a guard against a hang, not a timing).
    let served = (0..1000).any(|_| {
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        c.write_all(ping).unwrap();
        let mut buf = [0u8; 256];
        let n = c.read(&mut buf).unwrap_or(0);
        let ok = buf[..n].starts_with(b"HTTP/1.1 200");
        if !ok {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        ok
    });
    assert!(served);
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed() {
    let s = setup(&["--idle-timeout", "1"]).await;
    let addr = s.shoal.rest_url.trim_start_matches("http://").to_owned();
    let mut idle = std::net::TcpStream::connect(&addr).unwrap();
    // The read blocks until the node closes the connection.
    let mut buf = [0u8; 64];
    assert!(matches!(idle.read(&mut buf), Ok(0) | Err(_)));
    let mut served = std::net::TcpStream::connect(&addr).unwrap();
    served
        .write_all(b"GET /0.1.0/ping HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let n = served.read(&mut buf).unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
}

/// RonDB's REST server's own test vectors (its Go tests of `batchwrite`,
/// `batchdelete`, `health` and `pk-read`), ported: the requests as RonDB's
/// clients send them, the answers as they expect them.
#[tokio::test]
async fn rondb_rest_clients_requests_are_answered_as_rondb_answers_them() {
    let s = setup(&[]).await;
    let op = |url: &str, body: Value| json!({"method": "POST", "relative-url": url, "body": body});
    let key = |id: i64| json!([{"column": "id", "value": id}]);
    let op_id = "o".repeat(64);

    // batchwrite: pk-write (upsert), pk-update, pk-insert with RonDB's
    // filters + writeColumns; one sub-answer each, in "result".
    let write = |url: &str, id: i64, name: &str| {
        op(
            url,
            json!({"filters": key(id), "writeColumns": [{"column": "name", "value": name}], "operationId": op_id}),
        )
    };
    let batch = json!({"operations": [
        write("shop/items/pk-write", 1, "written"),
        write("shop/items/pk-update", 1, "updated"),
        write("shop/items/pk-insert", 2, "inserted"),
        write("shop/items/pk-update", 9999, "nowhere"),
    ]});
    let (status, body) = s.op("batchwrite", batch).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let codes: Vec<&Value> = (body["result"].as_array().unwrap().iter())
        .map(|r| &r["code"])
        .collect();
    assert_eq!(codes, [200, 200, 200, 404], "{body}");
    assert_eq!(body["result"][0]["body"]["operationId"], op_id.as_str());
    assert_eq!(s.read(1).await.1["data"]["name"], "updated");
    assert_eq!(s.read(2).await.1["data"]["name"], "inserted");

    // A read among writes, or a write without writeColumns: the whole
    // request refused, nothing written.
    let wrong = json!({"operations": [write("shop/items/pk-write", 3, "x"), op("shop/items/pk-read", json!({"filters": key(1)}))]});
    let (status, body) = s.op("batchwrite", wrong).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pk-write, pk-update, or pk-insert"),
        "{body}"
    );
    assert_eq!(s.read(3).await.0, StatusCode::NOT_FOUND);
    let bare = json!({"operations": [op("shop/items/pk-write", json!({"filters": key(3)}))]});
    let (status, body) = s.op("batchwrite", bare).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"][0]["code"], 400, "{body}");
    let (status, _) = s.op("batchwrite", json!({"operations": []})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // A column named in filters and writeColumns both.
    let twice = json!({"filters": key(4), "writeColumns": [{"column": "id", "value": 5}]});
    let (status, body) = s.op("shop/items/pk-write", twice).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(s.read(4).await.0, StatusCode::NOT_FOUND);

    // batchdelete: pk-delete only; a missing row answers 404 on its own.
    let batch = json!({"operations": [
        op("shop/items/pk-delete", json!({"filters": key(2), "operationId": "d"})),
        op("shop/items/pk-delete", json!({"filters": key(404)})),
    ]});
    let (status, body) = s.op("batchdelete", batch).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"][0]["code"], 200, "{body}");
    assert_eq!(body["result"][1]["code"], 404, "{body}");
    assert_eq!(s.read(2).await.0, StatusCode::NOT_FOUND);
    let wrong = json!({"operations": [op("shop/items/pk-write", json!({"filters": key(1)}))]});
    assert_eq!(s.op("batchdelete", wrong).await.0, StatusCode::BAD_REQUEST);

    // operationId: at most 256 characters.
    let read = |id: &str| json!({"filters": key(1), "operationId": id});
    let (status, body) = s.op("shop/items/pk-read", read(&"i".repeat(256))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = s.op("shop/items/pk-read", read(&"i".repeat(257))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // readColumns: a column once, and at least one.
    let cols = |c: Value| json!({"filters": key(1), "readColumns": c});
    let twice = cols(json!([{"column": "name"}, {"column": "name"}]));
    let (status, body) = s.op("shop/items/pk-read", twice).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("twice"),
        "{body}"
    );
    assert_eq!(
        s.op("shop/items/pk-read", cols(json!([]))).await.0,
        StatusCode::BAD_REQUEST
    );

    // A DATE takes RonDB's date-time form with a zero time of day; any
    // other time is refused, never dropped.
    let dated = |day: &str| json!({"row": {"id": 30, "name": "dated", "day": day}});
    let (status, body) = s
        .op("shop/items/pk-write", dated("1111-11-11 00:00:00"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(s.read(30).await.1["data"]["day"], "1111-11-11");
    let (status, body) = s
        .op("shop/items/pk-write", dated("1111-11-12 10:00:00"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(s.read(30).await.1["data"]["day"], "1111-11-11");

    // DECIMAL as a JSON number, as RonDB answers it, with every digit the
    // column holds — never through a double, which would round a wide one.
    let priced = json!({"row": {"id": 31, "name": "priced", "price": "-1234567.80"}});
    assert_eq!(s.op("shop/items/pk-write", priced).await.0, StatusCode::OK);
    assert_eq!(s.read(31).await.1["data"]["price"], json!(-1234567.8));
    let wide = json!({"name": "wide", "primary_key": ["id"], "columns": [
        {"name": "id", "type": "BIGINT"}, {"name": "d", "type": "DECIMAL(30,10)"}],
        "indexes": [{"name": "by_d", "columns": ["d"]}]});
    let (status, body) = s
        .shoal
        .post("/internal/v1/databases/shop/tables", wide)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let exact = "-12345678901234567890.1234567890";
    for (id, d) in [(1, exact), (2, "0.5000000000")] {
        let row = json!({"row": {"id": id, "d": d}});
        assert_eq!(s.op("shop/wide/pk-write", row).await.0, StatusCode::OK);
    }
    // Sent as a JSON number, a decimal of more than 15 digits may have
    // been rounded on its way into a double: refused, nothing written.
    let (status, body) = (s.raw(
        Some(&s.key),
        "shop/wide/pk-write",
        r#"{"row": {"id": 3, "d": 12345678901234567890.1234567890}}"#.into(),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body.to_string().contains("send the decimal as a string"),
        "{body}"
    );
    let (status, _) = s.op("shop/wide/pk-read", json!({"filters": key(3)})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let as_number = r#"{"row": {"id": 3, "d": 123456789012.345}}"#;
    let (status, body) = s
        .raw(Some(&s.key), "shop/wide/pk-write", as_number.into())
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "15 digits are taken exactly: {body}"
    );

    // The answers' text, as a client's JSON parser meets it.
    let (rest_url, api_key) = (&s.shoal.rest_url, &s.key);
    let text = |path: &'static str, body: Value| async move {
        let r = common::client()
            .post(format!("{rest_url}/0.1.0/{path}"))
            .header("X-API-KEY", api_key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        r.text().await.unwrap()
    };
    let read = text(
        "shop/wide/pk-read",
        json!({"filters": key(1), "operationId": "w"}),
    )
    .await;
    assert_eq!(
        read,
        format!(r#"{{"data":{{"d":{exact}}},"operationId":"w"}}"#)
    );
    let read = |id| json!({"method": "POST", "relative-url": "shop/wide/pk-read", "body": {"filters": key(id)}});
    let batch = text("batch", json!({"operations": [read(1), read(2)]})).await;
    assert_eq!(
        batch,
        format!(
            r#"{{"result":[{{"body":{{"data":{{"d":{exact}}}}},"code":200}},{{"body":{{"data":{{"d":0.5000000000}}}},"code":200}}]}}"#
        )
    );
    let page = text("shop/wide/scan", json!({"index": "by_d"})).await;
    assert_eq!(
        page,
        format!(
            r#"{{"data":[{{"d":{exact},"id":1}},{{"d":0.5000000000,"id":2}},{{"d":123456789012.3450000000,"id":3}}],"next":null}}"#
        )
    );

    // health: RonDB's bare number, 1 when the data nodes serve.
    let health = reqwest::get(format!("{}/0.1.0/health", s.shoal.rest_url))
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    assert_eq!(health.text().await.unwrap(), "1");
}
