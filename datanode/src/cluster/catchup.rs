//! Bringing a node back into its group's view.
//!
//! The node back (J) serves nothing. It asks the arbitrator for the view,
//! then a live node of the view (S) to catch it up, keeping what its disk
//! had: much of it is as the group has it, but some may be older, or hold
//! writes never acknowledged. S, for its part:
//!
//! 1. moves the view on to one of the run's own, without J (an earlier
//!    run may have let it in): only the next view can let J in, so no run
//!    superseded — on S or on another node — ever lets J in after;
//! 2. asks every other node of the view (K) to copy its primaries to J
//!    too (`Copy`), and meanwhile does its own part, as each K does:
//! 3. puts J in the replication stream, not counted: from now on J gets
//!    every commit the node makes;
//! 4. sends J, for every fragment the node is the primary of in the run's
//!    view, a digest of its rows: a sum of the rows' hashes for each of
//!    many buckets of keys (`changes::Buckets`). J, applying the stream in
//!    order, sums its own rows alike, deletes those of every bucket that
//!    differs, and answers which (`Mismatched`); S copies those buckets'
//!    rows to J, a step at a time on the fragment's worker — each step
//!    appended to the stream in order with the fragment's commits, so J
//!    ends with every row as it is now — and counts J once J holds the
//!    stream past the copy: from then on its commits wait for J. A node
//!    back after a short absence is sent the few buckets that changed; one
//!    with an empty disk, everything;
//! 5. once every part is done, asks for the view after the run's with J
//!    in it. J's primaries stay where they are until handed back.
//!
//! Any view change during the run (a node found dead, primaries handed
//! back) changes what each node must copy: every part stops, and J asks
//! again. A K whose run nobody ends by letting J in moves the view on
//! itself, then takes J out of its stream.
//!
//! If no node of the view is alive and J is in the view itself, J has
//! every write the view acknowledged: after `ALONE_AFTER` it asks for a
//! view of itself alone and goes on from its own disk (a whole group
//! restarting).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shoal_wire::internal::{Member, NodeId, View};
use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::frame::{self, Message};
use super::{ALONE_AFTER, Cluster};
use crate::ldm::{FragmentPlace, Only};
use crate::log::changes::{self, Buckets};
use crate::tc::Table;
use crate::types::TableId;

/// How long a node back waits to be let in once a peer has agreed to
/// catch it up, before it asks again.
const LET_IN_WITHIN: Duration = Duration::from_secs(600);

/// How often a node waiting to be let in asks its lead whether the run
/// goes on.
const HELPER_CHECK_EVERY: Duration = Duration::from_secs(1);

/// A node being caught up that takes nothing of the stream for this long
/// is given up on (its commits would wait for it once it is counted).
const STALLED_AFTER: Duration = Duration::from_secs(5);

/// The bytes of the stream a copy step waits below.
const PACE_BYTES: usize = 32 << 20;

/// Rows a fragment's digest cuts into one bucket, about: a bucket a node
/// back does not hold alike is copied whole. A digest costs 8 bytes a
/// bucket; a row changed while the node was away costs its bucket's rows:
/// with rows of ~100 bytes and up to a few percent of them changed, a few
/// rows a bucket costs least.
const ROWS_PER_BUCKET: u64 = 4;
/// Most buckets a fragment's digest has (8 bytes each).
const MAX_BUCKETS: u64 = 1 << 18;
/// A node back that answers no digest for this long is given up on.
const DIGEST_STALLED_AFTER: Duration = Duration::from_secs(30);

/// A node back's answer to a digest: the buckets it emptied.
#[derive(Debug)]
pub(super) struct Mismatch {
    pub(super) run: u64,
    pub(super) table: TableId,
    pub(super) fragment: u16,
    pub(super) buckets: Vec<u32>,
}

/// Where the answers of each node being caught up go: to the run catching
/// it up on this node, the latest.
#[derive(Debug, Default)]
pub(super) struct Repairs(Mutex<HashMap<u32, mpsc::UnboundedSender<Mismatch>>>);

impl Repairs {
    /// The answers `joiner` gives from now on (a run before stops hearing).
    fn expect(&self, joiner: u32) -> mpsc::UnboundedReceiver<Mismatch> {
        let (answers, answered) = mpsc::unbounded_channel();
        let mut runs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        runs.insert(joiner, answers);
        answered
    }

    /// `joiner` answered.
    pub(super) fn answer(&self, joiner: u32, mismatch: Mismatch) {
        let runs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(run) = runs.get(&joiner) {
            let _ = run.send(mismatch);
        }
    }
}

/// The lead's side: node `joiner` asks this node to catch it up. The view
/// the run starts from: only the next one lets `joiner` in.
pub(super) async fn asked(cluster: &Cluster, joiner: u32) -> Result<u64, String> {
    if !cluster.serving() {
        return Err("this node is not serving".into());
    }
    if joiner == cluster.me().0 {
        return Err("a node does not catch itself up".into());
    }
    // A node that asks again may have restarted and lost what a run under
    // way sent it: that run stops and this one starts over — once the
    // run's request to let the node in, if it is making one, is answered.
    let run = {
        let _admitting = cluster.inner.catching_up.admitting.lock().await;
        let number = cluster.inner.catching_up.start(joiner);
        match start_view(cluster, NodeId(joiner)).await {
            Ok(from) => Run::new(cluster, joiner, number, from),
            Err(e) => {
                cluster.inner.catching_up.end_with(joiner, number, || {});
                return Err(e);
            }
        }
    };
    let cluster = cluster.clone();
    cluster.clone().spawn(async move {
        let started = Instant::now();
        let done = lead(&cluster, &run).await;
        finish(
            &cluster,
            &run,
            done,
            started,
            "caught a node up; it is in the view again",
        );
    });
    Ok(run.from)
}

/// A view of the run's own to start from: the next one, without `node`
/// (an earlier run may have let it in). No other run starts from it, so a
/// run superseded — here or on another node — can never let `node` in
/// after: its own start view is gone.
async fn start_view(cluster: &Cluster, node: NodeId) -> Result<u64, String> {
    for _ in 0..3 {
        let now = cluster.view();
        let remove: Vec<NodeId> = now.members.iter().copied().filter(|&m| m == node).collect();
        let (view, granted) = cluster.propose_from(now.number, remove, Vec::new()).await?;
        if !cluster.serving() {
            return Err("this node is not serving".into());
        }
        if granted && !view.members.contains(&node) {
            return Ok(view.number);
        }
    }
    Err("the view kept moving on".into())
}

/// One run catching node `joiner` up, from view `from`.
#[derive(Debug, Clone, Copy)]
struct Run {
    joiner: u32,
    /// Its number among this node's runs.
    number: u64,
    from: u64,
    /// The stream's fence epoch when it started.
    epoch: u64,
}

impl Run {
    fn new(cluster: &Cluster, joiner: u32, number: u64, from: u64) -> Run {
        let epoch = cluster.inner.engine.tc().workers().log().outbox().epoch();
        Run {
            joiner,
            number,
            from,
            epoch,
        }
    }

    /// Whether the run goes on: it is still the node's latest here, this
    /// node has served without a break (one that stopped even for a moment
    /// may have skipped databases it was then no primary of), and the view
    /// is still the one it started from (a view that moves primaries, or
    /// hands them back, changes what each node must copy).
    fn going(&self, cluster: &Cluster) -> Result<(), String> {
        if !cluster.inner.catching_up.current(self.joiner, self.number) {
            return Err("superseded by a newer request for the node".to_owned());
        }
        let outbox = cluster.inner.engine.tc().workers().log().outbox();
        if !cluster.serving() || outbox.epoch() != self.epoch {
            return Err("this node stopped serving".to_owned());
        }
        let now = cluster.view_number();
        if now != self.from {
            return Err(format!("the view moved on from {} to {now}", self.from));
        }
        Ok(())
    }
}

/// Why a run stopped, and whether its node stays in this node's stream
/// (it must while it may be in the view).
#[derive(Debug)]
struct Stopped {
    why: String,
    keep: bool,
}

impl From<String> for Stopped {
    fn from(why: String) -> Stopped {
        Stopped { why, keep: false }
    }
}

/// Ends `run` with what it `done`: unless superseded (the run after it
/// owns the stream's place), a run that failed takes its node out of the
/// stream.
fn finish(
    cluster: &Cluster,
    run: &Run,
    done: Result<(u64, u64), Stopped>,
    started: Instant,
    success: &str,
) {
    let outbox = cluster.inner.engine.tc().workers().log().outbox();
    let keep = done.as_ref().map_or_else(|s| s.keep, |_| true);
    let current = (cluster.inner.catching_up).end_with(run.joiner, run.number, || {
        if !keep {
            outbox.remove(run.joiner);
        }
    });
    if !current {
        return;
    }
    match done {
        Ok((rows, bytes)) => {
            let secs = started.elapsed().as_secs_f64();
            tracing::info!(
                node = run.joiner,
                rows,
                bytes,
                took_ms = (secs * 1000.0) as u64,
                mb_per_s = format!("{:.0}", bytes as f64 / 1e6 / secs.max(1e-9)),
                "{success}"
            );
        }
        Err(stopped) => {
            tracing::warn!(node = run.joiner, error = %stopped.why, kept_in_stream = stopped.keep, "catching a node up stopped")
        }
    }
}

/// The run of the node asked to catch `joiner` up: copies its own
/// primaries, has every other node of the view copy theirs (each counts
/// `joiner` once it holds its stream), and asks for the view with
/// `joiner` in it. Rows and bytes copied by all.
async fn lead(cluster: &Cluster, run: &Run) -> Result<(u64, u64), Stopped> {
    let me = cluster.me();
    let view = cluster.view();
    let others: Vec<Member> = (cluster.group().iter())
        .flat_map(|g| g.members.iter())
        .filter(|m| m.node_id != me && view.members.contains(&m.node_id))
        .cloned()
        .collect();
    let mut copies = tokio::task::JoinSet::new();
    for peer in others {
        let (cluster, run) = (cluster.clone(), *run);
        copies.spawn(async move {
            (ask_copy(&cluster, &peer, run.joiner, run.from).await)
                .map_err(|e| format!("node {}: {e}", peer.node_id))
        });
    }
    // Dropped on a failure: the copies asked for are left to stop by
    // themselves (the view they start from moves on, or nobody lets the
    // node in).
    let (mut rows, mut bytes) = copy_mine(cluster, run).await?;
    while !copies.is_empty() {
        tokio::select! {
            copied = copies.join_next() => match copied {
                Some(Ok(Ok((r, b)))) => (rows, bytes) = (rows + r, bytes + b),
                Some(Ok(Err(e))) => return Err(e.into()),
                Some(Err(e)) => return Err(e.to_string().into()),
                None => break,
            },
            () = tokio::time::sleep(Duration::from_millis(100)) => run.going(cluster)?,
        }
    }
    let_in(cluster, run).await?;
    Ok((rows, bytes))
}

/// Asks `peer` to copy its primaries to `joiner`, from view `from`: the
/// rows and bytes it copied, once it has counted `joiner`.
async fn ask_copy(
    cluster: &Cluster,
    peer: &Member,
    joiner: u32,
    from: u64,
) -> Result<(u64, u64), String> {
    let question = Message::Copy {
        node: joiner,
        view: from,
    };
    // No time limit: the asker stops waiting once its own view moves on
    // (the peer stopped, or was found dead).
    match exchange(cluster, peer, &question, None).await? {
        Message::Copied { rows, bytes } => Ok((rows, bytes)),
        other => Err(format!("answered {other:?}")),
    }
}

/// Another node of the view, `lead`, catching `joiner` up from view
/// `from`, asks this one to copy its primaries too: once they are copied,
/// `joiner` counted and holding this node's stream, the rows and bytes.
/// The run then waits for the view after `from`: one with `joiner` in it
/// keeps it in the stream, any other takes it out.
pub(super) async fn copy_asked(
    cluster: &Cluster,
    lead: u32,
    joiner: u32,
    from: u64,
) -> Result<(u64, u64), String> {
    if !cluster.serving() {
        return Err("this node is not serving".into());
    }
    if cluster.view_number() < from {
        cluster.refresh().await;
    }
    let view = cluster.view();
    if view.number != from {
        return Err(format!("this node is in view {}, not {from}", view.number));
    }
    let (lead_in, joiner_out) = (
        view.members.contains(&NodeId(lead)),
        !view.members.contains(&NodeId(joiner)) && joiner != cluster.me().0,
    );
    if !lead_in || !joiner_out {
        return Err(format!(
            "in view {from}, node {lead} does not catch node {joiner} up"
        ));
    }
    let number = {
        let _admitting = cluster.inner.catching_up.admitting.lock().await;
        cluster.inner.catching_up.start(joiner)
    };
    let run = Run::new(cluster, joiner, number, from);
    let started = Instant::now();
    let done = match copy_mine(cluster, &run).await {
        Ok(done) => done,
        Err(why) => {
            finish(cluster, &run, Err(Stopped::from(why.clone())), started, "");
            return Err(why);
        }
    };
    let cluster = cluster.clone();
    cluster.clone().spawn(async move {
        let outcome = let_in_outcome(&cluster, NodeId(joiner), from, LEAD_LETS_IN_WITHIN).await;
        let success = "copied this node's primaries to a node back; it is in the view again";
        finish(&cluster, &run, outcome.map(|()| done), started, success);
    });
    Ok(done)
}

/// How long a node that has copied its primaries to a node back waits for
/// the view after the run's, before asking for one itself.
const LEAD_LETS_IN_WITHIN: Duration = Duration::from_secs(10);

/// This node's part of `run`: puts the joining node in the stream, not
/// counted; for every fragment this node is the primary of in the run's
/// view, sends a digest of its rows, bucket by bucket; the joining node
/// keeps the buckets it holds alike and empties the others, which this
/// node then copies, a step at a time (each step appended to the stream in
/// order with the fragment's commits); and counts the node once it holds
/// all of it. The rows and bytes copied.
async fn copy_mine(cluster: &Cluster, run: &Run) -> Result<(u64, u64), String> {
    let (joiner, me) = (run.joiner, cluster.me());
    run.going(cluster)?;
    let view = cluster.view();
    if view.members.contains(&NodeId(joiner)) {
        return Err(format!("node {joiner} is in the view again"));
    }
    let outbox = cluster.inner.engine.tc().workers().log().outbox();
    let tc = cluster.inner.engine.tc();
    let mut answers = cluster.inner.repairs.expect(joiner);
    outbox.catch_up(joiner);
    // Rows held by each fragment: how finely its digest cuts it.
    let rows: HashMap<(TableId, u16), u64> = (tc.workers().memory(false).await)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|r| ((r.table, r.fragment), r.memory.rows))
        .collect();
    // The tables digested, and how each fragment was cut.
    let mut tables = HashMap::new();
    let mut digested: HashMap<(TableId, u16), Buckets> = HashMap::new();
    for table in cluster.inner.engine.tables() {
        run.going(cluster)?;
        if view.primary(cluster.preferred(&table.database)) != Some(me) {
            continue;
        }
        if !table.database.is_primary_here() {
            return Err("its primaries are being handed back".into());
        }
        for (fragment, &place) in table.fragments.iter().enumerate() {
            let held = rows.get(&(table.id, fragment as u16)).copied().unwrap_or(0);
            let buckets = Buckets {
                fragments: table.fragments.len() as u16,
                fragment: fragment as u16,
                count: (held / ROWS_PER_BUCKET).clamp(1, MAX_BUCKETS) as u32,
            };
            let sums = tc.workers().digest(table.id, place, buckets);
            // The table was dropped meanwhile: its drop reaches J too.
            let Some(sums) = sums.await.map_err(|e| e.to_string())? else {
                continue;
            };
            let mut record = Vec::new();
            changes::digest(&mut record, table.id, buckets, run.number, &sums);
            if outbox.ship_to(joiner, &record).is_none() {
                return Err(format!("node {joiner} fell out of the stream"));
            }
            digested.insert((table.id, fragment as u16), buckets);
        }
        tables.insert(table.id, table);
    }
    // J answers each digest with the buckets it emptied: they are copied.
    let (mut rows, mut bytes) = (0u64, 0u64);
    let mut last_answer = Instant::now();
    while !digested.is_empty() {
        let answer = tokio::select! {
            answer = answers.recv() => answer,
            () = tokio::time::sleep(Duration::from_millis(100)) => {
                run.going(cluster)?;
                if !outbox.has_backup(joiner) {
                    return Err(format!("node {joiner} fell out of the stream"));
                }
                if last_answer.elapsed() > DIGEST_STALLED_AFTER {
                    return Err(format!(
                        "node {joiner} answered no digest for {} s",
                        DIGEST_STALLED_AFTER.as_secs()
                    ));
                }
                continue;
            }
        };
        let Some(answer) = answer else {
            return Err("superseded by a newer request for the node".into());
        };
        last_answer = Instant::now();
        let at = (answer.table, answer.fragment);
        let Some(buckets) = digested.remove(&at).filter(|_| answer.run == run.number) else {
            continue;
        };
        let table = &tables[&answer.table];
        let place = table.fragments[usize::from(answer.fragment)];
        if answer.buckets.is_empty() {
            continue;
        }
        let only = Arc::new(Only {
            buckets,
            numbers: answer.buckets,
        });
        let (r, b) = copy_fragment(cluster, run, table, place, Some(&only)).await?;
        (rows, bytes) = (rows + r, bytes + b);
    }
    let going = || run.going(cluster);
    // J holds everything up to here once it acknowledges it.
    held_to(cluster, joiner, outbox.last(), &going).await?;
    // Commits wait for it from now on, and everything before is held by
    // it, before the view says it is a replica: what this node has
    // acknowledged is on it whatever happens next.
    outbox.count(joiner);
    held_to(cluster, joiner, outbox.last(), &going).await?;
    Ok((rows, bytes))
}

/// Copies the rows of the fragment at `place` of `table` to the node
/// `run` catches up — those in `only`, if given — a step at a time on the
/// fragment's worker, each step appended to the stream in order with the
/// fragment's commits, paced by what the node has taken: the rows and
/// bytes copied.
async fn copy_fragment(
    cluster: &Cluster,
    run: &Run,
    table: &Table,
    place: FragmentPlace,
    only: Option<&Arc<Only>>,
) -> Result<(u64, u64), String> {
    let joiner = run.joiner;
    let outbox = cluster.inner.engine.tc().workers().log().outbox();
    let tc = cluster.inner.engine.tc();
    let (mut rows, mut bytes, mut from) = (0u64, 0u64, 0);
    loop {
        // Paced by what J has taken: the stream stays far from its bound,
        // so J is never dropped for being behind.
        while outbox.bytes() > PACE_BYTES {
            run.going(cluster)?;
            if !outbox.has_backup(joiner) {
                return Err(format!("node {joiner} fell out of the stream"));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        run.going(cluster)?;
        let step = (tc.workers().copy(table.id, place, from, joiner, only).await)
            .map_err(|e| e.to_string())?;
        // The table was dropped meanwhile: its drop reaches J too.
        let Some(step) = step else {
            if !outbox.has_backup(joiner) {
                return Err(format!("node {joiner} fell out of the stream"));
            }
            return Ok((rows, bytes));
        };
        rows += step.rows as u64;
        bytes += step.bytes as u64;
        match step.next {
            Some(next) => from = next,
            None => return Ok((rows, bytes)),
        }
    }
}

/// Asks for the view after the run's with the joining node in it.
async fn let_in(cluster: &Cluster, run: &Run) -> Result<(), Stopped> {
    let node = NodeId(run.joiner);
    let _admitting = cluster.inner.catching_up.admitting.lock().await;
    run.going(cluster)?;
    match cluster.propose_from(run.from, Vec::new(), vec![node]).await {
        Ok((view, true)) if view.members.contains(&node) => Ok(()),
        Ok((view, _)) => Err(Stopped::from(format!(
            "not let in from view {}: the view is {} now",
            run.from, view.number
        ))),
        // Granted or not: the arbitrator knows.
        Err(e) => {
            (let_in_outcome(cluster, node, run.from, Duration::ZERO).await).map_err(|s| Stopped {
                why: format!("asking to let it in: {e}; {}", s.why),
                ..s
            })
        }
    }
}

/// Once a run from view `from` has (or may have) asked to let `node` in:
/// whether it is in the view after — waiting up to `wait` for it, then
/// moving the view on from `from` itself if nobody has, so that the run
/// can no longer let it in. Not known (the arbitrator cannot be reached):
/// stopped, with the node kept in the stream.
async fn let_in_outcome(
    cluster: &Cluster,
    node: NodeId,
    from: u64,
    wait: Duration,
) -> Result<(), Stopped> {
    let let_in = |view: &View| match view.members.contains(&node) {
        true => Ok(()),
        false => Err(Stopped::from(format!("not let in from view {from}"))),
    };
    let started = Instant::now();
    while cluster.view_number() <= from && started.elapsed() < wait {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cluster.refresh().await;
    }
    for _ in 0..10 {
        if cluster.view_number() > from {
            return let_in(&cluster.view());
        }
        match cluster.propose_from(from, Vec::new(), Vec::new()).await {
            Ok((view, _)) => return let_in(&view),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    Err(Stopped {
        why: "the arbitrator cannot be reached: whether it was let in is not known".into(),
        keep: true,
    })
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
            if let Ok((true, _)) = ask(&cluster, peer, Ask::Serving).await {
                tracing::info!(peer = %peer.node_id, view = view.number, "a live peer: leaving the view and asking to be caught up");
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
                // Only a view after the one its helper's run starts from
                // lets it in: not one an earlier run, superseded, made.
                if let Ok((true, from)) = ask(&cluster, peer, Ask::Join).await {
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

/// What a node back asks a peer.
#[derive(Debug, Clone, Copy)]
enum Ask {
    /// Whether it serves.
    Serving,
    /// To catch this node up.
    Join,
    /// Whether it is still catching this node up.
    Progress,
}

/// Asks `peer` the question: whether it said yes, and the view it
/// answered from.
async fn ask(cluster: &Cluster, peer: &Member, what: Ask) -> Result<(bool, u64), String> {
    let me = cluster.me().0;
    let (question, within) = match what {
        Ask::Serving => (
            Message::Heartbeat {
                view: cluster.view_number(),
            },
            2,
        ),
        // A join is answered once the peer has moved the view on, which
        // takes the arbitrator's time.
        Ask::Join => (Message::Join { node: me }, 5),
        Ask::Progress => (Message::Progress { node: me }, 2),
    };
    let within = Some(Duration::from_secs(within));
    match exchange(cluster, peer, &question, within).await? {
        Message::Alive { serving, view } => Ok((serving, view)),
        Message::Joining { view } => Ok((true, view)),
        other => Err(format!("answered {other:?}")),
    }
}

/// Opens a connection to `peer`, greets it, asks `question`, and gives
/// its answer (within `within`, if given); a refusal is an error.
async fn exchange(
    cluster: &Cluster,
    peer: &Member,
    question: &Message<'_>,
    within: Option<Duration>,
) -> Result<Message<'static>, String> {
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
    let hello = Message::Hello(frame::Greeting {
        version: frame::TRANSPORT_VERSION,
        node: cluster.me().0,
        group: cluster.group().map_or(0, |g| g.node_group),
        view: cluster.view_number(),
        secret: cluster.inner.secret.expose().as_bytes(),
    });
    let exchange = async {
        frame::send(&mut writer, &hello)
            .await
            .map_err(|e| e.to_string())?;
        frame::send(&mut writer, question)
            .await
            .map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        for _ in 0..2 {
            if !(frame::read(&mut reader, &mut buf, frame::MAX_GREETING).await)
                .map_err(|e| e.to_string())?
            {
                return Err("closed".to_owned());
            }
            // The answers own what they hold: none borrows the buffer.
            return match frame::decode(&buf).map_err(|e| e.to_string())? {
                Message::Welcome { .. } => continue,
                Message::Alive { serving, view } => Ok(Message::Alive { serving, view }),
                Message::Joining { view } => Ok(Message::Joining { view }),
                Message::Copied { rows, bytes } => Ok(Message::Copied { rows, bytes }),
                Message::Refused { reason } => Err(reason),
                other => Err(format!("answered {other:?}")),
            };
        }
        Err("no answer".to_owned())
    };
    match within {
        Some(within) => tokio::time::timeout(within, exchange)
            .await
            .map_err(|_| "no answer in time".to_owned())?,
        None => exchange.await,
    }
}

/// Waits until a view after `out_in` (one without this node) has this
/// node in it, while `helper`, catching it up, serves.
async fn wait_until_let_in(cluster: &Cluster, helper: &Member, out_in: u64) {
    cluster.await_let_in(out_in);
    let started = Instant::now();
    let mut asked = Instant::now();
    while started.elapsed() < LET_IN_WITHIN && !cluster.serving() {
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Any view heard of lets it in (`Cluster::set_view`).
        cluster.refresh().await;
        if asked.elapsed() > HELPER_CHECK_EVERY && !cluster.serving() {
            asked = Instant::now();
            if !matches!(ask(cluster, helper, Ask::Progress).await, Ok((true, _))) {
                // Its run may have ended by letting this node in.
                cluster.refresh().await;
                if !cluster.serving() {
                    tracing::warn!(peer = %helper.node_id, "the node catching this one up stopped; asking again");
                    break;
                }
            }
        }
    }
    cluster.stop_awaiting_let_in();
}

/// Gives `node`, live in the view, back the primaries this node serves for
/// it: stops taking their writes, waits until those under way are answered
/// and `node` holds everything sent, then asks for the view that makes
/// `node` their primary again. Nothing acknowledged is left behind.
pub(super) fn give_back(cluster: &Cluster, node: u32) {
    if !cluster.inner.handing_back.begin(node) {
        return;
    }
    let cluster = cluster.clone();
    cluster.clone().spawn(async move {
        // Not before the node serves in this node's view: writes handed
        // to it then would find it still waiting to be let in.
        let serves = match cluster.member(node) {
            Some(member) => matches!(
                ask(&cluster, &member, Ask::Serving).await,
                Ok((true, view)) if view >= cluster.view_number()
            ),
            None => false,
        };
        if !serves {
            cluster.inner.handing_back.end(node);
            // A view acted on meanwhile held their writes: no longer.
            if cluster
                .inner
                .engine
                .databases()
                .iter()
                .any(|db| db.is_handing_on())
            {
                cluster.apply_view();
            }
            return;
        }
        cluster.apply_view();
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
    if !super::writes_done(&databases, WITHIN).await {
        return Err("writes did not finish".into());
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
