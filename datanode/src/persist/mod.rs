//! Durability: what a data node keeps on disk, and how it comes back.
//!
//! - [`io`]: file operations behind a trait, real or in memory with faults.
//! - [`redo`]: the redo log, group commit, and reading it back.

pub(crate) mod changes;
pub mod io;
pub mod redo;
