//! Reaching a data node over the Redis protocol from tests: through the
//! `redis` crate, `redis-cli`, and raw bytes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use redis::{Connection, RedisError};

use super::Shoal;

/// A node with tenant `acme`'s databases `cache` and `lab`, tenant
/// `other`'s `rival`, and a read-write key on `cache`.
pub struct Setup {
    pub shoal: Shoal,
    pub key: String,
}

pub async fn setup(args: &[&str]) -> Setup {
    let mut all = vec!["datanode", "--data-memory", "128M"];
    all.extend_from_slice(args);
    let shoal = Shoal::start(&all);
    for (tenant, db) in [("acme", "cache"), ("acme", "lab"), ("other", "rival")] {
        shoal.create_database(tenant, db).await;
    }
    let key = shoal.create_key("acme", &[("cache", "read_write")]).await;
    Setup { shoal, key }
}

impl Setup {
    pub fn url(&self, db: &str, key: &str, resp3: bool) -> String {
        let proto = if resp3 { "?protocol=resp3" } else { "" };
        format!("redis://{db}:{key}@{}/{proto}", self.shoal.resp_addr)
    }

    pub fn connect(&self) -> Connection {
        self.connect_as("cache", &self.key.clone())
    }

    pub fn connect_as(&self, db: &str, key: &str) -> Connection {
        redis::Client::open(self.url(db, key, false))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// A raw connection, for bytes no client library would send.
    pub fn raw(&self) -> Raw {
        Raw(TcpStream::connect(&self.shoal.resp_addr).unwrap())
    }
}

pub struct Raw(pub TcpStream);

impl Raw {
    /// Sends `bytes` and reads one reply's worth: until the bytes read end
    /// in CRLF (replies here are short and single-line or small).
    pub fn send(&mut self, bytes: &[u8]) -> String {
        self.0.write_all(bytes).unwrap();
        self.read_reply()
    }

    pub fn read_reply(&mut self) -> String {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.ends_with(b"\r\n") {
            let n = self.0.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    /// Whether the server closed the connection.
    pub fn closed(&mut self) -> bool {
        let mut buf = [0u8; 16];
        matches!(self.0.read(&mut buf), Ok(0) | Err(_))
    }
}

pub fn command(words: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", words.len()).into_bytes();
    for w in words {
        out.extend_from_slice(format!("${}\r\n{w}\r\n", w.len()).as_bytes());
    }
    out
}

pub fn code(e: &RedisError) -> String {
    e.code().unwrap_or_default().to_owned()
}

pub fn query<T: redis::FromRedisValue>(
    con: &mut Connection,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(con)
}

pub fn redis_cli_command(s: &Setup) -> Command {
    let (host, port) = s.shoal.resp_addr.rsplit_once(':').unwrap();
    let mut command = Command::new("redis-cli");
    command.args(["-h", host, "-p", port, "--user", "cache", "--pass", &s.key]);
    command.arg("--no-auth-warning");
    command
}

/// Runs `redis-cli <args>`; answers what it printed.
pub fn redis_cli(s: &Setup, args: &[&str]) -> String {
    let out = redis_cli_command(s)
        .args(args)
        .output()
        .expect("redis-cli is installed (scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a Python script with redis-py against the node's `cache` database
/// (its arguments: host, port, the setup's key); answers what it printed.
pub fn python(s: &Setup, script: &str) -> String {
    let (host, port) = s.shoal.resp_addr.rsplit_once(':').unwrap();
    let out = Command::new("python3")
        .args(["-c", script, host, port, &s.key])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "redis-py (scripts/test installs it with pip): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The start of a redis-py script: `r`, a client of the `cache` database.
pub const CONNECT: &str = "import sys, redis\n\
    r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]), username='cache', password=sys.argv[3])\n";

/// A redis-server of its own, stopped when dropped.
pub struct RedisServer {
    child: Child,
    pub addr: String,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        let port = super::free_port();
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (Debian: redis-server) is installed by scripts/test");
        let addr = format!("127.0.0.1:{port}");
        let up = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(25));
            TcpStream::connect(&addr).is_ok()
        });
        assert!(up, "redis-server did not start");
        RedisServer {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
