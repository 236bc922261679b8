//! Bringing a node back into its group's view.
//!
//! The node back (J) serves nothing. It asks the arbitrator for the view,
//! then a live node of the view (S) to catch it up, after emptying its own
//! tables of the group's databases (what its disk had may be older than
//! the group, or hold writes never acknowledged). S, for its part:
//!
//! 1. has J removed from the view if it is still in it (its primaries go
//!    to S, so nothing waits for J meanwhile);
//! 2. puts J in the replication stream, not counted: from now on J gets
//!    every commit S makes;
//! 3. copies every fragment S is the primary of to J, a step at a time on
//!    the fragment's worker — each step appended to the stream in order
//!    with the fragment's commits, so J ends with every row as S has it;
//! 4. once J holds the stream past the copy, asks for the view with J in
//!    it: from then on S's commits wait for J. J's primaries stay with S.
//!
//! If no node of the view is alive and J is in the view itself, J has
//! every write the view acknowledged: after `ALONE_AFTER` it asks for a
//! view of itself alone and goes on from its own disk (a whole group
//! restarting).

use std::time::{Duration, Instant};

use shoal_wire::internal::{Member, NodeId};
use tokio::io::BufReader;
use tokio::net::TcpStream;

use super::frame::{self, Message};
use super::{ALONE_AFTER, Cluster};

/// How long a node back waits to be let in once a peer has agreed to
/// catch it up, before it asks again.
const LET_IN_WITHIN: Duration = Duration::from_secs(600);

/// How often a node waiting to be let in checks that its helper serves.
const HELPER_CHECK_EVERY: Duration = Duration::from_secs(1);

/// A node being caught up that takes nothing of the stream for this long
/// is given up on (its commits would wait for it once it is counted).
const STALLED_AFTER: Duration = Duration::from_secs(5);

/// The bytes of the stream a copy step waits below.
const PACE_BYTES: usize = 32 << 20;

/// `S`'s side: node `joiner` asks to be caught up.
/// The view the run starts from: only a later one lets `joiner` in.
pub(super) async fn asked(cluster: &Cluster, joiner: u32) -> Result<u64, String> {
    if !cluster.serving() {
        return Err("this node is not serving".into());
    }
    // A node that asks again has emptied its replicas again: what a run
    // under way copied to it is gone, so that run stops and this one
    // starts over — once the run's request to let the node in, if it is
    // making one, is answered (the node leaves a view that let it in).
    let (run, from) = {
        let _admitting = cluster.inner.catching_up.admitting.lock().await;
        let run = cluster.inner.catching_up.start(joiner);
        if let Err(e) = take_out(cluster, NodeId(joiner)).await {
            cluster.inner.catching_up.end(joiner, run);
            return Err(e);
        }
        (run, cluster.view_number())
    };
    let cluster = cluster.clone();
    tokio::spawn(async move {
        let started = Instant::now();
        let done = catch_up(&cluster, joiner, run).await;
        if !cluster.inner.catching_up.end(joiner, run) {
            return; // superseded: the run after it owns the stream's place
        }
        match done {
            Ok((rows, bytes)) => {
                let secs = started.elapsed().as_secs_f64();
                tracing::info!(
                    node = joiner,
                    rows,
                    bytes,
                    took_ms = (secs * 1000.0) as u64,
                    mb_per_s = format!("{:.0}", bytes as f64 / 1e6 / secs.max(1e-9)),
                    "caught a node up; it is in the view again"
                );
            }
            Err(e) => {
                tracing::warn!(node = joiner, error = %e, "catching a node up stopped");
                cluster
                    .inner
                    .engine
                    .tc()
                    .workers()
                    .log()
                    .outbox()
                    .remove(joiner);
            }
        }
    });
    Ok(from)
}

/// Takes `node` out of the view if it is in it (an earlier run may have
/// let it in): only a view after this node's now, which adds it, lets it
/// in.
async fn take_out(cluster: &Cluster, node: NodeId) -> Result<(), String> {
    if !cluster.view().members.contains(&node) {
        return Ok(());
    }
    let view = cluster.propose(vec![node], Vec::new()).await?;
    if view.members.contains(&node) || !cluster.serving() {
        return Err(format!(
            "the arbitrator kept node {node} in view {}",
            view.number
        ));
    }
    Ok(())
}

/// Steps 1 to 4 above: the rows and bytes copied.
async fn catch_up(cluster: &Cluster, joiner: u32, run: u64) -> Result<(u64, u64), String> {
    let node = NodeId(joiner);
    // A node that stops serving, even for a moment (its stream is fenced),
    // may have skipped databases it was then no primary of; a run
    // superseded must not touch the stream again: every step checks.
    let outbox = cluster.inner.engine.tc().workers().log().outbox();
    let epoch = outbox.epoch();
    let serving = || {
        if !cluster.inner.catching_up.current(joiner, run) {
            return Err("superseded by a newer request of the node".to_owned());
        }
        if !cluster.serving() || outbox.epoch() != epoch {
            return Err("this node stopped serving".to_owned());
        }
        Ok(())
    };
    serving()?;
    if cluster.view().members.contains(&node) {
        return Err(format!("node {joiner} is in the view again"));
    }
    let tc = cluster.inner.engine.tc();
    outbox.catch_up(joiner);
    let (mut rows, mut bytes) = (0u64, 0u64);
    for table in cluster.inner.engine.tables() {
        serving()?;
        if !table.database.is_primary_here() {
            continue;
        }
        for &place in &table.fragments {
            let mut from = 0;
            loop {
                // Paced by what J has taken: the stream stays far from
                // its bound, so J is never dropped for being behind.
                while outbox.bytes() > PACE_BYTES {
                    serving()?;
                    if !outbox.has_backup(joiner) {
                        return Err(format!("node {joiner} fell out of the stream"));
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                serving()?;
                let step = (tc.workers().copy(table.id, place, from, joiner).await)
                    .map_err(|e| e.to_string())?;
                // The table was dropped meanwhile: its drop reaches J too.
                let Some(step) = step else {
                    if !outbox.has_backup(joiner) {
                        return Err(format!("node {joiner} fell out of the stream"));
                    }
                    break;
                };
                rows += step.rows as u64;
                bytes += step.bytes as u64;
                match step.next {
                    Some(next) => from = next,
                    None => break,
                }
            }
        }
    }
    // J holds everything up to here once it acknowledges it.
    held_to(cluster, joiner, outbox.last(), &serving).await?;
    // Commits wait for it from now on, and everything before is held by
    // it, before the view says it is a replica: what this node has
    // acknowledged is on it whatever happens next.
    outbox.count(joiner);
    held_to(cluster, joiner, outbox.last(), &serving).await?;
    for _ in 0..10 {
        let _admitting = cluster.inner.catching_up.admitting.lock().await;
        serving()?;
        let view = cluster.propose(Vec::new(), vec![node]).await?;
        if view.members.contains(&node) {
            return Ok((rows, bytes));
        }
    }
    Err("the arbitrator would not let the node in".into())
}

/// Waits until `joiner` holds the stream up to `seq`, while `going` says
/// the catching up goes on; gives up if it falls out of the stream or
/// takes nothing for `STALLED_AFTER`.
async fn held_to(
    cluster: &Cluster,
    joiner: u32,
    seq: u64,
    going: &impl Fn() -> Result<(), String>,
) -> Result<(), String> {
    let outbox = cluster.inner.engine.tc().workers().log().outbox();
    let mut progress = (0, Instant::now());
    loop {
        going()?;
        match outbox.acked(joiner) {
            Some(acked) if acked >= seq => return Ok(()),
            Some(acked) if acked > progress.0 => progress = (acked, Instant::now()),
            Some(_) if progress.1.elapsed() > STALLED_AFTER => {
                return Err(format!(
                    "node {joiner} took nothing for {} s",
                    STALLED_AFTER.as_secs()
                ));
            }
            Some(_) => {}
            None => return Err(format!("node {joiner} fell out of the stream")),
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// `J`'s side: brings this node back into its view, or gives up for now
/// (the watch tries again).
pub(super) async fn rejoin(cluster: Cluster) {
    let Some(group) = cluster.group() else {
        return;
    };
    cluster.refresh().await;
    let started = Instant::now();
    loop {
        if cluster.serving() {
            return;
        }
        let view = cluster.view();
        let me = cluster.me();
        let peers: Vec<Member> = (group.members.iter())
            .filter(|m| m.node_id != me && view.members.contains(&m.node_id))
            .cloned()
            .collect();
        for peer in &peers {
            if let Ok((true, _)) = ask(&cluster, peer, false).await {
                tracing::info!(peer = %peer.node_id, view = view.number, "a live peer: leaving the view, emptying this node's replicas and asking to be caught up");
                // Out of the view first, so that the view that lets it in
                // again can only be the one its catching up ends with.
                if view.members.contains(&me) {
                    match cluster.propose(vec![me], Vec::new()).await {
                        Ok(view) if !view.members.contains(&me) => {}
                        Ok(_) => continue,
                        Err(e) => {
                            tracing::warn!(error = %e, "the arbitrator cannot be reached");
                            break;
                        }
                    }
                }
                // Its disk is no replica the group can go on from until it
                // is let in again (it never goes on alone meanwhile).
                if let Err(e) = cluster.mark_emptied(true) {
                    tracing::error!(error = %e, "could not mark this node's replicas emptied");
                    return;
                }
                if let Err(e) = empty_replicas(&cluster).await {
                    tracing::error!(error = %e, "could not empty this node's replicas");
                    return;
                }
                // Only a view after the one its helper's run starts from
                // lets it in: not one an earlier run, superseded, made.
                if let Ok((true, from)) = ask(&cluster, peer, true).await {
                    wait_until_let_in(&cluster, peer, from).await;
                    return;
                }
            }
        }
        if view.members.contains(&me) && started.elapsed() > ALONE_AFTER && !cluster.emptied() {
            let others: Vec<NodeId> = view.members.iter().copied().filter(|&m| m != me).collect();
            match cluster.propose(others, Vec::new()).await {
                Ok(view) if view.members == [me] => {
                    cluster
                        .inner
                        .joined
                        .store(true, std::sync::atomic::Ordering::Release);
                    cluster.apply_view();
                    tracing::warn!(
                        view = view.number,
                        "no node of the view is alive: this node goes on alone, from its own disk"
                    );
                    return;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "the arbitrator cannot be reached"),
            }
        }
        if !view.members.contains(&me) && peers.is_empty() {
            tracing::warn!(
                view = view.number,
                "no live node in the view to catch this node up"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        cluster.refresh().await;
    }
}

/// Asks `peer` whether it serves (`join` false) or to catch this node up
/// (`join` true): whether it said yes, and the view it answered from.
async fn ask(cluster: &Cluster, peer: &Member, join: bool) -> Result<(bool, u64), String> {
    if super::cut_off() {
        return Err("cut off (failpoint)".into());
    }
    let connect = TcpStream::connect(&peer.peer_addr);
    let stream = tokio::time::timeout(Duration::from_millis(500), connect)
        .await
        .map_err(|_| "timed out".to_owned())?
        .map_err(|e| e.to_string())?;
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    let hello = Message::Hello {
        node: cluster.me().0,
        group: cluster.group().map_or(0, |g| g.node_group),
        view: cluster.view_number(),
        secret: cluster.inner.secret.expose().as_bytes(),
    };
    let question = match join {
        true => Message::Join {
            node: cluster.me().0,
        },
        false => Message::Heartbeat {
            view: cluster.view_number(),
        },
    };
    let exchange = async {
        frame::send(&mut writer, &hello)
            .await
            .map_err(|e| e.to_string())?;
        frame::send(&mut writer, &question)
            .await
            .map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        for _ in 0..2 {
            if !(frame::read(&mut reader, &mut buf, frame::MAX_GREETING).await)
                .map_err(|e| e.to_string())?
            {
                return Err("closed".to_owned());
            }
            match frame::decode(&buf).map_err(|e| e.to_string())? {
                Message::Welcome { .. } => continue,
                Message::Alive { serving, view } => return Ok((serving, view)),
                Message::Joining { view } => return Ok((true, view)),
                Message::Refused { reason } => return Err(reason),
                other => return Err(format!("answered {other:?}")),
            }
        }
        Err("no answer".to_owned())
    };
    // A join is answered once the peer has taken this node out of the
    // view, which may take the arbitrator's time.
    let within = Duration::from_secs(if join { 5 } else { 2 });
    tokio::time::timeout(within, exchange)
        .await
        .map_err(|_| "no answer in time".to_owned())?
}

/// Empties every table of this node, which holds only its group's
/// databases: the rows come back from the peer catching it up.
async fn empty_replicas(cluster: &Cluster) -> Result<(), String> {
    let engine = &cluster.inner.engine;
    for table in engine.tables() {
        let (db, def) = (table.database.name.clone(), table.def().clone());
        engine
            .drop_table(db.as_str(), def.name.as_str())
            .await
            .map_err(|e| e.to_string())?;
        engine
            .create_table(&db, def)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Waits until a view after `out_in` (one without this node) has this
/// node in it, while `helper`, catching it up, serves.
async fn wait_until_let_in(cluster: &Cluster, helper: &Member, out_in: u64) {
    let started = Instant::now();
    let mut asked = Instant::now();
    while started.elapsed() < LET_IN_WITHIN {
        cluster.refresh().await;
        let view = cluster.view();
        if view.number > out_in && view.members.contains(&cluster.me()) {
            if let Err(e) = cluster.mark_emptied(false) {
                tracing::error!(error = %e, "could not mark this node's replicas caught up");
                return;
            }
            cluster
                .inner
                .joined
                .store(true, std::sync::atomic::Ordering::Release);
            cluster.apply_view();
            tracing::info!(view = cluster.view_number(), "caught up: in the view again");
            return;
        }
        if asked.elapsed() > HELPER_CHECK_EVERY {
            asked = Instant::now();
            if !matches!(ask(cluster, helper, false).await, Ok((true, _))) {
                tracing::warn!(peer = %helper.node_id, "the node catching this one up stopped serving; asking again");
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Gives `node`, live in the view, back the primaries this node serves for
/// it: stops taking their writes, waits until those under way are answered
/// and `node` holds everything sent, then asks for the view that makes
/// `node` their primary again. Nothing acknowledged is left behind.
pub(super) fn give_back(cluster: &Cluster, node: u32) {
    if !cluster.inner.handing_back.begin(node) {
        return;
    }
    cluster.apply_view();
    let cluster = cluster.clone();
    tokio::spawn(async move {
        let started = Instant::now();
        let done = hand_back(&cluster, node).await;
        cluster.inner.handing_back.end(node);
        cluster.apply_view();
        match done {
            Ok(view) => tracing::info!(
                node,
                view,
                took_ms = started.elapsed().as_millis() as u64,
                "handed a node its primaries back"
            ),
            Err(e) => {
                tracing::warn!(node, error = %e, "handing primaries back stopped; they stay here for now")
            }
        }
    });
}

async fn hand_back(cluster: &Cluster, node: u32) -> Result<u64, String> {
    const WITHIN: Duration = Duration::from_secs(5);
    let started = Instant::now();
    let databases: Vec<_> = (cluster.inner.engine.databases().into_iter())
        .filter(|db| db.preferred_primary() == node)
        .collect();
    while databases.iter().any(|db| db.writes_in_flight() > 0) {
        if started.elapsed() > WITHIN {
            return Err("writes did not finish".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let outbox = cluster.inner.engine.tc().workers().log().outbox();
    let last = outbox.last();
    loop {
        match outbox.acked(node) {
            Some(acked) if acked >= last => break,
            Some(_) if started.elapsed() < WITHIN => {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            _ => return Err(format!("node {node} did not acknowledge the stream")),
        }
    }
    let view = cluster.restore(NodeId(node)).await?;
    if view.moved.iter().any(|(from, _)| from.0 == node) {
        return Err(format!("the arbitrator kept view {}", view.number));
    }
    Ok(view.number)
}
