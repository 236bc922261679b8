//! Hashes kept a row per field: a hash of more than `WHOLE_FIELDS` fields,
//! or one whose fields no longer fit one row, is moved to `redis_fields`
//! under an id of its own, and from then on a field is read, written or
//! deleted by its own row — whatever the hash's size. The key's row holds
//! the id and the number of fields, so `HLEN` reads one row; the whole hash
//! is a range scan of the id's rows, in field order.
//!
//! A field's value longer than a row keeps its further parts in
//! `redis_field_parts`, as a string's do in `redis_chunks`. When the key's
//! row goes (deleted, expired, replaced), its id goes to `redis_trash` in
//! the same request; the id's rows are deleted right after, a step at a
//! time, and whatever a crash left there is deleted by the node's purge.

use std::sync::Arc;

use super::{
    Db, Entry, FIELDS_FORM, FieldsRef, HashTables, PART, Store, StoreError, Tables, key_value,
    parts_after_head,
};
use crate::log::Mark;
use crate::tc::batch::{Batch, OperationError};
use crate::tc::{Commit, RangeScan, Table};
use crate::types::value::Value;

/// A hash of more fields than this is kept a row per field.
pub(crate) const WHOLE_FIELDS: usize = 128;
/// Longest field name a hash kept a row per field takes.
pub(crate) const MAX_FIELD: usize = 3000;
/// Field rows a step of deleting a hash's rows takes.
const DRAIN_STEP: usize = 500;
/// Field rows a page of reading a whole hash holds.
const READ_STEP: usize = 1000;

/// The hash id a key row's value holds.
pub(crate) fn id_of(head: &[u8]) -> u64 {
    let mut id = [0; 8];
    let n = head.len().min(8);
    id[..n].copy_from_slice(&head[..n]);
    u64::from_le_bytes(id)
}

/// The key row of a hash kept a row per field.
pub(crate) fn key_row(k: Value, expires: Option<i64>, f: FieldsRef) -> [(&'static str, Value); 5] {
    [
        ("k", k),
        ("t", Value::Int(FIELDS_FORM)),
        ("exp", expires.map_or(Value::Null, Value::Int)),
        ("n", Value::UInt(f.count)),
        ("v", Value::Bytes(f.id.to_le_bytes().to_vec())),
    ]
}

/// Adds to `batch` the hash `id`'s going to the trash.
pub(crate) fn trash(batch: &mut Batch, t: &Tables, id: u64) -> Result<(), StoreError> {
    let h = t.hashes.as_ref().expect("a hash of rows has its tables");
    batch
        .write(h.trash()?, &[("h", Value::UInt(id))])
        .map_err(OperationError::from)?;
    Ok(())
}

/// A field a command reads or changes: its value before, and what the
/// command makes of it (`None`: unchanged; `Some(None)`: deleted).
#[derive(Debug, Clone)]
pub(crate) struct Touched {
    pub(crate) name: Vec<u8>,
    pub(crate) old: Option<Vec<u8>>,
    /// Parts of the old value after the first (a hash of rows).
    old_parts: u32,
    pub(crate) new: Option<Option<Vec<u8>>>,
}

/// The fields a hash command touches, read before it changes them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Edit {
    pub(crate) touched: Vec<Touched>,
}

impl Edit {
    fn at(&self, name: &[u8]) -> Option<usize> {
        self.touched.iter().position(|t| t.name == name)
    }

    /// A field's value as the command has left it so far.
    pub(crate) fn get(&self, name: &[u8]) -> Option<&[u8]> {
        let t = &self.touched[self.at(name)?];
        match &t.new {
            Some(new) => new.as_deref(),
            None => t.old.as_deref(),
        }
    }

    pub(crate) fn set(&mut self, name: &[u8], value: Vec<u8>) {
        if let Some(i) = self.at(name) {
            self.touched[i].new = Some(Some(value));
        }
    }

    /// Deletes a field; whether it was there.
    pub(crate) fn delete(&mut self, name: &[u8]) -> bool {
        let there = self.get(name).is_some();
        if let Some(i) = self.at(name) {
            self.touched[i].new = Some(None);
        }
        there
    }

    /// Fields the command adds, less those it deletes.
    fn growth(&self) -> i64 {
        (self.touched.iter())
            .map(|t| match (&t.old, &t.new) {
                (None, Some(Some(_))) => 1,
                (Some(_), Some(None)) => -1,
                _ => 0,
            })
            .sum()
    }

    /// The edit applied to a whole hash's fields, in the order they were
    /// first set.
    pub(crate) fn apply(&self, fields: &mut Vec<(Vec<u8>, Vec<u8>)>) {
        for t in &self.touched {
            match &t.new {
                None => {}
                Some(None) => fields.retain(|(f, _)| *f != t.name),
                Some(Some(v)) => match fields.iter_mut().find(|(f, _)| *f == t.name) {
                    Some((_, old)) => old.clone_from(v),
                    None => fields.push((t.name.clone(), v.clone())),
                },
            }
        }
    }

    /// The edit of `names` on a whole hash's fields.
    pub(crate) fn of_whole(names: &[&[u8]], fields: &[(Vec<u8>, Vec<u8>)]) -> Edit {
        let mut edit = Edit::default();
        for &name in names {
            if edit.at(name).is_none() {
                let old = fields
                    .iter()
                    .find(|(f, _)| f == name)
                    .map(|(_, v)| v.clone());
                edit.touched.push(Touched {
                    name: name.to_vec(),
                    old,
                    old_parts: 0,
                    new: None,
                });
            }
        }
        edit
    }
}

/// Whether a whole hash of these fields is kept as one value.
pub(crate) fn stays_whole(fields: &[(Vec<u8>, Vec<u8>)], encoded: usize) -> bool {
    (fields.len() <= WHOLE_FIELDS && encoded <= PART)
        || fields.iter().any(|(f, _)| f.len() > MAX_FIELD)
}

impl Store {
    /// The key tables of the database `table` is in, as the node's purge
    /// finds them.
    pub(crate) fn tables_of(&self, table: &Arc<Table>) -> Option<Tables> {
        let db = table.database.name.as_str();
        let get = |name| self.engine.table(db, name).ok();
        let hashes = get(super::FIELDS_TABLE).map(|fields| HashTables {
            fields,
            parts: get(super::FIELD_PARTS_TABLE),
            trash: get(super::TRASH_TABLE),
        });
        Some(Tables {
            keys: get(super::KEYS_TABLE)?,
            chunks: get(super::CHUNKS_TABLE),
            hashes,
        })
    }

    /// Deletes the rows of the hashes `ids` (in the trash) and then their
    /// ids from the trash, a step at a time. The node's work: not charged
    /// to the database. What it leaves (the node stopping) the purge does.
    pub(crate) async fn drain(&self, t: &Tables, ids: &[u64]) {
        let (Some(h), false) = (&t.hashes, ids.is_empty()) else {
            return;
        };
        let tc = self.tc();
        for &id in ids {
            let bound = [Value::UInt(id)];
            loop {
                let scan = RangeScan {
                    index: None,
                    lower: Some((&bound, true)),
                    upper: Some((&bound, true)),
                    after: None,
                    limit: DRAIN_STEP,
                    max_bytes: 8 << 20,
                    columns: None,
                };
                let Ok(page) = tc.scan_range_housekeeping(&h.fields, scan).await else {
                    return;
                };
                if page.rows.is_empty() {
                    break;
                }
                let mut batch = tc.batch();
                for row in &page.rows {
                    let v = row.values();
                    let parts = match v[2] {
                        Value::UInt(n) => n,
                        _ => 0,
                    };
                    let key = [v[0].clone(), v[1].clone()];
                    if batch.delete(&h.fields, &key).is_err() {
                        return;
                    }
                    for i in 1..=parts {
                        let part = [v[0].clone(), v[1].clone(), Value::UInt(i)];
                        let Ok(parts_table) = h.parts() else { return };
                        if batch.delete(parts_table, &part).is_err() {
                            return;
                        }
                    }
                }
                if tc.purge(&mut batch).await.is_err() {
                    return;
                }
            }
            // Out of the trash (where an expired hash never was: then this
            // finds nothing to delete).
            let mut batch = tc.batch();
            if let Ok(trash) = h.trash() {
                if batch.delete(trash, &bound).is_err() {
                    return;
                }
                let _ = tc.purge(&mut batch).await;
            }
        }
    }

    /// Deletes the rows of up to `limit` hashes in the trash of every
    /// database: those a crash or a stop left there. How many it found.
    pub(crate) async fn drain_trash(&self, limit: usize) -> usize {
        let trash = shoal_wire::schema::TableName::parse(super::TRASH_TABLE).expect("a valid name");
        let mut drained = 0;
        for table in self.engine.tables() {
            if table.name() != &trash || drained >= limit {
                continue;
            }
            let Ok(rows) = self.tc().scan(&table, &[], limit - drained).await else {
                continue;
            };
            let Some(tables) = self.tables_of(&table) else {
                continue;
            };
            let ids: Vec<u64> = (rows.iter())
                .filter_map(|row| match row.values()[0] {
                    Value::UInt(id) => Some(id),
                    _ => None,
                })
                .collect();
            drained += ids.len();
            self.drain(&tables, &ids).await;
        }
        drained
    }

    /// Every field of a hash of rows, in field order: a scan of its rows,
    /// charged as reads, refused past the largest value a key may hold.
    pub(crate) async fn all_fields(
        &self,
        db: &mut Db,
        f: FieldsRef,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StoreError> {
        let Some(h) = (self.tables_with_hashes(db, false).await?).and_then(|t| t.hashes) else {
            return Ok(Vec::new());
        };
        let bound = [Value::UInt(f.id)];
        let (mut fields, mut long, mut bytes) = (Vec::new(), Vec::new(), 0usize);
        let mut after: Option<Vec<Value>> = None;
        loop {
            let scan = RangeScan {
                index: None,
                lower: Some((&bound, true)),
                upper: Some((&bound, true)),
                after: after.as_deref(),
                limit: READ_STEP,
                max_bytes: 8 << 20,
                columns: None,
            };
            let page = self
                .tc()
                .scan_range(&db.grant, None, &h.fields, scan)
                .await?;
            for row in &page.rows {
                let v = row.values();
                let (Value::Bytes(name), Value::Bytes(value)) = (&v[1], &v[3]) else {
                    continue;
                };
                if let Value::UInt(parts @ 1..) = v[2] {
                    long.push((fields.len(), parts));
                    bytes += parts as usize * PART;
                }
                bytes += name.len() + value.len();
                if bytes > self.max_value {
                    return Err(StoreError::HashTooLarge(self.max_value));
                }
                fields.push((name.clone(), value.clone()));
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        if !long.is_empty() {
            let mut batch = self.tc().batch();
            for &(i, parts) in &long {
                let (name, value) = &mut fields[i];
                let rest = self
                    .read_field_parts(db, &mut batch, &h, f.id, name, parts)
                    .await?;
                value.extend_from_slice(&rest);
            }
        }
        Ok(fields)
    }

    /// The parts after the first of a field's value, in one request.
    async fn read_field_parts(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        h: &HashTables,
        id: u64,
        name: &[u8],
        parts: u64,
    ) -> Result<Vec<u8>, StoreError> {
        batch.clear();
        for i in 1..=parts {
            let key = [Value::UInt(id), Value::Bytes(name.to_vec()), Value::UInt(i)];
            batch.read(h.parts()?, &key).map_err(OperationError::from)?;
        }
        self.run(db, batch, Commit::Each).await?;
        let mut value = Vec::new();
        for i in 0..parts as usize {
            if let Some(part) = batch.found(i)?.and_then(|row| row.bytes(3)) {
                value.extend_from_slice(part);
            }
        }
        Ok(value)
    }

    /// The fields `names` of a hash of rows, read by their rows (and parts,
    /// for a value longer than a row: on the primary only, where the key's
    /// lock keeps them whole): the edit a command starts from.
    pub(crate) async fn read_fields(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        f: FieldsRef,
        names: &[&[u8]],
    ) -> Result<Edit, StoreError> {
        let mut edit = Edit::default();
        for &name in names {
            if edit.at(name).is_none() {
                edit.touched.push(Touched {
                    name: name.to_vec(),
                    old: None,
                    old_parts: 0,
                    new: None,
                });
            }
        }
        let Some(h) = (self.tables_with_hashes(db, false).await?).and_then(|t| t.hashes) else {
            return Ok(edit);
        };
        batch.clear();
        let mut asked = Vec::new();
        for (i, t) in edit.touched.iter().enumerate() {
            // A field name no row can hold is in no hash of rows.
            if t.name.len() <= MAX_FIELD {
                let key = [Value::UInt(f.id), Value::Bytes(t.name.clone())];
                batch.read(&h.fields, &key).map_err(OperationError::from)?;
                asked.push(i);
            }
        }
        if asked.is_empty() {
            return Ok(edit);
        }
        self.run(db, batch, Commit::Each).await?;
        let mut long = Vec::new();
        for (n, &i) in asked.iter().enumerate() {
            if let Some(row) = batch.found(n)? {
                let parts = match row.value(2) {
                    Value::UInt(p) => p as u32,
                    _ => 0,
                };
                edit.touched[i].old = Some(row.bytes(3).unwrap_or_default().to_vec());
                edit.touched[i].old_parts = parts;
                if parts > 0 {
                    long.push(i);
                }
            }
        }
        if !long.is_empty() && !db.db.is_primary_here() {
            db.not_whole_here = true;
            return Err(StoreError::NotWholeHere);
        }
        for i in long {
            let (name, parts) = (edit.touched[i].name.clone(), edit.touched[i].old_parts);
            let rest =
                (self.read_field_parts(db, batch, &h, f.id, &name, u64::from(parts))).await?;
            if let Some(old) = &mut edit.touched[i].old {
                old.extend_from_slice(&rest);
            }
        }
        Ok(edit)
    }

    /// Writes an edit of a hash of rows (`entry`) in one atomic request:
    /// the fields it set and deleted, and the key's row with the new number
    /// of fields — or no key at all when none is left. The caller holds the
    /// key's lock and is not in a transaction; it lets go of the lock, then
    /// waits on the answer (`acknowledgeable`), so that writers of one hash
    /// share a group commit.
    pub(crate) async fn write_fields(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        key: &[u8],
        entry: &Entry,
        edit: &Edit,
    ) -> Result<Mark, StoreError> {
        let f = entry.fields.expect("a hash of rows");
        self.check_put(&db.db, db.grant, &[])?;
        for t in &edit.touched {
            if let Some(Some(v)) = &t.new {
                if t.name.len() > MAX_FIELD {
                    return Err(StoreError::FieldTooLong);
                }
                if v.len() > self.max_value {
                    return Err(StoreError::TooLarge(self.max_value));
                }
            }
        }
        let t = (self.tables_with_hashes(db, true).await?).expect("created");
        let h = t.hashes.clone().expect("created");
        let count = (f.count as i64 + edit.growth()).max(0) as u64;
        batch.clear();
        for touched in &edit.touched {
            field_rows(batch, &h, f.id, touched)?;
        }
        let k = key_value(key)?;
        if count == 0 {
            batch
                .delete(&t.keys, std::slice::from_ref(&k))
                .map_err(OperationError::from)?;
        } else {
            let row = key_row(k, entry.expires, FieldsRef { id: f.id, count });
            batch.write(&t.keys, &row).map_err(OperationError::from)?;
        }
        let mark = self.run_applied(db, batch, Commit::Atomic).await?;
        self.touched(db.db.id, [key]);
        Ok(mark)
    }

    /// Moves a whole hash (`entry`'s, or none) with `fields` to rows of a
    /// new id, in one atomic request: its key's row, every field's rows,
    /// and the deletes of the whole value's parts. The caller holds the
    /// key's lock and is not in a transaction.
    pub(crate) async fn to_rows(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        key: &[u8],
        entry: Option<&Entry>,
        fields: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<(), StoreError> {
        self.check_put(&db.db, db.grant, &[])?;
        if fields.iter().any(|(_, v)| v.len() > self.max_value) {
            return Err(StoreError::TooLarge(self.max_value));
        }
        let t = (self.tables_with_hashes(db, true).await?).expect("created");
        let h = t.hashes.clone().expect("created");
        let id = self.new_id(&h).await?;
        batch.clear();
        let k = key_value(key)?;
        let row = key_row(
            k.clone(),
            entry.and_then(|e| e.expires),
            FieldsRef {
                id,
                count: fields.len() as u64,
            },
        );
        batch.write(&t.keys, &row).map_err(OperationError::from)?;
        for i in 1..=entry.map_or(0, |e| e.parts) {
            batch
                .delete(t.chunks()?, &[k.clone(), Value::Int(i64::from(i))])
                .map_err(OperationError::from)?;
        }
        for (name, value) in fields {
            let touched = Touched {
                name: name.clone(),
                old: None,
                old_parts: 0,
                new: Some(Some(value.clone())),
            };
            field_rows(batch, &h, id, &touched)?;
        }
        self.run(db, batch, Commit::Atomic).await?;
        self.touched(db.db.id, [key]);
        Ok(())
    }

    /// An id no hash of the database has: drawn at random, and checked
    /// to hold no rows and not to be in the trash.
    async fn new_id(&self, h: &HashTables) -> Result<u64, StoreError> {
        loop {
            let id = crate::node::random_seed()
                .map_err(|_| StoreError::Tc(crate::tc::TcError::NotServing("no randomness")))?;
            if id == 0 {
                continue;
            }
            let bound = [Value::UInt(id)];
            let scan = RangeScan {
                index: None,
                lower: Some((&bound, true)),
                upper: Some((&bound, true)),
                after: None,
                limit: 1,
                max_bytes: 1,
                columns: None,
            };
            let page = self.tc().scan_range_housekeeping(&h.fields, scan).await?;
            let mut batch = self.tc().batch();
            batch
                .read(h.trash()?, &bound)
                .map_err(OperationError::from)?;
            self.tc().purge(&mut batch).await?;
            if page.rows.is_empty() && batch.found(0)?.is_none() {
                return Ok(id);
            }
        }
    }
}

/// Adds to `batch` what an edit does to one field's rows: its row and
/// parts written, or deleted, and the parts of its old value past the new
/// one's end deleted.
fn field_rows(batch: &mut Batch, h: &HashTables, id: u64, t: &Touched) -> Result<(), StoreError> {
    let name = Value::Bytes(t.name.clone());
    let new_parts = match &t.new {
        None => return Ok(()),
        Some(None) if t.old.is_none() => return Ok(()),
        Some(None) => {
            batch
                .delete(&h.fields, &[Value::UInt(id), name.clone()])
                .map_err(OperationError::from)?;
            0
        }
        Some(Some(v)) => {
            let mut parts = v.chunks(PART);
            let head = parts.next().unwrap_or_default();
            let row = [
                ("h", Value::UInt(id)),
                ("f", name.clone()),
                ("n", Value::UInt(u64::from(parts_after_head(v.len())))),
                ("v", Value::Bytes(head.to_vec())),
            ];
            batch.write(&h.fields, &row).map_err(OperationError::from)?;
            for (i, part) in parts.enumerate() {
                let row = [
                    ("h", Value::UInt(id)),
                    ("f", name.clone()),
                    ("i", Value::UInt(i as u64 + 1)),
                    ("v", Value::Bytes(part.to_vec())),
                ];
                batch
                    .write(h.parts()?, &row)
                    .map_err(OperationError::from)?;
            }
            parts_after_head(v.len())
        }
    };
    for i in new_parts + 1..=t.old_parts {
        batch
            .delete(
                h.parts()?,
                &[Value::UInt(id), name.clone(), Value::UInt(u64::from(i))],
            )
            .map_err(OperationError::from)?;
    }
    Ok(())
}
