//! The node's SQL connections, as `SHOW PROCESSLIST` and
//! `information_schema.PROCESSLIST` show them and `KILL` ends them.
//!
//! A caller sees, and may end, only the connections logged in with its
//! own API key — MySQL's rule for a user without the PROCESS privilege —
//! as Redis's `CLIENT LIST` does (`resp::clients`). A connection is listed
//! once it has logged in; one carried here from another node of the group
//! is listed on the node its client is connected to, not here.
//!
//! `KILL QUERY id` interrupts the statement the connection runs, if it
//! reads or writes rows (SELECT, INSERT, UPDATE, DELETE, REPLACE): the
//! statement answers 1317 and, as any failed statement of a transaction
//! in Shoal, rolls its transaction back. A statement that changes a
//! schema, or ends a transaction, runs to its end. `KILL [CONNECTION] id`
//! does the same and closes the connection once the statement has
//! answered (at once if it is idle); its open transaction is rolled back.
//! A statement interrupted as it commits may have committed, as in MySQL.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use shoal_wire::schema::TenantId;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;
use tokio::sync::Notify;

use super::error::MyError;
use super::proto::ty;
use super::query::{Reply, keyword};
use super::session::Session;
use super::status::{COUNTERS, Counters, Status, Totals};
use super::value::{Cell, computed};
use crate::types::value::Value;

/// The bytes of a statement's text kept for `Info`; `SHOW PROCESSLIST`
/// without FULL shows its first 100 characters, as MySQL does.
pub(crate) const INFO_BYTES: usize = 4096;
/// The characters of `Info` that `SHOW PROCESSLIST` shows without FULL.
pub(crate) const SHORT_INFO_CHARS: usize = 100;

/// Every logged-in SQL connection of the node, by id, and each tenant's
/// status counts (`status`).
#[derive(Debug, Default)]
pub(crate) struct Processes {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    all: HashMap<u32, Arc<Process>>,
    tenants: HashMap<TenantId, Totals>,
}

/// One connection as others see it.
#[derive(Debug)]
pub(crate) struct Process {
    pub(crate) id: u32,
    /// The prefix of the API key it logged in with: its `User`.
    pub(crate) user: String,
    /// The key's tenant.
    pub(crate) tenant: TenantId,
    /// `ip:port` of its client.
    pub(crate) host: String,
    /// Its status counts, written by the connection alone.
    pub(crate) counters: Counters,
    state: Mutex<State>,
    /// Told when the connection is killed or its statement interrupted.
    wake: Notify,
}

#[derive(Debug)]
struct State {
    db: Option<String>,
    command: Command,
    /// Since when it is in `command`.
    since: Instant,
    /// The statement it runs (at most `INFO_BYTES` of it).
    info: String,
    /// The statement it runs is to stop.
    interrupted: bool,
    /// The connection is to close.
    killed: bool,
    /// Its client said goodbye (COM_QUIT): it did not abort.
    quit: bool,
}

/// What a connection is doing, as MySQL's `Command` column names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// Waiting for its client.
    Sleep,
    /// Running a statement sent as text.
    Query,
    /// Running a prepared statement.
    Execute,
}

impl Command {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Command::Sleep => "Sleep",
            Command::Query => "Query",
            Command::Execute => "Execute",
        }
    }
}

/// A connection as `SHOW PROCESSLIST` shows it, at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shown {
    pub(crate) id: u32,
    pub(crate) user: String,
    pub(crate) host: String,
    pub(crate) db: Option<String>,
    pub(crate) command: Command,
    /// Seconds in `command`.
    pub(crate) time: u64,
    pub(crate) info: Option<String>,
}

impl Shown {
    /// MySQL's `State`: what a running statement does.
    pub(crate) fn state(&self) -> &'static str {
        match self.command {
            Command::Sleep => "",
            Command::Query | Command::Execute => "executing",
        }
    }
}

/// Why a `KILL` ended nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KillError {
    /// No connection has that id here.
    Unknown,
    /// Another key's connection.
    NotOwner,
}

/// A connection's place in [`Processes`], given up when dropped.
#[derive(Debug)]
pub(crate) struct Registered {
    processes: Option<Arc<Processes>>,
    pub(crate) process: Arc<Process>,
}

impl std::ops::Deref for Registered {
    type Target = Process;

    fn deref(&self) -> &Process {
        &self.process
    }
}

impl Drop for Registered {
    /// The connection leaves the list; its counts go to its tenant's.
    fn drop(&mut self) {
        let Some(processes) = &self.processes else {
            return;
        };
        let p = &self.process;
        let quit = p.state().quit;
        let mut inner = processes.lock();
        inner.all.remove(&p.id);
        let totals = inner.tenants.entry(p.tenant.clone()).or_default();
        p.counters.add_to(&mut totals.ended);
        totals.live = totals.live.saturating_sub(1);
        totals.aborted += u64::from(!quit);
    }
}

impl Processes {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lists connection `id`, logged in as `user` of `tenant` from `host`.
    pub(crate) fn register(
        self: &Arc<Self>,
        id: u32,
        user: &str,
        tenant: &TenantId,
        host: String,
    ) -> Registered {
        let process = Process::new(id, user, tenant, host);
        let mut inner = self.lock();
        inner.all.insert(id, Arc::clone(&process));
        let totals = inner.tenants.entry(tenant.clone()).or_default();
        totals.connections += 1;
        totals.live += 1;
        totals.most_live = totals.most_live.max(totals.live);
        drop(inner);
        Registered {
            processes: Some(Arc::clone(self)),
            process,
        }
    }

    /// The connections of key `user`, by id.
    pub(crate) fn of_user(&self, user: &str) -> Vec<Shown> {
        let mine: Vec<Arc<Process>> = (self.lock().all.values())
            .filter(|p| p.user == user)
            .cloned()
            .collect();
        let now = Instant::now();
        let mut shown: Vec<Shown> = mine.iter().map(|p| p.shown(now)).collect();
        shown.sort_by_key(|s| s.id);
        shown
    }

    /// `KILL`s connection `id` for key `user`: its statement interrupted,
    /// and the connection closed unless `query_only`.
    pub(crate) fn kill(&self, user: &str, id: u64, query_only: bool) -> Result<(), KillError> {
        let found = u32::try_from(id)
            .ok()
            .and_then(|id| self.lock().all.get(&id).cloned());
        let process = found.ok_or(KillError::Unknown)?;
        if process.user != user {
            return Err(KillError::NotOwner);
        }
        process.kill(query_only);
        Ok(())
    }

    /// Status as `session` sees it: its tenant's counts on this node
    /// (GLOBAL), or its own (SESSION).
    pub(crate) fn status(&self, session: &Process, global: bool) -> Status {
        let inner = self.lock();
        let tenant = inner.tenants.get(&session.tenant).cloned();
        let tenant = tenant.unwrap_or_default();
        let mut counts = [0; COUNTERS];
        let mut running = 0;
        let mine = (inner.all.values()).filter(|p| p.tenant == session.tenant);
        for p in mine {
            if global {
                p.counters.add_to(&mut counts);
            }
            running += u64::from(p.state().command != Command::Sleep);
        }
        drop(inner);
        if global {
            for (sum, ended) in counts.iter_mut().zip(&tenant.ended) {
                *sum = sum.wrapping_add(*ended);
            }
        } else {
            session.counters.add_to(&mut counts);
        }
        Status {
            counts,
            tenant,
            running,
            uptime_secs: crate::api::resp::started().elapsed().as_secs(),
        }
    }
}

impl Process {
    fn new(id: u32, user: &str, tenant: &TenantId, host: String) -> Arc<Process> {
        Arc::new(Process {
            id,
            user: user.to_owned(),
            tenant: tenant.clone(),
            host,
            counters: Counters::default(),
            state: Mutex::new(State {
                db: None,
                command: Command::Sleep,
                since: Instant::now(),
                info: String::new(),
                interrupted: false,
                killed: false,
                quit: false,
            }),
            wake: Notify::new(),
        })
    }

    /// A connection listed nowhere: one carried here from another node.
    pub(crate) fn unlisted(id: u32, user: &str, tenant: &TenantId) -> Registered {
        Registered {
            processes: None,
            process: Process::new(id, user, tenant, String::new()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn set_db(&self, db: &str) {
        let mut state = self.state();
        if state.db.as_deref() != Some(db) {
            state.db = Some(db.to_owned());
        }
    }

    /// The connection begins statement `text` (the kept buffer reused).
    pub(crate) fn begin(&self, command: Command, text: &str) {
        let mut state = self.state();
        state.command = command;
        state.since = Instant::now();
        state.info.clear();
        state.info.push_str(prefix(text, INFO_BYTES));
        state.interrupted = false;
    }

    /// The connection waits for its client again.
    pub(crate) fn end(&self) {
        let mut state = self.state();
        state.command = Command::Sleep;
        state.since = Instant::now();
        state.info.clear();
        state.interrupted = false;
    }

    fn kill(&self, query_only: bool) {
        {
            let mut state = self.state();
            if state.command != Command::Sleep {
                state.interrupted = true;
            }
            state.killed |= !query_only;
        }
        self.wake.notify_waiters();
    }

    /// The client ends the connection as it should (COM_QUIT).
    pub(crate) fn quit(&self) {
        self.state().quit = true;
    }

    /// Whether the connection has been killed: it runs no more commands.
    pub(crate) fn is_killed(&self) -> bool {
        self.state().killed
    }

    /// Until the running statement is interrupted.
    pub(crate) async fn interrupted(&self) {
        self.until(|s| s.interrupted).await;
    }

    /// Until the connection is killed.
    pub(crate) async fn killed(&self) {
        self.until(|s| s.killed).await;
    }

    async fn until(&self, set: impl Fn(&State) -> bool) {
        loop {
            let woken = self.wake.notified();
            tokio::pin!(woken);
            // Waiting before looking: a kill after the look wakes it.
            woken.as_mut().enable();
            if set(&self.state()) {
                return;
            }
            woken.await;
        }
    }

    fn shown(&self, now: Instant) -> Shown {
        let state = self.state();
        Shown {
            id: self.id,
            user: self.user.clone(),
            host: self.host.clone(),
            db: state.db.clone(),
            command: state.command,
            time: now.saturating_duration_since(state.since).as_secs(),
            info: (state.command != Command::Sleep).then(|| state.info.clone()),
        }
    }
}

impl Session {
    /// `SHOW [FULL] PROCESSLIST`: the key's connections, `Info` cut to
    /// its first 100 characters unless FULL.
    pub(super) fn show_processlist(&self, full: bool, rest: &[Token]) -> Result<Reply, MyError> {
        if !rest.is_empty() {
            return Err(MyError::syntax("SHOW PROCESSLIST takes nothing after it"));
        }
        let columns = [
            ("Id", ty::LONGLONG),
            ("User", ty::VAR_STRING),
            ("Host", ty::VAR_STRING),
            ("db", ty::VAR_STRING),
            ("Command", ty::VAR_STRING),
            ("Time", ty::LONGLONG),
            ("State", ty::VAR_STRING),
            ("Info", ty::VAR_STRING),
        ]
        .map(|(name, t)| computed(name, t))
        .to_vec();
        let rows = (self.processes_shown().into_iter())
            .map(|p| {
                let info = p.info.as_deref().map(|i| if full { i } else { short(i) });
                let text = |t: Option<&str>| t.map_or(Cell::Value(Value::Null), Cell::from);
                vec![
                    Cell::from(u64::from(p.id)),
                    Cell::from(p.user.as_str()),
                    Cell::from(p.host.as_str()),
                    text(p.db.as_deref()),
                    Cell::from(p.command.name()),
                    Cell::from(p.time),
                    Cell::from(p.state()),
                    text(info),
                ]
            })
            .collect();
        Ok(Reply::rows(columns, rows))
    }

    /// The key's connections on this node, as they are now.
    pub(super) fn processes_shown(&self) -> Vec<Shown> {
        self.shared.processes.of_user(&self.process.user)
    }

    /// `KILL [CONNECTION | QUERY] id`, of one of the key's connections.
    /// Of this connection itself, the KILL is interrupted (1317) — and,
    /// unless QUERY, the connection closed after it, as MySQL does.
    pub(super) fn kill(&mut self, rest: &[Token]) -> Result<Reply, MyError> {
        let (query_only, id) = match rest {
            [t, id] if keyword(Some(t)) == Some(Keyword::QUERY) => (true, id),
            [t, id] if keyword(Some(t)) == Some(Keyword::CONNECTION) => (false, id),
            [id] => (false, id),
            _ => {
                return Err(MyError::syntax(
                    "KILL takes [CONNECTION | QUERY] and a connection id",
                ));
            }
        };
        let Token::Number(digits, false) = id else {
            return Err(MyError::syntax("KILL takes a connection id, a number"));
        };
        let Ok(id) = digits.parse::<u64>() else {
            return Err(MyError::syntax(format!(
                "'{digits}' is not a connection id"
            )));
        };
        match self
            .shared
            .processes
            .kill(&self.process.user, id, query_only)
        {
            Ok(()) if id == u64::from(self.process.id) => Err(MyError::new(
                1317,
                "70100",
                "Query execution was interrupted",
            )),
            Ok(()) => Ok(Reply::done(0)),
            Err(KillError::Unknown) => Err(MyError::new(
                1094,
                "HY000",
                format!("Unknown thread id: {id}"),
            )),
            Err(KillError::NotOwner) => Err(MyError::new(
                1095,
                "HY000",
                format!("You are not owner of thread {id}"),
            )),
        }
    }
}

/// `addr` as the `Host` column writes it.
pub(crate) fn host(addr: Option<SocketAddr>) -> String {
    addr.map(|a| a.to_string()).unwrap_or_default()
}

/// The longest start of `text` of at most `bytes` bytes that ends on a
/// character's boundary.
fn prefix(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The first `SHORT_INFO_CHARS` characters of `info`.
pub(crate) fn short(info: &str) -> &str {
    match info.char_indices().nth(SHORT_INFO_CHARS) {
        Some((at, _)) => &info[..at],
        None => info,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::mysql::status::Counter;

    fn tenant(name: &str) -> TenantId {
        TenantId::parse(name).unwrap()
    }

    fn value(status: &Status, name: &str) -> u64 {
        let all = status.variables();
        all.iter().find(|(n, _)| *n == name).unwrap().1
    }

    #[test]
    fn status_counts_the_tenants_connections_live_and_ended() {
        let all = Arc::new(Processes::default());
        let a = all.register(1, "key-a", &tenant("a"), String::new());
        let a2 = all.register(2, "key-a2", &tenant("a"), String::new());
        let b = all.register(3, "key-b", &tenant("b"), String::new());
        a.counters.add(Counter::Questions, 3);
        a2.counters.add(Counter::Questions, 4);
        b.counters.add(Counter::Questions, 100);
        a2.begin(Command::Query, "SELECT 1");
        let global = all.status(&a, true);
        assert_eq!(value(&global, "Questions"), 7);
        assert_eq!(value(&global, "Threads_connected"), 2);
        assert_eq!(value(&global, "Threads_running"), 1);
        assert_eq!(value(&all.status(&a, false), "Questions"), 3);
        // One leaves as it should, one is dropped: their counts stay.
        a2.quit();
        drop(a2);
        let b2 = all.register(4, "key-b", &tenant("b"), String::new());
        drop(b2);
        let a3 = all.register(5, "key-a", &tenant("a"), String::new());
        drop(a);
        let global = all.status(&a3, true);
        assert_eq!(value(&global, "Questions"), 7);
        assert_eq!(value(&global, "Connections"), 3);
        assert_eq!(value(&global, "Max_used_connections"), 2);
        assert_eq!(value(&global, "Threads_connected"), 1);
        assert_eq!(value(&global, "Aborted_clients"), 1);
        assert_eq!(value(&all.status(&b, true), "Questions"), 100);
        assert_eq!(value(&all.status(&b, true), "Aborted_clients"), 1);
    }

    #[test]
    fn a_key_sees_and_kills_only_its_own_connections() {
        let all = Arc::new(Processes::default());
        let a = all.register(1, "key-a", &tenant("a"), "127.0.0.1:5000".into());
        let _b = all.register(2, "key-b", &tenant("b"), "127.0.0.1:5001".into());
        let a2 = all.register(3, "key-a", &tenant("a"), "127.0.0.1:5002".into());
        a.set_db("shop");
        a2.begin(Command::Query, "SELECT 1");
        let shown = all.of_user("key-a");
        assert_eq!(shown.iter().map(|s| s.id).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(shown[0].db.as_deref(), Some("shop"));
        assert_eq!(
            (shown[0].command, shown[0].info.as_deref()),
            (Command::Sleep, None)
        );
        assert_eq!(
            (shown[1].command, shown[1].info.as_deref()),
            (Command::Query, Some("SELECT 1"))
        );
        assert_eq!(all.kill("key-a", 2, false), Err(KillError::NotOwner));
        assert_eq!(all.kill("key-a", 9, false), Err(KillError::Unknown));
        assert_eq!(
            all.kill("key-a", u64::from(u32::MAX) + 2, true),
            Err(KillError::Unknown)
        );
        assert_eq!(all.kill("key-a", 3, true), Ok(()));
        assert!(a2.state().interrupted && !a2.state().killed);
        drop(a2);
        assert_eq!(all.of_user("key-a").len(), 1);
    }

    #[test]
    fn a_query_kill_of_an_idle_connection_leaves_its_next_statement_alone() {
        let all = Arc::new(Processes::default());
        let p = all.register(1, "k", &tenant("a"), String::new());
        all.kill("k", 1, true).unwrap();
        p.begin(Command::Query, "SELECT 1");
        assert!(!p.state().interrupted);
        all.kill("k", 1, true).unwrap();
        assert!(p.state().interrupted);
        p.end();
        p.begin(Command::Query, "SELECT 2");
        assert!(!p.state().interrupted);
    }

    #[tokio::test]
    async fn a_kill_wakes_the_waiting_connection() {
        let all = Arc::new(Processes::default());
        let p = all.register(1, "k", &tenant("a"), String::new());
        p.begin(Command::Query, "SELECT 1");
        let process = Arc::clone(&p.process);
        let waiting = tokio::spawn(async move {
            process.interrupted().await;
            process.killed().await;
        });
        tokio::task::yield_now().await;
        all.kill("k", 1, false).unwrap();
        waiting.await.unwrap();
    }

    #[test]
    fn info_is_kept_to_its_bound_on_a_character_boundary() {
        let text = "é".repeat(INFO_BYTES);
        let kept = prefix(&text, INFO_BYTES);
        assert_eq!(kept.len(), INFO_BYTES);
        let odd = format!("a{text}");
        assert_eq!(prefix(&odd, INFO_BYTES).len(), INFO_BYTES - 1);
        assert_eq!(short(&"x".repeat(150)).len(), SHORT_INFO_CHARS);
        assert_eq!(short("€€"), "€€");
    }
}
