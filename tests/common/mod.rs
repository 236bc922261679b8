//! Starting `shoal` as a real process for end-to-end tests.

#![allow(dead_code, unreachable_pub)]

pub mod control;
pub mod resp;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// `shoal demo` as a cluster: two child data nodes, one node group of two.
pub const DEMO_CLUSTER: [&str; 9] = [
    "demo",
    "--data-memory",
    "64M",
    "--control-port",
    "0",
    "--data-nodes",
    "2",
    "--replicas",
    "2",
];

use reqwest::StatusCode;
use serde_json::Value;

/// Longest a process may take to print a line we wait for before the test
/// gives up: a guard against a hang, not a timing the test relies on.
const READY_GUARD: Duration = Duration::from_secs(120);

/// A `shoal` process, killed when dropped.
pub struct Shoal {
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
    /// Every stdout line so far.
    pub stdout: Vec<String>,
    /// Everything written to stderr so far (read as it comes, so that the
    /// process never blocks on a full pipe).
    stderr: Arc<Mutex<String>>,
    pub internal_url: String,
    /// `http://host:port` of the REST data API.
    pub rest_url: String,
    /// `host:port` of the Redis protocol.
    pub resp_addr: String,
    /// `host:port` of SQL over the MySQL protocol.
    pub mysql_addr: String,
    /// `host:port` of the node-to-node transport.
    pub peer_addr: String,
    /// `http://host:port` of the control plane.
    pub control_url: String,
    cluster_secret: Option<String>,
    pub data_dir: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Shoal {
    /// Starts `shoal <args> --data-dir <fresh dir> --internal-port 0` and
    /// waits until it says where it listens.
    pub fn start(args: &[&str]) -> Shoal {
        let dir = tempfile::tempdir().unwrap();
        let mut shoal = Shoal::start_in(args, dir.path());
        shoal._dir = Some(dir);
        shoal
    }

    pub fn start_in(args: &[&str], data_dir: &Path) -> Shoal {
        Shoal::start_in_env(args, &[], data_dir)
    }

    /// `start_in`, with `envs` set.
    pub fn start_in_env(args: &[&str], envs: &[(&str, &str)], data_dir: &Path) -> Shoal {
        let ports = [
            "--internal-port",
            "0",
            "--rest-port",
            "0",
            "--resp-port",
            "0",
            "--mysql-port",
            "0",
            "--peer-port",
            "0",
        ];
        let mut shoal = Shoal::spawn(&[args, &ports[..]].concat(), envs, data_dir);
        let line = shoal.wait_for("internal API http://");
        let after = |label: &str| {
            line.split(label)
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_else(|| panic!("no {label:?} in {line:?}"))
                .to_owned()
        };
        shoal.internal_url = after("internal API ");
        shoal.rest_url = after("REST ");
        shoal.resp_addr = after("RESP ");
        shoal.mysql_addr = after("MySQL ");
        shoal.peer_addr = after("peer ");
        shoal
    }

    /// Starts `shoal control-plane` on a free port with a fresh data
    /// directory, its store at `store_url` (or SQLite in the directory).
    pub fn control_plane(store_url: Option<&str>, extra: &[&str], envs: &[(&str, &str)]) -> Shoal {
        let dir = tempfile::tempdir().unwrap();
        let mut shoal = Shoal::control_plane_in(store_url, extra, envs, dir.path());
        shoal._dir = Some(dir);
        shoal
    }

    pub fn control_plane_in(
        store_url: Option<&str>,
        extra: &[&str],
        envs: &[(&str, &str)],
        data_dir: &Path,
    ) -> Shoal {
        let mut args = vec!["control-plane", "--control-port", "0"];
        if let Some(url) = store_url {
            args.extend(["--database-url", url]);
        }
        args.extend(extra);
        let mut shoal = Shoal::spawn(&args, envs, data_dir);
        let line = shoal.wait_for("control plane listening: http://");
        shoal.control_url = line
            .split("listening: ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap()
            .to_owned();
        shoal
    }

    /// Starts `shoal <args> --data-dir <data_dir>` with `envs` set.
    fn spawn(args: &[&str], envs: &[(&str, &str)], data_dir: &Path) -> Shoal {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shoal"))
            .args(args)
            .envs(envs.iter().copied())
            .arg("--data-dir")
            .arg(data_dir)
            .env_remove("SHOAL_CLUSTER_SECRET")
            .env_remove("SHOAL_DATABASE_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("shoal starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().unwrap();
        let err_sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = std::io::Read::read(&mut err_pipe, &mut buf) {
                err_sink
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let (send, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Shoal {
            child: Some(child),
            lines,
            stdout: Vec::new(),
            stderr,
            internal_url: String::new(),
            rest_url: String::new(),
            resp_addr: String::new(),
            mysql_addr: String::new(),
            peer_addr: String::new(),
            control_url: String::new(),
            cluster_secret: args
                .iter()
                .position(|a| *a == "--cluster-secret")
                .map(|i| args[i + 1].to_owned()),
            data_dir: data_dir.to_owned(),
            _dir: None,
        }
    }

    /// Waits for a stdout line containing `needle` and returns it.
    pub fn wait_for(&mut self, needle: &str) -> String {
        loop {
            match self.lines.recv_timeout(READY_GUARD) {
                Ok(line) => {
                    self.stdout.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "shoal never printed {needle:?}; it printed {:?}",
                    self.stdout
                ),
            }
        }
    }

    /// The cluster secret: as given with `--cluster-secret`, or the one
    /// the process made in its data directory.
    pub fn secret(&self) -> String {
        match &self.cluster_secret {
            Some(secret) => secret.clone(),
            None => std::fs::read_to_string(self.data_dir.join("cluster-secret")).unwrap(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.internal_url)
    }

    /// Sends SIGTERM and waits for the process to end; returns its exit code
    /// and everything it wrote to stderr.
    pub fn terminate(mut self) -> (Option<i32>, String) {
        let child = self.child.take().unwrap();
        // The shell's own kill: no dependence on a kill binary being installed.
        let status = Command::new("sh")
            .args(["-c", &format!("kill -TERM {}", child.id())])
            .status()
            .unwrap();
        assert!(status.success());
        let status = child.wait_with_output().unwrap().status;
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.stdout.push(line);
        }
        (status.code(), self.stderr())
    }

    /// Kills the process with SIGKILL, as a crash would, and waits for it.
    pub fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// The process's id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// The most memory the process has held at once (its peak resident
    /// set), in bytes.
    pub fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/<pid>/status");
        kib * 1024
    }

    /// What the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Shoal {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `shoal <args>` to its end (for starts that must fail); answers its
/// exit code and stderr.
pub fn run_to_exit(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shoal"))
        .args(args)
        .env_remove("SHOAL_CLUSTER_SECRET")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn client() -> reqwest::Client {
    reqwest::Client::new()
}

impl Shoal {
    /// sqlx's options to log in to the node's MySQL port with API key
    /// `key` (user: its prefix, password: its secret), on database `db`.
    pub fn mysql_options(&self, key: &str, db: &str) -> sqlx::mysql::MySqlConnectOptions {
        let (host, port) = self.mysql_addr.rsplit_once(':').unwrap();
        let (user, secret) = key.split_once('.').unwrap();
        sqlx::mysql::MySqlConnectOptions::new()
            .host(host)
            .port(port.parse().unwrap())
            .username(user)
            .password(secret)
            .database(db)
    }

    /// Sends a request to the internal API with the cluster secret; answers
    /// the status and the JSON body (`null` when there is none).
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = client()
            .request(method, self.url(path))
            .bearer_auth(self.secret());
        if let Some(body) = body {
            request = request.json(&body);
        }
        let r = request.send().await.unwrap();
        let status = r.status();
        let bytes = r.bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"))
        };
        (status, body)
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    /// GETs a path of the internal API with the cluster secret; it must
    /// answer 200 with JSON.
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        let r = client()
            .get(self.url(path))
            .bearer_auth(self.secret())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), reqwest::StatusCode::OK, "GET {path}");
        r.json().await.unwrap()
    }

    /// An ndbinfo table: `{"columns": [...], "rows": [...]}`.
    pub async fn ndbinfo(&self, table: &str) -> serde_json::Value {
        self.get_json(&format!("/internal/v1/ndbinfo/{table}"))
            .await
    }
}

impl Shoal {
    /// Creates database `db` in `tenant`, failing the test if it cannot.
    pub async fn create_database(&self, tenant: &str, db: &str) {
        let (status, body) = self
            .post(
                "/internal/v1/databases",
                serde_json::json!({"name": db, "tenant": tenant}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }

    /// Has the node make an API key of `tenant` with `grants`
    /// (`[(database, "read" | "read_write")]`); answers the key.
    pub async fn create_key(&self, tenant: &str, grants: &[(&str, &str)]) -> String {
        let grants: Vec<Value> = grants
            .iter()
            .map(|(db, role)| serde_json::json!({"database": db, "role": role}))
            .collect();
        let (status, body) = self
            .post(
                "/internal/v1/api-keys",
                serde_json::json!({"tenant": tenant, "grants": grants}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["key"].as_str().unwrap().to_owned()
    }

    /// Revokes the key `key` on the node.
    pub async fn revoke_key(&self, key: &str) {
        let prefix = key.split('.').next().unwrap();
        let (status, body) = self
            .send(
                reqwest::Method::DELETE,
                &format!("/internal/v1/api-keys/{prefix}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    }

    /// Sets a database's quota over the internal API.
    pub async fn set_quota(&self, db: &str, quota: Value) {
        let (status, body) = self
            .send(
                reqwest::Method::PUT,
                &format!("/internal/v1/databases/{db}/quota"),
                Some(quota),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    /// The `table_memory_usage` row of `db.table`, if it has one.
    pub async fn table_memory(&self, db: &str, table: &str) -> Option<Vec<Value>> {
        let usage = self.ndbinfo("table_memory_usage").await;
        let rows: Vec<Vec<Value>> = serde_json::from_value(usage["rows"].clone()).unwrap();
        rows.into_iter().find(|r| r[0] == db && r[1] == table)
    }
}

/// The PostgreSQL server the control-plane tests use: `SHOAL_TEST_POSTGRES`,
/// a URL of a role that may create databases (scripts/test starts a local
/// server and sets it).
pub fn postgres_admin_url() -> String {
    std::env::var("SHOAL_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!(
            "set SHOAL_TEST_POSTGRES to a PostgreSQL URL of a role with CREATEDB \
             (scripts/test installs and starts one)"
        )
    })
}

/// A fresh PostgreSQL database for one test, dropped afterwards.
pub struct PgDatabase {
    admin: String,
    name: String,
    pub url: String,
}

impl PgDatabase {
    pub fn create() -> PgDatabase {
        let admin = postgres_admin_url();
        let mut random = [0u8; 6];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut random))
            .unwrap();
        let name = format!(
            "shoal_test_{}",
            random
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        psql(&admin, &format!("CREATE DATABASE {name}"));
        let (base, _) = admin.rsplit_once('/').expect("the URL names a database");
        let url = format!("{base}/{name}");
        PgDatabase { admin, name, url }
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        psql(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

fn psql(url: &str, sql: &str) {
    let out = Command::new("psql")
        .args([url, "-qAtc", sql])
        .output()
        .expect("psql is installed (apt: postgresql-client)");
    assert!(
        out.status.success(),
        "psql {sql:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A port nothing listens on now (for a peer process the test starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
