//! Table definitions as users declare them, and the rules that make one valid.
//!
//! Everything here is checked once at the edge (`parse`, [`TableDef::validate`]);
//! code further in may rely on a validated definition.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Longest database, table or column name, in bytes.
pub const MAX_NAME_LEN: usize = 63;
/// Most columns a table may have (RonDB allows 512 attributes).
pub const MAX_COLUMNS: usize = 512;
/// Most columns in a primary key.
pub const MAX_KEY_COLUMNS: usize = 16;
/// Largest declared primary key, in stored bytes.
pub const MAX_KEY_BYTES: usize = 3072;
/// Most ordered indexes on a table, besides its primary key's (RonDB allows 64
/// indexes of every kind).
pub const MAX_INDEXES: usize = 32;
/// The name of the ordered index every table has on its primary key.
pub const PRIMARY_INDEX: &str = "PRIMARY";
/// Largest declared row, in stored bytes (RonDB's limit for in-memory rows).
pub const MAX_ROW_BYTES: usize = 30_000;
/// Longest `CHAR(n)` / `BINARY(n)`.
pub const MAX_FIXED_LEN: u16 = 255;
/// Longest `VARCHAR(n)` (characters) / `VARBINARY(n)` (bytes) as a type; the
/// row limit usually binds first.
pub const MAX_VAR_LEN: u16 = 30_000;
/// Most digits of a `DECIMAL`.
pub const MAX_DECIMAL_PRECISION: u8 = 38;
/// Most digits after the point of a `DECIMAL`.
pub const MAX_DECIMAL_SCALE: u8 = 30;
/// Most fractional-second digits of `DATETIME(fsp)` / `TIMESTAMP(fsp)`.
pub const MAX_FSP: u8 = 6;

/// Database names a user may not take: the system schemas of MySQL and RonDB.
const RESERVED_DATABASES: [&str; 5] = [
    "ndbinfo",
    "mysql",
    "sys",
    "information_schema",
    "performance_schema",
];

/// Why a name, a type or a table definition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("{kind} name must not be empty")]
    EmptyName { kind: &'static str },
    #[error("{kind} name '{name}' is longer than {MAX_NAME_LEN} bytes")]
    NameTooLong { kind: &'static str, name: String },
    #[error(
        "{kind} name '{name}' is not allowed: use letters, digits and '_', starting with a letter or '_'"
    )]
    BadName { kind: &'static str, name: String },
    #[error("database name '{0}' is reserved")]
    ReservedName(String),
    #[error("unknown column type '{0}'")]
    UnknownType(String),
    #[error("column type '{ty}': {problem}")]
    BadTypeArgument { ty: String, problem: String },
    #[error("a table needs at least one column")]
    NoColumns,
    #[error("a table has at most {MAX_COLUMNS} columns, this one has {0}")]
    TooManyColumns(usize),
    #[error("column '{0}' is declared twice (names are compared without case)")]
    DuplicateColumn(String),
    #[error("a table needs a primary key")]
    NoPrimaryKey,
    #[error("a primary key has at most {MAX_KEY_COLUMNS} columns, this one has {0}")]
    TooManyKeyColumns(usize),
    #[error("primary key column '{0}' is not a column of the table")]
    UnknownKeyColumn(String),
    #[error("primary key names column '{0}' twice")]
    DuplicateKeyColumn(String),
    #[error("primary key column '{0}' cannot be nullable")]
    NullableKeyColumn(String),
    #[error("primary key column '{0}' takes no default: every row gives its key")]
    KeyColumnDefault(String),
    #[error("column '{column}': default {problem}")]
    BadDefault { column: String, problem: String },
    #[error("the primary key can take {0} bytes, more than the maximum {MAX_KEY_BYTES}")]
    KeyTooLarge(usize),
    #[error("a row can take {0} bytes, more than the maximum {MAX_ROW_BYTES}")]
    RowTooLarge(usize),
    #[error("a table has at most {MAX_INDEXES} indexes besides its primary key, this one has {0}")]
    TooManyIndexes(usize),
    #[error("index '{0}' is declared twice (names are compared without case)")]
    DuplicateIndex(String),
    #[error("index name '{PRIMARY_INDEX}' is the primary key's")]
    ReservedIndexName,
    #[error("index '{0}' needs at least one column")]
    NoIndexColumns(String),
    #[error("index '{index}' has at most {MAX_KEY_COLUMNS} columns, this one has {count}")]
    TooManyIndexColumns { index: String, count: usize },
    #[error("index '{index}' names column '{column}', which is not a column of the table")]
    UnknownIndexColumn { index: String, column: String },
    #[error("index '{index}' names column '{column}' twice")]
    DuplicateIndexColumn { index: String, column: String },
    #[error("index '{index}' can take {bytes} bytes of key, more than the maximum {MAX_KEY_BYTES}")]
    IndexKeyTooLarge { index: String, bytes: usize },
    #[error(
        "column '{0}': AUTO_INCREMENT is for one integer column per table, the first of its primary key, without a default"
    )]
    BadAutoIncrement(String),
    #[error(
        "column '{0}': on_update CURRENT_TIMESTAMP is for a DATETIME or TIMESTAMP column whose default is CURRENT_TIMESTAMP"
    )]
    BadOnUpdate(String),
    #[error(
        "unique index '{index}' names column '{column}', whose default is CURRENT_TIMESTAMP without on_update: not supported"
    )]
    UniqueTimeDefault { index: String, column: String },
}

/// Checks an identifier: 1 to [`MAX_NAME_LEN`] bytes of `[A-Za-z0-9_]`, not
/// starting with a digit. Names are case-sensitive.
fn check_identifier(kind: &'static str, name: &str) -> Result<(), SchemaError> {
    let Some(first) = name.bytes().next() else {
        return Err(SchemaError::EmptyName { kind });
    };
    if name.len() > MAX_NAME_LEN {
        return Err(SchemaError::NameTooLong {
            kind,
            name: name.chars().take(MAX_NAME_LEN).collect::<String>() + "…",
        });
    }
    let ok_first = first.is_ascii_alphabetic() || first == b'_';
    let ok_rest = name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !(ok_first && ok_rest) {
        return Err(SchemaError::BadName {
            kind,
            name: name.to_owned(),
        });
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $extra_check:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Parses a name, refusing anything the rules do not allow.
            pub fn parse(name: &str) -> Result<Self, SchemaError> {
                check_identifier($kind, name)?;
                let extra: fn(&str) -> Result<(), SchemaError> = $extra_check;
                extra(name)?;
                Ok(Self(name.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = SchemaError;
            fn from_str(s: &str) -> Result<Self, SchemaError> {
                Self::parse(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = SchemaError;
            fn try_from(s: String) -> Result<Self, SchemaError> {
                Self::parse(&s)
            }
        }

        impl From<$name> for String {
            fn from(n: $name) -> String {
                n.0
            }
        }
    };
}

name_type!(
    /// A database name: an identifier that is not one of the system schemas.
    DatabaseName,
    "database",
    |name| {
        if RESERVED_DATABASES.iter().any(|r| r.eq_ignore_ascii_case(name)) {
            return Err(SchemaError::ReservedName(name.to_owned()));
        }
        Ok(())
    }
);
name_type!(
    /// A table name, unique within its database.
    TableName,
    "table",
    |_| Ok(())
);
name_type!(
    /// An index name, unique within its table without regard to case.
    IndexName,
    "index",
    |_| Ok(())
);
name_type!(
    /// A column name, unique within its table without regard to case.
    ColumnName,
    "column",
    |_| Ok(())
);

/// The id of a tenant, as the control plane names it: 1 to 64 characters of
/// `A-Z a-z 0-9 _ -` (a UUID fits).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TenantId(String);

impl TenantId {
    pub fn parse(id: &str) -> Result<Self, SchemaError> {
        let ok = (1..=64).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !ok {
            return Err(SchemaError::BadName {
                kind: "tenant",
                name: id.chars().take(70).collect(),
            });
        }
        Ok(TenantId(id.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for TenantId {
    type Error = SchemaError;
    fn try_from(s: String) -> Result<Self, SchemaError> {
        Self::parse(&s)
    }
}

impl From<TenantId> for String {
    fn from(t: TenantId) -> String {
        t.0
    }
}

/// A column's type. Written and read as SQL type names: `"BIGINT UNSIGNED"`,
/// `"VARCHAR(100)"`, `"DECIMAL(10,2)"`, `"DATETIME(3)"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ColumnType {
    TinyInt {
        unsigned: bool,
    },
    SmallInt {
        unsigned: bool,
    },
    MediumInt {
        unsigned: bool,
    },
    Int {
        unsigned: bool,
    },
    BigInt {
        unsigned: bool,
    },
    Float,
    Double,
    /// `precision` digits in all, `scale` of them after the point.
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// Up to `n` characters, trailing spaces not significant.
    Char(u16),
    /// Up to `n` characters.
    VarChar(u16),
    /// Exactly `n` bytes, shorter values padded with zero bytes.
    Binary(u16),
    /// Up to `n` bytes.
    VarBinary(u16),
    Date,
    DateTime {
        fsp: u8,
    },
    Timestamp {
        fsp: u8,
    },
    Bool,
}

impl ColumnType {
    /// An integer of any width, signed or not (not BOOL).
    pub fn is_integer(self) -> bool {
        use ColumnType::*;
        matches!(
            self,
            TinyInt { .. } | SmallInt { .. } | MediumInt { .. } | Int { .. } | BigInt { .. }
        )
    }

    /// Bytes a value takes in the fixed part of a row, or `None` for a column
    /// stored in the variable part.
    pub fn fixed_size(self) -> Option<usize> {
        use ColumnType::*;
        Some(match self {
            TinyInt { .. } | Bool => 1,
            SmallInt { .. } => 2,
            MediumInt { .. } => 3,
            Int { .. } | Float | Date => 4,
            BigInt { .. } | Double | DateTime { .. } | Timestamp { .. } => 8,
            Decimal { precision, .. } => decimal_size(precision),
            // utf8mb4: up to four bytes a character, as MySQL reserves.
            Char(n) => 4 * n as usize,
            Binary(n) => n as usize,
            VarChar(_) | VarBinary(_) => return None,
        })
    }

    /// Most bytes a value can take in a row: its fixed size, or for a variable
    /// column its longest value plus its two-byte length.
    pub fn max_size(self) -> usize {
        match self {
            ColumnType::VarChar(n) => 4 * n as usize + 2,
            ColumnType::VarBinary(n) => n as usize + 2,
            fixed => fixed.fixed_size().unwrap_or(0),
        }
    }

    pub fn is_variable(self) -> bool {
        self.fixed_size().is_none()
    }
}

/// Stored bytes of a `DECIMAL(p, s)`: an 8-byte mantissa up to 18 digits, 16
/// bytes beyond.
fn decimal_size(precision: u8) -> usize {
    if precision <= 18 { 8 } else { 16 }
}

impl ColumnType {
    /// The type as MySQL names it (`SHOW CREATE TABLE`, `SHOW COLUMNS`,
    /// `information_schema.COLUMNS.COLUMN_TYPE`): in lower case, a BOOL as
    /// the `tinyint(1)` it is.
    pub fn mysql_name(self) -> String {
        match self {
            ColumnType::Bool => "tinyint(1)".to_owned(),
            t => t.to_string().to_ascii_lowercase(),
        }
    }

    /// Whether it is a DATETIME or a TIMESTAMP.
    pub fn is_date_time(self) -> bool {
        matches!(
            self,
            ColumnType::DateTime { .. } | ColumnType::Timestamp { .. }
        )
    }

    /// Whether it holds bytes rather than text.
    pub fn is_binary(self) -> bool {
        matches!(self, ColumnType::Binary(_) | ColumnType::VarBinary(_))
    }
}

/// What a column's default is, as MySQL shows it.
enum Shown {
    Text(String),
    Bytes(Vec<u8>),
    /// `CURRENT_TIMESTAMP[(fsp)]`, a function rather than a literal.
    Now(String),
}

impl ColumnDef {
    /// Whether the column's default is the time of the write: a DATETIME
    /// or TIMESTAMP column whose default is [`CURRENT_TIMESTAMP`].
    pub fn defaults_to_now(&self) -> bool {
        self.column_type.is_date_time()
            && self.default.as_ref().and_then(|d| d.as_str()) == Some(CURRENT_TIMESTAMP)
    }

    /// `CURRENT_TIMESTAMP` as MySQL writes it for this column: with the
    /// column's fractional-second digits if it has any.
    fn now_text(&self) -> String {
        match self.column_type {
            ColumnType::DateTime { fsp } | ColumnType::Timestamp { fsp } if fsp > 0 => {
                format!("{CURRENT_TIMESTAMP}({fsp})")
            }
            _ => CURRENT_TIMESTAMP.to_owned(),
        }
    }

    /// What MySQL 8.0 lists as the column's `Extra` (`SHOW COLUMNS`,
    /// `information_schema.COLUMNS.EXTRA`).
    pub fn extra(&self) -> String {
        if self.auto_increment {
            "auto_increment".to_owned()
        } else if !self.defaults_to_now() {
            String::new()
        } else if self.on_update.is_some() {
            format!("DEFAULT_GENERATED on update {}", self.now_text())
        } else {
            "DEFAULT_GENERATED".to_owned()
        }
    }

    /// The default's value as MySQL shows it: a boolean as 1 or 0, bytes
    /// (kept as base64, as the data API takes them) as themselves.
    fn shown_default(&self) -> Option<Shown> {
        use serde_json::Value as Json;
        if self.defaults_to_now() {
            return Some(Shown::Now(self.now_text()));
        }
        Some(match self.default.as_ref()? {
            Json::Null => return None,
            Json::Bool(b) => Shown::Text(if *b { "1" } else { "0" }.to_owned()),
            Json::String(s) if self.column_type.is_binary() => {
                use base64::Engine as _;
                match base64::engine::general_purpose::STANDARD.decode(s) {
                    Ok(bytes) => Shown::Bytes(bytes),
                    // Never stored: a default is checked when it is set.
                    Err(_) => Shown::Text(s.clone()),
                }
            }
            Json::String(s) => Shown::Text(s.clone()),
            other => Shown::Text(other.to_string()),
        })
    }

    /// The default as MySQL lists it (`SHOW COLUMNS`, `COLUMN_DEFAULT`):
    /// its text, bytes in hex (`0x0A`); None if there is none.
    pub fn default_text(&self) -> Option<String> {
        Some(match self.shown_default()? {
            Shown::Text(t) | Shown::Now(t) => t,
            Shown::Bytes(b) if b.is_empty() => String::new(),
            Shown::Bytes(b) => hex_literal(&b),
        })
    }

    /// The column's `DEFAULT` clause as `SHOW CREATE TABLE` writes it: a
    /// quoted literal (numbers too, as MySQL quotes them), bytes as a hex
    /// literal, `DEFAULT NULL` for a nullable column with none; empty for
    /// a NOT NULL column with none; `DEFAULT CURRENT_TIMESTAMP` unquoted,
    /// with its `ON UPDATE`. Read back, it gives the same default.
    pub fn default_clause(&self) -> String {
        match self.shown_default() {
            Some(Shown::Now(now)) => match self.on_update {
                Some(OnUpdate::CurrentTimestamp) => format!(" DEFAULT {now} ON UPDATE {now}"),
                None => format!(" DEFAULT {now}"),
            },
            Some(Shown::Text(t)) => format!(" DEFAULT {}", quoted(&t)),
            Some(Shown::Bytes(b)) => format!(" DEFAULT {}", hex_literal(&b)),
            None if self.nullable => " DEFAULT NULL".to_owned(),
            None => String::new(),
        }
    }
}

/// `text` as a MySQL string literal, escaped as MySQL escapes what it
/// writes (`append_unescaped`).
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\0' => out.push_str("\\0"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\x1a' => out.push_str("\\Z"),
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Bytes as MySQL's hex literal: `0x0AFF` (`''` for none: `0x` alone is
/// not a literal).
fn hex_literal(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "''".to_owned();
    }
    format!("0x{}", crate::apikey::hex(bytes).to_ascii_uppercase())
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ColumnType::*;
        let int = |f: &mut fmt::Formatter<'_>, name: &str, unsigned: bool| {
            f.write_str(name)?;
            if unsigned {
                f.write_str(" UNSIGNED")?;
            }
            Ok(())
        };
        let fsp = |f: &mut fmt::Formatter<'_>, name: &str, fsp: u8| {
            if fsp == 0 {
                f.write_str(name)
            } else {
                write!(f, "{name}({fsp})")
            }
        };
        match *self {
            TinyInt { unsigned } => int(f, "TINYINT", unsigned),
            SmallInt { unsigned } => int(f, "SMALLINT", unsigned),
            MediumInt { unsigned } => int(f, "MEDIUMINT", unsigned),
            Int { unsigned } => int(f, "INT", unsigned),
            BigInt { unsigned } => int(f, "BIGINT", unsigned),
            Float => f.write_str("FLOAT"),
            Double => f.write_str("DOUBLE"),
            Decimal { precision, scale } => write!(f, "DECIMAL({precision},{scale})"),
            Char(n) => write!(f, "CHAR({n})"),
            VarChar(n) => write!(f, "VARCHAR({n})"),
            Binary(n) => write!(f, "BINARY({n})"),
            VarBinary(n) => write!(f, "VARBINARY({n})"),
            Date => f.write_str("DATE"),
            DateTime { fsp: p } => fsp(f, "DATETIME", p),
            Timestamp { fsp: p } => fsp(f, "TIMESTAMP", p),
            Bool => f.write_str("BOOL"),
        }
    }
}

impl FromStr for ColumnType {
    type Err = SchemaError;

    fn from_str(text: &str) -> Result<Self, SchemaError> {
        let upper = text.trim().to_ascii_uppercase();
        let bad = |problem: &str| SchemaError::BadTypeArgument {
            ty: text.trim().to_owned(),
            problem: problem.to_owned(),
        };
        // Split "NAME(args) UNSIGNED" into its name, its arguments and the
        // word after them.
        let (name, args, rest) = match upper.find('(') {
            Some(open) => {
                let close = upper[open..]
                    .find(')')
                    .map(|c| open + c)
                    .ok_or_else(|| bad("missing ')'"))?;
                (
                    upper[..open].trim(),
                    Some(&upper[open + 1..close]),
                    upper[close + 1..].trim(),
                )
            }
            None => {
                let mut words = upper.splitn(2, char::is_whitespace);
                let name = words.next().unwrap_or("");
                (name, None, words.next().unwrap_or("").trim())
            }
        };
        let unsigned = match rest {
            "" => false,
            "UNSIGNED" => true,
            _ => return Err(SchemaError::UnknownType(text.trim().to_owned())),
        };
        let numbers: Vec<u32> = match args {
            None => Vec::new(),
            Some(a) => a
                .split(',')
                .map(|n| {
                    n.trim()
                        .parse::<u32>()
                        .map_err(|_| bad("arguments must be whole numbers"))
                })
                .collect::<Result<_, _>>()?,
        };
        let arg_count = |allowed: &[usize]| {
            if allowed.contains(&numbers.len()) {
                Ok(())
            } else {
                Err(bad("wrong number of arguments"))
            }
        };
        let is_int = matches!(
            name,
            "TINYINT" | "SMALLINT" | "MEDIUMINT" | "INT" | "INTEGER" | "BIGINT"
        );
        if unsigned && !is_int {
            return Err(bad("only integer types can be UNSIGNED"));
        }
        let length = |max: u16| -> Result<u16, SchemaError> {
            arg_count(&[1])?;
            match u16::try_from(numbers[0]) {
                Ok(n) if (1..=max).contains(&n) => Ok(n),
                _ => Err(bad(&format!("length must be between 1 and {max}"))),
            }
        };
        let fsp = || -> Result<u8, SchemaError> {
            arg_count(&[0, 1])?;
            match numbers.first().copied().unwrap_or(0) {
                n if n <= u32::from(MAX_FSP) => Ok(n as u8),
                _ => Err(bad(&format!(
                    "fractional seconds precision must be 0 to {MAX_FSP}"
                ))),
            }
        };
        let ty = match name {
            // MySQL's display width, as in INT(11), means nothing for storage.
            "TINYINT" | "SMALLINT" | "MEDIUMINT" | "INT" | "INTEGER" | "BIGINT" => {
                arg_count(&[0, 1])?;
                match name {
                    "TINYINT" => ColumnType::TinyInt { unsigned },
                    "SMALLINT" => ColumnType::SmallInt { unsigned },
                    "MEDIUMINT" => ColumnType::MediumInt { unsigned },
                    "BIGINT" => ColumnType::BigInt { unsigned },
                    _ => ColumnType::Int { unsigned },
                }
            }
            "FLOAT" => {
                arg_count(&[0])?;
                ColumnType::Float
            }
            "DOUBLE" | "REAL" => {
                arg_count(&[0])?;
                ColumnType::Double
            }
            "DECIMAL" | "NUMERIC" => {
                arg_count(&[0, 1, 2])?;
                let precision = numbers.first().copied().unwrap_or(10);
                let scale = numbers.get(1).copied().unwrap_or(0);
                if !(1..=u32::from(MAX_DECIMAL_PRECISION)).contains(&precision) {
                    return Err(bad(&format!(
                        "precision must be between 1 and {MAX_DECIMAL_PRECISION}"
                    )));
                }
                if scale > u32::from(MAX_DECIMAL_SCALE) || scale > precision {
                    return Err(bad(&format!(
                        "scale must be at most {MAX_DECIMAL_SCALE} and at most the precision"
                    )));
                }
                ColumnType::Decimal {
                    precision: precision as u8,
                    scale: scale as u8,
                }
            }
            "CHAR" => ColumnType::Char(if numbers.is_empty() {
                1
            } else {
                length(MAX_FIXED_LEN)?
            }),
            "BINARY" => ColumnType::Binary(if numbers.is_empty() {
                1
            } else {
                length(MAX_FIXED_LEN)?
            }),
            "VARCHAR" => ColumnType::VarChar(length(MAX_VAR_LEN)?),
            "VARBINARY" => ColumnType::VarBinary(length(MAX_VAR_LEN)?),
            "DATE" => {
                arg_count(&[0])?;
                ColumnType::Date
            }
            "DATETIME" => ColumnType::DateTime { fsp: fsp()? },
            "TIMESTAMP" => ColumnType::Timestamp { fsp: fsp()? },
            "BOOL" | "BOOLEAN" => {
                arg_count(&[0])?;
                ColumnType::Bool
            }
            _ => return Err(SchemaError::UnknownType(text.trim().to_owned())),
        };
        Ok(ty)
    }
}

impl TryFrom<String> for ColumnType {
    type Error = SchemaError;
    fn try_from(s: String) -> Result<Self, SchemaError> {
        s.parse()
    }
}

impl From<ColumnType> for String {
    fn from(t: ColumnType) -> String {
        t.to_string()
    }
}

/// One column of a table. Columns are `NOT NULL` unless `nullable` is true.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnDef {
    pub name: ColumnName,
    #[serde(rename = "type")]
    pub column_type: ColumnType,
    #[serde(default)]
    pub nullable: bool,
    /// What a row inserted without a value for the column stores: a value
    /// as the data API takes it. None (or `null`): an insert gives the
    /// column a value, or it is NULL if it is nullable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
    /// MySQL's AUTO_INCREMENT: a row inserted without a value (or with
    /// NULL or 0) for the column gets one more than the largest the table
    /// has held. An integer column, the first of the primary key; one per
    /// table.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_increment: bool,
    /// MySQL's `ON UPDATE CURRENT_TIMESTAMP`: a DATETIME or TIMESTAMP
    /// column whose default is [`CURRENT_TIMESTAMP`] also takes the time of
    /// every update of its row that does not set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_update: Option<OnUpdate>,
}

/// The default of a DATETIME or TIMESTAMP column that is the time of the
/// write, as MySQL writes it (`"default": "CURRENT_TIMESTAMP"`). Taken once
/// per write request by the node that coordinates it, and stored: every
/// replica and the redo log hold the same value.
pub const CURRENT_TIMESTAMP: &str = "CURRENT_TIMESTAMP";

/// What an update sets a column to when it does not set it itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnUpdate {
    /// The time of the update (`"on_update": "CURRENT_TIMESTAMP"`).
    #[serde(rename = "CURRENT_TIMESTAMP")]
    CurrentTimestamp,
}

/// An ordered index on one or more columns: `{name, columns, unique?}`. Its
/// entries are in the order of those columns' values (NULL first), then of
/// the primary key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexDef {
    pub name: IndexName,
    pub columns: Vec<ColumnName>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unique: bool,
}

impl IndexDef {
    /// Checks the index against its table's columns.
    pub fn validate(&self, columns: &[ColumnDef]) -> Result<(), SchemaError> {
        let index = || self.name.to_string();
        if self.name.as_str().eq_ignore_ascii_case(PRIMARY_INDEX) {
            return Err(SchemaError::ReservedIndexName);
        }
        if self.columns.is_empty() {
            return Err(SchemaError::NoIndexColumns(index()));
        }
        if self.columns.len() > MAX_KEY_COLUMNS {
            return Err(SchemaError::TooManyIndexColumns {
                index: index(),
                count: self.columns.len(),
            });
        }
        let mut bytes = 0;
        for (i, name) in self.columns.iter().enumerate() {
            let column = || name.to_string();
            if self.columns[..i].contains(name) {
                return Err(SchemaError::DuplicateIndexColumn {
                    index: index(),
                    column: column(),
                });
            }
            let col = (columns.iter().find(|c| c.name == *name)).ok_or_else(|| {
                SchemaError::UnknownIndexColumn {
                    index: index(),
                    column: column(),
                }
            })?;
            bytes += col.column_type.max_size();
        }
        if bytes > MAX_KEY_BYTES {
            return Err(SchemaError::IndexKeyTooLarge {
                index: index(),
                bytes,
            });
        }
        Ok(())
    }
}

/// How a table's primary key is indexed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrimaryKeyIndex {
    /// A hash index for lookups by the whole key and an ordered index
    /// (`PRIMARY`) for range scans and order, as RonDB makes by default.
    #[default]
    Ordered,
    /// The hash index alone, as RonDB's `PRIMARY KEY … USING HASH`: writes
    /// that add rows cost less and rows take less memory, but the key gives
    /// no order to scan in.
    Hash,
}

impl PrimaryKeyIndex {
    pub fn is_ordered(&self) -> bool {
        *self == PrimaryKeyIndex::Ordered
    }
}

/// A table as the user declares it:
/// `{name, columns, primary_key, primary_key_index?, indexes?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableDef {
    pub name: TableName,
    pub columns: Vec<ColumnDef>,
    pub primary_key: Vec<ColumnName>,
    #[serde(default, skip_serializing_if = "PrimaryKeyIndex::is_ordered")]
    pub primary_key_index: PrimaryKeyIndex,
    /// Ordered indexes besides the primary key's, which every table has.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indexes: Vec<IndexDef>,
}

impl TableDef {
    /// The table as MySQL's `CREATE TABLE` writes it (as RonDB's users
    /// read it): columns with NOT NULL and DEFAULT, the primary key, and
    /// the ordered indexes.
    pub fn create_sql(&self) -> String {
        let list = |columns: &[ColumnName]| {
            (columns.iter())
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut lines: Vec<String> = (self.columns.iter())
            .map(|c| {
                let null = match (c.nullable, c.column_type) {
                    (false, _) => " NOT NULL",
                    // A TIMESTAMP says it may be NULL, as MySQL writes it.
                    (true, ColumnType::Timestamp { .. }) => " NULL",
                    (true, _) => "",
                };
                let auto = if c.auto_increment {
                    " AUTO_INCREMENT"
                } else {
                    ""
                };
                let ty = match c.column_type {
                    // MySQL's own word for what it lists as tinyint(1):
                    // read back, it is a BOOL again, not a TINYINT.
                    ColumnType::Bool => "boolean".to_owned(),
                    t => t.mysql_name(),
                };
                format!("  `{}` {ty}{null}{}{auto}", c.name, c.default_clause())
            })
            .collect();
        let using = match self.primary_key_index {
            PrimaryKeyIndex::Ordered => "",
            PrimaryKeyIndex::Hash => " USING HASH",
        };
        lines.push(format!(
            "  PRIMARY KEY ({}){using}",
            list(&self.primary_key)
        ));
        for index in &self.indexes {
            let unique = if index.unique { "UNIQUE " } else { "" };
            lines.push(format!(
                "  {unique}KEY `{}` ({})",
                index.name,
                list(&index.columns)
            ));
        }
        format!("CREATE TABLE `{}` (\n{}\n)", self.name, lines.join(",\n"))
    }

    /// Checks everything that names and types alone do not: column count,
    /// unique names, a valid primary key, and the key and row size limits.
    pub fn validate(&self) -> Result<(), SchemaError> {
        if self.columns.is_empty() {
            return Err(SchemaError::NoColumns);
        }
        if self.columns.len() > MAX_COLUMNS {
            return Err(SchemaError::TooManyColumns(self.columns.len()));
        }
        let mut seen = std::collections::HashSet::new();
        for c in &self.columns {
            if !seen.insert(c.name.as_str().to_ascii_lowercase()) {
                return Err(SchemaError::DuplicateColumn(c.name.to_string()));
            }
        }
        if self.primary_key.is_empty() {
            return Err(SchemaError::NoPrimaryKey);
        }
        if self.primary_key.len() > MAX_KEY_COLUMNS {
            return Err(SchemaError::TooManyKeyColumns(self.primary_key.len()));
        }
        let mut key_bytes = 0;
        for (i, k) in self.primary_key.iter().enumerate() {
            if self.primary_key[..i].contains(k) {
                return Err(SchemaError::DuplicateKeyColumn(k.to_string()));
            }
            let col = self
                .column(k.as_str())
                .ok_or_else(|| SchemaError::UnknownKeyColumn(k.to_string()))?;
            if col.nullable {
                return Err(SchemaError::NullableKeyColumn(k.to_string()));
            }
            if col.default.is_some() {
                return Err(SchemaError::KeyColumnDefault(k.to_string()));
            }
            key_bytes += col.column_type.max_size();
        }
        if key_bytes > MAX_KEY_BYTES {
            return Err(SchemaError::KeyTooLarge(key_bytes));
        }
        for c in &self.columns {
            let bad = |problem: &str| SchemaError::BadDefault {
                column: c.name.to_string(),
                problem: problem.to_owned(),
            };
            if let Some(serde_json::Value::Array(_) | serde_json::Value::Object(_)) = &c.default {
                return Err(bad("must be a number, a string or a boolean"));
            }
            if c.on_update.is_some() && !c.defaults_to_now() {
                return Err(SchemaError::BadOnUpdate(c.name.to_string()));
            }
        }
        let mut autos = self.columns.iter().filter(|c| c.auto_increment);
        if let Some(auto) = autos.next()
            && (!auto.column_type.is_integer()
                || auto.default.is_some()
                || self.primary_key.first() != Some(&auto.name)
                || autos.next().is_some())
        {
            return Err(SchemaError::BadAutoIncrement(auto.name.to_string()));
        }
        let row_bytes: usize = self.columns.iter().map(|c| c.column_type.max_size()).sum();
        if row_bytes > MAX_ROW_BYTES {
            return Err(SchemaError::RowTooLarge(row_bytes));
        }
        if self.indexes.len() > MAX_INDEXES {
            return Err(SchemaError::TooManyIndexes(self.indexes.len()));
        }
        let mut seen = std::collections::HashSet::new();
        for index in &self.indexes {
            index.validate(&self.columns)?;
            // A write of a row that may be there cannot know the value such
            // a column would end with, so the index could not be checked.
            let stamped = (index.columns.iter())
                .filter_map(|name| self.column(name.as_str()))
                .find(|c| c.defaults_to_now() && c.on_update.is_none());
            if let (true, Some(c)) = (index.unique, stamped) {
                return Err(SchemaError::UniqueTimeDefault {
                    index: index.name.to_string(),
                    column: c.name.to_string(),
                });
            }
            if !seen.insert(index.name.as_str().to_ascii_lowercase()) {
                return Err(SchemaError::DuplicateIndex(index.name.to_string()));
            }
        }
        Ok(())
    }

    /// The index with exactly this name.
    pub fn index(&self, name: &str) -> Option<&IndexDef> {
        self.indexes.iter().find(|i| i.name.as_str() == name)
    }

    /// The column with exactly this name.
    pub fn column(&self, name: &str) -> Option<&ColumnDef> {
        self.columns.iter().find(|c| c.name.as_str() == name)
    }

    /// The position of the column with exactly this name.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name.as_str() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, ty: &str, nullable: bool) -> ColumnDef {
        ColumnDef {
            name: ColumnName::parse(name).unwrap(),
            column_type: ty.parse().unwrap(),
            nullable,
            default: None,
            auto_increment: false,
            on_update: None,
        }
    }

    #[test]
    fn defaults_are_written_as_mysql_writes_them() {
        let with = |ty: &str, nullable: bool, default: serde_json::Value| ColumnDef {
            default: Some(default),
            ..col("c", ty, nullable)
        };
        let cases = [
            (with("INT", false, 7.into()), " DEFAULT '7'", "7"),
            (with("BOOL", true, true.into()), " DEFAULT '1'", "1"),
            (
                with("VARCHAR(9)", false, "a\\b'\n".into()),
                r" DEFAULT 'a\\b\'\n'",
                "a\\b'\n",
            ),
            (
                with("VARBINARY(4)", true, "AP8K".into()),
                " DEFAULT 0x00FF0A",
                "0x00FF0A",
            ),
            (with("VARBINARY(4)", false, "".into()), " DEFAULT ''", ""),
            (
                with("DATE", true, "2020-01-02".into()),
                " DEFAULT '2020-01-02'",
                "2020-01-02",
            ),
        ];
        for (c, clause, text) in cases {
            assert_eq!(c.default_clause(), clause, "{c:?}");
            assert_eq!(c.default_text().as_deref(), Some(text), "{c:?}");
        }
        assert_eq!(col("c", "INT", true).default_clause(), " DEFAULT NULL");
        assert_eq!(col("c", "INT", false).default_clause(), "");
        assert_eq!(col("c", "INT", true).default_text(), None);
    }

    #[test]
    fn current_timestamp_is_the_time_only_for_a_date_time_column() {
        let now = |ty: &str, on_update: Option<OnUpdate>| ColumnDef {
            default: Some(CURRENT_TIMESTAMP.into()),
            on_update,
            ..col("c", ty, false)
        };
        let stamped = now("TIMESTAMP(3)", Some(OnUpdate::CurrentTimestamp));
        assert!(stamped.defaults_to_now());
        assert_eq!(
            stamped.default_clause(),
            " DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)"
        );
        assert_eq!(
            stamped.default_text().as_deref(),
            Some("CURRENT_TIMESTAMP(3)")
        );
        assert_eq!(
            stamped.extra(),
            "DEFAULT_GENERATED on update CURRENT_TIMESTAMP(3)"
        );
        let inserted = now("DATETIME", None);
        assert_eq!(inserted.default_clause(), " DEFAULT CURRENT_TIMESTAMP");
        assert_eq!(inserted.extra(), "DEFAULT_GENERATED");
        // Text that reads CURRENT_TIMESTAMP is text.
        let text = now("VARCHAR(20)", None);
        assert!(!text.defaults_to_now());
        assert_eq!(text.default_clause(), " DEFAULT 'CURRENT_TIMESTAMP'");
        assert_eq!(text.extra(), "");
        // ON UPDATE only where the default is the time.
        let json = r#"{"name":"t","columns":[{"name":"id","type":"INT"},
            {"name":"at","type":"DATETIME","default":"CURRENT_TIMESTAMP","on_update":"CURRENT_TIMESTAMP"}],
            "primary_key":["id"]}"#;
        let def: TableDef = serde_json::from_str(json).unwrap();
        def.validate().unwrap();
        assert_eq!(
            serde_json::to_value(&def).unwrap()["columns"][1]["on_update"],
            "CURRENT_TIMESTAMP"
        );
        for bad in [
            json.replace(r#""default":"CURRENT_TIMESTAMP","#, ""),
            json.replace("DATETIME", "VARCHAR(20)"),
        ] {
            let def: TableDef = serde_json::from_str(&bad).unwrap();
            assert_eq!(
                def.validate(),
                Err(SchemaError::BadOnUpdate("at".into())),
                "{bad}"
            );
        }
        let unique = json.replace(
            r#""primary_key""#,
            r#""indexes":[{"name":"u","columns":["at"],"unique":true}],"primary_key""#,
        );
        let def: TableDef = serde_json::from_str(&unique).unwrap();
        def.validate().unwrap();
        let def: TableDef =
            serde_json::from_str(&unique.replace(r#","on_update":"CURRENT_TIMESTAMP""#, ""))
                .unwrap();
        assert!(matches!(
            def.validate(),
            Err(SchemaError::UniqueTimeDefault { .. })
        ));
        let other = json.replace(r#""on_update":"CURRENT_TIMESTAMP""#, r#""on_update":"NOW""#);
        assert!(serde_json::from_str::<TableDef>(&other).is_err());
    }

    fn table(columns: Vec<ColumnDef>, key: &[&str]) -> TableDef {
        TableDef {
            name: TableName::parse("t").unwrap(),
            columns,
            primary_key: key.iter().map(|k| ColumnName::parse(k).unwrap()).collect(),
            primary_key_index: PrimaryKeyIndex::Ordered,
            indexes: Vec::new(),
        }
    }

    fn index(name: &str, columns: &[&str]) -> IndexDef {
        IndexDef {
            name: IndexName::parse(name).unwrap(),
            columns: (columns.iter())
                .map(|c| ColumnName::parse(c).unwrap())
                .collect(),
            unique: false,
        }
    }

    #[test]
    fn indexes_are_checked_against_the_table() {
        let mut t = table(
            vec![
                col("id", "INT", false),
                col("ts", "BIGINT", true),
                col("blob", "VARBINARY(3000)", true),
                col("tag", "VARCHAR(100)", true),
            ],
            &["id"],
        );
        t.indexes = vec![index("by_ts", &["ts", "tag"])];
        t.validate().unwrap();
        let refused = |indexes: Vec<IndexDef>| {
            let mut t = t.clone();
            t.indexes = indexes;
            t.validate().unwrap_err().to_string()
        };
        assert!(refused(vec![index("primary", &["ts"])]).contains("primary key's"));
        assert!(refused(vec![index("i", &[])]).contains("at least one column"));
        assert!(refused(vec![index("i", &["nope"])]).contains("'nope'"));
        assert!(refused(vec![index("i", &["ts", "ts"])]).contains("twice"));
        assert!(refused(vec![index("i", &["blob", "tag"])]).contains("bytes of key"));
        assert!(
            refused(vec![index("a", &["ts"]), index("A", &["tag"])]).contains("declared twice")
        );
        let many = (0..=MAX_INDEXES)
            .map(|i| index(&format!("i{i}"), &["ts"]))
            .collect();
        assert!(refused(many).contains("at most 32 indexes"));
        // The field is left out when there is none, so older readers agree.
        let json = serde_json::to_string(&table(vec![col("id", "INT", false)], &["id"])).unwrap();
        assert!(!json.contains("indexes"), "{json}");
        let parsed: TableDef = serde_json::from_str(
            r#"{"name":"t","columns":[{"name":"id","type":"INT"}],"primary_key":["id"],
                "indexes":[{"name":"i","columns":["id"],"unique":true}]}"#,
        )
        .unwrap();
        assert!(parsed.indexes[0].unique);
        parsed.validate().unwrap();
        // The primary key is ordered unless said otherwise, and only then
        // is the field written.
        let hashed: TableDef = serde_json::from_str(
            r#"{"name":"t","columns":[{"name":"id","type":"INT"}],"primary_key":["id"],
                "primary_key_index":"hash"}"#,
        )
        .unwrap();
        assert_eq!(hashed.primary_key_index, PrimaryKeyIndex::Hash);
        let written = serde_json::to_string(&hashed).unwrap();
        assert!(
            written.contains(r#""primary_key_index":"hash""#),
            "{written}"
        );
        let btree = r#"{"name":"t","columns":[{"name":"id","type":"INT"}],"primary_key":["id"],
            "primary_key_index":"btree"}"#;
        assert!(serde_json::from_str::<TableDef>(btree).is_err());
    }

    #[test]
    fn every_type_name_round_trips() {
        for text in [
            "TINYINT",
            "TINYINT UNSIGNED",
            "SMALLINT",
            "SMALLINT UNSIGNED",
            "MEDIUMINT",
            "MEDIUMINT UNSIGNED",
            "INT",
            "INT UNSIGNED",
            "BIGINT",
            "BIGINT UNSIGNED",
            "FLOAT",
            "DOUBLE",
            "DECIMAL(10,2)",
            "DECIMAL(38,30)",
            "CHAR(1)",
            "CHAR(255)",
            "VARCHAR(100)",
            "BINARY(16)",
            "VARBINARY(4096)",
            "DATE",
            "DATETIME",
            "DATETIME(6)",
            "TIMESTAMP",
            "TIMESTAMP(3)",
            "BOOL",
        ] {
            let ty: ColumnType = text.parse().unwrap();
            assert_eq!(ty.to_string(), text);
        }
    }

    #[test]
    fn type_names_are_forgiving_about_case_space_and_synonyms() {
        let cases = [
            ("varchar( 20 )", ColumnType::VarChar(20)),
            ("int(11) unsigned", ColumnType::Int { unsigned: true }),
            ("integer", ColumnType::Int { unsigned: false }),
            (
                "numeric(5)",
                ColumnType::Decimal {
                    precision: 5,
                    scale: 0,
                },
            ),
            (
                "decimal",
                ColumnType::Decimal {
                    precision: 10,
                    scale: 0,
                },
            ),
            ("boolean", ColumnType::Bool),
            ("char", ColumnType::Char(1)),
            ("real", ColumnType::Double),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<ColumnType>().unwrap(), want, "{text}");
        }
    }

    #[test]
    fn bad_types_are_refused_with_a_reason() {
        for text in [
            "",
            "TEXT",
            "VARCHAR",
            "VARCHAR(0)",
            "VARCHAR(30001)",
            "VARCHAR(x)",
            "VARCHAR(10",
            "CHAR(256)",
            "DECIMAL(39,0)",
            "DECIMAL(5,6)",
            "DECIMAL(0)",
            "DATETIME(7)",
            "FLOAT UNSIGNED",
            "INT SIGNED",
            "VARCHAR(-1)",
            "DATE(1)",
            "BOOL(1)",
            "VARCHAR(99999999999999999999)",
        ] {
            assert!(
                text.parse::<ColumnType>().is_err(),
                "{text:?} should be refused"
            );
        }
    }

    #[test]
    fn names_follow_the_identifier_rules() {
        assert!(DatabaseName::parse("shop_1").is_ok());
        assert!(TableName::parse("_t").is_ok());
        for bad in [
            "",
            "1abc",
            "a-b",
            "a b",
            "a/b",
            "../x",
            "é",
            "a$b",
            &"x".repeat(64),
        ] {
            assert!(TableName::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            DatabaseName::parse("NDBINFO"),
            Err(SchemaError::ReservedName("NDBINFO".into()))
        );
        assert!(TableName::parse(&"x".repeat(63)).is_ok());
        assert!(TenantId::parse("6f1c2b7e-9a0d-4e55-8c1b-0f3e2d1c4b5a").is_ok());
        for bad in ["", "a b", "a/b", &"t".repeat(65)] {
            assert!(TenantId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tables_are_validated() {
        let ok = table(
            vec![col("id", "BIGINT", false), col("v", "VARCHAR(10)", true)],
            &["id"],
        );
        ok.validate().unwrap();

        let cases = [
            (table(vec![], &["id"]), SchemaError::NoColumns),
            (
                table(vec![col("id", "INT", false)], &[]),
                SchemaError::NoPrimaryKey,
            ),
            (
                table(
                    vec![col("id", "INT", false), col("ID", "INT", false)],
                    &["id"],
                ),
                SchemaError::DuplicateColumn("ID".into()),
            ),
            (
                table(vec![col("id", "INT", false)], &["nope"]),
                SchemaError::UnknownKeyColumn("nope".into()),
            ),
            (
                table(vec![col("id", "INT", false)], &["id", "id"]),
                SchemaError::DuplicateKeyColumn("id".into()),
            ),
            (
                table(vec![col("id", "INT", true)], &["id"]),
                SchemaError::NullableKeyColumn("id".into()),
            ),
            (
                table(vec![col("id", "VARCHAR(1000)", false)], &["id"]),
                SchemaError::KeyTooLarge(4002),
            ),
            (
                table(
                    vec![
                        col("id", "INT", false),
                        col("a", "VARBINARY(20000)", true),
                        col("b", "VARBINARY(20000)", true),
                    ],
                    &["id"],
                ),
                SchemaError::RowTooLarge(40008),
            ),
        ];
        for (def, want) in cases {
            assert_eq!(def.validate(), Err(want));
        }
    }

    #[test]
    fn table_definitions_read_from_json_and_refuse_unknown_fields() {
        let def: TableDef = serde_json::from_str(
            r#"{"name":"users","columns":[{"name":"id","type":"bigint"},{"name":"n","type":"VARCHAR(10)","nullable":true}],"primary_key":["id"]}"#,
        )
        .unwrap();
        assert_eq!(
            def.columns[0].column_type,
            ColumnType::BigInt { unsigned: false }
        );
        assert!(!def.columns[0].nullable);
        assert!(def.columns[1].nullable);
        let bad = r#"{"name":"users","columns":[],"primary_key":[],"extra":1}"#;
        assert!(serde_json::from_str::<TableDef>(bad).is_err());
        let bad_name = r#"{"name":"no such","columns":[],"primary_key":[]}"#;
        assert!(serde_json::from_str::<TableDef>(bad_name).is_err());
    }
}

/// The ids as the control plane's store keeps them: text, checked again as
/// it is read back.
#[cfg(feature = "sqlx")]
mod sql {
    use sqlx::encode::IsNull;
    use sqlx::error::BoxDynError;
    use sqlx::{Database, Decode, Encode, Type};

    use super::{DatabaseName, TableName, TenantId};

    macro_rules! stored_as_text {
        ($t:ty) => {
            impl<DB: Database> Type<DB> for $t
            where
                String: Type<DB>,
            {
                fn type_info() -> DB::TypeInfo {
                    <String as Type<DB>>::type_info()
                }

                fn compatible(ty: &DB::TypeInfo) -> bool {
                    <String as Type<DB>>::compatible(ty)
                }
            }

            impl<'q, DB: Database> Encode<'q, DB> for $t
            where
                String: Encode<'q, DB>,
            {
                fn encode_by_ref(
                    &self,
                    buf: &mut <DB as Database>::ArgumentBuffer<'q>,
                ) -> Result<IsNull, BoxDynError> {
                    <String as Encode<'q, DB>>::encode_by_ref(&self.0, buf)
                }
            }

            impl<'r, DB: Database> Decode<'r, DB> for $t
            where
                String: Decode<'r, DB>,
            {
                fn decode(value: <DB as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
                    Ok(<$t>::try_from(<String as Decode<'r, DB>>::decode(value)?)?)
                }
            }
        };
    }

    stored_as_text!(TenantId);
    stored_as_text!(DatabaseName);
    stored_as_text!(TableName);
}
