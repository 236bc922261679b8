//! The connection's own commands: `PING`, `ECHO`, `QUIT`, `AUTH`, `HELLO`,
//! `SELECT` and `CLIENT`. `AUTH <database> <api-key>` (or `HELLO 3 AUTH …`)
//! binds the connection to one database: it makes the [`Session`].

use super::{Command, REDIS_VERSION, Refusal, Spec, int, syntax, upper, wrong_args};
use crate::api::resp::clients::Filter;
use crate::api::resp::store::Db;
use crate::api::resp::{Conn, Flow, Session};
use crate::api::{AccessError, access};

pub(in crate::api::resp) enum Cmd<'a> {
    Ping(Option<&'a [u8]>),
    Echo(&'a [u8]),
    Quit,
    Auth { database: &'a [u8], key: &'a [u8] },
    Hello(&'a [&'a [u8]]),
    Select(&'a [u8]),
    Client(&'a [&'a [u8]]),
}

pub(super) fn parse<'a>(spec: &'static Spec, args: &'a [&'a [u8]]) -> Result<Command<'a>, Refusal> {
    let n = args.len();
    let check = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(wrong_args(spec.name))
        }
    };
    let cmd = match spec.name {
        "PING" => {
            check(n <= 2)?;
            Cmd::Ping(args.get(1).copied())
        }
        "ECHO" => Cmd::Echo(args[1]),
        "QUIT" => Cmd::Quit,
        "AUTH" => {
            check(n <= 3)?;
            if n == 2 {
                return Err((
                    "ERR",
                    "AUTH needs the database: AUTH <database> <api-key>".into(),
                ));
            }
            Cmd::Auth {
                database: args[1],
                key: args[2],
            }
        }
        "HELLO" => Cmd::Hello(args),
        "SELECT" => Cmd::Select(args[1]),
        "CLIENT" => Cmd::Client(args),
        _ => return Err(super::unknown_command(args)),
    };
    Ok(Command::Connection(cmd))
}

impl Cmd<'_> {
    pub(super) fn apply(self, conn: &mut Conn) -> Result<Flow, Refusal> {
        let out = &mut conn.out;
        match self {
            Cmd::Ping(Some(msg)) => out.bulk(msg),
            Cmd::Ping(None) => out.simple("PONG"),
            Cmd::Echo(msg) => out.bulk(msg),
            Cmd::Quit => {
                out.ok();
                return Ok(Flow::Close);
            }
            Cmd::Auth { database, key } => {
                conn.auth(database, key)?;
                conn.out.ok();
            }
            Cmd::Hello(args) => conn.hello(args)?,
            Cmd::Select(index) => {
                if int(index) != Some(0) {
                    return Err(("ERR", "DB index is out of range".into()));
                }
                out.ok();
            }
            Cmd::Client(args) => conn.client(args)?,
        }
        Ok(Flow::Continue)
    }
}

impl Conn {
    /// Binds the connection to `database` with `key`.
    fn auth(&mut self, database: &[u8], key: &[u8]) -> Result<(), Refusal> {
        let engine = self.store.engine();
        // As Redis answers a bad password; which part was wrong is not told.
        let invalid = || {
            (
                "WRONGPASS",
                "invalid username-password pair or user is disabled.".to_owned(),
            )
        };
        let name = std::str::from_utf8(database).map_err(|_| invalid())?;
        // Another node group's database: its nodes are named, before the
        // key is looked at (only the nodes of its group hold it).
        if let Some(there) = self.cluster.served_elsewhere(name) {
            self.sign_out();
            return Err((
                "WRONGGROUP",
                format!(
                    "database '{name}' is served by node group {}, not this node's: {}",
                    there.node_group,
                    there.resp_addrs()
                ),
            ));
        }
        // A failed AUTH leaves the connection unauthenticated.
        let checked = engine.api_keys().verify(key).map_err(|_| invalid());
        let checked = match checked {
            Ok(k) => k,
            Err(e) => {
                self.sign_out();
                return Err(e);
            }
        };
        let (db, grant) = access(engine, &checked, name).map_err(|e| {
            self.sign_out();
            access_refusal(&e)
        })?;
        self.sign_in(Session {
            key: checked,
            presented: key.to_vec(),
            db: Db::new(db, grant),
        });
        Ok(())
    }

    fn sign_in(&mut self, session: Session) {
        if let Some(registered) = &self.client {
            let database = session.db.db.name.as_str();
            (registered.client).authenticated(Some((session.key.prefix(), database)));
        }
        self.session = Some(session);
    }

    fn sign_out(&mut self) {
        if let Some(registered) = &self.client {
            registered.client.authenticated(None);
        }
        self.session = None;
    }

    /// Checks the session's key again if it changed on the node since.
    pub(in crate::api::resp) fn revalidate(&mut self) -> Result<(), Refusal> {
        let session = self.session.as_ref().expect("authenticated");
        if session.key.use_now() {
            return Ok(());
        }
        let (presented, database) = (session.presented.clone(), session.db.db.name.to_string());
        self.sign_out();
        let engine = self.store.engine();
        let key = engine
            .api_keys()
            .verify(&presented)
            .map_err(|e| ("NOAUTH", e.to_string()))?;
        let (db, grant) = access(engine, &key, &database).map_err(|e| access_refusal(&e))?;
        self.sign_in(Session {
            key,
            presented,
            db: Db::new(db, grant),
        });
        Ok(())
    }

    /// `HELLO [protover [AUTH database key] [SETNAME name]]`.
    fn hello(&mut self, args: &[&[u8]]) -> Result<(), Refusal> {
        let mut proto = if self.out.resp3 { 3 } else { 2 };
        let mut i = 1;
        if let Some(v) = args.get(1) {
            proto = match int(v) {
                Some(p @ (2 | 3)) => p,
                _ => {
                    return Err(("NOPROTO", "unsupported protocol version".into()));
                }
            };
            i = 2;
        }
        while i < args.len() {
            match upper(args[i]).as_ref().map(super::Upper::as_str) {
                Some("AUTH") if i + 2 < args.len() => {
                    self.auth(args[i + 1], args[i + 2])?;
                    i += 3;
                }
                Some("SETNAME") if i + 1 < args.len() => {
                    self.set_name(args[i + 1])?;
                    i += 2;
                }
                _ => return Err(syntax()),
            }
        }
        self.out.resp3 = proto == 3;
        if let Some(registered) = &self.client {
            registered.client.set_resp3(proto == 3);
        }
        let out = &mut self.out;
        out.map(7);
        out.bulk(b"server");
        out.bulk(b"shoal");
        out.bulk(b"version");
        out.bulk(REDIS_VERSION.as_bytes());
        out.bulk(b"proto");
        out.int(proto);
        out.bulk(b"id");
        out.int(self.id as i64);
        out.bulk(b"mode");
        out.bulk(b"standalone");
        out.bulk(b"role");
        out.bulk(b"master");
        out.bulk(b"modules");
        out.array(0);
        Ok(())
    }

    /// `CLIENT ID | GETNAME | SETNAME | SETINFO | INFO | LIST | KILL |
    /// NO-EVICT | NO-TOUCH`. `LIST` and `KILL` reach only the connections
    /// opened with the caller's API key.
    fn client(&mut self, args: &[&[u8]]) -> Result<(), Refusal> {
        let sub = args.get(1).and_then(|a| upper(a)).unwrap_or_default();
        match (sub.as_str(), args.len()) {
            ("SETNAME", 3) => {
                self.set_name(args[2])?;
                self.out.ok();
            }
            ("GETNAME", 2) => match &self.name {
                Some(name) => self.out.bulk(&name.clone()),
                None => self.out.null(),
            },
            ("ID", 2) => self.out.int(self.id as i64),
            ("SETINFO", 4) => {
                let version = match upper(args[2]).as_ref().map(super::Upper::as_str) {
                    Some("LIB-NAME") => false,
                    Some("LIB-VER") => true,
                    _ => {
                        let shown = String::from_utf8_lossy(args[2]);
                        return Err(("ERR", format!("Unrecognized option '{shown}'")));
                    }
                };
                let value = printable(args[3], if version { "lib-ver" } else { "lib-name" })?;
                if let Some(registered) = &self.client {
                    registered.client.set_lib(version, value);
                }
                self.out.ok();
            }
            ("NO-EVICT" | "NO-TOUCH", 3) => match upper(args[2]).as_ref().map(super::Upper::as_str)
            {
                Some("ON" | "OFF") => self.out.ok(),
                _ => return Err(syntax()),
            },
            ("INFO", 2) => {
                let mut line = String::new();
                if let Some(registered) = &self.client {
                    registered.client.line(&mut line);
                }
                self.out.bulk(line.as_bytes());
            }
            ("LIST", _) => {
                let filter = list_filter(args)?;
                let mut lines = String::new();
                for client in self.clients.of_key(self.key_prefix(), &filter) {
                    client.line(&mut lines);
                }
                self.out.bulk(lines.as_bytes());
            }
            ("KILL", n) if n == 3 || (n > 3 && n.is_multiple_of(2)) => {
                let old_style = n == 3;
                let filter = kill_filter(args, self.id)?;
                let found = self.clients.of_key(self.key_prefix(), &filter);
                for client in &found {
                    client.kill();
                }
                match (old_style, found.len()) {
                    (true, 0) => return Err(("ERR", "No such client".into())),
                    (true, _) => self.out.ok(),
                    (false, killed) => self.out.int(killed as i64),
                }
            }
            ("KILL", _) => return Err(syntax()),
            _ => {
                return Err(super::subcommand(args));
            }
        }
        Ok(())
    }

    /// `CLIENT SETNAME` or `HELLO … SETNAME`: the empty name clears it.
    fn set_name(&mut self, name: &[u8]) -> Result<(), Refusal> {
        let name = printable(name, "Client names")?;
        if let Some(registered) = &self.client {
            registered.client.set_name(name);
        }
        self.name = Some(name.to_vec()).filter(|n| !n.is_empty());
        Ok(())
    }

    /// The prefix of the connection's API key (CLIENT runs only after AUTH).
    fn key_prefix(&self) -> &str {
        self.session.as_ref().map_or("", |s| s.key.prefix())
    }
}

/// `value` if every byte is a printable ASCII character other than a
/// space, as Redis wants of what `CLIENT LIST` shows (`what` names it).
fn printable<'a>(value: &'a [u8], what: &str) -> Result<&'a [u8], Refusal> {
    if value.iter().all(|b| (b'!'..=b'~').contains(b)) {
        Ok(value)
    } else {
        Err((
            "ERR",
            format!("{what} cannot contain spaces, newlines or special characters."),
        ))
    }
}

/// Whether `name` is a client type Redis has; only `normal` clients are here.
fn client_type(name: &[u8]) -> Result<bool, Refusal> {
    match upper(name).as_ref().map(super::Upper::as_str) {
        Some("NORMAL") => Ok(true),
        Some("MASTER" | "SLAVE" | "REPLICA" | "PUBSUB") => Ok(false),
        _ => Err((
            "ERR",
            format!("Unknown client type '{}'", String::from_utf8_lossy(name)),
        )),
    }
}

/// `CLIENT LIST [TYPE type | ID id [id …]]`.
fn list_filter(args: &[&[u8]]) -> Result<Filter, Refusal> {
    let mut filter = Filter::default();
    let option = args.get(2).and_then(|a| upper(a)).unwrap_or_default();
    match (option.as_str(), args.len()) {
        (_, 2) => {}
        ("TYPE", 4) => filter.none = !client_type(args[3])?,
        ("ID", n) if n > 3 => {
            let ids = args[3..].iter().map(|a| match int(a) {
                Some(id) if id > 0 => Ok(id as u64),
                _ => Err(("ERR", "Invalid client ID".to_owned())),
            });
            filter.ids = Some(ids.collect::<Result<_, _>>()?);
        }
        _ => return Err(syntax()),
    }
    Ok(filter)
}

/// `CLIENT KILL addr` (this connection too), or `CLIENT KILL` with
/// `ID`, `TYPE`, `USER`, `ADDR`, `LADDR` and `SKIPME` filters (this
/// connection only with `SKIPME no`).
fn kill_filter(args: &[&[u8]], me: u64) -> Result<Filter, Refusal> {
    let mut filter = Filter::default();
    if let [_, _, addr] = args {
        filter.addr = Some(String::from_utf8_lossy(addr).into_owned());
        return Ok(filter);
    }
    filter.skip = Some(me);
    for pair in args[2..].chunks(2) {
        let value = pair[1];
        let text = || String::from_utf8_lossy(value).into_owned();
        match upper(pair[0]).as_ref().map(super::Upper::as_str) {
            Some("ID") => match int(value) {
                Some(id) if id > 0 => filter.ids = Some(vec![id as u64]),
                _ => return Err(("ERR", "client-id should be greater than 0".into())),
            },
            Some("TYPE") => filter.none = !client_type(value)?,
            Some("ADDR") => filter.addr = Some(text()),
            Some("LADDR") => filter.laddr = Some(text()),
            Some("USER") => filter.user = Some(value.to_vec()),
            Some("SKIPME") => {
                filter.skip = match upper(value).as_ref().map(super::Upper::as_str) {
                    Some("YES") => Some(me),
                    Some("NO") => None,
                    _ => return Err(syntax()),
                }
            }
            _ => return Err(syntax()),
        }
    }
    Ok(filter)
}

fn access_refusal(e: &AccessError) -> Refusal {
    match e {
        AccessError::Unauthenticated(_) => ("NOAUTH", e.to_string()),
        AccessError::NotGranted(_) | AccessError::NoSuchDatabase(_) => ("NOPERM", e.to_string()),
    }
}
