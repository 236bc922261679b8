//! Jobs parked on a row another transaction holds, by row, with deadlines.
//!
//! A job parks on exactly one row. When that row is let go (its holder
//! commits or aborts) every job parked on it is woken to run again from the
//! operation that waited; a job still parked at its deadline is taken out
//! and timed out. Deadlines sit in a heap; an entry whose job has already
//! been woken is recognised by its generation and skipped.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use super::Job;
use crate::storage::fixed::RowRef;

/// A row of a fragment: its slot on the worker and its place in it.
pub(super) type RowKey = (u32, RowRef);

struct Parked {
    job: Job,
    row: RowKey,
    generation: u64,
}

pub(super) struct Waits {
    timeout: Duration,
    parked: Vec<Option<Parked>>,
    free: Vec<usize>,
    by_row: FxHashMap<RowKey, Vec<usize>>,
    deadlines: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    generation: u64,
}

impl Waits {
    pub(super) fn new(timeout: Duration) -> Waits {
        Waits {
            timeout,
            parked: Vec::new(),
            free: Vec::new(),
            by_row: FxHashMap::default(),
            deadlines: BinaryHeap::new(),
            generation: 0,
        }
    }

    /// Parks `job` until `row` is let go, for at most the timeout from `now`.
    pub(super) fn park(&mut self, job: Job, row: RowKey, now: Instant) {
        self.generation += 1;
        let parked = Parked {
            job,
            row,
            generation: self.generation,
        };
        let at = match self.free.pop() {
            Some(at) => {
                self.parked[at] = Some(parked);
                at
            }
            None => {
                self.parked.push(Some(parked));
                self.parked.len() - 1
            }
        };
        self.by_row.entry(row).or_default().push(at);
        self.deadlines
            .push(Reverse((now + self.timeout, at, self.generation)));
    }

    fn take(&mut self, at: usize) -> Job {
        let parked = self.parked[at].take().expect("parked");
        self.free.push(at);
        parked.job
    }

    /// The jobs parked on `row`, which has been let go, in the order they came.
    pub(super) fn wake(&mut self, row: RowKey) -> Vec<Job> {
        let Some(ats) = self.by_row.remove(&row) else {
            return Vec::new();
        };
        ats.into_iter().map(|at| self.take(at)).collect()
    }

    /// The jobs parked on any row of fragment slot `slot`.
    pub(super) fn wake_slot(&mut self, slot: u32) -> Vec<Job> {
        let rows: Vec<RowKey> = self
            .by_row
            .keys()
            .filter(|(s, _)| *s == slot)
            .copied()
            .collect();
        rows.into_iter().flat_map(|row| self.wake(row)).collect()
    }

    /// When the earliest parked job times out.
    pub(super) fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(&Reverse((deadline, at, generation))) = self.deadlines.peek() {
            if self.is_current(at, generation) {
                return Some(deadline);
            }
            self.deadlines.pop();
        }
        None
    }

    fn is_current(&self, at: usize, generation: u64) -> bool {
        matches!(&self.parked[at], Some(p) if p.generation == generation)
    }

    /// Takes out the jobs whose deadline has passed.
    pub(super) fn expired(&mut self, now: Instant) -> Vec<Job> {
        let mut jobs = Vec::new();
        while let Some(&Reverse((deadline, at, generation))) = self.deadlines.peek() {
            if deadline > now {
                break;
            }
            self.deadlines.pop();
            if !self.is_current(at, generation) {
                continue;
            }
            let row = self.parked[at].as_ref().expect("current").row;
            let waiting = self.by_row.get_mut(&row).expect("parked on its row");
            waiting.retain(|&w| w != at);
            if waiting.is_empty() {
                self.by_row.remove(&row);
            }
            jobs.push(self.take(at));
        }
        jobs
    }

    /// Takes out the jobs of transaction `txn`, which is being aborted.
    pub(super) fn cancel(&mut self, txn: super::TxnId) -> Vec<Job> {
        let ats: Vec<usize> = (0..self.parked.len())
            .filter(|&at| matches!(&self.parked[at], Some(p) if p.job.txn == txn))
            .collect();
        for &at in &ats {
            let row = self.parked[at].as_ref().expect("found").row;
            let waiting = self.by_row.get_mut(&row).expect("parked on its row");
            waiting.retain(|&w| w != at);
            if waiting.is_empty() {
                self.by_row.remove(&row);
            }
        }
        ats.into_iter().map(|at| self.take(at)).collect()
    }

    #[cfg(test)]
    pub(super) fn parked(&self) -> usize {
        self.parked.iter().flatten().count()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_row.is_empty()
    }
}
