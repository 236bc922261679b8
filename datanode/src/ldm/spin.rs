//! Spinning: a worker thread whose work comes close together polls for the
//! next before it sleeps, as RonDB's block threads spin (`SpinMethod`,
//! `SchedulerSpinTimer`).
//!
//! A thread that sleeps is woken by the kernel when a request arrives —
//! and, on a virtual machine, by the hypervisor too: many microseconds,
//! more than a key lookup costs. A client that sends its next request as
//! soon as it has its answer (one sysbench thread, an application's
//! request loop) waits for that wake-up on every request.
//!
//! The spinner runs beside the worker's message loop on the worker's
//! runtime. Each message the worker handles is work (`Spin::worked`).
//! After work the spinner waits until the thread has nothing else to run
//! — the moment it would sleep — and then, if the last wait for work was
//! shorter than the spin time, keeps the thread awake instead: each round
//! it syncs the redo log for the thread's waiting tasks (what the thread
//! does before it sleeps), offers the core to any other thread that wants
//! it (`sched_yield`), and lets the runtime poll its sockets without
//! waiting. It stops at the first work, or once the spin time has passed
//! with none. A thread whose work comes further apart than the spin time
//! does not spin again until a wait is short: a node that serves a request
//! now and then sleeps between them as before. Nor does a thread whose
//! core other threads keep wanting (`note_contention`).

use std::cell::Cell;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::log::redo::RedoLog;

/// How long a worker spins by default (`--spin-us`): not at all. Spinning
/// is for a node with cores of its own: where its clients run on the same
/// cores, a spinning worker holds them back (docs/benchmarks.md).
pub const DEFAULT_SPIN: Duration = Duration::ZERO;
/// Longest spin time that may be configured.
pub const MAX_SPIN: Duration = Duration::from_millis(1);
/// A `sched_yield` that takes longer than this gave the core to another
/// thread: the core is wanted.
const CONTENDED_YIELD: Duration = Duration::from_micros(10);
/// A thread whose core other threads wanted in at least this many of its
/// last 16 spins does not spin for `CONTENDED_PAUSE`.
const CONTENDED_SPINS: u32 = 8;
/// How long a thread whose core other threads want does not spin.
const CONTENDED_PAUSE: Duration = Duration::from_millis(50);

/// One worker thread's spinning.
pub(super) struct Spin {
    /// How long to spin; zero: never.
    time: Duration,
    /// Work handled so far.
    work: Cell<u64>,
    /// When the thread last ran out of work, while the spinner sleeps.
    idle_since: Cell<Option<Instant>>,
    /// How long the last wait for work was.
    last_wait: Cell<Duration>,
    /// The last 16 spins, newest in the lowest bit: 1 where another
    /// thread took the core.
    contended: Cell<u16>,
    /// No spinning before this: other threads wanted the core.
    paused_until: Cell<Option<Instant>>,
    /// Wakes the sleeping spinner.
    wake: Notify,
}

impl Spin {
    pub(super) fn new(time: Duration) -> Spin {
        Spin {
            time,
            work: Cell::new(0),
            idle_since: Cell::new(None),
            last_wait: Cell::new(Duration::MAX),
            contended: Cell::new(0),
            paused_until: Cell::new(None),
            wake: Notify::new(),
        }
    }

    /// Notes that the worker handled work.
    pub(super) fn worked(&self) {
        if self.time.is_zero() {
            return;
        }
        self.work.set(self.work.get().wrapping_add(1));
        if let Some(since) = self.idle_since.take() {
            self.last_wait.set(since.elapsed());
            self.wake.notify_one();
        }
    }

    /// Whether spinning is paused at `now`: another thread wanted the core
    /// a moment ago.
    fn paused(&self, now: Instant) -> bool {
        match self.paused_until.get() {
            Some(until) if now < until => true,
            Some(_) => {
                self.paused_until.set(None);
                false
            }
            None => false,
        }
    }

    /// Notes whether another thread took the core during a spin. Clients
    /// on the same cores as the node (a machine whose cores are all busy)
    /// are held back by a thread that spins: when that is so in half of
    /// the recent spins, spinning pauses.
    fn note_contention(&self, contended: bool, now: Instant) {
        let history = (self.contended.get() << 1) | u16::from(contended);
        if history.count_ones() >= CONTENDED_SPINS {
            self.paused_until.set(Some(now + CONTENDED_PAUSE));
            self.contended.set(0);
        } else {
            self.contended.set(history);
        }
    }

    /// Spins after work whose waits are short, for as long as the thread
    /// runs; never returns.
    pub(super) async fn run(&self) {
        if self.time.is_zero() {
            return std::future::pending().await;
        }
        loop {
            // Behind whatever else is ready to run: then the thread is idle.
            tokio::task::yield_now().await;
            let idle = Instant::now();
            if self.last_wait.get() < self.time && !self.paused(idle) {
                let seen = self.work.get();
                let mut contended = false;
                while self.work.get() == seen && idle.elapsed() < self.time {
                    RedoLog::before_park();
                    let offered = Instant::now();
                    std::thread::yield_now();
                    let back = Instant::now();
                    if back - offered > CONTENDED_YIELD {
                        contended = true;
                        break;
                    }
                    tokio::task::yield_now().await;
                }
                self.note_contention(contended, Instant::now());
                if self.work.get() != seen {
                    self.last_wait.set(idle.elapsed());
                    continue;
                }
                self.last_wait.set(self.time);
            }
            self.idle_since.set(Some(idle));
            self.wake.notified().await;
        }
    }
}
