//! MySQL's time functions and date arithmetic on constants, worked out
//! before a statement is planned: `NOW()`, `CURRENT_TIMESTAMP`,
//! `CURDATE()`, `UTC_TIMESTAMP()`, `UNIX_TIMESTAMP()`, `d ± INTERVAL n
//! unit`, `DATE_ADD`/`DATE_SUB`. Each becomes the constant it is — a
//! `DATE '…'` or `DATETIME '…'` literal, or a number — so that the planners
//! take it wherever they take a constant (VALUES, WHERE, SET, a SELECT
//! without a table).
//!
//! As in MySQL, every use within one statement reads the same instant, the
//! statement's start, and a prepared statement reads it anew at each
//! execute (its plan is not kept: it is folded when bound). The session's
//! time zone is UTC, the only one Shoal keeps, so `NOW()` and
//! `UTC_TIMESTAMP()` agree.

use std::ops::ControlFlow;

use sqlparser::ast::{
    self, BinaryOperator, DataType, DateTimeField, Expr, FunctionArg, FunctionArgExpr,
    FunctionArguments, OnInsert, SelectItem, SetExpr, Statement, TypedString, VisitMut,
    visit_expressions_mut,
};
use sqlparser::tokenizer::Token;

use super::error::MyError;
use super::query::literal;
use super::value::Lit;
use crate::types::value::{Date, DateTime, MICROS_PER_DAY, MICROS_PER_SECOND, WithFsp, now_micros};

/// The most fractional-second digits MySQL's time functions take.
const MAX_FSP: u8 = 6;

/// The words a statement holds if it has anything to fold: a statement
/// without one is not walked.
const WORDS: [&str; 14] = [
    "NOW",
    "CURRENT_TIMESTAMP",
    "LOCALTIME",
    "LOCALTIMESTAMP",
    "UTC_TIMESTAMP",
    "CURDATE",
    "CURRENT_DATE",
    "UTC_DATE",
    "UNIX_TIMESTAMP",
    "DATE_ADD",
    "DATE_SUB",
    "ADDDATE",
    "SUBDATE",
    "INTERVAL",
];

/// The time functions MySQL reserves as words, and so takes without
/// parentheses (`SELECT UTC_TIMESTAMP`).
const RESERVED: [&str; 6] = [
    "CURRENT_TIMESTAMP",
    "CURRENT_DATE",
    "LOCALTIME",
    "LOCALTIMESTAMP",
    "UTC_TIMESTAMP",
    "UTC_DATE",
];

/// Whether a statement's tokens name a time function or an interval.
pub(crate) fn may_fold(tokens: &[Token]) -> bool {
    tokens.iter().any(|t| match t {
        Token::Word(w) if w.quote_style.is_none() => {
            WORDS.iter().any(|k| k.eq_ignore_ascii_case(&w.value))
        }
        _ => false,
    })
}

/// A constant date or date-time: what `NOW()` or `DATE '…'` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Moment {
    Date(Date),
    /// Microseconds since 1970-01-01 00:00:00 (in the session's zone, UTC),
    /// and the fractional-second digits it has.
    DateTime(i64, u8),
}

impl Moment {
    /// The moment a `DATE '…'`, `DATETIME '…'` or `TIMESTAMP '…'` literal
    /// writes; `None` for another kind of typed literal, error 1525 for text
    /// that is not one.
    pub(crate) fn of_typed(t: &TypedString) -> Option<Result<Moment, MyError>> {
        let date = match t.data_type {
            DataType::Date => true,
            DataType::Datetime(_) | DataType::Timestamp(..) => false,
            _ => return None,
        };
        let text = match &t.value.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s,
            _ => return None,
        };
        let kind = if date { "DATE" } else { "DATETIME" };
        Some(Moment::parse(text, date).ok_or_else(|| {
            MyError::new(
                1525,
                "HY000",
                format!("Incorrect {kind} value: '{}'", text.escape_debug()),
            )
        }))
    }

    /// `YYYY-MM-DD` as a date, `YYYY-MM-DD HH:MM:SS[.f…]` as a date-time.
    fn parse(text: &str, date: bool) -> Option<Moment> {
        if date {
            return Date::parse(text).ok().map(Moment::Date);
        }
        let t = DateTime::parse(text).ok()?;
        let fsp = text
            .trim()
            .split_once('.')
            .map_or(0, |(_, f)| f.len() as u8);
        Some(Moment::DateTime(t.0, fsp))
    }

    /// The moment a constant operand of date arithmetic is: a typed
    /// literal, or a string written as a date or a date-time (as MySQL
    /// reads `DATE_ADD('2024-01-31', …)`).
    fn of_operand(e: &Expr) -> Option<Result<Moment, MyError>> {
        match e {
            Expr::Nested(inner) => Moment::of_operand(inner),
            Expr::TypedString(t) => Moment::of_typed(t),
            Expr::Value(v) => match &v.value {
                ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => {
                    let date = s.trim().len() <= 10;
                    Moment::parse(s, date).map(Ok)
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// The moment as MySQL writes it: `YYYY-MM-DD`, or `YYYY-MM-DD
    /// HH:MM:SS` and its fractional digits.
    pub(crate) fn text(&self) -> String {
        match *self {
            Moment::Date(d) => d.to_string(),
            Moment::DateTime(micros, fsp) => WithFsp(micros, fsp).to_string(),
        }
    }

    /// The moment as a typed literal, which the planners take as a constant.
    fn expr(&self) -> Expr {
        Expr::TypedString(TypedString {
            data_type: match self {
                Moment::Date(_) => DataType::Date,
                Moment::DateTime(..) => DataType::Datetime(None),
            },
            value: ast::Value::SingleQuotedString(self.text()).with_empty_span(),
            uses_odbc_syntax: false,
        })
    }

    /// `self + n unit`, as MySQL's `DATE_ADD`: a date stays a date unless
    /// the unit is finer than a day; months past a shorter month's end cut
    /// the day to it. Error 1441 outside 0001-01-01 to 9999-12-31.
    fn plus(self, n: i64, unit: Unit) -> Result<Moment, MyError> {
        let (day, in_day, fsp) = match self {
            Moment::Date(d) => (d, None, 0),
            Moment::DateTime(micros, fsp) => (
                Date(micros.div_euclid(MICROS_PER_DAY) as i32),
                Some(micros.rem_euclid(MICROS_PER_DAY)),
                fsp,
            ),
        };
        let whole_days = |day: Option<Date>| -> Result<Moment, MyError> {
            let day = day.ok_or_else(overflow)?;
            Ok(match in_day {
                None => Moment::Date(day),
                Some(t) => Moment::DateTime(i64::from(day.0) * MICROS_PER_DAY + t, fsp),
            })
        };
        match unit {
            Unit::Months(per) => whole_days(n.checked_mul(per).and_then(|m| day.plus_months(m))),
            Unit::Days(per) => whole_days(n.checked_mul(per).and_then(|d| day.plus_days(d))),
            Unit::Micros(per) => {
                let micros = (i64::from(day.0) * MICROS_PER_DAY)
                    .checked_add(in_day.unwrap_or(0))
                    .and_then(|start| start.checked_add(n.checked_mul(per)?))
                    .filter(|&m| crate::types::value::micros_in_range(m))
                    .ok_or_else(overflow)?;
                let fsp = if per == 1 { MAX_FSP } else { fsp };
                Ok(Moment::DateTime(micros, fsp))
            }
        }
    }
}

/// 1441: date arithmetic left 0001-01-01 to 9999-12-31 (MySQL answers
/// NULL with this as a warning).
fn overflow() -> MyError {
    MyError::new(1441, "22008", "Datetime function: datetime field overflow")
}

/// An interval's unit, as a count of months, days or microseconds.
#[derive(Debug, Clone, Copy)]
enum Unit {
    Months(i64),
    Days(i64),
    Micros(i64),
}

/// The instant a statement reads, taken when first asked for.
struct Now(Option<i64>);

impl Now {
    fn micros(&mut self) -> i64 {
        *self.0.get_or_insert_with(now_micros)
    }
}

/// Works out `statement`'s time functions and date arithmetic on
/// constants, in the parts that take constants: the values an INSERT
/// gives and its ON DUPLICATE KEY UPDATE sets, an UPDATE's SET, every
/// WHERE and HAVING, and the outputs of a SELECT without a table (each
/// keeping the name it was written with, `NOW()`). A schema's `DEFAULT
/// CURRENT_TIMESTAMP` is not a value now, and is left as it is. Answers
/// the instant the statement read, if it read one.
pub(crate) fn fold(statement: &mut Statement) -> Result<Option<i64>, MyError> {
    let mut now = Now(None);
    match fold_statement(statement, &mut now) {
        ControlFlow::Continue(()) => Ok(now.0),
        ControlFlow::Break(e) => Err(e),
    }
}

fn fold_statement(statement: &mut Statement, now: &mut Now) -> ControlFlow<MyError> {
    match statement {
        Statement::Query(q) => fold_query(q, now),
        Statement::Insert(insert) => {
            if let Some(source) = &mut insert.source {
                fold_query(source, now)?;
            }
            match &mut insert.on {
                Some(OnInsert::DuplicateKeyUpdate(set)) => walk(set, now),
                _ => ControlFlow::Continue(()),
            }
        }
        Statement::Update {
            assignments,
            selection,
            ..
        } => {
            walk(assignments, now)?;
            walk(selection, now)
        }
        Statement::Delete(delete) => walk(&mut delete.selection, now),
        _ => ControlFlow::Continue(()),
    }
}

fn fold_query(q: &mut ast::Query, now: &mut Now) -> ControlFlow<MyError> {
    match q.body.as_mut() {
        SetExpr::Values(values) => walk(&mut values.rows, now),
        SetExpr::Select(select) => {
            if select.from.is_empty() {
                for item in &mut select.projection {
                    if let SelectItem::UnnamedExpr(e) = item {
                        let written = e.to_string();
                        walk(e, now)?;
                        if e.to_string() != written {
                            let expr = std::mem::replace(e, Expr::value(ast::Value::Null));
                            *item = SelectItem::ExprWithAlias {
                                expr,
                                alias: ast::Ident::new(written),
                            };
                        }
                    } else {
                        walk(item, now)?;
                    }
                }
            }
            walk(&mut select.selection, now)?;
            walk(&mut select.having, now)
        }
        _ => ControlFlow::Continue(()),
    }
}

/// Folds every expression of `v`, innermost first.
fn walk<V: VisitMut>(v: &mut V, now: &mut Now) -> ControlFlow<MyError> {
    visit_expressions_mut(v, |e| match fold_expr(e, now) {
        Ok(()) => ControlFlow::Continue(()),
        Err(err) => ControlFlow::Break(err),
    })
}

/// Replaces `e` by its constant if it is a time function or date
/// arithmetic on constants (its operands already folded); anything else
/// is left for the planners to take or refuse.
fn fold_expr(e: &mut Expr, now: &mut Now) -> Result<(), MyError> {
    let folded = match e {
        Expr::Function(f) => function(&f.name.to_string(), arguments(f), now)?,
        // MySQL's reserved words for the time, without parentheses.
        Expr::Identifier(i)
            if i.quote_style.is_none()
                && RESERVED.iter().any(|w| w.eq_ignore_ascii_case(&i.value)) =>
        {
            function(&i.value, None, now)?
        }
        Expr::BinaryOp { left, op, right } => {
            let sign = match op {
                BinaryOperator::Plus => 1,
                BinaryOperator::Minus => -1,
                _ => return Ok(()),
            };
            // `d + INTERVAL …`, `d - INTERVAL …`, `INTERVAL … + d`.
            let (moment, interval, sign) = match (left.as_ref(), right.as_ref()) {
                (m, Expr::Interval(i)) => (m, i, sign),
                (Expr::Interval(i), m) if sign == 1 => (m, i, 1),
                _ => return Ok(()),
            };
            match Moment::of_operand(moment) {
                Some(m) => Some(shifted(m?, interval_of(interval)?, sign)?),
                None => None,
            }
        }
        _ => None,
    };
    if let Some(folded) = folded {
        *e = folded;
    }
    Ok(())
}

/// The constant the time function `name` of `args` (`None`: written
/// without parentheses) is, if it is one Shoal works out.
fn function(name: &str, args: Option<Vec<&Expr>>, now: &mut Now) -> Result<Option<Expr>, MyError> {
    let name = name.to_ascii_uppercase();
    Ok(Some(match name.as_str() {
        "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIME" | "LOCALTIMESTAMP" | "UTC_TIMESTAMP" => {
            let fsp = time_precision(&name, args.as_deref())?;
            let unit = 10i64.pow(u32::from(MAX_FSP - fsp));
            let micros = now.micros();
            Moment::DateTime(micros - micros.rem_euclid(unit), fsp).expr()
        }
        "CURDATE" | "CURRENT_DATE" | "UTC_DATE" => match args.as_deref() {
            Some([]) | None => {
                Moment::Date(Date(now.micros().div_euclid(MICROS_PER_DAY) as i32)).expr()
            }
            Some(_) => return Err(arity(&name)),
        },
        "UNIX_TIMESTAMP" => match args.as_deref() {
            Some([]) | None => number((now.micros() / MICROS_PER_SECOND).to_string()),
            Some([d]) => match Moment::of_operand(d) {
                Some(m) => number(seconds(m?)),
                None => return Ok(None),
            },
            Some(_) => return Err(arity(&name)),
        },
        "DATE_ADD" | "DATE_SUB" | "ADDDATE" | "SUBDATE" => {
            let Some([d, by]) = args.as_deref() else {
                return Err(arity(&name));
            };
            let Some(moment) = Moment::of_operand(d) else {
                return Ok(None);
            };
            let sign = if name.contains("SUB") { -1 } else { 1 };
            let by = match by {
                Expr::Interval(i) => interval_of(i)?,
                // ADDDATE(d, n) and SUBDATE(d, n): n days.
                n if name.ends_with("DATE") => (count(n, &name)?, Unit::Days(1)),
                _ => {
                    return Err(MyError::syntax(format!(
                        "{name} takes a date and an INTERVAL"
                    )));
                }
            };
            shifted(moment?, by, sign)?
        }
        _ => return Ok(None),
    }))
}

/// Whether a column's `DEFAULT` or `ON UPDATE` is the time of the write
/// (`CURRENT_TIMESTAMP`, `NOW()`, `LOCALTIME`, `LOCALTIMESTAMP`, with the
/// column's fractional-second digits if it has any, as MySQL asks); 1067
/// for one of them on a column that is not a DATETIME or TIMESTAMP of
/// those digits.
pub(crate) fn is_now(e: &Expr, column: &shoal_wire::schema::ColumnDef) -> Result<bool, MyError> {
    let (name, args) = match e {
        Expr::Function(f) => (f.name.to_string(), arguments(f)),
        Expr::Identifier(i) if i.quote_style.is_none() => (i.value.clone(), None),
        _ => return Ok(false),
    };
    let name = name.to_ascii_uppercase();
    if !matches!(
        name.as_str(),
        "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIME" | "LOCALTIMESTAMP"
    ) {
        return Ok(false);
    }
    let fsp = time_precision(&name, args.as_deref())?;
    use shoal_wire::schema::ColumnType;
    match column.column_type {
        ColumnType::DateTime { fsp: f } | ColumnType::Timestamp { fsp: f } if f == fsp => Ok(true),
        _ => Err(super::ddl::invalid_default(column)),
    }
}

/// The plain arguments of `f`, `None` if it was written without
/// parentheses (`CURRENT_TIMESTAMP`).
fn arguments(f: &ast::Function) -> Option<Vec<&Expr>> {
    match &f.args {
        FunctionArguments::None => None,
        FunctionArguments::List(l) => Some(
            l.args
                .iter()
                .filter_map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                    _ => None,
                })
                .collect(),
        ),
        FunctionArguments::Subquery(_) => Some(Vec::new()),
    }
}

fn arity(name: &str) -> MyError {
    MyError::new(
        1582,
        "42000",
        format!("Incorrect parameter count in the call to native function '{name}'"),
    )
}

/// The fractional-second digits `NOW(fsp)` and its kin are asked for: 0
/// without an argument.
fn time_precision(name: &str, args: Option<&[&Expr]>) -> Result<u8, MyError> {
    match args {
        Some([]) | None => Ok(0),
        Some([p]) => precision(p, name),
        Some(_) => Err(arity(name)),
    }
}

/// A time function's fractional-second digits: a whole number, 0 to 6.
fn precision(e: &Expr, name: &str) -> Result<u8, MyError> {
    match literal(e)? {
        Some(Lit::Int(p @ 0..=6)) => Ok(p as u8),
        Some(Lit::Int(7..) | Lit::UInt(_)) => Err(MyError::new(
            1426,
            "42000",
            format!("Too-big precision {e} specified for '{name}'. Maximum is {MAX_FSP}."),
        )),
        _ => Err(MyError::syntax(format!(
            "{name}() takes its fractional-second digits as a whole number, 0 to 6"
        ))),
    }
}

/// An interval's count and unit: `INTERVAL n unit`, n a whole number
/// (or a string of one), unit one of MySQL's single units.
fn interval_of(i: &ast::Interval) -> Result<(i64, Unit), MyError> {
    const DAY: i64 = 1;
    let unit = match &i.leading_field {
        _ if i.last_field.is_some() => None,
        Some(DateTimeField::Microsecond) => Some(Unit::Micros(1)),
        Some(DateTimeField::Second) => Some(Unit::Micros(MICROS_PER_SECOND)),
        Some(DateTimeField::Minute) => Some(Unit::Micros(60 * MICROS_PER_SECOND)),
        Some(DateTimeField::Hour) => Some(Unit::Micros(3600 * MICROS_PER_SECOND)),
        Some(DateTimeField::Day) => Some(Unit::Days(DAY)),
        Some(DateTimeField::Week(None)) => Some(Unit::Days(7 * DAY)),
        Some(DateTimeField::Month) => Some(Unit::Months(1)),
        Some(DateTimeField::Quarter) => Some(Unit::Months(3)),
        Some(DateTimeField::Year) => Some(Unit::Months(12)),
        _ => None,
    };
    let unit = unit.ok_or_else(|| MyError::unsupported(format!("the interval '{i}'")))?;
    Ok((count(&i.value, "INTERVAL")?, unit))
}

/// A whole number an interval counts: a literal or a string of one.
fn count(e: &Expr, what: &str) -> Result<i64, MyError> {
    let n = match literal(e)? {
        Some(Lit::Int(n)) => Some(n),
        Some(Lit::Str(s)) => std::str::from_utf8(&s)
            .ok()
            .and_then(|s| s.trim().parse().ok()),
        _ => None,
    };
    n.ok_or_else(|| {
        MyError::unsupported(format!(
            "{what} of '{e}' (a whole number of a unit is taken)"
        ))
    })
}

fn shifted(m: Moment, (n, unit): (i64, Unit), sign: i64) -> Result<Expr, MyError> {
    let n = n
        .checked_mul(sign)
        .ok_or_else(|| MyError::new(1441, "22008", "Datetime function: datetime field overflow"))?;
    Ok(m.plus(n, unit)?.expr())
}

/// Seconds since 1970-01-01 00:00:00 UTC, with the moment's fractional
/// digits, as `UNIX_TIMESTAMP(d)` gives them.
fn seconds(m: Moment) -> String {
    let (micros, fsp) = match m {
        Moment::Date(d) => (i64::from(d.0) * MICROS_PER_DAY, 0),
        Moment::DateTime(micros, fsp) => (micros, fsp),
    };
    let whole = micros.div_euclid(MICROS_PER_SECOND);
    if fsp == 0 {
        return whole.to_string();
    }
    let frac = micros.rem_euclid(MICROS_PER_SECOND) / 10i64.pow(u32::from(MAX_FSP - fsp));
    format!("{whole}.{frac:0width$}", width = usize::from(fsp))
}

fn number(text: String) -> Expr {
    Expr::value(ast::Value::Number(text, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    /// `sql` (a SELECT without a table) folded, its first output written.
    fn folded(sql: &str) -> Result<String, MyError> {
        let mut s = Parser::parse_sql(&MySqlDialect {}, sql)
            .expect("parses")
            .remove(0);
        fold(&mut s)?;
        let Statement::Query(q) = s else { panic!() };
        let SetExpr::Select(select) = *q.body else {
            panic!()
        };
        Ok(match &select.projection[0] {
            SelectItem::ExprWithAlias { expr, .. } | SelectItem::UnnamedExpr(expr) => {
                expr.to_string()
            }
            other => other.to_string(),
        })
    }

    #[test]
    fn date_arithmetic_is_mysqls() {
        let cases = [
            ("DATE '2024-01-31' + INTERVAL 1 MONTH", "DATE '2024-02-29'"),
            (
                "DATE_ADD('2023-01-31', INTERVAL 1 MONTH)",
                "DATE '2023-02-28'",
            ),
            (
                "DATE_SUB(DATE '2024-03-31', INTERVAL 1 QUARTER)",
                "DATE '2023-12-31'",
            ),
            ("DATE '2024-02-29' + INTERVAL 1 YEAR", "DATE '2025-02-28'"),
            ("DATE '2024-12-31' + INTERVAL 1 DAY", "DATE '2025-01-01'"),
            ("INTERVAL 2 WEEK + DATE '2024-12-31'", "DATE '2025-01-14'"),
            (
                "DATE '2024-01-01' - INTERVAL 1 SECOND",
                "DATETIME '2023-12-31 23:59:59'",
            ),
            (
                "TIMESTAMP '2024-01-01 10:00:00.5' + INTERVAL 1 HOUR",
                "DATETIME '2024-01-01 11:00:00.5'",
            ),
            (
                "DATE_ADD('2024-01-01 00:00:00', INTERVAL 1 MICROSECOND)",
                "DATETIME '2024-01-01 00:00:00.000001'",
            ),
            ("ADDDATE('2024-01-01', 10)", "DATE '2024-01-11'"),
            (
                "SUBDATE('2024-01-01', INTERVAL '-1' DAY)",
                "DATE '2024-01-02'",
            ),
            ("UNIX_TIMESTAMP('1970-01-02 00:00:01.25')", "86401.25"),
            ("UNIX_TIMESTAMP(DATE '1969-12-31')", "-86400"),
        ];
        for (sql, want) in cases {
            assert_eq!(folded(&format!("SELECT {sql}")).unwrap(), want, "{sql}");
        }
    }

    #[test]
    fn out_of_range_and_bad_arguments_are_errors() {
        for (sql, code) in [
            ("DATE '9999-12-31' + INTERVAL 1 DAY", 1441),
            ("DATE '0001-01-01' - INTERVAL 1 MONTH", 1441),
            (
                "DATE '2024-01-01' + INTERVAL 9223372036854775807 YEAR",
                1441,
            ),
            (
                "DATE '2024-01-01' - INTERVAL -9223372036854775808 DAY",
                1441,
            ),
            ("DATE '2024-02-30'", 1525),
            ("DATE_ADD(DATE 'x', INTERVAL 1 DAY)", 1525),
            ("NOW(7)", 1426),
            ("NOW(1, 2)", 1582),
            ("NOW('a')", 1064),
            ("CURDATE(1)", 1582),
            ("DATE '2024-01-01' + INTERVAL 1.5 DAY", 1235),
        ] {
            let err = folded(&format!("SELECT {sql}")).map(|_| ()).err();
            let err = match err {
                Some(e) => e,
                None => match literal_of(sql) {
                    Err(e) => e,
                    Ok(()) => panic!("{sql}: no error"),
                },
            };
            assert_eq!(err.code, code, "{sql}: {err:?}");
        }
    }

    /// A typed literal left as it is by folding is checked when read.
    fn literal_of(sql: &str) -> Result<(), MyError> {
        let mut s = Parser::parse_sql(&MySqlDialect {}, &format!("SELECT {sql}")).unwrap();
        let Statement::Query(q) = s.remove(0) else {
            panic!()
        };
        let SetExpr::Select(select) = *q.body else {
            panic!()
        };
        let SelectItem::UnnamedExpr(e) = &select.projection[0] else {
            panic!()
        };
        literal(e).map(|_| ())
    }

    #[test]
    fn one_instant_per_statement_truncated_to_its_digits() {
        let mut s = Parser::parse_sql(
            &MySqlDialect {},
            "SELECT NOW(), CURRENT_TIMESTAMP(6), UTC_TIMESTAMP, CURDATE(), UNIX_TIMESTAMP()",
        )
        .unwrap()
        .remove(0);
        fold(&mut s).unwrap();
        let Statement::Query(q) = s else { panic!() };
        let SetExpr::Select(select) = *q.body else {
            panic!()
        };
        let out: Vec<(String, String)> = (select.projection.iter())
            .map(|item| match item {
                SelectItem::ExprWithAlias { expr, alias } => {
                    (alias.value.clone(), expr.to_string())
                }
                other => panic!("{other}"),
            })
            .collect();
        let text = |i: usize| out[i].1.split('\'').nth(1).unwrap_or(&out[i].1).to_owned();
        assert_eq!(out[0].0, "NOW()");
        assert_eq!(out[2].0, "UTC_TIMESTAMP");
        let (now, micro) = (text(0), text(1));
        assert_eq!(now.len(), 19, "{now}");
        assert!(
            micro.starts_with(&now) && micro.len() == 26,
            "{micro} / {now}"
        );
        assert_eq!(text(2), now);
        assert_eq!(text(3), now[..10]);
        let unix: i64 = out[4].1.parse().unwrap();
        let back = WithFsp(unix * MICROS_PER_SECOND, 0).to_string();
        assert_eq!(back, now);
    }

    #[test]
    fn a_schema_default_and_unknown_functions_are_left_alone() {
        let sql = "CREATE TABLE t (a INT PRIMARY KEY, b DATETIME DEFAULT CURRENT_TIMESTAMP)";
        let mut s = Parser::parse_sql(&MySqlDialect {}, sql).unwrap().remove(0);
        fold(&mut s).unwrap();
        assert_eq!(s.to_string(), sql);
        assert_eq!(folded("SELECT SYSDATE()").unwrap(), "SYSDATE()");
        assert_eq!(
            folded("SELECT DATE_ADD(c, INTERVAL 1 DAY)").unwrap(),
            "DATE_ADD(c, INTERVAL 1 DAY)"
        );
    }
}
