//! Values between SQL and Shoal's columns: literals (and a prepared
//! statement's arguments) to a column's value, checked as MySQL's strict
//! mode checks them — never clamped, rounded or coerced silently — and
//! values back to the text and binary forms a client reads.

use std::borrow::Cow;

use shoal_wire::schema::{ColumnDef as SchemaColumn, ColumnType};
use sqlparser::tokenizer::Token;

use super::clock::Moment;
use super::error::MyError;
use super::proto::{self, BINARY, ColumnDef, UTF8MB4, flag, ty};
use crate::sql::eval::{Datum, Scalar, TimeKind};
use crate::storage::codec::Fault;
use crate::types::value::{Date, DateTime, Decimal, Spelled, Timestamp, Value, WithFsp};

/// A value as SQL wrote it, or as a prepared statement was given it,
/// before it is known what column it is for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lit {
    Null,
    Int(i64),
    UInt(u64),
    /// A number with a point or an exponent, as written.
    Number(String),
    Double(f64),
    /// A quoted string: text for a text column, its bytes for a binary one.
    Str(Vec<u8>),
    /// `X'…'` or `0x…`.
    Bytes(Vec<u8>),
    Bool(bool),
    /// A prepared statement's `?`, the `n`th, not yet given its argument.
    Param(usize),
}

impl Lit {
    /// The literal with its argument in place of a `?`.
    pub(crate) fn bound<'a>(&'a self, args: &'a [Lit]) -> Result<&'a Lit, MyError> {
        match self {
            Lit::Param(n) => args
                .get(*n)
                .ok_or_else(|| MyError::bad_arguments(format!("argument {} was not given", n + 1))),
            other => Ok(other),
        }
    }
}

/// The value `lit` gives `column`, or the error MySQL's strict mode gives.
pub(crate) fn to_value(lit: &Lit, column: &SchemaColumn) -> Result<Value, MyError> {
    let name = column.name.as_str();
    let bad = |what: &str| MyError::bad_value(name, what);
    let text = |b: &[u8]| -> Result<String, MyError> {
        String::from_utf8(b.to_vec()).map_err(|_| {
            MyError::new(
                1366,
                "HY000",
                format!("Incorrect string value for column '{name}': not valid UTF-8"),
            )
        })
    };
    Ok(match (lit, column.column_type) {
        (Lit::Null, _) => Value::Null,
        (Lit::Param(_), _) => return Err(MyError::bad_arguments("a ? was given no value")),
        (
            _,
            ColumnType::TinyInt { .. }
            | ColumnType::SmallInt { .. }
            | ColumnType::MediumInt { .. }
            | ColumnType::Int { .. }
            | ColumnType::BigInt { .. },
        ) => match lit {
            Lit::Int(v) => Value::Int(*v),
            Lit::UInt(v) => Value::UInt(*v),
            Lit::Bool(b) => Value::Int(i64::from(*b)),
            Lit::Str(s) => integer(&text(s)?).ok_or_else(|| bad("not an integer"))?,
            Lit::Number(n) => integer(n).ok_or_else(|| bad("not an integer"))?,
            Lit::Double(d) if d.fract() == 0.0 && d.abs() < 9.0e15 => Value::Int(*d as i64),
            _ => return Err(bad("not an integer")),
        },
        (_, ColumnType::Bool) => match lit {
            Lit::Bool(b) => Value::Bool(*b),
            Lit::Int(0) | Lit::UInt(0) => Value::Bool(false),
            Lit::Int(1) | Lit::UInt(1) => Value::Bool(true),
            Lit::Str(s) if s == b"0" => Value::Bool(false),
            Lit::Str(s) if s == b"1" => Value::Bool(true),
            _ => return Err(bad("a BOOL takes 0, 1, TRUE or FALSE")),
        },
        (_, ColumnType::Float | ColumnType::Double) => match lit {
            Lit::Int(v) => Value::Double(*v as f64),
            Lit::UInt(v) => Value::Double(*v as f64),
            Lit::Double(v) => Value::Double(*v),
            Lit::Number(n) => Value::Double(n.parse().map_err(|_| bad("not a number"))?),
            Lit::Str(s) => Value::Double(text(s)?.trim().parse().map_err(|_| bad("not a number"))?),
            _ => return Err(bad("not a number")),
        },
        (_, ColumnType::Decimal { .. }) => match lit {
            Lit::Int(v) => Value::Text(v.to_string()),
            Lit::UInt(v) => Value::Text(v.to_string()),
            Lit::Number(n) => Value::Text(n.clone()),
            Lit::Str(s) => Value::Text(text(s)?.trim().to_owned()),
            // A double's digits are not a decimal's: refused rather than
            // rounded.
            _ => return Err(bad("a decimal takes an exact number")),
        },
        (_, ColumnType::Char(_) | ColumnType::VarChar(_)) => match lit {
            Lit::Str(s) => Value::Text(text(s)?),
            Lit::Bytes(b) => Value::Text(text(b)?),
            Lit::Int(v) => Value::Text(v.to_string()),
            Lit::UInt(v) => Value::Text(v.to_string()),
            Lit::Number(n) => Value::Text(n.clone()),
            _ => return Err(bad("a string column takes a string")),
        },
        (_, ColumnType::Binary(_) | ColumnType::VarBinary(_)) => match lit {
            Lit::Str(b) | Lit::Bytes(b) => Value::Bytes(b.clone()),
            _ => return Err(bad("a binary column takes a string or X'…'")),
        },
        // Read as the date or time it writes, so that it compares with the
        // column's values as one ('…00.5' equals '…00.500'), not as text.
        (_, ColumnType::Date | ColumnType::DateTime { .. } | ColumnType::Timestamp { .. }) => {
            let Lit::Str(s) = lit else {
                return Err(bad("a date or time is written as a string"));
            };
            let s = text(s)?;
            let parsed = match column.column_type {
                ColumnType::Date => Date::parse(&s).map(Value::Date),
                ColumnType::DateTime { .. } => DateTime::parse(&s).map(Value::DateTime),
                _ => Timestamp::parse(&s).map(Value::Timestamp),
            };
            parsed.map_err(|problem| MyError::refused_value(name, Fault::BadTime, problem))?
        }
    })
}

/// What a number written as text is to an integer column.
#[derive(Debug, Clone, PartialEq)]
enum Integral {
    /// Exactly this integer (`' 7 '`, `'10.0'`, `'1e3'`).
    Exactly(Value),
    /// A number no 64-bit integer is (`2.5`, `-1e30`).
    Not,
}

/// What `text` is to an integer column, as MySQL reads a number: digits
/// with a sign, a point and an exponent, spaces around them. `None`: it
/// spells no number (`'10x'`, `''`).
fn integral(text: &str) -> Option<Integral> {
    let Spelled {
        negative,
        whole,
        fraction,
        exponent,
    } = Spelled::parse(text.trim())?;
    // Past i64 it is out of every range anyway.
    let exponent: i64 = exponent.map_or(0, |x| {
        x.parse().unwrap_or(if x.starts_with('-') {
            i64::MIN
        } else {
            i64::MAX
        })
    });
    // The digits without the point or leading zeros; the point sits
    // `point` digits in.
    let digits = format!("{whole}{fraction}");
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Some(Integral::Exactly(Value::Int(0)));
    }
    let point =
        (whole.len() as i64 - (digits.len() - significant.len()) as i64).saturating_add(exponent);
    // u64 has 20 digits; a digit after the point that is not 0 is a fraction.
    if !(1..=20).contains(&point) {
        return Some(Integral::Not);
    }
    let point = point as usize;
    let (int, frac) = significant.split_at(point.min(significant.len()));
    if frac.bytes().any(|b| b != b'0') {
        return Some(Integral::Not);
    }
    let magnitude = format!("{int}{}", "0".repeat(point - int.len()));
    let magnitude: i128 = magnitude.parse().expect("at most 20 digits");
    let v = if negative { -magnitude } else { magnitude };
    Some(match (i64::try_from(v), u64::try_from(v)) {
        (Ok(v), _) => Integral::Exactly(Value::Int(v)),
        (_, Ok(v)) => Integral::Exactly(Value::UInt(v)),
        _ => Integral::Not,
    })
}

/// An integer written as text (`' 7 '`, `'10.0'`, `'1e3'`): a number
/// that is exactly one, nothing else.
fn integer(text: &str) -> Option<Value> {
    match integral(text)? {
        Integral::Exactly(v) => Some(v),
        Integral::Not => None,
    }
}

/// The text of a constant written as a number or a string, for column
/// `name`.
fn spelled<'a>(lit: &'a Lit, name: &str) -> Result<Option<&'a str>, MyError> {
    Ok(match lit {
        Lit::Str(s) => {
            Some(std::str::from_utf8(s).map_err(|_| MyError::bad_value(name, "not valid UTF-8"))?)
        }
        Lit::Number(n) => Some(n.as_str()),
        _ => None,
    })
}

/// The least and greatest value of integer column type `ty`; `None` for
/// another type.
fn integer_range(ty: ColumnType) -> Option<(i128, i128)> {
    let (bits, unsigned) = match ty {
        ColumnType::TinyInt { unsigned } => (8, unsigned),
        ColumnType::SmallInt { unsigned } => (16, unsigned),
        ColumnType::MediumInt { unsigned } => (24, unsigned),
        ColumnType::Int { unsigned } => (32, unsigned),
        ColumnType::BigInt { unsigned } => (64, unsigned),
        _ => return None,
    };
    Some(if unsigned {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    })
}

/// Whether integer `v` is one integer column type `ty` holds (any other
/// value is left to the column's own checks).
fn in_range(ty: ColumnType, v: &Value) -> bool {
    let n = match v {
        Value::Int(i) => i128::from(*i),
        Value::UInt(u) => i128::from(*u),
        _ => return true,
    };
    integer_range(ty).is_none_or(|(lo, hi)| (lo..=hi).contains(&n))
}

/// A constant as a WHERE clause compares a column's values with it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Comparand {
    /// A value of the column, as its rows' values are read.
    Value(Value),
    /// A number no value of the column is (`2.5` or `1e30` for an integer
    /// column, `1.505` for a DECIMAL(6,2)): no row equals it, and it is
    /// compared with the rows' values as numbers are.
    Beyond,
}

/// Constant `lit` as MySQL compares `column`'s values with it: a string
/// that spells a number as that number, a number the column cannot hold
/// as one beyond its values. A number compared with a text column is
/// refused: MySQL would read every row's text as a number (`'05' = 5`,
/// and `'abc' = 0`), which Shoal does not.
#[inline]
pub(crate) fn comparand(lit: &Lit, column: &SchemaColumn) -> Result<Comparand, MyError> {
    // A key lookup's usual constant, an integer for an integer column,
    // decided here, without the rest.
    if let Lit::Int(v) = lit
        && let Some((lo, hi)) = integer_range(column.column_type)
    {
        return Ok(if (lo..=hi).contains(&i128::from(*v)) {
            Comparand::Value(Value::Int(*v))
        } else {
            Comparand::Beyond
        });
    }
    converted(lit, column)
}

/// `comparand`, for any constant and column.
fn converted(lit: &Lit, column: &SchemaColumn) -> Result<Comparand, MyError> {
    let name = column.name.as_str();
    let spelled = |lit| spelled(lit, name);
    Ok(match column.column_type {
        ColumnType::TinyInt { .. }
        | ColumnType::SmallInt { .. }
        | ColumnType::MediumInt { .. }
        | ColumnType::Int { .. }
        | ColumnType::BigInt { .. } => {
            let v = match lit {
                // A key lookup's usual constant, taken as it is.
                Lit::Int(v) => Value::Int(*v),
                Lit::UInt(v) => Value::UInt(*v),
                Lit::Str(_) | Lit::Number(_) => match spelled(lit)?.and_then(integral) {
                    Some(Integral::Exactly(v)) => v,
                    Some(Integral::Not) => return Ok(Comparand::Beyond),
                    None => return Err(MyError::bad_value(name, "not a number")),
                },
                Lit::Double(d) if d.fract() != 0.0 || d.abs() >= 9.0e15 => {
                    return Ok(Comparand::Beyond);
                }
                _ => to_value(lit, column)?,
            };
            if in_range(column.column_type, &v) {
                Comparand::Value(v)
            } else {
                Comparand::Beyond
            }
        }
        ColumnType::Decimal { precision, scale } => match (lit, spelled(lit)?) {
            (_, Some(text)) => match Decimal::parse(text, precision, scale) {
                Ok(mantissa) => Comparand::Value(Value::Decimal(Decimal { mantissa, scale })),
                Err(_) if integral(text).is_some() => Comparand::Beyond,
                Err(problem) => return Err(MyError::bad_value(name, problem)),
            },
            (Lit::Int(_) | Lit::UInt(_), _) => {
                let v = to_value(lit, column)?;
                match Decimal::parse(&v.to_string(), precision, scale) {
                    Ok(mantissa) => Comparand::Value(Value::Decimal(Decimal { mantissa, scale })),
                    Err(_) => Comparand::Beyond,
                }
            }
            (Lit::Double(_), _) => Comparand::Beyond,
            _ => Comparand::Value(to_value(lit, column)?),
        },
        ColumnType::Char(_) | ColumnType::VarChar(_) => {
            let number = match lit {
                Lit::Int(v) => Some(v.to_string()),
                Lit::UInt(v) => Some(v.to_string()),
                Lit::Number(n) => Some(n.clone()),
                Lit::Double(d) => Some(d.to_string()),
                _ => None,
            };
            match number {
                Some(n) => return Err(MyError::text_against_number(name, &n)),
                None => Comparand::Value(to_value(lit, column)?),
            }
        }
        _ => Comparand::Value(to_value(lit, column)?),
    })
}

/// How a client is told of a table's column.
pub(crate) fn column_def(database: &str, table: &str, c: &SchemaColumn, key: bool) -> ColumnDef {
    let (t, length, mut flags, decimals, charset) = shape(c.column_type);
    if !c.nullable {
        flags |= flag::NOT_NULL;
    }
    if key {
        flags |= flag::PRI_KEY;
    }
    ColumnDef {
        schema: database.to_owned(),
        table: table.to_owned(),
        name: c.name.to_string(),
        charset,
        length,
        ty: t,
        flags,
        decimals,
    }
}

/// Type, length, flags, decimals and character set of a column type.
fn shape(t: ColumnType) -> (u8, u32, u16, u8, u16) {
    let int = |ty, len, unsigned: bool| {
        let flags = flag::NUM | if unsigned { flag::UNSIGNED } else { 0 };
        (ty, len, flags, 0, BINARY)
    };
    match t {
        ColumnType::TinyInt { unsigned } => int(ty::TINY, 4, unsigned),
        ColumnType::SmallInt { unsigned } => int(ty::SHORT, 6, unsigned),
        ColumnType::MediumInt { unsigned } => int(ty::INT24, 9, unsigned),
        ColumnType::Int { unsigned } => int(ty::LONG, 11, unsigned),
        ColumnType::BigInt { unsigned } => int(ty::LONGLONG, 20, unsigned),
        ColumnType::Bool => int(ty::TINY, 1, false),
        ColumnType::Float => (ty::FLOAT, 12, flag::NUM, 31, BINARY),
        ColumnType::Double => (ty::DOUBLE, 22, flag::NUM, 31, BINARY),
        ColumnType::Decimal { precision, scale } => (
            ty::NEWDECIMAL,
            u32::from(precision) + 2,
            flag::NUM,
            scale,
            BINARY,
        ),
        ColumnType::Char(n) => (ty::STRING, u32::from(n) * 4, 0, 0, UTF8MB4),
        ColumnType::VarChar(n) => (ty::VAR_STRING, u32::from(n) * 4, 0, 0, UTF8MB4),
        ColumnType::Binary(n) => (ty::STRING, u32::from(n), flag::BINARY, 0, BINARY),
        ColumnType::VarBinary(n) => (ty::VAR_STRING, u32::from(n), flag::BINARY, 0, BINARY),
        ColumnType::Date => (ty::DATE, 10, flag::BINARY, 0, BINARY),
        ColumnType::DateTime { fsp } => {
            (ty::DATETIME, 19 + fsp_len(fsp), flag::BINARY, fsp, BINARY)
        }
        ColumnType::Timestamp { fsp } => {
            (ty::TIMESTAMP, 19 + fsp_len(fsp), flag::BINARY, fsp, BINARY)
        }
    }
}

fn fsp_len(fsp: u8) -> u32 {
    if fsp == 0 { 0 } else { 1 + u32::from(fsp) }
}

/// A computed column (a variable, a function, an aggregate).
pub(crate) fn computed(name: &str, t: u8) -> ColumnDef {
    let (length, flags, decimals, charset) = match t {
        ty::LONGLONG => (21, flag::NUM | flag::BINARY, 0, BINARY),
        ty::DOUBLE => (22, flag::NUM | flag::BINARY, 31, BINARY),
        ty::NEWDECIMAL => (67, flag::NUM | flag::BINARY, 4, BINARY),
        _ => (1024, 0, 31, UTF8MB4),
    };
    ColumnDef {
        schema: String::new(),
        table: String::new(),
        name: name.to_owned(),
        charset,
        length,
        ty: t,
        flags,
        decimals,
    }
}

/// `column`, of an integer type, as unsigned.
pub(crate) fn unsigned(mut column: ColumnDef) -> ColumnDef {
    column.flags |= flag::UNSIGNED;
    column.length = 20;
    column
}

/// The column of a value computed from each row, of type `t`
/// (`SELECT n * 2`, `UPPER(name)`): described as MySQL describes one of
/// that type.
pub(crate) fn computed_of(name: &str, t: crate::sql::eval::Ty) -> ColumnDef {
    use crate::sql::eval::Ty;
    match t {
        Ty::Decimal(scale) => ColumnDef {
            decimals: scale,
            ..computed(name, ty::NEWDECIMAL)
        },
        Ty::Binary => ColumnDef {
            charset: BINARY,
            flags: flag::BINARY,
            ..computed(name, ty::VAR_STRING)
        },
        Ty::Time(TimeKind::Date) => computed_moment(name, Moment::Date(Date(0))),
        Ty::Time(TimeKind::DateTime(fsp) | TimeKind::Timestamp(fsp)) => {
            computed_moment(name, Moment::DateTime(0, fsp))
        }
        Ty::Null => computed(name, ty::NULL),
        other => computed(name, datum_type(other)),
    }
}

/// A computed column holding a date or a date-time, described as MySQL
/// describes `NOW()`'s: binary, its fractional digits as its decimals.
pub(crate) fn computed_moment(name: &str, m: Moment) -> ColumnDef {
    let (t, length, decimals) = match m {
        Moment::Date(_) => (ty::DATE, 10, 0),
        Moment::DateTime(_, fsp) => (ty::DATETIME, 19 + fsp_len(fsp), fsp),
    };
    ColumnDef {
        length,
        flags: flag::BINARY,
        decimals,
        charset: BINARY,
        ..computed(name, t)
    }
}

/// A cell of a result: a stored value, or a computed one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Value(Value),
    Datum(Datum),
}

impl Cell {
    /// The cell as text, as a `VARCHAR` column of MySQL's catalog holds
    /// a setting (NULL stays NULL).
    pub(crate) fn into_text(self) -> Value {
        match self {
            Cell::Value(Value::Text(t)) => Value::Text(t),
            cell if cell.is_null() => Value::Null,
            cell => Value::Text(String::from_utf8_lossy(&cell.text()).into_owned()),
        }
    }
}

impl From<Value> for Cell {
    fn from(v: Value) -> Cell {
        Cell::Value(v)
    }
}

impl From<&str> for Cell {
    fn from(v: &str) -> Cell {
        Cell::Value(Value::Text(v.to_owned()))
    }
}

impl From<String> for Cell {
    fn from(v: String) -> Cell {
        Cell::Value(Value::Text(v))
    }
}

impl From<i64> for Cell {
    fn from(v: i64) -> Cell {
        Cell::Value(Value::Int(v))
    }
}

impl From<u64> for Cell {
    fn from(v: u64) -> Cell {
        Cell::Value(Value::UInt(v))
    }
}

impl Cell {
    fn is_null(&self) -> bool {
        matches!(self, Cell::Value(Value::Null) | Cell::Datum(Scalar::Null))
    }

    /// The value as an SQL literal: a number, a string, hex for bytes
    /// that are not text, or NULL.
    pub(crate) fn literal(&self) -> Token {
        if self.is_null() {
            return Token::make_keyword("NULL");
        }
        if let Some(n) = self.as_i128() {
            return Token::Number(n.to_string(), false);
        }
        if let Cell::Value(v @ (Value::Float(_) | Value::Double(_) | Value::Decimal(_))) = self {
            return Token::Number(v.to_string(), false);
        }
        match String::from_utf8(self.text().into_owned()) {
            Ok(s) => Token::SingleQuotedString(s),
            Err(e) => {
                Token::HexStringLiteral(e.as_bytes().iter().map(|b| format!("{b:02X}")).collect())
            }
        }
    }

    /// The value as the text protocol sends it.
    fn text(&self) -> Cow<'_, [u8]> {
        match self {
            Cell::Value(v) => match v {
                Value::Text(s) => Cow::Borrowed(s.as_bytes()),
                Value::Bytes(b) => Cow::Borrowed(b),
                Value::Bool(b) => Cow::Borrowed(if *b { b"1" } else { b"0" }),
                other => Cow::Owned(other.to_string().into_bytes()),
            },
            Cell::Datum(d) => match d {
                Scalar::Text(b) | Scalar::Binary(b) => Cow::Borrowed(b),
                Scalar::Int(v) => Cow::Owned(v.to_string().into_bytes()),
                Scalar::Double(v) => Cow::Owned(v.to_string().into_bytes()),
                other => Cow::Owned(crate::tc::ronsql::print::plain(other).into_bytes()),
            },
        }
    }

    /// The value as a whole number, if it is one.
    fn as_i128(&self) -> Option<i128> {
        match self {
            Cell::Value(Value::Int(v)) => Some(i128::from(*v)),
            Cell::Value(Value::UInt(v)) => Some(i128::from(*v)),
            Cell::Value(Value::Bool(b)) => Some(i128::from(*b)),
            Cell::Datum(Scalar::Int(v)) => Some(*v),
            _ => None,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            Cell::Value(Value::Float(v)) => Some(f64::from(*v)),
            Cell::Value(Value::Double(v)) | Cell::Datum(Scalar::Double(v)) => Some(*v),
            other => other.as_i128().map(|v| v as f64),
        }
    }
}

/// A row in the text protocol. A date-time is written with its column's
/// fractional digits, as MySQL writes it (`…:00.500` in a DATETIME(3)).
pub(crate) fn text_row(out: &mut proto::Out, columns: &[ColumnDef], cells: &[Cell]) {
    out.begin();
    for (i, cell) in cells.iter().enumerate() {
        match (cell, columns.get(i)) {
            _ if cell.is_null() => out.put_u8(0xfb),
            (
                Cell::Value(Value::DateTime(DateTime(t)) | Value::Timestamp(Timestamp(t))),
                Some(c),
            ) if matches!(c.ty, ty::DATETIME | ty::TIMESTAMP) => {
                out.put_lenenc_bytes(WithFsp(*t, c.decimals).to_string().as_bytes());
            }
            _ => out.put_lenenc_bytes(&cell.text()),
        }
    }
    out.end();
}

/// A row in the binary protocol: each value in its column's declared type.
pub(crate) fn binary_row(out: &mut proto::Out, columns: &[ColumnDef], cells: &[Cell]) {
    out.begin();
    out.put_u8(0);
    let bitmap_at = out.buf().len();
    let bitmap_len = (cells.len() + 7 + 2) / 8;
    out.buf().resize(bitmap_at + bitmap_len, 0);
    for (i, cell) in cells.iter().enumerate() {
        if cell.is_null() {
            let bit = i + 2;
            out.buf()[bitmap_at + bit / 8] |= 1 << (bit % 8);
            continue;
        }
        let declared = columns.get(i).map_or(ty::VAR_STRING, |c| c.ty);
        let whole = cell.as_i128();
        match (declared, whole) {
            (ty::TINY, Some(v)) => out.put_u8(v as u8),
            (ty::SHORT | ty::YEAR, Some(v)) => out.put_u16(v as u16),
            (ty::LONG | ty::INT24, Some(v)) => out.put_u32(v as u32),
            (ty::LONGLONG, Some(v)) => out.put(&(v as i64).to_le_bytes()),
            (ty::FLOAT, _) => {
                let v = cell.as_f64().unwrap_or(f64::NAN) as f32;
                out.put(&v.to_le_bytes());
            }
            (ty::DOUBLE, _) => out.put(&cell.as_f64().unwrap_or(f64::NAN).to_le_bytes()),
            (ty::DATE | ty::DATETIME | ty::TIMESTAMP, _) => time(out, cell),
            _ => out.put_lenenc_bytes(&cell.text()),
        }
    }
    out.end();
}

/// A date or time in the binary protocol: its length, then year, month,
/// day, hour, minute, second, microsecond, as far as they are not zero.
fn time(out: &mut proto::Out, cell: &Cell) {
    let text = cell.text();
    let text = std::str::from_utf8(&text).unwrap_or("");
    let (date, clock) = text.split_once([' ', 'T']).unwrap_or((text, ""));
    let mut d = date.split('-').map(|p| p.parse::<u32>().unwrap_or(0));
    let (y, mo, da) = (
        d.next().unwrap_or(0),
        d.next().unwrap_or(0),
        d.next().unwrap_or(0),
    );
    let (hms, micro) = clock.split_once('.').unwrap_or((clock, ""));
    let mut t = hms.split(':').map(|p| p.parse::<u8>().unwrap_or(0));
    let (h, mi, s) = (
        t.next().unwrap_or(0),
        t.next().unwrap_or(0),
        t.next().unwrap_or(0),
    );
    let micro: u32 = format!("{micro:0<6}")[..6].parse().unwrap_or(0);
    let len = if micro != 0 {
        11
    } else if (h, mi, s) != (0, 0, 0) {
        7
    } else {
        4
    };
    out.put_u8(len);
    out.put_u16(y as u16);
    out.put_u8(mo as u8);
    out.put_u8(da as u8);
    if len >= 7 {
        out.put_u8(h);
        out.put_u8(mi);
        out.put_u8(s);
    }
    if len == 11 {
        out.put_u32(micro);
    }
}

/// The declared type of a RonSQL answer's column of type `t`.
pub(crate) fn datum_type(t: crate::sql::eval::Ty) -> u8 {
    use crate::sql::eval::Ty;
    match t {
        Ty::Int => ty::LONGLONG,
        Ty::Decimal(_) => ty::NEWDECIMAL,
        Ty::Double => ty::DOUBLE,
        Ty::Time(TimeKind::Date) => ty::DATE,
        Ty::Time(TimeKind::DateTime(_)) => ty::DATETIME,
        Ty::Time(TimeKind::Timestamp(_)) => ty::TIMESTAMP,
        Ty::Text | Ty::Binary | Ty::Null => ty::VAR_STRING,
    }
}

/// A prepared statement's argument, read from COM_STMT_EXECUTE as its
/// type says.
pub(crate) fn read_param(
    r: &mut proto::Reader<'_>,
    t: u8,
    unsigned: bool,
) -> Result<Lit, proto::Malformed> {
    Ok(match t {
        ty::NULL => Lit::Null,
        ty::TINY => {
            let b = r.u8()?;
            if unsigned {
                Lit::UInt(u64::from(b))
            } else {
                Lit::Int(i64::from(b as i8))
            }
        }
        ty::SHORT | ty::YEAR => {
            let v = r.u16()?;
            if unsigned {
                Lit::UInt(u64::from(v))
            } else {
                Lit::Int(i64::from(v as i16))
            }
        }
        ty::LONG | ty::INT24 => {
            let v = r.u32()?;
            if unsigned {
                Lit::UInt(u64::from(v))
            } else {
                Lit::Int(i64::from(v as i32))
            }
        }
        ty::LONGLONG => {
            let v = r.u64()?;
            if unsigned {
                Lit::UInt(v)
            } else {
                Lit::Int(v as i64)
            }
        }
        ty::FLOAT => Lit::Double(f64::from(f32::from_le_bytes(
            r.take(4)?.try_into().expect("4"),
        ))),
        ty::DOUBLE => Lit::Double(f64::from_le_bytes(r.take(8)?.try_into().expect("8"))),
        ty::DATE | ty::DATETIME | ty::TIMESTAMP => {
            let len = r.u8()?;
            let b = r.take(usize::from(len))?;
            let field = |i: usize| b.get(i).copied().unwrap_or(0);
            let year = u16::from_le_bytes([field(0), field(1)]);
            let mut s = format!("{year:04}-{:02}-{:02}", field(2), field(3));
            if t != ty::DATE || len > 4 {
                s.push_str(&format!(" {:02}:{:02}:{:02}", field(4), field(5), field(6)));
            }
            if len >= 11 {
                let micro = u32::from_le_bytes([field(7), field(8), field(9), field(10)]);
                s.push_str(&format!(".{micro:06}"));
            }
            Lit::Str(s.into_bytes())
        }
        ty::TIME => {
            let len = r.u8()?;
            let b = r.take(usize::from(len))?;
            let field = |i: usize| b.get(i).copied().unwrap_or(0);
            let days = u32::from_le_bytes([field(1), field(2), field(3), field(4)]);
            let sign = if field(0) == 1 { "-" } else { "" };
            let hours = days * 24 + u32::from(field(5));
            Lit::Str(format!("{sign}{hours:02}:{:02}:{:02}", field(6), field(7)).into_bytes())
        }
        ty::DECIMAL | ty::NEWDECIMAL => {
            let b = r.lenenc_bytes()?;
            Lit::Number(String::from_utf8_lossy(b).into_owned())
        }
        ty::VARCHAR
        | ty::BIT
        | ty::JSON
        | ty::ENUM
        | ty::SET
        | ty::TINY_BLOB
        | ty::MEDIUM_BLOB
        | ty::LONG_BLOB
        | ty::BLOB
        | ty::VAR_STRING
        | ty::STRING => Lit::Str(r.lenenc_bytes()?.to_vec()),
        _ => return Err(proto::Malformed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_wire::schema::ColumnName;

    fn col(t: ColumnType) -> SchemaColumn {
        SchemaColumn {
            name: ColumnName::parse("c").unwrap(),
            column_type: t,
            nullable: true,
            default: None,
            auto_increment: false,
            on_update: None,
        }
    }

    #[test]
    fn a_constant_is_compared_as_the_number_it_is() {
        let tiny = col(ColumnType::TinyInt { unsigned: false });
        let str = |s: &str| Lit::Str(s.as_bytes().to_vec());
        let num = |s: &str| Lit::Number(s.into());
        let is = |lit: Lit, c: &SchemaColumn| comparand(&lit, c).unwrap();
        for (lit, want) in [
            (str(" 2.0 "), Comparand::Value(Value::Int(2))),
            (str("-1e2"), Comparand::Value(Value::Int(-100))),
            (str("0.000"), Comparand::Value(Value::Int(0))),
            (num("127.00"), Comparand::Value(Value::Int(127))),
            (num("0.5e1"), Comparand::Value(Value::Int(5))),
            (str("2.5"), Comparand::Beyond),
            (num("1e-1"), Comparand::Beyond),
            (Lit::Int(128), Comparand::Beyond),
            (Lit::Int(-129), Comparand::Beyond),
            (Lit::UInt(u64::MAX), Comparand::Beyond),
            (num("99999999999999999999999"), Comparand::Beyond),
            (str("1e99999999999999999999999"), Comparand::Beyond),
            (Lit::Double(0.5), Comparand::Beyond),
        ] {
            assert_eq!(is(lit.clone(), &tiny), want, "{lit:?}");
        }
        for bad in ["", "-", "1x", "e5", "1e", ".", "0x10", "1.2.3"] {
            assert_eq!(comparand(&str(bad), &tiny).unwrap_err().code, 1366, "{bad}");
        }
        let ubig = col(ColumnType::BigInt { unsigned: true });
        assert_eq!(
            is(str("18446744073709551615.0"), &ubig),
            Comparand::Value(Value::UInt(u64::MAX))
        );
        assert_eq!(is(str("-1"), &ubig), Comparand::Beyond);
        let dec = col(ColumnType::Decimal {
            precision: 6,
            scale: 2,
        });
        let d = |mantissa| Comparand::Value(Value::Decimal(Decimal { mantissa, scale: 2 }));
        assert_eq!(is(num("1.5"), &dec), d(150));
        assert_eq!(is(str("2.250"), &dec), d(225));
        assert_eq!(is(Lit::Int(10), &dec), d(1000));
        assert_eq!(is(num("1.505"), &dec), Comparand::Beyond);
        assert_eq!(is(Lit::Int(10_000), &dec), Comparand::Beyond);
        assert_eq!(is(Lit::Double(1.5), &dec), Comparand::Beyond);
        assert_eq!(comparand(&str("cheap"), &dec).unwrap_err().code, 1366);
        let text = col(ColumnType::VarChar(10));
        assert_eq!(
            is(str("5"), &text),
            Comparand::Value(Value::Text("5".into()))
        );
        for number in [Lit::Int(5), Lit::UInt(5), num("5.0"), Lit::Double(5.0)] {
            assert_eq!(comparand(&number, &text).unwrap_err().code, 1105);
        }
    }

    proptest::proptest! {
        /// Every integer reads as itself however it is spelled, and with
        /// a fraction that is not 0 as no integer.
        #[test]
        fn an_integer_reads_as_itself_in_every_spelling(
            v in proptest::prelude::any::<i64>(),
            zeros in 0usize..4,
            fraction in 1u32..1000,
        ) {
            let exactly = Some(Integral::Exactly(Value::Int(v)));
            let zeros = "0".repeat(zeros);
            proptest::prop_assert_eq!(integral(&format!(" {v} ")), exactly.clone());
            proptest::prop_assert_eq!(integral(&format!("{v}.{zeros}")), exactly.clone());
            proptest::prop_assert_eq!(integral(&format!("{v}e0")), exactly.clone());
            let sign = if v < 0 { "-" } else { "" };
            let digits = v.unsigned_abs().to_string();
            // The point moved left, and an exponent that moves it back.
            let (int, frac) = digits.split_at(1);
            let shifted = format!("{sign}{int}.{frac}{zeros}e{}", frac.len());
            proptest::prop_assert_eq!(integral(&shifted), exactly);
            let fraction = format!("{v}.{zeros}{fraction}");
            proptest::prop_assert_eq!(integral(&fraction), Some(Integral::Not));
        }
    }

    #[test]
    fn strings_become_numbers_only_when_they_are_numbers() {
        let int = col(ColumnType::Int { unsigned: false });
        assert_eq!(
            to_value(&Lit::Str(b"42".to_vec()), &int),
            Ok(Value::Int(42))
        );
        assert_eq!(
            to_value(&Lit::Str(b" -7 ".to_vec()), &int),
            Ok(Value::Int(-7))
        );
        for bad in [&b"4x"[..], b"", b"1.5", b"0x10"] {
            assert_eq!(
                to_value(&Lit::Str(bad.to_vec()), &int).unwrap_err().code,
                1366
            );
        }
        assert_eq!(
            to_value(&Lit::Number("1.5".into()), &int).unwrap_err().code,
            1366
        );
        assert_eq!(to_value(&Lit::Double(1.5), &int).unwrap_err().code, 1366);
        assert_eq!(to_value(&Lit::Double(2.0), &int), Ok(Value::Int(2)));
        let dec = col(ColumnType::Decimal {
            precision: 10,
            scale: 2,
        });
        assert_eq!(to_value(&Lit::Double(0.1), &dec).unwrap_err().code, 1366);
        let text = col(ColumnType::VarChar(10));
        assert_eq!(
            to_value(&Lit::Str(vec![0xff, 0xfe]), &text)
                .unwrap_err()
                .code,
            1366
        );
        assert_eq!(
            to_value(&Lit::Str(vec![0xff]), &col(ColumnType::VarBinary(4))),
            Ok(Value::Bytes(vec![0xff]))
        );
        assert_eq!(
            to_value(&Lit::Int(2), &col(ColumnType::Bool))
                .unwrap_err()
                .code,
            1366
        );
    }
}
