//! Runs of pipelined commands, each done as one request to the transaction
//! coordinator but with each command answered on its own: reads (`GET`,
//! `HGET`, `HGETALL`, `MGET`, in any mix), plain `SET`s, `MSET`s,
//! increments (`INCR`, `DECR`, `INCRBY`, `DECRBY`), or `HSET`s. A client that pipelines
//! pays one trip to the workers (and, for writes, one redo-log commit) per
//! run instead of one per command. A value of several rows is read on its
//! own, as the command alone would.
//!
//! A run stops at any other command, at a `SET` with options or a value of
//! more than one row, at a key given twice among its `SET`s, and at
//! `MAX_RUN` commands or `MAX_RUN_WORDS` arguments. The `MSET`s of a run
//! are written in one atomic request, each key once with its last value;
//! the increments read their keys in one request and write each key's last
//! value in another, under the keys' locks; the `HSET`s of one hash are one
//! change of it, under its lock (for a hash of rows: its fields read in one
//! request and written in another). If the database's limits refuse
//! a run as a whole because of its size (`max_transaction_ops`, a burst) —
//! or refuse a run of `MSET`s at all — its commands run one at a time
//! instead, each answered as it would be alone.

use std::collections::HashMap;
use std::ops::Range;

use shoal_quota::QuotaError;

use super::cmd::{int, wrong_type};
use super::store::{Item, Kind, MAX_KEY, PART, StoreError, decode_hash};
use super::{Conn, error_reply};
use crate::tc::TcError;

/// Most commands in one run.
pub(super) const MAX_RUN: usize = 128;
/// Most arguments (after the commands' names) in one run.
pub(super) const MAX_RUN_WORDS: usize = 2048;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Run {
    Read,
    Set,
    MSet,
    Incr,
    HSet,
}

/// A command that can be part of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Get,
    HGet,
    HGetAll,
    MGet,
    Set,
    MSet,
    Incr,
    Decr,
    IncrBy,
    DecrBy,
    HSet,
}

impl Op {
    pub(super) fn run(self) -> Run {
        match self {
            Op::Get | Op::HGet | Op::HGetAll | Op::MGet => Run::Read,
            Op::Set => Run::Set,
            Op::MSet => Run::MSet,
            Op::Incr | Op::Decr | Op::IncrBy | Op::DecrBy => Run::Incr,
            Op::HSet => Run::HSet,
        }
    }

    pub(super) fn command(self) -> &'static str {
        match self {
            Op::Get => "GET",
            Op::HGet => "HGET",
            Op::HGetAll => "HGETALL",
            Op::MGet => "MGET",
            Op::Set => "SET",
            Op::MSet => "MSET",
            Op::Incr => "INCR",
            Op::Decr => "DECR",
            Op::IncrBy => "INCRBY",
            Op::DecrBy => "DECRBY",
            Op::HSet => "HSET",
        }
    }
}

/// The command `args` (its name first) is, if it can be part of a run.
pub(super) fn op_of(args: &[&[u8]]) -> Option<Op> {
    let key_ok = |k: &&[u8]| k.len() <= MAX_KEY;
    let (name, words) = args.split_first()?;
    let is = |op: Op| name.eq_ignore_ascii_case(op.command().as_bytes());
    // An increment that is no integer, or whose negation is not, is
    // answered alone.
    let by_ok = |by: &[u8], negate: bool| int(by).is_some_and(|n| !negate || n != i64::MIN);
    let op = match words {
        [key] if key_ok(key) => [Op::Get, Op::HGetAll, Op::Incr, Op::Decr]
            .into_iter()
            .find(|&op| is(op))?,
        [key, _] if key_ok(key) && is(Op::HGet) => Op::HGet,
        [key, value] if key_ok(key) && is(Op::Set) && value.len() <= PART => Op::Set,
        [key, by] if key_ok(key) && is(Op::IncrBy) && by_ok(by, false) => Op::IncrBy,
        [key, by] if key_ok(key) && is(Op::DecrBy) && by_ok(by, true) => Op::DecrBy,
        _ if is(Op::MGet) && !words.is_empty() && words.iter().all(key_ok) => Op::MGet,
        [key, pairs @ ..]
            if is(Op::HSet)
                && key_ok(key)
                && !pairs.is_empty()
                && pairs.len().is_multiple_of(2)
                && pairs.chunks(2).all(|p| p[1].len() <= PART) =>
        {
            Op::HSet
        }
        _ if is(Op::MSet)
            && !words.is_empty()
            && words.len().is_multiple_of(2)
            && words.chunks(2).all(|p| key_ok(&p[0]) && p[1].len() <= PART) =>
        {
            Op::MSet
        }
        _ => return None,
    };
    Some(op)
}

/// One command of a run: which, and which of the run's words (the
/// arguments after the name, as ranges of the buffer) are its.
#[derive(Debug, Clone)]
pub(super) struct Command {
    pub(super) op: Op,
    pub(super) words: Range<usize>,
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
    /// Runs `commands` (all of kind `run`; `words` are the ranges of `buf`
    /// their arguments lie in) and writes a reply for each, in order.
    pub(super) async fn execute_run(
        &mut self,
        run: Run,
        buf: &[u8],
        commands: &[Command],
        words: &[Range<usize>],
    ) {
        if let Err((prefix, message)) = self.revalidate() {
            for _ in commands {
                self.out.error(prefix, &message);
            }
            return;
        }
        if let (Some(registered), Some(last)) = (&self.client, commands.last()) {
            registered.client.ran(last.op.command());
        }
        let words: Vec<&[u8]> = words.iter().map(|r| &buf[r.clone()]).collect();
        let done = match run {
            Run::Read => self.read_run(commands, &words).await,
            Run::Set => self.set_run(commands, &words).await,
            Run::MSet => self.mset_run(commands, &words).await,
            Run::Incr => self.incr_run(commands, &words).await,
            Run::HSet => {
                if !self.hset_run(commands, &words).await {
                    self.one_at_a_time(commands, &words).await;
                }
                Ok(())
            }
        };
        match done {
            Ok(()) => {}
            // A run of MSETs is written all or nothing: refused, each is
            // tried alone, as it would be without the others.
            Err(e) if too_big(&e) || run == Run::MSet => {
                self.one_at_a_time(commands, &words).await;
            }
            Err(e) => {
                let (prefix, message) = error_reply(&e);
                for _ in commands {
                    self.out.error(prefix, &message);
                }
            }
        }
    }

    /// Runs each of `commands` on its own, answered as it would be alone.
    async fn one_at_a_time(&mut self, commands: &[Command], words: &[&[u8]]) {
        for command in commands {
            let mut full: Vec<&[u8]> = vec![command.op.command().as_bytes()];
            full.extend_from_slice(&words[command.words.clone()]);
            self.execute(&full).await;
        }
    }

    async fn read_run(&mut self, commands: &[Command], words: &[&[u8]]) -> Result<(), StoreError> {
        let mut ctx = self.ctx().expect("a run is of an authenticated connection");
        let (store, db, batch, _) = ctx.parts();
        // Each command's keys: every word of MGET, the first of the others.
        let keys_of = |c: &Command| match c.op {
            Op::MGet => c.words.clone(),
            _ => c.words.start..c.words.start + 1,
        };
        let keys: Vec<&[u8]> = commands
            .iter()
            .flat_map(|c| &words[keys_of(c)])
            .copied()
            .collect();
        let mut entries = store.lookup_many(db, batch, &keys).await?.into_iter();
        for command in commands {
            let key = words[command.words.start];
            let arg = words
                .get(command.words.start + 1)
                .copied()
                .unwrap_or_default();
            match command.op {
                Op::MGet => {
                    let keys = &words[command.words.clone()];
                    // Taken whole first: a read that fails leaves the next
                    // commands' entries where they are.
                    let mine: Vec<_> = entries.by_ref().take(keys.len()).collect();
                    match ctx.mget(keys, mine).await {
                        Ok(values) => ctx.out.values(&values),
                        Err((prefix, message)) => ctx.out.error(prefix, &message),
                    }
                    continue;
                }
                Op::Get => match entries.next().flatten() {
                    Some(e) if e.kind != Kind::String => {
                        let (prefix, message) = wrong_type();
                        ctx.out.error(prefix, &message);
                    }
                    Some(e) if e.parts == 0 => ctx.out.bulk(&e.head),
                    Some(_) => match ctx.read_string(key, false).await {
                        Ok(Some(v)) => ctx.out.bulk(&v),
                        Ok(None) => ctx.out.null(),
                        Err((prefix, message)) => ctx.out.error(prefix, &message),
                    },
                    None => ctx.out.null(),
                },
                // A hash: its fields are in the row unless it has parts
                // or a row per field.
                _ => {
                    let fields = match entries.next().flatten() {
                        None => Ok(Vec::new()),
                        Some(e) if e.kind != Kind::Hash => Err(wrong_type()),
                        Some(e) if e.parts == 0 && e.fields.is_none() => Ok(decode_hash(&e.head)),
                        Some(e) if e.fields.is_some() && command.op == Op::HGet => {
                            let values = ctx.hash_values(key, &[arg]).await;
                            values.map(|mut v| match v.pop().flatten() {
                                Some(value) => vec![(arg.to_vec(), value)],
                                None => Vec::new(),
                            })
                        }
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

    async fn set_run(&mut self, commands: &[Command], words: &[&[u8]]) -> Result<(), StoreError> {
        let mut ctx = self.ctx().expect("a run is of an authenticated connection");
        let (store, db, batch, out) = ctx.parts();
        let pairs: Vec<(&[u8], &[u8])> = (commands.iter())
            .map(|c| (words[c.words.start], words[c.words.start + 1]))
            .collect();
        let keys: Vec<&[u8]> = pairs.iter().map(|p| p.0).collect();
        let locks = store.lock_keys(db, &keys).await;
        let items: Vec<Item<'_>> = (pairs.iter())
            .map(|&(key, value)| Item::string(key, value, None))
            .collect();
        // The keys' locks go once the writes are applied, before the wait
        // for the disk: the next run of them joins the same group commit.
        let (outcomes, mark) = store.write_each_applied(db, batch, &items).await?;
        drop(locks);
        store.acknowledgeable(mark).await?;
        for outcome in outcomes {
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

    /// The run's `MSET`s in one atomic request: each key once, with the
    /// last value the run gives it.
    async fn mset_run(&mut self, commands: &[Command], words: &[&[u8]]) -> Result<(), StoreError> {
        let mut ctx = self.ctx().expect("a run is of an authenticated connection");
        let (store, db, batch, out) = ctx.parts();
        let pairs = commands
            .iter()
            .flat_map(|c| words[c.words.clone()].chunks(2));
        let items = last_values(pairs.map(|p| (p[0], p[1])), words.len() / 2);
        let keys: Vec<&[u8]> = items.iter().map(|i| i.key).collect();
        let locks = store.lock_keys(db, &keys).await;
        let mark = store.write_applied(db, batch, &items).await?;
        drop(locks);
        store.acknowledgeable(mark).await?;
        for _ in commands {
            out.ok();
        }
        Ok(())
    }

    /// The run's increments, each one operation on its key's row, in one
    /// request (`Ctx::increments`).
    async fn incr_run(&mut self, commands: &[Command], words: &[&[u8]]) -> Result<(), StoreError> {
        let mut ctx = self.ctx().expect("a run is of an authenticated connection");
        let increments: Vec<(&[u8], i64)> = (commands.iter())
            .map(|c| {
                let arg = || int(words[c.words.start + 1]).expect("checked by op_of");
                let by = match c.op {
                    Op::Incr => 1,
                    Op::Decr => -1,
                    Op::IncrBy => arg(),
                    _ => -arg(),
                };
                (words[c.words.start], by)
            })
            .collect();
        for answer in ctx.increments(&increments).await? {
            match answer {
                Ok(sum) => ctx.out.int(sum),
                Err((prefix, message)) => ctx.out.error(prefix, &message),
            }
        }
        Ok(())
    }
}

impl Conn {
    /// The run's `HSET`s (all of one hash) as one change of it, each
    /// answered the fields it added; `false`, having changed nothing, when
    /// the change was refused — the commands then run one at a time, each
    /// answered as it would be alone.
    async fn hset_run(&mut self, commands: &[Command], words: &[&[u8]]) -> bool {
        let key = words[commands[0].words.start];
        let pairs: Vec<&[&[u8]]> = (commands.iter())
            .map(|c| &words[c.words.start + 1..c.words.end])
            .collect();
        let mut ctx = self.ctx().expect("a run is of an authenticated connection");
        match ctx.hset_many(key, &pairs).await {
            Ok(added) => {
                for n in added {
                    ctx.out.int(n);
                }
                true
            }
            Err(_) => false,
        }
    }
}

/// Items for the `count` `pairs` of key and value: each key once, with its
/// last value, in the order keys first come.
pub(super) fn last_values<'a>(
    pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    count: usize,
) -> Vec<Item<'a>> {
    let mut items: Vec<Item<'a>> = Vec::with_capacity(count);
    // Sized once: growing the map rehashed every key, a tenth of a run's
    // time. Keys are the caller's, so the hasher is the keyed default.
    let mut at: HashMap<&[u8], usize> = HashMap::with_capacity(count);
    for (key, value) in pairs {
        match at.get(key) {
            Some(&i) => items[i].value = value,
            None => {
                at.insert(key, items.len());
                items.push(Item::string(key, value, None));
            }
        }
    }
    items
}
