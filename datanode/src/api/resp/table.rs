//! The commands this speaks, as Redis's command table describes them: each
//! one's arity and where its keys are. `COMMAND` answers from it, `MULTI`
//! checks queued commands against it, and `EXEC` takes the locks of the
//! keys it names.

/// Where a command's keys are among its arguments (the name is argument 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keys {
    /// None.
    None,
    /// Argument 1.
    First,
    /// Every argument from 1 on.
    All,
    /// Every other argument from 1 on (`MSET key value key value`).
    Pairs,
}

/// What a command sent after `MULTI` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InMulti {
    /// Queued for `EXEC`.
    Queued,
    /// Run at once (`EXEC`, `DISCARD`, `MULTI`, `WATCH`, `QUIT`), as Redis.
    AtOnce,
    /// Refused, and the transaction with it: `AUTH` or `HELLO` would move
    /// the connection to another database in the middle of its transaction.
    Refused,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Spec {
    pub(super) name: &'static str,
    /// Redis's: `n` is exactly `n` arguments with the name, `-n` at least `n`.
    pub(super) arity: i32,
    pub(super) keys: Keys,
    pub(super) in_multi: InMulti,
}

const fn spec(name: &'static str, arity: i32, keys: Keys) -> Spec {
    Spec {
        name,
        arity,
        keys,
        in_multi: InMulti::Queued,
    }
}

impl Spec {
    const fn in_multi(self, in_multi: InMulti) -> Spec {
        Spec { in_multi, ..self }
    }
}

pub(super) const COMMANDS: [Spec; 46] = [
    spec("PING", -1, Keys::None),
    spec("ECHO", 2, Keys::None),
    spec("QUIT", -1, Keys::None).in_multi(InMulti::AtOnce),
    spec("AUTH", -2, Keys::None).in_multi(InMulti::Refused),
    spec("HELLO", -1, Keys::None).in_multi(InMulti::Refused),
    spec("SELECT", 2, Keys::None),
    spec("DBSIZE", 1, Keys::None),
    spec("INFO", -1, Keys::None),
    spec("COMMAND", -1, Keys::None),
    spec("CONFIG", -2, Keys::None),
    spec("CLIENT", -2, Keys::None),
    spec("TYPE", 2, Keys::First),
    spec("GET", 2, Keys::First),
    spec("SET", -3, Keys::First),
    spec("MSET", -3, Keys::Pairs),
    spec("MGET", -2, Keys::All),
    spec("DEL", -2, Keys::All),
    spec("EXISTS", -2, Keys::All),
    spec("INCR", 2, Keys::First),
    spec("DECR", 2, Keys::First),
    spec("INCRBY", 3, Keys::First),
    spec("DECRBY", 3, Keys::First),
    spec("APPEND", 3, Keys::First),
    spec("STRLEN", 2, Keys::First),
    spec("GETRANGE", 4, Keys::First),
    spec("SUBSTR", 4, Keys::First),
    spec("SETRANGE", 4, Keys::First),
    spec("HSET", -4, Keys::First),
    spec("HMSET", -4, Keys::First),
    spec("HGET", 3, Keys::First),
    spec("HMGET", -3, Keys::First),
    spec("HGETALL", 2, Keys::First),
    spec("HLEN", 2, Keys::First),
    spec("HEXISTS", 3, Keys::First),
    spec("HDEL", -3, Keys::First),
    spec("HINCRBY", 4, Keys::First),
    spec("EXPIRE", -3, Keys::First),
    spec("PEXPIRE", -3, Keys::First),
    spec("TTL", 2, Keys::First),
    spec("PTTL", 2, Keys::First),
    spec("PERSIST", 2, Keys::First),
    spec("MULTI", 1, Keys::None).in_multi(InMulti::AtOnce),
    spec("EXEC", 1, Keys::None).in_multi(InMulti::AtOnce),
    spec("DISCARD", 1, Keys::None).in_multi(InMulti::AtOnce),
    spec("WATCH", -2, Keys::All).in_multi(InMulti::AtOnce),
    spec("UNWATCH", 1, Keys::None),
];

/// The command named `name` (in capitals).
pub(super) fn find(name: &str) -> Option<&'static Spec> {
    COMMANDS.iter().find(|c| c.name == name)
}

impl Spec {
    /// Whether `n` arguments (the name included) fit the arity.
    pub(super) fn takes(&self, n: usize) -> bool {
        let n = n as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 { n == arity } else { n >= -arity }
    }

    /// The keys among `args`.
    pub(super) fn keys<'a>(&self, args: &[&'a [u8]]) -> Vec<&'a [u8]> {
        let from = args.get(1..).unwrap_or_default();
        match self.keys {
            Keys::None => Vec::new(),
            Keys::First => from.iter().take(1).copied().collect(),
            Keys::All => from.to_vec(),
            Keys::Pairs => from.iter().step_by(2).copied().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_in_capitals() {
        for (i, c) in COMMANDS.iter().enumerate() {
            assert_eq!(c.name, c.name.to_ascii_uppercase());
            assert!(COMMANDS[..i].iter().all(|d| d.name != c.name), "{}", c.name);
        }
    }

    #[test]
    fn arities_and_keys_read_as_redis_has_them() {
        let get = find("GET").unwrap();
        assert!(get.takes(2) && !get.takes(1) && !get.takes(3));
        let set = find("SET").unwrap();
        assert!(set.takes(3) && set.takes(9) && !set.takes(2));
        let mset = find("MSET").unwrap();
        let args: [&[u8]; 5] = [b"MSET", b"a", b"1", b"b", b"2"];
        assert_eq!(mset.keys(&args), [b"a" as &[u8], b"b"]);
        let del = find("DEL").unwrap();
        assert_eq!(del.keys(&args[..3]), [b"a" as &[u8], b"1"]);
        assert!(find("PING").unwrap().keys(&args).is_empty());
        assert!(find("LPUSH").is_none());
    }
}
