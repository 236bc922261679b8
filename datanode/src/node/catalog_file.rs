//! The catalog file, `<data-dir>/catalog.json`: every tenant, database,
//! table and quota of the node, and the ids it will hand out next. It is
//! replaced as a whole, durably, on every change, before the change is
//! acknowledged; data in the redo log and checkpoints names tables by id, so
//! records of a dropped table are simply not replayed.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use shoal_quota::Quota;
use shoal_wire::schema::{DatabaseName, TableDef, TenantId};

use super::keys::KeyDef;
use crate::log::io::Storage;

/// File name of the catalog in the data directory.
pub(crate) const FILE: &str = "catalog.json";
const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CatalogFile {
    pub version: u32,
    pub next_database_id: u32,
    pub next_table_id: u32,
    pub tenants: Vec<TenantEntry>,
    pub databases: Vec<DatabaseEntry>,
    pub tables: Vec<TableEntry>,
    #[serde(default)]
    pub api_keys: Vec<KeyDef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TenantEntry {
    pub id: TenantId,
    pub quota: Quota,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DatabaseEntry {
    pub id: u32,
    pub name: DatabaseName,
    pub tenant: Option<TenantId>,
    pub quota: Quota,
    /// The node of its group that is its primary while it is up; none for a
    /// database this node holds alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TableEntry {
    pub id: u32,
    pub database: DatabaseName,
    pub fragments: u16,
    pub def: TableDef,
}

impl CatalogFile {
    pub(crate) fn empty() -> CatalogFile {
        CatalogFile {
            version: VERSION,
            next_database_id: 0,
            next_table_id: 0,
            tenants: Vec::new(),
            databases: Vec::new(),
            tables: Vec::new(),
            api_keys: Vec::new(),
        }
    }
}

/// Where the catalog is kept.
#[derive(Debug, Clone)]
pub(crate) struct CatalogStore {
    storage: Arc<dyn Storage>,
    path: PathBuf,
}

impl CatalogStore {
    pub(crate) fn new(storage: Arc<dyn Storage>, data_dir: &std::path::Path) -> CatalogStore {
        CatalogStore {
            storage,
            path: data_dir.join(FILE),
        }
    }

    /// The catalog as last saved, or `None` on a node that never saved one.
    pub(crate) fn load(&self) -> Result<Option<CatalogFile>, String> {
        if !self.storage.exists(&self.path) {
            return Ok(None);
        }
        let bytes = self
            .storage
            .read(&self.path)
            .map_err(|e| format!("reading {}: {e}", self.path.display()))?;
        let file: CatalogFile = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not a catalog: {e}", self.path.display()))?;
        if file.version != VERSION {
            return Err(format!(
                "{} is catalog version {}, this node reads {VERSION}",
                self.path.display(),
                file.version
            ));
        }
        Ok(Some(file))
    }

    /// Replaces the saved catalog, durably.
    pub(crate) fn save(&self, file: &CatalogFile) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(file).expect("a catalog serializes");
        self.storage.write_atomic(&self.path, &bytes)
    }
}
