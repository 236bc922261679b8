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
            let (index, error) = batch.failure(ldm, op, error);
            return Err(TcError::Operation { index, error });
        }
    }
    if mode == Mode::Prepare {
        open.end(true).await;
    }
    open.ended = true;
    Ok(())
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
