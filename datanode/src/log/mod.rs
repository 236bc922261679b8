//! Every committed change, in one place: the change records a commit is
//! made of, the redo log that keeps them, and reading them back.
//!
//! A commit — an autocommit job on one LDM worker, or a transaction the
//! coordinator commits across several — hands its change records to
//! [`ChangeLog::commit`] before any of its rows is let go, and is
//! acknowledged once [`ChangeLog::wait_durable`] says so. Nothing else
//! writes the log, so this is the stream recovery replays and replication
//! will ship.
//!
//! - [`changes`]: what a record holds: whole rows put, rows deleted.
//! - [`redo`]: the redo log, group commit, and reading it back.
//! - [`io`]: file operations behind a trait; `io_mem`: in memory, with faults
//!   (for tests).

pub(crate) mod changes;
pub(crate) mod io;
#[cfg(test)]
pub(crate) mod io_mem;
pub(crate) mod redo;

use std::sync::Arc;

use arc_swap::ArcSwapOption;

use redo::{LogFailed, Lsn, RedoLog};

/// Where committed changes go: the redo log once one is attached; nowhere
/// while a node recovers, or for a node that keeps nothing.
#[derive(Debug, Default)]
pub(crate) struct ChangeLog {
    redo: ArcSwapOption<RedoLog>,
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

    /// Logs one commit's change records as one record: where it ends, once
    /// there is a log and anything to log.
    #[inline]
    pub(crate) fn commit(&self, changes: &[u8]) -> Result<Option<Lsn>, LogFailed> {
        match &*self.redo.load() {
            Some(redo) if !changes.is_empty() => redo.append(changes).map(Some),
            _ => Ok(None),
        }
    }

    /// Waits until everything up to `lsn` is durable.
    pub(crate) async fn wait_durable(&self, lsn: Option<Lsn>) -> Result<(), LogFailed> {
        match (lsn, self.redo.load_full()) {
            (Some(lsn), Some(redo)) => redo.wait_durable(lsn).await,
            _ => Ok(()),
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
