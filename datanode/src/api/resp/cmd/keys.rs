//! The key space and expiry: `DEL` (`UNLINK`), `EXISTS`, `TOUCH`, `TYPE`,
//! `SCAN`, `KEYS`, `RANDOMKEY`, `RENAME`, `RENAMENX`, `COPY`, `EXPIRE`,
//! `PEXPIRE`, `EXPIREAT`, `PEXPIREAT`, `TTL`, `PTTL`, `EXPIRETIME`,
//! `PEXPIRETIME` and `PERSIST`.

use super::{
    Command, Ctx, Data, Refusal, Spec, Upper, int_arg, not_integer, option, store_error, syntax,
    upper,
};
use crate::api::resp::store::{Entry, Item, Kind, now_ms};

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
    Scan(Scan<'a>),
    /// `KEYS pattern`.
    Keys(&'a [u8]),
    RandomKey,
    /// `RENAME`, `RENAMENX` or `COPY`: a key's value and expiry to another key.
    Transfer {
        from: &'a [u8],
        to: &'a [u8],
        how: Transfer,
    },
}

#[derive(Clone, Copy)]
pub(in crate::api::resp) enum Transfer {
    Rename,
    RenameNx,
    /// `COPY source destination [DB 0] [REPLACE]`.
    Copy {
        replace: bool,
    },
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`.
pub(in crate::api::resp) struct Scan<'a> {
    cursor: u64,
    /// Only keys that match this glob-style pattern.
    pattern: Option<&'a [u8]>,
    /// About how many keys to look at (not how many to answer).
    count: usize,
    /// Only keys of this type (`None`: every type; `Some(None)`: a type
    /// Shoal has no key of).
    kind: Option<Option<Kind>>,
}

/// Keys `SCAN` looks at unless told another `COUNT`: Redis's.
const SCAN_COUNT: usize = 10;
/// Most keys one `SCAN` looks at, whatever its `COUNT` (a hint, in Redis as
/// here): a reply's work stays bounded.
const MAX_SCAN_COUNT: usize = 100_000;
/// Most keys, and most bytes of keys, `KEYS` answers: past them, `SCAN` is
/// the way.
const MAX_KEYS: usize = 1_000_000;
const MAX_KEYS_BYTES: usize = 64 << 20;

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
        "SCAN" => Cmd::Scan(parse_scan(args[1], &args[2..], true)?),
        "KEYS" => Cmd::Keys(args[1]),
        "RANDOMKEY" => Cmd::RandomKey,
        "RENAME" | "RENAMENX" => Cmd::Transfer {
            from: args[1],
            to: args[2],
            how: match spec.name {
                "RENAME" => Transfer::Rename,
                _ => Transfer::RenameNx,
            },
        },
        "COPY" => parse_copy(args)?,
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

/// A `SCAN` cursor as Redis reads one (C's `strtoul`): decimal digits
/// after an optional sign, a negative one taken modulo 2^64; the empty
/// string is 0; leading white space, other characters or more than 64
/// bits are refused.
pub(super) fn cursor(arg: &[u8]) -> Result<u64, Refusal> {
    let invalid = || ("ERR", "invalid cursor".to_string());
    let (negative, digits) = match arg {
        [] => return Ok(0),
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, arg),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(invalid());
    }
    let n = (digits.iter()).try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    });
    let n = n.ok_or_else(invalid)?;
    Ok(if negative { n.wrapping_neg() } else { n })
}

/// The options of `SCAN` (`of_keys`) or `HSCAN`, after the cursor.
pub(super) fn parse_scan<'a>(
    cursor_arg: &'a [u8],
    options: &'a [&'a [u8]],
    of_keys: bool,
) -> Result<Scan<'a>, Refusal> {
    let mut scan = Scan {
        cursor: cursor(cursor_arg)?,
        pattern: None,
        count: SCAN_COUNT,
        kind: None,
    };
    let mut at = 0;
    while at < options.len() {
        let value = options.get(at + 1).copied().ok_or_else(syntax)?;
        match option(options[at]).as_str() {
            "MATCH" => scan.pattern = Some(value).filter(|p| *p != b"*"),
            "COUNT" => {
                let count = super::int(value).ok_or_else(not_integer)?;
                if count < 1 {
                    return Err(syntax());
                }
                scan.count = (count as u64).min(MAX_SCAN_COUNT as u64) as usize;
            }
            "TYPE" if of_keys => {
                scan.kind = Some(match option(value).as_str() {
                    "STRING" => Some(Kind::String),
                    "HASH" => Some(Kind::Hash),
                    _ => None,
                })
            }
            _ => return Err(syntax()),
        }
        at += 2;
    }
    Ok(scan)
}

impl Scan<'_> {
    /// Whether `name` (of a key or a field) is one the scan answers.
    pub(super) fn matches(&self, name: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob(p, name))
    }
}

fn parse_copy<'a>(args: &'a [&'a [u8]]) -> Result<Cmd<'a>, Refusal> {
    let mut replace = false;
    let mut at = 3;
    while at < args.len() {
        match option(args[at]).as_str() {
            "REPLACE" => replace = true,
            "DB" if at + 1 < args.len() => {
                // One database per connection: its number is 0.
                if int_arg(args[at + 1])? != 0 {
                    return Err(("ERR", "DB index is out of range".into()));
                }
                at += 1;
            }
            _ => return Err(syntax()),
        }
        at += 1;
    }
    if args[1] == args[2] {
        return Err(("ERR", "source and destination objects are the same".into()));
    }
    Ok(Cmd::Transfer {
        from: args[1],
        to: args[2],
        how: Transfer::Copy { replace },
    })
}

/// Whether `name` matches the glob-style `pattern` as Redis matches one
/// (its `stringmatchlen`): `*` any run, `?` any byte, `[abc]`, `[^a]` and
/// `[a-z]` classes, `\` quoting the next byte. Backtracks to the last `*`
/// only, so it takes time in proportion to the lengths' product at most.
pub(super) fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    // Where to go on after the last `*` if what follows it fails.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if pattern.get(p) == Some(&b'*') {
            while pattern.get(p) == Some(&b'*') {
                p += 1;
            }
            star = Some((p, n));
            continue;
        }
        if p < pattern.len()
            && let Some(next) = glob_one(pattern, p, name[n])
        {
            (p, n) = (next, n + 1);
            continue;
        }
        match star {
            Some((after, from)) => {
                (p, n) = (after, from + 1);
                star = Some((after, from + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// Whether the pattern element at `p` matches byte `c`: where the next
/// element starts if it does.
fn glob_one(pattern: &[u8], p: usize, c: u8) -> Option<usize> {
    match pattern[p] {
        b'?' => Some(p + 1),
        b'\\' if p + 1 < pattern.len() => (pattern[p + 1] == c).then_some(p + 2),
        b'[' => {
            let mut q = p + 1;
            let not = pattern.get(q) == Some(&b'^');
            if not {
                q += 1;
            }
            let mut matched = false;
            // An unclosed class ends with the pattern.
            while q < pattern.len() {
                match pattern[q] {
                    b'\\' if q + 1 < pattern.len() => {
                        q += 1;
                        matched |= pattern[q] == c;
                    }
                    b']' => break,
                    _ if q + 2 < pattern.len() && pattern[q + 1] == b'-' => {
                        let (a, b) = (pattern[q], pattern[q + 2]);
                        let (low, high) = (a.min(b), a.max(b));
                        matched |= (low..=high).contains(&c);
                        q += 2;
                    }
                    b => matched |= b == c,
                }
                q += 1;
            }
            (matched != not).then_some((q + 1).min(pattern.len()))
        }
        b => (b == c).then_some(p + 1),
    }
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
            Cmd::Scan(scan) => {
                let (store, db, _, out) = ctx.parts();
                let (found, next) =
                    (store.scan(db, scan.cursor, scan.count).await).map_err(store_error)?;
                let answered: Vec<&[u8]> = (found.iter())
                    .filter(|k| k.live && scan.kind.is_none_or(|kind| kind == Some(k.kind)))
                    .map(|k| k.key.as_slice())
                    .filter(|key| scan.matches(key))
                    .collect();
                out.array(2);
                out.bulk(next.to_string().as_bytes());
                out.array(answered.len());
                for key in answered {
                    out.bulk(key);
                }
            }
            Cmd::Keys(pattern) => {
                let (store, db, _, out) = ctx.parts();
                let (mut keys, mut bytes, mut cursor) = (Vec::new(), 0, 0);
                loop {
                    let (found, next) =
                        (store.scan(db, cursor, MAX_SCAN_COUNT).await).map_err(store_error)?;
                    let matching = (found.into_iter())
                        .filter(|k| k.live && (pattern == b"*" || glob(pattern, &k.key)));
                    for k in matching {
                        bytes += k.key.len();
                        keys.push(k.key);
                    }
                    if keys.len() > MAX_KEYS || bytes > MAX_KEYS_BYTES {
                        return Err((
                            "ERR",
                            format!(
                                "KEYS answers at most {MAX_KEYS} keys and {} MiB of them; use SCAN",
                                MAX_KEYS_BYTES >> 20
                            ),
                        ));
                    }
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
                out.array(keys.len());
                for key in keys {
                    out.bulk(&key);
                }
            }
            Cmd::RandomKey => {
                let (store, db, _, out) = ctx.parts();
                match store.random_key(db).await.map_err(store_error)? {
                    Some(key) => out.bulk(&key),
                    None => out.null(),
                }
            }
            Cmd::Transfer { from, to, how } => {
                let (store, db, batch, out) = ctx.parts();
                let _locks = store.lock_keys(db, &[from, to]).await;
                // A hash of rows is renamed by its key's row alone; any
                // other value is read whole.
                let by_row = match how {
                    Transfer::Copy { .. } => None,
                    _ if db.in_transaction() => None,
                    _ => (store.lookup(db, batch, from).await)
                        .map_err(store_error)?
                        .filter(|e| e.fields.is_some()),
                };
                let moves_row = by_row.is_some();
                let (entry, value) = match by_row {
                    Some(entry) => (entry, Vec::new()),
                    None => match store
                        .read(db, batch, from, true)
                        .await
                        .map_err(store_error)?
                    {
                        Some(read) => read,
                        None if matches!(how, Transfer::Copy { .. }) => {
                            out.int(0);
                            return Ok(());
                        }
                        None => return Err(("ERR", "no such key".into())),
                    },
                };
                let replaces = match how {
                    Transfer::Rename => true,
                    Transfer::RenameNx => false,
                    Transfer::Copy { replace } => replace,
                };
                // Renamed onto itself: nothing to do. (A copy onto itself
                // was refused.)
                let taken = from == to
                    || (!replaces
                        && (store.lookup(db, batch, to).await)
                            .map_err(store_error)?
                            .is_some());
                if !taken {
                    let item = Item {
                        key: to,
                        kind: entry.kind,
                        value: &value,
                        expires: entry.expires,
                        fields: entry.fields.filter(|_| moves_row),
                    };
                    let done = match how {
                        Transfer::Copy { .. } => store.write(db, batch, &[item]).await,
                        _ => store.rename(db, batch, from, &entry, item).await,
                    };
                    done.map_err(store_error)?;
                }
                match how {
                    Transfer::Rename => out.ok(),
                    _ => out.int(i64::from(!taken)),
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_redis_matches_them() {
        let yes: &[(&str, &str)] = &[
            ("*", ""),
            ("*", "anything"),
            ("h?llo", "hello"),
            ("h*llo", "heeeello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("h[b-a]llo", "hallo"),
            ("a\\*b", "a*b"),
            ("*.txt", "a.b.txt"),
            ("a*b*c", "aXbYbZc"),
            ("[abc", "a"),
            ("[^", "x"),
            ("x\\", "x\\"),
            ("**a", "a"),
        ];
        for (pattern, name) in yes {
            assert!(
                glob(pattern.as_bytes(), name.as_bytes()),
                "{pattern} {name}"
            );
        }
        let no: &[(&str, &str)] = &[
            ("h?llo", "hllo"),
            ("h[^e]llo", "hello"),
            ("h[a-b]llo", "hcllo"),
            ("a\\*b", "aXb"),
            ("*.txt", "a.txt.gz"),
            ("[", "["),
            ("abc", "ab"),
            ("ab", "abc"),
        ];
        for (pattern, name) in no {
            assert!(
                !glob(pattern.as_bytes(), name.as_bytes()),
                "{pattern} {name}"
            );
        }
    }

    #[test]
    fn cursors_are_read_as_strtoul_reads_them() {
        assert_eq!(cursor(b"").unwrap(), 0);
        assert_eq!(cursor(b"0").unwrap(), 0);
        assert_eq!(cursor(b"007").unwrap(), 7);
        assert_eq!(cursor(b"+7").unwrap(), 7);
        assert_eq!(cursor(b"-1").unwrap(), u64::MAX);
        assert_eq!(cursor(b"18446744073709551615").unwrap(), u64::MAX);
        for bad in [
            &b"18446744073709551616"[..],
            b" 1",
            b"1 ",
            b"-",
            b"x",
            b"1.5",
        ] {
            assert!(cursor(bad).is_err(), "{bad:?}");
        }
    }
}
