//! The node: its catalog, DDL, API keys, checkpoints and recovery, wired
//! around its transaction coordinator. An [`Engine`] is what the front ends
//! hold: they find tables here and run every operation through
//! [`Engine::tc`].
//!
//! - `catalog`: tenants, databases and tables by name.
//! - `catalog_file`: the catalog as it is saved, with quotas and keys.
//! - `keys`: tenant API keys and how they are checked.
//! - `checkpoint`: fragment images taken while writes go on.
//! - `recovery`: catalog, newest checkpoint, redo tail — at start.
//! - `durable`: an engine on a data directory: recovered, then logging.
//! - `ndbinfo`, `stats`: live state as tables and as counters.

pub(crate) mod catalog;
pub(crate) mod catalog_file;
pub(crate) mod checkpoint;
pub(crate) mod durable;
pub(crate) mod keys;
pub(crate) mod ndbinfo;
pub(crate) mod recovery;
pub mod stats;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use shoal_quota::Quota;
use shoal_quota::limiter::LimiterClock;
use shoal_wire::schema::{DatabaseName, IndexDef, TableDef, TenantId};
use tokio::sync::Mutex;

use self::catalog::{Catalog, CatalogError};
use self::catalog_file::{CatalogFile, CatalogStore};
use self::keys::{ApiKeys, KeyDef};
use crate::ldm::{FragmentImage, NodeFailed, Workers};
use crate::log::ChangeLog;
use crate::log::redo::RedoLog;
use crate::storage::OpError;
use crate::storage::layout::Layout;
use crate::storage::page::DataMemory;
use crate::tc::{Database, RangeScan, Table, Tc, Tenant};
use crate::types::value::Value;
use crate::types::{DatabaseId, TableId};
pub use shoal_wire::internal::NodeId;

/// How to size an engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub node_id: NodeId,
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
    /// How long an LDM worker spins for its next work before it sleeps,
    /// when its work comes that close together (zero: never).
    pub spin: Duration,
}

/// A new secret for keying hash indexes.
pub(crate) fn random_seed() -> std::io::Result<u64> {
    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(u64::from_le_bytes(seed))
}

/// How long a write waits for a row by default (RonDB's
/// TransactionDeadlockDetectionTimeout).
pub const DEFAULT_LOCK_WAIT_TIMEOUT: Duration = Duration::from_millis(1200);

/// Rows an index build puts into the index per step on a worker: about a
/// millisecond of the worker's time between its other work.
const INDEX_BUILD_STEP: usize = 1024;
/// Most LDM worker threads.
pub(crate) const MAX_LDM_THREADS: usize = 256;

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
    node_id: NodeId,
    tc: Tc,
    catalog: RwLock<Catalog>,
    /// Counts the catalog's changes (`catalog_version`).
    catalog_version: std::sync::atomic::AtomicU64,
    /// Schema changes run one at a time; the catalog lock is never held
    /// across a wait for the workers.
    ddl: Mutex<()>,
    fragments_per_table: u16,
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
        Engine::start_with_clock(config, LimiterClock::monotonic())
    }

    /// `start`, with the coordinator's rate limiters keeping time by `clock`.
    pub(crate) fn start_with_clock(
        config: EngineConfig,
        clock: LimiterClock,
    ) -> std::io::Result<Engine> {
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
        let seed = match config.seed {
            Some(seed) => seed,
            None => random_seed()?,
        };
        let workers = Workers::start(
            config.ldm_threads,
            config.data_memory,
            Arc::new(ChangeLog::default()),
            config.lock_wait_timeout,
            config.spin,
        )?;
        Ok(Engine {
            inner: Arc::new(Inner {
                node_id: config.node_id,
                tc: Tc::with_clock(workers, seed, clock),
                catalog: RwLock::new(Catalog::default()),
                catalog_version: std::sync::atomic::AtomicU64::new(0),
                ddl: Mutex::new(()),
                fragments_per_table: fragments,
                catalog_store: ArcSwapOption::empty(),
                saving: std::sync::Mutex::new(()),
                api_keys: ApiKeys::default(),
            }),
        })
    }

    pub fn node_id(&self) -> NodeId {
        self.inner.node_id
    }

    /// The transaction coordinator: the only way to run operations.
    pub fn tc(&self) -> &Tc {
        &self.inner.tc
    }

    fn workers(&self) -> &Workers {
        self.inner.tc.workers()
    }

    pub fn data_memory(&self) -> &DataMemory {
        self.workers().data_memory()
    }

    pub fn ldm_threads(&self) -> usize {
        self.workers().count()
    }

    fn catalog(&self) -> std::sync::RwLockReadGuard<'_, Catalog> {
        self.inner.catalog.read().unwrap_or_else(|e| e.into_inner())
    }

    fn catalog_mut(&self) -> std::sync::RwLockWriteGuard<'_, Catalog> {
        let catalog = (self.inner.catalog.write()).unwrap_or_else(|e| e.into_inner());
        // Counted once the lock is held: whoever reads the count after
        // this finds the catalog as this change leaves it.
        (self.inner.catalog_version).fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        catalog
    }

    /// A count of the catalog's changes so far: while it stays the same,
    /// every table and database looked up since is the catalog's still.
    pub(crate) fn catalog_version(&self) -> u64 {
        (self.inner.catalog_version).load(std::sync::atomic::Ordering::SeqCst)
    }

    /// From now on, the catalog is saved to `store` after every change.
    pub(crate) fn keep_catalog(&self, store: CatalogStore) {
        self.inner.catalog_store.store(Some(Arc::new(store)));
    }

    /// Saves the catalog as it is now, if it is kept — on a blocking
    /// thread: a save syncs a file, and DDL may be asked for by a
    /// connection served on an LDM worker's thread, which must not wait for
    /// a disk.
    pub(crate) async fn save_catalog(&self) -> Result<(), CatalogError> {
        if self.inner.catalog_store.load().is_none() {
            return Ok(());
        }
        let engine = self.clone();
        tokio::task::spawn_blocking(move || engine.save_catalog_now())
            .await
            .map_err(|e| CatalogError::NotDurable(e.to_string()))?
    }

    fn save_catalog_now(&self) -> Result<(), CatalogError> {
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
    pub async fn put_api_key(&self, def: KeyDef) -> Result<(), CatalogError> {
        self.inner.api_keys.put(def)?;
        self.save_catalog().await
    }

    /// Removes an API key, durably; it stops working at once. Whether it was there.
    pub async fn remove_api_key(&self, prefix: &str) -> Result<bool, CatalogError> {
        let removed = self.inner.api_keys.remove(prefix);
        if removed {
            self.save_catalog().await?;
        }
        Ok(removed)
    }

    /// Creates a database, in `tenant` if given.
    pub async fn create_database(
        &self,
        name: &DatabaseName,
        tenant: Option<&TenantId>,
    ) -> Result<Arc<Database>, CatalogError> {
        self.create_replicated_database(name, tenant, None).await
    }

    /// Creates a database whose fragments have their primary on node
    /// `primary` of this node's group (this node when `None`).
    pub async fn create_replicated_database(
        &self,
        name: &DatabaseName,
        tenant: Option<&TenantId>,
        primary: Option<NodeId>,
    ) -> Result<Arc<Database>, CatalogError> {
        let _ddl = self.inner.ddl.lock().await;
        let db = self.catalog_mut().create_database(name, tenant)?;
        self.place_primary(&db, primary.map(|p| p.0));
        self.save_catalog().await?;
        Ok(db)
    }

    /// Makes `primary` (0 or none: this node) the primary of `db`.
    fn place_primary(&self, db: &Database, primary: Option<u32>) {
        let me = self.node_id().0;
        let primary = primary.filter(|&p| p != 0).unwrap_or(me);
        db.set_preferred_primary(primary);
        db.set_primary(primary, primary == me);
    }

    /// Drops a database and every table in it, giving their pages back.
    pub async fn drop_database(&self, name: &str) -> Result<(), CatalogError> {
        let _ddl = self.inner.ddl.lock().await;
        let (_, tables) = self.catalog_mut().remove_database(name)?;
        for table in tables {
            self.workers()
                .drop_fragments(table.id, &table.fragments)
                .await?;
        }
        self.save_catalog().await
    }

    /// Creates a table with its fragments on the workers.
    pub async fn create_table(
        &self,
        database: &DatabaseName,
        def: TableDef,
    ) -> Result<Arc<Table>, CatalogError> {
        crate::storage::codec::check_defaults(&def)?;
        let _ddl = self.inner.ddl.lock().await;
        let (db, id) = {
            let mut catalog = self.catalog_mut();
            let db = catalog.check_new_table(database, &def)?;
            (db, catalog.next_table_id())
        };
        let table = self
            .build_table(db, id, self.inner.fragments_per_table, def)
            .await?;
        // Only now may operations find it.
        if !self.catalog_mut().add_table(Arc::clone(&table)) {
            self.workers()
                .drop_fragments(table.id, &table.fragments)
                .await?;
            return Err(CatalogError::NoSuchDatabase(database.to_string()));
        }
        self.save_catalog().await?;
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
    ) -> Result<Arc<Table>, NodeFailed> {
        let layout = Arc::new(Layout::new(def));
        let places = self
            .workers()
            .create_fragments(id, fragments, &layout, &db.memory)
            .await?;
        Ok(Arc::new(Table {
            id,
            database: db,
            layout,
            fragments: places,
            units: Default::default(),
            auto_increment: Default::default(),
        }))
    }

    /// Builds the catalog of a node that restarts: its tenants, databases
    /// and (empty) tables. Quotas come last (`restore_quotas`).
    pub(crate) async fn restore_catalog(&self, file: &CatalogFile) -> Result<(), String> {
        let _ddl = self.inner.ddl.lock().await;
        {
            let mut catalog = self.catalog_mut();
            catalog.set_next_ids(file.next_database_id, file.next_table_id);
            for tenant in &file.tenants {
                catalog.tenant_or_new(&tenant.id);
            }
            for entry in &file.databases {
                let db =
                    catalog.add_database(DatabaseId(entry.id), &entry.name, entry.tenant.as_ref());
                self.place_primary(&db, entry.primary);
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
                .await
                .map_err(|e| e.to_string())?;
            self.catalog_mut().add_table(table);
        }
        Ok(())
    }

    /// Applies the quotas a restarting node's catalog file has.
    pub(crate) fn restore_quotas(&self, file: &CatalogFile) -> Result<(), CatalogError> {
        for entry in &file.tenants {
            Tc::apply_tenant_quota(&self.tenant_or_new(&entry.id), entry.quota);
        }
        for entry in &file.databases {
            let db = self.database(entry.name.as_str())?;
            self.tc().apply_database_quota(&db, entry.quota);
        }
        Ok(())
    }

    /// Sets a database's quota, durably; its next request is judged by it.
    pub async fn set_database_quota(
        &self,
        database: &str,
        quota: Quota,
    ) -> Result<Arc<Database>, CatalogError> {
        let db = self.database(database)?;
        self.tc().apply_database_quota(&db, quota);
        self.save_catalog().await?;
        Ok(db)
    }

    /// Sets a tenant's quota, durably: its memory limit bounds its
    /// databases together.
    pub async fn set_tenant_quota(
        &self,
        tenant: &TenantId,
        quota: Quota,
    ) -> Result<(), CatalogError> {
        Tc::apply_tenant_quota(&self.tenant_or_new(tenant), quota);
        self.save_catalog().await
    }

    /// An image of fragment `fragment` of `table`, and where replay must
    /// start to bring it up to date; `None` if the table is gone.
    pub(crate) async fn image(
        &self,
        table: &Table,
        fragment: u16,
    ) -> Result<Option<FragmentImage>, NodeFailed> {
        let place = table.fragments[fragment as usize];
        self.workers().image(table.id, place).await
    }

    /// Replaces fragment `fragment` of `table` with an image of it.
    pub(crate) async fn restore_image(
        &self,
        table: &Table,
        fragment: u16,
        image: Vec<u8>,
    ) -> Result<(), String> {
        let place = table.fragments[fragment as usize];
        self.workers().restore_image(table.id, place, image).await
    }

    /// Drops a table, giving all its pages back to the pool.
    /// Adds ordered index `index` to a table and builds it while the table
    /// serves: its fragments a step at a time, between their other work.
    /// The index is scanned only once every fragment has built it; if a
    /// fragment cannot have the pages, the index goes again and nothing of
    /// it stays.
    pub async fn add_index(
        &self,
        database: &str,
        table: &str,
        index: IndexDef,
    ) -> Result<Arc<Table>, CatalogError> {
        let _ddl = self.inner.ddl.lock().await;
        let old = self.table(database, table)?;
        let mut def = old.def().clone();
        if def
            .indexes
            .iter()
            .any(|i| i.name.as_str().eq_ignore_ascii_case(index.name.as_str()))
        {
            return Err(CatalogError::IndexExists {
                table: table.to_owned(),
                index: index.name.to_string(),
            });
        }
        def.indexes.push(index);
        def.validate()?;
        let layout = Arc::new(Layout::new(def));
        let name: Arc<str> = layout
            .ordered
            .last()
            .expect("the new index")
            .name
            .as_str()
            .into();
        let workers = self.workers();
        workers.add_index(old.id, &old.fragments, &layout).await?;
        for &place in &old.fragments {
            loop {
                match workers
                    .build_index(old.id, place, &name, INDEX_BUILD_STEP)
                    .await?
                {
                    // The table was dropped meanwhile.
                    None => {
                        return Err(CatalogError::NoSuchTable {
                            database: database.to_owned(),
                            table: table.to_owned(),
                        });
                    }
                    Some(Ok(true)) => break,
                    Some(Ok(false)) => {}
                    Some(Err(e)) => {
                        workers
                            .drop_index(old.id, &old.fragments, &name, &old.layout)
                            .await?;
                        return Err(CatalogError::IndexNotBuilt {
                            table: table.to_owned(),
                            index: name.to_string(),
                            quota: e == OpError::MemoryQuota,
                        });
                    }
                }
            }
        }
        let unique = layout.ordered.last().is_some_and(|o| o.unique);
        let table = old.with_layout(layout);
        // Only now may scans find it, and writes be checked against it.
        self.catalog_mut().replace_table(Arc::clone(&table));
        if unique {
            // Writes made while it was built were not checked: its rows are,
            // now that every write is.
            let refused = match self.first_duplicate(&table, &name).await {
                Ok(None) => None,
                Ok(Some(values)) => Some(CatalogError::UniqueDuplicates {
                    table: table.name().to_string(),
                    index: name.to_string(),
                    entry: crate::tc::batch::duplicate_entry(&values),
                }),
                Err(reason) => Some(CatalogError::IndexNotChecked {
                    index: name.to_string(),
                    reason,
                }),
            };
            if let Some(refused) = refused {
                self.catalog_mut().replace_table(Arc::clone(&old));
                workers
                    .drop_index(old.id, &old.fragments, &name, &old.layout)
                    .await?;
                return Err(refused);
            }
        }
        self.save_catalog().await?;
        Ok(table)
    }

    /// The first values (none NULL) of the columns of unique index `index`
    /// that two rows of `table` share, if any: its entries read in order.
    async fn first_duplicate(
        &self,
        table: &Arc<Table>,
        index: &str,
    ) -> Result<Option<Vec<Value>>, String> {
        let layout = &table.layout;
        let i = layout.ordered_index(index).expect("the index just added");
        let columns = &layout.ordered[i].order[..layout.ordered[i].columns];
        let (mut after, mut last): (Option<Vec<Value>>, Option<Vec<Value>>) = (None, None);
        loop {
            let scan = RangeScan {
                index: Some(index),
                lower: None,
                upper: None,
                after: after.as_deref(),
                limit: 1000,
                max_bytes: 4 << 20,
                columns: None,
            };
            let page = (self.tc().scan_range_housekeeping(table, scan).await)
                .map_err(|e| e.to_string())?;
            for row in &page.rows {
                let values: Vec<Value> = columns
                    .iter()
                    .map(|&c| row.values()[c as usize].clone())
                    .collect();
                if !values.contains(&Value::Null) && last.as_ref() == Some(&values) {
                    return Ok(Some(values));
                }
                last = Some(values);
            }
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(None),
            }
        }
    }

    /// Drops ordered index `index` of a table: scans no longer find it,
    /// then its fragments give its pages back.
    pub async fn drop_index(
        &self,
        database: &str,
        table: &str,
        index: &str,
    ) -> Result<Arc<Table>, CatalogError> {
        let _ddl = self.inner.ddl.lock().await;
        let old = self.table(database, table)?;
        let mut def = old.def().clone();
        let no_such = || CatalogError::NoSuchIndex {
            table: table.to_owned(),
            index: index.chars().take(64).collect(),
        };
        let at = (def.indexes.iter())
            .position(|i| i.name.as_str() == index)
            .ok_or_else(no_such)?;
        def.indexes.remove(at);
        let layout = Arc::new(Layout::new(def));
        let table = old.with_layout(Arc::clone(&layout));
        self.catalog_mut().replace_table(Arc::clone(&table));
        let name: Arc<str> = index.into();
        self.workers()
            .drop_index(old.id, &old.fragments, &name, &layout)
            .await?;
        self.save_catalog().await?;
        Ok(table)
    }

    pub async fn drop_table(&self, database: &str, table: &str) -> Result<(), CatalogError> {
        let _ddl = self.inner.ddl.lock().await;
        let table = self.catalog_mut().remove_table(database, table)?;
        self.workers()
            .drop_fragments(table.id, &table.fragments)
            .await?;
        self.save_catalog().await
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

    /// From now on, every committed change is logged to `log`.
    pub(crate) async fn attach_log(&self, log: Arc<RedoLog>) -> Result<(), NodeFailed> {
        self.workers().log().attach(log);
        self.workers().adopt_log().await
    }

    /// Whether the node serves: not when an LDM worker has panicked, nor
    /// when the redo log has failed (then it serves no writes).
    pub fn health(&self) -> Result<(), String> {
        if let Some(failed) = self.tc().failure() {
            return Err(failed.to_string());
        }
        if let Some(why) = self.tc().not_serving() {
            return Err(format!("not serving: {why}"));
        }
        match self.workers().log().failure() {
            Some(failed) => Err(failed.to_string()),
            None => Ok(()),
        }
    }

    /// The redo log, once attached.
    pub fn log(&self) -> Option<Arc<RedoLog>> {
        self.workers().log().redo()
    }

    /// Every fragment's memory, with table and database names, from live
    /// state. With `audit`, each worker first recounts its fragments from the
    /// pages and panics on a mismatch: for tests.
    async fn fragment_usage(&self, audit: bool) -> Result<Vec<FragmentUsage>, NodeFailed> {
        let reports = self.workers().memory(audit).await?;
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
        Ok(usage)
    }

    /// Every fragment's memory, from live state.
    pub async fn memory_usage(&self) -> Result<Vec<FragmentUsage>, NodeFailed> {
        self.fragment_usage(false).await
    }
}

impl Engine {
    #[cfg(test)]
    pub(crate) async fn audit(&self) -> Vec<FragmentUsage> {
        self.fragment_usage(true).await.expect("workers answer")
    }

    /// Transactions holding rows and jobs parked, over all workers.
    #[cfg(test)]
    pub(crate) async fn inspect(&self) -> (usize, usize) {
        self.workers().inspect().await
    }
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod model_tests;

#[cfg(test)]
mod durable_tests;

#[cfg(test)]
mod scan_tests;
#[cfg(test)]
mod tc_tests;
