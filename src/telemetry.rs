//! Logs to stderr, and — when `OTEL_EXPORTER_OTLP_ENDPOINT` is set — traces
//! and metrics over OTLP (HTTP, protobuf) to that collector. The standard
//! `OTEL_*` variables configure the exporters (endpoint, headers, export
//! interval).

use std::sync::{Arc, Mutex};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The exporters to flush when the process stops.
#[derive(Default)]
pub(crate) struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
}

impl Telemetry {
    /// The meter provider, when metrics are exported.
    pub(crate) fn meter(&self) -> Option<&SdkMeterProvider> {
        self.meter.as_ref()
    }

    /// Exports what is buffered.
    pub(crate) fn shutdown(self) {
        if let Some(tracer) = self.tracer {
            let _ = tracer.shutdown();
        }
        if let Some(meter) = self.meter {
            let _ = meter.shutdown();
        }
    }
}

/// Sets up logging (at `level` unless `RUST_LOG` says otherwise), and OTLP
/// export if it is configured; `service` names this process to the collector.
pub(crate) fn init(service: &'static str, level: &'static str) -> anyhow::Result<Telemetry> {
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into());
    // Colour codes only for a person at a terminal: in a file or a log
    // collector they are noise.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter());
    if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_none() {
        tracing_subscriber::registry().with(fmt).init();
        return Ok(Telemetry::default());
    }
    let resource = Resource::builder().with_service_name(service).build();
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()?;
    let tracer = SdkTracerProvider::builder()
        .with_batch_exporter(spans)
        .with_resource(resource.clone())
        .build();
    let metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()?;
    let meter = SdkMeterProvider::builder()
        .with_periodic_exporter(metrics)
        .with_resource(resource)
        .build();
    // Spans of requests (target `shoal::request`, at debug level so that
    // they cost nothing unless exported) go to the collector, with every
    // span the logs see.
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer.tracer("shoal"))
        .with_filter(filter().add_directive("shoal::request=debug".parse()?));
    tracing_subscriber::registry().with(fmt).with(otel).init();
    tracing::info!(service, "exporting traces and metrics over OTLP");
    Ok(Telemetry {
        tracer: Some(tracer),
        meter: Some(meter),
    })
}

/// While it lives, the node's figures are exported; dropped, the exporter
/// lets go of the node (which can then stop its workers).
pub(crate) struct NodeMetrics(Arc<Mutex<Option<shoal_datanode::Engine>>>);

impl Drop for NodeMetrics {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// Exports each database's figures of `engine` over OTLP (when metrics are
/// exported): read when the exporter collects, nothing recorded per
/// request beyond the counters the node keeps anyway.
pub(crate) fn export_node_metrics(
    telemetry: &Telemetry,
    engine: &shoal_datanode::Engine,
) -> NodeMetrics {
    let tc = engine.tc();
    use opentelemetry::KeyValue;
    use opentelemetry::metrics::MeterProvider as _;
    use shoal_datanode::stats;

    let held = Arc::new(Mutex::new(Some(engine.clone())));
    let guard = NodeMetrics(Arc::clone(&held));
    let Some(provider) = telemetry.meter() else {
        held.lock().unwrap_or_else(|e| e.into_inner()).take();
        return guard;
    };
    // Every database's figures, while the node is there.
    let read = move || {
        held.lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(stats::databases)
            .unwrap_or_default()
    };
    let meter = provider.meter("shoal-datanode");
    let labels = |db: &stats::DatabaseStats| {
        vec![
            KeyValue::new("database", db.database.clone()),
            KeyValue::new("tenant", db.tenant.clone()),
        ]
    };
    let with = |mut l: Vec<KeyValue>, k: &'static str, v: &'static str| {
        l.push(KeyValue::new(k, v));
        l
    };
    let e = read.clone();
    meter
        .u64_observable_counter("shoal.database.requests")
        .with_description("Requests to a database by outcome")
        .with_callback(move |obs| {
            for db in e() {
                let l = labels(&db);
                obs.observe(
                    db.requests - db.failed.min(db.requests),
                    &with(l.clone(), "outcome", "ok"),
                );
                obs.observe(db.failed, &with(l.clone(), "outcome", "failed"));
                obs.observe(
                    db.throttled_reads + db.throttled_writes,
                    &with(l.clone(), "outcome", "throttled"),
                );
                obs.observe(db.quota_rejections, &with(l, "outcome", "quota_rejected"));
            }
        })
        .build();
    let e = read.clone();
    meter
        .u64_observable_counter("shoal.database.units")
        .with_description("Request units a database was charged")
        .with_callback(move |obs| {
            for db in e() {
                let l = labels(&db);
                obs.observe(db.read_units, &with(l.clone(), "kind", "read"));
                obs.observe(db.write_units, &with(l, "kind", "write"));
            }
        })
        .build();
    // Latency, recorded as requests finish (only while exporting).
    let histogram = meter
        .f64_histogram("shoal.database.request.duration")
        .with_description(
            "How long requests took in the transaction coordinator, durability included",
        )
        .with_unit("s")
        .with_boundaries(
            stats::latency_bounds_us()
                .iter()
                .map(|us| *us as f64 / 1e6)
                .collect(),
        )
        .build();
    tc.observe_latency(Some(shoal_datanode::LatencyObserver(Box::new(
        move |db, took| {
            let tenant = db
                .tenant
                .as_ref()
                .map_or(String::new(), |t| t.id.to_string());
            histogram.record(
                took.as_secs_f64(),
                &[
                    KeyValue::new("database", db.name.to_string()),
                    KeyValue::new("tenant", tenant),
                ],
            );
        },
    ))));
    let e = read;
    meter
        .u64_observable_gauge("shoal.database.memory")
        .with_description("DataMemory a database holds")
        .with_unit("By")
        .with_callback(move |obs| {
            for db in e() {
                obs.observe(db.memory_bytes, &labels(&db));
            }
        })
        .build();
    guard
}
