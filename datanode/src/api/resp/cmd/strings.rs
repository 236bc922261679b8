//! String keys: `GET`, `SET` (`SETEX`, `PSETEX`, `SETNX`, `GETSET`),
//! `GETDEL`, `GETEX`, `MSET`, `MSETNX`, `MGET`, `INCR`, `DECR`, `INCRBY`,
//! `DECRBY`, `INCRBYFLOAT`, `APPEND`, `STRLEN`, `GETRANGE` (`SUBSTR`) and
//! `SETRANGE`.

use super::{
    Command, Ctx, Data, Refusal, Spec, Upper, int, int_arg, not_integer, option, overflow,
    store_error, syntax, wrong_args, wrong_type,
};
use crate::api::resp::long_double::{self, FloatError};
use crate::api::resp::pipeline::last_values;
use crate::api::resp::store::{Entry, Item, Kind, StoreError, Unchanged, now_ms};

pub(in crate::api::resp) enum Cmd<'a> {
    Get(&'a [u8]),
    Set(Set<'a>),
    GetDel(&'a [u8]),
    GetEx(GetEx<'a>),
    /// `MSET`, or `MSETNX` (`nx`: none is set if any exists).
    MSet(&'a [&'a [u8]], bool),
    MGet(&'a [&'a [u8]]),
    /// `INCR`, `DECR`, `INCRBY`, `DECRBY`: the key and what to add.
    Incr(&'a [u8], i64),
    IncrByFloat(&'a [u8], &'a [u8]),
    Append(&'a [u8], &'a [u8]),
    StrLen(&'a [u8]),
    GetRange(&'a [u8], i64, i64),
    SetRange(&'a [u8], i64, &'a [u8]),
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`, and
/// `SETEX`, `PSETEX`, `SETNX` and `GETSET`, which are it with options.
pub(in crate::api::resp) struct Set<'a> {
    key: &'a [u8],
    value: &'a [u8],
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    /// When the key expires, in Unix milliseconds.
    expires: Option<i64>,
    /// `SETNX`'s reply: 1 if set, 0 if not.
    flag: bool,
}

impl<'a> Set<'a> {
    fn plain(key: &'a [u8], value: &'a [u8]) -> Set<'a> {
        Set {
            key,
            value,
            nx: false,
            xx: false,
            get: false,
            keep_ttl: false,
            expires: None,
            flag: false,
        }
    }
}

/// `GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]`.
pub(in crate::api::resp) struct GetEx<'a> {
    key: &'a [u8],
    /// The expiry option and its time, judged once the key is found.
    expiry: Option<(Upper, &'a [u8])>,
    persist: bool,
}

/// When a key given expiry `option` (`EX`, `PX`, `EXAT` or `PXAT`) with
/// `time` expires, in Unix milliseconds, as Redis judges it: not an
/// integer, not above zero, or past what milliseconds hold is refused,
/// naming `command`.
fn expires_at(option: &str, time: &[u8], command: &str) -> Result<i64, Refusal> {
    let t = int_arg(time)?;
    let invalid = || ("ERR", format!("invalid expire time in '{command}' command"));
    if t <= 0 {
        return Err(invalid());
    }
    let at = match option {
        "EX" => t.checked_mul(1000).and_then(|ms| ms.checked_add(now_ms())),
        "PX" => t.checked_add(now_ms()),
        "EXAT" => t.checked_mul(1000),
        _ => Some(t),
    };
    at.ok_or_else(invalid)
}

pub(super) fn parse<'a>(spec: &'static Spec, args: &'a [&'a [u8]]) -> Result<Command<'a>, Refusal> {
    let n = args.len();
    let cmd = match spec.name {
        "GET" => Cmd::Get(args[1]),
        "SET" => Cmd::Set(parse_set(args)?),
        "SETEX" | "PSETEX" => {
            let (option, command) = match spec.name {
                "SETEX" => ("EX", "setex"),
                _ => ("PX", "psetex"),
            };
            Cmd::Set(Set {
                expires: Some(expires_at(option, args[2], command)?),
                ..Set::plain(args[1], args[3])
            })
        }
        "SETNX" => Cmd::Set(Set {
            nx: true,
            flag: true,
            ..Set::plain(args[1], args[2])
        }),
        "GETSET" => Cmd::Set(Set {
            get: true,
            ..Set::plain(args[1], args[2])
        }),
        "GETDEL" => Cmd::GetDel(args[1]),
        "GETEX" => Cmd::GetEx(parse_getex(args)?),
        "MSET" | "MSETNX" if n.is_multiple_of(2) => return Err(wrong_args(spec.name)),
        "MSET" | "MSETNX" => Cmd::MSet(&args[1..], spec.name == "MSETNX"),
        "MGET" => Cmd::MGet(&args[1..]),
        "INCR" => Cmd::Incr(args[1], 1),
        "DECR" => Cmd::Incr(args[1], -1),
        "INCRBY" => Cmd::Incr(args[1], int_arg(args[2])?),
        "DECRBY" => {
            let by = int_arg(args[2])?.checked_neg();
            Cmd::Incr(
                args[1],
                by.ok_or_else(|| ("ERR", "decrement would overflow".to_owned()))?,
            )
        }
        "INCRBYFLOAT" => Cmd::IncrByFloat(args[1], args[2]),
        "APPEND" => Cmd::Append(args[1], args[2]),
        "STRLEN" => Cmd::StrLen(args[1]),
        "GETRANGE" | "SUBSTR" => Cmd::GetRange(args[1], int_arg(args[2])?, int_arg(args[3])?),
        "SETRANGE" => {
            let offset = int_arg(args[2])?;
            if offset < 0 {
                return Err(("ERR", "offset is out of range".into()));
            }
            Cmd::SetRange(args[1], offset, args[3])
        }
        _ => return Err(super::unknown_command(args)),
    };
    Ok(Command::Data(Data::Strings(cmd)))
}

fn parse_set<'a>(args: &'a [&'a [u8]]) -> Result<Set<'a>, Refusal> {
    let mut set = Set::plain(args[1], args[2]);
    // Every option is read before the expiry's value is, as Redis reads
    // them: a syntax error answers before a bad time.
    let mut expiry: Option<(Upper, &[u8])> = None;
    let mut i = 3;
    while i < args.len() {
        let option = option(args[i]);
        match option.as_str() {
            "NX" => set.nx = true,
            "XX" => set.xx = true,
            "GET" => set.get = true,
            "KEEPTTL" => set.keep_ttl = true,
            // The same expiry option again is taken (the last wins), as
            // Redis takes it; two different ones are a syntax error.
            "EX" | "PX" | "EXAT" | "PXAT"
                if i + 1 < args.len()
                    && expiry.is_none_or(|(o, _)| o.as_str() == option.as_str()) =>
            {
                i += 1;
                expiry = Some((option, args[i]));
            }
            _ => return Err(syntax()),
        }
        i += 1;
    }
    if (set.nx && set.xx) || (set.keep_ttl && expiry.is_some()) {
        return Err(syntax());
    }
    if let Some((option, time)) = expiry {
        set.expires = Some(expires_at(option.as_str(), time, "set")?);
    }
    Ok(set)
}

/// `GETEX`'s options, read as Redis reads them: one expiry option (the
/// same again taken, the last winning) or `PERSIST`; anything else a
/// syntax error. The time is judged later, once the key is found.
fn parse_getex<'a>(args: &'a [&'a [u8]]) -> Result<GetEx<'a>, Refusal> {
    let mut getex = GetEx {
        key: args[1],
        expiry: None,
        persist: false,
    };
    let mut i = 2;
    while i < args.len() {
        let option = option(args[i]);
        match option.as_str() {
            "PERSIST" if getex.expiry.is_none() => getex.persist = true,
            "EX" | "PX" | "EXAT" | "PXAT"
                if i + 1 < args.len()
                    && !getex.persist
                    && getex
                        .expiry
                        .is_none_or(|(o, _)| o.as_str() == option.as_str()) =>
            {
                i += 1;
                getex.expiry = Some((option, args[i]));
            }
            _ => return Err(syntax()),
        }
        i += 1;
    }
    Ok(getex)
}

impl Cmd<'_> {
    pub(super) async fn apply(self, ctx: &mut Ctx<'_>) -> Result<(), Refusal> {
        match self {
            Cmd::Get(key) => match ctx.read_string(key, false).await? {
                Some(v) => ctx.out.bulk(&v),
                None => ctx.out.null(),
            },
            Cmd::Set(set) => set.apply(ctx).await?,
            Cmd::MSet(args, nx) => {
                // A key given twice takes its last value, as in Redis; one
                // request writes each key once.
                let items = last_values(args.chunks(2).map(|p| (p[0], p[1])), args.len() / 2);
                let keys: Vec<&[u8]> = items.iter().map(|i| i.key).collect();
                let (store, db, batch, out) = ctx.parts();
                let _locks = store.lock_keys(db, &keys).await;
                if nx {
                    let found = store.lookup_many(db, batch, &keys).await;
                    if found.map_err(store_error)?.iter().any(Option::is_some) {
                        out.int(0);
                        return Ok(());
                    }
                }
                store.write(db, batch, &items).await.map_err(store_error)?;
                match nx {
                    true => out.int(1),
                    false => out.ok(),
                }
            }
            Cmd::GetDel(key) => {
                let (store, db, batch, out) = ctx.parts();
                let _lock = store.lock_keys(db, &[key]).await;
                match store
                    .read(db, batch, key, true)
                    .await
                    .map_err(store_error)?
                {
                    None => out.null(),
                    Some((e, _)) if e.kind != Kind::String => return Err(wrong_type()),
                    Some((e, v)) => {
                        store
                            .delete(db, batch, key, &e)
                            .await
                            .map_err(store_error)?;
                        out.bulk(&v);
                    }
                }
            }
            Cmd::GetEx(getex) => getex.apply(ctx).await?,
            Cmd::MGet(keys) => {
                let entries = ctx.lookup_many(keys).await?;
                let values = ctx.mget(keys, entries).await?;
                ctx.out.values(&values);
            }
            Cmd::Incr(key, by) => {
                let v = ctx.incr(key, by).await?;
                ctx.out.int(v);
            }
            Cmd::IncrByFloat(key, by) => {
                let mut sum = Vec::new();
                ctx.modify_string(key, |v, existed| {
                    let held = existed.then_some(v.as_slice());
                    sum = long_double::add(held, by).map_err(float_error)?;
                    v.clone_from(&sum);
                    Ok(())
                })
                .await?;
                ctx.out.bulk(&sum);
            }
            Cmd::Append(key, tail) => {
                let len = ctx
                    .modify_string(key, |v, _| {
                        v.extend_from_slice(tail);
                        Ok(())
                    })
                    .await?;
                ctx.out.int(len as i64);
            }
            Cmd::StrLen(key) => {
                let len = ctx.read_string(key, false).await?.map_or(0, |v| v.len());
                ctx.out.int(len as i64);
            }
            Cmd::GetRange(key, start, end) => {
                let value = ctx.read_string(key, false).await?.unwrap_or_default();
                ctx.out.bulk(range(&value, start, end));
            }
            Cmd::SetRange(key, offset, data) => {
                let end = (offset as u64).saturating_add(data.len() as u64);
                let max = ctx.store.max_value() as u64;
                // As Redis: the type first, then nothing to write (never too
                // large), then the size.
                let len = if data.is_empty() {
                    ctx.read_string(key, false).await?.map_or(0, |v| v.len())
                } else {
                    ctx.modify_string(key, |v, _| {
                        if end > max {
                            return Err((
                                "ERR",
                                "string exceeds maximum allowed size (proto-max-bulk-len)".into(),
                            ));
                        }
                        let (offset, end) = (offset as usize, end as usize);
                        if v.len() < end {
                            v.resize(end, 0);
                        }
                        v[offset..end].copy_from_slice(data);
                        Ok(())
                    })
                    .await?
                };
                ctx.out.int(len as i64);
            }
        }
        Ok(())
    }
}

impl Set<'_> {
    async fn apply(self, ctx: &mut Ctx<'_>) -> Result<(), Refusal> {
        let (store, db, batch, out) = ctx.parts();
        let _lock = store.lock_keys(db, &[self.key]).await;
        let mut old: Option<(Entry, Vec<u8>)> = None;
        if self.nx || self.xx || self.get || self.keep_ttl {
            old = store
                .read(db, batch, self.key, true)
                .await
                .map_err(store_error)?;
            if self.get && old.as_ref().is_some_and(|(e, _)| e.kind != Kind::String) {
                return Err(wrong_type());
            }
        }
        let exists = old.is_some();
        if (self.nx && exists) || (self.xx && !exists) {
            match (self.get, old) {
                _ if self.flag => out.int(0),
                (true, Some((_, v))) => out.bulk(&v),
                _ => out.null(),
            }
            return Ok(());
        }
        let expires = match self.keep_ttl {
            true => old.as_ref().and_then(|(e, _)| e.expires),
            false => self.expires,
        };
        store
            .write(db, batch, &[Item::string(self.key, self.value, expires)])
            .await
            .map_err(store_error)?;
        match (self.get, old) {
            _ if self.flag => out.int(1),
            (true, Some((_, v))) => out.bulk(&v),
            (true, None) => out.null(),
            _ => out.ok(),
        }
        Ok(())
    }
}

impl GetEx<'_> {
    async fn apply(self, ctx: &mut Ctx<'_>) -> Result<(), Refusal> {
        let (store, db, batch, out) = ctx.parts();
        let _lock = store.lock_keys(db, &[self.key]).await;
        // As Redis: a key not there answers nothing, whatever the time;
        // then the type, then the time.
        let (entry, value) = match store.read(db, batch, self.key, true).await {
            Ok(None) => {
                out.null();
                return Ok(());
            }
            Ok(Some((e, _))) if e.kind != Kind::String => return Err(wrong_type()),
            Ok(Some(found)) => found,
            Err(e) => return Err(store_error(e)),
        };
        let at = match self.expiry {
            Some((option, time)) => Some(expires_at(option.as_str(), time, "getex")?),
            None => None,
        };
        match at {
            // A time already past deletes the key.
            Some(at) if at <= now_ms() => {
                store
                    .delete(db, batch, self.key, &entry)
                    .await
                    .map_err(store_error)?;
            }
            Some(at) => {
                (store.set_expiry(db, batch, self.key, Some(at)).await).map_err(store_error)?;
            }
            None if self.persist && entry.expires.is_some() => {
                (store.set_expiry(db, batch, self.key, None).await).map_err(store_error)?;
            }
            None => {}
        }
        out.bulk(&value);
        Ok(())
    }
}

impl Ctx<'_> {
    /// Adds `by` to a string key's integer value; answers the new value.
    async fn incr(&mut self, key: &[u8], by: i64) -> Result<i64, Refusal> {
        if self.session.db.in_transaction() {
            return self.incr_alone(key, by).await;
        }
        let mut answers = self.increments(&[(key, by)]).await.map_err(store_error)?;
        answers.pop().expect("an answer")
    }

    /// Adds each increment to its key's integer, each on its own, in one
    /// request to the workers that hold the keys' rows (`Store::
    /// increment_applied`): each one's new value, or why not. Outside a
    /// transaction.
    pub(in crate::api::resp) async fn increments(
        &mut self,
        increments: &[(&[u8], i64)],
    ) -> Result<Vec<Result<i64, Refusal>>, StoreError> {
        let (store, db, batch, _) = self.parts();
        let keys: Vec<&[u8]> = increments.iter().map(|&(key, _)| key).collect();
        let locks = store.lock_keys(db, &keys).await;
        let (outcomes, mark) = store.increment_applied(db, batch, increments).await?;
        // Let go once applied: the next writers of the keys share the
        // group commit.
        drop(locks);
        store.acknowledgeable(mark).await?;
        let mut answers = Vec::with_capacity(outcomes.len());
        for (&(key, by), outcome) in increments.iter().zip(outcomes) {
            answers.push(match outcome {
                Ok(Ok(sum)) => Ok(sum),
                Ok(Err(Unchanged::WrongType)) => Err(wrong_type()),
                Ok(Err(Unchanged::NotInteger)) => Err(not_integer()),
                Ok(Err(Unchanged::Overflow)) => Err(overflow()),
                // Nothing of the run changed the key: it comes after.
                Ok(Err(Unchanged::NotHere)) => self.incr_alone(key, by).await,
                Err(e) => Err(store_error(e)),
            });
        }
        Ok(answers)
    }

    /// `incr` as a read and then a write of the key, under its lock: in a
    /// transaction, or for a key with more rows than its own.
    async fn incr_alone(&mut self, key: &[u8], by: i64) -> Result<i64, Refusal> {
        let mut result = 0;
        self.modify_string(key, |v, existed| {
            // An absent key counts from 0; an empty string is no integer.
            let old = if existed { int(v) } else { Some(0) };
            result = old
                .ok_or_else(not_integer)?
                .checked_add(by)
                .ok_or_else(overflow)?;
            *v = result.to_string().into_bytes();
            Ok(())
        })
        .await?;
        Ok(result)
    }

    /// Changes a string key's value (empty when absent; `change` is told
    /// whether it existed) under its lock, keeping its expiry; answers the
    /// new length.
    async fn modify_string(
        &mut self,
        key: &[u8],
        change: impl FnOnce(&mut Vec<u8>, bool) -> Result<(), Refusal>,
    ) -> Result<usize, Refusal> {
        let (store, db, batch, _) = self.parts();
        let _lock = store.lock_keys(db, &[key]).await;
        let (expires, mut value, existed) = match store
            .read(db, batch, key, true)
            .await
            .map_err(store_error)?
        {
            None => (None, Vec::new(), false),
            Some((e, _)) if e.kind != Kind::String => return Err(wrong_type()),
            Some((e, v)) => (e.expires, v, true),
        };
        change(&mut value, existed)?;
        store
            .write(db, batch, &[Item::string(key, &value, expires)])
            .await
            .map_err(store_error)?;
        Ok(value.len())
    }
}

/// Redis's words for a float increment that cannot be made.
pub(super) fn float_error(e: FloatError) -> Refusal {
    let message = match e {
        FloatError::Value | FloatError::Increment => "value is not a valid float",
        FloatError::NotFinite => "increment would produce NaN or Infinity",
    };
    ("ERR", message.into())
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
    fn set_options_parse_as_redis_reads_them() {
        let args: [&[u8]; 6] = [b"SET", b"k", b"v", b"nx", b"px", b"100"];
        let set = parse_set(&args).unwrap();
        assert!(set.nx && !set.xx && set.expires.is_some());
        let both: [&[u8]; 5] = [b"SET", b"k", b"v", b"NX", b"XX"];
        assert_eq!(parse_set(&both).err().unwrap().1, "syntax error");
        let twice: [&[u8]; 7] = [b"SET", b"k", b"v", b"EX", b"1", b"PX", b"1"];
        assert_eq!(parse_set(&twice).err().unwrap().1, "syntax error");
        let zero: [&[u8]; 5] = [b"SET", b"k", b"v", b"EX", b"0"];
        assert!(parse_set(&zero).err().unwrap().1.contains("invalid expire"));
    }
}
