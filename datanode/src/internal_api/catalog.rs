//! Databases and tables: `/internal/v1/databases[/{db}[/tables[/{table}]]]`.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use shoal_wire::internal::{DatabaseCreated, DatabaseInfo, NewDatabase, NodeId, TableCreated};
use shoal_wire::schema::{DatabaseName, IndexDef, TableDef, TenantId};

use super::{ApiError, AppState};
use crate::node::catalog::CatalogError;
use crate::tc::Table;

pub(super) async fn list(State(state): State<AppState>) -> Json<Vec<DatabaseInfo>> {
    let engine = &state.engine;
    let tables = engine.tables();
    Json(
        engine
            .databases()
            .into_iter()
            .map(|db| DatabaseInfo {
                tables: tables
                    .iter()
                    .filter(|t| t.database.id == db.id)
                    .map(|t| t.def().clone())
                    .collect(),
                tenant: db.tenant.as_ref().map(|t| t.id.to_string()),
                name: db.name.to_string(),
                primary: Some(NodeId(db.primary())),
            })
            .collect(),
    )
}

pub(super) async fn create_database(
    State(state): State<AppState>,
    body: Result<Json<NewDatabase>, JsonRejection>,
) -> Result<(StatusCode, Json<DatabaseCreated>), ApiError> {
    let Json(body) = body?;
    let invalid = |e: shoal_wire::schema::SchemaError| {
        ApiError::new(StatusCode::BAD_REQUEST, "INVALID_NAME", e.to_string())
    };
    let name = DatabaseName::parse(&body.name).map_err(invalid)?;
    let tenant = body
        .tenant
        .as_deref()
        .map(TenantId::parse)
        .transpose()
        .map_err(invalid)?;
    let db = state
        .engine
        .create_replicated_database(&name, tenant.as_ref(), body.primary)
        .await?;
    // Its primary now, by the group's view.
    state.cluster.place(&db);
    let created = DatabaseCreated {
        name: name.to_string(),
        id: db.id.0,
        tenant: tenant.map(|t| t.to_string()),
    };
    Ok((StatusCode::CREATED, Json(created)))
}

pub(super) async fn drop_database(
    State(state): State<AppState>,
    Path(db): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.engine.drop_database(&db).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn create_table(
    State(state): State<AppState>,
    Path(db): Path<String>,
    body: Result<Json<TableDef>, JsonRejection>,
) -> Result<(StatusCode, Json<TableCreated>), ApiError> {
    let database = DatabaseName::parse(&db)
        .map_err(|_| ApiError::from(CatalogError::NoSuchDatabase(db.clone())))?;
    let Json(def) = body?;
    let table = state.engine.create_table(&database, def).await?;
    Ok((StatusCode::CREATED, Json(created(&table))))
}

/// What the internal API answers for a table made or changed.
fn created(table: &Table) -> TableCreated {
    TableCreated {
        id: table.id.0,
        database: table.database.name.to_string(),
        fragments: table.fragments(),
        table: table.def().clone(),
    }
}

pub(super) async fn add_index(
    State(state): State<AppState>,
    Path((db, table)): Path<(String, String)>,
    body: Result<Json<IndexDef>, JsonRejection>,
) -> Result<(StatusCode, Json<TableCreated>), ApiError> {
    let Json(index) = body?;
    let table = state.engine.add_index(&db, &table, index).await?;
    Ok((StatusCode::CREATED, Json(created(&table))))
}

pub(super) async fn drop_index(
    State(state): State<AppState>,
    Path((db, table, index)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    state.engine.drop_index(&db, &table, &index).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn drop_table(
    State(state): State<AppState>,
    Path((db, table)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    state.engine.drop_table(&db, &table).await?;
    Ok(StatusCode::NO_CONTENT)
}
