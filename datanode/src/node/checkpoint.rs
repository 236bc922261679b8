//! Checkpoints: an image of every fragment, taken one fragment at a time
//! while writes go on, so that recovery need only replay the redo log from
//! where the images stop and the log before that can go.
//!
//! ```text
//! <data-dir>/checkpoints/<id>/<table>-<fragment>.frag   one image a fragment
//! <data-dir>/checkpoint.json                            the newest complete one
//! ```
//! A fragment's image is taken when no transaction holds a row on its worker,
//! and says where in the log replay must start for it: every change logged
//! before is in the image. `checkpoint.json` is written last, atomically, so
//! recovery sees a whole checkpoint or the one before; then older checkpoints
//! and the redo before the new one's start are removed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use super::Engine;
use crate::log::io::Storage;
use crate::log::redo::{self, Lsn};

/// The newest complete checkpoint, in the data directory.
pub(crate) const MANIFEST: &str = "checkpoint.json";
/// Where the images are, in the data directory.
pub(crate) const DIR: &str = "checkpoints";
/// Where the redo log is, in the data directory.
pub(crate) const REDO_DIR: &str = "redo";

/// A complete checkpoint: where its images are and where replay starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub id: u64,
    /// Replay starts here for tables the checkpoint has no image of, and no
    /// image needs the log from before it.
    pub redo_start: Lsn,
    pub fragments: Vec<FragmentImage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FragmentImage {
    pub table: u32,
    pub fragment: u16,
    /// Relative to the data directory.
    pub file: String,
    /// Changes logged before this are in the image.
    pub redo_start: Lsn,
    pub bytes: u64,
}

/// What a checkpoint did.
pub(crate) use shoal_wire::internal::CheckpointSummary as Summary;

#[derive(Debug, thiserror::Error)]
#[error("checkpoint {id} failed writing {path}: {source}")]
pub(crate) struct CheckpointError {
    pub id: u64,
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// Reads the newest complete checkpoint's manifest, if there is one.
pub(crate) fn load_manifest(
    storage: &dyn Storage,
    data_dir: &Path,
) -> Result<Option<Manifest>, String> {
    let path = data_dir.join(MANIFEST);
    if !storage.exists(&path) {
        return Ok(None);
    }
    let bytes = storage
        .read(&path)
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| format!("{} is not a checkpoint manifest: {e}", path.display()))
}

/// Takes checkpoints of one engine, one at a time.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    storage: Arc<dyn Storage>,
    data_dir: PathBuf,
    /// The next checkpoint's id; held while a checkpoint runs.
    next: Mutex<u64>,
    /// Where the last checkpoint started in the log, and when it ended.
    last: std::sync::Mutex<(Lsn, Instant)>,
}

impl Checkpointer {
    /// A checkpointer that goes on from `last`, the newest checkpoint found.
    pub(crate) fn new(
        storage: Arc<dyn Storage>,
        data_dir: &Path,
        last: Option<&Manifest>,
    ) -> Checkpointer {
        Checkpointer {
            storage,
            data_dir: data_dir.to_owned(),
            next: Mutex::new(last.map_or(1, |m| m.id + 1)),
            last: std::sync::Mutex::new((last.map_or(0, |m| m.redo_start), Instant::now())),
        }
    }

    /// Whether a checkpoint is due: `every` has passed since the last, or the
    /// log has grown `redo_bytes` since it started.
    pub(crate) fn due(&self, engine: &Engine, every: Duration, redo_bytes: u64) -> bool {
        let (start, at) = *self.last.lock().unwrap_or_else(|e| e.into_inner());
        let grown = engine
            .log()
            .map_or(0, |log| log.next_lsn().saturating_sub(start));
        grown > 0 && (at.elapsed() >= every || grown >= redo_bytes)
    }

    /// Takes a checkpoint of every fragment of `engine` now.
    pub(crate) async fn run(&self, engine: &Engine) -> Result<Summary, CheckpointError> {
        let mut next = self.next.lock().await;
        let id = *next;
        // A failed node's fragments may be half-changed: never keep them.
        if let Some(failed) = engine.tc().failure() {
            return Err(CheckpointError {
                id,
                path: self.data_dir.clone(),
                source: std::io::Error::other(failed),
            });
        }
        *next += 1;
        let started = Instant::now();
        // Read before the tables are listed: a table created after the list
        // logs everything after this point.
        let redo_start = engine.log().map_or(0, |log| log.next_lsn());
        let dir = self.data_dir.join(DIR).join(format!("{id:010}"));
        let fail = |path: &Path, source| CheckpointError {
            id,
            path: path.to_owned(),
            source,
        };
        self.storage
            .create_dir_all(&dir)
            .map_err(|e| fail(&dir, e))?;
        let mut fragments = Vec::new();
        for table in engine.tables() {
            for fragment in 0..table.fragments() {
                let image = engine
                    .image(&table, fragment)
                    .await
                    .map_err(|e| CheckpointError {
                        id,
                        path: dir.clone(),
                        source: std::io::Error::other(e),
                    })?;
                let Some((image, start)) = image else {
                    continue;
                };
                let name = format!("{}-{fragment}.frag", table.id);
                let path = dir.join(&name);
                let bytes = image.len() as u64;
                let storage = Arc::clone(&self.storage);
                let written = {
                    let path = path.clone();
                    tokio::task::spawn_blocking(move || storage.write_atomic(&path, &image))
                        .await
                        .expect("a checkpoint write does not panic")
                };
                written.map_err(|e| fail(&path, e))?;
                fragments.push(FragmentImage {
                    table: table.id.0,
                    fragment,
                    file: format!("{DIR}/{id:010}/{name}"),
                    redo_start: start,
                    bytes,
                });
            }
        }
        let manifest = Manifest {
            id,
            redo_start,
            fragments,
        };
        let path = self.data_dir.join(MANIFEST);
        let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
        self.storage
            .write_atomic(&path, &json)
            .map_err(|e| fail(&path, e))?;
        // The new checkpoint is complete: what only older ones needed goes.
        for old in self
            .storage
            .list(&self.data_dir.join(DIR))
            .map_err(|e| fail(&dir, e))?
        {
            if old != dir {
                self.storage
                    .remove_dir_all(&old)
                    .map_err(|e| fail(&old, e))?;
            }
        }
        let redo_dir = self.data_dir.join(REDO_DIR);
        let removed = redo::remove_before(&*self.storage, &redo_dir, redo_start)
            .map_err(|e| fail(&redo_dir, e))?;
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = (redo_start, Instant::now());
        Ok(Summary {
            id,
            fragments: manifest.fragments.len(),
            bytes: manifest.fragments.iter().map(|f| f.bytes).sum(),
            redo_start,
            redo_segments_removed: removed,
            took_ms: started.elapsed().as_millis() as u64,
        })
    }
}
