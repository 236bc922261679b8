//! Rate limiters on `governor` (GCRA), keyed by database.
//!
//! A governor keyed limiter has one quota for all its keys, so databases with
//! the same rate and burst share one keyed limiter, each database with its own
//! key and state in it, kept in a `DashMap`. A [`LimiterPool`] hands these
//! groups out; changing a database's rate gives it another group at once and
//! touches no other database's state. [`LimiterPool::housekeep`] drops keys
//! whose state has returned to idle (`retain_recent`) and groups nobody uses,
//! so the state stays bounded.
//!
//! The clock is a [`LimiterClock`]: std's monotonic `Instant` in service —
//! not quanta's TSC clock, which can run backwards between cores — or a clock
//! that moves only when a test moves it.

use std::collections::HashMap;
use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{InsufficientCapacity, Quota, RateLimiter};
use rustc_hash::FxBuildHasher;

/// Time for limiters, as the time since the clock was made.
#[derive(Debug, Clone)]
pub enum LimiterClock {
    /// std's monotonic clock.
    Monotonic(Instant),
    /// Nanoseconds that pass only when `advance` is called.
    Manual(Arc<AtomicU64>),
}

impl LimiterClock {
    pub fn monotonic() -> LimiterClock {
        LimiterClock::Monotonic(Instant::now())
    }

    /// A clock standing still at zero until advanced.
    pub fn manual() -> LimiterClock {
        LimiterClock::Manual(Arc::new(AtomicU64::new(0)))
    }

    /// Moves a manual clock on; a monotonic one moves by itself.
    pub fn advance(&self, by: Duration) {
        if let LimiterClock::Manual(nanos) = self {
            nanos.fetch_add(by.as_nanos() as u64, Ordering::Relaxed);
        }
    }
}

impl Default for LimiterClock {
    fn default() -> Self {
        LimiterClock::monotonic()
    }
}

impl Clock for LimiterClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        match self {
            LimiterClock::Monotonic(start) => start.elapsed(),
            LimiterClock::Manual(nanos) => Duration::from_nanos(nanos.load(Ordering::Relaxed)),
        }
    }
}

/// Why a limiter refused units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throttled {
    /// Over the rate: the units fit after this wait.
    RetryAfter(Duration),
    /// More units at once than the burst allows: no wait helps.
    ExceedsBurst,
}

/// Keys are ids the data node assigns, not chosen by users, so a fast hash
/// is safe for them.
type Keyed<K, C> =
    RateLimiter<K, DashMapStateStore<K, FxBuildHasher>, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// One rate and burst, with a state per key.
pub struct Limiter<K: Hash + Eq + Clone, C: Clock = LimiterClock> {
    rate: u32,
    burst: u32,
    keyed: Keyed<K, C>,
    clock: C,
}

impl<K: Hash + Eq + Clone, C: Clock> std::fmt::Debug for Limiter<K, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("rate", &self.rate)
            .field("burst", &self.burst)
            .finish()
    }
}

impl<K: Hash + Eq + Clone, C: Clock + Clone> Limiter<K, C> {
    fn new(rate: NonZeroU32, burst: NonZeroU32, clock: C) -> Self {
        let quota = Quota::per_second(rate).allow_burst(burst);
        Limiter {
            rate: rate.get(),
            burst: burst.get(),
            keyed: RateLimiter::dashmap_with_clock_and_hasher(quota, clock.clone(), FxBuildHasher),
            clock,
        }
    }

    pub fn rate(&self) -> u32 {
        self.rate
    }

    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Takes `units` for `key`, all or none.
    pub fn check(&self, key: &K, units: u64) -> Result<(), Throttled> {
        let Ok(n) = u32::try_from(units) else {
            return Err(Throttled::ExceedsBurst);
        };
        let Some(n) = NonZeroU32::new(n) else {
            return Ok(());
        };
        match self.keyed.check_key_n(key, n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(Throttled::RetryAfter(
                not_until.wait_time_from(self.clock.now()),
            )),
            Err(InsufficientCapacity(_)) => Err(Throttled::ExceedsBurst),
        }
    }

    /// Keys with state in this limiter.
    pub fn keys(&self) -> usize {
        self.keyed.len()
    }
}

/// Hands out limiters, one per distinct rate and burst, shared by every key
/// with those limits.
pub struct LimiterPool<K: Hash + Eq + Clone, C: Clock = LimiterClock> {
    clock: C,
    groups: Mutex<Groups<K, C>>,
}

/// Limiters by rate and burst, held weakly: a limiter lives as long as some
/// key's limits name it.
type Groups<K, C> = HashMap<(u32, u32), Weak<Limiter<K, C>>>;

impl<K: Hash + Eq + Clone, C: Clock> std::fmt::Debug for LimiterPool<K, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimiterPool").finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone> Default for LimiterPool<K, LimiterClock> {
    fn default() -> Self {
        LimiterPool::new(LimiterClock::monotonic())
    }
}

impl<K: Hash + Eq + Clone, C: Clock + Clone> LimiterPool<K, C> {
    pub fn new(clock: C) -> Self {
        LimiterPool {
            clock,
            groups: Mutex::new(HashMap::new()),
        }
    }

    /// The limiter for `rate` units per second with bursts of `burst`.
    pub fn limiter(&self, rate: NonZeroU32, burst: NonZeroU32) -> Arc<Limiter<K, C>> {
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        let slot = groups.entry((rate.get(), burst.get())).or_default();
        if let Some(limiter) = slot.upgrade() {
            return limiter;
        }
        let limiter = Arc::new(Limiter::new(rate, burst, self.clock.clone()));
        *slot = Arc::downgrade(&limiter);
        limiter
    }

    /// Forgets keys whose state is back to idle and limiters nobody holds.
    pub fn housekeep(&self) {
        self.groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, group| match group.upgrade() {
                Some(limiter) => {
                    limiter.keyed.retain_recent();
                    limiter.keyed.shrink_to_fit();
                    true
                }
                None => false,
            });
    }

    /// Keys with state, over every limiter in use.
    pub fn keys(&self) -> usize {
        let groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        groups
            .values()
            .filter_map(Weak::upgrade)
            .map(|l| l.keys())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nz(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap()
    }

    #[test]
    fn admits_rate_times_time_plus_burst_under_overload() {
        // 10 simulated seconds at five times the rate, in 1 ms steps.
        let clock = LimiterClock::manual();
        let pool: LimiterPool<u32, _> = LimiterPool::new(clock.clone());
        let (rate, burst) = (1000u32, 1000u32);
        let limiter = pool.limiter(nz(rate), nz(burst));
        let mut admitted = 0u64;
        for _ in 0..10_000 {
            for _ in 0..5 {
                if limiter.check(&7, 1).is_ok() {
                    admitted += 1;
                }
            }
            clock.advance(Duration::from_millis(1));
        }
        let expected = f64::from(rate) * 10.0 + f64::from(burst);
        let error = (admitted as f64 - expected).abs() / expected;
        assert!(error <= 0.02, "admitted {admitted}, expected {expected}");
    }

    #[test]
    fn batches_larger_than_the_burst_are_refused_for_good() {
        let pool: LimiterPool<u32, _> = LimiterPool::new(LimiterClock::manual());
        let limiter = pool.limiter(nz(10), nz(20));
        assert_eq!(limiter.check(&1, 21), Err(Throttled::ExceedsBurst));
        assert_eq!(limiter.check(&1, u64::MAX), Err(Throttled::ExceedsBurst));
        assert_eq!(limiter.check(&1, 0), Ok(()));
        assert_eq!(limiter.check(&1, 20), Ok(()));
    }

    #[test]
    fn the_wait_it_names_is_the_wait_that_works() {
        let clock = LimiterClock::manual();
        let pool: LimiterPool<u32, _> = LimiterPool::new(clock.clone());
        let limiter = pool.limiter(nz(10), nz(10));
        limiter.check(&1, 10).unwrap();
        let Err(Throttled::RetryAfter(wait)) = limiter.check(&1, 5) else {
            panic!("over the rate")
        };
        assert_eq!(wait, Duration::from_millis(500), "5 units at 10 per second");
        clock.advance(wait - Duration::from_millis(1));
        assert!(limiter.check(&1, 5).is_err(), "not a moment before");
        clock.advance(Duration::from_millis(1));
        assert_eq!(limiter.check(&1, 5), Ok(()));
    }

    #[test]
    fn keys_are_independent_and_limits_change_without_touching_others() {
        let clock = LimiterClock::manual();
        let pool: LimiterPool<u32, _> = LimiterPool::new(clock.clone());
        let slow = pool.limiter(nz(1), nz(1));
        assert!(
            Arc::ptr_eq(&slow, &pool.limiter(nz(1), nz(1))),
            "one group per rate and burst"
        );
        slow.check(&1, 1).unwrap();
        slow.check(&2, 1).unwrap();
        assert!(slow.check(&1, 1).is_err());
        // Key 1 gets a faster rate: its next request is judged by it at once.
        let fast = pool.limiter(nz(100), nz(100));
        assert_eq!(fast.check(&1, 50), Ok(()));
        assert!(slow.check(&2, 1).is_err(), "key 2 is where it was");
    }

    #[test]
    fn housekeeping_bounds_the_state() {
        let clock = LimiterClock::manual();
        let pool: LimiterPool<u32, _> = LimiterPool::new(clock.clone());
        let limiter = pool.limiter(nz(100), nz(100));
        for key in 0..1000 {
            limiter.check(&key, 1).unwrap();
        }
        assert_eq!(pool.keys(), 1000);
        pool.housekeep();
        assert_eq!(pool.keys(), 1000, "recently used keys stay");
        clock.advance(Duration::from_secs(2));
        pool.housekeep();
        assert_eq!(pool.keys(), 0, "idle keys go");
        drop(limiter);
        pool.housekeep();
        assert!(pool.groups.lock().unwrap().is_empty(), "unused groups go");
    }
}
