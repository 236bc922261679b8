//! The Redis protocol (port 6380): RESP2 and RESP3, pipelining, and the
//! commands of API.md, over tables in the connection's database.
//!
//! `AUTH <database> <api-key>` (or `HELLO 3 AUTH <database> <api-key>`) binds
//! a connection to one database; before it only `PING`, `HELLO`, `AUTH` and
//! `QUIT` work. The key is looked at again before every command: once it is
//! revoked, the connection's next command is refused.
//!
//! Every connection runs in a tracing span with its client id, and the
//! tenant and database once it has authenticated.
//!
//! - `frame`: parsing commands, writing replies.
//! - `cmd`: the command table, and what each command does, by group.
//! - `pipeline`: runs of pipelined reads and `SET`s, one request each.
//! - `store`: keys as rows; `locks`: the keys' locks.

mod cmd;
pub(crate) mod frame;
mod locks;
mod pipeline;
mod relay;
pub(crate) mod store;

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tracing::Instrument;

use std::ops::Range;

use self::frame::{FrameLimits, Out, Parsed, Parser};
use self::pipeline::{Command, Run, op_of};
use self::store::{Db, Store, StoreError};
use super::serve::{self, Limits};
use crate::cluster::Cluster;
use crate::node::keys::ApiKey;
use crate::tc::TcError;
use crate::tc::batch::{Batch, OperationError};

/// Most arguments in one command.
pub(crate) const MAX_ARGS: usize = 1024 * 1024;
/// Replies are sent once this many bytes are waiting, even mid-pipeline.
const FLUSH_AT: usize = 1 << 20;
/// How often the expiry index is looked at for keys that have expired.
const PURGE_EVERY: Duration = Duration::from_millis(100);
/// Most expired keys removed in one round.
const PURGE_BATCH: usize = 10_000;
/// How often every key table is scanned for expired keys the index does
/// not know (those given their expiry before the node restarted).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Serves RESP until `stopped`, then lets each connection finish the command
/// it is running.
pub(crate) async fn serve(
    listener: TcpListener,
    store: Arc<Store>,
    cluster: Cluster,
    limits: Limits,
    stopped: watch::Receiver<bool>,
) {
    tokio::spawn(purge(Arc::clone(&store), stopped.clone()));
    let watching = stopped.clone();
    let mut workers = serve::Workers::new(store.tc().clone());
    let gate = shoal_listen::accept(
        listener,
        limits.caps(),
        b"-ERR max number of clients reached\r\n",
        stopped,
        move |stream, _, permit| {
            let (store, stopped) = (Arc::clone(&store), watching.clone());
            let cluster = cluster.clone();
            workers.spawn(stream, move |stream| async move {
                connection(stream, store, cluster, limits, stopped).await;
                drop(permit);
            });
        },
    )
    .await;
    shoal_listen::drained(gate, serve::DRAIN).await;
}

/// Removes expired keys now and then, until the node stops.
async fn purge(store: Arc<Store>, mut stopped: watch::Receiver<bool>) {
    let mut every = tokio::time::interval(PURGE_EVERY);
    let mut sweep = tokio::time::interval(SWEEP_EVERY);
    loop {
        let sweeping = tokio::select! {
            _ = every.tick() => false,
            // The first tick is at once: keys that expired while the node was down.
            _ = sweep.tick() => true,
            _ = stopped.wait_for(|s| *s) => break,
        };
        // A full round means more are waiting: go on at once, for a while.
        for _ in 0..100 {
            let done = if sweeping {
                store.sweep_expired(PURGE_BATCH).await
            } else {
                store.purge_expired(PURGE_BATCH).await
            };
            if done < PURGE_BATCH {
                break;
            }
        }
    }
}

/// An authenticated connection: its key and its database. Only `AUTH`
/// makes one, and only a connection with one reaches a data command
/// (`cmd::Ctx`).
struct Session {
    key: Arc<ApiKey>,
    /// The key as presented, to check it again once it changes on the node.
    presented: Vec<u8>,
    db: Db,
}

/// What a command leaves the connection to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
}

/// One client connection.
struct Conn {
    store: Arc<Store>,
    session: Option<Session>,
    out: Out,
    batch: Batch,
    name: Option<Vec<u8>>,
    id: u64,
    /// Commands queued since `MULTI`.
    multi: Option<cmd::transactions::Multi>,
    /// Keys `WATCH`ed since the last `EXEC`, `DISCARD` or `UNWATCH`.
    watched: Vec<cmd::transactions::Watched>,
}

static NEXT_CLIENT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

async fn connection(
    stream: TcpStream,
    store: Arc<Store>,
    cluster: Cluster,
    limits: Limits,
    stopped: watch::Receiver<bool>,
) {
    let conn = Conn {
        batch: store.tc().batch(),
        store,
        session: None,
        out: Out::default(),
        name: None,
        id: NEXT_CLIENT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        multi: None,
        watched: Vec::new(),
    };
    // `access` records the tenant and database once the client authenticates.
    let span = tracing::debug_span!(
        target: "shoal::request",
        "redis connection",
        client = conn.id,
        tenant = tracing::field::Empty,
        database = tracing::field::Empty,
    );
    serve_connection(stream, conn, &cluster, limits, stopped)
        .instrument(span)
        .await;
}

/// Where to hand the connection on, once it has authenticated to a
/// database whose primary is another node.
fn relay_target(conn: &Conn, cluster: &Cluster) -> Option<relay::Target> {
    let session = conn.session.as_ref().filter(|_| conn.multi.is_none())?;
    let db = &session.db.db;
    // Handed on from this node, the database is served here until the
    // view has moved it (its writes are refused meanwhile).
    if db.is_primary_here() || db.is_handing_on() {
        return None;
    }
    let member = cluster.member(db.primary())?;
    Some(relay::Target {
        db: std::sync::Arc::clone(db),
        cluster: cluster.clone(),
        addr: member.resp_addr,
        primary: db.primary(),
        database: db.name.to_string(),
        key: session.presented.clone(),
        resp3: conn.out.resp3,
    })
}

async fn serve_connection(
    mut stream: TcpStream,
    mut conn: Conn,
    cluster: &Cluster,
    limits: Limits,
    mut stopped: watch::Receiver<bool>,
) {
    let mut parser = Parser::new(FrameLimits {
        max_args: MAX_ARGS,
        max_command_bytes: limits.max_request_bytes,
    });
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut need;
    // One timer for the connection's life, moved on only when it fires
    // early: cheaper than a timer per read. Until the client authenticates
    // it fires at the deadline to, too.
    let opened = tokio::time::Instant::now();
    let auth_due = opened + limits.head_timeout;
    let idle = tokio::time::sleep(limits.idle_timeout.min(limits.head_timeout));
    tokio::pin!(idle);
    let mut last_read = opened;
    loop {
        // Every whole command that has arrived, in order.
        let mut start = 0;
        loop {
            match parser.parse(&buf[start..]) {
                Ok(Parsed::Command { len }) => {
                    let run = {
                        let args: Vec<&[u8]> = parser.args(&buf[start..start + len]).collect();
                        // Runs are for commands answered at once: not for
                        // those a transaction queues.
                        let authenticated = conn.session.as_ref().filter(|_| conn.multi.is_none());
                        parser
                            .ranges()
                            .and(authenticated)
                            .and(op_of(&args))
                            .map(|op| op.run())
                    };
                    let mut ran = false;
                    // A run needs a command after this one.
                    if let Some(run) = run.filter(|_| start + len < buf.len()) {
                        let (commands, end) = collect_run(&mut parser, &buf, start, run);
                        if commands.len() > 1 {
                            conn.execute_run(run, &buf, &commands).await;
                            start = end;
                            ran = true;
                        } else {
                            // A run of one: parse it again, as any command.
                            let _ = parser.parse(&buf[start..]);
                        }
                    }
                    if !ran {
                        let args: Vec<&[u8]> = parser.args(&buf[start..start + len]).collect();
                        start += len;
                        if !args.is_empty() && conn.execute(&args).await == Flow::Close {
                            let _ = stream.write_all(&conn.out.buf).await;
                            return;
                        }
                    }
                    // Authenticated to a database another node is the
                    // primary of (or the view has just made it so): the
                    // rest of the connection goes to that node.
                    if let Some(target) = relay_target(&conn, cluster) {
                        if flush(&mut stream, &mut conn.out, limits).await {
                            relay::relay(stream, target, &buf[start..]).await;
                        }
                        return;
                    }
                    if conn.out.buf.len() >= FLUSH_AT
                        && !flush(&mut stream, &mut conn.out, limits).await
                    {
                        return;
                    }
                }
                Ok(Parsed::Incomplete { need: n }) => {
                    need = n.unwrap_or(0);
                    break;
                }
                Err(e) => {
                    conn.out.error("ERR", &e.to_string());
                    let _ = stream.write_all(&conn.out.buf).await;
                    return;
                }
            }
        }
        buf.drain(..start);
        // Hand back memory a large command took.
        if buf.is_empty() && buf.capacity() > 1 << 20 {
            buf = Vec::with_capacity(16 * 1024);
        }
        if !flush(&mut stream, &mut conn.out, limits).await || *stopped.borrow() {
            return;
        }
        // Room for what is coming, grown a step at a time: a length a client
        // announces is not memory it gets before it sends the bytes.
        buf.reserve(need.saturating_sub(buf.len()).clamp(16 * 1024, 1 << 20));
        let read = tokio::select! {
            read = stream.read_buf(&mut buf) => read,
            () = &mut idle => {
                let mut due = last_read + limits.idle_timeout;
                if conn.session.is_none() {
                    due = due.min(auth_due);
                }
                if tokio::time::Instant::now() >= due {
                    return;
                }
                idle.as_mut().reset(due);
                continue;
            }
            _ = stopped.wait_for(|s| *s) => return,
        };
        match read {
            Ok(n) if n > 0 => last_read = tokio::time::Instant::now(),
            // Closed or failed.
            _ => return,
        }
    }
}

/// The commands of kind `run` that follow one another in `buf` from
/// `start`, and where they end.
fn collect_run(parser: &mut Parser, buf: &[u8], start: usize, run: Run) -> (Vec<Command>, usize) {
    let mut commands: Vec<Command> = Vec::new();
    let mut at = start;
    while commands.len() < pipeline::MAX_RUN {
        let Ok(Parsed::Command { len }) = parser.parse(&buf[at..]) else {
            break;
        };
        let Some(ranges) = parser.ranges() else {
            break;
        };
        if ranges.len() > 3 {
            break;
        }
        let mut args: [&[u8]; 3] = [&[]; 3];
        for (arg, r) in args.iter_mut().zip(ranges) {
            *arg = &buf[at + r.start..at + r.end];
        }
        let Some(op) = op_of(&args[..ranges.len()]).filter(|op| op.run() == run) else {
            break;
        };
        let shift = |r: &Range<usize>| at + r.start..at + r.end;
        let key = shift(&ranges[1]);
        let arg = ranges.get(2).map_or(0..0, shift);
        // A key set twice in one run would be written twice in one request.
        if run == Run::Set
            && commands
                .iter()
                .any(|c| buf[c.key.clone()] == buf[key.clone()])
        {
            break;
        }
        commands.push(Command { op, key, arg });
        at += len;
    }
    (commands, at)
}

/// Sends the waiting replies; false when the client is gone or stuck.
async fn flush(stream: &mut TcpStream, out: &mut Out, limits: Limits) -> bool {
    if out.buf.is_empty() {
        return true;
    }
    let sent = tokio::time::timeout(limits.idle_timeout, stream.write_all(&out.buf)).await;
    out.buf.clear();
    if out.buf.capacity() > 4 * FLUSH_AT {
        out.buf = Vec::new();
    }
    matches!(sent, Ok(Ok(())))
}

/// The first word and text of the error that answers `e`.
fn error_reply(e: &StoreError) -> (&'static str, String) {
    let from_operation = |e: &OperationError| match e {
        OperationError::Quota(q) => (q.resp_prefix(), quota_text(q)),
        OperationError::OutOfDataMemory { .. } => ("OOM", e.to_string()),
        _ => ("ERR", e.to_string()),
    };
    match e {
        StoreError::Tc(TcError::Forbidden { .. }) => ("NOPERM", e.to_string()),
        StoreError::Tc(TcError::Quota(q)) => (q.resp_prefix(), quota_text(q)),
        StoreError::Tc(TcError::Operation { error, .. }) | StoreError::Operation(error) => {
            from_operation(error)
        }
        _ => ("ERR", e.to_string()),
    }
}

fn quota_text(q: &shoal_quota::QuotaError) -> String {
    match q.retry_after_ms() {
        Some(ms) => format!("{q} retry_after_ms={ms}"),
        None => q.to_string(),
    }
}
