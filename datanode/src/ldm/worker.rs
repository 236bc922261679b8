//! The worker thread: its fragments, and how it runs jobs, holds a
//! transaction's rows between prepare and commit, and parks jobs on rows
//! another transaction holds.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use super::waits::Waits;
/// About how many bytes of rows one copy step sends.
const COPY_BYTES: usize = 1 << 20;

use super::{
    AUTOCOMMIT, AggStep, CopyStep, FragmentReport, Job, JobOutcome, Mode, Msg, OpBatch, OpKind,
    OpResult, ScanChunk, Span, TxnId, Walk,
};
use crate::log::{ChangeLog, Mark, changes};
use crate::sql::agg::{Groups, Program};
use crate::sql::eval::{EvalError, Row};
use crate::storage::OpError;
use crate::storage::fixed::RowRef;
use crate::storage::fragment::{Bound, Fragment, HeldChange, IndexChunk, IndexStep};
use crate::storage::page::{DataMemory, PageSource};
use crate::types::TableId;

/// Operations between the stages of the worker's prefetch pipeline. A
/// lookup is a chain of dependent cache misses — index entry, fixed part,
/// var-part directory entry, var-part bytes (where a VARBINARY key is
/// compared) — so the worker walks each operation down that chain one stage
/// every `PREFETCH_STEP` operations before it executes it, and a batch's
/// misses overlap instead of each operation waiting for its own.
const PREFETCH_STEP: usize = 6;

/// What the prefetch pipeline fetches for an operation at each stage; each
/// reads what the stage before brought into cache.
#[derive(Clone, Copy)]
enum Prefetch {
    Index,
    Row,
    VarPart,
    VarData,
}

/// A fragment in its slot, with the table and number it belongs to.
struct Hosted {
    table: TableId,
    fragment: u16,
    frag: Fragment,
}

/// A row a transaction holds on this worker.
struct Held {
    table: TableId,
    slot: u32,
    row: RowRef,
}

/// Where running a job got to.
enum Stop {
    /// Every operation ran.
    Done,
    /// The next operation needs a row another transaction holds.
    Blocked(u32, RowRef),
    /// The next operation failed, in a transaction.
    Failed(OpError),
}

pub(super) struct Worker {
    pool: Arc<DataMemory>,
    slots: Vec<Option<Hosted>>,
    free_slots: Vec<u32>,
    /// The rows each transaction holds here, in the order it took them.
    txns: FxHashMap<TxnId, Vec<Held>>,
    waits: Waits,
    /// Jobs woken from waiting, to run again.
    ready: VecDeque<Job>,
    /// Where committed changes go.
    log: Arc<ChangeLog>,
    /// Images asked for, taken once no transaction holds rows here.
    images: Vec<(TableId, u32, ImageReply)>,
    /// New transactions that arrived while images wait: they start after.
    held_back: VecDeque<Job>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("fragments", &self.slots.iter().flatten().count())
            .field("transactions", &self.txns.len())
            .finish_non_exhaustive()
    }
}

type ImageReply = tokio::sync::oneshot::Sender<Option<(Vec<u8>, u64)>>;

impl Worker {
    pub(super) fn new(pool: Arc<DataMemory>, log: Arc<ChangeLog>, lock_wait: Duration) -> Worker {
        Worker {
            pool,
            slots: Vec::new(),
            free_slots: Vec::new(),
            txns: FxHashMap::default(),
            waits: Waits::new(lock_wait),
            ready: VecDeque::new(),
            log,
            images: Vec::new(),
            held_back: VecDeque::new(),
        }
    }

    /// The fragment in `slot` if it still belongs to `table`.
    #[inline]
    fn fragment(&self, table: TableId, slot: u32) -> Option<&Fragment> {
        match self.slots.get(slot as usize) {
            Some(Some(h)) if h.table == table => Some(&h.frag),
            _ => None,
        }
    }

    #[inline]
    fn fragment_mut(&mut self, table: TableId, slot: u32) -> Option<&mut Fragment> {
        match self.slots.get_mut(slot as usize) {
            Some(Some(h)) if h.table == table => Some(&mut h.frag),
            _ => None,
        }
    }

    /// Handles `msg` (if any), times out jobs parked too long, and runs
    /// every job that became ready.
    pub(super) fn step(&mut self, msg: Option<Msg>) {
        if let Some(msg) = msg {
            self.handle(msg);
        }
        self.time_out(Instant::now());
        while let Some(job) = self.ready.pop_front() {
            self.run_job(job);
        }
    }

    /// When the next parked job's lock wait runs out.
    pub(super) fn next_deadline(&mut self) -> Option<Instant> {
        self.waits.next_deadline()
    }

    // A reply whose receiver is gone (the caller gave up) is simply dropped.
    fn handle(&mut self, msg: Msg) {
        match msg {
            // While an image waits for transactions to finish, new ones wait
            // for the image, so that it cannot wait for ever.
            Msg::Run(job) if !self.images.is_empty() && self.would_start(&job) => {
                self.held_back.push_back(job)
            }
            Msg::Run(job) => self.run_job(job),
            Msg::Image { table, slot, reply } => {
                self.images.push((table, slot, reply));
                self.take_images();
            }
            Msg::Restore {
                table,
                slot,
                image,
                reply,
            } => {
                let result = match self.slots.get_mut(slot as usize) {
                    Some(Some(h)) if h.table == table => {
                        let (layout, pages) = h.frag.parts();
                        Fragment::read_image(layout, pages, &image).map(|frag| h.frag = frag)
                    }
                    _ => Err("the fragment is gone".into()),
                };
                let _ = reply.send(result);
            }
            Msg::AdoptLog { done } => {
                // Tasks on this thread waiting for the log are woken by it.
                if let Some(redo) = self.log.redo() {
                    redo.adopt_thread();
                }
                let _ = done.send(());
            }
            Msg::Commit { txn, done } => {
                self.release(txn, true);
                let _ = done.send(());
            }
            Msg::Abort { txn, done } => {
                // Its job may still be parked, or woken and not yet run: it
                // is dropped, and its caller (gone, or aborting) hears nothing.
                if txn != AUTOCOMMIT {
                    drop(self.waits.cancel(txn));
                    self.ready.retain(|job| job.txn != txn);
                }
                self.release(txn, false);
                let _ = done.send(());
            }
            Msg::CreateFragment {
                table,
                fragment,
                layout,
                account,
                done,
            } => {
                let pages = PageSource::new(Arc::clone(&self.pool), account);
                let hosted = Hosted {
                    table,
                    fragment,
                    frag: Fragment::new(layout, pages),
                };
                let slot = match self.free_slots.pop() {
                    Some(slot) => {
                        self.slots[slot as usize] = Some(hosted);
                        slot
                    }
                    None => {
                        self.slots.push(Some(hosted));
                        self.slots.len() as u32 - 1
                    }
                };
                let _ = done.send(slot);
            }
            Msg::DropFragment { table, slot, done } => {
                if self.fragment(table, slot).is_some() {
                    // Dropping the fragment gives all its pages back; jobs
                    // parked on its rows run again and find it gone.
                    self.slots[slot as usize] = None;
                    self.free_slots.push(slot);
                    self.ready.extend(self.waits.wake_slot(slot));
                }
                let _ = done.send(());
            }
            Msg::AddIndex {
                table,
                slot,
                layout,
                done,
            } => {
                if let Some(f) = self.fragment_mut(table, slot) {
                    f.add_index(layout);
                }
                let _ = done.send(());
            }
            Msg::BuildIndex {
                table,
                slot,
                index,
                rows,
                reply,
            } => {
                let built = self
                    .fragment_mut(table, slot)
                    .map(|f| f.build_index(&index, rows));
                let _ = reply.send(built);
            }
            Msg::DropIndex {
                table,
                slot,
                index,
                layout,
                done,
            } => {
                if let Some(f) = self.fragment_mut(table, slot) {
                    f.drop_index(&index, layout);
                }
                let _ = done.send(());
            }
            Msg::Copy {
                table,
                slot,
                from,
                to,
                only,
                reply,
            } => {
                let step = self.fragment(table, slot).and_then(|f| {
                    let (mut out, mut rows) = (Vec::new(), 0);
                    let next = f.each_row(from, |key, fixed, var| {
                        if only.as_ref().is_some_and(|only| !only.has(key)) {
                            return true;
                        }
                        let at = changes::begin_put(&mut out, table, key);
                        out.extend_from_slice(fixed);
                        out.extend_from_slice(var);
                        changes::finish_put(&mut out, at);
                        rows += 1;
                        out.len() < COPY_BYTES
                    });
                    let shipped = rows == 0 || self.log.outbox().ship_to(to, &out).is_some();
                    shipped.then_some(CopyStep {
                        rows,
                        bytes: out.len(),
                        next,
                    })
                });
                let _ = reply.send(step);
            }
            Msg::Digest {
                table,
                slot,
                from,
                buckets,
                mut sums,
                reply,
            } => {
                let step = self.fragment(table, slot).map(|f| {
                    let values = f.values_offset();
                    let next = f.each_row(from, |key, fixed, var| {
                        if let Some(b) = buckets.of(key) {
                            let row = changes::row_digest(key, &fixed[values..], var);
                            let sum = &mut sums[b as usize];
                            *sum = sum.wrapping_add(row);
                        }
                        true
                    });
                    (sums, next)
                });
                let _ = reply.send(step);
            }
            Msg::Keys {
                table,
                slot,
                from,
                only,
                reply,
            } => {
                let step = self.fragment(table, slot).map(|f| {
                    let mut keys = Vec::new();
                    let next = f.each_row(from, |key, _, _| {
                        if only.has(key) {
                            keys.push(key.to_vec());
                        }
                        true
                    });
                    (keys, next)
                });
                let _ = reply.send(step);
            }
            Msg::Read(read) => read(self),
            #[cfg(test)]
            Msg::Inspect { reply } => {
                let _ = reply.send((self.txns.len(), self.waits.parked()));
            }
            Msg::Memory { audit, reply } => {
                if audit {
                    assert!(
                        self.txns.is_empty() && self.waits.is_empty(),
                        "audited while transactions run"
                    );
                }
                let reports = self
                    .slots
                    .iter()
                    .flatten()
                    .map(|h| FragmentReport {
                        table: h.table,
                        fragment: h.fragment,
                        memory: if audit {
                            h.frag.audit()
                        } else {
                            h.frag.memory()
                        },
                    })
                    .collect();
                let _ = reply.send(reports);
            }
        }
    }

    // The reads a worker answers from a shared borrow, in its message loop
    // or beside it (`Ldm::shared`): each `None` if the fragment is gone (or,
    // for an index, the index).

    /// One step of a scan of a fragment, its rows as `reader` sees them.
    pub(super) fn scan(
        &self,
        table: TableId,
        slot: u32,
        reader: TxnId,
        from: RowRef,
        filter: &[crate::storage::Predicate],
        limit: usize,
    ) -> Option<ScanChunk> {
        let f = self.fragment(table, slot)?;
        let mut chunk = ScanChunk::default();
        let (out, rows) = (&mut chunk.out, &mut chunk.rows);
        chunk.next = f.scan(reader, from, filter, limit, out, rows);
        Some(chunk)
    }

    /// One step of a scan of an ordered index of a fragment, from `from`.
    pub(super) fn scan_index(
        &self,
        table: TableId,
        slot: u32,
        from: Option<&Bound>,
        step: &IndexStep,
    ) -> Option<IndexChunk> {
        let f = self.fragment(table, slot)?;
        let i = f.ordered_index(&step.index)?;
        Some(f.scan_index(i, from, step))
    }

    /// One step of an aggregation of a fragment along `walk`.
    pub(super) fn aggregate(
        &self,
        table: TableId,
        slot: u32,
        reader: TxnId,
        program: &Program,
        walk: Walk,
    ) -> Option<Result<AggStep, EvalError>> {
        aggregate(self.fragment(table, slot)?, reader, program, walk)
    }

    /// About what share of an ordered index of a fragment lies between two
    /// bounds.
    pub(super) fn range_share(
        &self,
        table: TableId,
        slot: u32,
        index: &str,
        from: Option<&Bound>,
        to: Option<&Bound>,
    ) -> Option<f64> {
        let f = self.fragment(table, slot)?;
        let i = f.ordered_index(index)?;
        Some(f.range_share(i, from, to))
    }

    /// Whether `job` would start holding rows here: a transaction's job
    /// that may lock and whose transaction holds none here yet. (One that
    /// holds rows goes on, or the images would wait for it, and it for them.)
    fn would_start(&self, job: &Job) -> bool {
        job.mode != Mode::Autocommit
            && !self.txns.contains_key(&job.txn)
            && job.batch.ops.iter().any(|op| op.kind != OpKind::Read)
    }

    /// Runs a job from its next operation until it is done, fails or parks.
    fn run_job(&mut self, mut job: Job) {
        match self.execute(&mut job) {
            Stop::Done => match job.mode {
                Mode::Autocommit => {
                    self.log_autocommit(&mut job.batch);
                    let _ = job.reply.send((job.batch, JobOutcome::Done));
                }
                Mode::Prepare => {
                    // The coordinator logs the transaction once every worker
                    // has prepared: it gets this worker's part.
                    self.after_images(job.txn, &mut job.batch.redo);
                    let _ = job.reply.send((job.batch, JobOutcome::Prepared));
                }
                Mode::Hold => {
                    let _ = job.reply.send((job.batch, JobOutcome::Prepared));
                }
                Mode::PrepareAndCommit => {
                    // Logged before its rows are let go, so that whatever
                    // sees them next is logged after it.
                    self.after_images(job.txn, &mut job.batch.redo);
                    match self.append(&job.batch.redo, job.batch.from_primary) {
                        Ok(mark) => {
                            job.batch.mark = mark;
                            self.release(job.txn, true);
                            let _ = job.reply.send((job.batch, JobOutcome::Done));
                        }
                        Err(()) => self.fail(job, OpError::DurabilityFailed),
                    }
                }
            },
            Stop::Blocked(slot, row) => {
                if job.mode == Mode::Autocommit {
                    // What it changed is visible: log it before anything else runs.
                    self.log_autocommit(&mut job.batch);
                }
                self.waits.park(job, (slot, row), Instant::now());
            }
            Stop::Failed(error) => self.fail(job, error),
        }
    }

    /// Logs a commit's change records (and sends them to the backups,
    /// unless they came from a primary): where they end.
    fn append(&self, redo: &[u8], from_primary: bool) -> Result<Mark, ()> {
        self.log.commit(redo, !from_primary).map_err(|_| ())
    }

    /// Logs the changes an autocommit job has made since it last logged.
    fn log_autocommit(&self, batch: &mut OpBatch) {
        match self.append(&batch.redo, batch.from_primary) {
            Ok(mark) => batch.mark = batch.mark.max(mark),
            Err(()) => batch.durability_failed = true,
        }
        batch.redo.clear();
    }

    /// Appends to `redo` what transaction `txn` made of every row it holds.
    fn after_images(&self, txn: TxnId, redo: &mut Vec<u8>) {
        redo.clear();
        let mut key = Vec::new();
        for held in self.txns.get(&txn).into_iter().flatten() {
            if let Some(frag) = self.fragment(held.table, held.slot) {
                key.clear();
                match frag.held_change(held.row, &mut key) {
                    HeldChange::Unchanged => {}
                    HeldChange::Deleted => changes::delete(redo, held.table, &key),
                    HeldChange::Written => {
                        let start = changes::begin_put(redo, held.table, &key);
                        frag.append_image(held.row, redo);
                        changes::finish_put(redo, start);
                    }
                }
            }
        }
    }

    /// Ends a transaction's job with `error` at its next operation, undoing
    /// everything the transaction did here.
    fn fail(&mut self, job: Job, error: OpError) {
        self.release(job.txn, false);
        let outcome = JobOutcome::Failed {
            op: job.next,
            error,
        };
        let _ = job.reply.send((job.batch, outcome));
    }

    /// Commits or aborts every row `txn` holds here, and wakes the jobs that
    /// wait for them.
    fn release(&mut self, txn: TxnId, commit: bool) {
        let Some(rows) = self.txns.remove(&txn) else {
            return;
        };
        self.release_rows(rows, commit);
        self.take_images();
    }

    fn release_rows(&mut self, rows: Vec<Held>, commit: bool) {
        // Undo goes newest first; commits in any order.
        for held in rows.into_iter().rev() {
            if let Some(frag) = self.fragment_mut(held.table, held.slot) {
                if commit {
                    frag.commit(held.row);
                } else {
                    frag.abort(held.row);
                }
            }
            self.ready.extend(self.waits.wake((held.slot, held.row)));
        }
    }

    /// Takes the images asked for, if no transaction holds rows here, and
    /// lets the transactions held back go.
    fn take_images(&mut self) {
        if self.images.is_empty() || !self.txns.is_empty() {
            return;
        }
        // Everything logged so far is in the images; replay starts here.
        let from = self.log.next_lsn();
        for (table, slot, reply) in std::mem::take(&mut self.images) {
            let image = self.fragment(table, slot).map(|frag| {
                let mut bytes = Vec::new();
                frag.write_image(&mut bytes);
                (bytes, from)
            });
            let _ = reply.send(image);
        }
        self.ready.extend(self.held_back.drain(..));
    }

    /// Times out the jobs that waited too long: an autocommit job's waiting
    /// operation fails and the job goes on; a transaction fails.
    fn time_out(&mut self, now: Instant) {
        for mut job in self.waits.expired(now) {
            if job.mode == Mode::Autocommit {
                job.batch
                    .results
                    .push(OpResult::Failed(OpError::LockWaitTimeout));
                job.next += 1;
                self.ready.push_back(job);
            } else {
                self.fail(job, OpError::LockWaitTimeout);
            }
        }
    }

    // Not inlined, so that instruction counts can name it (see examples/pk_read_cost.rs).
    #[inline(never)]
    fn execute(&mut self, job: &mut Job) -> Stop {
        if job.next == 0 {
            job.batch.clear_results();
        }
        let (txn, start) = (job.txn, job.next);
        let autocommit = job.mode == Mode::Autocommit;
        let pipeline = Pipeline::new(start, job.batch.ops.len());
        for step in pipeline.steps() {
            pipeline.prefetch(step, |j, stage| self.prefetch(&job.batch.ops[j], stage));
            let Some(j) = pipeline.op_at(step) else {
                continue;
            };
            let op = job.batch.ops[j];
            let batch = &mut job.batch;
            let Some(frag) = self.fragment_mut(op.table, op.slot) else {
                match Self::failed(autocommit, batch, OpError::NoSuchTable) {
                    Some(stop) => return stop,
                    None => {
                        job.next = j + 1;
                        continue;
                    }
                }
            };
            let key = op.key.of(&batch.data);
            let mut old = None;
            let mut answer = Span::default();
            let written = match op.kind {
                OpKind::Read => {
                    batch
                        .results
                        .push(match read_into(frag, txn, op.tag, key, &mut batch.out) {
                            Some(span) => OpResult::Found(span),
                            None => OpResult::Absent,
                        });
                    job.next = j + 1;
                    continue;
                }
                OpKind::Lock => {
                    let start = batch.out.len();
                    let result = match frag.read_locking(txn, op.tag, key, &mut batch.out) {
                        Ok(Some(w)) => {
                            if w.locked {
                                hold(&mut self.txns, txn, &op, w.row);
                            }
                            OpResult::Found(Span {
                                start: start as u32,
                                len: (batch.out.len() - start) as u32,
                            })
                        }
                        Ok(None) => OpResult::Absent,
                        Err(OpError::Busy(row)) => return Stop::Blocked(op.slot, row),
                        Err(error) => match Self::failed(autocommit, batch, error) {
                            Some(stop) => return stop,
                            None => {
                                job.next = j + 1;
                                continue;
                            }
                        },
                    };
                    batch.results.push(result);
                    job.next = j + 1;
                    continue;
                }
                OpKind::Insert => frag.insert(txn, op.tag, key, op.image.of(&batch.data)),
                OpKind::Update => frag.update(
                    txn,
                    op.tag,
                    key,
                    op.image.of(&batch.data),
                    op.presence.of(&batch.data),
                ),
                OpKind::Write => frag.write(
                    txn,
                    op.tag,
                    key,
                    op.image.of(&batch.data),
                    op.presence.of(&batch.data),
                ),
                OpKind::Replace => {
                    // A job that parks on the row reads it again when it
                    // runs this operation anew.
                    old = read_into(frag, txn, op.tag, key, &mut batch.out);
                    frag.write(
                        txn,
                        op.tag,
                        key,
                        op.image.of(&batch.data),
                        op.presence.of(&batch.data),
                    )
                }
                OpKind::Delete => frag.delete(txn, op.tag, key),
                OpKind::Interpret => {
                    // The program reads the row as it is now: a job that
                    // parks on it runs the program anew.
                    let start = batch.out.len();
                    let found = read_into(frag, txn, op.tag, key, &mut batch.out);
                    let program = (batch.program.as_deref())
                        .expect("a batch with interpreted operations has its program");
                    batch.scratch.clear();
                    let ran = program.run(
                        frag.layout(),
                        found.map(|span| span.of(&batch.out)),
                        op.image.of(&batch.data),
                        &mut batch.scratch,
                    );
                    batch.out.truncate(start);
                    batch.out.extend_from_slice(&batch.scratch[ran.answer]);
                    answer = Span {
                        start: start as u32,
                        len: (batch.out.len() - start) as u32,
                    };
                    let Some(row) = ran.row else {
                        batch.results.push(OpResult::Answered(answer));
                        job.next = j + 1;
                        continue;
                    };
                    let (image, presence) = (row.image, row.presence);
                    frag.write(
                        txn,
                        op.tag,
                        key,
                        &batch.scratch[image.0..][..image.1],
                        &batch.scratch[presence.0..][..presence.1],
                    )
                }
            };
            #[cfg(any(test, feature = "testing"))]
            failpoint::after_write(op.kind, key);
            match written {
                Ok(w) => {
                    let result = match (op.kind, w.inserted, old) {
                        (OpKind::Delete, _, _) => OpResult::Deleted,
                        (OpKind::Interpret, _, _) => OpResult::Answered(answer),
                        (_, true, _) => OpResult::Inserted,
                        (OpKind::Replace, false, Some(span)) => OpResult::Replaced(span),
                        (_, false, _) => OpResult::Updated,
                    };
                    if autocommit {
                        // Its after-image, logged before anything else runs.
                        if op.kind == OpKind::Delete {
                            changes::delete(&mut batch.redo, op.table, key);
                        } else {
                            let at = changes::begin_put(&mut batch.redo, op.table, key);
                            frag.append_image(w.row, &mut batch.redo);
                            changes::finish_put(&mut batch.redo, at);
                        }
                    }
                    if w.locked {
                        hold(&mut self.txns, txn, &op, w.row);
                    }
                    job.batch.results.push(result);
                }
                Err(OpError::Busy(row)) => return Stop::Blocked(op.slot, row),
                Err(error) => {
                    if let Some(stop) = Self::failed(autocommit, &mut job.batch, error) {
                        return stop;
                    }
                }
            }
            job.next = j + 1;
        }
        Stop::Done
    }

    /// Runs a job of nothing but reads from a shared borrow — beside the
    /// worker, on the thread that asks (`Ldm::read_beside`): the results `execute`
    /// would give the same job. False if a transaction's read finds its
    /// fragment gone, which ends the transaction here: the worker must run
    /// that job.
    pub(super) fn read_only(&self, txn: TxnId, autocommit: bool, batch: &mut OpBatch) -> bool {
        debug_assert!(batch.ops.iter().all(|op| op.kind == OpKind::Read));
        batch.clear_results();
        let pipeline = Pipeline::new(0, batch.ops.len());
        for step in pipeline.steps() {
            pipeline.prefetch(step, |j, stage| self.prefetch(&batch.ops[j], stage));
            let Some(j) = pipeline.op_at(step) else {
                continue;
            };
            let op = batch.ops[j];
            let result = match self.fragment(op.table, op.slot) {
                Some(frag) => {
                    let key = op.key.of(&batch.data);
                    match read_into(frag, txn, op.tag, key, &mut batch.out) {
                        Some(span) => OpResult::Found(span),
                        None => OpResult::Absent,
                    }
                }
                None if autocommit => OpResult::Failed(OpError::NoSuchTable),
                None => return false,
            };
            batch.results.push(result);
        }
        true
    }

    /// An operation failed: its result on its own, or the end of its
    /// transaction.
    fn failed(autocommit: bool, batch: &mut OpBatch, error: OpError) -> Option<Stop> {
        if autocommit {
            batch.results.push(OpResult::Failed(error));
            None
        } else {
            Some(Stop::Failed(error))
        }
    }

    #[inline]
    fn prefetch(&self, op: &super::Op, stage: Prefetch) {
        if let Some(frag) = self.fragment(op.table, op.slot) {
            match stage {
                Prefetch::Index => frag.prefetch_index(op.tag),
                Prefetch::Row => frag.prefetch_row(op.tag),
                Prefetch::VarPart => frag.prefetch_var_part(op.tag),
                Prefetch::VarData => frag.prefetch_var_data(op.tag),
            }
        }
    }
}

/// The steps of a batch's walk through the prefetch pipeline: operation j
/// gets its index entry fetched at step j, its row at j + STEP, its var
/// part's directory entry at j + 2 * STEP and its bytes at j + 3 * STEP,
/// and runs at j + 4 * STEP.
struct Pipeline {
    start: usize,
    len: usize,
    /// How many steps an operation's first fetch comes before it runs; 0
    /// for a batch of a few operations, which has no misses to overlap —
    /// the steps would cost more than they hide (a point select would walk
    /// 25 steps for its one operation).
    lead: usize,
}

impl Pipeline {
    const STAGES: [Prefetch; 4] = [
        Prefetch::Index,
        Prefetch::Row,
        Prefetch::VarPart,
        Prefetch::VarData,
    ];

    /// The walk of operations `start..len`.
    fn new(start: usize, len: usize) -> Pipeline {
        let pipelined = len.saturating_sub(start) > PREFETCH_STEP;
        let lead = if pipelined {
            Self::STAGES.len() * PREFETCH_STEP
        } else {
            0
        };
        Pipeline { start, len, lead }
    }

    fn steps(&self) -> std::ops::Range<usize> {
        self.start..self.len + self.lead
    }

    /// Calls `fetch` for each operation a stage fetches for at `step`.
    #[inline]
    fn prefetch(&self, step: usize, mut fetch: impl FnMut(usize, Prefetch)) {
        if self.lead == 0 {
            return;
        }
        for (n, stage) in Self::STAGES.iter().enumerate() {
            let ahead = step.checked_sub(n * PREFETCH_STEP);
            if let Some(j) = ahead.filter(|&j| j >= self.start && j < self.len) {
                fetch(j, *stage);
            }
        }
    }

    /// The operation that runs at `step`, if one does.
    #[inline]
    fn op_at(&self, step: usize) -> Option<usize> {
        step.checked_sub(self.lead).filter(|&j| j >= self.start)
    }
}

/// Records that transaction `txn` holds `row`, which operation `op` locked.
fn hold(txns: &mut FxHashMap<TxnId, Vec<Held>>, txn: TxnId, op: &super::Op, row: RowRef) {
    let held = Held {
        table: op.table,
        slot: op.slot,
        row,
    };
    txns.entry(txn).or_default().push(held);
}

/// Reads the row with `key` into `out`: where its image is, if there is one.
fn read_into(frag: &Fragment, txn: TxnId, tag: u32, key: &[u8], out: &mut Vec<u8>) -> Option<Span> {
    let start = out.len();
    frag.read(txn, tag, key, out).then(|| Span {
        start: start as u32,
        len: (out.len() - start) as u32,
    })
}

/// A test's way to make a worker panic in the middle of an operation, after
/// its fragment has changed and before the change is logged: a write whose
/// stored key holds the bytes of `SHOAL_FAILPOINT_PANIC_KEY` panics. Only in
/// builds with the `testing` feature.
#[cfg(any(test, feature = "testing"))]
pub(crate) mod failpoint {
    use std::sync::OnceLock;

    use super::OpKind;

    /// The environment variable naming the key bytes that panic.
    pub(crate) const PANIC_KEY: &str = "SHOAL_FAILPOINT_PANIC_KEY";

    pub(super) fn after_write(kind: OpKind, key: &[u8]) {
        static ARMED: OnceLock<Option<Vec<u8>>> = OnceLock::new();
        let armed =
            ARMED.get_or_init(|| std::env::var_os(PANIC_KEY).map(|k| k.into_encoded_bytes()));
        if let Some(marker) = armed.as_deref()
            && kind != OpKind::Read
            && key.windows(marker.len().max(1)).any(|w| w == marker)
        {
            panic!("failpoint {PANIC_KEY} reached");
        }
    }
}

/// A step of an aggregation over fragment `f`: its rows along `walk`, as
/// `reader` sees them, run through `program`. `None` if the index walked
/// is gone.
fn aggregate(
    f: &Fragment,
    reader: TxnId,
    program: &Program,
    walk: Walk,
) -> Option<Result<AggStep, EvalError>> {
    let layout = f.layout();
    let (mut groups, mut key, mut failed) = (Groups::default(), Vec::new(), None);
    let mut seen = 0;
    let mut add = |fixed: &[u8], var: &[u8]| {
        seen += 1;
        let row = Row {
            layout,
            fixed,
            var,
            slots: &[],
        };
        match program.add_row(row, &mut groups, &mut key) {
            Ok(_) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    };
    let (examined, next) = match walk {
        Walk::Rows(from) => {
            let next = f.each_visible(from, reader, &mut add);
            (None, next.map(Walk::Rows))
        }
        Walk::Index { index, from, to } => {
            let i = f.ordered_index(&index)?;
            let (examined, next) = f.walk_index(i, from.as_ref(), to.as_deref(), reader, &mut add);
            let next = next.map(|from| Walk::Index {
                index,
                from: Some(from),
                to,
            });
            (Some(examined), next)
        }
    };
    if let Some(e) = failed {
        return Some(Err(e));
    }
    Some(Ok(AggStep {
        groups,
        examined: examined.unwrap_or(seen),
        next,
    }))
}
