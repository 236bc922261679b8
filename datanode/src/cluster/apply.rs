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
    loop {
        let message = match frame::read(&mut reader, &mut buf, frame::MAX_FRAME).await {
            Ok(true) => frame::decode(&buf),
            Ok(false) => return,
            Err(e) => Err(e),
        };
        let answer = match message {
            Ok(Message::Table { id, database, def }) => backup.table(id, &database, def).await,
            Ok(Message::Changes { first, records }) => {
                let last = first + records.len() as u64 - 1;
                let records: Vec<&[u8]> = records.iter().map(|r| r.0).collect();
                backup.apply(&records).await.map(|()| Some(last))
            }
            Ok(other) => Err(format!("sent {other:?} on a stream")),
            Err(e) => Err(e.to_string()),
        };
        let reply = match answer {
            Ok(None) => continue,
            Ok(Some(seq)) => Message::Applied { seq },
            Err(reason) => {
                tracing::error!(primary = from, %reason, "a primary's stream cannot be applied; closing it");
                Message::Refused { reason }
            }
        };
        let refused = matches!(reply, Message::Refused { .. });
        if frame::send(&mut writer, &reply).await.is_err() || refused {
            return;
        }
    }
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
    ) -> Result<Option<u64>, String> {
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
        Ok(None)
    }

    /// Applies one frame's records, in order.
    async fn apply(&mut self, records: &[&[u8]]) -> Result<(), String> {
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
            return Ok(());
        }
        tc.apply_from_primary(&mut batch)
            .await
            .map_err(|e| e.to_string())?;
        for result in batch.results() {
            match result {
                Ok(_) | Err(OperationError::NotFound { .. }) => {}
                Err(e) => return Err(format!("applying a change: {e}")),
            }
        }
        Ok(())
    }
}
