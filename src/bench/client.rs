//! The benchmark's clients: one connection each, over REST (RonDB's shapes)
//! or the Redis protocol. A `usertable` record is a table row over REST
//! and a hash over RESP (as YCSB's Redis binding keeps it).

use std::io::Write as _;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::keys::key_name;
use super::workload::FIELDS;

/// The table (REST) the records live in, and its key column.
pub(crate) const TABLE: &str = "usertable";
pub(crate) const KEY_COLUMN: &str = "ycsb_key";

/// The names of a record's fields: columns over REST, hash fields over RESP.
const FIELD_NAMES: [&str; FIELDS] = [
    "field0", "field1", "field2", "field3", "field4", "field5", "field6", "field7", "field8",
    "field9",
];

/// The `usertable` schema, for the control plane's table API.
pub(crate) fn usertable_schema() -> Value {
    let mut columns = vec![json!({"name": KEY_COLUMN, "type": "VARCHAR(64)"})];
    for name in FIELD_NAMES {
        columns.push(json!({"name": name, "type": "VARCHAR(100)"}));
    }
    json!({"name": TABLE, "columns": columns, "primary_key": [KEY_COLUMN]})
}

/// How one request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Done; for reads, how many of the rows asked for were found.
    Done { found: usize },
    /// Refused by the database's rate limit.
    Throttled,
    /// Refused or failed otherwise: what the server said.
    Failed(String),
}

/// Where to reach the data and as whom.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// Clients are spread over the addresses, and go on with the next when
    /// theirs breaks.
    Rest {
        urls: Vec<String>,
        database: String,
        key: String,
    },
    Resp {
        addrs: Vec<String>,
        /// `AUTH <database> <key>`; none for a server without auth.
        auth: Option<(String, String)>,
        /// Keep every record in the sorted set `_indices` too, scored by
        /// its key's hash, as YCSB's Redis binding does to scan (workload E:
        /// a server with sorted sets).
        scans: bool,
    },
}

/// The sorted set YCSB's Redis binding scans by.
const INDEX_KEY: &[u8] = b"_indices";

/// One connection.
pub(crate) enum Conn {
    Rest(Rest),
    Resp(Resp),
}

impl Conn {
    /// A connection to the target's address `at` (modulo how many it has).
    pub(crate) async fn open(target: &Target, at: usize) -> anyhow::Result<Conn> {
        Ok(match target {
            Target::Rest {
                urls,
                database,
                key,
            } => Conn::Rest(Rest {
                http: reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .build()?,
                url: urls[at % urls.len()].trim_end_matches('/').to_owned(),
                database: database.clone(),
                key: key.clone(),
                body: String::new(),
            }),
            Target::Resp { addrs, auth, scans } => {
                let addr = &addrs[at % addrs.len()];
                let stream = TcpStream::connect(addr)
                    .await
                    .with_context(|| format!("connecting to {addr}"))?;
                stream.set_nodelay(true)?;
                let mut conn = Resp {
                    scans: *scans,
                    stream: BufReader::new(stream),
                    out: Vec::new(),
                    line: Vec::new(),
                };
                if let Some((database, key)) = auth {
                    conn.command(&[b"AUTH", database.as_bytes(), key.as_bytes()]);
                    if let Reply::Error(e) = conn.round_trip(1).await?.remove(0) {
                        bail!("AUTH refused: {e}");
                    }
                }
                Conn::Resp(conn)
            }
        })
    }

    /// Reads record `key`, every field.
    pub(crate) async fn read(&mut self, key: u64) -> anyhow::Result<Outcome> {
        self.lookup(&[key]).await
    }

    /// Reads the records `keys`, in one request (REST batch) or one
    /// pipelined round trip (RESP).
    pub(crate) async fn lookup(&mut self, keys: &[u64]) -> anyhow::Result<Outcome> {
        match self {
            Conn::Rest(rest) => rest.lookup(keys).await,
            Conn::Resp(resp) => {
                for &key in keys {
                    let name = key_name(key);
                    resp.command(&[b"HGETALL", name.as_bytes()]);
                }
                let replies = resp.round_trip(keys.len()).await?;
                let mut found = 0;
                for reply in replies {
                    match reply {
                        Reply::Array(0) => {}
                        Reply::Array(_) => found += 1,
                        other => return Ok(other.refusal()),
                    }
                }
                Ok(Outcome::Done { found })
            }
        }
    }

    /// `len` records from record `key`'s key on, in one request (REST scan)
    /// or as YCSB's Redis binding scans: the keys from the sorted set, then
    /// each record in one pipelined round trip.
    pub(crate) async fn scan(&mut self, key: u64, len: usize) -> anyhow::Result<Outcome> {
        match self {
            Conn::Rest(rest) => rest.scan(key, len).await,
            Conn::Resp(resp) => {
                let score = super::keys::key_score(key).to_string();
                let len = len.to_string();
                resp.command(&[
                    b"ZRANGEBYSCORE",
                    INDEX_KEY,
                    score.as_bytes(),
                    b"+inf",
                    b"LIMIT",
                    b"0",
                    len.as_bytes(),
                ]);
                let keys = match resp.round_trip_strings().await? {
                    Ok(keys) => keys,
                    Err(refused) => return Ok(refused.refusal()),
                };
                for k in &keys {
                    resp.command(&[b"HGETALL", k]);
                }
                let mut found = 0;
                for reply in resp.round_trip(keys.len()).await? {
                    match reply {
                        Reply::Array(0) => {}
                        Reply::Array(_) => found += 1,
                        other => return Ok(other.refusal()),
                    }
                }
                Ok(Outcome::Done { found })
            }
        }
    }

    /// Writes `fields` (index, value) of record `key`: every field makes an
    /// insert, one an update.
    pub(crate) async fn write(
        &mut self,
        key: u64,
        fields: &[(usize, &str)],
        insert: bool,
    ) -> anyhow::Result<Outcome> {
        match self {
            Conn::Rest(rest) => rest.write(key, fields, insert).await,
            Conn::Resp(resp) => {
                let replies = if insert {
                    resp.insert(key, fields)
                } else {
                    resp.hset(key, fields);
                    1
                };
                for reply in resp.round_trip(replies).await? {
                    if !matches!(reply, Reply::Integer(_)) {
                        return Ok(reply.refusal());
                    }
                }
                Ok(Outcome::Done { found: 1 })
            }
        }
    }

    /// Loads whole records, `rows` (key, ten values) in one request.
    pub(crate) async fn load(&mut self, rows: &[(u64, Vec<String>)]) -> anyhow::Result<Outcome> {
        match self {
            Conn::Rest(rest) => rest.load(rows).await,
            Conn::Resp(resp) => {
                let mut replies = 0;
                for (key, values) in rows {
                    let fields: Vec<(usize, &str)> =
                        values.iter().map(String::as_str).enumerate().collect();
                    replies += resp.insert(*key, &fields);
                }
                for reply in resp.round_trip(replies).await? {
                    if !matches!(reply, Reply::Integer(_)) {
                        return Ok(reply.refusal());
                    }
                }
                Ok(Outcome::Done { found: rows.len() })
            }
        }
    }
}

pub(crate) struct Rest {
    http: reqwest::Client,
    url: String,
    database: String,
    key: String,
    body: String,
}

impl Rest {
    /// Posts the body built in `self.body`; answers the status and the
    /// answer's bytes (parsed only as far as the caller needs).
    async fn post(&mut self, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
        let response = self
            .http
            .post(format!("{}/0.1.0/{path}", self.url))
            .header("X-API-KEY", &self.key)
            .header("content-type", "application/json")
            .body(std::mem::take(&mut self.body))
            .send()
            .await
            .with_context(|| format!("reaching {}", self.url))?;
        let status = response.status().as_u16();
        Ok((status, response.bytes().await?.to_vec()))
    }

    fn refusal(status: u16, body: &[u8]) -> Outcome {
        if status == 429 {
            return Outcome::Throttled;
        }
        let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let code = body["error"]["code"].as_str().unwrap_or("");
        let message = body["error"]["message"].as_str().unwrap_or("");
        Outcome::Failed(format!("{status} {code} {message}").trim().to_owned())
    }

    /// `len` rows of `usertable` in key order from record `key`'s key on.
    async fn scan(&mut self, key: u64, len: usize) -> anyhow::Result<Outcome> {
        self.body = json!({"lower": {"values": [key_name(key)]}, "limit": len}).to_string();
        let path = format!("{}/{TABLE}/scan", self.database);
        let (status, body) = self.post(&path).await?;
        if status != 200 {
            return Ok(Self::refusal(status, &body));
        }
        let page: Value = serde_json::from_slice(&body).context("a scan's answer")?;
        let found = page["data"].as_array().map_or(0, Vec::len);
        Ok(Outcome::Done { found })
    }

    async fn lookup(&mut self, keys: &[u64]) -> anyhow::Result<Outcome> {
        let read = |key: u64| json!({"filters": [{"column": KEY_COLUMN, "value": key_name(key)}]});
        if let [key] = keys {
            self.body = read(*key).to_string();
            let path = format!("{}/{TABLE}/pk-read", self.database);
            let (status, body) = self.post(&path).await?;
            return Ok(match status {
                200 => Outcome::Done { found: 1 },
                404 if not_found(&body) => Outcome::Done { found: 0 },
                _ => Self::refusal(status, &body),
            });
        }
        let url = format!("{}/{TABLE}/pk-read", self.database);
        let operations: Vec<Value> = keys
            .iter()
            .map(|&k| json!({"method": "POST", "relative-url": url, "body": read(k)}))
            .collect();
        self.body = json!({ "operations": operations }).to_string();
        let (status, body) = self.post("batch").await?;
        if status != 200 {
            return Ok(Self::refusal(status, &body));
        }
        let mut found = 0;
        for code in batch_codes(&body)? {
            match code {
                200 => found += 1,
                404 => {}
                _ => return Ok(batch_refusal(code, &body)),
            }
        }
        Ok(Outcome::Done { found })
    }

    fn row(key: u64, fields: &[(usize, &str)]) -> Value {
        let mut row = serde_json::Map::new();
        row.insert(KEY_COLUMN.into(), key_name(key).into());
        for (f, value) in fields {
            row.insert(FIELD_NAMES[*f].into(), (*value).into());
        }
        Value::Object(row)
    }

    async fn write(
        &mut self,
        key: u64,
        fields: &[(usize, &str)],
        insert: bool,
    ) -> anyhow::Result<Outcome> {
        self.body = json!({"row": Self::row(key, fields)}).to_string();
        let method = if insert { "pk-insert" } else { "pk-update" };
        let path = format!("{}/{TABLE}/{method}", self.database);
        let (status, body) = self.post(&path).await?;
        Ok(match status {
            200 | 201 => Outcome::Done { found: 1 },
            _ => Self::refusal(status, &body),
        })
    }

    async fn load(&mut self, rows: &[(u64, Vec<String>)]) -> anyhow::Result<Outcome> {
        let url = format!("{}/{TABLE}/pk-write", self.database);
        let operations: Vec<Value> = rows
            .iter()
            .map(|(key, values)| {
                let fields: Vec<(usize, &str)> =
                    values.iter().map(String::as_str).enumerate().collect();
                json!({"method": "POST", "relative-url": url, "body": {"row": Self::row(*key, &fields)}})
            })
            .collect();
        self.body = json!({ "operations": operations }).to_string();
        let (status, body) = self.post("batch").await?;
        if status != 200 {
            return Ok(Self::refusal(status, &body));
        }
        for code in batch_codes(&body)? {
            if !matches!(code, 200 | 201) {
                return Ok(batch_refusal(code, &body));
            }
        }
        Ok(Outcome::Done { found: rows.len() })
    }
}

/// Whether a 404 answer is "no such row" (and not, say, no such table).
fn not_found(body: &[u8]) -> bool {
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    body["error"]["code"].is_null() || body["error"]["code"] == "NOT_FOUND"
}

/// The status of each operation of a batch answer, without building the
/// rows it read: the client should cost the machine little.
fn batch_codes(body: &[u8]) -> anyhow::Result<Vec<u16>> {
    #[derive(serde::Deserialize)]
    struct Answers {
        result: Vec<Answer>,
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        code: u16,
    }
    let answers: Answers = serde_json::from_slice(body)
        .context("a batch answer that is not {\"result\": [answers]}")?;
    Ok(answers.result.into_iter().map(|a| a.code).collect())
}

/// The first refused operation of a batch answer, said as the server said it.
fn batch_refusal(code: u16, body: &[u8]) -> Outcome {
    if code == 429 {
        return Outcome::Throttled;
    }
    let answers: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let refused = answers["result"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["code"] == code)
        .map(|a| a["body"].to_string())
        .unwrap_or_default();
    Rest::refusal(code, refused.as_bytes())
}

/// A reply of the Redis protocol, as far as the benchmark needs one: of an
/// array, how many items it has.
#[derive(Debug, PartialEq)]
enum Reply {
    Simple,
    Error(String),
    Integer(i64),
    Bulk,
    Nil,
    Array(u64),
}

impl Reply {
    fn refusal(self) -> Outcome {
        match self {
            Reply::Error(e) if e.starts_with("THROTTLED") => Outcome::Throttled,
            Reply::Error(e) => Outcome::Failed(e),
            other => Outcome::Failed(format!("unexpected reply {other:?}")),
        }
    }
}

/// Longest reply line or bulk the client takes: a record is ~1.1 KB.
const MAX_REPLY: usize = 16 << 20;

pub(crate) struct Resp {
    /// Whether records go into the sorted set scans read (`Target::Resp`).
    scans: bool,
    stream: BufReader<TcpStream>,
    out: Vec<u8>,
    /// The reply line being read.
    line: Vec<u8>,
}

impl Resp {
    fn command(&mut self, args: &[&[u8]]) {
        let _ = write!(self.out, "*{}\r\n", args.len());
        for arg in args {
            let _ = write!(self.out, "${}\r\n", arg.len());
            self.out.extend_from_slice(arg);
            self.out.extend_from_slice(b"\r\n");
        }
    }

    fn hset(&mut self, key: u64, fields: &[(usize, &str)]) {
        let name = key_name(key);
        let mut args: Vec<&[u8]> = vec![b"HSET", name.as_bytes()];
        for (f, value) in fields {
            args.push(FIELD_NAMES[*f].as_bytes());
            args.push(value.as_bytes());
        }
        self.command(&args);
    }

    /// Queues a new record: its hash, and its place in the sorted set when
    /// the run scans. Answers how many replies that makes.
    fn insert(&mut self, key: u64, fields: &[(usize, &str)]) -> usize {
        self.hset(key, fields);
        if !self.scans {
            return 1;
        }
        let (name, score) = (key_name(key), super::keys::key_score(key).to_string());
        self.command(&[b"ZADD", INDEX_KEY, score.as_bytes(), name.as_bytes()]);
        2
    }

    /// Sends what was queued and reads one reply that is an array of
    /// strings: their bytes, or the reply if it is another.
    async fn round_trip_strings(&mut self) -> anyhow::Result<Result<Vec<Vec<u8>>, Reply>> {
        self.stream.get_mut().write_all(&self.out).await?;
        self.out.clear();
        let n = match self.item().await? {
            Reply::Array(n) => n,
            other => return Ok(Err(other)),
        };
        let mut strings = Vec::with_capacity(n as usize);
        for _ in 0..n {
            self.line.clear();
            (&mut self.stream)
                .take(MAX_REPLY as u64)
                .read_until(b'\n', &mut self.line)
                .await?;
            let len: usize = (self.line.strip_prefix(b"$"))
                .and_then(|l| std::str::from_utf8(l).ok())
                .and_then(|l| l.trim_end().parse().ok())
                .filter(|&len| len <= MAX_REPLY)
                .context("a bulk string in the array")?;
            let mut bytes = vec![0; len + 2];
            self.stream.read_exact(&mut bytes).await?;
            bytes.truncate(len);
            strings.push(bytes);
        }
        Ok(Ok(strings))
    }

    /// Sends what was queued and reads `n` replies.
    async fn round_trip(&mut self, n: usize) -> anyhow::Result<Vec<Reply>> {
        self.stream.get_mut().write_all(&self.out).await?;
        self.out.clear();
        let mut replies = Vec::with_capacity(n);
        for _ in 0..n {
            replies.push(self.reply().await?);
        }
        Ok(replies)
    }

    /// A whole reply: an array's items are read and passed over.
    async fn reply(&mut self) -> anyhow::Result<Reply> {
        let reply = self.item().await?;
        if let Reply::Array(n) = reply {
            let mut pending = n;
            while pending > 0 {
                if let Reply::Array(m) = self.item().await? {
                    pending += m;
                }
                pending -= 1;
            }
        }
        Ok(reply)
    }

    /// One item of a reply; of an array only its length.
    async fn item(&mut self) -> anyhow::Result<Reply> {
        self.line.clear();
        (&mut self.stream)
            .take(MAX_REPLY as u64)
            .read_until(b'\n', &mut self.line)
            .await?;
        let Some(line) = self.line.strip_suffix(b"\r\n") else {
            bail!("the server closed the connection or sent a malformed reply");
        };
        let (kind, rest) = line.split_first().context("an empty reply line")?;
        let rest = std::str::from_utf8(rest).context("a reply line that is not UTF-8")?;
        let number = || {
            rest.parse::<i64>()
                .with_context(|| format!("a reply line '{rest}'"))
        };
        Ok(match kind {
            b'+' => Reply::Simple,
            b'-' => Reply::Error(rest.to_owned()),
            b':' => Reply::Integer(number()?),
            b'_' => Reply::Nil,
            b'$' => match number()? {
                -1 => Reply::Nil,
                n if n < 0 || n as usize > MAX_REPLY => bail!("a bulk of {n} bytes"),
                n => {
                    let mut skip = n as usize + 2;
                    while skip > 0 {
                        let buffered = self.stream.fill_buf().await?;
                        anyhow::ensure!(!buffered.is_empty(), "the server closed the connection");
                        let k = buffered.len().min(skip);
                        self.stream.consume(k);
                        skip -= k;
                    }
                    Reply::Bulk
                }
            },
            b'*' | b'%' => match number()? {
                n if n < 0 => Reply::Nil,
                n if n as usize > MAX_REPLY => bail!("an array of {n} items"),
                // A map (RESP3) has a key and a value per entry.
                n => Reply::Array(if *kind == b'%' {
                    2 * n as u64
                } else {
                    n as u64
                }),
            },
            _ => bail!(
                "a reply the benchmark does not understand: '{}'",
                String::from_utf8_lossy(line)
            ),
        })
    }
}
