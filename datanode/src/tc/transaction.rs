//! Atomic requests: every operation commits, or none does.
//!
//! A request whose operations all live on one worker is prepared and
//! committed there in one step. One that spans several is prepared on each
//! worker in turn, in worker order, each worker locking its rows in the one
//! order all transactions share (`Batch::order_for_locking`): two
//! transactions can never wait for each other in a cycle, so there is no
//! deadlock to detect. Once every worker has prepared, all commit; the first
//! failure aborts the workers already prepared. If the request is dropped
//! midway — its caller went away — every worker it reached is told to abort.

use super::TcError;
use super::batch::Batch;
use crate::ldm::{JobOutcome, Mode, TxnId, Workers};
use crate::log::Mark;
use crate::storage::OpError;

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
    let mut open = Open {
        workers,
        txn,
        reached: Vec::new(),
        ended: false,
    };
    for &ldm in &ldms {
        open.reached.push(ldm);
        let job = std::mem::take(&mut batch.ldms[ldm]);
        let (ops, outcome) = workers.run(ldm, txn, mode, job).await?;
        batch.ldms[ldm] = ops;
        if let JobOutcome::Failed { op, error } = outcome {
            // That worker has undone its part already.
            open.reached.pop();
            open.end(false).await?;
            if error == OpError::DurabilityFailed {
                let log = workers.log();
                return Err(TcError::Durability(
                    log.failure().expect("a failed log says why"),
                ));
            }
            let (index, error) = batch.failure(ldm, op, error);
            return Err(TcError::Operation { index, error });
        }
    }
    let mark = if mode == Mode::Prepare {
        // Every worker has prepared: the transaction commits, logged as one
        // record before any of its rows is let go.
        let mut redo = Vec::new();
        for &ldm in &ldms {
            redo.extend_from_slice(&batch.ldms[ldm].redo);
        }
        let mark = match workers.log().commit(&redo, true) {
            Ok(mark) => mark,
            Err(failed) => {
                open.end(false).await?;
                return Err(TcError::Durability(failed));
            }
        };
        open.end(true).await?;
        mark
    } else {
        batch.ldms[ldms[0]].mark
    };
    open.ended = true;
    Ok(mark)
}

/// A transaction some workers have prepared.
struct Open<'a> {
    workers: &'a Workers,
    txn: TxnId,
    /// Workers that have (or are preparing) a part of it.
    reached: Vec<usize>,
    ended: bool,
}

impl Open<'_> {
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

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if !self.ended {
            for &ldm in &self.reached {
                drop(self.workers.end_transaction(ldm, self.txn, false));
            }
        }
    }
}
