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
use crate::batch::Batch;
use crate::engine::Engine;
use crate::ldm::{JobOutcome, Mode, TxnId};
use crate::storage::OpError;

pub(super) async fn run(engine: &Engine, txn: TxnId, batch: &mut Batch) -> Result<(), TcError> {
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
        engine,
        txn,
        reached: Vec::new(),
        ended: false,
    };
    for &ldm in &ldms {
        open.reached.push(ldm);
        let job = engine.start_job(ldm, txn, mode, std::mem::take(&mut batch.ldms[ldm]));
        let (ops, outcome) = job.await.expect("LDM worker replies");
        batch.ldms[ldm] = ops;
        if let JobOutcome::Failed { op, error } = outcome {
            // That worker has undone its part already.
            open.reached.pop();
            open.end(false).await;
            if error == OpError::DurabilityFailed {
                return Err(durability_failed(engine));
            }
            let (index, error) = batch.failure(ldm, op, error);
            return Err(TcError::Operation { index, error });
        }
    }
    let lsn = if mode == Mode::Prepare {
        // Every worker has prepared: the transaction commits, logged as one
        // record before any of its rows is let go.
        let mut redo = Vec::new();
        for &ldm in &ldms {
            redo.extend_from_slice(&batch.ldms[ldm].redo);
        }
        let lsn = match engine.log() {
            Some(log) if !redo.is_empty() => match log.append(&redo) {
                Ok(lsn) => Some(lsn),
                Err(failed) => {
                    open.end(false).await;
                    return Err(TcError::Durability(failed));
                }
            },
            _ => None,
        };
        open.end(true).await;
        lsn
    } else {
        batch.ldms[ldms[0]].lsn
    };
    open.ended = true;
    engine.wait_durable(lsn).await.map_err(TcError::Durability)
}

fn durability_failed(engine: &Engine) -> TcError {
    let log = engine
        .log()
        .expect("only a logged transaction fails to log");
    TcError::Durability(log.failure().expect("a failed log says why"))
}

/// A transaction some workers have prepared.
struct Open<'a> {
    engine: &'a Engine,
    txn: TxnId,
    /// Workers that have (or are preparing) a part of it.
    reached: Vec<usize>,
    ended: bool,
}

impl Open<'_> {
    /// Commits or aborts on every worker reached, and waits until they have.
    async fn end(&mut self, commit: bool) {
        let waits: Vec<_> = self
            .reached
            .iter()
            .map(|&ldm| self.engine.end_transaction(ldm, self.txn, commit))
            .collect();
        // Sent: nothing more to do if the caller goes away now.
        self.ended = true;
        for wait in waits {
            wait.await.expect("LDM worker replies");
        }
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if !self.ended {
            for &ldm in &self.reached {
                drop(self.engine.end_transaction(ldm, self.txn, false));
            }
        }
    }
}
