//! `shoal datanode` killed with SIGKILL while clients write, again and again:
//! every acknowledged write must come back, and no transaction half-applied.
//! Also: clean stops, memory accounting across restarts, a corrupt log, and
//! a data directory two nodes try to share.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::Shoal;
use reqwest::StatusCode;
use serde_json::{Value, json};

const WRITERS: i64 = 4;
const KEYS_PER_WRITER: i64 = 25;
/// Each write goes to a key and its twin, atomically: the twins must always
/// hold the same value.
const TWIN: i64 = 1_000_000;

fn start(dir: &Path, extra: &[&str]) -> Shoal {
    let mut args = vec!["datanode", "--data-memory", "64M", "--ldm-threads", "2"];
    args.extend_from_slice(extra);
    Shoal::start_in(&args, dir)
}

/// Starts a node on `dir` that must refuse to start; answers what it said.
fn start_must_fail(dir: &Path) -> String {
    let dir = dir.to_str().unwrap();
    let (code, stderr) =
        common::run_to_exit(&["datanode", "--data-dir", dir, "--internal-port", "0"]);
    assert_ne!(code, Some(0), "{stderr}");
    stderr
}

async fn create_schema(shoal: &Shoal) {
    let (status, body) = shoal
        .post("/internal/v1/databases", json!({"name": "app"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let table = json!({
        "name": "kv",
        "columns": [{"name": "k", "type": "BIGINT"}, {"name": "v", "type": "VARCHAR(300)"}],
        "primary_key": ["k"]
    });
    let (status, body) = shoal.post("/internal/v1/databases/app/tables", table).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// A key's state as the writers know it: what was last acknowledged, and a
/// write sent but never answered (which may or may not have happened).
#[derive(Debug, Clone, Default)]
struct KeyState {
    acked: Option<String>,
    in_flight: Option<Option<String>>,
}

/// A small deterministic generator: kill points and keys differ per cycle
/// but every run of the test is the same.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn transaction(ops: Vec<Value>) -> Value {
    json!({"atomic": true, "operations": ops})
}

/// Writes (or deletes, `None`) a key and its twin in one transaction.
fn twin_write(k: i64, v: &Option<String>) -> Value {
    let ops = [k, k + TWIN]
        .iter()
        .map(|&key| match v {
            Some(v) => json!({"op": "write", "table": "kv", "row": {"k": key, "v": v}}),
            None => json!({"op": "delete", "table": "kv", "key": {"k": key}}),
        })
        .collect();
    transaction(ops)
}

/// One writer: sends writes to its own keys one after another until the
/// node goes away, recording what was acknowledged.
async fn writer(
    url: String,
    secret: String,
    id: i64,
    cycle: usize,
    model: Arc<Mutex<BTreeMap<i64, KeyState>>>,
    acks: tokio::sync::watch::Sender<usize>,
) {
    let client = common::client();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (cycle as u64 * 31 + id as u64 + 1));
    for seq in 0.. {
        let k = id * KEYS_PER_WRITER + rng.below(KEYS_PER_WRITER as u64) as i64;
        let value = (rng.below(8) != 0).then(|| {
            let pad = "x".repeat(rng.below(250) as usize);
            format!("c{cycle}-w{id}-s{seq}-{pad}")
        });
        model.lock().unwrap().entry(k).or_default().in_flight = Some(value.clone());
        let sent = client
            .post(format!("{url}/internal/v1/databases/app/transaction"))
            .bearer_auth(&secret)
            .json(&twin_write(k, &value))
            .send()
            .await;
        let Ok(response) = sent else {
            return; // the node is gone; the write stays in flight
        };
        let status = response.status();
        let Ok(body) = response.json::<Value>().await else {
            return;
        };
        let mut model = model.lock().unwrap();
        let state = model.get_mut(&k).unwrap();
        match status {
            StatusCode::OK => {
                state.acked = value;
                state.in_flight = None;
                acks.send_modify(|n| *n += 1);
            }
            // A delete of a key that is not there fails as a whole: nothing
            // changed.
            StatusCode::NOT_FOUND if value.is_none() => state.in_flight = None,
            other => panic!("writer {id}: unexpected {other}: {body}"),
        }
    }
}

/// Every `kv` row of the writers' keys and their twins, by key.
async fn read_all(shoal: &Shoal) -> BTreeMap<i64, String> {
    let keys = (0..WRITERS * KEYS_PER_WRITER).flat_map(|k| [k, k + TWIN]);
    let ops: Vec<Value> = keys
        .map(|k| json!({"op": "read", "table": "kv", "key": {"k": k}}))
        .collect();
    let (status, body) = shoal
        .post(
            "/internal/v1/databases/app/transaction",
            json!({"atomic": false, "operations": ops}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut rows = BTreeMap::new();
    for result in body["results"].as_array().unwrap() {
        if result["outcome"] == "found" {
            let row = &result["row"];
            rows.insert(
                row["k"].as_i64().unwrap(),
                row["v"].as_str().unwrap().to_owned(),
            );
        }
    }
    rows
}

/// Checks the rows against what the writers know: each key holds its last
/// acknowledged value or the value of a write that was never answered, and
/// its twin holds the same. Then forgets what was in flight: it is settled.
fn check(rows: &BTreeMap<i64, String>, model: &mut BTreeMap<i64, KeyState>, cycle: usize) {
    for k in 0..WRITERS * KEYS_PER_WRITER {
        let (a, b) = (rows.get(&k), rows.get(&(k + TWIN)));
        assert_eq!(
            a, b,
            "cycle {cycle}: key {k} and its twin differ: half a transaction"
        );
        let state = model.entry(k).or_default();
        let found = a.cloned();
        let acked = found == state.acked;
        let was_in_flight = state.in_flight.as_ref() == Some(&found);
        assert!(
            acked || was_in_flight,
            "cycle {cycle}: key {k} holds {found:?}, but {:?} was acknowledged (in flight: {:?})",
            state.acked,
            state.in_flight
        );
        state.acked = found;
        state.in_flight = None;
    }
}

/// How each cycle ends the node.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Kill,
    Terminate,
}

async fn crash_cycles(dir: &Path, cycles: usize, extra: &[&str], stop: Stop) {
    let model: Arc<Mutex<BTreeMap<i64, KeyState>>> = Arc::default();
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let shoal = start(dir, extra);
    create_schema(&shoal).await;
    let mut shoal = Some(shoal);
    for cycle in 0..cycles {
        let node = shoal.take().unwrap();
        let (acks, mut acked) = tokio::sync::watch::channel(0usize);
        let writers: Vec<_> = (0..WRITERS)
            .map(|id| {
                tokio::spawn(writer(
                    node.internal_url.clone(),
                    node.secret(),
                    id,
                    cycle,
                    Arc::clone(&model),
                    acks.clone(),
                ))
            })
            .collect();
        drop(acks);
        // Kill after a random number of acknowledged writes, while the
        // writers are mid-request; every third cycle with a checkpoint
        // started just before, which the kill may cut short.
        let kill_at = 10 + rng.below(70) as usize;
        let checkpoint = (cycle % 3 == 1).then(|| {
            let (url, secret) = (node.url("/internal/v1/checkpoint"), node.secret());
            async move {
                let _ = common::client().post(url).bearer_auth(secret).send().await;
            }
        });
        let checkpoint = checkpoint.map(tokio::spawn);
        // Ends early only if every writer stopped, which the checks below explain.
        let _ = acked.wait_for(|n| *n >= kill_at).await;
        match stop {
            Stop::Kill => node.kill(),
            Stop::Terminate => {
                let (code, stderr) = node.terminate();
                assert_eq!(code, Some(0), "cycle {cycle}: {stderr}");
            }
        }
        for w in writers {
            w.await.unwrap();
        }
        if let Some(c) = checkpoint {
            c.await.unwrap();
        }
        let node = start(dir, extra);
        let rows = read_all(&node).await;
        check(&rows, &mut model.lock().unwrap(), cycle);
        if (cycle + 1) % 100 == 0 {
            println!("{} kill cycles passed", cycle + 1);
        }
        shoal = Some(node);
    }
    let node = shoal.take().unwrap();
    let before = read_all(&node).await;
    let (code, stderr) = node.terminate();
    assert_eq!(code, Some(0), "a clean stop exits 0: {stderr}");
    let node = start(dir, extra);
    assert_eq!(
        read_all(&node).await,
        before,
        "a clean stop keeps everything"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_acknowledged_write_and_no_transaction_is_half_applied() {
    // `scripts/crash-soak` runs many more.
    let cycles = std::env::var("SHOAL_CRASH_CYCLES")
        .map_or(20, |n| n.parse().expect("SHOAL_CRASH_CYCLES is a number"));
    let dir = tempfile::tempdir().unwrap();
    crash_cycles(dir.path(), cycles, &[], Stop::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_finishes_what_was_acknowledged_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    crash_cycles(dir.path(), 3, &[], Stop::Terminate).await;
}

/// The memory figures of every fragment and of the node.
async fn memory(shoal: &Shoal) -> (Value, Value) {
    let fragments = shoal.ndbinfo("ndb$table_memory_usage").await["rows"].clone();
    let node = shoal.ndbinfo("memoryusage").await["rows"].clone();
    (fragments, node)
}

/// Kills the node, starts it again, and checks that every memory figure is
/// what it was before the kill.
async fn crash_keeps_memory(shoal: Shoal, dir: &Path, when: &str) -> Shoal {
    let before = memory(&shoal).await;
    shoal.kill();
    let shoal = start(dir, &[]);
    assert_eq!(memory(&shoal).await, before, "{when}");
    shoal
}

/// Rows of many sizes, then holes and shrunk rows, so that the pages are not
/// as a fresh load would pack them.
async fn churn(shoal: &Shoal, round: i64) {
    let value = |k: i64| "m".repeat((k * 37 + round * 11) as usize % 290);
    for chunk in (0..400).collect::<Vec<i64>>().chunks(100) {
        let ops = chunk
            .iter()
            .map(|&k| json!({"op": "write", "table": "kv", "row": {"k": k, "v": value(k)}}))
            .collect();
        let (status, body) = shoal
            .post("/internal/v1/databases/app/transaction", transaction(ops))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let ops = (round..400)
        .step_by(3)
        .map(|k| json!({"op": "delete", "table": "kv", "key": {"k": k}}))
        .collect();
    let (status, body) = shoal
        .post("/internal/v1/databases/app/transaction", transaction(ops))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for k in (1..400).step_by(7) {
        let row = json!({"op": "write", "table": "kv", "row": {"k": k, "v": "short"}});
        let (status, body) = shoal
            .post(
                "/internal/v1/databases/app/transaction",
                json!({"atomic": false, "operations": [row]}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_accounting_is_identical_after_a_restart_or_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let shoal = start(dir.path(), &[]);
    create_schema(&shoal).await;
    churn(&shoal, 0).await;
    let before = memory(&shoal).await;
    assert_ne!(before.1[0][2], 0, "the rows take memory");

    // A clean stop: the last checkpoint holds everything.
    let (code, _) = shoal.terminate();
    assert_eq!(code, Some(0));
    let shoal = start(dir.path(), &[]);
    assert_eq!(memory(&shoal).await, before, "after a clean stop");

    // A crash right after a checkpoint.
    churn(&shoal, 1).await;
    let (status, summary) = shoal.post("/internal/v1/checkpoint", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!(summary["fragments"], 4);
    let shoal =
        crash_keeps_memory(shoal, dir.path(), "after a crash that follows a checkpoint").await;

    // A crash with the changes since the checkpoint only in the redo log:
    // replaying them in log order builds the same pages.
    churn(&shoal, 2).await;
    crash_keeps_memory(shoal, dir.path(), "after a crash with a redo tail").await;
}

#[tokio::test]
async fn interval_durability_keeps_everything_over_a_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let interval = ["--durability", "interval:100"];
    let shoal = start(dir.path(), &interval);
    create_schema(&shoal).await;
    let (status, body) = shoal
        .post(
            "/internal/v1/databases/app/transaction",
            twin_write(7, &Some("kept".into())),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (code, stderr) = shoal.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    let shoal = start(dir.path(), &interval);
    let rows = read_all(&shoal).await;
    assert_eq!(rows.get(&7).map(String::as_str), Some("kept"));
    assert_eq!(rows.get(&(7 + TWIN)).map(String::as_str), Some("kept"));
}

#[tokio::test]
async fn a_corrupt_redo_log_stops_the_start_naming_the_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let shoal = start(dir.path(), &[]);
    create_schema(&shoal).await;
    for k in 0..5 {
        let (status, _) = shoal
            .post(
                "/internal/v1/databases/app/transaction",
                twin_write(k, &Some(format!("row {k}"))),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    shoal.kill();
    let segment = dir.path().join("redo").join("00000000000000000000.redo");
    let mut bytes = std::fs::read(&segment).unwrap();
    assert!(bytes.len() > 200, "five records were logged");
    bytes[40] ^= 0xff; // inside the first record, not at the tail
    std::fs::write(&segment, &bytes).unwrap();

    let stderr = start_must_fail(dir.path());
    let said = format!("{} offset 0", segment.display());
    assert!(stderr.contains(&said), "names {said}: {stderr}");
    assert!(stderr.contains("corrupt"), "{stderr}");
}

#[tokio::test]
async fn a_torn_tail_is_cut_off_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let shoal = start(dir.path(), &[]);
    create_schema(&shoal).await;
    let (status, _) = shoal
        .post(
            "/internal/v1/databases/app/transaction",
            twin_write(1, &Some("whole".into())),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    shoal.kill();
    // Half a record at the end, as a crash in the middle of a write leaves.
    let segment = dir.path().join("redo").join("00000000000000000000.redo");
    let mut bytes = std::fs::read(&segment).unwrap();
    let whole = bytes.len();
    bytes.extend_from_within(..30);
    std::fs::write(&segment, &bytes).unwrap();

    let shoal = start(dir.path(), &[]);
    assert_eq!(
        read_all(&shoal).await.get(&1).map(String::as_str),
        Some("whole")
    );
    assert!(
        shoal.stderr().contains("dropped a torn record"),
        "{}",
        shoal.stderr()
    );
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len(),
        whole as u64,
        "the torn bytes are gone"
    );
}

#[tokio::test]
async fn a_data_directory_serves_one_node_at_a_time() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("new");
    let first = start(&dir, &[]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o700,
            "a new data directory is its owner's only"
        );
    }
    let stderr = start_must_fail(&dir);
    assert!(
        stderr.contains("in use by another running data node"),
        "{stderr}"
    );
    assert_eq!(
        first.get_json("/internal/v1/healthz").await["status"],
        "ok",
        "the first goes on"
    );
}
