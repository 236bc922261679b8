//! Statements that find their rows by a WHERE clause rather than by whole
//! keys: a range of an ordered index where the clause bounds one (the
//! primary key's, or the table's own), else every fragment's rows. Each
//! page of rows comes through the coordinator, read committed (rows the
//! session's open transaction changed as it left them) and charged a read
//! unit per index entry or row examined, and the clause is checked on
//! every row it gives.
//!
//! A statement takes at most `MAX_SCAN_ROWS` rows that pass: past them it
//! is refused (1105, nothing changed), never cut short, unless a LIMIT
//! without ORDER BY or DISTINCT says how many it needs.

use std::sync::Arc;

use super::error::MyError;
use super::filter::{Bounds, Cond, bounds, exactly};
use super::session::Session;
use crate::storage::layout::OrderedLayout;
use crate::tc::{Grant, RangeScan, Table};
use crate::types::value::Value;

/// Most rows that pass a scanning statement's WHERE.
pub(crate) const MAX_SCAN_ROWS: usize = 100_000;
/// Rows asked for per page of a scan.
const PAGE_ROWS: usize = 1000;
/// Bytes of rows per page, about.
const PAGE_BYTES: usize = 1 << 20;

/// How a statement's rows are found.
#[derive(Debug)]
pub(crate) struct Scan {
    pub(crate) table: Arc<Table>,
    /// The WHERE clause; `None`: every row.
    cond: Option<Cond>,
    /// Whether each row found is checked against the WHERE: not where the
    /// range holds exactly the rows that pass it (`filter::exactly`).
    checked: bool,
    /// The ordered index whose range holds the rows, and the range; `None`:
    /// every fragment is scanned.
    range: Option<(String, Bounds)>,
    /// The columns read of each row (the WHERE's among them if it is
    /// checked): a range decodes only these.
    columns: Vec<u16>,
}

impl Scan {
    /// The scan of `table` for `cond`, for a statement that reads columns
    /// `reads` of the rows that pass: the ordered index `cond` bounds most
    /// columns of (the primary key's on a tie), if any.
    pub(crate) fn plan(
        table: &Arc<Table>,
        cond: Option<Cond>,
        reads: impl IntoIterator<Item = usize>,
    ) -> Scan {
        let layout = &table.layout;
        let range = cond.as_ref().and_then(|cond| {
            let mut best: Option<(&OrderedLayout, Bounds)> = None;
            for index in &layout.ordered {
                let Some(b) = bounds(cond, &index.order[..index.columns]) else {
                    continue;
                };
                if best
                    .as_ref()
                    .is_none_or(|(_, other)| b.width() > other.width())
                {
                    best = Some((index, b));
                }
            }
            best
        });
        let checked = match (&cond, &range) {
            (Some(cond), Some((index, b))) => {
                !exactly(cond, &index.order[..index.columns], b, layout)
            }
            (Some(_), None) => true,
            (None, _) => false,
        };
        let mut columns: Vec<u16> = reads.into_iter().map(|c| c as u16).collect();
        if let Some(cond) = cond.as_ref().filter(|_| checked) {
            cond.columns(&mut columns);
        }
        columns.sort_unstable();
        columns.dedup();
        Scan {
            table: Arc::clone(table),
            cond,
            checked,
            range: range.map(|(index, b)| (index.name.clone(), b)),
            columns,
        }
    }

    /// Whether its rows are found by an index's range (not every row).
    pub(crate) fn by_index(&self) -> bool {
        self.range.is_some()
    }

    /// The ordered index whose range holds the rows, and the range.
    pub(crate) fn range(&self) -> Option<(&str, &Bounds)> {
        (self.range.as_ref()).map(|(index, b)| (index.as_str(), b))
    }

    /// Whether a WHERE is checked on each row found.
    pub(crate) fn filters(&self) -> bool {
        self.cond.is_some()
    }

    /// Every ordered index whose range the WHERE bounds: those it could
    /// be found by (MySQL's `possible_keys`).
    pub(crate) fn possible_indexes(&self) -> Vec<&str> {
        let Some(cond) = &self.cond else {
            return Vec::new();
        };
        (self.table.layout.ordered.iter())
            .filter(|index| bounds(cond, &index.order[..index.columns]).is_some())
            .map(|index| index.name.as_str())
            .collect()
    }

    /// Whether `row` passes the WHERE (a row read again, as locked: its
    /// index's columns may have changed since the scan found it).
    pub(crate) fn passes(&self, row: &[Value]) -> Result<bool, MyError> {
        match &self.cond {
            Some(c) => c.passes(row),
            None => Ok(true),
        }
    }
}

impl Session {
    /// The rows of `scan` that pass its WHERE (the values of the columns
    /// it reads; from a range, NULL for the others), in its index's order
    /// if it has one: `enough` of them if given, else
    /// all, refused past `MAX_SCAN_ROWS`.
    pub(crate) async fn scan_rows(
        &self,
        grant: &Grant,
        scan: &Scan,
        enough: Option<usize>,
    ) -> Result<Vec<Vec<Value>>, MyError> {
        let reader = self.reader();
        let want = enough.unwrap_or(MAX_SCAN_ROWS + 1);
        let mut rows = Vec::new();
        if want == 0 {
            return Ok(rows);
        }
        let tc = self.engine.tc();
        let table = &scan.table;
        // `max_join_size`: the rows a statement may examine.
        let (most, mut examined) = (self.safety.max_join_size, 0u64);
        let mut take = |values: Vec<Value>, rows: &mut Vec<Vec<Value>>| {
            examined += 1;
            if examined > most {
                return Err(MyError::new(
                    1104,
                    "42000",
                    format!(
                        "The SELECT would examine more than MAX_JOIN_SIZE rows ({most}); check your WHERE and use SET MAX_JOIN_SIZE=# if the statement is okay"
                    ),
                ));
            }
            if !scan.checked || scan.passes(&values)? {
                rows.push(values);
            }
            Ok(rows.len() >= want)
        };
        'scan: {
            match &scan.range {
                Some((index, b)) => {
                    let mut after: Option<Vec<Value>> = None;
                    loop {
                        let page = tc
                            .scan_range(
                                grant,
                                reader,
                                table,
                                RangeScan {
                                    index: Some(index),
                                    lower: b.lower.as_ref().map(|(v, i)| (v.as_slice(), *i)),
                                    upper: b.upper.as_ref().map(|(v, i)| (v.as_slice(), *i)),
                                    after: after.as_deref(),
                                    limit: PAGE_ROWS,
                                    max_bytes: PAGE_BYTES,
                                    columns: Some(&scan.columns),
                                },
                            )
                            .await?;
                        for row in page.rows {
                            if take(row.into_values(), &mut rows)? {
                                break 'scan;
                            }
                        }
                        match page.next {
                            Some(next) => after = Some(next),
                            None => break 'scan,
                        }
                    }
                }
                None => {
                    for fragment in 0..table.fragments.len() {
                        let mut from = 0;
                        loop {
                            let step = tc
                                .scan_step(grant, reader, table, fragment, from, PAGE_ROWS)
                                .await?;
                            for row in step.rows {
                                if take(row.into_values(), &mut rows)? {
                                    break 'scan;
                                }
                            }
                            match step.next {
                                Some(next) => from = next,
                                None => break,
                            }
                        }
                    }
                }
            }
        }
        if enough.is_none() && rows.len() > MAX_SCAN_ROWS {
            return Err(too_many_rows(table));
        }
        Ok(rows)
    }
}

/// What a statement is answered whose WHERE more than `MAX_SCAN_ROWS` rows
/// of `table` pass.
pub(crate) fn too_many_rows(table: &Table) -> MyError {
    MyError::new(
        1105,
        "HY000",
        format!(
            "more than {MAX_SCAN_ROWS} rows of table '{}' pass this WHERE; a statement takes at most that many (narrow the WHERE, or add LIMIT)",
            table.name()
        ),
    )
}
