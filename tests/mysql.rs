//! SQL over the MySQL protocol on a real data node, with real clients: the
//! `mysql` client (Debian's mariadb-client), Python's PyMySQL, and sqlx's
//! MySQL driver (prepared statements, the binary protocol). A key logs in
//! with its prefix and secret; what SQL writes, REST reads; a read key,
//! another tenant's key and hostile SQL get clear errors and change
//! nothing.

mod common;

use std::process::{Command, Stdio};

use common::Shoal;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::{Connection, Row};

const ITEMS: &str = r#"{"name": "items", "columns": [
    {"name": "id", "type": "BIGINT"},
    {"name": "name", "type": "VARCHAR(40)"},
    {"name": "qty", "type": "INT UNSIGNED", "default": 0},
    {"name": "price", "type": "DECIMAL(8,2)", "nullable": true},
    {"name": "weight", "type": "DOUBLE", "nullable": true},
    {"name": "tag", "type": "VARBINARY(16)", "nullable": true}],
  "primary_key": ["id"]}"#;

struct Setup {
    shoal: Shoal,
    /// Read and write on `app`.
    key: String,
    /// Read only on `app`.
    reader: String,
    /// Another tenant's, on its `theirs`.
    other: String,
}

async fn setup(extra: &[&str]) -> Setup {
    let args = [&["datanode", "--data-memory", "64M"], extra].concat();
    let shoal = Shoal::start(&args);
    shoal.create_database("acme", "app").await;
    shoal.create_database("globex", "theirs").await;
    for db in ["app", "theirs"] {
        let def: Value = serde_json::from_str(ITEMS).unwrap();
        let (status, body) = shoal
            .post(&format!("/internal/v1/databases/{db}/tables"), def)
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let key = shoal.create_key("acme", &[("app", "read_write")]).await;
    let reader = shoal.create_key("acme", &[("app", "read")]).await;
    let other = shoal
        .create_key("globex", &[("theirs", "read_write")])
        .await;
    Setup {
        shoal,
        key,
        reader,
        other,
    }
}

/// Runs `sql` (bytes, as given) through the `mysql` client at `addr` with
/// `key` on `db`: batch mode, no column names, `-vv` for rows affected.
fn mysql_at(addr: &str, key: &str, db: Option<&str>, sql: &[u8]) -> Ran {
    mysql_args(addr, key, db, &[], sql)
}

/// `mysql_at`, the client given `args` too.
fn mysql_args(addr: &str, key: &str, db: Option<&str>, args: &[&str], sql: &[u8]) -> Ran {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let (user, secret) = key.split_once('.').unwrap();
    let mut cmd = Command::new("mysql");
    cmd.args(["-h", host, "-P", port, "-u", user, "--batch", "-N", "-vv"])
        .args(args)
        .arg(format!("-p{secret}"));
    if let Some(db) = db {
        cmd.arg(db);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the mysql client runs (apt: mariadb-client)");
    let mut stdin = child.stdin.take().unwrap();
    let sql = sql.to_vec();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let _ = stdin.write_all(&sql);
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    Ran {
        ok: output.status.success(),
        out: String::from_utf8_lossy(&output.stdout).into_owned(),
        err: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// What the `mysql` client did: whether it succeeded, its output, its errors.
struct Ran {
    ok: bool,
    out: String,
    err: String,
}

impl Setup {
    fn host_port(&self) -> (&str, &str) {
        self.shoal.mysql_addr.rsplit_once(':').unwrap()
    }

    /// sqlx's options to log in with the read-write key on `app`.
    fn driver_options(&self) -> sqlx::mysql::MySqlConnectOptions {
        self.shoal.mysql_options(&self.key, "app")
    }

    fn mysql_with(&self, key: &str, db: Option<&str>, sql: &[u8]) -> Ran {
        mysql_at(&self.shoal.mysql_addr, key, db, sql)
    }

    fn mysql(&self, sql: &str) -> Ran {
        self.mysql_with(&self.key, Some("app"), sql.as_bytes())
    }

    /// `sql`, which must succeed: its output.
    fn ok(&self, sql: &str) -> String {
        let ran = self.mysql(sql);
        assert!(ran.ok, "{sql}: {}", ran.err);
        ran.out
    }

    /// `sql` through `key` on `db`, which must fail with MySQL error `code`.
    fn refused_with(&self, key: &str, db: Option<&str>, sql: &[u8], code: &str) -> String {
        let ran = self.mysql_with(key, db, sql);
        assert!(!ran.ok, "{}: {}", String::from_utf8_lossy(sql), ran.out);
        assert!(
            ran.err.contains(&format!("ERROR {code}")),
            "{}: expected error {code}, got {}",
            String::from_utf8_lossy(&sql[..sql.len().min(200)]),
            ran.err
        );
        ran.err
    }

    fn refused(&self, sql: &str, code: &str) -> String {
        self.refused_with(&self.key, Some("app"), sql.as_bytes(), code)
    }

    /// Every row of `app.items` over REST, as JSON, in id order.
    async fn rest_rows(&self) -> Vec<Value> {
        let (status, page) = common::control::data_call(
            &self.shoal,
            &self.key,
            "app/items/scan",
            json!({"limit": 1000}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        page["data"].as_array().unwrap().clone()
    }
}

/// The data lines of `-vv` output: not the statements it echoes (between
/// lines of dashes) nor its summaries.
fn lines(out: &str) -> Vec<&str> {
    let mut echoing = false;
    out.lines()
        .filter(|l| {
            if l.starts_with("--------------") {
                echoing = !echoing;
                return false;
            }
            !echoing
                && !l.is_empty()
                && !l.starts_with("Query OK")
                && !l.contains("row in set")
                && !l.contains("rows in set")
                && !l.starts_with("Bye")
                && !l.starts_with("Records:")
                && !l.starts_with("Rows matched:")
                && !l.starts_with("Empty set")
        })
        .collect()
}

#[tokio::test]
async fn the_mysql_client_writes_and_reads_what_rest_sees() {
    let s = setup(&[]).await;
    let out = s.ok(
        "INSERT INTO items (id, name, qty, price, weight, tag) VALUES \
         (1, 'bolt', 10, 0.25, 1.5, X'00ff'), (2, 'nut''s', 20, 0.10, NULL, NULL), (3, 'washer', 30, NULL, 2.5e-1, 'ab')",
    );
    assert!(out.contains("Query OK, 3 rows affected"), "{out}");
    assert!(out.contains("Records: 3  Duplicates: 0"), "{out}");
    // A column left out takes its default.
    let out = s.ok("INSERT INTO items (id, name) VALUES (4, 'gear')");
    assert!(out.contains("Query OK, 1 row affected"), "{out}");

    // By key, by a list of keys (in key order), with a projection.
    let out = s.ok("SELECT id, name, qty, price, weight FROM items WHERE id = 1");
    assert_eq!(lines(&out)[..], ["1\tbolt\t10\t0.25\t1.5"], "{out}");
    let out = s.ok("SELECT name FROM items WHERE id IN (4, 2, 99, 1)");
    assert_eq!(lines(&out)[..], ["bolt", "nut's", "gear"], "{out}");
    let out = s.ok("SELECT id, qty FROM items WHERE id IN (1, 2, 3) ORDER BY qty DESC LIMIT 2");
    assert_eq!(lines(&out)[..], ["3\t30", "2\t20"], "{out}");
    // Sorted by, and computed from, columns the answer does not show.
    let out = s.ok("SELECT name FROM items WHERE id IN (1, 2, 3) ORDER BY qty DESC");
    assert_eq!(lines(&out)[..], ["washer", "nut's", "bolt"], "{out}");
    let out = s.ok("SELECT id, qty * 2 FROM items WHERE id IN (3, 1)");
    assert_eq!(lines(&out)[..], ["1\t20", "3\t60"], "{out}");
    let out = s.ok("SELECT * FROM items WHERE id = 4");
    assert_eq!(lines(&out)[..], ["4\tgear\t0\tNULL\tNULL\tNULL"], "{out}");
    // Aggregates run through RonSQL, in the workers.
    let out = s.ok("SELECT COUNT(*), SUM(qty), MAX(name) FROM items WHERE qty >= 10");
    assert_eq!(lines(&out)[..], ["3\t60\twasher"], "{out}");

    // Affected rows as MySQL counts them.
    let out = s.ok("UPDATE items SET qty = 11, name = 'bolt!' WHERE id IN (1, 77)");
    assert!(out.contains("Query OK, 1 row affected"), "{out}");
    let out = s.ok("DELETE FROM items WHERE id = 77");
    assert!(out.contains("Query OK, 0 rows affected"), "{out}");
    let out = s.ok("REPLACE INTO items (id, name) VALUES (3, 'washer2')");
    assert!(out.contains("Query OK, 2 rows affected"), "{out}");
    let out = s.ok("DELETE FROM items WHERE id = 2");
    assert!(out.contains("Query OK, 1 row affected"), "{out}");
    // ROW_COUNT(): the last statement's rows affected, -1 after a result
    // set or an error; FOUND_ROWS(): the last result set's rows.
    let out = s.ok(
        "UPDATE items SET qty = qty + 1 WHERE id IN (1, 3, 4); SELECT ROW_COUNT(); \
         SELECT name FROM items WHERE id IN (1, 3); SELECT ROW_COUNT(), FOUND_ROWS(); \
         SELECT FOUND_ROWS(); UPDATE items SET qty = qty WHERE id = 1; SELECT ROW_COUNT(); \
         CREATE TABLE scratch (id INT PRIMARY KEY); SELECT ROW_COUNT(); DROP TABLE scratch",
    );
    assert_eq!(
        lines(&out)[..],
        ["3", "bolt!", "washer2", "-1\t2", "1", "0", "0"],
        "{out}"
    );
    // Through a driver: BIGINT for ROW_COUNT(), BIGINT UNSIGNED for
    // FOUND_ROWS() and LAST_INSERT_ID(), as MySQL types them.
    let mut c = sqlx::MySqlConnection::connect_with(&s.driver_options())
        .await
        .unwrap();
    let scalar = async |c: &mut sqlx::MySqlConnection, sql: &str| -> sqlx::mysql::MySqlRow {
        sqlx::query(sql).fetch_one(c).await.unwrap()
    };
    sqlx::raw_sql("SELECT * FROM nowhere")
        .execute(&mut c)
        .await
        .unwrap_err();
    let row = scalar(&mut c, "SELECT ROW_COUNT(), FOUND_ROWS(), LAST_INSERT_ID()").await;
    assert_eq!(row.get::<i64, _>(0), -1);
    assert_eq!((row.get::<u64, _>(1), row.get::<u64, _>(2)), (0, 0));
    c.close().await.unwrap();
    // Counting the rows past a LIMIT is not done: refused, not answered wrong.
    let err = s.refused("SELECT SQL_CALC_FOUND_ROWS id FROM items LIMIT 1", "1235");
    assert!(err.contains("SQL_CALC_FOUND_ROWS"), "{err}");
    let out = s.ok("UPDATE items SET qty = qty - 1 WHERE id IN (1, 3, 4)");
    assert!(out.contains("Query OK, 3 rows affected"), "{out}");

    // REST reads what SQL wrote, values exactly.
    let rows = s.rest_rows().await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(rows[0]["name"], "bolt!");
    assert_eq!(rows[0]["qty"], 11);
    assert_eq!(rows[0]["price"], json!(0.25));
    assert_eq!(rows[0]["tag"], "AP8=");
    assert_eq!(rows[1]["name"], "washer2");
    assert_eq!(rows[1]["qty"], 0, "a REPLACE is a new row: its default");
    assert_eq!(rows[2]["name"], "gear");

    // A transaction in one session: its reads by key see its own writes;
    // ROLLBACK undoes them, COMMIT keeps them.
    let out = s.ok(
        "BEGIN; UPDATE items SET qty = 12 WHERE id = 1; SELECT qty FROM items WHERE id = 1; \
         ROLLBACK; SELECT qty FROM items WHERE id = 1; \
         SET autocommit = 0; DELETE FROM items WHERE id = 4; SELECT name FROM items WHERE id IN (3, 4); \
         COMMIT; SET autocommit = 1",
    );
    assert_eq!(lines(&out)[..], ["12", "11", "washer2"], "{out}");
    assert_eq!(s.rest_rows().await.len(), 2);

    // What a client looks at.
    let out = s.ok("SHOW TABLES");
    assert_eq!(lines(&out)[..], ["items"], "{out}");
    let out = s.ok("SHOW DATABASES");
    assert_eq!(lines(&out)[..], ["app"], "only the key's databases: {out}");
    let out = s.ok("DESCRIBE items");
    assert!(out.contains("id\tbigint\tNO\tPRI\tNULL"), "{out}");
    assert!(out.contains("qty\tint unsigned\tNO\t\t0"), "{out}");
    let out = s.ok("SHOW CREATE TABLE items");
    assert!(
        out.contains("`qty` int unsigned NOT NULL DEFAULT '0'"),
        "{out}"
    );
    let out = s.ok("SHOW INDEX FROM items");
    assert!(out.contains("items\t0\tPRIMARY\t1\tid"), "{out}");
    let out = s.ok("SELECT @@version_comment LIMIT 1; SELECT DATABASE(), @@autocommit");
    assert!(out.contains("Shoal"), "{out}");
    assert!(out.contains("app\t1"), "{out}");
    let out = s.ok("SHOW VARIABLES LIKE 'max_allowed%'");
    assert!(out.contains("max_allowed_packet\t67108864"), "{out}");
    let out = s.ok("SET NAMES utf8mb4; SET autocommit = 1; SET SESSION sql_mode = 'STRICT_TRANS_TABLES'; USE app; SELECT 1");
    assert!(out.contains("\n1\n"), "{out}");
    // The validation query of pools written for Oracle: MySQL's DUAL, a
    // table of one row; quoted, it is a table name like any other.
    let out = s.ok("SELECT 1 FROM DUAL; SELECT 'ok', DATABASE() FROM dual");
    assert_eq!(lines(&out)[..], ["1", "ok\tapp"], "{out}");
    s.refused("SELECT 1 FROM `DUAL`", "1146");
    // Django's probe at connect, and expressions of constants.
    let out = s.ok(
        "SELECT VERSION(), @@sql_mode, @@default_storage_engine, @@sql_auto_is_null, \
         @@lower_case_table_names, CONVERT_TZ('2001-01-01 01:00:00', 'UTC', 'UTC') IS NOT NULL",
    );
    assert_eq!(
        lines(&out)[..],
        [
            "8.0.36-shoal\tONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION\tndbcluster\t0\t0\t1"
        ],
        "{out}"
    );
    let out = s.ok(
        "SELECT 1 + 1, 7 / 2, UPPER('abc'), CONCAT('a', 2 > 1), COALESCE(NULL, 'x'), \
         CONVERT_TZ('2024-03-01 00:30:00.25', '+00:00', '-05:00'), \
         CONVERT_TZ(DATE '2024-01-01', 'SYSTEM', '+05:30')",
    );
    assert_eq!(
        lines(&out)[..],
        ["2\t3.5000\tABC\ta1\tx\t2024-02-29 19:30:00.25\t2024-01-01 05:30:00"],
        "{out}"
    );
    for (sql, code, says) in [
        (
            "SELECT CONVERT_TZ('2001-01-01 01:00:00', 'UTC', 'Europe/Berlin')",
            "1235",
            "Europe/Berlin",
        ),
        (
            "SELECT CONVERT_TZ('2001-01-01', '+14:01', 'UTC')",
            "1235",
            "+14:01",
        ),
        (
            "SELECT CONVERT_TZ('soon', 'UTC', 'UTC')",
            "1105",
            "not a date",
        ),
        (
            "SELECT CONVERT_TZ('9999-12-31 23:00:00', 'UTC', '+02:00')",
            "1690",
            "out of range",
        ),
        ("SELECT nosuch + 1", "1054", "nosuch"),
        ("SELECT t.nosuch + 1", "1054", "t.nosuch"),
        ("SELECT UPPER(1)", "1105", "a string"),
    ] {
        let err = s.refused(sql, code);
        assert!(err.contains(says), "{sql}: {err}");
    }
}

#[tokio::test]
async fn errors_have_mysqls_numbers_and_change_nothing() {
    let s = setup(&[]).await;
    s.ok("INSERT INTO items (id, name) VALUES (1, 'one'), (2, 'two')");
    let before = s.rest_rows().await;

    // A duplicate key fails the whole statement: row 3 is not written.
    // The message is MySQL 8's, naming the row's key (ORMs read it).
    let err = s.refused(
        "INSERT INTO items (id, name) VALUES (3, 'three'), (1, 'again')",
        "1062 (23000)",
    );
    assert!(
        err.contains("Duplicate entry '1' for key 'items.PRIMARY'"),
        "{err}"
    );
    // Several columns joined by '-', a long entry cut to 64 characters,
    // bytes printable: as MariaDB 10.11 writes them.
    let long = "y".repeat(100);
    s.ok(&format!(
        "CREATE TABLE pairs (a INT, b VARCHAR(100), PRIMARY KEY (a, b)); \
         CREATE TABLE bins (b VARBINARY(4) PRIMARY KEY); \
         INSERT INTO pairs VALUES (1, 'x'), (2, '{long}'); INSERT INTO bins VALUES (0x00ff41)"
    ));
    for (sql, entry) in [
        (
            "INSERT INTO pairs VALUES (3, 'z'), (1, 'x')".to_owned(),
            "'1-x' for key 'pairs.PRIMARY'".to_owned(),
        ),
        (
            format!("INSERT INTO pairs VALUES (2, '{long}')"),
            format!("'2-{}...' for key 'pairs.PRIMARY'", &long[..59]),
        ),
        (
            "INSERT INTO bins VALUES (0x00ff41)".to_owned(),
            r"'\x00\xFFA' for key 'bins.PRIMARY'".to_owned(),
        ),
    ] {
        let err = s.refused(&sql, "1062 (23000)");
        assert!(err.contains(&format!("Duplicate entry {entry}")), "{err}");
    }
    s.ok("DROP TABLE pairs; DROP TABLE bins");
    s.refused("SELECT * FROM nope", "1146 (42S02)");
    s.refused("SELEC 1", "1064 (42000)");
    s.refused("SELECT nope FROM items WHERE id = 1", "1054 (42S22)");
    s.refused(
        "INSERT INTO items (id, name) VALUES (5, 'x', 3)",
        "1136 (21S01)",
    );
    s.refused(
        "INSERT INTO items (id, name, nope) VALUES (5, 'x', 3)",
        "1054 (42S22)",
    );
    // Values are checked, never coerced, and each kind of fault has the
    // number MySQL's strict mode gives it (drivers sort errors by it: a
    // NULL for a NOT NULL column is an integrity error).
    for (sql, code, says) in [
        (
            "INSERT INTO items (id, name) VALUES ('five', 'x')",
            "1366 (HY000)",
            "Incorrect value for column 'id'",
        ),
        (
            "INSERT INTO items (id, name, qty) VALUES (5, 'x', -1)",
            "1264 (22003)",
            "Out of range value for column 'qty'",
        ),
        (
            "INSERT INTO items (id, name, qty) VALUES (5, 'x', 4294967296)",
            "1264 (22003)",
            "4294967296 is out of range for INT UNSIGNED",
        ),
        (
            "INSERT INTO items (id, name, price) VALUES (5, 'x', 1000000)",
            "1264 (22003)",
            "Out of range value for column 'price'",
        ),
        (
            "INSERT INTO items (id, name, price) VALUES (5, 'x', 1.234)",
            "1265 (01000)",
            "Data truncated for column 'price': 1.234 has more digits after the point",
        ),
        (
            "INSERT INTO items (id, name) VALUES (5, NULL)",
            "1048 (23000)",
            "Column 'name' cannot be null",
        ),
        (
            "INSERT INTO items (id, name) VALUES (NULL, 'x')",
            "1048 (23000)",
            "Column 'id' cannot be null",
        ),
        (
            "UPDATE items SET name = NULL WHERE id = 1",
            "1048 (23000)",
            "Column 'name' cannot be null",
        ),
        (
            &format!(
                "INSERT INTO items (id, name) VALUES (5, '{}')",
                "x".repeat(41)
            ),
            "1406 (22001)",
            "Data too long for column 'name': 41 characters is longer than VARCHAR(40)",
        ),
        (
            "INSERT INTO items (id, name, tag) VALUES (5, 'x', X'000102030405060708090A0B0C0D0E0F10')",
            "1406 (22001)",
            "Data too long for column 'tag'",
        ),
        (
            "UPDATE items SET name = CONCAT(name, REPEAT('x', 40)) WHERE id = 1",
            "1406 (22001)",
            "Data too long for column 'name'",
        ),
    ] {
        let err = s.refused(sql, code);
        assert!(err.contains(says), "{sql}: {err}");
    }
    // What Shoal does not run is named, never answered wrongly.
    let err = s.refused("SELECT * FROM items a JOIN items b ON a.id = b.id", "1235");
    assert!(err.contains("JOIN"), "{err}");
    s.refused("SELECT * FROM items WHERE id = (SELECT 1)", "1235");
    s.refused("SAVEPOINT s1", "1235");
    s.refused("COMMIT AND CHAIN", "1235");
    s.refused("START TRANSACTION ISOLATION LEVEL SERIALIZABLE", "1064");
    s.refused("SET autocommit = 2", "1231");
    s.refused("SELECT * FROM items WHERE id = 1 FOR UPDATE NOWAIT", "1235");
    s.refused("SELECT COUNT(*) FROM items FOR UPDATE", "1235");
    // A statement that fails inside a transaction rolls it back whole.
    s.refused(
        "BEGIN; INSERT INTO items (id, name) VALUES (7, 'seven'); \
         INSERT INTO items (id, name) VALUES (1, 'again'); COMMIT",
        "1062 (23000)",
    );
    s.refused("CREATE VIEW v AS SELECT 1", "1235");
    // Types are not converted: a string is not a number, and a value that
    // needs rounding to fit its column is not rounded.
    s.refused("SELECT * FROM items WHERE name = qty", "1105");
    s.refused("UPDATE items SET qty = qty + 1.5 WHERE id = 1", "1366");
    s.refused("UPDATE items SET name = name + 1 WHERE id = 1", "1105");
    // Arithmetic is checked: a result past the column is refused.
    s.refused("UPDATE items SET qty = qty - 1 WHERE id = 1", "1690");
    s.refused("SET GLOBAL max_connections = 1", "1227");
    s.refused("SET nope = 1", "1193");
    s.refused("SELECT @@nope", "1193");
    // A setting that would change answers is kept at Shoal's value or
    // refused, never taken and ignored.
    s.ok("SET sql_select_limit = DEFAULT, sql_safe_updates = 0, sql_auto_is_null = OFF");
    s.refused("SET sql_auto_is_null = 1", "1235");
    s.refused("SET sql_select_limit = -1", "1232");
    s.refused("SET max_join_size = 'many'", "1232");
    s.refused("SET sql_safe_updates = 2", "1231");
    s.refused("SET sql_auto_is_null = 1", "1235");
    assert_eq!(s.rest_rows().await, before);
}

#[tokio::test]
async fn keys_log_in_and_are_held_to_their_grants() {
    let s = setup(&[]).await;
    s.ok("INSERT INTO items (id, name) VALUES (1, 'one')");
    let (prefix, _) = s.key.split_once('.').unwrap();
    // A wrong secret, an unknown prefix, no password at all.
    let wrong = format!("{prefix}.{}", "x".repeat(40));
    s.refused_with(&wrong, Some("app"), b"SELECT 1", "1045 (28000)");
    s.refused_with("AAAAAAAAAAAAAAAA.secret", Some("app"), b"SELECT 1", "1045");
    // Another tenant's database reads as not granted, at connect and by USE.
    let err = s.refused_with(&s.key, Some("theirs"), b"SELECT 1", "1044 (42000)");
    assert!(err.contains("theirs"), "{err}");
    s.refused_with(&s.key, None, b"USE theirs", "1044");
    s.refused_with(
        &s.key,
        Some("app"),
        b"SELECT * FROM theirs.items WHERE id = 1",
        "1044",
    );
    s.refused_with(
        &s.other,
        Some("theirs"),
        b"SELECT * FROM app.items WHERE id = 1",
        "1044",
    );
    s.refused_with(&s.key, None, b"USE nowhere", "1044");
    // No database chosen.
    s.refused_with(
        &s.key,
        None,
        b"SELECT * FROM items WHERE id = 1",
        "1046 (3D000)",
    );
    // A read key reads, and is refused every write.
    let ran = s.mysql_with(
        &s.reader,
        Some("app"),
        b"SELECT name FROM items WHERE id = 1",
    );
    assert!(ran.ok && ran.out.contains("one"), "{}", ran.err);
    for write in [
        "INSERT INTO items (id, name) VALUES (2, 'two')",
        "UPDATE items SET name = 'x' WHERE id = 1",
        "DELETE FROM items WHERE id = 1",
        "REPLACE INTO items (id, name) VALUES (1, 'x')",
    ] {
        let err = s.refused_with(&s.reader, Some("app"), write.as_bytes(), "1142 (42000)");
        assert!(err.contains("items"), "{err}");
    }
    let rows = s.rest_rows().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["name"], "one");
    // The other tenant's table is untouched by all of it.
    let ran = s.mysql_with(&s.other, Some("theirs"), b"SELECT COUNT(*) FROM items");
    assert!(
        ran.ok && lines(&ran.out)[..] == ["0"],
        "{} {}",
        ran.out,
        ran.err
    );
}

/// NOW() and its kin, and date arithmetic, as MySQL gives them: one
/// instant per statement, usable wherever a constant is; dates compare
/// with date-times as MySQL compares them, never as text.
#[tokio::test]
async fn time_functions_and_dates_compare_as_mysql_does() {
    let s = setup(&[]).await;
    s.ok(
        "CREATE TABLE ev (id INT PRIMARY KEY, at DATETIME NOT NULL, day DATE, \
          ts TIMESTAMP(3) NULL, KEY (day))",
    );
    let before = std::time::SystemTime::now();
    s.ok("INSERT INTO ev VALUES (1, NOW(), CURDATE(), NOW(3)), \
         (2, CURRENT_TIMESTAMP - INTERVAL 2 DAY, DATE_SUB(CURDATE(), INTERVAL 1 MONTH), NULL)");
    let after = std::time::SystemTime::now();
    // What was stored is the statement's instant, in UTC (the session's
    // zone), the same in every row and column that read it.
    let utc = |t: std::time::SystemTime| {
        let secs = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let out = Command::new("date")
            .args(["-u", "-d", &format!("@{secs}"), "+%F %T"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let (lo, hi) = (utc(before), utc(after));
    let out = s.ok("SELECT at, day, ts FROM ev WHERE id = 1");
    let row: Vec<&str> = lines(&out)[0].split('\t').collect();
    assert!(
        lo.as_str() <= row[0] && row[0] <= hi.as_str(),
        "{lo} {row:?} {hi}"
    );
    assert_eq!(row[1], &row[0][..10], "{row:?}");
    assert!(row[2].starts_with(row[0]) && row[2].len() == 23, "{row:?}");
    let out = s.ok("SELECT id FROM ev WHERE at < NOW() - INTERVAL 1 DAY");
    assert_eq!(lines(&out)[..], ["2"], "{out}");
    let out = s.ok("SELECT COUNT(*) FROM ev WHERE at > DATE_SUB(NOW(), INTERVAL 1 HOUR)");
    assert_eq!(lines(&out)[..], ["1"], "{out}");

    // Fixed dates: a DATE against a date-time with a time of day compares
    // as its midnight, by the index on `day`, by a scan and in the workers
    // (COUNT) alike; a TIMESTAMP(3) equals what writes the same instant.
    s.ok("DELETE FROM ev");
    s.ok(
        "INSERT INTO ev VALUES (1, '2024-01-01', '2024-01-01', '2024-01-01 00:00:00.5'), \
         (2, '2024-01-02 10:00:00', '2024-01-02', '2024-01-02T00:00:00'), (3, '2024-01-03', NULL, NULL)",
    );
    let noon = "'2024-01-01 12:00:00'";
    for (cond, want) in [
        (format!("day = {noon}"), vec![]),
        (format!("NOT (day = {noon})"), vec!["1", "2"]),
        (format!("day <> {noon}"), vec!["1", "2"]),
        (format!("day < {noon}"), vec!["1"]),
        (format!("day <= {noon}"), vec!["1"]),
        (format!("day > {noon}"), vec!["2"]),
        (
            format!("day BETWEEN {noon} AND '2024-01-02 00:00:00'"),
            vec!["2"],
        ),
        ("day = DATE '2024-01-02'".to_owned(), vec!["2"]),
        ("ts = '2024-01-01 00:00:00.5'".to_owned(), vec!["1"]),
        ("ts >= '2024-01-01T12:00:00'".to_owned(), vec!["2"]),
        (
            "at = TIMESTAMP '2024-01-02 10:00:00.000'".to_owned(),
            vec!["2"],
        ),
        (
            "at < DATE '2024-01-01' + INTERVAL 1 MONTH - INTERVAL 1 SECOND".to_owned(),
            vec!["1", "2", "3"],
        ),
    ] {
        let out = s.ok(&format!("SELECT id FROM ev WHERE {cond} ORDER BY id"));
        assert_eq!(lines(&out), want, "{cond}");
        let out = s.ok(&format!("SELECT COUNT(*) FROM ev WHERE {cond}"));
        assert_eq!(lines(&out), [want.len().to_string()], "{cond}");
    }
    // A date-time is written with its column's fractional digits.
    let out = s.ok("SELECT ts FROM ev WHERE id = 1");
    assert_eq!(lines(&out)[..], ["2024-01-01 00:00:00.500"], "{out}");

    // Month arithmetic ends at a shorter month's end; the outputs keep the
    // names they were written with.
    let out = s.ok("SELECT DATE '2024-01-31' + INTERVAL 1 MONTH, ADDDATE('2024-12-31', 1), UNIX_TIMESTAMP('1970-01-02 00:00:00')");
    assert_eq!(lines(&out)[..], ["2024-02-29\t2025-01-01\t86400"], "{out}");

    // Errors, nothing changed: a precision past 6, a date that is not one,
    // arithmetic past 9999, a DATE given a time of day.
    s.refused("SELECT NOW(7)", "1426");
    s.refused(
        "INSERT INTO ev VALUES (9, DATE '2024-02-30', NULL, NULL)",
        "1525",
    );
    s.refused(
        "INSERT INTO ev VALUES (9, DATE '9999-12-31' + INTERVAL 1 DAY, NULL, NULL)",
        "1441",
    );
    s.refused(
        "INSERT INTO ev VALUES (9, NOW(), '2024-01-01 10:00:00', NULL)",
        "1292 (22007)",
    );
    s.refused(
        "INSERT INTO ev VALUES (9, NOW(), '2024-02-30', NULL)",
        "1292",
    );
    s.refused("SELECT id FROM ev WHERE day = 'garbage'", "1292");
    let out = s.ok("SELECT COUNT(*) FROM ev");
    assert_eq!(lines(&out)[..], ["3"], "{out}");

    // A driver reads NOW() as a date-time, CURDATE() as a date.
    let got = pymysql(
        &s,
        r#"
c = connect().cursor()
c.execute("SELECT NOW(), CURDATE(), NOW(6), UTC_TIMESTAMP()")
now, today, micro, utc = c.fetchone()
print(json.dumps([type(now).__name__, type(today).__name__, str(now.date()) == str(today),
                  micro.replace(microsecond=0) == now, utc == now]))
"#,
    );
    assert_eq!(got, json!(["datetime", "date", true, true, true]));

    // A prepared statement reads the instant at each execute.
    let mut conn = sqlx::MySqlConnection::connect_with(&s.driver_options())
        .await
        .unwrap();
    for _ in 0..2 {
        let ids: Vec<i32> = sqlx::query_scalar("SELECT id FROM ev WHERE id = ? AND at < NOW()")
            .bind(2)
            .fetch_all(&mut conn)
            .await
            .unwrap();
        assert_eq!(ids, [2]);
    }
}

#[tokio::test]
async fn current_timestamp_columns_take_the_time_of_the_write() {
    let s = setup(&[]).await;
    s.ok(
        "CREATE TABLE posts (id INT PRIMARY KEY, body VARCHAR(20), at DATETIME(6) NULL, \
          created DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP, \
          updated TIMESTAMP(6) NULL DEFAULT NOW(6) ON UPDATE LOCALTIMESTAMP(6))",
    );
    // Written back as MySQL writes it, and read back as the same table.
    let out = s.ok("SHOW CREATE TABLE posts");
    let created = "`created` datetime NOT NULL DEFAULT CURRENT_TIMESTAMP,";
    let updated =
        "`updated` timestamp(6) NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),";
    assert!(out.contains(created) && out.contains(updated), "{out}");
    let ddl = lines(&out)[0]
        .split_once('\t')
        .unwrap()
        .1
        .replace("\\n", " ");
    s.ok(&ddl.trim().replacen("`posts`", "`posts2`", 1));
    let again = s.ok("SHOW CREATE TABLE posts2");
    assert!(
        again.contains(created) && again.contains(updated),
        "{again}"
    );
    let out = s.ok("SHOW COLUMNS FROM posts LIKE '%ed'");
    assert_eq!(
        lines(&out)[..],
        [
            "created\tdatetime\tNO\t\tCURRENT_TIMESTAMP\tDEFAULT_GENERATED",
            "updated\ttimestamp(6)\tYES\t\tCURRENT_TIMESTAMP(6)\tDEFAULT_GENERATED on update CURRENT_TIMESTAMP(6)"
        ],
        "{out}"
    );

    let out = s.ok("DESCRIBE posts created");
    assert_eq!(lines(&out).len(), 1, "{out}");
    // A database named after the table is the one read: another tenant's
    // is refused, not answered from this one.
    s.refused("SHOW COLUMNS FROM posts FROM theirs", "1044");
    s.refused("SHOW INDEX FROM posts IN theirs", "1044");
    s.refused("SHOW INDEX FROM posts WHERE Key_name = 'PRIMARY'", "1235");
    // What follows a SHOW is read, never dropped.
    s.refused("SHOW TABLES FROM", "1064");
    s.refused("SHOW CREATE TABLE posts posts2", "1064");
    s.ok("SHOW CREATE TABLE app.posts");

    // An insert that leaves them out stores the statement's instant: the
    // same in every row, and the same NOW() reads.
    let micros = || {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        t.unwrap().as_micros() as i64
    };
    let text = |micros: i64| {
        let out = Command::new("date")
            .args([
                "-u",
                "-d",
                &format!("@{}", micros.div_euclid(1_000_000)),
                "+%F %T",
            ])
            .output()
            .unwrap();
        format!(
            "{}.{:06}",
            String::from_utf8(out.stdout).unwrap().trim(),
            micros.rem_euclid(1_000_000)
        )
    };
    let before = text(micros());
    s.ok("INSERT INTO posts (id, body, at) VALUES (1, 'a', NOW(6)), (2, 'b', NULL)");
    let after = text(micros());
    let out = s.ok("SELECT id, at, created, updated FROM posts ORDER BY id");
    let rows: Vec<Vec<&str>> = lines(&out)
        .iter()
        .map(|l| l.split('\t').collect())
        .collect();
    let stamp = rows[0][3];
    assert!(
        before.as_str() <= stamp && stamp <= after.as_str(),
        "{before} {rows:?} {after}"
    );
    assert_eq!(rows[0][1], stamp, "NOW(6) and the default read one instant");
    assert_eq!(rows[0][2], &stamp[..19], "a DATETIME(0) takes the second");
    assert_eq!(rows[1][2..], rows[0][2..], "{rows:?}");

    // An explicit value is kept; an update that sets the column keeps what
    // it sets, one that changes nothing leaves it, one that changes the
    // row stamps it.
    s.ok("INSERT INTO posts VALUES (3, 'c', NULL, '2000-01-01 00:00:00', '2000-01-01 00:00:00')");
    let updated_of = |id: i32| {
        let out = s.ok(&format!(
            "SELECT created, updated FROM posts WHERE id = {id}"
        ));
        lines(&out)[0].to_owned()
    };
    assert_eq!(
        updated_of(3),
        "2000-01-01 00:00:00\t2000-01-01 00:00:00.000000"
    );
    let out = s.ok("UPDATE posts SET body = 'c' WHERE id = 3");
    assert!(out.contains("Changed: 0"), "{out}");
    let out = s.ok("UPDATE posts SET body = 'c2', updated = updated WHERE id = 3");
    assert!(out.contains("Changed: 1"), "{out}");
    assert_eq!(
        updated_of(3),
        "2000-01-01 00:00:00\t2000-01-01 00:00:00.000000"
    );
    let stamped = |id: i32, before: &str, after: &str| {
        let row = updated_of(id);
        let (created, updated) = row.split_once('\t').unwrap();
        assert!(
            before <= updated && updated <= after,
            "{before} {row} {after}"
        );
        created.to_owned()
    };
    let before = text(micros());
    s.ok("UPDATE posts SET body = 'c3' WHERE body = 'c2'");
    let after = text(micros());
    assert_eq!(stamped(3, &before, &after), "2000-01-01 00:00:00");
    // ON DUPLICATE KEY UPDATE: the same rules.
    s.ok("UPDATE posts SET updated = '2000-01-01' WHERE id = 3");
    s.ok("INSERT INTO posts (id, body) VALUES (3, 'c4') ON DUPLICATE KEY UPDATE body = VALUES(body), updated = updated");
    assert_eq!(
        updated_of(3),
        "2000-01-01 00:00:00\t2000-01-01 00:00:00.000000"
    );
    let before = text(micros());
    s.ok(
        "INSERT INTO posts (id, body) VALUES (3, 'c5') ON DUPLICATE KEY UPDATE body = VALUES(body)",
    );
    let after = text(micros());
    stamped(3, &before, &after);
    // REPLACE writes a new row: its defaults.
    let before = text(micros());
    s.ok("REPLACE INTO posts (id, body) VALUES (3, 'c6')");
    let after = text(micros());
    let created = stamped(3, &before, &after);
    assert!(
        before[..19] <= *created && *created <= after[..19],
        "{created}"
    );

    // The same over REST: a pk-insert that leaves them out, a pk-update.
    let (shoal, key) = (&s.shoal, s.key.as_str());
    let call = |path: &'static str, body: Value| async move {
        common::control::data_call(shoal, key, &format!("app/posts/{path}"), body).await
    };
    let before = text(micros());
    let (status, body) = call("pk-insert", json!({"row": {"id": 4, "body": "d"}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let after = text(micros());
    stamped(4, &before, &after);
    s.ok("UPDATE posts SET updated = '2000-01-01' WHERE id = 4");
    let before = text(micros());
    let (status, body) = call("pk-update", json!({"row": {"id": 4, "body": "d2"}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let after = text(micros());
    stamped(4, &before, &after);

    // Refused, nothing made: the time as the default of a column that is
    // not a date-time of its digits, ON UPDATE without it, or of another
    // column type; a table's JSON likewise.
    for (sql, code) in [
        (
            "CREATE TABLE bad (id INT PRIMARY KEY, n INT DEFAULT CURRENT_TIMESTAMP)",
            "1067",
        ),
        (
            "CREATE TABLE bad (id INT PRIMARY KEY, d DATE DEFAULT NOW())",
            "1067",
        ),
        (
            "CREATE TABLE bad (id INT PRIMARY KEY, t DATETIME(3) DEFAULT CURRENT_TIMESTAMP)",
            "1067",
        ),
        (
            "CREATE TABLE bad (id INT PRIMARY KEY, t DATETIME DEFAULT NOW(3))",
            "1067",
        ),
        (
            "CREATE TABLE bad (id INT PRIMARY KEY, t DATETIME DEFAULT NOW(7))",
            "1426",
        ),
        (
            "CREATE TABLE bad (id INT PRIMARY KEY, t DATETIME ON UPDATE CURRENT_TIMESTAMP)",
            "1235",
        ),
        (
            "CREATE TABLE bad (id INT PRIMARY KEY, n INT ON UPDATE CURRENT_TIMESTAMP)",
            "1294",
        ),
        (
            "CREATE TABLE bad (id INT PRIMARY KEY, t DATETIME DEFAULT CURRENT_TIMESTAMP ON UPDATE NOW(2))",
            "1294",
        ),
        (
            "CREATE TABLE bad (id DATETIME DEFAULT CURRENT_TIMESTAMP PRIMARY KEY)",
            "1105",
        ),
    ] {
        s.refused(sql, code);
    }
    let def = json!({"name": "bad", "columns": [{"name": "id", "type": "INT"},
        {"name": "t", "type": "DATETIME", "on_update": "CURRENT_TIMESTAMP"}], "primary_key": ["id"]});
    let (status, body) = s.shoal.post("/internal/v1/databases/app/tables", def).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("on_update"), "{body}");
    let out = s.ok("SHOW TABLES");
    assert_eq!(lines(&out)[..], ["items", "posts", "posts2"], "{out}");
}

#[tokio::test]
async fn sql_tools_read_table_status_engines_charsets_and_grants() {
    let s = setup(&[]).await;
    s.ok("INSERT INTO items (id, name) VALUES (1, 'a'), (2, 'b'), (3, 'c')");
    // Rows and memory as the node accounts them.
    let out = s.ok("SHOW TABLE STATUS");
    let rows = lines(&out);
    assert_eq!(rows.len(), 1, "{out}");
    let row: Vec<&str> = rows[0].split('\t').collect();
    assert_eq!(
        row[..5],
        ["items", "ndbcluster", "10", "Dynamic", "3"],
        "{out}"
    );
    let (avg, data): (u64, u64) = (row[5].parse().unwrap(), row[6].parse().unwrap());
    assert!(data > 0 && avg == data / 3, "{out}");
    assert_eq!(row[14], "utf8mb4_bin", "{out}");
    // information_schema.TABLES counts the same.
    let out = s.ok("SELECT TABLE_NAME, TABLE_ROWS, DATA_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'app'");
    assert_eq!(lines(&out)[..], [format!("items\t3\t{data}")], "{out}");
    let out = s.ok("SHOW TABLE STATUS FROM app LIKE 'it%'");
    assert_eq!(lines(&out).len(), 1, "{out}");
    let out = s.ok("SHOW TABLE STATUS IN app LIKE 'zz%'");
    assert!(lines(&out).is_empty(), "{out}");
    s.refused("SHOW TABLE STATUS FROM theirs", "1044");
    s.refused("SHOW TABLE STATUS WHERE Rows > 1", "1235");

    let out = s.ok("SHOW ENGINES");
    assert!(lines(&out)[0].starts_with("ndbcluster\tDEFAULT\t"), "{out}");
    let out = s.ok("SHOW CHARACTER SET LIKE 'utf8%'");
    assert_eq!(
        lines(&out)[..],
        ["utf8mb4\tUTF-8 Unicode\tutf8mb4_bin\t4"],
        "{out}"
    );
    let out = s.ok("SHOW CHARSET");
    assert_eq!(lines(&out).len(), 2, "{out}");
    let out = s.ok("SHOW COLLATION LIKE 'utf8mb4%'");
    assert_eq!(
        lines(&out)[..],
        ["utf8mb4_bin\tutf8mb4\t46\tYes\tYes\t1\tNO PAD"],
        "{out}"
    );
    // As it says: trailing spaces count.
    let out = s.ok("SELECT 'a' = 'a ', 'a' < 'a '");
    assert_eq!(lines(&out)[..], ["0\t1"], "{out}");

    // The key's grants as MySQL privileges: least privilege shows.
    let user = s.key.split_once('.').unwrap().0;
    let me = format!("`{user}`@`%`");
    let writer = [
        format!("GRANT USAGE ON *.* TO {me}"),
        format!(
            "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, LOCK TABLES ON `app`.* TO {me}"
        ),
    ];
    for sql in [
        "SHOW GRANTS".to_owned(),
        "SHOW GRANTS FOR CURRENT_USER".to_owned(),
        "SHOW GRANTS FOR CURRENT_USER()".to_owned(),
        format!("SHOW GRANTS FOR '{user}'@'%'"),
    ] {
        let out = s.ok(&sql);
        assert_eq!(lines(&out)[..2], writer, "{sql}: {out}");
        assert!(
            out.contains("GRANT SELECT ON `ndbinfo`.`table_memory_usage`"),
            "{out}"
        );
    }
    let ran = s.mysql_with(&s.reader, Some("app"), b"SHOW GRANTS");
    assert!(ran.ok, "{}", ran.err);
    let reader = s.reader.split_once('.').unwrap().0;
    assert!(
        lines(&ran.out)
            .contains(&format!("GRANT SELECT, LOCK TABLES ON `app`.* TO `{reader}`@`%`").as_str()),
        "{}",
        ran.out
    );
    s.refused("SHOW GRANTS FOR 'root'@'%'", "1044");
    s.refused("SHOW GRANTS FOR", "1064");
}

/// EXPLAIN's one row, split at its tabs.
fn explained(s: &Setup, sql: &str) -> Vec<String> {
    let out = s.ok(sql);
    let rows = lines(&out);
    assert_eq!(rows.len(), 1, "{sql}: {out}");
    rows[0].split('\t').map(str::to_owned).collect()
}

#[tokio::test]
async fn explain_says_how_each_statement_finds_its_rows_and_runs_nothing() {
    let s = setup(&[]).await;
    s.ok(
        "CREATE TABLE orders (id INT NOT NULL PRIMARY KEY, customer INT NOT NULL, \
          placed DATE NOT NULL, note VARCHAR(20), KEY by_customer (customer, placed))",
    );
    let values: Vec<String> = (0..1000)
        .map(|i| format!("({i}, {}, '2024-01-{:02}', 'n{i}')", i % 10, i % 28 + 1))
        .collect();
    s.ok(&format!("INSERT INTO orders VALUES {}", values.join(", ")));
    // id, select_type, table, partitions, type, possible_keys, key,
    // key_len, ref, rows, filtered, Extra.
    let row = |sql: &str| explained(&s, sql);
    assert_eq!(
        row("EXPLAIN SELECT * FROM orders WHERE id = 7")[..],
        [
            "1", "SIMPLE", "orders", "NULL", "const", "PRIMARY", "PRIMARY", "4", "const", "1",
            "100.00", "NULL"
        ]
    );
    assert_eq!(
        row("EXPLAIN SELECT note FROM orders WHERE id IN (1, 2, 3) ORDER BY note")[4..],
        [
            "range",
            "PRIMARY",
            "PRIMARY",
            "4",
            "NULL",
            "3",
            "100.00",
            "Using MRR; Using filesort"
        ]
    );
    // An index pinned by equality: ref; its rows estimated from one
    // fragment's tree (a tenth of the rows are customer 3).
    let by_customer = row("EXPLAIN SELECT * FROM orders WHERE customer = 3");
    assert_eq!(
        by_customer[4..9],
        ["ref", "by_customer", "by_customer", "4", "const"],
        "{by_customer:?}"
    );
    let estimated: u64 = by_customer[9].parse().unwrap();
    assert!((1..1000).contains(&estimated), "{by_customer:?}");
    assert_eq!(by_customer[11], "Using where");
    let ranged = row("EXPLAIN SELECT id FROM orders WHERE customer = 3 AND placed >= '2024-01-15'");
    assert_eq!(
        ranged[4..9],
        ["range", "by_customer", "by_customer", "8", "NULL"],
        "{ranged:?}"
    );
    // Every row: the table's rows, exactly, on a node that holds them all.
    assert_eq!(
        row("EXPLAIN SELECT * FROM orders WHERE note = 'n5'")[4..],
        [
            "ALL",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "1000",
            "100.00",
            "Using where"
        ]
    );
    assert_eq!(
        row("EXPLAIN SELECT DISTINCT customer FROM orders ORDER BY customer")[11],
        "Using temporary; Using filesort"
    );
    // Aggregates: the WHERE and the groups in the data node.
    let grouped = row(
        "EXPLAIN SELECT customer, COUNT(*) FROM orders WHERE customer < 2 AND note <> 'x' GROUP BY customer",
    );
    assert_eq!(grouped[5], "by_customer", "{grouped:?}");
    assert!(
        grouped[11].starts_with("Using pushed condition (customer < 2 AND note <> 'x')")
            && grouped[11].ends_with("Using pushed aggregation"),
        "{grouped:?}"
    );
    // A range that is exactly the WHERE (a NOT NULL integer column): no
    // condition is checked on its rows.
    let grouped =
        row("EXPLAIN SELECT customer, COUNT(*) FROM orders WHERE customer < 2 GROUP BY customer");
    assert_eq!(grouped[5], "by_customer", "{grouped:?}");
    assert_eq!(grouped[11], "Using pushed aggregation", "{grouped:?}");
    // An aggregate's range whose upper end bounds more columns than its
    // lower: both columns are used.
    assert_eq!(
        row("EXPLAIN SELECT COUNT(*) FROM orders WHERE customer = 1 AND placed < '2024-01-10'")
            [4..8],
        ["range", "by_customer", "by_customer", "8"]
    );
    // A key no row can have (keys are never NULL): nothing is read.
    assert_eq!(
        row("EXPLAIN SELECT * FROM orders WHERE id = NULL")[..],
        [
            "1",
            "SIMPLE",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "Impossible WHERE"
        ]
    );
    assert_eq!(
        row("EXPLAIN SELECT 1")[..],
        [
            "1",
            "SIMPLE",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "No tables used"
        ]
    );
    assert_eq!(
        row("EXPLAIN SELECT * FROM ndbinfo.table_memory_usage WHERE table_name = 'orders'")[2..5],
        ["table_memory_usage", "NULL", "ALL"]
    );
    // The same through DESCRIBE, DESC and FORMAT=TRADITIONAL.
    for sql in [
        "DESCRIBE SELECT * FROM orders WHERE id = 7",
        "DESC SELECT * FROM orders WHERE id = 7",
        "EXPLAIN FORMAT=TRADITIONAL SELECT * FROM orders WHERE id = 7",
    ] {
        assert_eq!(row(sql)[4], "const", "{sql}");
    }
    // UPDATE and DELETE are explained, and run not.
    assert_eq!(
        row("EXPLAIN UPDATE orders SET note = 'changed' WHERE id = 5")[1..5],
        ["UPDATE", "orders", "NULL", "const"]
    );
    assert_eq!(
        row("EXPLAIN DELETE FROM orders WHERE customer = 4")[1..7],
        [
            "DELETE",
            "orders",
            "NULL",
            "ref",
            "by_customer",
            "by_customer"
        ]
    );
    assert_eq!(
        row("EXPLAIN DELETE FROM orders")[4..],
        [
            "ALL", "NULL", "NULL", "NULL", "NULL", "1000", "100.00", "NULL"
        ]
    );
    assert_eq!(lines(&s.ok("SELECT COUNT(*) FROM orders"))[..], ["1000"]);
    assert_eq!(
        lines(&s.ok("SELECT note FROM orders WHERE id = 5"))[..],
        ["n5"]
    );
    // EXPLAIN of a table describes its columns, as DESCRIBE does.
    let described = s.ok("EXPLAIN orders");
    assert_eq!(
        lines(&described)[0],
        "id\tint\tNO\tPRI\tNULL\t",
        "{described}"
    );

    // Refused as the statement would be, or as MySQL refuses the form.
    s.refused("EXPLAIN SELECT * FROM nosuch", "1146");
    s.refused("EXPLAIN SELECT nosuch FROM orders", "1054");
    s.refused("EXPLAIN SELECT * FROM theirs.items", "1044");
    s.refused_with(
        &s.reader,
        Some("app"),
        b"EXPLAIN UPDATE orders SET note = 'x' WHERE id = 1",
        "1142",
    );
    let ran = s.mysql_with(
        &s.reader,
        Some("app"),
        b"EXPLAIN SELECT * FROM orders WHERE id = 1",
    );
    assert!(ran.ok, "{}", ran.err);
    s.refused("EXPLAIN FORMAT=JSON SELECT * FROM orders", "1235");
    s.refused("EXPLAIN FORMAT=yaml SELECT * FROM orders", "1791");
    s.refused("EXPLAIN ANALYZE SELECT * FROM orders", "1235");
    s.refused(
        "EXPLAIN INSERT INTO orders VALUES (5000, 1, '2024-01-01', NULL)",
        "1235",
    );
    s.refused("EXPLAIN CREATE TABLE t2 (a INT PRIMARY KEY)", "1064");
    s.refused(
        "EXPLAIN SELECT * FROM orders a JOIN orders b ON a.id = b.id",
        "1235",
    );
    assert_eq!(lines(&s.ok("SELECT COUNT(*) FROM orders"))[..], ["1000"]);
    s.refused("SELECT * FROM t2", "1146");

    // A driver prepares EXPLAIN and reads its columns.
    let mut conn = sqlx::MySqlConnection::connect_with(&s.driver_options())
        .await
        .unwrap();
    let explained = sqlx::query("EXPLAIN SELECT * FROM orders WHERE id = ?")
        .bind(7)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(explained.try_get::<String, _>("type").unwrap(), "const");
    assert_eq!(explained.try_get::<i64, _>("rows").unwrap(), 1);
    conn.close().await.unwrap();
}

#[tokio::test]
async fn like_finds_the_same_rows_by_an_index_range_as_by_a_scan() {
    let s = setup(&[]).await;
    // The same rows in a table with an index on the text and one without:
    // a prefix is looked up as a range of the index, the rest scanned.
    s.ok("CREATE TABLE indexed (id INT PRIMARY KEY, v VARCHAR(20), b VARBINARY(8), f DOUBLE, INDEX by_v (v));
          CREATE TABLE plain (id INT PRIMARY KEY, v VARCHAR(20), b VARBINARY(8), f DOUBLE)");
    let rows = r"(1,'Apple',X'41',1),(2,'apricot',X'61',2),(3,'banana',NULL,3),(4,'a_b%c',X'00',4),
                 (5,NULL,NULL,5),(6,'Ápfel','a',6),(7,'ab',X'6162',7),(8,'ap',X'',8)";
    s.ok(&format!(
        "INSERT INTO indexed VALUES {rows}; INSERT INTO plain VALUES {rows}"
    ));
    for (condition, ids) in [
        // Text is compared byte by byte, as the index orders and tells it
        // apart: case counts, as in `=`.
        ("v LIKE 'ap%'", "2 8"),
        ("v LIKE 'Ap%'", "1"),
        ("v = 'apple'", ""),
        ("v LIKE 'ap'", "8"),
        ("v NOT LIKE 'ap%'", "1 3 4 6 7"),
        ("v LIKE '%an%'", "3"),
        ("v LIKE '_pple'", "1"),
        ("v LIKE 'Á_f%'", "6"),
        ("v LIKE '%'", "1 2 3 4 6 7 8"),
        // Escapes: the default backslash, or one ESCAPE names.
        (r"v LIKE 'a\\_b\\%%'", "4"),
        ("v LIKE 'a|_b|%c' ESCAPE '|'", "4"),
        ("v LIKE 'a_b%'", "4"),
        ("v LIKE NULL", ""),
        ("NOT (v LIKE NULL)", ""),
        ("v LIKE 'ap%' AND id > 2", "8"),
        ("v LIKE 'ap%' OR v LIKE 'b%'", "2 3 8"),
        // Bytes by bytes; numbers as they are written.
        ("b LIKE 'a%'", "2 6 7"),
        ("b LIKE '_'", "1 2 4 6"),
        ("id LIKE '1%'", "1"),
    ] {
        for table in ["indexed", "plain"] {
            let out = s.ok(&format!(
                "SELECT id FROM {table} WHERE {condition} ORDER BY id"
            ));
            assert_eq!(lines(&out).join(" "), ids, "{condition} on {table}");
        }
    }
    // ORDER BY orders as the index does.
    let out = s.ok("SELECT id FROM plain WHERE id < 5 ORDER BY v");
    assert_eq!(lines(&out).join(" "), "1 4 2 3", "{out}");
    // UPDATE and DELETE find their rows the same way.
    s.ok("UPDATE indexed SET f = 0 WHERE v LIKE 'ap%'; DELETE FROM plain WHERE v LIKE 'ap%'");
    let out = s.ok("SELECT id FROM indexed WHERE f = 0 ORDER BY id; SELECT COUNT(*) FROM plain");
    assert_eq!(lines(&out).join(" "), "2 8 6", "{out}");
    // The catalog's tables take LIKE too.
    let out = s.ok("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_NAME LIKE 'ind%'");
    assert_eq!(lines(&out)[..], ["indexed"], "{out}");
    // What LIKE cannot take is refused.
    s.refused("SELECT id FROM plain WHERE f LIKE '1%'", "1235");
    s.refused("SELECT id FROM plain WHERE v LIKE v", "1235");
    s.refused("SELECT id FROM plain WHERE v LIKE 'a' ESCAPE 'ab'", "1210");
    let long = "x".repeat(1025);
    let err = s.refused(
        &format!("SELECT id FROM plain WHERE v LIKE '{long}'"),
        "1105",
    );
    assert!(err.contains("1024"), "{err}");
}

#[tokio::test]
async fn hostile_sql_gets_a_clear_error_and_changes_nothing() {
    let s = setup(&["--max-request-size", "2M"]).await;
    s.ok("INSERT INTO items (id, name) VALUES (1, 'one')");
    // A statement of 1 MB of tokens.
    let long = format!("SELECT {}1", "1+".repeat(500_000));
    s.refused(&long, "1105");
    // Nesting deeper than the parser goes.
    let deep = format!("SELECT {}1{}", "(".repeat(200), ")".repeat(200));
    s.refused(&deep, "1105");
    let deep_where = format!(
        "SELECT * FROM items WHERE {}id = 1{}",
        "(".repeat(200),
        ")".repeat(200)
    );
    s.refused(&deep_where, "1105");
    // DIV, with or without what follows it (the parser's MySQL dialect
    // panicked on a DIV at the end, closing the connection): refused, the
    // connection kept.
    for sql in [
        "SELECT 10 DIV",
        "SELECT 7 DIV 2",
        "SELECT id FROM items WHERE id DIV 2 = 0",
    ] {
        let err = s.refused(sql, "1235");
        assert!(err.contains("DIV"), "{sql}: {err}");
    }
    // An IN list past the bound.
    let ids: Vec<String> = (0..20_000).map(|i| i.to_string()).collect();
    let err = s.refused(
        &format!("SELECT * FROM items WHERE id IN ({})", ids.join(",")),
        "1105",
    );
    assert!(err.contains("10000"), "{err}");
    // A key named many times is looked up once (the list's values are
    // sorted, never compared pairwise).
    let named = (0..9_999)
        .map(|i| ["1", "7", "1"][i % 3])
        .collect::<Vec<_>>();
    let out = s.ok(&format!(
        "SELECT id, name FROM items WHERE id IN ({})",
        named.join(",")
    ));
    assert_eq!(lines(&out)[..], ["1\tone"]);
    // A SHOW … LIKE pattern of many `%`s is answered (matching it once took
    // time exponential in their number, holding a thread of the node); one
    // past 1,024 characters is refused.
    let out = s.ok(&format!("SHOW VARIABLES LIKE '{}x'", "%_".repeat(60)));
    assert!(lines(&out).is_empty(), "{out}");
    let out = s.ok(&format!("SHOW VARIABLES LIKE '{}packet'", "%_".repeat(5)));
    assert!(out.contains("max_allowed_packet"), "{out}");
    s.refused(&format!("SHOW TABLES LIKE '{}'", "_".repeat(1025)), "1105");
    // More rows than one INSERT takes.
    let rows: Vec<String> = (10..10_020).map(|i| format!("({i},'r')")).collect();
    s.refused(
        &format!("INSERT INTO items (id, name) VALUES {}", rows.join(",")),
        "1105",
    );
    // Bytes that are not UTF-8: in a literal they are bytes, which a text
    // column refuses; anywhere else the statement is not taken.
    let mut bad = b"INSERT INTO items (id, name) VALUES (9, '".to_vec();
    bad.extend_from_slice(&[0xff, 0xfe]);
    bad.extend_from_slice(b"')");
    s.refused_with(&s.key, Some("app"), &bad, "1366");
    for bad in [
        &b"SELECT name FROM items WHERE \xff = 1"[..],
        b"SELECT `\xff` FROM items",
        b"SELECT '\xff FROM items",
    ] {
        s.refused_with(&s.key, Some("app"), bad, "1300");
    }
    // A packet past max_allowed_packet closes the connection, after the error.
    let huge = format!("SELECT '{}'", "x".repeat(3 << 20));
    s.refused(&huge, "1153");
    // An injection through a string is a string.
    s.ok("INSERT INTO items (id, name) VALUES (2, 'x''); DROP TABLE items; --')");
    let rows = s.rest_rows().await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[1]["name"], "x'); DROP TABLE items; --");
    // The connection limits hold: the node still serves.
    let out = s.ok("SELECT COUNT(*) FROM items");
    assert_eq!(lines(&out)[..], ["2"], "{out}");
}

#[tokio::test]
async fn pymysql_works_unchanged() {
    let s = setup(&[]).await;
    let script = r#"
out = {}
c = connect(autocommit=True)
with c.cursor() as cur:
    out["inserted"] = cur.executemany(
        "INSERT INTO items (id, name, qty, price) VALUES (%s, %s, %s, %s)",
        [(1, "O'Brien \u00e9\u6f22", 5, "1.50"), (2, "plain", 6, None)])
    cur.execute("SELECT id, name, qty, price FROM items WHERE id IN (%s, %s)", (2, 1))
    out["rows"] = [[r[0], r[1], r[2], None if r[3] is None else str(r[3])] for r in cur.fetchall()]
    out["types"] = [d[1] for d in cur.description]
    try:
        cur.execute("INSERT INTO items (id, name) VALUES (%s, %s)", (1, "again"))
    except pymysql.err.IntegrityError as e:
        out["duplicate"] = e.args[0]
    try:
        cur.execute("INSERT INTO items (id, name) VALUES (%s, %s)", (3, None))
    except pymysql.err.IntegrityError as e:
        out["null"] = e.args[0]
    try:
        cur.execute("INSERT INTO items (id, name) VALUES (%s, %s)", (3, "x" * 41))
    except pymysql.err.DataError as e:
        out["too_long"] = e.args[0]
    try:
        cur.execute("INSERT INTO items (id, name, qty) VALUES (%s, %s, %s)", (3, "x", -1))
    except pymysql.err.DataError as e:
        out["out_of_range"] = e.args[0]
    cur.execute("SELECT COUNT(*) FROM items")
    out["count"] = cur.fetchone()[0]
c.close()
try:
    pymysql.connect(host=host, port=port, user=user, password="wrong", database="app")
except pymysql.err.OperationalError as e:
    out["denied"] = e.args[0]
print(json.dumps(out))
"#;
    let out = pymysql(&s, script);
    assert_eq!(out["inserted"], 2);
    assert_eq!(
        out["rows"],
        json!([[1, "O'Brien é漢", 5, "1.50"], [2, "plain", 6, null]])
    );
    // BIGINT, VARCHAR, INT, DECIMAL as MySQL's type codes.
    assert_eq!(out["types"], json!([8, 253, 3, 246]));
    assert_eq!(out["duplicate"], 1062);
    // PyMySQL sorts errors by number: NULL for a NOT NULL column is an
    // IntegrityError, a value past the column a DataError.
    assert_eq!(out["null"], 1048);
    assert_eq!(out["too_long"], 1406);
    assert_eq!(out["out_of_range"], 1264);
    assert_eq!(out["count"], 2);
    assert_eq!(out["denied"], 1045);
}

/// Two ORMs as Debian ships them (python3-sqlalchemy, python3-django),
/// unchanged over PyMySQL: each makes its tables (SQLAlchemy's `DEFAULT
/// now()`, Django's migrations with an index and a unique column), writes,
/// reads, groups and refuses as an application relies on.
#[tokio::test]
async fn orms_work_unchanged() {
    let s = setup(&[]).await;
    let out = pymysql(
        &s,
        r#"
import datetime, decimal
from sqlalchemy import create_engine, Column, String, Integer, Numeric, DateTime, Boolean
from sqlalchemy import select, func, update, inspect
from sqlalchemy.orm import declarative_base, Session
eng = create_engine(f"mysql+pymysql://{user}:{password}@{host}:{port}/app", future=True)
Base = declarative_base()
class Part(Base):
    __tablename__ = "parts"
    id = Column(Integer, primary_key=True, autoincrement=True)
    name = Column(String(40), nullable=False, index=True)
    price = Column(Numeric(8, 2), nullable=False)
    active = Column(Boolean, nullable=False, default=True)
    created = Column(DateTime, nullable=False, server_default=func.now())
out = {}
Base.metadata.create_all(eng)
Base.metadata.create_all(eng)  # already there: asked, not made again
with Session(eng) as s:
    s.add_all([Part(name=f"n{i}", price=decimal.Decimal(i) / 4) for i in range(10)])
    s.commit()
    out["get"] = s.get(Part, 3).name
    out["top"] = [p.name for p in s.scalars(
        select(Part).where(Part.price > 1).order_by(Part.price.desc()).limit(3))]
    out["sum"] = str(s.scalar(select(func.sum(Part.price)).where(Part.active == True)))
    s.execute(update(Part).where(Part.id == 2).values(price=Part.price + 1))
    s.get(Part, 4).name = "renamed"
    s.delete(s.get(Part, 5))
    s.commit()
    out["groups"] = [list(r) for r in s.execute(
        select(Part.active, func.count(), func.max(Part.name)).group_by(Part.active))]
    out["like_in"] = s.scalars(select(Part.name).where(Part.name.like("n%"))
        .where(Part.id.in_([1, 2, 3, 4, 5])).order_by(Part.id)).all()
    out["price"] = str(s.get(Part, 2).price)
    try:
        s.add(Part(name="x", price=decimal.Decimal("1.234")))
        s.commit()
    except Exception as e:
        out["refused"] = e.orig.args[0]
        s.rollback()
    out["count"] = s.scalar(select(func.count()).select_from(Part))
    out["created"] = isinstance(s.get(Part, 1).created, datetime.datetime)
insp = inspect(eng)
out["columns"] = [c["name"] for c in insp.get_columns("parts")]
out["indexes"] = [(i["name"], i["column_names"]) for i in insp.get_indexes("parts")]
print(json.dumps(out))
"#,
    );
    assert_eq!(out["get"], "n2", "{out}");
    assert_eq!(out["top"], json!(["n9", "n8", "n7"]), "{out}");
    assert_eq!(out["sum"], "11.25", "{out}");
    assert_eq!(out["groups"], json!([[true, 9, "renamed"]]), "{out}");
    assert_eq!(out["like_in"], json!(["n0", "n1", "n2"]), "{out}");
    assert_eq!(out["price"], "1.25", "{out}");
    // 1.234 in a DECIMAL(8, 2): refused, not rounded (MySQL's 1265, data
    // truncated); nothing written.
    assert_eq!(out["refused"], 1265, "{out}");
    assert_eq!(out["count"], 9, "{out}");
    assert_eq!(out["created"], true, "{out}");
    assert_eq!(
        out["columns"],
        json!(["id", "name", "price", "active", "created"])
    );
    assert_eq!(out["indexes"], json!([["ix_parts_name", ["name"]]]));

    let out = pymysql(
        &s,
        r#"
import datetime, decimal, os, tempfile
pymysql.install_as_MySQLdb()
app = tempfile.mkdtemp()
os.makedirs(f"{app}/shop")
open(f"{app}/shop/__init__.py", "w").close()
with open(f"{app}/shop/models.py", "w") as f:
    f.write("""
from django.db import models
class Product(models.Model):
    name = models.CharField(max_length=50, unique=True)
    price = models.DecimalField(max_digits=8, decimal_places=2)
    stock = models.IntegerField(default=0)
    added = models.DateTimeField(auto_now_add=True)
    class Meta:
        indexes = [models.Index(fields=["stock"], name="by_stock")]
""")
sys.path.insert(0, app)
from django.conf import settings
settings.configure(
    INSTALLED_APPS=["shop"], USE_TZ=True, TIME_ZONE="UTC",
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    DATABASES={"default": {"ENGINE": "django.db.backends.mysql", "NAME": "app",
        "USER": user, "PASSWORD": password, "HOST": host, "PORT": port}})
import django
django.setup()
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q, Sum
call_command("makemigrations", "shop", verbosity=0)
call_command("migrate", verbosity=0)
call_command("migrate", verbosity=0)  # nothing left to apply
from shop.models import Product
out = {}
for i in range(5):
    Product.objects.create(name=f"p{i}", price=decimal.Decimal(i) * 3 / 2, stock=i)
out["count"] = Product.objects.count()
out["ordered"] = list(Product.objects.filter(stock__gte=2).order_by("-price")
    .values_list("name", flat=True))
Product.objects.filter(name="p1").update(stock=F("stock") + 10)
out["stock"] = Product.objects.get(name="p1").stock
out["totals"] = Product.objects.aggregate(total=Sum("stock"), n=Count("id"))
out["either"] = sorted(Product.objects.filter(Q(stock__lt=1) | Q(name__startswith="p4"))
    .values_list("name", flat=True))
try:
    with transaction.atomic():
        Product.objects.create(name="p9", price=1, stock=1)
        Product.objects.create(name="p0", price=1, stock=1)
except IntegrityError as e:
    out["duplicate"] = e.args[0]
out["rolled_back"] = Product.objects.filter(name="p9").exists()
p = Product.objects.get(name="p2")
p.price = decimal.Decimal("99.5")
p.save()
out["saved"] = str(Product.objects.get(pk=p.pk).price)
out["by_stock"] = list(Product.objects.values("stock").annotate(c=Count("id"))
    .order_by("stock"))[:2]
added = [p.added for p in Product.objects.all()]
first = added[0]
out["by_year"] = [Product.objects.filter(added__year=first.year).count(),
    sum(a.year == first.year for a in added)]
out["by_day"] = [Product.objects.filter(added__month=first.month, added__day=first.day).count(),
    sum((a.month, a.day) == (first.month, first.day) for a in added)]
out["months"] = [[str(d) for d in Product.objects.dates("added", "month")],
    sorted({str(a.date().replace(day=1)) for a in added})]
out["regex"] = sorted(Product.objects.filter(name__regex=r"^p[13]$").values_list("name", flat=True))
out["iregex"] = Product.objects.filter(name__iregex=r"^P[0-2]$").count()
from django.db.migrations.recorder import MigrationRecorder
out["applied"] = list(MigrationRecorder.Migration.objects.values_list("app", "name"))
print(json.dumps(out))
"#,
    );
    assert_eq!(out["count"], 5, "{out}");
    assert_eq!(out["ordered"], json!(["p4", "p3", "p2"]), "{out}");
    assert_eq!(out["stock"], 11, "{out}");
    assert_eq!(out["totals"], json!({"total": 20, "n": 5}), "{out}");
    assert_eq!(out["either"], json!(["p0", "p4"]), "{out}");
    assert_eq!(out["duplicate"], 1062, "{out}");
    assert_eq!(out["rolled_back"], false, "{out}");
    assert_eq!(out["saved"], "99.50", "{out}");
    assert_eq!(
        out["by_stock"],
        json!([{"stock": 0, "c": 1}, {"stock": 2, "c": 1}]),
        "{out}"
    );
    // Date lookups (EXTRACT, DATE_FORMAT, CAST … AS DATE) against the
    // same dates read back.
    for lookup in ["by_year", "by_day", "months"] {
        assert_eq!(out[lookup][0], out[lookup][1], "{lookup}: {out}");
    }
    assert!(out["by_day"][0].as_i64() > Some(0), "{out}");
    assert_eq!(out["regex"], json!(["p1", "p3"]), "{out}");
    assert_eq!(out["iregex"], 3, "{out}");
    assert_eq!(out["applied"], json!([["shop", "0001_initial"]]), "{out}");
    let out = s.ok("SHOW INDEX FROM shop_product");
    assert!(out.contains("\tby_stock\t1\tstock"), "{out}");
    assert!(out.contains("\tname\t1\tname"), "{out}");
}

#[tokio::test]
async fn an_idle_connection_is_closed_and_a_busy_one_kept() {
    use sqlx::Connection;
    let s = setup(&["--idle-timeout", "1"]).await;
    let options = s.driver_options();
    let mut busy = sqlx::mysql::MySqlConnection::connect_with(&options)
        .await
        .unwrap();
    let mut idle = sqlx::mysql::MySqlConnection::connect_with(&options)
        .await
        .unwrap();
    // Commands closer together than the idle timeout, for three times as
    // long: the connection stays.
    for _ in 0..30 {
        busy.ping().await.unwrap();
        sqlx::query("SELECT 1").execute(&mut busy).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Meanwhile the other sent nothing: closed.
    assert!(idle.ping().await.is_err());
}

#[tokio::test]
async fn a_driver_prepares_and_executes_in_the_binary_protocol() {
    let s = setup(&[]).await;
    // sqlx's defaults: it sets sql_mode, time_zone and NAMES at connect,
    // and prepares every statement that has arguments.
    let options = s.driver_options();
    let mut conn = sqlx::mysql::MySqlConnection::connect_with(&options)
        .await
        .unwrap();
    for (id, name, qty, weight, tag) in [
        (1i64, "ann", 7u32, Some(0.5f64), Some(vec![0u8, 1, 255])),
        (2, "bob", 8, None, None),
        (-3, "cy", 0, Some(-1e10), Some(Vec::new())),
    ] {
        let done =
            sqlx::query("INSERT INTO items (id, name, qty, weight, tag) VALUES (?, ?, ?, ?, ?)")
                .bind(id)
                .bind(name)
                .bind(qty)
                .bind(weight)
                .bind(tag)
                .execute(&mut conn)
                .await
                .unwrap();
        assert_eq!(done.rows_affected(), 1);
    }
    for (id, name, qty, weight, tag) in [
        (1i64, "ann", 7u32, Some(0.5f64), Some(vec![0u8, 1, 255])),
        (2, "bob", 8, None, None),
        (-3, "cy", 0, Some(-1e10), Some(Vec::new())),
    ] {
        let row = sqlx::query("SELECT id, name, qty, weight, tag FROM items WHERE id = ?")
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(row.get::<i64, _>("id"), id);
        assert_eq!(row.get::<String, _>("name"), name);
        assert_eq!(row.get::<u32, _>("qty"), qty);
        assert_eq!(row.get::<Option<f64>, _>("weight"), weight);
        assert_eq!(row.get::<Option<Vec<u8>>, _>("tag"), tag);
    }
    // A list of keys in one request, as arguments.
    let names: Vec<String> = sqlx::query_scalar("SELECT name FROM items WHERE id IN (?, ?, ?)")
        .bind(2i64)
        .bind(1i64)
        .bind(404i64)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(names, ["ann", "bob"]);
    // An argument is a value, never SQL.
    let none: Option<String> = sqlx::query_scalar("SELECT name FROM items WHERE id = ?")
        .bind("1 OR 1=1")
        .fetch_optional(&mut conn)
        .await
        .map_or(None, |v| v);
    assert_eq!(none, None);
    let done = sqlx::query("UPDATE items SET name = ? WHERE id = ?")
        .bind("ann2")
        .bind(1i64)
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(done.rows_affected(), 1);
    let err = sqlx::query("INSERT INTO items (id, name) VALUES (?, ?)")
        .bind(1i64)
        .bind("dup")
        .execute(&mut conn)
        .await
        .unwrap_err();
    let db = err.as_database_error().expect("a server error");
    assert_eq!(db.code().as_deref(), Some("23000"), "{err}");
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM items WHERE qty < ?")
        .bind(100)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(count, 3);
    // A range, ORDER BY and LIMIT prepared once (sqlx keeps the statement)
    // and executed again with other arguments: each execute's answer is
    // the one its arguments written into the text would give.
    let range = "SELECT id FROM items WHERE id BETWEEN ? AND ? ORDER BY id DESC LIMIT ?";
    for (low, high, limit, want) in [
        (-5i64, 5i64, 10i64, vec![2i64, 1, -3]),
        (1, 2, 1, vec![2]),
        (3, -3, 5, vec![]),
        (-3, -3, 1, vec![-3]),
    ] {
        let ids: Vec<i64> = sqlx::query_scalar(range)
            .bind(low)
            .bind(high)
            .bind(limit)
            .fetch_all(&mut conn)
            .await
            .unwrap();
        assert_eq!(ids, want, "BETWEEN {low} AND {high} LIMIT {limit}");
    }
    let distinct = "SELECT DISTINCT qty FROM items WHERE id > ? AND name <> ? ORDER BY qty";
    for (after, not, want) in [(-10i64, "bob", vec![0u32, 7]), (0, "", vec![7, 8])] {
        let qty: Vec<u32> = sqlx::query_scalar(distinct)
            .bind(after)
            .bind(not)
            .fetch_all(&mut conn)
            .await
            .unwrap();
        assert_eq!(qty, want, "id > {after} AND name <> '{not}'");
    }
    // An argument stays a value there too.
    let err = sqlx::query_scalar::<_, i64>(range)
        .bind(1i64)
        .bind("2 OR 1=1")
        .bind(10i64)
        .fetch_all(&mut conn)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("1366"), "{err}");
    let rows = s.rest_rows().await;
    assert_eq!(rows[1]["name"], "ann2");
    assert_eq!(rows[1]["tag"], "AAH/");
    // A statement prepared once follows its table: emptied (made again),
    // the same statement reads the new table.
    let by_id = "SELECT name FROM items WHERE id = ?";
    let name: Option<String> = sqlx::query_scalar(by_id)
        .bind(1i64)
        .fetch_optional(&mut conn)
        .await
        .unwrap();
    assert_eq!(name.as_deref(), Some("ann2"));
    sqlx::raw_sql("TRUNCATE TABLE items")
        .execute(&mut conn)
        .await
        .unwrap();
    let name: Option<String> = sqlx::query_scalar(by_id)
        .bind(1i64)
        .fetch_optional(&mut conn)
        .await
        .unwrap();
    assert_eq!(name, None);
    sqlx::query("INSERT INTO items (id, name) VALUES (?, ?)")
        .bind(1i64)
        .bind("again")
        .execute(&mut conn)
        .await
        .unwrap();
    let name: Option<String> = sqlx::query_scalar(by_id)
        .bind(1i64)
        .fetch_optional(&mut conn)
        .await
        .unwrap();
    assert_eq!(name.as_deref(), Some("again"));
    // An argument of the wrong kind is refused, not read as another key.
    let err = sqlx::query_scalar::<_, String>(by_id)
        .bind("1x")
        .fetch_optional(&mut conn)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("1366"), "{err}");
    conn.close().await.unwrap();
}

#[tokio::test]
async fn tables_are_made_changed_and_dropped_in_sql() {
    let s = setup(&[]).await;
    let out = s.ok("CREATE TABLE orders (
           id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
           customer INT NOT NULL DEFAULT '7',
           note VARCHAR(100) DEFAULT 'none',
           total DECIMAL(10,2),
           code CHAR(8) NOT NULL,
           flag BOOLEAN NOT NULL DEFAULT FALSE,
           PRIMARY KEY (id),
           UNIQUE KEY by_code (code),
           KEY by_customer (customer, total)
         ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4");
    assert!(out.contains("Query OK, 0 rows affected"), "{out}");
    let out = s.ok("SHOW CREATE TABLE orders");
    for part in [
        "`id` bigint unsigned NOT NULL AUTO_INCREMENT",
        "`customer` int NOT NULL DEFAULT '7'",
        "`note` varchar(100) DEFAULT 'none'",
        "`total` decimal(10,2) DEFAULT NULL",
        "`flag` boolean NOT NULL DEFAULT '0'",
        "PRIMARY KEY (`id`)",
        "UNIQUE KEY `by_code` (`code`)",
        "KEY `by_customer` (`customer`, `total`)",
    ] {
        assert!(out.contains(part), "{part} in {out}");
    }
    // A key of two columns, looked up by every combination of the values
    // named for each (each once), NULL finding nothing.
    let out = s.ok(
        "CREATE TABLE pairs (a INT NOT NULL, b INT NOT NULL, v VARCHAR(10), PRIMARY KEY (a, b)); \
         INSERT INTO pairs VALUES (1, 3, 'x'), (1, 4, 'y'), (2, 3, 'z'), (2, 4, 'w'); \
         SELECT v FROM pairs WHERE a IN (2, 1) AND b = 3; \
         SELECT v FROM pairs WHERE a = 1 AND b IN (4, 3, 4); \
         SELECT COUNT(*) FROM pairs WHERE a IN (1, 2, 1) AND b IN (3, 4); \
         SELECT v FROM pairs WHERE a = NULL AND b = 3; \
         SELECT v FROM pairs WHERE b = 4 AND a = 2; DROP TABLE pairs",
    );
    assert_eq!(lines(&out)[..], ["x", "z", "x", "y", "4", "w"], "{out}");
    // Rows found by IN lists come in key order, each once, whatever order
    // the values are named in: signed and unsigned integers, text.
    let out = s.ok(
        "CREATE TABLE pairs (a INT NOT NULL, b INT NOT NULL, PRIMARY KEY (a, b)); \
         INSERT INTO pairs VALUES (-7, 3), (1, 3), (1, 4), (2, 3), (2, 4); \
         SELECT a, b FROM pairs WHERE a IN (2, 1, -7, 2, -1) AND b IN (4, 3); DROP TABLE pairs; \
         CREATE TABLE big (id BIGINT UNSIGNED PRIMARY KEY); \
         INSERT INTO big VALUES (18446744073709551615), (1), (5); \
         SELECT id FROM big WHERE id IN (18446744073709551615, 5, 1, 5); DROP TABLE big; \
         CREATE TABLE names (n VARCHAR(10) PRIMARY KEY); \
         INSERT INTO names VALUES ('b'), ('a'), ('c'), ('B'); \
         SELECT n FROM names WHERE n IN ('c', 'a', NULL, 'c', 'B'); DROP TABLE names",
    );
    assert_eq!(
        lines(&out)[..],
        [
            "-7\t3",
            "1\t3",
            "1\t4",
            "2\t3",
            "2\t4",
            "1",
            "5",
            "18446744073709551615",
            "B",
            "a",
            "c"
        ],
        "{out}"
    );
    // AUTO_INCREMENT: one past the largest, in row order, NULL and 0 too;
    // an explicit value moves it on.
    let out = s.ok(
        "INSERT INTO orders (code) VALUES ('a'), ('b'); SELECT LAST_INSERT_ID();
         INSERT INTO orders (id, code) VALUES (NULL, 'c'), (0, 'd'), (10, 'e');
         INSERT INTO orders (code) VALUES ('f');
         SELECT id, code, customer, note, flag FROM orders WHERE id IN (1, 2, 3, 4, 10, 11)",
    );
    assert_eq!(
        lines(&out)[..],
        [
            "1",
            "1\ta\t7\tnone\t0",
            "2\tb\t7\tnone\t0",
            "3\tc\t7\tnone\t0",
            "4\td\t7\tnone\t0",
            "10\te\t7\tnone\t0",
            "11\tf\t7\tnone\t0",
        ],
        "{out}"
    );
    // SHOW CREATE TABLE writes what makes the same table again: defaults
    // with quotes and backslashes, bytes, booleans, timestamps.
    s.ok(
        r"CREATE TABLE odd (id INT PRIMARY KEY, t VARCHAR(8) NOT NULL DEFAULT 'a\\b''c',
         b VARBINARY(4) DEFAULT 0x00ff0a, e VARBINARY(2) NOT NULL DEFAULT '', f BOOL DEFAULT TRUE,
         ts TIMESTAMP(3) NULL, d DATE DEFAULT '2020-01-02')",
    );
    let create = s.ok("SHOW CREATE TABLE odd");
    for part in [
        "`b` varbinary(4) DEFAULT 0x00FF0A",
        "`e` varbinary(2) NOT NULL DEFAULT ''",
        "`f` boolean DEFAULT '1'",
        "`ts` timestamp(3) NULL DEFAULT NULL",
        "`d` date DEFAULT '2020-01-02'",
    ] {
        assert!(create.contains(part), "{part} in {create}");
    }
    let create = pymysql(
        &s,
        r#"
cur = connect().cursor()
cur.execute("SHOW CREATE TABLE odd")
sql = cur.fetchone()[1]
cur.execute(sql.replace("`odd`", "`odd2`", 1))
cur.execute("SHOW CREATE TABLE odd2")
again = cur.fetchone()[1]
cur.execute("INSERT INTO odd2 (id) VALUES (1)")
cur.execute("SELECT t, b, e, f, ts, d FROM odd2")
print(json.dumps({"same": again == sql.replace("`odd`", "`odd2`", 1),
                  "t": [l.strip() for l in sql.splitlines() if "`t`" in l],
                  "row": [str(v) for v in cur.fetchone()]}))
"#,
    );
    assert_eq!(create["same"], json!(true), "{create}");
    assert_eq!(
        create["t"],
        json!([r"`t` varchar(8) NOT NULL DEFAULT 'a\\b\'c',"]),
        "escaped as MySQL escapes"
    );
    assert_eq!(
        create["row"],
        json!([r"a\b'c", r"b'\x00\xff\n'", "b''", "1", "None", "2020-01-02"]),
        "{create}"
    );
    let out = s.ok("SHOW COLUMNS FROM odd");
    assert!(out.contains("b\tvarbinary(4)\tYES\t\t0x00FF0A"), "{out}");
    assert!(out.contains("f\ttinyint(1)\tYES\t\t1"), "{out}");
    s.ok("DROP TABLE odd; DROP TABLE odd2");
    // The unique index holds, and the refusal names its values.
    let err = s.refused("INSERT INTO orders (code) VALUES ('a')", "1062 (23000)");
    assert!(
        err.ends_with("Duplicate entry 'a' for key 'orders.by_code'\n"),
        "{err}"
    );
    // Indexes made and dropped online.
    s.ok("CREATE INDEX by_note ON orders (note)");
    s.refused("CREATE INDEX by_note ON orders (code)", "1061 (42000)");
    let err = s.refused(
        "CREATE UNIQUE INDEX by_customer2 ON orders (customer)",
        "1062",
    );
    assert!(
        err.contains("Duplicate entry '7' for key 'orders.by_customer2'"),
        "{err}"
    );
    let out = s.ok("SHOW INDEX FROM orders");
    assert!(out.contains("\tby_note\t1\tnote"), "{out}");
    s.ok("DROP INDEX by_note ON orders");
    s.refused("DROP INDEX by_note ON orders", "1091 (42000)");
    // ALTER TABLE's forms of the same, as migration tools write them.
    s.ok("ALTER TABLE orders ADD INDEX by_note (note), ALGORITHM=INPLACE, LOCK=NONE");
    s.ok("ALTER TABLE orders ADD KEY (customer)");
    let out = s.ok("SHOW INDEX FROM orders");
    assert!(out.contains("\tby_note\t1\tnote"), "{out}");
    assert!(out.contains("\tcustomer\t1\tcustomer"), "{out}");
    let out = s.ok("EXPLAIN SELECT code FROM orders WHERE note = 'x'");
    assert!(out.contains("by_note"), "the new index is used: {out}");
    s.refused(
        "ALTER TABLE orders ADD INDEX by_note (code)",
        "1061 (42000)",
    );
    s.refused(
        "ALTER TABLE orders ADD CONSTRAINT by_customer2 UNIQUE (customer)",
        "1062",
    );
    s.ok("ALTER TABLE orders DROP INDEX by_note");
    s.ok("ALTER TABLE orders DROP KEY customer");
    s.refused("ALTER TABLE orders DROP INDEX by_note", "1091 (42000)");
    s.refused("ALTER TABLE nosuch ADD INDEX i (note)", "1146");
    s.refused_with(
        &s.reader,
        Some("app"),
        b"ALTER TABLE orders ADD INDEX by_note (note)",
        "1142",
    );
    // What ALTER TABLE cannot do is refused by name, and nothing changes:
    // two changes in one statement are neither made.
    let before = s.ok("SHOW CREATE TABLE orders");
    for (sql, named) in [
        ("ALTER TABLE orders ADD COLUMN extra INT", "ADD COLUMN"),
        ("ALTER TABLE orders DROP COLUMN note", "DROP COLUMN"),
        ("ALTER TABLE orders RENAME TO orders2", "RENAME TO"),
        ("ALTER TABLE orders DROP PRIMARY KEY", "primary key"),
        (
            "ALTER TABLE orders ADD INDEX a (note), ADD INDEX b (customer)",
            "several changes",
        ),
        (
            "ALTER TABLE orders ADD INDEX a (note), ALGORITHM=INSTANT",
            "ALGORITHM=INSTANT",
        ),
        (
            "ALTER TABLE orders ADD INDEX a (note), LOCK=EXCLUSIVE",
            "LOCK=EXCLUSIVE",
        ),
        (
            "ALTER TABLE orders ADD FOREIGN KEY (customer) REFERENCES items (id)",
            "FOREIGN KEY",
        ),
    ] {
        let err = s.refused(sql, "1235");
        assert!(err.contains(named), "{sql}: {err}");
    }
    assert_eq!(s.ok("SHOW CREATE TABLE orders"), before);
    // TRUNCATE empties the table and starts AUTO_INCREMENT over.
    s.ok("TRUNCATE TABLE orders");
    let out = s.ok("SELECT COUNT(*) FROM orders; INSERT INTO orders (code) VALUES ('z'); SELECT LAST_INSERT_ID()");
    assert_eq!(lines(&out)[..], ["0", "1"], "{out}");
    // What cannot be made is refused, and nothing is made.
    s.refused("CREATE TABLE orders (id INT PRIMARY KEY)", "1050 (42S01)");
    s.ok("CREATE TABLE IF NOT EXISTS orders (id INT PRIMARY KEY)");
    s.refused("CREATE TABLE nokey (a INT)", "1173");
    s.refused("CREATE TABLE t2 (id INT PRIMARY KEY, b TEXT)", "1235");
    s.refused(
        "CREATE TABLE t2 (id INT PRIMARY KEY, b INT DEFAULT 'x')",
        "1067",
    );
    s.refused(
        "CREATE TABLE t2 (id INT PRIMARY KEY, b CHAR(2) DEFAULT 'abc')",
        "1067",
    );
    s.refused(
        "CREATE TABLE t2 (id INT PRIMARY KEY, b TINYINT DEFAULT 300)",
        "1067",
    );
    s.refused(
        "CREATE TABLE t2 (id INT PRIMARY KEY, b INT, FOREIGN KEY (b) REFERENCES orders (id))",
        "1235",
    );
    s.refused(
        "CREATE TABLE t2 (id INT PRIMARY KEY) ENGINE = MyISAM",
        "1235",
    );
    s.refused(
        "CREATE TABLE t2 (id VARCHAR(10) AUTO_INCREMENT PRIMARY KEY)",
        "1105",
    );
    s.refused("CREATE TEMPORARY TABLE t2 (id INT PRIMARY KEY)", "1235");
    s.refused("CREATE TABLE t2 AS SELECT 1", "1235");
    // A read key changes no schema.
    s.refused_with(
        &s.reader,
        Some("app"),
        b"CREATE TABLE t3 (id INT PRIMARY KEY)",
        "1142",
    );
    s.refused_with(&s.reader, Some("app"), b"DROP TABLE orders", "1142");
    s.refused_with(&s.key, Some("app"), b"DROP TABLE theirs.items", "1044");
    let out = s.ok("SHOW TABLES");
    assert_eq!(lines(&out)[..], ["items", "orders"], "{out}");
    s.ok("DROP TABLE orders");
    s.refused("DROP TABLE orders", "1051 (42S02)");
    s.ok("DROP TABLE IF EXISTS orders");
    let out = s.ok("SHOW TABLES");
    assert_eq!(lines(&out)[..], ["items"], "{out}");
}

#[tokio::test]
async fn rows_are_found_by_ranges_and_scans_and_changed_by_where() {
    let s = setup(&[]).await;
    let mut values = Vec::new();
    for id in 1..=300 {
        let name = format!("n{}", id % 7);
        let price = if id % 10 == 0 {
            "NULL".to_owned()
        } else {
            format!("{}.{:02}", id / 3, id % 100)
        };
        values.push(format!("({id}, '{name}', {}, {price})", id % 13));
    }
    s.ok(&format!(
        "INSERT INTO items (id, name, qty, price) VALUES {}",
        values.join(", ")
    ));
    s.ok("CREATE INDEX by_qty ON items (qty)");
    // A range of the primary key, in key order; ORDER BY, DISTINCT, LIMIT.
    let out = s.ok("SELECT id FROM items WHERE id BETWEEN 10 AND 14");
    assert_eq!(lines(&out)[..], ["10", "11", "12", "13", "14"], "{out}");
    let out = s.ok("SELECT id, name FROM items WHERE id > 295 ORDER BY name DESC, id");
    assert_eq!(
        lines(&out)[..],
        ["300\tn6", "299\tn5", "298\tn4", "297\tn3", "296\tn2"],
        "{out}"
    );
    // ORDER BY an output's alias, or its position; an alias wins over a
    // column of the same name, as in MySQL.
    let out = s.ok("SELECT name AS n, id AS name FROM items WHERE id > 297 ORDER BY name DESC; SELECT *, id AS k FROM items WHERE id > 298 ORDER BY k DESC; SELECT name, id FROM items WHERE id > 297 ORDER BY 2 DESC");
    assert_eq!(
        lines(&out)
            .iter()
            .map(|l| l.split('\t').next().unwrap())
            .collect::<Vec<_>>(),
        ["n6", "n5", "n4", "300", "299", "n6", "n5", "n4"],
        "{out}"
    );
    s.refused("SELECT name FROM items ORDER BY 2", "1054");
    let out = s.ok("SELECT DISTINCT name FROM items WHERE id BETWEEN 1 AND 100 ORDER BY name");
    assert_eq!(
        lines(&out)[..],
        ["n0", "n1", "n2", "n3", "n4", "n5", "n6"],
        "{out}"
    );
    let out = s.ok("SELECT id FROM items WHERE id >= 100 LIMIT 3 OFFSET 1");
    assert_eq!(lines(&out)[..], ["101", "102", "103"], "{out}");
    // A range of a secondary index, the rest of the WHERE checked per row;
    // a full scan where nothing bounds an index; NULL never compares.
    let out = s.ok("SELECT id FROM items WHERE qty = 5 AND id < 60 AND name <> 'n4'");
    assert_eq!(lines(&out)[..], ["5", "31", "44", "57"], "{out}");
    let out = s.ok("SELECT id FROM items WHERE name = 'n3' AND (id < 20 OR id > 290) ORDER BY id");
    assert_eq!(lines(&out)[..], ["3", "10", "17", "297"], "{out}");
    let out = s.ok("SELECT COUNT(*) FROM items WHERE price IS NULL");
    assert_eq!(lines(&out)[..], ["30"], "{out}");
    let out = s.ok("SELECT id FROM items WHERE price > 99 AND id < 300 ORDER BY id DESC LIMIT 2");
    assert_eq!(lines(&out)[..], ["299", "298"], "{out}");
    let out = s
        .ok("SELECT id FROM items WHERE id NOT BETWEEN 3 AND 299 AND qty IN (1, 2, 3) ORDER BY id");
    assert_eq!(lines(&out)[..], ["1", "2", "300"], "{out}");

    // UPDATE computed from the row, by a scan; affected = rows changed.
    let out = s.ok("UPDATE items SET qty = qty + 100 WHERE qty = 12");
    assert!(out.contains("23 rows affected"), "{out}");
    assert!(out.contains("Rows matched: 23  Changed: 23"), "{out}");
    let out = s.ok("UPDATE items SET name = 'same' WHERE id = 1; UPDATE items SET name = 'same' WHERE id IN (1, 2)");
    assert!(out.contains("Rows matched: 2  Changed: 1"), "{out}");
    let out = s.ok("SELECT COUNT(*) FROM items WHERE qty >= 100");
    assert_eq!(lines(&out)[..], ["23"], "{out}");
    let out = s.ok("DELETE FROM items WHERE qty >= 100 OR price IS NULL");
    assert!(out.contains("51 rows affected"), "{out}");
    let rows = s.rest_rows().await;
    assert_eq!(rows.len(), 249);
    assert!(
        rows.iter()
            .all(|r| r["qty"].as_i64().unwrap() < 100 && !r["price"].is_null())
    );
    // A scan that would take more rows than a statement may is refused
    // before it changes anything: shown with a small table, the bound
    // itself is 100,000 rows.
    s.refused("SELECT * FROM items WHERE id = 'x'", "1366");
    s.refused(
        &format!(
            "SELECT id FROM items WHERE qty IN ({})",
            vec!["1"; 10_001].join(",")
        ),
        "1105",
    );
}

#[tokio::test]
async fn ndbinfo_is_queried_in_sql_and_shows_only_the_keys_databases() {
    let s = setup(&[]).await;
    s.ok("INSERT INTO items (id, name) VALUES (1, 'one'), (2, 'two')");
    let out = s
        .ok("SELECT database_name, table_name FROM ndbinfo.table_memory_usage ORDER BY table_name");
    assert_eq!(
        lines(&out)[..],
        ["app\titems"],
        "only the key's database: {out}"
    );
    let out = s.ok(
        "SELECT database_name FROM ndbinfo.database_memory_usage WHERE database_name = 'theirs'",
    );
    assert!(
        lines(&out).is_empty(),
        "another tenant's rows are not shown: {out}"
    );
    // The same figure the node reports to its operators.
    let out = s.ok(
        "SELECT in_memory_bytes FROM ndbinfo.database_memory_usage WHERE database_name = 'app'",
    );
    let all = s.shoal.ndbinfo("database_memory_usage").await;
    let app = all["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0] == "app")
        .unwrap();
    assert_eq!(lines(&out)[..], [app[1].to_string().as_str()], "{out}");
    // Typed as RonDB types them, BIGINT UNSIGNED: a driver reads a u64.
    let mut conn = sqlx::mysql::MySqlConnection::connect_with(&s.driver_options())
        .await
        .unwrap();
    let (bytes, free): (u64, u64) = sqlx::query_as(
        "SELECT in_memory_bytes, free_in_memory_bytes FROM ndbinfo.table_memory_usage \
         WHERE table_name = ?",
    )
    .bind("items")
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(bytes > 0 && free < bytes, "{bytes} {free}");
    conn.close().await.unwrap();
    let out = s.ok("SELECT database_name, in_memory_quota FROM ndbinfo.database_quota_usage");
    assert_eq!(lines(&out)[..], ["app\tNULL"], "{out}");
    let out = s.ok("SELECT DISTINCT database_name FROM ndbinfo.table_usage WHERE write_units >= 1");
    assert_eq!(lines(&out)[..], ["app"], "{out}");
    // A read key reads them too; node-wide tables are the operators'.
    let ran = s.mysql_with(
        &s.reader,
        Some("app"),
        b"SELECT COUNT(*) FROM items; SELECT table_name FROM ndbinfo.table_usage",
    );
    assert!(ran.ok, "{}", ran.err);
    s.refused("SELECT * FROM ndbinfo.memoryusage", "1142");
    s.refused("SELECT * FROM ndbinfo.nodes", "1142");
    s.refused("SELECT * FROM ndbinfo.nope", "1146");
    s.refused("SELECT nope FROM ndbinfo.table_usage", "1054");
    s.refused(
        "SELECT SUM(in_memory_bytes) FROM ndbinfo.table_memory_usage",
        "1235",
    );
}

/// sysbench's own `prepare` (CREATE TABLE, bulk INSERT, CREATE INDEX) and
/// its OLTP tests (prepared statements, transactions, range scans, updates
/// computed from the row), unchanged, a fixed number of events at 1, 4
/// and 16 threads: every one commits.
#[tokio::test]
async fn sysbench_prepares_and_runs_its_oltp_tests_unchanged() {
    // Its worker spins for the next request, as a node with cores of its
    // own is run (and bench-sysbench's PIN=1): every statement, commit and
    // lock wait below is served by a spinning worker as by a sleeping one.
    let s = setup(&["--spin-us", "50"]).await;
    let (host, port) = s.host_port();
    let (user, secret) = s.key.split_once('.').unwrap();
    let sysbench = |test: &str, command: &str, threads: &str, events: &str| {
        let output = Command::new("sysbench")
            .args([
                test,
                "--db-driver=mysql",
                &format!("--mysql-host={host}"),
                &format!("--mysql-port={port}"),
                &format!("--mysql-user={user}"),
                &format!("--mysql-password={secret}"),
                "--mysql-db=app",
                "--tables=2",
                "--table-size=2000",
                &format!("--threads={threads}"),
                &format!("--events={events}"),
                "--time=0",
                command,
            ])
            .output()
            .expect("sysbench runs (apt: sysbench)");
        let out = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{out} {}",
            String::from_utf8_lossy(&output.stderr)
        );
        out
    };
    sysbench("oltp_point_select", "prepare", "1", "0");
    let out = s.ok("SELECT COUNT(*), MIN(id), MAX(id) FROM sbtest2; SHOW INDEX FROM sbtest1");
    assert!(out.contains("2000\t1\t2000"), "{out}");
    assert!(out.contains("\tk_1\t1\tk"), "{out}");
    for (test, events) in [
        ("oltp_point_select", "4000"),
        ("oltp_read_only", "200"),
        ("oltp_read_write", "200"),
        ("oltp_write_only", "200"),
    ] {
        for threads in ["1", "4", "16"] {
            let out = sysbench(test, "run", threads, events);
            assert!(
                out.contains(&format!("transactions:{}{events} ", " ".repeat(24))),
                "{test} at {threads} threads: {out}"
            );
            // Reads never wait, so nothing is retried; writers of the
            // same rows in other orders can wait for each other, and a
            // lock-wait timeout (1205) ends that: sysbench retries those,
            // and would stop at any other error.
            if !test.contains("write") {
                assert!(
                    out.contains("ignored errors:                      0 "),
                    "{test} at {threads} threads: {out}"
                );
            }
        }
    }
    // What the writes left: every row still there (each event deletes an
    // id and inserts it again, in one transaction).
    let out = s.ok("SELECT COUNT(*), MIN(id), MAX(id) FROM sbtest1");
    assert!(out.contains("2000\t1\t2000"), "{out}");
    sysbench("oltp_point_select", "cleanup", "1", "0");
    let out = s.ok("SHOW TABLES");
    assert_eq!(lines(&out)[..], ["items"], "{out}");
}

/// With a control plane, SQL's changes of schema are made there, on the
/// key: the console's API sees a table made in SQL and SQL sees one made
/// in the console, the tenant's table quota holds, and the audit log
/// names the key.
#[tokio::test]
async fn schema_changes_in_sql_are_the_control_planes() {
    use common::control::{Auth, Backend, CLUSTER_SECRET, Control, eventually};
    use reqwest::Method;
    let cp = Control::start_with(
        Backend::Sqlite,
        &[
            "--cluster-secret",
            CLUSTER_SECRET,
            "--plan-quota",
            r#"{"max_tables": 2}"#,
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let node = cp.data_node(dir.path(), &[]);
    let ada = cp.signup("ada@example.com", "analytical").await;
    let bearer = Auth::Bearer(&ada.token);
    eventually("the node registers", || async {
        let (status, _, _) = cp
            .call(
                Method::POST,
                "/databases",
                Some(&json!({"name": "shop"})),
                bearer,
            )
            .await;
        (status == StatusCode::CREATED).then_some(())
    })
    .await;
    let (status, _, _) = cp
        .call(
            Method::POST,
            "/databases/shop/tables",
            Some(&common::control::orders()),
            bearer,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let grants = json!({"name": "sql", "grants": [{"database": "shop", "role": "read_write"}]});
    let (status, _, made) = cp
        .call(Method::POST, "/api-keys", Some(&grants), bearer)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let key = made["key"].as_str().unwrap().to_owned();
    // Where SQL is served, as the API tells the tenant.
    let (_, _, db) = cp.call(Method::GET, "/databases/shop", None, bearer).await;
    assert_eq!(db["mysql_addr"], node.mysql_addr.as_str(), "{db}");
    let run = |sql: &str| mysql_at(&node.mysql_addr, &key, Some("shop"), sql.as_bytes());

    // The console's table, in SQL.
    let ran = run("SHOW TABLES; INSERT INTO orders (id, note) VALUES (1, 'from sql')");
    assert!(ran.ok, "{}", ran.err);
    assert_eq!(lines(&ran.out), ["orders"], "{}", ran.out);
    // SQL's table, in the console's API.
    let ran = run(
        "CREATE TABLE items (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20) NOT NULL DEFAULT 'x')",
    );
    assert!(ran.ok, "{}", ran.err);
    let (status, _, tables) = cp
        .call(Method::GET, "/databases/shop/tables", None, bearer)
        .await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = (tables["tables"].as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["items", "orders"], "{tables}");
    let items = &tables["tables"][0];
    assert_eq!(items["columns"][0]["auto_increment"], true, "{items}");
    assert_eq!(items["columns"][1]["default"], "x", "{items}");
    // Made on the node too: rows go in.
    let ran = run(
        "INSERT INTO items (name) VALUES ('a'), ('b'); SELECT id, name FROM items WHERE id IN (1, 2)",
    );
    assert!(ran.ok, "{}", ran.err);
    assert_eq!(lines(&ran.out), ["1\ta", "2\tb"], "{}", ran.out);
    // The tenant's quota: two tables.
    let ran = run("CREATE TABLE third (id INT PRIMARY KEY)");
    assert!(!ran.ok && ran.err.contains("ERROR 1296"), "{}", ran.err);
    assert!(ran.err.contains("tables"), "{}", ran.err);
    // An index made in SQL is in the definition: by CREATE INDEX, or by
    // ALTER TABLE.
    let ran = run(
        "CREATE INDEX by_name ON items (name); ALTER TABLE items DROP INDEX by_name; \
         ALTER TABLE items ADD INDEX by_name (name)",
    );
    assert!(ran.ok, "{}", ran.err);
    let ran = run("ALTER TABLE nosuch ADD INDEX by_name (name)");
    assert!(!ran.ok && ran.err.contains("ERROR 1146"), "{}", ran.err);
    let (_, _, tables) = cp
        .call(Method::GET, "/databases/shop/tables", None, bearer)
        .await;
    assert_eq!(
        tables["tables"][0]["indexes"][0]["name"], "by_name",
        "{tables}"
    );
    // Dropped in SQL, gone from the console.
    let ran = run("DROP TABLE items");
    assert!(ran.ok, "{}", ran.err);
    let (_, _, tables) = cp
        .call(Method::GET, "/databases/shop/tables", None, bearer)
        .await;
    assert_eq!(tables["tables"].as_array().unwrap().len(), 1, "{tables}");
    // The tenant's audit log names the key.
    let (status, _, audit) = cp.call(Method::GET, "/audit", None, bearer).await;
    assert_eq!(status, StatusCode::OK);
    let prefix = key.split_once('.').unwrap().0;
    let by_key: Vec<&str> = (audit["entries"].as_array().unwrap().iter())
        .filter(|e| e["actor"]["id"] == format!("api_key:{prefix}"))
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        by_key,
        [
            "table.drop",
            "index.create",
            "index.drop",
            "index.create",
            "table.create"
        ],
        "{audit}"
    );
    // A revoked key changes nothing more: the node refuses it at once.
    let (status, _, _) = cp
        .call(Method::DELETE, &format!("/api-keys/{prefix}"), None, bearer)
        .await;
    assert!(status.is_success());
    eventually("the node drops the key", || async {
        let ran = run("SELECT 1");
        (!ran.ok && ran.err.contains("ERROR 1045")).then_some(())
    })
    .await;
}

/// What every `pymysql` script starts with: the node's address and the
/// key, `connect(**kw)` to database `app`, and `code(f)`: the MySQL error
/// `[number, message]` that `f()` raised, or None.
const PYMYSQL_PRELUDE: &str = r#"
import json, socket, sys, threading, time, pymysql
host, port, user, password = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def connect(**kw):
    return pymysql.connect(host=host, port=port, user=user, password=password, database="app", **kw)
def code(f):
    try:
        f()
        return None
    except pymysql.err.MySQLError as e:
        return [e.args[0], e.args[1]]
def at_once(sql, args_of, clients=4, times=20):
    # `clients` connections in autocommit run `sql` `times` times each, all
    # at once, with arguments args_of(client, i): the errors they got.
    errors = []
    def run(t):
        d = connect(autocommit=True)
        for i in range(times):
            e = code(lambda: d.cursor().execute(sql, args_of(t, i)))
            if e:
                errors.append(e)
        d.close()
    threads = [threading.Thread(target=run, args=(t,)) for t in range(clients)]
    for t in threads: t.start()
    for t in threads: t.join(60)
    return errors
"#;

/// Runs a Python script with Debian's Python, which python3-pymysql is
/// for, after `PYMYSQL_PRELUDE`, given the node's host and port and the
/// key's prefix and secret: its JSON output.
fn pymysql(s: &Setup, script: &str) -> Value {
    let (host, port) = s.host_port();
    let (user, secret) = s.key.split_once('.').unwrap();
    let script = format!("{PYMYSQL_PRELUDE}{script}");
    let output = Command::new("/usr/bin/python3")
        .args(["-c", &script, host, port, user, secret])
        .output()
        .expect("python3 runs (apt: python3-pymysql)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test]
async fn scans_inside_a_transaction_see_its_own_changes_and_no_one_else_does() {
    let s = setup(&[]).await;
    s.ok(
        "CREATE TABLE stock (id INT PRIMARY KEY, sku VARCHAR(10) NOT NULL, \
          qty INT NOT NULL, note CHAR(8), INDEX by_qty (qty))",
    );
    s.ok("INSERT INTO stock (id, sku, qty) VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30), (4, 'd', 40)");
    let script = r#"
out = {}
a, b = connect(), connect(autocommit=True)
ca, cb = a.cursor(), b.cursor()
def rows(c, sql):
    c.execute(sql)
    return [[int(v) if v is not None else None for v in r] for r in c.fetchall()]
def views(name):
    # Ranges of the primary key and of an index (where row 1 moved),
    # every row, and aggregates over a range and over every row.
    for who, c in (("mine", ca), ("theirs", cb)):
        out[f"{name}_{who}"] = {
            "by_id": rows(c, "SELECT id, qty FROM stock WHERE id BETWEEN 1 AND 9"),
            "by_qty": rows(c, "SELECT id, qty FROM stock WHERE qty >= 5 ORDER BY qty"),
            "all": rows(c, "SELECT id FROM stock WHERE sku <> 'zz' ORDER BY id"),
            "sum_range": rows(c, "SELECT COUNT(*), SUM(qty) FROM stock WHERE qty BETWEEN 5 AND 100"),
            "sum_all": rows(c, "SELECT COUNT(*), SUM(qty) FROM stock"),
        }
ca.execute("INSERT INTO stock (id, sku, qty) VALUES (5, 'e', 25)")
ca.execute("UPDATE stock SET qty = 35 WHERE id = 1")
ca.execute("DELETE FROM stock WHERE id = 3")
views("changed")
# Writes that find their rows by a scan see the transaction's rows too.
out["update_scan"] = ca.execute("UPDATE stock SET qty = qty + 1 WHERE qty >= 30")
out["delete_scan"] = ca.execute("DELETE FROM stock WHERE qty < 22")
views("scanned")
a.rollback()
views("rolled_back")
ca.execute("INSERT INTO stock (id, sku, qty) VALUES (6, 'f', 60)")
a.commit()
out["committed"] = rows(cb, "SELECT id FROM stock WHERE qty > 50")
print(json.dumps(out))
"#;
    let out = pymysql(&s, script);
    let committed = json!({
        "by_id": [[1, 10], [2, 20], [3, 30], [4, 40]],
        "by_qty": [[1, 10], [2, 20], [3, 30], [4, 40]],
        "all": [[1], [2], [3], [4]],
        "sum_range": [[4, 100]],
        "sum_all": [[4, 100]],
    });
    assert_eq!(
        out["changed_mine"],
        json!({
            "by_id": [[1, 35], [2, 20], [4, 40], [5, 25]],
            "by_qty": [[2, 20], [5, 25], [1, 35], [4, 40]],
            "all": [[1], [2], [4], [5]],
            "sum_range": [[4, 120]],
            "sum_all": [[4, 120]],
        })
    );
    assert_eq!(out["changed_theirs"], committed);
    assert_eq!(out["update_scan"], 2);
    assert_eq!(out["delete_scan"], 1);
    assert_eq!(
        out["scanned_mine"],
        json!({
            "by_id": [[1, 36], [4, 41], [5, 25]],
            "by_qty": [[5, 25], [1, 36], [4, 41]],
            "all": [[1], [4], [5]],
            "sum_range": [[3, 102]],
            "sum_all": [[3, 102]],
        })
    );
    assert_eq!(out["scanned_theirs"], committed);
    assert_eq!(out["rolled_back_mine"], committed);
    assert_eq!(out["rolled_back_theirs"], committed);
    assert_eq!(out["committed"], json!([[6]]));
}

#[tokio::test]
async fn integer_constants_are_worked_out_as_mysql_does() {
    let s = setup(&[]).await;
    // In values, keys, ranges and IN lists alike.
    s.ok("INSERT INTO items (id, name, qty) VALUES (2 * 3, 'six', 10 - 4), (1 + 1, 'two', +2 * -(-1))");
    let out = s.ok("SELECT id, qty FROM items WHERE id BETWEEN 3 - 2 AND 2 * 3 ORDER BY id");
    assert_eq!(lines(&out), ["2\t2", "6\t6"], "{out}");
    let out = s.ok("SELECT name FROM items WHERE id = 4 + 2");
    assert_eq!(lines(&out), ["six"], "{out}");
    let out = s.ok("SELECT name FROM items WHERE id IN (1 + 1, 7) AND qty > 1 - 1");
    assert_eq!(lines(&out), ["two"], "{out}");
    let out = s.ok("SELECT COUNT(*) FROM items WHERE id = NULL + 1");
    assert_eq!(lines(&out), ["0"], "{out}");
    // Past BIGINT (or BIGINT UNSIGNED, once an operand is): 1690, as in
    // MySQL; nothing is inserted.
    let err = s.refused(
        "INSERT INTO items (id, name) VALUES (9223372036854775807 + 1, 'x')",
        "1690 (22003)",
    );
    assert!(err.contains("BIGINT value is out of range"), "{err}");
    s.refused(
        "SELECT * FROM items WHERE id = 18446744073709551615 * 2",
        "1690",
    );
    s.refused(
        "SELECT * FROM items WHERE id = 18446744073709551615 - 18446744073709551615 - 1",
        "1690",
    );
    // Decimals and division are worked out on each row, exactly.
    let out = s.ok("SELECT name FROM items WHERE id = 4 / 2");
    assert_eq!(lines(&out), ["two"], "{out}");
    let out = s.ok("SELECT COUNT(*) FROM items WHERE id = 1.5 + 1");
    assert_eq!(lines(&out), ["0"], "{out}");
    // A string constant in arithmetic is the number it spells, exactly, as
    // drivers that send every argument as a string need (`qty + ?` with
    // '4'); one that spells no number is refused, never read as 0, and a
    // text column is not a number.
    let out = s.ok("SELECT name FROM items WHERE id = '1' + 1");
    assert_eq!(lines(&out), ["two"], "{out}");
    let out = s.ok("SELECT '1.5' + 1, '2' * '3', ' -1e1 ' + 0, 7 - '2', -'3'");
    assert_eq!(lines(&out), ["2.5\t6\t-10\t5\t-3"], "{out}");
    let out =
        s.ok("UPDATE items SET qty = qty + '4' WHERE id = 2; SELECT qty FROM items WHERE id = 2");
    assert_eq!(lines(&out).last(), Some(&"6"), "{out}");
    for (sql, says) in [
        ("SELECT 'abc' + 1", "'abc' is not a number"),
        ("UPDATE items SET qty = qty + '4x'", "'4x' is not a number"),
        ("SELECT name + 1 FROM items", "not arithmetic on numbers"),
    ] {
        let err = s.refused(sql, "1105");
        assert!(err.contains(says), "{sql}: {err}");
    }
    let out = s.ok("SELECT id, qty FROM items ORDER BY id");
    assert_eq!(lines(&out), ["2\t6", "6\t6"], "{out}");
    assert_eq!(s.rest_rows().await.len(), 2);
}

/// A column compared with a constant of another type answers the rows
/// MySQL answers (each expected answer here is MariaDB 10.11's for the
/// same rows): a DECIMAL as a number, not as its text; a string that
/// spells a number as that number; a number no value of the column is
/// (`2.5` or `300` for a TINYINT key) matching no row and bounding ranges
/// as a number does — by key lookups, index ranges and scans alike.
#[tokio::test]
async fn constants_of_another_type_compare_as_mysql_compares_them() {
    let s = setup(&[]).await;
    s.ok(
        "CREATE TABLE nums (id INT PRIMARY KEY, tiny TINYINT, price DECIMAL(6,2), f FLOAT, \
          name VARCHAR(20), KEY (tiny), KEY (price))",
    );
    s.ok(
        "INSERT INTO nums VALUES (1, 5, 1.50, 0.5, '5'), (2, 10, 2.25, 0.1, '05'), \
          (3, 100, 3.00, 2.5, 'abc'), (4, -5, 4.10, 10, ' 5')",
    );
    let ids = |sql: &str| -> String { lines(&s.ok(sql)).join(" ") };
    for (sql, want) in [
        // A DECIMAL column against numbers of other scales: by an index
        // range, and on each row. (It was compared as text: `price < 10`
        // found only 1.50.)
        (
            "SELECT id FROM nums WHERE price < 10 ORDER BY id",
            "1 2 3 4",
        ),
        (
            "SELECT id FROM nums WHERE price = 1.5 OR price = '2.250' ORDER BY id",
            "1 2",
        ),
        (
            "SELECT id FROM nums WHERE price IN (3, 4.1) ORDER BY id",
            "3 4",
        ),
        (
            "SELECT id FROM nums WHERE price > 2.251 AND price <> 4.105 ORDER BY id",
            "3 4",
        ),
        (
            "SELECT id FROM nums WHERE price BETWEEN '2' AND 3.001 ORDER BY id",
            "2 3",
        ),
        // An integer column against fractions and numbers past its range.
        ("SELECT id FROM nums WHERE tiny > 9.5 ORDER BY id", "2 3"),
        (
            "SELECT id FROM nums WHERE tiny < 300 AND tiny >= -128.5 ORDER BY id",
            "1 2 3 4",
        ),
        (
            "SELECT id FROM nums WHERE tiny = 300 OR tiny IN (-500, 10.0, '1e2') ORDER BY id",
            "2 3",
        ),
        (
            "SELECT id FROM nums WHERE id < 99999999999999999999 AND id > -1e30 ORDER BY id",
            "1 2 3 4",
        ),
        // Keys: a number that is an integer finds it, one that is not finds nothing.
        ("SELECT id FROM nums WHERE id = 2.0", "2"),
        ("SELECT id FROM nums WHERE id = ' 2.0 '", "2"),
        ("SELECT id FROM nums WHERE id = 2.5", ""),
        (
            "SELECT id FROM nums WHERE id IN (1, 2.5, '3.0', 99999999999999999999, 4e0) ORDER BY id",
            "1 3 4",
        ),
        // A FLOAT as the double it widens to: it does not hold 0.1.
        ("SELECT id FROM nums WHERE f < 10 ORDER BY id", "1 2 3"),
        (
            "SELECT id FROM nums WHERE f = 0.1 OR f = 0.5 ORDER BY id",
            "1",
        ),
    ] {
        assert_eq!(ids(sql), want, "{sql}");
    }
    // UPDATE and DELETE find the same rows.
    let out = s.ok("DELETE FROM nums WHERE id = 2.5");
    assert!(out.contains("0 rows affected"), "{out}");
    let out = s.ok("UPDATE nums SET name = CONCAT(name, '!') WHERE price >= 2.999");
    assert!(out.contains("Rows matched: 2"), "{out}");
    let out = s.ok("DELETE FROM nums WHERE tiny > 99.5");
    assert!(out.contains("1 row affected"), "{out}");
    // A number against a text column is refused: MySQL would read each
    // row's text as a number ('05' = 5, 'abc' = 0). A string that spells
    // no number, against a number column, is refused too. Nothing changes.
    for (sql, code, says) in [
        (
            "SELECT id FROM nums WHERE name = 5",
            "1105",
            "quote it ('5')",
        ),
        (
            "DELETE FROM nums WHERE name IN ('x', 5)",
            "1105",
            "text column",
        ),
        ("DELETE FROM nums WHERE id = 'abc'", "1366", "not a number"),
        (
            "UPDATE nums SET tiny = 0 WHERE price < 'cheap'",
            "1366",
            "not a decimal",
        ),
    ] {
        let err = s.refused(sql, code);
        assert!(err.contains(says), "{sql}: {err}");
    }
    assert_eq!(
        lines(&s.ok("SELECT id, tiny, name FROM nums ORDER BY id")),
        ["1\t5\t5", "2\t10\t05", "4\t-5\t 5!"]
    );
    // Prepared statements' arguments, as drivers bind them.
    let mut conn = sqlx::mysql::MySqlConnection::connect_with(&s.driver_options())
        .await
        .unwrap();
    let by_key = "SELECT id FROM nums WHERE id = ?";
    let found: Vec<i32> = sqlx::query_scalar(by_key)
        .bind("2.0")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(found, [2]);
    let found: Vec<i32> = sqlx::query_scalar(by_key)
        .bind(2.5f64)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert!(found.is_empty());
    let cheaper = "SELECT id FROM nums WHERE price < ? ORDER BY id";
    let found: Vec<i32> = sqlx::query_scalar(cheaper)
        .bind(10i64)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(found, [1, 2, 4]);
    let found: Vec<i32> = sqlx::query_scalar(cheaper)
        .bind("2.251")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(found, [1, 2]);
    conn.close().await.unwrap();
}

#[tokio::test]
async fn expressions_are_computed_from_each_row_as_mysql_computes_them() {
    let s = setup(&[]).await;
    s.ok(
        "INSERT INTO items (id, name, qty, price, weight, tag) VALUES \
          (1, 'Ärm', 3, 2.50, 1.5, X'00FF'), (2, 'bolt', 10, 0.35, NULL, NULL), \
          (3, 'cog', 0, NULL, 0.25, NULL)",
    );
    // Arithmetic in the SELECT list: exact for integers and decimals; a
    // quotient of exact numbers has 4 more decimals than its dividend.
    let out =
        s.ok("SELECT id, qty * price, price / 3, qty + 1, -qty, 7 / 2 FROM items ORDER BY id");
    assert_eq!(
        lines(&out),
        [
            "1\t7.50\t0.833333\t4\t-3\t3.5000",
            "2\t3.50\t0.116667\t11\t-10\t3.5000",
            "3\tNULL\tNULL\t1\t0\t3.5000"
        ],
        "{out}"
    );
    // A string constant compared with a number reads as the number it
    // spells, as drivers that send every argument as a string need: in
    // the SELECT list, in aggregates' WHERE, in IN lists and BETWEEN.
    let out = s.ok(
        "SELECT '10' > 9, ' -2.5 ' < -2, '1e1' = 10, price = '2.5' FROM items WHERE id = 1; \
         SELECT COUNT(*), SUM(qty) FROM items WHERE qty < '10'; \
         SELECT COUNT(*) FROM items WHERE qty IN ('0', '3.0') OR price BETWEEN '0.3' AND '.4'",
    );
    assert_eq!(lines(&out), ["1\t1\t1\t1", "2\t3", "3"], "{out}");
    // One that spells no number is refused, never read as 0.
    for (sql, code, says) in [
        (
            "SELECT COUNT(*) FROM items WHERE qty < '10x'",
            "1105",
            "a string that is not one",
        ),
        ("SELECT 'abc' = 0", "1105", "a string that is not one"),
        (
            "SELECT COUNT(*) FROM items WHERE qty IN ('0', 'x0')",
            "1105",
            "a string that is not one",
        ),
        (
            "SELECT id FROM items WHERE qty = '' OR id = 1",
            "1366",
            "not a number",
        ),
    ] {
        let err = s.refused(sql, code);
        assert!(err.contains(says), "{sql}: {err}");
    }
    // Functions of text and numbers, NULL handling, CASE and IF.
    let out = s.ok(
        "SELECT UPPER(name), LOWER(name), CONCAT(name, '#', id), LENGTH(name), \
         CHAR_LENGTH(name), SUBSTRING(name, 2), SUBSTRING(name, -2, 1) FROM items WHERE id = 1",
    );
    assert_eq!(lines(&out), ["ÄRM\tärm\tÄrm#1\t4\t3\trm\tr"], "{out}");
    let out = s.ok("SELECT id, COALESCE(price, 0), IFNULL(weight, -1), NULLIF(qty, 0), \
         IF(qty > 5, 'many', 'few'), CASE WHEN price IS NULL THEN 'free' WHEN price < 1 THEN 'cheap' \
         ELSE 'dear' END, CASE id WHEN 1 THEN 'one' END FROM items ORDER BY id");
    assert_eq!(
        lines(&out),
        [
            "1\t2.50\t1.5\t3\tfew\tdear\tone",
            "2\t0.35\t-1\t10\tmany\tcheap\tNULL",
            "3\t0.00\t0.25\tNULL\tfew\tfree\tNULL"
        ],
        "{out}"
    );
    let out = s.ok(
        "SELECT LEFT(name, 2), RIGHT(name, 2), REPLACE(name, 'r', 'R'), TRIM('  x  '), \
         TRIM(LEADING 'x' FROM 'xxaxx'), LTRIM('  a'), RTRIM('a  ') FROM items WHERE id = 1",
    );
    assert_eq!(lines(&out), ["Är\trm\tÄRm\tx\taxx\ta\ta"], "{out}");
    s.ok("CREATE TABLE d (id INT PRIMARY KEY, at DATETIME(3), day DATE)");
    s.ok("INSERT INTO d VALUES (1, '2024-02-29 23:59:59.500', '1969-12-31'), (2, NULL, NULL)");
    let out = s.ok(
        "SELECT YEAR(at), MONTH(at), DAY(at), DATE(at), YEAR(day), DAYOFMONTH(day), \
         DATE(day) FROM d ORDER BY id",
    );
    assert_eq!(
        lines(&out),
        [
            "2024\t2\t29\t2024-02-29\t1969\t31\t1969-12-31",
            "NULL\tNULL\tNULL\tNULL\tNULL\tNULL\tNULL"
        ],
        "{out}"
    );
    let out = s.ok("SELECT COUNT(*) FROM d WHERE YEAR(at) = 2024 AND MONTH(day) = 12");
    assert_eq!(lines(&out), ["1"], "{out}");
    // The other parts, EXTRACT, DATE_FORMAT and CAST to a date, as
    // Django's lookups write them.
    let out = s.ok(
        "SELECT HOUR(at), MINUTE(at), SECOND(at), MICROSECOND(at), QUARTER(at), \
         DAYOFWEEK(at), WEEKDAY(day), DAYOFYEAR(day), EXTRACT(MONTH FROM at), \
         EXTRACT(HOUR FROM day), DATE_FORMAT(at, '%W %D %M %Y %r.%f'), \
         CAST(DATE_FORMAT(at, '%Y-%m-01') AS DATE), CAST(at AS DATETIME), \
         YEAR('2023-05-01'), DATE_FORMAT('2023-05-01 08:00:00', '%H') FROM d WHERE id = 1",
    );
    assert_eq!(
        lines(&out),
        [
            "23\t59\t59\t500000\t1\t5\t2\t365\t2\t0\tThursday 29th February 2024 11:59:59 PM.500000\t2024-02-01\t2024-03-01 00:00:00\t2023\t08"
        ],
        "{out}"
    );
    let out = s
        .ok("SELECT id FROM d WHERE EXTRACT(YEAR FROM at) = 2024 AND DATE_FORMAT(at, '%m') = '02'");
    assert_eq!(lines(&out), ["1"], "{out}");
    for (sql, code, says) in [
        ("SELECT DATE_FORMAT(at, '%U') FROM d", "1235", "%U"),
        (
            "SELECT DATE_FORMAT(at, CONCAT('%', 'Y')) FROM d",
            "1235",
            "constant",
        ),
        ("SELECT EXTRACT(WEEK FROM at) FROM d", "1235", "WEEK"),
        ("SELECT DATE_FORMAT(id, '%Y') FROM d", "1105", "a date"),
        ("SELECT CAST(id AS DATE) FROM d", "1105", "CAST"),
        (
            "SELECT CAST(at AS DATETIME(7)) FROM d",
            "1105",
            "6 fractional digits",
        ),
        ("SELECT CAST('soon' AS DATE) FROM d", "1690", "soon"),
        ("SELECT HOUR('soon') FROM d", "1105", "soon"),
    ] {
        let err = s.refused(sql, code);
        assert!(err.contains(says), "{sql}: {err}");
    }
    s.refused("SELECT YEAR(id) FROM d", "1105");
    let out = s.ok(
        "SELECT ROUND(price, 1), ROUND(price), FLOOR(price), CEIL(price), ABS(0 - price), \
         CAST(price AS SIGNED), CAST(qty AS CHAR), CAST('12.5' AS DECIMAL(6,2)), MOD(qty, 4) \
         FROM items WHERE id = 1",
    );
    assert_eq!(lines(&out), ["2.5\t3\t2\t3\t2.50\t3\t3\t12.50\t3"], "{out}");
    // NULL-safe equality: never NULL, in the list and in WHERE (MariaDB
    // 10.11's answers).
    let out = s.ok(
        "SELECT id, price <=> weight, weight <=> NULL, NULL <=> NULL, 1 <=> NULL, price <=> 2.5 \
         FROM items ORDER BY id",
    );
    assert_eq!(
        lines(&out),
        ["1\t0\t0\t1\t0\t1", "2\t0\t1\t1\t0\t0", "3\t0\t0\t1\t0\t0"],
        "{out}"
    );
    let out = s.ok("SELECT id FROM items WHERE price <=> NULL");
    assert_eq!(lines(&out), ["3"], "{out}");
    let out = s.ok("SELECT id FROM items WHERE qty <=> 10");
    assert_eq!(lines(&out), ["2"], "{out}");
    let out = s.ok("SELECT id FROM items WHERE NOT (weight <=> 0.25) ORDER BY id");
    assert_eq!(lines(&out), ["1", "2"], "{out}");
    // TRUNCATE drops digits toward zero (MariaDB 10.11's answers).
    let out = s.ok(
        "SELECT TRUNCATE(price, 1), TRUNCATE(0 - price, 0), TRUNCATE(qty * 1.99, 1), \
         TRUNCATE(123, -1), TRUNCATE(-2.75e0, 1) FROM items WHERE id = 1",
    );
    assert_eq!(lines(&out), ["2.5\t-2\t5.9\t120\t-2.7"], "{out}");
    s.refused("SELECT TRUNCATE(price) FROM items", "1105");
    // Named by alias; sorted and made distinct by computed values.
    let out = s.ok("SELECT id, qty * 2 AS twice FROM items ORDER BY twice DESC");
    assert_eq!(lines(&out), ["2\t20", "1\t6", "3\t0"], "{out}");
    let out = s.ok("SELECT id FROM items ORDER BY qty % 3, id");
    assert_eq!(lines(&out), ["1", "3", "2"], "{out}");
    let out = s.ok("SELECT DISTINCT qty > 2 FROM items ORDER BY 1");
    assert_eq!(lines(&out), ["0", "1"], "{out}");
    // In WHERE, beside the comparisons an index range is found by.
    let out = s.ok("SELECT id FROM items WHERE id >= 1 AND qty * price > 5");
    assert_eq!(lines(&out), ["1"], "{out}");
    let out =
        s.ok("SELECT id FROM items WHERE UPPER(name) = 'BOLT' OR LENGTH(name) = 3 ORDER BY id");
    assert_eq!(lines(&out), ["2", "3"], "{out}");
    let out = s.ok("SELECT id FROM items WHERE qty ORDER BY id");
    assert_eq!(lines(&out), ["1", "2"], "{out}");
    // A table's alias names its columns anywhere in the statement.
    let out = s.ok("SELECT i.id, i.qty + 1 FROM items AS i WHERE i.qty > 5 ORDER BY i.id");
    assert_eq!(lines(&out), ["2\t11"], "{out}");
    // Aggregates take the same functions, pushed down.
    let out =
        s.ok("SELECT SUM(IF(qty > 5, qty, 0)), COUNT(*) FROM items i WHERE UPPER(i.name) <> 'COG'");
    assert_eq!(lines(&out), ["10\t2"], "{out}");
    // GROUP BY an output's position or alias, as ORMs write it.
    let by_column = s.ok("SELECT qty, COUNT(*) FROM items GROUP BY qty ORDER BY qty");
    assert_eq!(lines(&by_column), ["0\t1", "3\t1", "10\t1"], "{by_column}");
    for sql in [
        "SELECT qty, COUNT(*) FROM items GROUP BY 1 ORDER BY 1",
        "SELECT qty AS q, COUNT(*) FROM items GROUP BY q ORDER BY q",
    ] {
        assert_eq!(lines(&s.ok(sql)), lines(&by_column), "{sql}");
    }
    s.refused("SELECT qty, COUNT(*) FROM items GROUP BY 3", "1054");
    s.refused("SELECT qty, COUNT(*) FROM items GROUP BY 0", "1054");
    s.refused("SELECT qty, COUNT(*) AS n FROM items GROUP BY n", "1235");
    // COUNT(DISTINCT …), pushed down: NULLs not counted.
    s.ok("UPDATE items SET qty = 3 WHERE id = 3");
    let out = s.ok(
        "SELECT COUNT(DISTINCT qty), COUNT(DISTINCT weight), COUNT(DISTINCT qty % 2), COUNT(*) \
         FROM items; SELECT qty, COUNT(DISTINCT name) FROM items GROUP BY qty \
         HAVING COUNT(DISTINCT id) > 1",
    );
    assert_eq!(lines(&out), ["2\t2\t2\t3", "3\t2"], "{out}");
    s.refused("SELECT SUM(DISTINCT qty) FROM items", "1235");
    s.refused("SELECT COUNT(DISTINCT qty, name) FROM items", "1235");
    s.ok("UPDATE items SET qty = 0 WHERE id = 3");
    // A prepared SELECT declares its computed columns' types.
    let mut conn = sqlx::MySqlConnection::connect_with(&s.driver_options())
        .await
        .unwrap();
    let row = sqlx::query(
        "SELECT qty * 2 AS twice, weight * 2 AS heavier, CONCAT(name, '!') AS shout FROM items WHERE id = ?",
    )
    .bind(1)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(row.try_get::<i64, _>("twice").unwrap(), 6);
    assert_eq!(row.try_get::<f64, _>("heavier").unwrap(), 3.0);
    assert_eq!(row.try_get::<String, _>("shout").unwrap(), "Ärm!");
    conn.close().await.unwrap();

    // UPDATE sets columns to expressions of any type; its result is
    // checked as a written value is: never rounded, never clamped.
    s.ok("UPDATE items i SET i.price = i.price * 2 + 0.10, i.name = CONCAT(UPPER(i.name), '-') WHERE i.id = 2");
    let out = s.ok("SELECT name, price FROM items WHERE id = 2");
    assert_eq!(lines(&out), ["BOLT-\t0.80"], "{out}");
    let err = s.refused(
        "UPDATE items SET price = price * 1.001 WHERE id = 1",
        "1265",
    );
    assert!(err.contains("not rounded"), "{err}");
    s.ok("UPDATE items SET price = ROUND(price * 1.001, 2) WHERE id = 1");
    s.refused("UPDATE items SET qty = qty - 4 WHERE id = 1", "1690");
    let err = s.refused(
        "UPDATE items SET qty = price * 10000000000 WHERE id = 1",
        "1264",
    );
    assert!(err.contains("out of range"), "{err}");
    s.ok("UPDATE items SET qty = price * 2 WHERE id = 1");

    // Errors: clear, numbered, and nothing changed.
    for (sql, code, says) in [
        (
            "SELECT UPPER(qty) FROM items",
            "1105",
            "UPPER takes a string",
        ),
        (
            "SELECT COALESCE(qty, 'none') FROM items",
            "1105",
            "does not convert",
        ),
        (
            "SELECT SUBSTRING(name, 'a') FROM items",
            "1105",
            "whole numbers",
        ),
        ("SELECT NO_SUCH_FN(id) FROM items", "1235", "NO_SUCH_FN"),
        (
            "SELECT CAST('12abc' AS SIGNED) FROM items",
            "1690",
            "is not a number",
        ),
        (
            "SELECT CAST(0 - qty AS UNSIGNED) FROM items WHERE id = 1",
            "1690",
            "negative",
        ),
        (
            "SELECT id + 18446744073709551615 FROM items WHERE id = 3",
            "1690",
            "out of range",
        ),
        (
            // 10 * 10^9 with 30 decimals is 41 digits: refused, never a
            // double in its place.
            "SELECT COALESCE(qty * 1000000000, 0.000000000000000000000000000001) \
             FROM items WHERE id = 2",
            "1690",
            "38 digits with 30 decimals",
        ),
        (
            "SELECT ROUND(price, qty) FROM items",
            "1235",
            "constant number of decimals",
        ),
        (
            "SELECT UPPER(name, name) FROM items",
            "1105",
            "does not take 2 arguments",
        ),
        ("SELECT x.id FROM items i", "1054", "x.id"),
        ("SELECT id FROM items WHERE name", "1235", "a string"),
    ] {
        let err = s.refused(sql, code);
        assert!(err.contains(says), "{sql}: {err}");
    }
    // A string of more than 1 MiB from one row is refused.
    let long = format!(
        "SELECT CONCAT({}) FROM items WHERE id = 1",
        vec!["'{}'"; 40].join(", ")
    )
    .replace("{}", &"x".repeat(30_000));
    let err = s.refused(&long, "1690");
    assert!(err.contains("longer than"), "{err}");
    let out = s.ok("SELECT id, name, qty, price FROM items ORDER BY id");
    assert_eq!(
        lines(&out),
        ["1\tÄrm\t5\t2.50", "2\tBOLT-\t10\t0.80", "3\tcog\t0\tNULL"],
        "{out}"
    );
}

#[tokio::test]
async fn string_date_and_regexp_functions_answer_as_mysql() {
    let s = setup(&[]).await;
    s.ok(
        "INSERT INTO items (id, name, qty, price, weight, tag) VALUES \
          (1, 'Ärmel', 3, 2.50, 1.5, X'00FF'), (2, 'bolt', 10, 0.35, NULL, X'6162'), \
          (3, 'cog-2', 0, NULL, 0.25, NULL), (4, 'Bolt', 7, 1.00, NULL, NULL)",
    );
    // Finding, padding and joining text, in characters.
    let out = s.ok(
        "SELECT LOCATE('l', name), LOCATE('l', name, 4), INSTR(name, 'mel'), \
         POSITION('o' IN name), LPAD(name, 7, '*-'), RPAD(name, 3, '.'), REVERSE(name), \
         CONCAT_WS('/', name, price, weight), REPEAT('-', qty), CONCAT('[', SPACE(2), ']') \
         FROM items ORDER BY id",
    );
    assert_eq!(
        lines(&out),
        [
            "5\t5\t3\t0\t*-Ärmel\tÄrm\tlemrÄ\tÄrmel/2.50/1.5\t---\t[  ]",
            "3\t0\t0\t2\t*-*bolt\tbol\ttlob\tbolt/0.35\t----------\t[  ]",
            "0\t0\t0\t2\t*-cog-2\tcog\t2-goc\tcog-2/0.25\t\t[  ]",
            "3\t0\t0\t2\t*-*Bolt\tBol\ttloB\tBolt/1.00\t-------\t[  ]"
        ],
        "{out}"
    );
    // GREATEST and LEAST in the arguments' common type; NULL if one is.
    let out = s.ok(
        "SELECT GREATEST(qty, price, 2), LEAST(qty, 5), GREATEST(name, 'c'), LEAST(id, weight) \
         FROM items ORDER BY id",
    );
    assert_eq!(
        lines(&out),
        [
            "3.00\t3\tÄrmel\t1",
            "10.00\t5\tc\tNULL",
            "NULL\t0\tcog-2\t0.25",
            "7.00\t5\tc\tNULL"
        ],
        "{out}"
    );
    // Differences of dates: DATEDIFF in days, TIMESTAMPDIFF in whole units.
    s.ok("CREATE TABLE d (id INT PRIMARY KEY, a DATETIME, b DATE)");
    s.ok(
        "INSERT INTO d VALUES (1, '2024-01-31 12:00:00', '2024-03-31'), \
         (2, '2024-05-01 00:00:00', '2024-02-01'), (3, NULL, '2024-01-01')",
    );
    let out = s.ok(
        "SELECT DATEDIFF(b, a), DATEDIFF('2024-12-25', b), TIMESTAMPDIFF(MONTH, a, b), \
         TIMESTAMPDIFF(DAY, a, b), TIMESTAMPDIFF(HOUR, b, a), TIMESTAMPDIFF(YEAR, b, '2030-01-01') \
         FROM d ORDER BY id",
    );
    assert_eq!(
        lines(&out),
        [
            "60\t269\t1\t59\t-1428\t5",
            "-90\t328\t-3\t-90\t2160\t5",
            "NULL\t359\tNULL\tNULL\tNULL\t6"
        ],
        "{out}"
    );
    let out = s.ok("SELECT id FROM d WHERE TIMESTAMPDIFF(DAY, a, NOW()) > 30 ORDER BY id");
    assert_eq!(lines(&out), ["1", "2"], "{out}");

    // REGEXP, RLIKE and REGEXP_LIKE: case sensitive as text compares,
    // unless asked otherwise; by a scan, in a locking read, pushed down
    // into an aggregate, and as a value.
    let out = s.ok("SELECT id FROM items WHERE name REGEXP '^[bB]o' ORDER BY id");
    assert_eq!(lines(&out), ["2", "4"], "{out}");
    let out = s.ok("SELECT id FROM items WHERE name NOT RLIKE '^b' ORDER BY id");
    assert_eq!(lines(&out), ["1", "3", "4"], "{out}");
    let out = s.ok("SELECT id FROM items WHERE REGEXP_LIKE(name, '^BOLT$', 'i') ORDER BY id");
    assert_eq!(lines(&out), ["2", "4"], "{out}");
    let out = s.ok("SELECT id FROM items WHERE REGEXP_LIKE(name, '^BOLT$', 'c')");
    assert_eq!(lines(&out), Vec::<&str>::new(), "{out}");
    let out = s.ok("SELECT COUNT(*), SUM(qty) FROM items WHERE name REGEXP '[[:digit:]]|^Ä'");
    assert_eq!(lines(&out), ["2\t3"], "{out}");
    let out = s.ok(
        "SELECT id, name REGEXP 'l', price REGEXP '^0\\\\.', tag REGEXP '^a.$' FROM items \
         ORDER BY id",
    );
    assert_eq!(
        lines(&out),
        [
            "1\t1\t0\t0",
            "2\t1\t1\t1",
            "3\t0\tNULL\tNULL",
            "4\t1\t0\tNULL"
        ],
        "{out}"
    );
    let out =
        s.ok("BEGIN; SELECT id FROM items WHERE name REGEXP 'o' ORDER BY id FOR UPDATE; COMMIT");
    assert_eq!(lines(&out), ["2", "3", "4"], "{out}");
    let out = s.ok("UPDATE items SET qty = qty + 1 WHERE name REGEXP '^[a-z]+$'");
    assert!(out.contains("Query OK, 1 row affected"), "{out}");
    let out = s.ok("SELECT qty FROM items WHERE id = 2");
    assert_eq!(lines(&out), ["11"], "{out}");

    // What is refused says why, and changes nothing.
    let before = s.ok("SELECT * FROM items ORDER BY id");
    for (sql, code, says) in [
        (
            "SELECT id FROM items WHERE name REGEXP '(ab'",
            "1139",
            "unclosed group",
        ),
        (
            "SELECT REGEXP_LIKE(name, 'a', 'q') FROM items",
            "1139",
            "match type",
        ),
        (
            "SELECT id FROM items WHERE name REGEXP '(a)\\\\1'",
            "1235",
            "backreference",
        ),
        (
            "SELECT id FROM items WHERE name REGEXP 'a(?=b)'",
            "1235",
            "look-around",
        ),
        (
            "SELECT id FROM items WHERE name REGEXP name",
            "1235",
            "constant string",
        ),
        (
            "SELECT id FROM items WHERE name REGEXP '(a{1000}){1000}'",
            "1105",
            "compiles past",
        ),
        (
            "DELETE FROM items WHERE name REGEXP '(x'",
            "1139",
            "unclosed group",
        ),
        (
            "UPDATE items SET name = REPEAT(name, 1000000) WHERE id = 1",
            "1690",
            "longer than",
        ),
        (
            "UPDATE items SET name = LPAD(name, 4294967296, 'x') WHERE id = 1",
            "1690",
            "longer than",
        ),
        (
            "SELECT TIMESTAMPDIFF(FORTNIGHT, a, b) FROM d",
            "1105",
            "TIMESTAMPDIFF counts in",
        ),
        ("SELECT DATEDIFF(a, 3) FROM d", "1105", "dates"),
        ("SELECT GREATEST(name, qty) FROM items", "1105", "convert"),
        ("SELECT GREATEST(qty) FROM items", "1105", "2 or more"),
        ("SELECT LOCATE(qty, name) FROM items", "1105", "strings"),
        (
            "SELECT LPAD(name, 'x', 'y') FROM items",
            "1105",
            "whole number",
        ),
    ] {
        let err = s.refused(sql, code);
        assert!(err.contains(says), "{sql}: {err}");
    }
    let long = format!(
        "SELECT id FROM items WHERE name REGEXP '{}'",
        "a".repeat(1025)
    );
    let err = s.refused(&long, "1105");
    assert!(err.contains("at most 1024 characters"), "{err}");
    assert_eq!(s.ok("SELECT * FROM items ORDER BY id"), before);
}

#[tokio::test]
async fn inserts_upserts_and_aggregates_take_expressions_too() {
    let s = setup(&[]).await;
    // INSERT … SET is INSERT … (columns) VALUES (one row).
    s.ok("INSERT INTO items SET id = 1, name = 'bolt', price = 0.25, qty = 2 * 3");
    s.ok("INSERT INTO items SET name = 'cog', id = 2");
    let out = s.ok("SELECT id, name, qty, price FROM items ORDER BY id");
    assert_eq!(
        lines(&out),
        ["1\tbolt\t6\t0.25", "2\tcog\t0\tNULL"],
        "{out}"
    );
    s.refused("INSERT INTO items SET id = 1, name = 'again'", "1062");
    s.refused("INSERT INTO items SET id = 3, nope = 1", "1054");
    s.refused("INSERT INTO items SET id = 3, qty = -1", "1264");
    // ON DUPLICATE KEY UPDATE with decimals and functions of both rows.
    s.ok("INSERT INTO items (id, name, price) VALUES (1, 'BOLT', 0.10) \
          ON DUPLICATE KEY UPDATE price = price + VALUES(price), name = CONCAT(name, '+', VALUES(name))");
    s.ok(
        "INSERT INTO items (id, name, price) VALUES (1, 'x', 1.00) AS new \
          ON DUPLICATE KEY UPDATE price = COALESCE(price, 0) * 2 + new.price",
    );
    let out = s.ok("SELECT name, price FROM items WHERE id = 1");
    assert_eq!(lines(&out), ["bolt+BOLT\t1.70"], "{out}");
    let err = s.refused(
        "INSERT INTO items (id, name, price) VALUES (1, 'x', 0.001) \
         ON DUPLICATE KEY UPDATE price = price + VALUES(price)",
        "1265",
    );
    assert!(err.contains("not rounded"), "{err}");
    s.refused(
        "INSERT INTO items (id, name) VALUES (1, 'x') ON DUPLICATE KEY UPDATE price = price + VALUES(nope)",
        "1054",
    );
    // The row an INSERT gives is checked whole even when it meets a row
    // there and only updates it, or is skipped.
    for (sql, code) in [
        (
            "INSERT INTO items (id, name, price) VALUES (1, 'x', 'abc') ON DUPLICATE KEY UPDATE name = 'y'",
            "1366",
        ),
        (
            "INSERT INTO items (id, name, price) VALUES (1, 'x', 1.234) ON DUPLICATE KEY UPDATE name = 'y'",
            "1265",
        ),
        (
            "INSERT IGNORE INTO items (id, name, qty) VALUES (1, 'x', -1)",
            "1264",
        ),
        (
            "INSERT INTO items (id, name) VALUES (1, NULL) ON DUPLICATE KEY UPDATE qty = 1",
            "1048",
        ),
    ] {
        s.refused(sql, code);
    }
    // LIKE in an aggregate's WHERE (pushed down), and over an expression.
    let out = s.ok("SELECT COUNT(*) FROM items WHERE name LIKE 'b%'");
    assert_eq!(lines(&out), ["1"], "{out}");
    let out = s.ok("SELECT COUNT(*), SUM(qty) FROM items WHERE UPPER(name) NOT LIKE 'B%'");
    assert_eq!(lines(&out), ["1\t0"], "{out}");
    let out = s.ok("SELECT id FROM items WHERE CONCAT(name, '!') LIKE '%g!'");
    assert_eq!(lines(&out), ["2"], "{out}");
    let out = s.ok("SELECT id, name LIKE 'c%' FROM items ORDER BY id");
    assert_eq!(lines(&out), ["1\t0", "2\t1"], "{out}");
    s.refused("SELECT COUNT(*) FROM items WHERE weight LIKE '1%'", "1235");
    s.refused(
        &format!(
            "SELECT COUNT(*) FROM items WHERE name LIKE '{}'",
            "%".repeat(1025)
        ),
        "1105",
    );
    let out = s.ok("SELECT id, name, qty, price FROM items ORDER BY id");
    assert_eq!(
        lines(&out),
        ["1\tbolt+BOLT\t6\t1.70", "2\tcog\t0\tNULL"],
        "{out}"
    );
}

/// Values computed from aggregates — the next id, a total that is 0 for
/// no rows, a ratio — answered as MySQL answers them (each checked against
/// MariaDB 10.11), typed as their values, and refused with MySQL's numbers
/// where MySQL refuses them.
#[tokio::test]
async fn expressions_over_aggregates_answer_as_mysql() {
    let s = setup(&[]).await;
    s.ok("INSERT INTO items (id, name, qty, price, weight) VALUES \
          (1, 'bolt', 5, 1.50, 0.5), (2, 'cog', 10, 2.25, 1.5), (3, 'nut', 10, NULL, 2), \
          (4, 'bolt', 7, 4.10, NULL)");
    for (sql, want) in [
        ("SELECT MAX(id) + 1 AS next FROM items", vec!["5"]),
        ("SELECT MAX(id) + 1 FROM items WHERE id > 100", vec!["NULL"]),
        (
            "SELECT COALESCE(SUM(qty), 0) FROM items WHERE id > 100",
            vec!["0"],
        ),
        (
            "SELECT SUM(price) / COUNT(price), ROUND(AVG(weight), 2) FROM items",
            vec!["2.616667\t1.33"],
        ),
        (
            "SELECT name, COUNT(*) * 10 AS n, MAX(qty) - MIN(qty) FROM items \
             GROUP BY name ORDER BY n DESC, name",
            vec!["bolt\t20\t2", "cog\t10\t0", "nut\t10\t0"],
        ),
        (
            "SELECT qty, IF(COUNT(*) > 1, 'shared', CONCAT('only ', MIN(name))) FROM items \
             GROUP BY qty ORDER BY qty",
            vec!["5\tonly bolt", "7\tonly bolt", "10\tshared"],
        ),
        // HAVING by the alias of a computed output.
        (
            "SELECT name, SUM(qty) + 1 AS s FROM items GROUP BY name HAVING s > 11 ORDER BY s",
            vec!["bolt\t13"],
        ),
        // ORDER BY a value computed from aggregates, not in the list.
        (
            "SELECT name FROM items GROUP BY name ORDER BY MAX(qty) - MIN(qty) DESC, name",
            vec!["bolt", "cog", "nut"],
        ),
        // A GROUP BY column in an expression, and a constant beside.
        (
            "SELECT qty * 2, 1, COUNT(*) FROM items GROUP BY qty ORDER BY qty * 2 DESC",
            vec!["20\t1\t2", "14\t1\t1", "10\t1\t1"],
        ),
        (
            "SELECT CASE WHEN SUM(price) IS NULL THEN 0 ELSE SUM(price) END FROM items \
             GROUP BY qty ORDER BY qty",
            vec!["1.50", "4.10", "2.25"],
        ),
    ] {
        let out = s.ok(sql);
        assert_eq!(lines(&out), want, "{sql}: {out}");
    }
    for (sql, code, words) in [
        // MySQL 8's ONLY_FULL_GROUP_BY (MariaDB's default answers any
        // row's name: Shoal never answers an arbitrary value).
        (
            "SELECT name, COUNT(*) FROM items GROUP BY qty",
            "1055 (42000)",
            "'name'",
        ),
        (
            "SELECT qty + weight, COUNT(*) FROM items GROUP BY qty",
            "1055 (42000)",
            "'weight'",
        ),
        (
            "SELECT SUM(MAX(qty)) FROM items",
            "1111 (HY000)",
            "Invalid use of group function",
        ),
        (
            "SELECT id FROM items WHERE COUNT(*) > 1",
            "1111 (HY000)",
            "Invalid use of group function",
        ),
        (
            "SELECT COUNT(*) AS n, n + 1 FROM items",
            "1054 (42S22)",
            "'n'",
        ),
        (
            "SELECT MAX(id) * 9223372036854775807 FROM items",
            "1690 (22003)",
            "out of range",
        ),
        (
            "SELECT SUM(id * 9223372036854775807) FROM items",
            "1690 (22003)",
            "out of range",
        ),
        (
            "SELECT MAX(id) + 'x' FROM items",
            "1105 (HY000)",
            "not a number",
        ),
        ("SELECT MAX(id) + nope FROM items", "1054 (42S22)", "nope"),
        (
            "SELECT MAX(id) + NOPE(1) FROM items",
            "1235 (42000)",
            "NOPE",
        ),
    ] {
        let err = s.refused(sql, code);
        assert!(err.contains(words), "{sql}: {err}");
    }
    // Typed as their values: a driver reads the next id as the integer it is.
    let mut conn = sqlx::mysql::MySqlConnection::connect_with(&s.driver_options())
        .await
        .unwrap();
    let (next, total): (i64, i64) = sqlx::query_as(
        "SELECT COALESCE(MAX(id), 0) + ?, COALESCE(SUM(qty), 0) FROM items WHERE qty > ?",
    )
    .bind(1)
    .bind(100)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!((next, total), (1, 0));
    let (ratio,): (f64,) = sqlx::query_as("SELECT SUM(weight) / COUNT(*) FROM items")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(ratio, 1.0);
    conn.close().await.unwrap();
    // Nothing above changed a row.
    let out = s.ok("SELECT id, name, qty, price FROM items ORDER BY id");
    assert_eq!(
        lines(&out),
        [
            "1\tbolt\t5\t1.50",
            "2\tcog\t10\t2.25",
            "3\tnut\t10\tNULL",
            "4\tbolt\t7\t4.10"
        ],
        "{out}"
    );
}

/// Row comparisons — `(a, b) = (1, 'x')`, `(a, b) IN ((…), …)`, as ORMs
/// write them for composite keys — compare column by column with SQL's
/// NULL logic, in SELECT, UPDATE and DELETE; answers checked against
/// MariaDB 10.11, refusals with MySQL 8's number.
#[tokio::test]
async fn rows_compare_column_by_column() {
    let s = setup(&[]).await;
    s.ok(
        "CREATE TABLE o (id INT PRIMARY KEY, c INT, code VARCHAR(10), UNIQUE KEY by_code (code)); \
          INSERT INTO o VALUES (1, 7, 'a'), (2, 7, 'b'), (3, 8, NULL); \
          CREATE TABLE p (a INT, b VARCHAR(5), v INT, PRIMARY KEY (a, b)); \
          INSERT INTO p VALUES (1, 'x', 10), (1, 'y', 11), (2, 'x', 12)",
    );
    for (sql, want) in [
        (
            "SELECT id FROM o WHERE (id, c) IN ((1, 7), (2, 8), (3, 8)) ORDER BY id",
            vec!["1", "3"],
        ),
        (
            "SELECT id FROM o WHERE (id, c) NOT IN ((1, 7), (2, 8)) ORDER BY id",
            vec!["2", "3"],
        ),
        ("SELECT id FROM o WHERE (c, code) = (7, 'b')", vec!["2"]),
        (
            "SELECT id FROM o WHERE (c, code) <> (7, 'b') ORDER BY id",
            vec!["1", "3"],
        ),
        // NULL in a row: unknown, never true, and NOT IN unknown too.
        ("SELECT id FROM o WHERE (c, code) IN ((8, NULL))", vec![]),
        (
            "SELECT id FROM o WHERE (c, code) NOT IN ((8, NULL), (7, 'a')) ORDER BY id",
            vec!["2"],
        ),
        (
            "SELECT v FROM p WHERE (a, b) IN ((1, 'y'), (2, 'x')) ORDER BY v",
            vec!["11", "12"],
        ),
        ("SELECT v FROM p WHERE (a, b) = (1, 'x')", vec!["10"]),
        (
            "SELECT COUNT(*) FROM p WHERE (a, b) IN ((1, 'y'), (2, 'x'), (9, 'z'))",
            vec!["2"],
        ),
        (
            "SELECT id FROM o WHERE ((id, c), code) = ((1, 7), 'a')",
            vec!["1"],
        ),
        ("SELECT (1, 2) = (1, 2), (1, 2) IN ((2, 1))", vec!["1\t0"]),
    ] {
        let out = s.ok(sql);
        assert_eq!(lines(&out), want, "{sql}: {out}");
    }
    s.ok("UPDATE p SET v = v + 100 WHERE (a, b) IN ((1, 'y')); DELETE FROM p WHERE (a, b) = (2, 'x')");
    let out = s.ok("SELECT a, b, v FROM p ORDER BY a, b");
    assert_eq!(lines(&out), ["1\tx\t10", "1\ty\t111"], "{out}");
    // A list of 1,000 rows is taken, balanced (it nests 10 deep, not
    // 1,000); one more row is refused.
    let rows = |n: i64| {
        (0..n)
            .map(|i| format!("({i}, 'x')"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let out = s.ok(&format!(
        "SELECT COUNT(*) FROM p WHERE (a, b) IN ({})",
        rows(1000)
    ));
    assert_eq!(lines(&out), ["1"], "{out}");
    let err = s.refused(
        &format!("SELECT v FROM p WHERE (a, b) IN ({})", rows(1001)),
        "1105",
    );
    assert!(err.contains("at most 1000"), "{err}");
    for sql in [
        "SELECT id FROM o WHERE (id, c) = (1, 7, 3)",
        "SELECT id FROM o WHERE (id, c) IN ((1, 7), (2))",
        "SELECT id FROM o WHERE (id, c) = 1",
        "UPDATE o SET c = 0 WHERE (id, c) = (1, 7, 3)",
    ] {
        let err = s.refused(sql, "1241 (21000)");
        assert!(err.contains("Operand should contain"), "{sql}: {err}");
    }
    // Rows ordered other than by equality are not run (never a wrong answer).
    s.refused("SELECT id FROM o WHERE (id, c) < (2, 0)", "1235");
    let out = s.ok("SELECT id, c, code FROM o ORDER BY id");
    assert_eq!(lines(&out), ["1\t7\ta", "2\t7\tb", "3\t8\tNULL"], "{out}");
}

/// A job queue's table, for the tests of locking reads.
const JOBS: &str = "CREATE TABLE jobs (id INT PRIMARY KEY, state VARCHAR(8) NOT NULL, \
    prio INT NOT NULL, INDEX by_prio (prio))";

#[tokio::test]
async fn locking_reads_by_a_scan_lock_the_rows_they_answer() {
    // Lock waits end in 300 ms.
    let s = setup(&["--lock-wait-timeout", "300"]).await;
    s.ok(JOBS);
    s.ok("INSERT INTO jobs VALUES (1, 'new', 10), (2, 'new', 20), (3, 'done', 30), (4, 'new', 40)");
    let script = r#"
out = {}
a, b = connect(), connect(autocommit=True)
ca, cb = a.cursor(), b.cursor()
def update(id):
    return code(lambda: cb.execute("UPDATE jobs SET prio = prio + 1 WHERE id = %s", (id,)))
# A scan of every row: the rows that pass are locked, the others not.
ca.execute("SELECT id FROM jobs WHERE state = 'new' FOR UPDATE")
out["scanned"] = sorted(r[0] for r in ca.fetchall())
out["scan_locks"] = [update(i) is None for i in (1, 2, 3, 4)]
a.rollback()
# A range with ORDER BY and LIMIT locks only the rows it answers.
ca.execute("SELECT id, prio FROM jobs WHERE prio >= 20 ORDER BY prio DESC LIMIT 1 FOR UPDATE")
out["top"] = [list(r) for r in ca.fetchall()]
out["top_locks"] = [update(i) is None for i in (2, 3, 4)]
# The transaction sees its own change in a locking scan too.
ca.execute("UPDATE jobs SET state = 'taken' WHERE id = 4")
ca.execute("SELECT id, state FROM jobs WHERE prio >= 40 LOCK IN SHARE MODE")
out["own"] = [list(r) for r in ca.fetchall()]
a.commit()
# Outside a transaction it just reads.
cb.execute("SELECT id FROM jobs WHERE state = 'taken' FOR UPDATE")
out["autocommit"] = [r[0] for r in cb.fetchall()]
print(json.dumps(out))
"#;
    let out = pymysql(&s, script);
    assert_eq!(out["scanned"], json!([1, 2, 4]));
    assert_eq!(out["scan_locks"], json!([false, false, true, false]));
    assert_eq!(out["top"], json!([[4, 40]]));
    assert_eq!(out["top_locks"], json!([true, true, false]));
    assert_eq!(out["own"], json!([[4, "taken"]]));
    assert_eq!(out["autocommit"], json!([4]));
    // A read key may not lock.
    s.refused_with(
        &s.reader,
        Some("app"),
        b"BEGIN; SELECT id FROM jobs WHERE prio > 0 FOR UPDATE",
        "1142 (42000)",
    );
}

#[tokio::test]
async fn a_locking_read_with_limit_answers_as_many_rows_as_pass_when_some_change_under_it() {
    // A job queue: each worker takes the first 'new' job with a locking
    // read. A job another worker holds is waited for; once that worker has
    // taken it, it no longer passes, and the next job is answered in its
    // place. (If the waiting read comes after the commit, it finds the
    // same rows.) Lock waits end in 10 s.
    let s = setup(&["--lock-wait-timeout", "10000"]).await;
    s.ok(JOBS);
    s.ok(
        "INSERT INTO jobs VALUES (1, 'new', 10), (2, 'new', 20), (3, 'done', 5), \
         (4, 'new', 40), (5, 'new', 50), (6, 'new', 60)",
    );
    let script = r#"
out = {}
a, b = connect(), connect()
ca, cb = a.cursor(), b.cursor()
def waiting(sql):
    # Runs `sql` on a's connection in a thread (it waits for b's lock);
    # b takes its row and commits; the rows a was answered.
    got = {}
    def run():
        ca.execute(sql)
        got["rows"] = [list(r) for r in ca.fetchall()]
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.5)
    cb.execute("UPDATE jobs SET state = 'taken' WHERE id = %s", (held,))
    b.commit()
    t.join(20)
    a.rollback()
    return got.get("rows")
# In an order: b holds the first job; a gets the second.
cb.execute("SELECT id FROM jobs WHERE state = 'new' ORDER BY prio LIMIT 1 FOR UPDATE")
held = cb.fetchall()[0][0]
out["held"] = held
out["ordered"] = waiting("SELECT id, state FROM jobs WHERE state = 'new' ORDER BY prio LIMIT 1 FOR UPDATE")
# In the scan's own order: b holds the first the scan finds; a, asking
# for two, gets two others.
cb.execute("SELECT id FROM jobs WHERE state = 'new' LIMIT 1")
held = cb.fetchall()[0][0]
cb.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE", (held,))
out["held2"] = held
out["unordered"] = waiting("SELECT id, state FROM jobs WHERE state = 'new' LIMIT 2 FOR UPDATE")
cb.execute("SELECT id FROM jobs WHERE state = 'new' ORDER BY id")
out["left"] = [r[0] for r in cb.fetchall()]
print(json.dumps(out))
"#;
    let out = pymysql(&s, script);
    assert_eq!(out["held"], json!(1));
    assert_eq!(out["ordered"], json!([[2, "new"]]));
    let held = out["held2"].as_i64().unwrap();
    let rows = out["unordered"].as_array().expect("a was answered");
    assert_eq!(rows.len(), 2, "{out}");
    for row in rows {
        assert_eq!(row[1], json!("new"), "{out}");
        assert_ne!(row[0], json!(held), "{out}");
    }
    // Nothing else changed: two jobs taken, by b.
    let left: Vec<i64> = (out["left"].as_array().unwrap().iter())
        .map(|v| v.as_i64().unwrap())
        .collect();
    let expected: Vec<i64> = [2, 4, 5, 6].into_iter().filter(|&id| id != held).collect();
    assert_eq!(left, expected);
}

#[tokio::test]
async fn transactions_commit_roll_back_lock_and_end_with_their_connection() {
    // Lock waits end in 300 ms; a transaction holding rows is rolled back
    // after 3 s without a statement.
    let s = setup(&[
        "--lock-wait-timeout",
        "300",
        "--transaction-inactive-timeout",
        "3000",
    ])
    .await;
    s.ok("INSERT INTO items (id, name, qty) VALUES (1, 'one', 1), (2, 'two', 2)");
    let script = r#"
out = {}
# PyMySQL's default: autocommit off, every statement in a transaction.
a, b = connect(), connect(autocommit=True)
ca, cb = a.cursor(), b.cursor()
ca.execute("SELECT @@autocommit")
out["autocommit"] = ca.fetchone()[0]
ca.execute("INSERT INTO items (id, name, qty) VALUES (10, 'ten', 10)")
ca.execute("UPDATE items SET qty = 11 WHERE id = 1")
ca.execute("SELECT id, qty FROM items WHERE id IN (1, 10)")
out["own_view"] = [list(r) for r in ca.fetchall()]
cb.execute("SELECT id, qty FROM items WHERE id IN (1, 10)")
out["others_view"] = [list(r) for r in cb.fetchall()]
# A row the transaction holds: another writer waits, then times out.
out["blocked"] = code(lambda: cb.execute("UPDATE items SET qty = 99 WHERE id = 1"))
ca.execute("SELECT SUM(qty) FROM items")
out["scan_after_write"] = int(ca.fetchone()[0])
a.rollback()
cb.execute("SELECT id, qty FROM items WHERE id IN (1, 10)")
out["after_rollback"] = [list(r) for r in cb.fetchall()]
ca.execute("INSERT INTO items (id, name, qty) VALUES (10, 'ten', 10)")
ca.execute("DELETE FROM items WHERE id = 2")
a.commit()
cb.execute("SELECT id, qty FROM items WHERE id IN (1, 2, 10)")
out["after_commit"] = [list(r) for r in cb.fetchall()]
# An error from an operation rolls the whole transaction back (as NDB).
ca.execute("INSERT INTO items (id, name) VALUES (20, 'twenty')")
out["duplicate"] = code(lambda: ca.execute("INSERT INTO items (id, name) VALUES (1, 'again')"))
a.commit()
cb.execute("SELECT COUNT(*) FROM items WHERE id = 20")
out["after_failed"] = cb.fetchone()[0]
# Locking reads: FOR UPDATE and LOCK IN SHARE MODE hold the row.
ca.execute("SELECT qty FROM items WHERE id = 1 FOR UPDATE")
out["locked_read"] = ca.fetchone()[0]
out["blocked_by_read"] = code(lambda: cb.execute("UPDATE items SET qty = 98 WHERE id = 1"))
a.rollback()
ca.execute("SELECT qty FROM items WHERE id = 10 LOCK IN SHARE MODE")
out["blocked_by_share"] = code(lambda: cb.execute("DELETE FROM items WHERE id = 10"))
a.commit()
# Without a transaction a locking read just reads.
cb.execute("SELECT qty FROM items WHERE id = 1 FOR UPDATE")
out["autocommit_lock"] = cb.fetchone()[0]
# BEGIN in autocommit mode; ROLLBACK undoes; READ ONLY refuses writes.
cb.execute("BEGIN")
cb.execute("UPDATE items SET qty = 50 WHERE id = 1")
cb.execute("ROLLBACK")
cb.execute("SELECT qty FROM items WHERE id = 1")
out["begin_rollback"] = cb.fetchone()[0]
cb.execute("START TRANSACTION READ ONLY")
out["read_only"] = code(lambda: cb.execute("UPDATE items SET qty = 51 WHERE id = 1"))
cb.execute("COMMIT")
out["savepoint"] = code(lambda: cb.execute("SAVEPOINT s1"))
# A connection that goes away mid-transaction rolls back: its row is
# free for the next writer at once.
c = connect()
c.cursor().execute("INSERT INTO items (id, name) VALUES (30, 'thirty')")
c.cursor().execute("UPDATE items SET qty = 7 WHERE id = 1")
c._sock.shutdown(socket.SHUT_RDWR)
for attempt in range(100):
    if code(lambda: cb.execute("UPDATE items SET qty = 8 WHERE id = 1")) is None:
        break
cb.execute("SELECT COUNT(*) FROM items WHERE id = 30")
out["after_disconnect"] = cb.fetchone()[0]
# A transaction that holds rows and idles past the inactive timeout is
# rolled back: the waiting writer goes on, and its next statement is told.
ca.execute("UPDATE items SET qty = 70 WHERE id = 1")
for attempt in range(100):
    if code(lambda: cb.execute("UPDATE items SET qty = 9 WHERE id = 1")) is None:
        break
out["waited_out"] = attempt > 0
out["inactive"] = code(lambda: ca.execute("UPDATE items SET qty = 71 WHERE id = 1"))
ca.execute("SELECT qty FROM items WHERE id = 1")
out["after_inactive"] = ca.fetchone()[0]
a.commit()
print(json.dumps(out))
"#;
    let out = pymysql(&s, script);
    assert_eq!(out["autocommit"], 0);
    assert_eq!(out["own_view"], json!([[1, 11], [10, 10]]));
    assert_eq!(out["others_view"], json!([[1, 1]]));
    assert_eq!(out["blocked"][0], 1205, "{}", out["blocked"]);
    assert_eq!(out["scan_after_write"], 2 + 11 + 10);
    assert_eq!(out["after_rollback"], json!([[1, 1]]));
    assert_eq!(out["after_commit"], json!([[1, 1], [10, 10]]));
    assert_eq!(out["duplicate"][0], 1062);
    assert!(
        out["duplicate"][1]
            .as_str()
            .unwrap()
            .contains("rolled back"),
        "{}",
        out["duplicate"]
    );
    assert_eq!(out["after_failed"], 0);
    assert_eq!(out["locked_read"], 1);
    assert_eq!(out["blocked_by_read"][0], 1205);
    assert_eq!(out["blocked_by_share"][0], 1205);
    assert_eq!(out["autocommit_lock"], 1);
    assert_eq!(out["begin_rollback"], 1);
    assert_eq!(out["read_only"][0], 1792);
    assert_eq!(out["savepoint"][0], 1235);
    assert_eq!(out["after_disconnect"], 0);
    assert_eq!(out["waited_out"], true);
    assert_eq!(out["inactive"][0], 1205, "{}", out["inactive"]);
    assert!(
        out["inactive"][1]
            .as_str()
            .unwrap()
            .contains("transaction-inactive timeout"),
        "{}",
        out["inactive"]
    );
    assert_eq!(out["after_inactive"], 9);
    // What REST reads is what was committed.
    let rows = s.rest_rows().await;
    let ids: Vec<(i64, i64)> = rows
        .iter()
        .map(|r| (r["id"].as_i64().unwrap(), r["qty"].as_i64().unwrap()))
        .collect();
    assert_eq!(ids, vec![(1, 9), (10, 10)]);

    // A transaction holding rows counts against max_parallel_transactions
    // until it ends; one over the limit is refused with RonDB's number.
    s.shoal
        .set_quota("app", json!({"max_parallel_transactions": 1}))
        .await;
    let script = r#"
out = {}
a, b = connect(), connect()
a.cursor().execute("UPDATE items SET qty = 1 WHERE id = 1")
try:
    b.cursor().execute("UPDATE items SET qty = 2 WHERE id = 10")
except pymysql.err.MySQLError as e:
    out["refused"] = [e.args[0], e.args[1]]
a.commit()
b.cursor().execute("UPDATE items SET qty = 2 WHERE id = 10")
b.commit()
print(json.dumps(out))
"#;
    let out = pymysql(&s, script);
    assert_eq!(out["refused"][0], 1296, "{}", out["refused"]);
    assert!(
        out["refused"][1]
            .as_str()
            .unwrap()
            .contains("Got error 248"),
        "{}",
        out["refused"]
    );
    let rows = s.rest_rows().await;
    assert_eq!(rows[0]["qty"], 1);
    assert_eq!(rows[1]["qty"], 2);
}

#[tokio::test]
async fn unique_values_hold_inside_transactions_and_their_writers_wait() {
    // Lock waits end in 3 s: long enough for a waiting writer to see the
    // holder end, short enough to be waited out once.
    let s = setup(&["--lock-wait-timeout", "3000"]).await;
    s.ok("CREATE TABLE people (id INT PRIMARY KEY, email VARCHAR(40) NOT NULL, name VARCHAR(20) NULL, UNIQUE KEY by_email (email))");
    let script = r#"
def rows(c, sql):
    c.execute(sql)
    return [list(r) for r in c.fetchall()]
out = {}
# PyMySQL's default: autocommit off, every statement in a transaction.
a, b = connect(), connect(autocommit=True)
ca, cb = a.cursor(), b.cursor()
# The transaction's own row, not committed yet, holds its value.
ca.execute("INSERT INTO people (id, email) VALUES (1, 'own@x')")
out["own_duplicate"] = code(lambda: ca.execute("INSERT INTO people (id, email) VALUES (2, 'own@x')"))
a.commit()
out["after_own_duplicate"] = rows(cb, "SELECT id FROM people")
# A value freed by a move or a delete earlier in the transaction is free.
ca.execute("INSERT INTO people (id, email) VALUES (1, 'a@x'), (2, 'b@x')")
a.commit()
ca.execute("UPDATE people SET email = 'c@x' WHERE id = 1")
ca.execute("INSERT INTO people (id, email) VALUES (3, 'a@x')")
ca.execute("DELETE FROM people WHERE id = 2")
ca.execute("INSERT INTO people (id, email) VALUES (4, 'b@x')")
ca.execute("UPDATE people SET name = 'moved' WHERE id = 1")
a.commit()
out["after_commit"] = rows(cb, "SELECT id, email, name FROM people ORDER BY id")
# An update of another column keeps the value its row has now.
ca.execute("UPDATE people SET name = 'kept' WHERE id = 1")
out["taken_still"] = code(lambda: ca.execute("INSERT INTO people (id, email) VALUES (5, 'c@x')"))
# Another writer of a value an open transaction took waits for it: past
# the lock-wait timeout it gets 1205; after a commit, the duplicate.
ca.execute("INSERT INTO people (id, email) VALUES (6, 'g@x')")
out["waited_out"] = code(lambda: cb.execute("INSERT INTO people (id, email) VALUES (7, 'g@x')"))
def against(sql, end):
    """What another client's sql answers while the transaction holds its
    values and then ends by end(). Either order gives the same answer; the
    pause only makes it likely the other client waits."""
    result = []
    def other():
        c = connect(autocommit=True)
        result.append(code(lambda: c.cursor().execute(sql)))
        c.close()
    t = threading.Thread(target=other)
    t.start()
    time.sleep(0.3)
    end()
    t.join()
    return result[0]
out["after_holder_commits"] = against("INSERT INTO people (id, email) VALUES (7, 'g@x')", a.commit)
# … and after a rollback, its own write.
ca.execute("INSERT INTO people (id, email) VALUES (8, 'h@x')")
out["after_holder_rolls_back"] = against("INSERT INTO people (id, email) VALUES (9, 'h@x')", a.rollback)
# A value the transaction frees waits for it too: free once it commits,
# still taken if it rolls back.
ca.execute("DELETE FROM people WHERE id = 6")
out["freed_then_committed"] = against("INSERT INTO people (id, email) VALUES (10, 'g@x')", a.commit)
ca.execute("UPDATE people SET email = 'moved@x' WHERE id = 10")
out["freed_then_rolled_back"] = against("INSERT INTO people (id, email) VALUES (11, 'g@x')", a.rollback)
# UPDATE and DELETE by a scan of a table with a unique index.
out["scan_duplicate"] = code(lambda: cb.execute("UPDATE people SET email = 'same@x' WHERE id BETWEEN 1 AND 3"))
cb.execute("UPDATE people SET name = 'range' WHERE id BETWEEN 1 AND 3")
cb.execute("DELETE FROM people WHERE email = 'h@x'")
out["final"] = rows(cb, "SELECT id, email, name FROM people ORDER BY id")
print(json.dumps(out))
"#;
    let out = pymysql(&s, script);
    assert_eq!(out["own_duplicate"][0], 1062, "{}", out["own_duplicate"]);
    assert!(
        (out["own_duplicate"][1].as_str().unwrap()).contains("rolled back"),
        "{}",
        out["own_duplicate"]
    );
    assert_eq!(out["after_own_duplicate"], json!([]));
    assert_eq!(
        out["after_commit"],
        json!([[1, "c@x", "moved"], [3, "a@x", null], [4, "b@x", null]])
    );
    assert_eq!(out["taken_still"][0], 1062, "{}", out["taken_still"]);
    assert_eq!(out["waited_out"][0], 1205, "{}", out["waited_out"]);
    assert_eq!(
        out["after_holder_commits"][0], 1062,
        "{}",
        out["after_holder_commits"]
    );
    assert_eq!(out["after_holder_rolls_back"], Value::Null);
    assert_eq!(out["freed_then_committed"], Value::Null);
    assert_eq!(
        out["freed_then_rolled_back"][0], 1062,
        "{}",
        out["freed_then_rolled_back"]
    );
    assert_eq!(out["scan_duplicate"][0], 1062, "{}", out["scan_duplicate"]);
    assert_eq!(
        out["final"],
        json!([
            [1, "c@x", "range"],
            [3, "a@x", "range"],
            [4, "b@x", null],
            [10, "g@x", null]
        ])
    );
}

#[tokio::test]
async fn the_clients_safe_updates_hold_statements_back() {
    let s = setup(&[]).await;
    s.ok("INSERT INTO items (id, name, qty) VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3), (4, 'd', 4), (5, 'e', 5)");
    let safe = |sql: &str| {
        mysql_args(
            &s.shoal.mysql_addr,
            &s.key,
            Some("app"),
            &["--safe-updates"],
            sql.as_bytes(),
        )
    };
    // `mysql --safe-updates` sets sql_safe_updates, sql_select_limit and
    // max_join_size at connect; rows named by a key, an index's range or
    // a LIMIT may change.
    let ran = safe(
        "SELECT @@sql_safe_updates, @@sql_select_limit, @@max_join_size; UPDATE items SET qty = 10 WHERE id = 1; UPDATE items SET qty = 20 WHERE id BETWEEN 2 AND 3; DELETE FROM items WHERE qty = 5 LIMIT 1",
    );
    assert!(ran.ok, "{}", ran.err);
    assert_eq!(lines(&ran.out)[0], "1\t1000\t1000000", "{}", ran.out);
    // Every row, or rows found by a scan with no index: 1175, nothing
    // changed.
    for sql in [
        "UPDATE items SET qty = 0",
        "DELETE FROM items WHERE qty = 4",
    ] {
        let ran = safe(sql);
        assert!(
            !ran.ok && ran.err.contains("ERROR 1175"),
            "{sql}: {}",
            ran.err
        );
    }
    assert_eq!(
        lines(&s.ok("SELECT id, qty FROM items ORDER BY id"))[..],
        ["1\t10", "2\t20", "3\t20", "4\t4"]
    );

    // sql_select_limit is the LIMIT of a SELECT that gives none: by keys,
    // by a scan, of groups; an explicit LIMIT wins.
    let out = s.ok("SET sql_select_limit = 2; SELECT id FROM items ORDER BY id; SELECT id FROM items WHERE id IN (1, 2, 3, 4); SELECT id FROM items ORDER BY id LIMIT 3; SELECT qty, COUNT(*) FROM items GROUP BY qty ORDER BY qty; SELECT COUNT(*) FROM items");
    assert_eq!(
        lines(&out)[..],
        ["1", "2", "1", "2", "1", "2", "3", "4\t1", "10\t1", "4"],
        "{out}"
    );
    // max_join_size bounds the rows a scan examines (1104); a read by key
    // examines one.
    let ran = s.mysql("SET max_join_size = 3; SELECT id FROM items WHERE qty > 100");
    assert!(!ran.ok && ran.err.contains("ERROR 1104"), "{}", ran.err);
    let out = s.ok("SET max_join_size = 3; SELECT id FROM items WHERE id = 4");
    assert_eq!(lines(&out)[..], ["4"], "{out}");
}

#[tokio::test]
async fn inserts_that_meet_rows_there_skip_or_update_them() {
    let s = setup(&[]).await;
    s.ok("INSERT INTO items (id, name, qty) VALUES (1, 'one', 1), (2, 'two', 2)");
    let qty_of = |ids: &str| {
        let out = s.ok(&format!(
            "SELECT id, name, qty, price FROM items WHERE id IN ({ids}) ORDER BY id"
        ));
        lines(&out).join("|")
    };

    // A taken key updates the row there: its columns by name, the row the
    // INSERT gave by VALUES(); 2 affected per row changed, 1 per insert.
    let out = s.ok("INSERT INTO items (id, name, qty) VALUES (1, 'uno', 5), (3, 'three', 3) ON DUPLICATE KEY UPDATE qty = qty + VALUES(qty)");
    assert!(out.contains("3 rows affected"), "{out}");
    assert!(
        out.contains("Records: 2  Duplicates: 1  Warnings: 0"),
        "{out}"
    );
    assert_eq!(qty_of("1, 3"), "1\tone\t6\tNULL|3\tthree\t3\tNULL");
    // Rows in order: a later row updates the one an earlier row inserted.
    let out = s.ok("INSERT INTO items (id, name) VALUES (4, 'four'), (4, 'again') ON DUPLICATE KEY UPDATE qty = qty + 1, name = VALUES(name)");
    assert!(out.contains("3 rows affected"), "{out}");
    assert_eq!(qty_of("4"), "4\tagain\t1\tNULL");
    // An update that leaves the row as it was affects nothing.
    let out = s.ok("INSERT INTO items (id, name, qty) VALUES (1, 'x', 6) ON DUPLICATE KEY UPDATE qty = VALUES(qty)");
    assert!(out.contains("0 rows affected"), "{out}");
    // Assignments apply in order, each reading what those before it left;
    // the row alias of MySQL 8 reads the inserted row too.
    let out = s.ok("INSERT INTO items (id, name, qty) VALUES (2, 'dos', 10) AS new ON DUPLICATE KEY UPDATE qty = qty + new.qty, price = qty, name = new.name");
    assert!(out.contains("2 rows affected"), "{out}");
    assert_eq!(qty_of("2"), "2\tdos\t12\t12.00");
    let out = s.ok("UPDATE items SET qty = qty + 1, price = qty WHERE id = 3");
    assert!(out.contains("1 row affected"), "{out}");
    assert_eq!(qty_of("3"), "3\tthree\t4\t4.00");

    // Refused before anything changes: a key column, an unknown column, a
    // result past the column (and the row the statement would insert with
    // it is not inserted), a read key.
    let before = s.rest_rows().await;
    s.refused(
        "INSERT INTO items (id, name) VALUES (1, 'x') ON DUPLICATE KEY UPDATE id = 9",
        "1235",
    );
    s.refused(
        "INSERT INTO items (id, name) VALUES (1, 'x') ON DUPLICATE KEY UPDATE nope = 1",
        "1054",
    );
    s.refused(
        "INSERT INTO items (id, name) VALUES (1, 'x') ON DUPLICATE KEY UPDATE qty = VALUES(nope)",
        "1054",
    );
    s.refused(
        "INSERT INTO items (id, name) VALUES (9, 'nine'), (1, 'x') ON DUPLICATE KEY UPDATE qty = qty - 100",
        "1690",
    );
    s.refused_with(
        &s.reader,
        Some("app"),
        b"INSERT INTO items (id, name) VALUES (1, 'x') ON DUPLICATE KEY UPDATE qty = 1",
        "1142",
    );
    s.refused_with(
        &s.reader,
        Some("app"),
        b"INSERT IGNORE INTO items (id, name) VALUES (50, 'x')",
        "1142",
    );
    // INSERT IGNORE skips a taken key, and only that: a value the column
    // cannot hold is still an error, never clamped.
    s.refused(
        "INSERT IGNORE INTO items (id, name, qty) VALUES (60, 'sixty', -1)",
        "1264",
    );
    assert_eq!(s.rest_rows().await, before);
    let out =
        s.ok("INSERT IGNORE INTO items (id, name) VALUES (1, 'dup'), (5, 'five'), (5, 'again')");
    assert!(out.contains("1 row affected"), "{out}");
    assert!(
        out.contains("Records: 3  Duplicates: 2  Warnings: 0"),
        "{out}"
    );
    assert_eq!(qty_of("1, 5"), "1\tone\t6\tNULL|5\tfive\t0\tNULL");

    // A UNIQUE index: INSERT IGNORE skips a row whose value is taken; ON
    // DUPLICATE KEY UPDATE updates the row with the key or, if none, the
    // row with the value.
    s.ok("CREATE TABLE people (id INT PRIMARY KEY, email VARCHAR(40) NOT NULL, UNIQUE KEY by_email (email))");
    s.ok("INSERT INTO people VALUES (1, 'a@example.com')");
    let out = s.ok("INSERT IGNORE INTO people VALUES (2, 'a@example.com'), (3, 'b@example.com')");
    assert!(out.contains("1 row affected"), "{out}");
    let out = s.ok("SELECT id, email FROM people ORDER BY id");
    assert_eq!(
        lines(&out)[..],
        ["1\ta@example.com", "3\tb@example.com"],
        "{out}"
    );
    let out = s.ok(
        "INSERT INTO people VALUES (1, 'c@example.com') ON DUPLICATE KEY UPDATE email = VALUES(email)",
    );
    assert!(out.contains("2 rows affected"), "{out}");
    let out = s.ok(
        "INSERT INTO people VALUES (9, 'b@example.com') ON DUPLICATE KEY UPDATE email = 'b2@example.com'",
    );
    assert!(out.contains("2 rows affected"), "{out}");
    // The second row meets the first by its value.
    let out = s.ok(
        "INSERT INTO people VALUES (10, 'd@example.com'), (11, 'd@example.com') \
                    ON DUPLICATE KEY UPDATE email = 'e@example.com'",
    );
    assert!(out.contains("3 rows affected"), "{out}");
    let people = "1\tc@example.com|3\tb2@example.com|10\te@example.com";
    let all = || lines(&s.ok("SELECT id, email FROM people ORDER BY id")).join("|");
    assert_eq!(all(), people);
    // An update to a value another row holds: 1062, nothing changed.
    s.refused(
        "INSERT INTO people VALUES (12, 'new@example.com'), (1, 'x') \
         ON DUPLICATE KEY UPDATE email = 'e@example.com'",
        "1062",
    );
    assert_eq!(all(), people);

    // In a transaction, and PyMySQL's executemany, which folds an
    // INSERT … ON DUPLICATE KEY UPDATE into one statement of many rows.
    let script = r#"
c = connect()
cur = c.cursor()
out = {}
cur.execute("INSERT INTO items (id, name, qty) VALUES (1, 'x', 100) ON DUPLICATE KEY UPDATE qty = qty + VALUES(qty)")
cur.execute("INSERT IGNORE INTO items (id, name) VALUES (7, 'seven')")
cur.execute("SELECT qty FROM items WHERE id = 1")
out["own_view"] = cur.fetchone()[0]
c.rollback()
cur.execute("SELECT COUNT(*) FROM items WHERE id = 7 OR qty > 100")
out["after_rollback"] = cur.fetchone()[0]
out["affected"] = cur.executemany(
    "INSERT INTO items (id, name, qty) VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE qty = qty + VALUES(qty)",
    [(1, "a", 1), (8, "eight", 8), (8, "b", 2)])
c.commit()
cur.execute("SELECT id, qty FROM items WHERE id IN (1, 8)")
out["after_commit"] = [list(r) for r in cur.fetchall()]
# Four clients count into three absent keys at once: each statement
# inserts or adds, none is lost and none fails on a key another took.
out["errors"] = at_once(
    "INSERT INTO items (id, name, qty) VALUES (%s, 'c', 1) ON DUPLICATE KEY UPDATE qty = qty + 1",
    lambda t, i: (100 + (i + t) % 3,), times=30)
cur.execute("SELECT id, qty FROM items WHERE id >= 100 ORDER BY id")
out["counted"] = [list(r) for r in cur.fetchall()]
cur.execute("DELETE FROM items WHERE id >= 100")
c.commit()
print(json.dumps(out))
"#;
    let out = pymysql(&s, script);
    assert_eq!(out["own_view"], 106);
    assert_eq!(out["errors"], json!([]));
    assert_eq!(out["counted"], json!([[100, 40], [101, 40], [102, 40]]));
    assert_eq!(out["after_rollback"], 0);
    assert_eq!(out["affected"], 2 + 1 + 2);
    assert_eq!(out["after_commit"], json!([[1, 7], [8, 10]]));

    // In a transaction, INSERT IGNORE and ON DUPLICATE KEY UPDATE meet
    // rows by their UNIQUE values too, the transaction's own rows among
    // them; and clients counting into one value at once, each with rows
    // of its own keys, meet one row, none lost.
    s.ok(
        "CREATE TABLE visits (id INT PRIMARY KEY, page VARCHAR(20) NOT NULL, \
          hits INT NOT NULL, UNIQUE KEY by_page (page))",
    );
    let script = r#"
c = connect()
cur = c.cursor()
out = {}
out["ignored"] = cur.execute("INSERT IGNORE INTO people VALUES (20, 'c@example.com'), (21, 'f@example.com')")
out["upserted"] = cur.execute("INSERT INTO people VALUES (22, 'f@example.com') ON DUPLICATE KEY UPDATE email = 'g@example.com'")
cur.execute("SELECT id, email FROM people WHERE id >= 20")
out["own_view"] = [list(r) for r in cur.fetchall()]
c.rollback()
out["errors"] = at_once(
    "INSERT INTO visits VALUES (%s, %s, 1) ON DUPLICATE KEY UPDATE hits = hits + 1",
    lambda t, i: (1000 * t + i, "page" + str(i % 2)))
cur.execute("SELECT page, hits FROM visits ORDER BY page")
out["counted"] = [list(r) for r in cur.fetchall()]
print(json.dumps(out))
"#;
    let out = pymysql(&s, script);
    assert_eq!(out["ignored"], 1);
    assert_eq!(out["upserted"], 2);
    assert_eq!(out["own_view"], json!([[21, "g@example.com"]]));
    assert_eq!(out["errors"], json!([]));
    assert_eq!(out["counted"], json!([["page0", 40], ["page1", 40]]));
    assert_eq!(all(), people);

    // As many rows as a statement takes, each second one meeting a row by
    // its value: first one the statement inserted, then one already there.
    s.ok(
        "CREATE TABLE tally (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL, \
          n INT NOT NULL, UNIQUE KEY by_v (v))",
    );
    for first in [0, 20_000] {
        let rows: Vec<String> = (0..10_000)
            .map(|i| format!("({}, 'v{}', 1)", first + i, i % 5000))
            .collect();
        s.ok(&format!(
            "INSERT INTO tally VALUES {} ON DUPLICATE KEY UPDATE n = n + 1",
            rows.join(",")
        ));
    }
    let out = s.ok("SELECT COUNT(*), SUM(n), MAX(id) FROM tally");
    assert_eq!(lines(&out), ["5000\t20000\t4999"], "{out}");
    // What REST reads is what SQL wrote.
    let rows = s.rest_rows().await;
    let got: Vec<(i64, i64)> = rows
        .iter()
        .map(|r| (r["id"].as_i64().unwrap(), r["qty"].as_i64().unwrap()))
        .collect();
    assert_eq!(got, [(1, 7), (2, 12), (3, 4), (4, 1), (5, 0), (8, 10)]);
}

/// REPLACE into a table with UNIQUE indexes deletes every row its row
/// meets, by key or by any UNIQUE value, and counts them as MySQL does
/// (the counts and rows below are MariaDB 10.11's for the same statements).
#[tokio::test]
async fn replace_deletes_every_row_its_row_meets() {
    let s = setup(&[]).await;
    s.ok(
        "CREATE TABLE r (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(10) NOT NULL, \
          u INT, n INT NOT NULL DEFAULT 0, UNIQUE KEY by_k (k), UNIQUE KEY by_u (u))",
    );
    s.ok("INSERT INTO r (k, u, n) VALUES ('a', 1, 1), ('b', 2, 2), ('c', 3, 3)");
    let all = || lines(&s.ok("SELECT * FROM r ORDER BY id")).join("|");
    // Meeting a row by its value: that row deleted, the new one written
    // with the next id.
    let out = s.ok("REPLACE INTO r (k, u, n) VALUES ('a', 10, 5); SELECT LAST_INSERT_ID()");
    assert!(out.contains("2 rows affected"), "{out}");
    assert!(out.contains("\n4\n"), "{out}");
    assert_eq!(all(), "2\tb\t2\t2|3\tc\t3\t3|4\ta\t10\t5");
    // By its key and by a value of another row: both deleted.
    let out = s.ok("REPLACE INTO r (id, k, u) VALUES (2, 'c', 2)");
    assert!(out.contains("3 rows affected"), "{out}");
    assert_eq!(all(), "2\tc\t2\t0|4\ta\t10\t5");
    // Rows in order: a later row deletes the one an earlier one wrote; a
    // NULL meets nothing.
    let out = s.ok("REPLACE INTO r (k, u) VALUES ('x', 10), ('y', 10), ('z', NULL)");
    assert!(out.contains("5 rows affected"), "{out}");
    assert!(
        out.contains("Records: 3  Duplicates: 2  Warnings: 0"),
        "{out}"
    );
    assert_eq!(all(), "2\tc\t2\t0|6\ty\t10\t0|7\tz\tNULL\t0");
    // One row meeting three: its key's row gone, and two others by two
    // indexes.
    s.ok("REPLACE INTO r (k, u) VALUES ('p', 1), ('q', 2)");
    let out = s.ok("REPLACE INTO r (id, k, u) VALUES (2, 'z', 1)");
    assert!(out.contains("3 rows affected"), "{out}");
    let after = "2\tz\t1\t0|6\ty\t10\t0|9\tq\t2\t0";
    assert_eq!(all(), after);
    // The same row again: replaced, 2 affected.
    let out = s.ok("REPLACE INTO r (id, k, u) VALUES (2, 'z', 1)");
    assert!(out.contains("2 rows affected"), "{out}");

    // Refused whole, nothing deleted: a NULL for a NOT NULL column, a value
    // past its column in a later row, a read key.
    s.refused("REPLACE INTO r (k, u) VALUES ('y', 2), (NULL, 5)", "1048");
    s.refused(
        "REPLACE INTO r (k, u) VALUES ('y', 2), ('w', 99999999999)",
        "1264",
    );
    s.refused_with(
        &s.reader,
        Some("app"),
        b"REPLACE INTO r (k, u) VALUES ('y', 2)",
        "1142",
    );
    assert_eq!(all(), after);

    // In a transaction the rows are deleted only at COMMIT; and clients
    // replacing rows of one value at once leave exactly one row holding
    // it, none failing on a row another wrote.
    let script = r#"
c = connect()
cur = c.cursor()
out = {}
out["replaced"] = cur.execute("REPLACE INTO r (k, u) VALUES ('y', 2)")
cur.execute("SELECT k, u FROM r ORDER BY id")
out["own_view"] = [list(r) for r in cur.fetchall()]
c.rollback()
cur.execute("SELECT COUNT(*) FROM r")
out["after_rollback"] = cur.fetchone()[0]
out["errors"] = at_once(
    "REPLACE INTO r (k, u) VALUES (%s, 500)",
    lambda t, i: ("c%d-%d" % (t, i),), times=25)
cur.execute("SELECT COUNT(*) FROM r WHERE u = 500")
out["holders"] = cur.fetchone()[0]
cur.execute("SELECT COUNT(*) FROM r")
out["rows"] = cur.fetchone()[0]
print(json.dumps(out))
"#;
    let out = pymysql(&s, script);
    assert_eq!(out["replaced"], 3, "{out}");
    assert_eq!(out["own_view"], json!([["z", 1], ["y", 2]]), "{out}");
    assert_eq!(out["after_rollback"], 3, "{out}");
    assert_eq!(out["errors"], json!([]), "{out}");
    assert_eq!(out["holders"], 1, "{out}");
    assert_eq!(out["rows"], 4, "{out}");
}

#[tokio::test]
async fn information_schema_shows_the_keys_databases_and_no_one_elses() {
    let s = setup(&[]).await;
    s.ok("CREATE TABLE people (id INT AUTO_INCREMENT PRIMARY KEY, email VARCHAR(40) NOT NULL, age TINYINT UNSIGNED DEFAULT 7, born DATETIME(3) NULL, UNIQUE KEY by_email (email), KEY by_age (age, id))");
    let out =
        s.ok("SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA");
    assert_eq!(lines(&out)[..], ["app\tutf8mb4"], "{out}");
    let out = s.ok("SELECT table_name, table_type, engine FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name");
    assert_eq!(
        lines(&out)[..],
        [
            "items\tBASE TABLE\tndbcluster",
            "people\tBASE TABLE\tndbcluster"
        ],
        "{out}"
    );
    let out = s.ok("SELECT COLUMN_NAME, ORDINAL_POSITION, COLUMN_DEFAULT, IS_NULLABLE, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, DATETIME_PRECISION, COLUMN_TYPE, COLUMN_KEY, EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'people' ORDER BY ORDINAL_POSITION");
    assert_eq!(
        lines(&out)[..],
        [
            "id\t1\tNULL\tNO\tint\tNULL\t10\tNULL\tint\tPRI\tauto_increment",
            "email\t2\tNULL\tNO\tvarchar\t40\tNULL\tNULL\tvarchar(40)\tUNI\t",
            "age\t3\t7\tYES\ttinyint\tNULL\t3\tNULL\ttinyint unsigned\tMUL\t",
            "born\t4\tNULL\tYES\tdatetime\tNULL\tNULL\t3\tdatetime(3)\t\t",
        ],
        "{out}"
    );
    let out = s.ok("SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS WHERE TABLE_NAME = 'people' ORDER BY INDEX_NAME, SEQ_IN_INDEX");
    assert_eq!(
        lines(&out)[..],
        [
            // Byte by byte: upper case first.
            "PRIMARY\t1\tid\t0",
            "by_age\t1\tage\t1",
            "by_age\t2\tid\t1",
            "by_email\t1\temail\t0",
        ],
        "{out}"
    );
    let out = s.ok("SELECT CONSTRAINT_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_NAME = 'people'");
    assert_eq!(lines(&out)[..], ["PRIMARY\tid", "by_email\temail"], "{out}");
    // SHOW says the same.
    let out = s.ok("SHOW COLUMNS FROM people");
    assert_eq!(
        lines(&out)[0],
        "id\tint\tNO\tPRI\tNULL\tauto_increment",
        "{out}"
    );

    // Another tenant's key sees its own database and nothing of this one.
    let other = s.mysql_with(
        &s.other,
        Some("theirs"),
        b"SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES; SELECT SCHEMA_NAME FROM information_schema.SCHEMATA; SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_NAME = 'people'",
    );
    assert!(other.ok, "{}", other.err);
    assert_eq!(
        lines(&other.out)[..],
        ["theirs\titems", "theirs"],
        "{}",
        other.out
    );

    // Whether a table is there, as SQLAlchemy asks it.
    let out = s.ok(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'app' \
         AND table_name = 'people'; SELECT COUNT(*) AS n FROM information_schema.TABLES \
         WHERE TABLE_NAME = 'nope'",
    );
    assert_eq!(lines(&out)[..], ["1", "0"], "{out}");
    s.refused(
        "SELECT COUNT(*) FROM information_schema.TABLES ORDER BY TABLE_NAME",
        "1235",
    );
    // What is not served is a clear error.
    s.refused("SELECT * FROM information_schema.INNODB_TRX", "1235");
    s.refused("SELECT * FROM information_schema.NO_SUCH_TABLE", "1109");
    s.refused("SELECT nope FROM information_schema.TABLES", "1054");
    s.refused(
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE LENGTH(TABLE_NAME) > 3",
        "1235",
    );
    s.refused(
        "SELECT COUNT(*) FROM information_schema.TABLES GROUP BY TABLE_SCHEMA",
        "1235",
    );
    let ran = s.mysql("DELETE FROM information_schema.TABLES");
    assert!(!ran.ok && ran.err.contains("ERROR 10"), "{}", ran.err);
    let out = s.ok("SELECT COUNT(*) FROM people");
    assert_eq!(lines(&out)[..], ["0"], "{out}");
}

#[tokio::test]
async fn update_and_delete_change_the_first_rows_of_an_order_and_limit() {
    let s = setup(&[]).await;
    let values: Vec<String> = (1..=10)
        .map(|id| format!("({id}, 'n{id}', {})", 10 - id))
        .collect();
    s.ok(&format!(
        "INSERT INTO items (id, name, qty) VALUES {}",
        values.join(", ")
    ));
    let ids = |out: String| lines(&out).join(",");
    // The rows first in the order, as many as the LIMIT says.
    let out = s.ok("DELETE FROM items WHERE qty < 8 ORDER BY qty LIMIT 2");
    assert!(out.contains("2 rows affected"), "{out}");
    assert_eq!(
        ids(s.ok("SELECT id FROM items ORDER BY id")),
        "1,2,3,4,5,6,7,8"
    );
    let out = s.ok("DELETE FROM items ORDER BY id DESC LIMIT 1");
    assert!(out.contains("1 row affected"), "{out}");
    // A LIMIT without an order takes any of the rows, no more.
    let out = s.ok("UPDATE items SET qty = 100 WHERE id > 3 LIMIT 2");
    assert!(out.contains("Rows matched: 2  Changed: 2"), "{out}");
    assert_eq!(ids(s.ok("SELECT COUNT(*) FROM items WHERE qty = 100")), "2");
    let out = s.ok("UPDATE items SET name = 'x' WHERE id IN (1, 2, 3) LIMIT 1");
    assert!(out.contains("Rows matched: 1  Changed: 1"), "{out}");
    let out = s.ok("DELETE FROM items WHERE id = 1 LIMIT 0");
    assert!(out.contains("0 rows affected"), "{out}");
    // What is not a row count, or not a column, changes nothing.
    s.refused("DELETE FROM items ORDER BY nope LIMIT 1", "1054");
    s.refused("DELETE FROM items LIMIT 'a'", "1064");
    s.refused("UPDATE items SET qty = 1 LIMIT 1.5", "1064");
    s.refused("UPDATE items SET qty = 1 ORDER BY id LIMIT 1", "1064");
    assert_eq!(
        ids(s.ok("SELECT id FROM items ORDER BY id")),
        "1,2,3,4,5,6,7"
    );
}

#[tokio::test]
async fn quotas_and_rates_refuse_sql_with_rondbs_numbers_and_change_nothing() {
    let s = setup(&[]).await;
    s.ok("INSERT INTO items (id, name) VALUES (1, 'one')");
    // A database at its memory quota: writes that grow memory are refused
    // with RonDB's 239, as a RonDB SQL node answers it; reads and deletes
    // go on.
    let used =
        s.shoal.get_json("/internal/v1/databases/app/quota").await["usage"]["in_memory_bytes"]
            .as_u64()
            .unwrap();
    s.shoal
        .set_quota("app", json!({"in_memory_bytes": used.max(1)}))
        .await;
    let err = s.refused(
        "INSERT INTO items (id, name) VALUES (2, 'two'), (3, 'three')",
        "1296",
    );
    assert!(err.contains("Got error 239"), "{err}");
    assert!(err.contains("from NDBCLUSTER"), "{err}");
    let err = s.refused(
        "INSERT INTO items (id, name) VALUES (1, 'x') ON DUPLICATE KEY UPDATE name = 'a longer name than before'",
        "1296",
    );
    assert!(err.contains("Got error 239"), "{err}");
    let out = s.ok("SELECT id, name FROM items");
    assert_eq!(lines(&out)[..], ["1\tone"], "{out}");

    // A write rate of 1 unit a second: the second write in a second is
    // refused with RonDB's 243, and changes nothing.
    s.shoal
        .set_quota("app", json!({"write_units_per_sec": 1, "burst_seconds": 1}))
        .await;
    let ran = s.mysql(
        "INSERT INTO items (id, name) VALUES (10, 'ten'); INSERT INTO items (id, name) VALUES (11, 'eleven')",
    );
    assert!(!ran.ok, "{}", ran.out);
    assert!(ran.err.contains("ERROR 1296"), "{}", ran.err);
    assert!(ran.err.contains("Got error 243"), "{}", ran.err);
    // More operations in one statement than max_transaction_ops: 247.
    s.shoal
        .set_quota("app", json!({"max_transaction_ops": 3}))
        .await;
    let err = s.refused(
        "INSERT INTO items (id, name) VALUES (20, 'a'), (21, 'b'), (22, 'c'), (23, 'd')",
        "1296",
    );
    assert!(err.contains("Got error 247"), "{err}");
    let ids: Vec<i64> = (s.rest_rows().await.iter())
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 10]);
}

#[tokio::test]
async fn mysqldump_exports_a_database_and_its_file_loads_back() {
    let s = setup(&[]).await;
    s.ok(
        "CREATE TABLE people (id INT PRIMARY KEY, email VARCHAR(40), UNIQUE KEY by_email (email))",
    );
    s.ok("INSERT INTO people VALUES (1, 'a@example.com'), (2, NULL)");
    s.ok("INSERT INTO items (id, name, qty, price, tag) VALUES (7, 'it''s', 3, 1.50, 0x00ff27)");
    // MySQL's executable comments run as SQL, by version; SELECT's hints
    // change nothing.
    let out = s.ok("/*!40101 SET NAMES utf8mb4 */; /*!99999 SET NAMES latin1 */ SELECT 1; SELECT /*!40001 SQL_NO_CACHE */ id FROM people ORDER BY id");
    assert_eq!(lines(&out)[..], ["1", "1", "2"], "{out}");
    // No triggers, views or routines in Shoal: their tables are empty.
    let out = s.ok("SELECT TRIGGER_NAME FROM information_schema.TRIGGERS; SELECT TABLE_NAME FROM information_schema.VIEWS; SELECT ROUTINE_NAME FROM information_schema.ROUTINES");
    assert!(lines(&out).is_empty(), "{out}");
    // Nor disk data files: FILES answers no rows however it is asked, as
    // mysqldump asks it (grouped, filtered with subqueries); its names
    // are still checked.
    let out = s.ok("SELECT LOGFILE_GROUP_NAME, FILE_NAME, EXTRA FROM INFORMATION_SCHEMA.FILES WHERE FILE_TYPE = 'UNDO LOG' AND LOGFILE_GROUP_NAME IN (SELECT DISTINCT LOGFILE_GROUP_NAME FROM INFORMATION_SCHEMA.FILES WHERE FILE_TYPE = 'DATAFILE') GROUP BY LOGFILE_GROUP_NAME, FILE_NAME ORDER BY LOGFILE_GROUP_NAME");
    assert!(lines(&out).is_empty(), "{out}");
    s.refused(
        "SELECT FILE_NAME FROM information_schema.FILES WHERE nope = 1 GROUP BY FILE_NAME",
        "1054",
    );
    s.refused(
        "SELECT FILE_NAME FROM information_schema.FILES GROUP BY nope",
        "1054",
    );
    let out = s.ok("SELECT COUNT(*) FROM information_schema.FILES");
    assert_eq!(lines(&out)[..], ["0"], "{out}");
    s.refused(
        "SELECT COUNT(*) FROM information_schema.FILES GROUP BY FILE_NAME",
        "1235",
    );

    // mysqldump (Debian's, MariaDB's), without table locks, writes every
    // table's definition and rows, and finds no tablespaces to dump.
    let (host, port) = s.host_port();
    let mysqldump = |key: &str, args: &[&str]| {
        let (user, secret) = key.split_once('.').unwrap();
        Command::new("mysqldump")
            .args(["-h", host, "-P", port, "-u", user])
            .arg(format!("-p{secret}"))
            .args(args)
            .output()
            .expect("mysqldump runs (apt: mariadb-client)")
    };
    let out = mysqldump(&s.key, &["--skip-lock-tables", "app"]);
    let dump = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}\n{dump}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dump.contains("CREATE TABLE `people`"), "{dump}");
    assert!(dump.contains("UNIQUE KEY `by_email` (`email`)"), "{dump}");
    assert!(dump.contains("CREATE TABLE `items`"), "{dump}");
    assert!(dump.contains("(7,'it\\'s',3,1.50,NULL,'\\0"), "{dump}");
    let people = dump.split("INSERT INTO `people` VALUES").nth(1).unwrap();
    assert!(people.contains("(1,'a@example.com')"), "{dump}");
    assert!(people.contains("(2,NULL)"), "{dump}");

    // The file mysqldump writes by default — table locks, DISABLE KEYS,
    // user variables saving and restoring settings, a binary column's
    // bytes as they are inside its literals — loads into another database
    // as it is, and the tables there are what they were.
    s.shoal.create_database("acme", "copy").await;
    let both = s
        .shoal
        .create_key("acme", &[("app", "read"), ("copy", "read_write")])
        .await;
    let out = mysqldump(&both, &["app"]);
    let dump = out.stdout;
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&dump).contains("LOCK TABLES `items` WRITE"));
    assert!(
        std::str::from_utf8(&dump).is_err(),
        "the tag's bytes as they are"
    );
    let loaded = s.mysql_with(&both, Some("copy"), &dump);
    assert!(loaded.ok, "{}", loaded.err);
    let select = "SELECT id, name, qty, price, tag FROM items; SELECT id, email FROM people ORDER BY id; SHOW CREATE TABLE people";
    let copy = s.mysql_with(&both, Some("copy"), select.as_bytes());
    assert!(copy.ok, "{}", copy.err);
    assert_eq!(copy.out, s.ok(select));
    // The locks and key toggles are held to the grants: a read key may
    // lock for reading only.
    s.refused_with(
        &both,
        Some("app"),
        b"LOCK TABLES people READ, items WRITE",
        "1142",
    );
    s.refused_with(
        &both,
        Some("app"),
        b"ALTER TABLE items DISABLE KEYS",
        "1142",
    );
    s.refused_with(&both, Some("copy"), b"LOCK TABLES nope WRITE", "1146");
    s.refused_with(&both, Some("copy"), b"LOCK TABLES items", "1064");
    let out = s.mysql_with(
        &both,
        Some("app"),
        b"LOCK TABLES people READ, app.items AS i READ LOCAL; UNLOCK TABLES",
    );
    assert!(out.ok, "{}", out.err);

    // User variables: set from literals, system variables and each other,
    // read wherever a value goes; an unset one is NULL; an expression is
    // not taken.
    let out = s.ok("SET @a = 7, @B := @@max_allowed_packet, @c = -2, @d = @a; SELECT @a, @c, @d, @nothing; SELECT @b, @@max_allowed_packet; SELECT name FROM items WHERE id = @A");
    let out = lines(&out);
    assert_eq!(out[0], "7\t-2\t7\tNULL");
    let (b, packet) = out[1].split_once('\t').unwrap();
    assert_eq!(b, packet);
    assert_eq!(out[2], "it's");
    s.refused("SET @a = 1 + 1", "1235");
    // A variable selected is a column named after it, as in MySQL.
    let out = pymysql(
        &s,
        r#"
cur = connect().cursor()
cur.execute("SET @a = 7")
cur.execute("SELECT @a, @a AS named, @nothing")
print(json.dumps({"names": [d[0] for d in cur.description], "row": list(cur.fetchone())}))
"#,
    );
    assert_eq!(out["names"], json!(["@a", "named", "@nothing"]));
    assert_eq!(out["row"], json!([7, 7, null]));
    // A dump of whole databases (`--databases`, which begins each with
    // CREATE DATABASE IF NOT EXISTS and USE), with the triggers, events
    // and stored routines mysqldump asks for — Shoal has none — loads
    // back over the database it came from.
    let out = mysqldump(
        &s.key,
        &["--databases", "--routines", "--events", "--triggers", "app"],
    );
    let dump = out.stdout;
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&dump).contains("CREATE DATABASE /*!32312 IF NOT EXISTS*/ `app`")
    );
    let before = s.ok(select);
    s.ok("DELETE FROM people; UPDATE items SET qty = 0");
    let loaded = s.mysql_with(&s.key, None, &dump);
    assert!(loaded.ok, "{}", loaded.err);
    assert_eq!(s.ok(select), before);
    let out = s.ok("SHOW TRIGGERS; SHOW TRIGGERS FROM app LIKE 'items'; SHOW EVENTS; SHOW FUNCTION STATUS WHERE Db = 'app'; SHOW PROCEDURE STATUS LIKE '%'");
    assert!(lines(&out).is_empty(), "{out}");
    s.refused("SHOW TRIGGERS FROM theirs", "1044");
    s.refused("SHOW FUNCTION STATUS WHERE nope = 'app'", "1054");
    s.refused("SHOW EVENTS WHERE Db = 'app' AND", "1064");
    // CREATE DATABASE confirms one the key may change; databases are
    // made in the control plane, with their quotas.
    let out = s.ok("CREATE DATABASE IF NOT EXISTS app; CREATE SCHEMA IF NOT EXISTS app DEFAULT CHARACTER SET = utf8mb4 COLLATE utf8mb4_bin; SHOW CREATE DATABASE app; SHOW CREATE SCHEMA IF NOT EXISTS app");
    assert_eq!(
        lines(&out),
        [
            "app\tCREATE DATABASE `app` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin */",
            "app\tCREATE DATABASE /*!32312 IF NOT EXISTS*/ `app` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin */",
        ],
        "{out}"
    );
    s.refused("CREATE DATABASE app", "1007");
    s.refused(
        "CREATE DATABASE IF NOT EXISTS app CHARACTER SET latin1",
        "1235",
    );
    s.refused("CREATE DATABASE IF NOT EXISTS app ENCRYPTION = 'Y'", "1235");
    s.refused("CREATE DATABASE IF NOT EXISTS app CHARACTER SET", "1064");
    s.refused("CREATE DATABASE", "1064");
    let err = s.refused("CREATE DATABASE fresh", "1044");
    assert!(err.contains("control plane"), "{err}");
    s.refused("CREATE DATABASE IF NOT EXISTS theirs", "1044");
    s.refused("SHOW CREATE DATABASE theirs", "1044");
    s.refused_with(
        &s.reader,
        Some("app"),
        b"CREATE DATABASE IF NOT EXISTS app",
        "1044",
    );
    assert_eq!(lines(&s.ok("SHOW DATABASES"))[..], ["app"]);

    // The other tenant's database is not there to dump.
    let out = mysqldump(&s.key, &["--skip-lock-tables", "theirs"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("1044"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `SHOW STATUS`, `information_schema.GLOBAL_STATUS` and `mysqladmin`
/// count what the key's tenant does on the node (GLOBAL) and what the
/// connection does (SESSION); another tenant's statements are not in them.
#[tokio::test]
async fn status_counts_the_tenants_work_and_no_one_elses() {
    let s = setup(&[]).await;
    let value = |out: &str| -> u64 {
        let line = lines(out).pop().expect("a row");
        line.split('\t').nth(1).unwrap().parse().unwrap()
    };
    let global = |key: &str, db: &str, name: &str| -> u64 {
        let sql = format!("SHOW GLOBAL STATUS LIKE '{name}'");
        let ran = s.mysql_with(key, Some(db), sql.as_bytes());
        assert!(ran.ok, "{}", ran.err);
        value(&ran.out)
    };
    let selects = global(&s.key, "app", "Com_select");
    s.ok("SELECT 1; SELECT name FROM items WHERE id = 1; INSERT INTO items (id, name, qty) VALUES (5, 'x', 1)");
    assert_eq!(global(&s.key, "app", "Com_select"), selects + 2);
    assert_eq!(global(&s.key, "app", "Com_insert"), 1);
    // The tenant's read key sees the tenant's counts; the other tenant,
    // only its own.
    assert_eq!(global(&s.reader, "app", "Com_insert"), 1);
    let theirs = "SELECT 1; SELECT 2; SELECT name FROM items WHERE id = 3";
    assert!(s.mysql_with(&s.other, Some("theirs"), theirs.as_bytes()).ok);
    assert_eq!(global(&s.other, "theirs", "Com_select"), 3);
    assert_eq!(global(&s.other, "theirs", "Com_insert"), 0);
    assert_eq!(global(&s.key, "app", "Com_select"), selects + 2);
    assert_eq!(global(&s.other, "theirs", "Threads_connected"), 1);

    // SESSION: the connection's own statements.
    let out = s.ok("SELECT 1; SHOW SESSION STATUS LIKE 'Com_select'; SHOW STATUS WHERE Variable_name = 'Questions' OR Variable_name = 'Com_insert'");
    assert_eq!(
        lines(&out)[1..],
        ["Com_select\t1", "Com_insert\t0", "Questions\t3"],
        "{out}"
    );

    // Names and values compare without regard to case, as in MySQL.
    let out = s.ok("SHOW GLOBAL STATUS WHERE variable_name = 'uptime' OR Variable_name LIKE 'COM_INS%'; SHOW VARIABLES WHERE Variable_name = 'AUTOCOMMIT' AND Value = '1'");
    let names: Vec<&str> = lines(&out)
        .iter()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(names, ["Com_insert", "Uptime", "autocommit"], "{out}");

    // A driver's prepared statements: prepared once, executed five times.
    let mut conn = sqlx::MySqlConnection::connect_with(&s.driver_options())
        .await
        .unwrap();
    for id in 1..=5i64 {
        sqlx::query("SELECT qty FROM items WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
    }
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SHOW SESSION STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_execute', 'Com_select')",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let rows: Vec<(&str, &str)> = rows.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    assert_eq!(
        rows,
        [
            ("Com_select", "5"),
            ("Com_stmt_execute", "6"),
            ("Com_stmt_prepare", "2")
        ]
    );
    // The driver's connection and the client's: two of the tenant's.
    assert_eq!(global(&s.key, "app", "Threads_connected"), 2);
    let out = s.ok("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('COM_INSERT', 'THREADS_RUNNING') ORDER BY VARIABLE_NAME; SELECT VARIABLE_VALUE FROM information_schema.SESSION_VARIABLES WHERE VARIABLE_NAME = 'PORT'");
    let (_, port) = s.host_port();
    assert_eq!(lines(&out), ["1", "1", port], "{out}");
    assert_eq!(
        lines(&s.ok("SELECT @@port, @@server_id, @@read_only, @@super_read_only, @@hostname"))[0],
        format!("{port}\t1\t0\t0\tshoal-node-1")
    );
    // Typed as MySQL types them: a boolean a signed BIGINT, a size an
    // unsigned one (sqlx reads each only as its own).
    let row =
        sqlx::query("SELECT @@autocommit, @@sql_safe_updates, @@max_allowed_packet, @@hostname")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!((row.get::<i64, _>(0), row.get::<i64, _>(1)), (1, 0));
    assert!(row.get::<u64, _>(2) >= 1 << 20);
    assert_eq!(row.get::<String, _>(3), "shoal-node-1");
    conn.close().await.unwrap();

    // mysqladmin's status line and its extended-status table.
    let (host, port) = s.host_port();
    let (user, secret) = s.key.split_once('.').unwrap();
    let mysqladmin = |command: &str| {
        let out = Command::new("mysqladmin")
            .args(["-h", host, "-P", port, "-u", user])
            .arg(format!("-p{secret}"))
            .arg(command)
            .output()
            .expect("mysqladmin runs (apt: mariadb-client)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let status = mysqladmin("status");
    assert!(status.starts_with("Uptime: "), "{status}");
    assert!(status.contains("  Threads: 1  Questions: "), "{status}");
    let extended = mysqladmin("extended-status");
    assert!(
        extended.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["|", "Com_insert", "|", "1", "|"]),
        "{extended}"
    );

    // Bad conditions are errors naming what is wrong.
    s.refused("SHOW STATUS WHERE", "1064");
    s.refused("SHOW STATUS WHERE nope = 'x'", "1054");
    s.refused("SHOW STATUS WHERE Value = 1", "1366");
    s.refused("SHOW STATUS WHERE Variable_name = 'a' garbage", "1064");
    s.refused("SHOW VARIABLES WHERE LOWER(Variable_name) = 'port'", "1235");
    let deep = format!(
        "SHOW STATUS WHERE {}Value = 'x'{}",
        "(".repeat(40),
        ")".repeat(40)
    );
    s.refused(&deep, "1105");
    s.refused("SHOW STATUS LIKE 5", "1235");
    // Table maintenance, as mysqlcheck asks it: not supported, by name.
    for sql in [
        "CHECK TABLE items",
        "OPTIMIZE LOCAL TABLE items",
        "REPAIR NO_WRITE_TO_BINLOG TABLE items",
        "CHECKSUM TABLE items",
    ] {
        let err = s.refused(sql, "1235");
        assert!(err.contains("TABLE: Shoal's tables are in memory"), "{err}");
    }
}

/// Polls the key's connections (through `watcher`) until one runs a
/// statement containing `text`: its id and `Command`. Bounded: 600 looks.
async fn running(watcher: &mut sqlx::MySqlConnection, text: &str) -> (i64, String) {
    for _ in 0..600 {
        let rows = sqlx::query("SELECT ID, COMMAND, INFO FROM information_schema.PROCESSLIST")
            .fetch_all(&mut *watcher)
            .await
            .unwrap();
        for row in rows {
            let info: Option<String> = row.get(2);
            if info.is_some_and(|i| i.contains(text)) {
                return (row.get(0), row.get(1));
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no connection runs {text}")
}

/// The MySQL error number of a driver's error.
fn number(e: &sqlx::Error) -> u16 {
    let db = e.as_database_error().expect("a server error");
    db.downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .number()
}

/// `SHOW PROCESSLIST` and `information_schema.PROCESSLIST` list the key's
/// own connections; `KILL QUERY` interrupts a statement waiting for a
/// row (1317, its transaction rolled back), `KILL` ends a connection and
/// rolls its transaction back; the `mysql` client's Ctrl-C does the
/// same as MySQL's; another key's connections are not there for a caller.
#[tokio::test]
async fn processlist_shows_and_kill_ends_only_the_keys_own_connections() {
    // Lock waits last a minute: only a KILL ends them sooner.
    let s = setup(&["--lock-wait-timeout", "60000"]).await;
    s.ok("INSERT INTO items (id, name, qty) VALUES (1, 'one', 1), (2, 'two', 2)");
    let options = s.driver_options();
    let mut holder = sqlx::MySqlConnection::connect_with(&options).await.unwrap();
    let mut waiter = sqlx::MySqlConnection::connect_with(&options).await.unwrap();
    let mut watcher = sqlx::MySqlConnection::connect_with(&options).await.unwrap();
    // BIGINT UNSIGNED, as MySQL's: sqlx reads it only as unsigned. The
    // process list's ids are signed BIGINTs.
    let id_of = async |c: &mut sqlx::MySqlConnection| -> i64 {
        let id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
            .fetch_one(c)
            .await
            .unwrap();
        i64::try_from(id).unwrap()
    };
    let (holder_id, waiter_id) = (id_of(&mut holder).await, id_of(&mut waiter).await);

    // Each connection of the key, idle ones asleep; the one asking runs
    // SHOW PROCESSLIST (a prepared statement: sqlx prepares everything).
    let list = sqlx::query("SHOW FULL PROCESSLIST")
        .fetch_all(&mut watcher)
        .await
        .unwrap();
    assert_eq!(list.len(), 3);
    let ids: Vec<i64> = list.iter().map(|r| r.get(0)).collect();
    assert!(
        ids.contains(&holder_id) && ids.contains(&waiter_id),
        "{ids:?}"
    );
    let holder_row = list
        .iter()
        .find(|r| r.get::<i64, _>(0) == holder_id)
        .unwrap();
    let user = s.key.split_once('.').unwrap().0;
    assert_eq!(holder_row.get::<String, _>(1), user);
    assert!(holder_row.get::<String, _>(2).starts_with("127.0.0.1:"));
    assert_eq!(
        holder_row.get::<Option<String>, _>(3).as_deref(),
        Some("app")
    );
    assert_eq!(holder_row.get::<String, _>(4), "Sleep");
    assert_eq!(holder_row.get::<Option<String>, _>(7), None);
    let own = list
        .iter()
        .find(|r| r.get::<String, _>(4) != "Sleep")
        .unwrap();
    assert_eq!(own.get::<String, _>(4), "Execute");
    assert_eq!(own.get::<String, _>(6), "executing");
    assert_eq!(
        own.get::<Option<String>, _>(7).as_deref(),
        Some("SHOW FULL PROCESSLIST")
    );

    // Another tenant's key, and a read key of the same tenant, see only
    // their own connection and end no one else's.
    for (key, db) in [(&s.other, "theirs"), (&s.reader, "app")] {
        let ran = s.mysql_with(key, Some(db), b"SHOW PROCESSLIST");
        assert!(ran.ok, "{}", ran.err);
        let rows = lines(&ran.out);
        assert_eq!(rows.len(), 1, "{}", ran.out);
        assert!(rows[0].contains("\tQuery\t"), "{}", ran.out);
        assert!(
            rows[0].contains(key.split_once('.').unwrap().0),
            "{}",
            ran.out
        );
        s.refused_with(
            key,
            Some(db),
            format!("KILL {holder_id}").as_bytes(),
            "1095",
        );
        s.refused_with(
            key,
            Some(db),
            format!("KILL QUERY {waiter_id}").as_bytes(),
            "1095",
        );
    }
    s.refused("KILL 4000000000", "1094");
    s.refused("KILL QUERY 99999999999999999999999", "1064");
    s.refused("KILL 'x'", "1064");
    s.refused("KILL -1", "1064");
    s.refused("KILL MUTATION 1", "1064");
    s.refused("SHOW PROCESSLIST LIKE 'x'", "1064");

    // The holder takes row 1; the waiter asks for it in its transaction,
    // a prepared locking read, and waits.
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("UPDATE items SET qty = 10 WHERE id = 1")
        .execute(&mut holder)
        .await
        .unwrap();
    sqlx::query("BEGIN").execute(&mut waiter).await.unwrap();
    sqlx::query("UPDATE items SET qty = 20 WHERE id = 2")
        .execute(&mut waiter)
        .await
        .unwrap();
    // Padded past the 100 characters SHOW PROCESSLIST shows of it.
    let padded = format!(
        "SELECT qty FROM items /* {} */ WHERE id = ? FOR UPDATE",
        "p".repeat(150)
    );
    let sent = padded.clone();
    let waiting = tokio::spawn(async move {
        let read = sqlx::query_scalar::<_, u32>(&sent)
            .bind(1i64)
            .fetch_one(&mut waiter)
            .await;
        (read, waiter)
    });
    let (id, command) = running(&mut watcher, "FOR UPDATE").await;
    assert_eq!((id, command.as_str()), (waiter_id, "Execute"));
    let out = s.ok("SHOW PROCESSLIST");
    let row = lines(&out)
        .into_iter()
        .find(|l| l.starts_with(&format!("{waiter_id}\t")));
    let info = row.and_then(|r| r.rsplit('\t').next());
    assert_eq!(info, Some(&padded[..100]), "{out}");
    let out = s.ok("SHOW FULL PROCESSLIST");
    assert!(out.contains(&padded), "{out}");
    sqlx::query(&format!("KILL QUERY {waiter_id}"))
        .execute(&mut watcher)
        .await
        .unwrap();
    let (read, mut waiter) = waiting.await.unwrap();
    let e = read.unwrap_err();
    assert_eq!(number(&e), 1317, "{e}");
    assert!(e.to_string().contains("rolled back"), "{e}");
    // The waiter's connection goes on; its transaction (row 2) is gone.
    let qty: u32 = sqlx::query_scalar("SELECT qty FROM items WHERE id = 2")
        .fetch_one(&mut waiter)
        .await
        .unwrap();
    assert_eq!(qty, 2);
    // A KILL QUERY of an idle connection changes nothing for it.
    sqlx::query(&format!("KILL QUERY {waiter_id}"))
        .execute(&mut watcher)
        .await
        .unwrap();
    let one: i64 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut waiter)
        .await
        .unwrap();
    assert_eq!(one, 1);

    // The mysql client's Ctrl-C, while its statement waits for row 1:
    // it sends KILL QUERY on a connection of its own.
    let (host, port) = s.host_port();
    let (prefix, secret) = s.key.split_once('.').unwrap();
    let client = Command::new("mysql")
        .args(["-h", host, "-P", port, "-u", prefix, "--batch", "-N"])
        .arg(format!("-p{secret}"))
        .args([
            "app",
            "-e",
            "BEGIN; SELECT qty FROM items WHERE id = 1 FOR UPDATE; SELECT 'after'",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the mysql client runs (apt: mariadb-client)");
    let (_, command) = running(&mut watcher, "FOR UPDATE").await;
    assert_eq!(
        command, "Query",
        "the mysql client sends its statements as text"
    );
    let pid = client.id().to_string();
    let signalled = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(signalled.success());
    let output = tokio::task::spawn_blocking(move || client.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(out.contains("Ctrl-C -- query killed"), "{out} / {err}");
    assert!(err.contains("ERROR 1317"), "{out} / {err}");

    // KILL of the holder: its connection ends, its change is undone and
    // row 1 free at once.
    sqlx::query(&format!("KILL {holder_id}"))
        .execute(&mut watcher)
        .await
        .unwrap();
    assert!(sqlx::query("SELECT 1").execute(&mut holder).await.is_err());
    let updated = sqlx::query("UPDATE items SET qty = qty + 1 WHERE id = 1")
        .execute(&mut waiter)
        .await
        .unwrap();
    assert_eq!(updated.rows_affected(), 1);
    let qty: u32 = sqlx::query_scalar("SELECT qty FROM items WHERE id = 1")
        .fetch_one(&mut waiter)
        .await
        .unwrap();
    assert_eq!(qty, 2, "the holder's qty = 10 was rolled back");
    let left: Vec<i64> = sqlx::query_scalar("SELECT ID FROM information_schema.PROCESSLIST")
        .fetch_all(&mut watcher)
        .await
        .unwrap();
    assert!(!left.contains(&holder_id), "{left:?}");

    // KILL of one's own connection interrupts the KILL, then closes it.
    let watcher_id = id_of(&mut watcher).await;
    let e = sqlx::query(&format!("KILL {watcher_id}"))
        .execute(&mut watcher)
        .await
        .unwrap_err();
    assert_eq!(number(&e), 1317, "{e}");
    assert!(sqlx::query("SELECT 1").execute(&mut watcher).await.is_err());
}
