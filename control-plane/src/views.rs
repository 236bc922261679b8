//! The views of node groups. The control plane is the arbitrator, as NDB's
//! management server is: a node that finds another of its group dead (or
//! one that has caught up) asks for the next view, and the control plane
//! grants it only if the view it asks from is still the current one and the
//! asking node is in it and stays in it (or asks only to leave). Two sides of a partition that
//! both ask are answered in turn: the first is granted, the second is told
//! the view it is no longer in, and stops. Nothing on the data path calls
//! this: only a failure or a rejoin.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use shoal_wire::internal::{NodeId, View, ViewChange};

use crate::error::ApiError;
use crate::nodes;
use crate::server::{App, Body, Path};
use crate::store::now_ms;

/// Group `group`'s view now; the first (every node live) if none was
/// decided yet.
pub async fn current(app: &App, group: i64) -> Result<View, ApiError> {
    let row: Option<(i64, String, String)> =
        sqlx::query_as("SELECT number, members, moved FROM group_views WHERE node_group = $1")
            .bind(group)
            .fetch_optional(&app.store.pool)
            .await?;
    if let Some((number, members, moved)) = row {
        let garbled = |e: serde_json::Error| {
            tracing::error!(group, error = %e, "a stored view does not parse");
            ApiError::internal()
        };
        return Ok(View {
            number: number as u64,
            members: serde_json::from_str(&members).map_err(garbled)?,
            moved: serde_json::from_str(&moved).map_err(garbled)?,
        });
    }
    let members = nodes::members(app, group).await?;
    let first = View {
        number: 1,
        members: members.iter().map(|n| n.node_id).collect(),
        moved: Vec::new(),
    };
    // Another caller may have stored it first: what is stored wins.
    sqlx::query(
        "INSERT INTO group_views (node_group, number, members, moved, changed_at) \
         VALUES ($1, 1, $2, '[]', $3) ON CONFLICT (node_group) DO NOTHING",
    )
    .bind(group)
    .bind(serde_json::to_string(&first.members).expect("ids serialize"))
    .bind(now_ms())
    .execute(&app.store.pool)
    .await?;
    Box::pin(current(app, group)).await
}

/// `GET /internal/v1/groups/{group}/view` (cluster secret).
pub async fn get(
    State(app): State<Arc<App>>,
    Path(group): Path<u32>,
) -> Result<Json<View>, ApiError> {
    known(&app, group).await?;
    Ok(Json(current(&app, i64::from(group)).await?))
}

async fn known(app: &App, group: u32) -> Result<Vec<NodeId>, ApiError> {
    let members: Vec<NodeId> = (nodes::members(app, i64::from(group)).await?)
        .iter()
        .map(|n| n.node_id)
        .collect();
    if members.is_empty() {
        return Err(ApiError::not_found("node group"));
    }
    Ok(members)
}

/// `POST /internal/v1/groups/{group}/view` a `ViewChange` (cluster
/// secret): the view after it — the next one if granted, else the current
/// one, which tells the asking node where it stands.
pub async fn change(
    State(app): State<Arc<App>>,
    Path(group): Path<u32>,
    Body(asked): Body<ViewChange>,
) -> Result<(StatusCode, Json<View>), ApiError> {
    let members = known(&app, group).await?;
    let named = || asked.remove.iter().chain(&asked.add).chain(&asked.restore);
    let strangers = named().any(|n| !members.contains(n));
    if strangers || named().count() > members.len() {
        return Err(ApiError::invalid(
            "remove and add name nodes of the group, each once",
        ));
    }
    let key = i64::from(group);
    let now = current(&app, key).await?;
    let Some(next) = now.change(&asked, &members) else {
        return Ok((StatusCode::CONFLICT, Json(now)));
    };
    // Granted only if no other change came first.
    let stored = sqlx::query(
        "UPDATE group_views SET number = $1, members = $2, moved = $3, changed_at = $4 \
         WHERE node_group = $5 AND number = $6",
    )
    .bind(next.number as i64)
    .bind(serde_json::to_string(&next.members).expect("ids serialize"))
    .bind(serde_json::to_string(&next.moved).expect("ids serialize"))
    .bind(now_ms())
    .bind(key)
    .bind(now.number as i64)
    .execute(&app.store.pool)
    .await?;
    if stored.rows_affected() == 0 {
        return Ok((StatusCode::CONFLICT, Json(current(&app, key).await?)));
    }
    tracing::info!(group, by = %asked.node_id, view = next.number, members = ?next.members, moved = ?next.moved, "node group view changed");
    // Every node of the group hears of it with the next push.
    app.reconcile_now.notify_one();
    Ok((StatusCode::OK, Json(next)))
}
