//! What a redo record holds: the rows a commit changed, as they are after
//! it. Applying a record is idempotent — a put sets the whole row, a delete
//! removes it if it is there — so replaying the log over a checkpoint that
//! already has some of its changes gives the same rows.
//!
//! ```text
//! change: [op u8: 1 put, 2 delete, 3 clear][table u32][key length u16][key]
//!         put only: [image length u32][row image]
//! ```
//! A record's payload is its changes, one after another. A clear (its key
//! empty) is never in a redo log: it goes only to a node being caught up,
//! in the replication stream (`cluster::catchup`).

use crate::types::TableId;

const PUT: u8 = 1;
const DELETE: u8 = 2;
const CLEAR: u8 = 3;

/// One changed row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change<'a> {
    /// The row with this key is now this image.
    Put {
        table: TableId,
        key: &'a [u8],
        image: &'a [u8],
    },
    /// There is no row with this key.
    Delete { table: TableId, key: &'a [u8] },
    /// The table has no rows but those the changes after this one give it.
    Clear { table: TableId },
}

impl Change<'_> {
    /// The table it changes.
    pub(crate) fn table(&self) -> TableId {
        match self {
            Change::Put { table, .. } | Change::Delete { table, .. } | Change::Clear { table } => {
                *table
            }
        }
    }
}

/// Starts a put in `out`; the caller appends the row image and then calls
/// `finish_put` with where this returned.
pub(crate) fn begin_put(out: &mut Vec<u8>, table: TableId, key: &[u8]) -> usize {
    out.push(PUT);
    out.extend_from_slice(&table.0.to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&[0; 4]);
    out.len()
}

/// Ends a put begun at `start`: everything appended since is the image.
pub(crate) fn finish_put(out: &mut [u8], start: usize) {
    let len = (out.len() - start) as u32;
    out[start - 4..start].copy_from_slice(&len.to_le_bytes());
}

pub(crate) fn delete(out: &mut Vec<u8>, table: TableId, key: &[u8]) {
    out.push(DELETE);
    out.extend_from_slice(&table.0.to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key);
}

pub(crate) fn clear(out: &mut Vec<u8>, table: TableId) {
    out.push(CLEAR);
    out.extend_from_slice(&table.0.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
}

/// The first `n` bytes, moving `bytes` past them.
fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
    if bytes.len() < n {
        return Err("a change cut short".to_owned());
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

/// The changes of a record, or where it stops making sense.
pub(crate) fn decode(mut payload: &[u8]) -> impl Iterator<Item = Result<Change<'_>, String>> {
    std::iter::from_fn(move || {
        if payload.is_empty() {
            return None;
        }
        let change = (|| {
            let mut bytes = payload;
            let op = take(&mut bytes, 1)?[0];
            let table = TableId(u32::from_le_bytes(
                take(&mut bytes, 4)?.try_into().expect("4"),
            ));
            let key_len = u16::from_le_bytes(take(&mut bytes, 2)?.try_into().expect("2")) as usize;
            let key = take(&mut bytes, key_len)?;
            let change = match op {
                PUT => {
                    let len =
                        u32::from_le_bytes(take(&mut bytes, 4)?.try_into().expect("4")) as usize;
                    Change::Put {
                        table,
                        key,
                        image: take(&mut bytes, len)?,
                    }
                }
                DELETE => Change::Delete { table, key },
                CLEAR if key.is_empty() => Change::Clear { table },
                CLEAR => return Err("a clear with a key".to_owned()),
                other => return Err(format!("unknown change kind {other}")),
            };
            payload = bytes;
            Ok(change)
        })();
        if change.is_err() {
            payload = &[];
        }
        Some(change)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_round_trip() {
        let mut out = Vec::new();
        let at = begin_put(&mut out, TableId(7), b"key");
        out.extend_from_slice(b"the row");
        finish_put(&mut out, at);
        delete(&mut out, TableId(9), b"gone");
        clear(&mut out, TableId(11));
        let changes: Vec<_> = decode(&out).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            changes,
            vec![
                Change::Put {
                    table: TableId(7),
                    key: b"key",
                    image: b"the row"
                },
                Change::Delete {
                    table: TableId(9),
                    key: b"gone"
                },
                Change::Clear { table: TableId(11) },
            ]
        );
        assert!(
            decode(&[3, 1, 0, 0, 0, 1, 0, b'k']).any(|c| c.is_err()),
            "a clear with a key"
        );
        assert!(
            decode(&out[..out.len() - 1]).any(|c| c.is_err()),
            "a change cut short"
        );
        assert!(
            decode(&[9, 0, 0, 0, 0, 0, 0]).any(|c| c.is_err()),
            "an unknown kind"
        );
    }
}
