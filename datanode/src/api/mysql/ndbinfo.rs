//! `ndbinfo` over SQL: the memory and usage tables RonDB users query from
//! the `mysql` client (`SELECT * FROM ndbinfo.table_memory_usage`), as
//! the data node computes them now, scoped to the caller: a key sees the
//! rows of the databases it is granted, nothing of anyone else's.
//!
//! The tables with a row per database or table are served
//! (`table_memory_usage`, `database_memory_usage`, `database_quota_usage`,
//! `table_usage`); the node-wide ones (`memoryusage`, `nodes`, the raw
//! `ndb$` tables) are the operators', through the control plane, and a key
//! is refused them (1142). A query takes columns, WHERE, ORDER BY,
//! DISTINCT and LIMIT; rows are few (one per table fragment at most), so
//! they are filtered and sorted here.

use std::collections::HashMap;

use shoal_wire::ndbinfo::{self, Cell as NdbCell, ColumnType, NdbinfoTable};
use sqlparser::ast::{self, Expr, SelectItem};

use super::error::MyError;
use super::filter::{Columns, Cond};
use super::proto::ty;
use super::query::{Reply, Shape, limit_of, order_of};
use super::session::Session;
use super::value::{Lit, computed};
use crate::types::value::Value;

/// The ndbinfo tables a key may read.
const SERVED: [NdbinfoTable; 4] = [
    ndbinfo::TABLE_MEMORY_USAGE,
    ndbinfo::DATABASE_MEMORY_USAGE,
    ndbinfo::DATABASE_QUOTA_USAGE,
    ndbinfo::TABLE_USAGE,
];

/// A SELECT of an ndbinfo table, planned.
#[derive(Debug)]
pub(crate) struct NdbinfoSelect {
    table: NdbinfoTable,
    cond: Option<Cond>,
    shape: Shape,
}

impl NdbinfoSelect {
    pub(crate) fn columns(self) -> Vec<super::proto::ColumnDef> {
        self.shape.columns
    }
}

/// An ndbinfo table's columns, for conditions on them.
struct NdbColumns(NdbinfoTable);

impl Columns for NdbColumns {
    fn column(&self, e: &Expr) -> Result<usize, MyError> {
        let name = match e {
            Expr::Identifier(i) => i.value.as_str(),
            Expr::CompoundIdentifier(parts) => parts.last().map_or("", |p| p.value.as_str()),
            other => {
                return Err(MyError::unsupported(format!(
                    "the expression '{other}' on an ndbinfo table (columns only)"
                )));
            }
        };
        (self.0.columns.iter())
            .position(|c| c.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| MyError::no_column(name, "where clause"))
    }

    fn value(&self, column: usize, lit: &Lit) -> Result<Value, MyError> {
        let name = self.0.columns[column].name;
        let bad = || MyError::bad_value(name, "not a value this column holds");
        Ok(match (lit, self.0.columns[column].ty) {
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

fn value_of(cell: &NdbCell) -> Value {
    match cell {
        NdbCell::Null => Value::Null,
        NdbCell::UInt(v) => Value::UInt(*v),
        NdbCell::Text(t) => Value::Text(t.clone()),
    }
}

impl Session {
    /// Plans `SELECT … FROM ndbinfo.<name>`.
    pub(crate) fn plan_ndbinfo(
        &self,
        name: &str,
        q: &ast::Query,
        select: &ast::Select,
    ) -> Result<NdbinfoSelect, MyError> {
        let lower = name.to_ascii_lowercase();
        let Some(table) = ndbinfo::table(&lower) else {
            return Err(MyError::no_table("ndbinfo", name));
        };
        if !SERVED.contains(&table) {
            return Err(MyError::denied_command("SELECT", &self.user, name));
        }
        let grouped =
            !matches!(&select.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty());
        if select.having.is_some() || grouped {
            return Err(MyError::unsupported(
                "GROUP BY or aggregates over an ndbinfo table",
            ));
        }
        let columns = NdbColumns(table);
        let mut outputs = Vec::new();
        let mut defs = Vec::new();
        for item in &select.projection {
            let (e, alias) = match item {
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                    outputs.extend(0..table.columns.len());
                    defs.extend(table.columns.iter().map(|c| column_def(c.name, c.ty)));
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
            let column = &table.columns[c];
            defs.push(column_def(alias.unwrap_or(column.name), column.ty));
        }
        let cond = (select.selection.as_ref())
            .map(|w| Cond::of(&columns, w))
            .transpose()?;
        let distinct = match &select.distinct {
            None => false,
            Some(ast::Distinct::Distinct) => true,
            Some(ast::Distinct::On(_)) => return Err(MyError::unsupported("DISTINCT ON")),
        };
        let order = order_of(q, |e| columns.column(e))?;
        let (limit, offset) = limit_of(q)?;
        Ok(NdbinfoSelect {
            table,
            cond,
            shape: Shape {
                outputs,
                columns: defs,
                order,
                distinct,
                limit,
                offset,
            },
        })
    }

    /// The rows of a planned ndbinfo SELECT, computed now.
    pub(crate) async fn ndbinfo(&self, s: &NdbinfoSelect) -> Result<Reply, MyError> {
        let rows = crate::node::ndbinfo::rows(&self.engine, s.table, 0)
            .await
            .map_err(|e| MyError::new(1296, "HY000", e.to_string()))?;
        let db_column = rows
            .column("database_name")
            .expect("a table served has one");
        // Each database named once: is it one of the key's?
        let mut granted: HashMap<String, bool> = HashMap::new();
        let mut found = Vec::new();
        for cells in &rows.rows {
            let NdbCell::Text(db) = &cells[db_column] else {
                continue;
            };
            let mine = *granted
                .entry(db.clone())
                .or_insert_with(|| self.grant(db).is_ok());
            if !mine {
                continue;
            }
            let values: Vec<Value> = cells.iter().map(value_of).collect();
            if s.cond.as_ref().is_none_or(|c| c.passes(&values)) {
                found.push(values);
            }
        }
        Ok(s.shape.answer(found, &[]))
    }
}

fn column_def(name: &str, t: ColumnType) -> super::proto::ColumnDef {
    let mut def = computed(
        name,
        match t {
            ColumnType::Integer => ty::LONGLONG,
            ColumnType::Text => ty::VAR_STRING,
        },
    );
    def.schema = "ndbinfo".into();
    def
}
