//! A fragment's ordered indexes: kept in step with its rows in the same
//! operation, and scanned in order.
//!
//! An index holds one entry per row, for the row as it is now. While a
//! transaction holds a row whose key in an index it changed, the index also
//! holds an entry for the committed version, in the committed version's
//! place: readers, who see committed rows, find each row once and in order.
//! So for every index and row:
//!
//! - the *current* entry, ordered by the row as it is now;
//! - the *committed* entry, while a transaction holds the row, it was there
//!   before, and its key in this index differs from the current one.
//!
//! A change to a row's key moves its entry: the entry first becomes the
//! *old* one (ordered by a copy of the row as it was), the row changes, the
//! current entry goes in at its new place, and the old one goes (or stays as
//! the committed one). Every page that takes is had before anything changes.

use std::cmp::Ordering;

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::{Fragment, Lock};
use crate::storage::OpError;
use crate::storage::codec::{self, KeyPrefix, is_present};
use crate::storage::fixed::{FixedPart, RowRef};
use crate::storage::layout::{self, LOCKED, Layout, Place, ROW_HEADER};
use crate::storage::ordered::{Entry, OrderedTree};
use crate::storage::page::Page;
use crate::storage::projection::Projection;
use crate::storage::var::VarPart;
use crate::types::{AUTOCOMMIT, TxnId};

/// Values of an index's columns, each as the column stores it (`None`: NULL).
pub(crate) type Key = Vec<Option<Vec<u8>>>;

/// Orders two keys of `columns`, on as many columns as the shorter has:
/// NULL before every value.
pub(crate) fn compare_keys(
    layout: &Layout,
    columns: &[u16],
    a: &[Option<Vec<u8>>],
    b: &[Option<Vec<u8>>],
) -> Ordering {
    for ((&c, a), b) in columns.iter().zip(a).zip(b) {
        let ty = layout.columns[c as usize].ty;
        let ord = codec::compare_nullable(ty, a.as_deref(), b.as_deref());
        if ord.is_ne() {
            return ord;
        }
    }
    Ordering::Equal
}

/// Where a scan starts or stops: values for the first columns of an index,
/// each as the column stores it (`None`: NULL), and whether rows equal to
/// them are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bound {
    pub(crate) values: Key,
    pub(crate) inclusive: bool,
}

/// What a step of an index scan found: each row's projected image (see
/// `projection`) as the step's reader sees it, in index order, and where
/// the next step starts (`None`: the range is done).
#[derive(Debug, Default)]
pub(crate) struct IndexChunk {
    /// Where in `out` each row's image begins, and its length.
    pub(crate) rows: Vec<(u32, u32)>,
    pub(crate) out: Vec<u8>,
    pub(crate) next: Option<Bound>,
    /// Entries examined: what the scan is charged for.
    pub(crate) examined: usize,
}

/// What each fragment's step of a scan of an ordered index shares.
#[derive(Debug)]
pub(crate) struct IndexStep {
    /// The index, by name.
    pub(crate) index: Arc<str>,
    /// Whose rows are seen as it left them: every other row is seen as
    /// committed (`AUTOCOMMIT`: every row).
    pub(crate) reader: TxnId,
    /// Where the scan ends (`None`: at the index's end).
    pub(crate) to: Option<Bound>,
    /// The columns of each row answered.
    pub(crate) projection: Projection,
    /// Rows per step at most.
    pub(crate) limit: usize,
    /// Bytes of images per step, about.
    pub(crate) max_bytes: usize,
}

/// Entries examined per scan step at most, so one scan never holds its
/// worker for long.
const INDEX_SCAN_STEP: usize = 4096;

/// The rows as the indexes compare them: every version an entry can name.
pub(super) struct Rows<'a> {
    layout: &'a Layout,
    fixed: &'a FixedPart,
    var: &'a VarPart,
    locks: &'a FxHashMap<RowRef, Lock>,
    /// The fixed part of the row an update is changing, as it was.
    old: &'a [u8],
}

/// A version of a row as the indexes compare it: its fixed part, and its
/// var part fetched only when a var column is compared (an index on fixed
/// columns never touches the var pages).
#[derive(Clone, Copy)]
pub(super) struct Version<'a> {
    fixed: &'a [u8],
    var: Var<'a>,
}

#[derive(Clone, Copy)]
enum Var<'a> {
    Bytes(&'a [u8]),
    In(&'a VarPart),
}

impl<'a> Version<'a> {
    /// A version given as its parts.
    fn of((fixed, var): (&'a [u8], &'a [u8])) -> Version<'a> {
        Version {
            fixed,
            var: Var::Bytes(var),
        }
    }

    fn is_null(self, layout: &Layout, c: u16) -> bool {
        layout.is_null(self.fixed, c)
    }

    /// The stored bytes of column `c`, `None` if it is NULL.
    fn value(self, layout: &Layout, c: u16) -> Option<&'a [u8]> {
        (!self.is_null(layout, c)).then(|| self.column(layout, c))
    }

    /// The stored bytes of column `c`.
    fn column(self, layout: &Layout, c: u16) -> &'a [u8] {
        match layout.columns[c as usize].place {
            Place::Fixed { offset, width } => &self.fixed[offset as usize..][..width as usize],
            Place::Var { index } => {
                let var = match self.var {
                    Var::Bytes(var) => var,
                    Var::In(part) => part.get(Fragment::var_ref(self.fixed)),
                };
                layout::var_column(var, layout.n_var, index as usize)
            }
        }
    }
}

impl<'a> Rows<'a> {
    fn var_of(&self, fixed: &'a [u8]) -> &'a [u8] {
        if self.layout.n_var == 0 {
            &[]
        } else {
            self.var.get(Fragment::var_ref(fixed))
        }
    }

    /// The version of a row that `e` orders.
    fn version(&self, e: Entry) -> Version<'a> {
        let fixed = if e.is_committed() {
            (self.locks[&e.row()].committed.as_deref()).expect("a committed entry's row is held")
        } else if e.is_old() {
            self.old
        } else {
            self.fixed.slot(e.row())
        };
        let var = if self.layout.n_var == 0 {
            Var::Bytes(&[])
        } else {
            Var::In(self.var)
        };
        Version { fixed, var }
    }

    /// The prefix of a version's key in index `i` (see `codec::KeyPrefix`).
    fn prefix(&self, i: usize, v: Version<'_>) -> u64 {
        let mut prefix = KeyPrefix::default();
        for &c in &self.layout.ordered[i].order {
            let column = &self.layout.columns[c as usize];
            let value = (!v.is_null(self.layout, c)).then(|| v.column(self.layout, c));
            prefix.add(column.ty, column.null_bit.is_some(), value);
            if prefix.is_done() {
                break;
            }
        }
        prefix.value()
    }

    /// How `e` lies against a version of a row in index `i`: by their
    /// prefixes where they differ, else through the row.
    fn against(&self, i: usize, target: Version<'_>) -> impl Fn(Entry) -> Ordering {
        let order = &self.layout.ordered[i].order;
        let prefix = self.prefix(i, target);
        move |e| match e.prefix.cmp(&prefix) {
            Ordering::Equal => compare(self.layout, order, self.version(e), target),
            ord => ord,
        }
    }
}

/// Orders two versions of rows by `columns`: NULL before every value.
fn compare(layout: &Layout, columns: &[u16], a: Version<'_>, b: Version<'_>) -> Ordering {
    for &c in columns {
        let ty = layout.columns[c as usize].ty;
        let ord = codec::compare_nullable(ty, a.value(layout, c), b.value(layout, c));
        if ord.is_ne() {
            return ord;
        }
    }
    Ordering::Equal
}

/// Orders a version of a row against a bound's values, on as many of
/// `columns` as the bound has values.
fn compare_bound(layout: &Layout, columns: &[u16], row: Version<'_>, bound: &Bound) -> Ordering {
    for (&c, value) in columns.iter().zip(&bound.values) {
        let ty = layout.columns[c as usize].ty;
        let ord = codec::compare_nullable(ty, row.value(layout, c), value.as_deref());
        if ord.is_ne() {
            return ord;
        }
    }
    Ordering::Equal
}

/// The values of `columns` in a version of a row.
fn key_of(layout: &Layout, columns: &[u16], row: Version<'_>) -> Key {
    (columns.iter())
        .map(|&c| row.value(layout, c).map(<[u8]>::to_vec))
        .collect()
}

/// How an update changes a row's entries in one index.
#[derive(Debug, Clone, Copy)]
struct Move {
    index: usize,
    /// The row had a committed entry in this index before the update...
    had_committed: bool,
    /// ...and the update puts the row back at the committed version's place.
    back_to_committed: bool,
    /// A transaction holds the row, and it was there before.
    held: bool,
}

impl Fragment {
    /// The borrows index work needs at once: the rows to compare, the
    /// trees, and the pages an insert takes.
    fn parts_for_indexes(&mut self) -> (Rows<'_>, &mut [OrderedTree], &mut Vec<Page>) {
        let rows = Rows {
            layout: &self.layout,
            fixed: &self.fixed,
            var: &self.var,
            locks: &self.locks,
            old: &self.old,
        };
        (rows, &mut self.ordered, &mut self.spare)
    }

    pub(super) fn rows(&self) -> Rows<'_> {
        Rows {
            layout: &self.layout,
            fixed: &self.fixed,
            var: &self.var,
            locks: &self.locks,
            old: &self.old,
        }
    }

    /// Takes pages until `spare` holds `pages`; on failure gives them all
    /// back.
    fn reserve(&mut self, pages: usize) -> Result<(), OpError> {
        while self.spare.len() < pages {
            match self.pages.alloc() {
                Ok(page) => self.spare.push(page),
                Err(e) => {
                    self.spare.clear();
                    return Err(crate::storage::StorageError::from(e).into());
                }
            }
        }
        Ok(())
    }

    /// Puts `entry` into index `i` at the place of `target`.
    fn put_entry(&mut self, i: usize, entry: Entry) -> Result<(), OpError> {
        loop {
            let (rows, trees, spare) = self.parts_for_indexes();
            let target = rows.version(entry);
            let entry = entry.with_prefix(rows.prefix(i, target));
            match trees[i].insert(entry, rows.against(i, target), spare) {
                Ok(()) => return Ok(()),
                Err(need) => self.reserve(need)?,
            }
        }
    }

    fn take_entry(&mut self, i: usize, entry: Entry) {
        let (rows, trees, _) = self.parts_for_indexes();
        let target = rows.version(entry);
        let removed = trees[i].remove(entry, rows.against(i, target));
        debug_assert!(removed, "an index entry is where its row says");
    }

    /// Renames entry `from` to `to`, which orders a version of the row with
    /// the same key.
    fn relabel_entry(&mut self, i: usize, from: Entry, to: Entry) {
        let (rows, trees, _) = self.parts_for_indexes();
        let target = rows.version(from);
        let to = to.with_prefix(rows.prefix(i, target));
        let relabelled = trees[i].relabel(from, to, rows.against(i, target));
        debug_assert!(relabelled, "an index entry is where its row says");
    }

    /// Whether index `i` holds row `r`'s entries: it does unless it is being
    /// built and has not come to the row yet.
    fn holds(&self, i: usize, r: RowRef) -> bool {
        self.building[i].is_none_or(|next| r < next)
    }

    /// The first index from `i` on that holds row `r`'s entries. (Index
    /// positions, not an iterator over `self`: the callers change the
    /// trees as they go.)
    fn next_holding(&self, mut i: usize, r: RowRef) -> Option<usize> {
        while i < self.ordered.len() {
            if self.holds(i, r) {
                return Some(i);
            }
            i += 1;
        }
        None
    }

    /// Puts a new row into every ordered index, or into none if a page it
    /// needs cannot be had.
    pub(super) fn index_new(&mut self, r: RowRef) -> Result<(), OpError> {
        let entry = Entry::current(r);
        let mut at = self.next_holding(0, r);
        while let Some(i) = at {
            if let Err(e) = self.put_entry(i, entry) {
                let mut undo = self.next_holding(0, r);
                while let Some(j) = undo.filter(|&j| j < i) {
                    self.take_entry(j, entry);
                    undo = self.next_holding(j + 1, r);
                }
                return Err(e);
            }
            at = self.next_holding(i + 1, r);
        }
        Ok(())
    }

    /// Whether row `r` has a committed entry in index `i`: a transaction
    /// holds it, it was there before, and its key there changed.
    fn has_committed_entry(&self, i: usize, r: RowRef) -> bool {
        let Some(committed) = self.locks.get(&r).and_then(|l| l.committed.as_deref()) else {
            return false;
        };
        let rows = self.rows();
        let order = &self.layout.ordered[i].order;
        let committed = Version::of((committed, rows.var_of(committed)));
        compare(
            &self.layout,
            order,
            committed,
            rows.version(Entry::current(r)),
        )
        .is_ne()
    }

    /// Takes row `r`, which is going, out of every index.
    pub(super) fn unindex(&mut self, r: RowRef) {
        let mut at = self.next_holding(0, r);
        while let Some(i) = at {
            if self.has_committed_entry(i, r) {
                self.take_entry(i, Entry::committed(r));
            }
            self.take_entry(i, Entry::current(r));
            at = self.next_holding(i + 1, r);
        }
    }

    /// A transaction's change to row `r` becomes the committed one: its
    /// committed entries go. Called while the row's lock is still there.
    pub(super) fn index_commit(&mut self, r: RowRef) {
        let mut at = self.next_holding(0, r);
        while let Some(i) = at {
            if self.has_committed_entry(i, r) {
                self.take_entry(i, Entry::committed(r));
            }
            at = self.next_holding(i + 1, r);
        }
    }

    /// Row `r` goes back to its committed version: where a committed entry
    /// stands, the current one goes and the committed one takes its name.
    /// Called while the row still holds the transaction's version.
    pub(super) fn index_abort(&mut self, r: RowRef) {
        let mut at = self.next_holding(0, r);
        while let Some(i) = at {
            if self.has_committed_entry(i, r) {
                self.take_entry(i, Entry::current(r));
                self.relabel_entry(i, Entry::committed(r), Entry::current(r));
            }
            at = self.next_holding(i + 1, r);
        }
    }

    /// Whether an update with this presence may change a key of an ordered
    /// index.
    pub(super) fn touches_indexes(&self, presence: &[u8]) -> bool {
        (self.layout.indexed.iter()).any(|&c| is_present(presence, c))
    }

    /// Updates row `r` with the columns present in `image`, moving its
    /// entries in the indexes whose key changes. Nothing changes if a page
    /// it needs cannot be had.
    pub(super) fn update_indexed(
        &mut self,
        r: RowRef,
        image: &[u8],
        presence: &[u8],
    ) -> Result<(), OpError> {
        let layout = std::sync::Arc::clone(&self.layout);
        let (new_fixed, new_var) = image.split_at(layout.slot_size);
        // The row as it will be, beside the row as it is.
        let mut fixed = self.fixed.slot(r).to_vec();
        layout.apply_fixed(&mut fixed, new_fixed, presence);
        let var_changes = layout.sets_var(presence);
        let mut var = std::mem::take(&mut self.merged);
        let old_var = self.var_of(self.fixed.slot(r));
        if var_changes {
            layout.merge_var(old_var, new_var, presence, &mut var);
        } else {
            var.clear();
            var.extend_from_slice(old_var);
        }
        let result = self.move_row(r, &fixed, &var, var_changes);
        self.merged = var;
        result
    }

    /// Replaces row `r` with the version `(fixed, var)` (its var part written
    /// anew if `var_changes`), moving its index entries.
    fn move_row(
        &mut self,
        r: RowRef,
        fixed: &[u8],
        var: &[u8],
        var_changes: bool,
    ) -> Result<(), OpError> {
        let held = self.locks.contains_key(&r);
        let mut moves = Vec::new();
        let mut need = 0;
        {
            let rows = self.rows();
            let now = rows.version(Entry::current(r));
            let committed = (self.locks.get(&r))
                .and_then(|l| l.committed.as_deref())
                .map(|c| Version::of((c, rows.var_of(c))));
            let new = Version::of((fixed, var));
            for (i, ordered) in self.layout.ordered.iter().enumerate() {
                let order = &ordered.order;
                if ordered.primary
                    || !self.holds(i, r)
                    || compare(&self.layout, order, now, new).is_eq()
                {
                    continue;
                }
                let had_committed =
                    committed.is_some_and(|c| compare(&self.layout, order, c, now).is_ne());
                let back_to_committed =
                    committed.is_some_and(|c| compare(&self.layout, order, c, new).is_eq());
                if !(had_committed && back_to_committed) {
                    need += self.ordered[i].pages_to_insert(&rows.against(i, new));
                }
                moves.push(Move {
                    index: i,
                    had_committed,
                    back_to_committed,
                    held: committed.is_some(),
                });
            }
        }
        self.reserve(need)?;
        let old_ref = (self.layout.n_var > 0).then(|| Fragment::var_ref(self.fixed.slot(r)));
        let new_ref = if var_changes {
            match self.var.insert(&self.pages, var) {
                Ok(v) => Some(v),
                Err(e) => {
                    self.spare.clear();
                    return Err(e.into());
                }
            }
        } else {
            None
        };
        // Nothing can fail from here on.
        self.old.clear();
        self.old.extend_from_slice(self.fixed.slot(r));
        for m in &moves {
            self.relabel_entry(m.index, Entry::current(r), Entry::old(r));
        }
        let slot = self.fixed.slot_mut(r);
        let keep = ROW_HEADER + if old_ref.is_some() { 4 } else { 0 };
        slot[keep..].copy_from_slice(&fixed[keep..]);
        if let Some(new_ref) = new_ref {
            slot[ROW_HEADER..ROW_HEADER + 4].copy_from_slice(&new_ref.to_le_bytes());
        }
        for m in &moves {
            if m.had_committed && m.back_to_committed {
                self.relabel_entry(m.index, Entry::committed(r), Entry::current(r));
            } else {
                self.put_entry(m.index, Entry::current(r))
                    .expect("the pages were had before");
            }
            if m.held && !m.had_committed {
                self.relabel_entry(m.index, Entry::old(r), Entry::committed(r));
            } else {
                self.take_entry(m.index, Entry::old(r));
            }
        }
        if let (Some(old), Some(_)) = (old_ref, new_ref) {
            let committed = (self.locks.get(&r))
                .and_then(|l| l.committed.as_deref())
                .map(Fragment::var_ref);
            if committed != Some(old) {
                self.var.free(old);
            }
        }
        debug_assert!(held || !moves.iter().any(|m| m.held));
        debug_assert!(self.spare.is_empty(), "every page reserved was taken");
        self.spare.clear();
        Ok(())
    }

    /// A step of a scan of index `i` from `from` (the start if `None`) up to
    /// `step.to` (the end if `None`): the rows as the step's reader sees
    /// them, in index order, each as the step's projection images it; at
    /// most `step.limit` of them and about `step.max_bytes` of images.
    pub(crate) fn scan_index(
        &self,
        i: usize,
        from: Option<&Bound>,
        step: &IndexStep,
    ) -> IndexChunk {
        let mut chunk = IndexChunk::default();
        let (rows, out) = (&mut chunk.rows, &mut chunk.out);
        let (layout, limit, max_bytes) = (&*self.layout, step.limit, step.max_bytes);
        let (examined, next) =
            self.walk_index(i, from, step.to.as_ref(), step.reader, |fixed, var| {
                let begin = out.len();
                step.projection.write(layout, fixed, var, out);
                rows.push((begin as u32, (out.len() - begin) as u32));
                rows.len() < limit && out.len() < max_bytes
            });
        chunk.examined = examined;
        chunk.next = next;
        chunk
    }

    /// Calls `row` with the fixed and var part of each row of index `i`
    /// from `from` (the start if `None`) up to `to` (the end if `None`), as
    /// `reader` sees it (see `shown`), in index order, until it answers
    /// false or a step's worth of entries are examined. Answers the entries
    /// examined and where the next step starts (`None`: the range is done).
    pub(crate) fn walk_index(
        &self,
        i: usize,
        from: Option<&Bound>,
        to: Option<&Bound>,
        reader: TxnId,
        mut row: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> (usize, Option<Bound>) {
        let rows = self.rows();
        let layout = &*self.layout;
        let order = &layout.ordered[i].order;
        let start = self.start_of(i, from);
        let past_end = |row: Version<'_>| match to {
            None => false,
            Some(b) => match compare_bound(layout, order, row, b) {
                Ordering::Equal => !b.inclusive,
                ord => ord.is_gt(),
            },
        };
        let (mut examined, mut last, mut more) = (0, None, true);
        for e in self.ordered[i].from(start) {
            if examined == INDEX_SCAN_STEP || !more {
                let next = last.map(|row| Bound {
                    values: key_of(layout, order, row),
                    inclusive: false,
                });
                return (examined, next);
            }
            let at = rows.version(e);
            if past_end(at) {
                return (examined, None);
            }
            examined += 1;
            last = Some(at);
            if let Some((fixed, var)) = self.shown(i, e, reader) {
                more = row(fixed, var);
            }
        }
        (examined, None)
    }

    /// Orders the entries of index `i` against where a scan from `from`
    /// starts (the start if `None`): `Less` for those before it.
    fn start_of<'a>(
        &'a self,
        i: usize,
        from: Option<&'a Bound>,
    ) -> impl Fn(Entry) -> Ordering + 'a {
        let rows = self.rows();
        let layout = &*self.layout;
        let order = &layout.ordered[i].order;
        let from_prefix = from.map(|b| {
            let mut prefix = KeyPrefix::default();
            for (&c, v) in order.iter().zip(&b.values) {
                let column = &layout.columns[c as usize];
                prefix.add(column.ty, column.null_bit.is_some(), v.as_deref());
            }
            prefix
        });
        move |e: Entry| match (from, from_prefix.map(|p| p.bounds(e.prefix))) {
            (None, _) => Ordering::Greater,
            (Some(_), Some(ord @ (Ordering::Less | Ordering::Greater))) => ord,
            (Some(b), _) => match compare_bound(layout, order, rows.version(e), b) {
                Ordering::Equal if b.inclusive => Ordering::Greater,
                Ordering::Equal => Ordering::Less,
                ord => ord,
            },
        }
    }

    /// About what share of the entries of index `i` lie from `from` (the
    /// start if `None`) up to `to` (the end if `None`): see
    /// `OrderedTree::share_before`.
    pub(crate) fn range_share(&self, i: usize, from: Option<&Bound>, to: Option<&Bound>) -> f64 {
        let tree = &self.ordered[i];
        let begin = tree.share_before(self.start_of(i, from));
        let end = match to {
            None => 1.0,
            Some(b) => {
                let rows = self.rows();
                let layout = &*self.layout;
                let order = &layout.ordered[i].order;
                tree.share_before(|e| match compare_bound(layout, order, rows.version(e), b) {
                    Ordering::Equal if b.inclusive => Ordering::Less,
                    Ordering::Equal => Ordering::Greater,
                    ord => ord,
                })
            }
        };
        (end - begin).max(0.0)
    }

    /// The version of its row `reader` sees at entry `e` of index `i`, if
    /// this entry orders it: a row `reader` holds as it left it (at its
    /// current entry), any other as committed (at its committed entry, if
    /// it has one).
    fn shown(&self, i: usize, e: Entry, reader: TxnId) -> Option<(&[u8], &[u8])> {
        let r = e.row();
        let held = Self::header(self.fixed.slot(r)) & LOCKED != 0;
        let mine = held && reader != AUTOCOMMIT && self.locks[&r].owner == reader;
        if e.is_committed() {
            return if mine {
                None
            } else {
                self.visible(AUTOCOMMIT, r)
            };
        }
        if held && !mine && self.has_committed_entry(i, r) {
            return None;
        }
        self.visible(reader, r)
    }

    /// Rebuilds every ordered index from the rows: after an image is read.
    pub(super) fn rebuild_indexes(&mut self) -> Result<(), OpError> {
        let mut at = 0;
        while let Some(r) = self.fixed.next_live(at) {
            self.index_new(r)?;
            at = r + 1;
        }
        Ok(())
    }

    /// Checks every ordered index against the rows; answers their entries.
    pub(super) fn audit_indexes(&self) -> u64 {
        let rows = self.rows();
        let mut entries = 0;
        for (i, tree) in self.ordered.iter().enumerate() {
            let order = &self.layout.ordered[i].order;
            let counted = tree.audit(|a, b| {
                for e in [a, b] {
                    assert_eq!(
                        e.prefix,
                        rows.prefix(i, rows.version(e)),
                        "an entry's prefix"
                    );
                }
                compare(&self.layout, order, rows.version(a), rows.version(b))
            });
            let held = |r: &RowRef| self.holds(i, *r);
            let committed = (self.locks.keys())
                .filter(|&&r| held(&r) && self.has_committed_entry(i, r))
                .count() as u64;
            let mut rows = 0;
            let mut at = 0;
            while let Some(r) = self.fixed.next_live(at) {
                rows += u64::from(held(&r));
                at = r + 1;
            }
            assert_eq!(
                counted,
                rows + committed,
                "index {} holds every row once, and the committed versions that moved",
                self.layout.ordered[i].name
            );
            entries += counted;
        }
        entries
    }
}

impl Fragment {
    /// Takes `layout`, which has one ordered index more than the fragment's,
    /// last: the index starts empty, to be built by `build_index`.
    pub(crate) fn add_index(&mut self, layout: Arc<Layout>) {
        assert_eq!(layout.ordered.len(), self.ordered.len() + 1);
        debug_assert!(
            (self.layout.ordered.iter().zip(&layout.ordered)).all(|(a, b)| a.name == b.name)
        );
        self.layout = layout;
        self.ordered.push(OrderedTree::new());
        self.building.push(Some(0));
    }

    /// Puts the rows from where the build of index `name` stands into it,
    /// `rows` of them at most: whether the index is now built. Rows written
    /// meanwhile go into it as they change if the build has passed them,
    /// and are met by the build if not. Nothing of a step that needs a page
    /// it cannot have stays.
    pub(crate) fn build_index(&mut self, name: &str, rows: usize) -> Result<bool, OpError> {
        let Some(i) = self.layout.ordered_index(name) else {
            return Ok(true);
        };
        let Some(mut at) = self.building[i] else {
            return Ok(true);
        };
        for _ in 0..rows {
            let Some(r) = self.fixed.next_live(at) else {
                self.building[i] = None;
                return Ok(true);
            };
            let had_committed = self.has_committed_entry(i, r);
            self.put_entry(i, Entry::current(r))?;
            if had_committed && let Err(e) = self.put_entry(i, Entry::committed(r)) {
                self.take_entry(i, Entry::current(r));
                return Err(e);
            }
            at = r + 1;
            self.building[i] = Some(at);
        }
        Ok(false)
    }

    /// Takes `layout`, which is the fragment's without ordered index `name`,
    /// and gives that index's pages back.
    pub(crate) fn drop_index(&mut self, name: &str, layout: Arc<Layout>) {
        if let Some(i) = self.layout.ordered_index(name) {
            self.ordered.remove(i);
            self.building.remove(i);
        }
        assert_eq!(layout.ordered.len(), self.ordered.len());
        self.layout = layout;
    }
}
