//! What platform admins do: see every tenant with its usage, suspend and
//! resume tenants, make other admins. (Quotas: `quotas`; data nodes:
//! `nodes`; the audit log: `audit`.)

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::audit::{self, Change};
use crate::auth::{Caller, Role};
use crate::error::ApiError;
use crate::server::{App, Body, Path};
use crate::store::Store;
use crate::{quotas, validate};
use shoal_wire::api::{TenantList, TenantSummary, TenantUsage};
use shoal_wire::schema::TenantId;

#[derive(Debug, sqlx::FromRow)]
struct TenantRow {
    id: TenantId,
    name: String,
    status: String,
    created_at: i64,
    quota: Option<String>,
}

/// `GET /admin/tenants`: every tenant, its quota, and what it uses.
#[utoipa::path(get, path = "/admin/tenants", tag = "admin",
    responses((status = 200, description = "{tenants: [{id, name, status, created_at, quota, usage}]}", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 403, description = "Not a platform admin", body = Object)))]
pub async fn tenants(State(app): State<Arc<App>>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_admin()?;
    let rows: Vec<TenantRow> =
        sqlx::query_as("SELECT id, name, status, created_at, quota FROM tenants ORDER BY name")
            .fetch_all(&app.store.pool)
            .await?;
    let usage = quotas::usage(&app).await?;
    let placed: Vec<(String, String)> =
        sqlx::query_as("SELECT tenant_id, name FROM databases WHERE status = 'ready'")
            .fetch_all(&app.store.pool)
            .await?;
    let mut answer = Vec::with_capacity(rows.len());
    for t in &rows {
        let counts = quotas::counts(&app, &t.id).await?;
        let memory: u64 = placed
            .iter()
            .filter(|(tenant, _)| *tenant == t.id.as_str())
            .filter_map(|(_, db)| usage.get(db)?.get("in_memory_bytes")?.as_u64())
            .sum();
        answer.push(TenantSummary {
            id: t.id.clone(),
            name: t.name.clone(),
            status: t.status.clone(),
            created_at: t.created_at,
            quota: quotas::parse(t.quota.as_deref()),
            usage: TenantUsage {
                in_memory_bytes: memory,
                databases: counts.databases,
                tables: counts.tables,
                api_keys: counts.api_keys,
            },
        });
    }
    let list = TenantList { tenants: answer };
    Ok(Json(serde_json::to_value(list).expect("tenants serialize")))
}

/// `POST /admin/tenants/{id}/suspend`: its users can no longer log in or
/// use their sessions, and its API keys stop working on the data nodes.
#[utoipa::path(post, path = "/admin/tenants/{id}/suspend", tag = "admin", params(("id" = String, Path, description = "The tenant's id")),
    responses((status = 204, description = "Suspended"), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 403, description = "Not a platform admin", body = Object), (status = 404, description = "No such thing — or another tenant's", body = Object)))]
pub async fn suspend(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> Result<StatusCode, ApiError> {
    set_status(&app, &caller, &tenant, "suspended").await
}

/// `POST /admin/tenants/{id}/resume`.
#[utoipa::path(post, path = "/admin/tenants/{id}/resume", tag = "admin", params(("id" = String, Path, description = "The tenant's id")),
    responses((status = 204, description = "Active again; its keys are pushed back"), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 403, description = "Not a platform admin", body = Object), (status = 404, description = "No such thing — or another tenant's", body = Object)))]
pub async fn resume(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> Result<StatusCode, ApiError> {
    set_status(&app, &caller, &tenant, "active").await
}

async fn set_status(
    app: &App,
    caller: &Caller,
    tenant: &str,
    status: &str,
) -> Result<StatusCode, ApiError> {
    caller.require_admin()?;
    let tenant = &validate::tenant(tenant)?;
    let mut tx = app.store.begin_write().await?;
    let before: Option<String> = sqlx::query_scalar("SELECT status FROM tenants WHERE id = $1")
        .bind(tenant)
        .fetch_optional(&mut *tx)
        .await?;
    let before = before.ok_or_else(|| ApiError::not_found("tenant"))?;
    if before != status {
        sqlx::query("UPDATE tenants SET status = $1 WHERE id = $2")
            .bind(status)
            .bind(tenant)
            .execute(&mut *tx)
            .await?;
        let change = Change {
            tenant_id: Some(tenant),
            action: if status == "suspended" {
                "tenant.suspend"
            } else {
                "tenant.resume"
            },
            target: format!("tenant {tenant}"),
            before: Some(json!({"status": before})),
            after: Some(json!({"status": status})),
        };
        audit::record(&mut *tx, caller, change).await?;
    }
    tx.commit().await?;
    if status == "suspended" {
        crate::keys::withdraw_tenant(app, tenant).await?;
    } else {
        // The reconcile pushes the tenant's live keys back.
        app.reconcile_now.notify_one();
    }
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAdmin {
    email: String,
    password: String,
}

/// `POST /admin/admins {email, password}`: another platform admin.
#[utoipa::path(post, path = "/admin/admins", tag = "admin", request_body = NewAdmin,
    responses((status = 201, description = "{id, email, role}", body = Object), (status = 400, description = "Malformed or invalid input; the message names the field", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 403, description = "Not a platform admin", body = Object),
        (status = 409, description = "EMAIL_TAKEN", body = Object)))]
pub async fn create_admin(
    State(app): State<Arc<App>>,
    caller: Caller,
    Body(req): Body<NewAdmin>,
) -> Result<impl IntoResponse, ApiError> {
    caller.require_admin()?;
    let id = make_admin(&app.store, &req.email, &req.password).await?;
    let email = validate::email(&req.email)?;
    let change = Change {
        tenant_id: None,
        action: "admin.create",
        target: format!("user {id}"),
        before: None,
        after: Some(json!({"email": email, "role": "admin"})),
    };
    audit::record_after(&app, &caller, change).await;
    Ok((
        StatusCode::CREATED,
        Json(json!({"id": id, "email": email, "role": "admin"})),
    ))
}

/// Makes a platform admin; answers the new user's id.
pub async fn make_admin(store: &Store, email: &str, password: &str) -> Result<String, ApiError> {
    let (id, _) = crate::accounts::create_user(store, None, email, password, Role::Admin).await?;
    tracing::info!(user = %id, "platform admin created");
    Ok(id)
}

/// At start: makes sure `email` is a platform admin, creating it with
/// `password` if there is no such account. An existing account that is not
/// an admin is an error: a tenant's user is never promoted silently.
pub async fn bootstrap(store: &Store, email: &str, password: &str) -> Result<(), String> {
    let email = validate::email(email).map_err(|e| e.message)?;
    let role: Option<String> = sqlx::query_scalar("SELECT role FROM users WHERE email = $1")
        .bind(&email)
        .fetch_optional(&store.pool)
        .await
        .map_err(|e| e.to_string())?;
    match role.as_deref() {
        Some("admin") => Ok(()),
        Some(_) => Err(format!("{email} is a tenant's user, not a platform admin")),
        None => make_admin(store, &email, password)
            .await
            .map(drop)
            .map_err(|e| e.message),
    }
}
