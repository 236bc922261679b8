//! The web console over HTTP, as a browser would use it (no JavaScript is
//! needed for these pages): forms, cookies, redirects and what the pages
//! say. Browser-driven tests come with the rest of the console.

mod common;

use std::time::{Duration, Instant};

use common::control::{Backend, Control};
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};

const SECRET: &str = common::control::CLUSTER_SECRET;

/// A browser's cookie jar, kept by hand so the test sees every cookie.
#[derive(Default, Clone)]
struct Jar(Vec<(String, String)>);

impl Jar {
    fn take(&mut self, response: &reqwest::Response) {
        for cookie in response.headers().get_all(SET_COOKIE) {
            let pair = cookie.to_str().unwrap().split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            self.0.retain(|(n, _)| n != name);
            if !value.is_empty() {
                self.0.push((name.to_owned(), value.to_owned()));
            }
        }
    }

    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn get(&self, name: &str) -> String {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }
}

struct Browser {
    http: reqwest::Client,
    base: String,
    jar: Jar,
}

impl Browser {
    fn new(base: &str) -> Browser {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: base.to_owned(),
            jar: Jar::default(),
        }
    }

    async fn get(&mut self, path: &str) -> (StatusCode, String, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header(COOKIE, self.jar.header())
            .send()
            .await
            .unwrap();
        self.jar.take(&r);
        let location = r
            .headers()
            .get(LOCATION)
            .map(|l| l.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (r.status(), location, r.text().await.unwrap())
    }

    async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> (StatusCode, String, String) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header(COOKIE, self.jar.header())
            .form(form)
            .send()
            .await
            .unwrap();
        self.jar.take(&r);
        let location = r
            .headers()
            .get(LOCATION)
            .map(|l| l.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (r.status(), location, r.text().await.unwrap())
    }
}

#[tokio::test]
async fn a_tenant_signs_up_creates_a_database_and_sees_it_and_no_one_elses() {
    let cp = Control::start_with(Backend::Sqlite, &["--cluster-secret", SECRET]);
    let disk = tempfile::tempdir().unwrap();
    let node = cp.data_node(disk.path(), &[]);
    let mut ada = Browser::new(&cp.shoal.control_url);

    // Not signed in: the console sends you to log in.
    let (status, location, _) = ada.get("/").await;
    assert_eq!(
        (status, location.as_str()),
        (StatusCode::SEE_OTHER, "/login")
    );
    let (status, _, login) = ada.get("/login").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        login.contains("<form") && login.contains("name=\"password\""),
        "{login}"
    );

    // Sign-up mistakes are shown next to their field, what was typed kept.
    let (status, _, page) = ada
        .post(
            "/signup",
            &[
                ("tenant_name", "Analytical Engines"),
                ("email", "ada@example.com"),
                ("password", "a long password"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        page.contains("tenant_name: ") && page.contains("value=\"ada@example.com\""),
        "{page}"
    );

    let (status, location, _) = ada
        .post(
            "/signup",
            &[
                ("tenant_name", "analytical"),
                ("email", "ada@example.com"),
                ("password", "a long password"),
            ],
        )
        .await;
    assert_eq!(
        (status, location.as_str()),
        (StatusCode::SEE_OTHER, "/"),
        "signed up and in"
    );
    assert!(!ada.jar.get("shoal_session").is_empty());
    let csrf = ada.jar.get("shoal_csrf");
    let (status, _, dashboard) = ada.get("/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        dashboard.contains("Databases") && dashboard.contains("analytical"),
        "{dashboard}"
    );
    assert!(
        dashboard.contains(&format!("value=\"{csrf}\"")),
        "forms carry the CSRF token"
    );

    // A form without the CSRF token is refused; with it, the database is made.
    let (status, _, _) = ada.post("/databases", &[("name", "shop")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, page) = ada
        .post("/databases", &[("name", "9lives"), ("csrf", &csrf)])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        page.contains("name: ") && page.contains("value=\"9lives\""),
        "{page}"
    );
    let guard = Instant::now();
    loop {
        let (status, location, page) = ada
            .post("/databases", &[("name", "shop"), ("csrf", &csrf)])
            .await;
        if status == StatusCode::SEE_OTHER {
            assert_eq!(location, "/databases/shop");
            break;
        }
        assert!(page.contains("no data node"), "{page}");
        assert!(
            guard.elapsed() < Duration::from_secs(60),
            "the node never registered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, _, page) = ada.get("/databases/shop").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Database shop"), "{page}");
    assert!(
        page.contains(&node.rest_url) && page.contains("href=\"/databases/shop/connect\""),
        "connection help: {page}"
    );
    // Its charts over a range chosen from four; any other is refused.
    for range in ["1h", "24h", "7d", "30d"] {
        let (status, _, page) = ada.get(&format!("/databases/shop?range={range}")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            page.contains(&format!("<strong>{range}</strong>")),
            "{page}"
        );
        assert!(
            page.contains("Memory against the quota")
                && page.contains("Read and write units per second"),
            "{page}"
        );
    }
    let (status, _, _) = ada.get("/databases/shop?range=1y").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, page) = ada.get("/databases/shop/connect").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains("redis-cli -h") && page.contains("--pass '&lt;your key&gt;'"),
        "{page}"
    );
    // A key for the lines: only with the form's token, only a real role.
    let (status, _, _) = ada
        .post("/databases/shop/connect", &[("role", "read")])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, page) = ada
        .post(
            "/databases/shop/connect",
            &[("role", "<b>admin</b>"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(
        page.contains("role=\"alert\"") && !page.contains("<b>admin"),
        "{page}"
    );
    let (status, _, page) = ada
        .post(
            "/databases/shop/connect",
            &[("role", "read"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{page}");
    let at = page.find("id=\"new-key\">").expect("the key is shown") + "id=\"new-key\">".len();
    let made = page[at..].split('<').next().unwrap();
    assert!(page.contains(&format!("--pass '{made}'")), "{page}");
    // And over SQL: the key's prefix and secret, as the mysql client takes them.
    let (made_prefix, made_secret) = made.split_once('.').unwrap();
    assert!(
        page.contains(&format!(
            "-u {made_prefix} -p'{made_secret}' shop -e 'SELECT * FROM "
        )),
        "{page}"
    );
    let (_, _, dashboard) = ada.get("/").await;
    assert!(
        dashboard.contains("href=\"/databases/shop\""),
        "{dashboard}"
    );

    // A key: the secret on the page that made it, only the prefix after.
    let (status, _, page) = ada
        .post(
            "/keys",
            &[
                ("name", "ingest"),
                ("database", "shop"),
                ("role", "read_write"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let secret_at =
        page.find("id=\"new-key\">").expect("the new key is shown") + "id=\"new-key\">".len();
    let key = page[secret_at..].split('<').next().unwrap().to_owned();
    let prefix = key.split('.').next().unwrap().to_owned();
    let (_, _, page) = ada.get("/keys").await;
    assert!(page.contains(&prefix) && !page.contains(&key), "{page}");

    // Her tenant's activity: what was made, by whom, newest first.
    let (status, _, page) = ada.get("/activity").await;
    assert_eq!(status, StatusCode::OK);
    let (key_at, db_at) = (page.find("api_key.create"), page.find("database.create"));
    assert!(
        key_at.is_some() && db_at.is_some() && key_at < db_at,
        "{page}"
    );
    assert!(page.contains("ada@example.com"), "{page}");

    // ndbinfo SQL, over her own databases.
    let (status, _, page) = ada.get("/sql").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("<textarea"), "{page}");
    let query = "SELECT database_name FROM ndbinfo.database_quota_usage";
    let (status, _, page) = ada.post("/sql", &[("sql", query), ("csrf", &csrf)]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("<td>shop</td>"), "{page}");
    let (status, _, page) = ada
        .post("/sql", &[("sql", "DROP TABLE x"), ("csrf", &csrf)])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(page.contains("only a SELECT"), "{page}");
    assert!(page.contains("DROP TABLE x"), "the query is kept: {page}");

    // A table's rows without JavaScript: forms post, pages escape.
    let (status, _, _) = ada
        .post(
            "/databases/shop/tables",
            &[
                ("table_name", "notes"),
                ("col0_name", "id"),
                ("col0_type", "BIGINT"),
                ("col1_name", "body"),
                ("col1_type", "VARCHAR(40)"),
                ("col1_nullable", "1"),
                ("primary_key", "id"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    // A column or table named with markup, a length that is no number:
    // refused, escaped, nothing made.
    for (field, value) in [
        ("col0_name", "<b>id</b>"),
        ("table_name", "<script>x</script>"),
        ("col0_len", "1e3"),
    ] {
        let mut form = vec![
            ("table_name", "evil"),
            ("col0_name", "id"),
            ("col0_type", "VARCHAR"),
            ("col0_len", "10"),
            ("col0_key", "1"),
            ("csrf", csrf.as_str()),
        ];
        form.retain(|(k, _)| *k != field);
        form.push((field, value));
        let (status, _, page) = ada.post("/databases/shop/tables", &form).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}: {page}");
        assert!(page.contains("role=\"alert\""), "{page}");
        assert!(
            !page.contains("<b>id</b>") && !page.contains("<script>x"),
            "{page}"
        );
    }
    let (_, _, page) = ada.get("/databases/shop").await;
    assert!(!page.contains("evil"), "{page}");
    // Defaults, a unique index and one on two columns, from the editor;
    // an index line that does not read is refused, with what was typed kept.
    let mut jobs = vec![
        ("table_name", "jobs"),
        ("col0_name", "id"),
        ("col0_type", "BIGINT"),
        ("col0_key", "1"),
        ("col1_name", "state"),
        ("col1_type", "VARCHAR"),
        ("col1_len", "10"),
        ("col1_default", "it's new"),
        ("col2_name", "tries"),
        ("col2_type", "INT"),
        ("col2_default", "0"),
        ("col3_name", "slot"),
        ("col3_type", "INT"),
        ("col3_nullable", "1"),
        ("col3_unique", "1"),
        ("csrf", csrf.as_str()),
    ];
    let bad = [("more_indexes", "<b>by_two</b> state, tries")];
    let (status, _, page) = ada
        .post("/databases/shop/tables", &[&jobs[..], &bad[..]].concat())
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(
        page.contains("is not like") && !page.contains("<b>by_two"),
        "{page}"
    );
    assert!(
        page.contains("&lt;b&gt;by_two&lt;/b&gt; state, tries"),
        "kept: {page}"
    );
    jobs.push(("more_indexes", "by_state_tries (state, tries)"));
    let (status, location, page) = ada.post("/databases/shop/tables", &jobs).await;
    assert_eq!(
        (status, location.as_str()),
        (StatusCode::SEE_OTHER, "/databases/shop/tables/jobs"),
        "{page}"
    );
    let (_, _, page) = ada.get("/databases/shop/tables/jobs").await;
    for shown in [
        "`state` varchar(10) NOT NULL DEFAULT 'it\\'s new'",
        "`tries` int NOT NULL DEFAULT '0'",
        "UNIQUE KEY `by_slot` (`slot`)",
        "KEY `by_state_tries` (`state`, `tries`)",
        "empty: it's new",
    ] {
        assert!(page.contains(shown), "{shown}: {page}");
    }
    // A row inserted with those fields empty takes the defaults.
    let row = [
        ("c.id", "1"),
        ("c.state", ""),
        ("c.tries", ""),
        ("null.slot", "1"),
        ("csrf", &csrf),
    ];
    let (status, _, page) = ada.post("/databases/shop/tables/jobs/rows", &row).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{page}");
    let (_, _, page) = ada.get("/databases/shop/tables/jobs/row?k.id=1").await;
    assert!(
        page.contains("value=\"it's new\"") && page.contains("value=\"0\""),
        "{page}"
    );
    let hostile = "\"><img src=x onerror=alert(1)>";
    let (status, location, _) = ada
        .post(
            "/databases/shop/tables/notes/rows",
            &[("c.id", "1"), ("c.body", hostile), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(
        (status, location.as_str()),
        (StatusCode::SEE_OTHER, "/databases/shop/tables/notes")
    );
    let (status, _, page) = ada.get("/databases/shop/tables/notes").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!page.contains(hostile), "escaped: {page}");
    assert!(
        page.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{page}"
    );
    // Refused: no token, a key the column cannot hold, a body too long, a
    // lookup by a hostile key — each with nothing written.
    let (status, _, _) = ada
        .post(
            "/databases/shop/tables/notes/rows",
            &[("c.id", "2"), ("c.body", "x")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let long = "y".repeat(41);
    for (id, body) in [("<script>", "x"), ("3", long.as_str())] {
        let (status, _, page) = ada
            .post(
                "/databases/shop/tables/notes/rows",
                &[("c.id", id), ("c.body", body), ("csrf", &csrf)],
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
        assert!(page.contains("role=\"alert\""), "{page}");
        // The page's own script, and no other.
        assert_eq!(page.matches("<script>").count(), 1, "{page}");
    }
    let (status, _, page) = ada
        .get("/databases/shop/tables/notes/row?k.id=%3Cscript%3E")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(!page.contains("<script>"), "{page}");
    let (_, _, page) = ada.get("/databases/shop/tables/notes").await;
    assert_eq!(page.matches("/row?k.id=").count(), 1, "one row: {page}");

    // A reader: added by the owner, sees every page and no control that
    // writes; what she posts anyway is refused and changes nothing.
    for (email, role) in [
        ("<b>x</b>@example.com", "reader"),
        ("rae@example.com", "owner"),
    ] {
        let form = [
            ("email", email),
            ("password", "rae's password"),
            ("role", role),
            ("csrf", &csrf),
        ];
        let (status, _, page) = ada.post("/members", &form).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
        assert!(
            page.contains("role=\"alert\"") && !page.contains("<b>x</b>"),
            "{page}"
        );
    }
    let form = [
        ("email", "rae@example.com"),
        ("password", "rae's password"),
        ("role", "reader"),
        ("csrf", &csrf),
    ];
    let (status, location, _) = ada.post("/members", &form).await;
    assert_eq!(
        (status, location.as_str()),
        (StatusCode::SEE_OTHER, "/members")
    );
    let (_, _, members) = ada.get("/members").await;
    assert!(
        members.contains("rae@example.com") && members.contains("Make member"),
        "{members}"
    );
    let mut rae = Browser::new(&cp.shoal.control_url);
    let login = [("email", "rae@example.com"), ("password", "rae's password")];
    let (status, _, _) = rae.post("/login", &login).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let rae_csrf = rae.jar.get("shoal_csrf");
    for (path, seen, unseen) in [
        ("/", "href=\"/databases/shop\"", "action=\"/databases\""),
        (
            "/databases/shop",
            "href=\"/databases/shop/tables/notes\"",
            "id=\"new-table\"",
        ),
        ("/databases/shop", "Memory against the quota", "/drop\""),
        (
            "/databases/shop/tables/notes",
            "&lt;img src=x",
            "id=\"insert-row\"",
        ),
        ("/databases/shop/tables/notes", ">View<", ">Edit<"),
        (
            "/databases/shop/tables/notes/row?k.id=1",
            "id=\"row-values\"",
            "id=\"edit-row\"",
        ),
        ("/keys", "ingest", "action=\"/keys\""),
        (
            "/databases/shop/connect",
            "redis-cli -h",
            "id=\"connect-key\"",
        ),
        ("/members", "rae@example.com", "id=\"new-member\""),
    ] {
        let (status, _, page) = rae.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(
            page.contains(seen) && !page.contains(unseen),
            "{path}: {page}"
        );
    }
    for (path, form) in [
        ("/databases", vec![("name", "mine")]),
        (
            "/databases/shop/tables/notes/rows",
            vec![("c.id", "7"), ("c.body", "x")],
        ),
        ("/databases/shop/tables/notes/row/delete?k.id=1", vec![]),
        ("/databases/shop/connect", vec![("role", "read")]),
        (
            "/keys",
            vec![("name", "mine"), ("database", "shop"), ("role", "read")],
        ),
    ] {
        let mut form = form;
        form.push(("csrf", &rae_csrf));
        let (status, _, page) = rae.post(path, &form).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {page}");
        assert!(page.contains("a reader changes nothing"), "{path}: {page}");
    }
    let (_, _, page) = ada.get("/databases/shop/tables/notes").await;
    assert_eq!(
        page.matches("/row?k.id=").count(),
        1,
        "still one row: {page}"
    );
    // Made a member, she sees the forms again.
    let rae_id = members
        .split("/members/")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let (status, location, _) = ada
        .post(
            &format!("/members/{rae_id}/role"),
            &[("role", "member"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(
        (status, location.as_str()),
        (StatusCode::SEE_OTHER, "/members")
    );
    let (_, _, page) = rae.get("/databases/shop/tables/notes").await;
    assert!(page.contains("id=\"insert-row\""), "{page}");

    // Another tenant sees none of it.
    let mut bob = Browser::new(&cp.shoal.control_url);
    let (status, _, _) = bob
        .post(
            "/signup",
            &[
                ("tenant_name", "builders"),
                ("email", "bob@example.com"),
                ("password", "bob's password"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (status, _, page) = bob.get("/databases/shop").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!page.contains(&node.rest_url));
    let (_, _, dashboard) = bob.get("/").await;
    assert!(!dashboard.contains("shop"), "{dashboard}");
    let (_, _, page) = bob.get("/activity").await;
    assert!(
        !page.contains("database.create") && !page.contains("ada@"),
        "{page}"
    );
    let (status, _, page) = bob.get("/databases/shop/tables/notes").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!page.contains("onerror"), "{page}");
    let (_, _, keys) = bob.get("/keys").await;
    assert!(
        !keys.contains(&prefix) && !keys.contains("ingest"),
        "{keys}"
    );
    let bob_csrf = bob.jar.get("shoal_csrf");
    let (_, _, page) = bob
        .post(
            "/sql",
            &[
                (
                    "sql",
                    "SELECT database_name FROM ndbinfo.database_quota_usage",
                ),
                ("csrf", &bob_csrf),
            ],
        )
        .await;
    assert!(!page.contains("<td>shop</td>"), "{page}");

    // Wrong password: said plainly; logout ends the session.
    let mut eve = Browser::new(&cp.shoal.control_url);
    let (status, _, page) = eve
        .post(
            "/login",
            &[("email", "ada@example.com"), ("password", "guess")],
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(page.contains("Wrong email or password."));
    let old = ada.jar.clone();
    let (status, location, _) = ada.post("/logout", &[("csrf", &csrf)]).await;
    assert_eq!(
        (status, location.as_str()),
        (StatusCode::SEE_OTHER, "/login")
    );
    assert!(
        ada.jar.get("shoal_session").is_empty(),
        "the cookie is cleared"
    );
    ada.jar = old;
    let (status, location, _) = ada.get("/").await;
    assert_eq!(
        (status, location.as_str()),
        (StatusCode::SEE_OTHER, "/login"),
        "the old session is over"
    );
    let (status, location, _) = ada
        .post(
            "/login",
            &[
                ("email", "ada@example.com"),
                ("password", "a long password"),
            ],
        )
        .await;
    assert_eq!((status, location.as_str()), (StatusCode::SEE_OTHER, "/"));
    let (status, _, css) = ada.get("/assets/console.css").await;
    assert_eq!(status, StatusCode::OK);
    assert!(css.contains(".bar"));
}
