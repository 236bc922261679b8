//! `EXPLAIN` (and `DESCRIBE`) of a SELECT, UPDATE or DELETE: how the
//! statement would find its rows, in MySQL's traditional table — one row,
//! for the statement's one table — planned exactly as the statement would
//! run and checked against the key's grants as it would be, but run not.
//!
//! - `type`: `const` for one primary key, `range` for several (read in one
//!   batch: `Using MRR`) or for a range of an ordered index, `ref` for a
//!   range whose every bounded column is pinned to one value, `ALL` for
//!   every row of every fragment.
//! - `key_len`: the bytes of the index's columns the lookup or range uses,
//!   as Shoal stores them (a variable-length column at its longest, with
//!   its length; one more for a column that may be NULL).
//! - `rows`: an estimate. A whole table: the rows of its fragments on this
//!   node, scaled to all its fragments. A range: that times the share of
//!   the index the range holds in one fragment's tree, the estimate RonSQL
//!   chooses its ranges by.
//! - `Extra`: `Using where` where the WHERE is checked on each row in the
//!   coordinator, `Using pushed condition (…)` where an aggregate's WHERE
//!   is checked in the data node (not where its range is exactly the
//!   WHERE), `Using pushed aggregation` where the
//!   groups are made there, `Using filesort` for an ORDER BY, `Using
//!   temporary` for DISTINCT.

use std::sync::Arc;

use sqlparser::ast::{self, Statement};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

use super::clock;
use super::error::MyError;
use super::filter::Cond;
use super::proto::{ColumnDef, ty};
use super::query::{
    Change, Reply, Select, expand_keys, key_positions, keyword, parse, query_error, word,
};
use super::scan::Scan;
use super::session::Session;
use super::value::{Cell, computed};
use crate::storage::fragment::Bound;
use crate::tc::Table;
use crate::tc::ronsql::plan::Access;
use crate::types::value::Value;

/// How a statement reaches its table: one row of EXPLAIN's answer.
#[derive(Debug, Default)]
struct Reach {
    select_type: &'static str,
    table: Option<String>,
    kind: Option<&'static str>,
    possible_keys: Vec<String>,
    key: Option<String>,
    key_len: Option<usize>,
    refs: Option<String>,
    rows: Option<u64>,
    extra: Vec<String>,
}

impl Session {
    /// `EXPLAIN [FORMAT = TRADITIONAL] statement` (`rest`: after EXPLAIN).
    pub(super) async fn explain(&mut self, rest: &[Token]) -> Result<Reply, MyError> {
        let rest = explain_format(rest)?;
        match keyword(rest.first()) {
            Some(Keyword::SELECT | Keyword::WITH | Keyword::UPDATE | Keyword::DELETE) => {}
            Some(Keyword::ANALYZE) => return Err(MyError::unsupported("EXPLAIN ANALYZE")),
            Some(Keyword::INSERT | Keyword::REPLACE) => {
                return Err(MyError::unsupported("EXPLAIN of INSERT or REPLACE"));
            }
            Some(Keyword::FOR) => return Err(MyError::unsupported("EXPLAIN FOR CONNECTION")),
            _ => {
                return Err(MyError::syntax(
                    "EXPLAIN takes a SELECT, an UPDATE or a DELETE, or a table's name",
                ));
            }
        }
        let mut statement = parse(rest.to_vec())?;
        if clock::may_fold(rest) {
            self.now = clock::fold(&mut statement)?;
        }
        let reach = match statement {
            Statement::Query(q) => self.explain_select(&q).await?,
            update @ Statement::Update { .. } => {
                let change = self.update_of(&update)?;
                self.explain_change("UPDATE", change).await?
            }
            Statement::Delete(delete) => {
                let change = self.delete_of(&delete)?;
                self.explain_change("DELETE", change).await?
            }
            _ => {
                return Err(MyError::syntax(
                    "EXPLAIN takes a SELECT, an UPDATE or a DELETE",
                ));
            }
        };
        Ok(reach.answer())
    }

    async fn explain_select(&mut self, q: &ast::Query) -> Result<Reach, MyError> {
        let simple = "SIMPLE";
        Ok(match self.plan_select(q)? {
            Select::Constant { .. } => Reach {
                select_type: simple,
                extra: vec!["No tables used".into()],
                ..Reach::default()
            },
            Select::System(s) => Reach {
                select_type: simple,
                table: Some(s.table_name().to_owned()),
                kind: Some("ALL"),
                extra: using_where(s.filters()),
                ..Reach::default()
            },
            Select::Keys(lookup) => {
                let sorts = !lookup.shape.order.is_empty();
                let keys = expand_keys(&lookup.table, &lookup.keys, &[])?;
                let mut reach = by_keys(simple, &lookup.table, keys.len());
                reach.sorted(sorts, lookup.shape.distinct);
                reach
            }
            Select::Scan { scan, shape, .. } => {
                let mut reach = self.by_scan(simple, &scan).await?;
                reach.sorted(!shape.order.is_empty(), shape.distinct);
                reach
            }
            Select::Aggregate { plan, .. } => {
                let mut plan = *plan;
                let tc = self.engine.tc();
                tc.choose_access(&mut plan).await.map_err(query_error)?;
                let table = &plan.table;
                let rows = self.table_rows(table).await?;
                let mut reach = Reach {
                    select_type: simple,
                    table: Some(table.name().to_string()),
                    kind: Some("ALL"),
                    rows,
                    ..Reach::default()
                };
                for candidate in &plan.candidates {
                    if let Access::Range { name, .. } = candidate {
                        reach.possible_keys.push(name.clone());
                    }
                }
                if let Access::Range {
                    name,
                    lower,
                    upper,
                    share,
                    ..
                } = &plan.access
                {
                    // The columns either end bounds (`WHERE k < 5` has no lower end).
                    let len = |b: &Option<Bound>| b.as_ref().map_or(0, |b| b.values.len());
                    let used = len(lower).max(len(upper));
                    reach.kind = Some("range");
                    reach.key = Some(name.clone());
                    reach.key_len = key_len(table, name, used);
                    reach.rows = rows.map(|r| share.map_or(r, |s| estimate(r, s)));
                }
                // Not where the range chosen is exactly the WHERE.
                if let Some(filter) =
                    (plan.filter_sql.as_ref()).filter(|_| plan.program.filter.is_some())
                {
                    reach
                        .extra
                        .push(format!("Using pushed condition ({filter})"));
                }
                reach.extra.push("Using pushed aggregation".into());
                reach.sorted(!plan.order.is_empty(), false);
                reach
            }
        })
    }

    /// How an UPDATE or a DELETE finds the rows it changes: by their keys
    /// if its WHERE names them, else by a scan.
    async fn explain_change(
        &mut self,
        select_type: &'static str,
        change: Change<'_>,
    ) -> Result<Reach, MyError> {
        let table = &change.table;
        let mut reach = match &change.keys {
            Some(keys) => by_keys(select_type, table, keys.len()),
            None => {
                let cond = (change.selection)
                    .map(|w| Cond::of(table.as_ref(), w))
                    .transpose()?;
                let scan = Scan::plan(table, cond, key_positions(table));
                self.by_scan(select_type, &scan).await?
            }
        };
        reach.sorted(!change.pick.order.is_empty(), false);
        Ok(reach)
    }

    /// A scan's reach: a range of an ordered index, or every row.
    async fn by_scan(&self, select_type: &'static str, scan: &Scan) -> Result<Reach, MyError> {
        let table = &scan.table;
        let rows = self.table_rows(table).await?;
        let mut reach = Reach {
            select_type,
            table: Some(table.name().to_string()),
            kind: Some("ALL"),
            possible_keys: scan
                .possible_indexes()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            rows,
            extra: using_where(scan.filters()),
            ..Reach::default()
        };
        if let Some((index, b)) = scan.range() {
            let pinned = b.pins();
            let used = b.width();
            reach.kind = Some(if pinned { "ref" } else { "range" });
            reach.key = Some(index.to_owned());
            reach.key_len = key_len(table, index, used);
            if pinned {
                reach.refs = Some(vec!["const"; used].join(","));
            }
            let lower = b.lower.as_ref().map(|(v, i)| (v.as_slice(), *i));
            let upper = b.upper.as_ref().map(|(v, i)| (v.as_slice(), *i));
            let share = (self.engine.tc())
                .range_share(table, index, lower, upper)
                .await?;
            reach.rows = rows.map(|r| share.map_or(r, |s| estimate(r, s)));
        }
        Ok(reach)
    }

    /// About how many rows `table` holds: those of its fragments on this
    /// node, scaled to all its fragments. `None`: none of them is here.
    async fn table_rows(&self, table: &Table) -> Result<Option<u64>, MyError> {
        let usage = (self.engine.memory_usage().await)
            .map_err(|e| MyError::new(1296, "HY000", e.to_string()))?;
        let (mut rows, mut here) = (0u64, 0u64);
        for u in usage.iter().filter(|u| u.table_id == table.id) {
            rows += u.rows;
            here += 1;
        }
        Ok((here > 0).then(|| rows.saturating_mul(table.fragments.len() as u64) / here))
    }
}

/// A reach by whole primary keys: one (`const`) or a batch of them.
fn by_keys(select_type: &'static str, table: &Arc<Table>, keys: usize) -> Reach {
    let key = shoal_wire::schema::PRIMARY_INDEX;
    let columns = key_positions(table).len();
    let mut reach = Reach {
        select_type,
        table: Some(table.name().to_string()),
        ..Reach::default()
    };
    if keys == 0 {
        // Conditions no key meets: nothing is read.
        reach.table = None;
        reach.extra.push("Impossible WHERE".into());
        return reach;
    }
    reach.possible_keys.push(key.to_owned());
    reach.key = Some(key.to_owned());
    reach.key_len = Some(key_positions(table).map(|c| column_len(table, c)).sum());
    reach.rows = Some(keys as u64);
    if keys == 1 {
        reach.kind = Some("const");
        reach.refs = Some(vec!["const"; columns].join(","));
    } else {
        reach.kind = Some("range");
        reach.extra.push("Using MRR".into());
    }
    reach
}

impl Reach {
    /// Notes the front end's sort (ORDER BY) and its removal of equal rows
    /// (DISTINCT).
    fn sorted(&mut self, sorts: bool, distinct: bool) {
        if distinct {
            self.extra.push("Using temporary".into());
        }
        if sorts {
            self.extra.push("Using filesort".into());
        }
    }

    /// MySQL's EXPLAIN table, with this one row.
    fn answer(self) -> Reply {
        let text = |s: Option<String>| Cell::Value(s.map_or(Value::Null, Value::Text));
        let reads = self.table.is_some();
        let row = vec![
            Cell::Value(Value::Int(1)),
            text(Some(self.select_type.to_owned())),
            text(self.table),
            text(None),
            text(self.kind.map(str::to_owned)),
            text((!self.possible_keys.is_empty()).then(|| self.possible_keys.join(","))),
            text(self.key),
            text(self.key_len.map(|n| n.to_string())),
            text(self.refs),
            Cell::Value((self.rows).map_or(Value::Null, |r| {
                Value::Int(i64::try_from(r).unwrap_or(i64::MAX))
            })),
            text(reads.then(|| "100.00".to_owned())),
            text((!self.extra.is_empty()).then(|| self.extra.join("; "))),
        ];
        Reply::rows(columns(), vec![row])
    }
}

/// The columns of EXPLAIN's answer, as MySQL's.
pub(super) fn columns() -> Vec<ColumnDef> {
    [
        ("id", ty::LONGLONG),
        ("select_type", ty::VAR_STRING),
        ("table", ty::VAR_STRING),
        ("partitions", ty::VAR_STRING),
        ("type", ty::VAR_STRING),
        ("possible_keys", ty::VAR_STRING),
        ("key", ty::VAR_STRING),
        ("key_len", ty::VAR_STRING),
        ("ref", ty::VAR_STRING),
        ("rows", ty::LONGLONG),
        ("filtered", ty::VAR_STRING),
        ("Extra", ty::VAR_STRING),
    ]
    .iter()
    .map(|&(name, t)| computed(name, t))
    .collect()
}

fn using_where(filters: bool) -> Vec<String> {
    if filters {
        vec!["Using where".into()]
    } else {
        Vec::new()
    }
}

/// `rows` times `share`, rounded up, and one at least: an estimate of the
/// rows in a range, which one fragment's tree may put at none where
/// another fragment holds some (MySQL's estimates are never 0 either).
fn estimate(rows: u64, share: f64) -> u64 {
    ((rows as f64 * share.clamp(0.0, 1.0)).ceil() as u64).clamp(rows.min(1), rows)
}

/// The bytes of the first `used` columns of index `index` of `table`.
fn key_len(table: &Table, index: &str, used: usize) -> Option<usize> {
    let ordered = table.layout.ordered.iter().find(|o| o.name == index)?;
    Some(
        (ordered.order.iter().take(used.min(ordered.columns)))
            .map(|&c| column_len(table, usize::from(c)))
            .sum(),
    )
}

/// The bytes a column of a key takes: its longest value as stored, and one
/// for its NULL flag if it may be NULL.
fn column_len(table: &Table, c: usize) -> usize {
    let column = &table.def().columns[c];
    column.column_type.max_size() + usize::from(column.nullable)
}

/// EXPLAIN's optional `FORMAT = name`: the traditional table only.
fn explain_format(rest: &[Token]) -> Result<&[Token], MyError> {
    if !word(rest.first()).is_some_and(|w| w.eq_ignore_ascii_case("FORMAT")) {
        return Ok(rest);
    }
    let name = match rest.get(1..3) {
        Some([Token::Eq, name]) => word(Some(name)).unwrap_or_default(),
        _ => {
            return Err(MyError::syntax(
                "EXPLAIN FORMAT takes = and a format's name",
            ));
        }
    };
    match name.to_ascii_uppercase().as_str() {
        "TRADITIONAL" => Ok(&rest[3..]),
        "JSON" | "TREE" => Err(MyError::unsupported(format!("EXPLAIN FORMAT={name}"))),
        _ => Err(MyError::new(
            1791,
            "HY000",
            format!("Unknown EXPLAIN format name: '{name}'"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_estimate_is_never_more_than_the_rows_and_never_zero_for_a_share() {
        assert_eq!(estimate(1000, 0.25), 250);
        assert_eq!(estimate(1000, 0.0001), 1);
        assert_eq!(estimate(1000, 0.0), 1);
        assert_eq!(estimate(1000, 7.0), 1000);
        assert_eq!(estimate(0, 0.5), 0);
    }

    #[test]
    fn only_the_traditional_format_is_taken() {
        let tokens = |s: &str| super::super::query::tokenize(s).unwrap();
        let t = tokens("FORMAT = TRADITIONAL SELECT 1");
        assert_eq!(
            keyword(explain_format(&t).unwrap().first()),
            Some(Keyword::SELECT)
        );
        let t = tokens("SELECT 1");
        assert_eq!(explain_format(&t).unwrap().len(), t.len());
        assert_eq!(
            explain_format(&tokens("FORMAT = JSON SELECT 1"))
                .unwrap_err()
                .code,
            1235
        );
        assert_eq!(
            explain_format(&tokens("FORMAT = yaml SELECT 1"))
                .unwrap_err()
                .code,
            1791
        );
        assert_eq!(
            explain_format(&tokens("FORMAT SELECT 1")).unwrap_err().code,
            1064
        );
    }
}
