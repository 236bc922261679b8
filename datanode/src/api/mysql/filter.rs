//! WHERE clauses and UPDATE's SET expressions over a table's rows, as the
//! front end evaluates them on rows a scan or a lookup brought back.
//!
//! A condition compares a column with constants (`=`, `<>`, `<`, `<=`,
//! `>`, `>=`, `BETWEEN`, `IN`, `IS [NOT] NULL`, `LIKE`), joined by AND, OR
//! and NOT, with SQL's three values: a comparison with NULL is unknown, and a
//! row passes only when its condition is true. The constants are the
//! column's values, checked as any value written to it is. From a
//! condition, `bounds` finds the range of an ordered index its rows lie
//! in; the condition is still checked on every row the range gives.
//!
//! A SET expression is a column's new value from constants and the row's
//! own columns with `+`, `-` and `*` (`k = k + 1`); integer arithmetic is
//! checked, never wrapped, and the result must fit the column. In an
//! ON DUPLICATE KEY UPDATE it may also read the row the INSERT gave.

use std::cmp::Ordering;
use std::sync::Arc;

use shoal_wire::schema::ColumnType;
use sqlparser::ast::{self, BinaryOperator, Expr, UnaryOperator};

use super::error::MyError;
use super::query::{column_of, compare, literal, position};
use super::value::{Comparand, Lit, comparand, to_value};
use crate::sql::eval::{self, Cmp, Pred, Ty, Values};
use crate::sql::like::{Like, escape_of};
use crate::sql::{Class, SqlError};
use crate::storage::codec;
use crate::storage::layout::Layout;
use crate::tc::Table;
use crate::types::value::{Date, DateTime, MICROS_PER_DAY, POW10, Value};

/// Most values an IN list of a condition holds.
const MAX_IN_LIST: usize = 10_000;

/// What a condition is over: columns by name, and how a constant becomes
/// a column's value.
pub(crate) trait Columns {
    /// The column `e` names.
    fn column(&self, e: &Expr) -> Result<usize, MyError>;
    /// Constant `lit` as a value of column `column` to compare its values
    /// with, checked; refused as unsupported where it is compared
    /// otherwise (a number no value of the column is: as numbers are,
    /// by the condition as an expression over each row).
    fn value(&self, column: usize, lit: &Lit) -> Result<Value, MyError>;
    /// Column `column`'s type, where it is a stored table's.
    fn column_type(&self, _column: usize) -> Option<ColumnType> {
        None
    }

    /// Condition `e` as an expression over each row (`a * 2 > b`), where
    /// the relation's rows can be read so; `None` where they cannot.
    fn pred(&self, _e: &Expr) -> Option<Result<RowPred, MyError>> {
        None
    }
}

impl Columns for Table {
    fn column(&self, e: &Expr) -> Result<usize, MyError> {
        column_of(self, e, "where clause")
    }

    fn value(&self, column: usize, lit: &Lit) -> Result<Value, MyError> {
        match comparand(lit, &self.def().columns[column])? {
            Comparand::Value(v) => Ok(v),
            // Compared as numbers are, by the condition as an expression
            // over each row (`qty > 998.5`).
            Comparand::Beyond => Err(MyError::unsupported("a number beyond the column's values")),
        }
    }

    fn column_type(&self, column: usize) -> Option<ColumnType> {
        Some(self.def().columns[column].column_type)
    }

    fn pred(&self, e: &Expr) -> Option<Result<RowPred, MyError>> {
        let pred = crate::tc::ronsql::plan::row_pred(self, e).map_err(MyError::from);
        Some(pred.map(|pred| RowPred {
            pred,
            layout: Arc::clone(&self.layout),
        }))
    }
}

/// A condition over a table's row as an expression (`a * 2 > b`).
#[derive(Debug, Clone)]
pub(crate) struct RowPred {
    pred: Pred,
    layout: Arc<Layout>,
}

impl RowPred {
    fn columns(&self, out: &mut Vec<u16>) {
        self.pred.columns(out);
    }

    fn test(&self, values: &[Value]) -> Result<Option<bool>, MyError> {
        let row = Values {
            layout: &self.layout,
            values,
        };
        Ok(self.pred.test(row)?)
    }
}

/// A DATE column's comparison with a constant date-time that has a time
/// of day (`d < NOW()`): the moment, if that is what `lit` is.
fn day_and_time(table: &impl Columns, c: usize, lit: &Lit) -> Option<i64> {
    let Lit::Str(s) = lit else {
        return None;
    };
    if table.column_type(c) != Some(ColumnType::Date) {
        return None;
    }
    let t = DateTime::parse(std::str::from_utf8(s).ok()?).ok()?;
    (t.0.rem_euclid(MICROS_PER_DAY) != 0).then_some(t.0)
}

/// `d cmp t` for a DATE column `d` and a date-time `t` with a time of day,
/// as MySQL compares them: the date as its midnight. No date equals `t`;
/// every date up to `t`'s own day is before it, every later one after.
fn date_against(c: usize, cmp: Cmp, t: i64) -> Cond {
    let day = Value::Date(Date(t.div_euclid(MICROS_PER_DAY) as i32));
    let at_most = Cond::Compare(c, Cmp::Le, day.clone());
    let after = Cond::Compare(c, Cmp::Gt, day);
    match cmp {
        Cmp::Lt | Cmp::Le => at_most,
        Cmp::Gt | Cmp::Ge => after,
        // Never true, and unknown for NULL (so that NOT keeps it unknown).
        Cmp::Eq => Cond::And(vec![at_most, after]),
        Cmp::Ne => Cond::Or(vec![at_most, after]),
    }
}

/// A WHERE clause, its constants converted to their columns' values.
#[derive(Debug, Clone)]
pub(crate) enum Cond {
    Compare(usize, Cmp, Value),
    Null(usize),
    In(usize, Vec<Value>),
    Like(usize, Like),
    /// Any other condition, an expression over the table's row.
    Pred(Box<RowPred>),
    And(Vec<Cond>),
    Or(Vec<Cond>),
    Not(Box<Cond>),
}

impl Cond {
    /// Adds the columns it reads to `out`.
    pub(crate) fn columns(&self, out: &mut Vec<u16>) {
        match self {
            Cond::Compare(c, ..) | Cond::Null(c) | Cond::In(c, _) | Cond::Like(c, _) => {
                out.push(*c as u16)
            }
            Cond::Pred(p) => p.columns(out),
            Cond::And(all) | Cond::Or(all) => all.iter().for_each(|c| c.columns(out)),
            Cond::Not(c) => c.columns(out),
        }
    }

    /// The condition `e` over the rows of `table` (a table's, or any
    /// other relation's): a column compared with constants where it is
    /// one, else (on a table) an expression over each row.
    pub(crate) fn of(table: &impl Columns, e: &Expr) -> Result<Cond, MyError> {
        match Cond::simple(table, e) {
            Err(refused) if refused.is_unsupported() => match table.pred(e) {
                None => Err(refused),
                Some(Ok(p)) => Ok(Cond::Pred(Box::new(p))),
                // Expressions have no LIKE: the first refusal names what
                // LIKE lacks; of anything else, the expression's.
                Some(Err(_)) if matches!(e, Expr::Like { .. }) => Err(refused),
                Some(Err(e)) => Err(e),
            },
            simple => simple,
        }
    }

    /// The condition `e` as columns compared with constants.
    fn simple(table: &impl Columns, e: &Expr) -> Result<Cond, MyError> {
        let constant = |e: &Expr| -> Result<Lit, MyError> {
            match literal(e)? {
                Some(Lit::Param(_)) => Err(MyError::bad_arguments("a ? was given no value")),
                Some(lit) => Ok(lit),
                None => Err(MyError::unsupported(format!(
                    "comparing a column with '{e}' (only with constants)"
                ))),
            }
        };
        let value = |column: usize, e: &Expr| table.value(column, &constant(e)?);
        let compare = |c: usize, cmp: Cmp, e: &Expr| -> Result<Cond, MyError> {
            let lit = constant(e)?;
            Ok(match day_and_time(table, c, &lit) {
                Some(t) => date_against(c, cmp, t),
                None => Cond::Compare(c, cmp, table.value(c, &lit)?),
            })
        };
        Ok(match e {
            Expr::Nested(inner) => Cond::of(table, inner)?,
            Expr::BinaryOp { left, op, right } => {
                if matches!(op, BinaryOperator::And | BinaryOperator::Or) {
                    let (l, r) = (Cond::of(table, left)?, Cond::of(table, right)?);
                    return Ok(if *op == BinaryOperator::And {
                        Cond::And(vec![l, r])
                    } else {
                        Cond::Or(vec![l, r])
                    });
                }
                let cmp = Cmp::of(op).ok_or_else(|| {
                    MyError::unsupported(format!("the operator {op} in a WHERE clause"))
                })?;
                match (table.column(left), table.column(right)) {
                    (Ok(c), _) => compare(c, cmp, right)?,
                    (Err(_), Ok(c)) => compare(c, cmp.flip(), left)?,
                    // An unknown column says so, whichever side it is on.
                    (Err(l), Err(r)) => return Err(if r.is_unsupported() { l } else { r }),
                }
            }
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let c = table.column(expr)?;
                let between =
                    Cond::And(vec![compare(c, Cmp::Ge, low)?, compare(c, Cmp::Le, high)?]);
                between.negated_if(*negated)
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let c = table.column(expr)?;
                if list.len() > MAX_IN_LIST {
                    return Err(MyError::new(
                        1105,
                        "HY000",
                        format!(
                            "an IN list has at most {MAX_IN_LIST} values; this one has {}",
                            list.len()
                        ),
                    ));
                }
                let values = (list.iter().map(|e| value(c, e))).collect::<Result<_, _>>()?;
                Cond::In(c, values).negated_if(*negated)
            }
            Expr::Like {
                negated,
                any: false,
                expr,
                pattern,
                escape_char,
            } => {
                let c = table.column(expr)?;
                Cond::like(table, c, pattern, escape_char.as_ref())?.negated_if(*negated)
            }
            Expr::IsNull(e) => Cond::Null(table.column(e)?),
            Expr::IsNotNull(e) => Cond::Not(Box::new(Cond::Null(table.column(e)?))),
            Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr,
            } => Cond::Not(Box::new(Cond::of(table, expr)?)),
            other => {
                return Err(MyError::unsupported(format!(
                    "the condition '{}' (comparisons of columns with constants only)",
                    other.to_string().chars().take(64).collect::<String>()
                )));
            }
        })
    }

    /// NOT this, if `negated`.
    fn negated_if(self, negated: bool) -> Cond {
        if negated {
            Cond::Not(Box::new(self))
        } else {
            self
        }
    }

    /// `column LIKE pattern [ESCAPE e]`; with a prefix before its first
    /// wildcard, on a text column, also the range of an ordered index
    /// that prefix puts the rows in (`name LIKE 'ab%'`: from `ab` to `ac`).
    fn like(
        table: &impl Columns,
        column: usize,
        pattern: &Expr,
        escape: Option<&ast::Value>,
    ) -> Result<Cond, MyError> {
        let ty = table.column_type(column);
        if matches!(ty, Some(ColumnType::Float | ColumnType::Double)) {
            return Err(MyError::unsupported("LIKE on a FLOAT or DOUBLE column"));
        }
        let pattern = match literal(pattern)? {
            Some(Lit::Str(b) | Lit::Bytes(b)) => b,
            Some(Lit::Param(_)) => return Err(MyError::bad_arguments("a ? was given no value")),
            Some(Lit::Null) => return Ok(Cond::Compare(column, Cmp::Eq, Value::Null)),
            _ => {
                return Err(MyError::unsupported(format!(
                    "LIKE {pattern} (only with a constant string as the pattern)"
                )));
            }
        };
        let escape = escape_of(escape)
            .map_err(|()| MyError::new(1210, "HY000", "Incorrect arguments to ESCAPE"))?;
        let like = Like::new(&pattern, escape, ty.is_some_and(ColumnType::is_binary))?;
        let range = (like.prefix_range())
            .filter(|_| matches!(ty, Some(ColumnType::Char(_) | ColumnType::VarChar(_))))
            .and_then(|(low, high)| {
                let low = table.value(column, &Lit::Str(low.into_bytes())).ok()?;
                let high = table.value(column, &Lit::Str(high.into_bytes())).ok()?;
                Some((low, high))
            });
        let like = Cond::Like(column, like);
        Ok(match range {
            Some((low, high)) => Cond::And(vec![
                like,
                Cond::Compare(column, Cmp::Ge, low),
                Cond::Compare(column, Cmp::Lt, high),
            ]),
            None => like,
        })
    }

    /// Whether `row` (every column's value) passes: `None` for unknown.
    /// An expression over the row may fail (a result out of range), and
    /// the statement with it.
    pub(crate) fn eval(&self, row: &[Value]) -> Result<Option<bool>, MyError> {
        Ok(match self {
            Cond::Pred(p) => p.test(row)?,
            Cond::Like(c, like) => like.matches(&row[*c]),
            Cond::Compare(c, cmp, v) => {
                let x = &row[*c];
                if matches!(x, Value::Null) || matches!(v, Value::Null) {
                    return Ok(None);
                }
                Some(cmp.holds(compare(x, v)))
            }
            Cond::Null(c) => Some(matches!(row[*c], Value::Null)),
            Cond::In(c, values) => {
                let x = &row[*c];
                if matches!(x, Value::Null) {
                    return Ok(None);
                }
                let mut unknown = false;
                for v in values {
                    if matches!(v, Value::Null) {
                        unknown = true;
                    } else if compare(x, v).is_eq() {
                        return Ok(Some(true));
                    }
                }
                if unknown { None } else { Some(false) }
            }
            Cond::And(parts) => {
                let mut unknown = false;
                for p in parts {
                    match p.eval(row)? {
                        Some(false) => return Ok(Some(false)),
                        None => unknown = true,
                        Some(true) => {}
                    }
                }
                if unknown { None } else { Some(true) }
            }
            Cond::Or(parts) => {
                let mut unknown = false;
                for p in parts {
                    match p.eval(row)? {
                        Some(true) => return Ok(Some(true)),
                        None => unknown = true,
                        Some(false) => {}
                    }
                }
                if unknown { None } else { Some(false) }
            }
            Cond::Not(p) => p.eval(row)?.map(|b| !b),
        })
    }

    /// Whether `row` passes.
    pub(crate) fn passes(&self, row: &[Value]) -> Result<bool, MyError> {
        Ok(self.eval(row)? == Some(true))
    }

    /// The conditions that must all hold: the parts of top-level ANDs.
    fn conjuncts(&self) -> Vec<&Cond> {
        match self {
            Cond::And(parts) => parts.iter().flat_map(Cond::conjuncts).collect(),
            other => vec![other],
        }
    }
}

/// The range of an ordered index (its columns, in order) that every row
/// passing `cond` lies in: values of its first columns at each end, and
/// whether the ends are in. `None`: nothing bounds its first column.
#[derive(Debug)]
pub(crate) struct Bounds {
    pub(crate) lower: Option<(Vec<Value>, bool)>,
    pub(crate) upper: Option<(Vec<Value>, bool)>,
}

impl Bounds {
    /// How many columns the range pins or bounds: the better the index.
    pub(crate) fn width(&self) -> usize {
        let len = |b: &Option<(Vec<Value>, bool)>| b.as_ref().map_or(0, |(v, _)| v.len());
        len(&self.lower).max(len(&self.upper))
    }

    /// Whether each column it bounds is pinned to one value (both ends
    /// the same values, both taken in).
    pub(crate) fn pins(&self) -> bool {
        matches!((&self.lower, &self.upper), (Some((lower, true)), Some((upper, true))) if lower == upper)
    }
}

/// The bounds `cond` puts on an index over `columns`: equal values for its
/// first columns, then a range of the next.
pub(crate) fn bounds(cond: &Cond, columns: &[u16]) -> Option<Bounds> {
    let conjuncts = cond.conjuncts();
    let mut prefix = Vec::new();
    for &column in columns {
        let equal = conjuncts.iter().find_map(|c| match c {
            Cond::Compare(col, Cmp::Eq, v)
                if *col == usize::from(column) && !matches!(v, Value::Null) =>
            {
                Some(v.clone())
            }
            _ => None,
        });
        match equal {
            Some(v) => prefix.push(v),
            None => {
                // A range of this column: the tightest of each end given.
                let mut lower: Option<(Value, bool)> = None;
                let mut upper: Option<(Value, bool)> = None;
                for c in &conjuncts {
                    let Cond::Compare(col, cmp, v) = c else {
                        continue;
                    };
                    if *col != usize::from(column) || matches!(v, Value::Null) {
                        continue;
                    }
                    let tighter = |end: &Option<(Value, bool)>, want: Ordering| {
                        end.as_ref().is_none_or(|(e, _)| compare(v, e) == want)
                    };
                    match cmp {
                        Cmp::Gt | Cmp::Ge if tighter(&lower, Ordering::Greater) => {
                            lower = Some((v.clone(), *cmp == Cmp::Ge));
                        }
                        Cmp::Lt | Cmp::Le if tighter(&upper, Ordering::Less) => {
                            upper = Some((v.clone(), *cmp == Cmp::Le));
                        }
                        _ => {}
                    }
                }
                let end = |end: Option<(Value, bool)>| {
                    end.map(|(v, inclusive)| {
                        let mut values = prefix.clone();
                        values.push(v);
                        (values, inclusive)
                    })
                };
                let (lower, upper) = (end(lower), end(upper));
                if prefix.is_empty() && lower.is_none() && upper.is_none() {
                    return None;
                }
                let pinned = || Some((prefix.clone(), true));
                return Some(Bounds {
                    lower: lower.or_else(pinned),
                    upper: upper.or_else(pinned),
                });
            }
        }
    }
    // Every column pinned.
    Some(Bounds {
        lower: Some((prefix.clone(), true)),
        upper: Some((prefix, true)),
    })
}

/// Whether the rows in range `b` of an index over `columns` (of a table
/// laid out as `layout`) are exactly those that pass `cond`, so that no row
/// of the range need be checked again (`id BETWEEN ? AND ?` on a primary
/// key). So only where each of `cond`'s conjuncts is a comparison the
/// range was made of, on a NOT NULL integer column, whose values compare
/// in the index as in the WHERE. (An index compares a row with an end on
/// as many columns as the end has values: an end leaving its values out
/// leaves out every row that begins with them.)
pub(crate) fn exactly(cond: &Cond, columns: &[u16], b: &Bounds, layout: &Layout) -> bool {
    // An end's value for the `i`th column, whether the end takes its
    // values in, and whether it is the end's last value.
    fn at(end: &Option<(Vec<Value>, bool)>, i: usize) -> Option<(&Value, bool, bool)> {
        let (values, inclusive) = end.as_ref()?;
        Some((values.get(i)?, *inclusive, i + 1 == values.len()))
    }
    cond.conjuncts().into_iter().all(|c| {
        let Cond::Compare(col, cmp, v) = c else {
            return false;
        };
        let Some(i) = columns.iter().position(|&x| usize::from(x) == *col) else {
            return false;
        };
        let column = &layout.columns[*col];
        let integer = column.ty.is_integer() && matches!(v, Value::Int(_) | Value::UInt(_));
        if !integer || column.null_bit.is_some() {
            return false;
        }
        let (lower, upper) = (at(&b.lower, i), at(&b.upper, i));
        // An end this comparison made: its value last, taken in as the
        // comparison says.
        let made = |end: Option<(&Value, bool, bool)>, inclusive: bool| {
            end.is_some_and(|(e, taken, last)| e == v && last && taken == inclusive)
        };
        // An end that pins the column to this value (more may follow it).
        let pins = |end: Option<(&Value, bool, bool)>| {
            end.is_some_and(|(e, taken, last)| e == v && (!last || taken))
        };
        match cmp {
            Cmp::Eq => pins(lower) && pins(upper),
            Cmp::Ge => made(lower, true),
            Cmp::Gt => made(lower, false),
            Cmp::Le => made(upper, true),
            Cmp::Lt => made(upper, false),
            _ => false,
        }
    })
}

/// A column's new value in an UPDATE: from constants and the row's columns.
#[derive(Debug, Clone)]
pub(crate) enum Expression {
    Value(Value),
    /// Column `c` of the row it is evaluated on: of the row there for
    /// `c` below the table's width, else of the row an INSERT gave.
    Column(usize),
    Arith(Box<Expression>, Arith, Box<Expression>),
    /// Anything else over the row there (`price * 1.1`, `UPPER(name)`),
    /// computed as a SELECT computes its outputs.
    Computed(Box<eval::Expr>, Arc<Layout>),
}

/// What the names of an ON DUPLICATE KEY UPDATE read besides the row
/// there: the row the INSERT gave, as `VALUES(c)` and, under the INSERT's
/// row alias, as `alias.c`. Its column `c` is read at `width + c`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inserted<'a> {
    pub(crate) alias: Option<&'a str>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Arith {
    Add,
    Sub,
    Mul,
}

impl Expression {
    /// The expression `e` setting column `target` of `table`.
    pub(crate) fn of(table: &Table, target: usize, e: &Expr) -> Result<Expression, MyError> {
        Expression::planned(table, target, e, None)
    }

    /// The expression `e` of an ON DUPLICATE KEY UPDATE setting column
    /// `target` of `table`: it may read the row the INSERT gave.
    pub(crate) fn on_duplicate(
        table: &Table,
        target: usize,
        e: &Expr,
        inserted: Inserted<'_>,
    ) -> Result<Expression, MyError> {
        Expression::planned(table, target, e, Some(inserted))
    }

    /// Integer arithmetic (`k = k + 1`) worked out exactly on the values
    /// there, anything else as an expression over the row (and the row an
    /// INSERT gave, read past the table's width).
    fn planned(
        table: &Table,
        target: usize,
        e: &Expr,
        inserted: Option<Inserted<'_>>,
    ) -> Result<Expression, MyError> {
        match Expression::within(table, target, e, inserted) {
            Ok(x) if x.integer_only(table) => Ok(x),
            Err(refused) if !refused.is_unsupported() => Err(refused),
            _ => {
                let second = |e: &Expr| {
                    let Some(i) = inserted else {
                        return Ok(None);
                    };
                    let c = inserted_column(table, e, i)
                        .map_err(|err| SqlError::new(Class::Semantic, err.message))?;
                    Ok(c.map(|c| c as u16))
                };
                let (x, _) = crate::tc::ronsql::plan::pair_value(table, e, &second)?;
                Ok(Expression::Computed(Box::new(x), Arc::clone(&table.layout)))
            }
        }
    }

    /// Whether it is a constant, a column, or arithmetic that reads only
    /// integers: constants, and columns (of the row there or, past its
    /// width, the INSERT's) of integer types.
    fn integer_only(&self, table: &Table) -> bool {
        match self {
            Expression::Value(_) | Expression::Column(_) => true,
            Expression::Arith(..) => self.reads_integers(table),
            Expression::Computed(..) => false,
        }
    }

    fn reads_integers(&self, table: &Table) -> bool {
        let columns = &table.def().columns;
        match self {
            Expression::Value(v) => matches!(v, Value::Int(_) | Value::UInt(_)),
            Expression::Column(c) => {
                let ty = columns[*c % columns.len()].column_type;
                Ty::of_column(ty) == Ty::Int && ty != ColumnType::Bool
            }
            Expression::Arith(l, _, r) => l.reads_integers(table) && r.reads_integers(table),
            Expression::Computed(..) => false,
        }
    }

    fn within(
        table: &Table,
        target: usize,
        e: &Expr,
        inserted: Option<Inserted<'_>>,
    ) -> Result<Expression, MyError> {
        if let Some(i) = inserted
            && let Some(c) = inserted_column(table, e, i)?
        {
            return Ok(Expression::Column(table.def().columns.len() + c));
        }
        if let Some(lit) = literal(e)? {
            return Ok(Expression::Value(to_value(
                &lit,
                &table.def().columns[target],
            )?));
        }
        Ok(match e {
            Expr::Nested(inner) => Expression::within(table, target, inner, inserted)?,
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                Expression::Column(column_of(table, e, "field list")?)
            }
            Expr::BinaryOp { left, op, right } => {
                let op = match op {
                    BinaryOperator::Plus => Arith::Add,
                    BinaryOperator::Minus => Arith::Sub,
                    BinaryOperator::Multiply => Arith::Mul,
                    other => {
                        return Err(MyError::unsupported(format!(
                            "the operator {other} in SET (only +, - and *)"
                        )));
                    }
                };
                let operand = |e: &Expr| -> Result<Expression, MyError> {
                    match literal(e)? {
                        // A constant operand keeps its own type: `k + 1`.
                        Some(Lit::Int(v)) => Ok(Expression::Value(Value::Int(v))),
                        Some(Lit::UInt(v)) => Ok(Expression::Value(Value::UInt(v))),
                        Some(_) => Err(MyError::unsupported(
                            "arithmetic on anything but integers in SET",
                        )),
                        None => Expression::within(table, target, e, inserted),
                    }
                };
                Expression::Arith(Box::new(operand(left)?), op, Box::new(operand(right)?))
            }
            other => {
                return Err(MyError::unsupported(format!(
                    "SET {} = {} (constants, columns, + - *)",
                    table.def().columns[target].name,
                    other.to_string().chars().take(64).collect::<String>()
                )));
            }
        })
    }

    /// Its value on `row`, for column `target` of `table`: checked to fit.
    pub(crate) fn eval(
        &self,
        table: &Table,
        target: usize,
        row: &[Value],
    ) -> Result<Value, MyError> {
        let column = &table.def().columns[target];
        match self {
            Expression::Value(v) => Ok(v.clone()),
            Expression::Column(c) => {
                let v = &row[*c];
                // Through the target column's checks, as a literal would be.
                to_value(&lit_of(v), column)
            }
            Expression::Computed(x, layout) => {
                let values = Values {
                    layout,
                    values: row,
                };
                let v = match x.eval(values)? {
                    // A whole decimal (`price * 100`) sets an integer column.
                    eval::Scalar::Decimal(m, s)
                        if Ty::of_column(column.column_type) == Ty::Int
                            && m % POW10[usize::from(s)] == 0 =>
                    {
                        eval::Scalar::Int(m / POW10[usize::from(s)])
                    }
                    v => v,
                };
                let v = v.to_value();
                let v = to_value(&lit_of(&v), column)?;
                // Checked as a written value is: never rounded or clamped.
                codec::encode_operand(&table.layout, target as u16, &v)?;
                Ok(v)
            }
            Expression::Arith(..) => {
                let v = self.integer(row, column.name.as_str())?;
                let lit = match v {
                    None => Lit::Null,
                    Some(v) => match i64::try_from(v) {
                        Ok(v) => Lit::Int(v),
                        Err(_) => match u64::try_from(v) {
                            Ok(v) => Lit::UInt(v),
                            Err(_) => return Err(out_of_range(column.name.as_str())),
                        },
                    },
                };
                let v = to_value(&lit, column).map_err(|_| out_of_range(column.name.as_str()))?;
                // The column's own range (an INT's, an UNSIGNED's), as it
                // would be checked when the row is written.
                codec::encode_operand(&table.layout, target as u16, &v)
                    .map_err(|_| out_of_range(column.name.as_str()))?;
                Ok(v)
            }
        }
    }

    /// Its value as an integer (`None` for NULL), exactly.
    fn integer(&self, row: &[Value], name: &str) -> Result<Option<i128>, MyError> {
        Ok(match self {
            Expression::Value(v) => integer_of(v, name)?,
            Expression::Column(c) => integer_of(&row[*c], name)?,
            Expression::Computed(..) => return Err(not_integer(name)),
            Expression::Arith(l, op, r) => {
                let (Some(l), Some(r)) = (l.integer(row, name)?, r.integer(row, name)?) else {
                    return Ok(None);
                };
                let v = match op {
                    Arith::Add => l.checked_add(r),
                    Arith::Sub => l.checked_sub(r),
                    Arith::Mul => l.checked_mul(r),
                };
                Some(v.ok_or_else(|| out_of_range(name))?)
            }
        })
    }
}

/// The column of the inserted row `e` names, if it names one: as
/// `VALUES(c)`, or as `alias.c` under the INSERT's row alias.
fn inserted_column(
    table: &Table,
    e: &Expr,
    inserted: Inserted<'_>,
) -> Result<Option<usize>, MyError> {
    match e {
        Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("VALUES") => {
            let arg = match &f.args {
                ast::FunctionArguments::List(l)
                    if l.args.len() == 1
                        && l.duplicate_treatment.is_none()
                        && l.clauses.is_empty() =>
                {
                    match &l.args[0] {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(arg)) => Some(arg),
                        _ => None,
                    }
                }
                _ => None,
            };
            let Some(arg @ (Expr::Identifier(_) | Expr::CompoundIdentifier(_))) = arg else {
                return Err(MyError::syntax(format!("VALUES() takes one column: '{e}'")));
            };
            column_of(table, arg, "field list").map(Some)
        }
        Expr::CompoundIdentifier(parts)
            if parts.len() == 2
                && inserted
                    .alias
                    .is_some_and(|a| parts[0].value.eq_ignore_ascii_case(a)) =>
        {
            let c = position(table, &parts[1].value)
                .ok_or_else(|| MyError::no_column(&e.to_string(), "field list"))?;
            Ok(Some(c))
        }
        _ => Ok(None),
    }
}

fn integer_of(v: &Value, name: &str) -> Result<Option<i128>, MyError> {
    match v {
        Value::Null => Ok(None),
        Value::Int(i) => Ok(Some(i128::from(*i))),
        Value::UInt(u) => Ok(Some(i128::from(*u))),
        _ => Err(not_integer(name)),
    }
}

/// A stored value as the literal that writes it again.
fn lit_of(v: &Value) -> Lit {
    match v {
        Value::Null => Lit::Null,
        Value::Int(i) => Lit::Int(*i),
        Value::UInt(u) => Lit::UInt(*u),
        Value::Double(d) => Lit::Double(*d),
        Value::Float(f) => Lit::Double(f64::from(*f)),
        Value::Decimal(d) => Lit::Number(d.to_string()),
        Value::Text(t) => Lit::Str(t.clone().into_bytes()),
        Value::Bytes(b) => Lit::Bytes(b.clone()),
        Value::Bool(b) => Lit::Bool(*b),
        Value::Date(_) | Value::DateTime(_) | Value::Timestamp(_) => {
            Lit::Str(v.to_string().into_bytes())
        }
    }
}

fn not_integer(column: &str) -> MyError {
    MyError::unsupported(format!(
        "arithmetic on a column that is not an integer ('{column}')"
    ))
}

/// 1690: the result does not fit.
fn out_of_range(column: &str) -> MyError {
    MyError::new(
        1690,
        "22003",
        format!("Out of range value: the result does not fit column '{column}'"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(v: i64) -> Value {
        Value::Int(v)
    }

    #[test]
    fn comparisons_with_null_are_unknown_and_never_pass() {
        let row = [int(1), Value::Null];
        let unknown = Cond::Compare(1, Cmp::Eq, int(1));
        assert_eq!(unknown.eval(&row).unwrap(), None);
        assert_eq!(
            Cond::Not(Box::new(unknown.clone())).eval(&row).unwrap(),
            None
        );
        assert!(!Cond::Not(Box::new(unknown.clone())).passes(&row).unwrap());
        let yes = Cond::Compare(0, Cmp::Le, int(1));
        assert_eq!(
            Cond::Or(vec![unknown.clone(), yes.clone()])
                .eval(&row)
                .unwrap(),
            Some(true)
        );
        assert_eq!(
            Cond::And(vec![unknown.clone(), yes]).eval(&row).unwrap(),
            None
        );
        let no = Cond::Compare(0, Cmp::Gt, int(1));
        assert_eq!(
            Cond::And(vec![unknown, no]).eval(&row).unwrap(),
            Some(false)
        );
        assert_eq!(
            Cond::In(0, vec![int(2), Value::Null]).eval(&row).unwrap(),
            None
        );
        assert_eq!(
            Cond::In(0, vec![Value::Null, int(1)]).eval(&row).unwrap(),
            Some(true)
        );
        assert_eq!(Cond::Null(1).eval(&row).unwrap(), Some(true));
    }

    #[test]
    fn bounds_take_the_tightest_ends_after_an_equal_prefix() {
        let a = |cmp, v| Cond::Compare(0, cmp, int(v));
        let cond = Cond::And(vec![
            a(Cmp::Ge, 5),
            a(Cmp::Gt, 7),
            a(Cmp::Lt, 10),
            a(Cmp::Le, 20),
            Cond::Compare(2, Cmp::Eq, int(3)),
        ]);
        let b = bounds(&cond, &[0]).unwrap();
        assert_eq!(b.lower, Some((vec![int(7)], false)));
        assert_eq!(b.upper, Some((vec![int(10)], false)));
        // An index on (c, a): c pinned, then a's range.
        let b = bounds(&cond, &[2, 0]).unwrap();
        assert_eq!(b.lower, Some((vec![int(3), int(7)], false)));
        assert_eq!(b.width(), 2);
        // An index on (c, b): only c pinned.
        let b = bounds(&cond, &[2, 1]).unwrap();
        assert_eq!(b.lower, Some((vec![int(3)], true)));
        assert_eq!(b.upper, Some((vec![int(3)], true)));
        // Nothing bounds b; an OR bounds nothing.
        assert!(bounds(&cond, &[1]).is_none());
        assert!(bounds(&Cond::Or(vec![a(Cmp::Eq, 1), a(Cmp::Eq, 2)]), &[0]).is_none());
    }

    /// A range stands for its WHERE only where every conjunct is one of
    /// its ends, on NOT NULL integers: else each row is checked.
    #[test]
    fn a_range_is_exactly_its_where_only_where_every_conjunct_made_it() {
        let def: shoal_wire::schema::TableDef = serde_json::from_str(
            r#"{"name":"t","columns":[
                {"name":"a","type":"INT"},
                {"name":"b","type":"BIGINT UNSIGNED"},
                {"name":"n","type":"INT","nullable":true},
                {"name":"c","type":"CHAR(10)"}],
              "primary_key":["a","b"]}"#,
        )
        .unwrap();
        def.validate().unwrap();
        let layout = Layout::new(def);
        let on = |col, cmp, v: Value| Cond::Compare(col, cmp, v);
        let exact = |cond: Cond, index: &[u16]| {
            let b = bounds(&cond, index).unwrap();
            exactly(&cond, index, &b, &layout)
        };
        // BETWEEN, and each kind of end, on the first column.
        let between = || Cond::And(vec![on(0, Cmp::Ge, int(5)), on(0, Cmp::Le, int(104))]);
        assert!(exact(between(), &[0, 1]));
        assert!(exact(on(0, Cmp::Gt, int(5)), &[0, 1]));
        assert!(exact(on(0, Cmp::Lt, int(5)), &[0, 1]));
        assert!(exact(on(0, Cmp::Eq, int(5)), &[0, 1]));
        // A pinned first column, then a range of the second.
        let pinned = Cond::And(vec![
            on(0, Cmp::Eq, int(1)),
            on(1, Cmp::Gt, Value::UInt(7)),
            on(1, Cmp::Le, Value::UInt(9)),
        ]);
        assert!(exact(pinned, &[0, 1]));
        // A looser end the range is not made of: checked.
        let looser = Cond::And(vec![on(0, Cmp::Ge, int(5)), on(0, Cmp::Gt, int(1))]);
        assert!(!exact(looser, &[0, 1]));
        // Two values for one column: the range holds one, none pass.
        let both = Cond::And(vec![on(0, Cmp::Eq, int(1)), on(0, Cmp::Eq, int(2))]);
        assert!(!exact(both, &[0, 1]));
        let contrary = Cond::And(vec![on(0, Cmp::Eq, int(5)), on(0, Cmp::Gt, int(5))]);
        assert!(!exact(contrary, &[0, 1]));
        // Anything besides the range's ends: checked.
        let more = Cond::And(vec![between(), on(3, Cmp::Eq, Value::Text("x".into()))]);
        assert!(!exact(more, &[0, 1]));
        assert!(!exact(Cond::And(vec![between(), Cond::Null(2)]), &[0, 1]));
        // A second column bounded but not the first's end: checked.
        let skipped = Cond::And(vec![on(0, Cmp::Gt, int(1)), on(1, Cmp::Eq, Value::UInt(2))]);
        assert!(!exact(skipped, &[0, 1]));
        // A nullable column, a text column: checked.
        assert!(!exact(on(2, Cmp::Ge, int(5)), &[2]));
        assert!(!exact(on(3, Cmp::Ge, Value::Text("a".into())), &[3]));
    }
}
