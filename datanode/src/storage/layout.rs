//! Where each column of a table lives in a stored row.
//!
//! A row has two parts, as in RonDB:
//!
//! - the **fixed part**, one slot of `slot_size` bytes in a fixed-part page:
//!   ```text
//!   [header u32][var ref u32, if any var column][null bitmap][fixed columns...]
//!   ```
//!   The header's top bit marks a live row; a free slot keeps the next free
//!   slot's number there instead.
//! - the **variable part**, one entry in a var-part page, present when the
//!   table has `VARCHAR`/`VARBINARY` columns:
//!   ```text
//!   [end offset u16 per var column][column bytes...]
//!   ```
//!   Column `i` spans `end[i-1]..end[i]` of the bytes after the offsets.
//!
//! All integers are little-endian. A *row image* — how rows travel between
//! the edge and the LDM workers — is the fixed part followed by the var part.

use rustc_hash::FxHashMap;
use shoal_wire::schema::{ColumnType, PRIMARY_INDEX, PrimaryKeyIndex, TableDef};

use crate::types::value::Value;

/// Bytes of the row header at the start of every fixed-part slot.
pub(crate) const ROW_HEADER: usize = 4;
/// Set in the header of a live row.
pub(crate) const LIVE: u32 = 1 << 31;
/// Set in the header of a row a transaction holds (see `fragment::Lock`).
pub(crate) const LOCKED: u32 = 1 << 30;
/// Smallest slot, so that a page holds at most 4096 slots and a slot number
/// fits in 12 bits of a row reference.
pub(crate) const MIN_SLOT: usize = 8;
/// Bytes of the reference from the fixed part to the var part.
const VAR_REF: usize = 4;

/// Where one column is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// `width` bytes at `offset` in the fixed part.
    Fixed { offset: u16, width: u16 },
    /// The `index`th column of the var part.
    Var { index: u16 },
}

#[derive(Debug, Clone)]
pub(crate) struct ColumnLayout {
    pub(crate) ty: ColumnType,
    pub(crate) place: Place,
    /// Bit in the null bitmap, for nullable columns.
    pub(crate) null_bit: Option<u16>,
}

/// An ordered index as the fragment keeps it.
#[derive(Debug, Clone)]
pub(crate) struct OrderedLayout {
    pub(crate) name: String,
    /// What orders its entries: the index's columns, then the primary-key
    /// columns not among them, so that no two rows tie.
    pub(crate) order: Vec<u16>,
    /// How many of `order` are the index's own columns: what a bound names.
    pub(crate) columns: usize,
    /// The primary key's index, whose keys an update never changes.
    pub(crate) primary: bool,
    /// No two rows may have the same values of its own columns (none of
    /// them NULL): the coordinator checks every write (`tc::unique`).
    pub(crate) unique: bool,
}

/// The compiled layout of one table's rows.
#[derive(Debug)]
pub(crate) struct Layout {
    pub(crate) def: TableDef,
    pub(crate) columns: Vec<ColumnLayout>,
    by_name: FxHashMap<String, u16>,
    /// Bytes of a fixed-part slot.
    pub(crate) slot_size: usize,
    /// Var-part columns; 0 means rows have no var part.
    pub(crate) n_var: usize,
    /// Bytes of the fixed-size columns' values in the fixed part.
    fixed_data: usize,
    pub(crate) null_offset: usize,
    /// Primary-key columns in key order.
    pub(crate) key: Vec<u16>,
    /// Whether a key column lives in the var part, so that comparing keys
    /// needs the var part.
    pub(crate) key_has_var: bool,
    /// Columns that are `NOT NULL`, not part of the key and without a
    /// default: an insert gives them a value.
    pub(crate) required: Vec<u16>,
    /// Each column's default, what an inserted row that gives the column
    /// no value stores (`None`: it has none).
    pub(crate) defaults: Vec<Option<Value>>,
    /// Columns whose value is the time of the write (`DEFAULT
    /// CURRENT_TIMESTAMP`, perhaps `ON UPDATE` too): their `defaults` are
    /// `None`, the coordinator fills them in for each write.
    pub(crate) stamped: Vec<Stamped>,
    /// Ordered indexes: the primary key's first (unless the key is hashed
    /// only), then the table's own.
    pub(crate) ordered: Vec<OrderedLayout>,
    /// Columns any ordered index orders by, apart from the primary key's.
    pub(crate) indexed: Vec<u16>,
}

/// A column whose value is the time of the write.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamped {
    pub(crate) column: u16,
    /// Whether an update that does not set it sets it too (`ON UPDATE
    /// CURRENT_TIMESTAMP`), not only an insert.
    pub(crate) on_update: bool,
}

impl Layout {
    /// Lays out a validated table definition.
    pub(crate) fn new(def: TableDef) -> Layout {
        let nullable = def.columns.iter().filter(|c| c.nullable).count();
        let has_var = def.columns.iter().any(|c| c.column_type.is_variable());
        let null_offset = ROW_HEADER + if has_var { VAR_REF } else { 0 };
        let mut offset = null_offset + nullable.div_ceil(8);
        let fixed_start = offset;
        let (mut n_var, mut n_null) = (0u16, 0u16);
        let mut columns = Vec::with_capacity(def.columns.len());
        for c in &def.columns {
            let place = match c.column_type.fixed_size() {
                Some(width) => {
                    let place = Place::Fixed {
                        offset: offset as u16,
                        width: width as u16,
                    };
                    offset += width;
                    place
                }
                None => {
                    n_var += 1;
                    Place::Var { index: n_var - 1 }
                }
            };
            let null_bit = c.nullable.then(|| {
                n_null += 1;
                n_null - 1
            });
            columns.push(ColumnLayout {
                ty: c.column_type,
                place,
                null_bit,
            });
        }
        let index_of = |name: &str| def.column_index(name).expect("validated key column") as u16;
        let key: Vec<u16> = def
            .primary_key
            .iter()
            .map(|k| index_of(k.as_str()))
            .collect();
        let required = (0..def.columns.len() as u16)
            .filter(|i| {
                let c = &def.columns[*i as usize];
                !c.nullable && c.default.is_none() && !key.contains(i)
            })
            .collect();
        // Checked when the table was made (`codec::check_defaults`).
        let defaults = (def.columns.iter())
            .map(|c| {
                let json = c.default.as_ref().filter(|_| !c.defaults_to_now())?;
                Value::from_json(c.column_type, json).ok()
            })
            .collect();
        let stamped = (def.columns.iter().enumerate())
            .filter(|(_, c)| c.defaults_to_now())
            .map(|(i, c)| Stamped {
                column: i as u16,
                on_update: c.on_update.is_some(),
            })
            .collect();
        let by_name = def
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.to_string(), i as u16))
            .collect();
        let key_has_var = key
            .iter()
            .any(|&c| matches!(columns[c as usize].place, Place::Var { .. }));
        let primary = (def.primary_key_index == PrimaryKeyIndex::Ordered).then(|| OrderedLayout {
            name: PRIMARY_INDEX.to_owned(),
            order: key.clone(),
            columns: key.len(),
            primary: true,
            unique: false,
        });
        let own = def.indexes.iter().map(|index| {
            let mut order: Vec<u16> = (index.columns.iter())
                .map(|c| index_of(c.as_str()))
                .collect();
            let columns = order.len();
            order.extend(
                key.iter()
                    .filter(|k| !order.contains(k))
                    .collect::<Vec<_>>(),
            );
            OrderedLayout {
                name: index.name.to_string(),
                order,
                columns,
                primary: false,
                unique: index.unique,
            }
        });
        let ordered: Vec<OrderedLayout> = primary.into_iter().chain(own).collect();
        let mut indexed: Vec<u16> = (ordered.iter())
            .flat_map(|o| o.order[..o.columns].iter().copied())
            .filter(|c| !key.contains(c))
            .collect();
        indexed.sort_unstable();
        indexed.dedup();
        Layout {
            ordered,
            indexed,
            key_has_var,
            slot_size: offset.max(MIN_SLOT),
            fixed_data: offset - fixed_start,
            n_var: n_var as usize,
            null_offset,
            key,
            required,
            defaults,
            stamped,
            columns,
            by_name,
            def,
        }
    }

    /// The position of an ordered index by its exact name.
    pub(crate) fn ordered_index(&self, name: &str) -> Option<usize> {
        self.ordered.iter().position(|o| o.name == name)
    }

    /// The position of a column by its exact name.
    pub(crate) fn column_index(&self, name: &str) -> Option<u16> {
        self.by_name.get(name).copied()
    }

    pub(crate) fn name(&self, column: u16) -> &str {
        self.def.columns[column as usize].name.as_str()
    }

    /// Bytes before the column data in a var part.
    pub(crate) fn var_header(&self) -> usize {
        2 * self.n_var
    }

    /// Bytes of the column values in a row image of `image_len` bytes:
    /// what a write is charged for. The row's header, null bitmap and
    /// var-part offsets are the engine's, not the caller's, and are not
    /// counted.
    pub(crate) fn data_bytes(&self, image_len: usize) -> usize {
        let var = image_len.saturating_sub(self.slot_size + self.var_header());
        self.fixed_data + var
    }

    pub(crate) fn is_null(&self, fixed: &[u8], column: u16) -> bool {
        match self.columns[column as usize].null_bit {
            Some(bit) => fixed[self.null_offset + bit as usize / 8] & (1 << (bit % 8)) != 0,
            None => false,
        }
    }

    pub(crate) fn set_null(&self, fixed: &mut [u8], column: u16, null: bool) {
        if let Some(bit) = self.columns[column as usize].null_bit {
            let byte = &mut fixed[self.null_offset + bit as usize / 8];
            if null {
                *byte |= 1 << (bit % 8);
            } else {
                *byte &= !(1 << (bit % 8));
            }
        }
    }

    /// The stored bytes of a column in a row, given its fixed and var parts.
    pub(crate) fn column_bytes<'a>(&self, fixed: &'a [u8], var: &'a [u8], column: u16) -> &'a [u8] {
        match self.columns[column as usize].place {
            Place::Fixed { offset, width } => &fixed[offset as usize..][..width as usize],
            Place::Var { index } => var_column(var, self.n_var, index as usize),
        }
    }

    /// Whether an update with this presence bitmap sets a var-part column.
    pub(crate) fn sets_var(&self, presence: &[u8]) -> bool {
        (self.columns.iter().enumerate()).any(|(c, col)| {
            matches!(col.place, Place::Var { .. }) && super::codec::is_present(presence, c as u16)
        })
    }

    /// Sets on fixed part `slot` the columns present in `presence` (their
    /// null bits, and the fixed-size ones' values) from fixed part `new`;
    /// key columns never change.
    pub(crate) fn apply_fixed(&self, slot: &mut [u8], new: &[u8], presence: &[u8]) {
        for (c, col) in self.columns.iter().enumerate() {
            let c = c as u16;
            if !super::codec::is_present(presence, c) || self.key.contains(&c) {
                continue;
            }
            self.set_null(slot, c, self.is_null(new, c));
            if let Place::Fixed { offset, width } = col.place {
                let range = offset as usize..(offset + width) as usize;
                slot[range.clone()].copy_from_slice(&new[range]);
            }
        }
    }

    /// Builds in `out` the var part of a row whose columns present in
    /// `presence` are those of var part `new`, the others those of `old`.
    pub(crate) fn merge_var(&self, old: &[u8], new: &[u8], presence: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.resize(self.var_header(), 0);
        let mut end = 0usize;
        for (c, col) in self.columns.iter().enumerate() {
            let Place::Var { index } = col.place else {
                continue;
            };
            let from = if super::codec::is_present(presence, c as u16) {
                new
            } else {
                old
            };
            let bytes = var_column(from, self.n_var, index as usize);
            out.extend_from_slice(bytes);
            end += bytes.len();
            out[2 * index as usize..][..2].copy_from_slice(&(end as u16).to_le_bytes());
        }
    }

    /// Whether `image` is a well-formed row image of this layout: a fixed
    /// part, then a var part whose end offsets rise and end at its end.
    pub(crate) fn is_image(&self, image: &[u8]) -> bool {
        let Some(var) = image.get(self.slot_size..) else {
            return false;
        };
        if self.n_var == 0 {
            return var.is_empty();
        }
        if var.len() < self.var_header() {
            return false;
        }
        let ends =
            (0..self.n_var).map(|i| u16::from_le_bytes([var[2 * i], var[2 * i + 1]]) as usize);
        let mut last = 0;
        for end in ends {
            if end < last {
                return false;
            }
            last = end;
        }
        self.var_header() + last == var.len()
    }

    /// Appends the encoded key (see `codec::encode_key`) of a stored row.
    pub(crate) fn key_of(&self, fixed: &[u8], var: &[u8], out: &mut Vec<u8>) {
        for &c in &self.key {
            self.push_key_column(c, self.column_bytes(fixed, var, c), out);
        }
    }

    /// Appends key column `c`'s stored bytes as an encoded key holds them:
    /// a fixed column as stored, a var column after its u16 length.
    pub(crate) fn push_key_column(&self, c: u16, bytes: &[u8], out: &mut Vec<u8>) {
        if let Place::Var { .. } = self.columns[c as usize].place {
            out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        }
        out.extend_from_slice(bytes);
    }

    /// Compares the key columns of a stored row with an encoded key (see
    /// `codec::encode_key`): fixed columns as stored, var columns as a u16
    /// length and the bytes.
    #[inline]
    pub(crate) fn key_matches(&self, fixed: &[u8], var: &[u8], mut key: &[u8]) -> bool {
        for &c in &self.key {
            match self.columns[c as usize].place {
                Place::Fixed { offset, width } => {
                    let (want, rest) = key.split_at(width as usize);
                    if &fixed[offset as usize..][..width as usize] != want {
                        return false;
                    }
                    key = rest;
                }
                Place::Var { index } => {
                    let len = u16::from_le_bytes([key[0], key[1]]) as usize;
                    let (want, rest) = key[2..].split_at(len);
                    if var_column(var, self.n_var, index as usize) != want {
                        return false;
                    }
                    key = rest;
                }
            }
        }
        true
    }
}

/// Reads the `i`th end offset of a var part.
#[inline]
fn var_end(var: &[u8], i: usize) -> usize {
    u16::from_le_bytes([var[2 * i], var[2 * i + 1]]) as usize
}

/// The bytes of var column `index` in a var part with `n_var` columns.
#[inline]
pub(crate) fn var_column(var: &[u8], n_var: usize, index: usize) -> &[u8] {
    let start = if index == 0 {
        0
    } else {
        var_end(var, index - 1)
    };
    let end = var_end(var, index);
    &var[2 * n_var + start..2 * n_var + end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(json: &str) -> TableDef {
        let def: TableDef = serde_json::from_str(json).unwrap();
        def.validate().unwrap();
        def
    }

    #[test]
    fn fixed_columns_follow_header_var_ref_and_null_bitmap() {
        let layout = Layout::new(def(r#"{"name":"t","columns":[
                {"name":"id","type":"INT"},
                {"name":"name","type":"VARCHAR(10)","nullable":true},
                {"name":"age","type":"TINYINT UNSIGNED","nullable":true},
                {"name":"score","type":"DOUBLE"}],
              "primary_key":["id"]}"#));
        assert_eq!(layout.null_offset, 8);
        // header 4 + var ref 4 + 1 null byte = 9
        assert_eq!(
            layout.columns[0].place,
            Place::Fixed {
                offset: 9,
                width: 4
            }
        );
        assert_eq!(layout.columns[1].place, Place::Var { index: 0 });
        assert_eq!(
            layout.columns[2].place,
            Place::Fixed {
                offset: 13,
                width: 1
            }
        );
        assert_eq!(
            layout.columns[3].place,
            Place::Fixed {
                offset: 14,
                width: 8
            }
        );
        assert_eq!(layout.slot_size, 22);
        assert_eq!(layout.n_var, 1);
        assert_eq!(layout.key, vec![0]);
        assert_eq!(layout.required, vec![3]);
        assert_eq!(layout.columns[1].null_bit, Some(0));
        assert_eq!(layout.columns[2].null_bit, Some(1));
    }

    #[test]
    fn tiny_rows_take_the_smallest_slot() {
        let layout = Layout::new(def(
            r#"{"name":"t","columns":[{"name":"id","type":"TINYINT"}],"primary_key":["id"]}"#,
        ));
        assert_eq!(layout.slot_size, MIN_SLOT);
        assert_eq!(layout.n_var, 0);
    }
}
