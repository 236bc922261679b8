//! A table fragment: its rows' fixed and var parts and its primary-key index,
//! all in pages of its own. One LDM worker owns it; nothing here locks.

use std::sync::Arc;

use super::codec::{self, is_present};
use super::fixed::{FixedPart, RowRef};
use super::index::{self, HashIndex};
use super::layout::{self, LIVE, Layout, Place, ROW_HEADER};
use super::page::{DataMemory, PAGE_SIZE};
use super::var::VarPart;
use super::{CmpOp, OpError, Predicate, StorageError};

/// Live rows examined per scan call at most, so one scan never holds its
/// worker for long.
const SCAN_STEP: usize = 4096;

/// Memory held and used by one fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct FragmentMemory {
    pub(crate) pages: u64,
    /// Bytes holding live rows (fixed slots, var entries with their directory
    /// entries) and live index entries.
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

pub(crate) struct Fragment {
    layout: Arc<Layout>,
    pool: Arc<DataMemory>,
    fixed: FixedPart,
    var: VarPart,
    index: HashIndex,
    /// Where an update builds a row's new var part.
    merged: Vec<u8>,
}

impl Fragment {
    pub(crate) fn new(layout: Arc<Layout>, pool: Arc<DataMemory>) -> Fragment {
        Fragment {
            fixed: FixedPart::new(layout.slot_size),
            var: VarPart::new(),
            index: HashIndex::new(),
            merged: Vec::new(),
            layout,
            pool,
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
        if self.layout.n_var == 0 {
            return;
        }
        if let Some(r) = self.index.find(tag, |_| true) {
            self.var.prefetch(Self::var_ref(self.fixed.slot(r)));
        }
    }

    #[inline]
    fn var_ref(slot: &[u8]) -> u32 {
        u32::from_le_bytes(
            slot[ROW_HEADER..ROW_HEADER + 4]
                .try_into()
                .expect("var ref"),
        )
    }

    /// The var part of the row in `slot`, empty if the table has none.
    #[inline]
    fn var_of(&self, slot: &[u8]) -> &[u8] {
        if self.layout.n_var == 0 {
            &[]
        } else {
            self.var.get(Self::var_ref(slot))
        }
    }

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

    // Every operation takes the key with its tag: the upper half of the key's
    // hash under the engine's secret seed (see `batch::index_tag`).

    /// Appends the row image of the row with this key to `out`.
    #[inline]
    pub(crate) fn read(&self, tag: u32, key: &[u8], out: &mut Vec<u8>) -> bool {
        let Some(r) = self.find(tag, key) else {
            return false;
        };
        let slot = self.fixed.slot(r);
        out.extend_from_slice(slot);
        out.extend_from_slice(self.var_of(slot));
        true
    }

    /// Inserts a row image; the key must be new.
    pub(crate) fn insert(&mut self, tag: u32, key: &[u8], image: &[u8]) -> Result<(), OpError> {
        if self.find(tag, key).is_some() {
            return Err(OpError::DuplicateKey);
        }
        self.insert_new(tag, image)
    }

    fn insert_new(&mut self, tag: u32, image: &[u8]) -> Result<(), OpError> {
        let (fixed, var) = image.split_at(self.layout.slot_size);
        let r = self.fixed.alloc(&self.pool)?;
        let var_ref = if self.layout.n_var > 0 {
            match self.var.insert(&self.pool, var) {
                Ok(v) => v,
                Err(e) => {
                    self.fixed.free(r);
                    return Err(e.into());
                }
            }
        } else {
            0
        };
        if let Err(e) = self.index.insert(&self.pool, tag, r) {
            if self.layout.n_var > 0 {
                self.var.free(var_ref);
            }
            self.fixed.free(r);
            return Err(e.into());
        }
        let slot = self.fixed.slot_mut(r);
        slot.copy_from_slice(fixed);
        slot[..ROW_HEADER].copy_from_slice(&LIVE.to_le_bytes());
        if self.layout.n_var > 0 {
            slot[ROW_HEADER..ROW_HEADER + 4].copy_from_slice(&var_ref.to_le_bytes());
        }
        Ok(())
    }

    /// Sets the columns present in a row image on the existing row with this key.
    pub(crate) fn update(
        &mut self,
        tag: u32,
        key: &[u8],
        image: &[u8],
        presence: &[u8],
    ) -> Result<(), OpError> {
        let r = self.find(tag, key).ok_or(OpError::NotFound)?;
        self.update_row(r, image, presence)
    }

    /// Updates the row with this key, or inserts the image if there is none.
    /// Returns whether it inserted.
    pub(crate) fn write(
        &mut self,
        tag: u32,
        key: &[u8],
        image: &[u8],
        presence: &[u8],
    ) -> Result<bool, OpError> {
        match self.find(tag, key) {
            Some(r) => self.update_row(r, image, presence).map(|()| false),
            None => {
                if let Some(&c) = self
                    .layout
                    .required
                    .iter()
                    .find(|&&c| !is_present(presence, c))
                {
                    return Err(OpError::MissingColumn(c));
                }
                self.insert_new(tag, image).map(|()| true)
            }
        }
    }

    fn update_row(&mut self, r: RowRef, image: &[u8], presence: &[u8]) -> Result<(), OpError> {
        let layout = Arc::clone(&self.layout);
        let (new_fixed, new_var) = image.split_at(layout.slot_size);
        // The var part first: it is the only step that can fail.
        let var_changes = layout.columns.iter().enumerate().any(|(c, col)| {
            matches!(col.place, Place::Var { .. }) && is_present(presence, c as u16)
        });
        if var_changes {
            let old_ref = Self::var_ref(self.fixed.slot(r));
            let old_var = self.var.get(old_ref);
            self.merged.clear();
            self.merged.resize(layout.var_header(), 0);
            let mut end = 0usize;
            for (c, col) in layout.columns.iter().enumerate() {
                let Place::Var { index } = col.place else {
                    continue;
                };
                let from = if is_present(presence, c as u16) {
                    new_var
                } else {
                    old_var
                };
                let bytes = layout::var_column(from, layout.n_var, index as usize);
                self.merged.extend_from_slice(bytes);
                end += bytes.len();
                self.merged[2 * index as usize..][..2].copy_from_slice(&(end as u16).to_le_bytes());
            }
            let new_ref = self.var.replace(&self.pool, old_ref, &self.merged)?;
            self.fixed.slot_mut(r)[ROW_HEADER..ROW_HEADER + 4]
                .copy_from_slice(&new_ref.to_le_bytes());
        }
        let slot = self.fixed.slot_mut(r);
        for (c, col) in layout.columns.iter().enumerate() {
            let c = c as u16;
            if !is_present(presence, c) || layout.key.contains(&c) {
                continue;
            }
            layout.set_null(slot, c, layout.is_null(new_fixed, c));
            if let Place::Fixed { offset, width } = col.place {
                let range = offset as usize..(offset + width) as usize;
                slot[range.clone()].copy_from_slice(&new_fixed[range]);
            }
        }
        Ok(())
    }

    /// Deletes the row with this key.
    pub(crate) fn delete(&mut self, tag: u32, key: &[u8]) -> Result<(), OpError> {
        let r = self.find(tag, key).ok_or(OpError::NotFound)?;
        self.index.remove(tag, r);
        if self.layout.n_var > 0 {
            self.var.free(Self::var_ref(self.fixed.slot(r)));
        }
        self.fixed.free(r);
        Ok(())
    }

    /// Appends to `out` the images of live rows from position `from` on that
    /// pass every predicate, recording each row's start and length in `rows`,
    /// until `limit` rows are found or a step's worth are examined. Returns
    /// where to go on, or `None` at the end of the fragment.
    pub(crate) fn scan(
        &self,
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
            let fixed = self.fixed.slot(r);
            let var = self.var_of(fixed);
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
        FragmentMemory {
            pages: (self.fixed.pages_held() + self.var.pages_held() + self.index.pages_held())
                as u64,
            live_bytes: rows * self.fixed.slot_size() as u64
                + self.var.live_bytes()
                + self.index.entries() * index::ENTRY as u64,
            rows,
        }
    }

    /// Recounts everything from the pages themselves and checks it against
    /// the counters `memory` reports. For tests of the accounting.
    pub(crate) fn audit(&self) -> FragmentMemory {
        let rows = self.fixed.audit();
        let var_bytes = self.var.audit();
        let entries = self.index.audit();
        assert_eq!(rows, entries, "every row has one index entry");
        let audited = FragmentMemory {
            pages: (self.fixed.pages_held() + self.var.pages_held() + self.index.pages_held())
                as u64,
            live_bytes: rows * self.fixed.slot_size() as u64
                + var_bytes
                + entries * index::ENTRY as u64,
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
            StorageError::FragmentFull => OpError::FragmentFull,
        }
    }
}
