//! Key locks: a fixed array of stripes, a key's stripe by hash.
//!
//! A writer of a key holds its stripe across the transaction coordinator's
//! round trip and the wait for the redo log, so that a read-modify-write
//! sees no other writer in between. Nearly always the stripe is free: taking
//! it is one compare-and-swap and letting it go one store, with nothing
//! allocated and no lock behind it (tokio's `Mutex` takes and lets go of its
//! waiter list's lock on every release, which cost a pipelined SET more
//! than its lookup did). A writer that finds its stripe held waits for any
//! release and tries again; a release looks for waiters only when a count
//! says there are some.

use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

pub(crate) struct KeyLocks {
    held: Box<[AtomicBool]>,
    /// Writers waiting for a stripe.
    waiting: AtomicUsize,
    released: Notify,
}

impl std::fmt::Debug for KeyLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyLocks")
            .field("stripes", &self.held.len())
            .finish_non_exhaustive()
    }
}

/// Stripes held; let go when dropped.
#[must_use = "the stripes are let go when the guard is dropped"]
#[derive(Debug)]
pub(crate) struct KeyGuard<'a> {
    locks: &'a KeyLocks,
    stripes: Vec<usize>,
}

/// Counts a waiting writer for as long as it waits, even if its future is
/// dropped midway.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl KeyLocks {
    pub(crate) fn new(stripes: usize) -> KeyLocks {
        KeyLocks {
            held: (0..stripes).map(|_| AtomicBool::new(false)).collect(),
            waiting: AtomicUsize::new(0),
            released: Notify::new(),
        }
    }

    pub(crate) fn stripes(&self) -> usize {
        self.held.len()
    }

    /// Takes `stripes`, which the caller has sorted and deduplicated: every
    /// caller takes stripes in one order, so none waits for another that
    /// waits for it.
    pub(crate) async fn lock(&self, stripes: &[usize]) -> KeyGuard<'_> {
        let mut guard = KeyGuard {
            locks: self,
            stripes: Vec::with_capacity(stripes.len()),
        };
        for &s in stripes {
            debug_assert!(guard.stripes.last().is_none_or(|&last| last < s));
            if !self.try_take(s) {
                self.wait_for(s).await;
            }
            guard.stripes.push(s);
        }
        guard
    }

    fn try_take(&self, stripe: usize) -> bool {
        self.held[stripe]
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    async fn wait_for(&self, stripe: usize) {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        loop {
            let mut released = pin!(self.released.notified());
            // Registered before trying: a release after the try wakes it.
            released.as_mut().enable();
            if self.try_take(stripe) {
                return;
            }
            released.await;
        }
    }
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        for &s in &self.stripes {
            self.locks.held[s].store(false, Ordering::SeqCst);
        }
        // Pairs with the count a waiter makes before it tries: either it
        // finds the stripe free, or this sees it waiting.
        if !self.stripes.is_empty() && self.locks.waiting.load(Ordering::SeqCst) > 0 {
            self.locks.released.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap()
    }

    #[test]
    fn a_held_stripe_keeps_other_writers_out_until_let_go() {
        runtime().block_on(async {
            let locks = Arc::new(KeyLocks::new(8));
            let first = locks.lock(&[1, 3]).await;
            let waiter = {
                let locks = Arc::clone(&locks);
                tokio::spawn(async move {
                    let _guard = locks.lock(&[3]).await;
                })
            };
            tokio::task::yield_now().await;
            assert!(!waiter.is_finished());
            // Other stripes are free meanwhile.
            drop(locks.lock(&[0, 2, 4]).await);
            drop(first);
            waiter.await.unwrap();
            assert!(locks.held.iter().all(|h| !h.load(Ordering::SeqCst)));
        });
    }

    #[test]
    fn increments_under_the_lock_are_never_lost() {
        runtime().block_on(async {
            let locks = Arc::new(KeyLocks::new(4));
            let counter = Arc::new(AtomicUsize::new(0));
            let tasks: Vec<_> = (0..8)
                .map(|_| {
                    let (locks, counter) = (Arc::clone(&locks), Arc::clone(&counter));
                    tokio::spawn(async move {
                        for _ in 0..500 {
                            let _guard = locks.lock(&[0, 2]).await;
                            // A read-modify-write with a yield in between.
                            let seen = counter.load(Ordering::SeqCst);
                            tokio::task::yield_now().await;
                            counter.store(seen + 1, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            assert_eq!(counter.load(Ordering::SeqCst), 4000);
            assert_eq!(locks.waiting.load(Ordering::SeqCst), 0);
        });
    }

    #[test]
    fn a_writer_dropped_while_waiting_leaves_nothing_held_or_counted() {
        runtime().block_on(async {
            let locks = Arc::new(KeyLocks::new(4));
            let held = locks.lock(&[1]).await;
            let waiter = {
                let locks = Arc::clone(&locks);
                tokio::spawn(async move {
                    let _guard = locks.lock(&[0, 1]).await;
                })
            };
            while locks.waiting.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
            waiter.abort();
            assert!(waiter.await.unwrap_err().is_cancelled());
            assert_eq!(locks.waiting.load(Ordering::SeqCst), 0);
            assert!(
                !locks.held[0].load(Ordering::SeqCst),
                "its first stripe let go"
            );
            drop(held);
            drop(locks.lock(&[0, 1]).await);
        });
    }
}
