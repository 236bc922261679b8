//! What a redo record holds: the rows a commit changed, as they are after
//! it. Applying a record is idempotent — a put sets the whole row, a delete
//! removes it if it is there — so replaying the log over a checkpoint that
//! already has some of its changes gives the same rows.
//!
//! ```text
//! change: [op u8: 1 put, 2 delete, 3 clear, 4 digest][table u32][key length u16][key]
//!         put only: [image length u32][row image]
//!         digest only: its buckets and run in the key's place, then [sums length u32][sums]
//! ```
//! A record's payload is its changes, one after another. A clear (its key
//! empty) and a digest are never in a redo log: they go only to a node
//! being caught up, in the replication stream (`cluster::catchup`).

use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use crate::types::TableId;

const PUT: u8 = 1;
const DELETE: u8 = 2;
const CLEAR: u8 = 3;
const DIGEST: u8 = 4;

/// Where a digest's rows are, and how it splits them: the rows whose key
/// falls in fragment `fragment` of a table split into `fragments` (as the
/// coordinator places keys: by the upper half of the key's hash, in equal
/// ranges), cut into `count` equal ranges of that fragment's hashes. The
/// same on every node, whatever its own number of fragments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Buckets {
    pub(crate) fragments: u16,
    pub(crate) fragment: u16,
    pub(crate) count: u32,
}

impl Buckets {
    /// The bucket `key` is in; none if it is not in the fragment.
    pub(crate) fn of(&self, key: &[u8]) -> Option<u32> {
        let scaled = (xxh3_64(key) >> 32) * u64::from(self.fragments);
        if scaled >> 32 != u64::from(self.fragment) {
            return None;
        }
        Some((((scaled & 0xffff_ffff) * u64::from(self.count)) >> 32) as u32)
    }

    /// Whether any key of fragment `other` of `others` can be in these.
    pub(crate) fn meets(&self, other: u16, others: u16) -> bool {
        let (f, n) = (u64::from(self.fragment), u64::from(self.fragments));
        let (g, m) = (u64::from(other), u64::from(others));
        f * m < (g + 1) * n && g * n < (f + 1) * m
    }

    fn encode(&self) -> [u8; 8] {
        let mut out = [0; 8];
        out[..2].copy_from_slice(&self.fragments.to_le_bytes());
        out[2..4].copy_from_slice(&self.fragment.to_le_bytes());
        out[4..].copy_from_slice(&self.count.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Result<Buckets, String> {
        let bad = || "a digest's buckets that make no sense".to_owned();
        let bytes: [u8; 8] = bytes.try_into().map_err(|_| bad())?;
        let buckets = Buckets {
            fragments: u16::from_le_bytes([bytes[0], bytes[1]]),
            fragment: u16::from_le_bytes([bytes[2], bytes[3]]),
            count: u32::from_le_bytes(bytes[4..].try_into().expect("4")),
        };
        if buckets.fragment >= buckets.fragments || buckets.count == 0 {
            return Err(bad());
        }
        Ok(buckets)
    }
}

/// A row's share of its bucket's sum: a hash of its key and its values
/// (those of its fixed part, from its null bitmap on, and its var part),
/// so that two nodes' buckets sum alike exactly when they hold the same
/// rows — up to a 64-bit hash's chance.
pub(crate) fn row_digest(key: &[u8], fixed_values: &[u8], var: &[u8]) -> u64 {
    let mut hash = Xxh3::with_seed(xxh3_64(key));
    hash.update(fixed_values);
    hash.update(var);
    hash.digest()
}

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
    /// The sender's rows in `buckets` sum so, bucket by bucket (each
    /// `row_digest` added, wrapping): a node being caught up keeps the
    /// buckets it holds alike, and asks for the others — naming the
    /// sender's catch-up `run`.
    Digest {
        table: TableId,
        buckets: Buckets,
        run: u64,
        /// Little-endian `u64`s, one per bucket.
        sums: &'a [u8],
    },
}

impl Change<'_> {
    /// The table it changes.
    pub(crate) fn table(&self) -> TableId {
        match self {
            Change::Put { table, .. }
            | Change::Delete { table, .. }
            | Change::Clear { table }
            | Change::Digest { table, .. } => *table,
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

/// A clear of `table`. Catching up sends digests now, but a node still
/// takes a clear from a primary of the version before (a rolling upgrade).
#[cfg(test)]
pub(crate) fn clear(out: &mut Vec<u8>, table: TableId) {
    out.push(CLEAR);
    out.extend_from_slice(&table.0.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
}

/// A digest of `table`'s rows in `buckets`, by catch-up `run`: `sums`, one
/// per bucket.
pub(crate) fn digest(out: &mut Vec<u8>, table: TableId, buckets: Buckets, run: u64, sums: &[u64]) {
    debug_assert_eq!(sums.len(), buckets.count as usize);
    out.push(DIGEST);
    out.extend_from_slice(&table.0.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(&buckets.encode());
    out.extend_from_slice(&run.to_le_bytes());
    out.extend_from_slice(&((sums.len() * 8) as u32).to_le_bytes());
    for sum in sums {
        out.extend_from_slice(&sum.to_le_bytes());
    }
}

/// The sums of a digest's bytes.
pub(crate) fn sums(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    (bytes.chunks_exact(8)).map(|s| u64::from_le_bytes(s.try_into().expect("8")))
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
                DIGEST if key.len() == 16 => {
                    let buckets = Buckets::decode(&key[..8])?;
                    let run = u64::from_le_bytes(key[8..].try_into().expect("8"));
                    let len =
                        u32::from_le_bytes(take(&mut bytes, 4)?.try_into().expect("4")) as usize;
                    let sums = take(&mut bytes, len)?;
                    if len != buckets.count as usize * 8 {
                        return Err("a digest whose sums are not one per bucket".to_owned());
                    }
                    Change::Digest {
                        table,
                        buckets,
                        run,
                        sums,
                    }
                }
                DIGEST => return Err("a digest without its buckets".to_owned()),
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
    fn every_key_is_in_one_bucket_of_one_fragment() {
        for fragments in [1u16, 3, 4, 8] {
            for n in 0..2000u32 {
                let key = n.to_le_bytes();
                let placed: Vec<(u16, u32)> = (0..fragments)
                    .filter_map(|fragment| {
                        let buckets = Buckets {
                            fragments,
                            fragment,
                            count: 16,
                        };
                        buckets.of(&key).map(|b| (fragment, b))
                    })
                    .collect();
                assert_eq!(placed.len(), 1, "{fragments} fragments, key {n}");
                assert!(placed[0].1 < 16);
            }
        }
        let of = |fragments, fragment| Buckets {
            fragments,
            fragment,
            count: 1,
        };
        // Fragment 1 of 2 meets fragments 2 and 3 of 4, not 0 or 1.
        assert_eq!(
            (0..4).map(|g| of(2, 1).meets(g, 4)).collect::<Vec<_>>(),
            [false, false, true, true]
        );
        assert!((0..3).all(|g| of(1, 0).meets(g, 3)));
    }

    #[test]
    fn changes_round_trip() {
        let mut out = Vec::new();
        let at = begin_put(&mut out, TableId(7), b"key");
        out.extend_from_slice(b"the row");
        finish_put(&mut out, at);
        delete(&mut out, TableId(9), b"gone");
        clear(&mut out, TableId(11));
        let buckets = Buckets {
            fragments: 4,
            fragment: 1,
            count: 2,
        };
        digest(&mut out, TableId(12), buckets, 3, &[5, u64::MAX]);
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
                Change::Digest {
                    table: TableId(12),
                    buckets,
                    run: 3,
                    sums: &out[out.len() - 16..],
                },
            ]
        );
        let Change::Digest { sums: bytes, .. } = changes[3] else {
            unreachable!()
        };
        assert_eq!(sums(bytes).collect::<Vec<_>>(), [5, u64::MAX]);
        let mut bad = Vec::new();
        digest(&mut bad, TableId(1), buckets, 3, &[1, 2]);
        bad[9] = 9; // fragment 9 of 4
        assert!(decode(&bad).any(|c| c.is_err()), "buckets out of range");
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
