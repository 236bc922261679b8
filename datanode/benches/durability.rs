//! Durability on the real file system. Run with
//! `cargo bench -p shoal-datanode --bench durability`; the data goes to a
//! fresh directory under `$SHOAL_BENCH_DIR` (default: the system's temp
//! directory), which should be on the disk a data node would use.
//!
//! 1. Write throughput: `C` clients, each committing one-row writes one
//!    after another through the transaction coordinator, with
//!    `--durability=sync`, with `interval:100`, and with no redo log at all.
//!    The peer, in the same run: a loop appending a 128-byte record and
//!    calling `fdatasync` on the same file system — the most commits a log
//!    that syncs once per commit could acknowledge.
//! 2. Recovery: a table of about 1 GiB of 1 KiB rows, stopped cleanly (all
//!    of it in checkpoint images), opened again; then updates after a
//!    checkpoint left only in the redo log, opened again. Each is measured
//!    with the files in the page cache and with the cache dropped for them
//!    (`posix_fadvise(DONTNEED)`), as after a reboot.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use shoal_datanode::testing::{self as persist, Durable, FileSystem};
use shoal_datanode::{
    Commit, DEFAULT_LOCK_WAIT_TIMEOUT, Durability, Engine, EngineConfig, Grant, Role, Table, Value,
};
use shoal_wire::schema::{DatabaseName, TableDef};

const KV: &str = r#"{"name":"kv","primary_key":["k"],"columns":[{"name":"k","type":"BIGINT"},{"name":"v","type":"VARBINARY(1000)"}]}"#;
const RUN_FOR: Duration = Duration::from_secs(3);
const MIB: f64 = (1 << 20) as f64;

fn config(data_memory: u64) -> EngineConfig {
    EngineConfig {
        node_id: shoal_datanode::NodeId(1),
        data_memory,
        ldm_threads: 2,
        fragments_per_table: None,
        seed: None,
        lock_wait_timeout: DEFAULT_LOCK_WAIT_TIMEOUT,
        spin: std::time::Duration::ZERO,
    }
}

fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("SHOAL_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

async fn table(engine: &Engine) -> (Arc<Table>, Grant) {
    let db = DatabaseName::parse("bench").unwrap();
    let t = match engine.table("bench", "kv") {
        Ok(t) => t,
        Err(_) => {
            engine.create_database(&db, None).await.unwrap();
            let mut def: TableDef = serde_json::from_str(KV).unwrap();
            // SHOAL_BENCH_PK=hash: no ordered index on the key, so that
            // recovery rebuilds none (what the rebuild costs, by difference).
            if std::env::var("SHOAL_BENCH_PK").as_deref() == Ok("hash") {
                def.primary_key_index = shoal_wire::schema::PrimaryKeyIndex::Hash;
            }
            engine.create_table(&db, def).await.unwrap()
        }
    };
    let grant = Grant {
        database: t.database.id,
        role: Role::ReadWrite,
    };
    (t, grant)
}

struct Throughput {
    commits_per_sec: f64,
    p50_us: u64,
    p99_us: u64,
}

/// `clients` tasks committing one 100-byte row each, one after another,
/// for `RUN_FOR`.
async fn writes(engine: &Engine, clients: u64) -> Throughput {
    let tc = engine.tc();
    let (t, grant) = table(engine).await;
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (tc, t, grant, stop) = (tc.clone(), Arc::clone(&t), grant, Arc::clone(&stop));
            tokio::spawn(async move {
                let mut latency = Histogram::<u64>::new(3).unwrap();
                let mut k = c as i64 * 1_000_000_000;
                while !stop.load(Ordering::Relaxed) {
                    let mut b = tc.batch();
                    b.write(
                        &t,
                        &[
                            ("k", Value::Int(k % 100_000)),
                            ("v", Value::Bytes(vec![7; 100])),
                        ],
                    )
                    .unwrap();
                    let sent = Instant::now();
                    tc.execute(&grant, &mut b, Commit::Each).await.unwrap();
                    latency.record(sent.elapsed().as_micros() as u64).unwrap();
                    k += 1;
                }
                latency
            })
        })
        .collect();
    tokio::time::sleep(RUN_FOR).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Histogram::<u64>::new(3).unwrap();
    for task in tasks {
        all.add(task.await.unwrap()).unwrap();
    }
    Throughput {
        commits_per_sec: all.len() as f64 / started.elapsed().as_secs_f64(),
        p50_us: all.value_at_quantile(0.5),
        p99_us: all.value_at_quantile(0.99),
    }
}

/// The peer: appends of 128 bytes, each followed by `fdatasync`.
fn fdatasync_loop(dir: &Path) -> f64 {
    let path = dir.join("peer.log");
    let mut file = std::fs::File::create(&path).unwrap();
    let record = [0x5au8; 128];
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < RUN_FOR {
        file.write_all(&record).unwrap();
        file.sync_data().unwrap();
        n += 1;
    }
    std::fs::remove_file(path).unwrap();
    n as f64 / started.elapsed().as_secs_f64()
}

fn write_throughput(rt: &tokio::runtime::Runtime) {
    println!(
        "## Write throughput: one-row commits from C clients ({} s each)",
        RUN_FOR.as_secs()
    );
    println!();
    println!(
        "| C | mode | commits/s | p50 µs | p99 µs | syncs/s | commits per sync | commits/s ÷ fdatasync loop/s |"
    );
    println!("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for clients in [1, 16, 64] {
        let dir = bench_dir();
        let peer = fdatasync_loop(dir.path());
        println!(
            "| {clients} | peer: append + fdatasync loop | {peer:.0} | | | {peer:.0} | 1 | 1.00 |"
        );
        for mode in [
            Some(Durability::Sync),
            Some(Durability::Interval(Duration::from_millis(100))),
            None,
        ] {
            let dir = bench_dir();
            let (engine, durable) = match mode {
                Some(mode) => {
                    let d = rt
                        .block_on(persist::open(
                            config(1 << 30),
                            Arc::new(FileSystem),
                            dir.path(),
                            mode,
                        ))
                        .unwrap();
                    (d.engine.clone(), Some(d))
                }
                None => (Engine::start(config(1 << 30)).unwrap(), None),
            };
            let syncs_before = durable.as_ref().map_or(0, |d| d.log.syncs());
            let r = rt.block_on(writes(&engine, clients));
            let syncs = durable.as_ref().map_or(0, |d| d.log.syncs()) - syncs_before;
            let syncs_per_sec = syncs as f64 / RUN_FOR.as_secs_f64();
            let per_sync = if syncs == 0 {
                "—".to_owned()
            } else {
                format!("{:.1}", r.commits_per_sec / syncs_per_sec)
            };
            let name = mode.map_or("no redo log".to_owned(), |m| m.to_string());
            println!(
                "| {clients} | {name} | {:.0} | {} | {} | {syncs_per_sec:.0} | {per_sync} | {:.2} |",
                r.commits_per_sec,
                r.p50_us,
                r.p99_us,
                r.commits_per_sec / peer
            );
            if let Some(d) = durable {
                d.log.close().unwrap();
            }
            drop(engine);
        }
    }
    println!();
}

/// Drops the page cache's copy of every file under `dir`.
fn drop_cache(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            drop_cache(&path);
        } else {
            let file = std::fs::File::open(&path).unwrap();
            file.sync_all().unwrap();
            // SAFETY: the descriptor is open for the whole call; the advice
            // changes no memory of this process.
            let r = unsafe {
                libc::posix_fadvise(
                    std::os::fd::AsRawFd::as_raw_fd(&file),
                    0,
                    0,
                    libc::POSIX_FADV_DONTNEED,
                )
            };
            assert_eq!(r, 0, "posix_fadvise");
        }
    }
}

const DATA_MEMORY: u64 = 2 << 30;
const ROWS: i64 = 1_000_000;
const ROW_BYTES: usize = 1000;

/// Writes `ROWS` rows (in batches of 1000) whose values start with `tag`.
async fn load(engine: &Engine, rows: std::ops::Range<i64>, tag: u8) {
    let (t, _) = table(engine).await;
    let tc = engine.tc();
    let mut batch = tc.batch();
    for k in rows {
        let mut v = vec![tag; ROW_BYTES];
        v[..8].copy_from_slice(&k.to_le_bytes());
        batch
            .write(&t, &[("k", Value::Int(k)), ("v", Value::Bytes(v))])
            .unwrap();
        if batch.len() == 1000 {
            tc.execute_unchecked(&mut batch).await.unwrap();
            batch.clear();
        }
    }
    tc.execute_unchecked(&mut batch).await.unwrap();
}

async fn reopen(dir: &Path) -> Durable {
    persist::open(
        config(DATA_MEMORY),
        Arc::new(FileSystem),
        dir,
        Durability::Sync,
    )
    .await
    .unwrap()
}

fn recovery(rt: &tokio::runtime::Runtime) {
    let dir = bench_dir();
    let interval = Durability::Interval(Duration::from_millis(100));
    rt.block_on(async {
        let node = persist::open(
            config(DATA_MEMORY),
            Arc::new(FileSystem),
            dir.path(),
            interval,
        )
        .await
        .unwrap();
        load(&node.engine, 0..ROWS, 1).await;
        node.close().await.unwrap();
    });
    println!("## Recovery: {ROWS} rows of {ROW_BYTES} bytes");
    println!();
    println!("| what is loaded | page cache | MiB | seconds | MiB/s | rows after |");
    println!("| --- | --- | ---: | ---: | ---: | ---: |");
    let report = |what: &str, cache: &str, node: &Durable, redo: bool| {
        let r = &node.recovered;
        let (bytes, took) = if redo {
            (r.redo_bytes, r.redo_took)
        } else {
            (r.image_bytes, r.images_took)
        };
        let rows: u64 = rt
            .block_on(node.engine.memory_usage())
            .unwrap()
            .iter()
            .map(|f| f.rows)
            .sum();
        println!(
            "| {what} | {cache} | {:.0} | {:.2} | {:.0} | {rows} |",
            bytes as f64 / MIB,
            took.as_secs_f64(),
            bytes as f64 / MIB / took.as_secs_f64()
        );
    };
    // Opens the node twice, with the page cache dropped and warm.
    let measure = |what: &str, redo: bool| {
        for cold in [true, false] {
            if cold {
                drop_cache(dir.path());
            }
            let node = rt.block_on(reopen(dir.path()));
            report(what, if cold { "dropped" } else { "warm" }, &node, redo);
            node.log.close().unwrap();
        }
    };
    measure("checkpoint images (clean stop)", false);
    // Updates of a quarter of the rows after the checkpoint: only in the log.
    rt.block_on(async {
        let node = reopen(dir.path()).await;
        load(&node.engine, 0..ROWS / 4, 2).await;
        node.log.close().unwrap();
    });
    measure("redo log after the checkpoint", true);
    println!();
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    write_throughput(&rt);
    recovery(&rt);
}
