//! `shoal bench`: YCSB, batched key lookups and a multi-tenant noisy-neighbour
//! run against a running Shoal (or a throwaway one, `--start`), over REST or
//! the Redis protocol, swept over thread counts; sysbench's OLTP transaction
//! over the MySQL protocol (`oltp`); and pushdown aggregation (`aggregate`)
//! against SQLite and DuckDB on the same rows.
//!
//! A "thread" is one client with its own connection, issuing one request
//! at a time. Without `--rate` each goes as fast as answers come (a closed
//! loop); with it, the clients together aim at that many operations a
//! second and each operation's latency is measured from when it was due,
//! not from when it was sent, so a server that stalls is charged for the
//! requests it held back (no coordinated omission).

mod aggregate;
mod client;
mod keys;
mod multitenant;
mod mysql;
mod oltp;
mod report;
mod run;
mod start;
mod workload;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::json;
use shoal_datanode::Durability;

use crate::size::ByteSize;
use client::{Conn, Outcome, Target};
use keys::Distribution;
use report::RunResult;
use run::{Group, run_groups};
use workload::{FIELDS, OpGen, Plan, Records, Ycsb};

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
    /// A YCSB core workload (`--workload a|b|c|d|e|f`) over `usertable`;
    /// E scans: over REST against Shoal, over RESP against a redis-server.
    Ycsb,
    /// `--tenants` databases, one flooding past its rate limit, the others steady within theirs.
    Multitenant,
    /// TPC-H Q1 and Q6 over `--records` lineitem rows: RonSQL in Shoal, and
    /// SQLite and DuckDB (through python3) on the same rows; answers compared.
    Aggregate,
    /// sysbench's OLTP read-write transaction over the MySQL protocol
    /// (`--tables` tables of `--records` rows), as RonDB's sysbench runs.
    Oltp,
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
    /// REST endpoints of running data nodes, comma-separated (the nodes of
    /// a database's group): clients are spread over them, and one whose
    /// node stops answering goes on with the next.
    #[arg(long, default_value = "http://127.0.0.1:4406", value_delimiter = ',', value_parser = parse_address)]
    rest_url: Vec<String>,
    /// Redis-protocol addresses of running data nodes (or of a
    /// redis-server), comma-separated, as `--rest-url`.
    #[arg(long, default_value = "127.0.0.1:6380", value_delimiter = ',', value_parser = parse_address)]
    resp_addr: Vec<String>,
    /// oltp: the MySQL-protocol address of a running data node.
    #[arg(long, default_value = "127.0.0.1:3306", value_parser = parse_address)]
    mysql_addr: String,
    /// oltp: tables, each of `--records` rows.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    tables: u64,
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

/// Most addresses `--rest-url` or `--resp-addr` may list.
const MAX_ADDRESSES: usize = 16;

fn parse_address(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() || s.len() > 200 || s.chars().any(char::is_whitespace) {
        return Err(format!("'{s}' is not an address"));
    }
    Ok(s.to_owned())
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && (1.0..=100_000_000.0).contains(&r) => Ok(r),
        _ => Err(format!(
            "'{s}' is not a rate: operations a second, 1 to 100000000"
        )),
    }
}

pub(crate) async fn run(args: &BenchArgs) -> anyhow::Result<()> {
    for (flag, addresses) in [
        ("--rest-url", &args.rest_url),
        ("--resp-addr", &args.resp_addr),
    ] {
        if addresses.len() > MAX_ADDRESSES {
            bail!(
                "{flag} lists {} addresses; at most {MAX_ADDRESSES}",
                addresses.len()
            );
        }
    }
    if args.start && args.protocol == Protocol::Resp && scans(args) {
        bail!(
            "--workload e scans; over RESP it keeps YCSB's sorted set (ZADD, ZRANGEBYSCORE), which Shoal does not have: run it over REST against Shoal, or over RESP against a redis-server (--resp-addr)"
        );
    }
    if args.bench == Bench::Oltp && args.rate.is_some() {
        bail!("oltp runs each client as fast as answers come; --rate is for ycsb and keylookup");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let cluster = if args.start {
        let cluster = start::Cluster::start(args.durability, args.data_memory.0).await?;
        println!(
            "started a throwaway cluster: REST {} RESP {} MySQL {} (--durability {})",
            cluster.rest_url, cluster.resp_addr, cluster.mysql_addr, args.durability
        );
        Some(cluster)
    } else {
        None
    };
    let result = match (args.bench, &cluster) {
        (Bench::Multitenant, Some(cluster)) => multitenant::run(args, cluster).await,
        (Bench::Multitenant, None) => Err(anyhow::anyhow!(
            "multitenant makes its tenants and sets their limits itself: run it with --start"
        )),
        (Bench::Aggregate, cluster) => aggregate::run(args, cluster.as_ref()).await,
        (Bench::Oltp, cluster) => oltp::run(args, cluster.as_ref()).await,
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
                urls: vec![cluster.rest_url.clone()],
                database: made.database.clone(),
                key: made.key.clone(),
            },
            Protocol::Resp => Target::Resp {
                addrs: vec![cluster.resp_addr.clone()],
                auth: Some((made.database.clone(), made.key.clone())),
                scans: scans(args),
            },
        };
        return Ok((target, Some(made)));
    }
    let target = match (args.protocol, &args.database, &args.api_key) {
        (Protocol::Rest, Some(database), Some(key)) => Target::Rest {
            urls: args.rest_url.clone(),
            database: database.clone(),
            key: key.clone(),
        },
        (Protocol::Rest, _, _) => {
            bail!("over REST give --database and --api-key (or SHOAL_API_KEY), or use --start")
        }
        (Protocol::Resp, Some(database), Some(key)) => Target::Resp {
            addrs: args.resp_addr.clone(),
            auth: Some((database.clone(), key.clone())),
            scans: scans(args),
        },
        (Protocol::Resp, None, None) => Target::Resp {
            addrs: args.resp_addr.clone(),
            auth: None,
            scans: scans(args),
        },
        (Protocol::Resp, _, _) => bail!("over RESP give both --database and --api-key, or neither"),
    };
    Ok((target, None))
}

/// Whether the run scans (YCSB E): over RESP, records then go into the
/// sorted set YCSB's Redis binding scans by.
fn scans(args: &BenchArgs) -> bool {
    args.bench == Bench::Ycsb && args.ycsb == Ycsb::E
}

fn plan_of(args: &BenchArgs) -> Plan {
    match args.bench {
        Bench::Keylookup => Plan::Lookup {
            batch: args.batch as usize,
            distribution: args.distribution.unwrap_or(Distribution::Uniform),
        },
        // aggregate and oltp run no operation mix of their own.
        Bench::Ycsb | Bench::Multitenant | Bench::Aggregate | Bench::Oltp => Plan::Ycsb(
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
        Bench::Aggregate => "aggregate".into(),
        Bench::Oltp => "oltp".into(),
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
    write_sweep(args, &title, &runs, &results)
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
            Some(why) => format!(
                ", {} failed ({}; first: {why})",
                r.failed,
                (r.failures.iter())
                    .map(|(kind, n)| format!("{kind}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => String::new(),
        },
    );
}

/// A thread sweep's files: final_result.txt, results.json and chart.svg.
fn write_sweep(
    args: &BenchArgs,
    title: &str,
    runs: &[RunResult],
    results: &serde_json::Value,
) -> anyhow::Result<()> {
    write_out(args, &report::final_result(runs), results)?;
    let chart = args.out.join("chart.svg");
    std::fs::write(&chart, report::chart(title, runs))
        .with_context(|| format!("writing {}", chart.display()))?;
    println!(
        "wrote final_result.txt, results.json and chart.svg to {}",
        args.out.display()
    );
    Ok(())
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
            let mut conn = Conn::open(&target, 0).await?;
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
