//! Node groups: the data nodes that each keep a replica of every fragment
//! of the group's databases (docs/replication.md).
//!
//! The control plane tells a node its group (`set_group`); the node keeps
//! it in `<data-dir>/group.json`, so that it knows its peers from the
//! moment it restarts. Each database has one primary in the group (chosen
//! by the control plane, spread over the group's nodes): it alone takes
//! the database's writes, and every commit it makes goes, through the
//! replication stream (`log::ship`), to the group's other nodes before it
//! is acknowledged.
//!
//! - `frame`: the node-to-node transport's messages and framing.
//! - `link`: a primary's connection to one backup, sending the stream.
//! - `apply`: a backup's side: taking a primary's stream and applying it.

mod apply;
mod frame;
mod link;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;
use shoal_wire::internal::{Group, Member, NodeId};
use shoal_wire::secret::ClusterSecret;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::node::Engine;

/// File name of the node's group in the data directory.
pub(crate) const GROUP_FILE: &str = "group.json";

/// Most nodes a group has (`--replicas` is 1, 2 or 3).
pub(crate) const MAX_REPLICAS: usize = 3;

/// A node's place in its group, and its links to the other nodes; clones
/// share it.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    me: NodeId,
    /// New at every start: a backup tells a primary's restart by it.
    boot: u64,
    engine: Engine,
    secret: ClusterSecret,
    /// Where the group is kept; none for a node without a data directory.
    file: Option<PathBuf>,
    group: ArcSwapOption<Group>,
    /// The links to the group's other nodes, by node id.
    links: Mutex<HashMap<u32, link::Handle>>,
    stopped: watch::Receiver<bool>,
}

/// Why a group was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GroupError {
    #[error("{0}")]
    Invalid(String),
    #[error("writing {path}: {source}")]
    Save {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Cluster {
    /// The cluster side of node `engine`, with the group `data_dir` keeps,
    /// if any.
    pub(crate) fn new(
        engine: Engine,
        secret: ClusterSecret,
        data_dir: Option<PathBuf>,
        stopped: watch::Receiver<bool>,
    ) -> Result<Cluster, GroupError> {
        let mut boot = [0u8; 8];
        getrandom::fill(&mut boot).expect("the OS random source works");
        let file = data_dir.map(|dir| dir.join(GROUP_FILE));
        let cluster = Cluster {
            inner: Arc::new(Inner {
                me: engine.node_id(),
                boot: u64::from_le_bytes(boot),
                engine,
                secret,
                file,
                group: ArcSwapOption::empty(),
                links: Mutex::default(),
                stopped,
            }),
        };
        if let Some(path) = &cluster.inner.file {
            match std::fs::read(path) {
                Ok(bytes) => {
                    let group: Group = serde_json::from_slice(&bytes)
                        .map_err(|e| GroupError::Invalid(format!("{}: {e}", path.display())))?;
                    cluster.check(&group)?;
                    cluster.adopt(group);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(GroupError::Save {
                        path: path.clone(),
                        source,
                    });
                }
            }
        }
        Ok(cluster)
    }

    pub(crate) fn me(&self) -> NodeId {
        self.inner.me
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The node's group, once it is in one.
    pub(crate) fn group(&self) -> Option<Arc<Group>> {
        self.inner.group.load_full()
    }

    /// The member `node` of this node's group.
    pub(crate) fn member(&self, node: u32) -> Option<Member> {
        let group = self.inner.group.load();
        let group = group.as_ref()?;
        group.members.iter().find(|m| m.node_id.0 == node).cloned()
    }

    /// Whether `group` is one this node can be in.
    fn check(&self, group: &Group) -> Result<(), GroupError> {
        let invalid = |m: String| Err(GroupError::Invalid(m));
        if group.members.is_empty() || group.members.len() > MAX_REPLICAS {
            return invalid(format!("a group has 1 to {MAX_REPLICAS} nodes"));
        }
        if !group.members.iter().any(|m| m.node_id == self.inner.me) {
            return invalid(format!("node {} is not a member", self.inner.me));
        }
        let mut ids: Vec<_> = group.members.iter().map(|m| m.node_id).collect();
        ids.sort();
        ids.dedup();
        if ids.len() != group.members.len() {
            return invalid("a node is listed twice".into());
        }
        for m in &group.members {
            let addr_ok = m.peer_addr.is_empty()
                || (m.peer_addr.len() <= 200 && m.peer_addr.parse::<SocketAddr>().is_ok());
            if !addr_ok {
                return invalid(format!(
                    "node {}: peer_addr is not an address and port",
                    m.node_id
                ));
            }
            if m.node_id != self.inner.me && m.peer_addr.is_empty() && group.members.len() > 1 {
                return invalid(format!("node {} has no peer_addr", m.node_id));
            }
        }
        if let Some(now) = self.inner.group.load().as_ref()
            && now.node_group != group.node_group
        {
            return invalid(format!(
                "this node is in node group {}, not {}",
                now.node_group, group.node_group
            ));
        }
        Ok(())
    }

    /// Puts this node in `group`, durably, and links it to the others.
    pub(crate) async fn set_group(&self, group: Group) -> Result<(), GroupError> {
        self.check(&group)?;
        if self.group().as_deref() == Some(&group) {
            return Ok(());
        }
        if let Some(path) = self.inner.file.clone() {
            let bytes = serde_json::to_vec_pretty(&group).expect("a group serializes");
            tokio::task::spawn_blocking(move || write_durably(&path, &bytes))
                .await
                .expect("a write does not panic")
                .map_err(|(path, source)| GroupError::Save { path, source })?;
        }
        tracing::info!(node_group = group.node_group, members = ?group.members.iter().map(|m| m.node_id.0).collect::<Vec<_>>(), "in a node group");
        self.adopt(group);
        Ok(())
    }

    /// Takes `group` as this node's: its other nodes are the backups of
    /// the databases it is the primary of.
    fn adopt(&self, group: Group) {
        let others: Vec<Member> = (group.members.iter())
            .filter(|m| m.node_id != self.inner.me)
            .cloned()
            .collect();
        self.inner.group.store(Some(Arc::new(group)));
        let ids: Vec<u32> = others.iter().map(|m| m.node_id.0).collect();
        self.inner
            .engine
            .tc()
            .workers()
            .log()
            .outbox()
            .set_backups(&ids);
        let mut links = self.inner.links.lock().unwrap_or_else(|e| e.into_inner());
        links.retain(|id, _| ids.contains(id));
        for member in others {
            let to = member.node_id.0;
            let changed = links.get(&to).is_none_or(|l| l.addr() != member.peer_addr);
            if changed {
                links.insert(to, link::start(self.clone(), member));
            }
        }
    }

    /// Serves the node-to-node transport on `listener` until the node stops.
    pub(crate) async fn serve(self, listener: TcpListener) {
        let mut stopped = self.inner.stopped.clone();
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = stopped.wait_for(|s| *s) => return,
            };
            match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    // On an LDM worker's thread, which syncs the redo log
                    // for its own tasks before it parks: a backup's wait for
                    // its log costs no hand-off to the log's writer thread.
                    let worker = usize::from(peer.port()) % self.engine().ldm_threads();
                    let serve = apply::serve(self.clone(), stream, peer);
                    self.engine().tc().spawn_on_worker(worker, serve);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a peer connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// Writes `bytes` to `path` so that a crash leaves the old file or the new
/// one, never a part.
fn write_durably(path: &std::path::Path, bytes: &[u8]) -> Result<(), (PathBuf, std::io::Error)> {
    use std::io::Write;
    let tmp = path.with_extension("json.tmp");
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|e| (path.to_path_buf(), e))
}
