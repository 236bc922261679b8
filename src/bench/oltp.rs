//! `shoal bench oltp`: sysbench's OLTP read-write transaction over the
//! MySQL protocol, as RonDB's sysbench runs measure it, swept over thread
//! counts, with RonDB's `final_result.txt`.
//!
//! `--tables` tables `sbtest1…` of `--records` rows each, made as sysbench
//! makes them (an AUTO_INCREMENT `id` key, an index on `k`, `c` and `pad`
//! of random digits). Each transaction, as sysbench's `oltp_read_write`
//! with its defaults: BEGIN; 10 reads by key; a range of 100 keys; its
//! SUM(k); the range ORDER BY c; its DISTINCT c; `k = k + 1` on a row; a
//! new `c` on another; a row deleted and inserted again; COMMIT. Every
//! statement is prepared once per connection. A transaction that meets a
//! lock-wait timeout or a deadlock (1205, 1213) is rolled back and counted
//! as failed under that number; sysbench retries those the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

use super::client::Outcome;
use super::mysql::{Arg, Client, ServerError, Statement};
use super::report::{Recorder, RunResult};
use super::workload::Kind;
use super::{BenchArgs, machine, print_run, start, write_sweep};

/// The keys a range reads.
const RANGE: i64 = 100;
/// Rows a loading INSERT writes.
const LOAD_CHUNK: u64 = 1000;

/// Where the benchmark connects and as whom.
struct Login {
    addr: String,
    user: String,
    password: String,
    database: String,
}

impl Login {
    async fn connect(&self) -> anyhow::Result<Client> {
        Client::connect(&self.addr, &self.user, &self.password, &self.database).await
    }
}

pub(crate) async fn run(args: &BenchArgs, cluster: Option<&start::Cluster>) -> anyhow::Result<()> {
    let login = match cluster {
        Some(cluster) => {
            let made = cluster.tenant_with("oltp", &[]).await?;
            let (user, password) = made.key.split_once('.').context("a key")?;
            Login {
                addr: cluster.mysql_addr.clone(),
                user: user.to_owned(),
                password: password.to_owned(),
                database: made.database.clone(),
            }
        }
        None => {
            let (Some(database), Some(key)) = (&args.database, &args.api_key) else {
                bail!("give --database and --api-key (or SHOAL_API_KEY), or use --start");
            };
            let (user, password) = key
                .split_once('.')
                .context("an API key is <prefix>.<secret>")?;
            Login {
                addr: args.mysql_addr.clone(),
                user: user.to_owned(),
                password: password.to_owned(),
                database: database.clone(),
            }
        }
    };
    let tables = args.tables;
    if !args.skip_load {
        load(&login, tables, args.records).await?;
    }
    let title = format!(
        "oltp read-write over MySQL, {tables} tables of {} rows",
        args.records
    );
    println!(
        "{title}: {} s a run, threads {:?}",
        args.time, args.threads.0
    );
    let mut runs = Vec::new();
    for &threads in &args.threads.0 {
        let (recorder, elapsed) = sweep_one(&login, args, threads).await?;
        let result = RunResult::new(threads, elapsed, None, &recorder);
        print_run(&result);
        runs.push(result);
    }
    let results = json!({
        "benchmark": "oltp",
        "title": title,
        "tables": tables,
        "records": args.records,
        "seconds_per_run": args.time,
        "machine": machine(),
        "runs": runs,
    });
    write_sweep(args, &title, &runs, &results)
}

/// Makes the tables anew and fills them.
async fn load(login: &Login, tables: u64, records: u64) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut c = login.connect().await?;
    for t in 1..=tables {
        c.query(&format!("DROP TABLE IF EXISTS sbtest{t}")).await?;
        c.query(&format!(
            "CREATE TABLE sbtest{t} (id INT NOT NULL AUTO_INCREMENT, k INT NOT NULL DEFAULT 0, \
             c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', PRIMARY KEY (id))"
        ))
        .await?;
        let mut rng = Rng(t.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut from = 1;
        while from <= records {
            let to = (from + LOAD_CHUNK - 1).min(records);
            let rows: Vec<String> = (from..=to)
                .map(|id| {
                    let k = rng.below(records) + 1;
                    format!("({id}, {k}, '{}', '{}')", rng.c(), rng.pad())
                })
                .collect();
            c.query(&format!(
                "INSERT INTO sbtest{t} (id, k, c, pad) VALUES {}",
                rows.join(", ")
            ))
            .await?;
            from = to + 1;
        }
        c.query(&format!("CREATE INDEX k_{t} ON sbtest{t} (k)"))
            .await?;
    }
    println!(
        "loaded {tables} tables of {records} rows in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One run of `threads` clients for `args.time` seconds.
async fn sweep_one(
    login: &Login,
    args: &BenchArgs,
    threads: usize,
) -> anyhow::Result<(Recorder, Duration)> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = tokio::task::JoinSet::new();
    let mut prepared = Vec::with_capacity(threads);
    for n in 0..threads {
        let mut c = login.connect().await?;
        let statements = Statements::prepare(&mut c, args.tables).await?;
        prepared.push((c, statements, n));
    }
    let started = Instant::now();
    for (c, statements, n) in prepared {
        let stop = Arc::clone(&stop);
        let (tables, records) = (args.tables, args.records);
        let seed = args.seed ^ (n as u64).wrapping_mul(0x2545_f491_4f6c_dd1d);
        clients.spawn(async move {
            let mut client = Worker {
                c,
                statements,
                rng: Rng(seed | 1),
                tables,
                records,
            };
            let mut recorder = Recorder::default();
            while !stop.load(Ordering::Relaxed) {
                let began = Instant::now();
                let outcome = client.transaction().await?;
                recorder.record(Kind::Transaction, 1, began.elapsed(), &outcome);
            }
            anyhow::Ok(recorder)
        });
    }
    tokio::time::sleep(Duration::from_secs(args.time)).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = Recorder::default();
    while let Some(done) = clients.join_next().await {
        total.add(&done.context("a client panicked")??);
    }
    Ok((total, started.elapsed()))
}

/// Each table's prepared statements, as sysbench's oltp_common.lua has them.
struct Statements {
    point: Vec<Statement>,
    simple_range: Vec<Statement>,
    sum_range: Vec<Statement>,
    order_range: Vec<Statement>,
    distinct_range: Vec<Statement>,
    index_update: Vec<Statement>,
    non_index_update: Vec<Statement>,
    delete: Vec<Statement>,
    insert: Vec<Statement>,
}

impl Statements {
    async fn prepare(c: &mut Client, tables: u64) -> anyhow::Result<Statements> {
        let mut s = Statements {
            point: Vec::new(),
            simple_range: Vec::new(),
            sum_range: Vec::new(),
            order_range: Vec::new(),
            distinct_range: Vec::new(),
            index_update: Vec::new(),
            non_index_update: Vec::new(),
            delete: Vec::new(),
            insert: Vec::new(),
        };
        for t in 1..=tables {
            let table = format!("sbtest{t}");
            for (list, sql) in [
                (&mut s.point, "SELECT c FROM {t} WHERE id=?"),
                (
                    &mut s.simple_range,
                    "SELECT c FROM {t} WHERE id BETWEEN ? AND ?",
                ),
                (
                    &mut s.sum_range,
                    "SELECT SUM(k) FROM {t} WHERE id BETWEEN ? AND ?",
                ),
                (
                    &mut s.order_range,
                    "SELECT c FROM {t} WHERE id BETWEEN ? AND ? ORDER BY c",
                ),
                (
                    &mut s.distinct_range,
                    "SELECT DISTINCT c FROM {t} WHERE id BETWEEN ? AND ? ORDER BY c",
                ),
                (&mut s.index_update, "UPDATE {t} SET k=k+1 WHERE id=?"),
                (&mut s.non_index_update, "UPDATE {t} SET c=? WHERE id=?"),
                (&mut s.delete, "DELETE FROM {t} WHERE id=?"),
                (
                    &mut s.insert,
                    "INSERT INTO {t} (id, k, c, pad) VALUES (?, ?, ?, ?)",
                ),
            ] {
                list.push(c.prepare(&sql.replace("{t}", &table)).await?);
            }
        }
        Ok(s)
    }
}

/// A client's connection, statements and random choices.
struct Worker {
    c: Client,
    statements: Statements,
    rng: Rng,
    tables: u64,
    records: u64,
}

impl Worker {
    /// One transaction: its outcome, or `Err` if the connection broke.
    async fn transaction(&mut self) -> anyhow::Result<Outcome> {
        self.c.query("BEGIN").await?;
        match self.statements().await {
            Ok(()) => {}
            Err(e) => return self.failed(e).await,
        }
        match self.c.query("COMMIT").await {
            Ok(_) => Ok(Outcome::Done { found: 1 }),
            Err(e) => self.failed(e).await,
        }
    }

    /// A statement failed: a server's refusal is the transaction's outcome
    /// (after a ROLLBACK); a broken connection ends the run.
    async fn failed(&mut self, e: anyhow::Error) -> anyhow::Result<Outcome> {
        let Some(refused) = e.downcast_ref::<ServerError>() else {
            return Err(e);
        };
        let why = format!("{} {}", refused.code, refused.message);
        self.c.query("ROLLBACK").await?;
        Ok(Outcome::Failed(why))
    }

    async fn statements(&mut self) -> anyhow::Result<()> {
        let s = &self.statements;
        let table = |rng: &mut Rng| rng.below(self.tables) as usize;
        let id = |rng: &mut Rng| rng.below(self.records) as i64 + 1;
        for _ in 0..10 {
            let t = table(&mut self.rng);
            let key = id(&mut self.rng);
            self.c.execute(&s.point[t], &[Arg::Int(key)]).await?;
        }
        for ranges in [
            &s.simple_range,
            &s.sum_range,
            &s.order_range,
            &s.distinct_range,
        ] {
            let t = table(&mut self.rng);
            let low = id(&mut self.rng);
            let high = low + RANGE - 1;
            self.c
                .execute(&ranges[t], &[Arg::Int(low), Arg::Int(high)])
                .await?;
        }
        let t = table(&mut self.rng);
        let key = id(&mut self.rng);
        self.c.execute(&s.index_update[t], &[Arg::Int(key)]).await?;
        let t = table(&mut self.rng);
        let key = id(&mut self.rng);
        let c = self.rng.c();
        self.c
            .execute(&s.non_index_update[t], &[Arg::Text(&c), Arg::Int(key)])
            .await?;
        let t = table(&mut self.rng);
        let key = id(&mut self.rng);
        self.c.execute(&s.delete[t], &[Arg::Int(key)]).await?;
        let k = id(&mut self.rng);
        let (c, pad) = (self.rng.c(), self.rng.pad());
        self.c
            .execute(
                &s.insert[t],
                &[Arg::Int(key), Arg::Int(k), Arg::Text(&c), Arg::Text(&pad)],
            )
            .await?;
        Ok(())
    }
}

/// xorshift64*: the benchmark's choices, the same for the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Groups of 11 random digits joined by '-', as sysbench's templates.
    fn digits(&mut self, groups: usize) -> String {
        let mut s = String::with_capacity(groups * 12);
        for g in 0..groups {
            if g > 0 {
                s.push('-');
            }
            for _ in 0..11 {
                s.push(char::from(b'0' + self.below(10) as u8));
            }
        }
        s
    }

    /// A `c` value: 10 groups, 119 characters.
    fn c(&mut self) -> String {
        self.digits(10)
    }

    /// A `pad` value: 5 groups, 59 characters.
    fn pad(&mut self) -> String {
        self.digits(5)
    }
}
