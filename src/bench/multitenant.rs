//! `shoal bench multitenant`: a noisy neighbour and the tenants beside it.

use std::sync::Arc;

use serde::Serialize;
use serde_json::json;

use super::report::RunResult;
use super::run::{Group, run_groups};
use super::workload::Records;
use super::{Bench, BenchArgs, load, machine, plan_of, start, target_for, title, write_out};

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
pub(super) async fn run(args: &BenchArgs, cluster: &start::Cluster) -> anyhow::Result<()> {
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
