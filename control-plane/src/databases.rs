//! A tenant's databases and tables: placed on a data node, created there,
//! kept in the store; and the reconcile that brings a node back to them.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_wire::api::{Database, DatabaseList, TableMemory};
use shoal_wire::internal;
use shoal_wire::ndbinfo::{self, Cell};
use shoal_wire::schema::{DatabaseName, IndexDef, TableDef, TableName, TenantId};

use crate::audit::{self, Change};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::nodes::{self, NodeId, NodeRow, ReconcileError};
use crate::server::{App, Body, Path};
use crate::store::{new_id, now_ms};
use crate::{quotas, validate};

/// A database as the store has it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DatabaseRow {
    pub id: String,
    pub tenant_id: TenantId,
    pub name: DatabaseName,
    /// Its primary.
    #[sqlx(try_from = "i64")]
    pub node_id: NodeId,
    pub status: String,
    pub created_at: i64,
    pub node_group: Option<i64>,
}

pub const DATABASE_COLUMNS: &str = "id, tenant_id, name, node_id, status, created_at, node_group";

/// The caller's ready database `name` — for a platform admin, anyone's.
/// Another tenant's is "no such database", as one that does not exist.
pub async fn find(app: &App, caller: &Caller, name: &str) -> Result<DatabaseRow, ApiError> {
    if !validate::could_name(name) {
        return Err(ApiError::not_found("database"));
    }
    let row: Option<DatabaseRow> = sqlx::query_as(&format!(
        "SELECT {DATABASE_COLUMNS} FROM databases WHERE name = $1 AND status = 'ready'"
    ))
    .bind(name)
    .fetch_optional(&app.store.pool)
    .await?;
    let db = row
        .filter(|db| caller.is_admin() || caller.tenant_id.as_ref() == Some(&db.tenant_id))
        .ok_or_else(|| ApiError::not_found("database"))?;
    let span = tracing::Span::current();
    span.record("database", db.name.as_str());
    span.record("tenant", db.tenant_id.as_str());
    Ok(db)
}

/// A database as the API shows it, with where applications reach it.
/// An answer of the API, as JSON.
fn to_value(answer: impl serde::Serialize) -> Value {
    serde_json::to_value(answer).expect("an answer serializes")
}

/// A database as the API answers it, with its tables' names and the nodes
/// serving it (its primary first).
fn database_json(db: &DatabaseRow, nodes: &[NodeRow], tables: Vec<String>) -> Database {
    let primary = nodes.iter().find(|n| n.node_id == db.node_id);
    Database {
        id: db.id.clone(),
        name: db.name.clone(),
        tenant_id: db.tenant_id.clone(),
        node_id: db.node_id,
        node_group: db.node_group.and_then(|g| u32::try_from(g).ok()),
        rest_url: primary.map(|n| n.rest_url.clone()),
        resp_addr: primary.map(|n| n.resp_addr.clone()),
        mysql_addr: primary
            .map(|n| n.mysql_addr.clone())
            .filter(|a| !a.is_empty()),
        nodes: nodes.iter().map(NodeRow::endpoint).collect(),
        created_at: db.created_at,
        tables,
    }
}

/// The nodes of `db`'s group, its primary first.
fn serving(db: &DatabaseRow, all: &[NodeRow]) -> Vec<NodeRow> {
    let mut nodes: Vec<NodeRow> = all
        .iter()
        .filter(|n| match db.node_group {
            Some(group) => n.node_group == Some(group),
            None => n.node_id == db.node_id,
        })
        .cloned()
        .collect();
    if let Some(at) = nodes.iter().position(|n| n.node_id == db.node_id) {
        nodes[..=at].rotate_right(1);
    }
    nodes
}

/// The nodes holding `db`, its primary first.
pub async fn nodes_of(app: &App, db: &DatabaseRow) -> Result<Vec<NodeRow>, ApiError> {
    let nodes = serving(db, &nodes::all(app).await?);
    if nodes.is_empty() {
        tracing::error!(database = %db.name, node = %db.node_id, "a database on no known node");
        return Err(ApiError::internal());
    }
    Ok(nodes)
}

/// `GET /databases`: the caller's databases (a platform admin's: all).
#[utoipa::path(get, path = "/databases", tag = "databases",
    responses((status = 200, description = "{databases: [{id, name, tenant_id, node_id, rest_url, resp_addr, created_at, tables}]}", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object)))]
pub async fn list(State(app): State<Arc<App>>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let rows: Vec<DatabaseRow> = sqlx::query_as(&format!(
        "SELECT {DATABASE_COLUMNS} FROM databases \
         WHERE status = 'ready' AND (tenant_id = $1 OR $2 = 1) ORDER BY name"
    ))
    .bind(caller.tenant_id.as_ref().map_or("", TenantId::as_str))
    .bind(i64::from(caller.is_admin()))
    .fetch_all(&app.store.pool)
    .await?;
    let nodes = nodes::all(&app).await?;
    let mut answer = Vec::with_capacity(rows.len());
    for db in &rows {
        let tables = table_names(&app, &db.id).await?;
        answer.push(database_json(db, &serving(db, &nodes), tables));
    }
    Ok(Json(to_value(DatabaseList { databases: answer })))
}

async fn table_names(app: &App, database_id: &str) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT name FROM tables WHERE database_id = $1 AND status = 'ready' ORDER BY name",
    )
    .bind(database_id)
    .fetch_all(&app.store.pool)
    .await
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDatabase {
    name: String,
}

/// `POST /databases {name}`: places the database on the data node using
/// the least memory and creates it there.
#[utoipa::path(post, path = "/databases", tag = "databases", request_body = NewDatabase,
    responses((status = 201, description = "The database, with where applications reach it", body = Object), (status = 400, description = "Malformed or invalid input; the message names the field", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object),
        (status = 409, description = "DATABASE_EXISTS, or QUOTA_EXCEEDED", body = Object),
        (status = 503, description = "NO_DATA_NODE or DATA_NODE_UNAVAILABLE: nothing was made", body = Object)))]
pub async fn create(
    State(app): State<Arc<App>>,
    caller: Caller,
    Body(req): Body<NewDatabase>,
) -> Result<impl IntoResponse, ApiError> {
    let tenant = caller.tenant()?.clone();
    let tenant_quota = quotas::of_tenant(&app, &tenant).await?;
    let counts = quotas::counts(&app, &tenant).await?;
    quotas::check_count(
        "databases",
        tenant_quota.max_databases,
        counts.databases,
        "the tenant",
    )?;
    let name =
        DatabaseName::parse(&req.name).map_err(|e| ApiError::invalid(format!("name: {e}")))?;
    // Unique whatever the case (the store's index on lower(name) holds it
    // against a race): `DEMO` must not pass for another tenant's `demo`.
    let taken: Option<(String, String)> =
        sqlx::query_as("SELECT name, status FROM databases WHERE lower(name) = lower($1)")
            .bind(&name)
            .fetch_optional(&app.store.pool)
            .await?;
    if let Some((taken, status)) = taken {
        let why = if status == "dropping" {
            "is still being dropped"
        } else {
            "is taken"
        };
        let like = if taken == name.as_str() {
            String::new()
        } else {
            format!(" (as '{taken}')")
        };
        return Err(ApiError::conflict(
            "DATABASE_EXISTS",
            format!(
                "the database name '{name}'{like} {why}: database names are unique on the platform, whatever their case"
            ),
        ));
    }
    let placed = nodes::place(&app).await?;
    let primary = placed.nodes[0].node_id;
    let new = internal::NewDatabase {
        name: name.to_string(),
        tenant: Some(tenant.to_string()),
        primary: Some(primary),
    };
    // On every node of the group, or on none.
    for (made, node) in placed.nodes.iter().enumerate() {
        let refused = match app.nodes.create_database(node, &new).await {
            Ok(_) => continue,
            Err(e) if e.code() == Some("DATABASE_EXISTS") => ApiError::conflict(
                "DATABASE_EXISTS",
                format!("the database name '{name}' is taken"),
            ),
            Err(e) => e.into(),
        };
        undo_database(&app, &placed.nodes[..made], &name).await;
        return Err(refused);
    }
    let db = DatabaseRow {
        id: new_id("db"),
        tenant_id: tenant,
        name,
        node_id: primary,
        status: "ready".into(),
        created_at: now_ms(),
        node_group: Some(placed.group),
    };
    let stored = sqlx::query(
        "INSERT INTO databases (id, tenant_id, name, node_id, status, created_at, node_group) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&db.id)
    .bind(&db.tenant_id)
    .bind(&db.name)
    .bind(i64::from(db.node_id))
    .bind(&db.status)
    .bind(db.created_at)
    .bind(db.node_group)
    .execute(&app.store.pool)
    .await;
    if let Err(e) = stored {
        // Lost a race for the name, or the store failed: the nodes must not
        // keep a database the store does not know.
        undo_database(&app, &placed.nodes, &db.name).await;
        return Err(match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => ApiError::conflict(
                "DATABASE_EXISTS",
                format!("the database name '{}' is taken", db.name),
            ),
            _ => e.into(),
        });
    }
    tracing::info!(database = %db.name, tenant = %db.tenant_id, node = %db.node_id, node_group = ?db.node_group, "database created");
    // The nodes hold the tenant to its quota from the first database on.
    for node in &placed.nodes {
        quotas::push_new_database(&app, node, &db, &tenant_quota).await;
    }
    let change = Change {
        tenant_id: Some(&db.tenant_id),
        action: "database.create",
        target: format!("database {}", db.name),
        before: None,
        after: Some(json!({"name": db.name, "node_id": db.node_id, "node_group": db.node_group})),
    };
    audit::record_after(&app, &caller, change).await;
    Ok((
        StatusCode::CREATED,
        Json(to_value(database_json(&db, &placed.nodes, Vec::new()))),
    ))
}

/// Drops a database just made on `nodes` that is not to be kept.
async fn undo_database(app: &App, nodes: &[NodeRow], name: &DatabaseName) {
    for node in nodes {
        if let Err(undo) = app.nodes.drop_database(node, name).await {
            tracing::error!(database = %name, node = %node.node_id, error = %undo, "could not undo a database the store did not take");
        }
    }
}

/// `GET /databases/{db}`.
#[utoipa::path(get, path = "/databases/{db}", tag = "databases", params(("db" = String, Path, description = "The database's name")),
    responses((status = 200, description = "The database", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 404, description = "No such thing — or another tenant's", body = Object)))]
pub async fn get(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let db = find(&app, &caller, &name).await?;
    let nodes = nodes_of(&app, &db).await?;
    let tables = table_names(&app, &db.id).await?;
    Ok(Json(to_value(database_json(&db, &nodes, tables))))
}

/// `DELETE /databases/{db}`: drops it and its tables on its node. If the
/// node cannot be reached now, the database is gone from the API at once
/// and the node drops it when it is back.
#[utoipa::path(delete, path = "/databases/{db}", tag = "databases", params(("db" = String, Path, description = "The database's name")),
    responses((status = 204, description = "Dropped, with its tables and rows"), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 404, description = "No such thing — or another tenant's", body = Object)))]
pub async fn drop(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let db = find(&app, &caller, &name).await?;
    sqlx::query("UPDATE databases SET status = 'dropping' WHERE id = $1")
        .bind(&db.id)
        .execute(&app.store.pool)
        .await?;
    let nodes = nodes_of(&app, &db).await?;
    finish_drop(&app, &nodes, &db.id, &db.name).await;
    tracing::info!(database = %db.name, tenant = %db.tenant_id, "database dropped");
    let change = Change {
        tenant_id: Some(&db.tenant_id),
        action: "database.drop",
        target: format!("database {}", db.name),
        before: Some(json!({"name": db.name, "node_id": db.node_id})),
        after: None,
    };
    audit::record_after(&app, &caller, change).await;
    Ok(StatusCode::NO_CONTENT)
}

/// Drops a database marked `dropping` on every node of its group, then
/// forgets it; left for the reconcile if a node cannot be reached.
async fn finish_drop(app: &App, nodes: &[NodeRow], id: &str, name: &DatabaseName) {
    let mut dropped = true;
    for node in nodes {
        match app.nodes.drop_database(node, name).await {
            Ok(_) => {}
            Err(e) if e.code() == Some("NO_SUCH_DATABASE") => {}
            Err(e) => {
                tracing::warn!(database = %name, node = %node.node_id, error = %e, "drop left for the reconcile");
                dropped = false;
            }
        }
    }
    if !dropped {
        return;
    }
    if let Err(e) = sqlx::query("DELETE FROM databases WHERE id = $1")
        .bind(id)
        .execute(&app.store.pool)
        .await
    {
        tracing::error!(database = %name, error = %e, "could not forget a dropped database");
    }
}

/// A table as the store has it.
#[derive(Debug, Clone, sqlx::FromRow)]
struct TableRow {
    id: String,
    name: TableName,
    definition: String,
    status: String,
}

async fn tables_of(app: &App, database_id: &str) -> sqlx::Result<Vec<TableRow>> {
    sqlx::query_as(
        "SELECT id, name, definition, status FROM tables WHERE database_id = $1 ORDER BY name",
    )
    .bind(database_id)
    .fetch_all(&app.store.pool)
    .await
}

fn definition(row: &TableRow) -> Result<Value, ApiError> {
    serde_json::from_str(&row.definition).map_err(|e| {
        tracing::error!(table = %row.name, error = %e, "a stored table definition does not parse");
        ApiError::internal()
    })
}

/// `db`'s ready table `name` (`NOT_FOUND` if none): its name and definition.
pub async fn table_definition(
    app: &App,
    db: &DatabaseRow,
    name: &str,
) -> Result<(TableName, Value), ApiError> {
    let table = (tables_of(app, &db.id).await?.into_iter())
        .find(|t| t.status == "ready" && t.name.as_str() == name)
        .ok_or_else(|| ApiError::not_found("table"))?;
    Ok((table.name.clone(), definition(&table)?))
}

/// `GET /databases/{db}/memory`: the database's rows of ndbinfo's
/// `table_memory_usage`, live from its data node.
#[utoipa::path(get, path = "/databases/{db}/memory", tag = "databases",
    params(("db" = String, Path, description = "The database's name")),
    responses((status = 200, description = "{database, columns, rows}: RonDB's table_memory_usage columns, one row per table", body = Object),
        (status = 401, description = "No session, or an invalid or expired one", body = Object),
        (status = 404, description = "No such thing — or another tenant's", body = Object),
        (status = 503, description = "The database's data node cannot be reached", body = Object)))]
pub async fn memory(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let db = find(&app, &caller, &name).await?;
    let nodes = nodes_of(&app, &db).await?;
    let mut usage = (app
        .nodes
        .ndbinfo(&nodes[0], ndbinfo::TABLE_MEMORY_USAGE.name))
    .await?;
    let this = Cell::Text(db.name.to_string());
    usage.rows.retain(|row| row.first() == Some(&this));
    let memory = TableMemory {
        database: db.name.clone(),
        usage,
    };
    Ok(Json(to_value(memory)))
}

/// `GET /databases/{db}/tables`.
#[utoipa::path(get, path = "/databases/{db}/tables", tag = "databases", params(("db" = String, Path, description = "The database's name")),
    responses((status = 200, description = "{database, tables: [{name, columns, primary_key}]}", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 404, description = "No such thing — or another tenant's", body = Object)))]
pub async fn list_tables(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let db = find(&app, &caller, &name).await?;
    let tables = tables_of(&app, &db.id)
        .await?
        .iter()
        .filter(|t| t.status == "ready")
        .map(definition)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Json(json!({"database": db.name, "tables": tables})))
}

/// `POST /databases/{db}/tables {name, columns, primary_key}`.
#[utoipa::path(post, path = "/databases/{db}/tables", tag = "databases", params(("db" = String, Path, description = "The database's name")),
    request_body(content = Object, description = "{name, columns: [{name, type, nullable}], primary_key: [..]}; types as in data-types.md"),
    responses((status = 201, description = "The table, every nullable spelled out", body = Object), (status = 400, description = "Malformed or invalid input; the message names the field", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 404, description = "No such thing — or another tenant's", body = Object),
        (status = 409, description = "TABLE_EXISTS, or QUOTA_EXCEEDED", body = Object)))]
pub async fn create_table(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(name): Path<String>,
    Body(table): Body<TableDef>,
) -> Result<impl IntoResponse, ApiError> {
    let db = find(&app, &caller, &name).await?;
    table
        .validate()
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let counts = quotas::counts(&app, &db.tenant_id).await?;
    let tenant_quota = quotas::of_tenant(&app, &db.tenant_id).await?;
    quotas::check_count(
        "tables",
        tenant_quota.max_tables,
        counts.tables,
        "the tenant",
    )?;
    let db_quota: Option<String> = sqlx::query_scalar("SELECT quota FROM databases WHERE id = $1")
        .bind(&db.id)
        .fetch_one(&app.store.pool)
        .await?;
    let in_db = tables_of(&app, &db.id).await?.len() as i64;
    let whose = format!("database '{}'", db.name);
    quotas::check_count(
        "tables",
        quotas::parse(db_quota.as_deref()).max_tables,
        in_db,
        &whose,
    )?;
    let table_name = table.name.to_string();
    let existing = tables_of(&app, &db.id).await?;
    if let Some(t) = existing
        .iter()
        .find(|t| t.name.as_str().eq_ignore_ascii_case(&table_name))
    {
        let why = if t.status == "dropping" {
            "is still being dropped"
        } else {
            "exists"
        };
        return Err(ApiError::conflict(
            "TABLE_EXISTS",
            format!("table '{}' {why} in database '{}'", t.name, db.name),
        ));
    }
    let nodes = nodes_of(&app, &db).await?;
    let definition = serde_json::to_value(&table).expect("a table definition serializes");
    // On every node of the group, or on none.
    for (made, node) in nodes.iter().enumerate() {
        let refused = match app.nodes.create_table(node, &db.name, &table).await {
            Ok(_) => continue,
            Err(e) if e.code() == Some("TABLE_EXISTS") => ApiError::conflict(
                "TABLE_EXISTS",
                format!("table '{table_name}' exists in database '{}'", db.name),
            ),
            Err(e) => e.into(),
        };
        undo_table(&app, &nodes[..made], &db.name, &table.name).await;
        return Err(refused);
    }
    let stored = sqlx::query(
        "INSERT INTO tables (id, database_id, name, definition, status, created_at) \
         VALUES ($1, $2, $3, $4, 'ready', $5)",
    )
    .bind(new_id("tb"))
    .bind(&db.id)
    .bind(&table_name)
    .bind(definition.to_string())
    .bind(now_ms())
    .execute(&app.store.pool)
    .await;
    if let Err(e) = stored {
        undo_table(&app, &nodes, &db.name, &table.name).await;
        return Err(e.into());
    }
    let change = Change {
        tenant_id: Some(&db.tenant_id),
        action: "table.create",
        target: format!("table {}.{table_name}", db.name),
        before: None,
        after: Some(definition.clone()),
    };
    audit::record_after(&app, &caller, change).await;
    Ok((StatusCode::CREATED, Json(definition)))
}

/// Drops a table just made on `nodes` that is not to be kept.
async fn undo_table(app: &App, nodes: &[NodeRow], database: &DatabaseName, table: &TableName) {
    for node in nodes {
        if let Err(undo) = app.nodes.drop_table(node, database, table).await {
            tracing::error!(%table, node = %node.node_id, error = %undo, "could not undo a table the store did not take");
        }
    }
}

/// `DELETE /databases/{db}/tables/{table}`.
#[utoipa::path(delete, path = "/databases/{db}/tables/{table}", tag = "databases",
    params(("db" = String, Path, description = "The database's name"), ("table" = String, Path, description = "The table's name")),
    responses((status = 204, description = "Dropped"), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 404, description = "No such thing — or another tenant's", body = Object)))]
pub async fn drop_table(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path((name, table_name)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let db = find(&app, &caller, &name).await?;
    let table = tables_of(&app, &db.id)
        .await?
        .into_iter()
        .find(|t| t.name.as_str() == table_name && t.status == "ready")
        .ok_or_else(|| ApiError::not_found("table"))?;
    sqlx::query("UPDATE tables SET status = 'dropping' WHERE id = $1")
        .bind(&table.id)
        .execute(&app.store.pool)
        .await?;
    let nodes = nodes_of(&app, &db).await?;
    finish_table_drop(&app, &nodes, &db.name, &table).await;
    let change = Change {
        tenant_id: Some(&db.tenant_id),
        action: "table.drop",
        target: format!("table {}.{}", db.name, table.name),
        before: serde_json::from_str(&table.definition).ok(),
        after: None,
    };
    audit::record_after(&app, &caller, change).await;
    Ok(StatusCode::NO_CONTENT)
}

/// The definition of the ready table `name` of database `db`.
pub(crate) async fn definition_of(
    app: &App,
    db: &DatabaseRow,
    name: &str,
) -> Result<TableDef, ApiError> {
    ready_table(app, db, name).await.map(|(_, def)| def)
}

/// The ready table `name` of database `db`, and its definition.
async fn ready_table(
    app: &App,
    db: &DatabaseRow,
    name: &str,
) -> Result<(TableRow, TableDef), ApiError> {
    let table = (tables_of(app, &db.id).await?.into_iter())
        .find(|t| t.name.as_str() == name && t.status == "ready")
        .ok_or_else(|| ApiError::not_found("table"))?;
    let def = serde_json::from_value(definition(&table)?).map_err(|e| {
        tracing::error!(table = %table.name, error = %e, "a stored table definition does not parse");
        ApiError::internal()
    })?;
    Ok((table, def))
}

/// Stores a table's new definition, unless another change came first.
async fn store_definition(app: &App, table: &TableRow, def: &Value) -> Result<bool, ApiError> {
    let updated =
        sqlx::query("UPDATE tables SET definition = $1 WHERE id = $2 AND definition = $3")
            .bind(def.to_string())
            .bind(&table.id)
            .bind(&table.definition)
            .execute(&app.store.pool)
            .await?;
    Ok(updated.rows_affected() == 1)
}

/// What a node's refusal to build an index answers.
fn index_refused(e: nodes::NodeError, db: &DatabaseName, node: &NodeRow) -> ApiError {
    match e.code() {
        // The store has no such index: the node's own (made on its internal
        // API, or left by a drop it missed), which is left alone.
        Some("INDEX_EXISTS") => ApiError::conflict(
            "INDEX_EXISTS",
            format!(
                "data node {} already holds an index of that name that this table does not have (made on the node itself); drop it there, or choose another name; nothing was changed",
                node.node_id
            ),
        ),
        Some("MEMORY_QUOTA") => ApiError::conflict(
            "QUOTA_EXCEEDED",
            format!(
                "the index's pages would pass the memory quota of database '{db}'; nothing was changed"
            ),
        ),
        Some("OUT_OF_DATA_MEMORY") => ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "OUT_OF_DATA_MEMORY",
            "a data node has no DataMemory for the index; nothing was changed",
        ),
        // The node names the values two rows share.
        Some("DUPLICATE_KEY") => ApiError::conflict(
            "DUPLICATE_KEY",
            match &e {
                nodes::NodeError::Refused { message, .. } => format!("{message}; nothing was changed"),
                _ => "rows of the table already share values of the unique index's columns; nothing was changed".to_owned(),
            },
        ),
        _ => e.into(),
    }
}

/// `POST /databases/{db}/tables/{table}/indexes {name, columns}`.
#[utoipa::path(post, path = "/databases/{db}/tables/{table}/indexes", tag = "databases",
    params(("db" = String, Path, description = "The database's name"), ("table" = String, Path, description = "The table's name")),
    request_body(content = Object, description = "{name, columns: [..]}: an ordered index, built while the table serves reads and writes"),
    responses((status = 201, description = "The table's definition, with the index", body = Object), (status = 400, description = "Malformed or invalid input; the message names the field", body = Object), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 404, description = "No such thing — or another tenant's", body = Object),
        (status = 409, description = "INDEX_EXISTS, QUOTA_EXCEEDED (the index's pages would pass the memory quota), DUPLICATE_KEY (a unique index, and rows already share its values), or CHANGED (another change to the table came first)", body = Object)))]
pub async fn add_index(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path((name, table_name)): Path<(String, String)>,
    Body(index): Body<IndexDef>,
) -> Result<impl IntoResponse, ApiError> {
    let db = find(&app, &caller, &name).await?;
    let (table, mut def) = ready_table(&app, &db, &table_name).await?;
    let index_name = index.name.to_string();
    if (def.indexes.iter()).any(|i| i.name.as_str().eq_ignore_ascii_case(&index_name)) {
        return Err(ApiError::conflict(
            "INDEX_EXISTS",
            format!("table '{}' already has an index '{index_name}'", table.name),
        ));
    }
    def.indexes.push(index.clone());
    def.validate()
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let nodes = nodes_of(&app, &db).await?;
    let undo = |done: usize| {
        let (app, nodes, db, table) = (&app, &nodes, &db, &table);
        let index_name = &index_name;
        async move {
            for node in &nodes[..done] {
                if let Err(e) = app
                    .nodes
                    .drop_index(node, &db.name, &table.name, index_name)
                    .await
                {
                    tracing::error!(table = %table.name, index = %index_name, node = %node.node_id, error = %e, "could not undo an index");
                }
            }
        }
    };
    // On every node of the group, or on none.
    for (done, node) in nodes.iter().enumerate() {
        if let Err(e) = app
            .nodes
            .add_index(node, &db.name, &table.name, &index)
            .await
        {
            undo(done).await;
            return Err(index_refused(e, &db.name, node));
        }
    }
    let definition = serde_json::to_value(&def).expect("a table definition serializes");
    if !store_definition(&app, &table, &definition).await? {
        undo(nodes.len()).await;
        return Err(ApiError::conflict(
            "CHANGED",
            format!(
                "table '{}' was changed meanwhile; nothing was changed, try again",
                table.name
            ),
        ));
    }
    let change = Change {
        tenant_id: Some(&db.tenant_id),
        action: "index.create",
        target: format!("index {}.{}.{index_name}", db.name, table.name),
        before: serde_json::from_str(&table.definition).ok(),
        after: Some(definition.clone()),
    };
    audit::record_after(&app, &caller, change).await;
    Ok((StatusCode::CREATED, Json(definition)))
}

/// `DELETE /databases/{db}/tables/{table}/indexes/{index}`.
#[utoipa::path(delete, path = "/databases/{db}/tables/{table}/indexes/{index}", tag = "databases",
    params(("db" = String, Path, description = "The database's name"), ("table" = String, Path, description = "The table's name"), ("index" = String, Path, description = "The index's name")),
    responses((status = 204, description = "Dropped"), (status = 401, description = "No session, or an invalid or expired one", body = Object), (status = 404, description = "No such thing — or another tenant's", body = Object),
        (status = 409, description = "CHANGED: another change to the table came first", body = Object)))]
pub async fn drop_index(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path((name, table_name, index_name)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    let db = find(&app, &caller, &name).await?;
    let (table, mut def) = ready_table(&app, &db, &table_name).await?;
    let at = (def.indexes.iter())
        .position(|i| i.name.as_str() == index_name)
        .ok_or_else(|| ApiError::not_found("index"))?;
    let dropped = def.indexes.remove(at);
    let definition = serde_json::to_value(&def).expect("a table definition serializes");
    if !store_definition(&app, &table, &definition).await? {
        return Err(ApiError::conflict(
            "CHANGED",
            format!(
                "table '{}' was changed meanwhile; nothing was changed, try again",
                table.name
            ),
        ));
    }
    // Dropped from the store first: a node that misses the drop keeps an
    // index nobody can name, which costs it memory but answers nothing.
    for node in &nodes_of(&app, &db).await? {
        match app
            .nodes
            .drop_index(node, &db.name, &table.name, dropped.name.as_str())
            .await
        {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.code(),
                    Some("NO_SUCH_INDEX" | "NO_SUCH_TABLE" | "NO_SUCH_DATABASE")
                ) => {}
            Err(e) => {
                tracing::warn!(table = %table.name, index = %dropped.name, node = %node.node_id, error = %e, "index drop not reached a node");
            }
        }
    }
    let change = Change {
        tenant_id: Some(&db.tenant_id),
        action: "index.drop",
        target: format!("index {}.{}.{index_name}", db.name, table.name),
        before: serde_json::from_str(&table.definition).ok(),
        after: Some(definition),
    };
    audit::record_after(&app, &caller, change).await;
    Ok(StatusCode::NO_CONTENT)
}

/// Drops a table marked `dropping` on every node of its database's group,
/// then forgets it; left for the reconcile if a node cannot be reached.
async fn finish_table_drop(
    app: &App,
    nodes: &[NodeRow],
    database: &DatabaseName,
    table: &TableRow,
) {
    let mut dropped = true;
    for node in nodes {
        match app.nodes.drop_table(node, database, &table.name).await {
            Ok(_) => {}
            Err(e) if matches!(e.code(), Some("NO_SUCH_TABLE" | "NO_SUCH_DATABASE")) => {}
            Err(e) => {
                tracing::warn!(table = %table.name, node = %node.node_id, error = %e, "drop left for the reconcile");
                dropped = false;
            }
        }
    }
    if !dropped {
        return;
    }
    if let Err(e) = sqlx::query("DELETE FROM tables WHERE id = $1")
        .bind(&table.id)
        .execute(&app.store.pool)
        .await
    {
        tracing::error!(table = %table.name, error = %e, "could not forget a dropped table");
    }
}

/// Brings `node` to what the store holds for it: creates the databases and
/// tables it lacks (after a restart on an empty disk, or a push it missed),
/// and finishes the drops it missed. What the node has that the store never
/// knew is left alone: it may hold an operator's data.
pub async fn reconcile(app: &App, node: &NodeRow) -> Result<(), ReconcileError> {
    let on_node = app.nodes.databases(node).await?;
    let on_node: HashMap<&str, Vec<&str>> = on_node
        .iter()
        .map(|db| {
            (
                db.name.as_str(),
                db.tables.iter().map(|t| t.name.as_str()).collect(),
            )
        })
        .collect();
    let Some(group) = node.node_group else {
        return Ok(());
    };
    let wanted: Vec<DatabaseRow> = sqlx::query_as(&format!(
        "SELECT {DATABASE_COLUMNS} FROM databases WHERE node_group = $1"
    ))
    .bind(group)
    .fetch_all(&app.store.pool)
    .await?;
    let all = nodes::all(app).await?;
    for db in wanted {
        if db.status == "dropping" {
            finish_drop(app, &serving(&db, &all), &db.id, &db.name).await;
            continue;
        }
        let present = on_node.get(db.name.as_str());
        if present.is_none() {
            tracing::info!(node = %node.node_id, database = %db.name, "reconcile: creating database");
            let new = internal::NewDatabase {
                name: db.name.to_string(),
                tenant: Some(db.tenant_id.to_string()),
                primary: Some(db.node_id),
            };
            match app.nodes.create_database(node, &new).await {
                Err(e) if e.code() != Some("DATABASE_EXISTS") => return Err(e.into()),
                _ => {}
            }
        }
        let tables = tables_of(app, &db.id).await?;
        for table in tables {
            let has = present.is_some_and(|names| names.contains(&table.name.as_str()));
            if table.status == "dropping" {
                finish_table_drop(app, &serving(&db, &all), &db.name, &table).await;
            } else if !has {
                tracing::info!(node = %node.node_id, table = %table.name, "reconcile: creating table");
                let Ok(definition) = serde_json::from_str::<TableDef>(&table.definition) else {
                    continue;
                };
                match app.nodes.create_table(node, &db.name, &definition).await {
                    Err(e) if e.code() != Some("TABLE_EXISTS") => return Err(e.into()),
                    _ => {}
                }
            }
        }
    }
    Ok(())
}
