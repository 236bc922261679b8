//! The data node's catalog: its databases and tables, and the handles the
//! edge uses to address a table's fragments.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use shoal_wire::schema::{DatabaseName, SchemaError, TableDef, TableName};

use crate::ldm::FragmentPlace;
use crate::storage::layout::Layout;

/// Most tables one data node holds (RonDB: 20,320 schema objects).
pub const MAX_TABLES: usize = 20_000;
/// Most databases one data node holds.
pub const MAX_DATABASES: usize = 10_000;

/// A table's id on its data node; never reused while the node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableId(pub u32);

/// A database's id on its data node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DatabaseId(pub u32);

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for DatabaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a catalog change was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("database '{0}' already exists")]
    DatabaseExists(DatabaseName),
    #[error("database '{0}' does not exist")]
    NoSuchDatabase(String),
    #[error("table '{database}.{table}' already exists")]
    TableExists {
        database: DatabaseName,
        table: TableName,
    },
    #[error("table '{database}.{table}' does not exist")]
    NoSuchTable { database: String, table: String },
    #[error("this data node holds at most {MAX_DATABASES} databases")]
    TooManyDatabases,
    #[error("this data node holds at most {MAX_TABLES} tables")]
    TooManyTables,
    #[error("invalid table: {0}")]
    Schema(#[from] SchemaError),
}

/// A table as the edge sees it: enough to encode operations for it and to
/// route them to its fragments.
#[derive(Debug)]
pub struct Table {
    pub id: TableId,
    pub database: DatabaseName,
    pub(crate) layout: Arc<Layout>,
    /// Where each fragment lives, by fragment number.
    pub(crate) fragments: Vec<FragmentPlace>,
}

impl Table {
    pub fn def(&self) -> &TableDef {
        &self.layout.def
    }

    pub fn name(&self) -> &TableName {
        &self.layout.def.name
    }

    pub fn fragments(&self) -> u16 {
        self.fragments.len() as u16
    }
}

/// Two handles are equal when they name the same table.
impl PartialEq for Table {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

#[derive(Debug)]
pub(crate) struct Database {
    pub(crate) id: DatabaseId,
    pub(crate) tables: BTreeMap<TableName, Arc<Table>>,
}

/// Databases by name, each with its tables by name.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    pub(crate) databases: BTreeMap<DatabaseName, Database>,
    next_database_id: u32,
    next_table_id: u32,
    tables: usize,
}

impl Catalog {
    pub(crate) fn create_database(
        &mut self,
        name: &DatabaseName,
    ) -> Result<DatabaseId, CatalogError> {
        if self.databases.contains_key(name) {
            return Err(CatalogError::DatabaseExists(name.clone()));
        }
        if self.databases.len() >= MAX_DATABASES {
            return Err(CatalogError::TooManyDatabases);
        }
        self.next_database_id += 1;
        let id = DatabaseId(self.next_database_id);
        self.databases.insert(
            name.clone(),
            Database {
                id,
                tables: BTreeMap::new(),
            },
        );
        Ok(id)
    }

    pub(crate) fn database(&self, name: &str) -> Result<&Database, CatalogError> {
        DatabaseName::parse(name)
            .ok()
            .and_then(|n| self.databases.get(&n))
            .ok_or_else(|| CatalogError::NoSuchDatabase(name.to_owned()))
    }

    pub(crate) fn table(&self, database: &str, table: &str) -> Result<Arc<Table>, CatalogError> {
        let no_such = || CatalogError::NoSuchTable {
            database: database.to_owned(),
            table: table.to_owned(),
        };
        let db = self.database(database)?;
        let name = TableName::parse(table).map_err(|_| no_such())?;
        db.tables.get(&name).cloned().ok_or_else(no_such)
    }

    /// Checks that `def` may be added to `database`, without adding it.
    pub(crate) fn check_new_table(
        &self,
        database: &DatabaseName,
        def: &TableDef,
    ) -> Result<(), CatalogError> {
        def.validate()?;
        let db = self.database(database.as_str())?;
        if db.tables.contains_key(&def.name) {
            return Err(CatalogError::TableExists {
                database: database.clone(),
                table: def.name.clone(),
            });
        }
        if self.tables >= MAX_TABLES {
            return Err(CatalogError::TooManyTables);
        }
        Ok(())
    }

    pub(crate) fn next_table_id(&mut self) -> TableId {
        self.next_table_id += 1;
        TableId(self.next_table_id)
    }

    /// Adds a table checked with `check_new_table`.
    pub(crate) fn add_table(&mut self, table: Arc<Table>) {
        let db = self
            .databases
            .get_mut(&table.database)
            .expect("checked database");
        db.tables.insert(table.name().clone(), table);
        self.tables += 1;
    }

    pub(crate) fn remove_table(
        &mut self,
        database: &str,
        table: &str,
    ) -> Result<Arc<Table>, CatalogError> {
        let found = self.table(database, table)?;
        let db = self
            .databases
            .get_mut(&found.database)
            .expect("found above");
        db.tables.remove(found.name());
        self.tables -= 1;
        Ok(found)
    }

    pub(crate) fn remove_database(&mut self, name: &str) -> Result<Vec<Arc<Table>>, CatalogError> {
        let key = self
            .database(name)
            .map(|_| DatabaseName::parse(name).expect("found by this name"))?;
        let db = self.databases.remove(&key).expect("found above");
        self.tables -= db.tables.len();
        Ok(db.tables.into_values().collect())
    }

    /// Every table, with its database, in name order.
    pub(crate) fn tables(&self) -> impl Iterator<Item = &Arc<Table>> {
        self.databases.values().flat_map(|db| db.tables.values())
    }
}
