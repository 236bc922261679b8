//! OTLP export from outside: the control plane and a data node started
//! with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a receiver in this test,
//! which sees the control plane's request spans with their tenant and
//! database, and the node's per-database metrics.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Shoal;
use common::control::{Auth, Backend, Control};
use reqwest::{Method, StatusCode};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

const SECRET: &str = "a-cluster-secret-of-at-least-32-characters";

/// What the receiver was sent: path and body of each request.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// An OTLP/HTTP receiver: takes every POST, answers 200.
async fn receiver() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let sink = Arc::clone(&received);
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let sink = Arc::clone(&sink);
            tokio::spawn(async move {
                let mut socket = BufReader::new(socket);
                loop {
                    let mut request_line = String::new();
                    if socket.read_line(&mut request_line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let path = request_line
                        .split_whitespace()
                        .nth(1)
                        .unwrap_or("")
                        .to_owned();
                    let mut length = 0;
                    loop {
                        let mut header = String::new();
                        socket.read_line(&mut header).await.unwrap();
                        let header = header.trim_end();
                        if header.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = header.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    socket.read_exact(&mut body).await.unwrap();
                    sink.lock().unwrap().push((path, body));
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    socket.get_mut().write_all(ok).await.unwrap();
                }
            });
        }
    });
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
    let control_plane = cp.shoal.control_url.clone();
    let _node = Shoal::start_in_env(
        &[
            "datanode",
            "--control-plane",
            &control_plane,
            "--cluster-secret",
            SECRET,
            "--data-memory",
            "64M",
            "--ldm-threads",
            "1",
        ],
        &otel,
        disk.path(),
    );
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
            &["shoal-datanode", "shoal.database.memory", "shop", &tenant],
        );
        if spans && metrics {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "spans {spans}, metrics {metrics}; received {:?}",
            received
                .lock()
                .unwrap()
                .iter()
                .map(|(p, b)| (p.clone(), b.len()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
