//! Redis transactions and Redis 7's integer and edge-case rules, through
//! raw bytes (replies compared byte for byte with what redis-server 7
//! answers), redis-py, redis-cli and the `redis` crate.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::resp::{CONNECT, Raw, Setup, command, python, query, redis_cli_command, setup};
use serde_json::json;

/// Sends each command (words) and answers every reply, in order.
fn transcript(raw: &mut Raw, commands: &[&[&str]]) -> Vec<String> {
    commands.iter().map(|c| raw.send(&command(c))).collect()
}

fn authed(s: &Setup) -> Raw {
    let mut raw = s.raw();
    assert_eq!(raw.send(&command(&["AUTH", "cache", &s.key])), "+OK\r\n");
    raw
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_queues_and_exec_applies_them_in_order() {
    let s = setup(&[]).await;
    let mut raw = authed(&s);
    let got = transcript(
        &mut raw,
        &[
            &["MULTI"],
            &["SET", "k", "1"],
            &["INCR", "k"],
            &["GET", "k"],
            &["HSET", "h", "f", "v"],
            &["EXEC"],
        ],
    );
    assert_eq!(
        got,
        [
            "+OK\r\n",
            "+QUEUED\r\n",
            "+QUEUED\r\n",
            "+QUEUED\r\n",
            "+QUEUED\r\n",
            "*4\r\n+OK\r\n:2\r\n$1\r\n2\r\n:1\r\n",
        ],
        "each command sees the writes before it"
    );
    assert_eq!(raw.send(&command(&["GET", "k"])), "$1\r\n2\r\n");

    // Outside a transaction, and nested: Redis's errors.
    let got = transcript(
        &mut raw,
        &[
            &["EXEC"],
            &["DISCARD"],
            &["MULTI"],
            &["MULTI"],
            &["WATCH", "x"],
            &["SET", "d", "1"],
            &["DISCARD"],
            &["EXISTS", "d"],
        ],
    );
    assert_eq!(
        got,
        [
            "-ERR EXEC without MULTI\r\n",
            "-ERR DISCARD without MULTI\r\n",
            "+OK\r\n",
            "-ERR MULTI calls can not be nested\r\n",
            "-ERR WATCH inside MULTI is not allowed\r\n",
            "+QUEUED\r\n",
            "+OK\r\n",
            ":0\r\n",
        ]
    );

    // A command that fails when it runs answers its error in the reply;
    // the others are applied, as in Redis.
    let got = transcript(
        &mut raw,
        &[
            &["MULTI"],
            &["HINCRBY", "k", "f", "1"],
            &["INCR", "h"],
            &["SET", "t", "1"],
            &["EXEC"],
        ],
    );
    assert_eq!(
        got[4],
        "*3\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n\
         -WRONGTYPE Operation against a key holding the wrong kind of value\r\n+OK\r\n"
    );
    assert_eq!(raw.send(&command(&["GET", "t"])), "$1\r\n1\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_refused_while_queueing_aborts_the_whole_transaction() {
    let s = setup(&[]).await;
    let mut raw = authed(&s);
    let cases: [(&[&str], &str); 5] = [
        (
            &["LPUSH", "l", "a"],
            "-ERR unknown command 'LPUSH', with args beginning with: 'l' 'a' \r\n",
        ),
        (
            &["GET"],
            "-ERR wrong number of arguments for 'get' command\r\n",
        ),
        (
            &["AUTH", "cache", "x"],
            "-ERR Command not allowed inside a transaction\r\n",
        ),
        (
            &["HSET", "h", "f"],
            "-ERR wrong number of arguments for 'hset' command\r\n",
        ),
        (
            &["FLUSHALL"],
            "-ERR unknown command 'FLUSHALL', with args beginning with: \r\n",
        ),
    ];
    for (bad, answer) in cases {
        assert_eq!(raw.send(&command(&["MULTI"])), "+OK\r\n");
        assert_eq!(raw.send(&command(&["SET", "a", "1"])), "+QUEUED\r\n");
        assert_eq!(raw.send(&command(bad)), answer, "{bad:?}");
        assert_eq!(raw.send(&command(&["SET", "b", "2"])), "+QUEUED\r\n");
        assert_eq!(
            raw.send(&command(&["EXEC"])),
            "-EXECABORT Transaction discarded because of previous errors.\r\n"
        );
        assert_eq!(
            raw.send(&command(&["EXISTS", "a", "b"])),
            ":0\r\n",
            "{bad:?}"
        );
    }
    // The connection is out of the transaction: commands run at once.
    assert_eq!(raw.send(&command(&["SET", "a", "1"])), "+OK\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_the_limits_refuse_applies_nothing() {
    let s = setup(&[]).await;
    s.shoal
        .set_quota("cache", json!({"max_transaction_ops": 4}))
        .await;
    let mut raw = authed(&s);
    assert_eq!(raw.send(&command(&["SET", "a", "old"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["MULTI"])), "+OK\r\n");
    for key in ["a", "b", "c", "d", "e"] {
        assert_eq!(raw.send(&command(&["SET", key, "new"])), "+QUEUED\r\n");
    }
    let reply = raw.send(&command(&["EXEC"]));
    assert!(
        reply.starts_with("-ERR") && reply.contains("more than its limit of 4"),
        "{reply}"
    );
    assert_eq!(raw.send(&command(&["GET", "a"])), "$3\r\nold\r\n");
    assert_eq!(
        raw.send(&command(&["EXISTS", "b", "c", "d", "e"])),
        ":0\r\n"
    );
    // Within the limit it commits.
    assert_eq!(raw.send(&command(&["MULTI"])), "+OK\r\n");
    for key in ["a", "b"] {
        assert_eq!(raw.send(&command(&["SET", key, "new"])), "+QUEUED\r\n");
    }
    assert_eq!(raw.send(&command(&["EXEC"])), "*2\r\n+OK\r\n+OK\r\n");
    assert_eq!(raw.send(&command(&["GET", "a"])), "$3\r\nnew\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_aborts_exec_when_a_watched_key_changed() {
    let s = setup(&[]).await;
    let mut raw = authed(&s);
    let mut other = authed(&s);
    assert_eq!(raw.send(&command(&["SET", "w", "1"])), "+OK\r\n");

    // Changed by another connection between WATCH and EXEC: a null reply,
    // nothing applied.
    assert_eq!(raw.send(&command(&["WATCH", "w"])), "+OK\r\n");
    assert_eq!(other.send(&command(&["SET", "w", "2"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["MULTI"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["SET", "w", "mine"])), "+QUEUED\r\n");
    assert_eq!(raw.send(&command(&["SET", "x", "mine"])), "+QUEUED\r\n");
    assert_eq!(raw.send(&command(&["EXEC"])), "*-1\r\n");
    assert_eq!(raw.send(&command(&["GET", "w"])), "$1\r\n2\r\n");
    assert_eq!(raw.send(&command(&["EXISTS", "x"])), ":0\r\n");

    // Unchanged: applied. EXEC forgets what was watched.
    assert_eq!(raw.send(&command(&["WATCH", "w", "x"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["MULTI"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["INCR", "w"])), "+QUEUED\r\n");
    assert_eq!(raw.send(&command(&["EXEC"])), "*1\r\n:3\r\n");
    assert_eq!(other.send(&command(&["SET", "w", "9"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["MULTI"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["INCR", "w"])), "+QUEUED\r\n");
    assert_eq!(raw.send(&command(&["EXEC"])), "*1\r\n:10\r\n");

    // UNWATCH forgets too; a deleted watched key counts as changed.
    assert_eq!(raw.send(&command(&["WATCH", "w"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["UNWATCH"])), "+OK\r\n");
    assert_eq!(other.send(&command(&["SET", "w", "0"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["MULTI"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["INCR", "w"])), "+QUEUED\r\n");
    assert_eq!(raw.send(&command(&["EXEC"])), "*1\r\n:1\r\n");
    assert_eq!(raw.send(&command(&["WATCH", "w"])), "+OK\r\n");
    assert_eq!(other.send(&command(&["DEL", "w"])), ":1\r\n");
    assert_eq!(raw.send(&command(&["MULTI"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["SET", "w", "back"])), "+QUEUED\r\n");
    assert_eq!(raw.send(&command(&["EXEC"])), "*-1\r\n");
    assert_eq!(raw.send(&command(&["EXISTS", "w"])), ":0\r\n");

    // A watched key that expires before EXEC counts as changed (Redis 7).
    assert_eq!(
        raw.send(&command(&["SET", "e", "1", "PX", "50"])),
        "+OK\r\n"
    );
    assert_eq!(raw.send(&command(&["WATCH", "e"])), "+OK\r\n");
    std::thread::sleep(std::time::Duration::from_millis(120));
    assert_eq!(raw.send(&command(&["MULTI"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["SET", "y", "1"])), "+QUEUED\r\n");
    assert_eq!(raw.send(&command(&["EXEC"])), "*-1\r\n");
    assert_eq!(raw.send(&command(&["EXISTS", "y"])), ":0\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_pipelines_and_transactions_work_unchanged() {
    let s = setup(&[]).await;
    // pipeline() is a MULTI/EXEC transaction by default.
    let script = format!(
        "{CONNECT}\
         p = r.pipeline()\n\
         p.set('a', 1).incr('a').get('a').hset('h', mapping={{'f': 'v'}})\n\
         print(p.execute())\n\
         try:\n\
         \x20   p = r.pipeline()\n\
         \x20   p.set('b', 1).incr('h').execute()\n\
         except redis.ResponseError as e:\n\
         \x20   print('error', e)\n\
         print(r.get('b'))\n"
    );
    assert_eq!(
        python(&s, &script),
        "[True, 2, b'2', 1]\n\
         error Command # 2 (INCRBY h 1) of pipeline caused error: \
         WRONGTYPE Operation against a key holding the wrong kind of value\n\
         b'1'\n"
    );
    // transaction() with WATCH: a write by another client in the middle
    // makes redis-py try again, and the second try commits.
    let script = format!(
        "{CONNECT}\
         other = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]), username='cache', password=sys.argv[3])\n\
         r.set('n', 10)\n\
         tries = []\n\
         def double(pipe):\n\
         \x20   n = int(pipe.get('n'))\n\
         \x20   tries.append(n)\n\
         \x20   if len(tries) == 1:\n\
         \x20       other.set('n', 20)\n\
         \x20   pipe.multi()\n\
         \x20   pipe.set('n', n * 2)\n\
         print(r.transaction(double, 'n'), tries, r.get('n'))\n"
    );
    assert_eq!(python(&s, &script), "[True] [10, 20] b'40'\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_runs_a_transaction_from_its_input() {
    let s = setup(&[]).await;
    let mut child = redis_cli_command(&s)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"MULTI\nSET a 5\nINCRBY a 2\nEXEC\nGET a\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "OK\nQUEUED\nQUEUED\nOK\n7\n7\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integers_and_edge_cases_follow_redis_7() {
    let s = setup(&[]).await;
    let mut raw = authed(&s);
    let not_integer = "-ERR value is not an integer or out of range\r\n";
    let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    assert_eq!(raw.send(&command(&["SET", "z", "007"])), "+OK\r\n");
    assert_eq!(raw.send(&command(&["HSET", "h", "f", "01"])), ":1\r\n");
    let cases: [(&[&str], &str); 21] = [
        (&["INCR", "z"], not_integer),
        (&["INCRBY", "n", "007"], not_integer),
        (&["INCRBY", "n", "-0"], not_integer),
        (&["INCRBY", "n", "+1"], not_integer),
        (&["INCRBY", "n", " 1"], not_integer),
        (&["INCRBY", "n", ""], not_integer),
        (&["DECRBY", "n", "01"], not_integer),
        (&["HINCRBY", "h", "g", "01"], not_integer),
        (
            &["HINCRBY", "h", "f", "1"],
            "-ERR hash value is not an integer\r\n",
        ),
        (&["SET", "k", "v", "EX", "01"], not_integer),
        (&["SET", "k", "v", "EX", "100", "EX", "200"], "+OK\r\n"),
        (
            &["SET", "k", "v", "EX", "1", "PX", "100"],
            "-ERR syntax error\r\n",
        ),
        (&["EXPIRE", "k", "01"], not_integer),
        (
            &["EXPIRE", "k", "10", "NX", "XX"],
            "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
        ),
        (
            &["EXPIRE", "k", "10", "GT", "LT"],
            "-ERR GT and LT options at the same time are not compatible\r\n",
        ),
        (
            &["EXPIRE", "k", "10", "FOO"],
            "-ERR Unsupported option FOO\r\n",
        ),
        (&["EXPIRE", "k", "10", "XX", "GT"], ":0\r\n"),
        (&["EXPIRE", "k", "300", "XX", "GT"], ":1\r\n"),
        (&["GETRANGE", "z", "-100", "-200"], "$0\r\n\r\n"),
        (&["GETRANGE", "z", "-100", "0"], "$1\r\n0\r\n"),
        (&["GETRANGE", "z", "01", "2"], not_integer),
    ];
    for (args, want) in cases {
        assert_eq!(raw.send(&command(args)), want, "{args:?}");
    }
    // The second EX won: the TTL is past the first's 100 s.
    let ttl = raw.send(&command(&["TTL", "k"]));
    let ttl: i64 = ttl.trim_start_matches(':').trim().parse().unwrap();
    assert!((101..=300).contains(&ttl), "{ttl}");
    let cases: [(&[&str], &str); 7] = [
        (&["SETRANGE", "h", "0", ""], wrongtype),
        (&["SETRANGE", "h", "536870912", "x"], wrongtype),
        (&["SETRANGE", "new", "536870912", ""], ":0\r\n"),
        (&["SETRANGE", "z", "536870912", ""], ":3\r\n"),
        (
            &["SETRANGE", "new", "536870912", "x"],
            "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n",
        ),
        (&["SETRANGE", "z", "01", "x"], not_integer),
        (&["EXISTS", "new"], ":0\r\n"),
    ];
    for (args, want) in cases {
        assert_eq!(raw.send(&command(args)), want, "{args:?}");
    }
    // An expired key is never counted.
    assert_eq!(raw.send(&command(&["DBSIZE"])), ":3\r\n");
    assert_eq!(
        raw.send(&command(&["SET", "gone", "1", "PX", "1"])),
        "+OK\r\n"
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(raw.send(&command(&["DBSIZE"])), ":3\r\n");
    let mut con = s.connect();
    assert_eq!(query::<i64>(&mut con, &["DBSIZE"]).unwrap(), 3);
}
