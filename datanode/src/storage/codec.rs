//! Typed values to stored bytes and back, checked against the column's type.
//!
//! This is the edge of the engine: every value is validated here, once, and a
//! bad one becomes a [`ValueError`] that names the column. Workers only ever
//! see bytes this module produced.
//!
//! Stored forms (little-endian):
//! - integers: two's complement in the type's width (MEDIUMINT: 3 bytes);
//!   `BOOL`: one byte 0 or 1;
//! - `FLOAT`/`DOUBLE`: IEEE 754, finite, with `-0` stored as `0`;
//! - `DECIMAL(p,s)`: the mantissa at scale `s`, 8 bytes up to 18 digits, else 16;
//! - `CHAR(n)`: UTF-8 padded with spaces to `4n` bytes (trailing spaces are not
//!   significant); `BINARY(n)`: padded with zero bytes to `n`;
//! - `VARCHAR`/`VARBINARY`: the bytes themselves, in the var part;
//! - `DATE`: i32 days since 1970-01-01; `DATETIME`/`TIMESTAMP`: i64
//!   microseconds since 1970-01-01 00:00:00 (UTC for `TIMESTAMP`), rounded
//!   to the column's fractional digits.

use std::cmp::Ordering;
use std::fmt;

use shoal_wire::schema::{ColumnDef, ColumnType, SchemaError, TableDef};

use super::layout::{Layout, Place};
use crate::types::value::{self, Date, DateTime, Decimal, JsonShape, Timestamp, Value};

/// A value refused for a column: the column's name, what kind of fault
/// it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column '{column}': {problem}")]
pub struct ValueError {
    pub column: String,
    pub fault: Fault,
    pub problem: String,
}

/// What kind of value a column refused. MySQL numbers each kind apart
/// (1366, 1048, 1406, 1264, 1265, 1292), and drivers sort them by number
/// (a NULL for a NOT NULL column is an integrity error, the others data
/// errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Not a value of the column's type ('abc' for an INT), or a request
    /// that does not fit the table.
    Incorrect,
    /// NULL for a NOT NULL column.
    Null,
    /// More characters or bytes than the column holds.
    TooLong,
    /// A number past the column's range.
    OutOfRange,
    /// More digits after the point than the column keeps (refused, not
    /// rounded).
    TooPrecise,
    /// Not a date or time the column holds.
    BadTime,
}

impl ValueError {
    pub(crate) fn new(layout: &Layout, column: u16, problem: impl Into<String>) -> Self {
        ValueError::named(layout.name(column), problem)
    }

    /// An incorrect value for the column named `column`.
    pub(crate) fn named(column: impl Into<String>, problem: impl Into<String>) -> Self {
        ValueError {
            column: column.into(),
            fault: Fault::Incorrect,
            problem: problem.into(),
        }
    }

    /// NULL for NOT NULL column `column`.
    pub(crate) fn null(layout: &Layout, column: u16, problem: &str) -> Self {
        ValueError {
            fault: Fault::Null,
            ..ValueError::new(layout, column, problem)
        }
    }

    fn misfit(layout: &Layout, column: u16) -> impl FnOnce(Misfit) -> ValueError {
        move |Misfit(fault, problem)| ValueError {
            column: layout.name(column).to_owned(),
            fault,
            problem,
        }
    }
}

/// Why a value does not fit a column's type, before the column is named.
#[derive(Debug)]
struct Misfit(Fault, String);

/// What is wrong with a value is, unless said otherwise, that it is not
/// one of the column's type.
impl From<String> for Misfit {
    fn from(problem: String) -> Misfit {
        Misfit(Fault::Incorrect, problem)
    }
}

impl From<value::DecimalError> for Misfit {
    fn from(e: value::DecimalError) -> Misfit {
        let fault = match e {
            value::DecimalError::NotANumber(_) => Fault::Incorrect,
            value::DecimalError::OutOfRange { .. } => Fault::OutOfRange,
            value::DecimalError::TooPrecise { .. } => Fault::TooPrecise,
        };
        Misfit(fault, e.to_string())
    }
}

impl fmt::Display for Misfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.1)
    }
}

fn mismatch(ty: ColumnType, v: &Value) -> Misfit {
    format!("expected a value of type {ty}, got {}", v.kind()).into()
}

/// Largest magnitude below which every whole number is exact in a double.
const EXACT_IN_DOUBLE: f64 = (1u64 << 53) as f64;

/// Reads an integer value (or a string of its digits) as i128 for range
/// checks. Nothing is truncated, rounded or coerced: a boolean is not a
/// number, and a double is taken only when it is a whole number small
/// enough to be exact (JSON clients may send `5.0` for 5; a JSON integer
/// too large for 64 bits arrives as a rounded double, and is refused).
fn integer(ty: ColumnType, v: &Value, (lo, hi): (i128, i128)) -> Result<i128, Misfit> {
    let out_of_range = |n: &dyn fmt::Display| {
        Misfit(
            Fault::OutOfRange,
            format!("{n} is out of range for {ty} ({lo} to {hi})"),
        )
    };
    match v {
        Value::Int(i) => Ok(i128::from(*i)),
        Value::UInt(u) => Ok(i128::from(*u)),
        Value::Double(d) if d.fract() == 0.0 && d.abs() <= EXACT_IN_DOUBLE => Ok(*d as i128),
        Value::Double(d) if d.is_finite() && d.fract() != 0.0 => {
            Err(format!("{d} has a fraction; {ty} holds whole numbers").into())
        }
        Value::Double(d) if d.is_finite() && (d.abs() as i128) >= hi.max(-lo) => {
            Err(out_of_range(&format!("{d:e}")))
        }
        Value::Double(_) => Err(format!(
            "{ty} takes a whole number written as one: this one arrived with a fraction, an \
             exponent or more digits than a double holds exactly"
        )
        .into()),
        Value::Text(t) => {
            let digits = t.strip_prefix('-').unwrap_or(t);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "'{}' is not a whole number for {ty}",
                    t.chars().take(64).collect::<String>()
                )
                .into());
            }
            t.parse::<i128>()
                .map_err(|_| out_of_range(&t.chars().take(64).collect::<String>()))
        }
        _ => Err(mismatch(ty, v)),
    }
}

fn float(ty: ColumnType, v: &Value) -> Result<f64, Misfit> {
    let inexact = |n: &dyn fmt::Display| format!("{ty} cannot hold {n} exactly");
    let f = match v {
        Value::Int(i) if (*i as f64) as i128 == i128::from(*i) => *i as f64,
        Value::UInt(u) if (*u as f64) as i128 == i128::from(*u) => *u as f64,
        Value::Int(i) => return Err(inexact(i).into()),
        Value::UInt(u) => return Err(inexact(u).into()),
        Value::Float(f) => f64::from(*f),
        Value::Double(d) => *d,
        Value::Text(t) => t
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("'{t}' is not a number for {ty}"))?,
        _ => return Err(mismatch(ty, v)),
    };
    if !f.is_finite() {
        return Err(Misfit(Fault::OutOfRange, format!("{ty} cannot hold {f}")));
    }
    Ok(f)
}

/// Significant digits a double is sure to hold.
const DOUBLE_EXACT_DIGITS: usize = 15;

/// Significant digits of a number written without an exponent.
fn significant_digits(text: &str) -> usize {
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    digits.trim_start_matches('0').trim_end_matches('0').len()
}

fn decimal(v: &Value, precision: u8, scale: u8) -> Result<i128, Misfit> {
    let ty = ColumnType::Decimal { precision, scale };
    let out_of_range = || Misfit(Fault::OutOfRange, format!("{v} is out of range for {ty}"));
    match v {
        Value::Int(i) => {
            Decimal::from_integer(i128::from(*i), precision, scale).ok_or_else(out_of_range)
        }
        Value::UInt(u) => {
            Decimal::from_integer(i128::from(*u), precision, scale).ok_or_else(out_of_range)
        }
        Value::Double(d) if d.is_finite() => {
            let text = d.to_string();
            // A double holds every number of up to 15 significant digits
            // exactly (its shortest form gives them back); past that the
            // digits sent may have been rounded on their way into it.
            if significant_digits(&text) > DOUBLE_EXACT_DIGITS {
                return Err(format!(
                    "{text} has more than {DOUBLE_EXACT_DIGITS} significant digits and came as a \
                     double, which may have rounded it: send the decimal as a string"
                )
                .into());
            }
            Ok(Decimal::parse(&text, precision, scale)?)
        }
        Value::Float(f) if f.is_finite() => Ok(Decimal::parse(&f.to_string(), precision, scale)?),
        Value::Decimal(d) => Ok(Decimal::parse(&d.to_string(), precision, scale)?),
        Value::Text(t) => Ok(Decimal::parse(t, precision, scale)?),
        _ => Err(mismatch(ty, v)),
    }
}

fn micros(ty: ColumnType, fsp: u8, v: &Value) -> Result<i64, Misfit> {
    let raw = match (ty, v) {
        (ColumnType::Timestamp { .. }, Value::Timestamp(t)) => t.0,
        (ColumnType::Timestamp { .. }, Value::Text(t)) => Timestamp::parse(t)?.0,
        (ColumnType::DateTime { .. }, Value::DateTime(t)) => t.0,
        (ColumnType::DateTime { .. }, Value::Date(d)) if d.is_valid() => {
            i64::from(d.0) * 86_400_000_000
        }
        (ColumnType::DateTime { .. }, Value::Text(t)) => DateTime::parse(t)?.0,
        _ => return Err(mismatch(ty, v)),
    };
    if !value::micros_in_range(raw) {
        return Err(format!("{v} is outside 0001-01-01 to 9999-12-31 for {ty}").into());
    }
    // Stored exactly or not at all: a fraction finer than the column's is
    // refused, not rounded (which could even move the date).
    if value::round_to_fsp(raw, fsp) != Some(raw) {
        return Err(format!(
            "{v} has more fractional-second digits than {ty} holds ({fsp}); it is not rounded"
        )
        .into());
    }
    Ok(raw)
}

/// Writes an integer of `bits` bits after checking its range.
fn encode_int(
    ty: ColumnType,
    v: &Value,
    bits: u32,
    unsigned: bool,
    dst: &mut [u8],
) -> Result<(), Misfit> {
    let (lo, hi) = if unsigned {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    };
    let n = integer(ty, v, (lo, hi))?;
    if !(lo..=hi).contains(&n) {
        return Err(Misfit(
            Fault::OutOfRange,
            format!("{n} is out of range for {ty} ({lo} to {hi})"),
        ));
    }
    dst.copy_from_slice(&n.to_le_bytes()[..(bits / 8) as usize]);
    Ok(())
}

/// Writes a non-null value of a fixed-size column into `dst` (its width).
fn encode_fixed(ty: ColumnType, v: &Value, dst: &mut [u8]) -> Result<(), Misfit> {
    match ty {
        ColumnType::TinyInt { unsigned } => encode_int(ty, v, 8, unsigned, dst),
        ColumnType::SmallInt { unsigned } => encode_int(ty, v, 16, unsigned, dst),
        ColumnType::MediumInt { unsigned } => encode_int(ty, v, 24, unsigned, dst),
        ColumnType::Int { unsigned } => encode_int(ty, v, 32, unsigned, dst),
        ColumnType::BigInt { unsigned } => encode_int(ty, v, 64, unsigned, dst),
        ColumnType::Bool => match v {
            Value::Bool(b) => {
                dst[0] = u8::from(*b);
                Ok(())
            }
            Value::Int(0 | 1) | Value::UInt(0 | 1) => {
                dst[0] = u8::from(!matches!(v, Value::Int(0) | Value::UInt(0)));
                Ok(())
            }
            _ => Err(format!("expected true, false, 0 or 1 for BOOL, got {v}").into()),
        },
        ColumnType::Float => {
            // Text is read as f32 directly: through f64 it could round twice.
            let f = match v {
                Value::Text(t) => t
                    .trim()
                    .parse::<f32>()
                    .map_err(|_| format!("'{t}' is not a number for {ty}"))?,
                Value::Float(f) => *f,
                Value::Int(_) | Value::UInt(_) => {
                    let wide = float(ty, v)?;
                    if f64::from(wide as f32) != wide {
                        return Err(format!("FLOAT cannot hold {v} exactly; DOUBLE can").into());
                    }
                    wide as f32
                }
                _ => float(ty, v)? as f32,
            };
            if !f.is_finite() {
                return Err(Misfit(
                    Fault::OutOfRange,
                    format!("{v} is out of range for FLOAT"),
                ));
            }
            dst.copy_from_slice(&(f + 0.0).to_le_bytes());
            Ok(())
        }
        ColumnType::Double => {
            dst.copy_from_slice(&(float(ty, v)? + 0.0).to_le_bytes());
            Ok(())
        }
        ColumnType::Decimal { precision, scale } => {
            let m = decimal(v, precision, scale)?;
            let width = dst.len();
            dst.copy_from_slice(&m.to_le_bytes()[..width]);
            Ok(())
        }
        ColumnType::Char(n) => {
            let Value::Text(t) = v else {
                return Err(mismatch(ty, v));
            };
            let t = t.trim_end_matches(' ');
            let chars = t.chars().count();
            if chars > n as usize {
                return Err(Misfit(
                    Fault::TooLong,
                    format!("{chars} characters is longer than {ty}"),
                ));
            }
            dst[..t.len()].copy_from_slice(t.as_bytes());
            dst[t.len()..].fill(b' ');
            Ok(())
        }
        ColumnType::Binary(n) => {
            let Value::Bytes(b) = v else {
                return Err(mismatch(ty, v));
            };
            if b.len() > n as usize {
                return Err(Misfit(
                    Fault::TooLong,
                    format!("{} bytes is longer than {ty}", b.len()),
                ));
            }
            dst[..b.len()].copy_from_slice(b);
            dst[b.len()..].fill(0);
            Ok(())
        }
        ColumnType::Date => {
            let d = match v {
                Value::Date(d) if d.is_valid() => *d,
                Value::Date(d) => {
                    return Err(bad_time(format!(
                        "day {} is outside 0001-01-01 to 9999-12-31",
                        d.0
                    )));
                }
                Value::Text(t) => Date::parse(t).map_err(bad_time)?,
                _ => return Err(bad_time(mismatch(ty, v).1)),
            };
            dst.copy_from_slice(&d.0.to_le_bytes());
            Ok(())
        }
        ColumnType::DateTime { fsp } | ColumnType::Timestamp { fsp } => {
            let micros = micros(ty, fsp, v).map_err(|Misfit(_, problem)| bad_time(problem))?;
            dst.copy_from_slice(&micros.to_le_bytes());
            Ok(())
        }
        ColumnType::VarChar(_) | ColumnType::VarBinary(_) => {
            unreachable!("var column in fixed part")
        }
    }
}

/// A date or time the column does not hold, and why.
fn bad_time(problem: String) -> Misfit {
    Misfit(Fault::BadTime, problem)
}

/// The bytes of a non-null value of a var-size column.
fn encode_var(ty: ColumnType, v: &Value) -> Result<&[u8], Misfit> {
    match (ty, v) {
        (ColumnType::VarChar(n), Value::Text(t)) => {
            // Counting characters only matters when the bytes could exceed n.
            if t.len() > n as usize && t.chars().count() > n as usize {
                return Err(Misfit(
                    Fault::TooLong,
                    format!("{} characters is longer than {ty}", t.chars().count()),
                ));
            }
            Ok(t.as_bytes())
        }
        (ColumnType::VarBinary(n), Value::Bytes(b)) => {
            if b.len() > n as usize {
                return Err(Misfit(
                    Fault::TooLong,
                    format!("{} bytes is longer than {ty}", b.len()),
                ));
            }
            Ok(b)
        }
        _ => Err(mismatch(ty, v)),
    }
}

/// Appends the encoded primary key of `values` (one per key column, in key
/// order): fixed columns as stored, var columns as a u16 length and the bytes.
pub(crate) fn encode_key(
    layout: &Layout,
    values: &[Value],
    out: &mut Vec<u8>,
) -> Result<(), ValueError> {
    if values.len() != layout.key.len() {
        let names: Vec<&str> = layout.key.iter().map(|&c| layout.name(c)).collect();
        return Err(ValueError::named(
            names.join(", "),
            format!(
                "the primary key has {} column(s), {} value(s) given",
                layout.key.len(),
                values.len()
            ),
        ));
    }
    for (&c, v) in layout.key.iter().zip(values) {
        push_key_column(layout, c, v, out)?;
    }
    Ok(())
}

/// The values of a primary key as `encode_key` wrote it, in key order.
pub(crate) fn decode_key(layout: &Layout, mut key: &[u8]) -> Vec<Value> {
    let mut take = |n: usize| {
        let (bytes, rest) = key.split_at(n.min(key.len()));
        key = rest;
        bytes
    };
    (layout.key.iter())
        .map(|&c| {
            let col = &layout.columns[c as usize];
            let len = match col.place {
                Place::Fixed { width, .. } => usize::from(width),
                Place::Var { .. } => match take(2) {
                    &[lo, hi] => usize::from(u16::from_le_bytes([lo, hi])),
                    _ => 0,
                },
            };
            value_of(col.ty, take(len))
        })
        .collect()
}

fn push_key_column(
    layout: &Layout,
    c: u16,
    v: &Value,
    out: &mut Vec<u8>,
) -> Result<(), ValueError> {
    let col = &layout.columns[c as usize];
    if matches!(v, Value::Null) {
        return Err(ValueError::null(
            layout,
            c,
            "a primary key column cannot be NULL",
        ));
    }
    match col.place {
        Place::Fixed { width, .. } => {
            let start = out.len();
            out.resize(start + width as usize, 0);
            encode_fixed(col.ty, v, &mut out[start..]).map_err(ValueError::misfit(layout, c))
        }
        Place::Var { .. } => {
            let bytes = encode_var(col.ty, v).map_err(ValueError::misfit(layout, c))?;
            out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
            out.extend_from_slice(bytes);
            Ok(())
        }
    }
}

/// A row to be written, encoded: the row image and which columns it sets.
#[derive(Debug)]
pub(crate) struct EncodedRow {
    /// Start of the key within the output buffer, and its length.
    pub(crate) key: (usize, usize),
    /// Start of the row image (fixed part then var part), and its length.
    pub(crate) image: (usize, usize),
    /// Start of the presence bitmap (one bit per column), and its length.
    pub(crate) presence: (usize, usize),
    /// Whether every `NOT NULL` column has a value, so the row can be inserted.
    pub(crate) complete: bool,
}

/// Appends the key, the row image and the presence bitmap of a row given as
/// one optional value per column (`None`: not set). Every key column must be
/// set. An unset column is stored as its default (one of `defaults`, a
/// value per column: the layout's, with the time of the write for a column
/// whose default is that) if the row is inserted (in the image, not in the
/// presence bitmap: an update leaves it as it is), a nullable one without a
/// default as NULL.
pub(crate) fn encode_row(
    layout: &Layout,
    values: &[Option<&Value>],
    defaults: &[Option<Value>],
    out: &mut Vec<u8>,
) -> Result<EncodedRow, ValueError> {
    debug_assert_eq!(values.len(), layout.columns.len());
    debug_assert_eq!(defaults.len(), layout.columns.len());
    let key_start = out.len();
    for &c in &layout.key {
        let v = values[c as usize].ok_or_else(|| {
            ValueError::new(
                layout,
                c,
                "a value for every primary key column is required",
            )
        })?;
        push_key_column(layout, c, v, out)?;
    }
    let image_start = out.len();
    out.resize(image_start + layout.slot_size + layout.var_header(), 0);
    let mut var_len = 0usize;
    for (i, (col, given)) in layout.columns.iter().zip(values).enumerate() {
        let c = i as u16;
        let v = &given.or(defaults[i].as_ref());
        let null = matches!(v, None | Some(Value::Null));
        if matches!(v, Some(Value::Null)) && col.null_bit.is_none() {
            return Err(ValueError::null(layout, c, "cannot be NULL"));
        }
        let fixed = &mut out[image_start..image_start + layout.slot_size];
        layout.set_null(fixed, c, null);
        match (col.place, v) {
            (Place::Fixed { offset, width }, Some(v)) if !null => {
                let dst = &mut fixed[offset as usize..][..width as usize];
                encode_fixed(col.ty, v, dst).map_err(ValueError::misfit(layout, c))?;
            }
            (Place::Var { index }, v) => {
                if let Some(v) = v.filter(|_| !null) {
                    let bytes = encode_var(col.ty, v).map_err(ValueError::misfit(layout, c))?;
                    out.extend_from_slice(bytes);
                    var_len += bytes.len();
                }
                let end = image_start + layout.slot_size + 2 * index as usize;
                out[end..end + 2].copy_from_slice(&(var_len as u16).to_le_bytes());
            }
            _ => {}
        }
    }
    let presence_start = out.len();
    out.resize(presence_start + layout.columns.len().div_ceil(8), 0);
    for (i, v) in values.iter().enumerate() {
        if v.is_some() {
            out[presence_start + i / 8] |= 1 << (i % 8);
        }
    }
    let complete = layout
        .required
        .iter()
        .all(|&c| values[c as usize].is_some());
    Ok(EncodedRow {
        key: (key_start, image_start - key_start),
        image: (image_start, presence_start - image_start),
        presence: (presence_start, out.len() - presence_start),
        complete,
    })
}

/// Checks that every default of a table's columns is a value its column
/// holds (its JSON shape, then its range, length or precision).
pub(crate) fn check_defaults(def: &TableDef) -> Result<(), SchemaError> {
    def.columns.iter().try_for_each(check_default)
}

/// Checks that column `c`'s default, if it has one, is a value it holds.
pub(crate) fn check_default(c: &ColumnDef) -> Result<(), SchemaError> {
    let Some(json) = c.default.as_ref().filter(|_| !c.defaults_to_now()) else {
        return Ok(());
    };
    let bad = |problem: String| SchemaError::BadDefault {
        column: c.name.to_string(),
        problem,
    };
    let value = Value::from_json(c.column_type, json).map_err(|shape| match shape {
        JsonShape::Wrong { expected, got } => bad(format!("must be {expected}, not {got}")),
        JsonShape::NotBase64 => bad("must be base64".to_owned()),
    })?;
    let fits = match c.column_type.fixed_size() {
        _ if value == Value::Null => Ok(()),
        Some(width) => encode_fixed(c.column_type, &value, &mut vec![0; width]),
        None => encode_var(c.column_type, &value).map(drop),
    };
    fits.map_err(|problem| bad(format!("does not fit the column: {problem}")))
}

/// Whether column `c` is set in a presence bitmap.
#[inline]
pub(crate) fn is_present(presence: &[u8], c: u16) -> bool {
    presence[c as usize / 8] & (1 << (c % 8)) != 0
}

/// A CHAR column's bytes without the spaces that pad it to its width: most
/// of a utf8mb4 CHAR(n)'s 4n bytes are padding (360 bytes of a CHAR(120)
/// of ASCII text), so it is skipped 64 bytes at a time, then 16.
pub(crate) fn trim_padding(b: &[u8]) -> &[u8] {
    const SPACES: u128 = u128::from_ne_bytes([b' '; 16]);
    let not_spaces = |b: &[u8]| u128::from_ne_bytes(b.try_into().expect("16 bytes")) ^ SPACES;
    let mut end = b.len();
    while end >= 64 && {
        let tail = &b[end - 64..end];
        (not_spaces(&tail[..16])
            | not_spaces(&tail[16..32])
            | not_spaces(&tail[32..48])
            | not_spaces(&tail[48..]))
            == 0
    } {
        end -= 64;
    }
    while end >= 16 && not_spaces(&b[end - 16..end]) == 0 {
        end -= 16;
    }
    while end > 0 && b[end - 1] == b' ' {
        end -= 1;
    }
    &b[..end]
}

/// Stored text as a `String`. Text is checked when written, so the
/// replacement of bad bytes is never expected; `from_utf8` checks ASCII
/// many bytes at a time where `from_utf8_lossy` goes a chunk at a time.
fn text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(b).into_owned(),
    }
}

/// Reads column `c` of a stored row back as a value.
pub(crate) fn decode(layout: &Layout, fixed: &[u8], var: &[u8], c: u16) -> Value {
    if layout.is_null(fixed, c) {
        return Value::Null;
    }
    value_of(
        layout.columns[c as usize].ty,
        layout.column_bytes(fixed, var, c),
    )
}

/// The value of a non-null column of type `ty` from its stored bytes (a
/// `CHAR`'s with or without their padding).
pub(crate) fn value_of(ty: ColumnType, b: &[u8]) -> Value {
    let signed = |b: &[u8]| {
        let mut buf = [if b[b.len() - 1] & 0x80 != 0 { 0xff } else { 0 }; 8];
        buf[..b.len()].copy_from_slice(b);
        i64::from_le_bytes(buf)
    };
    let unsigned = |b: &[u8]| {
        let mut buf = [0; 8];
        buf[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(buf)
    };
    match ty {
        ColumnType::TinyInt { unsigned: true }
        | ColumnType::SmallInt { unsigned: true }
        | ColumnType::MediumInt { unsigned: true }
        | ColumnType::Int { unsigned: true }
        | ColumnType::BigInt { unsigned: true } => Value::UInt(unsigned(b)),
        ColumnType::TinyInt { .. }
        | ColumnType::SmallInt { .. }
        | ColumnType::MediumInt { .. }
        | ColumnType::Int { .. }
        | ColumnType::BigInt { .. } => Value::Int(signed(b)),
        ColumnType::Bool => Value::Bool(b[0] != 0),
        ColumnType::Float => Value::Float(f32::from_le_bytes(b.try_into().expect("4 bytes"))),
        ColumnType::Double => Value::Double(f64::from_le_bytes(b.try_into().expect("8 bytes"))),
        ColumnType::Decimal { scale, .. } => {
            let mut buf = [if b[b.len() - 1] & 0x80 != 0 { 0xff } else { 0 }; 16];
            buf[..b.len()].copy_from_slice(b);
            Value::Decimal(Decimal {
                mantissa: i128::from_le_bytes(buf),
                scale,
            })
        }
        ColumnType::Char(_) => Value::Text(text(trim_padding(b))),
        ColumnType::VarChar(_) => Value::Text(text(b)),
        ColumnType::Binary(_) | ColumnType::VarBinary(_) => Value::Bytes(b.to_vec()),
        ColumnType::Date => Value::Date(Date(signed(b) as i32)),
        ColumnType::DateTime { .. } => Value::DateTime(DateTime(signed(b))),
        ColumnType::Timestamp { .. } => Value::Timestamp(Timestamp(signed(b))),
    }
}

/// The stored bytes of a non-null value for column `c`, as a filter operand.
pub(crate) fn encode_operand(layout: &Layout, c: u16, v: &Value) -> Result<Vec<u8>, ValueError> {
    let col = &layout.columns[c as usize];
    match col.place {
        Place::Fixed { width, .. } => {
            let mut buf = vec![0; width as usize];
            encode_fixed(col.ty, v, &mut buf).map_err(ValueError::misfit(layout, c))?;
            Ok(buf)
        }
        Place::Var { .. } => encode_var(col.ty, v)
            .map(<[u8]>::to_vec)
            .map_err(ValueError::misfit(layout, c)),
    }
}

/// How a column type's stored bytes are ordered.
enum Order {
    Unsigned,
    Signed,
    Float,
    Double,
    Bytes,
}

fn order_of(ty: ColumnType) -> Order {
    match ty {
        ColumnType::TinyInt { unsigned: true }
        | ColumnType::SmallInt { unsigned: true }
        | ColumnType::MediumInt { unsigned: true }
        | ColumnType::Int { unsigned: true }
        | ColumnType::BigInt { unsigned: true }
        | ColumnType::Bool => Order::Unsigned,
        ColumnType::TinyInt { .. }
        | ColumnType::SmallInt { .. }
        | ColumnType::MediumInt { .. }
        | ColumnType::Int { .. }
        | ColumnType::BigInt { .. }
        | ColumnType::Decimal { .. }
        | ColumnType::Date
        | ColumnType::DateTime { .. }
        | ColumnType::Timestamp { .. } => Order::Signed,
        ColumnType::Float => Order::Float,
        ColumnType::Double => Order::Double,
        // Space-padded CHAR compares as PAD SPACE; the rest byte by byte.
        ColumnType::Char(_)
        | ColumnType::VarChar(_)
        | ColumnType::Binary(_)
        | ColumnType::VarBinary(_) => Order::Bytes,
    }
}

/// A little-endian signed integer of up to 16 bytes.
pub(crate) fn le_signed(b: &[u8]) -> i128 {
    // The widths of INT and BIGINT, without a copy of unknown length.
    if let Ok(b) = <[u8; 8]>::try_from(b) {
        return i128::from(i64::from_le_bytes(b));
    }
    if let Ok(b) = <[u8; 4]>::try_from(b) {
        return i128::from(i32::from_le_bytes(b));
    }
    let mut buf = [if b[b.len() - 1] & 0x80 != 0 { 0xff } else { 0 }; 16];
    buf[..b.len()].copy_from_slice(b);
    i128::from_le_bytes(buf)
}

/// A little-endian unsigned integer of up to 16 bytes.
pub(crate) fn le_unsigned(b: &[u8]) -> u128 {
    if let Ok(b) = <[u8; 8]>::try_from(b) {
        return u128::from(u64::from_le_bytes(b));
    }
    if let Ok(b) = <[u8; 4]>::try_from(b) {
        return u128::from(u32::from_le_bytes(b));
    }
    let mut buf = [0; 16];
    buf[..b.len()].copy_from_slice(b);
    u128::from_le_bytes(buf)
}

fn f32_of(b: &[u8]) -> f32 {
    f32::from_le_bytes(b.try_into().expect("4 bytes"))
}

fn f64_of(b: &[u8]) -> f64 {
    f64::from_le_bytes(b.try_into().expect("8 bytes"))
}

/// The first 8 bytes of a key's memcomparable form, as an integer: the
/// key's values in order, each as bytes whose order as bytes is the values'
/// — integers big-endian with the sign bit flipped, floats by their IEEE
/// bits (negative ones inverted), fixed-width strings as stored, variable
/// ones with each 0 byte escaped as 0 255 and ended by 0 0; a nullable
/// column's value after a 1, its NULL a lone 0. Bytewise order of these
/// forms is the keys' order (`compare` column by column, NULL first), so
/// two keys' prefixes never contradict it: where they differ they decide,
/// and only where they tie must the keys themselves be compared.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KeyPrefix {
    bytes: [u8; 8],
    len: usize,
    /// A bound's NULL on a column that has none: nothing after it can be
    /// told apart by bytes.
    stopped: bool,
}

impl KeyPrefix {
    fn push(&mut self, b: u8) {
        if self.len < 8 && !self.stopped {
            self.bytes[self.len] = b;
            self.len += 1;
        }
    }

    /// Whether more values can change nothing.
    pub(crate) fn is_done(&self) -> bool {
        self.len == 8 || self.stopped
    }

    /// Adds the next column's value (`None`: NULL) as stored.
    pub(crate) fn add(&mut self, ty: ColumnType, nullable: bool, value: Option<&[u8]>) {
        let v = match (nullable, value) {
            (true, None) => return self.push(0),
            (false, None) => {
                self.stopped = true;
                return;
            }
            (true, Some(v)) => {
                self.push(1);
                v
            }
            (false, Some(v)) => v,
        };
        let float = |bits: u64, sign: u64| if bits & sign != 0 { !bits } else { bits | sign };
        match (order_of(ty), ty) {
            (Order::Unsigned, _) => v.iter().rev().for_each(|&b| self.push(b)),
            (Order::Signed, _) => {
                for (i, &b) in v.iter().rev().enumerate() {
                    self.push(if i == 0 { b ^ 0x80 } else { b });
                }
            }
            (Order::Float, _) => {
                let bits = float(u64::from(f32_of(v).to_bits()), 1 << 31) as u32;
                bits.to_be_bytes().iter().for_each(|&b| self.push(b));
            }
            (Order::Double, _) => {
                let bits = float(f64_of(v).to_bits(), 1 << 63);
                bits.to_be_bytes().iter().for_each(|&b| self.push(b));
            }
            (Order::Bytes, ColumnType::Char(_) | ColumnType::Binary(_)) => {
                v.iter().for_each(|&b| self.push(b));
            }
            (Order::Bytes, _) => {
                for &b in v {
                    self.push(b);
                    if b == 0 {
                        self.push(0xff);
                    }
                    if self.is_done() {
                        return;
                    }
                }
                self.push(0);
                self.push(0);
            }
        }
    }

    /// The prefix as an integer, zeros after its bytes.
    pub(crate) fn value(&self) -> u64 {
        u64::from_be_bytes(self.bytes)
    }

    /// How a key whose prefix is `key` lies against a bound whose prefix
    /// this is (the bound may name fewer columns than the key has): `Less`
    /// or `Greater` where the bound's own bytes decide, else `Equal` — the
    /// key and the bound must then be compared.
    pub(crate) fn bounds(&self, key: u64) -> Ordering {
        if self.len == 0 {
            return Ordering::Equal;
        }
        let shift = (8 - self.len) * 8;
        let mask = if shift == 64 {
            0
        } else {
            u64::MAX >> shift << shift
        };
        (key & mask).cmp(&(self.value() & mask))
    }
}

/// Orders two stored values of a column of type `ty` as an index does,
/// `None` (NULL) before every value.
pub(crate) fn compare_nullable(ty: ColumnType, a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => compare(ty, a, b),
    }
}

/// Orders two stored values of the same column type.
pub(crate) fn compare(ty: ColumnType, a: &[u8], b: &[u8]) -> Ordering {
    match order_of(ty) {
        Order::Unsigned => le_unsigned(a).cmp(&le_unsigned(b)),
        Order::Signed => le_signed(a).cmp(&le_signed(b)),
        Order::Float => f32_of(a).total_cmp(&f32_of(b)),
        Order::Double => f64_of(a).total_cmp(&f64_of(b)),
        Order::Bytes => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn integers_of_every_width_read_as_sign_or_zero_extended(b in proptest::collection::vec(any::<u8>(), 1..=16)) {
            let mut signed = [if b[b.len() - 1] & 0x80 != 0 { 0xff } else { 0 }; 16];
            signed[..b.len()].copy_from_slice(&b);
            prop_assert_eq!(le_signed(&b), i128::from_le_bytes(signed));
            let mut unsigned = [0; 16];
            unsigned[..b.len()].copy_from_slice(&b);
            prop_assert_eq!(le_unsigned(&b), u128::from_le_bytes(unsigned));
        }

        #[test]
        fn padding_is_trimmed_as_byte_by_byte_would(text in "[a-z ]{0,100}", pad in 0usize..300) {
            let mut b = text.clone().into_bytes();
            b.extend(std::iter::repeat_n(b' ', pad));
            let slow = b.iter().rposition(|&x| x != b' ').map_or(&b[..0], |p| &b[..=p]);
            prop_assert_eq!(trim_padding(&b), slow);
        }
    }

    #[test]
    fn a_key_decodes_to_the_values_it_was_encoded_from() {
        let def: TableDef = serde_json::from_str(
            r#"{"name":"t","columns":[
                {"name":"n","type":"INT"},
                {"name":"name","type":"VARCHAR(10)"},
                {"name":"code","type":"CHAR(4)"},
                {"name":"amount","type":"DECIMAL(8,2)"},
                {"name":"day","type":"DATE"}],
              "primary_key":["name","n","code","amount","day"]}"#,
        )
        .unwrap();
        let layout = Layout::new(def);
        let key = [
            Value::Text("bolt é".into()),
            Value::Int(-7),
            Value::Text("ab".into()),
            Value::Decimal(Decimal {
                mantissa: 12345,
                scale: 2,
            }),
            Value::Date(Date(19_000)),
        ];
        let mut out = Vec::new();
        encode_key(&layout, &key, &mut out).unwrap();
        assert_eq!(decode_key(&layout, &out), key);
    }

    /// Column types by the width of their stored bytes (0: variable).
    fn types() -> Vec<(ColumnType, usize)> {
        vec![
            (ColumnType::TinyInt { unsigned: false }, 1),
            (ColumnType::SmallInt { unsigned: true }, 2),
            (ColumnType::MediumInt { unsigned: false }, 3),
            (ColumnType::Int { unsigned: false }, 4),
            (ColumnType::BigInt { unsigned: true }, 8),
            (ColumnType::BigInt { unsigned: false }, 8),
            (
                ColumnType::Decimal {
                    precision: 30,
                    scale: 2,
                },
                16,
            ),
            (ColumnType::Float, 4),
            (ColumnType::Double, 8),
            (ColumnType::Binary(3), 3),
            (ColumnType::VarBinary(40), 0),
        ]
    }

    /// A column: its type, width, and whether it is nullable.
    type Column = (ColumnType, usize, bool);
    /// A key: each column's stored bytes, or NULL.
    type TestKey = Vec<Option<Vec<u8>>>;

    /// Keys compared as an index compares them: column by column, NULL first.
    fn compare_keys(columns: &[Column], a: &[Option<Vec<u8>>], b: &[Option<Vec<u8>>]) -> Ordering {
        for ((&(ty, ..), a), b) in columns.iter().zip(a).zip(b) {
            let ord = match (a, b) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (Some(a), Some(b)) => compare(ty, a, b),
            };
            if ord.is_ne() {
                return ord;
            }
        }
        Ordering::Equal
    }

    fn prefix(columns: &[Column], key: &[Option<Vec<u8>>]) -> KeyPrefix {
        let mut p = KeyPrefix::default();
        for (&(ty, _, nullable), v) in columns.iter().zip(key) {
            p.add(ty, nullable, v.as_deref());
        }
        p
    }

    fn keys() -> impl Strategy<Value = (Vec<Column>, Vec<TestKey>)> {
        proptest::collection::vec((0..types().len(), any::<bool>()), 1..4).prop_flat_map(|cols| {
            let columns: Vec<Column> = cols
                .iter()
                .map(|&(t, n)| (types()[t].0, types()[t].1, n))
                .collect();
            let value = |&(_, width, nullable): &Column| {
                // Values often share their head, and bytes are often 0.
                let bytes =
                    proptest::collection::vec(prop_oneof![3 => 0u8..3, 1 => any::<u8>()], 0..10)
                        .prop_map(move |mut v| {
                            if width > 0 {
                                v.resize(width, 0);
                            }
                            v
                        });
                if nullable {
                    proptest::option::weighted(0.8, bytes).boxed()
                } else {
                    bytes.prop_map(Some).boxed()
                }
            };
            let key: Vec<_> = columns.iter().map(value).collect();
            (Just(columns), proptest::collection::vec(key, 2..12))
        })
    }

    proptest! {
        #[test]
        fn key_prefixes_never_contradict_the_order((columns, keys) in keys()) {
            for a in &keys {
                for b in &keys {
                    let (pa, pb) = (prefix(&columns, a).value(), prefix(&columns, b).value());
                    match compare_keys(&columns, a, b) {
                        Ordering::Less => prop_assert!(pa <= pb, "{a:?} < {b:?} but {pa:x} > {pb:x}"),
                        Ordering::Equal => prop_assert_eq!(pa, pb),
                        Ordering::Greater => prop_assert!(pa >= pb),
                    }
                    // `a`'s first columns as a bound: where its prefix
                    // decides, it decides as the comparison does.
                    for k in 0..=columns.len() {
                        let bound = prefix(&columns[..k], &a[..k]);
                        let decided = bound.bounds(pb);
                        if decided.is_ne() {
                            prop_assert_eq!(decided, compare_keys(&columns[..k], &b[..k], &a[..k]));
                        }
                    }
                }
            }
        }

        #[test]
        fn a_bound_s_null_on_a_column_without_nulls_decides_nothing_after_it(
            (columns, keys) in keys(),
        ) {
            let mut bound = KeyPrefix::default();
            bound.add(columns[0].0, false, None);
            bound.add(ColumnType::Int { unsigned: false }, false, Some(&[1, 2, 3, 4]));
            prop_assert!(bound.is_done());
            for k in &keys {
                prop_assert_eq!(bound.bounds(prefix(&columns, k).value()), Ordering::Equal);
            }
        }
    }
}
