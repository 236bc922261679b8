//! Files in memory, for tests of crashes and failing disks.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::log::io::{AppendFile, Storage};

/// What an in-memory file holds: what a crash keeps, and what was written.
#[derive(Debug, Default, Clone)]
struct MemFile {
    durable: Vec<u8>,
    written: Vec<u8>,
}

/// Faults the in-memory file system injects.
#[derive(Debug, Default, Clone)]
pub(crate) struct Faults {
    /// Syncs wait until `MemStorage::release_syncs`.
    pub hold_syncs: bool,
    /// Every sync fails.
    pub fail_sync: bool,
    /// Appends fail once this many more bytes are written, after writing
    /// what fits (a short write), with "no space left on device".
    pub space_left: Option<u64>,
}

/// Files in memory, for tests of crashes and failing disks.
#[derive(Debug, Default, Clone)]
pub(crate) struct MemStorage {
    inner: Arc<Mutex<MemInner>>,
    changed: Arc<std::sync::Condvar>,
}

#[derive(Debug, Default)]
struct MemInner {
    files: BTreeMap<PathBuf, MemFile>,
    faults: Faults,
    /// Syncs done, and syncs waiting for `release_syncs`.
    syncs: usize,
    held: usize,
}

struct MemAppend {
    storage: MemStorage,
    path: PathBuf,
    at: usize,
}

impl AppendFile for MemAppend {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut inner = self.storage.lock();
        let fits = match inner.faults.space_left {
            Some(left) => (left as usize).min(bytes.len()),
            None => bytes.len(),
        };
        if let Some(left) = inner.faults.space_left.as_mut() {
            *left -= fits as u64;
        }
        let file = inner
            .files
            .get_mut(&self.path)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let end = self.at + fits;
        if file.written.len() < end {
            file.written.resize(end, 0);
        }
        file.written[self.at..end].copy_from_slice(&bytes[..fits]);
        self.at = end;
        if fits < bytes.len() {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "no space left on device",
            ));
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut inner = self.storage.lock();
        if inner.faults.hold_syncs {
            inner.held += 1;
            self.storage.changed.notify_all();
            while inner.faults.hold_syncs {
                inner = self
                    .storage
                    .changed
                    .wait(inner)
                    .unwrap_or_else(|e| e.into_inner());
            }
            inner.held -= 1;
        }
        inner.syncs += 1;
        if inner.faults.fail_sync {
            return Err(io::Error::other("injected fsync failure: I/O error"));
        }
        let file = inner
            .files
            .get_mut(&self.path)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        file.durable.clone_from(&file.written);
        Ok(())
    }
}

impl MemStorage {
    fn lock(&self) -> std::sync::MutexGuard<'_, MemInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
        self.changed.notify_all();
    }

    /// Waits until a sync is held by `Faults::hold_syncs`.
    pub(crate) fn wait_for_held_sync(&self) {
        let mut inner = self.lock();
        while inner.held == 0 {
            inner = self.changed.wait(inner).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Lets held syncs go, and syncs no longer wait.
    pub(crate) fn release_syncs(&self) {
        self.lock().faults.hold_syncs = false;
        self.changed.notify_all();
    }

    /// Syncs done so far.
    pub(crate) fn syncs(&self) -> usize {
        self.lock().syncs
    }

    /// Forgets everything not synced, keeping of each file's unsynced bytes
    /// only the first `torn` from where the file last differed from what
    /// was synced (a write cut off by the crash).
    pub(crate) fn crash(&self, torn: usize) {
        for file in self.lock().files.values_mut() {
            let (durable, written) = (&mut file.durable, &file.written);
            let from = durable
                .iter()
                .zip(written)
                .position(|(d, w)| d != w)
                .unwrap_or(durable.len().min(written.len()));
            let keep = written.len().min(from + torn);
            if durable.len() < keep {
                durable.resize(keep, 0);
            }
            durable[from..keep].copy_from_slice(&written[from..keep]);
            // A torn write can also leave garbage where it stopped.
            if keep > from {
                durable[keep - 1] ^= 0x5a;
            }
            file.written.clone_from(&file.durable);
        }
    }

    /// Flips a byte of a file, as bit rot would.
    pub(crate) fn corrupt(&self, path: &Path, at: usize) {
        let mut inner = self.lock();
        let file = inner.files.get_mut(path).expect("file exists");
        file.written[at] ^= 0xff;
        file.durable.clone_from(&file.written);
    }

    /// The length of a file.
    pub(crate) fn len(&self, path: &Path) -> usize {
        self.lock().files.get(path).map_or(0, |f| f.written.len())
    }
}

impl Storage for MemStorage {
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        // Files directly in `dir`, and the directories files deeper down are in.
        let mut children: Vec<PathBuf> = self
            .lock()
            .files
            .keys()
            .filter_map(|p| {
                p.strip_prefix(dir)
                    .ok()?
                    .components()
                    .next()
                    .map(|c| dir.join(c))
            })
            .collect();
        children.dedup();
        Ok(children)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.lock()
            .files
            .get(path)
            .map(|f| f.written.clone())
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn exists(&self, path: &Path) -> bool {
        self.lock().files.contains_key(path)
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut inner = self.lock();
        if inner.faults.fail_sync {
            return Err(io::Error::other("injected fsync failure: I/O error"));
        }
        if inner
            .faults
            .space_left
            .is_some_and(|left| left < bytes.len() as u64)
        {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "no space left on device",
            ));
        }
        let file = MemFile {
            durable: bytes.to_vec(),
            written: bytes.to_vec(),
        };
        inner.files.insert(path.to_owned(), file);
        Ok(())
    }

    fn open_append(&self, path: &Path, at: u64, reserve: u64) -> io::Result<Box<dyn AppendFile>> {
        let mut inner = self.lock();
        let file = inner.files.entry(path.to_owned()).or_default();
        let reserve = reserve as usize;
        // Reserved space is zeros, durably.
        for bytes in [&mut file.written, &mut file.durable] {
            if bytes.len() < reserve {
                bytes.resize(reserve, 0);
            }
        }
        Ok(Box::new(MemAppend {
            storage: self.clone(),
            path: path.to_owned(),
            at: at as usize,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut inner = self.lock();
        let file = inner
            .files
            .remove(from)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        inner.files.insert(to.to_owned(), file);
        Ok(())
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut inner = self.lock();
        let file = inner
            .files
            .get_mut(path)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        file.written.truncate(len as usize);
        file.durable.clone_from(&file.written);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.lock().files.remove(path);
        Ok(())
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.lock().files.retain(|p, _| !p.starts_with(dir));
        Ok(())
    }
}
