//! The engine through its API: every column type, bad values, composite
//! keys, scans, dropping tables, running out of DataMemory.

use std::sync::Arc;

use proptest::prelude::*;
use shoal_wire::schema::{DatabaseName, TableDef};

use super::*;
use crate::storage::CmpOp;
use crate::storage::page::PAGE_SIZE;
use crate::tc::batch::{Batch, OperationError, Outcome};
use crate::types::value::Value;
use crate::types::value::{Date, DateTime, Decimal, Timestamp};

pub(crate) fn engine(pages: u64) -> Engine {
    engine_with(pages, 3)
}

pub(crate) fn engine_with(pages: u64, fragments: u16) -> Engine {
    Engine::start(EngineConfig {
        node_id: super::NodeId(1),
        data_memory: pages * PAGE_SIZE as u64,
        ldm_threads: 2,
        fragments_per_table: Some(fragments),
        seed: None,
        lock_wait_timeout: DEFAULT_LOCK_WAIT_TIMEOUT,
        spin: std::time::Duration::ZERO,
    })
    .unwrap()
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

pub(crate) async fn create(engine: &Engine, db: &str, json: &str) -> Arc<Table> {
    let db = DatabaseName::parse(db).unwrap();
    if engine.databases().iter().all(|d| d.name != db) {
        engine.create_database(&db, None).await.unwrap();
    }
    let def: TableDef = serde_json::from_str(json).unwrap();
    engine.create_table(&db, def).await.unwrap()
}

/// Runs the operations `add` puts in a batch and returns their outcomes.
pub(crate) async fn run(
    engine: &Engine,
    add: impl FnOnce(&mut Batch),
) -> Vec<Result<Outcome, OperationError>> {
    let mut batch = engine.tc().batch();
    add(&mut batch);
    engine.tc().execute_unchecked(&mut batch).await.unwrap();
    batch.results()
}

pub(crate) async fn read(engine: &Engine, table: &Arc<Table>, key: &[Value]) -> Option<Vec<Value>> {
    match run(engine, |b| b.read(table, key).unwrap()).await.remove(0) {
        Ok(Outcome::Found(row)) => Some(row.into_values()),
        Ok(Outcome::Absent) => None,
        other => panic!("read gave {other:?}"),
    }
}

/// Checks the accounting invariant: every fragment's counters match its pages,
/// and the fragments together hold exactly the pages the pool lent out.
pub(super) async fn check_accounting(engine: &Engine) -> Vec<FragmentUsage> {
    let usage = engine.audit().await;
    let held: u64 = usage.iter().map(|f| f.in_memory_bytes).sum();
    assert_eq!(
        held,
        engine.data_memory().used_bytes(),
        "fragments hold what the pool lent"
    );
    for f in &usage {
        assert!(f.free_in_memory_bytes <= f.in_memory_bytes);
    }
    usage
}

const ALL_TYPES: &str = r#"{"name":"all_types","primary_key":["id"],"columns":[
    {"name":"id","type":"INT"},
    {"name":"ti","type":"TINYINT","nullable":true},
    {"name":"tiu","type":"TINYINT UNSIGNED","nullable":true},
    {"name":"si","type":"SMALLINT","nullable":true},
    {"name":"siu","type":"SMALLINT UNSIGNED","nullable":true},
    {"name":"mi","type":"MEDIUMINT","nullable":true},
    {"name":"miu","type":"MEDIUMINT UNSIGNED","nullable":true},
    {"name":"i","type":"INT","nullable":true},
    {"name":"iu","type":"INT UNSIGNED","nullable":true},
    {"name":"bi","type":"BIGINT","nullable":true},
    {"name":"biu","type":"BIGINT UNSIGNED","nullable":true},
    {"name":"f","type":"FLOAT","nullable":true},
    {"name":"d","type":"DOUBLE","nullable":true},
    {"name":"dec","type":"DECIMAL(10,2)","nullable":true},
    {"name":"dec38","type":"DECIMAL(38,10)","nullable":true},
    {"name":"c","type":"CHAR(5)","nullable":true},
    {"name":"vc","type":"VARCHAR(20)","nullable":true},
    {"name":"b","type":"BINARY(4)","nullable":true},
    {"name":"vb","type":"VARBINARY(10)","nullable":true},
    {"name":"dt","type":"DATE","nullable":true},
    {"name":"dtm","type":"DATETIME(3)","nullable":true},
    {"name":"ts","type":"TIMESTAMP(6)","nullable":true},
    {"name":"bo","type":"BOOL","nullable":true},
    {"name":"req","type":"SMALLINT"}]}"#;

/// A value for each column of `ALL_TYPES` but the key, in input form, and
/// what reading it back must give.
fn column_values() -> impl Strategy<Value = Vec<(&'static str, Value, Value)>> {
    let same = |name: &'static str, v: Value| (name, v.clone(), v);
    let date_days = -719_162i32..=2_932_896;
    let micros = -62_135_596_800_000_000i64..253_402_300_800_000_000;
    (
        (
            any::<i8>().prop_map(move |v| same("ti", Value::Int(v.into()))),
            any::<u8>().prop_map(move |v| same("tiu", Value::UInt(v.into()))),
            any::<i16>().prop_map(move |v| same("si", Value::Int(v.into()))),
            any::<u16>().prop_map(move |v| same("siu", Value::UInt(v.into()))),
            (-8_388_608i64..=8_388_607).prop_map(move |v| same("mi", Value::Int(v))),
            (0u64..=16_777_215).prop_map(move |v| same("miu", Value::UInt(v))),
            any::<i32>().prop_map(move |v| same("i", Value::Int(v.into()))),
            any::<u32>().prop_map(move |v| same("iu", Value::UInt(v.into()))),
            any::<i64>().prop_map(move |v| same("bi", Value::Int(v))),
            any::<u64>().prop_map(move |v| same("biu", Value::UInt(v))),
        ),
        (
            any::<f32>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| ("f", Value::Float(f), Value::Float(f + 0.0))),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| ("d", Value::Double(f), Value::Double(f + 0.0))),
            (-9_999_999_999i128..=9_999_999_999).prop_map(move |m| {
                same(
                    "dec",
                    Value::Decimal(Decimal {
                        mantissa: m,
                        scale: 2,
                    }),
                )
            }),
            (-(10i128.pow(38) - 1)..=10i128.pow(38) - 1).prop_map(move |m| {
                same(
                    "dec38",
                    Value::Decimal(Decimal {
                        mantissa: m,
                        scale: 10,
                    }),
                )
            }),
            "\\PC{0,5}".prop_map(|s: String| {
                let trimmed = s.trim_end_matches(' ').to_owned();
                ("c", Value::Text(s), Value::Text(trimmed))
            }),
            "\\PC{0,20}".prop_map(move |s: String| same("vc", Value::Text(s))),
            proptest::collection::vec(any::<u8>(), 0..=4).prop_map(|b| {
                let mut padded = b.clone();
                padded.resize(4, 0);
                ("b", Value::Bytes(b), Value::Bytes(padded))
            }),
            proptest::collection::vec(any::<u8>(), 0..=10)
                .prop_map(move |b| same("vb", Value::Bytes(b))),
            date_days.prop_map(move |d| same("dt", Value::Date(Date(d)))),
            micros
                .clone()
                .prop_map(move |m| same("dtm", Value::DateTime(DateTime(m / 1000 * 1000)))),
            micros.prop_map(move |m| same("ts", Value::Timestamp(Timestamp(m)))),
            any::<bool>().prop_map(move |b| same("bo", Value::Bool(b))),
        ),
    )
        .prop_map(|(ints, rest)| {
            let (a, b, c, d, e, f, g, h, i, j) = ints;
            let (k, l, m, n, o, p, q, r, s, t, u, v) = rest;
            vec![
                a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u, v,
            ]
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every type stores and reads back what was written, through the
    /// workers; and the text form of what comes back is accepted as input for
    /// the same value.
    #[test]
    fn every_column_type_round_trips(values in column_values(), nulls in proptest::collection::vec(any::<bool>(), 22)) {
        let rt = runtime();
        let engine = engine(16);
        rt.block_on(async {
            let table = create(&engine, "db", ALL_TYPES).await;
            let mut row: Vec<(&str, Value)> = vec![("id", Value::Int(1)), ("req", Value::Int(7))];
            let mut want = vec![Value::Int(1)];
            for ((name, input, output), null) in values.iter().zip(&nulls) {
                row.push((name, if *null { Value::Null } else { input.clone() }));
                want.push(if *null { Value::Null } else { output.clone() });
            }
            want.push(Value::Int(7));
            let r = run(&engine, |b| b.insert(&table, &row).unwrap()).await;
            prop_assert_eq!(&r[0], &Ok(Outcome::Inserted));
            let got = read(&engine, &table, &[Value::Int(1)]).await.unwrap();
            prop_assert_eq!(&got, &want);

            // The text form of each value read back is a valid input for it.
            let textual: Vec<(&str, Value)> = values
                .iter()
                .zip(&got[1..])
                .filter(|((name, ..), v)| !matches!(v, Value::Null | Value::Bytes(_) | Value::Bool(_)) && *name != "vc" && *name != "c")
                .map(|((name, ..), v)| (*name, Value::Text(v.to_string())))
                .chain([("id", Value::Int(1))])
                .collect();
            let r = run(&engine, |b| b.update(&table, &textual).unwrap()).await;
            prop_assert_eq!(&r[0], &Ok(Outcome::Updated));
            prop_assert_eq!(read(&engine, &table, &[Value::Int(1)]).await.unwrap(), got);
            Ok(())
        })?;
    }
}

#[test]
fn bad_values_are_refused_naming_the_column_and_change_nothing() {
    let rt = runtime();
    let engine = engine(16);
    rt.block_on(async {
        let table = create(&engine, "db", ALL_TYPES).await;
        let before = check_accounting(&engine).await;
        let nan = f64::NAN;
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "ti",
                Value::Int(128),
                "out of range for TINYINT (-128 to 127)",
            ),
            ("tiu", Value::Int(-1), "out of range"),
            ("tiu", Value::Int(256), "out of range"),
            ("mi", Value::Int(8_388_608), "out of range for MEDIUMINT"),
            ("biu", Value::Int(-1), "out of range"),
            (
                "bi",
                Value::Text("9223372036854775808".into()),
                "out of range",
            ),
            ("i", Value::Text("12abc".into()), "not a whole number"),
            (
                "i",
                Value::Double(1.5),
                "1.5 has a fraction; INT holds whole numbers",
            ),
            (
                "i",
                Value::Bool(true),
                "expected a value of type INT, got a boolean",
            ),
            ("i", Value::Text(" 42 ".into()), "not a whole number"),
            ("i", Value::Text("+42".into()), "not a whole number"),
            ("i", Value::Text("".into()), "not a whole number"),
            // JSON's -9223372036854775899 arrives as this double; it must not
            // become -2^63.
            (
                "bi",
                Value::Double(-9_223_372_036_854_775_899.0),
                "out of range for BIGINT",
            ),
            ("bi", Value::Double(1e300), "out of range for BIGINT"),
            (
                "bi",
                Value::Double(2f64.powi(60)),
                "more digits than a double holds exactly",
            ),
            (
                "d",
                Value::Int((1 << 53) + 1),
                "cannot hold 9007199254740993 exactly",
            ),
            (
                "f",
                Value::Int((1 << 24) + 1),
                "FLOAT cannot hold 16777217 exactly",
            ),
            (
                "dec",
                Value::Text("1.005".into()),
                "more digits after the point than DECIMAL(10,2)",
            ),
            ("dec", Value::Double(1.005), "it is not rounded"),
            (
                "dtm",
                Value::Text("2024-02-29 23:59:59.9996".into()),
                "more fractional-second digits",
            ),
            (
                "i",
                Value::Bytes(vec![1]),
                "expected a value of type INT, got bytes",
            ),
            ("f", Value::Double(1e39), "out of range for FLOAT"),
            ("f", Value::Double(nan), "cannot hold NaN"),
            ("d", Value::Double(f64::INFINITY), "cannot hold inf"),
            (
                "dec",
                Value::Text("123456789.123".into()),
                "out of range for DECIMAL(10,2)",
            ),
            (
                "dec",
                Value::Int(100_000_000),
                "out of range for DECIMAL(10,2)",
            ),
            ("dec", Value::Text("12,5".into()), "not a decimal number"),
            (
                "c",
                Value::Text("abcdef".into()),
                "6 characters is longer than CHAR(5)",
            ),
            (
                "vc",
                Value::Text("é".repeat(21)),
                "21 characters is longer than VARCHAR(20)",
            ),
            ("vc", Value::Bytes(b"bytes".to_vec()), "got bytes"),
            (
                "b",
                Value::Bytes(vec![0; 5]),
                "5 bytes is longer than BINARY(4)",
            ),
            ("vb", Value::Text("text".into()), "got a string"),
            (
                "vb",
                Value::Bytes(vec![0; 11]),
                "11 bytes is longer than VARBINARY(10)",
            ),
            ("dt", Value::Text("2023-02-29".into()), "not a date"),
            ("dt", Value::Date(Date(3_000_000)), "outside"),
            (
                "dtm",
                Value::Text("9999-12-31 23:59:59.9999".into()),
                "more fractional-second digits than DATETIME(3) holds",
            ),
            (
                "ts",
                Value::Text("2024-01-01 25:00:00".into()),
                "not a timestamp",
            ),
            ("ts", Value::Int(5), "expected a value of type TIMESTAMP(6)"),
            ("bo", Value::Int(2), "expected true, false, 0 or 1"),
            (
                "bo",
                Value::Text("yes".into()),
                "expected true, false, 0 or 1",
            ),
            ("req", Value::Null, "cannot be NULL"),
            ("id", Value::Null, "cannot be NULL"),
            (
                "nope",
                Value::Int(1),
                "table 'all_types' has no such column",
            ),
        ];
        for (column, value, problem) in cases {
            let mut batch = engine.tc().batch();
            let mut row = vec![("id", Value::Int(9)), ("req", Value::Int(1))];
            match row.iter_mut().find(|(n, _)| *n == column) {
                Some(given) => given.1 = value,
                None => row.push((column, value)),
            }
            let err = batch.insert(&table, &row).expect_err(column);
            assert_eq!(err.column, column, "{err}");
            assert!(err.problem.contains(problem), "{column}: {err}");
            assert!(batch.is_empty(), "a refused operation is not queued");
        }
        // Missing NOT NULL column, repeated column, wrong key arity.
        let mut batch = engine.tc().batch();
        let err = batch.insert(&table, &[("id", Value::Int(9))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "column 'req': a value is required: the column is NOT NULL"
        );
        let err = batch
            .insert(
                &table,
                &[
                    ("id", Value::Int(9)),
                    ("req", Value::Int(1)),
                    ("req", Value::Int(2)),
                ],
            )
            .unwrap_err();
        assert_eq!(err.to_string(), "column 'req': given more than once");
        let err = batch.update(&table, &[("req", Value::Int(1))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "column 'id': a value for every primary key column is required"
        );
        let err = batch.read(&table, &[]).unwrap_err();
        assert!(
            err.to_string()
                .contains("the primary key has 1 column(s), 0 value(s) given"),
            "{err}"
        );
        let err = batch.read(&table, &[Value::Text("x".into())]).unwrap_err();
        assert_eq!(err.column, "id");
        assert!(batch.is_empty());

        assert_eq!(read(&engine, &table, &[Value::Int(9)]).await, None);
        let after = check_accounting(&engine).await;
        assert_eq!(
            before.iter().map(|f| f.in_memory_bytes).sum::<u64>(),
            after.iter().map(|f| f.in_memory_bytes).sum::<u64>()
        );
    });
}

#[test]
fn values_that_fit_exactly_are_stored_as_given() {
    let rt = runtime();
    let engine = engine(16);
    rt.block_on(async {
        let table = create(&engine, "db", ALL_TYPES).await;
        let row = [
            ("id", Value::Int(1)),
            ("req", Value::Text("42".into())),
            ("dec", Value::Text("1.500".into())),
            ("dec38", Value::Double(0.1)),
            ("dtm", Value::Text("2024-02-29 23:59:59.000".into())),
            ("ts", Value::Text("2024-03-01T01:00:00+01:00".into())),
            ("c", Value::Text("ab   ".into())),
            ("i", Value::Double(-3.0)),
            ("bi", Value::Double(-(2f64.powi(53)))),
            ("d", Value::Int(1 << 53)),
            ("bo", Value::Int(1)),
            ("dt", Value::Text("2024-02-29".into())),
        ];
        run(&engine, |b| b.insert(&table, &row).unwrap()).await[0]
            .as_ref()
            .unwrap();
        let got = read(&engine, &table, &[Value::Int(1)]).await.unwrap();
        let by_name = |n: &str| got[table.def().column_index(n).unwrap()].to_string();
        assert_eq!(by_name("req"), "42");
        assert_eq!(by_name("dec"), "1.50");
        assert_eq!(by_name("dec38"), "0.1000000000");
        assert_eq!(by_name("dtm"), "2024-02-29 23:59:59");
        assert_eq!(by_name("ts"), "2024-03-01 00:00:00");
        assert_eq!(by_name("c"), "ab", "CHAR pads with spaces, as MySQL's");
        assert_eq!(by_name("i"), "-3");
        assert_eq!(by_name("bi"), "-9007199254740992");
        assert_eq!(by_name("d"), "9007199254740992");
        assert_eq!(by_name("bo"), "1");
        assert_eq!(by_name("dt"), "2024-02-29");
        assert_eq!(by_name("f"), "NULL");
    });
}

#[test]
fn composite_keys_tell_rows_apart_by_every_part() {
    let rt = runtime();
    let engine = engine(32);
    rt.block_on(async {
        let table = create(
            &engine,
            "db",
            r#"{"name":"events","primary_key":["tenant","day","name"],"columns":[
                {"name":"tenant","type":"INT UNSIGNED"},
                {"name":"name","type":"VARCHAR(30)"},
                {"name":"day","type":"DATE"},
                {"name":"n","type":"BIGINT"}]}"#,
        )
        .await;
        let mut keys = Vec::new();
        for tenant in 0..4u64 {
            for day in ["2024-01-01", "2024-01-02"] {
                for name in ["", "a", "A", "a ", "ab"] {
                    keys.push(vec![
                        Value::UInt(tenant),
                        Value::Text(day.into()),
                        Value::Text(name.into()),
                    ]);
                }
            }
        }
        let results = run(&engine, |b| {
            for (n, k) in keys.iter().enumerate() {
                let row = [
                    ("tenant", k[0].clone()),
                    ("day", k[1].clone()),
                    ("name", k[2].clone()),
                    ("n", Value::Int(n as i64)),
                ];
                b.insert(&table, &row).unwrap();
            }
        })
        .await;
        assert!(
            results.iter().all(|r| r == &Ok(Outcome::Inserted)),
            "{results:?}"
        );
        for (n, k) in keys.iter().enumerate() {
            let row = read(&engine, &table, k).await.expect("present");
            assert_eq!(row[3], Value::Int(n as i64));
        }
        assert_eq!(
            read(
                &engine,
                &table,
                &[
                    Value::UInt(4),
                    Value::Text("2024-01-01".into()),
                    Value::Text("a".into())
                ]
            )
            .await,
            None
        );
        let dup = [
            ("tenant", Value::UInt(0)),
            ("day", Value::Text("2024-01-01".into())),
            ("name", Value::Text("a".into())),
            ("n", Value::Int(0)),
        ];
        let r = run(&engine, |b| b.insert(&table, &dup).unwrap()).await;
        assert_eq!(
            r[0],
            Err(OperationError::DuplicateKey {
                table: "events".into(),
                entry: "0-2024-01-01-a".into(),
            })
        );
        assert_eq!(r[0].as_ref().unwrap_err().number(), Some(630));
        check_accounting(&engine).await;
    });
}

#[test]
fn updates_writes_and_deletes_follow_their_contracts() {
    let rt = runtime();
    let engine = engine(32);
    rt.block_on(async {
        let t = create(
            &engine,
            "db",
            r#"{"name":"kv","primary_key":["k"],"columns":[
                {"name":"k","type":"VARCHAR(20)"},
                {"name":"v","type":"VARCHAR(2000)","nullable":true},
                {"name":"n","type":"INT"}]}"#,
        )
        .await;
        let k = || ("k", Value::Text("key".into()));
        let r = run(&engine, |b| {
            b.update(&t, &[k(), ("n", Value::Int(1))]).unwrap();
            b.delete(&t, &[Value::Text("key".into())]).unwrap();
            b.write(&t, &[k(), ("v", Value::Text("x".into()))]).unwrap();
            b.write(&t, &[k(), ("n", Value::Int(1))]).unwrap();
            b.write(&t, &[k(), ("v", Value::Text("long".repeat(400)))])
                .unwrap();
        })
        .await;
        assert_eq!(r[0].as_ref().unwrap_err().code(), "NOT_FOUND");
        assert_eq!(r[1].as_ref().unwrap_err().code(), "NOT_FOUND");
        assert_eq!(
            r[2],
            Err(OperationError::MissingColumn {
                table: "kv".into(),
                column: "n".into()
            })
        );
        assert_eq!(r[3], Ok(Outcome::Inserted));
        assert_eq!(r[4], Ok(Outcome::Updated));
        let row = read(&engine, &t, &[Value::Text("key".into())])
            .await
            .unwrap();
        assert_eq!(
            row,
            vec![
                Value::Text("key".into()),
                Value::Text("long".repeat(400)),
                Value::Int(1)
            ]
        );
        let r = run(&engine, |b| {
            b.update(&t, &[k(), ("v", Value::Null)]).unwrap()
        })
        .await;
        assert_eq!(r[0], Ok(Outcome::Updated));
        assert_eq!(
            read(&engine, &t, &[Value::Text("key".into())])
                .await
                .unwrap()[1],
            Value::Null
        );
        let r = run(&engine, |b| {
            b.delete(&t, &[Value::Text("key".into())]).unwrap()
        })
        .await;
        assert_eq!(r[0], Ok(Outcome::Deleted));
        assert_eq!(read(&engine, &t, &[Value::Text("key".into())]).await, None);
        let usage = check_accounting(&engine).await;
        assert!(
            usage.iter().all(|f| f.in_memory_bytes == 0),
            "an empty table holds no pages"
        );
    });
}

#[test]
fn a_replacing_write_answers_the_row_it_replaced() {
    let rt = runtime();
    let engine = engine(32);
    rt.block_on(async {
        let t = create(
            &engine,
            "db",
            r#"{"name":"kv","primary_key":["k"],"columns":[
                {"name":"k","type":"VARCHAR(20)"},
                {"name":"v","type":"VARCHAR(2000)"}]}"#,
        )
        .await;
        let row = |v: &str| {
            [
                ("k", Value::Text("key".into())),
                ("v", Value::Text(v.into())),
            ]
        };
        let old_v = |batch: &Batch, i: usize| {
            batch
                .found(i)
                .unwrap()
                .map(|r| String::from_utf8(r.bytes(1).unwrap().to_vec()).unwrap())
        };
        // Twice in one batch, then again in another: the first finds
        // nothing, each later one the row the one before it wrote.
        let mut batch = engine.tc().batch();
        batch.replace(&t, &row("one")).unwrap();
        batch.replace(&t, &row(&"two".repeat(300))).unwrap();
        let cost = batch.cost();
        assert_eq!((cost.reads, cost.write_units > 0), (2, true));
        engine.tc().execute_unchecked(&mut batch).await.unwrap();
        assert_eq!(batch.result(0), Ok(Outcome::Inserted));
        assert_eq!(batch.result(1), Ok(Outcome::Updated));
        assert_eq!(old_v(&batch, 0), None);
        assert_eq!(old_v(&batch, 1).as_deref(), Some("one"));
        // A read of a missing row costs one unit, of a row its 4 KiB steps.
        assert_eq!(batch.read_units_used(), 2);
        let mut batch = engine.tc().batch();
        batch.replace(&t, &row("three")).unwrap();
        engine.tc().execute_unchecked(&mut batch).await.unwrap();
        assert_eq!(old_v(&batch, 0), Some("two".repeat(300)));
        assert_eq!(
            read(&engine, &t, &[Value::Text("key".into())]).await,
            Some(vec![Value::Text("key".into()), Value::Text("three".into())])
        );
        check_accounting(&engine).await;
    });
}

#[test]
fn scans_filter_and_stop_at_the_limit() {
    let rt = runtime();
    let engine = engine(64);
    rt.block_on(async {
        let t = create(
            &engine,
            "db",
            r#"{"name":"people","primary_key":["id"],"columns":[
                {"name":"id","type":"INT"},
                {"name":"age","type":"TINYINT UNSIGNED","nullable":true},
                {"name":"name","type":"VARCHAR(10)"}]}"#,
        )
        .await;
        run(&engine, |b| {
            for id in 0..10_000 {
                let age = if id % 10 == 0 {
                    Value::Null
                } else {
                    Value::UInt(id as u64 % 100)
                };
                b.insert(
                    &t,
                    &[
                        ("id", Value::Int(id)),
                        ("age", age),
                        ("name", Value::Text(format!("p{id}"))),
                    ],
                )
                .unwrap();
            }
        })
        .await;
        let all = engine.tc().scan(&t, &[], usize::MAX).await.unwrap();
        assert_eq!(all.len(), 10_000, "scans run on past a step");
        let old = engine
            .tc()
            .scan(&t, &[("age", CmpOp::Ge, Value::Int(95))], usize::MAX)
            .await
            .unwrap();
        assert_eq!(old.len(), 500);
        assert!(
            old.iter()
                .all(|r| matches!(r.get("age"), Some(Value::UInt(a)) if *a >= 95))
        );
        let nulls = engine
            .tc()
            .scan(&t, &[("age", CmpOp::IsNull, Value::Null)], usize::MAX)
            .await
            .unwrap();
        assert_eq!(nulls.len(), 1000);
        let not_old = engine
            .tc()
            .scan(&t, &[("age", CmpOp::Ne, Value::Int(1))], usize::MAX)
            .await
            .unwrap();
        assert_eq!(
            not_old.len(),
            10_000 - 1000 - 100,
            "NULL is not unequal to anything"
        );
        let named = engine
            .tc()
            .scan(
                &t,
                &[
                    ("name", CmpOp::Eq, Value::Text("p77".into())),
                    ("id", CmpOp::Lt, Value::Int(100)),
                ],
                10,
            )
            .await
            .unwrap();
        assert_eq!(named.len(), 1);
        assert_eq!(named[0].get("id"), Some(&Value::Int(77)));
        assert_eq!(engine.tc().scan(&t, &[], 7).await.unwrap().len(), 7);
        let err = engine
            .tc()
            .scan(&t, &[("age", CmpOp::Eq, Value::Text("old".into()))], 1)
            .await
            .unwrap_err();
        assert_eq!(err.code(), "INVALID_VALUE");
        let err = engine
            .tc()
            .scan(&t, &[("height", CmpOp::Eq, Value::Int(1))], 1)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no such column"), "{err}");
    });
}

#[test]
fn dropping_a_table_returns_every_page() {
    let rt = runtime();
    let engine = engine(256);
    rt.block_on(async {
        let keep = create(&engine, "db", r#"{"name":"keep","primary_key":["id"],"columns":[{"name":"id","type":"INT"}]}"#).await;
        run(&engine, |b| b.insert(&keep, &[("id", Value::Int(1))]).unwrap()).await;
        let kept = engine.data_memory().used_pages();
        let t = create(
            &engine,
            "db",
            r#"{"name":"big","primary_key":["id"],"columns":[{"name":"id","type":"BIGINT"},{"name":"v","type":"VARBINARY(3000)"}]}"#,
        )
        .await;
        run(&engine, |b| {
            for id in 0..2000 {
                b.insert(&t, &[("id", Value::Int(id)), ("v", Value::Bytes(vec![id as u8; 1000 + id as usize % 2000]))]).unwrap();
            }
        })
        .await;
        assert!(engine.data_memory().used_pages() > kept + 60);
        check_accounting(&engine).await;
        engine.drop_table("db", "big").await.unwrap();
        assert_eq!(engine.data_memory().used_pages(), kept);
        assert_eq!(engine.table("db", "big").unwrap_err(), CatalogError::NoSuchTable { database: "db".into(), table: "big".into() });
        // Operations for the dropped table fail cleanly.
        let mut batch = engine.tc().batch();
        batch.read(&t, &[Value::Int(1)]).unwrap();
        engine.tc().execute_unchecked(&mut batch).await.unwrap();
        assert_eq!(batch.result(0), Err(OperationError::NoSuchTable { table: "big".into() }));
        assert_eq!(engine.tc().scan(&t, &[], 1).await.unwrap_err().code(), "NO_SUCH_TABLE");
        engine.drop_database("db").await.unwrap();
        assert_eq!(engine.data_memory().used_pages(), 0);
        assert!(engine.tables().is_empty());
    });
}

#[test]
fn out_of_data_memory_applies_nothing_and_frees_up_after_deletes() {
    let rt = runtime();
    let engine = engine(24);
    rt.block_on(async {
        let t = create(
            &engine,
            "db",
            r#"{"name":"blobs","primary_key":["id"],"columns":[{"name":"id","type":"INT"},{"name":"v","type":"VARBINARY(20000)"}]}"#,
        )
        .await;
        let mut inserted = Vec::new();
        let failed = loop {
            let id = inserted.len() as i64;
            let r = run(&engine, |b| b.insert(&t, &[("id", Value::Int(id)), ("v", Value::Bytes(vec![7; 12_000]))]).unwrap()).await;
            match r[0] {
                Ok(_) => inserted.push(id),
                Err(ref e) => break (id, e.clone()),
            }
        };
        assert_eq!(failed.1, OperationError::OutOfDataMemory { table: "blobs".into() });
        assert_eq!(failed.1.number(), Some(827));
        assert_eq!(read(&engine, &t, &[Value::Int(failed.0)]).await, None, "nothing of the failed insert is there");
        let usage = check_accounting(&engine).await;
        let rows: u64 = usage.iter().map(|f| f.rows).sum();
        assert_eq!(rows, inserted.len() as u64);
        // A growing update fails the same way and leaves the old value.
        let r = run(&engine, |b| b.update(&t, &[("id", Value::Int(0)), ("v", Value::Bytes(vec![8; 20_000]))]).unwrap()).await;
        if let Err(e) = &r[0] {
            assert_eq!(e.code(), "OUT_OF_DATA_MEMORY");
            assert_eq!(read(&engine, &t, &[Value::Int(0)]).await.unwrap()[1], Value::Bytes(vec![7; 12_000]));
        }
        // Deletes give pages back, and the insert that failed now succeeds.
        run(&engine, |b| {
            for id in inserted.iter().take(6) {
                b.delete(&t, &[Value::Int(*id)]).unwrap();
            }
        })
        .await;
        let r = run(&engine, |b| b.insert(&t, &[("id", Value::Int(failed.0)), ("v", Value::Bytes(vec![7; 12_000]))]).unwrap()).await;
        assert_eq!(r[0], Ok(Outcome::Inserted));
        check_accounting(&engine).await;
    });
}

#[test]
fn catalog_changes_are_checked() {
    let rt = runtime();
    let engine = engine(8);
    rt.block_on(async {
        let db = DatabaseName::parse("db").unwrap();
        engine.create_database(&db, None).await.unwrap();
        assert_eq!(
            engine.create_database(&db, None).await.unwrap_err(),
            CatalogError::DatabaseExists(db.clone())
        );
        let def: TableDef = serde_json::from_str(
            r#"{"name":"t","primary_key":["id"],"columns":[{"name":"id","type":"INT"}]}"#,
        )
        .unwrap();
        engine.create_table(&db, def.clone()).await.unwrap();
        assert!(matches!(
            engine.create_table(&db, def.clone()).await,
            Err(CatalogError::TableExists { .. })
        ));
        let other = DatabaseName::parse("other").unwrap();
        assert_eq!(
            engine.create_table(&other, def.clone()).await.unwrap_err(),
            CatalogError::NoSuchDatabase("other".into())
        );
        let mut bad = def;
        bad.primary_key.clear();
        assert!(matches!(
            engine.create_table(&db, bad).await,
            Err(CatalogError::Schema(_))
        ));
        assert!(matches!(
            engine.drop_table("db", "nope").await,
            Err(CatalogError::NoSuchTable { .. })
        ));
        assert!(matches!(
            engine.drop_table("db", "../etc").await,
            Err(CatalogError::NoSuchTable { .. })
        ));
        assert!(matches!(
            engine.drop_database("nope").await,
            Err(CatalogError::NoSuchDatabase(_))
        ));
        assert_eq!(engine.tables().len(), 1);
    });
}

#[test]
fn defaults_fill_what_an_insert_leaves_out_and_nothing_else() {
    let rt = runtime();
    let engine = engine(32);
    rt.block_on(async {
        let t = create(
            &engine,
            "db",
            r#"{"name":"jobs","primary_key":["id"],"columns":[
                {"name":"id","type":"INT"},
                {"name":"state","type":"VARCHAR(10)","default":"pending"},
                {"name":"tries","type":"INT","default":0},
                {"name":"note","type":"VARCHAR(10)","nullable":true,"default":"none"},
                {"name":"blob","type":"VARBINARY(4)","nullable":true,"default":"AQI="},
                {"name":"due","type":"DATE","nullable":true}]}"#,
        )
        .await;
        let id = |n| ("id", Value::Int(n));
        let (engine_ref, table) = (&engine, &t);
        let row = |n| async move { read(engine_ref, table, &[Value::Int(n)]).await.unwrap() };
        // An insert leaving them out stores the defaults (NULL without one);
        // an explicit NULL stays NULL.
        let r = run(&engine, |b| {
            b.insert(&t, &[id(1)]).unwrap();
            b.insert(
                &t,
                &[
                    id(2),
                    ("state", Value::Text("done".into())),
                    ("note", Value::Null),
                ],
            )
            .unwrap();
        })
        .await;
        assert_eq!(r, [Ok(Outcome::Inserted), Ok(Outcome::Inserted)]);
        assert_eq!(
            row(1).await,
            [
                Value::Int(1),
                Value::Text("pending".into()),
                Value::Int(0),
                Value::Text("none".into()),
                Value::Bytes(vec![1, 2]),
                Value::Null
            ]
        );
        assert_eq!(
            row(2).await[1..4],
            [Value::Text("done".into()), Value::Int(0), Value::Null]
        );
        // An update, or a write of a row that is there, leaves out what it
        // does not give: no default replaces a value.
        let r = run(&engine, |b| {
            b.update(&t, &[id(2), ("tries", Value::Int(3))]).unwrap();
            b.write(&t, &[id(1), ("tries", Value::Int(5))]).unwrap();
        })
        .await;
        assert_eq!(r, [Ok(Outcome::Updated), Ok(Outcome::Updated)]);
        assert_eq!(
            row(2).await[1..4],
            [Value::Text("done".into()), Value::Int(3), Value::Null]
        );
        assert_eq!(
            row(1).await[1..3],
            [Value::Text("pending".into()), Value::Int(5)]
        );
        // Defaults a column cannot hold are refused, and nothing is made.
        let db = DatabaseName::parse("db").unwrap();
        for (columns, why) in [
            (
                r#"{"name":"id","type":"INT","default":1}"#,
                "takes no default",
            ),
            (r#"{"name":"c","type":"INT","default":"x"}"#, "does not fit"),
            (
                r#"{"name":"c","type":"TINYINT","default":300}"#,
                "does not fit",
            ),
            (
                r#"{"name":"c","type":"VARCHAR(3)","default":"four"}"#,
                "does not fit",
            ),
            (
                r#"{"name":"c","type":"VARBINARY(3)","default":"!!"}"#,
                "base64",
            ),
            (
                r#"{"name":"c","type":"DATE","default":"2026-13-01"}"#,
                "does not fit",
            ),
            (
                r#"{"name":"c","type":"INT","default":[1]}"#,
                "must be a number",
            ),
        ] {
            let id = if columns.contains(r#""id""#) {
                ""
            } else {
                r#"{"name":"id","type":"INT"},"#
            };
            let json =
                format!(r#"{{"name":"bad","primary_key":["id"],"columns":[{id}{columns}]}}"#);
            let def: TableDef = serde_json::from_str(&json).unwrap();
            let e = engine.create_table(&db, def).await.expect_err(columns);
            assert!(matches!(e, CatalogError::Schema(_)), "{columns}: {e:?}");
            assert!(e.to_string().contains(why), "{columns}: {e}");
        }
        assert_eq!(engine.tables().len(), 1);
    });
}

#[test]
fn freed_space_is_reused_before_new_pages_are_taken() {
    let rt = runtime();
    let engine = engine_with(256, 1);
    rt.block_on(async {
        let t = create(
            &engine,
            "db",
            r#"{"name":"t","primary_key":["id"],"columns":[{"name":"id","type":"INT"},{"name":"v","type":"VARCHAR(500)"}]}"#,
        )
        .await;
        let row = |id: i64| [("id", Value::Int(id)), ("v", Value::Text("v".repeat(100 + id as usize % 400)))];
        run(&engine, |b| (0..4000).for_each(|id| b.insert(&t, &row(id)).unwrap())).await;
        let full = engine.data_memory().used_pages();
        // Delete every other row: the pages stay (they still hold rows), with holes.
        run(&engine, |b| (0..4000).step_by(2).for_each(|id| b.delete(&t, &[Value::Int(id)]).unwrap())).await;
        let holed = check_accounting(&engine).await;
        assert!(holed[0].free_in_memory_bytes > 400_000, "deletes leave free space: {holed:?}");
        // As many new rows of the same sizes fit in that space. (The keys
        // come back to the places they left in the primary key's ordered
        // index: keys that sort elsewhere would take new leaves there, as
        // in any B-tree.)
        run(&engine, |b| (0..4000).step_by(2).for_each(|id| b.insert(&t, &row(id)).unwrap())).await;
        assert!(
            engine.data_memory().used_pages() <= full,
            "{} pages after refilling, {full} when full",
            engine.data_memory().used_pages()
        );
        check_accounting(&engine).await;
    });
}

/// Any value of any kind thrown at any column type is either stored or
/// refused with an error naming the column; it never panics.
#[test]
fn arbitrary_values_never_panic_at_the_edge() {
    const TYPES: [&str; 20] = [
        "TINYINT",
        "SMALLINT UNSIGNED",
        "MEDIUMINT",
        "INT UNSIGNED",
        "BIGINT",
        "BIGINT UNSIGNED",
        "FLOAT",
        "DOUBLE",
        "DECIMAL(5,2)",
        "DECIMAL(38,0)",
        "DECIMAL(38,30)",
        "CHAR(3)",
        "VARCHAR(5)",
        "BINARY(2)",
        "VARBINARY(3)",
        "DATE",
        "DATETIME",
        "DATETIME(6)",
        "TIMESTAMP(3)",
        "BOOL",
    ];
    let value = prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::Int),
        any::<u64>().prop_map(Value::UInt),
        any::<f32>().prop_map(Value::Float),
        any::<f64>().prop_map(Value::Double),
        (any::<i128>(), 0u8..=60)
            .prop_map(|(mantissa, scale)| Value::Decimal(Decimal { mantissa, scale })),
        ".{0,40}".prop_map(Value::Text),
        "[-+0-9.eE :TZ]{0,30}".prop_map(Value::Text),
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(Value::Bytes),
        any::<i32>().prop_map(|d| Value::Date(Date(d))),
        any::<i64>().prop_map(|t| Value::DateTime(DateTime(t))),
        any::<i64>().prop_map(|t| Value::Timestamp(Timestamp(t))),
        any::<bool>().prop_map(Value::Bool),
    ];
    let rt = runtime();
    let engine = engine(1024);
    let tables: Vec<Arc<Table>> = rt.block_on(async {
        let mut tables = Vec::new();
        for (i, ty) in TYPES.iter().enumerate() {
            let json = format!(
                r#"{{"name":"t{i}","primary_key":["k"],"columns":[{{"name":"k","type":"{ty}"}},{{"name":"v","type":"{ty}","nullable":true}}]}}"#
            );
            tables.push(create(&engine, "db", &json).await);
        }
        tables
    });
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(2000));
    runner
        .run(&(0..TYPES.len(), value.clone(), value), |(t, key, v)| {
            let table = &tables[t];
            let mut batch = engine.tc().batch();
            match batch.insert(table, &[("k", key.clone()), ("v", v.clone())]) {
                Ok(()) => {
                    rt.block_on(engine.tc().execute_unchecked(&mut batch))
                        .unwrap();
                    let r = batch.result(0);
                    prop_assert!(
                        matches!(
                            r,
                            Ok(Outcome::Inserted) | Err(OperationError::DuplicateKey { .. })
                        ),
                        "{r:?}"
                    );
                }
                Err(e) => prop_assert!(e.column == "k" || e.column == "v", "{e}"),
            }
            if let Err(e) = batch.read(table, &[key]) {
                prop_assert_eq!(e.column, "k");
            }
            Ok(())
        })
        .unwrap();
    rt.block_on(check_accounting(&engine));
}
