//! Usage over time as charts people can read: drawn on the server to SVG
//! with plotters — a time axis with labels, a value axis in the series'
//! unit (KiB/MiB/GiB, units per second, requests), a legend — each with
//! the table of its values beside it (for exact figures, and for screen
//! readers). No script and nothing from elsewhere.

use maud::{Markup, PreEscaped, html};
use plotters::prelude::*;
use shoal_wire::api::UsagePoint;

use crate::format;

/// What a chart's values are.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Unit {
    Bytes,
    PerSecond,
    Requests,
}

impl Unit {
    fn label(self, v: f64) -> String {
        match self {
            Unit::Bytes => format::bytes(v.max(0.0) as u64),
            Unit::PerSecond => format!("{}/s", short(v)),
            Unit::Requests => short(v),
        }
    }
}

/// A number in a few characters: `950`, `1.2k`, `3.4M`, `0.25`.
fn short(v: f64) -> String {
    match v.abs() {
        a if a >= 1e9 => format!("{:.1}G", v / 1e9),
        a if a >= 1e6 => format!("{:.1}M", v / 1e6),
        a if a >= 1e3 => format!("{:.1}k", v / 1e3),
        a if a >= 10.0 || a == 0.0 => format!("{v:.0}"),
        _ => format!("{v:.2}"),
    }
}

/// A line of a chart: its name and its points (ms since the epoch, value).
pub(crate) struct Line {
    pub(crate) name: String,
    pub(crate) points: Vec<(i64, f64)>,
}

const COLOURS: [RGBColor; 4] = [
    RGBColor(15, 98, 140),
    RGBColor(200, 90, 20),
    RGBColor(160, 30, 60),
    RGBColor(90, 90, 90),
];

/// A time as its axis labels it: the hour and minute for a range of up to
/// two days, else the month and day (UTC).
fn time_label(at: i64, span_ms: i64) -> String {
    let utc = shoal_metering::utc(at);
    match span_ms <= 2 * 86_400_000 {
        true => utc[11..16].to_owned(),
        false => utc[5..10].to_owned(),
    }
}

/// The chart of `lines` from `from` to `to`, `title` its name, with the
/// table of its values.
pub(crate) fn chart(title: &str, unit: Unit, lines: &[Line], from: i64, to: i64) -> Markup {
    // The first line is the data; others (a quota) only go with it.
    let drawn = lines.first().is_some_and(|l| l.points.len() >= 2);
    if !drawn {
        return html! {
            figure.chart {
                figcaption { (title) }
                p.figure { "Not enough samples yet: the chart fills in as usage is metered." }
            }
        };
    }
    let top = (lines.iter().flat_map(|l| &l.points))
        .map(|p| p.1)
        .fold(0.0f64, f64::max);
    let svg = match draw(unit, lines, from, to.max(from + 1), top.max(1.0) * 1.1) {
        Ok(svg) => svg,
        Err(e) => {
            tracing::error!(error = %e, "a chart could not be drawn");
            return html! { figure.chart { figcaption { (title) } p.figure { "The chart could not be drawn." } } };
        }
    };
    let at_most = unit.label(top);
    html! {
        figure.chart {
            figcaption { (title) }
            div role="img" aria-label=(format!("{title}: from {} to {}, at most {at_most}", shoal_metering::utc(from), shoal_metering::utc(to))) {
                (PreEscaped(svg))
            }
            details {
                summary { "Values" }
                div.scroll {
                    table.values {
                        thead { tr { th { "Time (UTC)" } @for l in lines { th { (l.name) } } } }
                        tbody {
                            @for (i, (at, _)) in lines[0].points.iter().enumerate().rev() {
                                tr {
                                    td { (shoal_metering::utc(*at)) }
                                    @for l in lines { td { (l.points.get(i).map_or(String::new(), |p| unit.label(p.1))) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// What a series' memory is drawn against: a quota, or a data node's
/// DataMemory.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Limit {
    Quota(Option<u64>),
    DataMemory(u64),
}

/// The charts of a usage series: memory (against its `limit`), read and
/// write units per second, and throttled and refused requests, from `from`
/// to `to`; with `by_table` (each table's series), each table's memory,
/// reads and writes beside them.
pub(crate) fn usage(
    points: &[UsagePoint],
    limit: Limit,
    (from, to): (i64, i64),
    by_table: &[(String, Vec<UsagePoint>)],
) -> Markup {
    let mut memory = vec![line("memory", points, |p| p.memory_bytes as f64)];
    let (memory_title, limit) = match limit {
        Limit::Quota(quota) => ("Memory against the quota", quota.map(|q| ("quota", q))),
        Limit::DataMemory(total) => ("Memory against DataMemory", Some(("DataMemory", total))),
    };
    if let Some((name, bytes)) = limit {
        memory.push(Line {
            name: name.into(),
            points: vec![(from, bytes as f64), (to, bytes as f64)],
        });
    }
    let per_second = |name: &str, points: &[UsagePoint], units: fn(&UsagePoint) -> u64| {
        let step_s = step_seconds(points);
        line(name, points, |p| units(p) as f64 / step_s)
    };
    let units = [
        per_second("reads", points, |p| p.read_units),
        per_second("writes", points, |p| p.write_units),
    ];
    let refusals = [
        line("throttled", points, |p| {
            (p.throttled_reads + p.throttled_writes) as f64
        }),
        line("refused by a quota", points, |p| p.quota_rejections as f64),
    ];
    let tables = |each: &dyn Fn(&str, &[UsagePoint]) -> Line| -> Vec<Line> {
        by_table.iter().map(|(t, points)| each(t, points)).collect()
    };
    let chart_of = |title: &str, unit: Unit, lines: Vec<Line>| {
        html! { @if !by_table.is_empty() { (chart(title, unit, &lines, from, to)) } }
    };
    html! {
        (chart(memory_title, Unit::Bytes, &memory, from, to))
        (chart_of("Memory by table", Unit::Bytes, tables(&|t, p| line(t, p, |p| p.memory_bytes as f64))))
        (chart("Read and write units per second", Unit::PerSecond, &units, from, to))
        (chart_of("Read units per second by table", Unit::PerSecond, tables(&|t, p| per_second(t, p, |p| p.read_units))))
        (chart_of("Write units per second by table", Unit::PerSecond, tables(&|t, p| per_second(t, p, |p| p.write_units))))
        (chart("Throttled and refused requests", Unit::Requests, &refusals, from, to))
    }
}

/// A line of one figure of a series.
fn line(name: &str, points: &[UsagePoint], value: impl Fn(&UsagePoint) -> f64) -> Line {
    Line {
        name: name.to_owned(),
        points: points.iter().map(|p| (p.at, value(p))).collect(),
    }
}

/// Seconds each point of a series covers: the spacing of its points.
fn step_seconds(points: &[UsagePoint]) -> f64 {
    (points.windows(2))
        .map(|w| w[1].at - w[0].at)
        .filter(|d| *d > 0)
        .min()
        .map_or(1.0, |ms| ms as f64 / 1000.0)
}

fn draw(
    unit: Unit,
    lines: &[Line],
    from: i64,
    to: i64,
    top: f64,
) -> Result<String, Box<dyn std::error::Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 240)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(72)
            .build_cartesian_2d(from..to, 0f64..top)?;
        let span = to - from;
        chart
            .configure_mesh()
            .x_labels(6)
            .y_labels(5)
            .x_desc("time (UTC)")
            .axis_desc_style(("sans-serif", 12))
            .x_label_formatter(&|t| time_label(*t, span))
            .y_label_formatter(&|v| unit.label(*v))
            .light_line_style(RGBColor(236, 238, 241))
            .label_style(("sans-serif", 12))
            .draw()?;
        for (line, colour) in lines.iter().zip(COLOURS.iter().cycle()) {
            let colour = *colour;
            chart
                .draw_series(LineSeries::new(
                    line.points.iter().copied(),
                    colour.stroke_width(2),
                ))?
                .label(line.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 12))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(210, 214, 220))
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_time_and_unit_labels_and_its_values() {
        let from = 1_764_633_600_000; // 2025-12-02T00:00:00Z
        let points: Vec<(i64, f64)> = (0..60)
            .map(|m| (from + m * 60_000, (m * 1024 * 1024) as f64))
            .collect();
        let lines = [Line {
            name: "memory".into(),
            points,
        }];
        let html = chart("Memory", Unit::Bytes, &lines, from, from + 3_600_000).into_string();
        assert!(
            html.contains("<svg") && html.contains("<polyline"),
            "{html}"
        );
        assert!(
            html.contains("00:30") || html.contains("00:20"),
            "time labels: {html}"
        );
        assert!(html.contains("MiB"), "unit labels: {html}");
        assert!(
            html.contains("2025-12-02T00:59:00Z") && html.contains("59.0 MiB"),
            "values: {html}"
        );
        let week = time_label(from, 7 * 86_400_000);
        assert_eq!(week, "12-02");
        assert_eq!(short(1234.0), "1.2k");
        assert_eq!(Unit::PerSecond.label(0.5), "0.50/s");
        let empty = chart("Memory", Unit::Bytes, &[], from, from + 1).into_string();
        assert!(empty.contains("Not enough samples"), "{empty}");
    }
}

/// The span of time a page's charts show, and the resolution of metering
/// that draws it: one of four.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    name: &'static str,
    ms: i64,
    resolution: &'static str,
}

impl Range {
    const ALL: [Range; 4] = [
        Range {
            name: "1h",
            ms: 3_600_000,
            resolution: "raw",
        },
        Range {
            name: "24h",
            ms: 86_400_000,
            resolution: "minute",
        },
        Range {
            name: "7d",
            ms: 7 * 86_400_000,
            resolution: "hour",
        },
        Range {
            name: "30d",
            ms: 30 * 86_400_000,
            resolution: "hour",
        },
    ];

    pub(crate) const DEFAULT: Range = Range::ALL[0];

    /// The range a page's query asks for (`?range=`; the last hour when
    /// it asks for none); `None` for any other.
    pub(crate) fn asked(query: &std::collections::HashMap<String, String>) -> Option<Range> {
        let name = query
            .get("range")
            .map_or(Range::DEFAULT.name, String::as_str);
        Range::ALL.into_iter().find(|r| r.name == name)
    }

    /// The page that refuses a range not offered.
    pub(crate) fn refused() -> axum::response::Response {
        crate::layout::problem(
            axum::http::StatusCode::BAD_REQUEST,
            "No such range",
            "the charts show 1h, 24h, 7d or 30d",
        )
    }

    pub(crate) fn resolution(self) -> &'static str {
        self.resolution
    }

    /// From and to, in ms since the epoch: the range up to now.
    pub(crate) fn until_now(self) -> (i64, i64) {
        let to = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        (to - self.ms, to)
    }

    /// The four ranges as links to `page`, this one marked.
    pub(crate) fn choice(self, page: &str) -> Markup {
        html! {
            nav.ranges aria-label="Range" {
                @for r in Range::ALL {
                    @if r == self { strong { (r.name) } } @else { a href=(format!("{page}?range={}", r.name)) { (r.name) } }
                }
            }
        }
    }
}
