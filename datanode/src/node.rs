//! A whole data node: its data directory, cluster secret, engine and
//! internal API server, started together and stopped cleanly.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::engine::{Engine, EngineConfig};
use crate::internal_api::{self, ClusterSecret};
use crate::tc::Tc;

/// How often idle rate-limiter state is swept.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(60);

/// File in the data directory holding the cluster secret when none is given.
pub const SECRET_FILE: &str = "cluster-secret";

/// How to run a data node.
#[derive(Debug, Clone)]
pub struct DataNodeConfig {
    pub node_id: u32,
    pub data_memory: u64,
    pub ldm_threads: usize,
    /// Longest a write waits for a row another transaction holds.
    pub lock_wait_timeout: Duration,
    pub data_dir: PathBuf,
    pub listen: IpAddr,
    /// 0 picks a free port.
    pub internal_port: u16,
    /// The cluster secret; `None` reads `<data-dir>/cluster-secret`, creating
    /// it with a random secret on first start.
    pub cluster_secret: Option<ClusterSecret>,
}

/// Why a data node did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cluster secret in {path}: {problem}")]
    Secret { path: PathBuf, problem: String },
    #[error("cannot start the engine: {0}")]
    Engine(std::io::Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// A running data node.
#[derive(Debug)]
pub struct DataNode {
    tc: Tc,
    internal_addr: SocketAddr,
    secret_file: Option<PathBuf>,
    stop: watch::Sender<bool>,
    server: JoinHandle<std::io::Result<()>>,
}

impl DataNode {
    pub async fn start(config: DataNodeConfig) -> Result<DataNode, StartError> {
        let dir = &config.data_dir;
        std::fs::create_dir_all(dir).map_err(|source| StartError::DataDir {
            path: dir.clone(),
            source,
        })?;
        let (secret, secret_file) = match config.cluster_secret {
            Some(secret) => (secret, None),
            None => {
                let path = dir.join(SECRET_FILE);
                (load_or_create_secret(&path)?, Some(path))
            }
        };
        let engine = Engine::start(EngineConfig {
            node_id: config.node_id,
            data_memory: config.data_memory,
            ldm_threads: config.ldm_threads,
            fragments_per_table: None,
            seed: None,
            lock_wait_timeout: config.lock_wait_timeout,
        })
        .map_err(StartError::Engine)?;
        let tc = Tc::new(engine);
        let addr = SocketAddr::new(config.listen, config.internal_port);
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Listen { addr, source })?;
        let internal_addr = listener
            .local_addr()
            .map_err(|source| StartError::Listen { addr, source })?;
        let (stop, mut stopped) = watch::channel(false);
        let app = internal_api::router(tc.clone(), secret);
        let mut stop_housekeeping = stopped.clone();
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await
        });
        let housekeeper = tc.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(HOUSEKEEPING_EVERY);
            loop {
                tokio::select! {
                    _ = every.tick() => housekeeper.housekeep(),
                    _ = stop_housekeeping.wait_for(|s| *s) => break,
                }
            }
        });
        tracing::info!(node_id = config.node_id, %internal_addr, "data node started");
        Ok(DataNode {
            tc,
            internal_addr,
            secret_file,
            stop,
            server,
        })
    }

    pub fn engine(&self) -> &Engine {
        self.tc.engine()
    }

    /// The transaction coordinator: where requests to databases go.
    pub fn tc(&self) -> &Tc {
        &self.tc
    }

    pub fn internal_addr(&self) -> SocketAddr {
        self.internal_addr
    }

    /// The file the cluster secret was read from, if it came from one.
    pub fn secret_file(&self) -> Option<&Path> {
        self.secret_file.as_deref()
    }

    /// Stops accepting requests, lets those in flight finish, then stops the
    /// LDM workers.
    pub async fn shutdown(self) -> std::io::Result<()> {
        let _ = self.stop.send(true);
        let served = self.server.await.map_err(std::io::Error::other)?;
        // The last engine handle goes here; dropping it joins the workers.
        let tc = self.tc;
        tokio::task::spawn_blocking(move || drop(tc))
            .await
            .map_err(std::io::Error::other)?;
        served
    }
}

/// Reads the cluster secret from `path`, or writes a new random one there
/// (readable by its owner only) if the file does not exist.
fn load_or_create_secret(path: &Path) -> Result<ClusterSecret, StartError> {
    let problem = |problem: String| StartError::Secret {
        path: path.to_owned(),
        problem,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => ClusterSecret::new(&text).map_err(problem),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let secret = ClusterSecret::generate().map_err(|e| problem(e.to_string()))?;
            write_private(path, secret.expose()).map_err(|e| problem(e.to_string()))?;
            Ok(secret)
        }
        Err(e) => Err(problem(e.to_string())),
    }
}

fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}
