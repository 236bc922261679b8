//! LDM workers: one thread each, owning a set of fragments.
//!
//! Everything that changes a fragment reaches its worker as a message on
//! its channel, and only the worker changes it. Reads that take no lock —
//! key reads outside a transaction's prepare or commit, scans, index scans,
//! aggregations — are served beside the worker on the caller's own thread
//! (RonDB's query threads): they share the worker's fragments with it, which
//! it changes only while it holds them alone, and so need no wake-up of the
//! worker's thread and no wait for it to be scheduled.
//! Each worker thread runs a single-threaded async runtime, and other work
//! can be spawned onto it (the Redis front end puts each connection on one):
//! a message sent from the worker's own thread is handled at once, in
//! place, with no thread hop and no wake-up. When the thread has nothing
//! left to run it syncs the redo log for its tasks that wait for it
//! (`RedoLog::adopt_thread`).
//! A worker keeps its fragments in numbered slots; the table handle records
//! each fragment's worker and slot, so an operation finds its fragment by
//! index, and a slot reused after a drop is told apart by the table id.
//! Operations travel in batches — one message carries many operations and
//! comes back with their results — so the cost of a wake-up is shared.
//!
//! A batch runs as a [`Job`]: on its own (each operation applied and visible
//! at once), or as a transaction's part on this worker, prepared (rows locked,
//! changes applied, the old versions kept) and then committed or aborted by
//! the transaction coordinator. A job that meets a row another transaction
//! holds parks until that row is let go, or until the lock-wait timeout.
//!
//! A panic on a worker — a bug, or a failpoint in a test — fails the whole
//! node (`Failure`): the fragment it was changing may be half-changed, so
//! the worker takes no more messages, every caller waiting on it is told
//! the node failed, and the coordinator refuses every request from then on.
//!
//! - `worker`: the thread, its fragments and how it runs jobs.
//! - `waits`: jobs parked on busy rows, and their deadlines.
//! - `workers`: the node's workers together, as the layers above use them.

mod spin;
mod waits;
mod worker;
mod workers;

use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard};
use std::thread;
use std::time::Duration;

use tokio::sync::{Notify, mpsc, oneshot};

pub use self::spin::{DEFAULT_SPIN, MAX_SPIN};
pub(crate) use self::workers::{FragmentImage, Workers};
use crate::log::changes::Buckets;
use crate::log::redo::RedoLog;
use crate::log::{ChangeLog, Mark};
use crate::sql::agg::Groups;
use crate::storage::OpError;
use crate::storage::codec::EncodedRow;
use crate::storage::fixed::RowRef;
use crate::storage::fragment::{Bound, FragmentMemory};
use crate::storage::layout::Layout;
use crate::storage::page::{DataMemory, MemoryAccount};
use crate::types::TableId;
pub(crate) use crate::types::{AUTOCOMMIT, TxnId};

/// Why a node serves no more: one of its LDM workers panicked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the data node has failed and serves no more requests until it restarts: {0}")]
pub struct NodeFailed(pub Arc<str>);

/// Whether the node has failed; set once, by the first worker that panics
/// (or the first caller that finds a worker gone), and never cleared.
#[derive(Debug, Clone, Default)]
pub(crate) struct Failure(Arc<OnceLock<NodeFailed>>);

impl Failure {
    /// Why the node failed, if it has: one atomic load.
    #[inline]
    pub(crate) fn get(&self) -> Option<&NodeFailed> {
        self.0.get()
    }

    /// Fails the node, unless it already has: why it failed.
    pub(crate) fn fail(&self, why: impl FnOnce() -> String) -> NodeFailed {
        self.0.get_or_init(|| NodeFailed(why().into())).clone()
    }
}

/// A range of a batch's byte buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: u32,
    pub(crate) len: u32,
}

impl Span {
    pub(crate) fn of<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.start as usize..][..self.len as usize]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Read,
    /// A read that locks the row as a write does until its transaction
    /// ends (`SELECT … FOR UPDATE`); a row another transaction holds waits.
    Lock,
    Insert,
    Update,
    Write,
    /// A write that first reads the row it replaces, in one lookup's time.
    Replace,
    Delete,
    /// A row changed by its batch's [`RowProgram`] from what it holds, in
    /// one lookup; the operation's `image` is the program's argument.
    Interpret,
}

/// An update a worker works out from the row it changes — RonDB's
/// interpreted update. The row is read, changed and written in the one
/// lookup that finds it, so a read-modify-write costs one trip to the
/// worker and no other writer of the row comes between its read and its
/// write. The change is logged and replicated as the row it leaves, like
/// any write; the program runs only on the worker that has the row.
pub(crate) trait RowProgram: Send + Sync + std::fmt::Debug {
    /// Runs on the row the operation's key has (`found`: its image, fixed
    /// part then var part; `None` if there is none) with the operation's
    /// `arg`. Appends to `out` what the caller is answered, and, to change
    /// the row, the new row as `codec::encode_row` encodes it — every
    /// column of a row that was `None`.
    fn run(
        &self,
        layout: &Layout,
        found: Option<&[u8]>,
        arg: &[u8],
        out: &mut Vec<u8>,
    ) -> Interpreted;
}

/// What a [`RowProgram`] made of a row: its answer and, if it changes the
/// row, the new one, as ranges of the buffer it wrote to.
#[derive(Debug)]
pub(crate) struct Interpreted {
    pub(crate) answer: std::ops::Range<usize>,
    pub(crate) row: Option<EncodedRow>,
}

/// Where a fragment lives: its worker and its slot there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FragmentPlace {
    pub(crate) ldm: u16,
    pub(crate) slot: u32,
}

/// One operation, its key and row image held in its batch's buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    pub(crate) kind: OpKind,
    pub(crate) table: TableId,
    /// The fragment's slot on the worker.
    pub(crate) slot: u32,
    /// The key's index tag (see `batch::index_tag`).
    pub(crate) tag: u32,
    pub(crate) key: Span,
    pub(crate) image: Span,
    pub(crate) presence: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpResult {
    /// A read found the row; its image is this range of `out`.
    Found(Span),
    /// A replacing write updated the row whose old image is this range of
    /// `out` (one that found no row answers `Inserted`).
    Replaced(Span),
    Absent,
    Inserted,
    Updated,
    Deleted,
    /// A program's answer (`OpKind::Interpret`), this range of `out`.
    Answered(Span),
    Failed(OpError),
}

/// Operations for one worker and, once it has run them, their results.
#[derive(Debug, Default)]
pub(crate) struct OpBatch {
    pub(crate) ops: Vec<Op>,
    pub(crate) data: Vec<u8>,
    pub(crate) results: Vec<OpResult>,
    pub(crate) out: Vec<u8>,
    /// Changes to log: a prepared transaction's part, for the coordinator
    /// to log.
    pub(crate) redo: Vec<u8>,
    /// Where what this worker logged for the batch ends: the batch is
    /// durable and replicated once the log and the backups are that far.
    pub(crate) mark: Mark,
    /// Changes a primary sent: logged here, never sent on.
    pub(crate) from_primary: bool,
    /// The log failed while this batch's changes were logged.
    pub(crate) durability_failed: bool,
    /// What the batch's `Interpret` operations run.
    pub(crate) program: Option<Arc<dyn RowProgram>>,
    /// Where a program writes its answer and row.
    pub(crate) scratch: Vec<u8>,
}

impl OpBatch {
    /// The bytes its buffers hold, used or not.
    pub(crate) fn capacity_bytes(&self) -> usize {
        use std::mem::size_of;
        self.ops.capacity() * size_of::<Op>()
            + self.results.capacity() * size_of::<OpResult>()
            + self.data.capacity()
            + self.out.capacity()
            + self.redo.capacity()
            + self.scratch.capacity()
    }

    /// Ready to be run (anew): nothing of a run's results left.
    pub(crate) fn clear_results(&mut self) {
        self.results.clear();
        self.out.clear();
        self.redo.clear();
        self.mark = Mark::default();
        self.durability_failed = false;
    }

    /// As new, its buffers kept.
    pub(crate) fn clear(&mut self) {
        // Named field by field, so that a field added is cleared too.
        let OpBatch {
            ops,
            data,
            results,
            out,
            redo,
            mark,
            from_primary,
            durability_failed,
            program,
            scratch,
        } = self;
        ops.clear();
        data.clear();
        results.clear();
        out.clear();
        redo.clear();
        *mark = Default::default();
        *from_primary = false;
        *durability_failed = false;
        *program = None;
        scratch.clear();
    }
}

/// One step of a scan of one fragment.
#[derive(Debug, Default)]
pub(crate) struct ScanChunk {
    pub(crate) rows: Vec<(u32, u32)>,
    pub(crate) out: Vec<u8>,
    /// Where the next step starts; `None` when the fragment is done.
    pub(crate) next: Option<RowRef>,
}

/// Where a step of an aggregation reads its rows.
#[derive(Debug, Clone)]
pub(crate) enum Walk {
    /// The fragment's rows from this position on, in no order.
    Rows(RowRef),
    /// The rows of an ordered index from a bound (the start if `None`) up
    /// to another (the end if `None`), in index order.
    Index {
        index: Arc<str>,
        from: Option<Bound>,
        to: Option<Arc<Bound>>,
    },
}

/// One step of an aggregation over one fragment: its partial groups, the
/// rows (or index entries) it examined, and where the next step starts
/// (`None`: the fragment is done).
#[derive(Debug)]
pub(crate) struct AggStep {
    pub(crate) groups: Groups,
    pub(crate) examined: usize,
    pub(crate) next: Option<Walk>,
}

/// One step of a walk over a fragment's rows: what it found and where the
/// next starts (`None`: done), or `None` if the fragment is gone.
pub(crate) type Walked<T> = Option<(T, Option<RowRef>)>;

/// Some buckets of a fragment's rows: those `buckets` numbers, in order.
#[derive(Debug)]
pub(crate) struct Only {
    pub(crate) buckets: Buckets,
    pub(crate) numbers: Vec<u32>,
}

impl Only {
    /// Whether the row with `key` is in one of them.
    pub(crate) fn has(&self, key: &[u8]) -> bool {
        (self.buckets.of(key)).is_some_and(|b| self.numbers.binary_search(&b).is_ok())
    }
}

/// One step of copying a fragment to a node catching up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CopyStep {
    pub(crate) rows: usize,
    pub(crate) bytes: usize,
    pub(crate) next: Option<RowRef>,
}

/// One fragment's memory, as reported for ndbinfo.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FragmentReport {
    pub(crate) table: TableId,
    pub(crate) fragment: u16,
    pub(crate) memory: FragmentMemory,
}

/// How a job's operations take effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Each operation on its own: applied and visible at once; a failure is
    /// that operation's result.
    Autocommit,
    /// The transaction's operations on this worker: prepared and held until
    /// `Msg::Commit` or `Msg::Abort`; the first failure undoes them all.
    Prepare,
    /// A transaction that touches only this worker: prepared and, if every
    /// operation succeeds, committed at once.
    PrepareAndCommit,
    /// A statement of a transaction that stays open (a SQL session's): its
    /// operations prepared and held like `Prepare`'s, its changes not yet
    /// asked for — the transaction's last job here, `Prepare` or
    /// `PrepareAndCommit` (with no operations, at COMMIT), gives them all.
    Hold,
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobOutcome {
    /// Run (autocommit), or prepared and committed.
    Done,
    /// Prepared: its rows are held until commit or abort.
    Prepared,
    /// Operation `op` failed; nothing of the job's transaction is held here.
    Failed { op: usize, error: OpError },
}

/// A batch on its way through a worker.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) txn: TxnId,
    pub(crate) mode: Mode,
    pub(crate) batch: OpBatch,
    /// The next operation to run: where a parked job goes on.
    pub(crate) next: usize,
    pub(crate) reply: oneshot::Sender<(OpBatch, JobOutcome)>,
}

enum Msg {
    Run(Job),
    /// A redo log is attached: the worker's thread syncs it for the tasks
    /// there that wait for it.
    AdoptLog {
        done: oneshot::Sender<()>,
    },
    Commit {
        txn: TxnId,
        done: oneshot::Sender<()>,
    },
    Abort {
        txn: TxnId,
        done: oneshot::Sender<()>,
    },
    /// Creates a fragment charged to `account` and answers its slot.
    CreateFragment {
        table: TableId,
        fragment: u16,
        layout: Arc<Layout>,
        account: Arc<MemoryAccount>,
        done: oneshot::Sender<u32>,
    },
    DropFragment {
        table: TableId,
        slot: u32,
        done: oneshot::Sender<()>,
    },
    /// Gives a fragment `layout`, which has one more ordered index, empty
    /// until `BuildIndex` fills it.
    AddIndex {
        table: TableId,
        slot: u32,
        layout: Arc<Layout>,
        done: oneshot::Sender<()>,
    },
    /// Puts the next `rows` rows of a fragment into ordered index `index`:
    /// whether it is built; `None` if the fragment is gone.
    BuildIndex {
        table: TableId,
        slot: u32,
        index: Arc<str>,
        rows: usize,
        reply: oneshot::Sender<Option<Result<bool, OpError>>>,
    },
    /// Gives a fragment `layout`, which is its own without ordered index
    /// `index`, and gives that index's pages back.
    DropIndex {
        table: TableId,
        slot: u32,
        index: Arc<str>,
        layout: Arc<Layout>,
        done: oneshot::Sender<()>,
    },
    /// Sends rows of a fragment from position `from` to node `to`, catching
    /// up: each as a put in the replication stream, appended here, so that
    /// it falls in order with the fragment's commits. Answers how many rows
    /// and bytes went, and where to go on (`None`: done), or `None` if the
    /// fragment is gone or `to` is no longer in the stream.
    Copy {
        table: TableId,
        slot: u32,
        from: RowRef,
        to: u32,
        /// Only the rows in these buckets, if given.
        only: Option<Arc<Only>>,
        reply: oneshot::Sender<Option<CopyStep>>,
    },
    /// Adds to `sums` each row's digest from position `from` on, in its
    /// bucket of `buckets` (rows in none are passed over). Answers the sums
    /// and where to go on, or `None` if the fragment is gone.
    Digest {
        table: TableId,
        slot: u32,
        from: RowRef,
        buckets: Buckets,
        sums: Vec<u64>,
        reply: oneshot::Sender<Walked<Vec<u64>>>,
    },
    /// The keys of the rows from position `from` on that are in `only`,
    /// and where to go on; `None` if the fragment is gone.
    Keys {
        table: TableId,
        slot: u32,
        from: RowRef,
        only: Arc<Only>,
        reply: oneshot::Sender<Walked<Vec<Vec<u8>>>>,
    },
    /// A read of the worker's fragments that takes no lock and changes
    /// nothing (a scan's step, an index's, an aggregation's), where it
    /// could not be served beside the worker (`Ldm::read`).
    Read(Box<dyn FnOnce(&worker::Worker) + Send>),
    /// Answers an image of a fragment and where in the redo log replay must
    /// start to bring it up to date: once no transaction holds rows on this
    /// worker (new transactions wait meanwhile). `None` if it is gone.
    Image {
        table: TableId,
        slot: u32,
        reply: oneshot::Sender<Option<(Vec<u8>, u64)>>,
    },
    /// Replaces a fragment with the one in an image.
    Restore {
        table: TableId,
        slot: u32,
        image: Vec<u8>,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// How many transactions hold rows here and how many jobs are parked.
    #[cfg(test)]
    Inspect {
        reply: oneshot::Sender<(usize, usize)>,
    },
    /// Reports every fragment's memory; with `audit`, recounts it from the
    /// pages first and panics on a mismatch (tests only).
    Memory {
        audit: bool,
        reply: oneshot::Sender<Vec<FragmentReport>>,
    },
}

/// The handle to one worker thread. Dropping it stops the thread once the
/// messages already sent are done.
#[derive(Debug)]
pub(crate) struct Ldm {
    /// Tells workers apart across engines in one process.
    id: u64,
    sender: Option<mpsc::UnboundedSender<Msg>>,
    /// The worker thread's runtime: tasks spawned here run beside the
    /// worker, and reach it without a thread hop.
    runtime: tokio::runtime::Handle,
    /// The worker itself, for reads served beside it on other threads
    /// (`shared`).
    worker: Arc<RwLock<worker::Worker>>,
    thread: Option<thread::JoinHandle<()>>,
}

static NEXT_LDM_ID: AtomicU64 = AtomicU64::new(1);

/// The worker a worker thread runs: its id, the worker, and how to tell
/// its message loop that a job's deadline may have changed.
#[derive(Clone)]
struct Local {
    id: u64,
    worker: Arc<RwLock<worker::Worker>>,
    changed: Rc<Notify>,
    failure: Failure,
    spin: Rc<spin::Spin>,
}

thread_local! {
    /// The worker this thread runs, if it is a worker thread.
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

impl Ldm {
    /// Starts worker `number`; a job waits at most `lock_wait` for a row
    /// another transaction holds, and the thread spins for `spin` after
    /// work that comes close together (`spin`).
    ///
    /// The thread runs a single-threaded async runtime: one task takes the
    /// worker's messages, and other tasks may be spawned beside it
    /// (`spawn`) — a connection served there hands its operations on this
    /// worker's fragments straight to the worker, in the same thread.
    pub(crate) fn start(
        number: usize,
        pool: Arc<DataMemory>,
        log: Arc<ChangeLog>,
        lock_wait: Duration,
        spin: Duration,
        failure: Failure,
    ) -> std::io::Result<Ldm> {
        let id = NEXT_LDM_ID.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = mpsc::unbounded_channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            // The worker syncs the redo log for its waiting tasks when it
            // has nothing else to do (`RedoLog::adopt_thread`).
            .on_thread_park(RedoLog::before_park)
            .build()?;
        let handle = runtime.handle().clone();
        let worker = Arc::new(RwLock::new(worker::Worker::new(pool, log, lock_wait)));
        let beside = Arc::clone(&worker);
        let thread = thread::Builder::new()
            .name(format!("ldm-{number}"))
            .stack_size(crate::types::THREAD_STACK)
            .spawn(move || {
                let local = Local {
                    id,
                    worker,
                    changed: Rc::new(Notify::new()),
                    failure,
                    spin: Rc::new(spin::Spin::new(spin)),
                };
                LOCAL.with(|l| *l.borrow_mut() = Some(local.clone()));
                let spin = Rc::clone(&local.spin);
                runtime.block_on(async move {
                    tokio::select! {
                        () = serve(local, receiver) => {}
                        () = spin.run() => {}
                    }
                });
                // Tasks still here end now, while they can still reach the
                // worker (a transaction dropped midway sends its aborts).
                drop(runtime);
                LOCAL.with(|local| local.borrow_mut().take());
            })?;
        Ok(Ldm {
            id,
            sender: Some(sender),
            runtime: handle,
            worker: beside,
            thread: Some(thread),
        })
    }

    /// Sends a message; the worker lives as long as this handle, so it is
    /// always there to receive it. On the worker's own thread the message
    /// is handled at once.
    fn send(&self, msg: Msg) {
        let local = LOCAL.with(|local| local.borrow().clone().filter(|l| l.id == self.id));
        match local {
            Some(local) => {
                local.step(Some(msg));
                // A job may have parked with a new deadline: let the
                // message loop look again.
                local.changed.notify_one();
            }
            // A worker thread that is gone drops the message, and with it
            // the reply its sender waits for.
            None => {
                if let Some(sender) = &self.sender {
                    let _ = sender.send(msg);
                }
            }
        }
    }

    /// The worker, shared, for a read on the calling thread beside it —
    /// RonDB's query threads: a read that takes no lock and changes nothing
    /// need not wait for the worker's thread to be woken and scheduled, nor
    /// wake the caller's again when it is done. It shares the worker's
    /// fragments with it for as long as it holds them (the worker changes
    /// them only while it holds them alone), and sees what a message sent
    /// now would: every change the worker has made, a row another
    /// transaction holds as committed. On the worker's own thread too: a
    /// connection served there reads shared, as one on another thread
    /// does, rather than holding the worker alone while it reads (which
    /// would keep the other thread's readers waiting on the lock) — the
    /// thread holds the worker alone only inside `Local::step`, which never
    /// reads through here. `None` once the worker has panicked.
    fn shared(&self) -> Option<RwLockReadGuard<'_, worker::Worker>> {
        self.worker.read().ok()
    }

    /// Runs a job beside the worker (`shared`) if it holds nothing but
    /// reads and neither prepares nor commits a transaction: how it ended.
    /// `None` if it must be sent (what it holds is then to be run anew).
    fn read_beside(&self, txn: TxnId, mode: Mode, batch: &mut OpBatch) -> Option<JobOutcome> {
        let outcome = match mode {
            Mode::Autocommit => JobOutcome::Done,
            // A statement's reads in a transaction that stays open: they
            // hold nothing, so there is nothing to prepare.
            Mode::Hold => JobOutcome::Prepared,
            Mode::Prepare | Mode::PrepareAndCommit => return None,
        };
        if batch.ops.iter().any(|op| op.kind != OpKind::Read) {
            return None;
        }
        let autocommit = mode == Mode::Autocommit;
        (self.shared()?.read_only(txn, autocommit, batch)).then_some(outcome)
    }

    /// Runs `read` beside the worker if `beside` may (`shared`), or else
    /// sends it to the worker's message loop: the answer, or where it will
    /// come.
    fn read<T: Send + 'static>(
        &self,
        beside: bool,
        read: impl FnOnce(&worker::Worker) -> T + Send + 'static,
    ) -> Result<T, oneshot::Receiver<T>> {
        if beside && let Some(worker) = self.shared() {
            return Ok(read(&worker));
        }
        let (reply, wait) = oneshot::channel();
        self.send(Msg::Read(Box::new(move |worker: &worker::Worker| {
            let _ = reply.send(read(worker));
        })));
        Err(wait)
    }

    /// Runs `task` on the worker's thread.
    pub(crate) fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime.spawn(task)
    }
}

/// The worker's message loop: each message as it comes, and parked jobs
/// timed out when their lock wait runs out. Ends when every sender is gone.
async fn serve(local: Local, mut receiver: mpsc::UnboundedReceiver<Msg>) {
    loop {
        let deadline = local.deadline();
        let timeout = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
                None => std::future::pending().await,
            }
        };
        let msg = tokio::select! {
            msg = receiver.recv() => match msg {
                Some(msg) => Some(msg),
                None => break,
            },
            () = local.changed.notified() => None,
            () = timeout => None,
        };
        local.step(msg);
        // Whatever else has arrived, before giving the thread back.
        while let Ok(msg) = receiver.try_recv() {
            local.step(Some(msg));
        }
    }
}

impl Local {
    /// Runs one step of the worker — unless the node has failed, when the
    /// message is dropped and its sender hears that the worker is gone. A
    /// panic fails the node: the worker may have left a fragment
    /// half-changed, and nothing may read or change it again.
    fn step(&self, msg: Option<Msg>) {
        if self.failure.get().is_some() {
            return;
        }
        if msg.is_some() {
            self.spin.worked();
        }
        // A panic poisons the lock: reads beside the worker stop with it.
        let stepped = std::panic::catch_unwind(AssertUnwindSafe(|| {
            self.worker
                .write()
                .expect("a worker that panicked has failed the node")
                .step(msg)
        }));
        if let Err(panic) = stepped {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            let failed = self
                .failure
                .fail(|| format!("an LDM worker panicked: {what}"));
            tracing::error!(error = %failed, "data node failed: no more requests are served");
        }
    }

    /// When the next parked job's lock wait runs out (none once failed).
    fn deadline(&self) -> Option<std::time::Instant> {
        if self.failure.get().is_some() {
            return None;
        }
        self.worker.write().ok()?.next_deadline()
    }
}

impl Drop for Ldm {
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            // The last handle may go on the worker's own thread (a task
            // there held it): that thread ends by itself.
            if thread.thread().id() != thread::current().id() {
                // A worker that panicked has already printed why.
                let _ = thread.join();
            }
        }
    }
}
