//! Rows as a scan of an ordered index answers them: only the columns its
//! reader needs, the index's first.
//!
//! A scan step copies each row it finds into one buffer that goes to the
//! coordinator. A whole row holds every fixed-size column at full width — a
//! utf8mb4 `CHAR(120)` is 480 bytes, mostly padding — so a step copies only
//! the columns of its projection, each as
//!
//! ```text
//! u32 length, little-endian (u32::MAX: NULL) | the column's stored bytes
//! ```
//!
//! in the projection's order: the index's columns first, in the index's
//! order and exactly as stored, since the coordinator merges fragments by
//! them; then the others by number, a `CHAR`'s padding trimmed (decoding
//! trims it anyway).

use std::cmp::Ordering;

use shoal_wire::schema::ColumnType;

use super::codec;
use super::layout::Layout;
use crate::types::value::Value;

/// The length that marks a NULL.
const NULL: u32 = u32::MAX;

/// Which columns of each row a scan answers, and in what order.
#[derive(Debug)]
pub(crate) struct Projection {
    columns: Box<[u16]>,
    /// The first `keys` of `columns` are the index's, in its order.
    keys: usize,
}

impl Projection {
    /// The projection of a scan of the index ordered by `order` that reads
    /// `reads` of each row (every column if `None`).
    pub(crate) fn new(layout: &Layout, order: &[u16], reads: Option<&[u16]>) -> Projection {
        let mut others: Vec<u16> = match reads {
            Some(reads) => reads.to_vec(),
            None => (0..layout.columns.len() as u16).collect(),
        };
        others.retain(|c| usize::from(*c) < layout.columns.len() && !order.contains(c));
        others.sort_unstable();
        others.dedup();
        Projection {
            columns: order.iter().copied().chain(others).collect(),
            keys: order.len(),
        }
    }

    /// Appends the projected image of the row with parts `fixed` and `var`.
    pub(crate) fn write(&self, layout: &Layout, fixed: &[u8], var: &[u8], out: &mut Vec<u8>) {
        for (at, &c) in self.columns.iter().enumerate() {
            if layout.is_null(fixed, c) {
                out.extend_from_slice(&NULL.to_le_bytes());
                continue;
            }
            let mut b = layout.column_bytes(fixed, var, c);
            if at >= self.keys && matches!(layout.columns[usize::from(c)].ty, ColumnType::Char(_)) {
                b = codec::trim_padding(b);
            }
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(b);
        }
    }

    /// Orders two projected images as the index orders their rows: NULL
    /// before every value.
    pub(crate) fn compare(&self, layout: &Layout, a: &[u8], b: &[u8]) -> Ordering {
        let keys = &self.columns[..self.keys];
        for ((&c, a), b) in keys.iter().zip(fields(a)).zip(fields(b)) {
            let ord = codec::compare_nullable(layout.columns[usize::from(c)].ty, a, b);
            if ord.is_ne() {
                return ord;
            }
        }
        Ordering::Equal
    }

    /// Appends the encoded primary key (see `codec::encode_key`) of a
    /// projected image's row: every index orders by the key's columns
    /// last, so a projection holds them as stored.
    pub(crate) fn key_of(&self, layout: &Layout, image: &[u8], out: &mut Vec<u8>) {
        let fields: Vec<Option<&[u8]>> = fields(image).collect();
        for &c in &layout.key {
            let at = (self.columns.iter().position(|&p| p == c))
                .expect("a projection holds the primary key's columns");
            let b = fields[at].expect("a primary key's column is never NULL");
            layout.push_key_column(c, b, out);
        }
    }

    /// The values of a projected image's row, NULL for the columns it
    /// does not hold.
    pub(crate) fn decode(&self, layout: &Layout, image: &[u8]) -> Vec<Value> {
        let mut values = vec![Value::Null; layout.columns.len()];
        for (&c, field) in self.columns.iter().zip(fields(image)) {
            if let Some(b) = field {
                values[usize::from(c)] = codec::value_of(layout.columns[usize::from(c)].ty, b);
            }
        }
        values
    }
}

/// The columns of a projected image in turn: each one's bytes, `None` for
/// NULL.
fn fields(image: &[u8]) -> impl Iterator<Item = Option<&[u8]>> {
    let mut rest = image;
    std::iter::from_fn(move || {
        let (len, after) = rest.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len);
        if len == NULL {
            rest = after;
            return Some(None);
        }
        let (b, after) = after.split_at(len as usize);
        rest = after;
        Some(Some(b))
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use shoal_wire::schema::TableDef;

    use super::*;
    use crate::storage::codec::encode_row;

    /// A table with a key of a CHAR and an INT, an index on a nullable
    /// CHAR, and columns of every place: fixed, var, nullable.
    fn layout() -> Layout {
        let def: TableDef = serde_json::from_str(
            r#"{"name":"t","columns":[
                {"name":"k1","type":"CHAR(3)"},
                {"name":"k2","type":"INT"},
                {"name":"tag","type":"CHAR(4)","nullable":true},
                {"name":"note","type":"VARCHAR(20)","nullable":true},
                {"name":"n","type":"BIGINT UNSIGNED","nullable":true},
                {"name":"pad","type":"CHAR(10)"}],
              "primary_key":["k1","k2"],
              "indexes":[{"name":"by_tag","columns":["tag"]}]}"#,
        )
        .unwrap();
        def.validate().unwrap();
        Layout::new(def)
    }

    /// Rows of `layout()`: text with spaces, often trailing, and NULLs.
    fn rows() -> impl Strategy<Value = Vec<Vec<Value>>> {
        let text = |most: usize| {
            proptest::string::string_regex(&format!("[ a\u{1}é]{{0,{most}}}"))
                .unwrap()
                .prop_map(Value::Text)
        };
        let nullable = |s: BoxedStrategy<Value>| prop_oneof![1 => Just(Value::Null), 3 => s];
        let row = (
            text(3),
            any::<i32>().prop_map(|v| Value::Int(v.into())),
            nullable(text(4).boxed()),
            nullable(text(20).boxed()),
            nullable(any::<u64>().prop_map(Value::UInt).boxed()),
            text(10),
        )
            .prop_map(|(a, b, c, d, e, f)| vec![a, b, c, d, e, f]);
        proptest::collection::vec(row, 1..8)
    }

    fn image(layout: &Layout, row: &[Value]) -> Vec<u8> {
        let given: Vec<Option<&Value>> = row.iter().map(Some).collect();
        let mut out = Vec::new();
        let encoded = encode_row(layout, &given, &layout.defaults, &mut out).unwrap();
        out[encoded.image.0..][..encoded.image.1].to_vec()
    }

    proptest! {
        #[test]
        fn a_projected_row_decodes_and_orders_as_the_stored_one(
            rows in rows(),
            reads in proptest::collection::vec(0u16..6, 0..4),
            index in 0usize..2,
        ) {
            let layout = layout();
            let order = &layout.ordered[index].order;
            let projection = Projection::new(&layout, order, Some(&reads));
            let stored: Vec<Vec<u8>> = rows.iter().map(|r| image(&layout, r)).collect();
            let projected: Vec<Vec<u8>> = (stored.iter())
                .map(|image| {
                    let (fixed, var) = image.split_at(layout.slot_size);
                    let mut out = Vec::new();
                    projection.write(&layout, fixed, var, &mut out);
                    out
                })
                .collect();
            for (i, image) in stored.iter().enumerate() {
                let (fixed, var) = image.split_at(layout.slot_size);
                let values = projection.decode(&layout, &projected[i]);
                for c in 0..layout.columns.len() as u16 {
                    let read = reads.contains(&c) || order.contains(&c);
                    let want = if read { codec::decode(&layout, fixed, var, c) } else { Value::Null };
                    prop_assert_eq!(&values[usize::from(c)], &want, "column {}", c);
                }
                let (mut want, mut got) = (Vec::new(), Vec::new());
                layout.key_of(fixed, var, &mut want);
                projection.key_of(&layout, &projected[i], &mut got);
                prop_assert_eq!(got, want);
                for (j, other) in stored.iter().enumerate() {
                    let (of, ov) = other.split_at(layout.slot_size);
                    let key = |fixed: &[u8], var: &[u8]| -> Vec<Option<Vec<u8>>> {
                        (order.iter())
                            .map(|&c| (!layout.is_null(fixed, c)).then(|| layout.column_bytes(fixed, var, c).to_vec()))
                            .collect()
                    };
                    let want = super::super::fragment::compare_keys(&layout, order, &key(fixed, var), &key(of, ov));
                    prop_assert_eq!(projection.compare(&layout, &projected[i], &projected[j]), want);
                }
            }
        }
    }
}
