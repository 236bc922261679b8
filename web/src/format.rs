//! Numbers as people read them.

/// Bytes in binary units: `512 B`, `1.5 KiB`, `64.0 MiB`, `1.00 GiB`.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{n} B"),
        _ if value < 10.0 => format!("{value:.2} {}", UNITS[unit]),
        _ if value < 100.0 => format!("{value:.1} {}", UNITS[unit]),
        _ => format!("{value:.0} {}", UNITS[unit]),
    }
}

/// A moment (ms since the epoch) as people say it — "3 min ago" — with
/// the exact UTC time on hover; "never" for none.
pub(crate) fn when(at: Option<i64>) -> maud::Markup {
    let Some(at) = at else {
        return maud::html! { "never" };
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let ago = (now - at).max(0) / 1000;
    let said = match ago {
        0..=9 => "just now".to_owned(),
        10..=59 => format!("{ago} s ago"),
        60..=3599 => format!("{} min ago", ago / 60),
        3600..=86_399 => format!("{} h ago", ago / 3600),
        _ => format!("{} days ago", ago / 86_400),
    };
    let exact = shoal_metering::utc(at);
    maud::html! { time datetime=(exact) title=(exact) { (said) } }
}

/// A share in percent, 0 to 100, for a bar.
pub(crate) fn percent(used: u64, of: u64) -> u64 {
    if of == 0 {
        return 0;
    }
    (u128::from(used) * 100 / u128::from(of)).min(100) as u64
}

/// A line chart of `points` (time, value) as inline SVG, `width` × `height`
/// pixels, the value axis from zero, labelled with its largest value.
pub(crate) fn chart(
    points: &[(i64, u64)],
    width: u32,
    height: u32,
    label: impl Fn(u64) -> String,
) -> maud::Markup {
    if points.len() < 2 {
        return maud::html! { p.figure { "Not enough samples yet: the chart fills in as usage is metered." } };
    }
    let (t0, t1) = (points[0].0, points[points.len() - 1].0);
    let top = points.iter().map(|p| p.1).max().unwrap_or(0).max(1);
    let (w, h) = (f64::from(width), f64::from(height));
    let line: Vec<String> = points
        .iter()
        .map(|(t, v)| {
            let x = (t - t0) as f64 / (t1 - t0).max(1) as f64 * w;
            let y = h - *v as f64 / top as f64 * (h - 4.0);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let summary = format!(
        "from {} to {}, at most {}",
        shoal_metering::utc(t0),
        shoal_metering::utc(t1),
        label(top)
    );
    maud::html! {
        svg.chart width=(width) height=(height) viewBox=(format!("0 0 {width} {height}")) role="img" aria-label=(summary) {
            title { (summary) }
            polyline points=(line.join(" ")) fill="none" stroke="currentColor" stroke-width="2" {}
        }
        p.figure { "peak " (label(top)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_like_a_person_writes_them() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(64 << 20), "64.0 MiB");
        assert_eq!(bytes(300 << 20), "300 MiB");
        assert_eq!(bytes(1 << 30), "1.00 GiB");
        assert_eq!(percent(50, 200), 25);
        assert_eq!(percent(500, 200), 100);
        assert_eq!(percent(1, 0), 0);
    }
}
