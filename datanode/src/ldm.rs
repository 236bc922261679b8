//! LDM workers: one thread each, owning a set of fragments.
//!
//! Everything reaches a worker as a message on its channel; the worker owns
//! its fragments outright, so the data path shares no lock between workers.
//! Operations travel in batches — one message carries many operations and
//! comes back with their results — so the cost of a wake-up is shared.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;

use rustc_hash::FxHashMap;
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

/// One operation, its key and row image held in its batch's buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    pub(crate) kind: OpKind,
    pub(crate) table: TableId,
    pub(crate) fragment: u16,
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
    CreateFragment {
        table: TableId,
        fragment: u16,
        layout: Arc<Layout>,
        done: oneshot::Sender<()>,
    },
    DropFragment {
        table: TableId,
        fragment: u16,
        done: oneshot::Sender<()>,
    },
    Scan {
        table: TableId,
        fragment: u16,
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
    pub(crate) fn start(number: usize, pool: Arc<DataMemory>, seed: u64) -> std::io::Result<Ldm> {
        let (sender, receiver) = mpsc::channel();
        let thread = thread::Builder::new()
            .name(format!("ldm-{number}"))
            .spawn(move || Worker::new(pool, seed).run(receiver))?;
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

struct Worker {
    pool: Arc<DataMemory>,
    seed: u64,
    fragments: FxHashMap<(TableId, u16), Fragment>,
}

impl Worker {
    fn new(pool: Arc<DataMemory>, seed: u64) -> Worker {
        Worker {
            pool,
            seed,
            fragments: FxHashMap::default(),
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
                    let seed = self.seed;
                    let frag = Fragment::new(layout, Arc::clone(&self.pool), seed);
                    self.fragments.insert((table, fragment), frag);
                    let _ = done.send(());
                }
                Msg::DropFragment {
                    table,
                    fragment,
                    done,
                } => {
                    // Dropping the fragment gives all its pages back.
                    self.fragments.remove(&(table, fragment));
                    let _ = done.send(());
                }
                Msg::Scan {
                    table,
                    fragment,
                    from,
                    filter,
                    limit,
                    reply,
                } => {
                    let result = self.fragments.get(&(table, fragment)).map(|f| {
                        let mut chunk = ScanChunk::default();
                        chunk.next = f.scan(from, &filter, limit, &mut chunk.out, &mut chunk.rows);
                        chunk
                    });
                    let _ = reply.send(result);
                }
                Msg::Memory { audit, reply } => {
                    let reports = self
                        .fragments
                        .iter()
                        .map(|(&(table, fragment), f)| FragmentReport {
                            table,
                            fragment,
                            memory: if audit { f.audit() } else { f.memory() },
                        })
                        .collect();
                    let _ = reply.send(reports);
                }
            }
        }
    }

    fn execute(&mut self, batch: &mut OpBatch) {
        let OpBatch {
            ops,
            data,
            results,
            out,
        } = batch;
        results.clear();
        out.clear();
        for op in ops.iter() {
            let Some(frag) = self.fragments.get_mut(&(op.table, op.fragment)) else {
                results.push(OpResult::Failed(OpError::NoSuchTable));
                continue;
            };
            let key = op.key.of(data);
            let result = match op.kind {
                OpKind::Read => {
                    let start = out.len();
                    if frag.read(key, out) {
                        OpResult::Found(Span {
                            start: start as u32,
                            len: (out.len() - start) as u32,
                        })
                    } else {
                        OpResult::Absent
                    }
                }
                OpKind::Insert => frag
                    .insert(key, op.image.of(data))
                    .map(|()| OpResult::Inserted)
                    .into(),
                OpKind::Update => frag
                    .update(key, op.image.of(data), op.presence.of(data))
                    .map(|()| OpResult::Updated)
                    .into(),
                OpKind::Write => frag
                    .write(key, op.image.of(data), op.presence.of(data))
                    .map(|inserted| {
                        if inserted {
                            OpResult::Inserted
                        } else {
                            OpResult::Updated
                        }
                    })
                    .into(),
                OpKind::Delete => frag.delete(key).map(|()| OpResult::Deleted).into(),
            };
            results.push(result);
        }
    }
}

impl From<Result<OpResult, OpError>> for OpResult {
    fn from(r: Result<OpResult, OpError>) -> Self {
        r.unwrap_or_else(OpResult::Failed)
    }
}
