//! Typed values as they enter and leave the engine, and the calendar and
//! decimal arithmetic they need.
//!
//! Text forms are MySQL's: dates `YYYY-MM-DD`, date-times
//! `YYYY-MM-DD HH:MM:SS[.ffffff]`, decimals `-123.45`. A `TIMESTAMP` is an
//! instant in UTC; its text may end in `Z` or an offset such as `+02:00`.

use std::fmt;

use shoal_wire::schema::ColumnType;

/// A value for one column.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    UInt(u64),
    Float(f32),
    Double(f64),
    Decimal(Decimal),
    Text(String),
    Bytes(Vec<u8>),
    Date(Date),
    DateTime(DateTime),
    Timestamp(Timestamp),
    Bool(bool),
}

/// Why a JSON value cannot be a column's: its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonShape {
    Wrong {
        expected: &'static str,
        got: &'static str,
    },
    NotBase64,
}

impl Value {
    /// The value `json` gives a column of type `ty`, as the data APIs take
    /// it: binary as standard base64, everything else by its JSON shape.
    /// Only the shape is checked here; range, length and precision are
    /// checked when the value is encoded for the column.
    pub fn from_json(ty: ColumnType, json: &serde_json::Value) -> Result<Value, JsonShape> {
        use serde_json::Value as Json;
        let got = match json {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        };
        let wrong = |expected| JsonShape::Wrong { expected, got };
        let binary = ty.is_binary();
        Ok(match json {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::String(s) if binary => {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD.decode(s);
                Value::Bytes(bytes.map_err(|_| JsonShape::NotBase64)?)
            }
            Json::String(s) => Value::Text(s.clone()),
            Json::Number(_) if binary => return Err(wrong("a base64 string")),
            Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => Value::Int(i),
                (None, Some(u), _) => Value::UInt(u),
                (None, None, Some(f)) => Value::Double(f),
                (None, None, None) => return Err(wrong("a number that fits 64 bits")),
            },
            Json::Array(_) | Json::Object(_) => {
                return Err(wrong(if binary {
                    "a base64 string"
                } else {
                    "a number, a string, a boolean or null"
                }));
            }
        })
    }

    /// What kind of value this is, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) | Value::UInt(_) => "an integer",
            Value::Float(_) | Value::Double(_) => "a floating-point number",
            Value::Decimal(_) => "a decimal",
            Value::Text(_) => "a string",
            Value::Bytes(_) => "bytes",
            Value::Date(_) => "a date",
            Value::DateTime(_) => "a date-time",
            Value::Timestamp(_) => "a timestamp",
            Value::Bool(_) => "a boolean",
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_owned())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Bytes(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("NULL"),
            Value::Int(v) => write!(f, "{v}"),
            Value::UInt(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Double(v) => write!(f, "{v}"),
            Value::Decimal(v) => write!(f, "{v}"),
            Value::Text(v) => f.write_str(v),
            Value::Bytes(v) => {
                f.write_str("0x")?;
                v.iter().try_for_each(|b| write!(f, "{b:02X}"))
            }
            Value::Date(v) => write!(f, "{v}"),
            Value::DateTime(v) => write!(f, "{v}"),
            Value::Timestamp(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{}", u8::from(*v)),
        }
    }
}

/// An exact decimal: `mantissa × 10^-scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decimal {
    pub mantissa: i128,
    pub scale: u8,
}

pub(crate) const POW10: [i128; 39] = {
    let mut p = [1i128; 39];
    let mut i = 1;
    while i < 39 {
        p[i] = p[i - 1] * 10;
        i += 1;
    }
    p
};

/// A number as text spells it, in parts: `[+|-] digits [. digits]
/// [e|E [+|-] digits]`, with a digit before or after the point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spelled<'a> {
    pub(crate) negative: bool,
    pub(crate) whole: &'a str,
    pub(crate) fraction: &'a str,
    /// The exponent's sign and digits, if it has one.
    pub(crate) exponent: Option<&'a str>,
}

impl<'a> Spelled<'a> {
    /// `text`'s parts, if it spells a number and nothing else (spaces
    /// around it are the caller's to trim).
    pub(crate) fn parse(text: &'a str) -> Option<Spelled<'a>> {
        let (negative, rest) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let (mantissa, exponent) = match rest.find(['e', 'E']) {
            Some(at) => (&rest[..at], Some(&rest[at + 1..])),
            None => (rest, None),
        };
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        let exponent_ok = exponent.is_none_or(|x| {
            let digits = x.strip_prefix(['-', '+']).unwrap_or(x);
            !digits.is_empty() && all_digits(digits)
        });
        (whole.len() + fraction.len() > 0
            && all_digits(whole)
            && all_digits(fraction)
            && exponent_ok)
            .then_some(Spelled {
                negative,
                whole,
                fraction,
                exponent,
            })
    }
}

/// Why a text is not a value of a DECIMAL column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecimalError {
    #[error("'{0}' is not a decimal number")]
    NotANumber(String),
    #[error("{text} is out of range for DECIMAL({precision},{scale})")]
    OutOfRange {
        text: String,
        precision: u8,
        scale: u8,
    },
    #[error(
        "{text} has more digits after the point than DECIMAL({precision},{scale}) holds; it is not rounded"
    )]
    TooPrecise {
        text: String,
        precision: u8,
        scale: u8,
    },
}

impl Decimal {
    /// Parses `text` as a value of `DECIMAL(precision, scale)`: the mantissa at
    /// that scale, or why not. Digits past the scale are refused unless they
    /// are zeros: a value is stored exactly or not at all, never rounded.
    pub fn parse(text: &str, precision: u8, scale: u8) -> Result<i128, DecimalError> {
        let bad = || DecimalError::NotANumber(shorten(text));
        let text = text.trim();
        let Some(Spelled {
            negative,
            whole: int_part,
            fraction: frac_part,
            exponent,
        }) = Spelled::parse(text)
        else {
            return Err(bad());
        };
        let exponent: i32 = exponent.map_or(Ok(0), str::parse).map_err(|_| bad())?;
        // The digits without the point; the point sits `point` digits in.
        let digits = int_part.bytes().chain(frac_part.bytes()).map(|b| b - b'0');
        let point = int_part.len() as i64 + i64::from(exponent);
        let too_big = || DecimalError::OutOfRange {
            text: shorten(text),
            precision,
            scale,
        };
        let mut mantissa: i128 = 0;
        let mut significant = 0u32;
        for (i, d) in digits.enumerate() {
            // Position of this digit relative to the kept scale: 0 is the last kept digit.
            let kept = (i as i64) < point + i64::from(scale);
            if kept {
                if significant > 0 || d != 0 {
                    significant += 1;
                }
                if significant > u32::from(precision) {
                    return Err(too_big());
                }
                mantissa = mantissa * 10 + i128::from(d);
            } else if d != 0 {
                return Err(DecimalError::TooPrecise {
                    text: shorten(text),
                    precision,
                    scale,
                });
            }
        }
        // Digits the text did not write out down to the kept scale are zeros.
        let written = (int_part.len() + frac_part.len()) as i64;
        let missing = point + i64::from(scale) - written;
        if missing > 0 && mantissa != 0 {
            significant += missing.min(64) as u32;
            if significant > u32::from(precision) {
                return Err(too_big());
            }
            mantissa *= POW10[missing as usize];
        }
        if mantissa >= POW10[precision as usize] {
            return Err(too_big());
        }
        Ok(if negative { -mantissa } else { mantissa })
    }

    /// The mantissa of `value × 10^scale` if it has at most `precision` digits.
    pub fn from_integer(value: i128, precision: u8, scale: u8) -> Option<i128> {
        let m = value.checked_mul(POW10[scale as usize])?;
        (m.unsigned_abs() < POW10[precision as usize] as u128).then_some(m)
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.mantissa < 0 { "-" } else { "" };
        let scale = self.scale as usize;
        // The digits, with zeros in front so that one is left of the point.
        let digits = format!(
            "{:0width$}",
            self.mantissa.unsigned_abs(),
            width = scale + 1
        );
        let (int, frac) = digits.split_at(digits.len() - scale);
        if scale == 0 {
            write!(f, "{sign}{int}")
        } else {
            write!(f, "{sign}{int}.{frac}")
        }
    }
}

/// A calendar date, stored as days since 1970-01-01.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date(pub i32);

/// A date and time without a time zone, stored as microseconds since
/// 1970-01-01 00:00:00.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DateTime(pub i64);

/// An instant, stored as microseconds since 1970-01-01 00:00:00 UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub i64);

pub(crate) const MICROS_PER_SECOND: i64 = 1_000_000;
pub(crate) const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;
/// Days from 1970-01-01 to 0001-01-01 and to 9999-12-31, the range of dates.
const MIN_DAY: i32 = -719_162;
const MAX_DAY: i32 = 2_932_896;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
pub(crate) fn days_from_civil(year: i32, month: u32, day: u32) -> i32 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (month as i32 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i32 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `days` after 1970-01-01 as (year, month, day); any number of
/// days has one, far outside the supported range too.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Cuts a user's text short enough to quote in an error message.
fn shorten(text: &str) -> String {
    if text.chars().count() <= 40 {
        text.to_owned()
    } else {
        text.chars().take(40).collect::<String>() + "…"
    }
}

/// Reads exactly `n` ASCII digits.
fn digits(text: &[u8], n: usize) -> Option<u32> {
    if text.len() != n || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(text.iter().fold(0, |acc, d| acc * 10 + u32::from(d - b'0')))
}

impl Date {
    pub fn from_ymd(year: i32, month: u32, day: u32) -> Option<Date> {
        if !(1..=9999).contains(&year)
            || !(1..=12).contains(&month)
            || day == 0
            || day > days_in_month(year, month)
        {
            return None;
        }
        Some(Date(days_from_civil(year, month, day)))
    }

    /// `YYYY-MM-DD`, or RonDB's date-time form of a date: the same with a
    /// time of day that is all zeros (`1111-11-11 00:00:00[.000000]`). A
    /// time of day that is not midnight is refused, never dropped.
    pub fn parse(text: &str) -> Result<Date, String> {
        let trimmed = text.trim();
        if trimmed.len() > 10 {
            return match parse_date_time(trimmed) {
                Some((micros, "")) if micros.rem_euclid(MICROS_PER_DAY) == 0 => {
                    Ok(Date(micros.div_euclid(MICROS_PER_DAY) as i32))
                }
                Some((_, "")) => Err(format!(
                    "'{}' has a time of day; a DATE holds none",
                    shorten(text)
                )),
                _ => Err(format!(
                    "'{}' is not a date between 0001-01-01 and 9999-12-31 (YYYY-MM-DD)",
                    shorten(text)
                )),
            };
        }
        let b = trimmed.as_bytes();
        let parsed = (b.len() == 10 && b[4] == b'-' && b[7] == b'-')
            .then(|| {
                Some((
                    digits(&b[..4], 4)?,
                    digits(&b[5..7], 2)?,
                    digits(&b[8..], 2)?,
                ))
            })
            .flatten();
        parsed
            .and_then(|(y, m, d)| Date::from_ymd(y as i32, m, d))
            .ok_or_else(|| {
                format!(
                    "'{}' is not a date between 0001-01-01 and 9999-12-31 (YYYY-MM-DD)",
                    shorten(text)
                )
            })
    }

    /// Whether this is a date in the supported range.
    pub fn is_valid(self) -> bool {
        (MIN_DAY..=MAX_DAY).contains(&self.0)
    }

    /// The date `days` days later (earlier if negative); `None` outside
    /// 0001-01-01 to 9999-12-31.
    pub fn plus_days(self, days: i64) -> Option<Date> {
        let d = i32::try_from(i64::from(self.0).checked_add(days)?).ok()?;
        Date(d).is_valid().then_some(Date(d))
    }

    /// The date `months` months later (earlier if negative), its day cut to
    /// the new month's last where that month is shorter (Jan 31 + 1 month
    /// = Feb 28 or 29), as MySQL's `DATE_ADD(d, INTERVAL n MONTH)`; `None`
    /// outside 0001 to 9999.
    pub fn plus_months(self, months: i64) -> Option<Date> {
        let (y, m, d) = civil_from_days(self.0.into());
        let index = (y * 12 + i64::from(m) - 1).checked_add(months)?;
        let year = i32::try_from(index.div_euclid(12)).ok()?;
        let month = index.rem_euclid(12) as u32 + 1;
        if !(1..=9999).contains(&year) {
            return None;
        }
        Date::from_ymd(year, month, d.min(days_in_month(year, month)))
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d) = civil_from_days(self.0.into());
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

/// Parses `YYYY-MM-DD[( |T)HH:MM:SS[.f{1,6}]]` into microseconds since
/// 1970-01-01 00:00:00, returning the rest of the text (a time-zone suffix).
fn parse_date_time(text: &str) -> Option<(i64, &str)> {
    let text = text.trim();
    let date = Date::parse(text.get(..10)?).ok()?;
    let mut micros = i64::from(date.0) * MICROS_PER_DAY;
    let rest = &text[10..];
    let Some(time) = rest.strip_prefix([' ', 'T']) else {
        return Some((micros, rest));
    };
    let b = time.as_bytes();
    if b.len() < 8 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let (h, m, s) = (
        digits(&b[..2], 2)?,
        digits(&b[3..5], 2)?,
        digits(&b[6..8], 2)?,
    );
    if h > 23 || m > 59 || s > 59 {
        return None;
    }
    micros += i64::from(h * 3600 + m * 60 + s) * MICROS_PER_SECOND;
    let mut rest = &time[8..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 || n > 6 {
            return None;
        }
        micros += i64::from(digits(&frac.as_bytes()[..n], n)?) * 10i64.pow(6 - n as u32);
        rest = &frac[n..];
    }
    Some((micros, rest))
}

/// Writes microseconds since the epoch as `YYYY-MM-DD HH:MM:SS[.ffffff]`,
/// with the fraction only when it is not zero.
fn format_micros(f: &mut fmt::Formatter<'_>, micros: i64) -> fmt::Result {
    format_micros_fsp(f, micros, None)
}

/// A date-time (microseconds since the epoch) written as a column of
/// `fsp` fractional digits is: exactly that many, as MySQL writes them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WithFsp(pub i64, pub u8);

impl fmt::Display for WithFsp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        format_micros_fsp(f, self.0, Some(self.1.min(6)))
    }
}

/// Writes `micros` as `YYYY-MM-DD HH:MM:SS`, then `fsp` fractional digits,
/// or (without `fsp`) six when there is a fraction.
fn format_micros_fsp(f: &mut fmt::Formatter<'_>, micros: i64, fsp: Option<u8>) -> fmt::Result {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let in_day = micros.rem_euclid(MICROS_PER_DAY);
    let secs = in_day / MICROS_PER_SECOND;
    let frac = in_day % MICROS_PER_SECOND;
    let (y, m, d) = civil_from_days(days);
    write!(
        f,
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )?;
    match fsp {
        None if frac != 0 => write!(f, ".{frac:06}")?,
        Some(digits @ 1..) => {
            let shown = frac / 10i64.pow(6 - u32::from(digits));
            write!(f, ".{shown:0width$}", width = usize::from(digits))?;
        }
        _ => {}
    }
    Ok(())
}

/// Rounds microseconds to `fsp` fractional digits, half up, as MySQL does;
/// `None` if that leaves the range of i64.
pub(crate) fn round_to_fsp(micros: i64, fsp: u8) -> Option<i64> {
    let unit = 10i64.pow(6 - u32::from(fsp.min(6)));
    let rem = micros.rem_euclid(unit);
    if rem * 2 >= unit {
        (micros - rem).checked_add(unit)
    } else {
        Some(micros - rem)
    }
}

/// The time now, in microseconds since 1970-01-01 00:00:00 UTC.
pub(crate) fn now_micros() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

/// The instant `micros` as a DATETIME or TIMESTAMP column of type `ty`
/// stores it: cut to the column's fractional-second digits, as MySQL's
/// `CURRENT_TIMESTAMP(fsp)` is. `None` for a column of another type.
pub(crate) fn time_of(ty: ColumnType, micros: i64) -> Option<Value> {
    let cut = |fsp: u8| micros - micros.rem_euclid(10i64.pow(6 - u32::from(fsp.min(6))));
    match ty {
        ColumnType::DateTime { fsp } => Some(Value::DateTime(DateTime(cut(fsp)))),
        ColumnType::Timestamp { fsp } => Some(Value::Timestamp(Timestamp(cut(fsp)))),
        _ => None,
    }
}

/// Whether microseconds since the epoch fall between 0001-01-01 00:00:00 and
/// 9999-12-31 23:59:59.999999.
pub(crate) fn micros_in_range(micros: i64) -> bool {
    (i64::from(MIN_DAY) * MICROS_PER_DAY..(i64::from(MAX_DAY) + 1) * MICROS_PER_DAY)
        .contains(&micros)
}

impl DateTime {
    pub fn parse(text: &str) -> Result<DateTime, String> {
        match parse_date_time(text) {
            Some((micros, "")) => Ok(DateTime(micros)),
            _ => Err(format!(
                "'{}' is not a date-time (YYYY-MM-DD HH:MM:SS[.ffffff])",
                shorten(text)
            )),
        }
    }
}

impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        format_micros(f, self.0)
    }
}

impl Timestamp {
    /// Parses a date-time in UTC, or with a `Z` or `±HH:MM` suffix.
    pub fn parse(text: &str) -> Result<Timestamp, String> {
        let bad = || {
            format!(
                "'{}' is not a timestamp (YYYY-MM-DD HH:MM:SS[.ffffff][Z|±HH:MM])",
                shorten(text)
            )
        };
        let (micros, zone) = parse_date_time(text).ok_or_else(bad)?;
        let offset_minutes = match zone.as_bytes() {
            b"" | b"Z" | b"z" => 0,
            [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
                let h = digits(&[*h1, *h2], 2).ok_or_else(bad)?;
                let m = digits(&[*m1, *m2], 2).ok_or_else(bad)?;
                if h > 14 || m > 59 {
                    return Err(bad());
                }
                let minutes = i64::from(h * 60 + m);
                if *sign == b'-' { -minutes } else { minutes }
            }
            _ => return Err(bad()),
        };
        Ok(Timestamp(micros - offset_minutes * 60 * MICROS_PER_SECOND))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        format_micros(f, self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_trip_over_the_whole_range() {
        for days in (MIN_DAY..=MAX_DAY).step_by(97) {
            let (y, m, d) = civil_from_days(days.into());
            let y = y as i32;
            assert_eq!(days_from_civil(y, m, d), days);
            assert_eq!(Date::from_ymd(y, m, d), Some(Date(days)));
        }
        assert_eq!(Date::parse("1970-01-01"), Ok(Date(0)));
        assert_eq!(Date::parse("0001-01-01"), Ok(Date(MIN_DAY)));
        assert_eq!(Date::parse("9999-12-31"), Ok(Date(MAX_DAY)));
        assert_eq!(Date(MAX_DAY).to_string(), "9999-12-31");
    }

    #[test]
    fn impossible_dates_are_refused() {
        for bad in [
            "2023-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-04-31",
            "0000-01-01",
            "2024-1-01",
            "20240101",
            "2024-01-01x",
            "",
            "abcd-ef-gh",
            "２０２４-01-01",
        ] {
            assert!(Date::parse(bad).is_err(), "{bad}");
        }
        assert!(Date::parse("2024-02-29").is_ok());
        assert_eq!(
            Date::parse("1111-11-11 00:00:00"),
            Date::parse("1111-11-11")
        );
        assert_eq!(Date::parse("1970-01-02T00:00:00.000000"), Ok(Date(1)));
        for bad in [
            "1111-11-11 00:00:01",
            "1111-11-11 00:00:00.5",
            "1111-11-11 00:00",
            "1111-11-11 x",
        ] {
            assert!(Date::parse(bad).is_err(), "{bad}");
        }
        assert!(Date::parse("2000-02-29").is_ok());
        assert!(Date::parse("1900-02-29").is_err());
    }

    #[test]
    fn date_times_parse_and_print() {
        let t = DateTime::parse("2024-03-05 07:08:09.25").unwrap();
        assert_eq!(t.to_string(), "2024-03-05 07:08:09.250000");
        assert_eq!(
            DateTime::parse("2024-03-05T07:08:09").unwrap().to_string(),
            "2024-03-05 07:08:09"
        );
        assert_eq!(
            DateTime::parse("2024-03-05").unwrap().to_string(),
            "2024-03-05 00:00:00"
        );
        assert_eq!(
            DateTime::parse("1969-12-31 23:59:59.5").unwrap().0,
            -500_000
        );
        // Written to a column's precision: exactly that many digits.
        assert_eq!(WithFsp(t.0, 0).to_string(), "2024-03-05 07:08:09");
        assert_eq!(WithFsp(t.0, 2).to_string(), "2024-03-05 07:08:09.25");
        assert_eq!(WithFsp(t.0, 3).to_string(), "2024-03-05 07:08:09.250");
        let whole = DateTime::parse("2024-03-05 07:08:09").unwrap();
        assert_eq!(
            WithFsp(whole.0, 6).to_string(),
            "2024-03-05 07:08:09.000000"
        );
        let before_epoch = DateTime::parse("1969-12-31 23:59:59.5").unwrap();
        assert_eq!(
            WithFsp(before_epoch.0, 1).to_string(),
            "1969-12-31 23:59:59.5"
        );
        for bad in [
            "2024-03-05 24:00:00",
            "2024-03-05 10:60:00",
            "2024-03-05 10:00",
            "2024-03-05 10:00:00.",
            "2024-03-05 10:00:00.1234567",
            "2024-03-05 10:00:00Z",
        ] {
            assert!(DateTime::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timestamps_take_zones() {
        let utc = Timestamp::parse("2024-03-05 10:00:00").unwrap();
        assert_eq!(Timestamp::parse("2024-03-05T10:00:00Z").unwrap(), utc);
        assert_eq!(Timestamp::parse("2024-03-05 12:30:00+02:30").unwrap(), utc);
        assert_eq!(Timestamp::parse("2024-03-05 05:00:00-05:00").unwrap(), utc);
        assert!(Timestamp::parse("2024-03-05 10:00:00+15:00").is_err());
        assert!(Timestamp::parse("2024-03-05 10:00:00 UTC").is_err());
    }

    #[test]
    fn fractions_round_half_up() {
        assert_eq!(round_to_fsp(1_499_999, 0), Some(1_000_000));
        assert_eq!(round_to_fsp(1_500_000, 0), Some(2_000_000));
        assert_eq!(round_to_fsp(-500_000, 0), Some(0));
        assert_eq!(round_to_fsp(123_456, 3), Some(123_000));
        assert_eq!(round_to_fsp(123_500, 3), Some(124_000));
        assert_eq!(round_to_fsp(123_456, 6), Some(123_456));
        assert_eq!(round_to_fsp(i64::MAX, 0), None);
    }

    #[test]
    fn any_decimal_prints() {
        let tiny = Decimal {
            mantissa: -7,
            scale: 60,
        };
        assert_eq!(tiny.to_string(), format!("-0.{}7", "0".repeat(59)));
        let min = Decimal {
            mantissa: i128::MIN,
            scale: 2,
        };
        assert_eq!(min.to_string(), "-1701411834604692317316873037158841057.28");
    }

    #[test]
    fn decimals_parse_exactly_and_print() {
        let cases = [
            ("123.45", 5, 2, 12345),
            ("-123.45", 5, 2, -12345),
            ("0.010", 5, 2, 1),
            ("-0.0500", 5, 2, -5),
            ("1.5e-1", 5, 2, 15),
            ("1e2", 5, 2, 10000),
            ("1.5E-1", 5, 2, 15),
            ("007", 3, 0, 7),
            (".5", 2, 1, 5),
            ("5.", 2, 1, 50),
            ("999.99", 5, 2, 99999),
            ("0", 38, 30, 0),
            ("0e50", 5, 2, 0),
            (
                "99999999999999999999999999999999999999",
                38,
                0,
                99_999_999_999_999_999_999_999_999_999_999_999_999,
            ),
        ];
        for (text, p, s, want) in cases {
            assert_eq!(Decimal::parse(text, p, s), Ok(want), "{text} as ({p},{s})");
        }
        for (text, p, s) in [
            ("1000", 5, 2),
            ("999.995", 5, 2),
            ("999.994", 5, 2),
            ("1.005", 5, 2),
            ("0.004", 5, 2),
            ("-0.005", 5, 2),
            ("1.5e-3", 5, 2),
            ("", 5, 2),
            (".", 5, 2),
            ("1.2.3", 5, 2),
            ("12a", 5, 2),
            ("--1", 5, 2),
            ("1e", 5, 2),
            ("1e999999", 5, 2),
            ("1e40", 38, 0),
            ("100000000000000000000000000000000000000", 38, 0),
            ("NaN", 5, 2),
            ("inf", 5, 2),
        ] {
            assert!(Decimal::parse(text, p, s).is_err(), "{text} as ({p},{s})");
        }
        assert_eq!(
            Decimal {
                mantissa: -12345,
                scale: 2
            }
            .to_string(),
            "-123.45"
        );
        assert_eq!(
            Decimal {
                mantissa: 5,
                scale: 3
            }
            .to_string(),
            "0.005"
        );
        assert_eq!(
            Decimal {
                mantissa: 42,
                scale: 0
            }
            .to_string(),
            "42"
        );
        assert_eq!(Decimal::from_integer(123, 5, 2), Some(12300));
        assert_eq!(Decimal::from_integer(1234, 5, 2), None);
        assert_eq!(Decimal::from_integer(-999, 5, 2), Some(-99900));
    }
}
