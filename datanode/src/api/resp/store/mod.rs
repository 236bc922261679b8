//! Redis keys as rows of two tables that Shoal creates in the database on
//! its first write, so that they are accounted and limited like any table:
//!
//! - `redis_keys (k VARBINARY(3000) PRIMARY KEY, t TINYINT, exp BIGINT NULL,
//!   n INT, v VARBINARY(26000))`: one row per key — its type (string or
//!   hash), its expiry (Unix milliseconds), and its value, or the value's
//!   first 26,000 bytes when it has `n` more parts;
//! - `redis_chunks (k, i, v)`: part `i` (1..=n) of a longer value.
//!
//! A small hash is one value: its fields and values, encoded (`t` 1). A
//! hash of more than `WHOLE_FIELDS` fields, or too large for one row, keeps
//! a row per field (`t` 2; see `fields`): its key's row holds the number of
//! fields (`n`) and the hash's id (`v`), and `redis_fields (h, f, n, v)`,
//! ordered by `(h, f)`, a row per field, with `redis_field_parts (h, f, i,
//! v)` for the parts of a value longer than a row. A field is then written,
//! read and deleted whatever the hash's size; the whole hash is a range
//! scan. A hash of rows that is deleted or replaced leaves its id in
//! `redis_trash`, in the same request, and its rows are deleted after it,
//! a step at a time (or by the node's purge, after a restart). Both forms
//! are read; a transaction writes hashes whole. Every request goes
//! through the transaction coordinator with the connection's grant, so the
//! database's rates and quotas apply; a value and its parts are written in
//! one atomic request.
//!
//! Writers of a key take its lock (one of `LOCKS`, by hash): a
//! read-modify-write such as `INCR` or `APPEND` sees no other writer between
//! its read and its write. A plain read of a value of one part takes no lock;
//! a read of a longer one does, so that it never sees parts of two values.
//! Each lock's stripe also has a version, moved on by every write to a key
//! of it: what `WATCH` looks at.
//!
//! A transaction (`MULTI` … `EXEC`) holds the locks of every key it names
//! for the whole `EXEC`, and its commands write to an [`Overlay`] instead of
//! the tables: they read their own writes from it, and `EXEC` commits it as
//! one atomic request, so that the database's limits and quotas judge the
//! transaction as a whole and it applies entirely or not at all.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{SystemTime, UNIX_EPOCH};

use shoal_wire::schema::{TableDef, TableName};

pub(crate) mod fields;
mod increment;

pub(crate) use self::increment::Unchanged;

use super::locks::{KeyGuard, KeyLocks};
use crate::log::Mark;
use crate::node::Engine;
use crate::node::catalog::CatalogError;
use crate::storage::CmpOp;
use crate::storage::fixed::RowRef;
use crate::tc::batch::{Batch, OperationError, RowView};
use crate::tc::{Commit, Grant, Role, Tc, TcError};
use crate::tc::{Database, Table};
use crate::types::DatabaseId;
use crate::types::value::Value;

/// The table of keys.
pub(crate) const KEYS_TABLE: &str = "redis_keys";
/// The table of the further parts of long values.
pub(crate) const CHUNKS_TABLE: &str = "redis_chunks";
/// Longest key, in bytes.
pub(crate) const MAX_KEY: usize = 3000;
/// Bytes of a value in one row.
pub(crate) const PART: usize = 26_000;
/// Number of key locks.
const LOCKS: usize = 1 << 16;
/// Expired keys `DBSIZE` purges before it counts: in rounds of this many,
/// at most this many rounds.
const COUNT_PURGE_BATCH: usize = 10_000;
const COUNT_PURGE_ROUNDS: usize = 100;

const KEYS_DEF: &str = r#"{"name": "redis_keys", "columns": [
    {"name": "k", "type": "VARBINARY(3000)"},
    {"name": "t", "type": "TINYINT UNSIGNED"},
    {"name": "exp", "type": "BIGINT", "nullable": true},
    {"name": "n", "type": "INT UNSIGNED"},
    {"name": "v", "type": "VARBINARY(26000)"}],
  "primary_key": ["k"], "primary_key_index": "hash"}"#;

const CHUNKS_DEF: &str = r#"{"name": "redis_chunks", "columns": [
    {"name": "k", "type": "VARBINARY(3000)"},
    {"name": "i", "type": "INT UNSIGNED"},
    {"name": "v", "type": "VARBINARY(26000)"}],
  "primary_key": ["k", "i"], "primary_key_index": "hash"}"#;

/// The tables of hashes kept a row per field (see `fields`).
pub(crate) const FIELDS_TABLE: &str = "redis_fields";
pub(crate) const FIELD_PARTS_TABLE: &str = "redis_field_parts";
pub(crate) const TRASH_TABLE: &str = "redis_trash";

const FIELDS_DEF: &str = r#"{"name": "redis_fields", "columns": [
    {"name": "h", "type": "BIGINT UNSIGNED"},
    {"name": "f", "type": "VARBINARY(3000)"},
    {"name": "n", "type": "INT UNSIGNED"},
    {"name": "v", "type": "VARBINARY(26000)"}],
  "primary_key": ["h", "f"]}"#;

const FIELD_PARTS_DEF: &str = r#"{"name": "redis_field_parts", "columns": [
    {"name": "h", "type": "BIGINT UNSIGNED"},
    {"name": "f", "type": "VARBINARY(3000)"},
    {"name": "i", "type": "INT UNSIGNED"},
    {"name": "v", "type": "VARBINARY(26000)"}],
  "primary_key": ["h", "f", "i"], "primary_key_index": "hash"}"#;

const TRASH_DEF: &str = r#"{"name": "redis_trash", "columns": [
    {"name": "h", "type": "BIGINT UNSIGNED"}],
  "primary_key": ["h"], "primary_key_index": "hash"}"#;

static FIELDS: LazyLock<TableDef> =
    LazyLock::new(|| serde_json::from_str(FIELDS_DEF).expect("a valid table"));
static FIELD_PARTS: LazyLock<TableDef> =
    LazyLock::new(|| serde_json::from_str(FIELD_PARTS_DEF).expect("a valid table"));
static TRASH: LazyLock<TableDef> =
    LazyLock::new(|| serde_json::from_str(TRASH_DEF).expect("a valid table"));

/// The two tables' definitions, parsed once: a database without them is
/// looked at on every read until its first write.
static KEYS: LazyLock<TableDef> =
    LazyLock::new(|| serde_json::from_str(KEYS_DEF).expect("a valid table"));
static CHUNKS: LazyLock<TableDef> =
    LazyLock::new(|| serde_json::from_str(CHUNKS_DEF).expect("a valid table"));

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    String = 0,
    Hash = 1,
}

/// A key's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub kind: Kind,
    /// Unix milliseconds after which the key is gone.
    pub expires: Option<i64>,
    /// Parts after the first.
    pub parts: u32,
    /// The value, or its first part.
    pub head: Vec<u8>,
    /// A hash kept a row per field: its id and how many fields it has.
    pub fields: Option<FieldsRef>,
}

/// A hash kept a row per field (`t` 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldsRef {
    pub id: u64,
    pub count: u64,
}

/// A value to write to a key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Item<'a> {
    pub key: &'a [u8],
    pub kind: Kind,
    pub value: &'a [u8],
    /// Unix milliseconds; `None` keeps the key until deleted.
    pub expires: Option<i64>,
    /// A hash kept a row per field, moved to this key whole: `value` is
    /// empty and only the key's row is written.
    pub fields: Option<FieldsRef>,
}

impl<'a> Item<'a> {
    pub(crate) fn string(key: &'a [u8], value: &'a [u8], expires: Option<i64>) -> Item<'a> {
        Item {
            key,
            kind: Kind::String,
            value,
            expires,
            fields: None,
        }
    }
}

/// Why a command on keys failed; it changed nothing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error(transparent)]
    Tc(#[from] TcError),
    #[error(transparent)]
    Operation(#[from] OperationError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("key is longer than {MAX_KEY} bytes")]
    KeyTooLong,
    #[error("the value is longer than the {0} bytes allowed")]
    TooLarge(usize),
    #[error(
        "the hash holds more than the {0} bytes one reply may carry; read it by field (HGET, HMGET) or with HSCAN"
    )]
    HashTooLarge(usize),
    #[error("a field name of a hash of more than 128 fields is at most 3000 bytes")]
    FieldTooLong,
    #[error(
        "table '{0}' exists in this database with columns Shoal does not use for keys; drop or rename it"
    )]
    ForeignTable(&'static str),
    /// A value of several parts, asked of a node that is not the
    /// database's primary: the parts are read together only there.
    #[error("the value is read whole only on its database's primary, another node; retry")]
    NotWholeHere,
}

/// The tables of one database's keys.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    pub keys: Arc<Table>,
    /// `None` on a node that has not seen the table yet: a backup gets a
    /// table with its first row, and it holds no part until then.
    pub chunks: Option<Arc<Table>>,
    /// Those of hashes kept a row per field, once made (a database's
    /// first write makes them).
    pub hashes: Option<HashTables>,
}

impl Tables {
    /// The table of values' parts: there wherever a key has parts.
    fn chunks(&self) -> Result<&Arc<Table>, StoreError> {
        self.chunks.as_ref().ok_or(StoreError::NotWholeHere)
    }
}

impl HashTables {
    /// The table of fields' parts: there wherever a field has parts.
    pub(crate) fn parts(&self) -> Result<&Arc<Table>, StoreError> {
        self.parts.as_ref().ok_or(StoreError::NotWholeHere)
    }

    /// The trash: made before a hash of rows is first deleted.
    pub(crate) fn trash(&self) -> Result<&Arc<Table>, StoreError> {
        self.trash.as_ref().ok_or(StoreError::NotWholeHere)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct HashTables {
    pub fields: Arc<Table>,
    /// `None` where not made or not seen yet, as `Tables::chunks`.
    pub parts: Option<Arc<Table>>,
    pub trash: Option<Arc<Table>>,
}

/// A connection's database: its grant, its key tables once known, and
/// the writes of the transaction it is running, if it is.
#[derive(Debug)]
pub(crate) struct Db {
    pub db: Arc<Database>,
    pub grant: Grant,
    tables: Option<Tables>,
    tx: Option<Overlay>,
    /// A read here met a value only the primary reads whole
    /// (`NotWholeHere`); taken by the connection, which asks the primary.
    pub not_whole_here: bool,
}

impl Db {
    pub(crate) fn new(db: Arc<Database>, grant: Grant) -> Db {
        Db {
            db,
            grant,
            tables: None,
            tx: None,
            not_whole_here: false,
        }
    }

    /// From now until [`Store::commit`], writes go to an overlay.
    pub(crate) fn begin(&mut self) {
        self.tx = Some(Overlay::default());
    }

    /// Forgets the transaction's writes.
    pub(crate) fn rollback(&mut self) {
        self.tx = None;
    }

    /// Whether a transaction is running: its commands' writes go to it.
    pub(crate) fn in_transaction(&self) -> bool {
        self.tx.is_some()
    }
}

/// The writes of a transaction not yet committed, by key: what the key
/// holds now (`None`: deleted).
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    writes: HashMap<Vec<u8>, Option<Pending>>,
}

#[derive(Debug, Clone)]
struct Pending {
    kind: Kind,
    value: Vec<u8>,
    expires: Option<i64>,
}

impl Pending {
    fn entry(&self) -> Entry {
        Entry {
            kind: self.kind,
            expires: self.expires,
            parts: parts_after_head(self.value.len()),
            head: self.value[..self.value.len().min(PART)].to_vec(),
            fields: None,
        }
    }
}

impl Overlay {
    /// What the transaction says `key` holds: `None` when it has not
    /// touched it, `Some(None)` when the key is gone.
    fn get(&self, key: &[u8], now: i64) -> Option<Option<&Pending>> {
        let pending = self.writes.get(key)?;
        Some(
            pending
                .as_ref()
                .filter(|p| p.expires.is_none_or(|at| at > now)),
        )
    }
}

/// Keys given an expiry since the node started, by (when, a sequence
/// number): the key tables and the key. An entry whose key has been set
/// anew since is found out when it comes due, and skipped.
#[derive(Debug, Default)]
struct Expiring {
    due: std::collections::BTreeMap<(i64, u64), (Tables, Vec<u8>)>,
    next: u64,
}

/// Redis keys over the node's tables; shared by every connection.
#[derive(Debug)]
pub(crate) struct Store {
    engine: Engine,
    locks: KeyLocks,
    /// Per lock stripe: moved on by every write to a key of it, under the
    /// stripe's lock.
    versions: Box<[AtomicU64]>,
    /// Keys with an expiry, by when: what the purge looks at.
    expiring: std::sync::Mutex<Expiring>,
    /// Held by a purge of the keys the index says are due.
    purging: tokio::sync::Mutex<()>,
    /// Largest value (string or encoded hash).
    max_value: usize,
    /// This process's own: mixed into `SCAN` cursors, so that one another
    /// node or an earlier run of this one made is told apart.
    scan_seed: u64,
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn key_value(key: &[u8]) -> Result<Value, StoreError> {
    if key.len() > MAX_KEY {
        return Err(StoreError::KeyTooLong);
    }
    Ok(Value::Bytes(key.to_vec()))
}

/// Integer column `c` of a key row.
fn int_column(row: &RowView<'_>, c: u16) -> Option<i64> {
    int_value(&row.value(c))
}

/// An integer column's value.
fn int_value(value: &Value) -> Option<i64> {
    match *value {
        Value::Int(n) => Some(n),
        Value::UInt(n) => Some(n as i64),
        _ => None,
    }
}

/// How many parts after the first the value of a key row has.
fn parts_of(row: &RowView<'_>) -> u32 {
    if int_column(row, 1) == Some(FIELDS_FORM) {
        return 0;
    }
    int_column(row, 3).unwrap_or(0) as u32
}

fn decode_entry(row: &RowView<'_>) -> Entry {
    let t = int_column(row, 1);
    let head = row.bytes(4).unwrap_or_default().to_vec();
    if t == Some(FIELDS_FORM) {
        return Entry {
            kind: Kind::Hash,
            expires: int_column(row, 2),
            parts: 0,
            fields: Some(FieldsRef {
                id: fields::id_of(&head),
                count: int_column(row, 3).unwrap_or(0) as u64,
            }),
            head,
        };
    }
    Entry {
        kind: if t == Some(1) {
            Kind::Hash
        } else {
            Kind::String
        },
        expires: int_column(row, 2),
        parts: parts_of(row),
        head,
        fields: None,
    }
}

/// `t` of a hash kept a row per field.
pub(crate) const FIELDS_FORM: i64 = 2;

/// The hash id a key row (as a scan or a replace answers it) holds, if it
/// is of a hash kept a row per field.
fn fields_id_of(row: &RowView<'_>) -> Option<u64> {
    (int_column(row, 1) == Some(FIELDS_FORM))
        .then(|| fields::id_of(row.bytes(4).unwrap_or_default()))
}

impl Entry {
    pub(crate) fn is_live(&self, now: i64) -> bool {
        self.expires.is_none_or(|at| at > now)
    }
}

impl Store {
    pub(crate) fn new(engine: Engine, max_value: usize) -> Store {
        Store {
            engine,
            locks: KeyLocks::new(LOCKS),
            versions: (0..LOCKS).map(|_| AtomicU64::new(0)).collect(),
            expiring: std::sync::Mutex::default(),
            purging: tokio::sync::Mutex::new(()),
            max_value,
            scan_seed: crate::node::random_seed().unwrap_or_else(|_| now_ms() as u64),
        }
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) fn tc(&self) -> &Tc {
        self.engine.tc()
    }

    pub(crate) fn max_value(&self) -> usize {
        self.max_value
    }

    fn stripe(&self, db: DatabaseId, key: &[u8]) -> usize {
        let stripes = self.locks.stripes() as u64;
        (xxhash_rust::xxh3::xxh3_64_with_seed(key, u64::from(db.0)) % stripes) as usize
    }

    /// Takes the locks of `keys`, in one order for every caller.
    pub(crate) async fn lock(&self, db: DatabaseId, keys: &[&[u8]]) -> KeyGuard<'_> {
        let mut stripes: Vec<usize> = keys.iter().map(|k| self.stripe(db, k)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        self.locks.lock(&stripes).await
    }

    /// Takes the locks of `keys` for a command on `db` — none inside a
    /// transaction, whose `EXEC` holds every lock its commands need.
    pub(crate) async fn lock_keys<'s>(&'s self, db: &Db, keys: &[&[u8]]) -> KeyGuard<'s> {
        if db.tx.is_some() {
            return self.locks.lock(&[]).await;
        }
        self.lock(db.db.id, keys).await
    }

    /// The version of `key`'s stripe: it moves on whenever a key of the
    /// stripe is written.
    pub(crate) fn version(&self, db: DatabaseId, key: &[u8]) -> u64 {
        self.versions[self.stripe(db, key)].load(Ordering::Acquire)
    }

    /// Moves on the versions of `keys`, just written under their locks.
    fn touched<'k>(&self, db: DatabaseId, keys: impl IntoIterator<Item = &'k [u8]>) {
        for key in keys {
            self.versions[self.stripe(db, key)].fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The database's key tables; created when `create` and missing.
    pub(crate) async fn tables(
        &self,
        db: &mut Db,
        create: bool,
    ) -> Result<Option<Tables>, StoreError> {
        if let Some(t) = &db.tables {
            return Ok(Some(t.clone()));
        }
        let Some(keys) = self.table(db, KEYS_TABLE, &KEYS, create).await? else {
            return Ok(None);
        };
        let chunks = self.table(db, CHUNKS_TABLE, &CHUNKS, create).await?;
        let hashes = self.hash_tables(db, false).await?;
        let tables = Tables {
            keys,
            chunks,
            hashes,
        };
        if tables.chunks.is_some() {
            db.tables = Some(tables.clone());
        }
        Ok(Some(tables))
    }

    /// The key tables with those of hashes kept a row per field, all made
    /// when `create` and missing. A database has the hash tables only once
    /// a hash grew to rows (a table reaches a backup with its first row);
    /// `hashes` is `None` without them.
    pub(crate) async fn tables_with_hashes(
        &self,
        db: &mut Db,
        create: bool,
    ) -> Result<Option<Tables>, StoreError> {
        let Some(mut t) = self.tables(db, create).await? else {
            return Ok(None);
        };
        let whole = |h: &HashTables| h.parts.is_some() && h.trash.is_some();
        if !t.hashes.as_ref().is_some_and(whole) {
            t.hashes = self.hash_tables(db, create).await?;
            if t.chunks.is_some() {
                db.tables = Some(t.clone());
            }
        }
        Ok(Some(t))
    }

    async fn hash_tables(&self, db: &Db, create: bool) -> Result<Option<HashTables>, StoreError> {
        let Some(fields) = self.table(db, FIELDS_TABLE, &FIELDS, create).await? else {
            return Ok(None);
        };
        let parts = (self.table(db, FIELD_PARTS_TABLE, &FIELD_PARTS, create)).await?;
        let trash = self.table(db, TRASH_TABLE, &TRASH, create).await?;
        Ok(Some(HashTables {
            fields,
            parts,
            trash,
        }))
    }

    /// One of the key tables, made when `create` and missing; refused if a
    /// table of that name is not Shoal's.
    async fn table(
        &self,
        db: &Db,
        name: &'static str,
        want: &TableDef,
        create: bool,
    ) -> Result<Option<Arc<Table>>, StoreError> {
        let engine = &self.engine;
        let database = db.db.name.clone();
        let t = match engine.table(database.as_str(), name) {
            Ok(t) => t,
            Err(CatalogError::NoSuchTable { .. }) if create => {
                match engine.create_table(&database, want.clone()).await {
                    Ok(t) => t,
                    // Another connection made it first.
                    Err(CatalogError::TableExists { .. }) => {
                        engine.table(database.as_str(), name)?
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Err(CatalogError::NoSuchTable { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if t.def() != want {
            return Err(StoreError::ForeignTable(name));
        }
        Ok(Some(t))
    }

    async fn run(&self, db: &mut Db, batch: &mut Batch, commit: Commit) -> Result<(), StoreError> {
        let mark = self.run_applied(db, batch, commit).await?;
        self.acknowledgeable(mark).await
    }

    /// Waits until the changes up to `mark` (`run_applied`'s) may be
    /// acknowledged.
    pub(crate) async fn acknowledgeable(&self, mark: Mark) -> Result<(), StoreError> {
        Ok(self.tc().wait_acknowledgeable(mark).await?)
    }

    /// `run`, answered once the changes are applied: where they end in the
    /// log, to wait on (`acknowledgeable`) after letting go of the keys'
    /// locks.
    async fn run_applied(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        commit: Commit,
    ) -> Result<Mark, StoreError> {
        let outcome = self.tc().execute_applied(&db.grant, batch, commit).await;
        let dropped = |e: &OperationError| matches!(e, OperationError::NoSuchTable { .. });
        let gone = match &outcome {
            Err(TcError::Operation { error, .. }) => dropped(error),
            Ok(_) => (0..batch.len()).any(|i| batch.error(i).is_some_and(|e| dropped(&e))),
            Err(_) => false,
        };
        if gone {
            // An operator dropped the tables: they are made anew on the next write.
            db.tables = None;
        }
        outcome.map_err(StoreError::from)
    }

    /// The live entries of `keys`, in one request.
    pub(crate) async fn lookup_many(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Entry>>, StoreError> {
        let now = now_ms();
        // What the transaction wrote is read from it; a key too long to be
        // one is missing, as Redis has it (only a write refuses it); the
        // tables are asked for the rest.
        let asked = |db: &Db, key: &[u8]| {
            key.len() <= MAX_KEY && db.tx.as_ref().is_none_or(|tx| tx.get(key, now).is_none())
        };
        let mut entries: Vec<Option<Entry>> = keys
            .iter()
            .map(|key| {
                let pending = db.tx.as_ref().and_then(|tx| tx.get(key, now)).flatten();
                pending.map(Pending::entry)
            })
            .collect();
        if !keys.iter().any(|key| asked(db, key)) {
            return Ok(entries);
        }
        let Some(t) = self.tables(db, false).await? else {
            return Ok(entries);
        };
        batch.clear();
        for key in keys.iter().filter(|key| asked(db, key)) {
            batch
                .read(&t.keys, &[key_value(key)?])
                .map_err(OperationError::from)?;
        }
        self.run(db, batch, Commit::Each).await?;
        let now = now_ms();
        let mut read = 0;
        for (entry, key) in entries.iter_mut().zip(keys) {
            if asked(db, key) {
                let row = batch.found(read)?;
                *entry = row.map(|r| decode_entry(&r)).filter(|e| e.is_live(now));
                read += 1;
            }
        }
        Ok(entries)
    }

    /// The live entry of `key`.
    pub(crate) async fn lookup(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        key: &[u8],
    ) -> Result<Option<Entry>, StoreError> {
        Ok(self.lookup_many(db, batch, &[key]).await?.pop().flatten())
    }

    /// The live entry of `key` with its whole value. Takes the key's lock
    /// for a value of several parts unless the caller `holds` it.
    pub(crate) async fn read(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        key: &[u8],
        holds: bool,
    ) -> Result<Option<(Entry, Vec<u8>)>, StoreError> {
        if let Some(pending) = db.tx.as_ref().and_then(|tx| tx.get(key, now_ms())) {
            return Ok(pending.map(|p| (p.entry(), p.value.clone())));
        }
        let Some(entry) = self.lookup(db, batch, key).await? else {
            return Ok(None);
        };
        if entry.parts == 0 && entry.fields.is_none() {
            let value = entry.head.clone();
            return Ok(Some((entry, value)));
        }
        // A replica's parts may be mid-way through a write the primary
        // made: only the primary, under the key's lock, reads them whole.
        if !db.db.is_primary_here() {
            db.not_whole_here = true;
            return Err(StoreError::NotWholeHere);
        }
        let _lock = if holds {
            None
        } else {
            Some(self.lock_keys(db, &[key]).await)
        };
        if entry.fields.is_some() {
            // Read again under the lock: the hash may have changed.
            let Some(entry) = self.lookup(db, batch, key).await? else {
                return Ok(None);
            };
            let Some(fields) = entry.fields else {
                return self.read_parts(db, batch, key).await;
            };
            let all = self.all_fields(db, fields).await?;
            return Ok(Some((entry, encode_hash(&all))));
        }
        self.read_parts(db, batch, key).await
    }

    /// Reads a key's row and every part of its value in one request.
    async fn read_parts(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        key: &[u8],
    ) -> Result<Option<(Entry, Vec<u8>)>, StoreError> {
        let Some(t) = self.tables(db, false).await? else {
            return Ok(None);
        };
        // Under the lock, the part count read first cannot change.
        let Some(entry) = self.lookup(db, batch, key).await? else {
            return Ok(None);
        };
        batch.clear();
        for i in 1..=entry.parts {
            batch
                .read(t.chunks()?, &[key_value(key)?, Value::Int(i64::from(i))])
                .map_err(OperationError::from)?;
        }
        self.run(db, batch, Commit::Each).await?;
        let mut value = entry.head.clone();
        for i in 0..entry.parts as usize {
            if let Some(part) = batch.found(i)?.and_then(|row| row.bytes(2)) {
                value.extend_from_slice(part);
            }
        }
        Ok(Some((entry, value)))
    }

    /// Writes each item in one atomic request, replacing what the keys
    /// held. The caller holds the keys' locks.
    pub(crate) async fn write(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        items: &[Item<'_>],
    ) -> Result<(), StoreError> {
        let mark = self.write_applied(db, batch, items).await?;
        self.acknowledgeable(mark).await
    }

    /// `write`, answered once the items are applied: where they end in the
    /// log, to wait on (`acknowledgeable`) after letting go of the keys'
    /// locks, so that the next writers of them share the group commit.
    pub(crate) async fn write_applied(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        items: &[Item<'_>],
    ) -> Result<Mark, StoreError> {
        if let Some(tx) = &mut db.tx {
            self.check_put(&db.db, db.grant, items)?;
            for item in items {
                let pending = Pending {
                    kind: item.kind,
                    value: item.value.to_vec(),
                    expires: item.expires,
                };
                tx.writes.insert(item.key.to_vec(), Some(pending));
            }
            return Ok(Mark::default());
        }
        let (reads, mark) = self.put(db, batch, items, Commit::Atomic).await?;
        let written = vec![true; items.len()];
        self.remove_orphans(db, batch, items, &reads, &written)
            .await?;
        Ok(mark)
    }

    /// Writes each item on its own, in one request: some may fail while the
    /// others succeed. Every value must fit one row (`PART` bytes), so that
    /// none is ever half written. The caller holds the keys' locks, and no
    /// key is given twice. Answers each item's outcome (`Err` when the
    /// request as a whole was refused) once they are applied, and where
    /// they end in the log, to wait on (`acknowledgeable`) after letting go
    /// of the locks.
    pub(crate) async fn write_each_applied(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        items: &[Item<'_>],
    ) -> Result<(Vec<Result<(), StoreError>>, Mark), StoreError> {
        debug_assert!(items.iter().all(|i| i.value.len() <= PART));
        let (reads, mark) = self.put(db, batch, items, Commit::Each).await?;
        let outcomes: Vec<Result<(), StoreError>> = reads
            .iter()
            .map(|&r| batch.result(r).map(drop).map_err(StoreError::from))
            .collect();
        let written: Vec<bool> = outcomes.iter().map(Result::is_ok).collect();
        self.remove_orphans(db, batch, items, &reads, &written)
            .await?;
        Ok((outcomes, mark))
    }

    /// Runs, for each item, a read of its key's row (to learn how many parts
    /// the old value had) and the writes of its rows; answers where each
    /// item's read is in the batch.
    async fn put(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        items: &[Item<'_>],
        commit: Commit,
    ) -> Result<(Vec<usize>, Mark), StoreError> {
        self.check_put(&db.db, db.grant, items)?;
        let t = self.tables(db, true).await?.expect("created");
        batch.clear();
        let mut reads = Vec::with_capacity(items.len());
        for item in items {
            reads.push(batch.len());
            add_rows(batch, &t, item, true)?;
        }
        let mark = self.run_applied(db, batch, commit).await?;
        self.touched(db.db.id, items.iter().map(|i| i.key));
        for item in items {
            if let Some(at) = item.expires {
                self.note_expiry(&t, item.key, at);
            }
        }
        Ok((reads, mark))
    }

    /// What every write is checked for before it is made: values within
    /// the limit, keys within theirs, and a key that may write. A key that
    /// may not write does not get to create the tables either.
    fn check_put(&self, db: &Database, grant: Grant, items: &[Item<'_>]) -> Result<(), StoreError> {
        for item in items {
            if item.value.len() > self.max_value {
                return Err(StoreError::TooLarge(self.max_value));
            }
            if item.key.len() > MAX_KEY {
                return Err(StoreError::KeyTooLong);
            }
        }
        if grant.role != Role::ReadWrite {
            return Err(StoreError::Tc(TcError::Forbidden {
                database: db.name.to_string(),
                reason: "the key may only read".into(),
            }));
        }
        Ok(())
    }

    /// Deletes the parts of the old values (read at `reads`) past the ends
    /// of the new ones, for the items `written`.
    async fn remove_orphans(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        items: &[Item<'_>],
        reads: &[usize],
        written: &[bool],
    ) -> Result<(), StoreError> {
        let mut orphans = Vec::new();
        let mut trashed = Vec::new();
        for ((item, &read), _) in items.iter().zip(reads).zip(written).filter(|(_, w)| **w) {
            if let Ok(Some(row)) = batch.found(read) {
                let old = parts_of(&row);
                let new = parts_after_head(item.value.len());
                orphans.extend((new + 1..=old).map(|i| (item.key, i)));
                // The hash of rows the key held, unless it moved here.
                if let Some(id) = fields_id_of(&row)
                    && item.fields.is_none_or(|f| f.id != id)
                {
                    trashed.push(id);
                }
            }
        }
        if orphans.is_empty() && trashed.is_empty() {
            return Ok(());
        }
        let t = (self.tables_with_hashes(db, !trashed.is_empty()).await?).expect("written to");
        batch.clear();
        for (key, i) in orphans {
            batch
                .delete(t.chunks()?, &[key_value(key)?, Value::Int(i64::from(i))])
                .map_err(OperationError::from)?;
        }
        for &id in &trashed {
            fields::trash(batch, &t, id)?;
        }
        self.run(db, batch, Commit::Atomic).await?;
        self.drain(&t, &trashed).await;
        Ok(())
    }

    /// Deletes a key and its parts, atomically. The caller holds its lock.
    pub(crate) async fn delete(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        key: &[u8],
        entry: &Entry,
    ) -> Result<(), StoreError> {
        if let Some(tx) = &mut db.tx {
            self.check_put(&db.db, db.grant, &[])?;
            tx.writes.insert(key.to_vec(), None);
            return Ok(());
        }
        let t = (self.tables_with_hashes(db, entry.fields.is_some()).await?).expect("a key exists");
        batch.clear();
        delete_key(batch, &t, key_value(key)?, entry)?;
        self.run(db, batch, Commit::Atomic).await?;
        self.touched(db.db.id, [key]);
        self.drain(&t, entry.fields.map(|f| f.id).as_slice()).await;
        Ok(())
    }

    /// Sets or clears a key's expiry. The caller holds its lock.
    pub(crate) async fn set_expiry(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        key: &[u8],
        expires: Option<i64>,
    ) -> Result<(), StoreError> {
        if db.tx.is_some() {
            let Some((entry, value)) = self.read(db, batch, key, true).await? else {
                return Ok(());
            };
            let item = Item {
                key,
                kind: entry.kind,
                value: &value,
                expires,
                fields: None,
            };
            return self.write(db, batch, &[item]).await;
        }
        let t = self.tables(db, false).await?.expect("a key exists");
        batch.clear();
        let row = [
            ("k", key_value(key)?),
            ("exp", expires.map_or(Value::Null, Value::Int)),
        ];
        batch.update(&t.keys, &row).map_err(OperationError::from)?;
        self.run(db, batch, Commit::Atomic).await?;
        self.touched(db.db.id, [key]);
        if let Some(at) = expires {
            self.note_expiry(&t, key, at);
        }
        Ok(())
    }

    /// Ends the transaction `db` is running: writes what its commands
    /// wrote in one atomic request, or nothing. The caller holds the locks
    /// of every key the transaction named.
    pub(crate) async fn commit(&self, db: &mut Db, batch: &mut Batch) -> Result<(), StoreError> {
        let Some(tx) = db.tx.take() else {
            return Ok(());
        };
        if tx.writes.is_empty() {
            return Ok(());
        }
        let keys: Vec<&[u8]> = tx.writes.keys().map(Vec::as_slice).collect();
        let puts = tx.writes.values().any(Option::is_some);
        if self.tables(db, puts).await?.is_none() {
            return Ok(()); // deletes of keys in tables that are not there
        }
        let t = (self.tables_with_hashes(db, false).await?).expect("made above");
        // How many parts each key's old value has, to delete those the
        // new value does not overwrite.
        batch.clear();
        for key in &keys {
            batch
                .read(&t.keys, &[key_value(key)?])
                .map_err(OperationError::from)?;
        }
        self.run(db, batch, Commit::Each).await?;
        let old: Vec<Option<u32>> = (0..keys.len())
            .map(|i| Ok(batch.found(i)?.map(|row| parts_of(&row))))
            .collect::<Result<_, StoreError>>()?;
        // Hashes of rows the transaction replaces or deletes.
        let trashed: Vec<u64> = (0..keys.len())
            .map(|i| Ok(batch.found(i)?.and_then(|row| fields_id_of(&row))))
            .collect::<Result<Vec<_>, StoreError>>()?
            .into_iter()
            .flatten()
            .collect();
        let t = if trashed.is_empty() {
            t
        } else {
            (self.tables_with_hashes(db, true).await?).expect("made above")
        };
        batch.clear();
        for &id in &trashed {
            fields::trash(batch, &t, id)?;
        }
        for (key, old) in keys.iter().zip(&old) {
            let k = key_value(key)?;
            let kept = match &tx.writes[*key] {
                Some(p) => {
                    let item = Item {
                        key,
                        kind: p.kind,
                        value: &p.value,
                        expires: p.expires,
                        fields: None,
                    };
                    add_rows(batch, &t, &item, false)?;
                    parts_after_head(p.value.len())
                }
                None if old.is_some() => {
                    batch
                        .delete(&t.keys, std::slice::from_ref(&k))
                        .map_err(OperationError::from)?;
                    0
                }
                None => continue,
            };
            for i in kept + 1..=old.unwrap_or(0) {
                batch
                    .delete(t.chunks()?, &[k.clone(), Value::Int(i64::from(i))])
                    .map_err(OperationError::from)?;
            }
        }
        if batch.is_empty() {
            return Ok(());
        }
        self.run(db, batch, Commit::Atomic).await?;
        self.touched(db.db.id, keys.iter().copied());
        for (key, pending) in &tx.writes {
            if let Some(at) = pending.as_ref().and_then(|p| p.expires) {
                self.note_expiry(&t, key, at);
            }
        }
        self.drain(&t, &trashed).await;
        Ok(())
    }

    /// Keys in the database. Keys whose expiry the node knows of are purged
    /// first once due, so that none is counted after it expired (inside a
    /// transaction, whose `EXEC` holds key locks the purge would wait for,
    /// they are not).
    pub(crate) async fn count(&self, db: &Db) -> Result<u64, StoreError> {
        if db.tx.is_none() {
            for _ in 0..COUNT_PURGE_ROUNDS {
                if self.purge_expired(COUNT_PURGE_BATCH).await < COUNT_PURGE_BATCH {
                    break;
                }
            }
        }
        let usage = (self.engine.memory_usage().await).map_err(TcError::NodeFailed)?;
        Ok(usage
            .iter()
            .filter(|f| f.database == db.db.name.as_str() && f.table == KEYS_TABLE)
            .map(|f| f.rows)
            .sum())
    }

    /// Remembers that `key` of the database whose key tables are `tables`
    /// expires at `at`, so that the purge finds it without a scan.
    fn note_expiry(&self, tables: &Tables, key: &[u8], at: i64) {
        let mut expiring = self.expiring.lock().unwrap_or_else(|e| e.into_inner());
        expiring.next += 1;
        let seq = expiring.next;
        expiring
            .due
            .insert((at, seq), (tables.clone(), key.to_vec()));
    }

    /// Removes up to `limit` keys that have expired by now, as the expiry
    /// index has them; how many it looked at. Purging is the node's work:
    /// it is not charged to the database.
    pub(crate) async fn purge_expired(&self, limit: usize) -> usize {
        // One purge at a time, so that `count`'s purge waits for one under
        // way: the keys it took from the index are gone when it returns.
        let _purging = self.purging.lock().await;
        let now = now_ms();
        let due: Vec<(Tables, Vec<u8>)> = {
            let mut expiring = self.expiring.lock().unwrap_or_else(|e| e.into_inner());
            let mut due = Vec::new();
            while due.len() < limit {
                match expiring.due.first_entry() {
                    Some(entry) if entry.key().0 <= now => due.push(entry.remove()),
                    _ => break,
                }
            }
            due
        };
        let looked = due.len();
        for (tables, key) in due {
            self.purge_key(&tables, key).await;
        }
        looked
    }

    /// Finds expired keys by scanning every key table — for keys whose
    /// expiry the index lost in a restart; up to `limit` of them. Slow on
    /// large tables: run seldom.
    pub(crate) async fn sweep_expired(&self, limit: usize) -> usize {
        let engine = &self.engine;
        let keys_table = TableName::parse(KEYS_TABLE).expect("a valid name");
        let mut swept = 0;
        for table in engine.tables() {
            if table.name() != &keys_table || swept >= limit {
                continue;
            }
            let filter = [("exp", CmpOp::Le, Value::Int(now_ms()))];
            let Ok(rows) = engine.tc().scan(&table, &filter, limit - swept).await else {
                continue;
            };
            let Some(tables) = self.tables_of(&table) else {
                continue;
            };
            for row in rows {
                if let Value::Bytes(key) = row.values()[0].clone() {
                    self.purge_key(&tables, key).await;
                    swept += 1;
                }
            }
        }
        swept
    }

    /// Deletes `key` and its parts if it has expired: read again under its
    /// lock, as it may have been set anew since it was found.
    async fn purge_key(&self, t: &Tables, key: Vec<u8>) {
        let tc = self.engine.tc();
        let keys = &t.keys;
        let _lock = self.lock(keys.database.id, &[&key]).await;
        let k = Value::Bytes(key.clone());
        let mut batch = tc.batch();
        if batch.read(keys, std::slice::from_ref(&k)).is_err()
            || tc.purge(&mut batch).await.is_err()
        {
            return;
        }
        let Ok(Some(row)) = batch.found(0) else {
            return;
        };
        let entry = decode_entry(&row);
        if entry.is_live(now_ms()) {
            return;
        }
        // A hash of rows loses its rows first, under the key's lock: the
        // purge only deletes, so its id cannot go to the trash, and the key
        // stays (expired, so found by no one) until they are gone.
        if let Some(f) = entry.fields {
            self.drain(t, &[f.id]).await;
        }
        batch.clear();
        // A key's rows are always valid to delete: only the purge can fail.
        if delete_rows(&mut batch, t, k, entry.parts).is_err() {
            return;
        }
        if tc.purge(&mut batch).await.is_ok() {
            self.touched(keys.database.id, [key.as_slice()]);
        }
    }
}

/// A key a scan found.
#[derive(Debug, Clone)]
pub(crate) struct Scanned {
    pub key: Vec<u8>,
    pub kind: Kind,
    /// Parts of its value after the first.
    pub parts: u32,
    /// The id of a hash kept a row per field.
    pub fields: Option<u64>,
    /// Whether it had not expired when it was read.
    pub live: bool,
}

/// Where a scan of a database's keys goes on: a fragment of its key table
/// and a row position there, on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ScanAt {
    fragment: usize,
    from: RowRef,
}

/// Bits of a `SCAN` cursor: it stays below 2^53, so that clients that
/// read it as a JavaScript number read it exactly.
const CURSOR_BITS: u32 = 53;

impl ScanAt {
    /// The cursor a client is given for this place in `table`, on this
    /// node: the row position in the low 32 bits, the fragment above it,
    /// and in the rest a tag of this node's run and table (never 0, so
    /// that no place is cursor 0, which starts and ends a scan).
    fn cursor(self, table: &Table, seed: u64) -> u64 {
        let (fragment_bits, tag) = Self::tag(table, seed);
        (tag << (32 + fragment_bits)) | ((self.fragment as u64) << 32) | u64::from(self.from)
    }

    /// The place a cursor names; the start for one another node or an
    /// earlier run made (rows have other positions there: starting again
    /// returns some keys twice, as Redis may, and misses none).
    fn from_cursor(cursor: u64, table: &Table, seed: u64) -> ScanAt {
        let (fragment_bits, tag) = Self::tag(table, seed);
        let fragment = ((cursor >> 32) & ((1 << fragment_bits) - 1)) as usize;
        if cursor >> (32 + fragment_bits) != tag || fragment >= table.fragments.len() {
            return ScanAt::default();
        }
        ScanAt {
            fragment,
            from: cursor as u32,
        }
    }

    /// Bits for the fragment number, and the tag.
    fn tag(table: &Table, seed: u64) -> (u32, u64) {
        let fragments = table.fragments.len().max(1) as u64;
        let fragment_bits = 64 - (fragments - 1).leading_zeros();
        let tag_bits = CURSOR_BITS - 32 - fragment_bits;
        let hash = xxhash_rust::xxh3::xxh3_64_with_seed(&table.id.0.to_le_bytes(), seed);
        (fragment_bits, 1 + hash % ((1 << tag_bits) - 1))
    }
}

/// The key a scan's row holds.
fn scanned(row: &crate::tc::batch::Row, now: i64) -> Option<Scanned> {
    let v = row.values();
    let Value::Bytes(key) = &v[0] else {
        return None;
    };
    Some(Scanned {
        key: key.clone(),
        kind: if matches!(int_value(&v[1]), Some(1 | FIELDS_FORM)) {
            Kind::Hash
        } else {
            Kind::String
        },
        parts: if int_value(&v[1]) == Some(FIELDS_FORM) {
            0
        } else {
            int_value(&v[3]).unwrap_or(0) as u32
        },
        fields: match (&v[1], &v[4]) {
            (t, Value::Bytes(head)) if int_value(t) == Some(FIELDS_FORM) => {
                Some(fields::id_of(head))
            }
            _ => None,
        },
        live: int_value(&v[2]).is_none_or(|at| at > now),
    })
}

/// A number below `n` (> 0), at random: splitmix64 on a seed drawn once
/// per thread (for `RANDOMKEY` and `HRANDFIELD`, not for secrets).
pub(crate) fn random_below(n: u64) -> u64 {
    thread_local! {
        static STATE: std::cell::Cell<u64> =
            std::cell::Cell::new(crate::node::random_seed().unwrap_or_else(|_| now_ms() as u64));
    }
    let z = STATE.with(|state| {
        let next = state.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        state.set(next);
        next
    });
    let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % n.max(1)
}

/// Rows one scan step reads: each comes whole, its value with it (up to
/// `PART` bytes), so a step holds at most ~6.5 MB.
const SCAN_STEP_ROWS: usize = 256;
/// A scan stops once the keys it found hold this many bytes, whatever its
/// count: a `SCAN` reply stays bounded (its `COUNT` is a hint, as in Redis).
const SCAN_BYTES: usize = 8 << 20;

/// Keys among which `RANDOMKEY` picks.
const RANDOM_AMONG: usize = 1024;

/// Keys `FLUSHDB` deletes in one request.
const FLUSH_BATCH: usize = 1000;

impl Store {
    /// About `count` keys of the database from `cursor` on (0: from the
    /// start; expired keys are counted, and found not `live`), and the
    /// cursor to go on with (0: done). Every key there for the whole scan
    /// is found once at least, whatever is written meanwhile.
    pub(crate) async fn scan(
        &self,
        db: &mut Db,
        cursor: u64,
        count: usize,
    ) -> Result<(Vec<Scanned>, u64), StoreError> {
        let Some(t) = self.tables(db, false).await? else {
            return Ok((Vec::new(), 0));
        };
        let at = ScanAt::from_cursor(cursor, &t.keys, self.scan_seed);
        let (found, next) = self.scan_from(db, &t, at, count, false).await?;
        let next = next.map_or(0, |at| at.cursor(&t.keys, self.scan_seed));
        Ok((found, next))
    }

    /// About `count` keys from `at` on, and where to go on (`None`: the
    /// table's end, or the fragment's when `one_fragment`).
    async fn scan_from(
        &self,
        db: &mut Db,
        t: &Tables,
        mut at: ScanAt,
        count: usize,
        one_fragment: bool,
    ) -> Result<(Vec<Scanned>, Option<ScanAt>), StoreError> {
        let (mut found, mut bytes) = (Vec::new(), 0);
        while found.len() < count && bytes < SCAN_BYTES {
            let rows = (count - found.len()).min(SCAN_STEP_ROWS);
            let step = (self.tc())
                .scan_step(&db.grant, None, &t.keys, at.fragment, at.from, rows)
                .await;
            let step = match step {
                Ok(step) => step,
                Err(e) => {
                    self.forget_if_dropped(db, &e);
                    return Err(e.into());
                }
            };
            let now = now_ms();
            let before = found.len();
            found.extend(step.rows.iter().filter_map(|row| scanned(row, now)));
            bytes += found[before..].iter().map(|k| k.key.len()).sum::<usize>();
            at = match step.next {
                Some(from) => ScanAt { from, ..at },
                None if !one_fragment && at.fragment + 1 < t.keys.fragments.len() => ScanAt {
                    fragment: at.fragment + 1,
                    from: 0,
                },
                None => return Ok((found, None)),
            };
        }
        Ok((found, Some(at)))
    }

    /// Deletes every key of the database, `FLUSH_BATCH` at a time, each
    /// under its lock; how many were live. (Keys written while it runs may
    /// stay.)
    pub(crate) async fn flush(&self, db: &mut Db, batch: &mut Batch) -> Result<u64, StoreError> {
        let (mut deleted, mut cursor) = (0, 0);
        loop {
            let (found, next) = self.scan(db, cursor, FLUSH_BATCH).await?;
            let keys: Vec<&[u8]> = found.iter().map(|s| s.key.as_slice()).collect();
            if !keys.is_empty() {
                let _locks = self.lock(db.db.id, &keys).await;
                // Parts as they are now: the value may have been set anew.
                let entries = self.lookup_many(db, batch, &keys).await?;
                let rows = found.iter().any(|k| k.fields.is_some());
                let t = (self.tables_with_hashes(db, rows).await?).expect("keys were found");
                batch.clear();
                let mut trashed = Vec::new();
                for (scanned, entry) in found.iter().zip(&entries) {
                    let k = key_value(&scanned.key)?;
                    match entry {
                        Some(e) => {
                            delete_key(batch, &t, k, e)?;
                            trashed.extend(e.fields.map(|f| f.id));
                        }
                        None => {
                            delete_rows(batch, &t, k, scanned.parts)?;
                            if let Some(id) = scanned.fields {
                                fields::trash(batch, &t, id)?;
                                trashed.push(id);
                            }
                        }
                    }
                }
                self.run(db, batch, Commit::Each).await?;
                self.touched(db.db.id, keys.iter().copied());
                self.drain(&t, &trashed).await;
                deleted += entries.iter().flatten().count() as u64;
            }
            if next == 0 {
                return Ok(deleted);
            }
            cursor = next;
        }
    }

    /// A key of the database chosen at random: among the first
    /// `RANDOM_AMONG` keys of a fragment chosen at random (the next one
    /// with live keys, if it has none). `None` when there are no keys.
    pub(crate) async fn random_key(&self, db: &mut Db) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(t) = self.tables(db, false).await? else {
            return Ok(None);
        };
        let fragments = t.keys.fragments.len();
        let first = random_below(fragments as u64) as usize;
        for fragment in (0..fragments).map(|i| (first + i) % fragments) {
            let start = ScanAt { fragment, from: 0 };
            let (found, _) = self.scan_from(db, &t, start, RANDOM_AMONG, true).await?;
            let mut live: Vec<Scanned> = found.into_iter().filter(|k| k.live).collect();
            if !live.is_empty() {
                let pick = random_below(live.len() as u64) as usize;
                return Ok(Some(live.swap_remove(pick).key));
            }
        }
        Ok(None)
    }

    /// Moves `item`'s value from key `from` (whose entry is `entry`) to
    /// `item.key`, replacing what that key held, in one atomic request
    /// (`RENAME`). The caller holds both keys' locks.
    pub(crate) async fn rename(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        from: &[u8],
        entry: &Entry,
        item: Item<'_>,
    ) -> Result<(), StoreError> {
        // In a transaction both go to its overlay, committed together.
        if db.tx.is_some() {
            self.write(db, batch, &[item]).await?;
            return self.delete(db, batch, from, entry).await;
        }
        self.check_put(&db.db, db.grant, &[item])?;
        let t = self.tables(db, true).await?.expect("created");
        batch.clear();
        add_rows(batch, &t, &item, true)?;
        delete_rows(batch, &t, key_value(from)?, entry.parts)?;
        self.run(db, batch, Commit::Atomic).await?;
        self.touched(db.db.id, [from, item.key]);
        if let Some(at) = item.expires {
            self.note_expiry(&t, item.key, at);
        }
        self.remove_orphans(db, batch, &[item], &[0], &[true]).await
    }

    /// Forgets the key tables when a scan found them dropped.
    fn forget_if_dropped(&self, db: &mut Db, e: &TcError) {
        if let TcError::Operation {
            error: OperationError::NoSuchTable { .. },
            ..
        } = e
        {
            db.tables = None;
        }
    }
}

/// Adds to `batch` the writes of `item`'s rows: its key's row (a
/// `replace`, which answers the old row, or a plain write) and the parts
/// of its value past the first.
fn add_rows(
    batch: &mut Batch,
    t: &Tables,
    item: &Item<'_>,
    replace: bool,
) -> Result<(), StoreError> {
    if let Some(f) = item.fields {
        let row = fields::key_row(key_value(item.key)?, item.expires, f);
        return if replace {
            batch.replace(&t.keys, &row)
        } else {
            batch.write(&t.keys, &row)
        }
        .map(drop)
        .map_err(|e| OperationError::from(e).into());
    }
    let mut parts = item.value.chunks(PART);
    let head = parts.next().unwrap_or_default();
    // In `KEYS_DEF`'s order: k, t, exp, n, v.
    let (k, t_, exp, n, v) = (
        key_value(item.key)?,
        Value::Int(item.kind as i64),
        item.expires.map_or(Value::Null, Value::Int),
        Value::Int(i64::from(parts_after_head(item.value.len()))),
        Value::Bytes(head.to_vec()),
    );
    let row = [Some(&k), Some(&t_), Some(&exp), Some(&n), Some(&v)];
    (batch.put_values(&t.keys, &row, replace)).map_err(OperationError::from)?;
    for (i, part) in parts.enumerate() {
        // In `CHUNKS_DEF`'s order: k, i, v.
        let (i, v) = (Value::Int(i as i64 + 1), Value::Bytes(part.to_vec()));
        let row = [Some(&k), Some(&i), Some(&v)];
        (batch.put_values(t.chunks()?, &row, false)).map_err(OperationError::from)?;
    }
    Ok(())
}

/// Adds to `batch` the deletes of key `k`'s row and of the `parts` of its
/// value past the first.
fn delete_rows(batch: &mut Batch, t: &Tables, k: Value, parts: u32) -> Result<(), StoreError> {
    (batch.delete(&t.keys, std::slice::from_ref(&k))).map_err(OperationError::from)?;
    for i in 1..=parts {
        (batch.delete(t.chunks()?, &[k.clone(), Value::Int(i64::from(i))]))
            .map_err(OperationError::from)?;
    }
    Ok(())
}

/// Adds to `batch` the deletes of a key's rows, and for a hash of rows,
/// its id to the trash (its rows are deleted after).
fn delete_key(batch: &mut Batch, t: &Tables, k: Value, entry: &Entry) -> Result<(), StoreError> {
    delete_rows(batch, t, k, entry.parts)?;
    if let Some(f) = entry.fields {
        fields::trash(batch, t, f.id)?;
    }
    Ok(())
}

/// Rows a value of `len` bytes takes after its key's row.
fn parts_after_head(len: usize) -> u32 {
    len.saturating_sub(PART).div_ceil(PART) as u32
}

/// A hash's fields and values, in the order they were first set.
pub(crate) fn decode_hash(value: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut fields = Vec::new();
    let mut at = 0;
    let take = |at: &mut usize| -> Option<Vec<u8>> {
        let len = u32::from_le_bytes(value.get(*at..*at + 4)?.try_into().ok()?) as usize;
        let bytes = value.get(*at + 4..*at + 4 + len)?.to_vec();
        *at += 4 + len;
        Some(bytes)
    };
    while at < value.len() {
        let (Some(f), Some(v)) = (take(&mut at), take(&mut at)) else {
            break;
        };
        fields.push((f, v));
    }
    fields
}

pub(crate) fn encode_hash(fields: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields.iter().map(|(f, v)| 8 + f.len() + v.len()).sum());
    for (f, v) in fields {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}
