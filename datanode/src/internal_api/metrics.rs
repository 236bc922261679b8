//! `GET /metrics`: the node's figures as Prometheus text — per database
//! (requests by outcome, units, memory against its quota, request latency)
//! and for the node (DataMemory, redo syncs).

use std::fmt::Write;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use shoal_wire::prometheus::{self, family, label};

use super::AppState;
use crate::tc::{LATENCY_BOUNDS_US, counter};

pub(super) async fn render(State(state): State<AppState>) -> Response {
    let engine = state.tc.engine();
    let mut out = String::with_capacity(4096);
    let databases = engine.databases();
    let labels = |db: &crate::catalog::Database| {
        let tenant = db
            .tenant
            .as_ref()
            .map_or(String::new(), |t| t.id.to_string());
        format!(
            "database=\"{}\",tenant=\"{}\"",
            label(db.name.as_str()),
            label(&tenant)
        )
    };

    family(
        &mut out,
        "shoal_database_requests_total",
        "counter",
        "Requests to a database by outcome: ok and failed ran; throttled and quota_rejected were refused.",
    );
    for db in &databases {
        let c = &db.governance.counters;
        let (requests, failed) = (counter(&c.requests), counter(&c.failed));
        let l = labels(db);
        let _ = writeln!(
            out,
            "shoal_database_requests_total{{{l},outcome=\"ok\"}} {}",
            requests.saturating_sub(failed)
        );
        let _ = writeln!(
            out,
            "shoal_database_requests_total{{{l},outcome=\"failed\"}} {failed}"
        );
        let throttled = counter(&c.throttled_reads) + counter(&c.throttled_writes);
        let _ = writeln!(
            out,
            "shoal_database_requests_total{{{l},outcome=\"throttled\"}} {throttled}"
        );
        let _ = writeln!(
            out,
            "shoal_database_requests_total{{{l},outcome=\"quota_rejected\"}} {}",
            counter(&c.quota_rejections)
        );
    }
    family(
        &mut out,
        "shoal_database_units_total",
        "counter",
        "Request units a database was charged: read units per started 4 KiB of a row read, write units per started 1 KiB written.",
    );
    for db in &databases {
        let c = &db.governance.counters;
        let l = labels(db);
        let _ = writeln!(
            out,
            "shoal_database_units_total{{{l},kind=\"read\"}} {}",
            counter(&c.read_units)
        );
        let _ = writeln!(
            out,
            "shoal_database_units_total{{{l},kind=\"write\"}} {}",
            counter(&c.write_units)
        );
    }
    family(
        &mut out,
        "shoal_database_throttled_total",
        "counter",
        "Requests of a database refused for its read or write rate.",
    );
    for db in &databases {
        let c = &db.governance.counters;
        let l = labels(db);
        let _ = writeln!(
            out,
            "shoal_database_throttled_total{{{l},kind=\"read\"}} {}",
            counter(&c.throttled_reads)
        );
        let _ = writeln!(
            out,
            "shoal_database_throttled_total{{{l},kind=\"write\"}} {}",
            counter(&c.throttled_writes)
        );
    }
    family(
        &mut out,
        "shoal_database_memory_bytes",
        "gauge",
        "DataMemory a database holds, in bytes.",
    );
    for db in &databases {
        let _ = writeln!(
            out,
            "shoal_database_memory_bytes{{{}}} {}",
            labels(db),
            db.memory_bytes()
        );
    }
    family(
        &mut out,
        "shoal_database_memory_quota_bytes",
        "gauge",
        "A database's memory quota, in bytes (databases without one are left out).",
    );
    for db in &databases {
        if let Some(limit) = db.quota().in_memory_bytes {
            let _ = writeln!(
                out,
                "shoal_database_memory_quota_bytes{{{}}} {limit}",
                labels(db)
            );
        }
    }
    family(
        &mut out,
        "shoal_database_request_duration_seconds",
        "histogram",
        "How long the requests a database ran took in the transaction coordinator, durability included.",
    );
    for db in &databases {
        let (counts, sum_us) = db.governance.counters.latency.read();
        let l = labels(db);
        let mut cumulative = 0;
        for (bound, count) in LATENCY_BOUNDS_US.iter().zip(counts) {
            cumulative += count;
            let le = *bound as f64 / 1e6;
            let _ = writeln!(
                out,
                "shoal_database_request_duration_seconds_bucket{{{l},le=\"{le}\"}} {cumulative}"
            );
        }
        cumulative += counts[LATENCY_BOUNDS_US.len()];
        let _ = writeln!(
            out,
            "shoal_database_request_duration_seconds_bucket{{{l},le=\"+Inf\"}} {cumulative}"
        );
        let _ = writeln!(
            out,
            "shoal_database_request_duration_seconds_sum{{{l}}} {}",
            sum_us as f64 / 1e6
        );
        let _ = writeln!(
            out,
            "shoal_database_request_duration_seconds_count{{{l}}} {cumulative}"
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
