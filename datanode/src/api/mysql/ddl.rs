//! Changes of schema in SQL: `CREATE TABLE` read into the table
//! definition the control plane's API takes, and `CREATE INDEX`, `DROP
//! INDEX`, `ALTER TABLE … ADD/DROP INDEX`, `DROP TABLE` and `TRUNCATE`
//! into the changes it makes.
//!
//! On a node that reports to a control plane the change is asked of it,
//! on the client's key, so that it is checked, counted against the quotas,
//! audited and made on every node of the group — and the console shows
//! the table. A node alone makes it in its own catalog, as its internal API
//! does.

use serde_json::Value as Json;
use shoal_wire::internal::{SchemaChange, SqlSchemaChange, route};
use shoal_wire::schema::{
    CURRENT_TIMESTAMP, ColumnDef, ColumnName, ColumnType, DatabaseName, IndexDef, IndexName,
    OnUpdate, PrimaryKeyIndex, TableDef, TableName,
};
use sqlparser::ast::{self, ColumnOption, Expr, TableConstraint};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

use super::clock;
use super::error::MyError;
use super::query::{keyword, literal};
use super::session::Session;
use super::value::{Lit, to_value};
use crate::api::AccessError;
use crate::node::catalog::CatalogError;
use crate::storage::codec;
use crate::types::value::Value;

/// Where a node's changes of schema are made.
#[derive(Debug, Clone)]
pub(crate) enum Schema {
    /// Asked of the control plane at this URL, with the cluster secret.
    ControlPlane {
        url: String,
        secret: shoal_wire::secret::ClusterSecret,
        http: reqwest::Client,
    },
    /// In this node's own catalog: a node without a control plane.
    Local,
}

/// A change read from SQL, and in which database.
#[derive(Debug)]
pub(crate) struct Change {
    pub(crate) database: Option<String>,
    pub(crate) change: SchemaChange,
    /// `IF NOT EXISTS` / `IF EXISTS`: a change already made is not an error.
    pub(crate) tolerant: bool,
}

fn name_of(name: &ast::ObjectName) -> Result<(Option<String>, String), MyError> {
    match super::query::name_parts(name)?.as_slice() {
        [t] => Ok((None, t.clone())),
        [db, t] => Ok((Some(db.clone()), t.clone())),
        _ => Err(MyError::syntax(format!("'{name}' is not a table name"))),
    }
}

fn table_name(name: &str) -> Result<TableName, MyError> {
    TableName::parse(name).map_err(|e| {
        MyError::new(
            1103,
            "42000",
            format!("Incorrect table name '{}': {e}", shown(name)),
        )
    })
}

fn column_name(name: &str) -> Result<ColumnName, MyError> {
    ColumnName::parse(name).map_err(|e| {
        MyError::new(
            1166,
            "42000",
            format!("Incorrect column name '{}': {e}", shown(name)),
        )
    })
}

fn index_name(name: &str) -> Result<IndexName, MyError> {
    IndexName::parse(name).map_err(|e| {
        MyError::new(
            1280,
            "42000",
            format!("Incorrect index name '{}': {e}", shown(name)),
        )
    })
}

fn shown(name: &str) -> String {
    name.chars().take(64).collect()
}

/// The columns an index names, in order.
fn index_columns(columns: &[ast::IndexColumn]) -> Result<Vec<ColumnName>, MyError> {
    columns
        .iter()
        .map(|c| match &c.column.expr {
            Expr::Identifier(i) if c.column.options.asc != Some(false) => column_name(&i.value),
            other => Err(MyError::unsupported(format!(
                "an index on '{other}' (only columns, ascending)"
            ))),
        })
        .collect()
}

/// `CREATE TABLE` as a table definition.
pub(crate) fn create_table(ct: &ast::CreateTable) -> Result<Change, MyError> {
    if ct.or_replace
        || ct.temporary
        || ct.external
        || ct.query.is_some()
        || ct.like.is_some()
        || ct.clone.is_some()
        || ct.partition_by.is_some()
        || ct.cluster_by.is_some()
        || ct.primary_key.is_some()
        || ct.order_by.is_some()
    {
        return Err(MyError::unsupported(
            "this form of CREATE TABLE (TEMPORARY, OR REPLACE, AS SELECT, LIKE, PARTITION BY)",
        ));
    }
    table_options(&ct.table_options)?;
    let (database, name) = name_of(&ct.name)?;
    let mut columns = Vec::with_capacity(ct.columns.len());
    let mut primary_key: Vec<ColumnName> = Vec::new();
    let mut primary_key_index = PrimaryKeyIndex::Ordered;
    let mut indexes: Vec<IndexDef> = Vec::new();
    for c in &ct.columns {
        let name = column_name(&c.name.value)?;
        let type_text = c.data_type.to_string();
        let column_type: ColumnType = match type_text.to_ascii_uppercase().as_str() {
            "BOOLEAN" | "BOOL" => ColumnType::Bool,
            _ => type_text
                .parse()
                .map_err(|e| MyError::unsupported(format!("the column type {type_text} ({e})")))?,
        };
        let mut column = ColumnDef {
            name: name.clone(),
            column_type,
            nullable: true,
            default: None,
            auto_increment: false,
            on_update: None,
        };
        let (mut default, mut on_update) = (None, None);
        for option in &c.options {
            match &option.option {
                ColumnOption::Null => column.nullable = true,
                ColumnOption::NotNull => column.nullable = false,
                ColumnOption::Default(e) => default = Some(unnested(e).clone()),
                ColumnOption::OnUpdate(e) => on_update = Some(e.clone()),
                ColumnOption::Unique {
                    is_primary: true, ..
                } => {
                    if !primary_key.is_empty() {
                        return Err(multiple_primary_keys());
                    }
                    column.nullable = false;
                    primary_key.push(name.clone());
                }
                ColumnOption::Unique {
                    is_primary: false, ..
                } => indexes.push(IndexDef {
                    name: index_name(name.as_str())?,
                    columns: vec![name.clone()],
                    unique: true,
                }),
                ColumnOption::DialectSpecific(tokens)
                    if tokens.len() == 1
                        && tokens[0].to_string().eq_ignore_ascii_case("AUTO_INCREMENT") =>
                {
                    column.auto_increment = true;
                }
                ColumnOption::CharacterSet(cs) => charset_ok(&cs.to_string())?,
                ColumnOption::Collation(c) => charset_ok(&c.to_string())?,
                ColumnOption::Comment(_) => {}
                other => {
                    return Err(MyError::unsupported(format!("the column option {other}")));
                }
            }
        }
        if let Some(e) = default {
            column.default = if clock::is_now(&e, &column)? {
                Some(Json::from(CURRENT_TIMESTAMP))
            } else {
                default_json(&e, &column)?
            };
            // Its length or range too, as MySQL refuses it: 1067.
            codec::check_default(&column).map_err(|_| invalid_default(&column))?;
        }
        if let Some(e) = on_update {
            if !matches!(clock::is_now(&e, &column), Ok(true)) {
                return Err(MyError::new(
                    1294,
                    "HY000",
                    format!("Invalid ON UPDATE clause for '{}' column", column.name),
                ));
            }
            if !column.defaults_to_now() {
                return Err(MyError::unsupported(format!(
                    "ON UPDATE CURRENT_TIMESTAMP of column '{}' without DEFAULT CURRENT_TIMESTAMP",
                    column.name
                )));
            }
            column.on_update = Some(OnUpdate::CurrentTimestamp);
        }
        columns.push(column);
    }
    for constraint in &ct.constraints {
        match constraint {
            TableConstraint::PrimaryKey {
                columns: cols,
                index_type,
                ..
            } => {
                if !primary_key.is_empty() {
                    return Err(multiple_primary_keys());
                }
                primary_key = index_columns(cols)?;
                if matches!(index_type, Some(ast::IndexType::Hash)) {
                    primary_key_index = PrimaryKeyIndex::Hash;
                }
            }
            other => indexes.push(declared_index(other)?),
        }
    }
    if primary_key.is_empty() {
        return Err(MyError::new(
            1173,
            "42000",
            "This table type requires a primary key",
        ));
    }
    // A key column is never NULL, as MySQL makes it.
    for c in &mut columns {
        if primary_key.contains(&c.name) {
            c.nullable = false;
        }
    }
    let def = TableDef {
        name: table_name(&name)?,
        columns,
        primary_key,
        primary_key_index,
        indexes,
    };
    def.validate()
        .map_err(|e| MyError::new(1105, "HY000", format!("Invalid table: {e}")))?;
    Ok(Change {
        database,
        change: SchemaChange::CreateTable { table: def },
        tolerant: ct.if_not_exists,
    })
}

/// The index a table's constraint declares (`[UNIQUE] INDEX|KEY [name]
/// (columns)`), named after its first column when it has no name, as
/// MySQL names it.
fn declared_index(constraint: &TableConstraint) -> Result<IndexDef, MyError> {
    let (name, columns, unique) = match constraint {
        TableConstraint::Unique {
            name,
            index_name,
            columns,
            ..
        } => (index_name.as_ref().or(name.as_ref()), columns, true),
        TableConstraint::Index { name, columns, .. } => (name.as_ref(), columns, false),
        other => {
            return Err(MyError::unsupported(format!(
                "the constraint {} (foreign keys, checks, full-text)",
                other.to_string().chars().take(40).collect::<String>()
            )));
        }
    };
    let columns = index_columns(columns)?;
    let name = name.map_or_else(|| columns[0].to_string(), |i| i.value.clone());
    Ok(IndexDef {
        name: index_name(&name)?,
        columns,
        unique,
    })
}

fn multiple_primary_keys() -> MyError {
    MyError::new(1068, "42000", "Multiple primary key defined")
}

fn charset_ok(name: &str) -> Result<(), MyError> {
    let n = name.to_ascii_lowercase();
    if n.starts_with("utf8") || n == "binary" || n == "default" {
        return Ok(());
    }
    Err(MyError::unsupported(format!(
        "the character set or collation {} (Shoal stores utf8mb4)",
        shown(name)
    )))
}

/// `[DEFAULT] CHARACTER SET [=] cs`, `[DEFAULT] CHARSET [=] cs`,
/// `[DEFAULT] COLLATE [=] collation` of a CREATE DATABASE.
fn database_options(mut tokens: &[Token]) -> Result<(), MyError> {
    while let Some(first) = tokens.first() {
        if keyword(Some(first)) == Some(Keyword::DEFAULT) {
            tokens = &tokens[1..];
        }
        let after = match (keyword(tokens.first()), keyword(tokens.get(1))) {
            (Some(Keyword::CHARACTER), Some(Keyword::SET)) => &tokens[2..],
            (Some(Keyword::CHARSET | Keyword::COLLATE), _) => &tokens[1..],
            _ => {
                return Err(MyError::unsupported(format!(
                    "the database option '{}' (Shoal takes CHARACTER SET and COLLATE)",
                    tokens.first().map_or(String::new(), ToString::to_string)
                )));
            }
        };
        let after = match after.first() {
            Some(Token::Eq) => &after[1..],
            _ => after,
        };
        let value = match after.first() {
            Some(Token::Word(w)) => w.value.as_str(),
            Some(Token::SingleQuotedString(s) | Token::DoubleQuotedString(s)) => s.as_str(),
            _ => {
                return Err(MyError::syntax(
                    "a character set or collation name is needed",
                ));
            }
        };
        charset_ok(value)?;
        tokens = &after[1..];
    }
    Ok(())
}

/// Table options: the storage engines and character sets MySQL dumps
/// name are taken (Shoal has one engine and stores utf8mb4); others are
/// refused.
fn table_options(options: &ast::CreateTableOptions) -> Result<(), MyError> {
    let list = match options {
        ast::CreateTableOptions::None => return Ok(()),
        ast::CreateTableOptions::Plain(list)
        | ast::CreateTableOptions::With(list)
        | ast::CreateTableOptions::Options(list)
        | ast::CreateTableOptions::TableProperties(list) => list,
    };
    for option in list {
        let (key, value) = match option {
            ast::SqlOption::KeyValue { key, value } => (key.value.clone(), value.to_string()),
            ast::SqlOption::NamedParenthesizedList(l) if l.values.is_empty() => (
                l.key.value.clone(),
                l.name.as_ref().map(|n| n.value.clone()).unwrap_or_default(),
            ),
            ast::SqlOption::Comment(_) => continue,
            other => {
                return Err(MyError::unsupported(format!("the table option {other}")));
            }
        };
        let key = key.to_ascii_uppercase();
        let value = value.trim_matches(['\'', '"', '`']).to_ascii_lowercase();
        match key.as_str() {
            "ENGINE" if ["innodb", "ndb", "ndbcluster", "memory"].contains(&value.as_str()) => {}
            "CHARSET"
            | "CHARACTER SET"
            | "DEFAULT CHARSET"
            | "DEFAULT CHARACTER SET"
            | "COLLATE"
            | "DEFAULT COLLATE" => charset_ok(&value)?,
            "ROW_FORMAT" | "STATS_PERSISTENT" => {}
            _ => {
                return Err(MyError::unsupported(format!(
                    "the table option {key} = {}",
                    shown(&value)
                )));
            }
        }
    }
    Ok(())
}

/// A column's DEFAULT as the table definition keeps it: a JSON value of
/// the column's kind, checked against the column (`DEFAULT '0'` on an
/// integer column is 0). `DEFAULT NULL` is no default.
/// A default in parentheses (MySQL 8's expression default, as SQLAlchemy
/// writes `DEFAULT (now())`): the expression in it.
fn unnested(mut e: &Expr) -> &Expr {
    while let Expr::Nested(inner) = e {
        e = inner;
    }
    e
}

fn default_json(e: &Expr, column: &ColumnDef) -> Result<Option<Json>, MyError> {
    let lit = literal(e)?
        .ok_or_else(|| MyError::unsupported(format!("the default '{e}' (only constants)")))?;
    if lit == Lit::Null {
        return Ok(None);
    }
    let value = to_value(&lit, column).map_err(|_| invalid_default(column))?;
    Ok(Some(match value {
        Value::Int(v) => Json::from(v),
        Value::UInt(v) => Json::from(v),
        Value::Double(v) => Json::from(v),
        Value::Float(v) => Json::from(f64::from(v)),
        Value::Bool(b) => Json::from(b),
        Value::Bytes(b) => {
            use base64::Engine as _;
            Json::from(base64::engine::general_purpose::STANDARD.encode(b))
        }
        other => Json::from(other.to_string()),
    }))
}

pub(super) fn invalid_default(column: &ColumnDef) -> MyError {
    MyError::new(
        1067,
        "42000",
        format!("Invalid default value for '{}'", column.name),
    )
}

/// `CREATE [UNIQUE] INDEX name ON t (cols)`.
pub(crate) fn create_index(ci: &ast::CreateIndex) -> Result<Change, MyError> {
    if ci.concurrently
        || !ci.include.is_empty()
        || ci.predicate.is_some()
        || !ci.with.is_empty()
        || matches!(ci.using, Some(ast::IndexType::Hash))
    {
        return Err(MyError::unsupported("this form of CREATE INDEX"));
    }
    let Some(name) = &ci.name else {
        return Err(MyError::syntax("CREATE INDEX needs a name"));
    };
    let (_, index) = name_of(name)?;
    let (database, table) = name_of(&ci.table_name)?;
    Ok(Change {
        database,
        change: SchemaChange::AddIndex {
            table: table_name(&table)?,
            index: IndexDef {
                name: index_name(&index)?,
                columns: index_columns(&ci.columns)?,
                unique: ci.unique,
            },
        },
        tolerant: ci.if_not_exists,
    })
}

/// `ALTER TABLE t ADD [UNIQUE] INDEX|KEY …` and `ALTER TABLE t DROP
/// INDEX|KEY name`: the index built online or dropped, as by CREATE INDEX
/// and DROP INDEX. One change per statement, which is then all of it or
/// nothing; `ALGORITHM` and `LOCK` are taken where they ask for what the
/// change does anyway (in place, without a lock).
pub(crate) fn alter_table(
    name: &ast::ObjectName,
    if_exists: bool,
    operations: &[ast::AlterTableOperation],
) -> Result<Change, MyError> {
    use ast::{
        AlterTableAlgorithm as Algorithm, AlterTableLock as Lock, AlterTableOperation as Op,
    };
    if if_exists {
        return Err(MyError::unsupported("ALTER TABLE IF EXISTS"));
    }
    let (database, table) = name_of(name)?;
    let table = table_name(&table)?;
    let mut change = None;
    for op in operations {
        let made = match op {
            Op::Algorithm { algorithm, .. } => match algorithm {
                Algorithm::Default | Algorithm::Inplace => continue,
                other => {
                    return Err(MyError::unsupported(format!(
                        "ALGORITHM={other}: indexes are built in place"
                    )));
                }
            },
            Op::Lock { lock, .. } => match lock {
                Lock::Default | Lock::None => continue,
                other => {
                    return Err(MyError::unsupported(format!(
                        "LOCK={other}: indexes are built without a lock on the table"
                    )));
                }
            },
            Op::AddConstraint {
                constraint: TableConstraint::PrimaryKey { .. },
                ..
            }
            | Op::DropPrimaryKey { .. } => {
                return Err(MyError::unsupported(
                    "ALTER TABLE of the primary key (a table keeps the key it was made with)",
                ));
            }
            Op::AddConstraint {
                constraint,
                not_valid: false,
            } => SchemaChange::AddIndex {
                table: table.clone(),
                index: declared_index(constraint)?,
            },
            Op::DropIndex { name } => SchemaChange::DropIndex {
                table: table.clone(),
                index: index_name(&name.value)?,
            },
            other => {
                let shown = other.to_string();
                let verb: String = (shown.split_whitespace().take(2))
                    .collect::<Vec<_>>()
                    .join(" ")
                    .chars()
                    .take(40)
                    .collect();
                return Err(MyError::unsupported(format!(
                    "ALTER TABLE … {verb} (only ADD INDEX and DROP INDEX)"
                )));
            }
        };
        if change.replace(made).is_some() {
            return Err(MyError::unsupported(
                "several changes in one ALTER TABLE (make one per statement)",
            ));
        }
    }
    let change = change.ok_or_else(|| MyError::syntax("ALTER TABLE names no change"))?;
    Ok(Change {
        database,
        change,
        tolerant: false,
    })
}

/// MySQL's `DROP KEY name` in an ALTER TABLE, which the parser reads only
/// as `DROP INDEX name`, made that.
pub(crate) fn drop_key_as_drop_index(tokens: &mut [Token]) {
    for i in 1..tokens.len() {
        if keyword(tokens.get(i)) == Some(Keyword::KEY)
            && keyword(tokens.get(i - 1)) == Some(Keyword::DROP)
        {
            tokens[i] = Token::make_keyword("INDEX");
        }
    }
}

/// `DROP TABLE t, …` and `DROP INDEX name ON t`.
pub(crate) fn drop_objects(
    object_type: ast::ObjectType,
    if_exists: bool,
    names: &[ast::ObjectName],
    table: Option<&ast::ObjectName>,
) -> Result<Vec<Change>, MyError> {
    match (object_type, table) {
        (ast::ObjectType::Table, None) => names
            .iter()
            .map(|n| {
                let (database, table) = name_of(n)?;
                Ok(Change {
                    database,
                    change: SchemaChange::DropTable {
                        table: table_name(&table)?,
                    },
                    tolerant: if_exists,
                })
            })
            .collect(),
        (ast::ObjectType::Index, Some(on)) => {
            let [name] = names else {
                return Err(MyError::syntax("DROP INDEX names one index"));
            };
            let (_, index) = name_of(name)?;
            let (database, table) = name_of(on)?;
            Ok(vec![Change {
                database,
                change: SchemaChange::DropIndex {
                    table: table_name(&table)?,
                    index: index_name(&index)?,
                },
                tolerant: if_exists,
            }])
        }
        (ast::ObjectType::Index, None) => Err(MyError::syntax("DROP INDEX name ON table")),
        (other, _) => Err(MyError::unsupported(format!("DROP {other}"))),
    }
}

/// `TRUNCATE [TABLE] t`.
pub(crate) fn truncate(names: &[ast::TruncateTableTarget]) -> Result<Change, MyError> {
    let [target] = names else {
        return Err(MyError::unsupported("TRUNCATE of several tables"));
    };
    let (database, table) = name_of(&target.name)?;
    Ok(Change {
        database,
        change: SchemaChange::Truncate {
            table: table_name(&table)?,
        },
        tolerant: false,
    })
}

impl Session {
    /// `CREATE {DATABASE | SCHEMA} [IF NOT EXISTS] db [options]`. A
    /// database is made in the control plane, with its quotas, not in SQL;
    /// so this only confirms one the key is granted exists — with `IF NOT
    /// EXISTS` (as a mysqldump file begins) it is done, without, 1007, as
    /// MySQL answers for an existing database. Any other, or a read key,
    /// is 1044. Options
    /// name Shoal's character set (utf8mb4, or MySQL's other UTF-8 names)
    /// or are refused.
    pub(super) fn create_database(&self, tokens: &[Token]) -> Result<(), MyError> {
        let (if_not_exists, rest) = super::query::if_not_exists(tokens)?;
        let Some((name, options)) = rest.split_first() else {
            return Err(MyError::syntax("CREATE DATABASE takes a database name"));
        };
        let db = super::query::word(Some(name))
            .ok_or_else(|| MyError::syntax("CREATE DATABASE takes a database name"))?;
        database_options(options)?;
        match crate::api::access(&self.engine, self.key()?, db) {
            // The CREATE privilege is a read-write key's.
            Ok((_, grant)) if grant.role == crate::tc::Role::Read => {
                Err(MyError::denied_database(&self.user, db))
            }
            Ok(_) if if_not_exists => Ok(()),
            Ok(_) => Err(MyError::new(
                1007,
                "HY000",
                format!("Can't create database '{}'; database exists", shown(db)),
            )),
            Err(AccessError::NotGranted(_) | AccessError::NoSuchDatabase(_)) => {
                let mut denied = MyError::denied_database(&self.user, db);
                denied.message.push_str(
                    ": databases are created in the control plane (its console or API), with their quotas",
                );
                Err(denied)
            }
            Err(AccessError::Unauthenticated(_)) => Err(super::session::revoked()),
        }
    }

    /// Makes a change of schema (see the module's docs): nothing, or all
    /// of it, is done.
    pub(crate) async fn change_schema(&mut self, change: Change) -> Result<(), MyError> {
        let db = match change.database {
            Some(db) => db,
            None => self.database.clone().ok_or_else(MyError::no_database)?,
        };
        let grant = self.grant(&db)?;
        if grant.role == crate::tc::Role::Read {
            let what = match &change.change {
                SchemaChange::CreateTable { .. } => "CREATE",
                SchemaChange::DropTable { .. } => "DROP",
                SchemaChange::Truncate { .. } => "DROP",
                SchemaChange::AddIndex { .. } | SchemaChange::DropIndex { .. } => "INDEX",
            };
            return Err(MyError::new(
                1142,
                "42000",
                format!(
                    "{what} command denied to user '{}' on database '{db}'",
                    self.user
                ),
            ));
        }
        let database = DatabaseName::parse(&db).map_err(|_| MyError::unknown_database(&db))?;
        let made = match &self.shared.schema {
            Schema::ControlPlane { url, secret, http } => {
                let asked = SqlSchemaChange {
                    key: self.user.clone(),
                    database,
                    change: change.change.clone(),
                };
                ask(http, url, secret, &asked).await
            }
            Schema::Local => self.change_locally(&database, &change.change).await,
        };
        match made {
            Err(e) if change.tolerant && matches!(e.code, 1050 | 1051 | 1061 | 1091) => Ok(()),
            other => other,
        }
    }

    async fn change_locally(
        &self,
        db: &DatabaseName,
        change: &SchemaChange,
    ) -> Result<(), MyError> {
        let engine = &self.engine;
        let done = match change {
            SchemaChange::CreateTable { table } => {
                engine.create_table(db, table.clone()).await.map(|_| ())
            }
            SchemaChange::DropTable { table } => {
                engine.drop_table(db.as_str(), table.as_str()).await
            }
            SchemaChange::AddIndex { table, index } => engine
                .add_index(db.as_str(), table.as_str(), index.clone())
                .await
                .map(|_| ()),
            SchemaChange::DropIndex { table, index } => engine
                .drop_index(db.as_str(), table.as_str(), index.as_str())
                .await
                .map(|_| ()),
            SchemaChange::Truncate { table } => {
                let def = engine
                    .table(db.as_str(), table.as_str())
                    .map_err(|e| catalog_error(db.as_str(), change, e))?
                    .def()
                    .clone();
                engine
                    .drop_table(db.as_str(), table.as_str())
                    .await
                    .map_err(|e| catalog_error(db.as_str(), change, e))?;
                engine.create_table(db, def).await.map(|_| ())
            }
        };
        done.map_err(|e| catalog_error(db.as_str(), change, e))
    }
}

/// A node's refusal of a change, as MySQL's error.
fn catalog_error(db: &str, change: &SchemaChange, e: CatalogError) -> MyError {
    match e {
        CatalogError::TableExists { table, .. } => table_exists(table.as_str()),
        CatalogError::NoSuchTable { table, .. } => missing_table(change, db, &table),
        CatalogError::IndexExists { index, .. } => duplicate_index(&index),
        CatalogError::NoSuchIndex { index, .. } => no_index(&index),
        CatalogError::UniqueDuplicates {
            table,
            index,
            entry,
        } => MyError::new(
            1062,
            "23000",
            format!("Duplicate entry '{entry}' for key '{table}.{index}'"),
        ),
        other => MyError::new(1105, "HY000", other.to_string()),
    }
}

fn table_exists(table: &str) -> MyError {
    MyError::new(
        1050,
        "42S01",
        format!("Table '{}' already exists", shown(table)),
    )
}

/// A change's table is not there: 1051 for DROP TABLE, 1146 for a change
/// of the table, as MySQL answers.
fn missing_table(change: &SchemaChange, db: &str, table: &str) -> MyError {
    match change {
        SchemaChange::DropTable { .. } => MyError::new(
            1051,
            "42S02",
            format!("Unknown table '{db}.{}'", shown(table)),
        ),
        _ => MyError::no_table(db, table),
    }
}

fn duplicate_index(index: &str) -> MyError {
    MyError::new(
        1061,
        "42000",
        format!("Duplicate key name '{}'", shown(index)),
    )
}

fn no_index(index: &str) -> MyError {
    MyError::new(
        1091,
        "42000",
        format!(
            "Can't DROP '{}'; check that column/key exists",
            shown(index)
        ),
    )
}

/// Asks the control plane for a change: its answer as MySQL's error.
async fn ask(
    http: &reqwest::Client,
    url: &str,
    secret: &shoal_wire::secret::ClusterSecret,
    asked: &SqlSchemaChange,
) -> Result<(), MyError> {
    let unreachable = |e: &dyn std::fmt::Display| {
        MyError::new(
            1105,
            "HY000",
            format!(
                "a change of schema is made by the control plane, which this node cannot reach now ({e}); nothing was changed"
            ),
        )
    };
    let answer = http
        .post(format!("{url}{}", route::SQL_SCHEMA_CHANGE))
        .bearer_auth(secret.expose())
        .json(asked)
        .send()
        .await
        .map_err(|e| unreachable(&e))?;
    let status = answer.status();
    if status.is_success() {
        return Ok(());
    }
    let body: Json = answer.json().await.unwrap_or(Json::Null);
    let code = body["error"]["code"].as_str().unwrap_or("");
    let message = body["error"]["message"].as_str().unwrap_or("").to_owned();
    let (db, table, index) = match &asked.change {
        SchemaChange::CreateTable { table } => (
            asked.database.as_str(),
            table.name.to_string(),
            String::new(),
        ),
        SchemaChange::DropTable { table } | SchemaChange::Truncate { table } => {
            (asked.database.as_str(), table.to_string(), String::new())
        }
        SchemaChange::AddIndex { table, index } => (
            asked.database.as_str(),
            table.to_string(),
            index.name.to_string(),
        ),
        SchemaChange::DropIndex { table, index } => (
            asked.database.as_str(),
            table.to_string(),
            index.to_string(),
        ),
    };
    Err(match (status.as_u16(), code) {
        (409, "TABLE_EXISTS") => table_exists(&table),
        (409, "INDEX_EXISTS") => duplicate_index(&index),
        (409, "DUPLICATE_KEY") => MyError::new(1062, "23000", message),
        (409, "QUOTA_EXCEEDED") => MyError::new(
            1296,
            "HY000",
            format!("Got error '{message}' from NDBCLUSTER"),
        ),
        (404, _) if !index.is_empty() && message.contains("index") => no_index(&index),
        (404, _) => missing_table(&asked.change, db, &table),
        (403, _) => MyError::new(1142, "42000", message),
        (400, _) => MyError::new(1105, "HY000", format!("Invalid table: {message}")),
        _ if status.is_server_error() => unreachable(&message),
        _ => MyError::new(1105, "HY000", message),
    })
}
