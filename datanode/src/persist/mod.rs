//! Durability: what a data node keeps on disk, and how it comes back.
//!
//! - [`io`]: file operations behind a trait, real or in memory with faults.
//! - [`redo`]: the redo log, group commit, and reading it back.
//! - [`catalog`]: the catalog file: tenants, databases, tables, quotas.
//! - [`checkpoint`]: fragment images taken while writes go on.
//! - [`recovery`]: catalog, newest checkpoint, redo tail — at start.

pub mod catalog;
pub(crate) mod changes;
pub mod checkpoint;
pub mod io;
pub mod recovery;
pub mod redo;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::{Engine, EngineConfig};
use crate::tc::Tc;
use catalog::CatalogStore;
use checkpoint::{Checkpointer, REDO_DIR};
use io::Storage;
use recovery::{Recovered, RecoveryError};
use redo::{Durability, RedoLog};

/// File in the data directory with the secret that keys the hash indexes:
/// checkpoint images hold index pages made with it.
pub const SEED_FILE: &str = "index-seed";

/// A data node's engine, recovered and logging.
#[derive(Debug)]
pub struct Durable {
    pub tc: Tc,
    pub log: Arc<RedoLog>,
    pub checkpointer: Arc<Checkpointer>,
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
    let seed = crate::engine::random_seed().map_err(OpenError::Engine)?;
    storage
        .write_atomic(&path, format!("{seed:016x}\n").as_bytes())
        .map_err(|e| bad(e.to_string()))?;
    Ok(seed)
}

/// Starts an engine on what `data_dir` holds: recovers it, then logs every
/// change from where the log ended and saves the catalog on every change.
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
    let tc = Tc::new(engine.clone());
    let recovered = recovery::recover(&tc, Arc::clone(&storage), data_dir).await?;
    let log = RedoLog::open_with(
        Arc::clone(&storage),
        data_dir.join(REDO_DIR),
        recovered.end,
        durability,
        segment_bytes,
    )
    .map_err(OpenError::Log)?;
    engine.attach_log(Arc::clone(&log)).await;
    let store = CatalogStore::new(Arc::clone(&storage), data_dir);
    if recovered.fresh {
        store
            .save(&catalog::CatalogFile::empty())
            .map_err(OpenError::Catalog)?;
    }
    engine.keep_catalog(store);
    let checkpointer = Arc::new(Checkpointer::new(
        storage,
        data_dir,
        recovered.manifest.as_ref(),
    ));
    Ok(Durable {
        tc,
        log,
        checkpointer,
        recovered,
    })
}

impl Durable {
    /// A clean stop: a checkpoint of everything, then the log synced and
    /// closed. The next start loads the images and replays nothing.
    pub async fn close(self) -> Result<checkpoint::Summary, String> {
        let checkpoint = self.checkpointer.run(self.tc.engine()).await;
        self.log.close().map_err(|e| e.to_string())?;
        checkpoint.map_err(|e| {
            format!("the last checkpoint failed ({e}); every acknowledged commit is in the redo log and is replayed at the next start")
        })
    }
}

#[cfg(test)]
mod tests;
