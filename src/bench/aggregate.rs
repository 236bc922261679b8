//! `shoal bench aggregate`: TPC-H's Q1 and Q6 shapes over a lineitem-like
//! table, as RonSQL queries pushed down into Shoal's data node, and the
//! same queries on the same rows in SQLite (in memory) and DuckDB, run by
//! Python in the same run. Answers are compared for equality; times are
//! shown side by side.
//!
//! The rows are TPC-H's `lineitem` columns that Q1 and Q6 read, made from
//! the seed with TPC-H's value ranges: quantities 1–50, discounts 0–0.10,
//! taxes 0–0.08, ship dates 1992-01-02 to 1998-12-01, return flag and line
//! status following the ship date.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use shoal_datanode::Date;

use super::{BenchArgs, machine, start, write_out};

/// The table's name and schema, for the control plane's table API.
pub(crate) const TABLE: &str = "lineitem";

pub(crate) fn lineitem_schema() -> Value {
    json!({
        "name": TABLE,
        "columns": [
            {"name": "l_orderkey", "type": "BIGINT"},
            {"name": "l_linenumber", "type": "INT"},
            {"name": "l_quantity", "type": "DECIMAL(15,2)"},
            {"name": "l_extendedprice", "type": "DECIMAL(15,2)"},
            {"name": "l_discount", "type": "DECIMAL(15,2)"},
            {"name": "l_tax", "type": "DECIMAL(15,2)"},
            {"name": "l_returnflag", "type": "CHAR(1)"},
            {"name": "l_linestatus", "type": "CHAR(1)"},
            {"name": "l_shipdate", "type": "DATE"}
        ],
        "primary_key": ["l_orderkey", "l_linenumber"],
        "indexes": [{"name": "by_shipdate", "columns": ["l_shipdate"]}]
    })
}

/// The queries: (name, SQL), the same text for every engine.
const QUERIES: [(&str, &str); 2] = [
    (
        "Q1",
        "SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty, \
         SUM(l_extendedprice) AS sum_base_price, \
         SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price, \
         SUM(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, \
         AVG(l_quantity) AS avg_qty, AVG(l_extendedprice) AS avg_price, \
         AVG(l_discount) AS avg_disc, COUNT(*) AS count_order \
         FROM lineitem WHERE l_shipdate <= '1998-09-02' \
         GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus",
    ),
    (
        "Q6",
        "SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem \
         WHERE l_shipdate >= '1994-01-01' AND l_shipdate < '1995-01-01' \
         AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    ),
];

/// Rows per load request.
const LOAD_CHUNK: usize = 1000;

/// Loads the CSV into SQLite and DuckDB, runs each query `repeat` times in
/// each, and prints the answers and times as JSON.
const PYTHON: &str = r#"
import csv, json, sqlite3, sys, time
from decimal import Decimal

csv_path, queries, repeat = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
with open(csv_path) as f:
    rows = [tuple(r) for r in csv.reader(f)]

def plain(v):
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, (int, float, str)) or v is None:
        return v
    return str(v)

def run(name, execute):
    out = {}
    for q_name, sql in queries:
        times, answer = [], None
        for _ in range(repeat):
            start = time.perf_counter()
            answer = execute(sql)
            times.append((time.perf_counter() - start) * 1000)
        out[q_name] = {"ms": times, "rows": [[plain(v) for v in r] for r in answer]}
    return out

result = {}
db = sqlite3.connect(":memory:")
db.execute("CREATE TABLE lineitem (l_orderkey INTEGER, l_linenumber INTEGER, "
           "l_quantity REAL, l_extendedprice REAL, l_discount REAL, l_tax REAL, "
           "l_returnflag TEXT, l_linestatus TEXT, l_shipdate TEXT, "
           "PRIMARY KEY (l_orderkey, l_linenumber))")
db.executemany("INSERT INTO lineitem VALUES (?,?,?,?,?,?,?,?,?)",
               [(int(r[0]), int(r[1]), float(r[2]), float(r[3]), float(r[4]), float(r[5]),
                 r[6], r[7], r[8]) for r in rows])
db.execute("CREATE INDEX by_shipdate ON lineitem (l_shipdate)")
result["sqlite"] = run("sqlite", lambda sql: db.execute(sql).fetchall())
result["sqlite_version"] = sqlite3.sqlite_version

try:
    import duckdb
except ImportError:
    result["duckdb"] = None
else:
    con = duckdb.connect()
    con.execute("SET threads TO 2")
    con.execute("CREATE TABLE lineitem (l_orderkey BIGINT, l_linenumber INTEGER, "
                "l_quantity DECIMAL(15,2), l_extendedprice DECIMAL(15,2), "
                "l_discount DECIMAL(15,2), l_tax DECIMAL(15,2), l_returnflag CHAR(1), "
                "l_linestatus CHAR(1), l_shipdate DATE)")
    con.execute("INSERT INTO lineitem SELECT * FROM read_csv(?, header=false, columns={"
                "'a':'BIGINT','b':'INTEGER','c':'DECIMAL(15,2)','d':'DECIMAL(15,2)',"
                "'e':'DECIMAL(15,2)','f':'DECIMAL(15,2)','g':'VARCHAR','h':'VARCHAR','i':'DATE'})",
                [csv_path])
    result["duckdb"] = run("duckdb", lambda sql: con.execute(sql).fetchall())
    result["duckdb_version"] = duckdb.__version__
print(json.dumps(result))
"#;

/// One lineitem row.
struct Line {
    order: u64,
    number: u32,
    quantity: i64,
    /// Cents.
    price: i64,
    /// Hundredths.
    discount: i64,
    tax: i64,
    flag: char,
    status: char,
    ship: String,
}

fn day(y: i32, m: u32, d: u32) -> i32 {
    Date::from_ymd(y, m, d).expect("a date in range").0
}

/// The rows, from the seed: four lines an order on average.
fn lines(records: u64, seed: u64) -> Vec<Line> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let first = day(1992, 1, 2);
    let last = day(1998, 12, 1);
    let cutoff = day(1995, 6, 17);
    let (mut order, mut number) = (1u64, 0u32);
    (0..records)
        .map(|_| {
            if number > 0 && next(4) == 0 || number == 7 {
                order += 1 + next(3);
                number = 0;
            }
            number += 1;
            let quantity = 1 + next(50) as i64;
            let price = quantity * (90_000 + next(110_000) as i64);
            let ship = first + next((last - first + 1) as u64) as i32;
            let (flag, status) = if ship <= cutoff {
                (if next(2) == 0 { 'R' } else { 'A' }, 'F')
            } else {
                ('N', 'O')
            };
            Line {
                order,
                number,
                quantity,
                price,
                discount: next(11) as i64,
                tax: next(9) as i64,
                flag,
                status,
                ship: Date(ship).to_string(),
            }
        })
        .collect()
}

fn decimal(v: i64) -> String {
    format!("{}.{:02}", v / 100, v % 100)
}

/// Runs the benchmark: load, then each query in Shoal and in Python.
pub(crate) async fn run(args: &BenchArgs, cluster: Option<&start::Cluster>) -> anyhow::Result<()> {
    let (rest_url, database, key) = match cluster {
        Some(cluster) => {
            let tenant = cluster.tenant_with("bench", &[lineitem_schema()]).await?;
            (cluster.rest_url.clone(), tenant.database, tenant.key)
        }
        None => match (&args.database, &args.api_key) {
            (Some(db), Some(key)) => (args.rest_url[0].clone(), db.clone(), key.clone()),
            _ => bail!(
                "give --database and --api-key (or SHOAL_API_KEY) of a database holding {} {}, or use --start",
                TABLE,
                lineitem_schema()
            ),
        },
    };
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()?;
    let rows = lines(args.records, args.seed);
    if !args.skip_load {
        let started = Instant::now();
        for chunk in rows.chunks(LOAD_CHUNK) {
            let operations: Vec<Value> = (chunk.iter())
                .map(|l| {
                    json!({"method": "POST", "relative-url": format!("{database}/{TABLE}/pk-write"),
                           "body": {"row": {
                               "l_orderkey": l.order, "l_linenumber": l.number,
                               "l_quantity": decimal(l.quantity * 100),
                               "l_extendedprice": decimal(l.price),
                               "l_discount": decimal(l.discount), "l_tax": decimal(l.tax),
                               "l_returnflag": l.flag.to_string(),
                               "l_linestatus": l.status.to_string(),
                               "l_shipdate": l.ship}}})
                })
                .collect();
            let r = http
                .post(format!("{rest_url}/0.1.0/batch"))
                .header("X-API-KEY", &key)
                .json(&json!({ "operations": operations }))
                .send()
                .await?;
            let status = r.status();
            let body = r.text().await?;
            if !status.is_success() || body.contains("\"code\":4") || body.contains("\"code\":5") {
                bail!(
                    "loading lineitem: {status} {}",
                    &body[..body.len().min(500)]
                );
            }
        }
        let took = started.elapsed().as_secs_f64();
        println!(
            "loaded {} lineitem rows in {took:.1} s ({:.0} rows/s)",
            rows.len(),
            rows.len() as f64 / took.max(1e-9)
        );
    }
    let repeat = 5;
    let mut shoal = serde_json::Map::new();
    for (name, sql) in QUERIES {
        let mut times = Vec::new();
        let mut answer = Vec::new();
        for _ in 0..repeat {
            let started = Instant::now();
            let r = http
                .post(format!("{rest_url}/0.1.0/ronsql"))
                .header("X-API-KEY", &key)
                .json(&json!({"query": sql, "database": database, "outputFormat": "TEXT_NOHEADER"}))
                .send()
                .await?;
            let status = r.status();
            let body = r.text().await?;
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            if !status.is_success() {
                bail!("{name} in Shoal: {status} {body}");
            }
            answer = body
                .lines()
                .map(|line| line.split('\t').map(cell).collect::<Vec<_>>())
                .collect();
        }
        shoal.insert(name.into(), json!({"ms": times, "rows": answer}));
    }
    let python = python(args, &rows, repeat)?;
    let mut report = format!(
        "aggregate: {} lineitem rows, median of {repeat} runs each, ms\n{:<4} {:>10} {:>10} {:>10} {:>10} {:>10}  answers\n",
        rows.len(),
        "",
        "Shoal",
        "SQLite",
        "DuckDB",
        "Sh/SQLite",
        "Sh/DuckDB"
    );
    let mut all_equal = true;
    for (name, _) in QUERIES {
        let ours = &shoal[name];
        let sqlite = &python["sqlite"][name];
        let duck = &python["duckdb"][name];
        let (t_ours, t_sqlite, t_duck) = (median(ours), median(sqlite), median(duck));
        let mut verdict = Vec::new();
        for (engine, theirs) in [("SQLite", sqlite), ("DuckDB", duck)] {
            if theirs.is_null() {
                verdict.push(format!("{engine}: not installed"));
            } else if same_answer(&ours["rows"], &theirs["rows"]) {
                verdict.push(format!("{engine}: equal"));
            } else {
                all_equal = false;
                verdict.push(format!(
                    "{engine}: DIFFERENT (Shoal {} vs {})",
                    ours["rows"], theirs["rows"]
                ));
            }
        }
        let ratio =
            |t: Option<f64>| t.map_or("-".into(), |t| format!("{:.2}", t_ours.unwrap_or(0.0) / t));
        let ms = |t: Option<f64>| t.map_or("-".into(), |t| format!("{t:.1}"));
        let _ = writeln!(
            report,
            "{name:<4} {:>10} {:>10} {:>10} {:>10} {:>10}  {}",
            ms(t_ours),
            ms(t_sqlite),
            ms(t_duck),
            ratio(t_sqlite),
            ratio(t_duck),
            verdict.join(", ")
        );
    }
    print!("{report}");
    let results = json!({
        "benchmark": "aggregate",
        "records": rows.len(),
        "repeat": repeat,
        "queries": QUERIES.iter().map(|(n, q)| json!({"name": n, "sql": q})).collect::<Vec<_>>(),
        "shoal": shoal,
        "sqlite": python["sqlite"],
        "sqlite_version": python["sqlite_version"],
        "duckdb": python["duckdb"],
        "duckdb_version": python["duckdb_version"],
        "machine": machine(),
    });
    write_out(args, &report, &results)?;
    println!(
        "wrote final_result.txt and results.json to {}",
        args.out.display()
    );
    if !all_equal {
        bail!("the engines' answers differ");
    }
    Ok(())
}

/// A TEXT field as a number if it is one.
fn cell(field: &str) -> Value {
    if field == "NULL" {
        return Value::Null;
    }
    match field.parse::<f64>() {
        Ok(v) => json!(v),
        Err(_) => json!(field),
    }
}

fn median(runs: &Value) -> Option<f64> {
    let mut ms: Vec<f64> = runs["ms"]
        .as_array()?
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    ms.sort_by(f64::total_cmp);
    ms.get(ms.len() / 2).copied()
}

/// Answers agree: the same rows in the same order, numbers within what a
/// floating-point sum of many rows (SQLite's) may stray from an exact one.
fn same_answer(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_array(), b.as_array()) else {
        return false;
    };
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            let (Some(x), Some(y)) = (x.as_array(), y.as_array()) else {
                return false;
            };
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(u, v)| match (u.as_f64(), v.as_f64()) {
                        (Some(u), Some(v)) => (u - v).abs() <= 1e-6 * u.abs().max(v.abs()).max(1.0),
                        _ => u == v,
                    })
        })
}

/// Runs the Python side over a CSV of the rows.
fn python(args: &BenchArgs, rows: &[Line], repeat: usize) -> anyhow::Result<Value> {
    let csv = args.out.join("lineitem.csv");
    {
        let file =
            std::fs::File::create(&csv).with_context(|| format!("writing {}", csv.display()))?;
        let mut out = std::io::BufWriter::new(file);
        for l in rows {
            writeln!(
                out,
                "{},{},{},{},{},{},{},{},{}",
                l.order,
                l.number,
                decimal(l.quantity * 100),
                decimal(l.price),
                decimal(l.discount),
                decimal(l.tax),
                l.flag,
                l.status,
                l.ship
            )?;
        }
        out.flush()?;
    }
    let queries = serde_json::to_string(&QUERIES)?;
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg(PYTHON)
        .arg(&csv)
        .arg(&queries)
        .arg(repeat.to_string())
        .output()
        .context("running python3 (SQLite and DuckDB run in it)")?;
    let _ = std::fs::remove_file(&csv);
    if !output.status.success() {
        bail!(
            "the SQLite/DuckDB side failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).context("reading the SQLite/DuckDB answers")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_follow_tpch_ranges() {
        let rows = lines(5000, 3);
        let mut keys = std::collections::HashSet::new();
        for l in &rows {
            assert!(keys.insert((l.order, l.number)), "keys are unique");
            assert!((1..=50).contains(&l.quantity) && (0..=10).contains(&l.discount));
            assert!(("1992-01-02".."1998-12-02").contains(&l.ship.as_str()));
            assert_eq!(l.status == 'O', l.flag == 'N');
        }
    }
}
