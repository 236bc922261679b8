//! RonSQL: one single-table SELECT that aggregates, evaluated where the
//! rows are.
//!
//! The text is parsed by `sqlparser` and planned against the table by the
//! coordinator (`tc::ronsql`): a filter, GROUP BY columns and aggregates
//! make a `Program` that every fragment's LDM worker runs over its own
//! rows, a step at a time (`agg`, `eval`, here, below the workers); the
//! coordinator merges the partial groups and sorts, cuts and writes the
//! answer. When the WHERE clause
//! bounds the leading columns of an ordered index, only that range is
//! read. Rows are read committed, as scans read them, and each one
//! examined is charged as a read.
//!
//! The same expressions (`eval`, with the scalar functions of `func`)
//! are what the MySQL front end computes from each row a plain SELECT
//! finds, checks its WHERE with, and sets an UPDATE's columns to.
//!
//! Everything a query can take is bounded: its text, its tokens and
//! nesting, its IN lists, its groups (count and bytes) and its time.

pub(crate) mod agg;
pub(crate) mod eval;
pub(crate) mod func;
pub(crate) mod like;
pub(crate) mod regexp;

use std::time::Duration;

/// Most groups a query may make.
pub(crate) const MAX_GROUPS: usize = 100_000;
/// Most bytes its groups may hold, about.
pub(crate) const MAX_GROUP_BYTES: usize = 64 << 20;
/// Longest a query may run.
pub(crate) const MAX_TIME: Duration = Duration::from_secs(10);

/// What kind of error a query met (RonDB's error classes): what a client
/// can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// The text is not SQL.
    Syntax,
    /// It is SQL, but names what is not there or mixes types.
    Semantic,
    /// It names a column that is not there (a semantic error that MySQL
    /// numbers apart).
    NoSuchColumn,
    /// An aggregate where none may be (`WHERE COUNT(*) > 1`, one inside
    /// another): semantic, numbered apart by MySQL.
    GroupFunction,
    /// A column outside an aggregate and not grouped by, where the answer
    /// has a value per group: semantic, numbered apart by MySQL.
    NotGrouped,
    /// A value it computes is out of range (a SUM past its type, a
    /// product past BIGINT): semantic, numbered apart by MySQL.
    OutOfRange,
    /// Rows of different widths compared (`(a, b) = (1, 2, 3)`): semantic,
    /// numbered apart by MySQL.
    Cardinality,
    /// It is SQL that RonSQL does not run.
    Unsupported,
    /// Its regular expression is not one (MySQL numbers it apart).
    Regexp,
    /// It asks for more than a query may take.
    TooLarge,
    /// It ran out of time.
    Resource,
}

impl Class {
    /// RonDB's error class it is — the classes MySQL numbers apart are
    /// all semantic errors there — as its name, code and HTTP status.
    fn ronsql(self) -> (&'static str, &'static str, u16) {
        match self {
            Class::Syntax => ("syntax", "SQL_SYNTAX", 400),
            Class::Semantic
            | Class::NoSuchColumn
            | Class::GroupFunction
            | Class::NotGrouped
            | Class::OutOfRange
            | Class::Cardinality
            | Class::Regexp => ("semantic", "SQL_SEMANTIC", 400),
            Class::Unsupported => ("unsupported", "SQL_UNSUPPORTED", 400),
            Class::TooLarge => ("too_large", "SQL_TOO_LARGE", 413),
            Class::Resource => ("resource", "SQL_RESOURCE", 503),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        self.ronsql().0
    }

    pub(crate) fn code(self) -> &'static str {
        self.ronsql().1
    }

    pub(crate) fn http_status(self) -> u16 {
        self.ronsql().2
    }
}

/// Why a query was refused or failed; nothing was changed either way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct SqlError {
    pub(crate) class: Class,
    pub(crate) message: String,
}

impl SqlError {
    pub(crate) fn new(class: Class, message: impl Into<String>) -> Self {
        SqlError {
            class,
            message: message.into(),
        }
    }
}

/// Whether a query may, must or must not be explained (RonDB's
/// `explainMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExplainMode {
    /// SELECT runs; EXPLAIN SELECT explains.
    Allow,
    /// SELECT runs; EXPLAIN SELECT is refused.
    Forbid,
    /// SELECT is refused; EXPLAIN SELECT explains.
    Require,
    /// Both run: EXPLAIN is ignored.
    Remove,
    /// Both explain.
    Force,
}

impl ExplainMode {
    pub(crate) fn parse(name: &str) -> Option<ExplainMode> {
        Some(match name {
            "ALLOW" => ExplainMode::Allow,
            "FORBID" => ExplainMode::Forbid,
            "REQUIRE" => ExplainMode::Require,
            "REMOVE" => ExplainMode::Remove,
            "FORCE" => ExplainMode::Force,
            _ => return None,
        })
    }

    /// Whether a query that does (`explain`) or does not say EXPLAIN is
    /// explained, or why it is refused.
    pub(crate) fn explains(self, explain: bool) -> Result<bool, SqlError> {
        match (self, explain) {
            (ExplainMode::Allow, e) => Ok(e),
            (ExplainMode::Forbid, true) => Err(SqlError::new(
                Class::Unsupported,
                "EXPLAIN is forbidden by explainMode FORBID",
            )),
            (ExplainMode::Forbid, false) => Ok(false),
            (ExplainMode::Require, false) => Err(SqlError::new(
                Class::Unsupported,
                "explainMode REQUIRE takes only EXPLAIN SELECT",
            )),
            (ExplainMode::Require, true) => Ok(true),
            (ExplainMode::Remove, _) => Ok(false),
            (ExplainMode::Force, _) => Ok(true),
        }
    }
}
