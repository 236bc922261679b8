//! Transactions: every operation commits, or none does.
//!
//! A request whose operations all live on one worker is prepared and
//! committed there in one step. One that spans several is prepared on each
//! worker in turn, in worker order, each worker locking its rows in the one
//! order all transactions share (`Batch::order_for_locking`): two
//! transactions can never wait for each other in a cycle, so there is no
//! deadlock to detect. Once every worker has prepared, all commit; the first
//! failure aborts the workers already prepared. If the request is dropped
//! midway — its caller went away — every worker it reached is told to abort.
//!
//! A transaction can also stay open across requests ([`Transaction`]: a
//! SQL session's, from its first statement to COMMIT). Each statement's
//! operations are prepared and held (`Mode::Hold`); COMMIT asks each
//! worker it reached for its changes and commits them as a one-shot
//! transaction does. Statements lock rows in the order the client gives
//! them, so two such transactions can wait for each other: as in NDB, the
//! lock-wait timeout breaks the cycle. The values a transaction gives
//! unique indexes stay locked until it ends, and are checked as it sees
//! its own rows (`unique::Claims`). Any failure of an operation rolls the
//! whole transaction back (NDB has no partial rollback).

use super::batch::{Batch, OperationError};
use super::unique::Claims;
use super::{Admitted, Tc, TcError, WriteInFlight};
use crate::ldm::{JobOutcome, Mode, OpBatch, TxnId, Workers};
use crate::log::Mark;
use crate::storage::OpError;
use crate::types::AUTOCOMMIT;

/// Runs the transaction to its commit: where its changes end in the log,
/// for the caller to wait on (`wait_durable`, `wait_replicated`).
pub(super) async fn run(workers: &Workers, txn: TxnId, batch: &mut Batch) -> Result<Mark, TcError> {
    batch.order_for_locking();
    let ldms: Vec<usize> = (0..batch.ldms.len())
        .filter(|&n| !batch.ldms[n].ops.is_empty())
        .collect();
    let mode = if ldms.len() == 1 {
        Mode::PrepareAndCommit
    } else {
        Mode::Prepare
    };
    let mut open = Open::new(workers.clone(), txn);
    open.prepare(&ldms, mode, batch).await?;
    let mark = if mode == Mode::Prepare {
        open.commit_prepared(&ldms, &batch.ldms).await?
    } else {
        batch.ldms[ldms[0]].mark
    };
    open.ended = true;
    Ok(mark)
}

/// A transaction some workers have prepared.
struct Open {
    workers: Workers,
    txn: TxnId,
    /// Workers that have (or are preparing) a part of it.
    reached: Vec<usize>,
    ended: bool,
}

impl Open {
    fn new(workers: Workers, txn: TxnId) -> Open {
        Open {
            workers,
            txn,
            reached: Vec::new(),
            ended: false,
        }
    }

    /// Runs the batch's part for each of `ldms` in `mode`, in order. On the
    /// first failure every worker reached is told to abort, and the error
    /// names the operation that failed.
    async fn prepare(
        &mut self,
        ldms: &[usize],
        mode: Mode,
        batch: &mut Batch,
    ) -> Result<(), TcError> {
        for &ldm in ldms {
            if !self.reached.contains(&ldm) {
                self.reached.push(ldm);
            }
            let job = std::mem::take(&mut batch.ldms[ldm]);
            let (ops, outcome) = self.workers.run(ldm, self.txn, mode, job).await?;
            batch.ldms[ldm] = ops;
            if let JobOutcome::Failed { op, error } = outcome {
                // That worker has undone its part already.
                self.reached.retain(|&n| n != ldm);
                self.end(false).await?;
                if error == OpError::DurabilityFailed {
                    return Err(self.durability_failed());
                }
                let (index, error) = batch.failure(ldm, op, error);
                return Err(TcError::Operation { index, error });
            }
        }
        Ok(())
    }

    /// Commits a transaction every worker of `ldms` has prepared (their
    /// changes in `parts`), logged as one record before any of its rows is
    /// let go.
    async fn commit_prepared(
        &mut self,
        ldms: &[usize],
        parts: &[OpBatch],
    ) -> Result<Mark, TcError> {
        let mut redo = Vec::new();
        for &ldm in ldms {
            redo.extend_from_slice(&parts[ldm].redo);
        }
        let mark = match self.workers.log().commit(&redo, true) {
            Ok(mark) => mark,
            Err(failed) => {
                self.end(false).await?;
                return Err(TcError::Durability(failed));
            }
        };
        self.end(true).await?;
        Ok(mark)
    }

    fn durability_failed(&self) -> TcError {
        let log = self.workers.log();
        TcError::Durability(log.failure().expect("a failed log says why"))
    }

    /// Commits or aborts on every worker reached, and waits until they have.
    async fn end(&mut self, commit: bool) -> Result<(), TcError> {
        let waits: Vec<_> = self
            .reached
            .iter()
            .map(|&ldm| self.workers.end_transaction(ldm, self.txn, commit))
            .collect();
        // Sent: nothing more to do if the caller goes away now.
        self.ended = true;
        for wait in waits {
            self.workers.ended(wait).await?;
        }
        Ok(())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if !self.ended {
            for &ldm in &self.reached {
                drop(self.workers.end_transaction(ldm, self.txn, false));
            }
        }
    }
}

/// A transaction that stays open across requests, from its first
/// statement (`Tc::execute_in`) to `Tc::commit` or `Tc::rollback`.
/// Dropped while open — its client went away — it rolls back.
pub struct Transaction {
    open: Open,
    /// Its first statement's admission: it counts the transaction among
    /// its database's `max_parallel_transactions` until it ends.
    admitted: Option<Admitted>,
    /// Once it holds rows: a write in flight on its database, so that the
    /// primary is not handed on under it.
    writing: Option<WriteInFlight>,
    /// Operations run so far, for `max_transaction_ops`.
    ops: usize,
    /// The unique values it has locked and given rows.
    unique: Claims,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("txn", &self.open.txn)
            .field("reached", &self.open.reached)
            .field("ops", &self.ops)
            .finish()
    }
}

impl Transaction {
    /// Its id at the workers: what its rows are held by.
    pub(crate) fn id(&self) -> TxnId {
        self.open.txn
    }

    /// The id of `reader` that reads see rows as (`AUTOCOMMIT`: every row
    /// as committed).
    pub(crate) fn reader_id(reader: Option<&Transaction>) -> TxnId {
        reader.map_or(AUTOCOMMIT, Transaction::id)
    }

    /// Whether it has been rolled back (an operation failed).
    pub(crate) fn is_over(&self) -> bool {
        self.open.ended
    }

    /// Whether it holds rows: has written or locked any.
    pub(crate) fn holds_rows(&self) -> bool {
        self.writing.is_some()
    }
}

impl Tc {
    /// A new transaction that stays open across requests; it holds
    /// nothing until its first statement.
    pub(crate) fn begin(&self) -> Transaction {
        let txn = self
            .inner
            .next_txn
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Transaction {
            open: Open::new(self.inner.workers.clone(), txn),
            admitted: None,
            writing: None,
            ops: 0,
            unique: Claims::default(),
        }
    }

    /// Runs a statement's operations in transaction `t`, as `execute` runs
    /// a request: the same checks (the transaction counts once against
    /// `max_parallel_transactions`, all its operations together against
    /// `max_transaction_ops`), its rows held until the transaction ends.
    /// A refusal changes nothing; a failed operation rolls the whole
    /// transaction back (`is_over`).
    pub(crate) async fn execute_in(
        &self,
        grant: &super::Grant,
        t: &mut Transaction,
        batch: &mut Batch,
    ) -> Result<(), TcError> {
        if t.is_over() {
            return Err(rolled_back());
        }
        self.serving()?;
        let Ok(database) = batch.database() else {
            return Err(TcError::Forbidden {
                database: "(several)".into(),
                reason: "a request works on one database".into(),
            });
        };
        let Some(db) = database.cloned() else {
            return Ok(());
        };
        if let Some(first) = &t.admitted
            && first.db.id != db.id
        {
            return Err(TcError::Forbidden {
                database: db.name.to_string(),
                reason: "a transaction works on one database".into(),
            });
        }
        let counted = t.admitted.is_some();
        let mut admitted =
            match self.admit_to(grant, &db, t.ops + batch.len(), batch.cost(), counted) {
                Ok(admitted) => admitted,
                Err(refused) => {
                    super::hold_rate_refusal(&refused).await;
                    return Err(refused);
                }
            };
        let started = std::time::Instant::now();
        let ldms: Vec<usize> = (0..batch.ldms.len())
            .filter(|&n| !batch.ldms[n].ops.is_empty())
            .collect();
        let holds = batch.cost().write_units > 0 || batch.cost().locks;
        if holds && t.writing.is_none() {
            t.writing = admitted._writing.take();
        }
        t.ops += batch.len();
        // Its unique values are checked as the transaction sees its rows,
        // and stay locked until it ends.
        let outcome = match self.check_unique_in(batch, &mut t.unique).await {
            Ok(wrote) => {
                let prepared = t.open.prepare(&ldms, Mode::Hold, batch).await;
                if prepared.is_ok() {
                    t.unique.record(batch, wrote);
                }
                prepared
            }
            Err(e) => Err(e),
        };
        let gov = &db.governance;
        let read_units = batch.charge_tables(outcome.is_ok());
        if admitted.cost.reads > 0 && outcome.is_ok() {
            let extra = read_units.saturating_sub(admitted.cost.reads);
            super::governance::Counters::add(&gov.counters.read_units, extra);
            gov.owe_reads(extra);
        }
        if let Err(TcError::Operation {
            error: OperationError::Quota(_),
            ..
        }) = &outcome
        {
            super::governance::Counters::add(&gov.counters.quota_rejections, 1);
        }
        super::governance::Counters::add(&gov.counters.failed, u64::from(outcome.is_err()));
        self.finished(&db, started);
        if t.admitted.is_none() {
            t.admitted = Some(admitted);
        }
        if outcome.is_err() {
            if !t.open.ended {
                // Refused before it ran, or a worker or the node failed:
                // what it reached lets go.
                let _ = t.open.end(false).await;
            }
            t.unique.release();
        }
        outcome
    }

    /// Commits transaction `t`: once answered, its changes are durable
    /// and on every replica.
    pub(crate) async fn commit(&self, mut t: Transaction) -> Result<(), TcError> {
        if t.is_over() {
            return Err(rolled_back());
        }
        let ldms = t.open.reached.clone();
        let mark = match ldms.as_slice() {
            [] => Mark::default(),
            [ldm] => {
                let mut parts = self.batch();
                t.open
                    .prepare(&[*ldm], Mode::PrepareAndCommit, &mut parts)
                    .await?;
                parts.ldms[*ldm].mark
            }
            _ => {
                let mut parts = self.batch();
                t.open.prepare(&ldms, Mode::Prepare, &mut parts).await?;
                t.open.commit_prepared(&ldms, &parts.ldms).await?
            }
        };
        t.open.ended = true;
        self.wait_acknowledgeable(mark).await
    }

    /// Rolls transaction `t` back: every row it holds is as it was.
    pub(crate) async fn rollback(&self, mut t: Transaction) -> Result<(), TcError> {
        if t.is_over() {
            return Ok(());
        }
        t.open.end(false).await
    }
}

/// What a statement of a transaction already rolled back is told.
fn rolled_back() -> TcError {
    TcError::Forbidden {
        database: "(transaction)".into(),
        reason: "the transaction was rolled back; start a new one".into(),
    }
}
