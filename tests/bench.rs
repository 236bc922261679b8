//! `shoal bench` run as a user runs it: short smoke runs of each workload
//! against a throwaway cluster and against a real redis-server, checking
//! the counts and the files it writes (not its speed), and its refusals of
//! bad options.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// Runs `shoal bench <args> --out <dir>`; answers stdout, or panics with
/// what it printed.
fn bench(out: &Path, args: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_shoal"))
        .arg("bench")
        .args(args.split_whitespace())
        .arg("--out")
        .arg(out)
        .env_remove("SHOAL_API_KEY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "shoal bench {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn results(out: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap()
}

/// final_result.txt has `Threads: <n> Mean: <ops/s>` for each count, in order.
fn assert_final_result(out: &Path, threads: &[u64]) {
    let text = std::fs::read_to_string(out.join("final_result.txt")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), threads.len(), "{text}");
    for (line, t) in lines.iter().zip(threads) {
        let mean: u64 = line
            .strip_prefix(&format!("Threads: {t} Mean: "))
            .unwrap_or_else(|| panic!("{line}"))
            .parse()
            .unwrap();
        assert!(mean > 0, "{line}");
    }
}

/// Every run completed operations and none failed or missed a row.
fn assert_clean_runs(results: &Value, threads: &[u64]) -> Vec<Value> {
    let runs = results["runs"].as_array().unwrap().clone();
    assert_eq!(runs.len(), threads.len());
    for (run, t) in runs.iter().zip(threads) {
        assert_eq!(run["threads"], *t);
        assert!(run["ops"].as_u64().unwrap() > 0, "{run}");
        assert_eq!(run["failed"], 0, "{run}");
        assert_eq!(run["throttled"], 0, "{run}");
        assert_eq!(
            run["missing_rows"], 0,
            "every record read was loaded: {run}"
        );
        let l = &run["latency_ms"];
        assert!(l["p50"].as_f64().unwrap() <= l["p99"].as_f64().unwrap());
        assert!(l["p99"].as_f64().unwrap() <= l["max"].as_f64().unwrap());
    }
    runs
}

#[test]
fn ycsb_a_over_rest_sweeps_threads_and_writes_its_files() {
    let out = tempfile::tempdir().unwrap();
    let stdout = bench(
        out.path(),
        "ycsb --workload a --start --threads 1,2 --time 1 --records 300",
    );
    assert!(stdout.contains("loaded 300 records"), "{stdout}");
    assert!(
        stdout.contains("threads 1: ") && stdout.contains("threads 2: "),
        "{stdout}"
    );
    assert_final_result(out.path(), &[1, 2]);
    let results = results(out.path());
    assert_eq!(results["benchmark"], "ycsb");
    assert_eq!(results["workload"], "a");
    assert_eq!(results["protocol"], "rest");
    assert_eq!(results["distribution"], "zipfian");
    for run in assert_clean_runs(&results, &[1, 2]) {
        let kinds = run["by_kind"].as_object().unwrap();
        let mut names: Vec<&str> = kinds.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["read", "update"], "workload A reads and updates");
        let counted: u64 = kinds.values().map(|k| k["ops"].as_u64().unwrap()).sum();
        assert_eq!(counted, run["ops"].as_u64().unwrap());
    }
    let chart = std::fs::read_to_string(out.path().join("chart.svg")).unwrap();
    assert!(chart.starts_with("<svg") && chart.matches("<polyline").count() == 2);
}

#[test]
fn ycsb_d_over_resp_inserts_and_reads_the_newest_records() {
    let out = tempfile::tempdir().unwrap();
    bench(
        out.path(),
        "ycsb --workload d --protocol resp --start --threads 2 --time 1 --records 300",
    );
    let results = results(out.path());
    assert_eq!(results["distribution"], "latest");
    let run = &assert_clean_runs(&results, &[2])[0];
    assert!(
        run["by_kind"]["insert"]["ops"].as_u64().unwrap() > 0,
        "{run}"
    );
    assert!(run["by_kind"]["read"]["ops"].as_u64().unwrap() > 0, "{run}");
}

#[test]
fn keylookup_reads_batches_of_rows() {
    let out = tempfile::tempdir().unwrap();
    bench(
        out.path(),
        "keylookup --batch 50 --start --threads 1,3 --time 1 --records 500",
    );
    assert_final_result(out.path(), &[1, 3]);
    let results = results(out.path());
    assert_eq!(results["batch"], 50);
    for run in assert_clean_runs(&results, &[1, 3]) {
        let ops = run["ops"].as_f64().unwrap();
        let rows_per_op =
            run["rows_per_sec"].as_f64().unwrap() / run["ops_per_sec"].as_f64().unwrap();
        assert!((rows_per_op - 50.0).abs() < 1e-6, "{run}");
        assert_eq!(run["by_kind"]["lookup"]["ops"].as_f64().unwrap(), ops);
    }
}

#[test]
fn multitenant_holds_the_flooder_to_its_limit_and_runs_the_others_on_schedule() {
    let out = tempfile::tempdir().unwrap();
    let stdout = bench(
        out.path(),
        // A limit low enough that the flooder passes it and its burst
        // within the second even on a loaded machine.
        "multitenant --start --tenants 3 --tenant-limit 60 --threads 4 --time 1 --records 200 --workload c",
    );
    assert!(stdout.contains("phase with-flooder") && stdout.contains("phase without-flooder"));
    let results = results(out.path());
    let phases = results["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2);
    for phase in phases {
        let with_flooder = phase["phase"] == "with-flooder";
        let tenants = phase["tenants"].as_array().unwrap();
        assert_eq!(tenants.len(), if with_flooder { 3 } else { 2 });
        for t in tenants {
            assert_eq!(t["failed"], 0, "{t}");
            if t["role"] == "flooder" {
                assert_eq!(t["tenant"], "tenant0");
                let throttled = t["throttled"].as_u64().unwrap();
                assert!(throttled > 0, "the flooder is held back: {t}");
                // Each refusal is held at least 10 ms: 4 connections get at
                // most ~100 refusals each in a second, not one a round trip.
                assert!(throttled <= 4 * 101, "{t}");
                // Its limit and one second of burst, in a one-second run.
                assert!(t["ops"].as_u64().unwrap() <= 2 * 60 + 10, "{t}");
            } else {
                assert_eq!(t["throttled"], 0, "{t}");
                assert_eq!(t["target_ops_per_sec"], 30.0);
                // A fixed rate of 30/s for one second: 30 operations due, all done.
                let done = t["ops"].as_u64().unwrap();
                assert!((29..=31).contains(&done), "{t}");
            }
        }
    }
    let text = std::fs::read_to_string(out.path().join("final_result.txt")).unwrap();
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(
        text.starts_with("Phase: with-flooder Tenant: tenant0 Mean: "),
        "{text}"
    );
}

#[test]
fn oltp_runs_sysbench_transactions_over_the_mysql_protocol() {
    let out = tempfile::tempdir().unwrap();
    let stdout = bench(
        out.path(),
        "oltp --start --tables 2 --threads 1,3 --time 1 --records 400",
    );
    assert!(stdout.contains("loaded 2 tables of 400 rows"), "{stdout}");
    assert_final_result(out.path(), &[1, 3]);
    let results = results(out.path());
    assert_eq!(results["benchmark"], "oltp");
    assert_eq!(results["tables"], 2);
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (run, threads) in runs.iter().zip([1, 3]) {
        assert_eq!(run["threads"], threads);
        let done = run["by_kind"]["transaction"]["ops"].as_u64().unwrap();
        assert!(done > 0, "{run}");
        // Three clients on 800 rows may meet each other's locks (sysbench
        // retries those); one client never does, and nothing else fails.
        if threads == 1 {
            assert_eq!(run["failed"], 0, "{run}");
        }
        for kind in run["failures"].as_object().unwrap().keys() {
            assert!(kind == "1205" || kind == "1213", "{run}");
        }
    }
}

#[test]
fn ycsb_e_over_rest_scans_ranges_and_inserts() {
    let out = tempfile::tempdir().unwrap();
    bench(
        out.path(),
        "ycsb --workload e --start --threads 2 --time 1 --records 300",
    );
    let run = &assert_clean_runs(&results(out.path()), &[2])[0];
    let kinds = run["by_kind"].as_object().unwrap();
    let mut names: Vec<&str> = kinds.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["insert", "scan"], "workload E scans and inserts");
    let (ops, rows) = (
        run["ops_per_sec"].as_f64().unwrap(),
        run["rows_per_sec"].as_f64().unwrap(),
    );
    assert!(
        rows > 10.0 * ops,
        "scans of 1 to 100 rows answer about 50 each: {run}"
    );
}

#[test]
fn ycsb_over_resp_runs_against_a_redis_server() {
    let port = common::free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut redis = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server (Debian: redis-server) is installed by scripts/test");
    let addr = format!("127.0.0.1:{port}");
    let up = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        std::net::TcpStream::connect(&addr).is_ok()
    });
    assert!(up, "redis-server did not start");
    let out = tempfile::tempdir().unwrap();
    bench(
        out.path(),
        &format!(
            "ycsb --workload b --protocol resp --resp-addr {addr} --threads 2 --time 1 --records 300"
        ),
    );
    assert_clean_runs(&results(out.path()), &[2]);
    // Workload E as YCSB's Redis binding runs it: a sorted set to scan by.
    let out = tempfile::tempdir().unwrap();
    bench(
        out.path(),
        &format!(
            "ycsb --workload e --protocol resp --resp-addr {addr} --threads 2 --time 1 --records 300"
        ),
    );
    let _ = redis.kill();
    let _ = redis.wait();
    let run = &assert_clean_runs(&results(out.path()), &[2])[0];
    assert!(run["by_kind"]["scan"]["ops"].as_u64().unwrap() > 0, "{run}");
    assert!(
        run["rows_per_sec"].as_f64().unwrap() > 10.0 * run["ops_per_sec"].as_f64().unwrap(),
        "{run}"
    );
}

#[test]
fn bad_options_are_refused_with_a_reason() {
    let out = tempfile::tempdir().unwrap();
    let out = out.path().to_str().unwrap();
    for (args, says) in [
        (
            vec!["ycsb", "--threads", "0"],
            "each count must be 1 to 1024",
        ),
        (
            vec!["ycsb", "--threads", "1,x"],
            "not a list of thread counts",
        ),
        (vec!["ycsb", "--rate=-5"], "is not a rate"),
        (vec!["ycsb", "--rate", "0"], "is not a rate"),
        (vec!["ycsb", "--time", "0"], "--time"),
        (vec!["keylookup", "--batch", "5000"], "--batch"),
        (vec!["ycsb", "--workload", "g"], "--workload"),
        (
            vec!["ycsb", "--workload", "e", "--protocol", "resp", "--start"],
            "over REST against Shoal",
        ),
        (
            vec!["ycsb", "--out", out],
            "over REST give --database and --api-key",
        ),
        (
            vec![
                "ycsb",
                "--protocol",
                "resp",
                "--database",
                "x",
                "--out",
                out,
            ],
            "both --database and --api-key",
        ),
        (vec!["multitenant", "--out", out], "run it with --start"),
        (vec!["multitenant", "--tenants", "1"], "--tenants"),
        (vec!["oltp", "--rate", "100"], "--rate is for ycsb"),
        (vec!["oltp", "--tables", "0"], "--tables"),
        (vec!["oltp", "--out", out], "give --database and --api-key"),
    ] {
        let mut full = vec!["bench"];
        full.extend(args.iter());
        let (code, stderr) = common::run_to_exit(&full);
        assert_ne!(code, Some(0), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn ycsb_runs_against_a_running_shoal_with_a_tenants_key() {
    let mut shoal = common::Shoal::start(&["demo", "--data-memory", "64M", "--control-port", "0"]);
    shoal.wait_for("written to");
    let demo: Value =
        serde_json::from_slice(&std::fs::read(shoal.data_dir.join("demo.json")).unwrap()).unwrap();
    let key = demo["tenant"]["api_key"].as_str().unwrap();
    let args = format!(
        "ycsb --workload c --rest-url {} --database demo --api-key {key} --threads 2 --time 1 --records 200 --rate 400",
        demo["rest_url"].as_str().unwrap()
    );

    // Without the table it needs, the bench says what to make.
    let out = tempfile::tempdir().unwrap();
    let mut full = vec!["bench", "--out", out.path().to_str().unwrap()];
    full.extend(args.split_whitespace());
    let (code, stderr) = common::run_to_exit(&full);
    assert_ne!(code, Some(0));
    assert!(
        stderr.contains("NO_SUCH_TABLE") && stderr.contains("\"ycsb_key\""),
        "{stderr}"
    );

    // The tenant makes usertable through the control plane, as a user would.
    let api = demo["api_url"].as_str().unwrap();
    let http = reqwest::Client::new();
    let login: Value = http
        .post(format!("{api}/auth/login"))
        .json(&serde_json::json!({"email": demo["tenant"]["email"], "password": demo["tenant"]["password"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut columns = vec![serde_json::json!({"name": "ycsb_key", "type": "VARCHAR(64)"})];
    columns.extend(
        (0..10).map(|f| serde_json::json!({"name": format!("field{f}"), "type": "VARCHAR(100)"})),
    );
    let made = http
        .post(format!("{api}/databases/demo/tables"))
        .bearer_auth(login["token"].as_str().unwrap())
        .json(&serde_json::json!({"name": "usertable", "columns": columns, "primary_key": ["ycsb_key"]}))
        .send()
        .await
        .unwrap();
    assert!(made.status().is_success(), "{}", made.text().await.unwrap());

    let out = tempfile::tempdir().unwrap();
    let stdout = bench(out.path(), &args);
    assert!(stdout.contains("loaded 200 records"), "{stdout}");
    let results = results(out.path());
    let run = &assert_clean_runs(&results, &[2])[0];
    assert_eq!(results["target_ops_per_sec"], 400.0);
    // A fixed rate of 400/s for one second: 400 reads due, all done.
    let done = run["ops"].as_u64().unwrap();
    assert!((399..=401).contains(&done), "{run}");

    // Several addresses: clients are spread over them, and one whose node
    // does not answer goes on with the next; failures are told by kind.
    let both = format!("http://127.0.0.1:1,{}", demo["rest_url"].as_str().unwrap());
    let args = format!(
        "ycsb --workload c --rest-url {both} --database demo --api-key {key} --threads 2 --time 1 --records 200 --skip-load"
    );
    let out = tempfile::tempdir().unwrap();
    let stdout = bench(out.path(), &args);
    let spread = self::results(out.path());
    let run = &spread["runs"][0];
    assert!(run["ops"].as_u64().unwrap() > 10, "{run}");
    assert_eq!(run["missing_rows"], 0, "{run}");
    let failures = run["failures"].as_object().unwrap();
    assert_eq!(failures.keys().collect::<Vec<_>>(), ["connection"], "{run}");
    assert_eq!(failures["connection"], run["failed"], "{run}");
    assert!(stdout.contains("connection: "), "{stdout}");
    // Too many addresses, or an empty one, are refused.
    let many = vec!["http://127.0.0.1:1"; 17].join(",");
    for (list, says) in [
        (many.as_str(), "at most 16"),
        ("http://a,,http://b", "is not an address"),
    ] {
        let (code, stderr) = common::run_to_exit(&[
            "bench",
            "ycsb",
            "--rest-url",
            list,
            "--database",
            "d",
            "--api-key",
            "k",
        ]);
        assert_ne!(code, Some(0), "{list}");
        assert!(stderr.contains(says), "{list}: {stderr}");
    }
}

#[test]
fn aggregate_answers_as_sqlite_and_duckdb_do_and_times_all_three() {
    let out = tempfile::tempdir().unwrap();
    let stdout = bench(
        out.path(),
        "aggregate --start --records 3000 --data-memory 64M",
    );
    assert!(stdout.contains("loaded 3000 lineitem rows"), "{stdout}");
    for query in ["Q1", "Q6"] {
        let line = (stdout.lines())
            .find(|l| l.starts_with(query))
            .unwrap_or_else(|| panic!("no {query} line: {stdout}"));
        assert!(
            line.contains("SQLite: equal") && line.contains("DuckDB: equal"),
            "{line}"
        );
    }
    let results = results(out.path());
    assert_eq!(results["records"], 3000);
    for engine in ["shoal", "sqlite", "duckdb"] {
        for query in ["Q1", "Q6"] {
            let run = &results[engine][query];
            assert_eq!(run["ms"].as_array().unwrap().len(), 5, "{engine} {query}");
            assert!(
                !run["rows"].as_array().unwrap().is_empty(),
                "{engine} {query}"
            );
        }
    }
    // Q1 groups by return flag and line status: A/F, N/O, R/F.
    let flags: Vec<String> = (results["shoal"]["Q1"]["rows"].as_array().unwrap().iter())
        .map(|r| format!("{}{}", r[0].as_str().unwrap(), r[1].as_str().unwrap()))
        .collect();
    assert_eq!(flags, ["AF", "NO", "RF"]);
    assert!(
        !out.path().join("lineitem.csv").exists(),
        "the CSV is removed"
    );
}
