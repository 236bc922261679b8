//! OTLP export from outside: the control plane and a data node started
//! with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a receiver in this test,
//! which sees the control plane's request spans with their tenant and
//! database, and the node's per-database metrics.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::control::{Auth, Backend, Control};
use reqwest::{Method, StatusCode};
use serde_json::json;
use tokio::net::TcpListener;

const SECRET: &str = common::control::CLUSTER_SECRET;

/// What the receiver was sent: path and body of each request.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// An OTLP/HTTP receiver: takes every POST, answers 200.
async fn receiver() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let sink = Arc::clone(&received);
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri, body: axum::body::Bytes| {
        let sink = Arc::clone(&sink);
        async move {
            sink.lock()
                .unwrap()
                .push((uri.path().to_owned(), body.to_vec()));
            axum::http::StatusCode::OK
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// Whether any body sent to `path` holds every one of `needles`.
fn seen(received: &Received, path: &str, needles: &[&str]) -> bool {
    received.lock().unwrap().iter().any(|(p, body)| {
        p == path
            && needles
                .iter()
                .all(|n| body.windows(n.len()).any(|w| w == n.as_bytes()))
    })
}

#[tokio::test]
async fn spans_carry_the_tenant_and_metrics_the_databases_over_otlp() {
    let (endpoint, received) = receiver().await;
    let otel = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "300"),
    ];
    let cp = Control::start_env(Backend::Sqlite, &["--cluster-secret", SECRET], &otel);
    let disk = tempfile::tempdir().unwrap();
    let node = cp.data_node(disk.path(), &otel);
    let ada = cp.signup("ada@example.com", "analytical").await;
    let tenant = ada.user["tenant"]["id"].as_str().unwrap().to_owned();
    let guard = Instant::now();
    loop {
        let (status, _, _) = cp
            .call(
                Method::POST,
                "/databases",
                Some(&json!({"name": "shop"})),
                Auth::Bearer(&ada.token),
            )
            .await;
        if status == StatusCode::CREATED {
            break;
        }
        assert!(
            guard.elapsed() < Duration::from_secs(60),
            "the node never registered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, _, _) = cp
        .call(
            Method::GET,
            "/databases/shop",
            None,
            Auth::Bearer(&ada.token),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // A request through the data API, for the node's span and latency.
    let table =
        json!({"name": "t", "columns": [{"name": "k", "type": "BIGINT"}], "primary_key": ["k"]});
    let (status, _, _) = cp
        .call(
            Method::POST,
            "/databases/shop/tables",
            Some(&table),
            Auth::Bearer(&ada.token),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let grants = json!({"name": "k", "grants": [{"database": "shop", "role": "read_write"}]});
    let (_, _, made) = cp
        .call(
            Method::POST,
            "/api-keys",
            Some(&grants),
            Auth::Bearer(&ada.token),
        )
        .await;
    let response = reqwest::Client::new()
        .post(format!("{}/0.1.0/shop/t/pk-write", node.rest_url))
        .header("X-API-KEY", made["key"].as_str().unwrap())
        .json(&json!({"row": {"k": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    let started = Instant::now();
    loop {
        let spans = seen(
            &received,
            "/v1/traces",
            &[
                "shoal-control-plane",
                "tenant",
                &tenant,
                "database",
                "shop",
                "/api/v1/databases/:db",
            ],
        );
        let metrics = seen(
            &received,
            "/v1/metrics",
            &[
                "shoal-datanode",
                "shoal.database.memory",
                "shoal.database.request.duration",
                "shop",
                &tenant,
            ],
        );
        let data_span = seen(
            &received,
            "/v1/traces",
            &["shoal-datanode", "data request", "shop", &tenant],
        );
        if spans && metrics && data_span {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "spans {spans}, metrics {metrics}, data spans {data_span}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
