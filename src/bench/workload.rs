//! What each operation of a run is: YCSB's core workloads over a
//! `usertable` (a key and ten 100-byte fields), and batched key lookups.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::keys::{Distribution, KeyChooser, Rng};

/// Fields of a `usertable` record, and the bytes of each.
pub(crate) const FIELDS: usize = 10;
pub(crate) const FIELD_BYTES: usize = 100;

/// YCSB's core workloads (E, short range scans, is not offered: the data
/// APIs have no scan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Ycsb {
    /// Update heavy: 50% reads, 50% updates.
    A,
    /// Read mostly: 95% reads, 5% updates.
    B,
    /// Read only.
    C,
    /// Read latest: 95% reads, 5% inserts, the newest records most read.
    D,
    /// Short ranges: 95% scans of 1 to 100 records (uniform) from a key
    /// chosen by a Zipfian law, 5% inserts.
    E,
    /// Read-modify-write: 50% reads, 50% read-modify-writes.
    F,
}

/// Most records a workload E scan asks for (YCSB's `maxscanlength`).
pub(crate) const MAX_SCAN: u64 = 100;

/// The share of each kind of operation, summing to 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Mix {
    pub(crate) read: f64,
    pub(crate) update: f64,
    pub(crate) insert: f64,
    pub(crate) scan: f64,
    pub(crate) read_modify_write: f64,
}

impl Ycsb {
    pub(crate) fn mix(self) -> Mix {
        let (read, update, insert, scan, read_modify_write) = match self {
            Ycsb::A => (0.5, 0.5, 0.0, 0.0, 0.0),
            Ycsb::B => (0.95, 0.05, 0.0, 0.0, 0.0),
            Ycsb::C => (1.0, 0.0, 0.0, 0.0, 0.0),
            Ycsb::D => (0.95, 0.0, 0.05, 0.0, 0.0),
            Ycsb::E => (0.0, 0.0, 0.05, 0.95, 0.0),
            Ycsb::F => (0.5, 0.0, 0.0, 0.0, 0.5),
        };
        Mix {
            read,
            update,
            insert,
            scan,
            read_modify_write,
        }
    }

    /// YCSB's request distribution for the workload.
    pub(crate) fn distribution(self) -> Distribution {
        match self {
            Ycsb::D => Distribution::Latest,
            _ => Distribution::Zipfian,
        }
    }
}

/// One operation, by kind, as the report counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    Read,
    Update,
    Insert,
    ReadModifyWrite,
    /// A batch of primary-key reads.
    Lookup,
    /// Records from a key on, in key order.
    Scan,
    /// An OLTP transaction, BEGIN to COMMIT.
    Transaction,
}

/// An operation to run: on record `key`; `field` for an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    Read {
        key: u64,
    },
    Update {
        key: u64,
        field: usize,
    },
    /// Insert the next new record (its number is handed out when it runs).
    Insert,
    ReadModifyWrite {
        key: u64,
        field: usize,
    },
    Lookup {
        keys: Vec<u64>,
    },
    /// `len` records from record `key`'s key on.
    Scan {
        key: u64,
        len: usize,
    },
}

impl Op {
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Op::Read { .. } => Kind::Read,
            Op::Update { .. } => Kind::Update,
            Op::Insert => Kind::Insert,
            Op::ReadModifyWrite { .. } => Kind::ReadModifyWrite,
            Op::Lookup { .. } => Kind::Lookup,
            Op::Scan { .. } => Kind::Scan,
        }
    }
}

/// What a client runs, operation after operation.
#[derive(Debug, Clone)]
pub(crate) enum Plan {
    Ycsb(Mix, Distribution),
    /// Batches of `batch` keys chosen by the distribution.
    Lookup {
        batch: usize,
        distribution: Distribution,
    },
}

/// One client's stream of operations.
#[derive(Debug, Clone)]
pub(crate) struct OpGen {
    plan: Plan,
    chooser: KeyChooser,
    rng: Rng,
}

impl OpGen {
    pub(crate) fn new(plan: Plan, records: u64, seed: u64) -> OpGen {
        let distribution = match &plan {
            Plan::Ycsb(_, d)
            | Plan::Lookup {
                distribution: d, ..
            } => *d,
        };
        OpGen {
            plan,
            chooser: KeyChooser::new(distribution, records),
            rng: Rng::new(seed),
        }
    }

    /// The next operation, when `records` records exist.
    pub(crate) fn next(&mut self, records: u64) -> Op {
        match &self.plan {
            Plan::Lookup { batch, .. } => Op::Lookup {
                keys: (0..*batch)
                    .map(|_| self.chooser.next(&mut self.rng, records))
                    .collect(),
            },
            Plan::Ycsb(mix, _) => {
                let mix = *mix;
                let u = self.rng.unit();
                let key = self.chooser.next(&mut self.rng, records);
                let field = self.rng.below(FIELDS as u64) as usize;
                if u < mix.read {
                    Op::Read { key }
                } else if u < mix.read + mix.update {
                    Op::Update { key, field }
                } else if u < mix.read + mix.update + mix.insert {
                    Op::Insert
                } else if u < mix.read + mix.update + mix.insert + mix.scan {
                    let len = 1 + self.rng.below(MAX_SCAN) as usize;
                    Op::Scan { key, len }
                } else {
                    Op::ReadModifyWrite { key, field }
                }
            }
        }
    }

    /// A field value: `FIELD_BYTES` printable characters.
    pub(crate) fn value(&mut self, into: &mut String) {
        into.clear();
        while into.len() < FIELD_BYTES {
            let bits = self.rng.next_u64();
            for shift in 0..8 {
                if into.len() == FIELD_BYTES {
                    break;
                }
                // 64 characters: letters, digits, '-' and '_'.
                let c = ((bits >> (shift * 8)) & 63) as u8;
                into.push(match c {
                    0..=25 => (b'a' + c) as char,
                    26..=51 => (b'A' + c - 26) as char,
                    52..=61 => (b'0' + c - 52) as char,
                    62 => '-',
                    _ => '_',
                });
            }
        }
    }
}

/// The records that exist, as reads choose among them. Inserts take record
/// numbers in order but finish in any order; a record counts once it and
/// every one before it has been answered (YCSB's acknowledged counter), so
/// a read never asks for a record still being inserted. An insert that was
/// refused is answered too: reads of it count as missing rows.
#[derive(Debug)]
pub(crate) struct Records {
    next: AtomicU64,
    count: AtomicU64,
    /// Answered inserts beyond the first unanswered one.
    answered: Mutex<BTreeSet<u64>>,
}

impl Records {
    /// `loaded` records, `0..loaded`.
    pub(crate) fn new(loaded: u64) -> Records {
        Records {
            next: AtomicU64::new(loaded),
            count: AtomicU64::new(loaded),
            answered: Mutex::new(BTreeSet::new()),
        }
    }

    /// How many records reads may choose from.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    /// The number of a record to insert.
    pub(crate) fn claim(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// The insert of `record` has been answered.
    pub(crate) fn answered(&self, record: u64) {
        let mut answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
        answered.insert(record);
        let mut count = self.count.load(Ordering::Relaxed);
        while answered.remove(&count) {
            count += 1;
        }
        self.count.store(count, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn shares(workload: Ycsb, draws: usize) -> HashMap<Kind, f64> {
        let mut ops = OpGen::new(
            Plan::Ycsb(workload.mix(), workload.distribution()),
            1_000,
            3,
        );
        let mut counts: HashMap<Kind, usize> = HashMap::new();
        for _ in 0..draws {
            *counts.entry(ops.next(1_000).kind()).or_default() += 1;
        }
        counts
            .into_iter()
            .map(|(k, c)| (k, c as f64 / draws as f64))
            .collect()
    }

    #[test]
    fn each_workload_runs_its_mix() {
        let draws = 100_000;
        for workload in [Ycsb::A, Ycsb::B, Ycsb::C, Ycsb::D, Ycsb::F] {
            let mix = workload.mix();
            let got = shares(workload, draws);
            for (kind, want) in [
                (Kind::Read, mix.read),
                (Kind::Update, mix.update),
                (Kind::Insert, mix.insert),
                (Kind::ReadModifyWrite, mix.read_modify_write),
            ] {
                let share = got.get(&kind).copied().unwrap_or(0.0);
                assert!(
                    (share - want).abs() < 0.01,
                    "{workload:?} {kind:?}: {share} instead of {want}"
                );
            }
            let total = mix.read + mix.update + mix.insert + mix.read_modify_write;
            assert!((total - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn lookups_come_in_batches_of_existing_records() {
        let mut ops = OpGen::new(
            Plan::Lookup {
                batch: 100,
                distribution: Distribution::Uniform,
            },
            500,
            9,
        );
        for _ in 0..100 {
            let Op::Lookup { keys } = ops.next(500) else {
                panic!("a lookup")
            };
            assert_eq!(keys.len(), 100);
            assert!(keys.iter().all(|&k| k < 500));
        }
    }

    #[test]
    fn records_count_only_once_every_earlier_insert_is_answered() {
        let records = Records::new(10);
        let (a, b, c) = (records.claim(), records.claim(), records.claim());
        assert_eq!((a, b, c), (10, 11, 12));
        records.answered(c);
        records.answered(b);
        assert_eq!(records.count(), 10, "record 10 is still being inserted");
        records.answered(a);
        assert_eq!(records.count(), 13);
        assert_eq!(records.claim(), 13);
    }

    #[test]
    fn values_are_printable_and_full_length() {
        let mut ops = OpGen::new(Plan::Ycsb(Ycsb::A.mix(), Distribution::Uniform), 10, 1);
        let mut value = String::new();
        ops.value(&mut value);
        assert_eq!(value.len(), FIELD_BYTES);
        assert!(
            value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        let first = value.clone();
        ops.value(&mut value);
        assert_ne!(first, value);
    }
}
