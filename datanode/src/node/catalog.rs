//! The data node's catalog: its tenants, databases and tables by name,
//! the handles the front ends and the transaction coordinator use to
//! address them.

use std::collections::BTreeMap;
use std::sync::Arc;

use shoal_wire::schema::{DatabaseName, SchemaError, TableDef, TableName, TenantId};

use super::catalog_file::{CatalogFile, DatabaseEntry, TableEntry, TenantEntry};
use crate::ldm::NodeFailed;
use crate::tc::{Database, Table, Tenant};
use crate::types::{DatabaseId, TableId};

/// Most tables one data node holds (RonDB: 20,320 schema objects).
pub(crate) const MAX_TABLES: usize = 20_000;
/// Most databases one data node holds.
pub(crate) const MAX_DATABASES: usize = 10_000;

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
    #[error("table '{table}' already has an index '{index}'")]
    IndexExists { table: String, index: String },
    #[error("table '{table}' has no index '{index}'")]
    NoSuchIndex { table: String, index: String },
    #[error(
        "index '{index}' of table '{table}' could not be built, and is not there: {}",
        if *.quota { "its pages would pass the database's memory quota" } else { "the data node is out of DataMemory" }
    )]
    IndexNotBuilt {
        table: String,
        index: String,
        /// The memory quota stopped it, not the node's DataMemory.
        quota: bool,
    },
    /// `entry`: values two rows share, as MySQL's error 1062 writes them.
    #[error(
        "rows of table '{table}' already share the values '{entry}' of the columns of unique index '{index}': it was not added"
    )]
    UniqueDuplicates {
        table: String,
        index: String,
        entry: String,
    },
    /// The index's rows could not be read to check it: the node stopped
    /// serving meanwhile.
    #[error("index '{index}' could not be checked, and is not there: {reason}")]
    IndexNotChecked { index: String, reason: String },
    #[error("tenant '{0}' has no databases or quota on this data node")]
    NoSuchTenant(String),
    #[error("this data node holds at most {MAX_DATABASES} databases")]
    TooManyDatabases,
    #[error("this data node holds at most {MAX_TABLES} tables")]
    TooManyTables,
    #[error("invalid table: {0}")]
    Schema(#[from] SchemaError),
    #[error("invalid API key: {0}")]
    InvalidKey(#[from] super::keys::KeyDefError),
    /// The change is made in memory but could not be saved; after a restart
    /// it may be gone.
    #[error("the change could not be saved to disk: {0}")]
    NotDurable(String),
    #[error(transparent)]
    NodeFailed(#[from] NodeFailed),
}

#[derive(Debug)]
struct Entry {
    database: Arc<Database>,
    tables: BTreeMap<TableName, Arc<Table>>,
}

/// Tenants, and databases by name, each with its tables by name.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    databases: BTreeMap<DatabaseName, Entry>,
    tenants: BTreeMap<TenantId, Arc<Tenant>>,
    next_database_id: u32,
    next_table_id: u32,
    tables: usize,
}

impl Catalog {
    /// The tenant with this id, created (without limits) if it is new.
    pub(crate) fn tenant_or_new(&mut self, id: &TenantId) -> Arc<Tenant> {
        let tenant =
            (self.tenants.entry(id.clone())).or_insert_with(|| Arc::new(Tenant::new(id.clone())));
        Arc::clone(tenant)
    }

    pub(crate) fn tenant(&self, id: &str) -> Result<Arc<Tenant>, CatalogError> {
        TenantId::parse(id)
            .ok()
            .and_then(|id| self.tenants.get(&id).cloned())
            .ok_or_else(|| CatalogError::NoSuchTenant(id.to_owned()))
    }

    pub(crate) fn create_database(
        &mut self,
        name: &DatabaseName,
        tenant: Option<&TenantId>,
    ) -> Result<Arc<Database>, CatalogError> {
        // Names are unique whatever their case: `DEMO` beside another
        // tenant's `demo` would pass for it in a listing or a log.
        let folded = name.as_str().to_ascii_lowercase();
        if let Some(taken) =
            (self.databases.keys()).find(|n| n.as_str().to_ascii_lowercase() == folded)
        {
            return Err(CatalogError::DatabaseExists(taken.clone()));
        }
        if self.databases.len() >= MAX_DATABASES {
            return Err(CatalogError::TooManyDatabases);
        }
        self.next_database_id += 1;
        Ok(self.add_database(DatabaseId(self.next_database_id), name, tenant))
    }

    /// Adds a database with a known id (as the catalog file has it).
    pub(crate) fn add_database(
        &mut self,
        id: DatabaseId,
        name: &DatabaseName,
        tenant: Option<&TenantId>,
    ) -> Arc<Database> {
        let tenant = tenant.map(|t| self.tenant_or_new(t));
        let database = Arc::new(Database::new(id, name.clone(), tenant));
        let entry = Entry {
            database: Arc::clone(&database),
            tables: BTreeMap::new(),
        };
        self.databases.insert(name.clone(), entry);
        database
    }

    /// The ids to hand out next, as the catalog file has them.
    pub(crate) fn set_next_ids(&mut self, database: u32, table: u32) {
        self.next_database_id = database;
        self.next_table_id = table;
    }

    /// Everything the catalog file keeps.
    pub(crate) fn to_file(&self) -> CatalogFile {
        CatalogFile {
            next_database_id: self.next_database_id,
            next_table_id: self.next_table_id,
            tenants: self
                .tenants
                .values()
                .map(|t| TenantEntry {
                    id: t.id.clone(),
                    quota: t.quota(),
                })
                .collect(),
            databases: self
                .databases()
                .map(|db| DatabaseEntry {
                    id: db.id.0,
                    name: db.name.clone(),
                    tenant: db.tenant.as_ref().map(|t| t.id.clone()),
                    quota: db.quota(),
                    primary: Some(db.preferred_primary()).filter(|&p| p != 0),
                })
                .collect(),
            tables: self
                .tables()
                .map(|t| TableEntry {
                    id: t.id.0,
                    database: t.database.name.clone(),
                    fragments: t.fragments(),
                    def: t.def().clone(),
                })
                .collect(),
            ..CatalogFile::empty()
        }
    }

    fn entry(&self, name: &str) -> Result<&Entry, CatalogError> {
        DatabaseName::parse(name)
            .ok()
            .and_then(|n| self.databases.get(&n))
            .ok_or_else(|| CatalogError::NoSuchDatabase(name.to_owned()))
    }

    pub(crate) fn database(&self, name: &str) -> Result<Arc<Database>, CatalogError> {
        self.entry(name).map(|e| Arc::clone(&e.database))
    }

    pub(crate) fn table(&self, database: &str, table: &str) -> Result<Arc<Table>, CatalogError> {
        let no_such = || CatalogError::NoSuchTable {
            database: database.to_owned(),
            table: table.to_owned(),
        };
        let entry = self.entry(database)?;
        let name = TableName::parse(table).map_err(|_| no_such())?;
        entry.tables.get(&name).cloned().ok_or_else(no_such)
    }

    /// Checks that `def` may be added to `database`, without adding it.
    pub(crate) fn check_new_table(
        &self,
        database: &DatabaseName,
        def: &TableDef,
    ) -> Result<Arc<Database>, CatalogError> {
        def.validate()?;
        let entry = self.entry(database.as_str())?;
        if entry.tables.contains_key(&def.name) {
            return Err(CatalogError::TableExists {
                database: database.clone(),
                table: def.name.clone(),
            });
        }
        if self.tables >= MAX_TABLES {
            return Err(CatalogError::TooManyTables);
        }
        Ok(Arc::clone(&entry.database))
    }

    pub(crate) fn next_table_id(&mut self) -> TableId {
        self.next_table_id += 1;
        TableId(self.next_table_id)
    }

    /// Adds a table checked with `check_new_table`; false if its database
    /// was dropped meanwhile.
    pub(crate) fn add_table(&mut self, table: Arc<Table>) -> bool {
        let Some(entry) = self
            .databases
            .get_mut(&table.database.name)
            .filter(|e| e.database.id == table.database.id)
        else {
            return false;
        };
        entry.tables.insert(table.name().clone(), table);
        self.tables += 1;
        true
    }

    /// Puts `table` in the place of the table with its name and id (the same
    /// table with other indexes); false if it is gone.
    pub(crate) fn replace_table(&mut self, table: Arc<Table>) -> bool {
        let Some(slot) = (self.databases.get_mut(&table.database.name))
            .filter(|e| e.database.id == table.database.id)
            .and_then(|e| e.tables.get_mut(table.name()))
            .filter(|t| t.id == table.id)
        else {
            return false;
        };
        *slot = table;
        true
    }

    pub(crate) fn remove_table(
        &mut self,
        database: &str,
        table: &str,
    ) -> Result<Arc<Table>, CatalogError> {
        let found = self.table(database, table)?;
        let entry = self
            .databases
            .get_mut(&found.database.name)
            .expect("found above");
        entry.tables.remove(found.name());
        self.tables -= 1;
        Ok(found)
    }

    pub(crate) fn remove_database(
        &mut self,
        name: &str,
    ) -> Result<(Arc<Database>, Vec<Arc<Table>>), CatalogError> {
        let key = self.entry(name)?.database.name.clone();
        let entry = self.databases.remove(&key).expect("found above");
        self.tables -= entry.tables.len();
        Ok((entry.database, entry.tables.into_values().collect()))
    }

    /// Every database, in name order.
    pub(crate) fn databases(&self) -> impl Iterator<Item = &Arc<Database>> {
        self.databases.values().map(|e| &e.database)
    }

    /// Every tenant, in id order.
    pub(crate) fn tenants(&self) -> impl Iterator<Item = &Arc<Tenant>> {
        self.tenants.values()
    }

    /// Every table, in database and table name order.
    pub(crate) fn tables(&self) -> impl Iterator<Item = &Arc<Table>> {
        self.databases.values().flat_map(|e| e.tables.values())
    }
}
