//! Shoal attacked from outside: by another user of the same machine, and by
//! clients that send what they should not. Each test starts the real
//! binary, tries the attack, and checks that it held and changed nothing.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::Shoal;

/// Every directory and file under `dir` with its mode (symbolic links
/// skipped).
fn modes(dir: &Path) -> Vec<(PathBuf, bool, u32)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(path) = todo.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.file_type().is_symlink() {
            continue;
        }
        out.push((
            path.clone(),
            meta.is_dir(),
            meta.permissions().mode() & 0o7777,
        ));
        if meta.is_dir() {
            todo.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
    }
    out
}

/// Fails unless every directory under `dir` is 0700 and every file 0600.
fn assert_private(dir: &Path, must_have: &[&str]) {
    let all = modes(dir);
    for (path, is_dir, mode) in &all {
        let want = if *is_dir { 0o700 } else { 0o600 };
        assert_eq!(*mode, want, "{} is {mode:o}", path.display());
    }
    for name in must_have {
        assert!(
            all.iter().any(|(p, _, _)| p.ends_with(name)),
            "{name} is among {all:?}"
        );
    }
}

/// A data directory `root/name` as an older version left it: open to
/// everyone.
fn loose_dir(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("left-by-an-older-version"), b"x").unwrap();
    std::fs::set_permissions(
        dir.join("left-by-an-older-version"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    dir
}

#[tokio::test]
async fn the_demo_keeps_its_secrets_from_other_users_of_the_machine() {
    let root = tempfile::tempdir().unwrap();
    let dir = loose_dir(root.path(), "data");
    let mut shoal = Shoal::start_in(
        &["demo", "--data-memory", "64M", "--control-port", "0"],
        &dir,
    );
    shoal.wait_for("written to");
    // While it runs: the store with its -wal and -shm, the redo log.
    assert_private(
        &dir,
        &[
            "control-plane.db",
            "control-plane.db-wal",
            "control-plane.db-shm",
            "demo.json",
            "cluster-secret",
            "catalog.json",
            "left-by-an-older-version",
        ],
    );
    let (code, stderr) = shoal.terminate();
    assert_eq!(code, Some(0));
    assert!(stderr.contains("made them private"), "{stderr}");
    assert_private(&dir, &["demo.json"]);
    // Written to a pipe, not a terminal: log lines without colour codes.
    assert!(!stderr.contains('\x1b'), "{stderr}");
}

#[tokio::test]
async fn a_control_plane_and_a_data_node_tighten_their_directories() {
    let root = tempfile::tempdir().unwrap();
    let cp_dir = loose_dir(root.path(), "cp");
    let control = Shoal::control_plane_in(None, &[], &[], &cp_dir);
    assert_private(&cp_dir, &["control-plane.db", "cluster-secret"]);
    let node_dir = loose_dir(root.path(), "node");
    let node = Shoal::start_in(&["datanode", "--data-memory", "16M"], &node_dir);
    assert_private(&node_dir, &["catalog.json", "cluster-secret"]);
    let (code, stderr) = node.terminate();
    assert_eq!(code, Some(0));
    assert!(stderr.contains("made them private"), "{stderr}");
    assert_private(&node_dir, &[]);
    drop(control);
}

/// `shoal demo` on a fresh directory, ready; answers it and a session
/// token of its demo tenant.
async fn demo_tenant(extra: &[&str]) -> (Shoal, tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        &["demo", "--data-memory", "64M", "--control-port", "0"],
        extra,
    ]
    .concat();
    let mut shoal = Shoal::start_in(&args, dir.path());
    shoal.wait_for("written to");
    let demo: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("demo.json")).unwrap()).unwrap();
    let api = demo["api_url"].as_str().unwrap().to_owned();
    let login: serde_json::Value = common::client()
        .post(format!("{api}/auth/login"))
        .json(&serde_json::json!({
            "email": demo["tenant"]["email"], "password": demo["tenant"]["password"]
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = login["token"].as_str().unwrap().to_owned();
    (shoal, dir, api, token)
}

async fn ndbinfo_sql(
    api: &str,
    token: &str,
    sql: &str,
) -> (u16, Option<String>, serde_json::Value) {
    let r = common::client()
        .post(format!("{api}/ndbinfo/query"))
        .bearer_auth(token)
        .json(&serde_json::json!({ "sql": sql }))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, retry, r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenants_ndbinfo_query_cannot_take_the_process() {
    let (shoal, _dir, api, token) = demo_tenant(&[]).await;
    let before = shoal.peak_rss();
    let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)";
    let attacks: [(String, &str); 6] = [
        (
            "SELECT length(hex(zeroblob(400000000)))".into(),
            "QUERY_TOO_LARGE",
        ),
        (
            format!(
                "{endless} SELECT length(group_concat(hex(randomblob(1000)))) FROM (SELECT x FROM c LIMIT 2000)"
            ),
            "QUERY_TOO_LARGE",
        ),
        (
            "SELECT length(replace(hex(zeroblob(500000)), '0', '0000'))".into(),
            "QUERY_TOO_LARGE",
        ),
        (format!("{endless} SELECT max(x) FROM c"), "QUERY_TIMEOUT"),
        (
            format!("{endless} SELECT x FROM c ORDER BY random() LIMIT 1"),
            "QUERY_TIMEOUT",
        ),
        (
            format!("{endless} SELECT hex(randomblob(1000)) FROM c LIMIT 9000"),
            "QUERY_TOO_LARGE",
        ),
    ];
    for (sql, code) in &attacks {
        let (status, _, body) = ndbinfo_sql(&api, &token, sql).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some(*code)),
            "{sql}: {body}"
        );
    }
    let grown = shoal.peak_rss().saturating_sub(before);
    assert!(grown < 256 << 20, "the queries took {} MiB", grown >> 20);
    // And the engine still answers a query of the caller's own rows.
    let (status, _, body) = ndbinfo_sql(
        &api,
        &token,
        "SELECT database_name FROM ndbinfo.database_memory_usage",
    )
    .await;
    assert_eq!(
        (status, &body["rows"]),
        (200, &serde_json::json!([["demo"]]))
    );

    // Past a few at once: 429, with when to try again. (Eight sent at once,
    // each running 2 s: more than four overlap however loaded the machine.)
    let slow = format!("{endless} SELECT max(x) FROM c");
    let mut tries = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (api, token, slow) = (api.clone(), token.clone(), slow.clone());
        tries.spawn(async move { ndbinfo_sql(&api, &token, &slow).await });
    }
    let answers = tries.join_all().await;
    let refused: Vec<_> = answers.iter().filter(|(s, _, _)| *s == 429).collect();
    assert!(!refused.is_empty(), "{answers:?}");
    for (_, retry, body) in refused {
        assert_eq!(body["error"]["code"], "TOO_MANY_QUERIES");
        assert_eq!(retry.as_deref(), Some("1"));
    }
}

/// Opens `n` connections from 127.0.0.1 to `addr`, each sending `first`
/// and then nothing: a flood of slow or idle clients. Answers them, to hold.
async fn flood(addr: &str, n: usize, first: &'static [u8]) -> Vec<tokio::net::TcpStream> {
    use tokio::io::AsyncWriteExt;
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        // A refused connection may already be closed: that is its answer.
        let _ = stream.write_all(first).await;
        held.push(stream);
    }
    held
}

/// The answer to `request` on a new connection from `source` to `addr` once
/// one is refused, and the connections served before it (held, so that
/// their slots stay taken). The demo's own clients from that address — a
/// data node's heartbeat, kept alive for a few seconds — may let a slot go
/// while the flood holds the rest: a few more tries, never a timing.
async fn refused_from(
    source: &str,
    addr: &str,
    request: &[u8],
) -> (String, Vec<tokio::net::TcpStream>) {
    let mut served = Vec::new();
    for _ in 0..8 {
        let mut more = connect_from(source, addr).await;
        let answer = exchange(&mut more, request, "\r\n\r\n").await;
        if !answer.starts_with("HTTP/1.1 200") {
            let rest = exchange(&mut more, b"", "TOO_MANY_CONNECTIONS").await;
            return (answer + &rest, served);
        }
        served.push(more);
    }
    ("every try was served".to_owned(), served)
}

/// A connection to `addr` from `source`, one of this machine's loopback
/// addresses.
async fn connect_from(source: &str, addr: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(addr.parse().unwrap()).await.unwrap()
}

/// Sends `request` on `stream` and reads until `want` has arrived or the
/// stream ends; answers what was read.
async fn exchange(stream: &mut tokio::net::TcpStream, request: &[u8], want: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(request).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(want) {
        let read = tokio::time::timeout(std::time::Duration::from_secs(60), stream.read(&mut buf));
        match read.await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

const PING: &[u8] = b"GET /0.1.0/ping HTTP/1.1\r\nhost: x\r\n\r\n";
const HEALTH: &[u8] = b"GET /api/v1/healthz HTTP/1.1\r\nhost: x\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_from_one_address_does_not_stop_the_others() {
    // Head timeouts long enough that no held connection is closed while
    // the test runs, however slowly.
    let (shoal, _dir, api, _) = demo_tenant(&[
        "--request-head-timeout",
        "3600",
        "--control-request-head-timeout",
        "3600",
    ])
    .await;
    let control = api
        .trim_start_matches("http://")
        .trim_end_matches("/api/v1")
        .to_owned();
    let rest = shoal.rest_url.trim_start_matches("http://").to_owned();
    let resp = shoal.resp_addr.clone();
    // Fewer descriptors than the flood would take if every connection were
    // held (util-linux's prlimit, on the running process).
    let limited = std::process::Command::new("prlimit")
        .args(["--pid", &shoal.pid().to_string(), "--nofile=3000:3000"])
        .status()
        .expect("prlimit (util-linux) runs");
    assert!(limited.success());
    // 4,096 slow clients on each port, from one address: a head begun and
    // never finished, a RESP client that never authenticates.
    let slow_head = b"GET /0.1.0/ping HTTP/1.1\r\nhost: x\r\n";
    let held = [
        flood(&control, 4096, slow_head).await,
        flood(&rest, 4096, slow_head).await,
        flood(&resp, 4096, b"PING\r\n").await,
    ];
    assert_eq!(held.iter().map(Vec::len).sum::<usize>(), 3 * 4096);

    // That address is past its share: told so.
    let (answer, _more) = refused_from("127.0.0.1", &rest, PING).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    let (answer, _more) = refused_from("127.0.0.1", &control, HEALTH).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");

    // Another address is served by each, and the process still has the
    // descriptors for it.
    let mut c = connect_from("127.0.0.2", &control).await;
    assert!(
        exchange(&mut c, HEALTH, "\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let mut c = connect_from("127.0.0.2", &rest).await;
    assert!(
        exchange(&mut c, PING, "\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let mut c = connect_from("127.0.0.2", &resp).await;
    assert_eq!(exchange(&mut c, b"PING\r\n", "\r\n").await, "+PONG\r\n");
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_slow_to_send_its_head_or_to_authenticate_is_closed() {
    let shoal = Shoal::start(&[
        "datanode",
        "--data-memory",
        "16M",
        "--request-head-timeout",
        "1",
        "--idle-timeout",
        "2",
    ]);
    let rest = shoal.rest_url.trim_start_matches("http://").to_owned();
    // The reads below end when the node closes the connection: no timing
    // is assumed beyond the guard against a hang.
    let mut slow = connect_from("127.0.0.1", &rest).await;
    let answer = exchange(
        &mut slow,
        b"GET /0.1.0/ping HTTP/1.1\r\nhost: x\r\n",
        "never",
    )
    .await;
    assert!(!answer.contains("200 OK"), "{answer}");
    // Kept alive after a reply, the next head has the same deadline.
    let mut kept = connect_from("127.0.0.1", &rest).await;
    let answer = exchange(&mut kept, PING, "never").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // A body that never ends is answered 408 once the idle timeout is up.
    let mut slow = connect_from("127.0.0.1", &rest).await;
    let head = "POST /0.1.0/db/t/pk-read HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"fil";
    let answer = exchange(&mut slow, head.as_bytes(), "REQUEST_TIMEOUT").await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // A RESP client that never authenticates is closed, however it chats.
    let mut chatty = connect_from("127.0.0.1", &shoal.resp_addr).await;
    let answer = exchange(&mut chatty, b"PING\r\n", "never").await;
    assert_eq!(answer, "+PONG\r\n");
}
