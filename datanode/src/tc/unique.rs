//! Unique ordered indexes: no two rows of a table have the same values of
//! a unique index's columns (rows with a NULL among them are not compared,
//! as in MySQL).
//!
//! Rows are spread over the fragments by their primary key, so no one
//! fragment can tell whether another holds a row with the same values.
//! The coordinator checks instead, before a batch runs: for each write
//! that sets a unique index's columns it takes a lock on those values (one
//! of `STRIPES`, by hash; every writer of the database goes through this
//! node's coordinator, its group's primary), looks them up in the index on
//! every fragment, and refuses the batch if another row has them — unless
//! the batch itself deletes that row or moves it to other values. The
//! locks are held until the batch is applied, so two writers of the same
//! values are checked one after the other. A batch refused changes nothing.
//!
//! A transaction open across statements holds its locks until it ends
//! ([`Claims`]), and keeps the values it gave the rows it wrote: the index
//! shows readers committed rows only, so the transaction's own rows are
//! looked up there, and its deleted or moved rows no longer count. The
//! values it frees — of rows it deletes, or gives other values — stay
//! locked too. A writer of values another transaction holds or freed
//! waits for it, at most the lock-wait timeout, and then finds them as
//! that transaction left them.

use std::sync::Arc;
use std::time::Duration;

use rustc_hash::{FxHashMap, FxHashSet};
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::batch::{Batch, Given, OperationError, UniqueWrite, duplicate_entry};
use super::{Tc, TcError};
use crate::ldm::OpKind;
use crate::storage::OpError;
use crate::storage::codec;
use crate::storage::fragment::{Bound, IndexStep};
use crate::storage::projection::Projection;
use crate::tc::Table;
use crate::types::value::Value;
use crate::types::{AUTOCOMMIT, TableId};

/// Locks on unique values, by hash.
const STRIPES: usize = 4096;

#[derive(Debug)]
pub(crate) struct UniqueLocks {
    stripes: Box<[Arc<Mutex<()>>]>,
}

impl UniqueLocks {
    pub(crate) fn new() -> UniqueLocks {
        UniqueLocks {
            stripes: (0..STRIPES).map(|_| Arc::new(Mutex::new(()))).collect(),
        }
    }

    /// Takes stripes `ids`, in one order for every caller, waiting at most
    /// `wait` for all of them; `None` if they are not all had by then
    /// (none is kept).
    async fn lock(&self, mut ids: Vec<usize>, wait: Duration) -> Option<Vec<OwnedMutexGuard<()>>> {
        ids.sort_unstable();
        ids.dedup();
        let take = async {
            let mut held = Vec::with_capacity(ids.len());
            for id in ids {
                held.push(Arc::clone(&self.stripes[id]).lock_owned().await);
            }
            held
        };
        tokio::time::timeout(wait, take).await.ok()
    }
}

/// What checking a batch's unique values leaves: the locks, held until it
/// is applied, and the writes refused on their own.
#[derive(Debug, Default)]
pub(super) struct Unique {
    guards: Vec<OwnedMutexGuard<()>>,
    refused: Vec<(usize, OpError)>,
}

impl Unique {
    /// Answers the refused writes' errors, once the batch ran.
    pub(super) fn fail(&self, batch: &mut Batch) {
        for &(op, error) in &self.refused {
            batch.fail(op, error);
        }
    }
}

/// What an open transaction holds of unique indexes: the stripes it has
/// locked, until it ends, and the rows it has written to tables with
/// unique indexes, which the index shows others (and it) as committed.
#[derive(Debug, Default)]
pub(super) struct Claims {
    guards: Vec<OwnedMutexGuard<()>>,
    stripes: FxHashSet<usize>,
    /// By table, then primary key (encoded): looked up by a borrowed key.
    rows: FxHashMap<TableId, FxHashMap<Vec<u8>, Written>>,
}

/// A row an open transaction has written: deleted, or the columns it now
/// has of each unique index the transaction set (`None`: NULL).
#[derive(Debug, Default)]
struct Written {
    deleted: bool,
    columns: FxHashMap<usize, Columns>,
}

/// A row's values of a unique index's columns, each `None` if NULL.
type Columns = Vec<Option<Vec<u8>>>;

/// What an open transaction knows of a row's values of an index.
enum Mine<'a> {
    /// Nothing: it has not set them; they are as committed.
    Unknown,
    /// It deleted the row.
    Deleted,
    Columns(&'a [Option<Vec<u8>>]),
}

/// Whether `columns` are `values`: none NULL, each the same.
fn are(columns: &[Option<Vec<u8>>], values: &[Vec<u8>]) -> bool {
    columns.len() == values.len()
        && (columns.iter().zip(values)).all(|(c, v)| c.as_deref() == Some(v.as_slice()))
}

impl Claims {
    /// Lets go of every lock: the transaction has ended.
    pub(super) fn release(&mut self) {
        *self = Claims::default();
    }

    /// Whether row `key`, which the index shows with `values` of `index`
    /// as committed, has them still as this transaction sees it.
    fn still_holds(&self, table: TableId, index: usize, key: &[u8], values: &[Vec<u8>]) -> bool {
        match self.mine(table, index, key) {
            Mine::Unknown => true,
            Mine::Deleted => false,
            Mine::Columns(now) => are(now, values),
        }
    }

    /// The rows this transaction gave `values` of `index` (not yet committed).
    fn holders<'a>(
        &'a self,
        table: TableId,
        index: usize,
        values: &'a [Vec<u8>],
    ) -> impl Iterator<Item = &'a [u8]> + 'a {
        (self.rows.get(&table).into_iter().flatten())
            .filter(move |(_, w)| {
                !w.deleted && w.columns.get(&index).is_some_and(|now| are(now, values))
            })
            .map(|(key, _)| key.as_slice())
    }

    /// What this transaction knows of row `key`'s values of `index`.
    fn mine(&self, table: TableId, index: usize, key: &[u8]) -> Mine<'_> {
        match self.rows.get(&table).and_then(|rows| rows.get(key)) {
            None => Mine::Unknown,
            Some(w) if w.deleted => Mine::Deleted,
            Some(w) => w
                .columns
                .get(&index)
                .map_or(Mine::Unknown, |c| Mine::Columns(c)),
        }
    }

    /// Keeps what a statement that ran wrote: its deletes, then its writes.
    pub(super) fn record(&mut self, batch: &Batch, wrote: Vec<Wrote>) {
        for (table, key) in &batch.unique_deletes {
            let w = (self.rows.entry(table.id).or_default())
                .entry(key.clone())
                .or_default();
            w.deleted = true;
            w.columns.clear();
        }
        for wrote in wrote {
            let w = (self.rows.entry(wrote.table).or_default())
                .entry(wrote.key)
                .or_default();
            let inserted = wrote.kind == OpKind::Insert || w.deleted;
            w.deleted = false;
            match wrote.holds {
                Holds::Values(v) => {
                    w.columns
                        .insert(wrote.index, v.into_iter().map(Some).collect());
                }
                Holds::Columns(c) => {
                    w.columns.insert(wrote.index, c);
                }
                // A row inserted anew, given none of the columns: NULLs.
                Holds::Same if inserted => {
                    w.columns.insert(wrote.index, vec![None; wrote.columns]);
                }
                Holds::Same => {}
            }
        }
    }
}

/// A write's values of one unique index, once the batch has run.
pub(super) struct Wrote {
    table: TableId,
    key: Vec<u8>,
    kind: OpKind,
    index: usize,
    /// The index's columns.
    columns: usize,
    holds: Holds,
}

/// What values of its unique index a write leaves its row with.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Holds {
    /// The ones it had: the write sets none of the index's columns.
    Same,
    /// Values compared with other rows': none is NULL.
    Values(Vec<Vec<u8>>),
    /// Not compared: a NULL among them (or no row to take them from).
    Columns(Columns),
}

/// A row's values of a unique index that a statement may take away: the
/// row's table and key, the index, and what the statement leaves it with
/// (`None`: it deletes the row).
type GivenUp<'a> = (&'a Arc<Table>, &'a [u8], usize, Option<&'a Holds>);

/// Values of a unique index of a table: (table, index, values).
type Taken<'a> = (TableId, usize, &'a [Vec<u8>]);

/// A write's values of one unique index, complete.
struct Checked<'a> {
    write: &'a UniqueWrite,
    values: &'a [Vec<u8>],
}

/// The values a write gives a unique index, as its refusal names them.
fn entry(c: &Checked<'_>) -> String {
    let w = c.write;
    let layout = &w.table.layout;
    let values: Vec<Value> = (layout.ordered[w.index].order.iter())
        .zip(c.values)
        .map(|(&col, bytes)| codec::value_of(layout.columns[usize::from(col)].ty, bytes))
        .collect();
    duplicate_entry(&values)
}

impl Tc {
    /// Checks the batch's writes to unique indexes: the locks to hold until
    /// it is applied. An atomic batch that would duplicate is refused
    /// (`Err` names the first write); in a batch of operations each on its
    /// own (`each`), such a write is made to change nothing and answers
    /// the refusal on its own (`Unique::fail`), the others run.
    pub(super) async fn check_unique(
        &self,
        batch: &mut Batch,
        each: bool,
    ) -> Result<Unique, TcError> {
        let mut unique = Unique::default();
        if batch.uniques.is_empty() {
            return Ok(unique);
        }
        let holds = self.complete_all(batch, None).await?;
        let checked = checked(batch, &holds);
        let stripes = (checked.iter())
            .map(|c| self.stripe(c.write.table.id, c.write.index, c.values))
            .collect();
        let blame =
            (checked.first()).map_or((0, ""), |c| (c.write.op, c.write.table.name().as_str()));
        unique.guards = self.lock_stripes(stripes, blame).await?;
        let refused = self.find_duplicates(batch, &checked, each, None).await?;
        for (op, index, entry) in refused {
            batch.skip(op);
            batch.duplicates.push((op, entry));
            unique
                .refused
                .push((op, OpError::DuplicateUnique(index as u16)));
        }
        Ok(unique)
    }

    /// Checks the writes to unique indexes of a statement of an open
    /// transaction, as this transaction sees the rows (`claims`), and
    /// locks their values until the transaction ends. A duplicate is
    /// refused (`Err`); else what to record once the statement has run
    /// (`Claims::record`).
    pub(super) async fn check_unique_in(
        &self,
        batch: &Batch,
        claims: &mut Claims,
    ) -> Result<Vec<Wrote>, TcError> {
        if batch.uniques.is_empty() && batch.unique_deletes.is_empty() {
            return Ok(Vec::new());
        }
        let holds = self.complete_all(batch, Some(claims)).await?;
        let checked = checked(batch, &holds);
        // The values it writes, and those it frees: another writer of a
        // value a row of this transaction gave up waits for it to end.
        let mut stripes: Vec<usize> = (checked.iter())
            .map(|c| self.stripe(c.write.table.id, c.write.index, c.values))
            .collect();
        stripes.extend(self.freed(batch, &holds, claims).await?);
        stripes.retain(|s| !claims.stripes.contains(s));
        let blame = match (checked.first(), batch.unique_deletes.first()) {
            (Some(c), _) => (c.write.op, c.write.table.name().as_str()),
            (None, Some((t, _))) => (0, t.name().as_str()),
            (None, None) => (0, ""),
        };
        let guards = self.lock_stripes(stripes.clone(), blame).await?;
        claims.stripes.extend(stripes);
        claims.guards.extend(guards);
        self.find_duplicates(batch, &checked, false, Some(claims))
            .await?;
        Ok((batch.uniques.iter().zip(holds))
            .map(|(w, holds)| Wrote {
                table: w.table.id,
                key: w.key.clone(),
                kind: w.kind,
                index: w.index,
                columns: w.table.layout.ordered[w.index].columns,
                holds,
            })
            .collect())
    }

    /// The stripes of the values a statement of an open transaction takes
    /// away from rows — every unique value of a row it deletes, and each
    /// one a write replaces — as the transaction sees those rows.
    async fn freed(
        &self,
        batch: &Batch,
        holds: &[Holds],
        claims: &Claims,
    ) -> Result<Vec<usize>, TcError> {
        let mut given_up: Vec<GivenUp<'_>> = Vec::new();
        for (table, key) in &batch.unique_deletes {
            for (index, o) in table.layout.ordered.iter().enumerate() {
                if o.unique {
                    given_up.push((table, key, index, None));
                }
            }
        }
        for (w, h) in batch.uniques.iter().zip(holds) {
            if w.kind != OpKind::Insert && *h != Holds::Same {
                given_up.push((&w.table, &w.key, w.index, Some(h)));
            }
        }
        if given_up.is_empty() {
            return Ok(Vec::new());
        }
        // The rows as committed, for the indexes the transaction has not set.
        let mut read = self.batch();
        for (table, key, ..) in &given_up {
            read.read_encoded(table, key);
        }
        self.run_each(&mut read).await?;
        let mut stripes = Vec::new();
        for (i, (table, key, index, now)) in given_up.into_iter().enumerate() {
            let columns = &table.layout.ordered[index].order[..table.layout.ordered[index].columns];
            let old: Option<Vec<Vec<u8>>> = match claims.mine(table.id, index, key) {
                Mine::Deleted => None,
                Mine::Columns(c) => c.iter().cloned().collect(),
                Mine::Unknown => match read.found(i) {
                    Ok(Some(row)) => columns
                        .iter()
                        .map(|&c| row.bytes(c).map(<[u8]>::to_vec))
                        .collect(),
                    _ => None,
                },
            };
            let Some(old) = old else { continue };
            if now.is_some_and(|h| *h == Holds::Values(old.clone())) {
                continue;
            }
            stripes.push(self.stripe(table.id, index, &old));
        }
        Ok(stripes)
    }

    /// What each of the batch's unique writes leaves its row with.
    async fn complete_all(
        &self,
        batch: &Batch,
        own: Option<&Claims>,
    ) -> Result<Vec<Holds>, TcError> {
        let mut holds = Vec::with_capacity(batch.uniques.len());
        for write in &batch.uniques {
            holds.push(self.complete(write, own).await?);
        }
        Ok(holds)
    }

    /// The stripe of `values` of unique index `index` of table `table`.
    fn stripe(&self, table: TableId, index: usize, values: &[Vec<u8>]) -> usize {
        let mut h = xxhash_rust::xxh3::Xxh3::with_seed(self.inner.seed);
        h.update(&table.0.to_le_bytes());
        h.update(&(index as u32).to_le_bytes());
        for v in values {
            h.update(&(v.len() as u32).to_le_bytes());
            h.update(v);
        }
        (h.digest() % STRIPES as u64) as usize
    }

    /// Takes `stripes`, at most the lock-wait timeout: past it, a lock-wait
    /// timeout of `blame` (the operation, and its table).
    async fn lock_stripes(
        &self,
        stripes: Vec<usize>,
        blame: (usize, &str),
    ) -> Result<Vec<OwnedMutexGuard<()>>, TcError> {
        if stripes.is_empty() {
            return Ok(Vec::new());
        }
        let wait = self.inner.workers.lock_wait();
        match self.inner.unique_locks.lock(stripes, wait).await {
            Some(guards) => Ok(guards),
            None => Err(TcError::Operation {
                index: blame.0,
                error: OperationError::LockWaitTimeout {
                    table: blame.1.to_owned(),
                },
            }),
        }
    }

    /// The writes (operation, index, the values as the error names them)
    /// that would duplicate, all of them when `each`; `Err` for the first
    /// otherwise. `own`: the open transaction
    /// the batch is a statement of, whose rows the index shows as committed.
    async fn find_duplicates(
        &self,
        batch: &Batch,
        checked: &[Checked<'_>],
        each: bool,
        own: Option<&Claims>,
    ) -> Result<Vec<(usize, usize, String)>, TcError> {
        let mut refused: Vec<(usize, usize, String)> = Vec::new();
        // Rows the batch deletes, or gives other values: their old values
        // are free for its other writes.
        let deleted = |table: TableId, key: &[u8]| {
            (batch.unique_deletes.iter()).any(|(t, k)| t.id == table && k == key)
        };
        // Each value of each index the batch writes, and whose row takes it.
        let mut mine: FxHashMap<Taken<'_>, &[u8]> = FxHashMap::default();
        for c in checked {
            let w = c.write;
            let duplicate = || TcError::Operation {
                index: w.op,
                error: OperationError::DuplicateUnique {
                    table: w.table.name().to_string(),
                    index: w.table.layout.ordered[w.index].name.clone(),
                    entry: entry(c),
                },
            };
            if refused.iter().any(|&(op, ..)| op == w.op) {
                continue;
            }
            let mut refuse = || {
                if each {
                    refused.push((w.op, w.index, entry(c)));
                    Ok(())
                } else {
                    Err(duplicate())
                }
            };
            if let Some(&other) = mine.get(&(w.table.id, w.index, c.values))
                && other != w.key.as_slice()
            {
                refuse()?;
                continue;
            }
            let moved = |key: &[u8]| {
                (checked.iter()).any(|o| {
                    o.write.table.id == w.table.id
                        && o.write.index == w.index
                        && o.write.key == key
                        && o.values != c.values
                })
            };
            let other = |key: &[u8]| key != w.key && !deleted(w.table.id, key) && !moved(key);
            let committed = (self.holders(w, c.values).await?)
                .into_iter()
                .filter(|key| own.is_none_or(|o| o.still_holds(w.table.id, w.index, key, c.values)))
                .any(|key| other(&key));
            let uncommitted =
                own.is_some_and(|o| (o.holders(w.table.id, w.index, c.values)).any(other));
            if committed || uncommitted {
                refuse()?;
                continue;
            }
            mine.insert((w.table.id, w.index, c.values), &w.key);
        }
        Ok(refused)
    }

    /// What values of its index the write leaves its row with: those it
    /// does not give taken from its row as it is (as the open transaction
    /// `own` left it, if the write is one of its statements').
    async fn complete(&self, write: &UniqueWrite, own: Option<&Claims>) -> Result<Holds, TcError> {
        let layout = &write.table.layout;
        let columns = &layout.ordered[write.index].order[..layout.ordered[write.index].columns];
        // A write that inserts stores the defaults of what it does not give.
        let defaulted = columns
            .iter()
            .any(|&c| layout.defaults[c as usize].is_some());
        if write.values.iter().all(|v| *v == Given::Missing) && !defaulted {
            return Ok(Holds::Same);
        }
        let missing = write.values.contains(&Given::Missing);
        let mine = own.map_or(Mine::Unknown, |o| {
            o.mine(write.table.id, write.index, &write.key)
        });
        let read;
        let row = match (missing, write.kind, &mine) {
            (true, OpKind::Update | OpKind::Write, Mine::Unknown) => {
                let mut batch = self.batch();
                batch.read_encoded(&write.table, &write.key);
                self.run_each(&mut batch).await?;
                read = batch;
                read.found(0).map_err(|error| TcError::Operation {
                    index: write.op,
                    error,
                })?
            }
            _ => None,
        };
        let mut values = Vec::with_capacity(columns.len());
        for (at, (&c, given)) in columns.iter().zip(&write.values).enumerate() {
            values.push(match given {
                Given::Null => None,
                Given::Bytes(b) => Some(b.clone()),
                // An update of no row fails on its own; a write of none
                // inserts the column's default, or NULL.
                Given::Missing => match (&mine, &row, &layout.defaults[c as usize]) {
                    (Mine::Columns(now), ..) => now[at].clone(),
                    (Mine::Unknown, Some(row), _) => row.bytes(c).map(<[u8]>::to_vec),
                    (_, _, Some(d)) if *d != Value::Null && write.kind == OpKind::Write => {
                        Some(codec::encode_operand(layout, c, d).map_err(|e| {
                            TcError::Operation {
                                index: write.op,
                                error: OperationError::Value(e),
                            }
                        })?)
                    }
                    _ => None,
                },
            });
        }
        Ok(match values.iter().all(Option::is_some) {
            true => Holds::Values(values.into_iter().flatten().collect()),
            false => Holds::Columns(values),
        })
    }

    /// The primary keys (encoded) of the rows whose values of the write's
    /// index are `values`, on every fragment.
    async fn holders(&self, w: &UniqueWrite, values: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, TcError> {
        let layout = &w.table.layout;
        let bound = Bound {
            values: values.iter().cloned().map(Some).collect(),
            inclusive: true,
        };
        let steps = (w.table.fragments.iter())
            .map(|&place| (place, Some(bound.clone())))
            .collect();
        let ordered = &layout.ordered[w.index];
        let step = Arc::new(IndexStep {
            index: ordered.name.as_str().into(),
            // What committed: the transaction's own values are its claims.
            reader: AUTOCOMMIT,
            to: Some(bound),
            projection: Projection::new(layout, &ordered.order, Some(&[])),
            limit: 4,
            max_bytes: 1 << 20,
        });
        let chunks = (self.inner.workers)
            .scan_index(w.table.id, steps, &step)
            .await?;
        let mut keys = Vec::new();
        for chunk in chunks.into_iter().flatten() {
            for &(begin, len) in &chunk.rows {
                let image = &chunk.out[begin as usize..][..len as usize];
                let mut key = Vec::new();
                step.projection.key_of(layout, image, &mut key);
                keys.push(key);
            }
        }
        Ok(keys)
    }
}

/// The writes whose values are compared: the ones to lock and check.
fn checked<'a>(batch: &'a Batch, holds: &'a [Holds]) -> Vec<Checked<'a>> {
    (batch.uniques.iter().zip(holds))
        .filter_map(|(write, holds)| match holds {
            Holds::Values(values) => Some(Checked { write, values }),
            _ => None,
        })
        .collect()
}
