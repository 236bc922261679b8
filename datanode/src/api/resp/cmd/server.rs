//! What clients ask of the server: `DBSIZE`, `FLUSHDB`, `INFO`, `COMMAND`
//! (answered from the one command table), `CONFIG` and `TIME`.

use std::fmt::Write;

use super::keys::glob;
use super::{
    COMMANDS, Command, Ctx, Data, InMulti, Keys, REDIS_VERSION, Refusal, Spec, Upper, find, option,
    store_error, subcommand, syntax, upper,
};
use crate::api::resp::frame::Out;

pub(in crate::api::resp) enum Cmd<'a> {
    DbSize,
    /// `FLUSHDB [ASYNC | SYNC]`: either way, the keys are gone when it answers.
    FlushDb,
    /// `INFO [section…]`: the sections, in capitals.
    Info(Vec<Upper>),
    /// `COMMAND [COUNT | LIST | INFO name… | DOCS name…]`: the arguments
    /// after `COMMAND`.
    Command(&'a [&'a [u8]]),
    /// `CONFIG GET parameter…`: the glob-style patterns of the parameters.
    ConfigGet(&'a [&'a [u8]]),
    Time,
}

pub(super) fn parse<'a>(spec: &'static Spec, args: &'a [&'a [u8]]) -> Result<Command<'a>, Refusal> {
    let cmd = match spec.name {
        "DBSIZE" => Cmd::DbSize,
        "FLUSHDB" => match args {
            [_] => Cmd::FlushDb,
            [_, how] if matches!(option(how).as_str(), "ASYNC" | "SYNC") => Cmd::FlushDb,
            _ => return Err(syntax()),
        },
        "INFO" => Cmd::Info(args[1..].iter().map(|a| option(a)).collect()),
        "COMMAND" => Cmd::Command(&args[1..]),
        "CONFIG" => match (option(args[1]).as_str(), args.len()) {
            ("GET", n) if n > 2 => Cmd::ConfigGet(&args[2..]),
            ("SET" | "RESETSTAT" | "REWRITE", _) => {
                return Err((
                    "ERR",
                    "CONFIG is read-only here: Shoal's settings are its operators'".into(),
                ));
            }
            _ => return Err(subcommand(args)),
        },
        "TIME" => Cmd::Time,
        _ => return Err(super::unknown_command(args)),
    };
    Ok(Command::Data(Data::Server(cmd)))
}

impl Cmd<'_> {
    pub(super) async fn apply(self, ctx: &mut Ctx<'_>) -> Result<(), Refusal> {
        match self {
            Cmd::DbSize => {
                let count = ctx.store.count(&ctx.session.db).await;
                ctx.out.int(count.map_err(store_error)? as i64);
            }
            Cmd::FlushDb => {
                let (store, db, batch, out) = ctx.parts();
                store.flush(db, batch).await.map_err(store_error)?;
                out.ok();
            }
            Cmd::Info(sections) => {
                let text = info(ctx, &sections).await?;
                ctx.out.bulk(text.as_bytes());
            }
            Cmd::Command(args) => command(ctx.out, args)?,
            Cmd::ConfigGet(patterns) => {
                let settings = settings(ctx);
                let matching: Vec<&(&str, String)> = (settings.iter())
                    .filter(|(name, _)| patterns.iter().any(|p| glob(p, name.as_bytes())))
                    .collect();
                ctx.out.map(matching.len());
                for (name, value) in matching {
                    ctx.out.bulk(name.as_bytes());
                    ctx.out.bulk(value.as_bytes());
                }
            }
            // The node's clock: Unix seconds and the microseconds past them.
            Cmd::Time => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                ctx.out.array(2);
                ctx.out.bulk(now.as_secs().to_string().as_bytes());
                ctx.out.bulk(now.subsec_micros().to_string().as_bytes());
            }
        }
        Ok(())
    }
}

/// `COMMAND` and its subcommands, from the command table.
fn command(out: &mut Out, args: &[&[u8]]) -> Result<(), Refusal> {
    let named = |names: &[&[u8]]| -> Vec<Option<&'static Spec>> {
        names
            .iter()
            .map(|n| upper(n).and_then(|n| find(n.as_str())))
            .collect()
    };
    let all = || COMMANDS.iter().map(Some).collect::<Vec<_>>();
    let sub = args.first().map(|a| option(a)).unwrap_or_default();
    match (sub.as_str(), args.len()) {
        (_, 0) => command_info(out, &all()),
        ("COUNT", 1) => out.int(COMMANDS.len() as i64),
        ("LIST", 1) => {
            out.array(COMMANDS.len());
            for spec in &COMMANDS {
                out.bulk(spec.name.to_ascii_lowercase().as_bytes());
            }
        }
        ("INFO", 1) => command_info(out, &all()),
        ("INFO", _) => command_info(out, &named(&args[1..])),
        ("DOCS", n) => {
            let specs: Vec<&Spec> = if n == 1 {
                COMMANDS.iter().collect()
            } else {
                named(&args[1..]).into_iter().flatten().collect()
            };
            out.map(specs.len());
            for spec in specs {
                out.bulk(spec.name.to_ascii_lowercase().as_bytes());
                out.map(3);
                for (field, value) in [
                    ("summary", spec.summary),
                    ("since", spec.since),
                    ("group", spec.group),
                ] {
                    out.bulk(field.as_bytes());
                    out.bulk(value.as_bytes());
                }
            }
        }
        _ => {
            let mut words: Vec<&[u8]> = vec![b"COMMAND"];
            words.extend_from_slice(args);
            return Err(subcommand(&words));
        }
    }
    Ok(())
}

/// `COMMAND INFO`'s ten fields for each command (null for one not here):
/// name, arity, flags, first key, last key, key step, ACL categories,
/// tips, key specs and subcommands.
fn command_info(out: &mut Out, specs: &[Option<&'static Spec>]) {
    out.array(specs.len());
    for spec in specs {
        let Some(spec) = spec else {
            out.null_array();
            continue;
        };
        let data = spec.group != "connection" && spec.group != "transactions";
        let writes = data && !spec.reads && spec.group != "server";
        let mut flags: Vec<&str> = Vec::new();
        if data {
            flags.push(if writes { "write" } else { "readonly" });
        }
        if spec.before_auth {
            flags.push("noauth");
        }
        if spec.in_multi != InMulti::Queued {
            flags.push("no_multi");
        }
        let (first, last, step) = match spec.keys {
            Keys::None => (0, 0, 0),
            Keys::First => (1, 1, 1),
            Keys::All => (1, -1, 1),
            Keys::Pairs => (1, -1, 2),
            Keys::Two => (1, 2, 1),
        };
        let category = match spec.group {
            "generic" => "@keyspace",
            "transactions" => "@transaction",
            "server" => "@admin",
            "string" => "@string",
            "hash" => "@hash",
            _ => "@connection",
        };
        out.array(10);
        out.bulk(spec.name.to_ascii_lowercase().as_bytes());
        out.int(i64::from(spec.arity));
        out.set(flags.len());
        for flag in flags {
            out.simple(flag);
        }
        out.int(first);
        out.int(last);
        out.int(step);
        let access = (data).then_some(if writes { "@write" } else { "@read" });
        let categories: Vec<&str> = access.into_iter().chain([category]).collect();
        out.set(categories.len());
        for c in categories {
            out.simple(c);
        }
        out.array(0);
        out.array(0);
        out.array(0);
    }
}

/// The settings `CONFIG GET` answers, as Redis names them: what the
/// connection's database and this node hold to.
fn settings(ctx: &Ctx<'_>) -> Vec<(&'static str, String)> {
    let db = &ctx.session.db.db;
    vec![
        ("maxmemory", db.memory.limit().unwrap_or(0).to_string()),
        // At its quota a database refuses writes, as Redis's noeviction.
        ("maxmemory-policy", "noeviction".into()),
        ("databases", "1".into()),
        ("proto-max-bulk-len", ctx.store.max_value().to_string()),
        // Every write is on disk (and on every replica) before it is answered.
        ("appendonly", "yes".into()),
        ("appendfsync", "always".into()),
        ("save", String::new()),
        ("cluster-enabled", "no".into()),
    ]
}

/// `INFO`'s text for `sections` (none: the default ones).
async fn info(ctx: &mut Ctx<'_>, sections: &[Upper]) -> Result<String, Refusal> {
    let wants = |name: &str| {
        sections.is_empty()
            || sections.iter().any(|s| {
                matches!(s.as_str(), "ALL" | "EVERYTHING" | "DEFAULT") || s.as_str() == name
            })
    };
    let db = std::sync::Arc::clone(&ctx.session.db.db);
    let mut text = String::new();
    if wants("SERVER") {
        let up = crate::api::resp::started().elapsed().as_secs();
        let _ = write!(
            text,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_mode:standalone\r\nshoal_version:{}\r\narch_bits:64\r\nprocess_id:{}\r\nuptime_in_seconds:{up}\r\nuptime_in_days:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            up / 86_400,
        );
    }
    if wants("MEMORY") {
        let used = db.memory.bytes();
        let _ = write!(
            text,
            "# Memory\r\nused_memory:{used}\r\nmaxmemory:{}\r\nmaxmemory_policy:noeviction\r\n\r\n",
            db.memory.limit().unwrap_or(0),
        );
    }
    if wants("PERSISTENCE") {
        text.push_str("# Persistence\r\nloading:0\r\naof_enabled:1\r\n\r\n");
    }
    if wants("STATS") {
        let counters = &db.governance.counters;
        let get = crate::tc::counter;
        let _ = write!(
            text,
            "# Stats\r\ntotal_commands_processed:{}\r\nread_units:{}\r\nwrite_units:{}\r\nthrottled_reads:{}\r\nthrottled_writes:{}\r\nquota_rejections:{}\r\n\r\n",
            get(&counters.requests),
            get(&counters.read_units),
            get(&counters.write_units),
            get(&counters.throttled_reads),
            get(&counters.throttled_writes),
            get(&counters.quota_rejections),
        );
    }
    if wants("REPLICATION") {
        text.push_str("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n");
    }
    if wants("KEYSPACE") {
        let keys = ctx
            .store
            .count(&ctx.session.db)
            .await
            .map_err(store_error)?;
        let _ = write!(text, "# Keyspace\r\ndb0:keys={keys}\r\n\r\n");
    }
    if wants("SHOAL") {
        let _ = write!(text, "# Shoal\r\ndatabase:{}\r\n\r\n", db.name);
    }
    // As Redis: no blank line after the last section.
    if text.ends_with("\r\n\r\n") {
        text.truncate(text.len() - 2);
    }
    Ok(text)
}
