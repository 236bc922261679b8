//! The key space and expiry: `DEL` (`UNLINK`), `EXISTS`, `TOUCH`, `TYPE`,
//! `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT`, `TTL`, `PTTL`,
//! `EXPIRETIME`, `PEXPIRETIME` and `PERSIST`.

use super::{Command, Ctx, Data, Refusal, Spec, Upper, int_arg, store_error, upper};
use crate::api::resp::store::{Entry, Kind, now_ms};

pub(in crate::api::resp) enum Cmd<'a> {
    Type(&'a [u8]),
    Del(&'a [&'a [u8]]),
    Exists(&'a [&'a [u8]]),
    /// `TOUCH`: the keys there are, each time named (nothing to touch:
    /// keys have no last-access time here).
    Touch(&'a [&'a [u8]]),
    Expire(Expire<'a>),
    /// `TTL`, `PTTL`, `EXPIRETIME` or `PEXPIRETIME`.
    Ttl(&'a [u8], TtlForm),
    Persist(&'a [u8]),
}

/// `EXPIRE key seconds [NX|XX|GT|LT]`, `PEXPIRE` in milliseconds, or
/// `EXPIREAT`/`PEXPIREAT` at a Unix time.
pub(in crate::api::resp) struct Expire<'a> {
    key: &'a [u8],
    /// When the key is to expire, in Unix milliseconds.
    at: i64,
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

/// How a key's expiry is answered: the time left or the Unix time it comes,
/// in seconds or milliseconds.
#[derive(Clone, Copy)]
pub(in crate::api::resp) struct TtlForm {
    millis: bool,
    absolute: bool,
}

impl TtlForm {
    fn answer(self, at: i64) -> i64 {
        match (self.absolute, self.millis) {
            (true, true) => at,
            (true, false) => at / 1000,
            (false, true) => (at - now_ms()).max(0),
            (false, false) => ((at - now_ms()).max(0) + 500) / 1000,
        }
    }
}

pub(super) fn parse<'a>(spec: &'static Spec, args: &'a [&'a [u8]]) -> Result<Command<'a>, Refusal> {
    let cmd = match spec.name {
        "TYPE" => Cmd::Type(args[1]),
        "DEL" | "UNLINK" => Cmd::Del(&args[1..]),
        "EXISTS" => Cmd::Exists(&args[1..]),
        "TOUCH" => Cmd::Touch(&args[1..]),
        "EXPIRE" => Cmd::Expire(parse_expire(args, 1000, false)?),
        "PEXPIRE" => Cmd::Expire(parse_expire(args, 1, false)?),
        "EXPIREAT" => Cmd::Expire(parse_expire(args, 1000, true)?),
        "PEXPIREAT" => Cmd::Expire(parse_expire(args, 1, true)?),
        "TTL" | "PTTL" | "EXPIRETIME" | "PEXPIRETIME" => {
            let millis = spec.name.starts_with('P');
            let absolute = spec.name.ends_with("TIME");
            Cmd::Ttl(args[1], TtlForm { millis, absolute })
        }
        "PERSIST" => Cmd::Persist(args[1]),
        _ => return Err(super::unknown_command(args)),
    };
    Ok(Command::Data(Data::Keys(cmd)))
}

/// `args` of `EXPIRE` (`unit` 1000) or `PEXPIRE` (`unit` 1), or of
/// `EXPIREAT`/`PEXPIREAT` (`absolute`).
fn parse_expire<'a>(
    args: &'a [&'a [u8]],
    unit: i64,
    absolute: bool,
) -> Result<Expire<'a>, Refusal> {
    // As Redis: the options are judged before the time.
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
    let t = int_arg(args[2])?;
    let command = match (unit, absolute) {
        (1, false) => "pexpire",
        (_, false) => "expire",
        (1, true) => "pexpireat",
        (_, true) => "expireat",
    };
    let base = if absolute { 0 } else { now_ms() };
    let at = t
        .checked_mul(unit)
        .and_then(|ms| ms.checked_add(base))
        .ok_or_else(|| ("ERR", format!("invalid expire time in '{command}' command")))?;
    Ok(Expire {
        key: args[1],
        at,
        nx,
        xx,
        gt,
        lt,
    })
}

impl Cmd<'_> {
    pub(super) async fn apply(self, ctx: &mut Ctx<'_>) -> Result<(), Refusal> {
        match self {
            Cmd::Type(key) => {
                let kind = match ctx.lookup(key).await? {
                    None => "none",
                    Some(e) if e.kind == Kind::Hash => "hash",
                    Some(_) => "string",
                };
                ctx.out.simple(kind);
            }
            Cmd::Del(keys) => {
                let (store, db, batch, out) = ctx.parts();
                let _locks = store.lock_keys(db, keys).await;
                let mut deleted = 0;
                for key in keys {
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
            Cmd::Exists(keys) | Cmd::Touch(keys) => {
                let entries = ctx.lookup_many(keys).await?;
                ctx.out.int(entries.iter().flatten().count() as i64);
            }
            Cmd::Expire(expire) => {
                let set = expire.apply(ctx).await?;
                ctx.out.int(i64::from(set));
            }
            Cmd::Ttl(key, form) => {
                let reply = match ctx.lookup(key).await? {
                    None => -2,
                    Some(Entry { expires: None, .. }) => -1,
                    Some(Entry {
                        expires: Some(at), ..
                    }) => form.answer(at),
                };
                ctx.out.int(reply);
            }
            Cmd::Persist(key) => {
                let (store, db, batch, out) = ctx.parts();
                let _lock = store.lock_keys(db, &[key]).await;
                let entry = store.lookup(db, batch, key).await.map_err(store_error)?;
                let had = entry.is_some_and(|e| e.expires.is_some());
                if had {
                    store
                        .set_expiry(db, batch, key, None)
                        .await
                        .map_err(store_error)?;
                }
                out.int(i64::from(had));
            }
        }
        Ok(())
    }
}

impl Expire<'_> {
    /// Whether the expiry was set.
    async fn apply(self, ctx: &mut Ctx<'_>) -> Result<bool, Refusal> {
        let (store, db, batch, _) = ctx.parts();
        let _lock = store.lock_keys(db, &[self.key]).await;
        let Some(entry) = store
            .lookup(db, batch, self.key)
            .await
            .map_err(store_error)?
        else {
            return Ok(false);
        };
        // A key without an expiry counts as one that never comes (GT, LT).
        let (at, current) = (self.at, entry.expires);
        let refused = (self.nx && current.is_some())
            || (self.xx && current.is_none())
            || (self.gt && current.is_none_or(|c| at <= c))
            || (self.lt && current.is_some_and(|c| at >= c));
        if refused {
            return Ok(false);
        }
        if at <= now_ms() {
            store
                .delete(db, batch, self.key, &entry)
                .await
                .map_err(store_error)?;
        } else {
            store
                .set_expiry(db, batch, self.key, Some(at))
                .await
                .map_err(store_error)?;
        }
        Ok(true)
    }
}
