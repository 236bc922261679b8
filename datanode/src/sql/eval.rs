//! Values and expressions as a query evaluates them, row by row, in the
//! LDM worker that holds the row.
//!
//! A value is read from a row's stored bytes without copying them. Numbers
//! are exact where SQL makes them exact: integers as `i128` (a result
//! outside BIGINT's and BIGINT UNSIGNED's range together is an error, never
//! a wrapped value), decimals as a mantissa and a scale, and only `DOUBLE`,
//! `FLOAT` and division approximate. Conditions have SQL's three values:
//! `None` is UNKNOWN, and a row passes `WHERE` only if it is `Some(true)`.

use std::borrow::Cow;
use std::cmp::Ordering;

use shoal_wire::schema::ColumnType;

use super::func::Function;
use super::like::Like;
use super::regexp::Regexp;
use crate::storage::codec;
use crate::storage::layout::Layout;
use crate::types::value::{POW10, Value};

/// Largest scale a decimal result may have (MySQL's).
pub(crate) const MAX_SCALE: u8 = 30;
/// Decimals a quotient of exact numbers has beyond its dividend's
/// (MySQL's `div_precision_increment`, 4 by default).
const DIV_SCALE: u8 = 4;

/// Why evaluating a row failed; the whole query fails with it. (Boxed:
/// every value an expression answers travels in a `Result` with it.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EvalError(pub(crate) Box<str>);

impl EvalError {
    pub(crate) fn new(message: impl Into<Box<str>>) -> EvalError {
        EvalError(message.into())
    }
}

/// The kind of a date or time value, and its fractional digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeKind {
    /// Days since 1970-01-01.
    Date,
    /// Microseconds since 1970-01-01 00:00:00.
    DateTime(u8),
    /// Microseconds since 1970-01-01 00:00:00 UTC.
    Timestamp(u8),
}

/// The type of an expression, known when the query is planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Int,
    Decimal(u8),
    Double,
    Text,
    Binary,
    Time(TimeKind),
    /// The type of a NULL literal: compares with anything.
    Null,
}

impl Ty {
    pub(crate) fn of_column(ty: ColumnType) -> Ty {
        match ty {
            ColumnType::TinyInt { .. }
            | ColumnType::SmallInt { .. }
            | ColumnType::MediumInt { .. }
            | ColumnType::Int { .. }
            | ColumnType::BigInt { .. }
            | ColumnType::Bool => Ty::Int,
            ColumnType::Decimal { scale, .. } => Ty::Decimal(scale),
            ColumnType::Float | ColumnType::Double => Ty::Double,
            ColumnType::Char(_) | ColumnType::VarChar(_) => Ty::Text,
            ColumnType::Binary(_) | ColumnType::VarBinary(_) => Ty::Binary,
            ColumnType::Date => Ty::Time(TimeKind::Date),
            ColumnType::DateTime { fsp } => Ty::Time(TimeKind::DateTime(fsp)),
            ColumnType::Timestamp { fsp } => Ty::Time(TimeKind::Timestamp(fsp)),
        }
    }

    pub(crate) fn is_numeric(self) -> bool {
        matches!(self, Ty::Int | Ty::Decimal(_) | Ty::Double | Ty::Null)
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Ty::Int => "an integer",
            Ty::Decimal(_) => "a decimal",
            Ty::Double => "a floating-point number",
            Ty::Text => "a string",
            Ty::Binary => "bytes",
            Ty::Time(TimeKind::Date) => "a date",
            Ty::Time(_) => "a date-time",
            Ty::Null => "NULL",
        }
    }
}

/// A value, borrowing a row's bytes (or a literal's) where it can.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar<'a> {
    Null,
    Int(i128),
    /// `mantissa × 10^-scale`.
    Decimal(i128, u8),
    Double(f64),
    /// UTF-8 text; a CHAR column's without its padding spaces.
    Text(Cow<'a, [u8]>),
    Binary(Cow<'a, [u8]>),
    Time(TimeKind, i64),
}

/// A value that outlives the row it came from.
pub(crate) type Datum = Scalar<'static>;

impl Scalar<'_> {
    pub(crate) fn to_owned(&self) -> Datum {
        match self {
            Scalar::Null => Scalar::Null,
            Scalar::Int(v) => Scalar::Int(*v),
            Scalar::Decimal(m, s) => Scalar::Decimal(*m, *s),
            Scalar::Double(v) => Scalar::Double(*v),
            Scalar::Text(b) => Scalar::Text(Cow::Owned(b.to_vec())),
            Scalar::Binary(b) => Scalar::Binary(Cow::Owned(b.to_vec())),
            Scalar::Time(k, v) => Scalar::Time(*k, *v),
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Scalar::Null)
    }

    /// The value as a column value: what sorts, compares and is written
    /// as a stored one is. (Integers are within BIGINT's and BIGINT
    /// UNSIGNED's range; text that is not UTF-8 stays bytes.)
    pub(crate) fn to_value(&self) -> Value {
        use crate::types::value::{Date, DateTime, Decimal, Timestamp};
        match self {
            Scalar::Null => Value::Null,
            Scalar::Int(v) => match i64::try_from(*v) {
                Ok(v) => Value::Int(v),
                Err(_) => Value::UInt(u64::try_from(*v).unwrap_or(u64::MAX)),
            },
            Scalar::Decimal(mantissa, scale) => Value::Decimal(Decimal {
                mantissa: *mantissa,
                scale: *scale,
            }),
            Scalar::Double(v) => Value::Double(*v),
            Scalar::Text(b) => match std::str::from_utf8(b) {
                Ok(s) => Value::Text(s.to_owned()),
                Err(_) => Value::Bytes(b.to_vec()),
            },
            Scalar::Binary(b) => Value::Bytes(b.to_vec()),
            Scalar::Time(TimeKind::Date, d) => Value::Date(Date(*d as i32)),
            Scalar::Time(TimeKind::DateTime(_), t) => Value::DateTime(DateTime(*t)),
            Scalar::Time(TimeKind::Timestamp(_), t) => Value::Timestamp(Timestamp(*t)),
        }
    }

    /// Bytes it holds beyond its own size: what a group keeping it costs.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Scalar::Text(b) | Scalar::Binary(b) => b.len(),
            _ => 0,
        }
    }

    fn as_f64(&self) -> f64 {
        match *self {
            Scalar::Int(v) => v as f64,
            Scalar::Decimal(m, s) => m as f64 / 10f64.powi(i32::from(s)),
            Scalar::Double(v) => v,
            _ => f64::NAN,
        }
    }

    /// Appends a form of the value that equal values share and unequal
    /// ones do not: its part of a group's key.
    pub(crate) fn key_into(&self, out: &mut Vec<u8>) {
        match self {
            Scalar::Null => out.push(0),
            Scalar::Int(v) => {
                out.push(1);
                out.extend_from_slice(&v.to_le_bytes());
            }
            // A column's decimals share its scale.
            Scalar::Decimal(m, _) => {
                out.push(2);
                out.extend_from_slice(&m.to_le_bytes());
            }
            Scalar::Double(v) => {
                out.push(3);
                // -0 and 0 are one group.
                out.extend_from_slice(&(v + 0.0).to_bits().to_le_bytes());
            }
            Scalar::Text(b) | Scalar::Binary(b) => {
                out.push(4);
                out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                out.extend_from_slice(b);
            }
            Scalar::Time(_, v) => {
                out.push(5);
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// Reads column `c` of a stored row.
pub(crate) fn column<'a>(layout: &Layout, fixed: &'a [u8], var: &'a [u8], c: u16) -> Scalar<'a> {
    if layout.is_null(fixed, c) {
        return Scalar::Null;
    }
    stored(
        layout.columns[c as usize].ty,
        layout.column_bytes(fixed, var, c),
    )
}

/// A non-null value of a column of type `ty` from its stored bytes.
pub(crate) fn stored(ty: ColumnType, b: &[u8]) -> Scalar<'_> {
    let signed = codec::le_signed;
    let unsigned = |b: &[u8]| codec::le_unsigned(b) as i128;
    match ty {
        ColumnType::TinyInt { unsigned: true }
        | ColumnType::SmallInt { unsigned: true }
        | ColumnType::MediumInt { unsigned: true }
        | ColumnType::Int { unsigned: true }
        | ColumnType::BigInt { unsigned: true }
        | ColumnType::Bool => Scalar::Int(unsigned(b)),
        ColumnType::TinyInt { .. }
        | ColumnType::SmallInt { .. }
        | ColumnType::MediumInt { .. }
        | ColumnType::Int { .. }
        | ColumnType::BigInt { .. } => Scalar::Int(signed(b)),
        ColumnType::Decimal { scale, .. } => Scalar::Decimal(signed(b), scale),
        ColumnType::Float => Scalar::Double(f64::from(f32::from_le_bytes(
            b.try_into().expect("4 bytes"),
        ))),
        ColumnType::Double => Scalar::Double(f64::from_le_bytes(b.try_into().expect("8 bytes"))),
        ColumnType::Char(_) => {
            let end = b.iter().rposition(|&c| c != b' ').map_or(0, |i| i + 1);
            Scalar::Text(Cow::Borrowed(&b[..end]))
        }
        ColumnType::VarChar(_) => Scalar::Text(Cow::Borrowed(b)),
        ColumnType::Binary(_) | ColumnType::VarBinary(_) => Scalar::Binary(Cow::Borrowed(b)),
        ColumnType::Date => Scalar::Time(TimeKind::Date, signed(b) as i64),
        ColumnType::DateTime { fsp } => Scalar::Time(TimeKind::DateTime(fsp), signed(b) as i64),
        ColumnType::Timestamp { fsp } => Scalar::Time(TimeKind::Timestamp(fsp), signed(b) as i64),
    }
}

/// Orders two non-null values that the planner found comparable; `None`
/// if they are not (a planner bug, answered as UNKNOWN).
pub(crate) fn compare(a: &Scalar<'_>, b: &Scalar<'_>) -> Option<Ordering> {
    use Scalar::*;
    match (a, b) {
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (Int(x), Decimal(m, s)) => Some(compare_decimals(*x, 0, *m, *s)),
        (Decimal(m, s), Int(y)) => Some(compare_decimals(*m, *s, *y, 0)),
        (Decimal(m, s), Decimal(n, t)) => Some(compare_decimals(*m, *s, *n, *t)),
        (Double(_), Int(_) | Decimal(..) | Double(_)) | (Int(_) | Decimal(..), Double(_)) => {
            a.as_f64().partial_cmp(&b.as_f64())
        }
        (Text(x), Text(y)) | (Binary(x), Binary(y)) => Some(x.as_ref().cmp(y.as_ref())),
        (Time(k, x), Time(l, y)) if same_kind(*k, *l) => Some(x.cmp(y)),
        // A date against a date-time, as MySQL compares them: the date as
        // its midnight (the session's zone is UTC, a timestamp's too).
        (Time(k, x), Time(l, y)) => Some(micros_of(*k, *x)?.cmp(&micros_of(*l, *y)?)),
        _ => None,
    }
}

/// A date or time as microseconds since 1970-01-01 00:00:00.
fn micros_of(kind: TimeKind, v: i64) -> Option<i64> {
    match kind {
        TimeKind::Date => v.checked_mul(crate::types::value::MICROS_PER_DAY),
        TimeKind::DateTime(_) | TimeKind::Timestamp(_) => Some(v),
    }
}

fn same_kind(a: TimeKind, b: TimeKind) -> bool {
    std::mem::discriminant(&a) == std::mem::discriminant(&b)
}

/// Orders `m × 10^-s` and `n × 10^-t` exactly (through f64 only if
/// aligning the scales would overflow, which needs 38-digit mantissas).
fn compare_decimals(m: i128, s: u8, n: i128, t: u8) -> Ordering {
    match align(m, s, n, t) {
        Some((x, y, _)) => x.cmp(&y),
        None => {
            let x = m as f64 / 10f64.powi(i32::from(s));
            let y = n as f64 / 10f64.powi(i32::from(t));
            x.total_cmp(&y)
        }
    }
}

/// Both mantissas at the larger scale, and that scale.
fn align(m: i128, s: u8, n: i128, t: u8) -> Option<(i128, i128, u8)> {
    match s.cmp(&t) {
        Ordering::Equal => Some((m, n, s)),
        Ordering::Less => Some((m.checked_mul(*POW10.get(usize::from(t - s))?)?, n, t)),
        Ordering::Greater => Some((m, n.checked_mul(*POW10.get(usize::from(s - t))?)?, s)),
    }
}

/// An arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

impl Arith {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Arith::Add => "+",
            Arith::Sub => "-",
            Arith::Mul => "*",
            Arith::Div => "/",
            Arith::Mod => "%",
        }
    }

    /// The type of `a op b`; `None` if the operands are not numbers.
    pub(crate) fn result(self, a: Ty, b: Ty) -> Option<Ty> {
        if !a.is_numeric() || !b.is_numeric() {
            return None;
        }
        Some(match (self, a, b) {
            (_, Ty::Double, _) | (_, _, Ty::Double) => Ty::Double,
            // As MySQL divides exact numbers: to 4 more decimals than the
            // dividend's (`div_precision_increment`).
            (Arith::Div, x, _) => Ty::Decimal((scale_of(x) + DIV_SCALE).min(MAX_SCALE)),
            (_, Ty::Null, Ty::Null) => Ty::Int,
            (_, Ty::Null, t) | (_, t, Ty::Null) => t,
            (_, Ty::Int, Ty::Int) => Ty::Int,
            (Arith::Mul, x, y) => Ty::Decimal((scale_of(x) + scale_of(y)).min(MAX_SCALE)),
            (_, x, y) => Ty::Decimal(scale_of(x).max(scale_of(y))),
        })
    }
}

fn scale_of(t: Ty) -> u8 {
    match t {
        Ty::Decimal(s) => s,
        _ => 0,
    }
}

/// Integers a result may be: BIGINT's and BIGINT UNSIGNED's range together.
pub(crate) fn int_in_range(v: i128) -> Result<i128, EvalError> {
    if (i128::from(i64::MIN)..=i128::from(u64::MAX)).contains(&v) {
        Ok(v)
    } else {
        Err(EvalError::new(format!(
            "an integer result is out of range ({v} is outside -2^63 to 2^64-1)"
        )))
    }
}

fn overflow(op: Arith) -> EvalError {
    EvalError::new(format!(
        "a decimal result of '{}' is out of range",
        op.symbol()
    ))
}

/// `a op b` of two non-null numbers.
pub(crate) fn arith<'a>(
    op: Arith,
    a: &Scalar<'_>,
    b: &Scalar<'_>,
) -> Result<Scalar<'a>, EvalError> {
    use Scalar::*;
    let double = |x: f64| {
        if x.is_finite() {
            Ok(Double(x))
        } else if x.is_nan() {
            Ok(Null)
        } else {
            Err(EvalError::new(format!(
                "a floating-point result of '{}' is out of range",
                op.symbol()
            )))
        }
    };
    if matches!(a, Double(_)) || matches!(b, Double(_)) {
        let (x, y) = (a.as_f64(), b.as_f64());
        return match op {
            Arith::Add => double(x + y),
            Arith::Sub => double(x - y),
            Arith::Mul => double(x * y),
            Arith::Div | Arith::Mod if y == 0.0 => Ok(Null),
            Arith::Div => double(x / y),
            Arith::Mod => double(x % y),
        };
    }
    if let (Int(x), Int(y)) = (a, b) {
        let (x, y) = (*x, *y);
        return match op {
            Arith::Add => int_in_range(x + y).map(Int),
            Arith::Sub => int_in_range(x - y).map(Int),
            Arith::Mul => int_in_range(x.checked_mul(y).unwrap_or(i128::MAX)).map(Int),
            Arith::Mod if y == 0 => Ok(Null),
            Arith::Mod => Ok(Int(x % y)),
            Arith::Div => divide(x, 0, y, 0),
        };
    }
    let (m, s) = decimal_parts(a);
    let (n, t) = decimal_parts(b);
    match op {
        Arith::Add | Arith::Sub | Arith::Mod => {
            let (x, y, scale) = align(m, s, n, t).ok_or_else(|| overflow(op))?;
            let v = match op {
                Arith::Add => x.checked_add(y),
                Arith::Sub => x.checked_sub(y),
                _ if y == 0 => return Ok(Null),
                _ => Some(x % y),
            };
            Ok(Decimal(v.ok_or_else(|| overflow(op))?, scale))
        }
        Arith::Mul => {
            let v = m.checked_mul(n).ok_or_else(|| overflow(op))?;
            let scale = s + t;
            if scale <= MAX_SCALE {
                return Ok(Decimal(v, scale));
            }
            // Rounded half away from zero to the largest scale.
            let unit = 10i128.pow(u32::from(scale - MAX_SCALE));
            let q = v / unit;
            let r = v % unit;
            let q = if r.abs() * 2 >= unit {
                q + v.signum()
            } else {
                q
            };
            Ok(Decimal(q, MAX_SCALE))
        }
        Arith::Div => divide(m, s, n, t),
    }
}

/// `m × 10^-s ÷ n × 10^-t` exactly, rounded half away from zero to
/// `DIV_SCALE` more decimals than the dividend's; NULL for a zero divisor.
fn divide<'a>(m: i128, s: u8, n: i128, t: u8) -> Result<Scalar<'a>, EvalError> {
    if n == 0 {
        return Ok(Scalar::Null);
    }
    let scale = (s + DIV_SCALE).min(MAX_SCALE);
    // The quotient at `scale` is m × 10^(t + scale - s) / n.
    let shift = usize::from(t + scale - s);
    let dividend = (POW10.get(shift))
        .and_then(|p| m.checked_mul(*p))
        .ok_or_else(|| overflow(Arith::Div))?;
    let (q, r) = (dividend / n, dividend % n);
    let away = if r.unsigned_abs() * 2 >= n.unsigned_abs() {
        dividend.signum() * n.signum()
    } else {
        0
    };
    Ok(Scalar::Decimal(q + away, scale))
}

fn decimal_parts(v: &Scalar<'_>) -> (i128, u8) {
    match *v {
        Scalar::Int(x) => (x, 0),
        Scalar::Decimal(m, s) => (m, s),
        _ => (0, 0),
    }
}

/// `-a` of a non-null number.
pub(crate) fn negate<'a>(a: &Scalar<'_>) -> Result<Scalar<'a>, EvalError> {
    Ok(match *a {
        Scalar::Int(v) => Scalar::Int(int_in_range(-v)?),
        Scalar::Decimal(m, s) => Scalar::Decimal(-m, s),
        Scalar::Double(v) => Scalar::Double(-v),
        _ => Scalar::Null,
    })
}

/// A value expression over one row.
#[derive(Debug, Clone)]
pub(crate) enum Expr {
    Column(u16),
    /// A value of the group a HAVING clause judges (see `plan::Plan::having`).
    Slot(usize),
    Literal(Datum),
    Neg(Box<Expr>),
    Arith(Arith, Box<Expr>, Box<Expr>),
    /// A scalar function of its arguments (NULL if any is NULL).
    Call(Function, Vec<Expr>),
    Case(Box<Case>),
    /// A condition as a value, as MySQL makes one (`SELECT qty > 5`): 1
    /// when true, 0 when false, NULL when unknown.
    Truth(Box<Pred>),
}

/// `CASE WHEN p THEN v … ELSE e END`, and what `COALESCE`, `IFNULL`,
/// `NULLIF` and `IF` are: the value of the first arm whose condition is
/// true, else `otherwise`; as type `ty`, which every arm's value is made.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub(crate) arms: Vec<(Pred, Expr)>,
    pub(crate) otherwise: Expr,
    pub(crate) ty: Ty,
}

impl Case {
    fn eval<'a>(&'a self, row: impl Fields<'a>) -> Result<Scalar<'a>, EvalError> {
        for (when, then) in &self.arms {
            if when.test(row)? == Some(true) {
                return as_type(then.eval(row)?, self.ty);
            }
        }
        as_type(self.otherwise.eval(row)?, self.ty)
    }
}

/// `v` as a value of type `ty`, which the planner found it fits: an
/// integer or a decimal widened to a decimal of more digits or a double,
/// a date to a date-time. A decimal whose digits would pass the 38 a
/// value holds is an error, never a double or fewer digits in its place.
pub(crate) fn as_type<'a>(v: Scalar<'a>, ty: Ty) -> Result<Scalar<'a>, EvalError> {
    let widened = |m: i128, from: u8, to: u8| {
        POW10
            .get(usize::from(to - from))
            .and_then(|p| m.checked_mul(*p))
            .map(|m| Scalar::Decimal(m, to))
            .ok_or_else(|| {
                EvalError::new(format!(
                    "value out of range: a value of the CASE or COALESCE does not fit \
                     38 digits with {to} decimals"
                ))
            })
    };
    Ok(match (v, ty) {
        (Scalar::Int(x), Ty::Decimal(s)) => widened(x, 0, s)?,
        (Scalar::Decimal(m, s), Ty::Decimal(t)) if t > s => widened(m, s, t)?,
        (v @ (Scalar::Int(_) | Scalar::Decimal(..)), Ty::Double) => Scalar::Double(v.as_f64()),
        (
            Scalar::Time(TimeKind::Date, d),
            Ty::Time(k @ (TimeKind::DateTime(_) | TimeKind::Timestamp(_))),
        ) => Scalar::Time(k, d * crate::types::value::MICROS_PER_DAY),
        (v, _) => v,
    })
}

impl Ty {
    /// The one type values of types `a` and `b` both fit, for the arms
    /// of a CASE or a COALESCE; `None` if there is none.
    pub(crate) fn common(a: Ty, b: Ty) -> Option<Ty> {
        Some(match (a, b) {
            (Ty::Null, t) | (t, Ty::Null) => t,
            (x, y) if x == y => x,
            (x, y) if x.is_numeric() && y.is_numeric() => Arith::Add.result(x, y)?,
            (Ty::Text, Ty::Binary) | (Ty::Binary, Ty::Text) => Ty::Binary,
            (Ty::Time(k), Ty::Time(l)) => match (k, l) {
                (TimeKind::Date, other) | (other, TimeKind::Date) => Ty::Time(other),
                (TimeKind::DateTime(f), TimeKind::DateTime(g)) => {
                    Ty::Time(TimeKind::DateTime(f.max(g)))
                }
                (TimeKind::Timestamp(f), TimeKind::Timestamp(g)) => {
                    Ty::Time(TimeKind::Timestamp(f.max(g)))
                }
                _ => return None,
            },
            _ => return None,
        })
    }
}

/// A row as expressions read it: a stored row's columns, or (for HAVING)
/// a finished group's values.
#[derive(Clone, Copy)]
pub(crate) struct Row<'a> {
    pub(crate) layout: &'a Layout,
    pub(crate) fixed: &'a [u8],
    pub(crate) var: &'a [u8],
    pub(crate) slots: &'a [Datum],
}

/// A row of decoded values (a front end's, after a lookup or a scan): its
/// columns in the order of the layout's.
#[derive(Clone, Copy)]
pub(crate) struct Values<'a> {
    pub(crate) layout: &'a Layout,
    pub(crate) values: &'a [Value],
}

/// What an expression reads its columns and slots through.
pub(crate) trait Fields<'a>: Copy {
    fn column(self, c: u16) -> Scalar<'a>;
    fn slot(self, i: usize) -> Scalar<'a>;
}

impl<'a> Fields<'a> for Row<'a> {
    #[inline(always)]
    fn column(self, c: u16) -> Scalar<'a> {
        column(self.layout, self.fixed, self.var, c)
    }

    fn slot(self, i: usize) -> Scalar<'a> {
        self.slots[i].clone()
    }
}

impl<'a> Fields<'a> for Values<'a> {
    /// Column `c` of the values; past the layout's width, of a second row
    /// of the table that follows the first (an INSERT's, in ON DUPLICATE
    /// KEY UPDATE).
    fn column(self, c: u16) -> Scalar<'a> {
        let of_layout = usize::from(c) % self.layout.columns.len();
        let fsp = || match self.layout.columns[of_layout].ty {
            ColumnType::DateTime { fsp } | ColumnType::Timestamp { fsp } => fsp,
            _ => 6,
        };
        match &self.values[usize::from(c)] {
            Value::Null => Scalar::Null,
            Value::Int(v) => Scalar::Int(i128::from(*v)),
            Value::UInt(v) => Scalar::Int(i128::from(*v)),
            Value::Bool(b) => Scalar::Int(i128::from(*b)),
            Value::Float(v) => Scalar::Double(f64::from(*v)),
            Value::Double(v) => Scalar::Double(*v),
            Value::Decimal(d) => Scalar::Decimal(d.mantissa, d.scale),
            Value::Text(t) => Scalar::Text(Cow::Borrowed(t.as_bytes())),
            Value::Bytes(b) => Scalar::Binary(Cow::Borrowed(b)),
            Value::Date(d) => Scalar::Time(TimeKind::Date, i64::from(d.0)),
            Value::DateTime(t) => Scalar::Time(TimeKind::DateTime(fsp()), t.0),
            Value::Timestamp(t) => Scalar::Time(TimeKind::Timestamp(fsp()), t.0),
        }
    }

    /// A front end's row has no group values: no plan over one reads a slot.
    fn slot(self, _: usize) -> Scalar<'a> {
        Scalar::Null
    }
}

impl Expr {
    pub(crate) fn eval<'a>(&'a self, row: impl Fields<'a>) -> Result<Scalar<'a>, EvalError> {
        match self {
            Expr::Column(c) => Ok(row.column(*c)),
            Expr::Slot(i) => Ok(row.slot(*i)),
            Expr::Literal(v) => Ok(v.clone()),
            Expr::Neg(e) => match e.eval(row)? {
                Scalar::Null => Ok(Scalar::Null),
                v => negate(&v),
            },
            Expr::Arith(op, a, b) => {
                let x = match a.leaf(row) {
                    Some(x) => x,
                    None => a.eval(row)?,
                };
                if x.is_null() {
                    return Ok(Scalar::Null);
                }
                let y = match b.leaf(row) {
                    Some(y) => y,
                    None => b.eval(row)?,
                };
                if y.is_null() {
                    return Ok(Scalar::Null);
                }
                arith(*op, &x, &y)
            }
            Expr::Call(f, args) => {
                let mut values = Vec::with_capacity(args.len());
                for a in args {
                    let v = a.eval(row)?;
                    if v.is_null() && *f != Function::ConcatWs {
                        return Ok(Scalar::Null);
                    }
                    values.push(v);
                }
                f.call(&values)
            }
            Expr::Case(case) => case.eval(row),
            Expr::Truth(p) => Ok(p
                .test(row)?
                .map_or(Scalar::Null, |b| Scalar::Int(i128::from(b)))),
        }
    }

    /// Adds the columns it reads to `out`.
    pub(crate) fn columns(&self, out: &mut Vec<u16>) {
        match self {
            Expr::Column(c) => out.push(*c),
            Expr::Slot(_) | Expr::Literal(_) => {}
            Expr::Neg(e) => e.columns(out),
            Expr::Arith(_, a, b) => {
                a.columns(out);
                b.columns(out);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.columns(out)),
            Expr::Truth(p) => p.columns(out),
            Expr::Case(case) => {
                for (when, then) in &case.arms {
                    when.columns(out);
                    then.columns(out);
                }
                case.otherwise.columns(out);
            }
        }
    }

    /// The value of a column or a literal, without a call: most operands
    /// of arithmetic are one.
    #[inline(always)]
    fn leaf<'a>(&'a self, row: impl Fields<'a>) -> Option<Scalar<'a>> {
        match self {
            Expr::Column(c) => Some(row.column(*c)),
            Expr::Literal(v) => Some(v.clone()),
            _ => None,
        }
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    pub(crate) fn holds(self, ord: Ordering) -> bool {
        match self {
            Cmp::Eq => ord.is_eq(),
            Cmp::Ne => ord.is_ne(),
            Cmp::Lt => ord.is_lt(),
            Cmp::Le => ord.is_le(),
            Cmp::Gt => ord.is_gt(),
            Cmp::Ge => ord.is_ge(),
        }
    }

    /// SQL's comparison operator as a `Cmp`, if it is one.
    pub(crate) fn of(op: &sqlparser::ast::BinaryOperator) -> Option<Cmp> {
        use sqlparser::ast::BinaryOperator as Op;
        Some(match op {
            Op::Eq => Cmp::Eq,
            Op::NotEq => Cmp::Ne,
            Op::Lt => Cmp::Lt,
            Op::LtEq => Cmp::Le,
            Op::Gt => Cmp::Gt,
            Op::GtEq => Cmp::Ge,
            _ => return None,
        })
    }

    /// The operator with its operands swapped: `a < b` is `b > a`.
    pub(crate) fn flip(self) -> Cmp {
        match self {
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
            Cmp::Gt => Cmp::Lt,
            Cmp::Ge => Cmp::Le,
            other => other,
        }
    }

    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Cmp::Eq => "=",
            Cmp::Ne => "<>",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }
}

/// A condition over one row.
#[derive(Debug, Clone)]
pub(crate) enum Pred {
    Const(Option<bool>),
    Cmp(Cmp, Expr, Expr),
    And(Box<Pred>, Box<Pred>),
    Or(Box<Pred>, Box<Pred>),
    Not(Box<Pred>),
    IsNull(Expr, bool),
    /// `e [NOT] LIKE pattern`.
    Like {
        expr: Expr,
        like: Box<Like>,
        negated: bool,
    },
    /// `e [NOT] REGEXP pattern`, `REGEXP_LIKE(e, pattern[, match_type])`.
    Regexp {
        expr: Expr,
        re: Box<Regexp>,
        negated: bool,
    },
    /// `e [NOT] IN (list)`: the list's non-null values, and whether it held NULL.
    In {
        expr: Expr,
        list: Vec<Datum>,
        has_null: bool,
        negated: bool,
    },
}

impl Pred {
    /// Adds the columns it reads to `out`.
    pub(crate) fn columns(&self, out: &mut Vec<u16>) {
        match self {
            Pred::Const(_) => {}
            Pred::Cmp(_, a, b) => {
                a.columns(out);
                b.columns(out);
            }
            Pred::And(a, b) | Pred::Or(a, b) => {
                a.columns(out);
                b.columns(out);
            }
            Pred::Not(p) => p.columns(out),
            Pred::IsNull(e, _)
            | Pred::In { expr: e, .. }
            | Pred::Like { expr: e, .. }
            | Pred::Regexp { expr: e, .. } => e.columns(out),
        }
    }

    pub(crate) fn test<'a>(&'a self, row: impl Fields<'a>) -> Result<Option<bool>, EvalError> {
        Ok(match self {
            Pred::Const(v) => *v,
            Pred::Cmp(op, a, b) => {
                let x = a.eval(row)?;
                if x.is_null() {
                    return Ok(None);
                }
                let y = b.eval(row)?;
                if y.is_null() {
                    return Ok(None);
                }
                compare(&x, &y).map(|ord| op.holds(ord))
            }
            Pred::And(a, b) => match a.test(row)? {
                Some(false) => Some(false),
                x => match (x, b.test(row)?) {
                    (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                },
            },
            Pred::Or(a, b) => match a.test(row)? {
                Some(true) => Some(true),
                x => match (x, b.test(row)?) {
                    (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                },
            },
            Pred::Not(p) => p.test(row)?.map(|v| !v),
            Pred::IsNull(e, negated) => Some(e.eval(row)?.is_null() != *negated),
            Pred::Like {
                expr,
                like,
                negated,
            } => {
                let x = expr.eval(row)?;
                if x.is_null() {
                    return Ok(None);
                }
                Some(like.matches_scalar(&x) != *negated)
            }
            Pred::Regexp { expr, re, negated } => {
                let x = expr.eval(row)?;
                if x.is_null() {
                    return Ok(None);
                }
                Some(re.matches_scalar(&x) != *negated)
            }
            Pred::In {
                expr,
                list,
                has_null,
                negated,
            } => {
                let x = expr.eval(row)?;
                if x.is_null() {
                    return Ok(None);
                }
                let found = list.iter().any(|v| compare(&x, v) == Some(Ordering::Equal));
                match (found, has_null) {
                    (true, _) => Some(!negated),
                    (false, true) => None,
                    (false, false) => Some(*negated),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_to_a_common_decimal_fails_rather_than_converting() {
        assert!(matches!(
            as_type(Scalar::Int(12), Ty::Decimal(2)),
            Ok(Scalar::Decimal(1200, 2))
        ));
        assert!(matches!(
            as_type(Scalar::Decimal(15, 1), Ty::Decimal(3)),
            Ok(Scalar::Decimal(1500, 3))
        ));
        // 10^9 with 30 decimals is 39 digits: an error, not a double.
        assert!(as_type(Scalar::Int(1_000_000_000), Ty::Decimal(30)).is_err());
        assert!(as_type(Scalar::Decimal(i128::MAX / 5, 0), Ty::Decimal(1)).is_err());
        assert!(as_type(Scalar::Decimal(1, 0), Ty::Decimal(39)).is_err());
    }

    #[test]
    fn integers_never_wrap() {
        let big = Scalar::Int(i128::from(u64::MAX));
        assert!(arith(Arith::Add, &big, &Scalar::Int(1)).is_err());
        assert!(arith(Arith::Mul, &big, &big).is_err());
        assert_eq!(
            arith(
                Arith::Sub,
                &Scalar::Int(i128::from(i64::MIN)),
                &Scalar::Int(0)
            ),
            Ok(Scalar::Int(i128::from(i64::MIN)))
        );
        assert!(negate(&Scalar::Int(i128::from(u64::MAX))).is_err());
    }

    #[test]
    fn decimals_are_exact_and_division_by_zero_is_null() {
        let a = Scalar::Decimal(1234, 2); // 12.34
        let b = Scalar::Decimal(5, 1); // 0.5
        assert_eq!(arith(Arith::Add, &a, &b), Ok(Scalar::Decimal(1284, 2)));
        assert_eq!(arith(Arith::Mul, &a, &b), Ok(Scalar::Decimal(6170, 3)));
        assert_eq!(
            arith(Arith::Sub, &Scalar::Int(1), &b),
            Ok(Scalar::Decimal(5, 1))
        );
        assert_eq!(arith(Arith::Div, &a, &Scalar::Int(0)), Ok(Scalar::Null));
        // Quotients of exact numbers are decimals with 4 more decimals
        // than the dividend, rounded half away from zero (MySQL's).
        let (one, two, three) = (Scalar::Int(1), Scalar::Int(2), Scalar::Int(3));
        assert_eq!(
            arith(Arith::Div, &one, &three),
            Ok(Scalar::Decimal(3333, 4))
        );
        assert_eq!(
            arith(Arith::Div, &two, &three),
            Ok(Scalar::Decimal(6667, 4))
        );
        assert_eq!(
            arith(Arith::Div, &negate(&two).unwrap(), &three),
            Ok(Scalar::Decimal(-6667, 4))
        );
        assert_eq!(
            arith(Arith::Div, &Scalar::Decimal(2103, 2), &three),
            Ok(Scalar::Decimal(7_010_000, 6))
        );
        assert_eq!(
            arith(Arith::Div, &one, &Scalar::Decimal(-8, 1)),
            Ok(Scalar::Decimal(-12_500, 4))
        );
        assert_eq!(
            Arith::Div.result(Ty::Int, Ty::Decimal(2)),
            Some(Ty::Decimal(4))
        );
        assert_eq!(
            arith(Arith::Mod, &Scalar::Int(7), &Scalar::Int(0)),
            Ok(Scalar::Null)
        );
        assert_eq!(
            arith(Arith::Mod, &Scalar::Int(-7), &Scalar::Int(3)),
            Ok(Scalar::Int(-1))
        );
        assert_eq!(
            compare(&Scalar::Decimal(1000, 2), &Scalar::Int(10)),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare(&Scalar::Double(0.5), &Scalar::Decimal(5, 1)),
            Some(Ordering::Equal)
        );
    }
}
