//! A data node whose LDM worker panics in the middle of an operation fails
//! closed: it answers nothing more from its fragments (one may be
//! half-changed), says so in its health, keeps no checkpoint of them, and
//! after a restart serves every write it acknowledged and none it did not.
//! The panic comes from a failpoint of the `testing` build: a write whose
//! key holds the bytes of `SHOAL_FAILPOINT_PANIC_KEY`.

mod common;

use common::Shoal;
use reqwest::StatusCode;
use serde_json::{Value, json};

const PANIC_KEY: &str = "failpoint-panics-here";

/// A node with the failpoint armed, in `dir`, with tenant `acme`'s database
/// `cache`, its table `items` as `items` defines it, and a read-write key.
async fn armed(args: &[&str], dir: &std::path::Path, items: Value) -> (Shoal, String) {
    let shoal = Shoal::start_in_env(args, &[("SHOAL_FAILPOINT_PANIC_KEY", PANIC_KEY)], dir);
    shoal.create_database("acme", "cache").await;
    let (status, body) = shoal
        .post("/internal/v1/databases/cache/tables", items)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let key = shoal.create_key("acme", &[("cache", "read_write")]).await;
    (shoal, key)
}

async fn rest(shoal: &Shoal, key: &str, op: &str, body: Value) -> (StatusCode, Value) {
    let r = common::client()
        .post(format!("{}/0.1.0/cache/items/{op}", shoal.rest_url))
        .header("x-api-key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap())
}

async fn read_item(shoal: &Shoal, key: &str) -> (StatusCode, Value) {
    let filters = json!({"filters": [{"column": "id", "value": 1}]});
    rest(shoal, key, "pk-read", filters).await
}

async fn health(shoal: &Shoal) -> (StatusCode, Value, StatusCode) {
    let r = reqwest::get(format!("{}/0.1.0/health", shoal.rest_url))
        .await
        .unwrap();
    let rest = r.status();
    let body = r.json().await.unwrap();
    let internal = reqwest::get(shoal.url("/internal/v1/healthz"))
        .await
        .unwrap()
        .status();
    (rest, body, internal)
}

fn redis(shoal: &Shoal, key: &str) -> redis::Connection {
    redis::Client::open(format!("redis://cache:{key}@{}/", shoal.resp_addr))
        .unwrap()
        .get_connection()
        .unwrap()
}

#[tokio::test]
async fn a_panicking_worker_fails_the_node_and_a_restart_serves_what_was_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["datanode", "--data-memory", "64M", "--ldm-threads", "1"];
    let items = json!({"name": "items", "primary_key": ["id"], "columns": [
        {"name": "id", "type": "BIGINT"}, {"name": "name", "type": "VARCHAR(100)"}]});
    let (shoal, key) = armed(&args, dir.path(), items).await;

    // Acknowledged before the failure: over Redis and over REST.
    let mut conn = redis(&shoal, &key);
    let set: String = redis::cmd("SET")
        .arg("kept")
        .arg("before")
        .query(&mut conn)
        .unwrap();
    assert_eq!(set, "OK");
    let (status, body) = rest(
        &shoal,
        &key,
        "pk-insert",
        json!({"row": {"id": 1, "name": "kept"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(health(&shoal).await.0, StatusCode::OK);

    // The write that panics the worker midway is refused, not acknowledged.
    let refused: redis::RedisResult<String> = redis::cmd("SET")
        .arg(PANIC_KEY)
        .arg("never acknowledged")
        .query(&mut conn);
    let e = refused.expect_err("a write whose worker panicked is refused");
    assert!(
        e.to_string().contains("the data node has failed"),
        "Redis says why: {e}"
    );

    // From now on nothing is served from the fragments, on any protocol.
    let read: redis::RedisResult<Option<String>> = redis::cmd("GET")
        .arg("kept")
        .query(&mut redis(&shoal, &key));
    let e = read.expect_err("a failed node serves no reads");
    assert!(e.to_string().contains("the data node has failed"), "{e}");
    let size: redis::RedisResult<i64> = redis::cmd("DBSIZE").query(&mut redis(&shoal, &key));
    assert!(size.is_err(), "a failed node counts no keys: {size:?}");
    let (status, body) = read_item(&shoal, &key).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "NODE_FAILED", "{body}");
    let (rest_health, body, internal_health) = health(&shoal).await;
    assert_eq!(rest_health, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["status"], "failed", "{body}");
    assert!(
        body["reason"].as_str().unwrap().contains("panicked"),
        "{body}"
    );
    assert_eq!(internal_health, StatusCode::SERVICE_UNAVAILABLE);
    let (status, body) = shoal.post("/internal/v1/checkpoint", json!({})).await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "no checkpoint of a failed node: {body}"
    );
    let (status, body) = shoal
        .send(
            reqwest::Method::GET,
            "/internal/v1/ndbinfo/table_memory_usage",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");

    // A stop takes no checkpoint of the half-changed fragment and says so.
    let (code, stderr) = shoal.terminate();
    assert!(stderr.contains("LDM worker panicked"), "{stderr}");
    assert_ne!(code, Some(0), "a failed node does not stop cleanly");

    // Restarted without the failpoint: every acknowledged write, and not
    // the one that was refused.
    let shoal = Shoal::start_in(&args, dir.path());
    assert_eq!(health(&shoal).await.0, StatusCode::OK);
    let mut conn = redis(&shoal, &key);
    let kept: Option<String> = redis::cmd("GET").arg("kept").query(&mut conn).unwrap();
    assert_eq!(kept.as_deref(), Some("before"));
    let lost: Option<String> = redis::cmd("GET").arg(PANIC_KEY).query(&mut conn).unwrap();
    assert_eq!(lost, None, "a refused write is not there after a restart");
    let (status, body) = read_item(&shoal, &key).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["name"], "kept", "{body}");
    shoal.kill();
}

#[tokio::test]
async fn a_write_over_rest_that_panics_its_worker_is_refused_and_nothing_more_is_served() {
    let args = ["datanode", "--data-memory", "64M"];
    let dir = tempfile::tempdir().unwrap();
    let items = json!({"name": "items", "primary_key": ["name"], "columns": [
        {"name": "name", "type": "VARCHAR(100)"}]});
    let (shoal, key) = armed(&args, dir.path(), items).await;
    let row = |name: &str| json!({"row": {"name": name}});
    let (status, body) = rest(&shoal, &key, "pk-insert", row("kept")).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let (status, body) = rest(&shoal, &key, "pk-insert", row(PANIC_KEY)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "NODE_FAILED", "{body}");
    // Every later request is refused the same way, over REST and Redis.
    for _ in 0..3 {
        let (status, body) = rest(&shoal, &key, "pk-insert", row("later")).await;
        assert_eq!(body["error"]["code"], "NODE_FAILED", "{status} {body}");
    }
    let set: redis::RedisResult<String> = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut redis(&shoal, &key));
    assert!(set.is_err(), "{set:?}");
    assert_eq!(health(&shoal).await.0, StatusCode::SERVICE_UNAVAILABLE);

    // Killed and restarted: the acknowledged row, not the refused one.
    shoal.kill();
    let shoal = Shoal::start_in(&args, dir.path());
    let read = |name: &str| json!({"filters": [{"column": "name", "value": name}]});
    let (status, body) = rest(&shoal, &key, "pk-read", read("kept")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = rest(&shoal, &key, "pk-read", read(PANIC_KEY)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    shoal.kill();
}
