//! Waiting for the log on a thread that wakes its own tasks.
//!
//! A task woken from another thread costs a system call: the waking thread
//! queues it on the task's runtime and writes to that runtime's eventfd. A
//! sync that makes ten commits durable would wake ten tasks that way, each
//! racing the worker thread back into `epoll_wait`. A thread that adopts
//! the log instead keeps its own list of waiting tasks and the lowest LSN
//! any of them waits for; after a sync the writer wakes only the threads
//! whose lowest LSN it reached — one wake-up per thread — and each thread
//! wakes its ready tasks itself, which costs no system call.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::task::Waker;

use tokio::sync::Notify;

use super::{Lsn, RedoLog};

/// What the writer sees of a thread that wakes its own waiters.
#[derive(Debug)]
pub(super) struct ThreadWake {
    /// The lowest LSN a task on the thread waits for (`Lsn::MAX`: none).
    /// Written only by the thread itself.
    lowest: AtomicU64,
    /// Wakes the thread's waker task.
    notify: Notify,
}

impl ThreadWake {
    /// Wakes the thread if the log is durable as far as one of its tasks
    /// waits for — or, when the log has failed, in any case. The caller has
    /// stored the durable LSN (or the failure) before looking.
    pub(super) fn wake_if_due(&self, durable: Lsn, failed: bool) {
        if failed || self.lowest.load(Ordering::SeqCst) <= durable {
            self.notify.notify_one();
        }
    }
}

struct Local {
    log: Weak<RedoLog>,
    wake: Arc<ThreadWake>,
    waiting: RefCell<Vec<(Lsn, Waker)>>,
}

thread_local! {
    static LOCAL: RefCell<Option<Rc<Local>>> = const { RefCell::new(None) };
}

/// Makes the calling thread, which runs a tokio runtime, wake its own
/// tasks that wait for `log`: answers what the writer is to wake.
pub(super) fn adopt(log: &Arc<RedoLog>) -> Arc<ThreadWake> {
    let wake = Arc::new(ThreadWake {
        lowest: AtomicU64::new(Lsn::MAX),
        notify: Notify::new(),
    });
    LOCAL.with(|local| {
        *local.borrow_mut() = Some(Rc::new(Local {
            log: Arc::downgrade(log),
            wake: Arc::clone(&wake),
            waiting: RefCell::new(Vec::new()),
        }))
    });
    let woken = Arc::clone(&wake);
    // A task of this thread's runtime, so it runs on this thread.
    drop(tokio::spawn(async move {
        loop {
            woken.notify.notified().await;
            if !wake_ready() {
                break;
            }
        }
    }));
    wake
}

/// Whether this thread wakes its own waiters for `log`.
pub(super) fn adopted(log: &RedoLog) -> bool {
    LOCAL.with(|local| matches!(&*local.borrow(), Some(l) if std::ptr::eq(l.log.as_ptr(), log)))
}

/// Registers the running task, on an adopting thread, to be woken once the
/// log is durable to `lsn` or has failed. The caller looks again after
/// this: what the writer did meanwhile may have been missed.
pub(super) fn wait(lsn: Lsn, waker: &Waker) {
    LOCAL.with(|local| {
        let local = local.borrow();
        let local = local.as_ref().expect("an adopting thread");
        local.waiting.borrow_mut().push((lsn, waker.clone()));
        if lsn < local.wake.lowest.load(Ordering::Relaxed) {
            local.wake.lowest.store(lsn, Ordering::SeqCst);
        }
    });
}

/// Wakes this thread's tasks whose wait is over; false once the log is
/// gone (every task woken).
fn wake_ready() -> bool {
    let Some(local) = LOCAL.with(|local| local.borrow().clone()) else {
        return false;
    };
    let log = local.log.upgrade();
    let (durable, failed) = match &log {
        Some(log) => (log.durable_lsn(), log.has_failed()),
        None => (Lsn::MAX, true),
    };
    let ready: Vec<Waker> = {
        let mut waiting = local.waiting.borrow_mut();
        let ready = waiting
            .extract_if(.., |(lsn, _)| failed || *lsn <= durable)
            .map(|(_, waker)| waker)
            .collect();
        let lowest = waiting.iter().map(|(lsn, _)| *lsn).min();
        local
            .wake
            .lowest
            .store(lowest.unwrap_or(Lsn::MAX), Ordering::SeqCst);
        ready
    };
    for waker in ready {
        waker.wake();
    }
    log.is_some()
}
