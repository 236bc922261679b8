//! Shoal attacked from outside: by another user of the same machine, and by
//! clients that send what they should not. Each test starts the real
//! binary, tries the attack, and checks that it held and changed nothing.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::Shoal;

/// Every directory and file under `dir` with its mode (symbolic links
/// skipped).
fn modes(dir: &Path) -> Vec<(PathBuf, bool, u32)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(path) = todo.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.file_type().is_symlink() {
            continue;
        }
        out.push((
            path.clone(),
            meta.is_dir(),
            meta.permissions().mode() & 0o7777,
        ));
        if meta.is_dir() {
            todo.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
    }
    out
}

/// Fails unless every directory under `dir` is 0700 and every file 0600.
fn assert_private(dir: &Path, must_have: &[&str]) {
    let all = modes(dir);
    for (path, is_dir, mode) in &all {
        let want = if *is_dir { 0o700 } else { 0o600 };
        assert_eq!(*mode, want, "{} is {mode:o}", path.display());
    }
    for name in must_have {
        assert!(
            all.iter().any(|(p, _, _)| p.ends_with(name)),
            "{name} is among {all:?}"
        );
    }
}

/// A data directory `root/name` as an older version left it: open to
/// everyone.
fn loose_dir(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("left-by-an-older-version"), b"x").unwrap();
    std::fs::set_permissions(
        dir.join("left-by-an-older-version"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    dir
}

#[tokio::test]
async fn the_demo_keeps_its_secrets_from_other_users_of_the_machine() {
    let root = tempfile::tempdir().unwrap();
    let dir = loose_dir(root.path(), "data");
    let mut shoal = Shoal::start_in(
        &["demo", "--data-memory", "64M", "--control-port", "0"],
        &dir,
    );
    shoal.wait_for("written to");
    // While it runs: the store with its -wal and -shm, the redo log.
    assert_private(
        &dir,
        &[
            "control-plane.db",
            "control-plane.db-wal",
            "control-plane.db-shm",
            "demo.json",
            "cluster-secret",
            "catalog.json",
            "left-by-an-older-version",
        ],
    );
    let (code, stderr) = shoal.terminate();
    assert_eq!(code, Some(0));
    assert!(stderr.contains("made them private"), "{stderr}");
    assert_private(&dir, &["demo.json"]);
}

#[tokio::test]
async fn a_control_plane_and_a_data_node_tighten_their_directories() {
    let root = tempfile::tempdir().unwrap();
    let cp_dir = loose_dir(root.path(), "cp");
    let control = Shoal::control_plane_in(None, &[], &[], &cp_dir);
    assert_private(&cp_dir, &["control-plane.db", "cluster-secret"]);
    let node_dir = loose_dir(root.path(), "node");
    let node = Shoal::start_in(&["datanode", "--data-memory", "16M"], &node_dir);
    assert_private(&node_dir, &["catalog.json", "cluster-secret"]);
    let (code, stderr) = node.terminate();
    assert_eq!(code, Some(0));
    assert!(stderr.contains("made them private"), "{stderr}");
    assert_private(&node_dir, &[]);
    drop(control);
}
