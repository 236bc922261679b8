//! The Shoal data node: tables in DataMemory pages, owned by LDM worker
//! threads, with exact per-fragment memory accounting.
//!
//! - [`storage`]: pages, rows, the hash index, fragments — the engine proper.
//! - [`catalog`]: databases and tables of this node.
//! - `ldm`: the worker threads and the messages that reach them.
//! - [`batch`]: operations encoded at the edge and their outcomes.
//! - [`engine`]: the engine's API: schema changes, batches, scans, memory.
//! - [`tc`]: the transaction coordinator: grants, limits, quotas, atomic commit.
//! - [`ndbinfo`]: virtual tables over live state.
//! - [`json`]: column values as the HTTP APIs carry them.
//! - [`keys`]: tenant API keys and how they are checked.
//! - [`internal_api`]: the HTTP API the control plane and operators use.
//! - [`persist`]: durability: redo log, checkpoints, recovery.
//! - [`node`]: a whole data node process: configuration, start, shutdown.

pub mod api;
pub mod batch;
pub mod catalog;
pub mod engine;
pub mod internal_api;
pub mod json;
pub mod keys;
mod ldm;
pub mod ndbinfo;
pub mod node;
pub mod persist;
pub mod register;
pub mod stats;
pub mod storage;
pub mod tc;

pub use batch::{Batch, OperationError, Outcome, Row, RowView};
pub use catalog::{CatalogError, Database, DatabaseId, Table, TableId, Tenant};
pub use engine::{Engine, EngineConfig, FragmentUsage};
pub use storage::CmpOp;
pub use storage::codec::ValueError;
pub use storage::value::{Date, DateTime, Decimal, Timestamp, Value};
pub use tc::{Commit, Grant, Role, Tc, TcError};

/// A runtime like the data node's, for tests: two worker threads.
#[cfg(test)]
fn test_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
