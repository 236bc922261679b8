//! `ndbinfo` over SQL: the memory and usage tables RonDB users query from
//! the `mysql` client (`SELECT * FROM ndbinfo.table_memory_usage`), as
//! the data node computes them now, scoped to the caller: a key sees the
//! rows of the databases it is granted, nothing of anyone else's.
//!
//! The tables with a row per database or table are served
//! (`table_memory_usage`, `database_memory_usage`, `database_quota_usage`,
//! `table_usage`); the node-wide ones (`memoryusage`, `nodes`, the raw
//! `ndb$` tables) are the operators', through the control plane, and a key
//! is refused them (1142). Queries of them are planned and answered as
//! every computed table's are (`system`).

use std::collections::HashMap;

use shoal_wire::ndbinfo::{self, Cell as NdbCell, NdbinfoTable};

use super::error::MyError;
use super::session::Session;
use super::system::System;
use crate::types::value::Value;

/// The ndbinfo tables a key may read.
const SERVED: [NdbinfoTable; 4] = [
    ndbinfo::TABLE_MEMORY_USAGE,
    ndbinfo::DATABASE_MEMORY_USAGE,
    ndbinfo::DATABASE_QUOTA_USAGE,
    ndbinfo::TABLE_USAGE,
];

fn value_of(cell: &NdbCell) -> Value {
    match cell {
        NdbCell::Null => Value::Null,
        NdbCell::UInt(v) => Value::UInt(*v),
        NdbCell::Text(t) => Value::Text(t.clone()),
    }
}

impl Session {
    /// The ndbinfo table `name`, if the key may read it.
    pub(crate) fn ndbinfo_table(&self, name: &str) -> Result<System, MyError> {
        let lower = name.to_ascii_lowercase();
        let Some(table) = ndbinfo::table(&lower) else {
            return Err(MyError::no_table("ndbinfo", name));
        };
        if !SERVED.contains(&table) {
            return Err(MyError::denied_command("SELECT", &self.user, name));
        }
        Ok(System::Ndbinfo(table))
    }

    /// The rows of ndbinfo table `table` of the key's databases.
    pub(crate) async fn ndbinfo_rows(
        &self,
        table: NdbinfoTable,
    ) -> Result<Vec<Vec<Value>>, MyError> {
        let rows = crate::node::ndbinfo::rows(&self.engine, table, 0)
            .await
            .map_err(|e| MyError::new(1296, "HY000", e.to_string()))?;
        let db_column = rows
            .column("database_name")
            .expect("a table served has one");
        // Each database named once: is it one of the key's?
        let mut granted: HashMap<String, bool> = HashMap::new();
        let mut found = Vec::new();
        for cells in &rows.rows {
            let NdbCell::Text(db) = &cells[db_column] else {
                continue;
            };
            let mine = *granted
                .entry(db.clone())
                .or_insert_with(|| self.grant(db).is_ok());
            if mine {
                found.push(cells.iter().map(value_of).collect());
            }
        }
        Ok(found)
    }
}
