//! Scans of ordered indexes through the coordinator: every bound shape and
//! paging against a sorted model, and what readers see while transactions
//! move rows in an index.

use std::cmp::Ordering;
use std::sync::Arc;

use proptest::prelude::*;
use shoal_quota::LimiterClock;
use shoal_wire::schema::{DatabaseName, TableDef};

use super::tc_tests::{end, hold};
use super::{DEFAULT_LOCK_WAIT_TIMEOUT, Engine, EngineConfig};
use crate::storage::page::PAGE_SIZE;
use crate::tc::batch::Batch;
use crate::tc::{Commit, Grant, RangeScan, Role, Table, Transaction};
use crate::types::value::Value;

const T: &str = r#"{"name":"t","primary_key":["id"],"columns":[
    {"name":"id","type":"BIGINT"},
    {"name":"x","type":"INT","nullable":true},
    {"name":"s","type":"VARCHAR(8)"}],
  "indexes":[{"name":"by_x","columns":["x","s"]}]}"#;

fn engine() -> Engine {
    Engine::start_with_clock(
        EngineConfig {
            node_id: super::NodeId(1),
            data_memory: 512 * PAGE_SIZE as u64,
            ldm_threads: 2,
            fragments_per_table: Some(4),
            seed: None,
            lock_wait_timeout: DEFAULT_LOCK_WAIT_TIMEOUT,
            spin: std::time::Duration::ZERO,
        },
        LimiterClock::manual(),
    )
    .unwrap()
}

async fn table(engine: &Engine) -> (Arc<Table>, Grant) {
    table_of(engine, serde_json::from_str(T).unwrap()).await
}

/// Table `def` in a new database `db`, and a grant to write it.
async fn table_of(engine: &Engine, def: TableDef) -> (Arc<Table>, Grant) {
    let db = DatabaseName::parse("db").unwrap();
    engine.create_database(&db, None).await.unwrap();
    let t = engine.create_table(&db, def).await.unwrap();
    let grant = Grant {
        database: t.database.id,
        role: Role::ReadWrite,
    };
    (t, grant)
}

/// A row as the model keeps it: (id, x, s).
type Row = (i64, Option<i32>, String);

fn values(r: &Row) -> [(&'static str, Value); 3] {
    [
        ("id", Value::Int(r.0)),
        ("x", r.1.map_or(Value::Null, |x| Value::Int(x.into()))),
        ("s", Value::Text(r.2.clone())),
    ]
}

fn from_values(v: &[Value]) -> Row {
    let id = match v[0] {
        Value::Int(id) => id,
        ref other => panic!("{other:?}"),
    };
    let x = match v[1] {
        Value::Int(x) => Some(x as i32),
        Value::Null => None,
        ref other => panic!("{other:?}"),
    };
    let Value::Text(s) = &v[2] else {
        panic!("{:?}", v[2])
    };
    (id, x, s.clone())
}

/// A row's key in an index, as values: the index's columns, then the id.
fn index_key(by_x: bool, r: &Row) -> Vec<Value> {
    if by_x {
        values(r)[1..]
            .iter()
            .map(|(_, v)| v.clone())
            .chain([Value::Int(r.0)])
            .collect()
    } else {
        vec![Value::Int(r.0)]
    }
}

/// Orders values as the index does: NULL first, then by value.
fn cmp_value(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::Int(a), Value::Int(b)) => a.cmp(b),
        (Value::Text(a), Value::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
        other => panic!("{other:?}"),
    }
}

fn cmp_prefix(key: &[Value], bound: &[Value]) -> Ordering {
    for (k, b) in key.iter().zip(bound) {
        let ord = cmp_value(k, b);
        if ord.is_ne() {
            return ord;
        }
    }
    Ordering::Equal
}

/// The rows a scan must answer, in order.
fn expected(
    rows: &[Row],
    by_x: bool,
    lower: &Option<(Vec<Value>, bool)>,
    upper: &Option<(Vec<Value>, bool)>,
) -> Vec<Row> {
    let mut want: Vec<Row> = (rows.iter())
        .filter(|r| {
            let key = index_key(by_x, r);
            let above = lower.as_ref().is_none_or(|(b, inclusive)| {
                let ord = cmp_prefix(&key, b);
                ord.is_gt() || (*inclusive && ord.is_eq())
            });
            let below = upper.as_ref().is_none_or(|(b, inclusive)| {
                let ord = cmp_prefix(&key, b);
                ord.is_lt() || (*inclusive && ord.is_eq())
            });
            above && below
        })
        .cloned()
        .collect();
    want.sort_by(|a, b| {
        let (ka, kb) = (index_key(by_x, a), index_key(by_x, b));
        cmp_prefix(&ka, &kb)
    });
    want
}

/// Every row of a scan, page by page through the cursor, as `reader`
/// sees them (as committed if `None`).
#[allow(clippy::too_many_arguments)] // a scan's every parameter, as the tests vary them
async fn scan_all(
    engine: &Engine,
    reader: Option<&Transaction>,
    t: &Arc<Table>,
    g: &Grant,
    by_x: bool,
    lower: &Option<(Vec<Value>, bool)>,
    upper: &Option<(Vec<Value>, bool)>,
    limit: usize,
) -> Vec<Row> {
    let mut got = Vec::new();
    let mut after: Option<Vec<Value>> = None;
    for _ in 0..10_000 {
        let page = (engine.tc())
            .scan_range(
                g,
                reader,
                t,
                RangeScan {
                    index: by_x.then_some("by_x"),
                    lower: lower.as_ref().map(|(v, i)| (&v[..], *i)),
                    upper: upper.as_ref().map(|(v, i)| (&v[..], *i)),
                    after: after.as_deref(),
                    limit,
                    max_bytes: 1 << 20,
                    columns: None,
                },
            )
            .await
            .unwrap();
        assert!(page.rows.len() <= limit);
        got.extend(page.rows.iter().map(|r| from_values(r.values())));
        match page.next {
            Some(next) => after = Some(next),
            None => return got,
        }
    }
    panic!("the scan never ended")
}

fn row_strategy() -> impl Strategy<Value = Row> {
    (
        0i64..300,
        prop_oneof![1 => Just(None), 4 => (-5i32..5).prop_map(Some)],
        "[ab]{0,2}",
    )
}

fn bound_strategy() -> impl Strategy<Value = Option<(Vec<Value>, bool)>> {
    let value = prop_oneof![
        1 => Just(Value::Null),
        4 => (-6i64..6).prop_map(Value::Int),
    ];
    let s = "[ab]{0,2}".prop_map(Value::Text);
    proptest::option::of((
        prop_oneof![
            Just(Vec::new()).boxed(),
            value.clone().prop_map(|v| vec![v]).boxed(),
            (value, s).prop_map(|(v, s)| vec![v, s]).boxed(),
        ],
        any::<bool>(),
    ))
}

fn pk_bound_strategy() -> impl Strategy<Value = Option<(Vec<Value>, bool)>> {
    proptest::option::of((
        (-10i64..310).prop_map(|v| vec![Value::Int(v)]),
        any::<bool>(),
    ))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn scans_answer_every_row_in_range_once_and_in_order(
        rows in proptest::collection::vec(row_strategy(), 0..400),
        scans in proptest::collection::vec(
            (any::<bool>(), bound_strategy(), bound_strategy(), pk_bound_strategy(), pk_bound_strategy(), 1usize..40),
            1..8,
        ),
    ) {
        let rt = crate::test_runtime();
        rt.block_on(async {
            let engine = engine();
            let (t, g) = table(&engine).await;
            let mut model: Vec<Row> = Vec::new();
            let mut batch: Batch = engine.tc().batch();
            for r in &rows {
                if model.iter().any(|m| m.0 == r.0) {
                    continue;
                }
                model.push(r.clone());
                batch.insert(&t, &values(r)).unwrap();
            }
            engine.tc().execute(&g, &mut batch, Commit::Each).await.unwrap();
            for (by_x, lx, ux, lp, up, limit) in &scans {
                let (lower, upper) = if *by_x { (lx, ux) } else { (lp, up) };
                let got = scan_all(&engine, None, &t, &g, *by_x, lower, upper, *limit).await;
                let want = expected(&model, *by_x, lower, upper);
                prop_assert_eq!(got, want, "by_x {} lower {:?} upper {:?}", by_x, lower, upper);
            }
            engine.audit().await;
            Ok(())
        })?;
    }
}

/// A write of the transaction test: to row `id`, deleting it if it is
/// there and `delete`, else making it `(id, x, s)`.
type Write = (i64, bool, Option<i32>, String);

fn write_strategy() -> impl Strategy<Value = Write> {
    (
        0i64..60,
        prop::bool::weighted(0.3),
        prop_oneof![1 => Just(None), 4 => (-5i32..5).prop_map(Some)],
        "[ab]{0,2}",
    )
}

/// Runs `w` in `txn` as its own statement and applies it to `view`, the
/// rows as `txn` sees them.
async fn write_in(
    engine: &Engine,
    g: &Grant,
    t: &Arc<Table>,
    txn: &mut Transaction,
    view: &mut Vec<Row>,
    w: &Write,
) {
    let (id, delete, x, s) = w;
    let row = (*id, *x, s.clone());
    let mut batch = engine.tc().batch();
    match view.iter().position(|r| r.0 == *id) {
        Some(at) if *delete => {
            batch.delete(t, &[Value::Int(*id)]).unwrap();
            view.remove(at);
        }
        Some(at) => {
            batch.update(t, &values(&row)).unwrap();
            view[at] = row;
        }
        None => {
            batch.insert(t, &values(&row)).unwrap();
            view.push(row);
        }
    }
    engine.tc().execute_in(g, txn, &mut batch).await.unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Two open transactions write rows of their own (even ids and odd
    /// ids: neither waits for the other), moving them in the index, and
    /// scans of every bound see each transaction's rows as it left them and
    /// every other row as committed — each row once, in order — and
    /// readers outside see only what committed.
    #[test]
    fn scans_in_a_transaction_see_its_own_rows_and_the_others_committed(
        rows in proptest::collection::vec(row_strategy(), 0..120),
        writes in proptest::collection::vec((write_strategy(), any::<bool>()), 0..60),
        scans in proptest::collection::vec(
            (any::<bool>(), bound_strategy(), bound_strategy(), pk_bound_strategy(), pk_bound_strategy(), 1usize..30),
            1..5,
        ),
    ) {
        let rt = crate::test_runtime();
        rt.block_on(async {
            let engine = engine();
            let (t, g) = table(&engine).await;
            let mut committed: Vec<Row> = Vec::new();
            for r in rows.iter().map(|r| (r.0 % 60, r.1, r.2.clone())) {
                if !committed.iter().any(|m| m.0 == r.0) {
                    committed.push(r);
                }
            }
            insert(&engine, &t, &g, &committed).await;
            let tc = engine.tc();
            let (mut even, mut odd) = (tc.begin(), tc.begin());
            let (mut even_view, mut odd_view) = (committed.clone(), committed.clone());
            for (w, to_odd) in &writes {
                let mut w = w.clone();
                w.0 = w.0 / 2 * 2 + i64::from(*to_odd);
                match to_odd {
                    false => write_in(&engine, &g, &t, &mut even, &mut even_view, &w).await,
                    true => write_in(&engine, &g, &t, &mut odd, &mut odd_view, &w).await,
                }
            }
            for (by_x, lx, ux, lp, up, limit) in &scans {
                let (lower, upper) = if *by_x { (lx, ux) } else { (lp, up) };
                for (reader, view) in [(Some(&even), &even_view), (Some(&odd), &odd_view), (None, &committed)] {
                    let got = scan_all(&engine, reader, &t, &g, *by_x, lower, upper, *limit).await;
                    let want = expected(view, *by_x, lower, upper);
                    prop_assert_eq!(got, want, "by_x {} lower {:?} upper {:?} as {:?}", by_x, lower, upper, reader);
                }
            }
            tc.rollback(odd).await.unwrap();
            tc.commit(even).await.unwrap();
            prop_assert_eq!(
                scan_all(&engine, None, &t, &g, true, &None, &None, 50).await,
                expected(&even_view, true, &None, &None)
            );
            engine.audit().await;
            Ok(())
        })?;
    }
}

#[test]
fn readers_see_each_committed_row_once_in_its_committed_place() {
    let rt = crate::test_runtime();
    rt.block_on(async {
        let engine = engine();
        let (t, g) = table(&engine).await;
        let committed: Vec<Row> = (0..40)
            .map(|i| (i, Some((i % 7) as i32), "a".into()))
            .collect();
        insert(&engine, &t, &g, &committed).await;
        let all = |engine: Engine, t: Arc<Table>| async move {
            scan_all(&engine, None, &t, &g, true, &None, &None, 7).await
        };
        assert_eq!(
            all(engine.clone(), t.clone()).await,
            expected(&committed, true, &None, &None)
        );

        // One transaction moves rows in the index (one of them twice, and
        // one back to where it was), deletes one and inserts one.
        for commit in [false, true] {
            let mut holder = engine.tc().batch();
            holder
                .update(&t, &values(&(1, Some(100), "z".into())))
                .unwrap();
            holder.update(&t, &values(&(2, None, "a".into()))).unwrap();
            holder
                .update(&t, &values(&(2, Some(50), "b".into())))
                .unwrap();
            holder
                .update(&t, &values(&(3, Some(-1), "a".into())))
                .unwrap();
            holder
                .update(&t, &values(&(3, Some(3), "a".into())))
                .unwrap();
            holder.delete(&t, &[Value::Int(4)]).unwrap();
            holder
                .insert(&t, &values(&(1000, Some(0), "new".into())))
                .unwrap();
            let txn = 77_000 + u64::from(commit);
            let held = hold(engine.tc(), txn, &mut holder).await;
            assert_eq!(
                all(engine.clone(), t.clone()).await,
                expected(&committed, true, &None, &None),
                "a reader sees the committed rows, each once and in its committed place"
            );
            end(engine.tc(), txn, &held, commit).await;
            engine.audit().await;
        }
        let mut after = committed.clone();
        after[1] = (1, Some(100), "z".into());
        after[2] = (2, Some(50), "b".into());
        after.retain(|r| r.0 != 4);
        after.push((1000, Some(0), "new".into()));
        assert_eq!(
            all(engine.clone(), t.clone()).await,
            expected(&after, true, &None, &None)
        );
    });
}

#[test]
fn bad_scans_are_refused_with_what_is_wrong() {
    let rt = crate::test_runtime();
    rt.block_on(async {
        let engine = engine();
        let (t, g) = table(&engine).await;
        let scan =
            |index, lower: Option<&'static [Value]>, after: Option<&'static [Value]>| RangeScan {
                index,
                lower: lower.map(|v| (v, true)),
                upper: None,
                after,
                limit: 10,
                max_bytes: 1000,
                columns: None,
            };
        let refused = |e: crate::tc::TcError| e.to_string();
        let tc = engine.tc();
        let e = tc
            .scan_range(&g, None, &t, scan(Some("nope"), None, None))
            .await
            .unwrap_err();
        assert!(refused(e).contains("no index 'nope'"));
        static TOO_MANY: [Value; 3] = [Value::Int(1), Value::Null, Value::Null];
        let e = tc
            .scan_range(&g, None, &t, scan(Some("by_x"), Some(&TOO_MANY), None))
            .await
            .unwrap_err();
        assert!(refused(e).contains("at most 2 values"));
        static WRONG_TYPE: [Value; 1] = [Value::Bool(true)];
        let e = tc
            .scan_range(&g, None, &t, scan(None, Some(&WRONG_TYPE), None))
            .await
            .unwrap_err();
        assert!(refused(e).contains("'id'"), "names the column");
        static SHORT_CURSOR: [Value; 1] = [Value::Int(1)];
        let e = tc
            .scan_range(&g, None, &t, scan(Some("by_x"), None, Some(&SHORT_CURSOR)))
            .await
            .unwrap_err();
        assert!(refused(e).contains("cursor"));
        let other = Grant {
            database: crate::types::DatabaseId(u32::MAX),
            role: Role::Read,
        };
        let e = tc
            .scan_range(&other, None, &t, scan(None, None, None))
            .await
            .unwrap_err();
        assert!(refused(e).contains("not granted"));
    });
}

/// The table without its index, for tests that add it.
fn without_index() -> TableDef {
    let mut def: TableDef = serde_json::from_str(T).unwrap();
    def.indexes.clear();
    def
}

fn by_x() -> shoal_wire::schema::IndexDef {
    serde_json::from_str(r#"{"name":"by_x","columns":["x","s"]}"#).unwrap()
}

/// Inserts `rows`, each on its own.
async fn insert(engine: &Engine, t: &Arc<Table>, g: &Grant, rows: &[Row]) {
    let mut batch = engine.tc().batch();
    for r in rows {
        batch.insert(t, &values(r)).unwrap();
    }
    (engine.tc().execute(g, &mut batch, Commit::Each).await).unwrap();
}

/// A first page of every row of an index.
fn whole(index: Option<&str>) -> RangeScan<'_> {
    RangeScan {
        index,
        lower: None,
        upper: None,
        after: None,
        limit: 10,
        max_bytes: 1000,
        columns: None,
    }
}

/// Every row, by scanning the primary key.
async fn every_row(engine: &Engine, t: &Arc<Table>, g: &Grant) -> Vec<Row> {
    scan_all(engine, None, t, g, false, &None, &None, 1000).await
}

#[test]
fn an_index_added_while_rows_change_holds_every_row_once() {
    let rt = crate::test_runtime();
    rt.block_on(async {
        let engine = engine();
        let (t, g) = table_of(&engine, without_index()).await;
        let loaded: Vec<Row> = (0..6000)
            .map(|id| (id, Some((id % 13) as i32), "a".into()))
            .collect();
        insert(&engine, &t, &g, &loaded).await;
        // Writes go on while the index is built — updates that move rows,
        // inserts, deletes, and transactions of several rows — and every
        // one of them succeeds.
        let writer = spawn_writes(&engine, &t, g, 0..400);
        let with_index = engine.add_index("db", "t", by_x()).await.unwrap();
        writer.await.unwrap();
        let rows = every_row(&engine, &with_index, &g).await;
        let scanned = scan_all(&engine, None, &with_index, &g, true, &None, &None, 500).await;
        assert_eq!(scanned, expected(&rows, true, &None, &None));
        engine.audit().await;

        // Adding it again is refused; dropping it gives its pages back.
        let again = engine.add_index("db", "t", by_x()).await.unwrap_err();
        assert!(
            again.to_string().contains("already has an index 'by_x'"),
            "{again}"
        );
        let before = t.database.memory_bytes();
        let dropped = engine.drop_index("db", "t", "by_x").await.unwrap();
        assert!(
            t.database.memory_bytes() < before,
            "the index's pages went back"
        );
        let scan = RangeScan {
            index: Some("by_x"),
            lower: None,
            upper: None,
            after: None,
            limit: 10,
            max_bytes: 1000,
            columns: None,
        };
        let e = engine
            .tc()
            .scan_range(&g, None, &dropped, scan)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("no index 'by_x'"), "{e}");
        let e = engine.drop_index("db", "t", "by_x").await.unwrap_err();
        assert!(e.to_string().contains("has no index 'by_x'"), "{e}");
        engine.audit().await;
        assert_eq!(every_row(&engine, &dropped, &g).await, rows);

        // Added again, and dropped while writes go on: none of them fails.
        engine.add_index("db", "t", by_x()).await.unwrap();
        let writer = spawn_writes(&engine, &t, g, 400..800);
        engine.drop_index("db", "t", "by_x").await.unwrap();
        writer.await.unwrap();
        engine.audit().await;
    });
}

/// Writes that must all succeed, in the background, one request after
/// another: for each `n` of `numbers` an update that moves a row in the
/// index, an insert and a delete, every third request a transaction.
fn spawn_writes(
    engine: &Engine,
    t: &Arc<Table>,
    g: Grant,
    numbers: std::ops::Range<i64>,
) -> tokio::task::JoinHandle<()> {
    let (engine, t) = (engine.clone(), Arc::clone(t));
    tokio::spawn(async move {
        for n in numbers {
            let mut batch = engine.tc().batch();
            let id = (n * 7919) % 3000;
            let moved = (id, Some(-(n as i32)), "b".into());
            batch.update(&t, &values(&moved)).unwrap();
            batch
                .insert(&t, &values(&(10_000 + n, None, "c".into())))
                .unwrap();
            batch.delete(&t, &[Value::Int(3000 + n)]).unwrap();
            let commit = if n % 3 == 0 {
                Commit::Atomic
            } else {
                Commit::Each
            };
            engine.tc().execute(&g, &mut batch, commit).await.unwrap();
            for result in batch.results() {
                result.unwrap();
            }
            tokio::task::yield_now().await;
        }
    })
}

#[test]
fn an_index_the_memory_quota_cannot_hold_leaves_nothing() {
    let rt = crate::test_runtime();
    rt.block_on(async {
        let engine = engine();
        let (t, g) = table_of(&engine, without_index()).await;
        let loaded: Vec<Row> = (0..20_000)
            .map(|id| (id, Some(id as i32), "a".into()))
            .collect();
        insert(&engine, &t, &g, &loaded).await;
        let held = t.database.memory_bytes();
        let quota = shoal_quota::Quota {
            in_memory_bytes: Some(held + 2 * PAGE_SIZE as u64),
            ..shoal_quota::Quota::UNLIMITED
        };
        engine.set_database_quota("db", quota).await.unwrap();
        let e = engine.add_index("db", "t", by_x()).await.unwrap_err();
        assert!(e.to_string().contains("memory quota"), "{e}");
        assert_eq!(
            t.database.memory_bytes(),
            held,
            "every page of the index went back"
        );
        let table = engine.table("db", "t").unwrap();
        assert!(table.def().indexes.is_empty());
        engine.audit().await;
    });
}

#[test]
fn a_hashed_only_key_has_no_order_but_its_table_s_indexes_do() {
    let rt = crate::test_runtime();
    rt.block_on(async {
        let engine = engine();
        let mut def: TableDef = serde_json::from_str(T).unwrap();
        def.primary_key_index = shoal_wire::schema::PrimaryKeyIndex::Hash;
        let (t, g) = table_of(&engine, def).await;
        let mut rows: Vec<Row> = (0..500)
            .map(|i| (i, Some((i % 9) as i32), "a".into()))
            .collect();
        insert(&engine, &t, &g, &rows).await;
        let mut batch = engine.tc().batch();
        for r in rows.iter_mut().step_by(3) {
            r.1 = r.1.map(|x| x + 100);
            batch.update(&t, &values(r)).unwrap();
        }
        engine
            .tc()
            .execute(&g, &mut batch, Commit::Atomic)
            .await
            .unwrap();
        let scanned = scan_all(&engine, None, &t, &g, true, &None, &None, 64).await;
        assert_eq!(scanned, expected(&rows, true, &None, &None));
        let e = engine
            .tc()
            .scan_range(&g, None, &t, whole(None))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("hashed only"), "{e}");
        engine.audit().await;
    });
}

#[test]
fn a_range_decodes_the_columns_asked_for_and_its_index() {
    let rt = crate::test_runtime();
    rt.block_on(async {
        let engine = engine();
        let (t, g) = table_of(&engine, serde_json::from_str(T).unwrap()).await;
        let rows: Vec<Row> = (0..40).map(|id| (id, Some(7), format!("s{id}"))).collect();
        insert(&engine, &t, &g, &rows).await;
        // By the primary key, asking for `s`: `id` comes too (it ends the
        // page), `x` is NULL; the pages go on where they left off.
        let mut after: Option<Vec<Value>> = None;
        let mut seen = Vec::new();
        loop {
            let scan = RangeScan {
                after: after.as_deref(),
                columns: Some(&[2]),
                ..whole(None)
            };
            let page = engine.tc().scan_range(&g, None, &t, scan).await.unwrap();
            for row in &page.rows {
                let v = row.values();
                assert_eq!(v[1], Value::Null, "{v:?}");
                seen.push((v[0].clone(), v[2].clone()));
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let mut expected: Vec<(Value, Value)> = rows
            .iter()
            .map(|r| (Value::Int(r.0), Value::Text(r.2.clone())))
            .collect();
        expected.sort_by_key(|(id, _)| match id {
            Value::Int(id) => *id,
            _ => unreachable!(),
        });
        assert_eq!(seen, expected);
        // By `by_x` (x, s), asking for nothing: its own columns and the
        // primary key's come, as every index entry holds them.
        let scan = RangeScan {
            columns: Some(&[]),
            ..whole(Some("by_x"))
        };
        let page = engine.tc().scan_range(&g, None, &t, scan).await.unwrap();
        assert_eq!(page.rows.len(), 10);
        for row in &page.rows {
            let v = row.values();
            assert_eq!(v[1], Value::Int(7), "{v:?}");
            assert!(matches!(v[2], Value::Text(_)), "{v:?}");
        }
    });
}
