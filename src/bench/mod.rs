//! `shoal bench`: YCSB, batched key lookups and a multi-tenant noisy-neighbour
//! run against a running Shoal (or a throwaway one, `--start`), over REST or
//! the Redis protocol, swept over thread counts.
//!
//! A "thread" is one client with its own connection, issuing one request
//! at a time. Without `--rate` each goes as fast as answers come (a closed
//! loop); with it, the clients together aim at that many operations a
//! second and each operation's latency is measured from when it was due,
//! not from when it was sent, so a server that stalls is charged for the
//! requests it held back (no coordinated omission).

mod client;
mod keys;
mod report;
mod start;
mod workload;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::json;
use shoal_datanode::persist::redo::Durability;

use crate::size::ByteSize;
use client::{Conn, Outcome, Target};
use keys::Distribution;
use report::{Recorder, RunResult};
use workload::{FIELDS, Op, OpGen, Plan, Records, Ycsb};

/// How often a progress line is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(3);
/// Records per load request.
const LOAD_CHUNK: u64 = 100;
/// Connections loading records at once.
const LOADERS: usize = 4;
/// Most clients a run may have.
const MAX_THREADS: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Bench {
    /// Batched primary-key reads (`--batch` keys a request): rows/s and batch latency.
    Keylookup,
    /// A YCSB core workload (`--workload a|b|c|d|f`) over `usertable`.
    Ycsb,
    /// `--tenants` databases, one flooding past its rate limit, the others steady within theirs.
    Multitenant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Protocol {
    Rest,
    Resp,
}

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// The benchmark.
    #[arg(value_enum)]
    bench: Bench,
    /// The YCSB workload (ycsb, and the mix each tenant runs in multitenant).
    #[arg(long = "workload", value_enum, default_value = "a")]
    ycsb: Ycsb,
    /// How keys are chosen [default: YCSB's for the workload; uniform for keylookup].
    #[arg(long, value_enum)]
    distribution: Option<Distribution>,
    /// The data API to use.
    #[arg(long, value_enum, default_value = "rest")]
    protocol: Protocol,
    /// Start a throwaway cluster (control plane and one data node) in this
    /// process and run against it.
    #[arg(long)]
    start: bool,
    /// REST endpoint of a running data node.
    #[arg(long, default_value = "http://127.0.0.1:4406")]
    rest_url: String,
    /// Redis-protocol address of a running data node (or of a redis-server).
    #[arg(long, default_value = "127.0.0.1:6380")]
    resp_addr: String,
    /// The database to use (it must hold `usertable` for REST).
    #[arg(long)]
    database: Option<String>,
    /// The API key. Over RESP with neither key nor database no AUTH is sent,
    /// as a plain redis-server wants.
    #[arg(long, env = "SHOAL_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Thread counts to sweep, one run each, e.g. 1,2,4,8,16,32.
    #[arg(long, default_value = "1,2,4,8,16,32", value_parser = parse_threads)]
    threads: Threads,
    /// Seconds each run lasts.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    time: u64,
    /// Records loaded (per tenant in multitenant).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    records: u64,
    /// Keys a keylookup request reads.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1000))]
    batch: u64,
    /// Operations a second all threads together aim at (latency then counts
    /// from when each operation was due); none: as fast as answers come.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<f64>,
    /// Directory for final_result.txt, results.json and chart.svg.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// Use the records already there instead of loading them.
    #[arg(long)]
    skip_load: bool,
    /// Seed of the key and value choices: the same seed, the same operations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// multitenant: tenant databases, the first of which floods.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(2..=64))]
    tenants: u64,
    /// multitenant: each database's read and write units a second.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=10_000_000))]
    tenant_limit: u64,
    /// --start: when a commit is acknowledged (`sync` or `interval:<ms>`).
    #[arg(long, default_value = "sync")]
    durability: Durability,
    /// --start: the data node's DataMemory.
    #[arg(long, default_value = "1G")]
    data_memory: ByteSize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Threads(Vec<usize>);

fn parse_threads(s: &str) -> Result<Threads, String> {
    let counts: Vec<usize> = s
        .split(',')
        .map(|t| t.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("'{s}' is not a list of thread counts, e.g. 1,2,4"))?;
    if counts.is_empty() || counts.len() > 32 {
        return Err("give 1 to 32 thread counts".into());
    }
    if let Some(bad) = counts.iter().find(|&&t| t == 0 || t > MAX_THREADS) {
        return Err(format!(
            "{bad} threads: each count must be 1 to {MAX_THREADS}"
        ));
    }
    Ok(Threads(counts))
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && (1.0..=100_000_000.0).contains(&r) => Ok(r),
        _ => Err(format!(
            "'{s}' is not a rate: operations a second, 1 to 100000000"
        )),
    }
}

/// Clients that run together on one database.
#[derive(Clone)]
struct Group {
    label: String,
    target: Target,
    plan: Plan,
    threads: usize,
    /// Operations a second of all the group's clients together.
    rate: Option<f64>,
    seed: u64,
    /// The records there are (inserts add to them).
    records: Arc<Records>,
}

/// What a client has measured: all of the run, and since the last progress line.
#[derive(Default)]
struct Stats {
    total: Recorder,
    window: Recorder,
}

pub(crate) async fn run(args: &BenchArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let cluster = if args.start {
        let cluster = start::Cluster::start(args.durability, args.data_memory.0).await?;
        println!(
            "started a throwaway cluster: REST {} RESP {} (--durability {})",
            cluster.rest_url, cluster.resp_addr, args.durability
        );
        Some(cluster)
    } else {
        None
    };
    let result = match (args.bench, &cluster) {
        (Bench::Multitenant, Some(cluster)) => multitenant(args, cluster).await,
        (Bench::Multitenant, None) => Err(anyhow::anyhow!(
            "multitenant makes its tenants and sets their limits itself: run it with --start"
        )),
        (_, cluster) => sweep(args, cluster.as_ref()).await,
    };
    if let Some(cluster) = cluster {
        cluster.stop().await?;
    }
    result
}

/// Where the data is, for a cluster the benchmark made or one it was pointed at.
async fn target_for(
    args: &BenchArgs,
    cluster: Option<&start::Cluster>,
    tenant: &str,
) -> anyhow::Result<(Target, Option<start::Tenant>)> {
    if let Some(cluster) = cluster {
        let made = cluster.tenant(tenant).await?;
        let target = match args.protocol {
            Protocol::Rest => Target::Rest {
                url: cluster.rest_url.clone(),
                database: made.database.clone(),
                key: made.key.clone(),
            },
            Protocol::Resp => Target::Resp {
                addr: cluster.resp_addr.clone(),
                auth: Some((made.database.clone(), made.key.clone())),
            },
        };
        return Ok((target, Some(made)));
    }
    let target = match (args.protocol, &args.database, &args.api_key) {
        (Protocol::Rest, Some(database), Some(key)) => Target::Rest {
            url: args.rest_url.clone(),
            database: database.clone(),
            key: key.clone(),
        },
        (Protocol::Rest, _, _) => {
            bail!("over REST give --database and --api-key (or SHOAL_API_KEY), or use --start")
        }
        (Protocol::Resp, Some(database), Some(key)) => Target::Resp {
            addr: args.resp_addr.clone(),
            auth: Some((database.clone(), key.clone())),
        },
        (Protocol::Resp, None, None) => Target::Resp {
            addr: args.resp_addr.clone(),
            auth: None,
        },
        (Protocol::Resp, _, _) => bail!("over RESP give both --database and --api-key, or neither"),
    };
    Ok((target, None))
}

fn plan_of(args: &BenchArgs) -> Plan {
    match args.bench {
        Bench::Keylookup => Plan::Lookup {
            batch: args.batch as usize,
            distribution: args.distribution.unwrap_or(Distribution::Uniform),
        },
        Bench::Ycsb | Bench::Multitenant => Plan::Ycsb(
            args.ycsb.mix(),
            args.distribution.unwrap_or(args.ycsb.distribution()),
        ),
    }
}

fn title(args: &BenchArgs) -> String {
    match args.bench {
        Bench::Keylookup => format!("keylookup, batch {}", args.batch),
        Bench::Ycsb => format!("ycsb {:?}", args.ycsb).to_lowercase(),
        Bench::Multitenant => format!("multitenant, ycsb {:?}", args.ycsb).to_lowercase(),
    }
}

/// keylookup and ycsb: load, then one run per thread count.
async fn sweep(args: &BenchArgs, cluster: Option<&start::Cluster>) -> anyhow::Result<()> {
    let (target, _) = target_for(args, cluster, "bench").await?;
    if !args.skip_load {
        load(&target, args.records, args.seed).await?;
    }
    let title = format!("{} over {:?}", title(args), args.protocol)
        .replace("Rest", "REST")
        .replace("Resp", "RESP");
    println!(
        "{title}: {} records, {} s a run, threads {:?}{}",
        args.records,
        args.time,
        args.threads.0,
        args.rate
            .map_or(String::new(), |r| format!(", {r} ops/s in all"))
    );
    let records = Arc::new(Records::new(args.records));
    let mut runs = Vec::new();
    for (n, &threads) in args.threads.0.iter().enumerate() {
        let group = Group {
            label: String::new(),
            target: target.clone(),
            plan: plan_of(args),
            threads,
            rate: args.rate,
            seed: args.seed.wrapping_add(1_000 * n as u64),
            records: Arc::clone(&records),
        };
        let (recorders, elapsed) = run_groups(std::slice::from_ref(&group), args.time).await?;
        let result = RunResult::new(threads, elapsed, args.rate, &recorders[0]);
        print_run(&result);
        runs.push(result);
    }
    let results = json!({
        "benchmark": args.bench,
        "title": title,
        "workload": (args.bench == Bench::Ycsb).then_some(args.ycsb),
        "distribution": match plan_of(args) { Plan::Ycsb(_, d) | Plan::Lookup { distribution: d, .. } => d },
        "batch": (args.bench == Bench::Keylookup).then_some(args.batch),
        "protocol": args.protocol,
        "records": args.records,
        "seconds_per_run": args.time,
        "target_ops_per_sec": args.rate,
        "machine": machine(),
        "runs": runs,
    });
    write_out(args, &report::final_result(&runs), &results)?;
    let chart = args.out.join("chart.svg");
    std::fs::write(&chart, report::chart(&title, &runs))
        .with_context(|| format!("writing {}", chart.display()))?;
    println!(
        "wrote final_result.txt, results.json and chart.svg to {}",
        args.out.display()
    );
    Ok(())
}

fn print_run(r: &RunResult) {
    let l = &r.latency_ms;
    println!(
        "threads {}: {:.0} ops/s, {:.0} rows/s, latency ms p50 {:.3} p95 {:.3} p99 {:.3} p99.9 {:.3} max {:.3}{}{}",
        r.threads,
        r.ops_per_sec,
        r.rows_per_sec,
        l.p50,
        l.p95,
        l.p99,
        l.p999,
        l.max,
        if r.throttled > 0 {
            format!(", throttled {}", r.throttled)
        } else {
            String::new()
        },
        match &r.first_failure {
            Some(why) => format!(", {} failed (first: {why})", r.failed),
            None => String::new(),
        },
    );
}

fn write_out(
    args: &BenchArgs,
    final_result: &str,
    results: &serde_json::Value,
) -> anyhow::Result<()> {
    let path = args.out.join("final_result.txt");
    std::fs::write(&path, final_result).with_context(|| format!("writing {}", path.display()))?;
    let path = args.out.join("results.json");
    std::fs::write(&path, serde_json::to_vec_pretty(results)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn machine() -> serde_json::Value {
    json!({
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    })
}

/// Writes records `0..records`, whole, a chunk a request, on a few connections.
async fn load(target: &Target, records: u64, seed: u64) -> anyhow::Result<()> {
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mut loaders = tokio::task::JoinSet::new();
    for l in 0..LOADERS {
        let target = target.clone();
        let next = Arc::clone(&next);
        loaders.spawn(async move {
            let mut conn = Conn::open(&target).await?;
            let mut values = OpGen::new(
                Plan::Ycsb(Ycsb::C.mix(), Distribution::Uniform),
                1,
                seed ^ (0xA5A5 + l as u64),
            );
            let mut value = String::new();
            loop {
                let from = next.fetch_add(LOAD_CHUNK, Ordering::Relaxed);
                if from >= records {
                    return anyhow::Ok(());
                }
                let rows: Vec<(u64, Vec<String>)> = (from..(from + LOAD_CHUNK).min(records))
                    .map(|key| {
                        let fields = (0..FIELDS)
                            .map(|_| {
                                values.value(&mut value);
                                value.clone()
                            })
                            .collect();
                        (key, fields)
                    })
                    .collect();
                loop {
                    match conn.load(&rows).await? {
                        Outcome::Done { .. } => break,
                        Outcome::Throttled => tokio::time::sleep(Duration::from_millis(50)).await,
                        Outcome::Failed(why) if why.contains("NO_SUCH_TABLE") => bail!(
                            "loading records: {why}: the database needs a table {} (make it with the control plane, or use --start)",
                            client::usertable_schema()
                        ),
                        Outcome::Failed(why) => bail!("loading records {from}..: {why}"),
                    }
                }
            }
        });
    }
    while let Some(loaded) = loaders.join_next().await {
        loaded.context("a loader panicked")??;
    }
    let took = started.elapsed();
    println!(
        "loaded {records} records in {:.1} s ({:.0} records/s)",
        took.as_secs_f64(),
        records as f64 / took.as_secs_f64().max(1e-9)
    );
    Ok(())
}

/// Runs every group's clients at once for `time` seconds, printing a
/// progress line per group every few seconds; answers each group's totals.
async fn run_groups(groups: &[Group], time: u64) -> anyhow::Result<(Vec<Recorder>, Duration)> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(time);
    let mut clients = tokio::task::JoinSet::new();
    let mut stats: Vec<Vec<Arc<Mutex<Stats>>>> = Vec::new();
    for group in groups {
        let mut mine = Vec::new();
        let due = group.rate.map(|rate| pace(rate, started, deadline));
        for index in 0..group.threads {
            let s = Arc::new(Mutex::new(Stats::default()));
            mine.push(Arc::clone(&s));
            clients.spawn(client(group.clone(), index, due.clone(), s, deadline));
        }
        stats.push(mine);
    }
    let mut last = started;
    let mut ended = Ok(());
    loop {
        // The next progress line, if it comes before the end; after that,
        // only the clients' ends are awaited.
        let next = last + PROGRESS_EVERY;
        let tick = async move {
            if next < deadline {
                tokio::time::sleep_until(next.into()).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = tick => {}
            done = clients.join_next() => match done {
                None => break,
                Some(Ok(Ok(()))) => continue,
                Some(Ok(Err(e))) => { ended = Err(e); clients.abort_all(); continue }
                Some(Err(e)) if e.is_cancelled() => continue,
                Some(Err(e)) => { ended = Err(anyhow::anyhow!("a client panicked: {e}")); clients.abort_all(); continue }
            },
        }
        let now = Instant::now();
        for (group, mine) in groups.iter().zip(&stats) {
            let mut window = Recorder::default();
            for s in mine {
                let taken = std::mem::take(&mut s.lock().unwrap_or_else(|e| e.into_inner()).window);
                window.add(&taken);
            }
            let line = report::progress_line(now - started, group.threads, &window, now - last);
            if group.label.is_empty() {
                println!("{line}");
            } else {
                println!("{line} ({})", group.label);
            }
        }
        last = now;
    }
    ended?;
    let elapsed = started
        .elapsed()
        .min(Duration::from_secs(time))
        .max(Duration::from_millis(1));
    let totals = stats
        .iter()
        .map(|mine| {
            let mut total = Recorder::default();
            for s in mine {
                total.add(&s.lock().unwrap_or_else(|e| e.into_inner()).total);
            }
            total
        })
        .collect();
    Ok((totals, elapsed))
}

/// When each operation of a group at a fixed rate is due, from `started`
/// to `deadline`: handed out by a thread of its own, whose sleeps are
/// precise to microseconds (the runtime's timers are to milliseconds). Its
/// schedule never slips: when every client is busy, the operations due
/// wait in the queue, and their latency counts from when they were due.
type Schedule = Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<Instant>>>;

fn pace(rate: f64, started: Instant, deadline: Instant) -> Schedule {
    let (due, schedule) = tokio::sync::mpsc::channel(1024);
    let every = Duration::from_secs_f64(1.0 / rate);
    std::thread::Builder::new()
        .name("bench-pacer".into())
        .spawn(move || {
            let mut next = started;
            while next < deadline {
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                }
                if due.blocking_send(next).is_err() {
                    return;
                }
                next += every;
            }
        })
        .expect("a pacer thread");
    Arc::new(tokio::sync::Mutex::new(schedule))
}

/// One client: operations until the deadline, on its own connection; as
/// the schedule says they are due, if there is one, else back to back.
async fn client(
    group: Group,
    index: usize,
    schedule: Option<Schedule>,
    stats: Arc<Mutex<Stats>>,
    deadline: Instant,
) -> anyhow::Result<()> {
    let mut conn = Conn::open(&group.target).await?;
    let seed = group
        .seed
        .wrapping_mul(0x9E37_79B9)
        .wrapping_add(index as u64);
    let mut ops = OpGen::new(group.plan.clone(), group.records.count(), seed);
    let mut value = String::new();
    loop {
        let due = match &schedule {
            Some(schedule) => match schedule.lock().await.recv().await {
                Some(due) => due,
                None => break,
            },
            None => Instant::now(),
        };
        if due >= deadline {
            break;
        }
        let op = ops.next(group.records.count().max(1));
        let kind = op.kind();
        let (rows, outcome) = match execute(&mut conn, &mut ops, &op, &group, &mut value).await {
            Ok(done) => done,
            Err(e) => {
                // The connection broke: count it, and go on with a new one.
                conn = Conn::open(&group.target).await?;
                (1, Outcome::Failed(format!("{e:#}")))
            }
        };
        let latency = due.elapsed();
        let mut stats = stats.lock().unwrap_or_else(|e| e.into_inner());
        stats.total.record(kind, rows, latency, &outcome);
        stats.window.record(kind, rows, latency, &outcome);
    }
    Ok(())
}

/// Runs one operation: the rows it touched and how it ended.
async fn execute(
    conn: &mut Conn,
    ops: &mut OpGen,
    op: &Op,
    group: &Group,
    value: &mut String,
) -> anyhow::Result<(usize, Outcome)> {
    Ok(match op {
        Op::Read { key } => (1, conn.read(*key).await?),
        Op::Lookup { keys } => (keys.len(), conn.lookup(keys).await?),
        Op::Update { key, field } => {
            ops.value(value);
            (
                1,
                conn.write(*key, &[(*field, value.as_str())], false).await?,
            )
        }
        Op::ReadModifyWrite { key, field } => match conn.read(*key).await? {
            Outcome::Done { .. } => {
                ops.value(value);
                (
                    1,
                    conn.write(*key, &[(*field, value.as_str())], false).await?,
                )
            }
            refused => (1, refused),
        },
        Op::Insert => {
            let key = group.records.claim();
            let values: Vec<String> = (0..FIELDS)
                .map(|_| {
                    ops.value(value);
                    value.clone()
                })
                .collect();
            let fields: Vec<(usize, &str)> =
                values.iter().map(String::as_str).enumerate().collect();
            let outcome = conn.write(key, &fields, true).await;
            group.records.answered(key);
            (1, outcome?)
        }
    })
}

/// One tenant's figures in one phase of the multitenant run.
#[derive(Debug, Serialize)]
struct TenantResult {
    tenant: String,
    role: &'static str,
    limit_units_per_sec: u64,
    target_ops_per_sec: Option<f64>,
    #[serde(flatten)]
    run: RunResult,
}

/// `--tenants` databases, each limited to `--tenant-limit` units a second:
/// the first floods with the largest thread count and no rate, the others
/// run two clients each at half their limit. Then the same without the
/// flooder.
async fn multitenant(args: &BenchArgs, cluster: &start::Cluster) -> anyhow::Result<()> {
    let limit = args.tenant_limit;
    let flood_threads = *args.threads.0.iter().max().expect("at least one count");
    let steady_rate = limit as f64 / 2.0;
    let mut tenants = Vec::new();
    for i in 0..args.tenants {
        let name = format!("tenant{i}");
        let (target, made) = target_for(args, Some(cluster), &name).await?;
        if !args.skip_load {
            load(&target, args.records, args.seed.wrapping_add(i)).await?;
        }
        let made = made.expect("a tenant of the cluster");
        let quota = json!({
            "read_units_per_sec": limit,
            "write_units_per_sec": limit,
            "burst_seconds": 1,
        });
        cluster.set_quota(&made, quota).await?;
        tenants.push((name, target));
    }
    println!(
        "{} tenants, each limited to {limit} read and {limit} write units/s; tenant0 floods with {flood_threads} threads, the others run 2 threads at {steady_rate} ops/s",
        args.tenants
    );
    let mut phases = Vec::new();
    let mut final_result = String::new();
    for (phase, with_flooder) in [("with-flooder", true), ("without-flooder", false)] {
        println!("phase {phase}:");
        let groups: Vec<Group> = tenants
            .iter()
            .enumerate()
            .filter(|(i, _)| with_flooder || *i > 0)
            .map(|(i, (name, target))| Group {
                label: name.clone(),
                target: target.clone(),
                plan: plan_of(args),
                threads: if i == 0 { flood_threads } else { 2 },
                rate: (i > 0).then_some(steady_rate),
                seed: args.seed.wrapping_add(i as u64 * 7_919),
                records: Arc::new(Records::new(args.records)),
            })
            .collect();
        let (recorders, elapsed) = run_groups(&groups, args.time).await?;
        let mut results = Vec::new();
        for (group, recorder) in groups.iter().zip(&recorders) {
            let flooder = group.rate.is_none();
            let target = group.rate;
            let run = RunResult::new(group.threads, elapsed, target, recorder);
            let l = &run.latency_ms;
            println!(
                "  {:<9} {:<8} admitted {:>8.0} ops/s (limit {limit} units/s{}), p50 {:.3} p95 {:.3} p99 {:.3} p99.9 {:.3} ms, throttled {}",
                group.label,
                if flooder { "flooder" } else { "steady" },
                run.ops_per_sec,
                target.map_or(String::new(), |t| format!(", target {t:.0}")),
                l.p50,
                l.p95,
                l.p99,
                l.p999,
                run.throttled
            );
            final_result.push_str(&format!(
                "Phase: {phase} Tenant: {} Mean: {:.0} p99: {:.3} Throttled: {}\n",
                group.label, run.ops_per_sec, l.p99, run.throttled
            ));
            results.push(TenantResult {
                tenant: group.label.clone(),
                role: if flooder { "flooder" } else { "steady" },
                limit_units_per_sec: limit,
                target_ops_per_sec: target,
                run,
            });
        }
        phases.push(json!({"phase": phase, "tenants": results}));
    }
    let results = json!({
        "benchmark": Bench::Multitenant,
        "title": title(args),
        "workload": args.ycsb,
        "protocol": args.protocol,
        "records_per_tenant": args.records,
        "seconds_per_run": args.time,
        "tenant_limit_units_per_sec": limit,
        "flooder_threads": flood_threads,
        "machine": machine(),
        "phases": phases,
    });
    write_out(args, &final_result, &results)?;
    println!(
        "wrote final_result.txt and results.json to {}",
        args.out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_lists_are_checked() {
        assert_eq!(parse_threads("1,2, 4").unwrap(), Threads(vec![1, 2, 4]));
        for bad in ["", "0", "1,,2", "x", "2000", "-1"] {
            assert!(parse_threads(bad).is_err(), "{bad}");
        }
        let many = vec!["1"; 33].join(",");
        assert!(parse_threads(&many).is_err());
    }

    #[test]
    fn rates_are_checked() {
        assert_eq!(parse_rate("500").unwrap(), 500.0);
        for bad in ["0", "-3", "NaN", "inf", "1e12", "fast"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }
}
