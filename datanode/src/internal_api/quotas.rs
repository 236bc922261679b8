//! Quotas of databases and tenants: `/internal/v1/{databases,tenants}/{id}/quota`.
//! A quota set here is applied at once; `DELETE` removes every limit.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use shoal_quota::Quota;
use shoal_wire::internal::{DatabaseQuota, DatabaseUsage, TenantQuota, TenantUsage};
use shoal_wire::schema::TenantId;

use super::{ApiError, AppState};
use crate::tc::Database;

fn checked(body: Result<Json<Quota>, JsonRejection>) -> Result<Quota, ApiError> {
    let Json(quota) = body?;
    quota
        .validate()
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "INVALID_QUOTA", e.to_string()))?;
    Ok(quota)
}

/// A database's quota with what it has used.
fn database_view(db: &Database) -> DatabaseQuota {
    let c = &db.governance.counters;
    let get = crate::tc::counter;
    DatabaseQuota {
        database: db.name.to_string(),
        tenant: db.tenant.as_ref().map(|t| t.id.to_string()),
        quota: db.quota(),
        usage: DatabaseUsage {
            in_memory_bytes: db.memory_bytes(),
            read_units: get(&c.read_units),
            write_units: get(&c.write_units),
            throttled_reads: get(&c.throttled_reads),
            throttled_writes: get(&c.throttled_writes),
            quota_rejections: get(&c.quota_rejections),
        },
    }
}

pub(super) async fn database(
    State(state): State<AppState>,
    Path(db): Path<String>,
) -> Result<Json<DatabaseQuota>, ApiError> {
    let db = state.engine.database(&db)?;
    Ok(Json(database_view(&db)))
}

pub(super) async fn set_database(
    State(state): State<AppState>,
    Path(db): Path<String>,
    body: Result<Json<Quota>, JsonRejection>,
) -> Result<Json<DatabaseQuota>, ApiError> {
    let quota = checked(body)?;
    let db = state.engine.set_database_quota(&db, quota).await?;
    Ok(Json(database_view(&db)))
}

pub(super) async fn clear_database(
    State(state): State<AppState>,
    Path(db): Path<String>,
) -> Result<StatusCode, ApiError> {
    state
        .engine
        .set_database_quota(&db, Quota::UNLIMITED)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

fn tenant_view(state: &AppState, id: &str) -> Result<TenantQuota, ApiError> {
    let tenant = state.engine.tenant(id)?;
    let databases: Vec<String> = state
        .engine
        .databases()
        .iter()
        .filter(|db| db.tenant.as_ref().is_some_and(|t| t.id == tenant.id))
        .map(|db| db.name.to_string())
        .collect();
    Ok(TenantQuota {
        tenant: tenant.id.clone(),
        quota: tenant.quota(),
        usage: TenantUsage {
            in_memory_bytes: tenant.memory_bytes(),
            databases,
        },
    })
}

pub(super) async fn tenant(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
) -> Result<Json<TenantQuota>, ApiError> {
    Ok(Json(tenant_view(&state, &tenant)?))
}

pub(super) async fn set_tenant(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
    body: Result<Json<Quota>, JsonRejection>,
) -> Result<Json<TenantQuota>, ApiError> {
    let id = TenantId::parse(&tenant)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "INVALID_NAME", e.to_string()))?;
    let quota = checked(body)?;
    state.engine.set_tenant_quota(&id, quota).await?;
    Ok(Json(tenant_view(&state, &tenant)?))
}

pub(super) async fn clear_tenant(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
) -> Result<StatusCode, ApiError> {
    let tenant = state.engine.tenant(&tenant)?;
    state
        .engine
        .set_tenant_quota(&tenant.id, Quota::UNLIMITED)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
