//! The console in a real browser: headless Chromium driven over WebDriver
//! (Debian's `chromium` and `chromium-driver`, installed by scripts/test).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::control::{Backend, Control};
use fantoccini::{Client, ClientBuilder, Locator};

const SECRET: &str = common::control::CLUSTER_SECRET;
/// Longest a page may take to show what is waited for: a guard against a
/// hang, not a timing the test relies on.
const GUARD: Duration = Duration::from_secs(60);

/// chromedriver on a free port, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn driver() -> Driver {
    let port = common::free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver is installed (apt: chromium-driver; scripts/test installs it)");
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let started = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(started.elapsed() < GUARD, "chromedriver never listened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    driver
}

async fn browser(driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a Chromium session")
}

/// Waits until the page's text has one of `texts`; answers the text. A
/// page being replaced meanwhile is read again.
async fn wait_for_any(browser: &Client, texts: &[&str]) -> String {
    let started = Instant::now();
    loop {
        let body = match browser.find(Locator::Css("body")).await {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if texts.iter().any(|t| body.contains(t)) {
            return body;
        }
        assert!(
            started.elapsed() < GUARD,
            "the page never said any of {texts:?}; it says {body:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_for_text(browser: &Client, text: &str) -> String {
    wait_for_any(browser, &[text]).await
}

async fn fill(browser: &Client, field: &str, value: &str) {
    let input = browser
        .find(Locator::Css(&format!("input[name='{field}']")))
        .await
        .unwrap();
    input.clear().await.unwrap();
    input.send_keys(value).await.unwrap();
}

/// Chooses `value` in the list named `field`.
async fn choose(browser: &Client, field: &str, value: &str) {
    let list = browser
        .find(Locator::Css(&format!("select[name='{field}']")))
        .await
        .unwrap();
    list.select_by_value(value).await.unwrap();
}

/// Ticks the checkbox named `field`.
async fn tick(browser: &Client, field: &str) {
    let checkbox = browser
        .find(Locator::Css(&format!("input[name='{field}']")))
        .await
        .unwrap();
    checkbox.click().await.unwrap();
}

/// Submits `form` and waits until the page it leads to has loaded: until
/// then the old page is still there, and what it says (or a navigation
/// away from it) would race the answer.
async fn submit(browser: &Client, form: &str) {
    browser
        .execute("window.shoalBeforeSubmit = true", vec![])
        .await
        .unwrap();
    browser
        .find(Locator::Css(&format!("{form} button[type='submit']")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let started = Instant::now();
    loop {
        let loaded = browser
            .execute(
                "return window.shoalBeforeSubmit === undefined && document.readyState === 'complete'",
                vec![],
            )
            .await;
        if loaded.is_ok_and(|v| v == serde_json::Value::Bool(true)) {
            return;
        }
        assert!(
            started.elapsed() < GUARD,
            "submitting {form} never led to a page"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn sign_up(browser: &Client, console: &str, tenant: &str, email: &str) {
    browser.goto(&format!("{console}/signup")).await.unwrap();
    fill(browser, "tenant_name", tenant).await;
    fill(browser, "email", email).await;
    fill(browser, "password", "a long password").await;
    submit(browser, "form[action='/signup']").await;
    wait_for_text(browser, "Databases").await;
}

/// Creates database `name` from the dashboard's form: until the node has
/// registered, the console says so next to the field, and the form is sent
/// again.
async fn create_database(browser: &Client, console: &str, name: &str) {
    let started = Instant::now();
    loop {
        fill(browser, "name", name).await;
        submit(browser, "form[action='/databases']").await;
        let body = wait_for_any(browser, &[&format!("Database {name}"), "no data node"]).await;
        if body.contains(&format!("Database {name}")) {
            return;
        }
        assert!(body.contains("no data node"), "{body}");
        assert!(started.elapsed() < GUARD, "the node never registered");
        browser.goto(console).await.unwrap();
    }
}

#[tokio::test]
async fn in_a_browser_a_tenant_signs_up_and_creates_a_database_no_one_else_sees() {
    let cp = Control::start_with(Backend::Sqlite, &["--cluster-secret", SECRET]);
    let disk = tempfile::tempdir().unwrap();
    let node = cp.data_node(disk.path(), &[]);
    let console = cp.shoal.control_url.clone();
    let driver = driver().await;
    let ada = browser(&driver).await;

    // Not signed in: the login page; from there, sign up.
    ada.goto(&console).await.unwrap();
    assert!(ada.current_url().await.unwrap().path().ends_with("/login"));
    shot(&ada, "login").await;
    sign_up(&ada, &console, "analytical", "ada@example.com").await;

    create_database(&ada, &console, "shop").await;
    let page = wait_for_text(&ada, "Connect").await;
    assert!(
        page.contains(&node.rest_url) && page.contains("redis-cli"),
        "{page}"
    );
    ada.goto(&console).await.unwrap();
    let dashboard = wait_for_text(&ada, "shop").await;
    assert!(dashboard.contains("analytical"), "{dashboard}");

    // A second tenant, in another browser, never sees it.
    let bob = browser(&driver).await;
    sign_up(&bob, &console, "builders", "bob@example.com").await;
    let theirs = bob
        .find(Locator::Css("main"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!theirs.contains("shop"), "{theirs}");
    bob.goto(&format!("{console}/databases/shop"))
        .await
        .unwrap();
    wait_for_text(&bob, "Not found").await;

    // Log out: back to the login page, and the dashboard is closed.
    submit(&ada, "form[action='/logout']").await;
    wait_for_text(&ada, "Log in").await;
    ada.goto(&console).await.unwrap();
    wait_for_text(&ada, "Log in").await;

    ada.close().await.unwrap();
    bob.close().await.unwrap();
}

/// With `SHOAL_SCREENSHOTS=<dir>` (scripts/screenshots), saves what the
/// browser shows as `<dir>/<name>.png`; otherwise nothing.
async fn shot(browser: &Client, name: &str) {
    if let Some(dir) = std::env::var_os("SHOAL_SCREENSHOTS") {
        let png = browser.screenshot().await.unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(std::path::Path::new(&dir).join(format!("{name}.png")), png).unwrap();
    }
}

/// The text of the first element `css` selects.
async fn text_of(browser: &Client, css: &str) -> String {
    browser
        .find(Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn in_a_browser_an_operator_lowers_a_quota_and_the_tenant_is_held_to_it() {
    let cp = Control::start_env(
        Backend::Sqlite,
        &[
            "--cluster-secret",
            SECRET,
            "--admin-email",
            "ops@example.com",
            "--metering-interval",
            "1s",
        ],
        &[("SHOAL_ADMIN_PASSWORD", "an operator's password")],
    );
    let disk = tempfile::tempdir().unwrap();
    let node = cp.data_node(disk.path(), &[]);
    let console = cp.shoal.control_url.clone();
    let driver = driver().await;
    let ada = browser(&driver).await;
    sign_up(&ada, &console, "analytical", "ada@example.com").await;
    create_database(&ada, &console, "shop").await;

    // A table from the column editor: "Add column" makes a fifth row.
    fill(&ada, "table_name", "events").await;
    fill(&ada, "col0_name", "id").await;
    choose(&ada, "col0_type", "BIGINT").await;
    tick(&ada, "col0_key").await;
    fill(&ada, "col1_name", "body").await;
    choose(&ada, "col1_type", "VARCHAR").await;
    fill(&ada, "col1_len", "1000").await;
    ada.find(Locator::Css("#add-column"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    fill(&ada, "col4_name", "note").await;
    choose(&ada, "col4_type", "VARCHAR").await;
    fill(&ada, "col4_len", "100").await;
    tick(&ada, "col4_nullable").await;
    submit(&ada, "#new-table").await;
    wait_for_text(&ada, "Table events").await;
    ada.goto(&format!("{console}/databases/shop"))
        .await
        .unwrap();
    wait_for_text(&ada, "events").await;
    shot(&ada, "database").await;

    // A key: its secret is shown once, on the page that made it.
    ada.goto(&format!("{console}/keys")).await.unwrap();
    fill(&ada, "name", "ingest").await;
    submit(&ada, "form[action='/keys']").await;
    wait_for_text(&ada, "Your new key").await;
    let key = text_of(&ada, "#new-key").await;
    assert!(key.len() > 40 && key.contains('.'), "{key:?}");
    ada.goto(&format!("{console}/keys")).await.unwrap();
    let list = wait_for_text(&ada, "ingest").await;
    assert!(!list.contains(&key), "the secret is never shown again");
    shot(&ada, "keys").await;
    ada.goto(&format!("{console}/sql")).await.unwrap();
    submit(&ada, "form[action='/sql']").await;
    let result = wait_for_text(&ada, "Result").await;
    assert!(result.contains("events"), "{result}");
    shot(&ada, "sql").await;

    // Rows written with the key show in the table's memory.
    let http = reqwest::Client::new();
    let write = |id: i64| {
        http.post(format!("{}/0.1.0/shop/events/pk-write", node.rest_url))
            .header("X-API-KEY", &key)
            .json(&serde_json::json!({"row": {"id": id, "body": "x".repeat(900)}}))
            .send()
    };
    for id in 0..50 {
        assert_eq!(write(id).await.unwrap().status(), reqwest::StatusCode::OK);
    }
    ada.goto(&format!("{console}/databases/shop"))
        .await
        .unwrap();
    let memory = text_of(&ada, "#tables td.memory").await;
    assert!(
        memory.contains("KiB") || memory.contains("MiB"),
        "{memory:?}"
    );

    // An operator lowers the database's memory quota below what it holds.
    let ops = browser(&driver).await;
    ops.goto(&format!("{console}/login")).await.unwrap();
    fill(&ops, "email", "ops@example.com").await;
    fill(&ops, "password", "an operator's password").await;
    submit(&ops, "form[action='/login']").await;
    wait_for_text(&ops, "Tenants").await;
    shot(&ops, "operator-tenants").await;
    ops.find(Locator::LinkText("analytical"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let tenant_page = wait_for_text(&ops, "Audit trail").await;
    assert!(
        tenant_page.contains("Usage")
            && tenant_page.contains("30d")
            && tenant_page.contains("Read and write units per second"),
        "{tenant_page}"
    );
    // Over a range chosen from four, as a database's; any other refused.
    let tenant_url = ops.current_url().await.unwrap().to_string();
    ops.goto(&format!("{tenant_url}?range=1y")).await.unwrap();
    wait_for_text(&ops, "No such range").await;
    ops.goto(&format!("{tenant_url}?range=7d")).await.unwrap();
    wait_for_text(&ops, "Audit trail").await;
    let form = "form[action$='/databases/shop/quota']";
    let memory_field = ops
        .find(Locator::Css(&format!(
            "{form} input[name='in_memory_bytes']"
        )))
        .await
        .unwrap();
    // Quotas in people's units: a value that is not a whole number of
    // bytes is refused, not rounded; 32 KiB is 32768 bytes.
    memory_field.send_keys("0.1 KiB").await.unwrap();
    submit(&ops, form).await;
    wait_for_text(&ops, "nothing is rounded").await;
    let memory_field = ops
        .find(Locator::Css(&format!(
            "{form} input[name='in_memory_bytes']"
        )))
        .await
        .unwrap();
    memory_field.clear().await.unwrap();
    memory_field.send_keys("32 KiB").await.unwrap();
    submit(&ops, form).await;
    let trail = wait_for_text(&ops, "database.quota.set").await;
    assert!(trail.contains("\"in_memory_bytes\":32768"), "{trail}");
    let shown = ops
        .find(Locator::Css(&format!(
            "{form} input[name='in_memory_bytes']"
        )))
        .await
        .unwrap();
    assert_eq!(
        shown.prop("value").await.unwrap().as_deref(),
        Some("32 KiB")
    );
    shot(&ops, "operator-tenant").await;
    ops.goto(&format!("{console}/admin/datanodes"))
        .await
        .unwrap();
    let nodes = wait_for_text(&ops, "Data nodes").await;
    assert!(
        nodes.contains("up") && nodes.contains(&node.rest_url),
        "{nodes}"
    );
    shot(&ops, "operator-datanodes").await;
    ops.goto(&format!("{console}/admin/audit")).await.unwrap();
    let log = wait_for_text(&ops, "Audit log").await;
    assert!(
        log.contains("database.quota.set") && log.contains("ops@example.com"),
        "{log}"
    );
    ops.goto(&format!("{console}/?sort=memory")).await.unwrap();
    let sorted = wait_for_text(&ops, "Tenants").await;
    assert!(sorted.contains("analytical"), "{sorted}");

    // The next write through the key is refused with the quota error, and
    // the tenant's dashboard shows the database at 100%.
    let refused = write(1000).await.unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::INSUFFICIENT_STORAGE);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "MEMORY_QUOTA");
    ada.goto(&console).await.unwrap();
    let dashboard = wait_for_text(&ada, "memory quota reached").await;
    assert!(dashboard.contains("(100%)"), "{dashboard}");

    // Metering fills in the last hour: the refusal on the dashboard, and
    // the memory chart on the database's page.
    let started = Instant::now();
    loop {
        ada.goto(&console).await.unwrap();
        let recent = text_of(&ada, "td.recent").await;
        if recent.contains("1 refused by a quota") {
            shot(&ada, "dashboard").await;
            // And on a phone's width.
            ada.set_window_size(390, 844).await.unwrap();
            shot(&ada, "dashboard-phone").await;
            ada.goto(&format!("{console}/keys")).await.unwrap();
            wait_for_text(&ada, "ingest").await;
            shot(&ada, "keys-phone").await;
            ada.goto(&format!("{console}/databases/shop"))
                .await
                .unwrap();
            wait_for_text(&ada, "Usage").await;
            shot(&ada, "database-phone").await;
            ada.set_window_size(1280, 900).await.unwrap();
            break;
        }
        assert!(
            started.elapsed() < GUARD,
            "the refusal was never metered: {recent:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let started = Instant::now();
    loop {
        ada.goto(&format!("{console}/databases/shop"))
            .await
            .unwrap();
        if ada.find(Locator::Css(".chart svg polyline")).await.is_ok() {
            shot(&ada, "database-chart").await;
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(150),
            "no memory chart"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The operator's view of the data node: its DataMemory in use against
    // its size, and what it admitted, as charts; the same on a phone.
    ops.goto(&format!("{console}/admin/datanodes"))
        .await
        .unwrap();
    wait_for_text(&ops, "DataMemory in use, the last hour").await;
    ops.find(Locator::Css("a[href^='/admin/datanodes/']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let page = wait_for_text(&ops, "Memory against DataMemory").await;
    assert!(
        page.contains("Read and write units per second") && page.contains(&node.resp_addr),
        "{page}"
    );
    let started = Instant::now();
    while ops.find(Locator::Css(".chart svg polyline")).await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(150),
            "no chart of the node"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        ops.refresh().await.unwrap();
    }
    shot(&ops, "operator-datanode").await;
    ops.set_window_size(390, 844).await.unwrap();
    shot(&ops, "operator-datanode-phone").await;
    ops.goto(&console).await.unwrap();
    wait_for_text(&ops, "analytical").await;
    shot(&ops, "operator-tenants-phone").await;

    ada.close().await.unwrap();
    ops.close().await.unwrap();
}

/// How many rows the data browser's table shows.
async fn rows_shown(browser: &Client) -> usize {
    browser
        .find_all(Locator::Css("#rows tbody tr"))
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn in_a_browser_a_tenant_inserts_sees_edits_and_deletes_rows() {
    let cp = Control::start_with(Backend::Sqlite, &["--cluster-secret", SECRET]);
    let disk = tempfile::tempdir().unwrap();
    let _node = cp.data_node(disk.path(), &[]);
    let console = cp.shoal.control_url.clone();
    let driver = driver().await;
    let ada = browser(&driver).await;
    sign_up(&ada, &console, "analytical", "ada@example.com").await;
    create_database(&ada, &console, "shop").await;
    fill(&ada, "table_name", "orders").await;
    // The table editor: types from a list, their length, precision and
    // scale beside it; the key and an index ticked on the columns. A
    // length that is no number is refused, what was typed kept.
    for (i, (name, ty, len, scale)) in [
        ("id", "BIGINT", "", ""),
        ("note", "VARCHAR", "sixty", ""),
        ("price", "DECIMAL", "12", "2"),
    ]
    .into_iter()
    .enumerate()
    {
        fill(&ada, &format!("col{i}_name"), name).await;
        choose(&ada, &format!("col{i}_type"), ty).await;
        fill(&ada, &format!("col{i}_len"), len).await;
        fill(&ada, &format!("col{i}_scale"), scale).await;
    }
    for tickbox in ["col0_key", "col1_nullable", "col2_nullable", "col2_index"] {
        tick(&ada, tickbox).await;
    }
    submit(&ada, "#new-table").await;
    wait_for_text(&ada, "'sixty' is not a whole number").await;
    fill(&ada, "col1_len", "60").await;
    submit(&ada, "#new-table").await;
    wait_for_text(&ada, "Table orders").await;
    wait_for_text(&ada, "No rows yet").await;
    // Its definition as SQL and as the API's JSON.
    let source = ada.source().await.unwrap();
    assert!(
        source.contains("`note` varchar(60)")
            && source.contains("`price` decimal(12,2)")
            && source.contains("PRIMARY KEY (`id`)")
            && source.contains("KEY `by_price` (`price`)"),
        "{source}"
    );
    assert!(source.contains("\"primary_key\": ["), "{source}");

    // The table's name on the database page leads to its rows.
    ada.goto(&format!("{console}/databases/shop"))
        .await
        .unwrap();
    ada.find(Locator::Css(
        "#tables a[href='/databases/shop/tables/orders']",
    ))
    .await
    .unwrap()
    .click()
    .await
    .unwrap();
    wait_for_text(&ada, "No rows yet").await;

    // Rows inserted through the form, out of key order, come back in it;
    // markup in a value is shown as text, never run.
    let script = "<script>document.title='owned'</script>";
    let insert = async |id: &str, note: Option<&str>, price: Option<&str>| {
        fill(&ada, "c.id", id).await;
        match note {
            Some(note) => fill(&ada, "c.note", note).await,
            None => {
                let null = ada.find(Locator::Css("input[name='null.note']")).await;
                null.unwrap().click().await.unwrap();
            }
        }
        match price {
            Some(price) => fill(&ada, "c.price", price).await,
            None => {
                let null = ada.find(Locator::Css("input[name='null.price']")).await;
                null.unwrap().click().await.unwrap();
            }
        }
        submit(&ada, "#insert-row").await;
    };
    insert("2", Some("<b>bold</b>"), Some("12.50")).await;
    wait_for_text(&ada, "<b>bold</b>").await;
    insert("3", Some(script), None).await;
    wait_for_text(&ada, script).await;
    insert("1", None, Some("0.99")).await;
    wait_for_text(&ada, "0.99").await;
    assert_eq!(rows_shown(&ada).await, 3);
    let first_cells = text_of(&ada, "#rows tbody tr").await;
    assert!(first_cells.starts_with("1 NULL 0.99"), "{first_cells:?}");
    assert_ne!(ada.title().await.unwrap(), "owned");
    let source = ada.source().await.unwrap();
    assert!(
        source.contains("&lt;script&gt;") && !source.contains(script),
        "escaped"
    );
    shot(&ada, "data-browser").await;
    // On a phone's width the page still reads: the rows table scrolls on
    // its own, the forms take the width.
    ada.set_window_size(390, 844).await.unwrap();
    ada.refresh().await.unwrap();
    wait_for_text(&ada, "Insert a row").await;
    shot(&ada, "data-browser-phone").await;
    ada.set_window_size(1280, 900).await.unwrap();

    // Values the column cannot hold: the data node's reason on the page,
    // what was typed kept, nothing written.
    let too_long = "x".repeat(61);
    for (id, note, problem) in [
        ("abc", "x", "id"),
        ("4", too_long.as_str(), "longer than VARCHAR(60)"),
        ("2", "again", "already exists"),
    ] {
        fill(&ada, "c.id", id).await;
        fill(&ada, "c.note", note).await;
        fill(&ada, "c.price", "1").await;
        submit(&ada, "#insert-row").await;
        let page = wait_for_text(&ada, problem).await;
        assert!(page.contains(problem), "{page}");
        let kept = ada
            .find(Locator::Css("input[name='c.note']"))
            .await
            .unwrap();
        assert_eq!(kept.prop("value").await.unwrap().as_deref(), Some(note));
        assert_eq!(rows_shown(&ada).await, 3, "nothing written for {id}");
    }

    // Edit a row: its page, then the table, show the new value.
    ada.goto(&format!(
        "{console}/databases/shop/tables/orders/row?k.id=3"
    ))
    .await
    .unwrap();
    wait_for_text(&ada, "A row of orders").await;
    fill(&ada, "c.note", "edited").await;
    // Typing a price unticks its NULL box.
    fill(&ada, "c.price", "7.25").await;
    submit(&ada, "#edit-row").await;
    wait_for_text(&ada, "A row of orders").await;
    ada.goto(&format!("{console}/databases/shop/tables/orders"))
        .await
        .unwrap();
    let table = wait_for_text(&ada, "edited").await;
    assert!(table.contains("3 edited 7.25"), "{table}");
    assert!(!table.contains(script), "{table}");

    // Delete one, after the confirmation page.
    ada.find(Locator::Css("#rows a[href$='/row/delete?k.id=1']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(&ada, "Delete the row of orders with id = 1?").await;
    submit(&ada, "main form").await;
    wait_for_text(&ada, "edited").await;
    assert_eq!(rows_shown(&ada).await, 2);
    ada.goto(&format!(
        "{console}/databases/shop/tables/orders/row?k.id=1"
    ))
    .await
    .unwrap();
    wait_for_text(&ada, "No such row").await;

    // The connect page makes a key for the database and fills it into its
    // lines, which work as they are, run as the user would run them.
    ada.goto(&format!("{console}/databases/shop/tables/orders"))
        .await
        .unwrap();
    insert("1", Some("hello"), Some("1.00")).await;
    wait_for_text(&ada, "hello").await;
    ada.goto(&format!("{console}/databases/shop"))
        .await
        .unwrap();
    ada.find(Locator::Css("#connect-link"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let page = wait_for_text(&ada, "Connect to shop").await;
    assert!(page.contains("<your key>"), "{page}");
    submit(&ada, "#connect-key").await;
    wait_for_text(&ada, "shown once").await;
    let key = text_of(&ada, "#new-key").await;
    shot(&ada, "connect").await;
    let run = |line: String| {
        let out = Command::new("sh").arg("-c").arg(&line).output().unwrap();
        assert!(out.status.success(), "{line}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let curl = text_of(&ada, "#snippet-curl").await;
    assert!(curl.contains(&key), "{curl}");
    let read: serde_json::Value = serde_json::from_str(&run(curl)).unwrap();
    assert_eq!(
        read,
        serde_json::json!({"data": {"note": "hello", "price": 1.00}})
    );
    let redis_cli = text_of(&ada, "#snippet-redis-cli").await;
    assert_eq!(run(redis_cli).trim(), "PONG");
    let mysql = text_of(&ada, "#snippet-mysql").await;
    assert!(mysql.contains(key.split('.').next().unwrap()), "{mysql}");
    let selected = run(mysql);
    assert!(selected.contains("hello"), "{selected}");
    let python = text_of(&ada, "#snippet-redis-py").await;
    let out = Command::new("python3")
        .arg("-c")
        .arg(&python)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "b'hello'",
        "{out:?}"
    );

    // The writes show on the database's units chart once metered.
    let started = Instant::now();
    loop {
        ada.goto(&format!("{console}/databases/shop"))
            .await
            .unwrap();
        let source = ada.source().await.unwrap();
        let units = source
            .split_once("Read and write units per second")
            .map_or("", |(_, after)| after);
        let units = units.split("</figure>").next().unwrap_or_default();
        // A row of its values with writes above zero: `<td>…/s</td>`, twice.
        let wrote = units.split("<tr>").any(|row| {
            let rates: Vec<&str> = row
                .split("<td>")
                .filter_map(|c| c.split("</td>").next()?.strip_suffix("/s"))
                .collect();
            rates.len() == 2 && rates[1] != "0"
        });
        if wrote && units.contains("<polyline") {
            shot(&ada, "database-usage").await;
            break;
        }
        assert!(started.elapsed() < GUARD, "no writes on the chart");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    ada.close().await.unwrap();
}
