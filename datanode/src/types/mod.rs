//! The leaf every layer builds on: ids and column values.
//!
//! - [`value`]: typed column values, dates and decimals.

pub(crate) mod value;

use std::fmt;

/// A table's id on its data node; never reused while the node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableId(pub u32);

/// A database's id on its data node; never reused while the node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DatabaseId(pub u32);

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for DatabaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A transaction's id, unique on its data node.
pub(crate) type TxnId = u64;
/// The "transaction" of operations that stand alone.
pub(crate) const AUTOCOMMIT: TxnId = 0;

/// The stack of every thread that serves requests (the runtime's and the
/// LDM workers'): parsing SQL recurses once per level of nesting, up to
/// the parsers' limits, and a level can take tens of KiB (most in a debug
/// build). Stacks are reserved, not used: pages are touched as needed.
pub const THREAD_STACK: usize = 16 << 20;
