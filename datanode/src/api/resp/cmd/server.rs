//! What clients ask of the server: `DBSIZE`, `FLUSHDB`, `INFO`, `COMMAND`
//! (answered from the one command table), `CONFIG` and `TIME`.

use super::{
    COMMANDS, Command, Ctx, Data, REDIS_VERSION, Refusal, Spec, Upper, option, store_error, syntax,
    upper,
};

pub(in crate::api::resp) enum Cmd<'a> {
    DbSize,
    /// `FLUSHDB [ASYNC | SYNC]`: either way, the keys are gone when it answers.
    FlushDb,
    Info,
    /// `COMMAND [COUNT | LIST | …]`: the subcommand, if any.
    Command(Option<&'a [u8]>),
    Config,
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
        "INFO" => Cmd::Info,
        "COMMAND" => Cmd::Command(args.get(1).copied()),
        "CONFIG" => Cmd::Config,
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
            Cmd::Info => {
                let keys = ctx
                    .store
                    .count(&ctx.session.db)
                    .await
                    .map_err(store_error)?;
                let text = format!(
                    "# Server\r\nredis_version:{REDIS_VERSION}\r\nshoal_version:{}\r\nredis_mode:standalone\r\n\r\n# Keyspace\r\ndb0:keys={keys}\r\n\r\n# Shoal\r\ndatabase:{}\r\n",
                    env!("CARGO_PKG_VERSION"),
                    ctx.session.db.db.name,
                );
                ctx.out.bulk(text.as_bytes());
            }
            Cmd::Command(sub) => match sub.and_then(upper).as_ref().map(Upper::as_str) {
                Some("COUNT") => ctx.out.int(COMMANDS.len() as i64),
                Some("LIST") => {
                    ctx.out.array(COMMANDS.len());
                    for spec in &COMMANDS {
                        ctx.out.bulk(spec.name.to_ascii_lowercase().as_bytes());
                    }
                }
                _ => ctx.out.array(0),
            },
            // Tools ask for settings Shoal does not have as Redis names them.
            Cmd::Config => ctx.out.map(0),
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
