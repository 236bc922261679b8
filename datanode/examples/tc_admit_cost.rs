//! The transaction coordinator's checks, for counting instructions with
//! callgrind: the grant, `max_transaction_ops`, `max_parallel_transactions`,
//! the read and write limiters and the memory quota, on a database with every
//! limit set.
//!
//! ```text
//! cargo build --release -p shoal-datanode --example tc_admit_cost
//! valgrind --tool=callgrind --toggle-collect='*Tc*admit*' \
//!     target/release/examples/tc_admit_cost 100000
//! ```
//!
//! Only the checks are counted (`Tc::admit`); instructions per request =
//! the total callgrind reports / the requests. Half the requests read one
//! row, half write one.

use shoal_datanode::DEFAULT_LOCK_WAIT_TIMEOUT;
use shoal_datanode::{Commit, Engine, EngineConfig, Grant, Role, Value};
use shoal_quota::Quota;
use shoal_wire::schema::{DatabaseName, TableDef};

fn main() {
    let requests: u64 = std::env::args()
        .nth(1)
        .map_or(100_000, |n| n.parse().expect("a number of requests"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let engine = Engine::start(EngineConfig {
        node_id: shoal_datanode::NodeId(1),
        data_memory: 256 << 20,
        ldm_threads: 1,
        fragments_per_table: Some(2),
        seed: None,
        lock_wait_timeout: DEFAULT_LOCK_WAIT_TIMEOUT,
        spin: std::time::Duration::ZERO,
    })
    .unwrap();
    let tc = engine.tc().clone();
    rt.block_on(async {
        let db = DatabaseName::parse("bench").unwrap();
        engine.create_database(&db, None).await.unwrap();
        let def: TableDef = serde_json::from_str(r#"{"name":"kv","primary_key":["k"],"columns":[{"name":"k","type":"BIGINT"},{"name":"v","type":"VARBINARY(100)"}]}"#).unwrap();
        let t = engine.create_table(&db, def).await.unwrap();
        let quota = Quota {
            in_memory_bytes: Some(200 << 20),
            read_units_per_sec: Some(u32::MAX),
            write_units_per_sec: Some(u32::MAX),
            max_transaction_ops: Some(1000),
            max_parallel_transactions: Some(1000),
            ..Quota::UNLIMITED
        };
        engine.set_database_quota("bench", quota).await.unwrap();
        let grant = Grant {
            database: t.database.id,
            role: Role::ReadWrite,
        };
        let (mut read, mut write) = (engine.tc().batch(), engine.tc().batch());
        read.read(&t, &[Value::Int(1)]).unwrap();
        write.write(&t, &[("k", Value::Int(1)), ("v", Value::Bytes(vec![7; 100]))]).unwrap();
        for i in 0..requests {
            let batch = if i % 2 == 0 { &mut write } else { &mut read };
            tc.execute(&grant, batch, Commit::Each).await.unwrap();
        }
    });
    println!("{requests} requests through the transaction coordinator");
}
