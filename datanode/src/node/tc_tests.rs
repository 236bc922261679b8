//! The transaction coordinator through its API: atomic commit across
//! workers, waiting for rows, and every limit and quota.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use shoal_quota::{LimiterClock, Quota};
use shoal_wire::schema::{DatabaseName, TableDef, TenantId};

use super::{DEFAULT_LOCK_WAIT_TIMEOUT, Engine, EngineConfig};
use crate::ldm::{JobOutcome, Mode, TxnId};
use crate::storage::page::PAGE_SIZE;
use crate::tc::batch::{Batch, OperationError, Outcome};
use crate::tc::{Commit, Grant, Role, Table, Tc, TcError, counter};
use crate::types::value::Value;

/// A node's coordinator, with the engine around it for DDL.
#[derive(Clone)]
struct Node {
    engine: Engine,
}

impl std::ops::Deref for Node {
    type Target = Tc;

    fn deref(&self) -> &Tc {
        self.engine.tc()
    }
}

impl Node {
    fn engine(&self) -> &Engine {
        &self.engine
    }
}

struct Setup {
    tc: Node,
    clock: LimiterClock,
}

fn setup(pages: u64, lock_wait: Duration) -> Setup {
    let clock = LimiterClock::manual();
    let engine = Engine::start_with_clock(
        EngineConfig {
            node_id: super::NodeId(1),
            data_memory: pages * PAGE_SIZE as u64,
            ldm_threads: 2,
            fragments_per_table: Some(4),
            seed: None,
            lock_wait_timeout: lock_wait,
            spin: std::time::Duration::ZERO,
        },
        clock.clone(),
    )
    .unwrap();
    Setup {
        tc: Node { engine },
        clock,
    }
}

const KV: &str = r#"{"name":"kv","primary_key":["k"],"columns":[{"name":"k","type":"BIGINT"},{"name":"v","type":"VARCHAR(3000)"}]}"#;

async fn table(tc: &Node, db: &str, tenant: Option<&str>) -> Arc<Table> {
    let name = DatabaseName::parse(db).unwrap();
    let tenant = tenant.map(|t| TenantId::parse(t).unwrap());
    if tc.engine().database(db).is_err() {
        tc.engine()
            .create_database(&name, tenant.as_ref())
            .await
            .unwrap();
    }
    let def: TableDef = serde_json::from_str(KV).unwrap();
    tc.engine().create_table(&name, def).await.unwrap()
}

fn writer(t: &Table) -> Grant {
    Grant {
        database: t.database.id,
        role: Role::ReadWrite,
    }
}

fn row(k: i64, v: &str) -> [(&'static str, Value); 2] {
    [("k", Value::Int(k)), ("v", Value::Text(v.into()))]
}

/// Two keys whose rows live on different workers.
fn keys_on_two_workers(tc: &Node, t: &Arc<Table>) -> (i64, i64) {
    let ldm_of = |k: i64| {
        let mut b = tc.batch();
        b.read(t, &[Value::Int(k)]).unwrap();
        b.ldms.iter().position(|l| !l.ops.is_empty()).unwrap()
    };
    let first = 0;
    let other = (1..1000)
        .find(|&k| ldm_of(k) != ldm_of(first))
        .expect("keys spread over workers");
    (first, other)
}

async fn run(
    tc: &Node,
    grant: &Grant,
    commit: Commit,
    add: impl FnOnce(&mut Batch),
) -> (Result<(), TcError>, Vec<Result<Outcome, OperationError>>) {
    let mut batch = tc.batch();
    add(&mut batch);
    let result = tc.execute(grant, &mut batch, commit).await;
    let outcomes = if result.is_ok() {
        batch.results()
    } else {
        Vec::new()
    };
    (result, outcomes)
}

async fn value(tc: &Node, t: &Arc<Table>, k: i64) -> Option<String> {
    let (result, outcomes) = run(tc, &writer(t), Commit::Each, |b| {
        b.read(t, &[Value::Int(k)]).unwrap()
    })
    .await;
    result.unwrap();
    match &outcomes[0] {
        Ok(Outcome::Found(row)) => match row.get("v") {
            Some(Value::Text(v)) => Some(v.clone()),
            other => panic!("{other:?}"),
        },
        Ok(Outcome::Absent) => None,
        other => panic!("{other:?}"),
    }
}

/// A table in database `db` with rows "a" and "b" on different workers, a
/// grant to write it, and the rows' keys.
async fn rows_on_two_workers(tc: &Node) -> (Arc<Table>, Grant, i64, i64) {
    let t = table(tc, "db", None).await;
    let g = writer(&t);
    let (a, b) = keys_on_two_workers(tc, &t);
    let (result, _) = run(tc, &g, Commit::Each, |batch| {
        batch.insert(&t, &row(a, "a")).unwrap();
        batch.insert(&t, &row(b, "b")).unwrap();
    })
    .await;
    result.unwrap();
    (t, g, a, b)
}

/// Prepares `batch` as transaction `txn` on every worker it touches and
/// leaves it prepared: its rows stay locked until `end`.
pub(super) async fn hold(tc: &Tc, txn: TxnId, batch: &mut Batch) -> Vec<usize> {
    let mut held = Vec::new();
    for ldm in 0..batch.ldms.len() {
        if batch.ldms[ldm].ops.is_empty() {
            continue;
        }
        let ops = std::mem::take(&mut batch.ldms[ldm]);
        let (_, outcome) = tc
            .workers()
            .run(ldm, txn, Mode::Prepare, ops)
            .await
            .unwrap();
        assert_eq!(outcome, JobOutcome::Prepared);
        held.push(ldm);
    }
    held
}

pub(super) async fn end(tc: &Tc, txn: TxnId, ldms: &[usize], commit: bool) {
    for &ldm in ldms {
        let wait = tc.workers().end_transaction(ldm, txn, commit);
        tc.workers().ended(wait).await.unwrap();
    }
}

#[test]
fn a_recycled_batch_answers_as_a_new_one() {
    let rt = crate::test_runtime();
    let s = setup(64, DEFAULT_LOCK_WAIT_TIMEOUT);
    rt.block_on(async {
        let (t, g, a, b) = rows_on_two_workers(&s.tc).await;
        let mut batch = s.tc.batch();
        batch.read(&t, &[Value::Int(a)]).unwrap();
        batch.read(&t, &[Value::Int(b)]).unwrap();
        s.tc.execute(&g, &mut batch, Commit::Each).await.unwrap();
        assert_eq!(batch.results().len(), 2);

        // Emptied, it holds none of the earlier operations or results.
        let mut batch = batch.recycle(64 * 1024).expect("a small batch is kept");
        assert_eq!(batch.len(), 0);
        batch.read(&t, &[Value::Int(b)]).unwrap();
        batch.read(&t, &[Value::Int(-1)]).unwrap();
        batch.insert(&t, &row(7, "c")).unwrap();
        s.tc.execute(&g, &mut batch, Commit::Each).await.unwrap();
        let outcomes = batch.results();
        assert_eq!(outcomes.len(), 3);
        match &outcomes[0] {
            Ok(Outcome::Found(row)) => assert_eq!(row.get("v"), Some(&Value::Text("b".into()))),
            other => panic!("{other:?}"),
        }
        assert!(matches!(outcomes[1], Ok(Outcome::Absent)), "{outcomes:?}");
        assert!(matches!(outcomes[2], Ok(Outcome::Inserted)), "{outcomes:?}");
        assert_eq!(value(&s.tc, &t, 7).await.as_deref(), Some("c"));

        // One that grew past what is kept is let go.
        let mut batch = batch.recycle(64 * 1024).expect("kept");
        let large = "x".repeat(2000);
        for k in 100..140 {
            batch.read(&t, &[Value::Int(k)]).unwrap();
            batch.insert(&t, &row(k + 1000, &large)).unwrap();
        }
        s.tc.execute(&g, &mut batch, Commit::Each).await.unwrap();
        assert!(batch.recycle(64 * 1024).is_none());
    });
}

#[test]
fn atomic_requests_across_workers_are_all_or_nothing() {
    let rt = crate::test_runtime();
    let s = setup(64, DEFAULT_LOCK_WAIT_TIMEOUT);
    rt.block_on(async {
        let t = table(&s.tc, "db", None).await;
        let g = writer(&t);
        let (a, b) = keys_on_two_workers(&s.tc, &t);
        let (r, _) = run(&s.tc, &g, Commit::Atomic, |batch| {
            batch.insert(&t, &row(a, "a0")).unwrap();
            batch.insert(&t, &row(b, "b0")).unwrap();
        })
        .await;
        r.unwrap();
        let before = s.tc.engine().memory_usage().await.unwrap();

        // Failures at prepare, each on the second worker reached or the first:
        // a duplicate key, a missing row, a missing NOT NULL value.
        type Add = Box<dyn Fn(&mut Batch, &Arc<Table>)>;
        let failing: Vec<(Add, &str, usize)> = vec![
            (Box::new(move |batch, t| {
                batch.update(t, &row(a, "a1")).unwrap();
                batch.insert(t, &row(b, "dup")).unwrap();
            }), "DUPLICATE_KEY", 1),
            (Box::new(move |batch, t| {
                batch.insert(t, &row(a + 10_000, "new")).unwrap();
                batch.update(t, &row(b, "b1")).unwrap();
                batch.delete(t, &[Value::Int(a + 20_000)]).unwrap();
            }), "NOT_FOUND", 2),
            (Box::new(move |batch, t| {
                batch.delete(t, &[Value::Int(a)]).unwrap();
                batch.write(t, &[("k", Value::Int(b + 30_000))]).unwrap();
            }), "MISSING_COLUMN", 1),
        ];
        for (add, code, index) in failing {
            let (r, _) = run(&s.tc, &g, Commit::Atomic, |batch| add(batch, &t)).await;
            match r {
                Err(TcError::Operation { index: i, error }) => {
                    assert_eq!((i, error.code()), (index, code));
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(value(&s.tc, &t, a).await.as_deref(), Some("a0"), "{code}: nothing applied");
            assert_eq!(value(&s.tc, &t, b).await.as_deref(), Some("b0"));
            assert_eq!(value(&s.tc, &t, a + 10_000).await, None);
        }
        // Nothing is left locked or allocated: the accounting audit passes and
        // memory is as it was.
        let after = s.tc.engine().audit().await;
        let total = |u: &[crate::node::FragmentUsage]| u.iter().map(|f| (f.in_memory_bytes - f.free_in_memory_bytes, f.rows)).fold((0, 0), |x, y| (x.0 + y.0, x.1 + y.1));
        assert_eq!(total(&before), total(&after));
        // And the rows are free for the next transaction.
        let (r, out) = run(&s.tc, &g, Commit::Atomic, |batch| {
            batch.update(&t, &row(a, "a2")).unwrap();
            batch.read(&t, &[Value::Int(a)]).unwrap();
            batch.delete(&t, &[Value::Int(b)]).unwrap();
            batch.read(&t, &[Value::Int(b)]).unwrap();
        })
        .await;
        r.unwrap();
        assert!(matches!(&out[1], Ok(Outcome::Found(row)) if row.get("v") == Some(&Value::Text("a2".into()))), "a transaction reads its own writes");
        assert_eq!(out[3], Ok(Outcome::Absent), "and its own deletes");
        assert_eq!(value(&s.tc, &t, b).await, None);
    });
}

#[test]
fn running_out_of_memory_at_prepare_undoes_the_other_workers() {
    let rt = crate::test_runtime();
    // Rows and hash indexes take 14 pages, each fragment's primary-key
    // ordered index one more.
    let s = setup(18, DEFAULT_LOCK_WAIT_TIMEOUT);
    rt.block_on(async {
        let t = table(&s.tc, "db", None).await;
        let g = writer(&t);
        let (a, b) = keys_on_two_workers(&s.tc, &t);
        run(&s.tc, &g, Commit::Atomic, |batch| {
            batch.insert(&t, &row(a, "a")).unwrap();
            batch.insert(&t, &row(b, "b")).unwrap();
        })
        .await
        .0
        .unwrap();
        // Fill the pool until a transaction touching a and b fails.
        let mut failed = None;
        for i in 1..200 {
            let big = "x".repeat(2900);
            let (r, _) = run(&s.tc, &g, Commit::Atomic, |batch| {
                batch.update(&t, &row(a, &format!("a{i}"))).unwrap();
                for j in 0..8 {
                    batch.insert(&t, &row(b + 1000 * i + j * 2, &big)).unwrap();
                }
            })
            .await;
            if let Err(e) = r {
                failed = Some((i, e));
                break;
            }
        }
        let (i, e) = failed.expect("the pool fills up");
        assert_eq!(e.code(), "OUT_OF_DATA_MEMORY");
        assert_eq!(
            value(&s.tc, &t, a).await,
            Some(format!("a{}", i - 1)),
            "the update of a was undone"
        );
        s.tc.engine().audit().await;
    });
}

#[test]
fn conflicting_transactions_serialize() {
    let rt = crate::test_runtime();
    let s = setup(64, DEFAULT_LOCK_WAIT_TIMEOUT);
    rt.block_on(async {
        let t = table(&s.tc, "db", None).await;
        let (a, b) = keys_on_two_workers(&s.tc, &t);
        let g = writer(&t);
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let (tc, t) = (s.tc.clone(), Arc::clone(&t));
                tokio::spawn(async move {
                    let v = format!("writer {i}");
                    let mut batch = tc.batch();
                    // Half the writers name the rows the other way round.
                    let (first, second) = if i % 2 == 0 { (a, b) } else { (b, a) };
                    batch.write(&t, &row(first, &v)).unwrap();
                    batch.write(&t, &row(second, &v)).unwrap();
                    tc.execute(&g, &mut batch, Commit::Atomic).await
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        let (va, vb) = (value(&s.tc, &t, a).await, value(&s.tc, &t, b).await);
        assert!(va.is_some());
        assert_eq!(va, vb, "both rows come from the same writer");
        s.tc.engine().audit().await;
    });
}

#[test]
fn readers_see_committed_rows_and_writers_wait_for_the_holder() {
    let rt = crate::test_runtime();
    let s = setup(64, DEFAULT_LOCK_WAIT_TIMEOUT);
    rt.block_on(async {
        let t = table(&s.tc, "db", None).await;
        let g = writer(&t);
        run(&s.tc, &g, Commit::Each, |b| {
            b.insert(&t, &row(1, "committed")).unwrap()
        })
        .await
        .0
        .unwrap();
        let mut holder = s.tc.batch();
        holder.update(&t, &row(1, "uncommitted")).unwrap();
        holder.insert(&t, &row(2, "new")).unwrap();
        let held = hold(&s.tc, 9_999_001, &mut holder).await;
        assert_eq!(
            value(&s.tc, &t, 1).await.as_deref(),
            Some("committed"),
            "readers do not wait or see uncommitted data"
        );
        assert_eq!(value(&s.tc, &t, 2).await, None);
        let scanned = s.tc.scan(&t, &[], 10).await.unwrap();
        assert_eq!(scanned.len(), 1, "a scan sees committed rows only");

        // A writer of the held row waits; once the holder commits, it goes on.
        let (tc, t2) = (s.tc.clone(), Arc::clone(&t));
        let waiter = tokio::spawn(async move {
            run(&tc, &g, Commit::Atomic, |b| {
                b.update(&t2, &row(1, "second")).unwrap()
            })
            .await
            .0
        });
        tokio::task::yield_now().await;
        end(&s.tc, 9_999_001, &held, true).await;
        waiter.await.unwrap().unwrap();
        assert_eq!(value(&s.tc, &t, 1).await.as_deref(), Some("second"));
        assert_eq!(value(&s.tc, &t, 2).await.as_deref(), Some("new"));
        s.tc.engine().audit().await;
    });
}

/// The value write `i` gives a row: its number, then a run of one letter
/// whose length and letter follow from it — a var part of a new size at
/// almost every write.
fn versioned(i: usize) -> String {
    let letter = char::from(b'a' + (i % 26) as u8);
    format!("{i:06}{}", letter.to_string().repeat(i * 613 % 2900))
}

/// The write a value came from, if it is whole: one write's number, letter
/// and length, not parts of two.
fn version_of(v: &str) -> Option<usize> {
    let i: usize = v.get(..6)?.parse().ok()?;
    (versioned(i) == v).then_some(i)
}

#[test]
fn reads_beside_the_workers_see_whole_rows_that_never_go_back() {
    // Reads are not sent to the workers: they run on the reader's thread,
    // beside the worker changing the rows (`Ldm::shared`). However they
    // interleave, a read sees a row as one write left it, never part of
    // one and part of another, and never older than a row it saw before.
    let rt = crate::test_runtime();
    let s = setup(512, DEFAULT_LOCK_WAIT_TIMEOUT);
    let (t, g, a, b) = rt.block_on(rows_on_two_workers(&s.tc));
    let write = |i: usize| {
        rt.block_on(async {
            let (r, out) = run(&s.tc, &g, Commit::Each, |batch| {
                batch.update(&t, &row(a, &versioned(i))).unwrap();
                batch.update(&t, &row(b, &versioned(i))).unwrap();
            })
            .await;
            r.unwrap();
            assert!(out.iter().all(|o| *o == Ok(Outcome::Updated)), "{out:?}");
        })
    };
    write(0);
    const WRITES: usize = 300;
    let done = std::sync::atomic::AtomicBool::new(false);
    let read_rounds = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (tc, t, g, done) = (s.tc.clone(), Arc::clone(&t), g, &done);
                scope.spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    rt.block_on(async {
                        let mut seen = [0usize; 2];
                        let mut rounds = 0;
                        // Bounded: the writer ends, or 20,000 rounds do.
                        while !done.load(std::sync::atomic::Ordering::Acquire) && rounds < 20_000 {
                            rounds += 1;
                            let (r, out) = run(&tc, &g, Commit::Each, |batch| {
                                batch.read(&t, &[Value::Int(a)]).unwrap();
                                batch.read(&t, &[Value::Int(b)]).unwrap();
                            })
                            .await;
                            r.unwrap();
                            for (k, outcome) in out.iter().enumerate() {
                                let Ok(Outcome::Found(row)) = outcome else {
                                    panic!("{outcome:?}");
                                };
                                let Some(Value::Text(v)) = row.get("v") else {
                                    panic!("{row:?}");
                                };
                                let i = version_of(v).unwrap_or_else(|| panic!("torn: {v:.40}"));
                                assert!(i >= seen[k], "went back from {} to {i}", seen[k]);
                                seen[k] = i;
                            }
                            if rounds % 8 == 0 {
                                for row in tc.scan(&t, &[], 10).await.unwrap() {
                                    let Some(Value::Text(v)) = row.get("v") else {
                                        panic!("{row:?}");
                                    };
                                    assert!(version_of(v).is_some(), "torn: {v:.40}");
                                }
                            }
                        }
                        rounds
                    })
                })
            })
            .collect();
        (1..=WRITES).for_each(write);
        done.store(true, std::sync::atomic::Ordering::Release);
        (readers.into_iter())
            .map(|r| r.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert!(read_rounds.iter().all(|&n| n > 0), "{read_rounds:?}");
    rt.block_on(async {
        assert_eq!(value(&s.tc, &t, a).await, Some(versioned(WRITES)));
        s.tc.engine().audit().await;
    });
}

#[test]
fn a_writer_that_waits_too_long_gets_a_retryable_error_and_changes_nothing() {
    let rt = crate::test_runtime();
    let s = setup(64, Duration::from_millis(20));
    rt.block_on(async {
        let (t, g, a, b) = rows_on_two_workers(&s.tc).await;
        let mut holder = s.tc.batch();
        holder.delete(&t, &[Value::Int(b)]).unwrap();
        let held = hold(&s.tc, 9_999_002, &mut holder).await;
        // The holder never finishes while these run: they must time out.
        let (r, _) = run(&s.tc, &g, Commit::Atomic, |batch| {
            batch.update(&t, &row(a, "changed")).unwrap();
            batch.update(&t, &row(b, "changed")).unwrap();
        })
        .await;
        match r {
            Err(TcError::Operation { index: 1, error }) => {
                assert_eq!(
                    (error.code(), error.number()),
                    ("LOCK_WAIT_TIMEOUT", Some(266))
                );
                assert!(error.is_retryable());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            value(&s.tc, &t, a).await.as_deref(),
            Some("a"),
            "the part that went through was undone"
        );
        let (r, out) = run(&s.tc, &g, Commit::Each, |batch| {
            batch.update(&t, &row(b, "each")).unwrap();
            batch.update(&t, &row(a, "each")).unwrap();
        })
        .await;
        r.unwrap();
        assert_eq!(
            out[0].as_ref().unwrap_err().code(),
            "LOCK_WAIT_TIMEOUT",
            "on its own, only the waiting operation fails"
        );
        assert_eq!(out[1], Ok(Outcome::Updated));
        end(&s.tc, 9_999_002, &held, false).await;
        assert_eq!(
            value(&s.tc, &t, b).await.as_deref(),
            Some("b"),
            "the aborted delete is undone"
        );
        s.tc.engine().audit().await;
    });
}

/// A request made on a worker's own thread (as a connection served there
/// makes it) reaches that worker without a message, and still parks on a
/// held row, times out, and goes through once the row is let go.
#[test]
fn a_request_on_a_workers_own_thread_waits_and_times_out_like_any_other() {
    let rt = crate::test_runtime();
    let s = setup(64, Duration::from_millis(20));
    rt.block_on(async {
        let (t, g, _, b) = rows_on_two_workers(&s.tc).await;
        let mut holder = s.tc.batch();
        holder.delete(&t, &[Value::Int(b)]).unwrap();
        let held = hold(&s.tc, 9_999_003, &mut holder).await;
        assert_eq!(held.len(), 1, "one row, on one worker");
        let on_its_worker = |value: &'static str| {
            let (tc, t) = (s.tc.clone(), Arc::clone(&t));
            let (tell, told) = tokio::sync::oneshot::channel();
            s.tc.spawn_on_worker(held[0], async move {
                let outcome = run(&tc, &g, Commit::Each, |batch| {
                    batch.update(&t, &row(b, value)).unwrap();
                })
                .await;
                let _ = tell.send(outcome);
            });
            told
        };
        // The bound is a guard against a wait that never ends, not a timing.
        let (r, out) = tokio::time::timeout(Duration::from_secs(60), on_its_worker("local"))
            .await
            .expect("the parked request timed out")
            .unwrap();
        r.unwrap();
        assert_eq!(out[0].as_ref().unwrap_err().code(), "LOCK_WAIT_TIMEOUT");
        end(&s.tc, 9_999_003, &held, false).await;
        let (r, out) = on_its_worker("local").await.unwrap();
        r.unwrap();
        assert_eq!(out[0], Ok(Outcome::Updated));
        assert_eq!(value(&s.tc, &t, b).await.as_deref(), Some("local"));
        s.tc.engine().audit().await;
    });
}

#[test]
fn a_request_dropped_while_waiting_lets_go_of_its_rows() {
    let rt = crate::test_runtime();
    // Long enough that the dropped request is still waiting when dropped, and
    // a leaked lock would fail the last write rather than hang the test.
    let s = setup(64, Duration::from_secs(5));
    rt.block_on(async {
        let (t, g, a, b) = rows_on_two_workers(&s.tc).await;
        let mut holder = s.tc.batch();
        holder.update(&t, &row(b, "held")).unwrap();
        let held = hold(&s.tc, 9_999_003, &mut holder).await;
        // This request locks a on one worker, then waits for b on the other:
        // its caller gives up (drops it) while it waits.
        let (tc, t2) = (s.tc.clone(), Arc::clone(&t));
        let waiting = tokio::spawn(async move {
            run(&tc, &g, Commit::Atomic, |batch| {
                batch.update(&t2, &row(a, "dropped")).unwrap();
                batch.update(&t2, &row(b, "dropped")).unwrap();
            })
            .await
        });
        while s.tc.engine().inspect().await.1 == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            s.tc.engine().inspect().await,
            (2, 1),
            "two transactions hold rows, one job waits"
        );
        waiting.abort();
        assert!(waiting.await.unwrap_err().is_cancelled());
        end(&s.tc, 9_999_003, &held, true).await;
        assert_eq!(
            s.tc.engine().inspect().await,
            (0, 0),
            "the dropped request holds nothing and waits for nothing"
        );
        let (r, out) = run(&s.tc, &g, Commit::Each, |batch| {
            batch.update(&t, &row(a, "after")).unwrap()
        })
        .await;
        r.unwrap();
        assert_eq!(out[0], Ok(Outcome::Updated));
        assert_eq!(value(&s.tc, &t, b).await.as_deref(), Some("held"));
        s.tc.engine().audit().await;
    });
}

#[test]
fn grants_are_checked_first() {
    let rt = crate::test_runtime();
    let s = setup(64, DEFAULT_LOCK_WAIT_TIMEOUT);
    rt.block_on(async {
        let t = table(&s.tc, "db", None).await;
        let other = table(&s.tc, "other", None).await;
        let reader = Grant {
            database: t.database.id,
            role: Role::Read,
        };
        let (r, _) = run(&s.tc, &reader, Commit::Each, |b| {
            b.insert(&t, &row(1, "x")).unwrap()
        })
        .await;
        assert_eq!(r.unwrap_err().code(), "FORBIDDEN");
        let (r, _) = run(&s.tc, &reader, Commit::Each, |b| {
            b.read(&t, &[Value::Int(1)]).unwrap()
        })
        .await;
        r.unwrap();
        let (r, _) = run(&s.tc, &writer(&other), Commit::Each, |b| {
            b.read(&t, &[Value::Int(1)]).unwrap()
        })
        .await;
        assert_eq!(
            r.unwrap_err().code(),
            "FORBIDDEN",
            "a key for another database"
        );
        let (r, _) = run(&s.tc, &writer(&t), Commit::Each, |b| {
            b.read(&t, &[Value::Int(1)]).unwrap();
            b.read(&other, &[Value::Int(1)]).unwrap();
        })
        .await;
        assert_eq!(
            r.unwrap_err().code(),
            "FORBIDDEN",
            "one request, one database"
        );
        assert_eq!(value(&s.tc, &t, 1).await, None);
    });
}

#[test]
fn size_and_parallelism_limits_refuse_before_anything_runs() {
    let rt = crate::test_runtime();
    let s = setup(64, Duration::from_secs(600));
    rt.block_on(async {
        let t = table(&s.tc, "db", None).await;
        let g = writer(&t);
        let quota = Quota {
            max_transaction_ops: Some(3),
            max_parallel_transactions: Some(1),
            ..Quota::UNLIMITED
        };
        let db = s.tc.engine().set_database_quota("db", quota).await.unwrap();
        let (r, _) = run(&s.tc, &g, Commit::Each, |b| {
            (0..4).for_each(|k| b.insert(&t, &row(k, "x")).unwrap())
        })
        .await;
        let e = r.unwrap_err();
        assert_eq!(e.code(), "TRANSACTION_TOO_LARGE");
        let TcError::Quota(q) = &e else { panic!() };
        assert_eq!((q.number(), q.http_status()), (Some(247), 413));
        assert_eq!(
            e.to_string(),
            "a request to database 'db' has 4 operations, more than its limit of 3"
        );
        assert_eq!(value(&s.tc, &t, 0).await, None, "nothing of it ran");

        // One request in flight, parked on a held row; a second is refused.
        run(&s.tc, &g, Commit::Each, |b| {
            b.insert(&t, &row(1, "x")).unwrap()
        })
        .await
        .0
        .unwrap();
        let mut holder = s.tc.batch();
        holder.update(&t, &row(1, "held")).unwrap();
        let held = hold(&s.tc, 9_999_004, &mut holder).await;
        let (tc, t2) = (s.tc.clone(), Arc::clone(&t));
        let first = tokio::spawn(async move {
            run(&tc, &g, Commit::Each, |b| {
                b.update(&t2, &row(1, "first")).unwrap()
            })
            .await
            .0
        });
        while db.governance.in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        let (r, _) = run(&s.tc, &g, Commit::Each, |b| {
            b.insert(&t, &row(2, "second")).unwrap()
        })
        .await;
        let e = r.unwrap_err();
        assert_eq!(e.code(), "TOO_MANY_TRANSACTIONS");
        let TcError::Quota(q) = &e else { panic!() };
        assert_eq!(
            (q.number(), q.http_status(), q.resp_prefix()),
            (Some(248), 429, "THROTTLED")
        );
        end(&s.tc, 9_999_004, &held, true).await;
        first.await.unwrap().unwrap();
        assert_eq!(value(&s.tc, &t, 1).await.as_deref(), Some("first"));
        assert_eq!(
            value(&s.tc, &t, 2).await,
            None,
            "the refused insert did nothing"
        );
        assert_eq!(counter(&db.governance.counters.quota_rejections), 2);
    });
}

#[test]
fn rates_throttle_with_a_retry_time_and_change_at_run_time() {
    let rt = crate::test_runtime();
    let s = setup(64, DEFAULT_LOCK_WAIT_TIMEOUT);
    rt.block_on(async {
        let t = table(&s.tc, "db", None).await;
        let g = writer(&t);
        s.tc.engine()
            .set_database_quota(
                "db",
                Quota {
                    write_units_per_sec: Some(10),
                    read_units_per_sec: Some(4),
                    ..Quota::UNLIMITED
                },
            )
            .await
            .unwrap();
        // 10 one-unit writes use the burst; the 11th is throttled.
        for k in 0..10 {
            run(&s.tc, &g, Commit::Each, |b| {
                b.insert(&t, &row(k, "x")).unwrap()
            })
            .await
            .0
            .unwrap();
        }
        let (r, _) = run(&s.tc, &g, Commit::Each, |b| {
            b.insert(&t, &row(10, "x")).unwrap()
        })
        .await;
        let TcError::Quota(e) = r.unwrap_err() else {
            panic!()
        };
        assert_eq!(
            (e.code(), e.number(), e.http_status(), e.resp_prefix()),
            ("WRITE_RATE", Some(243), 429, "THROTTLED")
        );
        assert_eq!(e.retry_after_ms(), Some(100), "one unit at 10 per second");
        assert_eq!(
            value(&s.tc, &t, 10).await,
            None,
            "the throttled write did nothing"
        );
        // After the wait it names, it goes through.
        s.clock.advance(Duration::from_millis(100));
        run(&s.tc, &g, Commit::Each, |b| {
            b.insert(&t, &row(10, "x")).unwrap()
        })
        .await
        .0
        .unwrap();
        // A 3000-byte row costs 3 units: more than is left, and the wait says so.
        let (r, _) = run(&s.tc, &g, Commit::Each, |b| {
            b.insert(&t, &row(11, &"x".repeat(2900))).unwrap()
        })
        .await;
        let TcError::Quota(e) = r.unwrap_err() else {
            panic!()
        };
        assert_eq!(e.retry_after_ms(), Some(300));
        // More units at once than the burst: refused for good.
        let (r, _) = run(&s.tc, &g, Commit::Each, |b| {
            (20..31).for_each(|k| b.insert(&t, &row(k, "x")).unwrap())
        })
        .await;
        let TcError::Quota(e) = r.unwrap_err() else {
            panic!()
        };
        assert_eq!(e.code(), "REQUEST_EXCEEDS_BURST");
        assert!(!e.is_retryable());
        // The rate changes at run time: the very next request is judged by it.
        s.tc.engine()
            .set_database_quota(
                "db",
                Quota {
                    write_units_per_sec: Some(1000),
                    read_units_per_sec: Some(4),
                    ..Quota::UNLIMITED
                },
            )
            .await
            .unwrap();
        run(&s.tc, &g, Commit::Each, |b| {
            (20..31).for_each(|k| b.insert(&t, &row(k, "x")).unwrap())
        })
        .await
        .0
        .unwrap();

        // Reads: four units a second. A 2900-byte row is one unit, so reads
        // go one unit each; the fifth is throttled.
        s.clock.advance(Duration::from_secs(5));
        for _ in 0..4 {
            run(&s.tc, &g, Commit::Each, |b| {
                b.read(&t, &[Value::Int(1)]).unwrap()
            })
            .await
            .0
            .unwrap();
        }
        let (r, _) = run(&s.tc, &g, Commit::Each, |b| {
            b.read(&t, &[Value::Int(1)]).unwrap()
        })
        .await;
        let TcError::Quota(e) = r.unwrap_err() else {
            panic!()
        };
        assert_eq!((e.code(), e.number()), ("READ_RATE", Some(2203)));
        assert_eq!(e.retry_after_ms(), Some(250));
        let db = s.tc.engine().database("db").unwrap();
        let c = &db.governance.counters;
        assert_eq!(
            (counter(&c.throttled_writes), counter(&c.throttled_reads)),
            (2, 1)
        );
        assert_eq!(
            counter(&c.read_units),
            5,
            "the read after the throttled write, and four"
        );
        assert_eq!(
            counter(&c.write_units),
            10 + 1 + 11,
            "refused requests use no units"
        );
        assert_eq!(
            counter(&c.quota_rejections),
            1,
            "the request over the burst"
        );
    });
}

#[test]
fn reads_of_large_rows_pay_for_their_size_on_the_next_request() {
    let rt = crate::test_runtime();
    let s = setup(64, DEFAULT_LOCK_WAIT_TIMEOUT);
    rt.block_on(async {
        let t = table(&s.tc, "db", None).await;
        let g = writer(&t);
        let big: String = "x".repeat(3000);
        let wide = r#"{"name":"wide","primary_key":["k"],"columns":[{"name":"k","type":"BIGINT"},{"name":"a","type":"VARCHAR(3000)"},{"name":"b","type":"VARCHAR(3000)"}]}"#;
        let wide: Arc<Table> = s.tc.engine().create_table(&DatabaseName::parse("db").unwrap(), serde_json::from_str(wide).unwrap()).await.unwrap();
        run(&s.tc, &g, Commit::Each, |b| b.insert(&wide, &[("k", Value::Int(1)), ("a", Value::Text(big.clone())), ("b", Value::Text(big.clone()))]).unwrap()).await.0.unwrap();
        s.tc.engine().set_database_quota("db", Quota { read_units_per_sec: Some(10), ..Quota::UNLIMITED }).await.unwrap();
        // A 6 KiB row costs two read units: one up front, one owed.
        for _ in 0..5 {
            run(&s.tc, &g, Commit::Each, |b| b.read(&wide, &[Value::Int(1)]).unwrap()).await.0.unwrap();
        }
        let (r, _) = run(&s.tc, &g, Commit::Each, |b| b.read(&t, &[Value::Int(1)]).unwrap()).await;
        assert_eq!(r.unwrap_err().code(), "READ_RATE", "10 units are spent by 5 reads of 2 units");
        let db = s.tc.engine().database("db").unwrap();
        assert_eq!(counter(&db.governance.counters.read_units), 10);
    });
}

#[test]
fn the_memory_quota_refuses_growth_but_not_reads_or_deletes() {
    let rt = crate::test_runtime();
    let s = setup(256, DEFAULT_LOCK_WAIT_TIMEOUT);
    rt.block_on(async {
        let t = table(&s.tc, "db", None).await;
        let g = writer(&t);
        let limit = 20 * PAGE_SIZE as u64;
        let db = s.tc.engine().set_database_quota("db", Quota { in_memory_bytes: Some(limit), ..Quota::UNLIMITED }).await.unwrap();
        // Insert until the quota stops it, by the TC or the worker.
        let mut k = 0;
        loop {
            let (r, out) = run(&s.tc, &g, Commit::Each, |b| b.insert(&t, &row(k, &"v".repeat(2000))).unwrap()).await;
            match r.map(|()| out[0].clone()) {
                Ok(Ok(_)) => k += 1,
                Ok(Err(e)) => break assert_eq!(e.code(), "MEMORY_QUOTA"),
                Err(e) => break assert_eq!(e.code(), "MEMORY_QUOTA"),
            }
        }
        assert!(db.memory_bytes() <= limit, "no page past the quota");
        assert_eq!(value(&s.tc, &t, k).await, None, "the refused insert left nothing");

        // One page below the quota, the TC lets a batch through; the workers
        // refuse the operations that would take a page too many.
        let room = db.memory_bytes() + PAGE_SIZE as u64;
        s.tc.engine().set_database_quota("db", Quota { in_memory_bytes: Some(room), ..Quota::UNLIMITED }).await.unwrap();
        let (r, out) = run(&s.tc, &g, Commit::Each, |b| (1000..1400).for_each(|k| b.insert(&t, &row(k, &"v".repeat(2000))).unwrap())).await;
        r.unwrap();
        let refused: Vec<&OperationError> = out.iter().filter_map(|o| o.as_ref().err()).collect();
        assert!(!refused.is_empty() && refused.iter().all(|e| e.code() == "MEMORY_QUOTA"), "{refused:?}");
        assert!(refused[0].to_string().starts_with("database 'db' is at its memory quota"), "{}", refused[0]);
        assert!(db.memory_bytes() <= room, "no page past the quota");
        for (i, o) in out.iter().enumerate() {
            let stored = value(&s.tc, &t, 1000 + i as i64).await.is_some();
            assert_eq!(stored, o.is_ok(), "exactly the admitted rows are there");
        }

        // With the quota at what the database holds, the TC refuses growth
        // before any work.
        let usage = db.memory_bytes();
        s.tc.engine().set_database_quota("db", Quota { in_memory_bytes: Some(usage), ..Quota::UNLIMITED }).await.unwrap();
        let (r, _) = run(&s.tc, &g, Commit::Each, |b| b.insert(&t, &row(-1, "tiny")).unwrap()).await;
        let TcError::Quota(e) = r.unwrap_err() else { panic!() };
        assert_eq!((e.code(), e.number(), e.http_status(), e.resp_prefix()), ("MEMORY_QUOTA", Some(239), 507, "QUOTA"));
        assert_eq!(e.to_string(), format!("database 'db' is at its memory quota: {usage} of {usage} bytes in use; reads and deletes still work"));
        let (r, _) = run(&s.tc, &g, Commit::Each, |b| b.update(&t, &row(0, "shorter")).unwrap()).await;
        assert_eq!(r.unwrap_err().code(), "MEMORY_QUOTA", "an update can grow a row");
        assert_eq!(value(&s.tc, &t, 0).await.map(|v| v.len()), Some(2000), "reads work at the quota");
        let (r, out) = run(&s.tc, &g, Commit::Atomic, |b| (0..k).for_each(|k| b.delete(&t, &[Value::Int(k)]).unwrap())).await;
        r.unwrap();
        assert!(out.iter().all(|o| o.is_ok()), "deletes work at the quota");
        assert!(db.memory_bytes() < usage, "and give memory back");
        run(&s.tc, &g, Commit::Each, |b| b.insert(&t, &row(-1, "tiny")).unwrap()).await.0.unwrap();
        let rejections = 1 + refused.len() as u64 + 2;
        assert_eq!(counter(&db.governance.counters.quota_rejections), rejections);
        s.tc.engine().audit().await;
    });
}

#[test]
fn a_tenant_quota_bounds_its_databases_together() {
    let rt = crate::test_runtime();
    let s = setup(256, DEFAULT_LOCK_WAIT_TIMEOUT);
    rt.block_on(async {
        let one = table(&s.tc, "one", Some("acme")).await;
        let two = table(&s.tc, "two", Some("acme")).await;
        let free = table(&s.tc, "free", Some("other")).await;
        let limit = 16 * PAGE_SIZE as u64;
        s.tc.engine()
            .set_tenant_quota(
                &TenantId::parse("acme").unwrap(),
                Quota {
                    in_memory_bytes: Some(limit),
                    ..Quota::UNLIMITED
                },
            )
            .await
            .unwrap();
        // Fills a table until its tenant's quota stops it; the error.
        let fill = |t: Arc<Table>| {
            let tc = s.tc.clone();
            async move {
                let mut k = 0;
                loop {
                    let (r, out) = run(&tc, &writer(&t), Commit::Each, |b| {
                        b.insert(&t, &row(k, &"v".repeat(2500))).unwrap()
                    })
                    .await;
                    match r.map(|()| out[0].clone()) {
                        Ok(Ok(_)) => k += 1,
                        Ok(Err(e)) => return e.to_string(),
                        Err(e) => return e.to_string(),
                    }
                }
            }
        };
        let first = fill(Arc::clone(&one)).await;
        let second = fill(Arc::clone(&two)).await;
        for e in [first, second] {
            assert!(e.starts_with("tenant 'acme' is at its memory quota"), "{e}");
        }
        let tenant = s.tc.engine().tenant("acme").unwrap();
        assert!(tenant.memory_bytes() <= limit);
        assert_eq!(
            tenant.memory_bytes(),
            one.database.memory_bytes() + two.database.memory_bytes()
        );
        // Another tenant is not touched.
        run(&s.tc, &writer(&free), Commit::Each, |b| {
            b.insert(&free, &row(1, &"v".repeat(2500))).unwrap()
        })
        .await
        .0
        .unwrap();
        assert_eq!(value(&s.tc, &free, 1).await.map(|v| v.len()), Some(2500));
    });
}

#[test]
fn units_other_nodes_admitted_are_taken_first_a_burst_at_a_time() {
    let rt = crate::test_runtime();
    let s = setup(64, DEFAULT_LOCK_WAIT_TIMEOUT);
    rt.block_on(async {
        let t = table(&s.tc, "db", None).await;
        let g = writer(&t);
        s.tc.engine()
            .set_database_quota(
                "db",
                Quota {
                    write_units_per_sec: Some(10),
                    ..Quota::UNLIMITED
                },
            )
            .await
            .unwrap();
        let write = |k: i64| {
            let (tc, t, g) = (&s.tc, &t, &g);
            async move {
                run(tc, g, Commit::Each, |b| b.insert(t, &row(k, "x")).unwrap())
                    .await
                    .0
            }
        };
        let gov = &t.database.governance;
        // Another node admitted 25 write units (more than the burst of 10)
        // and 7 reads, which no limit here applies to: the writes come
        // first, a burst at a time.
        gov.admitted_elsewhere(7, 25);
        let TcError::Quota(e) = write(0).await.unwrap_err() else {
            panic!()
        };
        assert_eq!(e.code(), "WRITE_RATE");
        // Ten units taken, fifteen still owed; a second on, ten more.
        s.clock.advance(Duration::from_millis(1000));
        assert!(write(0).await.is_err(), "five still owed");
        // Half a second on, the last five: none left for this write.
        s.clock.advance(Duration::from_millis(500));
        assert!(write(0).await.is_err(), "the owed units came first");
        s.clock.advance(Duration::from_millis(100));
        write(0).await.unwrap();
        assert_eq!(gov.admitted(), (0, 1), "only this node's own units count");
        // Nothing more owed: the rest of the burst is this node's.
        s.clock.advance(Duration::from_millis(1000));
        for k in 1..=10 {
            write(k).await.unwrap();
        }
        assert!(write(11).await.is_err());
    });
}

#[test]
fn an_open_transaction_holds_its_rows_across_statements_and_commits_as_one() {
    let rt = crate::test_runtime();
    let s = setup(64, Duration::from_millis(200));
    rt.block_on(async {
        let (t, g, a, b) = rows_on_two_workers(&s.tc).await;
        let quota = Quota {
            max_parallel_transactions: Some(10),
            ..Quota::UNLIMITED
        };
        let db = s.tc.engine().set_database_quota("db", quota).await.unwrap();
        let statement = |add: &dyn Fn(&mut Batch)| {
            let mut batch = s.tc.batch();
            add(&mut batch);
            batch
        };
        let mut txn = s.tc.begin();
        let mut first = statement(&|b| b.update(&t, &row(a, "A")).unwrap());
        s.tc.execute_in(&g, &mut txn, &mut first).await.unwrap();
        assert_eq!(db.governance.in_flight(), 1, "counted while it is open");

        // Its own reads see its change; everyone else's see what is committed.
        let mut read = statement(&|batch| batch.read(&t, &[Value::Int(a)]).unwrap());
        s.tc.execute_in(&g, &mut txn, &mut read).await.unwrap();
        let Ok(Outcome::Found(own)) = read.result(0) else {
            panic!()
        };
        assert_eq!(own.get("v"), Some(&Value::Text("A".into())));
        assert_eq!(value(&s.tc, &t, a).await.as_deref(), Some("a"));

        // Images asked for now wait for the transaction, and its next
        // statements on the workers it holds rows on are not held back
        // behind them.
        let images: Vec<_> = (t.fragments.iter())
            .map(|&place| {
                let (tc, id) = (s.tc.clone(), t.id);
                tokio::spawn(async move { tc.workers().image(id, place).await.unwrap() })
            })
            .collect();
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let mut second = statement(&|batch| {
            batch.read_locking(&t, &[Value::Int(b)]).unwrap();
            batch.update(&t, &row(a, "A2")).unwrap();
        });
        s.tc.execute_in(&g, &mut txn, &mut second).await.unwrap();

        // A writer of a row it locked waits for it, and times out.
        let (r, _) = run(&s.tc, &g, Commit::Atomic, |batch| {
            batch.update(&t, &row(b, "B")).unwrap()
        })
        .await;
        assert_eq!(r.unwrap_err().code(), "LOCK_WAIT_TIMEOUT");

        s.tc.commit(txn).await.unwrap();
        for image in images {
            assert!(image.await.unwrap().is_some());
        }
        assert_eq!(value(&s.tc, &t, a).await.as_deref(), Some("A2"));
        assert_eq!(value(&s.tc, &t, b).await.as_deref(), Some("b"));
        assert_eq!(db.governance.in_flight(), 0);

        // Rolled back, everything it did is undone; a failed operation
        // rolls the whole transaction back.
        let mut txn = s.tc.begin();
        let mut changes = statement(&|batch| {
            batch.delete(&t, &[Value::Int(a)]).unwrap();
            batch.insert(&t, &row(1_000_001, "new")).unwrap();
        });
        s.tc.execute_in(&g, &mut txn, &mut changes).await.unwrap();
        s.tc.rollback(txn).await.unwrap();
        assert_eq!(value(&s.tc, &t, a).await.as_deref(), Some("A2"));
        assert_eq!(value(&s.tc, &t, 1_000_001).await, None);

        let mut txn = s.tc.begin();
        let mut fine = statement(&|batch| batch.update(&t, &row(b, "B")).unwrap());
        s.tc.execute_in(&g, &mut txn, &mut fine).await.unwrap();
        let mut duplicate = statement(&|batch| batch.insert(&t, &row(a, "again")).unwrap());
        let e =
            s.tc.execute_in(&g, &mut txn, &mut duplicate)
                .await
                .unwrap_err();
        assert_eq!(e.code(), "DUPLICATE_KEY");
        assert!(txn.is_over());
        assert!(s.tc.commit(txn).await.is_err(), "nothing left to commit");
        assert_eq!(value(&s.tc, &t, b).await.as_deref(), Some("b"));
        assert_eq!(db.governance.in_flight(), 0);

        // Dropped while open (its client went away), it lets go at once.
        let mut txn = s.tc.begin();
        let mut held = statement(&|batch| batch.update(&t, &row(b, "gone")).unwrap());
        s.tc.execute_in(&g, &mut txn, &mut held).await.unwrap();
        drop(txn);
        let (r, _) = run(&s.tc, &g, Commit::Atomic, |batch| {
            batch.update(&t, &row(b, "next")).unwrap()
        })
        .await;
        r.unwrap();
        assert_eq!(value(&s.tc, &t, b).await.as_deref(), Some("next"));
    });
}

/// Random statements of open transactions on a table with two unique
/// indexes — `by_u` on `u`, `by_vw` on `v, w` — against a model: each
/// statement is refused exactly when the model says (values another row
/// has as the transaction sees it, an update's missing columns taken from
/// its row as the transaction left it; a key taken or missing), a refusal
/// rolls the whole transaction back, and what commits is the model's.
#[test]
fn unique_values_in_open_transactions_match_a_model() {
    use proptest::test_runner::{Config, TestRunner};

    // A column's value: NULL, or one of a few (so that they meet).
    let value = || proptest::option::weighted(0.85, 0..3i64);
    // A column an update gives, or leaves as it is (`None`).
    let given = move || proptest::option::weighted(0.6, value());
    let step = prop_oneof![
        4 => (0..5i64, value(), value(), value())
            .prop_map(|(k, u, v, w)| Step::Insert(k, [u, v, w])),
        4 => (0..5i64, given(), given(), given())
            .prop_map(|(k, u, v, w)| Step::Update(k, [u, v, w])),
        2 => (0..5i64).prop_map(Step::Delete),
        2 => Just(Step::Commit),
        1 => Just(Step::Rollback),
    ];
    const UNIQUE: &str = r#"{"name":"uq","primary_key":["k"],"columns":[
        {"name":"k","type":"BIGINT"},{"name":"u","type":"INT","nullable":true},
        {"name":"v","type":"INT","nullable":true},{"name":"w","type":"INT","nullable":true}],
      "indexes":[{"name":"by_u","columns":["u"],"unique":true},
                 {"name":"by_vw","columns":["v","w"],"unique":true}]}"#;

    let rt = crate::test_runtime();
    let s = setup(256, Duration::from_millis(100));
    let name = DatabaseName::parse("db").unwrap();
    rt.block_on(s.tc.engine().create_database(&name, None))
        .unwrap();
    let mut runner = TestRunner::new(Config {
        cases: 1024,
        failure_persistence: None,
        ..Config::default()
    });
    let case = std::cell::Cell::new(0);
    runner
        .run(&proptest::collection::vec(step, 1..40), |steps| {
            case.set(case.get() + 1);
            rt.block_on(async {
                let mut def: TableDef = serde_json::from_str(UNIQUE).unwrap();
                def.name = format!("uq{}", case.get()).parse().unwrap();
                let t = s.tc.engine().create_table(&name, def).await.unwrap();
                let checked = against_the_model(&s.tc, &t, steps).await;
                s.tc.engine()
                    .drop_table("db", t.name().as_str())
                    .await
                    .unwrap();
                checked
            })
        })
        .unwrap();
}

/// A row's `u`, `v`, `w` (`None`: NULL).
type Cols = [Option<i64>; 3];

/// A statement of the model test, or the end of its transaction.
#[derive(Debug, Clone)]
enum Step {
    Insert(i64, Cols),
    /// The columns given (`None`: left as they are).
    Update(i64, [Option<Option<i64>>; 3]),
    Delete(i64),
    Commit,
    Rollback,
}

/// The unique indexes of the model's table, as columns of `Cols`.
const UNIQUE_INDEXES: [&[usize]; 2] = [&[0], &[1, 2]];

/// Runs `steps` on `t` and checks each against a map of the rows as
/// committed and as the open transaction sees them.
async fn against_the_model(
    tc: &Node,
    t: &Arc<Table>,
    steps: Vec<Step>,
) -> Result<(), TestCaseError> {
    use std::collections::BTreeMap;
    use std::collections::btree_map::Entry;

    const NAMES: [&str; 3] = ["u", "v", "w"];
    let g = writer(t);
    let int = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
    // Whether a row other than `k` has the values `cols` leaves index
    // `index` with (none compared if one is NULL, or unknown).
    let taken = |view: &BTreeMap<i64, Cols>, k: i64, cols: [Option<Option<i64>>; 3]| {
        UNIQUE_INDEXES.iter().any(|index| {
            let values: Option<Vec<i64>> = index.iter().map(|&c| cols[c].flatten()).collect();
            values.is_some_and(|values| {
                view.iter().any(|(&other, row)| {
                    other != k && index.iter().zip(&values).all(|(&c, v)| row[c] == Some(*v))
                })
            })
        })
    };
    let mut committed: BTreeMap<i64, Cols> = BTreeMap::new();
    let mut view = committed.clone();
    let mut txn = tc.begin();
    for step in steps {
        let mut batch = tc.batch();
        // What the statement should answer: None, or why it is refused.
        let expected = match step {
            Step::Commit => {
                tc.commit(std::mem::replace(&mut txn, tc.begin()))
                    .await
                    .unwrap();
                committed = view.clone();
                continue;
            }
            Step::Rollback => {
                tc.rollback(std::mem::replace(&mut txn, tc.begin()))
                    .await
                    .unwrap();
                view = committed.clone();
                continue;
            }
            Step::Insert(k, cols) => {
                let mut row = vec![("k", Value::Int(k))];
                row.extend(NAMES.iter().zip(cols).map(|(&n, v)| (n, int(v))));
                batch.insert(t, &row).unwrap();
                let refused = taken(&view, k, cols.map(Some));
                match view.entry(k) {
                    _ if refused => Some("unique"),
                    Entry::Occupied(_) => Some("key"),
                    Entry::Vacant(at) => {
                        at.insert(cols);
                        None
                    }
                }
            }
            Step::Update(k, given) => {
                let mut row = vec![("k", Value::Int(k))];
                row.extend((NAMES.iter().zip(given)).filter_map(|(&n, v)| v.map(|v| (n, int(v)))));
                batch.update(t, &row).unwrap();
                // Columns left out are the row's, as the transaction sees it.
                let now = view.get(&k).copied();
                let cols: [Option<Option<i64>>; 3] =
                    std::array::from_fn(|c| given[c].or(now.map(|row| row[c])));
                if taken(&view, k, cols) {
                    Some("unique")
                } else if let Some(row) = view.get_mut(&k) {
                    *row = cols.map(|c| c.flatten());
                    None
                } else {
                    Some("missing")
                }
            }
            Step::Delete(k) => {
                batch.delete(t, &[Value::Int(k)]).unwrap();
                view.remove(&k).is_none().then_some("missing")
            }
        };
        let got = match tc.execute_in(&g, &mut txn, &mut batch).await {
            Ok(()) => None,
            Err(TcError::Operation { error, .. }) => Some(match error {
                OperationError::DuplicateUnique { .. } => "unique",
                OperationError::DuplicateKey { .. } => "key",
                OperationError::NotFound { .. } => "missing",
                other => panic!("{other:?}"),
            }),
            Err(other) => panic!("{other:?}"),
        };
        prop_assert_eq!(got, expected);
        if got.is_some() {
            prop_assert!(txn.is_over());
            txn = tc.begin();
            view = committed.clone();
        }
    }
    tc.commit(txn).await.unwrap();
    for k in 0..5 {
        let (r, outcomes) = run(tc, &g, Commit::Each, |b| {
            b.read(t, &[Value::Int(k)]).unwrap()
        })
        .await;
        r.unwrap();
        let found = match &outcomes[0] {
            Ok(Outcome::Found(row)) => Some(NAMES.map(|n| row.get(n).cloned())),
            Ok(Outcome::Absent) => None,
            other => panic!("{k}: {other:?}"),
        };
        let want = view.get(&k).map(|cols| cols.map(|v| Some(int(v))));
        prop_assert_eq!(found, want);
    }
    Ok(())
}
