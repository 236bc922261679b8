//! The audit log: who changed what, from what to what, and when — every
//! change an operator or a tenant makes through the API.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::Value;
use sqlx::{Any, Executor};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::server::{App, Query};
use crate::store::{new_id, now_ms};
use shoal_wire::api::{Actor, AuditEntry, AuditLog};
use shoal_wire::schema::TenantId;

/// One change, for `record`.
#[derive(Debug)]
pub struct Change<'a> {
    /// The tenant it concerns, if any.
    pub tenant_id: Option<&'a TenantId>,
    /// What was done, e.g. `tenant.quota.set`.
    pub action: &'static str,
    /// What to, e.g. `database shop`.
    pub target: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// Writes `change`, made by `actor`, through `executor` — the change's own
/// transaction where it has one, so that the two stand or fall together.
pub async fn record<'e>(
    executor: impl Executor<'e, Database = Any>,
    actor: &Caller,
    change: Change<'_>,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO audit_log (id, at, actor_id, actor_email, tenant_id, action, target, \
         before_state, after_state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(new_id("au"))
    .bind(now_ms())
    .bind(&actor.user_id)
    .bind(&actor.email)
    .bind(change.tenant_id.map(TenantId::as_str))
    .bind(change.action)
    .bind(&change.target)
    .bind(change.before.map(|v| v.to_string()))
    .bind(change.after.map(|v| v.to_string()))
    .execute(executor)
    .await
    .map(drop)
}

/// Records a change made outside a transaction: a failure to record is
/// logged, the change stands.
pub async fn record_after(app: &App, actor: &Caller, change: Change<'_>) {
    let action = change.action;
    if let Err(e) = record(&app.store.pool, actor, change).await {
        tracing::error!(action, error = %e, "could not write the audit log");
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Only this tenant's entries.
    tenant: Option<String>,
    /// 1 to 1000; 100 if not given.
    limit: Option<u32>,
    /// Entries strictly before this time (ms since the epoch): the next page.
    before: Option<i64>,
}

#[derive(Debug, sqlx::FromRow)]
struct Entry {
    id: String,
    at: i64,
    actor_id: String,
    actor_email: String,
    tenant_id: Option<String>,
    action: String,
    target: String,
    before_state: Option<String>,
    after_state: Option<String>,
}

/// `GET /admin/audit?tenant=&limit=&before=` (platform admins): newest first.
#[utoipa::path(get, path = "/admin/audit", tag = "admin", params(AuditQuery),
    responses((status = 200, description = "{entries: [{id, at, actor, tenant_id, action, target, before, after}]}", body = Object), (status = 400, description = "Malformed or invalid input; the message names the field", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 403, description = "Not a platform admin", body = Object)))]
pub async fn list(
    State(app): State<Arc<App>>,
    caller: Caller,
    Query(query): Query<AuditQuery>,
) -> Result<Json<Value>, ApiError> {
    caller.require_admin()?;
    if query
        .tenant
        .as_deref()
        .is_some_and(|t| !crate::validate::could_name(t))
    {
        return Err(ApiError::invalid("tenant: not a tenant id"));
    }
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit: {limit} is outside 1 to 1000"
        )));
    }
    let limit = i64::from(limit);
    let rows: Vec<Entry> = sqlx::query_as(
        "SELECT id, at, actor_id, actor_email, tenant_id, action, target, before_state, \
         after_state FROM audit_log WHERE ($1 = '' OR tenant_id = $1) AND at < $2 \
         ORDER BY at DESC, id DESC LIMIT $3",
    )
    .bind(query.tenant.as_deref().unwrap_or(""))
    .bind(query.before.unwrap_or(i64::MAX))
    .bind(limit)
    .fetch_all(&app.store.pool)
    .await?;
    let parse = |s: &Option<String>| {
        s.as_deref()
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
    };
    let entries = rows
        .iter()
        .map(|e| AuditEntry {
            id: e.id.clone(),
            at: e.at,
            actor: Actor {
                id: e.actor_id.clone(),
                email: e.actor_email.clone(),
            },
            tenant_id: e.tenant_id.clone(),
            action: e.action.clone(),
            target: e.target.clone(),
            before: parse(&e.before_state),
            after: parse(&e.after_state),
        })
        .collect();
    let log = AuditLog { entries };
    Ok(Json(
        serde_json::to_value(log).expect("the audit log serializes"),
    ))
}
