//! The internal API between the control plane and a data node (port
//! 4407): its routes and the bodies both sides send, one type for each.
//! Every route but the health check needs `Authorization: Bearer <cluster
//! secret>`; an error answers [`ErrorBody`] with the matching status.

use serde::{Deserialize, Serialize};
use shoal_quota::Quota;

use crate::apikey::KeyGrant;
use crate::schema::{DatabaseName, IndexDef, IndexName, TableDef, TableName, TenantId};

/// The routes, as paths.
pub mod route {
    /// `GET`: liveness, no secret needed ([`super::Health`]).
    pub const HEALTHZ: &str = "/internal/v1/healthz";
    /// `GET`: every database with its tables ([`super::DatabaseInfo`]s);
    /// `POST` [`super::NewDatabase`]: creates one ([`super::DatabaseCreated`]).
    pub const DATABASES: &str = "/internal/v1/databases";
    /// `GET`: the ndbinfo tables and their columns.
    pub const NDBINFO: &str = "/internal/v1/ndbinfo";
    /// `GET`: tenant API keys ([`super::KeyList`]); `POST` [`super::NewKey`]
    /// makes one on the node ([`super::CreatedKey`]).
    pub const API_KEYS: &str = "/internal/v1/api-keys";
    /// `POST`: takes a checkpoint now ([`super::CheckpointSummary`]).
    pub const CHECKPOINT: &str = "/internal/v1/checkpoint";
    /// `POST` on the control plane [`super::Heartbeat`]: a node reports itself.
    pub const HEARTBEAT: &str = "/internal/v1/datanodes/heartbeat";
    /// `POST` on the control plane a [`super::SqlSchemaChange`]: a change of
    /// schema an SQL client asked a node for, made as the console's are.
    /// Answers as the control plane's API answers the same change.
    pub const SQL_SCHEMA_CHANGE: &str = "/internal/v1/sql/schema";
    /// `GET`, `PUT` a [`super::Group`]: the node group the node is in.
    pub const GROUP: &str = "/internal/v1/group";
    /// `GET`, `PUT` a [`super::Directory`]: where the cluster's databases
    /// are served, for a node to send a client of another group's there.
    pub const DIRECTORY: &str = "/internal/v1/directory";

    /// On the control plane: `GET` a group's current [`super::View`];
    /// `POST` a [`super::ViewChange`] to move it on (answers the view now).
    pub fn group_view(group: u32) -> String {
        format!("/internal/v1/groups/{group}/view")
    }

    /// `DELETE`: drops a database and its tables.
    pub fn database(db: &str) -> String {
        format!("{DATABASES}/{db}")
    }

    /// `POST` a `TableDef`: creates a table ([`super::TableCreated`]).
    pub fn tables(db: &str) -> String {
        format!("{DATABASES}/{db}/tables")
    }

    /// `DELETE`: drops a table.
    pub fn table(db: &str, table: &str) -> String {
        format!("{DATABASES}/{db}/tables/{table}")
    }

    /// `POST` an `IndexDef`: adds an ordered index, built while the table
    /// serves.
    pub fn indexes(db: &str, table: &str) -> String {
        format!("{DATABASES}/{db}/tables/{table}/indexes")
    }

    /// `POST` a scan request (the REST data API's): a page of the table's
    /// rows, `{"data": [rows], "next": cursor or null}`.
    pub fn scan(db: &str, table: &str) -> String {
        format!("{DATABASES}/{db}/tables/{table}/scan")
    }

    /// `DELETE`: drops an ordered index.
    pub fn index(db: &str, table: &str, index: &str) -> String {
        format!("{DATABASES}/{db}/tables/{table}/indexes/{index}")
    }

    /// `GET`, `PUT` a `Quota`, `DELETE`: a database's quota
    /// ([`super::DatabaseQuota`]).
    pub fn database_quota(db: &str) -> String {
        format!("{DATABASES}/{db}/quota")
    }

    /// `GET`, `PUT` a `Quota`, `DELETE`: a tenant's quota
    /// ([`super::TenantQuota`]).
    pub fn tenant_quota(tenant: &str) -> String {
        format!("/internal/v1/tenants/{tenant}/quota")
    }

    /// `POST {"atomic"?, "operations": [{op, table, row | key}]}`: reads
    /// and writes rows, for operators and the console; answers
    /// `{"results": [..]}`.
    pub fn transaction(db: &str) -> String {
        format!("{DATABASES}/{db}/transaction")
    }

    /// `PUT` a [`super::PushedKey`], `DELETE`: one API key.
    pub fn api_key(prefix: &str) -> String {
        format!("{API_KEYS}/{prefix}")
    }

    /// `GET`: a table's rows ([`crate::ndbinfo::Rows`]).
    pub fn ndbinfo(table: &str) -> String {
        format!("{NDBINFO}/{table}")
    }
}

/// A data node's id in its cluster (`--node-id`): the same integer in the
/// node's reports, the control plane's registry and every answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// As the control plane's store keeps it.
impl From<NodeId> for i64 {
    fn from(id: NodeId) -> i64 {
        i64::from(id.0)
    }
}

impl TryFrom<i64> for NodeId {
    type Error = std::num::TryFromIntError;

    fn try_from(n: i64) -> Result<NodeId, Self::Error> {
        u32::try_from(n).map(NodeId)
    }
}

/// Why a request was refused: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

/// A node's health: `ok`, or `failed` with the reason (and status 503).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub status: String,
    pub node_id: NodeId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A database to create, in a tenant if given. The names are checked by
/// the node, which answers `INVALID_NAME` for a bad one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewDatabase {
    pub name: String,
    #[serde(default)]
    pub tenant: Option<String>,
    /// The node of its group that is the primary of every fragment of the
    /// database while it is up; the receiving node when absent.
    #[serde(default)]
    pub primary: Option<NodeId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseCreated {
    pub name: String,
    pub id: u32,
    pub tenant: Option<String>,
}

/// A database a node holds, with its tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatabaseInfo {
    pub name: String,
    pub tenant: Option<String>,
    pub tables: Vec<TableDef>,
    /// Its primary node (see [`NewDatabase::primary`]).
    #[serde(default)]
    pub primary: Option<NodeId>,
}

/// A node group: the data nodes that each hold a replica of every fragment
/// of the group's databases, in node-id order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    pub node_group: u32,
    pub members: Vec<Member>,
    /// Which of them are live, as the arbitrator last decided.
    #[serde(default)]
    pub view: View,
}

/// A group's view: its live nodes, numbered. Only the control plane, as
/// arbitrator, moves a view on (one number at a time), so two nodes that
/// cannot reach each other can never both be told they go on; a node acts
/// only on the newest view it knows and refuses a peer of an older one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct View {
    pub number: u64,
    /// Live nodes, in node-id order.
    pub members: Vec<NodeId>,
    /// Nodes whose primaries another node serves: `(from, to)`. A node
    /// that fails hands its primaries to the next live node of its group;
    /// they stay there when it comes back.
    #[serde(default)]
    pub moved: Vec<(NodeId, NodeId)>,
}

impl View {
    /// The node serving the primaries of `preferred` in this view.
    pub fn primary(&self, preferred: NodeId) -> Option<NodeId> {
        let mut node = preferred;
        for _ in 0..=self.moved.len() {
            match self.moved.iter().find(|(from, _)| *from == node) {
                Some((_, to)) => node = *to,
                None => break,
            }
        }
        self.members.contains(&node).then_some(node)
    }

    /// The next view without `gone`, in a group of `group` (node-id order):
    /// its primaries, and those it served, go to the next live node after
    /// it. `None` when nothing is left.
    pub fn without(&self, gone: NodeId, group: &[NodeId]) -> Option<View> {
        let members: Vec<NodeId> = self
            .members
            .iter()
            .copied()
            .filter(|&m| m != gone)
            .collect();
        let at = group.iter().position(|&n| n == gone)?;
        let heir = (1..=group.len())
            .map(|step| group[(at + step) % group.len()])
            .find(|n| members.contains(n))?;
        let mut moved: Vec<(NodeId, NodeId)> = (self.moved.iter())
            .map(|&(from, to)| (from, if to == gone { heir } else { to }))
            .filter(|(from, to)| from != to)
            .collect();
        moved.retain(|(from, _)| *from != gone);
        moved.push((gone, heir));
        Some(View {
            number: self.number + 1,
            members,
            moved,
        })
    }

    /// The next view with `back`'s primaries served by `back` again.
    pub fn restored(&self, back: NodeId) -> View {
        View {
            number: self.number + 1,
            members: self.members.clone(),
            moved: (self.moved.iter())
                .copied()
                .filter(|(from, _)| *from != back)
                .collect(),
        }
    }

    /// The arbitrator's rule, with `self` the current view of a group of
    /// `group` (node-id order): the next view if `asked` is granted,
    /// `None` if it is refused. Granted only from the current view, to a
    /// node in it that stays in it, or that only takes itself out; a node
    /// added keeps its primaries moved until restored, and only a member
    /// has its primaries restored.
    pub fn change(&self, asked: &ViewChange, group: &[NodeId]) -> Option<View> {
        let leaves =
            asked.remove == [asked.node_id] && asked.add.is_empty() && asked.restore.is_empty();
        let asker_stays = !asked.remove.contains(&asked.node_id) || leaves;
        if self.number != asked.from || !self.members.contains(&asked.node_id) || !asker_stays {
            return None;
        }
        let mut next = self.clone();
        for &gone in &asked.remove {
            if next.members.contains(&gone) {
                next = next.without(gone, group)?;
            }
        }
        for &joined in &asked.add {
            next = next.with(joined);
        }
        for &back in &asked.restore {
            if !next.members.contains(&back) {
                return None;
            }
            next = next.restored(back);
        }
        next.number = self.number + 1;
        Some(next)
    }

    /// The next view with `joined` live again (its primaries stay moved).
    pub fn with(&self, joined: NodeId) -> View {
        let mut members = self.members.clone();
        if !members.contains(&joined) {
            members.push(joined);
            members.sort();
        }
        View {
            number: self.number + 1,
            members,
            moved: self.moved.clone(),
        }
    }
}

/// A node asks the arbitrator to move its group's view on from `from`:
/// without the nodes it finds dead, or with a node that has caught up.
/// Granted only if `from` is still the view and the asking node is in it
/// and stays in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewChange {
    pub node_id: NodeId,
    pub from: u64,
    #[serde(default)]
    pub remove: Vec<NodeId>,
    #[serde(default)]
    pub add: Vec<NodeId>,
    /// Nodes of the view that serve their own primaries again.
    #[serde(default)]
    pub restore: Vec<NodeId>,
}

/// A node of a group and where it is reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    pub node_id: NodeId,
    /// `host:port` of its node-to-node transport.
    pub peer_addr: String,
    pub rest_url: String,
    pub resp_addr: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableCreated {
    pub id: u32,
    pub database: String,
    pub fragments: u16,
    pub table: TableDef,
}

/// A database's quota with what it has used since the node started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatabaseQuota {
    pub database: String,
    pub tenant: Option<String>,
    pub quota: Quota,
    pub usage: DatabaseUsage,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseUsage {
    pub in_memory_bytes: u64,
    pub read_units: u64,
    pub write_units: u64,
    pub throttled_reads: u64,
    pub throttled_writes: u64,
    pub quota_rejections: u64,
}

/// A tenant's quota with its databases' memory together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantQuota {
    pub tenant: TenantId,
    pub quota: Quota,
    pub usage: TenantUsage,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantUsage {
    pub in_memory_bytes: u64,
    pub databases: Vec<String>,
}

/// An API key as a node lists it: everything but its salt and hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyView {
    pub prefix: String,
    pub tenant: TenantId,
    pub grants: Vec<KeyGrant>,
    pub expires_at: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyList {
    pub keys: Vec<KeyView>,
}

/// A key for the node to make (an operator without a control plane).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    pub tenant: TenantId,
    pub grants: Vec<KeyGrant>,
    #[serde(default)]
    pub expires_at: Option<u64>,
}

/// A key the node made: the only time its secret is seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedKey {
    #[serde(flatten)]
    pub view: KeyView,
    pub key: String,
}

/// A key the control plane pushes: its salted hash, never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushedKey {
    pub tenant: TenantId,
    pub salt: String,
    pub hash: String,
    pub grants: Vec<KeyGrant>,
    #[serde(default)]
    pub expires_at: Option<u64>,
    /// As `KeyDef::sql_hash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql_hash: Option<String>,
}

/// Where every database of the cluster is served: each node group's nodes
/// as clients reach them, and each database's group. A node answers a
/// client of a database another group serves with that group's addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Directory {
    pub groups: Vec<GroupEndpoints>,
    pub databases: Vec<Placed>,
}

/// A node group's nodes, as clients reach them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupEndpoints {
    pub node_group: u32,
    pub nodes: Vec<crate::api::Endpoint>,
}

/// A database and the node group that serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Placed {
    pub name: String,
    pub node_group: u32,
}

/// What a checkpoint did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointSummary {
    pub id: u64,
    pub fragments: usize,
    pub bytes: u64,
    pub redo_start: u64,
    pub redo_segments_removed: usize,
    pub took_ms: u64,
}

/// What a data node reports about itself every few seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    pub node_id: NodeId,
    pub internal_url: String,
    pub rest_url: String,
    pub resp_addr: String,
    /// `host:port` of its node-to-node transport.
    #[serde(default)]
    pub peer_addr: String,
    /// `host:port` of SQL over the MySQL protocol ('' from a node before it).
    #[serde(default)]
    pub mysql_addr: String,
    pub data_memory_bytes: u64,
    pub used_bytes: u64,
    /// New each time the node starts.
    pub boot_id: String,
    /// Keys used since the last report.
    #[serde(default)]
    pub keys_used: Vec<KeyUse>,
}

/// A key a node saw used, and when (seconds since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyUse {
    pub prefix: String,
    pub at: u64,
}

/// A change of schema an SQL client asked a data node for (`CREATE TABLE`
/// and the rest over the MySQL protocol): the node asks the control plane
/// on the client's API key, so that the change is checked, counted against
/// the tenant's quotas, audited and made on every node of the group as the
/// console's are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlSchemaChange {
    /// The prefix of the key the client logged in with.
    pub key: String,
    pub database: DatabaseName,
    pub change: SchemaChange,
}

/// What an SQL client changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op", deny_unknown_fields)]
pub enum SchemaChange {
    CreateTable {
        table: TableDef,
    },
    DropTable {
        table: TableName,
    },
    /// Every row removed: the table made again as it was.
    Truncate {
        table: TableName,
    },
    AddIndex {
        table: TableName,
        index: IndexDef,
    },
    DropIndex {
        table: TableName,
        index: IndexName,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_the_paths_both_sides_use() {
        assert_eq!(route::tables("shop"), "/internal/v1/databases/shop/tables");
        assert_eq!(
            route::table("shop", "items"),
            "/internal/v1/databases/shop/tables/items"
        );
        assert_eq!(
            route::tenant_quota("acme"),
            "/internal/v1/tenants/acme/quota"
        );
        assert_eq!(route::api_key("abc"), "/internal/v1/api-keys/abc");
        assert_eq!(
            route::ndbinfo("memoryusage"),
            "/internal/v1/ndbinfo/memoryusage"
        );
    }

    #[test]
    fn a_created_key_carries_its_view_and_its_secret() {
        let created = CreatedKey {
            view: KeyView {
                prefix: "p".into(),
                tenant: TenantId::parse("acme").unwrap(),
                grants: Vec::new(),
                expires_at: None,
            },
            key: "p.secret".into(),
        };
        let json = serde_json::to_value(&created).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"prefix": "p", "tenant": "acme", "grants": [],
                "expires_at": null, "key": "p.secret"})
        );
        assert_eq!(serde_json::from_value::<CreatedKey>(json).unwrap(), created);
    }

    #[test]
    fn a_failed_nodes_primaries_go_to_the_next_live_node_and_stay_there() {
        let (n1, n2, n3) = (NodeId(1), NodeId(2), NodeId(3));
        let group = [n1, n2, n3];
        let all = View {
            number: 1,
            members: group.to_vec(),
            moved: Vec::new(),
        };
        assert_eq!(all.primary(n2), Some(n2));
        let v2 = all.without(n2, &group).unwrap();
        assert_eq!((v2.number, v2.members.clone()), (2, vec![n1, n3]));
        assert_eq!(v2.primary(n2), Some(n3));
        // The heir fails too: both sets go on to the one left.
        let v3 = v2.without(n3, &group).unwrap();
        assert_eq!(
            (v3.primary(n1), v3.primary(n2), v3.primary(n3)),
            (Some(n1), Some(n1), Some(n1))
        );
        // Back, a node serves nothing until its primaries are handed back.
        let v4 = v3.with(n2);
        assert_eq!(v4.members, vec![n1, n2]);
        assert_eq!(v4.primary(n2), Some(n1));
        let v5 = v4.restored(n2);
        assert_eq!(
            (v5.number, v5.primary(n2), v5.primary(n3)),
            (5, Some(n2), Some(n1))
        );
        // Nothing is left without the last node.
        let alone = View {
            number: 9,
            members: vec![n1],
            moved: Vec::new(),
        };
        assert_eq!(alone.without(n1, &group), None);
        // The last node of the group wraps round to the first.
        assert_eq!(all.without(n3, &group).unwrap().primary(n3), Some(n1));
    }

    #[test]
    fn a_heartbeat_with_a_field_it_does_not_know_is_refused() {
        let beat = serde_json::json!({"node_id": 1, "internal_url": "http://a:1",
            "rest_url": "http://a:2", "resp_addr": "a:3", "data_memory_bytes": 1,
            "used_bytes": 0, "boot_id": "b", "extra": 1});
        assert!(serde_json::from_value::<Heartbeat>(beat).is_err());
    }
}
