//! What a run measured and how it is written out: HDR latency histograms,
//! a progress line every few seconds, `final_result.txt` (one line per
//! thread count, as RonDB's bench scripts write it), a JSON file with every
//! figure, and an SVG chart of throughput and p99 against threads.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::client::Outcome;
use super::workload::Kind;

/// Latencies are kept in microseconds, from 1 µs to a minute, to 3
/// significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

/// Counts and latencies of a stretch of a run.
#[derive(Debug, Clone)]
pub(crate) struct Recorder {
    pub(crate) latency: Histogram<u64>,
    pub(crate) by_kind: BTreeMap<Kind, Histogram<u64>>,
    /// Rows the operations read or wrote (a lookup of 100 keys: 100).
    pub(crate) rows: u64,
    pub(crate) missing: u64,
    pub(crate) throttled: u64,
    pub(crate) failed: u64,
    /// Failed operations by kind (`failure_kind`).
    pub(crate) failures: BTreeMap<String, u64>,
    pub(crate) first_failure: Option<String>,
}

/// What kind of failure `why` is: a REST answer's status and code
/// (`503 PRIMARY_CHANGED`), a broken connection (`connection`), or a Redis
/// error's first word (`ERR`, `NOAUTH`).
pub(crate) fn failure_kind(why: &str) -> String {
    let mut words = why.split_whitespace();
    let first = words.next().unwrap_or("unknown").trim_end_matches(':');
    let kind = match first.parse::<u16>() {
        Ok(_) => match words.next() {
            Some(code) if code.chars().all(|c| c.is_ascii_uppercase() || c == '_') => {
                format!("{first} {code}")
            }
            _ => first.to_owned(),
        },
        Err(_) => first.to_owned(),
    };
    kind.chars().take(64).collect()
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder {
            latency: histogram(),
            by_kind: BTreeMap::new(),
            rows: 0,
            missing: 0,
            throttled: 0,
            failed: 0,
            failures: BTreeMap::new(),
            first_failure: None,
        }
    }
}

impl Recorder {
    /// Records one operation of `rows` rows that took `latency` and ended
    /// with `outcome`. Refused and failed operations are counted, not timed.
    pub(crate) fn record(&mut self, kind: Kind, rows: usize, latency: Duration, outcome: &Outcome) {
        match outcome {
            Outcome::Done { found } => {
                let micros = (latency.as_micros() as u64).clamp(1, 60_000_000);
                self.latency.saturating_record(micros);
                self.by_kind
                    .entry(kind)
                    .or_insert_with(histogram)
                    .saturating_record(micros);
                self.rows += rows as u64;
                if matches!(kind, Kind::Read | Kind::Lookup | Kind::ReadModifyWrite) {
                    self.missing += rows.saturating_sub(*found) as u64;
                }
            }
            Outcome::Throttled => self.throttled += 1,
            Outcome::Failed(why) => {
                self.failed += 1;
                *self.failures.entry(failure_kind(why)).or_default() += 1;
                self.first_failure.get_or_insert_with(|| why.clone());
            }
        }
    }

    pub(crate) fn add(&mut self, other: &Recorder) {
        self.latency.add(&other.latency).expect("same bounds");
        for (kind, h) in &other.by_kind {
            self.by_kind
                .entry(*kind)
                .or_insert_with(histogram)
                .add(h)
                .expect("same bounds");
        }
        self.rows += other.rows;
        self.missing += other.missing;
        self.throttled += other.throttled;
        self.failed += other.failed;
        for (kind, n) in &other.failures {
            *self.failures.entry(kind.clone()).or_default() += n;
        }
        if self.first_failure.is_none() {
            self.first_failure.clone_from(&other.first_failure);
        }
    }

    /// Operations that completed.
    pub(crate) fn ops(&self) -> u64 {
        self.latency.len()
    }
}

/// Latency figures in milliseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub(crate) struct Latency {
    pub(crate) mean: f64,
    pub(crate) p50: f64,
    pub(crate) p95: f64,
    pub(crate) p99: f64,
    pub(crate) p999: f64,
    pub(crate) max: f64,
}

impl Latency {
    pub(crate) fn of(h: &Histogram<u64>) -> Latency {
        let ms = |micros: u64| micros as f64 / 1000.0;
        Latency {
            mean: h.mean() / 1000.0,
            p50: ms(h.value_at_quantile(0.50)),
            p95: ms(h.value_at_quantile(0.95)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

/// One kind of operation in a run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct KindResult {
    pub(crate) ops: u64,
    pub(crate) latency_ms: Latency,
}

/// One run: one thread count.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunResult {
    pub(crate) threads: usize,
    pub(crate) seconds: f64,
    /// The target rate of all threads together, when the run had one.
    pub(crate) target_ops_per_sec: Option<f64>,
    pub(crate) ops: u64,
    pub(crate) ops_per_sec: f64,
    pub(crate) rows_per_sec: f64,
    pub(crate) missing_rows: u64,
    pub(crate) throttled: u64,
    pub(crate) failed: u64,
    /// Failed operations by kind: `503 PRIMARY_CHANGED`, `connection`, ...
    pub(crate) failures: BTreeMap<String, u64>,
    pub(crate) first_failure: Option<String>,
    pub(crate) latency_ms: Latency,
    pub(crate) by_kind: BTreeMap<Kind, KindResult>,
}

impl RunResult {
    pub(crate) fn new(
        threads: usize,
        elapsed: Duration,
        target: Option<f64>,
        r: &Recorder,
    ) -> RunResult {
        let seconds = elapsed.as_secs_f64().max(1e-9);
        RunResult {
            threads,
            seconds,
            target_ops_per_sec: target,
            ops: r.ops(),
            ops_per_sec: r.ops() as f64 / seconds,
            rows_per_sec: r.rows as f64 / seconds,
            missing_rows: r.missing,
            throttled: r.throttled,
            failed: r.failed,
            failures: r.failures.clone(),
            first_failure: r.first_failure.clone(),
            latency_ms: Latency::of(&r.latency),
            by_kind: r
                .by_kind
                .iter()
                .map(|(kind, h)| {
                    (
                        *kind,
                        KindResult {
                            ops: h.len(),
                            latency_ms: Latency::of(h),
                        },
                    )
                })
                .collect(),
        }
    }
}

/// The line printed every few seconds: the figures of the last stretch.
pub(crate) fn progress_line(
    at: Duration,
    threads: usize,
    window: &Recorder,
    span: Duration,
) -> String {
    let mut line = format!(
        "[{:>3}s] threads: {threads}, ops/s: {:.1}, p95: {:.3} ms",
        at.as_secs(),
        window.ops() as f64 / span.as_secs_f64().max(1e-9),
        window.latency.value_at_quantile(0.95) as f64 / 1000.0,
    );
    if window.throttled > 0 {
        let _ = write!(line, ", throttled: {}", window.throttled);
    }
    if window.failed > 0 {
        let _ = write!(line, ", failed: {}", window.failed);
    }
    line
}

/// `final_result.txt`: `Threads: <n> Mean: <ops/s>` per run.
pub(crate) fn final_result(runs: &[RunResult]) -> String {
    runs.iter()
        .map(|r| format!("Threads: {} Mean: {:.0}\n", r.threads, r.ops_per_sec))
        .collect()
}

/// An SVG line chart: throughput (left axis) and p99 latency (right axis)
/// against the thread count.
pub(crate) fn chart(title: &str, runs: &[RunResult]) -> String {
    const W: f64 = 640.0;
    const H: f64 = 360.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 70.0;
    const TOP: f64 = 40.0;
    const BOTTOM: f64 = 50.0;
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let max_ops = nice_max(runs.iter().map(|r| r.ops_per_sec).fold(0.0, f64::max));
    let max_p99 = nice_max(runs.iter().map(|r| r.latency_ms.p99).fold(0.0, f64::max));
    let x = |i: usize| {
        if runs.len() <= 1 {
            LEFT + plot_w / 2.0
        } else {
            LEFT + plot_w * i as f64 / (runs.len() - 1) as f64
        }
    };
    let y = |v: f64, max: f64| TOP + plot_h - plot_h * v / max;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="{W}" height="{H}" fill="#fff"/>
<text x="{cx}" y="22" text-anchor="middle" font-size="14">{title}</text>
<line x1="{LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>
<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#333"/>
<line x1="{right}" y1="{TOP}" x2="{right}" y2="{bottom}" stroke="#333"/>
"##,
        cx = W / 2.0,
        title = escape(title),
        bottom = TOP + plot_h,
        right = LEFT + plot_w,
    );
    for tick in 0..=4 {
        let f = tick as f64 / 4.0;
        let ty = TOP + plot_h - plot_h * f;
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{ty}" x2="{r}" y2="{ty}" stroke="#eee"/><text x="{lx}" y="{ty2}" text-anchor="end" fill="#1f5fa8">{ops}</text><text x="{rx}" y="{ty2}" fill="#c0392b">{p99}</text>"##,
            r = LEFT + plot_w,
            lx = LEFT - 6.0,
            rx = LEFT + plot_w + 6.0,
            ty2 = ty + 4.0,
            ops = short(max_ops * f),
            p99 = format_ms(max_p99 * f),
        );
    }
    for (i, run) in runs.iter().enumerate() {
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="middle">{}</text>"##,
            x(i),
            TOP + plot_h + 18.0,
            run.threads
        );
    }
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="{}" text-anchor="middle">threads</text>"##,
        LEFT + plot_w / 2.0,
        H - 10.0
    );
    for (color, label, value, max, lx) in [
        (
            "#1f5fa8",
            "ops/s",
            (|r: &RunResult| r.ops_per_sec) as fn(&RunResult) -> f64,
            max_ops,
            LEFT,
        ),
        (
            "#c0392b",
            "p99 ms",
            |r: &RunResult| r.latency_ms.p99,
            max_p99,
            LEFT + plot_w,
        ),
    ] {
        let points: Vec<String> = runs
            .iter()
            .enumerate()
            .map(|(i, r)| format!("{:.1},{:.1}", x(i), y(value(r), max)))
            .collect();
        let _ = writeln!(
            svg,
            r##"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"##,
            points.join(" ")
        );
        for p in &points {
            let (px, py) = p.split_once(',').expect("x,y");
            let _ = writeln!(
                svg,
                r##"<circle cx="{px}" cy="{py}" r="3" fill="{color}"/>"##
            );
        }
        let _ = writeln!(
            svg,
            r##"<text x="{lx}" y="{}" text-anchor="middle" fill="{color}">{label}</text>"##,
            TOP - 8.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// 1, 2 or 5 times a power of ten, at or above `v`.
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|&n| n >= v)
        .unwrap_or(10.0 * p)
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn format_ms(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(threads: usize, ops: u64, latency_us: u64) -> RunResult {
        let mut r = Recorder::default();
        for _ in 0..ops {
            r.record(
                Kind::Read,
                1,
                Duration::from_micros(latency_us),
                &Outcome::Done { found: 1 },
            );
        }
        r.record(Kind::Read, 1, Duration::ZERO, &Outcome::Throttled);
        r.record(
            Kind::Update,
            1,
            Duration::ZERO,
            &Outcome::Failed("boom".into()),
        );
        RunResult::new(threads, Duration::from_secs(2), None, &r)
    }

    #[test]
    fn failures_are_counted_by_kind() {
        assert_eq!(
            failure_kind("503 PRIMARY_CHANGED data node 1 stopped"),
            "503 PRIMARY_CHANGED"
        );
        assert_eq!(failure_kind("421 NOT_PRIMARY"), "421 NOT_PRIMARY");
        assert_eq!(failure_kind("500 oops"), "500");
        assert_eq!(
            failure_kind("connection: error sending request"),
            "connection"
        );
        assert_eq!(failure_kind("ERR unknown command"), "ERR");
        assert_eq!(failure_kind(""), "unknown");
        assert_eq!(failure_kind(&"x".repeat(500)).len(), 64);
    }

    #[test]
    fn a_run_counts_completed_refused_and_failed_operations() {
        let r = run(4, 1000, 250);
        assert_eq!((r.ops, r.throttled, r.failed), (1000, 1, 1));
        assert_eq!(r.ops_per_sec, 500.0);
        assert_eq!(r.first_failure.as_deref(), Some("boom"));
        assert!(
            (r.latency_ms.p99 - 0.25).abs() < 0.001,
            "{:?}",
            r.latency_ms
        );
        assert_eq!(r.by_kind[&Kind::Read].ops, 1000);
        assert!(
            !r.by_kind.contains_key(&Kind::Update),
            "failures are not timed"
        );
    }

    #[test]
    fn missing_rows_are_counted_for_reads() {
        let mut r = Recorder::default();
        r.record(
            Kind::Lookup,
            100,
            Duration::from_micros(900),
            &Outcome::Done { found: 97 },
        );
        r.record(
            Kind::Update,
            1,
            Duration::from_micros(900),
            &Outcome::Done { found: 1 },
        );
        assert_eq!((r.rows, r.missing), (101, 3));
    }

    #[test]
    fn final_result_has_a_line_per_thread_count() {
        let runs = [run(1, 100, 100), run(12, 2663, 100)];
        assert_eq!(
            final_result(&runs),
            "Threads: 1 Mean: 50\nThreads: 12 Mean: 1332\n"
        );
    }

    #[test]
    fn progress_lines_look_like_ronbds() {
        let mut w = Recorder::default();
        for _ in 0..300 {
            w.record(
                Kind::Read,
                1,
                Duration::from_micros(1500),
                &Outcome::Done { found: 1 },
            );
        }
        let line = progress_line(Duration::from_secs(3), 12, &w, Duration::from_secs(3));
        assert_eq!(line, "[  3s] threads: 12, ops/s: 100.0, p95: 1.500 ms");
    }

    #[test]
    fn the_chart_plots_every_run() {
        let runs = [run(1, 100, 100), run(2, 300, 200), run(4, 500, 900)];
        let svg = chart("ycsb a <rest>", &runs);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("ycsb a &lt;rest&gt;"), "the title is escaped");
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 6);
        for label in [">1<", ">2<", ">4<"] {
            assert!(svg.contains(label), "{label}");
        }
        assert!(!svg.contains("NaN"));
        assert!(!chart("empty", &[]).contains("NaN"));
    }

    #[test]
    fn axis_maxima_are_round() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(3.2), 5.0);
        assert_eq!(nice_max(1234.0), 2000.0);
        assert_eq!(nice_max(100.0), 100.0);
    }
}
