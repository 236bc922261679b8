//! Scalar functions over one row's values, as MySQL defines them: text
//! (`UPPER`, `CONCAT`, `SUBSTRING`, `LOCATE`, `LPAD`, …), numbers (`ABS`,
//! `ROUND`, `FLOOR`, `CEIL`), dates (`YEAR`, `DATE_FORMAT`, `DATEDIFF`,
//! `TIMESTAMPDIFF`, …), `GREATEST`/`LEAST` and `CAST`. (`COALESCE`,
//! `IFNULL`, `NULLIF`, `IF` and `CASE` are conditions: `eval::Case`.)
//!
//! A function's result type is known when the query is planned, from its
//! arguments' types; a call with arguments it does not take is refused
//! then, never converted at run time. NULL in, NULL out (but `CONCAT_WS`
//! skips a NULL after its separator). Text is UTF-8 and counted in
//! characters; bytes (BINARY, VARBINARY) in bytes.

use std::borrow::Cow;
use std::ops::RangeInclusive;

use super::eval::{self, EvalError, MAX_SCALE, Scalar, TimeKind, Ty};
use crate::types::value::{
    Date, Decimal, MICROS_PER_DAY, POW10, WithFsp, civil_from_days, days_from_civil,
    micros_in_range,
};

/// Longest text or bytes a function answers: bounds what one row's
/// expression can make of a row's few kilobytes.
pub(crate) const MAX_RESULT_BYTES: usize = 1 << 20;

/// A scalar function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Function {
    Upper,
    Lower,
    Concat,
    /// `CONCAT_WS(sep, s, …)`: the strings that are not NULL, `sep` between.
    ConcatWs,
    /// Bytes of its argument's text.
    Length,
    /// Characters of text (bytes of bytes).
    CharLength,
    /// `SUBSTRING(s, from[, count])`, from 1; a negative `from` counts from the end.
    Substring,
    /// `LEFT(s, n)`: the first `n` characters.
    Left,
    /// `RIGHT(s, n)`: the last `n` characters.
    Right,
    /// `REPLACE(s, from, to)`: every `from` in `s` made `to`.
    Replace,
    /// `TRIM`, `LTRIM`, `RTRIM`: `s` without the runs of a string (spaces
    /// unless given) at its start, its end, or both.
    Trim {
        start: bool,
        end: bool,
    },
    /// `LOCATE(sub, s[, from])`, `INSTR(s, sub)` (planned with its
    /// arguments swapped), `POSITION(sub IN s)`: where `sub` first is in
    /// `s`, from 1; 0 if nowhere.
    Locate,
    /// `LPAD(s, n, pad)` and `RPAD`: `s` made `n` long, cut or padded at
    /// its start (or end) with `pad` repeated.
    Pad {
        left: bool,
    },
    /// `REPEAT(s, n)`: `s` `n` times.
    Repeat,
    /// `SPACE(n)`: `n` spaces.
    Space,
    /// `REVERSE(s)`.
    Reverse,
    /// `GREATEST(x, …)` and `LEAST(x, …)`: the largest (smallest) argument,
    /// each read as their common type.
    Extreme {
        greatest: bool,
        ty: Ty,
    },
    /// `DATEDIFF(a, b)`: days from date `b` to date `a`, times ignored.
    DateDiff,
    /// `TIMESTAMPDIFF(unit, a, b)`: whole units from `a` to `b`.
    TimestampDiff(DiffUnit),
    /// `YEAR`, `MONTH`, `HOUR`, … of a date or date-time, and
    /// `EXTRACT(unit FROM t)`.
    Part(DatePart),
    /// `DATE_FORMAT(t, format)`: the format a constant, its week
    /// specifiers refused when planned (`format_refusal`).
    DateFormat,
    /// `DATE(t)`: the date of a date-time.
    Date,
    Abs,
    /// `ROUND(x, d)` to `d` decimals, half away from zero (`d` a constant).
    Round(i32),
    /// `TRUNCATE(x, d)` to `d` decimals, toward zero (`d` a constant).
    Truncate(i32),
    Floor,
    Ceil,
    /// `CONVERT_TZ(t, from, to)` with constant zones: a date-time moved
    /// by these microseconds (`to`'s offset less `from`'s).
    ConvertTz(i64),
    /// `CAST(x AS …)` to a type.
    Cast(Ty),
    /// `CAST(x AS UNSIGNED)`: a whole number, not negative.
    CastUnsigned,
}

/// The offset from UTC of a time zone as `CONVERT_TZ` names it, in
/// microseconds: `UTC`, `SYSTEM` (a node keeps UTC) or `±HH:MM` from
/// -13:59 to +14:00, as MySQL takes offsets; `None` for any other (Shoal has
/// no time zone tables).
pub(crate) fn zone_offset(zone: &str) -> Option<i64> {
    if zone.eq_ignore_ascii_case("UTC") || zone.eq_ignore_ascii_case("SYSTEM") {
        return Some(0);
    }
    let (sign, rest) = match zone.as_bytes().first()? {
        b'+' => (1, &zone[1..]),
        b'-' => (-1, &zone[1..]),
        _ => return None,
    };
    let (h, m) = rest.split_once(':')?;
    let number = |s: &str| (1..=2).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
    if !number(h) || m.len() != 2 || !number(m) {
        return None;
    }
    let minutes = sign * (h.parse::<i64>().ok()? * 60 + m.parse::<i64>().ok()?);
    let in_range = m.parse::<i64>().ok()? < 60 && (-(13 * 60 + 59)..=14 * 60).contains(&minutes);
    in_range.then_some(minutes * 60 * 1_000_000)
}

impl Function {
    /// The function called `name`, if Shoal has it, and how many
    /// arguments it takes.
    pub(crate) fn named(name: &str) -> Option<(Function, RangeInclusive<usize>)> {
        let name = name.to_ascii_uppercase();
        let trim = |start, end| Function::Trim { start, end };
        Some(match name.as_str() {
            "UPPER" | "UCASE" => (Function::Upper, 1..=1),
            "LOWER" | "LCASE" => (Function::Lower, 1..=1),
            "CONCAT" => (Function::Concat, 1..=usize::MAX),
            "CONCAT_WS" => (Function::ConcatWs, 2..=usize::MAX),
            "LOCATE" => (Function::Locate, 2..=3),
            "LPAD" => (Function::Pad { left: true }, 3..=3),
            "RPAD" => (Function::Pad { left: false }, 3..=3),
            "REPEAT" => (Function::Repeat, 2..=2),
            "SPACE" => (Function::Space, 1..=1),
            "REVERSE" => (Function::Reverse, 1..=1),
            "DATEDIFF" => (Function::DateDiff, 2..=2),
            "LENGTH" | "OCTET_LENGTH" => (Function::Length, 1..=1),
            "CHAR_LENGTH" | "CHARACTER_LENGTH" => (Function::CharLength, 1..=1),
            "SUBSTRING" | "SUBSTR" | "MID" => (Function::Substring, 2..=3),
            "LEFT" => (Function::Left, 2..=2),
            "RIGHT" => (Function::Right, 2..=2),
            "REPLACE" => (Function::Replace, 3..=3),
            "LTRIM" => (trim(true, false), 1..=1),
            "RTRIM" => (trim(false, true), 1..=1),
            "DATE_FORMAT" => (Function::DateFormat, 2..=2),
            "DATE" => (Function::Date, 1..=1),
            "ABS" => (Function::Abs, 1..=1),
            "CEIL" | "CEILING" => (Function::Ceil, 1..=1),
            "FLOOR" => (Function::Floor, 1..=1),
            other => (Function::Part(DatePart::named(other)?), 1..=1),
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Function::Upper => "UPPER",
            Function::Lower => "LOWER",
            Function::Concat => "CONCAT",
            Function::ConcatWs => "CONCAT_WS",
            Function::Length => "LENGTH",
            Function::CharLength => "CHAR_LENGTH",
            Function::Substring => "SUBSTRING",
            Function::Left => "LEFT",
            Function::Right => "RIGHT",
            Function::Replace => "REPLACE",
            Function::Trim {
                start: true,
                end: true,
            } => "TRIM",
            Function::Trim { start: true, .. } => "LTRIM",
            Function::Trim { .. } => "RTRIM",
            Function::Locate => "LOCATE",
            Function::Pad { left: true } => "LPAD",
            Function::Pad { left: false } => "RPAD",
            Function::Repeat => "REPEAT",
            Function::Space => "SPACE",
            Function::Reverse => "REVERSE",
            Function::Extreme { greatest: true, .. } => "GREATEST",
            Function::Extreme { .. } => "LEAST",
            Function::DateDiff => "DATEDIFF",
            Function::TimestampDiff(_) => "TIMESTAMPDIFF",
            Function::Part(part) => part.name(),
            Function::DateFormat => "DATE_FORMAT",
            Function::Date => "DATE",
            Function::Abs => "ABS",
            Function::Round(_) => "ROUND",
            Function::Truncate(_) => "TRUNCATE",
            Function::Floor => "FLOOR",
            Function::Ceil => "CEIL",
            Function::ConvertTz(_) => "CONVERT_TZ",
            Function::Cast(_) | Function::CastUnsigned => "CAST",
        }
    }

    /// The type of a call with arguments of types `args`; why not, if it
    /// takes no such arguments.
    pub(crate) fn result(self, args: &[Ty]) -> Result<Ty, String> {
        let takes =
            |what: &str, t: Ty| format!("{} takes {what}, not {}", self.name(), t.describe());
        let text = |t: Ty| matches!(t, Ty::Text | Ty::Binary | Ty::Null);
        let first = args.first().copied().unwrap_or(Ty::Null);
        match self {
            Function::Upper | Function::Lower => match first {
                Ty::Binary => Ok(Ty::Binary),
                t if text(t) => Ok(Ty::Text),
                t => Err(takes("a string", t)),
            },
            Function::Concat | Function::ConcatWs => Ok(if args.contains(&Ty::Binary) {
                Ty::Binary
            } else {
                Ty::Text
            }),
            Function::Locate => {
                if let Some(t) = args[..2].iter().find(|t| !text(**t)) {
                    return Err(takes("strings", *t));
                }
                match args.get(2) {
                    None | Some(Ty::Int | Ty::Null) => Ok(Ty::Int),
                    Some(t) => Err(takes("a whole number for its start", *t)),
                }
            }
            Function::Pad { .. } => match (first, args[1], args[2]) {
                (s, Ty::Int | Ty::Null, pad) if text(s) && text(pad) => {
                    Ok(if s == Ty::Binary || pad == Ty::Binary {
                        Ty::Binary
                    } else {
                        Ty::Text
                    })
                }
                (_, Ty::Int | Ty::Null, _) => Err(takes("strings to pad", first)),
                (_, n, _) => Err(takes("a whole number for its length", n)),
            },
            Function::Repeat => match (first, args[1]) {
                (t, Ty::Int | Ty::Null) if text(t) => Ok(string_of(t)),
                (t, Ty::Int | Ty::Null) => Err(takes("a string", t)),
                (_, n) => Err(takes("a whole number of times", n)),
            },
            Function::Space => match first {
                Ty::Int | Ty::Null => Ok(Ty::Text),
                t => Err(takes("a whole number", t)),
            },
            Function::Reverse => match first {
                t if text(t) => Ok(string_of(t)),
                t => Err(takes("a string", t)),
            },
            Function::Extreme { ty, .. } => Ok(ty),
            Function::DateDiff | Function::TimestampDiff(_) => {
                match args.iter().find(|t| !matches!(t, Ty::Time(_) | Ty::Null)) {
                    Some(t) => Err(takes("dates or date-times", *t)),
                    None => Ok(Ty::Int),
                }
            }
            Function::Length | Function::CharLength => Ok(Ty::Int),
            Function::Substring => {
                if !text(first) {
                    return Err(takes("a string", first));
                }
                match args[1..].iter().find(|t| !matches!(t, Ty::Int | Ty::Null)) {
                    Some(t) => Err(takes("whole numbers for its position and length", *t)),
                    None => Ok(string_of(first)),
                }
            }
            Function::Left | Function::Right => match (first, args[1]) {
                (t, Ty::Int | Ty::Null) if text(t) => Ok(string_of(t)),
                (t, Ty::Int | Ty::Null) => Err(takes("a string", t)),
                (_, n) => Err(takes("a whole number for its length", n)),
            },
            Function::Replace | Function::Trim { .. } => match args.iter().find(|t| !text(**t)) {
                Some(t) => Err(takes("strings", *t)),
                None if args.contains(&Ty::Binary) => Ok(Ty::Binary),
                None => Ok(Ty::Text),
            },
            Function::Part(_) => match first {
                Ty::Time(_) | Ty::Null => Ok(Ty::Int),
                t => Err(takes("a date or a date-time", t)),
            },
            Function::DateFormat => match (first, args[1]) {
                (Ty::Time(_) | Ty::Null, Ty::Text | Ty::Null) => Ok(Ty::Text),
                (Ty::Time(_) | Ty::Null, t) => Err(takes("a format string", t)),
                (t, _) => Err(takes("a date or a date-time", t)),
            },
            Function::Date => match first {
                Ty::Time(_) | Ty::Null => Ok(Ty::Time(TimeKind::Date)),
                t => Err(takes("a date or a date-time", t)),
            },
            Function::ConvertTz(_) => match first {
                Ty::Time(TimeKind::Date) | Ty::Null => Ok(Ty::Time(TimeKind::DateTime(0))),
                Ty::Time(TimeKind::DateTime(f) | TimeKind::Timestamp(f)) => {
                    Ok(Ty::Time(TimeKind::DateTime(f)))
                }
                t => Err(takes("a date-time", t)),
            },
            Function::Abs => match first {
                t if t.is_numeric() => Ok(t),
                t => Err(takes("a number", t)),
            },
            Function::Round(d) | Function::Truncate(d) => match first {
                Ty::Decimal(s) => Ok(Ty::Decimal(d.clamp(0, i32::from(s)) as u8)),
                t if t.is_numeric() => Ok(t),
                t => Err(takes("a number", t)),
            },
            Function::Floor | Function::Ceil => match first {
                Ty::Decimal(_) | Ty::Int | Ty::Null => Ok(Ty::Int),
                Ty::Double => Ok(Ty::Double),
                t => Err(takes("a number", t)),
            },
            Function::CastUnsigned => Function::Cast(Ty::Int).result(args),
            Function::Cast(to) => match (first, to) {
                (_, Ty::Text) | (Ty::Null, _) => Ok(to),
                (Ty::Time(_) | Ty::Text, Ty::Time(_)) => Ok(to),
                (from, Ty::Int | Ty::Decimal(_) | Ty::Double)
                    if from.is_numeric() || from == Ty::Text =>
                {
                    Ok(to)
                }
                (from, _) => Err(format!("CAST of {} to {}", from.describe(), to.describe())),
            },
        }
    }

    /// The call on non-null arguments `args`.
    pub(crate) fn call<'a>(self, args: &[Scalar<'_>]) -> Result<Scalar<'a>, EvalError> {
        Ok(match self {
            Function::Upper | Function::Lower => match &args[0] {
                Scalar::Text(b) => {
                    let s = String::from_utf8_lossy(b);
                    let s = if self == Function::Upper {
                        s.to_uppercase()
                    } else {
                        s.to_lowercase()
                    };
                    Scalar::Text(Cow::Owned(s.into_bytes()))
                }
                other => other.to_owned(),
            },
            Function::Concat => {
                let mut out = Vec::new();
                for a in args {
                    out.extend_from_slice(&text_of(a));
                    bounded(&out)?;
                }
                string(args, out)
            }
            Function::Length => Scalar::Int(text_of(&args[0]).len() as i128),
            Function::CharLength => match &args[0] {
                Scalar::Binary(b) => Scalar::Int(b.len() as i128),
                other => {
                    let text = text_of(other);
                    Scalar::Int(String::from_utf8_lossy(&text).chars().count() as i128)
                }
            },
            Function::Substring => {
                let whole = |i: usize| match args.get(i) {
                    Some(Scalar::Int(v)) => Some(*v),
                    _ => None,
                };
                let (from, count) = (whole(1).unwrap_or(1), whole(2));
                part(&args[0], |len| span(len, from, count))
            }
            Function::Left | Function::Right => {
                let n = match args[1] {
                    Scalar::Int(n) => usize::try_from(n).unwrap_or(0),
                    _ => 0,
                };
                let left = self == Function::Left;
                part(&args[0], |len| {
                    let n = n.min(len);
                    (if left { 0 } else { len - n }, n)
                })
            }
            Function::Replace => {
                let (s, from, to) = (text_of(&args[0]), text_of(&args[1]), text_of(&args[2]));
                string(args, replace(&s, &from, &to)?)
            }
            Function::Trim { start, end } => {
                let s = text_of(&args[0]);
                let cut = args.get(1).map_or(Cow::Borrowed(&b" "[..]), text_of);
                let mut part: &[u8] = &s;
                if !cut.is_empty() {
                    while start && part.starts_with(&cut) {
                        part = &part[cut.len()..];
                    }
                    while end && part.ends_with(&cut) {
                        part = &part[..part.len() - cut.len()];
                    }
                }
                string(args, part.to_vec())
            }
            Function::ConcatWs => {
                // A NULL separator is NULL; a NULL after it is skipped.
                let Some((sep, rest)) = args.split_first().filter(|(s, _)| !s.is_null()) else {
                    return Ok(Scalar::Null);
                };
                let sep = text_of(sep);
                let mut out = Vec::new();
                for (i, a) in rest.iter().filter(|a| !a.is_null()).enumerate() {
                    if i > 0 {
                        out.extend_from_slice(&sep);
                    }
                    out.extend_from_slice(&text_of(a));
                    bounded(&out)?;
                }
                string(args, out)
            }
            Function::Locate => {
                let from = match args.get(2) {
                    Some(Scalar::Int(from)) => *from,
                    _ => 1,
                };
                Scalar::Int(locate(&args[0], &args[1], from))
            }
            Function::Pad { left } => {
                let n = match args[1] {
                    Scalar::Int(n) => n,
                    _ => return Ok(Scalar::Null),
                };
                pad(args, n, left)?
            }
            Function::Repeat | Function::Space => {
                let (s, n) = match (self, args) {
                    (Function::Space, [Scalar::Int(n)]) => (Cow::Borrowed(&b" "[..]), *n),
                    (_, [s, Scalar::Int(n)]) => (text_of(s), *n),
                    _ => return Ok(Scalar::Null),
                };
                // A negative count repeats nothing; one past usize, too much.
                let times = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
                if s.len().saturating_mul(times) > MAX_RESULT_BYTES {
                    return Err(too_long());
                }
                string(args, s.repeat(times))
            }
            Function::Reverse => match &args[0] {
                Scalar::Binary(b) => Scalar::Binary(Cow::Owned(b.iter().rev().copied().collect())),
                other => {
                    let text = text_of(other);
                    let reversed: String = String::from_utf8_lossy(&text).chars().rev().collect();
                    Scalar::Text(Cow::Owned(reversed.into_bytes()))
                }
            },
            Function::Extreme { greatest, ty } => {
                let mut best: Option<Scalar<'a>> = None;
                for a in args {
                    let v = eval::as_type(a.to_owned(), ty)?;
                    let better = match &best {
                        None => true,
                        Some(b) => {
                            let ord = eval::compare(&v, b);
                            ord == Some(if greatest {
                                std::cmp::Ordering::Greater
                            } else {
                                std::cmp::Ordering::Less
                            })
                        }
                    };
                    if better {
                        best = Some(v);
                    }
                }
                best.unwrap_or(Scalar::Null)
            }
            Function::DateDiff => Scalar::Int(i128::from(
                day_and_time(&args[0]).0 - day_and_time(&args[1]).0,
            )),
            Function::TimestampDiff(unit) => Scalar::Int(i128::from(
                unit.between(day_and_time(&args[0]), day_and_time(&args[1])),
            )),
            Function::ConvertTz(shift) => {
                let (at, fsp) = match args[0] {
                    Scalar::Time(TimeKind::Date, d) => (d * MICROS_PER_DAY, 0),
                    Scalar::Time(TimeKind::DateTime(f) | TimeKind::Timestamp(f), t) => (t, f),
                    _ => return Ok(Scalar::Null),
                };
                match at.checked_add(shift).filter(|t| micros_in_range(*t)) {
                    Some(t) => Scalar::Time(TimeKind::DateTime(fsp), t),
                    None => {
                        return Err(EvalError::new(
                            "value out of range: CONVERT_TZ past 0001-01-01 to 9999-12-31",
                        ));
                    }
                }
            }
            Function::Date => match args[0] {
                Scalar::Time(_, _) => Scalar::Time(TimeKind::Date, day_and_time(&args[0]).0),
                _ => Scalar::Null,
            },
            Function::Part(part) => match args[0] {
                Scalar::Time(_, _) => {
                    let (day, micros) = day_and_time(&args[0]);
                    Scalar::Int(i128::from(part.of(day, micros)))
                }
                _ => Scalar::Null,
            },
            Function::DateFormat => match args[0] {
                Scalar::Time(_, _) => {
                    let (day, micros) = day_and_time(&args[0]);
                    let format = text_of(&args[1]);
                    Scalar::Text(Cow::Owned(date_format(day, micros, &format)?))
                }
                _ => Scalar::Null,
            },
            Function::Abs => match args[0] {
                Scalar::Int(v) => Scalar::Int(v.abs()),
                Scalar::Decimal(m, s) => Scalar::Decimal(m.abs(), s),
                Scalar::Double(v) => Scalar::Double(v.abs()),
                _ => Scalar::Null,
            },
            Function::Round(d) => round(&args[0], d, Rounding::HalfAway)?,
            Function::Truncate(d) => round(&args[0], d, Rounding::TowardZero)?,
            Function::Floor | Function::Ceil => {
                let up = self == Function::Ceil;
                match args[0] {
                    Scalar::Int(v) => Scalar::Int(v),
                    Scalar::Decimal(m, s) => {
                        let unit = POW10[usize::from(s)];
                        let q = m.div_euclid(unit);
                        let q = if up && m.rem_euclid(unit) != 0 {
                            q + 1
                        } else {
                            q
                        };
                        Scalar::Int(q)
                    }
                    Scalar::Double(v) => Scalar::Double(if up { v.ceil() } else { v.floor() }),
                    _ => Scalar::Null,
                }
            }
            Function::Cast(to) => cast(&args[0], to)?,
            Function::CastUnsigned => match cast(&args[0], Ty::Int)? {
                Scalar::Int(v) if v < 0 => {
                    return Err(EvalError::new(format!(
                        "CAST of {v} to UNSIGNED: it is negative"
                    )));
                }
                v => v,
            },
        })
    }
}

/// A unit `TIMESTAMPDIFF` counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DiffUnit {
    Microsecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl DiffUnit {
    /// The unit called `name` (in capitals), as TIMESTAMPDIFF takes it.
    pub(crate) fn named(name: &str) -> Option<DiffUnit> {
        Some(match name {
            "MICROSECOND" | "FRAC_SECOND" => DiffUnit::Microsecond,
            "SECOND" => DiffUnit::Second,
            "MINUTE" => DiffUnit::Minute,
            "HOUR" => DiffUnit::Hour,
            "DAY" => DiffUnit::Day,
            "WEEK" => DiffUnit::Week,
            "MONTH" => DiffUnit::Month,
            "QUARTER" => DiffUnit::Quarter,
            "YEAR" => DiffUnit::Year,
            _ => return None,
        })
    }

    /// Whole units from `a` to `b` (each a day and the microseconds into
    /// it), negative when `b` is earlier, as MySQL counts them: a month
    /// is whole when the later moment's day and time of day are not
    /// before the earlier one's (Jan 31 to Feb 29 is 0 months).
    fn between(self, a: (i64, i64), b: (i64, i64)) -> i64 {
        if b < a {
            return -self.between(b, a);
        }
        let micros = (b.0 - a.0) * MICROS_PER_DAY + (b.1 - a.1);
        let months = || {
            let ((ya, ma, da), (yb, mb, db)) = (civil_from_days(a.0), civil_from_days(b.0));
            let whole = (yb - ya) * 12 + i64::from(mb) - i64::from(ma);
            if (db, b.1) < (da, a.1) {
                whole - 1
            } else {
                whole
            }
        };
        match self {
            DiffUnit::Microsecond => micros,
            DiffUnit::Second => micros / 1_000_000,
            DiffUnit::Minute => micros / 60_000_000,
            DiffUnit::Hour => micros / 3_600_000_000,
            DiffUnit::Day => micros / MICROS_PER_DAY,
            DiffUnit::Week => micros / (7 * MICROS_PER_DAY),
            DiffUnit::Month => months(),
            DiffUnit::Quarter => months() / 3,
            DiffUnit::Year => months() / 12,
        }
    }
}

/// `LOCATE(sub, s, from)`: where `sub` is first found in `s` at or after
/// position `from` (from 1), 0 if nowhere or `from` is past `s`'s end;
/// characters of text, bytes if either is bytes.
fn locate(sub: &Scalar<'_>, s: &Scalar<'_>, from: i128) -> i128 {
    let (sub_b, s_b) = (text_of(sub), text_of(s));
    if matches!(sub, Scalar::Binary(_)) || matches!(s, Scalar::Binary(_)) {
        let Some(start) = usize::try_from(from - 1).ok().filter(|at| *at <= s_b.len()) else {
            return 0;
        };
        return find(&s_b[start..], &sub_b).map_or(0, |at| (start + at + 1) as i128);
    }
    let text = String::from_utf8_lossy(&s_b);
    let chars = text.chars().count();
    let Some(start) = usize::try_from(from - 1).ok().filter(|at| *at <= chars) else {
        return 0;
    };
    let byte_start = text
        .char_indices()
        .nth(start)
        .map_or(text.len(), |(at, _)| at);
    match find(&text.as_bytes()[byte_start..], &sub_b) {
        Some(at) => (start + text[byte_start..byte_start + at].chars().count() + 1) as i128,
        None => 0,
    }
}

/// Where `needle` first is in `hay` (an empty one at 0).
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `LPAD(s, n, pad)` (or `RPAD`) of `args`: NULL for a negative `n`, or
/// an empty `pad` where padding is wanted; characters of text, bytes if
/// any argument is bytes.
fn pad<'a>(args: &[Scalar<'_>], n: i128, left: bool) -> Result<Scalar<'a>, EvalError> {
    let Ok(n) = usize::try_from(n) else {
        return Ok(Scalar::Null);
    };
    if n > MAX_RESULT_BYTES {
        return Err(too_long());
    }
    let bytes = args.iter().any(|a| matches!(a, Scalar::Binary(_)));
    // Where each item (character, or byte) of `b` starts, and its end.
    let starts = |b: &[u8]| -> Vec<usize> {
        if bytes {
            (0..=b.len()).collect()
        } else {
            let text = String::from_utf8_lossy(b);
            let mut at: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
            at.push(b.len());
            at
        }
    };
    let (s, with) = (text_of(&args[0]), text_of(&args[2]));
    let s_at = starts(&s);
    let have = s_at.len() - 1;
    if n <= have {
        return Ok(string(args, s[..s_at[n]].to_vec()));
    }
    let with_at = starts(&with);
    let per = with_at.len() - 1;
    if per == 0 {
        return Ok(Scalar::Null);
    }
    let need = n - have;
    let mut padding = with.repeat(need / per);
    padding.extend_from_slice(&with[..with_at[need % per]]);
    let out = if left {
        [padding, s.into_owned()].concat()
    } else {
        [s.into_owned(), padding].concat()
    };
    bounded(&out)?;
    Ok(string(args, out))
}

/// A part of a date or date-time, as `EXTRACT` and the functions named
/// after them take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DatePart {
    Year,
    Quarter,
    Month,
    Day,
    /// 1 to 366.
    DayOfYear,
    /// 1 (Sunday) to 7, as `DAYOFWEEK`.
    DayOfWeek,
    /// 0 (Monday) to 6, as `WEEKDAY`.
    Weekday,
    Hour,
    Minute,
    Second,
    Microsecond,
}

impl DatePart {
    /// The part a function of one argument is named after.
    fn named(name: &str) -> Option<DatePart> {
        Some(match name {
            "YEAR" => DatePart::Year,
            "QUARTER" => DatePart::Quarter,
            "MONTH" => DatePart::Month,
            "DAY" | "DAYOFMONTH" => DatePart::Day,
            "DAYOFYEAR" => DatePart::DayOfYear,
            "DAYOFWEEK" => DatePart::DayOfWeek,
            "WEEKDAY" => DatePart::Weekday,
            "HOUR" => DatePart::Hour,
            "MINUTE" => DatePart::Minute,
            "SECOND" => DatePart::Second,
            "MICROSECOND" => DatePart::Microsecond,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            DatePart::Year => "YEAR",
            DatePart::Quarter => "QUARTER",
            DatePart::Month => "MONTH",
            DatePart::Day => "DAY",
            DatePart::DayOfYear => "DAYOFYEAR",
            DatePart::DayOfWeek => "DAYOFWEEK",
            DatePart::Weekday => "WEEKDAY",
            DatePart::Hour => "HOUR",
            DatePart::Minute => "MINUTE",
            DatePart::Second => "SECOND",
            DatePart::Microsecond => "MICROSECOND",
        }
    }

    /// The part of the moment `micros` into day `day` (since 1970-01-01).
    fn of(self, day: i64, micros: i64) -> i64 {
        let (y, m, d) = civil_from_days(day);
        let seconds = micros / 1_000_000;
        match self {
            DatePart::Year => y,
            DatePart::Quarter => i64::from(m.div_ceil(3)),
            DatePart::Month => i64::from(m),
            DatePart::Day => i64::from(d),
            DatePart::DayOfYear => day - i64::from(days_from_civil(y as i32, 1, 1)) + 1,
            // 1970-01-01 was a Thursday.
            DatePart::DayOfWeek => (day + 4).rem_euclid(7) + 1,
            DatePart::Weekday => (day + 3).rem_euclid(7),
            DatePart::Hour => seconds / 3600,
            DatePart::Minute => seconds / 60 % 60,
            DatePart::Second => seconds % 60,
            DatePart::Microsecond => micros % 1_000_000,
        }
    }
}

/// A date or date-time as its day (since 1970-01-01) and the microseconds
/// into it.
fn day_and_time(t: &Scalar<'_>) -> (i64, i64) {
    match *t {
        Scalar::Time(TimeKind::Date, d) => (d, 0),
        Scalar::Time(_, t) => (t.div_euclid(MICROS_PER_DAY), t.rem_euclid(MICROS_PER_DAY)),
        _ => (0, 0),
    }
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Why `DATE_FORMAT` does not take `format`, if it does not: the week
/// specifiers (`%U %u %V %v %X %x`), whose week numbering Shoal does not
/// compute. Any other character after `%` is written as itself, as MySQL
/// writes it.
pub(crate) fn format_refusal(format: &[u8]) -> Option<String> {
    let mut bytes = format.iter();
    while let Some(b) = bytes.next() {
        if *b == b'%'
            && let Some(spec @ (b'U' | b'u' | b'V' | b'v' | b'X' | b'x')) = bytes.next()
        {
            return Some(format!(
                "DATE_FORMAT's week specifier %{}",
                char::from(*spec)
            ));
        }
    }
    None
}

/// `DATE_FORMAT` of the moment `micros` into day `day`, as MySQL writes
/// each specifier.
fn date_format(day: i64, micros: i64, format: &[u8]) -> Result<Vec<u8>, EvalError> {
    use std::io::Write as _;
    let (y, m, d) = civil_from_days(day);
    let seconds = micros / 1_000_000;
    let (hour, minute, second) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    let hour12 = (hour + 11) % 12 + 1;
    let am_pm = if hour < 12 { "AM" } else { "PM" };
    let weekday = (day + 3).rem_euclid(7) as usize;
    let month = MONTHS[m as usize - 1];
    let mut out = Vec::with_capacity(format.len() * 2);
    let mut bytes = format.iter();
    while let Some(&b) = bytes.next() {
        if b != b'%' {
            out.push(b);
            continue;
        }
        let Some(&spec) = bytes.next() else {
            out.push(b'%');
            break;
        };
        // Writing into a Vec cannot fail.
        let _ = match spec {
            b'Y' => write!(out, "{y:04}"),
            b'y' => write!(out, "{:02}", y % 100),
            b'm' => write!(out, "{m:02}"),
            b'c' => write!(out, "{m}"),
            b'M' => write!(out, "{month}"),
            b'b' => write!(out, "{}", &month[..3]),
            b'd' => write!(out, "{d:02}"),
            b'e' => write!(out, "{d}"),
            b'D' => {
                let suffix = match (d % 10, d / 10) {
                    (_, 1) => "th",
                    (1, _) => "st",
                    (2, _) => "nd",
                    (3, _) => "rd",
                    _ => "th",
                };
                write!(out, "{d}{suffix}")
            }
            b'j' => write!(
                out,
                "{:03}",
                day - i64::from(days_from_civil(y as i32, 1, 1)) + 1
            ),
            b'W' => write!(out, "{}", WEEKDAYS[weekday]),
            b'a' => write!(out, "{}", &WEEKDAYS[weekday][..3]),
            b'w' => write!(out, "{}", (weekday + 1) % 7),
            b'H' => write!(out, "{hour:02}"),
            b'k' => write!(out, "{hour}"),
            b'h' | b'I' => write!(out, "{hour12:02}"),
            b'l' => write!(out, "{hour12}"),
            b'i' => write!(out, "{minute:02}"),
            b'S' | b's' => write!(out, "{second:02}"),
            b'f' => write!(out, "{:06}", micros % 1_000_000),
            b'p' => write!(out, "{am_pm}"),
            b'r' => write!(out, "{hour12:02}:{minute:02}:{second:02} {am_pm}"),
            b'T' => write!(out, "{hour:02}:{minute:02}:{second:02}"),
            b'U' | b'u' | b'V' | b'v' | b'X' | b'x' => {
                return Err(EvalError::new(format!(
                    "DATE_FORMAT's week specifier %{} is not computed",
                    char::from(spec)
                )));
            }
            other => {
                out.push(other);
                Ok(())
            }
        };
        bounded(&out)?;
    }
    Ok(out)
}

/// A string result of a call on `args`: bytes if any argument is, else
/// text (as the call's type says).
fn string<'a>(args: &[Scalar<'_>], out: Vec<u8>) -> Scalar<'a> {
    if args.iter().any(|a| matches!(a, Scalar::Binary(_))) {
        Scalar::Binary(Cow::Owned(out))
    } else {
        Scalar::Text(Cow::Owned(out))
    }
}

/// The part of `s` that `at` finds (where it starts and how many it
/// takes, given how many there are): characters of text, bytes of bytes.
fn part<'a>(s: &Scalar<'_>, at: impl FnOnce(usize) -> (usize, usize)) -> Scalar<'a> {
    match s {
        Scalar::Binary(b) => {
            let (from, n) = at(b.len());
            Scalar::Binary(Cow::Owned(b[from..from + n].to_vec()))
        }
        other => {
            let text = text_of(other);
            let text = String::from_utf8_lossy(&text);
            let (from, n) = at(text.chars().count());
            let part: String = text.chars().skip(from).take(n).collect();
            Scalar::Text(Cow::Owned(part.into_bytes()))
        }
    }
}

/// Text or bytes of the type `t` is, or keeps: bytes stay bytes.
fn string_of(t: Ty) -> Ty {
    if t == Ty::Binary {
        Ty::Binary
    } else {
        Ty::Text
    }
}

/// `s` with every `from` (left to right, not overlapping) made `to`; `s`
/// as it is for an empty `from`, as MySQL's `REPLACE`.
fn replace(s: &[u8], from: &[u8], to: &[u8]) -> Result<Vec<u8>, EvalError> {
    if from.is_empty() {
        return Ok(s.to_vec());
    }
    let mut out = Vec::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.windows(from.len()).position(|w| w == from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        bounded(&out)?;
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    Ok(out)
}

/// A text or bytes result no longer than `MAX_RESULT_BYTES`.
fn bounded(b: &[u8]) -> Result<(), EvalError> {
    if b.len() > MAX_RESULT_BYTES {
        return Err(too_long());
    }
    Ok(())
}

fn too_long() -> EvalError {
    EvalError::new(format!(
        "a string result is longer than {MAX_RESULT_BYTES} bytes"
    ))
}

/// Where `SUBSTRING(s, from, count)` starts in `len` items, and how many
/// it takes, as MySQL counts: from 1, a negative `from` from the end, 0
/// or past either end nothing.
fn span(len: usize, from: i128, count: Option<i128>) -> (usize, usize) {
    let len_i = len as i128;
    let at = match from {
        0 => return (0, 0),
        f if f > 0 => f - 1,
        f => len_i + f,
    };
    if at < 0 || at >= len_i {
        return (0, 0);
    }
    let rest = len_i - at;
    let n = count.map_or(rest, |c| c.clamp(0, rest));
    (at as usize, n as usize)
}

/// A value as the text MySQL makes of it: numbers in digits, dates and
/// times in their ISO forms, text and bytes as they are.
pub(crate) fn text_of<'a>(v: &'a Scalar<'_>) -> Cow<'a, [u8]> {
    let owned = |s: String| Cow::Owned(s.into_bytes());
    match v {
        Scalar::Null => Cow::Borrowed(b""),
        Scalar::Text(b) | Scalar::Binary(b) => Cow::Borrowed(b.as_ref()),
        Scalar::Int(x) => owned(x.to_string()),
        Scalar::Decimal(m, s) => owned(
            Decimal {
                mantissa: *m,
                scale: *s,
            }
            .to_string(),
        ),
        Scalar::Double(x) => owned(x.to_string()),
        Scalar::Time(TimeKind::Date, d) => owned(Date(*d as i32).to_string()),
        Scalar::Time(TimeKind::DateTime(fsp) | TimeKind::Timestamp(fsp), t) => {
            owned(WithFsp(*t, *fsp).to_string())
        }
    }
}

/// `ROUND(x, d)`: exact numbers half away from zero, doubles half to even
/// (as MySQL rounds each).
/// How `round` drops digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rounding {
    /// ROUND's: half away from zero (doubles half to even, as MySQL's).
    HalfAway,
    /// TRUNCATE's: toward zero.
    TowardZero,
}

fn round<'a>(x: &Scalar<'_>, d: i32, how: Rounding) -> Result<Scalar<'a>, EvalError> {
    let out_of_range = || EvalError::new("a result of ROUND or TRUNCATE is out of range");
    let to_unit = |m: i128, drop: u32| -> Result<i128, EvalError> {
        // `m` rounded to a multiple of 10^drop, divided by it.
        let unit = *POW10.get(drop as usize).ok_or_else(out_of_range)?;
        let (q, r) = (m / unit, m % unit);
        Ok(if how == Rounding::HalfAway && r.abs() * 2 >= unit {
            q + m.signum()
        } else {
            q
        })
    };
    Ok(match *x {
        Scalar::Int(v) if d >= 0 => Scalar::Int(v),
        Scalar::Int(v) => {
            let drop = d.unsigned_abs();
            let unit = *POW10.get(drop as usize).ok_or_else(out_of_range)?;
            let r = to_unit(v, drop)?
                .checked_mul(unit)
                .ok_or_else(out_of_range)?;
            Scalar::Int(eval::int_in_range(r)?)
        }
        Scalar::Decimal(m, s) => {
            let keep = d.clamp(0, i32::from(s)) as u8;
            let q = to_unit(m, u32::from(s - keep))?;
            if d < 0 {
                let drop = d.unsigned_abs();
                let unit = *POW10.get(drop as usize).ok_or_else(out_of_range)?;
                Scalar::Decimal(
                    to_unit(q, drop)?
                        .checked_mul(unit)
                        .ok_or_else(out_of_range)?,
                    0,
                )
            } else {
                Scalar::Decimal(q, keep)
            }
        }
        Scalar::Double(v) => {
            let p = 10f64.powi(d);
            let r = match how {
                Rounding::HalfAway => (v * p).round_ties_even(),
                Rounding::TowardZero => (v * p).trunc(),
            } / p;
            Scalar::Double(if r.is_finite() { r } else { v })
        }
        _ => Scalar::Null,
    })
}

/// `CAST(x AS to)`: what the statement asked for, so a number is rounded
/// to the type's decimals (as MySQL's CAST does); text must read as the
/// number whole, or the statement fails.
fn cast<'a>(x: &Scalar<'_>, to: Ty) -> Result<Scalar<'a>, EvalError> {
    let exact = |x: &Scalar<'_>| -> Result<(i128, u8), EvalError> {
        Ok(match x {
            Scalar::Int(v) => (*v, 0),
            Scalar::Decimal(m, s) => (*m, *s),
            Scalar::Double(v) => {
                let text = format!("{v:.prec$}", prec = usize::from(MAX_SCALE) / 2);
                parse_decimal(&text)?
            }
            Scalar::Text(b) => parse_decimal(std::str::from_utf8(b).unwrap_or("").trim())?,
            _ => return Err(EvalError::new("CAST of a value that is not a number")),
        })
    };
    Ok(match to {
        Ty::Text => Scalar::Text(Cow::Owned(text_of(x).into_owned())),
        Ty::Int => {
            let (m, s) = exact(x)?;
            let v = round(&Scalar::Decimal(m, s), 0, Rounding::HalfAway)?;
            match v {
                Scalar::Decimal(m, _) => Scalar::Int(eval::int_in_range(m)?),
                other => other,
            }
        }
        Ty::Decimal(scale) => {
            let (m, s) = exact(x)?;
            if s >= scale {
                round(&Scalar::Decimal(m, s), i32::from(scale), Rounding::HalfAway)?
            } else {
                let up = POW10[usize::from(scale - s)];
                let m = m
                    .checked_mul(up)
                    .ok_or_else(|| EvalError::new("a result of CAST is out of range"))?;
                Scalar::Decimal(m, scale)
            }
        }
        Ty::Double => match x {
            Scalar::Text(b) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.trim().parse::<f64>().ok())
                .filter(|v| v.is_finite())
                .map(Scalar::Double)
                .ok_or_else(|| not_a_number(b))?,
            other => {
                let (m, s) = exact(other)?;
                Scalar::Double(m as f64 / 10f64.powi(i32::from(s)))
            }
        },
        Ty::Time(kind) => cast_moment(x, kind)?,
        _ => x.to_owned(),
    })
}

/// A date, a date-time or a string read as one, as a date or a date-time
/// of `kind`'s digits (fewer fractional digits rounded, half up, as
/// MySQL's CAST rounds them).
fn cast_moment<'a>(x: &Scalar<'_>, kind: TimeKind) -> Result<Scalar<'a>, EvalError> {
    let micros = match x {
        Scalar::Time(TimeKind::Date, d) => d * MICROS_PER_DAY,
        Scalar::Time(_, t) => *t,
        Scalar::Text(b) => {
            let text = String::from_utf8_lossy(b);
            let text = text.trim();
            crate::types::value::DateTime::parse(text)
                .map(|t| t.0)
                .or_else(|_| Date::parse(text).map(|d| i64::from(d.0) * MICROS_PER_DAY))
                .map_err(|m| EvalError::new(format!("CAST of {m}")))?
        }
        _ => return Err(EvalError::new("CAST of a value that is not a date")),
    };
    Ok(match kind {
        TimeKind::Date => Scalar::Time(kind, micros.div_euclid(MICROS_PER_DAY)),
        TimeKind::DateTime(fsp) | TimeKind::Timestamp(fsp) => {
            let unit = 10i64.pow(6 - u32::from(fsp.min(6)));
            let rounded =
                (micros.div_euclid(unit) + i64::from(micros.rem_euclid(unit) * 2 >= unit)) * unit;
            if !micros_in_range(rounded) {
                return Err(EvalError::new("value out of range: CAST past 9999-12-31"));
            }
            Scalar::Time(kind, rounded)
        }
    })
}

fn parse_decimal(text: &str) -> Result<(i128, u8), EvalError> {
    let digits = text.split_once('.').map_or(0, |(_, f)| f.len());
    let scale = u8::try_from(digits)
        .ok()
        .filter(|s| *s <= MAX_SCALE)
        .ok_or_else(|| not_a_number(text.as_bytes()))?;
    let m = Decimal::parse(text, 38, scale).map_err(|_| not_a_number(text.as_bytes()))?;
    Ok((m, scale))
}

fn not_a_number(b: &[u8]) -> EvalError {
    EvalError::new(format!(
        "CAST: '{}' is not a number",
        String::from_utf8_lossy(&b[..b.len().min(64)])
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_parts_and_formats_are_mysqls() {
        let call = |f: Function, args: &[Scalar<'_>]| f.call(args).unwrap();
        // 2024-02-29 (a Thursday) 13:05:09.000042.
        let day = i64::from(crate::types::value::Date::parse("2024-02-29").unwrap().0);
        let micros = ((13 * 60 + 5) * 60 + 9) * 1_000_000 + 42;
        let t = Scalar::Time(TimeKind::DateTime(6), day * MICROS_PER_DAY + micros);
        let part = |p: DatePart| call(Function::Part(p), std::slice::from_ref(&t));
        for (p, want) in [
            (DatePart::Year, 2024),
            (DatePart::Quarter, 1),
            (DatePart::Month, 2),
            (DatePart::Day, 29),
            (DatePart::DayOfYear, 60),
            (DatePart::DayOfWeek, 5),
            (DatePart::Weekday, 3),
            (DatePart::Hour, 13),
            (DatePart::Minute, 5),
            (DatePart::Second, 9),
            (DatePart::Microsecond, 42),
        ] {
            assert_eq!(part(p), Scalar::Int(want), "{p:?}");
        }
        // Before 1970 too: 1969-12-31 was a Wednesday.
        let eve = Scalar::Time(TimeKind::Date, -1);
        assert_eq!(
            call(
                Function::Part(DatePart::Weekday),
                std::slice::from_ref(&eve)
            ),
            Scalar::Int(2)
        );
        assert_eq!(
            call(Function::Part(DatePart::DayOfYear), &[eve]),
            Scalar::Int(365)
        );
        let format = |f: &str| match call(
            Function::DateFormat,
            &[t.clone(), Scalar::Text(f.as_bytes().to_vec().into())],
        ) {
            Scalar::Text(b) => String::from_utf8(b.into_owned()).unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(format("%Y-%m-%d %H:%i:%s.%f"), "2024-02-29 13:05:09.000042");
        assert_eq!(
            format("%W %M %D %Y, %l:%i %p"),
            "Thursday February 29th 2024, 1:05 PM"
        );
        assert_eq!(
            format("%a %b %e %c %y %j %w %k %h %I %T %r"),
            "Thu Feb 29 2 24 060 4 13 01 01 13:05:09 01:05:09 PM"
        );
        assert_eq!(format("100%% %Q %"), "100% Q %");
        assert!(format_refusal(b"%Y week %U").is_some());
        assert_eq!(format_refusal(b"%Y %%U"), None, "%% is a percent sign");
        assert_eq!(format_refusal(b"%Y-%m-%d"), None);
        for (d, th) in [
            (1, "1st"),
            (2, "2nd"),
            (3, "3rd"),
            (4, "4th"),
            (11, "11th"),
            (12, "12th"),
            (13, "13th"),
            (21, "21st"),
            (22, "22nd"),
            (23, "23rd"),
            (31, "31st"),
        ] {
            let t = Scalar::Time(
                TimeKind::Date,
                i64::from(
                    crate::types::value::Date::parse(&format!("2024-01-{d:02}"))
                        .unwrap()
                        .0,
                ),
            );
            let out = call(
                Function::DateFormat,
                &[t, Scalar::Text(b"%D".to_vec().into())],
            );
            assert_eq!(out, Scalar::Text(th.as_bytes().to_vec().into()));
        }
    }

    #[test]
    fn casts_to_dates_read_and_round_as_mysql() {
        let text = |s: &str| Scalar::Text(s.as_bytes().to_vec().into());
        let cast = |x: Scalar<'_>, kind| cast_moment(&x, kind);
        let day = |s: &str| i64::from(crate::types::value::Date::parse(s).unwrap().0);
        assert_eq!(
            cast(text("2024-03-01 23:59:59"), TimeKind::Date),
            Ok(Scalar::Time(TimeKind::Date, day("2024-03-01")))
        );
        assert_eq!(
            cast(text(" 2024-03-01 "), TimeKind::DateTime(0)),
            Ok(Scalar::Time(
                TimeKind::DateTime(0),
                day("2024-03-01") * MICROS_PER_DAY
            ))
        );
        // 12:00:00.5 to whole seconds rounds up; .4999 down.
        let noon = day("2024-03-01") * MICROS_PER_DAY + 12 * 3_600_000_000;
        assert_eq!(
            cast(
                Scalar::Time(TimeKind::DateTime(6), noon + 500_000),
                TimeKind::DateTime(0)
            ),
            Ok(Scalar::Time(TimeKind::DateTime(0), noon + 1_000_000))
        );
        assert_eq!(
            cast(
                Scalar::Time(TimeKind::DateTime(6), noon + 499_999),
                TimeKind::DateTime(0)
            ),
            Ok(Scalar::Time(TimeKind::DateTime(0), noon))
        );
        assert!(cast(text("soon"), TimeKind::Date).is_err());
        assert!(cast(Scalar::Int(20240301), TimeKind::Date).is_err());
        let last = (day("9999-12-31") + 1) * MICROS_PER_DAY - 1;
        assert!(
            cast(
                Scalar::Time(TimeKind::DateTime(6), last),
                TimeKind::DateTime(0)
            )
            .is_err()
        );
    }

    #[test]
    fn time_zones_are_utc_or_offsets_mysql_takes() {
        let hours = |h: i64, m: i64| Some((h * 60 + m) * 60 * 1_000_000);
        assert_eq!(zone_offset("UTC"), Some(0));
        assert_eq!(zone_offset("system"), Some(0));
        assert_eq!(zone_offset("+05:30"), hours(5, 30));
        assert_eq!(zone_offset("-5:00"), hours(-5, 0));
        assert_eq!(zone_offset("+14:00"), hours(14, 0));
        assert_eq!(zone_offset("-13:59"), hours(-13, -59));
        for bad in [
            "+14:01",
            "-14:00",
            "+05:60",
            "+5",
            "05:00",
            "+05:3",
            "+005:00",
            "Europe/Berlin",
            "",
            "+",
            "+:",
            "+05:-1",
        ] {
            assert_eq!(zone_offset(bad), None, "{bad}");
        }
    }

    fn text(s: &str) -> Scalar<'static> {
        Scalar::Text(Cow::Owned(s.as_bytes().to_vec()))
    }

    #[test]
    fn substring_counts_as_mysql_does() {
        let s = text("Quadratically");
        let sub = |from: i128, count: Option<i128>| {
            let mut args = vec![s.clone(), Scalar::Int(from)];
            args.extend(count.map(Scalar::Int));
            Function::Substring.call(&args).unwrap()
        };
        assert_eq!(sub(5, None), text("ratically"));
        assert_eq!(sub(5, Some(6)), text("ratica"));
        assert_eq!(sub(-3, None), text("lly"));
        assert_eq!(sub(-5, Some(3)), text("cal"));
        assert_eq!(sub(0, None), text(""));
        assert_eq!(sub(99, None), text(""));
        assert_eq!(sub(2, Some(-1)), text(""));
        let multi = text("ÅÄÖx");
        assert_eq!(
            Function::Substring
                .call(&[multi.clone(), Scalar::Int(2), Scalar::Int(2)])
                .unwrap(),
            text("ÄÖ")
        );
        assert_eq!(
            Function::CharLength
                .call(std::slice::from_ref(&multi))
                .unwrap(),
            Scalar::Int(4)
        );
        assert_eq!(Function::Length.call(&[multi]).unwrap(), Scalar::Int(7));
    }

    #[test]
    fn text_functions_take_characters_and_dates_their_parts() {
        let call = |f: Function, args: &[Scalar<'static>]| f.call(args).unwrap();
        let s = text("ÅÄÖab");
        assert_eq!(
            call(Function::Left, &[s.clone(), Scalar::Int(2)]),
            text("ÅÄ")
        );
        assert_eq!(
            call(Function::Right, &[s.clone(), Scalar::Int(2)]),
            text("ab")
        );
        assert_eq!(call(Function::Right, &[s.clone(), Scalar::Int(9)]), s);
        assert_eq!(
            call(Function::Left, &[s.clone(), Scalar::Int(-1)]),
            text("")
        );
        assert_eq!(
            call(Function::Replace, &[text("a-b-c"), text("-"), text("--")]),
            text("a--b--c")
        );
        assert_eq!(
            call(Function::Replace, &[text("abc"), text(""), text("x")]),
            text("abc")
        );
        assert_eq!(
            call(Function::Replace, &[text("aaa"), text("aa"), text("b")]),
            text("ba")
        );
        let trim = Function::Trim {
            start: true,
            end: true,
        };
        assert_eq!(call(trim, &[text("  x y  ")]), text("x y"));
        assert_eq!(call(trim, &[text("xxaxx"), text("x")]), text("a"));
        assert_eq!(call(trim, &[text("xyxyaxy"), text("xy")]), text("a"));
        let ltrim = Function::Trim {
            start: true,
            end: false,
        };
        assert_eq!(call(ltrim, &[text("  x ")]), text("x "));
        // 2024-02-29 is day 19,782; a date-time before 1970 floors to its day.
        let leap = Scalar::Time(TimeKind::Date, 19_782);
        assert_eq!(
            call(Function::Part(DatePart::Year), std::slice::from_ref(&leap)),
            Scalar::Int(2024)
        );
        assert_eq!(
            call(Function::Part(DatePart::Month), std::slice::from_ref(&leap)),
            Scalar::Int(2)
        );
        assert_eq!(
            call(Function::Part(DatePart::Day), &[leap]),
            Scalar::Int(29)
        );
        let before = Scalar::Time(TimeKind::DateTime(0), -1);
        assert_eq!(
            call(Function::Date, &[before]),
            Scalar::Time(TimeKind::Date, -1)
        );
        // A REPLACE that grows past the bound fails rather than allocating.
        let big = text(&"a".repeat(1 << 16));
        assert!(
            Function::Replace
                .call(&[big, text("a"), text(&"b".repeat(64))])
                .is_err()
        );
    }

    #[test]
    fn locate_pad_repeat_and_reverse_count_characters_as_mysql() {
        let call = |f: Function, args: &[Scalar<'static>]| f.call(args).unwrap();
        let bytes = |b: &[u8]| Scalar::Binary(b.to_vec().into());
        let locate = |sub: &str, s: &str, from: i128| {
            call(Function::Locate, &[text(sub), text(s), Scalar::Int(from)])
        };
        assert_eq!(locate("bar", "foobarbar", 1), Scalar::Int(4));
        assert_eq!(locate("bar", "foobarbar", 5), Scalar::Int(7));
        assert_eq!(locate("xbar", "foobar", 1), Scalar::Int(0));
        assert_eq!(locate("ö", "åäö", 1), Scalar::Int(3));
        assert_eq!(locate("", "abc", 4), Scalar::Int(4));
        assert_eq!(locate("", "abc", 5), Scalar::Int(0));
        assert_eq!(locate("b", "abc", 0), Scalar::Int(0));
        assert_eq!(locate("b", "abc", -1), Scalar::Int(0));
        assert_eq!(
            call(Function::Locate, &[bytes(b"\xff"), bytes(b"a\xff")]),
            Scalar::Int(2)
        );

        let pad = |left, s: &str, n: i128, with: &str| {
            call(
                Function::Pad { left },
                &[text(s), Scalar::Int(n), text(with)],
            )
        };
        assert_eq!(pad(true, "hi", 4, "??"), text("??hi"));
        assert_eq!(pad(true, "hi", 5, "ab"), text("abahi"));
        assert_eq!(pad(false, "hi", 5, "ab"), text("hiaba"));
        assert_eq!(pad(true, "hi", 1, "??"), text("h"));
        assert_eq!(pad(false, "åäö", 2, "-"), text("åä"));
        assert_eq!(pad(true, "ö", 3, "ü"), text("üüö"));
        assert_eq!(pad(true, "hi", -1, "?"), Scalar::Null);
        assert_eq!(pad(true, "hi", 3, ""), Scalar::Null);
        assert_eq!(pad(true, "hi", 2, ""), text("hi"));
        assert!(
            Function::Pad { left: true }
                .call(&[text("a"), Scalar::Int(i128::from(u32::MAX)), text("b")])
                .is_err()
        );

        assert_eq!(
            call(Function::Repeat, &[text("ab"), Scalar::Int(3)]),
            text("ababab")
        );
        assert_eq!(
            call(Function::Repeat, &[text("ab"), Scalar::Int(-3)]),
            text("")
        );
        assert!(
            Function::Repeat
                .call(&[text("ab"), Scalar::Int(1 << 20)])
                .is_err()
        );
        assert!(Function::Space.call(&[Scalar::Int(i128::MAX)]).is_err());
        assert_eq!(call(Function::Space, &[Scalar::Int(2)]), text("  "));
        assert_eq!(call(Function::Reverse, &[text("åbc")]), text("cbå"));
        assert_eq!(call(Function::Reverse, &[bytes(b"ab")]), bytes(b"ba"));

        // CONCAT_WS skips a NULL after its separator; a NULL separator is NULL.
        assert_eq!(
            call(
                Function::ConcatWs,
                &[text(", "), text("a"), Scalar::Null, Scalar::Int(3)]
            ),
            text("a, 3")
        );
        assert_eq!(
            call(Function::ConcatWs, &[Scalar::Null, text("a")]),
            Scalar::Null
        );
    }

    #[test]
    fn greatest_and_least_compare_in_their_common_type() {
        let extreme = |greatest, ty, args: &[Scalar<'static>]| {
            Function::Extreme { greatest, ty }.call(args).unwrap()
        };
        let args = [Scalar::Int(3), Scalar::Decimal(35, 1), Scalar::Int(-1)];
        assert_eq!(extreme(true, Ty::Decimal(1), &args), Scalar::Decimal(35, 1));
        assert_eq!(
            extreme(false, Ty::Decimal(1), &args),
            Scalar::Decimal(-10, 1)
        );
        assert_eq!(
            extreme(true, Ty::Text, &[text("b"), text("ab"), text("B")]),
            text("b")
        );
    }

    #[test]
    fn date_differences_count_whole_units_as_mysql() {
        let at = |s: &str| {
            let micros = crate::types::value::DateTime::parse(s).unwrap().0;
            (
                micros.div_euclid(MICROS_PER_DAY),
                micros.rem_euclid(MICROS_PER_DAY),
            )
        };
        use DiffUnit::*;
        for (unit, a, b, whole) in [
            (Month, "2003-02-01 00:00:00", "2003-05-01 00:00:00", 3),
            (Month, "2024-01-31 00:00:00", "2024-02-29 00:00:00", 0),
            (Month, "2024-01-31 00:00:00", "2024-03-31 00:00:00", 2),
            (Month, "2024-01-31 12:00:00", "2024-03-31 11:59:59", 1),
            (Month, "2024-05-01 00:00:00", "2024-02-01 00:00:00", -3),
            (Year, "2002-05-01 00:00:00", "2001-01-01 00:00:00", -1),
            (Year, "2000-02-29 00:00:00", "2001-02-28 00:00:00", 0),
            (Quarter, "2024-01-15 00:00:00", "2024-12-14 00:00:00", 3),
            (
                Minute,
                "2003-02-01 00:00:00",
                "2003-05-01 12:05:55",
                128_885,
            ),
            (Second, "2024-01-01 00:00:01", "2024-01-01 00:00:00", -1),
            (Day, "2024-01-01 12:00:00", "2024-01-02 11:59:59", 0),
            (Week, "2024-01-01 00:00:00", "2024-01-15 00:00:00", 2),
            (
                Microsecond,
                "2024-01-01 00:00:00",
                "2024-01-01 00:00:00.000042",
                42,
            ),
        ] {
            assert_eq!(unit.between(at(a), at(b)), whole, "{unit:?} {a} {b}");
        }
        let date = |s: &str| {
            Scalar::Time(TimeKind::DateTime(0), {
                let (d, t) = at(s);
                d * MICROS_PER_DAY + t
            })
        };
        assert_eq!(
            Function::DateDiff
                .call(&[date("2007-12-31 23:59:59"), date("2007-12-30 00:00:00")])
                .unwrap(),
            Scalar::Int(1)
        );
    }

    #[test]
    fn rounding_is_exact_for_decimals_and_refuses_overflow() {
        let r = |x: Scalar<'static>, d| round(&x, d, Rounding::HalfAway).unwrap();
        assert_eq!(r(Scalar::Decimal(2345, 3), 2), Scalar::Decimal(235, 2));
        assert_eq!(r(Scalar::Decimal(-2345, 3), 2), Scalar::Decimal(-235, 2));
        assert_eq!(r(Scalar::Decimal(2344, 3), 0), Scalar::Decimal(2, 0));
        assert_eq!(r(Scalar::Decimal(15, 1), 5), Scalar::Decimal(15, 1));
        assert_eq!(r(Scalar::Int(1250), -2), Scalar::Int(1300));
        assert_eq!(r(Scalar::Decimal(12345, 1), -2), Scalar::Decimal(1200, 0));
        assert_eq!(r(Scalar::Double(2.5), 0), Scalar::Double(2.0));
        assert!(round(&Scalar::Int(i128::from(u64::MAX)), -1, Rounding::HalfAway).is_err());
        // TRUNCATE drops digits toward zero.
        let t = |x: Scalar<'static>, d| round(&x, d, Rounding::TowardZero).unwrap();
        assert_eq!(t(Scalar::Decimal(2349, 3), 2), Scalar::Decimal(234, 2));
        assert_eq!(t(Scalar::Decimal(-2349, 3), 1), Scalar::Decimal(-23, 1));
        assert_eq!(t(Scalar::Decimal(-2250, 3), 0), Scalar::Decimal(-2, 0));
        assert_eq!(t(Scalar::Int(1299), -2), Scalar::Int(1200));
        assert_eq!(t(Scalar::Int(-1299), -2), Scalar::Int(-1200));
        assert_eq!(t(Scalar::Decimal(15, 1), 5), Scalar::Decimal(15, 1));
        assert_eq!(t(Scalar::Double(2.75), 1), Scalar::Double(2.7));
        assert_eq!(t(Scalar::Double(-2.75), 0), Scalar::Double(-2.0));
    }

    #[test]
    fn casts_read_text_whole_or_fail() {
        assert_eq!(cast(&text(" 42 "), Ty::Int).unwrap(), Scalar::Int(42));
        assert_eq!(cast(&text("2.5"), Ty::Int).unwrap(), Scalar::Int(3));
        assert!(cast(&text("42abc"), Ty::Int).is_err());
        assert!(cast(&text(""), Ty::Int).is_err());
        assert_eq!(
            cast(&Scalar::Decimal(12345, 3), Ty::Decimal(2)).unwrap(),
            Scalar::Decimal(1235, 2)
        );
        assert_eq!(
            cast(&Scalar::Int(7), Ty::Decimal(2)).unwrap(),
            Scalar::Decimal(700, 2)
        );
        assert_eq!(cast(&Scalar::Int(7), Ty::Text).unwrap(), text("7"));
        assert_eq!(
            Function::Concat
                .call(&[text("n="), Scalar::Decimal(150, 2)])
                .unwrap(),
            text("n=1.50")
        );
        assert_eq!(
            Function::Floor.call(&[Scalar::Decimal(-15, 1)]).unwrap(),
            Scalar::Int(-2)
        );
        assert_eq!(
            Function::Ceil.call(&[Scalar::Decimal(-15, 1)]).unwrap(),
            Scalar::Int(-1)
        );
    }
}
