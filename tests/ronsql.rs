//! RonSQL through the REST data API on a real node: answers checked
//! against SQLite on the same rows (hundreds of generated queries), the
//! reply shapes, EXPLAIN and its modes, index ranges, charging, and
//! hostile queries refused with a clear error.

mod common;

use common::Shoal;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Column, ConnectOptions, Connection, Row, SqliteConnection, ValueRef};
use std::str::FromStr;

const ITEMS: &str = r#"{"name": "items", "columns": [
    {"name": "id", "type": "BIGINT"},
    {"name": "grp", "type": "VARCHAR(8)", "nullable": true},
    {"name": "a", "type": "INT", "nullable": true},
    {"name": "b", "type": "BIGINT"},
    {"name": "c", "type": "DOUBLE", "nullable": true},
    {"name": "d", "type": "DECIMAL(10,2)", "nullable": true},
    {"name": "day", "type": "DATE", "nullable": true}],
  "primary_key": ["id"],
  "indexes": [{"name": "by_a", "columns": ["a"]},
              {"name": "by_grp_a", "columns": ["grp", "a"]}]}"#;

/// A small deterministic generator, so that a failing case can be rerun.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// One row of `items`, as JSON for Shoal and as SQL values for SQLite.
struct Item {
    id: i64,
    grp: Option<&'static str>,
    a: Option<i64>,
    b: i64,
    /// Quarters, so that sums in any order are exact in binary.
    c: Option<f64>,
    /// Cents.
    d: Option<i64>,
    day: Option<String>,
}

fn item(rng: &mut Rng, id: i64) -> Item {
    let groups = ["a", "b", "c", "dd", "zz"];
    Item {
        id,
        grp: rng
            .chance(85)
            .then(|| groups[rng.below(groups.len() as u64) as usize]),
        a: rng.chance(80).then(|| rng.range(-50, 50)),
        b: rng.range(-1_000_000, 1_000_000),
        c: rng.chance(80).then(|| rng.range(-400, 400) as f64 / 4.0),
        d: rng.chance(80).then(|| rng.range(-999_999, 999_999)),
        day: rng
            .chance(80)
            .then(|| format!("2024-{:02}-{:02}", rng.range(1, 12), rng.range(1, 28))),
    }
}

fn cents(d: i64) -> String {
    let sign = if d < 0 { "-" } else { "" };
    format!("{sign}{}.{:02}", d.abs() / 100, d.abs() % 100)
}

struct Setup {
    shoal: Shoal,
    key: String,
    sqlite: SqliteConnection,
}

async fn setup(rows: usize, seed: u64) -> Setup {
    let shoal = Shoal::start(&["datanode", "--data-memory", "128M"]);
    for (tenant, db) in [("acme", "app"), ("other", "rival")] {
        shoal.create_database(tenant, db).await;
        let def: Value = serde_json::from_str(ITEMS).unwrap();
        let (status, body) = shoal
            .post(&format!("/internal/v1/databases/{db}/tables"), def)
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let key = shoal.create_key("acme", &[("app", "read_write")]).await;
    let mut sqlite = SqliteConnectOptions::from_str("sqlite::memory:")
        .unwrap()
        .connect()
        .await
        .unwrap();
    sqlx::query(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, grp TEXT, a INTEGER, b INTEGER, c REAL, d REAL, day TEXT)",
    )
    .execute(&mut sqlite)
    .await
    .unwrap();
    let mut s = Setup { shoal, key, sqlite };
    let mut rng = Rng(seed);
    let items: Vec<Item> = (0..rows as i64).map(|id| item(&mut rng, id)).collect();
    s.load(&items).await;
    s
}

impl Setup {
    async fn load(&mut self, items: &[Item]) {
        for chunk in items.chunks(1000) {
            let operations: Vec<Value> = (chunk.iter())
                .map(|r| {
                    json!({"method": "POST", "relative-url": "app/items/pk-write",
                           "body": {"row": {"id": r.id, "grp": r.grp, "a": r.a, "b": r.b,
                                            "c": r.c, "d": r.d.map(cents), "day": r.day}}})
                })
                .collect();
            let body = json!({ "operations": operations }).to_string();
            let r = self.post(&self.key, "batch", body).await;
            assert_eq!(r.0, StatusCode::OK, "{}", r.2);
        }
        let mut tx = self.sqlite.begin().await.unwrap();
        for r in items {
            sqlx::query("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?)")
                .bind(r.id)
                .bind(r.grp)
                .bind(r.a)
                .bind(r.b)
                .bind(r.c)
                .bind(r.d.map(|d| d as f64 / 100.0))
                .bind(r.day.clone())
                .execute(&mut *tx)
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
    }

    /// Status, the `X-RonSQL-Error-Class` header, and the body as text.
    async fn post(&self, key: &str, path: &str, body: String) -> (StatusCode, String, String) {
        let r = common::client()
            .post(format!("{}/0.1.0/{path}", self.shoal.rest_url))
            .header("content-type", "application/json")
            .header("X-API-KEY", key)
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let class = (r.headers().get("x-ronsql-error-class"))
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, class, r.text().await.unwrap())
    }

    async fn sql_with(&self, body: Value) -> (StatusCode, String, String) {
        self.post(&self.key, "ronsql", body.to_string()).await
    }

    /// A query's JSON answer, which must succeed.
    async fn query(&self, sql: &str) -> Value {
        let (status, class, body) = self
            .sql_with(json!({"query": sql, "database": "app"}))
            .await;
        assert_eq!(status, StatusCode::OK, "{sql}: {class} {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{sql}: {e}: {body}"))
    }

    /// A query that must be refused: its status, class and error code.
    async fn refused(&self, sql: &str) -> (StatusCode, String, Value) {
        let (status, class, body) = self
            .sql_with(json!({"query": sql, "database": "app"}))
            .await;
        assert_ne!(status, StatusCode::OK, "{sql} was answered: {body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        (status, class, body["error"].clone())
    }

    /// SQLite's answer to the same query, as JSON rows keyed like Shoal's.
    async fn sqlite(&mut self, sql: &str) -> Vec<Value> {
        let rows = sqlx::query(sql)
            .fetch_all(&mut self.sqlite)
            .await
            .unwrap_or_else(|e| panic!("SQLite refused {sql}: {e}"));
        rows.iter()
            .map(|row| {
                let mut object = serde_json::Map::new();
                for (i, col) in row.columns().iter().enumerate() {
                    let raw = row.try_get_raw(i).unwrap();
                    let v = if raw.is_null() {
                        Value::Null
                    } else if let Ok(v) = row.try_get::<i64, _>(i) {
                        json!(v)
                    } else if let Ok(v) = row.try_get::<f64, _>(i) {
                        json!(v)
                    } else {
                        json!(row.try_get::<String, _>(i).unwrap())
                    };
                    object.insert(col.name().to_owned(), v);
                }
                Value::Object(object)
            })
            .collect()
    }
}

/// Whether two answers' values agree: integers exactly, other numbers to
/// within what SQLite's floating point and MySQL's rounding of AVG to four
/// digits allow, strings and NULL exactly.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                return x == y;
            }
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-4 + 1e-9 * x.abs().max(y.abs())
        }
        (a, b) => a == b,
    }
}

fn same_rows(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            let (x, y) = (x.as_object().unwrap(), y.as_object().unwrap());
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        })
}

/// A random numeric expression over the table's columns.
fn number(rng: &mut Rng) -> String {
    rng.pick(&[
        "a",
        "b",
        "c",
        "d",
        "a + b",
        "a * 2",
        "b - a",
        "c * 4",
        "d + a",
        "a % 7",
        "-a",
        "c / 4",
        "(a + 1) * (b % 10)",
        "d * 3",
    ])
    .to_owned()
}

/// A random condition, nested up to `depth`.
fn condition(rng: &mut Rng, depth: u32) -> String {
    if depth > 0 && rng.chance(40) {
        let a = condition(rng, depth - 1);
        let b = condition(rng, depth - 1);
        return match rng.below(3) {
            0 => format!("({a} AND {b})"),
            1 => format!("({a} OR {b})"),
            _ => format!("NOT ({a})"),
        };
    }
    let v = rng.range(-60, 60);
    match rng.below(12) {
        0 => format!("a {} {v}", rng.pick(&["=", "<>", "<", "<=", ">", ">="])),
        1 => format!(
            "b {} {}",
            rng.pick(&["<", ">="]),
            rng.range(-1_000_000, 1_000_000)
        ),
        2 => format!("c {} {}", rng.pick(&["<", ">", "="]), v as f64 / 4.0),
        3 => format!(
            "d {} {}",
            rng.pick(&["<=", ">"]),
            cents(rng.range(-999_999, 999_999))
        ),
        4 => format!("grp = '{}'", rng.pick(&["a", "b", "dd", "q"])),
        5 => format!(
            "{} IS {}NULL",
            rng.pick(&["a", "grp", "c", "d"]),
            rng.pick(&["", "NOT "])
        ),
        6 => format!(
            "a {}BETWEEN {v} AND {}",
            rng.pick(&["", "NOT "]),
            v + rng.range(0, 40)
        ),
        7 => format!(
            "a {}IN ({}, {}, {}{})",
            rng.pick(&["", "NOT "]),
            v,
            v + 1,
            rng.range(-50, 50),
            if rng.chance(20) { ", NULL" } else { "" }
        ),
        8 => format!("grp IN ('a', 'c', '{}')", rng.pick(&["b", "zz"])),
        9 => format!("{} > {}", number(rng), rng.range(-200, 200)),
        // Rows compared column by column.
        10 => format!(
            "(a, grp) {} ({v}, '{}')",
            rng.pick(&["=", "<>"]),
            rng.pick(&["a", "b", "dd"])
        ),
        _ => format!(
            "day {} '2024-{:02}-15'",
            rng.pick(&["<", ">="]),
            rng.range(1, 12)
        ),
    }
}

/// A random query of the subset, and whether its rows come in a defined order.
fn random_query(rng: &mut Rng) -> (String, bool) {
    let group_cols: Vec<&str> = match rng.below(4) {
        0 => vec![],
        1 => vec!["grp"],
        2 => vec!["a"],
        _ => vec!["grp", "a"],
    };
    let mut outputs: Vec<String> = group_cols.iter().map(|c| c.to_string()).collect();
    for _ in 0..rng.range(1, 3) {
        let agg = match rng.below(9) {
            0 => "COUNT(*)".to_owned(),
            8 => format!(
                "COUNT(DISTINCT {})",
                rng.pick(&["a", "b", "c", "d", "grp", "day", "a % 3"])
            ),
            1 => format!("COUNT({})", number(rng)),
            2 | 3 => format!("SUM({})", number(rng)),
            4 => format!(
                "MIN({})",
                rng.pick(&["a", "b", "c", "d", "grp", "day", "a - b"])
            ),
            5 => format!(
                "MAX({})",
                rng.pick(&["a", "b", "c", "d", "grp", "day", "b * 2"])
            ),
            _ => format!("AVG({})", number(rng)),
        };
        // Sometimes a value computed from it: of numbers only, as SQLite
        // would add text, and not of AVG, whose rounding to four digits
        // a product would carry past the comparison's tolerance.
        let numeric = agg.starts_with("COUNT") || !(agg.contains("grp") || agg.contains("day"));
        let agg = if numeric && !agg.starts_with("AVG") && rng.chance(30) {
            match rng.below(5) {
                0 => format!("{agg} + 1"),
                1 => format!("COALESCE({agg}, 0)"),
                2 => format!("{agg} * 2 - COUNT(*)"),
                3 => format!("CASE WHEN {agg} IS NULL THEN -1 ELSE {agg} END"),
                _ => format!("ABS({agg})"),
            }
        } else {
            agg
        };
        outputs.push(agg);
    }
    if group_cols.contains(&"a") && rng.chance(25) {
        outputs.push("a * 3 + COUNT(*)".into());
    }
    if group_cols.is_empty() && rng.chance(10) {
        outputs = vec!["COUNT(*)".into()];
    }
    let select: Vec<String> = (outputs.iter().enumerate())
        .map(|(i, o)| format!("{o} AS c{i}"))
        .collect();
    let mut sql = format!("SELECT {} FROM items", select.join(", "));
    if rng.chance(75) {
        sql += &format!(" WHERE {}", condition(rng, 3));
    }
    if !group_cols.is_empty() {
        sql += &format!(" GROUP BY {}", group_cols.join(", "));
        if rng.chance(35) {
            let last = outputs.len() - 1;
            sql += &match rng.below(5) {
                0 => format!(" HAVING COUNT(*) > {}", rng.range(0, 6)),
                1 => format!(
                    " HAVING c{last} IS NOT NULL AND COUNT(*) >= {}",
                    rng.range(1, 3)
                ),
                2 => format!(" HAVING SUM(b) < {}", rng.range(-100_000, 100_000)),
                3 => format!(
                    " HAVING {} IS NULL OR MAX(a) > {}",
                    group_cols[0],
                    rng.range(-20, 40)
                ),
                _ => format!(
                    " HAVING NOT (MIN(b) > {}) AND AVG(a) < 10",
                    rng.range(-500_000, 500_000)
                ),
            };
        }
    }
    let ordered = !group_cols.is_empty() && rng.chance(60);
    if ordered {
        let mut keys: Vec<String> = (group_cols.iter())
            .map(|c| format!("{c} {}", rng.pick(&["ASC", "DESC", ""])))
            .collect();
        // A value computed from the groups first; the GROUP BY columns
        // still order its ties.
        if rng.chance(25) {
            keys.insert(0, format!("COUNT(*) * -1 {}", rng.pick(&["ASC", "DESC"])));
        }
        sql += &format!(" ORDER BY {}", keys.join(", "));
        if rng.chance(50) {
            sql += &format!(" LIMIT {}", rng.range(0, 8));
            if rng.chance(50) {
                sql += &format!(" OFFSET {}", rng.range(0, 5));
            }
        }
    }
    (sql, ordered)
}

fn sort_rows(rows: &mut [Value]) {
    rows.sort_by_key(|r| r.to_string());
}

#[tokio::test]
async fn answers_match_sqlite_on_hundreds_of_generated_queries() {
    let seed = std::env::var("RONSQL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2026_u64);
    let mut s = setup(500, seed).await;
    let mut rng = Rng(seed ^ 0xabcdef);
    let (mut grouped, mut computed) = (0, 0);
    for n in 0..400 {
        let (sql, ordered) = random_query(&mut rng);
        let shoal = s.query(&sql).await;
        let mut ours = shoal.as_array().unwrap().clone();
        let mut theirs = s.sqlite(&sql).await;
        if !ordered {
            sort_rows(&mut ours);
            sort_rows(&mut theirs);
        }
        assert!(
            same_rows(&ours, &theirs),
            "query {n} (seed {seed}): {sql}\n Shoal:  {ours:?}\n SQLite: {theirs:?}"
        );
        grouped += usize::from(sql.contains("GROUP BY") && ours.len() > 1);
        computed += usize::from(
            [
                "+ 1 AS",
                "COALESCE(",
                "- COUNT(*)",
                "CASE WHEN",
                "ABS(",
                "3 + COUNT",
                "* -1",
            ]
            .iter()
            .any(|e| sql.contains(e)),
        );
    }
    assert!(grouped > 100, "only {grouped} queries made several groups");
    assert!(
        computed > 60,
        "only {computed} queries computed from groups"
    );
}

#[tokio::test]
async fn replies_take_ronsql_shapes() {
    let s = setup(200, 7).await;
    let sql = "SELECT grp, COUNT(*), SUM(a) AS total FROM items WHERE grp IN ('a', 'b') GROUP BY grp ORDER BY grp";
    let (status, _, body) = s.sql_with(json!({"query": sql, "database": "app"})).await;
    assert_eq!(status, StatusCode::OK);
    // Outputs keep the query's order and names.
    assert!(body.starts_with(r#"[{"grp":"a","COUNT(*)":"#), "{body}");
    let json: Value = serde_json::from_str(&body).unwrap();
    let rows = json.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["grp"], "a");
    assert_eq!(rows[1]["grp"], "b");
    assert!(rows[0]["COUNT(*)"].is_u64());

    // TEXT: tab-separated with a header, NULL as NULL; TEXT_NOHEADER without.
    let sql = "SELECT grp, MAX(a) FROM items GROUP BY grp ORDER BY grp";
    let (status, _, text) = s
        .sql_with(json!({"query": sql, "database": "app", "outputFormat": "TEXT"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "grp\tMAX(a)");
    assert!(lines[1].starts_with("NULL\t"), "NULL sorts first: {text}");
    let (_, _, bare) = s
        .sql_with(json!({"query": sql, "database": "app", "outputFormat": "TEXT_NOHEADER"}))
        .await;
    assert_eq!(bare.lines().collect::<Vec<_>>(), lines[1..]);

    // Exact decimals, AVG with four more digits, dates as text.
    let answer = s
        .query("SELECT SUM(d) AS s, AVG(a) AS avg_a, MIN(day) AS first, COUNT(*) AS n FROM items WHERE id < 0")
        .await;
    assert_eq!(
        answer,
        json!([{"s": null, "avg_a": null, "first": null, "n": 0}])
    );
    // One row whose d and a are known: decimals keep their scale exactly.
    let sql = "SELECT SUM(d + 0.005) AS s, AVG(b) AS m, MAX(b) AS b FROM items WHERE id = 3";
    let (_, _, body) = s.sql_with(json!({"query": sql, "database": "app"})).await;
    let row: Value = serde_json::from_str(&body).unwrap();
    let b = row[0]["b"].as_i64().unwrap();
    assert!(
        body.contains(&format!(r#""m":{b}.0000,"#)),
        "AVG has four more digits: {body}"
    );
    let s_text = body
        .split(r#""s":"#)
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    assert!(
        s_text == "null" || s_text.split('.').nth(1).is_some_and(|f| f.len() == 3),
        "a decimal of scale 2 plus 0.005 has scale 3: {body}"
    );

    // REGEXP pushed down answers what the same rows found otherwise do.
    let by_regexp = s
        .query("SELECT COUNT(*) AS n, SUM(a) AS t FROM items WHERE grp REGEXP '^[ab]$'")
        .await;
    let by_list = s
        .query("SELECT COUNT(*) AS n, SUM(a) AS t FROM items WHERE grp IN ('a', 'b')")
        .await;
    assert_eq!(by_regexp, by_list);
    assert!(by_list[0]["n"].as_u64() > Some(0), "{by_list}");
}

#[tokio::test]
async fn explain_names_the_index_range_and_the_modes_hold() {
    let s = setup(50, 3).await;
    let explain = |sql: &str, mode: &str| {
        json!({"query": sql, "database": "app", "explainMode": mode}).to_string()
    };
    // Explained, as ALLOW lets a query be.
    let allowed = |sql: &str| s.post(&s.key, "ronsql", explain(sql, "ALLOW"));
    let (status, _, text) =
        allowed("EXPLAIN SELECT COUNT(*) FROM items WHERE a BETWEEN 3 AND 9 AND b > 0").await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.contains("Range scan of index `by_a`"), "{text}");
    assert!(text.contains("a >= 3 AND a <= 9"), "{text}");
    assert!(text.contains("Filter evaluated"), "{text}");
    let (_, _, text) =
        allowed("EXPLAIN SELECT COUNT(*) FROM items WHERE grp = 'b' AND a > 5").await;
    assert!(
        text.contains("`by_grp_a`") && text.contains("grp = 'b' AND a > 5"),
        "{text}"
    );
    let (_, _, text) = allowed("EXPLAIN SELECT SUM(b) FROM items WHERE id >= 45").await;
    assert!(text.contains("`PRIMARY`"), "{text}");
    // A range on the integer key that is the whole WHERE: not checked again.
    assert!(
        text.contains(
            "Filter not evaluated: the range holds exactly the rows it lets in: id >= 45"
        ),
        "{text}"
    );
    let (_, _, text) =
        allowed("EXPLAIN SELECT SUM(b) FROM items WHERE id >= 45 AND id <> 47").await;
    assert!(
        text.contains("`PRIMARY`")
            && text.contains("Filter evaluated in the data node on every row reached"),
        "{text}"
    );
    // A range that holds most of the index is not worth walking.
    let (_, _, text) = allowed("EXPLAIN SELECT SUM(b) FROM items WHERE id >= 2").await;
    assert!(
        text.contains("Full scan") && text.contains("narrow enough"),
        "{text}"
    );
    let (_, _, text) = allowed("EXPLAIN SELECT SUM(b) FROM items WHERE a > 2.5 OR b < 0").await;
    assert!(text.contains("Full scan"), "{text}");

    // The modes: FORBID refuses EXPLAIN, REQUIRE refuses a plain SELECT,
    // REMOVE runs both, FORCE explains both.
    let plain = "SELECT COUNT(*) AS n FROM items";
    let explained = "EXPLAIN SELECT COUNT(*) AS n FROM items";
    let (status, class, _) = s.post(&s.key, "ronsql", explain(explained, "FORBID")).await;
    assert_eq!(
        (status, class.as_str()),
        (StatusCode::BAD_REQUEST, "unsupported")
    );
    let (status, _, _) = s.post(&s.key, "ronsql", explain(plain, "REQUIRE")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, body) = s.post(&s.key, "ronsql", explain(explained, "REMOVE")).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "[{\"n\":50}\n]\n")
    );
    let (_, _, body) = s.post(&s.key, "ronsql", explain(plain, "FORCE")).await;
    assert!(body.contains("Full scan"), "{body}");
}

#[tokio::test]
async fn index_ranges_answer_what_full_scans_answer() {
    let mut s = setup(600, 11).await;
    // The same conditions, once where an index can bound them and once
    // where it cannot (a condition ORed with FALSE hides it).
    let conditions = [
        "a = 7",
        "a > -3 AND a <= 20",
        "a < 0",
        "grp = 'b' AND a >= 10",
        "grp = 'dd'",
        "id >= 100 AND id < 250",
        // Ranges on the primary key that are exactly the WHERE (its rows
        // are not checked again), and ones that are not quite.
        "id > 100 AND id <= 250",
        "id BETWEEN 300 AND 300",
        "id = 301",
        "id > 599",
        "id < 0",
        "id >= 250 AND id < 100",
        "id >= 1e2 AND id < 150",
        "id >= 500 AND id >= 550",
        "id > 450 AND id < 550 AND id <> 500",
        "id = 300 AND id = 301",
        "id BETWEEN 500 AND 520.5",
        "id BETWEEN 500 AND 520 AND b > 0",
        "a BETWEEN -10 AND 10 AND c > 0",
        "a = 2.5",
        "a >= 49",
    ];
    for cond in conditions {
        let ranged = s
            .query(&format!(
                "SELECT COUNT(*) AS n, SUM(b) AS s FROM items WHERE {cond}"
            ))
            .await;
        let full = s
            .query(&format!(
                "SELECT COUNT(*) AS n, SUM(b) AS s FROM items WHERE ({cond}) OR 1 = 0"
            ))
            .await;
        assert_eq!(ranged, full, "{cond}");
        let sqlite = s
            .sqlite(&format!(
                "SELECT COUNT(*) AS n, SUM(b) AS s FROM items WHERE {cond}"
            ))
            .await;
        assert!(
            same_rows(ranged.as_array().unwrap(), &sqlite),
            "{cond}: {ranged} vs {sqlite:?}"
        );
    }
}

#[tokio::test]
async fn hostile_and_unsupported_queries_get_a_clear_error() {
    let s = setup(20, 5).await;
    // An integer past 64 bits is a DECIMAL, as MySQL reads it, not a refusal.
    let (status, _, body) = s
        .sql_with(
            json!({"query": "SELECT SUM(99999999999999999999) AS s FROM items", "database": "app"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains(r#""s":1999999999999999999980"#), "{body}");
    let cases: Vec<(String, StatusCode, &str)> = vec![
        (
            "SELEC COUNT(*) FROM items".into(),
            StatusCode::BAD_REQUEST,
            "syntax",
        ),
        (
            "SELECT COUNT(*) FROM nope".into(),
            StatusCode::BAD_REQUEST,
            "semantic",
        ),
        (
            "SELECT COUNT(nope) FROM items".into(),
            StatusCode::BAD_REQUEST,
            "semantic",
        ),
        (
            "SELECT a FROM items".into(),
            StatusCode::BAD_REQUEST,
            "semantic",
        ),
        (
            "SELECT SUM(grp) FROM items".into(),
            StatusCode::BAD_REQUEST,
            "semantic",
        ),
        (
            "SELECT COUNT(*) FROM items WHERE grp > 3".into(),
            StatusCode::BAD_REQUEST,
            "semantic",
        ),
        (
            "SELECT COUNT(*) FROM items WHERE day > 'soon'".into(),
            StatusCode::BAD_REQUEST,
            "semantic",
        ),
        (
            "SELECT COUNT(*) FROM rival.items".into(),
            StatusCode::BAD_REQUEST,
            "semantic",
        ),
        (
            "SELECT * FROM items".into(),
            StatusCode::BAD_REQUEST,
            "unsupported",
        ),
        (
            "SELECT COUNT(*) FROM items x JOIN items y ON x.id = y.id".into(),
            StatusCode::BAD_REQUEST,
            "unsupported",
        ),
        (
            "SELECT COUNT(*) FROM items WHERE a IN (SELECT a FROM items)".into(),
            StatusCode::BAD_REQUEST,
            "unsupported",
        ),
        (
            "SELECT SUM(DISTINCT a) FROM items".into(),
            StatusCode::BAD_REQUEST,
            "unsupported",
        ),
        (
            "SELECT SUM(a) FROM items WHERE a DIV".into(),
            StatusCode::BAD_REQUEST,
            "unsupported",
        ),
        (
            "SELECT COUNT(DISTINCT a, b) FROM items".into(),
            StatusCode::BAD_REQUEST,
            "unsupported",
        ),
        (
            "SELECT COUNT(*) FROM items WHERE grp REGEXP '(a'".into(),
            StatusCode::BAD_REQUEST,
            "semantic",
        ),
        (
            "SELECT COUNT(*) FROM items WHERE grp REGEXP '(a)\\\\1'".into(),
            StatusCode::BAD_REQUEST,
            "unsupported",
        ),
        (
            "SELECT grp, COUNT(*) FROM items GROUP BY grp HAVING a > 1".into(),
            StatusCode::BAD_REQUEST,
            "semantic",
        ),
        (
            "SELECT COUNT(*) FROM items WHERE SUM(a) > 1".into(),
            StatusCode::BAD_REQUEST,
            "semantic",
        ),
        (
            "DELETE FROM items".into(),
            StatusCode::BAD_REQUEST,
            "unsupported",
        ),
        (
            "SELECT COUNT(*) FROM items; DROP TABLE items".into(),
            StatusCode::BAD_REQUEST,
            "syntax",
        ),
        (
            "SELECT SUM(b * b * b * b) FROM items".into(),
            StatusCode::BAD_REQUEST,
            "semantic",
        ),
        // Past DECIMAL's 38 digits (past 64 bits an integer is a DECIMAL).
        (
            format!("SELECT SUM({}) FROM items", "9".repeat(39)),
            StatusCode::BAD_REQUEST,
            "semantic",
        ),
        // Huge IN lists, deep nesting, long chains, long text.
        (
            format!(
                "SELECT COUNT(*) FROM items WHERE a IN ({})",
                (0..1500)
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
        (
            format!(
                "SELECT COUNT(*) FROM items WHERE {}a = 1{}",
                "(".repeat(200),
                ")".repeat(200)
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
        (
            format!("SELECT SUM({}) FROM items", vec!["a"; 1500].join(" + ")),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
        (
            format!(
                "SELECT COUNT(*) FROM items WHERE {}",
                vec!["a = 1"; 1200].join(" OR ")
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
        (
            format!(
                "SELECT COUNT(*) AS n FROM items /* {} */",
                "x".repeat(70_000)
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
    ];
    for (sql, status, class) in cases {
        let (got, got_class, error) = s.refused(&sql).await;
        let short: String = sql.chars().take(80).collect();
        assert_eq!(
            (got, got_class.as_str()),
            (status, class),
            "{short}: {error}"
        );
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{short}"
        );
        assert_eq!(error["class"], class, "{short}");
    }
    // A megabyte of SQL is refused before it is read as SQL.
    let huge = format!(
        "SELECT COUNT(*) FROM items WHERE {}",
        "a = 1 OR ".repeat(100_000)
    );
    let (status, _, _) = s.sql_with(json!({"query": huge, "database": "app"})).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    // Bad request bodies.
    for body in [
        json!({"query": "SELECT COUNT(*) FROM items"}),
        json!({"query": "SELECT COUNT(*) FROM items", "database": "app", "outputFormat": "XML"}),
        json!({"query": "SELECT COUNT(*) FROM items", "database": "app", "explainMode": "MAYBE"}),
        json!({"query": "SELECT COUNT(*) FROM items", "database": "app", "operationId": "x".repeat(257)}),
        json!({"query": "SELECT COUNT(*) FROM items", "database": "app", "extra": 1}),
        json!({"query": 5, "database": "app"}),
    ] {
        let (status, _, text) = s.sql_with(body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {text}");
    }

    // Another tenant's database, no key, a wrong key.
    let other = json!({"query": "SELECT COUNT(*) FROM items", "database": "rival"}).to_string();
    let (status, _, _) = s.post(&s.key, "ronsql", other.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = s.post("", "ronsql", other).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // After all that the node still answers, and a read-only key may query.
    let reader = s.shoal.create_key("acme", &[("app", "read")]).await;
    let ok = json!({"query": "SELECT COUNT(*) AS n FROM items", "database": "app"}).to_string();
    let (status, _, body) = s.post(&reader, "ronsql", ok).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "[{\"n\":20}\n]\n")
    );
}

/// Read units the database has used, as ndbinfo reports them.
async fn read_units(shoal: &Shoal) -> u64 {
    let usage = shoal.ndbinfo("database_quota_usage").await;
    let rows = usage["rows"].as_array().unwrap();
    let row = rows.iter().find(|r| r[0] == "app").expect("a row for app");
    row[3].as_u64().unwrap()
}

#[tokio::test]
async fn every_row_examined_is_charged_and_groups_are_bounded() {
    let mut s = setup(300, 9).await;
    let before = read_units(&s.shoal).await;
    s.query("SELECT COUNT(*) FROM items").await;
    let full = read_units(&s.shoal).await - before;
    assert_eq!(full, 300, "a full scan examines every row once");
    let before = read_units(&s.shoal).await;
    s.query("SELECT COUNT(*) FROM items WHERE id < 50").await;
    let ranged = read_units(&s.shoal).await - before;
    assert!(
        (50..=60).contains(&ranged),
        "a range of the primary key examines about its rows: {ranged}"
    );

    // What the scan owes holds the next read back at a low read rate.
    s.shoal
        .set_quota("app", json!({"read_units_per_sec": 10, "burst_seconds": 1}))
        .await;
    let (status, _, body) = s
        .sql_with(json!({"query": "SELECT COUNT(*) FROM items", "database": "app"}))
        .await;
    let (status2, _, body2) = s
        .sql_with(json!({"query": "SELECT COUNT(*) FROM items", "database": "app"}))
        .await;
    assert!(
        status == StatusCode::TOO_MANY_REQUESTS || status2 == StatusCode::TOO_MANY_REQUESTS,
        "{status} {body} / {status2} {body2}"
    );
    let refused = if status == StatusCode::TOO_MANY_REQUESTS {
        body
    } else {
        body2
    };
    assert!(refused.contains("READ_RATE"), "{refused}");
    s.shoal
        .set_quota(
            "app",
            json!({"read_units_per_sec": 10_000_000, "write_units_per_sec": 10_000_000,
                   "burst_seconds": 1}),
        )
        .await;

    // GROUP BY a unique column over more rows than a query may group.
    let mut rng = Rng(99);
    let more: Vec<Item> = (300..100_300).map(|id| item(&mut rng, id)).collect();
    s.load(&more).await;
    let (status, class, error) = s
        .refused("SELECT id, COUNT(*) FROM items GROUP BY id")
        .await;
    assert_eq!(
        (status, class.as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
        "{error}"
    );
    assert!(
        error["message"].as_str().unwrap().contains("100000 groups"),
        "{error}"
    );
    // Grouping fewer values over the same rows is answered.
    let rows = s
        .query("SELECT grp, COUNT(*) AS n FROM items GROUP BY grp")
        .await;
    let total: u64 = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["n"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 100_300);
}
