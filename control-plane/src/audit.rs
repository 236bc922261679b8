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

impl Entry {
    fn actor(&self) -> Actor {
        Actor {
            id: self.actor_id.clone(),
            email: self.actor_email.clone(),
        }
    }

    /// The entry as the API answers it, made by `actor`.
    fn shown(&self, actor: Actor) -> AuditEntry {
        let parse = |s: &Option<String>| s.as_deref().and_then(|s| serde_json::from_str(s).ok());
        AuditEntry {
            id: self.id.clone(),
            at: self.at,
            actor,
            tenant_id: self.tenant_id.clone(),
            action: self.action.clone(),
            target: self.target.clone(),
            before: parse(&self.before_state),
            after: parse(&self.after_state),
        }
    }
}

/// Entries a page holds: `limit`, 1 to 1000, or 100.
fn page_size(limit: Option<u32>) -> Result<i64, ApiError> {
    let limit = limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit: {limit} is outside 1 to 1000"
        )));
    }
    Ok(i64::from(limit))
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
    let limit = page_size(query.limit)?;
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
    let entries = rows.iter().map(|e| e.shown(e.actor())).collect();
    let log = AuditLog { entries };
    Ok(Json(
        serde_json::to_value(log).expect("the audit log serializes"),
    ))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ActivityQuery {
    /// 1 to 1000; 100 if not given.
    limit: Option<u32>,
    /// Entries strictly before this time (ms since the epoch): the next page.
    before: Option<i64>,
}

#[derive(Debug, sqlx::FromRow)]
struct TenantEntry {
    #[sqlx(flatten)]
    entry: Entry,
    /// The tenant of whoever made the change; none for a platform admin.
    actor_tenant: Option<String>,
}

/// Who made a change, as a tenant sees it: their own people by email, a
/// platform admin as the operator, never by name.
fn seen_by_tenant(e: &TenantEntry, tenant: &TenantId) -> Actor {
    // A change an SQL client made with one of the tenant's API keys (the
    // only changes keys make are to their own tenant's schema).
    let by_own_key = e.entry.actor_id.starts_with(crate::keys::SQL_ACTOR)
        && e.entry.tenant_id.as_deref() == Some(tenant.as_str());
    match &e.actor_tenant {
        _ if by_own_key => e.entry.actor(),
        Some(t) if t == tenant.as_str() => e.entry.actor(),
        _ => Actor {
            id: "operator".into(),
            email: "the platform's operators".into(),
        },
    }
}

/// `GET /audit?limit=&before=`: the caller's tenant's changes, newest
/// first — who created, dropped or changed what, and when.
#[utoipa::path(get, path = "/audit", tag = "audit", params(ActivityQuery),
    responses((status = 200, description = "{entries: [{id, at, actor, tenant_id, action, target, before, after}]}; a change a platform admin made shows actor {id: \"operator\", email: \"the platform's operators\"}", body = Object), (status = 400, description = "Malformed or invalid input; the message names the field", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 403, description = "A platform admin: the admin audit log is theirs", body = Object)))]
pub async fn tenant_list(
    State(app): State<Arc<App>>,
    caller: Caller,
    Query(query): Query<ActivityQuery>,
) -> Result<Json<Value>, ApiError> {
    let Some(tenant) = caller.tenant_id.clone() else {
        return Err(ApiError::forbidden(
            "platform admins read the whole log at /admin/audit",
        ));
    };
    let limit = page_size(query.limit)?;
    let rows: Vec<TenantEntry> = sqlx::query_as(
        "SELECT a.id, a.at, a.actor_id, a.actor_email, a.tenant_id, a.action, a.target, \
         a.before_state, a.after_state, u.tenant_id AS actor_tenant \
         FROM audit_log a LEFT JOIN users u ON u.id = a.actor_id \
         WHERE a.tenant_id = $1 AND a.at < $2 ORDER BY a.at DESC, a.id DESC LIMIT $3",
    )
    .bind(tenant.as_str())
    .bind(query.before.unwrap_or(i64::MAX))
    .bind(limit)
    .fetch_all(&app.store.pool)
    .await?;
    let entries = (rows.iter())
        .map(|e| e.entry.shown(seen_by_tenant(e, &tenant)))
        .collect();
    Ok(Json(
        serde_json::to_value(AuditLog { entries }).expect("the audit log serializes"),
    ))
}
