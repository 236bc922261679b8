//! A batch of primary-key operations: encoded at the edge, split by LDM
//! worker, executed, then read back result by result.
//!
//! Every value is checked against the table's schema as it is added, so a bad
//! one is refused before anything is sent; the operations that are sent each
//! succeed or fail on their own.

use std::sync::Arc;

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use shoal_quota::QuotaError;
use shoal_quota::units::{read_units, write_units};

use super::schema::{Database, Table};
use crate::ldm::{NodeFailed, Op, OpBatch, OpKind, OpResult, RowProgram, Span};
use crate::log::changes::Change;
use crate::storage::OpError;
use crate::storage::codec::{self, ValueError};
use crate::types::value::{self, Value};

/// Why an operation failed; nothing of it was applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OperationError {
    #[error(transparent)]
    Value(#[from] ValueError),
    /// `entry`: the key, as MySQL's error 1062 writes it (`duplicate_entry`).
    #[error("a row with primary key '{entry}' already exists in table '{table}'")]
    DuplicateKey { table: String, entry: String },
    /// `entry`: the index's values, as MySQL's error 1062 writes them.
    #[error("a row of table '{table}' already has the values '{entry}' of unique index '{index}'")]
    DuplicateUnique {
        table: String,
        index: String,
        entry: String,
    },
    #[error("no row with this primary key in table '{table}'")]
    NotFound { table: String },
    #[error(
        "column '{column}' of table '{table}' needs a value: the row does not exist and the column is NOT NULL"
    )]
    MissingColumn { table: String, column: String },
    #[error("out of DataMemory: this data node has no free page for table '{table}'")]
    OutOfDataMemory { table: String },
    #[error("a fragment of table '{table}' is full; the table needs more fragments")]
    FragmentFull { table: String },
    #[error("table '{table}' was dropped")]
    NoSuchTable { table: String },
    #[error("table '{table}' has no index '{index}'{}", if index == shoal_wire::schema::PRIMARY_INDEX { ": its primary key is hashed only (primary_key_index \"hash\"), so it has no order; name an index" } else { "" })]
    NoSuchIndex { table: String, index: String },
    #[error(
        "another transaction held a row of table '{table}' for longer than the lock-wait timeout; retry"
    )]
    LockWaitTimeout { table: String },
    #[error(transparent)]
    Quota(QuotaError),
    #[error(
        "the change could not be made durable: the data node's redo log failed, and the node must restart"
    )]
    DurabilityFailed,
    /// An LDM worker panicked: the node serves nothing until it restarts.
    #[error(transparent)]
    NodeFailed(#[from] NodeFailed),
}

impl OperationError {
    /// The error's name, as clients see it.
    pub fn code(&self) -> &'static str {
        match self {
            OperationError::Value(_) => "INVALID_VALUE",
            OperationError::DuplicateKey { .. } | OperationError::DuplicateUnique { .. } => {
                "DUPLICATE_KEY"
            }
            OperationError::NotFound { .. } => "NOT_FOUND",
            OperationError::MissingColumn { .. } => "MISSING_COLUMN",
            OperationError::OutOfDataMemory { .. } => "OUT_OF_DATA_MEMORY",
            OperationError::FragmentFull { .. } => "FRAGMENT_FULL",
            OperationError::NoSuchTable { .. } => "NO_SUCH_TABLE",
            OperationError::NoSuchIndex { .. } => "NO_SUCH_INDEX",
            OperationError::LockWaitTimeout { .. } => "LOCK_WAIT_TIMEOUT",
            OperationError::Quota(e) => e.code(),
            OperationError::DurabilityFailed => "DURABILITY_FAILED",
            OperationError::NodeFailed(_) => "NODE_FAILED",
        }
    }

    /// RonDB's number for the error, where RonDB has one.
    pub fn number(&self) -> Option<u32> {
        match self {
            OperationError::Value(_) => None,
            OperationError::DuplicateKey { .. } => Some(630),
            OperationError::DuplicateUnique { .. } => Some(893),
            OperationError::NotFound { .. } => Some(626),
            OperationError::MissingColumn { .. } => Some(839),
            OperationError::OutOfDataMemory { .. } => Some(827),
            OperationError::FragmentFull { .. } => Some(633),
            OperationError::NoSuchTable { .. } => Some(723),
            OperationError::NoSuchIndex { .. } => Some(4243),
            OperationError::LockWaitTimeout { .. } => Some(266),
            OperationError::Quota(e) => e.number(),
            OperationError::DurabilityFailed | OperationError::NodeFailed(_) => None,
        }
    }

    /// Whether the same operation can succeed if it is simply tried again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, OperationError::LockWaitTimeout { .. })
    }

    /// The HTTP status that answers the error.
    pub fn http_status(&self) -> u16 {
        match self {
            OperationError::Value(_) | OperationError::MissingColumn { .. } => 400,
            OperationError::NotFound { .. }
            | OperationError::NoSuchTable { .. }
            | OperationError::NoSuchIndex { .. } => 404,
            OperationError::DuplicateKey { .. }
            | OperationError::DuplicateUnique { .. }
            | OperationError::LockWaitTimeout { .. } => 409,
            OperationError::OutOfDataMemory { .. } | OperationError::FragmentFull { .. } => 507,
            OperationError::Quota(e) => e.http_status(),
            OperationError::DurabilityFailed | OperationError::NodeFailed(_) => 503,
        }
    }
}

/// What an operation did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A read found its row.
    Found(Row),
    /// A read found no row with its key.
    Absent,
    Inserted,
    Updated,
    Deleted,
}

/// A row read back, its values in the table's column order.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    table: Arc<Table>,
    values: Vec<Value>,
}

impl Row {
    /// The row of a whole stored image (fixed part, then var part).
    pub(crate) fn decode(table: &Arc<Table>, image: &[u8]) -> Row {
        let layout = &table.layout;
        let (fixed, var) = image.split_at(layout.slot_size);
        let values = (0..layout.columns.len() as u16)
            .map(|c| codec::decode(layout, fixed, var, c))
            .collect();
        Row::new(table, values)
    }

    /// A row of `table` with these values, one per column.
    pub(crate) fn new(table: &Arc<Table>, values: Vec<Value>) -> Row {
        Row {
            table: Arc::clone(table),
            values,
        }
    }

    pub fn values(&self) -> &[Value] {
        &self.values
    }

    pub fn into_values(self) -> Vec<Value> {
        self.values
    }

    /// The value of the column with this name.
    pub fn get(&self, column: &str) -> Option<&Value> {
        self.table
            .layout
            .column_index(column)
            .map(|c| &self.values[c as usize])
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }
}

/// A row read back, looked at in place: its columns decoded one at a time
/// as asked for, without copying the row.
#[derive(Debug, Clone, Copy)]
pub struct RowView<'a> {
    table: &'a Table,
    fixed: &'a [u8],
    var: &'a [u8],
}

impl<'a> RowView<'a> {
    /// The value of column `c` (by position in the table).
    pub fn value(&self, c: u16) -> Value {
        codec::decode(&self.table.layout, self.fixed, self.var, c)
    }

    /// The stored bytes of binary or text column `c`; `None` when NULL.
    pub fn bytes(&self, c: u16) -> Option<&'a [u8]> {
        let layout = &self.table.layout;
        if layout.is_null(self.fixed, c) {
            return None;
        }
        Some(layout.column_bytes(self.fixed, self.var, c))
    }
}

/// The fragment a key belongs to: a stable hash of the encoded key, so the
/// same key lands in the same fragment on every node and every restart.
pub(crate) fn fragment_of(key: &[u8], fragments: u16) -> u16 {
    (((xxh3_64(key) >> 32) * u64::from(fragments)) >> 32) as u16
}

/// A key's tag in its fragment's hash index: the upper half of its hash
/// under the engine's secret seed, so that keys cannot be chosen to collide.
pub(crate) fn index_tag(key: &[u8], seed: u64) -> u32 {
    (xxh3_64_with_seed(key, seed) >> 32) as u32
}

struct Slot {
    ldm: u16,
    index: u32,
    table: Arc<Table>,
    /// The write units the operation costs (its table is charged them).
    write_units: u64,
}

/// What a batch asks of its database's limits, counted as operations are added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cost {
    /// Read operations: one read unit each before the rows are seen.
    pub(crate) reads: u64,
    pub(crate) write_units: u64,
    /// Operations that can take more memory: inserts, updates, writes.
    pub(crate) grows: bool,
    /// Locking reads: they hold rows as writes do.
    pub(crate) locks: bool,
}

/// Operations to run together. Reusable: `clear` keeps the buffers.
pub struct Batch {
    pub(crate) ldms: Vec<OpBatch>,
    seed: u64,
    slots: Vec<Slot>,
    scratch: Vec<u8>,
    cost: Cost,
    /// The one database of every operation, or `None` when they span more.
    database: Option<Arc<Database>>,
    mixed: bool,
    /// Writes to tables with unique indexes: what the coordinator checks
    /// before the batch runs (`tc::unique`).
    pub(crate) uniques: Vec<UniqueWrite>,
    /// Primary keys (encoded) the batch deletes from such tables.
    pub(crate) unique_deletes: Vec<(Arc<Table>, Vec<u8>)>,
    /// The writes refused on their own for a unique index's values another
    /// row holds (`Unique::fail`), and those values as their error names
    /// them.
    pub(crate) duplicates: Vec<(usize, String)>,
    /// The time of its writes, in microseconds since 1970-01-01 UTC, for
    /// columns that take it (`DEFAULT CURRENT_TIMESTAMP`): read from the
    /// clock when first asked for, so that every row of the batch gets the
    /// same.
    now: Option<i64>,
}

/// A value an operation gives a column of a unique index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Given {
    /// Not given: an update keeps the row's.
    Missing,
    Null,
    /// As the column stores it.
    Bytes(Vec<u8>),
}

/// A write to a table with a unique index: the operation, its row's
/// primary key (encoded), and the values it gives the index's columns.
#[derive(Debug, Clone)]
pub(crate) struct UniqueWrite {
    pub(crate) op: usize,
    pub(crate) kind: OpKind,
    pub(crate) table: Arc<Table>,
    /// The index's position among the table's ordered indexes.
    pub(crate) index: usize,
    pub(crate) key: Vec<u8>,
    pub(crate) values: Vec<Given>,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("ops", &self.slots.len())
            .finish()
    }
}

impl Batch {
    /// Empties the batch for another request of the same node, its
    /// buffers kept: a connection that reuses one allocates nothing to
    /// send its next reads. A batch that grew past `keep` bytes of
    /// buffers is not kept (`None`), so that one large request does not
    /// hold its memory for the connection's life.
    pub(crate) fn recycle(mut self, keep: usize) -> Option<Batch> {
        let held = self.scratch.capacity()
            + self.slots.capacity() * std::mem::size_of::<Slot>()
            + (self.ldms.iter())
                .map(OpBatch::capacity_bytes)
                .sum::<usize>();
        if held > keep {
            return None;
        }
        let Batch {
            ldms,
            seed: _,
            slots,
            scratch,
            cost,
            database,
            mixed,
            uniques,
            unique_deletes,
            duplicates,
            now,
        } = &mut self;
        ldms.iter_mut().for_each(OpBatch::clear);
        slots.clear();
        scratch.clear();
        *cost = Cost::default();
        *database = None;
        *mixed = false;
        uniques.clear();
        unique_deletes.clear();
        duplicates.clear();
        *now = None;
        Some(self)
    }

    pub(crate) fn new(ldm_count: usize, seed: u64) -> Batch {
        Batch {
            ldms: (0..ldm_count).map(|_| OpBatch::default()).collect(),
            seed,
            slots: Vec::new(),
            scratch: Vec::new(),
            cost: Cost::default(),
            database: None,
            mixed: false,
            uniques: Vec::new(),
            unique_deletes: Vec::new(),
            duplicates: Vec::new(),
            now: None,
        }
    }

    /// Sets the time of the batch's writes (microseconds since 1970-01-01
    /// UTC), as a statement that reads the time itself (`NOW()`) sets it,
    /// so that a default of `CURRENT_TIMESTAMP` is the same instant.
    pub(crate) fn at(&mut self, micros: i64) {
        self.now = Some(micros);
    }

    fn now(&mut self) -> i64 {
        *self.now.get_or_insert_with(value::now_micros)
    }

    pub(crate) fn cost(&self) -> Cost {
        self.cost
    }

    /// The database every operation is in; `Err(())` when they are in more
    /// than one, `Ok(None)` when there are none.
    pub(crate) fn database(&self) -> Result<Option<&Arc<Database>>, ()> {
        if self.mixed {
            Err(())
        } else {
            Ok(self.database.as_ref())
        }
    }

    pub(crate) fn has_writes(&self) -> bool {
        self.cost.write_units > 0
    }

    /// Whether every operation only reads or deletes.
    pub(crate) fn only_reads_and_deletes(&self) -> bool {
        (self.ldms.iter().flat_map(|b| &b.ops))
            .all(|op| matches!(op.kind, OpKind::Read | OpKind::Delete))
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Forgets every operation and result, keeping the buffers.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.cost = Cost::default();
        self.database = None;
        self.mixed = false;
        self.uniques.clear();
        self.unique_deletes.clear();
        self.duplicates.clear();
        for b in &mut self.ldms {
            b.ops.clear();
            b.data.clear();
            b.results.clear();
            b.out.clear();
            b.program = None;
        }
    }

    /// Reads the row with this primary key (values in key order).
    pub fn read(&mut self, table: &Arc<Table>, key: &[Value]) -> Result<(), ValueError> {
        self.scratch.clear();
        codec::encode_key(&table.layout, key, &mut self.scratch)?;
        let key = (0, self.scratch.len());
        self.push(table, OpKind::Read, key, (0, 0), (0, 0));
        Ok(())
    }

    /// Reads the row with this primary key and, in a transaction, locks it
    /// until the transaction ends (`SELECT … FOR UPDATE`).
    pub(crate) fn read_locking(
        &mut self,
        table: &Arc<Table>,
        key: &[Value],
    ) -> Result<(), ValueError> {
        self.scratch.clear();
        codec::encode_key(&table.layout, key, &mut self.scratch)?;
        let key = (0, self.scratch.len());
        self.push(table, OpKind::Lock, key, (0, 0), (0, 0));
        Ok(())
    }

    /// Reads the row with this primary key, encoded as the table stores it.
    pub(crate) fn read_encoded(&mut self, table: &Arc<Table>, key: &[u8]) {
        self.scratch.clear();
        self.scratch.extend_from_slice(key);
        self.push(table, OpKind::Read, (0, key.len()), (0, 0), (0, 0));
    }

    /// Deletes the row with this primary key (values in key order).
    pub fn delete(&mut self, table: &Arc<Table>, key: &[Value]) -> Result<(), ValueError> {
        self.scratch.clear();
        codec::encode_key(&table.layout, key, &mut self.scratch)?;
        if table.layout.ordered.iter().any(|o| o.unique) {
            (self.unique_deletes).push((Arc::clone(table), self.scratch.clone()));
        }
        let key = (0, self.scratch.len());
        self.push(table, OpKind::Delete, key, (0, 0), (0, 0));
        Ok(())
    }

    /// Inserts a row given as column names and values; columns not given are
    /// NULL, and every `NOT NULL` column must be given.
    pub fn insert(&mut self, table: &Arc<Table>, row: &[(&str, Value)]) -> Result<(), ValueError> {
        self.row_op(table, OpKind::Insert, row)
    }

    /// Sets the given columns of the row with the given key.
    pub fn update(&mut self, table: &Arc<Table>, row: &[(&str, Value)]) -> Result<(), ValueError> {
        self.row_op(table, OpKind::Update, row)
    }

    /// Updates the row with the given key, or inserts it if there is none.
    pub fn write(&mut self, table: &Arc<Table>, row: &[(&str, Value)]) -> Result<(), ValueError> {
        self.row_op(table, OpKind::Write, row)
    }

    /// `write`, answering also the row it replaced (`found`): a read and a
    /// write of one key for the price of one lookup, charged as both.
    pub fn replace(&mut self, table: &Arc<Table>, row: &[(&str, Value)]) -> Result<(), ValueError> {
        self.row_op(table, OpKind::Replace, row)
    }

    /// Runs `program` on the row with this primary key (values in key
    /// order) with `arg`, in the lookup that finds it (`answer` reads what
    /// it answered). Every interpreted operation of a batch runs the same
    /// program. Charged a read and the write of a row of `row_bytes`, the
    /// most the program writes. Not for tables with unique indexes, whose
    /// values the coordinator must know before the batch runs.
    pub(crate) fn interpret(
        &mut self,
        table: &Arc<Table>,
        key: &[Value],
        program: &Arc<dyn RowProgram>,
        arg: &[u8],
        row_bytes: usize,
    ) -> Result<(), ValueError> {
        let layout = &table.layout;
        if layout.ordered.iter().any(|o| o.unique) {
            return Err(ValueError::named(
                layout.name(layout.key[0]).to_owned(),
                format!(
                    "table '{}' has a unique index: its rows are changed by value, not by program",
                    table.name()
                ),
            ));
        }
        self.scratch.clear();
        codec::encode_key(layout, key, &mut self.scratch)?;
        let key_len = self.scratch.len();
        self.scratch.extend_from_slice(arg);
        self.cost.reads += 1;
        let units = write_units(row_bytes as u64);
        self.cost.write_units += units;
        self.cost.grows = true;
        self.push(
            table,
            OpKind::Interpret,
            (0, key_len),
            (key_len, arg.len()),
            (0, 0),
        );
        let slot = self.slots.last_mut().expect("just pushed");
        slot.write_units = units;
        let given = &mut self.ldms[slot.ldm as usize].program;
        match given {
            Some(p) => assert!(
                Arc::ptr_eq(p, program),
                "one program for the interpreted operations of a batch"
            ),
            None => *given = Some(Arc::clone(program)),
        }
        Ok(())
    }

    fn row_op(
        &mut self,
        table: &Arc<Table>,
        kind: OpKind,
        row: &[(&str, Value)],
    ) -> Result<(), ValueError> {
        let layout = &table.layout;
        // Each column's value, on the stack for tables of up to 16 columns.
        let mut inline = [None; 16];
        let mut heap = Vec::new();
        let values: &mut [Option<&Value>] = match layout.columns.len() {
            n if n <= inline.len() => &mut inline[..n],
            n => {
                heap.resize(n, None);
                &mut heap
            }
        };
        for (name, value) in row {
            let c = layout.column_index(name).ok_or_else(|| {
                ValueError::named(
                    (*name).to_owned(),
                    format!("table '{}' has no such column", table.name()),
                )
            })?;
            if values[c as usize].replace(value).is_some() {
                return Err(ValueError::new(layout, c, "given more than once"));
            }
        }
        self.values_op(table, kind, values)
    }

    /// `write`, or `replace` if `replace`, of a row given as a value per
    /// column in the table's order (`None`: not given): no column is
    /// looked up by name.
    pub(crate) fn put_values(
        &mut self,
        table: &Arc<Table>,
        values: &[Option<&Value>],
        replace: bool,
    ) -> Result<(), ValueError> {
        assert_eq!(
            values.len(),
            table.layout.columns.len(),
            "a value per column"
        );
        let kind = if replace {
            OpKind::Replace
        } else {
            OpKind::Write
        };
        self.values_op(table, kind, values)
    }

    fn values_op(
        &mut self,
        table: &Arc<Table>,
        kind: OpKind,
        values: &[Option<&Value>],
    ) -> Result<(), ValueError> {
        let layout = &table.layout;
        if layout.stamped.is_empty() {
            return self.encoded_op(table, kind, values, &layout.defaults);
        }
        // The time of the write, to each stamped column's precision: the
        // default of an insert, and what an update that does not set an
        // `ON UPDATE CURRENT_TIMESTAMP` column sets it to (an upsert sets
        // it whether it inserts or updates: such a column's default is the
        // time too).
        let now = self.now();
        let mut defaults = layout.defaults.clone();
        for s in &layout.stamped {
            defaults[s.column as usize] = value::time_of(layout.columns[s.column as usize].ty, now);
        }
        let updating = matches!(kind, OpKind::Update | OpKind::Write);
        let mut given = values.to_vec();
        for s in layout.stamped.iter().filter(|s| s.on_update && updating) {
            let c = s.column as usize;
            if given[c].is_none() {
                given[c] = defaults[c].as_ref();
            }
        }
        self.encoded_op(table, kind, &given, &defaults)
    }

    fn encoded_op(
        &mut self,
        table: &Arc<Table>,
        kind: OpKind,
        values: &[Option<&Value>],
        defaults: &[Option<Value>],
    ) -> Result<(), ValueError> {
        let layout = &table.layout;
        self.scratch.clear();
        let encoded = codec::encode_row(layout, values, defaults, &mut self.scratch)?;
        if kind == OpKind::Insert && !encoded.complete {
            let missing = layout
                .required
                .iter()
                .find(|&&c| values[c as usize].is_none())
                .expect("incomplete");
            return Err(ValueError::new(
                layout,
                *missing,
                "a value is required: the column is NOT NULL",
            ));
        }
        let has_unique = layout.ordered.iter().any(|o| o.unique);
        let key = has_unique.then(|| self.scratch[encoded.key.0..][..encoded.key.1].to_vec());
        self.push(table, kind, encoded.key, encoded.image, encoded.presence);
        let op = self.slots.len() - 1;
        for (index, ordered) in layout.ordered.iter().enumerate() {
            if !ordered.unique {
                continue;
            }
            // An insert stores a column's default where it gives none.
            let given = |c: u16| match (values[c as usize], kind) {
                (None, OpKind::Insert) => defaults[c as usize].as_ref(),
                (v, _) => v,
            };
            let values = (ordered.order[..ordered.columns].iter())
                .map(|&c| match given(c) {
                    None => Ok(Given::Missing),
                    Some(Value::Null) => Ok(Given::Null),
                    Some(v) => codec::encode_operand(layout, c, v).map(Given::Bytes),
                })
                .collect::<Result<_, _>>()?;
            self.uniques.push(UniqueWrite {
                op,
                kind,
                table: Arc::clone(table),
                index,
                key: key.clone().expect("a table with a unique index"),
                values,
            });
        }
        Ok(())
    }

    /// Adds a change read back from the redo log: a put becomes a write of
    /// the whole row, a delete a delete. Checks the row image fits the
    /// table, so that no worker meets a malformed one.
    pub(crate) fn push_change(
        &mut self,
        table: &Arc<Table>,
        change: &Change<'_>,
    ) -> Result<(), String> {
        let layout = &table.layout;
        self.scratch.clear();
        match change {
            Change::Clear { .. } | Change::Digest { .. } => {
                return Err("a clear or a digest is not a change of one row".into());
            }
            Change::Delete { key, .. } => {
                self.scratch.extend_from_slice(key);
                self.push(table, OpKind::Delete, (0, key.len()), (0, 0), (0, 0));
            }
            Change::Put { key, image, .. } => {
                if !layout.is_image(image) {
                    return Err(format!(
                        "a row image of {} bytes does not fit table '{}'",
                        image.len(),
                        table.name()
                    ));
                }
                self.scratch.extend_from_slice(key);
                self.scratch.extend_from_slice(image);
                let presence = layout.columns.len().div_ceil(8);
                self.scratch.resize(self.scratch.len() + presence, 0xff);
                let image_span = (key.len(), image.len());
                let presence_span = (key.len() + image.len(), presence);
                self.push(
                    table,
                    OpKind::Write,
                    (0, key.len()),
                    image_span,
                    presence_span,
                );
            }
        }
        Ok(())
    }

    /// Moves the operation encoded in `scratch` to its worker's batch.
    fn push(
        &mut self,
        table: &Arc<Table>,
        kind: OpKind,
        key: (usize, usize),
        image: (usize, usize),
        presence: (usize, usize),
    ) {
        let key_bytes = &self.scratch[key.0..key.0 + key.1];
        let image_units = || write_units(table.layout.data_bytes(image.1) as u64);
        let units = match kind {
            OpKind::Read | OpKind::Lock => 0,
            OpKind::Delete => 1,
            OpKind::Insert | OpKind::Update | OpKind::Write | OpKind::Replace => image_units(),
            // Charged by `interpret`: its image is the program's argument.
            OpKind::Interpret => 0,
        };
        self.cost.reads += u64::from(matches!(
            kind,
            OpKind::Read | OpKind::Lock | OpKind::Replace
        ));
        self.cost.locks |= kind == OpKind::Lock;
        self.cost.write_units += units;
        self.cost.grows |= matches!(
            kind,
            OpKind::Insert | OpKind::Update | OpKind::Write | OpKind::Replace
        );
        match &self.database {
            None => self.database = Some(Arc::clone(&table.database)),
            Some(db) if db.id != table.database.id => self.mixed = true,
            Some(_) => {}
        }
        let place = table.fragments[fragment_of(key_bytes, table.fragments()) as usize];
        let tag = index_tag(key_bytes, self.seed);
        let ldm = place.ldm as usize;
        let target = &mut self.ldms[ldm];
        let base = target.data.len();
        target.data.extend_from_slice(&self.scratch);
        let span = |(start, len): (usize, usize)| Span {
            start: (base + start) as u32,
            len: len as u32,
        };
        target.ops.push(Op {
            kind,
            table: table.id,
            slot: place.slot,
            tag,
            key: span(key),
            image: span(image),
            presence: span(presence),
        });
        self.slots.push(Slot {
            ldm: ldm as u16,
            index: target.ops.len() as u32 - 1,
            table: Arc::clone(table),
            write_units: units,
        });
    }

    /// Operation `i`'s slot, its worker's part of the batch, and its result.
    fn op_result(&self, i: usize) -> (&Slot, &OpBatch, OpResult) {
        let slot = &self.slots[i];
        let batch = &self.ldms[slot.ldm as usize];
        let result = *batch
            .results
            .get(slot.index as usize)
            .expect("a result is read after the batch ran");
        (slot, batch, result)
    }

    /// Makes operation `i` change nothing (a read of its key), for the
    /// coordinator to answer `fail` for it once the batch ran.
    pub(crate) fn skip(&mut self, i: usize) {
        let slot = &self.slots[i];
        self.ldms[slot.ldm as usize].ops[slot.index as usize].kind = OpKind::Read;
    }

    /// Answers `error` for operation `i`, once the batch ran.
    pub(crate) fn fail(&mut self, i: usize, error: OpError) {
        let slot = &self.slots[i];
        if let Some(result) = (self.ldms[slot.ldm as usize].results).get_mut(slot.index as usize) {
            *result = OpResult::Failed(error);
        }
    }

    /// The outcome of operation `i` (in the order added), once executed.
    pub fn result(&self, i: usize) -> Result<Outcome, OperationError> {
        let (slot, batch, result) = self.op_result(i);
        match result {
            OpResult::Found(span) => Ok(Outcome::Found(Row::decode(
                &slot.table,
                span.of(&batch.out),
            ))),
            OpResult::Absent => Ok(Outcome::Absent),
            OpResult::Inserted => Ok(Outcome::Inserted),
            OpResult::Updated | OpResult::Replaced(_) => Ok(Outcome::Updated),
            OpResult::Deleted => Ok(Outcome::Deleted),
            OpResult::Answered(_) => Ok(Outcome::Updated),
            OpResult::Failed(e) => Err(self.operation_error(i, e)),
        }
    }

    /// What interpreted operation `i`'s program answered, once executed.
    pub(crate) fn answer(&self, i: usize) -> Result<&[u8], OperationError> {
        match self.op_result(i) {
            (_, batch, OpResult::Answered(span)) => Ok(span.of(&batch.out)),
            (_, _, OpResult::Failed(e)) => Err(self.operation_error(i, e)),
            (_, _, other) => unreachable!("operation {i} was not interpreted: {other:?}"),
        }
    }

    /// Why operation `i` failed, if it did: what `result` says, without
    /// decoding a row found.
    pub fn error(&self, i: usize) -> Option<OperationError> {
        match self.op_result(i) {
            (_, _, OpResult::Failed(e)) => Some(self.operation_error(i, e)),
            _ => None,
        }
    }

    /// The row read operation `i` found — or replacing write `i` replaced —
    /// looked at in place: `Ok(None)` when there was none, or for an
    /// operation that reads nothing.
    pub fn found(&self, i: usize) -> Result<Option<RowView<'_>>, OperationError> {
        let (slot, batch, result) = self.op_result(i);
        match result {
            OpResult::Found(span) | OpResult::Replaced(span) => {
                let (fixed, var) = span.of(&batch.out).split_at(slot.table.layout.slot_size);
                Ok(Some(RowView {
                    table: &slot.table,
                    fixed,
                    var,
                }))
            }
            OpResult::Failed(e) => Err(self.operation_error(i, e)),
            _ => Ok(None),
        }
    }

    /// Operation `index` of worker `ldm`'s part failed with `error`: its
    /// place among the operations as added, and the error as users see it.
    pub(crate) fn failure(
        &self,
        ldm: usize,
        index: usize,
        error: OpError,
    ) -> (usize, OperationError) {
        let i = self
            .slots
            .iter()
            .position(|s| s.ldm as usize == ldm && s.index as usize == index)
            .expect("a failed operation is one of the batch's");
        (i, self.operation_error(i, error))
    }

    /// How many operations failed with `error`, once executed.
    pub(crate) fn failures(&self, error: OpError) -> usize {
        let failed = OpResult::Failed(error);
        self.ldms
            .iter()
            .flat_map(|b| &b.results)
            .filter(|&&r| r == failed)
            .count()
    }

    /// Read units the batch's reads really cost, once executed: each row read
    /// per started 4 KiB of its column values, a missing row one.
    #[cfg(test)]
    pub(crate) fn read_units_used(&self) -> u64 {
        self.slots
            .iter()
            .map(|slot| self.read_units_of(slot, true))
            .sum()
    }

    /// The read units of a slot's operation: once `executed`, what its row
    /// cost; before (or when the batch failed), the one it was admitted for.
    fn read_units_of(&self, slot: &Slot, executed: bool) -> u64 {
        let b = &self.ldms[slot.ldm as usize];
        let i = slot.index as usize;
        // An interpreted operation's row is charged one unit. (A worker
        // that failed kept its part of the batch: nothing to charge.)
        let Some(op) = b.ops.get(i) else {
            return 0;
        };
        if !matches!(
            op.kind,
            OpKind::Read | OpKind::Lock | OpKind::Replace | OpKind::Interpret
        ) {
            return 0;
        }
        match b.results.get(i) {
            Some(OpResult::Found(span) | OpResult::Replaced(span)) if executed => {
                read_units(slot.table.layout.data_bytes(span.len as usize) as u64)
            }
            _ => 1,
        }
    }

    /// Charges each table the units its operations used — together what
    /// the database was charged: the write units admitted, and the read
    /// units `executed` rows cost (or one a read if the batch failed).
    /// A run of operations on one table is one charge. Answers the read
    /// units charged.
    pub(crate) fn charge_tables(&self, executed: bool) -> u64 {
        let mut run: Option<(&Arc<Table>, u64, u64)> = None;
        let mut all_reads = 0;
        for slot in &self.slots {
            let reads = self.read_units_of(slot, executed);
            all_reads += reads;
            match &mut run {
                Some((table, r, w)) if Arc::ptr_eq(table, &slot.table) => {
                    *r += reads;
                    *w += slot.write_units;
                }
                _ => {
                    if let Some((table, r, w)) = run {
                        table.units.add(r, w);
                    }
                    run = Some((&slot.table, reads, slot.write_units));
                }
            }
        }
        if let Some((table, r, w)) = run {
            table.units.add(r, w);
        }
        all_reads
    }

    /// Orders each worker's operations by fragment, index tag and key — one
    /// order every transaction shares — so that transactions lock rows in the
    /// same order and cannot deadlock. Operations on the same key keep their
    /// order.
    pub(crate) fn order_for_locking(&mut self) {
        for (ldm, batch) in self.ldms.iter_mut().enumerate() {
            if batch.ops.len() < 2 {
                continue;
            }
            let data = &batch.data;
            let mut order: Vec<usize> = (0..batch.ops.len()).collect();
            order.sort_by(|&a, &b| {
                let (a, b) = (&batch.ops[a], &batch.ops[b]);
                (a.slot, a.tag, a.key.of(data)).cmp(&(b.slot, b.tag, b.key.of(data)))
            });
            let mut new_index = vec![0u32; order.len()];
            for (new, &old) in order.iter().enumerate() {
                new_index[old] = new as u32;
            }
            batch.ops = order.iter().map(|&old| batch.ops[old]).collect();
            for slot in self.slots.iter_mut().filter(|s| s.ldm as usize == ldm) {
                slot.index = new_index[slot.index as usize];
            }
        }
    }

    /// Operation `i`'s failure on a worker, as users see it.
    fn operation_error(&self, i: usize, e: OpError) -> OperationError {
        let slot = &self.slots[i];
        let table = &slot.table;
        let name = || table.name().to_string();
        match e {
            OpError::DuplicateKey => {
                let batch = &self.ldms[slot.ldm as usize];
                let key = batch.ops[slot.index as usize].key.of(&batch.data);
                OperationError::DuplicateKey {
                    table: name(),
                    entry: duplicate_entry(&codec::decode_key(&table.layout, key)),
                }
            }
            OpError::NotFound => OperationError::NotFound { table: name() },
            OpError::MissingColumn(c) => OperationError::MissingColumn {
                table: name(),
                column: table.layout.name(c).to_owned(),
            },
            OpError::OutOfDataMemory => OperationError::OutOfDataMemory { table: name() },
            OpError::MemoryQuota => OperationError::Quota(memory_quota_error(&table.database)),
            OpError::FragmentFull => OperationError::FragmentFull { table: name() },
            OpError::NoSuchTable => OperationError::NoSuchTable { table: name() },
            // A worker never answers Busy (it waits instead); were it to, it
            // would mean the same to the client as a wait that timed out.
            OpError::LockWaitTimeout | OpError::Busy(_) => {
                OperationError::LockWaitTimeout { table: name() }
            }
            OpError::DurabilityFailed => OperationError::DurabilityFailed,
            OpError::DuplicateUnique(index) => OperationError::DuplicateUnique {
                table: name(),
                index: table.layout.ordered[usize::from(index)].name.clone(),
                entry: (self.duplicates.iter())
                    .find(|(op, _)| *op == i)
                    .map(|(_, entry)| entry.clone())
                    .unwrap_or_default(),
            },
        }
    }

    /// Every outcome, in the order the operations were added.
    pub fn results(&self) -> Vec<Result<Outcome, OperationError>> {
        (0..self.len()).map(|i| self.result(i)).collect()
    }
}

/// Values of a key as MySQL's error 1062 (`Duplicate entry '…' for key
/// '…'`) writes them: each as its text (bytes printable as they are, the
/// others as `\xHH`), joined by `-`, cut to 64 characters ending in `...`.
pub(crate) fn duplicate_entry(values: &[Value]) -> String {
    use std::fmt::Write as _;
    const MOST: usize = 64;
    let mut entry = String::new();
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            entry.push('-');
        }
        match v {
            Value::Bytes(b) => {
                for &byte in b {
                    match byte {
                        b' '..=b'~' => entry.push(char::from(byte)),
                        _ => {
                            let _ = write!(entry, "\\x{byte:02X}");
                        }
                    }
                }
            }
            v => {
                let _ = write!(entry, "{v}");
            }
        }
    }
    if entry.chars().count() > MOST {
        entry = entry.chars().take(MOST - 3).collect();
        entry.push_str("...");
    }
    entry
}

/// The memory-quota error of a database at (or near) its quota: its own, or
/// its tenant's.
pub(crate) fn memory_quota_error(db: &Database) -> QuotaError {
    let usage = db.memory.bytes();
    let page = crate::storage::page::PAGE_SIZE as u64;
    if let Some(limit) = db
        .memory
        .limit()
        .filter(|&limit| usage.saturating_add(page) > limit)
    {
        return QuotaError::MemoryQuota {
            database: db.name.to_string(),
            limit,
            usage,
        };
    }
    let tenant = db.tenant.as_ref();
    QuotaError::TenantMemoryQuota {
        tenant: tenant.map(|t| t.id.to_string()).unwrap_or_default(),
        database: db.name.to_string(),
        limit: tenant.and_then(|t| t.memory.limit()).unwrap_or(0),
        usage: tenant.map_or(0, |t| t.memory.bytes()),
    }
}
