//! Errors as a MySQL client gets them: MySQL's number and SQLSTATE where
//! MySQL has one, and Shoal's refusals (quotas, rates, the node's state)
//! under the number MySQL gives an error from the storage engine (1296),
//! with RonDB's number in the message, as a RonDB SQL node answers them.

use shoal_quota::QuotaError;

use crate::api::AccessError;
use crate::node::keys::AuthError;
use crate::sql::{Class, SqlError};
use crate::storage::codec::{Fault, ValueError};
use crate::tc::TcError;
use crate::tc::batch::OperationError;

/// An error answered to a statement; what it asked was not done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MyError {
    pub(crate) code: u16,
    pub(crate) state: &'static str,
    pub(crate) message: String,
    /// Refused, nothing done, for another node of the group is the
    /// primary of the database it writes: that node and the database.
    pub(crate) primary_elsewhere: Option<Box<(u32, String)>>,
}

impl MyError {
    pub(crate) fn new(code: u16, state: &'static str, message: impl Into<String>) -> MyError {
        MyError {
            code,
            state,
            message: message.into(),
            primary_elsewhere: None,
        }
    }

    /// 1064: the text is not SQL.
    pub(crate) fn syntax(message: impl std::fmt::Display) -> MyError {
        MyError::new(
            1064,
            "42000",
            format!("You have an error in your SQL syntax: {message}"),
        )
    }

    /// 1235: SQL that Shoal does not run, named.
    pub(crate) fn unsupported(what: impl std::fmt::Display) -> MyError {
        MyError::new(
            1235,
            "42000",
            format!("This version of Shoal doesn't yet support '{what}'"),
        )
    }

    /// 1300: bytes that should be text and are not UTF-8 (the first 16
    /// shown in hex).
    pub(crate) fn not_utf8(bytes: &[u8]) -> MyError {
        let shown: String = bytes.iter().take(16).map(|b| format!("{b:02X}")).collect();
        MyError::new(
            1300,
            "HY000",
            format!("Invalid utf8mb4 character string: '{shown}'"),
        )
    }

    /// Whether this is 1235: SQL Shoal does not run.
    pub(crate) fn is_unsupported(&self) -> bool {
        self.code == 1235
    }

    /// 1046: a statement that needs a database, with none chosen.
    pub(crate) fn no_database() -> MyError {
        MyError::new(1046, "3D000", "No database selected")
    }

    /// 1146: no such table.
    pub(crate) fn no_table(database: &str, table: &str) -> MyError {
        MyError::new(
            1146,
            "42S02",
            format!("Table '{database}.{}' doesn't exist", shown(table)),
        )
    }

    /// 1054: no such column.
    pub(crate) fn no_column(column: &str, place: &str) -> MyError {
        MyError::new(
            1054,
            "42S22",
            format!("Unknown column '{}' in '{place}'", shown(column)),
        )
    }

    /// 1044: the key may not use the database (or it is another tenant's).
    pub(crate) fn denied_database(user: &str, database: &str) -> MyError {
        MyError::new(
            1044,
            "42000",
            format!(
                "Access denied for user '{user}' to database '{}'",
                shown(database)
            ),
        )
    }

    /// 1142: a read key writing, or a statement the key's role does not
    /// allow.
    pub(crate) fn denied_command(command: &str, user: &str, table: &str) -> MyError {
        MyError::new(
            1142,
            "42000",
            format!(
                "{command} command denied to user '{user}' for table '{}'",
                shown(table)
            ),
        )
    }

    /// 1049: the database is not there.
    pub(crate) fn unknown_database(database: &str) -> MyError {
        MyError::new(
            1049,
            "42000",
            format!("Unknown database '{}'", shown(database)),
        )
    }

    /// 1366: a value the column cannot hold.
    pub(crate) fn bad_value(column: &str, problem: impl std::fmt::Display) -> MyError {
        MyError::new(
            1366,
            "HY000",
            format!("Incorrect value for column '{}': {problem}", shown(column)),
        )
    }

    /// A value column `column` refused, numbered by the kind of fault as
    /// MySQL's strict mode numbers it; where MySQL would round or clamp
    /// instead, the same number, and the value is refused all the same.
    pub(crate) fn refused_value(
        column: &str,
        fault: Fault,
        problem: impl std::fmt::Display,
    ) -> MyError {
        let c = shown(column);
        match fault {
            Fault::Incorrect => MyError::bad_value(column, problem),
            Fault::Null => MyError::new(1048, "23000", format!("Column '{c}' cannot be null")),
            Fault::TooLong => MyError::new(
                1406,
                "22001",
                format!("Data too long for column '{c}': {problem}"),
            ),
            Fault::OutOfRange => MyError::new(
                1264,
                "22003",
                format!("Out of range value for column '{c}': {problem}"),
            ),
            Fault::TooPrecise => MyError::new(
                1265,
                "01000",
                format!("Data truncated for column '{c}': {problem}"),
            ),
            Fault::BadTime => MyError::new(
                1292,
                "22007",
                format!("Incorrect date or time value for column '{c}': {problem}"),
            ),
        }
    }

    /// 1105: a text column compared with a number, which MySQL answers by
    /// reading every row's text as a number (`'05' = 5`, `'abc' = 0`).
    pub(crate) fn text_against_number(column: &str, number: &str) -> MyError {
        let n = shown(number);
        MyError::new(
            1105,
            "HY000",
            format!(
                "'{}' is a text column compared with the number {n}: MySQL reads each row's \
                 text as a number for that, which Shoal does not; quote it ('{n}') to compare text",
                shown(column)
            ),
        )
    }

    /// 1210: wrong arguments to a prepared statement.
    pub(crate) fn bad_arguments(message: impl std::fmt::Display) -> MyError {
        MyError::new(
            1210,
            "HY000",
            format!("Incorrect arguments to mysqld_stmt_execute: {message}"),
        )
    }

    /// 1296: Shoal refused, with RonDB's number for the reason where it
    /// has one.
    fn from_node(number: Option<u32>, message: impl std::fmt::Display) -> MyError {
        let message = match number {
            Some(n) => format!("Got error {n} '{message}' from NDBCLUSTER"),
            None => format!("Got error '{message}' from NDBCLUSTER"),
        };
        MyError::new(1296, "HY000", message)
    }
}

/// At most 64 characters of a name the client sent, in a message.
fn shown(name: &str) -> String {
    name.chars().take(64).collect()
}

impl From<AccessError> for MyError {
    fn from(e: AccessError) -> MyError {
        match e {
            AccessError::Unauthenticated(AuthError::Expired) => {
                MyError::new(1045, "28000", "the API key has expired or was revoked")
            }
            AccessError::Unauthenticated(_) => {
                MyError::new(1045, "28000", "the API key is not valid")
            }
            AccessError::NotGranted(db) => MyError::new(
                1044,
                "42000",
                format!("Access denied to database '{db}': the API key is not granted it"),
            ),
            AccessError::NoSuchDatabase(db) => MyError::unknown_database(&db),
        }
    }
}

impl From<SqlError> for MyError {
    fn from(e: SqlError) -> MyError {
        match e.class {
            Class::Syntax => MyError::syntax(&e.message),
            Class::Unsupported => MyError::new(1235, "42000", e.message.to_string()),
            Class::NoSuchColumn => MyError::new(1054, "42S22", e.message.to_string()),
            Class::GroupFunction => MyError::new(
                1111,
                "HY000",
                format!("Invalid use of group function: {}", e.message),
            ),
            Class::NotGrouped => MyError::new(1055, "42000", e.message.to_string()),
            Class::OutOfRange => MyError::new(1690, "22003", e.message.to_string()),
            Class::Cardinality => MyError::new(1241, "21000", e.message.to_string()),
            Class::Regexp => MyError::new(
                1139,
                "42000",
                format!("Got error '{}' from regexp", e.message),
            ),
            Class::TooLarge => MyError::new(1105, "HY000", e.message.to_string()),
            _ => MyError::new(1105, "HY000", e.message.to_string()),
        }
    }
}

/// A value a statement computes from a row that is out of range (1690,
/// as MySQL's `BIGINT value is out of range`): the statement fails whole.
impl From<crate::sql::eval::EvalError> for MyError {
    fn from(e: crate::sql::eval::EvalError) -> MyError {
        MyError::new(1690, "22003", e.0.to_string())
    }
}

impl From<crate::sql::like::BadPattern> for MyError {
    fn from(e: crate::sql::like::BadPattern) -> MyError {
        match e {
            crate::sql::like::BadPattern::NotText => MyError::unsupported(e.to_string()),
            crate::sql::like::BadPattern::TooLong(_) => MyError::new(1105, "HY000", e.to_string()),
        }
    }
}

impl From<QuotaError> for MyError {
    fn from(e: QuotaError) -> MyError {
        MyError::from_node(e.number(), e)
    }
}

impl From<ValueError> for MyError {
    fn from(e: ValueError) -> MyError {
        MyError::refused_value(&e.column, e.fault, &e.problem)
    }
}

impl From<OperationError> for MyError {
    fn from(e: OperationError) -> MyError {
        match &e {
            // MySQL 8's words, which ORMs read the values and key from.
            OperationError::DuplicateKey { table, entry } => MyError::new(
                1062,
                "23000",
                format!("Duplicate entry '{entry}' for key '{table}.PRIMARY'"),
            ),
            OperationError::DuplicateUnique {
                table,
                index,
                entry,
            } => MyError::new(
                1062,
                "23000",
                format!("Duplicate entry '{entry}' for key '{table}.{index}'"),
            ),
            OperationError::Value(v) => MyError::refused_value(&v.column, v.fault, &v.problem),
            OperationError::MissingColumn { column, .. } => MyError::new(
                1364,
                "HY000",
                format!("Field '{column}' doesn't have a default value"),
            ),
            OperationError::NoSuchTable { table } => {
                MyError::new(1146, "42S02", format!("Table '{table}' doesn't exist"))
            }
            OperationError::LockWaitTimeout { .. } => MyError::new(
                1205,
                "HY000",
                "Lock wait timeout exceeded; try restarting transaction",
            ),
            OperationError::Quota(q) => q.clone().into(),
            _ => MyError::from_node(e.number(), &e),
        }
    }
}

impl From<TcError> for MyError {
    fn from(e: TcError) -> MyError {
        match e {
            TcError::Forbidden { database, reason } => MyError::new(
                1044,
                "42000",
                format!("Access denied to database '{database}': {reason}"),
            ),
            TcError::Quota(q) => q.into(),
            TcError::Operation { error, .. } => error.into(),
            TcError::NotPrimary {
                ref database,
                primary,
            } => MyError {
                primary_elsewhere: Some(Box::new((primary, database.clone()))),
                ..MyError::from_node(None, &e)
            },
            other => MyError::from_node(None, other),
        }
    }
}
