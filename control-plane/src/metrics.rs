//! `GET /metrics`: the control plane's figures as Prometheus text — its
//! HTTP requests by route and status with their latency, the tenants,
//! databases, keys and data nodes it manages, and each database's memory
//! as last metered. For platform admins and scrapers with the cluster
//! secret.

use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dashmap::DashMap;
use shoal_wire::prometheus::{self, family, label};
use tracing::Instrument;

use crate::error::ApiError;
use crate::server::App;
use crate::store::now_ms;

/// Upper bounds of the latency buckets, in seconds.
const BOUNDS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

#[derive(Debug, Default)]
struct Route {
    buckets: [AtomicU64; BOUNDS.len() + 1],
    sum_us: AtomicU64,
}

/// The HTTP figures, kept as requests are answered.
#[derive(Debug, Default)]
pub struct HttpMetrics {
    /// By (route template, method, status).
    requests: DashMap<(String, String, u16), AtomicU64>,
    /// By route template.
    latency: DashMap<String, Route>,
}

/// Counts every request of the API by its route's template — never its raw
/// path, so the series stay bounded whatever clients send.
pub async fn count(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    // `/databases/{db}` is written `/databases/:db`: braces inside label
    // values trip up simple scrapers.
    let route = request.extensions().get::<MatchedPath>().map_or_else(
        || "unmatched".to_owned(),
        |p| p.as_str().replace('{', ":").replace('}', ""),
    );
    let method = request.method().as_str().to_owned();
    let started = Instant::now();
    // A span per request, for the tracing exporter: which tenant and
    // database it concerned are recorded as they become known.
    let span = tracing::debug_span!(
        target: "shoal::request",
        "api request",
        http.route = %route,
        http.method = %method,
        http.status = tracing::field::Empty,
        tenant = tracing::field::Empty,
        database = tracing::field::Empty,
    );
    let response = next.run(request).instrument(span.clone()).await;
    span.record("http.status", response.status().as_u16());
    let took = started.elapsed();
    let metrics = &app.http_metrics;
    metrics
        .requests
        .entry((route.clone(), method, response.status().as_u16()))
        .or_default()
        .fetch_add(1, Ordering::Relaxed);
    let entry = metrics.latency.entry(route).or_default();
    let bucket = BOUNDS.partition_point(|&b| b < took.as_secs_f64());
    entry.buckets[bucket].fetch_add(1, Ordering::Relaxed);
    entry
        .sum_us
        .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    response
}

/// `GET /metrics`.
#[utoipa::path(get, path = "/metrics", tag = "service",
    responses((status = 200, description = "Prometheus text", content_type = "text/plain"),
        (status = 401, description = "Neither an admin's session nor the cluster secret", body = Object),
        (status = 403, description = "Not a platform admin", body = Object)))]
pub async fn render(State(app): State<Arc<App>>, headers: HeaderMap) -> Result<Response, ApiError> {
    crate::auth::admin_or_cluster(&app, &headers).await?;
    let mut out = String::with_capacity(8192);
    family(
        &mut out,
        "shoal_http_requests_total",
        "counter",
        "Requests to the control plane's API by route, method and status.",
    );
    let mut requests: Vec<_> = app
        .http_metrics
        .requests
        .iter()
        .map(|e| (e.key().clone(), e.value().load(Ordering::Relaxed)))
        .collect();
    requests.sort();
    for ((route, method, status), n) in requests {
        let _ = writeln!(
            out,
            "shoal_http_requests_total{{route=\"{}\",method=\"{method}\",status=\"{status}\"}} {n}",
            label(&route)
        );
    }
    family(
        &mut out,
        "shoal_http_request_duration_seconds",
        "histogram",
        "How long the API took to answer, by route.",
    );
    let mut routes: Vec<String> = app
        .http_metrics
        .latency
        .iter()
        .map(|e| e.key().clone())
        .collect();
    routes.sort();
    for route in routes {
        let Some(r) = app.http_metrics.latency.get(&route) else {
            continue;
        };
        let l = format!("route=\"{}\"", label(&route));
        let mut cumulative = 0;
        for (i, bound) in BOUNDS.iter().enumerate() {
            cumulative += r.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "shoal_http_request_duration_seconds_bucket{{{l},le=\"{bound}\"}} {cumulative}"
            );
        }
        cumulative += r.buckets[BOUNDS.len()].load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "shoal_http_request_duration_seconds_bucket{{{l},le=\"+Inf\"}} {cumulative}"
        );
        let _ = writeln!(
            out,
            "shoal_http_request_duration_seconds_sum{{{l}}} {}",
            r.sum_us.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(
            out,
            "shoal_http_request_duration_seconds_count{{{l}}} {cumulative}"
        );
    }

    let pool = &app.store.pool;
    family(&mut out, "shoal_tenants", "gauge", "Tenants by status.");
    let tenants: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, COUNT(*) FROM tenants GROUP BY status ORDER BY status")
            .fetch_all(pool)
            .await?;
    for (status, n) in tenants {
        let _ = writeln!(out, "shoal_tenants{{status=\"{}\"}} {n}", label(&status));
    }
    let (databases, tables, keys): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM databases WHERE status = 'ready'), \
                (SELECT COUNT(*) FROM tables WHERE status = 'ready'), \
                (SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL)",
    )
    .fetch_one(pool)
    .await?;
    family(
        &mut out,
        "shoal_databases",
        "gauge",
        "Databases on the platform.",
    );
    let _ = writeln!(out, "shoal_databases {databases}");
    family(&mut out, "shoal_tables", "gauge", "Tables on the platform.");
    let _ = writeln!(out, "shoal_tables {tables}");
    family(&mut out, "shoal_api_keys", "gauge", "API keys not revoked.");
    let _ = writeln!(out, "shoal_api_keys {keys}");
    let now = now_ms();
    let nodes = crate::nodes::all(&app).await?;
    family(
        &mut out,
        "shoal_datanodes",
        "gauge",
        "Registered data nodes by status.",
    );
    let up = nodes.iter().filter(|n| n.up(now)).count();
    let _ = writeln!(out, "shoal_datanodes{{status=\"up\"}} {up}");
    let _ = writeln!(
        out,
        "shoal_datanodes{{status=\"down\"}} {}",
        nodes.len() - up
    );
    family(
        &mut out,
        "shoal_datanode_memory_bytes",
        "gauge",
        "Each data node's DataMemory, used and total, as last reported.",
    );
    for n in &nodes {
        let _ = writeln!(
            out,
            "shoal_datanode_memory_bytes{{node_id=\"{}\",kind=\"used\"}} {}",
            n.node_id, n.used_bytes
        );
        let _ = writeln!(
            out,
            "shoal_datanode_memory_bytes{{node_id=\"{}\",kind=\"total\"}} {}",
            n.node_id, n.data_memory_bytes
        );
    }
    family(
        &mut out,
        "shoal_metered_database_memory_bytes",
        "gauge",
        "Each database's memory at its latest metered sample.",
    );
    let latest: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT s.tenant_id, s.database_name, s.memory_bytes FROM usage_samples s \
         WHERE s.resolution = 'raw' AND s.table_name = '' AND s.at = \
           (SELECT MAX(at) FROM usage_samples l WHERE l.resolution = 'raw' AND l.table_name = '' \
            AND l.database_name = s.database_name) ORDER BY s.database_name",
    )
    .fetch_all(pool)
    .await?;
    for (tenant, db, bytes) in latest {
        let _ = writeln!(
            out,
            "shoal_metered_database_memory_bytes{{tenant=\"{}\",database=\"{}\"}} {bytes}",
            label(&tenant),
            label(&db)
        );
    }
    let mut response = out.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(prometheus::CONTENT_TYPE),
    );
    Ok(response)
}
