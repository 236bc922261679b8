//! The node group: `/internal/v1/group`. The control plane puts a node in
//! its group once enough nodes have registered to form it, and says it
//! again whenever the node restarts. And where the cluster's databases are
//! served: `/internal/v1/directory`.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use shoal_wire::internal::{Directory, Group};

use super::{ApiError, AppState};
use crate::cluster::GroupError;

pub(super) async fn get(State(state): State<AppState>) -> Result<Json<Group>, ApiError> {
    let group = state.cluster.group().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "NO_GROUP",
            "this node is in no node group yet",
        )
    })?;
    Ok(Json((*group).clone()))
}

pub(super) async fn put(
    State(state): State<AppState>,
    body: Result<Json<Group>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    let Json(group) = body?;
    state.cluster.set_group(group).await.map_err(|e| match e {
        GroupError::Invalid(m) => ApiError::new(StatusCode::BAD_REQUEST, "INVALID_GROUP", m),
        GroupError::Save { .. } => {
            tracing::error!(error = %e, "could not keep the node group");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", e.to_string())
        }
    })?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn directory(State(state): State<AppState>) -> Json<Directory> {
    Json(state.cluster.directory())
}

pub(super) async fn set_directory(
    State(state): State<AppState>,
    body: Result<Json<Directory>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    let Json(directory) = body?;
    (state.cluster.set_directory(directory))
        .map_err(|m| ApiError::new(StatusCode::BAD_REQUEST, "INVALID_DIRECTORY", m))?;
    Ok(StatusCode::NO_CONTENT)
}
