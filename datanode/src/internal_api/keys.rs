//! Tenant API keys: `/internal/v1/api-keys`. The control plane pushes each
//! key's salted hash and grants with `PUT`; an operator without a control
//! plane can have the node make a key with `POST`, which answers the key
//! once. Neither the secret nor its hash is ever answered after that.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_wire::schema::TenantId;

use super::{ApiError, AppState};
use crate::node::keys::{self, KeyDef, KeyGrant};

/// A key as listed: everything but the salt and hash.
fn view(def: &KeyDef) -> Value {
    json!({
        "prefix": def.prefix,
        "tenant": def.tenant,
        "grants": def.grants,
        "expires_at": def.expires_at,
    })
}

pub(super) async fn list(State(state): State<AppState>) -> Json<Value> {
    let defs = state.engine.api_keys().defs();
    Json(json!({ "keys": defs.iter().map(view).collect::<Vec<_>>() }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewKey {
    tenant: TenantId,
    grants: Vec<KeyGrant>,
    #[serde(default)]
    expires_at: Option<u64>,
}

/// Makes a key and answers it — the only time its secret is seen.
pub(super) async fn create(
    State(state): State<AppState>,
    body: Result<Json<NewKey>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Json(new) = body?;
    let (key, def) = keys::generate(new.tenant, new.grants, new.expires_at)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", e.to_string()))?;
    let mut answer = view(&def);
    state.engine.put_api_key(def).await?;
    answer["key"] = key.into();
    Ok((StatusCode::CREATED, Json(answer)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PushedKey {
    tenant: TenantId,
    salt: String,
    hash: String,
    grants: Vec<KeyGrant>,
    #[serde(default)]
    expires_at: Option<u64>,
}

/// Adds or replaces the key with this prefix.
pub(super) async fn put(
    State(state): State<AppState>,
    Path(prefix): Path<String>,
    body: Result<Json<PushedKey>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(pushed) = body?;
    let def = KeyDef {
        prefix,
        tenant: pushed.tenant,
        salt: pushed.salt,
        hash: pushed.hash,
        grants: pushed.grants,
        expires_at: pushed.expires_at,
    };
    let answer = view(&def);
    state.engine.put_api_key(def).await?;
    Ok(Json(answer))
}

/// Revokes the key with this prefix: the next request with it is refused.
pub(super) async fn remove(
    State(state): State<AppState>,
    Path(prefix): Path<String>,
) -> Result<StatusCode, ApiError> {
    if state.engine.remove_api_key(&prefix).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "NO_SUCH_KEY",
            "no API key with this prefix",
        ))
    }
}
