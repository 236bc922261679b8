//! One client connection: the handshake and login with an API key, then
//! its commands one at a time — text queries, prepared statements, and
//! the small commands clients send (`USE`, ping, statistics).
//!
//! The login must arrive within the front end's `head_timeout`, and be at
//! most `MAX_LOGIN_BYTES`; after it a connection idle for `idle_timeout`
//! is closed, and a packet longer than `max_request_bytes` is answered
//! error 1153 and the connection closed. The key is looked at before
//! every command: once it is revoked or expires, the connection's next
//! command is refused and the connection closed.

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument;

use super::error::MyError;
use super::prepared::{self, Kept};
use super::processes::{Command, Process, Processes, Registered};
use super::proto::{self, Out, ReadError, cap, com};
use super::query::{self, Reply};
use super::relay::{self, Carried, Handoff};
use super::status::Counter;
use super::text;
use super::transaction::Txn;
use super::value::{self, Lit};
use super::variables::UserVariables;
use crate::api::serve::Limits;
use crate::api::{AccessError, access};
use crate::node::Engine;
use crate::node::keys::{ApiKey, AuthError};
use crate::tc::batch::Batch;
use crate::tc::{Database, Grant, Table};

/// Largest login packet read.
const MAX_LOGIN_BYTES: usize = 64 << 10;
/// Most prepared statements one connection holds open.
pub(crate) const MAX_STATEMENTS: usize = 1024;
/// Replies are sent once this many bytes wait, even mid-result.
const FLUSH_AT: usize = 1 << 20;

/// What every connection of the front end shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) engine: Engine,
    /// The port the front end listens on (`@@port`).
    pub(crate) port: u16,
    pub(crate) limits: Limits,
    pub(crate) lock_wait_timeout: Duration,
    /// How long a transaction that holds rows may wait for its client.
    pub(crate) transaction_inactive_timeout: Duration,
    /// Where changes of schema are made.
    pub(crate) schema: super::ddl::Schema,
    /// The node's group: where sessions are carried to their primary.
    pub(crate) cluster: crate::cluster::Cluster,
    /// The logged-in connections, for `SHOW PROCESSLIST` and `KILL`.
    pub(crate) processes: Arc<Processes>,
}

static NEXT_CONNECTION: AtomicU32 = AtomicU32::new(1);

/// A prepared statement: its tokens and its `?`s, and its plan if it
/// keeps one.
#[derive(Debug)]
struct Prepared {
    /// As the client sent it.
    text: Box<str>,
    tokens: Vec<sqlparser::tokenizer::Token>,
    params: usize,
    kept: Option<Kept>,
    /// The argument types last bound (type, unsigned).
    types: Vec<(u8, bool)>,
    /// Arguments sent in parts (COM_STMT_SEND_LONG_DATA), by position.
    long_data: HashMap<u16, Vec<u8>>,
}

/// A logged-in connection's state.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) engine: Engine,
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: u32,
    /// The key's prefix: the user name the client logged in with.
    pub(crate) user: String,
    key: Arc<ApiKey>,
    /// The database chosen (`USE`, or at connect).
    pub(crate) database: Option<String>,
    /// The first AUTO_INCREMENT value the last INSERT made (`LAST_INSERT_ID()`).
    pub(crate) last_insert_id: u64,
    /// `ROW_COUNT()`: the rows the last statement changed (matched, with
    /// `CLIENT_FOUND_ROWS`); -1 after a result set or an error.
    pub(crate) row_count: i64,
    /// `FOUND_ROWS()`: the rows of the last result set.
    pub(crate) found_rows: u64,
    /// `@@autocommit`.
    pub(crate) autocommit: bool,
    /// The transaction, if one is open.
    pub(crate) txn: Txn,
    /// `@name`s set by `SET @name = …`.
    pub(crate) user_variables: UserVariables,
    /// `sql_safe_updates`, `sql_select_limit`, `max_join_size`.
    pub(crate) safety: Safety,
    /// The instant the running statement read (`NOW()`), if it read one:
    /// its writes give it to a `DEFAULT CURRENT_TIMESTAMP` column too.
    pub(crate) now: Option<i64>,
    capabilities: u32,
    statements: HashMap<u32, Prepared>,
    next_statement: u32,
    /// Carried here from another node of the group: never carried on.
    carried: bool,
    /// The connection as `SHOW PROCESSLIST` shows it and `KILL` ends it.
    pub(crate) process: Registered,
    /// The last key lookup's batch, emptied, for the next one.
    pub(crate) spare_batch: Option<Batch>,
    /// The column definitions the last execute answered, encoded.
    sent_columns: proto::SentColumns,
}

/// The settings that hold a session's statements back, as `mysql
/// --safe-updates` sets them: each off (at its largest) by default.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Safety {
    /// An UPDATE or DELETE must name its rows by a key or an index's
    /// range, or give a LIMIT (1175).
    pub(crate) safe_updates: bool,
    /// The LIMIT of a SELECT that gives none.
    pub(crate) select_limit: u64,
    /// Most rows a statement's scan may examine (1104).
    pub(crate) max_join_size: u64,
}

impl Default for Safety {
    fn default() -> Safety {
        Safety {
            safe_updates: false,
            select_limit: u64::MAX,
            max_join_size: u64::MAX,
        }
    }
}

impl Session {
    /// The instant of the running statement: the one its `NOW()` read, or
    /// else the clock's now, kept for the rest of the statement — so that
    /// every row it writes, and every default of `CURRENT_TIMESTAMP`,
    /// reads the same.
    pub(crate) fn instant(&mut self) -> i64 {
        *self.now.get_or_insert_with(crate::types::value::now_micros)
    }

    /// Whether the client asked UPDATE to answer the rows it matched
    /// rather than those it changed (`CLIENT_FOUND_ROWS`).
    pub(crate) fn found_rows(&self) -> bool {
        self.capabilities & cap::FOUND_ROWS != 0
    }

    /// The key, if it still works.
    pub(crate) fn key(&self) -> Result<&Arc<ApiKey>, MyError> {
        if !self.key.is_live() {
            return Err(revoked());
        }
        Ok(&self.key)
    }

    /// The key's grant on database `db`.
    pub(crate) fn grant(&self, db: &str) -> Result<Grant, MyError> {
        let key = self.key()?;
        access(&self.engine, key, db)
            .map(|(_, grant)| grant)
            .map_err(|e| self.refused(e, db))
    }

    /// The key's grant on database `db`, found already.
    pub(crate) fn grant_on(&self, db: &Database) -> Result<Grant, MyError> {
        crate::api::grant_on(&self.key, db).map_err(|e| self.refused(e, db.name.as_str()))
    }

    /// Notes what the next `ROW_COUNT()` and `FOUND_ROWS()` answer, as a
    /// statement's reply goes out.
    fn counted(&mut self, reply: &Result<Reply, MyError>) {
        match reply {
            Ok(Reply::Done { affected, .. }) => {
                self.row_count = i64::try_from(*affected).unwrap_or(i64::MAX);
            }
            Ok(Reply::Rows { rows, .. }) => {
                self.row_count = -1;
                self.found_rows = rows.len() as u64;
            }
            Err(_) => self.row_count = -1,
        }
    }

    fn refused(&self, e: AccessError, db: &str) -> MyError {
        match e {
            AccessError::NotGranted(_) => MyError::denied_database(&self.user, db),
            AccessError::NoSuchDatabase(_) => MyError::unknown_database(db),
            AccessError::Unauthenticated(_) => revoked(),
        }
    }

    /// The databases the key is granted that exist, by name.
    pub(crate) fn granted_databases(&self) -> Result<Vec<String>, MyError> {
        let mut names: Vec<String> = (self.key()?.def().grants.iter())
            .map(|g| g.database.to_string())
            .filter(|d| self.engine.database(d).is_ok())
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Table `name` of database `db` (or the session's), and the key's
    /// grant on that database.
    pub(crate) fn table(
        &self,
        db: Option<&str>,
        name: &str,
    ) -> Result<(Arc<Table>, Grant), MyError> {
        let db = match db {
            Some(db) => db.to_owned(),
            None => self.database.clone().ok_or_else(MyError::no_database)?,
        };
        let grant = self.grant(&db)?;
        let table = (self.engine.table(&db, name)).map_err(|_| MyError::no_table(&db, name))?;
        Ok((table, grant))
    }

    /// Whether a statement refused with `e` is carried on to the primary
    /// of its database: another node is, and nothing of the session
    /// would be left behind.
    pub(crate) fn may_carry(&self, e: &MyError) -> bool {
        e.primary_elsewhere.is_some() && !self.carried && self.transaction_moves()
    }

    /// The session's state, as it is carried to another node; `None` if
    /// some of it cannot be.
    pub(super) fn handoff(&self) -> Option<Handoff> {
        let variables = self.user_variables.export()?;
        let mut statements: Vec<relay::Statement> = (self.statements.iter())
            .map(|(&id, p)| relay::Statement {
                id,
                text: p.text.to_string(),
                types: p.types.clone(),
                parts: (p.long_data.iter())
                    .map(|(&param, data)| relay::Part {
                        param,
                        data: data.clone(),
                    })
                    .collect(),
            })
            .collect();
        statements.sort_by_key(|s| s.id);
        Some(Handoff {
            connection: self.id,
            user: self.user.clone(),
            key_hash: *self.key.hash(),
            database: self.database.clone(),
            capabilities: self.capabilities,
            last_insert_id: self.last_insert_id,
            row_count: self.row_count,
            found_rows: self.found_rows,
            autocommit: self.autocommit,
            transaction: self.explicit_transaction(),
            variables,
            safe_updates: self.safety.safe_updates,
            select_limit: self.safety.select_limit,
            max_join_size: self.safety.max_join_size,
            statements,
            next_statement: self.next_statement,
        })
    }

    /// The session another node carried here, as it was there: its key
    /// checked again here, its statements prepared again.
    fn resume(shared: &Arc<Shared>, h: Handoff) -> Result<Session, MyError> {
        let key = (shared.engine.api_keys())
            .carried_sql(&h.user, &h.key_hash)
            .map_err(|_| revoked())?;
        tracing::Span::current().record("tenant", key.tenant().as_str());
        if h.statements.len() > MAX_STATEMENTS {
            return Err(MyError::new(1461, "42000", "too many prepared statements"));
        }
        let process = Process::unlisted(h.connection, key.prefix(), key.tenant());
        let mut session = Session {
            engine: shared.engine.clone(),
            shared: Arc::clone(shared),
            id: h.connection,
            user: h.user,
            key,
            database: None,
            last_insert_id: h.last_insert_id,
            row_count: h.row_count,
            found_rows: h.found_rows,
            autocommit: h.autocommit,
            txn: Txn::default(),
            user_variables: UserVariables::import(h.variables)?,
            safety: Safety {
                safe_updates: h.safe_updates,
                select_limit: h.select_limit,
                max_join_size: h.max_join_size,
            },
            now: None,
            capabilities: h.capabilities & cap::SERVER,
            statements: HashMap::new(),
            next_statement: h.next_statement.max(1),
            carried: true,
            process,
            spare_batch: None,
            sent_columns: proto::SentColumns::default(),
        };
        if let Some(db) = &h.database {
            session.use_database(db)?;
        }
        if let Some(read_only) = h.transaction {
            session.resume_transaction(read_only);
        }
        for s in h.statements {
            let tokens = query::tokenize(&s.text)?;
            let params = query::placeholders(&tokens);
            let kept = session.keep(&tokens);
            let long_data: HashMap<u16, Vec<u8>> =
                s.parts.into_iter().map(|p| (p.param, p.data)).collect();
            let held: usize = long_data.values().map(Vec::len).sum();
            if s.types.len() > params || held > shared.limits.max_request_bytes {
                return Err(MyError::bad_arguments("a carried statement is malformed"));
            }
            let prepared = Prepared {
                text: s.text.into(),
                tokens,
                params,
                kept,
                types: s.types,
                long_data,
            };
            session.statements.insert(s.id, prepared);
        }
        Ok(session)
    }

    /// The command `packet` was answered: if it executed a prepared
    /// statement, the arguments sent in parts for it are gone.
    fn executed(&mut self, packet: &[u8]) {
        if let [com::STMT_EXECUTE, a, b, c, d, ..] = *packet
            && let Some(p) = self.statements.get_mut(&u32::from_le_bytes([a, b, c, d]))
        {
            p.long_data.clear();
        }
    }

    /// Makes `db` the session's database, if the key is granted it.
    pub(crate) fn use_database(&mut self, db: &str) -> Result<(), MyError> {
        self.grant(db)?;
        self.process.set_db(db);
        self.database = Some(db.to_owned());
        tracing::Span::current().record("database", db);
        Ok(())
    }
}

pub(super) fn revoked() -> MyError {
    MyError::new(1045, "28000", "the API key has expired or was revoked")
}

/// Serves one client until it quits, breaks off, idles past its limit, or
/// the node stops.
pub(crate) async fn connection(
    stream: TcpStream,
    shared: Arc<Shared>,
    stopped: watch::Receiver<bool>,
) {
    let id = NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed);
    let span = tracing::debug_span!(
        target: "shoal::request",
        "mysql connection",
        connection = id,
        tenant = tracing::field::Empty,
        database = tracing::field::Empty,
    );
    let _ = stream.set_nodelay(true);
    let host = super::processes::host(stream.peer_addr().ok());
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::with_capacity(16 << 10, read);
    serve(&mut read, &mut write, shared, (id, host), stopped)
        .instrument(span)
        .await;
}

async fn serve<R, W>(
    read: &mut R,
    write: &mut W,
    shared: Arc<Shared>,
    connection: (u32, String),
    stopped: watch::Receiver<bool>,
) where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut out = Out::default();
    let Some(session) = login(read, write, &mut out, &shared, connection).await else {
        return;
    };
    commands(session, read, write, out, stopped).await;
}

/// Serves a logged-in session's commands until the client quits, breaks
/// off, idles past its limit, or the node stops — or the session is
/// carried on to its database's primary, until that ends.
async fn commands<R, W>(
    mut session: Session,
    read: &mut R,
    write: &mut W,
    mut out: Out,
    stopped: watch::Receiver<bool>,
) where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let limits = session.shared.limits;
    let mut packet = Vec::new();
    // The connection's entry in the process list, held apart from the
    // session that its statements borrow while a KILL may interrupt them.
    let process = Arc::clone(&session.process.process);
    let mut stop = Stop::on(stopped, Arc::clone(&process));
    let mut timer = Timer::new();
    // The command read last runs again (its primary moved here while it
    // was being carried there), once.
    let mut again = false;
    loop {
        let replayed = std::mem::take(&mut again);
        if !replayed {
            let waits = (&mut timer, &mut stop);
            let Some(seq) =
                next_command(&mut session, read, write, &mut out, &mut packet, waits).await
            else {
                return;
            };
            out.seq = seq.wrapping_add(1);
            (process.counters).add(Counter::BytesReceived, packet.len() as u64 + 4);
        }
        // Killed, or the node stopping, as its command arrived: the
        // command is not run.
        if stop.requested() {
            return;
        }
        if session.key().is_err() {
            proto::err(&mut out, 1045, "28000", &revoked().message);
            let _ = out.flush(write).await;
            return;
        }
        // A statement another node of the group must run, unanswered.
        let mut refused = None;
        let Some((&command, body)) = packet.split_first() else {
            proto::err(&mut out, 1047, "08S01", "Unknown command");
            if out.flush(write).await.is_err() {
                return;
            }
            continue;
        };
        if matches!(
            command,
            com::QUERY | com::STMT_EXECUTE | com::INIT_DB | com::FIELD_LIST
        ) {
            process.counters.bump(Counter::Questions);
        }
        let go_on = match command {
            com::QUIT => {
                process.quit();
                return;
            }
            com::QUERY => {
                refused = query_command(&mut session, &process, &mut out, write, body).await;
                true
            }
            com::INIT_DB => {
                process.counters.bump(Counter::ComChangeDb);
                match std::str::from_utf8(body) {
                    Ok(db) => match session.use_database(db) {
                        Ok(()) => ok(&mut out, &session, 0, String::new()),
                        Err(e) => error(&mut out, &e),
                    },
                    Err(_) => error(&mut out, &MyError::not_utf8(body)),
                }
                true
            }
            com::PING | com::RESET_CONNECTION => {
                if command == com::RESET_CONNECTION {
                    session.statements.clear();
                    session.user_variables.clear();
                    session.safety = Safety::default();
                    let _ = session.rollback().await;
                    session.autocommit = true;
                }
                ok(&mut out, &session, 0, String::new());
                true
            }
            com::FIELD_LIST => {
                proto::eof(&mut out, session.capabilities, session.status(), true);
                true
            }
            com::STATISTICS => {
                out.begin();
                let status = session.shared.processes.status(&process, true);
                out.put(status.line().as_bytes());
                out.end();
                true
            }
            com::SET_OPTION => {
                match proto::Reader::new(body).u16() {
                    // Multi-statements off: as they are.
                    Ok(1) => proto::eof(&mut out, session.capabilities, session.status(), true),
                    _ => error(&mut out, &MyError::unsupported("multi-statements")),
                }
                true
            }
            com::STMT_PREPARE => {
                process.counters.bump(Counter::ComStmtPrepare);
                prepare(&mut session, &mut out, body).await;
                true
            }
            com::STMT_EXECUTE => {
                process.counters.bump(Counter::ComStmtExecute);
                refused = execute(&mut session, &process, &mut out, write, body).await;
                true
            }
            com::STMT_SEND_LONG_DATA => {
                // No answer, even to an error: the execute that follows says it.
                long_data(&mut session, body, limits.max_request_bytes);
                continue;
            }
            com::STMT_CLOSE => {
                process.counters.bump(Counter::ComStmtClose);
                if let Ok(stmt) = proto::Reader::new(body).u32() {
                    session.statements.remove(&stmt);
                }
                continue;
            }
            com::STMT_RESET => {
                process.counters.bump(Counter::ComStmtReset);
                match proto::Reader::new(body)
                    .u32()
                    .ok()
                    .and_then(|s| session.statements.get_mut(&s))
                {
                    Some(p) => {
                        p.long_data.clear();
                        ok(&mut out, &session, 0, String::new());
                    }
                    None => error(&mut out, &unknown_statement("mysqld_stmt_reset")),
                }
                true
            }
            _ => {
                proto::err(&mut out, 1047, "08S01", "Unknown command");
                true
            }
        };
        match refused {
            Some(refused) if !replayed => {
                match relay::carry_on(&mut session, refused, &packet, read, write, &mut stop).await
                {
                    Carried::Ended => return,
                    Carried::Here => {
                        again = true;
                        continue;
                    }
                    Carried::Not(e) => {
                        session.executed(&packet);
                        error(&mut out, &e);
                    }
                }
            }
            Some(refused) => {
                session.executed(&packet);
                error(&mut out, &refused);
            }
            None => {}
        }
        let flushed = !go_on || out.flush(write).await.is_ok();
        (process.counters).add(Counter::BytesSent, out.take_sent());
        if !flushed {
            return;
        }
    }
}

/// Waits for the client's next command and reads it into `packet`: its
/// sequence number, or `None` once the connection is to end — closed,
/// idle past its limit, a packet too large (answered), the node stopping.
/// A transaction holding rows whose client waits past the inactive
/// timeout is rolled back meanwhile.
async fn next_command<R, W>(
    session: &mut Session,
    read: &mut R,
    write: &mut W,
    out: &mut Out,
    packet: &mut Vec<u8>,
    (timer, stop): (&mut Timer, &mut Stop),
) -> Option<u8>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let limits = session.shared.limits;
    let mut waiting = Instant::now();
    while session.holds_transaction() {
        // Waiting for the next packet to begin (nothing is read): a
        // transaction holding rows waits for its client only so long.
        let inactive = (session.shared.transaction_inactive_timeout).min(limits.idle_timeout);
        // In this order, not at random: a command that has arrived is
        // read without polling the waits (`Stop::requested` is looked at
        // as it runs).
        let waited = tokio::select! {
            biased;
            begun = read.fill_buf() => Some(begun),
            () = &mut *stop => return None,
            () = timer.until(waiting + inactive) => None,
        };
        match waited {
            None => {
                session.inactive().await;
                waiting = Instant::now();
            }
            Some(Ok(bytes)) if !bytes.is_empty() => break,
            Some(_) => return None,
        }
    }
    let next = tokio::select! {
        biased;
        read = proto::read_packet(read, limits.max_request_bytes, packet) => read,
        () = &mut *stop => return None,
        () = timer.until(waiting + limits.idle_timeout) => return None,
    };
    match next {
        Err(ReadError::Closed | ReadError::Io(_)) => None,
        Err(ReadError::TooLarge(max)) => {
            out.seq = 1;
            proto::err(
                out,
                1153,
                "08S01",
                &format!("Got a packet bigger than 'max_allowed_packet' bytes ({max})"),
            );
            let _ = out.flush(write).await;
            None
        }
        Ok(seq) => Some(seq),
    }
}

/// Serves a session another node of the group carried here: its state,
/// then its client's packets as that node passes them on.
pub(crate) async fn carried(
    stream: TcpStream,
    sent_on: Vec<u8>,
    shared: Arc<Shared>,
    stopped: watch::Receiver<bool>,
) {
    let span = tracing::debug_span!(
        target: "shoal::request",
        "mysql connection",
        connection = tracing::field::Empty,
        carried = true,
        tenant = tracing::field::Empty,
        database = tracing::field::Empty,
    );
    async move {
        let _ = stream.set_nodelay(true);
        let (read, mut write) = stream.into_split();
        let read = tokio::io::AsyncReadExt::chain(std::io::Cursor::new(sent_on), read);
        let mut read = BufReader::with_capacity(16 << 10, read);
        let within = shared.limits.head_timeout;
        let Ok(Ok(handoff)) = tokio::time::timeout(within, relay::handoff(&mut read)).await else {
            return;
        };
        tracing::Span::current().record("connection", handoff.connection);
        let session = match Session::resume(&shared, handoff) {
            Ok(session) => session,
            Err(e) => {
                let no = relay::Taken::No {
                    code: e.code,
                    message: e.message,
                };
                let _ = relay::answer(&mut write, &no).await;
                return;
            }
        };
        if relay::answer(&mut write, &relay::Taken::Yes).await.is_err() {
            return;
        }
        commands(session, &mut read, &mut write, Out::default(), stopped).await;
    }
    .instrument(span)
    .await;
}

/// The node's stop, or a `KILL` of the connection, as a connection waits
/// for them between its commands: made once for the connection's life
/// (each wait for a `watch` made anew takes the lock every connection's
/// waits share).
pub(super) struct Stop {
    wait: Pin<Box<dyn Future<Output = ()> + Send>>,
    stopped: watch::Receiver<bool>,
    process: Arc<Process>,
}

impl Stop {
    fn on(stopped: watch::Receiver<bool>, process: Arc<Process>) -> Stop {
        let (mut waits, killed) = (stopped.clone(), Arc::clone(&process));
        Stop {
            wait: Box::pin(async move {
                tokio::select! {
                    biased;
                    () = killed.killed() => {}
                    _ = waits.wait_for(|s| *s) => {}
                }
            }),
            stopped,
            process,
        }
    }

    /// Whether the node is stopping or the connection was killed: looked
    /// at as each command arrives, for a client whose commands keep
    /// coming (a connection reads them before it waits on the stop).
    fn requested(&self) -> bool {
        self.process.is_killed() || *self.stopped.borrow()
    }
}

impl Future for Stop {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        self.wait.as_mut().poll(cx)
    }
}

/// A connection's one timer for the waits between its commands. A wait
/// until a later time leaves the timer where it is and moves it on when
/// it fires: the timer is not made, nor moved, for each command — a
/// timeout made and dropped per command was a tenth of the node's work in
/// a point select.
struct Timer(Pin<Box<tokio::time::Sleep>>);

impl Timer {
    fn new() -> Timer {
        Timer(Box::pin(tokio::time::sleep(Duration::ZERO)))
    }

    /// Returns at `at` (or later, never earlier).
    async fn until(&mut self, at: Instant) {
        if self.0.deadline() > at {
            self.0.as_mut().reset(at);
        }
        loop {
            self.0.as_mut().await;
            if Instant::now() >= at {
                return;
            }
            self.0.as_mut().reset(at);
        }
    }
}

/// The greeting, the login and the connect-time database: the session, or
/// `None` once the client was told why not.
async fn login<R, W>(
    read: &mut R,
    write: &mut W,
    out: &mut Out,
    shared: &Arc<Shared>,
    (id, host): (u32, String),
) -> Option<Session>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let scramble = scramble();
    proto::greeting(out, super::VERSION, id, &scramble);
    out.flush(write).await.ok()?;
    let deadline = tokio::time::Instant::now() + shared.limits.head_timeout;
    let mut packet = Vec::new();
    read_login_packet(read, deadline, out, &mut packet).await?;
    let login = match proto::login(&packet) {
        Ok(Some(login)) => login,
        Ok(None) => {
            proto::err(
                out,
                1043,
                "08S01",
                "Bad handshake: this node does not offer TLS",
            );
            let _ = out.flush(write).await;
            return None;
        }
        Err(_) => {
            proto::err(out, 1043, "08S01", "Bad handshake");
            let _ = out.flush(write).await;
            return None;
        }
    };
    let mut answer = login.auth;
    if login
        .plugin
        .as_deref()
        .is_some_and(|p| p != proto::NATIVE_PASSWORD.as_bytes())
    {
        // A client that answered another way is asked for this one.
        proto::auth_switch(out, &scramble);
        out.flush(write).await.ok()?;
        read_login_packet(read, deadline, out, &mut packet).await?;
        answer = packet.clone();
    }
    let user: String = String::from_utf8_lossy(&login.user)
        .chars()
        .take(64)
        .collect();
    let key = match shared
        .engine
        .api_keys()
        .verify_sql(&login.user, &scramble, &answer)
    {
        Ok(key) => key,
        Err(e) => {
            let using = if answer.is_empty() { "NO" } else { "YES" };
            let why = match e {
                AuthError::Expired => "; the API key has expired or was revoked",
                _ => "",
            };
            proto::err(
                out,
                1045,
                "28000",
                &format!("Access denied for user '{user}' (using password: {using}){why}"),
            );
            let _ = out.flush(write).await;
            return None;
        }
    };
    tracing::Span::current().record("tenant", key.tenant().as_str());
    let process = (shared.processes).register(id, key.prefix(), key.tenant(), host);
    let mut session = Session {
        engine: shared.engine.clone(),
        shared: Arc::clone(shared),
        id,
        user,
        key,
        database: None,
        last_insert_id: 0,
        row_count: -1,
        found_rows: 0,
        autocommit: true,
        txn: Txn::default(),
        user_variables: UserVariables::default(),
        safety: Safety::default(),
        now: None,
        capabilities: login.capabilities & cap::SERVER,
        statements: HashMap::new(),
        next_statement: 1,
        carried: false,
        process,
        spare_batch: None,
        sent_columns: proto::SentColumns::default(),
    };
    if let Some(db) = login.database {
        let chosen = match std::str::from_utf8(&db) {
            Ok(db) => session.use_database(db),
            Err(_) => Err(MyError::not_utf8(&db)),
        };
        if let Err(e) = chosen {
            error(out, &e);
            let _ = out.flush(write).await;
            return None;
        }
    }
    ok(out, &session, 0, String::new());
    out.flush(write).await.ok()?;
    Some(session)
}

/// Reads a packet of the login before `deadline`; the answer to it
/// follows in sequence. `None`: it did not come.
async fn read_login_packet<R: AsyncRead + Unpin>(
    read: &mut R,
    deadline: tokio::time::Instant,
    out: &mut Out,
    packet: &mut Vec<u8>,
) -> Option<()> {
    let read = proto::read_packet(read, MAX_LOGIN_BYTES, packet);
    let seq = tokio::time::timeout_at(deadline, read).await.ok()?.ok()?;
    out.seq = seq.wrapping_add(1);
    Some(())
}

/// 20 random printable characters: what a client proves it knows the
/// secret with, new for every connection.
fn scramble() -> [u8; 20] {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    bytes.map(|b| 0x21 + b % 94)
}

fn ok(out: &mut Out, session: &Session, affected: u64, info: String) {
    let ok = proto::Ok {
        affected_rows: affected,
        status: session.status(),
        info,
        ..proto::Ok::default()
    };
    proto::ok(out, &ok);
}

fn error(out: &mut Out, e: &MyError) {
    proto::err(out, e.code, e.state, &e.message);
}

fn unknown_statement(command: &str) -> MyError {
    MyError::new(
        1243,
        "HY000",
        format!("Unknown prepared statement handler given to {command}"),
    )
}

/// COM_QUERY: one statement, answered in the text protocol — or, if
/// another node of the group must run it, its refusal, unanswered.
async fn query_command<W: AsyncWrite + Unpin>(
    session: &mut Session,
    process: &Process,
    out: &mut Out,
    write: &mut W,
    body: &[u8],
) -> Option<MyError> {
    let text = match std::str::from_utf8(body) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => match text::with_byte_literals(body) {
            Some(text) => Cow::Owned(text),
            None => {
                error(out, &MyError::not_utf8(body));
                return None;
            }
        },
    };
    let reply = match query::tokenize_sent(&text, body.len()) {
        Ok(tokens) => {
            if let Some(kind) = Counter::of_statement(&tokens) {
                process.counters.bump(kind);
            }
            process.begin(Command::Query, &text);
            let interruptible = query::interruptible(&tokens);
            // A statement's future holds the state of every kind of
            // statement (some 20 KiB); boxed, the connection's own future
            // stays small instead of copying it at each command.
            let running = Box::pin(session.run(tokens));
            match or_interrupted(process, interruptible, running).await {
                Some(reply) => reply,
                None => session.interrupted().await,
            }
        }
        Err(e) => Err(e),
    };
    process.end();
    answer_or_carry(session, out, write, reply, false).await
}

/// Runs `statement` to its answer — unless it is `interruptible` and a
/// `KILL` interrupts it first: `None`, the statement dropped where it
/// was (what it reached of its transaction is let go when that rolls
/// back: `Session::interrupted`).
async fn or_interrupted(
    process: &Process,
    interruptible: bool,
    statement: impl Future<Output = Result<Reply, MyError>>,
) -> Option<Result<Reply, MyError>> {
    if !interruptible {
        return Some(statement.await);
    }
    tokio::select! {
        biased;
        reply = statement => Some(reply),
        () = process.interrupted() => None,
    }
}

/// Writes a statement's answer — unless it is a refusal that carrying
/// the session to its database's primary puts right: that is given back,
/// unanswered.
async fn answer_or_carry<W: AsyncWrite + Unpin>(
    session: &mut Session,
    out: &mut Out,
    write: &mut W,
    reply: Result<Reply, MyError>,
    binary: bool,
) -> Option<MyError> {
    match reply {
        Err(e) if session.may_carry(&e) => Some(e),
        reply => {
            session.counted(&reply);
            answer(session, out, write, reply, binary).await;
            None
        }
    }
}

/// Writes a statement's answer: OK, a result set, or the error.
async fn answer<W: AsyncWrite + Unpin>(
    session: &mut Session,
    out: &mut Out,
    write: &mut W,
    reply: Result<Reply, MyError>,
    binary: bool,
) {
    match reply {
        Ok(Reply::Done {
            affected,
            info,
            last_insert_id,
        }) => {
            let ok = proto::Ok {
                affected_rows: affected,
                last_insert_id,
                status: session.status(),
                info,
                ..proto::Ok::default()
            };
            proto::ok(out, &ok);
        }
        Ok(Reply::Rows { columns, rows }) => {
            let status = session.status();
            if binary {
                let caps = session.capabilities;
                session.sent_columns.write(out, caps, status, &columns);
            } else {
                proto::columns(out, session.capabilities, status, &columns);
            }
            for row in &rows {
                if binary {
                    value::binary_row(out, &columns, row);
                } else {
                    value::text_row(out, &columns, row);
                }
                if out.pending() >= FLUSH_AT && out.flush(write).await.is_err() {
                    return;
                }
            }
            proto::eof(out, session.capabilities, status, true);
        }
        Err(e) => error(out, &e),
    }
}

/// COM_STMT_PREPARE: the statement's id, its `?`s and its columns.
async fn prepare(session: &mut Session, out: &mut Out, body: &[u8]) {
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        Err(_) => return error(out, &MyError::not_utf8(body)),
    };
    if session.statements.len() >= MAX_STATEMENTS {
        return error(
            out,
            &MyError::new(
                1461,
                "42000",
                format!(
                    "Can't create more than max_prepared_stmt_count statements (current value: {MAX_STATEMENTS})"
                ),
            ),
        );
    }
    let tokens = match query::tokenize(text) {
        Ok(tokens) => tokens,
        Err(e) => return error(out, &e),
    };
    let params = query::placeholders(&tokens);
    if params > usize::from(u16::MAX) {
        return error(
            out,
            &MyError::new(
                1390,
                "HY000",
                "Prepared statement contains too many placeholders",
            ),
        );
    }
    let columns = match session.describe(&tokens).await {
        Ok(columns) => columns,
        Err(e) => return error(out, &e),
    };
    let kept = session.keep(&tokens);
    let id = session.next_statement;
    session.next_statement = session.next_statement.wrapping_add(1).max(1);
    proto::prepared(out, session.capabilities, id, params as u16, &columns);
    session.statements.insert(
        id,
        Prepared {
            text: text.into(),
            tokens,
            params,
            kept,
            types: Vec::new(),
            long_data: HashMap::new(),
        },
    );
}

/// COM_STMT_SEND_LONG_DATA: a part of an argument, kept for the next
/// execute, at most `max` bytes in all per statement.
fn long_data(session: &mut Session, body: &[u8], max: usize) {
    let mut r = proto::Reader::new(body);
    let (Ok(stmt), Ok(param)) = (r.u32(), r.u16()) else {
        return;
    };
    if let Some(p) = session.statements.get_mut(&stmt)
        && usize::from(param) < p.params
    {
        let held: usize = p.long_data.values().map(Vec::len).sum();
        if held + r.rest().len() <= max {
            p.long_data
                .entry(param)
                .or_default()
                .extend_from_slice(r.rest());
        }
    }
}

/// COM_STMT_EXECUTE: the statement run with its arguments, answered in
/// the binary protocol — or, if another node of the group must run it,
/// its refusal, unanswered (the arguments sent in parts kept for it).
async fn execute<W: AsyncWrite + Unpin>(
    session: &mut Session,
    process: &Process,
    out: &mut Out,
    write: &mut W,
    body: &[u8],
) -> Option<MyError> {
    let mut r = proto::Reader::new(body);
    let Ok(stmt) = r.u32() else {
        error(out, &MyError::bad_arguments("the packet is malformed"));
        return None;
    };
    let Some(prepared) = session.statements.get_mut(&stmt) else {
        error(out, &unknown_statement("mysqld_stmt_execute"));
        return None;
    };
    let args = match arguments(prepared, &mut r) {
        Ok(args) => args,
        Err(e) => {
            prepared.long_data.clear();
            error(out, &e);
            return None;
        }
    };
    // A kept plan runs as it is, a kept query with the arguments in place;
    // any other statement is bound and parsed.
    let kept = prepared.kept.clone();
    let interruptible = query::interruptible(&prepared.tokens);
    if let Some(kind) = Counter::of_statement(&prepared.tokens) {
        process.counters.bump(kind);
    }
    process.begin(Command::Execute, &prepared.text);
    let running = async {
        match &kept {
            Some(Kept::Lookup(plan)) if session.plan_holds(plan) => {
                return session.lookup(plan, &args).await;
            }
            Some(Kept::Query(q)) => {
                if let Some(q) = prepared::bound(q, &args) {
                    // Boxed: see `query_command`.
                    return Box::pin(session.run_bound(q)).await;
                }
            }
            _ => {}
        }
        match session.statements.get(&stmt) {
            Some(prepared) => {
                let tokens = query::bind(&prepared.tokens, &args);
                Box::pin(session.run(tokens)).await
            }
            None => Err(unknown_statement("mysqld_stmt_execute")),
        }
    };
    let reply = match or_interrupted(process, interruptible, running).await {
        Some(reply) => reply,
        None => session.interrupted().await,
    };
    process.end();
    let refused = answer_or_carry(session, out, write, reply, true).await;
    if refused.is_none()
        && let Some(prepared) = session.statements.get_mut(&stmt)
    {
        prepared.long_data.clear();
    }
    refused
}

/// The arguments of an execute: NULLs from the bitmap, types as bound now
/// or last time, values as their types say.
fn arguments(p: &mut Prepared, r: &mut proto::Reader<'_>) -> Result<Vec<Lit>, MyError> {
    let malformed = |_| MyError::bad_arguments("the packet is malformed");
    let _flags = r.u8().map_err(malformed)?;
    let _iterations = r.u32().map_err(malformed)?;
    if p.params == 0 {
        return Ok(Vec::new());
    }
    // The NULL bitmap, copied off the packet (the reader reads on): on
    // the stack for up to 256 arguments.
    let bitmap = r.take(p.params.div_ceil(8)).map_err(malformed)?;
    let mut small = [0u8; 32];
    let large;
    let nulls: &[u8] = match small.get_mut(..bitmap.len()) {
        Some(place) => {
            place.copy_from_slice(bitmap);
            place
        }
        None => {
            large = bitmap.to_vec();
            &large
        }
    };
    if r.u8().map_err(malformed)? == 1 {
        p.types.clear();
        for _ in 0..p.params {
            let t = r.u8().map_err(malformed)?;
            let unsigned = r.u8().map_err(malformed)? & 0x80 != 0;
            p.types.push((t, unsigned));
        }
    }
    if p.types.len() != p.params {
        return Err(MyError::bad_arguments(
            "the arguments' types were never sent",
        ));
    }
    let mut args = Vec::with_capacity(p.params);
    for i in 0..p.params {
        if nulls[i / 8] & (1 << (i % 8)) != 0 {
            args.push(Lit::Null);
            continue;
        }
        if let Some(data) = p.long_data.get(&(i as u16)) {
            args.push(Lit::Str(data.clone()));
            continue;
        }
        let (t, unsigned) = p.types[i];
        args.push(value::read_param(r, t, unsigned).map_err(|_| {
            MyError::bad_arguments(format!("argument {} is malformed for its type {t}", i + 1))
        })?);
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a paused clock: time moves only as the runtime waits.
    #[tokio::test(start_paused = true)]
    async fn the_timer_returns_at_the_time_asked_never_before() {
        let mut timer = Timer::new();
        let began = Instant::now();
        timer.until(began + Duration::from_secs(300)).await;
        assert_eq!(began.elapsed(), Duration::from_secs(300));
        // A later time leaves the timer where it was; it fires and moves on.
        let began = Instant::now();
        let idle = began + Duration::from_secs(300);
        let waited = tokio::time::timeout(Duration::from_secs(299), timer.until(idle)).await;
        assert!(waited.is_err(), "not before its time");
        timer.until(began + Duration::from_secs(600)).await;
        assert_eq!(began.elapsed(), Duration::from_secs(600));
        // An earlier time than the timer's moves it back.
        let began = Instant::now();
        let far = timer.until(began + Duration::from_secs(3600));
        assert!(
            tokio::time::timeout(Duration::from_secs(1), far)
                .await
                .is_err()
        );
        timer.until(began + Duration::from_secs(10)).await;
        assert_eq!(began.elapsed(), Duration::from_secs(10));
        // A time already past returns at once.
        let began = Instant::now();
        timer.until(began - Duration::from_secs(1)).await;
        assert_eq!(began.elapsed(), Duration::ZERO);
    }
}
