//! The redo log: every committed change, in commit order, in checksummed
//! records; many commits share one sync (group commit).
//!
//! The log is one stream of bytes cut into segment files named by the offset
//! they start at (`redo/00000000000000000000.redo`, …). An LSN is an offset in
//! that stream. Each segment is written whole with zeros before it is used
//! (the writer thread prepares the next one as a spare), so a sync writes
//! records over bytes the file already has — no change of its size or
//! extent map to commit — and the space after the last record reads as
//! zeros. A record is
//! ```text
//! [payload length u32][crc32c u32 of the next 8 + length bytes][lsn u64: its own offset][payload]
//! ```
//! little-endian. Appending takes a short lock to give the record its place
//! in a shared buffer; whoever syncs writes out whatever has gathered, syncs
//! once, and announces how far the log is durable — in `sync` mode an LDM
//! worker thread for its own waiting commits before it goes idle (`local`),
//! or the writer thread for commits waiting elsewhere. In `sync` mode a
//! commit is acknowledged only then; in `interval` mode the writer syncs every
//! interval and commits are acknowledged at once — the last interval can be
//! lost in a crash. A failed write or sync fails the log for good: what
//! waited is told so, nothing more is accepted, and the node must restart to
//! recover from what is on disk.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex};
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::io::{AppendFile, Storage};

/// An offset in the log stream.
pub(crate) type Lsn = u64;

/// Bytes of a record's header.
pub(crate) const HEADER: usize = 16;
/// A new segment is started once the current one has this many bytes.
pub(crate) const SEGMENT_BYTES: u64 = 64 << 20;
/// In interval mode the writer is woken early once this much is buffered;
/// otherwise it writes once an interval, so a commit costs no wake-up.
const INTERVAL_WAKE_BYTES: usize = 1 << 20;
/// Under load the log is synced at most this often: the commits that come
/// meanwhile share the next sync, whose cost (two device requests and some
/// 30 µs of the kernel's time here) is then spread over three times as many.
const SYNC_GAP: Duration = Duration::from_micros(100);
/// A sync that carried this many commits says more are coming: only then
/// does the next one keep `SYNC_GAP` from it. A lone writer is never held.
const UNDER_LOAD: usize = 4;
/// While tasks on adopting threads wait for the log, the writer looks this
/// often whether the log was synced since its last look, and syncs if not:
/// their thread may be too busy ever to go idle, and so to sync for them.
const BACKSTOP: Duration = Duration::from_millis(2);
/// The file the writer prepares the next segment in, written whole with
/// zeros and synced ahead of need: not a segment (`segment_start` ignores
/// it) until renamed to one.
const SPARE: &str = "next.spare";
/// The largest payload a record may carry.
pub(crate) const MAX_PAYLOAD: usize = 1 << 30;

/// When a commit is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// After its redo is synced to disk.
    Sync,
    /// At once; the log is synced every this often.
    Interval(Duration),
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("'{s}' is not a durability: use 'sync' or 'interval:<ms>' (1 to 60000)");
        match s {
            "sync" => Ok(Durability::Sync),
            _ => {
                let ms: u64 = s
                    .strip_prefix("interval:")
                    .ok_or_else(bad)?
                    .parse()
                    .map_err(|_| bad())?;
                if !(1..=60_000).contains(&ms) {
                    return Err(bad());
                }
                Ok(Durability::Interval(Duration::from_millis(ms)))
            }
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Durability::Sync => f.write_str("sync"),
            Durability::Interval(every) => write!(f, "interval:{}", every.as_millis()),
        }
    }
}

/// The log has failed: nothing more can be made durable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the redo log failed, so writes cannot be made durable until the data node restarts: {0}")]
pub struct LogFailed(pub Arc<str>);

/// How far the log is durable, or why it never will be again, and who
/// waits for it to be durable further.
#[derive(Debug)]
struct Durable {
    failed: Option<Arc<str>>,
    /// Each waiter's LSN: told (only) once the log is durable that far, or
    /// dropped when it fails.
    waiters: Vec<(Lsn, oneshot::Sender<()>)>,
}

struct Shared {
    /// The end of everything appended.
    next: Lsn,
    /// Appended records not yet written out, from `buffered_from`.
    buffer: Vec<u8>,
    /// How many records `buffer` holds.
    buffered: usize,
    buffered_from: Lsn,
    failed: Option<Arc<str>>,
    stopping: bool,
    /// A task on a thread that does not sync for itself waits for the
    /// log: the writer is to sync.
    kicked: bool,
    /// The writer waits on `work` for something to do: only then is
    /// waking it worth a system call.
    writer_idle: bool,
    /// When the log was last synced, and how many records that sync wrote.
    synced_at: Instant,
    last_batch: usize,
    /// The writer is to prepare a spare segment.
    spare_wanted: bool,
}

/// The redo log of a data node.
pub struct RedoLog {
    shared: Mutex<Shared>,
    work: Condvar,
    /// The segment files. Whoever holds this writes out what is buffered
    /// and syncs it: the writer thread, or a thread that syncs for its own
    /// waiting tasks before it would go idle (`local`).
    sink: Mutex<Sink>,
    durable: Mutex<Durable>,
    /// How far the log is durable; stored before the waiters are told.
    durable_lsn: AtomicU64,
    /// Whether the log has failed; set before the waiters are told.
    failed: AtomicBool,
    /// Threads that sync for and wake their own waiting tasks (`local`).
    threads: Mutex<Vec<Arc<local::ThreadWake>>>,
    mode: Durability,
    writer: Mutex<Option<thread::JoinHandle<()>>>,
    /// Syncs of the log so far: with group commit, far fewer than commits.
    syncs: AtomicU64,
    /// A spare segment is ready (`SPARE`): the next segment is made by
    /// renaming it, at no cost to the commits waiting meanwhile.
    spare_ready: AtomicBool,
    /// The writer sleeps with no backstop tick: no task on an adopting
    /// thread waited when it last looked.
    writer_asleep: AtomicBool,
}

impl std::fmt::Debug for RedoLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedoLog")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

pub(crate) fn segment_name(start: Lsn) -> String {
    format!("{start:020}.redo")
}

fn segment_start(path: &Path) -> Option<Lsn> {
    path.file_name()?
        .to_str()?
        .strip_suffix(".redo")?
        .parse()
        .ok()
}

/// Encodes one record for the payload at `lsn` into `out`.
fn encode(lsn: Lsn, payload: &[u8], out: &mut Vec<u8>) {
    let lsn_bytes = lsn.to_le_bytes();
    let crc = crc32c::crc32c_append(crc32c::crc32c(&lsn_bytes), payload);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&lsn_bytes);
    out.extend_from_slice(payload);
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl RedoLog {
    /// Opens the log for appending at `end` (where recovery found it ends)
    /// and starts its writer thread.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: PathBuf,
        end: Lsn,
        mode: Durability,
    ) -> std::io::Result<Arc<RedoLog>> {
        RedoLog::open_with(storage, dir, end, mode, SEGMENT_BYTES)
    }

    /// `open`, starting a new segment every `segment_bytes`.
    pub(crate) fn open_with(
        storage: Arc<dyn Storage>,
        dir: PathBuf,
        end: Lsn,
        mode: Durability,
        segment_bytes: u64,
    ) -> std::io::Result<Arc<RedoLog>> {
        storage.create_dir_all(&dir)?;
        // One a crash cut short would be no segment of zeros.
        let spare = dir.join(SPARE);
        if storage.exists(&spare) {
            storage.remove(&spare)?;
        }
        let segments = storage.list(&dir)?;
        let (segment_start, file) = match segments
            .iter()
            .filter_map(|p| segment_start(p).map(|s| (s, p)))
            .next_back()
        {
            Some((start, path)) if start <= end => (
                start,
                storage.open_append(path, end - start, segment_bytes)?,
            ),
            _ => (
                end,
                storage.open_append(&dir.join(segment_name(end)), 0, segment_bytes)?,
            ),
        };
        let log = Arc::new(RedoLog {
            shared: Mutex::new(Shared {
                next: end,
                buffer: Vec::new(),
                buffered: 0,
                buffered_from: end,
                failed: None,
                stopping: false,
                kicked: false,
                writer_idle: false,
                synced_at: Instant::now(),
                last_batch: 0,
                spare_wanted: true,
            }),
            work: Condvar::new(),
            sink: Mutex::new(Sink {
                storage,
                dir,
                file,
                segment_start,
                written: end,
                segment_bytes,
            }),
            durable: Mutex::new(Durable {
                failed: None,
                waiters: Vec::new(),
            }),
            durable_lsn: AtomicU64::new(end),
            failed: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            mode,
            writer: Mutex::new(None),
            syncs: AtomicU64::new(0),
            spare_ready: AtomicBool::new(false),
            writer_asleep: AtomicBool::new(false),
        });
        let writer = Arc::clone(&log);
        let handle = thread::Builder::new()
            .name("redo-writer".into())
            .spawn(move || writer.run_writer())?;
        *lock(&log.writer) = Some(handle);
        Ok(log)
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        lock(&self.shared)
    }

    pub fn mode(&self) -> Durability {
        self.mode
    }

    /// Appends a record and answers the LSN it ends at: durable once the log
    /// is durable that far. Appending wakes no one: in `sync` mode the log
    /// is synced for whoever waits for it (`wait_durable`).
    pub fn append(&self, payload: &[u8]) -> Result<Lsn, LogFailed> {
        assert!(
            payload.len() <= MAX_PAYLOAD,
            "a redo record of {} bytes",
            payload.len()
        );
        let mut shared = self.shared();
        if let Some(failed) = &shared.failed {
            return Err(LogFailed(Arc::clone(failed)));
        }
        let lsn = shared.next;
        encode(lsn, payload, &mut shared.buffer);
        shared.buffered += 1;
        shared.next = lsn + (HEADER + payload.len()) as u64;
        let end = shared.next;
        let wake = shared.writer_idle
            && matches!(self.mode, Durability::Interval(_))
            && shared.buffer.len() >= INTERVAL_WAKE_BYTES;
        drop(shared);
        if wake {
            self.work.notify_one();
        }
        Ok(end)
    }

    /// Where the next record will start: every record appended so far ends
    /// at or before it.
    pub fn next_lsn(&self) -> Lsn {
        self.shared().next
    }

    /// Waits until the log is durable up to `lsn` — at once in interval mode.
    ///
    /// On a thread that has adopted the log, the thread itself syncs before
    /// it would go idle; on any other, the writer thread is asked to.
    pub async fn wait_durable(&self, lsn: Lsn) -> Result<(), LogFailed> {
        if let Durability::Interval(_) = self.mode {
            return match &self.shared().failed {
                Some(failed) => Err(LogFailed(Arc::clone(failed))),
                None => Ok(()),
            };
        }
        if self.durable_lsn() >= lsn {
            return Ok(());
        }
        if local::adopted(self) {
            return std::future::poll_fn(|cx| {
                if self.durable_lsn() < lsn && !self.has_failed() {
                    // Pairs with the writer's look at the threads before it
                    // sleeps without a backstop: it sees this wait, or this
                    // sees it asleep.
                    if local::wait(lsn, cx.waker()) && self.writer_asleep.load(Ordering::SeqCst) {
                        self.ask_writer(|_| {});
                    }
                    // A sync may have ended before it could see the wait:
                    // look again.
                    if self.durable_lsn() < lsn && !self.has_failed() {
                        return Poll::Pending;
                    }
                }
                Poll::Ready(self.reached(lsn))
            })
            .await;
        }
        let told = {
            let mut durable = self.durable();
            if self.durable_lsn() >= lsn {
                return Ok(());
            }
            if let Some(failed) = &durable.failed {
                return Err(LogFailed(Arc::clone(failed)));
            }
            let (tell, told) = oneshot::channel();
            durable.waiters.push((lsn, tell));
            told
        };
        self.kick();
        match told.await {
            Ok(()) => Ok(()),
            // Dropped: the log failed before it was durable that far.
            Err(_) => Err(LogFailed(
                self.durable()
                    .failed
                    .clone()
                    .unwrap_or_else(|| "the redo log stopped".into()),
            )),
        }
    }

    /// Asks the writer thread to sync.
    fn kick(&self) {
        self.ask_writer(|shared| shared.kicked = true);
    }

    /// Gives the writer thread work (`ask` sets what), waking it if it waits.
    fn ask_writer(&self, ask: impl FnOnce(&mut Shared)) {
        let mut shared = self.shared();
        ask(&mut shared);
        let idle = shared.writer_idle;
        drop(shared);
        if idle {
            self.work.notify_one();
        }
    }

    fn durable(&self) -> std::sync::MutexGuard<'_, Durable> {
        lock(&self.durable)
    }

    /// Whether a waiter for `lsn`, woken, may go on.
    fn reached(&self, lsn: Lsn) -> Result<(), LogFailed> {
        if self.durable_lsn() >= lsn {
            return Ok(());
        }
        let failed = self.durable().failed.clone();
        Err(LogFailed(failed.expect(
            "a waiter goes on before it is durable only when the log failed",
        )))
    }

    /// Makes the calling thread, which runs a tokio runtime, sync the log
    /// for its own waiting tasks when it has nothing else to run, and wake
    /// them itself: the runtime must call [`RedoLog::before_park`] before it
    /// parks. A sync then costs no thread hand-off, and a sync another
    /// thread made wakes this one once, not once per waiting task.
    pub fn adopt_thread(self: &Arc<Self>) {
        let wake = local::adopt(self);
        lock(&self.threads).push(wake);
    }

    /// For a runtime's `on_thread_park`: on a thread that has adopted a log,
    /// syncs it if a task of the thread waits for that, and wakes the tasks
    /// whose wait is over.
    pub fn before_park() {
        local::before_park();
    }

    /// Writes out what is buffered and syncs it, on the calling thread —
    /// unless another thread is at it, which then wakes this one (if it has
    /// adopted the log) when done: false then.
    fn try_sync(&self) -> bool {
        let mut sink = match self.sink.try_lock() {
            Ok(sink) => sink,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        let told = self.write_out(&mut sink, true);
        drop(sink);
        self.announce(told);
        true
    }

    /// Writes out everything buffered and, if `sync`, syncs it and stores
    /// how far the log is durable: answers the waiters that satisfies, to
    /// be told once the sink is let go. A failure fails the log.
    fn write_out(&self, sink: &mut Sink, sync: bool) -> Vec<oneshot::Sender<()>> {
        let batch = {
            let mut shared = self.shared();
            if shared.failed.is_some() {
                return Vec::new();
            }
            debug_assert_eq!(shared.buffered_from, sink.written);
            shared.buffered_from = shared.next;
            shared.last_batch = std::mem::take(&mut shared.buffered);
            std::mem::take(&mut shared.buffer)
        };
        let result = sink.write(&batch, self).and_then(|()| {
            if sync && sink.written > self.durable_lsn() {
                sink.sync().map(|()| true)
            } else {
                Ok(false)
            }
        });
        match result {
            Ok(true) => {
                self.syncs.fetch_add(1, Ordering::Relaxed);
                self.shared().synced_at = Instant::now();
                self.made_durable(sink.written)
            }
            Ok(false) => Vec::new(),
            Err(e) => {
                let failed: Arc<str> = format!("{e}").into();
                tracing::error!(error = %failed, "the redo log failed");
                self.shared().failed = Some(Arc::clone(&failed));
                self.fail(failed);
                Vec::new()
            }
        }
    }

    /// The log is durable up to `lsn`: answers the waiters it satisfies.
    fn made_durable(&self, lsn: Lsn) -> Vec<oneshot::Sender<()>> {
        let mut durable = self.durable();
        if durable.failed.is_some() {
            return Vec::new();
        }
        self.durable_lsn.store(lsn, Ordering::SeqCst);
        durable
            .waiters
            .extract_if(.., |(l, _)| *l <= lsn)
            .map(|(_, tell)| tell)
            .collect()
    }

    /// After a sync, with the sink let go: tells the waiters it satisfied,
    /// wakes every other thread with waiting tasks — to go on, or to sync
    /// for them, which it may have failed to do while this sync ran — and
    /// asks the writer for another sync if tasks elsewhere still wait.
    fn announce(&self, told: Vec<oneshot::Sender<()>>) {
        for tell in told {
            let _ = tell.send(());
        }
        // Pairs with the fence a thread makes between registering a waiting
        // task and trying the sink: either it finds the sink free, or this
        // sees its task.
        fence(Ordering::SeqCst);
        self.wake_threads(false);
        if !self.durable().waiters.is_empty() {
            self.kick();
        }
    }

    /// The log has failed: no waiter will be told it is durable.
    fn fail(&self, failed: Arc<str>) {
        let waiters = {
            let mut durable = self.durable();
            durable.failed = Some(failed);
            self.failed.store(true, Ordering::SeqCst);
            std::mem::take(&mut durable.waiters)
        };
        drop(waiters);
        self.wake_threads(true);
    }

    /// Wakes the adopting threads, other than this one, with waiting tasks
    /// (all of them once the log has failed).
    fn wake_threads(&self, failed: bool) {
        for thread in lock(&self.threads).iter() {
            thread.wake_if_waiting(failed);
        }
    }

    /// Whether the log has failed (`failure` says why).
    fn has_failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// Why the log failed, if it has.
    pub fn failure(&self) -> Option<LogFailed> {
        if !self.has_failed() {
            return None;
        }
        self.shared().failed.clone().map(LogFailed)
    }

    /// How many times the log has been synced.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// How far the log is durable.
    pub fn durable_lsn(&self) -> Lsn {
        self.durable_lsn.load(Ordering::SeqCst)
    }

    /// Stops the writer where it is, writing nothing more: as a crash would.
    /// For tests.
    #[cfg(test)]
    pub(crate) fn halt(&self) {
        let mut shared = self.shared();
        shared.failed = Some("halted".into());
        shared.stopping = true;
        shared.buffer.clear();
        drop(shared);
        // A dead process acknowledges nothing more, even what a sync in
        // flight is about to make durable.
        self.fail("halted".into());
        self.work.notify_one();
    }

    /// Writes and syncs everything appended, then stops the writer.
    pub fn close(&self) -> Result<(), LogFailed> {
        self.shared().stopping = true;
        self.work.notify_one();
        if let Some(writer) = lock(&self.writer).take() {
            let _ = writer.join();
        }
        match self.failure() {
            Some(failed) => Err(failed),
            None => Ok(()),
        }
    }

    /// The writer thread. In `sync` mode it syncs for tasks on threads that
    /// do not sync for themselves, and for tasks on an adopting thread when
    /// a whole `BACKSTOP` passed with no sync (their thread syncs only when
    /// idle); in `interval` mode it writes and syncs once an interval. It
    /// also prepares the spare segment.
    fn run_writer(self: Arc<Self>) {
        // How far the log was durable at the last backstop tick.
        let mut at_tick = self.durable_lsn();
        loop {
            let (stopping, since_sync) = {
                let mut shared = self.shared();
                loop {
                    if shared.stopping {
                        break;
                    }
                    if std::mem::take(&mut shared.spare_wanted) {
                        drop(shared);
                        self.prepare_spare();
                        shared = self.shared();
                        continue;
                    }
                    match self.mode {
                        Durability::Sync => {
                            if shared.kicked {
                                let since = shared.synced_at.elapsed();
                                if shared.last_batch < UNDER_LOAD || since >= SYNC_GAP {
                                    shared.kicked = false;
                                    break;
                                }
                                shared = self
                                    .work
                                    .wait_timeout(shared, SYNC_GAP - since)
                                    .unwrap_or_else(|e| e.into_inner())
                                    .0;
                                continue;
                            }
                            shared.writer_idle = true;
                            // No backstop to keep while no task waits: the
                            // first to wait again wakes the writer.
                            self.writer_asleep.store(true, Ordering::SeqCst);
                            let timed_out = if self.threads_waiting() {
                                self.writer_asleep.store(false, Ordering::SeqCst);
                                let (again, timeout) = self
                                    .work
                                    .wait_timeout(shared, BACKSTOP)
                                    .unwrap_or_else(|e| e.into_inner());
                                shared = again;
                                timeout.timed_out()
                            } else {
                                shared = self.work.wait(shared).unwrap_or_else(|e| e.into_inner());
                                self.writer_asleep.store(false, Ordering::SeqCst);
                                // The next tick is the first of a new watch.
                                at_tick = Lsn::MAX;
                                false
                            };
                            shared.writer_idle = false;
                            if timed_out {
                                let durable = self.durable_lsn();
                                let stuck = durable == at_tick && self.threads_waiting();
                                at_tick = durable;
                                if stuck {
                                    break;
                                }
                            }
                        }
                        // Once an interval: write what is buffered and sync
                        // it; sooner only to write a full buffer.
                        Durability::Interval(every) => {
                            let since = shared.synced_at.elapsed();
                            let pending = !shared.buffer.is_empty()
                                || shared.buffered_from > self.durable_lsn();
                            if shared.buffer.len() >= INTERVAL_WAKE_BYTES
                                || (pending && since >= every)
                            {
                                break;
                            }
                            let wait = if pending { every - since } else { every };
                            shared.writer_idle = true;
                            shared = self
                                .work
                                .wait_timeout(shared, wait)
                                .unwrap_or_else(|e| e.into_inner())
                                .0;
                            shared.writer_idle = false;
                        }
                    }
                }
                (shared.stopping, shared.synced_at.elapsed())
            };
            let sync = match self.mode {
                Durability::Sync => true,
                Durability::Interval(every) => stopping || since_sync >= every,
            };
            let mut sink = lock(&self.sink);
            let told = self.write_out(&mut sink, sync);
            drop(sink);
            self.announce(told);
            if self.has_failed() || (stopping && self.shared().buffer.is_empty()) {
                return;
            }
        }
    }

    /// Writes a spare segment, unless one is ready. A failure here is only
    /// logged: the next segment is then made when needed, where a failure
    /// fails the log.
    fn prepare_spare(&self) {
        if self.spare_ready.load(Ordering::SeqCst) {
            return;
        }
        let (storage, path, bytes) = {
            let sink = lock(&self.sink);
            (
                Arc::clone(&sink.storage),
                sink.dir.join(SPARE),
                sink.segment_bytes,
            )
        };
        let made = (|| {
            if storage.exists(&path) {
                storage.remove(&path)?;
            }
            storage.open_append(&path, 0, bytes).map(drop)
        })();
        match made {
            Ok(()) => self.spare_ready.store(true, Ordering::SeqCst),
            Err(e) => tracing::warn!(error = %e, "could not prepare the next redo segment"),
        }
    }

    /// A segment was started: the writer is to prepare the next.
    fn want_spare(&self) {
        self.ask_writer(|shared| shared.spare_wanted = true);
    }

    /// Whether a task on an adopting thread waits for the log.
    fn threads_waiting(&self) -> bool {
        lock(&self.threads).iter().any(|t| t.waiting())
    }
}

/// The segment files: where the log is written.
struct Sink {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    file: Box<dyn AppendFile>,
    segment_start: Lsn,
    /// The end of what has been written to files.
    written: Lsn,
    segment_bytes: u64,
}

impl Sink {
    /// Writes a batch of whole records, starting a new segment at a record
    /// boundary whenever the current one is full.
    fn write(&mut self, batch: &[u8], log: &RedoLog) -> std::io::Result<()> {
        let mut at = 0;
        while at < batch.len() {
            if self.written - self.segment_start >= self.segment_bytes {
                // Everything in the full segment must be durable before its
                // successor exists.
                self.sync()?;
                let path = self.dir.join(segment_name(self.written));
                if log.spare_ready.swap(false, Ordering::SeqCst) {
                    self.storage.rename(&self.dir.join(SPARE), &path)?;
                }
                self.file = self.storage.open_append(&path, 0, self.segment_bytes)?;
                self.segment_start = self.written;
                log.want_spare();
            }
            let room = self.segment_bytes - (self.written - self.segment_start);
            let mut end = at;
            while end < batch.len() && (end - at) as u64 <= room {
                let len = u32::from_le_bytes(batch[end..end + 4].try_into().expect("a header"));
                end += HEADER + len as usize;
            }
            self.file.append(&batch[at..end])?;
            self.written += (end - at) as u64;
            at = end;
        }
        Ok(())
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.file.sync()
    }
}

/// Why the log could not be read at start.
#[derive(Debug, thiserror::Error)]
pub enum RedoError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the redo log is corrupt at {path} offset {offset}: {problem}; records after it would be lost, so the data node does not start"
    )]
    Corrupt {
        path: PathBuf,
        offset: u64,
        problem: String,
    },
    #[error(
        "the redo log has a gap: {path} starts at {start}, but the log before it ends at {end}"
    )]
    Gap { path: PathBuf, start: Lsn, end: Lsn },
    #[error("the redo log does not reach back to {needed}: its oldest record is at {oldest}")]
    Missing { needed: Lsn, oldest: Lsn },
}

/// Where the log ends, as recovery found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogEnd {
    pub end: Lsn,
    /// A torn record at the tail (a crash while writing it), dropped: the
    /// file and offset it was cut from.
    pub torn: Option<(PathBuf, u64)>,
}

/// Whether a valid record starts at `at` of `bytes`, whose offset in the log
/// is `lsn`: its length, if so.
fn record_at(bytes: &[u8], at: usize, lsn: Lsn) -> Result<usize, String> {
    let header = bytes.get(at..at + HEADER).ok_or("a header cut short")?;
    let len = u32::from_le_bytes(header[..4].try_into().expect("4")) as usize;
    let crc = u32::from_le_bytes(header[4..8].try_into().expect("4"));
    let stored = u64::from_le_bytes(header[8..16].try_into().expect("8"));
    if stored != lsn {
        return Err(format!("the record says it is at {stored}"));
    }
    let payload = bytes
        .get(at + HEADER..at + HEADER + len)
        .ok_or("a record cut short")?;
    if crc32c::crc32c_append(crc32c::crc32c(&header[8..16]), payload) != crc {
        return Err("its checksum does not match".into());
    }
    Ok(HEADER + len)
}

/// Reads every record from `from` on, in order, handing each payload and
/// the LSN it starts at to `visit`. A bad record at the very end of the log —
/// nothing valid after it — is a write a crash tore: it is left out, and
/// where it starts is reported. A bad record with valid ones after it, or a
/// gap between segments, is corruption: an error that names the file and
/// offset.
pub(crate) fn replay(
    storage: &dyn Storage,
    dir: &Path,
    from: Lsn,
    mut visit: impl FnMut(Lsn, &[u8]),
) -> Result<LogEnd, RedoError> {
    let segments: Vec<(Lsn, PathBuf)> = storage
        .list(dir)
        .map_err(|source| RedoError::Read {
            path: dir.to_owned(),
            source,
        })?
        .into_iter()
        .filter_map(|p| segment_start(&p).map(|s| (s, p)))
        .collect();
    let Some(first) = segments.iter().rposition(|(start, _)| *start <= from) else {
        return match segments.first() {
            None => Ok(LogEnd {
                end: from,
                torn: None,
            }),
            Some((oldest, _)) => Err(RedoError::Missing {
                needed: from,
                oldest: *oldest,
            }),
        };
    };
    let mut end = segments[first].0;
    for (n, (start, path)) in segments.iter().enumerate().skip(first) {
        if *start != end {
            return Err(RedoError::Gap {
                path: path.clone(),
                start: *start,
                end,
            });
        }
        let bytes = storage.read(path).map_err(|source| RedoError::Read {
            path: path.clone(),
            source,
        })?;
        let last = n + 1 == segments.len();
        let mut at = 0usize;
        while at < bytes.len() {
            let lsn = start + at as u64;
            match record_at(&bytes, at, lsn) {
                Ok(len) => {
                    if lsn >= from {
                        visit(lsn, &bytes[at + HEADER..at + len]);
                    }
                    at += len;
                }
                Err(problem) => {
                    let rest = &bytes[at..];
                    let Some(last_written) = rest.iter().rposition(|b| *b != 0) else {
                        // Allocated space never written: the segment's
                        // records end here.
                        break;
                    };
                    // A record of zeros with records after it: the later
                    // writes reached the disk before this one, which only
                    // unsynced writes do — none was acknowledged.
                    let hole = rest[..HEADER.min(rest.len())].iter().all(|b| *b == 0);
                    let valid_after = (at + 1..=at + last_written)
                        .any(|p| record_at(&bytes, p, start + p as u64).is_ok());
                    if last && (hole || !valid_after) {
                        return Ok(LogEnd {
                            end: lsn,
                            torn: Some((path.clone(), at as u64)),
                        });
                    }
                    return Err(RedoError::Corrupt {
                        path: path.clone(),
                        offset: at as u64,
                        problem,
                    });
                }
            }
        }
        end = start + at as u64;
    }
    Ok(LogEnd { end, torn: None })
}

/// Removes the segments that end at or before `lsn`: what recovery will
/// never need again once a checkpoint covers it.
pub(crate) fn remove_before(storage: &dyn Storage, dir: &Path, lsn: Lsn) -> std::io::Result<usize> {
    let segments: Vec<(Lsn, PathBuf)> = storage
        .list(dir)?
        .into_iter()
        .filter_map(|p| segment_start(&p).map(|s| (s, p)))
        .collect();
    let mut removed = 0;
    // A segment can go when the next one starts at or before `lsn`.
    for pair in segments.windows(2) {
        if pair[1].0 <= lsn {
            storage.remove(&pair[0].1)?;
            removed += 1;
        }
    }
    Ok(removed)
}

mod local;
#[cfg(test)]
mod tests;
