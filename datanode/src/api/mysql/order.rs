//! Answered rows put in order: an ORDER BY's sort, and DISTINCT's sort
//! and the duplicates it finds.
//!
//! Rows are sorted as a permutation. Each row's first sort column is cut
//! to a 64-bit key that orders as the value does — the first eight bytes
//! of a text, an integer with its sign bit turned — so that most of the
//! sort compares two integers, as filesort's sort keys let MySQL do; only
//! rows whose keys tie are compared value by value. A column whose values
//! are not all of one such kind gets no keys and is compared by value
//! throughout. Ties end by position: the sort is stable.

use std::cmp::Ordering;

use super::query::compare;
use crate::types::value::Value;

/// Sorts `rows` by `order`: columns, each ascending or not.
pub(super) fn sort_rows(rows: &mut Vec<Vec<Value>>, order: &[(usize, bool)]) {
    if order.is_empty() || rows.len() < 2 {
        return;
    }
    let mut old = std::mem::take(rows);
    *rows = sorted(&old, order)
        .into_iter()
        .map(|at| std::mem::take(&mut old[at]))
        .collect();
}

/// The positions of `rows` in the order `order` puts them, ties by
/// position.
pub(super) fn sorted(rows: &[Vec<Value>], order: &[(usize, bool)]) -> Vec<usize> {
    let Some(&(first, ascending)) = order.first() else {
        return (0..rows.len()).collect();
    };
    let keys = keys(rows.iter().map(|row| &row[first]));
    let mut at: Vec<(u128, usize)> = match keys {
        Some(keys) => keys.into_iter().zip(0..).collect(),
        None => (0..rows.len()).map(|i| (0, i)).collect(),
    };
    at.sort_unstable_by(|&(ka, a), &(kb, b)| {
        let by_key = if ascending { ka.cmp(&kb) } else { kb.cmp(&ka) };
        by_key
            .then_with(|| by_values(&rows[a], &rows[b], order))
            .then(a.cmp(&b))
    });
    at.into_iter().map(|(_, i)| i).collect()
}

/// DISTINCT: of rows of `width` columns that are equal, column by column,
/// all but the first go; the rest keep their order. Sorted by every column
/// (ties by position), equal rows sit together.
pub(super) fn distinct(rows: &mut Vec<Vec<Value>>, width: usize) {
    let every: Vec<(usize, bool)> = (0..width).map(|c| (c, true)).collect();
    let by_value = sorted(rows, &every);
    let mut keep = vec![true; rows.len()];
    for pair in by_value.windows(2) {
        if by_values(&rows[pair[0]], &rows[pair[1]], &every).is_eq() {
            keep[pair[1]] = false;
        }
    }
    let mut keep = keep.into_iter();
    rows.retain(|_| keep.next().unwrap_or(true));
}

/// Two rows by `order`'s columns, value by value.
fn by_values(a: &[Value], b: &[Value], order: &[(usize, bool)]) -> Ordering {
    for &(c, ascending) in order {
        let o = compare(&a[c], &b[c]);
        let o = if ascending { o } else { o.reverse() };
        if o.is_ne() {
            return o;
        }
    }
    Ordering::Equal
}

/// Each value's sort key: NULL below every value, then the value's 64-bit
/// prefix, such that a key below another means the value is below the
/// other's (`compare`); equal keys say nothing. `None` where the values
/// are not all NULL or of one kind that has such keys.
fn keys<'a>(values: impl ExactSizeIterator<Item = &'a Value>) -> Option<Vec<u128>> {
    const NOT_NULL: u128 = 1 << 64;
    let mut kind = None;
    let mut keys = Vec::with_capacity(values.len());
    for value in values {
        let (this, prefix) = match value {
            Value::Null => {
                keys.push(0);
                continue;
            }
            Value::Text(s) => (Kind::Text, bytes_prefix(s.as_bytes())),
            Value::Bytes(b) => (Kind::Bytes, bytes_prefix(b)),
            Value::Int(i) => (Kind::Int, (*i as u64) ^ (1 << 63)),
            Value::UInt(u) => (Kind::UInt, *u),
            _ => return None,
        };
        if *kind.get_or_insert(this) != this {
            return None;
        }
        keys.push(NOT_NULL | u128::from(prefix));
    }
    Some(keys)
}

/// The kinds of value whose keys compare with each other's.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Texts, byte by byte (utf8mb4_bin).
    Text,
    Bytes,
    Int,
    UInt,
}

/// The first eight bytes, big-endian, zeros after a shorter string: a
/// string's prefix below another's means the string is below it, since
/// the first byte where the prefixes differ is either a byte of both or
/// the end of the shorter one, which is below any byte of the longer.
fn bytes_prefix(b: &[u8]) -> u64 {
    let mut prefix = [0u8; 8];
    let n = b.len().min(8);
    prefix[..n].copy_from_slice(&b[..n]);
    u64::from_be_bytes(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A value of a column of kind `kind` (or NULL): texts and byte
    /// strings that share long prefixes and hold zero bytes, integers of
    /// both signs at their ends (a column may mix the two: they compare
    /// exactly), doubles (no keys).
    fn value(kind: u8) -> BoxedStrategy<Value> {
        let of_kind = match kind {
            0 => "(abcdefgh){0,2}[a\\x00b]{0,3}"
                .prop_map(Value::Text)
                .boxed(),
            1 => prop::collection::vec(prop_oneof![Just(0u8), Just(1), Just(255)], 0..10)
                .prop_map(Value::Bytes)
                .boxed(),
            2 => prop_oneof![
                prop_oneof![
                    Just(i64::MIN),
                    Just(-1i64),
                    Just(0),
                    Just(1),
                    Just(i64::MAX)
                ]
                .prop_map(Value::Int),
                prop_oneof![Just(0u64), Just(1), Just(1 << 63), Just(u64::MAX)]
                    .prop_map(Value::UInt),
            ]
            .boxed(),
            _ => (-3.0f64..3.0).prop_map(Value::Double).boxed(),
        };
        prop_oneof![1 => Just(Value::Null), 4 => of_kind].boxed()
    }

    /// Rows of three columns, each column of one kind, as an answer's are.
    fn rows() -> impl Strategy<Value = Vec<Vec<Value>>> {
        prop::collection::vec(0..4u8, 3).prop_flat_map(|kinds| {
            let row: Vec<_> = kinds.into_iter().map(value).collect();
            prop::collection::vec(row, 0..40)
        })
    }

    fn order() -> impl Strategy<Value = Vec<(usize, bool)>> {
        prop::collection::vec((0..3usize, any::<bool>()), 0..4)
    }

    proptest! {
        /// The order is the stable sort by the columns' values, whatever
        /// the keys made of them.
        #[test]
        fn rows_sort_as_a_stable_sort_by_their_values(rows in rows(), order in order()) {
            let mut expected: Vec<usize> = (0..rows.len()).collect();
            expected.sort_by(|&a, &b| by_values(&rows[a], &rows[b], &order));
            prop_assert_eq!(sorted(&rows, &order), expected.clone());
            let mut moved = rows.clone();
            sort_rows(&mut moved, &order);
            let expected: Vec<Vec<Value>> = expected.into_iter().map(|i| rows[i].clone()).collect();
            prop_assert_eq!(moved, expected);
        }
    }

    #[test]
    fn keys_are_only_made_for_values_of_one_kind() {
        let text = Value::Text("a".into());
        assert!(keys([&Value::Null, &text, &Value::Null, &text].into_iter()).is_some());
        assert!(keys([&text, &Value::Bytes(vec![1])].into_iter()).is_none());
        assert!(keys([&Value::Int(1), &Value::UInt(1)].into_iter()).is_none());
        assert!(keys([&text, &Value::Int(1)].into_iter()).is_none());
        assert!(keys([&Value::Double(1.0)].into_iter()).is_none());
        let k = keys(
            [
                &Value::Null,
                &Value::Int(i64::MIN),
                &Value::Int(-1),
                &Value::Int(0),
            ]
            .into_iter(),
        );
        let k = k.expect("integers have keys");
        assert!(k.windows(2).all(|w| w[0] < w[1]), "{k:?}");
        let k = keys(
            ["", "\0", "a", "ab", "abcdefgh", "abcdefgi"]
                .map(|s| Value::Text(s.into()))
                .iter(),
        );
        let k = k.expect("texts have keys");
        // "" and "\0" tie on their keys; the rest are strictly ordered.
        assert_eq!(k[0], k[1]);
        assert!(k[1..].windows(2).all(|w| w[0] < w[1]), "{k:?}");
    }
}
