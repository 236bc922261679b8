//! A database's limits and what it has used, as the transaction coordinator
//! keeps them: read on every request without a lock, changed at run time.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use shoal_quota::Quota;
use shoal_quota::error::RateKind;
use shoal_quota::limiter::{Limiter, LimiterPool, Throttled};

use crate::types::DatabaseId;

/// A database's quota with the rate limiters that enforce it.
#[derive(Debug)]
pub(crate) struct Limits {
    pub(crate) quota: Quota,
    pub(crate) read: Option<Arc<Limiter<DatabaseId>>>,
    pub(crate) write: Option<Arc<Limiter<DatabaseId>>>,
}

impl Limits {
    fn new(quota: Quota, pool: &LimiterPool<DatabaseId>) -> Limits {
        let limiter = |rate: Option<u32>| {
            let rate = NonZeroU32::new(rate?)?;
            let burst = NonZeroU32::new(quota.burst(rate.get()))?;
            Some(pool.limiter(rate, burst))
        };
        Limits {
            read: limiter(quota.read_units_per_sec),
            write: limiter(quota.write_units_per_sec),
            quota,
        }
    }
}

/// What a database has used since the data node started.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) read_units: AtomicU64,
    pub(crate) write_units: AtomicU64,
    pub(crate) throttled_reads: AtomicU64,
    pub(crate) throttled_writes: AtomicU64,
    pub(crate) quota_rejections: AtomicU64,
    /// Requests run past every check, and those of them that failed.
    pub(crate) requests: AtomicU64,
    pub(crate) failed: AtomicU64,
    /// How long the requests run took.
    pub(crate) latency: Latency,
}

/// Upper bounds of the latency buckets, in microseconds; one more bucket
/// takes everything slower.
pub(crate) const LATENCY_BOUNDS_US: [u64; 14] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 250_000, 1_000_000,
];

/// A latency histogram of fixed buckets: a relaxed add to record, no lock.
#[derive(Debug, Default)]
pub(crate) struct Latency {
    buckets: [AtomicU64; LATENCY_BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
}

impl Latency {
    pub(crate) fn record(&self, took: std::time::Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let bucket = LATENCY_BOUNDS_US.partition_point(|&bound| bound < us);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Requests per bucket (not cumulative), and the sum in microseconds.
    pub(crate) fn read(&self) -> ([u64; LATENCY_BOUNDS_US.len() + 1], u64) {
        let mut counts = [0; LATENCY_BOUNDS_US.len() + 1];
        for (count, bucket) in counts.iter_mut().zip(&self.buckets) {
            *count = bucket.load(Ordering::Relaxed);
        }
        (counts, self.sum_us.load(Ordering::Relaxed))
    }
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        // An atomic add is dear on a shared line; adding nothing costs nothing.
        if n > 0 {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

#[derive(Debug)]
pub(crate) struct Governance {
    limits: ArcSwap<Limits>,
    in_flight: AtomicU32,
    /// Read units owed: what rows read beyond their first unit cost, charged
    /// with the database's next request.
    read_debt: AtomicU64,
    /// Units the other nodes of the group admitted, as they told this node,
    /// not yet taken from its limiters (read, write): every node's limiter
    /// takes every node's units, so the database's rate holds whatever
    /// node a request arrives at.
    peer_units: [AtomicU64; 2],
    pub(crate) counters: Counters,
}

impl Default for Governance {
    fn default() -> Self {
        Governance {
            limits: ArcSwap::from_pointee(Limits {
                quota: Quota::UNLIMITED,
                read: None,
                write: None,
            }),
            in_flight: AtomicU32::new(0),
            read_debt: AtomicU64::new(0),
            peer_units: [AtomicU64::new(0), AtomicU64::new(0)],
            counters: Counters::default(),
        }
    }
}

impl Governance {
    pub(crate) fn quota(&self) -> Quota {
        self.limits.load().quota
    }

    pub(crate) fn limits(&self) -> arc_swap::Guard<Arc<Limits>> {
        self.limits.load()
    }

    /// Applies a new quota; the next request is judged by it.
    pub(crate) fn set(&self, quota: Quota, pool: &LimiterPool<DatabaseId>) {
        self.limits.store(Arc::new(Limits::new(quota, pool)));
    }

    /// Counts a request in flight, if that stays within `limit`: whether it
    /// was counted (then `leave` counts it out), or `None` if over the limit.
    /// Without a limit nothing is counted, sparing every request two atomic
    /// writes; a limit set later counts from the requests after it.
    pub(crate) fn enter(&self, limit: Option<u32>) -> Option<bool> {
        let Some(limit) = limit else {
            return Some(false);
        };
        self.in_flight
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| true)
    }

    pub(crate) fn leave(&self) {
        // Saturating: requests counted before a limit was removed and set
        // again must not wrap the count.
        let _ = self
            .in_flight
            .fetch_update(Ordering::Release, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Forgets what earlier reads owe: nothing limits the reads.
    pub(crate) fn forgive_read_debt(&self) {
        if self.read_debt.load(Ordering::Relaxed) != 0 {
            self.read_debt.store(0, Ordering::Relaxed);
        }
    }

    pub(crate) fn owe_reads(&self, units: u64) {
        if units > 0 {
            self.read_debt.fetch_add(units, Ordering::Relaxed);
        }
    }

    /// The read and write units this node has admitted since it started.
    pub(crate) fn admitted(&self) -> (u64, u64) {
        (
            Counters::get(&self.counters.read_units),
            Counters::get(&self.counters.write_units),
        )
    }

    /// Notes units another node of the group admitted (only those a limit
    /// of this node's applies to: the others are never taken).
    pub(crate) fn admitted_elsewhere(&self, reads: u64, writes: u64) {
        let limits = self.limits();
        for (units, limited, owed) in [
            (reads, limits.read.is_some(), &self.peer_units[0]),
            (writes, limits.write.is_some(), &self.peer_units[1]),
        ] {
            if units > 0 && limited {
                owed.fetch_add(units, Ordering::Relaxed);
            }
        }
    }

    /// Takes the units of `kind` other nodes admitted from `limiter`, a
    /// burst at a time, before this node admits more: the wait once it
    /// cannot take the rest, which is kept for the next request.
    pub(crate) fn take_elsewhere(
        &self,
        kind: RateKind,
        limiter: &Limiter<DatabaseId>,
        db: &DatabaseId,
    ) -> Result<(), Duration> {
        let owed = match kind {
            RateKind::Read => &self.peer_units[0],
            RateKind::Write => &self.peer_units[1],
        };
        Self::take_owed(owed, limiter, db)
    }

    /// Takes the read units earlier reads owe (rows past their first unit,
    /// rows a scan examined) from `limiter`, a burst at a time, as
    /// `take_elsewhere` does: so a debt larger than the burst is paid
    /// over time, not refused for ever.
    pub(crate) fn take_read_debt(
        &self,
        limiter: &Limiter<DatabaseId>,
        db: &DatabaseId,
    ) -> Result<(), Duration> {
        Self::take_owed(&self.read_debt, limiter, db)
    }

    fn take_owed(
        owed: &AtomicU64,
        limiter: &Limiter<DatabaseId>,
        db: &DatabaseId,
    ) -> Result<(), Duration> {
        // Most databases owe nothing most of the time: look first.
        if owed.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        let mut left = owed.swap(0, Ordering::Relaxed);
        while left > 0 {
            let part = left.min(u64::from(limiter.burst()));
            match limiter.check(db, part) {
                Ok(()) => left -= part,
                Err(Throttled::RetryAfter(wait)) => {
                    owed.fetch_add(left, Ordering::Relaxed);
                    return Err(wait);
                }
                // No part is larger than the burst.
                Err(Throttled::ExceedsBurst) => unreachable!("a part within the burst"),
            }
        }
        Ok(())
    }
}
