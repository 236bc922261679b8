//! Reading and writing rows over the internal API's transaction endpoint:
//! every value type in JSON, atomic and independent operations, and what
//! bad requests get.

mod common;

use common::Shoal;
use reqwest::StatusCode;
use serde_json::{Value, json};

const TX: &str = "/internal/v1/databases/shop/transaction";

async fn node() -> Shoal {
    let shoal = Shoal::start(&["datanode", "--data-memory", "64M", "--ldm-threads", "2"]);
    let (status, _) = shoal
        .post("/internal/v1/databases", json!({"name": "shop"}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let table = json!({
        "name": "items",
        "columns": [
            {"name": "id", "type": "BIGINT UNSIGNED"},
            {"name": "name", "type": "VARCHAR(20)"},
            {"name": "price", "type": "DECIMAL(8,2)", "nullable": true},
            {"name": "added", "type": "DATE", "nullable": true},
            {"name": "seen", "type": "TIMESTAMP(3)", "nullable": true},
            {"name": "blob", "type": "VARBINARY(16)", "nullable": true},
            {"name": "ratio", "type": "DOUBLE", "nullable": true},
            {"name": "live", "type": "BOOL", "nullable": true}
        ],
        "primary_key": ["id"]
    });
    let (status, body) = shoal
        .post("/internal/v1/databases/shop/tables", table)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    shoal
}

fn read(id: u64) -> Value {
    json!({"op": "read", "table": "items", "key": {"id": id}})
}

#[tokio::test]
async fn rows_are_written_and_read_back_in_every_type() {
    let shoal = node().await;
    let row = json!({
        "id": 18446744073709551615u64,
        "name": "Widget",
        "price": "12.50",
        "added": "2024-02-29",
        "seen": "2024-03-01 12:00:00.125Z",
        "blob": "AAH/",
        "ratio": 0.25,
        "live": true
    });
    let (status, body) = shoal
        .post(
            TX,
            json!({"operations": [{"op": "insert", "table": "items", "row": row}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["results"], json!([{"outcome": "inserted"}]));

    let (status, body) = shoal
        .post(TX, json!({"operations": [read(u64::MAX), read(2)]}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["results"][0]["outcome"], "found");
    assert_eq!(
        body["results"][0]["row"],
        json!({
            "id": 18446744073709551615u64,
            "name": "Widget",
            "price": "12.50",
            "added": "2024-02-29",
            "seen": "2024-03-01 12:00:00.125",
            "blob": "AAH/",
            "ratio": 0.25,
            "live": true
        })
    );
    assert_eq!(body["results"][1], json!({"outcome": "absent"}));

    // Update some columns, upsert, delete: each reports what it did.
    let ops = json!([
        {"op": "update", "table": "items", "row": {"id": u64::MAX, "price": null}},
        {"op": "write", "table": "items", "row": {"id": 2, "name": "Gadget"}},
        {"op": "delete", "table": "items", "key": {"id": 2}},
        read(u64::MAX)
    ]);
    let (status, body) = shoal.post(TX, json!({"operations": ops})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let results = &body["results"];
    assert_eq!(results[0]["outcome"], "updated");
    assert_eq!(results[1]["outcome"], "inserted");
    assert_eq!(results[2]["outcome"], "deleted");
    assert_eq!(results[3]["row"]["price"], Value::Null);
    assert_eq!(
        results[3]["row"]["name"], "Widget",
        "columns left out are kept"
    );
}

#[tokio::test]
async fn an_atomic_request_fails_whole_and_an_independent_one_op_by_op() {
    let shoal = node().await;
    let insert =
        |id: u64| json!({"op": "insert", "table": "items", "row": {"id": id, "name": "x"}});
    let (status, _) = shoal.post(TX, json!({"operations": [insert(1)]})).await;
    assert_eq!(status, StatusCode::OK);

    let (status, body) = shoal
        .post(TX, json!({"operations": [insert(2), insert(1), insert(3)]}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "DUPLICATE_KEY");
    assert_eq!(
        body["error"]["operation"], 1,
        "names the operation that failed"
    );
    let (_, body) = shoal
        .post(TX, json!({"operations": [read(2), read(3)]}))
        .await;
    assert_eq!(
        body["results"],
        json!([{"outcome": "absent"}, {"outcome": "absent"}]),
        "nothing of it was applied"
    );

    let (status, body) = shoal
        .post(
            TX,
            json!({"atomic": false, "operations": [insert(2), insert(1), insert(3)]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let results = body["results"].as_array().unwrap();
    assert_eq!(results[0]["outcome"], "inserted");
    assert_eq!(results[1]["error"]["code"], "DUPLICATE_KEY");
    assert_eq!(results[1]["error"]["number"], 630, "RonDB's number");
    assert_eq!(results[2]["outcome"], "inserted");
}

#[tokio::test]
async fn throttled_writes_say_when_to_retry() {
    let shoal = node().await;
    let (status, _) = shoal
        .send(
            reqwest::Method::PUT,
            "/internal/v1/databases/shop/quota",
            Some(json!({"write_units_per_sec": 1, "burst_seconds": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let write = |id: u64| json!({"operations": [{"op": "write", "table": "items", "row": {"id": id, "name": "x"}}]});
    let (status, _) = shoal.post(TX, write(1)).await;
    assert_eq!(status, StatusCode::OK, "the burst allows one");
    let r = common::client()
        .post(shoal.url(TX))
        .bearer_auth(shoal.secret())
        .json(&write(2))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after >= 1);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "WRITE_RATE");
    assert!(body["error"]["retry_after_ms"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn bad_requests_get_a_clear_error_and_change_nothing() {
    let shoal = node().await;
    let op = |op: Value| json!({"operations": [op]});
    let too_many: Vec<Value> = (0..1001).map(read).collect();
    let cases: Vec<(&str, &str, Value, StatusCode, &str)> = vec![
        (
            "no operations",
            TX,
            json!({"operations": []}),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
        ),
        (
            "too many operations",
            TX,
            json!({"operations": too_many}),
            StatusCode::PAYLOAD_TOO_LARGE,
            "TOO_MANY_OPERATIONS",
        ),
        (
            "unknown field",
            TX,
            json!({"operations": [read(1)], "isolation": "serializable"}),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
        ),
        (
            "unknown op",
            TX,
            op(json!({"op": "merge", "table": "items", "row": {"id": 1}})),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
        ),
        (
            "read with a row",
            TX,
            op(json!({"op": "read", "table": "items", "row": {"id": 1}})),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
        ),
        (
            "write with a key",
            TX,
            op(json!({"op": "write", "table": "items", "key": {"id": 1}})),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
        ),
        (
            "no such table",
            TX,
            op(json!({"op": "read", "table": "nope", "key": {"id": 1}})),
            StatusCode::NOT_FOUND,
            "NO_SUCH_TABLE",
        ),
        (
            "no such database",
            "/internal/v1/databases/nope/transaction",
            op(read(1)),
            StatusCode::NOT_FOUND,
            "NO_SUCH_DATABASE",
        ),
        (
            "missing key column",
            TX,
            op(json!({"op": "read", "table": "items", "key": {}})),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            "extra key column",
            TX,
            op(json!({"op": "read", "table": "items", "key": {"id": 1, "name": "x"}})),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            "unknown column",
            TX,
            op(json!({"op": "write", "table": "items", "row": {"id": 1, "colour": "red"}})),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            "string too long",
            TX,
            op(json!({"op": "write", "table": "items", "row": {"id": 1, "name": "x".repeat(21)}})),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            "negative unsigned",
            TX,
            op(json!({"op": "write", "table": "items", "row": {"id": -1}})),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            "bad decimal",
            TX,
            op(json!({"op": "write", "table": "items", "row": {"id": 1, "price": "12.5.0"}})),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            "bad date",
            TX,
            op(json!({"op": "write", "table": "items", "row": {"id": 1, "added": "2023-02-29"}})),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            "not base64",
            TX,
            op(json!({"op": "write", "table": "items", "row": {"id": 1, "blob": "%%%"}})),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            "binary too long",
            TX,
            op(json!({"op": "write", "table": "items", "row": {"id": 1, "blob": "A".repeat(100)}})),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            "object as value",
            TX,
            op(json!({"op": "write", "table": "items", "row": {"id": 1, "name": {"$gt": ""}}})),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            "null key",
            TX,
            op(json!({"op": "read", "table": "items", "key": {"id": null}})),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            "insert without a NOT NULL column",
            TX,
            op(json!({"op": "insert", "table": "items", "row": {"id": 1}})),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
    ];
    for (what, path, body, status, code) in cases {
        let (got, answer) = shoal.post(path, body).await;
        assert_eq!(
            (got, answer["error"]["code"].as_str()),
            (status, Some(code)),
            "{what}: {answer}"
        );
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}"
        );
    }
    let r = common::client()
        .post(shoal.url(TX))
        .bearer_auth(shoal.secret())
        .header("content-type", "application/json")
        .body("{\"operations\": [")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = common::client()
        .post(shoal.url(TX))
        .json(&op(read(1)))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "rows need the cluster secret"
    );

    let memory = shoal.ndbinfo("memoryusage").await;
    assert_eq!(memory["rows"][0][2], 0, "no row was written");
}
