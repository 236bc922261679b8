//! LDM workers: one thread each, owning a set of fragments.
//!
//! Everything reaches a worker as a message on its channel; the worker owns
//! its fragments outright, so the data path shares no lock between workers.
//! A worker keeps its fragments in numbered slots; the table handle records
//! each fragment's worker and slot, so an operation finds its fragment by
//! index, and a slot reused after a drop is told apart by the table id.
//! Operations travel in batches — one message carries many operations and
//! comes back with their results — so the cost of a wake-up is shared.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;

use tokio::sync::oneshot;

use crate::catalog::TableId;
use crate::storage::fixed::RowRef;
use crate::storage::fragment::{Fragment, FragmentMemory};
use crate::storage::layout::Layout;
use crate::storage::page::DataMemory;
use crate::storage::{OpError, Predicate};

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
    Insert,
    Update,
    Write,
    Delete,
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
    Absent,
    Inserted,
    Updated,
    Deleted,
    Failed(OpError),
}

/// Operations for one worker and, once it has run them, their results.
#[derive(Debug, Default)]
pub(crate) struct OpBatch {
    pub(crate) ops: Vec<Op>,
    pub(crate) data: Vec<u8>,
    pub(crate) results: Vec<OpResult>,
    pub(crate) out: Vec<u8>,
}

/// One step of a scan of one fragment.
#[derive(Debug, Default)]
pub(crate) struct ScanChunk {
    pub(crate) rows: Vec<(u32, u32)>,
    pub(crate) out: Vec<u8>,
    /// Where the next step starts; `None` when the fragment is done.
    pub(crate) next: Option<RowRef>,
}

/// One fragment's memory, as reported for ndbinfo.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FragmentReport {
    pub(crate) table: TableId,
    pub(crate) fragment: u16,
    pub(crate) memory: FragmentMemory,
}

pub(crate) enum Msg {
    Ops(OpBatch, oneshot::Sender<OpBatch>),
    /// Creates a fragment and answers the slot it is in.
    CreateFragment {
        table: TableId,
        fragment: u16,
        layout: Arc<Layout>,
        done: oneshot::Sender<u32>,
    },
    DropFragment {
        table: TableId,
        slot: u32,
        done: oneshot::Sender<()>,
    },
    Scan {
        table: TableId,
        slot: u32,
        from: RowRef,
        filter: Arc<[Predicate]>,
        limit: usize,
        /// `None` when the fragment is gone: its table was dropped.
        reply: oneshot::Sender<Option<ScanChunk>>,
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
    sender: Option<mpsc::Sender<Msg>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Ldm {
    pub(crate) fn start(number: usize, pool: Arc<DataMemory>) -> std::io::Result<Ldm> {
        let (sender, receiver) = mpsc::channel();
        let thread = thread::Builder::new()
            .name(format!("ldm-{number}"))
            .spawn(move || Worker::new(pool).run(receiver))?;
        Ok(Ldm {
            sender: Some(sender),
            thread: Some(thread),
        })
    }

    /// Sends a message; the worker lives as long as this handle, so it is
    /// always there to receive it.
    pub(crate) fn send(&self, msg: Msg) {
        self.sender
            .as_ref()
            .expect("sender lives until drop")
            .send(msg)
            .expect("LDM worker thread has died");
    }
}

impl Drop for Ldm {
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            // A worker that panicked has already printed why.
            let _ = thread.join();
        }
    }
}

/// Operations between the stages of the worker's prefetch pipeline. A
/// lookup is a chain of dependent cache misses — index entry, fixed part,
/// var-part directory entry — so the worker walks each operation down that
/// chain one stage every `PREFETCH_STEP` operations before it executes it,
/// and a batch's misses overlap instead of each operation waiting for its own.
const PREFETCH_STEP: usize = 6;

/// What the prefetch pipeline fetches for an operation at each stage; each
/// reads what the stage before brought into cache.
#[derive(Clone, Copy)]
enum Prefetch {
    Index,
    Row,
    VarPart,
}

/// A fragment in its slot, with the table and number it belongs to.
struct Hosted {
    table: TableId,
    fragment: u16,
    frag: Fragment,
}

struct Worker {
    pool: Arc<DataMemory>,
    slots: Vec<Option<Hosted>>,
    free_slots: Vec<u32>,
}

impl Worker {
    fn new(pool: Arc<DataMemory>) -> Worker {
        Worker {
            pool,
            slots: Vec::new(),
            free_slots: Vec::new(),
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

    fn run(mut self, receiver: mpsc::Receiver<Msg>) {
        // A reply whose receiver is gone (the caller gave up) is simply dropped.
        while let Ok(msg) = receiver.recv() {
            match msg {
                Msg::Ops(mut batch, reply) => {
                    self.execute(&mut batch);
                    let _ = reply.send(batch);
                }
                Msg::CreateFragment {
                    table,
                    fragment,
                    layout,
                    done,
                } => {
                    let hosted = Hosted {
                        table,
                        fragment,
                        frag: Fragment::new(layout, Arc::clone(&self.pool)),
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
                        // Dropping the fragment gives all its pages back.
                        self.slots[slot as usize] = None;
                        self.free_slots.push(slot);
                    }
                    let _ = done.send(());
                }
                Msg::Scan {
                    table,
                    slot,
                    from,
                    filter,
                    limit,
                    reply,
                } => {
                    let result = self.fragment(table, slot).map(|f| {
                        let mut chunk = ScanChunk::default();
                        chunk.next = f.scan(from, &filter, limit, &mut chunk.out, &mut chunk.rows);
                        chunk
                    });
                    let _ = reply.send(result);
                }
                Msg::Memory { audit, reply } => {
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
    }

    // Not inlined, so that instruction counts can name it (see examples/pk_read_cost.rs).
    #[inline(never)]
    fn execute(&mut self, batch: &mut OpBatch) {
        let OpBatch {
            ops,
            data,
            results,
            out,
        } = batch;
        results.clear();
        out.clear();
        // Operation j gets its index entry fetched at step j, its row at
        // j + STEP, its var part at j + 2 * STEP, and runs at j + 3 * STEP.
        let stages = [Prefetch::Index, Prefetch::Row, Prefetch::VarPart];
        for step in 0..ops.len() + 3 * PREFETCH_STEP {
            for (n, stage) in stages.iter().enumerate() {
                let ahead = step.checked_sub(n * PREFETCH_STEP).and_then(|j| ops.get(j));
                if let Some(ahead) = ahead {
                    self.prefetch(ahead, *stage);
                }
            }
            let Some(op) = step.checked_sub(3 * PREFETCH_STEP).and_then(|j| ops.get(j)) else {
                continue;
            };
            let Some(frag) = self.fragment_mut(op.table, op.slot) else {
                results.push(OpResult::Failed(OpError::NoSuchTable));
                continue;
            };
            let key = op.key.of(data);
            let result = match op.kind {
                OpKind::Read => {
                    let start = out.len();
                    if frag.read(op.tag, key, out) {
                        OpResult::Found(Span {
                            start: start as u32,
                            len: (out.len() - start) as u32,
                        })
                    } else {
                        OpResult::Absent
                    }
                }
                OpKind::Insert => frag
                    .insert(op.tag, key, op.image.of(data))
                    .map(|()| OpResult::Inserted)
                    .into(),
                OpKind::Update => frag
                    .update(op.tag, key, op.image.of(data), op.presence.of(data))
                    .map(|()| OpResult::Updated)
                    .into(),
                OpKind::Write => frag
                    .write(op.tag, key, op.image.of(data), op.presence.of(data))
                    .map(|inserted| {
                        if inserted {
                            OpResult::Inserted
                        } else {
                            OpResult::Updated
                        }
                    })
                    .into(),
                OpKind::Delete => frag.delete(op.tag, key).map(|()| OpResult::Deleted).into(),
            };
            results.push(result);
        }
    }

    #[inline]
    fn prefetch(&self, op: &Op, stage: Prefetch) {
        if let Some(frag) = self.fragment(op.table, op.slot) {
            match stage {
                Prefetch::Index => frag.prefetch_index(op.tag),
                Prefetch::Row => frag.prefetch_row(op.tag),
                Prefetch::VarPart => frag.prefetch_var_part(op.tag),
            }
        }
    }
}

impl From<Result<OpResult, OpError>> for OpResult {
    fn from(r: Result<OpResult, OpError>) -> Self {
        r.unwrap_or_else(OpResult::Failed)
    }
}
