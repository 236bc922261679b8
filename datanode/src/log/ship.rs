//! The replication stream: what a primary's commits send to its backups.
//!
//! Every commit of a database this node is the primary of is appended here
//! (by `ChangeLog::commit`, beside the redo log) as one record with the next
//! sequence number. Each backup's link (`cluster`) takes records from where
//! it has got to and says how far the backup holds them; a commit is
//! replicated once every backup in the stream holds its record. Records are
//! kept until every backup holds them, so a link that reconnects sends
//! again what was not acknowledged.
//!
//! The stream is bounded. A node catching up that falls `MAX_BEHIND` bytes
//! behind is dropped from it (it must be caught up anew). A backup of the
//! view is never dropped — commits acknowledged without it would not be on
//! it, while it still serves reads — but named by `too_far_behind`, so
//! that the node asks for the view without it: until then commits wait for
//! it, and memory is held only as long as a view change takes.
//!
//! A node catching up is in the stream without being counted: it gets every
//! record, and the rows copied to it (records for it alone, appended by the
//! worker that owns the fragment, so that they fall in order with the
//! fragment's commits), but no commit waits for it until it is in the view.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};

/// Most bytes of records the stream holds before a backup behind is
/// dropped (catching up) or named too far behind (in the view).
pub(crate) const MAX_BEHIND: usize = 256 << 20;

/// The longest a commit waits for its backups before it is answered
/// `NotReplicated` (a view change removes a dead backup well before).
pub(crate) const REPLICATION_TIMEOUT: Duration = Duration::from_secs(5);

/// What `ship` answers a commit made while the node is fenced off: it is
/// never acknowledged.
const FENCED: u64 = u64::MAX;

/// Where a commit is in the stream, and the fence epoch it was shipped in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shipped {
    pub(crate) seq: u64,
    pub(crate) epoch: u64,
}

impl Shipped {
    /// The later position and the earlier epoch: waiting for it waits for
    /// both commits, and fails if either was shipped before a fence.
    pub(crate) fn max(self, other: Shipped) -> Shipped {
        Shipped {
            seq: self.seq.max(other.seq),
            epoch: self.epoch.min(other.epoch),
        }
    }
}

/// Records of the stream with their numbers.
pub(crate) type Records = Vec<(u64, Arc<[u8]>)>;

/// A commit's records did not reach every backup in time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the change did not reach every replica in time ({0}); it may or may not have been applied, retry"
)]
pub struct NotReplicated(pub Arc<str>);

/// A backup in the stream: the node it is, and how far it holds the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Backup {
    node: u32,
    acked: u64,
    /// Commits wait for it.
    counted: bool,
    /// Catching up: kept whatever the view says until it is in it.
    joining: bool,
}

#[derive(Debug, Default)]
struct State {
    /// The sequence number of the last record appended (the first is 1).
    last: u64,
    /// Records not yet held by every backup, oldest first, each for every
    /// backup or for one alone.
    records: VecDeque<(u64, Arc<[u8]>, Option<u32>)>,
    bytes: usize,
    backups: Vec<Backup>,
    /// Out of the view: no commit can be replicated, none acknowledged.
    fenced: bool,
}

impl State {
    /// How far every counted backup holds the stream (all of it, with none).
    fn held_by_all(&self) -> u64 {
        (self.backups.iter().filter(|b| b.counted))
            .map(|b| b.acked)
            .min()
            .unwrap_or(self.last)
    }

    /// Forgets the records every backup, counted or catching up, holds.
    fn trim(&mut self) {
        let held = (self.backups.iter().map(|b| b.acked).min()).unwrap_or(self.last);
        while self.records.front().is_some_and(|(seq, _, _)| *seq <= held) {
            let (_, record, _) = self.records.pop_front().expect("a front record");
            self.bytes -= record.len();
        }
    }

    /// Appends a record (for `only` one backup, if given): its number.
    fn append(&mut self, changes: &[u8], only: Option<u32>) -> u64 {
        self.last += 1;
        self.records
            .push_back((self.last, Arc::from(changes), only));
        self.bytes += changes.len();
        self.last
    }
}

/// The stream of one primary; shared by the log and the backups' links.
#[derive(Debug)]
pub(crate) struct Outbox {
    state: Mutex<State>,
    /// A record was appended, or the backups changed.
    appended: Notify,
    /// How far every backup holds the stream.
    held: watch::Sender<u64>,
    /// Moved on each time the node is fenced off: a commit shipped before
    /// is never acknowledged after. Moved under the state's lock (so a
    /// commit's epoch is the one it was shipped in); read without it by
    /// waiters, who look inside the watch's lock, which `ack` takes inside
    /// the state's.
    epoch: AtomicU64,
}

impl Default for Outbox {
    fn default() -> Self {
        Outbox {
            state: Mutex::default(),
            appended: Notify::new(),
            held: watch::Sender::new(0),
            epoch: AtomicU64::new(0),
        }
    }
}

impl Outbox {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends one commit's records: its sequence number, or `None` when
    /// there is no backup to wait for.
    pub(crate) fn ship(&self, changes: &[u8]) -> Option<Shipped> {
        let (seq, dropped) = {
            let mut state = self.state();
            if state.fenced {
                return Some(Shipped {
                    seq: FENCED,
                    epoch: self.epoch.load(Ordering::SeqCst),
                });
            }
            if state.backups.is_empty() {
                return None;
            }
            let seq = state.append(changes, None);
            // Nodes catching up furthest behind go, until the rest fit.
            let mut dropped = Vec::new();
            while state.bytes > MAX_BEHIND {
                let Some(slowest) = (0..state.backups.len())
                    .filter(|&i| !state.backups[i].counted)
                    .min_by_key(|&i| state.backups[i].acked)
                else {
                    break;
                };
                dropped.push(state.backups.remove(slowest).node);
                state.trim();
            }
            self.held.send_replace(state.held_by_all());
            (
                Shipped {
                    seq,
                    epoch: self.epoch.load(Ordering::SeqCst),
                },
                dropped,
            )
        };
        for node in dropped {
            tracing::error!(
                node,
                "a node catching up fell too far behind and was dropped from the stream"
            );
        }
        self.appended.notify_waiters();
        Some(seq)
    }

    /// Appends rows copied for `node`, a backup catching up: its number, or
    /// `None` if `node` is no backup (any more).
    pub(crate) fn ship_to(&self, node: u32, changes: &[u8]) -> Option<u64> {
        let seq = {
            let mut state = self.state();
            if !state.backups.iter().any(|b| b.node == node) {
                return None;
            }
            state.append(changes, Some(node))
        };
        self.appended.notify_waiters();
        Some(seq)
    }

    /// How many times the stream has been fenced off.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// The bytes of records not yet held by every backup.
    pub(crate) fn bytes(&self) -> usize {
        self.state().bytes
    }

    /// The number of the last record appended.
    pub(crate) fn last(&self) -> u64 {
        self.state().last
    }

    /// Sets the backups commits wait for: the other nodes of the view. One
    /// that is new holds everything appended so far (it has been brought up
    /// to date by other means); one that is no longer listed stops holding
    /// anyone up. Nodes catching up that are not listed stay as they are.
    pub(crate) fn set_backups(&self, nodes: &[u32]) {
        let mut state = self.state();
        let last = state.last;
        let mut kept: Vec<Backup> = nodes
            .iter()
            .map(|&node| {
                let known = state.backups.iter().find(|b| b.node == node).copied();
                let acked = known.map_or(last, |b| b.acked);
                Backup {
                    node,
                    acked,
                    counted: true,
                    joining: false,
                }
            })
            .collect();
        kept.extend(
            (state.backups.iter())
                .filter(|b| b.joining && !nodes.contains(&b.node))
                .copied(),
        );
        state.backups = kept;
        state.trim();
        self.held.send_replace(state.held_by_all());
        drop(state);
        self.appended.notify_waiters();
    }

    /// Puts `node` in the stream to catch up: it gets everything from now
    /// on, and no commit waits for it.
    pub(crate) fn catch_up(&self, node: u32) {
        let mut state = self.state();
        let last = state.last;
        state.backups.retain(|b| b.node != node);
        state.backups.push(Backup {
            node,
            acked: last,
            counted: false,
            joining: true,
        });
        self.held.send_replace(state.held_by_all());
        drop(state);
        self.appended.notify_waiters();
    }

    /// Counts `node`, catching up, as a backup commits wait for.
    pub(crate) fn count(&self, node: u32) {
        let mut state = self.state();
        for backup in state.backups.iter_mut().filter(|b| b.node == node) {
            backup.counted = true;
        }
        self.held.send_replace(state.held_by_all());
    }

    /// Takes `node` out of the stream, counted or catching up.
    pub(crate) fn remove(&self, node: u32) {
        let mut state = self.state();
        state.backups.retain(|b| b.node != node);
        state.trim();
        self.held.send_replace(state.held_by_all());
    }

    /// The backups of the view that hold the stream up while it is over
    /// its bound: the view should go on without them.
    pub(crate) fn too_far_behind(&self) -> Vec<u32> {
        let state = self.state();
        if state.bytes <= MAX_BEHIND {
            return Vec::new();
        }
        let held = state.held_by_all();
        (state.backups.iter())
            .filter(|b| b.counted && b.acked == held)
            .map(|b| b.node)
            .collect()
    }

    /// Whether `node` is a backup the stream goes to.
    pub(crate) fn has_backup(&self, node: u32) -> bool {
        self.state().backups.iter().any(|b| b.node == node)
    }

    /// How far `node` holds the stream, if it is a backup of it.
    pub(crate) fn acked(&self, node: u32) -> Option<u64> {
        (self.state().backups.iter().find(|b| b.node == node)).map(|b| b.acked)
    }

    /// `node` holds the stream up to `seq`.
    pub(crate) fn ack(&self, node: u32, seq: u64) {
        let mut state = self.state();
        let Some(backup) = state.backups.iter_mut().find(|b| b.node == node) else {
            return;
        };
        if seq <= backup.acked {
            return;
        }
        backup.acked = seq;
        state.trim();
        self.held.send_replace(state.held_by_all());
    }

    /// Records for `node` after `after`, up to about `max_bytes` of them
    /// (at least one), for its link; empty when there are none yet. The
    /// second is the number the stream is at for it: past records for
    /// other nodes alone.
    pub(crate) fn after(&self, node: u32, after: u64, max_bytes: usize) -> (Records, u64) {
        let state = self.state();
        let first = (state.records.front()).map_or(state.last + 1, |(seq, _, _)| *seq);
        let skip = after.saturating_add(1).saturating_sub(first) as usize;
        let mut out = Vec::new();
        let mut bytes = 0;
        let mut at = after.max(first.saturating_sub(1));
        for (seq, record, only) in state.records.iter().skip(skip) {
            if !out.is_empty() && bytes + record.len() > max_bytes {
                break;
            }
            at = *seq;
            if only.is_some_and(|n| n != node) {
                continue;
            }
            bytes += record.len();
            out.push((*seq, Arc::clone(record)));
        }
        (out, at)
    }

    /// Registers for the next change before the caller looks, so that a
    /// change between its look and its wait is not missed.
    pub(crate) fn on_change(&self) -> tokio::sync::futures::Notified<'_> {
        self.appended.notified()
    }

    /// Fails every commit waiting now: this node is out of its group's
    /// view, so what it committed may not be on the replicas that go on.
    pub(crate) fn fence(&self) {
        let mut state = self.state();
        state.fenced = true;
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.held.send_replace(state.held_by_all());
    }

    /// In the view again: commits are replicated to its backups.
    pub(crate) fn unfence(&self) {
        self.state().fenced = false;
    }

    /// Waits until every backup holds the stream up to `seq`.
    pub(crate) async fn wait(&self, shipped: Shipped) -> Result<(), NotReplicated> {
        let Shipped { seq, epoch } = shipped;
        if seq == FENCED {
            return Err(NotReplicated(
                "this node is out of its group's view: nothing it commits is acknowledged".into(),
            ));
        }
        let fenced = || self.epoch.load(Ordering::SeqCst) != epoch;
        let mut held = self.held.subscribe();
        let reached = tokio::time::timeout(
            REPLICATION_TIMEOUT,
            held.wait_for(|&h| h >= seq || fenced()),
        );
        let reached = reached.await;
        if fenced() {
            return Err(NotReplicated(
                "this node left its group's view before the replicas held it".into(),
            ));
        }
        match reached {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(NotReplicated("the stream was closed".into())),
            Err(_) => Err(NotReplicated(
                format!(
                    "no answer from a backup within {} s",
                    REPLICATION_TIMEOUT.as_secs()
                )
                .into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_backups_nothing_is_kept_or_waited_for() {
        let outbox = Outbox::default();
        assert_eq!(outbox.ship(b"a"), None);
        assert!(outbox.after(2, 0, 1 << 20).0.is_empty());
    }

    #[test]
    fn records_are_kept_until_every_backup_holds_them() {
        let outbox = Outbox::default();
        outbox.set_backups(&[2, 3]);
        assert_eq!(outbox.ship(b"one").map(|s| s.seq), Some(1));
        assert_eq!(outbox.ship(b"two").map(|s| s.seq), Some(2));
        let seqs = |(v, _): (Records, u64)| v.into_iter().map(|(s, _)| s).collect::<Vec<_>>();
        assert_eq!(seqs(outbox.after(2, 0, 1 << 20)), vec![1, 2]);
        assert_eq!(seqs(outbox.after(2, 1, 1 << 20)), vec![2]);
        // At least one record, however small the budget.
        assert_eq!(seqs(outbox.after(2, 0, 1)), vec![1]);
        outbox.ack(2, 2);
        assert_eq!(*outbox.held.borrow(), 0, "node 3 holds nothing yet");
        assert_eq!(seqs(outbox.after(2, 0, 1 << 20)), vec![1, 2]);
        outbox.ack(3, 1);
        assert_eq!(*outbox.held.borrow(), 1);
        assert_eq!(
            seqs(outbox.after(2, 0, 1 << 20)),
            vec![2],
            "1 is held by all"
        );
        // A backup leaving holds nobody up.
        outbox.set_backups(&[2]);
        assert_eq!(*outbox.held.borrow(), 2);
        assert!(outbox.after(2, 0, 1 << 20).0.is_empty());
        // One joining holds what came before it.
        outbox.set_backups(&[2, 4]);
        assert_eq!(outbox.acked(4), Some(2));
        assert!(!outbox.has_backup(3));
    }

    #[test]
    fn a_node_catching_up_gets_its_copies_and_holds_no_commit_up() {
        let outbox = Outbox::default();
        outbox.set_backups(&[2]);
        outbox.catch_up(3);
        let one = outbox.ship(b"commit").unwrap().seq;
        let copy = outbox.ship_to(3, b"copied rows").unwrap();
        assert_eq!(outbox.ship_to(4, b"nobody"), None);
        outbox.ack(2, one);
        assert_eq!(*outbox.held.borrow(), one, "node 3 is not waited for");
        let (for_two, at) = outbox.after(2, one, 1 << 20);
        assert!(for_two.is_empty(), "the copy is for node 3 alone");
        assert_eq!(at, copy, "but node 2's stream is past it");
        let (for_three, _) = outbox.after(3, 0, 1 << 20);
        assert_eq!(
            for_three.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            [one, copy]
        );
        // In the view, it is counted, keeping how far it got.
        outbox.ack(3, one);
        outbox.set_backups(&[2, 3]);
        assert_eq!(outbox.acked(3), Some(one));
        let next = outbox.ship(b"another").unwrap().seq;
        outbox.ack(2, next);
        assert_eq!(*outbox.held.borrow(), one, "now node 3 is waited for");
        outbox.remove(3);
        assert_eq!(*outbox.held.borrow(), next);
    }

    #[test]
    fn a_commit_shipped_before_a_fence_is_never_acknowledged() {
        crate::test_runtime().block_on(async {
            let outbox = Outbox::default();
            outbox.set_backups(&[2]);
            let before = outbox.ship(b"x").unwrap();
            // Out of the view: the backups go, which must not count as held.
            outbox.fence();
            outbox.set_backups(&[]);
            assert!(outbox.wait(before).await.is_err());
            let during = outbox.ship(b"y").unwrap();
            assert!(outbox.wait(during).await.is_err());
            // Back in the view: new commits are waited for as before.
            outbox.unfence();
            outbox.set_backups(&[2]);
            let after = outbox.ship(b"z").unwrap();
            outbox.ack(2, after.seq);
            assert_eq!(outbox.wait(after).await, Ok(()));
            assert!(outbox.wait(before).await.is_err(), "still never");
        });
    }

    #[test]
    fn a_backup_too_far_behind_is_named_and_one_catching_up_dropped() {
        let outbox = Outbox::default();
        outbox.set_backups(&[2, 3]);
        outbox.catch_up(4);
        let big = vec![0u8; MAX_BEHIND / 4 + 1];
        for _ in 0..3 {
            let seq = outbox.ship(&big).unwrap().seq;
            outbox.ack(2, seq);
        }
        assert!(outbox.has_backup(3) && outbox.has_backup(4));
        assert!(outbox.too_far_behind().is_empty());
        let shipped = outbox.ship(&big).unwrap();
        assert!(!outbox.has_backup(4), "node 4, catching up, fell behind");
        assert!(outbox.has_backup(3), "a backup of the view stays");
        assert_eq!(outbox.too_far_behind(), vec![3]);
        // Commits still wait for it: nothing is acknowledged without it.
        outbox.ack(2, shipped.seq);
        assert!(*outbox.held.borrow() < shipped.seq);
        outbox.set_backups(&[2]);
        assert!(outbox.too_far_behind().is_empty());
        assert_eq!(*outbox.held.borrow(), shipped.seq);
    }

    #[test]
    fn a_wait_ends_once_every_backup_holds_the_record() {
        crate::test_runtime().block_on(async {
            let outbox = Arc::new(Outbox::default());
            outbox.set_backups(&[2]);
            let shipped = outbox.ship(b"x").unwrap();
            let waiter = tokio::spawn({
                let outbox = Arc::clone(&outbox);
                async move { outbox.wait(shipped).await }
            });
            outbox.ack(2, shipped.seq);
            assert_eq!(waiter.await.unwrap(), Ok(()));
        });
    }
}
