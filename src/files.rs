//! Data directories private to the service's user.
//!
//! A data directory holds secrets: the control plane's store keeps the key
//! that signs session tokens, `cluster-secret` admits a caller to the
//! internal API, `demo.json` holds passwords and an API key, and the redo log
//! and checkpoints hold every tenant's rows. So every `shoal` process makes
//! what it creates readable by its own user only (umask 077, which also
//! covers the files SQLite makes beside its store), and at start tightens a
//! data directory that an older version or an operator left open: 0700 for
//! directories, 0600 for files.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;

const DIR_MODE: u32 = 0o700;
const FILE_MODE: u32 = 0o600;

/// Makes everything this process creates from now on private to its user.
pub(crate) fn private_umask() {
    // SAFETY: umask only swaps the process's file-mode mask; it cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

/// Creates `dir` (0700) if it is missing, and tightens it and everything
/// in it to 0700 for directories and 0600 for files, logging what was
/// looser. Symbolic links are neither followed nor changed.
pub(crate) fn private_dir(dir: &Path) -> anyhow::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .with_context(|| format!("creating the data directory {}", dir.display()))?;
    let mut tightened = Vec::new();
    tighten(dir, &mut tightened)
        .with_context(|| format!("making the data directory {} private", dir.display()))?;
    if let Some(first) = tightened.first() {
        tracing::warn!(
            dir = %dir.display(),
            count = tightened.len(),
            example = %first.display(),
            "others could read files of the data directory; made them private to this user (directories 0700, files 0600)"
        );
    }
    Ok(())
}

fn tighten(path: &Path, tightened: &mut Vec<PathBuf>) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Ok(());
    }
    let want = if kind.is_dir() { DIR_MODE } else { FILE_MODE };
    let mode = meta.permissions().mode() & 0o7777;
    // Only ever take bits away: a file the owner cannot write stays so.
    let private = mode & want;
    if mode != private {
        fs::set_permissions(path, fs::Permissions::from_mode(private))?;
        tightened.push(path.to_owned());
    }
    if kind.is_dir() {
        for entry in fs::read_dir(path)? {
            tighten(&entry?.path(), tightened)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn loose_modes_are_tightened_and_tight_ones_kept() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        fs::create_dir_all(dir.join("redo")).unwrap();
        fs::write(dir.join("control-plane.db"), b"x").unwrap();
        fs::write(dir.join("redo/00000001"), b"x").unwrap();
        fs::write(dir.join("read-only"), b"x").unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(dir.join("redo"), fs::Permissions::from_mode(0o777)).unwrap();
        fs::set_permissions(
            dir.join("control-plane.db"),
            fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        fs::set_permissions(dir.join("redo/00000001"), fs::Permissions::from_mode(0o666)).unwrap();
        fs::set_permissions(dir.join("read-only"), fs::Permissions::from_mode(0o400)).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", dir.join("link")).unwrap();
        let target_mode = mode(Path::new("/etc/hostname"));

        private_dir(&dir).unwrap();

        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("redo")), 0o700);
        assert_eq!(mode(&dir.join("control-plane.db")), 0o600);
        assert_eq!(mode(&dir.join("redo/00000001")), 0o600);
        assert_eq!(mode(&dir.join("read-only")), 0o400, "no bit is added");
        assert_eq!(
            mode(Path::new("/etc/hostname")),
            target_mode,
            "links are not followed"
        );
    }

    #[test]
    fn a_missing_directory_is_made_private() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
    }
}
