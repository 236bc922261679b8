//! Sessions carried on to their database's primary. Every node of a group
//! holds every row, so a session runs its reads where the client
//! connected; a write — or a locking read — of a database whose primary
//! is another node is refused by the coordinator before anything is done
//! (`TcError::NotPrimary`). Then the session goes to that node: the
//! connection opens a connection to the primary over the node-to-node
//! transport (`Cluster::relay_to`), sends the session's state (`Handoff`:
//! the key, the database, autocommit and an open `BEGIN`, user variables,
//! prepared statements), and, once the primary has taken it, the refused
//! command as it came. From then on it carries the client's packets to
//! the primary and the primary's to the client, as they are, until either
//! side ends.
//!
//! A session is carried only while its transaction holds no rows (its
//! reads, read committed, lock nothing), so nothing of it is left behind;
//! and once: the primary runs what it is sent, and refuses a write if it
//! is no longer the primary. The primary checks the key itself — it must
//! still be the key the client proved it knows — and applies its grants,
//! limits and quotas as to any client.
//!
//! When the view moves the database's primary away from the node the
//! session went to (it failed, paused, stopped), the client's connection
//! is closed: a statement under way there may or may not have been
//! applied, and a transaction open there is gone with it, nothing of it
//! applied — as a MySQL client sees a server go away.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::error::MyError;
use super::proto::Out;
use super::session::{Session, Stop};
use super::variables::Literal;
use crate::cluster::{Cluster, Relayed};

/// Largest session state carried: a session whose prepared statements
/// take more stays where it is, and its write is refused.
const MAX_HANDOFF: usize = 64 << 20;
/// Longest the primary may take to answer a handoff.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
/// Longest a session waits for a primary it cannot reach to be replaced.
const SETTLE_WITHIN: Duration = Duration::from_secs(2);

/// A session's state, as it goes to the primary: a change of its shape
/// is a new `TRANSPORT_VERSION`, so that nodes never misread each other's.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Handoff {
    pub(super) connection: u32,
    /// The key's prefix.
    pub(super) user: String,
    /// Which key it is (`ApiKey::hash`): the primary takes only this one.
    pub(super) key_hash: [u8; 32],
    pub(super) database: Option<String>,
    pub(super) capabilities: u32,
    pub(super) last_insert_id: u64,
    /// What `ROW_COUNT()` and `FOUND_ROWS()` answer next.
    pub(super) row_count: i64,
    pub(super) found_rows: u64,
    pub(super) autocommit: bool,
    /// BEGIN was given (READ ONLY if true) and the transaction is open.
    pub(super) transaction: Option<bool>,
    pub(super) variables: Vec<(String, Literal)>,
    pub(super) safe_updates: bool,
    pub(super) select_limit: u64,
    pub(super) max_join_size: u64,
    pub(super) statements: Vec<Statement>,
    pub(super) next_statement: u32,
}

/// A prepared statement, as it goes to the primary.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Statement {
    pub(super) id: u32,
    pub(super) text: String,
    /// The argument types last bound, which later executes may leave out.
    pub(super) types: Vec<(u8, bool)>,
    /// Arguments sent in parts for the next execute.
    pub(super) parts: Vec<Part>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Part {
    pub(super) param: u16,
    #[serde(with = "serde_bytes")]
    pub(super) data: Vec<u8>,
}

/// The primary's answer to a handoff.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum Taken {
    Yes,
    /// Why not: MySQL's error number and message.
    No {
        code: u16,
        message: String,
    },
}

/// What became of a session that was to be carried on.
pub(super) enum Carried {
    /// It was, and the connection has ended.
    Ended,
    /// The primary moved here meanwhile: the command runs again here.
    Here,
    /// It could not be, nothing was done: the error to answer.
    Not(MyError),
}

/// Carries `session` on to the primary that refused its command `packet`
/// (`refused`), and then the client's connection, until either side
/// ends, the node stops, or the view moves the primary. A primary that
/// cannot be reached (killed, say) is waited for as the view moves the
/// database on, up to `SETTLE_WITHIN`: to another node, the session goes
/// there; to this one, the command runs here.
pub(super) async fn carry_on<R, W>(
    session: &mut Session,
    refused: MyError,
    packet: &[u8],
    read: &mut R,
    write: &mut W,
    stop: &mut Stop,
) -> Carried
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Some((mut primary, database)) = refused.primary_elsewhere.as_deref().cloned() else {
        return Carried::Not(refused);
    };
    let not = |why: &str| MyError {
        message: format!(
            "{}; the session could not be carried to it: {why}",
            refused.message
        ),
        primary_elsewhere: None,
        ..refused.clone()
    };
    let Some(handoff) = session.handoff() else {
        return Carried::Not(not("a user variable's value cannot be carried"));
    };
    let handoff = postcard::to_allocvec(&handoff).expect("a handoff encodes");
    if handoff.len() > MAX_HANDOFF {
        return Carried::Not(not("its prepared statements are too large"));
    }
    let cluster = session.shared.cluster.clone();
    let Ok(db) = session.engine.database(&database) else {
        return Carried::Not(refused);
    };
    let settled_by = tokio::time::Instant::now() + SETTLE_WITHIN;
    let (stream, placed) = loop {
        let placed = cluster.placed();
        let why = match taken(&cluster, primary, &handoff).await {
            Ok(stream) => break (stream, placed),
            Err(Refusal::Answered(e)) => return Carried::Not(e),
            Err(Refusal::Unreachable(why)) => why,
        };
        let waiting = settled_by.saturating_duration_since(tokio::time::Instant::now());
        if waiting.is_zero() {
            return Carried::Not(not(&why));
        }
        cluster.placed_again(placed, waiting).await;
        if db.is_primary_here() {
            return Carried::Here;
        }
        primary = db.primary();
    };
    // Its transaction holds no rows here: what it read, it reads there.
    let _ = session.rollback().await;
    tracing::debug!(primary, database, "a MySQL session carried to the primary");
    let (mut from_primary, mut to_primary) = stream.into_split();
    let mut out = Out::default();
    out.begin();
    out.put(packet);
    out.end();
    if out.flush(&mut to_primary).await.is_err() {
        return Carried::Ended;
    }
    let moved = async {
        let mut placed = placed;
        while db.primary() == primary {
            if placed.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::io::copy_buf(read, &mut to_primary) => {}
        _ = tokio::io::copy(&mut from_primary, write) => {}
        () = &mut *stop => {}
        () = moved => {
            tracing::info!(primary, database, "the primary a MySQL session was carried to moved; closing the client's connection");
        }
    }
    Carried::Ended
}

/// Why a session was not taken.
enum Refusal {
    /// The primary answered why not.
    Answered(MyError),
    /// It could not be reached, or did not answer.
    Unreachable(String),
}

/// Opens a connection to node `primary` and hands it the session: the
/// connection, once the primary has taken it.
async fn taken(cluster: &Cluster, primary: u32, handoff: &[u8]) -> Result<TcpStream, Refusal> {
    let mut stream =
        (cluster.relay_to(primary, Relayed::Sql).await).map_err(Refusal::Unreachable)?;
    let answered = async {
        send(&mut stream, handoff).await?;
        let mut answer = Vec::new();
        receive(&mut stream, 4 << 10, &mut answer).await?;
        postcard::from_bytes::<Taken>(&answer).map_err(std::io::Error::other)
    };
    match tokio::time::timeout(ANSWER_WITHIN, answered).await {
        Ok(Ok(Taken::Yes)) => Ok(stream),
        Ok(Ok(Taken::No { code, message })) => {
            let state = if code == 1045 { "28000" } else { "HY000" };
            Err(Refusal::Answered(MyError::new(code, state, message)))
        }
        Ok(Err(e)) => Err(Refusal::Unreachable(e.to_string())),
        Err(_) => Err(Refusal::Unreachable("no answer within 5 s".into())),
    }
}

/// Reads the handoff a node sends before the client's packets.
pub(super) async fn handoff<R: AsyncRead + Unpin>(read: &mut R) -> std::io::Result<Handoff> {
    let mut bytes = Vec::new();
    receive(read, MAX_HANDOFF, &mut bytes).await?;
    postcard::from_bytes(&bytes).map_err(std::io::Error::other)
}

/// Answers a handoff.
pub(super) async fn answer<W: AsyncWrite + Unpin>(
    write: &mut W,
    taken: &Taken,
) -> std::io::Result<()> {
    send(
        write,
        &postcard::to_allocvec(taken).expect("an answer encodes"),
    )
    .await
}

/// Sends `bytes` as a little-endian `u32` length and the bytes.
async fn send<W: AsyncWrite + Unpin>(write: &mut W, bytes: &[u8]) -> std::io::Result<()> {
    let mut framed = Vec::with_capacity(4 + bytes.len());
    framed.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    framed.extend_from_slice(bytes);
    write.write_all(&framed).await?;
    write.flush().await
}

/// Receives what `send` sent, at most `max` bytes of it.
async fn receive<R: AsyncRead + Unpin>(
    read: &mut R,
    max: usize,
    bytes: &mut Vec<u8>,
) -> std::io::Result<()> {
    let len = read.read_u32_le().await? as usize;
    if len > max {
        return Err(std::io::Error::other(format!(
            "{len} bytes, more than the {max} taken"
        )));
    }
    bytes.resize(len, 0);
    read.read_exact(bytes).await?;
    Ok(())
}

/// The front end's part in connections carried here: each is served as
/// a session that logged in where the client connected.
pub(super) fn front(
    shared: Arc<super::session::Shared>,
    stopped: watch::Receiver<bool>,
) -> crate::cluster::Front {
    let workers = std::sync::Mutex::new(crate::api::serve::Workers::with_spare_cores(
        shared.engine.tc().clone(),
    ));
    crate::cluster::Front::new(move |stream, sent_on| {
        let (shared, stopped) = (Arc::clone(&shared), stopped.clone());
        let mut workers = workers.lock().unwrap_or_else(|e| e.into_inner());
        workers.spawn(stream, move |stream| {
            super::session::carried(stream, sent_on, shared, stopped)
        });
    })
}
