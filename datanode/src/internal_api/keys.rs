//! Tenant API keys: `/internal/v1/api-keys`. The control plane pushes each
//! key's salted hash and grants with `PUT`; an operator without a control
//! plane can have the node make a key with `POST`, which answers the key
//! once. Neither the secret nor its hash is ever answered after that.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use shoal_wire::internal::{CreatedKey, KeyList, KeyView, NewKey, PushedKey};

use super::{ApiError, AppState};
use crate::node::keys::{self, KeyDef};

/// A key as listed: everything but the salt and hash.
fn view(def: &KeyDef) -> KeyView {
    KeyView {
        prefix: def.prefix.clone(),
        tenant: def.tenant.clone(),
        grants: def.grants.clone(),
        expires_at: def.expires_at,
    }
}

pub(super) async fn list(State(state): State<AppState>) -> Json<KeyList> {
    let defs = state.engine.api_keys().defs();
    Json(KeyList {
        keys: defs.iter().map(view).collect(),
    })
}

/// Makes a key and answers it — the only time its secret is seen.
pub(super) async fn create(
    State(state): State<AppState>,
    body: Result<Json<NewKey>, JsonRejection>,
) -> Result<(StatusCode, Json<CreatedKey>), ApiError> {
    let Json(new) = body?;
    let (key, def) = keys::generate(new.tenant, new.grants, new.expires_at)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", e.to_string()))?;
    let view = view(&def);
    state.engine.put_api_key(def).await?;
    Ok((StatusCode::CREATED, Json(CreatedKey { view, key })))
}

/// Adds or replaces the key with this prefix.
pub(super) async fn put(
    State(state): State<AppState>,
    Path(prefix): Path<String>,
    body: Result<Json<PushedKey>, JsonRejection>,
) -> Result<Json<KeyView>, ApiError> {
    let Json(pushed) = body?;
    let def = KeyDef {
        prefix,
        tenant: pushed.tenant,
        salt: pushed.salt,
        hash: pushed.hash,
        grants: pushed.grants,
        expires_at: pushed.expires_at,
        sql_hash: pushed.sql_hash,
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
