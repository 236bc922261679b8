//! The handles of what operations address: tenants, databases and tables,
//! each with what the coordinator checks and the workers need. The catalog
//! (`node::catalog`) makes them and finds them by name.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use arc_swap::ArcSwap;
use shoal_quota::Quota;
use shoal_wire::schema::{DatabaseName, TableDef, TableName, TenantId};

use super::governance::Governance;
use crate::ldm::FragmentPlace;
use crate::storage::layout::{Layout, OrderedLayout};
use crate::storage::page::MemoryAccount;
use crate::types::{DatabaseId, TableId};

/// A tenant: its databases' memory together, and its quota.
#[derive(Debug)]
pub struct Tenant {
    pub id: TenantId,
    pub(crate) memory: Arc<MemoryAccount>,
    pub(crate) quota: ArcSwap<Quota>,
}

impl Tenant {
    /// DataMemory its databases on this node hold, in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory.bytes()
    }

    pub fn quota(&self) -> Quota {
        **self.quota.load()
    }
}

/// A database: its memory, its limits and what it has used.
#[derive(Debug)]
pub struct Database {
    pub id: DatabaseId,
    pub name: DatabaseName,
    pub tenant: Option<Arc<Tenant>>,
    pub(crate) memory: Arc<MemoryAccount>,
    pub(crate) governance: Governance,
    /// The node of its group chosen to be the primary of its fragments
    /// (0: a node alone); the node that is now (another while that one is
    /// away), and whether that is this node.
    preferred: AtomicU32,
    primary: AtomicU32,
    primary_here: AtomicBool,
    /// This node is its primary and is handing it on: writes wait.
    handing_on: AtomicBool,
    /// Writes admitted here and not yet answered.
    pub(crate) writes_in_flight: AtomicU64,
}

impl Database {
    /// The node that is the primary of its fragments.
    pub fn primary(&self) -> u32 {
        self.primary.load(Ordering::Acquire)
    }

    /// Whether this node is its primary: it takes writes, and sends them on
    /// to the backups.
    pub fn is_primary_here(&self) -> bool {
        self.primary_here.load(Ordering::SeqCst)
    }

    /// Writes admitted and not yet answered.
    pub(crate) fn writes_in_flight(&self) -> u64 {
        self.writes_in_flight.load(Ordering::SeqCst)
    }

    /// The node of its group chosen to be its primary.
    pub fn preferred_primary(&self) -> u32 {
        self.preferred.load(Ordering::Acquire)
    }

    pub(crate) fn set_preferred_primary(&self, node: u32) {
        self.preferred.store(node, Ordering::Release);
    }

    /// Makes `primary` its primary, which is this node when `here`.
    pub(crate) fn set_primary(&self, primary: u32, here: bool) {
        self.primary.store(primary, Ordering::Release);
        self.primary_here.store(here, Ordering::SeqCst);
    }

    /// Whether this node is handing its primary on (back to the node it
    /// prefers, or away at a stop): a write waits for the view after.
    pub fn is_handing_on(&self) -> bool {
        self.handing_on.load(Ordering::SeqCst)
    }

    /// `set_primary`, and whether this node is handing it on, in an order
    /// that never shows a write "not here, and not being handed on" for a
    /// primary that is still this node.
    pub(crate) fn set_placement(&self, primary: u32, here: bool, handing_on: bool) {
        if handing_on {
            self.handing_on.store(true, Ordering::SeqCst);
            self.set_primary(primary, here);
        } else {
            self.set_primary(primary, here);
            self.handing_on.store(false, Ordering::SeqCst);
        }
    }

    /// DataMemory its fragments hold, in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory.bytes()
    }

    pub fn quota(&self) -> Quota {
        self.governance.quota()
    }
}

/// A table as the edge sees it: enough to encode operations for it and to
/// route them to its fragments.
#[derive(Debug)]
pub struct Table {
    pub id: TableId,
    pub database: Arc<Database>,
    pub(crate) layout: Arc<Layout>,
    /// Where each fragment lives, by fragment number.
    pub(crate) fragments: Vec<FragmentPlace>,
    /// What requests used of it since it was made here (the same through
    /// every change of its indexes).
    pub(crate) units: Arc<TableUnits>,
    /// The next value of its AUTO_INCREMENT column, if it has one.
    pub(crate) auto_increment: Arc<AutoIncrement>,
}

/// The next value of a table's AUTO_INCREMENT column, counted by the node
/// that takes its writes. It is not stored: the first time a node needs
/// it, it is found as one past the largest value the table holds (every
/// acknowledged row, after a restart or a failover alike), then counted up
/// in memory, and pushed past every value a row is given explicitly.
#[derive(Debug, Default)]
pub(crate) struct AutoIncrement {
    next: tokio::sync::OnceCell<AtomicU64>,
}

impl AutoIncrement {
    /// Takes `n` values in a row, answering the first; `largest` finds the
    /// largest value stored (0: none) the first time.
    pub(crate) async fn take<E, F>(&self, n: u64, largest: F) -> Result<u64, E>
    where
        F: std::future::Future<Output = Result<u64, E>>,
    {
        let next = self
            .next
            .get_or_try_init(|| async { Ok(AtomicU64::new(largest.await?.saturating_add(1))) })
            .await?;
        Ok(next.fetch_add(n, Ordering::Relaxed))
    }

    /// A row was given `value` explicitly: later values are past it.
    pub(crate) fn saw(&self, value: u64) {
        if let Some(next) = self.next.get() {
            next.fetch_max(value.saturating_add(1), Ordering::Relaxed);
        }
    }
}

/// The read and write units requests used of one table since the node made
/// it: its share of its database's counters (`Counters`), the same rules.
#[derive(Debug, Default)]
pub(crate) struct TableUnits {
    pub(crate) read_units: AtomicU64,
    pub(crate) write_units: AtomicU64,
}

impl TableUnits {
    pub(crate) fn add(&self, reads: u64, writes: u64) {
        if reads > 0 {
            self.read_units.fetch_add(reads, Ordering::Relaxed);
        }
        if writes > 0 {
            self.write_units.fetch_add(writes, Ordering::Relaxed);
        }
    }
}

impl Table {
    pub fn def(&self) -> &TableDef {
        &self.layout.def
    }

    pub fn name(&self) -> &TableName {
        &self.layout.def.name
    }

    /// The same table with `layout`: its indexes changed, its rows not.
    pub(crate) fn with_layout(&self, layout: Arc<Layout>) -> Arc<Table> {
        Arc::new(Table {
            id: self.id,
            database: Arc::clone(&self.database),
            layout,
            fragments: self.fragments.clone(),
            units: Arc::clone(&self.units),
            auto_increment: Arc::clone(&self.auto_increment),
        })
    }

    /// The ordered index with this name (`PRIMARY`: the primary key's).
    pub(crate) fn index_order(&self, name: &str) -> Option<&OrderedLayout> {
        let i = self.layout.ordered_index(name)?;
        Some(&self.layout.ordered[i])
    }

    pub fn fragments(&self) -> u16 {
        self.fragments.len() as u16
    }
}

/// Two handles are equal when they name the same table.
impl PartialEq for Table {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Tenant {
    /// A tenant without limits.
    pub(crate) fn new(id: TenantId) -> Tenant {
        Tenant {
            id,
            memory: Arc::new(MemoryAccount::default()),
            quota: ArcSwap::from_pointee(Quota::UNLIMITED),
        }
    }
}

impl Database {
    /// A database without limits, in `tenant` if given.
    pub(crate) fn new(id: DatabaseId, name: DatabaseName, tenant: Option<Arc<Tenant>>) -> Database {
        let memory = Arc::new(MemoryAccount::new(
            tenant.as_ref().map(|t| Arc::clone(&t.memory)),
        ));
        Database {
            id,
            name,
            tenant,
            memory,
            governance: Governance::default(),
            preferred: AtomicU32::new(0),
            primary: AtomicU32::new(0),
            primary_here: AtomicBool::new(true),
            handing_on: AtomicBool::new(false),
            writes_in_flight: AtomicU64::new(0),
        }
    }
}
