//! What each database has done since the node started, read at once for
//! the exporters (Prometheus text, OTLP metrics).

use crate::node::Engine;
use crate::tc::{LATENCY_BOUNDS_US, counter};

/// A database's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseStats {
    pub database: String,
    /// The tenant's id; empty for a database of no tenant.
    pub tenant: String,
    /// Requests run past every check, and those that failed.
    pub requests: u64,
    pub failed: u64,
    pub throttled_reads: u64,
    pub throttled_writes: u64,
    pub quota_rejections: u64,
    pub read_units: u64,
    pub write_units: u64,
    pub memory_bytes: u64,
    pub memory_quota_bytes: Option<u64>,
    /// Requests per latency bucket (not cumulative): one per bound of
    /// `latency_bounds_us`, and one more for everything slower.
    pub latency_counts: Vec<u64>,
    pub latency_sum_us: u64,
}

/// The upper bounds of the latency buckets, in microseconds.
pub fn latency_bounds_us() -> &'static [u64] {
    &LATENCY_BOUNDS_US
}

/// Every database's figures.
pub fn databases(engine: &Engine) -> Vec<DatabaseStats> {
    engine
        .databases()
        .iter()
        .map(|db| {
            let c = &db.governance.counters;
            let (latency_counts, latency_sum_us) = c.latency.read();
            DatabaseStats {
                database: db.name.to_string(),
                tenant: db
                    .tenant
                    .as_ref()
                    .map_or(String::new(), |t| t.id.to_string()),
                requests: counter(&c.requests),
                failed: counter(&c.failed),
                throttled_reads: counter(&c.throttled_reads),
                throttled_writes: counter(&c.throttled_writes),
                quota_rejections: counter(&c.quota_rejections),
                read_units: counter(&c.read_units),
                write_units: counter(&c.write_units),
                memory_bytes: db.memory_bytes(),
                memory_quota_bytes: db.quota().in_memory_bytes,
                latency_counts: latency_counts.to_vec(),
                latency_sum_us,
            }
        })
        .collect()
}
