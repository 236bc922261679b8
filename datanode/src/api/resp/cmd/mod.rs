//! The commands, in the shape of mini-redis: one table of names, arities
//! and where their keys are ([`COMMANDS`]), which `COMMAND`, the arity
//! errors, `MULTI`'s checks and dispatch all read; a [`Command`] parsed
//! once from the frame's arguments; one module per group, each with its
//! commands' parsing, what they do, their replies and their tests.
//!
//! A data command is applied to a [`Ctx`], which only an authenticated
//! connection has (`Conn::ctx`): an unauthenticated one cannot reach one.
//! Replies and errors follow Redis's, word for word where clients look at
//! them (`WRONGTYPE`, `NOAUTH`, "wrong number of arguments").
//!
//! - `connection`: PING, ECHO, QUIT, AUTH, HELLO, SELECT, CLIENT.
//! - `server`: DBSIZE, FLUSHDB, INFO, COMMAND, CONFIG, TIME.
//! - `strings`: GET, SET, SETEX, PSETEX, SETNX, GETSET, GETDEL, GETEX, MSET,
//!   MSETNX, MGET, INCR…, INCRBYFLOAT, APPEND, STRLEN, GETRANGE, SETRANGE.
//! - `hashes`: HSET, HSETNX, HGET, HMGET, HGETALL, HKEYS, HVALS, HLEN,
//!   HSTRLEN, HEXISTS, HDEL, HINCRBY, HINCRBYFLOAT, HRANDFIELD, HSCAN.
//! - `keys`: DEL, UNLINK, EXISTS, TOUCH, TYPE, SCAN, KEYS, RANDOMKEY, RENAME,
//!   RENAMENX, COPY, EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL,
//!   EXPIRETIME, PEXPIRETIME, PERSIST.
//! - `transactions`: MULTI, EXEC, DISCARD, WATCH, UNWATCH.

mod connection;
mod hashes;
mod keys;
mod server;
mod strings;
pub(super) mod transactions;

use super::frame::Out;
use super::store::{Db, Entry, Kind, Store, StoreError, decode_hash};
use super::{Conn, Flow, Session, error_reply};
use crate::tc::batch::Batch;

/// Version told to clients that look: the Redis command set this speaks.
pub(super) const REDIS_VERSION: &str = "7.2.0";

/// The reply to send instead of a command's, with its first word.
pub(super) type Refusal = (&'static str, String);

/// Where a command's keys are among its arguments (the name is argument 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keys {
    /// None.
    None,
    /// Argument 1.
    First,
    /// Every argument from 1 on.
    All,
    /// Every other argument from 1 on (`MSET key value key value`).
    Pairs,
    /// Arguments 1 and 2 (`COPY source destination [options]`).
    Two,
}

/// What a command sent after `MULTI` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InMulti {
    /// Queued for `EXEC`.
    Queued,
    /// Run at once (`EXEC`, `DISCARD`, `MULTI`, `WATCH`, `QUIT`), as Redis.
    AtOnce,
    /// Refused, and the transaction with it: `AUTH` or `HELLO` would move
    /// the connection to another database in the middle of its transaction.
    Refused,
}

/// Parses a command's arguments (the name first), which fit its arity.
type Parse = for<'a> fn(&'static Spec, &'a [&'a [u8]]) -> Result<Command<'a>, Refusal>;

/// A command as the table has it.
#[derive(Debug)]
pub(super) struct Spec {
    pub(super) name: &'static str,
    /// Redis's: `n` is exactly `n` arguments with the name, `-n` at least `n`.
    pub(super) arity: i32,
    pub(super) keys: Keys,
    pub(super) in_multi: InMulti,
    /// Whether it works before `AUTH`; every other command checks the
    /// connection's key first.
    pub(super) before_auth: bool,
    /// Whether it is the connection's own, run on the node the client is
    /// connected to; every other command runs on its database's primary.
    pub(super) here: bool,
    /// Whether it only reads: a node holding a replica of its database
    /// answers it from that replica.
    pub(super) reads: bool,
    /// `COMMAND DOCS`: Redis's group, the Redis version that brought it,
    /// and what it does.
    pub(super) group: &'static str,
    pub(super) since: &'static str,
    pub(super) summary: &'static str,
    parse: Parse,
}

const fn spec(name: &'static str, arity: i32, keys: Keys, parse: Parse) -> Spec {
    Spec {
        name,
        arity,
        keys,
        in_multi: InMulti::Queued,
        before_auth: false,
        here: false,
        reads: false,
        group: "",
        since: "",
        summary: "",
        parse,
    }
}

impl Spec {
    const fn in_multi(self, in_multi: InMulti) -> Spec {
        Spec { in_multi, ..self }
    }

    const fn before_auth(self) -> Spec {
        Spec {
            before_auth: true,
            ..self
        }
    }

    const fn here(self) -> Spec {
        Spec { here: true, ..self }
    }

    const fn reads(self) -> Spec {
        Spec {
            reads: true,
            ..self
        }
    }

    const fn doc(self, group: &'static str, since: &'static str, summary: &'static str) -> Spec {
        Spec {
            group,
            since,
            summary,
            ..self
        }
    }
}

/// Every command this speaks.
pub(super) static COMMANDS: [Spec; 75] = {
    use Keys::{All, First, None, Pairs};
    use {InMulti::AtOnce, InMulti::Refused, transactions as t};
    use {connection as c, hashes as h, keys as k, server as s, strings as st};
    [
        spec("PING", -1, None, c::parse).before_auth().here()
            .doc("connection", "1.0.0", "Returns the server's liveliness response."),
        spec("ECHO", 2, None, c::parse).here()
            .doc("connection", "1.0.0", "Returns the given string."),
        spec("QUIT", -1, None, c::parse)
            .in_multi(AtOnce)
            .before_auth()
            .here()
            .doc("connection", "1.0.0", "Closes the connection."),
        spec("AUTH", -2, None, c::parse)
            .in_multi(Refused)
            .before_auth()
            .here()
            .doc("connection", "1.0.0", "Authenticates the connection: AUTH <database> <api-key>."),
        spec("HELLO", -1, None, c::parse)
            .in_multi(Refused)
            .before_auth()
            .here()
            .doc("connection", "6.0.0", "Handshakes with the server: protocol version, AUTH, SETNAME."),
        spec("SELECT", 2, None, c::parse).here()
            .doc("connection", "1.0.0", "Changes the selected database (only 0: a connection has one database)."),
        spec("CLIENT", -2, None, c::parse).here()
            .doc("connection", "2.4.0", "Connection commands: ID, GETNAME, SETNAME, SETINFO, INFO, LIST, KILL, NO-EVICT, NO-TOUCH."),
        spec("DBSIZE", 1, None, s::parse)
            .doc("server", "1.0.0", "Returns the number of keys in the database."),
        spec("INFO", -1, None, s::parse).here()
            .doc("server", "1.0.0", "Returns information and statistics about the server and the database."),
        spec("COMMAND", -1, None, s::parse).here()
            .doc("server", "2.8.13", "Returns detailed information about the commands: COUNT, LIST, INFO, DOCS."),
        spec("CONFIG", -2, None, s::parse).here()
            .doc("server", "2.0.0", "Reads the settings clients look at: CONFIG GET."),
        spec("FLUSHDB", -1, None, s::parse).in_multi(Refused)
            .doc("server", "1.0.0", "Removes all keys from the database."),
        spec("TIME", 1, None, s::parse).here()
            .doc("server", "2.6.0", "Returns the server time."),
        spec("GET", 2, First, st::parse).reads()
            .doc("string", "1.0.0", "Returns the string value of a key."),
        spec("SET", -3, First, st::parse)
            .doc("string", "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist."),
        spec("SETEX", 4, First, st::parse)
            .doc("string", "2.0.0", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist."),
        spec("PSETEX", 4, First, st::parse)
            .doc("string", "2.6.0", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist."),
        spec("SETNX", 3, First, st::parse)
            .doc("string", "1.0.0", "Set the string value of a key only when the key doesn't exist."),
        spec("GETSET", 3, First, st::parse)
            .doc("string", "1.0.0", "Returns the previous string value of a key after setting it to a new value."),
        spec("GETDEL", 2, First, st::parse)
            .doc("string", "6.2.0", "Returns the string value of a key after deleting the key."),
        spec("GETEX", -2, First, st::parse)
            .doc("string", "6.2.0", "Returns the string value of a key after setting its expiration time."),
        spec("MSET", -3, Pairs, st::parse)
            .doc("string", "1.0.1", "Atomically creates or modifies the string values of one or more keys."),
        spec("MSETNX", -3, Pairs, st::parse)
            .doc("string", "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist."),
        spec("MGET", -2, All, st::parse).reads()
            .doc("string", "1.0.0", "Atomically returns the string values of one or more keys."),
        spec("INCR", 2, First, st::parse)
            .doc("string", "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
        spec("DECR", 2, First, st::parse)
            .doc("string", "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
        spec("INCRBY", 3, First, st::parse)
            .doc("string", "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
        spec("DECRBY", 3, First, st::parse)
            .doc("string", "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist."),
        spec("INCRBYFLOAT", 3, First, st::parse)
            .doc("string", "2.6.0", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
        spec("APPEND", 3, First, st::parse)
            .doc("string", "2.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist."),
        spec("STRLEN", 2, First, st::parse).reads()
            .doc("string", "2.2.0", "Returns the length of a string value."),
        spec("GETRANGE", 4, First, st::parse).reads()
            .doc("string", "2.4.0", "Returns a substring of the string stored at a key."),
        spec("SUBSTR", 4, First, st::parse).reads()
            .doc("string", "1.0.0", "Returns a substring from a string value."),
        spec("SETRANGE", 4, First, st::parse)
            .doc("string", "2.2.0", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist."),
        spec("HSET", -4, First, h::parse)
            .doc("hash", "2.0.0", "Creates or modifies the value of a field in a hash."),
        spec("HMSET", -4, First, h::parse)
            .doc("hash", "2.0.0", "Sets the values of multiple fields."),
        spec("HSETNX", 4, First, h::parse)
            .doc("hash", "2.0.0", "Sets the value of a field in a hash only when the field doesn't exist."),
        spec("HGET", 3, First, h::parse).reads()
            .doc("hash", "2.0.0", "Returns the value of a field in a hash."),
        spec("HMGET", -3, First, h::parse).reads()
            .doc("hash", "2.0.0", "Returns the values of all fields in a hash."),
        spec("HGETALL", 2, First, h::parse).reads()
            .doc("hash", "2.0.0", "Returns all fields and values in a hash."),
        spec("HKEYS", 2, First, h::parse).reads()
            .doc("hash", "2.0.0", "Returns all fields in a hash."),
        spec("HVALS", 2, First, h::parse).reads()
            .doc("hash", "2.0.0", "Returns all values in a hash."),
        spec("HLEN", 2, First, h::parse).reads()
            .doc("hash", "2.0.0", "Returns the number of fields in a hash."),
        spec("HSTRLEN", 3, First, h::parse).reads()
            .doc("hash", "3.2.0", "Returns the length of the value of a field."),
        spec("HEXISTS", 3, First, h::parse).reads()
            .doc("hash", "2.0.0", "Determines whether a field exists in a hash."),
        spec("HDEL", -3, First, h::parse)
            .doc("hash", "2.0.0", "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain."),
        spec("HINCRBY", 4, First, h::parse)
            .doc("hash", "2.0.0", "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist."),
        spec("HINCRBYFLOAT", 4, First, h::parse)
            .doc("hash", "2.6.0", "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist."),
        spec("HRANDFIELD", -2, First, h::parse).reads()
            .doc("hash", "6.2.0", "Returns one or more random fields from a hash."),
        spec("HSCAN", -3, First, h::parse).reads()
            .doc("hash", "2.8.0", "Iterates over fields and values of a hash."),
        spec("TYPE", 2, First, k::parse).reads()
            .doc("generic", "1.0.0", "Determines the type of value stored at a key."),
        spec("DEL", -2, All, k::parse)
            .doc("generic", "1.0.0", "Deletes one or more keys."),
        spec("UNLINK", -2, All, k::parse)
            .doc("generic", "4.0.0", "Asynchronously deletes one or more keys."),
        spec("TOUCH", -2, All, k::parse).reads()
            .doc("generic", "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed."),
        spec("EXISTS", -2, All, k::parse).reads()
            .doc("generic", "1.0.0", "Determines whether one or more keys exist."),
        spec("EXPIRE", -3, First, k::parse)
            .doc("generic", "1.0.0", "Sets the expiration time of a key in seconds."),
        spec("PEXPIRE", -3, First, k::parse)
            .doc("generic", "2.6.0", "Sets the expiration time of a key in milliseconds."),
        spec("EXPIREAT", -3, First, k::parse)
            .doc("generic", "1.2.0", "Sets the expiration time of a key to a Unix timestamp."),
        spec("PEXPIREAT", -3, First, k::parse)
            .doc("generic", "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp."),
        spec("EXPIRETIME", 2, First, k::parse).reads()
            .doc("generic", "7.0.0", "Returns the expiration time of a key as a Unix timestamp."),
        spec("PEXPIRETIME", 2, First, k::parse).reads()
            .doc("generic", "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp."),
        spec("TTL", 2, First, k::parse).reads()
            .doc("generic", "1.0.0", "Returns the expiration time in seconds of a key."),
        spec("PTTL", 2, First, k::parse).reads()
            .doc("generic", "2.6.0", "Returns the expiration time in milliseconds of a key."),
        spec("PERSIST", 2, First, k::parse)
            .doc("generic", "2.2.0", "Removes the expiration time of a key."),
        spec("SCAN", -2, None, k::parse).reads()
            .doc("generic", "2.8.0", "Iterates over the key names in the database."),
        spec("KEYS", 2, None, k::parse).reads()
            .doc("generic", "1.0.0", "Returns all key names that match a pattern."),
        spec("RANDOMKEY", 1, None, k::parse).reads()
            .doc("generic", "1.0.0", "Returns a random key name from the database."),
        spec("RENAME", 3, All, k::parse)
            .doc("generic", "1.0.0", "Renames a key and overwrites the destination."),
        spec("RENAMENX", 3, All, k::parse)
            .doc("generic", "1.0.0", "Renames a key only when the target key name doesn't exist."),
        spec("COPY", -3, Keys::Two, k::parse)
            .doc("generic", "6.2.0", "Copies the value of a key to a new key."),
        spec("MULTI", 1, None, t::parse).in_multi(AtOnce)
            .doc("transactions", "1.2.0", "Starts a transaction."),
        spec("EXEC", 1, None, t::parse).in_multi(AtOnce)
            .doc("transactions", "1.2.0", "Executes all commands in a transaction."),
        spec("DISCARD", 1, None, t::parse).in_multi(AtOnce)
            .doc("transactions", "2.0.0", "Discards a transaction."),
        spec("WATCH", -2, All, t::parse).in_multi(AtOnce)
            .doc("transactions", "2.2.0", "Monitors changes to keys to determine the execution of a transaction."),
        spec("UNWATCH", 1, None, t::parse)
            .doc("transactions", "2.2.0", "Forgets about watched keys of a transaction."),
    ]
};

/// The command named `name` (in capitals): one hash lookup per command.
pub(super) fn find(name: &str) -> Option<&'static Spec> {
    static BY_NAME: std::sync::OnceLock<rustc_hash::FxHashMap<&'static str, &'static Spec>> =
        std::sync::OnceLock::new();
    let by_name = BY_NAME.get_or_init(|| COMMANDS.iter().map(|c| (c.name, c)).collect());
    by_name.get(name).copied()
}

/// Whether the command named `name` (any case) runs on its database's
/// primary: every command but the connection's own. (One this does not
/// have is refused there as here, in the same words.)
pub(super) fn runs_at_primary(name: &[u8]) -> bool {
    upper(name)
        .and_then(|name| find(name.as_str()))
        .is_none_or(|spec| !spec.here)
}

/// Whether the command named `name` (any case) only reads: a node with a
/// replica of its database answers it from there.
pub(super) fn only_reads(name: &[u8]) -> bool {
    upper(name)
        .and_then(|name| find(name.as_str()))
        .is_some_and(|spec| spec.reads)
}

/// Whether the command named `name` (any case) may bind the connection to
/// another database or protocol: `AUTH` and `HELLO`.
pub(super) fn changes_session(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"AUTH") || name.eq_ignore_ascii_case(b"HELLO")
}

impl Spec {
    /// Whether `n` arguments (the name included) fit the arity.
    pub(super) fn takes(&self, n: usize) -> bool {
        let n = n as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 { n == arity } else { n >= -arity }
    }

    /// The keys among `args`.
    pub(super) fn keys<'a>(&self, args: &[&'a [u8]]) -> Vec<&'a [u8]> {
        let from = args.get(1..).unwrap_or_default();
        match self.keys {
            Keys::None => Vec::new(),
            Keys::First => from.iter().take(1).copied().collect(),
            Keys::All => from.to_vec(),
            Keys::Pairs => from.iter().step_by(2).copied().collect(),
            Keys::Two => from.iter().take(2).copied().collect(),
        }
    }

    /// The command `args` make; they fit the arity.
    fn parse<'a>(&'static self, args: &'a [&'a [u8]]) -> Result<Command<'a>, Refusal> {
        (self.parse)(self, args)
    }
}

/// A command parsed from its arguments, ready to apply.
pub(super) enum Command<'a> {
    Connection(connection::Cmd<'a>),
    Transactions(transactions::Cmd<'a>),
    /// A command on the session's database: applied to its `Ctx`.
    Data(Data<'a>),
}

pub(super) enum Data<'a> {
    Server(server::Cmd<'a>),
    Strings(strings::Cmd<'a>),
    Hashes(hashes::Cmd<'a>),
    Keys(keys::Cmd<'a>),
}

impl Command<'_> {
    async fn apply(self, conn: &mut Conn) -> Result<Flow, Refusal> {
        let data = match self {
            Command::Connection(c) => return c.apply(conn),
            Command::Transactions(c) => return c.apply(conn).await.map(|()| Flow::Continue),
            Command::Data(data) => data,
        };
        let ctx = &mut conn.ctx().ok_or_else(noauth)?;
        match data {
            Data::Server(c) => c.apply(ctx).await?,
            Data::Strings(c) => c.apply(ctx).await?,
            Data::Hashes(c) => c.apply(ctx).await?,
            Data::Keys(c) => c.apply(ctx).await?,
        }
        Ok(Flow::Continue)
    }
}

/// Redis's answer to a command that needs `AUTH` first.
fn noauth() -> Refusal {
    ("NOAUTH", "Authentication required.".into())
}

impl Conn {
    /// Runs one command and writes its reply.
    pub(super) async fn execute(&mut self, args: &[&[u8]]) -> Flow {
        match self.try_execute(args).await {
            Ok(flow) => flow,
            Err((prefix, message)) => {
                self.out.error(prefix, &message);
                Flow::Continue
            }
        }
    }

    async fn try_execute(&mut self, args: &[&[u8]]) -> Result<Flow, Refusal> {
        let Some(name) = upper(args[0]) else {
            self.fail_multi();
            return Err(unknown_command(args));
        };
        let spec = find(name.as_str());
        if self.session.is_none() && !spec.is_some_and(|s| s.before_auth) {
            self.fail_multi();
            return Err(noauth());
        }
        if self.multi.is_some() && spec.is_none_or(|s| s.in_multi != InMulti::AtOnce) {
            self.queue(spec, args);
            return Ok(Flow::Continue);
        }
        let Some(spec) = spec else {
            return Err(unknown_command(args));
        };
        if let Some(registered) = &self.client {
            registered.client.ran(spec.name);
        }
        if !spec.takes(args.len()) {
            return Err(wrong_args(spec.name));
        }
        if !spec.before_auth {
            self.revalidate()?;
        }
        spec.parse(args)?.apply(self).await
    }

    /// What a data command works with; none before `AUTH`.
    pub(super) fn ctx(&mut self) -> Option<Ctx<'_>> {
        let session = self.session.as_mut()?;
        Some(Ctx {
            store: &self.store,
            session,
            batch: &mut self.batch,
            out: &mut self.out,
        })
    }
}

/// What a command of an authenticated connection works with: the store,
/// the connection's session, its batch and its replies.
pub(super) struct Ctx<'c> {
    pub(super) store: &'c Store,
    pub(super) session: &'c mut Session,
    pub(super) batch: &'c mut Batch,
    pub(super) out: &'c mut Out,
}

impl Ctx<'_> {
    /// The store, the session's database and the connection's batch.
    pub(super) fn parts(&mut self) -> (&Store, &mut Db, &mut Batch, &mut Out) {
        (self.store, &mut self.session.db, self.batch, self.out)
    }

    pub(super) async fn lookup(&mut self, key: &[u8]) -> Result<Option<Entry>, Refusal> {
        let (store, db, batch, _) = self.parts();
        store.lookup(db, batch, key).await.map_err(store_error)
    }

    pub(super) async fn lookup_many(
        &mut self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Entry>>, Refusal> {
        let (store, db, batch, _) = self.parts();
        store
            .lookup_many(db, batch, keys)
            .await
            .map_err(store_error)
    }

    /// `MGET`'s answers for `keys`, whose live entries are `entries`: a
    /// string's value, none for a missing key or a hash. Gathered whole
    /// before any is written, so that a read that fails answers its error
    /// instead of half an array.
    pub(super) async fn mget(
        &mut self,
        keys: &[&[u8]],
        entries: impl IntoIterator<Item = Option<Entry>>,
    ) -> Result<Vec<Option<Vec<u8>>>, Refusal> {
        let mut values = Vec::with_capacity(keys.len());
        for (key, entry) in keys.iter().zip(entries) {
            values.push(match entry {
                Some(e) if e.kind == Kind::String && e.parts == 0 => Some(e.head),
                Some(e) if e.kind == Kind::String => self.read_string(key, false).await?,
                _ => None,
            });
        }
        Ok(values)
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
}

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
    // As Redis prints them (C's "%.*s"): each word up to its first NUL
    // byte, the name within 128 bytes, the arguments while they take fewer
    // than 128 bytes in all. (Bytes that are not UTF-8 are shown replaced.)
    let c_str =
        |word: &[u8]| -> Vec<u8> { word.iter().take_while(|&&b| b != 0).copied().collect() };
    let mut name = c_str(args[0]);
    name.truncate(128);
    let mut shown: Vec<u8> = Vec::new();
    for arg in &args[1..] {
        if shown.len() >= 128 {
            break;
        }
        let mut arg = c_str(arg);
        arg.truncate(128 - shown.len());
        shown.push(b'\'');
        shown.extend_from_slice(&arg);
        shown.extend_from_slice(b"' ");
    }
    (
        "ERR",
        format!(
            "unknown command '{}', with args beginning with: {}",
            String::from_utf8_lossy(&name),
            String::from_utf8_lossy(&shown)
        ),
    )
}

/// Redis's answer to a subcommand it does not have (`args`: the command's
/// name, then the subcommand).
pub(super) fn subcommand(args: &[&[u8]]) -> Refusal {
    let shown: String = String::from_utf8_lossy(args.get(1).copied().unwrap_or_default())
        .chars()
        .take(64)
        .collect();
    (
        "ERR",
        format!(
            "unknown subcommand or wrong number of arguments for '{shown}'. Try {} HELP.",
            String::from_utf8_lossy(args[0]).to_ascii_uppercase()
        ),
    )
}

fn syntax() -> Refusal {
    ("ERR", "syntax error".into())
}

pub(super) fn not_integer() -> Refusal {
    ("ERR", "value is not an integer or out of range".into())
}

pub(super) fn overflow() -> Refusal {
    ("ERR", "increment or decrement would overflow".into())
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
pub(super) fn int(arg: &[u8]) -> Option<i64> {
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
pub(super) struct Upper {
    bytes: [u8; 24],
    len: usize,
}

impl Upper {
    pub(super) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

/// `name` in capitals, if it is ASCII and short enough to be a name this knows.
pub(super) fn upper(name: &[u8]) -> Option<Upper> {
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

/// The option `arg` in capitals ("" when it cannot be one).
fn option(arg: &[u8]) -> Upper {
    upper(arg).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_in_capitals() {
        for (i, c) in COMMANDS.iter().enumerate() {
            assert_eq!(c.name, c.name.to_ascii_uppercase());
            assert!(COMMANDS[..i].iter().all(|d| d.name != c.name), "{}", c.name);
        }
    }

    #[test]
    fn arities_and_keys_read_as_redis_has_them() {
        let get = find("GET").unwrap();
        assert!(get.takes(2) && !get.takes(1) && !get.takes(3));
        let set = find("SET").unwrap();
        assert!(set.takes(3) && set.takes(9) && !set.takes(2));
        let mset = find("MSET").unwrap();
        let args: [&[u8]; 5] = [b"MSET", b"a", b"1", b"b", b"2"];
        assert_eq!(mset.keys(&args), [b"a" as &[u8], b"b"]);
        let del = find("DEL").unwrap();
        assert_eq!(del.keys(&args[..3]), [b"a" as &[u8], b"1"]);
        assert!(find("PING").unwrap().keys(&args).is_empty());
        assert!(find("LPUSH").is_none());
    }

    #[test]
    fn every_command_parses_from_arguments_that_fit_its_arity() {
        // The table's parse function of each command knows its name.
        for spec in &COMMANDS {
            let n = spec.arity.unsigned_abs() as usize;
            let mut args: Vec<&[u8]> = vec![spec.name.as_bytes()];
            args.extend(std::iter::repeat_n(b"1" as &[u8], n.saturating_sub(1)));
            if let Err((_, message)) = spec.parse(&args) {
                assert!(
                    !message.starts_with("unknown command"),
                    "{} is in the table but not in its group: {message}",
                    spec.name
                );
            }
        }
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
