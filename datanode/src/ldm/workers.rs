//! A node's LDM workers together: the DataMemory pool they share, and the
//! messages the layers above send them, each answered — or, once the node
//! has failed, refused with `NodeFailed`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::{
    AggStep, CopyStep, Failure, FragmentPlace, FragmentReport, Job, JobOutcome, Ldm, Mode, Msg,
    NodeFailed, Only, OpBatch, ScanChunk, Walk,
};
use crate::log::ChangeLog;
use crate::log::changes::Buckets;
use crate::log::redo::Lsn;
use crate::sql::agg::Program;
use crate::sql::eval::EvalError;
use crate::storage::fixed::RowRef;
use crate::storage::fragment::{Bound, IndexChunk, IndexStep};
use crate::storage::layout::Layout;
use crate::storage::page::{DataMemory, MemoryAccount};
use crate::storage::{OpError, Predicate};
use crate::types::{TableId, TxnId};

/// A fragment's image and where replay must start to bring it up to date.
pub(crate) type FragmentImage = (Vec<u8>, Lsn);

/// The workers of one node; clones share them. The threads stop when the
/// last clone is dropped.
#[derive(Debug, Clone)]
pub(crate) struct Workers {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    pool: Arc<DataMemory>,
    ldms: Vec<Ldm>,
    log: Arc<ChangeLog>,
    failure: Failure,
    /// How long an operation waits for a row (or a value) another
    /// transaction holds.
    lock_wait: Duration,
}

impl Workers {
    /// Reserves `data_memory` bytes and starts `count` workers that log
    /// commits to `log`.
    pub(crate) fn start(
        count: usize,
        data_memory: u64,
        log: Arc<ChangeLog>,
        lock_wait: Duration,
        spin: Duration,
    ) -> std::io::Result<Workers> {
        let pool = DataMemory::new(data_memory)?;
        let failure = Failure::default();
        let ldms = (0..count)
            .map(|n| {
                Ldm::start(
                    n,
                    Arc::clone(&pool),
                    Arc::clone(&log),
                    lock_wait,
                    spin,
                    failure.clone(),
                )
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Workers {
            inner: Arc::new(Inner {
                pool,
                ldms,
                log,
                failure,
                lock_wait,
            }),
        })
    }

    pub(crate) fn data_memory(&self) -> &DataMemory {
        &self.inner.pool
    }

    pub(crate) fn count(&self) -> usize {
        self.inner.ldms.len()
    }

    /// How long an operation waits for what another transaction holds
    /// before it fails with a lock-wait timeout.
    pub(crate) fn lock_wait(&self) -> Duration {
        self.inner.lock_wait
    }

    /// Where the workers' commits go.
    pub(crate) fn log(&self) -> &Arc<ChangeLog> {
        &self.inner.log
    }

    /// Why the node failed, if it has.
    #[inline]
    pub(crate) fn failure(&self) -> Option<&NodeFailed> {
        self.inner.failure.get()
    }

    /// Waits for a worker's answer; a worker that dropped the question has
    /// failed, and the node with it.
    async fn answer<T>(&self, wait: oneshot::Receiver<T>) -> Result<T, NodeFailed> {
        wait.await
            .map_err(|_| self.inner.failure.fail(|| "an LDM worker stopped".into()))
    }

    /// Sends worker `ldm` the message `msg` makes around a reply channel.
    fn ask<T>(
        &self,
        ldm: usize,
        msg: impl FnOnce(oneshot::Sender<T>) -> Msg,
    ) -> oneshot::Receiver<T> {
        let (reply, wait) = oneshot::channel();
        self.inner.ldms[ldm].send(msg(reply));
        wait
    }

    /// Asks worker `ldm` and waits for its answer.
    async fn call<T>(
        &self,
        ldm: u16,
        msg: impl FnOnce(oneshot::Sender<T>) -> Msg,
    ) -> Result<T, NodeFailed> {
        self.answer(self.ask(ldm as usize, msg)).await
    }

    /// Sends one message to each of `ldms` and waits for every reply.
    async fn each<T>(
        &self,
        ldms: impl Iterator<Item = u16>,
        msg: impl Fn(usize, oneshot::Sender<T>) -> Msg,
    ) -> Result<Vec<T>, NodeFailed> {
        let waits: Vec<_> = ldms
            .enumerate()
            .map(|(i, ldm)| self.ask(ldm as usize, |done| msg(i, done)))
            .collect();
        let mut replies = Vec::with_capacity(waits.len());
        for wait in waits {
            replies.push(self.answer(wait).await?);
        }
        Ok(replies)
    }

    fn all(&self) -> impl Iterator<Item = u16> + use<> {
        0..self.inner.ldms.len() as u16
    }

    /// Makes every worker's thread sync the attached redo log for the tasks
    /// there that wait for it.
    pub(crate) async fn adopt_log(&self) -> Result<(), NodeFailed> {
        self.each(self.all(), |_, done| Msg::AdoptLog { done })
            .await
            .map(drop)
    }

    /// Runs `task` on worker `ldm`'s thread, beside the worker: what it asks
    /// of that worker's fragments is done without a thread hop.
    pub(crate) fn spawn_on_worker<F>(
        &self,
        ldm: usize,
        task: F,
    ) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner.ldms[ldm].spawn(task)
    }

    /// Runs a job on worker `ldm`: the batch back with its results, and how
    /// the job ended.
    pub(crate) async fn run(
        &self,
        ldm: usize,
        txn: TxnId,
        mode: Mode,
        batch: OpBatch,
    ) -> Result<(OpBatch, JobOutcome), NodeFailed> {
        let wait = self.start_job(ldm, txn, mode, batch);
        self.answer(wait).await
    }

    /// Sends a job to worker `ldm`; the answer comes on the receiver (see
    /// `finish_job`).
    pub(crate) fn start_job(
        &self,
        ldm: usize,
        txn: TxnId,
        mode: Mode,
        mut batch: OpBatch,
    ) -> oneshot::Receiver<(OpBatch, JobOutcome)> {
        if self.failure().is_none()
            && let Some(outcome) = self.inner.ldms[ldm].read_beside(txn, mode, &mut batch)
        {
            let (reply, wait) = oneshot::channel();
            let _ = reply.send((batch, outcome));
            return wait;
        }
        self.ask(ldm, |reply| {
            Msg::Run(Job {
                txn,
                mode,
                batch,
                next: 0,
                reply,
            })
        })
    }

    /// A job's answer, from `start_job`'s receiver.
    pub(crate) async fn finish_job(
        &self,
        wait: oneshot::Receiver<(OpBatch, JobOutcome)>,
    ) -> Result<(OpBatch, JobOutcome), NodeFailed> {
        self.answer(wait).await
    }

    /// Tells worker `ldm` to commit (or abort) what `txn` holds there.
    pub(crate) fn end_transaction(
        &self,
        ldm: usize,
        txn: TxnId,
        commit: bool,
    ) -> oneshot::Receiver<()> {
        self.ask(ldm, |done| {
            if commit {
                Msg::Commit { txn, done }
            } else {
                Msg::Abort { txn, done }
            }
        })
    }

    /// Waits for a commit or abort sent with `end_transaction`.
    pub(crate) async fn ended(&self, wait: oneshot::Receiver<()>) -> Result<(), NodeFailed> {
        self.answer(wait).await
    }

    /// Creates `fragments` fragments of table `id`, charged to `account`,
    /// round the workers from worker `id % workers` on: where each lives.
    pub(crate) async fn create_fragments(
        &self,
        id: TableId,
        fragments: u16,
        layout: &Arc<Layout>,
        account: &Arc<MemoryAccount>,
    ) -> Result<Vec<FragmentPlace>, NodeFailed> {
        let n = self.inner.ldms.len();
        let ldms: Vec<u16> = (0..fragments as usize)
            .map(|f| ((id.0 as usize + f) % n) as u16)
            .collect();
        let slots = self
            .each(ldms.iter().copied(), |fragment, done| Msg::CreateFragment {
                table: id,
                fragment: fragment as u16,
                layout: Arc::clone(layout),
                account: Arc::clone(account),
                done,
            })
            .await?;
        Ok(ldms
            .into_iter()
            .zip(slots)
            .map(|(ldm, slot)| FragmentPlace { ldm, slot })
            .collect())
    }

    /// Drops the fragments of table `id`, giving their pages back.
    pub(crate) async fn drop_fragments(
        &self,
        id: TableId,
        places: &[FragmentPlace],
    ) -> Result<(), NodeFailed> {
        self.each(places.iter().map(|p| p.ldm), |f, done| Msg::DropFragment {
            table: id,
            slot: places[f].slot,
            done,
        })
        .await
        .map(drop)
    }

    /// Gives the fragments of table `id` `layout`, which has one ordered
    /// index more, last, and empty.
    pub(crate) async fn add_index(
        &self,
        id: TableId,
        places: &[FragmentPlace],
        layout: &Arc<Layout>,
    ) -> Result<(), NodeFailed> {
        self.each(places.iter().map(|p| p.ldm), |f, done| Msg::AddIndex {
            table: id,
            slot: places[f].slot,
            layout: Arc::clone(layout),
            done,
        })
        .await
        .map(drop)
    }

    /// Puts the next `rows` rows of the fragment of table `id` at `place`
    /// into ordered index `index`: whether it is built.
    pub(crate) async fn build_index(
        &self,
        id: TableId,
        place: FragmentPlace,
        index: &Arc<str>,
        rows: usize,
    ) -> Result<Option<Result<bool, OpError>>, NodeFailed> {
        self.call(place.ldm, |reply| Msg::BuildIndex {
            table: id,
            slot: place.slot,
            index: Arc::clone(index),
            rows,
            reply,
        })
        .await
    }

    /// Gives the fragments of table `id` `layout`, which is theirs without
    /// ordered index `index`, and gives that index's pages back.
    pub(crate) async fn drop_index(
        &self,
        id: TableId,
        places: &[FragmentPlace],
        index: &Arc<str>,
        layout: &Arc<Layout>,
    ) -> Result<(), NodeFailed> {
        self.each(places.iter().map(|p| p.ldm), |f, done| Msg::DropIndex {
            table: id,
            slot: places[f].slot,
            index: Arc::clone(index),
            layout: Arc::clone(layout),
            done,
        })
        .await
        .map(drop)
    }

    /// An image of a fragment of table `id`; `None` if it is gone.
    pub(crate) async fn image(
        &self,
        id: TableId,
        place: FragmentPlace,
    ) -> Result<Option<FragmentImage>, NodeFailed> {
        self.call(place.ldm, |reply| Msg::Image {
            table: id,
            slot: place.slot,
            reply,
        })
        .await
    }

    /// Replaces a fragment of table `id` with an image of it.
    pub(crate) async fn restore_image(
        &self,
        id: TableId,
        place: FragmentPlace,
        image: Vec<u8>,
    ) -> Result<(), String> {
        let restored = self.call(place.ldm, |reply| Msg::Restore {
            table: id,
            slot: place.slot,
            image,
            reply,
        });
        restored.await.map_err(|e| e.to_string())?
    }

    /// Runs each read on its worker's fragments: beside the worker (see
    /// `Ldm::shared`) when they are all one worker's, or else sent to every
    /// worker at once, for them to run side by side. The answers, in order.
    async fn read_each<T: Send + 'static, R>(
        &self,
        reads: impl ExactSizeIterator<Item = (u16, R)>,
    ) -> Result<Vec<T>, NodeFailed>
    where
        R: FnOnce(&super::worker::Worker) -> T + Send + 'static,
    {
        if let Some(failed) = self.failure() {
            return Err(failed.clone());
        }
        let reads: Vec<(u16, R)> = reads.collect();
        let beside = reads.windows(2).all(|w| w[0].0 == w[1].0);
        let started: Vec<_> = (reads.into_iter())
            .map(|(ldm, read)| self.inner.ldms[ldm as usize].read(beside, read))
            .collect();
        let mut answers = Vec::with_capacity(started.len());
        for answer in started {
            answers.push(match answer {
                Ok(answer) => answer,
                Err(wait) => self.answer(wait).await?,
            });
        }
        Ok(answers)
    }

    /// Runs one read on worker `ldm`'s fragments, beside it where it can be.
    async fn read<T: Send + 'static>(
        &self,
        ldm: u16,
        read: impl FnOnce(&super::worker::Worker) -> T + Send + 'static,
    ) -> Result<T, NodeFailed> {
        if let Some(failed) = self.failure() {
            return Err(failed.clone());
        }
        match self.inner.ldms[ldm as usize].read(true, read) {
            Ok(answer) => Ok(answer),
            Err(wait) => self.answer(wait).await,
        }
    }

    /// One step of a scan of a fragment of table `id`, its rows as `reader`
    /// sees them; `None` if it is gone.
    pub(crate) async fn scan(
        &self,
        id: TableId,
        place: FragmentPlace,
        reader: TxnId,
        from: RowRef,
        filter: &Arc<[Predicate]>,
        limit: usize,
    ) -> Result<Option<ScanChunk>, NodeFailed> {
        let filter = Arc::clone(filter);
        self.read(place.ldm, move |w| {
            w.scan(id, place.slot, reader, from, &filter, limit)
        })
        .await
    }

    /// A step of a scan of an ordered index of table `id` in each of
    /// `steps`' fragments, from its bound: each fragment's chunk, `None`
    /// where the fragment or the index is gone.
    pub(crate) async fn scan_index(
        &self,
        id: TableId,
        steps: Vec<(FragmentPlace, Option<Bound>)>,
        step: &Arc<IndexStep>,
    ) -> Result<Vec<Option<IndexChunk>>, NodeFailed> {
        self.read_each(steps.into_iter().map(|(place, from)| {
            let step = Arc::clone(step);
            (place.ldm, move |w: &super::worker::Worker| {
                w.scan_index(id, place.slot, from.as_ref(), &step)
            })
        }))
        .await
    }

    /// A step of an aggregation of table `id` in each of `steps`'
    /// fragments, along its walk, its rows as `reader` sees them: each
    /// fragment's partial groups, `None` where the fragment or the index is
    /// gone.
    pub(crate) async fn aggregate(
        &self,
        id: TableId,
        reader: TxnId,
        program: &Arc<Program>,
        steps: Vec<(FragmentPlace, Walk)>,
    ) -> Result<Vec<Option<Result<AggStep, EvalError>>>, NodeFailed> {
        self.read_each(steps.into_iter().map(|(place, walk)| {
            let program = Arc::clone(program);
            (place.ldm, move |w: &super::worker::Worker| {
                w.aggregate(id, place.slot, reader, &program, walk)
            })
        }))
        .await
    }

    /// About what share of ordered index `index` of a fragment of table
    /// `id` lies between two bounds; `None` if the fragment or the index is
    /// gone.
    pub(crate) async fn range_share(
        &self,
        id: TableId,
        place: FragmentPlace,
        index: &str,
        from: Option<Bound>,
        to: Option<Bound>,
    ) -> Result<Option<f64>, NodeFailed> {
        let index: Arc<str> = index.into();
        self.read(place.ldm, move |w| {
            w.range_share(id, place.slot, &index, from.as_ref(), to.as_ref())
        })
        .await
    }

    /// Sends the next rows of a fragment, from `from`, to node `to`, which
    /// is catching up (see `Msg::Copy`).
    pub(crate) async fn copy(
        &self,
        id: TableId,
        place: FragmentPlace,
        from: RowRef,
        to: u32,
        only: Option<&Arc<Only>>,
    ) -> Result<Option<CopyStep>, NodeFailed> {
        self.call(place.ldm, |reply| Msg::Copy {
            table: id,
            slot: place.slot,
            from,
            to,
            only: only.cloned(),
            reply,
        })
        .await
    }

    /// The digest of the fragment at `place`'s rows in `buckets`, a step
    /// at a time (one step of the worker's at once, between commits); `None`
    /// if the fragment is gone.
    pub(crate) async fn digest(
        &self,
        id: TableId,
        place: FragmentPlace,
        buckets: Buckets,
    ) -> Result<Option<Vec<u64>>, NodeFailed> {
        let (mut sums, mut from) = (vec![0; buckets.count as usize], 0);
        loop {
            let step = self.call(place.ldm, |reply| Msg::Digest {
                table: id,
                slot: place.slot,
                from,
                buckets,
                sums,
                reply,
            });
            let Some((summed, next)) = step.await? else {
                return Ok(None);
            };
            sums = summed;
            match next {
                Some(next) => from = next,
                None => return Ok(Some(sums)),
            }
        }
    }

    /// The keys of the fragment at `place`'s rows in `only`, a step at a
    /// time; `None` if the fragment is gone.
    pub(crate) async fn keys(
        &self,
        id: TableId,
        place: FragmentPlace,
        only: &Arc<Only>,
    ) -> Result<Option<Vec<Vec<u8>>>, NodeFailed> {
        let (mut keys, mut from) = (Vec::new(), 0);
        loop {
            let step = self.call(place.ldm, |reply| Msg::Keys {
                table: id,
                slot: place.slot,
                from,
                only: Arc::clone(only),
                reply,
            });
            let Some((found, next)) = step.await? else {
                return Ok(None);
            };
            keys.extend(found);
            match next {
                Some(next) => from = next,
                None => return Ok(Some(keys)),
            }
        }
    }

    /// Every fragment's memory. With `audit`, each worker first recounts its
    /// fragments from the pages and panics on a mismatch: for tests.
    pub(crate) async fn memory(&self, audit: bool) -> Result<Vec<FragmentReport>, NodeFailed> {
        let reports = self
            .each(self.all(), |_, reply| Msg::Memory { audit, reply })
            .await?;
        Ok(reports.into_iter().flatten().collect())
    }

    /// Transactions holding rows and jobs parked, over all workers.
    #[cfg(test)]
    pub(crate) async fn inspect(&self) -> (usize, usize) {
        let states = self
            .each(self.all(), |_, reply| Msg::Inspect { reply })
            .await
            .expect("workers answer");
        states
            .into_iter()
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }
}
