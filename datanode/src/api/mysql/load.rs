//! Statements that files written by mysqldump carry around their rows,
//! taken so that such a file loads as it is:
//!
//! - `LOCK TABLES t WRITE, …` / `UNLOCK TABLES`: each table must exist and
//!   be granted (for writing, if locked for it), and an open transaction
//!   commits first, as in MySQL. No other client is kept out: in NDB a
//!   table lock holds only on the MySQL server that took it, and every
//!   client of Shoal is its own server in that sense.
//! - `ALTER TABLE t DISABLE KEYS` / `ENABLE KEYS`: MyISAM's, a no-op in
//!   InnoDB and NDB alike; the table must exist and the key may write.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

use super::error::MyError;
use super::query::{Reply, keyword, object_name};
use super::session::Session;

impl Session {
    /// `LOCK TABLES` (after `LOCK`).
    pub(crate) async fn lock_tables(&mut self, rest: &[Token]) -> Result<Reply, MyError> {
        let mut at = tables_keyword(rest, "LOCK")?;
        let mut locks = Vec::new();
        loop {
            let name = object_name(&rest[at..])?;
            at += 2 * name.len() - 1;
            // An alias, with or without AS.
            if keyword(rest.get(at)) == Some(Keyword::AS) {
                at += 1;
            }
            if !matches!(
                keyword(rest.get(at)),
                Some(Keyword::READ | Keyword::WRITE | Keyword::LOW_PRIORITY)
            ) && matches!(rest.get(at), Some(Token::Word(_)))
            {
                at += 1;
            }
            let write = match keyword(rest.get(at)) {
                Some(Keyword::READ) => {
                    at += 1;
                    if keyword(rest.get(at)) == Some(Keyword::LOCAL) {
                        at += 1;
                    }
                    false
                }
                Some(Keyword::LOW_PRIORITY)
                    if keyword(rest.get(at + 1)) == Some(Keyword::WRITE) =>
                {
                    at += 2;
                    true
                }
                Some(Keyword::WRITE) => {
                    at += 1;
                    true
                }
                _ => {
                    return Err(MyError::syntax(
                        "LOCK TABLES takes `table READ` or `table WRITE`",
                    ));
                }
            };
            locks.push((name, write));
            match rest.get(at) {
                None => break,
                Some(Token::Comma) => at += 1,
                Some(_) => {
                    return Err(MyError::syntax(
                        "LOCK TABLES: tables are separated by commas",
                    ));
                }
            }
        }
        for (name, write) in &locks {
            let (table, grant) = self.table_named(name)?;
            if *write {
                self.may_write(&grant, "LOCK TABLES", &table)?;
            }
        }
        self.commit().await?;
        Ok(Reply::done(0))
    }

    /// `UNLOCK TABLES` (after `UNLOCK`).
    pub(crate) fn unlock_tables(&self, rest: &[Token]) -> Result<Reply, MyError> {
        if tables_keyword(rest, "UNLOCK")? != rest.len() {
            return Err(MyError::syntax("UNLOCK TABLES takes nothing more"));
        }
        Ok(Reply::done(0))
    }

    /// `ALTER TABLE t DISABLE KEYS` or `ENABLE KEYS` (after `ALTER TABLE`),
    /// if that is what `rest` is.
    pub(crate) fn toggle_keys(&self, rest: &[Token]) -> Option<Result<Reply, MyError>> {
        let name = object_name(rest).ok()?;
        let at = 2 * name.len() - 1;
        let toggle = matches!(
            keyword(rest.get(at)),
            Some(Keyword::DISABLE | Keyword::ENABLE)
        );
        if !toggle || keyword(rest.get(at + 1)) != Some(Keyword::KEYS) || rest.len() != at + 2 {
            return None;
        }
        Some(
            self.table_named(&name)
                .and_then(|(table, grant)| self.may_write(&grant, "ALTER", &table))
                .map(|()| Reply::done(0)),
        )
    }
}

/// Where what follows `TABLES` (or `TABLE`) starts.
fn tables_keyword(rest: &[Token], statement: &str) -> Result<usize, MyError> {
    match keyword(rest.first()) {
        Some(Keyword::TABLES | Keyword::TABLE) => Ok(1),
        _ => Err(MyError::syntax(format!("{statement} TABLES is meant"))),
    }
}
