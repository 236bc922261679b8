//! Every committed change, in one place: the change records a commit is
//! made of, the redo log that keeps them, and reading them back.
//!
//! A commit — an autocommit job on one LDM worker, or a transaction the
//! coordinator commits across several — hands its change records to
//! [`ChangeLog::commit`] before any of its rows is let go, and is
//! acknowledged once [`ChangeLog::wait_durable`] and
//! [`ChangeLog::wait_replicated`] say so. Nothing else writes the log, so
//! this is the stream recovery replays and replication ships.
//!
//! - [`changes`]: what a record holds: whole rows put, rows deleted.
//! - [`redo`]: the redo log, group commit, and reading it back.
//! - [`ship`]: the replication stream to the node's backups.
//! - [`io`]: file operations behind a trait; `io_mem`: in memory, with faults
//!   (for tests).

pub(crate) mod changes;
pub(crate) mod io;
#[cfg(test)]
pub(crate) mod io_mem;
pub(crate) mod redo;
pub(crate) mod ship;

use std::sync::Arc;

use arc_swap::ArcSwapOption;

use redo::{LogFailed, Lsn, RedoLog};
use ship::{NotReplicated, Outbox, Shipped};

/// Where committed changes go: the redo log once one is attached (nowhere
/// while a node recovers, or for a node that keeps nothing), and the
/// replication stream to the node's backups.
#[derive(Debug, Default)]
pub(crate) struct ChangeLog {
    redo: ArcSwapOption<RedoLog>,
    outbox: Arc<Outbox>,
}

/// How far a commit reaches: where it ends in the redo log and in the
/// replication stream. It is acknowledged once both are reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) lsn: Option<Lsn>,
    pub(crate) shipped: Option<Shipped>,
}

impl Mark {
    /// The further of two marks: waiting for it waits for both.
    pub(crate) fn max(self, other: Mark) -> Mark {
        Mark {
            lsn: self.lsn.max(other.lsn),
            shipped: match (self.shipped, other.shipped) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
        }
    }
}

impl ChangeLog {
    /// From now on every commit is logged to `redo`.
    pub(crate) fn attach(&self, redo: Arc<RedoLog>) {
        self.redo.store(Some(redo));
    }

    /// The redo log, once attached.
    pub(crate) fn redo(&self) -> Option<Arc<RedoLog>> {
        self.redo.load_full()
    }

    /// The replication stream to the node's backups.
    pub(crate) fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    /// Logs one commit's change records as one record, and — unless they
    /// came from a primary (`ship` false) — sends them to the backups:
    /// where they end.
    #[inline]
    pub(crate) fn commit(&self, changes: &[u8], ship: bool) -> Result<Mark, LogFailed> {
        if changes.is_empty() {
            return Ok(Mark::default());
        }
        let lsn = match &*self.redo.load() {
            Some(redo) => Some(redo.append(changes)?),
            None => None,
        };
        let shipped = if ship {
            self.outbox.ship(changes)
        } else {
            None
        };
        Ok(Mark { lsn, shipped })
    }

    /// Waits until everything up to `mark` is durable here.
    pub(crate) async fn wait_durable(&self, mark: Mark) -> Result<(), LogFailed> {
        match (mark.lsn, self.redo.load_full()) {
            (Some(lsn), Some(redo)) => redo.wait_durable(lsn).await,
            _ => Ok(()),
        }
    }

    /// Waits until every backup holds everything up to `mark`.
    pub(crate) async fn wait_replicated(&self, mark: Mark) -> Result<(), NotReplicated> {
        match mark.shipped {
            Some(shipped) => self.outbox.wait(shipped).await,
            None => Ok(()),
        }
    }

    /// Why the log failed, if it has: no commit can be made durable.
    pub(crate) fn failure(&self) -> Option<LogFailed> {
        self.redo.load().as_ref().and_then(|redo| redo.failure())
    }

    /// Where the next record will start: a fragment image taken now has
    /// every change logged before it.
    pub(crate) fn next_lsn(&self) -> Lsn {
        self.redo.load().as_ref().map_or(0, |redo| redo.next_lsn())
    }
}
