//! Durability: an engine on what its data directory holds — recovered,
//! then logging every commit and saving the catalog on every change.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::catalog_file::{self, CatalogStore};
use super::checkpoint::{Checkpointer, REDO_DIR};
use super::recovery::{self, Recovered, RecoveryError};
use super::{Engine, EngineConfig};
use crate::log::io::Storage;
use crate::log::redo::{self, Durability, RedoLog};

/// File in the data directory with the secret that keys the hash indexes:
/// checkpoint images hold index pages made with it.
pub(crate) const SEED_FILE: &str = "index-seed";

/// A data node's engine, recovered and logging.
#[derive(Debug)]
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
pub struct Durable {
    pub engine: Engine,
    pub log: Arc<RedoLog>,
    pub(crate) checkpointer: Arc<Checkpointer>,
    pub recovered: Recovered,
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: {problem}")]
    Seed { path: PathBuf, problem: String },
    #[error("cannot start the engine: {0}")]
    Engine(std::io::Error),
    #[error("recovery failed: {0}")]
    Recovery(#[from] RecoveryError),
    #[error("cannot open the redo log: {0}")]
    Log(std::io::Error),
    #[error("cannot save the catalog: {0}")]
    Catalog(std::io::Error),
}

/// The index seed kept in the data directory, made on first start.
fn seed(storage: &dyn Storage, data_dir: &Path) -> Result<u64, OpenError> {
    let path = data_dir.join(SEED_FILE);
    let bad = |problem: String| OpenError::Seed {
        path: path.clone(),
        problem,
    };
    if storage.exists(&path) {
        let text = storage.read(&path).map_err(|e| bad(e.to_string()))?;
        let text = String::from_utf8_lossy(&text);
        return u64::from_str_radix(text.trim(), 16)
            .map_err(|_| bad("not a seed (16 hex digits)".into()));
    }
    let seed = super::random_seed().map_err(OpenError::Engine)?;
    storage
        .write_atomic(&path, format!("{seed:016x}\n").as_bytes())
        .map_err(|e| bad(e.to_string()))?;
    Ok(seed)
}

/// Starts an engine on what `data_dir` holds: recovers it, then logs every
/// change from where the log ended and saves the catalog on every change.
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
pub async fn open(
    config: EngineConfig,
    storage: Arc<dyn Storage>,
    data_dir: &Path,
    durability: Durability,
) -> Result<Durable, OpenError> {
    open_with(config, storage, data_dir, durability, redo::SEGMENT_BYTES).await
}

/// `open`, with redo segments of `segment_bytes`.
pub(crate) async fn open_with(
    mut config: EngineConfig,
    storage: Arc<dyn Storage>,
    data_dir: &Path,
    durability: Durability,
    segment_bytes: u64,
) -> Result<Durable, OpenError> {
    storage.create_dir_all(data_dir).map_err(OpenError::Log)?;
    config.seed = Some(seed(&*storage, data_dir)?);
    let engine = Engine::start(config).map_err(OpenError::Engine)?;
    let recovered = recovery::recover(&engine, Arc::clone(&storage), data_dir).await?;
    let log = RedoLog::open_with(
        Arc::clone(&storage),
        data_dir.join(REDO_DIR),
        recovered.end,
        durability,
        segment_bytes,
    )
    .map_err(OpenError::Log)?;
    engine
        .attach_log(Arc::clone(&log))
        .await
        .map_err(|e| OpenError::Engine(std::io::Error::other(e)))?;
    let store = CatalogStore::new(Arc::clone(&storage), data_dir);
    if recovered.fresh {
        store
            .save(&catalog_file::CatalogFile::empty())
            .map_err(OpenError::Catalog)?;
    }
    engine.keep_catalog(store);
    let checkpointer = Arc::new(Checkpointer::new(
        storage,
        data_dir,
        recovered.manifest.as_ref(),
    ));
    Ok(Durable {
        engine,
        log,
        checkpointer,
        recovered,
    })
}

impl Durable {
    /// A clean stop: a checkpoint of everything, then the log synced and
    /// closed. The next start loads the images and replays nothing.
    #[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
    pub async fn close(self) -> Result<super::checkpoint::Summary, String> {
        let checkpoint = self.checkpointer.run(&self.engine).await;
        self.log.close().map_err(|e| e.to_string())?;
        checkpoint.map_err(|e| {
            format!("the last checkpoint failed ({e}); every acknowledged commit is in the redo log and is replayed at the next start")
        })
    }
}
