//! What each command does. Replies and errors follow Redis's, word for word
//! where clients look at them (`WRONGTYPE`, `NOAUTH`, "wrong number of
//! arguments").

use super::store::{Db, Entry, Item, Kind, StoreError, decode_hash, encode_hash, now_ms};
use super::table::{self, COMMANDS, InMulti};
use super::{Conn, Flow, Session, error_reply};
use crate::api::{AccessError, access};

/// Version told to clients that look: the Redis command set this speaks.
const REDIS_VERSION: &str = "7.2.0";

/// Commands a connection may send before `AUTH`.
const BEFORE_AUTH: [&str; 4] = ["PING", "HELLO", "AUTH", "QUIT"];

/// The reply to send instead of a command's, with its first word.
pub(super) type Refusal = (&'static str, String);

pub(super) fn wrong_args(name: &str) -> Refusal {
    (
        "ERR",
        format!(
            "wrong number of arguments for '{}' command",
            name.to_ascii_lowercase()
        ),
    )
}

/// Redis's answer to a command it does not have: the name and the start
/// of the arguments, within 128 characters each.
pub(super) fn unknown_command(args: &[&[u8]]) -> Refusal {
    let name: String = String::from_utf8_lossy(args[0]).chars().take(128).collect();
    let mut shown = String::new();
    for arg in &args[1..] {
        if shown.len() >= 128 {
            break;
        }
        let room = 128 - shown.len();
        let arg: String = String::from_utf8_lossy(arg).chars().take(room).collect();
        shown.push_str(&format!("'{arg}' "));
    }
    (
        "ERR",
        format!("unknown command '{name}', with args beginning with: {shown}"),
    )
}

fn syntax() -> Refusal {
    ("ERR", "syntax error".into())
}

fn not_integer() -> Refusal {
    ("ERR", "value is not an integer or out of range".into())
}

pub(super) fn wrong_type() -> Refusal {
    (
        "WRONGTYPE",
        "Operation against a key holding the wrong kind of value".into(),
    )
}

fn store_error(e: StoreError) -> Refusal {
    error_reply(&e)
}

/// An integer as Redis reads one (its `string2ll`): an optional `-`, then
/// digits without a leading zero — `0` alone, never `-0`, `007`, `+1`, ` 1`
/// or the empty string — within 64 bits.
fn int(arg: &[u8]) -> Option<i64> {
    let digits = arg.strip_prefix(b"-").unwrap_or(arg);
    let canonical = match digits {
        [b'0'] => digits.len() == arg.len(),
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if !canonical || arg.len() > 20 {
        return None;
    }
    std::str::from_utf8(arg).ok()?.parse().ok()
}

fn int_arg(arg: &[u8]) -> Result<i64, Refusal> {
    int(arg).ok_or_else(not_integer)
}

/// A command or option name in capitals, without allocating.
#[derive(Clone, Copy, Default)]
struct Upper {
    bytes: [u8; 24],
    len: usize,
}

impl Upper {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

/// `name` in capitals, if it is ASCII and short enough to be a name this knows.
fn upper(name: &[u8]) -> Option<Upper> {
    if name.len() > 24 || !name.is_ascii() {
        return None;
    }
    let mut out = Upper {
        len: name.len(),
        ..Upper::default()
    };
    for (o, b) in out.bytes.iter_mut().zip(name) {
        *o = b.to_ascii_uppercase();
    }
    Some(out)
}

impl Conn {
    /// Runs one command and writes its reply.
    pub(super) async fn execute(&mut self, args: &[&[u8]]) -> Flow {
        let Some(upper) = upper(args[0]) else {
            self.fail_multi();
            let (prefix, message) = unknown_command(args);
            self.out.error(prefix, &message);
            return Flow::Continue;
        };
        let name = upper.as_str();
        if self.session.is_none() && !BEFORE_AUTH.contains(&name) {
            self.fail_multi();
            self.out.error("NOAUTH", "Authentication required.");
            return Flow::Continue;
        }
        if self.multi.is_some() {
            let spec = table::find(name);
            if spec.is_none_or(|s| s.in_multi != InMulti::AtOnce) {
                self.queue(spec, args);
                return Flow::Continue;
            }
        }
        match self.dispatch(name, args).await {
            Ok(flow) => flow,
            Err((prefix, message)) => {
                self.out.error(prefix, &message);
                Flow::Continue
            }
        }
    }

    async fn dispatch(&mut self, name: &str, args: &[&[u8]]) -> Result<Flow, Refusal> {
        let n = args.len();
        let check = |ok: bool| if ok { Ok(()) } else { Err(wrong_args(name)) };
        match name {
            "PING" => {
                check(n <= 2)?;
                match args.get(1) {
                    Some(msg) => self.out.bulk(msg),
                    None => self.out.simple("PONG"),
                }
            }
            "ECHO" => {
                check(n == 2)?;
                self.out.bulk(args[1]);
            }
            "QUIT" => {
                self.out.ok();
                return Ok(Flow::Close);
            }
            "AUTH" => {
                check(n == 2 || n == 3)?;
                if n == 2 {
                    return Err((
                        "ERR",
                        "AUTH needs the database: AUTH <database> <api-key>".into(),
                    ));
                }
                self.auth(args[1], args[2])?;
                self.out.ok();
            }
            "HELLO" => self.hello(args)?,
            "MULTI" | "EXEC" | "DISCARD" | "WATCH" | "UNWATCH" => {
                self.revalidate()?;
                match name {
                    "MULTI" => {
                        check(n == 1)?;
                        self.multi()?;
                    }
                    "EXEC" => {
                        check(n == 1)?;
                        self.exec().await?;
                    }
                    "DISCARD" => {
                        check(n == 1)?;
                        self.discard()?;
                    }
                    "WATCH" => {
                        check(n >= 2)?;
                        self.watch(&args[1..]).await?;
                    }
                    _ => {
                        check(n == 1)?;
                        self.unwatch();
                    }
                }
            }
            _ => {
                self.revalidate()?;
                self.data_command(name, args).await?;
            }
        }
        Ok(Flow::Continue)
    }

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
    pub(super) fn revalidate(&mut self) -> Result<(), Refusal> {
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
            match upper(args[i]).as_ref().map(Upper::as_str) {
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

    async fn data_command(&mut self, name: &str, args: &[&[u8]]) -> Result<(), Refusal> {
        let n = args.len();
        let check = |ok: bool| if ok { Ok(()) } else { Err(wrong_args(name)) };
        match name {
            "SELECT" => {
                check(n == 2)?;
                if int(args[1]) != Some(0) {
                    return Err(("ERR", "DB index is out of range".into()));
                }
                self.out.ok();
            }
            "DBSIZE" => {
                check(n == 1)?;
                let session = self.session.as_ref().expect("authenticated");
                let count = self.store.count(&session.db).await;
                self.out.int(count as i64);
            }
            "INFO" => {
                let session = self.session.as_ref().expect("authenticated");
                let keys = self.store.count(&session.db).await;
                let text = format!(
                    "# Server\r\nredis_version:{REDIS_VERSION}\r\nshoal_version:{}\r\nredis_mode:standalone\r\n\r\n# Keyspace\r\ndb0:keys={keys}\r\n\r\n# Shoal\r\ndatabase:{}\r\n",
                    env!("CARGO_PKG_VERSION"),
                    session.db.db.name,
                );
                self.out.bulk(text.as_bytes());
            }
            "COMMAND" => match args
                .get(1)
                .and_then(|a| upper(a))
                .as_ref()
                .map(Upper::as_str)
            {
                Some("COUNT") => self.out.int(COMMANDS.len() as i64),
                Some("LIST") => {
                    self.out.array(COMMANDS.len());
                    for spec in COMMANDS {
                        self.out.bulk(spec.name.to_ascii_lowercase().as_bytes());
                    }
                }
                _ => self.out.array(0),
            },
            "CONFIG" => {
                // Tools ask for settings Shoal does not have as Redis names them.
                self.out.map(0);
            }
            "CLIENT" => self.client(args)?,
            "TYPE" => {
                check(n == 2)?;
                let kind = match self.lookup(args[1]).await? {
                    None => "none",
                    Some(e) if e.kind == Kind::Hash => "hash",
                    Some(_) => "string",
                };
                self.out.simple(kind);
            }
            "GET" => {
                check(n == 2)?;
                match self.read_string(args[1], false).await? {
                    Some(v) => self.out.bulk(&v),
                    None => self.out.null(),
                }
            }
            "SET" => {
                check(n >= 3)?;
                self.set(args).await?;
            }
            "MSET" => {
                check(n >= 3 && !n.is_multiple_of(2))?;
                // A key given twice takes its last value, as in Redis; one
                // request writes each key once.
                let mut pairs: Vec<(&[u8], &[u8])> = Vec::with_capacity(n / 2);
                for p in args[1..].chunks(2) {
                    match pairs.iter_mut().find(|(k, _)| *k == p[0]) {
                        Some(pair) => pair.1 = p[1],
                        None => pairs.push((p[0], p[1])),
                    }
                }
                let keys: Vec<&[u8]> = pairs.iter().map(|p| p.0).collect();
                let (store, db, batch, out) = self.parts();
                let _locks = store.lock_keys(db, &keys).await;
                let items: Vec<_> = pairs
                    .iter()
                    .map(|&(key, value)| Item::string(key, value, None))
                    .collect();
                store.write(db, batch, &items).await.map_err(store_error)?;
                out.ok();
            }
            "MGET" => {
                check(n >= 2)?;
                let entries = self.lookup_many(&args[1..]).await?;
                self.out.array(entries.len());
                for (key, entry) in args[1..].iter().zip(entries) {
                    match entry {
                        Some(e) if e.kind == Kind::String && e.parts == 0 => self.out.bulk(&e.head),
                        Some(e) if e.kind == Kind::String => {
                            match self.read_string(key, false).await? {
                                Some(v) => self.out.bulk(&v),
                                None => self.out.null(),
                            }
                        }
                        _ => self.out.null(),
                    }
                }
            }
            "DEL" => {
                check(n >= 2)?;
                let (store, db, batch, out) = self.parts();
                let _locks = store.lock_keys(db, &args[1..]).await;
                let mut deleted = 0;
                for key in &args[1..] {
                    if let Some(entry) = store.lookup(db, batch, key).await.map_err(store_error)? {
                        store
                            .delete(db, batch, key, &entry)
                            .await
                            .map_err(store_error)?;
                        deleted += 1;
                    }
                }
                out.int(deleted);
            }
            "EXISTS" => {
                check(n >= 2)?;
                let entries = self.lookup_many(&args[1..]).await?;
                self.out.int(entries.iter().flatten().count() as i64);
            }
            "INCR" | "DECR" => {
                check(n == 2)?;
                let by = if name == "INCR" { 1 } else { -1 };
                let v = self.incr(args[1], by).await?;
                self.out.int(v);
            }
            "INCRBY" | "DECRBY" => {
                check(n == 3)?;
                let by = int_arg(args[2])?;
                let by = if name == "INCRBY" {
                    by
                } else {
                    by.checked_neg()
                        .ok_or_else(|| ("ERR", "decrement would overflow".to_owned()))?
                };
                let v = self.incr(args[1], by).await?;
                self.out.int(v);
            }
            "APPEND" => {
                check(n == 3)?;
                let len = self
                    .modify_string(args[1], |v| {
                        v.extend_from_slice(args[2]);
                        Ok(())
                    })
                    .await?;
                self.out.int(len as i64);
            }
            "STRLEN" => {
                check(n == 2)?;
                let len = self
                    .read_string(args[1], false)
                    .await?
                    .map_or(0, |v| v.len());
                self.out.int(len as i64);
            }
            "GETRANGE" | "SUBSTR" => {
                check(n == 4)?;
                let (start, end) = (int_arg(args[2])?, int_arg(args[3])?);
                let value = self.read_string(args[1], false).await?.unwrap_or_default();
                self.out.bulk(range(&value, start, end));
            }
            "SETRANGE" => {
                check(n == 4)?;
                let offset = int_arg(args[2])?;
                if offset < 0 {
                    return Err(("ERR", "offset is out of range".into()));
                }
                let data = args[3];
                let end = (offset as u64).saturating_add(data.len() as u64);
                let max = self.store.max_value() as u64;
                // As Redis: the type first, then nothing to write (never too
                // large), then the size.
                if data.is_empty() {
                    let len = self
                        .read_string(args[1], false)
                        .await?
                        .map_or(0, |v| v.len());
                    self.out.int(len as i64);
                } else {
                    let len = self
                        .modify_string(args[1], |v| {
                            if end > max {
                                return Err((
                                    "ERR",
                                    "string exceeds maximum allowed size (proto-max-bulk-len)"
                                        .into(),
                                ));
                            }
                            let (offset, end) = (offset as usize, end as usize);
                            if v.len() < end {
                                v.resize(end, 0);
                            }
                            v[offset..end].copy_from_slice(data);
                            Ok(())
                        })
                        .await?;
                    self.out.int(len as i64);
                }
            }
            "HSET" | "HMSET" => {
                check(n >= 4 && n.is_multiple_of(2))?;
                let mut added = 0;
                self.modify_hash(args[1], |fields| {
                    for pair in args[2..].chunks(2) {
                        match fields.iter_mut().find(|(f, _)| f == pair[0]) {
                            Some((_, v)) => *v = pair[1].to_vec(),
                            None => {
                                fields.push((pair[0].to_vec(), pair[1].to_vec()));
                                added += 1;
                            }
                        }
                    }
                    Ok(())
                })
                .await?;
                if name == "HSET" {
                    self.out.int(added);
                } else {
                    self.out.ok();
                }
            }
            "HGET" => {
                check(n == 3)?;
                let fields = self.read_hash(args[1]).await?;
                self.out.hash_field(&fields, args[2]);
            }
            "HMGET" => {
                check(n >= 3)?;
                let fields = self.read_hash(args[1]).await?;
                self.out.array(n - 2);
                for want in &args[2..] {
                    self.out.hash_field(&fields, want);
                }
            }
            "HGETALL" => {
                check(n == 2)?;
                let fields = self.read_hash(args[1]).await?;
                self.out.hash_all(&fields);
            }
            "HLEN" => {
                check(n == 2)?;
                let len = self.read_hash(args[1]).await?.len();
                self.out.int(len as i64);
            }
            "HEXISTS" => {
                check(n == 3)?;
                let fields = self.read_hash(args[1]).await?;
                self.out
                    .int(i64::from(fields.iter().any(|(f, _)| f == args[2])));
            }
            "HDEL" => {
                check(n >= 3)?;
                let mut removed = 0;
                self.modify_hash(args[1], |fields| {
                    let before = fields.len();
                    fields.retain(|(f, _)| !args[2..].contains(&f.as_slice()));
                    removed = (before - fields.len()) as i64;
                    Ok(())
                })
                .await?;
                self.out.int(removed);
            }
            "HINCRBY" => {
                check(n == 4)?;
                let by = int_arg(args[3])?;
                let mut result = 0;
                self.modify_hash(args[1], |fields| {
                    let slot = match fields.iter().position(|(f, _)| f == args[2]) {
                        Some(i) => i,
                        None => {
                            fields.push((args[2].to_vec(), b"0".to_vec()));
                            fields.len() - 1
                        }
                    };
                    let old = int(&fields[slot].1)
                        .ok_or_else(|| ("ERR", "hash value is not an integer".to_owned()))?;
                    result = old.checked_add(by).ok_or_else(|| {
                        ("ERR", "increment or decrement would overflow".to_owned())
                    })?;
                    fields[slot].1 = result.to_string().into_bytes();
                    Ok(())
                })
                .await?;
                self.out.int(result);
            }
            "EXPIRE" | "PEXPIRE" => {
                check(n >= 3)?;
                let unit = if name == "EXPIRE" { 1000 } else { 1 };
                let set = self.expire(args, unit).await?;
                self.out.int(i64::from(set));
            }
            "TTL" | "PTTL" => {
                check(n == 2)?;
                let reply = match self.lookup(args[1]).await? {
                    None => -2,
                    Some(Entry { expires: None, .. }) => -1,
                    Some(Entry {
                        expires: Some(at), ..
                    }) => {
                        let left = (at - now_ms()).max(0);
                        if name == "TTL" {
                            (left + 500) / 1000
                        } else {
                            left
                        }
                    }
                };
                self.out.int(reply);
            }
            "PERSIST" => {
                check(n == 2)?;
                let (store, db, batch, out) = self.parts();
                let _lock = store.lock_keys(db, &[args[1]]).await;
                let entry = store
                    .lookup(db, batch, args[1])
                    .await
                    .map_err(store_error)?;
                let had = entry.is_some_and(|e| e.expires.is_some());
                if had {
                    store
                        .set_expiry(db, batch, args[1], None)
                        .await
                        .map_err(store_error)?;
                }
                out.int(i64::from(had));
            }
            _ => return Err(unknown_command(args)),
        }
        Ok(())
    }

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

    /// The store, the session's database and the connection's batch.
    pub(super) fn parts(
        &mut self,
    ) -> (
        &super::Store,
        &mut Db,
        &mut crate::tc::batch::Batch,
        &mut super::frame::Out,
    ) {
        let session = self.session.as_mut().expect("authenticated");
        (&self.store, &mut session.db, &mut self.batch, &mut self.out)
    }

    async fn lookup(&mut self, key: &[u8]) -> Result<Option<Entry>, Refusal> {
        let (store, db, batch, _) = self.parts();
        store.lookup(db, batch, key).await.map_err(store_error)
    }

    async fn lookup_many(&mut self, keys: &[&[u8]]) -> Result<Vec<Option<Entry>>, Refusal> {
        let (store, db, batch, _) = self.parts();
        store
            .lookup_many(db, batch, keys)
            .await
            .map_err(store_error)
    }

    /// A string key's value; `WRONGTYPE` for a hash.
    pub(super) async fn read_string(
        &mut self,
        key: &[u8],
        holds: bool,
    ) -> Result<Option<Vec<u8>>, Refusal> {
        let (store, db, batch, _) = self.parts();
        match store
            .read(db, batch, key, holds)
            .await
            .map_err(store_error)?
        {
            None => Ok(None),
            Some((e, _)) if e.kind != Kind::String => Err(wrong_type()),
            Some((_, v)) => Ok(Some(v)),
        }
    }

    /// A hash key's fields, none when it does not exist; `WRONGTYPE` for a string.
    pub(super) async fn read_hash(
        &mut self,
        key: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Refusal> {
        let (store, db, batch, _) = self.parts();
        match store
            .read(db, batch, key, false)
            .await
            .map_err(store_error)?
        {
            None => Ok(Vec::new()),
            Some((e, _)) if e.kind != Kind::Hash => Err(wrong_type()),
            Some((_, v)) => Ok(decode_hash(&v)),
        }
    }

    /// `SET key value [NX|XX] [GET] [EX s|PX ms|KEEPTTL]`.
    async fn set(&mut self, args: &[&[u8]]) -> Result<(), Refusal> {
        let (key, value) = (args[1], args[2]);
        let (mut nx, mut xx, mut get, mut keep_ttl) = (false, false, false, false);
        let mut expires = None;
        let mut expiry_option: Option<Upper> = None;
        let mut i = 3;
        while i < args.len() {
            let option = upper(args[i]).unwrap_or_default();
            match option.as_str() {
                "NX" => nx = true,
                "XX" => xx = true,
                "GET" => get = true,
                "KEEPTTL" => keep_ttl = true,
                // The same expiry option again is taken (the last wins), as
                // Redis takes it; two different ones are a syntax error.
                "EX" | "PX" | "EXAT" | "PXAT"
                    if i + 1 < args.len()
                        && expiry_option.is_none_or(|o: Upper| o.as_str() == option.as_str()) =>
                {
                    expiry_option = Some(option);
                    i += 1;
                    let t = int_arg(args[i])?;
                    let invalid = || ("ERR", "invalid expire time in 'set' command".to_owned());
                    if t <= 0 {
                        return Err(invalid());
                    }
                    let at = match option.as_str() {
                        "EX" => t.checked_mul(1000).and_then(|ms| ms.checked_add(now_ms())),
                        "PX" => t.checked_add(now_ms()),
                        "EXAT" => t.checked_mul(1000),
                        _ => Some(t),
                    };
                    expires = Some(at.ok_or_else(invalid)?);
                }
                _ => return Err(syntax()),
            }
            i += 1;
        }
        if (nx && xx) || (keep_ttl && expires.is_some()) {
            return Err(syntax());
        }
        let (store, db, batch, out) = self.parts();
        let _lock = store.lock_keys(db, &[key]).await;
        let mut old = None;
        if nx || xx || get || keep_ttl {
            old = store
                .read(db, batch, key, true)
                .await
                .map_err(store_error)?;
            if get && old.as_ref().is_some_and(|(e, _)| e.kind != Kind::String) {
                return Err(wrong_type());
            }
        }
        let exists = old.is_some();
        if (nx && exists) || (xx && !exists) {
            match (get, old) {
                (true, Some((_, v))) => out.bulk(&v),
                _ => out.null(),
            }
            return Ok(());
        }
        if keep_ttl {
            expires = old.as_ref().and_then(|(e, _)| e.expires);
        }
        store
            .write(db, batch, &[Item::string(key, value, expires)])
            .await
            .map_err(store_error)?;
        match (get, old) {
            (true, Some((_, v))) => out.bulk(&v),
            (true, None) => out.null(),
            _ => out.ok(),
        }
        Ok(())
    }

    /// Adds `by` to a string key's integer value; answers the new value.
    async fn incr(&mut self, key: &[u8], by: i64) -> Result<i64, Refusal> {
        let mut result = 0;
        self.modify_string(key, |v| {
            let old = if v.is_empty() { Some(0) } else { int(v) };
            let old = old.ok_or_else(not_integer)?;
            result = old
                .checked_add(by)
                .ok_or_else(|| ("ERR", "increment or decrement would overflow".to_owned()))?;
            *v = result.to_string().into_bytes();
            Ok(())
        })
        .await?;
        Ok(result)
    }

    /// Changes a string key's value (empty when absent) under its lock,
    /// keeping its expiry; answers the new length.
    async fn modify_string(
        &mut self,
        key: &[u8],
        change: impl FnOnce(&mut Vec<u8>) -> Result<(), Refusal>,
    ) -> Result<usize, Refusal> {
        let (store, db, batch, _) = self.parts();
        let _lock = store.lock_keys(db, &[key]).await;
        let (expires, mut value) = match store
            .read(db, batch, key, true)
            .await
            .map_err(store_error)?
        {
            None => (None, Vec::new()),
            Some((e, _)) if e.kind != Kind::String => return Err(wrong_type()),
            Some((e, v)) => (e.expires, v),
        };
        change(&mut value)?;
        store
            .write(db, batch, &[Item::string(key, &value, expires)])
            .await
            .map_err(store_error)?;
        Ok(value.len())
    }

    /// Changes a hash key's fields (none when absent) under its lock,
    /// keeping its expiry; a hash left without fields is deleted.
    async fn modify_hash(
        &mut self,
        key: &[u8],
        change: impl FnOnce(&mut Vec<(Vec<u8>, Vec<u8>)>) -> Result<(), Refusal>,
    ) -> Result<(), Refusal> {
        let (store, db, batch, _) = self.parts();
        let _lock = store.lock_keys(db, &[key]).await;
        let read = store
            .read(db, batch, key, true)
            .await
            .map_err(store_error)?;
        let (entry, mut fields) = match read {
            None => (None, Vec::new()),
            Some((e, _)) if e.kind != Kind::Hash => return Err(wrong_type()),
            Some((e, v)) => (Some(e), decode_hash(&v)),
        };
        change(&mut fields)?;
        match (&entry, fields.is_empty()) {
            (None, true) => {}
            (Some(e), true) => store.delete(db, batch, key, e).await.map_err(store_error)?,
            _ => {
                let value = encode_hash(&fields);
                let expires = entry.and_then(|e| e.expires);
                store
                    .write(
                        db,
                        batch,
                        &[Item {
                            key,
                            kind: Kind::Hash,
                            value: &value,
                            expires,
                        }],
                    )
                    .await
                    .map_err(store_error)?;
            }
        }
        Ok(())
    }

    /// `EXPIRE key seconds [NX|XX|GT|LT]` (or `PEXPIRE`, `unit` 1): whether
    /// the expiry was set.
    async fn expire(&mut self, args: &[&[u8]], unit: i64) -> Result<bool, Refusal> {
        let t = int_arg(args[2])?;
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for option in &args[3..] {
            match upper(option).as_ref().map(Upper::as_str) {
                Some("NX") => nx = true,
                Some("XX") => xx = true,
                Some("GT") => gt = true,
                Some("LT") => lt = true,
                _ => {
                    let shown: String = String::from_utf8_lossy(option).chars().take(64).collect();
                    return Err(("ERR", format!("Unsupported option {shown}")));
                }
            }
        }
        if nx && (xx || gt || lt) {
            return Err((
                "ERR",
                "NX and XX, GT or LT options at the same time are not compatible".into(),
            ));
        }
        if gt && lt {
            return Err((
                "ERR",
                "GT and LT options at the same time are not compatible".into(),
            ));
        }
        let command = if unit == 1 { "pexpire" } else { "expire" };
        let at = t
            .checked_mul(unit)
            .and_then(|ms| ms.checked_add(now_ms()))
            .ok_or_else(|| ("ERR", format!("invalid expire time in '{command}' command")))?;
        let key = args[1];
        let (store, db, batch, _) = self.parts();
        let _lock = store.lock_keys(db, &[key]).await;
        let Some(entry) = store.lookup(db, batch, key).await.map_err(store_error)? else {
            return Ok(false);
        };
        // A key without an expiry counts as one that never comes (GT, LT).
        let current = entry.expires;
        let refused = (nx && current.is_some())
            || (xx && current.is_none())
            || (gt && current.is_none_or(|c| at <= c))
            || (lt && current.is_some_and(|c| at >= c));
        if refused {
            return Ok(false);
        }
        if at <= now_ms() {
            store
                .delete(db, batch, key, &entry)
                .await
                .map_err(store_error)?;
        } else {
            store
                .set_expiry(db, batch, key, Some(at))
                .await
                .map_err(store_error)?;
        }
        Ok(true)
    }
}

fn access_refusal(e: &AccessError) -> Refusal {
    match e {
        AccessError::Unauthenticated(_) => ("NOAUTH", e.to_string()),
        AccessError::NotGranted(_) | AccessError::NoSuchDatabase(_) => ("NOPERM", e.to_string()),
    }
}

/// `GETRANGE`'s bytes of `value` from `start` to `end`, both included,
/// negative counting from the end.
fn range(value: &[u8], start: i64, end: i64) -> &[u8] {
    let len = value.len() as i64;
    if len == 0 || (start < 0 && end < 0 && start > end) {
        return &[];
    }
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 {
        (len + end).max(0)
    } else {
        end.min(len - 1)
    };
    if start > end || start >= len {
        return &[];
    }
    &value[start as usize..=end as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getrange_follows_redis() {
        let v = b"This is a string";
        assert_eq!(range(v, 0, 3), b"This");
        assert_eq!(range(v, -3, -1), b"ing");
        assert_eq!(range(v, 0, -1), v);
        assert_eq!(range(v, 10, 100), b"string");
        assert_eq!(range(v, 5, 2), b"");
        assert_eq!(range(v, 100, 200), b"");
        assert_eq!(range(b"", 0, -1), b"");
        assert_eq!(range(v, -100, -200), b"");
        assert_eq!(range(v, -1, -5), b"");
        assert_eq!(range(v, -100, 0), b"T");
        assert_eq!(range(v, 0, -100), b"T");
    }

    #[test]
    fn integers_are_read_as_redis_reads_them() {
        assert_eq!(int(b"-12"), Some(-12));
        assert_eq!(int(b"+1"), None);
        assert_eq!(int(b" 1"), None);
        assert_eq!(int(b""), None);
        assert_eq!(int(b"9223372036854775808"), None);
        assert_eq!(int(b"\xff"), None);
        assert_eq!(int(b"0"), Some(0));
        assert_eq!(int(b"-0"), None);
        assert_eq!(int(b"007"), None);
        assert_eq!(int(b"-01"), None);
        assert_eq!(int(b"00"), None);
        assert_eq!(int(b"-"), None);
        assert_eq!(int(b"1 "), None);
        assert_eq!(int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(int(b"9223372036854775807"), Some(i64::MAX));
    }
}
