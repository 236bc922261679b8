//! `MULTI`, `EXEC`, `DISCARD`, `WATCH` and `UNWATCH`, as Redis 7 has them.
//!
//! After `MULTI` a command is checked (known, arity) and queued; one that
//! fails the check is answered with its error and makes `EXEC` answer
//! `EXECABORT` and apply nothing. `EXEC` takes the locks of every key the
//! queued and watched commands name, aborts (a null reply) if a watched
//! key was written since `WATCH` or has expired, runs the commands against
//! the connection's transaction overlay — each sees the writes of those
//! before it, and one that fails (`WRONGTYPE`, say) answers its error in
//! the reply as in Redis — and commits what they wrote in one atomic
//! request through the transaction coordinator. If the coordinator refuses
//! that request (a rate limit, a quota, `max_transaction_ops`), `EXEC`
//! answers that error and nothing is applied.

use std::sync::Arc;

use super::{Command, InMulti, Refusal, Spec, unknown_command, wrong_args};
use crate::api::resp::store::now_ms;
use crate::api::resp::{Conn, error_reply};

/// Most commands one transaction queues.
pub(in crate::api::resp) const MAX_QUEUED: usize = 10_000;
/// Most keys one connection watches.
pub(in crate::api::resp) const MAX_WATCHED: usize = 10_000;

/// The commands queued since `MULTI`.
#[derive(Debug, Default)]
pub(in crate::api::resp) struct Multi {
    queued: Vec<(&'static Spec, Vec<Vec<u8>>)>,
    /// Bytes of the queued commands' arguments.
    bytes: usize,
    /// A command was refused while queueing: `EXEC` applies nothing.
    failed: bool,
}

/// A key `WATCH` looks at: its stripe's version then, and its expiry.
#[derive(Debug)]
pub(in crate::api::resp) struct Watched {
    key: Vec<u8>,
    version: u64,
    expires: Option<i64>,
}

pub(in crate::api::resp) enum Cmd<'a> {
    Multi,
    Exec,
    Discard,
    Watch(&'a [&'a [u8]]),
    Unwatch,
}

pub(super) fn parse<'a>(spec: &'static Spec, args: &'a [&'a [u8]]) -> Result<Command<'a>, Refusal> {
    let cmd = match spec.name {
        "MULTI" => Cmd::Multi,
        "EXEC" => Cmd::Exec,
        "DISCARD" => Cmd::Discard,
        "WATCH" => Cmd::Watch(&args[1..]),
        "UNWATCH" => Cmd::Unwatch,
        _ => return Err(unknown_command(args)),
    };
    Ok(Command::Transactions(cmd))
}

impl Cmd<'_> {
    pub(super) async fn apply(self, conn: &mut Conn) -> Result<(), Refusal> {
        match self {
            Cmd::Multi => conn.multi(),
            Cmd::Exec => conn.exec().await,
            Cmd::Discard => conn.discard(),
            Cmd::Watch(keys) => conn.watch(keys).await,
            Cmd::Unwatch => {
                conn.unwatch();
                Ok(())
            }
        }
    }
}

impl Conn {
    /// Queues a command `spec` names (none: one this does not have), sent
    /// after `MULTI`; answers `QUEUED` or why not.
    pub(in crate::api::resp) fn queue(&mut self, spec: Option<&'static Spec>, args: &[&[u8]]) {
        let max_bytes = self.store.max_value();
        let multi = self.multi.as_mut().expect("in MULTI");
        let bytes: usize = args.iter().map(|a| a.len()).sum();
        let refusal: Option<Refusal> = match spec {
            None => Some(unknown_command(args)),
            Some(spec) if spec.in_multi == InMulti::Refused => {
                Some(("ERR", "Command not allowed inside a transaction".into()))
            }
            Some(spec) if !spec.takes(args.len()) => Some(wrong_args(spec.name)),
            Some(_) if multi.queued.len() >= MAX_QUEUED => Some((
                "ERR",
                format!("a transaction queues at most {MAX_QUEUED} commands"),
            )),
            Some(_) if multi.bytes + bytes > max_bytes => Some((
                "ERR",
                format!("a transaction's commands hold at most {max_bytes} bytes"),
            )),
            Some(spec) => {
                multi.bytes += bytes;
                multi
                    .queued
                    .push((spec, args.iter().map(|a| a.to_vec()).collect()));
                self.out.simple("QUEUED");
                return;
            }
        };
        if let Some((prefix, message)) = refusal {
            multi.failed = true;
            self.out.error(prefix, &message);
        }
    }

    /// A connection that gets `NOAUTH` while queueing cannot commit.
    pub(in crate::api::resp) fn fail_multi(&mut self) {
        if let Some(multi) = self.multi.as_mut() {
            multi.failed = true;
        }
    }

    fn multi(&mut self) -> Result<(), Refusal> {
        if self.multi.is_some() {
            return Err(("ERR", "MULTI calls can not be nested".into()));
        }
        self.multi = Some(Multi::default());
        self.out.ok();
        Ok(())
    }

    fn discard(&mut self) -> Result<(), Refusal> {
        if self.multi.take().is_none() {
            return Err(("ERR", "DISCARD without MULTI".into()));
        }
        self.watched.clear();
        self.out.ok();
        Ok(())
    }

    async fn watch(&mut self, keys: &[&[u8]]) -> Result<(), Refusal> {
        if self.multi.is_some() {
            return Err(("ERR", "WATCH inside MULTI is not allowed".into()));
        }
        if self.watched.len() + keys.len() > MAX_WATCHED {
            return Err((
                "ERR",
                format!("a connection watches at most {MAX_WATCHED} keys"),
            ));
        }
        let entries = (self.ctx().expect("authenticated"))
            .lookup_many(keys)
            .await?;
        let id = self.session.as_ref().expect("authenticated").db.db.id;
        for (key, entry) in keys.iter().zip(entries) {
            self.watched.push(Watched {
                key: key.to_vec(),
                version: self.store.version(id, key),
                expires: entry.and_then(|e| e.expires),
            });
        }
        self.out.ok();
        Ok(())
    }

    fn unwatch(&mut self) {
        self.watched.clear();
        self.out.ok();
    }

    async fn exec(&mut self) -> Result<(), Refusal> {
        let Some(multi) = self.multi.take() else {
            return Err(("ERR", "EXEC without MULTI".into()));
        };
        let watched = std::mem::take(&mut self.watched);
        if multi.failed {
            return Err((
                "EXECABORT",
                "Transaction discarded because of previous errors.".into(),
            ));
        }
        let commands: Vec<Vec<&[u8]>> = (multi.queued.iter())
            .map(|(_, c)| c.iter().map(Vec::as_slice).collect())
            .collect();
        let mut keys: Vec<&[u8]> = watched.iter().map(|w| w.key.as_slice()).collect();
        for ((spec, _), args) in multi.queued.iter().zip(&commands) {
            keys.extend(spec.keys(args));
        }
        let store = Arc::clone(&self.store);
        let id = self.session.as_ref().expect("authenticated").db.db.id;
        let _locks = store.lock(id, &keys).await;
        let now = now_ms();
        let touched = watched.iter().any(|w| {
            store.version(id, &w.key) != w.version || w.expires.is_some_and(|at| at <= now)
        });
        if touched {
            self.out.null_array();
            return Ok(());
        }
        let mark = self.out.buf.len();
        self.out.array(commands.len());
        self.session.as_mut().expect("authenticated").db.begin();
        for args in &commands {
            // Boxed: a queued command runs through `execute`, which runs `EXEC`.
            Box::pin(self.execute(args)).await;
            // A command that lost the session (a revoked key) ends the
            // transaction: nothing it queued is applied.
            if self.session.is_none() {
                self.out.buf.truncate(mark);
                return Err(("NOAUTH", "the API key is no longer valid".into()));
            }
        }
        let committed = {
            let mut ctx = self.ctx().expect("authenticated");
            let (store, db, batch, _) = ctx.parts();
            let committed = store.commit(db, batch).await;
            db.rollback();
            committed
        };
        if let Err(e) = committed {
            self.out.buf.truncate(mark);
            return Err(error_reply(&e));
        }
        Ok(())
    }
}
