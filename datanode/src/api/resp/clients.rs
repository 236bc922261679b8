//! The node's Redis client connections, for `CLIENT LIST`, `CLIENT INFO`
//! and `CLIENT KILL`. A caller sees, and may end, only the connections
//! opened with its own API key: another tenant's (or another key's)
//! clients are not there for it.

use std::collections::HashMap;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Every client connection of the node, by id.
#[derive(Debug, Default)]
pub(crate) struct Clients {
    all: Mutex<HashMap<u64, Arc<Client>>>,
}

/// One client connection as others see it.
#[derive(Debug)]
pub(crate) struct Client {
    pub(crate) id: u64,
    addr: Option<SocketAddr>,
    laddr: Option<SocketAddr>,
    opened: Instant,
    state: Mutex<State>,
    /// Told when another connection of the same key ends this one.
    killed: tokio::sync::Notify,
}

/// What changes over a connection's life.
#[derive(Debug)]
struct State {
    /// The prefix of the API key it authenticated with.
    key: Option<String>,
    database: Option<String>,
    name: Vec<u8>,
    lib_name: Vec<u8>,
    lib_ver: Vec<u8>,
    resp3: bool,
    /// The name of the last command it ran.
    last: &'static str,
    active: Instant,
}

/// A connection's place in [`Clients`], given up when dropped.
#[derive(Debug)]
pub(crate) struct Registered {
    clients: Arc<Clients>,
    pub(crate) client: Arc<Client>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.clients.lock().remove(&self.client.id);
    }
}

/// Which connections `CLIENT KILL` or `CLIENT LIST` means, beyond being
/// the caller's key's.
#[derive(Debug, Default)]
pub(crate) struct Filter {
    pub(crate) ids: Option<Vec<u64>>,
    pub(crate) addr: Option<String>,
    pub(crate) laddr: Option<String>,
    pub(crate) user: Option<Vec<u8>>,
    /// `TYPE` other than `normal`: no connection here is of it.
    pub(crate) none: bool,
    /// Leaves out the caller's own connection.
    pub(crate) skip: Option<u64>,
}

impl Clients {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Client>>> {
        self.all.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a connection from `addr` to `laddr`.
    pub(crate) fn register(
        self: &Arc<Self>,
        id: u64,
        addr: Option<SocketAddr>,
        laddr: Option<SocketAddr>,
    ) -> Registered {
        let now = Instant::now();
        let client = Arc::new(Client {
            id,
            addr,
            laddr,
            opened: now,
            state: Mutex::new(State {
                key: None,
                database: None,
                name: Vec::new(),
                lib_name: Vec::new(),
                lib_ver: Vec::new(),
                resp3: false,
                last: "NULL",
                active: now,
            }),
            killed: tokio::sync::Notify::new(),
        });
        self.lock().insert(id, Arc::clone(&client));
        Registered {
            clients: Arc::clone(self),
            client,
        }
    }

    /// The connections opened with API key `key` that `filter` names, by id.
    pub(crate) fn of_key(&self, key: &str, filter: &Filter) -> Vec<Arc<Client>> {
        if filter.none {
            return Vec::new();
        }
        let mut found: Vec<Arc<Client>> = (self.lock().values())
            .filter(|c| c.matches(key, filter))
            .cloned()
            .collect();
        found.sort_by_key(|c| c.id);
        found
    }
}

impl Client {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn matches(&self, key: &str, filter: &Filter) -> bool {
        let state = self.state();
        state.key.as_deref() == Some(key)
            && filter.skip != Some(self.id)
            && filter.ids.as_ref().is_none_or(|ids| ids.contains(&self.id))
            && filter.addr.as_ref().is_none_or(|a| *a == shown(self.addr))
            && filter
                .laddr
                .as_ref()
                .is_none_or(|a| *a == shown(self.laddr))
            && (filter.user.as_deref())
                .is_none_or(|u| state.database.as_deref().map(str::as_bytes) == Some(u))
    }

    /// Authenticated with `key` on `database`, or not at all.
    pub(crate) fn authenticated(&self, as_: Option<(&str, &str)>) {
        let mut state = self.state();
        state.key = as_.map(|(key, _)| key.to_owned());
        state.database = as_.map(|(_, db)| db.to_owned());
    }

    pub(crate) fn set_name(&self, name: &[u8]) {
        self.state().name = name.to_vec();
    }

    /// `CLIENT SETINFO LIB-NAME | LIB-VER`.
    pub(crate) fn set_lib(&self, version: bool, value: &[u8]) {
        let mut state = self.state();
        let field = if version {
            &mut state.lib_ver
        } else {
            &mut state.lib_name
        };
        *field = value.to_vec();
    }

    pub(crate) fn set_resp3(&self, resp3: bool) {
        self.state().resp3 = resp3;
    }

    /// Records that the connection runs command `name`.
    pub(crate) fn ran(&self, name: &'static str) {
        let mut state = self.state();
        state.last = name;
        state.active = Instant::now();
    }

    /// Ends the connection once it is between commands.
    pub(crate) fn kill(&self) {
        self.killed.notify_one();
    }

    /// Until another connection ends this one.
    pub(crate) async fn killed(&self) {
        self.killed.notified().await;
    }

    /// The connection as `CLIENT LIST` shows it: one line, Redis's fields
    /// that mean something here, in Redis's order.
    pub(crate) fn line(&self, out: &mut String) {
        let state = self.state();
        let now = Instant::now();
        let _ = writeln!(
            out,
            "id={} addr={} laddr={} name={} age={} idle={} flags=N db=0 cmd={} user={} lib-name={} lib-ver={} resp={}",
            self.id,
            shown(self.addr),
            shown(self.laddr),
            String::from_utf8_lossy(&state.name),
            now.duration_since(self.opened).as_secs(),
            now.duration_since(state.active).as_secs(),
            state.last.to_ascii_lowercase(),
            state.database.as_deref().unwrap_or("default"),
            String::from_utf8_lossy(&state.lib_name),
            String::from_utf8_lossy(&state.lib_ver),
            if state.resp3 { 3 } else { 2 },
        );
    }
}

/// An address as `CLIENT LIST` shows it and `CLIENT KILL ADDR` names it.
fn shown(addr: Option<SocketAddr>) -> String {
    addr.map(|a| a.to_string()).unwrap_or_default()
}
