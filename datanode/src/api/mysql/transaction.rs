//! A session's transactions: BEGIN / START TRANSACTION, COMMIT, ROLLBACK
//! and `autocommit`, as MySQL has them, run as NDB runs them.
//!
//! With autocommit on and no BEGIN, each statement commits on its own.
//! Otherwise the session's statements run in one coordinator transaction
//! (`tc::Transaction`), opened by the first that reads or writes a row:
//! its writes and locking reads (`FOR UPDATE`, `LOCK IN SHARE MODE`) hold
//! their rows until COMMIT or ROLLBACK, and its reads by key see its own
//! changes. As in NDB, an error from an operation rolls back the whole
//! transaction, and the client is told so; a lock held by another
//! transaction longer than the lock-wait timeout is error 1205 (which is
//! also how two transactions waiting for each other end).
//!
//! What ends a transaction besides COMMIT and ROLLBACK, as in MySQL:
//! BEGIN (commits the one open), `SET autocommit = 1`, DDL (commits
//! first), the connection closing or being reset (rolls back). A
//! transaction that holds rows and whose client sends nothing for the
//! transaction-inactive timeout is rolled back — its locks would otherwise
//! hold back every writer of those rows, and the node's checkpoints — and
//! its next statement is told (1205).

use std::time::Duration;

use super::error::MyError;
use super::proto::status;
use super::query::Reply;
use super::session::Session;
use crate::tc::batch::Batch;
use crate::tc::{Commit, Grant, Transaction};

/// A session's transaction state.
#[derive(Debug, Default)]
pub(crate) struct Txn {
    /// BEGIN (or START TRANSACTION) was given and the transaction has not
    /// ended.
    explicit: bool,
    /// START TRANSACTION READ ONLY: writes are refused.
    read_only: bool,
    /// The coordinator's transaction, from the first statement that
    /// reads or writes rows in it.
    open: Option<Transaction>,
    /// Rolled back while its client was idle: the next statement is told.
    timed_out: Option<Duration>,
}

impl Session {
    /// Whether statements run in a transaction now (rather than each on
    /// its own).
    pub(crate) fn in_transaction(&self) -> bool {
        self.txn.explicit || !self.autocommit
    }

    /// The server status flags of OK and EOF packets.
    pub(crate) fn status(&self) -> u16 {
        let mut flags = 0;
        if self.autocommit {
            flags |= status::AUTOCOMMIT;
        }
        if self.txn.explicit || self.txn.open.is_some() {
            flags |= status::IN_TRANS;
        }
        flags
    }

    /// Whether the session's transaction can go to another node as it is:
    /// it holds no rows (its reads lock nothing) and was not timed out.
    pub(crate) fn transaction_moves(&self) -> bool {
        self.txn.timed_out.is_none() && self.txn.open.as_ref().is_none_or(|t| !t.holds_rows())
    }

    /// BEGIN was given and the transaction is open: whether READ ONLY.
    pub(crate) fn explicit_transaction(&self) -> Option<bool> {
        self.txn.explicit.then_some(self.txn.read_only)
    }

    /// Opens the transaction a session carried here had begun.
    pub(crate) fn resume_transaction(&mut self, read_only: bool) {
        self.txn.explicit = true;
        self.txn.read_only = read_only;
    }

    /// Whether the session's transaction holds anything a timeout would
    /// roll back.
    pub(crate) fn holds_transaction(&self) -> bool {
        self.txn.open.is_some()
    }

    /// The client sent nothing for the transaction-inactive timeout: the
    /// transaction is rolled back, and its next statement told.
    pub(crate) async fn inactive(&mut self) {
        if let Some(open) = self.txn.open.take() {
            let _ = self.engine.tc().rollback(open).await;
            self.txn.timed_out = Some(self.shared.transaction_inactive_timeout);
        }
    }

    /// Runs a statement's operations: in the session's transaction if it
    /// is in one, else on their own (`commit`).
    pub(crate) async fn execute(
        &mut self,
        grant: &Grant,
        batch: &mut Batch,
        commit: Commit,
    ) -> Result<(), MyError> {
        let tc = self.engine.tc().clone();
        if !self.in_transaction() {
            return tc
                .execute(grant, batch, commit)
                .await
                .map_err(MyError::from);
        }
        self.told_timed_out()?;
        if self.txn.read_only && (batch.has_writes() || batch.cost().locks) {
            return Err(read_only());
        }
        let open = self.txn.open.get_or_insert_with(|| tc.begin());
        match tc.execute_in(grant, open, batch).await {
            Ok(()) => Ok(()),
            Err(e) => {
                let mut error = MyError::from(e);
                if open.is_over() {
                    self.txn = Txn::default();
                    if error.code != 1205 {
                        error.message.push_str("; the transaction was rolled back");
                    }
                }
                Err(error)
            }
        }
    }

    /// Refuses a write in a READ ONLY transaction.
    pub(crate) fn may_change_rows(&self) -> Result<(), MyError> {
        if self.txn.read_only && self.in_transaction() {
            return Err(read_only());
        }
        Ok(())
    }

    /// The transaction whose rows scans see as it left them (every other
    /// row as committed), if one is open.
    pub(crate) fn reader(&self) -> Option<&Transaction> {
        self.txn.open.as_ref()
    }

    /// Whether rows read now are read in a transaction that can lock them.
    pub(crate) fn can_lock(&self) -> bool {
        self.in_transaction()
    }

    /// BEGIN / START TRANSACTION: commits the transaction open, if any,
    /// and starts one.
    pub(crate) async fn begin(&mut self, read_only: bool) -> Result<(), MyError> {
        self.commit().await?;
        self.txn.explicit = true;
        self.txn.read_only = read_only;
        Ok(())
    }

    /// COMMIT: the transaction's changes are durable and on every replica
    /// once answered. Nothing open commits nothing.
    pub(crate) async fn commit(&mut self) -> Result<(), MyError> {
        let txn = std::mem::take(&mut self.txn);
        if let Some(took) = txn.timed_out {
            return Err(timed_out(took));
        }
        match txn.open {
            Some(open) => {
                let tc = self.engine.tc().clone();
                tc.commit(open).await.map_err(|e| {
                    let mut error = MyError::from(e);
                    error.message.push_str("; the transaction was rolled back");
                    error
                })
            }
            None => Ok(()),
        }
    }

    /// ROLLBACK: every row the transaction changed is as it was.
    pub(crate) async fn rollback(&mut self) -> Result<(), MyError> {
        let txn = std::mem::take(&mut self.txn);
        match txn.open {
            Some(open) => {
                let tc = self.engine.tc().clone();
                tc.rollback(open).await.map_err(MyError::from)
            }
            None => Ok(()),
        }
    }

    /// `SET autocommit = …`: turning it on commits the transaction open.
    pub(crate) async fn set_autocommit(&mut self, on: bool) -> Result<(), MyError> {
        if on && !self.autocommit {
            self.commit().await?;
        }
        self.autocommit = on;
        Ok(())
    }

    /// A `KILL` interrupted the running statement: its transaction, if it
    /// had one open, is rolled back, as after any failed operation.
    pub(crate) async fn interrupted(&mut self) -> Result<Reply, MyError> {
        let mut error = MyError::new(1317, "70100", "Query execution was interrupted");
        if self.txn.open.is_some() {
            let rolled_back = self.rollback().await;
            error.message.push_str(match rolled_back {
                Ok(()) => "; the transaction was rolled back",
                Err(_) => "; the transaction was rolled back (the node is failing)",
            });
        }
        Err(error)
    }

    /// The statement that comes after a transaction rolled back for
    /// idling is told, once.
    fn told_timed_out(&mut self) -> Result<(), MyError> {
        match self.txn.timed_out.take() {
            Some(took) => {
                self.txn = Txn::default();
                Err(timed_out(took))
            }
            None => Ok(()),
        }
    }
}

fn read_only() -> MyError {
    MyError::new(
        1792,
        "25006",
        "Cannot execute statement in a READ ONLY transaction.",
    )
}

fn timed_out(took: Duration) -> MyError {
    MyError::new(
        1205,
        "HY000",
        format!(
            "Lock wait timeout exceeded; the transaction held rows with nothing sent for {} ms (the transaction-inactive timeout) and was rolled back; try restarting transaction",
            took.as_millis()
        ),
    )
}
