//! The file operations durability needs, behind a trait: the real file
//! system in service, and an in-memory file system in tests that can fail a
//! sync, cut a write short, run out of space, and crash — forgetting
//! everything written since the last sync, or keeping a torn part of it —
//! as redb's crash tests do.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Rows, logs and checkpoints are tenants' data: readable by the node's
/// user only, whatever the process's umask.
const PRIVATE_DIR: u32 = 0o700;
const PRIVATE_FILE: u32 = 0o600;

/// A file written front to back from a position.
pub trait AppendFile: Send {
    /// Writes `bytes` where the last append ended.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Makes everything appended so far durable (`fdatasync`).
    fn sync(&mut self) -> io::Result<()>;
}

/// The file system, as durability uses it.
pub trait Storage: Send + Sync + std::fmt::Debug {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The files directly in `dir`, sorted by name; empty if it does not exist.
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    fn exists(&self, path: &Path) -> bool;
    /// Replaces `path` with `bytes` all at once, durably: a crash leaves the
    /// old contents or the new, never a mix.
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// Opens `path` to append at byte `at` on, creating it (durably) if
    /// needed, with its first `reserve` bytes written (zeros where nothing
    /// was). Writes over written space change no file-system metadata — not
    /// the size, not the extent map, as writes into merely allocated
    /// (`fallocate`d) space would — so syncing them is one write to the
    /// device and a cache flush, nothing more.
    fn open_append(&self, path: &Path, at: u64, reserve: u64) -> io::Result<Box<dyn AppendFile>>;
    /// Renames `from` to `to`, durably.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Cuts `path` to `len` bytes, durably.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
pub struct FileSystem;

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

struct RealAppend {
    file: fs::File,
    at: u64,
}

impl AppendFile for RealAppend {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, self.at)?;
        self.at += bytes.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// Writes zeros from the end of `file` to its byte `len`.
fn reserve(file: &fs::File, len: u64) -> io::Result<()> {
    const CHUNK: usize = 1 << 20;
    let zeros = vec![0u8; CHUNK];
    let mut at = file.metadata()?.len();
    while at < len {
        let n = (len - at).min(CHUNK as u64);
        file.write_all_at(&zeros[..n as usize], at)?;
        at += n;
    }
    Ok(())
}

impl Storage for FileSystem {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_DIR)
            .create(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut paths = entries
            .map(|e| e.map(|e| e.path()))
            .collect::<io::Result<Vec<_>>>()?;
        paths.sort();
        Ok(paths)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let tmp = path.with_extension("tmp");
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(PRIVATE_FILE)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        sync_dir(parent(path))
    }

    fn open_append(
        &self,
        path: &Path,
        at: u64,
        reserve_bytes: u64,
    ) -> io::Result<Box<dyn AppendFile>> {
        let existed = path.exists();
        let file = fs::OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(false)
            .mode(PRIVATE_FILE)
            .open(path)?;
        let grows = file.metadata()?.len() < reserve_bytes;
        if grows {
            reserve(&file, reserve_bytes)?;
        }
        if grows || !existed {
            file.sync_all()?;
        }
        if !existed {
            sync_dir(parent(path))?;
        }
        Ok(Box::new(RealAppend { file, at }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)?;
        sync_dir(parent(to))
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let file = fs::OpenOptions::new().write(true).open(path)?;
        file.set_len(len)?;
        file.sync_all()
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)?;
        sync_dir(parent(path))
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        match fs::remove_dir_all(dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => sync_dir(parent(dir)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::io_mem::{Faults, MemStorage};

    #[test]
    fn a_crash_keeps_what_was_synced() {
        let fs = MemStorage::default();
        let path = Path::new("/d/log");
        let mut f = fs.open_append(path, 0, 0).unwrap();
        f.append(b"hello ").unwrap();
        f.sync().unwrap();
        f.append(b"world").unwrap();
        fs.crash(0);
        assert_eq!(fs.read(path).unwrap(), b"hello ");
        let mut f = fs.open_append(path, 6, 0).unwrap();
        f.append(b"again").unwrap();
        fs.crash(3);
        let torn = fs.read(path).unwrap();
        assert_eq!(&torn[..8], b"hello ag");
        assert_ne!(torn[8], b'a', "the torn byte is garbage");
    }

    #[test]
    fn a_crash_in_reserved_space_keeps_what_was_synced() {
        let fs = MemStorage::default();
        let path = Path::new("/d/log");
        let mut f = fs.open_append(path, 0, 16).unwrap();
        f.append(b"hello ").unwrap();
        f.sync().unwrap();
        f.append(b"world").unwrap();
        fs.crash(0);
        assert_eq!(fs.read(path).unwrap(), b"hello \0\0\0\0\0\0\0\0\0\0");
        let mut f = fs.open_append(path, 6, 16).unwrap();
        f.append(b"again").unwrap();
        fs.crash(3);
        let torn = fs.read(path).unwrap();
        assert_eq!(torn.len(), 16);
        assert_eq!(&torn[..8], b"hello ag");
        assert_ne!(torn[8], b'a', "the torn byte is garbage");
        assert!(torn[9..].iter().all(|b| *b == 0));
    }

    #[test]
    fn faults_are_injected() {
        let fs = MemStorage::default();
        let path = Path::new("/d/log");
        let mut f = fs.open_append(path, 0, 0).unwrap();
        fs.set_faults(Faults {
            fail_sync: true,
            space_left: Some(3),
            ..Faults::default()
        });
        let e = f.append(b"abcdef").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        assert_eq!(fs.len(path), 3, "a short write");
        assert!(f.sync().is_err());
        assert!(fs.write_atomic(Path::new("/d/x"), b"1").is_err());
    }

    #[test]
    fn the_real_file_system_writes_atomically_and_appends() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystem;
        let file = dir.path().join("a.json");
        fs.write_atomic(&file, b"one").unwrap();
        fs.write_atomic(&file, b"two").unwrap();
        assert_eq!(fs.read(&file).unwrap(), b"two");
        let log = dir.path().join("log");
        let mut f = fs.open_append(&log, 0, 0).unwrap();
        f.append(b"abc").unwrap();
        f.sync().unwrap();
        fs.truncate(&log, 1).unwrap();
        assert_eq!(fs.read(&log).unwrap(), b"a");
        // Reopened with room reserved: the reserved tail reads as zeros and
        // appends overwrite it from where they start.
        let mut f = fs.open_append(&log, 1, 8).unwrap();
        f.append(b"bc").unwrap();
        f.sync().unwrap();
        assert_eq!(fs.read(&log).unwrap(), b"abc\0\0\0\0\0");
        assert_eq!(
            fs.list(dir.path()).unwrap(),
            vec![file.clone(), log.clone()]
        );
        fs.remove(&log).unwrap();
        assert!(!fs.exists(&log));
    }
}
