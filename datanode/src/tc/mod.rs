//! The transaction coordinator: every request to a database passes here.
//!
//! In this order, before any LDM worker sees the request: the caller's grant,
//! the database's `max_transaction_ops`, `max_parallel_transactions`, its
//! read and write rates, and — for requests that can grow memory — its memory
//! quota and its tenant's. A refused request changed nothing. Then the
//! operations run, each on its own or as one transaction (`transaction`).
//! Nothing else in the node runs an operation: the front ends come here,
//! and so do recovery (`replay`) and the node's own housekeeping (`purge`).
//!
//! - `batch`: operations encoded at the edge and their outcomes.
//! - `schema`: the handles of tenants, databases and tables.
//! - `governance`: a database's limits, limiters and counters.
//! - `transaction`: atomic requests — two-phase commit across workers.

pub(crate) mod batch;
mod governance;
mod range;
pub(crate) mod ronsql;
pub(crate) mod schema;
mod transaction;
pub use self::transaction::Transaction;
mod unique;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use shoal_quota::error::RateKind;
use shoal_quota::limiter::{Limiter, LimiterClock, LimiterPool, Throttled};
use shoal_quota::{Quota, QuotaError};

use self::batch::{Batch, Cost, OperationError, memory_quota_error};
use self::governance::Counters;
pub(crate) use self::governance::LATENCY_BOUNDS_US;
pub use self::range::{RangePage, RangeScan};
pub(crate) use self::ronsql::QueryError;
use self::schema::TableUnits;
pub use self::schema::{Database, Table, Tenant};
use crate::ldm::{AUTOCOMMIT, Mode, NodeFailed, Workers};
use crate::log::Mark;
use crate::log::redo::LogFailed;
pub(crate) use crate::log::ship::NotReplicated;
use crate::storage::codec::{self, ValueError};
use crate::storage::fixed::RowRef;
use crate::storage::page::MemoryAccount;
use crate::storage::{CmpOp, OpError, Predicate};
use crate::types::DatabaseId;
use crate::types::value::Value;

/// Most rows one scan returns.
pub(crate) const MAX_SCAN_LIMIT: usize = 100_000;

/// What a caller may do with a database: the grant of its API key.
pub use shoal_wire::apikey::Role;

/// The database a caller may use, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub database: DatabaseId,
    pub role: Role,
}

/// How a request's operations take effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Each operation on its own: some may fail while others succeed.
    Each,
    /// All together or none: the first failure undoes the rest.
    Atomic,
}

/// Why a request was refused or failed as a whole; nothing of it was applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TcError {
    #[error("not allowed on database '{database}': {reason}")]
    Forbidden { database: String, reason: String },
    #[error(transparent)]
    Quota(#[from] QuotaError),
    /// An atomic request failed at one of its operations (the `index`th as
    /// given), and was undone.
    #[error("operation {index} failed, the transaction was rolled back: {error}")]
    Operation { index: usize, error: OperationError },
    /// The redo log failed: what the request changed is not durable, and
    /// no write is accepted until the node restarts.
    #[error(transparent)]
    Durability(#[from] LogFailed),
    /// An LDM worker panicked: the node serves nothing until it restarts.
    #[error(transparent)]
    NodeFailed(#[from] NodeFailed),
    /// The request's changes did not reach every replica in time: it may
    /// or may not have taken effect.
    #[error(transparent)]
    NotReplicated(#[from] NotReplicated),
    /// This node is out of its group's view — catching up, or removed by
    /// the arbitrator — and serves nothing until it is back in.
    #[error("this data node is not serving: {0}; use another node of its group")]
    NotServing(&'static str),
    /// This node holds only a backup of the database: writes go to its
    /// primary.
    #[error("this data node is not the primary of database '{database}': data node {primary} is")]
    NotPrimary { database: String, primary: u32 },
}

impl TcError {
    pub fn code(&self) -> &'static str {
        match self {
            TcError::Forbidden { .. } => "FORBIDDEN",
            TcError::Quota(e) => e.code(),
            TcError::Operation { error, .. } => error.code(),
            TcError::Durability(_) => "DURABILITY_FAILED",
            TcError::NodeFailed(_) => "NODE_FAILED",
            TcError::NotReplicated(_) => "NOT_REPLICATED",
            TcError::NotPrimary { .. } => "NOT_PRIMARY",
            TcError::NotServing(_) => "NOT_SERVING",
        }
    }

    /// The HTTP status that answers the error.
    pub fn http_status(&self) -> u16 {
        match self {
            TcError::Forbidden { .. } => 403,
            TcError::Quota(e) => e.http_status(),
            TcError::Operation { error, .. } => error.http_status(),
            TcError::Durability(_)
            | TcError::NodeFailed(_)
            | TcError::NotReplicated(_)
            | TcError::NotServing(_) => 503,
            TcError::NotPrimary { .. } => 421,
        }
    }

    /// When a retry can succeed, for throttling.
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            TcError::Quota(e)
            | TcError::Operation {
                error: OperationError::Quota(e),
                ..
            } => e.retry_after_ms(),
            _ => None,
        }
    }
}

/// A request refused for going over its database's rate is answered no
/// sooner than this (or than its retry-after, up to `MAX_RATE_HOLD`): a
/// client that retries at once — a flood — then costs the node one refusal
/// per connection every 10 ms instead of one per round trip, and the CPU it
/// would have burnt stays with the tenants within their limits. Holding a
/// refusal costs a timer, not a thread.
const RATE_HOLD: std::time::Duration = std::time::Duration::from_millis(10);
const MAX_RATE_HOLD: std::time::Duration = std::time::Duration::from_millis(100);

async fn hold_rate_refusal(refused: &TcError) {
    if let Some(ms) = refused.retry_after_ms() {
        let hold = std::time::Duration::from_millis(ms).clamp(RATE_HOLD, MAX_RATE_HOLD);
        tokio::time::sleep(hold).await;
    }
}

/// The coordinator of one data node; clones share it.
#[derive(Debug, Clone)]
pub struct Tc {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    workers: Workers,
    /// Keys the hash indexes; secret, so keys cannot be chosen to collide.
    seed: u64,
    limiters: LimiterPool<DatabaseId>,
    next_txn: AtomicU64,
    latency_observer: arc_swap::ArcSwapOption<LatencyObserver>,
    /// Why the node serves no requests now (its group's view), if so.
    not_serving: arc_swap::ArcSwapOption<&'static str>,
    /// Locks on the values of unique indexes being written.
    unique_locks: unique::UniqueLocks,
}

/// Told of every request a database ran and how long it took — an
/// exporter's hook; none by default, when it costs one atomic load.
pub struct LatencyObserver(pub Box<ObserveLatency>);

/// What a `LatencyObserver` calls: the database, and how long its request took.
pub(crate) type ObserveLatency = dyn Fn(&Database, std::time::Duration) + Send + Sync;

impl std::fmt::Debug for LatencyObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LatencyObserver")
    }
}

impl Tc {
    /// The coordinator of `workers`, whose hash indexes are keyed by `seed`
    /// and whose rate limiters keep time by `clock`.
    pub(crate) fn with_clock(workers: Workers, seed: u64, clock: LimiterClock) -> Tc {
        Tc {
            inner: Arc::new(Inner {
                workers,
                seed,
                limiters: LimiterPool::new(clock),
                next_txn: AtomicU64::new(1),
                latency_observer: arc_swap::ArcSwapOption::empty(),
                not_serving: arc_swap::ArcSwapOption::empty(),
                unique_locks: unique::UniqueLocks::new(),
            }),
        }
    }

    /// Sets (or with `None`, removes) the hook told of every request's
    /// latency.
    pub fn observe_latency(&self, observer: Option<LatencyObserver>) {
        self.inner.latency_observer.store(observer.map(Arc::new));
    }

    /// The LDM workers, for the node's DDL, checkpoints and memory reports.
    pub(crate) fn workers(&self) -> &Workers {
        &self.inner.workers
    }

    /// Stops serving requests, saying why; `None` serves again.
    pub(crate) fn set_not_serving(&self, why: Option<&'static str>) {
        self.inner.not_serving.store(why.map(Arc::new));
    }

    /// Why the node serves no requests now, if so.
    pub(crate) fn not_serving(&self) -> Option<&'static str> {
        self.inner.not_serving.load().as_deref().copied()
    }

    /// Why the node failed, if it has: it then refuses every request.
    pub fn failure(&self) -> Option<NodeFailed> {
        self.inner.workers.failure().cloned()
    }

    /// An empty batch for this node.
    pub fn batch(&self) -> Batch {
        Batch::new(self.inner.workers.count(), self.inner.seed)
    }

    /// Runs `task` on LDM worker `ldm`'s thread, beside the worker: a front
    /// end's connection served there reaches that worker's fragments
    /// without a thread hop.
    pub(crate) fn spawn_on_worker<F>(
        &self,
        ldm: usize,
        task: F,
    ) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner.workers.spawn_on_worker(ldm, task)
    }

    /// LDM worker threads.
    pub fn ldm_threads(&self) -> usize {
        self.inner.workers.count()
    }

    /// Every check before any worker sees a request, in order: the grant,
    /// `max_transaction_ops`, `max_parallel_transactions`, the read and write
    /// rates, the memory quotas. `None` for an empty request.
    #[inline(never)]
    pub(crate) fn admit(&self, grant: &Grant, batch: &Batch) -> Result<Option<Admitted>, TcError> {
        self.serving()?;
        let Ok(database) = batch.database() else {
            return Err(TcError::Forbidden {
                database: "(several)".into(),
                reason: "a request works on one database".into(),
            });
        };
        let Some(db) = database else {
            return Ok(None);
        };
        self.admit_to(grant, db, batch.len(), batch.cost(), false)
            .map(Some)
    }

    /// Whether this node takes requests at all.
    fn serving(&self) -> Result<(), TcError> {
        if let Some(failed) = self.inner.workers.failure() {
            return Err(TcError::NodeFailed(failed.clone()));
        }
        if let Some(why) = self.not_serving() {
            return Err(TcError::NotServing(why));
        }
        Ok(())
    }

    /// The checks of `admit` for a request of `ops` operations costing
    /// `cost` on database `db`; one of a transaction that is `counted`
    /// already among the database's parallel transactions is not again.
    fn admit_to(
        &self,
        grant: &Grant,
        db: &Arc<Database>,
        ops: usize,
        cost: Cost,
        counted: bool,
    ) -> Result<Admitted, TcError> {
        if db.id != grant.database {
            return Err(TcError::Forbidden {
                database: db.name.to_string(),
                reason: "the key is not granted this database".into(),
            });
        }
        let writes = cost.write_units > 0;
        // Locking reads hold rows as writes do: a writer's, on the primary.
        let holds = writes || cost.locks;
        if grant.role == Role::Read && holds {
            return Err(TcError::Forbidden {
                database: db.name.to_string(),
                reason: "the key may only read".into(),
            });
        }
        // A backup takes its database's changes from the primary alone.
        // The write counts as in flight before the look, so that a primary
        // handing the database on sees it (`Database::writes_in_flight`).
        let writing = holds.then(|| WriteInFlight::new(db));
        if writing.is_some() && !db.is_primary_here() {
            return Err(TcError::NotPrimary {
                database: db.name.to_string(),
                primary: db.primary(),
            });
        }
        // A node whose log has failed takes no writes: they could not be made durable.
        if let Some(failed) = writes.then(|| self.inner.workers.log().failure()).flatten() {
            return Err(TcError::Durability(failed));
        }
        let gov = &db.governance;
        let reject = |e: QuotaError| {
            Counters::add(&gov.counters.quota_rejections, 1);
            TcError::Quota(e)
        };
        let limits = gov.limits();
        let quota = &limits.quota;
        if let Some(limit) = quota
            .max_transaction_ops
            .filter(|&limit| ops > limit as usize)
        {
            return Err(reject(QuotaError::TransactionTooLarge {
                database: db.name.to_string(),
                limit,
                ops,
            }));
        }
        let entered = if counted {
            Some(false)
        } else {
            gov.enter(quota.max_parallel_transactions)
        };
        let Some(counted) = entered else {
            return Err(reject(QuotaError::TooManyTransactions {
                database: db.name.to_string(),
                limit: quota.max_parallel_transactions.unwrap_or(u32::MAX),
            }));
        };
        // From here on, the request counts as in flight until this drops.
        let admitted = Admitted {
            db: Arc::clone(db),
            scanned: None,
            cost,
            counted,
            _writing: writing,
        };
        let cost = admitted.cost;
        // What the group's other nodes admitted comes first.
        for (units, limiter, kind) in [
            (cost.reads, limits.read.as_deref(), RateKind::Read),
            (cost.write_units, limits.write.as_deref(), RateKind::Write),
        ] {
            if let Some(limiter) = limiter.filter(|_| units > 0)
                && let Err(wait) = gov.take_elsewhere(kind, limiter, &db.id)
            {
                return Err(throttled(db, limiter, kind, wait));
            }
        }
        if cost.reads > 0 {
            // Reads pay first for what earlier reads still owe (large rows,
            // rows scanned), a burst at a time.
            match limits.read.as_deref() {
                Some(limiter) => {
                    if let Err(wait) = gov.take_read_debt(limiter, &db.id) {
                        return Err(throttled(db, limiter, RateKind::Read, wait));
                    }
                }
                None => gov.forgive_read_debt(),
            }
            charge(db, limits.read.as_deref(), RateKind::Read, cost.reads)?;
        }
        if cost.write_units > 0 {
            charge(
                db,
                limits.write.as_deref(),
                RateKind::Write,
                cost.write_units,
            )?;
        }
        if cost.grows {
            check_memory(db).map_err(reject)?;
        }
        // Admitted. (Read units beyond the first of each row count as the
        // rows are read.)
        Counters::add(&gov.counters.read_units, cost.reads);
        Counters::add(&gov.counters.write_units, cost.write_units);
        Ok(admitted)
    }

    /// Runs only the checks of `execute`, charging the limiters as it would,
    /// and nothing else: to measure what the checks cost.
    #[cfg(feature = "testing")]
    pub fn admit_only(&self, grant: &Grant, batch: &Batch) -> Result<(), TcError> {
        self.admit(grant, batch).map(drop)
    }

    /// Sets a database's quota; its next request is judged by it.
    pub(crate) fn apply_database_quota(&self, db: &Database, quota: Quota) {
        db.memory.set_limit(quota.in_memory_bytes);
        db.governance.set(quota, &self.inner.limiters);
    }

    /// Sets a tenant's quota: its memory limit bounds its databases together.
    pub(crate) fn apply_tenant_quota(tenant: &Tenant, quota: Quota) {
        tenant.memory.set_limit(quota.in_memory_bytes);
        tenant.quota.store(Arc::new(quota));
    }

    /// Forgets rate-limiter state that has gone idle; run now and then.
    pub fn housekeep(&self) {
        self.inner.limiters.housekeep();
    }

    /// Checks the request against the grant and the database's limits, then
    /// runs it. With `Commit::Each` the outcome of each operation is in the
    /// batch; with `Commit::Atomic` a failed operation fails the request.
    pub async fn execute(
        &self,
        grant: &Grant,
        batch: &mut Batch,
        commit: Commit,
    ) -> Result<(), TcError> {
        let mark = self.execute_applied(grant, batch, commit).await?;
        self.wait_acknowledgeable(mark).await
    }

    /// Waits until the changes up to `mark` may be acknowledged: durable
    /// here and held by every replica.
    pub(crate) async fn wait_acknowledgeable(&self, mark: Mark) -> Result<(), TcError> {
        let log = self.inner.workers.log();
        log.wait_durable(mark).await?;
        Ok(log.wait_replicated(mark).await?)
    }

    /// `execute`, answered once the changes are applied and ordered in the
    /// log: where they end there, which the caller waits on
    /// (`wait_acknowledgeable`) before it acknowledges them. Until then they are
    /// as visible as any committed change not yet on disk — the caller may
    /// let go of its own locks first, so that the next writer's changes
    /// join the same group commit.
    pub(crate) async fn execute_applied(
        &self,
        grant: &Grant,
        batch: &mut Batch,
        commit: Commit,
    ) -> Result<Mark, TcError> {
        let admitted = match self.admit(grant, batch) {
            Ok(Some(admitted)) => admitted,
            Ok(None) => return Ok(Mark::default()),
            Err(refused) => {
                hold_rate_refusal(&refused).await;
                return Err(refused);
            }
        };
        let started = std::time::Instant::now();
        let (db, cost) = (&admitted.db, admitted.cost);
        let gov = &db.governance;
        // Held until the batch is applied: writers of the same unique
        // values go one after the other.
        let unique = (self.check_unique(batch, commit == Commit::Each && batch.len() > 1)).await;
        let outcome = match (unique, commit) {
            (Err(e), _) => Err(e),
            (Ok(unique), Commit::Each) => {
                let applied = self.apply_each(batch).await;
                unique.fail(batch);
                applied
            }
            // One operation is atomic on its own: no transaction to hold.
            (Ok(_), Commit::Atomic) if batch.len() == 1 => match self.apply_each(batch).await {
                Ok(mark) => match batch.error(0) {
                    Some(error) => Err(TcError::Operation { index: 0, error }),
                    None => Ok(mark),
                },
                Err(e) => Err(e),
            },
            (Ok(_), Commit::Atomic) => {
                let txn = self.inner.next_txn.fetch_add(1, Ordering::Relaxed);
                transaction::run(&self.inner.workers, txn, batch).await
            }
        };
        let read_units = batch.charge_tables(outcome.is_ok());
        if cost.reads > 0 && outcome.is_ok() {
            let extra = read_units.saturating_sub(cost.reads);
            Counters::add(&gov.counters.read_units, extra);
            gov.owe_reads(extra);
        }
        let refused_by_quota = match &outcome {
            Err(TcError::Operation {
                error: OperationError::Quota(_),
                ..
            }) => 1,
            Err(_) => 0,
            Ok(_) => batch.failures(OpError::MemoryQuota),
        };
        Counters::add(&gov.counters.quota_rejections, refused_by_quota as u64);
        Counters::add(&gov.counters.failed, u64::from(outcome.is_err()));
        self.finished(db, started);
        outcome
    }

    /// Counts a request of `db` that ran from `started`, and its latency.
    fn finished(&self, db: &Database, started: std::time::Instant) {
        Counters::add(&db.governance.counters.requests, 1);
        let took = started.elapsed();
        db.governance.counters.latency.record(took);
        if let Some(observer) = self.inner.latency_observer.load().as_ref() {
            (observer.0)(db, took);
        }
    }
}

impl Tc {
    /// Runs every operation of the batch on its worker, each on its own,
    /// and returns once the changes are durable; the outcomes are in the
    /// batch.
    async fn run_each(&self, batch: &mut Batch) -> Result<(), TcError> {
        let mark = self.apply_each(batch).await?;
        let log = self.inner.workers.log();
        log.wait_durable(mark).await?;
        Ok(log.wait_replicated(mark).await?)
    }

    /// Runs every operation of the batch on its worker, each on its own:
    /// where its changes end in the log, not yet waited for.
    async fn apply_each(&self, batch: &mut Batch) -> Result<Mark, TcError> {
        let workers = &self.inner.workers;
        let mut waits = Vec::new();
        for (n, ops) in batch.ldms.iter_mut().enumerate() {
            if ops.ops.is_empty() {
                continue;
            }
            let job = std::mem::take(ops);
            waits.push((n, workers.start_job(n, AUTOCOMMIT, Mode::Autocommit, job)));
        }
        for (n, wait) in waits {
            batch.ldms[n] = workers.finish_job(wait).await?.0;
        }
        let log = workers.log();
        if batch.ldms.iter().any(|b| b.durability_failed) {
            return Err(TcError::Durability(
                log.failure().expect("a failed log says why"),
            ));
        }
        Ok((batch.ldms.iter()).fold(Mark::default(), |m, b| m.max(b.mark)))
    }

    /// Applies changes read back from the redo log while the node recovers,
    /// before it serves anyone: no grant, no limits, nothing logged again.
    pub(crate) async fn replay(&self, batch: &mut Batch) -> Result<(), TcError> {
        self.run_each(batch).await
    }

    /// Applies changes a database's primary sent to this node, its backup:
    /// no grant or limits (the primary applied them), logged here and sent
    /// nowhere. Refused for a database this node is the primary of. Answers
    /// where the changes end in this node's log, for `wait_durable`: the
    /// caller may apply more before they are durable.
    pub(crate) async fn apply_from_primary(&self, batch: &mut Batch) -> Result<Mark, TcError> {
        if let Some(failed) = self.inner.workers.failure() {
            return Err(TcError::NodeFailed(failed.clone()));
        }
        if let Ok(Some(db)) = batch.database()
            && db.is_primary_here()
        {
            return Err(TcError::Forbidden {
                database: db.name.to_string(),
                reason: "this node is the database's primary".into(),
            });
        }
        for ops in &mut batch.ldms {
            ops.from_primary = true;
        }
        let applied = self.apply_each(batch).await;
        for ops in &mut batch.ldms {
            ops.from_primary = false;
        }
        applied
    }

    /// Waits until this node's log is durable up to `mark`.
    pub(crate) async fn wait_durable(&self, mark: Mark) -> Result<(), TcError> {
        Ok(self.inner.workers.log().wait_durable(mark).await?)
    }

    /// Runs the node's own housekeeping — reading rows and deleting those
    /// that have expired — outside any caller's grant and rates: only reads
    /// and deletes, which never grow memory.
    pub(crate) async fn purge(&self, batch: &mut Batch) -> Result<(), TcError> {
        if let Some(failed) = self.inner.workers.failure() {
            return Err(TcError::NodeFailed(failed.clone()));
        }
        // A backup's rows expire when its primary's deletions arrive.
        if let Ok(Some(db)) = batch.database()
            && !db.is_primary_here()
        {
            return Err(TcError::NotPrimary {
                database: db.name.to_string(),
                primary: db.primary(),
            });
        }
        if !batch.only_reads_and_deletes() {
            return Err(TcError::Forbidden {
                database: "(housekeeping)".into(),
                reason: "housekeeping only reads and deletes".into(),
            });
        }
        self.run_each(batch).await
    }

    /// Runs a batch without the checks: for tests and benchmarks of the
    /// workers alone.
    #[cfg(any(test, feature = "testing"))]
    pub async fn execute_unchecked(&self, batch: &mut Batch) -> Result<(), TcError> {
        self.run_each(batch).await
    }

    /// Rows of `table` that pass every condition, at most `limit`, in no
    /// particular order: for the node's housekeeping. Each row is read
    /// committed; the scan as a whole is not a snapshot.
    pub(crate) async fn scan(
        &self,
        table: &Arc<Table>,
        filter: &[(&str, CmpOp, Value)],
        limit: usize,
    ) -> Result<Vec<batch::Row>, OperationError> {
        let layout = &table.layout;
        let predicates = filter
            .iter()
            .map(|(name, op, value)| {
                let column = layout.column_index(name).ok_or_else(|| {
                    ValueError::named(
                        (*name).to_owned(),
                        format!("table '{}' has no such column", table.name()),
                    )
                })?;
                let operand = match op {
                    CmpOp::IsNull | CmpOp::IsNotNull => Vec::new(),
                    _ => codec::encode_operand(layout, column, value)?,
                };
                Ok(Predicate {
                    column,
                    op: *op,
                    operand,
                })
            })
            .collect::<Result<Arc<[Predicate]>, ValueError>>()?;
        let gone = || OperationError::NoSuchTable {
            table: table.name().to_string(),
        };
        let limit = limit.min(MAX_SCAN_LIMIT);
        let mut rows = Vec::new();
        for &place in &table.fragments {
            let mut from: RowRef = 0;
            while rows.len() < limit {
                let chunk = self
                    .inner
                    .workers
                    .scan(
                        table.id,
                        place,
                        AUTOCOMMIT,
                        from,
                        &predicates,
                        limit - rows.len(),
                    )
                    .await?
                    .ok_or_else(gone)?;
                rows.extend(chunk.rows.iter().map(|&(start, len)| {
                    batch::Row::decode(table, &chunk.out[start as usize..(start + len) as usize])
                }));
                match chunk.next {
                    Some(next) => from = next,
                    None => break,
                }
            }
        }
        Ok(rows)
    }
}

/// A step of a database's scan of one fragment: its rows and where the
/// next step starts (`None`: the fragment is done).
pub(crate) struct ScanStep {
    pub(crate) rows: Vec<batch::Row>,
    pub(crate) next: Option<RowRef>,
}

impl Tc {
    /// One step of a scan of fragment number `fragment` of `table` for the
    /// holder of `grant`, from row position `from`: at most `limit` rows,
    /// those `reader` holds as it left them, every other as committed
    /// (every row, if `None`), never waiting for a writer. Admitted as one read; each
    /// row past the first is charged a read unit that the database's next
    /// reads pay (as a large row's are). A live row keeps its position on
    /// this node, so a scan resumed from `next` finds every row that was
    /// there throughout.
    pub(crate) async fn scan_step(
        &self,
        grant: &Grant,
        reader: Option<&Transaction>,
        table: &Arc<Table>,
        fragment: usize,
        from: RowRef,
        limit: usize,
    ) -> Result<ScanStep, TcError> {
        self.serving()?;
        let gone = || TcError::Operation {
            index: 0,
            error: OperationError::NoSuchTable {
                table: table.name().to_string(),
            },
        };
        let place = *table.fragments.get(fragment).ok_or_else(gone)?;
        let admitted = self.admit_scan(grant, table).await?;
        let started = std::time::Instant::now();
        let no_filter: Arc<[Predicate]> = Arc::new([]);
        let limit = limit.clamp(1, MAX_SCAN_LIMIT);
        let chunk = (self.inner.workers)
            .scan(
                table.id,
                place,
                Transaction::reader_id(reader),
                from,
                &no_filter,
                limit,
            )
            .await?
            .ok_or_else(gone)?;
        let rows: Vec<batch::Row> = (chunk.rows.iter())
            .map(|&(start, len)| {
                batch::Row::decode(table, &chunk.out[start as usize..(start + len) as usize])
            })
            .collect();
        admitted.owe_reads(rows.len().saturating_sub(1) as u64);
        self.finished(&admitted.db, started);
        Ok(ScanStep {
            rows,
            next: chunk.next,
        })
    }
}

impl Tc {
    /// Admits a step of a scan of a table as one read, charged to the
    /// table and its database.
    pub(crate) async fn admit_scan(
        &self,
        grant: &Grant,
        table: &Table,
    ) -> Result<Admitted, TcError> {
        let one_read = Cost {
            reads: 1,
            write_units: 0,
            grows: false,
            locks: false,
        };
        match self.admit_to(grant, &table.database, 1, one_read, false) {
            Ok(mut admitted) => {
                table.units.add(1, 0);
                admitted.scanned = Some(Arc::clone(&table.units));
                Ok(admitted)
            }
            Err(refused) => {
                hold_rate_refusal(&refused).await;
                Err(refused)
            }
        }
    }
}

impl Admitted {
    /// Charges `units` more reads than the request was admitted for (rows
    /// a scan examined past its first): counted now, paid by the
    /// database's next reads.
    pub(crate) fn owe_reads(&self, units: u64) {
        let gov = &self.db.governance;
        Counters::add(&gov.counters.read_units, units);
        gov.owe_reads(units);
        if let Some(table) = &self.scanned {
            table.add(units, 0);
        }
    }
}

/// Reads one of a database's counters.
pub(crate) fn counter(c: &std::sync::atomic::AtomicU64) -> u64 {
    Counters::get(c)
}

/// A request past every check, in flight until dropped.
pub(crate) struct Admitted {
    db: Arc<Database>,
    /// The table a scan reads, charged its rows too.
    scanned: Option<Arc<TableUnits>>,
    cost: Cost,
    /// Counted in flight (the database has a limit on that).
    counted: bool,
    _writing: Option<WriteInFlight>,
}

/// A write admitted and not yet answered, counted on its database.
pub(crate) struct WriteInFlight(Arc<Database>);

impl WriteInFlight {
    fn new(db: &Arc<Database>) -> WriteInFlight {
        db.writes_in_flight.fetch_add(1, Ordering::SeqCst);
        WriteInFlight(Arc::clone(db))
    }
}

impl Drop for WriteInFlight {
    fn drop(&mut self) {
        self.0.writes_in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if self.counted {
            self.db.governance.leave();
        }
    }
}

/// Takes `units` from a database's read or write limiter, counting a
/// throttle or a rejection.
fn charge(
    db: &Database,
    limiter: Option<&Limiter<DatabaseId>>,
    kind: RateKind,
    units: u64,
) -> Result<(), TcError> {
    let Some(limiter) = limiter else {
        return Ok(());
    };
    let counters = &db.governance.counters;
    match limiter.check(&db.id, units) {
        Ok(()) => Ok(()),
        Err(Throttled::RetryAfter(wait)) => Err(throttled(db, limiter, kind, wait)),
        Err(Throttled::ExceedsBurst) => {
            Counters::add(&counters.quota_rejections, 1);
            Err(TcError::Quota(QuotaError::ExceedsBurst {
                database: db.name.to_string(),
                kind,
                units,
                burst: limiter.burst(),
            }))
        }
    }
}

/// The refusal of a request over the database's rate of `kind`, which
/// `wait` would let through.
fn throttled(
    db: &Database,
    limiter: &Limiter<DatabaseId>,
    kind: RateKind,
    wait: std::time::Duration,
) -> TcError {
    let counters = &db.governance.counters;
    Counters::add(
        match kind {
            RateKind::Read => &counters.throttled_reads,
            RateKind::Write => &counters.throttled_writes,
        },
        1,
    );
    TcError::Quota(QuotaError::Rate {
        database: db.name.to_string(),
        kind,
        limit: limiter.rate(),
        retry_after_ms: (wait.as_micros().div_ceil(1000) as u64).max(1),
    })
}

/// Refuses a request that can grow memory when the database, or its tenant,
/// already holds its memory quota. (The workers also refuse any page past
/// the quota, so the quota holds exactly; this refuses early, before any
/// work.) No column lives on disk yet, so no request grows disk.
fn check_memory(db: &Database) -> Result<(), QuotaError> {
    let at_limit = |account: &MemoryAccount| account.limit().is_some_and(|l| account.bytes() >= l);
    let tenant_at_limit = db.tenant.as_ref().is_some_and(|t| at_limit(&t.memory));
    if at_limit(&db.memory) || tenant_at_limit {
        return Err(memory_quota_error(db));
    }
    Ok(())
}
