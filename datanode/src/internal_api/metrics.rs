//! `GET /metrics`: the node's figures as Prometheus text — per database
//! (requests by outcome, units, memory against its quota, request latency)
//! and for the node (DataMemory, redo syncs).

use std::fmt::Write;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use shoal_wire::prometheus::{self, family, label};

use super::AppState;
use crate::node::stats::{self, DatabaseStats};

pub(super) async fn render(State(state): State<AppState>) -> Response {
    let engine = &state.engine;
    let mut out = String::with_capacity(4096);
    let databases = stats::databases(engine);
    let labels = |db: &DatabaseStats| {
        format!(
            "database=\"{}\",tenant=\"{}\"",
            label(&db.database),
            label(&db.tenant)
        )
    };
    // One family: a line per database, with `extra` labels and a value.
    let mut each = |name: &str,
                    kind: &str,
                    help: &str,
                    lines: &dyn Fn(&DatabaseStats) -> Vec<(String, String)>| {
        family(&mut out, name, kind, help);
        for db in &databases {
            let l = labels(db);
            // A histogram's bucket lines carry the `_bucket` suffix.
            let line = if kind == "histogram" {
                format!("{name}_bucket")
            } else {
                name.to_owned()
            };
            for (extra, value) in lines(db) {
                let _ = writeln!(out, "{line}{{{l}{extra}}} {value}");
            }
        }
    };
    each(
        "shoal_database_requests_total",
        "counter",
        "Requests to a database by outcome: ok and failed ran; throttled and quota_rejected were refused.",
        &|db| {
            vec![
                (
                    ",outcome=\"ok\"".into(),
                    db.requests.saturating_sub(db.failed).to_string(),
                ),
                (",outcome=\"failed\"".into(), db.failed.to_string()),
                (
                    ",outcome=\"throttled\"".into(),
                    (db.throttled_reads + db.throttled_writes).to_string(),
                ),
                (
                    ",outcome=\"quota_rejected\"".into(),
                    db.quota_rejections.to_string(),
                ),
            ]
        },
    );
    each(
        "shoal_database_units_total",
        "counter",
        "Request units a database was charged: read units per started 4 KiB of a row read, write units per started 1 KiB written.",
        &|db| {
            vec![
                (",kind=\"read\"".into(), db.read_units.to_string()),
                (",kind=\"write\"".into(), db.write_units.to_string()),
            ]
        },
    );
    each(
        "shoal_database_throttled_total",
        "counter",
        "Requests of a database refused for its read or write rate.",
        &|db| {
            vec![
                (",kind=\"read\"".into(), db.throttled_reads.to_string()),
                (",kind=\"write\"".into(), db.throttled_writes.to_string()),
            ]
        },
    );
    each(
        "shoal_database_memory_bytes",
        "gauge",
        "DataMemory a database holds, in bytes.",
        &|db| vec![(String::new(), db.memory_bytes.to_string())],
    );
    each(
        "shoal_database_memory_quota_bytes",
        "gauge",
        "A database's memory quota, in bytes (databases without one are left out).",
        &|db| {
            db.memory_quota_bytes
                .map(|q| (String::new(), q.to_string()))
                .into_iter()
                .collect()
        },
    );
    each(
        "shoal_database_request_duration_seconds",
        "histogram",
        "How long the requests a database ran took in the transaction coordinator, durability included.",
        &|db| {
            let mut lines = Vec::new();
            let mut cumulative = 0;
            for (bound, count) in stats::latency_bounds_us().iter().zip(&db.latency_counts) {
                cumulative += count;
                lines.push((
                    format!(",le=\"{}\"", *bound as f64 / 1e6),
                    cumulative.to_string(),
                ));
            }
            cumulative += db.latency_counts.last().copied().unwrap_or(0);
            lines.push((",le=\"+Inf\"".into(), cumulative.to_string()));
            lines
        },
    );
    // The histogram's sum and count lines carry other names.
    for db in &databases {
        let l = labels(db);
        let count: u64 = db.latency_counts.iter().sum();
        let _ = writeln!(
            out,
            "shoal_database_request_duration_seconds_sum{{{l}}} {}",
            db.latency_sum_us as f64 / 1e6
        );
        let _ = writeln!(
            out,
            "shoal_database_request_duration_seconds_count{{{l}}} {count}"
        );
    }
    let pool = engine.data_memory();
    family(
        &mut out,
        "shoal_datamemory_bytes",
        "gauge",
        "The node's DataMemory: used and total, in bytes.",
    );
    let _ = writeln!(
        out,
        "shoal_datamemory_bytes{{kind=\"used\"}} {}",
        pool.used_bytes()
    );
    let _ = writeln!(
        out,
        "shoal_datamemory_bytes{{kind=\"total\"}} {}",
        pool.total_bytes()
    );
    if let Some(log) = engine.log() {
        family(
            &mut out,
            "shoal_redo_syncs_total",
            "counter",
            "Syncs of the redo log to disk.",
        );
        let _ = writeln!(out, "shoal_redo_syncs_total {}", log.syncs());
    }
    family(&mut out, "shoal_node_info", "gauge", "The data node's id.");
    let _ = writeln!(out, "shoal_node_info{{node_id=\"{}\"}} 1", engine.node_id());

    let mut response = out.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(prometheus::CONTENT_TYPE),
    );
    response
}
