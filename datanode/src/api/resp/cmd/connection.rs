//! The connection's own commands: `PING`, `ECHO`, `QUIT`, `AUTH`, `HELLO`,
//! `SELECT` and `CLIENT`. `AUTH <database> <api-key>` (or `HELLO 3 AUTH …`)
//! binds the connection to one database: it makes the [`Session`].

use super::{Command, REDIS_VERSION, Refusal, Spec, int, syntax, upper, wrong_args};
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
            self.session = None;
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
                self.session = None;
                return Err(e);
            }
        };
        let (db, grant) = access(engine, &checked, name).map_err(|e| {
            self.session = None;
            access_refusal(&e)
        })?;
        self.session = Some(Session {
            key: checked,
            presented: key.to_vec(),
            db: Db::new(db, grant),
        });
        Ok(())
    }

    /// Checks the session's key again if it changed on the node since.
    pub(in crate::api::resp) fn revalidate(&mut self) -> Result<(), Refusal> {
        let session = self.session.as_ref().expect("authenticated");
        if session.key.use_now() {
            return Ok(());
        }
        let (presented, database) = (session.presented.clone(), session.db.db.name.to_string());
        self.session = None;
        let engine = self.store.engine();
        let key = engine
            .api_keys()
            .verify(&presented)
            .map_err(|e| ("NOAUTH", e.to_string()))?;
        let (db, grant) = access(engine, &key, &database).map_err(|e| access_refusal(&e))?;
        self.session = Some(Session {
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
                    self.name = Some(args[i + 1].to_vec());
                    i += 2;
                }
                _ => return Err(syntax()),
            }
        }
        self.out.resp3 = proto == 3;
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

    /// `CLIENT SETNAME | GETNAME | ID | SETINFO | INFO`.
    fn client(&mut self, args: &[&[u8]]) -> Result<(), Refusal> {
        let sub = args.get(1).and_then(|a| upper(a)).unwrap_or_default();
        match (sub.as_str(), args.len()) {
            ("SETNAME", 3) => {
                self.name = Some(args[2].to_vec());
                self.out.ok();
            }
            ("GETNAME", 2) => match &self.name {
                Some(name) => self.out.bulk(&name.clone()),
                None => self.out.null(),
            },
            ("ID", 2) => self.out.int(self.id as i64),
            ("SETINFO", 4) => self.out.ok(),
            ("INFO", 2) => {
                let line = format!(
                    "id={} name={}\n",
                    self.id,
                    String::from_utf8_lossy(self.name.as_deref().unwrap_or_default())
                );
                self.out.bulk(line.as_bytes());
            }
            _ => {
                return Err((
                    "ERR",
                    "unknown CLIENT subcommand or wrong number of arguments".into(),
                ));
            }
        }
        Ok(())
    }
}

fn access_refusal(e: &AccessError) -> Refusal {
    match e {
        AccessError::Unauthenticated(_) => ("NOAUTH", e.to_string()),
        AccessError::NotGranted(_) | AccessError::NoSuchDatabase(_) => ("NOPERM", e.to_string()),
    }
}
