//! Integer increments done where the key's row is: each `INCR`-like
//! command is one operation that the LDM worker holding the row runs on it
//! (`OpKind::Interpret`, RonDB's interpreted update) — the value read,
//! added to and written in the one lookup that finds the row. A pipelined
//! run of increments is then one request and one trip to the workers; two
//! increments of one key in a run land on the same worker in order, the
//! second counting from the first.

use std::sync::Arc;

use super::{Db, FIELDS_FORM, MAX_KEY, Store, StoreError, int_value, key_value, now_ms};
use crate::api::resp::cmd::int;
use crate::ldm::{Interpreted, RowProgram};
use crate::log::Mark;
use crate::storage::codec::{self, EncodedRow};
use crate::storage::layout::Layout;
use crate::tc::Commit;
use crate::tc::batch::Batch;
use crate::types::value::Value;

/// Columns of a key row (see `KEYS_DEF`).
const T: u16 = 1;
const EXP: u16 = 2;
const N: u16 = 3;
const V: u16 = 4;

/// Bytes of the row an increment writes, past its key: the most a decimal
/// `i64` takes, and the row's fixed columns.
const ROW_BYTES: usize = 20 + 24;

/// Why an increment left its key as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unchanged {
    /// The key holds a hash.
    WrongType,
    /// Its value is not an integer (or is longer than a row).
    NotInteger,
    /// The sum is outside `i64`.
    Overflow,
    /// The key expired but still has rows besides its own (a value of
    /// several rows, a hash kept a row per field), which one operation
    /// cannot remove: the command is to be run on its own.
    NotHere,
}

impl Unchanged {
    const ALL: [Unchanged; 4] = [
        Unchanged::WrongType,
        Unchanged::NotInteger,
        Unchanged::Overflow,
        Unchanged::NotHere,
    ];

    /// Its status byte in the program's answer (`0` is a sum).
    fn status(self) -> u8 {
        1 + Self::ALL.iter().position(|&u| u == self).expect("listed") as u8
    }

    fn of_status(status: u8) -> Unchanged {
        Self::ALL[status as usize - 1]
    }
}

/// The program: its argument is the increment (`i64`, little-endian) and
/// then the key; it answers a status byte: `0` and the new value, or an
/// `Unchanged`'s.
#[derive(Debug)]
struct Increment {
    /// Unix milliseconds a key expiring at or before is gone.
    now: i64,
}

impl Increment {
    /// The integer `found` holds and its expiry (`0` and none for a row
    /// that is absent or expired).
    fn value(&self, layout: &Layout, found: Option<&[u8]>) -> Result<(i64, Value), Unchanged> {
        let Some((fixed, var)) = found.map(|image| image.split_at(layout.slot_size)) else {
            return Ok((0, Value::Null));
        };
        let zero = |c| {
            matches!(
                codec::decode(layout, fixed, var, c),
                Value::UInt(0) | Value::Int(0)
            )
        };
        let expires = codec::decode(layout, fixed, var, EXP);
        if matches!(expires, Value::Int(at) if at <= self.now) {
            // Counts as absent, if its row is all it has.
            let fields = int_value(&codec::decode(layout, fixed, var, T)) == Some(FIELDS_FORM);
            return match zero(N) && !fields {
                true => Ok((0, Value::Null)),
                false => Err(Unchanged::NotHere),
            };
        }
        if !zero(T) {
            return Err(Unchanged::WrongType);
        }
        // A value of several rows is longer than any integer.
        if !zero(N) {
            return Err(Unchanged::NotInteger);
        }
        let text = layout.column_bytes(fixed, var, V);
        let value = int(text).ok_or(Unchanged::NotInteger)?;
        Ok((value, expires))
    }
}

impl RowProgram for Increment {
    fn run(
        &self,
        layout: &Layout,
        found: Option<&[u8]>,
        arg: &[u8],
        out: &mut Vec<u8>,
    ) -> Interpreted {
        let (by, key) = arg.split_at(8);
        let by = i64::from_le_bytes(by.try_into().expect("an i64 first"));
        let sum = self.value(layout, found).and_then(|(value, expires)| {
            let sum = value.checked_add(by).ok_or(Unchanged::Overflow)?;
            Ok((sum, expires))
        });
        let (sum, expires) = match sum {
            Ok(sum) => sum,
            Err(why) => {
                out.push(why.status());
                return Interpreted {
                    answer: 0..1,
                    row: None,
                };
            }
        };
        out.push(0);
        out.extend_from_slice(&sum.to_le_bytes());
        let (k, t, n) = (Value::Bytes(key.to_vec()), Value::Int(0), Value::Int(0));
        let v = Value::Bytes(sum.to_string().into_bytes());
        let values = [Some(&k), Some(&t), Some(&expires), Some(&n), Some(&v)];
        let row: EncodedRow = codec::encode_row(layout, &values, &layout.defaults, out)
            .expect("a key row of a checked key and a number");
        Interpreted {
            answer: 0..9,
            row: Some(row),
        }
    }
}

/// An increment's outcome: the new value, why the key was left as it was,
/// or why the operation failed (memory, quota).
pub(crate) type Incremented = Result<Result<i64, Unchanged>, StoreError>;

impl Store {
    /// Adds each increment to its key's integer — an absent or expired key
    /// counts from 0 and gets no expiry, a live one keeps its own — in one
    /// request, each on its own: answers each one's outcome once applied,
    /// and where they end in the log, to wait on (`acknowledgeable`) after
    /// letting go of the keys' locks. The caller holds them; the
    /// connection is in no transaction.
    pub(crate) async fn increment_applied(
        &self,
        db: &mut Db,
        batch: &mut Batch,
        increments: &[(&[u8], i64)],
    ) -> Result<(Vec<Incremented>, Mark), StoreError> {
        debug_assert!(db.tx.is_none(), "a transaction's writes wait for EXEC");
        if increments.iter().any(|(key, _)| key.len() > MAX_KEY) {
            return Err(StoreError::KeyTooLong);
        }
        // The key may write (no value to check: a number fits a row).
        self.check_put(&db.db, db.grant, &[])?;
        let t = self.tables(db, true).await?.expect("created");
        let program: Arc<dyn RowProgram> = Arc::new(Increment { now: now_ms() });
        batch.clear();
        let mut arg = Vec::new();
        for &(key, by) in increments {
            arg.clear();
            arg.extend_from_slice(&by.to_le_bytes());
            arg.extend_from_slice(key);
            batch
                .interpret(
                    &t.keys,
                    &[key_value(key)?],
                    &program,
                    &arg,
                    key.len() + ROW_BYTES,
                )
                .map_err(crate::tc::batch::OperationError::from)?;
        }
        let mark = self.run_applied(db, batch, Commit::Each).await?;
        let outcomes: Vec<Incremented> = (0..increments.len())
            .map(|i| {
                let answer = batch.answer(i)?;
                Ok(match answer.split_first().expect("a status") {
                    (0, sum) => Ok(i64::from_le_bytes(sum.try_into().expect("an i64"))),
                    (&status, _) => Err(Unchanged::of_status(status)),
                })
            })
            .collect();
        let written = (increments.iter().zip(&outcomes))
            .filter(|(_, outcome)| matches!(outcome, Ok(Ok(_))))
            .map(|(&(key, _), _)| key);
        self.touched(db.db.id, written);
        Ok((outcomes, mark))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resp::store::KEYS;

    /// A key row's image, as the table stores it.
    fn image(layout: &Layout, t: i64, exp: Option<i64>, n: i64, v: &[u8]) -> Vec<u8> {
        let (k, t, n, v) = (
            Value::Bytes(b"k".to_vec()),
            Value::Int(t),
            Value::Int(n),
            Value::Bytes(v.to_vec()),
        );
        let exp = exp.map_or(Value::Null, Value::Int);
        let mut out = Vec::new();
        let row = codec::encode_row(
            layout,
            &[Some(&k), Some(&t), Some(&exp), Some(&n), Some(&v)],
            &layout.defaults,
            &mut out,
        )
        .unwrap();
        out[row.image.0..][..row.image.1].to_vec()
    }

    /// The value and expiry of a row the program writes.
    type Written = Option<(Vec<u8>, Value)>;

    /// Runs the program on `found`: what it answers, and what it writes.
    fn run(found: Option<&[u8]>, by: i64) -> (Result<i64, Unchanged>, Written) {
        let layout = Layout::new(KEYS.clone());
        let program = Increment { now: 1_000 };
        let mut arg = by.to_le_bytes().to_vec();
        arg.extend_from_slice(b"k");
        let mut out = Vec::new();
        let ran = program.run(&layout, found, &arg, &mut out);
        let answer = &out[ran.answer];
        let answer = match answer[0] {
            0 => Ok(i64::from_le_bytes(answer[1..].try_into().unwrap())),
            status => Err(Unchanged::of_status(status)),
        };
        let row = ran.row.map(|row| {
            let (fixed, var) = out[row.image.0..][..row.image.1].split_at(layout.slot_size);
            assert_eq!(codec::decode(&layout, fixed, var, T), Value::UInt(0));
            assert_eq!(codec::decode(&layout, fixed, var, N), Value::UInt(0));
            let exp = codec::decode(&layout, fixed, var, EXP);
            (layout.column_bytes(fixed, var, V).to_vec(), exp)
        });
        (answer, row)
    }

    #[test]
    fn an_increment_counts_from_the_live_value_or_from_zero() {
        let layout = Layout::new(KEYS.clone());
        assert_eq!(run(None, 5), (Ok(5), Some((b"5".to_vec(), Value::Null))));
        let live = image(&layout, 0, Some(2_000), 0, b"41");
        assert_eq!(
            run(Some(&live), 1),
            (Ok(42), Some((b"42".to_vec(), Value::Int(2_000)))),
            "a live key keeps its expiry"
        );
        let forever = image(&layout, 0, None, 0, b"-7");
        assert_eq!(
            run(Some(&forever), -3),
            (Ok(-10), Some((b"-10".to_vec(), Value::Null)))
        );
        // Expired at `now`: gone, so counted from zero, with no expiry.
        let expired = image(&layout, 0, Some(1_000), 0, b"41");
        assert_eq!(
            run(Some(&expired), 1),
            (Ok(1), Some((b"1".to_vec(), Value::Null)))
        );
        let expired_hash = image(&layout, 1, Some(10), 0, b"whole hash");
        assert_eq!(
            run(Some(&expired_hash), 2),
            (Ok(2), Some((b"2".to_vec(), Value::Null)))
        );
    }

    #[test]
    fn what_is_no_integer_or_overflows_is_left_as_it_was() {
        let layout = Layout::new(KEYS.clone());
        let cases: [(Vec<u8>, i64, Unchanged); 7] = [
            (image(&layout, 1, None, 0, b"hash"), 1, Unchanged::WrongType),
            (
                image(&layout, FIELDS_FORM, None, 3, b"id"),
                1,
                Unchanged::WrongType,
            ),
            (image(&layout, 0, None, 0, b"abc"), 1, Unchanged::NotInteger),
            (image(&layout, 0, None, 0, b""), 1, Unchanged::NotInteger),
            (image(&layout, 0, None, 0, b"007"), 1, Unchanged::NotInteger),
            (image(&layout, 0, None, 2, b"1"), 1, Unchanged::NotInteger),
            (
                image(&layout, 0, None, 0, i64::MAX.to_string().as_bytes()),
                1,
                Unchanged::Overflow,
            ),
        ];
        for (found, by, why) in cases {
            assert_eq!(run(Some(&found), by), (Err(why), None));
        }
        let min = image(&layout, 0, None, 0, i64::MIN.to_string().as_bytes());
        assert_eq!(run(Some(&min), -1), (Err(Unchanged::Overflow), None));
    }

    #[test]
    fn an_expired_key_with_more_rows_than_its_own_is_left_to_the_command_alone() {
        let layout = Layout::new(KEYS.clone());
        // A long value's parts, a hash's field rows: one operation cannot
        // remove them.
        let long = image(&layout, 0, Some(10), 3, b"head");
        let fields = image(&layout, FIELDS_FORM, Some(10), 0, b"id");
        for found in [long, fields] {
            assert_eq!(run(Some(&found), 1), (Err(Unchanged::NotHere), None));
        }
    }
}
