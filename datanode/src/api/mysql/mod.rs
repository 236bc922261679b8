//! SQL over the MySQL protocol (port 3306): the `mysql` client, sysbench
//! and MySQL drivers reach their data as they reach a RonDB SQL node.
//!
//! A client logs in with an API key: user = the key's 16-character prefix,
//! password = its secret, checked by `mysql_native_password` against the
//! SHA-1 of the SHA-1 of the secret that the control plane pushed (never
//! the secret). `USE db` and the database given at connect are limited to
//! the key's grants; a read key cannot write.
//!
//! - `proto`: packets, the handshake, result sets in text and binary.
//! - `session`: one connection: login, commands, prepared statements.
//! - `query`: statements, planned onto the transaction coordinator.
//! - `prepared`: what a prepared statement keeps between executes.
//! - `alias`: a table's alias, resolved as a statement is parsed.
//! - `filter`: WHERE clauses and SET expressions over rows.
//! - `clock`: NOW() and its kin, and date arithmetic on constants, worked
//!   out before a statement is planned.
//! - `scan`: rows found by a WHERE clause: index ranges, full scans.
//! - `show`: the SHOW statements SQL tools send for their panels (table
//!   status, engines, character sets, collations, grants).
//! - `system`: tables computed when asked, scoped to the caller's databases:
//!   `ndbinfo` (RonDB's memory and usage tables) and `information_schema`.
//! - `transaction`: BEGIN, COMMIT, ROLLBACK and autocommit.
//! - `processes`: the node's connections, for `SHOW PROCESSLIST` and `KILL`.
//! - `upsert`: INSERT IGNORE and INSERT … ON DUPLICATE KEY UPDATE.
//! - `load`: LOCK TABLES and ALTER TABLE … KEYS, as mysqldump's files carry.
//! - `relay`: sessions carried on to their database's primary.
//! - `ddl`: changes of schema, made by the control plane (or a node alone).
//! - `text`: a statement's text from its bytes, string literals that are
//!   not text taken as bytes (as mysqldump writes binary columns).
//! - `value`: SQL literals and arguments to column values, and back.
//! - `variables`: user variables (`@name`), a connection's own values.
//! - `error`: MySQL's error numbers and SQLSTATEs.
//!
//! Connections are capped, timed out and drained on stop as every front
//! end's are (`serve`).

mod alias;
mod clock;
mod ddl;
mod error;
mod explain;
mod filter;
mod information_schema;
mod load;
mod ndbinfo;
mod order;
mod prepared;
mod processes;
mod proto;
mod query;
mod relay;
mod scan;
mod session;
mod show;
mod status;
mod system;
mod text;
mod transaction;
mod upsert;
mod value;
mod variables;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use self::session::Shared;
use super::serve::{self, Limits};
use crate::cluster::{Cluster, Relayed};

/// What the node says it is: a MySQL 8.0 server, and which.
pub(crate) const VERSION: &str = "8.0.36-shoal";
/// `@@version_comment`.
pub(crate) const VERSION_COMMENT: &str = "Shoal, an in-memory database in the lineage of RonDB";

/// What a connection past the caps is answered: MySQL's error 1040 as the
/// server's first packet.
const REFUSAL: &[u8] = b"\x17\x00\x00\x00\xff\x10\x04Too many connections";

/// Serves MySQL clients until `stopped`, then lets each finish the
/// statement it is running.
pub(crate) async fn serve(
    listener: TcpListener,
    cluster: Cluster,
    limits: Limits,
    lock_wait_timeout: Duration,
    transaction_inactive_timeout: Duration,
    control_plane: Option<(String, shoal_wire::secret::ClusterSecret)>,
    stopped: watch::Receiver<bool>,
) {
    let schema = match control_plane {
        Some((url, secret)) => match reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(60))
            .pool_idle_timeout(shoal_listen::CLIENT_POOL_IDLE)
            .build()
        {
            Ok(http) => ddl::Schema::ControlPlane { url, secret, http },
            Err(e) => {
                tracing::error!(error = %e, "cannot make an HTTP client to reach the control plane; SQL cannot change schemas");
                ddl::Schema::ControlPlane {
                    url,
                    secret,
                    http: reqwest::Client::new(),
                }
            }
        },
        None => ddl::Schema::Local,
    };
    let mut workers = serve::Workers::with_spare_cores(cluster.engine().tc().clone());
    let port = listener.local_addr().map_or(0, |a| a.port());
    let shared = Arc::new(Shared {
        engine: cluster.engine().clone(),
        port,
        limits,
        lock_wait_timeout,
        transaction_inactive_timeout,
        schema,
        cluster: cluster.clone(),
        processes: Arc::default(),
    });
    // Sessions other nodes of the group carry here, for this node is the
    // primary of a database they write: served past the caps (the node
    // that carries them holds its clients to them).
    cluster.serve_relayed(
        Relayed::Sql,
        relay::front(Arc::clone(&shared), stopped.clone()),
    );
    let watching = stopped.clone();
    let gate = shoal_listen::accept(
        listener,
        limits.caps(),
        REFUSAL,
        stopped,
        move |stream, _, permit| {
            let (shared, stopped) = (Arc::clone(&shared), watching.clone());
            workers.spawn(stream, move |stream| async move {
                session::connection(stream, shared, stopped).await;
                drop(permit);
            });
        },
    )
    .await;
    shoal_listen::drained(gate, serve::DRAIN).await;
}
