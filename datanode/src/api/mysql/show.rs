//! The SHOW statements SQL tools send to fill their panels, beyond those a
//! driver sends at connect (`query`): `SHOW TABLE STATUS` (rows and memory
//! from the node's own accounting, as `ndbinfo` counts them), `SHOW
//! ENGINES`, `SHOW CHARACTER SET`, `SHOW COLLATION` and `SHOW GRANTS` (the
//! key's grants as MySQL privileges). Each answers for the key's databases
//! only.

use shoal_wire::apikey::Role;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

use super::error::MyError;
use super::information_schema::Sizes;
use super::proto::{ColumnDef, ty};
use super::query::{Reply, from_database, like_of};
use super::session::Session;
use super::value::{Cell, computed};
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
        let columns = [
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
        Ok(Reply::Rows { columns, rows })
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
        Ok(Reply::Rows {
            columns,
            rows: vec![row.into_iter().map(Cell::from).collect()],
        })
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
        Ok(Reply::Rows { columns, rows })
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
                    Cell::from(if charset == "binary" {
                        "NO PAD"
                    } else {
                        "PAD SPACE"
                    }),
                ]
            })
            .collect();
        Ok(Reply::Rows { columns, rows })
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
        Ok(Reply::Rows {
            columns,
            rows: lines.into_iter().map(|l| vec![Cell::from(l)]).collect(),
        })
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
