//! The ndbinfo tables a data node exports, and the JSON shape of their rows:
//! `{"columns": [...], "rows": [[...], ...]}`.

use serde::{Deserialize, Serialize};

/// One ndbinfo table or view: its name (without the `ndbinfo.` schema) and
/// its columns in order. Names and meanings are RonDB's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdbinfoTable {
    pub name: &'static str,
    pub columns: &'static [&'static str],
}

pub const TABLE_MAP: NdbinfoTable = NdbinfoTable {
    name: "ndb$table_map",
    columns: &["table_id", "database_name", "table_name"],
};

pub const TABLE_MEMORY_USAGE_RAW: NdbinfoTable = NdbinfoTable {
    name: "ndb$table_memory_usage",
    columns: &[
        "table_id",
        "fragment_num",
        "nodegroup_id",
        "in_memory_bytes",
        "free_in_memory_bytes",
        "disk_memory_bytes",
        "free_disk_memory_bytes",
    ],
};

pub const TABLE_MEMORY_USAGE: NdbinfoTable = NdbinfoTable {
    name: "table_memory_usage",
    columns: &[
        "database_name",
        "table_name",
        "in_memory_bytes",
        "free_in_memory_bytes",
        "disk_memory_bytes",
        "free_disk_memory_bytes",
    ],
};

pub const DATABASE_MEMORY_USAGE: NdbinfoTable = NdbinfoTable {
    name: "database_memory_usage",
    columns: &[
        "database_name",
        "in_memory_bytes",
        "free_in_memory_bytes",
        "disk_memory_bytes",
        "free_disk_memory_bytes",
    ],
};

pub const MEMORY_USAGE: NdbinfoTable = NdbinfoTable {
    name: "memoryusage",
    columns: &[
        "node_id",
        "memory_type",
        "used",
        "total",
        "used_pages",
        "total_pages",
    ],
};

/// Per database: memory against its quota, request units admitted (since
/// the node started), the rate limits (null: none), throttled requests and
/// requests refused by a quota or limit.
pub const DATABASE_QUOTA_USAGE: NdbinfoTable = NdbinfoTable {
    name: "database_quota_usage",
    columns: &[
        "database_name",
        "in_memory_bytes",
        "in_memory_quota",
        "read_units",
        "write_units",
        "read_units_per_sec",
        "write_units_per_sec",
        "throttled_reads",
        "throttled_writes",
        "quota_rejections",
    ],
};

/// Every ndbinfo table and view a data node serves today.
pub const ALL: [NdbinfoTable; 6] = [
    TABLE_MAP,
    TABLE_MEMORY_USAGE_RAW,
    TABLE_MEMORY_USAGE,
    DATABASE_MEMORY_USAGE,
    MEMORY_USAGE,
    DATABASE_QUOTA_USAGE,
];

/// Looks a table up by name, with or without the `ndbinfo.` schema.
pub fn table(name: &str) -> Option<NdbinfoTable> {
    let name = name.strip_prefix("ndbinfo.").unwrap_or(name);
    ALL.into_iter().find(|t| t.name == name)
}

/// One value of an ndbinfo row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Cell {
    Null,
    UInt(u64),
    Text(String),
}

impl From<u64> for Cell {
    fn from(v: u64) -> Self {
        Cell::UInt(v)
    }
}

impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(v: Option<T>) -> Self {
        v.map_or(Cell::Null, Into::into)
    }
}

impl From<u32> for Cell {
    fn from(v: u32) -> Self {
        Cell::UInt(v.into())
    }
}

impl From<&str> for Cell {
    fn from(v: &str) -> Self {
        Cell::Text(v.to_owned())
    }
}

impl From<String> for Cell {
    fn from(v: String) -> Self {
        Cell::Text(v)
    }
}

/// The rows of one ndbinfo table, as they travel on the internal API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

impl Rows {
    /// An empty result with the columns of `table`.
    pub fn new(table: NdbinfoTable) -> Self {
        Rows {
            columns: table.columns.iter().map(|c| (*c).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// The position of a column by name.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_travel_as_columns_and_arrays() {
        let mut rows = Rows::new(TABLE_MAP);
        rows.rows
            .push(vec![7u32.into(), "shop".into(), "orders".into()]);
        let json = serde_json::to_string(&rows).unwrap();
        assert_eq!(
            json,
            r#"{"columns":["table_id","database_name","table_name"],"rows":[[7,"shop","orders"]]}"#
        );
        assert_eq!(serde_json::from_str::<Rows>(&json).unwrap(), rows);
    }

    #[test]
    fn tables_are_found_with_or_without_schema() {
        assert_eq!(table("ndbinfo.memoryusage"), Some(MEMORY_USAGE));
        assert_eq!(table("ndb$table_map"), Some(TABLE_MAP));
        assert_eq!(table("nope"), None);
    }
}
