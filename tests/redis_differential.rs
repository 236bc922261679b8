//! Shoal against redis-server, command for command: a seeded generator of
//! command sequences over a small pool of keys — edge values (empty,
//! binary, large, numeric edges), wrong types, bad arities, names in mixed
//! case — sent to both, every reply compared (a TTL within a second). On a
//! difference the seed, the commands so far and both replies are printed:
//! `SHOAL_DIFF_SEED=<seed> cargo test --test redis_differential` replays it.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use common::resp::{RedisServer, Setup, setup};

/// A connection that sends commands and reads whole replies.
struct Client {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

/// A reply as it came, and as it is compared.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
    /// RESP3's own: null, double, boolean, map, set.
    Null,
    Double(String),
    Bool(bool),
    Map(Vec<(Reply, Reply)>),
    Set(Vec<Reply>),
}

impl Client {
    fn connect(addr: &str) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        Client {
            writer: stream.try_clone().unwrap(),
            reader: BufReader::new(stream),
        }
    }

    fn call(&mut self, args: &[Vec<u8>]) -> Reply {
        self.call_all(&[args.to_vec()]).pop().unwrap()
    }

    /// Sends every command at once, then reads their replies: pipelined.
    fn call_all(&mut self, commands: &[Vec<Vec<u8>>]) -> Vec<Reply> {
        let mut out = Vec::new();
        for args in commands {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(b"\r\n");
            }
        }
        self.writer.write_all(&out).unwrap();
        commands.iter().map(|_| self.reply()).collect()
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        assert!(line.ends_with("\r\n"), "a reply line cut short: {line:?}");
        line.truncate(line.len() - 2);
        line
    }

    fn reply(&mut self) -> Reply {
        let line = self.line();
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" => Reply::Simple(rest.to_owned()),
            "-" => Reply::Error(rest.to_owned()),
            ":" => Reply::Int(rest.parse().unwrap()),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Reply::Bulk(None);
                }
                let mut bytes = vec![0; n as usize + 2];
                self.reader.read_exact(&mut bytes).unwrap();
                bytes.truncate(n as usize);
                Reply::Bulk(Some(bytes))
            }
            "*" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Reply::Array(None);
                }
                Reply::Array(Some((0..n).map(|_| self.reply()).collect()))
            }
            "_" => Reply::Null,
            "," => Reply::Double(rest.to_owned()),
            "#" => Reply::Bool(rest == "t"),
            "%" => {
                let n: usize = rest.parse().unwrap();
                Reply::Map((0..n).map(|_| (self.reply(), self.reply())).collect())
            }
            "~" => {
                let n: usize = rest.parse().unwrap();
                Reply::Set((0..n).map(|_| self.reply()).collect())
            }
            other => panic!("a reply of kind {other:?}: {line:?}"),
        }
    }
}

/// xorshift64*: enough randomness for a generator, and seeded.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, of: &'a [T]) -> &'a T {
        &of[self.below(of.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const KEYS: &[&[u8]] = &[b"a", b"b", b"num", b"h", b"h2", b"", b"\x00\xffk"];
const FIELDS: &[&[u8]] = &[b"f", b"g", b"", b"n", b"\x01"];

/// A value: numeric edges, empty, binary, text; now and then 1 MB.
fn value(rng: &mut Rng) -> Vec<u8> {
    if rng.chance(1) {
        return vec![b'x'; 1 << 20];
    }
    let values: &[&[u8]] = &[
        b"",
        b"0",
        b"1",
        b"-1",
        b"10",
        b"9223372036854775807",
        b"-9223372036854775808",
        b"9223372036854775808",
        b"007",
        b"+1",
        b" 1",
        b"1.5",
        b"abc",
        b"\x00\xff\r\n",
        b"hello world",
    ];
    rng.pick(values).to_vec()
}

/// A count or offset argument: within and around the edges.
fn number(rng: &mut Rng) -> Vec<u8> {
    let numbers: &[&[u8]] = &[
        b"0",
        b"1",
        b"2",
        b"-1",
        b"-2",
        b"5",
        b"100",
        b"9223372036854775807",
        b"-9223372036854775808",
        b"x",
        b"",
        b"1.0",
    ];
    rng.pick(numbers).to_vec()
}

/// A name in the case `rng` picks.
fn name(rng: &mut Rng, name: &str) -> Vec<u8> {
    match rng.below(4) {
        0 => name.to_ascii_lowercase().into_bytes(),
        1 => name
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 2 == 0 {
                    c.to_ascii_lowercase()
                } else {
                    c
                }
            })
            .collect::<String>()
            .into_bytes(),
        _ => name.as_bytes().to_vec(),
    }
}

/// An expiry: none so short that it could fall due between the two
/// servers' answers (0 and below delete at once, as Redis has it).
fn expiry(rng: &mut Rng, unit_ms: u64) -> Vec<u8> {
    let ms = [
        "-1",
        "0",
        "100000",
        "1000000",
        "x",
        "",
        "9223372036854775807",
        "-9223372036854775808",
    ];
    let picked = *rng.pick(&ms);
    match picked.parse::<u64>() {
        Ok(ms) if ms > 0 && ms < 1 << 40 => (ms / unit_ms).to_string().into_bytes(),
        _ => picked.as_bytes().to_vec(),
    }
}

/// A float increment: plain, exponent, hex, edges, not a float.
fn float(rng: &mut Rng) -> Vec<u8> {
    let floats: &[&[u8]] = &[
        b"0.1",
        b"-0.1",
        b"10.5",
        b"1e5",
        b"3.0e-3",
        b"-0",
        b"0x10",
        b"12345678.1",
        b"1",
        b"-1.5",
        b"0.1234567890123456789",
        b"1e4000",
        b"-1e4000",
        b"inf",
        b"nan",
        b" 1",
        b"",
        b"x",
        b"5.",
    ];
    rng.pick(floats).to_vec()
}

/// A glob-style pattern for `KEYS`, `SCAN` and `HSCAN`.
fn pattern(rng: &mut Rng) -> Vec<u8> {
    let patterns: &[&[u8]] = &[
        b"*", b"h*", b"?", b"[ab]", b"[^a]*", b"*2", b"\\x*", b"\x00*", b"n?m", b"",
    ];
    rng.pick(patterns).to_vec()
}

/// Options of `SCAN` (`of_keys`) or `HSCAN`, well formed or not.
fn scan_options(rng: &mut Rng, of_keys: bool) -> Vec<Vec<u8>> {
    let mut options = Vec::new();
    for _ in 0..rng.below(3) {
        match rng.below(if of_keys { 4 } else { 3 }) {
            0 => options.extend([b"MATCH".to_vec(), pattern(rng)]),
            1 => {
                let count = *rng.pick(&["1", "3", "100", "0", "-1", "x"]);
                options.extend([b"COUNT".to_vec(), count.as_bytes().to_vec()]);
            }
            2 if rng.chance(10) => options.push(b"MATCH".to_vec()),
            _ => {
                let kind = *rng.pick(&["string", "HASH", "list", "nosuchtype"]);
                options.extend([b"TYPE".to_vec(), kind.as_bytes().to_vec()]);
            }
        }
    }
    options
}

/// The next command, as its words.
fn next_command(rng: &mut Rng) -> Vec<Vec<u8>> {
    let key = |rng: &mut Rng| rng.pick(KEYS).to_vec();
    let field = |rng: &mut Rng| rng.pick(FIELDS).to_vec();
    let (cmd, mut args): (&str, Vec<Vec<u8>>) = match rng.below(37) {
        0 | 1 => ("GET", vec![key(rng)]),
        2 | 3 => {
            let mut args = vec![key(rng), value(rng)];
            let options: &[&[&str]] = &[
                &[],
                &[],
                &["NX"],
                &["XX"],
                &["GET"],
                &["EX", "100"],
                &["PX", "100000"],
                &["KEEPTTL"],
                &["EX", "0"],
                &["NX", "XX"],
                &["EX", "x"],
            ];
            args.extend(rng.pick(options).iter().map(|o| o.as_bytes().to_vec()));
            ("SET", args)
        }
        4 => ("MSET", vec![key(rng), value(rng), key(rng), value(rng)]),
        5 => ("MGET", vec![key(rng), key(rng), key(rng)]),
        6 => ("INCR", vec![key(rng)]),
        7 => ("DECR", vec![key(rng)]),
        8 => ("INCRBY", vec![key(rng), number(rng)]),
        9 => ("DECRBY", vec![key(rng), number(rng)]),
        10 => ("APPEND", vec![key(rng), value(rng)]),
        11 => ("STRLEN", vec![key(rng)]),
        12 => ("GETRANGE", vec![key(rng), number(rng), number(rng)]),
        13 => ("SETRANGE", vec![key(rng), number(rng), value(rng)]),
        14 | 15 => ("HSET", vec![key(rng), field(rng), value(rng)]),
        16 => ("HGET", vec![key(rng), field(rng)]),
        17 => ("HMGET", vec![key(rng), field(rng), field(rng)]),
        18 => ("HGETALL", vec![key(rng)]),
        19 => ("HLEN", vec![key(rng)]),
        20 => ("HEXISTS", vec![key(rng), field(rng)]),
        21 => ("HDEL", vec![key(rng), field(rng)]),
        22 => ("HINCRBY", vec![key(rng), field(rng), number(rng)]),
        23 => ("DEL", vec![key(rng), key(rng)]),
        24 => ("EXISTS", vec![key(rng), key(rng)]),
        25 => ("TYPE", vec![key(rng)]),
        26 | 27 => {
            let (command, unit) = *rng.pick(&[("EXPIRE", 1000), ("PEXPIRE", 1)]);
            let mut args = vec![key(rng), expiry(rng, unit)];
            let options: &[&[&str]] = &[
                &[],
                &[],
                &["NX"],
                &["XX"],
                &["GT"],
                &["LT"],
                &["NX", "XX"],
                &["GT", "LT"],
                &["XX", "GT"],
            ];
            args.extend(rng.pick(options).iter().map(|o| o.as_bytes().to_vec()));
            (command, args)
        }
        28 => ("TTL", vec![key(rng)]),
        29 => ("PTTL", vec![key(rng)]),
        30 => ("PERSIST", vec![key(rng)]),
        33 => match rng.below(8) {
            0 => ("SETEX", vec![key(rng), expiry(rng, 1000), value(rng)]),
            1 => ("PSETEX", vec![key(rng), expiry(rng, 1), value(rng)]),
            2 => ("SETNX", vec![key(rng), value(rng)]),
            3 => ("GETSET", vec![key(rng), value(rng)]),
            4 => ("GETDEL", vec![key(rng)]),
            5 => {
                let mut args = vec![key(rng)];
                let options: &[&[&str]] = &[
                    &[],
                    &["PERSIST"],
                    &["EX", "3600"],
                    &["PX", "7200000"],
                    &["EXAT", "4102444800"],
                    &["PXAT", "1"],
                    &["EX", "0"],
                    &["EX", "x"],
                    &["EX", "10", "PERSIST"],
                    &["KEEPTTL"],
                    &["EX"],
                ];
                args.extend(rng.pick(options).iter().map(|o| o.as_bytes().to_vec()));
                ("GETEX", args)
            }
            6 => ("MSETNX", vec![key(rng), value(rng), key(rng), value(rng)]),
            _ => ("UNLINK", vec![key(rng), key(rng)]),
        },
        34 => match rng.below(8) {
            0 => ("TOUCH", vec![key(rng), key(rng), key(rng)]),
            1 | 2 => {
                let (command, at) = *rng.pick(&[
                    ("EXPIREAT", "4102444800"),
                    ("PEXPIREAT", "4102444800000"),
                    ("EXPIREAT", "1"),
                    ("PEXPIREAT", "0"),
                    ("EXPIREAT", "-1"),
                    ("EXPIREAT", "x"),
                    ("EXPIREAT", "9223372036854775807"),
                ]);
                let mut args = vec![key(rng), at.as_bytes().to_vec()];
                if rng.chance(30) {
                    args.push(
                        rng.pick(&["NX", "XX", "GT", "LT", "ZZ"])
                            .as_bytes()
                            .to_vec(),
                    );
                }
                (command, args)
            }
            3 => (*rng.pick(&["EXPIRETIME", "PEXPIRETIME"]), vec![key(rng)]),
            4 => ("HSETNX", vec![key(rng), field(rng), value(rng)]),
            5 => (*rng.pick(&["HKEYS", "HVALS"]), vec![key(rng)]),
            6 => ("HSTRLEN", vec![key(rng), field(rng)]),
            _ => ("SETNX", vec![key(rng)]),
        },
        35 => match rng.below(8) {
            0 | 1 => {
                let mut args = vec![rng.pick(&["0", "0", "", "x", " 1"]).as_bytes().to_vec()];
                args.extend(scan_options(rng, true));
                ("SCAN", args)
            }
            2 => ("KEYS", vec![pattern(rng)]),
            3 => ("RANDOMKEY", vec![]),
            4 => (*rng.pick(&["RENAME", "RENAMENX"]), vec![key(rng), key(rng)]),
            5 => {
                let mut args = vec![key(rng), key(rng)];
                let options: &[&[&str]] = &[&[], &["REPLACE"], &["DB", "0"], &["DB"], &["X"]];
                args.extend(rng.pick(options).iter().map(|o| o.as_bytes().to_vec()));
                ("COPY", args)
            }
            6 if rng.chance(20) => {
                let options: &[&[&str]] = &[&[], &["ASYNC"], &["SYNC"], &["NOW"]];
                let options = rng.pick(options).iter().map(|o| o.as_bytes().to_vec());
                ("FLUSHDB", options.collect())
            }
            _ => ("TYPE", vec![key(rng)]),
        },
        36 => match rng.below(5) {
            3 => ("INCRBYFLOAT", vec![key(rng), float(rng)]),
            4 => ("HINCRBYFLOAT", vec![key(rng), field(rng), float(rng)]),
            0 => {
                let mut args = vec![key(rng), rng.pick(&["0", "x"]).as_bytes().to_vec()];
                args.extend(scan_options(rng, false));
                ("HSCAN", args)
            }
            _ => {
                let mut args = vec![key(rng)];
                if rng.chance(70) {
                    args.push(
                        rng.pick(&["0", "1", "2", "-3", "10", "-10", "x"])
                            .as_bytes()
                            .to_vec(),
                    );
                    if rng.chance(50) {
                        args.push(
                            rng.pick(&["WITHVALUES", "withvalues", "NO"])
                                .as_bytes()
                                .to_vec(),
                        );
                    }
                }
                ("HRANDFIELD", args)
            }
        },
        31 => match rng.below(6) {
            0 => (
                "HSET",
                vec![key(rng), field(rng), value(rng), field(rng), value(rng)],
            ),
            1 => ("HDEL", vec![key(rng), field(rng), field(rng), field(rng)]),
            2 => ("NOSUCHCOMMAND", vec![key(rng)]),
            3 => ("GET", vec![]),
            4 => ("MSET", vec![key(rng), value(rng), key(rng)]),
            _ => {
                let at = *rng.pick(&["EXAT", "PXAT"]);
                let far = if at == "EXAT" {
                    "4102444800"
                } else {
                    "4102444800000"
                };
                ("SET", vec![key(rng), value(rng), at.into(), far.into()])
            }
        },
        _ => ("HMSET", vec![key(rng), field(rng), value(rng)]),
    };
    // Now and then a word short or one too many: arity errors.
    if rng.chance(3) {
        if rng.chance(50) {
            args.pop();
        } else {
            args.push(b"extra".to_vec());
        }
    }
    let mut words = vec![name(rng, cmd)];
    words.extend(args);
    words
}

/// Whether two replies agree: equal; TTLs within a second; a hash's
/// fields in any order (Redis gives no order: a hash that has held a
/// large value answers in its hash table's).
fn agree(command: &str, shoal: &Reply, redis: &Reply) -> bool {
    let sorted = |r: &[Reply]| {
        let mut all: Vec<String> = r.iter().map(|x| format!("{x:?}")).collect();
        all.sort();
        all
    };
    match (command, shoal, redis) {
        ("KEYS", Reply::Array(Some(a)), Reply::Array(Some(b))) => sorted(a) == sorted(b),
        // Random: alike in kind (a key, or none when there are none).
        ("RANDOMKEY", Reply::Bulk(a), Reply::Bulk(b)) => a.is_some() == b.is_some(),
        ("RANDOMKEY", Reply::Bulk(Some(_)), Reply::Null) => false,
        ("HRANDFIELD", Reply::Bulk(a), Reply::Bulk(b)) => a.is_some() == b.is_some(),
        ("HRANDFIELD", Reply::Array(Some(a)), Reply::Array(Some(b))) => a.len() == b.len(),
        ("TTL", Reply::Int(a), Reply::Int(b)) if *a >= 0 && *b >= 0 => (a - b).abs() <= 1,
        ("PTTL", Reply::Int(a), Reply::Int(b)) if *a >= 0 && *b >= 0 => (a - b).abs() <= 1000,
        ("EXPIRETIME", Reply::Int(a), Reply::Int(b)) if *a >= 0 && *b >= 0 => (a - b).abs() <= 1,
        ("PEXPIRETIME", Reply::Int(a), Reply::Int(b)) if *a >= 0 && *b >= 0 => {
            (a - b).abs() <= 1000
        }
        ("HKEYS" | "HVALS", Reply::Array(Some(a)), Reply::Array(Some(b))) => sorted(a) == sorted(b),
        ("HGETALL", Reply::Array(Some(a)), Reply::Array(Some(b))) => {
            let pairs = |r: &[Reply]| {
                let mut pairs: Vec<String> = r.chunks(2).map(|p| format!("{p:?}")).collect();
                pairs.sort();
                pairs
            };
            pairs(a) == pairs(b)
        }
        ("HGETALL", Reply::Map(a), Reply::Map(b)) => {
            let pairs = |m: &[(Reply, Reply)]| {
                let mut pairs: Vec<String> = m.iter().map(|p| format!("{p:?}")).collect();
                pairs.sort();
                pairs
            };
            pairs(a) == pairs(b)
        }
        _ => shoal == redis,
    }
}

/// A `SCAN` or `HSCAN` followed to its end: what it found, each once
/// (keys, or fields with their values), in order; or the error.
fn scan_all(client: &mut Client, words: &[Vec<u8>]) -> Reply {
    let at = if words[0].eq_ignore_ascii_case(b"SCAN") {
        1
    } else {
        2
    };
    let mut words = words.to_vec();
    let mut found = std::collections::BTreeSet::new();
    for _ in 0..10_000 {
        let reply = client.call(&words);
        let Reply::Array(Some(parts)) = &reply else {
            return reply;
        };
        let [Reply::Bulk(Some(cursor)), Reply::Array(Some(elements))] = &parts[..] else {
            panic!("a scan reply of another shape: {reply:?}");
        };
        if at == 1 {
            found.extend(elements.iter().map(|e| format!("{e:?}")));
        } else {
            found.extend(elements.chunks(2).map(|pair| format!("{pair:?}")));
        }
        if cursor == b"0" {
            let found = found.into_iter().map(Reply::Simple).collect();
            return Reply::Array(Some(found));
        }
        words[at] = cursor.clone();
    }
    panic!("a scan that did not end in 10,000 calls");
}

fn show(words: &[Vec<u8>]) -> String {
    let shown: Vec<String> = (words.iter())
        .map(|w| match w.len() {
            n if n > 40 => format!("<{n} bytes>"),
            _ => format!("{:?}", String::from_utf8_lossy(w)),
        })
        .collect();
    shown.join(" ")
}

fn run(s: &Setup, redis: &RedisServer, seed: u64, commands: usize) {
    let mut shoal = Client::connect(&s.shoal.resp_addr);
    let auth = [
        b"AUTH".to_vec(),
        b"cache".to_vec(),
        s.key.as_bytes().to_vec(),
    ];
    assert_eq!(shoal.call(&auth), Reply::Simple("OK".into()));
    let mut redis = Client::connect(&redis.addr);
    // Odd seeds speak RESP3 to both.
    if seed % 2 == 1 {
        let hello = [b"HELLO".to_vec(), b"3".to_vec()];
        assert!(matches!(shoal.call(&hello), Reply::Map(_)));
        assert!(matches!(redis.call(&hello), Reply::Map(_)));
    }
    // Both start from nothing.
    for k in KEYS {
        let del = [b"DEL".to_vec(), k.to_vec()];
        shoal.call(&del);
        redis.call(&del);
    }
    let mut rng = Rng(seed.max(1));
    let mut sent: Vec<String> = Vec::new();
    // Seeds that are multiples of 3 pipeline their commands in groups,
    // which Shoal runs as one request each where it can (pipeline.rs):
    // every reply must still be the one the command alone gets.
    let pipelined = seed.is_multiple_of(3);
    let mut done = 0;
    let mut next: Option<Vec<Vec<u8>>> = None;
    while done < commands {
        let group = if pipelined { 1 + rng.below(24) } else { 1 };
        let mut words: Vec<Vec<Vec<u8>>> = Vec::new();
        while words.len() < group && done + words.len() < commands {
            let command = next.take().unwrap_or_else(|| next_command(&mut rng));
            if alone(&command) && !words.is_empty() {
                next = Some(command);
                break;
            }
            let single = alone(&command);
            words.push(command);
            if single {
                break;
            }
        }
        let name = String::from_utf8_lossy(&words[0][0]).to_ascii_uppercase();
        let (a, b) = match name.as_str() {
            "SCAN" | "HSCAN" => (
                vec![scan_all(&mut shoal, &words[0])],
                vec![scan_all(&mut redis, &words[0])],
            ),
            _ => {
                if alone(&words[0]) {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                (shoal.call_all(&words), redis.call_all(&words))
            }
        };
        compare(seed, &mut sent, &words, &a, &b);
        done += words.len();
    }
}

/// Whether a command goes alone, not pipelined with others: a scan is
/// followed call by call; GT and LT compare the new expiry with the one
/// set before, and a millisecond between the two makes the same duration
/// later on both servers alike, whatever their clocks read.
fn alone(command: &[Vec<u8>]) -> bool {
    let name = String::from_utf8_lossy(&command[0]).to_ascii_uppercase();
    matches!(name.as_str(), "SCAN" | "HSCAN")
        || (command.iter().skip(3))
            .any(|w| w.eq_ignore_ascii_case(b"GT") || w.eq_ignore_ascii_case(b"LT"))
}

/// Panics, with how to replay it, at the first of `commands`' replies on
/// which the two servers differ.
fn compare(
    seed: u64,
    sent: &mut Vec<String>,
    commands: &[Vec<Vec<u8>>],
    shoal: &[Reply],
    redis: &[Reply],
) {
    for ((words, a), b) in commands.iter().zip(shoal).zip(redis) {
        let name = String::from_utf8_lossy(&words[0]).to_ascii_uppercase();
        sent.push(show(words));
        if !agree(&name, a, b) {
            let recent = &sent[sent.len().saturating_sub(20)..];
            panic!(
                "seed {seed}: after {} commands, the last of them ({}) answered differently\n\
                 shoal: {a:?}\nredis: {b:?}\nthe last commands:\n{}\n\
                 (SHOAL_DIFF_SEED={seed} replays it)",
                sent.len(),
                show(words),
                recent.join("\n")
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shoal_answers_as_redis_7_command_for_command() {
    let s = setup(&["--max-request-size", "4194304"]).await;
    let redis = RedisServer::start();
    let seeds: Vec<u64> = match std::env::var("SHOAL_DIFF_SEED") {
        Ok(seed) => vec![seed.parse().expect("a number")],
        Err(_) => {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            vec![1, 2, 3, 6, now.unwrap().as_nanos() as u64]
        }
    };
    for seed in seeds {
        println!("seed {seed}");
        run(&s, &redis, seed, 2000);
    }
}
