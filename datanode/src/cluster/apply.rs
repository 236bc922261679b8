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

use tokio::io::BufReader;
use tokio::net::TcpStream;

use super::Cluster;
use super::frame::{self, Message};
use crate::log::Mark;
use crate::log::changes::{self, Change};
use crate::node::catalog::CatalogError;
use crate::tc::Table;
use crate::tc::batch::OperationError;

/// Serves one connection a peer opened.
pub(super) async fn serve(cluster: Cluster, stream: TcpStream, peer: SocketAddr) {
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    let from = match greet(&cluster, &mut reader, &mut buf).await {
        Ok(from) => from,
        Err(reason) => {
            tracing::warn!(%peer, %reason, "refused a peer connection");
            let _ = frame::send(&mut writer, &Message::Refused { reason }).await;
            return;
        }
    };
    let welcome = Message::Welcome {
        node: cluster.me().0,
    };
    if frame::send(&mut writer, &welcome).await.is_err() {
        return;
    }
    tracing::info!(primary = from, %peer, "taking a primary's stream");
    let mut backup = Backup {
        cluster: &cluster,
        from,
        tables: HashMap::new(),
    };
    // Frames are applied as they come; each is acknowledged once this
    // node's log is durable that far, so that its syncs overlap the
    // applying of the frames after it (the backup's group commit).
    let (answers, mut answered) = tokio::sync::mpsc::channel::<Answer>(ACKS_IN_FLIGHT);
    let read = async move {
        loop {
            let message = match frame::read(&mut reader, &mut buf, frame::MAX_FRAME).await {
                Ok(true) => frame::decode(&buf),
                Ok(false) => return,
                Err(e) => Err(e),
            };
            let answer = match message {
                Ok(Message::Table { id, database, def }) => {
                    backup.table(id, &database, def).await.map(|()| None)
                }
                Ok(Message::Changes { first, records }) => {
                    match first
                        .checked_add(records.len() as u64)
                        .and_then(|end| end.checked_sub(1))
                    {
                        Some(last) if !records.is_empty() => {
                            let records: Vec<&[u8]> = records.iter().map(|r| r.0).collect();
                            backup
                                .apply(&records)
                                .await
                                .map(|mark| Some(Answer::Applied(last, mark)))
                        }
                        _ => Err("a frame of changes without any".to_owned()),
                    }
                }
                Ok(other) => Err(format!("sent {other:?} on a stream")),
                Err(e) => Err(e.to_string()),
            };
            let answer = match answer {
                Ok(None) => continue,
                Ok(Some(answer)) => answer,
                Err(reason) => {
                    tracing::error!(primary = from, %reason, "a primary's stream cannot be applied; closing it");
                    Answer::Refused(reason)
                }
            };
            let refused = matches!(answer, Answer::Refused(_));
            if answers.send(answer).await.is_err() || refused {
                return;
            }
        }
    };
    let tc = cluster.engine().tc();
    let acknowledge = async move {
        while let Some(first) = answered.recv().await {
            // Every answer waiting now is sent as one: the last frame's.
            let mut last = first;
            while let Ok(next) = answered.try_recv() {
                if matches!(last, Answer::Refused(_)) {
                    break;
                }
                last = next;
            }
            let reply = match last {
                Answer::Applied(seq, mark) => match tc.wait_durable(mark).await {
                    Ok(()) => Message::Applied { seq },
                    Err(e) => Message::Refused {
                        reason: e.to_string(),
                    },
                },
                Answer::Refused(reason) => Message::Refused { reason },
            };
            let refused = matches!(reply, Message::Refused { .. });
            if frame::send(&mut writer, &reply).await.is_err() || refused {
                return;
            }
        }
    };
    tokio::join!(read, acknowledge);
}

/// Most frames applied and not yet acknowledged.
const ACKS_IN_FLIGHT: usize = 64;

/// What the backup answers a frame.
enum Answer {
    /// Applied up to this sequence number, durable once the log is that far.
    Applied(u64, Mark),
    Refused(String),
}

/// Reads the greeting: the node it comes from, if it is one of the group.
async fn greet(
    cluster: &Cluster,
    reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    buf: &mut Vec<u8>,
) -> Result<u32, String> {
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
    let Ok(Message::Hello {
        node,
        group,
        secret,
        ..
    }) = frame::decode(buf)
    else {
        return Err("the first message is not a greeting".into());
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
    Ok(node)
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
            if table.database.is_primary_here() {
                return Err(format!(
                    "node {} sent changes of database '{database}', whose primary is this node",
                    self.from
                ));
            }
        }
        self.tables.insert(id, found);
        Ok(())
    }

    /// Applies one frame's records, in order: where they end in this
    /// node's log.
    async fn apply(&mut self, records: &[&[u8]]) -> Result<Mark, String> {
        let tc = self.cluster.engine().tc();
        let mut batch = tc.batch();
        for record in records {
            for change in changes::decode(record) {
                let change = change?;
                let (Change::Put { table, .. } | Change::Delete { table, .. }) = &change;
                let Some(Some(table)) = self.tables.get(&table.0) else {
                    continue; // dropped, or not held here
                };
                batch.push_change(table, &change)?;
            }
        }
        if batch.is_empty() {
            return Ok(Mark::default());
        }
        let mark = (tc.apply_from_primary(&mut batch).await).map_err(|e| e.to_string())?;
        for result in batch.results() {
            match result {
                Ok(_) | Err(OperationError::NotFound { .. }) => {}
                Err(e) => return Err(format!("applying a change: {e}")),
            }
        }
        Ok(mark)
    }
}
