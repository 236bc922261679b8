//! Hash keys: `HSET` (`HMSET`), `HSETNX`, `HGET`, `HMGET`, `HGETALL`,
//! `HKEYS`, `HVALS`, `HLEN`, `HSTRLEN`, `HEXISTS`, `HDEL`, `HINCRBY`,
//! `HINCRBYFLOAT`, `HRANDFIELD` and `HSCAN`. A small hash is one value
//! holding all its fields; a large one keeps a row per field (see
//! `store::fields`), and a command reads and writes only the fields it
//! names. A hash left without fields is deleted, as in Redis.

use super::{
    Command, Ctx, Data, Refusal, Spec, int, int_arg, keys, option, overflow, store_error, syntax,
    wrong_args, wrong_type,
};
use crate::api::resp::long_double::{self, FloatError};
use crate::api::resp::store::fields::{Edit, stays_whole};
use crate::api::resp::store::{Item, Kind, decode_hash, encode_hash, random_below};

/// Most fields `HRANDFIELD` answers for a negative count (which may
/// repeat fields), and most bytes of them for any count: a reply stays
/// bounded.
const MAX_RANDOM_FIELDS: u64 = 1_000_000;
const MAX_RANDOM_BYTES: usize = 64 << 20;

pub(in crate::api::resp) enum Cmd<'a> {
    /// `HSET` (answers the fields added) or `HMSET` (answers OK): the key
    /// and its field-value pairs.
    Set {
        key: &'a [u8],
        pairs: &'a [&'a [u8]],
        count: bool,
    },
    /// `HSETNX`: the field is set only if the hash has none of that name.
    SetNx(&'a [u8], &'a [u8], &'a [u8]),
    Get(&'a [u8], &'a [u8]),
    MGet(&'a [u8], &'a [&'a [u8]]),
    GetAll(&'a [u8]),
    /// `HKEYS` (`values` false) or `HVALS`.
    Keys(&'a [u8], bool),
    Len(&'a [u8]),
    StrLen(&'a [u8], &'a [u8]),
    Exists(&'a [u8], &'a [u8]),
    Del(&'a [u8], &'a [&'a [u8]]),
    IncrBy(&'a [u8], &'a [u8], i64),
    /// `HINCRBYFLOAT key field increment`: the increment is a finite float.
    IncrByFloat(&'a [u8], &'a [u8], &'a [u8]),
    /// `HRANDFIELD key [count [WITHVALUES]]`.
    RandField {
        key: &'a [u8],
        count: Option<i64>,
        values: bool,
    },
    /// `HSCAN key cursor [MATCH pattern] [COUNT count]`: the options are
    /// judged once the key is found, as Redis does.
    Scan {
        key: &'a [u8],
        cursor: &'a [u8],
        options: &'a [&'a [u8]],
    },
}

pub(super) fn parse<'a>(spec: &'static Spec, args: &'a [&'a [u8]]) -> Result<Command<'a>, Refusal> {
    let cmd = match spec.name {
        "HSET" | "HMSET" if !args.len().is_multiple_of(2) => return Err(wrong_args(spec.name)),
        "HSET" | "HMSET" => Cmd::Set {
            key: args[1],
            pairs: &args[2..],
            count: spec.name == "HSET",
        },
        "HSETNX" => Cmd::SetNx(args[1], args[2], args[3]),
        "HGET" => Cmd::Get(args[1], args[2]),
        "HMGET" => Cmd::MGet(args[1], &args[2..]),
        "HGETALL" => Cmd::GetAll(args[1]),
        "HKEYS" => Cmd::Keys(args[1], false),
        "HVALS" => Cmd::Keys(args[1], true),
        "HLEN" => Cmd::Len(args[1]),
        "HSTRLEN" => Cmd::StrLen(args[1], args[2]),
        "HEXISTS" => Cmd::Exists(args[1], args[2]),
        "HDEL" => Cmd::Del(args[1], &args[2..]),
        "HINCRBY" => Cmd::IncrBy(args[1], args[2], int_arg(args[3])?),
        "HINCRBYFLOAT" => {
            long_double::check(args[3]).map_err(|e| match e {
                FloatError::NotFinite => ("ERR", "value is NaN or Infinity".into()),
                _ => super::strings::float_error(e),
            })?;
            Cmd::IncrByFloat(args[1], args[2], args[3])
        }
        "HRANDFIELD" => parse_randfield(args)?,
        "HSCAN" => {
            keys::cursor(args[2])?;
            Cmd::Scan {
                key: args[1],
                cursor: args[2],
                options: &args[3..],
            }
        }
        _ => return Err(super::unknown_command(args)),
    };
    Ok(Command::Data(Data::Hashes(cmd)))
}

fn parse_randfield<'a>(args: &'a [&'a [u8]]) -> Result<Cmd<'a>, Refusal> {
    let Some(count) = args.get(2) else {
        return Ok(Cmd::RandField {
            key: args[1],
            count: None,
            values: false,
        });
    };
    let count = int_arg(count)?;
    if count == i64::MIN {
        return Err((
            "ERR",
            format!(
                "value is out of range, value must between {} and {}",
                -i64::MAX,
                i64::MAX
            ),
        ));
    }
    let values = match args.get(3) {
        None => false,
        Some(arg) if args.len() == 4 && option(arg).as_str() == "WITHVALUES" => true,
        Some(_) => return Err(syntax()),
    };
    if values && !(-i64::MAX / 2..=i64::MAX / 2).contains(&count) {
        return Err(("ERR", "value is out of range".into()));
    }
    if count.unsigned_abs() > MAX_RANDOM_FIELDS && count < 0 {
        return Err((
            "ERR",
            format!("HRANDFIELD answers at most {MAX_RANDOM_FIELDS} fields"),
        ));
    }
    Ok(Cmd::RandField {
        key: args[1],
        count: Some(count),
        values,
    })
}

impl Cmd<'_> {
    pub(super) async fn apply(self, ctx: &mut Ctx<'_>) -> Result<(), Refusal> {
        match self {
            Cmd::Set { key, pairs, count } => {
                let mut added = 0;
                let names: Vec<&[u8]> = pairs.iter().step_by(2).copied().collect();
                ctx.modify_hash(key, &names, |edit| {
                    for pair in pairs.chunks(2) {
                        added += i64::from(edit.get(pair[0]).is_none());
                        edit.set(pair[0], pair[1].to_vec());
                    }
                    Ok(())
                })
                .await?;
                if count {
                    ctx.out.int(added);
                } else {
                    ctx.out.ok();
                }
            }
            Cmd::SetNx(key, field, value) => {
                let mut added = false;
                ctx.modify_hash(key, &[field], |edit| {
                    if edit.get(field).is_none() {
                        edit.set(field, value.to_vec());
                        added = true;
                    }
                    Ok(())
                })
                .await?;
                ctx.out.int(i64::from(added));
            }
            Cmd::Get(key, field) => {
                let value = ctx.hash_values(key, &[field]).await?.pop().flatten();
                match value {
                    Some(v) => ctx.out.bulk(&v),
                    None => ctx.out.null(),
                }
            }
            Cmd::Keys(key, values) => {
                let fields = ctx.read_hash(key).await?;
                ctx.out.array(fields.len());
                for (field, value) in &fields {
                    ctx.out.bulk(if values { value } else { field });
                }
            }
            Cmd::StrLen(key, field) => {
                let value = ctx.hash_values(key, &[field]).await?.pop().flatten();
                ctx.out.int(value.map_or(0, |v| v.len() as i64));
            }
            Cmd::MGet(key, wanted) => {
                let values = ctx.hash_values(key, wanted).await?;
                ctx.out.array(wanted.len());
                for value in values {
                    match value {
                        Some(v) => ctx.out.bulk(&v),
                        None => ctx.out.null(),
                    }
                }
            }
            Cmd::GetAll(key) => {
                let fields = ctx.read_hash(key).await?;
                ctx.out.hash_all(&fields);
            }
            Cmd::Len(key) => {
                let len = ctx.hash_len(key).await?;
                ctx.out.int(len as i64);
            }
            Cmd::Exists(key, field) => {
                let value = ctx.hash_values(key, &[field]).await?.pop().flatten();
                ctx.out.int(i64::from(value.is_some()));
            }
            Cmd::Del(key, gone) => {
                let mut removed = 0;
                ctx.modify_hash(key, gone, |edit| {
                    for field in gone {
                        removed += i64::from(edit.delete(field));
                    }
                    Ok(())
                })
                .await?;
                ctx.out.int(removed);
            }
            Cmd::IncrBy(key, field, by) => {
                let mut result = 0;
                ctx.modify_hash(key, &[field], |edit| {
                    let old = match edit.get(field) {
                        None => 0,
                        Some(v) => int(v)
                            .ok_or_else(|| ("ERR", "hash value is not an integer".to_owned()))?,
                    };
                    result = old.checked_add(by).ok_or_else(overflow)?;
                    edit.set(field, result.to_string().into_bytes());
                    Ok(())
                })
                .await?;
                ctx.out.int(result);
            }
            Cmd::IncrByFloat(key, field, by) => {
                let mut sum = Vec::new();
                ctx.modify_hash(key, &[field], |edit| {
                    sum = long_double::add(edit.get(field), by).map_err(|e| match e {
                        FloatError::Value => ("ERR", "hash value is not a float".into()),
                        _ => super::strings::float_error(e),
                    })?;
                    edit.set(field, sum.clone());
                    Ok(())
                })
                .await?;
                ctx.out.bulk(&sum);
            }
            Cmd::RandField { key, count, values } => {
                let fields = ctx.read_hash(key).await?;
                let out = &mut *ctx.out;
                let Some(count) = count else {
                    match fields.len() {
                        0 => out.null(),
                        n => out.bulk(&fields[random_below(n as u64) as usize].0),
                    }
                    return Ok(());
                };
                // Distinct fields for a positive count, any for a negative one.
                let picked: Vec<usize> = match (fields.len(), count) {
                    (0, _) | (_, 0) => Vec::new(),
                    (n, c) if c < 0 => (0..c.unsigned_abs())
                        .map(|_| random_below(n as u64) as usize)
                        .collect(),
                    (n, c) => {
                        let mut order: Vec<usize> = (0..n).collect();
                        let take = (c as u64).min(n as u64) as usize;
                        for i in 0..take {
                            let j = i + random_below((n - i) as u64) as usize;
                            order.swap(i, j);
                        }
                        order.truncate(take);
                        order
                    }
                };
                let bytes: usize = (picked.iter())
                    .map(|&i| fields[i].0.len() + if values { fields[i].1.len() } else { 0 })
                    .sum();
                if bytes > MAX_RANDOM_BYTES {
                    return Err((
                        "ERR",
                        format!(
                            "HRANDFIELD would answer {bytes} bytes; at most {} MiB",
                            MAX_RANDOM_BYTES >> 20
                        ),
                    ));
                }
                let pairs = values && out.resp3;
                out.array(if values && !pairs {
                    2 * picked.len()
                } else {
                    picked.len()
                });
                for i in picked {
                    if pairs {
                        out.array(2);
                    }
                    out.bulk(&fields[i].0);
                    if values {
                        out.bulk(&fields[i].1);
                    }
                }
            }
            Cmd::Scan {
                key,
                cursor,
                options,
            } => {
                // The whole hash in one reply, as Redis answers a small one:
                // its fields are one value here.
                let fields = ctx.read_hash(key).await?;
                let mut answered = Vec::new();
                if !fields.is_empty() {
                    let scan = keys::parse_scan(cursor, options, false)?;
                    answered.extend(fields.iter().filter(|(f, _)| scan.matches(f)));
                }
                let out = &mut *ctx.out;
                out.array(2);
                out.bulk(b"0");
                out.array(2 * answered.len());
                for (field, value) in answered {
                    out.bulk(field);
                    out.bulk(value);
                }
            }
        }
        Ok(())
    }
}

impl Ctx<'_> {
    /// Changes fields `names` of a hash key (none when absent) under its
    /// lock, keeping its expiry; a hash left without fields is deleted. A
    /// hash of rows has only those fields read and written; a whole one is
    /// rewritten, and moved to rows once it grows past one row's worth.
    async fn modify_hash(
        &mut self,
        key: &[u8],
        names: &[&[u8]],
        change: impl FnOnce(&mut Edit) -> Result<(), Refusal>,
    ) -> Result<(), Refusal> {
        let (store, db, batch, _) = self.parts();
        let lock = store.lock_keys(db, &[key]).await;
        let read = if db.in_transaction() {
            store.read(db, batch, key, true).await
        } else {
            match store.lookup(db, batch, key).await.map_err(store_error)? {
                None => Ok(None),
                Some(e) if e.kind != Kind::Hash => return Err(wrong_type()),
                Some(e) => match e.fields {
                    Some(f) => {
                        let mut edit = (store.read_fields(db, batch, f, names))
                            .await
                            .map_err(store_error)?;
                        change(&mut edit)?;
                        let mark = (store.write_fields(db, batch, key, &e, &edit))
                            .await
                            .map_err(store_error)?;
                        drop(lock);
                        return store.acknowledgeable(mark).await.map_err(store_error);
                    }
                    // A value of one row came with its entry.
                    None if e.parts == 0 => {
                        let value = e.head.clone();
                        Ok(Some((e, value)))
                    }
                    None => store.read(db, batch, key, true).await,
                },
            }
        };
        let read = read.map_err(store_error)?;
        let (entry, mut fields) = match read {
            None => (None, Vec::new()),
            Some((e, _)) if e.kind != Kind::Hash => return Err(wrong_type()),
            Some((e, v)) => (Some(e), decode_hash(&v)),
        };
        let mut edit = Edit::of_whole(names, &fields);
        change(&mut edit)?;
        edit.apply(&mut fields);
        match (&entry, fields.is_empty()) {
            (None, true) => {}
            (Some(e), true) => store.delete(db, batch, key, e).await.map_err(store_error)?,
            _ => {
                let value = encode_hash(&fields);
                if db.in_transaction() || stays_whole(&fields, value.len()) {
                    let item = Item {
                        key,
                        kind: Kind::Hash,
                        value: &value,
                        expires: entry.and_then(|e| e.expires),
                        fields: None,
                    };
                    store.write(db, batch, &[item]).await.map_err(store_error)?;
                } else {
                    (store.to_rows(db, batch, key, entry.as_ref(), &fields))
                        .await
                        .map_err(store_error)?;
                }
            }
        }
        Ok(())
    }

    /// `HSET key` with each of `commands`' field-value pairs, in order, as
    /// one change of the hash: how many fields each added.
    pub(in crate::api::resp) async fn hset_many(
        &mut self,
        key: &[u8],
        commands: &[&[&[u8]]],
    ) -> Result<Vec<i64>, Refusal> {
        let names: Vec<&[u8]> = (commands.iter())
            .flat_map(|pairs| pairs.iter().step_by(2).copied())
            .collect();
        let mut added = Vec::with_capacity(commands.len());
        self.modify_hash(key, &names, |edit| {
            for pairs in commands {
                let mut n = 0;
                for pair in pairs.chunks(2) {
                    n += i64::from(edit.get(pair[0]).is_none());
                    edit.set(pair[0], pair[1].to_vec());
                }
                added.push(n);
            }
            Ok(())
        })
        .await?;
        Ok(added)
    }

    /// The values of fields `names` of a hash key (none when absent);
    /// `WRONGTYPE` for a string.
    pub(in crate::api::resp) async fn hash_values(
        &mut self,
        key: &[u8],
        names: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>, Refusal> {
        let (store, db, batch, _) = self.parts();
        if !db.in_transaction() {
            let entry = store.lookup(db, batch, key).await.map_err(store_error)?;
            match &entry {
                None => return Ok(vec![None; names.len()]),
                Some(e) if e.kind != Kind::Hash => return Err(wrong_type()),
                Some(e) => {
                    if let Some(f) = e.fields {
                        let edit = (store.read_fields(db, batch, f, names))
                            .await
                            .map_err(store_error)?;
                        return Ok(names
                            .iter()
                            .map(|n| edit.get(n).map(<[u8]>::to_vec))
                            .collect());
                    }
                    if e.parts == 0 {
                        let fields = decode_hash(&e.head);
                        return Ok(pick(&fields, names));
                    }
                }
            }
        }
        let fields = self.read_hash(key).await?;
        Ok(pick(&fields, names))
    }

    /// How many fields a hash key has (0 when absent).
    async fn hash_len(&mut self, key: &[u8]) -> Result<u64, Refusal> {
        let (store, db, batch, _) = self.parts();
        if !db.in_transaction() {
            match store.lookup(db, batch, key).await.map_err(store_error)? {
                None => return Ok(0),
                Some(e) if e.kind != Kind::Hash => return Err(wrong_type()),
                Some(e) => match e.fields {
                    Some(f) => return Ok(f.count),
                    None if e.parts == 0 => return Ok(decode_hash(&e.head).len() as u64),
                    None => {}
                },
            }
        }
        Ok(self.read_hash(key).await?.len() as u64)
    }
}

/// The values of `names` among a whole hash's fields.
fn pick(fields: &[(Vec<u8>, Vec<u8>)], names: &[&[u8]]) -> Vec<Option<Vec<u8>>> {
    (names.iter())
        .map(|n| fields.iter().find(|(f, _)| f == n).map(|(_, v)| v.clone()))
        .collect()
}
