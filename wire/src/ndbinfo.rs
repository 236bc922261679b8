//! The ndbinfo tables a data node exports, and the JSON shape of their rows:
//! `{"columns": [...], "rows": [[...], ...]}`.

use serde::{Deserialize, Serialize};

/// One ndbinfo table or view: its name (without the `ndbinfo.` schema),
/// its columns in order, and — for a view — how it is made from the raw
/// tables. Names and meanings are RonDB's. The data node computes every
/// table from this definition, and the control plane's SQL engine loads
/// the raw ones and defines the views from it: the one definition both use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdbinfoTable {
    pub name: &'static str,
    pub columns: &'static [Column],
    /// `None` for a raw table a data node fills from its live state.
    pub view: Option<MemoryView>,
}

/// A column and its SQL type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub ty: ColumnType,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Integer,
    Text,
}

/// A memory view as RonDB defines them: of `ndb$table_memory_usage`, the
/// largest figure of each fragment over its replicas, summed per group of
/// `ndb$table_map` columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryView {
    /// Columns of `ndb$table_map` the view groups by, first in its rows.
    pub group_by: &'static [&'static str],
}

/// An integer column.
pub const fn int(name: &'static str) -> Column {
    Column {
        name,
        ty: ColumnType::Integer,
    }
}

/// A text column.
pub const fn text(name: &'static str) -> Column {
    Column {
        name,
        ty: ColumnType::Text,
    }
}

/// The figures of `ndb$table_memory_usage` that the memory views sum.
pub const MEMORY_FIGURES: [&str; 4] = [
    "in_memory_bytes",
    "free_in_memory_bytes",
    "disk_memory_bytes",
    "free_disk_memory_bytes",
];

pub const TABLE_MAP: NdbinfoTable = NdbinfoTable {
    name: "ndb$table_map",
    columns: &[int("table_id"), text("database_name"), text("table_name")],
    view: None,
};

pub const TABLE_MEMORY_USAGE_RAW: NdbinfoTable = NdbinfoTable {
    name: "ndb$table_memory_usage",
    columns: &[
        int("table_id"),
        int("fragment_num"),
        int("nodegroup_id"),
        int("in_memory_bytes"),
        int("free_in_memory_bytes"),
        int("disk_memory_bytes"),
        int("free_disk_memory_bytes"),
        // The node holding this replica of the fragment.
        int("node_id"),
    ],
    view: None,
};

pub const TABLE_MEMORY_USAGE: NdbinfoTable = NdbinfoTable {
    name: "table_memory_usage",
    columns: &[
        text("database_name"),
        text("table_name"),
        int("in_memory_bytes"),
        int("free_in_memory_bytes"),
        int("disk_memory_bytes"),
        int("free_disk_memory_bytes"),
    ],
    view: Some(MemoryView {
        group_by: &["database_name", "table_name"],
    }),
};

pub const DATABASE_MEMORY_USAGE: NdbinfoTable = NdbinfoTable {
    name: "database_memory_usage",
    columns: &[
        text("database_name"),
        int("in_memory_bytes"),
        int("free_in_memory_bytes"),
        int("disk_memory_bytes"),
        int("free_disk_memory_bytes"),
    ],
    view: Some(MemoryView {
        group_by: &["database_name"],
    }),
};

/// The `memory_type` of DataMemory's row of `memoryusage`, as RonDB names it.
pub const DATA_MEMORY: &str = "Data memory";

pub const MEMORY_USAGE: NdbinfoTable = NdbinfoTable {
    name: "memoryusage",
    columns: &[
        int("node_id"),
        text("memory_type"),
        int("used"),
        int("total"),
        int("used_pages"),
        int("total_pages"),
    ],
    view: None,
};

/// Per database: memory against its quota, request units admitted (since
/// the node started), the rate limits (null: none), throttled requests and
/// requests refused by a quota or limit.
pub const DATABASE_QUOTA_USAGE: NdbinfoTable = NdbinfoTable {
    name: "database_quota_usage",
    columns: &[
        text("database_name"),
        int("in_memory_bytes"),
        int("in_memory_quota"),
        int("read_units"),
        int("write_units"),
        int("read_units_per_sec"),
        int("write_units_per_sec"),
        int("throttled_reads"),
        int("throttled_writes"),
        int("quota_rejections"),
    ],
    view: None,
};

/// Per table: the read and write units requests used of it since the node
/// `node_id` made it — its share of its database's counters in
/// `database_quota_usage`, counted by the same rules. `table_id` is the
/// node's id of the table (a table made again has a new one).
pub const TABLE_USAGE: NdbinfoTable = NdbinfoTable {
    name: "table_usage",
    columns: &[
        text("database_name"),
        text("table_name"),
        int("table_id"),
        int("read_units"),
        int("write_units"),
        int("node_id"),
    ],
    view: None,
};

/// The data nodes: each node's row of itself (`STARTED` once in its
/// group's view, `STARTING` while it starts or catches up; the control
/// plane adds `DOWN` for registered nodes it does not hear from), seconds
/// since it started, and how many table fragments it is the primary of.
pub const NODES: NdbinfoTable = NdbinfoTable {
    name: "nodes",
    columns: &[
        int("node_id"),
        int("node_group"),
        text("status"),
        int("uptime"),
        int("primaries"),
    ],
    view: None,
};

/// Every ndbinfo table and view a data node serves today.
pub const ALL: [NdbinfoTable; 8] = [
    TABLE_MAP,
    TABLE_MEMORY_USAGE_RAW,
    TABLE_MEMORY_USAGE,
    DATABASE_MEMORY_USAGE,
    MEMORY_USAGE,
    DATABASE_QUOTA_USAGE,
    TABLE_USAGE,
    NODES,
];

/// Looks a table up by name, with or without the `ndbinfo.` schema.
pub fn table(name: &str) -> Option<NdbinfoTable> {
    let name = name.strip_prefix("ndbinfo.").unwrap_or(name);
    ALL.into_iter().find(|t| t.name == name)
}

impl NdbinfoTable {
    pub fn column_names(&self) -> impl Iterator<Item = &'static str> + use<> {
        self.columns.iter().map(|c| c.name)
    }

    /// The SQL that makes it in schema `ndbinfo`: a table for a raw one, a
    /// view over the raw ones for a view.
    pub fn create_sql(&self) -> String {
        let Some(view) = self.view else {
            let columns: Vec<String> = (self.columns.iter())
                .map(|c| {
                    let ty = match c.ty {
                        ColumnType::Integer => "INTEGER",
                        ColumnType::Text => "TEXT",
                    };
                    format!("{} {ty}", c.name)
                })
                .collect();
            return format!(
                "CREATE TABLE ndbinfo.\"{}\" ({})",
                self.name,
                columns.join(", ")
            );
        };
        let keys: Vec<String> = view.group_by.iter().map(|c| format!("tm.{c}")).collect();
        let keys = keys.join(", ");
        let largest: Vec<String> = (MEMORY_FIGURES.iter())
            .map(|f| format!("MAX(r.{f}) AS {f}"))
            .collect();
        let sums: Vec<String> = (MEMORY_FIGURES.iter())
            .map(|f| format!("SUM(tm.{f}) AS {f}"))
            .collect();
        // A fragment's replicas (one per node of its group, each under
        // its node's own table id) are one fragment: its largest figures
        // over them, as RonDB's views take, so memory is counted once.
        format!(
            "CREATE VIEW ndbinfo.{name} AS SELECT {keys}, {sums} FROM \
             (SELECT tm.database_name, tm.table_name, r.fragment_num, {largest} \
             FROM ndbinfo.\"{raw}\" r JOIN ndbinfo.\"{map}\" tm ON tm.table_id = r.table_id \
             GROUP BY tm.database_name, tm.table_name, r.fragment_num) tm \
             GROUP BY {keys}",
            name = self.name,
            sums = sums.join(", "),
            largest = largest.join(", "),
            raw = TABLE_MEMORY_USAGE_RAW.name,
            map = TABLE_MAP.name,
        )
    }
}

/// One value of an ndbinfo row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
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
            columns: table.column_names().map(str::to_owned).collect(),
            rows: Vec::new(),
        }
    }

    /// The position of a column by name.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    /// Each row, its cells found by column name.
    pub fn records(&self) -> impl Iterator<Item = Record<'_>> {
        self.rows.iter().map(|cells| Record {
            columns: &self.columns,
            cells,
        })
    }
}

/// One row of [`Rows`], its cells found by column name.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    columns: &'a [String],
    cells: &'a [Cell],
}

impl<'a> Record<'a> {
    pub fn get(&self, column: &str) -> Option<&'a Cell> {
        let at = self.columns.iter().position(|c| c == column)?;
        self.cells.get(at)
    }

    /// A text cell's value.
    pub fn text(&self, column: &str) -> Option<&'a str> {
        match self.get(column)? {
            Cell::Text(s) => Some(s),
            _ => None,
        }
    }

    /// A number cell's value.
    pub fn uint(&self, column: &str) -> Option<u64> {
        match self.get(column)? {
            Cell::UInt(n) => Some(*n),
            _ => None,
        }
    }

    /// Every column with its cell.
    pub fn cells(&self) -> impl Iterator<Item = (&'a str, &'a Cell)> {
        self.columns.iter().map(String::as_str).zip(self.cells)
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
    fn a_view_groups_the_largest_figure_of_each_fragment() {
        let sql = DATABASE_MEMORY_USAGE.create_sql();
        assert!(sql.starts_with("CREATE VIEW ndbinfo.database_memory_usage AS SELECT tm.database_name, SUM(tm.in_memory_bytes)"), "{sql}");
        assert!(
            sql.contains("MAX(r.free_in_memory_bytes) AS free_in_memory_bytes"),
            "{sql}"
        );
        assert!(
            sql.contains("GROUP BY tm.database_name, tm.table_name, r.fragment_num"),
            "the replicas of a fragment are one: {sql}"
        );
        assert!(sql.ends_with("GROUP BY tm.database_name"), "{sql}");
        let raw = TABLE_MAP.create_sql();
        assert_eq!(
            raw,
            "CREATE TABLE ndbinfo.\"ndb$table_map\" (table_id INTEGER, database_name TEXT, table_name TEXT)"
        );
        // A view's columns are its groups, then the figures it sums.
        for t in ALL {
            if let Some(view) = t.view {
                let want: Vec<&str> = view
                    .group_by
                    .iter()
                    .copied()
                    .chain(MEMORY_FIGURES)
                    .collect();
                let map: Vec<&str> = TABLE_MAP.column_names().collect();
                assert!(view.group_by.iter().all(|c| map.contains(c)), "{}", t.name);
                assert_eq!(t.column_names().collect::<Vec<_>>(), want, "{}", t.name);
            }
        }
    }

    #[test]
    fn a_record_finds_its_cells_by_name() {
        let mut rows = Rows::new(TABLE_MAP);
        rows.rows
            .push(vec![7u32.into(), "shop".into(), "orders".into()]);
        let r = rows.records().next().unwrap();
        assert_eq!(
            (r.uint("table_id"), r.text("table_name")),
            (Some(7), Some("orders"))
        );
        assert_eq!(r.text("table_id"), None);
        assert_eq!(r.get("nope"), None);
    }

    #[test]
    fn tables_are_found_with_or_without_schema() {
        assert_eq!(table("ndbinfo.memoryusage"), Some(MEMORY_USAGE));
        assert_eq!(table("ndb$table_map"), Some(TABLE_MAP));
        assert_eq!(table("nope"), None);
    }
}
