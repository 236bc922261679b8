//! A small MySQL-protocol client for `shoal bench oltp`: the handshake
//! with `mysql_native_password`, text queries, and prepared statements
//! executed in the binary protocol, as sysbench runs them. Rows are counted,
//! not decoded: a benchmark only needs to know the statement ran and how
//! many rows came back.

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use shoal_wire::mysql::{lenenc, put_lenenc};

const LONG_PASSWORD: u32 = 1;
const CONNECT_WITH_DB: u32 = 1 << 3;
const PROTOCOL_41: u32 = 1 << 9;
const TRANSACTIONS: u32 = 1 << 13;
const SECURE_CONNECTION: u32 = 1 << 15;
const PLUGIN_AUTH: u32 = 1 << 19;
const DEPRECATE_EOF: u32 = 1 << 24;
/// utf8mb4_general_ci.
const UTF8MB4: u8 = 45;
const NATIVE: &str = "mysql_native_password";
/// Largest packet read: far more than any answer of the benchmark.
const MAX_PACKET: usize = 16 << 20;

const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;

/// An argument of a prepared statement.
pub(crate) enum Arg<'a> {
    Int(i64),
    Text(&'a str),
}

/// A statement prepared on the server.
pub(crate) struct Statement {
    id: u32,
    params: usize,
}

/// An error the server answered: its number and message.
#[derive(Debug)]
pub(crate) struct ServerError {
    pub(crate) code: u16,
    pub(crate) message: String,
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.code, self.message)
    }
}

impl std::error::Error for ServerError {}

pub(crate) struct Client {
    read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
    seq: u8,
    packet: Vec<u8>,
    out: Vec<u8>,
}

impl Client {
    /// Connects to `addr` as `user` with `password`, using `database`.
    pub(crate) async fn connect(
        addr: &str,
        user: &str,
        password: &str,
        database: &str,
    ) -> anyhow::Result<Client> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        let mut c = Client {
            read: BufReader::new(read),
            write,
            seq: 0,
            packet: Vec::new(),
            out: Vec::new(),
        };
        c.read_packet().await?;
        let scramble = greeting_scramble(&c.packet)?;
        let mut body = Vec::new();
        let caps = LONG_PASSWORD
            | CONNECT_WITH_DB
            | PROTOCOL_41
            | TRANSACTIONS
            | SECURE_CONNECTION
            | PLUGIN_AUTH
            | DEPRECATE_EOF;
        body.extend_from_slice(&caps.to_le_bytes());
        body.extend_from_slice(&(MAX_PACKET as u32).to_le_bytes());
        body.push(UTF8MB4);
        body.extend_from_slice(&[0; 23]);
        put_cstr(&mut body, user);
        let answer = shoal_wire::apikey::sql_answer(password.as_bytes(), &scramble);
        body.push(answer.len() as u8);
        body.extend_from_slice(&answer);
        put_cstr(&mut body, database);
        put_cstr(&mut body, NATIVE);
        c.send(&body).await?;
        c.read_packet().await?;
        if c.packet.first() == Some(&0xfe) {
            // Asked to switch: the plugin, then its scramble.
            let rest = &c.packet[1..];
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            let scramble: Vec<u8> = rest[(end + 1).min(rest.len())..]
                .iter()
                .copied()
                .take(20)
                .collect();
            let answer = shoal_wire::apikey::sql_answer(password.as_bytes(), &scramble);
            c.send(&answer).await?;
            c.read_packet().await?;
        }
        c.ok_or_error()?;
        Ok(c)
    }

    /// Runs a text statement; answers the rows it returned.
    pub(crate) async fn query(&mut self, sql: &str) -> anyhow::Result<usize> {
        self.seq = 0;
        let mut body = Vec::with_capacity(sql.len() + 1);
        body.push(COM_QUERY);
        body.extend_from_slice(sql.as_bytes());
        self.send(&body).await?;
        self.result().await
    }

    /// Prepares `sql`.
    pub(crate) async fn prepare(&mut self, sql: &str) -> anyhow::Result<Statement> {
        self.seq = 0;
        let mut body = Vec::with_capacity(sql.len() + 1);
        body.push(COM_STMT_PREPARE);
        body.extend_from_slice(sql.as_bytes());
        self.send(&body).await?;
        self.read_packet().await?;
        if self.packet.first() == Some(&0xff) {
            return Err(self.error().into());
        }
        if self.packet.len() < 12 || self.packet[0] != 0 {
            bail!("a prepare answered something that is not its OK");
        }
        let id = u32::from_le_bytes(self.packet[1..5].try_into().expect("4"));
        let columns = usize::from(u16::from_le_bytes([self.packet[5], self.packet[6]]));
        let params = usize::from(u16::from_le_bytes([self.packet[7], self.packet[8]]));
        // Their definitions (no EOF after them: DEPRECATE_EOF).
        for _ in 0..params + columns {
            self.read_packet().await?;
        }
        Ok(Statement { id, params })
    }

    /// Executes a prepared statement with `args`; answers the rows it
    /// returned.
    pub(crate) async fn execute(
        &mut self,
        s: &Statement,
        args: &[Arg<'_>],
    ) -> anyhow::Result<usize> {
        if args.len() != s.params {
            bail!(
                "the statement takes {} arguments, not {}",
                s.params,
                args.len()
            );
        }
        self.seq = 0;
        let mut body = std::mem::take(&mut self.out);
        body.clear();
        body.push(COM_STMT_EXECUTE);
        body.extend_from_slice(&s.id.to_le_bytes());
        body.push(0);
        body.extend_from_slice(&1u32.to_le_bytes());
        if !args.is_empty() {
            body.extend(std::iter::repeat_n(0u8, args.len().div_ceil(8)));
            body.push(1);
            for a in args {
                body.extend_from_slice(match a {
                    Arg::Int(_) => &[0x08, 0],
                    Arg::Text(_) => &[0xfd, 0],
                });
            }
            for a in args {
                match a {
                    Arg::Int(v) => body.extend_from_slice(&v.to_le_bytes()),
                    Arg::Text(t) => {
                        put_lenenc(&mut body, t.len() as u64);
                        body.extend_from_slice(t.as_bytes());
                    }
                }
            }
        }
        let sent = self.send(&body).await;
        self.out = body;
        sent?;
        self.result().await
    }

    /// Reads a statement's answer: OK, an error, or a result set.
    async fn result(&mut self) -> anyhow::Result<usize> {
        self.read_packet().await?;
        match self.packet.first() {
            Some(0x00) => return Ok(0),
            Some(0xff) => return Err(self.error().into()),
            None => bail!("an empty answer"),
            _ => {}
        }
        let (columns, _) = lenenc(&self.packet).context("a result set's column count")?;
        for _ in 0..columns {
            self.read_packet().await?;
        }
        let mut rows = 0;
        loop {
            self.read_packet().await?;
            match self.packet.first() {
                Some(0xfe) if self.packet.len() < 0xff_ffff => return Ok(rows),
                Some(0xff) => return Err(self.error().into()),
                _ => rows += 1,
            }
        }
    }

    fn ok_or_error(&self) -> anyhow::Result<()> {
        match self.packet.first() {
            Some(0x00) => Ok(()),
            Some(0xff) => Err(self.error().into()),
            _ => bail!("the server answered the login with something unexpected"),
        }
    }

    fn error(&self) -> ServerError {
        let p = &self.packet;
        let code = if p.len() >= 3 {
            u16::from_le_bytes([p[1], p[2]])
        } else {
            0
        };
        // '#' and a five-character SQLSTATE, then the message.
        let message = if p.len() > 9 && p[3] == b'#' {
            &p[9..]
        } else {
            p.get(3..).unwrap_or_default()
        };
        ServerError {
            code,
            message: String::from_utf8_lossy(message).into_owned(),
        }
    }

    async fn send(&mut self, body: &[u8]) -> anyhow::Result<()> {
        let mut framed = Vec::with_capacity(body.len() + 4);
        framed.extend_from_slice(&(body.len() as u32).to_le_bytes()[..3]);
        framed.push(self.seq);
        framed.extend_from_slice(body);
        self.seq = self.seq.wrapping_add(1);
        self.write.write_all(&framed).await?;
        Ok(())
    }

    async fn read_packet(&mut self) -> anyhow::Result<()> {
        let mut head = [0u8; 4];
        self.read.read_exact(&mut head).await?;
        let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
        if len > MAX_PACKET {
            bail!("a packet of {len} bytes");
        }
        self.seq = head[3].wrapping_add(1);
        self.packet.resize(len, 0);
        self.read.read_exact(&mut self.packet).await?;
        Ok(())
    }
}

/// The 20-byte scramble of a server's greeting (protocol 10).
fn greeting_scramble(p: &[u8]) -> anyhow::Result<Vec<u8>> {
    if p.first() == Some(&0xff) {
        bail!(
            "the server refused the connection: {}",
            String::from_utf8_lossy(p.get(3..).unwrap_or_default())
        );
    }
    if p.first() != Some(&10) {
        bail!("not a MySQL protocol 10 greeting");
    }
    let version_end = 1 + p[1..]
        .iter()
        .position(|&b| b == 0)
        .context("a greeting's version")?;
    let at = version_end + 1 + 4;
    let first = p.get(at..at + 8).context("a greeting's scramble")?;
    // Filler, capabilities, charset, status, capabilities, length, reserved.
    let second_at = at + 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10;
    let second = p
        .get(second_at..second_at + 12)
        .context("a greeting's scramble")?;
    Ok([first, second].concat())
}

fn put_cstr(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}
