//! A tenant's users: its owner adds members (who work with the tenant's
//! databases, tables and keys) and removes them; only owners manage
//! membership.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::accounts;
use crate::audit::{self, Change};
use crate::auth::{Caller, Role};
use crate::error::ApiError;
use crate::server::{App, Body, Path};
use crate::validate;
use shoal_wire::schema::TenantId;

/// Most users one tenant may have.
pub const MAX_USERS_PER_TENANT: i64 = 1000;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMember {
    email: String,
    /// The member's first password; they log in with it.
    password: String,
    /// `member` (the default: works with everything but membership) or
    /// `reader` (reads everything, changes nothing).
    #[serde(default)]
    role: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRole {
    /// `member` or `reader`.
    role: String,
}

/// The role an owner may give: `member` or `reader`, nothing else.
fn given_role(role: Option<&str>) -> Result<Role, ApiError> {
    match role.map(Role::parse) {
        None => Ok(Role::Member),
        Some(Some(role @ (Role::Member | Role::Reader))) => Ok(role),
        Some(_) => Err(ApiError::invalid(
            "role: a member's role is \"member\" or \"reader\"",
        )),
    }
}

#[derive(Debug, sqlx::FromRow)]
struct MemberRow {
    id: String,
    email: String,
    role: String,
    created_at: i64,
}

fn owner_only(caller: &Caller) -> Result<&TenantId, ApiError> {
    let tenant = caller.tenant()?;
    if caller.role != Role::Owner {
        return Err(ApiError::forbidden(
            "only the tenant's owner manages its members",
        ));
    }
    Ok(tenant)
}

/// `GET /members`: the users of the caller's tenant.
#[utoipa::path(get, path = "/members", tag = "accounts",
    responses((status = 200, description = "{members: [{id, email, role, created_at}]}", body = Object),
        (status = 401, description = "No session, or an invalid or expired one", body = Object)))]
pub async fn list(State(app): State<Arc<App>>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant()?;
    let rows: Vec<MemberRow> = sqlx::query_as(
        "SELECT id, email, role, created_at FROM users WHERE tenant_id = $1 ORDER BY created_at, id",
    )
    .bind(tenant)
    .fetch_all(&app.store.pool)
    .await?;
    let members: Vec<Value> = rows
        .iter()
        .map(|m| json!({"id": m.id, "email": m.email, "role": m.role, "created_at": m.created_at}))
        .collect();
    Ok(Json(json!({"members": members})))
}

/// `POST /members {email, password}` (the tenant's owner): a new member.
#[utoipa::path(post, path = "/members", tag = "accounts", request_body = NewMember,
    responses((status = 201, description = "{id, email, role}", body = Object),
        (status = 400, description = "Malformed or invalid input; the message names the field", body = Object),
        (status = 401, description = "No session, or an invalid or expired one", body = Object),
        (status = 403, description = "Not the tenant's owner", body = Object),
        (status = 409, description = "EMAIL_TAKEN or LIMIT_REACHED", body = Object)))]
pub async fn add(
    State(app): State<Arc<App>>,
    caller: Caller,
    Body(req): Body<NewMember>,
) -> Result<impl IntoResponse, ApiError> {
    let tenant = owner_only(&caller)?.to_owned();
    let role = given_role(req.role.as_deref())?;
    let users: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE tenant_id = $1")
        .bind(&tenant)
        .fetch_one(&app.store.pool)
        .await?;
    if users >= MAX_USERS_PER_TENANT {
        return Err(ApiError::conflict(
            "LIMIT_REACHED",
            format!("a tenant has at most {MAX_USERS_PER_TENANT} users"),
        ));
    }
    let (id, email) =
        accounts::create_user(&app.store, Some(&tenant), &req.email, &req.password, role).await?;
    let change = Change {
        tenant_id: Some(&tenant),
        action: "member.add",
        target: format!("user {id}"),
        before: None,
        after: Some(json!({"email": email, "role": role})),
    };
    audit::record_after(&app, &caller, change).await;
    Ok((
        StatusCode::CREATED,
        Json(json!({"id": id, "email": email, "role": role})),
    ))
}

/// The member `id` of the owner's tenant; never the owner.
async fn member_of(app: &App, tenant: &TenantId, id: &str) -> Result<MemberRow, ApiError> {
    if !validate::could_name(id) {
        return Err(ApiError::not_found("member"));
    }
    let row: Option<MemberRow> = sqlx::query_as(
        "SELECT id, email, role, created_at FROM users WHERE id = $1 AND tenant_id = $2",
    )
    .bind(id)
    .bind(tenant)
    .fetch_optional(&app.store.pool)
    .await?;
    let member = row.ok_or_else(|| ApiError::not_found("member"))?;
    if member.role == Role::Owner.as_str() {
        return Err(ApiError::forbidden(
            "the owner's role is not changed or removed",
        ));
    }
    Ok(member)
}

/// `PATCH /members/{id} {role}` (the tenant's owner): makes a member a
/// reader or back; it holds from their next request.
#[utoipa::path(patch, path = "/members/{id}", tag = "accounts", request_body = NewRole,
    params(("id" = String, Path, description = "The member's user id")),
    responses((status = 200, description = "{id, email, role}", body = Object),
        (status = 400, description = "A role other than member or reader", body = Object),
        (status = 401, description = "No session, or an invalid or expired one", body = Object),
        (status = 403, description = "Not the tenant's owner, or the owner themself", body = Object),
        (status = 404, description = "No such member of this tenant", body = Object)))]
pub async fn set_role(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
    Body(req): Body<NewRole>,
) -> Result<Json<Value>, ApiError> {
    let tenant = owner_only(&caller)?.to_owned();
    let role = given_role(Some(&req.role))?;
    let member = member_of(&app, &tenant, &id).await?;
    sqlx::query("UPDATE users SET role = $1 WHERE id = $2")
        .bind(role.as_str())
        .bind(&member.id)
        .execute(&app.store.pool)
        .await?;
    let change = Change {
        tenant_id: Some(&tenant),
        action: "member.role",
        target: format!("user {}", member.id),
        before: Some(json!({"role": member.role})),
        after: Some(json!({"role": role})),
    };
    audit::record_after(&app, &caller, change).await;
    Ok(Json(
        json!({"id": member.id, "email": member.email, "role": role}),
    ))
}

/// `DELETE /members/{id}` (the tenant's owner): removes a member; their
/// sessions end with them.
#[utoipa::path(delete, path = "/members/{id}", tag = "accounts",
    params(("id" = String, Path, description = "The member's user id")),
    responses((status = 204, description = "Removed"),
        (status = 401, description = "No session, or an invalid or expired one", body = Object),
        (status = 403, description = "Not the tenant's owner, or the owner themself", body = Object),
        (status = 404, description = "No such member of this tenant", body = Object)))]
pub async fn remove(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let tenant = owner_only(&caller)?.to_owned();
    let member = member_of(&app, &tenant, &id).await?;
    sqlx::query("DELETE FROM users WHERE id = $1")
        .bind(&member.id)
        .execute(&app.store.pool)
        .await?;
    let change = Change {
        tenant_id: Some(&tenant),
        action: "member.remove",
        target: format!("user {}", member.id),
        before: Some(json!({"email": member.email, "role": member.role})),
        after: None,
    };
    audit::record_after(&app, &caller, change).await;
    Ok(StatusCode::NO_CONTENT)
}
