//! Tenant API keys: made here, the secret shown once, only a salted hash
//! kept; pushed to the data nodes of the databases they grant, where they
//! are checked; revoked at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shoal_wire::api::{ApiKey, ApiKeyList, NewApiKey};
use shoal_wire::apikey::{self, KeyDef, KeyGrant, Role};
use shoal_wire::internal::PushedKey;
use shoal_wire::schema::{DatabaseName, TenantId};

use crate::audit::{self, Change};
use crate::auth::Caller;
use crate::databases;
use crate::error::ApiError;
use crate::nodes::{self, NodeError, NodeRow, ReconcileError};
use crate::server::{App, Body, Path};
use crate::store::now_ms;

/// Most grants one key may carry.
pub const MAX_GRANTS: usize = 100;
/// Longest key name.
pub const MAX_NAME: usize = 64;
/// Most keys, live or revoked, a tenant may have.
pub const MAX_KEYS_PER_TENANT: i64 = 1000;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    name: String,
    grants: Vec<NewGrant>,
    /// Seconds since the Unix epoch.
    #[serde(default)]
    expires_at: Option<u64>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewGrant {
    database: String,
    /// `read` or `read_write`.
    #[schema(value_type = String)]
    role: Role,
}

/// A key's id: its public prefix, the first part of the key, which it is
/// listed, revoked and pushed to the data nodes by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, sqlx::Type)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct ApiKeyId(String);

impl ApiKeyId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ApiKeyId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for ApiKeyId {
    type Error = apikey::KeyDefError;

    /// A stored prefix, checked as a key's is.
    fn try_from(prefix: String) -> Result<ApiKeyId, Self::Error> {
        if !apikey::is_prefix(&prefix) {
            return Err(apikey::KeyDefError::Prefix);
        }
        Ok(ApiKeyId(prefix))
    }
}

/// A key as the store has it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct KeyRow {
    pub prefix: ApiKeyId,
    pub tenant_id: TenantId,
    pub name: String,
    pub salt: String,
    pub hash: String,
    pub sql_hash: Option<String>,
    pub grants: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

const KEY_COLUMNS: &str = "prefix, tenant_id, name, salt, hash, sql_hash, grants, created_at, \
                           expires_at, last_used_at, revoked_at";

impl KeyRow {
    fn grants(&self) -> Vec<KeyGrant> {
        serde_json::from_str(&self.grants).unwrap_or_else(|e| {
            tracing::error!(key = %self.prefix, error = %e, "stored grants do not parse");
            Vec::new()
        })
    }

    /// The key as the API lists it.
    fn listed(&self) -> ApiKey {
        ApiKey {
            id: self.prefix.to_string(),
            name: self.name.clone(),
            tenant_id: self.tenant_id.clone(),
            grants: self.grants(),
            created_at: self.created_at,
            expires_at: self.expires_at,
            last_used_at: self.last_used_at,
            revoked_at: self.revoked_at,
        }
    }

    fn json(&self) -> Value {
        serde_json::to_value(self.listed()).expect("a key serializes")
    }

    /// The definition a data node checks the key by.
    fn def(&self) -> Option<KeyDef> {
        Some(KeyDef {
            prefix: self.prefix.to_string(),
            tenant: self.tenant_id.clone(),
            salt: self.salt.clone(),
            hash: self.hash.clone(),
            grants: self.grants(),
            expires_at: self.expires_at.and_then(|e| u64::try_from(e).ok()),
            sql_hash: self.sql_hash.clone(),
        })
    }
}

/// How the audit log names an API key that changed a schema over SQL:
/// this, then its prefix.
pub const SQL_ACTOR: &str = "api_key:";

/// Who changes the schema of `database` for an SQL client logged in with
/// the key `prefix` (the data node checked its secret): the key, acting as
/// a member of its tenant — if it is live, its tenant is not suspended,
/// and it may write `database`. Audited as `api_key:<prefix>`.
pub async fn sql_caller(
    app: &App,
    prefix: &str,
    database: &DatabaseName,
) -> Result<Caller, ApiError> {
    let row: Option<KeyRow> = sqlx::query_as(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys WHERE prefix = $1"
    ))
    .bind(prefix)
    .fetch_optional(&app.store.pool)
    .await?;
    let now_secs = now_ms() / 1000;
    let row = row
        .filter(|k| k.revoked_at.is_none() && k.expires_at.is_none_or(|at| at > now_secs))
        .ok_or_else(|| ApiError::forbidden("the API key is not valid, or was revoked"))?;
    let writes =
        (row.grants().iter()).any(|g| &g.database == database && g.role == Role::ReadWrite);
    if !writes {
        return Err(ApiError::forbidden(format!(
            "the API key may not change database '{database}'"
        )));
    }
    let tenant: Option<(String, String)> =
        sqlx::query_as("SELECT name, status FROM tenants WHERE id = $1")
            .bind(&row.tenant_id)
            .fetch_optional(&app.store.pool)
            .await?;
    let Some((name, _)) = tenant.filter(|(_, status)| status != "suspended") else {
        return Err(ApiError::forbidden("the tenant is suspended"));
    };
    Ok(Caller {
        user_id: format!("{SQL_ACTOR}{prefix}"),
        email: format!("API key {prefix} (SQL)"),
        role: shoal_wire::api::Role::Member,
        tenant_id: Some(row.tenant_id),
        tenant_name: Some(name),
    })
}

/// `GET /api-keys`: the caller's tenant's keys (a platform admin's: all),
/// never a secret or its hash.
#[utoipa::path(get, path = "/api-keys", tag = "api-keys",
    responses((status = 200, description = "{keys: [{id, name, tenant_id, grants, created_at, expires_at, last_used_at, revoked_at}]}", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object)))]
pub async fn list(State(app): State<Arc<App>>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let rows: Vec<KeyRow> = sqlx::query_as(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys WHERE tenant_id = $1 OR $2 = 1 ORDER BY created_at, prefix"
    ))
    .bind(caller.tenant_id.as_ref().map_or("", TenantId::as_str))
    .bind(i64::from(caller.is_admin()))
    .fetch_all(&app.store.pool)
    .await?;
    let keys = rows.iter().map(KeyRow::listed).collect();
    Ok(Json(
        serde_json::to_value(ApiKeyList { keys }).expect("keys serialize"),
    ))
}

/// `POST /api-keys {name, grants, expires_at?}`: the secret is in the
/// answer, as `key`, and nowhere else ever after.
#[utoipa::path(post, path = "/api-keys", tag = "api-keys", request_body = NewKey,
    responses((status = 201, description = "The key, and `key`: <prefix>.<secret>, shown this once", body = Object), (status = 400, description = "Malformed or invalid input; the message names the field", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object),
        (status = 404, description = "A granted database that is not the caller's", body = Object),
        (status = 409, description = "QUOTA_EXCEEDED or LIMIT_REACHED", body = Object)))]
pub async fn create(
    State(app): State<Arc<App>>,
    caller: Caller,
    Body(req): Body<NewKey>,
) -> Result<impl IntoResponse, ApiError> {
    let tenant = caller.tenant()?.to_owned();
    let name = req.name.trim();
    if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(ApiError::invalid(format!(
            "name: 1 to {MAX_NAME} characters, no control characters"
        )));
    }
    if req.grants.is_empty() || req.grants.len() > MAX_GRANTS {
        return Err(ApiError::invalid(format!(
            "grants: 1 to {MAX_GRANTS} databases"
        )));
    }
    let now_secs = (now_ms() / 1000) as u64;
    if req
        .expires_at
        .is_some_and(|at| at <= now_secs || at > i64::MAX as u64)
    {
        return Err(ApiError::invalid(
            "expires_at: seconds since the Unix epoch, in the future",
        ));
    }
    let mut grants = Vec::with_capacity(req.grants.len());
    let mut nodes_of_grants = BTreeMap::new();
    for grant in &req.grants {
        let database = DatabaseName::parse(&grant.database)
            .map_err(|e| ApiError::invalid(format!("grants: {e}")))?;
        if grants.iter().any(|g: &KeyGrant| g.database == database) {
            return Err(ApiError::invalid(format!(
                "grants: database '{database}' is granted twice"
            )));
        }
        // Only the caller's own databases: another tenant's is not there.
        let db = databases::find(&app, &caller, database.as_str())
            .await
            .map_err(|_| ApiError::not_found(&format!("database '{}'", database.as_str())))?;
        for node in databases::nodes_of(&app, &db).await? {
            nodes_of_grants.insert(node.node_id, ());
        }
        grants.push(KeyGrant {
            database,
            role: grant.role,
        });
    }
    let live = crate::quotas::counts(&app, &tenant).await?.api_keys;
    let quota = crate::quotas::of_tenant(&app, &tenant).await?;
    crate::quotas::check_count("live API keys", quota.max_api_keys, live, "the tenant")?;
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM api_keys WHERE tenant_id = $1")
        .bind(&tenant)
        .fetch_one(&app.store.pool)
        .await?;
    if count >= MAX_KEYS_PER_TENANT {
        return Err(ApiError::conflict(
            "LIMIT_REACHED",
            format!("a tenant has at most {MAX_KEYS_PER_TENANT} keys: revoke and delete old ones"),
        ));
    }
    let tenant_id = tenant.clone();
    let (key, def) = apikey::generate(tenant_id, grants, req.expires_at).map_err(|e| {
        tracing::error!(error = %e, "no randomness for a key");
        ApiError::internal()
    })?;
    let row = KeyRow {
        prefix: ApiKeyId(def.prefix.clone()),
        tenant_id: tenant,
        name: name.to_owned(),
        salt: def.salt.clone(),
        hash: def.hash.clone(),
        sql_hash: def.sql_hash.clone(),
        grants: serde_json::to_string(&def.grants).expect("grants serialize"),
        created_at: now_ms(),
        expires_at: def.expires_at.map(|e| e as i64),
        last_used_at: None,
        revoked_at: None,
    };
    sqlx::query(&format!(
        "INSERT INTO api_keys ({KEY_COLUMNS}, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
    ))
    .bind(&row.prefix)
    .bind(&row.tenant_id)
    .bind(&row.name)
    .bind(&row.salt)
    .bind(&row.hash)
    .bind(&row.sql_hash)
    .bind(&row.grants)
    .bind(row.created_at)
    .bind(row.expires_at)
    .bind(row.last_used_at)
    .bind(row.revoked_at)
    .bind(&caller.user_id)
    .execute(&app.store.pool)
    .await?;
    // Pushed now to every node it may be used on; a node that cannot be
    // reached gets it from the reconcile when it is back.
    for node_id in nodes_of_grants.keys() {
        if let Some(node) = nodes::get(&app, *node_id).await?
            && let Err(e) = push(&app, &node, &def).await
        {
            tracing::warn!(key = %row.prefix, error = %e, "key push left for the reconcile");
        }
    }
    tracing::info!(key = %row.prefix, tenant = %row.tenant_id, "API key created");
    let change = Change {
        tenant_id: Some(&row.tenant_id),
        action: "api_key.create",
        target: format!("api key {}", row.prefix),
        before: None,
        after: Some(row.json()),
    };
    audit::record_after(&app, &caller, change).await;
    let made = NewApiKey {
        listed: row.listed(),
        key,
    };
    let answer = serde_json::to_value(made).expect("a key serializes");
    Ok((StatusCode::CREATED, Json(answer)))
}

async fn push(app: &App, node: &NodeRow, def: &KeyDef) -> Result<(), NodeError> {
    let key = PushedKey {
        tenant: def.tenant.clone(),
        salt: def.salt.clone(),
        hash: def.hash.clone(),
        grants: def.grants.clone(),
        expires_at: def.expires_at,
        sql_hash: def.sql_hash.clone(),
    };
    let prefix = ApiKeyId(def.prefix.clone());
    app.nodes.put_key(node, &prefix, &key).await.map(drop)
}

async fn unpush(app: &App, node: &NodeRow, prefix: &ApiKeyId) -> Result<(), NodeError> {
    match app.nodes.remove_key(node, prefix).await {
        Err(e) if e.code() != Some("NO_SUCH_KEY") => Err(e),
        _ => Ok(()),
    }
}

/// `DELETE /api-keys/{id}`: revokes the key on every data node at once; it
/// stays listed, with when it was revoked.
#[utoipa::path(delete, path = "/api-keys/{id}", tag = "api-keys",
    params(("id" = String, Path, description = "The key's public prefix")),
    responses((status = 204, description = "Revoked (again, if it was)"), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 404, description = "No such thing — or another tenant's", body = Object)))]
pub async fn revoke(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(prefix): Path<String>,
) -> Result<StatusCode, ApiError> {
    if !crate::validate::could_name(&prefix) {
        return Err(ApiError::not_found("API key"));
    }
    let row: Option<KeyRow> = sqlx::query_as(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys WHERE prefix = $1"
    ))
    .bind(&prefix)
    .fetch_optional(&app.store.pool)
    .await?;
    let row = row
        .filter(|k| caller.is_admin() || caller.tenant_id.as_ref() == Some(&k.tenant_id))
        .ok_or_else(|| ApiError::not_found("API key"))?;
    if row.revoked_at.is_none() {
        sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE prefix = $2")
            .bind(now_ms())
            .bind(&row.prefix)
            .execute(&app.store.pool)
            .await?;
        tracing::info!(key = %row.prefix, tenant = %row.tenant_id, "API key revoked");
        let change = Change {
            tenant_id: Some(&row.tenant_id),
            action: "api_key.revoke",
            target: format!("api key {}", row.prefix),
            before: Some(row.json()),
            after: None,
        };
        audit::record_after(&app, &caller, change).await;
    }
    let now = now_ms();
    for node in nodes::all(&app).await?.iter().filter(|n| n.up(now)) {
        if let Err(e) = unpush(&app, node, &row.prefix).await {
            tracing::warn!(key = %row.prefix, error = %e, "revocation left for the reconcile");
        }
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Takes every key of `tenant` off every data node that is up (a
/// suspension); the reconcile keeps them off.
pub async fn withdraw_tenant(app: &App, tenant: &TenantId) -> sqlx::Result<()> {
    let prefixes: Vec<ApiKeyId> =
        sqlx::query_scalar("SELECT prefix FROM api_keys WHERE tenant_id = $1")
            .bind(tenant)
            .fetch_all(&app.store.pool)
            .await?;
    let now = now_ms();
    for node in nodes::all(app).await?.iter().filter(|n| n.up(now)) {
        for prefix in &prefixes {
            if let Err(e) = unpush(app, node, prefix).await {
                tracing::warn!(key = %prefix, error = %e, "withdrawal left for the reconcile");
            }
        }
    }
    Ok(())
}

/// Brings `node`'s keys to the store's: every live key of an active tenant
/// that grants a database on the node is there; no other key is.
pub async fn reconcile(app: &App, node: &NodeRow) -> Result<(), ReconcileError> {
    let held = app.nodes.keys(node).await?.keys;
    let wanted: Vec<KeyRow> = sqlx::query_as(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys k WHERE revoked_at IS NULL \
         AND (expires_at IS NULL OR expires_at > $1) \
         AND EXISTS (SELECT 1 FROM tenants t WHERE t.id = k.tenant_id AND t.status = 'active')"
    ))
    .bind(now_ms() / 1000)
    .fetch_all(&app.store.pool)
    .await?;
    let here: Vec<String> =
        sqlx::query_scalar("SELECT name FROM databases WHERE node_group = $1 AND status = 'ready'")
            .bind(node.node_group)
            .fetch_all(&app.store.pool)
            .await?;
    let wanted: Vec<KeyDef> = wanted
        .iter()
        .filter_map(KeyRow::def)
        .filter(|def| {
            def.grants
                .iter()
                .any(|g| here.iter().any(|d| d == g.database.as_str()))
        })
        .collect();
    for def in &wanted {
        if !held.iter().any(|k| k.prefix == def.prefix) {
            tracing::info!(node = %node.node_id, key = %def.prefix, "reconcile: pushing key");
            push(app, node, def).await?;
        }
    }
    for key in &held {
        if !wanted.iter().any(|def| def.prefix == key.prefix) {
            tracing::info!(node = %node.node_id, key = %key.prefix, "reconcile: removing key");
            // A prefix that is not one was never pushed by this.
            if let Ok(prefix) = ApiKeyId::try_from(key.prefix.clone()) {
                unpush(app, node, &prefix).await?;
            }
        }
    }
    Ok(())
}
