//! Scans of an ordered index: every fragment scanned at once, a step at a
//! time, and the steps merged in index order.
//!
//! Each fragment answers its next rows in index order; the coordinator keeps
//! what each answered and hands out the smallest row of all, asking a
//! fragment for more only when its rows run out — so a page of `limit` rows
//! costs about `limit` rows of work wherever the rows lie. Rows are read
//! committed and never wait for a writer; a page ends with the key of its
//! last row, from which the next page starts.

use std::cmp::Ordering;
use std::sync::Arc;

use super::batch::{self, OperationError};
use super::{Grant, Table, Tc, TcError, Transaction};
use crate::storage::codec;
use crate::storage::fragment::{Bound, IndexChunk, IndexStep, compare_keys};
use crate::storage::layout::Layout;
use crate::storage::projection::Projection;
use crate::types::value::Value;
use crate::types::{AUTOCOMMIT, TxnId};

/// Rows a fragment answers per step at most.
const STEP_ROWS: usize = 1000;

/// A scan of one page of an ordered index.
#[derive(Debug, Clone, Copy)]
pub struct RangeScan<'a> {
    /// The index by name; the primary key's if `None`.
    pub index: Option<&'a str>,
    /// Values for the first columns of the index, and whether rows equal to
    /// them are in; `Value::Null` stands for NULL.
    pub lower: Option<(&'a [Value], bool)>,
    pub upper: Option<(&'a [Value], bool)>,
    /// The key a page before ended with (`RangePage::next`): the scan goes
    /// on after it.
    pub after: Option<&'a [Value]>,
    /// Rows in the page at most (at least 1).
    pub limit: usize,
    /// Bytes of rows in the page, about: the page ends after the row that
    /// passes this.
    pub max_bytes: usize,
    /// The columns the caller reads of each row: only these (and the
    /// index's, which end a page) are decoded, the others answered NULL.
    /// `None`: every column.
    pub columns: Option<&'a [u16]>,
}

/// A page of a scan.
#[derive(Debug)]
pub struct RangePage {
    pub rows: Vec<batch::Row>,
    /// The key of the page's last row, where the next page starts; `None`
    /// when the range is done.
    pub next: Option<Vec<Value>>,
    /// Index entries examined, each charged as a read.
    pub examined: u64,
}

/// One fragment's part of a scan: the rows it answered, from `at` on not
/// yet handed out, and where its next step starts (`done`: it has no more).
struct Source {
    fragment: usize,
    chunk: IndexChunk,
    at: usize,
    from: Option<Bound>,
    done: bool,
}

impl Source {
    fn is_empty(&self) -> bool {
        self.at == self.chunk.rows.len()
    }

    /// The image of its first row not handed out.
    fn first(&self) -> &[u8] {
        let (begin, len) = self.chunk.rows[self.at];
        &self.chunk.out[begin as usize..][..len as usize]
    }
}

impl Tc {
    /// A page of a scan of an ordered index of `table` for the holder of
    /// `grant`: rows `reader` holds as it left them, every other row as
    /// committed (every row, if `None`). Admitted as one read; every index
    /// entry examined past the first is charged a read unit that the
    /// database's next reads pay.
    pub async fn scan_range(
        &self,
        grant: &Grant,
        reader: Option<&Transaction>,
        table: &Arc<Table>,
        scan: RangeScan<'_>,
    ) -> Result<RangePage, TcError> {
        self.serving()?;
        let range = prepare(table, scan)?;
        let admitted = self.admit_scan(grant, table).await?;
        let started = std::time::Instant::now();
        let page = self
            .merge(table, range, Transaction::reader_id(reader))
            .await;
        if let Ok(page) = &page {
            admitted.owe_reads(page.examined.saturating_sub(1));
        }
        self.finished(&admitted.db, started);
        page
    }

    /// About what share of its index's entries a range holds: one descent
    /// of the first fragment's tree, as RonSQL estimates its ranges (what
    /// EXPLAIN shows). `None`: the table has no fragment to ask.
    pub(crate) async fn range_share(
        &self,
        table: &Arc<Table>,
        index: &str,
        lower: Option<(&[Value], bool)>,
        upper: Option<(&[Value], bool)>,
    ) -> Result<Option<f64>, TcError> {
        let Some(&place) = table.fragments.first() else {
            return Ok(None);
        };
        let scan = RangeScan {
            index: Some(index),
            lower,
            upper,
            after: None,
            limit: 1,
            max_bytes: 1,
            columns: None,
        };
        let range = prepare(table, scan)?;
        let index = &table.layout.ordered[range.index].name;
        (self.inner.workers)
            .range_share(table.id, place, index, range.start, range.upper)
            .await
            .map_err(TcError::from)
    }

    /// A page of a scan for the node's own housekeeping: neither checked
    /// nor charged to the database.
    pub(crate) async fn scan_range_housekeeping(
        &self,
        table: &Arc<Table>,
        scan: RangeScan<'_>,
    ) -> Result<RangePage, TcError> {
        self.serving()?;
        let range = prepare(table, scan)?;
        self.merge(table, range, AUTOCOMMIT).await
    }

    /// Scans a range of an index on every fragment of `table`, its rows as
    /// `reader` sees them, merging in index order, until its `limit` rows
    /// or `max_bytes`.
    async fn merge(
        &self,
        table: &Arc<Table>,
        range: Range,
        reader: TxnId,
    ) -> Result<RangePage, TcError> {
        let Range {
            index: i,
            start,
            upper,
            limit,
            max_bytes,
            projection,
        } = range;
        let layout = &table.layout;
        let order = &layout.ordered[i].order;
        let gone = || TcError::Operation {
            index: 0,
            error: OperationError::NoSuchTable {
                table: table.name().to_string(),
            },
        };
        let mut sources: Vec<Source> = (0..table.fragments.len())
            .map(|fragment| Source {
                fragment,
                chunk: IndexChunk::default(),
                at: 0,
                from: start.clone(),
                done: false,
            })
            .collect();
        // Rows are spread over the fragments by a hash of their key: each
        // is asked for its share of the page and a little more, and again
        // only if its rows run out first.
        let step = Arc::new(IndexStep {
            index: layout.ordered[i].name.as_str().into(),
            reader,
            to: upper,
            projection,
            limit: (limit.div_ceil(sources.len()) + limit / 8 + 1).min(STEP_ROWS),
            max_bytes,
        });
        let projection = &step.projection;
        let (mut rows, mut bytes, mut examined) = (Vec::new(), 0usize, 0u64);
        loop {
            let empty: Vec<usize> = (0..sources.len())
                .filter(|&s| sources[s].is_empty() && !sources[s].done)
                .collect();
            if !empty.is_empty() {
                let steps = (empty.iter())
                    .map(|&s| (table.fragments[sources[s].fragment], sources[s].from.take()))
                    .collect();
                let chunks = (self.inner.workers)
                    .scan_index(table.id, steps, &step)
                    .await?;
                for (&s, chunk) in empty.iter().zip(chunks) {
                    let chunk = chunk.ok_or_else(gone)?;
                    examined += chunk.examined as u64;
                    let source = &mut sources[s];
                    source.done = chunk.next.is_none();
                    source.from = chunk.next.clone();
                    source.chunk = chunk;
                    source.at = 0;
                }
                continue;
            }
            // Every fragment not done has rows: the smallest of their first
            // rows is the next in the index.
            let best = (0..sources.len())
                .filter(|&s| !sources[s].is_empty())
                .min_by(|&a, &b| {
                    projection.compare(layout, sources[a].first(), sources[b].first())
                });
            let Some(best) = best else {
                return Ok(RangePage {
                    rows,
                    next: None,
                    examined,
                });
            };
            let image = sources[best].first();
            bytes += image.len();
            rows.push(batch::Row::new(table, projection.decode(layout, image)));
            sources[best].at += 1;
            if rows.len() == limit || bytes >= max_bytes {
                let more = sources.iter().any(|s| !s.done || !s.is_empty());
                let next = more.then(|| {
                    let last = rows.last().expect("a row").values();
                    order.iter().map(|&c| last[c as usize].clone()).collect()
                });
                return Ok(RangePage {
                    rows,
                    next,
                    examined,
                });
            }
        }
    }
}

/// Checks a scan's bounds against its index and encodes them.
fn prepare(table: &Arc<Table>, scan: RangeScan<'_>) -> Result<Range, TcError> {
    let layout = &table.layout;
    let fail = |error| TcError::Operation { index: 0, error };
    let name = scan.index.unwrap_or(shoal_wire::schema::PRIMARY_INDEX);
    let i = layout.ordered_index(name).ok_or_else(|| {
        fail(OperationError::NoSuchIndex {
            table: table.name().to_string(),
            index: name.to_owned(),
        })
    })?;
    let ordered = &layout.ordered[i];
    let bound = |values: &[Value], inclusive: bool, most: usize| {
        if values.len() > most {
            return Err(fail(OperationError::Value(codec::ValueError::named(
                ordered.name.clone(),
                format!(
                    "a bound of index '{}' has at most {most} values, one for each of its columns in order; this one has {}",
                    ordered.name,
                    values.len()
                ),
            ))));
        }
        let values = (ordered.order.iter().zip(values))
            .map(|(&c, v)| match v {
                Value::Null => Ok(None),
                v => codec::encode_operand(layout, c, v).map(Some),
            })
            .collect::<Result<_, _>>()
            .map_err(|e| fail(OperationError::Value(e)))?;
        Ok(Bound { values, inclusive })
    };
    let lower = (scan.lower)
        .map(|(v, inclusive)| bound(v, inclusive, ordered.columns))
        .transpose()?;
    let upper = (scan.upper)
        .map(|(v, inclusive)| bound(v, inclusive, ordered.columns))
        .transpose()?;
    let after = match scan.after {
        Some(v) if v.len() != ordered.order.len() => {
            return Err(fail(OperationError::Value(codec::ValueError::named(
                ordered.name.clone(),
                "the scan's cursor is not one of this index",
            ))));
        }
        Some(v) => Some(bound(v, false, ordered.order.len())?),
        None => None,
    };
    let start = match (lower, after) {
        (Some(lower), Some(after)) => Some(later(layout, &ordered.order, lower, after)),
        (lower, after) => after.or(lower),
    };
    let projection = Projection::new(layout, &ordered.order, scan.columns);
    Ok(Range {
        index: i,
        start,
        upper,
        limit: scan.limit.max(1),
        max_bytes: scan.max_bytes.max(1),
        projection,
    })
}

/// A scan's page, its bounds encoded as the index compares them.
struct Range {
    index: usize,
    start: Option<Bound>,
    upper: Option<Bound>,
    limit: usize,
    max_bytes: usize,
    /// The columns of each row the fragments answer.
    projection: Projection,
}

/// Where a scan bounded below by `lower` and going on after `after` starts:
/// whichever of the two lets fewer rows in.
fn later(layout: &Layout, order: &[u16], lower: Bound, after: Bound) -> Bound {
    match compare_keys(layout, order, &after.values, &lower.values) {
        Ordering::Less => lower,
        Ordering::Equal if !lower.inclusive => lower,
        _ => after,
    }
}
