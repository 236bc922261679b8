//! A link from this node to another of its group: connects (and
//! reconnects); while the other is a backup in the stream, sends the
//! stream from where it has got to and records how far it holds it; when
//! idle, sends heartbeats. Every answer tells the cluster the peer is alive;
//! a connection that fails or breaks tells it the peer may be dead.
//!
//! Everything the stream has that the backup has not acknowledged goes in
//! one frame (up to `BATCH_BYTES`), so that commits made while the last
//! frame was on its way travel together: one round trip for many commits,
//! as the redo log's group commit does for one fsync.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shoal_wire::internal::Member;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use super::catchup::Mismatch;
use super::frame::{self, Greeting, Message, Record, Used};
use super::{Cluster, HEARTBEAT_EVERY};
use crate::log::changes;
use crate::log::ship::Outbox;
use crate::types::{DatabaseId, TableId};

/// Most bytes of records one frame carries.
pub(crate) const BATCH_BYTES: usize = 8 << 20;
/// How long a connection attempt may take, and the pause between attempts.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// A running link; dropping it stops it.
#[derive(Debug)]
pub(crate) struct Handle {
    addr: String,
    task: JoinHandle<()>,
}

impl Handle {
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the link from this node to `to`.
pub(crate) fn start(cluster: Cluster, to: Member) -> Handle {
    let addr = to.peer_addr.clone();
    let task = cluster.clone().spawn(async move {
        let mut stopped = cluster.inner.stopped.clone();
        let mut down = false;
        loop {
            let started = std::time::Instant::now();
            let (ended, connected) = tokio::select! {
                ended = run(&cluster, &to) => ended,
                _ = stopped.wait_for(|s| *s) => return,
            };
            // A connection that ended is opened again at once; a peer that
            // cannot be connected to is dead (its port refuses) or cut off.
            // A peer that is only slow is judged by its heartbeats.
            if connected {
                tracing::info!(peer = %to.node_id, reason = %ended, "link to a peer ended; reconnecting");
                if started.elapsed() < RETRY_AFTER {
                    tokio::time::sleep(RETRY_AFTER).await;
                }
                continue;
            }
            cluster.heard(to.node_id.0, false);
            if !down {
                tracing::warn!(peer = %to.node_id, addr = %to.peer_addr, reason = %ended, "link to a peer down; retrying");
                down = true;
            }
            tokio::time::sleep(RETRY_AFTER).await;
        }
    });
    Handle { addr, task }
}

/// One connection's life: why it ended, and whether it was connected and
/// greeted at all. It runs on an LDM worker's thread, the one the peer's
/// number picks: the worker's commits reach the stream, and the backup's
/// acknowledgements reach the commits waiting for them, without a thread
/// hop (on two cores a hop costs more than the frame's own work).
async fn run(cluster: &Cluster, to: &Member) -> (String, bool) {
    let tc = cluster.engine().tc();
    let worker = to.node_id.0 as usize % tc.ldm_threads();
    let (cluster, to) = (cluster.clone(), to.clone());
    let connection =
        tc.spawn_on_worker(worker, async move { connect_and_send(&cluster, &to).await });
    // Stopping the link (its task aborted) stops the connection.
    let mut connection = AbortOnDrop(connection);
    match (&mut connection.0).await {
        Ok(Ok(ended)) => (ended, true),
        Ok(Err(failed)) => (failed, false),
        Err(e) => (format!("the connection's task ended: {e}"), false),
    }
}

/// What a connection to a peer is for: it says so in its greeting.
#[derive(Debug, Clone, Copy)]
pub(super) enum Opening {
    /// A link: the stream, heartbeats, catch-up questions (`Hello`).
    Link,
    /// A client's connection carried on to a front end (`Relay`,
    /// `RelaySql`).
    Relay(super::Relayed),
    /// REST requests sent on (`Forward`).
    Forward,
}

/// Opens a connection to `to` for `opening` and greets it, within
/// `within`: the connection, greeted, or why not. Nothing after the
/// answer to the greeting has been read from it.
pub(super) async fn open(
    cluster: &Cluster,
    to: &Member,
    opening: Opening,
    within: Duration,
) -> Result<TcpStream, String> {
    if super::cut_off() {
        return Err("cut off (failpoint)".into());
    }
    let greet = async {
        let mut stream = TcpStream::connect(&to.peer_addr)
            .await
            .map_err(|e| format!("connecting: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (node, group, view) = (
            cluster.me().0,
            cluster.group().map_or(0, |g| g.node_group),
            cluster.view_number(),
        );
        let secret = cluster.inner.secret.expose().as_bytes();
        let greeting = Greeting {
            version: frame::TRANSPORT_VERSION,
            node,
            group,
            view,
            secret,
        };
        let greeting = match opening {
            Opening::Link => Message::Hello(greeting),
            Opening::Relay(super::Relayed::Redis) => Message::Relay(greeting),
            Opening::Relay(super::Relayed::Sql) => Message::RelaySql(greeting),
            Opening::Forward => Message::Forward(greeting),
        };
        let greeting_failed = |e: frame::FrameError| format!("greeting: {e}");
        frame::send(&mut stream, &greeting)
            .await
            .map_err(greeting_failed)?;
        let mut buf = Vec::new();
        match frame::read(&mut stream, &mut buf, frame::MAX_GREETING).await {
            Ok(true) => {}
            Ok(false) => return Err("closed at the greeting".into()),
            Err(e) => return Err(greeting_failed(e)),
        }
        match frame::decode(&buf) {
            Ok(Message::Welcome { view, .. }) => {
                if view > cluster.view_number() {
                    cluster.refresh_soon();
                }
                Ok(stream)
            }
            Ok(Message::Refused { reason }) => Err(format!("refused: {reason}")),
            Ok(other) => Err(format!("answered {other:?} to a greeting")),
            Err(e) => Err(greeting_failed(e)),
        }
    };
    tokio::time::timeout(within, greet)
        .await
        .unwrap_or_else(|_| Err("connecting: timed out".into()))
}

/// Aborts the task when dropped.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Connects, greets, and sends until the connection ends (`Ok`: why), or
/// why it could not connect (`Err`).
async fn connect_and_send(cluster: &Cluster, to: &Member) -> Result<String, String> {
    let outbox = Arc::clone(cluster.inner.engine.tc().workers().log().outbox());
    let node = to.node_id.0;
    let stream = open(cluster, to, Opening::Link, CONNECT_TIMEOUT).await?;
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    tracing::info!(peer = node, addr = %to.peer_addr, "link to a peer up");
    cluster.heard(node, true);
    // Answers come back on their own task.
    let acks = {
        let (outbox, cluster) = (Arc::clone(&outbox), cluster.clone());
        tokio::spawn(async move {
            let mut buf = Vec::new();
            loop {
                // A greeted peer's answers: small, but for a node being
                // caught up that names every bucket of a fragment its disk
                // did not hold alike (up to `MAX_BUCKETS` of them).
                let read = frame::read(&mut reader, &mut buf, frame::MAX_FRAME).await;
                if matches!(read, Ok(true)) {
                    cluster.heard(node, true);
                }
                if super::cut_off() {
                    return "cut off (failpoint)".into();
                }
                match read {
                    Ok(true) => match frame::decode(&buf) {
                        Ok(Message::Applied { seq }) => outbox.ack(node, seq),
                        Ok(Message::Mismatched {
                            run,
                            table,
                            fragment,
                            buckets,
                        }) => {
                            let mismatch = Mismatch {
                                run,
                                table: TableId(table),
                                fragment,
                                buckets,
                            };
                            cluster.inner.repairs.answer(node, mismatch);
                        }
                        Ok(Message::Alive { view, .. }) => {
                            if view > cluster.view_number() {
                                cluster.refresh_soon();
                            }
                        }
                        Ok(Message::Refused { reason }) => return format!("refused: {reason}"),
                        Ok(other) => return format!("sent {other:?}"),
                        Err(e) => return e.to_string(),
                    },
                    Ok(false) => return "closed".into(),
                    Err(e) => return e.to_string(),
                }
            }
        })
    };
    let ended = send_stream(cluster, &outbox, node, &mut writer).await;
    acks.abort();
    Ok(ended)
}

/// Sends the stream to `node` from where it has got to while it is a
/// backup, and heartbeats when there is nothing to send, until the
/// connection fails.
async fn send_stream(
    cluster: &Cluster,
    outbox: &Outbox,
    node: u32,
    writer: &mut (impl AsyncWriteExt + Unpin),
) -> String {
    let mut announced = HashSet::new();
    let mut sent = outbox.acked(node).unwrap_or(0);
    let mut out = Vec::new();
    let mut usage = Usage::default();
    loop {
        if super::cut_off() {
            return "cut off (failpoint)".into();
        }
        let changed = outbox.on_change();
        out.clear();
        usage.report(cluster, &mut out);
        match outbox.acked(node) {
            // Not (or no longer) a backup: only heartbeats.
            None => {
                announced.clear();
                sent = 0;
            }
            Some(acked) => {
                // Back in the stream after a while out of it.
                sent = sent.max(acked);
                let (records, at) = outbox.after(node, sent, BATCH_BYTES);
                if at > sent {
                    for (_, record) in &records {
                        announce(cluster, record, &mut announced, &mut out);
                    }
                    let message = Message::Changes {
                        last: at,
                        records: records.iter().map(|(_, r)| Record(r)).collect(),
                    };
                    frame::encode(&message, &mut out);
                    if let Err(e) = writer.write_all(&out).await {
                        return format!("sending: {e}");
                    }
                    sent = at;
                    continue;
                }
            }
        }
        if !out.is_empty()
            && let Err(e) = writer.write_all(&out).await
        {
            return format!("sending: {e}");
        }
        if tokio::time::timeout(HEARTBEAT_EVERY, changed)
            .await
            .is_err()
        {
            let beat = Message::Heartbeat {
                view: cluster.view_number(),
            };
            if let Err(e) = frame::send(writer, &beat).await {
                return format!("sending: {e}");
            }
        }
    }
}

/// Appends to `out` a `Table` message for each table of `record` the
/// backup has not been told of on this connection.
fn announce(cluster: &Cluster, record: &[u8], announced: &mut HashSet<u32>, out: &mut Vec<u8>) {
    for change in changes::decode(record).flatten() {
        let table = change.table();
        if !announced.insert(table.0) {
            continue;
        }
        let engine = cluster.engine();
        // A table dropped since is not announced; its records are skipped.
        if let Some(t) = engine.tables().into_iter().find(|t| t.id == table) {
            let message = Message::Table {
                id: table.0,
                database: t.database.name.to_string(),
                def: t.def().clone(),
            };
            frame::encode(&message, out);
        }
    }
}

/// What this node's databases have admitted, as last told to a peer.
struct Usage {
    told_at: Instant,
    /// Read and write units admitted, by database, when last told.
    told: HashMap<DatabaseId, (u64, u64)>,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            told_at: Instant::now(),
            told: HashMap::new(),
        }
    }
}

impl Usage {
    /// Appends to `out`, once every `HEARTBEAT_EVERY`, an `Admitted`
    /// message of the units each database with a rate limit admitted since
    /// the last.
    fn report(&mut self, cluster: &Cluster, out: &mut Vec<u8>) {
        if self.told_at.elapsed() < HEARTBEAT_EVERY {
            return;
        }
        self.told_at = Instant::now();
        let mut used = Vec::new();
        for db in cluster.engine().databases() {
            let gov = &db.governance;
            let now = gov.admitted();
            // Every database's count moves on, limited or not: a limit set
            // later is not charged what came before it.
            let before = self.told.insert(db.id, now).unwrap_or(now);
            let limits = gov.limits();
            // (A database made again under the same id counts from zero.)
            let reads = now.0.saturating_sub(before.0) * u64::from(limits.read.is_some());
            let writes = now.1.saturating_sub(before.1) * u64::from(limits.write.is_some());
            if reads + writes > 0 {
                used.push(Used {
                    database: db.name.to_string(),
                    reads,
                    writes,
                });
            }
        }
        if !used.is_empty() {
            frame::encode(&Message::Admitted { used }, out);
        }
    }
}
