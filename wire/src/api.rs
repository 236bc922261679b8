//! The control plane's REST API as its readers see it — the console, the
//! command-line tools: the session cookies, and the answers they read, each
//! one type the control plane writes and they parse.

use serde::{Deserialize, Serialize};

use crate::apikey::KeyGrant;
use crate::internal::NodeId;
use crate::schema::{DatabaseName, TenantId};

/// The cookie that carries a session token (HttpOnly, SameSite=Strict).
pub const SESSION_COOKIE: &str = "shoal_session";
/// The cookie that carries the session's CSRF token, for double submit.
pub const CSRF_COOKIE: &str = "shoal_csrf";

/// The value of cookie `name` among `Cookie` header values, the first if it
/// is given more than once.
pub fn cookie<'a>(headers: impl IntoIterator<Item = &'a str>, name: &str) -> Option<String> {
    headers
        .into_iter()
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .map(|c| c.value().to_owned())
}

/// A user's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Owns a tenant: everything in it.
    Owner,
    /// Works in a tenant: everything but its membership.
    Member,
    /// Reads a tenant's databases, tables, rows, keys and usage; changes
    /// nothing.
    Reader,
    /// Runs the platform: every tenant, quotas, data nodes.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Member => "member",
            Role::Reader => "reader",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "owner" => Some(Role::Owner),
            "member" => Some(Role::Member),
            "reader" => Some(Role::Reader),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// A user as the API answers one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: String,
    pub email: String,
    pub role: Role,
    /// None for a platform admin.
    pub tenant: Option<TenantRef>,
}

impl User {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}

/// A tenant a user belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRef {
    pub id: String,
    pub name: String,
}

/// `GET /me`: who the caller is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Me {
    pub user: User,
}

/// An API key as `GET /api-keys` lists it (never its secret or hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    /// Its public prefix.
    pub id: String,
    pub name: String,
    pub tenant_id: TenantId,
    pub grants: Vec<KeyGrant>,
    /// Milliseconds since the Unix epoch, as `last_used_at` and `revoked_at`.
    pub created_at: i64,
    /// Seconds since the Unix epoch.
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// `GET /api-keys`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyList {
    pub keys: Vec<ApiKey>,
}

/// A key just made: its listing and, this once, the key itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewApiKey {
    #[serde(flatten)]
    pub listed: ApiKey,
    /// `<prefix>.<secret>`.
    pub key: String,
}

/// A database, with where applications reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Database {
    pub id: String,
    pub name: DatabaseName,
    pub tenant_id: TenantId,
    /// Its primary node.
    pub node_id: NodeId,
    /// Its node group.
    #[serde(default)]
    pub node_group: Option<u32>,
    /// The REST data API of its primary node; none while the node is unknown.
    pub rest_url: Option<String>,
    /// The Redis protocol of its primary node.
    pub resp_addr: Option<String>,
    /// SQL over the MySQL protocol on its primary node.
    #[serde(default)]
    pub mysql_addr: Option<String>,
    /// Every node of its group, each serving the database (primary first).
    #[serde(default)]
    pub nodes: Vec<Endpoint>,
    pub created_at: i64,
    /// Its tables' names.
    pub tables: Vec<String>,
}

/// A data node serving a database, and where applications reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub node_id: NodeId,
    pub rest_url: String,
    pub resp_addr: String,
}

/// `GET /databases`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseList {
    pub databases: Vec<Database>,
}

/// A data node as the registry has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataNode {
    pub node_id: NodeId,
    /// Its node group, once enough nodes have registered to form it.
    #[serde(default)]
    pub node_group: Option<u32>,
    pub internal_url: String,
    pub rest_url: String,
    pub resp_addr: String,
    /// Its node-to-node transport.
    #[serde(default)]
    pub peer_addr: String,
    /// SQL over the MySQL protocol ('' until the node reports it).
    #[serde(default)]
    pub mysql_addr: String,
    pub data_memory_bytes: i64,
    pub used_bytes: i64,
    /// When it last reported, in milliseconds since the Unix epoch.
    pub last_seen: i64,
    /// `up`, or `down` once it has not reported for a while.
    pub status: String,
}

/// `GET /admin/datanodes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataNodeList {
    pub datanodes: Vec<DataNode>,
}

/// One point of a usage series (`GET /usage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsagePoint {
    /// The start of its interval, in milliseconds since the Unix epoch.
    pub at: i64,
    pub memory_bytes: u64,
    pub memory_max_bytes: u64,
    pub memory_gib_hours: f64,
    pub read_units: u64,
    pub write_units: u64,
    pub throttled_reads: u64,
    pub throttled_writes: u64,
    pub quota_rejections: u64,
}

/// `GET /usage`: a series of a tenant, one of its databases, one table —
/// or one data node (`node_id`, no tenant).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageSeries {
    /// `raw`, `minute` or `hour`.
    pub resolution: String,
    pub from: i64,
    pub to: i64,
    pub tenant_id: Option<TenantId>,
    #[serde(default)]
    pub node_id: Option<u32>,
    pub database: Option<DatabaseName>,
    pub table: Option<String>,
    pub points: Vec<UsagePoint>,
}

/// A user of a tenant (`GET /members`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub id: String,
    pub email: String,
    pub role: Role,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
}

/// `GET /members`: the oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberList {
    pub members: Vec<Member>,
}

/// Who made a change on the platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub id: String,
    pub email: String,
}

/// One entry of the audit log (`GET /admin/audit`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: String,
    /// Milliseconds since the Unix epoch.
    pub at: i64,
    pub actor: Actor,
    pub tenant_id: Option<String>,
    /// What was done, e.g. `tenant.quota.set`.
    pub action: String,
    /// What to, e.g. `database shop`.
    pub target: String,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
}

/// `GET /admin/audit`: the newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditLog {
    pub entries: Vec<AuditEntry>,
}

/// What a tenant holds, counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantUsage {
    pub in_memory_bytes: u64,
    pub databases: i64,
    pub tables: i64,
    pub api_keys: i64,
}

/// A tenant as `GET /admin/tenants` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantSummary {
    pub id: TenantId,
    pub name: String,
    /// `active` or `suspended`.
    pub status: String,
    pub created_at: i64,
    pub quota: shoal_quota::Quota,
    pub usage: TenantUsage,
}

/// `GET /admin/tenants`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantList {
    pub tenants: Vec<TenantSummary>,
}

/// `GET /databases/{db}/memory`: its rows of `ndbinfo.table_memory_usage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableMemory {
    pub database: DatabaseName,
    /// `columns` and `rows`, as ndbinfo answers them.
    #[serde(flatten)]
    pub usage: crate::ndbinfo::Rows,
}

impl TableMemory {
    /// A table's memory and the free space inside it, in bytes.
    pub fn of(&self, table: &str) -> (u64, u64) {
        (self.usage.records())
            .find(|r| r.text("table_name") == Some(table))
            .map_or((0, 0), |r| {
                let n = |c: &str| r.uint(c).unwrap_or(0);
                (n("in_memory_bytes"), n("free_in_memory_bytes"))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_by_name_in_every_header() {
        let headers = ["a=1; shoal_csrf=x", "shoal_session=tok; b=2"];
        assert_eq!(cookie(headers, SESSION_COOKIE).as_deref(), Some("tok"));
        assert_eq!(cookie(headers, CSRF_COOKIE).as_deref(), Some("x"));
        assert_eq!(cookie(headers, "nope"), None);
        assert_eq!(
            cookie(["shoal_session="], SESSION_COOKIE).as_deref(),
            Some("")
        );
    }

    #[test]
    fn a_user_reads_as_the_api_writes_it() {
        let user: User = serde_json::from_value(serde_json::json!({"id": "u1",
            "email": "a@b.c", "role": "admin", "tenant": null}))
        .unwrap();
        assert!(user.is_admin() && user.tenant.is_none());
        for role in [Role::Owner, Role::Member, Role::Reader, Role::Admin] {
            assert_eq!(Role::parse(role.as_str()), Some(role));
            assert_eq!(serde_json::json!(role), role.as_str());
        }
    }
}
