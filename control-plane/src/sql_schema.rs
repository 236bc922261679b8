//! Changes of schema that SQL clients make over the MySQL protocol
//! (`CREATE TABLE`, `CREATE INDEX`, `DROP …`, `TRUNCATE`): the data node
//! the client is connected to asks here, on the client's API key, and the
//! change is made exactly as the console's — checked, counted against the
//! tenant's and database's quotas, audited (as the key), and made on every
//! node of the database's group. The answer is the API's for the same
//! change, which the node turns into MySQL's errors.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use shoal_wire::internal::{SchemaChange, SqlSchemaChange};

use crate::databases;
use crate::error::ApiError;
use crate::keys;
use crate::server::{App, Body, Path};

/// `POST /internal/v1/sql/schema` (cluster secret).
pub async fn change(
    State(app): State<Arc<App>>,
    Json(asked): Json<SqlSchemaChange>,
) -> Result<Response, ApiError> {
    let caller = keys::sql_caller(&app, &asked.key, &asked.database).await?;
    let db = asked.database.to_string();
    let answer = match asked.change {
        SchemaChange::CreateTable { table } => {
            databases::create_table(State(app), caller, Path(db), Body(table))
                .await?
                .into_response()
        }
        SchemaChange::DropTable { table } => {
            databases::drop_table(State(app), caller, Path((db, table.to_string())))
                .await?
                .into_response()
        }
        SchemaChange::AddIndex { table, index } => databases::add_index(
            State(app),
            caller,
            Path((db, table.to_string())),
            Body(index),
        )
        .await?
        .into_response(),
        SchemaChange::DropIndex { table, index } => databases::drop_index(
            State(app),
            caller,
            Path((db, table.to_string(), index.to_string())),
        )
        .await?
        .into_response(),
        SchemaChange::Truncate { table } => {
            // As NDB truncates: the table dropped and made again, empty,
            // with the definition it had.
            let found = databases::find(&app, &caller, &db).await?;
            let def = databases::definition_of(&app, &found, table.as_str()).await?;
            databases::drop_table(
                State(Arc::clone(&app)),
                caller.clone(),
                Path((db.clone(), table.to_string())),
            )
            .await?;
            databases::create_table(State(app), caller, Path(db), Body(def))
                .await?
                .into_response()
        }
    };
    Ok(answer)
}
