//! A table fragment: its rows' fixed and var parts and its primary-key index,
//! all in pages of its own. One LDM worker owns it; nothing here waits.
//!
//! Writes come either on their own (`AUTOCOMMIT`: applied and visible at
//! once) or as part of a transaction. A transaction's write applies at once
//! too, but the row is marked locked and the fragment keeps what it was
//! before (`Lock`): readers, who never wait, are shown that committed version;
//! other writers are told the row is busy and wait; commit forgets the old
//! version, abort puts it back. Undo never needs a page: a transaction's
//! update writes the new var part beside the committed one (copy on write),
//! and frees the one it no longer needs at commit or abort.
//!
//! Its ordered indexes change in the same operation as its rows (`indexes`).

mod indexes;

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::codec::{self, is_present};
use super::fixed::{FixedPart, RowRef};
use super::image;
use super::index::{self, HashIndex};
use super::layout::{LIVE, LOCKED, Layout, ROW_HEADER};
use super::ordered::{self, OrderedTree};
use super::page::{PAGE_SIZE, Page, PageSource};
use super::var::{VarPart, VarRef};
use super::{CmpOp, OpError, Predicate, StorageError};
use crate::types::AUTOCOMMIT;
use crate::types::TxnId;

pub(crate) use self::indexes::{Bound, IndexChunk, IndexStep, compare_keys};

/// Live rows examined per scan call at most, so one scan never holds its
/// worker for long.
const SCAN_STEP: usize = 4096;

/// Memory held and used by one fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct FragmentMemory {
    pub(crate) pages: u64,
    /// Bytes holding live rows (fixed slots, var entries with their directory
    /// entries) and live index entries (hash and ordered).
    pub(crate) live_bytes: u64,
    pub(crate) rows: u64,
}

impl FragmentMemory {
    pub(crate) fn in_memory_bytes(&self) -> u64 {
        self.pages * PAGE_SIZE as u64
    }

    pub(crate) fn free_in_memory_bytes(&self) -> u64 {
        self.in_memory_bytes() - self.live_bytes
    }
}

/// A row held by a transaction, and what it was before.
struct Lock {
    owner: TxnId,
    tag: u32,
    /// The committed fixed part (its var ref included), or `None` when the
    /// transaction inserted the row.
    committed: Option<Box<[u8]>>,
    /// The transaction deleted the row; it goes at commit.
    deleted: bool,
}

/// What a write did: whether it inserted, the row it wrote (gone after a
/// delete outside a transaction), and whether it newly locked that row for
/// its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Written {
    pub(crate) inserted: bool,
    pub(crate) row: RowRef,
    pub(crate) locked: bool,
}

/// What a transaction made of a row it holds, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeldChange {
    /// Nothing: the row is as committed.
    Unchanged,
    Written,
    Deleted,
}

/// Where a key stands for a transaction.
enum Found {
    Absent,
    /// Unlocked.
    Free(RowRef),
    /// Locked by this transaction; `deleted` if it deleted the row.
    Mine(RowRef, bool),
    /// Locked by another transaction.
    Theirs(RowRef),
}

pub(crate) struct Fragment {
    layout: Arc<Layout>,
    pages: PageSource,
    fixed: FixedPart,
    var: VarPart,
    index: HashIndex,
    locks: FxHashMap<RowRef, Lock>,
    /// Ordered indexes, as `layout.ordered` lists them.
    ordered: Vec<OrderedTree>,
    /// For each ordered index being built, the row its build goes on from.
    building: Vec<Option<RowRef>>,
    /// Pages had for an index insert before anything of its operation
    /// changed; empty between operations.
    spare: Vec<Page>,
    /// Where an update builds a row's new var part.
    merged: Vec<u8>,
    /// The fixed part of a row an update is moving in the indexes, as it was.
    old: Vec<u8>,
}

impl Fragment {
    pub(crate) fn new(layout: Arc<Layout>, pages: PageSource) -> Fragment {
        Fragment {
            fixed: FixedPart::new(layout.slot_size),
            var: VarPart::new(),
            index: HashIndex::new(),
            locks: FxHashMap::default(),
            ordered: layout.ordered.iter().map(|_| OrderedTree::new()).collect(),
            building: vec![None; layout.ordered.len()],
            spare: Vec::new(),
            merged: Vec::new(),
            old: Vec::new(),
            layout,
            pages,
        }
    }

    // The prefetch stages of a lookup (see `ldm::Prefetch`): each asks the
    // CPU to bring into cache what the next step of a lookup of a key with
    // this tag will read, and reads only what the stage before fetched.

    #[inline]
    pub(crate) fn prefetch_index(&self, tag: u32) {
        self.index.prefetch(tag);
    }

    /// The fixed part of the first row whose index entry has this tag: most
    /// likely the row the lookup wants.
    #[inline]
    pub(crate) fn prefetch_row(&self, tag: u32) {
        if let Some(r) = self.index.find(tag, |_| true) {
            self.fixed.prefetch(r);
        }
    }

    /// The var-part directory entry of that row.
    #[inline]
    pub(crate) fn prefetch_var_part(&self, tag: u32) {
        if let Some(v) = self.likely_var_ref(tag) {
            self.var.prefetch(v);
        }
    }

    /// The first bytes of that row's var part.
    #[inline]
    pub(crate) fn prefetch_var_data(&self, tag: u32) {
        if let Some(v) = self.likely_var_ref(tag) {
            self.var.prefetch_data(v);
        }
    }

    /// The var part of the first row whose index entry has this tag, if the
    /// table has var columns.
    #[inline]
    fn likely_var_ref(&self, tag: u32) -> Option<VarRef> {
        if self.layout.n_var == 0 {
            return None;
        }
        let r = self.index.find(tag, |_| true)?;
        Some(Self::var_ref(self.fixed.slot(r)))
    }

    #[inline]
    fn var_ref(fixed: &[u8]) -> VarRef {
        u32::from_le_bytes(
            fixed[ROW_HEADER..ROW_HEADER + 4]
                .try_into()
                .expect("var ref"),
        )
    }

    #[inline]
    fn header(fixed: &[u8]) -> u32 {
        u32::from_le_bytes(fixed[..ROW_HEADER].try_into().expect("header"))
    }

    fn set_header(&mut self, r: RowRef, header: u32) {
        self.fixed.slot_mut(r)[..ROW_HEADER].copy_from_slice(&header.to_le_bytes());
    }

    /// The var part of the row whose fixed part is `fixed`, empty if the table
    /// has none.
    #[inline]
    fn var_of(&self, fixed: &[u8]) -> &[u8] {
        if self.layout.n_var == 0 {
            &[]
        } else {
            self.var.get(Self::var_ref(fixed))
        }
    }

    // Every operation takes the key with its tag: the upper half of the key's
    // hash under the engine's secret seed (see `batch::index_tag`).

    #[inline]
    fn find(&self, tag: u32, key: &[u8]) -> Option<RowRef> {
        self.index.find(tag, |r| {
            let slot = self.fixed.slot(r);
            let var = if self.layout.key_has_var {
                self.var_of(slot)
            } else {
                &[]
            };
            self.layout.key_matches(slot, var, key)
        })
    }

    fn locate(&self, txn: TxnId, tag: u32, key: &[u8]) -> Found {
        let Some(r) = self.find(tag, key) else {
            return Found::Absent;
        };
        if Self::header(self.fixed.slot(r)) & LOCKED == 0 {
            return Found::Free(r);
        }
        let lock = &self.locks[&r];
        if txn != AUTOCOMMIT && lock.owner == txn {
            Found::Mine(r, lock.deleted)
        } else {
            Found::Theirs(r)
        }
    }

    /// The version of row `r` that transaction `txn` sees: its own if it
    /// holds the row, else the committed one. `None` if that is no row.
    fn visible(&self, txn: TxnId, r: RowRef) -> Option<(&[u8], &[u8])> {
        let fixed = self.fixed.slot(r);
        if Self::header(fixed) & LOCKED == 0 {
            return Some((fixed, self.var_of(fixed)));
        }
        let lock = &self.locks[&r];
        if txn != AUTOCOMMIT && lock.owner == txn {
            return (!lock.deleted).then(|| (fixed, self.var_of(fixed)));
        }
        let committed = lock.committed.as_deref()?;
        Some((committed, self.var_of(committed)))
    }

    /// Appends the image of the row with this key, as `txn` sees it, to `out`.
    /// Reads never wait: a row another transaction holds reads as committed.
    #[inline]
    pub(crate) fn read(&self, txn: TxnId, tag: u32, key: &[u8], out: &mut Vec<u8>) -> bool {
        let Some((fixed, var)) = self.find(tag, key).and_then(|r| self.visible(txn, r)) else {
            return false;
        };
        out.extend_from_slice(fixed);
        out.extend_from_slice(var);
        true
    }

    /// Reads the row with this key for `txn`, locking it as a write would
    /// (a locking read: `SELECT … FOR UPDATE`), so that no other transaction
    /// changes it before `txn` ends. Appends its image to `out`; `None` if
    /// there is no row (nothing is locked then). A row another transaction
    /// holds is `Busy`.
    pub(crate) fn read_locking(
        &mut self,
        txn: TxnId,
        tag: u32,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<Written>, OpError> {
        let (r, locked) = match self.locate(txn, tag, key) {
            Found::Absent | Found::Mine(_, true) => return Ok(None),
            Found::Theirs(r) => return Err(OpError::Busy(r)),
            Found::Mine(r, false) => (r, false),
            Found::Free(r) => {
                if txn != AUTOCOMMIT {
                    self.lock(txn, tag, r);
                }
                (r, txn != AUTOCOMMIT)
            }
        };
        self.append_image(r, out);
        Ok(Some(Written {
            inserted: false,
            row: r,
            locked,
        }))
    }

    /// Inserts a row image; the key must be new.
    pub(crate) fn insert(
        &mut self,
        txn: TxnId,
        tag: u32,
        key: &[u8],
        image: &[u8],
    ) -> Result<Written, OpError> {
        match self.locate(txn, tag, key) {
            Found::Theirs(r) => Err(OpError::Busy(r)),
            Found::Free(_) | Found::Mine(_, false) => Err(OpError::DuplicateKey),
            Found::Mine(r, true) => self.reinsert(r, image),
            Found::Absent => self.insert_new(txn, tag, image),
        }
    }

    fn insert_new(&mut self, txn: TxnId, tag: u32, image: &[u8]) -> Result<Written, OpError> {
        let (fixed, var) = image.split_at(self.layout.slot_size);
        let r = self.fixed.alloc(&self.pages)?;
        let var_ref = if self.layout.n_var > 0 {
            match self.var.insert(&self.pages, var) {
                Ok(v) => v,
                Err(e) => {
                    self.fixed.free(r);
                    return Err(e.into());
                }
            }
        } else {
            0
        };
        if let Err(e) = self.index.insert(&self.pages, tag, r) {
            if self.layout.n_var > 0 {
                self.var.free(var_ref);
            }
            self.fixed.free(r);
            return Err(e.into());
        }
        let slot = self.fixed.slot_mut(r);
        slot.copy_from_slice(fixed);
        if self.layout.n_var > 0 {
            slot[ROW_HEADER..ROW_HEADER + 4].copy_from_slice(&var_ref.to_le_bytes());
        }
        if let Err(e) = self.index_new(r) {
            self.remove_row(r, tag);
            return Err(e);
        }
        let header = if txn == AUTOCOMMIT {
            LIVE
        } else {
            LIVE | LOCKED
        };
        self.set_header(r, header);
        if txn == AUTOCOMMIT {
            return Ok(Written {
                inserted: true,
                row: r,
                locked: false,
            });
        }
        let lock = Lock {
            owner: txn,
            tag,
            committed: None,
            deleted: false,
        };
        self.locks.insert(r, lock);
        Ok(Written {
            inserted: true,
            row: r,
            locked: true,
        })
    }

    /// Inserts over a row its own transaction deleted: the row takes the
    /// whole new image.
    fn reinsert(&mut self, r: RowRef, image: &[u8]) -> Result<Written, OpError> {
        let every_column = vec![0xff; self.layout.columns.len().div_ceil(8)];
        self.update_row(r, image, &every_column)?;
        self.locks.get_mut(&r).expect("held").deleted = false;
        Ok(Written {
            inserted: true,
            row: r,
            locked: false,
        })
    }

    /// Replaces the var part of row `r`, which this transaction may hold,
    /// with `bytes`; the committed var part is kept, not overwritten.
    fn write_var(&mut self, r: RowRef, bytes: &[u8]) -> Result<VarRef, OpError> {
        let current = Self::var_ref(self.fixed.slot(r));
        let committed = self
            .locks
            .get(&r)
            .and_then(|l| l.committed.as_deref())
            .map(Self::var_ref);
        let new_ref = if committed == Some(current) {
            self.var.insert(&self.pages, bytes)?
        } else {
            self.var.replace(&self.pages, current, bytes)?
        };
        Ok(new_ref)
    }

    /// Sets the columns present in a row image on the existing row with this key.
    pub(crate) fn update(
        &mut self,
        txn: TxnId,
        tag: u32,
        key: &[u8],
        image: &[u8],
        presence: &[u8],
    ) -> Result<Written, OpError> {
        match self.locate(txn, tag, key) {
            Found::Absent | Found::Mine(_, true) => Err(OpError::NotFound),
            Found::Theirs(r) => Err(OpError::Busy(r)),
            Found::Free(r) => self.update_locking(txn, tag, r, image, presence),
            Found::Mine(r, false) => self.update_row(r, image, presence).map(|()| Written {
                inserted: false,
                row: r,
                locked: false,
            }),
        }
    }

    /// Updates the row with this key, or inserts the image if there is none.
    pub(crate) fn write(
        &mut self,
        txn: TxnId,
        tag: u32,
        key: &[u8],
        image: &[u8],
        presence: &[u8],
    ) -> Result<Written, OpError> {
        let missing = self
            .layout
            .required
            .iter()
            .copied()
            .find(|&c| !is_present(presence, c));
        match (self.locate(txn, tag, key), missing) {
            (Found::Theirs(r), _) => Err(OpError::Busy(r)),
            (Found::Free(r), _) => self.update_locking(txn, tag, r, image, presence),
            (Found::Mine(r, false), _) => self.update_row(r, image, presence).map(|()| Written {
                inserted: false,
                row: r,
                locked: false,
            }),
            (Found::Absent | Found::Mine(_, true), Some(c)) => Err(OpError::MissingColumn(c)),
            (Found::Mine(r, true), None) => self.reinsert(r, image),
            (Found::Absent, None) => self.insert_new(txn, tag, image),
        }
    }

    /// Updates an unlocked row, locking it first inside a transaction.
    fn update_locking(
        &mut self,
        txn: TxnId,
        tag: u32,
        r: RowRef,
        image: &[u8],
        presence: &[u8],
    ) -> Result<Written, OpError> {
        if txn == AUTOCOMMIT {
            self.update_row(r, image, presence)?;
            return Ok(Written {
                inserted: false,
                row: r,
                locked: false,
            });
        }
        self.lock(txn, tag, r);
        match self.update_row(r, image, presence) {
            Ok(()) => Ok(Written {
                inserted: false,
                row: r,
                locked: true,
            }),
            Err(e) => {
                // Nothing changed: just let go of the row again.
                self.locks.remove(&r);
                self.set_header(r, LIVE);
                Err(e)
            }
        }
    }

    /// Locks an unlocked row for `txn`, keeping its committed fixed part.
    fn lock(&mut self, txn: TxnId, tag: u32, r: RowRef) {
        let committed: Box<[u8]> = self.fixed.slot(r).into();
        self.set_header(r, LIVE | LOCKED);
        let lock = Lock {
            owner: txn,
            tag,
            committed: Some(committed),
            deleted: false,
        };
        self.locks.insert(r, lock);
    }

    fn update_row(&mut self, r: RowRef, image: &[u8], presence: &[u8]) -> Result<(), OpError> {
        if self.touches_indexes(presence) {
            return self.update_indexed(r, image, presence);
        }
        let layout = Arc::clone(&self.layout);
        let (new_fixed, new_var) = image.split_at(layout.slot_size);
        // The var part first: it is the only step that can fail.
        if layout.sets_var(presence) {
            let mut merged = std::mem::take(&mut self.merged);
            let old_var = self.var_of(self.fixed.slot(r));
            layout.merge_var(old_var, new_var, presence, &mut merged);
            let written = self.write_var(r, &merged);
            self.merged = merged;
            let new_ref = written?;
            self.fixed.slot_mut(r)[ROW_HEADER..ROW_HEADER + 4]
                .copy_from_slice(&new_ref.to_le_bytes());
        }
        layout.apply_fixed(self.fixed.slot_mut(r), new_fixed, presence);
        Ok(())
    }

    /// Deletes the row with this key; inside a transaction it goes at commit.
    pub(crate) fn delete(&mut self, txn: TxnId, tag: u32, key: &[u8]) -> Result<Written, OpError> {
        match self.locate(txn, tag, key) {
            Found::Absent | Found::Mine(_, true) => Err(OpError::NotFound),
            Found::Theirs(r) => Err(OpError::Busy(r)),
            Found::Free(r) if txn == AUTOCOMMIT => {
                self.remove(r, tag);
                Ok(Written {
                    inserted: false,
                    row: r,
                    locked: false,
                })
            }
            Found::Free(r) => {
                self.lock(txn, tag, r);
                self.locks.get_mut(&r).expect("just locked").deleted = true;
                Ok(Written {
                    inserted: false,
                    row: r,
                    locked: true,
                })
            }
            Found::Mine(r, false) => {
                self.locks.get_mut(&r).expect("held").deleted = true;
                Ok(Written {
                    inserted: false,
                    row: r,
                    locked: false,
                })
            }
        }
    }

    /// Removes row `r` and everything it holds.
    fn remove(&mut self, r: RowRef, tag: u32) {
        self.unindex(r);
        self.remove_row(r, tag);
    }

    /// Removes row `r`, which no ordered index holds, and everything it holds.
    fn remove_row(&mut self, r: RowRef, tag: u32) {
        self.index.remove(tag, r);
        if self.layout.n_var > 0 {
            self.var.free(Self::var_ref(self.fixed.slot(r)));
        }
        self.fixed.free(r);
    }

    /// Appends the image of row `r` as it is now (a transaction's own version
    /// if it holds it).
    pub(crate) fn append_image(&self, r: RowRef, out: &mut Vec<u8>) {
        let fixed = self.fixed.slot(r);
        out.extend_from_slice(fixed);
        out.extend_from_slice(self.var_of(fixed));
    }

    /// What the transaction holding row `r` made of it; the row's key is
    /// appended to `key` unless it is unchanged.
    pub(crate) fn held_change(&self, r: RowRef, key: &mut Vec<u8>) -> HeldChange {
        let lock = &self.locks[&r];
        let fixed = self.fixed.slot(r);
        // Only locked (a locking read), or written back as it was: a new var
        // part always has a new place, so equal fixed parts are equal rows.
        if !lock.deleted
            && let Some(committed) = lock.committed.as_deref()
            && committed[ROW_HEADER..] == fixed[ROW_HEADER..]
        {
            return HeldChange::Unchanged;
        }
        self.layout.key_of(fixed, self.var_of(fixed), key);
        if lock.deleted {
            HeldChange::Deleted
        } else {
            HeldChange::Written
        }
    }

    /// Makes a transaction's change to row `r` the committed one.
    pub(crate) fn commit(&mut self, r: RowRef) {
        if self.locks[&r].deleted {
            self.unindex(r);
        } else {
            self.index_commit(r);
        }
        let lock = self.locks.remove(&r).expect("a committed row is held");
        let current_var = (self.layout.n_var > 0).then(|| Self::var_ref(self.fixed.slot(r)));
        let committed_var = lock
            .committed
            .as_deref()
            .filter(|_| self.layout.n_var > 0)
            .map(Self::var_ref);
        if let Some(old) = committed_var.filter(|&old| Some(old) != current_var) {
            self.var.free(old);
        }
        if lock.deleted {
            self.remove_row(r, lock.tag);
        } else {
            self.set_header(r, LIVE);
        }
    }

    /// Puts row `r` back as it was before its transaction.
    pub(crate) fn abort(&mut self, r: RowRef) {
        if self.locks[&r].committed.is_none() {
            self.unindex(r);
        } else {
            self.index_abort(r);
        }
        let lock = self.locks.remove(&r).expect("an aborted row is held");
        let Some(committed) = lock.committed else {
            // The transaction inserted it.
            self.remove_row(r, lock.tag);
            return;
        };
        if self.layout.n_var > 0 {
            let current = Self::var_ref(self.fixed.slot(r));
            if current != Self::var_ref(&committed) {
                self.var.free(current);
            }
        }
        // The committed copy was taken before the row was locked.
        self.fixed.slot_mut(r).copy_from_slice(&committed);
    }

    /// Appends to `out` the images of rows from position `from` on that pass
    /// every predicate, as `reader` sees them (see `visible`), recording each
    /// row's start and length in `rows`, until `limit` rows are found or a
    /// step's worth are examined. Returns where to go on, or `None` at the
    /// end of the fragment.
    pub(crate) fn scan(
        &self,
        reader: TxnId,
        from: RowRef,
        filter: &[Predicate],
        limit: usize,
        out: &mut Vec<u8>,
        rows: &mut Vec<(u32, u32)>,
    ) -> Option<RowRef> {
        let mut at = from;
        let mut found = 0;
        for _ in 0..SCAN_STEP {
            let r = self.fixed.next_live(at)?;
            at = r + 1;
            let Some((fixed, var)) = self.visible(reader, r) else {
                continue;
            };
            if filter.iter().all(|p| self.passes(p, fixed, var)) {
                let start = out.len();
                out.extend_from_slice(fixed);
                out.extend_from_slice(var);
                rows.push((start as u32, (out.len() - start) as u32));
                found += 1;
                if found == limit {
                    break;
                }
            }
        }
        self.fixed.next_live(at)
    }

    /// Where a row's values start in its fixed part: the header and the
    /// reference to its var part before them are this node's own, not the
    /// row's (two nodes holding the same row differ there).
    pub(crate) fn values_offset(&self) -> usize {
        self.layout.null_offset
    }

    /// Calls `row` with the key, fixed part and var part of each committed
    /// row from position `from` on, until it answers false or a step's
    /// worth of rows are examined: where to go on (`None` at the end of the
    /// fragment).
    pub(crate) fn each_row(
        &self,
        from: RowRef,
        mut row: impl FnMut(&[u8], &[u8], &[u8]) -> bool,
    ) -> Option<RowRef> {
        let mut key = Vec::new();
        self.each_visible(from, AUTOCOMMIT, |fixed, var| {
            key.clear();
            self.layout.key_of(fixed, var, &mut key);
            row(&key, fixed, var)
        })
    }

    /// Calls `row` with the fixed and var part of each row from position
    /// `from` on as `reader` sees it (see `visible`), until it answers false
    /// or a step's worth of rows are examined: where to go on (`None` at
    /// the end of the fragment).
    pub(crate) fn each_visible(
        &self,
        from: RowRef,
        reader: TxnId,
        mut row: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Option<RowRef> {
        let mut at = from;
        for _ in 0..SCAN_STEP {
            let r = self.fixed.next_live(at)?;
            at = r + 1;
            let Some((fixed, var)) = self.visible(reader, r) else {
                continue;
            };
            if !row(fixed, var) {
                break;
            }
        }
        self.fixed.next_live(at)
    }

    fn passes(&self, p: &Predicate, fixed: &[u8], var: &[u8]) -> bool {
        let null = self.layout.is_null(fixed, p.column);
        match p.op {
            CmpOp::IsNull => null,
            CmpOp::IsNotNull => !null,
            // As in SQL, a comparison with NULL is never true.
            _ if null => false,
            op => {
                let ty = self.layout.columns[p.column as usize].ty;
                let ord = codec::compare(
                    ty,
                    self.layout.column_bytes(fixed, var, p.column),
                    &p.operand,
                );
                op.holds(ord)
            }
        }
    }

    pub(crate) fn memory(&self) -> FragmentMemory {
        let rows = self.fixed.live_rows();
        let ordered_pages: usize = self.ordered.iter().map(OrderedTree::pages_held).sum();
        let ordered_entries: u64 = self.ordered.iter().map(OrderedTree::entries).sum();
        FragmentMemory {
            pages: (self.fixed.pages_held()
                + self.var.pages_held()
                + self.index.pages_held()
                + ordered_pages
                + self.spare.len()) as u64,
            live_bytes: rows * self.fixed.slot_size() as u64
                + self.var.live_bytes()
                + self.index.entries() * index::ENTRY as u64
                + ordered_entries * ordered::ENTRY as u64,
            rows,
        }
    }

    /// The position of the ordered index with this name.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    pub(crate) fn ordered_index(&self, name: &str) -> Option<usize> {
        self.layout.ordered_index(name)
    }

    /// Its layout and page source: what a fragment restored in its place needs.
    pub(crate) fn parts(&self) -> (Arc<Layout>, PageSource) {
        (Arc::clone(&self.layout), self.pages.clone())
    }

    /// Appends the fragment's image: its pages and bookkeeping, byte for byte.
    /// Only a fragment no transaction holds a row of is imaged: the image is
    /// of committed rows.
    pub(crate) fn write_image(&self, out: &mut Vec<u8>) {
        assert!(
            self.locks.is_empty(),
            "a fragment with rows held by a transaction"
        );
        let start = out.len();
        image::begin(out, self.layout.slot_size, self.layout.n_var);
        let mut w = image::ImageWriter(out);
        self.fixed.write_image(&mut w);
        self.var.write_image(&mut w);
        self.index.write_image(&mut w);
        image::finish(out, start);
    }

    /// A fragment exactly as its image was taken, in new pages from `pages`.
    pub(crate) fn read_image(
        layout: Arc<Layout>,
        pages: PageSource,
        bytes: &[u8],
    ) -> Result<Fragment, image::ImageError> {
        let mut r = image::open(bytes, layout.slot_size, layout.n_var)?;
        let fixed = FixedPart::read_image(layout.slot_size, &mut r, &pages)?;
        let var = VarPart::read_image(&mut r, &pages)?;
        let index = HashIndex::read_image(&mut r, &pages)?;
        if !r.is_empty() {
            return Err("bytes after the image".into());
        }
        if fixed.live_rows() != index.entries() {
            return Err("rows and index entries do not match".into());
        }
        let mut fragment = Fragment {
            ordered: layout.ordered.iter().map(|_| OrderedTree::new()).collect(),
            building: vec![None; layout.ordered.len()],
            layout,
            pages,
            fixed,
            var,
            index,
            locks: FxHashMap::default(),
            spare: Vec::new(),
            merged: Vec::new(),
            old: Vec::new(),
        };
        // Ordered indexes are not in the image: they are built again from
        // the rows.
        fragment
            .rebuild_indexes()
            .map_err(|e| format!("no memory to rebuild the ordered indexes: {e:?}"))?;
        Ok(fragment)
    }

    /// Recounts everything from the pages themselves and checks it against
    /// the counters `memory` reports. For tests of the accounting.
    pub(crate) fn audit(&self) -> FragmentMemory {
        let rows = self.fixed.audit();
        let var_bytes = self.var.audit();
        let entries = self.index.audit();
        let ordered_entries = self.audit_indexes();
        let ordered_pages: usize = self.ordered.iter().map(OrderedTree::pages_held).sum();
        assert!(
            self.spare.is_empty(),
            "no page is kept spare between operations"
        );
        assert_eq!(rows, entries, "every row has one index entry");
        let mut at = 0;
        let mut locked = 0;
        while let Some(r) = self.fixed.next_live(at) {
            if Self::header(self.fixed.slot(r)) & LOCKED != 0 {
                assert!(self.locks.contains_key(&r), "a locked row has its lock");
                locked += 1;
            }
            at = r + 1;
        }
        assert_eq!(locked, self.locks.len(), "every lock is on a locked row");
        let audited = FragmentMemory {
            pages: (self.fixed.pages_held()
                + self.var.pages_held()
                + self.index.pages_held()
                + ordered_pages) as u64,
            live_bytes: rows * self.fixed.slot_size() as u64
                + var_bytes
                + entries * index::ENTRY as u64
                + ordered_entries * ordered::ENTRY as u64,
            rows,
        };
        assert_eq!(audited, self.memory());
        audited
    }
}

impl From<StorageError> for OpError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::OutOfDataMemory(_) => OpError::OutOfDataMemory,
            StorageError::QuotaReached => OpError::MemoryQuota,
            StorageError::FragmentFull => OpError::FragmentFull,
        }
    }
}
