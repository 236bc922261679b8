//! The Shoal data node: tables in DataMemory pages, owned by LDM worker
//! threads, with exact per-fragment memory accounting.
//!
//! The layers, each importing only from those below it (docs/architecture.md;
//! `tests/layers.rs` holds the crate to it):
//!
//! - `types`: ids and column values — the leaf.
//! - `storage`: pages, rows, the hash index, fragments; knows nothing of logs.
//! - `log`: change records, the redo log, replay — every committed change.
//! - `ldm`: the worker threads that own the fragments, and their messages.
//! - `tc`: the transaction coordinator, the only way to run operations:
//!   grants, limits, quotas, atomic commit.
//! - `node`: catalog, DDL, API keys, checkpoints, recovery, ndbinfo.
//! - `cluster`: node groups — the replication stream's links, the
//!   node-to-node transport.
//! - `api`, `internal_api`: the front ends — REST, Redis, and the HTTP API
//!   of the control plane and operators.
//! - `server`: a whole data node process: configuration, start, shutdown.

mod api;
mod cluster;
mod internal_api;
mod ldm;
mod log;
mod node;
mod server;
mod sql;
mod storage;
mod tc;
mod types;

pub use api::serve::Limits;
pub use ldm::{DEFAULT_SPIN, MAX_SPIN, NodeFailed};
pub use log::redo::Durability;
pub use node::catalog::CatalogError;
pub use node::{
    DEFAULT_LOCK_WAIT_TIMEOUT, Engine, EngineConfig, FragmentUsage, NodeId, default_ldm_threads,
    stats,
};
pub use server::register::ControlPlaneLink;
pub use server::{DataNode, DataNodeConfig, SECRET_FILE, StartError};
pub use shoal_wire::secret::ClusterSecret;
pub use storage::codec::ValueError;
pub use tc::batch::{Batch, OperationError, Outcome, Row, RowView};
pub use tc::{
    Commit, Database, Grant, LatencyObserver, RangePage, RangeScan, Role, Table, Tc, TcError,
    Tenant, Transaction,
};
pub use types::THREAD_STACK;
pub use types::value::{Date, DateTime, Decimal, Timestamp, Value};
pub use types::{DatabaseId, TableId};

/// Hooks for benchmarks, fuzzing and tests from outside the crate; never in
/// a release build.
#[cfg(feature = "testing")]
pub mod testing {
    pub use crate::api::resp::frame::check_parse;
    pub use crate::log::io::FileSystem;
    pub use crate::node::durable::{Durable, open};
}

/// A runtime like the data node's, for tests: two worker threads.
#[cfg(test)]
fn test_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
