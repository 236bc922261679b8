//! The engine of one data node: the DataMemory pool, the LDM workers that own
//! the fragments, and the catalog. Its API is what the transaction
//! coordinator and the front ends build on.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use arc_swap::ArcSwapOption;

use shoal_wire::schema::{DatabaseName, TableDef, TenantId};
use tokio::sync::{Mutex, oneshot};

use crate::batch::{Batch, OperationError, Row};
use crate::catalog::{Catalog, CatalogError, Database, DatabaseId, Table, TableId, Tenant};
use crate::keys::{ApiKeys, KeyDef};
use crate::ldm::{
    AUTOCOMMIT, FragmentPlace, FragmentReport, Job, JobOutcome, Ldm, Mode, Msg, OpBatch, TxnId,
};
use crate::persist::catalog::{CatalogFile, CatalogStore};
use crate::persist::redo::{LogFailed, Lsn, RedoLog};
use crate::storage::codec::{self, ValueError};
use crate::storage::fixed::RowRef;
use crate::storage::layout::Layout;
use crate::storage::page::DataMemory;
use crate::storage::value::Value;
use crate::storage::{CmpOp, Predicate};

/// How to size an engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub node_id: u32,
    /// Bytes of DataMemory, rounded down to whole pages.
    pub data_memory: u64,
    /// LDM worker threads.
    pub ldm_threads: usize,
    /// Fragments per table; by default twice the LDM threads.
    pub fragments_per_table: Option<u16>,
    /// The secret that keys the hash indexes; a new random one if none.
    /// Restored fragment images need the one they were made with.
    pub seed: Option<u64>,
    /// Longest a write waits for a row another transaction holds.
    pub lock_wait_timeout: Duration,
}

/// A new secret for keying hash indexes.
pub fn random_seed() -> std::io::Result<u64> {
    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(u64::from_le_bytes(seed))
}

/// How long a write waits for a row by default (RonDB's
/// TransactionDeadlockDetectionTimeout).
pub const DEFAULT_LOCK_WAIT_TIMEOUT: Duration = Duration::from_millis(1200);
/// Most rows one scan returns.
pub const MAX_SCAN_LIMIT: usize = 100_000;
/// Most LDM worker threads.
pub const MAX_LDM_THREADS: usize = 256;

/// LDM worker threads unless configured: half the cores, rounded up. The
/// other half is for what every operation also costs outside the workers —
/// the kernel's network stack, the REST front end's threads, the redo log's
/// writes — and for the hand-offs between workers that a worker per core
/// makes of half of all key lookups. On 2 cores one worker serves a durable
/// Redis SET with 25% less CPU than two, and faster (docs/benchmarks.md).
pub fn default_ldm_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.div_ceil(2).min(MAX_LDM_THREADS)
}

/// A cheap handle to a running engine; clones share it. The workers stop when
/// the last handle is dropped.
#[derive(Debug, Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    node_id: u32,
    pool: Arc<DataMemory>,
    ldms: Vec<Ldm>,
    catalog: RwLock<Catalog>,
    /// Schema changes run one at a time; the catalog lock is never held
    /// across a wait for the workers.
    ddl: Mutex<()>,
    fragments_per_table: u16,
    /// Keys the hash indexes; secret, so keys cannot be chosen to collide.
    seed: u64,
    /// Where committed changes go, once recovery is done (none for an engine
    /// that keeps nothing).
    log: ArcSwapOption<RedoLog>,
    /// Where the catalog is saved after every change (none for an engine
    /// that keeps nothing).
    catalog_store: ArcSwapOption<CatalogStore>,
    /// Saves happen one at a time, each of the catalog as it is then.
    saving: std::sync::Mutex<()>,
    /// Tenant API keys; saved with the catalog.
    api_keys: ApiKeys,
}

/// One fragment's memory, with the names of its table and database.
#[derive(Debug, Clone)]
pub struct FragmentUsage {
    pub table_id: TableId,
    pub database: String,
    pub table: String,
    pub fragment: u16,
    pub in_memory_bytes: u64,
    pub free_in_memory_bytes: u64,
    pub rows: u64,
}

impl Engine {
    /// Reserves DataMemory and starts the LDM workers.
    pub fn start(config: EngineConfig) -> std::io::Result<Engine> {
        let invalid = |msg: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, msg);
        if !(1..=MAX_LDM_THREADS).contains(&config.ldm_threads) {
            return Err(invalid(format!(
                "LDM threads must be 1 to {MAX_LDM_THREADS}"
            )));
        }
        let fragments = match config.fragments_per_table {
            Some(0) => return Err(invalid("a table needs at least one fragment".into())),
            Some(n) => n,
            None => (2 * config.ldm_threads) as u16,
        };
        let pool = DataMemory::new(config.data_memory)?;
        let seed = match config.seed {
            Some(seed) => seed,
            None => random_seed()?,
        };
        let ldms = (0..config.ldm_threads)
            .map(|n| Ldm::start(n, Arc::clone(&pool), config.lock_wait_timeout))
            .collect::<std::io::Result<_>>()?;
        Ok(Engine {
            inner: Arc::new(Inner {
                node_id: config.node_id,
                pool,
                ldms,
                catalog: RwLock::new(Catalog::default()),
                ddl: Mutex::new(()),
                fragments_per_table: fragments,
                seed,
                log: ArcSwapOption::empty(),
                catalog_store: ArcSwapOption::empty(),
                saving: std::sync::Mutex::new(()),
                api_keys: ApiKeys::default(),
            }),
        })
    }

    pub fn node_id(&self) -> u32 {
        self.inner.node_id
    }

    pub fn data_memory(&self) -> &DataMemory {
        &self.inner.pool
    }

    pub fn ldm_threads(&self) -> usize {
        self.inner.ldms.len()
    }

    fn catalog(&self) -> std::sync::RwLockReadGuard<'_, Catalog> {
        self.inner.catalog.read().unwrap_or_else(|e| e.into_inner())
    }

    fn catalog_mut(&self) -> std::sync::RwLockWriteGuard<'_, Catalog> {
        self.inner
            .catalog
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Sends one message to each of `ldms` and waits for every reply.
    async fn each<T>(
        &self,
        ldms: impl Iterator<Item = u16>,
        msg: impl Fn(usize, oneshot::Sender<T>) -> Msg,
    ) -> Vec<T> {
        let waits: Vec<_> = ldms
            .enumerate()
            .map(|(i, ldm)| self.ask(ldm as usize, |done| msg(i, done)))
            .collect();
        let mut replies = Vec::with_capacity(waits.len());
        for wait in waits {
            replies.push(wait.await.expect("LDM worker replies"));
        }
        replies
    }

    /// From now on, the catalog is saved to `store` after every change.
    pub fn keep_catalog(&self, store: CatalogStore) {
        self.inner.catalog_store.store(Some(Arc::new(store)));
    }

    /// Saves the catalog as it is now, if it is kept.
    pub(crate) fn save_catalog(&self) -> Result<(), CatalogError> {
        let Some(store) = self.inner.catalog_store.load_full() else {
            return Ok(());
        };
        let _one_at_a_time = self.inner.saving.lock().unwrap_or_else(|e| e.into_inner());
        let mut file = self.catalog().to_file();
        file.api_keys = self.inner.api_keys.defs();
        store
            .save(&file)
            .map_err(|e| CatalogError::NotDurable(e.to_string()))
    }

    /// The tenant API keys this node accepts.
    pub fn api_keys(&self) -> &ApiKeys {
        &self.inner.api_keys
    }

    /// Adds or replaces an API key, durably; a key it replaces stops working
    /// at once.
    pub fn put_api_key(&self, def: KeyDef) -> Result<(), CatalogError> {
        self.inner.api_keys.put(def)?;
        self.save_catalog()
    }

    /// Removes an API key, durably; it stops working at once. Whether it was there.
    pub fn remove_api_key(&self, prefix: &str) -> Result<bool, CatalogError> {
        let removed = self.inner.api_keys.remove(prefix);
        if removed {
            self.save_catalog()?;
        }
        Ok(removed)
    }

    /// Creates a database, in `tenant` if given.
    pub async fn create_database(
        &self,
        name: &DatabaseName,
        tenant: Option<&TenantId>,
    ) -> Result<Arc<Database>, CatalogError> {
        let _ddl = self.inner.ddl.lock().await;
        let db = self.catalog_mut().create_database(name, tenant)?;
        self.save_catalog()?;
        Ok(db)
    }

    /// Drops a database and every table in it, giving their pages back.
    pub async fn drop_database(&self, name: &str) -> Result<(), CatalogError> {
        let _ddl = self.inner.ddl.lock().await;
        let (_, tables) = self.catalog_mut().remove_database(name)?;
        for table in tables {
            self.drop_fragments(&table).await;
        }
        self.save_catalog()
    }

    /// Creates a table with its fragments on the workers.
    pub async fn create_table(
        &self,
        database: &DatabaseName,
        def: TableDef,
    ) -> Result<Arc<Table>, CatalogError> {
        let _ddl = self.inner.ddl.lock().await;
        let (db, id) = {
            let mut catalog = self.catalog_mut();
            let db = catalog.check_new_table(database, &def)?;
            (db, catalog.next_table_id())
        };
        let table = self
            .build_table(db, id, self.inner.fragments_per_table, def)
            .await;
        // Only now may operations find it.
        if !self.catalog_mut().add_table(Arc::clone(&table)) {
            self.drop_fragments(&table).await;
            return Err(CatalogError::NoSuchDatabase(database.to_string()));
        }
        self.save_catalog()?;
        Ok(table)
    }

    /// Creates a table's fragments on the workers, round the workers, each
    /// table starting one further on.
    async fn build_table(
        &self,
        db: Arc<Database>,
        id: TableId,
        fragments: u16,
        def: TableDef,
    ) -> Arc<Table> {
        let layout = Arc::new(Layout::new(def));
        let n = self.inner.ldms.len();
        let ldms: Vec<u16> = (0..fragments as usize)
            .map(|f| ((id.0 as usize + f) % n) as u16)
            .collect();
        let slots = self
            .each(ldms.iter().copied(), |fragment, done| Msg::CreateFragment {
                table: id,
                fragment: fragment as u16,
                layout: Arc::clone(&layout),
                account: Arc::clone(&db.memory),
                done,
            })
            .await;
        Arc::new(Table {
            id,
            database: db,
            layout,
            fragments: ldms
                .into_iter()
                .zip(slots)
                .map(|(ldm, slot)| FragmentPlace { ldm, slot })
                .collect(),
        })
    }

    /// Builds the catalog of a node that restarts: its tenants, databases
    /// and (empty) tables. Quotas are the coordinator's to apply.
    pub(crate) async fn restore_catalog(&self, file: &CatalogFile) -> Result<(), String> {
        let _ddl = self.inner.ddl.lock().await;
        {
            let mut catalog = self.catalog_mut();
            catalog.set_next_ids(file.next_database_id, file.next_table_id);
            for tenant in &file.tenants {
                catalog.tenant_or_new(&tenant.id);
            }
            for db in &file.databases {
                catalog.add_database(DatabaseId(db.id), &db.name, db.tenant.as_ref());
            }
        }
        for key in &file.api_keys {
            self.inner
                .api_keys
                .put(key.clone())
                .map_err(|e| format!("API key {} in the catalog: {e}", key.prefix))?;
        }
        for entry in &file.tables {
            entry
                .def
                .validate()
                .map_err(|e| format!("table {} in the catalog: {e}", entry.def.name))?;
            let db = self
                .catalog()
                .database(entry.database.as_str())
                .map_err(|e| e.to_string())?;
            let table = self
                .build_table(
                    db,
                    TableId(entry.id),
                    entry.fragments.max(1),
                    entry.def.clone(),
                )
                .await;
            self.catalog_mut().add_table(table);
        }
        Ok(())
    }

    /// An image of fragment `fragment` of `table`, and where replay must
    /// start to bring it up to date; `None` if the table is gone.
    pub(crate) async fn image(&self, table: &Table, fragment: u16) -> Option<(Vec<u8>, Lsn)> {
        let place = table.fragments[fragment as usize];
        self.ask(place.ldm as usize, |reply| Msg::Image {
            table: table.id,
            slot: place.slot,
            reply,
        })
        .await
        .expect("LDM worker replies")
    }

    /// Replaces fragment `fragment` of `table` with an image of it.
    pub(crate) async fn restore_image(
        &self,
        table: &Table,
        fragment: u16,
        image: Vec<u8>,
    ) -> Result<(), String> {
        let place = table.fragments[fragment as usize];
        self.ask(place.ldm as usize, |reply| Msg::Restore {
            table: table.id,
            slot: place.slot,
            image,
            reply,
        })
        .await
        .expect("LDM worker replies")
    }

    /// Drops a table, giving all its pages back to the pool.
    pub async fn drop_table(&self, database: &str, table: &str) -> Result<(), CatalogError> {
        let _ddl = self.inner.ddl.lock().await;
        let table = self.catalog_mut().remove_table(database, table)?;
        self.drop_fragments(&table).await;
        self.save_catalog()
    }

    async fn drop_fragments(&self, table: &Table) {
        let id = table.id;
        self.each(table.fragments.iter().map(|p| p.ldm), |f, done| {
            Msg::DropFragment {
                table: id,
                slot: table.fragments[f].slot,
                done,
            }
        })
        .await;
    }

    pub fn database(&self, name: &str) -> Result<Arc<Database>, CatalogError> {
        self.catalog().database(name)
    }

    pub fn table(&self, database: &str, table: &str) -> Result<Arc<Table>, CatalogError> {
        self.catalog().table(database, table)
    }

    /// Every database, in name order.
    pub fn databases(&self) -> Vec<Arc<Database>> {
        self.catalog().databases().cloned().collect()
    }

    /// Every table, in database and table name order.
    pub fn tables(&self) -> Vec<Arc<Table>> {
        self.catalog().tables().cloned().collect()
    }

    pub fn tenant(&self, id: &str) -> Result<Arc<Tenant>, CatalogError> {
        self.catalog().tenant(id)
    }

    /// The tenant with this id, known from now on if it was not.
    pub fn tenant_or_new(&self, id: &TenantId) -> Arc<Tenant> {
        self.catalog_mut().tenant_or_new(id)
    }

    /// Every tenant this node knows, in id order.
    pub fn tenants(&self) -> Vec<Arc<Tenant>> {
        self.catalog().tenants().cloned().collect()
    }

    /// An empty batch for this engine.
    pub fn batch(&self) -> Batch {
        Batch::new(self.inner.ldms.len(), self.inner.seed)
    }

    /// From now on, every committed change is logged to `log`.
    pub async fn attach_log(&self, log: Arc<RedoLog>) {
        self.inner.log.store(Some(Arc::clone(&log)));
        let all = 0..self.inner.ldms.len() as u16;
        self.each(all, |_, done| Msg::AttachLog {
            log: Arc::clone(&log),
            done,
        })
        .await;
    }

    /// The redo log, once attached.
    pub fn log(&self) -> Option<Arc<RedoLog>> {
        self.inner.log.load_full()
    }

    /// Waits until the log is durable up to `lsn`, if there is a log.
    pub(crate) async fn wait_durable(&self, lsn: Option<Lsn>) -> Result<(), LogFailed> {
        match (lsn, self.inner.log.load_full()) {
            (Some(lsn), Some(log)) => log.wait_durable(lsn).await,
            _ => Ok(()),
        }
    }

    /// Runs every operation of the batch on its worker, each on its own,
    /// without the transaction coordinator's checks, and returns once the
    /// changes are durable; read the outcomes with `Batch::result`.
    pub async fn execute(&self, batch: &mut Batch) -> Result<(), LogFailed> {
        let mut waits = Vec::new();
        for (n, ops) in batch.ldms.iter_mut().enumerate() {
            if ops.ops.is_empty() {
                continue;
            }
            waits.push((
                n,
                self.start_job(n, AUTOCOMMIT, Mode::Autocommit, std::mem::take(ops)),
            ));
        }
        for (n, wait) in waits {
            batch.ldms[n] = wait.await.expect("LDM worker replies").0;
        }
        if batch.ldms.iter().any(|b| b.durability_failed) {
            let log = self
                .inner
                .log
                .load_full()
                .expect("only a logged batch fails to log");
            return Err(log.failure().expect("a failed log says why"));
        }
        self.wait_durable(batch.ldms.iter().filter_map(|b| b.lsn).max())
            .await
    }

    /// Runs `task` on LDM worker `ldm`'s thread, beside the worker: what
    /// it asks of that worker's fragments is done without a thread hop.
    pub(crate) fn spawn_on_worker<F>(&self, ldm: usize, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.inner.ldms[ldm].spawn(task);
    }

    /// Sends a job to worker `ldm`; the answer comes on the receiver.
    pub(crate) fn start_job(
        &self,
        ldm: usize,
        txn: TxnId,
        mode: Mode,
        batch: OpBatch,
    ) -> oneshot::Receiver<(OpBatch, JobOutcome)> {
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

    /// Sends worker `ldm` the message `msg` makes around a reply channel;
    /// the reply comes on the receiver.
    fn ask<T>(
        &self,
        ldm: usize,
        msg: impl FnOnce(oneshot::Sender<T>) -> Msg,
    ) -> oneshot::Receiver<T> {
        let (reply, wait) = oneshot::channel();
        self.inner.ldms[ldm].send(msg(reply));
        wait
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

    /// Rows of `table` that pass every condition, at most `limit`, in no
    /// particular order. Each row is read committed; the scan as a whole is
    /// not a snapshot.
    pub async fn scan(
        &self,
        table: &Arc<Table>,
        filter: &[(&str, CmpOp, Value)],
        limit: usize,
    ) -> Result<Vec<Row>, OperationError> {
        let layout = &table.layout;
        let predicates = filter
            .iter()
            .map(|(name, op, value)| {
                let column = layout.column_index(name).ok_or_else(|| ValueError {
                    column: (*name).to_owned(),
                    problem: format!("table '{}' has no such column", table.name()),
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
        let limit = limit.min(MAX_SCAN_LIMIT);
        let mut rows = Vec::new();
        for place in &table.fragments {
            let mut from: RowRef = 0;
            while rows.len() < limit {
                let wait = self.ask(place.ldm as usize, |reply| Msg::Scan {
                    table: table.id,
                    slot: place.slot,
                    from,
                    filter: Arc::clone(&predicates),
                    limit: limit - rows.len(),
                    reply,
                });
                let chunk = wait.await.expect("LDM worker replies").ok_or_else(|| {
                    OperationError::NoSuchTable {
                        table: table.name().to_string(),
                    }
                })?;
                rows.extend(chunk.rows.iter().map(|&(start, len)| {
                    Row::decode(table, &chunk.out[start as usize..(start + len) as usize])
                }));
                match chunk.next {
                    Some(next) => from = next,
                    None => break,
                }
            }
        }
        Ok(rows)
    }

    /// Every fragment's memory, with table and database names, from live
    /// state. With `audit`, each worker first recounts its fragments from the
    /// pages and panics on a mismatch: for tests.
    pub(crate) async fn fragment_usage(&self, audit: bool) -> Vec<FragmentUsage> {
        let all = 0..self.inner.ldms.len() as u16;
        let reports: Vec<FragmentReport> = self
            .each(all, |_, reply| Msg::Memory { audit, reply })
            .await
            .into_iter()
            .flatten()
            .collect();
        let catalog = self.catalog();
        let names: rustc_hash::FxHashMap<TableId, &Arc<Table>> =
            catalog.tables().map(|t| (t.id, t)).collect();
        let mut usage: Vec<FragmentUsage> = reports
            .into_iter()
            .filter_map(|r| {
                // A table being created or dropped has fragments but no entry.
                let t = names.get(&r.table)?;
                Some(FragmentUsage {
                    table_id: r.table,
                    database: t.database.name.to_string(),
                    table: t.name().to_string(),
                    fragment: r.fragment,
                    in_memory_bytes: r.memory.in_memory_bytes(),
                    free_in_memory_bytes: r.memory.free_in_memory_bytes(),
                    rows: r.memory.rows,
                })
            })
            .collect();
        usage.sort_by_key(|u| (u.table_id, u.fragment));
        usage
    }

    /// Every fragment's memory, from live state.
    pub async fn memory_usage(&self) -> Vec<FragmentUsage> {
        self.fragment_usage(false).await
    }
}

impl Engine {
    #[cfg(test)]
    pub(crate) async fn audit(&self) -> Vec<FragmentUsage> {
        self.fragment_usage(true).await
    }

    /// Transactions holding rows and jobs parked, over all workers.
    #[cfg(test)]
    pub(crate) async fn inspect(&self) -> (usize, usize) {
        let all = 0..self.inner.ldms.len() as u16;
        let states = self.each(all, |_, reply| Msg::Inspect { reply }).await;
        states
            .into_iter()
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod model_tests;
