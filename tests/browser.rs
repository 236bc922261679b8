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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn driver() -> Driver {
    let port = free_port();
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

async fn submit(browser: &Client, form: &str) {
    browser
        .find(Locator::Css(&format!("{form} button[type='submit']")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

async fn sign_up(browser: &Client, console: &str, tenant: &str, email: &str) {
    browser.goto(&format!("{console}/signup")).await.unwrap();
    fill(browser, "tenant_name", tenant).await;
    fill(browser, "email", email).await;
    fill(browser, "password", "a long password").await;
    submit(browser, "form[action='/signup']").await;
    wait_for_text(browser, "Databases").await;
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
    sign_up(&ada, &console, "analytical", "ada@example.com").await;

    // Create a database from the form: until the node has registered the
    // console says so next to the field, and the form can be sent again.
    let started = Instant::now();
    loop {
        fill(&ada, "name", "shop").await;
        submit(&ada, "form[action='/databases']").await;
        let body = wait_for_any(&ada, &["Database shop", "no data node"]).await;
        if body.contains("Database shop") {
            break;
        }
        assert!(body.contains("no data node"), "{body}");
        assert!(started.elapsed() < GUARD, "the node never registered");
        ada.goto(&console).await.unwrap();
    }
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
