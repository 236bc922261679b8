//! Byte sizes on the command line: `512M`, `4G`, `65536`, `1GiB`.

use std::fmt;
use std::str::FromStr;

/// A number of bytes, written with an optional binary unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ByteSize(pub(crate) u64);

const UNITS: [(&str, u32); 5] = [("", 0), ("K", 10), ("M", 20), ("G", 30), ("T", 40)];

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("'{text}' is not a size such as 512M, 4G or 1048576");
        let t = text.trim();
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let number: u64 = t[..digits].parse().map_err(|_| bad())?;
        let unit = t[digits..].trim().to_ascii_uppercase();
        let unit = unit
            .strip_suffix("IB")
            .or_else(|| unit.strip_suffix('B'))
            .unwrap_or(&unit);
        let shift = UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|(_, s)| *s)
            .ok_or_else(bad)?;
        number
            .checked_mul(1 << shift)
            .map(ByteSize)
            .ok_or_else(|| format!("'{text}' is too large"))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (unit, shift) = UNITS
            .iter()
            .rev()
            .find(|(_, s)| self.0 >= 1 << s && self.0.is_multiple_of(1 << s))
            .copied()
            .unwrap_or(("", 0));
        if unit.is_empty() {
            write!(f, "{} bytes", self.0)
        } else {
            write!(f, "{} {unit}iB", self.0 >> shift)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_and_without_units() {
        for (text, bytes) in [
            ("65536", 65536),
            ("256M", 256 << 20),
            ("256m", 256 << 20),
            ("4G", 4 << 30),
            ("4GiB", 4 << 30),
            ("512 MB", 512 << 20),
            ("1T", 1 << 40),
            ("32K", 32 << 10),
        ] {
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(bytes)), "{text}");
        }
        for bad in [
            "",
            "M",
            "-1G",
            "1.5G",
            "4X",
            "99999999999999999999",
            "20000000T",
            "4 G B",
        ] {
            assert!(bad.parse::<ByteSize>().is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_print_in_the_largest_exact_unit() {
        assert_eq!(ByteSize(512 << 20).to_string(), "512 MiB");
        assert_eq!(ByteSize(4 << 30).to_string(), "4 GiB");
        assert_eq!(ByteSize(1000).to_string(), "1000 bytes");
        assert_eq!(ByteSize(1536 << 10).to_string(), "1536 KiB");
    }
}

/// A span of time on the command line: `30s`, `10m`, `24h`, `90d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span(pub(crate) std::time::Duration);

impl FromStr for Span {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("'{text}' is not a span such as 30s, 10m, 24h or 90d");
        let t = text.trim();
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        let number: u64 = t[..digits].parse().map_err(|_| bad())?;
        let seconds = match &t[digits..] {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            _ => return Err(bad()),
        };
        number
            .checked_mul(seconds)
            .filter(|&s| s > 0 && s <= 10 * 365 * 86_400)
            .map(|s| Span(std::time::Duration::from_secs(s)))
            .ok_or_else(|| format!("'{text}' must be between 1s and 10 years"))
    }
}

#[cfg(test)]
mod span_tests {
    use super::*;

    #[test]
    fn spans_parse() {
        assert_eq!("30s".parse::<Span>().unwrap().0.as_secs(), 30);
        assert_eq!("24h".parse::<Span>().unwrap().0.as_secs(), 86_400);
        assert_eq!("90d".parse::<Span>().unwrap().0.as_secs(), 90 * 86_400);
        for bad in ["", "10", "h", "0s", "5w", "-1d", "99999999999d"] {
            assert!(bad.parse::<Span>().is_err(), "{bad}");
        }
    }
}
