//! Bringing a data node back: its catalog, the images of its newest
//! checkpoint, and the redo log after them.
//!
//! 1. The catalog file: tenants, databases, empty tables.
//! 2. The fragment images of the newest complete checkpoint, each restored
//!    exactly as it was taken.
//! 3. The redo log, from where the checkpoint starts: each change is applied
//!    to its fragment unless the fragment's image already has it. Changes are
//!    whole rows or deletions, so applying one twice does no harm.
//! 4. A torn record at the tail — a crash mid-write — is cut off; anything
//!    else wrong in the log stops the node with the file and offset.
//! 5. The quotas, last: replay must not be refused by them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Engine;
use super::catalog_file::{self, CatalogStore};
use super::checkpoint::{self, Manifest, REDO_DIR};
use crate::log::changes::{self, Change};
use crate::log::io::Storage;
use crate::log::redo::{self, Lsn, RedoError};
use crate::tc::Table;
use crate::tc::batch::{self, Batch, OperationError};
use crate::types::TableId;

/// Changes applied to the engine at a time while replaying.
const REPLAY_BATCH: usize = 2048;

/// What recovery found and did.
#[derive(Debug, Clone)]
pub struct Recovered {
    pub manifest: Option<Manifest>,
    /// The data directory held no catalog, checkpoint or redo: a new node.
    pub fresh: bool,
    pub fragments: usize,
    pub image_bytes: u64,
    pub redo_records: u64,
    pub redo_bytes: u64,
    /// Where the log ends: new records go on from here.
    pub end: Lsn,
    /// A torn record cut off the tail: its file and offset.
    pub torn: Option<(PathBuf, u64)>,
    /// Time spent loading images, replaying the log, and in all.
    pub images_took: Duration,
    pub redo_took: Duration,
    pub took: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error("the catalog: {0}")]
    Catalog(String),
    #[error("checkpoint image {path}: {problem}")]
    Image { path: PathBuf, problem: String },
    #[error(transparent)]
    Redo(#[from] RedoError),
    #[error("redo record at {lsn}: {problem}")]
    Record { lsn: Lsn, problem: String },
    #[error("replaying the redo log: {0}")]
    Replay(String),
    #[error("cutting the torn tail off {path}: {source}")]
    Truncate {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Recovers into a fresh engine everything `data_dir` holds.
pub(crate) async fn recover(
    engine: &Engine,
    storage: Arc<dyn Storage>,
    data_dir: &Path,
) -> Result<Recovered, RecoveryError> {
    let started = Instant::now();
    let catalog = CatalogStore::new(Arc::clone(&storage), data_dir)
        .load()
        .map_err(RecoveryError::Catalog)?;
    if let Some(file) = &catalog {
        engine
            .restore_catalog(file)
            .await
            .map_err(RecoveryError::Catalog)?;
    }
    let tables: HashMap<TableId, Arc<Table>> =
        engine.tables().into_iter().map(|t| (t.id, t)).collect();

    let manifest =
        checkpoint::load_manifest(&*storage, data_dir).map_err(RecoveryError::Catalog)?;
    // Without the catalog, images and redo name tables nobody knows: starting
    // would silently drop every row.
    let lost_catalog = |what: &str| {
        RecoveryError::Catalog(format!(
            "{} is missing, but the data directory holds {what}; the node does not start without it",
            data_dir.join(catalog_file::FILE).display()
        ))
    };
    if catalog.is_none() && manifest.is_some() {
        return Err(lost_catalog("a checkpoint"));
    }
    let mut starts: HashMap<(TableId, u16), Lsn> = HashMap::new();
    let mut image_bytes = 0;
    let images_started = Instant::now();
    for image in manifest.iter().flat_map(|m| &m.fragments) {
        let Some(table) = tables.get(&TableId(image.table)) else {
            continue; // dropped since the checkpoint
        };
        let path = data_dir.join(&image.file);
        let bad = |problem: String| RecoveryError::Image {
            path: path.clone(),
            problem,
        };
        if image.fragment >= table.fragments() {
            return Err(bad(format!(
                "fragment {} of a table with {}",
                image.fragment,
                table.fragments()
            )));
        }
        let bytes = {
            let (storage, path) = (Arc::clone(&storage), path.clone());
            tokio::task::spawn_blocking(move || storage.read(&path))
                .await
                .expect("a read does not panic")
        }
        .map_err(|e| bad(e.to_string()))?;
        image_bytes += bytes.len() as u64;
        engine
            .restore_image(table, image.fragment, bytes)
            .await
            .map_err(bad)?;
        starts.insert((table.id, image.fragment), image.redo_start);
    }

    let images_took = images_started.elapsed();
    let redo_started = Instant::now();
    let from = manifest.as_ref().map_or(0, |m| m.redo_start);
    let (records, replayed) = replay(engine, &storage, data_dir, from, &tables, &starts).await?;
    let end = records?;
    let redo_took = redo_started.elapsed();
    if catalog.is_none() && end.end > 0 {
        return Err(lost_catalog("a redo log"));
    }
    if let Some((path, offset)) = &end.torn {
        tracing::warn!(file = %path.display(), offset, "dropped a torn record at the tail of the redo log");
        storage
            .truncate(path, *offset)
            .map_err(|source| RecoveryError::Truncate {
                path: path.clone(),
                source,
            })?;
    }
    if let Some(file) = &catalog {
        engine
            .restore_quotas(file)
            .map_err(|e| RecoveryError::Catalog(e.to_string()))?;
    }
    Ok(Recovered {
        fragments: starts.len(),
        image_bytes,
        redo_records: replayed.0,
        redo_bytes: replayed.1,
        end: end.end,
        torn: end.torn,
        images_took,
        redo_took,
        took: started.elapsed(),
        fresh: catalog.is_none(),
        manifest,
    })
}

/// Reads the log from `from` on a blocking thread and applies its changes
/// in batches: where the log ends (or why it cannot be read), and the
/// records and bytes replayed.
async fn replay(
    engine: &Engine,
    storage: &Arc<dyn Storage>,
    data_dir: &Path,
    from: Lsn,
    tables: &HashMap<TableId, Arc<Table>>,
    starts: &HashMap<(TableId, u16), Lsn>,
) -> Result<(Result<redo::LogEnd, RedoError>, (u64, u64)), RecoveryError> {
    let (send, mut records) = tokio::sync::mpsc::channel::<(Lsn, Vec<u8>)>(64);
    let reader = {
        let (storage, dir) = (Arc::clone(storage), data_dir.join(REDO_DIR));
        tokio::task::spawn_blocking(move || {
            redo::replay(&*storage, &dir, from, |lsn, payload| {
                // The applying side only stops early on an error it reports.
                let _ = send.blocking_send((lsn, payload.to_vec()));
            })
        })
    };
    let mut batch = engine.tc().batch();
    let (mut count, mut bytes) = (0u64, 0u64);
    while let Some((lsn, payload)) = records.recv().await {
        count += 1;
        bytes += payload.len() as u64;
        for change in changes::decode(&payload) {
            let change = change.map_err(|problem| RecoveryError::Record { lsn, problem })?;
            let (Change::Put { table, key, .. } | Change::Delete { table, key }) = &change else {
                let problem = "a replication stream's clear in the redo log".to_owned();
                return Err(RecoveryError::Record { lsn, problem });
            };
            let Some(table) = tables.get(table) else {
                continue; // dropped later
            };
            let fragment = batch::fragment_of(key, table.fragments());
            if lsn < starts.get(&(table.id, fragment)).copied().unwrap_or(from) {
                continue; // the fragment's image has it
            }
            batch
                .push_change(table, &change)
                .map_err(|problem| RecoveryError::Record { lsn, problem })?;
        }
        if batch.len() >= REPLAY_BATCH {
            apply(engine, &mut batch).await?;
        }
    }
    apply(engine, &mut batch).await?;
    let end = reader.await.expect("reading the log does not panic");
    Ok((end, (count, bytes)))
}

async fn apply(engine: &Engine, batch: &mut Batch) -> Result<(), RecoveryError> {
    if batch.is_empty() {
        return Ok(());
    }
    engine
        .tc()
        .replay(batch)
        .await
        .map_err(|e| RecoveryError::Replay(e.to_string()))?;
    for result in batch.results() {
        match result {
            Ok(_) | Err(OperationError::NotFound { .. }) => {}
            Err(e) => return Err(RecoveryError::Replay(e.to_string())),
        }
    }
    batch.clear();
    Ok(())
}
