//! Random operation sequences against the engine and a `BTreeMap` model:
//! after every step the results agree, the row touched reads back as the
//! model says, and memory is accounted exactly — every fragment's counters
//! match its pages, the fragments hold what the pool lent, and the bytes in
//! use are what the model's rows must take.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::tests::{check_accounting, create, engine_with, read, runtime};
use super::*;
use crate::storage::{index, ordered, var};
use crate::tc::batch::{OperationError, Outcome};
use crate::tc::{Commit, Grant, Role, TcError};
use crate::types::value::Value;

const TABLES: [&str; 3] = [
    r#"{"name":"a","primary_key":["k","s"],"columns":[
        {"name":"k","type":"INT"},
        {"name":"s","type":"VARCHAR(12)"},
        {"name":"n","type":"BIGINT","nullable":true},
        {"name":"v","type":"VARBINARY(16000)","nullable":true},
        {"name":"c","type":"CHAR(3)"},
        {"name":"d","type":"DOUBLE","nullable":true}],
      "indexes":[{"name":"by_c_d","columns":["c","d"]},{"name":"by_n","columns":["n","s"]}]}"#,
    r#"{"name":"b","primary_key":["id"],"columns":[
        {"name":"id","type":"BIGINT UNSIGNED"},
        {"name":"w","type":"VARCHAR(300)"}],
      "indexes":[{"name":"by_w","columns":["w"]}]}"#,
    r#"{"name":"c","primary_key":["id"],"columns":[
        {"name":"id","type":"SMALLINT"},
        {"name":"x","type":"INT","nullable":true}],
      "indexes":[{"name":"by_x","columns":["x"]}]}"#,
];

/// Keys per table; small, so that operations meet the same rows often.
const KEYS: u16 = 32;

fn key(table: usize, k: u16) -> Vec<Value> {
    match table {
        0 => vec![
            Value::Int(i64::from(k / 4)),
            Value::Text(["", "s", "ss", "sss"][k as usize % 4].into()),
        ],
        1 => vec![Value::UInt(u64::from(k) * 500_000_000_000_000_000)],
        _ => vec![Value::Int(i64::from(k) - 12)],
    }
}

/// Key column names and the non-key columns that are `NOT NULL`.
fn key_columns(table: usize) -> &'static [&'static str] {
    [&["k", "s"][..], &["id"], &["id"]][table]
}

fn required(table: usize) -> &'static [&'static str] {
    [&["c"][..], &["w"], &[]][table]
}

/// A value for each non-key column, as written and as read back.
fn column_value(table: usize) -> BoxedStrategy<(&'static str, Value)> {
    let nullable = |s: BoxedStrategy<Value>| prop_oneof![1 => Just(Value::Null), 4 => s].boxed();
    match table {
        0 => prop_oneof![
            1 => nullable(any::<i64>().prop_map(Value::Int).boxed()).prop_map(|v| ("n", v)),
            4 => nullable(
                prop_oneof![
                    1 => proptest::collection::vec(any::<u8>(), 0..64),
                    1 => proptest::collection::vec(any::<u8>(), 1000..16000),
                ]
                .prop_map(Value::Bytes)
                .boxed()
            )
            .prop_map(|v| ("v", v)),
            1 => "[a-z]{0,3}".prop_map(|s| ("c", Value::Text(s))),
            1 => nullable(
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(|f| Value::Double(f + 0.0))
                    .boxed()
            )
            .prop_map(|v| ("d", v)),
        ]
        .boxed(),
        1 => prop_oneof!["[a-z]{0,20}", "[a-z]{200,300}"]
            .prop_map(|s| ("w", Value::Text(s)))
            .boxed(),
        _ => nullable(any::<i32>().prop_map(|x| Value::Int(x.into())).boxed())
            .prop_map(|v| ("x", v))
            .boxed(),
    }
}

#[derive(Debug, Clone)]
enum Step {
    Insert(usize, u16, Vec<(&'static str, Value)>),
    Update(usize, u16, Vec<(&'static str, Value)>),
    Write(usize, u16, Vec<(&'static str, Value)>),
    Delete(usize, u16),
    Read(usize, u16),
    Recreate(usize),
    /// Inserts keys `BULK..BULK + n` of table `c`: enough rows to split
    /// index pages.
    Fill(u16),
    /// Deletes keys `BULK..BULK + n` of table `c`: enough to merge them again.
    Drain(u16),
    /// Writes (inserts, updates, writes, deletes) of distinct rows, as one
    /// transaction through the transaction coordinator.
    Atomic(Vec<Step>),
}

/// First key number of bulk steps, clear of the keys other steps use.
const BULK: u16 = 100;

/// A value for each `NOT NULL` non-key column of table `t`.
fn required_values(t: usize) -> BoxedStrategy<Vec<(&'static str, Value)>> {
    match t {
        0 => "[a-z]{0,3}"
            .prop_map(|s| vec![("c", Value::Text(s))])
            .boxed(),
        1 => "[a-z]{0,300}"
            .prop_map(|s| vec![("w", Value::Text(s))])
            .boxed(),
        _ => Just(Vec::new()).boxed(),
    }
}

/// A table, a key and some columns for a write of kind `make`; mostly with
/// every `NOT NULL` column, so that rows get in.
fn write_step(
    make: fn(usize, u16, Vec<(&'static str, Value)>) -> Step,
) -> impl Strategy<Value = Step> {
    (table(), 0..KEYS).prop_flat_map(move |(t, k)| {
        let columns = proptest::collection::vec(column_value(t), 0..5);
        (columns, required_values(t), proptest::bool::weighted(0.85)).prop_map(
            move |(c, required, complete)| {
                let mut all = if complete { required } else { Vec::new() };
                all.extend(c);
                make(t, k, all)
            },
        )
    })
}

/// A table, most often `a`, whose var part sees the most churn.
fn table() -> impl Strategy<Value = usize> {
    prop_oneof![2 => Just(0), 1 => Just(1), 1 => Just(2)]
}

fn step() -> impl Strategy<Value = Step> {
    let target = || (table(), 0..KEYS);
    prop_oneof![
        6 => write_step(Step::Insert),
        3 => write_step(Step::Update),
        3 => write_step(Step::Write),
        3 => target().prop_map(|(t, k)| Step::Delete(t, k)),
        2 => target().prop_map(|(t, k)| Step::Read(t, k)),
        1 => (0..TABLES.len()).prop_map(Step::Recreate),
        1 => (1u16..12_000).prop_map(Step::Fill),
        1 => (1u16..12_000).prop_map(Step::Drain),
        4 => proptest::collection::vec(
            prop_oneof![
                write_step(Step::Insert),
                write_step(Step::Update),
                write_step(Step::Write),
                (table(), 0..KEYS).prop_map(|(t, k)| Step::Delete(t, k)),
            ],
            1..6
        )
        .prop_map(|mut ops| {
            let mut seen = std::collections::HashSet::new();
            ops.retain(|op| seen.insert(target_of(op)));
            Step::Atomic(ops)
        }),
    ]
}

/// The table and key a write step is about.
fn target_of(step: &Step) -> (usize, u16) {
    match step {
        Step::Insert(t, k, _)
        | Step::Update(t, k, _)
        | Step::Write(t, k, _)
        | Step::Delete(t, k)
        | Step::Read(t, k) => (*t, *k),
        _ => unreachable!("only row steps go in a transaction"),
    }
}

/// Steps on table `a` only, with large values: var pages fill up, get holes,
/// compact and hand entries to other pages.
fn churn_step() -> impl Strategy<Value = Step> {
    let big = (
        0..KEYS,
        proptest::collection::vec(any::<u8>(), 500..16_000),
        "[a-z]{0,3}",
    );
    prop_oneof![
        3 => big.clone().prop_map(|(k, v, c)| Step::Write(0, k, vec![("c", Value::Text(c)), ("v", Value::Bytes(v))])),
        2 => big.prop_map(|(k, v, _)| Step::Update(0, k, vec![("v", Value::Bytes(v))])),
        2 => (0..KEYS).prop_map(|k| Step::Delete(0, k)),
    ]
}

/// The model: each table's rows by key number, each row its full values.
struct Model {
    tables: Vec<Arc<Table>>,
    rows: Vec<BTreeMap<u16, Vec<Value>>>,
}

impl Model {
    /// The columns given, the last value of a repeated column winning, as
    /// the row the engine would be sent.
    fn row(
        &self,
        t: usize,
        k: u16,
        columns: &[(&'static str, Value)],
    ) -> Vec<(&'static str, Value)> {
        let mut row: Vec<(&str, Value)> = key_columns(t).iter().copied().zip(key(t, k)).collect();
        for (name, value) in columns {
            match row.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1 = value.clone(),
                None => row.push((name, value.clone())),
            }
        }
        row
    }

    /// Sets the given columns of a row, inserting it (other columns NULL)
    /// if it is not there.
    fn apply(&mut self, t: usize, k: u16, row: &[(&str, Value)]) {
        let def = self.tables[t].def();
        let values = self.rows[t]
            .entry(k)
            .or_insert_with(|| vec![Value::Null; def.columns.len()]);
        for (name, value) in row {
            values[def.column_index(name).unwrap()] = value.clone();
        }
    }

    /// DataMemory bytes the rows of table `t` must hold live: fixed slot,
    /// var entry with its directory entry, and index entry, per row.
    fn live_bytes(&self, t: usize) -> u64 {
        let layout = &self.tables[t].layout;
        self.rows[t]
            .values()
            .map(|values| {
                let var_bytes: usize = layout
                    .columns
                    .iter()
                    .zip(values)
                    .filter(|(c, _)| c.ty.is_variable())
                    .map(|(_, v)| match v {
                        Value::Text(s) => s.len(),
                        Value::Bytes(b) => b.len(),
                        _ => 0,
                    })
                    .sum();
                let var = if layout.n_var > 0 {
                    2 * layout.n_var + var_bytes + var::DIR_ENTRY
                } else {
                    0
                };
                (layout.slot_size + var + index::ENTRY + layout.ordered.len() * ordered::ENTRY)
                    as u64
            })
            .sum()
    }
}

async fn check(engine: &Engine, model: &Model) -> Result<(), TestCaseError> {
    let usage = check_accounting(engine).await;
    for (t, table) in model.tables.iter().enumerate() {
        let (in_memory, free, rows) =
            usage
                .iter()
                .filter(|f| f.table_id == table.id)
                .fold((0, 0, 0), |(m, f, r), u| {
                    (
                        m + u.in_memory_bytes,
                        f + u.free_in_memory_bytes,
                        r + u.rows,
                    )
                });
        prop_assert_eq!(rows, model.rows[t].len() as u64, "rows of {}", table.name());
        prop_assert_eq!(
            in_memory - free,
            model.live_bytes(t),
            "live bytes of {}",
            table.name()
        );
    }
    Ok(())
}

/// Runs a `Fill` or `Drain` as one batch, checking each outcome.
async fn bulk(
    engine: &Engine,
    model: &mut Model,
    step: &Step,
    n: u16,
) -> Result<(), TestCaseError> {
    let table = Arc::clone(&model.tables[2]);
    let mut batch = engine.tc().batch();
    for k in BULK..BULK + n {
        match step {
            Step::Fill(_) => batch.insert(&table, &model.row(2, k, &[("x", Value::Int(k.into()))])),
            _ => batch.delete(&table, &key(2, k)),
        }
        .unwrap();
    }
    engine.tc().execute_unchecked(&mut batch).await.unwrap();
    for (i, k) in (BULK..BULK + n).enumerate() {
        let exists = model.rows[2].contains_key(&k);
        match (step, batch.result(i), exists) {
            (Step::Fill(_), Ok(Outcome::Inserted), false) => {
                model.apply(2, k, &model.row(2, k, &[("x", Value::Int(k.into()))]))
            }
            (Step::Fill(_), Err(e), true) => prop_assert_eq!(e.code(), "DUPLICATE_KEY"),
            (Step::Fill(_), Err(e), false) => prop_assert_eq!(e.code(), "OUT_OF_DATA_MEMORY"),
            (Step::Drain(_), Ok(Outcome::Deleted), true) => {
                model.rows[2].remove(&k);
            }
            (Step::Drain(_), Err(e), false) => prop_assert_eq!(e.code(), "NOT_FOUND"),
            (_, result, exists) => prop_assert!(
                false,
                "{step:?} of key {k} (there: {exists}) gave {result:?}"
            ),
        }
    }
    Ok(())
}

/// Runs the writes of a `Step::Atomic` as one transaction. Each is about its
/// own row, so whether it fails does not depend on the others: the
/// transaction succeeds when none would fail, and otherwise fails at one that
/// would (or runs out of memory first), and nothing of it is applied.
async fn atomic(engine: &Engine, model: &mut Model, ops: &[Step]) -> Result<(), TestCaseError> {
    let tc = engine.tc();
    let mut batch = tc.batch();
    // Each write: its table, key, the row it writes (none for a delete) and
    // the code it must fail with, if it must.
    type Included = (
        usize,
        u16,
        Option<Vec<(&'static str, Value)>>,
        Option<&'static str>,
    );
    let mut included: Vec<Included> = Vec::new();
    for op in ops {
        let (t, k) = target_of(op);
        let table = Arc::clone(&model.tables[t]);
        let exists = model.rows[t].contains_key(&k);
        let (added, row, fails) = match op {
            Step::Delete(..) => (
                batch.delete(&table, &key(t, k)),
                None,
                (!exists).then_some("NOT_FOUND"),
            ),
            Step::Insert(_, _, cols) | Step::Update(_, _, cols) | Step::Write(_, _, cols) => {
                let row = model.row(t, k, cols);
                let complete = required(t).iter().all(|r| row.iter().any(|(n, _)| n == r));
                let (added, fails) = match op {
                    Step::Insert(..) => (
                        batch.insert(&table, &row),
                        exists.then_some("DUPLICATE_KEY"),
                    ),
                    Step::Update(..) => {
                        (batch.update(&table, &row), (!exists).then_some("NOT_FOUND"))
                    }
                    _ => (
                        batch.write(&table, &row),
                        (!exists && !complete).then_some("MISSING_COLUMN"),
                    ),
                };
                (added, Some(row), fails)
            }
            _ => unreachable!("only writes go in a transaction"),
        };
        // An insert without its NOT NULL values is refused at the edge and
        // never part of the transaction.
        if added.is_ok() {
            included.push((t, k, row, fails));
        }
    }
    if included.is_empty() {
        return Ok(());
    }
    let grant = Grant {
        database: model.tables[0].database.id,
        role: Role::ReadWrite,
    };
    match tc.execute(&grant, &mut batch, Commit::Atomic).await {
        Ok(()) => {
            let predicted: Vec<_> = included.iter().filter_map(|i| i.3).collect();
            prop_assert!(
                predicted.is_empty(),
                "succeeded though {:?} should fail",
                predicted
            );
            for (t, k, row, _) in &included {
                match row {
                    Some(row) => model.apply(*t, *k, row),
                    None => {
                        model.rows[*t].remove(k);
                    }
                }
            }
        }
        Err(TcError::Operation { index, error }) => {
            let out_of_memory = error.code() == "OUT_OF_DATA_MEMORY";
            prop_assert!(
                out_of_memory || included[index].3 == Some(error.code()),
                "op {} failed with {}, predicted {:?}",
                index,
                error,
                included[index].3
            );
        }
        Err(other) => prop_assert!(false, "refused: {}", other),
    }
    for (t, k, ..) in &included {
        let got = read(engine, &model.tables[*t], &key(*t, *k)).await;
        prop_assert_eq!(
            got.as_ref(),
            model.rows[*t].get(k),
            "row {} of table {} after a transaction",
            k,
            t
        );
    }
    Ok(())
}

async fn run_steps(pages: u64, fragments: u16, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let engine = engine_with(pages, fragments);
    let mut model = Model {
        tables: Vec::new(),
        rows: vec![BTreeMap::new(); TABLES.len()],
    };
    for json in TABLES {
        model.tables.push(create(&engine, "db", json).await);
    }
    for step in steps {
        let (t, k) = match &step {
            Step::Fill(n) | Step::Drain(n) => {
                bulk(&engine, &mut model, &step, *n).await?;
                check(&engine, &model).await?;
                continue;
            }
            Step::Atomic(ops) => {
                atomic(&engine, &mut model, ops).await?;
                check(&engine, &model).await?;
                continue;
            }
            Step::Insert(t, k, _)
            | Step::Update(t, k, _)
            | Step::Write(t, k, _)
            | Step::Delete(t, k)
            | Step::Read(t, k) => (*t, *k),
            Step::Recreate(t) => {
                let name = model.tables[*t].name().to_string();
                engine.drop_table("db", &name).await.unwrap();
                model.tables[*t] = create(&engine, "db", TABLES[*t]).await;
                model.rows[*t].clear();
                check(&engine, &model).await?;
                continue;
            }
        };
        let table = Arc::clone(&model.tables[t]);
        let exists = model.rows[t].contains_key(&k);
        let mut batch = engine.tc().batch();
        match &step {
            Step::Insert(_, _, cols) | Step::Update(_, _, cols) | Step::Write(_, _, cols) => {
                let row = model.row(t, k, cols);
                let complete = required(t).iter().all(|r| row.iter().any(|(n, _)| n == r));
                let added = match step {
                    Step::Insert(..) => batch.insert(&table, &row),
                    Step::Update(..) => batch.update(&table, &row),
                    _ => batch.write(&table, &row),
                };
                if matches!(step, Step::Insert(..)) && !complete {
                    prop_assert!(
                        added.is_err(),
                        "an incomplete insert is refused at the edge"
                    );
                    continue;
                }
                added.unwrap();
                engine.tc().execute_unchecked(&mut batch).await.unwrap();
                let result = batch.result(0);
                let oom = matches!(result, Err(OperationError::OutOfDataMemory { .. }));
                match (&step, exists) {
                    (Step::Insert(..), true) => {
                        prop_assert_eq!(result.unwrap_err().code(), "DUPLICATE_KEY")
                    }
                    (Step::Update(..), false) => {
                        prop_assert_eq!(result.unwrap_err().code(), "NOT_FOUND")
                    }
                    (Step::Write(..), false) if !complete => {
                        prop_assert_eq!(result.unwrap_err().code(), "MISSING_COLUMN")
                    }
                    _ if oom => {}
                    (_, false) => {
                        prop_assert_eq!(result, Ok(Outcome::Inserted));
                        model.apply(t, k, &row);
                    }
                    (_, true) => {
                        prop_assert_eq!(result, Ok(Outcome::Updated));
                        model.apply(t, k, &row);
                    }
                }
            }
            Step::Delete(..) => {
                batch.delete(&table, &key(t, k)).unwrap();
                engine.tc().execute_unchecked(&mut batch).await.unwrap();
                if exists {
                    prop_assert_eq!(batch.result(0), Ok(Outcome::Deleted));
                    model.rows[t].remove(&k);
                } else {
                    prop_assert_eq!(batch.result(0).unwrap_err().code(), "NOT_FOUND");
                }
            }
            Step::Read(..)
            | Step::Recreate(..)
            | Step::Fill(..)
            | Step::Drain(..)
            | Step::Atomic(..) => {}
        }
        let got = read(&engine, &table, &key(t, k)).await;
        prop_assert_eq!(
            got.as_ref(),
            model.rows[t].get(&k),
            "row {} of {} after {:?}",
            k,
            table.name(),
            step
        );
        check(&engine, &model).await?;
    }
    // Every row, by a scan, is what the model holds.
    for (t, table) in model.tables.iter().enumerate() {
        let mut scanned: Vec<Vec<Value>> = engine
            .tc()
            .scan(table, &[], usize::MAX)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.into_values())
            .collect();
        let mut want: Vec<Vec<Value>> = model.rows[t].values().cloned().collect();
        let order = |a: &Vec<Value>, b: &Vec<Value>| format!("{a:?}").cmp(&format!("{b:?}"));
        scanned.sort_by(order);
        want.sort_by(order);
        prop_assert_eq!(scanned, want);
    }
    // Dropping everything gives every page back.
    engine.drop_database("db").await.unwrap();
    prop_assert_eq!(engine.data_memory().used_pages(), 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_a_btreemap_and_accounts_exactly(
        pages in 6u64..48,
        fragments in 1u16..4,
        steps in proptest::collection::vec(step(), 1..160),
    ) {
        runtime().block_on(run_steps(pages, fragments, steps))?;
    }

    #[test]
    fn var_pages_reuse_space_and_account_exactly(
        pages in 4u64..40,
        steps in proptest::collection::vec(churn_step(), 1..200),
    ) {
        runtime().block_on(run_steps(pages, 1, steps))?;
    }
}
