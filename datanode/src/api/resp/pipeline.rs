//! Runs of pipelined reads (`GET`, `HGET`, `HGETALL`, in any mix), or of
//! plain `SET`s, each done as one request to the transaction coordinator —
//! as `MGET` and `MSET` would be, but with each command answered on its own.
//! A client that pipelines pays one trip to the workers (and, for writes,
//! one redo-log commit) per run instead of one per command. A value of
//! several rows is read on its own, as the command alone would.
//!
//! A run stops at any other command, at a `SET` with options or a value of
//! more than one row, at a key given twice among its `SET`s, and at
//! `MAX_RUN` commands. If the database's limits refuse the run as a whole
//! because of its size (`max_transaction_ops`, a burst), its commands run
//! one at a time instead.

use std::ops::Range;

use shoal_quota::QuotaError;

use super::cmd::wrong_type;
use super::store::{Item, Kind, MAX_KEY, PART, StoreError, decode_hash};
use super::{Conn, error_reply};
use crate::tc::TcError;

/// Most commands in one run.
pub(super) const MAX_RUN: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Run {
    Read,
    Set,
}

/// A command that can be part of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Get,
    HGet,
    HGetAll,
    Set,
}

impl Op {
    pub(super) fn run(self) -> Run {
        match self {
            Op::Get | Op::HGet | Op::HGetAll => Run::Read,
            Op::Set => Run::Set,
        }
    }

    fn name(self) -> &'static [u8] {
        self.command().as_bytes()
    }

    fn command(self) -> &'static str {
        match self {
            Op::Get => "GET",
            Op::HGet => "HGET",
            Op::HGetAll => "HGETALL",
            Op::Set => "SET",
        }
    }
}

/// The command `args` is, if it can be part of a run.
pub(super) fn op_of(args: &[&[u8]]) -> Option<Op> {
    let key_ok = |k: &[u8]| k.len() <= MAX_KEY;
    let is = |name: &[u8], op: Op| name.eq_ignore_ascii_case(op.name());
    match args {
        [name, key] if is(name, Op::Get) && key_ok(key) => Some(Op::Get),
        [name, key] if is(name, Op::HGetAll) && key_ok(key) => Some(Op::HGetAll),
        [name, key, _] if is(name, Op::HGet) && key_ok(key) => Some(Op::HGet),
        [name, key, value] if is(name, Op::Set) && key_ok(key) && value.len() <= PART => {
            Some(Op::Set)
        }
        _ => None,
    }
}

/// One command of a run: which, and where its key and its argument (the
/// value of `SET`, the field of `HGET`) lie.
#[derive(Debug, Clone)]
pub(super) struct Command {
    pub(super) op: Op,
    pub(super) key: Range<usize>,
    pub(super) arg: Range<usize>,
}

/// Whether a refusal of the whole run is about its size, not its commands.
fn too_big(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Tc(TcError::Quota(
            QuotaError::TransactionTooLarge { .. } | QuotaError::ExceedsBurst { .. }
        ))
    )
}

impl Conn {
    /// Runs `commands` (all of kind `run`, their bytes in `buf`) and writes
    /// a reply for each, in order.
    pub(super) async fn execute_run(&mut self, run: Run, buf: &[u8], commands: &[Command]) {
        if let Err((prefix, message)) = self.revalidate() {
            for _ in commands {
                self.out.error(prefix, &message);
            }
            return;
        }
        if let (Some(registered), Some(last)) = (&self.client, commands.last()) {
            registered.client.ran(last.op.command());
        }
        let keys: Vec<&[u8]> = commands.iter().map(|c| &buf[c.key.clone()]).collect();
        let args: Vec<&[u8]> = commands.iter().map(|c| &buf[c.arg.clone()]).collect();
        let done = match run {
            Run::Read => self.read_run(commands, &keys, &args).await,
            Run::Set => self.set_run(&keys, &args).await,
        };
        match done {
            Ok(()) => {}
            Err(e) if too_big(&e) => {
                for ((command, key), arg) in commands.iter().zip(&keys).zip(&args) {
                    let name = command.op.name();
                    let full: &[&[u8]] = match command.op {
                        Op::Get | Op::HGetAll => &[name, key],
                        Op::HGet | Op::Set => &[name, key, arg],
                    };
                    self.execute(full).await;
                }
            }
            Err(e) => {
                let (prefix, message) = error_reply(&e);
                for _ in commands {
                    self.out.error(prefix, &message);
                }
            }
        }
    }

    async fn read_run(
        &mut self,
        commands: &[Command],
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<(), StoreError> {
        let mut ctx = self.ctx().expect("a run is of an authenticated connection");
        let (store, db, batch, _) = ctx.parts();
        let entries = store.lookup_many(db, batch, keys).await?;
        for (((command, key), arg), entry) in commands.iter().zip(keys).zip(args).zip(entries) {
            let kind = match command.op {
                Op::Get => Kind::String,
                _ => Kind::Hash,
            };
            match entry {
                Some(e) if e.kind != kind => {
                    let (prefix, message) = wrong_type();
                    ctx.out.error(prefix, &message);
                }
                Some(e) if command.op == Op::Get && e.parts == 0 => ctx.out.bulk(&e.head),
                Some(_) if command.op == Op::Get => match ctx.read_string(key, false).await {
                    Ok(Some(v)) => ctx.out.bulk(&v),
                    Ok(None) => ctx.out.null(),
                    Err((prefix, message)) => ctx.out.error(prefix, &message),
                },
                None if command.op == Op::Get => ctx.out.null(),
                // A hash: its fields are in the row unless it has parts.
                entry => {
                    let fields = match entry {
                        None => Ok(Vec::new()),
                        Some(e) if e.parts == 0 => Ok(decode_hash(&e.head)),
                        Some(_) => ctx.read_hash(key).await,
                    };
                    match fields {
                        Ok(fields) if command.op == Op::HGet => ctx.out.hash_field(&fields, arg),
                        Ok(fields) => ctx.out.hash_all(&fields),
                        Err((prefix, message)) => ctx.out.error(prefix, &message),
                    }
                }
            }
        }
        Ok(())
    }

    async fn set_run(&mut self, keys: &[&[u8]], values: &[&[u8]]) -> Result<(), StoreError> {
        let mut ctx = self.ctx().expect("a run is of an authenticated connection");
        let (store, db, batch, out) = ctx.parts();
        let _locks = store.lock_keys(db, keys).await;
        let items: Vec<Item<'_>> = keys
            .iter()
            .zip(values)
            .map(|(key, value)| Item::string(key, value, None))
            .collect();
        for outcome in store.write_each(db, batch, &items).await? {
            match outcome {
                Ok(()) => out.ok(),
                Err(e) => {
                    let (prefix, message) = error_reply(&e);
                    out.error(prefix, &message);
                }
            }
        }
        Ok(())
    }
}
