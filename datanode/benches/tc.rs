//! The transaction coordinator in process. Run with
//! `cargo bench -p shoal-datanode --features testing --bench tc`.
//!
//! 1. What its checks cost — grant, operation count, requests in flight, read
//!    and write limiters, memory quota — per request and per operation, with
//!    a bare limiter check as the peer in the same run.
//! 2. A noisy neighbour: database A offered 10x its write limit from several
//!    tasks while database B reads within its limit. B's latency with and
//!    without A (open loop: from when each read was due, so a stall counts
//!    against every read it delays), and the rate A was admitted at.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use shoal_datanode::DEFAULT_LOCK_WAIT_TIMEOUT;
use shoal_datanode::{Batch, Commit, Engine, EngineConfig, Grant, Role, Table, Tc, Value};
use shoal_quota::{LimiterPool, Quota};
use shoal_wire::schema::{DatabaseName, TableDef};

const RUNS: usize = 9;
const KV: &str = r#"{"name":"kv","primary_key":["k"],"columns":[{"name":"k","type":"BIGINT"},{"name":"v","type":"VARBINARY(100)"}]}"#;

async fn database(engine: &Engine, name: &str, quota: Quota, rows: i64) -> (Arc<Table>, Grant) {
    let db = DatabaseName::parse(name).unwrap();
    engine.create_database(&db, None).await.unwrap();
    let def: TableDef = serde_json::from_str(KV).unwrap();
    let t = engine.create_table(&db, def).await.unwrap();
    let mut batch = engine.tc().batch();
    for k in 0..rows {
        batch
            .insert(
                &t,
                &[("k", Value::Int(k)), ("v", Value::Bytes(vec![1; 100]))],
            )
            .unwrap();
    }
    engine.tc().execute_unchecked(&mut batch).await.unwrap();
    engine.set_database_quota(name, quota).await.unwrap();
    let grant = Grant {
        database: t.database.id,
        role: Role::ReadWrite,
    };
    (t, grant)
}

/// The fastest of `RUNS` runs of `f`, in nanoseconds per call of its `n` calls.
fn best_ns(n: u64, mut f: impl FnMut()) -> f64 {
    (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::MAX, f64::min)
}

fn check_cost(rt: &tokio::runtime::Runtime, engine: &Engine) {
    let tc = engine.tc();
    let quota = Quota {
        in_memory_bytes: Some(1 << 30),
        read_units_per_sec: Some(u32::MAX),
        write_units_per_sec: Some(u32::MAX),
        max_transaction_ops: Some(1000),
        max_parallel_transactions: Some(1000),
        ..Quota::UNLIMITED
    };
    let (t, grant) = rt.block_on(database(engine, "checks", quota, 1000));
    let one = |write: bool| {
        let mut b = tc.batch();
        if write {
            b.write(
                &t,
                &[("k", Value::Int(1)), ("v", Value::Bytes(vec![2; 100]))],
            )
            .unwrap();
        } else {
            b.read(&t, &[Value::Int(1)]).unwrap();
        }
        b
    };
    let (read, write) = (one(false), one(true));
    let mut hundred = tc.batch();
    for k in 0..100 {
        hundred.read(&t, &[Value::Int(k)]).unwrap();
    }
    const N: u64 = 1_000_000;
    let per_request = best_ns(N, || {
        for i in 0..N {
            let b: &Batch = if i % 2 == 0 { &read } else { &write };
            tc.admit_only(&grant, black_box(b)).unwrap();
        }
    });
    let per_op = best_ns(N, || {
        for _ in 0..N / 100 {
            tc.admit_only(&grant, black_box(&hundred)).unwrap();
        }
    });
    let pool: LimiterPool<u32> = LimiterPool::default();
    let bare = pool.limiter(NonZeroU32::MAX, NonZeroU32::MAX);
    let limiter = best_ns(N, || {
        for _ in 0..N {
            bare.check(black_box(&7), 1).unwrap();
        }
    });
    println!("## Checks of the transaction coordinator (best of {RUNS} runs)");
    println!();
    println!("| what | ns |");
    println!("| --- | ---: |");
    println!(
        "| all checks, per request of 1 operation (reads and writes alternating) | {per_request:.1} |"
    );
    println!("| all checks, per operation of a 100-read request | {per_op:.2} |");
    println!("| peer: one bare limiter check (governor GCRA, keyed) | {limiter:.1} |");
    println!();
}

#[derive(Default)]
struct Tally {
    admitted_units: AtomicU64,
    throttled: AtomicU64,
}

/// Latencies in µs: from when each request was due (counting any delay in
/// sending it, as an open-loop client sees it), and from when it was sent.
struct Latency {
    from_due: Histogram<u64>,
    service: Histogram<u64>,
}

/// Sends `per_ms` requests every millisecond for `time`, each built by
/// `make`, and returns their latencies.
async fn paced(
    tc: Tc,
    grant: Grant,
    per_ms: u32,
    time: Duration,
    tally: Arc<Tally>,
    make: impl Fn(u64) -> Batch + Send + Sync + 'static,
) -> Latency {
    let make = Arc::new(make);
    let histogram = || Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let mut latency = Latency {
        from_due: histogram(),
        service: histogram(),
    };
    let (send, mut results) = tokio::sync::mpsc::unbounded_channel();
    let start = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval(Duration::from_millis(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut n = 0u64;
    loop {
        let due = ticks.tick().await;
        if due - start >= time {
            break;
        }
        for _ in 0..per_ms {
            n += 1;
            let (tc, make, send, tally) = (
                tc.clone(),
                Arc::clone(&make),
                send.clone(),
                Arc::clone(&tally),
            );
            tokio::spawn(async move {
                let sent = tokio::time::Instant::now();
                let mut batch = make(n);
                match tc.execute(&grant, &mut batch, Commit::Each).await {
                    Ok(()) => tally
                        .admitted_units
                        .fetch_add(batch.len() as u64, Ordering::Relaxed),
                    Err(_) => tally.throttled.fetch_add(1, Ordering::Relaxed),
                };
                let _ = send.send((due.elapsed(), sent.elapsed()));
            });
        }
    }
    drop(send);
    while let Some((from_due, service)) = results.recv().await {
        latency
            .from_due
            .record(from_due.as_micros().max(1) as u64)
            .unwrap();
        latency
            .service
            .record(service.as_micros().max(1) as u64)
            .unwrap();
    }
    latency
}

fn noisy_neighbour(rt: &tokio::runtime::Runtime, engine: &Engine) {
    let tc = engine.tc();
    const A_LIMIT: u32 = 2_000;
    const B_READS_PER_MS: u32 = 4;
    const A_TASKS: u32 = 4;
    const A_WRITES_PER_MS_PER_TASK: u32 = 5;
    let time = Duration::from_secs(8);
    let warm = Duration::from_secs(1);
    let (a, a_grant) = rt.block_on(database(
        engine,
        "flooder",
        Quota {
            write_units_per_sec: Some(A_LIMIT),
            ..Quota::UNLIMITED
        },
        1000,
    ));
    let (b, b_grant) = rt.block_on(database(
        engine,
        "steady",
        Quota {
            read_units_per_sec: Some(20_000),
            ..Quota::UNLIMITED
        },
        10_000,
    ));
    let reader = {
        let (tc, b) = (tc.clone(), Arc::clone(&b));
        move |n: u64| {
            let mut batch = tc.batch();
            batch
                .read(&b, &[Value::Int((n * 7919 % 10_000) as i64)])
                .unwrap();
            batch
        }
    };
    let writer = {
        let (tc, a) = (tc.clone(), Arc::clone(&a));
        move |n: u64| {
            let mut batch = tc.batch();
            batch
                .write(
                    &a,
                    &[
                        ("k", Value::Int((n % 1000) as i64)),
                        ("v", Value::Bytes(vec![n as u8; 100])),
                    ],
                )
                .unwrap();
            batch
        }
    };
    let run = |with_flood: bool| {
        rt.block_on(async {
            let b_tally = Arc::new(Tally::default());
            let a_tally = Arc::new(Tally::default());
            let flood: Vec<_> = (0..if with_flood { A_TASKS } else { 0 })
                .map(|_| {
                    tokio::spawn(paced(
                        tc.clone(),
                        a_grant,
                        A_WRITES_PER_MS_PER_TASK,
                        warm + time,
                        Arc::clone(&a_tally),
                        writer.clone(),
                    ))
                })
                .collect();
            // B starts once A's burst is spent, and runs while A floods.
            tokio::time::sleep(warm).await;
            let a_before = a_tally.admitted_units.load(Ordering::Relaxed);
            let b_latency = paced(
                tc.clone(),
                b_grant,
                B_READS_PER_MS,
                time,
                Arc::clone(&b_tally),
                reader.clone(),
            )
            .await;
            let a_admitted = a_tally.admitted_units.load(Ordering::Relaxed) - a_before;
            for f in flood {
                f.await.unwrap();
            }
            (
                b_latency,
                b_tally.throttled.load(Ordering::Relaxed),
                a_admitted as f64 / time.as_secs_f64(),
            )
        })
    };
    let (solo, solo_throttled, _) = run(false);
    let (shared, shared_throttled, a_rate) = run(true);
    let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    println!("## Noisy neighbour ({} s)", time.as_secs());
    println!();
    println!(
        "Database A is offered {} writes/s ({}x its limit of {A_LIMIT} write units/s) from {A_TASKS} tasks; database B reads {} rows/s, within its limit of 20,000.",
        A_TASKS * A_WRITES_PER_MS_PER_TASK * 1000,
        A_TASKS * A_WRITES_PER_MS_PER_TASK * 1000 / A_LIMIT,
        B_READS_PER_MS * 1000
    );
    println!();
    println!("| B's reads, latency | p50 ms | p99 ms | p99.9 ms | max ms | reads | throttled |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let rows = [
        ("alone, from due", &solo.from_due, solo_throttled),
        (
            "with A flooding, from due",
            &shared.from_due,
            shared_throttled,
        ),
        ("alone, from sent", &solo.service, solo_throttled),
        (
            "with A flooding, from sent",
            &shared.service,
            shared_throttled,
        ),
    ];
    for (name, h, throttled) in rows {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {throttled} |",
            us(h, 0.5),
            us(h, 0.99),
            us(h, 0.999),
            h.max() as f64 / 1000.0,
            h.len()
        );
    }
    println!();
    println!(
        "B's p99 with A / alone: {:.2} from due, {:.2} from sent",
        us(&shared.from_due, 0.99) / us(&solo.from_due, 0.99),
        us(&shared.service, 0.99) / us(&solo.service, 0.99)
    );
    println!(
        "A admitted {a_rate:.0} write units/s against its limit of {A_LIMIT}: {:+.1}%",
        (a_rate / f64::from(A_LIMIT) - 1.0) * 100.0
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let engine = Engine::start(EngineConfig {
        node_id: shoal_datanode::NodeId(1),
        data_memory: 1 << 30,
        ldm_threads: 2,
        fragments_per_table: None,
        seed: None,
        lock_wait_timeout: DEFAULT_LOCK_WAIT_TIMEOUT,
        spin: std::time::Duration::ZERO,
    })
    .unwrap();
    check_cost(&rt, &engine);
    noisy_neighbour(&rt, &engine);
}
