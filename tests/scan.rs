//! Scans through the REST data API on a real node: the primary key's order
//! and an ordered index's, every bound shape, paging with the cursor while
//! rows change, and bad input.

mod common;

use std::collections::BTreeMap;

use common::Shoal;
use reqwest::StatusCode;
use serde_json::{Value, json};

const EVENTS: &str = r#"{"name": "events", "columns": [
    {"name": "id", "type": "BIGINT"},
    {"name": "user", "type": "VARCHAR(20)"},
    {"name": "ts", "type": "INT", "nullable": true},
    {"name": "payload", "type": "VARBINARY(100)", "nullable": true}],
  "primary_key": ["id"],
  "indexes": [{"name": "by_user_ts", "columns": ["user", "ts"]}]}"#;

struct Setup {
    shoal: Shoal,
    key: String,
}

async fn setup() -> Setup {
    let shoal = Shoal::start(&["datanode", "--data-memory", "64M"]);
    for (tenant, db) in [("acme", "app"), ("other", "rival")] {
        shoal.create_database(tenant, db).await;
        let def: Value = serde_json::from_str(EVENTS).unwrap();
        let (status, body) = shoal
            .post(&format!("/internal/v1/databases/{db}/tables"), def)
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let key = shoal.create_key("acme", &[("app", "read_write")]).await;
    Setup { shoal, key }
}

impl Setup {
    async fn call(&self, key: &str, path: &str, body: String) -> (StatusCode, Value) {
        let r = common::client()
            .post(format!("{}/0.1.0/{path}", self.shoal.rest_url))
            .header("content-type", "application/json")
            .header("X-API-KEY", key)
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let body = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap_or(Value::Null);
        (status, body)
    }

    async fn scan(&self, body: Value) -> (StatusCode, Value) {
        self.call(&self.key, "app/events/scan", body.to_string())
            .await
    }

    /// Every row of a scan, following the cursor; each page checked to hold
    /// at most `limit` rows.
    async fn scan_all(&self, mut body: Value, limit: u64) -> Vec<Value> {
        body["limit"] = limit.into();
        let mut rows = Vec::new();
        for _ in 0..1000 {
            let (status, page) = self.scan(body.clone()).await;
            assert_eq!(status, StatusCode::OK, "{page}");
            let data = page["data"].as_array().unwrap();
            assert!(data.len() as u64 <= limit);
            rows.extend(data.iter().cloned());
            match &page["next"] {
                Value::Null => return rows,
                next => body["after"] = next.clone(),
            }
        }
        panic!("the scan never ended")
    }

    async fn write(&self, rows: &[(i64, &str, Option<i64>)]) {
        let operations: Vec<Value> = (rows.iter())
            .map(|(id, user, ts)| {
                json!({"method": "POST", "relative-url": "app/events/pk-write",
                       "body": {"row": {"id": id, "user": user, "ts": ts}}})
            })
            .collect();
        let body = json!({ "operations": operations }).to_string();
        let (status, answer) = self.call(&self.key, "batch", body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        for r in answer["result"].as_array().unwrap() {
            assert_eq!(r["code"], 200, "{r}");
        }
    }

    async fn delete(&self, id: i64) {
        let body = json!({"filters": [{"column": "id", "value": id}]}).to_string();
        let (status, answer) = self.call(&self.key, "app/events/pk-delete", body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
}

fn ids(rows: &[Value]) -> Vec<i64> {
    rows.iter().map(|r| r["id"].as_i64().unwrap()).collect()
}

/// Users and times of the rows `0..n`: five users, times with NULLs.
fn event(id: i64) -> (i64, &'static str, Option<i64>) {
    let user = ["ann", "bob", "cy", "dee", "eve"][(id * 7 % 5) as usize];
    let ts = (id % 11 != 0).then_some((id * 37) % 100);
    (id, user, ts)
}

#[tokio::test]
async fn scans_answer_rows_in_index_order_between_bounds() {
    let s = setup().await;
    let rows: Vec<_> = (0..300).map(event).collect();
    for chunk in rows.chunks(100) {
        s.write(chunk).await;
    }

    // The primary key's order, page by page: every row once, in order.
    let all = s.scan_all(json!({}), 37).await;
    assert_eq!(ids(&all), (0..300).collect::<Vec<_>>());
    assert_eq!(
        all[5],
        json!({"id": 5, "user": "ann", "ts": 85, "payload": null})
    );

    // Bounds on the primary key, inclusive and exclusive.
    let some = s
        .scan_all(
            json!({"lower": {"values": [10]}, "upper": {"values": [20], "inclusive": false}}),
            4,
        )
        .await;
    assert_eq!(ids(&some), (10..20).collect::<Vec<_>>());
    let some = s
        .scan_all(json!({"lower": {"values": [290], "inclusive": false}}), 100)
        .await;
    assert_eq!(ids(&some), (291..300).collect::<Vec<_>>());

    // The index's order: user, then ts (NULL first), then id.
    let mut by_index = rows.clone();
    by_index.sort_by_key(|&(id, user, ts)| (user, ts, id));
    let want = |keep: &dyn Fn(&str, Option<i64>) -> bool| -> Vec<i64> {
        (by_index.iter())
            .filter(|(_, u, t)| keep(u, *t))
            .map(|r| r.0)
            .collect()
    };
    let scan = |body: Value| {
        let mut body = body;
        body["index"] = "by_user_ts".into();
        body
    };
    assert_eq!(
        ids(&s.scan_all(scan(json!({})), 50).await),
        want(&|_, _| true)
    );
    // A prefix of the index: one user.
    let bob = s
        .scan_all(
            scan(json!({"lower": {"values": ["bob"]}, "upper": {"values": ["bob"]}})),
            7,
        )
        .await;
    assert_eq!(ids(&bob), want(&|u, _| u == "bob"));
    // One user's rows in a time window, exclusive below and inclusive above.
    let window = s
        .scan_all(
            scan(json!({"lower": {"values": ["cy", 20], "inclusive": false},
                        "upper": {"values": ["cy", 60]}})),
            3,
        )
        .await;
    assert_eq!(
        ids(&window),
        want(&|u, t| u == "cy" && t.is_some_and(|t| t > 20 && t <= 60))
    );
    // NULL sorts first: a user's rows without a time.
    let nulls = s
        .scan_all(
            scan(json!({"lower": {"values": ["dee", null]}, "upper": {"values": ["dee", null]}})),
            10,
        )
        .await;
    assert_eq!(ids(&nulls), want(&|u, t| u == "dee" && t.is_none()));
    assert!(!nulls.is_empty());
    // Only some columns.
    let (status, page) = s
        .scan(scan(
            json!({"readColumns": [{"column": "ts"}, {"column": "id"}], "limit": 1}),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["data"][0].as_object().unwrap().len(), 2);
    // A read-only key scans too.
    let reader = s.shoal.create_key("acme", &[("app", "read")]).await;
    let (status, _) = s.call(&reader, "app/events/scan", "{}".into()).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn paging_while_rows_change_finds_every_row_that_stays_once() {
    let s = setup().await;
    let rows: Vec<_> = (0..400).map(event).collect();
    for chunk in rows.chunks(100) {
        s.write(chunk).await;
    }
    // Page through the index; between pages, delete rows, add rows and move
    // rows (a new time puts a row elsewhere in the index).
    let mut body = json!({"index": "by_user_ts", "limit": 23});
    let mut seen: BTreeMap<i64, usize> = BTreeMap::new();
    let mut last: Option<(String, Option<i64>, i64)> = None;
    let mut changed: Vec<i64> = Vec::new();
    for page_number in 0..1000 {
        let (status, page) = s.scan(body.clone()).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for row in page["data"].as_array().unwrap() {
            let key = (
                row["user"].as_str().unwrap().to_owned(),
                row["ts"].as_i64(),
                row["id"].as_i64().unwrap(),
            );
            if let Some(last) = &last {
                assert!(*last < key, "in index order: {last:?} then {key:?}");
            }
            last = Some(key.clone());
            *seen.entry(key.2).or_default() += 1;
        }
        if page["next"].is_null() {
            break;
        }
        body["after"] = page["next"].clone();
        let base = 1000 + page_number * 10;
        let victim = (page_number * 13) % 400;
        s.delete(victim).await;
        let moved = (page_number * 29 + 5) % 400;
        s.write(&[
            (base, "ann", Some(1)),
            (base + 1, "eve", Some(99)),
            (moved, "cy", Some(page_number)),
        ])
        .await;
        changed.extend([victim, moved]);
    }
    // A row left alone is answered exactly once; one moved ahead of the
    // cursor may be met again at its new place (a paged scan is not a
    // snapshot), one moved behind it not at all.
    for id in 0..400 {
        if !changed.contains(&id) {
            assert_eq!(seen.get(&id), Some(&1), "row {id} was there throughout");
        }
    }
    assert!(seen.values().all(|&n| n <= 2));
}

#[tokio::test]
async fn bad_scans_get_a_clear_error() {
    let s = setup().await;
    s.write(&[(1, "ann", Some(1)), (2, "bob", None)]).await;
    let cases: Vec<(Value, StatusCode, &str)> = vec![
        (
            json!({"index": "nope"}),
            StatusCode::NOT_FOUND,
            "no index 'nope'",
        ),
        (
            json!({"limit": 0}),
            StatusCode::BAD_REQUEST,
            "limit must be",
        ),
        (
            json!({"limit": 10001}),
            StatusCode::BAD_REQUEST,
            "limit must be",
        ),
        (
            json!({"limit": "5"}),
            StatusCode::BAD_REQUEST,
            "limit must be",
        ),
        (
            json!({"limit": 2.5}),
            StatusCode::BAD_REQUEST,
            "limit must be",
        ),
        (
            json!({"lower": {"values": [1, 2]}}),
            StatusCode::BAD_REQUEST,
            "the index has 1 columns",
        ),
        (
            json!({"index": "by_user_ts", "lower": {"values": [5]}}),
            StatusCode::BAD_REQUEST,
            "user",
        ),
        (
            json!({"lower": {"values": ["x"]}}),
            StatusCode::BAD_REQUEST,
            "id",
        ),
        (
            json!({"lower": {"values": [1], "inclusive": "yes"}}),
            StatusCode::BAD_REQUEST,
            "invalid JSON",
        ),
        (
            json!({"after": "garbage!"}),
            StatusCode::BAD_REQUEST,
            "not a cursor",
        ),
        (
            json!({"after": "eyJpIjoxfQ"}),
            StatusCode::BAD_REQUEST,
            "not a cursor",
        ),
        (
            json!({"after": "x".repeat(100_000)}),
            StatusCode::BAD_REQUEST,
            "not a cursor",
        ),
        (
            json!({"readColumns": []}),
            StatusCode::BAD_REQUEST,
            "no column",
        ),
        (
            json!({"readColumns": [{"column": "id"}, {"column": "id"}]}),
            StatusCode::BAD_REQUEST,
            "twice",
        ),
        (
            json!({"readColumns": [{"column": "<script>"}]}),
            StatusCode::BAD_REQUEST,
            "no column",
        ),
        (
            json!({"where": "1=1"}),
            StatusCode::BAD_REQUEST,
            "unknown field",
        ),
    ];
    for (body, status, says) in cases {
        let (got, answer) = s.scan(body.clone()).await;
        assert_eq!(got, status, "{body} answered {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{body}: {message}");
    }
    // A cursor of the primary key's scan is not one of the index's.
    let (_, page) = s.scan(json!({"limit": 1})).await;
    let cursor = page["next"].clone();
    assert!(cursor.is_string());
    let (status, answer) = s
        .scan(json!({"index": "by_user_ts", "after": cursor}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another scan")
    );
    // Another tenant's database, and no key at all.
    let (status, _) = s.call(&s.key, "rival/events/scan", "{}".into()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = s.call("", "app/events/scan", "{}".into()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Not JSON at all.
    let (status, _) = s.call(&s.key, "app/events/scan", "{".into()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// Read units the database has used, as ndbinfo reports them.
async fn read_units(shoal: &Shoal) -> u64 {
    let usage = shoal.ndbinfo("database_quota_usage").await;
    let rows = usage["rows"].as_array().unwrap();
    let row = rows.iter().find(|r| r[0] == "app").expect("a row for app");
    row[3].as_u64().unwrap()
}

#[tokio::test]
async fn every_row_scanned_is_charged_and_the_read_rate_holds_scans_back() {
    let s = setup().await;
    let rows: Vec<_> = (0..200).map(event).collect();
    for chunk in rows.chunks(100) {
        s.write(chunk).await;
    }
    let before = read_units(&s.shoal).await;
    let (status, page) = s.scan(json!({"limit": 150})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["data"].as_array().unwrap().len(), 150);
    let charged = read_units(&s.shoal).await - before;
    assert!(
        (150..=200).contains(&charged),
        "150 rows answered (and a few more examined): {charged} read units"
    );

    // A read rate of 10 units a second, in bursts of 10: the units the
    // scan above owes (more than a burst) hold the next read back, with
    // when to retry, until they are paid a burst at a time.
    s.shoal
        .set_quota("app", json!({"read_units_per_sec": 10, "burst_seconds": 1}))
        .await;
    let (status, answer) = s.scan(json!({"limit": 1})).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{answer}");
    assert_eq!(answer["error"]["code"], "READ_RATE");
    assert!(answer["error"]["retry_after_ms"].as_u64().unwrap() > 0);
    // With room for them, they are paid and the scan goes on.
    s.shoal
        .set_quota(
            "app",
            json!({"read_units_per_sec": 100000, "burst_seconds": 1}),
        )
        .await;
    let (status, answer) = s.scan(json!({"limit": 1})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}
