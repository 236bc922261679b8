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

use std::sync::Arc;

use rustc_hash::FxHashMap;
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::batch::{Batch, Given, OperationError, UniqueWrite};
use super::{Tc, TcError};
use crate::ldm::OpKind;
use crate::storage::OpError;
use crate::storage::codec;
use crate::storage::fragment::Bound;
use crate::types::TableId;
use crate::types::value::Value;

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

    /// Takes stripes `ids`, in one order for every caller.
    async fn lock(&self, mut ids: Vec<usize>) -> Vec<OwnedMutexGuard<()>> {
        ids.sort_unstable();
        ids.dedup();
        let mut held = Vec::with_capacity(ids.len());
        for id in ids {
            held.push(Arc::clone(&self.stripes[id]).lock_owned().await);
        }
        held
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

/// Values of a unique index of a table: (table, index, values).
type Taken<'a> = (TableId, usize, &'a [Vec<u8>]);

/// A write's values of one unique index, complete.
struct Checked<'a> {
    write: &'a UniqueWrite,
    values: Vec<Vec<u8>>,
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
        let refused = self.find_duplicates(batch, each, &mut unique).await?;
        for &(op, index) in &refused {
            batch.skip(op);
            unique
                .refused
                .push((op, OpError::DuplicateUnique(index as u16)));
        }
        Ok(unique)
    }

    /// The writes (operation, index) that would duplicate, all of them when
    /// `each`; `Err` for the first otherwise. Takes the locks into `held`.
    async fn find_duplicates(
        &self,
        batch: &Batch,
        each: bool,
        held: &mut Unique,
    ) -> Result<Vec<(usize, usize)>, TcError> {
        let mut checked = Vec::with_capacity(batch.uniques.len());
        for write in &batch.uniques {
            if let Some(values) = self.complete(write).await? {
                checked.push(Checked { write, values });
            }
        }
        let stripes = (checked.iter())
            .map(|c| {
                let mut h = xxhash_rust::xxh3::Xxh3::with_seed(self.inner.seed);
                h.update(&c.write.table.id.0.to_le_bytes());
                h.update(&(c.write.index as u32).to_le_bytes());
                for v in &c.values {
                    h.update(&(v.len() as u32).to_le_bytes());
                    h.update(v);
                }
                (h.digest() % STRIPES as u64) as usize
            })
            .collect();
        held.guards = self.inner.unique_locks.lock(stripes).await;
        let mut refused: Vec<(usize, usize)> = Vec::new();
        // Rows the batch deletes, or gives other values: their old values
        // are free for its other writes.
        let deleted = |table: TableId, key: &[u8]| {
            (batch.unique_deletes.iter()).any(|(t, k)| *t == table && k == key)
        };
        // Each value of each index the batch writes, and whose row takes it.
        let mut mine: FxHashMap<Taken<'_>, &[u8]> = FxHashMap::default();
        for c in &checked {
            let w = c.write;
            let duplicate = || TcError::Operation {
                index: w.op,
                error: OperationError::DuplicateUnique {
                    table: w.table.name().to_string(),
                    index: w.table.layout.ordered[w.index].name.clone(),
                },
            };
            if refused.iter().any(|&(op, _)| op == w.op) {
                continue;
            }
            let mut refuse = || {
                if each {
                    refused.push((w.op, w.index));
                    Ok(())
                } else {
                    Err(duplicate())
                }
            };
            if let Some(&other) = mine.get(&(w.table.id, w.index, c.values.as_slice()))
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
            let taken = (self.holders(w, &c.values).await?)
                .into_iter()
                .any(|key| key != w.key && !deleted(w.table.id, &key) && !moved(&key));
            if taken {
                refuse()?;
                continue;
            }
            mine.insert((w.table.id, w.index, &c.values), &w.key);
        }
        Ok(refused)
    }

    /// The write's values of its index, those it does not give taken from
    /// its row as it is; `None` when the row is not compared (a NULL among
    /// them) or the write changes none of them.
    async fn complete(&self, write: &UniqueWrite) -> Result<Option<Vec<Vec<u8>>>, TcError> {
        let layout = &write.table.layout;
        let columns = &layout.ordered[write.index].order[..layout.ordered[write.index].columns];
        // A write that inserts stores the defaults of what it does not give.
        let defaulted = columns
            .iter()
            .any(|&c| layout.defaults[c as usize].is_some());
        if write.values.iter().all(|v| *v == Given::Missing) && !defaulted {
            return Ok(None);
        }
        let missing = write.values.contains(&Given::Missing);
        let read;
        let row = match (missing, write.kind) {
            (true, OpKind::Update | OpKind::Write) => {
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
        for (&c, given) in columns.iter().zip(&write.values) {
            match given {
                Given::Null => return Ok(None),
                Given::Bytes(b) => values.push(b.clone()),
                // An update of no row fails on its own; a write of none
                // inserts the column's default, or NULL.
                Given::Missing => match (&row, &layout.defaults[c as usize]) {
                    (Some(row), _) => match row.bytes(c) {
                        Some(b) => values.push(b.to_vec()),
                        None => return Ok(None),
                    },
                    (None, Some(d)) if *d != Value::Null && write.kind == OpKind::Write => values
                        .push(codec::encode_operand(layout, c, d).map_err(|e| {
                            TcError::Operation {
                                index: write.op,
                                error: OperationError::Value(e),
                            }
                        })?),
                    (None, _) => return Ok(None),
                },
            }
        }
        Ok(Some(values))
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
        let name: Arc<str> = layout.ordered[w.index].name.as_str().into();
        let chunks = (self.inner.workers)
            .scan_index(w.table.id, &name, steps, Some(&Arc::new(bound)), 4, 1 << 20)
            .await?;
        let mut keys = Vec::new();
        for chunk in chunks.into_iter().flatten() {
            for &(begin, len) in &chunk.rows {
                let image = &chunk.out[begin as usize..][..len as usize];
                let (fixed, var) = image.split_at(layout.slot_size);
                let mut key = Vec::new();
                layout.key_of(fixed, var, &mut key);
                keys.push(key);
            }
        }
        Ok(keys)
    }
}
