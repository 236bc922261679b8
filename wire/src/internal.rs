//! The internal API between the control plane and a data node (port
//! 4407): its routes and the bodies both sides send, one type for each.
//! Every route but the health check needs `Authorization: Bearer <cluster
//! secret>`; an error answers [`ErrorBody`] with the matching status.

use serde::{Deserialize, Serialize};
use shoal_quota::Quota;

use crate::apikey::KeyGrant;
use crate::schema::{TableDef, TenantId};

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
    /// `GET`, `PUT` a [`super::Group`]: the node group the node is in.
    pub const GROUP: &str = "/internal/v1/group";

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

    /// `POST`: rows, for operators.
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
    fn a_heartbeat_with_a_field_it_does_not_know_is_refused() {
        let beat = serde_json::json!({"node_id": 1, "internal_url": "http://a:1",
            "rest_url": "http://a:2", "resp_addr": "a:3", "data_memory_bytes": 1,
            "used_bytes": 0, "boot_id": "b", "extra": 1});
        assert!(serde_json::from_value::<Heartbeat>(beat).is_err());
    }
}
