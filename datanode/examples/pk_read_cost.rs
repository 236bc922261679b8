//! Primary-key reads for counting instructions with callgrind, on the LDM
//! worker's side only:
//!
//! ```text
//! cargo build --release -p shoal-datanode --example pk_read_cost
//! valgrind --tool=callgrind --toggle-collect='*Worker*execute*' \
//!     target/release/examples/pk_read_cost ycsb 100000 100000
//! ```
//!
//! It loads `rows` rows, then has the worker execute `reads` reads of random
//! existing keys in batches of 1000; callgrind counts only inside the worker's
//! batch loop. The load counts too, so run it once with `reads` = 0 and take
//! the difference: `scripts/callgrind-pk-read` does that.

use shoal_datanode::{Commit, Engine, EngineConfig, Grant, Outcome, Role, Value};
use shoal_wire::schema::{DatabaseName, TableDef};

const BATCH: usize = 1000;

type KeyFn = fn(u64) -> Value;
type RowFn = fn(u64) -> Vec<(&'static str, Value)>;

fn main() {
    let mut args = std::env::args().skip(1);
    let workload = args.next().unwrap_or_else(|| "ycsb".into());
    let rows: u64 = args
        .next()
        .map_or(100_000, |n| n.parse().expect("rows is a number"));
    let reads: usize = args
        .next()
        .map_or(100_000, |n| n.parse().expect("reads is a number"));
    let (table, key, row): (&str, KeyFn, RowFn) = match workload.as_str() {
        "ycsb" => (
            r#"{"name":"usertable","primary_key":["ycsb_key"],"columns":[{"name":"ycsb_key","type":"VARCHAR(255)"},
                {"name":"field0","type":"VARCHAR(100)","nullable":true},{"name":"field1","type":"VARCHAR(100)","nullable":true},
                {"name":"field2","type":"VARCHAR(100)","nullable":true},{"name":"field3","type":"VARCHAR(100)","nullable":true},
                {"name":"field4","type":"VARCHAR(100)","nullable":true},{"name":"field5","type":"VARCHAR(100)","nullable":true},
                {"name":"field6","type":"VARCHAR(100)","nullable":true},{"name":"field7","type":"VARCHAR(100)","nullable":true},
                {"name":"field8","type":"VARCHAR(100)","nullable":true},{"name":"field9","type":"VARCHAR(100)","nullable":true}]}"#,
            |i| {
                Value::Text(format!(
                    "user{}",
                    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 1
                ))
            },
            |i| {
                let mut r = vec![(
                    "ycsb_key",
                    Value::Text(format!(
                        "user{}",
                        i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 1
                    )),
                )];
                for f in [
                    "field0", "field1", "field2", "field3", "field4", "field5", "field6", "field7",
                    "field8", "field9",
                ] {
                    r.push((f, Value::Text("x".repeat(100))));
                }
                r
            },
        ),
        "kv" => (
            r#"{"name":"kv","primary_key":["k"],"columns":[{"name":"k","type":"BIGINT"},{"name":"v","type":"VARBINARY(100)"}]}"#,
            |i| Value::Int(i as i64),
            |i| {
                vec![
                    ("k", Value::Int(i as i64)),
                    ("v", Value::Bytes(vec![1; 100])),
                ]
            },
        ),
        other => panic!("unknown workload {other}: ycsb or kv"),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let engine = Engine::start(EngineConfig {
        node_id: shoal_datanode::NodeId(1),
        data_memory: 1 << 30,
        ldm_threads: 1,
        fragments_per_table: Some(2),
        seed: None,
        lock_wait_timeout: shoal_datanode::DEFAULT_LOCK_WAIT_TIMEOUT,
        spin: std::time::Duration::ZERO,
    })
    .unwrap();
    rt.block_on(async {
        let db = DatabaseName::parse("bench").unwrap();
        engine.create_database(&db, None).await.unwrap();
        let def: TableDef = serde_json::from_str(table).unwrap();
        let t = engine.create_table(&db, def).await.unwrap();
        // Through the coordinator, as every request goes; callgrind counts
        // only the worker's side.
        let grant = Grant {
            database: t.database.id,
            role: Role::ReadWrite,
        };
        let tc = engine.tc();
        let mut batch = tc.batch();
        for start in (0..rows).step_by(BATCH) {
            batch.clear();
            for i in start..(start + BATCH as u64).min(rows) {
                batch.insert(&t, &row(i)).unwrap();
            }
            tc.execute(&grant, &mut batch, Commit::Each).await.unwrap();
        }
        let mut x = 88172645463325252u64;
        for _ in 0..reads / BATCH {
            batch.clear();
            for _ in 0..BATCH {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                batch.read(&t, &[key(x % rows)]).unwrap();
            }
            tc.execute(&grant, &mut batch, Commit::Each).await.unwrap();
            assert!(matches!(batch.result(BATCH - 1), Ok(Outcome::Found(_))));
        }
    });
    println!("{reads} reads of {workload} rows over {rows} rows");
}
