//! `GET /internal/v1/ndbinfo` and `GET /internal/v1/ndbinfo/{table}`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Serialize;
use shoal_wire::ndbinfo;

use super::{ApiError, AppState};

#[derive(Serialize)]
pub(super) struct TableInfo {
    name: String,
    columns: Vec<&'static str>,
}

pub(super) async fn list() -> Json<Vec<TableInfo>> {
    Json(
        ndbinfo::ALL
            .iter()
            .map(|t| TableInfo {
                name: format!("ndbinfo.{}", t.name),
                columns: t.column_names().collect(),
            })
            .collect(),
    )
}

pub(super) async fn rows(
    State(state): State<AppState>,
    Path(table): Path<String>,
) -> Result<Json<ndbinfo::Rows>, ApiError> {
    let table = ndbinfo::table(&table).ok_or_else(|| {
        let names: Vec<&str> = ndbinfo::ALL.iter().map(|t| t.name).collect();
        ApiError::new(
            StatusCode::NOT_FOUND,
            "NO_SUCH_TABLE",
            format!(
                "no ndbinfo table by that name; there are: {}",
                names.join(", ")
            ),
        )
    })?;
    let node_group = state.cluster.group().map_or(0, |g| g.node_group);
    if table == ndbinfo::NODES {
        let mut rows = ndbinfo::Rows::new(table);
        rows.rows.push(state.cluster.nodes_row());
        return Ok(Json(rows));
    }
    Ok(Json(
        crate::node::ndbinfo::rows(&state.engine, table, node_group).await?,
    ))
}
