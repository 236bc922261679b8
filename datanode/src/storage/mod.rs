//! The storage engine of a data node: rows in DataMemory pages.
//!
//! - [`page`]: the DataMemory pool and the page handle.
//! - [`value`]: typed values, dates and decimals.
//! - [`layout`]: where each column lives in a stored row.
//! - [`codec`]: values to stored bytes and back, checked at the edge.
//! - [`fixed`], [`var`]: fixed-part and var-part pages of a fragment.
//! - [`index`]: the primary-key hash index of a fragment.
//! - [`fragment`]: a fragment's operations and its memory accounting.
//! - [`projection`]: the columns of rows a scan of an ordered index answers.
//! - [`image`]: a fragment's pages and bookkeeping as a checkpoint stores them.

pub(crate) mod codec;
pub(crate) mod fixed;
pub(crate) mod fragment;
pub(crate) mod image;
pub(crate) mod index;
pub(crate) mod layout;
pub(crate) mod ordered;
pub(crate) mod page;
pub(crate) mod projection;

pub(crate) mod var;

use std::cmp::Ordering;

use page::NoPage;
pub(crate) use page::OutOfDataMemory;

/// Why a page-level step failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StorageError {
    #[error(transparent)]
    OutOfDataMemory(#[from] OutOfDataMemory),
    #[error("the database's memory quota is reached")]
    QuotaReached,
    #[error("the fragment is full")]
    FragmentFull,
}

impl From<NoPage> for StorageError {
    fn from(e: NoPage) -> Self {
        match e {
            NoPage::OutOfDataMemory(e) => StorageError::OutOfDataMemory(e),
            NoPage::QuotaReached => StorageError::QuotaReached,
        }
    }
}

/// Why one operation on a fragment failed; nothing of it was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpError {
    DuplicateKey,
    NotFound,
    /// A write found no row to update and this `NOT NULL` column had no value.
    MissingColumn(u16),
    OutOfDataMemory,
    /// A page would pass the memory quota of the database or its tenant.
    MemoryQuota,
    FragmentFull,
    /// The table was dropped while the operation was on its way.
    NoSuchTable,
    /// Another transaction holds the row: wait for it (never reaches a client).
    Busy(fixed::RowRef),
    /// Waited longer than the lock-wait timeout for a row another
    /// transaction holds.
    LockWaitTimeout,
    /// The redo log has failed: the change cannot be made durable.
    DurabilityFailed,
    /// The write would give a second row the values of the table's unique
    /// ordered index at this position (the coordinator's finding, never a
    /// worker's).
    DuplicateUnique(u16),
}

/// How a scan filter compares a column with its operand. (The node's own
/// housekeeping compares with `Le`; the tests use every one.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    IsNull,
    IsNotNull,
}

impl CmpOp {
    fn holds(self, ord: Ordering) -> bool {
        match self {
            CmpOp::Eq => ord.is_eq(),
            CmpOp::Ne => ord.is_ne(),
            CmpOp::Lt => ord.is_lt(),
            CmpOp::Le => ord.is_le(),
            CmpOp::Gt => ord.is_gt(),
            CmpOp::Ge => ord.is_ge(),
            CmpOp::IsNull | CmpOp::IsNotNull => false,
        }
    }
}

/// One condition of a scan filter, its operand encoded as the column stores it.
#[derive(Debug, Clone)]
pub(crate) struct Predicate {
    pub(crate) column: u16,
    pub(crate) op: CmpOp,
    pub(crate) operand: Vec<u8>,
}
