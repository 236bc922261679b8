//! A whole data node: its data directory, cluster secret, engine, front
//! ends and internal API server, started together and stopped cleanly.
//!
//! - `register`: reporting to the control plane.
//!
//! Start: lock the data directory, recover what it holds (catalog, newest
//! checkpoint, redo log), then serve. While running, a checkpoint is taken
//! whenever one is due. Stop: refuse new requests, let those in flight
//! finish, take a last checkpoint, sync and close the redo log.

use std::fs::File;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub(crate) mod register;

use self::register::{ControlPlaneLink, Identity};
use crate::api;
use crate::api::resp::store::Store;
use crate::api::serve::{self, Limits};
use crate::cluster::{Cluster, GroupError};
use crate::internal_api::{self, ClusterSecret};
use crate::log::io::FileSystem;
use crate::log::redo::Durability;
use crate::node::checkpoint::Checkpointer;
use crate::node::durable::{self, Durable, OpenError};
use crate::node::recovery::Recovered;
use crate::node::{Engine, EngineConfig, NodeId};
use crate::tc::Tc;

/// How often idle rate-limiter state is swept.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(60);
/// How often the node looks whether a checkpoint is due.
const CHECKPOINT_POLL: Duration = Duration::from_secs(1);
/// How long after a failed checkpoint the next is tried.
const CHECKPOINT_RETRY: Duration = Duration::from_secs(10);

/// File in the data directory holding the cluster secret when none is given.
pub const SECRET_FILE: &str = "cluster-secret";
/// File in the data directory a running node holds locked.
pub(crate) const LOCK_FILE: &str = "lock";

/// How to run a data node.
#[derive(Debug, Clone)]
pub struct DataNodeConfig {
    pub node_id: NodeId,
    pub data_memory: u64,
    pub ldm_threads: usize,
    /// Longest a write waits for a row another transaction holds.
    pub lock_wait_timeout: Duration,
    /// How long an LDM worker spins for its next work before it sleeps,
    /// when its work comes that close together (zero: never).
    pub spin: Duration,
    /// Longest a SQL transaction holding rows waits for its client's next
    /// statement before it is rolled back.
    pub transaction_inactive_timeout: Duration,
    pub data_dir: PathBuf,
    /// When a commit is acknowledged: after its redo is on disk, or at once.
    pub durability: Durability,
    /// A checkpoint is taken this long after the last one...
    pub checkpoint_every: Duration,
    /// ...or once the redo log has grown this much since it.
    pub checkpoint_redo_bytes: u64,
    pub listen: IpAddr,
    /// 0 picks a free port.
    pub internal_port: u16,
    /// The REST data API's port; 0 picks a free one.
    pub rest_port: u16,
    /// The Redis protocol's port; 0 picks a free one.
    pub resp_port: u16,
    /// The MySQL protocol's port; 0 picks a free one.
    pub mysql_port: u16,
    /// The node-to-node transport's port; 0 picks a free one.
    pub peer_port: u16,
    /// Connections, request size and idle time, for each data API front end.
    pub api_limits: Limits,
    /// The cluster secret; `None` reads `<data-dir>/cluster-secret`, creating
    /// it with a random secret on first start.
    pub cluster_secret: Option<ClusterSecret>,
    /// The control plane to report to, if any.
    pub control_plane: Option<ControlPlaneLink>,
}

/// Why a data node did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("data directory {path} is in use by another running data node")]
    InUse { path: PathBuf },
    #[error("cluster secret in {path}: {problem}")]
    Secret { path: PathBuf, problem: String },
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("the node group: {0}")]
    Group(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// A running data node.
#[derive(Debug)]
pub struct DataNode {
    durable: Durable,
    internal_addr: SocketAddr,
    rest_addr: SocketAddr,
    resp_addr: SocketAddr,
    mysql_addr: SocketAddr,
    peer_addr: SocketAddr,
    /// Its place in its node group.
    cluster: Cluster,
    front_ends: Vec<JoinHandle<()>>,
    secret_file: Option<PathBuf>,
    stop: watch::Sender<bool>,
    server: JoinHandle<std::io::Result<()>>,
    checkpoints: JoinHandle<()>,
    /// Held (locked) for as long as the node runs.
    _lock: File,
}

impl DataNode {
    pub async fn start(config: DataNodeConfig) -> Result<DataNode, StartError> {
        let dir = &config.data_dir;
        let dir_error = |source| StartError::DataDir {
            path: dir.clone(),
            source,
        };
        if !dir.exists() {
            create_private_dir(dir).map_err(dir_error)?;
        }
        let lock = lock_data_dir(dir)?;
        let (secret, secret_file) = match config.cluster_secret {
            Some(secret) => (secret, None),
            None => {
                let path = dir.join(SECRET_FILE);
                (load_or_create_secret(&path)?, Some(path))
            }
        };
        let engine_config = EngineConfig {
            node_id: config.node_id,
            data_memory: config.data_memory,
            ldm_threads: config.ldm_threads,
            fragments_per_table: None,
            seed: None,
            lock_wait_timeout: config.lock_wait_timeout,
            spin: config.spin,
        };
        let durable =
            durable::open(engine_config, Arc::new(FileSystem), dir, config.durability).await?;
        let recovered = &durable.recovered;
        tracing::info!(
            checkpoint = recovered.manifest.as_ref().map(|m| m.id),
            fragments = recovered.fragments,
            image_bytes = recovered.image_bytes,
            redo_records = recovered.redo_records,
            redo_bytes = recovered.redo_bytes,
            took_ms = recovered.took.as_millis() as u64,
            "recovered"
        );
        let engine = durable.engine.clone();
        let (listener, internal_addr) = bind(config.listen, config.internal_port).await?;
        let (rest, rest_addr) = bind(config.listen, config.rest_port).await?;
        let (resp, resp_addr) = bind(config.listen, config.resp_port).await?;
        let (mysql, mysql_addr) = bind(config.listen, config.mysql_port).await?;
        let (peers, peer_addr) = bind(config.listen, config.peer_port).await?;
        let (stop, stopped) = watch::channel(false);
        let cluster = Cluster::new(
            engine.clone(),
            secret.clone(),
            Some(dir.clone()),
            config.control_plane.as_ref().map(|link| link.url.as_str()),
            stopped.clone(),
        )
        .map_err(|e: GroupError| StartError::Group(e.to_string()))?;
        tokio::spawn(cluster.clone().serve(peers));
        let limits = config.api_limits;
        let store = Arc::new(Store::new(engine.clone(), limits.max_request_bytes));
        let front_ends = vec![
            tokio::spawn(serve::http(
                rest,
                api::rest::router(engine.clone(), cluster.clone(), limits),
                Some(serve::Workers::with_spare_cores(engine.tc().clone())),
                limits,
                stopped.clone(),
            )),
            tokio::spawn(api::resp::serve(
                resp,
                store,
                cluster.clone(),
                limits,
                stopped.clone(),
            )),
            tokio::spawn(api::mysql::serve(
                mysql,
                cluster.clone(),
                limits,
                config.lock_wait_timeout,
                config.transaction_inactive_timeout,
                (config.control_plane.as_ref()).map(|link| (link.url.clone(), secret.clone())),
                stopped.clone(),
            )),
        ];
        if let Some(link) = config.control_plane.clone() {
            let me = Identity {
                node_id: config.node_id,
                internal_port: internal_addr.port(),
                rest_port: rest_addr.port(),
                resp_port: resp_addr.port(),
                mysql_port: mysql_addr.port(),
                peer_port: peer_addr.port(),
            };
            tokio::spawn(register::heartbeats(
                link,
                me,
                engine.clone(),
                secret.clone(),
                stopped.clone(),
            ));
        }
        let app = internal_api::router(
            engine.clone(),
            cluster.clone(),
            secret,
            Arc::clone(&durable.checkpointer),
        );
        let stopped_internal = stopped.clone();
        // The internal API: the data API's caps, on the node's own runtime,
        // with the default head timeout whatever the data API's is (the
        // control plane's client keeps idle connections for less).
        let internal_limits = Limits {
            head_timeout: shoal_listen::HEAD_TIMEOUT,
            ..limits
        };
        let server = tokio::spawn(async move {
            serve::http(listener, app, None, internal_limits, stopped_internal).await;
            Ok(())
        });
        tokio::spawn(housekeeping(engine.tc().clone(), stopped.clone()));
        let checkpoints = tokio::spawn(checkpoints(
            engine.clone(),
            Arc::clone(&durable.checkpointer),
            (config.checkpoint_every, config.checkpoint_redo_bytes),
            stopped,
        ));
        tracing::info!(node_id = %config.node_id, %internal_addr, %rest_addr, %resp_addr, %mysql_addr, durability = %config.durability, "data node started");
        Ok(DataNode {
            durable,
            internal_addr,
            rest_addr,
            resp_addr,
            mysql_addr,
            peer_addr,
            cluster,
            front_ends,
            secret_file,
            stop,
            server,
            checkpoints,
            _lock: lock,
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.durable.engine
    }

    /// The transaction coordinator: where requests to databases go.
    pub fn tc(&self) -> &Tc {
        self.durable.engine.tc()
    }

    /// What recovery found and did at start.
    pub fn recovered(&self) -> &Recovered {
        &self.durable.recovered
    }

    pub fn internal_addr(&self) -> SocketAddr {
        self.internal_addr
    }

    /// Where the REST data API listens.
    pub fn rest_addr(&self) -> SocketAddr {
        self.rest_addr
    }

    /// Where the Redis protocol listens.
    pub fn resp_addr(&self) -> SocketAddr {
        self.resp_addr
    }

    /// Where the MySQL protocol listens.
    pub fn mysql_addr(&self) -> SocketAddr {
        self.mysql_addr
    }

    /// Where the node-to-node transport listens.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }

    /// The file the cluster secret was read from, if it came from one.
    pub fn secret_file(&self) -> Option<&Path> {
        self.secret_file.as_deref()
    }

    /// Stops accepting requests, lets those in flight finish, takes a last
    /// checkpoint, closes the redo log, then stops the LDM workers.
    pub async fn shutdown(self) -> std::io::Result<()> {
        // In a group, its primaries go to the others first: no write is
        // refused for its stopping.
        self.cluster.leave().await;
        let _ = self.stop.send(true);
        for front_end in self.front_ends {
            front_end.await.map_err(std::io::Error::other)?;
        }
        let served = self.server.await.map_err(std::io::Error::other)?;
        // A checkpoint under way finishes; none starts after.
        self.checkpoints.await.map_err(std::io::Error::other)?;
        let engine = self.durable.engine.clone();
        let closed = match self.durable.close().await {
            Ok(last) => {
                tracing::info!(
                    checkpoint = last.id,
                    bytes = last.bytes,
                    "stopped cleanly: everything is in the last checkpoint"
                );
                Ok(())
            }
            Err(e) => Err(std::io::Error::other(e)),
        };
        // The last engine handle goes here; dropping it joins the workers.
        tokio::task::spawn_blocking(move || drop(engine))
            .await
            .map_err(std::io::Error::other)?;
        served.and(closed)
    }
}

/// Listens on `ip:port` (0: a free port); answers the address taken.
async fn bind(ip: IpAddr, port: u16) -> Result<(TcpListener, SocketAddr), StartError> {
    let addr = SocketAddr::new(ip, port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Listen { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| StartError::Listen { addr, source })?;
    Ok((listener, bound))
}

/// Creates the data directory readable by its owner only: it holds every
/// tenant's rows.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Takes the data directory's lock, so that two nodes never share it. The
/// operating system lets go of it when the process ends, however it ends.
fn lock_data_dir(dir: &Path) -> Result<File, StartError> {
    let path = dir.join(LOCK_FILE);
    let mut options = File::options();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(&path).map_err(|source| StartError::DataDir {
        path: path.clone(),
        source,
    })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(StartError::InUse {
            path: dir.to_owned(),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(StartError::DataDir { path, source }),
    }
}

async fn housekeeping(tc: Tc, mut stopped: watch::Receiver<bool>) {
    let mut every = tokio::time::interval(HOUSEKEEPING_EVERY);
    loop {
        tokio::select! {
            _ = every.tick() => tc.housekeep(),
            _ = stopped.wait_for(|s| *s) => break,
        }
    }
}

/// Takes a checkpoint whenever one is due, until the node stops. A
/// checkpoint under way is never cut short: the stop is only looked at
/// between them.
async fn checkpoints(
    engine: Engine,
    checkpointer: Arc<Checkpointer>,
    (every, redo_bytes): (Duration, u64),
    mut stopped: watch::Receiver<bool>,
) {
    let mut poll = tokio::time::interval(CHECKPOINT_POLL);
    let mut not_before = Instant::now();
    loop {
        tokio::select! {
            _ = poll.tick() => {}
            _ = stopped.wait_for(|s| *s) => break,
        }
        if Instant::now() < not_before || !checkpointer.due(&engine, every, redo_bytes) {
            continue;
        }
        match checkpointer.run(&engine).await {
            Ok(summary) => tracing::info!(
                id = summary.id,
                fragments = summary.fragments,
                bytes = summary.bytes,
                redo_segments_removed = summary.redo_segments_removed,
                took_ms = summary.took_ms,
                "checkpoint"
            ),
            Err(e) => {
                tracing::error!(error = %e, "checkpoint failed; the redo log is kept until one succeeds");
                not_before = Instant::now() + CHECKPOINT_RETRY;
            }
        }
    }
}

/// Reads the cluster secret from `path`, or writes a new random one there
/// (readable by its owner only) if the file does not exist.
fn load_or_create_secret(path: &Path) -> Result<ClusterSecret, StartError> {
    ClusterSecret::load_or_create(path).map_err(|problem| StartError::Secret {
        path: path.to_owned(),
        problem,
    })
}
