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
//! Which nodes are live is the group's **view**, numbered, and moved on
//! only by the arbitrator (the control plane): a node that finds another
//! dead — its connection reset, or no answer to heartbeats for
//! `SUSPECT_AFTER` — asks for the next view without it, and the dead
//! node's primaries go to the next live node of the group. A node that
//! (re)starts serves nothing until it is in the view again: a live node
//! catches it up (`catchup`), or, if none of the view is alive and it is
//! in the view itself, it goes on alone from its own disk.
//!
//! - `frame`: the node-to-node transport's messages and framing.
//! - `link`: a connection to another node of the group: the stream to a
//!   backup, and heartbeats.
//! - `apply`: the other side: taking a primary's stream and applying it.
//! - `catchup`: copying a live node's rows to a node back.
//! - `arbiter`: asking the control plane for views.
//! - `relayed`: Redis and MySQL connections carried on to a database's primary.
//! - `forward`: REST requests sent on to a database's primary.
//! - `directory`: where other node groups' databases are served.

mod apply;
mod arbiter;
mod catchup;
mod directory;
mod forward;
mod frame;
mod link;
mod relayed;

pub(crate) use directory::ServedElsewhere;
pub(crate) use forward::{Answered, ForwardError, Handler, Request as Forwarded};
pub(crate) use relayed::{Front, Relayed};

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use shoal_wire::internal::{Group, Member, NodeId, View, ViewChange};
use shoal_wire::secret::ClusterSecret;
use tokio::net::TcpListener;
use tokio::sync::watch;

use self::arbiter::Arbiter;
use crate::node::Engine;
use crate::tc::Database;

/// A peer not heard from for this long is suspected dead. (A peer that is
/// killed is found at once: its port refuses the link's reconnection.)
pub(crate) const SUSPECT_AFTER: Duration = Duration::from_millis(400);
/// How often a link with nothing to send says it is alive.
pub(crate) const HEARTBEAT_EVERY: Duration = Duration::from_millis(100);
/// How often a node looks at its peers.
const WATCH_EVERY: Duration = Duration::from_millis(50);
/// A node back that finds no live node of its view for this long, and is in
/// the view itself, goes on alone.
const ALONE_AFTER: Duration = Duration::from_secs(2);
/// A node that suspects a peer and cannot reach the arbitrator for this
/// long stops serving: the other side may have been told to go on.
const UNDECIDED_FOR: Duration = Duration::from_secs(1);

/// File name of the node's group in the data directory.
pub(crate) const GROUP_FILE: &str = "group.json";

/// Present in the data directory while the node's replicas are emptied
/// and not yet caught up.
pub(crate) const EMPTIED_FILE: &str = "emptied";

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
    started: Instant,
    engine: Engine,
    secret: ClusterSecret,
    /// Where the group is kept; none for a node without a data directory.
    file: Option<PathBuf>,
    group: ArcSwapOption<Group>,
    /// The links to the group's other nodes, by node id.
    links: Mutex<HashMap<u32, link::Handle>>,
    stopped: watch::Receiver<bool>,
    /// The control plane, which decides views; none for a node alone.
    arbiter: Option<Arbiter>,
    /// When each peer was last heard from on this node's link to it, and
    /// whether the link is up.
    heard: Mutex<HashMap<u32, (Instant, bool)>>,
    /// Whether this node has been let into its view since it started (or
    /// since it was last out of it).
    joined: AtomicBool,
    /// This node's replicas were emptied to be caught up (also on disk).
    emptied: AtomicBool,
    /// While this node waits to be let in by a run starting from view N:
    /// N. The first view after it with this node in it lets it in.
    let_in_after: Mutex<Option<u64>>,
    /// The node is stopping: it hands its primaries on and leaves.
    leaving: AtomicBool,
    /// Nodes this node is catching up, each with its latest request.
    catching_up: Runs,
    /// Nodes this node is handing their primaries back to.
    handing_back: UnderWay,
    /// A fetch of the view from the arbitrator is under way.
    refreshing: AtomicBool,
    /// Moved on each time the view has been acted on (primaries may have
    /// moved): for requests and connections handed to a primary.
    placed: watch::Sender<u64>,
    /// The node's own runtime: the cluster's work runs there, never on an
    /// LDM worker's thread (see `Cluster::spawn`).
    runtime: tokio::runtime::Handle,
    /// The front ends that serve connections relayed to this node.
    relayed: relayed::Fronts,
    /// The REST front end, for requests sent on to this node.
    forwarded: std::sync::OnceLock<forward::Handler>,
    /// The connections this node sends REST requests on by.
    channels: forward::Channels,
    /// Where nodes being caught up answer digests.
    repairs: catchup::Repairs,
    /// The digests this node has answered while being caught up.
    digests: apply::Digested,
    /// Where the cluster's databases are served.
    directory: directory::Known,
}

/// The nodes some work is under way for: one at a time for each node.
#[derive(Debug, Default)]
struct UnderWay(Mutex<HashSet<u32>>);

impl UnderWay {
    fn nodes(&self) -> std::sync::MutexGuard<'_, HashSet<u32>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks `node`: false if it was already.
    fn begin(&self, node: u32) -> bool {
        self.nodes().insert(node)
    }

    fn end(&self, node: u32) {
        self.nodes().remove(&node);
    }

    fn has(&self, node: u32) -> bool {
        self.nodes().contains(&node)
    }
}

/// Work under way for some nodes, numbered: a node that asks again
/// supersedes the run under way for it (which stops at its next step).
#[derive(Debug, Default)]
struct Runs {
    runs: Mutex<(u64, HashMap<u32, u64>)>,
    /// Held by a run while it asks for the view that lets its node in, and
    /// by a new request while it supersedes: a run superseded never lets
    /// its node in after.
    admitting: tokio::sync::Mutex<()>,
}

impl Runs {
    fn runs(&self) -> std::sync::MutexGuard<'_, (u64, HashMap<u32, u64>)> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a run for `node`: its number.
    fn start(&self, node: u32) -> u64 {
        let mut runs = self.runs();
        runs.0 += 1;
        let run = runs.0;
        runs.1.insert(node, run);
        run
    }

    /// Whether `run` is still `node`'s latest.
    fn current(&self, node: u32, run: u64) -> bool {
        self.runs().1.get(&node) == Some(&run)
    }

    /// Whether some run for `node` is under way.
    fn any(&self, node: u32) -> bool {
        self.runs().1.contains_key(&node)
    }

    /// Ends `run`, doing `last` if it was still `node`'s latest (no run
    /// can start meanwhile): whether it was.
    fn end_with(&self, node: u32, run: u64, last: impl FnOnce()) -> bool {
        let mut runs = self.runs();
        let current = runs.1.get(&node) == Some(&run);
        if current {
            runs.1.remove(&node);
            last();
        }
        current
    }
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
    /// if any. Called on the node's own runtime, where `Cluster::spawn`
    /// runs the cluster's work.
    pub(crate) fn new(
        engine: Engine,
        secret: ClusterSecret,
        data_dir: Option<PathBuf>,
        control_plane: Option<&str>,
        stopped: watch::Receiver<bool>,
    ) -> Result<Cluster, GroupError> {
        let file = data_dir.map(|dir| dir.join(GROUP_FILE));
        let emptied = emptied_file(file.as_deref()).is_some_and(|f| f.exists());
        let cluster = Cluster {
            inner: Arc::new(Inner {
                me: engine.node_id(),
                started: Instant::now(),
                engine,
                file,
                arbiter: control_plane.map(|url| Arbiter::new(url, secret.clone())),
                secret,
                group: ArcSwapOption::empty(),
                links: Mutex::default(),
                stopped,
                heard: Mutex::default(),
                joined: AtomicBool::new(false),
                emptied: AtomicBool::new(emptied),
                let_in_after: Mutex::new(None),
                leaving: AtomicBool::new(false),
                catching_up: Runs::default(),
                handing_back: UnderWay::default(),
                refreshing: AtomicBool::new(false),
                placed: watch::Sender::new(0),
                runtime: tokio::runtime::Handle::current(),
                relayed: relayed::Fronts::default(),
                forwarded: std::sync::OnceLock::new(),
                channels: forward::Channels::default(),
                repairs: catchup::Repairs::default(),
                digests: apply::Digested::default(),
                directory: directory::Known::default(),
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

    /// Takes `group` as this node's, links it to the others, and takes its
    /// view as any view told (`set_view`: only if newer).
    fn adopt(&self, group: Group) {
        let others: Vec<Member> = (group.members.iter())
            .filter(|m| m.node_id != self.inner.me)
            .cloned()
            .collect();
        let told = group.view.clone();
        let known = self.group().map(|now| now.view.clone());
        self.inner.group.store(Some(Arc::new(Group {
            view: known.unwrap_or_default(),
            ..group
        })));
        let mut links = self.inner.links.lock().unwrap_or_else(|e| e.into_inner());
        let ids: Vec<u32> = others.iter().map(|m| m.node_id.0).collect();
        links.retain(|id, _| ids.contains(id));
        for member in others {
            let to = member.node_id.0;
            let changed = links.get(&to).is_none_or(|l| l.addr() != member.peer_addr);
            if changed {
                links.insert(to, link::start(self.clone(), member));
            }
        }
        drop(links);
        if !self.set_view(told) {
            self.apply_view();
        }
    }

    /// The view this node knows.
    pub(crate) fn view(&self) -> View {
        self.group().map(|g| g.view.clone()).unwrap_or_default()
    }

    /// The number of the view this node knows.
    pub(crate) fn view_number(&self) -> u64 {
        self.inner
            .group
            .load()
            .as_ref()
            .map_or(0, |g| g.view.number)
    }

    /// Takes `view` if it is newer than the one this node knows, and acts
    /// on it: whether it did.
    pub(crate) fn set_view(&self, view: View) -> bool {
        let Some(group) = self.group() else {
            return false;
        };
        if view.number < group.view.number || view == group.view {
            return false;
        }
        let was_in = group.view.members.contains(&self.inner.me);
        let is_in = view.members.contains(&self.inner.me);
        tracing::info!(view = view.number, members = ?view.members.iter().map(|m| m.0).collect::<Vec<_>>(), moved = ?view.moved, "new view of the node group");
        if was_in && !is_in && self.inner.joined.swap(false, Ordering::AcqRel) {
            tracing::warn!(
                view = view.number,
                "this node is out of its group's view: it serves nothing until it has caught up again"
            );
        }
        let mut group = (*group).clone();
        group.view = view.clone();
        self.inner.group.store(Some(Arc::new(group)));
        self.let_in_by(&view);
        self.apply_view();
        true
    }

    /// Lets this node in if it waits to be and `view` lets it in: the
    /// first view after the one its catching up started from, with it in
    /// it. Whether it did (the caller acts on the view).
    fn let_in_by(&self, view: &View) -> bool {
        let mut after = (self.inner.let_in_after.lock()).unwrap_or_else(|e| e.into_inner());
        if !(after.is_some_and(|from| view.number > from) && view.members.contains(&self.inner.me))
        {
            return false;
        }
        *after = None;
        drop(after);
        if let Err(e) = self.mark_emptied(false) {
            tracing::error!(error = %e, "could not mark this node's replicas caught up; it stays out");
            return false;
        }
        self.inner.joined.store(true, Ordering::Release);
        tracing::info!(view = view.number, "caught up: in the view again");
        true
    }

    /// From now on, the first view after `from` with this node in it lets
    /// it in — the moment the node hears of it, so that it serves before
    /// its primaries can be handed back to it.
    pub(crate) fn await_let_in(&self, from: u64) {
        *(self.inner.let_in_after.lock()).unwrap_or_else(|e| e.into_inner()) = Some(from);
        if self.let_in_by(&self.view()) {
            self.apply_view();
        }
    }

    /// Stops waiting to be let in.
    pub(crate) fn stop_awaiting_let_in(&self) {
        *(self.inner.let_in_after.lock()).unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Marks (or clears) on disk that this node's replicas were emptied
    /// to be caught up: until it is let in again, its disk is no replica
    /// its group can go on from, so it never goes on alone.
    pub(crate) fn mark_emptied(&self, emptied: bool) -> Result<(), String> {
        self.inner.emptied.store(emptied, Ordering::Release);
        let Some(file) = self.emptied_file() else {
            return Ok(());
        };
        match emptied {
            true => write_durably(&file, b"replicas emptied to be caught up\n")
                .map_err(|(path, e)| format!("writing {}: {e}", path.display())),
            false => match std::fs::remove_file(&file) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(format!("removing {}: {e}", file.display()))
                }
                _ => Ok(()),
            },
        }
    }

    /// Whether this node's replicas were emptied and not caught up since
    /// (read from disk at start).
    pub(crate) fn emptied(&self) -> bool {
        self.inner.emptied.load(Ordering::Acquire)
    }

    fn emptied_file(&self) -> Option<PathBuf> {
        emptied_file(self.inner.file.as_deref())
    }

    /// Whether this node serves: not in a group of several, or let into
    /// its view.
    pub(crate) fn serving(&self) -> bool {
        match self.group() {
            None => true,
            Some(g) if g.members.len() == 1 => true,
            Some(g) => {
                self.inner.joined.load(Ordering::Acquire) && g.view.members.contains(&self.inner.me)
            }
        }
    }

    /// Acts on the view: which databases this node is the primary of, which
    /// backups commits wait for, whether it serves at all.
    fn apply_view(&self) {
        let serving = self.serving();
        let tc = self.inner.engine.tc();
        tc.set_not_serving(
            (!serving).then_some(
                "it is out of its node group's view (starting, catching up, or cut off)",
            ),
        );
        let view = self.view();
        let backups: Vec<u32> = if serving {
            (view.members.iter())
                .filter(|&&m| m != self.inner.me)
                .map(|m| m.0)
                .collect()
        } else {
            Vec::new()
        };
        let outbox = tc.workers().log().outbox();
        if serving {
            outbox.unfence();
        } else {
            // A commit admitted before and made after this is never
            // acknowledged: the view may go on without this node.
            outbox.fence();
        }
        outbox.set_backups(&backups);
        for db in self.inner.engine.databases() {
            self.place(&db);
        }
        self.inner.placed.send_modify(|n| *n += 1);
    }

    /// Waits until one of `dbs` no longer has node `primary` as its primary.
    pub(crate) async fn moved(&self, dbs: &[Arc<Database>], primary: u32) {
        let mut placed = self.inner.placed.subscribe();
        while dbs.iter().all(|db| db.primary() == primary) {
            if placed.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// The node `db` prefers as its primary (this one, outside a group).
    fn preferred(&self, db: &Database) -> NodeId {
        match db.preferred_primary() {
            0 => self.inner.me,
            p => NodeId(p),
        }
    }

    /// Sets which node is `db`'s primary now, by the view.
    pub(crate) fn place(&self, db: &Database) {
        let me = self.inner.me;
        let preferred = self.preferred(db);
        let group = self.group();
        let (primary, serving) = match &group {
            Some(g) if g.members.len() > 1 => (g.view.primary(preferred), self.serving()),
            _ => (Some(preferred), true),
        };
        let primary = primary.unwrap_or(preferred);
        // Primaries being handed on (back to their node, while it is in
        // the view, or to the others by a node stopping) take no writes
        // meanwhile: those that come wait for the view that moves them.
        let in_view = group.is_some_and(|g| g.view.members.contains(&preferred));
        let handing_back = in_view && self.inner.handing_back.has(preferred.0);
        let handing_on =
            primary == me && (handing_back || self.inner.leaving.load(Ordering::Acquire));
        db.set_placement(
            primary.0,
            serving && primary == me && !handing_on,
            handing_on,
        );
    }

    /// Waits until this node has acted on a view after `placed`'s last
    /// (primaries may have moved), or for `within`.
    pub(crate) async fn placed_again(&self, mut placed: watch::Receiver<u64>, within: Duration) {
        let _ = tokio::time::timeout(within, placed.changed()).await;
    }

    /// Where the views this node acts on are counted, for `placed_again`.
    pub(crate) fn placed(&self) -> watch::Receiver<u64> {
        self.inner.placed.subscribe()
    }

    /// Hands this node's primaries on to the others of its view and leaves
    /// it, for a clean stop: writes of its databases that come meanwhile
    /// wait, and go to the new primary once the view has moved them. A
    /// node whose peers are all down stays in the view (the group goes on
    /// from its disk when it starts again).
    pub(crate) async fn leave(&self) {
        const WITHIN: Duration = Duration::from_secs(5);
        let me = self.inner.me;
        if self.group().is_none_or(|g| g.members.len() < 2) || !self.serving() {
            return;
        }
        let view = self.view();
        let suspects = self.suspects(&view);
        let live_peer =
            (view.members.iter()).any(|&m| m != me && suspects.iter().all(|s| s.0 != m));
        if !live_peer {
            return;
        }
        self.inner.leaving.store(true, Ordering::Release);
        self.apply_view();
        let started = Instant::now();
        writes_done(&self.inner.engine.databases(), WITHIN).await;
        match self.propose(vec![me], Vec::new()).await {
            Ok(view) if !view.members.contains(&me) => tracing::info!(
                view = view.number,
                took_ms = started.elapsed().as_millis() as u64,
                "stopping: handed this node's primaries on and left the view"
            ),
            Ok(view) => tracing::warn!(
                view = view.number,
                "stopping: the arbitrator kept this node in the view"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "stopping: could not leave the view; the others will find this node gone")
            }
        }
    }

    /// This node's row of `ndbinfo.nodes`.
    pub(crate) fn nodes_row(&self) -> Vec<shoal_wire::ndbinfo::Cell> {
        let primaries: u64 = (self.inner.engine.tables().iter())
            .filter(|t| t.database.is_primary_here())
            .map(|t| u64::from(t.fragments()))
            .sum();
        let status = if self.serving() {
            "STARTED"
        } else {
            "STARTING"
        };
        vec![
            self.inner.me.0.into(),
            self.group().map(|g| g.node_group).into(),
            status.into(),
            self.inner.started.elapsed().as_secs().into(),
            primaries.into(),
        ]
    }

    /// Takes what another node of the group admitted for its databases
    /// into this node's limiters (a database this node does not hold is
    /// passed over).
    pub(crate) fn admitted_elsewhere(&self, used: &[frame::Used]) {
        for used in used {
            if let Ok(db) = self.inner.engine.database(&used.database) {
                db.governance.admitted_elsewhere(used.reads, used.writes);
            }
        }
    }

    /// Notes that `peer` was heard from (or that its link is down).
    pub(crate) fn heard(&self, peer: u32, up: bool) {
        let mut heard = self.inner.heard.lock().unwrap_or_else(|e| e.into_inner());
        let entry = heard.entry(peer).or_insert((Instant::now(), up));
        if up {
            entry.0 = Instant::now();
        }
        entry.1 = up;
    }

    /// The peers of `view` this node finds dead: each with how long it has
    /// been silent and whether its link is up.
    fn suspects(&self, view: &View) -> Vec<(NodeId, Duration, bool)> {
        let heard = self.inner.heard.lock().unwrap_or_else(|e| e.into_inner());
        (view.members.iter())
            .filter(|&&m| m != self.inner.me)
            .filter_map(|&m| {
                let &(at, up) = heard.get(&m.0)?;
                (!up || at.elapsed() > SUSPECT_AFTER).then(|| (m, at.elapsed(), up))
            })
            .collect()
    }

    /// Fetches the view from the arbitrator and takes it: whether it
    /// answered.
    pub(crate) async fn refresh(&self) -> bool {
        let (Some(arbiter), Some(group)) = (&self.inner.arbiter, self.group()) else {
            return false;
        };
        match arbiter.view(group.node_group).await {
            Ok(view) => {
                self.set_view(view);
                true
            }
            Err(_) => false,
        }
    }

    /// Fetches the view from the arbitrator in the background (once at a
    /// time): for a peer that says it knows a newer view. The transport's
    /// readers never wait on the arbitrator, so a slow control plane never
    /// stops a node hearing its peers.
    pub(crate) fn refresh_soon(&self) {
        if self.inner.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let cluster = self.clone();
        self.spawn(async move {
            cluster.refresh().await;
            cluster.inner.refreshing.store(false, Ordering::Release);
        });
    }

    /// Runs `task` on the node's own runtime, from wherever it is called:
    /// the links' hot paths run on LDM workers' threads, whose runtimes
    /// must not be held up by what a view change or a catch-up awaits.
    pub(crate) fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner.runtime.spawn(task)
    }

    /// Asks the arbitrator to move the view on; takes what it answers.
    pub(crate) async fn propose(
        &self,
        remove: Vec<NodeId>,
        add: Vec<NodeId>,
    ) -> Result<View, String> {
        let (view, _granted) = self.propose_from(self.view_number(), remove, add).await?;
        Ok(view)
    }

    /// Asks the arbitrator to move the view on from view `from`, which is
    /// granted only if `from` is still the view; takes what it answers:
    /// the view after `from` and true if granted, else the view now.
    pub(crate) async fn propose_from(
        &self,
        from: u64,
        remove: Vec<NodeId>,
        add: Vec<NodeId>,
    ) -> Result<(View, bool), String> {
        self.ask_arbiter(from, remove, add, Vec::new()).await
    }

    /// Asks the arbitrator to give `node` its primaries back.
    pub(crate) async fn restore(&self, node: NodeId) -> Result<View, String> {
        let change = self.ask_arbiter(self.view_number(), Vec::new(), Vec::new(), vec![node]);
        Ok(change.await?.0)
    }

    /// Asks for the view after `from` with the change named; takes what
    /// the arbitrator answers (granted or not).
    async fn ask_arbiter(
        &self,
        from: u64,
        remove: Vec<NodeId>,
        add: Vec<NodeId>,
        restore: Vec<NodeId>,
    ) -> Result<(View, bool), String> {
        let (Some(arbiter), Some(group)) = (&self.inner.arbiter, self.group()) else {
            return Err("no arbitrator".into());
        };
        let change = ViewChange {
            node_id: self.inner.me,
            from,
            remove,
            add,
            restore,
        };
        let (view, granted) = arbiter.change(group.node_group, &change).await?;
        self.set_view(view.clone());
        Ok((view, granted))
    }

    /// Watches the group until the node stops: removes dead peers from the
    /// view, and brings this node back into it.
    async fn watch(self) {
        let mut stopped = self.inner.stopped.clone();
        let mut undecided: Option<Instant> = None;
        let mut rejoin: Option<tokio::task::JoinHandle<()>> = None;
        loop {
            tokio::select! {
                () = tokio::time::sleep(WATCH_EVERY) => {}
                _ = stopped.wait_for(|s| *s) => return,
            }
            let Some(group) = self.group().filter(|g| g.members.len() > 1) else {
                continue;
            };
            if !self.serving() {
                undecided = None;
                if rejoin.as_ref().is_none_or(|r| r.is_finished()) {
                    rejoin = Some(tokio::spawn(catchup::rejoin(self.clone())));
                }
                continue;
            }
            let mut suspects = self.suspects(&group.view);
            // A backup that holds the stream up past its bound is as good
            // as gone: commits wait for it until the view goes on without.
            let outbox = self.inner.engine.tc().workers().log().outbox();
            for node in outbox.too_far_behind() {
                if !suspects.iter().any(|s| s.0.0 == node) {
                    suspects.push((NodeId(node), Duration::ZERO, true));
                }
            }
            if suspects.is_empty() {
                undecided = None;
                // Primaries of a live node of the view that this node
                // serves go back to it.
                for &(from, to) in &group.view.moved {
                    if to == self.inner.me && group.view.members.contains(&from) {
                        catchup::give_back(&self, from.0);
                    }
                }
                continue;
            }
            let silent: Vec<(u32, u128, bool)> = (suspects.iter())
                .map(|&(node, silent, up)| (node.0, silent.as_millis(), up))
                .collect();
            tracing::warn!(suspects = ?silent, view = group.view.number, "peers not heard from or too far behind (node, ms silent, link up); asking the arbitrator");
            match self
                .propose(suspects.iter().map(|s| s.0).collect(), Vec::new())
                .await
            {
                Ok(_) => undecided = None,
                Err(e) => {
                    let since = *undecided.get_or_insert_with(Instant::now);
                    tracing::warn!(error = %e, "the arbitrator cannot be reached");
                    if since.elapsed() > UNDECIDED_FOR {
                        // The other side may have been told to go on.
                        if self.inner.joined.swap(false, Ordering::AcqRel) {
                            tracing::error!(
                                "cut off from peers and the arbitrator: serving nothing until back in the view"
                            );
                        }
                        self.apply_view();
                    }
                }
            }
        }
    }

    /// Serves the node-to-node transport on `listener`, and watches the
    /// group, until the node stops.
    pub(crate) async fn serve(self, listener: TcpListener) {
        tokio::spawn(self.clone().watch());
        let mut stopped = self.inner.stopped.clone();
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = stopped.wait_for(|s| *s) => return,
            };
            match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(apply::serve(self.clone(), stream, peer));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a peer connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// Waits until no write admitted on `dbs` is unanswered, at most
/// `within`: whether none is.
async fn writes_done(dbs: &[Arc<Database>], within: Duration) -> bool {
    let started = Instant::now();
    while dbs.iter().any(|db| db.writes_in_flight() > 0) {
        if started.elapsed() > within {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    true
}

/// The file marking emptied replicas, beside the group's file.
fn emptied_file(group_file: Option<&std::path::Path>) -> Option<PathBuf> {
    group_file.map(|f| f.with_file_name(EMPTIED_FILE))
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

/// A partition, for tests: while the file `SHOAL_FAILPOINT_PEER_CUT` names
/// exists, this node neither sends to nor takes anything from its peers
/// (the control plane it still reaches). Only in builds with the `testing`
/// feature; elsewhere never cut.
pub(crate) fn cut_off() -> bool {
    #[cfg(any(test, feature = "testing"))]
    {
        static PATH: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
        let path =
            PATH.get_or_init(|| std::env::var_os("SHOAL_FAILPOINT_PEER_CUT").map(PathBuf::from));
        if let Some(path) = path {
            return path.exists();
        }
    }
    false
}
