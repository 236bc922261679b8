//! The Redis protocol through real clients: the `redis` crate, the
//! `redis-cli` binary, and raw bytes for what no client would send.

mod common;

use std::io::{Read, Write};

use common::Shoal;
use common::resp::{Setup, code, command, query, redis_cli, redis_cli_command, setup};
use redis::{Commands, Value as RValue};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_granted_key_opens_a_database() {
    let s = setup(&[]).await;
    let mut raw = s.raw();
    assert_eq!(raw.send(b"PING\r\n"), "+PONG\r\n");
    assert!(raw.send(&command(&["GET", "k"])).starts_with("-NOAUTH"));
    assert!(
        raw.send(&command(&["SET", "k", "v"]))
            .starts_with("-NOAUTH")
    );
    assert!(
        raw.send(&command(&["AUTH", &s.key]))
            .starts_with("-ERR AUTH needs the database")
    );
    let mut bad = s.key.clone();
    bad.pop();
    bad.push('!');
    for (db, key) in [("cache", bad.as_str()), ("cache", "x.y"), ("cache", "")] {
        let reply = raw.send(&command(&["AUTH", db, key]));
        assert_eq!(
            reply, "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
            "as Redis answers a bad password"
        );
    }
    // Not granted, another tenant's, missing: NOPERM.
    let both = s
        .shoal
        .create_key("acme", &[("cache", "read_write"), ("rival", "read_write")])
        .await;
    for (db, key) in [
        ("lab", s.key.as_str()),
        ("rival", s.key.as_str()),
        ("rival", both.as_str()),
    ] {
        let reply = raw.send(&command(&["AUTH", db, key]));
        assert!(reply.starts_with("-NOPERM"), "{db}: {reply}");
    }
    assert!(raw.send(&command(&["GET", "k"])).starts_with("-NOAUTH"));
    assert_eq!(raw.send(&command(&["AUTH", "cache", &s.key])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["GET", "k"])), "$-1\r\n");
    // A failed AUTH on an authenticated connection leaves it unauthenticated.
    assert!(
        raw.send(&command(&["AUTH", "cache", &bad]))
            .starts_with("-WRONGPASS")
    );
    assert!(raw.send(&command(&["GET", "k"])).starts_with("-NOAUTH"));

    // HELLO 3 with AUTH switches to RESP3.
    let mut raw = s.raw();
    let hello = raw.send(&command(&["HELLO", "3", "AUTH", "cache", &s.key]));
    assert!(hello.starts_with("%7\r\n"), "{hello}");
    assert_eq!(raw.send(&command(&["GET", "k"])), "_\r\n");
    assert!(raw.send(&command(&["HELLO", "4"])).starts_with("-NOPROTO"));
    assert_eq!(raw.send(&command(&["QUIT"])), "+OK\r\n");
    assert!(raw.closed());

    // The redis crate, RESP2 and RESP3.
    for resp3 in [false, true] {
        let mut con = redis::Client::open(s.url("cache", &s.key, resp3))
            .unwrap()
            .get_connection()
            .unwrap();
        let _: () = con.set("hello", "world").unwrap();
        let got: String = con.get("hello").unwrap();
        assert_eq!(got, "world");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_commands_behave_as_in_redis() {
    let s = setup(&[]).await;
    let mut con = s.connect();
    let c = &mut con;
    assert_eq!(query::<String>(c, &["PING"]).unwrap(), "PONG");
    assert_eq!(query::<String>(c, &["ECHO", "hi"]).unwrap(), "hi");
    assert_eq!(query::<String>(c, &["SELECT", "0"]).unwrap(), "OK");
    assert!(query::<String>(c, &["SELECT", "1"]).is_err());

    assert_eq!(query::<Option<String>>(c, &["GET", "n"]).unwrap(), None);
    assert_eq!(query::<String>(c, &["SET", "n", "10"]).unwrap(), "OK");
    assert_eq!(query::<i64>(c, &["INCR", "n"]).unwrap(), 11);
    assert_eq!(query::<i64>(c, &["DECR", "n"]).unwrap(), 10);
    assert_eq!(query::<i64>(c, &["INCRBY", "n", "-15"]).unwrap(), -5);
    assert_eq!(query::<i64>(c, &["DECRBY", "n", "5"]).unwrap(), -10);
    assert_eq!(query::<i64>(c, &["INCR", "fresh"]).unwrap(), 1);
    let e = query::<i64>(c, &["INCRBY", "n", "x"]).unwrap_err();
    assert!(e.to_string().contains("not an integer"), "{e}");
    assert_eq!(
        query::<String>(c, &["SET", "max", &i64::MAX.to_string()]).unwrap(),
        "OK"
    );
    let e = query::<i64>(c, &["INCR", "max"]).unwrap_err();
    assert!(e.to_string().contains("overflow"), "{e}");
    assert_eq!(
        query::<String>(c, &["GET", "max"]).unwrap(),
        i64::MAX.to_string()
    );

    assert_eq!(query::<i64>(c, &["APPEND", "s", "Hello"]).unwrap(), 5);
    assert_eq!(query::<i64>(c, &["APPEND", "s", " World"]).unwrap(), 11);
    assert_eq!(query::<i64>(c, &["STRLEN", "s"]).unwrap(), 11);
    assert_eq!(query::<i64>(c, &["STRLEN", "nothing"]).unwrap(), 0);
    assert_eq!(
        query::<String>(c, &["GETRANGE", "s", "0", "4"]).unwrap(),
        "Hello"
    );
    assert_eq!(
        query::<String>(c, &["GETRANGE", "s", "-5", "-1"]).unwrap(),
        "World"
    );
    assert_eq!(
        query::<i64>(c, &["SETRANGE", "s", "6", "Redis"]).unwrap(),
        11
    );
    assert_eq!(query::<String>(c, &["GET", "s"]).unwrap(), "Hello Redis");
    assert_eq!(query::<i64>(c, &["SETRANGE", "pad", "3", "x"]).unwrap(), 4);
    assert_eq!(query::<Vec<u8>>(c, &["GET", "pad"]).unwrap(), b"\0\0\0x");
    assert!(query::<i64>(c, &["SETRANGE", "pad", "-1", "x"]).is_err());

    // NX, XX, GET, KEEPTTL.
    assert_eq!(
        query::<Option<String>>(c, &["SET", "s", "v", "NX"]).unwrap(),
        None
    );
    assert_eq!(
        query::<Option<String>>(c, &["SET", "new", "v", "XX"]).unwrap(),
        None
    );
    assert_eq!(query::<Option<String>>(c, &["GET", "new"]).unwrap(), None);
    assert_eq!(
        query::<String>(c, &["SET", "new", "v1", "NX"]).unwrap(),
        "OK"
    );
    assert_eq!(
        query::<String>(c, &["SET", "new", "v2", "XX", "GET"]).unwrap(),
        "v1"
    );
    assert_eq!(query::<String>(c, &["GET", "new"]).unwrap(), "v2");
    assert!(query::<String>(c, &["SET", "new", "v", "NX", "XX"]).is_err());
    assert!(query::<String>(c, &["SET", "new", "v", "EX", "0"]).is_err());
    assert!(query::<String>(c, &["SET", "new", "v", "BOGUS"]).is_err());

    assert_eq!(
        query::<String>(c, &["MSET", "a", "1", "b", "2", "c", "3"]).unwrap(),
        "OK"
    );
    assert_eq!(
        query::<Vec<Option<String>>>(c, &["MGET", "a", "zz", "c"]).unwrap(),
        [Some("1".into()), None, Some("3".into())]
    );
    assert!(query::<String>(c, &["MSET", "a", "1", "b"]).is_err());
    // A key given twice takes its last value, whole, even across parts.
    let (v1, v2) = ("x".repeat(130_000), "y".repeat(60_000));
    assert_eq!(
        query::<String>(c, &["MSET", "twice", &v1, "twice", &v2]).unwrap(),
        "OK"
    );
    assert_eq!(query::<String>(c, &["GET", "twice"]).unwrap(), v2);
    let _: i64 = query(c, &["DEL", "twice"]).unwrap();
    let chunks = s.shoal.table_memory("cache", "redis_chunks").await.unwrap();
    assert_eq!(
        chunks[2], chunks[3],
        "no part of either value is left: {chunks:?}"
    );
    assert_eq!(
        query::<i64>(c, &["EXISTS", "a", "b", "zz", "a"]).unwrap(),
        3
    );
    assert_eq!(query::<i64>(c, &["DEL", "a", "b", "zz"]).unwrap(), 2);
    assert_eq!(query::<i64>(c, &["EXISTS", "a", "b"]).unwrap(), 0);
    assert_eq!(query::<String>(c, &["TYPE", "c"]).unwrap(), "string");
    assert_eq!(query::<String>(c, &["TYPE", "a"]).unwrap(), "none");

    // Binary-safe keys and values.
    let key = [0u8, 255, b'\r', b'\n'];
    let value: Vec<u8> = (0..=255).collect();
    let _: () = c.set(&key[..], &value).unwrap();
    let got: Vec<u8> = c.get(&key[..]).unwrap();
    assert_eq!(got, value);

    let e = query::<String>(c, &["GET"]).unwrap_err();
    assert!(e.to_string().contains("wrong number of arguments"), "{e}");
    let e = query::<String>(c, &["FLUSHALL"]).unwrap_err();
    assert!(e.to_string().contains("unknown command"), "{e}");
    assert_eq!(
        query::<String>(c, &["PING"]).unwrap(),
        "PONG",
        "errors leave the connection usable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_commands_behave_as_in_redis() {
    let s = setup(&[]).await;
    let mut con = s.connect();
    let c = &mut con;
    assert_eq!(
        query::<i64>(c, &["HSET", "h", "a", "1", "b", "2"]).unwrap(),
        2
    );
    assert_eq!(
        query::<i64>(c, &["HSET", "h", "a", "10", "c", "3"]).unwrap(),
        1
    );
    assert_eq!(query::<String>(c, &["HGET", "h", "a"]).unwrap(), "10");
    assert_eq!(
        query::<Option<String>>(c, &["HGET", "h", "zz"]).unwrap(),
        None
    );
    assert_eq!(
        query::<Option<String>>(c, &["HGET", "none", "a"]).unwrap(),
        None
    );
    assert_eq!(
        query::<Vec<Option<String>>>(c, &["HMGET", "h", "c", "zz", "b"]).unwrap(),
        [Some("3".into()), None, Some("2".into())]
    );
    let all: Vec<(String, String)> = query(c, &["HGETALL", "h"]).unwrap();
    assert_eq!(
        all,
        [
            ("a".into(), "10".into()),
            ("b".into(), "2".into()),
            ("c".into(), "3".into())
        ]
    );
    assert_eq!(query::<i64>(c, &["HLEN", "h"]).unwrap(), 3);
    assert_eq!(query::<i64>(c, &["HEXISTS", "h", "b"]).unwrap(), 1);
    assert_eq!(query::<i64>(c, &["HEXISTS", "h", "zz"]).unwrap(), 0);
    assert_eq!(query::<i64>(c, &["HINCRBY", "h", "a", "5"]).unwrap(), 15);
    assert_eq!(query::<i64>(c, &["HINCRBY", "h", "new", "-2"]).unwrap(), -2);
    assert!(query::<i64>(c, &["HINCRBY", "h", "a", "x"]).is_err());
    assert_eq!(query::<String>(c, &["HMSET", "h", "d", "4"]).unwrap(), "OK");
    assert_eq!(query::<i64>(c, &["HDEL", "h", "a", "zz", "b"]).unwrap(), 2);
    assert_eq!(query::<i64>(c, &["HLEN", "h"]).unwrap(), 3);
    assert_eq!(query::<String>(c, &["TYPE", "h"]).unwrap(), "hash");
    assert_eq!(query::<i64>(c, &["HDEL", "h", "c", "new", "d"]).unwrap(), 3);
    assert_eq!(
        query::<i64>(c, &["EXISTS", "h"]).unwrap(),
        0,
        "an empty hash is gone"
    );
    assert!(query::<i64>(c, &["HSET", "h", "a"]).is_err());

    // RESP3 answers HGETALL as a map.
    let mut con3 = redis::Client::open(s.url("cache", &s.key, true))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: i64 = query(&mut con3, &["HSET", "m", "f", "v"]).unwrap();
    let v: RValue = query(&mut con3, &["HGETALL", "m"]).unwrap();
    assert!(matches!(v, RValue::Map(ref m) if m.len() == 1), "{v:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_types_are_refused_and_change_nothing() {
    let s = setup(&[]).await;
    let mut con = s.connect();
    let c = &mut con;
    let _: () = c.set("str", "v").unwrap();
    let _: i64 = query(c, &["HSET", "hash", "f", "v"]).unwrap();
    for args in [
        &["HGET", "str", "f"][..],
        &["HSET", "str", "f", "v"],
        &["HGETALL", "str"],
        &["HINCRBY", "str", "f", "1"],
        &["HDEL", "str", "f"],
        &["GET", "hash"],
        &["INCR", "hash"],
        &["APPEND", "hash", "x"],
        &["GETRANGE", "hash", "0", "1"],
        &["SET", "hash", "x", "GET"],
    ] {
        let e = query::<RValue>(c, args).unwrap_err();
        assert_eq!(code(&e), "WRONGTYPE", "{args:?}: {e}");
    }
    assert_eq!(query::<String>(c, &["GET", "str"]).unwrap(), "v");
    assert_eq!(query::<String>(c, &["HGET", "hash", "f"]).unwrap(), "v");
    // A plain SET replaces any type, as in Redis.
    assert_eq!(
        query::<String>(c, &["SET", "hash", "now a string"]).unwrap(),
        "OK"
    );
    assert_eq!(query::<String>(c, &["TYPE", "hash"]).unwrap(), "string");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_keys_vanish_at_once_and_are_purged() {
    let s = setup(&[]).await;
    let mut con = s.connect();
    let c = &mut con;
    // An expiry in the past: invisible at once.
    assert_eq!(
        query::<String>(c, &["SET", "gone", "v", "PXAT", "1"]).unwrap(),
        "OK"
    );
    assert_eq!(query::<Option<String>>(c, &["GET", "gone"]).unwrap(), None);
    assert_eq!(query::<i64>(c, &["EXISTS", "gone"]).unwrap(), 0);
    assert_eq!(query::<i64>(c, &["TTL", "gone"]).unwrap(), -2);
    let _: i64 = query(c, &["HSET", "hgone", "f", "v"]).unwrap();
    assert_eq!(query::<i64>(c, &["PEXPIRE", "hgone", "-1"]).unwrap(), 1);
    assert_eq!(query::<i64>(c, &["HLEN", "hgone"]).unwrap(), 0);

    assert_eq!(
        query::<String>(c, &["SET", "ex", "v", "EX", "100"]).unwrap(),
        "OK"
    );
    assert!((95..=100).contains(&query::<i64>(c, &["TTL", "ex"]).unwrap()));
    assert_eq!(
        query::<String>(c, &["SET", "px", "v", "PX", "100000"]).unwrap(),
        "OK"
    );
    assert!((95_000..=100_000).contains(&query::<i64>(c, &["PTTL", "px"]).unwrap()));
    let _: i64 = query(c, &["DEL", "ex", "px"]).unwrap();
    let _: () = c.set("k", "v").unwrap();
    assert_eq!(query::<i64>(c, &["TTL", "k"]).unwrap(), -1);
    assert_eq!(query::<i64>(c, &["TTL", "missing"]).unwrap(), -2);
    assert_eq!(query::<i64>(c, &["EXPIRE", "k", "1000"]).unwrap(), 1);
    let ttl: i64 = query(c, &["TTL", "k"]).unwrap();
    assert!((990..=1000).contains(&ttl), "{ttl}");
    assert!(query::<i64>(c, &["PTTL", "k"]).unwrap() > 990_000);
    assert_eq!(query::<i64>(c, &["EXPIRE", "k", "10", "NX"]).unwrap(), 0);
    assert_eq!(query::<i64>(c, &["EXPIRE", "k", "10", "GT"]).unwrap(), 0);
    assert_eq!(query::<i64>(c, &["EXPIRE", "k", "10", "LT"]).unwrap(), 1);
    assert!(query::<i64>(c, &["TTL", "k"]).unwrap() <= 10);
    // INCR and APPEND keep the expiry; SET drops it.
    let _: () = c.set("n", "1").unwrap();
    let _: i64 = query(c, &["EXPIRE", "n", "500"]).unwrap();
    let _: i64 = query(c, &["INCR", "n"]).unwrap();
    assert!(query::<i64>(c, &["TTL", "n"]).unwrap() > 0);
    assert_eq!(query::<i64>(c, &["PERSIST", "n"]).unwrap(), 1);
    assert_eq!(query::<i64>(c, &["PERSIST", "n"]).unwrap(), 0);
    assert_eq!(query::<i64>(c, &["TTL", "n"]).unwrap(), -1);
    assert_eq!(query::<i64>(c, &["EXPIRE", "missing", "10"]).unwrap(), 0);
    assert!(query::<i64>(c, &["EXPIRE", "n", "x"]).is_err());
    assert!(query::<i64>(c, &["EXPIRE", "n", "10", "SOON"]).is_err());
    let _: () = c.set("kept", "v").unwrap();
    let _: i64 = query(c, &["EXPIRE", "kept", "500"]).unwrap();
    assert_eq!(
        query::<String>(c, &["SET", "kept", "w", "KEEPTTL"]).unwrap(),
        "OK"
    );
    assert!(query::<i64>(c, &["TTL", "kept"]).unwrap() > 0);
    let _: () = c.set("kept", "x").unwrap();
    assert_eq!(query::<i64>(c, &["TTL", "kept"]).unwrap(), -1);

    // The background purge takes the expired rows away: DBSIZE counts
    // rows, expired ones included, until then. (The bound is a guard.)
    let live = 3; // k, n, kept
    let purged = (0..2000).any(|_| {
        let size: i64 = query(c, &["DBSIZE"]).unwrap();
        if size == live {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        false
    });
    assert!(purged, "expired keys were never purged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_commands_are_answered_in_order() {
    let s = setup(&[]).await;
    let mut con = s.connect();
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    for i in 0..1000 {
        pipe.cmd("GET").arg(format!("k{i}"));
    }
    let got: Vec<i64> = pipe.query(&mut con).unwrap();
    assert_eq!(got, (0..1000).collect::<Vec<i64>>());

    // Runs of GETs and SETs with a wrong type, a missing key and a key set
    // twice among them: each command answered as if sent alone.
    let _: i64 = query(&mut con, &["HSET", "h", "f", "v"]).unwrap();
    let replies: Vec<redis::RedisResult<RValue>> = redis::pipe()
        .ignore_errors()
        .cmd("SET")
        .arg("x")
        .arg("1")
        .cmd("SET")
        .arg("y")
        .arg("2")
        .cmd("SET")
        .arg("x")
        .arg("3")
        .cmd("GET")
        .arg("x")
        .cmd("GET")
        .arg("h")
        .cmd("GET")
        .arg("nothing")
        .cmd("GET")
        .arg("y")
        .query(&mut con)
        .unwrap();
    let replies: Vec<Result<RValue, String>> = replies
        .into_iter()
        .map(|r| r.map_err(|e| code(&e)))
        .collect();
    assert_eq!(
        replies[..3],
        [Ok(RValue::Okay), Ok(RValue::Okay), Ok(RValue::Okay)]
    );
    assert_eq!(replies[3], Ok(RValue::BulkString(b"3".to_vec())));
    assert_eq!(replies[4], Err("WRONGTYPE".to_owned()));
    assert_eq!(replies[5], Ok(RValue::Nil));
    assert_eq!(replies[6], Ok(RValue::BulkString(b"2".to_vec())));

    // Runs of reads mixing GET, HGET and HGETALL, over a hash in its row, a
    // hash of several rows, a string, and keys that are not there: each
    // answered as if sent alone.
    let big = "b".repeat(60_000);
    let _: i64 = query(&mut con, &["HSET", "small", "f", "1", "g", "2"]).unwrap();
    let _: i64 = query(&mut con, &["HSET", "large", "f", &big, "g", "3"]).unwrap();
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for (name, key, field) in [
        ("HGETALL", "small", None),
        ("HGET", "small", Some("g")),
        ("HGET", "small", Some("nope")),
        ("HGETALL", "nothing", None),
        ("HGET", "nothing", Some("f")),
        ("HGETALL", "x", None),
        ("GET", "small", None),
        ("HGET", "large", Some("f")),
        ("HGETALL", "large", None),
        ("GET", "x", None),
    ] {
        pipe.cmd(name).arg(key);
        if let Some(field) = field {
            pipe.arg(field);
        }
    }
    let replies: Vec<redis::RedisResult<RValue>> = pipe.query(&mut con).unwrap();
    let replies: Vec<Result<RValue, String>> = replies
        .into_iter()
        .map(|r| r.map_err(|e| code(&e)))
        .collect();
    let bulk = |s: &str| RValue::BulkString(s.as_bytes().to_vec());
    let map = |pairs: &[(&str, &str)]| {
        RValue::Array(pairs.iter().flat_map(|(f, v)| [bulk(f), bulk(v)]).collect())
    };
    assert_eq!(replies[0], Ok(map(&[("f", "1"), ("g", "2")])));
    assert_eq!(replies[1], Ok(bulk("2")));
    assert_eq!(replies[2], Ok(RValue::Nil));
    assert_eq!(replies[3], Ok(RValue::Array(vec![])));
    assert_eq!(replies[4], Ok(RValue::Nil));
    assert_eq!(replies[5], Err("WRONGTYPE".to_owned()));
    assert_eq!(replies[6], Err("WRONGTYPE".to_owned()));
    assert_eq!(replies[7], Ok(bulk(&big)));
    assert_eq!(replies[8], Ok(map(&[("f", &big), ("g", "3")])));
    assert_eq!(replies[9], Ok(bulk("3")));

    // A run larger than the database allows in one request is done one
    // command at a time: every command succeeds.
    s.shoal
        .set_quota("cache", json!({"max_transaction_ops": 4}))
        .await;
    let mut pipe = redis::pipe();
    for i in 0..20 {
        pipe.cmd("SET").arg(format!("q{i}")).arg(i).ignore();
    }
    for i in 0..20 {
        pipe.cmd("GET").arg(format!("q{i}"));
    }
    for _ in 0..6 {
        pipe.cmd("HGET").arg("small").arg("f");
    }
    let got: Vec<i64> = pipe.query(&mut con).unwrap();
    assert_eq!(got, (0..20).chain([1; 6]).collect::<Vec<i64>>());

    // Many commands in one write, the last split across two.
    let mut raw = s.raw();
    assert_eq!(raw.send(&command(&["AUTH", "cache", &s.key])), "+OK\r\n");
    let mut bytes = Vec::new();
    for i in 0..50 {
        bytes.extend(command(&["INCR", "counter"]));
        let _ = i;
    }
    let last = command(&["GET", "counter"]);
    bytes.extend_from_slice(&last[..7]);
    raw.0.write_all(&bytes).unwrap();
    raw.0.write_all(&last[7..]).unwrap();
    let mut want = String::new();
    for i in 1..=50 {
        want.push_str(&format!(":{i}\r\n"));
    }
    want.push_str("$2\r\n50\r\n");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < want.len() {
        let n = raw.0.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(String::from_utf8(got).unwrap(), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_key_cannot_write_and_revocation_reaches_open_connections() {
    let s = setup(&[]).await;
    let mut writer = s.connect();
    let _: () = writer.set("k", "v").unwrap();
    let reader_key = s.shoal.create_key("acme", &[("cache", "read")]).await;
    let mut reader = s.connect_as("cache", &reader_key);
    assert_eq!(query::<String>(&mut reader, &["GET", "k"]).unwrap(), "v");
    for args in [
        &["SET", "k", "w"][..],
        &["DEL", "k"],
        &["INCR", "n"],
        &["HSET", "h", "f", "v"],
        &["EXPIRE", "k", "10"],
        &["MSET", "a", "1"],
    ] {
        let e = query::<RValue>(&mut reader, args).unwrap_err();
        assert_eq!(code(&e), "NOPERM", "{args:?}: {e}");
    }
    assert_eq!(query::<String>(&mut reader, &["GET", "k"]).unwrap(), "v");
    assert_eq!(query::<i64>(&mut reader, &["TTL", "k"]).unwrap(), -1);
    // A read key's refused first write does not create the key tables.
    let lab_reader = s.shoal.create_key("acme", &[("lab", "read")]).await;
    let mut lab = s.connect_as("lab", &lab_reader);
    assert_eq!(
        query::<Option<String>>(&mut lab, &["GET", "k"]).unwrap(),
        None
    );
    let e = query::<String>(&mut lab, &["SET", "k", "v"]).unwrap_err();
    assert_eq!(code(&e), "NOPERM", "{e}");
    assert_eq!(s.shoal.table_memory("lab", "redis_keys").await, None);

    // Revoked while the connection is open: its next command is refused.
    s.shoal.revoke_key(&s.key).await;
    let e = query::<String>(&mut writer, &["GET", "k"]).unwrap_err();
    assert_eq!(code(&e), "NOAUTH", "{e}");
    let e = query::<String>(&mut writer, &["GET", "k"]).unwrap_err();
    assert_eq!(code(&e), "NOAUTH", "stays refused: {e}");
    assert_eq!(query::<String>(&mut reader, &["GET", "k"]).unwrap(), "v");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_and_quotas_answer_with_their_own_errors() {
    let s = setup(&[]).await;
    let mut con = s.connect();
    let _: () = con.set("first", "v").unwrap();
    s.shoal
        .set_quota(
            "cache",
            json!({"write_units_per_sec": 1, "burst_seconds": 1}),
        )
        .await;
    let _: RValue = query(&mut con, &["SET", "a", "1"]).unwrap_or(RValue::Nil);
    let e = query::<String>(&mut con, &["SET", "b", "1"]).unwrap_err();
    assert_eq!(code(&e), "THROTTLED", "{e}");
    let text = e.to_string();
    assert!(
        text.contains("cache") && text.contains("retry_after_ms="),
        "{text}"
    );
    assert_eq!(
        query::<Option<String>>(&mut con, &["GET", "b"]).unwrap(),
        None
    );

    // Memory: the database at its quota refuses writes, still reads and deletes.
    let usage = s.shoal.get_json("/internal/v1/databases/cache/quota").await;
    let used = usage["usage"]["in_memory_bytes"].as_u64().unwrap();
    s.shoal
        .set_quota("cache", json!({"in_memory_bytes": used}))
        .await;
    let e = query::<String>(&mut con, &["SET", "big", &"x".repeat(20_000)]).unwrap_err();
    assert_eq!(code(&e), "QUOTA", "{e}");
    assert!(e.to_string().contains("cache"), "{e}");
    assert_eq!(query::<String>(&mut con, &["GET", "first"]).unwrap(), "v");
    assert_eq!(query::<i64>(&mut con, &["DEL", "first"]).unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_values_round_trip_and_are_accounted() {
    let s = setup(&["--max-request-size", "8M"]).await;
    let mut con = s.connect();
    let c = &mut con;
    let value: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let _: () = c.set("big", &value).unwrap();
    let got: Vec<u8> = c.get("big").unwrap();
    assert!(got == value, "3 MB came back changed");
    assert_eq!(query::<i64>(c, &["STRLEN", "big"]).unwrap(), 3_000_000);
    let across: Vec<u8> = query(c, &["GETRANGE", "big", "25990", "26010"]).unwrap();
    assert_eq!(across, value[25_990..=26_010]);
    assert_eq!(
        query::<i64>(c, &["APPEND", "big", "tail"]).unwrap(),
        3_000_004
    );
    let chunks = s.shoal.table_memory("cache", "redis_chunks").await.unwrap();
    let used = chunks[2].as_u64().unwrap() - chunks[3].as_u64().unwrap();
    assert!(used >= 2_970_000, "{chunks:?}");

    // Shrinking it gives the parts back; so does DEL.
    let _: () = c.set("big", "small").unwrap();
    assert_eq!(query::<String>(c, &["GET", "big"]).unwrap(), "small");
    let chunks = s.shoal.table_memory("cache", "redis_chunks").await.unwrap();
    assert_eq!(chunks[2], chunks[3], "no part is left: {chunks:?}");
    let _: () = c.set("big", &value).unwrap();
    assert_eq!(query::<i64>(c, &["DEL", "big"]).unwrap(), 1);
    let chunks = s.shoal.table_memory("cache", "redis_chunks").await.unwrap();
    assert_eq!(chunks[2], chunks[3], "no part is left: {chunks:?}");
    // Past the limit: a clear error, the connection closed, the server fine.
    let mut raw = s.raw();
    let reply = raw.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$9000000\r\n");
    assert!(
        reply.starts_with("-ERR Protocol error: invalid bulk length"),
        "{reply}"
    );
    assert!(raw.closed());
    let e = query::<String>(c, &["SETRANGE", "k", "8388600", "abcdefghijk"]).unwrap_err();
    assert!(e.to_string().contains("maximum allowed size"), "{e}");
    assert_eq!(query::<String>(c, &["PING"]).unwrap(), "PONG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_input_gets_an_error_and_the_server_survives() {
    let s = setup(&[]).await;
    let cases: [(&[u8], &str); 8] = [
        (
            b"*1\r\n$99999999999999\r\n",
            "-ERR Protocol error: invalid bulk length",
        ),
        (b"*1\r\n$-3\r\n", "-ERR Protocol error: invalid bulk length"),
        (
            b"*99999999999\r\n",
            "-ERR Protocol error: invalid multibulk length",
        ),
        (b"*abc\r\n", "-ERR Protocol error: invalid multibulk length"),
        (b"*2\r\n:1\r\n", "-ERR Protocol error: expected '$'"),
        (
            b"*1\r\n$4\r\nPINGxx\r\n",
            "-ERR Protocol error: bulk string not followed by CRLF",
        ),
        (
            b"SET \"unbalanced\r\n",
            "-ERR Protocol error: unbalanced quotes",
        ),
        (b"*1\r\n$1x\r\n", "-ERR Protocol error: invalid bulk length"),
    ];
    for (bytes, want) in cases {
        let mut raw = s.raw();
        let reply = raw.send(bytes);
        assert!(reply.starts_with(want), "{bytes:?}: {reply}");
        assert!(raw.closed(), "{bytes:?}");
    }
    // Truncated frames, then the client goes away.
    for bytes in [
        &b"*3\r\n$3\r\nSET"[..],
        b"*2\r\n$3\r\nGET\r\n$100\r\nabc",
        b"*",
    ] {
        let mut raw = s.raw();
        raw.0.write_all(bytes).unwrap();
        drop(raw);
    }
    // A line of 64 KiB with no end.
    let mut raw = s.raw();
    let reply = raw.send(&vec![b'A'; 70_000]);
    assert!(
        reply.starts_with("-ERR Protocol error: too big inline request"),
        "{reply}"
    );

    // Invalid UTF-8 where text is expected: an error, the connection goes on.
    let mut raw = s.raw();
    let reply = raw.send(&command(&["AUTH", "cache", &s.key]));
    assert_eq!(reply, "+OK\r\n");
    let reply = raw.send(b"*1\r\n$2\r\n\xff\xfe\r\n");
    assert!(reply.starts_with("-ERR unknown command"), "{reply}");
    let reply = raw.send(b"*2\r\n$4\r\nINCR\r\n$2\r\n\xff\xfe\r\n");
    assert_eq!(reply, ":1\r\n", "keys are bytes");
    let reply = raw.send(b"*3\r\n$6\r\nINCRBY\r\n$1\r\nk\r\n$2\r\n\xff\xfe\r\n");
    assert!(reply.starts_with("-ERR value is not an integer"), "{reply}");
    // A key past the limit: missing to a read, refused to a write.
    let long = "k".repeat(3001);
    assert_eq!(raw.send(&command(&["SET", "k", "1"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["GET", &long])), "$-1\r\n");
    assert_eq!(raw.send(&command(&["EXISTS", &long, "k"])), ":1\r\n");
    assert_eq!(raw.send(&command(&["TTL", &long])), ":-2\r\n");
    assert_eq!(
        raw.send(&command(&["MGET", &long, "k"])),
        "*2\r\n$-1\r\n$1\r\n1\r\n"
    );
    let reply = raw.send(&command(&["SET", &long, "v"]));
    assert!(reply.starts_with("-ERR key is longer"), "{reply}");
    assert_eq!(
        raw.send(&command(&["DEL", &long, "k"])),
        ":1\r\n",
        "the other key is deleted"
    );
    assert_eq!(raw.send(&command(&["EXISTS", "k"])), ":0\r\n");
    let reply = raw.send(b"*0\r\n*1\r\n$4\r\nPING\r\n");
    assert_eq!(reply, "+PONG\r\n", "an empty command is skipped");
    let mut other = s.raw();
    assert!(
        other
            .send(&command(&["AUTH", "lab\u{0}", &s.key]))
            .starts_with("-NOPERM")
    );
    assert_eq!(other.send(b"PING\r\n"), "+PONG\r\n");

    let mut con = s.connect();
    assert_eq!(query::<String>(&mut con, &["PING"]).unwrap(), "PONG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_and_server_commands_answer_what_clients_ask() {
    let s = setup(&[]).await;
    let mut con = s.connect();
    let c = &mut con;
    let _: () = c.set("a", "1").unwrap();
    let _: i64 = query(c, &["HSET", "h", "f", "v"]).unwrap();
    assert_eq!(query::<i64>(c, &["DBSIZE"]).unwrap(), 2);
    let info: String = query(c, &["INFO"]).unwrap();
    assert!(
        info.contains("redis_version:") && info.contains("db0:keys=2"),
        "{info}"
    );
    let names: Vec<String> = query(c, &["COMMAND", "LIST"]).unwrap();
    assert_eq!(
        query::<i64>(c, &["COMMAND", "COUNT"]).unwrap(),
        names.len() as i64
    );
    // Every command listed is known (wrong arity at worst, never unknown).
    for name in names
        .iter()
        .filter(|n| !["quit", "flushdb"].contains(&n.as_str()))
    {
        if let Err(e) = query::<RValue>(c, &[name.as_str()]) {
            assert!(!e.to_string().contains("unknown command"), "{name}: {e}");
        }
    }
    let _: RValue = query(c, &["COMMAND", "DOCS"]).unwrap();
    assert_eq!(
        query::<String>(c, &["CLIENT", "SETNAME", "app"]).unwrap(),
        "OK"
    );
    assert_eq!(query::<String>(c, &["CLIENT", "GETNAME"]).unwrap(), "app");
    assert!(query::<i64>(c, &["CLIENT", "ID"]).unwrap() > 0);
    assert!(query::<String>(c, &["CLIENT", "KILL"]).is_err());
    // The keys live in tables of the database, accounted like any other.
    let keys = s.shoal.table_memory("cache", "redis_keys").await.unwrap();
    assert!(keys[2].as_u64().unwrap() > 0, "{keys:?}");
    let db = s.shoal.get_json("/internal/v1/databases").await;
    assert!(db.to_string().contains("redis_keys"), "{db}");
}

/// `redis-cli`, installed by the test script, pointed at the node's
/// `cache` database with the setup's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_works_unchanged() {
    let s = setup(&[]).await;
    assert_eq!(redis_cli(&s, &["SET", "greeting", "hello world"]), "OK\n");
    assert_eq!(redis_cli(&s, &["GET", "greeting"]), "hello world\n");
    assert_eq!(redis_cli(&s, &["INCRBY", "n", "41"]), "41\n");
    assert_eq!(
        redis_cli(&s, &["HSET", "user:1", "name", "Ada", "lang", "en"]),
        "2\n"
    );
    assert_eq!(
        redis_cli(&s, &["HGETALL", "user:1"]),
        "name\nAda\nlang\nen\n"
    );
    // RESP3: a map, which redis-cli prints a pair to a line.
    assert_eq!(
        redis_cli(&s, &["-3", "HGETALL", "user:1"]),
        "name Ada\nlang en\n"
    );
    assert!(redis_cli(&s, &["GET", "user:1"]).contains("WRONGTYPE"));
    assert_eq!(redis_cli(&s, &["DBSIZE"]), "3\n");
    // Commands piped in, as `redis-cli` reads them from a file.
    let mut child = redis_cli_command(&s)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"SET a 1\nINCR a\nGET a\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "OK\n2\n2\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_are_refused_and_idle_ones_closed() {
    let s = setup(&["--max-connections", "2", "--idle-timeout", "1"]).await;
    let mut first = s.connect();
    let mut second = s.raw();
    assert_eq!(second.send(b"PING\r\n"), "+PONG\r\n");
    let mut third = s.raw();
    assert_eq!(third.read_reply(), "-ERR max number of clients reached\r\n");
    assert!(third.closed());
    assert_eq!(query::<String>(&mut first, &["PING"]).unwrap(), "PONG");
    // A connection that sends nothing is closed; its place is free again.
    // (The read blocks until the node closes it: no timing is assumed.)
    assert!(second.closed());
    let served = (0..1000).any(|_| {
        let mut c = s.raw();
        let ok = c.send(b"PING\r\n") == "+PONG\r\n";
        if !ok {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        ok
    });
    assert!(served);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_written_over_resp_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["datanode", "--data-memory", "64M"];
    let shoal = Shoal::start_in(&args, dir.path());
    shoal.create_database("acme", "cache").await;
    let key = shoal.create_key("acme", &[("cache", "read_write")]).await;
    let s = Setup { shoal, key };
    {
        let mut con = s.connect();
        let _: () = con.set("plain", "v").unwrap();
        let _: () = con.set("big", vec![7u8; 100_000]).unwrap();
        let _: i64 = query(&mut con, &["HSET", "h", "f", "v"]).unwrap();
        let _: i64 = query(&mut con, &["EXPIRE", "plain", "100000"]).unwrap();
        // Expired already: purged before the stop, or by the sweep after the start.
        let _: String = query(&mut con, &["SET", "stale", "v", "PXAT", "1"]).unwrap();
    }
    let Setup { shoal, key } = s;
    let (code, _) = shoal.terminate();
    assert_eq!(code, Some(0));
    let s = Setup {
        shoal: Shoal::start_in(&args, dir.path()),
        key,
    };
    let mut con = s.connect();
    assert_eq!(query::<String>(&mut con, &["GET", "plain"]).unwrap(), "v");
    assert!(query::<i64>(&mut con, &["TTL", "plain"]).unwrap() > 0);
    assert_eq!(
        query::<Vec<u8>>(&mut con, &["GET", "big"]).unwrap(),
        vec![7u8; 100_000]
    );
    assert_eq!(query::<String>(&mut con, &["HGET", "h", "f"]).unwrap(), "v");
    assert_eq!(
        query::<Option<String>>(&mut con, &["GET", "stale"]).unwrap(),
        None
    );
    let purged = (0..2000).any(|_| {
        let size: i64 = query(&mut con, &["DBSIZE"]).unwrap();
        if size == 3 {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        false
    });
    assert!(purged, "the expired key was never purged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_tables_an_operator_drops_are_made_anew_on_the_next_write() {
    let s = setup(&[]).await;
    let mut con = s.connect();
    let _: () = con.set("before", "v").unwrap();
    // A pipelined run of SETs, so that the run's reads are checked too.
    let mut pipe = redis::pipe();
    for i in 0..16 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    let _: () = pipe.query(&mut con).unwrap();

    let (status, _) = s
        .shoal
        .send(
            reqwest::Method::DELETE,
            "/internal/v1/databases/cache/tables/redis_keys",
            None,
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::NO_CONTENT);
    // The connection's next command meets the drop and says so; the next
    // write makes the tables anew, empty.
    let gone: redis::RedisResult<Option<String>> = con.get("before");
    let e = gone.unwrap_err();
    assert!(e.to_string().contains("was dropped"), "{e}");
    let mut pipe = redis::pipe();
    for i in 0..16 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(i * 10).ignore();
    }
    let _: () = pipe.query(&mut con).unwrap();
    let before: Option<String> = con.get("before").unwrap();
    assert_eq!(before, None);
    let got: Vec<i64> = (0..16).map(|i| con.get(format!("k{i}")).unwrap()).collect();
    assert_eq!(got, (0..16).map(|i| i * 10).collect::<Vec<i64>>());
    assert!(s.shoal.table_memory("cache", "redis_keys").await.is_some());
}

/// Redis's promise for `SCAN`: a key there for the whole scan is returned
/// at least once, whatever is written meanwhile — here another connection
/// deletes, adds and overwrites keys between every step of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_finds_every_key_present_throughout_while_others_write() {
    let s = setup(&[]).await;
    let mut con = s.connect();
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.set(format!("stay:{i}"), i).ignore();
        pipe.set(format!("churn:{i}"), i).ignore();
    }
    pipe.hset("hash:1", "f", "v").ignore();
    let _: () = pipe.query(&mut con).unwrap();

    let mut writer = s.connect();
    let mut found = std::collections::HashSet::new();
    let (mut cursor, mut steps) = ("0".to_string(), 0);
    loop {
        let (next, keys): (String, Vec<String>) =
            query(&mut con, &["SCAN", &cursor, "COUNT", "37"]).unwrap();
        found.extend(keys);
        steps += 1;
        // Between steps: a churn key deleted, a new key added, a key that
        // stays overwritten with a longer value.
        let _: () = redis::pipe()
            .del(format!("churn:{steps}"))
            .set(format!("new:{steps}"), "x")
            .set(
                format!("stay:{}", steps * 7 % 3000),
                "a longer value than before",
            )
            .query(&mut writer)
            .unwrap();
        if next == "0" {
            break;
        }
        assert!(steps < 10_000, "a scan that does not end");
        cursor = next;
    }
    let missing: Vec<String> = (0..3000)
        .map(|i| format!("stay:{i}"))
        .filter(|k| !found.contains(k))
        .collect();
    assert!(
        missing.is_empty(),
        "{} missed: {:?}",
        missing.len(),
        &missing[..5.min(missing.len())]
    );
    assert!(found.contains("hash:1"));
    assert!(steps > 100, "COUNT 37 over 6,000 keys: {steps} steps");

    // MATCH and TYPE filter what is answered; a cursor is a number below 2^53.
    let (cursor, keys): (String, Vec<String>) = query(
        &mut con,
        &["SCAN", "0", "MATCH", "stay:1?", "COUNT", "100000"],
    )
    .unwrap();
    assert_eq!(cursor, "0");
    let mut keys = keys;
    keys.sort();
    let want: Vec<String> = (10..20).map(|i| format!("stay:{i}")).collect();
    assert_eq!(keys, want);
    let (_, hashes): (String, Vec<String>) =
        query(&mut con, &["SCAN", "0", "TYPE", "hash", "COUNT", "100000"]).unwrap();
    assert_eq!(hashes, ["hash:1"]);
    let (cursor, _): (String, Vec<String>) = query(&mut con, &["SCAN", "0"]).unwrap();
    assert!(cursor.parse::<u64>().unwrap() < 1 << 53, "{cursor}");
    // A cursor this node never gave starts the scan again: keys again, none missed.
    let (_, again): (String, Vec<String>) =
        query(&mut con, &["SCAN", "123456789", "COUNT", "100000"]).unwrap();
    assert!(again.len() >= 3000, "{}", again.len());
    for bad in [
        &["SCAN", "x"][..],
        &["SCAN", "0", "COUNT", "0"],
        &["SCAN", "0", "MATCH"],
    ] {
        assert!(query::<RValue>(&mut con, bad).is_err(), "{bad:?}");
    }
    let keys: Vec<String> = query(&mut con, &["KEYS", "new:1?"]).unwrap();
    assert_eq!(keys.len(), 10, "{keys:?}");
    let any: String = query(&mut con, &["RANDOMKEY"]).unwrap();
    assert!(found.contains(&any) || any.starts_with("new:"), "{any}");
}

/// `FLUSHDB` empties the connection's database and no other; a key that
/// may only read cannot, and it cannot run inside a transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushdb_empties_only_the_authenticated_database() {
    let s = setup(&[]).await;
    let lab_key = s.shoal.create_key("acme", &[("lab", "read_write")]).await;
    let reader_key = s.shoal.create_key("acme", &[("cache", "read")]).await;
    let mut cache = s.connect();
    let mut lab = s.connect_as("lab", &lab_key);
    let big = "v".repeat(100_000);
    for i in 0..2500 {
        let _: () = cache.set(format!("k{i}"), i).unwrap();
    }
    let _: () = cache.set("big", &big).unwrap();
    let _: () = cache.set_ex("soon", 1, 1000).unwrap();
    let _: () = lab.set("kept", "yes").unwrap();

    let mut reader = s.connect_as("cache", &reader_key);
    let refused = query::<String>(&mut reader, &["FLUSHDB"]).unwrap_err();
    assert!(code(&refused).starts_with("NOPERM"), "{refused}");
    assert_eq!(query::<i64>(&mut cache, &["DBSIZE"]).unwrap(), 2502);

    let in_multi: Vec<RValue> = redis::pipe()
        .atomic()
        .cmd("FLUSHDB")
        .query(&mut cache)
        .unwrap_or_default();
    assert!(in_multi.is_empty());
    assert_eq!(query::<i64>(&mut cache, &["DBSIZE"]).unwrap(), 2502);

    for how in ["ASYNC", "NOW"] {
        let bad = query::<String>(&mut cache, &["FLUSHDB", how, "x"]);
        assert!(bad.is_err());
    }
    assert_eq!(
        query::<String>(&mut cache, &["FLUSHDB", "ASYNC"]).unwrap(),
        "OK"
    );
    assert_eq!(query::<i64>(&mut cache, &["DBSIZE"]).unwrap(), 0);
    assert_eq!(
        query::<Option<String>>(&mut cache, &["GET", "big"]).unwrap(),
        None
    );
    let chunks = s.shoal.table_memory("cache", "redis_chunks").await.unwrap();
    assert_eq!(
        chunks[2], chunks[3],
        "the big value's parts are gone: {chunks:?}"
    );
    let kept: String = lab.get("kept").unwrap();
    assert_eq!(kept, "yes");
    let _: () = cache.set("after", "1").unwrap();
    assert_eq!(query::<i64>(&mut cache, &["DBSIZE"]).unwrap(), 1);
}

/// What clients ask at connect and what operators look at: `COMMAND
/// INFO`/`DOCS` from the one command table, `CONFIG GET`, `INFO` by
/// section, and `CLIENT LIST`/`KILL`, which reach only the connections of
/// the caller's own API key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_and_client_commands_answer_as_redis_7() {
    let s = setup(&[]).await;
    let mut con = s.connect();
    let c = &mut con;

    let info: Vec<RValue> = query(c, &["COMMAND", "INFO", "get", "set", "nosuch"]).unwrap();
    assert_eq!(info.len(), 3);
    let RValue::Array(get) = &info[0] else {
        panic!("{info:?}")
    };
    assert_eq!(get.len(), 10);
    assert_eq!(get[0], RValue::BulkString(b"get".to_vec()));
    assert_eq!(get[1], RValue::Int(2));
    assert_eq!(
        (&get[3], &get[4], &get[5]),
        (&RValue::Int(1), &RValue::Int(1), &RValue::Int(1))
    );
    assert_eq!(info[2], RValue::Nil);
    let all: Vec<RValue> = query(c, &["COMMAND"]).unwrap();
    assert_eq!(
        all.len() as i64,
        query::<i64>(c, &["COMMAND", "COUNT"]).unwrap()
    );
    let docs: std::collections::HashMap<String, std::collections::HashMap<String, String>> =
        query(c, &["COMMAND", "DOCS", "scan", "hrandfield"]).unwrap();
    assert_eq!(docs["scan"]["group"], "generic");
    assert_eq!(docs["hrandfield"]["since"], "6.2.0");
    assert!(!docs["scan"]["summary"].is_empty());
    let every: std::collections::HashMap<String, RValue> = query(c, &["COMMAND", "DOCS"]).unwrap();
    assert_eq!(every.len(), all.len());
    assert!(query::<RValue>(c, &["COMMAND", "GETKEYS", "GET", "a"]).is_err());

    let config: std::collections::HashMap<String, String> =
        query(c, &["CONFIG", "GET", "maxmemory*", "databases"]).unwrap();
    assert_eq!(config["maxmemory-policy"], "noeviction");
    assert_eq!(config["databases"], "1");
    assert!(config.contains_key("maxmemory"));
    let none: std::collections::HashMap<String, String> =
        query(c, &["CONFIG", "GET", "nosuchsetting"]).unwrap();
    assert!(none.is_empty());
    assert!(query::<String>(c, &["CONFIG", "SET", "maxmemory", "1"]).is_err());
    assert!(query::<String>(c, &["CONFIG", "GET"]).is_err());

    let _: () = c.set("k", "v").unwrap();
    let keyspace: String = query(c, &["INFO", "keyspace"]).unwrap();
    assert_eq!(keyspace, "# Keyspace\r\ndb0:keys=1\r\n");
    let some: String = query(c, &["INFO", "server", "MEMORY"]).unwrap();
    assert!(
        some.contains("redis_version:") && some.contains("used_memory:"),
        "{some}"
    );
    assert!(!some.contains("# Keyspace"), "{some}");
    let all: String = query(c, &["INFO"]).unwrap();
    for section in [
        "Server",
        "Memory",
        "Persistence",
        "Stats",
        "Replication",
        "Keyspace",
    ] {
        assert!(
            all.contains(&format!("# {section}\r\n")),
            "{section}: {all}"
        );
    }

    // CLIENT LIST shows this key's connections only.
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("me")
        .query(c)
        .unwrap();
    let mut second = s.connect();
    let other_key = s.shoal.create_key("acme", &[("cache", "read_write")]).await;
    let mut stranger = s.connect_as("cache", &other_key);
    let second_id: i64 = query(&mut second, &["CLIENT", "ID"]).unwrap();
    let stranger_id: i64 = query(&mut stranger, &["CLIENT", "ID"]).unwrap();
    let list: String = query(c, &["CLIENT", "LIST"]).unwrap();
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(
        list.contains("name=me ") && list.contains("user=cache"),
        "{list}"
    );
    assert!(list.contains(&format!("id={second_id} ")), "{list}");
    assert!(!list.contains(&format!("id={stranger_id} ")), "{list}");
    let me: String = query(c, &["CLIENT", "INFO"]).unwrap();
    assert!(me.starts_with("id=") && me.contains(" cmd=client "), "{me}");
    assert!(query::<String>(c, &["CLIENT", "SETNAME", "has space"]).is_err());
    assert!(query::<String>(c, &["CLIENT", "LIST", "TYPE", "nosuch"]).is_err());
    let by_id: String = query(c, &["CLIENT", "LIST", "ID", &second_id.to_string()]).unwrap();
    assert_eq!(by_id.lines().count(), 1, "{by_id}");

    // Another key's connection cannot be killed, or even found.
    let killed: i64 = query(c, &["CLIENT", "KILL", "ID", &stranger_id.to_string()]).unwrap();
    assert_eq!(killed, 0);
    assert_eq!(query::<String>(&mut stranger, &["PING"]).unwrap(), "PONG");
    let killed: i64 = query(c, &["CLIENT", "KILL", "ID", &second_id.to_string()]).unwrap();
    assert_eq!(killed, 1);
    assert!(query::<String>(&mut second, &["PING"]).is_err(), "ended");
    assert!(query::<String>(c, &["CLIENT", "KILL", "ID", "0"]).is_err());
    assert!(query::<String>(c, &["CLIENT", "KILL", "127.0.0.1:1"]).is_err());
    // SKIPME yes (the default): the caller stays.
    let killed: i64 = query(c, &["CLIENT", "KILL", "USER", "cache"]).unwrap();
    assert_eq!(killed, 0);
    assert_eq!(query::<String>(c, &["PING"]).unwrap(), "PONG");
}

/// Pipelined increments and MSETs run as one request per run, but each
/// command is answered as it would be alone: a hash or a non-integer
/// refuses its own command only, a key incremented twice counts on, and a
/// key that may only read gets every command refused with nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_increments_and_msets_answer_each_command_alone() {
    let s = setup(&[]).await;
    let mut con = s.connect();
    let _: () = redis::pipe()
        .hset("h", "f", "v")
        .set("text", "abc")
        .set("max", i64::MAX)
        .set_ex("ttl", 7, 1000)
        .query(&mut con)
        .unwrap();
    let mut raw = s.raw();
    assert_eq!(raw.send(&command(&["AUTH", "cache", &s.key])), "+OK\r\n");
    let replies = pipelined(
        &mut raw,
        &[
            &["INCR", "a"],
            &["INCR", "h"],
            &["INCRBY", "a", "5"],
            &["DECR", "text"],
            &["INCR", "max"],
            &["DECRBY", "a", "2"],
            &["INCR", "ttl"],
        ],
    );
    let firsts: Vec<&str> = replies
        .iter()
        .map(|r| r.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        firsts,
        [":1", "-WRONGTYPE", ":6", "-ERR", "-ERR", ":4", ":8"],
        "{replies:?}"
    );
    assert!(replies[4].contains("overflow"), "{replies:?}");
    assert_eq!(query::<i64>(&mut con, &["GET", "a"]).unwrap(), 4);
    assert_eq!(query::<String>(&mut con, &["GET", "text"]).unwrap(), "abc");
    let ttl: i64 = query(&mut con, &["TTL", "ttl"]).unwrap();
    assert!((998..=1000).contains(&ttl), "INCR keeps the expiry: {ttl}");

    // A value of several rows that has expired: incremented as an absent
    // key, and its parts go with it (by the increment, or by the purge if
    // that came first).
    let long = "x".repeat(60_000);
    let _: () = query(&mut con, &["PSETEX", "long", "1", &long]).unwrap();
    common::control::eventually("the value expires", || async {
        let pttl: i64 = query(&mut s.connect(), &["PTTL", "long"]).unwrap();
        (pttl == -2).then_some(())
    })
    .await;
    let replies = pipelined(&mut raw, &[&["INCR", "long"], &["INCRBY", "long", "2"]]);
    assert_eq!(replies, [":1", ":3"]);
    assert_eq!(query::<i64>(&mut con, &["TTL", "long"]).unwrap(), -1);
    let parts = common::client()
        .post(format!("{}/0.1.0/ronsql", s.shoal.rest_url))
        .header("X-API-KEY", &s.key)
        .json(&json!({"database": "cache", "query": "SELECT COUNT(*) AS n FROM redis_chunks"}))
        .send()
        .await
        .unwrap();
    let parts: serde_json::Value = parts.json().await.unwrap();
    assert_eq!(
        parts,
        json!([{"n": 0}]),
        "no part of the expired value is left"
    );

    // MSETs in a run: the last value of a key given twice wins, as in order.
    let _: () = redis::pipe()
        .cmd("MSET")
        .arg("m1")
        .arg("1")
        .arg("m2")
        .arg("1")
        .cmd("MSET")
        .arg("m2")
        .arg("2")
        .arg("m3")
        .arg("2")
        .cmd("MGET")
        .arg("m1")
        .arg("m2")
        .arg("m3")
        .ignore()
        .query(&mut con)
        .unwrap();
    let got: Vec<String> = query(&mut con, &["MGET", "m1", "m2", "m3"]).unwrap();
    assert_eq!(got, ["1", "2", "2"]);

    // A key that may only read: each command refused, nothing written.
    let reader_key = s.shoal.create_key("acme", &[("cache", "read")]).await;
    let mut raw = s.raw();
    assert_eq!(
        raw.send(&command(&["AUTH", "cache", &reader_key])),
        "+OK\r\n"
    );
    let replies = pipelined(
        &mut raw,
        &[
            &["MSET", "r1", "x"],
            &["MSET", "r2", "y"],
            &["INCR", "a"],
            &["INCR", "a"],
        ],
    );
    assert!(
        replies.iter().all(|r| r.starts_with("-NOPERM")),
        "{replies:?}"
    );
    assert_eq!(query::<i64>(&mut con, &["EXISTS", "r1", "r2"]).unwrap(), 0);
    assert_eq!(query::<i64>(&mut con, &["GET", "a"]).unwrap(), 4);
}

/// Sends `commands` at once and reads one single-line reply for each.
fn pipelined(raw: &mut common::resp::Raw, commands: &[&[&str]]) -> Vec<String> {
    let bytes: Vec<u8> = commands.iter().flat_map(|c| command(c)).collect();
    raw.0.write_all(&bytes).unwrap();
    let mut replies = String::new();
    while replies.matches("\r\n").count() < commands.len() {
        replies.push_str(&raw.read_reply());
    }
    replies.lines().map(str::to_owned).collect()
}

/// Replies a caller can make large are bounded: a SCAN stops at 8 MiB of
/// keys whatever its COUNT (a hint, as in Redis) and goes on from its
/// cursor; HRANDFIELD refuses a reply past 64 MiB before it makes one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_and_hrandfield_replies_are_bounded() {
    let s = setup(&[]).await;
    let mut con = s.connect();
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.set(format!("{i:04}{}", "k".repeat(2996)), 1).ignore();
    }
    let _: () = pipe.query(&mut con).unwrap();
    let (cursor, first): (String, Vec<String>) =
        query(&mut con, &["SCAN", "0", "COUNT", "100000"]).unwrap();
    assert!(
        first.len() < 3000 && cursor != "0",
        "{} keys, cursor {cursor}",
        first.len()
    );
    let mut all: std::collections::HashSet<String> = first.into_iter().collect();
    let mut cursor = cursor;
    while cursor != "0" {
        let (next, keys): (String, Vec<String>) =
            query(&mut con, &["SCAN", &cursor, "COUNT", "100000"]).unwrap();
        all.extend(keys);
        cursor = next;
    }
    assert_eq!(all.len(), 3000);

    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg(vec![b'v'; 100_000])
        .query(&mut con)
        .unwrap();
    let e = query::<RValue>(&mut con, &["HRANDFIELD", "h", "-1000", "WITHVALUES"]).unwrap_err();
    assert!(e.to_string().contains("at most 64 MiB"), "{e}");
    let few: Vec<RValue> = query(&mut con, &["HRANDFIELD", "h", "-3", "WITHVALUES"]).unwrap();
    assert_eq!(few.len(), 6);
}
