//! Durability through the engine's API on files in memory: crashes at
//! chosen moments, torn and corrupt logs, failing disks, and restarts that
//! must give back every acknowledged write and the same memory.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use shoal_quota::Quota;
use shoal_wire::schema::{DatabaseName, TableDef};

use super::catalog_file;
use super::durable::{Durable, OpenError, open_with};
use super::recovery::RecoveryError;
use crate::log::io::Storage;
use crate::log::io_mem::{Faults, MemStorage};
use crate::log::redo::{self, Durability, RedoError};
use crate::node::{DEFAULT_LOCK_WAIT_TIMEOUT, EngineConfig, FragmentUsage};
use crate::storage::page::PAGE_SIZE;
use crate::tc::Table;
use crate::tc::batch::{Batch, Outcome};
use crate::tc::{Commit, Grant, Role, TcError};
use crate::types::value::Value;

const DIR: &str = "/node";
const KV: &str = r#"{"name":"kv","primary_key":["k"],"columns":[{"name":"k","type":"BIGINT"},{"name":"v","type":"VARCHAR(3000)"}]}"#;

fn config() -> EngineConfig {
    EngineConfig {
        node_id: super::NodeId(1),
        data_memory: 256 * PAGE_SIZE as u64,
        ldm_threads: 2,
        fragments_per_table: Some(4),
        seed: None,
        lock_wait_timeout: DEFAULT_LOCK_WAIT_TIMEOUT,
        spin: std::time::Duration::ZERO,
    }
}

/// Runs a test's body on a fresh in-memory file system.
fn on_fresh_disk<T>(body: impl AsyncFnOnce(&MemStorage) -> T) -> T {
    let fs = MemStorage::default();
    crate::test_runtime().block_on(body(&fs))
}

/// Redo segments in these tests: small, so that logs span several.
const SEGMENT: u64 = 64 << 10;

async fn start(fs: &MemStorage) -> Result<Durable, OpenError> {
    open_with(
        config(),
        Arc::new(fs.clone()),
        Path::new(DIR),
        Durability::Sync,
        SEGMENT,
    )
    .await
}

/// Stops a node as `kill -9` would: the log writes nothing more, and the
/// files keep only what was synced (plus `torn` bytes of what was not).
fn crash(node: Durable, fs: &MemStorage, torn: usize) {
    crash_shared(&node, fs, torn);
}

async fn kv(node: &Durable) -> Arc<Table> {
    let engine = &node.engine;
    if let Ok(t) = engine.table("db", "kv") {
        return t;
    }
    let db = DatabaseName::parse("db").unwrap();
    if engine.database("db").is_err() {
        engine.create_database(&db, None).await.unwrap();
    }
    let def: TableDef = serde_json::from_str(KV).unwrap();
    engine.create_table(&db, def).await.unwrap()
}

fn grant(t: &Table) -> Grant {
    Grant {
        database: t.database.id,
        role: Role::ReadWrite,
    }
}

async fn run(
    node: &Durable,
    commit: Commit,
    add: impl FnOnce(&mut Batch),
) -> Result<Vec<Result<Outcome, crate::tc::batch::OperationError>>, TcError> {
    let t = kv(node).await;
    let mut batch = node.engine.tc().batch();
    add(&mut batch);
    node.engine
        .tc()
        .execute(&grant(&t), &mut batch, commit)
        .await?;
    Ok(batch.results())
}

fn put(b: &mut Batch, t: &Arc<Table>, k: i64, v: &str) {
    b.write(t, &[("k", Value::Int(k)), ("v", Value::Text(v.into()))])
        .unwrap();
}

/// Every row of `kv`, by key.
async fn rows(node: &Durable) -> BTreeMap<i64, String> {
    let t = kv(node).await;
    let mut all = BTreeMap::new();
    for row in node.engine.tc().scan(&t, &[], usize::MAX).await.unwrap() {
        let (Some(Value::Int(k)), Some(Value::Text(v))) = (row.get("k"), row.get("v")) else {
            panic!()
        };
        all.insert(*k, v.clone());
    }
    all
}

fn by_fragment(usage: &[FragmentUsage]) -> Vec<(u32, u16, u64, u64, u64)> {
    usage
        .iter()
        .map(|f| {
            (
                f.table_id.0,
                f.fragment,
                f.in_memory_bytes,
                f.free_in_memory_bytes,
                f.rows,
            )
        })
        .collect()
}

#[test]
fn acknowledged_writes_and_the_catalog_survive_a_crash() {
    on_fresh_disk(async |fs| {
        let node = start(fs).await.unwrap();
        let t = kv(&node).await;
        node.engine
            .set_database_quota(
                "db",
                Quota {
                    write_units_per_sec: Some(100_000),
                    in_memory_bytes: Some(1 << 30),
                    ..Quota::UNLIMITED
                },
            )
            .await
            .unwrap();
        run(&node, Commit::Each, |b| {
            (0..100).for_each(|k| put(b, &t, k, &format!("v{k}")))
        })
        .await
        .unwrap();
        run(&node, Commit::Each, |b| {
            (0..10).for_each(|k| b.delete(&t, &[Value::Int(k)]).unwrap());
            (10..20).for_each(|k| put(b, &t, k, &"long".repeat(500)));
        })
        .await
        .unwrap();
        run(&node, Commit::Atomic, |b| {
            (100..110).for_each(|k| put(b, &t, k, "atomic"))
        })
        .await
        .unwrap();
        let before = rows(&node).await;
        crash(node, fs, 0);

        let node = start(fs).await.unwrap();
        assert!(node.recovered.redo_records >= 3);
        assert_eq!(
            rows(&node).await,
            before,
            "every acknowledged write is back"
        );
        let db = node.engine.database("db").unwrap();
        assert_eq!(
            db.quota().write_units_per_sec,
            Some(100_000),
            "quotas are back"
        );
        assert_eq!(node.engine.table("db", "kv").unwrap().fragments(), 4);
        // The node goes on: new writes, and another crash.
        let t = kv(&node).await;
        run(&node, Commit::Each, |b| put(b, &t, 500, "after"))
            .await
            .unwrap();
        crash(node, fs, 0);
        let node = start(fs).await.unwrap();
        assert_eq!(
            rows(&node).await.get(&500).map(String::as_str),
            Some("after")
        );
        node.engine.audit().await;
    });
}

#[test]
fn a_checkpoint_and_the_redo_after_it_recover_together() {
    on_fresh_disk(async |fs| {
        let node = start(fs).await.unwrap();
        let t = kv(&node).await;
        run(&node, Commit::Each, |b| {
            (0..300).for_each(|k| put(b, &t, k, &"x".repeat(k as usize % 700)))
        })
        .await
        .unwrap();
        let summary = node.checkpointer.run(&node.engine).await.unwrap();
        assert_eq!(summary.fragments, 4);
        run(&node, Commit::Each, |b| {
            (0..50).for_each(|k| b.delete(&t, &[Value::Int(k)]).unwrap())
        })
        .await
        .unwrap();
        run(&node, Commit::Atomic, |b| {
            (50..60).for_each(|k| put(b, &t, k, "changed after"))
        })
        .await
        .unwrap();
        // A table made after the checkpoint comes back from the log alone.
        let db = DatabaseName::parse("db").unwrap();
        let late: Arc<Table> = node
            .engine
            .create_table(
                &db,
                serde_json::from_str(&KV.replace("\"kv\"", "\"late\"")).unwrap(),
            )
            .await
            .unwrap();
        let mut b = node.engine.tc().batch();
        put(&mut b, &late, 1, "late row");
        node.engine
            .tc()
            .execute(&grant(&late), &mut b, Commit::Each)
            .await
            .unwrap();
        let before = rows(&node).await;
        crash(node, fs, 0);

        let node = start(fs).await.unwrap();
        assert_eq!(node.recovered.fragments, 4, "the images of kv");
        assert!(node.recovered.redo_records >= 3, "and the log after them");
        assert_eq!(rows(&node).await, before);
        let late = node.engine.table("db", "late").unwrap();
        let mut b = node.engine.tc().batch();
        b.read(&late, &[Value::Int(1)]).unwrap();
        node.engine.tc().execute_unchecked(&mut b).await.unwrap();
        assert!(matches!(b.result(0), Ok(Outcome::Found(_))));
        node.engine.audit().await;
    });
}

#[test]
fn a_clean_restart_gives_back_the_same_memory_to_the_byte() {
    on_fresh_disk(async |fs| {
        let node = start(fs).await.unwrap();
        let t = kv(&node).await;
        run(&node, Commit::Each, |b| {
            (0..400).for_each(|k| put(b, &t, k, &"y".repeat(100 + k as usize % 900)))
        })
        .await
        .unwrap();
        // Holes and shrunk rows, so that the pages are not as a fresh load would pack them.
        run(&node, Commit::Each, |b| {
            (0..400)
                .step_by(3)
                .for_each(|k| b.delete(&t, &[Value::Int(k)]).unwrap())
        })
        .await
        .unwrap();
        run(&node, Commit::Atomic, |b| {
            (1..400).step_by(3).for_each(|k| put(b, &t, k, "short"))
        })
        .await
        .unwrap();
        let before = by_fragment(&node.engine.memory_usage().await.unwrap());
        let pool_before = node.engine.data_memory().used_pages();
        node.close().await.unwrap();

        let node = start(fs).await.unwrap();
        assert_eq!(
            node.recovered.redo_records, 0,
            "a clean stop leaves nothing to replay"
        );
        assert_eq!(
            by_fragment(&node.engine.audit().await),
            before,
            "every fragment's memory is as it was"
        );
        assert_eq!(node.engine.data_memory().used_pages(), pool_before);
        // The same after a crash that follows a checkpoint.
        node.checkpointer.run(&node.engine).await.unwrap();
        crash(node, fs, 0);
        let node = start(fs).await.unwrap();
        assert_eq!(by_fragment(&node.engine.audit().await), before);
    });
}

#[test]
fn a_torn_tail_is_dropped_and_a_half_logged_transaction_is_not_applied() {
    on_fresh_disk(async |fs| {
        let node = Arc::new(start(fs).await.unwrap());
        let t = kv(&node).await;
        run(&node, Commit::Each, |b| {
            (0..20).for_each(|k| put(b, &t, k, "acked"))
        })
        .await
        .unwrap();
        fs.set_faults(Faults {
            hold_syncs: true,
            ..Faults::default()
        });
        // A transaction over both workers is logged but never synced.
        let waiting = {
            let (node, t) = (Arc::clone(&node), Arc::clone(&t));
            tokio::spawn(async move {
                run(&node, Commit::Atomic, |b| {
                    (0..20).for_each(|k| put(b, &t, k, "in flight"))
                })
                .await
            })
        };
        fs.wait_for_held_sync();
        // The crash keeps 30 bytes of the unsynced record: a torn tail.
        crash_shared(&node, fs, 30);
        fs.release_syncs();
        assert!(waiting.await.unwrap().is_err(), "never acknowledged");
        drop(node);

        let node = start(fs).await.unwrap();
        assert!(node.recovered.torn.is_some(), "the torn record was found");
        let all = rows(&node).await;
        assert_eq!(all.len(), 20);
        assert!(
            all.values().all(|v| v == "acked"),
            "none of the half-logged transaction: {all:?}"
        );
    });
}

/// `crash` for a node something else still holds.
fn crash_shared(node: &Durable, fs: &MemStorage, torn: usize) {
    node.log.halt();
    fs.crash(torn);
}

#[test]
fn corruption_before_the_tail_stops_recovery_naming_file_and_offset() {
    on_fresh_disk(async |fs| {
        let node = start(fs).await.unwrap();
        let t = kv(&node).await;
        for k in 0..5 {
            run(&node, Commit::Each, |b| put(b, &t, k, "a row"))
                .await
                .unwrap();
        }
        crash(node, fs, 0);
        let segment = Path::new(DIR).join("redo").join(redo::segment_name(0));
        fs.corrupt(&segment, 40);
        let err = start(fs).await.unwrap_err();
        match &err {
            OpenError::Recovery(RecoveryError::Redo(RedoError::Corrupt {
                path, offset, ..
            })) => {
                assert_eq!(path, &segment);
                assert_eq!(*offset, 0, "the first record holds byte 40");
            }
            other => panic!("{other}"),
        }
        assert!(
            err.to_string()
                .contains("/node/redo/00000000000000000000.redo offset 0"),
            "{err}"
        );
    });
}

#[test]
fn a_lost_catalog_stops_recovery_instead_of_dropping_every_row() {
    for checkpoint in [false, true] {
        on_fresh_disk(async |fs| {
            let node = start(fs).await.unwrap();
            let t = kv(&node).await;
            run(&node, Commit::Each, |b| put(b, &t, 1, "a row"))
                .await
                .unwrap();
            if checkpoint {
                node.checkpointer.run(&node.engine).await.unwrap();
            }
            crash(node, fs, 0);
            fs.remove(&Path::new(DIR).join(catalog_file::FILE)).unwrap();
            let err = start(fs).await.unwrap_err().to_string();
            assert!(err.contains("/node/catalog.json is missing"), "{err}");
        });
    }
}

#[test]
fn a_failing_disk_fails_writes_clearly_and_loses_nothing_acknowledged() {
    for faults in [
        Faults {
            fail_sync: true,
            ..Faults::default()
        },
        Faults {
            space_left: Some(100),
            ..Faults::default()
        },
    ] {
        on_fresh_disk(async |fs| {
            let node = start(fs).await.unwrap();
            let t = kv(&node).await;
            run(&node, Commit::Each, |b| {
                (0..10).for_each(|k| put(b, &t, k, "before"))
            })
            .await
            .unwrap();
            fs.set_faults(faults.clone());
            let err = run(&node, Commit::Each, |b| put(b, &t, 100, &"big".repeat(300)))
                .await
                .unwrap_err();
            assert_eq!(err.code(), "DURABILITY_FAILED", "{faults:?}");
            let said = err.to_string();
            assert!(
                said.contains("injected fsync failure") || said.contains("no space left on device"),
                "{said}"
            );
            let again = run(&node, Commit::Atomic, |b| put(b, &t, 101, "x"))
                .await
                .unwrap_err();
            assert_eq!(again.code(), "DURABILITY_FAILED", "no write is taken after");
            let read = run(&node, Commit::Each, |b| {
                b.read(&t, &[Value::Int(1)]).unwrap()
            })
            .await
            .unwrap();
            assert!(matches!(read[0], Ok(Outcome::Found(_))), "reads go on");
            assert!(
                node.checkpointer.run(&node.engine).await.is_err() || faults.space_left.is_none(),
                "a full disk fails a checkpoint too"
            );
            crash(node, fs, 0);
            fs.set_faults(Faults::default());
            let node = start(fs).await.unwrap();
            let all = rows(&node).await;
            assert_eq!(all.len(), 10, "{faults:?}: {all:?}");
            assert!(all.values().all(|v| v == "before"));
        });
    }
}

#[test]
fn dropped_tables_stay_dropped_and_ids_are_never_reused() {
    on_fresh_disk(async |fs| {
        let node = start(fs).await.unwrap();
        let t = kv(&node).await;
        let old_id = t.id;
        run(&node, Commit::Each, |b| put(b, &t, 1, "old table"))
            .await
            .unwrap();
        node.checkpointer.run(&node.engine).await.unwrap();
        run(&node, Commit::Each, |b| put(b, &t, 2, "old table"))
            .await
            .unwrap();
        node.engine.drop_table("db", "kv").await.unwrap();
        let t = kv(&node).await;
        assert_ne!(t.id, old_id);
        run(&node, Commit::Each, |b| put(b, &t, 3, "new table"))
            .await
            .unwrap();
        crash(node, fs, 0);
        let node = start(fs).await.unwrap();
        let all = rows(&node).await;
        assert_eq!(
            all,
            BTreeMap::from([(3, "new table".to_owned())]),
            "nothing of the dropped table comes back"
        );
        let db = DatabaseName::parse("db").unwrap();
        let def: TableDef = serde_json::from_str(&KV.replace("\"kv\"", "\"other\"")).unwrap();
        let other = node.engine.create_table(&db, def).await.unwrap();
        assert!(other.id.0 > t.id.0, "ids go on from where they were");
    });
}

/// Bytes of every file under `dir`.
fn disk_use(fs: &MemStorage, dir: &Path) -> u64 {
    fs.list(dir)
        .unwrap()
        .iter()
        .map(|p| match fs.read(p) {
            Ok(bytes) => bytes.len() as u64,
            Err(_) => disk_use(fs, p), // a directory
        })
        .sum()
}

#[test]
fn disk_use_stays_bounded_under_a_steady_write_load() {
    on_fresh_disk(async |fs| {
        let node = open_with(
            config(),
            Arc::new(fs.clone()),
            Path::new(DIR),
            Durability::Sync,
            SEGMENT,
        )
        .await
        .unwrap();
        let t = kv(&node).await;
        let mut most = 0;
        for round in 0..60 {
            // The same 100 rows rewritten: about 50 KiB of redo a round.
            run(&node, Commit::Each, |b| {
                (0..100).for_each(|k| put(b, &t, k, &format!("{round}{}", "r".repeat(480))))
            })
            .await
            .unwrap();
            if round % 4 == 3 {
                node.checkpointer.run(&node.engine).await.unwrap();
                let used = disk_use(fs, Path::new(DIR));
                most = most.max(used);
            }
        }
        let images: u64 = node.checkpointer.run(&node.engine).await.unwrap().bytes;
        // One checkpoint's images, the redo since it began (4 rounds), and
        // the segment that was open then.
        let bound = images + 4 * 60_000 + 2 * SEGMENT;
        assert!(most <= bound, "{most} bytes on disk, more than {bound}");
        let segments = fs.list(&Path::new(DIR).join("redo")).unwrap().len();
        assert!(segments <= 6, "{segments} redo segments kept");
    });
}

#[derive(Debug, Clone)]
enum Step {
    Put(i64, usize),
    Delete(i64),
    Pair(i64, i64, usize),
    Checkpoint,
    Crash(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0i64..40, 0usize..2000).prop_map(|(k, n)| Step::Put(k, n)),
        3 => (0i64..40).prop_map(Step::Delete),
        3 => (0i64..40, 0i64..40, 0usize..500).prop_map(|(a, b, n)| Step::Pair(a, b, n)),
        1 => Just(Step::Checkpoint),
        1 => (0usize..64).prop_map(Step::Crash),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random writes, checkpoints and crashes: after every restart the rows
    /// are exactly the acknowledged writes.
    #[test]
    fn restarts_give_back_exactly_what_was_acknowledged(steps in proptest::collection::vec(step(), 1..40)) {
        on_fresh_disk(async |fs| {
            let mut node = start(fs).await.unwrap();
            let mut model: BTreeMap<i64, String> = BTreeMap::new();
            for (i, step) in steps.iter().enumerate() {
                let t = kv(&node).await;
                let value = |n: usize| format!("{i}:{}", "z".repeat(n));
                match step {
                    Step::Put(k, n) => {
                        run(&node, Commit::Each, |b| put(b, &t, *k, &value(*n))).await.unwrap();
                        model.insert(*k, value(*n));
                    }
                    Step::Delete(k) => {
                        run(&node, Commit::Each, |b| b.delete(&t, &[Value::Int(*k)]).unwrap()).await.unwrap();
                        model.remove(k);
                    }
                    Step::Pair(a, b, n) if a != b => {
                        run(&node, Commit::Atomic, |batch| {
                            put(batch, &t, *a, &value(*n));
                            put(batch, &t, *b, &value(*n));
                        })
                        .await
                        .unwrap();
                        model.insert(*a, value(*n));
                        model.insert(*b, value(*n));
                    }
                    Step::Pair(..) => {}
                    Step::Checkpoint => {
                        node.checkpointer.run(&node.engine).await.unwrap();
                    }
                    Step::Crash(torn) => {
                        crash(node, fs, *torn);
                        node = start(fs).await.unwrap();
                        prop_assert_eq!(&rows(&node).await, &model);
                        node.engine.audit().await;
                    }
                }
            }
            crash(node, fs, 7);
            let node = start(fs).await.unwrap();
            prop_assert_eq!(&rows(&node).await, &model);
            Ok(())
        })?;
    }
}

#[test]
fn an_open_transactions_commit_is_logged_whole_and_its_rollback_not_at_all() {
    on_fresh_disk(async |fs| {
        let node = start(fs).await.unwrap();
        let t = kv(&node).await;
        run(&node, Commit::Each, |b| {
            (0..20).for_each(|k| put(b, &t, k, "before"))
        })
        .await
        .unwrap();
        let tc = node.engine.tc();
        let g = grant(&t);
        let mut txn = tc.begin();
        // Rows only locked are not logged; rows locked and then changed
        // are, as changed; statements on several workers commit as one.
        let mut locked = tc.batch();
        (0..10).for_each(|k| locked.read_locking(&t, &[Value::Int(k)]).unwrap());
        tc.execute_in(&g, &mut txn, &mut locked).await.unwrap();
        let mut changed = tc.batch();
        (0..5).for_each(|k| put(&mut changed, &t, k, "in txn"));
        changed.delete(&t, &[Value::Int(19)]).unwrap();
        put(&mut changed, &t, 100, "new");
        tc.execute_in(&g, &mut txn, &mut changed).await.unwrap();
        tc.commit(txn).await.unwrap();
        let mut undone = tc.begin();
        let mut changes = tc.batch();
        (5..15).for_each(|k| put(&mut changes, &t, k, "rolled back"));
        tc.execute_in(&g, &mut undone, &mut changes).await.unwrap();
        tc.rollback(undone).await.unwrap();
        let before = rows(&node).await;
        assert_eq!(before.get(&0).map(String::as_str), Some("in txn"));
        assert_eq!(before.get(&5).map(String::as_str), Some("before"));
        assert_eq!(before.len(), 20);
        crash(node, fs, 0);

        let node = start(fs).await.unwrap();
        assert_eq!(rows(&node).await, before);
        node.engine.audit().await;
    });
}
