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
//! - `relay`: commands of a database whose primary is another node of the
//!   group, sent there; reads are answered from this node's replica.
//! - `clients`: the node's client connections, as `CLIENT LIST` shows them.

mod clients;
mod cmd;
pub(crate) mod frame;
mod locks;
mod long_double;
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

use self::clients::{Clients, Registered};
use self::frame::{FrameLimits, Out, Parsed, Parser};
use self::pipeline::{Command, Run, op_of};
use self::relay::Upstream;
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

/// When this node began serving Redis clients (`INFO`'s uptime).
pub(crate) fn started() -> std::time::Instant {
    static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *STARTED.get_or_init(std::time::Instant::now)
}

/// Serves RESP until `stopped`, then lets each connection finish the command
/// it is running.
pub(crate) async fn serve(
    listener: TcpListener,
    store: Arc<Store>,
    cluster: Cluster,
    limits: Limits,
    stopped: watch::Receiver<bool>,
) {
    started();
    tokio::spawn(purge(Arc::clone(&store), stopped.clone()));
    let clients = Arc::new(Clients::default());
    // Connections other nodes of the group relay here, for this node is
    // their database's primary: served as any client's, past the caps
    // (the relaying node holds its clients to them).
    let relayed = {
        let workers = std::sync::Mutex::new(serve::Workers::new(store.tc().clone()));
        let (store, cluster, stopped) = (Arc::clone(&store), cluster.clone(), stopped.clone());
        let clients = Arc::clone(&clients);
        crate::cluster::Front::new(move |stream, sent_on| {
            let (store, cluster, stopped) = (Arc::clone(&store), cluster.clone(), stopped.clone());
            let clients = Arc::clone(&clients);
            let mut workers = workers.lock().unwrap_or_else(|e| e.into_inner());
            workers.spawn(stream, move |stream| async move {
                let shared = Shared {
                    store,
                    cluster,
                    clients,
                };
                connection(stream, shared, limits, stopped, Some(sent_on)).await;
            });
        })
    };
    cluster.serve_relayed(crate::cluster::Relayed::Redis, relayed);
    let watching = stopped.clone();
    let mut workers = serve::Workers::new(store.tc().clone());
    let gate = shoal_listen::accept(
        listener,
        limits.caps(),
        b"-ERR max number of clients reached\r\n",
        stopped,
        move |stream, _, permit| {
            let stopped = watching.clone();
            let shared = Shared {
                store: Arc::clone(&store),
                cluster: cluster.clone(),
                clients: Arc::clone(&clients),
            };
            workers.spawn(stream, move |stream| async move {
                connection(stream, shared, limits, stopped, None).await;
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
        if sweeping {
            // Rows of deleted hashes a stop left behind.
            store.drain_trash(PURGE_BATCH).await;
        }
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
    /// Relayed here by another node of the group, for this node is its
    /// database's primary: never sent on again.
    relayed: bool,
    cluster: Cluster,
    clients: Arc<Clients>,
    /// Its place among the node's clients (not for a connection another
    /// node relays here: that node lists its client).
    client: Option<Registered>,
}

/// What every connection of the node shares.
struct Shared {
    store: Arc<Store>,
    cluster: Cluster,
    clients: Arc<Clients>,
}

static NEXT_CLIENT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

async fn connection(
    stream: TcpStream,
    shared: Shared,
    limits: Limits,
    stopped: watch::Receiver<bool>,
    relayed: Option<Vec<u8>>,
) {
    let Shared {
        store,
        cluster,
        clients,
    } = shared;
    let id = NEXT_CLIENT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let client = relayed
        .is_none()
        .then(|| clients.register(id, stream.peer_addr().ok(), stream.local_addr().ok()));
    let conn = Conn {
        batch: store.tc().batch(),
        store,
        session: None,
        out: Out::default(),
        name: None,
        id,
        multi: None,
        watched: Vec::new(),
        relayed: relayed.is_some(),
        cluster: cluster.clone(),
        clients,
        client,
    };
    // `access` records the tenant and database once the client authenticates.
    let span = tracing::debug_span!(
        target: "shoal::request",
        "redis connection",
        client = conn.id,
        relayed = conn.relayed,
        tenant = tracing::field::Empty,
        database = tracing::field::Empty,
    );
    let sent_on = relayed.unwrap_or_default();
    serve_connection(stream, conn, &cluster, limits, stopped, sent_on)
        .instrument(span)
        .await;
}

/// Where a command runs.
enum Route {
    /// On this node.
    Here,
    /// On the database's primary, another node.
    Primary(Arc<crate::tc::Database>, u32),
    /// Nowhere yet: its database's primary is being handed on, or (for a
    /// connection relayed here) has not yet come here.
    Wait,
    /// Nowhere: `AUTH` or `HELLO` while the primary holds a transaction of
    /// the connection, which they would end.
    Refused,
    /// On this node, from its replica of the database: a command that
    /// only reads. (A value only the primary reads whole is read there.)
    Replica,
}

impl Conn {
    /// Where the command named `name` runs. Until `settled` the command may
    /// wait for its database's primary to settle. A command that only reads
    /// is answered from this node's replica if `replica` (the node serves).
    fn route(
        &self,
        name: &[u8],
        upstream: Option<&Upstream>,
        settling: bool,
        replica: bool,
    ) -> Route {
        // A transaction under way on the primary takes every command.
        if let Some(up) = upstream.filter(|up| up.in_transaction()) {
            if cmd::changes_session(name) {
                return Route::Refused;
            }
            return Route::Primary(Arc::clone(&up.db), up.primary);
        }
        let Some(session) = self.session.as_ref().filter(|_| self.multi.is_none()) else {
            return Route::Here;
        };
        let db = &session.db.db;
        if db.is_primary_here() || !cmd::runs_at_primary(name) {
            return Route::Here;
        }
        // Every acknowledged write is on every replica in the view.
        if replica && cmd::only_reads(name) {
            return Route::Replica;
        }
        // Handed on from this node, the database's commands wait for the
        // view that moves it; one relayed here waits for this node to know
        // it is the primary (it is never sent on again). Then they run here,
        // and a write is refused if it is still not the primary.
        if db.is_handing_on() || self.relayed {
            return if settling { Route::Wait } else { Route::Here };
        }
        Route::Primary(Arc::clone(db), db.primary())
    }
}

/// The longest a command waits for its database's primary to settle.
const SETTLE_WITHIN: Duration = Duration::from_secs(2);

/// What a connection waits for between rounds of commands.
enum Event {
    Read(std::io::Result<usize>),
    Pumped(Result<(), relay::Broken>),
    Placed,
    Idle,
    Stopped,
    Killed,
}

async fn serve_connection(
    mut stream: TcpStream,
    mut conn: Conn,
    cluster: &Cluster,
    limits: Limits,
    mut stopped: watch::Receiver<bool>,
    mut buf: Vec<u8>,
) {
    let mut parser = Parser::new(FrameLimits {
        max_args: MAX_ARGS,
        max_command_bytes: limits.max_request_bytes,
    });
    buf.reserve(16 * 1024);
    let mut need = 0;
    // One timer for the connection's life, moved on only when it fires
    // early: cheaper than a timer per read. Until the client authenticates
    // it fires at the deadline to, too.
    let opened = tokio::time::Instant::now();
    let auth_due = opened + limits.head_timeout;
    let idle = tokio::time::sleep(limits.idle_timeout.min(limits.head_timeout));
    tokio::pin!(idle);
    let mut last_read = opened;
    // The connection to the database's primary while that is another node,
    // and until when the command at hand may wait for it to settle.
    let mut upstream: Option<Upstream> = None;
    let mut settle_until: Option<std::time::Instant> = None;
    // Until when the command at hand may run again, refused while its
    // primary moved (set at its first refusal).
    let mut retry_until: Option<std::time::Instant> = None;
    let mut placed = cluster.placed();
    loop {
        // Every whole command that has arrived, in order.
        let mut start = 0;
        // Commands before this offset go to the primary: reads this node's
        // replica could not answer whole.
        let mut primary_before = 0;
        let serving = cluster.serving();
        while upstream
            .as_ref()
            .is_none_or(|up| up.sending() < relay::MAX_SENDING)
        {
            match parser.parse(&buf[start..]) {
                Ok(Parsed::Command { len }) => {
                    let settling = settle_until.is_none_or(|t| std::time::Instant::now() < t);
                    let route = {
                        let name = parser
                            .args(&buf[start..start + len])
                            .next()
                            .unwrap_or_default();
                        let replica = serving && start >= primary_before;
                        conn.route(name, upstream.as_ref(), settling, replica)
                    };
                    match route {
                        Route::Wait => {
                            let until = *settle_until
                                .get_or_insert_with(|| std::time::Instant::now() + SETTLE_WITHIN);
                            if !flush(&mut stream, &mut conn.out, limits).await {
                                return;
                            }
                            let within = until.saturating_duration_since(std::time::Instant::now());
                            cluster.placed_again(placed.clone(), within).await;
                            placed.borrow_and_update();
                            // The same command again, routed anew.
                            continue;
                        }
                        Route::Refused => {
                            conn.out.error(
                                "ERR",
                                "AUTH and HELLO are not taken while MULTI or WATCH is under way on the database's primary: EXEC, DISCARD or UNWATCH first",
                            );
                            start += len;
                            continue;
                        }
                        Route::Primary(db, primary) => {
                            let until = *settle_until
                                .get_or_insert_with(|| std::time::Instant::now() + SETTLE_WITHIN);
                            let command = &buf[start..start + len];
                            let name = parser.args(command).next().unwrap_or_default();
                            let to = (&db, primary, until);
                            match send_on(&mut conn, &mut upstream, cluster, to, (name, command))
                                .await
                            {
                                Sent::Queued | Sent::Refused => {
                                    start += len;
                                    settle_until = None;
                                }
                                // The same command again, routed anew.
                                Sent::Again => {}
                                Sent::Close => {
                                    let _ = stream.write_all(&conn.out.buf).await;
                                    return;
                                }
                            }
                            continue;
                        }
                        Route::Here | Route::Replica => settle_until = None,
                    }
                    let from_replica = matches!(route, Route::Replica);
                    let command_start = start;
                    // Replies to the commands sent on come first.
                    if let Some(up) = upstream.as_mut().filter(|up| up.awaiting() > 0) {
                        let (db, primary) = (Arc::clone(&up.db), up.primary);
                        let finished = tokio::select! {
                            finished = up.finish(&mut conn.out) => finished,
                            () = cluster.moved(std::slice::from_ref(&db), primary) => Ok(()),
                        };
                        let go_on = match finished {
                            Ok(()) if up.awaiting() == 0 => true,
                            Ok(()) => {
                                let up = upstream.take().expect("an upstream");
                                up.leave_moved(&mut conn.out).await
                            }
                            Err(broken) => lose(&mut upstream, &mut conn.out, &broken),
                        };
                        if !go_on {
                            let _ = stream.write_all(&conn.out.buf).await;
                            return;
                        }
                    }
                    let replies_start = conn.out.buf.len();
                    let (run, exec) = {
                        let args: Vec<&[u8]> = parser.args(&buf[start..start + len]).collect();
                        // Runs are for commands answered at once: not for
                        // those a transaction queues.
                        let authenticated = conn.session.as_ref().filter(|_| conn.multi.is_none());
                        let run = (parser.ranges())
                            .and(authenticated)
                            .and(op_of(&args))
                            .map(|op| op.run());
                        let exec = args
                            .first()
                            .is_some_and(|n| n.eq_ignore_ascii_case(b"EXEC"));
                        (run, exec)
                    };
                    // Commands refused before anything was applied, while
                    // their database's primary moves, may run again: not
                    // those of a transaction, nor once they stop waiting.
                    let may_retry = conn.multi.is_none()
                        && !exec
                        && retry_until.is_none_or(|t| std::time::Instant::now() < t);
                    let mut ran = false;
                    // A run needs a command after this one.
                    if let Some(run) = run.filter(|_| start + len < buf.len()) {
                        let (commands, words, end) = collect_run(&mut parser, &buf, start, run);
                        if commands.len() > 1 {
                            conn.execute_run(run, &buf, &commands, &words).await;
                            start = end;
                            ran = true;
                        } else {
                            // A run of one: parse it again, as any command.
                            let _ = parser.parse(&buf[start..]);
                        }
                    }
                    if !ran {
                        let args: Vec<&[u8]> = parser.args(&buf[start..start + len]).collect();
                        let reconnects =
                            args.first().is_some_and(|name| cmd::changes_session(name));
                        start += len;
                        if !args.is_empty() && conn.execute(&args).await == Flow::Close {
                            let _ = stream.write_all(&conn.out.buf).await;
                            return;
                        }
                        // `AUTH` and `HELLO` may change the database or the
                        // protocol: the primary's connection is opened anew.
                        if reconnects {
                            upstream = None;
                        }
                    }
                    // A read that met a value only the primary reads whole
                    // goes there, with the commands run with it, unanswered.
                    let not_whole = conn.session.as_mut().map(|s| &mut s.db.not_whole_here);
                    if let Some(not_whole) = not_whole
                        && std::mem::take(not_whole)
                        && from_replica
                    {
                        conn.out.buf.truncate(replies_start);
                        primary_before = start;
                        start = command_start;
                        continue;
                    }
                    // Every one refused so (TRYAGAIN: nothing of them
                    // applied) — the primary moved between routing and
                    // running them: routed again once the view has moved
                    // on, as commands that wait for a moving primary, for
                    // as long as those wait.
                    if may_retry && (conn.out.buf.get(replies_start..)).is_some_and(only_tryagain) {
                        conn.out.buf.truncate(replies_start);
                        start = command_start;
                        let until = *retry_until
                            .get_or_insert_with(|| std::time::Instant::now() + SETTLE_WITHIN);
                        let within = until.saturating_duration_since(std::time::Instant::now());
                        cluster.placed_again(placed.clone(), within).await;
                        placed.borrow_and_update();
                        continue;
                    }
                    retry_until = None;
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
        // Commands for the primary go at once, as far as its socket takes
        // them; the rest when it is ready.
        if let Some(up) = upstream.as_mut()
            && let Err(broken) = up.send_now()
            && !lose(&mut upstream, &mut conn.out, &broken)
        {
            let _ = stream.write_all(&conn.out.buf).await;
            return;
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
        let backlogged = upstream
            .as_ref()
            .is_some_and(|up| up.sending() >= relay::MAX_SENDING);
        let relaying = upstream.is_some();
        let event = tokio::select! {
            read = stream.read_buf(&mut buf), if !backlogged => Event::Read(read),
            pumped = pump(upstream.as_mut(), &mut conn.out) => Event::Pumped(pumped),
            _ = placed.changed(), if relaying => Event::Placed,
            () = &mut idle => Event::Idle,
            _ = stopped.wait_for(|s| *s) => Event::Stopped,
            () = killed(conn.client.as_ref()) => Event::Killed,
        };
        match event {
            Event::Read(Ok(n)) if n > 0 => last_read = tokio::time::Instant::now(),
            // Closed or failed, or ended by `CLIENT KILL`.
            Event::Read(_) | Event::Stopped | Event::Killed => return,
            Event::Pumped(Ok(())) => {}
            Event::Pumped(Err(broken)) => {
                if !lose(&mut upstream, &mut conn.out, &broken) {
                    let _ = stream.write_all(&conn.out.buf).await;
                    return;
                }
            }
            Event::Placed => {
                if let Some(up) = upstream.take_if(|up| up.moved())
                    && !up.leave_moved(&mut conn.out).await
                {
                    let _ = stream.write_all(&conn.out.buf).await;
                    return;
                }
            }
            Event::Idle => {
                // Waiting for the primary's replies is not idle.
                let mut due = last_read + limits.idle_timeout;
                if conn.session.is_none() {
                    due = due.min(auth_due);
                }
                let busy = upstream.as_ref().is_some_and(|up| up.awaiting() > 0);
                if tokio::time::Instant::now() >= due && !busy {
                    return;
                }
                let due = if busy {
                    tokio::time::Instant::now() + limits.idle_timeout
                } else {
                    due
                };
                idle.as_mut().reset(due);
            }
        }
    }
}

/// Until `CLIENT KILL` ends the connection; never, for one not listed.
async fn killed(client: Option<&Registered>) {
    match client {
        Some(registered) => registered.client.killed().await,
        None => std::future::pending().await,
    }
}

/// One step of `upstream`'s pumping; never, without one.
async fn pump(upstream: Option<&mut Upstream>, out: &mut Out) -> Result<(), relay::Broken> {
    match upstream {
        Some(up) => up.pump(out).await,
        None => std::future::pending().await,
    }
}

/// Lets go of an upstream whose connection broke: the commands it had not
/// answered are answered `TRYAGAIN`. Whether the client's connection can
/// go on (not if a transaction was under way there).
fn lose(upstream: &mut Option<Upstream>, out: &mut Out, broken: &relay::Broken) -> bool {
    let Some(mut up) = upstream.take() else {
        return true;
    };
    if up.awaiting() > 0 || up.in_transaction() {
        tracing::info!(primary = up.primary, reason = %broken.0, "the connection to the database's primary broke");
    }
    up.give_up(out, "the connection to it broke");
    !up.in_transaction()
}

/// What became of a command for the database's primary.
enum Sent {
    /// Queued to be sent on.
    Queued,
    /// Answered here: the primary refused the connection.
    Refused,
    /// Not sent: route it again (the primary could not be reached, and
    /// the view has moved it, or there is still time to wait for that).
    Again,
    /// The connection ends: a transaction under way was lost.
    Close,
}

/// Queues the command `name` (`bytes` on the wire) for node `primary`, the
/// primary of `db`, opening the connection to it first; a primary that
/// cannot be reached is waited for (the view moving it) until `until`.
async fn send_on(
    conn: &mut Conn,
    upstream: &mut Option<Upstream>,
    cluster: &Cluster,
    (db, primary, until): (&Arc<crate::tc::Database>, u32, std::time::Instant),
    (name, bytes): (&[u8], &[u8]),
) -> Sent {
    // Another node than the one the connection goes to: the view moved.
    if let Some(up) = upstream.take_if(|up| up.primary != primary || !Arc::ptr_eq(&up.db, db))
        && !up.leave_moved(&mut conn.out).await
    {
        return Sent::Close;
    }
    if upstream.is_none() {
        let Some(session) = conn.session.as_ref() else {
            return Sent::Refused;
        };
        let target = relay::Target {
            cluster,
            db,
            primary,
            key: &session.presented,
            resp3: conn.out.resp3,
        };
        match Upstream::open(target).await {
            Ok(up) => *upstream = Some(up),
            // Nothing reached it (a node killed refuses connections at
            // once): again, once the view has moved the primary on.
            Err((_, true)) if std::time::Instant::now() < until => {
                let within = until.saturating_duration_since(std::time::Instant::now());
                let moved = cluster.moved(std::slice::from_ref(db), primary);
                let _ = tokio::time::timeout(within, moved).await;
                return Sent::Again;
            }
            Err((refusal, unreachable)) => {
                let (word, message) = match unreachable {
                    true => ("TRYAGAIN", refusal.as_str()),
                    false => refusal.split_once(' ').unwrap_or(("ERR", &refusal)),
                };
                conn.out.error(word, message);
                return Sent::Refused;
            }
        }
    }
    upstream.as_mut().expect("opened").queue(name, bytes);
    Sent::Queued
}

/// The commands of kind `run` that follow one another in `buf` from
/// `start`, and where they end.
fn collect_run(
    parser: &mut Parser,
    buf: &[u8],
    start: usize,
    run: Run,
) -> (Vec<Command>, Vec<Range<usize>>, usize) {
    let mut commands: Vec<Command> = Vec::new();
    let mut words: Vec<Range<usize>> = Vec::new();
    let mut args: Vec<&[u8]> = Vec::new();
    let mut at = start;
    while commands.len() < pipeline::MAX_RUN {
        let Ok(Parsed::Command { len }) = parser.parse(&buf[at..]) else {
            break;
        };
        let Some(ranges) = parser.ranges() else {
            break;
        };
        if words.len() + ranges.len() > pipeline::MAX_RUN_WORDS {
            break;
        }
        args.clear();
        args.extend(ranges.iter().map(|r| &buf[at + r.start..at + r.end]));
        let Some(op) = op_of(&args).filter(|op| op.run() == run) else {
            break;
        };
        // A key set twice in one run of SETs would be written twice in
        // one request; a run of HSETs is of one hash.
        let key = &args[1];
        if run == Run::Set && (commands.iter()).any(|c| buf[words[c.words.start].clone()] == **key)
        {
            break;
        }
        if run == Run::HSet
            && let Some(first) = commands.first()
            && buf[words[first.words.start].clone()] != **key
        {
            break;
        }
        let first = words.len();
        words.extend(ranges[1..].iter().map(|r| at + r.start..at + r.end));
        commands.push(Command {
            op,
            words: first..words.len(),
        });
        at += len;
    }
    (commands, words, at)
}

/// Sends the waiting replies; false when the client is gone or stuck.
async fn flush(stream: &mut TcpStream, out: &mut Out, limits: Limits) -> bool {
    if out.buf.is_empty() {
        return true;
    }
    // What the socket takes at once needs no timer.
    let mut written = 0;
    while written < out.buf.len() {
        match stream.try_write(&out.buf[written..]) {
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(_) => return false,
        }
    }
    let rest = &out.buf[written..];
    let sent = match rest.is_empty() {
        true => Ok(Ok(())),
        false => tokio::time::timeout(limits.idle_timeout, stream.write_all(rest)).await,
    };
    out.buf.clear();
    if out.buf.capacity() > 4 * FLUSH_AT {
        out.buf = Vec::new();
    }
    matches!(sent, Ok(Ok(())))
}

/// Whether `replies` are whole replies, at least one, every one
/// `-TRYAGAIN …`.
fn only_tryagain(mut replies: &[u8]) -> bool {
    if replies.is_empty() {
        return false;
    }
    while !replies.is_empty() {
        match frame::reply_len(replies) {
            Ok(Some(len)) if replies.starts_with(b"-TRYAGAIN ") => replies = &replies[len..],
            _ => return false,
        }
    }
    true
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
        // Refused before anything was applied, while the database's
        // primary moves: the client retries, as after a failover.
        StoreError::NotWholeHere
        | StoreError::Tc(TcError::NotPrimary { .. } | TcError::NotServing(_)) => {
            ("TRYAGAIN", e.to_string())
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

#[cfg(test)]
mod tests {
    use super::only_tryagain;

    #[test]
    fn only_replies_that_are_all_tryagain_run_again() {
        assert!(only_tryagain(b"-TRYAGAIN not the primary\r\n"));
        assert!(only_tryagain(
            b"-TRYAGAIN not the primary\r\n-TRYAGAIN not the primary\r\n"
        ));
        for not in [
            &b""[..],
            b"+OK\r\n",
            b"-TRYAGAIN a\r\n+OK\r\n",
            b"+OK\r\n-TRYAGAIN a\r\n",
            b"-ERR a\r\n",
            b"$10\r\n-TRYAGAIN \r\n",
            b"-TRYAGAIN a",
        ] {
            assert!(!only_tryagain(not), "{}", String::from_utf8_lossy(not));
        }
    }
}
