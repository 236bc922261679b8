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
