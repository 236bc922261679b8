//! Waiting for the log on a thread that syncs for its own tasks.
//!
//! A commit that waits for a sync on another thread pays for two hand-offs:
//! waking that thread, and being woken by it — each a system call and a
//! switch of threads, which on a small machine cost more than the commit
//! itself. A thread that adopts the log (an LDM worker thread) keeps its
//! own list of waiting tasks and the lowest LSN any of them waits for, and
//! when it has nothing else to run — just before its runtime would park —
//! it writes out and syncs what is buffered itself, then wakes its tasks
//! itself, which costs no system call. The commits of every thread
//! buffered by then share that sync.
//!
//! Only one thread syncs at a time. One that finds another at it parks;
//! the other, when done, wakes every thread with waiting tasks once — to go
//! on, or to sync for what it appended since. A thread too busy ever to go
//! idle is covered by the writer thread, which syncs when a whole
//! `BACKSTOP` passes with tasks waiting and no sync.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Arc, Weak};
use std::task::Waker;
use std::thread::{self, ThreadId};

use tokio::sync::Notify;

use super::{Lsn, RedoLog};

/// What other threads see of a thread that syncs for its own waiters.
#[derive(Debug)]
pub(super) struct ThreadWake {
    thread: ThreadId,
    /// The lowest LSN a task on the thread waits for (`Lsn::MAX`: none).
    /// Written only by the thread itself.
    lowest: AtomicU64,
    /// Wakes the thread's waker task.
    notify: Notify,
}

impl ThreadWake {
    /// After a sync, or when the log has failed: wakes the thread if one of
    /// its tasks waits (in any case if the log failed), unless it is the
    /// calling thread, which looks for itself. The caller has stored the
    /// durable LSN (or the failure) before looking.
    pub(super) fn wake_if_waiting(&self, failed: bool) {
        if self.thread != thread::current().id() && (failed || self.waiting()) {
            self.notify.notify_one();
        }
    }

    /// Whether a task on the thread waits for the log.
    pub(super) fn waiting(&self) -> bool {
        self.lowest.load(Ordering::SeqCst) != Lsn::MAX
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
        thread: thread::current().id(),
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
/// log is durable to `lsn` or has failed: true if no other task of the
/// thread waited. The caller looks again after this: a sync that ended
/// meanwhile may have missed it.
pub(super) fn wait(lsn: Lsn, waker: &Waker) -> bool {
    LOCAL.with(|local| {
        let local = local.borrow();
        let local = local.as_ref().expect("an adopting thread");
        local.waiting.borrow_mut().push((lsn, waker.clone()));
        let lowest = local.wake.lowest.load(Ordering::Relaxed);
        if lsn < lowest {
            local.wake.lowest.store(lsn, Ordering::SeqCst);
        }
        lowest == Lsn::MAX
    })
}

/// Just before the thread parks, with nothing else to run: if its tasks
/// wait for the log, syncs it for them — unless another thread is at it,
/// which wakes this one when done — and wakes those whose wait is over.
/// Tasks woken here run before the thread parks.
pub(super) fn before_park() {
    let Some(local) = LOCAL.with(|local| local.borrow().clone()) else {
        return;
    };
    let Some(log) = local.log.upgrade() else {
        return;
    };
    // A sync covers every waiter registered before it: the second round
    // only wakes them.
    for _ in 0..2 {
        let lowest = local.wake.lowest.load(Ordering::SeqCst);
        if lowest == Lsn::MAX {
            return;
        }
        if log.durable_lsn() >= lowest || log.has_failed() {
            wake_ready();
            return;
        }
        // Pairs with the fence after a sync: either this finds the sink
        // free, or the thread that holds it sees this thread's waiters.
        fence(Ordering::SeqCst);
        if !log.try_sync() {
            return;
        }
    }
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
