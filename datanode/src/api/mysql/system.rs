//! Tables the node computes when asked rather than stores: RonDB's
//! `ndbinfo` tables and MySQL's `information_schema`, each scoped to the
//! caller's databases. A query of one takes columns, WHERE, ORDER BY,
//! DISTINCT and LIMIT; their rows are few (one per table, column, index
//! or fragment of the key's databases), so they are filtered and sorted
//! here.

use shoal_wire::ndbinfo::{Column, ColumnType, NdbinfoTable};
use sqlparser::ast::{self, Expr, SelectItem};

use super::error::MyError;
use super::filter::{Columns, Cond};
use super::information_schema::InformationTable;
use super::proto::{ColumnDef, flag, ty};
use super::query::{Reply, Shape, limit_of, no_arguments, order_of};
use super::session::Session;
use super::value::{Lit, computed};
use crate::types::value::Value;

/// A computed table.
#[derive(Debug, Clone, Copy)]
pub(crate) enum System {
    Ndbinfo(NdbinfoTable),
    Information(&'static InformationTable),
}

impl System {
    fn schema(self) -> &'static str {
        match self {
            System::Ndbinfo(_) => "ndbinfo",
            System::Information(_) => "information_schema",
        }
    }

    /// Whether the table never has a row.
    fn always_empty(self) -> bool {
        matches!(self, System::Information(t) if t.always_empty())
    }

    fn columns(self) -> &'static [Column] {
        match self {
            System::Ndbinfo(t) => t.columns,
            System::Information(t) => t.columns,
        }
    }
}

/// A SELECT of a computed table, planned.
#[derive(Debug)]
pub(crate) struct SystemSelect {
    table: System,
    cond: Option<Cond>,
    /// `SELECT COUNT(*)`: the answer is the number of rows found.
    count: bool,
    shape: Shape,
}

impl SystemSelect {
    pub(crate) fn columns(self) -> Vec<ColumnDef> {
        self.shape.columns.to_vec()
    }

    /// The table's name, as its schema's catalog writes it.
    pub(crate) fn table_name(&self) -> &'static str {
        match self.table {
            System::Ndbinfo(t) => t.name,
            System::Information(t) => t.name,
        }
    }

    /// Whether a WHERE is checked on each row.
    pub(crate) fn filters(&self) -> bool {
        self.cond.is_some()
    }
}

/// A computed table's columns, for conditions on them.
struct Listed(System);

impl Columns for Listed {
    fn column(&self, e: &Expr) -> Result<usize, MyError> {
        let name = match e {
            Expr::Identifier(i) => i.value.as_str(),
            Expr::CompoundIdentifier(parts) => parts.last().map_or("", |p| p.value.as_str()),
            other => {
                return Err(MyError::unsupported(format!(
                    "the expression '{other}' on an {} table (columns only)",
                    self.0.schema()
                )));
            }
        };
        (self.0.columns().iter())
            .position(|c| c.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| MyError::no_column(name, "where clause"))
    }

    fn value(&self, column: usize, lit: &Lit) -> Result<Value, MyError> {
        let column = self.0.columns()[column];
        let bad = || MyError::bad_value(column.name, "not a value this column holds");
        Ok(match (lit, column.ty) {
            (Lit::Null, _) => Value::Null,
            (Lit::Int(v), ColumnType::Integer) => Value::Int(*v),
            (Lit::UInt(v), ColumnType::Integer) => Value::UInt(*v),
            (Lit::Str(s), ColumnType::Integer) => {
                let text = std::str::from_utf8(s).map_err(|_| bad())?;
                Value::UInt(text.trim().parse().map_err(|_| bad())?)
            }
            (Lit::Str(s), ColumnType::Text) => {
                Value::Text(String::from_utf8(s.clone()).map_err(|_| bad())?)
            }
            _ => return Err(bad()),
        })
    }
}

impl Session {
    /// Plans `SELECT … FROM <schema>.<table>` of computed table `table`.
    pub(crate) fn plan_system(
        &self,
        table: System,
        q: &ast::Query,
        select: &ast::Select,
    ) -> Result<SystemSelect, MyError> {
        let columns = Listed(table);
        // A table that is always empty answers no rows however they would
        // be filtered or grouped: its columns are checked, and a condition
        // or grouping this planner has no means for is never needed (as
        // mysqldump asks of FILES, grouping with subqueries).
        let empty = table.always_empty();
        let grouped = match &select.group_by {
            ast::GroupByExpr::Expressions(e, _) if e.is_empty() => false,
            ast::GroupByExpr::Expressions(e, modifiers) if empty && modifiers.is_empty() => {
                for e in e {
                    columns.column(e).map_err(|e| MyError {
                        message: e.message.replace("where clause", "group statement"),
                        ..e
                    })?;
                }
                false
            }
            _ => true,
        };
        if select.having.is_some() || grouped {
            return Err(MyError::unsupported(format!(
                "GROUP BY or aggregates over an {} table",
                table.schema()
            )));
        }
        let mut outputs = Vec::new();
        let mut defs = Vec::new();
        // `SELECT COUNT(*)`, as schema readers ask whether a table is
        // there: its answer is one row, the count.
        let count = match select.projection.as_slice() {
            [SelectItem::UnnamedExpr(e)] if is_count_star(e) => Some(e.to_string()),
            [SelectItem::ExprWithAlias { expr, alias }] if is_count_star(expr) => {
                Some(alias.value.clone())
            }
            _ => None,
        };
        if let Some(name) = &count {
            let grouped =
                !matches!(&select.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty());
            if q.order_by.is_some() || grouped {
                return Err(MyError::unsupported(format!(
                    "GROUP BY or ORDER BY of a COUNT(*) over an {} table",
                    table.schema()
                )));
            }
            outputs.push(0);
            defs.push(computed(name, ty::LONGLONG));
        }
        for item in select.projection.iter().filter(|_| count.is_none()) {
            let (e, alias) = match item {
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                    outputs.extend(0..table.columns().len());
                    defs.extend((table.columns().iter()).map(|c| column_def(table, c.name, c.ty)));
                    continue;
                }
                SelectItem::UnnamedExpr(e) => (e, None),
                SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.as_str())),
            };
            let c = columns.column(e).map_err(|e| MyError {
                message: e.message.replace("where clause", "field list"),
                ..e
            })?;
            outputs.push(c);
            let column = &table.columns()[c];
            defs.push(column_def(table, alias.unwrap_or(column.name), column.ty));
        }
        let cond = match (select.selection.as_ref())
            .map(|w| Cond::of(&columns, &session_constants(w, self.database.as_deref())))
            .transpose()
        {
            Err(e) if empty && e.is_unsupported() => None,
            cond => cond?,
        };
        let distinct = match &select.distinct {
            None => false,
            Some(ast::Distinct::Distinct) => true,
            Some(ast::Distinct::On(_)) => return Err(MyError::unsupported("DISTINCT ON")),
        };
        let order = order_of(q, |e| columns.column(e))?;
        let (limit, offset) = limit_of(q)?;
        Ok(SystemSelect {
            table,
            cond,
            count: count.is_some(),
            shape: Shape {
                outputs,
                columns: defs.into(),
                order,
                distinct,
                limit,
                offset,
                computed: None,
            },
        })
    }

    /// The rows of a planned SELECT of a computed table, computed now.
    pub(crate) async fn system(&self, s: &SystemSelect) -> Result<Reply, MyError> {
        let rows = match s.table {
            System::Ndbinfo(t) => self.ndbinfo_rows(t).await?,
            System::Information(t) => self.information_rows(t).await?,
        };
        let mut found = Vec::with_capacity(rows.len());
        for row in rows {
            if s.cond.as_ref().map_or(Ok(true), |c| c.passes(&row))? {
                found.push(row);
            }
        }
        if s.count {
            found = vec![vec![Value::Int(found.len() as i64)]];
        }
        s.shape.answer(found)
    }
}

/// Whether `e` is `COUNT(*)`.
fn is_count_star(e: &Expr) -> bool {
    let Expr::Function(f) = e else {
        return false;
    };
    let ast::FunctionArguments::List(list) = &f.args else {
        return false;
    };
    f.name.to_string().eq_ignore_ascii_case("COUNT")
        && f.filter.is_none()
        && f.over.is_none()
        && list.duplicate_treatment.is_none()
        && list.clauses.is_empty()
        && matches!(
            list.args.as_slice(),
            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)]
        )
}

fn column_def(table: System, name: &str, t: ColumnType) -> ColumnDef {
    let mut def = computed(
        name,
        match t {
            ColumnType::Integer => ty::LONGLONG,
            ColumnType::Text => ty::VAR_STRING,
        },
    );
    // ndbinfo's numbers are all unsigned, as RonDB's are (a driver reads
    // `used` as a u64, and only so).
    if matches!((table, t), (System::Ndbinfo(_), ColumnType::Integer)) {
        def.flags |= flag::UNSIGNED;
    }
    def.schema = table.schema().into();
    def
}

/// `e` with `DATABASE()` and `SCHEMA()` as the session's database, a
/// constant, as catalog queries use them (`WHERE TABLE_SCHEMA =
/// DATABASE()`).
fn session_constants(e: &Expr, db: Option<&str>) -> Expr {
    let go = |e: &Expr| Box::new(session_constants(e, db));
    match e {
        Expr::Function(f)
            if ["DATABASE", "SCHEMA"]
                .contains(&f.name.to_string().to_ascii_uppercase().as_str())
                && no_arguments(f) =>
        {
            Expr::Value(
                db.map_or(ast::Value::Null, |d| {
                    ast::Value::SingleQuotedString(d.to_owned())
                })
                .into(),
            )
        }
        Expr::BinaryOp { left, op, right } => Expr::BinaryOp {
            left: go(left),
            op: op.clone(),
            right: go(right),
        },
        Expr::UnaryOp { op, expr } => Expr::UnaryOp {
            op: *op,
            expr: go(expr),
        },
        Expr::Nested(inner) => Expr::Nested(go(inner)),
        Expr::InList {
            expr,
            list,
            negated,
        } => Expr::InList {
            expr: go(expr),
            list: list.iter().map(|e| session_constants(e, db)).collect(),
            negated: *negated,
        },
        other => other.clone(),
    }
}
