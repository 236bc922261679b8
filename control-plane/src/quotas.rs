//! Quotas: set by platform admins on a tenant (bounding the sum of its
//! databases) or on one database, audited, pushed to the data nodes at once
//! and again whenever a node restarts; read by tenants with their usage.
//! The counts (`max_databases`, `max_tables`, `max_api_keys`) are enforced
//! here; everything else by the data nodes' transaction coordinators.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use shoal_quota::Quota;
use shoal_wire::ndbinfo::{self, Cell};

use crate::audit::{self, Change};
use crate::auth::Caller;
use crate::databases::{self, DatabaseRow};
use crate::error::ApiError;
use crate::nodes::{self, NodeError, NodeId, NodeRow};
use crate::server::{App, Body, Path};
use crate::store::now_ms;
use shoal_wire::schema::TenantId;

/// The plan a new tenant starts with unless the control plane is told
/// otherwise (`--plan-quota`).
pub fn default_plan() -> Quota {
    Quota {
        in_memory_bytes: Some(1 << 30),
        on_disk_bytes: None,
        read_units_per_sec: Some(20_000),
        write_units_per_sec: Some(10_000),
        burst_seconds: Some(2),
        max_transaction_ops: Some(1000),
        max_parallel_transactions: Some(256),
        max_databases: Some(10),
        max_tables: Some(200),
        max_api_keys: Some(100),
    }
}

/// A stored quota: `None` is no limits.
pub fn parse(stored: Option<&str>) -> Quota {
    stored
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Quota::UNLIMITED)
}

fn to_json(quota: &Quota) -> Value {
    serde_json::to_value(quota).expect("a quota serializes")
}

/// What each database uses, as its data nodes' `database_quota_usage`
/// rows say, from every node that is up: database name → column → value.
/// A database on a node group has a row on each of its nodes: its memory
/// is counted once (the largest replica), its units and refusals as
/// admitted wherever they arrived (summed), its limits as set (the same on
/// every node).
pub async fn usage(app: &App) -> sqlx::Result<HashMap<String, serde_json::Map<String, Value>>> {
    let mut usage: HashMap<String, serde_json::Map<String, Value>> = HashMap::new();
    let now = now_ms();
    for node in nodes::all(app).await?.iter().filter(|n| n.up(now)) {
        let table = ndbinfo::DATABASE_QUOTA_USAGE;
        let Ok(rows) = app.nodes.ndbinfo(node, table.name).await else {
            continue;
        };
        for row in rows.records() {
            let Some(name) = row.text("database_name") else {
                continue;
            };
            let merged = usage.entry(name.to_owned()).or_default();
            for (column, cell) in row.cells().filter(|(c, _)| *c != "database_name") {
                let summed = matches!(
                    column,
                    "read_units"
                        | "write_units"
                        | "throttled_reads"
                        | "throttled_writes"
                        | "quota_rejections"
                );
                let value = match (merged.get(column).and_then(Value::as_u64), cell) {
                    (Some(before), Cell::UInt(n)) if summed => json!(before.saturating_add(*n)),
                    (Some(before), Cell::UInt(n)) => json!(before.max(*n)),
                    (Some(_), Cell::Null) => continue,
                    _ => json!(cell),
                };
                merged.insert(column.to_owned(), value);
            }
        }
    }
    Ok(usage)
}

/// `GET /quotas`: the caller's tenant's quota and each of its databases',
/// each with what it uses now.
#[utoipa::path(get, path = "/quotas", tag = "quotas",
    responses((status = 200, description = "{tenant: {id, name, quota, usage, warnings}, databases: [{name, quota, usage, warnings}]}", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object)))]
pub async fn get(State(app): State<Arc<App>>, caller: Caller) -> Result<Json<Value>, ApiError> {
    Ok(Json(tenant_quotas(&app, caller.tenant()?).await?))
}

/// A tenant's quotas and usage, as `GET /quotas` answers.
pub async fn tenant_quotas(app: &App, tenant: &TenantId) -> Result<Value, ApiError> {
    let (name, quota): (String, Option<String>) =
        sqlx::query_as("SELECT name, quota FROM tenants WHERE id = $1")
            .bind(tenant)
            .fetch_optional(&app.store.pool)
            .await?
            .ok_or_else(|| ApiError::not_found("tenant"))?;
    let quota = parse(quota.as_deref());
    let dbs: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT name, quota FROM databases WHERE tenant_id = $1 AND status = 'ready' ORDER BY name",
    )
    .bind(tenant)
    .fetch_all(&app.store.pool)
    .await?;
    let counts = counts(app, tenant).await?;
    let usage = usage(app).await?;
    let throttled = crate::usage::throttled_lately(app, tenant).await?;
    let mut memory = 0u64;
    let databases: Vec<Value> = dbs
        .iter()
        .map(|(name, q)| {
            let used = usage.get(name);
            memory += used
                .and_then(|u| u.get("in_memory_bytes"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let q = parse(q.as_deref());
            let mut flags = warnings(
                &q,
                used.and_then(|u| u.get("in_memory_bytes"))
                    .and_then(Value::as_u64),
            );
            if throttled.contains(name) {
                flags.push("throttled");
            }
            json!({
                "name": name,
                "quota": to_json(&q),
                "usage": used,
                "warnings": flags,
            })
        })
        .collect();
    let mut tenant_flags = warnings(&quota, Some(memory));
    if !throttled.is_empty() {
        tenant_flags.push("throttled");
    }
    tenant_flags.extend(count_warnings(&quota, &counts));
    Ok(json!({
        "tenant": {
            "id": tenant,
            "name": name,
            "quota": to_json(&quota),
            "usage": {
                "in_memory_bytes": memory,
                "databases": counts.databases,
                "tables": counts.tables,
                "api_keys": counts.api_keys,
            },
            "warnings": tenant_flags,
        },
        "databases": databases,
    }))
}

/// `memory_80` / `memory_100` when memory use reaches 80% / 100% of the quota.
fn warnings(quota: &Quota, used: Option<u64>) -> Vec<&'static str> {
    let used =
        used.and_then(|used| reached(used, quota.in_memory_bytes?, ["memory_80", "memory_100"]));
    used.into_iter().collect()
}

/// `databases_80` / `databases_100` (and `tables_…`, `api_keys_…`) when a
/// tenant's count reaches 80% / 100% of its quota: at 100% the next one is
/// refused.
fn count_warnings(quota: &Quota, counts: &Counts) -> Vec<&'static str> {
    let levels = [
        (
            quota.max_databases,
            counts.databases,
            ["databases_80", "databases_100"],
        ),
        (quota.max_tables, counts.tables, ["tables_80", "tables_100"]),
        (
            quota.max_api_keys,
            counts.api_keys,
            ["api_keys_80", "api_keys_100"],
        ),
    ];
    (levels.into_iter())
        .filter_map(|(limit, used, flags)| {
            reached(u64::try_from(used).unwrap_or(0), u64::from(limit?), flags)
        })
        .collect()
}

/// Which of `[near, at]` a use of `limit` has reached: 80% of it, or all.
fn reached(used: u64, limit: u64, [near, at]: [&'static str; 2]) -> Option<&'static str> {
    if used >= limit {
        Some(at)
    } else if used.saturating_mul(10) >= limit.saturating_mul(8) {
        Some(near)
    } else {
        None
    }
}

/// How many databases, tables and live API keys a tenant has.
#[derive(Debug, Clone, Copy)]
pub struct Counts {
    pub databases: i64,
    pub tables: i64,
    pub api_keys: i64,
}

pub async fn counts(app: &App, tenant: &TenantId) -> sqlx::Result<Counts> {
    let (databases, tables, api_keys): (i64, i64, i64) = sqlx::query_as(
        "SELECT \
           (SELECT COUNT(*) FROM databases WHERE tenant_id = $1), \
           (SELECT COUNT(*) FROM tables t JOIN databases d ON d.id = t.database_id WHERE d.tenant_id = $1), \
           (SELECT COUNT(*) FROM api_keys WHERE tenant_id = $1 AND revoked_at IS NULL)",
    )
    .bind(tenant)
    .fetch_one(&app.store.pool)
    .await?;
    Ok(Counts {
        databases,
        tables,
        api_keys,
    })
}

/// Refuses making one more of `what` once `limit` of them exist.
pub fn check_count(what: &str, limit: Option<u32>, have: i64, whose: &str) -> Result<(), ApiError> {
    match limit {
        Some(limit) if have >= i64::from(limit) => Err(ApiError::conflict(
            "QUOTA_EXCEEDED",
            format!(
                "{whose} has {have} {what}, its quota's limit is {limit}: drop some or ask for a higher quota"
            ),
        )),
        _ => Ok(()),
    }
}

/// The quota stored for tenant `id`.
pub async fn of_tenant(app: &App, tenant: &TenantId) -> sqlx::Result<Quota> {
    let stored: Option<Option<String>> =
        sqlx::query_scalar("SELECT quota FROM tenants WHERE id = $1")
            .bind(tenant)
            .fetch_optional(&app.store.pool)
            .await?;
    Ok(parse(stored.flatten().as_deref()))
}

fn check(quota: &Quota) -> Result<(), ApiError> {
    quota
        .validate()
        .map_err(|e| ApiError::invalid(e.to_string()))
}

/// `GET /admin/tenants/{id}/quotas` (platform admins): a tenant's quotas
/// and usage, and each of its databases', as the tenant's `GET /quotas`.
#[utoipa::path(get, path = "/admin/tenants/{id}/quotas", tag = "admin", params(("id" = String, Path, description = "The tenant's id")),
    responses((status = 200, description = "{tenant: {id, name, quota, usage, warnings}, databases: [{name, quota, usage, warnings}]}", body = Object), (status = 400, description = "Not a tenant id", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 403, description = "Not a platform admin", body = Object), (status = 404, description = "No such tenant", body = Object)))]
pub async fn get_tenant(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> Result<Json<Value>, ApiError> {
    caller.require_admin()?;
    let tenant = crate::validate::tenant(&tenant)?;
    Ok(Json(tenant_quotas(&app, &tenant).await?))
}

/// `PUT /admin/tenants/{id}/quota` (platform admins).
#[utoipa::path(put, path = "/admin/tenants/{id}/quota", tag = "admin", params(("id" = String, Path, description = "The tenant's id")),
    request_body(content = Object, description = "A quota object; null or missing fields are unlimited"),
    responses((status = 200, description = "{tenant_id, quota}", body = Object), (status = 400, description = "Malformed or invalid input; the message names the field", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 403, description = "Not a platform admin", body = Object), (status = 404, description = "No such thing — or another tenant's", body = Object)))]
pub async fn set_tenant(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(tenant): Path<String>,
    Body(quota): Body<Quota>,
) -> Result<Json<Value>, ApiError> {
    caller.require_admin()?;
    check(&quota)?;
    let tenant = crate::validate::tenant(&tenant)?;
    let mut tx = app.store.begin_write().await?;
    let before: Option<Option<String>> =
        sqlx::query_scalar("SELECT quota FROM tenants WHERE id = $1")
            .bind(&tenant)
            .fetch_optional(&mut *tx)
            .await?;
    let before = parse(
        before
            .ok_or_else(|| ApiError::not_found("tenant"))?
            .as_deref(),
    );
    sqlx::query("UPDATE tenants SET quota = $1 WHERE id = $2")
        .bind(to_json(&quota).to_string())
        .bind(&tenant)
        .execute(&mut *tx)
        .await?;
    let change = Change {
        tenant_id: Some(&tenant),
        action: "tenant.quota.set",
        target: format!("tenant {tenant}"),
        before: Some(to_json(&before)),
        after: Some(to_json(&quota)),
    };
    audit::record(&mut *tx, &caller, change).await?;
    tx.commit().await?;
    let nodes: Vec<i64> = sqlx::query_scalar(
        "SELECT DISTINCT n.node_id FROM datanodes n JOIN databases d ON d.node_group = n.node_group \
         WHERE d.tenant_id = $1 AND d.status = 'ready'",
    )
    .bind(&tenant)
    .fetch_all(&app.store.pool)
    .await?;
    for node_id in nodes.into_iter().filter_map(|n| NodeId::try_from(n).ok()) {
        if let Some(node) = nodes::get(&app, node_id).await? {
            let pushed = push_tenant(&app, &node, &tenant, &quota).await;
            resync_if_failed(&app, &node, pushed).await;
        }
    }
    Ok(Json(json!({"tenant_id": tenant, "quota": to_json(&quota)})))
}

/// `PUT /admin/tenants/{id}/databases/{db}/quota` (platform admins).
#[utoipa::path(put, path = "/admin/tenants/{id}/databases/{db}/quota", tag = "admin", params(("id" = String, Path, description = "The tenant's id"), ("db" = String, Path, description = "The database's name")),
    request_body(content = Object, description = "A quota object; null or missing fields are unlimited"),
    responses((status = 200, description = "{database, quota}", body = Object), (status = 400, description = "Malformed or invalid input; the message names the field", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 403, description = "Not a platform admin", body = Object), (status = 404, description = "No such thing — or another tenant's", body = Object)))]
pub async fn set_database(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path((tenant, name)): Path<(String, String)>,
    Body(quota): Body<Quota>,
) -> Result<Json<Value>, ApiError> {
    caller.require_admin()?;
    check(&quota)?;
    let db = databases::find(&app, &caller, &name).await?;
    if db.tenant_id.as_str() != tenant {
        return Err(ApiError::not_found("database"));
    }
    let mut tx = app.store.begin_write().await?;
    let before: Option<String> = sqlx::query_scalar("SELECT quota FROM databases WHERE id = $1")
        .bind(&db.id)
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query("UPDATE databases SET quota = $1 WHERE id = $2")
        .bind(to_json(&quota).to_string())
        .bind(&db.id)
        .execute(&mut *tx)
        .await?;
    let change = Change {
        tenant_id: Some(&db.tenant_id),
        action: "database.quota.set",
        target: format!("database {}", db.name),
        before: Some(to_json(&parse(before.as_deref()))),
        after: Some(to_json(&quota)),
    };
    audit::record(&mut *tx, &caller, change).await?;
    tx.commit().await?;
    for node in databases::nodes_of(&app, &db).await? {
        let pushed = push_database(&app, &node, &db, &quota).await;
        resync_if_failed(&app, &node, pushed).await;
    }
    Ok(Json(json!({"database": db.name, "quota": to_json(&quota)})))
}

/// A new database on `node`: the node gets its tenant's quota (a no-op if
/// it has it) — left for the reconcile if that fails.
pub async fn push_new_database(app: &App, node: &NodeRow, db: &DatabaseRow, tenant: &Quota) {
    let pushed = push_tenant(app, node, &db.tenant_id, tenant).await;
    resync_if_failed(app, node, pushed).await;
}

/// Sets a tenant's quota on the node — or clears it there, for no limits.
async fn push_tenant(
    app: &App,
    node: &NodeRow,
    tenant: &TenantId,
    quota: &Quota,
) -> Result<(), NodeError> {
    let pushed = match *quota == Quota::UNLIMITED {
        true => app.nodes.clear_tenant_quota(node, tenant).await,
        false => app
            .nodes
            .set_tenant_quota(node, tenant, quota)
            .await
            .map(drop),
    };
    known_or_gone(pushed)
}

/// Sets a database's quota on the node — or clears it there, for no limits.
async fn push_database(
    app: &App,
    node: &NodeRow,
    db: &DatabaseRow,
    quota: &Quota,
) -> Result<(), NodeError> {
    let pushed = match *quota == Quota::UNLIMITED {
        true => app.nodes.clear_database_quota(node, &db.name).await,
        false => (app.nodes.set_database_quota(node, &db.name, quota).await).map(drop),
    };
    known_or_gone(pushed)
}

/// A quota of a tenant or database the node no longer holds needs no push.
fn known_or_gone(pushed: Result<(), NodeError>) -> Result<(), NodeError> {
    match pushed {
        Err(e) if matches!(e.code(), Some("NO_SUCH_TENANT" | "NO_SUCH_DATABASE")) => Ok(()),
        other => other,
    }
}

/// A push that failed leaves the node to get every quota again from the
/// reconcile.
async fn resync_if_failed(app: &App, node: &NodeRow, pushed: Result<(), NodeError>) {
    if let Err(e) = pushed {
        tracing::warn!(node = %node.node_id, error = %e, "quota push left for the reconcile");
        let marked = sqlx::query("UPDATE datanodes SET quotas_synced_boot = '' WHERE node_id = $1")
            .bind(i64::from(node.node_id))
            .execute(&app.store.pool)
            .await;
        if let Err(e) = marked {
            tracing::error!(node = %node.node_id, error = %e, "could not mark a node for the reconcile");
        }
    }
}

/// Pushes every quota of the node's tenants and databases, once per boot of
/// the node (and again after a push to it failed).
pub async fn reconcile(app: &App, node: &NodeRow) -> Result<(), nodes::ReconcileError> {
    if node.quotas_synced_boot == node.boot_id {
        return Ok(());
    }
    let rows: Vec<DatabaseRow> = sqlx::query_as(&format!(
        "SELECT {} FROM databases WHERE node_group = $1 AND status = 'ready'",
        databases::DATABASE_COLUMNS
    ))
    .bind(node.node_group)
    .fetch_all(&app.store.pool)
    .await?;
    let mut tenants: Vec<&TenantId> = rows.iter().map(|d| &d.tenant_id).collect();
    tenants.sort_unstable();
    tenants.dedup();
    for tenant in tenants {
        let quota = of_tenant(app, tenant).await?;
        push_tenant(app, node, tenant, &quota).await?;
    }
    for db in &rows {
        let stored: Option<String> =
            sqlx::query_scalar("SELECT quota FROM databases WHERE id = $1")
                .bind(&db.id)
                .fetch_one(&app.store.pool)
                .await?;
        push_database(app, node, db, &parse(stored.as_deref())).await?;
    }
    sqlx::query("UPDATE datanodes SET quotas_synced_boot = $1 WHERE node_id = $2")
        .bind(&node.boot_id)
        .bind(i64::from(node.node_id))
        .execute(&app.store.pool)
        .await?;
    Ok(())
}
