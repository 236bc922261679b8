//! Unique ordered indexes on a real node: a duplicate refused with a clear
//! error and nothing written, by insert, upsert, update (whole or partial),
//! batch and transaction; NULLs never duplicate; a transaction may swap
//! values or free one and take it; concurrent writers of one value, one
//! wins; added online only to a table without duplicates.

mod common;

use common::Shoal;
use reqwest::StatusCode;
use serde_json::{Value, json};

const USERS: &str = r#"{"name": "users", "columns": [
    {"name": "id", "type": "BIGINT"},
    {"name": "email", "type": "VARCHAR(50)", "nullable": true},
    {"name": "org", "type": "INT"},
    {"name": "name", "type": "VARCHAR(20)"}],
  "primary_key": ["id"],
  "indexes": [{"name": "by_email", "columns": ["email"], "unique": true},
              {"name": "by_org_name", "columns": ["org", "name"], "unique": true}]}"#;

struct Setup {
    shoal: Shoal,
    key: String,
}

async fn setup() -> Setup {
    let shoal = Shoal::start(&["datanode", "--data-memory", "64M"]);
    shoal.create_database("acme", "app").await;
    let def: Value = serde_json::from_str(USERS).unwrap();
    let (status, body) = shoal.post("/internal/v1/databases/app/tables", def).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let key = shoal.create_key("acme", &[("app", "read_write")]).await;
    Setup { shoal, key }
}

impl Setup {
    async fn call(&self, path: &str, body: Value) -> (StatusCode, Value) {
        common::control::data_call(&self.shoal, &self.key, path, body).await
    }

    async fn op(&self, op: &str, row: Value) -> (StatusCode, Value) {
        self.call(&format!("app/users/{op}"), json!({ "row": row }))
            .await
    }

    /// Every row, as (id, email, org, name), in id order.
    async fn rows(&self) -> Vec<Value> {
        let (status, page) = self.call("app/users/scan", json!({"limit": 1000})).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        page["data"].as_array().unwrap().clone()
    }
}

fn user(id: i64, email: Option<&str>, org: i64, name: &str) -> Value {
    json!({"id": id, "email": email, "org": org, "name": name})
}

/// A refusal as a duplicate of unique index `index`, naming it and the
/// `values` (joined by `-`) another row holds.
fn assert_duplicate(status: StatusCode, body: &Value, index: &str, values: &str) {
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "DUPLICATE_KEY", "{body}");
    assert_eq!(body["error"]["number"], 893, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("the values '{values}' of unique index '{index}'")),
        "{message}"
    );
}

#[tokio::test]
async fn a_duplicate_is_refused_and_nothing_is_written() {
    let s = setup().await;
    for (id, email, org, name) in [
        (1, Some("ann@x"), 1, "ann"),
        (2, Some("bob@x"), 1, "bob"),
        (3, None, 2, "cy"),
        (4, None, 2, "dee"),
    ] {
        let (status, body) = s.op("pk-insert", user(id, email, org, name)).await;
        assert_eq!(status, StatusCode::OK, "NULLs never duplicate: {body}");
    }
    let before = s.rows().await;

    // Insert, upsert and update onto another row's values.
    let (status, body) = s.op("pk-insert", user(5, Some("ann@x"), 9, "eve")).await;
    assert_duplicate(status, &body, "by_email", "ann@x");
    let (status, body) = s.op("pk-write", user(5, Some("zed@x"), 1, "bob")).await;
    assert_duplicate(status, &body, "by_org_name", "1-bob");
    let (status, body) = s.op("pk-update", json!({"id": 2, "email": "ann@x"})).await;
    assert_duplicate(status, &body, "by_email", "ann@x");
    // A partial update: the row's name, with its org as it is, duplicates.
    let (status, body) = s.op("pk-update", json!({"id": 2, "name": "ann"})).await;
    assert_duplicate(status, &body, "by_org_name", "1-ann");
    let (status, body) = s
        .op("pk-update", json!({"id": 4, "org": 1, "name": "ann"}))
        .await;
    assert_duplicate(status, &body, "by_org_name", "1-ann");
    assert_eq!(s.rows().await, before, "nothing written");

    // A row may keep its own values, and take free ones.
    let (status, body) = s.op("pk-write", user(1, Some("ann@x"), 1, "ann")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = s.op("pk-update", json!({"id": 2, "email": "bob2@x"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = s.op("pk-insert", user(5, Some("bob@x"), 3, "eve")).await;
    assert_eq!(status, StatusCode::OK, "bob@x was freed: {body}");

    // A transaction in which one write would duplicate is refused whole;
    // in a batch of operations each on its own, that write alone.
    let batch = json!({"operations": [
        {"method": "POST", "relative-url": "app/users/pk-insert", "body": {"row": user(6, Some("new@x"), 4, "fay")}},
        {"method": "POST", "relative-url": "app/users/pk-insert", "body": {"row": user(7, Some("ann@x"), 4, "gus")}}]});
    let before = s.rows().await;
    let (status, body) = s.call("transaction", batch.clone()).await;
    assert_duplicate(status, &body, "by_email", "ann@x");
    assert_eq!(body["error"]["operation"], 1, "{body}");
    assert_eq!(s.rows().await, before, "nothing written");
    let (status, body) = s.call("batch", batch).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let results = body["result"].as_array().unwrap();
    assert_eq!(results[0]["code"], 200, "{body}");
    assert_eq!(results[1]["code"], 409, "{body}");
    assert_duplicate(
        StatusCode::CONFLICT,
        &results[1]["body"],
        "by_email",
        "ann@x",
    );
    let after = s.rows().await;
    assert_eq!(after.len(), before.len() + 1, "the other write was made");
    assert!(after.iter().any(|r| r["email"] == "new@x"));
    assert!(!after.iter().any(|r| r["id"] == 7));
    let (status, _) = s
        .call(
            "app/users/pk-delete",
            json!({"filters": [{"column": "id", "value": 6}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // Two writes of one batch with the same values.
    let twins = json!({"operations": [
        {"method": "POST", "relative-url": "app/users/pk-insert", "body": {"row": user(8, Some("twin@x"), 5, "h1")}},
        {"method": "POST", "relative-url": "app/users/pk-insert", "body": {"row": user(9, Some("twin@x"), 5, "h2")}}]});
    let (status, body) = s.call("transaction", twins).await;
    assert_duplicate(status, &body, "by_email", "twin@x");
    assert_eq!(s.rows().await, before);

    // In one transaction two rows swap emails, and a row deleted gives its
    // email to a new one.
    let swap = json!({"operations": [
        {"method": "POST", "relative-url": "app/users/pk-update", "body": {"row": {"id": 1, "email": "bob2@x"}}},
        {"method": "POST", "relative-url": "app/users/pk-update", "body": {"row": {"id": 2, "email": "ann@x"}}},
        {"method": "POST", "relative-url": "app/users/pk-delete", "body": {"filters": [{"column": "id", "value": 5}]}},
        {"method": "POST", "relative-url": "app/users/pk-insert", "body": {"row": user(10, Some("bob@x"), 3, "eve")}}]});
    let (status, body) = s.call("transaction", swap).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let emails: Vec<(i64, Value)> = (s.rows().await.iter())
        .map(|r| (r["id"].as_i64().unwrap(), r["email"].clone()))
        .collect();
    assert_eq!(
        emails,
        vec![
            (1, json!("bob2@x")),
            (2, json!("ann@x")),
            (3, Value::Null),
            (4, Value::Null),
            (10, json!("bob@x")),
        ]
    );
}

#[tokio::test]
async fn of_many_writers_of_one_value_one_wins() {
    let s = setup().await;
    let mut writers = tokio::task::JoinSet::new();
    for id in 0..24i64 {
        let (url, key) = (
            format!("{}/0.1.0/app/users/pk-insert", s.shoal.rest_url),
            s.key.clone(),
        );
        writers.spawn(async move {
            let row = user(id, Some("same@x"), id, &format!("n{id}"));
            let r = common::client()
                .post(url)
                .header("X-API-KEY", key)
                .json(&json!({ "row": row }))
                .send()
                .await
                .unwrap();
            let status = r.status();
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        });
    }
    let mut won = 0;
    while let Some(done) = writers.join_next().await {
        let (status, body) = done.unwrap();
        match status {
            StatusCode::OK => won += 1,
            _ => assert_duplicate(status, &body, "by_email", "same@x"),
        }
    }
    assert_eq!(won, 1);
    assert_eq!(s.rows().await.len(), 1);
}

#[tokio::test]
async fn a_unique_index_is_added_online_only_without_duplicates() {
    let s = setup().await;
    for id in 0..50 {
        let row = user(id, Some(&format!("u{id}@x")), id % 3, &format!("n{id}"));
        assert_eq!(s.op("pk-insert", row).await.0, StatusCode::OK);
    }
    // org repeats: a unique index on it cannot be added, and is not there.
    let path = "/internal/v1/databases/app/tables/users/indexes";
    let (status, body) = s
        .shoal
        .post(
            path,
            json!({"name": "by_org", "columns": ["org"], "unique": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "DUPLICATE_KEY", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("share the values '0'"), "{message}");
    let (status, _) = s.call("app/users/scan", json!({"index": "by_org"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // On (org, id) it can, and holds from then on.
    let (status, body) = s
        .shoal
        .post(
            path,
            json!({"name": "by_org_id", "columns": ["name", "org"], "unique": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = s
        .op("pk-update", json!({"id": 1, "name": "n4", "org": 1}))
        .await;
    assert_duplicate(status, &body, "by_org_name", "1-n4");
    let (status, body) = s.op("pk-insert", user(99, Some("new@x"), 2, "n2")).await;
    assert_duplicate(status, &body, "by_org_name", "2-n2");
}

#[tokio::test]
async fn a_default_is_what_an_insert_leaves_out_and_a_unique_index_sees_it() {
    let shoal = Shoal::start(&["datanode", "--data-memory", "64M"]);
    shoal.create_database("acme", "app").await;
    // Defaults a column cannot hold: refused, nothing made.
    for (column, why) in [
        (
            json!({"name": "slot", "type": "VARCHAR(4)", "default": "<b>long</b>"}),
            "does not fit",
        ),
        (
            json!({"name": "slot", "type": "INT", "default": {"x": 1}}),
            "must be",
        ),
        (
            json!({"name": "slot", "type": "TINYINT", "default": 1000}),
            "does not fit",
        ),
    ] {
        let def = json!({"name": "jobs", "primary_key": ["id"],
            "columns": [{"name": "id", "type": "BIGINT"}, column]});
        let (status, body) = shoal.post("/internal/v1/databases/app/tables", def).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["error"]["code"], "INVALID_SCHEMA", "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(why),
            "{body}"
        );
    }
    let def = json!({"name": "jobs", "primary_key": ["id"],
        "columns": [{"name": "id", "type": "BIGINT"},
                    {"name": "slot", "type": "VARCHAR(10)", "default": "free"},
                    {"name": "tries", "type": "INT", "default": 0}],
        "indexes": [{"name": "by_slot", "columns": ["slot"], "unique": true}]});
    let (status, body) = shoal.post("/internal/v1/databases/app/tables", def).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let key = shoal.create_key("acme", &[("app", "read_write")]).await;
    let call = |op: &str, body: Value| {
        let path = format!("app/jobs/{op}");
        let (shoal, key) = (&shoal, &key);
        async move { common::control::data_call(shoal, key, &path, body).await }
    };
    let (status, body) = call("pk-insert", json!({"row": {"id": 1}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, row) = call(
        "pk-read",
        json!({"filters": [{"column": "id", "value": 1}]}),
    )
    .await;
    assert_eq!(
        (&row["data"]["slot"], &row["data"]["tries"]),
        (&json!("free"), &json!(0)),
        "{row}"
    );
    // A second row left to its default would hold the same slot: refused,
    // by an insert and by a write that inserts; nothing written.
    for op in ["pk-insert", "pk-write"] {
        let (status, body) = call(op, json!({"row": {"id": 2}})).await;
        assert_duplicate(status, &body, "by_slot", "free");
    }
    let (status, _) = call(
        "pk-read",
        json!({"filters": [{"column": "id", "value": 2}]}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A write of a row that is there keeps what it does not give.
    let (status, body) = call("pk-write", json!({"row": {"id": 1, "tries": 4}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = call("pk-insert", json!({"row": {"id": 2, "slot": "taken"}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, row) = call(
        "pk-read",
        json!({"filters": [{"column": "id", "value": 1}]}),
    )
    .await;
    assert_eq!(
        (&row["data"]["slot"], &row["data"]["tries"]),
        (&json!("free"), &json!(4))
    );
}
