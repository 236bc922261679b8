//! `information_schema` over SQL: the catalog tables drivers, ORMs and
//! SQL tools read to find databases, tables, columns and indexes, for
//! the key's databases only — another tenant's schema is not there, as it
//! is not in `SHOW DATABASES`. Served: `SCHEMATA`, `TABLES`, `COLUMNS`,
//! `STATISTICS`, `KEY_COLUMN_USAGE`, `PROCESSLIST` (the key's own
//! connections, as `SHOW PROCESSLIST`), `GLOBAL_STATUS` and
//! `SESSION_STATUS` (as `SHOW STATUS`: the tenant's counts on this node,
//! and the connection's), `GLOBAL_VARIABLES` and `SESSION_VARIABLES` (as
//! `SHOW VARIABLES`), and — empty, as Shoal has no disk
//! data files, triggers, views or stored routines — `FILES`, `TRIGGERS`,
//! `VIEWS` and `ROUTINES`, with MySQL's column names (the
//! columns that mean something for Shoal; `TABLE_ROWS` and `DATA_LENGTH`
//! as the node's memory accounting counts them). Another
//! `information_schema` table is refused, 1235; a name MySQL does not
//! have, 1109. Queries are planned and answered as every computed
//! table's are (`system`).

use shoal_wire::ndbinfo::{Column, int, text};
use shoal_wire::schema::{ColumnDef, ColumnName, ColumnType as Type, TableDef};

use std::collections::HashMap;

use super::error::MyError;
use super::session::Session;
use super::system::System;
use crate::types::TableId;
use crate::types::value::Value;

/// An `information_schema` table: its name and columns.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct InformationTable {
    pub(crate) name: &'static str,
    pub(crate) columns: &'static [Column],
}

const SCHEMATA: InformationTable = InformationTable {
    name: "SCHEMATA",
    columns: &[
        text("CATALOG_NAME"),
        text("SCHEMA_NAME"),
        text("DEFAULT_CHARACTER_SET_NAME"),
        text("DEFAULT_COLLATION_NAME"),
        text("SQL_PATH"),
    ],
};

const TABLES: InformationTable = InformationTable {
    name: "TABLES",
    columns: &[
        text("TABLE_CATALOG"),
        text("TABLE_SCHEMA"),
        text("TABLE_NAME"),
        text("TABLE_TYPE"),
        text("ENGINE"),
        int("TABLE_ROWS"),
        int("DATA_LENGTH"),
        int("AUTO_INCREMENT"),
        text("TABLE_COLLATION"),
        text("TABLE_COMMENT"),
    ],
};

const COLUMNS: InformationTable = InformationTable {
    name: "COLUMNS",
    columns: &[
        text("TABLE_CATALOG"),
        text("TABLE_SCHEMA"),
        text("TABLE_NAME"),
        text("COLUMN_NAME"),
        int("ORDINAL_POSITION"),
        text("COLUMN_DEFAULT"),
        text("IS_NULLABLE"),
        text("DATA_TYPE"),
        int("CHARACTER_MAXIMUM_LENGTH"),
        int("CHARACTER_OCTET_LENGTH"),
        int("NUMERIC_PRECISION"),
        int("NUMERIC_SCALE"),
        int("DATETIME_PRECISION"),
        text("CHARACTER_SET_NAME"),
        text("COLLATION_NAME"),
        text("COLUMN_TYPE"),
        text("COLUMN_KEY"),
        text("EXTRA"),
        text("COLUMN_COMMENT"),
        text("GENERATION_EXPRESSION"),
    ],
};

const STATISTICS: InformationTable = InformationTable {
    name: "STATISTICS",
    columns: &[
        text("TABLE_CATALOG"),
        text("TABLE_SCHEMA"),
        text("TABLE_NAME"),
        int("NON_UNIQUE"),
        text("INDEX_SCHEMA"),
        text("INDEX_NAME"),
        int("SEQ_IN_INDEX"),
        text("COLUMN_NAME"),
        text("COLLATION"),
        int("CARDINALITY"),
        text("NULLABLE"),
        text("INDEX_TYPE"),
        text("COMMENT"),
    ],
};

const KEY_COLUMN_USAGE: InformationTable = InformationTable {
    name: "KEY_COLUMN_USAGE",
    columns: &[
        text("CONSTRAINT_CATALOG"),
        text("CONSTRAINT_SCHEMA"),
        text("CONSTRAINT_NAME"),
        text("TABLE_CATALOG"),
        text("TABLE_SCHEMA"),
        text("TABLE_NAME"),
        text("COLUMN_NAME"),
        int("ORDINAL_POSITION"),
        int("POSITION_IN_UNIQUE_CONSTRAINT"),
        text("REFERENCED_TABLE_SCHEMA"),
        text("REFERENCED_TABLE_NAME"),
        text("REFERENCED_COLUMN_NAME"),
    ],
};

/// NDB's disk-data files (tablespaces, undo logs): Shoal keeps every
/// row in memory and has none, so the table is empty — as mysqldump,
/// which reads it first, expects of a server without them.
const FILES: InformationTable = InformationTable {
    name: "FILES",
    columns: &[
        int("FILE_ID"),
        text("FILE_NAME"),
        text("FILE_TYPE"),
        text("TABLESPACE_NAME"),
        text("TABLE_SCHEMA"),
        text("TABLE_NAME"),
        text("LOGFILE_GROUP_NAME"),
        int("LOGFILE_GROUP_NUMBER"),
        text("ENGINE"),
        int("TOTAL_EXTENTS"),
        int("EXTENT_SIZE"),
        int("INITIAL_SIZE"),
        int("MAXIMUM_SIZE"),
        int("AUTOEXTEND_SIZE"),
        text("STATUS"),
        text("EXTRA"),
    ],
};

/// Shoal has no triggers, views or stored routines: these are empty.
const TRIGGERS: InformationTable = InformationTable {
    name: "TRIGGERS",
    columns: &[
        text("TRIGGER_CATALOG"),
        text("TRIGGER_SCHEMA"),
        text("TRIGGER_NAME"),
        text("EVENT_MANIPULATION"),
        text("EVENT_OBJECT_CATALOG"),
        text("EVENT_OBJECT_SCHEMA"),
        text("EVENT_OBJECT_TABLE"),
        int("ACTION_ORDER"),
        text("ACTION_STATEMENT"),
        text("ACTION_TIMING"),
        text("SQL_MODE"),
        text("DEFINER"),
    ],
};

const VIEWS: InformationTable = InformationTable {
    name: "VIEWS",
    columns: &[
        text("TABLE_CATALOG"),
        text("TABLE_SCHEMA"),
        text("TABLE_NAME"),
        text("VIEW_DEFINITION"),
        text("CHECK_OPTION"),
        text("IS_UPDATABLE"),
        text("DEFINER"),
        text("SECURITY_TYPE"),
    ],
};

const ROUTINES: InformationTable = InformationTable {
    name: "ROUTINES",
    columns: &[
        text("SPECIFIC_NAME"),
        text("ROUTINE_CATALOG"),
        text("ROUTINE_SCHEMA"),
        text("ROUTINE_NAME"),
        text("ROUTINE_TYPE"),
        text("DATA_TYPE"),
        text("ROUTINE_DEFINITION"),
        text("DEFINER"),
    ],
};

const PROCESSLIST: InformationTable = InformationTable {
    name: "PROCESSLIST",
    columns: &[
        int("ID"),
        text("USER"),
        text("HOST"),
        text("DB"),
        text("COMMAND"),
        int("TIME"),
        text("STATE"),
        text("INFO"),
    ],
};

/// `GLOBAL_STATUS`, `SESSION_STATUS`, `GLOBAL_VARIABLES` and
/// `SESSION_VARIABLES`: names and values as `SHOW STATUS` and `SHOW
/// VARIABLES` list them, the names in capitals as MySQL 5.7 and MariaDB
/// write them here.
const fn named_values(name: &'static str) -> InformationTable {
    const COLUMNS: &[Column] = &[text("VARIABLE_NAME"), text("VARIABLE_VALUE")];
    InformationTable {
        name,
        columns: COLUMNS,
    }
}

const GLOBAL_STATUS: InformationTable = named_values("GLOBAL_STATUS");
const SESSION_STATUS: InformationTable = named_values("SESSION_STATUS");
const GLOBAL_VARIABLES: InformationTable = named_values("GLOBAL_VARIABLES");
const SESSION_VARIABLES: InformationTable = named_values("SESSION_VARIABLES");

const SERVED: [&InformationTable; 14] = [
    &SCHEMATA,
    &TABLES,
    &COLUMNS,
    &STATISTICS,
    &KEY_COLUMN_USAGE,
    &FILES,
    &TRIGGERS,
    &VIEWS,
    &ROUTINES,
    &PROCESSLIST,
    &GLOBAL_STATUS,
    &SESSION_STATUS,
    &GLOBAL_VARIABLES,
    &SESSION_VARIABLES,
];

/// The served tables that are always empty.
const EMPTY: [&InformationTable; 4] = [&FILES, &TRIGGERS, &VIEWS, &ROUTINES];

impl InformationTable {
    /// Whether the table never has a row.
    pub(crate) fn always_empty(&self) -> bool {
        EMPTY.contains(&self)
    }
}

/// MySQL's other `information_schema` tables: named, but not served.
const OTHERS: &[&str] = &[
    "CHARACTER_SETS",
    "CHECK_CONSTRAINTS",
    "COLLATIONS",
    "COLLATION_CHARACTER_SET_APPLICABILITY",
    "COLUMN_PRIVILEGES",
    "ENGINES",
    "EVENTS",
    "INNODB_TRX",
    "PARAMETERS",
    "PARTITIONS",
    "PLUGINS",
    "PROFILING",
    "REFERENTIAL_CONSTRAINTS",
    "SCHEMA_PRIVILEGES",
    "TABLE_CONSTRAINTS",
    "TABLE_PRIVILEGES",
    "USER_PRIVILEGES",
];

const CATALOG: &str = "def";
const CHARSET: &str = "utf8mb4";
/// Text compares byte by byte, in indexes and in statements alike.
const COLLATION: &str = "utf8mb4_bin";

/// What a table holds on this node: its fragments' replicas here, as
/// `ndbinfo.table_memory_usage` counts them.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sizes {
    pub(super) rows: u64,
    /// DataMemory allocated to it.
    pub(super) bytes: u64,
    /// Of those, free.
    pub(super) free: u64,
}

impl Session {
    /// Every table's [`Sizes`] on this node, by table id.
    pub(super) async fn table_sizes(&self) -> Result<HashMap<TableId, Sizes>, MyError> {
        let usage = (self.engine.memory_usage().await)
            .map_err(|e| MyError::new(1296, "HY000", e.to_string()))?;
        let mut sizes: HashMap<TableId, Sizes> = HashMap::new();
        for u in usage {
            let size = sizes.entry(u.table_id).or_default();
            size.rows += u.rows;
            size.bytes += u.in_memory_bytes;
            size.free += u.free_in_memory_bytes;
        }
        Ok(sizes)
    }

    /// The `information_schema` table `name`.
    pub(crate) fn information_table(&self, name: &str) -> Result<System, MyError> {
        if let Some(t) = SERVED.iter().find(|t| t.name.eq_ignore_ascii_case(name)) {
            return Ok(System::Information(t));
        }
        if OTHERS.iter().any(|t| t.eq_ignore_ascii_case(name)) {
            let names = |empty: bool| {
                (SERVED.iter())
                    .filter(|t| t.always_empty() == empty)
                    .map(|t| t.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(MyError::unsupported(format!(
                "information_schema.{} (served: {}, and {}, empty)",
                name.to_ascii_uppercase(),
                names(false),
                names(true)
            )));
        }
        Err(MyError::new(
            1109,
            "42S02",
            format!("Unknown table '{name}' in information_schema"),
        ))
    }

    /// The rows of `table` for the key's databases, as they are now.
    pub(crate) async fn information_rows(
        &self,
        table: &InformationTable,
    ) -> Result<Vec<Vec<Value>>, MyError> {
        let databases = self.granted_databases()?;
        if table.always_empty() {
            return Ok(Vec::new());
        }
        if *table == PROCESSLIST {
            let text = |t: Option<String>| t.map_or(Value::Null, Value::Text);
            return Ok((self.processes_shown().into_iter())
                .map(|p| {
                    vec![
                        Value::UInt(u64::from(p.id)),
                        Value::Text(p.user.clone()),
                        Value::Text(p.host.clone()),
                        text(p.db.clone()),
                        text_of(p.command.name()),
                        Value::UInt(p.time),
                        text_of(p.state()),
                        text(p.info),
                    ]
                })
                .collect());
        }
        let named = |(name, value): (&str, Value)| vec![text_of(&name.to_ascii_uppercase()), value];
        if *table == GLOBAL_STATUS || *table == SESSION_STATUS {
            let status = self.status_counts(*table == GLOBAL_STATUS);
            return Ok((status.variables().into_iter())
                .map(|(n, v)| named((n, Value::Text(v.to_string()))))
                .collect());
        }
        if *table == GLOBAL_VARIABLES || *table == SESSION_VARIABLES {
            return Ok((self.variables().into_iter())
                .map(|(n, v)| named((&n, v.into_text())))
                .collect());
        }
        let sizes = match *table == TABLES {
            true => self.table_sizes().await?,
            false => HashMap::new(),
        };
        if *table == SCHEMATA {
            return Ok((databases.into_iter())
                .map(|db| {
                    vec![
                        text_of(CATALOG),
                        Value::Text(db),
                        text_of(CHARSET),
                        text_of(COLLATION),
                        Value::Null,
                    ]
                })
                .collect());
        }
        let mut tables: Vec<_> = (self.engine.tables().into_iter())
            .filter(|t| databases.iter().any(|d| d == t.database.name.as_str()))
            .collect();
        tables.sort_by(|a, b| {
            (a.database.name.as_str(), a.name().as_str())
                .cmp(&(b.database.name.as_str(), b.name().as_str()))
        });
        let mut rows = Vec::new();
        for t in &tables {
            let db = t.database.name.as_str();
            let def = t.def();
            let name = def.name.as_str();
            if *table == TABLES {
                let size = sizes.get(&t.id).copied().unwrap_or_default();
                rows.push(vec![
                    text_of(CATALOG),
                    text_of(db),
                    text_of(name),
                    text_of("BASE TABLE"),
                    text_of("ndbcluster"),
                    Value::UInt(size.rows),
                    Value::UInt(size.bytes),
                    Value::Null,
                    text_of(COLLATION),
                    text_of(""),
                ]);
            } else if *table == COLUMNS {
                for (i, c) in def.columns.iter().enumerate() {
                    rows.push(column_row(db, def, i, c));
                }
            } else if *table == STATISTICS {
                for index in indexes(def) {
                    for (seq, c) in index.columns.iter().enumerate() {
                        rows.push(vec![
                            text_of(CATALOG),
                            text_of(db),
                            text_of(name),
                            Value::UInt(u64::from(!index.unique)),
                            text_of(db),
                            text_of(index.name),
                            Value::UInt(seq as u64 + 1),
                            text_of(c.as_str()),
                            text_of("A"),
                            Value::Null,
                            text_of(if nullable(def, c) { "YES" } else { "" }),
                            text_of(index.kind),
                            text_of(""),
                        ]);
                    }
                }
            } else if *table == KEY_COLUMN_USAGE {
                for index in indexes(def).filter(|x| x.unique) {
                    for (seq, c) in index.columns.iter().enumerate() {
                        rows.push(vec![
                            text_of(CATALOG),
                            text_of(db),
                            text_of(index.name),
                            text_of(CATALOG),
                            text_of(db),
                            text_of(name),
                            text_of(c.as_str()),
                            Value::UInt(seq as u64 + 1),
                            Value::Null,
                            Value::Null,
                            Value::Null,
                            Value::Null,
                        ]);
                    }
                }
            }
        }
        Ok(rows)
    }
}

fn text_of(s: &str) -> Value {
    Value::Text(s.to_owned())
}

/// An index of a table as MySQL lists them: the primary key first.
pub(crate) struct Index<'a> {
    pub(crate) name: &'a str,
    pub(crate) unique: bool,
    pub(crate) columns: &'a [ColumnName],
    /// `BTREE`, or `HASH` for a primary key that is hashed only.
    pub(crate) kind: &'static str,
}

/// The indexes of `def`, the primary key first.
pub(crate) fn indexes(def: &TableDef) -> impl Iterator<Item = Index<'_>> {
    let primary = Index {
        name: "PRIMARY",
        unique: true,
        columns: &def.primary_key,
        kind: if def.primary_key_index.is_ordered() {
            "BTREE"
        } else {
            "HASH"
        },
    };
    std::iter::once(primary).chain(def.indexes.iter().map(|x| Index {
        name: x.name.as_str(),
        unique: x.unique,
        columns: &x.columns,
        kind: "BTREE",
    }))
}

/// Whether column `c` of `def` may hold NULL.
pub(crate) fn nullable(def: &TableDef, c: &ColumnName) -> bool {
    def.columns.iter().any(|d| &d.name == c && d.nullable)
}

/// MySQL's `COLUMN_KEY` of column `i`: `PRI` in the primary key, `UNI`
/// the one column of a unique index, `MUL` first in another index.
pub(crate) fn column_key(def: &TableDef, i: usize) -> &'static str {
    let name = &def.columns[i].name;
    let mut first = def
        .indexes
        .iter()
        .filter(|x| x.columns.first() == Some(name));
    if def.primary_key.contains(name) {
        "PRI"
    } else if first.clone().any(|x| x.unique && x.columns.len() == 1) {
        "UNI"
    } else if first.next().is_some() {
        "MUL"
    } else {
        ""
    }
}

fn column_row(db: &str, def: &TableDef, i: usize, c: &ColumnDef) -> Vec<Value> {
    let num = |v: Option<u64>| v.map_or(Value::Null, Value::UInt);
    let t = c.column_type;
    let column_type = t.mysql_name();
    // The type's name without its length or sign: `varchar`, `int`.
    let data_type = column_type.split(['(', ' ']).next().unwrap_or_default();
    // Characters and bytes at most (utf8mb4: 4 a character).
    let (characters, octets) = match t {
        Type::Char(n) | Type::VarChar(n) => (Some(u64::from(n)), Some(4 * u64::from(n))),
        Type::Binary(n) | Type::VarBinary(n) => (Some(u64::from(n)), Some(u64::from(n))),
        _ => (None, None),
    };
    // Digits, and of them after the point, as MySQL counts them.
    let (precision, scale) = match t {
        Type::TinyInt { .. } | Type::Bool => (Some(3), Some(0)),
        Type::SmallInt { .. } => (Some(5), Some(0)),
        Type::MediumInt { .. } => (Some(7), Some(0)),
        Type::Int { .. } => (Some(10), Some(0)),
        Type::BigInt { unsigned } => (Some(if unsigned { 20 } else { 19 }), Some(0)),
        Type::Float => (Some(12), None),
        Type::Double => (Some(22), None),
        Type::Decimal { precision, scale } => (Some(u64::from(precision)), Some(u64::from(scale))),
        _ => (None, None),
    };
    let fsp = match t {
        Type::DateTime { fsp } | Type::Timestamp { fsp } => Some(u64::from(fsp)),
        _ => None,
    };
    let is_text = matches!(t, Type::Char(_) | Type::VarChar(_));
    let text_or_null = |s: &str| if is_text { text_of(s) } else { Value::Null };
    vec![
        text_of(CATALOG),
        text_of(db),
        text_of(def.name.as_str()),
        text_of(c.name.as_str()),
        Value::UInt(i as u64 + 1),
        c.default_text().map_or(Value::Null, Value::Text),
        text_of(if c.nullable { "YES" } else { "NO" }),
        text_of(data_type),
        num(characters),
        num(octets),
        num(precision),
        num(scale),
        num(fsp),
        text_or_null(CHARSET),
        text_or_null(COLLATION),
        Value::Text(column_type),
        text_of(column_key(def, i)),
        Value::Text(c.extra()),
        text_of(""),
        // No generated columns.
        text_of(""),
    ]
}
