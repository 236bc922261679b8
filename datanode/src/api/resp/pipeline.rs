//! Runs of pipelined `GET`s, or of plain `SET`s, each done as one request
//! to the transaction coordinator — as `MGET` and `MSET` would be, but with
//! each command answered on its own. A client that pipelines pays one trip
//! to the workers (and, for writes, one redo-log commit) per run instead of
//! one per command.
//!
//! A run stops at any other command, at a `SET` with options or a value of
//! more than one row, at a key given twice among its `SET`s, and at
//! `MAX_RUN` commands. If the database's limits refuse the run as a whole
//! because of its size (`max_transaction_ops`, a burst), its commands run
//! one at a time instead.

use std::ops::Range;

use shoal_quota::QuotaError;

use super::store::{Item, Kind, MAX_KEY, PART, StoreError};
use super::{Conn, error_reply};
use crate::tc::TcError;

/// Most commands in one run.
pub(super) const MAX_RUN: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Run {
    Get,
    Set,
}

/// The run `args` can be part of, if any.
pub(super) fn run_of(args: &[&[u8]]) -> Option<Run> {
    let key_ok = |k: &[u8]| k.len() <= MAX_KEY;
    match args {
        [name, key] if name.eq_ignore_ascii_case(b"GET") && key_ok(key) => Some(Run::Get),
        [name, key, value]
            if name.eq_ignore_ascii_case(b"SET") && key_ok(key) && value.len() <= PART =>
        {
            Some(Run::Set)
        }
        _ => None,
    }
}

/// One command of a run: where its key and (for `SET`) value lie.
pub(super) type Command = (Range<usize>, Range<usize>);

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
        let keys: Vec<&[u8]> = commands.iter().map(|(k, _)| &buf[k.clone()]).collect();
        let done = match run {
            Run::Get => self.get_run(&keys).await,
            Run::Set => {
                let values: Vec<&[u8]> = commands.iter().map(|(_, v)| &buf[v.clone()]).collect();
                self.set_run(&keys, &values).await
            }
        };
        match done {
            Ok(()) => {}
            Err(e) if too_big(&e) => {
                for (n, key) in keys.iter().enumerate() {
                    let value = &buf[commands[n].1.clone()];
                    let args: &[&[u8]] = match run {
                        Run::Get => &[b"GET", key],
                        Run::Set => &[b"SET", key, value],
                    };
                    self.execute(args).await;
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

    async fn get_run(&mut self, keys: &[&[u8]]) -> Result<(), StoreError> {
        let (store, db, batch, _) = self.parts();
        let entries = store.lookup_many(db, batch, keys).await?;
        for (key, entry) in keys.iter().zip(entries) {
            match entry {
                None => self.out.null(),
                Some(e) if e.kind != Kind::String => {
                    self.out.error(
                        "WRONGTYPE",
                        "Operation against a key holding the wrong kind of value",
                    );
                }
                Some(e) if e.parts == 0 => self.out.bulk(&e.head),
                Some(_) => match self.read_string(key, false).await {
                    Ok(Some(v)) => self.out.bulk(&v),
                    Ok(None) => self.out.null(),
                    Err((prefix, message)) => self.out.error(prefix, &message),
                },
            }
        }
        Ok(())
    }

    async fn set_run(&mut self, keys: &[&[u8]], values: &[&[u8]]) -> Result<(), StoreError> {
        let (store, db, batch, out) = self.parts();
        let _locks = store.lock(db.db.id, keys).await;
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
