//! A backup's side of a link: checks who connects, then applies the
//! primary's stream in order and says how far it holds it.
//!
//! The records name the primary's tables by the primary's ids; the primary
//! tells which table each id is (`Table`) before its first record, and the
//! backup finds its own table of that name — making it, with the same
//! definition, when the primary made it first (the Redis front end makes
//! its tables on first use).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::frame::{self, Greeting, Message};
use super::{Cluster, Relayed, catchup};
use crate::ldm::{FragmentPlace, Only};
use crate::log::Mark;
use crate::log::changes::{self, Buckets, Change};
use crate::node::catalog::CatalogError;
use crate::tc::Table;
use crate::tc::batch::{Batch, OperationError};
use crate::types::TableId;

/// Serves one connection a peer opened: greets it on the node's runtime,
/// then serves its stream on an LDM worker's thread (see `stream`).
pub(super) async fn serve(cluster: Cluster, stream: TcpStream, peer: SocketAddr) {
    if super::cut_off() {
        return;
    }
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    let (from, their_view, purpose) = match greet(&cluster, &mut reader, &mut buf).await {
        Ok(greeted) => greeted,
        Err(reason) => {
            tracing::warn!(%peer, %reason, "refused a peer connection");
            let _ = frame::send(&mut writer, &Message::Refused { reason }).await;
            return;
        }
    };
    if their_view > cluster.view_number() {
        cluster.refresh_soon();
    }
    let welcome = Message::Welcome {
        node: cluster.me().0,
        view: cluster.view_number(),
    };
    if frame::send(&mut writer, &welcome).await.is_err() {
        return;
    }
    // A stream belongs to the runtime it was made in: it moves as the
    // operating system's socket, and is made anew over there, with what a
    // peer sent after its greeting (a question it asks at once).
    let sent_on = reader.buffer().to_vec();
    let Ok(stream) = reader.into_inner().reunite(writer) else {
        return;
    };
    match purpose {
        Purpose::Stream => {}
        Purpose::Relay(front) => return cluster.hand_to_front(front, stream, sent_on),
        Purpose::Forward => return cluster.take_forwarded(from, stream, sent_on),
    }
    let Ok(stream) = stream.into_std() else {
        return;
    };
    let tc = cluster.engine().tc().clone();
    let worker = usize::from(peer.port()) % tc.ldm_threads();
    tc.spawn_on_worker(worker, async move {
        if let Ok(stream) = TcpStream::from_std(stream) {
            self::stream(cluster, from, stream, sent_on).await;
        }
    });
}

/// Serves a greeted peer's stream on an LDM worker's thread: reading,
/// applying and acknowledging hand on to each other there without a thread
/// hop (on two cores a hop costs more than a frame's own work), and the
/// changes are applied, and acknowledged once durable, beside the worker's
/// own sync, which a backup's wait then shares. What a peer asks of a
/// catch-up runs on the node's runtime, and the answers to heartbeats come
/// from here: a worker's thread held up for the heartbeat timeout holds up
/// its writes as long, and the peer is right to suspect it.
async fn stream(cluster: Cluster, from: u32, stream: TcpStream, sent_on: Vec<u8>) {
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(std::io::Cursor::new(sent_on).chain(reader));
    let mut buf = Vec::new();
    let (replies, mut replying) = mpsc::channel::<Message<'static>>(ACKS_IN_FLIGHT);
    // Frames of tables and changes, in order, for the applying task.
    let (work, working) = mpsc::channel::<Vec<u8>>(ACKS_IN_FLIGHT);
    tokio::spawn(apply_on_worker(
        cluster.clone(),
        from,
        working,
        replies.clone(),
    ));
    let write = async move {
        while let Some(reply) = replying.recv().await {
            let refused = matches!(reply, Message::Refused { .. });
            if frame::send(&mut writer, &reply).await.is_err() || refused {
                return;
            }
        }
    };
    let read = async {
        loop {
            let message = match frame::read(&mut reader, &mut buf, frame::MAX_FRAME).await {
                Ok(true) if super::cut_off() => return,
                Ok(true) => {
                    // Whatever a peer sends says it is alive, as its answers
                    // on this node's own link to it do.
                    cluster.heard(from, true);
                    frame::decode(&buf)
                }
                Ok(false) => return,
                Err(e) => Err(e),
            };
            if let Ok(Message::Admitted { used }) = &message {
                cluster.admitted_elsewhere(used);
                continue;
            }
            // Tables and changes go to the applying task as the frame they
            // came in (one buffer, decoded there again, which copies nothing).
            let reply = match message {
                Ok(Message::Heartbeat { view }) => {
                    if view > cluster.view_number() {
                        cluster.refresh_soon();
                    }
                    Some(Message::Alive {
                        view: cluster.view_number(),
                        serving: cluster.serving(),
                    })
                }
                Ok(Message::Join { node }) if node == from => {
                    let asking = cluster.clone();
                    let asked = cluster.spawn(async move { catchup::asked(&asking, node).await });
                    Some(match asked.await {
                        Ok(Ok(view)) => Message::Joining { view },
                        Ok(Err(reason)) => Message::Refused { reason },
                        Err(e) => Message::Refused {
                            reason: format!("asking to join: {e}"),
                        },
                    })
                }
                Ok(Message::Progress { node }) if node == from => Some(
                    match cluster.inner.catching_up.any(node) && cluster.serving() {
                        true => Message::Joining {
                            view: cluster.view_number(),
                        },
                        false => Message::Refused {
                            reason: format!("node {} is not catching node {node} up", cluster.me()),
                        },
                    },
                ),
                Ok(Message::Copy { node, view }) => {
                    let asking = cluster.clone();
                    let copied = cluster
                        .spawn(async move { catchup::copy_asked(&asking, from, node, view).await });
                    Some(match copied.await {
                        Ok(Ok((rows, bytes))) => Message::Copied { rows, bytes },
                        Ok(Err(reason)) => Message::Refused { reason },
                        Err(e) => Message::Refused {
                            reason: format!("copying: {e}"),
                        },
                    })
                }
                Ok(Message::Table { .. } | Message::Changes { .. }) => None,
                Ok(other) => Some(Message::Refused {
                    reason: format!("sent {other:?} on a stream"),
                }),
                Err(e) => Some(Message::Refused {
                    reason: e.to_string(),
                }),
            };
            let next = reply.is_none().then(|| std::mem::take(&mut buf));
            let refused = matches!(reply, Some(Message::Refused { .. }));
            if let Some(reply) = reply
                && replies.send(reply).await.is_err()
            {
                return;
            }
            if let Some(next) = next
                && work.send(next).await.is_err()
            {
                return;
            }
            if refused {
                return;
            }
        }
    };
    // Either ending ends the connection (the applying task sees its
    // channel close).
    tokio::select! {
        () = read => {}
        () = write => {}
    }
}

/// Applies a primary's stream in order and acknowledges it once durable:
/// frames that arrive meanwhile are applied before the wait and
/// acknowledged with it (the backup's group commit).
async fn apply_on_worker(
    cluster: Cluster,
    from: u32,
    mut working: mpsc::Receiver<Vec<u8>>,
    replies: mpsc::Sender<Message<'static>>,
) {
    let mut backup = Backup {
        cluster: &cluster,
        from,
        tables: HashMap::new(),
        answers: Some(replies.clone()),
    };
    let tc = cluster.engine().tc();
    let refuse = |reason: String| {
        tracing::warn!(peer = from, %reason, "refusing what a peer sent; closing the connection");
        Message::Refused { reason }
    };
    while let Some(first) = working.recv().await {
        let mut applied: Option<(u64, Mark)> = None;
        let mut next = Some(first);
        while let Some(frame) = next.take() {
            let done = match frame::decode(&frame) {
                Ok(Message::Table { id, database, def }) => backup.table(id, &database, def).await,
                Ok(Message::Changes { last, records }) => {
                    let records: Vec<&[u8]> = records.iter().map(|r| r.0).collect();
                    backup.apply(&records).await.map(|mark| {
                        applied = Some(match applied {
                            Some((_, before)) => (last, before.max(mark)),
                            None => (last, mark),
                        });
                    })
                }
                Ok(other) => Err(format!("sent {other:?} on a stream")),
                Err(e) => Err(e.to_string()),
            };
            if let Err(reason) = done {
                let _ = replies.send(refuse(reason)).await;
                return;
            }
            next = working.try_recv().ok();
        }
        if let Some((seq, mark)) = applied {
            let reply = match tc.wait_durable(mark).await {
                Ok(()) => Message::Applied { seq },
                Err(e) => refuse(e.to_string()),
            };
            let refused = matches!(reply, Message::Refused { .. });
            if replies.send(reply).await.is_err() || refused {
                return;
            }
        }
    }
}

/// Most messages waiting, each way.
const ACKS_IN_FLIGHT: usize = 64;

/// What a peer opened a connection for.
#[derive(Debug)]
enum Purpose {
    /// Its stream, heartbeats and catch-up questions.
    Stream,
    /// A client's connection, carried on to a front end.
    Relay(Relayed),
    /// REST requests sent on.
    Forward,
}

/// Reads the greeting: the node it comes from, if it is one of the group,
/// the view it knows, and what the connection is for.
async fn greet(
    cluster: &Cluster,
    reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    buf: &mut Vec<u8>,
) -> Result<(u32, u64, Purpose), String> {
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        frame::read(reader, buf, frame::MAX_GREETING),
    );
    match read.await {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => return Err("closed before greeting".into()),
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err("no greeting within 5 s".into()),
    }
    let (greeting, purpose) = match frame::decode(buf) {
        Ok(Message::Hello(g)) => (g, Purpose::Stream),
        Ok(Message::Relay(g)) => (g, Purpose::Relay(Relayed::Redis)),
        Ok(Message::RelaySql(g)) => (g, Purpose::Relay(Relayed::Sql)),
        Ok(Message::Forward(g)) => (g, Purpose::Forward),
        _ => return Err("the first message is not a greeting".into()),
    };
    let Greeting {
        version,
        node,
        group,
        view,
        secret,
    } = greeting;
    if !cluster.inner.secret.matches(secret) {
        return Err("wrong cluster secret".into());
    }
    if version != frame::TRANSPORT_VERSION {
        return Err(format!(
            "node {node} speaks transport version {version}, this node {}: the nodes of a group run one build",
            frame::TRANSPORT_VERSION
        ));
    }
    let Some(mine) = cluster.group() else {
        return Err(format!("node {} is in no node group yet", cluster.me()));
    };
    if mine.node_group != group || cluster.member(node).is_none() || node == cluster.me().0 {
        return Err(format!(
            "node {node} of group {group} is not another node of node group {}",
            mine.node_group
        ));
    }
    Ok((node, view, purpose))
}

/// The digests this node has answered while being caught up, by primary,
/// run, table and fragment, with the buckets it emptied: only the latest
/// run of each primary is kept.
#[derive(Debug, Default)]
pub(super) struct Digested(Mutex<HashMap<Seen, Vec<u32>>>);

/// A digest, by the primary that sent it, its run, table and fragment.
type Seen = (u32, u64, u32, u16);

impl Digested {
    fn get(&self, seen: Seen) -> Option<Vec<u32>> {
        let answered = self.0.lock().unwrap_or_else(|e| e.into_inner());
        answered.get(&seen).cloned()
    }

    fn remember(&self, seen: Seen, differ: Vec<u32>) {
        let mut answered = self.0.lock().unwrap_or_else(|e| e.into_inner());
        answered.retain(|&(from, run, ..), _| from != seen.0 || run == seen.1);
        answered.insert(seen, differ);
    }
}

struct Backup<'a> {
    cluster: &'a Cluster,
    from: u32,
    /// The primary's table ids, as this node's tables (none: not held here).
    tables: HashMap<u32, Option<Arc<Table>>>,
    /// Where answers to the primary's digests go (none: kept, for tests).
    answers: Option<mpsc::Sender<Message<'static>>>,
}

impl Backup<'_> {
    /// Learns which table the primary's `id` is.
    async fn table(
        &mut self,
        id: u32,
        database: &str,
        def: shoal_wire::schema::TableDef,
    ) -> Result<(), String> {
        let engine = self.cluster.engine();
        let found = match engine.table(database, def.name.as_str()) {
            Ok(table) => Some(table),
            Err(CatalogError::NoSuchTable { .. }) => {
                let db = engine.database(database).map_err(|e| e.to_string())?;
                match engine.create_table(&db.name, def.clone()).await {
                    Ok(table) => Some(table),
                    Err(CatalogError::TableExists { .. }) => {
                        engine.table(database, def.name.as_str()).ok()
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
            Err(CatalogError::NoSuchDatabase(_)) => {
                tracing::warn!(
                    primary = self.from,
                    database,
                    "changes for a database this node does not hold; skipped"
                );
                None
            }
            Err(e) => return Err(e.to_string()),
        };
        if let Some(table) = &found {
            // The rows must be alike; indexes are each node's own, and an
            // index added or dropped online reaches the nodes one by one.
            let (mine, theirs) = (table.def(), &def);
            if (&mine.columns, &mine.primary_key) != (&theirs.columns, &theirs.primary_key) {
                return Err(format!(
                    "table {database}.{} differs from the primary's",
                    def.name
                ));
            }
            if table.database.primary() != self.from {
                return Err(format!(
                    "node {} sent changes of database '{database}', whose primary in view {} is node {}",
                    self.from,
                    self.cluster.view_number(),
                    table.database.primary()
                ));
            }
        }
        self.tables.insert(id, found);
        Ok(())
    }

    /// Applies one frame's records, in order: where they end in this
    /// node's log. A clear (the first thing a primary catching this node
    /// up sends of a table) empties the table here first: what it held
    /// before is not the primary's.
    async fn apply(&mut self, records: &[&[u8]]) -> Result<Mark, String> {
        let tc = self.cluster.engine().tc();
        let mut batch = tc.batch();
        let mut mark = Mark::default();
        for record in records {
            for change in changes::decode(record) {
                let change = change?;
                let id = change.table().0;
                let held = self.tables.get(&id).cloned().flatten();
                // Only a database's primary in this node's view sends its
                // changes: a node of an older view is refused.
                if let Some(table) = held.as_ref()
                    && table.database.primary() != self.from
                {
                    return Err(format!(
                        "node {} is not the primary of database '{}' in view {}",
                        self.from,
                        table.database.name,
                        self.cluster.view_number()
                    ));
                }
                if let Change::Digest {
                    buckets, run, sums, ..
                } = change
                {
                    mark = mark.max(Self::flush(self.cluster, &mut batch).await?);
                    let answered = self.answer_digest(held.as_ref(), id, buckets, run, sums);
                    mark = mark.max(answered.await?);
                    continue;
                }
                let Some(table) = held.as_ref() else {
                    continue; // dropped, or not held here
                };
                if let Change::Clear { .. } = change {
                    mark = mark.max(Self::flush(self.cluster, &mut batch).await?);
                    self.clear(id).await?;
                    continue;
                }
                batch.push_change(table, &change)?;
            }
        }
        Ok(mark.max(Self::flush(self.cluster, &mut batch).await?))
    }

    /// Applies `batch` and starts it again: where its changes end in this
    /// node's log.
    async fn flush(cluster: &Cluster, batch: &mut Batch) -> Result<Mark, String> {
        if batch.is_empty() {
            return Ok(Mark::default());
        }
        let tc = cluster.engine().tc();
        let mark = (tc.apply_from_primary(batch).await).map_err(|e| e.to_string())?;
        for result in batch.results() {
            match result {
                Ok(_) | Err(OperationError::NotFound { .. }) => {}
                Err(e) => return Err(format!("applying a change: {e}")),
            }
        }
        *batch = tc.batch();
        Ok(mark)
    }

    /// Answers a digest of catch-up `run`: reconciles this node's rows of
    /// the primary's table `id` with it (a table not held here has nothing
    /// to reconcile), and tells the primary which buckets it emptied. A
    /// digest sent again — the link reconnected and sends again what was
    /// not acknowledged — is answered as the first time and changes nothing
    /// (the copies after it come again too): reconciled again, it could
    /// empty buckets that changed since, which nobody would copy. Where the
    /// deletions end in this node's log.
    async fn answer_digest(
        &self,
        table: Option<&Arc<Table>>,
        id: u32,
        buckets: Buckets,
        run: u64,
        sums: &[u8],
    ) -> Result<Mark, String> {
        let seen = (self.from, run, id, buckets.fragment);
        let answered = &self.cluster.inner.digests;
        let (mark, differ) = match (answered.get(seen), table) {
            (Some(differ), _) => (Mark::default(), differ),
            (None, None) => (Mark::default(), Vec::new()),
            (None, Some(table)) => {
                let (mark, differ) = self.reconcile(table, id, buckets, sums).await?;
                answered.remember(seen, differ.clone());
                (mark, differ)
            }
        };
        let answer = Message::Mismatched {
            run,
            table: id,
            fragment: buckets.fragment,
            buckets: differ,
        };
        if let Some(answers) = &self.answers
            && answers.send(answer).await.is_err()
        {
            return Err("the connection closed".into());
        }
        Ok(mark)
    }

    /// Sums this node's rows of `table` (the primary's `id`) in `buckets`
    /// as the primary did, and deletes those of every bucket whose sum
    /// differs from the primary's `sums`: where the deletions end in this
    /// node's log, and those buckets, for the primary to copy.
    async fn reconcile(
        &self,
        table: &Arc<Table>,
        id: u32,
        buckets: Buckets,
        sums: &[u8],
    ) -> Result<(Mark, Vec<u32>), String> {
        let workers = self.cluster.engine().tc().workers();
        // This node's fragments that hold keys of the primary's fragment.
        let fragments = table.fragments.len() as u16;
        let places: Vec<FragmentPlace> = (table.fragments.iter().enumerate())
            .filter(|&(g, _)| buckets.meets(g as u16, fragments))
            .map(|(_, &place)| place)
            .collect();
        let mut mine = vec![0u64; buckets.count as usize];
        for &place in &places {
            let summed =
                (workers.digest(table.id, place, buckets).await).map_err(|e| e.to_string())?;
            for (sum, add) in mine.iter_mut().zip(summed.unwrap_or_default()) {
                *sum = sum.wrapping_add(add);
            }
        }
        let differ: Vec<u32> = (changes::sums(sums).zip(&mine).enumerate())
            .filter(|(_, (theirs, mine))| theirs != *mine)
            .map(|(b, _)| b as u32)
            .collect();
        if differ.is_empty() {
            return Ok((Mark::default(), differ));
        }
        let only = Arc::new(Only {
            buckets,
            numbers: differ.clone(),
        });
        let mut batch = self.cluster.engine().tc().batch();
        for &place in &places {
            let keys = (workers.keys(table.id, place, &only).await).map_err(|e| e.to_string())?;
            for key in keys.unwrap_or_default() {
                let delete = Change::Delete {
                    table: TableId(id),
                    key: &key,
                };
                batch.push_change(table, &delete)?;
            }
        }
        let mark = Self::flush(self.cluster, &mut batch).await?;
        Ok((mark, differ))
    }

    /// Empties this node's replica of the primary's table `id`: made again,
    /// empty, with the same definition.
    async fn clear(&mut self, id: u32) -> Result<(), String> {
        let Some(Some(table)) = self.tables.get(&id).cloned() else {
            return Ok(());
        };
        let engine = self.cluster.engine();
        let (db, def) = (table.database.name.clone(), table.def().clone());
        (engine.drop_table(db.as_str(), def.name.as_str()).await).map_err(|e| e.to_string())?;
        let made = (engine.create_table(&db, def).await).map_err(|e| e.to_string())?;
        self.tables.insert(id, Some(made));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::tests::{create, engine, engine_with, read, run, runtime};
    use crate::types::value::Value;

    /// A node of another build is refused at its greeting, with why,
    /// whatever it opens the connection for.
    #[test]
    fn a_greeting_of_another_transport_version_is_refused() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (_stop, stopped) = tokio::sync::watch::channel(false);
            let secret = "s".repeat(32);
            let cluster = Cluster::new(
                engine(16),
                shoal_wire::secret::ClusterSecret::new(&secret).unwrap(),
                None,
                None,
                stopped,
            )
            .unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let greeted = |version: u32, relay: bool| {
                let (cluster, secret) = (cluster.clone(), secret.clone());
                let listener = &listener;
                async move {
                    let (node, group, view) = (2, 0, 1);
                    let secret = secret.as_bytes();
                    let greeting = Greeting {
                        version,
                        node,
                        group,
                        view,
                        secret,
                    };
                    let greeting = match relay {
                        false => Message::Hello(greeting),
                        true => Message::RelaySql(greeting),
                    };
                    let mut client = TcpStream::connect(addr).await.unwrap();
                    frame::send(&mut client, &greeting).await.unwrap();
                    let (server, _) = listener.accept().await.unwrap();
                    let (reader, _writer) = server.into_split();
                    let mut buf = Vec::new();
                    greet(&cluster, &mut BufReader::new(reader), &mut buf).await
                }
            };
            for relay in [false, true] {
                let err = greeted(frame::TRANSPORT_VERSION + 1, relay)
                    .await
                    .unwrap_err();
                assert!(
                    err.contains("transport version 2, this node 1"),
                    "{relay}: {err}"
                );
                // Of this version it goes on to the checks after: this
                // node is in no group yet.
                let err = greeted(frame::TRANSPORT_VERSION, relay).await.unwrap_err();
                assert!(err.contains("in no node group"), "{relay}: {err}");
            }
        });
    }

    const TABLE: &str = r#"{"name": "t", "primary_key": ["id"], "columns": [
        {"name": "id", "type": "BIGINT", "nullable": false},
        {"name": "note", "type": "VARCHAR(20)", "nullable": true}]}"#;

    /// A node back that took rows of an earlier run's stream after it
    /// emptied itself holds rows the primary has deleted since; the clear
    /// the next run sends first leaves it with the primary's rows alone.
    #[test]
    fn a_clear_then_a_copy_leaves_the_primarys_rows_alone() {
        runtime().block_on(async {
            let primary = engine(64);
            let back = engine(64);
            let source = create(&primary, "shop", TABLE).await;
            let stale = create(&back, "shop", TABLE).await;
            let row = |id: i64| {
                [
                    ("id", Value::Int(id)),
                    ("note", Value::Text(format!("n{id}"))),
                ]
            };
            run(&primary, |b| {
                (1..=3).for_each(|id| b.write(&source, &row(id)).unwrap())
            })
            .await;
            // Row 1 as the primary has it, row 99 long deleted there.
            run(&back, |b| {
                [1, 99]
                    .iter()
                    .for_each(|&id| b.write(&stale, &row(id)).unwrap())
            })
            .await;

            // What the primary's run ships to node 2: a clear, then the copy.
            let outbox = primary.tc().workers().log().outbox();
            outbox.catch_up(2);
            let mut clear = Vec::new();
            changes::clear(&mut clear, source.id);
            outbox.ship_to(2, &clear).unwrap();
            for &place in &source.fragments {
                let mut from = 0;
                while let Some(step) = primary
                    .tc()
                    .workers()
                    .copy(source.id, place, from, 2, None)
                    .await
                    .unwrap()
                {
                    match step.next {
                        Some(next) => from = next,
                        None => break,
                    }
                }
            }
            let (records, _) = outbox.after(2, 0, usize::MAX);
            assert!(records.len() > 1, "a clear and copies: {}", records.len());

            let (_stop, stopped) = tokio::sync::watch::channel(false);
            let secret = shoal_wire::secret::ClusterSecret::new(&"s".repeat(32)).unwrap();
            let cluster = Cluster::new(back.clone(), secret, None, None, stopped).unwrap();
            stale.database.set_primary(1, false);
            let mut backup = Backup {
                cluster: &cluster,
                from: 1,
                tables: HashMap::from([(source.id.0, Some(Arc::clone(&stale)))]),
                answers: None,
            };
            let records: Vec<&[u8]> = records.iter().map(|(_, r)| &r[..]).collect();
            backup.apply(&records).await.unwrap();

            let now = back.table("shop", "t").unwrap();
            assert_ne!(now.id, stale.id, "the table was made again");
            for id in 1..=3 {
                assert_eq!(
                    read(&back, &now, &[Value::Int(id)]).await,
                    Some(vec![Value::Int(id), Value::Text(format!("n{id}"))])
                );
            }
            assert_eq!(
                read(&back, &now, &[Value::Int(99)]).await,
                None,
                "the stale row is gone"
            );
        });
    }

    /// A node back that holds most rows as the primary does — some changed
    /// since, one gone, one deleted on the primary — is sent digests; it
    /// keeps the buckets it holds alike, empties the others, and is copied
    /// those alone: it ends with the primary's rows, and far fewer went
    /// than a whole copy. The two nodes split the table into different
    /// numbers of fragments.
    #[test]
    fn digests_keep_what_a_node_back_holds_alike_and_copy_the_rest() {
        crate::test_runtime().block_on(async {
            let primary = engine_with(256, 4);
            let back = engine_with(256, 3);
            let source = create(&primary, "shop", TABLE).await;
            let held = create(&back, "shop", TABLE).await;
            let row =
                |id: i64, note: &str| [("id", Value::Int(id)), ("note", Value::Text(note.into()))];
            let ids = 1..=2000i64;
            run(&primary, |b| {
                ids.clone()
                    .for_each(|id| b.write(&source, &row(id, "n")).unwrap())
            })
            .await;
            // Row 10 the same, though written twice here (its var part
            // moved): it sums alike.
            run(&back, |b| {
                b.write(&held, &row(10, "a longer note")).unwrap()
            })
            .await;
            run(&back, |b| {
                ids.clone().filter(|&id| id != 7).for_each(|id| {
                    b.write(&held, &row(id, if id == 5 { "old" } else { "n" }))
                        .unwrap()
                });
                b.write(&held, &row(5000, "deleted long ago")).unwrap();
            })
            .await;

            let (_stop, stopped) = tokio::sync::watch::channel(false);
            let secret = shoal_wire::secret::ClusterSecret::new(&"s".repeat(32)).unwrap();
            let cluster = Cluster::new(back.clone(), secret, None, None, stopped).unwrap();
            held.database.set_primary(1, false);
            let (answers, mut answered) = mpsc::channel(64);
            let mut backup = Backup {
                cluster: &cluster,
                from: 1,
                tables: HashMap::from([(source.id.0, Some(Arc::clone(&held)))]),
                answers: Some(answers),
            };
            let workers = primary.tc().workers();
            let outbox = workers.log().outbox();
            outbox.catch_up(2);
            let mut digested = Vec::new();
            for (fragment, &place) in source.fragments.iter().enumerate() {
                let buckets = Buckets {
                    fragments: 4,
                    fragment: fragment as u16,
                    count: 16,
                };
                let sums = workers
                    .digest(source.id, place, buckets)
                    .await
                    .unwrap()
                    .unwrap();
                let mut record = Vec::new();
                changes::digest(&mut record, source.id, buckets, 9, &sums);
                outbox.ship_to(2, &record).unwrap();
                digested.push((place, buckets));
            }
            let mut sent = 0;
            deliver(outbox, &mut sent, &mut backup).await;
            let (mut copied, mut differ) = (0, 0);
            for _ in 0..digested.len() {
                let Some(Message::Mismatched {
                    run,
                    fragment,
                    buckets,
                    ..
                }) = answered.recv().await
                else {
                    panic!("an answer to each digest");
                };
                assert_eq!(run, 9);
                differ += buckets.len();
                if buckets.is_empty() {
                    continue;
                }
                let (place, cut) = digested[usize::from(fragment)];
                let only = Arc::new(Only {
                    buckets: cut,
                    numbers: buckets,
                });
                let mut from = 0;
                while let Some(step) = workers
                    .copy(source.id, place, from, 2, Some(&only))
                    .await
                    .unwrap()
                {
                    copied += step.rows;
                    match step.next {
                        Some(next) => from = next,
                        None => break,
                    }
                }
            }
            deliver(outbox, &mut sent, &mut backup).await;
            // Rows 5, 7 and 5000: three buckets of 64 differ at most (fewer
            // if they share one), a few dozen rows each, not 2000.
            assert!((1..=3).contains(&differ), "{differ} buckets differ");
            assert!((1..200).contains(&copied), "{copied} rows copied");
            let note = |id: i64, changed: bool| match (id, changed) {
                (5000, _) => None,
                (1500, true) => Some(vec![Value::Int(id), Value::Text("later".into())]),
                _ => Some(vec![Value::Int(id), Value::Text("n".into())]),
            };
            for id in ids.clone().chain([5000]) {
                let held_now = read(&back, &held, &[Value::Int(id)]).await;
                assert_eq!(held_now, note(id, false), "row {id}");
            }
            // A row changes, then the link reconnects and sends everything
            // again: the digests are answered as before and change nothing
            // (reconciled again, row 1500's bucket would be emptied, and
            // only row 1500 of it come back).
            run(&primary, |b| b.write(&source, &row(1500, "later")).unwrap()).await;
            deliver(outbox, &mut sent, &mut backup).await;
            let mut again = 0;
            deliver(outbox, &mut again, &mut backup).await;
            let mut answers = 0;
            while let Ok(answer) = answered.try_recv() {
                assert!(matches!(answer, Message::Mismatched { run: 9, .. }));
                answers += 1;
            }
            assert_eq!(answers, digested.len(), "each digest answered again");
            for id in ids.clone().chain([5000]) {
                let held_now = read(&back, &held, &[Value::Int(id)]).await;
                assert_eq!(held_now, note(id, true), "row {id}");
            }
        });
    }

    /// Applies on `backup` what the stream has for node 2 after `sent`.
    async fn deliver(outbox: &crate::log::ship::Outbox, sent: &mut u64, backup: &mut Backup<'_>) {
        let (records, at) = outbox.after(2, *sent, usize::MAX);
        *sent = at;
        let records: Vec<&[u8]> = records.iter().map(|(_, r)| &r[..]).collect();
        backup.apply(&records).await.unwrap();
    }
}
