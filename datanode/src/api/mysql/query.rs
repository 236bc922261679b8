//! Statements: what a session's SQL asks, planned onto the transaction
//! coordinator — never around it, so the key's grant, the database's
//! rates, quotas and accounting apply exactly as for REST and Redis.
//!
//! The text is tokenized and parsed by `sqlparser` (MySQL's dialect), in
//! bounds: its bytes, its tokens and its nesting. A prepared statement's
//! arguments go in as literal tokens in place of its `?`s, so the
//! arguments of a statement and its literals are checked alike.
//!
//! What is run:
//!
//! - `SELECT` of a table by its whole primary key (`=`, or `IN` a list of
//!   keys, read in one request), with `ORDER BY` and `LIMIT`;
//! - `SELECT` with aggregates or `GROUP BY`: RonSQL, evaluated in the LDM
//!   workers fragment by fragment;
//! - `SELECT` of constants, variables and session functions (no table);
//! - `INSERT` (many rows, one atomic request), `REPLACE`, `INSERT IGNORE`
//!   and `INSERT … ON DUPLICATE KEY UPDATE` (`upsert`), and `UPDATE` and
//!   `DELETE` by key or by a scan, affected rows counted as MySQL counts
//!   them;
//! - the statements clients send to look around: `SET`, `SHOW`,
//!   `DESCRIBE`, `USE`, `COMMIT`/`ROLLBACK` with nothing open.
//!
//! Everything else is refused with error 1235 naming what it is, never a
//! wrong answer.

use std::collections::HashSet;
use std::sync::Arc;

use shoal_wire::apikey::hex;
use sqlparser::ast::{
    self, BinaryOperator, Expr, OrderByKind, SelectItem, SetExpr, Statement, UnaryOperator,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, Tokenizer, Whitespace};

use super::clock;
use super::ddl;
use super::error::MyError;
use super::filter::{Cond, Expression, Inserted};
use super::information_schema::{column_key, indexes, nullable};
use super::order::{self, sort_rows};
use super::proto::{ColumnDef, ty};
use super::scan::{MAX_SCAN_ROWS, Scan, too_many_rows};
use super::session::Session;
use super::show::{Absent, named_rows};
use super::upsert::{OnDuplicate, apply};
use super::value::{self, Cell, Comparand, Lit, column_def, comparand, computed, to_value};
use super::variables;
use crate::sql::eval;
use crate::sql::like::Like;
use crate::storage::codec::{ValueError, encode_key};
use crate::storage::layout::Layout;
use crate::tc::batch::{OperationError, Outcome};
use crate::tc::{Commit, Grant, Role, Table, TcError};
use crate::types::value::{Value, time_of};

/// Longest statement, in bytes.
pub(crate) const MAX_STATEMENT_BYTES: usize = 4 << 20;
/// Most tokens in one statement.
pub(crate) const MAX_TOKENS: usize = 200_000;
/// Deepest nesting of expressions, and of parentheses and of prefix
/// operators in a row (counted on the tokens, before the recursive parser
/// sees them: each level costs it stack).
pub(crate) const MAX_DEPTH: usize = 32;
/// Most keys one statement looks up, or rows one INSERT gives.
pub(crate) const MAX_KEYS: usize = 10_000;

/// What a statement answers.
#[derive(Debug)]
pub(crate) enum Reply {
    /// Done: rows affected, a note, and the first AUTO_INCREMENT value
    /// made (0: none).
    Done {
        affected: u64,
        info: String,
        last_insert_id: u64,
    },
    /// A result set.
    Rows {
        /// Shared: a kept plan answers every execute with the same ones.
        columns: Arc<[ColumnDef]>,
        rows: Vec<Vec<Cell>>,
    },
}

impl Reply {
    pub(super) fn done(affected: u64) -> Reply {
        Reply::Done {
            affected,
            info: String::new(),
            last_insert_id: 0,
        }
    }

    pub(super) fn rows(columns: impl Into<Arc<[ColumnDef]>>, rows: Vec<Vec<Cell>>) -> Reply {
        Reply::Rows {
            columns: columns.into(),
            rows,
        }
    }
}

/// Modifiers of SELECT that change how it runs, never what it answers.
const SELECT_HINTS: [&str; 6] = [
    "SQL_NO_CACHE",
    "SQL_CACHE",
    "SQL_BUFFER_RESULT",
    "SQL_SMALL_RESULT",
    "SQL_BIG_RESULT",
    "HIGH_PRIORITY",
];

/// The version MySQL's executable comments are compared with: 8.0.36.
const COMMENT_VERSION: u64 = 80036;

/// `tokens` without whitespace and comments, but with the SQL of MySQL's
/// executable comments — `/*! … */`, and `/*!80013 … */` for servers of
/// that version or later — as mysqldump and its dumps write them
/// (`/*!40101 SET NAMES utf8mb4 */`). MariaDB's own (`/*M!…`) stay
/// comments.
fn without_comments(tokens: Vec<Token>) -> Result<Vec<Token>, MyError> {
    let mut out = Vec::with_capacity(tokens.len());
    for t in tokens {
        match t {
            Token::Whitespace(Whitespace::MultiLineComment(c)) if c.starts_with('!') => {
                let body = &c[1..];
                let digits = body.bytes().take_while(u8::is_ascii_digit).count();
                if (5..=6).contains(&digits)
                    && body[..digits]
                        .parse::<u64>()
                        .is_ok_and(|v| v > COMMENT_VERSION)
                {
                    continue;
                }
                let inner = Tokenizer::new(&MySqlDialect {}, &body[digits..])
                    .tokenize()
                    .map_err(|e| MyError::syntax(e.message))?;
                out.extend(
                    inner
                        .into_iter()
                        .filter(|t| !matches!(t, Token::Whitespace(_))),
                );
            }
            Token::Whitespace(_) => {}
            t => out.push(t),
        }
    }
    Ok(out)
}

/// A statement's tokens, whitespace and comments dropped (executable
/// comments taken as their SQL).
pub(crate) fn tokenize(text: &str) -> Result<Vec<Token>, MyError> {
    tokenize_sent(text, text.len())
}

/// `tokenize` of a statement the client sent as `sent` bytes, which its
/// text may outgrow (`text::with_byte_literals`): the cap is on those.
pub(crate) fn tokenize_sent(text: &str, sent: usize) -> Result<Vec<Token>, MyError> {
    if sent > MAX_STATEMENT_BYTES {
        return Err(MyError::new(
            1105,
            "HY000",
            format!(
                "the statement is {sent} bytes; at most {} MiB are taken",
                MAX_STATEMENT_BYTES >> 20
            ),
        ));
    }
    let tokens = Tokenizer::new(&MySqlDialect {}, text)
        .tokenize()
        .map_err(|e| MyError::syntax(e.message))?;
    let mut tokens = without_comments(tokens)?;
    crate::tc::ronsql::plan::refuse_div(&tokens)?;
    // SELECT's modifiers that only hint how to run it change no answer
    // (mysqldump sends `SELECT /*!40001 SQL_NO_CACHE */ …`).
    while let (Some(Keyword::SELECT), Some(Token::Word(w))) =
        (keyword(tokens.first()), tokens.get(1))
        && w.quote_style.is_none()
        && SELECT_HINTS.iter().any(|h| w.value.eq_ignore_ascii_case(h))
    {
        tokens.remove(1);
    }
    // One that changes what FOUND_ROWS() answers is refused, not ignored.
    if let (Some(Keyword::SELECT), Some(Token::Word(w))) = (keyword(tokens.first()), tokens.get(1))
        && w.quote_style.is_none()
        && w.value.eq_ignore_ascii_case("SQL_CALC_FOUND_ROWS")
    {
        return Err(MyError::unsupported("SQL_CALC_FOUND_ROWS"));
    }
    if tokens.len() > MAX_TOKENS {
        return Err(MyError::new(
            1105,
            "HY000",
            format!(
                "the statement has {} tokens; at most {MAX_TOKENS} are taken",
                tokens.len()
            ),
        ));
    }
    let (mut depth, mut deepest, mut prefixes, mut most_prefixes) = (0usize, 0, 0usize, 0);
    for t in &tokens {
        match t {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        deepest = deepest.max(depth);
        let prefix = matches!(
            t,
            Token::Minus | Token::Plus | Token::Tilde | Token::ExclamationMark
        ) || matches!(t, Token::Word(w) if w.keyword == Keyword::NOT && w.quote_style.is_none());
        prefixes = if prefix { prefixes + 1 } else { 0 };
        most_prefixes = most_prefixes.max(prefixes);
    }
    if deepest > MAX_DEPTH || most_prefixes > MAX_DEPTH {
        return Err(MyError::new(
            1105,
            "HY000",
            format!("the statement is nested deeper than {MAX_DEPTH} levels"),
        ));
    }
    // A statement may end in `;` and nothing after it.
    while tokens.last() == Some(&Token::SemiColon) {
        tokens.pop();
    }
    if tokens.contains(&Token::SemiColon) {
        return Err(MyError::syntax(
            "one statement at a time: multi-statements are not taken",
        ));
    }
    // MySQL's older spelling of FOR SHARE, which the parser knows.
    let n = tokens.len();
    if n >= 4
        && (tokens[n - 4..].iter().map(|t| word(Some(t))))
            .zip(["LOCK", "IN", "SHARE", "MODE"])
            .all(|(w, k)| w.is_some_and(|w| w.eq_ignore_ascii_case(k)))
    {
        tokens.truncate(n - 4);
        tokens.push(Token::make_keyword("FOR"));
        tokens.push(Token::make_keyword("SHARE"));
    }
    Ok(tokens)
}

/// How many `?`s the statement has.
pub(crate) fn placeholders(tokens: &[Token]) -> usize {
    tokens.iter().filter(|t| is_placeholder(t)).count()
}

fn is_placeholder(t: &Token) -> bool {
    matches!(t, Token::Placeholder(p) if p == "?")
}

/// The tokens with each `?` replaced by its argument, as a literal.
pub(crate) fn bind(tokens: &[Token], args: &[Lit]) -> Vec<Token> {
    let mut args = args.iter().peekable();
    let mut out = Vec::with_capacity(tokens.len());
    for t in tokens {
        match args.next_if(|_| is_placeholder(t)) {
            Some(arg) => bind_one(arg, &mut out),
            None => out.push(t.clone()),
        }
    }
    out
}

/// The tokens an argument is bound as (`prepared::argument` is the
/// expression they parse to).
fn bind_one(arg: &Lit, out: &mut Vec<Token>) {
    let number = |out: &mut Vec<Token>, text: String| match text.strip_prefix('-') {
        Some(positive) => {
            out.push(Token::LParen);
            out.push(Token::Minus);
            out.push(Token::Number(positive.to_owned(), false));
            out.push(Token::RParen);
        }
        None => out.push(Token::Number(text, false)),
    };
    match arg {
        // An argument is a value: never a `?` again.
        Lit::Null | Lit::Param(_) => out.push(Token::make_keyword("NULL")),
        Lit::Bool(b) => out.push(Token::make_keyword(if *b { "TRUE" } else { "FALSE" })),
        Lit::Int(v) => number(out, v.to_string()),
        Lit::UInt(v) => number(out, v.to_string()),
        Lit::Number(n) => number(out, n.clone()),
        Lit::Double(v) => number(out, format!("{v:e}")),
        Lit::Str(b) => match std::str::from_utf8(b) {
            Ok(s) => out.push(Token::SingleQuotedString(s.to_owned())),
            // Bytes that are not text stay bytes: a text column
            // refuses them, a binary one takes them.
            Err(_) => out.push(Token::HexStringLiteral(hex(b))),
        },
        Lit::Bytes(b) => out.push(Token::HexStringLiteral(hex(b))),
    }
}

/// What each `?` stands for while a statement is described: NULL, but 0
/// for a count of rows (after LIMIT or OFFSET, or LIMIT's second number),
/// which NULL cannot be and which changes no column of the answer.
fn stand_ins(tokens: &[Token]) -> Vec<Lit> {
    let significant: Vec<&Token> = (tokens.iter())
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let before = |i: usize, k: usize| i.checked_sub(k).map(|j| significant[j]);
    (0..significant.len())
        .filter(|&i| is_placeholder(significant[i]))
        .map(|i| {
            let count = matches!(
                keyword(before(i, 1)),
                Some(Keyword::LIMIT | Keyword::OFFSET)
            ) || (matches!(before(i, 1), Some(Token::Comma))
                && keyword(before(i, 3)) == Some(Keyword::LIMIT));
            if count { Lit::Int(0) } else { Lit::Null }
        })
        .collect()
}

/// The tokens with each `?` numbered in order (`?0`, `?1`, …), so that a
/// statement parsed once keeps its `?`s apart (`Lit::Param`).
pub(super) fn numbered(tokens: &[Token]) -> Vec<Token> {
    let mut n = 0;
    tokens
        .iter()
        .map(|t| {
            if is_placeholder(t) {
                n += 1;
                Token::Placeholder(format!("?{}", n - 1))
            } else {
                t.clone()
            }
        })
        .collect()
}

/// Parses the one statement `tokens` hold.
pub(super) fn parse(tokens: Vec<Token>) -> Result<Statement, MyError> {
    let mut statements = Parser::new(&MySqlDialect {})
        .with_recursion_limit(MAX_DEPTH)
        .with_tokens(tokens)
        .parse_statements()
        .map_err(parse_error)?;
    match statements.len() {
        1 => {
            let mut statement = statements.pop().expect("one");
            super::alias::unalias(&mut statement)?;
            without_dual(&mut statement);
            Ok(statement)
        }
        0 => Err(MyError::new(1065, "42000", "Query was empty")),
        _ => Err(MyError::syntax(
            "one statement at a time: multi-statements are not taken",
        )),
    }
}

/// `SELECT … FROM DUAL` (MySQL's table of one row and no columns, which
/// connection checks written for Oracle send) as the `SELECT …` without
/// a table it is.
fn without_dual(statement: &mut Statement) {
    let Statement::Query(q) = statement else {
        return;
    };
    let SetExpr::Select(select) = q.body.as_mut() else {
        return;
    };
    if let [from] = select.from.as_slice()
        && from.joins.is_empty()
        && let ast::TableFactor::Table {
            name, alias: None, ..
        } = &from.relation
        && let [part] = name.0.as_slice()
        && part
            .as_ident()
            .is_some_and(|i| i.quote_style.is_none() && i.value.eq_ignore_ascii_case("DUAL"))
    {
        select.from.clear();
    }
}

/// The parser's refusal as MySQL's error: too deep 1105, else 1064.
fn parse_error(e: ParserError) -> MyError {
    match e {
        ParserError::RecursionLimitExceeded => MyError::new(
            1105,
            "HY000",
            format!("the statement is nested deeper than {MAX_DEPTH} levels"),
        ),
        ParserError::TokenizerError(m) | ParserError::ParserError(m) => MyError::syntax(m),
    }
}

/// Parses the condition `tokens` hold, whole (a SHOW's `WHERE`).
pub(super) fn parse_condition(tokens: &[Token]) -> Result<ast::Expr, MyError> {
    let mut parser = Parser::new(&MySqlDialect {})
        .with_recursion_limit(MAX_DEPTH)
        .with_tokens(tokens.to_vec());
    let e = parser.parse_expr().map_err(parse_error)?;
    let _ = parser.consume_token(&Token::SemiColon);
    match parser.peek_token().token {
        Token::EOF => Ok(e),
        other => Err(MyError::syntax(format!(
            "the condition ends before '{other}'"
        ))),
    }
}

/// Whether a statement may be interrupted by `KILL QUERY` where it is:
/// one that reads or writes rows. A change of schema, or the end of a
/// transaction, runs to its end (`processes`).
pub(super) fn interruptible(tokens: &[Token]) -> bool {
    matches!(tokens.first(), Some(Token::LParen))
        || matches!(
            keyword(tokens.first()),
            Some(
                Keyword::SELECT
                    | Keyword::WITH
                    | Keyword::INSERT
                    | Keyword::REPLACE
                    | Keyword::UPDATE
                    | Keyword::DELETE
            )
        )
}

/// The keyword a token is, if it is a word.
pub(super) fn keyword(t: Option<&Token>) -> Option<Keyword> {
    match t {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    }
}

/// A word's text, as a name.
pub(super) fn word(t: Option<&Token>) -> Option<&str> {
    match t {
        Some(Token::Word(w)) => Some(w.value.as_str()),
        _ => None,
    }
}

impl Session {
    /// Runs one statement.
    pub(crate) async fn run(&mut self, tokens: Vec<Token>) -> Result<Reply, MyError> {
        self.now = None;
        // SET keeps its targets; it puts values in place itself.
        let mut tokens = match keyword(tokens.first()) {
            Some(Keyword::SET) => tokens,
            _ => self.user_variables.substitute(tokens),
        };
        match keyword(tokens.first()) {
            Some(Keyword::SHOW) => return self.show(&tokens[1..]).await,
            Some(Keyword::EXPLAIN | Keyword::DESCRIBE | Keyword::DESC) => {
                if explains_statement(&tokens[1..]) {
                    return self.explain(&tokens[1..]).await;
                }
                if tokens.len() <= 4 {
                    return self.show_columns(&tokens[1..], true);
                }
                return Err(MyError::syntax(
                    "EXPLAIN takes a SELECT, an UPDATE or a DELETE, or a table's name",
                ));
            }
            Some(Keyword::SET) => return self.set(&tokens[1..]).await,
            Some(Keyword::KILL) => return self.kill(&tokens[1..]),
            Some(Keyword::LOCK) => return self.lock_tables(&tokens[1..]).await,
            _ if maintenance(&tokens) => {
                let what = word(tokens.first())
                    .unwrap_or_default()
                    .to_ascii_uppercase();
                return Err(MyError::unsupported(format!(
                    "{what} TABLE: Shoal's tables are in memory, with no table files to check, repair or rebuild"
                )));
            }
            Some(Keyword::UNLOCK) => return self.unlock_tables(&tokens[1..]),
            Some(Keyword::CREATE)
                if matches!(
                    keyword(tokens.get(1)),
                    Some(Keyword::DATABASE | Keyword::SCHEMA)
                ) =>
            {
                self.create_database(&tokens[2..])?;
                return Ok(Reply::done(0));
            }
            Some(Keyword::ALTER) if keyword(tokens.get(1)) == Some(Keyword::TABLE) => {
                if let Some(done) = self.toggle_keys(&tokens[2..]) {
                    return done;
                }
                ddl::drop_key_as_drop_index(&mut tokens);
            }
            Some(Keyword::BEGIN) => {
                work_only(&tokens[1..], "BEGIN")?;
                self.begin(false).await?;
                return Ok(Reply::done(0));
            }
            Some(Keyword::START) if keyword(tokens.get(1)) == Some(Keyword::TRANSACTION) => {
                let read_only = start_characteristics(&tokens[2..])?;
                self.begin(read_only).await?;
                return Ok(Reply::done(0));
            }
            Some(Keyword::COMMIT) => {
                work_only(&tokens[1..], "COMMIT")?;
                self.commit().await?;
                return Ok(Reply::done(0));
            }
            Some(Keyword::ROLLBACK) => {
                work_only(&tokens[1..], "ROLLBACK")?;
                self.rollback().await?;
                return Ok(Reply::done(0));
            }
            _ => {}
        }
        let fold = clock::may_fold(&tokens);
        let mut statement = parse(tokens)?;
        if fold {
            self.now = clock::fold(&mut statement)?;
        }
        match statement {
            Statement::Query(q) => self.select(&q).await,
            Statement::Insert(insert) => self.insert(&insert).await,
            update @ Statement::Update { .. } => {
                let change = self.update_of(&update)?;
                self.update(change).await
            }
            Statement::Delete(delete) => {
                let change = self.delete_of(&delete)?;
                self.delete(change).await
            }
            Statement::Use(ast::Use::Object(name)) => {
                let parts = name_parts(&name)?;
                let [db] = parts.as_slice() else {
                    return Err(MyError::syntax("USE takes one database name"));
                };
                self.use_database(db)?;
                Ok(Reply::done(0))
            }
            // A change of schema commits the transaction open first, as in MySQL.
            Statement::CreateTable(ct) => {
                let change = ddl::create_table(&ct)?;
                self.commit().await?;
                self.change_schema(change).await?;
                Ok(Reply::done(0))
            }
            Statement::CreateIndex(ci) => {
                let change = ddl::create_index(&ci)?;
                self.commit().await?;
                self.change_schema(change).await?;
                Ok(Reply::done(0))
            }
            Statement::Drop {
                object_type,
                if_exists,
                names,
                table,
                cascade: false,
                temporary: false,
                ..
            } => {
                let changes = ddl::drop_objects(object_type, if_exists, &names, table.as_ref())?;
                self.commit().await?;
                for change in changes {
                    self.change_schema(change).await?;
                }
                Ok(Reply::done(0))
            }
            Statement::AlterTable {
                name,
                if_exists,
                only: false,
                operations,
                location: None,
                on_cluster: None,
                iceberg: false,
                ..
            } => {
                let change = ddl::alter_table(&name, if_exists, &operations)?;
                self.commit().await?;
                self.change_schema(change).await?;
                Ok(Reply::done(0))
            }
            Statement::Truncate { table_names, .. } => {
                let change = ddl::truncate(&table_names)?;
                self.commit().await?;
                self.change_schema(change).await?;
                Ok(Reply::done(0))
            }
            other => Err(MyError::unsupported(statement_kind(&other))),
        }
    }

    /// Whether a kept plan still holds: its table is the catalog's now
    /// (not dropped, made again, nor given or stripped of an index since).
    pub(crate) fn plan_holds(&self, l: &Lookup) -> bool {
        use std::sync::atomic::Ordering;
        // Read before the look: a change after it makes the next look again.
        let version = self.engine.catalog_version();
        if l.current_at.load(Ordering::Acquire) == version {
            return true;
        }
        let (db, name) = (l.table.database.name.as_str(), l.table.name().as_str());
        let holds = (self.engine.table(db, name)).is_ok_and(|now| Arc::ptr_eq(&now, &l.table));
        if holds {
            l.current_at.store(version, Ordering::Release);
        }
        holds
    }

    /// The columns a statement answers, for a client preparing it: found
    /// by planning it with NULL for every argument.
    pub(crate) async fn describe(&mut self, tokens: &[Token]) -> Result<Vec<ColumnDef>, MyError> {
        let bound = self
            .user_variables
            .substitute(bind(tokens, &stand_ins(tokens)));
        match keyword(bound.first()) {
            Some(Keyword::SELECT) => {}
            Some(Keyword::EXPLAIN | Keyword::DESCRIBE | Keyword::DESC)
                if explains_statement(&bound[1..]) =>
            {
                return Ok(super::explain::columns());
            }
            _ => return Ok(Vec::new()),
        }
        let mut statement = parse(bound)?;
        clock::fold(&mut statement)?;
        let Statement::Query(q) = statement else {
            return Ok(Vec::new());
        };
        Ok(self.plan_select(&q)?.columns())
    }

    pub(super) async fn select(&mut self, q: &ast::Query) -> Result<Reply, MyError> {
        // `sql_select_limit`: the LIMIT of a SELECT that gives none.
        let implicit = (q.limit_clause.is_none() && self.safety.select_limit != u64::MAX)
            .then_some(self.safety.select_limit);
        match self.plan_select(q)? {
            Select::Constant { columns, rows } => Ok(at_most(Reply::rows(columns, rows), implicit)),
            Select::Keys(lookup) => self.lookup(&lookup, &[]).await,
            Select::System(n) => (self.system(&n).await).map(|r| at_most(r, implicit)),
            Select::Scan {
                scan,
                grant,
                mut shape,
                lock,
            } => {
                shape.limit = shape.limit.or(implicit);
                let mut found = self.scan_rows(&grant, &scan, shape.enough()).await?;
                // Outside a transaction a locking read locks nothing: it reads.
                if lock && self.can_lock() {
                    self.may_write(&grant, "SELECT … FOR UPDATE", &scan.table)?;
                    found = self.lock_found(&grant, &scan, &shape, found).await?;
                }
                shape.answer(found)
            }
            Select::Aggregate {
                plan,
                grant,
                columns,
            } => {
                let mut plan = *plan;
                let tc = self.engine.tc();
                tc.choose_access(&mut plan).await.map_err(query_error)?;
                let rows = (tc.ronsql(&grant, self.reader(), &plan).await).map_err(query_error)?;
                let rows = rows
                    .into_iter()
                    .map(|r| r.into_iter().map(Cell::Datum).collect())
                    .collect();
                Ok(at_most(Reply::rows(columns, rows), implicit))
            }
        }
    }

    /// How a SELECT is answered.
    pub(super) fn plan_select(&mut self, q: &ast::Query) -> Result<Select, MyError> {
        let select = crate::tc::ronsql::plan::select_of(q)?;
        if select.from.is_empty() {
            return self.constant_select(q, select);
        }
        let (db, table_name) = crate::tc::ronsql::plan::table_of(q)?;
        if db
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("ndbinfo"))
        {
            if lock_of(q)? {
                return Err(MyError::unsupported("a locking read of an ndbinfo table"));
            }
            let table = self.ndbinfo_table(&table_name)?;
            return Ok(Select::System(self.plan_system(table, q, select)?));
        }
        if db
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("information_schema"))
        {
            if lock_of(q)? {
                return Err(MyError::unsupported(
                    "a locking read of an information_schema table",
                ));
            }
            let table = self.information_table(&table_name)?;
            return Ok(Select::System(self.plan_system(table, q, select)?));
        }
        if let Some(schema) = db.as_deref()
            && (schema.eq_ignore_ascii_case("mysql")
                || schema.eq_ignore_ascii_case("performance_schema"))
        {
            return Err(MyError::unsupported(format!("{schema} tables over SQL")));
        }
        let (table, grant) = self.table(db.as_deref(), &table_name)?;
        let aggregates = !matches!(&select.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty())
            || select.projection.iter().any(|item| match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    crate::tc::ronsql::plan::has_aggregate(e)
                }
                _ => false,
            });
        let lock = lock_of(q)?;
        if aggregates {
            if lock {
                return Err(MyError::unsupported("a locking read of an aggregate"));
            }
            let plan = crate::tc::ronsql::plan::plan(false, q, Arc::clone(&table))?;
            let columns = ronsql_columns(&plan);
            return Ok(Select::Aggregate {
                plan: Box::new(plan),
                grant,
                columns,
            });
        }
        if select.having.is_some() {
            return Err(MyError::unsupported("HAVING without GROUP BY"));
        }
        let distinct = match &select.distinct {
            None => false,
            Some(ast::Distinct::Distinct) => true,
            Some(ast::Distinct::On(_)) => return Err(MyError::unsupported("DISTINCT ON")),
        };
        let db_name = table.database.name.to_string();
        let def = table.def();
        let width = def.columns.len();
        let mut computed = Vec::new();
        // A column of the table, else a value computed from each row.
        let mut output = |e: &Expr, place: &str| match column_of(&table, e, place) {
            Err(err) if err.is_unsupported() => {
                let (expr, ty) = crate::tc::ronsql::plan::row_value(&table, e)?;
                computed.push(expr);
                Ok((width + computed.len() - 1, Some(ty)))
            }
            found => found.map(|c| (c, None)),
        };
        let table_column = |c: usize| {
            column_def(
                &db_name,
                def.name.as_str(),
                &def.columns[c],
                is_key(&table, c),
            )
        };
        let mut outputs = Vec::new();
        let mut columns = Vec::new();
        // Each output's alias, if it has one.
        let mut aliases: Vec<Option<&str>> = Vec::new();
        for item in &select.projection {
            let (e, alias) = match item {
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                    for c in 0..width {
                        outputs.push(c);
                        aliases.push(None);
                        columns.push(table_column(c));
                    }
                    continue;
                }
                SelectItem::UnnamedExpr(e) => (e, None),
                SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.as_str())),
            };
            let (c, ty) = output(e, "field list")?;
            let mut column = match ty {
                None => table_column(c),
                Some(ty) => value::computed_of(&e.to_string(), ty),
            };
            if let Some(alias) = alias {
                column.name = alias.to_owned();
            }
            outputs.push(c);
            aliases.push(alias);
            columns.push(column);
        }
        // As MySQL resolves ORDER BY: an output's alias, an output's
        // position (from 1), else a column of the table or a value
        // computed from it.
        let order = order_of(q, |e| {
            match e {
                Expr::Identifier(name) => {
                    let named =
                        |a: &Option<&str>| a.is_some_and(|a| a.eq_ignore_ascii_case(&name.value));
                    if let Some(at) = aliases.iter().position(named) {
                        return Ok(outputs[at]);
                    }
                }
                Expr::Value(v) => {
                    if let ast::Value::Number(n, _) = &v.value {
                        return (n.parse::<usize>().ok())
                            .and_then(|n| n.checked_sub(1))
                            .and_then(|at| outputs.get(at).copied())
                            .ok_or_else(|| MyError::no_column(n, "order clause"));
                    }
                }
                _ => {}
            }
            output(e, "order clause").map(|(c, _)| c)
        })?;
        let (limit, offset) = limit_of(q)?;
        let computed = (!computed.is_empty()).then(|| Computed {
            layout: Arc::clone(&table.layout),
            exprs: computed,
        });
        let shape = Shape {
            outputs,
            columns: columns.into(),
            order,
            distinct,
            limit,
            offset,
            computed,
        };
        let keys = match &select.selection {
            Some(filter) => key_lits(&table, filter)?,
            None => None,
        };
        if let Some(keys) = keys {
            let reads = shape.reads(&table);
            return Ok(Select::Keys(Lookup {
                table,
                current_at: std::sync::atomic::AtomicU64::new(u64::MAX),
                keys,
                lock,
                shape,
                reads,
            }));
        }
        let cond = select
            .selection
            .as_ref()
            .map(|w| Cond::of(table.as_ref(), w))
            .transpose()?;
        // A locking read locks the rows it answers by their keys.
        let keys = key_positions(&table).filter(|_| lock);
        let reads = (shape.outputs.iter().copied())
            .chain(shape.order.iter().map(|&(c, _)| c))
            .filter(|&c| c < width)
            .chain(shape.computed.iter().flat_map(Computed::reads))
            .chain(keys);
        Ok(Select::Scan {
            scan: Scan::plan(&table, cond, reads),
            grant,
            shape,
            lock,
        })
    }

    /// A SELECT without a table: constants, variables, session functions.
    fn constant_select(&self, q: &ast::Query, select: &ast::Select) -> Result<Select, MyError> {
        if select.selection.is_some() || q.order_by.is_some() {
            return Err(MyError::unsupported("WHERE or ORDER BY without a table"));
        }
        let mut columns = Vec::new();
        let mut row = Vec::new();
        for item in &select.projection {
            let (e, name) = match item {
                SelectItem::UnnamedExpr(e) => (e, e.to_string()),
                SelectItem::ExprWithAlias { expr, alias } => (expr, alias.value.clone()),
                _ => return Err(MyError::new(1096, "HY000", "No tables used")),
            };
            let cell = match self.constant(e) {
                Err(refused) if refused.is_unsupported() => {
                    // Anything else computed as over a row, of no row.
                    use crate::tc::ronsql::plan;
                    let (expr, ty) = plan::constant_value(e)?;
                    let none = eval::Values {
                        layout: plan::no_row(),
                        values: &[],
                    };
                    let value = expr.eval(none)?.to_value();
                    columns.push(value::computed_of(&name, ty));
                    row.push(Cell::Value(value));
                    continue;
                }
                cell => cell?,
            };
            let t = match &cell {
                Cell::Value(Value::Int(_) | Value::UInt(_)) => ty::LONGLONG,
                Cell::Value(Value::Double(_)) => ty::DOUBLE,
                Cell::Value(Value::Null) => ty::NULL,
                _ => ty::VAR_STRING,
            };
            // BIGINT UNSIGNED, as MySQL types CONNECTION_ID() and
            // LAST_INSERT_ID(): drivers decode them as unsigned.
            let unsigned = matches!(cell, Cell::Value(Value::UInt(_)));
            // A date or date-time (NOW(), DATE '…') is sent as one, so
            // that drivers read it as one.
            let moment = match e {
                Expr::TypedString(t) => clock::Moment::of_typed(t).and_then(Result::ok),
                _ => None,
            };
            columns.push(match moment {
                Some(m) => value::computed_moment(&name, m),
                None if unsigned => value::unsigned(computed(&name, t)),
                None => computed(&name, t),
            });
            row.push(cell);
        }
        let (limit, offset) = limit_of(q)?;
        let rows = if limit == Some(0) || offset > 0 {
            Vec::new()
        } else {
            vec![row]
        };
        Ok(Select::Constant { columns, rows })
    }

    /// The value of a constant expression.
    fn constant(&self, e: &Expr) -> Result<Cell, MyError> {
        match e {
            Expr::Nested(inner) => self.constant(inner),
            Expr::Identifier(i) if i.value.starts_with("@@") => self.variable(&i.value[2..]),
            Expr::CompoundIdentifier(parts)
                if parts.first().is_some_and(|p| p.value.starts_with("@@")) =>
            {
                let name = parts.last().map_or("", |p| p.value.as_str());
                self.variable(name)
            }
            Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_uppercase();
                if !no_arguments(f) {
                    return Err(MyError::unsupported(format!(
                        "the function {name} with arguments"
                    )));
                }
                Ok(match name.as_str() {
                    "DATABASE" | "SCHEMA" => match &self.database {
                        Some(db) => Cell::from(db.as_str()),
                        None => Cell::Value(Value::Null),
                    },
                    "USER" | "CURRENT_USER" | "SESSION_USER" | "SYSTEM_USER" => {
                        Cell::from(format!("{}@%", self.user))
                    }
                    "VERSION" => Cell::from(super::VERSION),
                    "CONNECTION_ID" => Cell::from(u64::from(self.id)),
                    "LAST_INSERT_ID" => Cell::from(self.last_insert_id),
                    "ROW_COUNT" => Cell::from(self.row_count),
                    "FOUND_ROWS" => Cell::from(self.found_rows),
                    _ => return Err(MyError::unsupported(format!("the function {name}"))),
                })
            }
            other => match literal(other)? {
                Some(Lit::Null) => Ok(Cell::Value(Value::Null)),
                Some(Lit::Int(v)) => Ok(Cell::from(v)),
                Some(Lit::UInt(v)) => Ok(Cell::from(v)),
                Some(Lit::Number(n)) => Ok(Cell::from(n)),
                Some(Lit::Double(v)) => Ok(Cell::Value(Value::Double(v))),
                Some(Lit::Str(s) | Lit::Bytes(s)) => Ok(Cell::Value(Value::Bytes(s))),
                Some(Lit::Bool(b)) => Ok(Cell::from(i64::from(b))),
                Some(Lit::Param(_)) => Err(MyError::bad_arguments("a ? was given no value")),
                None => Err(MyError::unsupported(format!(
                    "the expression '{other}' without a table"
                ))),
            },
        }
    }

    /// Reads the rows of `l`'s keys, with `args` for its `?`s.
    pub(crate) async fn lookup(&mut self, l: &Lookup, args: &[Lit]) -> Result<Reply, MyError> {
        let keys = expand_keys(&l.table, &l.keys, args)?;
        // The key's grant now: it may have changed since `l` was planned
        // (the plan holds: its table's database is the catalog's).
        let grant = self.grant_on(&l.table.database)?;
        // Outside a transaction a locking read locks nothing: it reads.
        let locking = l.lock && self.can_lock();
        if locking {
            self.may_write(&grant, "SELECT … FOR UPDATE", &l.table)?;
        }
        let mut batch = match self.spare_batch.take() {
            Some(batch) => batch,
            None => self.engine.tc().batch(),
        };
        for key in keys.iter() {
            let read = if locking {
                batch.read_locking(&l.table, key)
            } else {
                batch.read(&l.table, key)
            };
            read?;
        }
        self.execute(&grant, &mut batch, Commit::Each).await?;
        // In key order, as the keys are.
        let mut found = Vec::with_capacity(keys.len());
        for i in 0..keys.len() {
            if let Some(row) = batch.found(i)? {
                // Only the columns the answer reads are decoded.
                let values = (l.reads.iter().enumerate())
                    .map(|(c, &read)| {
                        if read {
                            row.value(c as u16)
                        } else {
                            Value::Null
                        }
                    })
                    .collect();
                found.push(values);
            }
        }
        self.spare_batch = batch.recycle(KEEP_BATCH);
        // `sql_select_limit`, for a SELECT that gives no LIMIT.
        let implicit = l.shape.limit.is_none().then_some(self.safety.select_limit);
        Ok(at_most(l.shape.answer(found)?, implicit))
    }

    async fn insert(&mut self, insert: &ast::Insert) -> Result<Reply, MyError> {
        let set_form;
        let insert = if insert.assignments.is_empty() {
            insert
        } else {
            set_form = set_as_values(insert)?;
            &set_form
        };
        if insert.returning.is_some()
            || insert.partitioned.is_some()
            || insert.or.is_some()
            || (insert.insert_alias.is_some() && insert.on.is_none())
            || (insert.replace_into && (insert.ignore || insert.on.is_some()))
        {
            return Err(MyError::unsupported("this form of INSERT"));
        }
        let ast::TableObject::TableName(name) = &insert.table else {
            return Err(MyError::unsupported("INSERT into a table function"));
        };
        let parts = name_parts(name)?;
        let (table, grant) = match parts.as_slice() {
            [t] => self.table(None, t)?,
            [db, t] => self.table(Some(db), t)?,
            _ => return Err(MyError::syntax(format!("'{name}' is not a table name"))),
        };
        let command = if insert.replace_into {
            "REPLACE"
        } else {
            "INSERT"
        };
        self.may_write(&grant, command, &table)?;
        let def = table.def();
        let on_duplicate = match &insert.on {
            None if insert.ignore => Some(OnDuplicate::Skip),
            // A REPLACE whose row may meet others by a UNIQUE index deletes
            // them too, which takes reading them first; without one it
            // meets only the row with its key, replaced in one write.
            None if insert.replace_into && table.layout.ordered.iter().any(|o| o.unique) => {
                Some(OnDuplicate::Replace)
            }
            None => None,
            Some(ast::OnInsert::DuplicateKeyUpdate(set)) => {
                Some(OnDuplicate::Update(on_duplicate_set(&table, insert, set)?))
            }
            Some(_) => return Err(MyError::unsupported("INSERT … ON CONFLICT")),
        };
        let columns: Vec<usize> = if insert.columns.is_empty() {
            (0..def.columns.len()).collect()
        } else {
            let mut columns = Vec::with_capacity(insert.columns.len());
            for ident in &insert.columns {
                let c = position(&table, &ident.value)
                    .ok_or_else(|| MyError::no_column(&ident.value, "field list"))?;
                if columns.contains(&c) {
                    return Err(MyError::new(
                        1110,
                        "42000",
                        format!("Column '{}' specified twice", ident.value),
                    ));
                }
                columns.push(c);
            }
            columns
        };
        let Some(source) = &insert.source else {
            return Err(MyError::unsupported("INSERT without VALUES"));
        };
        let SetExpr::Values(values) = source.body.as_ref() else {
            return Err(MyError::unsupported("INSERT … SELECT"));
        };
        if values.rows.len() > MAX_KEYS {
            return Err(MyError::new(
                1105,
                "HY000",
                format!(
                    "an INSERT gives at most {MAX_KEYS} rows; this one gives {}",
                    values.rows.len()
                ),
            ));
        }
        // Each row's values by column; `None`: not given.
        let mut rows: Vec<Vec<Option<Value>>> = Vec::with_capacity(values.rows.len());
        for (r, row) in values.rows.iter().enumerate() {
            if row.len() != columns.len() {
                return Err(MyError::new(
                    1136,
                    "21S01",
                    format!("Column count doesn't match value count at row {}", r + 1),
                ));
            }
            let mut given = vec![None; def.columns.len()];
            for (&c, e) in columns.iter().zip(row) {
                let column = &def.columns[c];
                given[c] = match e {
                    Expr::Identifier(i)
                        if i.value.eq_ignore_ascii_case("DEFAULT") && i.quote_style.is_none() =>
                    {
                        None
                    }
                    other => {
                        let lit = literal(other)?.ok_or_else(|| {
                            MyError::unsupported(format!("the value '{other}' (only constants)"))
                        })?;
                        // NULL or 0 for an AUTO_INCREMENT column asks for
                        // the next value, as MySQL takes it.
                        if column.auto_increment
                            && matches!(lit, Lit::Null | Lit::Int(0) | Lit::UInt(0))
                        {
                            None
                        } else {
                            Some(to_value(&lit, column)?)
                        }
                    }
                };
            }
            rows.push(given);
        }
        let first_generated = self.auto_increment(&table, &grant, &mut rows).await?;
        let n = values.rows.len();
        let (affected, duplicates) = if let Some(on) = &on_duplicate {
            let now = self.instant();
            let whole = (rows.iter().cloned())
                .map(|given| checked_row(&table, whole_row(&table, given, now)?))
                .collect::<Result<Vec<_>, _>>()?;
            let met = self.insert_meeting(&table, &grant, &whole, on).await?;
            (met.affected, met.duplicates)
        } else {
            let now = self.instant();
            let tc = self.engine.tc();
            let mut batch = tc.batch();
            batch.at(now);
            for given in &rows {
                // MySQL's REPLACE writes a new row: what it leaves out is
                // the column's default, or NULL, not the old row's value.
                let named: Vec<(&str, Value)> = if insert.replace_into {
                    let names = def.columns.iter().map(|c| c.name.as_str());
                    names.zip(whole_row(&table, given.clone(), now)?).collect()
                } else {
                    (def.columns.iter().zip(given))
                        .filter_map(|(column, v)| Some((column.name.as_str(), v.clone()?)))
                        .collect()
                };
                let put = if insert.replace_into {
                    batch.replace(&table, &named)
                } else {
                    batch.insert(&table, &named)
                };
                put?;
            }
            self.execute(&grant, &mut batch, Commit::Atomic).await?;
            let replaced = (0..n)
                .filter(|&i| matches!(batch.result(i), Ok(Outcome::Updated)))
                .count() as u64;
            // A replaced row counts twice: deleted, then inserted.
            (n as u64 + replaced, replaced)
        };
        if let Some(auto) = def.columns.iter().position(|c| c.auto_increment) {
            for given in &rows {
                match &given[auto] {
                    Some(Value::Int(v)) if *v > 0 => table.auto_increment.saw(*v as u64),
                    Some(Value::UInt(v)) => table.auto_increment.saw(*v),
                    _ => {}
                }
            }
        }
        if let Some(first) = first_generated {
            self.last_insert_id = first;
        }
        let info = if n > 1 {
            format!("Records: {n}  Duplicates: {duplicates}  Warnings: 0")
        } else {
            String::new()
        };
        Ok(Reply::Done {
            affected,
            info,
            last_insert_id: first_generated.unwrap_or(0),
        })
    }

    /// Gives every row that leaves its AUTO_INCREMENT column out the next
    /// value, in row order: the first value given, if any.
    async fn auto_increment(
        &self,
        table: &Arc<Table>,
        grant: &Grant,
        rows: &mut [Vec<Option<Value>>],
    ) -> Result<Option<u64>, MyError> {
        let def = table.def();
        let Some(auto) = def.columns.iter().position(|c| c.auto_increment) else {
            return Ok(None);
        };
        let wanted = rows.iter().filter(|r| r[auto].is_none()).count() as u64;
        if wanted == 0 {
            return Ok(None);
        }
        let column = &def.columns[auto];
        let largest = async {
            // Once per table on this node: one past the largest value held.
            let text = format!("SELECT MAX(`{}`) FROM `{}`", column.name, def.name);
            let (_, q) = crate::tc::ronsql::plan::parse(&text)?;
            let mut plan = crate::tc::ronsql::plan::plan(false, &q, Arc::clone(table))?;
            let tc = self.engine.tc();
            tc.choose_access(&mut plan).await.map_err(query_error)?;
            let answer = tc.ronsql(grant, None, &plan).await.map_err(query_error)?;
            Ok::<u64, MyError>(match answer.first().and_then(|r| r.first()) {
                Some(crate::sql::eval::Scalar::Int(v)) if *v > 0 => {
                    u64::try_from(*v).unwrap_or(u64::MAX)
                }
                _ => 0,
            })
        };
        let first = table.auto_increment.take(wanted, largest).await?;
        // A value past the column's type is refused when the row is
        // encoded, as any value is.
        let wanting = rows.iter_mut().filter(|r| r[auto].is_none());
        for (next, row) in (first..).zip(wanting) {
            row[auto] = Some(Value::UInt(next));
        }
        Ok(Some(first))
    }

    /// An UPDATE statement's change of its one table, checked as it runs.
    pub(super) fn update_of<'a>(&self, update: &'a Statement) -> Result<Change<'a>, MyError> {
        let Statement::Update {
            table,
            assignments,
            from,
            selection,
            returning,
            or,
            limit,
        } = update
        else {
            return Err(MyError::syntax("not an UPDATE"));
        };
        if from.is_some() || returning.is_some() || or.is_some() {
            return Err(MyError::unsupported("UPDATE with FROM or RETURNING"));
        }
        if !table.joins.is_empty() {
            return Err(MyError::unsupported("UPDATE of several tables"));
        }
        let (table, grant) = self.table_named(&relation_name(&table.relation)?)?;
        self.may_write(&grant, "UPDATE", &table)?;
        let mut set = Vec::with_capacity(assignments.len());
        for a in assignments {
            let c = assigned(&table, a, "UPDATE")?;
            set.push((c, Expression::of(&table, c, &a.value)?));
        }
        let pick = Pick {
            order: Vec::new(),
            limit: limit.as_ref().map(row_limit).transpose()?,
        };
        let selection = selection.as_ref();
        Ok(Change {
            keys: keys_named(&table, selection)?,
            table,
            grant,
            selection,
            pick,
            set,
        })
    }

    /// A DELETE statement's change of its one table, checked as it runs.
    pub(super) fn delete_of<'a>(&self, delete: &'a ast::Delete) -> Result<Change<'a>, MyError> {
        if delete.using.is_some() || delete.returning.is_some() || !delete.tables.is_empty() {
            return Err(MyError::unsupported(
                "DELETE with USING or of several tables",
            ));
        }
        let (ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from)) =
            &delete.from;
        let [from] = from.as_slice() else {
            return Err(MyError::unsupported("DELETE from several tables"));
        };
        if !from.joins.is_empty() {
            return Err(MyError::unsupported("DELETE with a JOIN"));
        }
        let (table, grant) = self.table_named(&relation_name(&from.relation)?)?;
        self.may_write(&grant, "DELETE", &table)?;
        let pick = Pick {
            order: order_exprs(&delete.order_by, |e| column_of(&table, e, "order clause"))?,
            limit: delete.limit.as_ref().map(row_limit).transpose()?,
        };
        let selection = delete.selection.as_ref();
        Ok(Change {
            keys: keys_named(&table, selection)?,
            table,
            grant,
            selection,
            pick,
            set: Vec::new(),
        })
    }

    async fn update(&mut self, change: Change<'_>) -> Result<Reply, MyError> {
        let Change {
            table,
            grant,
            selection,
            keys,
            pick,
            set,
        } = change;
        // Each row is locked and read first: the new values may come from
        // it, and MySQL counts the rows whose values changed.
        let (keys, scan) = (self.rows_to_change(&grant, &table, keys, selection, &pick)).await?;
        let (matched, changed) = self
            .change_locked(&grant, &table, &keys, scan.as_ref(), Some(&set))
            .await?;
        Ok(Reply::Done {
            affected: if self.found_rows() { matched } else { changed },
            info: format!("Rows matched: {matched}  Changed: {changed}  Warnings: 0"),
            last_insert_id: 0,
        })
    }

    async fn delete(&mut self, change: Change<'_>) -> Result<Reply, MyError> {
        let Change {
            table,
            grant,
            selection,
            keys,
            pick,
            ..
        } = change;
        let affected = match keys {
            Some(keys) if !self.in_transaction() && pick.is_all() => {
                let absent = |e: &OperationError| matches!(e, OperationError::NotFound { .. });
                self.change_dropping(&grant, keys.len(), absent, |batch, i| {
                    batch.delete(&table, &keys[i])
                })
                .await?
            }
            keys => {
                let (keys, scan) =
                    (self.rows_to_change(&grant, &table, keys, selection, &pick)).await?;
                self.change_locked(&grant, &table, &keys, scan.as_ref(), None)
                    .await?
                    .0
            }
        };
        Ok(Reply::done(affected))
    }

    /// The keys of the rows an UPDATE or DELETE may change: `keys` if its
    /// WHERE names them (and it takes every row), else those of the rows a
    /// scan finds passing it, the first `pick.limit` in `pick.order` (and
    /// the scan, to check each row again once it is locked).
    async fn rows_to_change(
        &mut self,
        grant: &Grant,
        table: &Arc<Table>,
        keys: Option<Vec<Vec<Value>>>,
        selection: Option<&Expr>,
        pick: &Pick,
    ) -> Result<(Vec<Vec<Value>>, Option<Scan>), MyError> {
        if let Some(keys) = keys
            && pick.is_all()
        {
            return Ok((keys, None));
        }
        let cond = selection.map(|w| Cond::of(table.as_ref(), w)).transpose()?;
        let reads = key_positions(table).chain(pick.order.iter().map(|&(c, _)| c));
        let scan = Scan::plan(table, cond, reads);
        if self.safety.safe_updates && pick.limit.is_none() && !scan.by_index() {
            return Err(MyError::new(
                1175,
                "HY000",
                "You are using safe update mode and you tried to update a table without a WHERE that uses a KEY column (sql_safe_updates = 1: name rows by a key or an index, or give a LIMIT)",
            ));
        }
        let limit = pick.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        // Without an order, the first rows found are as good as any.
        let enough = if pick.order.is_empty() { limit } else { None };
        let mut rows = self.scan_rows(grant, &scan, enough).await?;
        sort_rows(&mut rows, &pick.order);
        if let Some(limit) = limit {
            rows.truncate(limit);
        }
        let keys = rows
            .into_iter()
            .map(|row| key_positions(table).map(|c| row[c].clone()).collect())
            .collect();
        Ok((keys, Some(scan)))
    }

    /// The rows of a locking read by a scan (`found`, in the session's
    /// transaction), locked: each locked by its key and checked against
    /// the WHERE again as locked — a row changed or gone since the scan
    /// saw it is left out, as NDB's locking scans do. Under a LIMIT
    /// (without DISTINCT) only the rows the answer takes are locked, in
    /// its order; for each row left out the next is locked, scanning on
    /// for more where the scan stopped at enough, so that the answer has
    /// as many rows as pass.
    async fn lock_found(
        &mut self,
        grant: &Grant,
        scan: &Scan,
        shape: &Shape,
        mut found: Vec<Vec<Value>>,
    ) -> Result<Vec<Vec<Value>>, MyError> {
        let table = &scan.table;
        let key_of = |row: &Vec<Value>| -> Vec<Value> {
            key_positions(table).map(|c| row[c].clone()).collect()
        };
        let need = match shape.limit {
            Some(limit) if !shape.distinct => {
                usize::try_from(limit.saturating_add(shape.offset)).unwrap_or(usize::MAX)
            }
            _ => {
                let keys: Vec<Vec<Value>> = found.iter().map(key_of).collect();
                return self.lock_rows(grant, scan, &keys).await;
            }
        };
        let mut rows = Vec::new();
        // The encoded keys of the rows locked so far.
        let mut tried = HashSet::new();
        // How many rows the scan that found `found` stopped at.
        let mut asked = shape.enough();
        loop {
            let scanned_all = asked.is_none_or(|asked| found.len() < asked);
            shape.extend(&mut found)?;
            sort_rows(&mut found, &shape.order);
            let mut fresh = found.iter().map(key_of).filter(|key| {
                let mut encoded = Vec::new();
                // A key the scan read back encodes as it was stored.
                encode_key(&table.layout, key, &mut encoded).is_ok() && tried.insert(encoded)
            });
            while rows.len() < need {
                let next: Vec<Vec<Value>> = fresh.by_ref().take(need - rows.len()).collect();
                if next.is_empty() {
                    break;
                }
                rows.extend(self.lock_rows(grant, scan, &next).await?);
            }
            if rows.len() >= need || scanned_all {
                return Ok(rows);
            }
            if tried.len() > MAX_SCAN_ROWS {
                return Err(too_many_rows(table));
            }
            // The scan stopped at enough, and some of its rows were left
            // out: scan again for as many more as were left out.
            let want = tried.len() + (need - rows.len());
            found = self.scan_rows(grant, scan, Some(want)).await?;
            asked = Some(want);
        }
    }

    /// The rows of `scan`'s table with `keys`, locked in the session's
    /// transaction: those still there and passing `scan`'s WHERE as
    /// locked.
    async fn lock_rows(
        &mut self,
        grant: &Grant,
        scan: &Scan,
        keys: &[Vec<Value>],
    ) -> Result<Vec<Vec<Value>>, MyError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut locked = self.engine.tc().batch();
        for key in keys {
            locked.read_locking(&scan.table, key)?;
        }
        self.execute(grant, &mut locked, Commit::Atomic).await?;
        let mut rows = Vec::with_capacity(keys.len());
        for i in 0..keys.len() {
            if let Ok(Outcome::Found(row)) = locked.result(i) {
                let values = row.into_values();
                if scan.passes(&values)? {
                    rows.push(values);
                }
            }
        }
        Ok(rows)
    }

    /// Changes the rows of `table` with `keys` in one transaction — the
    /// session's, or the statement's own: each row is locked and read,
    /// checked again against `scan`'s WHERE if it was found by one, and
    /// then updated by `set` (its new values worked out from the row as
    /// locked) or, without `set`, deleted. Answers the rows matched and
    /// the rows changed (an update that leaves a row as it was matched it).
    async fn change_locked(
        &mut self,
        grant: &Grant,
        table: &Arc<Table>,
        keys: &[Vec<Value>],
        scan: Option<&Scan>,
        set: Option<&[(usize, Expression)]>,
    ) -> Result<(u64, u64), MyError> {
        if keys.is_empty() {
            return Ok((0, 0));
        }
        let tc = self.engine.tc().clone();
        let mut own = (!self.in_transaction()).then(|| tc.begin());
        let mut locked = tc.batch();
        for key in keys {
            locked.read_locking(table, key)?;
        }
        self.run_within(&mut own, grant, &mut locked).await?;
        let def = table.def();
        let (mut matched, mut changes) = (0, tc.batch());
        changes.at(self.instant());
        for (i, key) in keys.iter().enumerate() {
            let Ok(Outcome::Found(row)) = locked.result(i) else {
                continue;
            };
            let values = row.into_values();
            if let Some(s) = scan
                && !s.passes(&values)?
            {
                continue;
            }
            matched += 1;
            let Some(set) = set else {
                changes.delete(table, key)?;
                continue;
            };
            let mut values = values;
            if !apply(table, set, &mut values)? {
                continue;
            }
            let mut columns: Vec<usize> = key_positions(table).collect();
            for (c, _) in set {
                if !columns.contains(c) {
                    columns.push(*c);
                }
            }
            let row: Vec<(&str, Value)> = (columns.into_iter())
                .map(|c| (def.columns[c].name.as_str(), values[c].clone()))
                .collect();
            changes.update(table, &row)?;
        }
        let changed = changes.len() as u64;
        if !changes.is_empty() {
            self.run_within(&mut own, grant, &mut changes).await?;
        }
        if let Some(t) = own {
            tc.commit(t).await.map_err(MyError::from)?;
        }
        Ok((matched, changed))
    }

    /// Runs `batch` in the statement's own transaction if it has one,
    /// else in the session's.
    pub(super) async fn run_within(
        &mut self,
        own: &mut Option<crate::tc::Transaction>,
        grant: &Grant,
        batch: &mut crate::tc::batch::Batch,
    ) -> Result<(), MyError> {
        match own {
            Some(t) => {
                let tc = self.engine.tc().clone();
                tc.execute_in(grant, t, batch).await.map_err(MyError::from)
            }
            None => self.execute(grant, batch, Commit::Atomic).await,
        }
    }

    /// Runs `n` changes as one atomic request of those that can be made:
    /// a change that fails as `drops` allows (its row is not there, or its
    /// key is taken) is dropped and the rest tried again, so the statement
    /// makes every change it can, or none. Answers how many it made.
    pub(super) async fn change_dropping<F>(
        &mut self,
        grant: &Grant,
        n: usize,
        drops: impl Fn(&OperationError) -> bool,
        add: F,
    ) -> Result<u64, MyError>
    where
        F: Fn(&mut crate::tc::batch::Batch, usize) -> Result<(), crate::storage::codec::ValueError>,
    {
        let tc = self.engine.tc().clone();
        let mut wanted: Vec<usize> = (0..n).collect();
        loop {
            if wanted.is_empty() {
                return Ok(0);
            }
            let mut batch = tc.batch();
            for &i in &wanted {
                add(&mut batch, i)?;
            }
            match tc.execute(grant, &mut batch, Commit::Atomic).await {
                Ok(()) => return Ok(wanted.len() as u64),
                Err(TcError::Operation { index, error }) if drops(&error) => {
                    wanted.remove(index);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Refuses a write by a key that may only read.
    pub(super) fn may_write(
        &self,
        grant: &Grant,
        command: &str,
        table: &Table,
    ) -> Result<(), MyError> {
        if grant.role == Role::Read {
            return Err(MyError::denied_command(
                command,
                &self.user,
                table.name().as_str(),
            ));
        }
        self.may_change_rows()
    }

    /// The table `name` (`[db.]table`) names, and the key's grant on its
    /// database.
    pub(super) fn table_named(&self, name: &[String]) -> Result<(Arc<Table>, Grant), MyError> {
        match name {
            [t] => self.table(None, t),
            [db, t] => self.table(Some(db), t),
            _ => Err(MyError::syntax(
                "a table is named `table` or `database.table`",
            )),
        }
    }

    // --- SHOW, DESCRIBE and SET -------------------------------------

    async fn show(&mut self, rest: &[Token]) -> Result<Reply, MyError> {
        let mut i = 0;
        let full = keyword(rest.first()) == Some(Keyword::FULL);
        if full {
            i += 1;
        }
        let global = keyword(rest.get(i)) == Some(Keyword::GLOBAL);
        let scope = matches!(
            keyword(rest.get(i)),
            Some(Keyword::SESSION | Keyword::GLOBAL | Keyword::LOCAL)
        );
        if scope {
            i += 1;
        }
        match (keyword(rest.get(i)), word(rest.get(i))) {
            (Some(Keyword::DATABASES | Keyword::SCHEMAS), _) => {
                let like = like_of(&rest[i + 1..])?;
                let names = (self.granted_databases()?.into_iter())
                    .filter(|d| like.as_ref().is_none_or(|p| p.matches_name(d)));
                let columns = vec![computed("Database", ty::VAR_STRING)];
                Ok(Reply::rows(
                    columns,
                    names.map(|n| vec![Cell::from(n)]).collect(),
                ))
            }
            (Some(Keyword::TABLE), _)
                if word(rest.get(i + 1)).is_some_and(|w| w.eq_ignore_ascii_case("STATUS")) =>
            {
                self.show_table_status(&rest[i + 2..]).await
            }
            (_, Some(w)) if w.eq_ignore_ascii_case("ENGINES") => self.show_engines(&rest[i + 1..]),
            (Some(Keyword::CHARSET), _) => self.show_charsets(&rest[i + 1..]),
            (Some(Keyword::CHARACTER), _) if keyword(rest.get(i + 1)) == Some(Keyword::SET) => {
                self.show_charsets(&rest[i + 2..])
            }
            (Some(Keyword::COLLATION), _) => self.show_collations(&rest[i + 1..]),
            (_, Some(w)) if w.eq_ignore_ascii_case("PROCESSLIST") && !scope => {
                self.show_processlist(full, &rest[i + 1..])
            }
            (Some(Keyword::GRANTS), _) => self.show_grants(&rest[i + 1..]),
            (Some(Keyword::TABLES), _) => {
                let (db, rest) = from_database(&rest[i + 1..])?;
                let db = match db {
                    Some(db) => db.to_owned(),
                    None => self.database.clone().ok_or_else(MyError::no_database)?,
                };
                let like = like_of(rest)?;
                self.grant(&db)?;
                let mut names: Vec<String> = self
                    .engine
                    .tables()
                    .iter()
                    .filter(|t| t.database.name.as_str() == db)
                    .map(|t| t.name().to_string())
                    .filter(|t| like.as_ref().is_none_or(|p| p.matches_name(t)))
                    .collect();
                names.sort();
                let mut columns = vec![computed(&format!("Tables_in_{db}"), ty::VAR_STRING)];
                if full {
                    columns.push(computed("Table_type", ty::VAR_STRING));
                }
                let rows = names
                    .into_iter()
                    .map(|n| {
                        let mut row = vec![Cell::from(n)];
                        if full {
                            row.push(Cell::from("BASE TABLE"));
                        }
                        row
                    })
                    .collect();
                Ok(Reply::rows(columns, rows))
            }
            (Some(Keyword::CREATE), _)
                if matches!(
                    keyword(rest.get(i + 1)),
                    Some(Keyword::DATABASE | Keyword::SCHEMA)
                ) =>
            {
                self.show_create_database(&rest[i + 2..])
            }
            (_, Some(w)) if w.eq_ignore_ascii_case("TRIGGERS") => {
                self.show_none(Absent::Triggers, &rest[i + 1..])
            }
            (_, Some(w)) if w.eq_ignore_ascii_case("EVENTS") => {
                self.show_none(Absent::Events, &rest[i + 1..])
            }
            (Some(Keyword::FUNCTION | Keyword::PROCEDURE), _)
                if keyword(rest.get(i + 1)) == Some(Keyword::STATUS) =>
            {
                self.show_none(Absent::Routines, &rest[i + 2..])
            }
            (Some(Keyword::CREATE), _) if keyword(rest.get(i + 1)) == Some(Keyword::TABLE) => {
                let name = object_name(&rest[i + 2..])?;
                if rest.len() > i + 2 + 2 * name.len() - 1 {
                    return Err(MyError::syntax("SHOW CREATE TABLE takes a table name only"));
                }
                let (table, _) = self.table_named(&name)?;
                let columns = vec![
                    computed("Table", ty::VAR_STRING),
                    computed("Create Table", ty::VAR_STRING),
                ];
                let sql = table.def().create_sql();
                Ok(Reply::rows(
                    columns,
                    vec![vec![Cell::from(table.name().to_string()), Cell::from(sql)]],
                ))
            }
            (Some(Keyword::COLUMNS | Keyword::FIELDS), _) => {
                self.show_columns(&rest[i + 1..], false)
            }
            (_, Some(w))
                if ["INDEX", "INDEXES", "KEYS"]
                    .iter()
                    .any(|k| w.eq_ignore_ascii_case(k)) =>
            {
                self.show_index(&rest[i + 1..])
            }
            (Some(Keyword::STATUS), _) => self.show_status(global, &rest[i + 1..]),
            (Some(Keyword::VARIABLES), _) => {
                let named = self
                    .variables()
                    .into_iter()
                    .map(|(n, v)| (n, v.into_text()));
                named_rows(named, &rest[i + 1..])
            }
            (_, Some(w))
                if w.eq_ignore_ascii_case("WARNINGS") || w.eq_ignore_ascii_case("ERRORS") =>
            {
                Ok(Reply::rows(
                    vec![
                        computed("Level", ty::VAR_STRING),
                        computed("Code", ty::LONGLONG),
                        computed("Message", ty::VAR_STRING),
                    ],
                    Vec::new(),
                ))
            }
            _ => Err(MyError::unsupported(format!(
                "SHOW {}",
                rest.iter()
                    .take(3)
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            ))),
        }
    }

    /// `SHOW COLUMNS FROM t [FROM db]`, `DESCRIBE t`.
    fn show_columns(&mut self, rest: &[Token], describe: bool) -> Result<Reply, MyError> {
        let (name, rest) = shown_table(rest)?;
        let like = match rest {
            // `DESCRIBE t c`: the column, or a pattern of them.
            [Token::Word(w)] if describe => Some(Like::names(&w.value)?),
            [Token::SingleQuotedString(p) | Token::DoubleQuotedString(p)] if describe => {
                Some(Like::names(p)?)
            }
            rest => like_of(rest)?,
        };
        let (table, _) = self.table_named(&name)?;
        let def = table.def();
        let columns: Vec<_> = ["Field", "Type", "Null", "Key", "Default", "Extra"]
            .iter()
            .map(|n| computed(n, ty::VAR_STRING))
            .collect();
        let rows = def
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                like.as_ref()
                    .is_none_or(|l| l.matches_name(c.name.as_str()))
            })
            .map(|(i, c)| {
                vec![
                    Cell::from(c.name.to_string()),
                    Cell::from(c.column_type.mysql_name()),
                    Cell::from(if c.nullable { "YES" } else { "NO" }),
                    Cell::from(column_key(def, i)),
                    c.default_text()
                        .map_or(Cell::Value(Value::Null), Cell::from),
                    Cell::from(c.extra()),
                ]
            })
            .collect();
        Ok(Reply::rows(columns, rows))
    }

    /// `SHOW INDEX FROM t`: MySQL's columns.
    fn show_index(&mut self, rest: &[Token]) -> Result<Reply, MyError> {
        let (name, rest) = shown_table(rest)?;
        if !rest.is_empty() {
            return Err(MyError::unsupported("SHOW INDEX with a WHERE"));
        }
        let (table, _) = self.table_named(&name)?;
        let def = table.def();
        let names = [
            "Table",
            "Non_unique",
            "Key_name",
            "Seq_in_index",
            "Column_name",
            "Collation",
            "Cardinality",
            "Sub_part",
            "Packed",
            "Null",
            "Index_type",
            "Comment",
            "Index_comment",
            "Visible",
            "Expression",
        ];
        let columns: Vec<_> = names
            .iter()
            .map(|n| {
                let t = if matches!(
                    *n,
                    "Non_unique" | "Seq_in_index" | "Cardinality" | "Sub_part"
                ) {
                    ty::LONGLONG
                } else {
                    ty::VAR_STRING
                };
                computed(n, t)
            })
            .collect();
        let mut rows = Vec::new();
        for index in indexes(def) {
            for (seq, c) in index.columns.iter().enumerate() {
                rows.push(vec![
                    Cell::from(def.name.to_string()),
                    Cell::from(i64::from(!index.unique)),
                    Cell::from(index.name),
                    Cell::from(seq as i64 + 1),
                    Cell::from(c.to_string()),
                    Cell::from("A"),
                    Cell::Value(Value::Null),
                    Cell::Value(Value::Null),
                    Cell::Value(Value::Null),
                    Cell::from(if nullable(def, c) { "YES" } else { "" }),
                    Cell::from(index.kind),
                    Cell::from(""),
                    Cell::from(""),
                    Cell::from("YES"),
                    Cell::Value(Value::Null),
                ]);
            }
        }
        Ok(Reply::rows(columns, rows))
    }

    /// `SET …`: the session's settings that clients send. Each is taken
    /// as it is; one that Shoal cannot honour is refused.
    async fn set(&mut self, rest: &[Token]) -> Result<Reply, MyError> {
        let mut autocommit = None;
        for part in top_level_parts(rest) {
            let mut p = part;
            // NAMES and CHARACTER SET: the connection speaks utf8mb4.
            match keyword(p.first()) {
                Some(Keyword::NAMES) => {
                    charset(word(p.get(1)).or(match p.get(1) {
                        Some(Token::SingleQuotedString(s)) => Some(s.as_str()),
                        _ => None,
                    }))?;
                    continue;
                }
                Some(Keyword::CHARACTER) if keyword(p.get(1)) == Some(Keyword::SET) => {
                    charset(word(p.get(2)))?;
                    continue;
                }
                Some(Keyword::TRANSACTION) => {
                    return set_transaction(&p[1..]).map(|()| Reply::done(0));
                }
                Some(Keyword::SESSION | Keyword::LOCAL) => p = &p[1..],
                _ if keyword(p.first()) == Some(Keyword::GLOBAL)
                    || word(p.first()).is_some_and(|w| w.eq_ignore_ascii_case("PERSIST")) =>
                {
                    return Err(MyError::new(
                        1227,
                        "42000",
                        "Access denied; you need (at least one of) the SUPER or SYSTEM_VARIABLES_ADMIN privilege(s) for this operation",
                    ));
                }
                _ => {}
            }
            if keyword(p.first()) == Some(Keyword::TRANSACTION) {
                return set_transaction(&p[1..]).map(|()| Reply::done(0));
            }
            let Some(name) = word(p.first()) else {
                return Err(MyError::syntax("SET takes name = value"));
            };
            if !matches!(p.get(1), Some(Token::Eq) | Some(Token::Assignment)) {
                return Err(MyError::syntax(format!(
                    "SET {} needs = and a value",
                    name.chars().take(64).collect::<String>()
                )));
            }
            if let Some(user) = p.first().and_then(variables::user_variable) {
                let value = self.user_value(&p[2..])?;
                self.user_variables.set(user, value)?;
                continue;
            }
            let name = name
                .trim_start_matches("@@")
                .trim_start_matches("session.")
                .trim_start_matches("SESSION.")
                .trim_start_matches("local.")
                .to_ascii_lowercase();
            let value = self.user_variables.substitute(p[2..].to_vec());
            if name == "autocommit" {
                autocommit = Some(on_or_off(&name, &value)?);
                continue;
            }
            self.set_variable(&name, &value)?;
        }
        if let Some(on) = autocommit {
            self.set_autocommit(on).await?;
        }
        Ok(Reply::done(0))
    }

    /// What `SET @name = value` keeps: a literal, a system variable's
    /// value (`@@x`) or another user variable's.
    fn user_value(&self, value: &[Token]) -> Result<Token, MyError> {
        match value {
            [t] if variables::is_literal(t) => Ok(t.clone()),
            [Token::Minus, Token::Number(n, long)] => Ok(Token::Number(format!("-{n}"), *long)),
            [t] => match (variables::user_variable(t), t) {
                (Some(name), _) => Ok(self.user_variables.get(name)),
                (None, Token::Word(w)) if w.quote_style.is_none() && w.value.starts_with("@@") => {
                    Ok(self.variable(&w.value[2..])?.literal())
                }
                _ => Err(expression_refused()),
            },
            _ => Err(expression_refused()),
        }
    }

    fn set_variable(&mut self, name: &str, value: &[Token]) -> Result<(), MyError> {
        let text = value.iter().map(ToString::to_string).collect::<String>();
        let plain = text.trim_matches('\'').to_ascii_lowercase();
        match name {
            "character_set_client" | "character_set_connection" | "character_set_results" => {
                if plain == "null" || plain == "binary" {
                    return Ok(());
                }
                charset(Some(&plain))
            }
            "collation_connection" if plain.starts_with("utf8") => Ok(()),
            "sql_mode" => Ok(()),
            // SHOW CREATE TABLE always quotes names (mysqldump sets it on).
            "sql_quote_show_create" => match on_or_off(name, value)? {
                true => Ok(()),
                false => Err(MyError::unsupported(
                    "sql_quote_show_create = 0: SHOW CREATE TABLE always quotes names",
                )),
            },
            "time_zone" if plain == "+00:00" || plain == "utc" || plain == "system" => Ok(()),
            "transaction_isolation" | "tx_isolation" => match plain.as_str() {
                "read-committed" => Ok(()),
                _ => Err(MyError::unsupported(format!(
                    "isolation level {text}: Shoal reads committed, as NDB does"
                ))),
            },
            "sql_safe_updates" => {
                self.safety.safe_updates = on_or_off(name, value)?;
                Ok(())
            }
            "sql_select_limit" | "max_join_size" => {
                let n = match plain.as_str() {
                    "default" => u64::MAX,
                    n => n.parse::<u64>().map_err(|_| {
                        MyError::new(
                            1232,
                            "42000",
                            format!(
                                "Incorrect argument type to variable '{name}': a whole number 0 to {} is meant",
                                u64::MAX
                            ),
                        )
                    })?,
                };
                match name {
                    "sql_select_limit" => self.safety.select_limit = n,
                    _ => self.safety.max_join_size = n,
                }
                Ok(())
            }
            // Settings that would change answers are taken only at the
            // value Shoal keeps; another is refused, never ignored.
            "sql_auto_is_null" if !on_or_off(name, value)? => Ok(()),
            "sql_auto_is_null" => Err(MyError::unsupported(format!(
                "{name} = {} (Shoal keeps it at its default)",
                text.chars().take(64).collect::<String>()
            ))),
            "net_write_timeout"
            | "net_read_timeout"
            | "wait_timeout"
            | "interactive_timeout"
            | "max_execution_time"
            | "unique_checks"
            | "foreign_key_checks"
            | "sql_notes"
            | "session_track_schema"
            | "session_track_state_change"
            | "session_track_system_variables"
            | "session_track_transaction_info" => Ok(()),
            _ if self.variables().iter().any(|(n, _)| n == name) => Err(MyError::new(
                1238,
                "HY000",
                format!("Variable '{name}' is a read only variable"),
            )),
            _ => Err(MyError::new(
                1193,
                "HY000",
                format!(
                    "Unknown system variable '{}'",
                    name.chars().take(64).collect::<String>()
                ),
            )),
        }
    }

    fn variable(&self, name: &str) -> Result<Cell, MyError> {
        let name = name
            .trim_start_matches("session.")
            .trim_start_matches("SESSION.")
            .trim_start_matches("global.")
            .trim_start_matches("GLOBAL.")
            .to_ascii_lowercase();
        self.variables()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
            .ok_or_else(|| {
                MyError::new(
                    1193,
                    "HY000",
                    format!(
                        "Unknown system variable '{}'",
                        name.chars().take(64).collect::<String>()
                    ),
                )
            })
    }

    /// The system variables a client may read, in name order.
    pub(super) fn variables(&self) -> Vec<(String, Cell)> {
        let limits = &self.shared.limits;
        // A boolean is a signed BIGINT 0 or 1, as MySQL's are; the rest of
        // the numbers are unsigned.
        let on = |b: bool| Cell::from(i64::from(b));
        let mut v: Vec<(String, Cell)> = vec![
            ("auto_increment_increment", Cell::from(1u64)),
            ("auto_increment_offset", Cell::from(1u64)),
            ("autocommit", on(self.autocommit)),
            ("character_set_client", Cell::from("utf8mb4")),
            ("character_set_connection", Cell::from("utf8mb4")),
            ("character_set_database", Cell::from("utf8mb4")),
            ("character_set_results", Cell::from("utf8mb4")),
            ("character_set_server", Cell::from("utf8mb4")),
            ("collation_connection", Cell::from("utf8mb4_general_ci")),
            ("collation_database", Cell::from("utf8mb4_bin")),
            ("collation_server", Cell::from("utf8mb4_bin")),
            ("default_storage_engine", Cell::from("ndbcluster")),
            // A quotient of exact numbers has 4 more decimals than its dividend.
            ("div_precision_increment", Cell::from(4u64)),
            // No TIMESTAMP column gets a default it was not given.
            ("explicit_defaults_for_timestamp", on(true)),
            // Shoal has no foreign keys, and always checks unique ones.
            ("foreign_key_checks", on(true)),
            ("have_ssl", Cell::from("DISABLED")),
            // The node's name in its cluster, never the machine's.
            (
                "hostname",
                Cell::from(format!("shoal-node-{}", self.engine.node_id().0)),
            ),
            ("init_connect", Cell::from("")),
            (
                "innodb_lock_wait_timeout",
                Cell::from(self.shared.lock_wait_timeout.as_secs().max(1)),
            ),
            (
                "interactive_timeout",
                Cell::from(limits.idle_timeout.as_secs()),
            ),
            ("license", Cell::from("Apache-2.0")),
            (
                "lock_wait_timeout",
                Cell::from(self.shared.lock_wait_timeout.as_secs().max(1)),
            ),
            ("lower_case_table_names", Cell::from(0u64)),
            (
                "max_allowed_packet",
                Cell::from(limits.max_request_bytes as u64),
            ),
            ("max_connections", Cell::from(limits.max_connections as u64)),
            ("max_join_size", Cell::from(self.safety.max_join_size)),
            ("net_buffer_length", Cell::from(16384u64)),
            (
                "net_read_timeout",
                Cell::from(limits.idle_timeout.as_secs()),
            ),
            (
                "net_write_timeout",
                Cell::from(limits.idle_timeout.as_secs()),
            ),
            // No binary log: changes reach the group's replicas as NDB's do.
            ("log_bin", on(false)),
            ("performance_schema", on(false)),
            ("port", Cell::from(u64::from(self.shared.port))),
            ("protocol_version", Cell::from(10u64)),
            ("query_cache_size", Cell::from(0u64)),
            ("query_cache_type", Cell::from("OFF")),
            // Every node of a group takes writes (carried to the primary).
            ("read_only", on(false)),
            ("server_id", Cell::from(u64::from(self.engine.node_id().0))),
            ("sql_auto_is_null", on(false)),
            (
                "sql_mode",
                Cell::from("ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION"),
            ),
            ("sql_notes", on(true)),
            ("sql_quote_show_create", on(true)),
            ("sql_safe_updates", on(self.safety.safe_updates)),
            ("sql_select_limit", Cell::from(self.safety.select_limit)),
            ("super_read_only", on(false)),
            ("system_time_zone", Cell::from("UTC")),
            ("time_zone", Cell::from("+00:00")),
            ("transaction_isolation", Cell::from("READ-COMMITTED")),
            ("transaction_read_only", on(false)),
            ("tx_isolation", Cell::from("READ-COMMITTED")),
            ("tx_read_only", on(false)),
            ("unique_checks", on(true)),
            ("version", Cell::from(super::VERSION)),
            ("version_comment", Cell::from(super::VERSION_COMMENT)),
            ("wait_timeout", Cell::from(limits.idle_timeout.as_secs())),
        ]
        .into_iter()
        .map(|(n, c)| (n.to_owned(), c))
        .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

/// How a SELECT is answered.
pub(super) enum Select {
    Constant {
        columns: Vec<ColumnDef>,
        rows: Vec<Vec<Cell>>,
    },
    Keys(Lookup),
    /// Rows of an ndbinfo or information_schema table.
    System(super::system::SystemSelect),
    /// Rows found by the WHERE clause.
    Scan {
        scan: Scan,
        grant: Grant,
        shape: Shape,
        /// FOR UPDATE or FOR SHARE: in a transaction, the rows answered
        /// are locked until it ends.
        lock: bool,
    },
    Aggregate {
        plan: Box<crate::tc::ronsql::plan::Plan>,
        grant: Grant,
        columns: Vec<ColumnDef>,
    },
}

impl Select {
    fn columns(self) -> Vec<ColumnDef> {
        match self {
            Select::Constant { columns, .. } | Select::Aggregate { columns, .. } => columns,
            Select::Keys(l) => l.shape.columns.to_vec(),
            Select::Scan { shape, .. } => shape.columns.to_vec(),
            Select::System(n) => n.columns(),
        }
    }
}

/// What a SELECT answers of the rows it finds: which columns, in which
/// order, how many.
#[derive(Debug)]
pub(crate) struct Shape {
    /// The columns answered, in order: the table's (below its width), or
    /// values computed from each row (`computed`'s, from the width on).
    pub(super) outputs: Vec<usize>,
    pub(super) columns: Arc<[ColumnDef]>,
    pub(super) order: Vec<(usize, bool)>,
    pub(super) distinct: bool,
    pub(super) limit: Option<u64>,
    pub(super) offset: u64,
    pub(super) computed: Option<Computed>,
}

/// Values a SELECT computes from each row it finds (`n * 2`, `UPPER(s)`),
/// to answer or to sort by: appended to the row, after its columns.
#[derive(Debug)]
pub(crate) struct Computed {
    pub(super) layout: Arc<Layout>,
    pub(super) exprs: Vec<eval::Expr>,
}

impl Computed {
    /// Appends the computed values to each row that has only the table's
    /// columns yet.
    fn extend(&self, rows: &mut [Vec<Value>]) -> Result<(), MyError> {
        let layout = &self.layout;
        let width = layout.columns.len();
        for row in rows.iter_mut().filter(|r| r.len() == width) {
            let mut values = Vec::with_capacity(self.exprs.len());
            for e in &self.exprs {
                let found = eval::Values {
                    layout,
                    values: row,
                };
                values.push(e.eval(found)?.to_value());
            }
            row.extend(values);
        }
        Ok(())
    }

    /// The columns the computed values read.
    fn reads(&self) -> impl Iterator<Item = usize> {
        let mut out = Vec::new();
        self.exprs.iter().for_each(|e| e.columns(&mut out));
        out.into_iter().map(usize::from)
    }
}

impl Shape {
    /// Which of `table`'s columns answering reads: those answered, sorted
    /// by or computed from.
    fn reads(&self, table: &Table) -> Vec<bool> {
        let mut reads = vec![false; table.layout.columns.len()];
        let computed = self.computed.iter().flat_map(|c| c.reads());
        let sorted = self.order.iter().map(|&(c, _)| c);
        for c in (self.outputs.iter().copied()).chain(sorted).chain(computed) {
            // From the width on: a computed value, no column of the table.
            if let Some(read) = reads.get_mut(c) {
                *read = true;
            }
        }
        reads
    }

    /// Appends the values it computes to each row of `rows` found.
    fn extend(&self, rows: &mut [Vec<Value>]) -> Result<(), MyError> {
        match &self.computed {
            Some(c) => c.extend(rows),
            None => Ok(()),
        }
    }

    /// The answer made of `found` (every column of each row), sorted by
    /// its ORDER BY, else as found.
    pub(super) fn answer(&self, mut found: Vec<Vec<Value>>) -> Result<Reply, MyError> {
        self.extend(&mut found)?;
        sort_rows(&mut found, &self.order);
        let offset = usize::try_from(self.offset).unwrap_or(usize::MAX);
        let limit = (self.limit).map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
        if !self.distinct {
            let rows = (found.into_iter().skip(offset).take(limit))
                .map(|values| self.project(values, Cell::Value))
                .collect();
            return Ok(Reply::rows(self.columns.clone(), rows));
        }
        let mut rows: Vec<Vec<Value>> = (found.into_iter())
            .map(|values| self.project(values, std::convert::identity))
            .collect();
        order::distinct(&mut rows, self.outputs.len());
        let rows = (rows.into_iter().skip(offset).take(limit))
            .map(|values| values.into_iter().map(Cell::Value).collect())
            .collect();
        Ok(Reply::rows(self.columns.clone(), rows))
    }

    /// The answered columns of a row found (`values`), each made a `T`.
    fn project<T>(&self, mut values: Vec<Value>, make: impl Fn(Value) -> T) -> Vec<T> {
        (self.outputs.iter().enumerate())
            .map(|(at, &c)| {
                // A column answered once more later is copied; else moved.
                if self.outputs[at + 1..].contains(&c) {
                    make(values[c].clone())
                } else {
                    make(std::mem::replace(&mut values[c], Value::Null))
                }
            })
            .collect()
    }

    /// How many rows found are enough, when neither an order nor DISTINCT
    /// needs them all.
    fn enough(&self) -> Option<usize> {
        let limit = usize::try_from(self.limit?).ok()?;
        (self.order.is_empty() && !self.distinct)
            .then(|| limit.saturating_add(usize::try_from(self.offset).unwrap_or(usize::MAX)))
    }
}

/// The most buffer space a connection keeps from one key lookup's batch
/// for the next: sysbench's 100-key IN list of 200-byte rows fits.
const KEEP_BATCH: usize = 64 * 1024;

/// Rows read by their primary keys.
#[derive(Debug)]
pub(crate) struct Lookup {
    pub(super) table: Arc<Table>,
    /// The catalog's version when the table was last found to be the
    /// catalog's (`u64::MAX`: not yet).
    current_at: std::sync::atomic::AtomicU64,
    /// Each key column's values, as written (`?`s among them).
    pub(super) keys: Vec<Vec<Lit>>,
    /// FOR UPDATE or FOR SHARE: in a transaction, the rows found are
    /// locked until it ends (exclusively, both: a row has one kind of lock).
    lock: bool,
    pub(super) shape: Shape,
    /// Which of the table's columns the answer reads (by position): the
    /// rest are left undecoded, NULL.
    reads: Vec<bool>,
}

/// An UPDATE or a DELETE of one table, checked: the table, the key's grant
/// on it, the WHERE (and the keys it names) and which of the rows it finds
/// are changed, and what an UPDATE sets (each column and its new value).
pub(super) struct Change<'a> {
    pub(super) table: Arc<Table>,
    pub(super) grant: Grant,
    pub(super) selection: Option<&'a Expr>,
    /// The keys the WHERE names, if it names whole keys (`key_lookup`).
    pub(super) keys: Option<Vec<Vec<Value>>>,
    pub(super) pick: Pick,
    set: Vec<(usize, Expression)>,
}

/// Which of the rows its WHERE finds an UPDATE or DELETE changes: the
/// first `limit` (all if `None`) in `order` (any if empty).
pub(super) struct Pick {
    pub(super) order: Vec<(usize, bool)>,
    limit: Option<u64>,
}

impl Pick {
    fn is_all(&self) -> bool {
        self.limit.is_none()
    }
}

/// Whether what follows EXPLAIN (or DESCRIBE) is a statement to explain,
/// not a table whose columns are described.
fn explains_statement(rest: &[Token]) -> bool {
    let format = word(rest.first()).is_some_and(|w| w.eq_ignore_ascii_case("FORMAT"))
        && rest.get(1) == Some(&Token::Eq);
    format
        || matches!(
            keyword(rest.first()),
            Some(
                Keyword::SELECT
                    | Keyword::WITH
                    | Keyword::UPDATE
                    | Keyword::DELETE
                    | Keyword::INSERT
                    | Keyword::REPLACE
                    | Keyword::ANALYZE
                    | Keyword::FOR
            )
        )
        || rest.first() == Some(&Token::LParen)
}

/// `CHECK | REPAIR | OPTIMIZE | CHECKSUM [NO_WRITE_TO_BINLOG | LOCAL]
/// TABLE …`: MySQL's table maintenance (mysqlcheck's statements).
fn maintenance(tokens: &[Token]) -> bool {
    const MAINTENANCE: [&str; 4] = ["CHECK", "REPAIR", "OPTIMIZE", "CHECKSUM"];
    let Some(first) = word(tokens.first()) else {
        return false;
    };
    let mut rest = &tokens[1..];
    if word(rest.first()).is_some_and(|w| {
        w.eq_ignore_ascii_case("LOCAL") || w.eq_ignore_ascii_case("NO_WRITE_TO_BINLOG")
    }) {
        rest = &rest[1..];
    }
    MAINTENANCE.iter().any(|m| first.eq_ignore_ascii_case(m))
        && matches!(
            keyword(rest.first()),
            Some(Keyword::TABLE | Keyword::TABLES)
        )
}

/// BEGIN, COMMIT and ROLLBACK take WORK and nothing else here.
fn work_only(rest: &[Token], statement: &str) -> Result<(), MyError> {
    match rest {
        [] => Ok(()),
        [t] if word(Some(t)).is_some_and(|w| w.eq_ignore_ascii_case("WORK")) => Ok(()),
        [t, ..] if keyword(Some(t)) == Some(Keyword::TO) => Err(MyError::unsupported("savepoints")),
        _ => Err(MyError::unsupported(format!(
            "{statement} {}",
            rest.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
                .chars()
                .take(64)
                .collect::<String>()
        ))),
    }
}

/// START TRANSACTION's characteristics: whether READ ONLY.
fn start_characteristics(rest: &[Token]) -> Result<bool, MyError> {
    let mut read_only = false;
    if rest.is_empty() {
        return Ok(false);
    }
    for part in top_level_parts(rest) {
        let words: Vec<String> = (part.iter())
            .map(|t| t.to_string().to_ascii_uppercase())
            .collect();
        match words.join(" ").as_str() {
            "READ ONLY" => read_only = true,
            "READ WRITE" => read_only = false,
            // Shoal reads committed: a snapshot is what each read sees, as
            // MySQL's READ COMMITTED takes it.
            "WITH CONSISTENT SNAPSHOT" => {}
            other => {
                return Err(MyError::syntax(format!(
                    "START TRANSACTION takes READ ONLY, READ WRITE or WITH CONSISTENT SNAPSHOT, not '{}'",
                    other.chars().take(64).collect::<String>()
                )));
            }
        }
    }
    Ok(read_only)
}

/// Whether a SELECT locks what it reads (FOR UPDATE, FOR SHARE).
fn lock_of(q: &ast::Query) -> Result<bool, MyError> {
    if q.locks
        .iter()
        .any(|l| l.nonblock.is_some() || l.of.is_some())
    {
        return Err(MyError::unsupported(
            "NOWAIT, SKIP LOCKED or OF in a locking read",
        ));
    }
    Ok(!q.locks.is_empty())
}

/// `tokens` split at the commas outside parentheses.
fn top_level_parts(tokens: &[Token]) -> Vec<&[Token]> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, t) in tokens.iter().enumerate() {
        match t {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => {
                parts.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}

/// A boolean setting's value: 1/0, ON/OFF, TRUE/FALSE.
fn on_or_off(name: &str, value: &[Token]) -> Result<bool, MyError> {
    let text = value.iter().map(ToString::to_string).collect::<String>();
    match text.trim_matches('\'').to_ascii_lowercase().as_str() {
        "1" | "on" | "true" => Ok(true),
        "0" | "off" | "false" => Ok(false),
        _ => Err(wrong_value(name, &text)),
    }
}

/// `reply` cut to `limit` rows, if given.
fn at_most(mut reply: Reply, limit: Option<u64>) -> Reply {
    if let (Reply::Rows { rows, .. }, Some(n)) = (&mut reply, limit) {
        rows.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    reply
}

/// What `SET @name = <expression>` is told.
fn expression_refused() -> MyError {
    MyError::unsupported(
        "a user variable set to an expression (a literal, @@variable or @variable is taken)",
    )
}

fn wrong_value(name: &str, value: &str) -> MyError {
    MyError::new(
        1231,
        "42000",
        format!(
            "Variable '{name}' can't be set to the value of '{}'",
            value.chars().take(64).collect::<String>()
        ),
    )
}

fn charset(name: Option<&str>) -> Result<(), MyError> {
    match name.map(|n| n.trim_matches(['\'', '"']).to_ascii_lowercase()) {
        Some(n) if n == "utf8mb4" || n == "utf8" || n == "utf8mb3" || n == "default" => Ok(()),
        Some(n) => Err(MyError::unsupported(format!(
            "the character set {} (Shoal speaks utf8mb4)",
            n.chars().take(32).collect::<String>()
        ))),
        None => Err(MyError::syntax("SET NAMES takes a character set")),
    }
}

fn set_transaction(rest: &[Token]) -> Result<(), MyError> {
    let words: Vec<String> = rest
        .iter()
        .map(|t| t.to_string().to_ascii_uppercase())
        .collect();
    let text = words.join(" ");
    if text == "ISOLATION LEVEL READ COMMITTED" || text == "READ WRITE" {
        return Ok(());
    }
    Err(MyError::unsupported(format!(
        "SET TRANSACTION {}: Shoal reads committed, as NDB does",
        text.chars().take(64).collect::<String>()
    )))
}

/// `LIKE 'pattern'` after a SHOW, if any.
pub(super) fn like_of(rest: &[Token]) -> Result<Option<Like>, MyError> {
    match (keyword(rest.first()), rest.get(1)) {
        (None, None) => Ok(None),
        (
            Some(Keyword::LIKE),
            Some(Token::SingleQuotedString(p) | Token::DoubleQuotedString(p)),
        ) if rest.len() == 2 => Ok(Some(Like::names(p)?)),
        _ => Err(MyError::unsupported(
            "SHOW with anything but LIKE 'pattern'",
        )),
    }
}

/// The table a `SHOW COLUMNS` or `SHOW INDEX` names — `[FROM | IN]
/// [db.]t [FROM | IN db]` — and the tokens after it.
fn shown_table(rest: &[Token]) -> Result<(Vec<String>, &[Token]), MyError> {
    let rest = match keyword(rest.first()) {
        Some(Keyword::FROM | Keyword::IN) => &rest[1..],
        _ => rest,
    };
    let mut name = object_name(rest)?;
    let after = &rest[(2 * name.len() - 1).min(rest.len())..];
    let (db, after) = from_database(after)?;
    if let Some(db) = db {
        if name.len() == 2 {
            return Err(MyError::syntax("a table named with its database and FROM"));
        }
        name.insert(0, db.to_owned());
    }
    Ok((name, after))
}

/// `FROM db` or `IN db` at the start of `rest`, if there, and the tokens
/// after it.
pub(super) fn from_database(rest: &[Token]) -> Result<(Option<&str>, &[Token]), MyError> {
    match keyword(rest.first()) {
        Some(Keyword::FROM | Keyword::IN) => {
            let db = word(rest.get(1))
                .ok_or_else(|| MyError::syntax("a database name is needed after FROM"))?;
            Ok((Some(db), &rest[2..]))
        }
        _ => Ok((None, rest)),
    }
}

/// `IF NOT EXISTS` at the start of `tokens`, and what follows it.
pub(super) fn if_not_exists(tokens: &[Token]) -> Result<(bool, &[Token]), MyError> {
    match tokens {
        [i, n, e, rest @ ..] if keyword(Some(i)) == Some(Keyword::IF) => {
            if keyword(Some(n)) == Some(Keyword::NOT) && keyword(Some(e)) == Some(Keyword::EXISTS) {
                Ok((true, rest))
            } else {
                Err(MyError::syntax("IF is followed by NOT EXISTS"))
            }
        }
        _ => Ok((false, tokens)),
    }
}

/// A `[db.]table` name at the start of `tokens`.
pub(super) fn object_name(tokens: &[Token]) -> Result<Vec<String>, MyError> {
    let first = word(tokens.first()).ok_or_else(|| MyError::syntax("a table name is needed"))?;
    if tokens.get(1) == Some(&Token::Period)
        && let Some(second) = word(tokens.get(2))
    {
        return Ok(vec![first.to_owned(), second.to_owned()]);
    }
    Ok(vec![first.to_owned()])
}

pub(crate) fn name_parts(name: &ast::ObjectName) -> Result<Vec<String>, MyError> {
    name.0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => Ok(i.value.clone()),
            ast::ObjectNamePart::Function(_) => Err(MyError::unsupported("a function in a name")),
        })
        .collect()
}

fn relation_name(relation: &ast::TableFactor) -> Result<Vec<String>, MyError> {
    match relation {
        ast::TableFactor::Table {
            name,
            alias: None,
            args: None,
            ..
        } => name_parts(name),
        ast::TableFactor::Table { .. } => Err(MyError::unsupported("a table hint here")),
        _ => Err(MyError::unsupported("anything but a table here")),
    }
}

fn statement_kind(s: &Statement) -> String {
    let text = s.to_string();
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    words.join(" ")
}

/// A literal, if `e` is one (a number, string, NULL, boolean, hex, or a
/// negated number).
pub(crate) fn literal(e: &Expr) -> Result<Option<Lit>, MyError> {
    match e {
        Expr::Nested(inner) => literal(inner),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match literal(expr)? {
            Some(Lit::Int(v)) => Ok(Some(Lit::Int(-v))),
            Some(Lit::UInt(v)) => Ok(Some(match i64::try_from(v) {
                Ok(v) => Lit::Int(-v),
                Err(_) if v == 1 << 63 => Lit::Int(i64::MIN),
                Err(_) => Lit::Number(format!("-{v}")),
            })),
            Some(Lit::Number(n)) => Ok(Some(Lit::Number(match n.strip_prefix('-') {
                Some(p) => p.to_owned(),
                None => format!("-{n}"),
            }))),
            Some(Lit::Double(v)) => Ok(Some(Lit::Double(-v))),
            _ => Ok(None),
        },
        Expr::UnaryOp {
            op: UnaryOperator::Plus,
            expr,
        } => literal(expr),
        Expr::Value(v) => Ok(Some(match &v.value {
            ast::Value::Null => Lit::Null,
            ast::Value::Boolean(b) => Lit::Bool(*b),
            ast::Value::Number(n, _) => {
                if let Ok(i) = n.parse::<i64>() {
                    Lit::Int(i)
                } else if let Ok(u) = n.parse::<u64>() {
                    Lit::UInt(u)
                } else if n.contains(['e', 'E']) {
                    Lit::Double(
                        n.parse()
                            .map_err(|_| MyError::syntax(format!("the number {n}")))?,
                    )
                } else {
                    Lit::Number(n.clone())
                }
            }
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => {
                Lit::Str(s.clone().into_bytes())
            }
            ast::Value::HexStringLiteral(h) => {
                Lit::Bytes(unhex(h).ok_or_else(|| MyError::syntax(format!("X'{h}' is not hex")))?)
            }
            // A prepared statement's `?`, numbered when it was prepared.
            ast::Value::Placeholder(p) => match p.strip_prefix('?').and_then(|n| n.parse().ok()) {
                Some(n) => Lit::Param(n),
                None => return Err(MyError::bad_arguments("a ? was given no value")),
            },
            _ => return Ok(None),
        })),
        // `DATE '…'`, `DATETIME '…'`, `TIMESTAMP '…'` (and what NOW() and
        // its kin were folded to): the date's text, checked.
        Expr::TypedString(t) => match clock::Moment::of_typed(t) {
            Some(m) => Ok(Some(Lit::Str(m?.text().into_bytes()))),
            None => Ok(None),
        },
        Expr::BinaryOp { left, op, right } => integer_arithmetic(e, left, op, right),
        _ => Ok(None),
    }
}

/// `left op right` of two integer constants (`+`, `-`, `*`), as MySQL
/// works it out: in BIGINT, or BIGINT UNSIGNED if either is, a result
/// that does not fit being error 1690; NULL if either is NULL. Anything
/// else (decimals, division, strings) is not a constant here: `None`.
fn integer_arithmetic(
    e: &Expr,
    left: &Expr,
    op: &BinaryOperator,
    right: &Expr,
) -> Result<Option<Lit>, MyError> {
    let worked: fn(i128, i128) -> Option<i128> = match op {
        BinaryOperator::Plus => i128::checked_add,
        BinaryOperator::Minus => i128::checked_sub,
        BinaryOperator::Multiply => i128::checked_mul,
        _ => return Ok(None),
    };
    let operand = |lit: Option<Lit>| match lit {
        Some(Lit::Int(v)) => Some(Some((i128::from(v), false))),
        Some(Lit::UInt(v)) => Some(Some((i128::from(v), true))),
        Some(Lit::Bool(b)) => Some(Some((i128::from(b), false))),
        Some(Lit::Null) => Some(None),
        _ => None,
    };
    let (Some(a), Some(b)) = (operand(literal(left)?), operand(literal(right)?)) else {
        return Ok(None);
    };
    let (Some((a, a_unsigned)), Some((b, b_unsigned))) = (a, b) else {
        return Ok(Some(Lit::Null));
    };
    let out_of_range = |ty: &str| {
        MyError::new(
            1690,
            "22003",
            format!("{ty} value is out of range in '{e}'"),
        )
    };
    let unsigned = a_unsigned || b_unsigned;
    let ty = if unsigned {
        "BIGINT UNSIGNED"
    } else {
        "BIGINT"
    };
    let v = worked(a, b).ok_or_else(|| out_of_range(ty))?;
    let fits = match unsigned {
        true => u64::try_from(v).ok().map(Lit::UInt),
        false => i64::try_from(v).ok().map(Lit::Int),
    };
    fits.map(Some).ok_or_else(|| out_of_range(ty))
}

fn unhex(h: &str) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Whether function call `f` has no arguments: `f()` or `f`.
pub(super) fn no_arguments(f: &ast::Function) -> bool {
    match &f.args {
        ast::FunctionArguments::None => true,
        ast::FunctionArguments::List(l) => l.args.is_empty(),
        ast::FunctionArguments::Subquery(_) => false,
    }
}

/// The assignments of an INSERT's ON DUPLICATE KEY UPDATE, in order.
fn on_duplicate_set(
    table: &Table,
    insert: &ast::Insert,
    set: &[ast::Assignment],
) -> Result<Vec<(usize, Expression)>, MyError> {
    let alias = match &insert.insert_alias {
        None => None,
        Some(a) if a.col_aliases.as_ref().is_some_and(|c| !c.is_empty()) => {
            return Err(MyError::unsupported(
                "an INSERT's row alias with column aliases",
            ));
        }
        Some(a) => Some(a.row_alias.to_string()),
    };
    let inserted = Inserted {
        alias: alias.as_deref(),
    };
    set.iter()
        .map(|a| {
            let c = assigned(table, a, "ON DUPLICATE KEY UPDATE")?;
            Ok((c, Expression::on_duplicate(table, c, &a.value, inserted)?))
        })
        .collect()
}

/// Whole row `row` checked as it would be written, each value against its
/// column — whether it is then written, skipped or meets a row that an ON
/// DUPLICATE KEY UPDATE updates — and read back as it would be stored (a
/// decimal given as text as the number it writes), which is what the
/// update's expressions compute with.
fn checked_row(table: &Table, mut row: Vec<Value>) -> Result<Vec<Value>, MyError> {
    for (c, v) in row.iter_mut().enumerate() {
        if matches!(v, Value::Null) {
            if table.layout.columns[c].null_bit.is_none() {
                return Err(ValueError::null(&table.layout, c as u16, "cannot be NULL").into());
            }
            continue;
        }
        let stored = crate::storage::codec::encode_operand(&table.layout, c as u16, v)?;
        *v = crate::storage::codec::value_of(table.layout.columns[c].ty, &stored);
    }
    Ok(row)
}

/// `INSERT … SET c = v, …` as the `INSERT … (c, …) VALUES (v, …)` it is.
fn set_as_values(insert: &ast::Insert) -> Result<ast::Insert, MyError> {
    if insert.source.is_some() || !insert.columns.is_empty() {
        return Err(MyError::syntax("INSERT takes SET or VALUES, not both"));
    }
    let mut values = insert.clone();
    let mut row = Vec::with_capacity(insert.assignments.len());
    for a in values.assignments.drain(..) {
        let ast::AssignmentTarget::ColumnName(target) = a.target else {
            return Err(MyError::unsupported("INSERT … SET of a tuple"));
        };
        let parts = name_parts(&target)?;
        let column = parts.last().map_or("", String::as_str);
        values.columns.push(ast::Ident::new(column));
        row.push(a.value);
    }
    values.source = Some(Box::new(ast::Query {
        with: None,
        body: Box::new(SetExpr::Values(ast::Values {
            explicit_row: false,
            rows: vec![row],
        })),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: Vec::new(),
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: Vec::new(),
    }));
    Ok(values)
}

/// The column assignment `a` of `statement` sets: one that is not part
/// of the primary key.
fn assigned(table: &Table, a: &ast::Assignment, statement: &str) -> Result<usize, MyError> {
    let ast::AssignmentTarget::ColumnName(target) = &a.target else {
        return Err(MyError::unsupported(format!("{statement} of a tuple")));
    };
    let parts = name_parts(target)?;
    let name = parts.last().map_or("", String::as_str);
    let c = position(table, name).ok_or_else(|| MyError::no_column(name, "field list"))?;
    if is_key(table, c) {
        return Err(MyError::unsupported(format!(
            "{statement} of a primary key column"
        )));
    }
    Ok(c)
}

/// The whole row an INSERT of `given` at instant `now` writes: each
/// column's value, else its default (`now` for a `DEFAULT
/// CURRENT_TIMESTAMP`), else NULL; error 1364 for a NOT NULL column with
/// no default.
fn whole_row(table: &Table, given: Vec<Option<Value>>, now: i64) -> Result<Vec<Value>, MyError> {
    let def = table.def();
    (given.into_iter().enumerate())
        .map(|(c, v)| match (v, &table.layout.defaults[c]) {
            (Some(v), _) => Ok(v),
            (None, Some(default)) => Ok(default.clone()),
            (None, None) if def.columns[c].defaults_to_now() => {
                Ok(time_of(def.columns[c].column_type, now).expect("a date-time column"))
            }
            (None, None) if def.columns[c].nullable => Ok(Value::Null),
            (None, None) => Err(MyError::new(
                1364,
                "HY000",
                format!(
                    "Field '{}' doesn't have a default value",
                    def.columns[c].name
                ),
            )),
        })
        .collect()
}

/// The position of a table's column, by name without regard to case (as
/// MySQL's column names are).
pub(super) fn position(table: &Table, name: &str) -> Option<usize> {
    (table.def().columns.iter()).position(|c| c.name.as_str().eq_ignore_ascii_case(name))
}

fn is_key(table: &Table, c: usize) -> bool {
    key_positions(table).any(|k| k == c)
}

/// The positions of the primary key's columns, in key order (as the
/// table's layout keeps them).
pub(super) fn key_positions(table: &Table) -> impl ExactSizeIterator<Item = usize> + Clone + '_ {
    table.layout.key.iter().map(|&c| usize::from(c))
}

/// The column an expression names: `c`, `t.c` or `db.t.c`.
pub(crate) fn column_of(table: &Table, e: &Expr, place: &str) -> Result<usize, MyError> {
    let name = match e {
        Expr::Identifier(i) => i.value.as_str(),
        Expr::CompoundIdentifier(parts) => {
            let n = parts.len();
            if n >= 2
                && !parts[n - 2]
                    .value
                    .eq_ignore_ascii_case(table.name().as_str())
            {
                return Err(MyError::no_column(&e.to_string(), place));
            }
            parts.last().map_or("", |p| p.value.as_str())
        }
        other => {
            return Err(MyError::unsupported(format!("'{other}' is not a column")));
        }
    };
    position(table, name).ok_or_else(|| MyError::no_column(name, place))
}

/// The keys a WHERE clause pins: every primary key column equal to a
/// constant, or (one of them) in a list of constants. `None`: there is no
/// WHERE or it is anything else, and rows would be scanned.
fn keys_named(table: &Table, selection: Option<&Expr>) -> Result<Option<Vec<Vec<Value>>>, MyError> {
    let Some(filter) = selection else {
        return Ok(None);
    };
    key_lits(table, filter)?
        .map(|per_column| Ok(expand_keys(table, &per_column, &[])?.into_vecs()))
        .transpose()
}

/// `keys_named`'s values as written, per key column (a prepared
/// statement's `?`s among them), before they are read for their columns.
fn key_lits(table: &Table, filter: &Expr) -> Result<Option<Vec<Vec<Lit>>>, MyError> {
    let key = &table.layout.key;
    let mut per_column: Vec<Option<Vec<Lit>>> = vec![None; key.len()];
    let mut conjuncts = Vec::new();
    flatten_and(filter, &mut conjuncts);
    for c in conjuncts {
        let (column, lits) = match c {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } => match (column_of(table, left, "where clause"), literal(right)?) {
                (Ok(col), Some(lit)) => (col, vec![lit]),
                _ => match (literal(left)?, column_of(table, right, "where clause")) {
                    (Some(lit), Ok(col)) => (col, vec![lit]),
                    _ => return Ok(None),
                },
            },
            Expr::InList {
                expr,
                list,
                negated: false,
            } => {
                let Ok(col) = column_of(table, expr, "where clause") else {
                    return Ok(None);
                };
                if list.len() > MAX_KEYS {
                    return Err(MyError::new(
                        1105,
                        "HY000",
                        format!(
                            "an IN list of keys has at most {MAX_KEYS} values; this one has {}",
                            list.len()
                        ),
                    ));
                }
                let mut lits = Vec::with_capacity(list.len());
                for e in list {
                    match literal(e)? {
                        Some(l) => lits.push(l),
                        None => return Ok(None),
                    }
                }
                (col, lits)
            }
            _ => return Ok(None),
        };
        let Some(k) = key.iter().position(|&p| usize::from(p) == column) else {
            return Ok(None);
        };
        if per_column[k].is_some() {
            return Ok(None);
        }
        per_column[k] = Some(lits);
    }
    Ok(per_column.into_iter().collect())
}

/// Whole primary keys, in key order, each once: `width` values apiece,
/// one key after another in one vector.
#[derive(Debug)]
pub(super) struct Keys {
    width: usize,
    values: Vec<Value>,
}

impl Keys {
    pub(super) fn len(&self) -> usize {
        self.values.len() / self.width.max(1)
    }

    /// Each key's values, in key order.
    pub(super) fn iter(&self) -> std::slice::ChunksExact<'_, Value> {
        self.values.chunks_exact(self.width.max(1))
    }

    pub(super) fn into_vecs(self) -> Vec<Vec<Value>> {
        self.iter().map(<[Value]>::to_vec).collect()
    }
}

/// The keys `per_column`'s values make (each column's values in turn,
/// with `args` for the `?`s), each read for its column, without repeats,
/// in key order — as an index would give their rows.
pub(super) fn expand_keys(
    table: &Table,
    per_column: &[Vec<Lit>],
    args: &[Lit],
) -> Result<Keys, MyError> {
    let def = table.def();
    // The keys' first columns so far: one empty prefix to begin with.
    let mut keys = Keys {
        width: 0,
        values: Vec::new(),
    };
    for (c, lits) in key_positions(table).zip(per_column) {
        let count = if keys.width == 0 { 1 } else { keys.len() };
        let column = &def.columns[c];
        let mut values = Vec::with_capacity(lits.len());
        for lit in lits {
            let lit = lit.bound(args)?;
            // A key is never NULL: `= NULL` finds nothing.
            if *lit == Lit::Null {
                continue;
            }
            match comparand(lit, column)? {
                Comparand::Value(v) => values.push(v),
                // No key equals a number its column cannot hold (`id = 2.5`).
                Comparand::Beyond => {}
            }
        }
        if values.len() > 1 {
            sort_unique(&mut values);
        }
        if count.saturating_mul(values.len()) > MAX_KEYS {
            return Err(MyError::new(
                1105,
                "HY000",
                format!("the WHERE clause names more than {MAX_KEYS} keys"),
            ));
        }
        // Each prefix followed by each value.
        keys.values = if keys.width == 0 {
            values
        } else {
            let mut longer = Vec::with_capacity(count * values.len() * (keys.width + 1));
            for prefix in keys.values.chunks_exact(keys.width) {
                for v in &values {
                    longer.extend_from_slice(prefix);
                    longer.push(v.clone());
                }
            }
            longer
        };
        keys.width += 1;
    }
    Ok(keys)
}

/// Sorts `values` and leaves each once: sorted, never compared pairwise
/// (a list of 100,000 values took billions of comparisons). Signed
/// integers, what keys mostly are, are sorted as such, not as values.
fn sort_unique(values: &mut Vec<Value>) {
    let ints: Vec<i64> = (values.iter())
        .map_while(|v| match v {
            Value::Int(i) => Some(*i),
            _ => None,
        })
        .collect();
    if ints.len() == values.len() {
        let mut ints = ints;
        ints.sort_unstable();
        ints.dedup();
        values.clear();
        values.extend(ints.into_iter().map(Value::Int));
        return;
    }
    values.sort_unstable_by(compare);
    values.dedup_by(|a, b| a == b);
}

fn flatten_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            flatten_and(left, out);
            flatten_and(right, out);
        }
        Expr::Nested(inner) => flatten_and(inner, out),
        other => out.push(other),
    }
}

/// LIMIT and OFFSET, whole numbers only.
pub(crate) fn limit_of(q: &ast::Query) -> Result<(Option<u64>, u64), MyError> {
    Ok(crate::tc::ronsql::plan::limit_of(q.limit_clause.as_ref())?)
}

/// A query's ORDER BY: each column (`column` finds it) and whether ascending.
pub(crate) fn order_of(
    q: &ast::Query,
    column: impl FnMut(&Expr) -> Result<usize, MyError>,
) -> Result<Vec<(usize, bool)>, MyError> {
    let Some(order_by) = &q.order_by else {
        return Ok(Vec::new());
    };
    let OrderByKind::Expressions(exprs) = &order_by.kind else {
        return Err(MyError::unsupported("ORDER BY ALL"));
    };
    order_exprs(exprs, column)
}

/// The columns of an ORDER BY list, each ascending or not.
fn order_exprs(
    exprs: &[ast::OrderByExpr],
    mut column: impl FnMut(&Expr) -> Result<usize, MyError>,
) -> Result<Vec<(usize, bool)>, MyError> {
    (exprs.iter())
        .map(|o| Ok((column(&o.expr)?, o.options.asc != Some(false))))
        .collect()
}

/// The row count of an UPDATE's or DELETE's LIMIT: a whole number.
fn row_limit(e: &Expr) -> Result<u64, MyError> {
    let clause = ast::LimitClause::LimitOffset {
        limit: Some(e.clone()),
        offset: None,
        limit_by: Vec::new(),
    };
    // MySQL's parser takes only a number there: anything else is syntax.
    let (limit, _) =
        crate::tc::ronsql::plan::limit_of(Some(&clause)).map_err(|e| MyError::syntax(e.message))?;
    Ok(limit.unwrap_or(u64::MAX))
}

/// Two values of one column, in the order an index keeps them.
pub(crate) fn compare(a: &Value, b: &Value) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::UInt(x), Value::UInt(y)) => x.cmp(y),
        (Value::Int(x), Value::UInt(y)) => i128::from(*x).cmp(&i128::from(*y)),
        (Value::UInt(x), Value::Int(y)) => i128::from(*x).cmp(&i128::from(*y)),
        (Value::Float(x), Value::Float(y)) => x.total_cmp(y),
        (Value::Double(x), Value::Double(y)) => x.total_cmp(y),
        // A FLOAT as the double it widens to, as MySQL compares it with a
        // constant (a FLOAT holding 0.1 is not 0.1).
        (Value::Float(x), Value::Double(y)) => f64::from(*x).total_cmp(y),
        (Value::Double(x), Value::Float(y)) => x.total_cmp(&f64::from(*y)),
        (Value::Decimal(_), Value::Int(_) | Value::UInt(_)) => compare(a, &as_decimal(b)),
        (Value::Int(_) | Value::UInt(_), Value::Decimal(_)) => compare(&as_decimal(a), b),
        // Byte by byte, as indexes and unique keys order and tell them
        // apart: utf8mb4_bin (a UTF-8 text's bytes order as its characters).
        (Value::Text(x), Value::Text(y)) => x.cmp(y),
        (Value::Bytes(x), Value::Bytes(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Decimal(x), Value::Decimal(y)) => {
            // At one scale: the larger scale's, exactly (i128 holds 38 digits).
            let scale = x.scale.max(y.scale);
            let at = |d: &crate::types::value::Decimal| {
                d.mantissa
                    .checked_mul(crate::types::value::POW10[usize::from(scale - d.scale)])
            };
            match (at(x), at(y)) {
                (Some(a), Some(b)) => a.cmp(&b),
                _ => x.to_string().cmp(&y.to_string()),
            }
        }
        (Value::Date(x), Value::Date(y)) => x.cmp(y),
        (Value::DateTime(x), Value::DateTime(y)) => x.cmp(y),
        (Value::Timestamp(x), Value::Timestamp(y)) => x.cmp(y),
        _ => a.to_string().cmp(&b.to_string()),
    }
}

/// An integer as a decimal of scale 0.
fn as_decimal(v: &Value) -> Value {
    let mantissa = match v {
        Value::Int(i) => i128::from(*i),
        Value::UInt(u) => i128::from(*u),
        other => return other.clone(),
    };
    Value::Decimal(crate::types::value::Decimal { mantissa, scale: 0 })
}

/// What the columns of a RonSQL answer are.
fn ronsql_columns(plan: &crate::tc::ronsql::plan::Plan) -> Vec<ColumnDef> {
    use crate::sql::agg::Func;
    use crate::sql::eval::Ty;
    use crate::tc::ronsql::plan::Source;
    plan.outputs
        .iter()
        .map(|o| {
            let t = match o.source {
                Source::Group(i) => {
                    let c = plan.program.group_by[i];
                    let def = &plan.table.def().columns[usize::from(c)];
                    let mut column = column_def(
                        &plan.table.database.name.to_string(),
                        plan.table.name().as_str(),
                        def,
                        false,
                    );
                    column.name = o.name.clone();
                    return column;
                }
                Source::Aggregate(i) => {
                    let a = &plan.program.aggregates[i];
                    match (a.func, a.ty) {
                        (Func::Count | Func::CountDistinct, _) => ty::LONGLONG,
                        (Func::Sum, Ty::Double) => ty::DOUBLE,
                        (Func::Sum, _) => ty::NEWDECIMAL,
                        (_, t) => value::datum_type(t),
                    }
                }
                Source::Avg { ty: Ty::Double, .. } => ty::DOUBLE,
                Source::Avg { .. } => ty::NEWDECIMAL,
                Source::Computed(i) => return value::computed_of(&o.name, plan.computed[i].1),
            };
            computed(&o.name, t)
        })
        .collect()
}

pub(super) fn query_error(e: crate::tc::QueryError) -> MyError {
    match e {
        crate::tc::QueryError::Tc(e) => e.into(),
        crate::tc::QueryError::Sql(e) => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_like_matches_names_as_mysql_does_in_linear_time() {
        let matches = |p: &str, t: &str| Like::names(p).unwrap().matches_name(t);
        assert!(matches("ver%", "version"));
        assert!(matches("VERSION", "version"));
        assert!(matches("v_rsion", "version"));
        assert!(!matches("v_rsion", "vrsion"));
        assert!(matches("%", ""));
        assert!(matches("a\\%", "a%"));
        assert!(!matches("a\\%", "ab"));
        // Many `%`s once took time exponential in their number.
        let hostile = format!("{}x", "%_".repeat(500));
        assert!(!matches(&hostile, &"a".repeat(10_000)));
        assert!(Like::names(&"%".repeat(1025)).is_err());
    }

    #[test]
    fn arguments_go_in_as_literals_never_as_sql() {
        let tokens = tokenize("SELECT c FROM t WHERE id = ? AND k IN (?, ?)").unwrap();
        assert_eq!(placeholders(&tokens), 3);
        let hostile = Lit::Str(b"1' OR '1'='1".to_vec());
        let bound = bind(
            &tokens,
            &[Lit::Int(-5), hostile.clone(), Lit::Str(vec![0xff, 0])],
        );
        let Statement::Query(q) = parse(bound).unwrap() else {
            panic!("a query")
        };
        let SetExpr::Select(s) = q.body.as_ref() else {
            panic!("a select")
        };
        let mut conj = Vec::new();
        flatten_and(s.selection.as_ref().unwrap(), &mut conj);
        assert_eq!(conj.len(), 2);
        let Expr::BinaryOp { right, .. } = conj[0] else {
            panic!("id = -5")
        };
        assert_eq!(literal(right).unwrap(), Some(Lit::Int(-5)));
        let Expr::InList { list, .. } = conj[1] else {
            panic!("k IN (..)")
        };
        assert_eq!(literal(&list[0]).unwrap(), Some(hostile));
        assert_eq!(literal(&list[1]).unwrap(), Some(Lit::Bytes(vec![0xff, 0])));
    }

    #[test]
    fn executable_comments_run_by_version_and_hints_go() {
        let words = |sql: &str| {
            let tokens = tokenize(sql).unwrap();
            tokens
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(words("/*! SELECT 1 */"), "SELECT 1");
        assert_eq!(words("SELECT /*!80036 2 */ /*!80037 3 */"), "SELECT 2");
        assert_eq!(words("SELECT 1 /*M!100101 , 2 */"), "SELECT 1");
        assert_eq!(words("SELECT '/*!40101 x */'"), "SELECT '/*!40101 x */'");
        assert_eq!(
            words("SELECT /*!40001 SQL_NO_CACHE */ HIGH_PRIORITY `sql_cache` FROM t"),
            "SELECT `sql_cache` FROM t"
        );
        assert!(tokenize("/*!40101 SELECT 'unterminated */").is_err());
    }

    #[test]
    fn one_statement_at_a_time() {
        assert!(tokenize("SELECT 1;").is_ok());
        assert_eq!(tokenize("SELECT 1; DROP TABLE t").unwrap_err().code, 1064);
    }

    #[test]
    fn nesting_is_bounded_before_it_costs_stack() {
        let n = MAX_DEPTH;
        let deepest = [
            format!("SELECT {}1{}", "(".repeat(n), ")".repeat(n)),
            format!(
                "SELECT * FROM t WHERE {}id = 1{}",
                "(".repeat(n),
                ")".repeat(n)
            ),
            format!("SELECT {}1", "- ".repeat(n)),
            format!("SELECT * FROM t WHERE {} id = 1", "NOT ".repeat(n)),
            format!(
                "INSERT INTO t VALUES ({}1{})",
                "(".repeat(n - 1),
                ")".repeat(n - 1)
            ),
        ];
        // Parentheses and prefix operators in turn: each level is both.
        let alternating = format!(
            "SELECT * FROM t WHERE {}id = 1{}",
            "(NOT - ".repeat(n),
            ")".repeat(n)
        );
        std::thread::Builder::new()
            .stack_size(crate::types::THREAD_STACK)
            .spawn(move || {
                let _ = tokenize(&alternating).map(parse);
            })
            .unwrap()
            .join()
            .unwrap();
        for text in &deepest {
            let deeper = text
                .replacen('1', "(1)", 1)
                .replacen("- ", "- - ", 1)
                .replacen("NOT ", "NOT NOT ", 1);
            assert_eq!(tokenize(&deeper).unwrap_err().code, 1105, "{deeper}");
            // The deepest taken parses within the stack of a thread that
            // serves requests (in a debug build, whose frames are largest).
            let text = text.clone();
            std::thread::Builder::new()
                .stack_size(crate::types::THREAD_STACK)
                .spawn(move || {
                    let _ = parse(tokenize(&text).unwrap());
                })
                .unwrap()
                .join()
                .unwrap();
        }
    }
}
