//! The SHOW statements SQL tools send to fill their panels, beyond those a
//! driver sends at connect (`query`): `SHOW TABLE STATUS` (rows and memory
//! from the node's own accounting, as `ndbinfo` counts them), `SHOW
//! ENGINES`, `SHOW CHARACTER SET`, `SHOW COLLATION` and `SHOW GRANTS` (the
//! key's grants as MySQL privileges), `SHOW CREATE DATABASE`, and — with
//! no row, as Shoal has none of them — `SHOW TRIGGERS`, `SHOW EVENTS` and
//! `SHOW FUNCTION | PROCEDURE STATUS`, which mysqldump reads. Each answers
//! for the key's databases only.
//!
//! A SHOW that lists named rows (`SHOW VARIABLES`, `SHOW STATUS` and the
//! empty ones) takes `LIKE 'pattern'` on its first column or `WHERE
//! condition` on its columns, as in MySQL (`Filter`).

use shoal_wire::apikey::Role;
use sqlparser::ast::Expr;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

use super::error::MyError;
use super::filter::{Columns, Cond};
use super::information_schema::Sizes;
use super::proto::{ColumnDef, ty};
use super::query::{Reply, from_database, if_not_exists, keyword, like_of, parse_condition, word};
use super::session::Session;
use super::value::{Cell, Lit, computed};
use crate::sql::like::Like;
use crate::types::value::Value;

/// The one character set Shoal stores text in, and its collation.
const CHARSET: (&str, &str, &str, u64) = ("utf8mb4", "UTF-8 Unicode", "utf8mb4_bin", 4);
/// Bytes: what BINARY and VARBINARY columns hold.
const BINARY: (&str, &str, &str, u64) = ("binary", "Binary pseudo charset", "binary", 1);

/// The ndbinfo tables a key may read: granted on their own, as MySQL
/// writes a grant of one table.
const NDBINFO: [&str; 4] = [
    "table_memory_usage",
    "database_memory_usage",
    "database_quota_usage",
    "table_usage",
];

/// mysqldump's and MySQL's columns of the SHOWs of objects Shoal never
/// has.
const TRIGGER_COLUMNS: &[&str] = &[
    "Trigger",
    "Event",
    "Table",
    "Statement",
    "Timing",
    "Created",
    "sql_mode",
    "Definer",
    "character_set_client",
    "collation_connection",
    "Database Collation",
];
const EVENT_COLUMNS: &[&str] = &[
    "Db",
    "Name",
    "Definer",
    "Time zone",
    "Type",
    "Execute at",
    "Interval value",
    "Interval field",
    "Starts",
    "Ends",
    "Status",
    "Originator",
    "character_set_client",
    "collation_connection",
    "Database Collation",
];
const ROUTINE_COLUMNS: &[&str] = &[
    "Db",
    "Name",
    "Type",
    "Definer",
    "Modified",
    "Created",
    "Security_type",
    "Comment",
    "character_set_client",
    "collation_connection",
    "Database Collation",
];

/// Which rows a SHOW lists: all, those whose first column is `LIKE` a
/// pattern, or those a `WHERE` condition on its columns holds for.
pub(super) enum Filter {
    All,
    Like(Like),
    Where(Cond),
}

impl Filter {
    /// What follows a SHOW whose rows have text columns `columns`. Text
    /// compares without regard to case, as MySQL's catalog collation
    /// (`utf8mb3_general_ci`) compares it: a `WHERE`'s strings, and the
    /// rows' text, are lowered before they meet.
    pub(super) fn of(columns: &[&str], rest: &[Token]) -> Result<Filter, MyError> {
        if keyword(rest.first()) == Some(Keyword::WHERE) {
            let lowered: Vec<Token> = (rest[1..].iter())
                .map(|t| match t {
                    Token::SingleQuotedString(s) => Token::SingleQuotedString(s.to_lowercase()),
                    Token::DoubleQuotedString(s) => Token::DoubleQuotedString(s.to_lowercase()),
                    other => other.clone(),
                })
                .collect();
            let e = parse_condition(&lowered)?;
            return Ok(Filter::Where(Cond::of(&Named(columns), &e)?));
        }
        Ok(like_of(rest)?.map_or(Filter::All, Filter::Like))
    }

    /// Whether row `row` (its columns' text) is listed.
    pub(super) fn keeps(&self, row: &[Value]) -> Result<bool, MyError> {
        match self {
            Filter::All => Ok(true),
            Filter::Like(like) => {
                Ok(matches!(row.first(), Some(Value::Text(t)) if like.matches_name(t)))
            }
            Filter::Where(cond) => {
                let lowered: Vec<Value> = (row.iter())
                    .map(|v| match v {
                        Value::Text(t) => Value::Text(t.to_lowercase()),
                        other => other.clone(),
                    })
                    .collect();
                cond.passes(&lowered)
            }
        }
    }
}

/// `SHOW VARIABLES` and `SHOW STATUS`: names and their values, as text,
/// those `rest` (`LIKE` or `WHERE`) keeps.
pub(super) fn named_rows(
    named: impl IntoIterator<Item = (String, Value)>,
    rest: &[Token],
) -> Result<Reply, MyError> {
    const COLUMNS: &[&str] = &["Variable_name", "Value"];
    let filter = Filter::of(COLUMNS, rest)?;
    let mut rows = Vec::new();
    for (name, value) in named {
        let row = [Value::Text(name), value];
        if filter.keeps(&row)? {
            rows.push(row.into_iter().map(Cell::from).collect());
        }
    }
    Ok(Reply::rows(text_columns(COLUMNS), rows))
}

/// A SHOW's columns, all text, for a `WHERE` on them.
struct Named<'a>(&'a [&'a str]);

impl Columns for Named<'_> {
    fn column(&self, e: &Expr) -> Result<usize, MyError> {
        let name = match e {
            Expr::Identifier(i) => i.value.as_str(),
            other => {
                return Err(MyError::unsupported(format!(
                    "the expression '{other}' in a SHOW's WHERE (its columns only)"
                )));
            }
        };
        (self.0.iter())
            .position(|c| c.eq_ignore_ascii_case(name))
            .ok_or_else(|| MyError::no_column(name, "where clause"))
    }

    fn value(&self, column: usize, lit: &Lit) -> Result<Value, MyError> {
        match lit {
            Lit::Null => Ok(Value::Null),
            Lit::Str(s) => String::from_utf8(s.clone())
                .map(Value::Text)
                .map_err(|_| MyError::bad_value(self.0[column], "not UTF-8 text")),
            _ => Err(MyError::bad_value(
                self.0[column],
                "a SHOW's columns are text: compare them with a quoted string",
            )),
        }
    }
}

fn text_columns(names: &[&str]) -> Vec<ColumnDef> {
    names.iter().map(|n| computed(n, ty::VAR_STRING)).collect()
}

fn null() -> Cell {
    Cell::Value(Value::Null)
}

impl Session {
    /// `SHOW TABLE STATUS [FROM db] [LIKE 'pattern']`: MySQL's columns,
    /// with the rows and the memory each table holds on this node (its
    /// fragments' replicas here, as `ndbinfo.table_memory_usage` counts
    /// them): `Data_length` the bytes allocated, `Data_free` those of them
    /// free. What Shoal does not keep (times, checksums) is NULL.
    pub(super) async fn show_table_status(&mut self, rest: &[Token]) -> Result<Reply, MyError> {
        let (db, rest) = from_database(rest)?;
        let db = match db {
            Some(db) => db.to_owned(),
            None => self.database.clone().ok_or_else(MyError::no_database)?,
        };
        let like = like_of(rest)?;
        self.grant(&db)?;
        let sizes = self.table_sizes().await?;
        let mut tables: Vec<(String, Sizes)> = (self.engine.tables().iter())
            .filter(|t| t.database.name.as_str() == db)
            .map(|t| {
                (
                    t.name().to_string(),
                    sizes.get(&t.id).copied().unwrap_or_default(),
                )
            })
            .filter(|(t, _)| like.as_ref().is_none_or(|p| p.matches_name(t)))
            .collect();
        tables.sort_by(|a, b| a.0.cmp(&b.0));
        let columns: Vec<_> = [
            ("Name", ty::VAR_STRING),
            ("Engine", ty::VAR_STRING),
            ("Version", ty::LONGLONG),
            ("Row_format", ty::VAR_STRING),
            ("Rows", ty::LONGLONG),
            ("Avg_row_length", ty::LONGLONG),
            ("Data_length", ty::LONGLONG),
            ("Max_data_length", ty::LONGLONG),
            ("Index_length", ty::LONGLONG),
            ("Data_free", ty::LONGLONG),
            ("Auto_increment", ty::LONGLONG),
            ("Create_time", ty::DATETIME),
            ("Update_time", ty::DATETIME),
            ("Check_time", ty::DATETIME),
            ("Collation", ty::VAR_STRING),
            ("Checksum", ty::LONGLONG),
            ("Create_options", ty::VAR_STRING),
            ("Comment", ty::VAR_STRING),
        ]
        .iter()
        .map(|(n, t)| computed(n, *t))
        .collect();
        let rows = tables
            .into_iter()
            .map(|(name, Sizes { rows, bytes, free })| {
                vec![
                    Cell::from(name),
                    Cell::from("ndbcluster"),
                    Cell::from(10u64),
                    Cell::from("Dynamic"),
                    Cell::from(rows),
                    Cell::from(bytes.checked_div(rows).unwrap_or(0)),
                    Cell::from(bytes),
                    null(),
                    null(),
                    Cell::from(free),
                    null(),
                    null(),
                    null(),
                    null(),
                    Cell::from(CHARSET.2),
                    null(),
                    Cell::from(""),
                    Cell::from(""),
                ]
            })
            .collect();
        Ok(Reply::rows(columns, rows))
    }

    /// `SHOW CREATE {DATABASE | SCHEMA} [IF NOT EXISTS] db`, of a database
    /// the key is granted.
    pub(super) fn show_create_database(&self, rest: &[Token]) -> Result<Reply, MyError> {
        let (if_not_exists, rest) = if_not_exists(rest)?;
        let [name] = rest else {
            return Err(MyError::syntax(
                "SHOW CREATE DATABASE takes a database name",
            ));
        };
        let db = word(Some(name)).ok_or_else(|| MyError::syntax("a database name is needed"))?;
        self.grant(db)?;
        let guard = if if_not_exists {
            "/*!32312 IF NOT EXISTS*/ "
        } else {
            ""
        };
        let sql = format!(
            "CREATE DATABASE {guard}`{}` /*!40100 DEFAULT CHARACTER SET {} COLLATE {} */",
            db.replace('`', "``"),
            CHARSET.0,
            CHARSET.2
        );
        Ok(Reply::rows(
            text_columns(&["Database", "Create Database"]),
            vec![vec![Cell::from(db), Cell::from(sql)]],
        ))
    }

    /// `SHOW TRIGGERS [FROM db]`, `SHOW EVENTS [FROM db]`, `SHOW FUNCTION
    /// STATUS`, `SHOW PROCEDURE STATUS`, each with `LIKE` or `WHERE`: no
    /// row, as Shoal has no triggers, events or stored routines — but the
    /// statement is checked as MySQL would, so a misspelt one still fails.
    pub(super) fn show_none(&self, what: Absent, rest: &[Token]) -> Result<Reply, MyError> {
        let (columns, rest) = match what {
            Absent::Triggers | Absent::Events => {
                let (db, rest) = from_database(rest)?;
                let db = match db {
                    Some(db) => db.to_owned(),
                    None => self.database.clone().ok_or_else(MyError::no_database)?,
                };
                self.grant(&db)?;
                let columns = match what {
                    Absent::Triggers => TRIGGER_COLUMNS,
                    _ => EVENT_COLUMNS,
                };
                (columns, rest)
            }
            Absent::Routines => (ROUTINE_COLUMNS, rest),
        };
        Filter::of(columns, rest)?;
        Ok(Reply::rows(text_columns(columns), Vec::new()))
    }

    /// `SHOW ENGINES`: the one engine every table is in.
    pub(super) fn show_engines(&self, rest: &[Token]) -> Result<Reply, MyError> {
        if !rest.is_empty() {
            return Err(MyError::syntax("SHOW ENGINES takes nothing more"));
        }
        let columns = text_columns(&[
            "Engine",
            "Support",
            "Comment",
            "Transactions",
            "XA",
            "Savepoints",
        ]);
        let row = [
            "ndbcluster",
            "DEFAULT",
            "Shoal: in-memory tables in node groups, as RonDB's",
            "YES",
            "NO",
            "NO",
        ];
        Ok(Reply::rows(
            columns,
            vec![row.into_iter().map(Cell::from).collect()],
        ))
    }

    /// `SHOW CHARACTER SET [LIKE]` (and `SHOW CHARSET`): utf8mb4, the text
    /// of every text column, and binary, the bytes of the binary ones.
    pub(super) fn show_charsets(&self, rest: &[Token]) -> Result<Reply, MyError> {
        let like = like_of(rest)?;
        let mut columns = text_columns(&["Charset", "Description", "Default collation"]);
        columns.push(computed("Maxlen", ty::LONGLONG));
        let rows = [CHARSET, BINARY]
            .into_iter()
            .filter(|c| like.as_ref().is_none_or(|p| p.matches_name(c.0)))
            .map(|(name, description, collation, max)| {
                vec![
                    Cell::from(name),
                    Cell::from(description),
                    Cell::from(collation),
                    Cell::from(max),
                ]
            })
            .collect();
        Ok(Reply::rows(columns, rows))
    }

    /// `SHOW COLLATION [LIKE]`: the collations Shoal compares by, both
    /// byte by byte.
    pub(super) fn show_collations(&self, rest: &[Token]) -> Result<Reply, MyError> {
        let like = like_of(rest)?;
        let mut columns = text_columns(&["Collation", "Charset"]);
        columns.push(computed("Id", ty::LONGLONG));
        columns.extend(text_columns(&["Default", "Compiled"]));
        columns.push(computed("Sortlen", ty::LONGLONG));
        columns.extend(text_columns(&["Pad_attribute"]));
        let rows = [(CHARSET, 46u64), (BINARY, 63)]
            .into_iter()
            .filter(|(c, _)| like.as_ref().is_none_or(|p| p.matches_name(c.2)))
            .map(|((charset, _, collation, _), id)| {
                vec![
                    Cell::from(collation),
                    Cell::from(charset),
                    Cell::from(id),
                    Cell::from("Yes"),
                    Cell::from("Yes"),
                    Cell::from(1u64),
                    // Text compares byte by byte, trailing spaces and all
                    // (MySQL's utf8mb4_bin ignores them: PAD SPACE).
                    Cell::from("NO PAD"),
                ]
            })
            .collect();
        Ok(Reply::rows(columns, rows))
    }

    /// `SHOW GRANTS [FOR CURRENT_USER[()] | FOR user]`: the key's grants
    /// as the MySQL privileges they give — a read key `SELECT` (and `LOCK
    /// TABLES … READ`), a read-write key the writes and the changes of
    /// schema — and the ndbinfo tables it may read. Another user's: 1044,
    /// as MySQL refuses a user without rights on `mysql`.
    pub(super) fn show_grants(&self, rest: &[Token]) -> Result<Reply, MyError> {
        let me = format!("`{}`@`%`", self.user);
        if let Some(named) = granted_user(rest)?
            && named != self.user
        {
            return Err(MyError::denied_database(&self.user, "mysql"));
        }
        let mut lines = vec![format!("GRANT USAGE ON *.* TO {me}")];
        let mut grants: Vec<(String, Role)> = (self.key()?.def().grants.iter())
            .map(|g| (g.database.to_string(), g.role))
            .collect();
        grants.sort_by(|a, b| a.0.cmp(&b.0));
        for (db, role) in grants {
            let privileges = match role {
                Role::Read => "SELECT, LOCK TABLES",
                Role::ReadWrite => {
                    "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, LOCK TABLES"
                }
            };
            lines.push(format!("GRANT {privileges} ON `{db}`.* TO {me}"));
        }
        for table in NDBINFO {
            lines.push(format!("GRANT SELECT ON `ndbinfo`.`{table}` TO {me}"));
        }
        let columns = text_columns(&[&format!("Grants for {}@%", self.user)]);
        Ok(Reply::rows(
            columns,
            lines.into_iter().map(|l| vec![Cell::from(l)]).collect(),
        ))
    }
}

/// The user a `SHOW GRANTS` names after `FOR`: `None` for the session's
/// own (no `FOR`, or `FOR CURRENT_USER[()]`), else the name, its `@host`
/// part read past (a key's user is the same from every host).
fn granted_user(rest: &[Token]) -> Result<Option<String>, MyError> {
    let bad = || MyError::syntax("SHOW GRANTS [FOR user]");
    let named = match rest {
        [] => return Ok(None),
        [Token::Word(f), named @ ..] if f.keyword == Keyword::FOR => named,
        _ => return Err(bad()),
    };
    let (user, host) = match named {
        [Token::Word(w)] | [Token::Word(w), Token::LParen, Token::RParen]
            if w.keyword == Keyword::CURRENT_USER =>
        {
            return Ok(None);
        }
        [Token::Word(w), host @ ..] => (w.value.clone(), host),
        [
            Token::SingleQuotedString(s) | Token::DoubleQuotedString(s),
            host @ ..,
        ] => (s.clone(), host),
        _ => return Err(bad()),
    };
    // `@'host'`, or `@host`, however the tokenizer cut it.
    let at_host = match host {
        [] => true,
        [Token::AtSign, _] => true,
        [Token::Word(w)] => w.value.starts_with('@'),
        _ => false,
    };
    if at_host { Ok(Some(user)) } else { Err(bad()) }
}

/// The objects Shoal never has, which a SHOW lists none of.
#[derive(Debug, Clone, Copy)]
pub(super) enum Absent {
    Triggers,
    Events,
    /// `SHOW FUNCTION STATUS`, `SHOW PROCEDURE STATUS`.
    Routines,
}
