//! INSERTs whose rows may meet rows already there: `INSERT IGNORE` skips
//! a row whose key is taken, `INSERT … ON DUPLICATE KEY UPDATE` updates
//! the row there instead. A row meets the row with its primary key or, if
//! there is none, the first row that has its values of a UNIQUE index
//! (indexes in the table's order), as in MySQL. Rows are taken in the
//! order given, so a row may meet one an earlier row of the same statement
//! inserted or changed.
//!
//! Both are one atomic change. An ON DUPLICATE KEY UPDATE locks and reads
//! every key its rows name, and every row found holding a row's UNIQUE
//! values (looked up in the index as the transaction sees it), works out
//! each row's final version, and writes them in the same transaction —
//! the session's, or its own. A row that was absent holds no lock: if
//! another client inserts it (or its unique values) in between, the insert
//! meets a duplicate and a statement of its own is run again (at most
//! `TRIES` times); in the session's transaction it fails as MySQL's 1062
//! would.
//!
//! INSERT IGNORE outside a transaction needs no locks: it reads which
//! keys are there, inserts the rest in one atomic request, and drops a row
//! the request finds taken after all — by its primary key or by a UNIQUE
//! index — trying the rest again. Only a taken key is ignored: a value
//! that does not fit its column is an error, as everywhere in Shoal (MySQL
//! would store it clamped, with a warning).

use std::collections::HashMap;
use std::sync::Arc;

use super::error::MyError;
use super::filter::Expression;
use super::query::{compare, key_positions};
use super::session::Session;
use crate::storage::codec;
use crate::storage::codec::ValueError;
use crate::storage::layout::OrderedLayout;
use crate::tc::batch::{Batch, OperationError, Outcome};
use crate::tc::{Commit, Grant, RangeScan, Table, TcError};
use crate::types::value::Value;

/// How many times a statement of its own is run when a row it found
/// absent was inserted by another client before it.
const TRIES: usize = 8;

/// What an INSERT does with a row whose primary key is taken.
pub(super) enum OnDuplicate {
    /// INSERT IGNORE: the row is skipped.
    Skip,
    /// ON DUPLICATE KEY UPDATE: the row there is changed by these
    /// assignments, in order (their expressions may read the row the
    /// INSERT gave, at the table's width and on).
    Update(Vec<(usize, Expression)>),
    /// REPLACE into a table with a UNIQUE index: every row the new one
    /// meets, by its key or by any UNIQUE index, is deleted, and the new
    /// row written.
    Replace,
}

/// What an INSERT of rows that met others did.
pub(super) struct Met {
    /// Rows affected as MySQL counts them: 1 per row inserted, 2 per row
    /// updated to new values, 0 per row left as it was (1 if the client
    /// asked for rows found).
    pub(super) affected: u64,
    /// Rows that met a row there.
    pub(super) duplicates: u64,
}

impl Session {
    /// Inserts `rows` (whole rows, each column's value or default) into
    /// `table`, doing `on` with those that meet a row already there.
    pub(super) async fn insert_meeting(
        &mut self,
        table: &Arc<Table>,
        grant: &Grant,
        rows: &[Vec<Value>],
        on: &OnDuplicate,
    ) -> Result<Met, MyError> {
        if matches!(on, OnDuplicate::Skip) && !self.in_transaction() {
            return self.insert_skipping(table, grant, rows).await;
        }
        let tc = self.engine.tc().clone();
        let mut tries = 0;
        loop {
            tries += 1;
            let mut own = (!self.in_transaction()).then(|| tc.begin());
            let done = self.merge(&mut own, table, grant, rows, on).await;
            let Some(t) = own else {
                return done.map_err(|f| f.error);
            };
            match done {
                Ok(met) => {
                    tc.commit(t).await.map_err(MyError::from)?;
                    return Ok(met);
                }
                Err(Failed { error, again }) => {
                    tc.rollback(t).await.map_err(MyError::from)?;
                    if !again || tries == TRIES {
                        return Err(error);
                    }
                }
            }
        }
    }

    /// One try of an ON DUPLICATE KEY UPDATE (or an INSERT IGNORE in a
    /// transaction) in transaction `own`, or the session's: every key
    /// locked and read, each row met worked out from the rows in order, and
    /// the rows that changed written.
    async fn merge(
        &mut self,
        own: &mut Option<crate::tc::Transaction>,
        table: &Arc<Table>,
        grant: &Grant,
        rows: &[Vec<Value>],
        on: &OnDuplicate,
    ) -> Result<Met, Failed> {
        let tc = self.engine.tc().clone();
        let DistinctKeys {
            keys,
            key_of,
            by_key,
        } = distinct_keys(table, rows)?;
        let mut locked = tc.batch();
        for &r in &keys {
            locked.read_locking(table, &key(table, &rows[r]))?;
        }
        self.run_within(own, grant, &mut locked).await?;
        // Each row met or named, as it is and as the statement leaves it:
        // first the rows' keys, then rows found by their unique values.
        let mut met_rows = MetRows::new(table, found(&locked, keys.len())?, by_key)?;
        let width = table.def().columns.len();
        let mut met = Met {
            affected: 0,
            duplicates: 0,
        };
        for (row, &k) in rows.iter().zip(&key_of) {
            if let OnDuplicate::Replace = on {
                let deleted = self
                    .replace_met(own, table, grant, row, k, &mut met_rows)
                    .await?;
                // MySQL counts the rows deleted and the row written.
                met.affected += 1 + deleted;
                met.duplicates += deleted;
                continue;
            }
            let holder = match met_rows.after[k] {
                Some(_) => Some(k),
                None => {
                    self.unique_holder(own, table, grant, row, &mut met_rows)
                        .await?
                }
            };
            let Some(h) = holder else {
                met_rows.set(table, k, row.clone())?;
                met.affected += 1;
                continue;
            };
            met.duplicates += 1;
            let OnDuplicate::Update(set) = on else {
                continue;
            };
            let old = met_rows.after[h].as_ref().expect("a row met is there");
            let mut both = Vec::with_capacity(2 * width);
            both.extend_from_slice(old);
            both.extend_from_slice(row);
            let changed = apply(table, set, &mut both)?;
            both.truncate(width);
            if changed {
                met.affected += 2;
                met_rows.set(table, h, both)?;
            } else if self.found_rows() {
                met.affected += 1;
            }
        }
        let MetRows { there, after, .. } = met_rows;
        let def = table.def();
        let named =
            |row: &[Value], columns: &mut dyn Iterator<Item = usize>| -> Vec<(&str, Value)> {
                columns
                    .map(|c| (def.columns[c].name.as_str(), row[c].clone()))
                    .collect()
            };
        // Updates first: a value one frees may be one an insert takes.
        let mut changes = tc.batch();
        changes.at(self.instant());
        let set: &[(usize, Expression)] = match on {
            OnDuplicate::Update(set) => set,
            OnDuplicate::Skip | OnDuplicate::Replace => &[],
        };
        let (updates, inserts): (Vec<_>, Vec<_>) =
            there.iter().zip(&after).partition(|(old, _)| old.is_some());
        let mut first_insert = None;
        for (old, new) in updates.into_iter().chain(inserts) {
            match (old, new) {
                (None, Some(new)) => {
                    first_insert.get_or_insert(changes.len());
                    changes.insert(table, &named(new, &mut (0..width)))
                }
                (Some(old), Some(new)) => {
                    let mut differing = (0..width).filter(|&c| compare(&old[c], &new[c]).is_ne());
                    let Some(first) = differing.next() else {
                        continue;
                    };
                    // A column the statement sets keeps what it sets,
                    // though it be the value there: an `ON UPDATE
                    // CURRENT_TIMESTAMP` column left out takes the time.
                    let is_set = |c: &usize| set.iter().any(|(s, _)| s == c);
                    let stamped = (table.layout.stamped.iter())
                        .map(|s| usize::from(s.column))
                        .filter(|c| is_set(c) && compare(&old[*c], &new[*c]).is_eq());
                    let mut columns = key_positions(table)
                        .chain(std::iter::once(first))
                        .chain(differing)
                        .chain(stamped);
                    changes.update(table, &named(new, &mut columns))
                }
                // A row a REPLACE met on a UNIQUE index.
                (Some(old), None) => changes.delete(table, &key(table, old)),
                (None, None) => continue,
            }?;
        }
        if changes.is_empty() {
            return Ok(met);
        }
        let Some(t) = own else {
            self.execute(grant, &mut changes, Commit::Atomic).await?;
            return Ok(met);
        };
        // An insert that meets a row: another client inserted its key or
        // value since the statement looked, and another try updates that
        // row. An update that does is refused the same way every time.
        tc.execute_in(grant, t, &mut changes).await.map_err(|e| {
            let inserting = |i: &usize| first_insert.is_some_and(|first| *i >= first);
            let again = matches!(
                &e,
                TcError::Operation {
                    index,
                    error: OperationError::DuplicateKey { .. } | OperationError::DuplicateUnique { .. },
                } if inserting(index)
            );
            Failed {
                error: MyError::from(e),
                again,
            }
        })?;
        Ok(met)
    }

    /// The row that holds `row`'s values of a UNIQUE index, the first
    /// index on which one does (none where a value is NULL): among the rows
    /// the statement has met, as it leaves them, else found in the index as
    /// the transaction sees it, locked, and added to `met`.
    async fn unique_holder(
        &mut self,
        own: &mut Option<crate::tc::Transaction>,
        table: &Arc<Table>,
        grant: &Grant,
        row: &[Value],
        met: &mut MetRows,
    ) -> Result<Option<usize>, MyError> {
        for u in 0..unique_indexes(table).count() {
            if let Some(h) = self.holder_on(own, table, grant, row, u, met).await? {
                return Ok(Some(h));
            }
        }
        Ok(None)
    }

    /// REPLACE of whole row `row`, whose key is the `k`th row met: every
    /// other row holding one of its values of a UNIQUE index is deleted,
    /// and the row with its key, if there is one, replaced. Answers how
    /// many rows that deleted, the one with its key among them.
    async fn replace_met(
        &mut self,
        own: &mut Option<crate::tc::Transaction>,
        table: &Arc<Table>,
        grant: &Grant,
        row: &[Value],
        k: usize,
        met: &mut MetRows,
    ) -> Result<u64, MyError> {
        let mut deleted = u64::from(met.after[k].is_some());
        for u in 0..unique_indexes(table).count() {
            match self.holder_on(own, table, grant, row, u, met).await? {
                Some(h) if h != k => {
                    met.after[h] = None;
                    deleted += 1;
                }
                _ => {}
            }
        }
        met.set(table, k, row.to_vec())?;
        Ok(deleted)
    }

    /// The row that holds `row`'s values of the `u`th UNIQUE index (none
    /// where a value is NULL), as `unique_holder` finds it.
    async fn holder_on(
        &mut self,
        own: &mut Option<crate::tc::Transaction>,
        table: &Arc<Table>,
        grant: &Grant,
        row: &[Value],
        u: usize,
        met: &mut MetRows,
    ) -> Result<Option<usize>, MyError> {
        let tc = self.engine.tc().clone();
        let index = unique_indexes(table)
            .nth(u)
            .expect("a UNIQUE index of the table");
        let columns = &index.order[..index.columns];
        let Some(wanted) = unique_values(table, columns, row)? else {
            return Ok(None);
        };
        if let Some(h) = met.holder(table, u, &wanted)? {
            return Ok(Some(h));
        }
        let bound: Vec<Value> = columns
            .iter()
            .map(|&c| row[usize::from(c)].clone())
            .collect();
        // A row the scan found may be changed or deleted by the time it is
        // locked, and another written with the value since, by a client
        // whose lock this one waited for (REPLACEs of one value at once
        // each delete the last one's row): then the index is read again.
        for _ in 0..TRIES {
            let scan = RangeScan {
                index: Some(&index.name),
                lower: Some((&bound, true)),
                upper: Some((&bound, true)),
                after: None,
                limit: 8,
                max_bytes: 1 << 20,
                columns: None,
            };
            let reader = own.as_ref().or(self.reader());
            let page = tc.scan_range(grant, reader, table, scan).await?;
            // Rows not met yet: their keys, locked and read again, since
            // they may have changed since the scan saw them.
            let mut locked = tc.batch();
            let mut fresh = Vec::new();
            for found in page.rows {
                let values = found.into_values();
                if met.index_of(table, &values)?.is_none() {
                    locked.read_locking(table, &key(table, &values))?;
                    fresh.push(values);
                }
            }
            if fresh.is_empty() {
                return Ok(None);
            }
            self.run_within(own, grant, &mut locked).await?;
            for (i, now) in found(&locked, fresh.len())?.into_iter().enumerate() {
                met.add(table, &fresh[i], now)?;
            }
            if let Some(h) = met.holder(table, u, &wanted)? {
                return Ok(Some(h));
            }
        }
        Ok(None)
    }

    /// INSERT IGNORE outside a transaction: the keys there are read, and
    /// the other rows inserted in one atomic request, each row a request
    /// finds taken (by another client since, or by a UNIQUE index)
    /// dropped and the rest tried again.
    async fn insert_skipping(
        &mut self,
        table: &Arc<Table>,
        grant: &Grant,
        rows: &[Vec<Value>],
    ) -> Result<Met, MyError> {
        let tc = self.engine.tc().clone();
        let keys = distinct_keys(table, rows)?.keys;
        let mut read = tc.batch();
        for &r in &keys {
            read.read(table, &key(table, &rows[r]))?;
        }
        tc.execute(grant, &mut read, Commit::Each)
            .await
            .map_err(MyError::from)?;
        let there = found(&read, keys.len())?;
        let wanted: Vec<usize> = (keys.iter().zip(&there))
            .filter_map(|(&r, row)| row.is_none().then_some(r))
            .collect();
        let def = table.def();
        let taken = |e: &OperationError| {
            matches!(
                e,
                OperationError::DuplicateKey { .. } | OperationError::DuplicateUnique { .. }
            )
        };
        let inserted = self
            .change_dropping(grant, wanted.len(), taken, |batch, i| {
                let named: Vec<(&str, Value)> = (def.columns.iter().zip(&rows[wanted[i]]))
                    .map(|(column, v)| (column.name.as_str(), v.clone()))
                    .collect();
                batch.insert(table, &named)
            })
            .await?;
        Ok(Met {
            affected: inserted,
            duplicates: rows.len() as u64 - inserted,
        })
    }
}

/// A try of an ON DUPLICATE KEY UPDATE that failed, and whether another
/// may not.
struct Failed {
    error: MyError,
    again: bool,
}

impl From<MyError> for Failed {
    fn from(error: MyError) -> Failed {
        Failed {
            error,
            again: false,
        }
    }
}

impl From<ValueError> for Failed {
    fn from(error: ValueError) -> Failed {
        MyError::from(error).into()
    }
}

/// The rows an ON DUPLICATE KEY UPDATE has named or met: each as it was
/// (`None`: absent) and as the statement leaves it, found by encoded key
/// and by its values of each UNIQUE index as it leaves it.
struct MetRows {
    there: Vec<Option<Vec<Value>>>,
    after: Vec<Option<Vec<Value>>>,
    by_key: HashMap<Vec<u8>, usize>,
    /// The row last given these values of the `u`th UNIQUE index (it may
    /// have changed since: `holder` checks).
    by_unique: HashMap<(usize, Vec<Vec<u8>>), usize>,
}

impl MetRows {
    /// The rows the keys of `by_key` name, as `there` found them.
    fn new(
        table: &Table,
        there: Vec<Option<Vec<Value>>>,
        by_key: HashMap<Vec<u8>, usize>,
    ) -> Result<MetRows, MyError> {
        let mut met = MetRows {
            after: vec![None; there.len()],
            there,
            by_key,
            by_unique: HashMap::new(),
        };
        for h in 0..met.there.len() {
            if let Some(row) = met.there[h].clone() {
                met.set(table, h, row)?;
            }
        }
        Ok(met)
    }

    /// Which of them has the key of `row`, if any.
    fn index_of(&self, table: &Table, row: &[Value]) -> Result<Option<usize>, MyError> {
        Ok(self.by_key.get(&encoded_key(table, row)?).copied())
    }

    /// Adds the row with the key of `named`, as it is now (`None`: gone).
    fn add(
        &mut self,
        table: &Table,
        named: &[Value],
        now: Option<Vec<Value>>,
    ) -> Result<(), MyError> {
        let h = self.after.len();
        self.by_key.insert(encoded_key(table, named)?, h);
        self.there.push(now.clone());
        self.after.push(None);
        if let Some(now) = now {
            self.set(table, h, now)?;
        }
        Ok(())
    }

    /// Row `h` as the statement leaves it is `row`.
    fn set(&mut self, table: &Table, h: usize, row: Vec<Value>) -> Result<(), MyError> {
        for (u, index) in unique_indexes(table).enumerate() {
            if let Some(values) = unique_values(table, &index.order[..index.columns], &row)? {
                self.by_unique.insert((u, values), h);
            }
        }
        self.after[h] = Some(row);
        Ok(())
    }

    /// The row that holds `values` of the `u`th UNIQUE index, as the
    /// statement leaves it, if it has met one.
    fn holder(
        &self,
        table: &Table,
        u: usize,
        values: &[Vec<u8>],
    ) -> Result<Option<usize>, MyError> {
        let Some(&h) = self.by_unique.get(&(u, values.to_vec())) else {
            return Ok(None);
        };
        let index = unique_indexes(table).nth(u).expect("the index of a key");
        let holds = match &self.after[h] {
            Some(row) => unique_values(table, &index.order[..index.columns], row)?,
            None => None,
        };
        Ok((holds.as_deref() == Some(values)).then_some(h))
    }
}

/// The table's UNIQUE indexes, in its order.
fn unique_indexes(table: &Table) -> impl Iterator<Item = &OrderedLayout> {
    table.layout.ordered.iter().filter(|o| o.unique)
}

/// A whole row's values of `columns` as the index compares them, or
/// `None` if one is NULL (NULLs never meet).
fn unique_values(
    table: &Table,
    columns: &[u16],
    row: &[Value],
) -> Result<Option<Vec<Vec<u8>>>, MyError> {
    let mut values = Vec::with_capacity(columns.len());
    for &c in columns {
        match &row[usize::from(c)] {
            Value::Null => return Ok(None),
            v => values.push(codec::encode_operand(&table.layout, c, v)?),
        }
    }
    Ok(Some(values))
}

/// The encoded primary key of whole row `row`.
fn encoded_key(table: &Table, row: &[Value]) -> Result<Vec<u8>, MyError> {
    let mut encoded = Vec::new();
    codec::encode_key(&table.layout, &key(table, row), &mut encoded)?;
    Ok(encoded)
}

/// The rows the first `n` reads of `batch` found (`None`: no such row).
fn found(batch: &Batch, n: usize) -> Result<Vec<Option<Vec<Value>>>, MyError> {
    (0..n)
        .map(|i| match batch.result(i) {
            Ok(Outcome::Found(row)) => Ok(Some(row.into_values())),
            Ok(_) => Ok(None),
            Err(e) => Err(e.into()),
        })
        .collect()
}

/// Applies `set` to `row` in order, as MySQL does: each assignment reads
/// the row as those before it left it. Answers whether a value changed.
pub(super) fn apply(
    table: &Table,
    set: &[(usize, Expression)],
    row: &mut [Value],
) -> Result<bool, MyError> {
    let before: Vec<Value> = set.iter().map(|(c, _)| row[*c].clone()).collect();
    for (c, e) in set {
        row[*c] = e.eval(table, *c, row)?;
    }
    Ok((set.iter().zip(&before)).any(|((c, _), old)| compare(&row[*c], old).is_ne()))
}

/// The primary key of whole row `row`.
fn key(table: &Table, row: &[Value]) -> Vec<Value> {
    key_positions(table).map(|c| row[c].clone()).collect()
}

/// The rows of `rows` that name each key first, and each row's key as an
/// index into them.
fn distinct_keys(table: &Table, rows: &[Vec<Value>]) -> Result<DistinctKeys, MyError> {
    let mut first: HashMap<Vec<u8>, usize> = HashMap::with_capacity(rows.len());
    let mut keys = Vec::new();
    let mut key_of = Vec::with_capacity(rows.len());
    for (r, row) in rows.iter().enumerate() {
        let k = *first.entry(encoded_key(table, row)?).or_insert_with(|| {
            keys.push(r);
            keys.len() - 1
        });
        key_of.push(k);
    }
    Ok(DistinctKeys {
        keys,
        key_of,
        by_key: first,
    })
}

/// The distinct primary keys of an INSERT's rows.
struct DistinctKeys {
    /// The first row with each key.
    keys: Vec<usize>,
    /// Each row's key, as an index into `keys`.
    key_of: Vec<usize>,
    /// Each encoded key's index into `keys`.
    by_key: HashMap<Vec<u8>, usize>,
}
