//! Sign-up, login, logout and who am I.

use shoal_wire::api::{TenantRef, User};
use shoal_wire::schema::TenantId;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::audit::{self, Change};
use crate::auth::{self, Caller, Role, UserRow};
use crate::error::ApiError;
use crate::server::{App, Body};
use crate::store::{Store, new_id, new_tenant_id, now_ms};
use crate::validate;

/// Longest tenant name.
pub const MAX_TENANT_NAME: usize = 40;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Signup {
    email: String,
    password: String,
    tenant_name: String,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Login {
    email: String,
    password: String,
}

/// A user as the API shows one.
fn user_json(id: &str, email: &str, role: Role, tenant: Option<(&str, &str)>) -> Value {
    let user = User {
        id: id.to_owned(),
        email: email.to_owned(),
        role,
        tenant: tenant.map(|(id, name)| TenantRef {
            id: id.to_owned(),
            name: name.to_owned(),
        }),
    };
    serde_json::to_value(user).expect("a user serializes")
}

/// A new session for `user`: the token and CSRF token in the body and as
/// cookies.
fn session(app: &App, status: StatusCode, user_id: &str, user: Value) -> Response {
    let (token, claims) = app.tokens.issue(user_id);
    let body = json!({
        "token": token,
        "csrf_token": claims.csrf,
        "expires_at": claims.exp,
        "user": user,
    });
    with_cookies(
        (status, Json(body)).into_response(),
        auth::session_cookies(&token, &claims.csrf, app.config.secure_cookies),
    )
}

fn with_cookies(mut response: Response, cookies: [String; 2]) -> Response {
    for cookie in cookies {
        response.headers_mut().append(
            header::SET_COOKIE,
            HeaderValue::from_str(&cookie).expect("cookies are ASCII"),
        );
    }
    response
}

/// `POST /auth/signup`: a new tenant and its owner, logged in.
#[utoipa::path(post, path = "/auth/signup", tag = "accounts", request_body = Signup,
    responses((status = 201, description = "Signed up and logged in: {token, csrf_token, expires_at, user}, and the session cookies", body = Object),
        (status = 400, description = "Malformed or invalid input; the message names the field", body = Object), (status = 409, description = "EMAIL_TAKEN or TENANT_NAME_TAKEN", body = Object)))]
pub async fn signup(
    State(app): State<Arc<App>>,
    Body(req): Body<Signup>,
) -> Result<Response, ApiError> {
    let email = validate::email(&req.email)?;
    validate::password(&req.password)?;
    let tenant_name = validate::name("tenant_name", &req.tenant_name, MAX_TENANT_NAME)?;
    let taken: Option<String> = sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
        .bind(&email)
        .fetch_optional(&app.store.pool)
        .await?;
    if taken.is_some() {
        return Err(ApiError::conflict(
            "EMAIL_TAKEN",
            "an account with this email exists: log in instead",
        ));
    }
    let taken: Option<String> = sqlx::query_scalar("SELECT id FROM tenants WHERE name = $1")
        .bind(&tenant_name)
        .fetch_optional(&app.store.pool)
        .await?;
    if taken.is_some() {
        return Err(ApiError::conflict(
            "TENANT_NAME_TAKEN",
            format!("the tenant name '{tenant_name}' is taken"),
        ));
    }
    let password = req.password;
    let hash = auth::blocking(move || auth::hash_password(&password)).await;
    let (tenant_id, user_id, now) = (new_tenant_id(), new_id("u"), now_ms());
    let mut tx = app.store.begin_write().await?;
    let plan = serde_json::to_string(&app.config.plan_quota).expect("a quota serializes");
    sqlx::query(
        "INSERT INTO tenants (id, name, status, created_at, quota) VALUES ($1, $2, 'active', $3, $4)",
    )
    .bind(tenant_id.as_str())
    .bind(&tenant_name)
    .bind(now)
    .bind(&plan)
        .execute(&mut *tx)
        .await
        .map_err(|e| unique_or(e, "TENANT_NAME_TAKEN", "the tenant name is taken"))?;
    sqlx::query(
        "INSERT INTO users (id, tenant_id, email, password_hash, role, sessions_after, created_at) \
         VALUES ($1, $2, $3, $4, 'owner', 0, $5)",
    )
    .bind(&user_id)
    .bind(tenant_id.as_str())
    .bind(&email)
    .bind(&hash)
    .bind(now)
    .execute(&mut *tx)
    .await
    .map_err(|e| unique_or(e, "EMAIL_TAKEN", "an account with this email exists"))?;
    let owner = Caller {
        user_id: user_id.clone(),
        email: email.clone(),
        role: Role::Owner,
        tenant_id: Some(tenant_id.clone()),
        tenant_name: Some(tenant_name.clone()),
    };
    let change = Change {
        tenant_id: Some(&tenant_id),
        action: "tenant.create",
        target: format!("tenant {tenant_id}"),
        before: None,
        after: Some(json!({"name": tenant_name, "owner": email, "quota": app.config.plan_quota})),
    };
    audit::record(&mut *tx, &owner, change).await?;
    tx.commit().await?;
    tracing::info!(tenant = %tenant_id, user = %user_id, "signed up");
    let user = user_json(
        &user_id,
        &email,
        Role::Owner,
        Some((tenant_id.as_str(), &tenant_name)),
    );
    Ok(session(&app, StatusCode::CREATED, &user_id, user))
}

/// A new user of `tenant` (none: a platform admin) with `role`, after
/// checking the email and password; answers the id and the normalized
/// email.
pub async fn create_user(
    store: &Store,
    tenant: Option<&TenantId>,
    email: &str,
    password: &str,
    role: Role,
) -> Result<(String, String), ApiError> {
    let email = validate::email(email)?;
    validate::password(password)?;
    let taken: Option<String> = sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
        .bind(&email)
        .fetch_optional(&store.pool)
        .await?;
    if taken.is_some() {
        return Err(ApiError::conflict(
            "EMAIL_TAKEN",
            "an account with this email exists",
        ));
    }
    let password = password.to_owned();
    let hash = auth::blocking(move || auth::hash_password(&password)).await;
    let id = new_id("u");
    sqlx::query(
        "INSERT INTO users (id, tenant_id, email, password_hash, role, sessions_after, created_at) \
         VALUES ($1, $2, $3, $4, $5, 0, $6)",
    )
    .bind(&id)
    .bind(tenant)
    .bind(&email)
    .bind(&hash)
    .bind(role.as_str())
    .bind(now_ms())
    .execute(&store.pool)
    .await
    .map_err(|e| unique_or(e, "EMAIL_TAKEN", "an account with this email exists"))?;
    Ok((id, email))
}

/// Gives the user with `email` a new password, and ends their sessions;
/// answers whether there is such a user. For operators' tools (the demo
/// setting its logins anew), not an API route.
pub async fn set_password(store: &Store, email: &str, password: &str) -> Result<bool, ApiError> {
    let email = validate::email(email)?;
    validate::password(password)?;
    let password = password.to_owned();
    let hash = auth::blocking(move || auth::hash_password(&password)).await;
    let changed =
        sqlx::query("UPDATE users SET password_hash = $1, sessions_after = $2 WHERE email = $3")
            .bind(&hash)
            .bind(now_ms())
            .bind(&email)
            .execute(&store.pool)
            .await?;
    Ok(changed.rows_affected() > 0)
}

/// A unique-key violation (a race the checks before it lost) as a
/// conflict; anything else as the store error it is.
fn unique_or(e: sqlx::Error, code: &'static str, message: &str) -> ApiError {
    match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => ApiError::conflict(code, message),
        _ => e.into(),
    }
}

/// `POST /auth/login`.
#[utoipa::path(post, path = "/auth/login", tag = "accounts", request_body = Login,
    responses((status = 200, description = "{token, csrf_token, expires_at, user}, and the session cookies", body = Object),
        (status = 401, description = "Wrong email or password", body = Object),
        (status = 403, description = "The tenant is suspended", body = Object),
        (status = 429, description = "Too many attempts; see Retry-After", body = Object)))]
pub async fn login(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Body(req): Body<Login>,
) -> Result<Response, ApiError> {
    let email = req.email.trim().to_lowercase();
    if email.len() > 254
        || email.chars().any(char::is_control)
        || req.password.len() > auth::MAX_PASSWORD
    {
        return Err(ApiError::unauthenticated("wrong email or password"));
    }
    app.login_limits.attempt(&email, peer.ip())?;
    let user = UserRow::load(&app.store, "u.email", &email).await?;
    // Without an account, check against a hash all the same: the answer
    // takes as long, and says nothing about which emails exist.
    let hash = user
        .as_ref()
        .map_or_else(|| app.dummy_hash.clone(), |u| u.password_hash.clone());
    let password = req.password;
    let matches = auth::blocking(move || auth::verify_password(&password, &hash)).await;
    let Some(user) = user.filter(|_| matches) else {
        tracing::info!(peer = %peer.ip(), "failed login");
        app.login_limits.failed(&email);
        return Err(ApiError::unauthenticated("wrong email or password"));
    };
    if user.suspended() {
        return Err(ApiError::forbidden(
            "the tenant is suspended: ask the platform's operators",
        ));
    }
    let tenant = user.tenant_id.as_deref().zip(user.tenant_name.as_deref());
    let answer = user_json(&user.id, &user.email, user.role()?, tenant);
    Ok(session(&app, StatusCode::OK, &user.id, answer))
}

/// `POST /auth/logout`: ends every session of the caller's.
#[utoipa::path(post, path = "/auth/logout", tag = "accounts",
    responses((status = 204, description = "Every session of the caller's ended; cookies cleared"), (status = 401, description = "No session, or an invalid or expired one", body = Object),
        (status = 403, description = "A cookie write without X-CSRF-Token", body = Object)))]
pub async fn logout(State(app): State<Arc<App>>, caller: Caller) -> Result<Response, ApiError> {
    sqlx::query("UPDATE users SET sessions_after = $1 WHERE id = $2")
        .bind(now_ms() + 1)
        .bind(&caller.user_id)
        .execute(&app.store.pool)
        .await?;
    Ok(with_cookies(
        StatusCode::NO_CONTENT.into_response(),
        auth::cleared_cookies(app.config.secure_cookies),
    ))
}

/// `GET /me`.
#[utoipa::path(get, path = "/me", tag = "accounts",
    responses((status = 200, description = "{user: {id, email, role, tenant}}", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object)))]
pub async fn me(caller: Caller) -> Json<Value> {
    let tenant = (caller.tenant_id.as_ref())
        .map(|t| t.as_str())
        .zip(caller.tenant_name.as_deref());
    Json(json!({"user": user_json(&caller.user_id, &caller.email, caller.role, tenant)}))
}
