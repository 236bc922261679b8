//! Numbers and times as people read them, and as people write them in
//! forms (read back exactly).

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

/// Binary units of bytes, largest first.
const BYTE_UNITS: [(&str, u64); 4] = [
    ("TiB", 1 << 40),
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
];

/// Bytes as a quota form shows them: in the largest binary unit that
/// holds them exactly, with at most two decimals (`512 MiB`, `1.5 GiB`,
/// `1000 B`) — text that `parse_bytes` reads back as the same number.
pub(crate) fn bytes_exact(n: u64) -> String {
    for (unit, size) in BYTE_UNITS {
        if n >= size && (u128::from(n) * 100).is_multiple_of(u128::from(size)) {
            let hundredths = u128::from(n) * 100 / u128::from(size);
            return format!("{} {unit}", decimal(hundredths));
        }
    }
    format!("{n} B")
}

/// A count as a quota form shows it: `10k`, `2.5M`, `750`, `12345` —
/// exact, and read back by `parse_count` as the same number.
pub(crate) fn count_exact(n: u64) -> String {
    for (unit, size) in [("G", 1_000_000_000u64), ("M", 1_000_000), ("k", 1_000)] {
        if n >= size && (u128::from(n) * 100).is_multiple_of(u128::from(size)) {
            return format!("{}{unit}", decimal(u128::from(n) * 100 / u128::from(size)));
        }
    }
    n.to_string()
}

/// Hundredths as a decimal without trailing zeros: 150 → `1.5`.
fn decimal(hundredths: u128) -> String {
    let (whole, frac) = (hundredths / 100, hundredths % 100);
    match frac {
        0 => whole.to_string(),
        f if f % 10 == 0 => format!("{whole}.{}", f / 10),
        f => format!("{whole}.{f:02}"),
    }
}

/// A number with an optional fraction and a unit of `size`, exactly: the
/// whole number it makes, or why not (it is no number, too large, or not
/// a whole number — never rounded).
fn scaled(number: &str, size: u64, what: &str) -> Result<u64, String> {
    let number = number.trim().replace(['_', ','], "");
    let (whole, frac) = number.split_once('.').unwrap_or((&number, ""));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !(frac.is_empty() || digits(frac)) || frac.len() > 9 {
        return Err(format!("'{number}' is not a number of {what}"));
    }
    let too_large = || format!("'{number}' is more {what} than can be set");
    let whole: u128 = whole.parse().map_err(|_| too_large())?;
    let frac_value: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| too_large())?
    };
    let scale = 10u128.pow(frac.len() as u32);
    let total = (whole.checked_mul(scale))
        .and_then(|w| w.checked_add(frac_value))
        .and_then(|w| w.checked_mul(u128::from(size)))
        .ok_or_else(too_large)?;
    if !total.is_multiple_of(scale) {
        return Err(format!(
            "'{number}' is not a whole number of {what}: nothing is rounded"
        ));
    }
    u64::try_from(total / scale).map_err(|_| too_large())
}

/// Bytes as people write them: `536870912`, `512 MiB`, `1.5 GiB`, `2 GB`
/// (GB, MB, KB are powers of 1000; GiB, MiB, KiB of 1024). A bare `G` or
/// `M` is refused as ambiguous, and so is anything that is not a whole
/// number of bytes.
pub(crate) fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let size = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "'{other}' is not a unit of bytes: use B, KiB, MiB, GiB, TiB (1024s) or KB, MB, GB, TB (1000s)"
            ));
        }
    };
    scaled(number, size, "bytes")
}

/// A count or a rate as people write them: `10000`, `10k`, `2.5M`, `10k/s`
/// (k, M, G are 1000s).
pub(crate) fn parse_count(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let text = text.strip_suffix("/s").unwrap_or(text).trim_end();
    let (number, size) = match text.char_indices().last() {
        Some((at, 'k' | 'K')) => (&text[..at], 1_000),
        Some((at, 'M')) => (&text[..at], 1_000_000),
        Some((at, 'G')) => (&text[..at], 1_000_000_000),
        _ => (text, 1),
    };
    scaled(number, size, "units")
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

    #[test]
    fn quotas_in_peoples_units_read_back_exactly() {
        assert_eq!(parse_bytes("536870912"), Ok(536_870_912));
        assert_eq!(parse_bytes("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("512mib"), Ok(512 << 20));
        assert_eq!(parse_bytes(" 1.5 GiB "), Ok(3 << 29));
        assert_eq!(parse_bytes("2 GB"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("1,024 KiB"), Ok(1 << 20));
        assert!(
            parse_bytes("0.1 KiB")
                .unwrap_err()
                .contains("nothing is rounded")
        );
        assert!(parse_bytes("2G").unwrap_err().contains("not a unit"));
        assert!(parse_bytes("-1 MiB").is_err());
        assert!(parse_bytes("1e9").is_err());
        assert!(
            parse_bytes("99999999999 TiB")
                .unwrap_err()
                .contains("more bytes")
        );
        assert!(
            parse_bytes("9".repeat(45).as_str())
                .unwrap_err()
                .contains("more bytes")
        );
        assert!(parse_bytes("").is_err());
        assert_eq!(parse_count("10k/s"), Ok(10_000));
        assert_eq!(parse_count("2.5M"), Ok(2_500_000));
        assert_eq!(parse_count("750"), Ok(750));
        assert!(parse_count("1.0001k").is_err());
        assert!(parse_count("ten").is_err());
        for n in [
            0,
            1,
            999,
            1000,
            1023,
            1024,
            1536,
            512 << 20,
            (3 << 29) + 1,
            1 << 40,
            5 << 40,
            u64::MAX,
        ] {
            assert_eq!(
                parse_bytes(&bytes_exact(n)),
                Ok(n),
                "{n} as {}",
                bytes_exact(n)
            );
            assert_eq!(
                parse_count(&count_exact(n)),
                Ok(n),
                "{n} as {}",
                count_exact(n)
            );
        }
        assert_eq!(bytes_exact(512 << 20), "512 MiB");
        assert_eq!(bytes_exact(3 << 29), "1.5 GiB");
        assert_eq!(bytes_exact(1000), "1000 B");
        assert_eq!(count_exact(10_000), "10k");
        assert_eq!(count_exact(2_500_000), "2.5M");
        assert_eq!(count_exact(12_345), "12345");
    }
}
