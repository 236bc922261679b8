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
use std::sync::Arc;

use tokio::io::{AsyncReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::frame::{self, Message};
use super::{Cluster, catchup};
use crate::log::Mark;
use crate::log::changes::{self, Change};
use crate::node::catalog::CatalogError;
use crate::tc::Table;
use crate::tc::batch::{Batch, OperationError};

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
        Purpose::Relay => return cluster.hand_to_front(stream, sent_on),
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
enum Purpose {
    /// Its stream, heartbeats and catch-up questions.
    Stream,
    /// A Redis client's connection, carried on.
    Relay,
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
    let (node, group, view, secret, purpose) = match frame::decode(buf) {
        Ok(Message::Hello {
            node,
            group,
            view,
            secret,
        }) => (node, group, view, secret, Purpose::Stream),
        Ok(Message::Relay {
            node,
            group,
            view,
            secret,
        }) => (node, group, view, secret, Purpose::Relay),
        Ok(Message::Forward {
            node,
            group,
            view,
            secret,
        }) => (node, group, view, secret, Purpose::Forward),
        _ => return Err("the first message is not a greeting".into()),
    };
    if !cluster.inner.secret.matches(secret) {
        return Err("wrong cluster secret".into());
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

struct Backup<'a> {
    cluster: &'a Cluster,
    from: u32,
    /// The primary's table ids, as this node's tables (none: not held here).
    tables: HashMap<u32, Option<Arc<Table>>>,
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
            if table.def() != &def {
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
                let Some(Some(table)) = self.tables.get(&id) else {
                    continue; // dropped, or not held here
                };
                // Only a database's primary in this node's view sends its
                // changes: a node of an older view is refused.
                if table.database.primary() != self.from {
                    return Err(format!(
                        "node {} is not the primary of database '{}' in view {}",
                        self.from,
                        table.database.name,
                        self.cluster.view_number()
                    ));
                }
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
    use crate::node::tests::{create, engine, read, run, runtime};
    use crate::types::value::Value;

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
                    .copy(source.id, place, from, 2)
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
}
