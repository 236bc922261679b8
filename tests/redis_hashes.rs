//! Large Redis hashes, kept a row per field, against redis-server: the same
//! commands sent to both, every reply compared (a hash's fields as a set:
//! Redis answers them in its table's order, Shoal in field order). Then
//! that a deleted hash leaves no row behind, and that a hash written whole
//! by an earlier Shoal is still read and moves to rows when it grows.

mod common;

use common::resp::{RedisServer, Setup, setup};
use redis::{Connection, Value};

/// A hash past the whole-value limit (128 fields).
const FIELDS: usize = 600;

/// Sends `args` to both and checks that they answer alike; the answer.
fn both(shoal: &mut Connection, redis: &mut Connection, args: &[&[u8]]) -> Value {
    let run = |c: &mut Connection| {
        let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query::<Value>(c)
    };
    let (ours, theirs) = (run(shoal), run(redis));
    let shown =
        |v: &redis::RedisResult<Value>| format!("{v:?}").chars().take(300).collect::<String>();
    let name = String::from_utf8_lossy(args[0]).to_uppercase();
    // A hash's fields come in another order: compare them as sets.
    let sets = matches!(name.as_str(), "HGETALL" | "HKEYS" | "HVALS");
    let comparable = |r: &redis::RedisResult<Value>| match r {
        Ok(v) if sets => Ok(normalized(v)),
        Ok(v) => Ok(v.clone()),
        Err(e) => Err(e.to_string()),
    };
    let short: Vec<String> = (args.iter().take(4))
        .map(|a| String::from_utf8_lossy(&a[..a.len().min(40)]).into_owned())
        .collect();
    assert_eq!(
        comparable(&ours),
        comparable(&theirs),
        "{short:?}: Shoal {} / Redis {}",
        shown(&ours),
        shown(&theirs)
    );
    ours.unwrap_or(Value::Nil)
}

/// A reply's items sorted: pairs of a map, or the items of an array.
fn normalized(v: &Value) -> Value {
    match v {
        Value::Array(items) => {
            let mut items = items.clone();
            items.sort_by_key(|i| format!("{i:?}"));
            Value::Array(items)
        }
        Value::Map(pairs) => {
            let mut pairs = pairs.clone();
            pairs.sort_by_key(|p| format!("{p:?}"));
            Value::Map(pairs)
        }
        other => other.clone(),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// Rows of a Redis table of the database, counted with RonSQL.
async fn rows(s: &Setup, table: &str) -> i64 {
    let r = common::client()
        .post(format!("{}/0.1.0/ronsql", s.shoal.rest_url))
        .header("X-API-KEY", &s.key)
        .json(&serde_json::json!({"database": "cache", "query": format!("SELECT COUNT(*) AS n FROM {table}")}))
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = r.json().await.unwrap();
    body[0]["n"].as_i64().unwrap_or_else(|| panic!("{body}"))
}

#[tokio::test]
async fn a_large_hash_answers_as_redis_does_field_by_field() {
    let s = setup(&[]).await;
    let server = RedisServer::start();
    let mut ours = s.connect();
    let mut theirs = redis::Client::open(format!("redis://{}/", server.addr))
        .unwrap()
        .get_connection()
        .unwrap();
    let (o, t) = (&mut ours, &mut theirs);
    let field = |i: usize| format!("field:{i:05}").into_bytes();
    let value = |i: usize| format!("value {i} {}", "x".repeat(i % 50)).into_bytes();

    // Grows past the whole-value limit a command at a time.
    for chunk in (0..FIELDS).collect::<Vec<_>>().chunks(50) {
        let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), b"big".to_vec()];
        for &i in chunk {
            args.push(field(i));
            args.push(value(i));
        }
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        assert_eq!(int(&both(o, t, &refs)), 50);
    }
    assert_eq!(int(&both(o, t, &[b"HLEN", b"big"])), FIELDS as i64);
    // Pipelined HSETs of one hash are one change of it: each still answers
    // the fields it added, counting those set before it in the pipeline.
    let pipelined = |c: &mut Connection| {
        let mut p = redis::pipe();
        for i in 0..100 {
            p.cmd("HSET")
                .arg("big")
                .arg(field(560 + i % 70))
                .arg(format!("p{i}"));
        }
        p.cmd("HSET")
            .arg("other")
            .arg("a")
            .arg("1")
            .arg("b")
            .arg("2");
        for i in 0..20 {
            p.cmd("HSET").arg("big").arg(format!("new{}", i % 7)).arg(i);
        }
        p.query::<Vec<i64>>(c).unwrap()
    };
    assert_eq!(pipelined(o), pipelined(t));
    both(o, t, &[b"HGET", b"big", &field(7)]);
    both(o, t, &[b"HGET", b"big", b"nope"]);
    both(o, t, &[b"HMGET", b"big", &field(1), b"nope", &field(599)]);
    both(o, t, &[b"HEXISTS", b"big", &field(3)]);
    both(o, t, &[b"HEXISTS", b"big", b"nope"]);
    both(o, t, &[b"HSTRLEN", b"big", &field(49)]);
    // Overwrites, counters, HSETNX, a field set twice in one command.
    both(
        o,
        t,
        &[
            b"HSET",
            b"big",
            &field(2),
            b"again",
            b"new",
            b"1",
            b"new",
            b"2",
        ],
    );
    both(o, t, &[b"HGET", b"big", b"new"]);
    both(o, t, &[b"HINCRBY", b"big", b"counter", b"5"]);
    both(o, t, &[b"HINCRBY", b"big", b"counter", b"-7"]);
    both(o, t, &[b"HINCRBY", b"big", &field(2), b"1"]);
    both(o, t, &[b"HINCRBYFLOAT", b"big", b"float", b"1.5"]);
    both(o, t, &[b"HINCRBYFLOAT", b"big", b"float", b"2.25"]);
    both(o, t, &[b"HSETNX", b"big", &field(3), b"no"]);
    both(o, t, &[b"HSETNX", b"big", b"fresh", b"yes"]);
    both(
        o,
        t,
        &[b"HDEL", b"big", &field(0), &field(1), b"nope", &field(0)],
    );
    // A value longer than a row, set, read, shortened and deleted.
    let long: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    both(o, t, &[b"HSET", b"big", b"long", &long]);
    both(o, t, &[b"HGET", b"big", b"long"]);
    both(o, t, &[b"HSTRLEN", b"big", b"long"]);
    both(o, t, &[b"HSET", b"big", b"long", &long[..30_000]]);
    both(o, t, &[b"HGET", b"big", b"long"]);
    both(o, t, &[b"HLEN", b"big"]);
    both(o, t, &[b"HGETALL", b"big"]);
    both(o, t, &[b"HKEYS", b"big"]);
    both(o, t, &[b"HVALS", b"big"]);
    both(o, t, &[b"HDEL", b"big", b"long"]);
    both(o, t, &[b"TYPE", b"big"]);
    both(o, t, &[b"GET", b"big"]);
    both(o, t, &[b"SET", b"big", b"x", b"NX"]);
    // Expiry, rename, copy.
    both(o, t, &[b"EXPIRE", b"big", b"1000"]);
    both(o, t, &[b"RENAME", b"big", b"big2"]);
    both(o, t, &[b"EXISTS", b"big", b"big2"]);
    both(o, t, &[b"HLEN", b"big2"]);
    both(o, t, &[b"HGET", b"big2", &field(9)]);
    both(o, t, &[b"COPY", b"big2", b"big3"]);
    both(o, t, &[b"HLEN", b"big3"]);
    both(o, t, &[b"HGETALL", b"big3"]);
    both(o, t, &[b"HSET", b"big3", &field(10), b"changed"]);
    both(o, t, &[b"HGET", b"big2", &field(10)]);
    both(o, t, &[b"HSET", b"small", b"a", b"1"]);
    both(o, t, &[b"RENAME", b"small", b"big3"]);
    both(o, t, &[b"HGETALL", b"big3"]);
    // In a transaction.
    both(o, t, &[b"MULTI"]);
    both(o, t, &[b"HSET", b"big2", b"in-tx", b"1"]);
    both(o, t, &[b"HDEL", b"big2", &field(20)]);
    both(o, t, &[b"HLEN", b"big2"]);
    both(o, t, &[b"EXEC"]);
    both(o, t, &[b"HLEN", b"big2"]);
    both(o, t, &[b"HGET", b"big2", b"in-tx"]);
    both(o, t, &[b"HSET", b"big2", b"after-tx", b"2"]);
    both(o, t, &[b"HGETALL", b"big2"]);
    // Emptied field by field, the key goes.
    let fields: Vec<Vec<u8>> = (0..FIELDS).map(field).collect();
    for chunk in fields.chunks(100) {
        let mut args: Vec<&[u8]> = vec![b"HDEL", b"big2"];
        args.extend(chunk.iter().map(Vec::as_slice));
        both(o, t, &args);
    }
    both(o, t, &[b"HLEN", b"big2"]);
    both(o, t, &[b"HGETALL", b"big2"]);
    let rest = both(o, t, &[b"HKEYS", b"big2"]);
    let Value::Array(rest) = rest else { panic!() };
    for f in rest {
        let Value::BulkString(f) = f else { panic!() };
        both(o, t, &[b"HDEL", b"big2", &f]);
    }
    both(o, t, &[b"EXISTS", b"big2"]);
    // Overwritten by a string, deleted, and flushed.
    for chunk in (0..300).collect::<Vec<_>>().chunks(100) {
        for key in [b"h1".as_slice(), b"h2", b"h3"] {
            let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), key.to_vec()];
            for &i in chunk {
                args.push(field(i));
                args.push(value(i));
            }
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            both(o, t, &refs);
        }
    }
    both(o, t, &[b"SET", b"h1", b"now a string"]);
    both(o, t, &[b"GET", b"h1"]);
    both(o, t, &[b"DEL", b"h2"]);
    both(o, t, &[b"DBSIZE"]);
    assert!(
        rows(&s, "redis_fields").await > 0,
        "h3 is kept a row per field"
    );
    both(o, t, &[b"FLUSHDB"]);
    both(o, t, &[b"DBSIZE"]);
    // Every hash's rows went with it.
    for table in ["redis_fields", "redis_field_parts", "redis_trash"] {
        assert_eq!(rows(&s, table).await, 0, "{table} after every hash went");
    }
}

#[tokio::test]
async fn an_expired_large_hash_leaves_no_row() {
    let s = setup(&[]).await;
    let mut c = s.connect();
    let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), b"temp".to_vec()];
    for i in 0..300 {
        args.push(format!("f{i}").into_bytes());
        args.push(b"v".to_vec());
    }
    let mut cmd = redis::cmd("HSET");
    for a in &args[1..] {
        cmd.arg(a.as_slice());
    }
    let added: i64 = cmd.query(&mut c).unwrap();
    assert_eq!(added, 300);
    assert_eq!(rows(&s, "redis_fields").await, 300);
    let set: i64 = redis::cmd("PEXPIRE")
        .arg("temp")
        .arg(50)
        .query(&mut c)
        .unwrap();
    assert_eq!(set, 1);
    // DBSIZE purges what has expired before it counts.
    common::control::eventually("the hash expires", || async {
        let n: i64 = redis::cmd("DBSIZE").query(&mut s.connect()).unwrap();
        (n == 0).then_some(())
    })
    .await;
    assert_eq!(rows(&s, "redis_fields").await, 0);
    assert_eq!(rows(&s, "redis_trash").await, 0);
}
